//! OpenAPI documents for the served CRDs, as kube-apiserver publishes them:
//! `/openapi/v2` (one Swagger 2.0 document), the `/openapi/v3` root (a link
//! per group-version, with the hash of its document) and
//! `/openapi/v3/apis/<g>/<v>`. They carry what `kubectl explain` needs (the
//! kind's schema and operations tagged with `x-kubernetes-group-version-kind`)
//! and what `kubectl apply --validate=strict` checks (the PATCH operation's
//! `fieldValidation` parameter).
//!
//! kube-apiserver's `/openapi/v2` also has every built-in API; this one has
//! the served CRDs' paths and what they reference, taken from the real
//! server's (`data`).

mod data;
mod routes;
mod schema;
mod structural;
mod v2;
mod v3;

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinitionSpec;
use serde_json::{Map, Value};

use super::etag::Document;
use super::served::{Crd, Served};
use routes::{Param, Route};

/// `/openapi/v2`: every served version of every CRD in one document.
pub fn v2(specs: &[CustomResourceDefinitionSpec]) -> Value {
    v2::document(&Served::new(specs))
}

/// `/openapi/v3`: `{"paths": {"apis/<g>/<v>": {"serverRelativeURL":
/// "/openapi/v3/apis/<g>/<v>?hash=<H>"}}}`, `H` being the hash of the
/// group-version document as [`v3_group_version_document`] serializes it.
pub fn v3_root(specs: &[CustomResourceDefinitionSpec]) -> Value {
    let served = Served::new(specs);
    let mut paths = Map::new();
    let mut gvs: Vec<(&str, &str)> = served
        .groups
        .iter()
        .flat_map(|g| g.versions.iter().map(move |v| (g.name, *v)))
        .collect();
    gvs.sort();
    for (g, v) in gvs {
        let doc = Document::new(&v3::document(&served, g, v));
        let url = format!("/openapi/v3/apis/{g}/{v}?hash={}", doc.hash);
        paths.insert(
            format!("apis/{g}/{v}"),
            serde_json::json!({ "serverRelativeURL": url }),
        );
    }
    serde_json::json!({ "paths": paths })
}

/// `/openapi/v3/apis/<g>/<v>`, or `None` when no CRD serves it.
pub fn v3_group_version(
    specs: &[CustomResourceDefinitionSpec],
    group: &str,
    version: &str,
) -> Option<Value> {
    let served = Served::new(specs);
    if served.crds_in(group, version).is_empty() {
        return None;
    }
    Some(v3::document(&served, group, version))
}

/// [`v3_group_version`] serialized: its hash is the one [`v3_root`] links.
pub fn v3_group_version_document(
    specs: &[CustomResourceDefinitionSpec],
    group: &str,
    version: &str,
) -> Option<Document> {
    v3_group_version(specs, group, version).map(|v| Document::new(&v))
}

/// The path items of `routes` (all of one CRD version): routes grouped by
/// path, shared parameters hoisted to the path. `params` gives a route's
/// parameters, `operation` writes a route's operation with its own ones.
fn path_items(
    crd: &Crd,
    routes: &[Route],
    params: impl Fn(&Route, &Crd) -> Vec<Param>,
    operation: impl Fn(&Route, &Crd, Vec<Param>) -> Value,
) -> Vec<(String, Value)> {
    let mut paths: Vec<&str> = Vec::new();
    for r in routes {
        if !paths.contains(&r.path.as_str()) {
            paths.push(&r.path);
        }
    }
    paths
        .into_iter()
        .map(|path| {
            let on_path: Vec<&Route> = routes.iter().filter(|r| r.path == path).collect();
            let (common, own) = routes::hoist(on_path.iter().map(|r| params(r, crd)).collect());
            let mut item = Map::new();
            // Go writes a path item's operations in this order.
            for method in ["get", "put", "post", "delete", "options", "head", "patch"] {
                for (r, own) in on_path.iter().zip(&own) {
                    if r.method == method {
                        item.insert(method.into(), operation(r, crd, own.clone()));
                    }
                }
            }
            if !common.is_empty() {
                item.insert(
                    "parameters".into(),
                    common.into_iter().map(|p| p.json).collect(),
                );
            }
            (path.to_string(), Value::Object(item))
        })
        .collect()
}

/// A table `close_over` fills: (reference prefix, where entries come from,
/// the entries found so far).
type Table<'a> = (
    &'a str,
    &'a Map<String, Value>,
    &'a mut BTreeMap<String, Value>,
);

