//! `clusters/*`: one provider list or watch across every consumer of an
//! export, each object shown in its consumer's terms and marked with its
//! consumer. The provider's resourceVersions and bookmarks pass as they are,
//! so one watch resumes like any other. Everything but list and watch needs
//! a consumer's path.

use crate::catalog::ConsumerView;
use crate::proxy::{decoded_query, full, negotiate, watch};
use crate::route::{ResourceRequest, Verb};
use crate::router::App;
use crate::status::ApiError;
use crate::translate::continue_token::TokenError;
use crate::translate::workspace::Consumers;
use crate::upstream::BoxBody;
use bytes::Bytes;
use http::header::{ACCEPT, CONTENT_TYPE, USER_AGENT};
use http::{Method, Response};
use http_body_util::BodyExt;
use std::sync::Arc;

/// Serves a list or watch of `request`'s resource across `views`.
pub async fn serve(
    app: &App,
    export: &str,
    views: &[ConsumerView],
    request: ResourceRequest,
    parts: http::request::Parts,
) -> Result<Response<BoxBody>, ApiError> {
    let bounds: Vec<_> = views
        .iter()
        .filter_map(|v| v.find(&request.group, &request.resource))
        .filter(|s| s.serves(&request.version))
        .map(|s| s.bound.clone())
        .collect();
    let Some(first) = bounds.first().cloned() else {
        return Err(ApiError::page_not_found());
    };
    let query = decoded_query(&parts.uri);
    let verb = Verb::of_query(&parts.method, &request, parts.uri.query());
    if !matches!(verb, Some(Verb::List | Verb::Watch)) || parts.method != Method::GET {
        return Err(ApiError::method_not_allowed(
            parts.method.as_str(),
            &first.group,
            &first.resource,
        ));
    }
    if request.namespace.is_some() {
        return Err(ApiError::bad_request(
            "a namespace belongs to one consumer: list it at clusters/<consumer>/",
        ));
    }
    let scope = format!("workspace/{export}/{}", first.qualified_resource());
    let mut provider_query = Vec::new();
    for (key, value) in &query {
        match key.as_str() {
            "labelSelector" => {}
            "fieldSelector" if value.contains("metadata.namespace") => {
                return Err(ApiError::bad_request(
                    "metadata.namespace names a namespace of one consumer: select it at clusters/<consumer>/",
                ));
            }
            "continue" => {
                let token = app.proxy.tokens.open(&scope, value).map_err(|e| match e {
                    TokenError::Forged => ApiError::bad_request(
                        "invalid continue token: continue key is not valid: it was not issued for this request",
                    ),
                    other => ApiError::bad_request(format!(
                        "invalid continue token: continue key is not valid: {other}"
                    )),
                })?;
                provider_query.push((key.clone(), token));
            }
            _ => provider_query.push((key.clone(), value.clone())),
        }
    }
    let caller_selector = query
        .iter()
        .find(|(k, _)| k == "labelSelector")
        .map(|(_, v)| v.as_str());
    provider_query.push(("labelSelector".into(), Consumers::selector(caller_selector)));
    let uri = format!(
        "/apis/{}/{}/{}?{}",
        request.group,
        request.version,
        request.resource,
        form_urlencoded::Serializer::new(String::new())
            .extend_pairs(&provider_query)
            .finish()
    );
    let is_watch = verb == Some(Verb::Watch);
    let accept = parts.headers.get(ACCEPT).and_then(|v| v.to_str().ok());
    let (accept, to_yaml) = negotiate::upstream_accept(accept, is_watch);
    let mut upstream = http::Request::builder().method(Method::GET).uri(&uri);
    if let Some(accept) = accept {
        upstream = upstream.header(ACCEPT, accept);
    }
    if let Some(agent) = parts.headers.get(USER_AGENT) {
        upstream = upstream.header(USER_AGENT, agent);
    }
    let upstream = upstream
        .body(Bytes::new())
        .map_err(|e| ApiError::internal(e.to_string()))?;
    let response = app
        .proxy
        .upstream
        .send(upstream)
        .await
        .map_err(|e| ApiError::unavailable(format!("the provider cannot be reached: {e}")))?;
    let (head, upstream_body) = response.into_parts();
    let consumers = Arc::new(Consumers::new(bounds));
    let content_type = head.headers.get(CONTENT_TYPE).cloned();
    if is_watch && head.status.is_success() {
        let translate = consumers.clone();
        let body = watch::translate_stream(
            upstream_body,
            Box::new(move |event| translate.event_up(event)),
            app.proxy.shutdown.clone(),
        );
        let mut response = Response::new(body);
        *response.status_mut() = head.status;
        if let Some(content_type) = content_type {
            response.headers_mut().insert(CONTENT_TYPE, content_type);
        }
        return Ok(response);
    }
    let bytes = upstream_body
        .collect()
        .await
        .map_err(|e| ApiError::unavailable(format!("reading the provider's answer: {e}")))?
        .to_bytes();
    let Ok(mut value) = serde_json::from_slice::<serde_json::Value>(&bytes) else {
        return Err(ApiError::internal("the provider's answer is not JSON"));
    };
    if head.status.is_success() {
        consumers.list_up(&mut value);
        if let Some(serde_json::Value::String(token)) = value.pointer_mut("/metadata/continue")
            && !token.is_empty()
        {
            *token = app.proxy.tokens.seal(&scope, token);
        }
    }
    let mut out = serde_json::to_vec(&value).expect("a JSON value serializes");
    let mut content_type = content_type
        .and_then(|c| c.to_str().ok().map(str::to_string))
        .unwrap_or_else(|| "application/json".into());
    if to_yaml
        && content_type.starts_with("application/json")
        && let Some(yaml) = negotiate::json_to_yaml(&out)
    {
        out = yaml;
        content_type = "application/yaml".into();
    }
    Ok(full(head.status.as_u16(), &content_type, out))
}
