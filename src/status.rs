//! Kubernetes `Status` errors: every refusal bindery makes itself is built
//! here, with the code, reason and message kube-apiserver would give.

use serde_json::{Value, json};

/// An error answered as a `metav1.Status` (or, where kube-apiserver answers
/// with plain text, as that text).
#[derive(Clone, Debug, PartialEq)]
pub struct ApiError {
    pub code: u16,
    pub reason: &'static str,
    pub message: String,
    pub details: Option<Value>,
    /// kube-apiserver's mux answers unknown paths with a plain-text body.
    pub plain_text: bool,
    /// The `Retry-After` header's seconds, when the answer says when to
    /// come back.
    pub retry_after: Option<u16>,
}

impl std::fmt::Display for ApiError {
    /// As kube-apiserver's errors print: the message.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ApiError {}

impl ApiError {
    fn new(code: u16, reason: &'static str, message: impl Into<String>) -> Self {
        Self {
            code,
            reason,
            message: message.into(),
            details: None,
            plain_text: false,
            retry_after: None,
        }
    }

    fn with_details(mut self, details: Value) -> Self {
        self.details = Some(details);
        self
    }

    /// `401 Unauthorized`.
    pub fn unauthorized() -> Self {
        Self::new(401, "Unauthorized", "Unauthorized")
    }

    /// `403 Forbidden` on `resource` (and object `name`), with the
    /// authorizer's `message`, as kube-apiserver's `NewForbidden` words it.
    pub fn forbidden(group: &str, resource: &str, name: Option<&str>, message: &str) -> Self {
        let qualified = qualified(group, resource);
        let (subject, details) = match name {
            Some(name) => (
                format!("{qualified} \"{name}\""),
                json!({"name": name, "group": group, "kind": resource}),
            ),
            None => (qualified, json!({"group": group, "kind": resource})),
        };
        Self::new(
            403,
            "Forbidden",
            format!("{subject} is forbidden: {message}"),
        )
        .with_details(details)
    }

    /// kube-apiserver's 403 for a path that names no resource (its
    /// `NewForbidden` with an empty resource).
    pub fn forbidden_path(message: &str) -> Self {
        Self::new(403, "Forbidden", format!("forbidden: {message}")).with_details(json!({}))
    }

    /// The mux's plain-text `404 page not found` for paths nothing serves.
    pub fn page_not_found() -> Self {
        Self {
            plain_text: true,
            ..Self::new(404, "NotFound", "404 page not found")
        }
    }

    /// `404` for a path inside a served group version that names no resource.
    pub fn resource_not_found() -> Self {
        Self::new(
            404,
            "NotFound",
            "the server could not find the requested resource",
        )
        .with_details(json!({}))
    }

    /// `404` for a named object that does not exist (or is not the caller's).
    pub fn object_not_found(group: &str, resource: &str, name: &str) -> Self {
        let qualified = qualified(group, resource);
        Self::new(404, "NotFound", format!("{qualified} \"{name}\" not found"))
            .with_details(details(Some(name), group, resource))
    }

    /// `400 BadRequest`.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", message)
    }

    /// `405 MethodNotAllowed` for a verb a resource does not support.
    pub fn method_not_allowed(verb: &str, group: &str, resource: &str) -> Self {
        let qualified = qualified(group, resource);
        Self::new(
            405,
            "MethodNotAllowed",
            format!("{verb} is not supported on resources of kind \"{qualified}\""),
        )
        .with_details(details(None, group, resource))
    }

    /// go-restful's `405` for a method a built-in kind's route does not
    /// have, as kube-apiserver writes it.
    pub fn route_method_not_allowed() -> Self {
        Self::new(
            405,
            "MethodNotAllowed",
            "the server does not allow this method on the requested resource",
        )
        .with_details(json!({}))
    }

