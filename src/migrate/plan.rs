//! What moving one bound resource from kube-bind's konnector to bindery
//! changes, decided from the objects on both sides. Pure.
//!
//! The konnector marks what it synced: a provider copy carries
//! `kube-bind.io/cluster-namespace` (its consumer's cluster namespace) and
//! `kube-bind.io/consumer-uid` (the app object's uid); an app object carries
//! `kube-bind.io/provider-uid` and the finalizer `kubebind.io/syncer`. A
//! provider copy of this consumer is adopted by getting both identity
//! labels in place; one already labelled for another consumer or export is
//! never relabelled. Every app object must have its provider copy before
//! the app cluster's CRD may go.

use crate::translate::identity::{CONSUMER_LABEL, EXPORT_LABEL};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};

/// The konnector's annotation naming a provider copy's cluster namespace.
pub const CLUSTER_NAMESPACE_ANNOTATION: &str = "kube-bind.io/cluster-namespace";
/// The konnector's annotation on a provider copy: the app object's uid.
pub const CONSUMER_UID_ANNOTATION: &str = "kube-bind.io/consumer-uid";
/// The konnector's annotation on an app object: its provider copy's uid.
pub const PROVIDER_UID_ANNOTATION: &str = "kube-bind.io/provider-uid";
/// The konnector's finalizer on app objects.
pub const KONNECTOR_FINALIZER: &str = "kubebind.io/syncer";

/// Whose objects are moved: one consumer of one export.
pub struct Mover<'a> {
    pub cluster_namespace: &'a str,
    /// The export's identity label value.
    pub export_label: &'a str,
    /// The consumer's id, as its consumer label holds it.
    pub consumer: &'a str,
}

/// `namespace/name` (or `name`) of an object, for messages and patches.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Key {
    pub namespace: Option<String>,
    pub name: String,
}

impl std::fmt::Display for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.namespace {
            Some(namespace) => write!(f, "{namespace}/{}", self.name),
            None => f.write_str(&self.name),
        }
    }
}

/// What the move does to one resource.
#[derive(Debug, Default, PartialEq)]
pub struct Plan {
    /// Provider copies to label with the identity.
    pub adopt: Vec<Key>,
    /// Provider copies that carry the identity already.
    pub adopted: usize,
    /// Provider copies labelled for another consumer or export: left alone.
    pub foreign: Vec<Key>,
    /// App objects without a provider copy: the move stops at them.
    pub unsynced: Vec<Key>,
    /// App objects still holding the konnector's finalizer.
    pub unfinalize: Vec<Key>,
}

fn key(object: &Value) -> Key {
    let metadata = &object["metadata"];
    Key {
        namespace: metadata["namespace"].as_str().map(str::to_string),
        name: metadata["name"].as_str().unwrap_or_default().to_string(),
    }
}

fn text<'a>(object: &'a Value, field: &str, key: &str) -> Option<&'a str> {
    object["metadata"][field][key].as_str()
}

fn uid(object: &Value) -> Option<&str> {
    object["metadata"]["uid"].as_str()
}

