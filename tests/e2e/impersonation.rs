//! The provider's RBAC and admission hold what a consumer's requests can
//! do, behind bindery's translation: bindery makes a consumer's gets and
//! writes as the consumer's own provider-side account, so a translation
//! bug (injected here by giving the proxy a tampered binding) is stopped by
//! the provider, and answered with a 403 that names nothing of it.

use crate::bindery::{Consumer, bindery};
use crate::fixture::clusters;
use bindery::catalog::{ConsumerView, ServedResource};
use bindery::proxy::Proxy;
use bindery::proxy::access::Access;
use bindery::proxy::namespaces::NamespaceProvisioner;
use bindery::route::{ConsumerId, ResourceRequest};
use bindery::translate::continue_token::ContinueTokens;
use bindery::translate::{BoundResource, IdentityHash, Isolation, NamespaceMap};
use bytes::Bytes;
use http_body_util::BodyExt;
use serde_json::{Value, json};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

const GROUP: &str = "guard.bindery.dev";
const CRD: &str = "guards.guard.bindery.dev";
/// A cluster-scoped resource of the same group, which no consumer here is
/// granted.
const CLUSTER_CRD: &str = "clusterguards.guard.bindery.dev";

fn install_crd() {
    static DONE: OnceLock<()> = OnceLock::new();
    DONE.get_or_init(|| {
        let crd = json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": CRD},
            "spec": {"group": GROUP, "scope": "Namespaced",
                "names": {"plural": "guards", "singular": "guard", "kind": "Guard"},
                "versions": [{"name": "v1", "served": true, "storage": true,
                    "schema": {"openAPIV3Schema": {"type": "object",
                        "x-kubernetes-preserve-unknown-fields": true}}}]}
        });
        clusters().provider.install_crd(&crd);
        let cluster_scoped = json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": CLUSTER_CRD},
            "spec": {"group": GROUP, "scope": "Cluster",
                "names": {"plural": "clusterguards", "singular": "clusterguard",
                    "kind": "ClusterGuard"},
                "versions": [{"name": "v1", "served": true, "storage": true,
                    "schema": {"openAPIV3Schema": {"type": "object",
                        "x-kubernetes-preserve-unknown-fields": true}}}]}
        });
        clusters().provider.install_crd(&cluster_scoped);
    });
}

fn consumer(id: &str) -> Consumer {
    install_crd();
    bindery().consumer(id, CRD, "guards")
}

/// The identity hash of `consumer`'s export, from the provider.
fn identity(consumer: &Consumer) -> IdentityHash {
    let hash = clusters().provider.kubectl(&[
        "-n",
        &consumer.cluster_namespace,
        "get",
        "apiserviceexport",
        "guards",
        "-o",
        "jsonpath={.status.identityHash}",
    ]);
    IdentityHash::parse(&hash).unwrap_or_else(|| panic!("an identity hash: {hash:?}"))
}

/// A proxy of this test's own, reaching the provider as bindery does, with
/// impersonation on.
async fn proxy() -> Proxy {
    proxy_with(false).await
}

/// [`proxy`], with bindery's shared watch cache in front of the provider
/// when `cached`.
async fn proxy_with(cached: bool) -> Proxy {
    let provider = &clusters().provider;
    let kubeconfig = kube::config::Kubeconfig::read_from(&provider.kubeconfig).unwrap();
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .unwrap();
    let client = kube::Client::try_from(config.clone()).unwrap();
    let direct: Arc<dyn bindery::upstream::Upstream> =
        Arc::new(bindery::upstream::ProviderUpstream::new(&config).unwrap());
    let shutdown = tokio::sync::watch::channel(false).1;
    let upstream = if cached {
        Arc::new(bindery::cache::CachedUpstream::new(
            direct,
            client.clone(),
            shutdown.clone(),
        ))
    } else {
        direct
    };
    Proxy {
        upstream,
        tokens: Arc::new(ContinueTokens::random()),
        namespaces: NamespaceProvisioner::new(client.clone()),
        shutdown,
        access: Some(Access::new(client)),
        quota: bindery::quota::QuotaAdmission::new(Default::default()),
        fairness: bindery::fairness::Fairness::new(Default::default()),
    }
}

