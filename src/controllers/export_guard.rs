//! The provider's admission keeping bindery's exports whole against writers
//! that do not know bindery's fields: a ValidatingAdmissionPolicy on updates
//! of bindery's exports (labelled `bindery.dev/managed: "true"`, or holding
//! an identity) that refuses an update dropping or changing
//! `status.identityHash`, or dropping `status.virtualWorkspaceURL`.
//!
//! kube-bind's backend reconciles every export of its provider, bindery's
//! too, and writes them back whole through its Go types (an `Update` to set
//! its hash annotation, a status `Update` for its conditions), which prune
//! whatever its types lack: without the identity the export would stop
//! being served. Its status writes of bindery's exports are refused, and it
//! goes on with its own. Its `Update` prunes nothing else: the spec has no
//! field of bindery's but the claims' `owner` and `namespaces`, and the
//! CRD's own rule (kube-bind's) keeps `permissionClaims` immutable. Pure.

use super::ownership::MANAGED_LABEL;
use serde_json::{Value, json};

/// The policy's (and its binding's) name.
pub const POLICY: &str = "bindery.dev-exports";

/// The policy. Pure.
pub fn policy() -> Value {
    json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": POLICY},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": [{
                "apiGroups": ["kube-bind.io"], "apiVersions": ["*"],
                "operations": ["UPDATE"],
                "resources": ["apiserviceexports", "apiserviceexports/status"],
            }]},
            "matchConditions": [{
                "name": "binderys-export",
                "expression": format!(
                    "(has(oldObject.metadata.labels) && \
                      '{MANAGED_LABEL}' in oldObject.metadata.labels && \
                      oldObject.metadata.labels['{MANAGED_LABEL}'] == 'true') || \
                     (has(oldObject.status) && has(oldObject.status.identityHash))"
                ),
            }],
            "validations": [
                {
                    "expression": "!has(oldObject.status) || !has(oldObject.status.identityHash) || \
                        (has(object.status) && has(object.status.identityHash) && \
                         object.status.identityHash == oldObject.status.identityHash)",
                    "message": "status.identityHash: Invalid value: the identity of a bindery export \
                        is set once and never changes or goes; a writer that does not know the \
                        field (kube-bind's backend) leaves bindery's exports alone",
                    "reason": "Invalid",
                },
                {
                    "expression": "!has(oldObject.status) || !has(oldObject.status.virtualWorkspaceURL) || \
                        (has(object.status) && has(object.status.virtualWorkspaceURL))",
                    "message": "status.virtualWorkspaceURL: Required value: a bindery export keeps \
                        its virtual workspace; a writer that does not know the field (kube-bind's \
                        backend) leaves bindery's exports alone",
                    "reason": "Invalid",
                },
            ],
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::admissionregistration::v1::ValidatingAdmissionPolicy;

    #[test]
    fn the_policy_guards_updates_of_binderys_exports_only() {
        let policy: ValidatingAdmissionPolicy =
            serde_json::from_value(policy()).expect("a ValidatingAdmissionPolicy");
        let spec = policy.spec.unwrap();
        let rules = spec.match_constraints.unwrap().resource_rules.unwrap();
        assert_eq!(rules.len(), 1);
        assert_eq!(
            rules[0].operations.as_deref(),
            Some(&["UPDATE".to_string()][..])
        );
        let condition = &spec.match_conditions.unwrap()[0].expression;
        assert!(condition.contains("'bindery.dev/managed'"), "{condition}");
        let validations = spec.validations.unwrap();
        let fields: Vec<&str> = validations
            .iter()
            .map(|v| v.message.as_deref().unwrap().split(':').next().unwrap())
            .collect();
        assert_eq!(
            fields,
            ["status.identityHash", "status.virtualWorkspaceURL"]
        );
        for validation in &validations {
            assert_eq!(validation.reason.as_deref(), Some("Invalid"));
            assert!(
                validation.expression.contains("oldObject"),
                "{}",
                validation.expression
            );
        }
    }
}
