//! Request options validated as kube-apiserver validates them, before it
//! reads a body or negotiates: `ListOptions` (after its watch-list
//! defaulting), and the options of creates, updates, patches and deletes
//! (`k8s.io/apimachinery` v0.34 `pkg/apis/meta/internalversion/validation`
//! and `pkg/apis/meta/v1/validation`), refused with its 422, word for word.
//! Pure.

use super::body::PatchType;
use super::go_quote::go_quote;
use super::query::{ListOptions, WriteOptions};
use crate::status::ApiError;
use serde_json::{Value, json};

/// One field error, as `k8s.io/apimachinery`'s `field.Error` prints it.
struct FieldError {
    field: &'static str,
    kind: Kind,
    detail: String,
}

enum Kind {
    Forbidden,
    Required,
    TooLong,
    /// `Invalid value: <value>`, the value already printed.
    Invalid(String),
    /// `Unsupported value: <value>`, the value already printed.
    NotSupported(String),
}

impl FieldError {
    fn forbidden(field: &'static str, detail: impl Into<String>) -> Self {
        Self {
            field,
            kind: Kind::Forbidden,
            detail: detail.into(),
        }
    }

    fn not_supported(field: &'static str, value: String, supported: &[&str]) -> Self {
        let supported: Vec<String> = supported.iter().map(|s| go_quote(s)).collect();
        Self {
            field,
            kind: Kind::NotSupported(value),
            detail: format!("supported values: {}", supported.join(", ")),
        }
    }

    /// `ErrorBody`: the type, the value where it has one, the detail.
    fn body(&self) -> String {
        let head = match &self.kind {
            Kind::Forbidden => "Forbidden".to_string(),
            Kind::Required => "Required value".to_string(),
            Kind::TooLong => "Too long".to_string(),
            Kind::Invalid(value) => format!("Invalid value: {value}"),
            Kind::NotSupported(value) => format!("Unsupported value: {value}"),
        };
        if self.detail.is_empty() {
            head
        } else {
            format!("{head}: {}", self.detail)
        }
    }

    fn reason(&self) -> &'static str {
        match self.kind {
            Kind::Forbidden => "FieldValueForbidden",
            Kind::Required => "FieldValueRequired",
            Kind::TooLong => "FieldValueTooLong",
            Kind::Invalid(_) => "FieldValueInvalid",
            Kind::NotSupported(_) => "FieldValueNotSupported",
        }
    }
}

/// A value printed as Go's JSON encoder prints it (how `field.Error` prints
/// named string types and slices).
fn json_text(value: &Value) -> String {
    serde_json::to_string(value).expect("a JSON value serializes")
}

/// kube-apiserver's `NewInvalid(GroupKind{"meta.k8s.io", kind}, "", errors)`.
fn invalid(kind: &str, errors: Vec<FieldError>) -> Result<(), ApiError> {
    if errors.is_empty() {
        return Ok(());
    }
    let texts: Vec<String> = errors
        .iter()
        .map(|e| format!("{}: {}", e.field, e.body()))
        .collect();
    let aggregate = match texts.as_slice() {
        [one] => one.clone(),
        many => format!("[{}]", many.join(", ")),
    };
    let causes: Vec<Value> = errors
        .iter()
        .map(|e| json!({"reason": e.reason(), "message": e.body(), "field": e.field}))
        .collect();
    Err(ApiError::invalid_with(
        format!("{kind}.meta.k8s.io \"\" is invalid: {aggregate}"),
        json!({"group": "meta.k8s.io", "kind": kind, "causes": causes}),
    ))
}

/// A field selector's labels converted as kube-apiserver converts a custom
/// resource's (`ConvertFieldLabel`): `metadata.name`, `metadata.namespace`
/// and the CRD's selectable fields (`selectable`, without their leading
/// dot); the first other is its 400.
pub fn field_labels(selector: &str, selectable: &[String]) -> Result<(), ApiError> {
    let Ok(fields) = super::selector::parse_field_selector(selector) else {
        return Ok(());
    };
    match fields.terms().iter().find(|term| {
        term.key != "metadata.name"
            && term.key != "metadata.namespace"
            && !selectable.contains(&term.key)
    }) {
        Some(term) => Err(ApiError::bad_request(format!(
            "field label not supported: {}",
            term.key
        ))),
        None => Ok(()),
    }
}

