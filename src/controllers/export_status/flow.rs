//! The APIServiceExport status flow of kube-bind's controller
//! (`seeds/apiserviceexports-controller.txt`), as a pure function of what
//! was observed: the consumer's APIServiceBinding, the export's BoundSchemas
//! and their CRDs. It decides every condition the flow sets on the export,
//! whether serving stops, and each BoundSchema's status. No I/O.

use crate::api::BoundSchemaStatus;
use crate::api::Condition;
use crate::controllers::conditions::{condition, find, set_condition};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinitionNames;

pub const CONNECTED: &str = "Connected";
pub const CONSUMER_IN_SYNC: &str = "ConsumerInSync";
pub const READY: &str = "Ready";
/// The condition of a BoundSchema that says whether it is served as is.
pub const VALID: &str = "Valid";
/// The binding's condition that ConsumerInSync follows.
pub const SCHEMA_IN_SYNC: &str = "SchemaInSync";

/// Reasons that stop serving: the flow's "stop APIServiceExport sync".
pub const BINDING_NOT_FOUND: &str = "APIServiceBindingNotFound";
pub const BOUND_SCHEMA_NOT_FOUND: &str = "BoundSchemaNotFound";

/// The CRD conditions copied onto the export, with whether `True` is good.
/// Other CRD condition types are copied as well and are taken as good when
/// `True`.
const INVERTED_CRD_CONDITIONS: &[&str] = &["Terminating", "NonStructuralSchema"];

/// What was found of the consumer's APIServiceBinding.
#[derive(Clone, Debug, PartialEq)]
pub enum Binding {
    /// No app cluster is registered for this consumer: it is served through
    /// `/clusters/<consumer>` only, and there is no binding to look at.
    NoAppCluster,
    /// The app cluster could not be asked.
    Unreachable(String),
    /// The app cluster has no binding of this export (or it is being deleted).
    Absent,
    /// The binding, with its SchemaInSync condition if it has one.
    Present { schema_in_sync: Option<Condition> },
}

/// One CRD as far as the flow needs it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Crd {
    pub conditions: Vec<Condition>,
    pub accepted_names: Option<CustomResourceDefinitionNames>,
    pub stored_versions: Vec<String>,
}

