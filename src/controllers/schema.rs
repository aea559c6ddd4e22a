//! Keeps BoundSchemas in step with their source CRDs. A CRD change is
//! judged by `schema_compat`: under `schemaUpdatePolicy: Always` a compatible
//! change goes into the BoundSchema at once (bindery serves from
//! BoundSchemas, so it is served at once); a breaking change is held back,
//! and the BoundSchema and its export say which field broke which rule, while
//! the last accepted schema keeps being served. Under `Never` nothing
//! changes, and the BoundSchema says that an update is waiting.

use super::conditions::{condition, set_condition};
use super::{Context, runner};
use crate::api::{
    APIServiceExport, APIServiceExportRequest, APIServiceExportRequestSpec, BoundSchema,
    BoundSchemaSpec, ResourceScope, SchemaUpdatePolicy,
};
use crate::schema_compat::breaking_changes;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::Action;
use serde_json::json;
use std::sync::Arc;

pub use super::ownership::POLICY_ANNOTATION;
/// The condition on BoundSchemas and exports that reports schema following.
pub const SCHEMA_IN_SYNC: &str = "SchemaInSync";

/// What to do with a BoundSchema, given its source CRD. Pure.
#[derive(Debug, PartialEq)]
pub enum Decision {
    /// The BoundSchema already serves what the CRD serves.
    InSync,
    /// Put this spec into the BoundSchema.
    Update(Box<BoundSchemaSpec>),
    /// The policy says not to follow; an update is waiting.
    Waiting,
    /// Breaking: held back. Reason and message name the field and the rule.
    HeldBack { reason: String, message: String },
}

pub fn decide(
    current: &BoundSchemaSpec,
    policy: SchemaUpdatePolicy,
    crd: &CustomResourceDefinition,
) -> Decision {
    let candidate = BoundSchemaSpec {
        informer_scope: current.informer_scope,
        group: crd.spec.group.clone(),
        names: crd.spec.names.clone(),
        scope: match (current.scope, crd.spec.scope.as_str()) {
            (_, "Cluster") => ResourceScope::Cluster,
            // A namespaced CRD bound cluster-scoped: `Namespaced`
            // isolation's layout (each consumer's objects in its cluster
            // namespace), kept as it was made.
            (ResourceScope::Cluster, _) => ResourceScope::Cluster,
            _ => ResourceScope::Namespaced,
        },
        versions: crd
            .spec
            .versions
            .iter()
            .filter(|v| v.served)
            .cloned()
            .collect(),
        conversion: crd.spec.conversion.clone(),
    };
    // kube-bind's backend copies a CRD its own way: one it made from this
    // CRD as it is now is in sync too.
    let as_kube_bind_made_it = || {
        super::kube_bind_schema::as_kube_binds_backend_writes_it(
            crd,
            current.informer_scope,
            candidate.scope,
        )
        .is_some_and(|made| made == *current)
    };
    if candidate == *current || as_kube_bind_made_it() {
        return Decision::InSync;
    }
    if policy == SchemaUpdatePolicy::Never {
        return Decision::Waiting;
    }
    let breaking = breaking_changes(&current.crd_spec(), &candidate.crd_spec());
    match breaking.first() {
        None => Decision::Update(Box::new(candidate)),
        Some(first) => Decision::HeldBack {
            reason: first.rule.as_str().to_string(),
            message: format!(
                "the change of CustomResourceDefinition {} is held back: {}; the last accepted \
                 schema is still served",
                crd.name_any(),
                breaking
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join("; ")
            ),
        },
    }
}

/// Runs the controller until the stream ends. A CRD change retriggers every
/// BoundSchema of the same name.
pub async fn run(context: Arc<Context>) {
    runner::run(
        context,
        "schema",
        "following a CRD",
        |schema: &BoundSchema, crd: &CustomResourceDefinition| schema.name_any() == crd.name_any(),
        reconcile,
    )
    .await;
}

/// A BoundSchema's update policy: the one bindery recorded on it, else
/// that of `request`, the request whose export owns it (kube-bind's backend
/// keeps it there), else `Never`. Pure.
pub fn policy_of(
    annotations: &std::collections::BTreeMap<String, String>,
    request: Option<&APIServiceExportRequestSpec>,
) -> SchemaUpdatePolicy {
    match annotations.get(POLICY_ANNOTATION).map(String::as_str) {
        Some("Always") => SchemaUpdatePolicy::Always,
        Some(_) => SchemaUpdatePolicy::Never,
        None => request.map_or(SchemaUpdatePolicy::Never, |r| r.schema_update_policy),
    }
}

/// The request, in the BoundSchema's cluster namespace, that made the
/// export owning `schema` (kube-bind names the export after it).
async fn owning_request(
    client: &kube::Client,
    namespace: &str,
    schema: &BoundSchema,
) -> kube::Result<Option<APIServiceExportRequest>> {
    let requests: Api<APIServiceExportRequest> = Api::namespaced(client.clone(), namespace);
    for owner in schema.owner_references() {
        if owner.kind == "APIServiceExport"
            && let Some(request) = requests.get_opt(&owner.name).await?
        {
            return Ok(Some(request));
        }
    }
    Ok(None)
}

