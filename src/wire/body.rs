//! Request bodies, read as kube-apiserver reads them for a custom resource
//! (`k8s.io/apiserver` v0.34 `endpoints/handlers`: `create.go`,
//! `update.go`, `patch.go`, `delete.go`), or refused with its error. What
//! bindery then sends on is what it decoded, encoded again: never the
//! caller's bytes. Pure.
//!
//! - Objects (create, update): JSON or YAML; the Content-Type's
//!   parameters do not matter, its absence means JSON. A custom resource
//!   has no protobuf form: kube-apiserver v1.34 offers the type, and then
//!   with `fieldValidation=Ignore` refuses every such body with a 400 (read
//!   here as it reads the envelope, [`super::gogo`]); otherwise it panics
//!   decoding it, and bindery answers 415 instead.
//! - Patches: the Content-Type decides, before anything else; JSON patch,
//!   merge patch and server-side apply only.
//!
//! A built-in kind's bodies ([`Rules::BuiltIn`], the claimed resources of
//! an app cluster) are read by the same handlers, with these differences:
//! a protobuf object is taken (bindery does not decode it: see
//! `forward::request::Body::Protobuf`), an object's kind and version may
//! be missing (kube-apiserver takes the URL's), and strategic merge
//! patches are taken.
//! - DeleteOptions: JSON, YAML or protobuf; a body replaces the query's
//!   options.
//!
//! A key given twice keeps its last value and is reported as kube-apiserver
//! reports it: a `Warning` header, or a 400 under `fieldValidation=Strict`.

use super::go_quote::go_quote;
use super::json::{self, JsonError};
use super::query::FieldValidation;
use crate::status::ApiError;
use serde_json::Value;

/// kube-apiserver's limit on request bodies (`MaxRequestBodyBytes`).
pub const MAX_BYTES: usize = 3 * 1024 * 1024;

/// The 413 for a body over [`MAX_BYTES`].
pub fn too_large() -> ApiError {
    ApiError::too_large(format!("Request entity too large: limit is {MAX_BYTES}"))
}

/// A decoded body and the warnings kube-apiserver would send with its answer.
#[derive(Clone, Debug, PartialEq)]
pub struct Body {
    pub value: Value,
    pub warnings: Vec<String>,
}

/// A write body's media type, as Go's `mime.ParseMediaType` reads it:
/// lower-cased, parameters checked for form but otherwise ignored; `None`
/// when it is malformed.
fn media_type(content_type: Option<&str>) -> Option<String> {
    let Some(content_type) = content_type.filter(|c| !c.trim().is_empty()) else {
        return Some("application/json".into());
    };
    let mut parts = content_type.split(';');
    let media = parts.next()?.trim().to_ascii_lowercase();
    let (kind, sub_kind) = media.split_once('/')?;
    let token = |s: &str| !s.is_empty() && s.bytes().all(is_token_byte);
    if !token(kind) || !token(sub_kind) {
        return None;
    }
    for param in parts {
        let param = param.trim();
        if param.is_empty() {
            continue;
        }
        let (name, value) = param.split_once('=')?;
        let value = value.trim();
        let quoted = value.len() >= 2 && value.starts_with('"') && value.ends_with('"');
        if !token(name.trim()) || !(token(value) || quoted) {
            return None;
        }
    }
    Some(media)
}

fn is_token_byte(b: u8) -> bool {
    b.is_ascii_graphic() && !b"()<>@,;:\\\"/[]?=".contains(&b)
}

const OBJECT_TYPES: &str =
    "application/json, application/yaml, application/vnd.kubernetes.protobuf";
const PATCH_TYPES: &str =
    "application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml";
const BUILT_IN_PATCH_TYPES: &str = "application/json-patch+json, application/merge-patch+json, application/strategic-merge-patch+json, application/apply-patch+yaml";

/// Whose rules a body is read by.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rules {
    /// A custom resource's, by kube-apiserver's CRD handler.
    CustomResource,
    /// A built-in kind's (see the module's documentation).
    BuiltIn,
}

/// How an object body is encoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ObjectMedia {
    Json,
    Yaml,
    /// Offered for custom resources, as kube-apiserver offers it, and
    /// refused when the body is read (kube-apiserver v1.34 panics reading
    /// it): so the checks before it answer as kube-apiserver's do.
    Protobuf,
}

/// An object body's media type, negotiated as kube-apiserver negotiates it
/// (415 for any other).
pub fn object_media(content_type: Option<&str>) -> Result<ObjectMedia, ApiError> {
    match media_type(content_type).as_deref() {
        Some("application/json") => Ok(ObjectMedia::Json),
        Some("application/yaml") => Ok(ObjectMedia::Yaml),
        Some(super::protobuf::MEDIA_TYPE) => Ok(ObjectMedia::Protobuf),
        _ => Err(ApiError::unsupported_media_type(OBJECT_TYPES)),
    }
}

/// What a create or update must hold: the request's group, version and
/// kind, which a body's own are defaulted from (`gvkWithDefaults`).
#[derive(Clone, Copy, Debug)]
pub struct Expected<'a> {
    pub group: &'a str,
    pub version: &'a str,
    pub kind: &'a str,
}

/// The body of a create or update of an `expected` object, read by
/// `rules` (a built-in kind's protobuf is not decoded here).
pub fn object(
    media: ObjectMedia,
    body: &[u8],
    expected: Expected<'_>,
    validation: FieldValidation,
    rules: Rules,
) -> Result<Body, ApiError> {
    match media {
        ObjectMedia::Json => json_object(body, expected, validation, rules),
        ObjectMedia::Yaml => yaml_object(body, expected, validation, rules),
        ObjectMedia::Protobuf if validation == FieldValidation::Ignore => {
            Err(protobuf_object(body, expected))
        }
        ObjectMedia::Protobuf => Err(ApiError::unsupported_media_type(OBJECT_TYPES)),
    }
}

