//! APIServiceNamespace: maps one consumer namespace (the object's name) to
//! the provider namespace its objects live in (`status.namespace`). It lives in
//! the consumer's cluster namespace.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Empty: the object's name is the consumer namespace, and that is all it asks.
#[derive(
    CustomResource, Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema,
)]
#[kube(
    group = "kube-bind.io",
    version = "v1alpha2",
    kind = "APIServiceNamespace",
    namespaced,
    status = "APIServiceNamespaceStatus",
    derive = "PartialEq",
    derive = "Default",
    category = "kube-bindings",
    doc = "Maps the consumer namespace named like this object to a provider namespace.",
    printcolumn(name = "Namespace", type_ = "string", json_path = ".status.namespace"),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
pub struct APIServiceNamespaceSpec {}

/// Where the consumer namespace's objects live on the provider.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct APIServiceNamespaceStatus {
    /// The provider namespace; unset until the provider has made it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::testing::assert_json_round_trip;

    #[test]
    fn example_round_trips() {
        let mapping: APIServiceNamespace = assert_json_round_trip(
            r#"{
              "apiVersion": "kube-bind.io/v1alpha2",
              "kind": "APIServiceNamespace",
              "metadata": {"name": "team-a", "namespace": "kube-bind-enkvby5uzkct"},
              "spec": {},
              "status": {"namespace": "kube-bind-enkvby5uzkct-team-a"}
            }"#,
        );
        assert_eq!(
            mapping.status.and_then(|s| s.namespace).as_deref(),
            Some("kube-bind-enkvby5uzkct-team-a")
        );
    }
}
