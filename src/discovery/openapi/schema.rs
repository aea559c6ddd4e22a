//! A CRD version's kind and list schemas as kube-apiserver publishes them
//! (`apiextensions-apiserver/pkg/controller/openapi/builder`): the structural
//! schema (made v2-compatible for OpenAPI v2), plus `apiVersion`, `kind` and
//! `metadata`, the same for every embedded resource, and the
//! `x-kubernetes-group-version-kind` and `x-kubernetes-selectable-fields`
//! extensions that kubectl looks kinds up by.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinitionVersion, ValidationRule,
};
use serde_json::{Map, Value, json};

use super::data;
use super::structural::{self, Extensions, Nested, Structural, ValueValidation};
use crate::discovery::served::Crd;

/// Which OpenAPI document a schema is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Flavor {
    V2,
    V3,
}

impl Flavor {
    fn data(self) -> &'static data::Data {
        match self {
            Flavor::V2 => data::v2(),
            Flavor::V3 => data::v3(),
        }
    }

    /// `#/definitions/<name>` or `#/components/schemas/<name>`.
    pub fn reference(self, name: &str) -> String {
        let prefix = match self {
            Flavor::V2 => "#/definitions/",
            Flavor::V3 => "#/components/schemas/",
        };
        format!("{prefix}{}", name.replace('~', "~0").replace('/', "~1"))
    }
}

pub(crate) const OBJECT_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";
const LIST_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta";
const EMBEDDED_API_VERSION: &str = "apiVersion defines the versioned schema of this representation of an object. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#resources";
const EMBEDDED_KIND: &str = "kind is a string value representing the type of this object. In CamelCase. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds";

/// The definition name of `<group>/<version>.<kind>`: the group reversed
/// (`util.ToRESTFriendlyName`), e.g. `dev.bindery.testing.v1.Gizmo`.
pub(crate) fn definition_name(group: &str, version: &str, kind: &str) -> String {
    let first = if group.contains('.') {
        group.split('.').rev().collect::<Vec<_>>().join(".")
    } else {
        group.to_string()
    };
    format!("{first}.{version}.{kind}")
}

/// The order Go writes a schema's fields in; extensions (`x-…`) come after,
/// sorted, and anything else last.
const FIELD_ORDER: [&str; 38] = [
    "id",
    "description",
    "type",
    "nullable",
    "format",
    "title",
    "default",
    "maximum",
    "exclusiveMaximum",
    "minimum",
    "exclusiveMinimum",
    "maxLength",
    "minLength",
    "pattern",
    "maxItems",
    "minItems",
    "uniqueItems",
    "multipleOf",
    "enum",
    "maxProperties",
    "minProperties",
    "required",
    "items",
    "allOf",
    "oneOf",
    "anyOf",
    "not",
    "properties",
    "additionalProperties",
    "patternProperties",
    "dependencies",
    "additionalItems",
    "definitions",
    "$ref",
    "discriminator",
    "readOnly",
    "externalDocs",
    "example",
];

/// Reorders a schema object's fields as Go writes them (cosmetic: clients
/// compare values, but the bytes are hashed).
fn ordered(mut m: Map<String, Value>) -> Map<String, Value> {
    let mut out = Map::with_capacity(m.len());
    for k in FIELD_ORDER {
        if let Some(v) = m.shift_remove(k) {
            out.insert(k.to_string(), v);
        }
    }
    let mut ext: Vec<String> = m.keys().filter(|k| k.starts_with("x-")).cloned().collect();
    ext.sort();
    for k in ext {
        if let Some(v) = m.shift_remove(&k) {
            out.insert(k, v);
        }
    }
    out.extend(m);
    out
}

/// Sets a property (creating `properties`), keeping properties sorted as Go's
/// map encoding does.
fn set_property(schema: &mut Map<String, Value>, name: &str, value: Value) {
    let props = schema
        .entry("properties")
        .or_insert_with(|| Value::Object(Map::new()));
    if let Value::Object(p) = props {
        p.insert(name.to_string(), value);
        p.sort_keys();
    }
}