    /// `409 Conflict` for a write to an object that changed since it was
    /// read, as kube-apiserver's `NewConflict` words its optimistic lock.
    pub fn conflict(group: &str, resource: &str, name: &str) -> Self {
        let qualified = qualified(group, resource);
        Self::new(
            409,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on {qualified} \"{name}\": the object has been modified; please apply your changes to the latest version and try again"
            ),
        )
        .with_details(details(Some(name), group, resource))
    }

    /// `406 NotAcceptable`, as kube-apiserver's negotiation refuses.
    pub fn not_acceptable(message: impl Into<String>) -> Self {
        Self::new(406, "NotAcceptable", message)
    }

    /// `415 UnsupportedMediaType` for a request body's type.
    pub fn unsupported_media_type(accepted: &str) -> Self {
        Self::new(
            415,
            "UnsupportedMediaType",
            format!(
                "the body of the request was in an unknown format - accepted media types include: {accepted}"
            ),
        )
    }

    /// go-restful's `406`, which it answers for a built-in kind before
    /// kube-apiserver's handler runs, when no media type the route produces
    /// is in the Accept header.
    pub fn route_not_acceptable(available: &[&str]) -> Self {
        Self::new(
            406,
            "NotAcceptable",
            format!(
                "406: Not Acceptable\n\nAvailable representations: {}",
                available.join(", ")
            ),
        )
        .with_details(json!({}))
    }

    /// go-restful's `415`, for a Content-Type the route does not consume.
    pub fn route_unsupported_media_type() -> Self {
        Self::new(415, "UnsupportedMediaType", "415: Unsupported Media Type")
            .with_details(json!({}))
    }

    /// `413 RequestEntityTooLarge`.
    pub fn too_large(message: impl Into<String>) -> Self {
        Self::new(413, "RequestEntityTooLarge", message)
    }

    /// kube-apiserver's `NewGenericServerResponse(422, …)`: reason
    /// `Invalid`, empty details.
    pub fn generic_invalid(message: impl Into<String>) -> Self {
        Self::new(422, "Invalid", message).with_details(json!({}))
    }

    /// `422 Invalid` with the message and details kube-apiserver's
    /// `NewInvalid` made.
    pub fn invalid_with(message: impl Into<String>, details: Value) -> Self {
        Self::new(422, "Invalid", message).with_details(details)
    }

    /// `422 Invalid` for one forbidden field.
    pub fn field_forbidden(group: &str, kind: &str, name: &str, field: &str, detail: &str) -> Self {
        let qualified = qualified(group, kind);
        let cause = format!("Forbidden: {detail}");
        Self::new(
            422,
            "Invalid",
            format!("{qualified} \"{name}\" is invalid: {field}: {cause}"),
        )
        .with_details(json!({
            "name": name,
            "group": group,
            "kind": kind,
            "causes": [{"reason": "FieldValueForbidden", "message": cause, "field": field}],
        }))
    }

    /// An error kube-apiserver answers without a reason: one that is not
    /// its own `StatusError` (an encoder's, say), with `code`.
    pub fn unreasoned(code: u16, message: impl Into<String>) -> Self {
        Self::new(code, "", message)
    }

    /// kube-apiserver's answer when its priority and fairness (or its
    /// in-flight limit) turns a request away: plain text, come back in a
    /// second.
    pub fn too_many_requests() -> Self {
        let mut error = Self::new(
            429,
            "TooManyRequests",
            "Too many requests, please try again later.",
        );
        error.plain_text = true;
        error.retry_after = Some(1);
        error
    }

    /// `500 InternalError`.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(
            500,
            "InternalError",
            format!("Internal error occurred: {}", message.into()),
        )
        .with_details(json!({"causes": [{"message": "bindery could not complete the request"}]}))
    }

    /// kube-apiserver's `504 Timeout` for a request that did not complete
    /// in time (its `WithTimeoutForNonLongRunningRequests` filter):
    /// `NewTimeoutError` with no retry time, so empty details.
    pub fn timeout() -> Self {
        Self::new(
            504,
            "Timeout",
            "Timeout: request did not complete within the allotted timeout",
        )
        .with_details(json!({}))
    }

    /// `410 Expired`: kube-apiserver's answer to a list or watch from a
    /// resourceVersion it no longer holds (`NewResourceExpired`).
    pub fn expired(message: impl Into<String>) -> Self {
        Self::new(410, "Expired", message)
    }

    /// `503 ServiceUnavailable`.
    pub fn unavailable(message: impl Into<String>) -> Self {
        Self::new(503, "ServiceUnavailable", message)
    }

    /// The `metav1.Status` body.
    pub fn to_status(&self) -> Value {
        // Field order as kube-apiserver writes a Status.
        let mut status = serde_json::Map::new();
        status.insert("kind".into(), json!("Status"));
        status.insert("apiVersion".into(), json!("v1"));
        status.insert("metadata".into(), json!({}));
        status.insert("status".into(), json!("Failure"));
        status.insert("message".into(), json!(self.message));
        // kube-apiserver omits an empty reason (errors that are not its own
        // StatusErrors).
        if !self.reason.is_empty() {
            status.insert("reason".into(), json!(self.reason));
        }
        if let Some(details) = &self.details {
            status.insert("details".into(), details.clone());
        }
        status.insert("code".into(), json!(self.code));
        Value::Object(status)
    }

    /// The response body and its content type.
    pub fn body(&self) -> (&'static str, Vec<u8>) {
        if self.plain_text {
            return (
                "text/plain; charset=utf-8",
                format!("{}\n", self.message).into_bytes(),
            );
        }
        let body = serde_json::to_vec(&self.to_status()).expect("a Status serializes");
        ("application/json", body)
    }
}

/// `StatusDetails` naming a resource (and object): Go omits an empty group
/// (the core group's), as it omits every empty field of them.
fn details(name: Option<&str>, group: &str, kind: &str) -> Value {
    let mut details = serde_json::Map::new();
    if let Some(name) = name {
        details.insert("name".into(), json!(name));
    }
    if !group.is_empty() {
        details.insert("group".into(), json!(group));
    }
    details.insert("kind".into(), json!(kind));
    Value::Object(details)
}

fn qualified(group: &str, resource: &str) -> String {
    if group.is_empty() {
        resource.to_string()
    } else {
        format!("{resource}.{group}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn not_found_matches_kube_apiserver() {
        let status = ApiError::object_not_found("example.com", "widgets", "zz").to_status();
        assert_eq!(
            status,
            json!({
                "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                "message": "widgets.example.com \"zz\" not found", "reason": "NotFound",
                "details": {"name": "zz", "group": "example.com", "kind": "widgets"}, "code": 404
            })
        );
    }

    /// On main, the core group's details carried `"group": ""`.
    #[test]
    fn the_core_groups_details_have_no_group() {
        let status = ApiError::object_not_found("", "configmaps", "x").to_status();
        assert_eq!(
            status["details"],
            json!({"name": "x", "kind": "configmaps"})
        );
        let status = ApiError::conflict("", "configmaps", "x").to_status();
        assert_eq!(
            status["details"],
            json!({"name": "x", "kind": "configmaps"})
        );
    }

    #[test]
    fn page_not_found_is_plain_text() {
        let (content_type, body) = ApiError::page_not_found().body();
        assert_eq!(content_type, "text/plain; charset=utf-8");
        assert_eq!(body, b"404 page not found\n");
    }
}
