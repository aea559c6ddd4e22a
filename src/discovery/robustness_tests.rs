//! Every document generator on arbitrary input: odd names, odd versions and
//! random (often non-structural) schemas never panic, and what must hold
//! whatever the schema still holds.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinitionSpec, CustomResourceDefinitionVersion, CustomResourceSubresourceScale,
    CustomResourceSubresourceStatus, CustomResourceSubresources, CustomResourceValidation,
    JSONSchemaProps,
};
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use serde_json::{Map, Value, json};

use super::testdata::{captured_specs, spec};
use super::{aggregated, legacy, negotiate, openapi};

/// A schema-shaped JSON value: the keywords kube-apiserver looks at, with
/// values of the right JSON type and random content.
fn schema_json() -> impl Strategy<Value = Value> {
    let types = prop_oneof![
        1 => Just(None),
        4 => Just(Some("object")),
        3 => Just(Some("string")),
        1 => Just(Some("integer")),
        1 => Just(Some("number")),
        1 => Just(Some("boolean")),
        1 => Just(Some("array")),
    ];
    let flag = || proptest::bool::weighted(0.05);
    let number = prop_oneof![
        (-100i32..100).prop_map(f64::from),
        -1e3f64..1e3,
        -1e25f64..1e25
    ];
    let leaf = (
        types,
        [flag(), flag(), flag(), flag(), flag(), flag()],
        proptest::option::of(number),
        proptest::option::of(0i64..5),
    )
        .prop_map(|(t, flags, num, count)| {
            let mut m = Map::new();
            if let Some(t) = t {
                m.insert("type".into(), t.into());
            }
            let keys = [
                "nullable",
                "x-kubernetes-int-or-string",
                "x-kubernetes-preserve-unknown-fields",
                "x-kubernetes-embedded-resource",
                "uniqueItems",
                "exclusiveMinimum",
            ];
            for (k, on) in keys.iter().zip(flags) {
                if on {
                    m.insert((*k).into(), true.into());
                }
            }
            if let Some(n) = num {
                m.insert("minimum".into(), json!(n));
                m.insert("default".into(), json!(n));
                m.insert("enum".into(), json!([n, "x", null]));
            }
            if let Some(c) = count {
                m.insert("maxLength".into(), c.into());
                m.insert("required".into(), json!(["a", "metadata", "kind"]));
                m.insert(
                    "x-kubernetes-validations".into(),
                    json!([{"rule": "true", "reason": ""}]),
                );
            }
            Value::Object(m)
        });
    leaf.prop_recursive(4, 40, 4, |inner| {
        (
            inner.clone(),
            proptest::collection::btree_map(
                prop_oneof![9 => "[a-z]{1,3}", 1 => Just("kind".to_string())],
                inner.clone(),
                0..4,
            ),
            proptest::option::of(inner.clone()),
            proptest::collection::vec(value_validation(), 0..3),
            proptest::option::of(inner.clone()),
            0u8..4,
        )
            .prop_map(|(base, props, items, any_of, additional, which)| {
                let mut m = base.as_object().cloned().unwrap_or_default();
                if !props.is_empty() {
                    m.insert("properties".into(), json!(props));
                }
                if let Some(i) = items {
                    m.insert("items".into(), i);
                }
                if !any_of.is_empty() {
                    let key = ["anyOf", "allOf", "oneOf", "not"][usize::from(which)];
                    let v = if key == "not" {
                        any_of[0].clone()
                    } else {
                        Value::Array(any_of)
                    };
                    m.insert(key.into(), v);
                }
                if let Some(a) = additional {
                    m.insert("additionalProperties".into(), a);
                }
                if m.get("type") == Some(&json!("array")) && !m.contains_key("items") {
                    m.insert("items".into(), json!({"type": "string"}));
                }
                Value::Object(m)
            })
    })
}

/// What may stand under `anyOf`/`allOf`/`oneOf`/`not` in a structural schema
/// (and sometimes what may not).
fn value_validation() -> impl Strategy<Value = Value> {
    prop_oneof![
        4 => (0i64..9).prop_map(|n| json!({"minLength": n})),
        4 => "[a-c]{1,2}".prop_map(|f| json!({"required": [f]})),
        2 => Just(json!({"pattern": "^x"})),
        1 => Just(json!({"type": "string"})),
        1 => Just(json!({"properties": {"zz": {"maxLength": 1}}})),
    ]
}

fn version(
    name: String,
    schema: Option<JSONSchemaProps>,
    flags: [bool; 3],
) -> CustomResourceDefinitionVersion {
    CustomResourceDefinitionVersion {
        name,
        served: true,
        storage: flags[0],
        schema: Some(CustomResourceValidation {
            open_api_v3_schema: schema,
        }),
        subresources: Some(CustomResourceSubresources {
            status: flags[1].then(|| CustomResourceSubresourceStatus(json!({}))),
            scale: flags[2].then(CustomResourceSubresourceScale::default),
        }),
        ..Default::default()
    }
}