/// kube-apiserver's 400 for a protobuf body of a custom resource read
/// without strict decoding: the envelope is read, and whatever it holds,
/// an unstructured object cannot be made of it.
fn protobuf_object(body: &[u8], expected: Expected<'_>) -> ApiError {
    let magic = super::protobuf::MAGIC;
    let error = match body {
        [] => "empty data".to_string(),
        _ if !body.starts_with(magic) => {
            let prefix: Vec<String> = magic.iter().map(u8::to_string).collect();
            format!(
                "provided data does not appear to be a protobuf message, expected prefix [{}]",
                prefix.join(" ")
            )
        }
        _ if body.len() == magic.len() => "empty body".to_string(),
        _ => match super::gogo::unknown(&body[magic.len()..]) {
            Err(error) => error,
            Ok(type_meta) => {
                // `FromAPIVersionAndKind`, then `copyKindDefaults`.
                let (_, mut version) =
                    parse_group_version(&type_meta.api_version).unwrap_or_default();
                let mut kind = type_meta.kind.as_str();
                if kind.is_empty() {
                    kind = expected.kind;
                }
                if version.is_empty() {
                    version = expected.version;
                }
                return cannot_handle(
                    kind,
                    version,
                    expected.kind,
                    &"Object 'Kind' is missing in 'object has no kind field '",
                );
            }
        },
    };
    unrecognized(body, expected.kind, &error)
}

/// `the object provided is unrecognized (must be of type <kind>): <error>
/// (<summary>)`, as kube-apiserver words a body whose type it could not
/// tell.
fn unrecognized(body: &[u8], kind: &str, error: &dyn std::fmt::Display) -> ApiError {
    ApiError::bad_request(format!(
        "the object provided is unrecognized (must be of type {kind}): {error} ({})",
        summarize(body)
    ))
}

/// Go's `schema.ParseGroupVersion`: (group, version).
fn parse_group_version(text: &str) -> Result<(&str, &str), String> {
    if text.is_empty() || text == "/" {
        return Ok(("", ""));
    }
    match text.matches('/').count() {
        0 => Ok(("", text)),
        1 => Ok(text.split_once('/').expect("one slash")),
        _ => Err(format!("unexpected GroupVersion string: {text}")),
    }
}

/// The group, version and kind kube-apiserver's JSON serializer gives a
/// body (`Interpret`, then `gvkWithDefaults` from the request's): the
/// version and kind it names in its errors.
fn defaulted<'a>(value: &'a Value, expected: Expected<'a>) -> (&'a str, &'a str) {
    let text = |key| value.get(key).and_then(Value::as_str).unwrap_or_default();
    let (group, mut version) = parse_group_version(text("apiVersion")).unwrap_or_default();
    let mut kind = text("kind");
    if kind.is_empty() {
        kind = expected.kind;
    }
    if version.is_empty() && (group.is_empty() || group == expected.group) {
        version = expected.version;
    }
    (kind, version)
}

fn json_object(
    body: &[u8],
    expected: Expected<'_>,
    validation: FieldValidation,
    rules: Rules,
) -> Result<Body, ApiError> {
    let kind = expected.kind;
    let decoded = match json::decode_partial(body) {
        Ok((decoded, None)) => decoded,
        Ok((partial, Some(number))) => {
            // Go read the version and kind before it failed on the number.
            let (body_kind, version) = defaulted(&partial.value, expected);
            return Err(cannot_handle(
                body_kind,
                version,
                kind,
                &JsonError::Number(number),
            ));
        }
        Err(error) => {
            return Err(unrecognized(
                body,
                kind,
                &format!("couldn't get version/kind; json parse error: {error}"),
            ));
        }
    };
    let value = decoded.value;
    type_meta(&value).map_err(|e| unrecognized(body, kind, &e))?;
    missing_kind(
        &value,
        body,
        &String::from_utf8_lossy(body),
        expected,
        validation,
        rules,
    )?;
    let strict: Vec<String> = decoded
        .duplicate_fields
        .iter()
        .map(|path| format!("duplicate field {}", go_quote(path)))
        .collect();
    match validation {
        FieldValidation::Strict if !strict.is_empty() => {
            let (body_kind, version) = defaulted(&value, expected);
            Err(cannot_handle(
                body_kind,
                version,
                kind,
                &format!("strict decoding error: {}", strict.join(", ")),
            ))
        }
        FieldValidation::Warn => Ok(Body {
            value,
            warnings: strict,
        }),
        _ => Ok(Body {
            value,
            warnings: Vec::new(),
        }),
    }
}

/// kube-apiserver's 400 for a body without a kind. The strict decoder
/// (`Strict`, `Warn`) finds it after decoding, with the type unknown; the
/// plain one (`Ignore`) fails in `Unstructured.UnmarshalJSON`, with the
/// type defaulted from the request's, quoting the JSON it read (`json`).
/// A built-in kind's body needs none: the URL's is taken.
fn missing_kind(
    value: &Value,
    body: &[u8],
    json: &str,
    expected: Expected<'_>,
    validation: FieldValidation,
    rules: Rules,
) -> Result<(), ApiError> {
    if rules == Rules::BuiltIn
        || value
            .get("kind")
            .and_then(Value::as_str)
            .is_some_and(|k| !k.is_empty())
    {
        return Ok(());
    }
    if validation == FieldValidation::Ignore {
        let (body_kind, version) = defaulted(value, expected);
        return Err(cannot_handle(
            body_kind,
            version,
            expected.kind,
            &format!("Object 'Kind' is missing in '{json}'"),
        ));
    }
    Err(unrecognized(
        body,
        expected.kind,
        &format!(
            "Object 'Kind' is missing in '{}'",
            String::from_utf8_lossy(body)
        ),
    ))
}

