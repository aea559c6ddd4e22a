//! The vocabulary several kinds share for naming what is exported: a
//! group/resource, an exported resource with its versions, the informer scope,
//! the schema update policy and the namespaces to create up front.
//!
//! Group and resource names carry kube-bind's patterns (and the group its
//! default `""`), so the API server refuses what kube-bind's CRDs refuse.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::fmt;

/// kube-bind's pattern for an API group name (empty for the core group).
pub const GROUP_PATTERN: &str =
    r"^(|[a-z0-9]([-a-z0-9]*[a-z0-9](\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*)?)$";

/// kube-bind's pattern for a plural resource name.
pub const RESOURCE_PATTERN: &str = r"^[a-z][-a-z0-9]*[a-z0-9]$";

/// A resource of an API group. The core group is the empty string.
#[derive(
    Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "camelCase")]
pub struct GroupResource {
    /// API group; empty for the core group.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(regex(pattern = GROUP_PATTERN), extend("default" = ""))]
    pub group: String,
    /// Plural resource name, e.g. `postgresqlinstances`.
    #[schemars(regex(pattern = RESOURCE_PATTERN))]
    pub resource: String,
}

impl GroupResource {
    pub fn new(group: impl Into<String>, resource: impl Into<String>) -> Self {
        Self {
            group: group.into(),
            resource: resource.into(),
        }
    }
}

impl fmt::Display for GroupResource {
    /// `<resource>.<group>`, or just `<resource>` for the core group.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.group.is_empty() {
            f.write_str(&self.resource)
        } else {
            write!(f, "{}.{}", self.resource, self.group)
        }
    }
}

/// A resource being exported, with the versions that are served; no versions
/// leaves the choice to the provider.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ExportedResource {
    /// API group; empty for the core group.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(regex(pattern = GROUP_PATTERN), extend("default" = ""))]
    pub group: String,
    /// Plural resource name.
    #[schemars(regex(pattern = RESOURCE_PATTERN))]
    pub resource: String,
    /// Versions to export; empty means the provider picks.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub versions: Vec<String>,
}

impl ExportedResource {
    pub fn group_resource(&self) -> GroupResource {
        GroupResource::new(&self.group, &self.resource)
    }
}

/// Whether the konnector (or bindery) watches a resource across the whole
/// cluster or one namespace at a time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum InformerScope {
    Cluster,
    Namespaced,
}

impl InformerScope {
    /// The scope a command-line setting names, as kube-bind's backend reads
    /// its `--consumer-scope` (any case).
    pub fn from_flag(value: &str) -> Result<Self, String> {
        match value.to_ascii_lowercase().as_str() {
            "namespaced" => Ok(Self::Namespaced),
            "cluster" => Ok(Self::Cluster),
            _ => Err(format!("{value:?} is not a scope: Namespaced or Cluster")),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Cluster => "Cluster",
            Self::Namespaced => "Namespaced",
        }
    }
}

/// Whether BoundSchemas follow later changes of their source CRD: `Never`
/// (fixed once the BoundSchema exists; kube-bind's default) or `Always`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum SchemaUpdatePolicy {
    #[default]
    Never,
    Always,
}

/// A consumer namespace to create on the provider side when the export is made,
/// before the consumer first uses it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PreseededNamespace {
    /// Name of the namespace as the consumer sees it.
    pub name: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn group_resource_display_omits_the_core_group() {
        assert_eq!(GroupResource::new("", "secrets").to_string(), "secrets");
        assert_eq!(
            GroupResource::new("example.com", "widgets").to_string(),
            "widgets.example.com"
        );
    }

    #[test]
    fn core_group_is_omitted_on_the_wire_and_defaulted_when_absent() {
        let resource: ExportedResource =
            serde_json::from_str(r#"{"resource":"configmaps"}"#).unwrap();
        assert_eq!(resource.group, "");
        assert_eq!(
            serde_json::to_string(&resource).unwrap(),
            r#"{"resource":"configmaps"}"#
        );
    }

    #[test]
    fn unknown_enum_strings_are_rejected() {
        assert!(serde_json::from_str::<InformerScope>(r#""Namespace""#).is_err());
        assert!(serde_json::from_str::<InformerScope>(r#""cluster""#).is_err());
        assert!(serde_json::from_str::<SchemaUpdatePolicy>(r#""Sometimes""#).is_err());
        assert_eq!(
            serde_json::from_str::<SchemaUpdatePolicy>(r#""Always""#).unwrap(),
            SchemaUpdatePolicy::Always
        );
    }
}