/// A consumer view of one binding.
fn view(bound: BoundResource) -> ConsumerView {
    let (scope, kind) = match bound.namespaced {
        true => ("Namespaced", "Guard"),
        false => ("Cluster", "ClusterGuard"),
    };
    let spec = serde_json::from_value(json!({"group": GROUP,
        "names": {"plural": bound.resource, "kind": kind}, "scope": scope,
        "versions": [{"name": "v1", "served": true, "storage": true}]}))
    .unwrap();
    let export_resources = vec![(GROUP.to_string(), bound.resource.clone())].into();
    ConsumerView {
        consumer: bound.consumer.clone(),
        cluster_namespace: bound.namespaces.cluster_namespace().to_string(),
        resources: vec![ServedResource {
            bound,
            spec: Arc::new(spec),
            caps: bindery::quota::caps::Caps::DEFAULT,
            export_resources,
        }],
    }
}

fn binding(
    consumer: &str,
    cluster_namespace: &str,
    identity: IdentityHash,
    map: &[(&str, &str)],
) -> BoundResource {
    let mut namespaces = NamespaceMap::new(cluster_namespace);
    for (consumer_ns, provider_ns) in map {
        namespaces.insert(*consumer_ns, *provider_ns);
    }
    BoundResource {
        consumer: ConsumerId::parse(consumer).unwrap(),
        group: GROUP.into(),
        resource: "guards".into(),
        kind: "Guard".into(),
        namespaced: true,
        isolation: Isolation::Prefixed,
        export: "guards".into(),
        identity,
        has_status: false,
        has_scale: false,
        namespaces,
        provider_kinds: Default::default(),
        in_workspace: false,
    }
}

/// One request through `proxy` for `view`, in namespace `shared`: its
/// status and body.
async fn call(
    proxy: &Proxy,
    view: &ConsumerView,
    method: &str,
    name: Option<&str>,
    body: Option<Value>,
) -> (u16, String) {
    let asked = Asked {
        method,
        namespace: Some("shared"),
        name,
        query: "",
        accept: "application/json",
    };
    send(proxy, view, &asked, body).await
}

/// A request a consumer makes, as bindery's router hands it to the proxy.
struct Asked<'a> {
    method: &'a str,
    namespace: Option<&'a str>,
    name: Option<&'a str>,
    /// More of the query than the short `timeout`, each part `&`-led.
    query: &'a str,
    accept: &'a str,
}

/// `asked` through `proxy` for `view`: its status and body (a watch's
/// first events, or none within seconds).
async fn send(
    proxy: &Proxy,
    view: &ConsumerView,
    asked: &Asked<'_>,
    body: Option<Value>,
) -> (u16, String) {
    let resource = view.resources[0].bound.resource.clone();
    let mut path = match asked.namespace {
        Some(namespace) => format!("/apis/{GROUP}/v1/namespaces/{namespace}/{resource}"),
        None => format!("/apis/{GROUP}/v1/{resource}"),
    };
    if let Some(name) = asked.name {
        path = format!("{path}/{name}");
    }
    // A refusal waits for RBAC until the request's deadline: a short one.
    path.push_str("?timeout=3s");
    path.push_str(asked.query);
    let content_type = if asked.method == "PATCH" {
        "application/merge-patch+json"
    } else {
        "application/json"
    };
    let bytes = body
        .map(|b| serde_json::to_vec(&b).unwrap())
        .unwrap_or_default();
    let request = http::Request::builder()
        .method(asked.method)
        .uri(&path)
        .header("content-type", content_type)
        .header("accept", asked.accept)
        .body(Bytes::from(bytes))
        .unwrap();
    let resource = ResourceRequest {
        group: GROUP.into(),
        version: "v1".into(),
        namespace: asked.namespace.map(str::to_string),
        resource,
        name: asked.name.map(str::to_string),
        subresource: None,
        watch_prefix: false,
    };
    let (parts, body) = request.into_parts();
    let resolved = bindery::resolved::Resolved::of(&parts.method, &parts.uri);
    assert_eq!(resolved.resource(), Some(&resource));
    let response = proxy.serve(view, &resolved, parts, body).await;
    let status = response.status().as_u16();
    let mut body = response.into_body();
    // A watch never ends by itself: what came in its first seconds.
    let mut read = Vec::new();
    let until = tokio::time::Instant::now() + Duration::from_secs(3);
    while let Ok(Some(Ok(frame))) = tokio::time::timeout_at(until, body.frame()).await {
        if let Ok(data) = frame.into_data() {
            read.extend_from_slice(&data);
        }
    }
    (status, String::from_utf8_lossy(&read).into_owned())
}