/// `SetListOptionsDefaults` (watch-list on, as in v1.34) then
/// `ValidateListOptions`; `watch` is the `watch` parameter's (the `/watch/`
/// path prefix does not count here, as it does not in kube-apiserver).
pub fn list_options(options: &ListOptions) -> Result<(), ApiError> {
    let mut send_initial_events = options.send_initial_events;
    let mut matching = options.resource_version_match.clone();
    if send_initial_events.is_none()
        && matching.is_empty()
        && options.watch
        && matches!(options.resource_version.as_str(), "" | "0")
    {
        send_initial_events = Some(true);
        matching = "NotOlderThan".into();
    }
    let mut errors = Vec::new();
    let match_value = || json_text(&Value::String(matching.clone()));
    if options.watch {
        if send_initial_events.is_some() && matching != "NotOlderThan" {
            errors.push(FieldError::forbidden(
                "resourceVersionMatch",
                "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
            ));
        }
        if !matching.is_empty() {
            if send_initial_events.is_none() {
                errors.push(FieldError::forbidden(
                    "resourceVersionMatch",
                    "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided",
                ));
            }
            if matching != "NotOlderThan" {
                errors.push(FieldError::not_supported(
                    "resourceVersionMatch",
                    match_value(),
                    &["NotOlderThan"],
                ));
            }
            if !options.continue_token.is_empty() {
                errors.push(FieldError::forbidden(
                    "resourceVersionMatch",
                    "resourceVersionMatch is forbidden when continue is provided",
                ));
            }
        }
        return invalid("ListOptions", errors);
    }
    if !matching.is_empty() {
        if options.resource_version.is_empty() {
            errors.push(FieldError::forbidden(
                "resourceVersionMatch",
                "resourceVersionMatch is forbidden unless resourceVersion is provided",
            ));
        }
        if !options.continue_token.is_empty() {
            errors.push(FieldError::forbidden(
                "resourceVersionMatch",
                "resourceVersionMatch is forbidden when continue is provided",
            ));
        }
        if matching != "Exact" && matching != "NotOlderThan" {
            errors.push(FieldError::not_supported(
                "resourceVersionMatch",
                match_value(),
                &["Exact", "NotOlderThan", ""],
            ));
        }
        if matching == "Exact" && options.resource_version == "0" {
            errors.push(FieldError::forbidden(
                "resourceVersionMatch",
                "resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"",
            ));
        }
    }
    if send_initial_events.is_some() {
        errors.push(FieldError::forbidden(
            "sendInitialEvents",
            "sendInitialEvents is forbidden for list",
        ));
    }
    invalid("ListOptions", errors)
}

/// What a write's options are for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Write {
    Create,
    Update,
    Patch(PatchType),
}

/// `ValidateCreateOptions`, `ValidateUpdateOptions` or
/// `ValidatePatchOptions`.
pub fn write_options(options: &WriteOptions, write: Write) -> Result<(), ApiError> {
    let mut errors = Vec::new();
    let kind = match write {
        Write::Create => "CreateOptions",
        Write::Update => "UpdateOptions",
        Write::Patch(patch_type) => {
            if patch_type == PatchType::Apply {
                if options.field_manager.is_empty() {
                    errors.push(FieldError {
                        field: "fieldManager",
                        kind: Kind::Required,
                        detail: "is required for apply patch".into(),
                    });
                }
            } else if options.force.is_some() {
                errors.push(FieldError::forbidden(
                    "force",
                    "may not be specified for non-apply patch",
                ));
            }
            "PatchOptions"
        }
    };
    field_manager(&options.field_manager, &mut errors);
    dry_run(&options.dry_run, &mut errors);
    if !matches!(
        options.field_validation.as_str(),
        "" | "Ignore" | "Warn" | "Strict"
    ) {
        errors.push(FieldError::not_supported(
            "fieldValidation",
            go_quote(&options.field_validation),
            &["", "Ignore", "Strict", "Warn"],
        ));
    }
    invalid(kind, errors)
}

/// `ValidateDeleteOptions`, of the options a delete sends (its body's or
/// its query's, as JSON).
pub fn delete_options(options: &Value) -> Result<(), ApiError> {
    let mut errors = Vec::new();
    let policy = options.get("propagationPolicy").filter(|p| !p.is_null());
    let orphan = options.get("orphanDependents").filter(|o| !o.is_null());
    if let (Some(policy), Some(_)) = (policy, orphan) {
        errors.push(FieldError {
            field: "propagationPolicy",
            kind: Kind::Invalid(json_text(policy)),
            detail: "orphanDependents and deletionPropagation cannot be both set".into(),
        });
    }
    if let Some(policy) = policy
        && !matches!(
            policy.as_str(),
            Some("Foreground" | "Background" | "Orphan")
        )
    {
        errors.push(FieldError::not_supported(
            "propagationPolicy",
            json_text(policy),
            &["Foreground", "Background", "Orphan", "nil"],
        ));
    }
    let dry: Vec<String> = options
        .get("dryRun")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|v| v.as_str().map(str::to_string))
        .collect();
    dry_run(&dry, &mut errors);
    invalid("DeleteOptions", errors)
}

fn field_manager(manager: &str, errors: &mut Vec<FieldError>) {
    if manager.len() > 128 {
        errors.push(FieldError {
            field: "fieldManager",
            kind: Kind::TooLong,
            detail: "may not be more than 128 bytes".into(),
        });
    }
    for (i, c) in manager.char_indices() {
        if !is_print(c) {
            errors.push(FieldError {
                field: "fieldManager",
                kind: Kind::Invalid(go_quote(manager)),
                detail: format!("invalid character U+{:04X} (at position {i})", c as u32),
            });
        }
    }
}

