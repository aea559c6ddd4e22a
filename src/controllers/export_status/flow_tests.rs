//! One case per branch of the export status flow, and the merges it does.

use super::*;

fn cond(type_: &str, status: &str, reason: &str, message: &str) -> Condition {
    let mut c = condition(type_, true, reason, message, None);
    c.status = status.into();
    c
}

fn names(plural: &str) -> CustomResourceDefinitionNames {
    CustomResourceDefinitionNames {
        plural: plural.into(),
        kind: "Thing".into(),
        ..Default::default()
    }
}

fn healthy_crd() -> Crd {
    Crd {
        conditions: vec![
            cond("NamesAccepted", "True", "NoConflicts", "no conflicts found"),
            cond(
                "Established",
                "True",
                "InitialNamesAccepted",
                "the initial names have been accepted",
            ),
        ],
        accepted_names: Some(names("things")),
        stored_versions: vec!["v1".into()],
    }
}

fn resource(name: &str) -> Resource {
    Resource {
        name: name.into(),
        bound_schema: Some(BoundSchemaSeen {
            names: names(name.split('.').next().unwrap()),
            status: BoundSchemaStatus::default(),
        }),
        crd: Some(healthy_crd()),
    }
}

fn in_sync_binding() -> Binding {
    Binding::Present {
        schema_in_sync: Some(cond(SCHEMA_IN_SYNC, "True", "InSync", "")),
    }
}

fn observed(binding: Binding) -> Observed {
    Observed {
        generation: Some(3),
        conditions: vec![cond("IdentityValid", "True", "Valid", "")],
        binding,
        resources: vec![resource("things.example.com")],
    }
}

fn get<'a>(outcome: &'a Outcome, type_: &str) -> &'a Condition {
    find(&outcome.conditions, type_).unwrap_or_else(|| panic!("no {type_}: {outcome:?}"))
}

#[test]
fn binding_present_and_in_sync_makes_everything_ready() {
    let outcome = run(&observed(in_sync_binding()));
    assert_eq!(get(&outcome, CONNECTED).status, "True");
    assert_eq!(get(&outcome, CONSUMER_IN_SYNC).status, "True");
    assert_eq!(get(&outcome, "Established").status, "True");
    assert_eq!(get(&outcome, "Established").reason, "InitialNamesAccepted");
    assert_eq!(get(&outcome, "NamesAccepted").status, "True");
    let ready = get(&outcome, READY);
    assert_eq!(
        (ready.status.as_str(), ready.reason.as_str()),
        ("True", "Ready")
    );
    assert_eq!(ready.observed_generation, Some(3));
    assert!(!outcome.serving_stopped());
}

#[test]
fn binding_without_schema_in_sync_is_connected_but_not_in_sync() {
    let outcome = run(&observed(Binding::Present {
        schema_in_sync: Some(cond(SCHEMA_IN_SYNC, "False", "Drift", "v2 missing")),
    }));
    assert_eq!(get(&outcome, CONNECTED).status, "True");
    let in_sync = get(&outcome, CONSUMER_IN_SYNC);
    assert_eq!(in_sync.status, "False");
    assert_eq!(in_sync.reason, "SchemaNotInSync");
    assert!(in_sync.message.contains("v2 missing"), "{in_sync:?}");
    let ready = get(&outcome, READY);
    assert_eq!(ready.status, "False");
    assert_eq!(ready.reason, "SchemaNotInSync");
    assert!(
        ready.message.starts_with("ConsumerInSync is False"),
        "{ready:?}"
    );
    assert!(!outcome.serving_stopped());

    let outcome = run(&observed(Binding::Present {
        schema_in_sync: None,
    }));
    assert_eq!(
        get(&outcome, CONSUMER_IN_SYNC).reason,
        "SchemaInSyncUnknown"
    );
    assert_eq!(get(&outcome, READY).status, "False");
}

#[test]
fn binding_absent_disconnects_and_stops_serving() {
    let outcome = run(&observed(Binding::Absent));
    let connected = get(&outcome, CONNECTED);
    assert_eq!(
        (connected.status.as_str(), connected.reason.as_str()),
        ("False", BINDING_NOT_FOUND)
    );
    assert_eq!(get(&outcome, CONSUMER_IN_SYNC).status, "False");
    assert_eq!(get(&outcome, READY).status, "False");
    assert!(outcome.serving_stopped());
}

#[test]
fn an_unreachable_app_cluster_disconnects_but_keeps_serving() {
    let outcome = run(&observed(Binding::Unreachable("connection refused".into())));
    let connected = get(&outcome, CONNECTED);
    assert_eq!(connected.status, "False");
    assert!(connected.message.contains("connection refused"));
    assert!(!outcome.serving_stopped(), "availability first");
}

#[test]
fn without_an_app_cluster_the_binding_conditions_are_unknown() {
    let outcome = run(&observed(Binding::NoAppCluster));
    assert_eq!(get(&outcome, CONNECTED).status, "Unknown");
    assert_eq!(get(&outcome, CONSUMER_IN_SYNC).status, "Unknown");
    assert_eq!(get(&outcome, READY).status, "False");
    assert!(!outcome.serving_stopped());
}

