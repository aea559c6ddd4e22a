//! Whether a permission claim covers an object: the claim's selector
//! evaluated against one object's name, consumer-side namespace and labels.
//! The ways of selecting are ANDed, as the claim's documentation says. Pure.
//!
//! A selector by references (JSONPaths into other objects) cannot be decided
//! from the object alone, so it selects nothing here: when in doubt, a claim
//! covers less, never more.

use crate::api::keys::OWNER_LABEL;
use crate::api::{ClaimOwner, PermissionClaim};
use kube::core::{Selector, SelectorExt};
use std::collections::BTreeMap;

/// One object as the filter sees it.
#[derive(Clone, Copy, Debug)]
pub struct ClaimedObject<'a> {
    pub name: &'a str,
    /// Its namespace in consumer terms; `None` for cluster-scoped objects.
    pub consumer_namespace: Option<&'a str>,
    pub labels: &'a BTreeMap<String, String>,
    /// The side it lives on; an object without the `kube-bind.io/owner`
    /// label belongs to that side.
    pub side: ClaimOwner,
}

/// Whether `claim` covers `object`.
pub fn covers(claim: &PermissionClaim, object: &ClaimedObject) -> bool {
    let selector = &claim.selector;
    if !selector.references.is_empty() {
        return false;
    }
    if let Some(owner) = selector.owner {
        let object_owner = object
            .labels
            .get(OWNER_LABEL)
            .and_then(|v| ClaimOwner::from_label_value(v))
            .unwrap_or(object.side);
        if object_owner != owner {
            return false;
        }
    }
    if !selector.named_resources.is_empty()
        && !selector.named_resources.iter().any(|named| {
            named.name == object.name
                && named
                    .namespace
                    .as_deref()
                    .is_none_or(|ns| Some(ns) == object.consumer_namespace)
        })
    {
        return false;
    }
    if !selector.namespaces.is_empty()
        && !object
            .consumer_namespace
            .is_some_and(|ns| selector.namespaces.iter().any(|n| n == ns))
    {
        return false;
    }
    if let Some(label_selector) = &selector.label_selector {
        match Selector::try_from(label_selector.clone()) {
            Ok(parsed) => {
                if !parsed.matches(object.labels) {
                    return false;
                }
            }
            // An invalid selector selects nothing.
            Err(_) => return false,
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn claim(selector: serde_json::Value) -> PermissionClaim {
        serde_json::from_value(json!({"resource": "secrets", "selector": selector})).unwrap()
    }

    fn object<'a>(
        name: &'a str,
        namespace: Option<&'a str>,
        labels: &'a BTreeMap<String, String>,
    ) -> ClaimedObject<'a> {
        ClaimedObject {
            name,
            consumer_namespace: namespace,
            labels,
            side: ClaimOwner::Provider,
        }
    }

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn an_empty_selector_covers_everything_of_the_resource() {
        let none = labels(&[]);
        assert!(covers(
            &claim(json!({})),
            &object("a", Some("default"), &none)
        ));
    }

    #[test]
    fn owner_is_the_label_else_the_side() {
        let provider_claim = claim(json!({"owner": "Provider"}));
        let consumer_claim = claim(json!({"owner": "Consumer"}));
        let unlabelled = labels(&[]);
        let consumers = labels(&[(OWNER_LABEL, "consumer")]);
        assert!(covers(&provider_claim, &object("a", None, &unlabelled)));
        assert!(!covers(&consumer_claim, &object("a", None, &unlabelled)));
        assert!(covers(&consumer_claim, &object("a", None, &consumers)));
        assert!(!covers(&provider_claim, &object("a", None, &consumers)));
    }

    #[test]
    fn named_resources_match_name_and_namespace_when_given() {
        let named = claim(json!({"namedResources": [
            {"name": "db-credentials", "namespace": "default"}, {"name": "shared"}]}));
        let none = labels(&[]);
        assert!(covers(
            &named,
            &object("db-credentials", Some("default"), &none)
        ));
        assert!(!covers(
            &named,
            &object("db-credentials", Some("other"), &none)
        ));
        assert!(covers(&named, &object("shared", Some("other"), &none)));
        assert!(!covers(
            &named,
            &object("db-credential", Some("default"), &none)
        ));
    }

    #[test]
    fn namespaces_narrow_to_the_consumer_side_namespaces_named() {
        let in_two = claim(json!({"namespaces": ["default", "apps"]}));
        let none = labels(&[]);
        assert!(covers(&in_two, &object("a", Some("apps"), &none)));
        assert!(!covers(&in_two, &object("a", Some("app"), &none)));
        assert!(
            !covers(&in_two, &object("a", None, &none)),
            "a cluster-scoped object is in no namespace"
        );
        let anded = claim(json!({"namespaces": ["apps"], "namedResources": [{"name": "a"}]}));
        assert!(covers(&anded, &object("a", Some("apps"), &none)));
        assert!(!covers(&anded, &object("b", Some("apps"), &none)));
        assert!(!covers(&anded, &object("a", Some("default"), &none)));
    }

    #[test]
    fn label_selectors_use_kubernetes_semantics() {
        let selected = claim(json!({"labelSelector": {
            "matchLabels": {"app": "db"},
            "matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["test"]}]}}));
        assert!(covers(
            &selected,
            &object("a", None, &labels(&[("app", "db")]))
        ));
        assert!(covers(
            &selected,
            &object("a", None, &labels(&[("app", "db"), ("tier", "prod")]))
        ));
        assert!(!covers(
            &selected,
            &object("a", None, &labels(&[("app", "db"), ("tier", "test")]))
        ));
        assert!(!covers(
            &selected,
            &object("a", None, &labels(&[("app", "web")]))
        ));
        let invalid = claim(json!({"labelSelector": {
            "matchExpressions": [{"key": "tier", "operator": "Sometimes", "values": ["x"]}]}}));
        assert!(!covers(
            &invalid,
            &object("a", None, &labels(&[("tier", "x")]))
        ));
    }

    #[test]
    fn the_ways_of_selecting_are_anded_and_references_select_nothing() {
        let both = claim(json!({"namedResources": [{"name": "a"}],
            "labelSelector": {"matchLabels": {"app": "db"}}}));
        let db = labels(&[("app", "db")]);
        assert!(covers(&both, &object("a", None, &db)));
        assert!(!covers(&both, &object("b", None, &db)));
        assert!(!covers(&both, &object("a", None, &labels(&[]))));
        let by_reference = claim(json!({"references": [
            {"resource": "postgresqlinstances", "jsonPath": {"name": ".spec.secretName"}}]}));
        assert!(!covers(&by_reference, &object("a", None, &db)));
    }
}
