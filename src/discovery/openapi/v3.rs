//! A `/openapi/v3/apis/<g>/<v>` document: the group-version's CRD paths with
//! OpenAPI 3.0 operations (parameters written out, bodies as `requestBody`),
//! the kinds' component schemas and the Kubernetes schemas they reach.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use super::routes::{PRODUCES, Param, Route};
use super::schema::{self, Flavor};
use super::{close_over, data, path_items};
use crate::discovery::served::{Crd, Served};

fn identify(p: &Value) -> Param {
    let field = |k: &str| {
        p.get(k)
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
    let d = data::v3();
    let mut out = vec![identify(&d.path_parameter("pretty"))];
    if r.has_namespace() {
        out.push(identify(&d.path_parameter("namespace")));
    }
    if r.has_name() {
        out.push(identify(&json!({
            "name": "name",
            "in": "path",
            "description": format!("name of the {}", crd.kind),
            "required": true,
            "schema": {"type": "string", "uniqueItems": true},
        })));
    }
    out.extend(d.action(r.action).iter().map(identify));
    out
}

fn content(types: &[&str], schema: &Value) -> Value {
    Value::Object(
        types
            .iter()
            .map(|t| (t.to_string(), json!({ "schema": schema })))
            .collect(),
    )
}

fn operation(r: &Route, crd: &Crd, own: Vec<Param>) -> Value {
    let mut op = Map::new();
    op.insert("tags".into(), json!([r.tag]));
    op.insert("description".into(), r.description.as_str().into());
    op.insert("operationId".into(), r.operation_id.as_str().into());
    if !own.is_empty() {
        op.insert(
            "parameters".into(),
            own.into_iter().map(|p| p.json).collect(),
        );
    }
    if let Some((model, required)) = r.body {
        let mut body = Map::new();
        body.insert(
            "content".into(),
            content(r.consumes, &r.model_ref(model, crd, Flavor::V3)),
        );
        if required {
            body.insert("required".into(), true.into());
        }
        op.insert("requestBody".into(), Value::Object(body));
    }
    let mut responses = Map::new();
    let model = r.model_ref(r.model, crd, Flavor::V3);
    for (code, message) in &r.responses {
        responses.insert(
            code.to_string(),
            json!({"description": message, "content": content(&PRODUCES, &model)}),
        );
    }
    responses.insert("401".into(), json!({"description": "Unauthorized"}));
    op.insert("responses".into(), Value::Object(responses));
    op.insert("x-kubernetes-action".into(), r.action.into());
    let (g, v, k) = &r.gvk;
    op.insert(
        "x-kubernetes-group-version-kind".into(),
        json!({"group": g, "version": v, "kind": k}),
    );
    Value::Object(op)
}

/// The document of `group`/`version` (empty paths when nothing serves it).
pub(super) fn document(served: &Served, group: &str, version: &str) -> Value {
    let mut paths = BTreeMap::new();
    let mut schemas = BTreeMap::new();
    for crd in served.crds_in(group, version) {
        let Some(v) = crd.version(version) else {
            continue;
        };
        let routes = super::routes::routes(crd, v);
        paths.extend(path_items(crd, &routes, params, operation));
        schemas.insert(
            schema::definition_name(crd.group, version, crd.kind),
            schema::kind_schema(crd, v, Flavor::V3),
        );
        schemas.insert(
            schema::definition_name(crd.group, version, &crd.list_kind),
            schema::list_schema(crd, v, Flavor::V3),
        );
    }
    let d = data::v3();
    let paths = Value::Object(paths.into_iter().collect());
    let crd_schemas = Value::Object(schemas.clone().into_iter().collect());
    close_over(
        &[&paths, &crd_schemas],
        &mut [("#/components/schemas/", d.map("schemas"), &mut schemas)],
    );
    json!({
        "openapi": d.get("openapi"),
        "info": d.get("info"),
        "paths": paths,
        "components": {"schemas": Value::Object(schemas.into_iter().collect())},
    })
}