fn value_fields(v: &ValueValidation, m: &mut Map<String, Value>) {
    let s = |m: &mut Map<String, Value>, k: &str, v: &str| {
        if !v.is_empty() {
            m.insert(k.into(), v.into());
        }
    };
    let n = |m: &mut Map<String, Value>, k: &str, v: &Option<i64>| {
        if let Some(v) = v {
            m.insert(k.into(), (*v).into());
        }
    };
    let f = |m: &mut Map<String, Value>, k: &str, v: &Option<Value>| {
        if let Some(v) = v {
            m.insert(k.into(), v.clone());
        }
    };
    let b = |m: &mut Map<String, Value>, k: &str, v: bool| {
        if v {
            m.insert(k.into(), true.into());
        }
    };
    s(m, "format", &v.format);
    f(m, "maximum", &v.maximum);
    b(m, "exclusiveMaximum", v.exclusive_maximum);
    f(m, "minimum", &v.minimum);
    b(m, "exclusiveMinimum", v.exclusive_minimum);
    n(m, "maxLength", &v.max_length);
    n(m, "minLength", &v.min_length);
    s(m, "pattern", &v.pattern);
    n(m, "maxItems", &v.max_items);
    n(m, "minItems", &v.min_items);
    b(m, "uniqueItems", v.unique_items);
    f(m, "multipleOf", &v.multiple_of);
    if !v.enum_.is_empty() {
        m.insert("enum".into(), Value::Array(v.enum_.clone()));
    }
    n(m, "maxProperties", &v.max_properties);
    n(m, "minProperties", &v.min_properties);
    if !v.required.is_empty() {
        m.insert("required".into(), json!(v.required));
    }
    for (k, list) in [
        ("allOf", &v.all_of),
        ("oneOf", &v.one_of),
        ("anyOf", &v.any_of),
    ] {
        if !list.is_empty() {
            m.insert(
                k.into(),
                Value::Array(list.iter().map(render_nested).collect()),
            );
        }
    }
    if let Some(not) = &v.not {
        m.insert("not".into(), render_nested(not));
    }
}

fn generic_fields(g: &structural::Generic, m: &mut Map<String, Value>) {
    if !g.type_.is_empty() {
        m.insert("type".into(), g.type_.as_str().into());
    }
    if g.nullable {
        m.insert("nullable".into(), true.into());
    }
    if !g.description.is_empty() {
        m.insert("description".into(), g.description.as_str().into());
    }
    if !g.title.is_empty() {
        m.insert("title".into(), g.title.as_str().into());
    }
    if let Some(d) = &g.default {
        m.insert("default".into(), d.clone());
    }
}

fn extension_fields(x: &Extensions, m: &mut Map<String, Value>) {
    if x.preserve_unknown_fields {
        m.insert("x-kubernetes-preserve-unknown-fields".into(), true.into());
    }
    if x.embedded_resource {
        m.insert("x-kubernetes-embedded-resource".into(), true.into());
    }
    if x.int_or_string {
        m.insert("x-kubernetes-int-or-string".into(), true.into());
    }
    if !x.list_map_keys.is_empty() {
        m.insert("x-kubernetes-list-map-keys".into(), json!(x.list_map_keys));
    }
    if let Some(t) = &x.list_type {
        m.insert("x-kubernetes-list-type".into(), t.as_str().into());
    }
    if let Some(t) = &x.map_type {
        m.insert("x-kubernetes-map-type".into(), t.as_str().into());
    }
}

/// `x-kubernetes-validations`, each rule as Go's `ValidationRule` encodes.
fn validation_fields(rules: &[ValidationRule], m: &mut Map<String, Value>) {
    if rules.is_empty() {
        return;
    }
    let rules: Vec<Value> = rules
        .iter()
        .map(|r| {
            let mut o = Map::new();
            o.insert("rule".into(), r.rule.as_str().into());
            for (k, v) in [
                ("message", &r.message),
                ("messageExpression", &r.message_expression),
            ] {
                if let Some(v) = v.as_deref().filter(|v| !v.is_empty()) {
                    o.insert(k.into(), v.into());
                }
            }
            if let Some(reason) = &r.reason {
                o.insert("reason".into(), reason.as_str().into());
            }
            if let Some(p) = r.field_path.as_deref().filter(|p| !p.is_empty()) {
                o.insert("fieldPath".into(), p.into());
            }
            if let Some(b) = r.optional_old_self {
                o.insert("optionalOldSelf".into(), b.into());
            }
            Value::Object(o)
        })
        .collect();
    m.insert("x-kubernetes-validations".into(), Value::Array(rules));
}

