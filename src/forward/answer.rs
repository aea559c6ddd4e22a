//! An upstream's answer, read by what the request asked for and nothing
//! else: an object of the resource's kind, its list, a Table, metadata, a
//! Scale, or a `Status`. Each object goes through the endpoint's [`View`]
//! (its identity checked, its names mapped) and each answer is rebuilt from
//! the fields this module knows, so no byte of an upstream answer reaches
//! a caller unless translation produced it. An answer of another shape is
//! refused, whatever its shape claims to be. Pure.

use super::request::{ApiRequest, Options};
use crate::route::Verb;
use crate::status::ApiError;
use crate::wire::accept::Target;
use crate::wire::query::IncludeObject;
use serde_json::{Map, Value, json};

/// Whether an upstream object may be shown to the caller.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Visibility {
    Visible,
    Hidden,
}

/// How an endpoint lets its caller see upstream objects: the filter around
/// the one forwarding pipeline (a consumer's binding, every consumer of an
/// export, or a consumer's claims).
pub trait View: Send + Sync {
    /// Checks that an upstream object (or just its metadata) is the
    /// caller's, and rewrites it into the caller's terms.
    fn object_up(&self, object: &mut Value) -> Visibility;
    /// A Scale, which carries no labels: its names in the caller's terms.
    /// Its object's identity is checked before it is asked for.
    fn scale_up(&self, scale: &mut Value) -> Visibility;
    /// Free text (Status messages, warnings) in the caller's terms.
    fn text_up(&self, text: &str) -> String;
    /// A Table cell's text in the caller's terms: as [`View::text_up`],
    /// unless the view knows more of what a cell must never show.
    fn cell_up(&self, text: &str) -> String {
        self.text_up(text)
    }
    /// The continue token the caller gets for the upstream's.
    fn continue_up(&self, token: &str) -> String;
}

/// What an answer must be.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Expected {
    Object,
    Scale,
    List,
    Table,
    PartialObject,
    PartialList,
    /// A delete's: the object (still there, or as it was) or a Status.
    Deletion,
}

/// The kind of answer a request expects, by what it negotiated.
pub fn expected(request: &ApiRequest, subresource: Option<&str>) -> Expected {
    let collection = matches!(
        request.verb,
        Verb::List | Verb::Watch | Verb::DeleteCollection
    );
    match request.output.target {
        Target::Table(_) => Expected::Table,
        // Asked as the caller asked: kube-apiserver refuses a mismatch
        // (metadata of one object for a list) with its own 406.
        Target::PartialObjectMetadata(_) => Expected::PartialObject,
        Target::PartialObjectMetadataList(_) => Expected::PartialList,
        Target::Resource if subresource == Some("scale") => Expected::Scale,
        Target::Resource if request.verb == Verb::Watch => Expected::Object,
        Target::Resource if collection => Expected::List,
        Target::Resource if request.verb == Verb::Delete => Expected::Deletion,
        Target::Resource => Expected::Object,
    }
}

/// What the answer is about.
#[derive(Clone, Debug)]
pub struct Shape {
    pub expected: Expected,
    /// The resource's kind and `group/version` (`v1` for the core group).
    pub kind: String,
    pub api_version: String,
    pub include: IncludeObject,
}

impl Shape {
    pub fn of(
        request: &ApiRequest,
        subresource: Option<&str>,
        kind: &str,
        api_version: &str,
    ) -> Self {
        let include = request
            .table
            .as_ref()
            .map(|t| t.include_object)
            .unwrap_or_default();
        let expected = match (&request.options, expected(request, subresource)) {
            // kube-apiserver answers a deletecollection with the list.
            (Options::DeleteCollection(..), Expected::Table) => Expected::Table,
            (_, expected) => expected,
        };
        Self {
            expected,
            kind: kind.to_string(),
            api_version: api_version.to_string(),
            include,
        }
    }
}

/// A readable answer.
#[derive(Clone, Debug, PartialEq)]
pub struct Answer {
    pub status: u16,
    pub value: Value,
}