/// Every `$ref` under `v`.
fn refs(v: &Value, out: &mut BTreeSet<String>) {
    match v {
        Value::Object(m) => {
            for (k, v) in m {
                match (k.as_str(), v) {
                    ("$ref", Value::String(r)) => {
                        out.insert(r.clone());
                    }
                    _ => refs(v, out),
                }
            }
        }
        Value::Array(a) => a.iter().for_each(|v| refs(v, out)),
        _ => {}
    }
}

/// Adds to `tables` what `roots` reference, transitively, from `sources`:
/// each table is (ref prefix, source entries, found entries). Entries already
/// in a table are not looked up; references nothing provides are left alone.
fn close_over(roots: &[&Value], tables: &mut [Table]) {
    let mut todo = BTreeSet::new();
    for r in roots {
        refs(r, &mut todo);
    }
    for (_, _, found) in tables.iter() {
        for v in found.values() {
            refs(v, &mut todo);
        }
    }
    let mut seen = BTreeSet::new();
    while let Some(r) = todo.pop_first() {
        if !seen.insert(r.clone()) {
            continue;
        }
        for (prefix, source, found) in tables.iter_mut() {
            let Some(name) = r.strip_prefix(*prefix) else {
                continue;
            };
            let name = name.replace("~1", "/").replace("~0", "~");
            if found.contains_key(&name) {
                continue;
            }
            if let Some(v) = source.get(&name) {
                refs(v, &mut todo);
                found.insert(name, v.clone());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::discovery::testdata::{spec, version};

    #[test]
    fn unknown_group_versions_have_no_document() {
        let specs = [spec(
            "a.example.com",
            "Thing",
            "Namespaced",
            vec![version("v1", true), version("v2", false)],
        )];
        assert!(v3_group_version(&specs, "a.example.com", "v1").is_some());
        assert!(v3_group_version(&specs, "a.example.com", "v2").is_none());
        assert!(v3_group_version_document(&specs, "b.example.com", "v1").is_none());
        let root = v3_root(&specs);
        assert_eq!(root["paths"].as_object().unwrap().len(), 1);
    }

    #[test]
    fn root_links_the_hash_of_the_served_bytes() {
        let specs = [spec(
            "a.example.com",
            "Thing",
            "Namespaced",
            vec![version("v1", true)],
        )];
        let doc = v3_group_version_document(&specs, "a.example.com", "v1").unwrap();
        let url = v3_root(&specs)["paths"]["apis/a.example.com/v1"]["serverRelativeURL"].clone();
        assert_eq!(
            url,
            format!("/openapi/v3/apis/a.example.com/v1?hash={}", doc.hash)
        );
        // The document, and so the hash, changes with the schema.
        let specs2 = [spec(
            "a.example.com",
            "Other",
            "Namespaced",
            vec![version("v1", true)],
        )];
        assert_ne!(
            v3_group_version_document(&specs2, "a.example.com", "v1")
                .unwrap()
                .hash,
            doc.hash
        );
    }

    #[test]
    fn empty_set_has_empty_documents() {
        assert_eq!(v3_root(&[]), serde_json::json!({"paths": {}}));
        let doc = v2(&[]);
        assert_eq!(doc["swagger"], "2.0");
        assert_eq!(doc["paths"], serde_json::json!({}));
    }

    #[test]
    fn close_over_follows_references_across_tables() {
        let source: Map<String, Value> = serde_json::from_value(serde_json::json!({
            "A": {"properties": {"b": {"$ref": "#/definitions/B"}}},
            "B": {"items": {"$ref": "#/definitions/A"}},
            "C": {},
        }))
        .unwrap();
        let params: Map<String, Value> = serde_json::from_value(
            serde_json::json!({"p": {"schema": {"$ref": "#/definitions/A"}}}),
        )
        .unwrap();
        let (mut defs, mut ps) = (BTreeMap::new(), BTreeMap::new());
        let root = serde_json::json!({"x": {"$ref": "#/parameters/p"}, "y": {"$ref": "#/definitions/missing"}});
        close_over(
            &[&root],
            &mut [
                ("#/definitions/", &source, &mut defs),
                ("#/parameters/", &params, &mut ps),
            ],
        );
        assert_eq!(defs.keys().collect::<Vec<_>>(), ["A", "B"]);
        assert_eq!(ps.keys().collect::<Vec<_>>(), ["p"]);
    }
}
