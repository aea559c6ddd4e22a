//! Walks an old and a new `openAPIV3Schema` side by side, field by field, and
//! reports what the new one no longer accepts. Iterative, so no schema depth
//! can overflow the stack.

use std::collections::BTreeSet;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    JSON, JSONSchemaProps, JSONSchemaPropsOrArray, JSONSchemaPropsOrBool,
};

use super::{Finding, Rule, bounds};

/// Everything `new` breaks for data valid under `old`, in no particular order.
pub(super) fn compare(old: &JSONSchemaProps, new: &JSONSchemaProps) -> Vec<Finding> {
    let mut out = Vec::new();
    let mut pending = vec![(old, new, String::new())];
    while let Some((old, new, path)) = pending.pop() {
        if type_name(old) != type_name(new) {
            let detail = format!(
                "type changed from {} to {}",
                describe_type(old),
                describe_type(new)
            );
            out.push(Finding::new(&path, Rule::ChangedType, detail));
            continue;
        }
        out.extend(narrowed_enum(old, new, &path));
        out.extend(narrowed_pattern(old, new, &path));
        bounds::narrowed(old, new, &path, &mut out);
        newly_required(old, new, &path, &mut out);

        for (name, old_child) in old.properties.iter().flatten() {
            let child_path = child(&path, name);
            match new.properties.as_ref().and_then(|p| p.get(name)) {
                Some(new_child) => pending.push((old_child, new_child, child_path)),
                None => out.push(Finding::new(
                    &child_path,
                    Rule::RemovedField,
                    "field removed".into(),
                )),
            }
        }
        if let (Some(JSONSchemaPropsOrArray::Schema(o)), Some(JSONSchemaPropsOrArray::Schema(n))) =
            (&old.items, &new.items)
        {
            pending.push((o, n, format!("{path}[*]")));
        }
        match (&old.additional_properties, &new.additional_properties) {
            (Some(JSONSchemaPropsOrBool::Schema(o)), Some(JSONSchemaPropsOrBool::Schema(n))) => {
                pending.push((o, n, format!("{path}[*]")));
            }
            (Some(old_values), new_values)
                if allows(Some(old_values)) && !allows_values(new, new_values) =>
            {
                out.push(Finding::new(
                    &format!("{path}[*]"),
                    Rule::RemovedField,
                    "map entries are no longer accepted".into(),
                ));
            }
            _ => {}
        }
    }
    out
}

/// The declared type; an empty string counts as unset.
fn type_name(schema: &JSONSchemaProps) -> Option<&str> {
    schema.type_.as_deref().filter(|t| !t.is_empty())
}

fn describe_type(schema: &JSONSchemaProps) -> &str {
    match type_name(schema) {
        Some(t) => t,
        None if schema.x_kubernetes_int_or_string == Some(true) => "int-or-string",
        None => "unset",
    }
}

/// A path segment for property `name`: `.name`, or `["name"]` when the name
/// would be ambiguous after a dot.
fn child(path: &str, name: &str) -> String {
    let plain = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '$');
    if plain {
        format!("{path}.{name}")
    } else {
        format!("{path}[{name:?}]")
    }
}

fn narrowed_enum(old: &JSONSchemaProps, new: &JSONSchemaProps, path: &str) -> Option<Finding> {
    let old_values = old.enum_.as_deref().unwrap_or_default();
    let new_values = new.enum_.as_deref().unwrap_or_default();
    if new_values.is_empty() {
        return None;
    }
    let detail = if old_values.is_empty() {
        format!(
            "enum {} added where any value was allowed",
            list(new_values.iter())
        )
    } else {
        let mut gone = old_values
            .iter()
            .filter(|v| !new_values.contains(v))
            .peekable();
        gone.peek()?;
        format!("enum no longer allows {}", list(gone))
    };
    Some(Finding::new(path, Rule::NarrowedEnum, detail))
}

fn list<'a>(values: impl Iterator<Item = &'a JSON>) -> String {
    let shown: Vec<String> = values.map(|v| v.0.to_string()).collect();
    format!("[{}]", shown.join(", "))
}

fn narrowed_pattern(old: &JSONSchemaProps, new: &JSONSchemaProps, path: &str) -> Option<Finding> {
    let old_pattern = old.pattern.as_deref().filter(|p| !p.is_empty());
    let new_pattern = new.pattern.as_deref().filter(|p| !p.is_empty())?;
    let detail = match old_pattern {
        None => format!("pattern `{new_pattern}` added"),
        Some(o) if o != new_pattern => format!("pattern changed from `{o}` to `{new_pattern}`"),
        Some(_) => return None,
    };
    Some(Finding::new(path, Rule::NarrowedPattern, detail))
}

/// Names `new` requires that `old` did not, reported at the field's own path.
fn newly_required(
    old: &JSONSchemaProps,
    new: &JSONSchemaProps,
    path: &str,
    out: &mut Vec<Finding>,
) {
    let was: BTreeSet<&str> = old.required.iter().flatten().map(String::as_str).collect();
    let now: BTreeSet<&str> = new.required.iter().flatten().map(String::as_str).collect();
    for name in now.difference(&was) {
        out.push(Finding::new(
            &child(path, name),
            Rule::NewRequiredField,
            "field is now required".into(),
        ));
    }
}

/// Whether an `additionalProperties` value lets map entries through.
fn allows(values: Option<&JSONSchemaPropsOrBool>) -> bool {
    matches!(
        values,
        Some(JSONSchemaPropsOrBool::Schema(_) | JSONSchemaPropsOrBool::Bool(true))
    )
}

/// Whether `schema` keeps entries not named in `properties`, either as map
/// values or as preserved unknown fields.
fn allows_values(schema: &JSONSchemaProps, values: &Option<JSONSchemaPropsOrBool>) -> bool {
    allows(values.as_ref()) || schema.x_kubernetes_preserve_unknown_fields == Some(true)
}
