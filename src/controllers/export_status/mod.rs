//! The APIServiceExport status controller: gathers what kube-bind's export
//! flow looks at (the consumer's APIServiceBinding in its app cluster, the
//! export's BoundSchemas and their CRDs), runs the pure [`flow`] and writes
//! the export's and the BoundSchemas' status when they changed. Triggered by
//! exports, BoundSchemas, CRDs, `app-cluster` Secrets and the app clusters'
//! bindings.

pub mod binding_report;
pub mod flow;

use super::app_clusters::{self, Access, BindingChanged};
use super::conditions::find;
use super::deletion::{self, DeletionPolicy};
use super::{Context, instrument, runner};
use crate::api::Condition;
use crate::api::{APIServiceBinding, APIServiceExport, BoundSchema};
use flow::{Binding, BoundSchemaSeen, Crd, Observed, Resource};
use futures::StreamExt;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, CustomResourceDefinitionCondition,
};
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher;
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;

const WHAT: &str = "reporting an export's status";

/// Runs the controller until it is dropped.
pub async fn run(context: Arc<Context>) {
    let client = context.client.clone();
    let (changes, mut changed) = mpsc::unbounded_channel::<BindingChanged>();
    let bindings = app_clusters::watch_bindings(client.clone(), changes);
    let queue = instrument::Queue::new("export-status");
    let binding_triggers = futures::stream::poll_fn(move |cx| changed.poll_recv(cx))
        .map(|c| ObjectRef::<APIServiceExport>::new(&c.binding).within(&c.cluster_namespace));
    let binding_triggers = instrument::counted(binding_triggers, queue.clone());

    let controller = instrument::controller(Api::<APIServiceExport>::all(client.clone()), &queue);
    let (schema_queue, crd_queue, secret_queue) = (queue.clone(), queue.clone(), queue.clone());
    let by_crd = controller.store();
    let by_secret = controller.store();
    let controller = controller
        .watches(
            Api::<BoundSchema>::all(client.clone()),
            watcher::Config::default(),
            move |schema| {
                let namespace = schema.namespace().unwrap_or_default();
                let exports: Vec<ObjectRef<APIServiceExport>> = schema
                    .owner_references()
                    .iter()
                    .filter(|o| o.kind == "APIServiceExport")
                    .map(|o| ObjectRef::new(&o.name).within(&namespace))
                    .collect();
                exports.iter().for_each(|e| schema_queue.triggered(e));
                exports
            },
        )
        .watches(
            Api::<CustomResourceDefinition>::all(client.clone()),
            watcher::Config::default(),
            move |crd| {
                exports_where(&by_crd, &crd_queue, |export| {
                    export
                        .spec
                        .resources
                        .iter()
                        .any(|r| r.group_resource().to_string() == crd.name_any())
                })
            },
        )
        .watches(
            Api::<Secret>::all(client),
            watcher::Config::default()
                .fields(&format!("metadata.name={}", app_clusters::SECRET_NAME)),
            move |secret| {
                exports_where(&by_secret, &secret_queue, |export| {
                    export.namespace() == secret.namespace()
                })
            },
        )
        .reconcile_on(binding_triggers)
        .run(
            instrument::observed("export-status", queue, runner::only_ours(reconcile)),
            |_, error, _| runner::retry(WHAT, error),
            context,
        )
        .for_each(|result| async move {
            if let Err(error) = result {
                tracing::debug!(%error, WHAT);
            }
        });
    tokio::select! {
        () = controller => {}
        () = bindings => {}
    }
}

fn exports_where(
    store: &Store<APIServiceExport>,
    queue: &instrument::Queue,
    matches: impl Fn(&APIServiceExport) -> bool,
) -> Vec<ObjectRef<APIServiceExport>> {
    store
        .state()
        .into_iter()
        .filter(|export| matches(export))
        .map(|export| {
            let object = ObjectRef::from_obj(&*export);
            queue.triggered(&object);
            object
        })
        .collect()
}