/// Why an answer does not reach the caller.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refused {
    /// It is an object the caller may not see: not found, for the caller.
    Hidden,
    /// It is not what was asked for, or not readable at all.
    Unreadable,
}

impl Refused {
    /// The caller's error; `not_found` names the object asked for.
    pub fn to_error(self, upstream: &str, not_found: impl FnOnce() -> ApiError) -> ApiError {
        match self {
            Refused::Hidden => not_found(),
            Refused::Unreadable => unreadable(upstream),
        }
    }
}

/// The error for an answer bindery cannot read: it says nothing of it.
pub fn unreadable(upstream: &str) -> ApiError {
    ApiError::internal(format!("{upstream}'s answer could not be read"))
}

/// Reads and translates a whole upstream answer.
pub fn answer_up(
    view: &dyn View,
    shape: &Shape,
    status: u16,
    body: &[u8],
) -> Result<Answer, Refused> {
    let value: Value = crate::deep::from_slice(body).map_err(|_| Refused::Unreadable)?;
    if !(200..300).contains(&status) {
        let value = status_up(view, &value).ok_or(Refused::Unreadable)?;
        return Ok(Answer { status, value });
    }
    let value = success_up(view, shape, value).ok_or(Refused::Unreadable)??;
    Ok(Answer { status, value })
}

/// A successful answer in the caller's terms; `Some(Err)` when it names an
/// object the caller may not see.
fn success_up(view: &dyn View, shape: &Shape, mut value: Value) -> Option<Result<Value, Refused>> {
    let kind = value
        .get("kind")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let api_version = value
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let is = |k: &str, v: &str| kind == k && api_version == v;
    let (own_kind, own_version) = (shape.kind.as_str(), shape.api_version.as_str());
    let meta = |v: &str| matches!(v, "meta.k8s.io/v1" | "meta.k8s.io/v1beta1");
    let hidden = || Some(Err(Refused::Hidden));
    match shape.expected {
        Expected::Object | Expected::Deletion if is(own_kind, own_version) => {
            match view.object_up(&mut value) {
                Visibility::Visible => Some(Ok(value)),
                Visibility::Hidden => hidden(),
            }
        }
        Expected::Deletion if is("Status", "v1") => status_up(view, &value).map(Ok),
        // A delete asked as a Table or as metadata: kube-apiserver converts
        // the object it answers with, but a Status (a delete that finished
        // with the object already gone from storage) it never converts.
        Expected::Table | Expected::PartialObject
            if is("Status", "v1")
                && value.get("status").and_then(Value::as_str) == Some("Success") =>
        {
            status_up(view, &value).map(Ok)
        }
        Expected::Scale if is("Scale", "autoscaling/v1") => match view.scale_up(&mut value) {
            Visibility::Visible => Some(Ok(scale_only(value))),
            Visibility::Hidden => hidden(),
        },
        Expected::PartialObject if kind == "PartialObjectMetadata" && meta(&api_version) => {
            match view.object_up(&mut value) {
                Visibility::Visible => Some(Ok(partial_only(value))),
                Visibility::Hidden => hidden(),
            }
        }
        Expected::List if is(&format!("{own_kind}List"), own_version) => {
            list_up(view, value, |_| true).map(Ok)
        }
        Expected::PartialList if kind == "PartialObjectMetadataList" && meta(&api_version) => {
            list_up(view, value, |item| {
                let kept = partial_only(std::mem::take(item));
                *item = kept;
                true
            })
            .map(Ok)
        }
        Expected::Table if kind == "Table" && meta(&api_version) => {
            table_up(view, value, shape.include).map(Ok)
        }
        _ => None,
    }
}

/// Keeps only `allowed` keys of `map`, in their order.
fn retain_keys(map: &mut Map<String, Value>, allowed: &[&str]) {
    map.retain(|key, _| allowed.contains(&key.as_str()));
}

