//! Each rule on a change it must catch and on a near miss it must let pass,
//! plus identity, missing schemas, ordering and the message forms.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinitionNames, CustomResourceDefinitionSpec, CustomResourceDefinitionVersion,
    CustomResourceValidation,
};
use serde_json::{Value, json};

use super::{Rule, breaking_changes};

/// A version; `schema` is the JSON form of its `openAPIV3Schema`, if any.
fn version(name: &str, served: bool, schema: Option<Value>) -> CustomResourceDefinitionVersion {
    CustomResourceDefinitionVersion {
        name: name.into(),
        served,
        storage: served,
        schema: schema.map(|s| CustomResourceValidation {
            open_api_v3_schema: Some(serde_json::from_value(s).expect("valid test schema")),
        }),
        ..Default::default()
    }
}

fn crd(
    scope: &str,
    versions: Vec<CustomResourceDefinitionVersion>,
) -> CustomResourceDefinitionSpec {
    CustomResourceDefinitionSpec {
        group: "example.com".into(),
        names: CustomResourceDefinitionNames {
            plural: "widgets".into(),
            kind: "Widget".into(),
            ..Default::default()
        },
        scope: scope.into(),
        versions,
        ..Default::default()
    }
}

/// The root schema of an object whose `.spec` has schema `spec`.
fn root(spec: Value) -> Value {
    json!({"type": "object", "properties": {"spec": spec}})
}

/// A namespaced CRD serving only `v1`, whose `.spec` has schema `spec`.
fn with_spec(spec: Value) -> CustomResourceDefinitionSpec {
    crd("Namespaced", vec![version("v1", true, Some(root(spec)))])
}

/// A `.spec` schema using every keyword the rules look at.
fn base() -> Value {
    json!({
        "type": "object",
        "required": ["size"],
        "properties": {
            "size": {"type": "string", "description": "How big."},
            "tier": {"type": "string", "enum": ["small", "large"]},
            "name": {"type": "string", "pattern": "^[a-z]+$", "maxLength": 63},
            "replicas": {"type": "integer", "minimum": 1, "maximum": 10},
            "items": {
                "type": "array",
                "items": {"type": "object", "properties": {"name": {"type": "string"}}}
            },
            "labels": {"type": "object", "additionalProperties": {"type": "string"}},
            "port": {"x-kubernetes-int-or-string": true},
            "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}
        }
    })
}

/// The base CRD after `edit` changed its `.spec` schema.
fn edited(edit: impl FnOnce(&mut Value)) -> CustomResourceDefinitionSpec {
    let mut spec = base();
    edit(&mut spec);
    with_spec(spec)
}

fn remove(object: &mut Value, key: &str) {
    object.as_object_mut().expect("an object").remove(key);
}

/// `(version, field, rule)` of every breaking change from the base CRD to `new`.
fn from_base(new: &CustomResourceDefinitionSpec) -> Vec<(String, String, Rule)> {
    found(&with_spec(base()), new)
}

fn found(
    old: &CustomResourceDefinitionSpec,
    new: &CustomResourceDefinitionSpec,
) -> Vec<(String, String, Rule)> {
    breaking_changes(old, new)
        .into_iter()
        .map(|b| (b.version, b.field, b.rule))
        .collect()
}

fn one(version: &str, field: &str, rule: Rule) -> Vec<(String, String, Rule)> {
    vec![(version.into(), field.into(), rule)]
}

fn assert_compatible(old: &CustomResourceDefinitionSpec, new: &CustomResourceDefinitionSpec) {
    let found = breaking_changes(old, new);
    assert!(found.is_empty(), "expected compatible, got {found:#?}");
}

#[test]
fn identity_is_compatible() {
    let spec = crd(
        "Namespaced",
        vec![
            version("v1alpha1", false, None),
            version("v1beta1", true, None),
            version("v1", true, Some(root(base()))),
        ],
    );
    assert_compatible(&spec, &spec);
    assert_compatible(
        &CustomResourceDefinitionSpec::default(),
        &Default::default(),
    );
}

#[test]
fn removed_served_version_is_caught() {
    let old = crd(
        "Namespaced",
        vec![version("v1beta1", true, None), version("v1", true, None)],
    );
    let new = crd("Namespaced", vec![version("v1", true, None)]);
    assert_eq!(
        found(&old, &new),
        one("v1beta1", "", Rule::RemovedServedVersion)
    );
}