/// `Structural.ToKubeOpenAPI`.
fn render(s: &Structural) -> Value {
    let mut m = Map::new();
    if let Some(i) = &s.items {
        m.insert("items".into(), render(i));
    }
    if !s.properties.is_empty() {
        let p: Map<String, Value> = s
            .properties
            .iter()
            .map(|(k, v)| (k.clone(), render(v)))
            .collect();
        m.insert("properties".into(), Value::Object(p));
    }
    if let Some(a) = &s.additional_properties {
        let v = match &a.schema {
            Some(schema) => render(schema),
            None => a.allows.into(),
        };
        m.insert("additionalProperties".into(), v);
    }
    generic_fields(&s.generic, &mut m);
    extension_fields(&s.extensions, &mut m);
    value_fields(&s.value, &mut m);
    validation_fields(&s.validations, &mut m);
    Value::Object(ordered(m))
}

/// `NestedValueValidation.toKubeOpenAPI` (its `additionalProperties` is not
/// published).
fn render_nested(n: &Nested) -> Value {
    let mut m = Map::new();
    value_fields(&n.value, &mut m);
    validation_fields(&n.validations, &mut m);
    if let Some(i) = &n.items {
        m.insert("items".into(), render_nested(i));
    }
    if !n.properties.is_empty() {
        let p: Map<String, Value> = n
            .properties
            .iter()
            .map(|(k, v)| (k.clone(), render_nested(v)))
            .collect();
        m.insert("properties".into(), Value::Object(p));
    }
    generic_fields(&n.forbidden_generics, &mut m);
    extension_fields(&n.forbidden_extensions, &mut m);
    Value::Object(ordered(m))
}

/// `openapiv2.ToStructuralOpenAPIV2`: drops what OpenAPI v2 cannot say
/// (junctors, nullable types, the shape of preserved or item-less nodes).
fn to_v2(s: &mut Structural) {
    s.value.all_of.clear();
    s.value.one_of.clear();
    s.value.any_of.clear();
    s.value.not = None;
    if s.generic.nullable {
        s.generic.type_.clear();
        s.generic.nullable = false;
        s.items = None;
        s.properties.clear();
    }
    if s.extensions.preserve_unknown_fields {
        s.items = None;
        s.properties.clear();
    }
    if s.items.is_none() && s.generic.type_ == "array" {
        s.generic.type_.clear();
    }
    if s.extensions.preserve_unknown_fields && s.generic.type_ == "object" {
        s.generic.type_.clear();
    }
    // A nullable field cannot be required in v2 (checked before the fields
    // themselves are converted).
    let nullable: Vec<String> = s
        .properties
        .iter()
        .filter(|(_, p)| p.generic.nullable)
        .map(|(k, _)| k.clone())
        .collect();
    s.value.required.retain(|r| !nullable.contains(r));
    if s.additional_properties
        .as_ref()
        .and_then(|a| a.schema.as_ref())
        .is_some_and(|a| a.generic.nullable)
    {
        s.value.required.clear();
    }
    if let Some(i) = &mut s.items {
        to_v2(i);
    }
    for p in s.properties.values_mut() {
        to_v2(p);
    }
    if let Some(a) = s
        .additional_properties
        .as_mut()
        .and_then(|a| a.schema.as_mut())
    {
        to_v2(a);
    }
}

fn object_meta_property(flavor: Flavor) -> Value {
    json!({"description": flavor.data().object_meta_description(), "$ref": flavor.reference(OBJECT_META)})
}

fn ext_true(m: &Map<String, Value>, key: &str) -> bool {
    m.get(key) == Some(&Value::Bool(true))
}

