//! APIServiceExport: the grant of resources (and permission claims) to one
//! consumer. It lives in the consumer's cluster namespace on the provider, is
//! named after the request that made it, and bindery serves exactly what it
//! lists.

use super::claims::PermissionClaim;
use super::condition::Condition;
use super::resources::{ExportedResource, InformerScope};
use super::schema;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// What one consumer may use: resources, permission claims and how its
/// cluster-scoped objects are kept apart from other consumers'.
#[derive(CustomResource, Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "kube-bind.io",
    version = "v1alpha2",
    kind = "APIServiceExport",
    namespaced,
    status = "APIServiceExportStatus",
    derive = "PartialEq",
    category = "kube-bindings",
    doc = "The grant of resources and permission claims to one consumer, in its cluster namespace.",
    printcolumn(
        name = "Ready",
        type_ = "string",
        json_path = r#".status.conditions[?(@.type=="Ready")].status"#
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = schema::required(&["isolation", "resources"]))]
pub struct APIServiceExportSpec {
    /// The exported resources. Read as none when missing: an export stored
    /// by kube-bind at `v1alpha1` has none at `v1alpha2` (conversion `None`).
    #[serde(default)]
    #[schemars(length(min = 1))]
    pub resources: Vec<ExportedResource>,
    /// Other objects the provider may reach in the consumer's space.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub permission_claims: Vec<PermissionClaim>,
    /// Whether the exported resources are watched cluster-wide or per namespace.
    pub informer_scope: InformerScope,
    /// How cluster-scoped objects of different consumers are kept apart on the
    /// provider: Prefixed, Namespaced or None. The CRD requires it, as
    /// kube-bind's does; an export read without it (stored before) is served
    /// as kube-bind's konnector serves it: `None`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub isolation: Option<Isolation>,
    /// Deprecated name of `isolation`, kept but not read: kube-bind's
    /// konnector serves by `isolation` alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_scoped_isolation: Option<Isolation>,
}

impl APIServiceExportSpec {
    /// The isolation in force (see [`isolation_in_force`]).
    pub fn effective_isolation(&self) -> Isolation {
        isolation_in_force(self.isolation)
    }
}

/// The isolation an export's `isolation` puts in force, as kube-bind's
/// konnector decides it: the field, else `None` (the konnector reads
/// neither the deprecated `clusterScopedIsolation` nor a default, and
/// serves an export without the field, one stored before kube-bind's CRD
/// required it, unisolated). The one place bindery decides it.
pub fn isolation_in_force(isolation: Option<Isolation>) -> Isolation {
    isolation.unwrap_or(Isolation::None)
}

/// How cluster-scoped objects of different consumers are kept apart on the
/// provider:
///
/// - `Prefixed`: the provider object's name is prefixed with the cluster
///   namespace (the default);
/// - `Namespaced`: the provider object is namespaced, in the cluster namespace;
/// - `None`: no isolation, the provider object has the consumer's name.
//
// (The variants carry no doc comments of their own: with them, the derived
// schema of an optional field loses the field's description.)
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum Isolation {
    #[default]
    Prefixed,
    Namespaced,
    None,
}

impl Isolation {
    /// The isolation a command-line setting names, as kube-bind's backend
    /// reads its `--isolation` (any case).
    pub fn from_flag(value: &str) -> Result<Self, String> {
        match value.to_ascii_lowercase().as_str() {
            "prefixed" => Ok(Self::Prefixed),
            "namespaced" => Ok(Self::Namespaced),
            "none" => Ok(Self::None),
            _ => Err(format!(
                "{value:?} is not an isolation: Prefixed, Namespaced or None"
            )),
        }
    }
}

/// bindery's condition on an export whose identity Secret and
/// `status.identityHash` disagree (or whose Secret is gone): `False` stops
/// serving the export, so objects of two identities are never mixed.
pub const IDENTITY_VALID_CONDITION: &str = "IdentityValid";

/// Observed state of an export.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct APIServiceExportStatus {
    /// Connected, ProviderInSync, ConsumerInSync, PermissionClaim, Ready.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "schema::conditions")]
    pub conditions: Vec<Condition>,
    /// bindery extension: hex sha256 of the export's identity, stamped on every
    /// object made through this export. Nothing is served before it is set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identity_hash: Option<String>,
    /// bindery extension: URL of the export's virtual workspace, where the
    /// provider's controllers see every consumer's objects of this export.
    #[serde(
        default,
        rename = "virtualWorkspaceURL",
        skip_serializing_if = "Option::is_none"
    )]
    pub virtual_workspace_url: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::testing::assert_yaml_round_trip;

    const EXAMPLE: &str = r#"
