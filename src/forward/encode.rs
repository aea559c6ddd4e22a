//! Answers in the representation the caller negotiated: JSON (indented
//! when asked), YAML, or protobuf for the `meta.k8s.io` types; watch events
//! as JSON lines or protobuf frames; and errors as a `Status` negotiated
//! the way kube-apiserver negotiates errors. Everything bindery writes to a
//! caller about a resource is made here, from values translation produced.

use crate::sender::BoxBody;
use crate::status::ApiError;
use crate::wire::accept::{self, Media};
use crate::wire::go_quote::go_quote;
use crate::wire::query::{self, Query};
use crate::wire::{protobuf, yaml};
use bytes::Bytes;
use http::{HeaderValue, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use serde_json::Value;

/// Why an answer was not encoded.
#[derive(Debug)]
pub enum Unencoded {
    /// It has no form in that media (only what negotiation allowed is
    /// asked for, so bindery could not read it).
    NoForm,
    /// kube-apiserver's own encoder refuses it, with this error.
    Refused(ApiError),
}

impl Unencoded {
    /// The caller's error; `unreadable` for an answer with no form.
    pub fn to_error(self, unreadable: impl FnOnce() -> ApiError) -> ApiError {
        match self {
            Unencoded::NoForm => unreadable(),
            Unencoded::Refused(error) => error,
        }
    }
}

/// `value` in `media`, with its Content-Type.
pub fn encode(
    value: &Value,
    media: Media,
    pretty: bool,
) -> Result<(&'static str, Vec<u8>), Unencoded> {
    let bytes = match media {
        Media::Json if pretty => serde_json::to_vec_pretty(value).map_err(|_| Unencoded::NoForm)?,
        Media::Json => serde_json::to_vec(value).map_err(|_| Unencoded::NoForm)?,
        Media::Yaml => {
            if let Some(error) = yaml_too_deep(value) {
                return Err(Unencoded::Refused(error));
            }
            yaml::to_yaml(value).into_bytes()
        }
        Media::Protobuf => protobuf::encode(value).map_err(|_| Unencoded::NoForm)?,
    };
    Ok((media.content_type(), bytes))
}

/// kube-apiserver's 500 for a custom resource's answer in YAML nested
/// deeper than Go's JSON reads: its YAML is made from the answer's JSON
/// (`json.Marshal`, which checks what the object's `MarshalJSON` wrote
/// with Go's scanner), so an object at the limit has YAML and its list,
/// two levels deeper, has none.
fn yaml_too_deep(value: &Value) -> Option<ApiError> {
    let json = serde_json::to_vec(value).ok()?;
    let opener = crate::deep::past_go_depth(&json)?;
    let kind = value
        .get("kind")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let go_type = if kind.ends_with("List") {
        "*unstructured.UnstructuredList"
    } else {
        "*unstructured.Unstructured"
    };
    Some(ApiError::unreasoned(
        500,
        format!(
            "json: error calling MarshalJSON for type {go_type}: invalid character '{}' exceeded max depth",
            opener as char
        ),
    ))
}

/// A complete response.
pub fn full(status: u16, content_type: &str, body: impl Into<Bytes>) -> Response<BoxBody> {
    let mut response = Response::new(
        Full::new(body.into())
            .map_err(|never| match never {})
            .boxed_unsync(),
    );
    *response.status_mut() =
        StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    if let Ok(value) = HeaderValue::from_str(content_type) {
        response
            .headers_mut()
            .insert(http::header::CONTENT_TYPE, value);
    }
    response
}

/// Adds `Warning: 299 - "<text>"` headers, as kube-apiserver sends them.
pub fn add_warnings(response: &mut Response<BoxBody>, warnings: &[String]) {
    let mut seen = std::collections::HashSet::new();
    for warning in warnings.iter().filter(|w| seen.insert(w.as_str())) {
        if let Ok(value) = HeaderValue::from_str(&format!("299 - {}", go_quote(warning))) {
            response.headers_mut().append(http::header::WARNING, value);
        }
    }
}

/// Why a request is answered with an error.
#[derive(Debug)]
pub enum Failure {
    /// bindery's own refusal.
    Api(ApiError),
    /// The upstream's, rebuilt in the caller's terms: its HTTP status and
    /// Status.
    Upstream(u16, Value),
}

impl From<ApiError> for Failure {
    fn from(error: ApiError) -> Self {
        Failure::Api(error)
    }
}

/// How a request wants its errors: from its Accept header, and whether a
/// JSON Status is indented (`?pretty`, or a curl-like User-Agent).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ErrorForm {
    /// `None`: no Accept clause fits a Status; kube-apiserver then writes
    /// it as indented JSON.
    media: Option<Media>,
    pretty: bool,
}

