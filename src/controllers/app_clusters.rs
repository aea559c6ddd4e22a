//! The app clusters the controllers can reach, through the `app-cluster`
//! Secrets of `crate::app_cluster`: a client per cluster namespace (cached
//! by the Secret's resourceVersion), and a watch on each app cluster's
//! APIServiceBindings and the APIServices bind registered for them, so that
//! a binding change, or a change of the aggregator's verdict on its
//! APIServices, reconciles its export at once.

use crate::api::APIServiceBinding;
use dashmap::DashMap;
use futures::StreamExt;
use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt;
use kube::api::Api;
use kube::runtime::{WatchStreamExt, watcher};

use std::collections::HashMap;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

pub use crate::app_cluster::SECRET_NAME;
use crate::app_cluster::client_from;

/// What is known of one consumer's app cluster.
pub enum Access {
    /// No `app-cluster` Secret: the consumer has no registered app cluster.
    NotRegistered,
    /// The Secret exists but does not make a client.
    Invalid(String),
    Client(kube::Client),
}

/// Clients to app clusters, one per cluster namespace, rebuilt when the
/// Secret changes.
#[derive(Default)]
pub struct AppClusters {
    clients: DashMap<String, (String, kube::Client)>,
}

impl AppClusters {
    /// The app cluster of `cluster_namespace`, read from the provider.
    pub async fn access(
        &self,
        provider: &kube::Client,
        cluster_namespace: &str,
    ) -> kube::Result<Access> {
        let secrets: Api<Secret> = Api::namespaced(provider.clone(), cluster_namespace);
        let Some(secret) = secrets.get_opt(SECRET_NAME).await? else {
            self.clients.remove(cluster_namespace);
            return Ok(Access::NotRegistered);
        };
        Ok(self.for_secret(cluster_namespace, &secret).await)
    }

    async fn for_secret(&self, cluster_namespace: &str, secret: &Secret) -> Access {
        let version = secret.resource_version().unwrap_or_default();
        if let Some(cached) = self.clients.get(cluster_namespace)
            && cached.0 == version
        {
            return Access::Client(cached.1.clone());
        }
        match client_from(secret).await {
            Ok(client) => {
                self.clients
                    .insert(cluster_namespace.to_string(), (version, client.clone()));
                Access::Client(client)
            }
            Err(message) => Access::Invalid(message),
        }
    }
}

/// A binding changed in the app cluster of `cluster_namespace`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BindingChanged {
    pub cluster_namespace: String,
    /// The export whose binding changed.
    pub binding: String,
}

/// Watches the APIServiceBindings of every registered app cluster and
/// reports each change on `changes`, until dropped.
pub async fn watch_bindings(
    provider: kube::Client,
    changes: mpsc::UnboundedSender<BindingChanged>,
) {
    each_app_cluster(provider, move |client, namespace| {
        tokio::spawn(watch_one(client, namespace, changes.clone()))
    })
    .await
}

/// Runs `start(client, cluster_namespace)` for every registered app cluster,
/// until dropped: follows the `app-cluster` Secrets, so a new or changed
/// Secret (re)starts its cluster's task, and a deleted one stops it.
pub async fn each_app_cluster(
    provider: kube::Client,
    start: impl Fn(kube::Client, String) -> JoinHandle<()>,
) {
    let secrets: Api<Secret> = Api::all(provider);
    let config = watcher::Config::default().fields(&format!("metadata.name={SECRET_NAME}"));
    let mut watches = Watches::default();
    let mut events = watcher(secrets, config).default_backoff().boxed();
    while let Some(event) = events.next().await {
        match event {
            Ok(watcher::Event::Apply(secret) | watcher::Event::InitApply(secret)) => {
                let namespace = secret.namespace().unwrap_or_default();
                let version = secret.resource_version().unwrap_or_default();
                if watches.is_current(&namespace, &version) {
                    continue;
                }
                let task = match client_from(&secret).await {
                    Ok(client) => start(client, namespace.clone()),
                    Err(error) => {
                        tracing::warn!(%namespace, %error, "app cluster Secret unusable");
                        tokio::spawn(async {})
                    }
                };
                watches.replace(namespace, version, task);
            }
            Ok(watcher::Event::Delete(secret)) => {
                watches.remove(&secret.namespace().unwrap_or_default());
            }
            Ok(_) => {}
            Err(error) => tracing::warn!(%error, "watching app cluster Secrets failed; retrying"),
        }
    }
}

/// The running binding watches, aborted when replaced or dropped (so that
/// losing the leader Lease stops them with the controllers).
#[derive(Default)]
struct Watches {
    by_namespace: HashMap<String, (String, JoinHandle<()>)>,
}

impl Watches {
    fn is_current(&self, namespace: &str, version: &str) -> bool {
        self.by_namespace
            .get(namespace)
            .is_some_and(|(v, _)| v == version)
    }

    fn replace(&mut self, namespace: String, version: String, task: JoinHandle<()>) {
        if let Some((_, old)) = self.by_namespace.insert(namespace, (version, task)) {
            old.abort();
        }
    }

    fn remove(&mut self, namespace: &str) {
        if let Some((_, task)) = self.by_namespace.remove(namespace) {
            task.abort();
        }
    }
}

impl Drop for Watches {
    fn drop(&mut self) {
        for (_, task) in self.by_namespace.values() {
            task.abort();
        }
    }
}

async fn watch_one(
    app: kube::Client,
    cluster_namespace: String,
    changes: mpsc::UnboundedSender<BindingChanged>,
) {
    use crate::app_binding::{BINDING_LABEL, api_service_resource};
    use kube::api::DynamicObject;
    // Deletions count too: a binding that is gone disconnects its export.
    let bindings = watcher(
        Api::<APIServiceBinding>::all(app.clone()),
        watcher::Config::default(),
    )
    .default_backoff()
    .map(|event| {
        event.map(|e| {
            // bindery's binding names its export in a label
            // ([`crate::app_binding`]); kube-bind's is named as it.
            touched(e, |binding| {
                Some(
                    binding
                        .labels()
                        .get(BINDING_LABEL)
                        .cloned()
                        .unwrap_or_else(|| binding.name_any()),
                )
            })
        })
    });
    // The APIServices bind registered for a binding: the aggregator's
    // verdict on them is the binding's SchemaInSync, so a change of their
    // availability must reach the export at once, not at the next requeue.
    let api_services = watcher(
        Api::<DynamicObject>::all_with(app, &api_service_resource()),
        watcher::Config::default().labels(BINDING_LABEL),
    )
    .default_backoff()
    .map(|event| event.map(|e| touched(e, |service| service.labels().get(BINDING_LABEL).cloned())));
    let mut events = futures::stream::select(bindings.boxed(), api_services.boxed());
    while let Some(event) = events.next().await {
        let touched = match event {
            Ok(Some(name)) => name,
            Ok(None) => continue,
            Err(error) => {
                tracing::debug!(%error, %cluster_namespace, "watching an app cluster's bindings");
                continue;
            }
        };
        let changed = BindingChanged {
            cluster_namespace: cluster_namespace.clone(),
            binding: touched,
        };
        if changes.send(changed).is_err() {
            return;
        }
    }
}

/// The binding an event of one watched object concerns, named by `binding`.
fn touched<K>(event: watcher::Event<K>, binding: impl Fn(&K) -> Option<String>) -> Option<String> {
    match event {
        watcher::Event::Apply(o) | watcher::Event::Delete(o) | watcher::Event::InitApply(o) => {
            binding(&o)
        }
        _ => None,
    }
}
