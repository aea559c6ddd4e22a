//! The provider-side API types, group `kube-bind.io`, version `v1alpha2`.
//!
//! Every kind here reads kube-bind's `v1alpha2` objects with kube-bind's
//! meaning: the same kinds, plurals and JSON field names, conditions as
//! kube-bind writes them, either form of a BoundSchema's schema. Where
//! bindery needs more than kube-bind has, the addition is an optional field,
//! marked "bindery extension" in its documentation; kube-bind's own CRDs
//! prune those, so bindery needs its CRDs (`crd`, a superset that installs
//! over kube-bind's), and kube-bind's konnector, whose Go types drop them,
//! cannot work on what only the extensions say (docs/DESIGN.md, "Coming
//! from kube-bind").
//!
//! One module per kind, plus the vocabulary they share (`resources`, `claims`),
//! the well-known label and annotation names (`keys`), the schema pieces the
//! derived schemas cannot express (`schema`) and the CRD generation (`crd`).
//! The CRDs in `deploy/crds/` are generated from these types by [`crds_yaml`];
//! `tests/crds_are_fresh.rs` keeps them in step.

pub mod bound_schema;
pub mod claims;
pub mod cluster_binding;
pub mod condition;
pub mod crd;
pub mod keys;
mod kube_bind_rules;
pub mod resources;
mod schema;
pub mod service_binding;
pub mod service_export;
pub mod service_export_request;
pub mod service_export_template;
pub mod service_namespace;
pub mod v1alpha1;

#[cfg(test)]
mod kube_bind_rules_tests;
#[cfg(test)]
mod testing;

pub use bound_schema::{BoundSchema, BoundSchemaSpec, BoundSchemaStatus, ResourceScope};
pub use claims::{
    ClaimOwner, ClaimSelector, NamedResource, PermissionClaim, ReferencePaths, SelectorReference,
};
pub use cluster_binding::{
    ClusterBinding, ClusterBindingSpec, ClusterBindingStatus, SecretKeyRef, SecretRef,
};
pub use condition::Condition;
pub use crd::{CRD_FILE_HEADER, crd_file_name, crds, crds_yaml};
pub use resources::{
    ExportedResource, GroupResource, InformerScope, PreseededNamespace, SchemaUpdatePolicy,
};
pub use service_binding::{
    APIServiceBinding, APIServiceBindingSpec, APIServiceBindingStatus, AcceptablePermissionClaim,
    CLAIMS_ANNOTATION, ClaimState, NamespacedSecretKeyRef,
};
pub use service_export::{
    APIServiceExport, APIServiceExportSpec, APIServiceExportStatus, IDENTITY_VALID_CONDITION,
    Isolation, isolation_in_force,
};
pub use service_export_request::{
    APIServiceExportRequest, APIServiceExportRequestSpec, APIServiceExportRequestStatus,
    ExportRequestPhase, TemplateReference,
};
pub use service_export_template::{
    APIServiceExportTemplate, APIServiceExportTemplateSpec, APIServiceExportTemplateStatus,
    KlutchServiceSelector,
};
pub use service_namespace::{
    APIServiceNamespace, APIServiceNamespaceSpec, APIServiceNamespaceStatus,
};

/// The API group of every kind in this module.
pub const GROUP: &str = "kube-bind.io";

/// The API version of every kind in this module.
pub const VERSION: &str = "v1alpha2";

/// `apiVersion` of every kind in this module: `kube-bind.io/v1alpha2`.
pub const API_VERSION: &str = "kube-bind.io/v1alpha2";
