//! Response compression as kube-apiserver does it (its
//! `APIResponseCompression`, on by default): an answer of more than 128 KiB
//! to a request whose `Accept-Encoding` names `gzip` goes out gzip-compressed
//! at level 1, with `Content-Encoding: gzip` and `Vary: Accept-Encoding`.
//! kubectl and every client-go client ask for gzip (Go's transport does,
//! unless compression is disabled), so large lists and Tables reach them
//! compressed from a local CRD; from bindery now too. Watches are never
//! compressed (kube-apiserver writes their events unbuffered), nor is an
//! answer that already names an encoding.

use crate::upstream::{BoxBody, BoxError};
use bytes::Bytes;
use flate2::Compression;
use flate2::write::GzEncoder;
use futures::future::BoxFuture;
use http::header::{ACCEPT_ENCODING, CONTENT_ENCODING, CONTENT_LENGTH, VARY};
use http::{HeaderMap, HeaderValue, Request, Response};
use http_body::Body as _;
use http_body_util::{BodyExt, Full};
use std::io::Write as _;
use std::task::{Context, Poll};
use tower::{Layer, Service};

/// kube-apiserver's `defaultGzipThresholdBytes`: answers no longer than this
/// go out as they are.
pub const THRESHOLD: u64 = 128 * 1024;

/// Whether the request asks for gzip the way kube-apiserver reads it: the
/// first `Accept-Encoding` header's comma-separated tokens, each trimmed,
/// one of them exactly `gzip` (so `gzip;q=0.5` is not, nor is `*`).
pub fn accepts_gzip(headers: &HeaderMap) -> bool {
    headers.get(ACCEPT_ENCODING).is_some_and(|value| {
        String::from_utf8_lossy(value.as_bytes())
            .split(',')
            .any(|token| token.trim() == "gzip")
    })
}

/// The size of an answer to compress: its body's known length, when that is
/// over [`THRESHOLD`] and no encoding is set. Streamed bodies (watches) have
/// no known length.
fn compressible(response: &Response<BoxBody>) -> Option<u64> {
    if response.headers().contains_key(CONTENT_ENCODING) {
        return None;
    }
    response
        .body()
        .size_hint()
        .exact()
        .filter(|size| *size > THRESHOLD)
}

/// `bytes` gzip-compressed at level 1 (kube-apiserver's
/// `defaultGzipContentEncodingLevel`).
pub fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut encoder = GzEncoder::new(Vec::with_capacity(bytes.len() / 4), Compression::fast());
    encoder
        .write_all(bytes)
        .and_then(|()| encoder.finish())
        .expect("writing to a Vec cannot fail")
}

#[derive(Clone, Default)]
pub struct CompressLayer;

impl<S> Layer<S> for CompressLayer {
    type Service = Compress<S>;
    fn layer(&self, inner: S) -> Self::Service {
        Compress { inner }
    }
}

#[derive(Clone)]
pub struct Compress<S> {
    inner: S,
}

impl<S, B> Service<Request<B>> for Compress<S>
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

    fn call(&mut self, request: Request<B>) -> Self::Future {
        let gzip_accepted = accepts_gzip(request.headers());
        let future = self.inner.call(request);
        Box::pin(async move {
            let response = future.await?;
            if !gzip_accepted || compressible(&response).is_none() {
                return Ok(response);
            }
            Ok(compressed(response).await)
        })
    }
}

/// The answer with its body gzipped. Its body has a known length, so it is
/// whole already: collecting it does not wait.
async fn compressed(response: Response<BoxBody>) -> Response<BoxBody> {
    let (mut parts, body) = response.into_parts();
    let bytes = match body.collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(error) => return Response::from_parts(parts, failed(error)),
    };
    let headers = &mut parts.headers;
    headers.remove(CONTENT_LENGTH);
    headers.insert(CONTENT_ENCODING, HeaderValue::from_static("gzip"));
    headers.append(VARY, HeaderValue::from_static("Accept-Encoding"));
    let body = Full::new(Bytes::from(gzip(&bytes)))
        .map_err(|never| match never {})
        .boxed_unsync();
    Response::from_parts(parts, body)
}

/// A body that fails as the one it replaces did.
fn failed(error: BoxError) -> BoxBody {
    let frames = futures::stream::once(async move { Err::<http_body::Frame<Bytes>, _>(error) });
    http_body_util::StreamBody::new(frames).boxed_unsync()
}

