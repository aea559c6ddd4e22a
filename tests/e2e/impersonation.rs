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
    let provider = &clusters().provider;
    let kubeconfig = kube::config::Kubeconfig::read_from(&provider.kubeconfig).unwrap();
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .unwrap();
    let client = kube::Client::try_from(config.clone()).unwrap();
    Proxy {
        upstream: Arc::new(bindery::upstream::ProviderUpstream::new(&config).unwrap()),
        tokens: Arc::new(ContinueTokens::random()),
        namespaces: NamespaceProvisioner::new(client.clone()),
        shutdown: tokio::sync::watch::channel(false).1,
        access: Some(Access::new(client)),
        quota: bindery::quota::QuotaAdmission::new(Default::default()),
        fairness: bindery::fairness::Fairness::new(Default::default()),
    }
}

/// A consumer view of one binding.
fn view(bound: BoundResource) -> ConsumerView {
    let spec = serde_json::from_value(json!({"group": GROUP,
        "names": {"plural": "guards", "kind": "Guard"}, "scope": "Namespaced",
        "versions": [{"name": "v1", "served": true, "storage": true}]}))
    .unwrap();
    ConsumerView {
        consumer: bound.consumer.clone(),
        cluster_namespace: bound.namespaces.cluster_namespace().to_string(),
        resources: vec![ServedResource {
            bound,
            spec: Arc::new(spec),
            caps: bindery::quota::caps::Caps::DEFAULT,
            export_resources: vec![(GROUP.to_string(), "guards".to_string())].into(),
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

/// One request through `proxy` for `view`: its status and body.
async fn call(
    proxy: &Proxy,
    view: &ConsumerView,
    method: &str,
    name: Option<&str>,
    body: Option<Value>,
) -> (u16, String) {
    let mut path = format!("/apis/{GROUP}/v1/namespaces/shared/guards");
    if let Some(name) = name {
        path = format!("{path}/{name}");
    }
    // A refusal waits for RBAC until the request's deadline: a short one.
    path.push_str("?timeout=3s");
    let content_type = if method == "PATCH" {
        "application/merge-patch+json"
    } else {
        "application/json"
    };
    let bytes = body
        .map(|b| serde_json::to_vec(&b).unwrap())
        .unwrap_or_default();
    let request = http::Request::builder()
        .method(method)
        .uri(&path)
        .header("content-type", content_type)
        .body(Bytes::from(bytes))
        .unwrap();
    let resource = ResourceRequest {
        group: GROUP.into(),
        version: "v1".into(),
        namespace: Some("shared".into()),
        resource: "guards".into(),
        name: name.map(str::to_string),
        subresource: None,
        watch_prefix: false,
    };
    let (parts, body) = request.into_parts();
    let response = proxy.serve(view, resource, parts, body).await;
    let status = response.status().as_u16();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    (status, String::from_utf8_lossy(&body).into_owned())
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
