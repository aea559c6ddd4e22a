//! Schema pieces the derived schemas cannot express, used through
//! `#[schemars(schema_with = ...)]`:
//!
//! - free-form objects (`runtime.RawExtension` in kube-bind),
//! - condition lists lenient enough for kube-bind's conditions, which carry a
//!   `severity` and may leave `reason` and `message` out,
//! - CRD versions whose embedded OpenAPI schema is kept as an opaque object
//!   instead of the recursive `JSONSchemaProps` schema, which a kube-apiserver
//!   would not accept as structural.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinitionVersion;
use schemars::generate::SchemaSettings;
use schemars::{Schema, SchemaGenerator, json_schema};
use serde_json::{Value, json};

/// Any JSON object, kept as it is.
pub(crate) fn free_form_object(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": true,
    })
}

/// A list of conditions, one per `type`.
///
/// Kubernetes' own `Condition` schema requires `reason`, `message` and
/// `lastTransitionTime`; kube-bind's konnector writes conditions without a
/// reason when all is well, and with a `severity`. Requiring only `type` and
/// `status` lets both kinds of writer share the objects.
pub(crate) fn conditions(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "description": "Observations of the object's state, one per condition type.",
        "type": "array",
        "x-kubernetes-list-type": "map",
        "x-kubernetes-list-map-keys": ["type"],
        "items": {
            "type": "object",
            "required": ["type", "status"],
            "properties": {
                "type": {
                    "description": "Condition type in CamelCase, e.g. Ready.",
                    "type": "string",
                },
                "status": {
                    "description": "True, False or Unknown.",
                    "type": "string",
                },
                "severity": {
                    "description": "How bad a False condition is: Error, Warning or Info (kube-bind's conditions).",
                    "type": "string",
                },
                "reason": {
                    "description": "Machine-readable CamelCase reason for the last transition.",
                    "type": "string",
                },
                "message": {
                    "description": "Human-readable details of the last transition.",
                    "type": "string",
                },
                "lastTransitionTime": {
                    "description": "When the status last changed.",
                    "type": "string",
                    "format": "date-time",
                },
                "observedGeneration": {
                    "description": "metadata.generation the condition was computed from.",
                    "type": "integer",
                    "format": "int64",
                },
            },
        },
    })
}

/// `versions` of a CRD-like spec: Kubernetes' own version schema, except that
/// `schema.openAPIV3Schema` is an opaque object.
pub(crate) fn crd_versions(_: &mut SchemaGenerator) -> Schema {
    // A generator of its own: the recursive JSONSchemaProps schema it meets on
    // the way is thrown away with it instead of landing in the CRD's definitions.
    let mut generator = SchemaSettings::openapi3()
        .with(|s| {
            s.inline_subschemas = true;
            s.meta_schema = None;
        })
        .into_generator();
    let mut version = generator.subschema_for::<CustomResourceDefinitionVersion>();
    let properties = version
        .ensure_object()
        .entry("properties")
        .or_insert_with(|| json!({}));
    if let Value::Object(properties) = properties {
        properties.insert(
            "schema".into(),
            json!({
                "description": "The schema served for this version.",
                "type": "object",
                "properties": {
                    "openAPIV3Schema": {
                        "description": "OpenAPI v3 schema of the resource, kept as written.",
                        "type": "object",
                        "x-kubernetes-preserve-unknown-fields": true,
                    },
                },
            }),
        );
    }
    json_schema!({
        "description": "The versions of the resource, as in a CustomResourceDefinition.",
        "type": "array",
        "minItems": 1,
        "x-kubernetes-list-type": "map",
        "x-kubernetes-list-map-keys": ["name"],
        "items": version,
    })
}
