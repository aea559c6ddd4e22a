//! The provider's admission keeping kube-bind's backend from granting rights
//! for bindery's exports: a ValidatingAdmissionPolicy, with the cluster
//! namespaces bindery made (labelled [`CLUSTER_NAMESPACE_LABEL`]) as its
//! params, and the labelling of those made before they were labelled. Pure
//! but for [`label_if_made_by_bindery`].
//!
//! kube-bind v0.8.2's backend reconciles the RBAC of every APIServiceExport
//! of its provider, bindery's too. For each it sets the subjects of its one
//! `kube-binder-exports` ClusterRoleBinding to the `kube-binder`
//! ServiceAccount of the export's namespace alone, and makes ClusterRoles
//! (`kube-binder-resources-…`, `kube-binder-claims-…`, owned by that
//! namespace) that aggregate into it. Reconciling bindery's export took
//! every right away from the konnector of kube-bind's binding, and would
//! hand the rights on bindery's resources to every konnector. The policy
//! refuses exactly those writes: a `kube-binder-exports` binding naming an
//! account of a bindery cluster namespace, and a `kube-binder-*` ClusterRole
//! owned by one. The backend logs the refusal and goes on with its own
//! exports, whose writes pass.

use k8s_openapi::api::core::v1::Namespace;
use serde_json::{Value, json};

/// The policy's (and its binding's) name.
pub const POLICY: &str = "bindery.dev-kube-bind-rbac";

pub use crate::api::keys::CLUSTER_NAMESPACE_LABEL;

/// Whether `namespace`, a cluster namespace, was made by bindery (applied
/// by one of its field managers, all named `bindery-…`) and lacks the
/// label: made by a bindery of an earlier version, or by `bind` before it
/// labelled what it makes. Labelled when its consumer binds again.
pub fn made_by_bindery_unlabelled(namespace: &Namespace) -> bool {
    let labelled = namespace
        .metadata
        .labels
        .as_ref()
        .is_some_and(|labels| labels.contains_key(CLUSTER_NAMESPACE_LABEL));
    let applied_by_bindery = namespace
        .metadata
        .managed_fields
        .iter()
        .flatten()
        .any(|entry| {
            entry
                .manager
                .as_deref()
                .is_some_and(|manager| manager.starts_with("bindery-"))
                && entry.operation.as_deref() == Some("Apply")
        });
    applied_by_bindery && !labelled
}

/// Labels `existing`, a cluster namespace, when bindery made it unlabelled
/// ([`made_by_bindery_unlabelled`]), as `field_manager`. A merge patch: an
/// apply of the label alone would drop what that manager applied before.
pub async fn label_if_made_by_bindery(
    namespaces: &kube::Api<Namespace>,
    existing: &Namespace,
    field_manager: &str,
) -> kube::Result<()> {
    if !made_by_bindery_unlabelled(existing) {
        return Ok(());
    }
    let name = existing.metadata.name.as_deref().unwrap_or_default();
    let label = json!({"metadata": {"labels": {CLUSTER_NAMESPACE_LABEL: "true"}}});
    let params = kube::api::PatchParams {
        field_manager: Some(field_manager.to_string()),
        ..Default::default()
    };
    namespaces
        .patch(name, &params, &kube::api::Patch::Merge(label))
        .await?;
    Ok(())
}

/// The policy. Pure.
pub fn policy() -> Value {
    json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": POLICY},
        "spec": {
            "failurePolicy": "Fail",
            "paramKind": {"apiVersion": "v1", "kind": "Namespace"},
            "matchConstraints": {"resourceRules": [{
                "apiGroups": ["rbac.authorization.k8s.io"], "apiVersions": ["*"],
                "operations": ["CREATE", "UPDATE"],
                "resources": ["clusterrolebindings", "clusterroles"],
            }]},
            "matchConditions": [{
                "name": "kube-binds-rbac",
                "expression": "object.metadata.name.startsWith('kube-binder-')",
            }],
            "validations": [
                {
                    "expression": "request.kind.kind != 'ClusterRoleBinding' || \
                        !has(object.subjects) || \
                        !object.subjects.exists(s, s.kind == 'ServiceAccount' && \
                            has(s.namespace) && s.namespace == params.metadata.name)",
                    "messageExpression": "'subjects: Forbidden: namespace ' + params.metadata.name + \
                        ' is a cluster namespace of bindery, whose exports give kube-bind\\'s \
                        accounts no rights; the konnectors keep the rights kube-bind gave them'",
                    "reason": "Forbidden",
                },
                {
                    "expression": "request.kind.kind != 'ClusterRole' || \
                        !has(object.metadata.ownerReferences) || \
                        !object.metadata.ownerReferences.exists(o, o.kind == 'Namespace' && \
                            o.name == params.metadata.name)",
                    "messageExpression": "'metadata.ownerReferences: Forbidden: namespace ' + \
                        params.metadata.name + ' is a cluster namespace of bindery, whose \
                        exports give kube-bind\\'s accounts no rights'",
                    "reason": "Forbidden",
                },
            ],
        },
    })
}

/// The binding: the policy evaluated once per cluster namespace bindery
/// made, and nothing refused while there is none.
pub fn binding() -> Value {
    json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": POLICY},
        "spec": {
            "policyName": POLICY,
            "validationActions": ["Deny"],
            "paramRef": {
                "selector": {"matchLabels": {CLUSTER_NAMESPACE_LABEL: "true"}},
                "parameterNotFoundAction": "Allow",
            },
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::admissionregistration::v1::{
        ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
    };

    #[test]
    fn a_namespace_bindery_applied_without_the_label_is_labelled_and_no_other() {
        let namespace = |manager: &str, labels: Value| -> Namespace {
            serde_json::from_value(json!({"metadata": {"name": "kube-bind-a",
                "labels": labels,
                "managedFields": [{"manager": manager, "operation": "Apply",
                    "apiVersion": "v1", "fieldsType": "FieldsV1", "fieldsV1": {}}]}}))
            .unwrap()
        };
        assert!(made_by_bindery_unlabelled(&namespace(
            "bindery-bind",
            json!({})
        )));
        assert!(made_by_bindery_unlabelled(&namespace(
            "bindery-controllers",
            json!({})
        )));
        assert!(!made_by_bindery_unlabelled(&namespace(
            "bindery-bind",
            json!({CLUSTER_NAMESPACE_LABEL: "true"})
        )));
        // kube-bind's backend made it: kube-bind's namespace, not bindery's.
        assert!(!made_by_bindery_unlabelled(&namespace(
            "kube-bind-backend",
            json!({})
        )));
    }

    #[test]
    fn the_policy_and_its_binding_are_valid_objects_that_take_namespaces_as_params() {
        let policy: ValidatingAdmissionPolicy =
            serde_json::from_value(policy()).expect("a ValidatingAdmissionPolicy");
        let spec = policy.spec.unwrap();
        assert_eq!(spec.param_kind.unwrap().kind.as_deref(), Some("Namespace"));
        assert_eq!(spec.validations.unwrap().len(), 2);
        let binding: ValidatingAdmissionPolicyBinding =
            serde_json::from_value(binding()).expect("a ValidatingAdmissionPolicyBinding");
        let reference = binding.spec.unwrap().param_ref.unwrap();
        assert_eq!(
            reference.parameter_not_found_action.as_deref(),
            Some("Allow")
        );
        assert_eq!(
            reference.selector.unwrap().match_labels.unwrap()[CLUSTER_NAMESPACE_LABEL],
            "true"
        );
    }
}
