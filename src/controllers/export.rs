//! The APIServiceExport controller: every export gets its identity checked
//! (and made, once) and its RBAC kept in step with the consumer's provider
//! namespaces, which trigger it as they appear.

use super::{Context, identity, rbac, runner};
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
        return Ok(Action::await_change());
    }
    identity::ensure(&context.client, &export).await?;
    rbac::grant(&context, &export).await?;
    // The identity Secret is not watched: look again now and then.
    Ok(Action::requeue(Duration::from_secs(30)))
}
