//! A condition as kube-bind's objects carry them (kcp's form): `type` and
//! `status`, an optional `severity`, and `reason`, `message` and
//! `lastTransitionTime` that may be missing. Kubernetes' own `Condition`
//! requires all of those, so one condition written by kube-bind's konnector
//! without a reason would fail a whole list's decoding; this one decodes
//! every condition kube-bind's CRDs accept, and keeps what it read (an
//! empty reason or message is left out when written, as kube-bind writes it).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde::{Deserialize, Serialize};

/// One observation of an object's state.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    /// CamelCase condition type, e.g. `Ready`.
    #[serde(rename = "type", default)]
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    #[serde(default)]
    pub status: String,
    /// How bad a False condition is (`Error`, `Warning`, `Info`): kube-bind's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub severity: Option<String>,
    /// CamelCase reason for the last transition; left out when empty, as
    /// kube-bind leaves it out.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    /// Human-readable details; left out when empty.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// When the status last changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Time>,
    /// `metadata.generation` the condition was computed from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_condition_kube_binds_crds_accept_decodes_and_round_trips() {
        for written in [
            // The konnector's, all well: no reason, no message.
            json!({"type": "Ready", "status": "True", "lastTransitionTime": "2026-01-02T03:04:05Z"}),
            // With a severity.
            json!({"type": "Connected", "status": "False", "severity": "Error",
                "reason": "Unreachable", "message": "no route",
                "lastTransitionTime": "2026-01-02T03:04:05Z"}),
            // Without a transition time (bindery's CRDs accepted it before
            // they required it, as kube-bind's do).
            json!({"type": "Ready", "status": "Unknown"}),
            // Kubernetes' form.
            json!({"type": "Ready", "status": "True", "reason": "Ok", "message": "",
                "lastTransitionTime": "2026-01-02T03:04:05Z", "observedGeneration": 3}),
        ] {
            let condition: Condition = serde_json::from_value(written.clone())
                .unwrap_or_else(|e| panic!("{written} decodes: {e}"));
            let mut expected = written.clone();
            expected.as_object_mut().unwrap().retain(|_, v| v != "");
            assert_eq!(serde_json::to_value(&condition).unwrap(), expected);
        }
    }
}
