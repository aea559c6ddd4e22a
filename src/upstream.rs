//! The one door to the provider's API: every read and write bindery makes on
//! behalf of a consumer goes through [`Upstream`], and a shared watch cache
//! answers the lists and watches it is asked for behind the same interface,
//! keyed by the typed provider request ([`CacheRead`]).

use crate::route::ResourceRequest;
use crate::table::RowParts;
use crate::table::jsonpath::Unsupported;
use bytes::Bytes;
use http_body_util::BodyExt;
use http_body_util::combinators::UnsyncBoxBody;
use std::future::Future;
use std::pin::Pin;

/// A streaming response body.
pub type BoxBody = UnsyncBoxBody<Bytes, BoxError>;
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Sends a request to the provider and returns its response, streaming; a
/// watch cache in front of it answers the reads it is asked for by
/// [`CacheRead`], and only those.
pub trait Upstream: Send + Sync {
    /// Sends `request` to the provider. A request made from a typed provider
    /// request carries its target (a [`ResourceRequest`] in provider terms)
    /// in its extensions, so nothing reads its path again.
    fn send(
        &self,
        request: http::Request<Bytes>,
    ) -> Pin<Box<dyn Future<Output = Result<http::Response<BoxBody>, BoxError>> + Send + '_>>;

    /// A LIST or WATCH answered from what this upstream holds, in provider
    /// terms; `None`: send it.
    fn cached<'a>(
        &'a self,
        _read: &'a CacheRead<'a>,
    ) -> Pin<Box<dyn Future<Output = Option<http::Response<BoxBody>>> + Send + 'a>> {
        Box::pin(async { None })
    }

    /// A LIST body already in the consumer's terms, when this upstream can
    /// answer `read` with objects it translated with `translation()`
    /// (called only then; each object is translated once per change);
    /// `None`: send it.
    fn list_translated<'a>(
        &'a self,
        _read: &'a CacheRead<'a>,
        _translation: &'a (dyn Fn() -> Translation + Send + Sync),
    ) -> Pin<Box<dyn Future<Output = Option<Vec<u8>>> + Send + 'a>> {
        Box::pin(async { None })
    }

    /// A Table's rows already made, when this upstream can answer `read`
    /// (a list, as [`Upstream::list_translated`] would) from objects it
    /// translated with `translation()`: each row made by `rows` from an
    /// object's consumer form, once per change of the object and per
    /// [`RowMaker::key`]; with the list's metadata. `None`: no rows here
    /// (the caller renders them from a list, or asks the provider).
    fn rows_translated<'a>(
        &'a self,
        _read: &'a CacheRead<'a>,
        _translation: &'a (dyn Fn() -> Translation + Send + Sync),
        _rows: &'a RowMaker<'a>,
    ) -> Pin<Box<dyn Future<Output = Option<Rows>> + Send + 'a>> {
        Box::pin(async { None })
    }

    /// A WATCH stream (newline-delimited JSON events) already in the
    /// consumer's terms, when this upstream can answer `read` from a shared
    /// stream whose objects it translates with `translation()`, once per
    /// change; `None`: send it.
    fn watch_translated<'a>(
        &'a self,
        _read: &'a CacheRead<'a>,
        _translation: &'a (dyn Fn() -> Translation + Send + Sync),
    ) -> Pin<Box<dyn Future<Output = Option<BoxBody>> + Send + 'a>> {
        Box::pin(async { None })
    }

    /// The consumer's form of `body`, the provider's answer to a JSON GET
    /// of the object `target` (in provider terms), when this upstream
    /// already made it with `translation()` from the very same version of
    /// the object (as lists and watches use it); `None`: translate `body`.
    fn object_translated(
        &self,
        _target: &ResourceRequest,
        _body: &[u8],
        _translation: &(dyn Fn() -> Translation + Send + Sync),
    ) -> Option<Bytes> {
        None
    }

    /// How many objects of `group`/`resource` carry the identity labels
    /// `consumer` and `export` (an export label's value), when this
    /// upstream holds the resource listed; `None` when it cannot tell.
    fn owned_by(
        &self,
        _group: &str,
        _resource: &str,
        _consumer: &str,
        _export: &str,
    ) -> Option<u64> {
        None
    }
}