async fn reconcile(export: Arc<APIServiceExport>, context: Arc<Context>) -> kube::Result<Action> {
    if export.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let client = &context.client;
    let namespace = export.namespace().unwrap_or_default();
    let (binding, bound) = binding(&context, &namespace, &export.name_any()).await?;
    let unreachable = matches!(binding, Binding::Unreachable(_));
    let current = export
        .status
        .as_ref()
        .map(|s| s.conditions.clone())
        .unwrap_or_default();
    let was_connected = find(&current, flow::CONNECTED).is_some_and(|c| c.status == "True");
    if was_connected
        && binding == Binding::Absent
        && DeletionPolicy::of(export.annotations()) == DeletionPolicy::Delete
    {
        // Unbound: the Delete policy takes the consumer's objects with it.
        let left = deletion::delete_consumer_objects(&context, &export).await?;
        tracing::info!(export = %export.name_any(), %namespace, left,
            "binding deleted; deleting the consumer's objects");
    }

    let schemas: Api<BoundSchema> = Api::namespaced(client.clone(), &namespace);
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let mut resources = Vec::new();
    let mut current_schemas = Vec::new();
    for exported in &export.spec.resources {
        let name = exported.group_resource().to_string();
        let schema = schemas.get_opt(&name).await?;
        let crd = crds.get_opt(&name).await?;
        resources.push(Resource {
            name: name.clone(),
            bound_schema: schema.as_ref().map(|s| BoundSchemaSeen {
                names: s.spec.names.clone(),
                status: s.status.clone().unwrap_or_default(),
            }),
            crd: crd.map(|crd| {
                let status = crd.status.unwrap_or_default();
                Crd {
                    conditions: status
                        .conditions
                        .unwrap_or_default()
                        .into_iter()
                        .map(crd_condition)
                        .collect(),
                    accepted_names: status.accepted_names,
                    stored_versions: status.stored_versions.unwrap_or_default(),
                }
            }),
        });
        current_schemas.extend(schema);
    }
    let outcome = flow::run(&Observed {
        generation: export.metadata.generation,
        conditions: current.clone(),
        binding,
        resources,
    });

    for (name, status) in &outcome.bound_schemas {
        let Some(schema) = current_schemas.iter().find(|s| &s.name_any() == name) else {
            continue;
        };
        if schema.status.as_ref() == Some(status) {
            continue;
        }
        schemas
            .patch_status(
                name,
                &PatchParams::default(),
                &Patch::Merge(json!({
                    "metadata": {"resourceVersion": schema.resource_version()},
                    "status": status,
                })),
            )
            .await?;
    }
    let workspace_url = context
        .external_url
        .as_deref()
        .map(|base| workspace_url(base, &export.name_any()));
    let published = export
        .status
        .as_ref()
        .and_then(|s| s.virtual_workspace_url.clone());
    let publish = workspace_url.is_some() && workspace_url != published;
    if outcome.conditions != current || publish {
        if outcome.serving_stopped() != flow::serving_stopped(&current) {
            tracing::info!(export = %export.name_any(), %namespace,
                stopped = outcome.serving_stopped(), "export serving changes");
        }
        let mut status = json!({"conditions": outcome.conditions});
        if publish {
            status["virtualWorkspaceURL"] = json!(workspace_url);
        }
        Api::<APIServiceExport>::namespaced(client.clone(), &namespace)
            .patch_status(
                &export.name_any(),
                &PatchParams::default(),
                &Patch::Merge(json!({
                    "metadata": {"resourceVersion": export.resource_version()},
                    "status": status,
                })),
            )
            .await?;
    }
    if let Some((app, binding)) = bound
        && let Err(error) =
            report_to_binding(&context, &app, &binding, &export, &outcome.conditions).await
    {
        tracing::debug!(%error, export = %export.name_any(), "writing the binding's status");
    }
    // Unreachable app clusters are asked again soon; otherwise the watches
    // trigger, and the requeue is only a backstop.
    Ok(Action::requeue(if unreachable {
        Duration::from_secs(10)
    } else {
        Duration::from_secs(120)
    }))
}

/// The virtual workspace of export `name`, every consumer at once, under
/// bindery's `base` URL.
fn workspace_url(base: &str, name: &str) -> String {
    format!(
        "{}/services/export/{name}/clusters/*",
        base.trim_end_matches('/')
    )
}

