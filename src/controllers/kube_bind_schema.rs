//! The BoundSchema kube-bind v0.8.2's backend writes for a CRD (its sdk's
//! `CRDToBoundSchema`), so that one it made from a CRD that has not changed
//! since reads as in sync, not as an update waiting. It differs from
//! bindery's own copy of a CRD: every version, served or not; no
//! `selectableFields`; `subresources` always there (`{}` when the CRD has
//! none); a conversion webhook's `url` and `caBundle` only. Pure.

use crate::api::{BoundSchemaSpec, InformerScope, ResourceScope};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use serde_json::{Map, Value, json};

/// What kube-bind's backend writes for `crd`, bound with `informer_scope`
/// and `scope`; `None` where it could not write one (a CRD without
/// versions).
pub fn as_kube_binds_backend_writes_it(
    crd: &CustomResourceDefinition,
    informer_scope: InformerScope,
    scope: ResourceScope,
) -> Option<BoundSchemaSpec> {
    let spec = serde_json::to_value(&crd.spec).ok()?;
    let versions: Vec<Value> = spec["versions"]
        .as_array()
        .filter(|v| !v.is_empty())?
        .iter()
        .map(version)
        .collect();
    let mut written = json!({
        "informerScope": informer_scope,
        "group": spec["group"],
        "names": spec["names"],
        "scope": scope,
        "versions": versions,
    });
    if let Some(conversion) = spec.get("conversion").filter(|c| !c.is_null()) {
        written["conversion"] = self::conversion(conversion);
    }
    serde_json::from_value(written).ok()
}

/// One version as kube-bind copies it.
fn version(from: &Value) -> Value {
    let mut out = Map::new();
    for key in ["name", "served", "storage"] {
        out.insert(key.into(), from[key].clone());
    }
    if from["deprecated"] == true {
        out.insert("deprecated".into(), Value::Bool(true));
    }
    for key in ["deprecationWarning", "additionalPrinterColumns"] {
        if let Some(value) = from.get(key).filter(|v| !v.is_null()) {
            out.insert(key.into(), value.clone());
        }
    }
    out.insert("schema".into(), from["schema"]["openAPIV3Schema"].clone());
    let subresources = match from.get("subresources") {
        Some(s) if !s.is_null() => s.clone(),
        _ => json!({}),
    };
    out.insert("subresources".into(), subresources);
    Value::Object(out)
}

fn conversion(from: &Value) -> Value {
    let mut out = json!({"strategy": from["strategy"]});
    if from["strategy"] == "Webhook" {
        let webhook = &from["webhook"];
        let mut written = json!({"conversionReviewVersions": webhook["conversionReviewVersions"]});
        if let Some(config) = webhook.get("clientConfig").filter(|c| !c.is_null()) {
            let mut client = Map::new();
            for key in ["url", "caBundle"] {
                if let Some(value) = config.get(key).filter(|v| !v.is_null()) {
                    client.insert(key.into(), value.clone());
                }
            }
            written["clientConfig"] = Value::Object(client);
        }
        out["webhook"] = written;
    }
    out
}
