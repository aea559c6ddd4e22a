//! APIServiceExportRequest: a consumer's request to bind resources, made in
//! its cluster namespace when it binds. The provider answers by creating the
//! BoundSchemas and the APIServiceExport, and reports the outcome in `phase`.

use super::claims::PermissionClaim;
use super::condition::Condition;
use super::resources::{ExportedResource, PreseededNamespace, SchemaUpdatePolicy};
use super::schema;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// What the consumer asks for.
#[derive(CustomResource, Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "kube-bind.io",
    version = "v1alpha2",
    kind = "APIServiceExportRequest",
    namespaced,
    status = "APIServiceExportRequestStatus",
    derive = "PartialEq",
    category = "kube-bindings",
    doc = "A consumer's request to bind resources; answered with an APIServiceExport.",
    printcolumn(name = "Phase", type_ = "string", json_path = ".status.phase"),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct APIServiceExportRequestSpec {
    /// bindery extension: the APIServiceExportTemplate to bind. Its resources,
    /// claims, namespaces and schema update policy apply; fields set here too
    /// must stay within what the template offers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template_ref: Option<TemplateReference>,
    /// The resources to export; required unless `templateRef` is set (a
    /// rule of the CRD, see [`super::kube_bind_rules`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(min = 1))]
    pub resources: Vec<ExportedResource>,
    /// Other objects the provider may reach in the consumer's space.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub permission_claims: Vec<PermissionClaim>,
    /// Provider-specific parameters of the binding. Free-form.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "schema::free_form_object")]
    pub parameters: Option<serde_json::Value>,
    /// Consumer namespaces to create on the provider side right away.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub namespaces: Vec<PreseededNamespace>,
    /// Whether the BoundSchemas follow later changes of their CRDs.
    #[serde(default)]
    pub schema_update_policy: SchemaUpdatePolicy,
}

/// A cluster-scoped APIServiceExportTemplate, by name.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TemplateReference {
    /// Name of the template.
    pub name: String,
}

/// Where a request stands. It starts Pending and ends Succeeded or Failed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum ExportRequestPhase {
    #[default]
    Pending,
    Succeeded,
    Failed,
}

/// The provider's answer to a request.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct APIServiceExportRequestStatus {
    /// Pending, Succeeded or Failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<ExportRequestPhase>,
    /// Why the request is in its phase, for people.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub terminal_message: Option<String>,
    /// ExportsReady.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "schema::conditions")]
    pub conditions: Vec<Condition>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::testing::assert_json_round_trip;

    const EXAMPLE: &str = r#"{
      "apiVersion": "kube-bind.io/v1alpha2",
      "kind": "APIServiceExportRequest",
      "metadata": {"name": "postgresql", "namespace": "kube-bind-enkvby5uzkct"},
      "spec": {
        "resources": [{"group": "db.example.com", "resource": "postgresqlinstances", "versions": ["v1"]}],
        "permissionClaims": [{
          "resource": "secrets",
          "selector": {"references": [{
            "group": "db.example.com",
            "resource": "postgresqlinstances",
            "jsonPath": {"name": "$.spec.writeConnectionSecretToRef.name"}
          }]}
        }],
        "parameters": {"plan": "small", "backups": {"enabled": true}},
        "namespaces": [{"name": "team-a"}],
        "schemaUpdatePolicy": "Always"
      },
      "status": {
        "phase": "Failed",
        "terminalMessage": "resource postgresqlinstances.db.example.com is not exported",
        "conditions": [{
          "type": "ExportsReady", "status": "False", "reason": "NotExported",
          "message": "no such export", "lastTransitionTime": "2025-05-01T10:00:00Z"
        }]
      }
    }"#;

    #[test]
    fn example_round_trips() {
        let request: APIServiceExportRequest = assert_json_round_trip(EXAMPLE);
        assert_eq!(
            request.status.and_then(|s| s.phase),
            Some(ExportRequestPhase::Failed)
        );
    }

    #[test]
    fn schema_update_policy_defaults_to_never() {
        let request: APIServiceExportRequestSpec =
            serde_json::from_str(r#"{"resources": [{"resource": "widgets"}]}"#).unwrap();
        assert_eq!(request.schema_update_policy, SchemaUpdatePolicy::Never);
    }

    #[test]
    fn unknown_enum_strings_are_rejected() {
        let bad_phase = EXAMPLE.replace(r#""phase": "Failed""#, r#""phase": "Done""#);
        assert!(serde_json::from_str::<APIServiceExportRequest>(&bad_phase).is_err());
        let bad_policy = EXAMPLE.replace(
            r#""schemaUpdatePolicy": "Always""#,
            r#""schemaUpdatePolicy": "Sometimes""#,
        );
        assert!(serde_json::from_str::<APIServiceExportRequest>(&bad_policy).is_err());
    }
}
