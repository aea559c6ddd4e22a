//! APIServiceBinding: the app cluster's record of a binding (cluster-scoped,
//! named like the export it binds). It points at the provider kubeconfig and,
//! as a bindery extension, records which permission claims the consumer
//! accepted.

use super::claims::{ClaimSelector, PermissionClaim};
use super::condition::Condition;
use super::resources::GroupResource;
use super::schema;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The binding as the consumer made it.
// Several printer columns share a `type_`, which clippy takes for a repeated attribute.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "kube-bind.io",
    version = "v1alpha2",
    kind = "APIServiceBinding",
    status = "APIServiceBindingStatus",
    derive = "PartialEq",
    shortname = "sb",
    category = "kube-bindings",
    doc = "An app cluster's binding to an APIServiceExport of a provider.",
    printcolumn(
        name = "Provider",
        type_ = "string",
        json_path = ".status.providerPrettyName"
    ),
    printcolumn(
        name = "Ready",
        type_ = "string",
        json_path = r#".status.conditions[?(@.type=="Ready")].status"#
    ),
    printcolumn(
        name = "Message",
        type_ = "string",
        json_path = r#".status.conditions[?(@.type=="Ready")].message"#
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct APIServiceBindingSpec {
    /// The Secret holding the kubeconfig of the provider.
    pub kubeconfig_secret_ref: NamespacedSecretKeyRef,
    /// bindery extension (klutch's form): the export's permission claims, each
    /// with the consumer's decision. Only accepted claims are honoured.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub permission_claims: Vec<AcceptablePermissionClaim>,
}

/// Annotation on a binding bindery wrote: its permission claims with their
/// decisions, as a JSON list, kept where no schema prunes them. kube-bind's
/// konnector, started in the app cluster, installs its own
/// APIServiceBinding CRD, which lacks `spec.permissionClaims`: from then on
/// kube-apiserver drops that field from every read of the binding.
pub const CLAIMS_ANNOTATION: &str = "bindery.dev/permission-claims";

impl APIServiceBinding {
    /// The binding's claims and their decisions: `spec.permissionClaims`,
    /// or, where a schema without it pruned the field, those
    /// [`CLAIMS_ANNOTATION`] holds (none when it does not read as a list of
    /// claims).
    pub fn claim_decisions(&self) -> Vec<AcceptablePermissionClaim> {
        if !self.spec.permission_claims.is_empty() {
            return self.spec.permission_claims.clone();
        }
        self.metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(CLAIMS_ANNOTATION))
            .and_then(|text| serde_json::from_str(text).ok())
            .unwrap_or_default()
    }
}

/// A key of a Secret in a given namespace.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NamespacedSecretKeyRef {
    /// Namespace of the Secret.
    #[schemars(length(min = 1))]
    pub namespace: String,
    /// Name of the Secret.
    #[schemars(length(min = 1))]
    pub name: String,
    /// Key in the Secret's data; kube-bind always uses `kubeconfig`.
    pub key: String,
}

/// A permission claim and the consumer's decision on it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AcceptablePermissionClaim {
    /// API group; empty for the core group.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub group: String,
    /// Plural resource name, e.g. `secrets`.
    pub resource: String,
    /// Which objects of the resource are claimed.
    #[serde(default)]
    pub selector: ClaimSelector,
    /// The consumer's decision.
    pub state: ClaimState,
}

impl AcceptablePermissionClaim {
    pub fn new(claim: PermissionClaim, state: ClaimState) -> Self {
        Self {
            group: claim.group,
            resource: claim.resource,
            selector: claim.selector,
            state,
        }
    }

    /// The claim without the decision.
    pub fn claim(&self) -> PermissionClaim {
        PermissionClaim {
            group: self.group.clone(),
            resource: self.resource.clone(),
            selector: self.selector.clone(),
        }
    }

    pub fn is_accepted(&self) -> bool {
        self.state == ClaimState::Accepted
    }
}

/// The consumer's decision on a permission claim.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum ClaimState {
    Accepted,
    Rejected,
}

/// Observed state of a binding.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct APIServiceBindingStatus {
    /// Human-readable name of the provider.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_pretty_name: Option<String>,
    /// The resources whose schemas are bound.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(min = 1))]
    pub bound_schemas: Vec<GroupResource>,
    /// The permission claims in force.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub permission_claims: Vec<PermissionClaim>,
    /// SecretValid, InformersSynced, Heartbeating, Connected, SchemaInSync, Ready.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "schema::conditions")]
    pub conditions: Vec<Condition>,
}

/// The condition kube-bind's konnector sets on every APIServiceBinding, from
/// its kubeconfig Secret; bindery never sets it.
pub const SECRET_VALID_CONDITION: &str = "SecretValid";

