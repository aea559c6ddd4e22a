//! Reading a request body, bounded in size and in time. The size is
//! kube-apiserver's limit (3 MiB), or less where an endpoint reads small
//! forms. The time is bindery's rule: the whole body must have arrived
//! within the body timeout of bindery starting to read it (60 s by
//! default, kube-apiserver's `--request-timeout` for a non-long-running
//! request; `--request-body-timeout`), else the answer is kube-apiserver's
//! 504 `Timeout`. Bodies are read only after the caller is authenticated
//! and authorized, so an unknown caller cannot make bindery wait.

use crate::status::ApiError;
use bytes::Bytes;
use http_body_util::{BodyExt, Limited};
use std::time::Duration;

/// kube-apiserver's limit on request bodies.
pub const MAX_BODY_BYTES: usize = 3 * 1024 * 1024;

/// kube-apiserver's default timeout of a non-long-running request.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

/// The body, at most `limit` bytes, arrived within `timeout`.
pub async fn read<B>(body: B, limit: usize, timeout: Duration) -> Result<Bytes, ApiError>
where
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: std::error::Error + Send + Sync + 'static,
{
    match tokio::time::timeout(timeout, Limited::new(body, limit).collect()).await {
        Ok(Ok(collected)) => Ok(collected.to_bytes()),
        Ok(Err(_)) => Err(ApiError::too_large(
            "the server has received too large a request body",
        )),
        Err(_) => Err(ApiError::timeout()),
    }
}

/// Marks a resource request whose body was larger than kube-apiserver
/// reads (it is handed on empty): the request is still read in
/// kube-apiserver's order, which refuses its Accept (406) and Content-Type
/// (415) before it finds the body too large (`forward::request`).
#[derive(Clone, Copy, Debug)]
pub struct TooLarge;

/// A resource request's body, read as [`read`] reads it; one larger than
/// the limit is handed on empty, with [`TooLarge`] kept in `extensions`.
pub async fn read_for_resource<B>(
    body: B,
    timeout: Duration,
    extensions: &mut http::Extensions,
) -> Result<Bytes, ApiError>
where
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: std::error::Error + Send + Sync + 'static,
{
    match read(body, MAX_BODY_BYTES, timeout).await {
        Err(error) if error.code == 413 => {
            extensions.insert(TooLarge);
            Ok(Bytes::new())
        }
        read => read,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::{Full, StreamBody};

    #[tokio::test]
    async fn a_body_within_the_limit_is_read_whole() {
        let body = Full::new(Bytes::from_static(b"{}"));
        assert_eq!(
            read(body, 2, DEFAULT_TIMEOUT).await.unwrap(),
            Bytes::from_static(b"{}")
        );
    }

    #[tokio::test]
    async fn a_larger_body_is_kube_apiservers_413() {
        let error = read(Full::new(Bytes::from_static(b"{}")), 1, DEFAULT_TIMEOUT)
            .await
            .unwrap_err();
        assert_eq!((error.code, error.reason), (413, "RequestEntityTooLarge"));
        assert_eq!(
            error.message,
            "the server has received too large a request body"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_body_that_does_not_arrive_in_time_is_kube_apiservers_504() {
        use futures::StreamExt;
        // A few bytes, then nothing more: the client keeps the body open.
        let chunks = futures::stream::iter([Ok::<_, std::io::Error>(http_body::Frame::data(
            Bytes::from_static(b"{\"a\":"),
        ))])
        .chain(futures::stream::pending());
        let error = read(
            StreamBody::new(chunks),
            MAX_BODY_BYTES,
            Duration::from_secs(2),
        )
        .await
        .unwrap_err();
        assert_eq!(
            error.to_status(),
            serde_json::json!({"kind": "Status", "apiVersion": "v1", "metadata": {},
                "status": "Failure",
                "message": "Timeout: request did not complete within the allotted timeout",
                "reason": "Timeout", "details": {}, "code": 504})
        );
    }
}
