//! Test helpers: small CRD specs built in code, and the CRDs and real
//! kube-apiserver responses captured in `testdata/` by
//! `conformance/reference/capture-discovery.sh`.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, CustomResourceDefinitionNames, CustomResourceDefinitionSpec,
    CustomResourceDefinitionVersion,
};
use serde::Deserialize;
use serde_json::Value;

const DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/src/discovery/testdata");

/// A CRD spec with `kind`, plural `<kind>s`, and `versions`.
pub fn spec(
    group: &str,
    kind: &str,
    scope: &str,
    versions: Vec<CustomResourceDefinitionVersion>,
) -> CustomResourceDefinitionSpec {
    let lower = kind.to_lowercase();
    CustomResourceDefinitionSpec {
        group: group.into(),
        scope: scope.into(),
        names: CustomResourceDefinitionNames {
            kind: kind.into(),
            list_kind: Some(format!("{kind}List")),
            plural: format!("{lower}s"),
            singular: Some(lower),
            ..Default::default()
        },
        versions,
        ..Default::default()
    }
}

/// A version without schema; the storage version when served.
pub fn version(name: &str, served: bool) -> CustomResourceDefinitionVersion {
    CustomResourceDefinitionVersion {
        name: name.into(),
        served,
        storage: served,
        ..Default::default()
    }
}

/// The specs of `testdata/crds.yaml`, all versions.
pub fn captured_specs_all_versions() -> Vec<CustomResourceDefinitionSpec> {
    let text = std::fs::read_to_string(format!("{DIR}/crds.yaml")).expect("read crds.yaml");
    serde_norway::Deserializer::from_str(&text)
        .map(|doc| {
            CustomResourceDefinition::deserialize(doc)
                .expect("a CRD")
                .spec
        })
        .collect()
}

/// The specs of `testdata/crds.yaml` as bindery gets them: served versions only.
pub fn captured_specs() -> Vec<CustomResourceDefinitionSpec> {
    let mut specs = captured_specs_all_versions();
    for s in &mut specs {
        s.versions.retain(|v| v.served);
    }
    specs
}

/// A captured response, `testdata/real/<name>`.
pub fn real(name: &str) -> Value {
    let path = format!("{DIR}/real/{name}");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {path}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("parse {path}: {e}"))
}

/// Where `got` and `want` differ, as JSON pointers (at most 20).
pub fn differences(got: &Value, want: &Value) -> Vec<String> {
    fn walk(got: &Value, want: &Value, at: &str, out: &mut Vec<String>) {
        if out.len() >= 20 {
            return;
        }
        match (got, want) {
            (Value::Object(g), Value::Object(w)) => {
                for (k, wv) in w {
                    let here = format!("{at}/{}", k.replace('~', "~0").replace('/', "~1"));
                    match g.get(k) {
                        Some(gv) => walk(gv, wv, &here, out),
                        None => out.push(format!("{here}: missing, want {}", short(wv))),
                    }
                }
                for (k, gv) in g {
                    if !w.contains_key(k) {
                        out.push(format!("{at}/{k}: unexpected {}", short(gv)));
                    }
                }
            }
            (Value::Array(g), Value::Array(w)) if g.len() == w.len() => {
                for (i, (gv, wv)) in g.iter().zip(w).enumerate() {
                    walk(gv, wv, &format!("{at}/{i}"), out);
                }
            }
            _ if got != want => out.push(format!("{at}: got {}, want {}", short(got), short(want))),
            _ => {}
        }
    }
    fn short(v: &Value) -> String {
        let s = v.to_string();
        if s.chars().count() > 200 {
            format!("{}…", s.chars().take(200).collect::<String>())
        } else {
            s
        }
    }
    let mut out = Vec::new();
    walk(got, want, "", &mut out);
    out
}

/// Asserts `got == want`, listing the differences.
#[track_caller]
pub fn assert_same(what: &str, got: &Value, want: &Value) {
    let diffs = differences(got, want);
    assert!(
        diffs.is_empty() && got == want,
        "{what} differs from kube-apiserver's:\n  {}",
        diffs.join("\n  ")
    );
}

#[test]
fn differences_finds_what_differs() {
    let a = serde_json::json!({"a": [1, 2], "b": {"c": "x"}, "d": 1});
    let b = serde_json::json!({"a": [1, 3], "b": {"c": "x", "e": 2}});
    assert_eq!(
        differences(&a, &b),
        [
            "/a/1: got 2, want 3",
            "/b/e: missing, want 2",
            "/d: unexpected 1"
        ]
    );
    assert!(differences(&a, &a).is_empty());
}
