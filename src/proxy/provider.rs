//! A typed provider request on its way out: made into the HTTP request that
//! is sent (the one place that does, carrying its target so that nothing
//! reads its path again), and a read answered by the watch cache where the
//! cache can answer it, else sent to the provider.

use crate::status::ApiError;
use crate::translate::request::ProviderRequest;
use crate::upstream::{BoxBody, BoxError, CacheRead, Upstream};
use bytes::Bytes;
use http::HeaderValue;
use http::header::{ACCEPT, CONTENT_TYPE, USER_AGENT};

/// The provider's name in errors.
pub const PROVIDER: &str = "the provider";

/// How `provider` goes to the provider: with the caller's `user_agent`, and
/// as the account `impersonation` names (none: as bindery).
pub fn http_request<'a>(
    provider: &ProviderRequest,
    user_agent: Option<&HeaderValue>,
    impersonation: impl IntoIterator<Item = (&'a str, String)>,
) -> Result<http::Request<Bytes>, ApiError> {
    let mut request = http::Request::builder()
        .method(provider.method.clone())
        .uri(provider.uri())
        .header(ACCEPT, provider.accept.as_str());
    if let Some(agent) = user_agent {
        request = request.header(USER_AGENT, agent);
    }
    for (name, value) in impersonation {
        request = request.header(name, value);
    }
    let body = match &provider.body {
        Some((content_type, bytes)) => {
            request = request.header(CONTENT_TYPE, *content_type);
            Bytes::from(bytes.clone())
        }
        None => Bytes::new(),
    };
    let mut request = request
        .body(body)
        .map_err(|e| ApiError::internal(e.to_string()))?;
    request.extensions_mut().insert(provider.target.clone());
    Ok(request)
}

/// The answer to `provider`, a list or watch made as `sent`, in provider
/// terms: the watch cache's where it can give it, else the provider's.
pub async fn read_through(
    upstream: &dyn Upstream,
    provider: &ProviderRequest,
    sent: http::Request<Bytes>,
) -> Result<http::Response<BoxBody>, ApiError> {
    let read = CacheRead {
        target: &provider.target,
        query: &provider.query,
        sent: &sent,
        identity_scope: None,
    };
    if let Some(response) = upstream.cached(&read).await {
        return Ok(response);
    }
    upstream.send(sent).await.map_err(unreachable)
}

/// The provider could not be reached: 503, as kube-apiserver's aggregator
/// answers for a backend it cannot reach.
pub fn unreachable(error: BoxError) -> ApiError {
    crate::forward::store::unreachable(PROVIDER, error)
}
