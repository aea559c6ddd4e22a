//! The kcp dialect of the virtual workspace, for controllers written for
//! kcp's APIExport virtual workspace (multicluster-runtime with kcp's
//! multicluster-provider): the `kcp.io/cluster` annotation that names an
//! object's consumer, the `apis.kcp.io/v1alpha1` `APIBinding` made from a
//! consumer's APIServiceExport, the `APIExportEndpointSlice` of an export,
//! and the CRD specs their discovery is generated from. Pure.
//!
//! Every object here is built by bindery field by field: nothing of the
//! provider's export passes through but its name, uid, resourceVersion,
//! generation and timestamps, and the Ready condition's status, reason and
//! time.

use crate::route::ConsumerId;
use crate::wire::selector::{FieldSelector, LabelSelector};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinitionSpec;
use serde_json::{Map, Value, json};
use std::sync::LazyLock;

/// The annotation kcp sets on every object it serves across logical
/// clusters, naming the object's cluster; here, its consumer. Set by
/// bindery on the way out of the workspace only, dropped from every write.
pub const CLUSTER_ANNOTATION: &str = "kcp.io/cluster";
/// The group and version of kcp's APIs that multicluster-provider asks for
/// (every release from v0.1.0 to v0.8.0 imports `apis/apis/v1alpha1`).
pub const GROUP: &str = "apis.kcp.io";
pub const VERSION: &str = "v1alpha1";
pub const BINDINGS: &str = "apibindings";
pub const BINDING_KIND: &str = "APIBinding";
pub const SLICES: &str = "apiexportendpointslices";
pub const SLICE_KIND: &str = "APIExportEndpointSlice";
/// The verbs the workspace serves on both: read only.
pub const VERBS: [&str; 3] = ["get", "list", "watch"];

/// The `apiVersion` of both kinds.
pub fn api_version() -> String {
    format!("{GROUP}/{VERSION}")
}

/// Marks `metadata` with `consumer` as its kcp cluster, replacing whatever
/// the object carried.
pub fn mark(metadata: &mut Map<String, Value>, consumer: &ConsumerId) {
    let annotations = metadata
        .entry("annotations")
        .or_insert_with(|| Value::Object(Map::new()));
    if !annotations.is_object() {
        *annotations = Value::Object(Map::new());
    }
    if let Some(annotations) = annotations.as_object_mut() {
        annotations.insert(
            CLUSTER_ANNOTATION.into(),
            Value::String(consumer.to_string()),
        );
    }
}

/// Removes the kcp cluster annotation from `metadata` (and the annotations
/// map it leaves empty): a caller's or the provider's value is never
/// trusted as an identity.
pub fn unmark(metadata: &mut Map<String, Value>) {
    let Some(Value::Object(annotations)) = metadata.get_mut("annotations") else {
        return;
    };
    if annotations.shift_remove(CLUSTER_ANNOTATION).is_some() && annotations.is_empty() {
        metadata.shift_remove("annotations");
    }
}

