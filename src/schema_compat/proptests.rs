//! Properties on random small schemas: every spec is compatible with itself,
//! adding an optional property anywhere never breaks, and any pair of specs
//! gives sorted, repeatable, printable results without panicking.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinitionSpec, CustomResourceDefinitionVersion, CustomResourceValidation, JSON,
    JSONSchemaProps, JSONSchemaPropsOrArray, JSONSchemaPropsOrBool,
};
use proptest::collection::{btree_map, vec};
use proptest::prelude::*;
use proptest::sample::{Index, subsequence};
use serde_json::json;

use super::breaking_changes;

/// A scalar-ish field: a type (or none, maybe int-or-string) and random
/// enum, pattern and bounds.
fn leaf() -> impl Strategy<Value = JSONSchemaProps> {
    let types = prop_oneof![
        Just(Some("string")),
        Just(Some("integer")),
        Just(Some("number")),
        Just(Some("boolean")),
        Just(Some("")),
        Just(None),
    ];
    (
        types,
        any::<bool>(),
        proptest::option::of(subsequence(vec!["a", "b", "c"], 0..=3)),
        proptest::option::of(prop_oneof![Just("^a"), Just("^b"), Just("")]),
        proptest::option::of(0i64..5),
        proptest::option::of(0i64..5),
        proptest::option::of(-5.0f64..5.0),
        proptest::option::of(any::<bool>()),
    )
        .prop_map(
            |(ty, int_or_string, values, pattern, max_length, min_length, minimum, exclusive)| {
                JSONSchemaProps {
                    type_: ty.map(String::from),
                    x_kubernetes_int_or_string: (ty.is_none() && int_or_string).then_some(true),
                    enum_: values.map(|v| v.into_iter().map(|s| JSON(json!(s))).collect()),
                    pattern: pattern.map(String::from),
                    max_length,
                    min_length,
                    minimum,
                    exclusive_minimum: exclusive,
                    ..Default::default()
                }
            },
        )
}

/// A schema a few levels deep: objects, arrays (mostly schema form) and maps
/// (schema or boolean form) over leaves.
fn schema() -> impl Strategy<Value = JSONSchemaProps> {
    leaf().prop_recursive(4, 32, 4, |inner| {
        let object = (
            btree_map("[a-d]", inner.clone(), 0..4),
            vec("[a-e]", 0..3),
            any::<bool>(),
        )
            .prop_map(|(properties, required, preserve)| JSONSchemaProps {
                type_: Some("object".into()),
                properties: Some(properties),
                required: Some(required),
                x_kubernetes_preserve_unknown_fields: preserve.then_some(true),
                ..Default::default()
            });
        let items = prop_oneof![
            4 => inner.clone().prop_map(|s| JSONSchemaPropsOrArray::Schema(Box::new(s))),
            1 => vec(inner.clone(), 0..2).prop_map(JSONSchemaPropsOrArray::Schemas),
        ];
        let array = items.prop_map(|items| JSONSchemaProps {
            type_: Some("array".into()),
            items: Some(items),
            ..Default::default()
        });
        let values = prop_oneof![
            4 => inner.prop_map(|s| JSONSchemaPropsOrBool::Schema(Box::new(s))),
            1 => any::<bool>().prop_map(JSONSchemaPropsOrBool::Bool),
        ];
        let map = values.prop_map(|values| JSONSchemaProps {
            type_: Some("object".into()),
            additional_properties: Some(values),
            ..Default::default()
        });
        prop_oneof![2 => object, 1 => array, 1 => map]
    })
}

/// A root schema: always an object, as kube-apiserver demands.
fn root() -> impl Strategy<Value = JSONSchemaProps> {
    btree_map("[a-d]", schema(), 0..4).prop_map(|properties| JSONSchemaProps {
        type_: Some("object".into()),
        properties: Some(properties),
        ..Default::default()
    })
}

fn version(
    name: &str,
    served: bool,
    schema: Option<JSONSchemaProps>,
) -> CustomResourceDefinitionVersion {
    CustomResourceDefinitionVersion {
        name: name.into(),
        served,
        schema: schema.map(|s| CustomResourceValidation {
            open_api_v3_schema: Some(s),
        }),
        ..Default::default()
    }
}