fn guard(name: &str, value: &str) -> Value {
    json!({"apiVersion": format!("{GROUP}/v1"), "kind": "Guard",
        "metadata": {"name": name}, "spec": {"value": value}})
}

/// The victim's object as the provider has it.
fn stored(victim: &Consumer, name: &str) -> Value {
    let listed = clusters().provider.kubectl(&[
        "-n",
        &format!("{}-shared", victim.cluster_namespace),
        "get",
        CRD,
        name,
        "-o",
        "json",
    ]);
    serde_json::from_str(&listed).unwrap()
}

/// The injected bug: the attacker's namespace `shared` maps to the
/// victim's provider namespace. Every verb is refused by the provider's
/// RBAC (the attacker's account has no role there), the 403 names nothing
/// of the provider, and the victim's object is untouched.
#[tokio::test]
async fn a_namespace_mapped_to_another_consumers_is_refused_by_the_provider() {
    let victim = consumer("imp-victim");
    let attacker = consumer("imp-attacker");
    let victim_api = victim.client().await;
    let created = victim_api
        .request::<Value>(
            http::Request::post(format!("/apis/{GROUP}/v1/namespaces/shared/guards"))
                .header("content-type", "application/json")
                .body(serde_json::to_vec(&guard("theirs", "kept")).unwrap())
                .unwrap(),
        )
        .await
        .expect("the victim creates its object");
    assert_eq!(created["metadata"]["namespace"], "shared");

    let victim_provider_ns = format!("{}-shared", victim.cluster_namespace);
    let tampered = binding(
        "imp-attacker",
        &attacker.cluster_namespace,
        identity(&attacker),
        &[("shared", &victim_provider_ns)],
    );
    let proxy = proxy().await;
    let view = view(tampered);
    for (method, name, body) in [
        ("GET", Some("theirs"), None),
        ("PUT", Some("theirs"), Some(guard("theirs", "overwritten"))),
        (
            "PATCH",
            Some("theirs"),
            Some(json!({"spec": {"value": "patched"}})),
        ),
        ("DELETE", Some("theirs"), None),
        ("POST", None, Some(guard("planted", "x"))),
    ] {
        let (status, body) = call(&proxy, &view, method, name, body).await;
        assert_eq!(status, 403, "{method}: {body}");
        assert!(
            !body.contains("kube-bind"),
            "{method} names the provider: {body}"
        );
        assert!(!body.contains("bindery-consumer"), "{method}: {body}");
    }
    let object = stored(&victim, "theirs");
    assert_eq!(object["spec"]["value"], "kept", "{object}");
    let planted = clusters()
        .provider
        .kubectl_output(&["-n", &victim_provider_ns, "get", CRD, "planted"], None);
    assert!(
        !planted.status.success(),
        "nothing planted in the victim's namespace"
    );
}

