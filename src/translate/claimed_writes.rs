//! The bodies of writes to claimed objects, as bindery sends them to the
//! consumer's app cluster: built from what bindery read of the request (or,
//! for a protobuf object it cannot read, from what a dry run made of it),
//! encoded by bindery, and pinned to the resourceVersion whose object was
//! checked against the claims. If the object changes in between,
//! kube-apiserver answers 409 Conflict (or, for a JSON patch, fails its
//! `test`), instead of the write landing on an object no claim covered when
//! it was checked. Pure.

use crate::wire::body::PatchType;
use serde_json::{Map, Value, json};

/// The metadata a server sets, which a write made from a dry run's object
/// must not carry: the real write sets its own (or, for an update, keeps
/// the stored object's).
const SERVER_SET: [&str; 7] = [
    "uid",
    "resourceVersion",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "managedFields",
    "generation",
];

/// `selfLink` is no longer set, but an old server's would be stale too.
const SELF_LINK: &str = "selfLink";

/// Which version a write is pinned to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Pin {
    /// The checked version, by bindery: a conflict means the object moved
    /// on, and the write may be checked and tried again.
    Checked,
    /// A version the caller gave (its own precondition), kept.
    Callers(String),
    /// None could be set: the body is not one kube-apiserver will take (its
    /// dry run says why); it is never written.
    Unpinned,
}

/// A write body, pinned.
#[derive(Clone, Debug, PartialEq)]
pub struct Pinned {
    pub body: Value,
    pub pin: Pin,
}

/// A created object made from a dry run's `made` object: without what the
/// server set, so the real create makes the object the dry run checked.
pub fn create_from_trial(made: Value) -> Value {
    without(made, &SERVER_SET)
}

/// An update made from a dry run's `made` object: without what the server
/// set (the uid stays: it is the updated object's, a precondition), pinned
/// to `checked`.
pub fn update_from_trial(made: Value, checked: &str) -> Pinned {
    let unset: Vec<&str> = SERVER_SET
        .iter()
        .copied()
        .filter(|field| *field != "uid")
        .collect();
    pin_object(without(made, &unset), checked)
}

fn without(mut object: Value, fields: &[&str]) -> Value {
    if let Some(Value::Object(metadata)) = object.get_mut("metadata") {
        metadata.retain(|key, _| !fields.contains(&key.as_str()) && key != SELF_LINK);
    }
    object
}

/// An object (an update's body, or a merge, strategic or apply patch)
/// pinned to `checked`, unless it carries a version of its own (a null or
/// empty one would make the write unconditional: it is replaced).
pub fn pin_object(object: Value, checked: &str) -> Pinned {
    pin_at(object, "metadata", checked, |own| !own.is_empty())
}

/// `value` with `checked` as `<field>.resourceVersion` (a null `field` is
/// an empty one), unless the caller's version is there; unpinned when
/// either is no object.
fn pin_at(mut value: Value, field: &str, checked: &str, own: impl Fn(&str) -> bool) -> Pinned {
    let Some(fields) = value.as_object_mut() else {
        return Pinned {
            body: value,
            pin: Pin::Unpinned,
        };
    };
    let inner = fields
        .entry(field)
        .or_insert_with(|| Value::Object(Map::new()));
    if inner.is_null() {
        *inner = Value::Object(Map::new());
    }
    let Value::Object(inner) = inner else {
        return Pinned {
            body: value,
            pin: Pin::Unpinned,
        };
    };
    let pin = match inner.get("resourceVersion") {
        Some(Value::String(version)) if own(version) => Pin::Callers(version.clone()),
        _ => {
            inner.insert("resourceVersion".into(), json!(checked));
            Pin::Checked
        }
    };
    Pinned { body: value, pin }
}

/// A patch of `patch_type` pinned to `checked`. A JSON patch is pinned by
/// a `test` first, which no later operation can undo. A null strategic
/// merge patch changes nothing, as an empty one does.
pub fn pin_patch(patch_type: PatchType, patch: Value, checked: &str) -> Pinned {
    match (patch_type, patch) {
        (PatchType::Json, Value::Array(operations)) => {
            let mut pinned = vec![json!({
                "op": "test", "path": "/metadata/resourceVersion", "value": checked,
            })];
            pinned.extend(operations);
            Pinned {
                body: Value::Array(pinned),
                pin: Pin::Checked,
            }
        }
        (PatchType::Json, other) => Pinned {
            body: other,
            pin: Pin::Unpinned,
        },
        (PatchType::StrategicMerge, Value::Null) => pin_object(json!({}), checked),
        (_, Value::Null) => Pinned {
            body: Value::Null,
            pin: Pin::Unpinned,
        },
        (_, object) => pin_object(object, checked),
    }
}

