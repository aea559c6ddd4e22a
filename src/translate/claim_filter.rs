//! Whether a permission claim covers an object: the claim's selector
//! evaluated against one object's name, consumer-side namespace and labels,
//! and the names its references picked. Pure.
//!
//! kube-bind's ways of selecting (`labelSelector`, `namedResources`,
//! `references`) are ORed, and a selector with none of them selects
//! nothing, as kube-bind's `IsClaimed` decides. bindery's extensions only
//! narrow: `owner` (klutch's form; else the object's `kube-bind.io/owner`
//! label, else the side it lives on) and `namespaces` (consumer-side
//! namespaces). A selector made of extensions alone selects what they name,
//! which kube-bind cannot express (klutch's `owner: Provider` claims).

use super::claim_references::Pick;
use crate::api::keys::OWNER_LABEL;
use crate::api::{ClaimOwner, ClaimSelector, PermissionClaim};
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

/// Whether `claim` covers `object`; `picked` is what the claim's
/// references picked ([`super::claim_references::picks`]).
pub fn covers(claim: &PermissionClaim, object: &ClaimedObject, picked: &[Pick]) -> bool {
    let selector = &claim.selector;
    if !extensions_allow(selector, object) {
        return false;
    }
    let selects_by_kube_bind = selector.label_selector.is_some()
        || !selector.named_resources.is_empty()
        || !selector.references.is_empty();
    if !selects_by_kube_bind {
        return selector.owner.is_some() || !selector.namespaces.is_empty();
    }
    by_labels(selector, object)
        || by_name(selector, object)
        || picked
            .iter()
            .any(|pick| pick.picks(object.name, object.consumer_namespace))
}

/// bindery's narrowing extensions: `owner` and `namespaces`.
fn extensions_allow(selector: &ClaimSelector, object: &ClaimedObject) -> bool {
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
    selector.namespaces.is_empty()
        || object
            .consumer_namespace
            .is_some_and(|ns| selector.namespaces.iter().any(|n| n == ns))
}

/// `labelSelector`, with Kubernetes' meaning: absent selects nothing, `{}`
/// everything, an invalid one nothing.
fn by_labels(selector: &ClaimSelector, object: &ClaimedObject) -> bool {
    selector
        .label_selector
        .as_ref()
        .and_then(|s| Selector::try_from(s.clone()).ok())
        .is_some_and(|parsed| parsed.matches(object.labels))
}

