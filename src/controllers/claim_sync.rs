//! Provider-owned claimed Secrets and ConfigMaps into the app cluster.
//! Workloads mount them, so they are the one thing bindery writes into an
//! app cluster. Provider-owned means: covered by a claim with bindery's
//! `owner: Provider`, or, for a claim without an owner (kube-bind's, whose
//! direction is each object's), not marked `kube-bind.io/owner: consumer`
//! (kube-bind pulls down what the provider marks as its own and what only
//! the provider has; what the app cluster has of its own is never
//! overwritten, below). The flow is one way: from the consumer's provider namespaces
//! into the same-named consumer namespaces. Only objects covered by a claim
//! that the consumer accepted in its APIServiceBinding are copied. A copy
//! follows its source. It is deleted when the source is deleted, when the
//! source stops matching, or when the claim is rejected. A consumer's own
//! object of the same name is never overwritten. Triggered by provider
//! Secrets (or, where bindery reads no Secrets cluster-wide, its namespace
//! records); ConfigMaps and the app cluster's decisions are picked up by a
//! short requeue.

use super::{Context, claim_copies, runner};
use crate::api::keys::OWNER_LABEL;
use crate::api::{APIServiceExport, APIServiceNamespace, ClaimOwner, PermissionClaim};
use crate::app_binding::{BINDING_LABEL, MANAGED_BY};
use crate::translate::claim_filter::{ClaimedObject, covers};
use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt;
use kube::api::{Api, ApiResource, DynamicObject, ListParams};
use kube::core::GroupVersionKind;
use kube::runtime::controller::Action;
use serde_json::Value;
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

const WHAT: &str = "copying claimed objects into an app cluster";
/// The field manager of the copies.
const FIELD_MANAGER: &str = "bindery-claims";
/// Marks a copy (beside the binding's labels), so that nothing else bind
/// made is ever taken for one.
pub const COPY_LABEL: &str = "bindery.dev/claimed";
/// How often an export's copies are checked without a Secret changing.
const RESYNC: Duration = Duration::from_secs(5);

/// The kinds that are copied: the core group's Secrets and ConfigMaps.
const COPIED: [(&str, &str); 2] = [("secrets", "Secret"), ("configmaps", "ConfigMap")];

/// The API resource of a copied kind: core `v1`, known without discovery.
fn core_resource(plural: &str, kind: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("", "v1", kind), plural)
}

/// Runs the controller until it is dropped. A change of a provider Secret
/// triggers its export where bindery may watch Secrets cluster-wide; where
/// it holds them namespace by namespace (`namespace_access`), a change of
/// the export's namespace records does, and the short requeue finds the
/// Secrets' changes.
pub async fn run(context: Arc<Context>) {
    if context.namespace_access.is_some() {
        runner::run(context, "claims", WHAT, same_cluster_namespace, reconcile).await;
    } else {
        runner::run(context, "claims", WHAT, in_consumer_namespace, reconcile).await;
    }
}

/// A namespace record of the export's consumer.
fn same_cluster_namespace(export: &APIServiceExport, record: &APIServiceNamespace) -> bool {
    export.namespace() == record.namespace()
}

/// A Secret in one of the export's consumer's provider namespaces.
fn in_consumer_namespace(export: &APIServiceExport, secret: &Secret) -> bool {
    let (Some(cluster), Some(namespace)) = (export.namespace(), secret.namespace()) else {
        return false;
    };
    namespace
        .strip_prefix(&cluster)
        .is_some_and(|rest| rest.starts_with('-'))
}