#[test]
fn unserved_version_is_caught() {
    let old = crd("Namespaced", vec![version("v1", true, Some(root(base())))]);
    let new = crd("Namespaced", vec![version("v1", false, Some(root(base())))]);
    assert_eq!(found(&old, &new), one("v1", "", Rule::RemovedServedVersion));
}

#[test]
fn adding_a_version_or_dropping_an_unserved_one_is_compatible() {
    let old = crd(
        "Namespaced",
        vec![version("v1alpha1", false, None), version("v1", true, None)],
    );
    let new = crd(
        "Namespaced",
        vec![version("v1", true, None), version("v2", true, None)],
    );
    assert_compatible(&old, &new);
}

#[test]
fn changed_scope_is_caught() {
    let old = with_spec(base());
    let mut new = old.clone();
    new.scope = "Cluster".into();
    assert_eq!(found(&old, &new), one("", "", Rule::ChangedScope));
}

#[test]
fn name_changes_without_scope_change_are_compatible() {
    let old = with_spec(base());
    let mut new = old.clone();
    new.names.short_names = Some(vec!["wd".into()]);
    new.names.categories = Some(vec!["all".into()]);
    assert_compatible(&old, &new);
}

#[test]
fn removed_field_is_caught() {
    let new = edited(|s| remove(&mut s["properties"], "tier"));
    assert_eq!(from_base(&new), one("v1", ".spec.tier", Rule::RemovedField));
}

#[test]
fn removed_array_item_field_is_caught() {
    let new = edited(|s| remove(&mut s["properties"]["items"]["items"]["properties"], "name"));
    assert_eq!(
        from_base(&new),
        one("v1", ".spec.items[*].name", Rule::RemovedField)
    );
}

#[test]
fn removed_map_value_field_is_caught() {
    let map = |value: Value| {
        with_spec(json!({
            "type": "object",
            "properties": {"limits": {"type": "object", "additionalProperties": value}}
        }))
    };
    let old = map(
        json!({"type": "object", "properties": {"max": {"type": "integer"}, "min": {"type": "integer"}}}),
    );
    let new = map(json!({"type": "object", "properties": {"max": {"type": "integer"}}}));
    assert_eq!(
        found(&old, &new),
        one("v1", ".spec.limits[*].min", Rule::RemovedField)
    );
}

#[test]
fn map_turned_into_fixed_fields_is_caught() {
    let new = edited(|s| {
        s["properties"]["labels"] =
            json!({"type": "object", "properties": {"app": {"type": "string"}}});
    });
    assert_eq!(
        from_base(&new),
        one("v1", ".spec.labels[*]", Rule::RemovedField)
    );
}

#[test]
fn field_moved_into_a_subtree_is_a_removal() {
    let new = edited(|s| {
        remove(&mut s["properties"], "tier");
        s["properties"]["placement"] = json!({
            "type": "object",
            "properties": {"tier": {"type": "string", "enum": ["small", "large"]}}
        });
    });
    assert_eq!(from_base(&new), one("v1", ".spec.tier", Rule::RemovedField));
}

#[test]
fn new_optional_field_and_doc_changes_are_compatible() {
    let new = edited(|s| {
        s["properties"]["zone"] = json!({"type": "string"});
        s["properties"]["items"]["items"]["properties"]["weight"] = json!({"type": "integer"});
        s["properties"]["size"]["description"] = json!("How big, in T-shirt sizes.");
        s["properties"]["size"]["default"] = json!("small");
        s["properties"]["size"]["example"] = json!("large");
        s["properties"]["size"]["title"] = json!("Size");
    });
    assert_compatible(&with_spec(base()), &new);
}

#[test]
fn changed_type_is_caught_with_an_actionable_message() {
    let new = edited(|s| s["properties"]["size"]["type"] = json!("integer"));
    let found = breaking_changes(&with_spec(base()), &new);
    assert_eq!(found.len(), 1, "{found:#?}");
    assert_eq!(found[0].rule, Rule::ChangedType);
    assert_eq!(found[0].field, ".spec.size");
    assert_eq!(
        found[0].to_string(),
        "version v1: field .spec.size: type changed from string to integer (ChangedType)"
    );
}

#[test]
fn int_or_string_given_a_type_is_caught() {
    let new = edited(|s| s["properties"]["port"] = json!({"type": "integer"}));
    let found = breaking_changes(&with_spec(base()), &new);
    assert_eq!(found.len(), 1, "{found:#?}");
    assert_eq!(
        (found[0].field.as_str(), found[0].rule),
        (".spec.port", Rule::ChangedType)
    );
    assert_eq!(
        found[0].detail,
        "type changed from int-or-string to integer"
    );
}