/// Writes the export's side of the app cluster's APIServiceBinding status
/// (see [`binding_report`]) when it changed.
async fn report_to_binding(
    context: &Context,
    app: &kube::Client,
    binding: &APIServiceBinding,
    export: &APIServiceExport,
    export_conditions: &[Condition],
) -> kube::Result<()> {
    let api_services = bound_api_services(app, &export.name_any()).await?;
    let status = binding.status.clone().unwrap_or_default();
    let conditions = binding_report::binding_conditions(
        &status.conditions,
        export_conditions,
        &api_services,
        binding.metadata.generation,
    );
    let bound_schemas: Vec<_> = export
        .spec
        .resources
        .iter()
        .map(|r| r.group_resource())
        .collect();
    let claims: Vec<_> = binding
        .claim_decisions()
        .iter()
        .filter(|c| c.is_accepted())
        .map(|c| c.claim())
        .collect();
    let pretty = Some(context.provider_pretty_name.clone());
    if binding_report::same(&conditions, &status.conditions)
        && status.bound_schemas == bound_schemas
        && status.permission_claims == claims
        && status.provider_pretty_name == pretty
    {
        return Ok(());
    }
    Api::<APIServiceBinding>::all(app.clone())
        .patch_status(
            &binding.name_any(),
            &PatchParams::default(),
            &Patch::Merge(json!({
                "metadata": {"resourceVersion": binding.resource_version()},
                "status": {
                    "providerPrettyName": pretty,
                    "boundSchemas": bound_schemas,
                    "permissionClaims": claims,
                    "conditions": conditions,
                },
            })),
        )
        .await?;
    Ok(())
}

/// The APIServices `bindery bind` registered for binding `name`, as the app
/// cluster's aggregator reports them.
async fn bound_api_services(
    app: &kube::Client,
    name: &str,
) -> kube::Result<Vec<binding_report::ApiServiceSeen>> {
    use crate::app_binding::{BINDING_LABEL, api_service_resource, availability};
    use kube::api::{DynamicObject, ListParams};
    let listed = Api::<DynamicObject>::all_with(app.clone(), &api_service_resource())
        .list(&ListParams::default().labels(&format!("{BINDING_LABEL}={name}")))
        .await?;
    Ok(listed
        .items
        .iter()
        .map(|service| {
            let (available, message) = availability(&service.data);
            binding_report::ApiServiceSeen {
                name: service.name_any(),
                available,
                message,
            }
        })
        .collect())
}

/// The consumer's binding of `export`, as far as its app cluster tells; when
/// present, also the app cluster's client and the binding itself.
pub(crate) async fn binding(
    context: &Context,
    namespace: &str,
    export: &str,
) -> kube::Result<(Binding, Option<(kube::Client, APIServiceBinding)>)> {
    let app = match context
        .app_clusters
        .access(&context.client, namespace)
        .await?
    {
        Access::NotRegistered => return Ok((Binding::NoAppCluster, None)),
        Access::Invalid(message) => return Ok((Binding::Unreachable(message), None)),
        Access::Client(app) => app,
    };
    Ok(match crate::app_binding::find(&app, export).await {
        Ok(Some(binding)) if binding.metadata.deletion_timestamp.is_none() => {
            let schema_in_sync = binding
                .status
                .as_ref()
                .and_then(|s| find(&s.conditions, flow::SCHEMA_IN_SYNC))
                .cloned();
            (Binding::Present { schema_in_sync }, Some((app, binding)))
        }
        Ok(_) => (Binding::Absent, None),
        Err(error) => (Binding::Unreachable(error.to_string()), None),
    })
}

/// A CRD's condition in the meta/v1 form the export carries.
fn crd_condition(c: CustomResourceDefinitionCondition) -> Condition {
    Condition {
        type_: c.type_,
        status: c.status,
        reason: c.reason.unwrap_or_default(),
        message: c.message.unwrap_or_default(),
        observed_generation: None,
        last_transition_time: c.last_transition_time,
        severity: None,
    }
}
