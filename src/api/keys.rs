//! Well-known label, annotation and finalizer names of the `kube-bind.io`
//! protocol, in one place so no module spells them differently.
//!
//! All of them are kube-bind's own names (bindery keeps them so kube-bind data
//! and tooling keep working); none is a bindery invention.

/// Label on a claimed object that says which side owns it, and so whose copy
/// wins: [`OWNER_PROVIDER`] or [`OWNER_CONSUMER`].
pub const OWNER_LABEL: &str = "kube-bind.io/owner";

/// Value of [`OWNER_LABEL`] for objects the provider owns.
pub const OWNER_PROVIDER: &str = "provider";

/// Value of [`OWNER_LABEL`] for objects the consumer owns.
pub const OWNER_CONSUMER: &str = "consumer";

/// Label (value `"true"`) on a provider CRD that may be exported.
pub const EXPORTED_LABEL: &str = "kube-bind.io/exported";

/// Label on the consumer Secret holding a provider kubeconfig.
pub const PROVIDER_KUBECONFIG_LABEL: &str = "kube-bind.io/provider-kubeconfig";

/// Annotation on an APIServiceExport: hash of the source spec it was made from.
pub const SOURCE_SPEC_HASH_ANNOTATION: &str = "kube-bind.io/source-spec-hash";

/// Annotation on a provider namespace made for an APIServiceNamespace.
pub const API_SERVICE_NAMESPACE_ANNOTATION: &str = "kube-bind.io/api-service-namespace";

/// Annotation on a provider object: the consumer's cluster namespace.
pub const CLUSTER_NAMESPACE_ANNOTATION: &str = "kube-bind.io/cluster-namespace";

/// Annotation on a provider object: the namespace of its consumer copy.
pub const CONSUMER_NAMESPACE_ANNOTATION: &str = "kube-bind.io/consumer-namespace";

/// Annotation on a provider object: the UID of its consumer copy.
pub const CONSUMER_UID_ANNOTATION: &str = "kube-bind.io/consumer-uid";

/// Annotation on a consumer object: the namespace of its provider copy.
pub const PROVIDER_NAMESPACE_ANNOTATION: &str = "kube-bind.io/provider-namespace";

/// Annotation on a consumer object: the UID of its provider copy.
pub const PROVIDER_UID_ANNOTATION: &str = "kube-bind.io/provider-uid";

/// Annotation on a cluster namespace: the consumer identity it was made for.
pub const IDENTITY_ANNOTATION: &str = "backend.kube-bind.io/identity";

/// Where kube-bind's backend recorded that identity before
/// [`IDENTITY_ANNOTATION`]; v0.8.2 still reads it, and moves it to the
/// current key when that consumer binds again.
pub const LEGACY_IDENTITY_ANNOTATION: &str = "example-backend.kube-bind.io/identity";

/// Label (`"true"`) on a cluster namespace bindery made, not kube-bind.
pub const CLUSTER_NAMESPACE_LABEL: &str = "bindery.dev/cluster-namespace";

/// Annotation on a cluster namespace: who asked for it.
pub const AUTHOR_ANNOTATION: &str = "backend.kube-bind.io/author";

/// Finalizer kube-bind's konnector puts on synced consumer objects. Note the
/// spelling: `kubebind.io`, without the dash.
pub const SYNCER_FINALIZER: &str = "kubebind.io/syncer";
