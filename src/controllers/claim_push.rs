//! Consumer-owned claimed Secrets and ConfigMaps copied up into the
//! consumer's provider namespaces, as kube-bind's konnector copies them, for
//! an export that asks for it (`bindery.dev/claimed-objects: Copied`, from
//! its template, or set by `bindery migrate` on an export it takes over from
//! kube-bind). A provider controller written for kube-bind reads the
//! consumer's Secret (a database password the app team made) in the
//! provider namespace, where it always found it. Other exports serve such
//! objects through the workspace instead, from the app cluster, copying
//! nothing. A copy carries `kube-bind.io/owner: consumer` (so it is never
//! copied back down), kube-bind's marks of the cluster and consumer
//! namespace, and follows its source: it changes with it and goes when the
//! source goes, stops matching, or the claim is rejected. A provider object
//! of the same name is overwritten only when it is a copy (bindery's, or
//! the one the konnector left). Triggered by the export and its namespace
//! records; the app cluster's objects are picked up by a short requeue.

use super::{Context, claim_copies, runner};
use crate::api::keys::OWNER_LABEL;
use crate::api::{APIServiceExport, APIServiceNamespace, ClaimOwner, PermissionClaim};
use crate::translate::claim_filter::{ClaimedObject, covers};
use crate::translate::identity::CONSUMER_LABEL;
use crate::translate::kube_bind_marks;
use kube::ResourceExt;
use kube::api::{Api, ApiResource, DynamicObject, ListParams};
use kube::core::GroupVersionKind;
use kube::runtime::controller::Action;
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

const WHAT: &str = "copying consumer-owned claimed objects to the provider";
const FIELD_MANAGER: &str = "bindery-claims-up";
/// The export annotation choosing kube-bind's way with consumer-owned
/// claimed objects.
pub const CLAIMED_OBJECTS_ANNOTATION: &str = "bindery.dev/claimed-objects";
/// Its value for copies into the provider namespaces.
pub const COPIED: &str = "Copied";
/// Marks bindery's copies on the provider (with the consumer's label).
const PUSHED_LABEL: &str = "bindery.dev/pushed";
/// The export a copy was made for.
const PUSHED_FOR_ANNOTATION: &str = "bindery.dev/pushed-for";
const RESYNC: Duration = Duration::from_secs(5);
const KINDS: [(&str, &str); 2] = [("secrets", "Secret"), ("configmaps", "ConfigMap")];

/// Runs the controller until it is dropped.
pub async fn run(context: Arc<Context>) {
    runner::run(context, "claims-up", WHAT, same_namespace, reconcile).await;
}

fn same_namespace(export: &APIServiceExport, record: &APIServiceNamespace) -> bool {
    export.namespace() == record.namespace()
}

/// Whether `export` asks for kube-bind's copies. Pure.
pub fn copies_up(export: &APIServiceExport) -> bool {
    export
        .annotations()
        .get(CLAIMED_OBJECTS_ANNOTATION)
        .is_some_and(|v| v == COPIED)
}

/// A claim on the core group's `plural` that may cover objects the consumer
/// owns: bindery's `owner: Consumer`, or kube-bind's, without an owner.
/// Pure.
fn is_consumer_claim(claim: &PermissionClaim, plural: &str) -> bool {
    claim.group.is_empty()
        && claim.resource == plural
        && claim.selector.owner != Some(ClaimOwner::Provider)
}

/// Whether an app object with `labels` goes up under `claim`: under
/// kube-bind's owner-less claim unless it is marked the provider's (a copy
/// pulled down), always under `owner: Consumer` (its selector decides).
/// Pure.
fn pushed_up(claim: &PermissionClaim, labels: &BTreeMap<String, String>) -> bool {
    let copied_down = labels.contains_key(super::claim_sync::COPY_LABEL);
    !copied_down
        && (claim.selector.owner.is_some()
            || labels.get(OWNER_LABEL).map(String::as_str)
                != Some(ClaimOwner::Provider.label_value()))
}

