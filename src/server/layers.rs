//! The outermost tower layer every request passes: the response headers
//! every answer carries (request id, caching). Observing
//! ([`super::observe`]), the deadline ([`super::deadline`]), authentication
//! ([`super::authn`]) and authorization ([`super::authz`]) follow; each is a
//! small `Layer` so the stack reads like the request flow in docs/DESIGN.md.

use crate::resolved::resolved_of;
use crate::route::Endpoint;
use crate::upstream::BoxBody;
use futures::future::BoxFuture;
use http::{HeaderValue, Request, Response};
use std::task::{Context, Poll};
use tower::{Layer, Service};

/// The header carrying the request id, as kube-apiserver's `Audit-Id`.
pub const REQUEST_ID: &str = "audit-id";

/// Gives each request an id (the caller's `Audit-Id` when it sent one),
/// and stamps what kube-apiserver puts on every response: that id, and
/// `Cache-Control: no-cache, private` where the response says nothing about
/// caching (its `WithCacheControl` filter: every answer depends on who
/// asked; discovery documents set their own). Not `Cache-Control` to the
/// aggregation layer: the app cluster's kube-apiserver has set it on its
/// response already, and would add bindery's to it.
///
/// The id, and over HTTP/2 the `Date`, are sent as never-indexed headers.
/// HTTP/2 compresses headers against a table each connection keeps (HPACK,
/// up to 4 KiB of entries), and a value that differs on every response (the
/// id) or every second (the date) would only fill it: on an aggregator's
/// long-lived connection, with entries never used again. hyper adds `Date`
/// only where the response has none, so the one set here is the one sent.
#[derive(Clone, Default)]
pub struct ResponseHeadersLayer;

impl<S> Layer<S> for ResponseHeadersLayer {
    type Service = ResponseHeaders<S>;
    fn layer(&self, inner: S) -> Self::Service {
        ResponseHeaders { inner }
    }
}

#[derive(Clone)]
pub struct ResponseHeaders<S> {
    inner: S,
}

impl<S, B> Service<Request<B>> for ResponseHeaders<S>
where
    S: Service<Request<B>, Response = Response<BoxBody>> + Send,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = BoxFuture<'static, Result<Self::Response, Self::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: Request<B>) -> Self::Future {
        let id = request
            .headers()
            .get(REQUEST_ID)
            .filter(|v| !v.is_empty())
            .cloned()
            .unwrap_or_else(new_id);
        request.headers_mut().insert(REQUEST_ID, id.clone());
        let http2 = request.version() == http::Version::HTTP_2;
        let aggregated = matches!(
            resolved_of(&mut request).endpoint,
            Endpoint::Aggregated { .. }
        );
        let future = self.inner.call(request);
        Box::pin(async move {
            let mut response = future.await?;
            let headers = response.headers_mut();
            headers.insert(REQUEST_ID, never_indexed(id));
            if !aggregated {
                headers
                    .entry(http::header::CACHE_CONTROL)
                    .or_insert(HeaderValue::from_static("no-cache, private"));
            }
            if http2 {
                headers
                    .entry(http::header::DATE)
                    .or_insert_with(|| never_indexed(now_as_http_date()));
            }
            Ok(response)
        })
    }
}

fn never_indexed(mut value: HeaderValue) -> HeaderValue {
    value.set_sensitive(true);
    value
}

fn now_as_http_date() -> HeaderValue {
    let date = httpdate::fmt_http_date(std::time::SystemTime::now());
    HeaderValue::from_str(&date).expect("an HTTP date is a valid header value")
}

