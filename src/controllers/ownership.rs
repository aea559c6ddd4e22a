//! Which kube-bind objects are bindery's to act on, so that bindery and
//! kube-bind's backend run on one provider side by side, each on its own
//! bindings. Pure.
//!
//! The rule: an object is bindery's when it carries the label
//! `bindery.dev/managed: "true"` (bindery puts it on every request, export
//! and BoundSchema it makes, and `bindery migrate` on what it takes over),
//! or when it has a mark only bindery writes, which objects bindery made
//! before the label existed carry:
//! - a request: `spec.templateRef` (a field kube-bind does not have), or
//!   the `backend.kube-bind.io/identity` annotation naming its app cluster
//!   (kube-bind's backend puts it on cluster namespaces and ClusterBindings,
//!   never on requests). Where a request lives says nothing: kube-bind's
//!   backend may run with a cluster-namespace prefix other than bindery's,
//!   and its requests then live outside bindery's cluster namespaces;
//! - an export: `status.identityHash` or bindery's finalizer;
//! - a BoundSchema: bindery's `bindery.dev/schema-update-policy` annotation.
//!
//! Everything else is kube-bind's, and bindery's controllers leave it
//! alone: no status, no finalizer, no identity, no RBAC.

use super::deletion::FINALIZER;
use crate::api::keys::IDENTITY_ANNOTATION;
use crate::api::{APIServiceExport, APIServiceExportRequest, BoundSchema};
use kube::ResourceExt;

/// Annotation on a BoundSchema bindery made: its schema update policy, from
/// the request. A BoundSchema without it (kube-bind's backend made it) has
/// its request's policy.
pub const POLICY_ANNOTATION: &str = "bindery.dev/schema-update-policy";

/// The label that makes an object bindery's.
pub const MANAGED_LABEL: &str = "bindery.dev/managed";

/// Whether bindery acts on an object; `prefix` starts cluster namespaces.
pub trait Ours {
    fn ours(&self, prefix: &str) -> bool;
}

fn labelled<K: ResourceExt>(object: &K) -> bool {
    object.labels().get(MANAGED_LABEL).map(String::as_str) == Some("true")
}

impl Ours for APIServiceExportRequest {
    fn ours(&self, _prefix: &str) -> bool {
        labelled(self)
            || self.spec.template_ref.is_some()
            || self.annotations().contains_key(IDENTITY_ANNOTATION)
    }
}

impl Ours for APIServiceExport {
    fn ours(&self, _prefix: &str) -> bool {
        labelled(self)
            || self
                .status
                .as_ref()
                .is_some_and(|s| s.identity_hash.is_some())
            || self.finalizers().iter().any(|f| f == FINALIZER)
    }
}

impl Ours for BoundSchema {
    fn ours(&self, _prefix: &str) -> bool {
        labelled(self) || self.annotations().contains_key(POLICY_ANNOTATION)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const PREFIX: &str = "kube-bind-";

    fn request(
        namespace: &str,
        spec: serde_json::Value,
        labels: serde_json::Value,
    ) -> APIServiceExportRequest {
        serde_json::from_value(json!({
            "apiVersion": "kube-bind.io/v1alpha2", "kind": "APIServiceExportRequest",
            "metadata": {"name": "r", "namespace": namespace, "labels": labels},
            "spec": spec,
        }))
        .unwrap()
    }

    #[test]
    fn kube_binds_requests_are_not_ours_whatever_their_namespace() {
        let resources = json!({"resources": [{"group": "g", "resource": "r"}]});
        assert!(!request("kube-bind-abc", resources.clone(), json!({})).ours(PREFIX));
        // kube-bind's backend with a prefix of its own (its binary's
        // default is `cluster-`): still kube-bind's (issue 33, finding 5).
        assert!(!request("cluster-abc", resources.clone(), json!({})).ours(PREFIX));
        assert!(
            request(
                "kube-bind-abc",
                resources.clone(),
                json!({MANAGED_LABEL: "true"})
            )
            .ours(PREFIX)
        );
        let mut annotated = request("bindery-requests", resources, json!({}));
        annotated
            .annotations_mut()
            .insert(IDENTITY_ANNOTATION.into(), "app".into());
        assert!(annotated.ours(PREFIX));
        let by_template = json!({"templateRef": {"name": "t"}});
        assert!(request("kube-bind-abc", by_template, json!({})).ours(PREFIX));
    }

    fn export(status: serde_json::Value, metadata: serde_json::Value) -> APIServiceExport {
        let mut object = json!({
            "apiVersion": "kube-bind.io/v1alpha2", "kind": "APIServiceExport",
            "metadata": {"name": "e", "namespace": "kube-bind-abc"},
            "spec": {"resources": [{"group": "g", "resource": "r"}], "informerScope": "Cluster"},
            "status": status,
        });
        for (key, value) in metadata.as_object().unwrap() {
            object["metadata"][key] = value.clone();
        }
        serde_json::from_value(object).unwrap()
    }

    #[test]
    fn kube_binds_exports_are_not_ours() {
        assert!(!export(json!({}), json!({})).ours(PREFIX));
        assert!(export(json!({"identityHash": "a".repeat(64)}), json!({})).ours(PREFIX));
        assert!(export(json!({}), json!({"finalizers": [FINALIZER]})).ours(PREFIX));
        assert!(export(json!({}), json!({"labels": {MANAGED_LABEL: "true"}})).ours(PREFIX));
        assert!(!export(json!({}), json!({"labels": {MANAGED_LABEL: "false"}})).ours(PREFIX));
    }
}