/// A list of its items the caller may see (`keep` may refine each), and
/// nothing else; keys keep the upstream's order, as kube-apiserver wrote it.
fn list_up(
    view: &dyn View,
    value: Value,
    mut keep: impl FnMut(&mut Value) -> bool,
) -> Option<Value> {
    let Value::Object(mut list) = value else {
        return None;
    };
    retain_keys(&mut list, &["kind", "apiVersion", "metadata", "items"]);
    match list.get_mut("items") {
        Some(Value::Array(items)) => {
            let all = std::mem::take(items);
            *items = all
                .into_iter()
                .filter_map(|mut item| {
                    (view.object_up(&mut item) == Visibility::Visible && keep(&mut item))
                        .then_some(item)
                })
                .collect();
        }
        Some(Value::Null) | None => {
            list.insert("items".into(), Value::Array(Vec::new()));
        }
        Some(_) => return None,
    }
    list_meta_up(view, &mut list);
    Some(Value::Object(list))
}

/// A list's (or Table's) metadata: its version, continue token (sealed for
/// the caller) and remaining count, nothing else.
fn list_meta_up(view: &dyn View, list: &mut Map<String, Value>) {
    let meta = list
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()));
    let Value::Object(meta) = meta else {
        *meta = Value::Object(Map::new());
        return;
    };
    meta.retain(|key, value| match key.as_str() {
        "resourceVersion" => value.is_string(),
        "continue" => value.is_string(),
        "remainingItemCount" => value.is_i64(),
        _ => false,
    });
    if let Some(Value::String(token)) = meta.get_mut("continue")
        && !token.is_empty()
    {
        *token = view.continue_up(token);
    }
}

/// A Table whose rows are each checked by their object, then carry of it
/// what the caller asked for. bindery always asks for objects (at least
/// their metadata): a row it cannot check is no row.
fn table_up(view: &dyn View, value: Value, include: IncludeObject) -> Option<Value> {
    let Value::Object(mut table) = value else {
        return None;
    };
    retain_keys(
        &mut table,
        &[
            "kind",
            "apiVersion",
            "metadata",
            "columnDefinitions",
            "rows",
        ],
    );
    if table
        .get("columnDefinitions")
        .is_some_and(|c| !c.is_array())
    {
        table.shift_remove("columnDefinitions");
    }
    match table.get_mut("rows") {
        Some(Value::Array(rows)) => {
            let all = std::mem::take(rows);
            *rows = all
                .into_iter()
                .filter_map(|row| row_up(view, row, include))
                .collect();
        }
        Some(Value::Null) | None => {
            table.insert("rows".into(), Value::Array(Vec::new()));
        }
        Some(_) => return None,
    }
    list_meta_up(view, &mut table);
    Some(Value::Object(table))
}

/// One Table row, by its object.
fn row_up(view: &dyn View, row: Value, include: IncludeObject) -> Option<Value> {
    let Value::Object(mut row) = row else {
        return None;
    };
    retain_keys(&mut row, &["cells", "conditions", "object"]);
    let object = row.get_mut("object").filter(|o| o.is_object())?;
    if view.object_up(object) == Visibility::Hidden {
        return None;
    }
    let object = std::mem::take(object);
    row.insert(
        "object".into(),
        match include {
            IncludeObject::None => Value::Null,
            IncludeObject::Metadata => partial_only(object),
            IncludeObject::Object => object,
        },
    );
    match row.get_mut("cells") {
        Some(Value::Array(cells)) => {
            for cell in cells.iter_mut() {
                *cell = cell_up(view, std::mem::take(cell));
            }
        }
        _ => {
            row.insert("cells".into(), Value::Array(Vec::new()));
        }
    }
    if row.get("conditions").is_some_and(|c| !c.is_array()) {
        row.shift_remove("conditions");
    }
    Some(Value::Object(row))
}

/// A Table cell in the caller's terms (cells are printed values: text,
/// numbers, booleans).
fn cell_up(view: &dyn View, cell: Value) -> Value {
    match cell {
        Value::String(text) => Value::String(view.cell_up(&text)),
        Value::Array(_) | Value::Object(_) => Value::Null,
        other => other,
    }
}

