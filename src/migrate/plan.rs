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

use crate::moved_owners::references::Renamed;
use crate::translate::identity::{CONSUMER_LABEL, EXPORT_LABEL};
use crate::translate::owners::{OWNER_REFERENCES_ANNOTATION, ProviderKind, references_down};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};

pub use crate::api::keys::{
    CLUSTER_NAMESPACE_ANNOTATION, CONSUMER_UID_ANNOTATION, PROVIDER_UID_ANNOTATION,
};
/// The konnector's finalizer on app objects.
pub const KONNECTOR_FINALIZER: &str = "kubebind.io/syncer";

/// Whose objects are moved: one consumer of one export.
#[derive(Clone, Copy)]
pub struct Mover<'a> {
    pub cluster_namespace: &'a str,
    /// The export's identity label value.
    pub export_label: &'a str,
    /// The consumer's id, as its consumer label holds it.
    pub consumer: &'a str,
    /// The kinds the export binds: references to them are the provider's.
    pub kinds: &'a [ProviderKind],
    /// The uids of the export's moved objects: app object's → provider
    /// copy's ([`Mover::renamed`]).
    pub renamed: &'a Renamed,
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
    /// App objects still holding finalizers: the konnector's, and those
    /// [`Plan::carry`] gives their provider copies.
    pub unfinalize: Vec<Key>,
    /// Provider copies (adopted or to adopt) and the merge patch that gives
    /// each what its app object holds and the konnector never synced: a
    /// spec edit not synced yet, labels, annotations and finalizers added
    /// in the app cluster, and its ownerReferences as bindery stores them
    /// (those to moved objects with their copies' uids, the others in
    /// bindery's annotation).
    pub carry: Vec<(Key, Value)>,
    /// Provider copies of app objects being deleted: deleted too, as the
    /// konnector deletes the copy of an app object being deleted (after
    /// [`Plan::carry`] gave them the app object's finalizers), so that no
    /// object being deleted comes back once bindery serves the copies.
    pub delete: Vec<Key>,
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
        let ours = ours(self.cluster_namespace, provider);
        for (copy, source) in pairs(self.cluster_namespace, app, provider) {
            let export = text(copy, "labels", EXPORT_LABEL);
            let consumer = text(copy, "labels", CONSUMER_LABEL);
            match (export, consumer) {
                (None, None) => plan.adopt.push(key(copy)),
                (Some(e), Some(c)) if e == self.export_label && c == self.consumer => {
                    plan.adopted += 1
                }
                _ => {
                    plan.foreign.push(key(copy));
                    continue;
                }
            }
            if let Some(patch) = source.and_then(|source| self.carried(source, copy)) {
                plan.carry.push((key(copy), patch));
            }
            if source.is_some_and(being_deleted) && !being_deleted(copy) {
                plan.delete.push(key(copy));
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
            // One being deleted has nothing to lose (its copy, if any, is
            // deleted too).
            if !synced && !being_deleted(object) {
                plan.unsynced.push(key(object));
            }
            let finalized = object["metadata"]["finalizers"]
                .as_array()
                .is_some_and(|f| !f.is_empty());
            if finalized {
                plan.unfinalize.push(key(object));
            }
        }
        plan
    }
}

/// The provider copies the konnector made for the consumer of
/// `cluster_namespace`.
fn ours<'v>(cluster_namespace: &str, provider: &'v [Value]) -> Vec<&'v Value> {
    provider
        .iter()
        .filter(|p| text(p, "annotations", CLUSTER_NAMESPACE_ANNOTATION) == Some(cluster_namespace))
        .collect()
}