async fn reconcile(export: Arc<APIServiceExport>, context: Arc<Context>) -> kube::Result<Action> {
    let provider_claims: Vec<&PermissionClaim> = export
        .spec
        .permission_claims
        .iter()
        .filter(|c| {
            COPIED
                .iter()
                .any(|(plural, _)| is_provider_claim(c, plural))
        })
        .collect();
    if provider_claims.is_empty() || export.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let name = export.name_any();
    // Only what the provider claims and the consumer accepted, as offered.
    let Some(copies) = claim_copies::accepted(&context, &export, provider_claims).await? else {
        // No app cluster to write to (yet): nothing can be copied or removed.
        return Ok(Action::requeue(RESYNC));
    };
    // One kind's copies, or one namespace's, held up by an error hold up
    // none of the others.
    let mut failed = claim_copies::FirstError::default();
    for (plural, kind) in COPIED {
        // A kind the export never claimed has no copies, and bindery no
        // access to it in the app cluster.
        if !provider_claims_of(&export, plural) {
            continue;
        }
        let claims: Vec<&PermissionClaim> = copies
            .claims
            .iter()
            .copied()
            .filter(|c| c.resource == plural)
            .collect();
        let resource = core_resource(plural, kind);
        let mut wanted = Vec::new();
        // Consumer namespaces whose sources could not be listed: their
        // copies are left as they are, and the others still follow.
        let mut unlisted = BTreeSet::new();
        if !claims.is_empty() {
            let picked = copies.picks(&context, &export, &claims).await?;
            for record in &copies.records {
                let Some(provider_namespace) =
                    record.status.as_ref().and_then(|s| s.namespace.clone())
                else {
                    continue;
                };
                let consumer_namespace = record.name_any();
                let sources: Api<DynamicObject> =
                    Api::namespaced_with(context.client.clone(), &provider_namespace, &resource);
                let listed = match sources.list(&ListParams::default()).await {
                    Ok(listed) => listed,
                    Err(error) => {
                        failed.keep(error);
                        unlisted.insert(consumer_namespace);
                        continue;
                    }
                };
                for source in listed {
                    let object = serde_json::to_value(&source).unwrap_or_default();
                    let covered = claims.iter().zip(&picked).any(|(claim, picked)| {
                        pulled_down(claim, source.labels())
                            && covers(
                                claim,
                                &ClaimedObject {
                                    name: &source.name_any(),
                                    consumer_namespace: Some(&consumer_namespace),
                                    labels: source.labels(),
                                    side: ClaimOwner::Provider,
                                },
                                picked,
                            )
                    });
                    if covered
                        && claim_copies::copyable(&object)
                        && source.metadata.deletion_timestamp.is_none()
                    {
                        wanted.push(copy_of(&object, kind, &consumer_namespace, &name));
                    }
                }
            }
        }
        if let Err(error) = sync_copies(&copies.app, &resource, &name, &wanted, &unlisted).await {
            failed.keep(error);
        }
    }
    failed.into_result()?;
    Ok(Action::requeue(RESYNC))
}

/// A claim on the core group's `plural` that may cover objects the
/// provider owns: bindery's `owner: Provider`, or kube-bind's, without an
/// owner.
fn is_provider_claim(claim: &PermissionClaim, plural: &str) -> bool {
    claim.group.is_empty()
        && claim.resource == plural
        && claim.selector.owner != Some(ClaimOwner::Consumer)
}

/// Whether a provider object with `labels` goes down to the app cluster
/// under `claim`: always under bindery's `owner: Provider` (the claim's
/// selector checks the label), and under kube-bind's owner-less claim
/// unless kube-bind marked it the consumer's (a copy its konnector pushed
/// up, which the app cluster owns).
fn pulled_down(
    claim: &PermissionClaim,
    labels: &std::collections::BTreeMap<String, String>,
) -> bool {
    claim.selector.owner.is_some()
        || labels.get(OWNER_LABEL).map(String::as_str) != Some(ClaimOwner::Consumer.label_value())
}

fn provider_claims_of(export: &APIServiceExport, plural: &str) -> bool {
    export
        .spec
        .permission_claims
        .iter()
        .any(|c| is_provider_claim(c, plural))
}

/// Makes the app cluster's copies of `export` exactly `wanted`: applies each
/// (unless a same-named object there is not a copy) and deletes the rest,
/// but none in the `unlisted` namespaces (whose sources are not known).
async fn sync_copies(
    app: &kube::Client,
    resource: &ApiResource,
    export: &str,
    wanted: &[Value],
    unlisted: &BTreeSet<String>,
) -> kube::Result<()> {
    let existing = Api::<DynamicObject>::all_with(app.clone(), resource)
        .list(&ListParams::default().labels(&copy_selector(export)))
        .await?;
    let existing: Vec<DynamicObject> = existing
        .items
        .into_iter()
        .filter(|copy| !unlisted.contains(&copy.namespace().unwrap_or_default()))
        .collect();
    claim_copies::mirror(
        app,
        resource,
        &existing,
        wanted,
        overwritable,
        FIELD_MANAGER,
    )
    .await
}

/// Whether an app-cluster object of a copy's name may be overwritten by
/// the copy: bindery's own copy, or the one kube-bind's konnector left (it
/// marks what it copied down `kube-bind.io/owner: provider`), which an app
/// cluster moved from kube-bind keeps following its source. Anything else is
/// the consumer's own.
fn overwritable(labels: &std::collections::BTreeMap<String, String>) -> bool {
    labels.contains_key(COPY_LABEL)
        || labels.get(OWNER_LABEL).map(String::as_str) == Some(ClaimOwner::Provider.label_value())
}

/// The label selector of `export`'s copies.
pub fn copy_selector(export: &str) -> String {
    format!("{BINDING_LABEL}={export},{COPY_LABEL}")
}