/// A random (version 4) UUID, as kube-apiserver makes its `Audit-Id`.
fn new_id() -> HeaderValue {
    let id = uuid::Uuid::new_v4();
    let mut text = [0u8; uuid::fmt::Hyphenated::LENGTH];
    HeaderValue::from_str(id.hyphenated().encode_lower(&mut text))
        .expect("a UUID is a valid header value")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The id and, over HTTP/2, the date are never indexed; over HTTP/1.1
    /// the date is left to hyper.
    #[tokio::test]
    async fn per_response_values_are_sent_never_indexed() {
        let inner = tower::service_fn(|_: Request<()>| async {
            Ok::<_, std::convert::Infallible>(crate::proxy::full(200, "application/json", "{}"))
        });
        let mut service = ResponseHeadersLayer.layer(inner);
        let request = Request::builder()
            .version(http::Version::HTTP_2)
            .body(())
            .unwrap();
        let response = service.call(request).await.unwrap();
        let id = response.headers().get(REQUEST_ID).expect("an id");
        assert!(id.is_sensitive());
        assert_eq!(id.len(), 36);
        let date = response.headers().get(http::header::DATE).expect("a date");
        assert!(date.is_sensitive());
        let sent = httpdate::parse_http_date(date.to_str().unwrap()).expect("an HTTP date");
        let age = std::time::SystemTime::now()
            .duration_since(sent)
            .unwrap_or_default();
        assert!(age.as_secs() < 60, "{date:?}");

        let response = service.call(Request::new(())).await.unwrap();
        assert!(response.headers().get(REQUEST_ID).unwrap().is_sensitive());
        assert!(response.headers().get(http::header::DATE).is_none());
    }

    #[test]
    fn request_ids_are_random_uuids_and_differ() {
        let ids: std::collections::HashSet<_> = (0..100).map(|_| new_id()).collect();
        assert_eq!(ids.len(), 100);
        for id in ids {
            let text = id.to_str().expect("ASCII");
            let groups: Vec<usize> = text.split('-').map(str::len).collect();
            assert_eq!(groups, [8, 4, 4, 4, 12], "{text}");
            assert!(
                text.bytes()
                    .all(|b| b == b'-' || b.is_ascii_digit() || (b'a'..=b'f').contains(&b)),
                "{text}"
            );
            assert_eq!(&text[14..15], "4", "version 4: {text}");
            assert!("89ab".contains(&text[19..20]), "RFC 4122 variant: {text}");
        }
    }

    /// Responses are `no-cache, private` unless they say otherwise, except
    /// to the aggregation layer, which says it itself.
    #[tokio::test]
    async fn responses_are_private_unless_they_say_otherwise() {
        let inner = tower::service_fn(|request: Request<()>| async move {
            let mut response = crate::proxy::full(200, "application/json", "{}");
            if request.uri().path().ends_with("/public") {
                let public = HeaderValue::from_static("public");
                response
                    .headers_mut()
                    .insert(http::header::CACHE_CONTROL, public);
            }
            Ok::<_, std::convert::Infallible>(response)
        });
        let mut service = ResponseHeadersLayer.layer(inner);
        let mut cache_control = async |path: &str| {
            let request = Request::get(path).body(()).unwrap();
            let response = service.call(request).await.unwrap();
            let values = response.headers().get_all(http::header::CACHE_CONTROL);
            values
                .iter()
                .map(|v| v.to_str().unwrap().to_string())
                .collect::<Vec<_>>()
        };
        assert_eq!(
            cache_control("/clusters/c1/apis/example.com/v1/widgets").await,
            ["no-cache, private"]
        );
        assert_eq!(cache_control("/healthz").await, ["no-cache, private"]);
        assert_eq!(cache_control("/clusters/c1/public").await, ["public"]);
        assert!(
            cache_control("/apis/example.com/v1/widgets")
                .await
                .is_empty()
        );
    }

    /// A caller's id is echoed as it came, whatever its length, as
    /// kube-apiserver echoes it (`audit_init.go`: no truncation).
    #[tokio::test]
    async fn the_callers_id_is_echoed() {
        let inner = tower::service_fn(|request: Request<()>| async move {
            let seen = request.headers().get(REQUEST_ID).cloned();
            let mut response = crate::proxy::full(200, "application/json", "{}");
            response.extensions_mut().insert(seen);
            Ok::<_, std::convert::Infallible>(response)
        });
        let mut service = ResponseHeadersLayer.layer(inner);
        let long = "x".repeat(200);
        let request = Request::builder()
            .header(REQUEST_ID, long.as_str())
            .body(())
            .unwrap();
        let response = service.call(request).await.unwrap();
        assert_eq!(response.headers()[REQUEST_ID], long.as_str());
        let seen = response.extensions().get::<Option<HeaderValue>>().unwrap();
        assert_eq!(
            seen.as_ref().unwrap(),
            long.as_str(),
            "the handler sees it too"
        );
    }
}
