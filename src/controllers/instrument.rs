//! Counting the controllers' work for `/metrics`
//! ([`crate::metrics::controllers`]): every reconcile's result and time, and
//! the objects waiting for one (the work queue's depth: objects a change
//! triggered whose reconcile has not started yet; kube-runtime's scheduler
//! merges repeated triggers of one object, and so does this count).

use super::Context;
use futures::{Stream, StreamExt};
use kube::Resource;
use kube::api::Api;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::{self, ObjectRef};
use kube::runtime::{WatchStreamExt, watcher};
use prometheus_client::metrics::gauge::Gauge;
use serde::de::DeserializeOwned;
use std::collections::HashSet;
use std::fmt::Debug;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};

/// A reconcile's future, boxed.
type Reconciling = Pin<Box<dyn Future<Output = kube::Result<Action>> + Send>>;

/// The objects of one controller waiting for their reconcile.
pub struct Queue {
    pending: Mutex<HashSet<String>>,
    depth: Gauge,
}

impl Queue {
    /// The queue of `controller`, shown as its `workqueue_depth`.
    pub fn new(controller: &'static str) -> Arc<Self> {
        Arc::new(Self {
            pending: Mutex::new(HashSet::new()),
            depth: crate::metrics::metrics().controllers.queue(controller),
        })
    }

    /// A change asks for `object`'s reconcile.
    pub fn triggered<K: Resource<DynamicType = ()>>(&self, object: &ObjectRef<K>) {
        self.update(|pending| {
            pending.insert(object.to_string());
        });
    }

    /// `object`'s reconcile has started.
    fn started<K: Resource<DynamicType = ()>>(&self, object: &ObjectRef<K>) {
        self.update(|pending| {
            pending.remove(&object.to_string());
        });
    }

    fn update(&self, change: impl FnOnce(&mut HashSet<String>)) {
        let mut pending = self.pending.lock().unwrap_or_else(|p| p.into_inner());
        change(&mut pending);
        self.depth.set(pending.len() as i64);
    }

    /// How many objects wait.
    pub fn depth(&self) -> usize {
        self.pending.lock().unwrap_or_else(|p| p.into_inner()).len()
    }
}

/// A controller of every `K` in `api`, whose changes are counted in `queue`
/// (what `Controller::new` makes, with the count).
pub fn controller<K>(api: Api<K>, queue: &Arc<Queue>) -> Controller<K>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    let (reader, writer) = reflector::store();
    let queue = queue.clone();
    let changes = watcher(api, watcher::Config::default())
        .default_backoff()
        .reflect(writer)
        .applied_objects()
        .inspect(move |object| {
            if let Ok(object) = object {
                queue.triggered(&ObjectRef::from_obj(object));
            }
        });
    Controller::for_stream(changes, reader)
}

/// `triggers`, each counted in `queue` as it passes.
pub fn counted<K: Resource<DynamicType = ()>>(
    triggers: impl Stream<Item = ObjectRef<K>>,
    queue: Arc<Queue>,
) -> impl Stream<Item = ObjectRef<K>> {
    triggers.inspect(move |object| queue.triggered(object))
}

/// `reconcile` of `controller`, each run counted and timed, and taken off
/// `queue` as it starts.
pub fn observed<K, F, Fut>(
    controller: &'static str,
    queue: Arc<Queue>,
    mut reconcile: F,
) -> impl FnMut(Arc<K>, Arc<Context>) -> Reconciling
where
    K: Resource<DynamicType = ()> + Send + Sync + 'static,
    F: FnMut(Arc<K>, Arc<Context>) -> Fut,
    Fut: Future<Output = kube::Result<Action>> + Send + 'static,
{
    move |object, context| {
        queue.started(&ObjectRef::from_obj(&*object));
        let running = crate::metrics::metrics().controllers.reconcile(controller);
        let future = reconcile(object, context);
        Box::pin(async move {
            let result = future.await;
            running.finish(result.is_ok());
            result
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;

    #[test]
    fn an_object_waits_once_however_often_it_is_triggered() {
        let queue = Queue::new("instrument-test");
        let a = ObjectRef::<ConfigMap>::new("a").within("ns");
        let b = ObjectRef::<ConfigMap>::new("b").within("ns");
        queue.triggered(&a);
        queue.triggered(&a);
        queue.triggered(&b);
        assert_eq!(queue.depth(), 2);
        assert_eq!(queue.depth.get(), 2);
        queue.started(&a);
        assert_eq!(queue.depth(), 1);
        queue.started(&a);
        queue.started(&b);
        assert_eq!(queue.depth.get(), 0);
    }
}
