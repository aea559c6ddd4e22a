//! What happens when an export or its binding goes away: the deletion
//! policy (annotation `bindery.dev/deletion-policy` on the export, set from
//! the request or its template):
//!
//! - `Retain` (the default): the consumer's objects stay in the provider,
//!   and so does the export's identity Secret (its owner reference is
//!   dropped), so that requesting the same export again serves them again;
//! - `Delete`: the consumer's objects of every exported resource are
//!   deleted, found by both identity labels (this export and this
//!   consumer), so nothing of another consumer or export is touched; and so
//!   are the claimed objects (the database's credentials Secret) in the
//!   consumer's own provider namespaces that the export's claims cover.
//!
//! Either way the export's RBAC is revoked, and the export's finalizer is
//! removed once that is done. A deleted binding (the app cluster unbound)
//! applies the same policy to the objects; the export itself stays.

use super::{Context, naming, rbac::EXPORT_RBAC_LABEL};
use crate::api::{APIServiceExport, APIServiceNamespace, ClaimOwner};
use crate::claim_referrers::{Referrers, namespace_map};
use crate::translate::IdentityHash;
use crate::translate::claim_filter::{ClaimedObject, covers};
use crate::translate::identity::{CONSUMER_LABEL, EXPORT_LABEL};
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::ResourceExt;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams};
use serde_json::json;
use std::collections::BTreeMap;

/// The finalizer every export carries until its cleanup is done.
pub const FINALIZER: &str = "bindery.dev/cleanup";
/// The annotation naming the policy, on exports, requests and templates.
pub const POLICY_ANNOTATION: &str = "bindery.dev/deletion-policy";

/// What becomes of a consumer's objects when its export or binding goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeletionPolicy {
    Retain,
    Delete,
}

impl DeletionPolicy {
    /// The policy the annotations name; anything but `Delete` retains.
    pub fn of(annotations: &BTreeMap<String, String>) -> Self {
        match annotations.get(POLICY_ANNOTATION).map(String::as_str) {
            Some("Delete") => Self::Delete,
            _ => Self::Retain,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Retain => "Retain",
            Self::Delete => "Delete",
        }
    }
}

/// `finalizers` with `ours` added, if it is missing. Pure.
pub fn adding(finalizers: &[String], ours: &str) -> Option<Vec<String>> {
    (!finalizers.iter().any(|f| f == ours)).then(|| {
        let mut all = finalizers.to_vec();
        all.push(ours.to_string());
        all
    })
}

/// `finalizers` without `ours`, if it is there. Pure.
pub fn removing(finalizers: &[String], ours: &str) -> Option<Vec<String>> {
    finalizers
        .iter()
        .any(|f| f == ours)
        .then(|| finalizers.iter().filter(|f| *f != ours).cloned().collect())
}

/// Puts the finalizer on a live export.
pub async fn ensure_finalizer(
    client: &kube::Client,
    export: &APIServiceExport,
) -> kube::Result<()> {
    match adding(export.finalizers(), FINALIZER) {
        None => Ok(()),
        Some(finalizers) => set_finalizers(client, export, finalizers).await,
    }
}

/// Cleans up after a deleted export; `true` once done and the finalizer is
/// gone, `false` while the consumer's objects are still being deleted.
pub async fn finalize(context: &Context, export: &APIServiceExport) -> kube::Result<bool> {
    let Some(finalizers) = removing(export.finalizers(), FINALIZER) else {
        return Ok(true);
    };
    let client = &context.client;
    match DeletionPolicy::of(export.annotations()) {
        DeletionPolicy::Delete => {
            if delete_consumer_objects(context, export).await? > 0 {
                return Ok(false);
            }
        }
        DeletionPolicy::Retain => keep_identity_secret(client, export).await?,
    }
    revoke_rbac(client, export).await?;
    set_finalizers(client, export, finalizers).await?;
    tracing::info!(export = %export.name_any(), namespace = ?export.namespace(),
        policy = DeletionPolicy::of(export.annotations()).as_str(), "export cleaned up");
    Ok(true)
}

async fn set_finalizers(
    client: &kube::Client,
    export: &APIServiceExport,
    finalizers: Vec<String>,
) -> kube::Result<()> {
    Api::<APIServiceExport>::namespaced(client.clone(), &export.namespace().unwrap_or_default())
        .patch(
            &export.name_any(),
            &PatchParams::default(),
            // Optimistic: other finalizers on the list are kept as they are.
            &Patch::Merge(json!({
                "metadata": {"resourceVersion": export.resource_version(), "finalizers": finalizers},
            })),
        )
        .await?;
    Ok(())
}

