//! What a claim's `references` pick: the names (and namespaces) that the
//! consumer's referring objects hold at the reference's paths, read as
//! kube-bind reads them (gjson paths such as `spec.secretRefs.#.name`, an
//! array giving every element, values trimmed). Pure: the referring
//! objects, in the consumer's terms, are listed by the caller.
//!
//! kube-bind's rules, kept exactly: an object is picked when some referring
//! object's name value equals its name and
//! - the reference has a namespace path that finds a value: one of the
//!   found values is the object's namespace;
//! - it has a namespace path that finds nothing: any namespace;
//! - it has no namespace path and the export isolates `Namespaced`: the
//!   referring object is in the object's namespace;
//! - otherwise: any namespace.

use crate::api::SelectorReference;
use crate::api::service_export::Isolation;
use serde_json::Value;

/// One name a reference picked, and where.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pick {
    pub name: String,
    pub namespace: PickedNamespace,
}

/// The namespaces a [`Pick`] holds in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PickedNamespace {
    Any,
    /// One of these (a namespace path's values, or the referring object's
    /// own namespace; `None` for a cluster-scoped referring object).
    OneOf(Vec<Option<String>>),
}

impl Pick {
    /// Whether the object `name` in `namespace` (`None`: cluster-scoped) is
    /// the one picked.
    pub fn picks(&self, name: &str, namespace: Option<&str>) -> bool {
        self.name == name
            && match &self.namespace {
                PickedNamespace::Any => true,
                PickedNamespace::OneOf(namespaces) => {
                    namespaces.iter().any(|n| n.as_deref() == namespace)
                }
            }
    }
}

/// What `reference` picks from `referring` (the consumer's objects of the
/// reference's resource, in the consumer's terms) under `isolation`.
pub fn picks(
    reference: &SelectorReference,
    referring: &[Value],
    isolation: Isolation,
) -> Vec<Pick> {
    let Some(paths) = &reference.json_path else {
        return Vec::new();
    };
    let mut picked = Vec::new();
    for object in referring {
        let json = object.to_string();
        let names = gjson::get(&json, &paths.name);
        if !names.exists() {
            continue;
        }
        let namespace = if !paths.namespace.is_empty() {
            let found = gjson::get(&json, &paths.namespace);
            if found.exists() {
                PickedNamespace::OneOf(values(&found).into_iter().map(Some).collect())
            } else {
                PickedNamespace::Any
            }
        } else if isolation == Isolation::Namespaced {
            let own = object["metadata"]["namespace"].as_str().map(str::to_string);
            PickedNamespace::OneOf(vec![own])
        } else {
            PickedNamespace::Any
        };
        for name in values(&names) {
            picked.push(Pick {
                name,
                namespace: namespace.clone(),
            });
        }
    }
    picked
}

/// A gjson result's values: each element of an array, else the one value,
/// trimmed (as kube-bind trims them).
fn values(found: &gjson::Value) -> Vec<String> {
    if found.kind() == gjson::Kind::Array {
        found
            .array()
            .iter()
            .map(|v| v.str().trim().to_string())
            .collect()
    } else {
        vec![found.str().trim().to_string()]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn reference(name: &str, namespace: &str) -> SelectorReference {
        serde_json::from_value(json!({"resource": "sheriffs", "group": "wildwest.dev",
            "jsonPath": {"name": name, "namespace": namespace}}))
        .unwrap()
    }

    fn sheriff(namespace: Option<&str>, spec: Value) -> Value {
        let mut object = json!({"apiVersion": "wildwest.dev/v1alpha1", "kind": "Sheriff",
            "metadata": {"name": "s"}, "spec": spec});
        if let Some(namespace) = namespace {
            object["metadata"]["namespace"] = json!(namespace);
        }
        object
    }

    fn picked(picks: &[Pick], name: &str, namespace: Option<&str>) -> bool {
        picks.iter().any(|p| p.picks(name, namespace))
    }

    #[test]
    fn array_paths_pick_every_element_trimmed_with_their_namespaces() {
        // kube-bind's sheriffs example.
        let by_list = reference("spec.secretRefs.#.name", "spec.secretRefs.#.namespace");
        let objects = [sheriff(
            None,
            json!({"secretRefs": [{"name": " badge ", "namespace": "town"}, {"name": "gun"}]}),
        )];
        let picks = picks(&by_list, &objects, Isolation::Prefixed);
        assert!(picked(&picks, "badge", Some("town")));
        // Namespaces are not paired with names: any found value will do.
        assert!(picked(&picks, "gun", Some("town")));
        assert!(!picked(&picks, "gun", Some("city")));
        assert!(!picked(&picks, "hat", Some("town")));
    }

    #[test]
    fn a_namespace_path_that_finds_nothing_allows_any_namespace() {
        let by_ref = reference("spec.secretRef.name", "spec.secretRef.namespace");
        let objects = [sheriff(Some("a"), json!({"secretRef": {"name": "creds"}}))];
        let picks = picks(&by_ref, &objects, Isolation::Namespaced);
        assert!(picked(&picks, "creds", Some("elsewhere")));
    }

    #[test]
    fn without_a_namespace_path_namespaced_isolation_keeps_the_referrers_namespace() {
        let by_ref = reference("spec.secretRef.name", "");
        let objects = [sheriff(Some("a"), json!({"secretRef": {"name": "creds"}}))];
        let namespaced = picks(&by_ref, &objects, Isolation::Namespaced);
        assert!(picked(&namespaced, "creds", Some("a")));
        assert!(!picked(&namespaced, "creds", Some("b")));
        let prefixed = picks(&by_ref, &objects, Isolation::Prefixed);
        assert!(picked(&prefixed, "creds", Some("b")));
    }

    #[test]
    fn paths_that_find_no_name_pick_nothing() {
        let jsonpath_syntax = reference("$.spec.secretRef.name", "");
        let objects = [sheriff(None, json!({"secretRef": {"name": "creds"}}))];
        assert!(picks(&jsonpath_syntax, &objects, Isolation::None).is_empty());
        let missing = reference("spec.other", "");
        assert!(picks(&missing, &objects, Isolation::None).is_empty());
        let no_paths: SelectorReference =
            serde_json::from_value(json!({"resource": "sheriffs"})).unwrap();
        assert!(picks(&no_paths, &objects, Isolation::None).is_empty());
    }
}