#[test]
fn a_missing_bound_schema_stops_serving() {
    let mut seen = observed(in_sync_binding());
    seen.resources.push(Resource {
        bound_schema: None,
        ..resource("others.example.com")
    });
    let outcome = run(&seen);
    let ready = get(&outcome, READY);
    assert_eq!(
        (ready.status.as_str(), ready.reason.as_str()),
        ("False", BOUND_SCHEMA_NOT_FOUND)
    );
    assert!(ready.message.contains("others.example.com"));
    assert!(outcome.serving_stopped());
    // Only existing BoundSchemas get a status.
    assert_eq!(outcome.bound_schemas.len(), 1);
}

#[test]
fn crd_conditions_are_copied_and_the_worst_wins_across_crds() {
    let mut seen = observed(in_sync_binding());
    let mut terminating = healthy_crd();
    terminating.conditions.push(cond(
        "Terminating",
        "True",
        "InstanceDeletionInProgress",
        "deleting",
    ));
    terminating.conditions[1] = cond("Established", "False", "NotAccepted", "not yet");
    seen.resources.push(Resource {
        crd: Some(terminating),
        ..resource("others.example.com")
    });
    let outcome = run(&seen);
    let established = get(&outcome, "Established");
    assert_eq!(established.status, "False");
    assert_eq!(established.reason, "NotAccepted");
    assert_eq!(
        established.message,
        "CustomResourceDefinition others.example.com: not yet"
    );
    // Only one CRD has Terminating: not every CRD says True.
    assert_eq!(get(&outcome, "Terminating").status, "Unknown");
    assert_eq!(get(&outcome, READY).status, "False");
}

#[test]
fn a_terminating_crd_is_not_ready() {
    let mut seen = observed(in_sync_binding());
    seen.resources[0]
        .crd
        .as_mut()
        .unwrap()
        .conditions
        .push(cond(
            "Terminating",
            "True",
            "InstanceDeletionInProgress",
            "deleting",
        ));
    let ready = run(&seen).conditions;
    let ready = find(&ready, READY).unwrap();
    assert_eq!(ready.status, "False");
    assert_eq!(ready.reason, "InstanceDeletionInProgress");
}

#[test]
fn a_missing_crd_is_not_ready_and_its_bound_schema_rejected() {
    let mut seen = observed(in_sync_binding());
    seen.resources[0].crd = None;
    let outcome = run(&seen);
    assert_eq!(
        get(&outcome, READY).reason,
        "CustomResourceDefinitionNotFound"
    );
    assert!(
        !outcome.serving_stopped(),
        "the last accepted schema keeps being served"
    );
    let status = &outcome.bound_schemas[0].1;
    let valid = find(&status.conditions, VALID).unwrap();
    assert_eq!(
        (valid.status.as_str(), valid.reason.as_str()),
        ("False", "Rejected")
    );
}

#[test]
fn other_conditions_count_towards_ready() {
    let mut seen = observed(in_sync_binding());
    seen.conditions = vec![cond("IdentityValid", "False", "IdentityMismatch", "doubt")];
    let ready = run(&seen);
    let ready = get(&ready, READY);
    assert_eq!(ready.status, "False");
    assert_eq!(ready.reason, "IdentityMismatch");
    assert_eq!(ready.message, "IdentityValid is False: doubt");
}

#[test]
fn bound_schema_status_reports_names_versions_and_validity() {
    let outcome = run(&observed(in_sync_binding()));
    let (name, status) = &outcome.bound_schemas[0];
    assert_eq!(name, "things.example.com");
    assert_eq!(status.accepted_names.as_ref().unwrap().plural, "things");
    assert_eq!(status.stored_versions, ["v1"]);
    let valid = find(&status.conditions, VALID).unwrap();
    assert_eq!(
        (valid.status.as_str(), valid.reason.as_str()),
        ("True", "Accepted")
    );

    let mut drifting = observed(in_sync_binding());
    drifting.resources[0]
        .bound_schema
        .as_mut()
        .unwrap()
        .status
        .conditions = vec![cond(
        SCHEMA_IN_SYNC,
        "False",
        "RemovedField",
        "field .spec.size removed",
    )];
    let outcome = run(&drifting);
    let status = &outcome.bound_schemas[0].1;
    let valid = find(&status.conditions, VALID).unwrap();
    assert_eq!(valid.reason, "DriftDetected");
    assert_eq!(valid.message, "field .spec.size removed");
    assert!(
        find(&status.conditions, SCHEMA_IN_SYNC).is_some(),
        "the schema controller's condition is kept"
    );

    let mut pending = observed(in_sync_binding());
    pending.resources[0].crd.as_mut().unwrap().conditions[1] =
        cond("Established", "False", "Installing", "");
    let outcome = run(&pending);
    let valid = find(&outcome.bound_schemas[0].1.conditions, VALID).unwrap();
    assert_eq!(valid.reason, "Pending");
}

#[test]
fn running_the_flow_twice_changes_nothing() {
    let first = run(&observed(in_sync_binding()));
    let mut again = observed(in_sync_binding());
    again.conditions = first.conditions.clone();
    let second = run(&again);
    assert_eq!(first.conditions, second.conditions);
}
