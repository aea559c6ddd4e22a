//! Provider namespaces follow their app namespaces, as kube-bind's
//! konnector has them follow (its `namespacelifecycle`): each registered
//! app cluster's namespaces are watched (their metadata), and when one is
//! deleted (its content is gone by then: the app cluster's namespace
//! controller deleted the bound objects in it through bindery before the
//! namespace could go), the provider namespace bindery made for it goes
//! too, with its APIServiceNamespace record. Only a deletion seen is acted
//! on: a namespace that went while no replica led (or watched) keeps its
//! provider namespace, and so does a namespace a request pre-seeded that
//! the app cluster never had (no export's deletion removes one either; see
//! `provider_namespace`). An app
//! cluster whose binding gives bindery's account no `list`/`watch` on
//! namespaces (bound by an older bindery) keeps its provider namespaces.

use super::Context;
use super::app_clusters::each_app_cluster;
use futures::StreamExt;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, ObjectMeta};
use kube::core::PartialObjectMeta;
use kube::runtime::{WatchStreamExt, watcher};
use std::sync::Arc;

/// Runs until dropped.
pub async fn run(context: Arc<Context>) {
    let provider = context.client.clone();
    each_app_cluster(provider.clone(), move |app, cluster_namespace| {
        let consumer = context.consumer_of(&cluster_namespace).to_string();
        tokio::spawn(follow(app, provider.clone(), cluster_namespace, consumer))
    })
    .await
}

async fn follow(app: kube::Client, provider: kube::Client, cluster_ns: String, consumer: String) {
    let namespaces = Api::<PartialObjectMeta<Namespace>>::all(app);
    let mut events = watcher(namespaces, watcher::Config::default())
        .default_backoff()
        .boxed();
    while let Some(event) = events.next().await {
        let gone: Vec<String> = match event {
            Ok(watcher::Event::Delete(namespace)) => vec![name_of(&namespace.metadata)],
            Ok(_) => continue,
            Err(error) => {
                tracing::debug!(%error, %cluster_ns, "watching an app cluster's namespaces");
                continue;
            }
        };
        for namespace in gone {
            match crate::provider_namespace::remove(&provider, &cluster_ns, &consumer, &namespace)
                .await
            {
                Ok(true) => tracing::info!(%cluster_ns, %namespace,
                    "an app namespace is gone; its provider namespace is removed"),
                Ok(false) => {}
                Err(error) => tracing::warn!(%cluster_ns, %namespace, %error,
                    "removing the provider namespace of a deleted app namespace failed"),
            }
        }
    }
}

fn name_of(metadata: &ObjectMeta) -> String {
    metadata.name.clone().unwrap_or_default()
}
