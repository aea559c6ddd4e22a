//! The provider's own admission as the last word on identity: a
//! ValidatingAdmissionPolicy that refuses any write made as a consumer's
//! account (`bindery-consumer` in its cluster namespace, as bindery
//! impersonates it) unless it names one export (the `bindery.dev/export`
//! user extra bindery sets), the object it results in carries exactly that
//! consumer's identity and that export's, and the object it changes or
//! deletes carried them already. Writes of any other account, kube-bind's
//! konnector (`kube-binder` in the same namespaces) among them, are not
//! its business. kube-apiserver evaluates it on
//! the object as the write leaves it, so it holds whatever the request was
//! (any patch type, any body), even where bindery's translation had a bug.

use super::{Context, export_guard, kube_bind_rbac_guard};
use crate::translate::identity::{
    CONSUMER_LABEL, CONSUMER_SERVICE_ACCOUNT, EXPORT_EXTRA, EXPORT_LABEL,
};
use k8s_openapi::api::admissionregistration::v1::{
    ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
};
use kube::api::{Api, Patch};
use serde_json::{Value, json};
use std::time::Duration;

/// The policy's (and its binding's) name.
pub const POLICY: &str = "bindery.dev-identity";

/// How often the policy is applied again, in case it was changed.
const RESYNC: Duration = Duration::from_secs(300);

/// A CEL test that `object`'s labels are exactly the writer's identity.
fn carries_identity(object: &str, prefix: &str) -> String {
    format!(
        "has({object}.metadata.labels) && \
         '{CONSUMER_LABEL}' in {object}.metadata.labels && \
         '{prefix}' + {object}.metadata.labels['{CONSUMER_LABEL}'] == variables.clusterNamespace && \
         '{EXPORT_LABEL}' in {object}.metadata.labels && \
         {object}.metadata.labels['{EXPORT_LABEL}'] == variables.export"
    )
}

/// The policy for consumers whose cluster namespaces are `<prefix><id>`.
/// Pure.
pub fn policy(prefix: &str) -> Value {
    let account_prefix = format!("system:serviceaccount:{prefix}");
    json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": POLICY},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": [{
                "apiGroups": ["*"], "apiVersions": ["*"],
                "operations": ["CREATE", "UPDATE", "DELETE"],
                // A Scale carries no labels; its object's are checked by
                // bindery before it writes one.
                "resources": ["*", "*/status"],
            }]},
            "matchConditions": [{
                "name": "made-as-a-consumer",
                "expression": format!(
                    "request.userInfo.username.startsWith('{account_prefix}') && \
                     request.userInfo.username.endsWith(':{CONSUMER_SERVICE_ACCOUNT}')"
                ),
            }],
            "variables": [
                {"name": "clusterNamespace", "expression": "request.userInfo.username.split(':')[2]"},
                {"name": "export", "expression": format!(
                    "'{EXPORT_EXTRA}' in request.userInfo.extra && \
                     size(request.userInfo.extra['{EXPORT_EXTRA}']) == 1 ? \
                     request.userInfo.extra['{EXPORT_EXTRA}'][0] : ''"
                )},
            ],
            "validations": [
                {
                    "expression": "variables.export != ''",
                    "message": "a consumer's write names the export it is made for",
                    "reason": "Forbidden",
                },
                {
                    "expression": format!(
                        "request.operation == 'DELETE' || ({})",
                        carries_identity("object", prefix)
                    ),
                    "message": "an object written by a consumer carries exactly that consumer's and export's identity",
                    "reason": "Forbidden",
                },
                {
                    "expression": format!(
                        "request.operation == 'CREATE' || ({})",
                        carries_identity("oldObject", prefix)
                    ),
                    "message": "a consumer changes and deletes only its own export's objects",
                    "reason": "Forbidden",
                },
            ],
        },
    })
}

/// The binding that puts policy `name` in force everywhere.
pub fn binding(name: &str) -> Value {
    json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": name},
        "spec": {"policyName": name, "validationActions": ["Deny"]},
    })
}

/// Applies the policies (this one, `export_guard`'s and
/// `kube_bind_rbac_guard`'s) and their
/// bindings, and again every few minutes.
pub async fn run(context: std::sync::Arc<Context>) {
    loop {
        let wait = match apply(&context).await {
            Ok(()) => RESYNC,
            Err(error) => {
                tracing::error!(%error, "cannot apply bindery's admission policies");
                Duration::from_secs(10)
            }
        };
        tokio::time::sleep(wait).await;
    }
}

async fn apply(context: &Context) -> kube::Result<()> {
    let policies = Api::<ValidatingAdmissionPolicy>::all(context.client.clone());
    let bindings = Api::<ValidatingAdmissionPolicyBinding>::all(context.client.clone());
    for (name, policy, binding) in [
        (POLICY, policy(&context.prefix), binding(POLICY)),
        (
            export_guard::POLICY,
            export_guard::policy(),
            binding(export_guard::POLICY),
        ),
        (
            kube_bind_rbac_guard::POLICY,
            kube_bind_rbac_guard::policy(),
            kube_bind_rbac_guard::binding(),
        ),
    ] {
        policies
            .patch(name, &context.apply(), &Patch::Apply(policy))
            .await?;
        bindings
            .patch(name, &context.apply(), &Patch::Apply(binding))
            .await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_policy_is_a_valid_object_that_names_the_accounts_and_labels() {
        let policy: ValidatingAdmissionPolicy =
            serde_json::from_value(policy("kube-bind-")).expect("a ValidatingAdmissionPolicy");
        let spec = policy.spec.unwrap();
        let condition = &spec.match_conditions.unwrap()[0].expression;
        assert!(
            condition.contains("'system:serviceaccount:kube-bind-'"),
            "{condition}"
        );
        assert!(condition.contains("':bindery-consumer'"), "{condition}");
        assert!(!condition.contains("kube-binder"), "{condition}");
        let validations = spec.validations.unwrap();
        assert_eq!(validations.len(), 3);
        assert_eq!(validations[0].expression, "variables.export != ''");
        for validation in &validations[1..] {
            assert!(validation.expression.contains("'kube-bind-' + "));
            assert!(validation.expression.contains("bindery.dev/export"));
        }
        for validation in &validations {
            assert_eq!(validation.reason.as_deref(), Some("Forbidden"));
        }
        let _: ValidatingAdmissionPolicyBinding = serde_json::from_value(binding(POLICY)).unwrap();
    }
}