/// Go's `unicode.IsPrint`: letters, marks, numbers, punctuation, symbols
/// and the ASCII space.
fn is_print(c: char) -> bool {
    c == ' ' || !(c.is_control() || c.is_whitespace() || c == '\u{ad}')
}

fn dry_run(values: &[String], errors: &mut Vec<FieldError>) {
    if values.iter().any(|v| v != "All") {
        errors.push(FieldError::not_supported(
            "dryRun",
            json_text(&json!(values)),
            &["All"],
        ));
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn a_custom_resources_field_labels_are_its_metadata_and_selectable_fields() {
        let selectable = ["spec.color".to_string()];
        assert!(field_labels("metadata.name=a,spec.color=red", &selectable).is_ok());
        // Go sorts a field selector's terms by key: the first unsupported
        // in that order is named.
        let error =
            field_labels("metadata.name=a,status.phase=x,spec.size=s", &selectable).unwrap_err();
        assert_eq!(
            (error.code, error.message.as_str()),
            (400, "field label not supported: spec.size")
        );
        assert!(field_labels("", &[]).is_ok());
    }

    use super::*;
    use crate::wire::query::Query;

    fn list(raw: &str) -> Result<(), ApiError> {
        list_options(&ListOptions::parse(&Query::parse(Some(raw))).unwrap())
    }

    /// Messages a real kube-apiserver gave.
    #[test]
    fn list_options_are_refused_as_kube_apiserver_refuses_them() {
        assert!(list("").is_ok());
        assert!(list("watch=1").is_ok(), "defaulted to a watch-list");
        assert!(list("watch=1&resourceVersion=5").is_ok());
        assert_eq!(
            list("sendInitialEvents=true").unwrap_err().message,
            "ListOptions.meta.k8s.io \"\" is invalid: sendInitialEvents: Forbidden: sendInitialEvents is forbidden for list"
        );
        let error = list("resourceVersionMatch=NotOlderThan&sendInitialEvents=false").unwrap_err();
        assert_eq!(
            error.message,
            "ListOptions.meta.k8s.io \"\" is invalid: [resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided, sendInitialEvents: Forbidden: sendInitialEvents is forbidden for list]"
        );
        assert_eq!(error.code, 422);
        let details = error.details.unwrap();
        assert_eq!(details["kind"], "ListOptions");
        assert_eq!(details["causes"][1]["field"], "sendInitialEvents");
        assert_eq!(
            list("resourceVersion=1&resourceVersionMatch=bogus")
                .unwrap_err()
                .message,
            "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Unsupported value: \"bogus\": supported values: \"Exact\", \"NotOlderThan\", \"\""
        );
        assert!(list("watch=1&resourceVersion=5&resourceVersionMatch=Exact").is_err());
    }

    #[test]
    fn write_options_are_refused_as_kube_apiserver_refuses_them() {
        let options = |raw: &str, patch: bool| WriteOptions::parse(&Query::parse(Some(raw)), patch);
        assert_eq!(
            write_options(&options("dryRun=", false), Write::Create)
                .unwrap_err()
                .message,
            "CreateOptions.meta.k8s.io \"\" is invalid: dryRun: Unsupported value: [\"\"]: supported values: \"All\""
        );
        assert_eq!(
            write_options(&options("fieldManager=x%01y", false), Write::Update)
                .unwrap_err()
                .message,
            "UpdateOptions.meta.k8s.io \"\" is invalid: fieldManager: Invalid value: \"x\\x01y\": invalid character U+0001 (at position 1)"
        );
        assert_eq!(
            write_options(&options("fieldValidation=bogus", false), Write::Create)
                .unwrap_err()
                .message,
            "CreateOptions.meta.k8s.io \"\" is invalid: fieldValidation: Unsupported value: \"bogus\": supported values: \"\", \"Ignore\", \"Strict\", \"Warn\""
        );
        assert_eq!(
            write_options(
                &options("force=false", true),
                Write::Patch(PatchType::Merge)
            )
            .unwrap_err()
            .message,
            "PatchOptions.meta.k8s.io \"\" is invalid: force: Forbidden: may not be specified for non-apply patch"
        );
        assert_eq!(
            write_options(&options("", true), Write::Patch(PatchType::Apply))
                .unwrap_err()
                .message,
            "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch"
        );
        assert!(
            write_options(
                &options("dryRun=All&fieldManager=me", true),
                Write::Patch(PatchType::Apply)
            )
            .is_ok()
        );
    }

    #[test]
    fn delete_options_are_refused_as_kube_apiserver_refuses_them() {
        assert_eq!(
            delete_options(&json!({"propagationPolicy": "x", "orphanDependents": true}))
                .unwrap_err()
                .message,
            "DeleteOptions.meta.k8s.io \"\" is invalid: [propagationPolicy: Invalid value: \"x\": orphanDependents and deletionPropagation cannot be both set, propagationPolicy: Unsupported value: \"x\": supported values: \"Foreground\", \"Background\", \"Orphan\", \"nil\"]"
        );
        assert!(delete_options(&json!({"propagationPolicy": "Orphan", "dryRun": ["All"]})).is_ok());
    }
}
