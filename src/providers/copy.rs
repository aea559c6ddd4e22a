//! What moving a namespace to another provider writes there (pure): each
//! object's copy, as its writers made it (name, labels, annotations,
//! finalizers, owner references, spec and every other field) without what
//! the old provider's kube-apiserver set (uid, resourceVersion, generation,
//! timestamps, managed fields); its status apart, written once the copy is
//! made (through the status subresource, as a controller writes it); and
//! owner references between moved objects pointed at the copies.

use serde_json::Value;
use std::collections::HashMap;

/// The metadata a kube-apiserver sets, which a copy does not carry.
const SET_BY_THE_SERVER: [&str; 7] = [
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "managedFields",
];

/// The copy of `object` to create at the new provider, and its status to
/// write after (`None`: it has none).
pub fn copy_of(object: &Value) -> (Value, Option<Value>) {
    let mut copy = object.clone();
    let status = copy
        .as_object_mut()
        .and_then(|fields| fields.remove("status"));
    if let Some(metadata) = copy.get_mut("metadata").and_then(Value::as_object_mut) {
        for field in SET_BY_THE_SERVER {
            metadata.remove(field);
        }
        metadata.remove("selfLink");
    }
    (copy, status)
}

/// `references` (an object's `ownerReferences`) with each moved owner's
/// uid (`copies`: old uid to the copy's) made the copy's; `None` when none
/// of them moved.
pub fn owners_moved(references: &Value, copies: &HashMap<String, String>) -> Option<Value> {
    let references = references.as_array()?;
    let mut changed = false;
    let moved = references
        .iter()
        .map(|reference| {
            let mut reference = reference.clone();
            let copy = reference["uid"].as_str().and_then(|uid| copies.get(uid));
            if let Some(copy) = copy {
                reference["uid"] = Value::String(copy.clone());
                changed = true;
            }
            reference
        })
        .collect();
    changed.then_some(Value::Array(moved))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_copy_is_what_its_writers_made_its_status_apart() {
        let object = json!({"apiVersion": "g/v1", "kind": "Gadget",
            "metadata": {"name": "a", "namespace": "team", "uid": "u1", "resourceVersion": "5",
                "generation": 2, "creationTimestamp": "t", "managedFields": [{}],
                "labels": {"l": "1"}, "annotations": {"a": "1"}, "finalizers": ["f"],
                "ownerReferences": [{"uid": "o"}]},
            "spec": {"size": 1}, "status": {"phase": "Ready"}});
        let (copy, status) = copy_of(&object);
        assert_eq!(
            copy,
            json!({"apiVersion": "g/v1", "kind": "Gadget",
            "metadata": {"name": "a", "namespace": "team",
                "labels": {"l": "1"}, "annotations": {"a": "1"}, "finalizers": ["f"],
                "ownerReferences": [{"uid": "o"}]},
            "spec": {"size": 1}})
        );
        assert_eq!(status, Some(json!({"phase": "Ready"})));
        assert_eq!(copy_of(&json!({"metadata": {"name": "b"}})).1, None);
    }

    #[test]
    fn owners_that_moved_are_their_copies() {
        let copies = HashMap::from([("old".to_string(), "new".to_string())]);
        let references = json!([{"name": "p", "uid": "old"}, {"name": "cm", "uid": "app"}]);
        assert_eq!(
            owners_moved(&references, &copies),
            Some(json!([{"name": "p", "uid": "new"}, {"name": "cm", "uid": "app"}]))
        );
        assert_eq!(owners_moved(&json!([{"uid": "app"}]), &copies), None);
        assert_eq!(owners_moved(&Value::Null, &copies), None);
    }
}