async fn reconcile(export: Arc<APIServiceExport>, context: Arc<Context>) -> kube::Result<Action> {
    if !copies_up(&export) || export.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let claims: Vec<&PermissionClaim> = export
        .spec
        .permission_claims
        .iter()
        .filter(|c| KINDS.iter().any(|(plural, _)| is_consumer_claim(c, plural)))
        .collect();
    if claims.is_empty() {
        return Ok(Action::await_change());
    }
    let cluster_namespace = export.namespace().unwrap_or_default();
    let name = export.name_any();
    let Some(copies) = claim_copies::accepted(&context, &export, claims).await? else {
        return Ok(Action::requeue(RESYNC));
    };
    let consumer = context.consumer_of(&cluster_namespace);
    // One kind's copies, or one namespace's, held up by an error hold up
    // none of the others.
    let mut failed = claim_copies::FirstError::default();
    for (plural, kind) in KINDS {
        let claims: Vec<&PermissionClaim> = copies
            .claims
            .iter()
            .copied()
            .filter(|c| c.resource == plural)
            .collect();
        let resource =
            ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("", "v1", kind), plural);
        let mut wanted = Vec::new();
        // Provider namespaces whose sources could not be listed: their
        // copies are left as they are.
        let mut unlisted = Vec::new();
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
                    Api::namespaced_with(copies.app.clone(), &consumer_namespace, &resource);
                let listed = match sources.list(&ListParams::default()).await {
                    Ok(list) => list.items,
                    // A namespace the app cluster no longer has.
                    Err(kube::Error::Api(s)) if s.code == 404 => Vec::new(),
                    Err(error) => {
                        failed.keep(error);
                        unlisted.push(provider_namespace);
                        continue;
                    }
                };
                for source in listed {
                    let covered = claims.iter().zip(&picked).any(|(claim, picked)| {
                        pushed_up(claim, source.labels())
                            && covers(
                                claim,
                                &ClaimedObject {
                                    name: &source.name_any(),
                                    consumer_namespace: Some(&consumer_namespace),
                                    labels: source.labels(),
                                    side: ClaimOwner::Consumer,
                                },
                                picked,
                            )
                    });
                    if covered && source.metadata.deletion_timestamp.is_none() {
                        let object = serde_json::to_value(&source).unwrap_or_default();
                        if !claim_copies::copyable(&object) {
                            continue;
                        }
                        wanted.push(copy_up(
                            &object,
                            kind,
                            &cluster_namespace,
                            &consumer_namespace,
                            &provider_namespace,
                            consumer,
                            &name,
                        ));
                    }
                }
            }
        }
        let namespaces: Vec<String> = copies
            .records
            .iter()
            .filter_map(|record| record.status.as_ref().and_then(|s| s.namespace.clone()))
            .filter(|namespace| !unlisted.contains(namespace))
            .collect();
        let synced = sync(
            &context.client,
            &resource,
            &namespaces,
            consumer,
            &name,
            &wanted,
        )
        .await;
        if let Err(error) = synced {
            failed.keep(error);
        }
    }
    failed.into_result()?;
    Ok(Action::requeue(RESYNC))
}

/// Makes the provider's copies of `export`'s consumer objects exactly
/// `wanted`, looking for them in the consumer's provider `namespaces` (bindery
/// reads no Secrets cluster-wide). A namespace whose copies cannot be
/// listed holds up none of the others; none of its copies is deleted.
async fn sync(
    provider: &kube::Client,
    resource: &ApiResource,
    namespaces: &[String],
    consumer: &str,
    export: &str,
    wanted: &[Value],
) -> kube::Result<()> {
    let pushed =
        ListParams::default().labels(&format!("{PUSHED_LABEL},{CONSUMER_LABEL}={consumer}"));
    let mut existing: Vec<DynamicObject> = Vec::new();
    let mut failed = claim_copies::FirstError::default();
    for namespace in namespaces {
        let api = Api::<DynamicObject>::namespaced_with(provider.clone(), namespace, resource);
        match api.list(&pushed).await {
            Ok(listed) => existing.extend(listed.items.into_iter().filter(|c| {
                c.annotations()
                    .get(PUSHED_FOR_ANNOTATION)
                    .map(String::as_str)
                    == Some(export)
            })),
            Err(error) => failed.keep(error),
        }
    }
    let mirrored = claim_copies::mirror(
        provider,
        resource,
        &existing,
        wanted,
        overwritable,
        FIELD_MANAGER,
    )
    .await;
    if let Err(error) = mirrored {
        failed.keep(error);
    }
    failed.into_result()
}

/// Whether a provider object of a copy's name may be overwritten: a copy,
/// bindery's or the konnector's (marked the consumer's). Pure.
fn overwritable(labels: &BTreeMap<String, String>) -> bool {
    labels.contains_key(PUSHED_LABEL)
        || labels.get(OWNER_LABEL).map(String::as_str) == Some(ClaimOwner::Consumer.label_value())
}

