//! Provider namespaces for consumer namespaces, made on first write: the
//! namespace `<cluster-namespace>-<X>` and the APIServiceNamespace `X` that
//! records it, as kube-bind's konnector and backend would make them.

use crate::api::keys::CONSUMER_NAMESPACE_ANNOTATION;
use crate::api::{APIServiceNamespace, APIServiceNamespaceSpec};
use crate::status::ApiError;
use crate::translate::BoundResource;
use crate::translate::identity::CONSUMER_LABEL;
use dashmap::DashSet;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;

pub struct NamespaceProvisioner {
    client: kube::Client,
    made: DashSet<String>,
}

impl NamespaceProvisioner {
    pub fn new(client: kube::Client) -> Self {
        Self {
            client,
            made: DashSet::new(),
        }
    }

    /// Makes sure consumer namespace `consumer_ns` has its provider namespace.
    pub async fn ensure(&self, bound: &BoundResource, consumer_ns: &str) -> Result<(), ApiError> {
        if bound.namespaces.is_recorded(consumer_ns) {
            return Ok(());
        }
        let provider_ns = bound.namespaces.to_provider(consumer_ns);
        if self.made.contains(&provider_ns) {
            return Ok(());
        }
        let namespace: Namespace = serde_json::from_value(json!({
            "metadata": {
                "name": provider_ns,
                "labels": {CONSUMER_LABEL: bound.consumer.as_str()},
                "annotations": {CONSUMER_NAMESPACE_ANNOTATION: consumer_ns},
            }
        }))
        .map_err(|e| ApiError::internal(e.to_string()))?;
        ignore_exists(
            Api::<Namespace>::all(self.client.clone())
                .create(&PostParams::default(), &namespace)
                .await,
        )?;

        let cluster_ns = bound.namespaces.cluster_namespace();
        let api: Api<APIServiceNamespace> = Api::namespaced(self.client.clone(), cluster_ns);
        let record = APIServiceNamespace::new(consumer_ns, APIServiceNamespaceSpec {});
        ignore_exists(api.create(&PostParams::default(), &record).await)?;
        let status = Patch::Merge(json!({"status": {"namespace": provider_ns}}));
        api.patch_status(consumer_ns, &PatchParams::default(), &status)
            .await
            .map_err(|e| ApiError::internal(format!("recording namespace {consumer_ns}: {e}")))?;
        self.made.insert(provider_ns);
        Ok(())
    }
}

fn ignore_exists<T>(result: Result<T, kube::Error>) -> Result<(), ApiError> {
    match result {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 409 => Ok(()),
        Err(error) => Err(ApiError::internal(format!(
            "making a provider namespace: {error}"
        ))),
    }
}