/// `addEmbeddedProperties`: an embedded resource gets `apiVersion`, `kind`
/// and `metadata`, and requires the first two.
fn add_embedded_properties(s: &mut Map<String, Value>, flavor: Flavor) {
    if let Some(Value::Object(props)) = s.get_mut("properties") {
        for p in props.values_mut() {
            if let Value::Object(p) = p {
                add_embedded_properties(p, flavor);
            }
        }
    }
    for key in ["items", "additionalProperties"] {
        if let Some(Value::Object(child)) = s.get_mut(key) {
            add_embedded_properties(child, flavor);
        }
    }
    if flavor == Flavor::V2 && ext_true(s, "x-kubernetes-preserve-unknown-fields") {
        return;
    }
    if !ext_true(s, "x-kubernetes-embedded-resource") {
        return;
    }
    let with_description = |mut v: Value, d: &str| {
        if let Value::Object(m) = &mut v {
            m.insert("description".into(), d.into());
            *m = ordered(std::mem::take(m));
        }
        v
    };
    let data = flavor.data();
    set_property(
        s,
        "apiVersion",
        with_description(data.type_meta("apiVersion"), EMBEDDED_API_VERSION),
    );
    set_property(
        s,
        "kind",
        with_description(data.type_meta("kind"), EMBEDDED_KIND),
    );
    set_property(s, "metadata", object_meta_property(flavor));
    let required = s
        .entry("required")
        .or_insert_with(|| Value::Array(Vec::new()));
    if let Value::Array(r) = required {
        for field in ["kind", "apiVersion"] {
            if !r.iter().any(|x| x == field) {
                r.push(field.into());
            }
        }
    }
    *s = ordered(std::mem::take(s));
}

fn gvk_extension(group: &str, version: &str, kind: &str) -> Value {
    json!([{"group": group, "kind": kind, "version": version}])
}

fn selectable_fields(version: &CustomResourceDefinitionVersion) -> Option<Value> {
    let fields = version
        .selectable_fields
        .as_deref()
        .filter(|f| !f.is_empty())?;
    Some(Value::Array(
        fields
            .iter()
            .map(|f| json!({"fieldPath": f.json_path.strip_prefix('.').unwrap_or(&f.json_path)}))
            .collect(),
    ))
}

/// The published schema of `crd`'s kind in `version`.
pub(crate) fn kind_schema(
    crd: &Crd,
    version: &CustomResourceDefinitionVersion,
    flavor: Flavor,
) -> Value {
    let structural = version
        .schema
        .as_ref()
        .and_then(|s| s.open_api_v3_schema.as_ref())
        .and_then(structural::published);
    let crd_preserves = crd.spec.preserve_unknown_fields == Some(true);
    let mut m = match structural {
        Some(s)
            if flavor == Flavor::V2 && (s.extensions.preserve_unknown_fields || crd_preserves) =>
        {
            None
        }
        Some(mut s) => {
            if flavor == Flavor::V2 {
                to_v2(&mut s);
            }
            match render(&s) {
                Value::Object(mut m) => {
                    set_property(&mut m, "metadata", object_meta_property(flavor));
                    set_property(&mut m, "apiVersion", flavor.data().type_meta("apiVersion"));
                    set_property(&mut m, "kind", flavor.data().type_meta("kind"));
                    add_embedded_properties(&mut m, flavor);
                    Some(m)
                }
                _ => None,
            }
        }
        None => None,
    }
    .unwrap_or_else(|| {
        let mut m = Map::new();
        m.insert("type".into(), "object".into());
        m
    });
    m.insert(
        "x-kubernetes-group-version-kind".into(),
        gvk_extension(crd.group, &version.name, crd.kind),
    );
    if let Some(f) = selectable_fields(version) {
        m.insert("x-kubernetes-selectable-fields".into(), f);
    }
    finish(Value::Object(ordered(m)), flavor)
}

