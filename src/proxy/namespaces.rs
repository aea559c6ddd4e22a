//! Provider namespaces for consumer namespaces, made on first write: the
//! namespace `<cluster-namespace>-<X>` and the APIServiceNamespace `X` that
//! records it, as kube-bind's konnector and backend would make them.

use crate::api::keys::CONSUMER_NAMESPACE_ANNOTATION;
use crate::api::{APIServiceNamespace, APIServiceNamespaceSpec};
use crate::status::ApiError;
use crate::translate::BoundResource;
use crate::translate::identity::CONSUMER_LABEL;
use dashmap::{DashMap, DashSet};
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;
use std::sync::Arc;

pub struct NamespaceProvisioner {
    client: kube::Client,
    made: DashSet<String>,
    /// One at a time per consumer (cluster namespace), so that its cap on
    /// provider namespaces holds against concurrent first writes.
    turns: DashMap<String, Arc<tokio::sync::Mutex<()>>>,
}

impl NamespaceProvisioner {
    pub fn new(client: kube::Client) -> Self {
        Self {
            client,
            made: DashSet::new(),
            turns: DashMap::new(),
        }
    }

    /// How many provider namespaces the consumer has: recorded, or made by
    /// this replica and not yet seen recorded.
    pub fn used(&self, bound: &BoundResource) -> u64 {
        let recorded: std::collections::BTreeSet<&str> = bound
            .namespaces
            .recorded()
            .map(|(provider, _)| provider)
            .collect();
        let prefix = format!("{}-", bound.namespaces.cluster_namespace());
        let pending = self
            .made
            .iter()
            .filter(|made| made.starts_with(&prefix) && !recorded.contains(made.as_str()))
            .count();
        (recorded.len() + pending) as u64
    }

    /// Whether consumer namespace `consumer_ns` has its provider namespace:
    /// recorded, or made by this replica and not yet seen recorded.
    pub fn exists(&self, bound: &BoundResource, consumer_ns: &str) -> bool {
        bound.namespaces.is_recorded(consumer_ns)
            || self
                .made
                .contains(&bound.namespaces.to_provider(consumer_ns))
    }

    /// Makes sure consumer namespace `consumer_ns` has its provider
    /// namespace; refused (as `cap` refuses) when the consumer has all the
    /// provider namespaces its export allows.
    pub async fn ensure(
        &self,
        bound: &BoundResource,
        consumer_ns: &str,
        cap: impl Fn(u64) -> Result<(), ApiError>,
    ) -> Result<(), ApiError> {
        if bound.namespaces.is_recorded(consumer_ns) {
            return Ok(());
        }
        let provider_ns = bound.namespaces.to_provider(consumer_ns);
        if self.made.contains(&provider_ns) {
            return Ok(());
        }
        let turn = self
            .turns
            .entry(bound.namespaces.cluster_namespace().to_string())
            .or_default()
            .clone();
        let _turn = turn.lock().await;
        if self.made.contains(&provider_ns) {
            return Ok(());
        }
        cap(self.used(bound))?;
        make_provider_namespace(
            &self.client,
            bound.namespaces.cluster_namespace(),
            bound.consumer.as_str(),
            consumer_ns,
        )
        .await
        .map_err(|error| {
            // The provider's words name its objects: logged, not answered.
            tracing::warn!(consumer = %bound.consumer, namespace = consumer_ns, %error,
                "making a provider namespace failed");
            ApiError::internal(format!(
                "the namespace {consumer_ns:?} could not be made ready for {}",
                bound.qualified_resource()
            ))
        })?;
        self.made.insert(provider_ns);
        Ok(())
    }
}

/// Makes consumer namespace `consumer_ns`'s provider namespace
/// `<cluster_ns>-<consumer_ns>` and records it in an APIServiceNamespace
/// (used for first writes and for the namespaces a request pre-seeds).
pub async fn make_provider_namespace(
    client: &kube::Client,
    cluster_ns: &str,
    consumer: &str,
    consumer_ns: &str,
) -> Result<(), kube::Error> {
    let provider_ns = crate::translate::NamespaceMap::new(cluster_ns).to_provider(consumer_ns);
    let namespace: Namespace = serde_json::from_value(json!({
        "metadata": {
            "name": provider_ns,
            "labels": {CONSUMER_LABEL: consumer},
            "annotations": {CONSUMER_NAMESPACE_ANNOTATION: consumer_ns},
        }
    }))
    .map_err(kube::Error::SerdeError)?;
    ignore_exists(
        Api::<Namespace>::all(client.clone())
            .create(&PostParams::default(), &namespace)
            .await,
    )?;
    let api: Api<APIServiceNamespace> = Api::namespaced(client.clone(), cluster_ns);
    let record = APIServiceNamespace::new(consumer_ns, APIServiceNamespaceSpec {});
    ignore_exists(api.create(&PostParams::default(), &record).await)?;
    let status = Patch::Merge(json!({"status": {"namespace": provider_ns}}));
    api.patch_status(consumer_ns, &PatchParams::default(), &status)
        .await?;
    Ok(())
}

fn ignore_exists<T>(result: Result<T, kube::Error>) -> Result<(), kube::Error> {
    match result {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 409 => Ok(()),
        Err(error) => Err(error),
    }
}