/// Deletes this consumer's objects of `export` and the claimed objects in
/// its provider namespaces. Returns how many are still there (being
/// deleted, or just asked to be).
pub async fn delete_consumer_objects(
    context: &Context,
    export: &APIServiceExport,
) -> kube::Result<usize> {
    Ok(delete_objects(context, export).await? + delete_claimed(context, export).await?)
}

/// Deletes this consumer's objects of every resource of `export`: those
/// labelled with both this export's identity and this consumer.
async fn delete_objects(context: &Context, export: &APIServiceExport) -> kube::Result<usize> {
    let Some(hash) = export
        .status
        .as_ref()
        .and_then(|s| s.identity_hash.as_deref())
        .and_then(IdentityHash::parse)
    else {
        // Without an identity nothing was ever made through the export.
        return Ok(0);
    };
    let namespace = export.namespace().unwrap_or_default();
    let consumer = context.consumer_of(&namespace);
    let selector = format!(
        "{EXPORT_LABEL}={},{CONSUMER_LABEL}={consumer}",
        hash.label_value()
    );
    let crds: Api<CustomResourceDefinition> = Api::all(context.client.clone());
    let mut remaining = 0;
    for exported in &export.spec.resources {
        let Some(crd) = crds.get_opt(&exported.group_resource().to_string()).await? else {
            continue; // No CRD, no objects.
        };
        let Some(version) = crd.spec.versions.iter().find(|v| v.storage) else {
            continue;
        };
        let resource = ApiResource {
            group: crd.spec.group.clone(),
            version: version.name.clone(),
            api_version: format!("{}/{}", crd.spec.group, version.name),
            kind: crd.spec.names.kind.clone(),
            plural: crd.spec.names.plural.clone(),
        };
        let all: Api<DynamicObject> = Api::all_with(context.client.clone(), &resource);
        let objects = all.list(&ListParams::default().labels(&selector)).await?;
        for object in &objects.items {
            remaining += 1;
            if object.metadata.deletion_timestamp.is_some() {
                continue;
            }
            let api: Api<DynamicObject> = match object.namespace() {
                Some(ns) => Api::namespaced_with(context.client.clone(), &ns, &resource),
                None => all.clone(),
            };
            if gone(
                api.delete(&object.name_any(), &DeleteParams::default())
                    .await,
            )? {
                remaining -= 1;
            }
        }
    }
    Ok(remaining)
}

/// Deletes the objects the export's claims cover in the consumer's own
/// provider namespaces (namespaced claimed resources only: a cluster-scoped
/// claimed object is not the consumer's alone).
async fn delete_claimed(context: &Context, export: &APIServiceExport) -> kube::Result<usize> {
    if export.spec.permission_claims.is_empty() {
        return Ok(0);
    }
    let client = &context.client;
    let records = Api::<APIServiceNamespace>::namespaced(
        client.clone(),
        &export.namespace().unwrap_or_default(),
    )
    .list(&ListParams::default())
    .await?;
    let cluster_namespace = export.namespace().unwrap_or_default();
    let namespaces = namespace_map(&cluster_namespace, &records.items);
    let referrers = Referrers {
        provider: client,
        export,
        consumer: context.consumer_of(&cluster_namespace),
        namespaces: &namespaces,
    };
    let mut remaining = 0;
    for claim in &export.spec.permission_claims {
        let Some(resource) = namespaced_resource(client, &claim.group, &claim.resource).await?
        else {
            continue;
        };
        let picked = referrers.picks(claim).await?;
        for record in &records {
            let Some(provider) = record.status.as_ref().and_then(|s| s.namespace.clone()) else {
                continue;
            };
            let consumer_namespace = record.name_any();
            let api: Api<DynamicObject> =
                Api::namespaced_with(client.clone(), &provider, &resource);
            for object in api.list(&ListParams::default()).await? {
                let name = object.name_any();
                let covered = covers(
                    claim,
                    &ClaimedObject {
                        name: &name,
                        consumer_namespace: Some(&consumer_namespace),
                        labels: object.labels(),
                        side: ClaimOwner::Provider,
                    },
                    &picked,
                );
                if !covered {
                    continue;
                }
                remaining += 1;
                if object.metadata.deletion_timestamp.is_none()
                    && gone(api.delete(&name, &DeleteParams::default()).await)?
                {
                    remaining -= 1;
                }
            }
        }
    }
    Ok(remaining)
}