async fn reconcile(schema: Arc<BoundSchema>, context: Arc<Context>) -> kube::Result<Action> {
    let client = &context.client;
    let namespace = schema.namespace().unwrap_or_default();
    let schemas: Api<BoundSchema> = Api::namespaced(client.clone(), &namespace);
    let Some(crd) = Api::<CustomResourceDefinition>::all(client.clone())
        .get_opt(&schema.name_any())
        .await?
    else {
        return Ok(Action::await_change());
    };
    let request = match schema.annotations().contains_key(POLICY_ANNOTATION) {
        true => None,
        false => owning_request(client, &namespace, &schema).await?,
    };
    let policy = policy_of(schema.annotations(), request.as_ref().map(|r| &r.spec));
    let generation = schema.metadata.generation;
    let (in_sync, reason, message) = match decide(&schema.spec, policy, &crd) {
        Decision::InSync => (true, "InSync".to_string(), String::new()),
        Decision::Update(spec) => {
            schemas
                .patch(
                    &schema.name_any(),
                    &PatchParams::default(),
                    &Patch::Merge(json!({
                        "metadata": {"resourceVersion": schema.resource_version()},
                        "spec": spec,
                    })),
                )
                .await?;
            tracing::info!(schema = %schema.name_any(), %namespace, "followed a compatible CRD change");
            // The update triggers another round, which reports InSync.
            return Ok(Action::await_change());
        }
        Decision::Waiting => (
            false,
            "UpdateWaiting".to_string(),
            format!(
                "CustomResourceDefinition {} changed; schemaUpdatePolicy Never keeps the bound schema",
                crd.name_any()
            ),
        ),
        Decision::HeldBack { reason, message } => (false, reason, message),
    };
    let mut conditions = schema
        .status
        .as_ref()
        .map(|s| s.conditions.clone())
        .unwrap_or_default();
    let new = condition(SCHEMA_IN_SYNC, in_sync, &reason, &message, generation);
    set_condition(&mut conditions, new.clone());
    schemas
        .patch_status(
            &schema.name_any(),
            &PatchParams::default(),
            &Patch::Merge(json!({
                "metadata": {"resourceVersion": schema.resource_version()},
                "status": {"conditions": conditions},
            })),
        )
        .await?;
    // The owning export says so too.
    let exports: Api<APIServiceExport> = Api::namespaced(client.clone(), &namespace);
    for owner in schema
        .owner_references()
        .iter()
        .filter(|o| o.kind == "APIServiceExport")
    {
        let Some(export) = exports.get_opt(&owner.name).await? else {
            continue;
        };
        let mut conditions = export
            .status
            .as_ref()
            .map(|s| s.conditions.clone())
            .unwrap_or_default();
        let mut for_export = new.clone();
        for_export.observed_generation = export.metadata.generation;
        if !in_sync {
            for_export.message = format!("BoundSchema {}: {message}", schema.name_any());
        }
        set_condition(&mut conditions, for_export);
        exports
            .patch_status(
                &owner.name,
                &PatchParams::default(),
                &Patch::Merge(json!({
                    "metadata": {"resourceVersion": export.resource_version()},
                    "status": {"conditions": conditions},
                })),
            )
            .await?;
    }
    Ok(Action::await_change())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn crd(properties: serde_json::Value) -> CustomResourceDefinition {
        serde_json::from_value(json!({
            "metadata": {"name": "things.example.com"},
            "spec": {"group": "example.com", "scope": "Namespaced",
                "names": {"plural": "things", "kind": "Thing"},
                "versions": [
                    {"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema":
                        {"type": "object", "properties": {"spec": {"type": "object", "properties": properties}}}}},
                    {"name": "v0", "served": false, "storage": false},
                ]},
        }))
        .unwrap()
    }

    fn bound(from: &CustomResourceDefinition) -> BoundSchemaSpec {
        match decide(&empty(), SchemaUpdatePolicy::Always, from) {
            Decision::Update(spec) => *spec,
            other => panic!("{other:?}"),
        }
    }

    fn empty() -> BoundSchemaSpec {
        serde_json::from_value(json!({
            "informerScope": "Namespaced", "group": "example.com",
            "names": {"plural": "things", "kind": "Thing"}, "scope": "Namespaced", "versions": [],
        }))
        .unwrap()
    }

    /// On main a namespaced CRD bound cluster-scoped (under `Namespaced`
    /// isolation, as kube-bind's backend and bindery bind it) read as a
    /// change waiting: the BoundSchema said SchemaInSync False and its
    /// export was not Ready, though nothing had changed.
    #[test]
    fn a_namespaced_crd_bound_cluster_scoped_is_in_sync() {
        let source = crd(json!({"size": {"type": "integer"}}));
        let mut laid_out = bound(&source);
        laid_out.scope = ResourceScope::Cluster;
        for policy in [SchemaUpdatePolicy::Never, SchemaUpdatePolicy::Always] {
            assert_eq!(decide(&laid_out, policy, &source), Decision::InSync);
        }
    }

    #[test]
    fn the_policy_is_bindery_s_annotation_else_the_owning_request_s() {
        let request: APIServiceExportRequestSpec = serde_json::from_value(serde_json::json!(
            {"resources": [{"resource": "widgets"}], "schemaUpdatePolicy": "Always"}))
        .unwrap();
        let none = std::collections::BTreeMap::new();
        // kube-bind's backend: nothing on the BoundSchema, Always on the request.
        assert_eq!(policy_of(&none, Some(&request)), SchemaUpdatePolicy::Always);
        assert_eq!(policy_of(&none, None), SchemaUpdatePolicy::Never);
        let never = [(POLICY_ANNOTATION.to_string(), "Never".to_string())].into();
        assert_eq!(policy_of(&never, Some(&request)), SchemaUpdatePolicy::Never);
        let always = [(POLICY_ANNOTATION.to_string(), "Always".to_string())].into();
        assert_eq!(policy_of(&always, None), SchemaUpdatePolicy::Always);
    }

    #[test]
    fn an_unchanged_crd_is_in_sync_and_unserved_versions_are_left_out() {
        let source = crd(json!({"size": {"type": "string"}}));
        let current = bound(&source);
        assert_eq!(current.versions.len(), 1, "v0 is not served");
        assert_eq!(
            decide(&current, SchemaUpdatePolicy::Always, &source),
            Decision::InSync
        );
        assert_eq!(
            decide(&current, SchemaUpdatePolicy::Never, &source),
            Decision::InSync
        );
    }

    /// What kube-bind v0.8.2's backend stores for `crd` (its
    /// `CRDToBoundSchema`): every version, the bare schema, `subresources`
    /// always, no `selectableFields`; a conversion's strategy (the CRD
    /// here has one; it has two versions).
    fn made_by_kube_bind(crd: &CustomResourceDefinition) -> BoundSchemaSpec {
        let spec = serde_json::to_value(&crd.spec).unwrap();
        let versions: Vec<serde_json::Value> = spec["versions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| {
                json!({"name": v["name"], "served": v["served"], "storage": v["storage"],
                    "schema": v["schema"]["openAPIV3Schema"],
                    "subresources": v.get("subresources").cloned().unwrap_or(json!({}))})
            })
            .collect();
        serde_json::from_value(json!({
            "informerScope": "Namespaced", "group": spec["group"], "names": spec["names"],
            "scope": spec["scope"], "versions": versions,
            "conversion": {"strategy": spec["conversion"]["strategy"]}}))
        .unwrap()
    }

    /// Issue 33, finding 9: a BoundSchema kube-bind's backend made, taken
    /// over, read as an update waiting (`DriftDetected`) though its CRD had
    /// not changed, whenever the CRD had a version not served, a version
    /// without subresources, or selectable fields.
    #[test]
    fn a_bound_schema_kube_binds_backend_made_from_the_crd_as_it_is_is_in_sync() {
        let mut source = crd(json!({"size": {"type": "string"}}));
        source.spec.versions[0].selectable_fields = Some(vec![
            serde_json::from_value(json!({"jsonPath": ".spec.size"})).unwrap(),
        ]);
        source.spec.versions[1].schema = source.spec.versions[0].schema.clone();
        source.spec.conversion = Some(serde_json::from_value(json!({"strategy": "None"})).unwrap());
        let made = made_by_kube_bind(&source);
        for policy in [SchemaUpdatePolicy::Never, SchemaUpdatePolicy::Always] {
            assert_eq!(
                decide(&made, policy, &source),
                Decision::InSync,
                "{policy:?}"
            );
        }
        // A change since is still one.
        let grown = crd(json!({"size": {"type": "string"}, "color": {"type": "string"}}));
        assert_eq!(
            decide(&made, SchemaUpdatePolicy::Never, &grown),
            Decision::Waiting
        );
    }

    #[test]
    fn a_compatible_change_is_followed_under_always_only() {
        let current = bound(&crd(json!({"size": {"type": "string"}})));
        let grown = crd(json!({"size": {"type": "string"}, "color": {"type": "string"}}));
        match decide(&current, SchemaUpdatePolicy::Always, &grown) {
            Decision::Update(spec) => assert_eq!(*spec, bound(&grown)),
            other => panic!("{other:?}"),
        }
        assert_eq!(
            decide(&current, SchemaUpdatePolicy::Never, &grown),
            Decision::Waiting
        );
    }

    #[test]
    fn a_breaking_change_is_held_back_naming_field_and_rule() {
        let current = bound(&crd(
            json!({"size": {"type": "string"}, "color": {"type": "string"}}),
        ));
        let shrunk = crd(json!({"size": {"type": "integer"}}));
        match decide(&current, SchemaUpdatePolicy::Always, &shrunk) {
            Decision::HeldBack { reason, message } => {
                assert_eq!(reason, "RemovedField");
                assert!(message.contains("field .spec.color"), "{message}");
                assert!(message.contains("(ChangedType)"), "{message}");
                assert!(message.contains("things.example.com"), "{message}");
            }
            other => panic!("{other:?}"),
        }
    }
}
