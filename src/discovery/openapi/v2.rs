//! The `/openapi/v2` document: CRD paths with Swagger 2.0 operations, shared
//! parameters referenced as kube-apiserver's merged spec references them
//! (`#/parameters/<name>-<hash>`), the CRD kinds' definitions with defaults
//! pruned, and the Kubernetes definitions they reach.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use super::routes::{Model, PRODUCES, Param, Route};
use super::schema::{self, Flavor};
use super::{close_over, data, path_items};
use crate::discovery::served::{Crd, Served};

/// Name and location of a v2 parameter, following a shared reference.
fn identify(p: &Value) -> Param {
    let shared = p
        .get("$ref")
        .and_then(Value::as_str)
        .and_then(|r| r.strip_prefix("#/parameters/"))
        .and_then(|n| data::v2().map("parameters").get(n));
    let src = shared.unwrap_or(p);
    let field = |k: &str| {
        src.get(k)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    Param {
        name: field("name"),
        location: field("in"),
        json: p.clone(),
    }
}

fn params(r: &Route, crd: &Crd) -> Vec<Param> {
    let d = data::v2();
    let mut out = vec![identify(&d.path_parameter("pretty"))];
    if r.has_namespace() {
        out.push(identify(&d.path_parameter("namespace")));
    }
    if r.has_name() {
        out.push(identify(&json!({
            "uniqueItems": true,
            "type": "string",
            "description": format!("name of the {}", crd.kind),
            "name": "name",
            "in": "path",
            "required": true,
        })));
    }
    out.extend(d.action(r.action).iter().map(identify));
    // Bodies of the kind or Scale are written out; DeleteOptions and Patch
    // bodies are shared, and in the action's list.
    if let Some((model @ (Model::Kind | Model::Scale), required)) = r.body {
        out.push(Param {
            name: "body".into(),
            location: "body".into(),
            json: json!({"name": "body", "in": "body", "required": required, "schema": r.model_ref(model, crd, Flavor::V2)}),
        });
    }
    out
}

fn operation(r: &Route, crd: &Crd, own: Vec<Param>) -> Value {
    let mut op = Map::new();
    op.insert("description".into(), r.description.as_str().into());
    op.insert("consumes".into(), json!(r.consumes));
    op.insert("produces".into(), json!(PRODUCES));
    op.insert("schemes".into(), json!(["https"]));
    op.insert("tags".into(), json!([r.tag]));
    op.insert("operationId".into(), r.operation_id.as_str().into());
    if !own.is_empty() {
        op.insert(
            "parameters".into(),
            own.into_iter().map(|p| p.json).collect(),
        );
    }
    let mut responses = Map::new();
    for (code, message) in &r.responses {
        responses.insert(
            code.to_string(),
            json!({"description": message, "schema": r.model_ref(r.model, crd, Flavor::V2)}),
        );
    }
    responses.insert("401".into(), json!({"description": "Unauthorized"}));
    op.insert("responses".into(), Value::Object(responses));
    op.insert("x-kubernetes-action".into(), r.action.into());
    let (g, v, k) = &r.gvk;
    op.insert(
        "x-kubernetes-group-version-kind".into(),
        json!({"group": g, "kind": k, "version": v}),
    );
    Value::Object(op)
}

pub(super) fn document(served: &Served) -> Value {
    let mut paths = BTreeMap::new();
    let mut definitions = BTreeMap::new();
    for crd in &served.crds {
        for version in &crd.versions {
            let routes = super::routes::routes(crd, version);
            paths.extend(path_items(crd, &routes, params, operation));
            definitions.insert(
                schema::definition_name(crd.group, &version.name, crd.kind),
                schema::kind_schema(crd, version, Flavor::V2),
            );
            definitions.insert(
                schema::definition_name(crd.group, &version.name, &crd.list_kind),
                schema::list_schema(crd, version, Flavor::V2),
            );
        }
    }
    let d = data::v2();
    let paths = Value::Object(paths.into_iter().collect());
    let mut parameters = BTreeMap::new();
    let crd_definitions = Value::Object(definitions.clone().into_iter().collect());
    close_over(
        &[&paths, &crd_definitions],
        &mut [
            ("#/definitions/", d.map("definitions"), &mut definitions),
            ("#/parameters/", d.map("parameters"), &mut parameters),
        ],
    );
    let top = d.map("top");
    let mut doc = Map::new();
    for k in ["swagger", "info"] {
        if let Some(v) = top.get(k) {
            doc.insert(k.into(), v.clone());
        }
    }
    doc.insert("paths".into(), paths);
    doc.insert(
        "definitions".into(),
        Value::Object(definitions.into_iter().collect()),
    );
    doc.insert(
        "parameters".into(),
        Value::Object(parameters.into_iter().collect()),
    );
    for k in ["security", "securityDefinitions"] {
        if let Some(v) = top.get(k) {
            doc.insert(k.into(), v.clone());
        }
    }
    Value::Object(doc)
}