/// A spec with up to three versions drawn from a small pool of names (so two
/// random specs often share some), each maybe served, maybe with a schema.
fn spec() -> impl Strategy<Value = CustomResourceDefinitionSpec> {
    let versions = vec(
        (
            prop_oneof![Just("v1"), Just("v2"), Just("v1beta1")],
            any::<bool>(),
            proptest::option::weighted(0.8, root()),
        ),
        0..4,
    );
    (prop_oneof![Just("Namespaced"), Just("Cluster")], versions).prop_map(|(scope, versions)| {
        CustomResourceDefinitionSpec {
            scope: scope.into(),
            versions: versions
                .into_iter()
                .map(|(name, served, schema)| version(name, served, schema))
                .collect(),
            ..Default::default()
        }
    })
}

fn is_object(schema: &JSONSchemaProps) -> bool {
    schema.type_.as_deref() == Some("object") || schema.properties.is_some()
}

/// How many object nodes `schema` has, itself included.
fn count_objects(schema: &JSONSchemaProps) -> usize {
    let mut count = usize::from(is_object(schema));
    for child in schema.properties.iter().flat_map(|p| p.values()) {
        count += count_objects(child);
    }
    if let Some(JSONSchemaPropsOrArray::Schema(child)) = &schema.items {
        count += count_objects(child);
    }
    if let Some(JSONSchemaPropsOrBool::Schema(child)) = &schema.additional_properties {
        count += count_objects(child);
    }
    count
}

/// Moves `added` into the `n`-th object node (pre-order, in the order
/// [`count_objects`] counts) as the optional property `zz-added`, a name the
/// generators never make.
fn add_property(schema: &mut JSONSchemaProps, n: &mut usize, added: &mut Option<JSONSchemaProps>) {
    if added.is_none() {
        return;
    }
    if is_object(schema) {
        if *n == 0 {
            if let Some(added) = added.take() {
                let properties = schema.properties.get_or_insert_default();
                properties.insert("zz-added".into(), added);
            }
            return;
        }
        *n -= 1;
    }
    for child in schema.properties.iter_mut().flat_map(|p| p.values_mut()) {
        add_property(child, n, added);
    }
    if let Some(JSONSchemaPropsOrArray::Schema(child)) = &mut schema.items {
        add_property(child, n, added);
    }
    if let Some(JSONSchemaPropsOrBool::Schema(child)) = &mut schema.additional_properties {
        add_property(child, n, added);
    }
}

proptest! {
    #[test]
    fn every_spec_is_compatible_with_itself(spec in spec()) {
        let found = breaking_changes(&spec, &spec);
        prop_assert!(found.is_empty(), "{found:#?}");
    }

    #[test]
    fn adding_an_optional_property_never_breaks(
        old in root(),
        at in any::<Index>(),
        added in schema(),
    ) {
        let mut new = old.clone();
        // The root is an object, so there is always at least one.
        let mut target = at.index(count_objects(&old));
        let mut added = Some(added);
        add_property(&mut new, &mut target, &mut added);
        prop_assert!(added.is_none(), "nowhere to add the property");
        let old = CustomResourceDefinitionSpec {
            scope: "Namespaced".into(),
            versions: vec![version("v1", true, Some(old))],
            ..Default::default()
        };
        let new = CustomResourceDefinitionSpec {
            versions: vec![version("v1", true, Some(new))],
            ..old.clone()
        };
        let found = breaking_changes(&old, &new);
        prop_assert!(found.is_empty(), "{found:#?}");
    }

    #[test]
    fn any_pair_gives_sorted_repeatable_printable_results(old in spec(), new in spec()) {
        let found = breaking_changes(&old, &new);
        prop_assert_eq!(&found, &breaking_changes(&old, &new));
        for pair in found.windows(2) {
            let key = |b: &super::Breaking| {
                (b.version.clone(), b.field.clone(), b.rule, b.detail.clone())
            };
            prop_assert!(key(&pair[0]) < key(&pair[1]), "{:#?}", pair);
        }
        for b in &found {
            let message = b.to_string();
            let suffix = format!("({})", b.rule.as_str());
            prop_assert!(message.ends_with(&suffix), "{}", message);
        }
    }
}