/// A `PartialObjectMetadata` of exactly its kind, version and metadata.
fn partial_only(value: Value) -> Value {
    let Value::Object(mut object) = value else {
        return Value::Null;
    };
    retain_keys(&mut object, &["kind", "apiVersion", "metadata"]);
    let is_partial = object.get("kind") == Some(&json!("PartialObjectMetadata"))
        && object
            .get("apiVersion")
            .and_then(Value::as_str)
            .is_some_and(|v| v == "meta.k8s.io/v1" || v == "meta.k8s.io/v1beta1");
    if !is_partial {
        // A full object asked for as metadata: kube-apiserver's form.
        let metadata = object.shift_remove("metadata").unwrap_or_else(|| json!({}));
        return json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": metadata});
    }
    object.entry("metadata").or_insert_with(|| json!({}));
    Value::Object(object)
}

/// A `Scale` of exactly its fields.
fn scale_only(value: Value) -> Value {
    let Value::Object(mut scale) = value else {
        return Value::Null;
    };
    retain_keys(
        &mut scale,
        &["kind", "apiVersion", "metadata", "spec", "status"],
    );
    Value::Object(scale)
}

/// A `Status` of the fields kube-apiserver writes, its text in the caller's
/// terms; `None` when `value` is no Status.
pub fn status_up(view: &dyn View, value: &Value) -> Option<Value> {
    // kube-apiserver's timeout filter writes its 504 as a bare Status (no
    // kind, no apiVersion: `json.Encoder` of `ErrStatus`); it is answered
    // as it came.
    let bare_failure = value.get("kind").is_none()
        && value.get("status").and_then(Value::as_str) == Some("Failure")
        && value.get("code").is_some_and(Value::is_i64);
    if value.get("kind").and_then(Value::as_str) != Some("Status") && !bare_failure {
        return None;
    }
    let mut status = value.as_object()?.clone();
    let text_fields = |map: &mut Map<String, Value>, allowed: &[&str]| {
        map.retain(|key, value| match value {
            Value::String(text) if allowed.contains(&key.as_str()) => {
                *text = view.text_up(text);
                true
            }
            _ => false,
        });
    };
    status.retain(|key, value| match key.as_str() {
        "kind" | "apiVersion" | "status" | "message" | "reason" => value.is_string(),
        "code" => value.is_i64(),
        "metadata" | "details" => value.is_object(),
        _ => false,
    });
    for key in ["status", "message", "reason"] {
        if let Some(Value::String(text)) = status.get_mut(key) {
            *text = view.text_up(text);
        }
    }
    status.insert("metadata".into(), json!({}));
    if let Some(Value::Object(details)) = status.get_mut("details") {
        let causes = details.shift_remove("causes");
        let retry = details
            .shift_remove("retryAfterSeconds")
            .filter(Value::is_i64);
        text_fields(details, &["name", "group", "kind", "uid"]);
        if let Some(Value::Array(causes)) = causes {
            let causes: Vec<Value> = causes
                .into_iter()
                .filter_map(|cause| {
                    let Value::Object(mut cause) = cause else {
                        return None;
                    };
                    text_fields(&mut cause, &["reason", "message", "field"]);
                    Some(Value::Object(cause))
                })
                .collect();
            details.insert("causes".into(), Value::Array(causes));
        }
        if let Some(retry) = retry {
            details.insert("retryAfterSeconds".into(), retry);
        }
    }
    Some(Value::Object(status))
}

/// An upstream's `Warning` headers (`299 - "text"`), their text in the
/// caller's terms; headers of another form are dropped.
pub fn warnings_up(view: &dyn View, headers: &http::HeaderMap) -> Vec<String> {
    headers
        .get_all(http::header::WARNING)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .filter_map(|header| {
            let quoted = header.splitn(3, ' ').nth(2)?;
            serde_json::from_str::<String>(quoted).ok()
        })
        .map(|text| view.text_up(&text))
        .collect()
}