/// The injected bug: the attacker's writes are stamped with the victim's
/// identity in the attacker's own namespace. The provider's admission
/// policy refuses them: the labels are not the writer's.
#[tokio::test]
async fn the_providers_admission_refuses_a_write_with_anothers_identity() {
    let victim = consumer("imp-victim2");
    let attacker = consumer("imp-attacker2");
    // Provisioned by a write of the attacker's own.
    let attacker_api = attacker.client().await;
    attacker_api
        .request::<Value>(
            http::Request::post(format!("/apis/{GROUP}/v1/namespaces/shared/guards"))
                .header("content-type", "application/json")
                .body(serde_json::to_vec(&guard("own", "x")).unwrap())
                .unwrap(),
        )
        .await
        .expect("the attacker writes its own object");
    let attacker_provider_ns = format!("{}-shared", attacker.cluster_namespace);
    // Stamps the victim's consumer and export labels, while the request is
    // made as the attacker's account.
    let mut tampered = binding(
        "imp-victim2",
        &attacker.cluster_namespace,
        identity(&victim),
        &[("shared", &attacker_provider_ns)],
    );
    tampered.consumer = ConsumerId::parse("imp-victim2").unwrap();
    let proxy = proxy().await;
    let (status, body) = call(
        &proxy,
        &view(tampered),
        "POST",
        None,
        Some(guard("forged", "x")),
    )
    .await;
    assert_eq!(status, 403, "{body}");
    assert!(!body.contains("kube-bind"), "{body}");
    let forged = clusters()
        .provider
        .kubectl_output(&["-n", &attacker_provider_ns, "get", CRD, "forged"], None);
    assert!(!forged.status.success(), "the forged object was not stored");
}

