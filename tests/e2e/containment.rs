//! Containing every consumer (issue 32): what one consumer sends or stores
//! must not crash, blind or slow bindery for the others. Each request here
//! goes to a bindery of its own (serving only), so that a crash shows as
//! that process gone, and is compared with the same request sent to the
//! provider's kube-apiserver serving the CRD directly (the reference).
//!
//! Bodies and objects here are nested as deep as Go's JSON decoder reads
//! (10,000 levels); the test process never parses them (its threads have
//! ordinary stacks), it only looks for what must be in them.

use crate::bindery::{Consumer, ServingOnly, bindery, serving_only};
use crate::fixture::clusters;
use bytes::Bytes;
use http_body_util::BodyExt;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

const GROUP: &str = "containment.bindery.dev";
const CRD: &str = "depths.containment.bindery.dev";
const EXPORT: &str = "depths";

fn install_crd() {
    static DONE: OnceLock<()> = OnceLock::new();
    DONE.get_or_init(|| {
        let crd = serde_json::json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": CRD},
            "spec": {"group": GROUP, "scope": "Namespaced",
                "names": {"plural": "depths", "singular": "depth", "kind": "Depth"},
                "versions": [{"name": "v1", "served": true, "storage": true,
                    "additionalPrinterColumns": [{"name": "Deep", "type": "string",
                        "jsonPath": ".spec.a.a.a"}],
                    "subresources": {"status": {}, "scale": {
                        "specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas"}},
                    "schema": {"openAPIV3Schema": {"type": "object",
                        "x-kubernetes-preserve-unknown-fields": true}}}]}
        });
        let provider = &clusters().provider;
        provider.install_crd(&crd);
    });
}

/// `{"a":{"a":…null…}}`, `levels` objects deep.
fn nested(levels: usize) -> String {
    let mut text = String::with_capacity(levels * 6 + 4);
    for _ in 0..levels {
        text.push_str("{\"a\":");
    }
    text.push_str("null");
    for _ in 0..levels {
        text.push('}');
    }
    text
}

/// An object named `name` whose JSON nests `depth` levels (the object
/// itself is the first), with `extra` metadata fields (`,"k":v`).
fn object(name: &str, depth: usize, extra: &str) -> String {
    format!(
        r#"{{"apiVersion":"{GROUP}/v1","kind":"Depth","metadata":{{"name":"{name}"{extra}}},"spec":{}}}"#,
        nested(depth - 1)
    )
}

/// Where requests go: a client and the path of the resource's collection.
struct Door {
    client: kube::Client,
    collection: String,
}

/// An answer: status, Content-Type, body.
struct Answer {
    status: u16,
    content_type: String,
    body: Bytes,
}

impl Answer {
    fn text(&self) -> String {
        let text = String::from_utf8_lossy(&self.body);
        // A deep body is mostly brackets: its start says enough.
        text.chars().take(600).collect()
    }

    /// The first `"resourceVersion":"…"` of the body (the object's own,
    /// which comes before anything nested).
    fn resource_version(&self) -> String {
        let text = String::from_utf8_lossy(&self.body);
        let start = text
            .find("\"resourceVersion\":\"")
            .unwrap_or_else(|| panic!("no resourceVersion in {}", self.text()))
            + "\"resourceVersion\":\"".len();
        text[start..]
            .split('"')
            .next()
            .unwrap_or_default()
            .to_string()
    }
}

impl Door {
    async fn send(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: impl Into<Vec<u8>>,
    ) -> Answer {
        let mut request = http::Request::builder()
            .method(method)
            .uri(format!("{}{path}", self.collection));
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let request = request
            .body(kube::client::Body::from(body.into()))
            .expect("a valid request");
        let response = tokio::time::timeout(Duration::from_secs(60), self.client.send(request))
            .await
            .unwrap_or_else(|_| panic!("{method} {path}: no answer in 60 s"))
            .unwrap_or_else(|e| panic!("{method} {path}: the connection failed: {e}"));
        let status = response.status().as_u16();
        let content_type = response
            .headers()
            .get(http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string();
        let body = tokio::time::timeout(Duration::from_secs(60), response.into_body().collect())
            .await
            .unwrap_or_else(|_| panic!("{method} {path}: the body did not end in 60 s"))
            .map(|b| b.to_bytes())
            .unwrap_or_else(|e| panic!("{method} {path}: the body broke off: {e}"));
        Answer {
            status,
            content_type,
            body,
        }
    }
}

/// The reference: the provider's kube-apiserver serving the CRD directly,
/// in a namespace of `test`'s own (a Table watch ends at the first object
/// it cannot encode, whoever made it).
async fn reference(test: &str) -> Door {
    install_crd();
    let namespace = format!("containment-reference-{test}");
    let _ = clusters()
        .provider
        .kubectl_output(&["create", "namespace", &namespace], None);
    Door {
        client: clusters().provider.client().await,
        collection: format!("/apis/{GROUP}/v1/namespaces/{namespace}/depths"),
    }
}

/// Consumer `id` with an export of the CRD, reached through `server`, in
/// app namespace `namespace`.
async fn consumer_door(id: &str, server: &ServingOnly, namespace: &str) -> (Consumer, Door) {
    install_crd();
    let consumer = bindery().consumer(id, CRD, EXPORT);
    let door = Door {
        client: client_at(&consumer, &server.url).await,
        collection: format!("/apis/{GROUP}/v1/namespaces/{namespace}/depths"),
    };
    (consumer, door)
}

/// A client of `consumer` that reaches the bindery at `url`.
async fn client_at(consumer: &Consumer, url: &str) -> kube::Client {
    let text = std::fs::read_to_string(&consumer.kubeconfig).expect("the consumer's kubeconfig");
    let moved = text.replace(&bindery().url, url);
    assert_ne!(moved, text, "the kubeconfig names the shared bindery");
    let kubeconfig = kube::config::Kubeconfig::from_yaml(&moved).expect("a kubeconfig");
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .expect("a consumer config");
    kube::Client::try_from(config).expect("a consumer client")
}

const JSON: (&str, &str) = ("content-type", "application/json");

/// One request of a sequence: method, path after the collection, headers,
/// body.
type Step<'a> = (&'a str, String, Vec<(&'a str, &'a str)>, String);