/// One exported resource: its BoundSchema and CRD, when they exist.
#[derive(Clone, Debug, PartialEq)]
pub struct Resource {
    /// `<resource>.<group>`: the name of the BoundSchema and of the CRD.
    pub name: String,
    /// The BoundSchema's served names and its SchemaInSync condition.
    pub bound_schema: Option<BoundSchemaSeen>,
    pub crd: Option<Crd>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct BoundSchemaSeen {
    pub names: CustomResourceDefinitionNames,
    pub status: BoundSchemaStatus,
}

/// Everything the flow is decided from.
#[derive(Clone, Debug, PartialEq)]
pub struct Observed {
    pub generation: Option<i64>,
    /// The export's conditions as they are now (others' conditions, such as
    /// IdentityValid and SchemaInSync, count towards Ready).
    pub conditions: Vec<Condition>,
    pub binding: Binding,
    pub resources: Vec<Resource>,
}

/// What the flow decided.
#[derive(Clone, Debug, PartialEq)]
pub struct Outcome {
    /// The export's conditions after the flow.
    pub conditions: Vec<Condition>,
    /// Each existing BoundSchema's new status, by name.
    pub bound_schemas: Vec<(String, BoundSchemaStatus)>,
}

impl Outcome {
    /// Whether the flow stopped serving the export (the flow's "stop sync").
    pub fn serving_stopped(&self) -> bool {
        serving_stopped(&self.conditions)
    }
}

/// Whether an export with these conditions is not to be served: its binding
/// is gone from a registered app cluster, or a BoundSchema is missing.
/// The catalog asks the same question.
pub fn serving_stopped(conditions: &[Condition]) -> bool {
    let stopped_by = |type_: &str, reason: &str| {
        find(conditions, type_).is_some_and(|c| c.status == "False" && c.reason == reason)
    };
    stopped_by(CONNECTED, BINDING_NOT_FOUND) || stopped_by(READY, BOUND_SCHEMA_NOT_FOUND)
}

/// Runs the flow.
pub fn run(observed: &Observed) -> Outcome {
    let generation = observed.generation;
    let mut conditions = observed.conditions.clone();
    let set =
        |conditions: &mut Vec<Condition>, type_: &str, status, reason: &str, message: &str| {
            set_condition(
                conditions,
                condition(type_, status, reason, message, generation),
            );
        };

    // Connected and ConsumerInSync, from the binding.
    match &observed.binding {
        Binding::NoAppCluster => {
            let message = "no app cluster is registered for this consumer; the export is served \
                           through the consumer endpoint only";
            set_unknown(
                &mut conditions,
                CONNECTED,
                "AppClusterNotRegistered",
                message,
                generation,
            );
            set_unknown(
                &mut conditions,
                CONSUMER_IN_SYNC,
                "AppClusterNotRegistered",
                message,
                generation,
            );
        }
        Binding::Unreachable(error) => {
            let message = format!("the app cluster cannot be reached: {error}");
            set(
                &mut conditions,
                CONNECTED,
                false,
                "AppClusterUnreachable",
                &message,
            );
            set(
                &mut conditions,
                CONSUMER_IN_SYNC,
                false,
                "AppClusterUnreachable",
                &message,
            );
        }
        Binding::Absent => {
            let message = "the app cluster has no APIServiceBinding of this export; it is not \
                           served until one is made";
            set(
                &mut conditions,
                CONNECTED,
                false,
                BINDING_NOT_FOUND,
                message,
            );
            set(
                &mut conditions,
                CONSUMER_IN_SYNC,
                false,
                BINDING_NOT_FOUND,
                message,
            );
        }
        Binding::Present { schema_in_sync } => {
            set(
                &mut conditions,
                CONNECTED,
                true,
                "APIServiceBindingFound",
                "",
            );
            match schema_in_sync {
                Some(c) if c.status == "True" => {
                    set(&mut conditions, CONSUMER_IN_SYNC, true, "SchemaInSync", "")
                }
                Some(c) => {
                    let message = format!(
                        "the APIServiceBinding reports SchemaInSync={} ({}): {}",
                        c.status, c.reason, c.message
                    );
                    set(
                        &mut conditions,
                        CONSUMER_IN_SYNC,
                        false,
                        "SchemaNotInSync",
                        &message,
                    )
                }
                None => set(
                    &mut conditions,
                    CONSUMER_IN_SYNC,
                    false,
                    "SchemaInSyncUnknown",
                    "the APIServiceBinding has no SchemaInSync condition yet",
                ),
            }
        }
    }

    // The CRDs' conditions, copied; several CRDs are merged per type.
    for copied in crd_conditions(&observed.resources, generation) {
        set_condition(&mut conditions, copied);
    }

    // The summary.
    let missing_schema = observed
        .resources
        .iter()
        .find(|r| r.bound_schema.is_none())
        .map(|r| r.name.clone());
    let missing_crd = observed
        .resources
        .iter()
        .find(|r| r.crd.is_none())
        .map(|r| r.name.clone());
    let ready = if let Some(name) = missing_schema {
        condition(
            READY,
            false,
            BOUND_SCHEMA_NOT_FOUND,
            &format!("BoundSchema {name} does not exist; the export is not served"),
            generation,
        )
    } else if let Some(name) = missing_crd {
        condition(
            READY,
            false,
            "CustomResourceDefinitionNotFound",
            &format!("CustomResourceDefinition {name} does not exist in the provider"),
            generation,
        )
    } else {
        summary(&conditions, generation)
    };
    set_condition(&mut conditions, ready);

    let bound_schemas = observed
        .resources
        .iter()
        .filter_map(|r| Some((r.name.clone(), schema_status(r, r.bound_schema.as_ref()?))))
        .collect();
    Outcome {
        conditions,
        bound_schemas,
    }
}

fn set_unknown(
    conditions: &mut Vec<Condition>,
    type_: &str,
    reason: &str,
    message: &str,
    generation: Option<i64>,
) {
    let mut unknown = condition(type_, false, reason, message, generation);
    unknown.status = "Unknown".into();
    set_condition(conditions, unknown);
}

/// Each CRD condition type once: `True` when every CRD says `True`, `False`
/// when one says `False`, else `Unknown`; the reason and message are those
/// of the first CRD with the merged status.
fn crd_conditions(resources: &[Resource], generation: Option<i64>) -> Vec<Condition> {
    let crds: Vec<(&str, &Crd)> = resources
        .iter()
        .filter_map(|r| Some((r.name.as_str(), r.crd.as_ref()?)))
        .collect();
    let mut types: Vec<&str> = Vec::new();
    for (_, crd) in &crds {
        for c in &crd.conditions {
            if !types.contains(&c.type_.as_str()) {
                types.push(&c.type_);
            }
        }
    }
    types
        .into_iter()
        .map(|type_| {
            let all: Vec<(&str, &Condition)> = crds
                .iter()
                .filter_map(|(name, crd)| Some((*name, find(&crd.conditions, type_)?)))
                .collect();
            let status = if all.iter().any(|(_, c)| c.status == "False") {
                "False"
            } else if all.len() == crds.len() && all.iter().all(|(_, c)| c.status == "True") {
                "True"
            } else {
                "Unknown"
            };
            let (name, first) = all
                .iter()
                .find(|(_, c)| c.status == status)
                .copied()
                .unwrap_or(all[0]);
            let message = if crds.len() > 1 && !first.message.is_empty() {
                format!("CustomResourceDefinition {name}: {}", first.message)
            } else {
                first.message.clone()
            };
            let mut merged = condition(type_, true, &first.reason, &message, generation);
            merged.status = status.into();
            merged
        })
        .collect()
}

/// Ready: `True` when every other condition is good; else `False` with the
/// reason of the first one that is not, and its type and message.
fn summary(conditions: &[Condition], generation: Option<i64>) -> Condition {
    let bad = conditions.iter().find(|c| {
        if c.type_ == READY {
            return false;
        }
        let good = if INVERTED_CRD_CONDITIONS.contains(&c.type_.as_str()) {
            "False"
        } else {
            "True"
        };
        c.status != good
    });
    match bad {
        None => condition(READY, true, "Ready", "", generation),
        Some(c) => {
            let message = if c.message.is_empty() {
                format!("{} is {}", c.type_, c.status)
            } else {
                format!("{} is {}: {}", c.type_, c.status, c.message)
            };
            condition(READY, false, &c.reason, &message, generation)
        }
    }
}

/// A BoundSchema's status: the names it serves, the CRD's stored versions,
/// and `Valid`: `Accepted` when served as the CRD is, `DriftDetected` when
/// a CRD change is held back, `Pending` while the CRD is not established,
/// `Rejected` when the CRD is gone.
fn schema_status(resource: &Resource, seen: &BoundSchemaSeen) -> BoundSchemaStatus {
    let mut status = seen.status.clone();
    status.accepted_names = Some(seen.names.clone());
    let generation = None;
    let valid = match &resource.crd {
        None => condition(
            VALID,
            false,
            "Rejected",
            &format!(
                "CustomResourceDefinition {} does not exist in the provider",
                resource.name
            ),
            generation,
        ),
        Some(crd) => {
            status.stored_versions = crd.stored_versions.clone();
            let established =
                find(&crd.conditions, "Established").is_some_and(|c| c.status == "True");
            let drift =
                find(&seen.status.conditions, SCHEMA_IN_SYNC).filter(|c| c.status == "False");
            if let Some(drift) = drift {
                condition(VALID, false, "DriftDetected", &drift.message, generation)
            } else if !established {
                condition(
                    VALID,
                    false,
                    "Pending",
                    &format!(
                        "CustomResourceDefinition {} is not established",
                        resource.name
                    ),
                    generation,
                )
            } else {
                condition(VALID, true, "Accepted", "", generation)
            }
        }
    };
    set_condition(&mut status.conditions, valid);
    status
}

#[cfg(test)]
#[path = "flow_tests.rs"]
mod tests;