/// `namedResources`: the name, in the namespace when one is given.
fn by_name(selector: &ClaimSelector, object: &ClaimedObject) -> bool {
    selector.named_resources.iter().any(|named| {
        named.name == object.name
            && named
                .namespace
                .as_deref()
                .filter(|ns| !ns.is_empty())
                .is_none_or(|ns| Some(ns) == object.consumer_namespace)
    })
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
    fn an_empty_selector_selects_nothing_as_in_kube_bind() {
        let none = labels(&[]);
        assert!(!covers(
            &claim(json!({})),
            &object("a", Some("default"), &none),
            &[]
        ));
        // An empty label selector is Kubernetes' "everything".
        assert!(covers(
            &claim(json!({"labelSelector": {}})),
            &object("a", Some("default"), &none),
            &[]
        ));
    }

    #[test]
    fn extensions_alone_select_what_they_name() {
        let none = labels(&[]);
        let in_apps = claim(json!({"namespaces": ["apps"]}));
        assert!(covers(&in_apps, &object("a", Some("apps"), &none), &[]));
        assert!(!covers(&in_apps, &object("a", Some("web"), &none), &[]));
    }

    #[test]
    fn owner_is_the_label_else_the_side() {
        let provider_claim = claim(json!({"owner": "Provider"}));
        let consumer_claim = claim(json!({"owner": "Consumer"}));
        let unlabelled = labels(&[]);
        let consumers = labels(&[(OWNER_LABEL, "consumer")]);
        assert!(covers(
            &provider_claim,
            &object("a", None, &unlabelled),
            &[]
        ));
        assert!(!covers(
            &consumer_claim,
            &object("a", None, &unlabelled),
            &[]
        ));
        assert!(covers(&consumer_claim, &object("a", None, &consumers), &[]));
        assert!(!covers(
            &provider_claim,
            &object("a", None, &consumers),
            &[]
        ));
    }

    #[test]
    fn named_resources_match_name_and_namespace_when_given() {
        let named = claim(json!({"namedResources": [
            {"name": "db-credentials", "namespace": "default"}, {"name": "shared"}]}));
        let none = labels(&[]);
        assert!(covers(
            &named,
            &object("db-credentials", Some("default"), &none),
            &[]
        ));
        assert!(!covers(
            &named,
            &object("db-credentials", Some("other"), &none),
            &[]
        ));
        assert!(covers(&named, &object("shared", Some("other"), &none), &[]));
        assert!(!covers(
            &named,
            &object("db-credential", Some("default"), &none),
            &[]
        ));
    }

    #[test]
    fn namespaces_narrow_to_the_consumer_side_namespaces_named() {
        let in_two = claim(json!({"namespaces": ["default", "apps"]}));
        let none = labels(&[]);
        assert!(covers(&in_two, &object("a", Some("apps"), &none), &[]));
        assert!(!covers(&in_two, &object("a", Some("app"), &none), &[]));
        assert!(
            !covers(&in_two, &object("a", None, &none), &[]),
            "a cluster-scoped object is in no namespace"
        );
        let anded = claim(json!({"namespaces": ["apps"], "namedResources": [{"name": "a"}]}));
        assert!(covers(&anded, &object("a", Some("apps"), &none), &[]));
        assert!(!covers(&anded, &object("b", Some("apps"), &none), &[]));
        assert!(!covers(&anded, &object("a", Some("default"), &none), &[]));
    }

    #[test]
    fn label_selectors_use_kubernetes_semantics() {
        let selected = claim(json!({"labelSelector": {
            "matchLabels": {"app": "db"},
            "matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["test"]}]}}));
        assert!(covers(
            &selected,
            &object("a", None, &labels(&[("app", "db")])),
            &[]
        ));
        assert!(covers(
            &selected,
            &object("a", None, &labels(&[("app", "db"), ("tier", "prod")])),
            &[]
        ));
        assert!(!covers(
            &selected,
            &object("a", None, &labels(&[("app", "db"), ("tier", "test")])),
            &[]
        ));
        assert!(!covers(
            &selected,
            &object("a", None, &labels(&[("app", "web")])),
            &[]
        ));
        let invalid = claim(json!({"labelSelector": {
            "matchExpressions": [{"key": "tier", "operator": "Sometimes", "values": ["x"]}]}}));
        assert!(!covers(
            &invalid,
            &object("a", None, &labels(&[("tier", "x")])),
            &[]
        ));
    }

    #[test]
    fn kube_binds_ways_of_selecting_are_ored() {
        // kube-bind's mangodb form: labels or names.
        let either = claim(json!({"namedResources": [{"name": "a"}],
            "labelSelector": {"matchLabels": {"app": "db"}}}));
        let db = labels(&[("app", "db")]);
        let none = labels(&[]);
        assert!(covers(&either, &object("a", None, &db), &[]));
        assert!(covers(&either, &object("b", None, &db), &[]));
        assert!(covers(&either, &object("a", None, &none), &[]));
        assert!(!covers(&either, &object("b", None, &none), &[]));
    }

    #[test]
    fn references_select_what_they_picked_or_labels_do() {
        use crate::translate::claim_references::PickedNamespace;
        // kube-bind's sheriffs form: labels or references.
        let sheriffs = claim(json!({"labelSelector": {"matchLabels": {"app": "sheriff"}},
            "references": [{"resource": "sheriffs", "group": "wildwest.dev",
                "jsonPath": {"name": "spec.secretRefs.#.name"}}]}));
        let none = labels(&[]);
        let picked = [Pick {
            name: "badge".to_string(),
            namespace: PickedNamespace::OneOf(vec![Some("town".to_string())]),
        }];
        assert!(covers(
            &sheriffs,
            &object("badge", Some("town"), &none),
            &picked
        ));
        assert!(!covers(
            &sheriffs,
            &object("badge", Some("city"), &none),
            &picked
        ));
        assert!(!covers(
            &sheriffs,
            &object("badge", Some("town"), &none),
            &[]
        ));
        let labelled = labels(&[("app", "sheriff")]);
        assert!(covers(
            &sheriffs,
            &object("hat", Some("city"), &labelled),
            &[]
        ));
    }
}