impl ErrorForm {
    /// The form for a request with `headers` and (where it was resolved)
    /// `query`.
    pub fn of(headers: &http::HeaderMap, query: Option<&Query>) -> Self {
        let header = |name| {
            headers
                .get(name)
                .and_then(|v: &HeaderValue| v.to_str().ok())
        };
        let negotiated = accept::error_media(header(http::header::ACCEPT));
        let asked =
            query.is_some_and(|query| query::pretty(query, header(http::header::USER_AGENT)));
        Self {
            media: negotiated.map(|(media, _)| media),
            pretty: asked || negotiated.is_some_and(|(_, pretty)| pretty),
        }
    }

    /// JSON, as bindery's own errors were before they were negotiated.
    pub const JSON: Self = Self {
        media: Some(Media::Json),
        pretty: false,
    };

    /// The response for a `Status` value with HTTP status `code`.
    pub fn status(self, code: u16, status: &Value) -> Response<BoxBody> {
        let encoded = match self.media {
            Some(media) => encode(status, media, self.pretty),
            None => encode(status, Media::Json, true),
        };
        match encoded {
            Ok((content_type, bytes)) => full(code, content_type, bytes),
            Err(_) => full(code, "application/json", status.to_string()),
        }
    }

    /// The response for a failure, bindery's or the upstream's.
    pub fn failure(self, failure: &Failure) -> Response<BoxBody> {
        match failure {
            Failure::Api(error) => self.error(error),
            Failure::Upstream(code, status) => self.status(*code, status),
        }
    }

    /// The response for one of bindery's own errors.
    pub fn error(self, error: &ApiError) -> Response<BoxBody> {
        let mut response = if error.plain_text {
            let (content_type, body) = error.body();
            let mut response = full(error.code, content_type, body);
            response.headers_mut().insert(
                "x-content-type-options",
                HeaderValue::from_static("nosniff"),
            );
            response
        } else {
            self.status(error.code, &error.to_status())
        };
        if let Some(seconds) = error.retry_after {
            response
                .headers_mut()
                .insert(http::header::RETRY_AFTER, HeaderValue::from(seconds));
        }
        response
    }
}

/// One watch event in `media`: a JSON line or a protobuf frame.
pub fn event(event: &Value, media: Media) -> Option<Bytes> {
    match media {
        Media::Protobuf => protobuf::encode_watch_frame(event).ok().map(Bytes::from),
        _ => {
            let mut line = serde_json::to_vec(event).ok()?;
            line.push(b'\n');
            Some(Bytes::from(line))
        }
    }
}

/// A watch stream's response: `body`, events encoded in `media`.
pub fn watch_response(status: StatusCode, body: BoxBody, media: Media) -> Response<BoxBody> {
    let mut response = Response::new(body);
    *response.status_mut() = status;
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static(watch_content_type(media)),
    );
    response
}

