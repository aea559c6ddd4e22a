//! The APIServiceExportRequest controller: a request (with its template)
//! becomes the consumer's cluster namespace, ClusterBinding, BoundSchemas,
//! APIServiceExport with its identity, pre-seeded namespaces and RBAC; the
//! request's phase says how it went.
//!
//! Where the request lives: kube-bind's way, in the consumer's cluster
//! namespace; or anywhere else with the annotation
//! `backend.kube-bind.io/identity` naming the app cluster's `kube-system`
//! UID, and the cluster namespace is made from that identity.

pub mod plan;
#[cfg(test)]
mod plan_tests;

use super::conditions::{condition, set_condition};
use super::deletion::{DeletionPolicy, POLICY_ANNOTATION};
use super::kube_bind_rbac_guard::{CLUSTER_NAMESPACE_LABEL, label_if_made_by_bindery};
use super::ownership::MANAGED_LABEL;
use super::{Context, FIELD_MANAGER, identity, instrument, legacy_identity, naming, rbac, runner};
use crate::api::keys::{AUTHOR_ANNOTATION, IDENTITY_ANNOTATION};
use crate::api::{
    APIServiceExport, APIServiceExportRequest, APIServiceExportTemplate, BoundSchema,
    ClusterBinding, ExportRequestPhase,
};
use crate::quota::caps::{MAX_NAMESPACES_ANNOTATION, MAX_OBJECTS_ANNOTATION};
use futures::StreamExt;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::{Resource, ResourceExt};
use plan::{ExportPlan, Refusal, TemplateLookup};
use serde_json::json;
use std::collections::BTreeMap;
use std::sync::Arc;

/// The condition a request reports its outcome with.
pub const EXPORTS_READY: &str = "ExportsReady";

/// Runs the controller until the stream ends.
pub async fn run(context: Arc<Context>) {
    let requests: Api<APIServiceExportRequest> = Api::all(context.client.clone());
    let queue = instrument::Queue::new("request");
    instrument::controller(requests, &queue)
        .run(
            instrument::observed("request", queue.clone(), runner::only_ours(reconcile)),
            error_policy,
            context,
        )
        .for_each(|result| async move {
            if let Err(error) = result {
                tracing::debug!(%error, "request reconcile");
            }
        })
        .await;
}

fn error_policy(_: Arc<APIServiceExportRequest>, error: &kube::Error, _: Arc<Context>) -> Action {
    super::runner::retry("reconciling a request", error)
}

async fn reconcile(
    request: Arc<APIServiceExportRequest>,
    context: Arc<Context>,
) -> kube::Result<Action> {
    if is_final(&request) {
        return Ok(Action::await_change());
    }
    // The cache may not have seen this controller's own last report yet (a
    // rerun queued by the Pending patch); acting on it would recreate what a
    // user deleted after the request succeeded. The API server decides.
    let Some(request) = Api::<APIServiceExportRequest>::namespaced(
        context.client.clone(),
        &request.namespace().unwrap_or_default(),
    )
    .get_opt(&request.name_any())
    .await?
    else {
        return Ok(Action::await_change());
    };
    if is_final(&request) {
        return Ok(Action::await_change());
    }
    let phase = request.status.as_ref().and_then(|s| s.phase);
    if phase.is_none() {
        report(&context.client, &request, Outcome::Pending).await?;
    }
    let outcome = match decide(&context, &request).await? {
        Err(refusal) => Outcome::Failed(refusal),
        Ok((cluster_namespace, plan, annotations)) => {
            make(&context, &request, &cluster_namespace, &plan, &annotations).await?;
            Outcome::Succeeded(cluster_namespace)
        }
    };
    report(&context.client, &request, outcome).await?;
    Ok(Action::await_change())
}

fn is_final(request: &APIServiceExportRequest) -> bool {
    matches!(
        request.status.as_ref().and_then(|s| s.phase),
        Some(ExportRequestPhase::Succeeded | ExportRequestPhase::Failed)
    )
}

