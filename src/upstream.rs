//! The one door to the provider's API: every read and write bindery makes on
//! behalf of a consumer goes through [`Upstream`], and a shared watch cache
//! answers the lists and watches it is asked for behind the same interface,
//! keyed by the typed provider request ([`CacheRead`]).

use crate::route::ResourceRequest;
pub use crate::sender::{BoxBody, BoxError, Sender, Sent};
use crate::table::jsonpath::Unsupported;
use crate::table::{Columns, RowParts};
pub use crate::translate::consumer_view::Translation;
use crate::wire::query::IncludeObject;
use bytes::Bytes;
use http_body_util::BodyExt;
use std::future::Future;
use std::pin::Pin;

/// Sends a request to the provider ([`Sender`]) and returns its response,
/// streaming; a watch cache in front of it answers the reads it is asked
/// for by [`CacheRead`], and only those.
pub trait Upstream: Sender {
    /// A LIST or WATCH answered from what this upstream holds, in provider
    /// terms; `None`: send it.
    fn cached<'a>(
        &'a self,
        _read: &'a CacheRead<'a>,
    ) -> Pin<Box<dyn Future<Output = Option<http::Response<BoxBody>>> + Send + 'a>> {
        Box::pin(async { None })
    }

    /// A LIST body already in the consumer's terms, when this upstream can
    /// answer `read` with objects it translated with `translation`
    /// (each object is translated once per change and translation key);
    /// `None`: send it.
    fn list_translated<'a>(
        &'a self,
        _read: &'a CacheRead<'a>,
        _translation: &'a Translation,
    ) -> Pin<Box<dyn Future<Output = Option<Vec<u8>>> + Send + 'a>> {
        Box::pin(async { None })
    }

    /// A Table's rows already made, when this upstream can answer `read`
    /// (a list, as [`Upstream::list_translated`] would) from objects it
    /// translated with `translation`: each row made by `rows` from an
    /// object's consumer form, once per change of the object and per
    /// [`RowMaker::key`]; with the list's metadata. `None`: no rows here
    /// (the caller renders them from a list, or asks the provider).
    fn rows_translated<'a>(
        &'a self,
        _read: &'a CacheRead<'a>,
        _translation: &'a Translation,
        _rows: &'a RowMaker<'a>,
    ) -> Pin<Box<dyn Future<Output = Option<Rows>> + Send + 'a>> {
        Box::pin(async { None })
    }

    /// A WATCH stream (newline-delimited JSON events) already in the
    /// consumer's terms, when this upstream can answer `read` from a shared
    /// stream whose objects it translates with `translation`, once per
    /// change; `None`: send it.
    fn watch_translated<'a>(
        &'a self,
        _read: &'a CacheRead<'a>,
        _translation: &'a Translation,
    ) -> Pin<Box<dyn Future<Output = Option<BoxBody>> + Send + 'a>> {
        Box::pin(async { None })
    }

    /// The consumer's form of `body`, the provider's answer to a JSON GET
    /// of the object `target` (in provider terms), when this upstream
    /// already made it with `translation` from the very same version of
    /// the object (as lists and watches use it); `None`: translate `body`.
    fn object_translated(
        &self,
        _target: &ResourceRequest,
        _body: &[u8],
        _translation: &Translation,
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

/// How a Table's rows are made from objects' consumer forms: the columns
/// of the resource's version, and what each row carries of its object.
/// Data, not a callback: the cache makes the rows itself. Rows made under
/// equal [`RowMaker::key`]s are equal for equal objects, so they may be
/// reused.
#[derive(Clone, Copy)]
pub struct RowMaker<'a> {
    pub columns: &'a Columns,
    pub include: IncludeObject,
}

impl RowMaker<'_> {
    pub fn key(&self) -> u64 {
        self.columns.row_key(self.include)
    }

    /// The row of an object's consumer form (JSON).
    pub fn row(&self, consumer: &[u8]) -> Result<RowParts, Unsupported> {
        let item = std::str::from_utf8(consumer).map_err(|_| Unsupported)?;
        self.columns.row_of(item, self.include)
    }
}

/// A list's rows, and the list's metadata (`resourceVersion`, `continue`,
/// `remainingItemCount`).
pub struct Rows {
    pub metadata: serde_json::Map<String, serde_json::Value>,
    pub rows: Vec<std::sync::Arc<RowParts>>,
}

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

impl Upstream for ProviderUpstream {}

impl Sender for ProviderUpstream {
    fn send(&self, request: http::Request<Bytes>) -> Sent<'_> {
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

impl Upstream for KubeUpstream {}

impl Sender for KubeUpstream {
    fn send(&self, request: http::Request<Bytes>) -> Sent<'_> {
        Box::pin(async move {
            let request = request.map(kube::client::Body::from);
            let response = self.client.send(request).await?;
            Ok(response.map(|body| body.map_err(|e| Box::new(e) as BoxError).boxed_unsync()))
        })
    }
}