#[test]
fn changed_type_is_the_only_finding_for_that_field() {
    let new = edited(|s| s["properties"]["items"] = json!({"type": "string", "pattern": "^x$"}));
    assert_eq!(from_base(&new), one("v1", ".spec.items", Rule::ChangedType));
}

#[test]
fn unset_types_on_both_sides_are_compatible() {
    let new = edited(|s| {
        s["properties"]["port"]["description"] = json!("Port number or name.");
        s["properties"]["extra"] = json!({"x-kubernetes-preserve-unknown-fields": true});
        s["properties"]["extra"]["description"] = json!("Anything.");
    });
    let old = edited(|s| {
        s["properties"]["extra"] = json!({"x-kubernetes-preserve-unknown-fields": true});
    });
    assert_compatible(&old, &new);
}

#[test]
fn optional_field_made_required_is_caught() {
    let new = edited(|s| s["required"] = json!(["size", "tier"]));
    assert_eq!(
        from_base(&new),
        one("v1", ".spec.tier", Rule::NewRequiredField)
    );
}

#[test]
fn new_required_field_is_caught() {
    let new = edited(|s| {
        s["properties"]["zone"] = json!({"type": "string"});
        s["required"] = json!(["size", "zone"]);
    });
    assert_eq!(
        from_base(&new),
        one("v1", ".spec.zone", Rule::NewRequiredField)
    );
}

#[test]
fn required_field_inside_a_new_optional_object_is_compatible() {
    let new = edited(|s| {
        s["properties"]["backup"] = json!({
            "type": "object",
            "required": ["schedule"],
            "properties": {"schedule": {"type": "string"}}
        });
        // Repeating a name that was already required changes nothing.
        s["required"] = json!(["size", "size"]);
    });
    assert_compatible(&with_spec(base()), &new);
}