/// One watch event in the caller's terms; `None` drops it (an object the
/// caller may not see, or an event this does not read).
pub fn event_up(view: &dyn View, shape: &Shape, event: Value) -> Option<Value> {
    let Value::Object(mut event) = event else {
        return None;
    };
    let event_type = event.shift_remove("type")?;
    let object = event.shift_remove("object")?;
    let object = match event_type.as_str()? {
        "ADDED" | "MODIFIED" | "DELETED" => {
            let object_shape = Shape {
                expected: match shape.expected {
                    Expected::PartialObject | Expected::PartialList => Expected::PartialObject,
                    Expected::Table => Expected::Table,
                    _ => Expected::Object,
                },
                ..shape.clone()
            };
            success_up(view, &object_shape, object)?.ok()?
        }
        "BOOKMARK" => bookmark_only(object)?,
        "ERROR" => status_up(view, &object)?,
        _ => return None,
    };
    Some(json!({"type": event_type, "object": object}))
}

/// A bookmark carries a version, and the initial-events-end mark.
fn bookmark_only(object: Value) -> Option<Value> {
    const END: &str = "k8s.io/initial-events-end";
    let Value::Object(mut object) = object else {
        return None;
    };
    retain_keys(&mut object, &["kind", "apiVersion", "metadata"]);
    let Some(Value::Object(meta)) = object.get_mut("metadata") else {
        return None;
    };
    meta.get("resourceVersion").filter(|v| v.is_string())?;
    meta.retain(|key, _| key == "resourceVersion" || key == "annotations");
    if let Some(annotations) = meta.get_mut("annotations") {
        match annotations.get(END).cloned() {
            Some(end) => *annotations = json!({END: end}),
            None => {
                meta.shift_remove("annotations");
            }
        }
    }
    Some(Value::Object(object))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A view of objects labelled `owner: me` in namespace `p-ns`, shown as
    /// namespace `ns`.
    struct Mine;

    impl View for Mine {
        fn object_up(&self, object: &mut Value) -> Visibility {
            if object.pointer("/metadata/labels/owner") != Some(&json!("me")) {
                return Visibility::Hidden;
            }
            object["metadata"]["namespace"] = json!("ns");
            object["metadata"]
                .as_object_mut()
                .unwrap()
                .shift_remove("labels");
            Visibility::Visible
        }
        fn scale_up(&self, scale: &mut Value) -> Visibility {
            scale["metadata"]["namespace"] = json!("ns");
            Visibility::Visible
        }
        fn text_up(&self, text: &str) -> String {
            text.replace("p-ns", "ns")
        }
        fn cell_up(&self, text: &str) -> String {
            if text.contains("bindery.dev/") {
                String::new()
            } else {
                self.text_up(text)
            }
        }
        fn continue_up(&self, token: &str) -> String {
            format!("sealed:{token}")
        }
    }

    fn shape(expected: Expected) -> Shape {
        Shape {
            expected,
            kind: "Widget".into(),
            api_version: "g/v1".into(),
            include: IncludeObject::Metadata,
        }
    }

    fn up(expected: Expected, status: u16, value: Value) -> Result<Answer, Refused> {
        answer_up(
            &Mine,
            &shape(expected),
            status,
            value.to_string().as_bytes(),
        )
    }

    fn object(owner: &str) -> Value {
        json!({"kind": "Widget", "apiVersion": "g/v1",
            "metadata": {"name": "w", "namespace": "p-ns", "labels": {"owner": owner}},
            "spec": {"x": 1}})
    }

    /// kube-apiserver answered a DELETE asked as a Table with this Status
    /// (the fuzz found it; bindery said 500).
    #[test]
    fn a_successful_deletion_status_is_the_answer_whatever_form_was_asked() {
        let gone = json!({"kind": "Status", "apiVersion": "v1", "metadata": {},
            "status": "Success", "details": {"name": "a-4", "group": "g", "kind": "widgets", "uid": "u"}});
        for expected in [Expected::Table, Expected::PartialObject, Expected::Deletion] {
            let answer = up(expected, 200, gone.clone()).expect("a Status");
            assert_eq!(answer.value["status"], "Success");
            assert_eq!(answer.value["details"]["name"], "a-4");
        }
        let failure = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure"});
        assert!(up(Expected::Table, 200, failure).is_err(), "only a success");
        assert!(
            up(Expected::Object, 200, gone).is_err(),
            "not for an object"
        );
    }

    #[test]
    fn an_object_is_checked_whatever_its_shape_claims() {
        assert_eq!(
            up(Expected::Object, 200, object("me")).unwrap().value["metadata"]["namespace"],
            "ns"
        );
        assert_eq!(
            up(Expected::Object, 200, object("other")),
            Err(Refused::Hidden)
        );
        // A custom resource of kind Status, Table or Scale, or with a root
        // `items`, is no list and no Status: it must be this kind, and the
        // caller's (value_up on main decided by shape and let them through).
        for disguised in [
            json!({"kind": "Status", "apiVersion": "v1", "metadata": {"namespace": "p-ns"}, "message": "p-ns"}),
            json!({"kind": "Table", "apiVersion": "meta.k8s.io/v1", "rows": [{"cells": ["x"]}]}),
            json!({"kind": "Scale", "apiVersion": "autoscaling/v1", "metadata": {"name": "x", "namespace": "p-ns"}}),
            json!({"kind": "Widget", "apiVersion": "g/v1", "items": [], "metadata": {"namespace": "p-ns"}}),
            json!({"kind": "WidgetList", "apiVersion": "g/v1", "items": [object("other")]}),
        ] {
            assert!(
                up(Expected::Object, 200, disguised.clone()).is_err(),
                "{disguised}"
            );
        }
    }

    #[test]
    fn lists_keep_only_the_callers_items_and_known_metadata() {
        let list = json!({"kind": "WidgetList", "apiVersion": "g/v1",
            "metadata": {"resourceVersion": "5", "continue": "t", "selfLink": "/p-ns", "extra": 1},
            "items": [object("me"), object("other")], "smuggled": "p-ns"});
        let answer = up(Expected::List, 200, list).unwrap().value;
        assert_eq!(
            answer,
            json!({"kind": "WidgetList", "apiVersion": "g/v1",
                "metadata": {"resourceVersion": "5", "continue": "sealed:t"},
                "items": [{"kind": "Widget", "apiVersion": "g/v1",
                    "metadata": {"name": "w", "namespace": "ns"}, "spec": {"x": 1}}]})
        );
        let wrong_kind = json!({"kind": "Other", "apiVersion": "g/v1", "items": []});
        assert_eq!(
            up(Expected::List, 200, wrong_kind),
            Err(Refused::Unreadable)
        );
    }

    /// On main, a row without an object was kept unchecked.
    #[test]
    fn table_rows_need_a_visible_object_and_carry_what_was_asked() {
        let table = |rows: Value| {
            json!({"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": {"resourceVersion": "1"},
                "columnDefinitions": [{"name": "Name"}], "rows": rows})
        };
        let rows = json!([
            {"cells": ["mine", "p-ns"], "object": {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
                "metadata": {"name": "mine", "namespace": "p-ns", "labels": {"owner": "me"}}}},
            {"cells": ["theirs"], "object": {"metadata": {"labels": {"owner": "other"}}}},
            {"cells": ["unchecked"], "object": null},
            {"cells": ["label", "bindery.dev/consumer=x"], "object": {"metadata": {"labels": {"owner": "me"}}}},
        ]);
        for (include, object) in [
            (IncludeObject::None, Value::Null),
            (
                IncludeObject::Metadata,
                json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
                "metadata": {"name": "mine", "namespace": "ns"}}),
            ),
        ] {
            let shape = Shape {
                include,
                ..shape(Expected::Table)
            };
            let answer = answer_up(
                &Mine,
                &shape,
                200,
                table(rows.clone()).to_string().as_bytes(),
            )
            .unwrap()
            .value;
            let rows = answer["rows"].as_array().unwrap();
            assert_eq!(rows.len(), 2, "{answer}");
            assert_eq!(rows[0]["cells"], json!(["mine", "ns"]));
            assert_eq!(rows[0]["object"], object);
            assert_eq!(
                rows[1]["cells"],
                json!(["label", ""]),
                "a reserved label never shows"
            );
        }
    }

    #[test]
    fn statuses_are_rebuilt_in_the_callers_terms() {
        let status = json!({"kind": "Status", "apiVersion": "v1", "metadata": {"selfLink": "x"},
            "status": "Failure", "message": "widgets \"w\" in p-ns", "reason": "NotFound",
            "details": {"name": "w", "kind": "widgets", "causes": [{"message": "p-ns", "extra": 1}]},
            "code": 404, "smuggled": "p-ns"});
        assert_eq!(
            up(Expected::Object, 404, status).unwrap().value,
            json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                "message": "widgets \"w\" in ns", "reason": "NotFound",
                "details": {"name": "w", "kind": "widgets", "causes": [{"message": "ns"}]},
                "code": 404})
        );
        assert_eq!(
            up(Expected::Object, 500, json!({"kind": "Widget"})),
            Err(Refused::Unreadable)
        );
        assert_eq!(
            up(Expected::Object, 200, json!("not json object")),
            Err(Refused::Unreadable)
        );
        let garbage = answer_up(&Mine, &shape(Expected::Object), 200, b"\x00garbage");
        assert_eq!(garbage, Err(Refused::Unreadable));
    }

    #[test]
    fn warnings_are_read_as_text_in_the_callers_terms() {
        let mut headers = http::HeaderMap::new();
        for value in [
            r#"299 - "unknown field \"spec.x\" in p-ns""#,
            "299 - unquoted",
            r#"299 - "deprecated""#,
        ] {
            headers.append(http::header::WARNING, value.parse().unwrap());
        }
        assert_eq!(
            warnings_up(&Mine, &headers),
            [r#"unknown field "spec.x" in ns"#, "deprecated"]
        );
    }

    #[test]
    fn watch_events_are_read_like_answers() {
        let shape = shape(Expected::Object);
        let event = |t: &str, o: Value| json!({"type": t, "object": o});
        assert_eq!(
            event_up(&Mine, &shape, event("ADDED", object("me"))).unwrap()["object"]["metadata"]["namespace"],
            "ns"
        );
        assert_eq!(
            event_up(&Mine, &shape, event("ADDED", object("other"))),
            None
        );
        assert_eq!(
            event_up(&Mine, &shape, event("ADDED", json!({"kind": "Status"}))),
            None
        );
        assert_eq!(
            event_up(&Mine, &shape, event("SURPRISE", object("me"))),
            None
        );
        let bookmark = json!({"kind": "Widget", "apiVersion": "g/v1", "metadata": {"resourceVersion": "9",
            "namespace": "p-ns", "annotations": {"k8s.io/initial-events-end": "true", "x": "p-ns"}}});
        assert_eq!(
            event_up(&Mine, &shape, event("BOOKMARK", bookmark)).unwrap()["object"],
            json!({"kind": "Widget", "apiVersion": "g/v1", "metadata": {"resourceVersion": "9",
                "annotations": {"k8s.io/initial-events-end": "true"}}})
        );
        let error =
            json!({"kind": "Status", "apiVersion": "v1", "message": "too old p-ns", "code": 410});
        assert_eq!(
            event_up(&Mine, &shape, event("ERROR", error)).unwrap()["object"]["message"],
            "too old ns"
        );
    }

    proptest::proptest! {
        #[test]
        fn arbitrary_answers_never_panic(body in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..200), status in 100u16..600) {
            for expected in [Expected::Object, Expected::List, Expected::Table, Expected::PartialList, Expected::Scale, Expected::Deletion] {
                let _ = answer_up(&Mine, &shape(expected), status, &body);
            }
        }
    }

    #[test]
    fn a_bare_timeout_status_is_answered_as_it_came() {
        let bare = json!({"metadata": {}, "status": "Failure",
            "message": "Timeout: request did not complete within the allotted timeout",
            "reason": "Timeout", "details": {}, "code": 504});
        assert_eq!(status_up(&Mine, &bare), Some(bare.clone()));
        assert_eq!(
            status_up(&Mine, &json!({"metadata": {}, "code": 504})),
            None,
            "no failure"
        );
        assert_eq!(
            status_up(
                &Mine,
                &json!({"kind": "Widget", "status": "Failure", "code": 1})
            ),
            None
        );
    }
}
