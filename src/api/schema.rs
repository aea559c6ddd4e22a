//! Schema pieces the derived schemas cannot express, used through
//! `#[schemars(schema_with = ...)]` and `#[schemars(transform = ...)]`:
//!
//! - free-form objects (`runtime.RawExtension` in kube-bind),
//! - condition lists as kube-bind's CRDs have them: a `severity`, `reason`
//!   and `message` that may be left out, `lastTransitionTime` required,
//! - CRD versions whose embedded OpenAPI schema is kept as an opaque object
//!   instead of the recursive `JSONSchemaProps` schema, which a kube-apiserver
//!   would not accept as structural,
//! - fields kube-bind's CRDs require that the Rust types read leniently
//!   ([`required`]).

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

/// Makes `fields` required, as kube-bind's CRDs have them, where serde's
/// `default` left them optional (and gave them a default, which would make
/// `required` moot): the Rust types still read an object without them, the
/// API server refuses to store one.
pub(crate) fn required(fields: &'static [&'static str]) -> impl FnMut(&mut Schema) {
    move |schema: &mut Schema| {
        if let Some(Value::Object(properties)) = schema.get_mut("properties") {
            for field in fields {
                if let Some(Value::Object(property)) = properties.get_mut(*field) {
                    property.remove("default");
                }
            }
        }
        let object = schema.ensure_object();
        let required = object
            .entry("required")
            .or_insert_with(|| json!([]))
            .as_array_mut()
            .expect("required is a list");
        for field in fields {
            if !required.iter().any(|r| r == field) {
                required.push(json!(field));
            }
        }
    }
}

/// A list of conditions, one per `type`.
///
/// kube-bind's conditions (kcp's form) require `type`, `status` and
/// `lastTransitionTime`; its konnector leaves `reason` and `message` out
/// when all is well, and adds a `severity`. Kubernetes' own `Condition`
/// schema would refuse those. (The Rust [`super::Condition`] also reads a
/// condition without a time, which older bindery CRDs let through.)
pub(crate) fn conditions(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "description": "Observations of the object's state, one per condition type.",
        "type": "array",
        "x-kubernetes-list-type": "map",
        "x-kubernetes-list-map-keys": ["type"],
        "items": {
            "type": "object",
            "required": ["type", "status", "lastTransitionTime"],
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

/// `versions` of a BoundSchema: Kubernetes' own version schema with
/// kube-bind's rules (a name like `v1`, `v2beta1`; `served` defaulting to
/// true; printer columns keyed by name), and `schema` kept whole as written,
/// either form kube-bind writes (`{openAPIV3Schema: …}` or the bare schema,
/// see [`super::bound_schema`]).
pub(crate) fn crd_versions(_: &mut SchemaGenerator) -> Schema {
    versions_with_schema(json!({
        "description": "The schema served for this version, kept as written.",
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": true,
        "x-kubernetes-map-type": "atomic",
    }))
}

/// `versions` as kube-bind's `v1alpha1` APIServiceExport has them: as
/// [`crd_versions`], with the schema always wrapped in `openAPIV3Schema`.
pub(crate) fn wrapped_crd_versions(_: &mut SchemaGenerator) -> Schema {
    versions_with_schema(json!({
        "description": "The schema served for this version.",
        "type": "object",
        "required": ["openAPIV3Schema"],
        "properties": {
            "openAPIV3Schema": {
                "description": "OpenAPI v3 schema of the resource, kept as written.",
                "type": "object",
                "x-kubernetes-preserve-unknown-fields": true,
                "x-kubernetes-map-type": "atomic",
            },
        },
    }))
}

/// Kubernetes' CRD version schema, with `schema` replaced by an opaque
/// `schema` node instead of the recursive `JSONSchemaProps` schema (which a
/// kube-apiserver would not accept as structural), and kube-bind's rules.
fn versions_with_schema(schema: Value) -> Schema {
    // A generator of its own: the recursive JSONSchemaProps schema it meets on
    // the way is thrown away with it instead of landing in the CRD's definitions.
    let mut generator = SchemaSettings::openapi3()
        .with(|s| {
            s.inline_subschemas = true;
            s.meta_schema = None;
        })
        .into_generator();
    let mut version = generator.subschema_for::<CustomResourceDefinitionVersion>();
    let object = version.ensure_object();
    if let Some(Value::Object(properties)) = object.get_mut("properties") {
        properties.insert("schema".into(), schema);
        if let Some(Value::Object(name)) = properties.get_mut("name") {
            name.insert("minLength".into(), json!(1));
            name.insert("pattern".into(), json!(VERSION_PATTERN));
        }
        if let Some(Value::Object(served)) = properties.get_mut("served") {
            served.insert("default".into(), json!(true));
        }
        if let Some(Value::Object(columns)) = properties.get_mut("additionalPrinterColumns") {
            columns.insert("x-kubernetes-list-type".into(), json!("map"));
            columns.insert("x-kubernetes-list-map-keys".into(), json!(["name"]));
        }
    }
    if let Some(Value::Array(required)) = object.get_mut("required")
        && !required.iter().any(|r| r == "schema")
    {
        required.push(json!("schema"));
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

/// A BoundSchema's `conversion` with kube-bind's rules: the strategy is
/// `None` or `Webhook`, a webhook is given exactly when the strategy is
/// `Webhook`, and its URL is a URI.
pub(crate) fn conversion_rules(schema: &mut Schema) {
    let object = schema.ensure_object();
    if let Some(properties) = object.get_mut("properties") {
        if let Some(Value::Object(strategy)) = properties.get_mut("strategy") {
            strategy.insert("enum".into(), json!(["None", "Webhook"]));
        }
        let url = "/webhook/properties/clientConfig/properties/url";
        if let Some(Value::Object(url)) = properties.pointer_mut(url) {
            url.insert("format".into(), json!("uri"));
        }
    }
    object.insert(
        "x-kubernetes-validations".into(),
        json!([{
            "rule": "(self.strategy == 'None' && !has(self.webhook)) || (self.strategy == 'Webhook' && has(self.webhook))",
            "message": "Webhook must be specified if strategy=Webhook",
        }]),
    );
}

/// kube-bind's pattern for a served version's name (`v1`, `v1alpha2`).
pub(crate) const VERSION_PATTERN: &str = r"^v[1-9][0-9]*([a-z]+[1-9][0-9]*)?$";