/// DeleteOptions with a resourceVersion precondition of `checked`, unless
/// they carry one of their own (even an empty one, which kube-apiserver
/// compares as it is).
pub fn pin_delete(options: Value, checked: &str) -> Pinned {
    pin_at(options, "preconditions", checked, |_| true)
}

/// The same DeleteOptions, as a dry run.
pub fn dry_run_delete(mut options: Value) -> Value {
    if let Some(fields) = options.as_object_mut() {
        fields.insert("dryRun".into(), json!(["All"]));
    }
    options
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_object_is_pinned_unless_it_carries_its_own_version() {
        let pinned = pin_object(json!({"metadata": {"name": "a"}}), "7");
        assert_eq!(pinned.body["metadata"]["resourceVersion"], "7");
        assert_eq!(pinned.pin, Pin::Checked);
        let own = pin_object(json!({"metadata": {"resourceVersion": "5"}}), "7");
        assert_eq!(own.body["metadata"]["resourceVersion"], "5");
        assert_eq!(own.pin, Pin::Callers("5".into()));
        for bare in [
            json!({"data": {}}),
            json!({"metadata": null}),
            json!({"metadata": {"resourceVersion": null}}),
            json!({"metadata": {"resourceVersion": ""}}),
        ] {
            let pinned = pin_object(bare.clone(), "7");
            assert_eq!(pinned.body["metadata"]["resourceVersion"], "7", "{bare}");
            assert_eq!(pinned.pin, Pin::Checked);
        }
        // What cannot be pinned is marked so, never sent unpinned.
        for odd in [json!([]), json!("x"), json!({"metadata": "x"})] {
            assert_eq!(pin_object(odd.clone(), "7").pin, Pin::Unpinned, "{odd}");
        }
    }

    #[test]
    fn every_patch_type_is_pinned() {
        for patch_type in [
            PatchType::Merge,
            PatchType::StrategicMerge,
            PatchType::Apply,
        ] {
            let pinned = pin_patch(patch_type, json!({"data": {"k": "v"}}), "9");
            assert_eq!(pinned.body["metadata"]["resourceVersion"], "9");
            assert_eq!(pinned.body["data"]["k"], "v");
        }
        let json_patch = pin_patch(
            PatchType::Json,
            json!([{"op": "remove", "path": "/metadata/resourceVersion"}]),
            "9",
        );
        assert_eq!(
            json_patch.body,
            json!([{"op": "test", "path": "/metadata/resourceVersion", "value": "9"},
                {"op": "remove", "path": "/metadata/resourceVersion"}])
        );
        assert_eq!(json_patch.pin, Pin::Checked);
        assert_eq!(
            pin_patch(PatchType::StrategicMerge, Value::Null, "9").body,
            json!({"metadata": {"resourceVersion": "9"}})
        );
        assert_eq!(
            pin_patch(PatchType::Merge, Value::Null, "9").pin,
            Pin::Unpinned,
            "kube-apiserver refuses a null merge patch"
        );
        assert_eq!(
            pin_patch(PatchType::Json, json!({}), "9").pin,
            Pin::Unpinned
        );
    }

    #[test]
    fn deletes_are_pinned_with_a_precondition() {
        let options = json!({"kind": "DeleteOptions", "apiVersion": "meta.k8s.io/v1"});
        let pinned = pin_delete(options.clone(), "3");
        assert_eq!(pinned.body["preconditions"]["resourceVersion"], "3");
        assert_eq!(pinned.pin, Pin::Checked);
        let own = pin_delete(
            json!({"preconditions": {"resourceVersion": "2", "uid": "u"}}),
            "3",
        );
        assert_eq!(
            own.body["preconditions"],
            json!({"resourceVersion": "2", "uid": "u"})
        );
        assert_eq!(own.pin, Pin::Callers("2".into()));
        assert_eq!(dry_run_delete(pinned.body)["dryRun"], json!(["All"]));
        assert_eq!(
            pin_delete(json!({"preconditions": 1}), "3").pin,
            Pin::Unpinned
        );
    }

    #[test]
    fn what_a_dry_run_made_is_written_without_what_the_server_set() {
        let made = json!({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": {"name": "s", "namespace": "default", "labels": {"share": "yes"},
                "uid": "u", "resourceVersion": "12", "creationTimestamp": "2026-01-01T00:00:00Z",
                "generation": 1, "selfLink": "/x", "managedFields": [{"manager": "kubectl"}]},
            "data": {"a": "Yg=="}});
        assert_eq!(
            create_from_trial(made.clone()),
            json!({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                "metadata": {"name": "s", "namespace": "default", "labels": {"share": "yes"}},
                "data": {"a": "Yg=="}})
        );
        let update = update_from_trial(made, "10");
        assert_eq!(
            update.body["metadata"],
            json!({"name": "s", "namespace": "default", "labels": {"share": "yes"},
                "uid": "u", "resourceVersion": "10"})
        );
        assert_eq!(update.pin, Pin::Checked);
    }
}
