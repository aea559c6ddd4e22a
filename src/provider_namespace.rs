//! A consumer's provider namespace, made as kube-bind's backend makes it:
//! the namespace `<cluster-namespace>-<X>` (or the fitted name of
//! `translate::namespaces`) for consumer namespace X, labelled with its
//! consumer, the APIServiceNamespace `X` that records it, and the
//! RoleBinding of each export's ClusterRole to the consumer's account in it.
//! Made on a consumer's first write (`proxy::namespaces`) and for the
//! namespaces a request pre-seeds (`controllers::request`); the RoleBinding
//! is the one the export controller keeps (`controllers::rbac`), made here
//! too so that the consumer's first request in the namespace finds it.
//! Removed with what owns it, its app namespace (`controllers::
//! app_namespaces`); an export is not its owner (the consumer's exports
//! share it, and the provider may keep objects of its own there), so
//! deleting one leaves it.

use crate::api::keys::CONSUMER_NAMESPACE_ANNOTATION;
use crate::api::{APIServiceNamespace, APIServiceNamespaceSpec};
use crate::translate::identity::{CONSUMER_LABEL, CONSUMER_SERVICE_ACCOUNT};
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::api::rbac::v1::RoleBinding;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

/// The field manager of the RBAC bindery applies (the controllers' own).
pub const FIELD_MANAGER: &str = "bindery-controllers";

/// Label on every RBAC object made for an export: `<cluster-ns>.<export>`,
/// so that they can be found and removed with it.
pub const EXPORT_RBAC_LABEL: &str = "bindery.dev/rbac-for";

/// The ClusterRole of an export's rules.
pub fn export_cluster_role(cluster_namespace: &str, export: &str) -> String {
    format!("bindery:export:{cluster_namespace}:{export}")
}

/// The name of an export's RoleBinding in each provider namespace.
pub fn role_binding_name(export: &str) -> String {
    format!("bindery:export:{export}")
}

/// The RoleBinding of `export`'s ClusterRole to the consumer's account of
/// `cluster_namespace`, for one of its provider namespaces.
pub fn role_binding(cluster_namespace: &str, export: &str) -> Value {
    json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {
            "name": role_binding_name(export),
            "labels": {EXPORT_RBAC_LABEL: format!("{cluster_namespace}.{export}")},
        },
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
            "name": export_cluster_role(cluster_namespace, export),
        },
        "subjects": [{
            "kind": "ServiceAccount",
            "name": CONSUMER_SERVICE_ACCOUNT,
            "namespace": cluster_namespace,
        }],
    })
}

/// Makes consumer namespace `consumer_ns`'s provider namespace and records
/// it in an APIServiceNamespace; with `export`, binds that export's
/// ClusterRole in it too. Each step is idempotent.
pub async fn make(
    client: &kube::Client,
    cluster_ns: &str,
    consumer: &str,
    consumer_ns: &str,
    export: Option<&str>,
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
    if let Some(export) = export {
        Api::<RoleBinding>::namespaced(client.clone(), &provider_ns)
            .patch(
                &role_binding_name(export),
                &PatchParams::apply(FIELD_MANAGER).force(),
                &Patch::Apply(role_binding(cluster_ns, export)),
            )
            .await?;
    }
    let api: Api<APIServiceNamespace> = Api::namespaced(client.clone(), cluster_ns);
    let record = APIServiceNamespace::new(consumer_ns, APIServiceNamespaceSpec {});
    ignore_exists(api.create(&PostParams::default(), &record).await)?;
    let status = Patch::Merge(json!({"status": {"namespace": provider_ns}}));
    api.patch_status(consumer_ns, &PatchParams::default(), &status)
        .await?;
    Ok(())
}

/// Removes consumer namespace `consumer_ns`'s provider namespace and its
/// record, once what owned them is gone (the app namespace; an export
/// does not own it): only a namespace bindery made for this
/// consumer and this consumer namespace (labelled and annotated so); one
/// kube-bind's backend made, or anything else of that name, stays, with
/// its record. Whether something was removed.
pub async fn remove(
    client: &kube::Client,
    cluster_ns: &str,
    consumer: &str,
    consumer_ns: &str,
) -> Result<bool, kube::Error> {
    let records: Api<APIServiceNamespace> = Api::namespaced(client.clone(), cluster_ns);
    let Some(record) = records.get_opt(consumer_ns).await? else {
        return Ok(false);
    };
    let provider_ns = record
        .status
        .as_ref()
        .and_then(|s| s.namespace.clone())
        .unwrap_or_else(|| {
            crate::translate::NamespaceMap::new(cluster_ns).to_provider(consumer_ns)
        });
    let namespaces = Api::<Namespace>::all(client.clone());
    if let Some(namespace) = namespaces.get_opt(&provider_ns).await? {
        let labels = namespace.metadata.labels.unwrap_or_default();
        let annotations = namespace.metadata.annotations.unwrap_or_default();
        let ours = labels.get(CONSUMER_LABEL).map(String::as_str) == Some(consumer)
            && annotations
                .get(CONSUMER_NAMESPACE_ANNOTATION)
                .map(String::as_str)
                == Some(consumer_ns);
        if !ours {
            return Ok(false);
        }
        ignore_gone(namespaces.delete(&provider_ns, &Default::default()).await)?;
    }
    ignore_gone(records.delete(consumer_ns, &Default::default()).await)?;
    Ok(true)
}

fn ignore_gone<T>(result: Result<T, kube::Error>) -> Result<(), kube::Error> {
    match result {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
        Err(error) => Err(error),
    }
}

fn ignore_exists<T>(result: Result<T, kube::Error>) -> Result<(), kube::Error> {
    match result {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 409 => Ok(()),
        Err(error) => Err(error),
    }
}