/// The APIBinding of `consumer`, whose APIServiceExport is `export`
/// (which the caller found to be a consumer's of the workspace's export);
/// `served`: whether bindery serves it (an identity, and its status flow
/// did not stop it). `None` for an object without a name.
///
/// `status.phase` is `Bound` when served, else `Binding`. The `Ready`
/// condition is the export's own `Ready`, as the status flow sets it from
/// the consumer's binding, its BoundSchemas and CRDs: `True` only when that
/// is `True` and the export is served; its message is bindery's.
pub fn binding_of(export: &Value, consumer: &ConsumerId, served: bool) -> Option<Value> {
    let metadata = export.get("metadata")?.as_object()?;
    let name = metadata.get("name")?.as_str()?;
    let mut out = Map::new();
    out.insert("name".into(), json!(name));
    for key in [
        "uid",
        "resourceVersion",
        "creationTimestamp",
        "deletionTimestamp",
    ] {
        if let Some(Value::String(value)) = metadata.get(key) {
            out.insert(key.into(), json!(value));
        }
    }
    if let Some(generation) = metadata.get("generation").filter(|g| g.is_i64()) {
        out.insert("generation".into(), generation.clone());
    }
    mark(&mut out, consumer);
    let conditions: Vec<crate::api::Condition> = export
        .pointer("/status/conditions")
        .and_then(|c| serde_json::from_value(c.clone()).ok())
        .unwrap_or_default();
    let ready = conditions.iter().find(|c| c.type_ == "Ready");
    let (status, reason, message) = match ready {
        Some(c) if c.status == "True" && served => ("True", "Ready".to_string(), String::new()),
        Some(c) if c.status == "True" => (
            "False",
            "NotServed".to_string(),
            "the export is not served to this consumer".to_string(),
        ),
        Some(c) => {
            let status = if c.status == "False" {
                "False"
            } else {
                "Unknown"
            };
            let reason = reason_of(&c.reason);
            let message = format!("the consumer's binding is not ready ({reason})");
            (status, reason, message)
        }
        None => (
            "Unknown",
            "Pending".to_string(),
            "the consumer's binding has not reported yet".to_string(),
        ),
    };
    let mut condition = json!({"type": "Ready", "status": status, "reason": reason});
    if !message.is_empty() {
        condition["message"] = json!(message);
    }
    let time = export
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .find(|c| c.get("type").and_then(Value::as_str) == Some("Ready"))
        .and_then(|c| c.get("lastTransitionTime"))
        .and_then(Value::as_str)
        .filter(|t| is_timestamp(t));
    if let Some(time) = time {
        condition["lastTransitionTime"] = json!(time);
    }
    Some(json!({
        "apiVersion": api_version(),
        "kind": BINDING_KIND,
        "metadata": out,
        "spec": {"reference": {"export": {"name": name}}},
        "status": {
            "phase": if served { "Bound" } else { "Binding" },
            "conditions": [condition],
        },
    }))
}

/// A condition reason as a reason (a CamelCase word); anything else is
/// named by bindery.
fn reason_of(reason: &str) -> String {
    let word = !reason.is_empty()
        && reason.len() <= 1024
        && reason.starts_with(|c: char| c.is_ascii_alphabetic())
        && reason
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_');
    if word {
        reason.to_string()
    } else {
        "NotReady".to_string()
    }
}

/// An RFC 3339 time as Kubernetes writes it (`2026-01-02T03:04:05Z`).
fn is_timestamp(text: &str) -> bool {
    time::OffsetDateTime::parse(text, &time::format_description::well_known::Rfc3339).is_ok()
}

/// Whether an object of the kcp kinds named `name` (they carry no labels
/// and no namespace) is selected by the caller's selectors.
pub fn selected(name: &str, labels: &LabelSelector, fields: &FieldSelector) -> bool {
    labels.matches_with(|_| None)
        && fields.matches_with(|key| match key {
            "metadata.name" => Some(name),
            "metadata.namespace" => Some(""),
            _ => None,
        })
}

/// A field selector on the kcp kinds names only `metadata.name` and
/// `metadata.namespace`, as kube-apiserver allows for a custom resource;
/// else its 400 message.
pub fn check_fields(fields: &FieldSelector) -> Result<(), String> {
    match fields
        .terms()
        .iter()
        .find(|t| t.key != "metadata.name" && t.key != "metadata.namespace")
    {
        Some(term) => Err(format!("field label not supported: {}", term.key)),
        None => Ok(()),
    }
}

/// The APIExportEndpointSlice of export `key`, whose one endpoint is the
/// export's virtual workspace at `url` (to which clients add
/// `/clusters/...`). It never changes: bindery has one URL where kcp has
/// one per shard, so its resourceVersion is fixed.
pub fn endpoint_slice(key: &str, url: &str) -> Value {
    json!({
        "apiVersion": api_version(),
        "kind": SLICE_KIND,
        "metadata": {"name": key, "resourceVersion": SLICE_VERSION},
        "spec": {"export": {"name": key}},
        "status": {"endpoints": [{"url": url}]},
    })
}

/// The one resourceVersion of every endpoint slice.
pub const SLICE_VERSION: &str = "1";

/// The workspace URL of export `key` for a caller that reached bindery at
/// `authority`, or under the configured `external` URL.
pub fn workspace_url(external: Option<&str>, authority: &str, key: &str) -> String {
    let base = match external {
        Some(url) => url.trim_end_matches('/').to_string(),
        None => format!("https://{authority}"),
    };
    format!("{base}/services/export/{key}")
}