#[test]
fn enum_value_removed_is_caught() {
    let new = edited(|s| s["properties"]["tier"]["enum"] = json!(["small"]));
    let found = breaking_changes(&with_spec(base()), &new);
    assert_eq!(found.len(), 1, "{found:#?}");
    assert_eq!(
        (found[0].field.as_str(), found[0].rule),
        (".spec.tier", Rule::NarrowedEnum)
    );
    assert_eq!(found[0].detail, r#"enum no longer allows ["large"]"#);
}

#[test]
fn enum_added_to_a_free_field_is_caught() {
    let new = edited(|s| s["properties"]["size"]["enum"] = json!(["S", "M", "L"]));
    assert_eq!(from_base(&new), one("v1", ".spec.size", Rule::NarrowedEnum));
}

#[test]
fn enum_widened_or_removed_is_compatible() {
    let widened = edited(|s| s["properties"]["tier"]["enum"] = json!(["large", "medium", "small"]));
    assert_compatible(&with_spec(base()), &widened);
    let removed = edited(|s| remove(&mut s["properties"]["tier"], "enum"));
    assert_compatible(&with_spec(base()), &removed);
}

#[test]
fn pattern_added_is_caught() {
    let new = edited(|s| s["properties"]["size"]["pattern"] = json!("^[SML]$"));
    assert_eq!(
        from_base(&new),
        one("v1", ".spec.size", Rule::NarrowedPattern)
    );
}

#[test]
fn pattern_changed_is_caught() {
    let new = edited(|s| s["properties"]["name"]["pattern"] = json!("^[a-z0-9]+$"));
    let found = breaking_changes(&with_spec(base()), &new);
    assert_eq!(found.len(), 1, "{found:#?}");
    assert_eq!(
        (found[0].field.as_str(), found[0].rule),
        (".spec.name", Rule::NarrowedPattern)
    );
    assert_eq!(
        found[0].detail,
        "pattern changed from `^[a-z]+$` to `^[a-z0-9]+$`"
    );
}

#[test]
fn pattern_removed_is_compatible() {
    let new = edited(|s| remove(&mut s["properties"]["name"], "pattern"));
    assert_compatible(&with_spec(base()), &new);
}

#[test]
fn tighter_bounds_are_caught() {
    let new = edited(|s| {
        s["properties"]["name"]["maxLength"] = json!(30);
        s["properties"]["replicas"]["exclusiveMaximum"] = json!(true);
        s["properties"]["items"]["minItems"] = json!(1);
    });
    let found = breaking_changes(&with_spec(base()), &new);
    let details: Vec<(&str, &str)> = found
        .iter()
        .inspect(|b| assert_eq!(b.rule, Rule::NarrowedBounds))
        .map(|b| (b.field.as_str(), b.detail.as_str()))
        .collect();
    assert_eq!(
        details,
        [
            (".spec.items", "minItems 1 added"),
            (".spec.name", "maxLength lowered from 63 to 30"),
            (".spec.replicas", "maximum made exclusive"),
        ]
    );
}

#[test]
fn looser_bounds_are_compatible() {
    let new = edited(|s| {
        remove(&mut s["properties"]["name"], "maxLength");
        s["properties"]["replicas"]["minimum"] = json!(0);
        s["properties"]["replicas"]["maximum"] = json!(100);
        s["properties"]["items"]["minItems"] = json!(0);
    });
    assert_compatible(&with_spec(base()), &new);
}

#[test]
fn missing_schemas_accept_anything() {
    let without = crd("Namespaced", vec![version("v1", true, None)]);
    assert_compatible(&without, &with_spec(base()));
    assert_compatible(&with_spec(base()), &without);
    let mut empty_validation = without.clone();
    empty_validation.versions[0].schema = Some(CustomResourceValidation::default());
    assert_compatible(&with_spec(base()), &empty_validation);
}

#[test]
fn results_are_sorted_and_unique() {
    // `v1` repeats on both sides (invalid, but possible input): its findings
    // are reported once.
    let old = crd(
        "Namespaced",
        vec![
            version("v2", true, Some(root(base()))),
            version("v1", true, Some(root(base()))),
            version("v1", true, Some(root(base()))),
        ],
    );
    let mut changed = base();
    remove(&mut changed["properties"], "tier");
    changed["properties"]["size"]["type"] = json!("integer");
    changed["required"] = json!(["size", "name"]);
    let new = crd(
        "Cluster",
        vec![
            version("v1", true, Some(root(changed.clone()))),
            version("v2", true, Some(root(changed.clone()))),
            version("v1", true, Some(root(changed))),
        ],
    );
    let expected: Vec<(String, String, Rule)> = [
        ("", "", Rule::ChangedScope),
        ("v1", ".spec.name", Rule::NewRequiredField),
        ("v1", ".spec.size", Rule::ChangedType),
        ("v1", ".spec.tier", Rule::RemovedField),
        ("v2", ".spec.name", Rule::NewRequiredField),
        ("v2", ".spec.size", Rule::ChangedType),
        ("v2", ".spec.tier", Rule::RemovedField),
    ]
    .into_iter()
    .map(|(v, f, r)| (v.into(), f.into(), r))
    .collect();
    assert_eq!(found(&old, &new), expected);
    assert_eq!(breaking_changes(&old, &new), breaking_changes(&old, &new));
}

#[test]
fn names_that_are_not_identifiers_are_quoted() {
    let old = with_spec(json!({
        "type": "object",
        "properties": {"app.kubernetes.io/name": {"type": "string"}}
    }));
    let new = with_spec(json!({"type": "object", "properties": {}}));
    assert_eq!(
        found(&old, &new),
        one(
            "v1",
            r#".spec["app.kubernetes.io/name"]"#,
            Rule::RemovedField
        )
    );
}

#[test]
fn messages_leave_out_empty_parts() {
    let old = crd(
        "Namespaced",
        vec![version("v1beta1", true, None), version("v1", true, None)],
    );
    let new = crd("Cluster", vec![version("v1", true, None)]);
    let messages: Vec<String> = breaking_changes(&old, &new)
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(
        messages,
        [
            "scope changed from Namespaced to Cluster (ChangedScope)",
            "version v1beta1: version removed (RemovedServedVersion)",
        ]
    );
}

#[test]
fn rule_names_are_camel_case_reasons() {
    let rules = [
        Rule::RemovedField,
        Rule::RemovedServedVersion,
        Rule::ChangedType,
        Rule::NewRequiredField,
        Rule::NarrowedEnum,
        Rule::NarrowedPattern,
        Rule::NarrowedBounds,
        Rule::ChangedScope,
    ];
    for rule in rules {
        let name = rule.as_str();
        assert_eq!(name, format!("{rule:?}"));
        assert_eq!(name, rule.to_string());
        assert!(name.chars().all(|c| c.is_ascii_alphabetic()));
        assert!(name.starts_with(|c: char| c.is_ascii_uppercase()));
    }
}
