//! One schema across providers (pure): the schema each provider's bindery
//! serves the consumer for a resource (its OpenAPI v3 document and its
//! discovery) read back as a CustomResourceDefinition spec, and judged with
//! the breaking-change rules bindery holds schema updates to
//! (`crate::schema_compat`): a provider whose schema would refuse, drop or
//! re-type what the default provider's accepts cannot serve the resource
//! beside it.

use crate::schema_compat::{Breaking, breaking_changes};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinitionNames, CustomResourceDefinitionSpec, CustomResourceDefinitionVersion,
    CustomResourceValidation, JSONSchemaProps,
};
use serde_json::Value;

/// One resource as a provider serves it: its kind, whether it is
/// namespaced, and the OpenAPI v3 document of its group/version.
#[derive(Clone, Copy)]
pub struct Served<'a> {
    pub group: &'a str,
    pub version: &'a str,
    pub kind: &'a str,
    pub namespaced: bool,
    pub openapi: &'a Value,
}

/// The resource's schema as a CRD spec with its one version; `None` when the
/// document has no schema for the kind.
pub fn spec_of(served: &Served) -> Option<CustomResourceDefinitionSpec> {
    let schemas = served.openapi["components"]["schemas"].as_object()?;
    let mut schema = schemas
        .values()
        .find(|schema| {
            schema["x-kubernetes-group-version-kind"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|gvk| {
                    gvk["group"] == served.group
                        && gvk["version"] == served.version
                        && gvk["kind"] == served.kind
                })
        })?
        .clone();
    // What every resource has alike, and that the OpenAPI document gives by
    // reference: no part of the resource's own schema.
    if let Some(properties) = schema["properties"].as_object_mut() {
        properties.remove("metadata");
    }
    if let Some(fields) = schema.as_object_mut() {
        fields.retain(|key, _| !key.starts_with("x-kubernetes-group-version-kind"));
    }
    let props: JSONSchemaProps = serde_json::from_value(schema).ok()?;
    Some(CustomResourceDefinitionSpec {
        group: served.group.to_string(),
        names: CustomResourceDefinitionNames {
            kind: served.kind.to_string(),
            plural: String::new(),
            ..Default::default()
        },
        scope: scope_of(served.namespaced).to_string(),
        versions: vec![CustomResourceDefinitionVersion {
            name: served.version.to_string(),
            served: true,
            storage: true,
            schema: Some(CustomResourceValidation {
                open_api_v3_schema: Some(props),
            }),
            ..Default::default()
        }],
        ..Default::default()
    })
}

/// What in `other`'s schema would break a consumer of `first`'s: empty when
/// `other` may serve the resource beside `first`. A provider that serves no
/// schema for it is a break too (its version is gone).
pub fn breaks(first: &Served, other: &Served) -> Vec<Breaking> {
    let Some(first_spec) = spec_of(first) else {
        return Vec::new();
    };
    let other_spec = spec_of(other).unwrap_or_else(|| CustomResourceDefinitionSpec {
        scope: scope_of(other.namespaced).to_string(),
        versions: Vec::new(),
        ..first_spec.clone()
    });
    breaking_changes(&first_spec, &other_spec)
}

fn scope_of(namespaced: bool) -> &'static str {
    if namespaced { "Namespaced" } else { "Cluster" }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn document(size: &str) -> Value {
        json!({"components": {"schemas": {
            "com.example.routed.v1.Gadget": {
                "type": "object",
                "properties": {
                    "apiVersion": {"type": "string"},
                    "metadata": {"allOf": [{"$ref": "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"}]},
                    "spec": {"type": "object", "properties": {"size": {"type": size}}},
                },
                "x-kubernetes-group-version-kind": [
                    {"group": "routed.example.com", "version": "v1", "kind": "Gadget"}
                ],
            },
            "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta": {"type": "object"},
        }}})
    }

    fn served(openapi: &Value, namespaced: bool) -> Served<'_> {
        Served {
            group: "routed.example.com",
            version: "v1",
            kind: "Gadget",
            namespaced,
            openapi,
        }
    }

    #[test]
    fn the_same_schema_is_compatible() {
        let east = document("integer");
        let west = document("integer");
        assert_eq!(breaks(&served(&east, true), &served(&west, true)), vec![]);
        let spec = spec_of(&served(&east, true)).expect("a schema");
        assert_eq!(spec.scope, "Namespaced");
    }

    #[test]
    fn a_retyped_field_or_another_scope_is_a_break() {
        let east = document("integer");
        let west = document("string");
        let found = breaks(&served(&east, true), &served(&west, true));
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].rule.as_str(), "ChangedType");
        assert_eq!(found[0].field, ".spec.size");
        let scope = breaks(&served(&east, true), &served(&east, false));
        assert_eq!(scope[0].rule.as_str(), "ChangedScope");
    }

    #[test]
    fn a_provider_without_the_schema_breaks_it() {
        let east = document("integer");
        let found = breaks(&served(&east, true), &served(&json!({}), true));
        assert!(
            found
                .iter()
                .any(|b| b.rule.as_str() == "RemovedServedVersion"),
            "{found:?}"
        );
    }
}