impl Mover<'_> {
    /// The plan for `app` (the konnector's app objects of one resource) and
    /// `provider` (the provider's objects of it).
    pub fn plan(&self, app: &[Value], provider: &[Value]) -> Plan {
        let mut plan = Plan::default();
        let ours: Vec<&Value> = provider
            .iter()
            .filter(|p| {
                text(p, "annotations", CLUSTER_NAMESPACE_ANNOTATION) == Some(self.cluster_namespace)
            })
            .collect();
        for copy in &ours {
            let export = text(copy, "labels", EXPORT_LABEL);
            let consumer = text(copy, "labels", CONSUMER_LABEL);
            match (export, consumer) {
                (None, None) => plan.adopt.push(key(copy)),
                (Some(e), Some(c)) if e == self.export_label && c == self.consumer => {
                    plan.adopted += 1
                }
                _ => plan.foreign.push(key(copy)),
            }
        }
        let copied_app_uids: BTreeSet<&str> = ours
            .iter()
            .filter_map(|p| text(p, "annotations", CONSUMER_UID_ANNOTATION))
            .collect();
        let provider_uids: BTreeMap<&str, ()> = ours
            .iter()
            .filter_map(|p| uid(p))
            .map(|u| (u, ()))
            .collect();
        for object in app {
            let synced = uid(object).is_some_and(|u| copied_app_uids.contains(u))
                || text(object, "annotations", PROVIDER_UID_ANNOTATION)
                    .is_some_and(|u| provider_uids.contains_key(u));
            if !synced {
                plan.unsynced.push(key(object));
            }
            let finalized = object["metadata"]["finalizers"]
                .as_array()
                .is_some_and(|f| f.iter().any(|f| f == KONNECTOR_FINALIZER));
            if finalized {
                plan.unfinalize.push(key(object));
            }
        }
        plan
    }
}

/// The labels a provider copy gets when it is adopted.
pub fn identity_labels(mover: &Mover<'_>) -> Value {
    serde_json::json!({EXPORT_LABEL: mover.export_label, CONSUMER_LABEL: mover.consumer})
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const MOVER: Mover<'static> = Mover {
        cluster_namespace: "kube-bind-abc",
        export_label: "hash",
        consumer: "abc",
    };

    fn provider(name: &str, uid: &str, cluster: &str, app_uid: &str, labels: Value) -> Value {
        json!({"metadata": {"name": name, "namespace": "kube-bind-abc-default", "uid": uid,
            "labels": labels,
            "annotations": {CLUSTER_NAMESPACE_ANNOTATION: cluster,
                CONSUMER_UID_ANNOTATION: app_uid}}})
    }

    fn app(name: &str, uid: &str, finalized: bool) -> Value {
        let mut object = json!({"metadata": {"name": name, "namespace": "default", "uid": uid}});
        if finalized {
            object["metadata"]["finalizers"] = json!([KONNECTOR_FINALIZER]);
        }
        object
    }

    #[test]
    fn the_consumers_copies_are_adopted_once_and_anothers_never() {
        let copies = [
            provider("a", "p1", "kube-bind-abc", "a1", json!({})),
            provider(
                "b",
                "p2",
                "kube-bind-abc",
                "a2",
                json!({EXPORT_LABEL: "hash", CONSUMER_LABEL: "abc"}),
            ),
            provider(
                "c",
                "p3",
                "kube-bind-abc",
                "a3",
                json!({EXPORT_LABEL: "other", CONSUMER_LABEL: "abc"}),
            ),
            provider("d", "p4", "kube-bind-xyz", "a4", json!({})),
        ];
        let apps = [
            app("a", "a1", true),
            app("b", "a2", false),
            app("c", "a3", true),
        ];
        let plan = MOVER.plan(&apps, &copies);
        let names = |keys: &[Key]| keys.iter().map(|k| k.name.clone()).collect::<Vec<_>>();
        assert_eq!(names(&plan.adopt), ["a"]);
        assert_eq!(plan.adopted, 1);
        assert_eq!(names(&plan.foreign), ["c"]);
        assert!(plan.unsynced.is_empty(), "{:?}", plan.unsynced);
        assert_eq!(names(&plan.unfinalize), ["a", "c"]);
    }

    #[test]
    fn an_app_object_without_a_copy_stops_the_move() {
        let copies = [provider("a", "p1", "kube-bind-abc", "a1", json!({}))];
        let mut by_provider_uid = app("b", "a2", false);
        by_provider_uid["metadata"]["annotations"] = json!({PROVIDER_UID_ANNOTATION: "p1"});
        let apps = [
            app("a", "a1", false),
            by_provider_uid,
            app("new", "a9", true),
        ];
        let plan = MOVER.plan(&apps, &copies);
        assert_eq!(plan.unsynced.len(), 1);
        assert_eq!(plan.unsynced[0].to_string(), "default/new");
    }
}