/// `<Kind> in version "<v>" cannot be handled as a <kind>: <error>`, as
/// kube-apiserver words a body whose version and kind it read.
fn cannot_handle(
    body_kind: &str,
    version: &str,
    kind: &str,
    error: &dyn std::fmt::Display,
) -> ApiError {
    ApiError::bad_request(format!(
        "{body_kind} in version {} cannot be handled as a {kind}: {error}",
        go_quote(version)
    ))
}

/// What kube-apiserver's `Interpret` says of the version and kind when it
/// reads them into strings and parses the version (the body is already
/// known to be valid JSON).
fn type_meta(value: &Value) -> Result<(), String> {
    const TARGET: &str = r#"struct { APIVersion string "json:\"apiVersion,omitempty\""; Kind string "json:\"kind,omitempty\"" }"#;
    let Some(object) = value.as_object() else {
        if value.is_null() {
            return Ok(());
        }
        let what = match value {
            Value::Array(_) => "array",
            Value::String(_) => "string",
            Value::Number(_) => "number",
            _ => "bool",
        };
        return Err(format!(
            "couldn't get version/kind; json parse error: json: cannot unmarshal {what} into Go value of type {TARGET}"
        ));
    };
    for (key, field) in [("apiVersion", ".apiVersion"), ("kind", ".kind")] {
        match object.get(key) {
            None | Some(Value::String(_)) | Some(Value::Null) => {}
            Some(other) => {
                let what = match other {
                    Value::Array(_) => "array",
                    Value::Object(_) => "object",
                    Value::Number(_) => "number",
                    _ => "bool",
                };
                return Err(format!(
                    "couldn't get version/kind; json parse error: json: cannot unmarshal {what} into Go struct field {field} of type string"
                ));
            }
        }
    }
    let api_version = object
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or_default();
    parse_group_version(api_version).map(|_| ())
}

fn yaml_object(
    body: &[u8],
    expected: Expected<'_>,
    validation: FieldValidation,
    rules: Rules,
) -> Result<Body, ApiError> {
    let value = yaml(body).map_err(|error| unrecognized(body, expected.kind, &error))?;
    let json = String::from_utf8_lossy(&json::go_marshal(&value)).into_owned();
    type_meta(&value).map_err(|e| unrecognized(body, expected.kind, &e))?;
    missing_kind(&value, body, &json, expected, validation, rules)?;
    Ok(Body {
        value,
        warnings: Vec::new(),
    })
}

/// A YAML document as JSON; the first document of a stream, as
/// `sigs.k8s.io/yaml` takes it, and null for an empty one.
///
/// serde_norway (like the serde_yaml it continues) reads 128 levels, yaml.v2 10,000 (its `max_flow_level` and
/// `max_indents`): past that limit, a document that is JSON (as
/// kubectl's and client-go's apply configurations are) is read as the JSON
/// it is, as deep as Go reads JSON.
fn yaml(body: &[u8]) -> Result<Value, String> {
    let first = serde_norway::Deserializer::from_slice(body).next();
    let Some(document) = first else {
        return Ok(Value::Null);
    };
    let value: serde_norway::Value = match serde::Deserialize::deserialize(document) {
        Ok(value) => value,
        Err(error) if error.to_string().starts_with("recursion limit exceeded") => {
            return json::decode(body)
                .map(|decoded| decoded.value)
                .map_err(|_| format!("yaml: {error}"));
        }
        Err(error) => return Err(format!("yaml: {error}")),
    };
    serde_json::to_value(value).map_err(|e| format!("yaml: {e}"))
}

/// Go's `summarizeData(body, 30)`: the first 30 bytes, as text for an
/// object, else in hex.
fn summarize(body: &[u8]) -> String {
    if body.is_empty() {
        return "<empty>".into();
    }
    let head = &body[..body.len().min(30)];
    let more = if body.len() > 30 { " ..." } else { "" };
    if body.starts_with(b"{") {
        format!("{}{more}", String::from_utf8_lossy(head))
    } else {
        let hex: String = head.iter().map(|b| format!("{b:02x}")).collect();
        format!("{hex}{more}")
    }
}

/// The kinds of patch kube-apiserver applies: to a custom resource, all
/// but a strategic merge patch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PatchType {
    Json,
    Merge,
    /// A built-in kind's only.
    StrategicMerge,
    Apply,
}

impl PatchType {
    /// From the Content-Type, as kube-apiserver's patch handler reads it
    /// first of all: cut at `;`, neither trimmed nor lower-cased.
    pub fn of(content_type: Option<&str>, rules: Rules) -> Result<Self, ApiError> {
        let content_type = content_type.unwrap_or_default();
        let media = match content_type.find(';') {
            Some(i) if i > 0 => &content_type[..i],
            _ => content_type,
        };
        match (media, rules) {
            ("application/json-patch+json", _) => Ok(PatchType::Json),
            ("application/merge-patch+json", _) => Ok(PatchType::Merge),
            ("application/strategic-merge-patch+json", Rules::BuiltIn) => {
                Ok(PatchType::StrategicMerge)
            }
            ("application/apply-patch+yaml", _) => Ok(PatchType::Apply),
            (_, Rules::CustomResource) => Err(ApiError::unsupported_media_type(PATCH_TYPES)),
            (_, Rules::BuiltIn) => Err(ApiError::unsupported_media_type(BUILT_IN_PATCH_TYPES)),
        }
    }

    pub fn content_type(self) -> &'static str {
        match self {
            PatchType::Json => "application/json-patch+json",
            PatchType::Merge => "application/merge-patch+json",
            PatchType::StrategicMerge => "application/strategic-merge-patch+json",
            PatchType::Apply => "application/apply-patch+yaml",
        }
    }
}