apiVersion: kube-bind.io/v1alpha2
kind: APIServiceExport
metadata:
  name: postgresql
  namespace: kube-bind-enkvby5uzkct
spec:
  resources:
  - group: db.example.com
    resource: postgresqlinstances
    versions: [v1, v1beta1]
  permissionClaims:
  - resource: secrets
    selector:
      labelSelector:
        matchLabels:
          app.kubernetes.io/part-of: postgresql
      owner: Provider
  - resource: configmaps
    selector:
      namedResources:
      - name: db-settings
        namespace: default
  informerScope: Namespaced
  isolation: Prefixed
status:
  conditions:
  - type: Ready
    status: "True"
    reason: Synced
    lastTransitionTime: "2025-05-01T10:00:00Z"
  identityHash: 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08
  virtualWorkspaceURL: https://bindery.example.com/services/export/postgresql
"#;

    #[test]
    fn example_round_trips() {
        let export: APIServiceExport = assert_yaml_round_trip(EXAMPLE);
        assert_eq!(export.spec.resources[0].resource, "postgresqlinstances");
        assert_eq!(export.spec.effective_isolation(), Isolation::Prefixed);
        let status = export.status.expect("status");
        assert_eq!(status.conditions[0].type_, "Ready");
        assert!(status.virtual_workspace_url.is_some());
    }

    #[test]
    fn an_export_with_the_konnectors_conditions_decodes() {
        // kube-bind's konnector leaves reason and message out when all is
        // well, and adds a severity; an object stored under bindery's older
        // CRDs may lack the time.
        let export: APIServiceExport = serde_json::from_value(serde_json::json!({
            "apiVersion": "kube-bind.io/v1alpha2", "kind": "APIServiceExport",
            "metadata": {"name": "e", "namespace": "kube-bind-x"},
            "spec": {"resources": [{"group": "g", "resource": "r"}],
                "informerScope": "Namespaced", "isolation": "Namespaced"},
            "status": {"conditions": [
                {"type": "Ready", "status": "True", "lastTransitionTime": "2026-01-02T03:04:05Z"},
                {"type": "Connected", "status": "False", "severity": "Warning"}]}}))
        .expect("decodes");
        let conditions = export.status.unwrap().conditions;
        assert_eq!(conditions[1].severity.as_deref(), Some("Warning"));
        assert!(conditions[1].last_transition_time.is_none());
    }

    #[test]
    fn isolation_is_the_fields_else_none_as_the_konnector_serves_it() {
        let mut spec = APIServiceExportSpec {
            resources: vec![],
            permission_claims: vec![],
            informer_scope: InformerScope::Cluster,
            isolation: None,
            cluster_scoped_isolation: None,
        };
        assert_eq!(spec.effective_isolation(), Isolation::None);
        // The deprecated field alone is not read (issue 33, finding 6: it
        // was served Prefixed, where the konnector serves None).
        spec.cluster_scoped_isolation = Some(Isolation::Prefixed);
        assert_eq!(spec.effective_isolation(), Isolation::None);
        spec.isolation = Some(Isolation::Namespaced);
        assert_eq!(spec.effective_isolation(), Isolation::Namespaced);
    }

    #[test]
    fn isolation_settings_are_read_as_kube_binds_backend_reads_them() {
        assert_eq!(Isolation::from_flag("Prefixed"), Ok(Isolation::Prefixed));
        assert_eq!(
            Isolation::from_flag("namespaced"),
            Ok(Isolation::Namespaced)
        );
        assert_eq!(Isolation::from_flag("NONE"), Ok(Isolation::None));
        assert!(Isolation::from_flag("sideways").is_err());
    }

    #[test]
    fn unknown_enum_strings_are_rejected() {
        let bad_isolation = EXAMPLE.replace("isolation: Prefixed", "isolation: Sideways");
        assert!(serde_norway::from_str::<APIServiceExport>(&bad_isolation).is_err());
        let bad_scope = EXAMPLE.replace("informerScope: Namespaced", "informerScope: Namespace");
        assert!(serde_norway::from_str::<APIServiceExport>(&bad_scope).is_err());
        let bad_owner = EXAMPLE.replace("owner: Provider", "owner: provider");
        assert!(serde_norway::from_str::<APIServiceExport>(&bad_owner).is_err());
    }
}
