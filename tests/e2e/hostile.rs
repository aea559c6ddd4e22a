//! A hostile consumer against the real provider: request shapes nobody
//! named (query spellings, representations, bodies only Go can read,
//! patches that strip labels) must neither show the provider's raw answer
//! nor store an identity that is not the writer's. Each test here failed
//! on the main of 2026-11-25 (issue 20).

use crate::bindery::{Consumer, bindery};
use crate::fixture::clusters;
use bytes::Bytes;
use http_body_util::BodyExt;
use serde_json::{Value, json};
use std::sync::OnceLock;

const GROUP: &str = "hostile.bindery.dev";
const CRD: &str = "hazards.hostile.bindery.dev";

fn install_crd() {
    static DONE: OnceLock<()> = OnceLock::new();
    DONE.get_or_init(|| {
        let crd = json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": CRD},
            "spec": {"group": GROUP, "scope": "Namespaced",
                "names": {"plural": "hazards", "singular": "hazard", "kind": "Hazard"},
                "versions": [{"name": "v1", "served": true, "storage": true,
                    "subresources": {"status": {}, "scale": {
                        "specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas"}},
                    "schema": {"openAPIV3Schema": {"type": "object",
                        "x-kubernetes-preserve-unknown-fields": true}}}]}
        });
        clusters().provider.install_crd(&crd);
    });
}

fn consumer(id: &str) -> Consumer {
    install_crd();
    bindery().consumer(id, CRD, "hazards")
}

/// A raw request as `consumer`, with the answer's status, Content-Type and
/// body.
async fn send(
    consumer: &Consumer,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Vec<u8>,
) -> (u16, String, Bytes) {
    let mut request = http::Request::builder().method(method).uri(path);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let request = request
        .body(kube::client::Body::from(body))
        .expect("a valid request");
    let response = consumer
        .client()
        .await
        .send(request)
        .await
        .expect("bindery answers");
    let status = response.status().as_u16();
    let content_type = response
        .headers()
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    let body = response.into_body().collect().await.map(|b| b.to_bytes());
    (status, content_type, body.unwrap_or_default())
}

fn collection(namespace: &str) -> String {
    format!("/apis/{GROUP}/v1/namespaces/{namespace}/hazards")
}

async fn create(consumer: &Consumer, namespace: &str, name: &str) {
    let body = json!({"apiVersion": format!("{GROUP}/v1"), "kind": "Hazard",
        "metadata": {"name": name}, "spec": {"replicas": 1}});
    let (status, _, answer) = send(
        consumer,
        "POST",
        &collection(namespace),
        &[("content-type", "application/json")],
        serde_json::to_vec(&body).unwrap(),
    )
    .await;
    assert_eq!(status, 201, "{}", String::from_utf8_lossy(&answer));
}

/// An object the provider's administrator put in the consumer's provider
/// namespace: it carries no identity of the consumer's, so the consumer
/// must never see it, whatever it asks.
fn intruder(consumer: &Consumer, namespace: &str, name: &str) {
    let provider_namespace = format!("{}-{namespace}", consumer.cluster_namespace);
    let object = json!({"apiVersion": format!("{GROUP}/v1"), "kind": "Hazard",
        "metadata": {"name": name, "namespace": provider_namespace,
            "labels": {"planted": "yes"}},
        "spec": {"replicas": 3}});
    clusters()
        .provider
        .kubectl_with_stdin(&["apply", "-f", "-"], Some(&object.to_string()));
}

