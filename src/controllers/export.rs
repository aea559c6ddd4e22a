//! The APIServiceExport controller: every export gets its identity checked
//! (and made, once) and its RBAC kept in step with the consumer's provider
//! namespaces, which trigger it as they appear.

use super::{Context, identity, rbac};
use crate::api::{APIServiceExport, APIServiceNamespace};
use futures::StreamExt;
use kube::ResourceExt;
use kube::api::Api;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use std::sync::Arc;
use std::time::Duration;

/// Runs the controller until the stream ends.
pub async fn run(context: Arc<Context>) {
    let client = context.client.clone();
    let exports: Api<APIServiceExport> = Api::all(client.clone());
    let controller = Controller::new(exports, watcher::Config::default());
    let store = controller.store();
    controller
        .watches(
            Api::<APIServiceNamespace>::all(client),
            watcher::Config::default(),
            move |record| {
                // Every export of the record's cluster namespace.
                let namespace = record.namespace();
                store
                    .state()
                    .into_iter()
                    .filter(|export| export.namespace() == namespace)
                    .map(|export| ObjectRef::from_obj(&*export))
                    .collect::<Vec<_>>()
            },
        )
        .run(reconcile, error_policy, context)
        .for_each(|result| async move {
            if let Err(error) = result {
                tracing::debug!(%error, "{}", module_path!());
            }
        })
        .await;
}

fn error_policy(_: Arc<APIServiceExport>, error: &kube::Error, _: Arc<Context>) -> Action {
    tracing::warn!(%error, "reconciling an export failed; retrying");
    Action::requeue(Duration::from_secs(2))
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