/// Sets the discovery documents' verbs of the kcp resources to
/// [`VERBS`]: both are read only. Walks legacy and aggregated documents.
pub fn narrow_verbs(document: &mut Value) {
    match document {
        Value::Object(map) => {
            let names_kcp = ["name", "resource"].iter().any(|k| {
                map.get(*k)
                    .and_then(Value::as_str)
                    .is_some_and(|n| n == BINDINGS || n == SLICES)
            });
            if names_kcp && map.get("verbs").is_some_and(Value::is_array) {
                map.insert("verbs".into(), json!(VERBS));
            }
            for value in map.values_mut() {
                narrow_verbs(value);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(narrow_verbs),
        _ => {}
    }
}

fn spec(kind: &str, plural: &str, description: &str) -> CustomResourceDefinitionSpec {
    serde_json::from_value(json!({
        "group": GROUP,
        "scope": "Cluster",
        "names": {"plural": plural, "singular": kind.to_lowercase(), "kind": kind,
            "listKind": format!("{kind}List"), "categories": ["kcp"]},
        "versions": [{
            "name": VERSION, "served": true, "storage": true,
            "schema": {"openAPIV3Schema": {
                "type": "object",
                "description": description,
                "properties": {
                    "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                    "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                },
            }},
        }],
    }))
    .expect("a CRD spec")
}

/// The spec discovery and OpenAPI describe `apibindings` with.
pub fn bindings_spec() -> CustomResourceDefinitionSpec {
    static SPEC: LazyLock<CustomResourceDefinitionSpec> = LazyLock::new(|| {
        spec(
            BINDING_KIND,
            BINDINGS,
            "One consumer of the export, as kcp's APIBinding: Ready when the consumer's binding is. Read only.",
        )
    });
    SPEC.clone()
}

/// The spec discovery and OpenAPI describe `apiexportendpointslices` with.
pub fn slices_spec() -> CustomResourceDefinitionSpec {
    static SPEC: LazyLock<CustomResourceDefinitionSpec> = LazyLock::new(|| {
        spec(
            SLICE_KIND,
            SLICES,
            "Where the export's virtual workspace is served, as kcp's APIExportEndpointSlice. Read only.",
        )
    });
    SPEC.clone()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::selector::{parse_field_selector, parse_label_selector};

    fn c1() -> ConsumerId {
        ConsumerId::parse("c1").unwrap()
    }

    fn export(namespace: &str, name: &str, status: Value) -> Value {
        json!({
            "apiVersion": "kube-bind.io/v1alpha2", "kind": "APIServiceExport",
            "metadata": {"name": name, "namespace": namespace, "uid": "u-1",
                "resourceVersion": "42", "generation": 3,
                "creationTimestamp": "2026-01-02T03:04:05Z",
                "labels": {"bindery.dev/managed": "true", "secret": "provider-only"},
                "annotations": {"kcp.io/cluster": "forged", "note": "provider-only"},
                "managedFields": [{"manager": "m"}]},
            "spec": {"resources": [{"group": "db.example.com", "resource": "things"}]},
            "status": status,
        })
    }

    fn ready(status: &str, reason: &str) -> Value {
        json!({"identityHash": "a".repeat(64), "conditions": [
            {"type": "Ready", "status": status, "reason": reason, "message": "provider text kube-bind-c1",
             "lastTransitionTime": "2026-01-02T03:04:06Z"}]})
    }

    #[test]
    fn a_consumers_export_is_an_apibinding_made_by_bindery_only() {
        let binding = binding_of(
            &export("kube-bind-c1", "pg", ready("True", "Ready")),
            &c1(),
            true,
        )
        .unwrap();
        assert_eq!(
            binding,
            json!({
                "apiVersion": "apis.kcp.io/v1alpha1", "kind": "APIBinding",
                "metadata": {"name": "pg", "uid": "u-1", "resourceVersion": "42",
                    "creationTimestamp": "2026-01-02T03:04:05Z", "generation": 3,
                    "annotations": {"kcp.io/cluster": "c1"}},
                "spec": {"reference": {"export": {"name": "pg"}}},
                "status": {"phase": "Bound", "conditions": [{"type": "Ready", "status": "True",
                    "reason": "Ready", "lastTransitionTime": "2026-01-02T03:04:06Z"}]},
            })
        );
        let unserved = binding_of(
            &export("kube-bind-c1", "pg", ready("True", "Ready")),
            &c1(),
            false,
        )
        .unwrap();
        assert_eq!(unserved["status"]["phase"], "Binding");
        assert_eq!(unserved["status"]["conditions"][0]["status"], "False");
        assert!(binding_of(&json!({"metadata": {}}), &c1(), true).is_none());
    }

    #[test]
    fn readiness_follows_the_consumers_binding() {
        let of = |status| {
            binding_of(&export("kube-bind-c1", "pg", status), &c1(), true).unwrap()["status"]
                .clone()
        };
        let not_ready = of(ready("False", "APIServiceBindingNotFound"));
        assert_eq!(not_ready["conditions"][0]["status"], "False");
        assert_eq!(
            not_ready["conditions"][0]["reason"],
            "APIServiceBindingNotFound"
        );
        assert!(
            !not_ready.to_string().contains("kube-bind-c1"),
            "the provider's message is not passed: {not_ready}"
        );
        let odd = of(ready("Unknown", "not a word; kube-bind-c1"));
        assert_eq!(odd["conditions"][0]["reason"], "NotReady");
        assert_eq!(odd["conditions"][0]["status"], "Unknown");
        let fresh = of(json!({}));
        assert_eq!(fresh["conditions"][0]["status"], "Unknown");
    }

    #[test]
    fn the_mark_replaces_whatever_the_object_carried_and_unmark_drops_it() {
        let consumer = ConsumerId::parse("c1").unwrap();
        let mut metadata = json!({"annotations": {"kcp.io/cluster": "forged", "a": "b"}})
            .as_object()
            .unwrap()
            .clone();
        mark(&mut metadata, &consumer);
        assert_eq!(metadata["annotations"]["kcp.io/cluster"], "c1");
        unmark(&mut metadata);
        assert_eq!(
            Value::Object(metadata.clone()),
            json!({"annotations": {"a": "b"}})
        );
        let mut only = json!({"name": "x", "annotations": {"kcp.io/cluster": "forged"}})
            .as_object()
            .unwrap()
            .clone();
        unmark(&mut only);
        assert_eq!(Value::Object(only), json!({"name": "x"}));
        let mut odd = json!({"annotations": "x"}).as_object().unwrap().clone();
        mark(&mut odd, &consumer);
        assert_eq!(odd["annotations"], json!({"kcp.io/cluster": "c1"}));
    }

    #[test]
    fn selectors_are_read_as_on_an_object_without_labels() {
        let labels = |s| parse_label_selector(s).unwrap();
        let fields = |s| parse_field_selector(s).unwrap();
        assert!(selected("pg", &labels(""), &fields("metadata.name=pg")));
        assert!(!selected("pg", &labels(""), &fields("metadata.name=other")));
        assert!(selected("pg", &labels("!app"), &fields("")));
        assert!(!selected("pg", &labels("app=x"), &fields("")));
        assert!(selected("pg", &labels(""), &fields("metadata.namespace=")));
        assert_eq!(
            check_fields(&fields("spec.x=1")),
            Err("field label not supported: spec.x".into())
        );
        assert!(check_fields(&fields("metadata.name=pg")).is_ok());
    }

    #[test]
    fn the_endpoint_slice_names_the_workspace_url() {
        let url = workspace_url(None, "127.0.0.1:8443", "pg");
        assert_eq!(url, "https://127.0.0.1:8443/services/export/pg");
        assert_eq!(
            workspace_url(Some("https://bindery.example/"), "ignored", "pg"),
            "https://bindery.example/services/export/pg"
        );
        let slice = endpoint_slice("pg", &url);
        assert_eq!(slice["status"]["endpoints"][0]["url"], url.as_str());
        assert_eq!(slice["metadata"]["name"], "pg");
        assert_eq!(slice["kind"], "APIExportEndpointSlice");
    }

    #[test]
    fn discovery_says_the_kcp_resources_are_read_only() {
        let mut document = json!({"resources": [
            {"name": "apibindings", "verbs": ["create", "get"]},
            {"name": "things", "verbs": ["create", "get"]}],
            "items": [{"versions": [{"resources": [{"resource": "apiexportendpointslices", "verbs": ["delete"]}]}]}]});
        narrow_verbs(&mut document);
        assert_eq!(document["resources"][0]["verbs"], json!(VERBS));
        assert_eq!(document["resources"][1]["verbs"], json!(["create", "get"]));
        assert_eq!(
            document["items"][0]["versions"][0]["resources"][0]["verbs"],
            json!(VERBS)
        );
        assert_eq!(bindings_spec().names.kind, "APIBinding");
        assert_eq!(slices_spec().scope, "Cluster");
    }
}