#[cfg(test)]
mod tests {
    use super::*;
    use flate2::read::GzDecoder;
    use std::io::Read as _;

    fn accepting(value: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(ACCEPT_ENCODING, HeaderValue::from_str(value).unwrap());
        headers
    }

    #[test]
    fn gzip_is_asked_for_by_an_exact_token_of_the_first_header() {
        for yes in [
            "gzip",
            "gzip, deflate",
            "deflate,gzip",
            " br , gzip ",
            "x,,gzip",
        ] {
            assert!(accepts_gzip(&accepting(yes)), "{yes:?}");
        }
        for no in [
            "",
            "deflate",
            "*",
            "gzip;q=1",
            "GZIP",
            "x-gzip",
            "gzip deflate",
        ] {
            assert!(!accepts_gzip(&accepting(no)), "{no:?}");
        }
        assert!(!accepts_gzip(&HeaderMap::new()));
        // Only the first header counts, as Go's Header.Get reads it.
        let mut two = accepting("deflate");
        two.append(ACCEPT_ENCODING, HeaderValue::from_static("gzip"));
        assert!(!accepts_gzip(&two));
    }

    async fn answer(
        accept_encoding: Option<&str>,
        response: Response<BoxBody>,
    ) -> Response<BoxBody> {
        let response = std::sync::Mutex::new(Some(response));
        let inner = tower::service_fn(move |_: Request<()>| {
            let response = response.lock().unwrap().take().expect("one request");
            async move { Ok::<_, std::convert::Infallible>(response) }
        });
        let mut request = Request::builder();
        if let Some(value) = accept_encoding {
            request = request.header(ACCEPT_ENCODING, value);
        }
        CompressLayer
            .layer(inner)
            .call(request.body(()).unwrap())
            .await
            .unwrap()
    }

    fn json_of(size: usize) -> (Vec<u8>, Response<BoxBody>) {
        let text: Vec<u8> = (0..size).map(|i| b"abcdefgh{}\"0123"[i % 15]).collect();
        let response = crate::proxy::full(200, "application/json", text.clone());
        (text, response)
    }

    async fn body_of(response: Response<BoxBody>) -> Vec<u8> {
        response
            .into_body()
            .collect()
            .await
            .unwrap()
            .to_bytes()
            .to_vec()
    }

    #[tokio::test]
    async fn an_answer_over_128_kib_goes_out_gzipped_when_asked_for() {
        let (text, response) = json_of(THRESHOLD as usize + 1);
        let response = answer(Some("gzip"), response).await;
        assert_eq!(response.headers()[CONTENT_ENCODING], "gzip");
        assert_eq!(response.headers()[VARY], "Accept-Encoding");
        assert_eq!(
            response.headers()[http::header::CONTENT_TYPE],
            "application/json"
        );
        let mut decoded = Vec::new();
        GzDecoder::new(&body_of(response).await[..])
            .read_to_end(&mut decoded)
            .unwrap();
        assert_eq!(decoded, text);
    }

    #[tokio::test]
    async fn small_answers_unasked_and_already_encoded_ones_go_as_they_are() {
        for (accept, size) in [
            (Some("gzip"), THRESHOLD as usize),
            (None, THRESHOLD as usize * 2),
            (Some("deflate"), THRESHOLD as usize * 2),
        ] {
            let (text, response) = json_of(size);
            let response = answer(accept, response).await;
            assert!(!response.headers().contains_key(CONTENT_ENCODING));
            assert!(!response.headers().contains_key(VARY));
            assert_eq!(body_of(response).await, text, "{accept:?} {size}");
        }
        let (text, mut response) = json_of(THRESHOLD as usize * 2);
        response
            .headers_mut()
            .insert(CONTENT_ENCODING, HeaderValue::from_static("identity"));
        let response = answer(Some("gzip"), response).await;
        assert_eq!(body_of(response).await, text);
    }

    #[tokio::test]
    async fn streamed_answers_such_as_watches_are_never_compressed() {
        let (tx, rx) = tokio::sync::mpsc::channel(1);
        tx.send(Bytes::from(vec![b'x'; THRESHOLD as usize * 2]))
            .await
            .unwrap();
        drop(tx);
        let streamed = Response::new(crate::forward::watch::channel_body(rx));
        let response = answer(Some("gzip"), streamed).await;
        assert!(!response.headers().contains_key(CONTENT_ENCODING));
        assert_eq!(body_of(response).await.len(), THRESHOLD as usize * 2);
    }
}