/// The provider's copy of app object `source` in `provider_namespace`: its
/// content, its own labels and annotations, marked as kube-bind's konnector
/// marks what it pushes up, and as bindery's copy. Pure.
fn copy_up(
    source: &Value,
    kind: &str,
    cluster_namespace: &str,
    consumer_namespace: &str,
    provider_namespace: &str,
    consumer: &str,
    export: &str,
) -> Value {
    let mut copy = claim_copies::copy_of(
        source,
        kind,
        provider_namespace,
        &[
            (OWNER_LABEL, ClaimOwner::Consumer.label_value()),
            (PUSHED_LABEL, "true"),
            (CONSUMER_LABEL, consumer),
        ],
    );
    if let Some(metadata) = copy["metadata"].as_object_mut() {
        let annotations = metadata
            .entry("annotations")
            .or_insert_with(|| Value::Object(Map::new()));
        if let Some(annotations) = annotations.as_object_mut() {
            annotations.insert(PUSHED_FOR_ANNOTATION.into(), json!(export));
        }
        kube_bind_marks::stamp(metadata, cluster_namespace, consumer_namespace);
    }
    copy
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claim(owner: Option<ClaimOwner>) -> PermissionClaim {
        let mut claim: PermissionClaim =
            serde_json::from_value(json!({"group": "", "resource": "secrets",
            "selector": {"labelSelector": {"matchLabels": {"app": "x"}}}}))
            .unwrap();
        claim.selector.owner = owner;
        claim
    }

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn what_goes_up_is_what_the_consumer_owns() {
        let kube_bind = claim(None);
        assert!(is_consumer_claim(&kube_bind, "secrets"));
        assert!(pushed_up(&kube_bind, &labels(&[("app", "x")])));
        assert!(pushed_up(&kube_bind, &labels(&[(OWNER_LABEL, "consumer")])));
        assert!(
            !pushed_up(&kube_bind, &labels(&[(OWNER_LABEL, "provider")])),
            "pulled down by the konnector"
        );
        assert!(
            !pushed_up(
                &kube_bind,
                &labels(&[(super::super::claim_sync::COPY_LABEL, "true")])
            ),
            "bindery's copy of a provider object"
        );
        let consumers = claim(Some(ClaimOwner::Consumer));
        assert!(is_consumer_claim(&consumers, "secrets"));
        assert!(
            pushed_up(&consumers, &labels(&[(OWNER_LABEL, "provider")])),
            "the selector decides"
        );
        assert!(!is_consumer_claim(
            &claim(Some(ClaimOwner::Provider)),
            "secrets"
        ));
        assert!(!is_consumer_claim(&kube_bind, "configmaps"));
    }

    #[test]
    fn a_copy_up_is_marked_as_the_konnector_marks_it() {
        let source = json!({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": {"name": "db-password", "namespace": "shop", "uid": "u", "resourceVersion": "3",
                "labels": {"app": "x", "bindery.dev/claimed": "true", "kube-bind.io/owner": "x"},
                "annotations": {"note": "kept", "kubectl.kubernetes.io/last-applied-configuration": "{}"}},
            "data": {"password": "cw=="}});
        let copy = copy_up(
            &source,
            "Secret",
            "kube-bind-c1",
            "shop",
            "kube-bind-c1-shop",
            "c1",
            "pg",
        );
        assert_eq!(
            copy,
            json!({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                "metadata": {"name": "db-password", "namespace": "kube-bind-c1-shop",
                    "labels": {"app": "x", "kube-bind.io/owner": "consumer",
                        "bindery.dev/pushed": "true", "bindery.dev/consumer": "c1"},
                    "annotations": {"note": "kept", "bindery.dev/pushed-for": "pg",
                        "kube-bind.io/cluster-namespace": "kube-bind-c1",
                        "kube-bind.io/consumer-namespace": "shop"}},
                "data": {"password": "cw=="}})
        );
        assert!(
            overwritable(&labels(&[(OWNER_LABEL, "consumer")])),
            "the konnector's copy"
        );
        assert!(overwritable(&labels(&[(PUSHED_LABEL, "true")])));
        assert!(
            !overwritable(&labels(&[("app", "x")])),
            "the provider's own"
        );
    }
}