/// A patch's body. JSON and merge patches decode as JSON (with kube-apiserver's
/// `error decoding patch` for what does not); an apply is YAML (JSON is YAML).
/// A strategic merge patch is JSON, read into a map as `strategicPatchObject`
/// reads it, its decoding errors unprefixed.
pub fn patch(
    patch_type: PatchType,
    body: &[u8],
    validation: FieldValidation,
) -> Result<Body, ApiError> {
    match patch_type {
        PatchType::Apply => {
            let value = yaml(body).map_err(|e| {
                ApiError::bad_request(format!(
                    "error decoding YAML: error converting YAML to JSON: {e}"
                ))
            })?;
            Ok(Body {
                value,
                warnings: Vec::new(),
            })
        }
        PatchType::Json | PatchType::Merge | PatchType::StrategicMerge => {
            // A strategic merge patch is read into a map whatever the
            // validation, its errors unprefixed.
            let strategic = patch_type == PatchType::StrategicMerge;
            let prefix = if strategic {
                ""
            } else {
                "error decoding patch: "
            };
            let decoded =
                json::decode(body).map_err(|e| ApiError::bad_request(format!("{prefix}{e}")))?;
            let shape_error = match (patch_type, &decoded.value) {
                (PatchType::Json, Value::Array(_))
                | (PatchType::Merge | PatchType::StrategicMerge, Value::Object(_)) => None,
                (PatchType::Json, other) => Some(format!(
                    "json: cannot unmarshal {} into Go value of type []handlers.jsonPatchOp",
                    json_type(other)
                )),
                // A null merge patch decodes; the merge refuses it (a
                // strategic one changes nothing).
                (_, Value::Null) => None,
                (_, other) => Some(format!(
                    "json: cannot unmarshal {} into Go value of type map[string]interface {{}}",
                    json_type(other)
                )),
            };
            if let Some(error) = shape_error
                && (strategic || validation != FieldValidation::Ignore)
            {
                return Err(ApiError::bad_request(format!("{prefix}{error}")));
            }
            let prefix = if patch_type == PatchType::Json {
                "json patch "
            } else {
                ""
            };
            let warnings = match validation {
                FieldValidation::Ignore => Vec::new(),
                _ => decoded
                    .duplicate_fields
                    .iter()
                    .map(|path| format!("{prefix}duplicate field {}", go_quote(path)))
                    .collect(),
            };
            Ok(Body {
                value: decoded.value,
                warnings,
            })
        }
    }
}

fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Array(_) => "array",
        Value::Object(_) => "object",
        Value::String(_) => "string",
        Value::Number(_) => "number",
        Value::Bool(_) => "bool",
        Value::Null => "null",
    }
}

/// A DELETE's body as the `DeleteOptions` it holds; `None` for no body (the
/// query's options then count). Errors decoding it are kube-apiserver's 500s.
pub fn delete_options(content_type: Option<&str>, body: &[u8]) -> Result<Option<Value>, ApiError> {
    if body.is_empty() {
        return Ok(None);
    }
    let internal = |message: String| ApiError {
        code: 500,
        reason: "",
        message,
        details: None,
        plain_text: false,
        retry_after: None,
    };
    let value = match media_type(content_type).as_deref() {
        Some("application/json") => json::decode(body)
            .map(|d| d.value)
            .map_err(|e| internal(format!("couldn't get version/kind; json parse error: {e}")))?,
        Some("application/yaml") => yaml(body).map_err(internal)?,
        Some(super::protobuf::MEDIA_TYPE) => {
            super::protobuf::decode(body).map_err(|e| internal(e.to_string()))?
        }
        _ => return Err(ApiError::unsupported_media_type(OBJECT_TYPES)),
    };
    let kind = value
        .get("kind")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if !value.is_object() || !matches!(kind, "" | "DeleteOptions") {
        return Err(internal(
            "decoded object cannot be converted to DeleteOptions".into(),
        ));
    }
    Ok(Some(delete_options_only(&value)))
}