/// Every write verb with a body nested `depth` levels, on object `name`.
/// Each step is sent to bindery and to the reference; their statuses must
/// be the same, and bindery must never answer 5xx nor go away.
async fn every_write_verb(
    depth: usize,
    name: &str,
    doors: (&Door, &Door),
    server: &mut ServingOnly,
) {
    let (bindery_door, reference) = doors;
    let body = object(name, depth, "");
    let named = format!("/{name}");
    let merge = ("content-type", "application/merge-patch+json");
    let json_patch = ("content-type", "application/json-patch+json");
    let apply = ("content-type", "application/apply-patch+yaml");
    // A JSON patch's value sits two levels down (the list, the operation).
    let patch_ops = format!(
        r#"[{{"op":"replace","path":"/spec","value":{}}}]"#,
        nested(depth.saturating_sub(2).max(1))
    );
    let merge_patch = format!(r#"{{"spec":{}}}"#, nested(depth - 1));
    let steps: Vec<Step> = vec![
        ("POST", "?dryRun=All".into(), vec![JSON], body.clone()),
        ("POST", String::new(), vec![JSON], body.clone()),
        ("GET", named.clone(), vec![], String::new()),
        ("PATCH", named.clone(), vec![merge], merge_patch.clone()),
        (
            "PATCH",
            format!("{named}?dryRun=All"),
            vec![merge],
            merge_patch,
        ),
        ("PATCH", named.clone(), vec![json_patch], patch_ops),
        (
            "PATCH",
            format!("{named}?fieldManager=containment&force=true"),
            vec![apply],
            body.clone(),
        ),
        ("PUT", named.clone(), vec![JSON], String::new()),
        (
            "DELETE",
            format!("{named}?dryRun=All"),
            vec![],
            String::new(),
        ),
        ("DELETE", named.clone(), vec![], String::new()),
    ];
    for (method, path, headers, body) in steps {
        let answers = {
            let mut answers = Vec::new();
            for door in [bindery_door, reference] {
                let body = if method == "PUT" {
                    // An update names the version it replaces.
                    let current = door.send("GET", &named, &[], Vec::new()).await;
                    if current.status != 200 {
                        String::new()
                    } else {
                        let version = current.resource_version();
                        object(name, depth, &format!(r#","resourceVersion":"{version}""#))
                    }
                } else {
                    body.clone()
                };
                answers.push(door.send(method, &path, &headers, body).await);
            }
            answers
        };
        let (ours, theirs) = (&answers[0], &answers[1]);
        let step = format!("{method} {path} ({depth} levels)");
        assert!(
            !server.exited(),
            "{step}: bindery went away (its log is above)"
        );
        assert!(
            ours.status < 500,
            "{step}: bindery answered {}: {}",
            ours.status,
            ours.text()
        );
        assert_eq!(
            ours.status,
            theirs.status,
            "{step}: bindery answered {} where kube-apiserver answered {}",
            ours.text(),
            theirs.text()
        );
    }
}

#[tokio::test]
async fn bodies_as_deep_as_go_reads_go_through_every_write_verb_as_kube_apiserver_takes_them() {
    let mut server = serving_only(&clusters().provider.kubeconfig, &[]);
    let (_consumer, door) = consumer_door("contain-bodies", &server, "deep").await;
    let reference = reference("bodies").await;
    for depth in [150, 1_000, 10_000, 10_001] {
        let name = format!("body-{depth}");
        every_write_verb(depth, &name, (&door, &reference), &mut server).await;
    }
}

/// The deepest object the reference stores and reads back whole, found by
/// trying: Go reads 10,000 levels, and what kube-apiserver adds to an
/// object (its managedFields mirror its fields) may not fit under that.
async fn deepest_stored(reference: &Door) -> usize {
    let mut depth = 10_000;
    loop {
        let name = format!("deepest-{depth}");
        let created = reference
            .send("POST", "", &[JSON], object(&name, depth, ""))
            .await;
        if created.status == 201 {
            let read = reference
                .send("GET", &format!("/{name}"), &[], Vec::new())
                .await;
            reference
                .send("DELETE", &format!("/{name}"), &[], Vec::new())
                .await;
            if read.status == 200 {
                return depth;
            }
        }
        assert!(depth > 150, "the reference stores no deep object");
        depth -= 1 + depth / 50;
    }
}

/// Every read form's answer for a collection holding the deep objects
/// `names`, beside the reference's for its collection holding the same:
/// the same status, and each object shown where the reference shows it
/// (kube-apiserver ends a Table watch at an object too deep to make a row
/// with its object, say).
async fn reads_show(doors: (&Door, &Door), names: &[String], what: &str) {
    let (door, reference) = doors;
    let table = (
        "accept",
        "application/json;as=Table;v=v1;g=meta.k8s.io,application/json",
    );
    let metadata_list = (
        "accept",
        "application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io,application/json",
    );
    let metadata_list_protobuf = (
        "accept",
        "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io",
    );
    // What a metadata informer's watch asks for.
    let metadata = (
        "accept",
        "application/json;as=PartialObjectMetadata;v=v1;g=meta.k8s.io,application/json",
    );
    let yaml = ("accept", "application/yaml");
    let watch = "?watch=1&resourceVersion=0&timeoutSeconds=2";
    let table_watch = "?watch=1&resourceVersion=0&timeoutSeconds=2&includeObject=Object";
    let forms: Vec<(&str, Vec<(&str, &str)>)> = vec![
        ("", vec![]),
        ("?resourceVersion=0", vec![]),
        ("?limit=1", vec![]),
        ("", vec![table]),
        ("?resourceVersion=0", vec![table]),
        ("?includeObject=Object", vec![table]),
        (table_watch, vec![table]),
        ("", vec![metadata_list]),
        ("", vec![metadata_list_protobuf]),
        ("", vec![yaml]),
        (watch, vec![]),
        (watch, vec![metadata]),
    ];
    let namespaced = door.collection.contains("/namespaces/");
    for (query, headers) in forms {
        // Across namespaces, the reference holds other namespaces' objects
        // first: its first page, and where its Table watch ends, are theirs.
        if (query == "?limit=1" || query == table_watch) && !namespaced {
            continue;
        }
        let form = format!("{what}: GET {query} {headers:?}");
        let ours = door.send("GET", query, &headers, Vec::new()).await;
        let theirs = reference.send("GET", query, &headers, Vec::new()).await;
        assert_eq!(
            ours.status,
            theirs.status,
            "{form}: bindery answered {}, kube-apiserver {}",
            ours.text(),
            theirs.text()
        );
        if ours.status != 200 {
            // An error is kube-apiserver's, word for word.
            assert_eq!(ours.text(), theirs.text(), "{form}");
            continue;
        }
        let (shown, expected) = (
            String::from_utf8_lossy(&ours.body),
            String::from_utf8_lossy(&theirs.body),
        );
        for name in names {
            let quoted = format!("\"{name}\"");
            assert_eq!(
                shown.contains(&quoted),
                expected.contains(&quoted),
                "{form}: {name} shown by bindery: {}, by kube-apiserver: {}",
                shown.contains(&quoted),
                expected.contains(&quoted)
            );
        }
        assert!(
            names.iter().any(|name| shown.contains(name.as_str())),
            "{form}: shows none of the objects: {}",
            ours.text()
        );
    }
    // Objects by name, where the collection is a namespace's.
    let by_name = if namespaced { names } else { &[] };
    for name in by_name {
        for headers in [vec![], vec![yaml], vec![metadata], vec![table]] {
            let path = format!("/{name}");
            let ours = door.send("GET", &path, &headers, Vec::new()).await;
            let theirs = reference.send("GET", &path, &headers, Vec::new()).await;
            assert_eq!(
                (ours.status, ours.content_type.as_str()),
                (theirs.status, theirs.content_type.as_str()),
                "{what}: GET {name} {headers:?}: {}",
                ours.text()
            );
        }
    }
}

/// GET `path` of the bindery at `url`, without credentials (health).
fn health(url: &str, path: &str) -> (u16, String) {
    let output = std::process::Command::new("curl")
        .args(["-sk", "-w", "\n%{http_code}", "--max-time", "10"])
        .arg(format!("{url}{path}"))
        .output()
        .expect("curl runs");
    let text = String::from_utf8_lossy(&output.stdout).to_string();
    let (body, code) = text.rsplit_once('\n').unwrap_or_default();
    (code.parse().unwrap_or(0), body.to_string())
}

/// Waits until the bindery at `url` says it is ready; how long it took.
fn ready_within(url: &str, limit: Duration) -> Duration {
    let started = Instant::now();
    loop {
        let (code, body) = health(url, "/readyz?verbose");
        if code == 200 {
            return started.elapsed();
        }
        assert!(
            started.elapsed() < limit,
            "not ready after {limit:?}: {code} {body}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// `method` `path` of the workspace at `url` with `token`: status and body.
fn workspace_get(url: &str, path: &str, token: &str) -> (u16, Vec<u8>) {
    let output = std::process::Command::new("curl")
        .args(["-s", "--max-time", "30", "-w", "\n%{http_code}", "--cacert"])
        .arg(bindery().pki.join("bindery/serving-ca.crt"))
        .args(["-H", &format!("Authorization: Bearer {token}")])
        .arg(format!("{url}/services/export/{EXPORT}/clusters/*{path}"))
        .output()
        .expect("curl runs");
    let text = output.stdout;
    let split = text.iter().rposition(|b| *b == b'\n').unwrap_or(0);
    let code = String::from_utf8_lossy(&text[split + 1..])
        .parse()
        .unwrap_or(0);
    (code, text[..split].to_vec())
}

#[tokio::test]
async fn objects_as_deep_as_kube_apiserver_stores_are_read_back_in_every_form_and_blind_nobody() {
    let mut server = serving_only(&clusters().provider.kubeconfig, &[]);
    let reference = reference("objects").await;
    let deepest = deepest_stored(&reference).await;
    let (consumer, door) = consumer_door("contain-objects", &server, "deep").await;
    let mut names = Vec::new();
    for depth in [150, 1_000, deepest] {
        let name = format!("object-{depth}");
        let created = door
            .send("POST", "", &[JSON], object(&name, depth, ""))
            .await;
        assert_eq!(created.status, 201, "{depth} levels: {}", created.text());
        assert!(!server.exited(), "bindery went away creating {name}");
        let created = reference
            .send("POST", "", &[JSON], object(&name, depth, ""))
            .await;
        assert_eq!(created.status, 201, "the reference: {}", created.text());
        names.push(name);
    }
    // A shallow object of another consumer, whose reads must not suffer.
    let (_other, shallow) = consumer_door("contain-neighbour", &server, "flat").await;
    let created = shallow
        .send("POST", "", &[JSON], object("flat", 3, ""))
        .await;
    assert_eq!(created.status, 201, "{}", created.text());

    reads_show((&door, &reference), &names, "the consumer").await;
    // Across namespaces too.
    let all = Door {
        client: door.client.clone(),
        collection: format!("/apis/{GROUP}/v1/depths"),
    };
    let everywhere = Door {
        client: reference.client.clone(),
        collection: format!("/apis/{GROUP}/v1/depths"),
    };
    reads_show((&all, &everywhere), &names, "all namespaces").await;
    // The neighbour's list is served from the cache at once, not after the
    // cache's patience (it waits for a reflector that keeps relisting).
    let started = Instant::now();
    let listed = shallow.send("GET", "", &[], Vec::new()).await;
    assert_eq!(listed.status, 200, "{}", listed.text());
    assert!(String::from_utf8_lossy(&listed.body).contains("\"flat\""));
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "the neighbour's list took {:?}",
        started.elapsed()
    );
    // The provider's controllers see every consumer's objects.
    let (_, token) = crate::workspace::controller_token(EXPORT, &["get", "list", "watch"], None);
    for query in ["", "?watch=1&resourceVersion=0&timeoutSeconds=2"] {
        let (code, body) = workspace_get(
            &server.url,
            &format!("/apis/{GROUP}/v1/depths{query}"),
            &token,
        );
        let text = String::from_utf8_lossy(&body);
        assert_eq!(
            code,
            200,
            "workspace {query}: {}",
            &text[..text.len().min(600)]
        );
        for name in names.iter().chain([&"flat".to_string()]) {
            assert!(
                text.contains(name.as_str()),
                "workspace {query}: {name} missing"
            );
        }
    }
    // Ready, and a replica started now becomes ready too.
    assert_eq!(health(&server.url, "/readyz").0, 200);
    let replica = serving_only(&clusters().provider.kubeconfig, &[]);
    ready_within(&replica.url, Duration::from_secs(60));
    let replica_door = Door {
        client: client_at(&consumer, &replica.url).await,
        collection: door.collection.clone(),
    };
    reads_show((&replica_door, &reference), &names, "a new replica").await;
    // Its owner removes each.
    for name in &names {
        let deleted = door
            .send("DELETE", &format!("/{name}"), &[], Vec::new())
            .await;
        assert_eq!(deleted.status, 200, "deleting {name}: {}", deleted.text());
        reference
            .send("DELETE", &format!("/{name}"), &[], Vec::new())
            .await;
    }
    assert!(!server.exited(), "bindery went away");
}

/// `method` of `url` with `token` (or the consumer's certificate): status
/// and body.
fn curl_as(method: &str, url: &str, credentials: &[&str]) -> (u16, String) {
    let output = std::process::Command::new("curl")
        .args([
            "-s",
            "--max-time",
            "30",
            "-w",
            "\n%{http_code}",
            "-X",
            method,
        ])
        .arg("--cacert")
        .arg(bindery().pki.join("bindery/serving-ca.crt"))
        .args(credentials)
        .arg(url)
        .output()
        .expect("curl runs");
    let text = String::from_utf8_lossy(&output.stdout).to_string();
    let (body, code) = text.rsplit_once('\n').unwrap_or_default();
    (code.parse().unwrap_or(0), body.to_string())
}

#[tokio::test]
async fn methods_without_a_verb_are_405_before_anything_is_looked_up() {
    install_crd();
    let consumer = bindery().consumer("contain-methods", CRD, EXPORT);
    // A provider principal with no rights on any export's content.
    let provider = &clusters().provider;
    let _ = provider.kubectl_output(&["create", "namespace", "contain-nobody"], None);
    let _ = provider.kubectl_output(
        &["-n", "contain-nobody", "create", "serviceaccount", "nobody"],
        None,
    );
    let token = provider
        .kubectl(&["-n", "contain-nobody", "create", "token", "nobody"])
        .trim()
        .to_string();
    let bearer = format!("Authorization: Bearer {token}");
    let url = &bindery().url;
    let cert = consumer.cert.to_string_lossy().to_string();
    let key = consumer.key.to_string_lossy().to_string();
    let as_consumer = ["--cert", cert.as_str(), "--key", key.as_str()];
    let as_nobody = ["-H", bearer.as_str()];
    for method in ["OPTIONS", "PROPFIND", "TRACE", "FOO"] {
        // The workspace: an export that exists and one that does not, a
        // consumer that binds it and one that does not.
        let workspace: Vec<(u16, String)> = [
            format!("/services/export/{EXPORT}/clusters/*/apis/{GROUP}/v1/depths"),
            format!("/services/export/made-up/clusters/*/apis/{GROUP}/v1/depths"),
            format!(
                "/services/export/{EXPORT}/clusters/{}/apis/{GROUP}/v1/namespaces/a/depths",
                consumer.id
            ),
            format!(
                "/services/export/{EXPORT}/clusters/nobody/apis/{GROUP}/v1/namespaces/a/depths"
            ),
        ]
        .iter()
        .map(|path| curl_as(method, &format!("{url}{path}"), &as_nobody))
        .collect();
        for answer in &workspace {
            assert_eq!(answer.0, 405, "{method} on the workspace: {}", answer.1);
            assert_eq!(
                answer, &workspace[0],
                "{method}: every workspace path answers alike"
            );
        }
        assert!(
            workspace[0].1.contains(
                r#"" is not supported on resources of kind \"depths.containment.bindery.dev\"""#
            ),
            "{}",
            workspace[0].1
        );
        // A consumer: a resource it binds and one it does not.
        let consumer_answers: Vec<(u16, String)> = [
            format!(
                "/clusters/{}/apis/{GROUP}/v1/namespaces/a/depths",
                consumer.id
            ),
            format!(
                "/clusters/{}/apis/{GROUP}/v1/namespaces/a/depths/x/junk",
                consumer.id
            ),
        ]
        .iter()
        .map(|path| curl_as(method, &format!("{url}{path}"), &as_consumer))
        .collect();
        assert_eq!(
            consumer_answers[0].0, 405,
            "{method}: {}",
            consumer_answers[0].1
        );
        assert_eq!(consumer_answers[0], consumer_answers[1], "{method}");
        assert_eq!(
            consumer_answers[0], workspace[0],
            "{method}: the same words everywhere"
        );
    }
}

/// The series the bindery at `url` exposes (a histogram's once), each as
/// its family and labels.
fn series_of(url: &str) -> std::collections::BTreeSet<String> {
    let families = crate::operations::scrape(url);
    let mut series = std::collections::BTreeSet::new();
    for (name, family) in families.as_object().expect("families") {
        for sample in family["samples"].as_array().into_iter().flatten() {
            series.insert(format!("{name}{}", sample["labels"]));
        }
    }
    series
}

/// Whether a series (`name{labels as JSON}`) is labelled with a resource of
/// a group other than this test's.
fn names_a_resource_of_another_group(series: &str) -> bool {
    let Some(labels) = series.find('{').map(|at| &series[at..]) else {
        return false;
    };
    let labels: serde_json::Value = serde_json::from_str(labels).unwrap_or_default();
    labels["resource"]
        .as_str()
        .is_some_and(|resource| !resource.ends_with(&format!(".{GROUP}")))
}

/// `rounds` requests of made-up names, `salt` making each round's its own:
/// subresources of a bound object, versions and resources of the bound
/// group, and methods no resource has.
async fn made_up_requests(client: &kube::Client, salt: &str, rounds: usize) {
    let base = format!("/apis/{GROUP}/v1/namespaces/deep/depths");
    for i in 0..rounds {
        let (method, path) = match i % 4 {
            0 => ("GET", format!("{base}/flat/sub-{salt}-{i}")),
            1 => (
                "GET",
                format!("/apis/{GROUP}/v{salt}{i}/namespaces/deep/depths"),
            ),
            2 => (
                "GET",
                format!("/apis/{GROUP}/v1/namespaces/deep/things-{salt}-{i}"),
            ),
            _ => ("X-M", format!("{base}/flat")),
        };
        let method = if method == "X-M" {
            format!("M{salt}{i}").to_uppercase()
        } else {
            method.to_string()
        };
        let request = http::Request::builder()
            .method(method.as_str())
            .uri(path)
            .body(kube::client::Body::empty())
            .expect("a request");
        let response = client.send(request).await.expect("bindery answers");
        assert!(
            response.status().is_client_error(),
            "{method}: {}",
            response.status()
        );
    }
}

#[tokio::test]
async fn made_up_names_never_grow_the_metrics() {
    let mut server = serving_only(&clusters().provider.kubeconfig, &[]);
    let (_consumer, door) = consumer_door("contain-metrics", &server, "deep").await;
    let created = door.send("POST", "", &[JSON], object("flat", 3, "")).await;
    assert_eq!(created.status, 201, "{}", created.text());
    // Every kind of answer once, so that the fixed values exist.
    made_up_requests(&door.client, "warm", 8).await;
    // A list (the watch cache's series), and a scrape (its own).
    let listed = door.send("GET", "", &[], Vec::new()).await;
    assert_eq!(listed.status, 200, "{}", listed.text());
    series_of(&server.url);
    let before = series_of(&server.url);
    made_up_requests(&door.client, "a", 5_000).await;
    made_up_requests(&door.client, "b", 5_000).await;
    let after = series_of(&server.url);
    // A resource another test exports meanwhile on the shared provider
    // brings its own series (its watch cache): only this test's group can
    // have made-up names.
    let added: Vec<&String> = after
        .difference(&before)
        .filter(|series| !names_a_resource_of_another_group(series))
        .collect();
    assert!(
        added.is_empty(),
        "10,000 made-up names added series: {added:#?}"
    );
    assert!(!server.exited(), "bindery went away");
}

/// The provider namespaces made for `consumer`'s app namespace
/// `namespace`, and whether its APIServiceNamespace exists.
fn provisioned(consumer: &Consumer, namespace: &str) -> (Vec<String>, bool) {
    let provider = &clusters().provider;
    let listed = provider.kubectl(&[
        "get",
        "namespaces",
        "-l",
        &format!("bindery.dev/consumer={}", consumer.id),
        "-o",
        "json",
    ]);
    let listed: serde_json::Value = serde_json::from_str(&listed).expect("a namespace list");
    let made = listed["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|ns| ns["metadata"]["annotations"]["kube-bind.io/consumer-namespace"] == namespace)
        .map(|ns| {
            ns["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        })
        .collect();
    let record = provider
        .kubectl_output(
            &[
                "-n",
                &consumer.cluster_namespace,
                "get",
                "apiservicenamespace",
                namespace,
            ],
            None,
        )
        .status
        .success();
    (made, record)
}

/// Consumer `id`'s collection in app namespace `namespace`, through the
/// shared bindery.
async fn collection_of(consumer: &Consumer, namespace: &str) -> Door {
    Door {
        client: consumer.client_without_retries().await,
        collection: format!("/apis/{GROUP}/v1/namespaces/{namespace}/depths"),
    }
}

#[tokio::test]
async fn app_namespaces_are_checked_before_the_provider_sees_them_and_every_valid_one_works() {
    install_crd();
    let consumer = bindery().consumer("contain-ns", CRD, EXPORT);
    let provider = &clusters().provider;
    // Names no namespace can have: kube-apiserver's 404, word for word,
    // and nothing made on the provider.
    let too_long = "n".repeat(64);
    for namespace in ["UPPER", "a.b", too_long.as_str(), "-dash"] {
        let ours = collection_of(&consumer, namespace)
            .await
            .send("POST", "", &[JSON], object("x", 3, ""))
            .await;
        let theirs = Door {
            client: provider.client().await,
            collection: format!("/apis/{GROUP}/v1/namespaces/{namespace}/depths"),
        }
        .send("POST", "", &[JSON], object("x", 3, ""))
        .await;
        assert_eq!(
            (ours.status, ours.text().trim_end()),
            (theirs.status, theirs.text().trim_end()),
            "a create in {namespace:?}"
        );
        assert_consumer_terms(&consumer, &ours.body);
        assert_eq!(
            provisioned(&consumer, namespace),
            (vec![], false),
            "{namespace}"
        );
    }
    // A dry run, and an invalid create, make nothing either.
    let fresh = collection_of(&consumer, "dry").await;
    let dry = fresh
        .send("POST", "?dryRun=All", &[JSON], object("x", 3, ""))
        .await;
    assert_eq!(dry.status, 201, "{}", dry.text());
    let answered: serde_json::Value = serde_json::from_slice(&dry.body).expect("an object");
    assert_eq!(answered["metadata"]["namespace"], "dry", "{answered}");
    assert_consumer_terms(&consumer, &dry.body);
    let invalid = fresh
        .send(
            "POST",
            "",
            &[JSON],
            format!(
                r#"{{"apiVersion":"{GROUP}/v1","kind":"Depth","metadata":{{"name":"Not_Valid"}}}}"#
            ),
        )
        .await;
    assert_eq!(invalid.status, 422, "{}", invalid.text());
    assert_consumer_terms(&consumer, &invalid.body);
    assert_eq!(
        provisioned(&consumer, "dry"),
        (vec![], false),
        "a dry run and an invalid create made a namespace"
    );
    // App namespaces of every valid length work: a name of 63 characters.
    let longest = format!("l{}", "o".repeat(61)) + "ng";
    let longest = &longest[..63];
    let door = collection_of(&consumer, longest).await;
    let created = door.send("POST", "", &[JSON], object("x", 3, "")).await;
    assert_eq!(created.status, 201, "{}", created.text());
    assert_consumer_terms(&consumer, &created.body);
    let (made, recorded) = provisioned(&consumer, longest);
    assert!(recorded, "its APIServiceNamespace");
    assert_eq!(made.len(), 1, "{made:?}");
    assert!(made[0].len() <= 63, "{}", made[0]);
    for (method, path, status) in [
        ("GET", "/x", 200),
        ("GET", "", 200),
        ("GET", "?watch=1&resourceVersion=0&timeoutSeconds=1", 200),
        ("DELETE", "/x", 200),
    ] {
        let answer = door.send(method, path, &[], Vec::new()).await;
        assert_eq!(answer.status, status, "{method} {path}: {}", answer.text());
        if method == "GET" {
            let text = String::from_utf8_lossy(&answer.body);
            assert!(text.contains(longest), "{method} {path}: {text}");
        }
        assert_consumer_terms(&consumer, &answer.body);
    }
}

/// Nothing of the provider in an answer: no provider or cluster namespace.
fn assert_consumer_terms(consumer: &Consumer, answer: &[u8]) {
    let text = String::from_utf8_lossy(answer);
    for leak in [
        consumer.cluster_namespace.as_str(),
        "bindery.dev/consumer",
        "bindery.dev/export",
    ] {
        assert!(!text.contains(leak), "shows {leak:?}: {text}");
    }
}

/// Sets the annotation `key` of `consumer`'s export to `value`, and waits
/// until bindery refuses what it should (`refused` answers whether it does).
fn annotate_export(consumer: &Consumer, key: &str, value: &str) {
    clusters().provider.kubectl(&[
        "-n",
        &consumer.cluster_namespace,
        "annotate",
        "--overwrite",
        "apiserviceexport",
        EXPORT,
        &format!("{key}={value}"),
    ]);
}

/// Creates `name` through `door` until the answer is `status` (the catalog
/// and the cache take a moment to see a change); the last answer.
async fn create_until(door: &Door, name: &str, query: &str, status: u16) -> Answer {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let answer = door.send("POST", query, &[JSON], object(name, 3, "")).await;
        if answer.status == status || Instant::now() > deadline {
            return answer;
        }
        if answer.status == 201 && !query.contains("dryRun") {
            door.send("DELETE", &format!("/{name}"), &[], Vec::new())
                .await;
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

#[tokio::test]
async fn an_export_caps_what_one_consumer_grows_as_a_quota_refuses() {
    install_crd();
    // Objects.
    let consumer = bindery().consumer("contain-caps", CRD, EXPORT);
    annotate_export(&consumer, "bindery.dev/max-objects", "3");
    let door = collection_of(&consumer, "a").await;
    for name in ["o1", "o2", "o3"] {
        let created = door.send("POST", "", &[JSON], object(name, 3, "")).await;
        assert_eq!(created.status, 201, "{name}: {}", created.text());
    }
    let refused = create_until(&door, "o4", "", 403).await;
    let expected = r#"depths.containment.bindery.dev \"o4\" is forbidden: exceeded quota: depths, requested: bindery.dev/objects=1, used: bindery.dev/objects=3, limited: bindery.dev/objects=3"#;
    assert_eq!(refused.status, 403, "{}", refused.text());
    assert!(refused.text().contains(expected), "{}", refused.text());
    assert!(
        refused.text().contains(r#""reason":"Forbidden""#),
        "{}",
        refused.text()
    );
    // A dry run is checked too (kube-apiserver's quota admission checks
    // dry runs and charges nothing), in another namespace as well.
    let elsewhere = collection_of(&consumer, "b").await;
    let dry = elsewhere
        .send("POST", "?dryRun=All", &[JSON], object("o4", 3, ""))
        .await;
    assert_eq!(dry.status, 403, "{}", dry.text());
    // Room again once one is gone.
    let deleted = door.send("DELETE", "/o1", &[], Vec::new()).await;
    assert_eq!(deleted.status, 200, "{}", deleted.text());
    let created = create_until(&door, "o4", "", 201).await;
    assert_eq!(created.status, 201, "{}", created.text());

    // Provider namespaces.
    let consumer = bindery().consumer("contain-nscap", CRD, EXPORT);
    annotate_export(&consumer, "bindery.dev/max-namespaces", "2");
    for namespace in ["n1", "n2"] {
        let door = collection_of(&consumer, namespace).await;
        let created = door.send("POST", "", &[JSON], object("x", 3, "")).await;
        assert_eq!(created.status, 201, "{namespace}: {}", created.text());
    }
    let third = collection_of(&consumer, "n3").await;
    let refused = create_until(&third, "x", "", 403).await;
    assert!(
        refused.text().contains(
            r#"depths.containment.bindery.dev \"x\" is forbidden: exceeded quota: depths, requested: count/namespaces=1, used: count/namespaces=2, limited: count/namespaces=2"#
        ),
        "{}",
        refused.text()
    );
    assert_eq!(provisioned(&consumer, "n3"), (vec![], false));
    // A namespace it has takes more objects.
    let again = collection_of(&consumer, "n1").await;
    let created = again.send("POST", "", &[JSON], object("y", 3, "")).await;
    assert_eq!(created.status, 201, "{}", created.text());
}

#[tokio::test]
async fn a_provider_namespace_gone_while_bindery_knew_it_is_made_again() {
    install_crd();
    let consumer = bindery().consumer("contain-remade", CRD, EXPORT);
    let door = collection_of(&consumer, "again").await;
    let created = door.send("POST", "", &[JSON], object("first", 3, "")).await;
    assert_eq!(created.status, 201, "{}", created.text());
    let (made, _) = provisioned(&consumer, "again");
    assert_eq!(made.len(), 1, "{made:?}");
    // Gone on the provider, record and all (as with its app namespace), and
    // still being deleted when the next create comes.
    let provider = &clusters().provider;
    provider.kubectl(&["delete", "namespace", &made[0], "--wait=false"]);
    provider.kubectl(&[
        "-n",
        &consumer.cluster_namespace,
        "delete",
        "apiservicenamespace",
        "again",
    ]);
    let created = door
        .send("POST", "?timeout=50s", &[JSON], object("second", 3, ""))
        .await;
    assert_eq!(created.status, 201, "{}", created.text());
    assert_consumer_terms(&consumer, &created.body);
    let listed = door.send("GET", "", &[], Vec::new()).await;
    let text = String::from_utf8_lossy(&listed.body);
    assert!(
        text.contains("\"second\"") && !text.contains("\"first\""),
        "{text}"
    );
}

/// A deletecollection that outlasts its timeout is answered as
/// kube-apiserver answers one, 504 `Timeout`, never a 500 (the provider's
/// own answer then is a bare Status, or a reset stream).
#[tokio::test]
async fn a_long_deletecollection_is_answered_as_kube_apiserver_answers_it() {
    install_crd();
    let consumer = bindery().consumer("contain-long", CRD, EXPORT);
    let door = collection_of(&consumer, "many").await;
    for i in 0..60 {
        let created = door
            .send("POST", "", &[JSON], object(&format!("o{i}"), 3, ""))
            .await;
        assert_eq!(created.status, 201, "{}", created.text());
    }
    // A deadline no deletion of 60 objects meets.
    let answer = door.send("DELETE", "?timeout=1ms", &[], Vec::new()).await;
    assert_eq!(answer.status, 504, "{}", answer.text());
    assert!(
        answer
            .text()
            .contains(r#""message":"Timeout: request did not complete within the allotted timeout","reason":"Timeout""#),
        "{}",
        answer.text()
    );
    // bindery and the collection serve on; a deletion without the short
    // deadline takes what is left.
    let listed = door.send("GET", "", &[], Vec::new()).await;
    assert_eq!(listed.status, 200, "{}", listed.text());
    let deleted = door.send("DELETE", "", &[], Vec::new()).await;
    assert_eq!(deleted.status, 200, "{}", deleted.text());
}
