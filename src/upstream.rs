//! The one door to the provider's API: every read and write bindery makes on
//! behalf of a consumer goes through [`Upstream`], so that a shared watch
//! cache can later answer lists and watches behind the same interface.

use bytes::Bytes;
use http_body_util::BodyExt;
use http_body_util::combinators::UnsyncBoxBody;
use std::future::Future;
use std::pin::Pin;

/// A streaming response body.
pub type BoxBody = UnsyncBoxBody<Bytes, BoxError>;
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Sends a request to the provider and returns its response, streaming.
pub trait Upstream: Send + Sync {
    fn send(
        &self,
        request: http::Request<Bytes>,
    ) -> Pin<Box<dyn Future<Output = Result<http::Response<BoxBody>, BoxError>> + Send + '_>>;
}

/// The provider reached with a kube-rs client.
pub struct KubeUpstream {
    client: kube::Client,
}

impl KubeUpstream {
    pub fn new(client: kube::Client) -> Self {
        Self { client }
    }
}

impl Upstream for KubeUpstream {
    fn send(
        &self,
        request: http::Request<Bytes>,
    ) -> Pin<Box<dyn Future<Output = Result<http::Response<BoxBody>, BoxError>> + Send + '_>> {
        Box::pin(async move {
            let request = request.map(kube::client::Body::from);
            let response = self.client.send(request).await?;
            Ok(response.map(|body| body.map_err(|e| Box::new(e) as BoxError).boxed_unsync()))
        })
    }
}