/// Each of that consumer's provider copies, with its app object if the app
/// cluster still has it.
fn pairs<'v>(
    cluster_namespace: &str,
    app: &'v [Value],
    provider: &'v [Value],
) -> Vec<(&'v Value, Option<&'v Value>)> {
    let app_by_uid: BTreeMap<&str, &Value> =
        app.iter().filter_map(|a| uid(a).map(|u| (u, a))).collect();
    ours(cluster_namespace, provider)
        .into_iter()
        .map(|copy| {
            let source = text(copy, "annotations", CONSUMER_UID_ANNOTATION)
                .and_then(|u| app_by_uid.get(u).copied())
                .or_else(|| {
                    app.iter().find(|a| {
                        text(a, "annotations", PROVIDER_UID_ANNOTATION).is_some()
                            && text(a, "annotations", PROVIDER_UID_ANNOTATION) == uid(copy)
                    })
                });
            (copy, source)
        })
        .collect()
}

/// The uids of one resource's moved objects for the consumer of
/// `cluster_namespace`: each app object's, and its provider copy's, which
/// bindery serves it with.
pub fn renamed(cluster_namespace: &str, app: &[Value], provider: &[Value]) -> Renamed {
    pairs(cluster_namespace, app, provider)
        .into_iter()
        .filter_map(|(copy, source)| Some((uid(source?)?.to_string(), uid(copy)?.to_string())))
        .collect()
}

fn being_deleted(object: &Value) -> bool {
    !object["metadata"]["deletionTimestamp"].is_null()
}

/// Whether a label or annotation is kube-bind's or kubectl's bookkeeping,
/// which is not carried over.
fn bookkeeping(key: &str) -> bool {
    key.starts_with("kube-bind.io/") || key.starts_with("kubectl.kubernetes.io/")
}

