//! Patches into provider terms. A patch may touch the namespace, a
//! cluster-scoped name or the labels; it may never set, change or remove the
//! export's identity labels.

use super::binding::BoundResource;
use super::identity::is_reserved_label;
use super::objects::{Refusal, metadata_down, stamp_labels};
use serde_json::{Map, Value};

/// A JSON merge patch (`application/merge-patch+json`), in place. The object's
/// `name` is the target's, for messages.
/// `current_labels` are the target's labels now: `labels: null` must remove
/// those of the consumer's and keep the identity ones.
pub fn merge_patch_down(
    bound: &BoundResource,
    patch: &mut Value,
    name: &str,
    current_labels: Option<&Map<String, Value>>,
) -> Result<(), Refusal> {
    let Some(metadata) = patch.get_mut("metadata").and_then(Value::as_object_mut) else {
        return Ok(());
    };
    match metadata.get("labels") {
        // `labels: null` removes every label: keep the identity ones.
        Some(Value::Null) => {
            let removals: Map<String, Value> = current_labels
                .into_iter()
                .flatten()
                .filter(|(key, _)| !is_reserved_label(key))
                .map(|(key, _)| (key.clone(), Value::Null))
                .collect();
            metadata.insert("labels".into(), Value::Object(removals));
            stamp_labels(bound, metadata);
        }
        Some(Value::Object(labels)) => {
            if let Some(key) = labels.keys().find(|k| is_reserved_label(k)) {
                return Err(reserved(name, key));
            }
        }
        _ => {}
    }
    // Labels were checked above; map the namespace and name only.
    metadata_down(bound, metadata, false)
}

/// A JSON patch (`application/json-patch+json`), in place.
pub fn json_patch_down(
    bound: &BoundResource,
    patch: &mut Value,
    name: &str,
) -> Result<(), Refusal> {
    let Some(operations) = patch.as_array_mut() else {
        return Ok(());
    };
    for operation in operations.iter_mut() {
        let Some(operation) = operation.as_object_mut() else {
            continue;
        };
        for pointer_field in ["path", "from"] {
            if let Some(key) = operation
                .get(pointer_field)
                .and_then(Value::as_str)
                .and_then(reserved_label_in_pointer)
            {
                return Err(reserved(name, &key));
            }
        }
        let op = operation
            .get("op")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let path = operation
            .get("path")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        match (op.as_str(), path.as_str()) {
            ("remove", "/metadata/labels") => {
                // Removing every label keeps the identity ones.
                let mut metadata = Map::new();
                stamp_labels(bound, &mut metadata);
                operation.insert("op".into(), Value::String("replace".into()));
                operation.insert(
                    "value".into(),
                    metadata.shift_remove("labels").unwrap_or_default(),
                );
            }
            ("add" | "replace", "/metadata/labels") => {
                if let Some(labels) = operation.get_mut("value").and_then(Value::as_object_mut) {
                    if let Some(key) = labels.keys().find(|k| is_reserved_label(k)) {
                        return Err(reserved(name, key));
                    }
                    let mut metadata = Map::new();
                    metadata.insert("labels".into(), Value::Object(std::mem::take(labels)));
                    stamp_labels(bound, &mut metadata);
                    *labels = match metadata.shift_remove("labels") {
                        Some(Value::Object(labels)) => labels,
                        _ => Map::new(),
                    };
                }
            }
            ("add" | "replace", "/metadata") => {
                if let Some(metadata) = operation.get_mut("value").and_then(Value::as_object_mut) {
                    metadata_down(bound, metadata, true)?;
                }
            }
            ("add" | "replace" | "test", "/metadata/namespace") if bound.namespaced => {
                if let Some(Value::String(ns)) = operation.get_mut("value")
                    && !ns.is_empty()
                {
                    *ns = bound.namespaces.to_provider(ns);
                }
            }
            ("add" | "replace" | "test", "/metadata/name" | "/metadata/generateName")
                if !bound.namespaced =>
            {
                if let Some(Value::String(value)) = operation.get_mut("value")
                    && !value.is_empty()
                {
                    *value = bound.provider_name(value);
                }
            }
            _ => {}
        }
    }
    Ok(())
}

/// The reserved label a JSON pointer names, if any (`/metadata/labels/<key>`
/// with `~1` for `/` and `~0` for `~`).
fn reserved_label_in_pointer(pointer: &str) -> Option<String> {
    let key = pointer.strip_prefix("/metadata/labels/")?;
    let key = key.replace("~1", "/").replace("~0", "~");
    is_reserved_label(&key).then_some(key)
}

fn reserved(name: &str, key: &str) -> Refusal {
    Refusal::ReservedLabel {
        name: name.to_string(),
        key: key.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::translate::binding::fixtures::{gadgets, widgets};
    use serde_json::json;

    #[test]
    fn merge_patch_keeps_identity_and_maps_namespace() {
        let w = widgets();
        let mut patch =
            json!({"metadata": {"labels": null, "namespace": "ns"}, "spec": {"size": "big"}});
        merge_patch_down(&w, &mut patch, "a", None).unwrap();
        assert_eq!(patch["metadata"]["namespace"], "kube-bind-c1-ns");
        assert_eq!(patch["metadata"]["labels"]["bindery.dev/consumer"], "c1");
        assert_eq!(patch["spec"]["size"], "big");

        let mut patch = json!({"metadata": {"labels": {"bindery.dev/consumer": null}}});
        assert!(merge_patch_down(&w, &mut patch, "a", None).is_err());

        let mut patch = json!({"metadata": {"labels": {"app": "x"}}});
        merge_patch_down(&w, &mut patch, "a", None).unwrap();
        assert_eq!(patch, json!({"metadata": {"labels": {"app": "x"}}}));
    }

    #[test]
    fn json_patch_cannot_touch_identity() {
        let w = widgets();
        for op in [
            json!([{"op": "remove", "path": "/metadata/labels/bindery.dev~1export"}]),
            json!([{"op": "copy", "from": "/metadata/labels/bindery.dev~1export", "path": "/spec/x"}]),
            json!([{"op": "add", "path": "/metadata/labels", "value": {"bindery.dev/consumer": "c2"}}]),
        ] {
            let mut patch = op.clone();
            assert!(json_patch_down(&w, &mut patch, "a").is_err(), "{op}");
        }

        let mut patch = json!([{"op": "remove", "path": "/metadata/labels"}]);
        json_patch_down(&w, &mut patch, "a").unwrap();
        assert_eq!(patch[0]["op"], "replace");
        assert_eq!(patch[0]["value"]["bindery.dev/consumer"], "c1");

        let mut patch =
            json!([{"op": "replace", "path": "/metadata/labels", "value": {"app": "y"}}]);
        json_patch_down(&w, &mut patch, "a").unwrap();
        assert_eq!(patch[0]["value"]["app"], "y");
        assert_eq!(patch[0]["value"]["bindery.dev/consumer"], "c1");
    }

    #[test]
    fn json_patch_maps_names() {
        let mut patch = json!([{"op": "test", "path": "/metadata/name", "value": "g"}]);
        json_patch_down(&gadgets(), &mut patch, "g").unwrap();
        assert_eq!(patch[0]["value"], "kube-bind-c1-g");
    }

    proptest::proptest! {
        #[test]
        fn arbitrary_patches_never_panic(raw in "\\PC{0,60}") {
            if let Ok(mut value) = serde_json::from_str::<Value>(&raw) {
                let _ = json_patch_down(&widgets(), &mut value.clone(), "a");
                let _ = merge_patch_down(&gadgets(), &mut value, "a", None);
            }
        }
    }
}