/// The policy itself, asked directly as a consumer's account: a write whose
/// labels are its own identity is taken, any other refused.
#[tokio::test]
async fn the_admission_policy_holds_writes_made_as_a_consumer() {
    let consumer = consumer("imp-policy");
    let hash = identity(&consumer);
    let client = consumer.client().await;
    // Provisions the consumer's namespace (and so its RoleBinding).
    client
        .request::<Value>(
            http::Request::post(format!("/apis/{GROUP}/v1/namespaces/shared/guards"))
                .header("content-type", "application/json")
                .body(serde_json::to_vec(&guard("first", "x")).unwrap())
                .unwrap(),
        )
        .await
        .unwrap();
    let provider_ns = format!("{}-shared", consumer.cluster_namespace);
    let account = format!(
        "system:serviceaccount:{}:bindery-consumer",
        consumer.cluster_namespace
    );
    // As the provider's administrator impersonating the consumer's account,
    // with the export extra bindery sets (kubectl has no flag for extras).
    let provider = &clusters().provider;
    let (cert, key) = provider.pki.admin();
    let write = |name: &str, consumer_label: &str, export_label: &str| {
        let object = json!({"apiVersion": format!("{GROUP}/v1"), "kind": "Guard",
            "metadata": {"name": name, "labels": {
                "bindery.dev/consumer": consumer_label, "bindery.dev/export": export_label}}});
        let output = std::process::Command::new("curl")
            .args(["-s", "-w", "\n%{http_code}", "--cacert"])
            .arg(provider.pki.ca())
            .arg("--cert")
            .arg(&cert)
            .arg("--key")
            .arg(&key)
            .args(["-H", "Content-Type: application/json"])
            .args(["-H", &format!("Impersonate-User: {account}")])
            .args([
                "-H",
                &format!(
                    "Impersonate-Extra-bindery.dev%2fexport: {}",
                    hash.label_value()
                ),
            ])
            .args(["--data-binary", &object.to_string()])
            .arg(format!(
                "{}/apis/{GROUP}/v1/namespaces/{provider_ns}/guards",
                provider.server
            ))
            .output()
            .expect("curl runs");
        let text = String::from_utf8_lossy(&output.stdout).to_string();
        let (body, code) = text.rsplit_once('\n').unwrap_or(("", "0"));
        (code.parse::<u16>().unwrap_or(0), body.to_string())
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let (code, body) = write("own", "imp-policy", hash.label_value());
        if code == 201 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "a write with its own identity is taken: {code} {body}"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    for (name, consumer_label, export_label) in [
        ("other-consumer", "someone-else", hash.label_value()),
        (
            "other-export",
            "imp-policy",
            "0123456789abcdef0123456789abcdef",
        ),
    ] {
        let (code, body) = write(name, consumer_label, export_label);
        assert_eq!(code, 403, "{name}: {body}");
        assert!(body.contains("bindery.dev-identity"), "{name}: {body}");
    }
}

const TABLE: &str = "application/json;as=Table;v=v1;g=meta.k8s.io";
const METADATA: &str = "application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io";
/// A metadata watch's, as client-go's metadata informer asks.
const METADATA_EVENTS: &str = "application/json;as=PartialObjectMetadata;v=v1;g=meta.k8s.io";

/// The victim `victim` with its object `object` in namespace `shared`, and
/// two views of its binding: its own, and the injected bug, the same
/// binding (its identity, its namespace) made as `attacker`'s account.
async fn victim_and_tampered(
    victim: &str,
    attacker: &str,
    object: &str,
) -> (ConsumerView, ConsumerView) {
    let (victim_id, victim) = (victim, consumer(victim));
    let attacker = consumer(attacker);
    victim
        .client()
        .await
        .request::<Value>(
            http::Request::post(format!("/apis/{GROUP}/v1/namespaces/shared/guards"))
                .header("content-type", "application/json")
                .body(serde_json::to_vec(&guard(object, "secret")).unwrap())
                .unwrap(),
        )
        .await
        .expect("the victim creates its object");
    let victim_provider_ns = format!("{}-shared", victim.cluster_namespace);
    let map = [("shared", victim_provider_ns.as_str())];
    let own = view(binding(
        victim_id,
        &victim.cluster_namespace,
        identity(&victim),
        &map,
    ));
    let tampered = view(binding(
        victim_id,
        &attacker.cluster_namespace,
        identity(&victim),
        &map,
    ));
    (own, tampered)
}

/// The injected bug: a binding of the victim's (its identity, its
/// namespace) made as the attacker's account. What the shared watch cache
/// answers without asking the provider (a list at a version, a watch, in
/// every form) is the provider's RBAC's to allow too: the attacker's
/// account may read nothing there, so the cache does not answer, and the
/// provider refuses. The same requests as the victim's own account are
/// answered from the same cache, with the victim's object.
#[tokio::test]
async fn reads_the_shared_cache_answers_are_bounded_by_the_consumers_provider_rbac() {
    let (own, tampered) =
        victim_and_tampered("imp-victim3", "imp-attacker3", "victims-object").await;
    let proxy = proxy_with(true).await;
    let reads = [
        (
            "list at a version",
            "&resourceVersion=0",
            "application/json",
        ),
        ("table", "&resourceVersion=0", TABLE),
        ("metadata list", "&resourceVersion=0", METADATA),
        ("watch", "&watch=1&resourceVersion=0", "application/json"),
        (
            "metadata watch",
            "&watch=1&resourceVersion=0",
            METADATA_EVENTS,
        ),
        ("consistent list", "", "application/json"),
    ];
    let asked = |query, accept| Asked {
        method: "GET",
        namespace: Some("shared"),
        name: None,
        query,
        accept,
    };
    // The victim's own account: answered, with its object.
    for (form, query, accept) in reads {
        // The cache may list before the victim's object reaches it.
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        loop {
            let (status, body) = send(&proxy, &own, &asked(query, accept), None).await;
            assert_eq!(status, 200, "{form} as the victim: {body}");
            if body.contains("victims-object") {
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "{form} as the victim has its object: {body}"
            );
        }
    }
    // The attacker's account: refused, nothing of the victim's.
    for (form, query, accept) in reads {
        let (status, body) = send(&proxy, &tampered, &asked(query, accept), None).await;
        assert_eq!(status, 403, "{form} as the attacker: {body}");
        assert!(!body.contains("victims-object"), "{form}: {body}");
        assert!(
            !body.contains("kube-bind"),
            "{form} names the provider: {body}"
        );
        assert!(!body.contains("bindery-consumer"), "{form}: {body}");
    }
}

/// The injected bug, as above, in a read across namespaces, which goes to
/// the provider as bindery (RBAC cannot grant one consumer its objects of
/// every namespace): each provider namespace of the binding is reviewed
/// for its account, and one the account may not read is closed, so the
/// victim's object reaches the attacker from neither the provider nor the
/// shared cache, in any form. The victim's own account is answered with it.
#[tokio::test]
async fn reads_across_namespaces_show_only_what_the_consumers_account_may_read() {
    let (own, tampered) =
        victim_and_tampered("imp-victim5", "imp-attacker5", "victims-object5").await;
    let reads = [
        ("consistent list", "", "application/json"),
        (
            "list at a version",
            "&resourceVersion=0",
            "application/json",
        ),
        ("table", "", TABLE),
        ("table at a version", "&resourceVersion=0", TABLE),
        ("metadata list", "", METADATA),
        ("watch", "&watch=1&resourceVersion=0", "application/json"),
        (
            "metadata watch",
            "&watch=1&resourceVersion=0",
            METADATA_EVENTS,
        ),
    ];
    let asked = |query, accept| Asked {
        method: "GET",
        namespace: None,
        name: None,
        query,
        accept,
    };
    for cached in [false, true] {
        let proxy = proxy_with(cached).await;
        for (form, query, accept) in reads {
            // The cache may list before the victim's object reaches it.
            let deadline = std::time::Instant::now() + Duration::from_secs(30);
            loop {
                let (status, body) = send(&proxy, &own, &asked(query, accept), None).await;
                assert_eq!(
                    status, 200,
                    "{form} as the victim (cached: {cached}): {body}"
                );
                if body.contains("victims-object5") {
                    break;
                }
                assert!(
                    std::time::Instant::now() < deadline,
                    "{form} as the victim (cached: {cached}) has its object: {body}"
                );
            }
            let (status, body) = send(&proxy, &tampered, &asked(query, accept), None).await;
            assert_eq!(
                status, 200,
                "{form} as the attacker (cached: {cached}): {body}"
            );
            assert!(
                !body.contains("victims-object5"),
                "{form} as the attacker (cached: {cached}): {body}"
            );
            assert!(!body.contains(&own.cluster_namespace), "{form}: {body}");
        }
    }
}

/// The injected bug: a cluster-scoped binding made as an account the
/// provider granted nothing of the resource. Every collection request
/// (list, watch, create, deletecollection) is made as that account, as a
/// named one is, so the provider refuses each.
#[tokio::test]
async fn cluster_scoped_collection_requests_are_made_as_the_consumer() {
    let attacker = consumer("imp-attacker4");
    let mut tampered = binding(
        "imp-attacker4",
        &attacker.cluster_namespace,
        identity(&attacker),
        &[],
    );
    tampered.resource = "clusterguards".into();
    tampered.kind = "ClusterGuard".into();
    tampered.namespaced = false;
    let view = view(tampered);
    let planted = json!({"apiVersion": format!("{GROUP}/v1"), "kind": "ClusterGuard",
        "metadata": {"name": "planted"}});
    // The provider serves the resource once its storage is ready.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while !clusters()
        .provider
        .kubectl_output(&["get", CLUSTER_CRD], None)
        .status
        .success()
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the provider serves {CLUSTER_CRD}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    for cached in [false, true] {
        let proxy = proxy_with(cached).await;
        for (form, method, query, accept, body) in [
            ("list", "GET", "", "application/json", None),
            (
                "list at a version",
                "GET",
                "&resourceVersion=0",
                "application/json",
                None,
            ),
            ("table", "GET", "", TABLE, None),
            ("metadata list", "GET", "", METADATA, None),
            ("watch", "GET", "&watch=1", "application/json", None),
            (
                "create",
                "POST",
                "",
                "application/json",
                Some(planted.clone()),
            ),
            ("deletecollection", "DELETE", "", "application/json", None),
        ] {
            let asked = Asked {
                method,
                namespace: None,
                name: None,
                query,
                accept,
            };
            let (status, body) = send(&proxy, &view, &asked, body).await;
            assert_eq!(status, 403, "{form} (cached: {cached}): {body}");
            assert!(
                !body.contains("kube-bind"),
                "{form} names the provider: {body}"
            );
            assert!(!body.contains("bindery-consumer"), "{form}: {body}");
        }
    }
    let stored = clusters()
        .provider
        .kubectl(&["get", CLUSTER_CRD, "-o", "name"]);
    assert!(!stored.contains("planted"), "nothing created: {stored}");
}
