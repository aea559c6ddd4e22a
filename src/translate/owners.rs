//! ownerReferences across the two clusters. A reference to a bound object
//! (a kind the consumer has bound) names an object on the provider, so it is
//! stored as a reference there, for the provider's garbage collector. Any
//! other reference names an object of the app cluster, which the provider
//! does not hold: its collector would delete the dependent as dangling. Such
//! references are kept in an annotation the provider ignores, and read back
//! in place, in the order the caller wrote them, for the app cluster's own
//! collector, as it reads a local CRD's references. A reference stored on
//! the provider to a kind the consumer has not bound is the provider's own
//! (kube-bind's to the cluster Namespace, or a provider controller's): it is
//! never shown, and writes keep it.

use serde_json::{Map, Value, json};
use std::sync::Arc;

/// The annotation holding the references to app-cluster objects, each with
/// its position in the list the caller wrote.
pub const OWNER_REFERENCES_ANNOTATION: &str = "bindery.dev/owner-references";

/// A kind whose objects live on the provider: one the consumer has bound.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ProviderKind {
    pub group: String,
    pub kind: String,
    /// Cluster-scoped with prefixed names: a reference's name is mapped.
    pub prefixed: bool,
}

/// Every kind a consumer has bound, sorted.
pub type ProviderKinds = Arc<[ProviderKind]>;

fn provider_kind<'a>(kinds: &'a [ProviderKind], reference: &Value) -> Option<&'a ProviderKind> {
    let api_version = reference.get("apiVersion")?.as_str()?;
    let kind = reference.get("kind")?.as_str()?;
    let group = api_version.rsplit_once('/').map_or("", |(group, _)| group);
    kinds.iter().find(|k| k.group == group && k.kind == kind)
}

/// Whether `reference` is an `OwnerReference` as Go decodes one: an object
/// of its fields only, each of its type (or `null`).
fn well_formed(reference: &Value) -> bool {
    let Some(fields) = reference.as_object() else {
        return false;
    };
    fields.iter().all(|(key, value)| match key.as_str() {
        "apiVersion" | "kind" | "name" | "uid" => value.is_string() || value.is_null(),
        "controller" | "blockOwnerDeletion" => value.is_boolean() || value.is_null(),
        _ => false,
    })
}