/// The cluster namespace, the plan and the export's annotations (its
/// deletion policy and caps), or why there is none.
async fn decide(
    context: &Context,
    request: &APIServiceExportRequest,
) -> kube::Result<Result<(String, ExportPlan, BTreeMap<String, String>), Refusal>> {
    let namespace = request.namespace().unwrap_or_default();
    let cluster_namespace = match request.annotations().get(IDENTITY_ANNOTATION) {
        Some(identity) => naming::cluster_namespace(&context.prefix, identity),
        None if namespace.starts_with(&context.prefix) => namespace,
        None => {
            return Ok(Err(Refusal {
                reason: "NoConsumerIdentity",
                message: format!(
                    "the request is not in a cluster namespace ({}…) and has no {IDENTITY_ANNOTATION} \
                     annotation naming the app cluster's kube-system UID",
                    context.prefix
                ),
            }));
        }
    };
    if let Some(refusal) = claim_namespace(context, request, &cluster_namespace).await? {
        return Ok(Err(refusal));
    }
    if let Some(access) = &context.namespace_access {
        access
            .grant_in_force(&context.client, &cluster_namespace)
            .await?;
    }
    let template = match &request.spec.template_ref {
        None => None,
        Some(reference) => Some((
            reference.name.clone(),
            Api::<APIServiceExportTemplate>::all(context.client.clone())
                .get_opt(&reference.name)
                .await?,
        )),
    };
    let lookup = match &template {
        None => TemplateLookup::NotRequested,
        Some((name, None)) => TemplateLookup::Missing(name),
        Some((_, Some(found))) => TemplateLookup::Found(&found.spec),
    };
    let crds = Api::<CustomResourceDefinition>::all(context.client.clone())
        .list(&Default::default())
        .await?
        .items
        .into_iter()
        .map(|crd| (crd.name_any(), crd))
        .collect::<BTreeMap<_, _>>();
    let found = template.as_ref().and_then(|(_, found)| found.as_ref());
    // The request's deletion policy, else its template's.
    let policy = if request.annotations().contains_key(POLICY_ANNOTATION) {
        DeletionPolicy::of(request.annotations())
    } else {
        found
            .map(|found| DeletionPolicy::of(found.annotations()))
            .unwrap_or(DeletionPolicy::Retain)
    };
    let mut annotations =
        BTreeMap::from([(POLICY_ANNOTATION.to_string(), policy.as_str().to_string())]);
    // The template's caps and way with claimed objects, never the
    // request's: the binder asks, the provider decides.
    for cap in [
        MAX_NAMESPACES_ANNOTATION,
        MAX_OBJECTS_ANNOTATION,
        crate::controllers::claim_push::CLAIMED_OBJECTS_ANNOTATION,
    ] {
        if let Some(value) = found.and_then(|found| found.annotations().get(cap)) {
            annotations.insert(cap.to_string(), value.clone());
        }
    }
    Ok(plan::plan(&request.spec, lookup, &crds)
        .and_then(|plan| plan::laid_out(plan, context.isolation, context.consumer_scope))
        .map(|plan| (cluster_namespace, plan, annotations)))
}

/// Makes the cluster namespace for the request's identity, or refuses when a
/// namespace of that name belongs to another identity.
async fn claim_namespace(
    context: &Context,
    request: &APIServiceExportRequest,
    cluster_namespace: &str,
) -> kube::Result<Option<Refusal>> {
    let namespaces: Api<Namespace> = Api::all(context.client.clone());
    let identity = request.annotations().get(IDENTITY_ANNOTATION);
    if let Some(existing) = namespaces.get_opt(cluster_namespace).await? {
        let recorded = legacy_identity::recorded(existing.annotations());
        if let (Some(wanted), Some(recorded)) = (identity, recorded)
            && wanted != recorded
        {
            return Ok(Some(Refusal {
                reason: "IdentityConflict",
                message: format!(
                    "cluster namespace {cluster_namespace} belongs to another consumer identity"
                ),
            }));
        }
        label_if_made_by_bindery(&namespaces, &existing, FIELD_MANAGER).await?;
        if let Some(identity) = identity {
            legacy_identity::move_to_current_key(&namespaces, &existing, identity, FIELD_MANAGER)
                .await?;
        }
        return Ok(None);
    }
    let mut annotations = BTreeMap::new();
    if let Some(identity) = identity {
        annotations.insert(IDENTITY_ANNOTATION.to_string(), identity.clone());
    }
    if let Some(author) = request.annotations().get(AUTHOR_ANNOTATION) {
        annotations.insert(AUTHOR_ANNOTATION.to_string(), author.clone());
    }
    // Made by bindery, not kube-bind: kube-bind's backend may grant no
    // rights for its exports (`kube_bind_rbac_guard`).
    let namespace = json!({
        "apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": cluster_namespace, "annotations": annotations,
            "labels": {CLUSTER_NAMESPACE_LABEL: "true"}},
    });
    namespaces
        .patch(
            cluster_namespace,
            &context.apply(),
            &Patch::Apply(namespace),
        )
        .await?;
    Ok(None)
}