/// The consumer's objects on the provider (in its provider namespace for
/// `namespace`), with their labels.
fn stored(consumer: &Consumer, namespace: &str) -> Vec<(String, Value)> {
    let provider_namespace = format!("{}-{namespace}", consumer.cluster_namespace);
    let listed = clusters()
        .provider
        .kubectl(&["get", CRD, "-A", "-o", "json"]);
    let listed: Value = serde_json::from_str(&listed).expect("kubectl prints JSON");
    listed["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|item| item["metadata"]["namespace"] == provider_namespace.as_str())
        .map(|item| {
            (
                item["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
                item["metadata"]["labels"].clone(),
            )
        })
        .collect()
}

/// Nothing of the provider in an answer: no provider namespace, no
/// reserved label.
fn assert_consumer_terms(consumer: &Consumer, answer: &[u8], what: &str) {
    let text = String::from_utf8_lossy(answer);
    for leak in [
        consumer.cluster_namespace.as_str(),
        "bindery.dev/consumer",
        "bindery.dev/export",
    ] {
        assert!(!text.contains(leak), "{what} shows {leak:?}: {text}");
    }
}

/// [`assert_consumer_terms`], and no planted object either.
fn assert_only_the_consumers(consumer: &Consumer, answer: &[u8], what: &str) {
    assert_consumer_terms(consumer, answer, what);
    let text = String::from_utf8_lossy(answer);
    assert!(
        !text.contains("intruder"),
        "{what} shows the planted object: {text}"
    );
}

#[tokio::test]
async fn every_spelling_of_watch_is_a_watch_in_consumer_terms() {
    let consumer = consumer("hostile-watch");
    create(&consumer, "w", "mine").await;
    intruder(&consumer, "w", "intruder");
    // kube-apiserver reads every value but 0 and false as a watch.
    for spelling in ["watch=yes", "watch=2", "watch=TRUE", "watch=", "watch"] {
        let path = format!(
            "{}?{spelling}&resourceVersion=0&timeoutSeconds=1",
            collection("w")
        );
        let (status, content_type, body) = send(&consumer, "GET", &path, &[], vec![]).await;
        assert_eq!(status, 200, "{spelling}");
        assert_eq!(content_type, "application/json", "{spelling}");
        assert_only_the_consumers(&consumer, &body, spelling);
        let first: Value = serde_json::from_slice(body.split(|b| *b == b'\n').next().unwrap())
            .unwrap_or_else(|e| panic!("{spelling}: not a watch event ({e}): {body:?}"));
        assert_eq!(first["type"], "ADDED", "{spelling}: {first}");
        assert_eq!(first["object"]["metadata"]["name"], "mine", "{spelling}");
    }
}

/// What an app cluster's garbage collector and quota controller send:
/// protobuf metadata, translated, never the provider's bytes.
#[tokio::test]
async fn protobuf_metadata_is_translated() {
    let consumer = consumer("hostile-meta");
    create(&consumer, "m", "mine").await;
    intruder(&consumer, "m", "intruder");
    let list_accept = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json";
    let (status, content_type, body) = send(
        &consumer,
        "GET",
        &collection("m"),
        &[("accept", list_accept)],
        vec![],
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(content_type, "application/vnd.kubernetes.protobuf");
    let list = bindery::wire::protobuf::decode(&body).expect("a protobuf metadata list");
    assert_eq!(list["kind"], "PartialObjectMetadataList");
    let items = list["items"].as_array().unwrap();
    assert_eq!(items.len(), 1, "{list}");
    assert_eq!(items[0]["metadata"]["name"], "mine");
    assert_eq!(items[0]["metadata"]["namespace"], "m");
    assert_only_the_consumers(&consumer, list.to_string().as_bytes(), "the metadata list");

    let get_accept = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json";
    for (name, want) in [("mine", 200), ("intruder", 404)] {
        let path = format!("{}/{name}", collection("m"));
        let (status, content_type, body) =
            send(&consumer, "GET", &path, &[("accept", get_accept)], vec![]).await;
        assert_eq!(status, want, "{name}");
        if want == 200 {
            assert_eq!(content_type, "application/vnd.kubernetes.protobuf");
            let object = bindery::wire::protobuf::decode(&body).unwrap();
            assert_eq!(object["metadata"]["namespace"], "m");
            assert_consumer_terms(&consumer, object.to_string().as_bytes(), name);
        } else {
            assert_consumer_terms(&consumer, &body, name);
        }
    }
}

#[tokio::test]
async fn table_rows_are_checked_whatever_object_they_carry() {
    let consumer = consumer("hostile-table");
    create(&consumer, "t", "mine").await;
    intruder(&consumer, "t", "intruder");
    let accept = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json";
    for include in ["None", "Metadata", "Object"] {
        let path = format!("{}?includeObject={include}", collection("t"));
        let (status, _, body) = send(&consumer, "GET", &path, &[("accept", accept)], vec![]).await;
        assert_eq!(status, 200, "{include}");
        let table: Value = serde_json::from_slice(&body).unwrap();
        let rows = table["rows"].as_array().expect("rows");
        assert_eq!(rows.len(), 1, "{include}: {table}");
        assert_eq!(rows[0]["cells"][0], "mine", "{include}");
        if include == "None" {
            assert!(
                rows[0]["object"].is_null(),
                "None carries no object: {table}"
            );
        }
        assert_only_the_consumers(&consumer, &body, include);
    }
}

#[tokio::test]
async fn the_scale_of_an_object_not_the_consumers_is_not_found() {
    let consumer = consumer("hostile-scale");
    create(&consumer, "s", "mine").await;
    intruder(&consumer, "s", "intruder");
    let scale = |name: &str| format!("{}/{name}/scale", collection("s"));
    let (status, _, body) = send(&consumer, "GET", &scale("mine"), &[], vec![]).await;
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    let (status, _, body) = send(&consumer, "GET", &scale("intruder"), &[], vec![]).await;
    assert_eq!(status, 404, "{}", String::from_utf8_lossy(&body));
    assert_consumer_terms(&consumer, &body, "the intruder's scale");
}

/// A JSON patch that nulls the labels must not take the object away from
/// its owner: the identity stays, the owner still reads it.
#[tokio::test]
async fn a_patch_that_clears_the_labels_keeps_the_identity() {
    let consumer = consumer("hostile-patch");
    create(&consumer, "p", "mine").await;
    let path = format!("{}/mine", collection("p"));
    for (content_type, patch) in [
        (
            "application/json-patch+json",
            json!([{"op": "replace", "path": "/metadata/labels", "value": null}]),
        ),
        (
            "application/json-patch+json",
            json!([{"op": "remove", "path": "/metadata/labels"}]),
        ),
        (
            "application/json-patch+json",
            json!([{"op": "replace", "path": "/metadata", "value": {"name": "mine"}}]),
        ),
        (
            "application/merge-patch+json",
            json!({"metadata": {"labels": null}}),
        ),
    ] {
        let _ = send(
            &consumer,
            "PATCH",
            &path,
            &[("content-type", content_type)],
            serde_json::to_vec(&patch).unwrap(),
        )
        .await;
        let (status, _, body) = send(&consumer, "GET", &path, &[], vec![]).await;
        assert_eq!(
            status,
            200,
            "after {patch} the owner lost its object: {}",
            String::from_utf8_lossy(&body)
        );
        let labels = stored(&consumer, "p")
            .into_iter()
            .find(|(name, _)| name == "mine")
            .expect("the object is still on the provider")
            .1;
        assert_eq!(
            labels["bindery.dev/consumer"], "hostile-patch",
            "after {patch}: {labels}"
        );
        assert!(
            labels["bindery.dev/export"].is_string(),
            "after {patch}: {labels}"
        );
    }
}

/// Bodies Go reads but a stricter parser refuses (a lone surrogate,
/// invalid UTF-8, nesting deeper than 128) carrying a forged identity:
/// refused as any reserved label is, never stored as sent.
#[tokio::test]
async fn bodies_only_go_reads_cannot_forge_an_identity() {
    let consumer = consumer("hostile-body");
    let head = |name: &str| {
        format!(r#"{{"apiVersion":"{GROUP}/v1","kind":"Hazard","metadata":{{"name":"{name}","#)
    };
    let deep = format!("{}1{}", "[".repeat(200), "]".repeat(200));
    let bodies: Vec<(&str, Vec<u8>)> = vec![
        (
            "lone-surrogate",
            format!(
                r#"{}"labels":{{"bindery.dev/consumer":"forged"}},"annotations":{{"a":"\ud800"}}}},"spec":{{}}}}"#,
                head("lone-surrogate")
            )
            .into_bytes(),
        ),
        (
            "invalid-utf8",
            [
                format!(
                    r#"{}"labels":{{"bindery.dev/export":"forged"}},"annotations":{{"a":""#,
                    head("invalid-utf8")
                )
                .into_bytes(),
                vec![0xff, 0xfe],
                br#""}},"spec":{}}"#.to_vec(),
            ]
            .concat(),
        ),
        (
            "deep",
            format!(
                r#"{}"labels":{{"bindery.dev/consumer":"forged"}}}},"spec":{{"deep":{deep}}}}}"#,
                head("deep")
            )
            .into_bytes(),
        ),
    ];
    for (name, body) in bodies {
        let (status, _, answer) = send(
            &consumer,
            "POST",
            &collection("b"),
            &[("content-type", "application/json")],
            body,
        )
        .await;
        assert_eq!(status, 422, "{name}: {}", String::from_utf8_lossy(&answer));
        assert!(
            String::from_utf8_lossy(&answer).contains("reserved"),
            "{name}: refused as a reserved label: {}",
            String::from_utf8_lossy(&answer)
        );
    }
    let forged: Vec<_> = stored(&consumer, "b");
    assert!(forged.is_empty(), "stored: {forged:?}");
}