/// Runs every generator over `specs` and checks what holds for any input.
fn check_all(specs: &[CustomResourceDefinitionSpec]) -> Result<(), TestCaseError> {
    let apis = legacy::api_group_list(specs);
    let agg = aggregated::apis(specs);
    let v2 = openapi::v2(specs);
    let root = openapi::v3_root(specs);
    let _ = legacy::api_versions(Some("x"));
    let _ = aggregated::api();
    for group in apis["groups"].as_array().into_iter().flatten() {
        let g = group["name"].as_str().unwrap_or_default();
        prop_assert!(legacy::api_group(specs, g).is_some());
        for v in group["versions"].as_array().into_iter().flatten() {
            let v = v["version"].as_str().unwrap_or_default();
            prop_assert!(legacy::api_resource_list(specs, g, v).is_some());
            let doc = openapi::v3_group_version_document(specs, g, v);
            prop_assert!(doc.is_some());
            // Every reference in the group-version document resolves inside it.
            let v3 = openapi::v3_group_version(specs, g, v).unwrap_or_default();
            let mut refs = std::collections::BTreeSet::new();
            collect_refs(&v3, &mut refs);
            for r in refs {
                let name = r.trim_start_matches("#/components/schemas/");
                prop_assert!(
                    v3["components"]["schemas"].get(name).is_some(),
                    "dangling {}",
                    r
                );
            }
            let url = &root["paths"][format!("apis/{g}/{v}")]["serverRelativeURL"];
            prop_assert_eq!(
                url,
                &json!(format!(
                    "/openapi/v3/apis/{g}/{v}?hash={}",
                    doc.map(|d| d.hash).unwrap_or_default()
                ))
            );
        }
    }
    prop_assert_eq!(
        apis["groups"].as_array().map(Vec::len),
        agg["items"].as_array().map(Vec::len)
    );
    // Every reference in the v2 document resolves inside it.
    let mut refs = std::collections::BTreeSet::new();
    collect_refs(&v2, &mut refs);
    for r in refs {
        let (table, name) = r
            .trim_start_matches("#/")
            .split_once('/')
            .unwrap_or_default();
        prop_assert!(v2[table].get(name).is_some(), "dangling {}", r);
    }
    Ok(())
}

fn collect_refs(v: &Value, out: &mut std::collections::BTreeSet<String>) {
    match v {
        Value::Object(m) => m.iter().for_each(|(k, v)| match v {
            Value::String(s) if k == "$ref" => {
                out.insert(s.clone());
            }
            _ => collect_refs(v, out),
        }),
        Value::Array(a) => a.iter().for_each(|v| collect_refs(v, out)),
        _ => {}
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 100, ..ProptestConfig::default() })]

    #[test]
    fn random_schemas_and_names_never_panic(
        schemas in proptest::collection::vec(proptest::option::of(schema_json()), 1..3),
        group in "|[a-z]{1,3}|[a-z]{1,3}\\.[a-z]{1,3}|k\\.k8s\\.io|é\\.x",
        kind in "|[A-Z][a-z]{0,4}s?|Ünï",
        versions in proptest::collection::vec("v[0-9]{1,2}((alpha|beta)[0-9])?|[a-z]{0,3}", 1..3),
        namespaced in any::<bool>(),
        flags in any::<[bool; 3]>(),
    ) {
        let versions = versions
            .into_iter()
            .zip(schemas)
            .map(|(v, s)| {
                let s = s.map(|mut s| {
                    s["type"] = json!("object");
                    if let Some(m) = s.as_object_mut() {
                        m.remove("additionalProperties");
                    }
                    s
                });
                version(v, s.and_then(|s| serde_json::from_value(s).ok()), flags)
            })
            .collect();
        let scope = if namespaced { "Namespaced" } else { "Cluster" };
        let mut s = spec(&group, &kind, scope, versions);
        s.preserve_unknown_fields = Some(flags[0]);
        check_all(&[s.clone(), s])?;
    }

    #[test]
    fn any_accept_header_is_answered(header in ".{0,80}") {
        let f = negotiate::negotiate(Some(&header));
        prop_assert!(f.content_type().starts_with("application/json"));
    }
}

#[test]
fn input_order_does_not_matter() {
    let specs = captured_specs();
    let mut reversed = specs.clone();
    reversed.reverse();
    for s in &mut reversed {
        s.versions.reverse();
    }
    assert_eq!(
        legacy::api_group_list(&specs),
        legacy::api_group_list(&reversed)
    );
    assert_eq!(aggregated::apis(&specs), aggregated::apis(&reversed));
    assert_eq!(openapi::v2(&specs), openapi::v2(&reversed));
    assert_eq!(openapi::v3_root(&specs), openapi::v3_root(&reversed));
    assert_eq!(
        legacy::api_resource_list(&specs, "testing.bindery.dev", "v1"),
        legacy::api_resource_list(&reversed, "testing.bindery.dev", "v1")
    );
}

#[test]
fn generated_schemas_deserialize_as_crd_schemas() {
    // The strategy above is only useful if its values parse as schemas.
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let strategy = schema_json();
    let parsed = (0..50)
        .filter(|_| {
            let v = strategy
                .new_tree(&mut runner)
                .map(|t| t.current())
                .unwrap_or(Value::Null);
            serde_json::from_value::<JSONSchemaProps>(v).is_ok()
        })
        .count();
    assert!(parsed >= 45, "only {parsed} of 50 parsed");
}
