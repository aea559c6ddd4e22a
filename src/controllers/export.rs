//! The APIServiceExport controller: every export gets its identity checked
//! (and made, once) and its RBAC kept in step with the consumer's provider
//! namespaces, which trigger it as they appear. It owns the export's
//! finalizer: a deleted export is cleaned up by its deletion policy.

use super::{Context, deletion, identity, rbac, runner};
use crate::api::{APIServiceExport, APIServiceNamespace};
use kube::ResourceExt;
use kube::runtime::controller::Action;
use std::sync::Arc;
use std::time::Duration;

/// Runs the controller until the stream ends. A consumer namespace record
/// retriggers every export of its cluster namespace.
pub async fn run(context: Arc<Context>) {
    runner::run(
        context,
        "export",
        "reconciling an export",
        |export: &APIServiceExport, record: &APIServiceNamespace| {
            export.namespace() == record.namespace()
        },
        reconcile,
    )
    .await;
}

async fn reconcile(export: Arc<APIServiceExport>, context: Arc<Context>) -> kube::Result<Action> {
    if export.metadata.deletion_timestamp.is_some() {
        return Ok(if deletion::finalize(&context, &export).await? {
            Action::await_change()
        } else {
            // The consumer's objects are still going.
            Action::requeue(Duration::from_secs(2))
        });
    }
    if export.finalizers().iter().all(|f| f != deletion::FINALIZER) {
        // The change brings the export back with the finalizer on.
        deletion::ensure_finalizer(&context.client, &export).await?;
        return Ok(Action::await_change());
    }
    identity::ensure(&context.client, &export).await?;
    rbac::grant(&context, &export).await?;
    // The identity Secret is not watched: look again now and then.
    Ok(Action::requeue(Duration::from_secs(30)))
}
