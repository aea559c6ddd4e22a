//! A CRD version's `openAPIV3Schema` as kube-apiserver's structural schema
//! (`apiextensions-apiserver/pkg/apiserver/schema`): converted, checked to be
//! structural, and unfolded. A schema that fails any step is published as a
//! bare `type: object`, as kube-apiserver does.

use std::collections::BTreeMap;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    JSONSchemaProps, JSONSchemaPropsOrArray, JSONSchemaPropsOrBool, ValidationRule,
};
use serde_json::Value;

use crate::wire::go_number::{go_float, go_json};

/// A structural schema node.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Structural {
    pub items: Option<Box<Structural>>,
    /// Empty when the schema has none.
    pub properties: BTreeMap<String, Structural>,
    pub additional_properties: Option<AdditionalProperties>,
    pub generic: Generic,
    pub extensions: Extensions,
    /// `x-kubernetes-validations`.
    pub validations: Vec<ValidationRule>,
    pub value: ValueValidation,
}

/// `additionalProperties`: a schema (which allows), or a bare boolean.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct AdditionalProperties {
    pub schema: Option<Box<Structural>>,
    pub allows: bool,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Generic {
    pub description: String,
    pub type_: String,
    pub title: String,
    /// Numbers as Go re-encodes them (see `numbers`).
    pub default: Option<Value>,
    pub nullable: bool,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Extensions {
    pub preserve_unknown_fields: bool,
    pub embedded_resource: bool,
    pub int_or_string: bool,
    pub list_map_keys: Vec<String>,
    pub list_type: Option<String>,
    pub map_type: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct ValueValidation {
    pub format: String,
    pub maximum: Option<Value>,
    pub exclusive_maximum: bool,
    pub minimum: Option<Value>,
    pub exclusive_minimum: bool,
    pub max_length: Option<i64>,
    pub min_length: Option<i64>,
    pub pattern: String,
    pub max_items: Option<i64>,
    pub min_items: Option<i64>,
    pub unique_items: bool,
    pub multiple_of: Option<Value>,
    pub enum_: Vec<Value>,
    pub max_properties: Option<i64>,
    pub min_properties: Option<i64>,
    pub required: Vec<String>,
    pub all_of: Vec<Nested>,
    pub one_of: Vec<Nested>,
    pub any_of: Vec<Nested>,
    pub not: Option<Box<Nested>>,
}

/// A schema under `allOf`/`anyOf`/`oneOf`/`not`: value validation only, in a
/// structural schema. What it must not have is kept to check that.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Nested {
    pub value: ValueValidation,
    pub validations: Vec<ValidationRule>,
    pub items: Option<Box<Nested>>,
    pub properties: BTreeMap<String, Nested>,
    pub additional_properties: Option<Box<Nested>>,
    pub forbidden_generics: Generic,
    pub forbidden_extensions: Extensions,
}

/// The structural form of `props`, ready to publish: `None` when kube-apiserver
/// would not publish it (unsupported fields, bad types, not structural).
pub(crate) fn published(props: &JSONSchemaProps) -> Option<Structural> {
    if has_invalid_types(props) {
        return None;
    }
    let mut s = convert(props)?;
    if !valid_structural(&s) {
        return None;
    }
    unfold(&mut s);
    Some(s)
}

const TYPES: [&str; 6] = ["string", "number", "integer", "boolean", "array", "object"];

/// `validation.SchemaHasInvalidTypes`: a type outside OpenAPI v3's anywhere.
fn has_invalid_types(s: &JSONSchemaProps) -> bool {
    if s.type_
        .as_deref()
        .is_some_and(|t| !t.is_empty() && !TYPES.contains(&t))
    {
        return true;
    }
    let lists = [&s.all_of, &s.any_of, &s.one_of];
    let maps = [&s.properties, &s.pattern_properties, &s.definitions];
    match &s.items {
        Some(JSONSchemaPropsOrArray::Schema(i)) if has_invalid_types(i) => return true,
        Some(JSONSchemaPropsOrArray::Schemas(v)) if v.iter().any(has_invalid_types) => return true,
        _ => {}
    }
    lists
        .iter()
        .any(|l| l.iter().flatten().any(has_invalid_types))
        || maps
            .iter()
            .any(|m| m.iter().flat_map(|m| m.values()).any(has_invalid_types))
        || s.not.as_deref().is_some_and(has_invalid_types)
        || matches!(&s.additional_properties, Some(JSONSchemaPropsOrBool::Schema(a)) if has_invalid_types(a))
        || matches!(&s.additional_items, Some(JSONSchemaPropsOrBool::Schema(a)) if has_invalid_types(a))
}

fn nonempty(s: &Option<String>) -> bool {
    s.as_deref().is_some_and(|s| !s.is_empty())
}

/// `validateUnsupportedFields`.
fn supported(s: &JSONSchemaProps) -> bool {
    !(nonempty(&s.id)
        || nonempty(&s.schema)
        || nonempty(&s.ref_path)
        || s.pattern_properties.as_ref().is_some_and(|m| !m.is_empty())
        || s.dependencies.as_ref().is_some_and(|m| !m.is_empty())
        || s.additional_items.is_some()
        || s.definitions.as_ref().is_some_and(|m| !m.is_empty()))
}

/// The single `items` schema; `Err` for an array of schemas.
fn single_items(s: &JSONSchemaProps) -> Result<Option<&JSONSchemaProps>, ()> {
    match &s.items {
        None => Ok(None),
        Some(JSONSchemaPropsOrArray::Schema(i)) => Ok(Some(i)),
        Some(JSONSchemaPropsOrArray::Schemas(v)) if v.is_empty() => Ok(None),
        Some(JSONSchemaPropsOrArray::Schemas(_)) => Err(()),
    }
}

/// `schema.NewStructural`.
fn convert(s: &JSONSchemaProps) -> Option<Structural> {
    if !supported(s) {
        return None;
    }
    let items = match single_items(s).ok()? {
        Some(i) => Some(Box::new(convert(i)?)),
        None => None,
    };
    let mut properties = BTreeMap::new();
    for (k, v) in s.properties.iter().flatten() {
        properties.insert(k.clone(), convert(v)?);
    }
    let additional_properties = match &s.additional_properties {
        None => None,
        Some(JSONSchemaPropsOrBool::Bool(b)) => Some(AdditionalProperties {
            schema: None,
            allows: *b,
        }),
        Some(JSONSchemaPropsOrBool::Schema(a)) => Some(AdditionalProperties {
            schema: Some(Box::new(convert(a)?)),
            allows: true,
        }),
    };
    Some(Structural {
        items,
        properties,
        additional_properties,
        generic: generic(s),
        extensions: extensions(s)?,
        validations: s.x_kubernetes_validations.clone().unwrap_or_default(),
        value: value_validation(s)?,
    })
}

fn generic(s: &JSONSchemaProps) -> Generic {
    Generic {
        description: s.description.clone().unwrap_or_default(),
        type_: s.type_.clone().unwrap_or_default(),
        title: s.title.clone().unwrap_or_default(),
        default: s
            .default
            .as_ref()
            .map(|d| &d.0)
            .filter(|d| !d.is_null())
            .map(go_json),
        nullable: s.nullable.unwrap_or(false),
    }
}

fn extensions(s: &JSONSchemaProps) -> Option<Extensions> {
    // `x-kubernetes-preserve-unknown-fields: false` is refused.
    if s.x_kubernetes_preserve_unknown_fields == Some(false) {
        return None;
    }
    Some(Extensions {
        preserve_unknown_fields: s.x_kubernetes_preserve_unknown_fields == Some(true),
        embedded_resource: s.x_kubernetes_embedded_resource.unwrap_or(false),
        int_or_string: s.x_kubernetes_int_or_string.unwrap_or(false),
        list_map_keys: s.x_kubernetes_list_map_keys.clone().unwrap_or_default(),
        list_type: s.x_kubernetes_list_type.clone(),
        map_type: s.x_kubernetes_map_type.clone(),
    })
}

fn value_validation(s: &JSONSchemaProps) -> Option<ValueValidation> {
    let nested_list = |l: &Option<Vec<JSONSchemaProps>>| -> Option<Vec<Nested>> {
        l.iter().flatten().map(nested).collect()
    };
    let not = match &s.not {
        Some(n) => Some(Box::new(nested(n)?)),
        None => None,
    };
    Some(ValueValidation {
        format: s.format.clone().unwrap_or_default(),
        maximum: s.maximum.map(go_float),
        exclusive_maximum: s.exclusive_maximum.unwrap_or(false),
        minimum: s.minimum.map(go_float),
        exclusive_minimum: s.exclusive_minimum.unwrap_or(false),
        max_length: s.max_length,
        min_length: s.min_length,
        pattern: s.pattern.clone().unwrap_or_default(),
        max_items: s.max_items,
        min_items: s.min_items,
        unique_items: s.unique_items.unwrap_or(false),
        multiple_of: s.multiple_of.map(go_float),
        enum_: s.enum_.iter().flatten().map(|e| go_json(&e.0)).collect(),
        max_properties: s.max_properties,
        min_properties: s.min_properties,
        required: s.required.clone().unwrap_or_default(),
        all_of: nested_list(&s.all_of)?,
        one_of: nested_list(&s.one_of)?,
        any_of: nested_list(&s.any_of)?,
        not,
    })
}

/// `newNestedValueValidation`.
fn nested(s: &JSONSchemaProps) -> Option<Nested> {
    if !supported(s) {
        return None;
    }
    let items = match single_items(s).ok()? {
        Some(i) => Some(Box::new(nested(i)?)),
        None => None,
    };
    let mut properties = BTreeMap::new();
    for (k, v) in s.properties.iter().flatten() {
        properties.insert(k.clone(), nested(v)?);
    }
    let additional_properties = match &s.additional_properties {
        Some(JSONSchemaPropsOrBool::Schema(a)) => Some(Box::new(nested(a)?)),
        Some(JSONSchemaPropsOrBool::Bool(true)) => Some(Box::default()),
        _ => None,
    };
    Some(Nested {
        value: value_validation(s)?,
        validations: s.x_kubernetes_validations.clone().unwrap_or_default(),
        items,
        properties,
        additional_properties,
        forbidden_generics: generic(s),
        forbidden_extensions: extensions(s)?,
    })
}

/// `anyOf: [{type: integer}, {type: string}]`, nothing else.
fn int_or_string_any_of(any_of: &[Nested]) -> bool {
    let just = |n: &Nested, t: &str| {
        *n == Nested {
            forbidden_generics: Generic {
                type_: t.to_string(),
                ..Generic::default()
            },
            ..Nested::default()
        }
    };
    any_of.len() == 2 && just(&any_of[0], "integer") && just(&any_of[1], "string")
}

fn int_or_string_pair() -> Vec<Nested> {
    ["integer", "string"]
        .into_iter()
        .map(|t| Nested {
            forbidden_generics: Generic {
                type_: t.into(),
                ..Generic::default()
            },
            ..Nested::default()
        })
        .collect()
}

fn is_any_of_pattern(s: &Structural) -> bool {
    int_or_string_any_of(&s.value.any_of)
}

fn is_all_of_pattern(s: &Structural) -> bool {
    s.value
        .all_of
        .first()
        .is_some_and(|a| int_or_string_any_of(&a.value.any_of))
}

/// `Structural.Unfold`: int-or-string nodes get the `anyOf` they stand for.
fn unfold(s: &mut Structural) {
    if s.extensions.int_or_string && !is_any_of_pattern(s) && !is_all_of_pattern(s) {
        if s.value.any_of.is_empty() {
            s.value.any_of = int_or_string_pair();
        } else {
            let first = Nested {
                value: ValueValidation {
                    any_of: int_or_string_pair(),
                    ..ValueValidation::default()
                },
                ..Nested::default()
            };
            s.value.all_of.insert(0, first);
        }
    }
    if let Some(i) = &mut s.items {
        unfold(i);
    }
    for p in s.properties.values_mut() {
        unfold(p);
    }
    if let Some(a) = s
        .additional_properties
        .as_mut()
        .and_then(|a| a.schema.as_mut())
    {
        unfold(a);
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Level {
    Root,
    Item,
    Field,
}

/// `schema.ValidateStructural` without checking that patterns compile (Go's
/// RE2 syntax): invariants and completeness.
fn valid_structural(s: &Structural) -> bool {
    invariants(s, Level::Root) && complete_value(&s.value, Some(s))
}

fn invariants(s: &Structural, lvl: Level) -> bool {
    let x = &s.extensions;
    let t = s.generic.type_.as_str();
    let ok_children = s
        .items
        .as_deref()
        .is_none_or(|i| invariants(i, Level::Item))
        && s.properties.values().all(|p| invariants(p, Level::Field))
        && s.additional_properties.as_ref().is_none_or(|a| {
            lvl != Level::Root
                && a.schema
                    .as_deref()
                    .is_none_or(|a| invariants(a, Level::Field))
        });
    let check_metadata = lvl == Level::Root || x.embedded_resource;
    let typed_meta = |name: &str| {
        !check_metadata
            || s.properties
                .get(name)
                .is_none_or(|p| p.generic.type_ == "string")
    };
    ok_children
        && !(t == "array" && s.items.is_none())
        && !(x.int_or_string && (x.preserve_unknown_fields || x.embedded_resource))
        && value_invariants(&s.value, is_any_of_pattern(s), is_all_of_pattern(s))
        && if x.embedded_resource {
            t == "object"
        } else {
            !t.is_empty() || x.int_or_string || x.preserve_unknown_fields
        }
        && !(x.embedded_resource && s.additional_properties.is_some())
        && !(lvl == Level::Root && !t.is_empty() && t != "object")
        && typed_meta("kind")
        && typed_meta("apiVersion")
        && s.properties
            .get("metadata")
            .is_none_or(|m| metadata_invariants(m, check_metadata, lvl))
        && !(x.embedded_resource && !x.preserve_unknown_fields && s.properties.is_empty())
}

/// At the root, `metadata` may only restrict `name` and `generateName`.
fn metadata_invariants(m: &Structural, check_metadata: bool, lvl: Level) -> bool {
    if check_metadata && m.generic.type_ != "object" {
        return false;
    }
    if lvl != Level::Root {
        return true;
    }
    let mut m = m.clone();
    let name = m.properties.contains_key("name");
    let generate_name = m.properties.contains_key("generateName");
    let n = m.properties.len();
    if (name && generate_name && n == 2) || ((name || generate_name) && n == 1) {
        m.properties.clear();
    }
    m.generic.type_.clear();
    m.generic.default = None;
    m == Structural::default()
}

fn value_invariants(
    v: &ValueValidation,
    skip_any_of: bool,
    skip_first_all_of_any_of: bool,
) -> bool {
    (skip_any_of || v.any_of.iter().all(|n| nested_invariants(n, false)))
        && v.all_of
            .iter()
            .enumerate()
            .all(|(i, n)| nested_invariants(n, skip_first_all_of_any_of && i == 0))
        && v.one_of.iter().all(|n| nested_invariants(n, false))
        && v.not.as_deref().is_none_or(|n| nested_invariants(n, false))
}

fn nested_invariants(v: &Nested, skip_any_of: bool) -> bool {
    let g = &v.forbidden_generics;
    value_invariants(&v.value, skip_any_of, false)
        && v.items
            .as_deref()
            .is_none_or(|i| nested_invariants(i, false))
        && v.properties.values().all(|p| nested_invariants(p, false))
        && g.type_.is_empty()
        && v.additional_properties.is_none()
        && g.default.is_none()
        && g.title.is_empty()
        && g.description.is_empty()
        && !g.nullable
        && v.forbidden_extensions == Extensions::default()
        && v.validations.is_empty()
        && !v.properties.contains_key("metadata")
}

/// Every field a value validation names exists in the structural schema.
fn complete_value(v: &ValueValidation, s: Option<&Structural>) -> bool {
    v.not.as_deref().is_none_or(|n| complete_nested(n, s))
        && [&v.all_of, &v.any_of, &v.one_of]
            .iter()
            .all(|l| l.iter().all(|n| complete_nested(n, s)))
}

fn complete_nested(v: &Nested, s: Option<&Structural>) -> bool {
    let Some(s) = s else { return false };
    complete_value(&v.value, Some(s))
        && v.items
            .as_deref()
            .is_none_or(|i| complete_nested(i, s.items.as_deref()))
        && v.properties
            .iter()
            .all(|(k, p)| complete_nested(p, s.properties.get(k)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn props(v: Value) -> JSONSchemaProps {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn structural_schemas_are_published() {
        let s = published(&props(json!({
            "type": "object",
            "properties": {
                "metadata": {"type": "object", "properties": {"name": {"type": "string", "maxLength": 5}}},
                "spec": {"type": "object", "properties": {"port": {"x-kubernetes-int-or-string": true}}},
                "free": {"x-kubernetes-preserve-unknown-fields": true},
            }
        })))
        .expect("structural");
        // Unfolded: the int-or-string node gained its anyOf.
        assert!(int_or_string_any_of(
            &s.properties["spec"].properties["port"].value.any_of
        ));
        // A junctor naming an unknown field below the root passes.
        let nested = json!({"type": "object", "properties": {"a": {"type": "object", "anyOf": [{"properties": {"b": {}}}]}}});
        assert!(published(&props(nested)).is_some());
    }

    #[test]
    fn non_structural_schemas_are_not() {
        for bad in [
            json!({"type": "object", "properties": {"a": {}}}),
            json!({"type": "object", "properties": {"a": {"type": "array"}}}),
            json!({"type": "string"}),
            json!({"type": "object", "properties": {"a": {"type": "thing"}}}),
            json!({"type": "object", "properties": {"a": {"type": "string", "x-kubernetes-preserve-unknown-fields": false}}}),
            json!({"type": "object", "$ref": "#/x"}),
            json!({"type": "object", "additionalProperties": {"type": "string"}}),
            json!({"type": "object", "properties": {"metadata": {"type": "object", "description": "no"}}}),
            json!({"type": "object", "properties": {"a": {"type": "string", "anyOf": [{"type": "string"}]}}}),
            // Completeness is checked at the root only, as kube-apiserver does.
            json!({"type": "object", "anyOf": [{"properties": {"b": {}}}]}),
            json!({"type": "object", "properties": {"e": {"type": "object", "x-kubernetes-embedded-resource": true}}}),
            json!({"type": "object", "properties": {"a": {"type": "array", "items": [{"type": "string"}]}}}),
        ] {
            assert!(published(&props(bad.clone())).is_none(), "{bad}");
        }
    }

    #[test]
    fn int_or_string_with_other_any_of_goes_under_all_of() {
        let s = published(&props(json!({
            "type": "object",
            "properties": {"a": {"x-kubernetes-int-or-string": true, "anyOf": [{"pattern": "^x"}], "allOf": [{"maxLength": 3}]}}
        })))
        .expect("structural");
        let a = &s.properties["a"].value;
        assert_eq!(a.all_of.len(), 2);
        assert!(int_or_string_any_of(&a.all_of[0].value.any_of));
        assert_eq!(a.any_of[0].value.pattern, "^x");
    }
}
