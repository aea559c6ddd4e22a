//! ClusterBinding: one per consumer, in its cluster namespace (kube-bind
//! names it `cluster`). It holds the consumer's provider kubeconfig reference
//! and the heartbeat the consumer side keeps up.

use super::condition::Condition;
use super::schema;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The consumer as the provider knows it.
// Several printer columns share a `type_`, which clippy takes for a repeated attribute.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "kube-bind.io",
    version = "v1alpha2",
    kind = "ClusterBinding",
    namespaced,
    status = "ClusterBindingStatus",
    derive = "PartialEq",
    category = "kube-bindings",
    doc = "One bound consumer cluster, in its cluster namespace on the provider.",
    printcolumn(
        name = "Konnector Version",
        type_ = "string",
        json_path = ".status.konnectorVersion"
    ),
    printcolumn(
        name = "Last Heartbeat",
        type_ = "date",
        json_path = ".status.lastHeartbeatTime"
    ),
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
pub struct ClusterBindingSpec {
    /// The Secret, in this namespace, holding the kubeconfig the consumer side
    /// uses to reach the provider.
    pub kubeconfig_secret_ref: SecretKeyRef,
    /// Human-readable name of the provider.
    #[schemars(length(min = 1))]
    pub provider_pretty_name: String,
    /// Whatever the provider wants to record about the service bound (region,
    /// tier, ...). Free-form.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "schema::free_form_object")]
    pub service_provider_spec: Option<serde_json::Value>,
}

/// A key of a Secret in the same namespace.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SecretKeyRef {
    /// Name of the Secret.
    #[schemars(length(min = 1))]
    pub name: String,
    /// Key in the Secret's data; kube-bind always uses `kubeconfig`.
    pub key: String,
}

/// A Secret in a given namespace.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SecretRef {
    /// Name of the Secret.
    #[schemars(length(min = 1))]
    pub name: String,
    /// Namespace of the Secret.
    #[schemars(length(min = 1))]
    pub namespace: String,
}

/// Liveness of the consumer side.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterBindingStatus {
    /// When the consumer side last reported in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_heartbeat_time: Option<Time>,
    /// The longest the consumer side promises to go between heartbeats, as a
    /// Go duration string such as `5m0s`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub heartbeat_interval: Option<String>,
    /// Version of the consumer-side agent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub konnector_version: Option<String>,
    /// The consumer-side Secret holding the provider kubeconfig.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub consumer_secret_ref: Option<SecretRef>,
    /// SecretValid, ValidVersion, Healthy.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "schema::conditions")]
    pub conditions: Vec<Condition>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::testing::assert_yaml_round_trip;

    const EXAMPLE: &str = r#"
apiVersion: kube-bind.io/v1alpha2
kind: ClusterBinding
metadata:
  name: cluster
  namespace: kube-bind-enkvby5uzkct
spec:
  kubeconfigSecretRef:
    name: kubeconfig
    key: kubeconfig
  providerPrettyName: Example Databases
  serviceProviderSpec:
    region: eu-central-1
    tiers: [small, large]
status:
  lastHeartbeatTime: "2025-05-01T10:05:00Z"
  heartbeatInterval: 5m0s
  konnectorVersion: v0.5.0
  consumerSecretRef:
    name: kubeconfig-x7k2p
    namespace: kube-bind
  conditions:
  - type: Healthy
    status: "True"
    reason: HeartbeatReceived
    lastTransitionTime: "2025-05-01T10:00:00Z"
"#;

    #[test]
    fn example_round_trips() {
        let binding: ClusterBinding = assert_yaml_round_trip(EXAMPLE);
        assert_eq!(binding.spec.kubeconfig_secret_ref.key, "kubeconfig");
        assert_eq!(
            binding.spec.service_provider_spec.as_ref().unwrap()["region"],
            "eu-central-1"
        );
    }
}