/// The published schema of `crd`'s list kind in `version`.
pub(crate) fn list_schema(
    crd: &Crd,
    version: &CustomResourceDefinitionVersion,
    flavor: Flavor,
) -> Value {
    let data = flavor.data();
    let item = definition_name(crd.group, &version.name, crd.kind);
    let mut m = Map::new();
    m.insert(
        "description".into(),
        format!("{} is a list of {}", crd.list_kind, crd.kind).into(),
    );
    m.insert("type".into(), "object".into());
    m.insert("required".into(), json!(["items"]));
    set_property(&mut m, "apiVersion", data.type_meta("apiVersion"));
    set_property(
        &mut m,
        "items",
        json!({
            "description": format!("List of {}. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md", crd.plural),
            "type": "array",
            "items": {"$ref": flavor.reference(&item)},
        }),
    );
    set_property(&mut m, "kind", data.type_meta("kind"));
    set_property(
        &mut m,
        "metadata",
        json!({"description": data.list_meta_description(), "$ref": flavor.reference(LIST_META)}),
    );
    m.insert(
        "x-kubernetes-group-version-kind".into(),
        gvk_extension(crd.group, &version.name, &crd.list_kind),
    );
    if let Some(f) = selectable_fields(version) {
        m.insert("x-kubernetes-selectable-fields".into(), f);
    }
    finish(Value::Object(ordered(m)), flavor)
}

/// v2: defaults are pruned from CRD definitions (the static spec has none).
/// v3: a `$ref` with siblings is wrapped in `allOf` (`builder3/util.WrapRefs`).
fn finish(mut v: Value, flavor: Flavor) -> Value {
    match flavor {
        Flavor::V2 => walk(&mut v, &mut |m| {
            m.shift_remove("default");
        }),
        Flavor::V3 => walk(&mut v, &mut |m| {
            if m.len() > 1
                && let Some(r) = m.shift_remove("$ref")
            {
                m.insert("allOf".into(), json!([{"$ref": r}]));
                *m = ordered(std::mem::take(m));
            }
        }),
    }
    v
}

/// Calls `f` on every schema object in `v` (itself and all subschemas).
pub(crate) fn walk(v: &mut Value, f: &mut dyn FnMut(&mut Map<String, Value>)) {
    let Value::Object(m) = v else { return };
    f(m);
    for key in [
        "properties",
        "patternProperties",
        "definitions",
        "dependencies",
    ] {
        if let Some(Value::Object(children)) = m.get_mut(key) {
            for c in children.values_mut() {
                walk(c, f);
            }
        }
    }
    for key in ["allOf", "anyOf", "oneOf", "items"] {
        match m.get_mut(key) {
            Some(Value::Array(children)) => {
                for c in children {
                    walk(c, f);
                }
            }
            Some(c @ Value::Object(_)) => walk(c, f),
            _ => {}
        }
    }
    for key in ["not", "additionalProperties", "additionalItems"] {
        if let Some(c @ Value::Object(_)) = m.get_mut(key) {
            walk(c, f);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::discovery::served::Served;
    use crate::discovery::testdata::{spec, version};

    #[test]
    fn definition_names_reverse_the_group() {
        assert_eq!(
            definition_name("testing.bindery.dev", "v1", "Gizmo"),
            "dev.bindery.testing.v1.Gizmo"
        );
        assert_eq!(definition_name("nodots", "v1", "X"), "nodots.v1.X");
        assert_eq!(
            Flavor::V3.reference("a/b~c"),
            "#/components/schemas/a~1b~0c"
        );
    }

    #[test]
    fn schemaless_versions_publish_a_bare_object() {
        let specs = [spec(
            "a.example.com",
            "Thing",
            "Namespaced",
            vec![version("v1", true)],
        )];
        let served = Served::new(&specs);
        let crd = &served.crds[0];
        for flavor in [Flavor::V2, Flavor::V3] {
            let s = kind_schema(crd, crd.versions[0], flavor);
            assert_eq!(
                s,
                json!({"type": "object", "x-kubernetes-group-version-kind": [{"group": "a.example.com", "kind": "Thing", "version": "v1"}]})
            );
        }
    }

    #[test]
    fn v2_drops_nullable_fields_from_required() {
        let mut s: Structural = Structural::default();
        s.generic.type_ = "object".into();
        s.value.required = vec!["a".into(), "b".into()];
        let mut a = Structural::default();
        a.generic.type_ = "string".into();
        a.generic.nullable = true;
        s.properties.insert("a".into(), a);
        to_v2(&mut s);
        assert_eq!(s.value.required, ["b"]);
        assert_eq!(s.properties["a"].generic, structural::Generic::default());
    }
}