impl Mover<'_> {
    /// The ownerReferences `source`'s make on the provider, and bindery's
    /// annotation of those naming app-cluster objects, as bindery's
    /// translation stores them; the references to moved objects name
    /// their copies' uids.
    fn owners_on_the_provider(&self, source: &Value) -> (Vec<Value>, Option<Value>) {
        let mut references = source["metadata"]["ownerReferences"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        if references.is_empty() {
            return (Vec::new(), None);
        }
        for reference in &mut references {
            if let Some(served) = reference["uid"].as_str().and_then(|u| self.renamed.get(u)) {
                reference["uid"] = Value::String(served.clone());
            }
        }
        let mut metadata = serde_json::Map::new();
        metadata.insert("ownerReferences".into(), Value::Array(references));
        references_down(self.kinds, self.cluster_namespace, &mut metadata);
        let annotation = metadata
            .get("annotations")
            .and_then(|a| a.get(OWNER_REFERENCES_ANNOTATION))
            .cloned();
        let kept = match metadata.get("ownerReferences") {
            Some(Value::Array(kept)) => kept.clone(),
            _ => Vec::new(),
        };
        (kept, annotation)
    }

    /// The merge patch that gives provider `copy` what app object `source`
    /// holds of its own and the copy lacks; `None` when it lacks nothing.
    fn carried(&self, source: &Value, copy: &Value) -> Option<Value> {
        let mut patch = carried(source, copy);
        let (owners, annotation) = self.owners_on_the_provider(source);
        let present = copy["metadata"]["ownerReferences"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let missing: Vec<Value> = owners
            .into_iter()
            .filter(|o| !present.iter().any(|p| p["uid"] == o["uid"]))
            .collect();
        let metadata = &mut patch["metadata"];
        if !missing.is_empty() {
            metadata["ownerReferences"] =
                Value::Array(present.into_iter().chain(missing).collect());
        }
        if let Some(annotation) = annotation
            && copy["metadata"]["annotations"][OWNER_REFERENCES_ANNOTATION] != annotation
        {
            metadata["annotations"][OWNER_REFERENCES_ANNOTATION] = annotation;
        }
        if patch["metadata"].as_object().is_some_and(|m| m.is_empty()) {
            patch.as_object_mut().map(|p| p.remove("metadata"));
        }
        patch
            .as_object()
            .is_some_and(|p| !p.is_empty())
            .then_some(patch)
    }
}

/// The merge patch that gives provider `copy` the labels, annotations,
/// finalizers and spec app object `source` holds of its own and the copy
/// lacks (an empty object when it lacks none).
fn carried(source: &Value, copy: &Value) -> Value {
    let mut metadata = serde_json::Map::new();
    for field in ["labels", "annotations"] {
        let missing: serde_json::Map<String, Value> = source["metadata"][field]
            .as_object()
            .into_iter()
            .flatten()
            .filter(|(k, v)| !bookkeeping(k) && copy["metadata"][field].get(k.as_str()) != Some(*v))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        if !missing.is_empty() {
            metadata.insert(field.into(), Value::Object(missing));
        }
    }
    let finalizers = |object: &Value| -> Vec<Value> {
        object["metadata"]["finalizers"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    };
    let mut all = finalizers(copy);
    let before = all.len();
    for finalizer in finalizers(source) {
        if finalizer != KONNECTOR_FINALIZER && !all.contains(&finalizer) {
            all.push(finalizer);
        }
    }
    if all.len() != before {
        metadata.insert("finalizers".into(), Value::Array(all));
    }
    let mut patch = serde_json::Map::new();
    patch.insert("metadata".into(), Value::Object(metadata));
    if !source["spec"].is_null() && source["spec"] != copy["spec"] {
        patch.insert("spec".into(), source["spec"].clone());
    }
    Value::Object(patch)
}

/// The labels a provider copy gets when it is adopted.
pub fn identity_labels(mover: &Mover<'_>) -> Value {
    serde_json::json!({EXPORT_LABEL: mover.export_label, CONSUMER_LABEL: mover.consumer})
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    static RENAMED: std::sync::LazyLock<Renamed> = std::sync::LazyLock::new(Renamed::new);
    static MOVER: std::sync::LazyLock<Mover<'static>> = std::sync::LazyLock::new(|| Mover {
        cluster_namespace: "kube-bind-abc",
        export_label: "hash",
        consumer: "abc",
        kinds: &[],
        renamed: &RENAMED,
    });

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
    fn the_copy_of_an_app_object_being_deleted_is_deleted_too() {
        let mut leaving = app("a", "a1", true);
        leaving["metadata"]["deletionTimestamp"] = json!("2026-11-28T10:00:00Z");
        leaving["metadata"]["finalizers"] = json!([KONNECTOR_FINALIZER, "app.example/protect"]);
        let staying = app("b", "b1", true);
        let copies = [
            provider("a", "p1", "kube-bind-abc", "a1", json!({})),
            provider("b", "p2", "kube-bind-abc", "b1", json!({})),
        ];
        let plan = MOVER.plan(&[leaving.clone(), staying.clone()], &copies);
        assert_eq!(plan.delete, vec![key(&copies[0])]);
        // Its finalizers go first, so the copy waits as the app object did.
        let carried: Vec<&Key> = plan.carry.iter().map(|(k, _)| k).collect();
        assert_eq!(carried, vec![&key(&copies[0])]);
        // Run again once the copy is being deleted: nothing more to delete.
        let mut deleting = copies[0].clone();
        deleting["metadata"]["deletionTimestamp"] = json!("2026-11-28T10:01:00Z");
        deleting["metadata"]["finalizers"] = json!(["app.example/protect"]);
        let again = MOVER.plan(
            &[leaving.clone(), staying.clone()],
            &[deleting, copies[1].clone()],
        );
        assert!(again.delete.is_empty(), "{again:?}");
        // And once the copy is gone, the app object being deleted does not
        // stop the move as unsynced.
        let gone = MOVER.plan(&[leaving, staying], &[copies[1].clone()]);
        assert!(
            gone.unsynced.is_empty() && gone.delete.is_empty(),
            "{gone:?}"
        );
    }

    #[test]
    fn what_the_app_object_holds_of_its_own_goes_to_its_copy() {
        let copy = json!({"metadata": {"name": "a", "namespace": "kube-bind-abc-default",
            "uid": "p1", "labels": {"app": "x"},
            "annotations": {CLUSTER_NAMESPACE_ANNOTATION: "kube-bind-abc",
                CONSUMER_UID_ANNOTATION: "a1"},
            "finalizers": ["provider.example/cleanup"]},
            "spec": {"size": "2"}});
        let source = json!({"metadata": {"name": "a", "namespace": "default", "uid": "a1",
            "labels": {"app": "x", "team": "orders"},
            "annotations": {"note": "mine", PROVIDER_UID_ANNOTATION: "p1",
                "kubectl.kubernetes.io/last-applied-configuration": "{}"},
            "finalizers": [KONNECTOR_FINALIZER, "app.example/protect"]},
            "spec": {"size": "20"}});
        let plan = MOVER.plan(std::slice::from_ref(&source), std::slice::from_ref(&copy));
        assert_eq!(plan.adopt.len(), 1);
        assert_eq!(plan.unfinalize.len(), 1);
        assert_eq!(
            plan.carry,
            vec![(
                Key {
                    namespace: Some("kube-bind-abc-default".into()),
                    name: "a".into()
                },
                json!({"metadata": {"labels": {"team": "orders"},
                    "annotations": {"note": "mine"},
                    "finalizers": ["provider.example/cleanup", "app.example/protect"]},
                    "spec": {"size": "20"}})
            )]
        );
        // Once carried, nothing is left to carry.
        let carried = json!({"metadata": {"name": "a", "namespace": "kube-bind-abc-default",
            "uid": "p1", "labels": {"app": "x", "team": "orders"},
            "annotations": {CLUSTER_NAMESPACE_ANNOTATION: "kube-bind-abc",
                CONSUMER_UID_ANNOTATION: "a1", "note": "mine"},
            "finalizers": ["provider.example/cleanup", "app.example/protect"]},
            "spec": {"size": "20"}});
        assert!(MOVER.plan(&[source], &[carried]).carry.is_empty());
    }

    #[test]
    fn the_app_objects_owners_go_to_its_copy_as_bindery_stores_them() {
        let config_map = json!({"apiVersion": "v1", "kind": "ConfigMap", "name": "c", "uid": "c1"});
        let mut source = app("a", "a1", false);
        source["metadata"]["ownerReferences"] = json!([config_map,
            {"apiVersion": "example.com/v1", "kind": "Widget", "name": "b", "uid": "a2"}]);
        let copies = [
            provider("a", "p1", "kube-bind-abc", "a1", json!({})),
            provider("b", "p2", "kube-bind-abc", "a2", json!({})),
        ];
        let apps = [source, app("b", "a2", false)];
        let renamed = renamed(MOVER.cluster_namespace, &apps, &copies);
        assert_eq!(
            renamed,
            Renamed::from([("a1".into(), "p1".into()), ("a2".into(), "p2".into())])
        );
        let kinds = [ProviderKind {
            group: "example.com".into(),
            kind: "Widget".into(),
            prefixed: false,
        }];
        let mover = Mover {
            kinds: &kinds,
            renamed: &renamed,
            ..*MOVER
        };
        let plan = mover.plan(&apps, &copies);
        assert_eq!(plan.carry.len(), 1, "{:?}", plan.carry);
        let (key, patch) = &plan.carry[0];
        assert_eq!(key.name, "a");
        // The reference to a moved object names its copy's uid, for the
        // provider's collector; the one to the app ConfigMap is kept where
        // bindery's translation reads it back from, in its place.
        assert_eq!(
            patch["metadata"]["ownerReferences"],
            json!([{"apiVersion": "example.com/v1", "kind": "Widget", "name": "b", "uid": "p2"}])
        );
        let kept: Value = serde_json::from_str(
            patch["metadata"]["annotations"][OWNER_REFERENCES_ANNOTATION]
                .as_str()
                .unwrap(),
        )
        .unwrap();
        assert_eq!(kept, json!([{"index": 0, "reference": config_map}]));
        // Once carried, nothing is left to carry.
        let mut carried = copies[0].clone();
        carried["metadata"]["ownerReferences"] = patch["metadata"]["ownerReferences"].clone();
        carried["metadata"]["annotations"][OWNER_REFERENCES_ANNOTATION] =
            patch["metadata"]["annotations"][OWNER_REFERENCES_ANNOTATION].clone();
        let again = mover.plan(&apps, &[carried, copies[1].clone()]);
        assert!(again.carry.is_empty(), "{:?}", again.carry);
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
