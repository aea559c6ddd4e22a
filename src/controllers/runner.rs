//! How the controllers run: kube-runtime's Controller on one kind, also
//! triggered by changes of a related kind, with one retry policy and one way
//! of logging failures.

use super::Context;
use super::instrument::{self, Queue};
use super::ownership::Ours;
use futures::StreamExt;
use futures::future::{Either, Ready, ready};
use kube::Resource;
use kube::api::Api;
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use serde::de::DeserializeOwned;
use std::fmt::Debug;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

/// Reconciles every `K` that is bindery's ([`Ours`]) with `reconcile` until
/// the stream ends; the others are left alone. A change of a `T` reconciles
/// the `K`s that `related` pairs it with. `name` names the controller in
/// metrics, `what` its work in logs.
pub async fn run<K, T, F, Fut>(
    context: Arc<Context>,
    name: &'static str,
    what: &'static str,
    related: fn(&K, &T) -> bool,
    reconcile: F,
) where
    K: Resource<DynamicType = ()> + Ours + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    T: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    F: FnMut(Arc<K>, Arc<Context>) -> Fut,
    Fut: Future<Output = kube::Result<Action>> + Send + 'static,
{
    let client = context.client.clone();
    let queue = Queue::new(name);
    let controller = instrument::controller(Api::<K>::all(client.clone()), &queue);
    let store = controller.store();
    let related_queue = queue.clone();
    controller
        .watches(
            Api::<T>::all(client),
            watcher::Config::default(),
            move |trigger| {
                let objects: Vec<ObjectRef<K>> = store
                    .state()
                    .into_iter()
                    .filter(|object| related(object, &trigger))
                    .map(|object| ObjectRef::from_obj(&*object))
                    .collect();
                objects.iter().for_each(|o| related_queue.triggered(o));
                objects
            },
        )
        .run(
            instrument::observed(name, queue, only_ours(reconcile)),
            move |_, error, _| retry(what, error),
            context,
        )
        .for_each(|result| async move {
            if let Err(error) = result {
                tracing::debug!(%error, what);
            }
        })
        .await;
}

/// `reconcile`, for objects that are bindery's; the others are left alone.
pub fn only_ours<K, F, Fut>(
    mut reconcile: F,
) -> impl FnMut(Arc<K>, Arc<Context>) -> Either<Ready<kube::Result<Action>>, Fut>
where
    K: Ours,
    F: FnMut(Arc<K>, Arc<Context>) -> Fut,
{
    move |object, context| {
        if object.ours(&context.prefix) {
            Either::Right(reconcile(object, context))
        } else {
            Either::Left(ready(Ok(Action::await_change())))
        }
    }
}

/// The retry policy of every controller: a write that lost an optimistic
/// race (409 Conflict) is retried at once from fresh state; anything else
/// is logged and tried again in 2 s.
pub fn retry(what: &str, error: &kube::Error) -> Action {
    if let kube::Error::Api(status) = error
        && status.code == 409
    {
        tracing::debug!(%error, "{what}: conflict; retrying");
        return Action::requeue(Duration::from_millis(100));
    }
    tracing::warn!(%error, "{what} failed; retrying");
    Action::requeue(Duration::from_secs(2))
}