/// The fields of a `DeleteOptions`, and nothing else.
fn delete_options_only(value: &Value) -> Value {
    let mut out = serde_json::Map::new();
    out.insert("kind".into(), "DeleteOptions".into());
    out.insert("apiVersion".into(), "meta.k8s.io/v1".into());
    for key in [
        "gracePeriodSeconds",
        "orphanDependents",
        "propagationPolicy",
        "dryRun",
        "ignoreStoreReadErrorWithClusterBreakingPotential",
    ] {
        if let Some(field) = value.get(key).filter(|v| !v.is_null()) {
            out.insert(key.into(), field.clone());
        }
    }
    if let Some(Value::Object(preconditions)) = value.get("preconditions") {
        let kept: serde_json::Map<String, Value> = preconditions
            .iter()
            .filter(|(k, v)| matches!(k.as_str(), "uid" | "resourceVersion") && !v.is_null())
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        out.insert("preconditions".into(), Value::Object(kept));
    }
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const WIDGET: Expected<'static> = Expected {
        group: "g",
        version: "v1",
        kind: "Widget",
    };
    const CR: Rules = Rules::CustomResource;

    fn create(content_type: Option<&str>, body: &str) -> Result<Body, ApiError> {
        object(
            object_media(content_type)?,
            body.as_bytes(),
            WIDGET,
            FieldValidation::Warn,
            Rules::CustomResource,
        )
    }

    #[test]
    fn object_media_types_are_negotiated_as_kube_apiserver_does() {
        let body = r#"{"apiVersion":"g/v1","kind":"Widget"}"#;
        for content_type in [
            None,
            Some("application/json"),
            Some("application/json; charset=utf-8"),
            Some("Application/JSON"),
            Some("application/json;"),
            Some("application/yaml"),
        ] {
            assert!(create(content_type, body).is_ok(), "{content_type:?}");
        }
        for content_type in [
            "application/json; foo",
            "text/plain",
            "application/vnd.kubernetes.protobuf",
        ] {
            let error = create(Some(content_type), body).unwrap_err();
            assert_eq!(error.code, 415, "{content_type}");
            assert_eq!(
                error.message,
                "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml, application/vnd.kubernetes.protobuf"
            );
        }
    }

    /// Messages a real kube-apiserver gave for these bodies.
    #[test]
    fn undecodable_objects_get_kube_apiservers_400() {
        let message = |body: &str| create(None, body).unwrap_err().message;
        assert_eq!(
            message(""),
            "the object provided is unrecognized (must be of type Widget): couldn't get version/kind; json parse error: unexpected end of JSON input (<empty>)"
        );
        assert_eq!(
            message("{} x"),
            "the object provided is unrecognized (must be of type Widget): couldn't get version/kind; json parse error: invalid character 'x' after top-level value ({} x)"
        );
        assert_eq!(
            message("{}"),
            "the object provided is unrecognized (must be of type Widget): Object 'Kind' is missing in '{}' ({})"
        );
        assert_eq!(
            message("[]"),
            "the object provided is unrecognized (must be of type Widget): couldn't get version/kind; json parse error: json: cannot unmarshal array into Go value of type struct { APIVersion string \"json:\\\"apiVersion,omitempty\\\"\"; Kind string \"json:\\\"kind,omitempty\\\"\" } (5b5d)"
        );
        assert_eq!(
            message(r#"{"apiVersion":"g/v1","kind":"Widget","spec":{"n":1e400}}"#),
            "Widget in version \"v1\" cannot be handled as a Widget: json: cannot unmarshal number 1e400 into Go value of type float64"
        );
        let long = format!(
            r#"{{"apiVersion":"conformance.bindery.dev/v1","kind":"Widget","x":{}1{}}}"#,
            "[".repeat(10_001),
            "]".repeat(10_001)
        );
        assert_eq!(
            message(&long),
            "the object provided is unrecognized (must be of type Widget): couldn't get version/kind; json parse error: invalid character '[' exceeded max depth ({\"apiVersion\":\"conformance.bin ...)"
        );
    }

    #[test]
    fn a_body_go_reads_is_read_as_go_reads_it() {
        let body = "{\"apiVersion\":\"g/v1\",\"kind\":\"Widget\",\"metadata\":{\"labels\":{\"a\":\"\\ud800\"}},\"spec\":{\"s\":\"\u{1}\"}}";
        let body = body.replace('\u{1}', "a\u{fffd}b");
        let decoded = create(None, &body).unwrap();
        assert_eq!(decoded.value["metadata"]["labels"]["a"], json!("\u{fffd}"));
    }

    #[test]
    fn duplicate_fields_warn_or_fail_as_asked() {
        let body = br#"{"apiVersion":"g/v1","kind":"Widget","spec":{"a":1,"a":2}}"#;
        let json = ObjectMedia::Json;
        let warned = object(json, body, WIDGET, FieldValidation::Warn, CR).unwrap();
        assert_eq!(warned.warnings, [r#"duplicate field "spec.a""#]);
        assert_eq!(warned.value["spec"]["a"], json!(2));
        let error = object(json, body, WIDGET, FieldValidation::Strict, CR).unwrap_err();
        assert_eq!(
            error.message,
            r#"Widget in version "v1" cannot be handled as a Widget: strict decoding error: duplicate field "spec.a""#
        );
        assert!(
            object(json, body, WIDGET, FieldValidation::Ignore, CR)
                .unwrap()
                .warnings
                .is_empty()
        );
    }

    /// Bodies without a usable kind, and kube-apiserver v1.34.10's answers to
    /// them on a custom resource `conformance.bindery.dev/v1` `Widget`, as
    /// `fieldValidation` asks (recorded from a real kube-apiserver).
    const KINDLESS: &[(&str, FieldValidation, &str)] = &[
        (
            r##"null"##,
            FieldValidation::Ignore,
            r##"Widget in version "v1" cannot be handled as a Widget: Object 'Kind' is missing in 'null'"##,
        ),
        (
            r##"null"##,
            FieldValidation::Strict,
            r##"the object provided is unrecognized (must be of type Widget): Object 'Kind' is missing in 'null' (6e756c6c)"##,
        ),
        (
            r##"{}"##,
            FieldValidation::Ignore,
            r##"Widget in version "v1" cannot be handled as a Widget: Object 'Kind' is missing in '{}'"##,
        ),
        (
            r##"{}"##,
            FieldValidation::Strict,
            r##"the object provided is unrecognized (must be of type Widget): Object 'Kind' is missing in '{}' ({})"##,
        ),
        (
            r##"[]"##,
            FieldValidation::Ignore,
            r##"the object provided is unrecognized (must be of type Widget): couldn't get version/kind; json parse error: json: cannot unmarshal array into Go value of type struct { APIVersion string "json:\"apiVersion,omitempty\""; Kind string "json:\"kind,omitempty\"" } (5b5d)"##,
        ),
        (
            r##"[]"##,
            FieldValidation::Strict,
            r##"the object provided is unrecognized (must be of type Widget): couldn't get version/kind; json parse error: json: cannot unmarshal array into Go value of type struct { APIVersion string "json:\"apiVersion,omitempty\""; Kind string "json:\"kind,omitempty\"" } (5b5d)"##,
        ),
        (
            r##""x""##,
            FieldValidation::Ignore,
            r##"the object provided is unrecognized (must be of type Widget): couldn't get version/kind; json parse error: json: cannot unmarshal string into Go value of type struct { APIVersion string "json:\"apiVersion,omitempty\""; Kind string "json:\"kind,omitempty\"" } (227822)"##,
        ),
        (
            r##""x""##,
            FieldValidation::Strict,
            r##"the object provided is unrecognized (must be of type Widget): couldn't get version/kind; json parse error: json: cannot unmarshal string into Go value of type struct { APIVersion string "json:\"apiVersion,omitempty\""; Kind string "json:\"kind,omitempty\"" } (227822)"##,
        ),
        (
            r##"1"##,
            FieldValidation::Ignore,
            r##"the object provided is unrecognized (must be of type Widget): couldn't get version/kind; json parse error: json: cannot unmarshal number into Go value of type struct { APIVersion string "json:\"apiVersion,omitempty\""; Kind string "json:\"kind,omitempty\"" } (31)"##,
        ),
        (
            r##"1"##,
            FieldValidation::Strict,
            r##"the object provided is unrecognized (must be of type Widget): couldn't get version/kind; json parse error: json: cannot unmarshal number into Go value of type struct { APIVersion string "json:\"apiVersion,omitempty\""; Kind string "json:\"kind,omitempty\"" } (31)"##,
        ),
        (
            r##"true"##,
            FieldValidation::Ignore,
            r##"the object provided is unrecognized (must be of type Widget): couldn't get version/kind; json parse error: json: cannot unmarshal bool into Go value of type struct { APIVersion string "json:\"apiVersion,omitempty\""; Kind string "json:\"kind,omitempty\"" } (74727565)"##,
        ),
        (
            r##"true"##,
            FieldValidation::Strict,
            r##"the object provided is unrecognized (must be of type Widget): couldn't get version/kind; json parse error: json: cannot unmarshal bool into Go value of type struct { APIVersion string "json:\"apiVersion,omitempty\""; Kind string "json:\"kind,omitempty\"" } (74727565)"##,
        ),
        (
            r##"{"apiVersion":"conformance.bindery.dev/v1"}"##,
            FieldValidation::Ignore,
            r##"Widget in version "v1" cannot be handled as a Widget: Object 'Kind' is missing in '{"apiVersion":"conformance.bindery.dev/v1"}'"##,
        ),
        (
            r##"{"apiVersion":"conformance.bindery.dev/v1"}"##,
            FieldValidation::Strict,
            r##"the object provided is unrecognized (must be of type Widget): Object 'Kind' is missing in '{"apiVersion":"conformance.bindery.dev/v1"}' ({"apiVersion":"conformance.bin ...)"##,
        ),
        (
            r##"{"apiVersion":"conformance.bindery.dev/v1","kind":""}"##,
            FieldValidation::Ignore,
            r##"Widget in version "v1" cannot be handled as a Widget: Object 'Kind' is missing in '{"apiVersion":"conformance.bindery.dev/v1","kind":""}'"##,
        ),
        (
            r##"{"apiVersion":"conformance.bindery.dev/v1","kind":""}"##,
            FieldValidation::Strict,
            r##"the object provided is unrecognized (must be of type Widget): Object 'Kind' is missing in '{"apiVersion":"conformance.bindery.dev/v1","kind":""}' ({"apiVersion":"conformance.bin ...)"##,
        ),
        (
            r##"{"apiVersion":"conformance.bindery.dev/v1","kind":null}"##,
            FieldValidation::Ignore,
            r##"Widget in version "v1" cannot be handled as a Widget: Object 'Kind' is missing in '{"apiVersion":"conformance.bindery.dev/v1","kind":null}'"##,
        ),
        (
            r##"{"apiVersion":"conformance.bindery.dev/v1","kind":null}"##,
            FieldValidation::Strict,
            r##"the object provided is unrecognized (must be of type Widget): Object 'Kind' is missing in '{"apiVersion":"conformance.bindery.dev/v1","kind":null}' ({"apiVersion":"conformance.bin ...)"##,
        ),
        (
            r##"{"apiVersion":"conformance.bindery.dev/v1","kind":1}"##,
            FieldValidation::Ignore,
            r##"the object provided is unrecognized (must be of type Widget): couldn't get version/kind; json parse error: json: cannot unmarshal number into Go struct field .kind of type string ({"apiVersion":"conformance.bin ...)"##,
        ),
        (
            r##"{"apiVersion":"conformance.bindery.dev/v1","kind":1}"##,
            FieldValidation::Strict,
            r##"the object provided is unrecognized (must be of type Widget): couldn't get version/kind; json parse error: json: cannot unmarshal number into Go struct field .kind of type string ({"apiVersion":"conformance.bin ...)"##,
        ),
        (
            r##"{"apiVersion":1,"kind":"Widget"}"##,
            FieldValidation::Ignore,
            r##"the object provided is unrecognized (must be of type Widget): couldn't get version/kind; json parse error: json: cannot unmarshal number into Go struct field .apiVersion of type string ({"apiVersion":1,"kind":"Widget ...)"##,
        ),
        (
            r##"{"apiVersion":1,"kind":"Widget"}"##,
            FieldValidation::Strict,
            r##"the object provided is unrecognized (must be of type Widget): couldn't get version/kind; json parse error: json: cannot unmarshal number into Go struct field .apiVersion of type string ({"apiVersion":1,"kind":"Widget ...)"##,
        ),
        (
            r##"{"apiVersion":"a/b/c","kind":"Widget"}"##,
            FieldValidation::Ignore,
            r##"the object provided is unrecognized (must be of type Widget): unexpected GroupVersion string: a/b/c ({"apiVersion":"a/b/c","kind":" ...)"##,
        ),
        (
            r##"{"apiVersion":"a/b/c","kind":"Widget"}"##,
            FieldValidation::Strict,
            r##"the object provided is unrecognized (must be of type Widget): unexpected GroupVersion string: a/b/c ({"apiVersion":"a/b/c","kind":" ...)"##,
        ),
        (
            r##"{"kind":"Widget","apiVersion":"conformance.bindery.dev/v1","metadata":{"name":"x"}} x"##,
            FieldValidation::Ignore,
            r##"the object provided is unrecognized (must be of type Widget): couldn't get version/kind; json parse error: invalid character 'x' after top-level value ({"kind":"Widget","apiVersion": ...)"##,
        ),
        (
            r##"{"kind":"Widget","apiVersion":"conformance.bindery.dev/v1","metadata":{"name":"x"}} x"##,
            FieldValidation::Strict,
            r##"the object provided is unrecognized (must be of type Widget): couldn't get version/kind; json parse error: invalid character 'x' after top-level value ({"kind":"Widget","apiVersion": ...)"##,
        ),
        (
            r##"{"kind":"Widget""##,
            FieldValidation::Ignore,
            r##"the object provided is unrecognized (must be of type Widget): couldn't get version/kind; json parse error: unexpected end of JSON input ({"kind":"Widget")"##,
        ),
        (
            r##"{"kind":"Widget""##,
            FieldValidation::Strict,
            r##"the object provided is unrecognized (must be of type Widget): couldn't get version/kind; json parse error: unexpected end of JSON input ({"kind":"Widget")"##,
        ),
    ];

    #[test]
    fn bodies_without_a_kind_are_refused_as_kube_apiserver_refuses_them() {
        let expected = Expected {
            group: "conformance.bindery.dev",
            version: "v1",
            kind: "Widget",
        };
        for (body, validation, answer) in KINDLESS {
            let error = object(
                ObjectMedia::Json,
                body.as_bytes(),
                expected,
                *validation,
                CR,
            )
            .expect_err(body);
            assert_eq!(error.code, 400, "{body} {validation:?}");
            assert_eq!(error.message, *answer, "{body} {validation:?}");
        }
    }

    #[test]
    fn yaml_without_a_kind_quotes_the_json_go_would_marshal() {
        let expected = Expected {
            group: "conformance.bindery.dev",
            version: "v1",
            kind: "Widget",
        };
        let yaml = "metadata:\n  name: x\napiVersion: conformance.bindery.dev/v1\n";
        let error = object(
            ObjectMedia::Yaml,
            yaml.as_bytes(),
            expected,
            FieldValidation::Ignore,
            CR,
        )
        .unwrap_err();
        assert_eq!(
            error.message,
            r#"Widget in version "v1" cannot be handled as a Widget: Object 'Kind' is missing in '{"apiVersion":"conformance.bindery.dev/v1","metadata":{"name":"x"}}'"#
        );
    }

    #[test]
    fn protobuf_bodies_are_refused_as_kube_apiserver_refuses_them() {
        let refuse = |body: &[u8], validation| {
            object(ObjectMedia::Protobuf, body, WIDGET, validation, CR).unwrap_err()
        };
        // Without strict decoding the envelope is read first.
        let unrecognized = "the object provided is unrecognized (must be of type Widget): ";
        for (body, error) in [
            (&b""[..], "empty data"),
            (
                b"garbage",
                "provided data does not appear to be a protobuf message, expected prefix [107 56 115 0]",
            ),
            (b"k8s\0", "empty body"),
        ] {
            let refusal = refuse(body, FieldValidation::Ignore);
            assert_eq!(refusal.code, 400);
            assert!(
                refusal
                    .message
                    .starts_with(&format!("{unrecognized}{error}")),
                "{body:?}: {}",
                refusal.message
            );
        }
        // A well-formed envelope: an unstructured object cannot be made of it.
        let mut envelope = b"k8s\0".to_vec();
        let type_meta = [&[0x0a, 5][..], b"g/v1z", &[0x12, 6], b"Gadget"].concat();
        envelope.extend([0x0a, type_meta.len() as u8]);
        envelope.extend(type_meta);
        let refusal = refuse(&envelope, FieldValidation::Ignore);
        assert_eq!(
            refusal.message,
            "Gadget in version \"v1z\" cannot be handled as a Widget: Object 'Kind' is missing in 'object has no kind field '"
        );
        // With strict decoding (the default, Warn too) the media type is refused.
        for validation in [FieldValidation::Warn, FieldValidation::Strict] {
            assert_eq!(refuse(b"k8s\0", validation).code, 415);
        }
    }
    #[test]
    fn yaml_objects_decode_to_json() {
        let decoded = create(
            Some("application/yaml"),
            "apiVersion: g/v1\nkind: Widget\nmetadata:\n  name: a\n---\nkind: Other\n",
        )
        .unwrap();
        assert_eq!(
            decoded.value,
            json!({"apiVersion": "g/v1", "kind": "Widget", "metadata": {"name": "a"}})
        );
        assert_eq!(
            create(Some("application/yaml"), ": :\n  - [")
                .unwrap_err()
                .code,
            400
        );
    }

    #[test]
    fn patch_types_are_the_content_type_exactly() {
        assert_eq!(
            PatchType::of(Some("application/merge-patch+json; charset=utf-8"), CR),
            Ok(PatchType::Merge)
        );
        for content_type in [
            None,
            Some("application/strategic-merge-patch+json"),
            Some("Application/Merge-Patch+JSON"),
            Some(" application/merge-patch+json"),
        ] {
            let error = PatchType::of(content_type, CR).unwrap_err();
            assert_eq!(error.code, 415);
            assert_eq!(
                error.message,
                "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml"
            );
        }
    }

    #[test]
    fn patches_decode_with_kube_apiservers_errors() {
        let message = |t, body: &str| {
            patch(t, body.as_bytes(), FieldValidation::Warn)
                .unwrap_err()
                .message
        };
        assert_eq!(
            message(PatchType::Merge, "{broken"),
            "error decoding patch: invalid character 'b' looking for beginning of object key string"
        );
        assert_eq!(
            message(PatchType::Merge, "[]"),
            "error decoding patch: json: cannot unmarshal array into Go value of type map[string]interface {}"
        );
        assert_eq!(
            message(PatchType::Json, "{}"),
            "error decoding patch: json: cannot unmarshal object into Go value of type []handlers.jsonPatchOp"
        );
        let ops = patch(
            PatchType::Json,
            br#"[{"op":"add","op":"remove","path":"/a"}]"#,
            FieldValidation::Warn,
        )
        .unwrap();
        assert_eq!(ops.warnings, [r#"json patch duplicate field "[0].op""#]);
        let apply = patch(
            PatchType::Apply,
            b"kind: Widget\nspec: {a: 1}\n",
            FieldValidation::Warn,
        )
        .unwrap();
        assert_eq!(apply.value, json!({"kind": "Widget", "spec": {"a": 1}}));
    }

    #[test]
    fn delete_options_keep_only_their_fields() {
        assert_eq!(delete_options(None, b"").unwrap(), None);
        let options = delete_options(
            Some("application/json"),
            br#"{"kind":"DeleteOptions","apiVersion":"v1","gracePeriodSeconds":0,"preconditions":{"uid":"u","x":1},"sneaky":{"labels":1}}"#,
        )
        .unwrap()
        .unwrap();
        assert_eq!(
            options,
            json!({"kind": "DeleteOptions", "apiVersion": "meta.k8s.io/v1", "gracePeriodSeconds": 0,
                "preconditions": {"uid": "u"}})
        );
        let error = delete_options(None, b"{").unwrap_err();
        assert_eq!((error.code, error.reason), (500, ""));
        assert_eq!(
            delete_options(Some("text/plain"), b"{}").unwrap_err().code,
            415
        );
        assert_eq!(
            delete_options(None, br#"{"kind":"Widget"}"#)
                .unwrap_err()
                .message,
            "decoded object cannot be converted to DeleteOptions"
        );
    }

    /// What a real kube-apiserver v1.34 answered for a ConfigMap.
    #[test]
    fn a_built_in_kind_is_the_urls_and_takes_strategic_merge_patches() {
        const CONFIG_MAP: Expected<'static> = Expected {
            group: "",
            version: "v1",
            kind: "ConfigMap",
        };
        let bare = object(
            ObjectMedia::Json,
            br#"{"metadata":{"name":"a"}}"#,
            CONFIG_MAP,
            FieldValidation::Warn,
            Rules::BuiltIn,
        )
        .unwrap();
        assert_eq!(bare.value, json!({"metadata": {"name": "a"}}));
        let yaml = object(
            ObjectMedia::Yaml,
            b"metadata: {name: a}\n",
            CONFIG_MAP,
            FieldValidation::Warn,
            Rules::BuiltIn,
        )
        .unwrap();
        assert_eq!(yaml.value, json!({"metadata": {"name": "a"}}));
        assert_eq!(
            object(
                ObjectMedia::Json,
                b"{}",
                CONFIG_MAP,
                FieldValidation::Warn,
                CR
            )
            .unwrap_err()
            .code,
            400,
            "a custom resource's kind is required"
        );
        let smp = Some("application/strategic-merge-patch+json");
        assert_eq!(
            PatchType::of(smp, Rules::BuiltIn),
            Ok(PatchType::StrategicMerge)
        );
        assert_eq!(PatchType::of(smp, CR).unwrap_err().code, 415);
        assert_eq!(
            PatchType::of(
                Some("text/plain, application/merge-patch+json"),
                Rules::BuiltIn
            )
            .unwrap_err()
            .message,
            "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/strategic-merge-patch+json, application/apply-patch+yaml"
        );
        let message = |body: &str| {
            patch(
                PatchType::StrategicMerge,
                body.as_bytes(),
                FieldValidation::Ignore,
            )
            .unwrap_err()
            .message
        };
        assert_eq!(
            message("{broken"),
            "invalid character 'b' looking for beginning of object key string"
        );
        assert_eq!(
            message("[1]"),
            "json: cannot unmarshal array into Go value of type map[string]interface {}"
        );
        assert_eq!(
            patch(PatchType::StrategicMerge, b"null", FieldValidation::Warn)
                .unwrap()
                .value,
            Value::Null
        );
        let warned = patch(
            PatchType::StrategicMerge,
            br#"{"data":{"k":"1","k":"2"}}"#,
            FieldValidation::Warn,
        )
        .unwrap();
        assert_eq!(warned.warnings, [r#"duplicate field "data.k""#]);
        assert_eq!(warned.value, json!({"data": {"k": "2"}}));
    }

    proptest::proptest! {
        #[test]
        fn arbitrary_bodies_never_panic(
            body in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..120),
            content_type in "(application/(json|yaml|vnd.kubernetes.protobuf|merge-patch\\+json|json-patch\\+json|apply-patch\\+yaml)|\\PC{0,20})",
        ) {
            for validation in [FieldValidation::Ignore, FieldValidation::Warn, FieldValidation::Strict] {
                if let Ok(media) = object_media(Some(&content_type)) {
                    let _ = object(media, &body, WIDGET, validation, CR);
                    let _ = object(media, &body, WIDGET, validation, Rules::BuiltIn);
                }
                if let Ok(t) = PatchType::of(Some(&content_type), Rules::BuiltIn) {
                    let _ = patch(t, &body, validation);
                }
            }
            let _ = delete_options(Some(&content_type), &body);
        }
    }
}