/// kube-apiserver's `ValidateOwnerReferences` (apimachinery
/// `api/validation/objectmeta.go`): whether it accepts these references.
fn valid(references: &[Value]) -> bool {
    let text = |reference: &Value, field: &str| -> String {
        reference
            .get(field)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    let mut controllers = 0;
    references.iter().all(|reference| {
        let api_version = text(reference, "apiVersion");
        // `schema.ParseGroupVersion`: at most one slash; "" and "/" are empty.
        let version = match api_version.matches('/').count() {
            _ if api_version.is_empty() || api_version == "/" => "",
            0 => api_version.as_str(),
            1 => api_version.split_once('/').map_or("", |(_, v)| v),
            _ => "",
        };
        let kind = text(reference, "kind");
        if reference.get("controller") == Some(&Value::Bool(true)) {
            controllers += 1;
        }
        let refused = version.is_empty()
            || kind.is_empty()
            || text(reference, "name").is_empty()
            || text(reference, "uid").is_empty()
            || (api_version == "v1" && kind == "Event")
            || controllers > 1;
        !refused
    })
}

/// A reference as Go stores it: `null` fields are absent.
fn stored(reference: &Value) -> Value {
    let mut fields = reference.as_object().cloned().unwrap_or_default();
    fields.retain(|_, value| !value.is_null());
    Value::Object(fields)
}

/// Moves the references to app-cluster objects into the annotation and maps
/// the names of prefixed cluster-scoped owners, in place. References that
/// kube-apiserver would refuse, or not decode, are left as they are, for
/// the provider to refuse.
pub fn references_down(
    kinds: &[ProviderKind],
    cluster_namespace: &str,
    metadata: &mut Map<String, Value>,
) {
    let Some(Value::Array(references)) = metadata.get("ownerReferences") else {
        return;
    };
    if !references.iter().all(well_formed) || !valid(references) {
        return;
    }
    let mut kept = Vec::new();
    let mut hidden = Vec::new();
    for (index, reference) in references.iter().enumerate() {
        match provider_kind(kinds, reference) {
            Some(kind) => {
                let mut reference = reference.clone();
                if kind.prefixed
                    && let Some(Value::String(name)) = reference.get_mut("name")
                {
                    *name = format!("{cluster_namespace}-{name}");
                }
                kept.push(reference);
            }
            None => hidden.push(json!({"index": index, "reference": stored(reference)})),
        }
    }
    if hidden.is_empty() {
        metadata.insert("ownerReferences".into(), Value::Array(kept));
        return;
    }
    let hidden_uids: Vec<String> = hidden
        .iter()
        .filter_map(|h| h["reference"]["uid"].as_str().map(str::to_string))
        .collect();
    if kept.is_empty() {
        metadata.shift_remove("ownerReferences");
    } else {
        metadata.insert("ownerReferences".into(), Value::Array(kept));
    }
    let annotations = metadata.entry("annotations").or_insert(Value::Null);
    if !annotations.is_object() {
        *annotations = Value::Object(Map::new());
    }
    if let Some(annotations) = annotations.as_object_mut() {
        annotations.insert(
            OWNER_REFERENCES_ANNOTATION.into(),
            Value::String(Value::Array(hidden).to_string()),
        );
    }
    if let Some(Value::Array(entries)) = metadata.get_mut("managedFields") {
        for entry in entries {
            if let Some(fields) = entry.get_mut("fieldsV1") {
                managed_down(fields, &hidden_uids);
            }
        }
    }
}

/// Puts the references kept in the annotation back in their places, maps
/// the names of prefixed cluster-scoped owners back, and removes the
/// annotation, in place. A reference to a prefixed owner whose name is not
/// this consumer's is dropped: it names another consumer's object; so is
/// the provider's own (to a kind the consumer has not bound), with its
/// managed-fields entries.
pub fn references_up(
    kinds: &[ProviderKind],
    cluster_namespace: &str,
    metadata: &mut Map<String, Value>,
) {
    let mut references: Vec<Value> = match metadata.get("ownerReferences") {
        Some(Value::Array(references)) => references.clone(),
        _ => Vec::new(),
    };
    let prefix = format!("{cluster_namespace}-");
    let mut providers_own = Vec::new();
    references.retain_mut(|reference| {
        // Not one bindery stored for the consumer (those are in the
        // annotation): the provider's own, such as kube-bind's reference to
        // the cluster Namespace. It names a provider object the app cluster
        // lacks, whose collector would delete the dependent.
        let Some(kind) = provider_kind(kinds, reference) else {
            providers_own.extend(
                reference
                    .get("uid")
                    .and_then(Value::as_str)
                    .map(str::to_string),
            );
            return false;
        };
        if !kind.prefixed {
            return true;
        }
        match reference.get_mut("name") {
            Some(Value::String(name)) => match name.strip_prefix(&prefix) {
                Some(own) if !own.is_empty() => {
                    *name = own.to_string();
                    true
                }
                _ => false,
            },
            _ => false,
        }
    });
    if !providers_own.is_empty()
        && let Some(Value::Array(entries)) = metadata.get_mut("managedFields")
    {
        for entry in entries {
            if let Some(fields) = entry.get_mut("fieldsV1")
                && forget_managed(fields, &providers_own)
                && fields.get("f:metadata").is_some_and(|m| m == &json!({}))
                && let Some(fields) = fields.as_object_mut()
            {
                // kube-apiserver never shows an empty set.
                fields.shift_remove("f:metadata");
            }
        }
    }
    let hidden = take_annotation(metadata);
    for (index, reference) in &hidden {
        references.insert((*index).min(references.len()), reference.clone());
    }
    if references.is_empty() {
        if metadata.get("ownerReferences").is_some_and(Value::is_array) {
            metadata.shift_remove("ownerReferences");
        }
    } else {
        metadata.insert("ownerReferences".into(), Value::Array(references));
    }
    if hidden.is_empty() {
        return;
    }
    let hidden: Vec<Value> = hidden.into_iter().map(|(_, reference)| reference).collect();
    if let Some(Value::Array(entries)) = metadata.get_mut("managedFields") {
        for entry in entries {
            if let Some(fields) = entry.get_mut("fieldsV1") {
                managed_up(fields, &hidden);
            }
        }
    }
}

/// The reference kube-bind's konnector gives a cluster-scoped object to its
/// consumer's cluster Namespace, as a stored object holding it: what a
/// create keeps ([`keep_providers_own`]).
pub fn owned_by_cluster_namespace(cluster_namespace: &str, uid: &str) -> Value {
    json!({"metadata": {"ownerReferences": [{"apiVersion": "v1", "kind": "Namespace",
        "name": cluster_namespace, "uid": uid}]}})
}

/// Adds to `metadata`, a written object in provider terms, the references
/// of the stored object `current` (in provider terms) that its consumer
/// never saw, so that the write keeps them: those to kinds the consumer has
/// not bound. (For a create, `current` holds the references the provider's
/// layout gives a new object.) A controller reference is kept only while the
/// update names no controller of its own.
pub fn keep_providers_own(
    kinds: &[ProviderKind],
    current: &Map<String, Value>,
    metadata: &mut Map<String, Value>,
) {
    let Some(Value::Array(stored)) = current.get("ownerReferences") else {
        return;
    };
    let own: Vec<&Value> = stored
        .iter()
        .filter(|reference| provider_kind(kinds, reference).is_none())
        .collect();
    if own.is_empty() {
        return;
    }
    let references = metadata
        .entry("ownerReferences")
        .or_insert_with(|| Value::Array(Vec::new()));
    if references.is_null() {
        *references = Value::Array(Vec::new());
    }
    // Anything else is the provider's to refuse, untouched.
    let Some(references) = references.as_array_mut() else {
        return;
    };
    let is_controller = |r: &Value| r.get("controller") == Some(&Value::Bool(true));
    for reference in own {
        let taken = references
            .iter()
            .any(|r| r.get("uid") == reference.get("uid"));
        let second_controller = is_controller(reference) && references.iter().any(is_controller);
        if !taken && !second_controller {
            references.push(reference.clone());
        }
    }
}

/// Drops the managed-fields entries of the references with these uids;
/// whether there were any.
fn forget_managed(fields: &mut Value, uids: &[String]) -> bool {
    let Some(metadata) = fields.get_mut("f:metadata").and_then(Value::as_object_mut) else {
        return false;
    };
    let Some(references) = metadata
        .get_mut("f:ownerReferences")
        .and_then(Value::as_object_mut)
    else {
        return false;
    };
    let before = references.len();
    references.retain(|key, _| !uids.iter().any(|uid| *key == uid_key(uid)));
    if references.len() == before {
        return false;
    }
    if references.keys().all(|k| k == ".") {
        metadata.shift_remove("f:ownerReferences");
    }
    true
}

/// Removes the annotation (and an annotations map it leaves empty) and
/// returns the references it held, by position; an annotation that does not
/// read as bindery writes it holds none.
fn take_annotation(metadata: &mut Map<String, Value>) -> Vec<(usize, Value)> {
    let Some(annotations) = metadata
        .get_mut("annotations")
        .and_then(Value::as_object_mut)
    else {
        return Vec::new();
    };
    let Some(raw) = annotations.shift_remove(OWNER_REFERENCES_ANNOTATION) else {
        return Vec::new();
    };
    if annotations.is_empty() {
        metadata.shift_remove("annotations");
    }
    let Some(Value::Array(entries)) = raw
        .as_str()
        .and_then(|text| serde_json::from_str::<Value>(text).ok())
    else {
        return Vec::new();
    };
    let mut hidden: Vec<(usize, Value)> = entries
        .into_iter()
        .filter_map(|entry| {
            let index = usize::try_from(entry.get("index")?.as_u64()?).ok()?;
            let reference = entry.get("reference")?;
            (well_formed(reference) && reference.get("uid").is_some_and(Value::is_string))
                .then(|| (index, stored(reference)))
        })
        .collect();
    hidden.sort_by_key(|(index, _)| *index);
    hidden
}

const MANAGED_ANNOTATION: &str = "f:bindery.dev/owner-references";
// Managed-fields maps are kept in kube-apiserver's order: `.`, then fields,
// then keys (`.` < `f:` < `k:` by bytes), so sorting by key restores it.

fn uid_key(uid: &str) -> String {
    format!("k:{}", json!({"uid": uid}))
}

/// One managed-fields set, consumer → provider: the hidden references'
/// entries become the annotation's.
fn managed_down(fields: &mut Value, hidden_uids: &[String]) {
    if !forget_managed(fields, hidden_uids) {
        return;
    }
    let Some(metadata) = fields.get_mut("f:metadata").and_then(Value::as_object_mut) else {
        return;
    };
    let annotations = metadata
        .entry("f:annotations")
        .or_insert_with(|| json!({".": {}}));
    if let Some(annotations) = annotations.as_object_mut() {
        annotations.insert(MANAGED_ANNOTATION.into(), json!({}));
        annotations.sort_keys();
    }
    metadata.sort_keys();
}

/// One managed-fields set, provider → consumer: the annotation's entry
/// becomes the entries of the references it holds.
fn managed_up(fields: &mut Value, hidden: &[Value]) {
    let Some(metadata) = fields.get_mut("f:metadata").and_then(Value::as_object_mut) else {
        return;
    };
    let Some(annotations) = metadata
        .get_mut("f:annotations")
        .and_then(Value::as_object_mut)
    else {
        return;
    };
    if annotations.shift_remove(MANAGED_ANNOTATION).is_none() {
        return;
    }
    if annotations.keys().all(|k| k == ".") {
        metadata.shift_remove("f:annotations");
    }
    let references = metadata
        .entry("f:ownerReferences")
        .or_insert_with(|| json!({".": {}}));
    if let Some(references) = references.as_object_mut() {
        for reference in hidden {
            let Some(uid) = reference.get("uid").and_then(Value::as_str) else {
                continue;
            };
            let mut entry = Map::new();
            entry.insert(".".into(), json!({}));
            for field in reference.as_object().into_iter().flat_map(Map::keys) {
                entry.insert(format!("f:{field}"), json!({}));
            }
            entry.sort_keys();
            references.insert(uid_key(uid), Value::Object(entry));
        }
        references.sort_keys();
    }
    metadata.sort_keys();
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds() -> Vec<ProviderKind> {
        vec![
            ProviderKind {
                group: "example.com".into(),
                kind: "Widget".into(),
                prefixed: false,
            },
            ProviderKind {
                group: "example.com".into(),
                kind: "Gadget".into(),
                prefixed: true,
            },
        ]
    }

    fn reference(api_version: &str, kind: &str, name: &str, uid: &str) -> Value {
        json!({"apiVersion": api_version, "kind": kind, "name": name, "uid": uid,
            "controller": false, "blockOwnerDeletion": true})
    }

    fn round_trip(metadata: Value) -> (Value, Value) {
        let mut down = metadata.as_object().unwrap().clone();
        references_down(&kinds(), "kube-bind-c1", &mut down);
        let mut up = down.clone();
        references_up(&kinds(), "kube-bind-c1", &mut up);
        (Value::Object(down), Value::Object(up))
    }

    #[test]
    fn app_cluster_owners_are_hidden_from_the_provider_and_read_back_in_place() {
        let references = json!([
            reference("v1", "ConfigMap", "cm", "u1"),
            reference("example.com/v1", "Widget", "w", "u2"),
            reference("apps/v1", "Deployment", "d", "u3"),
        ]);
        let (down, up) = round_trip(json!({"name": "a", "ownerReferences": references}));
        assert_eq!(
            down["ownerReferences"],
            json!([reference("example.com/v1", "Widget", "w", "u2")])
        );
        let hidden: Value = serde_json::from_str(
            down["annotations"][OWNER_REFERENCES_ANNOTATION]
                .as_str()
                .unwrap(),
        )
        .unwrap();
        assert_eq!(hidden[0]["index"], 0);
        assert_eq!(hidden[1]["index"], 2);
        assert_eq!(up, json!({"name": "a", "ownerReferences": references}));
    }

    #[test]
    fn only_app_owners_leave_no_references_on_the_provider() {
        let references = json!([reference("v1", "ConfigMap", "cm", "u1")]);
        let (down, up) = round_trip(
            json!({"name": "a", "annotations": {"x": "y"}, "ownerReferences": references}),
        );
        assert!(down.get("ownerReferences").is_none(), "{down}");
        assert_eq!(down["annotations"]["x"], "y");
        assert_eq!(
            up,
            json!({"name": "a", "annotations": {"x": "y"}, "ownerReferences": references})
        );
    }

    #[test]
    fn prefixed_owners_are_named_on_the_provider_and_back() {
        let references = json!([reference("example.com/v2", "Gadget", "g", "u1")]);
        let (down, up) = round_trip(json!({"ownerReferences": references}));
        assert_eq!(down["ownerReferences"][0]["name"], "kube-bind-c1-g");
        assert_eq!(up, json!({"ownerReferences": references}));

        let mut foreign = json!({"ownerReferences": [reference("example.com/v1", "Gadget", "kube-bind-c2-g", "u")]})
            .as_object()
            .unwrap()
            .clone();
        references_up(&kinds(), "kube-bind-c1", &mut foreign);
        assert_eq!(
            Value::Object(foreign),
            json!({}),
            "another consumer's name is not shown"
        );
    }

    #[test]
    fn references_kube_apiserver_refuses_are_left_for_it() {
        for references in [
            json!([reference("v1", "ConfigMap", "cm", "")]),
            json!([reference("", "ConfigMap", "cm", "u")]),
            json!([reference("a/b/c", "ConfigMap", "cm", "u")]),
            json!([reference("v1", "", "cm", "u")]),
            json!([reference("v1", "Event", "e", "u")]),
            json!([{"apiVersion": "v1", "kind": "ConfigMap", "name": "a", "uid": "u", "extra": 1}]),
            json!([{"apiVersion": "v1", "kind": "ConfigMap", "name": "a", "uid": "u", "controller": "yes"}]),
            json!([null]),
            json!([
                {"apiVersion": "v1", "kind": "ConfigMap", "name": "a", "uid": "u", "controller": true},
                {"apiVersion": "v1", "kind": "ConfigMap", "name": "b", "uid": "v", "controller": true},
            ]),
        ] {
            let metadata = json!({"ownerReferences": references});
            let mut down = metadata.as_object().unwrap().clone();
            references_down(&kinds(), "kube-bind-c1", &mut down);
            assert_eq!(Value::Object(down), metadata);
        }
    }

    #[test]
    fn nulls_are_stored_as_go_stores_them() {
        let (_, up) = round_trip(json!({"ownerReferences": [
            {"apiVersion": "v1", "kind": "ConfigMap", "name": "a", "uid": "u", "controller": null}]}));
        assert_eq!(
            up,
            json!({"ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "a", "uid": "u"}]})
        );
    }

    #[test]
    fn a_malformed_annotation_reads_as_none_and_is_not_shown() {
        for raw in ["", "{", "[{\"index\":-1,\"reference\":{}}]", "[1]"] {
            let mut metadata = json!({"annotations": {OWNER_REFERENCES_ANNOTATION: raw}})
                .as_object()
                .unwrap()
                .clone();
            references_up(&kinds(), "kube-bind-c1", &mut metadata);
            assert_eq!(Value::Object(metadata), json!({}), "{raw}");
        }
    }

    #[test]
    fn managed_fields_name_the_references_not_the_annotation() {
        let consumer_fields = json!({"f:metadata": {
            "f:labels": {".": {}, "f:app": {}},
            "f:ownerReferences": {".": {}, "k:{\"uid\":\"u1\"}": {
                ".": {}, "f:apiVersion": {}, "f:blockOwnerDeletion": {}, "f:controller": {},
                "f:kind": {}, "f:name": {}, "f:uid": {}}},
        }, "f:spec": {}});
        let metadata = json!({
            "ownerReferences": [reference("v1", "ConfigMap", "cm", "u1")],
            "managedFields": [{"manager": "m", "fieldsV1": consumer_fields}],
        });
        let (down, up) = round_trip(metadata.clone());
        assert_eq!(
            down["managedFields"][0]["fieldsV1"]["f:metadata"],
            json!({"f:annotations": {".": {}, MANAGED_ANNOTATION: {}}, "f:labels": {".": {}, "f:app": {}}})
        );
        assert_eq!(up, metadata);
    }

    /// kube-bind's konnector stores a reference to the consumer's cluster
    /// Namespace on every cluster-scoped copy; on main it reached the app
    /// cluster, whose collector deleted the object as dangling.
    #[test]
    fn the_providers_own_references_are_not_shown_and_an_update_keeps_them() {
        let namespace = json!({"apiVersion": "v1", "kind": "Namespace",
            "name": "kube-bind-c1", "uid": "ns1"});
        let widget = reference("example.com/v1", "Widget", "w", "u2");
        let stored = json!({
            "ownerReferences": [namespace, widget],
            "managedFields": [{"manager": "konnector", "fieldsV1": {"f:metadata": {
                "f:ownerReferences": {".": {}, "k:{\"uid\":\"ns1\"}": {".": {}}}}}}],
        });
        let mut up = stored.as_object().unwrap().clone();
        references_up(&kinds(), "kube-bind-c1", &mut up);
        assert_eq!(up["ownerReferences"], json!([widget]));
        assert_eq!(up["managedFields"][0]["fieldsV1"], json!({}));

        // The consumer's update, without the reference it never saw.
        let mut update = up.clone();
        update.shift_remove("managedFields");
        references_down(&kinds(), "kube-bind-c1", &mut update);
        keep_providers_own(&kinds(), stored.as_object().unwrap(), &mut update);
        assert_eq!(update["ownerReferences"], json!([widget, namespace]));
        // Once only, and a consumer that drops every reference keeps it too.
        keep_providers_own(&kinds(), stored.as_object().unwrap(), &mut update);
        assert_eq!(update["ownerReferences"].as_array().unwrap().len(), 2);
        let mut emptied = Map::new();
        keep_providers_own(&kinds(), stored.as_object().unwrap(), &mut emptied);
        assert_eq!(emptied["ownerReferences"], json!([namespace]));
    }

    #[test]
    fn an_update_naming_its_own_controller_does_not_get_a_second_one() {
        let mut controller = json!({"apiVersion": "v1", "kind": "Namespace",
            "name": "kube-bind-c1", "uid": "ns1"});
        controller["controller"] = json!(true);
        let stored = json!({"ownerReferences": [controller]});
        let mut own = reference("example.com/v1", "Widget", "w", "u2");
        own["controller"] = json!(true);
        let mut update = json!({"ownerReferences": [own]})
            .as_object()
            .unwrap()
            .clone();
        keep_providers_own(&kinds(), stored.as_object().unwrap(), &mut update);
        assert_eq!(update["ownerReferences"], json!([own]));
        assert!(valid(update["ownerReferences"].as_array().unwrap()));
    }
}
