//! Whether a kube-bind konnector still runs in an app cluster, whatever its
//! Deployment is called: every konnector elects its leader with a Lease
//! named `kube-bind` (in its own namespace) and renews it every 2 s, so a
//! Lease of that name that changed while the move watched it, for longer
//! than the konnector's lease duration, means a konnector runs. A running
//! Pod of a konnector image says so too.

use anyhow::Result;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use kube::api::{Api, ListParams};
use std::collections::BTreeMap;
use std::time::Duration;
use tokio::time::Instant;

/// The Lease every konnector elects its leader with.
pub const KONNECTOR_LEASE: &str = "kube-bind";

/// Longer than a konnector holds its Lease unrenewed (15 s).
pub const WATCH: Duration = Duration::from_secs(20);

/// The konnector Leases of an app cluster as they were when the watch began.
pub struct LeaseWatch {
    seen: BTreeMap<String, String>,
    since: Instant,
}

impl LeaseWatch {
    /// Notes every konnector Lease's version now.
    pub async fn start(app: &kube::Client) -> Result<Self> {
        Ok(Self {
            seen: versions(app).await?,
            since: Instant::now(),
        })
    }

    /// What shows a konnector running since the watch began (a Lease
    /// renewed or made, a Pod of a konnector image running), after waiting
    /// until [`WATCH`] has passed; empty when none runs.
    pub async fn running(&self, app: &kube::Client) -> Result<Vec<String>> {
        tokio::time::sleep_until(self.since + WATCH).await;
        let mut found = renewed(&self.seen, &versions(app).await?);
        let pods = Api::<Pod>::all(app.clone())
            .list(&ListParams::default())
            .await?;
        found.extend(
            pods.items
                .iter()
                .filter(|pod| is_running_konnector(pod))
                .map(|pod| {
                    format!(
                        "Pod {}/{} runs a konnector image",
                        pod.namespace().unwrap_or_default(),
                        pod.name_any()
                    )
                }),
        );
        Ok(found)
    }
}

/// `<namespace>` → resourceVersion of each konnector Lease.
async fn versions(app: &kube::Client) -> Result<BTreeMap<String, String>> {
    let leases = Api::<Lease>::all(app.clone())
        .list(&ListParams::default().fields(&format!("metadata.name={KONNECTOR_LEASE}")))
        .await?;
    Ok(leases
        .items
        .iter()
        .map(|lease| {
            (
                lease.namespace().unwrap_or_default(),
                lease.resource_version().unwrap_or_default(),
            )
        })
        .collect())
}

/// The Leases of `now` that are new or changed since `before`. Pure.
fn renewed(before: &BTreeMap<String, String>, now: &BTreeMap<String, String>) -> Vec<String> {
    now.iter()
        .filter(|(namespace, version)| before.get(*namespace) != Some(version))
        .map(|(namespace, _)| {
            format!("Lease {namespace}/{KONNECTOR_LEASE} was renewed while the move watched it")
        })
        .collect()
}

/// A Pod that runs (or is about to) a container of a konnector image. Pure.
fn is_running_konnector(pod: &Pod) -> bool {
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    if !matches!(phase, Some("Running" | "Pending")) || pod.metadata.deletion_timestamp.is_some() {
        return false;
    }
    pod.spec.iter().flat_map(|s| &s.containers).any(|c| {
        c.image.as_deref().is_some_and(|image| {
            let name = image.rsplit('/').next().unwrap_or(image);
            name.split([':', '@']).next() == Some("konnector")
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_lease_changed_or_made_while_watched_is_a_running_konnector() {
        let before = BTreeMap::from([("kube-bind".to_string(), "10".to_string())]);
        assert!(renewed(&before, &before).is_empty());
        let changed = BTreeMap::from([("kube-bind".to_string(), "11".to_string())]);
        assert_eq!(
            renewed(&before, &changed),
            ["Lease kube-bind/kube-bind was renewed while the move watched it"]
        );
        let another = BTreeMap::from([
            ("kube-bind".to_string(), "10".to_string()),
            ("kube-system".to_string(), "3".to_string()),
        ]);
        assert_eq!(renewed(&before, &another).len(), 1);
        // A Lease gone is a konnector stopped.
        assert!(renewed(&before, &BTreeMap::new()).is_empty());
    }

    #[test]
    fn pods_of_a_konnector_image_are_told_apart() {
        let pod = |image: &str, phase: &str| -> Pod {
            serde_json::from_value(json!({"metadata": {"name": "p", "namespace": "x"},
                "spec": {"containers": [{"name": "c", "image": image}]},
                "status": {"phase": phase}}))
            .unwrap()
        };
        assert!(is_running_konnector(&pod(
            "ghcr.io/kube-bind/konnector:v0.8.2",
            "Running"
        )));
        assert!(is_running_konnector(&pod("konnector@sha256:ab", "Pending")));
        assert!(!is_running_konnector(&pod(
            "ghcr.io/kube-bind/konnector:v0.8.2",
            "Succeeded"
        )));
        assert!(!is_running_konnector(&pod(
            "example.com/konnector-ui:1",
            "Running"
        )));
        assert!(!is_running_konnector(&pod("nginx", "Running")));
    }
}