/// The app cluster's copy of provider object `source` (a Secret or a
/// ConfigMap), in `consumer_namespace`: its content and its own labels and
/// annotations. bindery's reserved labels, the owner label and anything
/// naming the provider's namespace or identity are left out.
pub fn copy_of(source: &Value, kind: &str, consumer_namespace: &str, export: &str) -> Value {
    claim_copies::copy_of(
        source,
        kind,
        consumer_namespace,
        &[
            (MANAGED_BY.0, MANAGED_BY.1),
            (BINDING_LABEL, export),
            (COPY_LABEL, "true"),
        ],
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// kube-bind's claims have no owner: the provider's objects go down
    /// unless kube-bind marked them the consumer's; bindery's `owner`
    /// claims decide by their selector; consumer claims copy nothing.
    #[test]
    fn a_kube_bind_claim_pulls_down_what_the_consumer_does_not_own() {
        let claim = |owner: Option<ClaimOwner>| {
            let mut claim: PermissionClaim =
                serde_json::from_value(json!({"group": "", "resource": "secrets",
                    "selector": {"labelSelector": {"matchLabels": {"app": "x"}}}}))
                .unwrap();
            claim.selector.owner = owner;
            claim
        };
        let labels = |owner: Option<&str>| {
            let mut labels =
                std::collections::BTreeMap::from([("app".to_string(), "x".to_string())]);
            if let Some(owner) = owner {
                labels.insert(OWNER_LABEL.to_string(), owner.to_string());
            }
            labels
        };
        let kube_bind = claim(None);
        assert!(is_provider_claim(&kube_bind, "secrets"));
        assert!(pulled_down(&kube_bind, &labels(Some("provider"))));
        assert!(
            pulled_down(&kube_bind, &labels(None)),
            "only the provider has it"
        );
        assert!(!pulled_down(&kube_bind, &labels(Some("consumer"))));
        let provider = claim(Some(ClaimOwner::Provider));
        assert!(is_provider_claim(&provider, "secrets"));
        assert!(
            pulled_down(&provider, &labels(Some("consumer"))),
            "the selector decides"
        );
        assert!(!is_provider_claim(
            &claim(Some(ClaimOwner::Consumer)),
            "secrets"
        ));
        assert!(!is_provider_claim(&kube_bind, "configmaps"));
        // What the app cluster has of a copy's name.
        assert!(overwritable(
            &labels(None)
                .into_iter()
                .chain([(COPY_LABEL.to_string(), "true".to_string())])
                .collect()
        ));
        assert!(
            overwritable(&labels(Some("provider"))),
            "the konnector's copy"
        );
        assert!(!overwritable(&labels(Some("consumer"))));
        assert!(!overwritable(&labels(None)), "the consumer's own");
    }

    #[test]
    fn a_copy_carries_the_content_and_the_consumers_terms_only() {
        let source = json!({
            "apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": {
                "name": "orders-credentials", "namespace": "kube-bind-abc-default",
                "uid": "u", "resourceVersion": "7", "ownerReferences": [{"name": "x"}],
                "labels": {"app.kubernetes.io/part-of": "postgresql",
                    "bindery.dev/export": "0123", "kube-bind.io/owner": "Provider"},
                "annotations": {"note": "kept",
                    "kubectl.kubernetes.io/last-applied-configuration": "{}"},
            },
            "data": {"password": "c2VjcmV0"},
        });
        let copy = copy_of(&source, "Secret", "default", "postgresql");
        assert_eq!(
            copy,
            json!({
                "apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                "metadata": {
                    "name": "orders-credentials", "namespace": "default",
                    "labels": {"app.kubernetes.io/part-of": "postgresql",
                        "app.kubernetes.io/managed-by": "bindery",
                        "bindery.dev/binding": "postgresql", "bindery.dev/claimed": "true"},
                    "annotations": {"note": "kept"},
                },
                "data": {"password": "c2VjcmV0"},
            })
        );
        assert!(
            !copy.to_string().contains("kube-bind-abc"),
            "no provider namespace"
        );
    }

    #[test]
    fn a_config_map_keeps_its_binary_data_and_the_selector_names_copies_only() {
        let source = json!({"kind": "ConfigMap", "metadata": {"name": "c"},
            "data": {"a": "b"}, "binaryData": {"z": "AA=="}, "immutable": true});
        let copy = copy_of(&source, "ConfigMap", "team", "db");
        assert_eq!(copy["binaryData"], json!({"z": "AA=="}));
        assert_eq!(copy["immutable"], json!(true));
        assert_eq!(copy["metadata"]["annotations"], Value::Null);
        assert_eq!(
            copy_selector("db"),
            "bindery.dev/binding=db,bindery.dev/claimed"
        );
    }
}
