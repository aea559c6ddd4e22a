//! Permission claims: the provider's request to reach objects of another
//! resource (Secrets, ConfigMaps, ...) in the consumer's space, and the selector
//! saying which objects the claim covers.

use super::keys;
use super::resources::{GROUP_PATTERN, GroupResource, RESOURCE_PATTERN};
use super::schema;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A claim on objects of one group/resource, narrowed by a selector. The
/// CRDs require the selector, as kube-bind's do; one read without it selects
/// nothing.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = schema::required(&["selector"]))]
pub struct PermissionClaim {
    /// API group; empty for the core group.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(regex(pattern = GROUP_PATTERN), extend("default" = ""))]
    pub group: String,
    /// Plural resource name, e.g. `secrets`.
    #[schemars(regex(pattern = RESOURCE_PATTERN))]
    pub resource: String,
    /// Which objects of the resource are claimed.
    #[serde(default)]
    pub selector: ClaimSelector,
}

impl PermissionClaim {
    pub fn group_resource(&self) -> GroupResource {
        GroupResource::new(&self.group, &self.resource)
    }
}

/// Which objects a claim covers: kube-bind's ways (`namedResources`,
/// `labelSelector`, `references`) are ORed, and none selects nothing;
/// bindery's extensions (`namespaces`, `owner`) narrow. See
/// [`crate::translate::claim_filter`].
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClaimSelector {
    /// Objects picked one by one by name (and namespace).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub named_resources: Vec<NamedResource>,
    /// bindery extension (klutch's `selector.namespaces`): only objects in
    /// these consumer-side namespaces. Empty means any namespace.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub namespaces: Vec<String>,
    /// Objects picked by their labels.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label_selector: Option<LabelSelector>,
    /// Objects named by fields of other objects.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub references: Vec<SelectorReference>,
    /// bindery extension (klutch's form): which side owns the claimed objects,
    /// Provider or Consumer. kube-bind says this with the label
    /// `kube-bind.io/owner` on each object instead.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<ClaimOwner>,
}

/// One object picked by name.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NamedResource {
    /// `metadata.name` of the object.
    pub name: String,
    /// `metadata.namespace`; absent for cluster-scoped objects.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
}

/// Objects named by fields of other objects: for every object of
/// `group`/`resource`, the paths (gjson syntax, as kube-bind reads them)
/// give the name and namespace of a claimed object. The CRDs require
/// `jsonPath`, as kube-bind's do; a reference read without it picks nothing.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = schema::required(&["jsonPath"]))]
pub struct SelectorReference {
    /// API group of the referring objects; empty for the core group.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(regex(pattern = GROUP_PATTERN), extend("default" = ""))]
    pub group: String,
    /// Plural resource name of the referring objects.
    #[schemars(regex(pattern = RESOURCE_PATTERN))]
    pub resource: String,
    /// Versions to read the referring objects with; empty means those of the
    /// export for the same resource.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub versions: Vec<String>,
    /// Where in a referring object the claimed object's name and namespace are.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub json_path: Option<ReferencePaths>,
}

/// gjson paths into a referring object (kube-bind calls them JSONPaths).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReferencePaths {
    /// Path to the claimed object's name.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// Path to the claimed object's namespace.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub namespace: String,
}

/// The side that owns claimed objects; its copy wins.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum ClaimOwner {
    Provider,
    Consumer,
}

impl ClaimOwner {
    /// The value of [`keys::OWNER_LABEL`] that says the same thing.
    pub fn label_value(self) -> &'static str {
        match self {
            Self::Provider => keys::OWNER_PROVIDER,
            Self::Consumer => keys::OWNER_CONSUMER,
        }
    }

    /// Reads a [`keys::OWNER_LABEL`] value.
    pub fn from_label_value(value: &str) -> Option<Self> {
        match value {
            keys::OWNER_PROVIDER => Some(Self::Provider),
            keys::OWNER_CONSUMER => Some(Self::Consumer),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::testing::assert_json_round_trip;

    #[test]
    fn a_claim_with_every_selector_round_trips() {
        assert_json_round_trip::<PermissionClaim>(
            r#"{
              "resource": "secrets",
              "selector": {
                "namedResources": [{"name": "db-credentials", "namespace": "default"}, {"name": "shared"}],
                "labelSelector": {"matchLabels": {"app": "db"}},
                "references": [{
                  "group": "example.com",
                  "resource": "databases",
                  "versions": ["v1"],
                  "jsonPath": {"name": "$.spec.secretRef.name", "namespace": "$.metadata.namespace"}
                }],
                "owner": "Provider"
              }
            }"#,
        );
    }

    #[test]
    fn owner_maps_to_the_kube_bind_label() {
        assert_eq!(ClaimOwner::Provider.label_value(), "provider");
        assert_eq!(
            ClaimOwner::from_label_value("consumer"),
            Some(ClaimOwner::Consumer)
        );
        assert_eq!(ClaimOwner::from_label_value("Consumer"), None);
    }

    #[test]
    fn unknown_owner_is_rejected() {
        assert!(serde_json::from_str::<ClaimOwner>(r#""provider""#).is_err());
        assert!(serde_json::from_str::<ClaimOwner>(r#""Nobody""#).is_err());
    }
}