/// The namespaced resource `group`/`plural` as the provider serves it.
async fn namespaced_resource(
    client: &kube::Client,
    group: &str,
    plural: &str,
) -> kube::Result<Option<ApiResource>> {
    let found = match kube::discovery::oneshot::group(client, group).await {
        Ok(found) => found,
        Err(kube::Error::Discovery(_)) => return Ok(None),
        Err(error) => return Err(error),
    };
    Ok(found
        .recommended_resources()
        .into_iter()
        .find(|(resource, capabilities)| {
            resource.plural == plural && capabilities.scope == kube::discovery::Scope::Namespaced
        })
        .map(|(resource, _)| resource))
}

/// Whether a delete found the object already gone; other errors are errors.
fn gone<T>(result: kube::Result<T>) -> kube::Result<bool> {
    match result {
        Ok(_) => Ok(false),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(true),
        Err(error) => Err(error),
    }
}

/// Drops the identity Secret's owner reference, so that it outlives the
/// export and a new export of the same name takes the same identity.
async fn keep_identity_secret(
    client: &kube::Client,
    export: &APIServiceExport,
) -> kube::Result<()> {
    let secrets: Api<Secret> =
        Api::namespaced(client.clone(), &export.namespace().unwrap_or_default());
    let name = naming::identity_secret(&export.name_any());
    if secrets.get_opt(&name).await?.is_some() {
        secrets
            .patch(
                &name,
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"ownerReferences": null}})),
            )
            .await?;
    }
    Ok(())
}

/// Removes the ClusterRoles, Roles and every binding made for `export`.
async fn revoke_rbac(client: &kube::Client, export: &APIServiceExport) -> kube::Result<()> {
    let namespace = export.namespace().unwrap_or_default();
    let label = format!("{EXPORT_RBAC_LABEL}={namespace}.{}", export.name_any());
    let by_label = ListParams::default().labels(&label);
    let role_bindings: Api<RoleBinding> = Api::all(client.clone());
    for binding in role_bindings.list(&by_label).await? {
        let api: Api<RoleBinding> =
            Api::namespaced(client.clone(), &binding.namespace().unwrap_or_default());
        ignore_gone(
            api.delete(&binding.name_any(), &DeleteParams::default())
                .await,
        )?;
    }
    for role in Api::<Role>::all(client.clone()).list(&by_label).await? {
        let api: Api<Role> = Api::namespaced(client.clone(), &role.namespace().unwrap_or_default());
        ignore_gone(api.delete(&role.name_any(), &DeleteParams::default()).await)?;
    }
    let cluster_role_bindings: Api<ClusterRoleBinding> = Api::all(client.clone());
    for binding in cluster_role_bindings.list(&by_label).await? {
        ignore_gone(
            cluster_role_bindings
                .delete(&binding.name_any(), &DeleteParams::default())
                .await,
        )?;
    }
    let roles: Api<ClusterRole> = Api::all(client.clone());
    for role in roles.list(&by_label).await? {
        ignore_gone(
            roles
                .delete(&role.name_any(), &DeleteParams::default())
                .await,
        )?;
    }
    Ok(())
}

fn ignore_gone<T>(result: kube::Result<T>) -> kube::Result<()> {
    gone(result).map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policy_defaults_to_retain() {
        let with =
            |value: &str| BTreeMap::from([(POLICY_ANNOTATION.to_string(), value.to_string())]);
        assert_eq!(DeletionPolicy::of(&BTreeMap::new()), DeletionPolicy::Retain);
        assert_eq!(DeletionPolicy::of(&with("Delete")), DeletionPolicy::Delete);
        assert_eq!(DeletionPolicy::of(&with("delete")), DeletionPolicy::Retain);
        assert_eq!(DeletionPolicy::of(&with("Retain")), DeletionPolicy::Retain);
    }

    #[test]
    fn finalizer_lists_keep_the_others() {
        let others = vec!["a".to_string(), "b".to_string()];
        let added = adding(&others, FINALIZER).unwrap();
        assert_eq!(added, ["a", "b", FINALIZER]);
        assert_eq!(adding(&added, FINALIZER), None);
        assert_eq!(removing(&added, FINALIZER).unwrap(), others);
        assert_eq!(removing(&others, FINALIZER), None);
    }
}
