//! How the workspace answers with what an upstream (the provider, or a
//! consumer's app cluster) said, filtered: a watch stream event by event,
//! anything else decoded, rewritten and encoded as the caller asked.

use crate::proxy::{full, negotiate, watch};
use crate::status::ApiError;
use crate::upstream::BoxBody;
use bytes::Bytes;
use http::Response;
use http::header::CONTENT_TYPE;
use http::header::{ACCEPT, USER_AGENT};
use http_body_util::BodyExt;
use tokio::sync::watch as signal;

/// The request the workspace sends upstream for a write: an Accept bindery
/// can filter (JSON, from which YAML is made when the caller asked for it),
/// the caller's User-Agent, and a JSON (or `content_type`) body. Also says
/// whether the answer must be turned into YAML.
pub fn upstream_request(
    method: http::Method,
    uri: &str,
    caller: &http::HeaderMap,
    watch: bool,
    body: Option<(&str, Bytes)>,
) -> Result<(http::Request<Bytes>, bool), ApiError> {
    let accept = caller.get(ACCEPT).and_then(|v| v.to_str().ok());
    let (accept, to_yaml) = negotiate::upstream_accept(accept, watch);
    let mut request = http::Request::builder().method(method).uri(uri);
    if let Some(accept) = accept {
        request = request.header(ACCEPT, accept);
    }
    if let Some(agent) = caller.get(USER_AGENT) {
        request = request.header(USER_AGENT, agent);
    }
    let body = match body {
        Some((content_type, body)) => {
            request = request.header(CONTENT_TYPE, content_type);
            body
        }
        None => Bytes::new(),
    };
    let request = request
        .body(body)
        .map_err(|e| ApiError::internal(e.to_string()))?;
    Ok((request, to_yaml))
}

/// What to do with one upstream response.
pub struct Filter<R> {
    /// For a watch: the event translator. `None`: a whole body.
    pub watch: Option<watch::EventTranslator>,
    /// Rewrites a successful whole body; an error answers instead.
    pub rewrite: R,
    /// The caller asked for YAML, and the upstream was asked for JSON.
    pub to_yaml: bool,
    /// Names the upstream in errors ("the provider", "the app cluster").
    pub upstream: &'static str,
}

/// Answers with `response` through `filter`.
pub async fn filtered<R>(
    response: http::Response<BoxBody>,
    filter: Filter<R>,
    shutdown: signal::Receiver<bool>,
) -> Result<Response<BoxBody>, ApiError>
where
    R: FnOnce(&mut serde_json::Value) -> Result<(), ApiError>,
{
    let (head, body) = response.into_parts();
    let content_type = head.headers.get(CONTENT_TYPE).cloned();
    if let Some(translate) = filter.watch
        && head.status.is_success()
    {
        let body = watch::translate_stream(body, translate, shutdown);
        let mut response = Response::new(body);
        *response.status_mut() = head.status;
        if let Some(content_type) = content_type {
            response.headers_mut().insert(CONTENT_TYPE, content_type);
        }
        return Ok(response);
    }
    let upstream = filter.upstream;
    let bytes = body
        .collect()
        .await
        .map_err(|e| ApiError::unavailable(format!("reading {upstream}'s answer: {e}")))?
        .to_bytes();
    let Ok(mut value) = serde_json::from_slice::<serde_json::Value>(&bytes) else {
        return Err(ApiError::internal(format!(
            "{upstream}'s answer is not JSON"
        )));
    };
    if head.status.is_success() {
        (filter.rewrite)(&mut value)?;
    }
    let mut out = serde_json::to_vec(&value).expect("a JSON value serializes");
    let mut content_type = content_type
        .and_then(|c| c.to_str().ok().map(str::to_string))
        .unwrap_or_else(|| "application/json".into());
    if filter.to_yaml
        && content_type.starts_with("application/json")
        && let Some(yaml) = negotiate::json_to_yaml(&out)
    {
        out = yaml;
        content_type = "application/yaml".into();
    }
    Ok(full(head.status.as_u16(), &content_type, out))
}
