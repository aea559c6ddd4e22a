//! kube-bind's `v1alpha1` APIServiceExport, as kube-bind's CRD describes
//! it: one CRD-like resource per export (`group`, `names`, `scope`,
//! `versions`), before `v1alpha2` made an export a list of resources.
//!
//! bindery never acts on it. The type is here so that bindery's CRD serves
//! `v1alpha1` with kube-bind's schema and rules for it
//! ([`super::kube_bind_rules`]), and so that its fixtures decode. Read at
//! `v1alpha2` (the CRDs convert with strategy `None`, as kube-bind's do),
//! such an export has no resources, so bindery serves nothing of it.

use super::bound_schema::ResourceScope;
use super::condition::Condition;
use super::resources::InformerScope;
use super::schema;
use super::service_export::Isolation;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinitionNames, CustomResourceDefinitionVersion,
};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// One exported resource, described as a CRD describes it.
#[derive(CustomResource, Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "kube-bind.io",
    version = "v1alpha1",
    kind = "APIServiceExport",
    namespaced,
    status = "APIServiceExportStatus",
    derive = "PartialEq"
)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {"rule": "self.scope == \"Namespaced\" || self.informerScope == \"Cluster\"",
     "message": "informerScope must be Cluster for cluster-scoped resources"},
    {"rule": "self.scope == \"Namespaced\" || has(self.clusterScopedIsolation)",
     "message": "clusterScopedIsolation must be defined for cluster-scoped resources"},
    {"rule": "self.scope == \"Cluster\" || !has(self.clusterScopedIsolation)",
     "message": "clusterScopedIsolation is not relevant for namespaced resources"},
]))]
pub struct APIServiceExportSpec {
    /// API group of the resource; the export is named `<plural>.<group>`.
    pub group: String,
    /// Kind and resource names.
    pub names: CustomResourceDefinitionNames,
    /// Whether the resource is cluster-scoped or namespaced.
    pub scope: ResourceScope,
    /// The versions, each with its schema.
    #[schemars(schema_with = "schema::wrapped_crd_versions")]
    pub versions: Vec<CustomResourceDefinitionVersion>,
    /// Whether the resource is watched cluster-wide or per namespace.
    #[schemars(extend("x-kubernetes-validations" = [
        {"rule": "self == oldSelf", "message": "informerScope is immutable"},
    ]))]
    pub informer_scope: InformerScope,
    /// How cluster-scoped objects of different consumers are kept apart.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_scoped_isolation: Option<Isolation>,
}

/// The export as the consumer side reported it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct APIServiceExportStatus {
    /// The names actually served.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accepted_names: Option<CustomResourceDefinitionNames>,
    /// Every version objects were ever stored in.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stored_versions: Vec<String>,
    /// Established and the others the konnector reports.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "schema::conditions")]
    pub conditions: Vec<Condition>,
}

/// kube-bind's rule on the whole `v1alpha1` export, with kube-bind's
/// message (which names another field than the rule checks).
pub(super) const NAME_RULE: (&str, &str) = (
    "self.metadata.name == self.spec.names.plural+\".\"+self.spec.group",
    "informerScope is immutable",
);
