//! Whether a new CustomResourceDefinition spec still works for consumers
//! bound to the old one. [`breaking_changes`] lists every difference that can
//! make the API server reject, drop or re-type what a consumer wrote against
//! the old spec. Pure: no I/O, no async.
//!
//! What is judged, per version that `old` serves:
//! - the version must still exist and be served in `new`;
//! - the structural part of its `openAPIV3Schema` (`type`, `properties`,
//!   `items`, `additionalProperties`, `required`, `enum`, `pattern` and the
//!   numeric, length and count bounds) must accept what the old one accepted.
//!
//! plus the CRD-wide `scope`.
//!
//! Decisions worth knowing:
//! - A version without a schema accepts anything. So a missing old schema has
//!   nothing that can be taken away, and a missing new schema takes nothing
//!   away: neither is reported. The same holds for `items` and
//!   `additionalProperties` given in a non-schema form on either side.
//! - Any change of `type` is breaking, widening included (`integer` to
//!   `number`, or `string` to unset): readers typed against the old schema
//!   break as well as writers. Two unset types are equal. Below a type change
//!   nothing more is reported for that field: the type change is the cause.
//! - Not judged: `allOf`/`anyOf`/`oneOf`/`not`, `nullable`, `multipleOf`,
//!   `x-kubernetes-validations` (CEL), list/map topology markers,
//!   `spec.preserveUnknownFields`, and changes to versions `old` does not serve.

mod bounds;
mod walk;

#[cfg(test)]
mod proptests;
#[cfg(test)]
mod tests;

use std::fmt;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinitionSpec, CustomResourceDefinitionVersion, JSONSchemaProps,
};

/// One breaking difference inside a schema, not yet tied to a version.
#[derive(Debug)]
struct Finding {
    field: String,
    rule: Rule,
    detail: String,
}

impl Finding {
    fn new(field: &str, rule: Rule, detail: String) -> Self {
        Finding {
            field: field.to_owned(),
            rule,
            detail,
        }
    }
}

/// One change that can break a consumer of the old spec.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Breaking {
    /// The version it breaks; empty for CRD-wide changes (scope).
    pub version: String,
    /// Path of the field inside the version's schema, like `.spec.size`,
    /// `.spec.items[*].name` (array items) or `.spec.labels[*]` (map values);
    /// a name that is not a plain identifier is quoted: `.metadata["a.b/c"]`.
    /// Empty when the change is not about one field.
    pub field: String,
    pub rule: Rule,
    /// What changed, in words, e.g. `type changed from string to integer`.
    pub detail: String,
}

/// Which kind of break was found. The order of the variants is the order
/// results are sorted in, after version and field.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Rule {
    /// A property the old schema declared is gone.
    RemovedField,
    /// A version the old spec served is missing or no longer served.
    RemovedServedVersion,
    /// A field's `type` is different.
    ChangedType,
    /// A field must now be set that could be left out before.
    NewRequiredField,
    /// `enum` allows fewer values than before.
    NarrowedEnum,
    /// `pattern` was added or changed.
    NarrowedPattern,
    /// A minimum/maximum, length, item-count or property-count bound is
    /// tighter than before.
    NarrowedBounds,
    /// `spec.scope` changed (Namespaced vs Cluster).
    ChangedScope,
}

impl Rule {
    /// The rule's name in CamelCase, fit for a Kubernetes condition reason.
    pub fn as_str(self) -> &'static str {
        match self {
            Rule::RemovedField => "RemovedField",
            Rule::RemovedServedVersion => "RemovedServedVersion",
            Rule::ChangedType => "ChangedType",
            Rule::NewRequiredField => "NewRequiredField",
            Rule::NarrowedEnum => "NarrowedEnum",
            Rule::NarrowedPattern => "NarrowedPattern",
            Rule::NarrowedBounds => "NarrowedBounds",
            Rule::ChangedScope => "ChangedScope",
        }
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// `version v1: field .spec.size: type changed from string to integer (ChangedType)`;
/// the version and field parts are left out when empty.
impl fmt::Display for Breaking {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if !self.version.is_empty() {
            write!(f, "version {}: ", self.version)?;
        }
        if !self.field.is_empty() {
            write!(f, "field {}: ", self.field)?;
        }
        write!(f, "{} ({})", self.detail, self.rule)
    }
}

/// Every change from `old` to `new` that can break a consumer of `old`,
/// sorted by version, field, rule and detail, without duplicates. Empty means
/// compatible. Never panics, whatever the input.
pub fn breaking_changes(
    old: &CustomResourceDefinitionSpec,
    new: &CustomResourceDefinitionSpec,
) -> Vec<Breaking> {
    let mut found = Vec::new();
    if old.scope != new.scope {
        found.push(Breaking {
            version: String::new(),
            field: String::new(),
            rule: Rule::ChangedScope,
            detail: format!("scope changed from {} to {}", old.scope, new.scope),
        });
    }
    for (at, old_version) in old.versions.iter().enumerate() {
        if !old_version.served {
            continue;
        }
        let name = &old_version.name;
        // Names are unique in any spec kube-apiserver accepts. Should they
        // repeat, the n-th version of a name is paired with the n-th of the
        // same name in `new`, so a spec is always compatible with itself.
        let nth = old.versions[..at]
            .iter()
            .filter(|v| v.name == *name)
            .count();
        let removed = |detail: &str| Breaking {
            version: name.clone(),
            field: String::new(),
            rule: Rule::RemovedServedVersion,
            detail: detail.to_owned(),
        };
        match new.versions.iter().filter(|v| v.name == *name).nth(nth) {
            None => found.push(removed("version removed")),
            Some(v) if !v.served => found.push(removed("version no longer served")),
            Some(new_version) => {
                if let (Some(o), Some(n)) = (schema_of(old_version), schema_of(new_version)) {
                    found.extend(walk::compare(o, n).into_iter().map(|f| Breaking {
                        version: name.clone(),
                        field: f.field,
                        rule: f.rule,
                        detail: f.detail,
                    }));
                }
            }
        }
    }
    found.sort_by(|a, b| {
        (&a.version, &a.field, a.rule, &a.detail).cmp(&(&b.version, &b.field, b.rule, &b.detail))
    });
    found.dedup();
    found
}

fn schema_of(version: &CustomResourceDefinitionVersion) -> Option<&JSONSchemaProps> {
    version.schema.as_ref()?.open_api_v3_schema.as_ref()
}