/// A read a watch cache may answer: what the translation built (the
/// resource in provider terms, the query it encoded), and the request as it
/// would be sent (its credentials, for what the cache asks the provider on
/// its behalf).
pub struct CacheRead<'a> {
    pub target: &'a ResourceRequest,
    pub query: &'a [(String, String)],
    pub sent: &'a http::Request<Bytes>,
    /// On a list across namespaces: the label selector bindery added to
    /// narrow it to one consumer's objects. The caller did not ask for it,
    /// so it bounds the list (what "more objects follow" and
    /// `remainingItemCount` count) rather than selecting in it, as in the
    /// consumer's own cluster.
    pub identity_scope: Option<&'a str>,
}

/// How a Table's rows are made from objects' consumer forms: rows made
/// under equal `key`s are equal for equal objects, so they may be reused.
pub struct RowMaker<'a> {
    pub key: u64,
    pub make: &'a (dyn Fn(&[u8]) -> Result<RowParts, Unsupported> + Send + Sync),
}

/// A list's rows, and the list's metadata (`resourceVersion`, `continue`,
/// `remainingItemCount`).
pub struct Rows {
    pub metadata: serde_json::Map<String, serde_json::Value>,
    pub rows: Vec<std::sync::Arc<RowParts>>,
}

/// How one consumer sees the objects of one resource: `item` turns a
/// provider object's JSON into the consumer's (`None`: not the consumer's).
/// Equal `key`s translate alike, so their results may be reused.
/// `continue_token` turns the provider's continue token into the one the
/// consumer is given.
pub struct Translation {
    pub key: u64,
    pub item: ItemTranslator,
    pub continue_token: Box<dyn Fn(&str) -> String + Send + Sync>,
}

/// A provider object's JSON into a consumer's (`None`: not the consumer's).
pub type ItemTranslator = Box<dyn Fn(&[u8]) -> Option<Vec<u8>> + Send + Sync>;

/// The provider as the proxy reaches it: a plain hyper client with the TLS,
/// server address and credentials kube-rs makes from the provider's config,
/// but without what a `kube::Client` adds on the way: its request buffer
/// (a task every request passes through, a cross-thread hop on a
/// latency-bound path) and its retries (kube-rs retries 429, 503 and 504 up
/// to 15 times, so the consumer would wait out the provider's throttling
/// instead of getting kube-apiserver's answer and its `Retry-After`).
pub struct ProviderUpstream {
    service: tower::util::BoxCloneSyncService<
        http::Request<http_body_util::Full<Bytes>>,
        http::Response<hyper::body::Incoming>,
        BoxError,
    >,
}

impl ProviderUpstream {
    pub fn new(config: &kube::Config) -> kube::Result<Self> {
        use kube::client::ConfigExt;
        use tower::ServiceBuilder;
        let mut http = hyper_util::client::legacy::connect::HttpConnector::new();
        http.enforce_http(false);
        http.set_nodelay(true);
        http.set_connect_timeout(config.connect_timeout);
        let https = config.rustls_https_connector_with_connector(http)?;
        let client =
            hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
                .build(https);
        let service = ServiceBuilder::new()
            .layer(crate::metrics::provider::ProviderMetricsLayer::new(
                &config.cluster_url,
            ))
            .layer(config.base_uri_layer())
            .option_layer(config.auth_layer()?)
            .layer(config.extra_headers_layer()?)
            .service(tower::ServiceExt::map_err(client, BoxError::from));
        Ok(Self {
            service: tower::util::BoxCloneSyncService::new(service),
        })
    }
}

impl Upstream for ProviderUpstream {
    fn send(
        &self,
        request: http::Request<Bytes>,
    ) -> Pin<Box<dyn Future<Output = Result<http::Response<BoxBody>, BoxError>> + Send + '_>> {
        let call = tower::ServiceExt::oneshot(
            self.service.clone(),
            request.map(http_body_util::Full::new),
        );
        Box::pin(async move {
            let response = call.await?;
            Ok(response.map(|body| body.map_err(|e| Box::new(e) as BoxError).boxed_unsync()))
        })
    }
}

/// A server reached with a kube-rs client (an app cluster's, for the
/// objects claimed there).
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