/// Whether kube-bind's konnector, running in the app cluster, has judged a
/// binding with these conditions unusable to it: it finds bindery's Secret
/// no kubeconfig of its own (its context names no namespace, on purpose, so
/// that the konnector never syncs bindery's exports), marks SecretValid
/// False, and makes Ready the summary of every condition.
pub fn judged_by_a_konnector(conditions: &[Condition]) -> bool {
    conditions
        .iter()
        .any(|c| c.type_ == SECRET_VALID_CONDITION && c.status == "False")
}

impl APIServiceBindingStatus {
    /// The conditions without the konnector's judgement (its SecretValid,
    /// and the Ready it summarised from it, which gives SecretValid's
    /// reason); `None` when it left none.
    pub fn without_konnectors_judgement(&self) -> Option<Vec<Condition>> {
        let secret_valid = self
            .conditions
            .iter()
            .find(|c| c.type_ == SECRET_VALID_CONDITION)?;
        let kept = self
            .conditions
            .iter()
            .filter(|c| c.type_ != SECRET_VALID_CONDITION)
            .filter(|c| !(c.type_ == "Ready" && c.reason == secret_valid.reason))
            .cloned()
            .collect();
        Some(kept)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::testing::assert_yaml_round_trip;

    #[test]
    fn the_konnectors_judgement_is_told_and_taken_back() {
        let status: APIServiceBindingStatus = serde_json::from_value(serde_json::json!({
            "conditions": [
                {"type": "SecretValid", "status": "False", "reason": "KubeconfigSecretInvalid",
                    "lastTransitionTime": "2026-11-29T00:00:00Z"},
                {"type": "Ready", "status": "False", "reason": "KubeconfigSecretInvalid",
                    "lastTransitionTime": "2026-11-29T00:00:00Z"},
                {"type": "SchemaInSync", "status": "True", "reason": "APIServicesAvailable",
                    "lastTransitionTime": "2026-11-29T00:00:00Z"}]}))
        .unwrap();
        assert!(judged_by_a_konnector(&status.conditions));
        let kept = status.without_konnectors_judgement().unwrap();
        let types: Vec<&str> = kept.iter().map(|c| c.type_.as_str()).collect();
        assert_eq!(types, ["SchemaInSync"]);
        let untouched = APIServiceBindingStatus {
            conditions: kept,
            ..Default::default()
        };
        assert!(!judged_by_a_konnector(&untouched.conditions));
        assert_eq!(untouched.without_konnectors_judgement(), None);
    }

    const EXAMPLE: &str = r#"
apiVersion: kube-bind.io/v1alpha2
kind: APIServiceBinding
metadata:
  name: postgresql
spec:
  kubeconfigSecretRef:
    namespace: kube-bind
    name: kubeconfig-x7k2p
    key: kubeconfig
  permissionClaims:
  - resource: secrets
    selector:
      owner: Provider
    state: Accepted
  - resource: configmaps
    selector:
      namedResources:
      - name: db-settings
        namespace: default
    state: Rejected
status:
  providerPrettyName: Example Databases
  boundSchemas:
  - group: db.example.com
    resource: postgresqlinstances
  permissionClaims:
  - resource: secrets
    selector:
      owner: Provider
  conditions:
  - type: Ready
    status: "False"
    reason: HeartbeatMissing
    message: no heartbeat for 10m
    lastTransitionTime: "2025-05-01T10:00:00Z"
"#;

    #[test]
    fn example_round_trips() {
        let binding: APIServiceBinding = assert_yaml_round_trip(EXAMPLE);
        let claims = &binding.spec.permission_claims;
        assert!(claims[0].is_accepted());
        assert!(!claims[1].is_accepted());
        assert_eq!(claims[1].claim().resource, "configmaps");
        assert_eq!(
            AcceptablePermissionClaim::new(claims[1].claim(), ClaimState::Rejected),
            claims[1]
        );
    }

    #[test]
    fn pruned_claims_are_read_from_the_annotation() {
        let written: APIServiceBinding = assert_yaml_round_trip(EXAMPLE);
        let mut pruned = written.clone();
        pruned.spec.permission_claims.clear();
        assert!(pruned.claim_decisions().is_empty());
        pruned.metadata.annotations = Some(
            [(
                CLAIMS_ANNOTATION.to_string(),
                serde_json::to_string(&written.spec.permission_claims).unwrap(),
            )]
            .into(),
        );
        assert_eq!(pruned.claim_decisions(), written.spec.permission_claims);
        // The spec, when there, is what holds.
        let mut both = pruned.clone();
        both.spec.permission_claims = written.spec.permission_claims[..1].to_vec();
        assert_eq!(both.claim_decisions().len(), 1);
        let mut unreadable = pruned;
        unreadable.metadata.annotations =
            Some([(CLAIMS_ANNOTATION.to_string(), "{not a list".to_string())].into());
        assert!(unreadable.claim_decisions().is_empty());
    }

    #[test]
    fn unknown_enum_strings_are_rejected() {
        let bad_state = EXAMPLE.replace("state: Rejected", "state: Maybe");
        assert!(serde_norway::from_str::<APIServiceBinding>(&bad_state).is_err());
    }
}