/// The Content-Type of a watch stream in `media`.
pub fn watch_content_type(media: Media) -> &'static str {
    match media {
        Media::Protobuf => protobuf::WATCH_MEDIA_TYPE,
        _ => "application/json",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn yaml_deeper_than_go_reads_is_kube_apiservers_500() {
        std::thread::Builder::new()
            .stack_size(crate::deep::THREAD_STACK)
            .spawn(|| {
                let levels = crate::deep::OBJECT_DEPTH - 1;
                let object: Value = crate::deep::from_str(&format!(
                    r#"{{"kind":"Widget","spec":{}1{}}}"#,
                    "[".repeat(levels),
                    "]".repeat(levels)
                ))
                .unwrap();
                assert!(encode(&object, Media::Yaml, false).is_ok(), "an object at the limit");
                let list = json!({"kind": "WidgetList", "items": [object]});
                match encode(&list, Media::Yaml, false) {
                    Err(Unencoded::Refused(error)) => {
                        assert_eq!(error.code, 500);
                        assert_eq!(error.reason, "");
                        assert_eq!(
                            error.message,
                            "json: error calling MarshalJSON for type *unstructured.UnstructuredList: invalid character '[' exceeded max depth"
                        );
                    }
                    other => panic!("{other:?}"),
                }
                assert!(encode(&list, Media::Json, false).is_ok(), "JSON has no limit");
            })
            .unwrap()
            .join()
            .unwrap();
    }

    fn headers(accept: &str) -> http::HeaderMap {
        let mut headers = http::HeaderMap::new();
        headers.insert(http::header::ACCEPT, accept.parse().unwrap());
        headers
    }

    async fn body(response: Response<BoxBody>) -> (String, Bytes) {
        let content_type = response.headers()[http::header::CONTENT_TYPE]
            .to_str()
            .unwrap()
            .to_string();
        (
            content_type,
            response.into_body().collect().await.unwrap().to_bytes(),
        )
    }

    #[tokio::test]
    async fn errors_are_negotiated_as_kube_apiserver_negotiates_them() {
        let error = ApiError::object_not_found("g", "widgets", "w");
        let (content_type, bytes) = body(
            ErrorForm::of(&headers("application/vnd.kubernetes.protobuf"), None).error(&error),
        )
        .await;
        assert_eq!(content_type, "application/vnd.kubernetes.protobuf");
        assert_eq!(protobuf::decode(&bytes).unwrap()["code"], 404);

        let only_as =
            "application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1";
        let (content_type, bytes) =
            body(ErrorForm::of(&headers(only_as), None).error(&error)).await;
        assert_eq!(content_type, "application/json");
        assert!(bytes.starts_with(b"{\n  \"kind\""), "indented JSON");

        let (content_type, bytes) =
            body(ErrorForm::of(&headers("application/yaml"), None).error(&error)).await;
        assert_eq!(content_type, "application/yaml");
        assert!(bytes.starts_with(b"apiVersion: v1\n"));

        let (_, bytes) = body(
            ErrorForm::of(
                &http::HeaderMap::new(),
                Some(&Query::parse(Some("pretty=true"))),
            )
            .error(&error),
        )
        .await;
        assert!(bytes.starts_with(b"{\n"));
        let (_, bytes) = body(ErrorForm::of(&http::HeaderMap::new(), None).error(&error)).await;
        assert!(bytes.starts_with(b"{\"kind\""));
    }

    #[test]
    fn events_are_lines_or_frames() {
        let added = json!({"type": "ADDED", "object": {"kind": "PartialObjectMetadata",
            "apiVersion": "meta.k8s.io/v1", "metadata": {"name": "a"}}});
        let line = event(&added, Media::Json).unwrap();
        assert!(line.ends_with(b"}\n"));
        let frame = event(&added, Media::Protobuf).unwrap();
        let mut stream = bytes::BytesMut::from(&frame[..]);
        assert_eq!(protobuf::decode_watch_frames(&mut stream).unwrap(), [added]);
    }

    #[test]
    fn warnings_are_quoted_as_go_quotes_them() {
        let mut response = full(200, "application/json", "{}");
        add_warnings(
            &mut response,
            &[
                "duplicate field \"spec.a\"".into(),
                "duplicate field \"spec.a\"".into(),
            ],
        );
        let values: Vec<_> = response
            .headers()
            .get_all(http::header::WARNING)
            .iter()
            .collect();
        assert_eq!(values, [r#"299 - "duplicate field \"spec.a\"""#]);
    }
}
