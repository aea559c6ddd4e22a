//! Leader election on a coordination.k8s.io Lease (kube-lease-manager): the
//! controllers run only while this replica holds the Lease, and stop the
//! moment it is lost.

use kube_lease_manager::LeaseManagerBuilder;
use std::future::Future;
use std::time::Duration;

/// The Lease's settings.
pub struct LeaseSettings {
    pub namespace: String,
    pub name: String,
    /// This replica's name in the Lease.
    pub identity: String,
    /// How long a holder keeps the Lease without renewing it.
    pub duration: Duration,
}

/// Runs `work` (made afresh each time) while holding the Lease, forever.
pub async fn lead<F, Fut>(client: kube::Client, settings: LeaseSettings, mut work: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    let duration = settings.duration.as_secs().max(2);
    loop {
        let manager = LeaseManagerBuilder::new(client.clone(), &settings.name)
            .with_namespace(&settings.namespace)
            .with_identity(&settings.identity)
            .with_duration(duration)
            .with_grace((duration / 3).max(1))
            .build()
            .await;
        let manager = match manager {
            Ok(manager) => manager,
            Err(error) => {
                tracing::warn!(%error, "cannot reach the leader Lease; retrying");
                tokio::time::sleep(Duration::from_secs(2)).await;
                continue;
            }
        };
        let (mut leading, lease_task) = manager.watch().await;
        let metrics = &crate::metrics::metrics().controllers;
        loop {
            metrics.leading(&settings.name, false);
            if leading.wait_for(|held| *held).await.is_err() {
                break;
            }
            metrics.leading(&settings.name, true);
            tracing::info!(identity = %settings.identity, "leading: controllers start");
            // The work runs inside this future, not a task of its own: when
            // the Lease is lost, or this future is dropped (the server
            // stopping), the controllers go with it, at once.
            tokio::select! {
                () = work() => {}
                _ = leading.wait_for(|held| !*held) => {}
            }
            tracing::warn!(identity = %settings.identity, "lost the Lease: controllers stop");
        }
        drop(leading);
        let _ = lease_task.await;
    }
}
