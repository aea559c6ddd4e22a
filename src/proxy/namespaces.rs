//! Provider namespaces for consumer namespaces, made on a consumer's first
//! write there (`crate::provider_namespace`), under the export's cap.

use crate::status::ApiError;
use crate::translate::BoundResource;
use dashmap::{DashMap, DashSet};
use std::sync::Arc;

/// How often a provider namespace being deleted is looked at again.
const REMAKE_POLL: std::time::Duration = std::time::Duration::from_millis(500);

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
        (bound.namespaces.recorded().count() + self.pending(bound).len()) as u64
    }

    /// Every provider namespace the consumer has: recorded, or made by this
    /// replica and not yet seen recorded.
    pub fn all(&self, bound: &BoundResource) -> Vec<String> {
        let mut all: Vec<String> = bound
            .namespaces
            .recorded()
            .map(|(provider, _)| provider.to_string())
            .collect();
        all.extend(self.pending(bound));
        all
    }

    /// The provider namespaces this replica made for the consumer and has
    /// not yet seen recorded.
    fn pending(&self, bound: &BoundResource) -> Vec<String> {
        let recorded: std::collections::BTreeSet<&str> = bound
            .namespaces
            .recorded()
            .map(|(provider, _)| provider)
            .collect();
        let prefix = format!("{}-", bound.namespaces.cluster_namespace());
        self.made
            .iter()
            .filter(|made| made.starts_with(&prefix) && !recorded.contains(made.as_str()))
            .map(|made| made.key().clone())
            .collect()
    }

    /// Whether consumer namespace `consumer_ns` has its provider namespace:
    /// recorded, or made by this replica and not yet seen recorded. What
    /// this replica made is remembered only until its record is seen, so
    /// that a namespace removed with its record later is made again.
    pub fn exists(&self, bound: &BoundResource, consumer_ns: &str) -> bool {
        let provider_ns = bound.namespaces.to_provider(consumer_ns);
        if bound.namespaces.is_recorded(consumer_ns) {
            self.made.remove(&provider_ns);
            return true;
        }
        self.made.contains(&provider_ns)
    }

    /// Makes consumer namespace `consumer_ns`'s provider namespace again,
    /// once the provider said it is not there (or is going): waits for one
    /// being deleted to be gone, until `deadline`. Whether it was made.
    pub async fn remake(
        &self,
        bound: &BoundResource,
        consumer_ns: &str,
        deadline: tokio::time::Instant,
    ) -> bool {
        use k8s_openapi::api::core::v1::Namespace;
        let provider_ns = bound.namespaces.to_provider(consumer_ns);
        self.made.remove(&provider_ns);
        let namespaces = kube::Api::<Namespace>::all(self.client.clone());
        loop {
            let terminating = match namespaces.get_opt(&provider_ns).await {
                Ok(Some(namespace)) => namespace.metadata.deletion_timestamp.is_some(),
                Ok(None) => false,
                Err(_) => return false,
            };
            if !terminating {
                break;
            }
            if tokio::time::Instant::now() + REMAKE_POLL >= deadline {
                return false;
            }
            tokio::time::sleep(REMAKE_POLL).await;
        }
        let made = crate::provider_namespace::make(
            &self.client,
            bound.namespaces.cluster_namespace(),
            bound.consumer.as_str(),
            consumer_ns,
            Some(&bound.export),
        )
        .await;
        if made.is_ok() {
            self.made.insert(provider_ns);
        }
        made.is_ok()
    }

    /// The uid of the consumer's cluster namespace, read afresh (a cluster
    /// namespace made again has another); `None` when there is none.
    pub async fn cluster_namespace_uid(
        &self,
        bound: &BoundResource,
    ) -> Result<Option<String>, ApiError> {
        use k8s_openapi::api::core::v1::Namespace;
        let namespaces = kube::Api::<Namespace>::all(self.client.clone());
        match namespaces
            .get_opt(bound.namespaces.cluster_namespace())
            .await
        {
            Ok(found) => Ok(found.and_then(|namespace| namespace.metadata.uid)),
            Err(error) => {
                // The provider's words name its objects: logged, not answered.
                tracing::warn!(consumer = %bound.consumer, %error,
                    "reading the cluster namespace failed");
                Err(ApiError::internal(format!(
                    "the owner of a new {} could not be read",
                    bound.qualified_resource()
                )))
            }
        }
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
        if self.exists(bound, consumer_ns) {
            return Ok(());
        }
        let provider_ns = bound.namespaces.to_provider(consumer_ns);
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
        crate::provider_namespace::make(
            &self.client,
            bound.namespaces.cluster_namespace(),
            bound.consumer.as_str(),
            consumer_ns,
            Some(&bound.export),
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