/// Makes everything the plan says, idempotently (server-side apply).
async fn make(
    context: &Context,
    request: &APIServiceExportRequest,
    cluster_namespace: &str,
    plan: &ExportPlan,
    annotations: &BTreeMap<String, String>,
) -> kube::Result<()> {
    let client = &context.client;
    let name = request.name_any();
    let bindings: Api<ClusterBinding> = Api::namespaced(client.clone(), cluster_namespace);
    let binding = json!({
        "apiVersion": "kube-bind.io/v1alpha2", "kind": "ClusterBinding",
        "metadata": {"name": "cluster"},
        "spec": {
            "kubeconfigSecretRef": {"name": "kubeconfig", "key": "kubeconfig"},
            "providerPrettyName": context.provider_pretty_name,
        },
    });
    bindings
        .patch("cluster", &context.apply(), &Patch::Apply(binding))
        .await?;

    let exports: Api<APIServiceExport> = Api::namespaced(client.clone(), cluster_namespace);
    let export = json!({
        "apiVersion": "kube-bind.io/v1alpha2", "kind": "APIServiceExport",
        "metadata": {
            "name": name,
            "labels": {MANAGED_LABEL: "true"},
            "annotations": annotations,
        },
        "spec": {
            "resources": plan.resources.iter().map(|r| &r.resource).collect::<Vec<_>>(),
            "permissionClaims": plan.claims,
            "informerScope": plan.informer_scope,
            "isolation": context.isolation,
        },
    });
    let export = exports
        .patch(&name, &context.apply(), &Patch::Apply(export))
        .await?;
    let owner = identity::owner(&export);

    let schemas: Api<BoundSchema> = Api::namespaced(client.clone(), cluster_namespace);
    for planned in &plan.resources {
        let schema_name = planned.schema.object_name();
        let schema = json!({
            "apiVersion": "kube-bind.io/v1alpha2", "kind": "BoundSchema",
            "metadata": {
                "name": schema_name,
                "labels": {MANAGED_LABEL: "true"},
                "ownerReferences": [owner],
                "annotations": {super::schema::POLICY_ANNOTATION: plan.schema_update_policy},
            },
            "spec": planned.schema,
        });
        schemas
            .patch(&schema_name, &context.apply(), &Patch::Apply(schema))
            .await?;
    }
    // The export controller gives the export its identity.
    let consumer = cluster_namespace
        .strip_prefix(&context.prefix)
        .unwrap_or(cluster_namespace);
    for namespace in &plan.namespaces {
        crate::provider_namespace::make(client, cluster_namespace, consumer, namespace, None)
            .await?;
    }
    // The export controller keeps the RBAC in step later; granting here too
    // means a Succeeded request always has its RBAC in place.
    rbac::grant(context, &export).await
}

enum Outcome {
    Pending,
    Succeeded(String),
    Failed(Refusal),
}

async fn report(
    client: &kube::Client,
    request: &APIServiceExportRequest,
    outcome: Outcome,
) -> kube::Result<()> {
    let mut conditions = request
        .status
        .as_ref()
        .map(|s| s.conditions.clone())
        .unwrap_or_default();
    let generation = request.meta().generation;
    let (phase, message, ready) = match &outcome {
        Outcome::Pending => (
            "Pending",
            String::new(),
            condition(EXPORTS_READY, false, "Pending", "", generation),
        ),
        Outcome::Succeeded(cluster_namespace) => {
            let message = format!(
                "exported as APIServiceExport {cluster_namespace}/{}",
                request.name_any()
            );
            let ready = condition(EXPORTS_READY, true, "Exported", &message, generation);
            ("Succeeded", message, ready)
        }
        Outcome::Failed(refusal) => (
            "Failed",
            refusal.message.clone(),
            condition(
                EXPORTS_READY,
                false,
                refusal.reason,
                &refusal.message,
                generation,
            ),
        ),
    };
    set_condition(&mut conditions, ready);
    let mut status = json!({"phase": phase, "conditions": conditions});
    if !message.is_empty() {
        status["terminalMessage"] = json!(message);
    }
    Api::<APIServiceExportRequest>::namespaced(
        client.clone(),
        &request.namespace().unwrap_or_default(),
    )
    .patch_status(
        &request.name_any(),
        &PatchParams::default(),
        &Patch::Merge(json!({"status": status})),
    )
    .await?;
    Ok(())
}
