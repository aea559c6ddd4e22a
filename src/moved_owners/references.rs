//! Which ownerReferences an app object holds aside while its owners move to
//! the provider, and how they go back. Pure.
//!
//! The app cluster's garbage collector deletes a dependent whose owner it
//! cannot find under the uid the reference names. While a move removes the
//! app cluster's copy of a CRD, the owners are gone; once bindery serves
//! them, they have the uid of their provider copy. A reference rewritten
//! early names an owner the collector finds under another uid; one left as
//! it is names one it cannot find at all. Either way the dependent goes. So
//! the references to moved objects are taken out of the dependent, held on
//! it (in an annotation, with the uid bindery will serve) and put back once
//! bindery serves their owners.

use serde_json::{Map, Value, json};
use std::collections::BTreeMap;

/// Marks an object that holds references aside (a label, so that the
/// objects to put back are found with a selector).
pub const HELD_LABEL: &str = "bindery.dev/held-owner-references";
/// The references held aside: a JSON list, each with the uid its owner is
/// served with once moved.
pub const HELD_ANNOTATION: &str = "bindery.dev/held-owner-references";

/// The uid each moved object had in the app cluster, and the uid bindery
/// serves it with (its provider copy's).
pub type Renamed = BTreeMap<String, String>;

fn references(metadata: &Value) -> Vec<Value> {
    metadata["ownerReferences"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

fn held(metadata: &Value) -> Vec<Value> {
    metadata["annotations"][HELD_ANNOTATION]
        .as_str()
        .and_then(|text| serde_json::from_str::<Vec<Value>>(text).ok())
        .unwrap_or_default()
}

fn uid(reference: &Value) -> Option<&str> {
    reference["uid"].as_str()
}

/// The merge patch for a list of references, `null` when it is empty.
fn list_or_null(list: Vec<Value>) -> Value {
    match list.is_empty() {
        true => Value::Null,
        false => Value::Array(list),
    }
}

/// The merge patch that takes `object`'s references to moved objects out
/// and holds them on it, each with the uid its owner will be served with;
/// `None` when it has no such reference. `object` is its metadata form (or
/// the whole object). The patch carries the object's resourceVersion, so
/// it applies only to what was read.
pub fn hold(object: &Value, renamed: &Renamed) -> Option<Value> {
    let metadata = &object["metadata"];
    let (moving, kept): (Vec<Value>, Vec<Value>) = references(metadata)
        .into_iter()
        .partition(|r| uid(r).is_some_and(|u| renamed.contains_key(u)));
    if moving.is_empty() {
        return None;
    }
    let mut all = held(metadata);
    for mut reference in moving {
        if let Some(served) = uid(&reference).and_then(|u| renamed.get(u)) {
            reference["uid"] = Value::String(served.clone());
        }
        if !all.iter().any(|h| uid(h) == uid(&reference)) {
            all.push(reference);
        }
    }
    Some(json!({"metadata": {
        "resourceVersion": metadata["resourceVersion"],
        "ownerReferences": list_or_null(kept),
        "labels": {HELD_LABEL: "true"},
        "annotations": {HELD_ANNOTATION: Value::Array(all).to_string()},
    }}))
}

/// The merge patch that puts back the references held on `object` whose
/// owner's `apiVersion` is `served`, and keeps the others held; `None` when
/// none is served.
pub fn put_back(object: &Value, served: &dyn Fn(&str) -> bool) -> Option<Value> {
    let metadata = &object["metadata"];
    let (back, still): (Vec<Value>, Vec<Value>) = held(metadata)
        .into_iter()
        .partition(|r| r["apiVersion"].as_str().is_some_and(served));
    if back.is_empty() {
        return None;
    }
    let mut all = references(metadata);
    for reference in back {
        if !all.iter().any(|r| uid(r) == uid(&reference)) {
            all.push(reference);
        }
    }
    let mut patch = Map::new();
    patch.insert(
        "resourceVersion".into(),
        metadata["resourceVersion"].clone(),
    );
    patch.insert("ownerReferences".into(), Value::Array(all));
    match still.is_empty() {
        true => {
            patch.insert("labels".into(), json!({HELD_LABEL: null}));
            patch.insert("annotations".into(), json!({HELD_ANNOTATION: null}));
        }
        false => {
            patch.insert(
                "annotations".into(),
                json!({HELD_ANNOTATION: Value::Array(still).to_string()}),
            );
        }
    }
    Some(json!({ "metadata": patch }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reference(api_version: &str, kind: &str, name: &str, uid: &str) -> Value {
        json!({"apiVersion": api_version, "kind": kind, "name": name, "uid": uid})
    }

    /// A merge patch applied as kube-apiserver applies it (RFC 7386).
    fn merged(target: &Value, patch: &Value) -> Value {
        match (target, patch) {
            (Value::Object(target), Value::Object(patch)) => {
                let mut out = target.clone();
                for (key, value) in patch {
                    if value.is_null() {
                        out.remove(key);
                    } else {
                        let next = merged(out.get(key).unwrap_or(&Value::Null), value);
                        out.insert(key.clone(), next);
                    }
                }
                Value::Object(out)
            }
            (_, patch) => patch.clone(),
        }
    }

    #[test]
    fn references_to_moved_owners_are_held_with_their_new_uid_and_put_back() {
        let renamed = Renamed::from([("app-w".to_string(), "provider-w".to_string())]);
        let other = reference("v1", "ConfigMap", "settings", "cm-1");
        let object = json!({"metadata": {"name": "cm", "resourceVersion": "7",
            "labels": {"app": "x"},
            "ownerReferences": [
                reference("example.com/v1", "Widget", "w", "app-w"), other.clone()]}});
        let patch = hold(&object, &renamed).expect("one reference moves");
        assert_eq!(patch["metadata"]["resourceVersion"], "7");
        let holding = merged(&object, &patch);
        assert_eq!(holding["metadata"]["ownerReferences"], json!([other]));
        assert_eq!(
            holding["metadata"]["labels"],
            json!({"app": "x", HELD_LABEL: "true"})
        );
        assert_eq!(
            held(&holding["metadata"]),
            vec![reference("example.com/v1", "Widget", "w", "provider-w")]
        );
        // Held once: holding again changes nothing.
        assert_eq!(hold(&holding, &renamed), None);
        // Not while the owner's API is not served yet.
        assert_eq!(put_back(&holding, &|v| v == "other.io/v1"), None);
        let back = merged(
            &holding,
            &put_back(&holding, &|v| v == "example.com/v1").expect("served"),
        );
        assert_eq!(
            back["metadata"]["ownerReferences"],
            json!([
                other,
                reference("example.com/v1", "Widget", "w", "provider-w")
            ])
        );
        assert_eq!(back["metadata"]["labels"], json!({"app": "x"}));
        assert!(back["metadata"]["annotations"][HELD_ANNOTATION].is_null());
        assert_eq!(put_back(&back, &|_| true), None);
    }

    #[test]
    fn only_the_served_owners_go_back_the_others_stay_held() {
        let renamed = Renamed::from([
            ("a".to_string(), "pa".to_string()),
            ("b".to_string(), "pb".to_string()),
        ]);
        let object = json!({"metadata": {"name": "cm", "resourceVersion": "1",
            "ownerReferences": [reference("one.io/v1", "A", "a", "a"),
                reference("two.io/v1", "B", "b", "b")]}});
        let holding = merged(&object, &hold(&object, &renamed).unwrap());
        assert!(
            holding["metadata"]["ownerReferences"].is_null(),
            "{holding}"
        );
        let half = merged(
            &holding,
            &put_back(&holding, &|v| v == "one.io/v1").unwrap(),
        );
        assert_eq!(
            half["metadata"]["ownerReferences"],
            json!([reference("one.io/v1", "A", "a", "pa")])
        );
        assert_eq!(half["metadata"]["labels"][HELD_LABEL], "true");
        assert_eq!(
            held(&half["metadata"]),
            vec![reference("two.io/v1", "B", "b", "pb")]
        );
    }

    #[test]
    fn an_object_without_references_to_moved_owners_is_left_alone() {
        let renamed = Renamed::from([("a".to_string(), "pa".to_string())]);
        let object =
            json!({"metadata": {"ownerReferences": [reference("v1", "ConfigMap", "c", "c")]}});
        assert_eq!(hold(&object, &renamed), None);
        assert_eq!(hold(&json!({"metadata": {}}), &renamed), None);
        assert_eq!(put_back(&object, &|_| true), None);
    }
}
