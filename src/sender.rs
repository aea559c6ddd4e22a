//! Sending one request to an upstream (the provider, its watch cache, a
//! consumer's app cluster) and streaming its answer: the body every layer
//! passes on, and the one method every upstream has. A leaf of the module
//! graph, so that the forwarding store sends without knowing what else an
//! upstream does.

use bytes::Bytes;
use http_body_util::combinators::UnsyncBoxBody;
use std::future::Future;
use std::pin::Pin;

/// A streaming response body.
pub type BoxBody = UnsyncBoxBody<Bytes, BoxError>;
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// An answer on its way: the upstream's response, streaming.
pub type Sent<'a> =
    Pin<Box<dyn Future<Output = Result<http::Response<BoxBody>, BoxError>> + Send + 'a>>;

/// Sends a request upstream and returns its response, streaming.
pub trait Sender: Send + Sync {
    /// Sends `request`. A request made from a typed provider request
    /// carries its target (a `ResourceRequest` in provider terms) in its
    /// extensions, so nothing reads its path again.
    fn send(&self, request: http::Request<Bytes>) -> Sent<'_>;
}
