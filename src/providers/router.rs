//! The router's serving (`bindery route`): the app cluster's aggregator
//! calls it as it calls any aggregated API server. A caller is its front
//! proxy (a client certificate of the requestheader CA the app cluster
//! publishes, an allowed name) on behalf of the user it names; a resource
//! request is authorized by the app cluster (a SubjectAccessReview), then
//! sent to the provider that owns it ([`super::routes`]) at that provider's
//! bindery, with the consumer's own credential, and its answer passed back
//! as that bindery made it ([`super::answers`]; [`super::requests`]
//! changes what a merged version in the request must). Reads that ask every provider are
//! [`super::merged`]'s. Discovery and OpenAPI are the default provider's;
//! the other providers' schemas are judged at the start and again while it
//! runs, and a provider whose schema breaks the default's is refused
//! ([`super::schema_reads`]).

use super::answers::{passed_back, read_list};
use super::requests::{annotations_of, rewritten_query, routed_body};
use super::routes::Routes;
use super::schema_reads::{Held, Judged, judge};
use super::version;
use crate::auth::{PeerCertificate, RequestUser};
use crate::authz::Authorizer;
use crate::authz::attributes::Attributes;
use crate::forward::encode::ErrorForm;
use crate::resolved::Resolved;
use crate::route::{ApiPath, Endpoint, ResourceRequest, Verb};
use crate::server::Incoming;
use crate::status::ApiError;
use crate::upstream::BoxBody;
use bytes::Bytes;
use futures::StreamExt;
use http::header::ACCEPT;
use http::{HeaderMap, Method, Response, StatusCode};
use k8s_openapi::api::core::v1::Namespace;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::Value;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// One provider as the router reaches it: the consumer endpoint of its
/// bindery (`https://<bindery>/clusters/<consumer>`), with the consumer's
/// credential.
pub struct Provider {
    pub name: String,
    pub client: kube::Client,
}

/// The app cluster's front proxy, as its kube-apiserver publishes it.
pub struct FrontProxy {
    pub ca: crate::auth::trust::CaVerifier,
    /// Common names its certificate may have; empty: any.
    pub allowed_names: Vec<String>,
}

/// Which provider owns each namespace, as the app cluster's Namespaces
/// say now.
#[derive(Clone)]
pub(super) struct Ownership {
    pub(super) routes: Routes,
    pub(super) namespaces: Store<Namespace>,
    /// Moves on whenever a Namespace is seen to change provider.
    pub(super) moved: tokio::sync::watch::Receiver<u64>,
}

/// An app-cluster Namespace's labels, read where the store keeps them (not
/// copied: they are looked at for every entry of a merged list and every
/// event of a merged watch).
pub(super) struct Labels(Option<Arc<Namespace>>);

impl Labels {
    pub(super) fn as_ref(&self) -> Option<&std::collections::BTreeMap<String, String>> {
        self.0.as_ref().and_then(|ns| ns.metadata.labels.as_ref())
    }
}

impl Ownership {
    pub(super) fn labels(&self, namespace: &str) -> Labels {
        Labels(self.namespaces.get(&ObjectRef::new(namespace)))
    }

    /// The provider that owns `namespace`.
    pub(super) fn of(&self, namespace: &str) -> Result<usize, ApiError> {
        self.routes
            .of_namespace(namespace, self.labels(namespace).as_ref())
    }

    /// Whether provider `index` owns `namespace`.
    pub(super) fn owns(&self, index: usize, namespace: &str) -> bool {
        self.of(namespace).ok() == Some(index)
    }

    /// Whether provider `index` owns the object with `metadata`: its
    /// namespace's, or, where the namespace routes objects, the one the
    /// object names.
    pub(super) fn shows(&self, index: usize, metadata: &Value) -> bool {
        let Some(namespace) = metadata["namespace"].as_str() else {
            return true;
        };
        let labels = self.labels(namespace);
        self.routes
            .of_object(namespace, labels.as_ref(), metadata.get("annotations"))
            .ok()
            == Some(index)
    }
}

/// What the router holds.
pub struct Router {
    pub(super) routes: Routes,
    /// In the order of `routes`.
    pub(super) providers: Vec<kube::Client>,
    pub(super) app: kube::Client,
    pub(super) front_proxy: FrontProxy,
    pub(super) ownership: Ownership,
    pub(super) authorizer: Authorizer,
    /// Whether each resource of a group/version is namespaced, as the
    /// default provider's discovery says, and when that was read.
    pub(super) scopes: Mutex<HashMap<String, Scopes>>,
    /// How each provider's schema was last judged.
    pub(super) held: Held,
}

/// Whether each resource of one group/version is namespaced, and when
/// that was read.
type Scopes = (Instant, HashMap<String, bool>);

/// The scope the app cluster's decisions are cached under.
const AUTHORIZATION_SCOPE: &str = "router";

/// How long a group/version's discovery is kept.
const SCOPES_KEPT: Duration = Duration::from_secs(30);

/// The request headers a provider is given; the rest stay with the router.
/// With `accept-encoding`, a provider's bindery compresses a large answer
/// the router passes back as kube-apiserver would.
const FORWARDED_REQUEST_HEADERS: [&str; 5] = [
    "accept",
    "accept-encoding",
    "content-type",
    "user-agent",
    "audit-id",
];

impl Router {
    /// The router of `app`'s bound groups across `providers`, `default`
    /// among them, recognising `front_proxy`. Serves once it has read the
    /// app cluster's Namespaces (so that no request goes to the wrong
    /// provider while it has not).
    pub async fn new(
        app: kube::Client,
        providers: Vec<Provider>,
        default: &str,
        front_proxy: FrontProxy,
        teller: &super::events::Teller,
    ) -> anyhow::Result<Arc<Self>> {
        let names: Vec<String> = providers.iter().map(|p| p.name.clone()).collect();
        let routes = Routes::new(names, default).map_err(anyhow::Error::msg)?;
        let mut by_name: HashMap<String, kube::Client> = providers
            .into_iter()
            .map(|provider| (provider.name, provider.client))
            .collect();
        let providers: Vec<kube::Client> = routes
            .names()
            .iter()
            .filter_map(|name| by_name.remove(name))
            .collect();
        let (namespaces, writer) = reflector::store::<Namespace>();
        let watch = reflector::reflector(
            writer,
            watcher(
                kube::Api::<Namespace>::all(app.clone()),
                watcher::Config::default(),
            ),
        )
        .default_backoff()
        .applied_objects();
        let (moves, moved) = tokio::sync::watch::channel(0u64);
        let mut providers_seen: HashMap<String, Option<String>> = HashMap::new();
        tokio::spawn(watch.for_each(move |namespace| {
            if let Ok(namespace) = namespace {
                let name = namespace.metadata.name.clone().unwrap_or_default();
                let provider = namespace
                    .metadata
                    .labels
                    .as_ref()
                    .and_then(|labels| labels.get(super::routes::PROVIDER_LABEL).cloned());
                let before = providers_seen.insert(name, provider.clone());
                if before.is_some_and(|before| before != provider) {
                    moves.send_modify(|generation| *generation += 1);
                }
            }
            std::future::ready(())
        }));
        let judged = judge(&routes, &providers).await.map_err(|error| {
            anyhow::anyhow!(
                "the default provider {}'s schema cannot be read: {error}",
                routes.names()[routes.default()]
            )
        })?;
        let refused: Vec<String> = judged
            .iter()
            .flat_map(|judged| match judged {
                Judged::Breaks(reasons) => reasons.clone(),
                Judged::Unread(_) => Vec::new(),
            })
            .collect();
        for (name, judged) in routes.names().iter().zip(&judged) {
            if let Judged::Unread(why) = judged {
                tracing::warn!(provider = %name, %why, "a provider's schema cannot be read; its requests are refused until it is");
            }
        }
        if !refused.is_empty() {
            let why = format!(
                "a provider's schema is not compatible with the default provider's {}:\n{}",
                routes.names()[routes.default()],
                refused.join("\n")
            );
            teller.warn(super::events::REFUSED, &why).await;
            anyhow::bail!(why);
        }
        tokio::time::timeout(Duration::from_secs(60), namespaces.wait_until_ready())
            .await
            .map_err(|_| anyhow::anyhow!("the app cluster's Namespaces were not read in 60 s"))??;
        Ok(Arc::new(Self {
            ownership: Ownership {
                routes: routes.clone(),
                namespaces,
                moved,
            },
            routes,
            providers,
            app,
            front_proxy,
            authorizer: Authorizer::new(Default::default()),
            scopes: Mutex::new(HashMap::new()),
            held: Held::new(judged),
        }))
    }

    /// Serves one request.
    pub async fn serve(self: Arc<Self>, request: Incoming) -> Response<BoxBody> {
        let resolved = Resolved::of(request.method(), request.uri());
        let errors = ErrorForm::of(request.headers(), Some(&resolved.query));
        let (parts, body) = request.into_parts();
        match self.try_serve(&resolved, parts, body).await {
            Ok(response) => response,
            Err(error) => errors.error(&error),
        }
    }

    async fn try_serve(
        &self,
        resolved: &Resolved,
        parts: http::request::Parts,
        body: crate::server::unread::Unread<hyper::body::Incoming>,
    ) -> Result<Response<BoxBody>, ApiError> {
        let path = match &resolved.endpoint {
            Endpoint::Health => return Ok(crate::proxy::full(200, "text/plain", "ok")),
            Endpoint::Aggregated { path } => path,
            _ => return Err(ApiError::page_not_found()),
        };
        let user = self.caller(&parts)?;
        let ApiPath::Resource(resource) = path else {
            // Discovery and OpenAPI: one schema, the default provider's.
            if parts.method != Method::GET {
                return Err(ApiError::route_method_not_allowed());
            }
            return self
                .forward(self.routes.default(), &parts, Bytes::new())
                .await;
        };
        let user = user.ok_or_else(ApiError::unauthorized)?;
        let verb = resolved.verb.ok_or_else(|| {
            // kube-apiserver names no verb for a method it has none for.
            ApiError::method_not_allowed("", &resource.group, &resource.resource)
        })?;
        let attributes = Attributes::of(user, verb, resource);
        self.authorizer
            .authorize(&self.app, AUTHORIZATION_SCOPE, &attributes)
            .await?;
        let body = crate::request_body::read(
            body,
            crate::request_body::MAX_BODY_BYTES,
            crate::request_body::DEFAULT_TIMEOUT,
        )
        .await?;
        match &resource.namespace {
            Some(namespace)
                if super::routes::routes_objects(self.ownership.labels(namespace).as_ref()) =>
            {
                self.object_routed(&parts, body, resource, verb, namespace)
                    .await
            }
            Some(namespace) => {
                let index = self.provider_of(namespace, verb)?;
                let response = self.forward(index, &parts, body).await?;
                Ok(match verb {
                    Verb::Watch if response.status().is_success() => {
                        self.ended_when_moved(response, namespace, index)
                    }
                    _ => response,
                })
            }
            None if !self.namespaced(resource).await => {
                self.forward(self.routes.default(), &parts, body).await
            }
            None => match verb {
                Verb::List | Verb::DeleteCollection => self.merged_list(&parts, body).await,
                Verb::Watch => self.merged_watch(&parts).await,
                _ => self.forward(self.routes.default(), &parts, body).await,
            },
        }
    }

    /// A request in a namespace whose objects each name their provider:
    /// a create goes where its object says, a named request to the provider
    /// that holds the object, and reads of the namespace ask every provider.
    async fn object_routed(
        &self,
        parts: &http::request::Parts,
        body: Bytes,
        resource: &ResourceRequest,
        verb: Verb,
        namespace: &str,
    ) -> Result<Response<BoxBody>, ApiError> {
        let labels = self.ownership.labels(namespace);
        if !matches!(verb, Verb::Get | Verb::List | Verb::Watch) {
            super::routes::may_write(namespace, labels.as_ref())?;
        }
        let named = annotations_of(&parts.headers, &body);
        match verb {
            Verb::List | Verb::DeleteCollection => self.merged_list(parts, body).await,
            Verb::Watch => self.merged_watch(parts).await,
            Verb::Create => {
                let index = self
                    .routes
                    .of_object(namespace, labels.as_ref(), named.as_ref())?;
                self.forward(index, parts, body).await
            }
            _ => {
                let index = self.locate(resource, namespace).await?;
                let asked = named
                    .as_ref()
                    .and_then(|a| a.get(super::routes::OBJECT_PROVIDER_ANNOTATION))
                    .and_then(Value::as_str);
                if let Some(asked) = asked.filter(|asked| *asked != self.routes.names()[index]) {
                    return Err(ApiError::generic_invalid(format!(
                        "metadata.annotations[{}]: Invalid value: \"{asked}\": an object does not change provider; move its namespace",
                        super::routes::OBJECT_PROVIDER_ANNOTATION
                    )));
                }
                self.forward(index, parts, body).await
            }
        }
    }

    /// The provider that holds the object a named request in `namespace`
    /// is for: the namespace's provider first, then the others; the
    /// namespace's when none does (its 404 is the answer).
    async fn locate(&self, resource: &ResourceRequest, namespace: &str) -> Result<usize, ApiError> {
        let owner = self.provider_of(namespace, Verb::Get)?;
        let name = resource.name.as_deref().unwrap_or_default();
        let path = format!(
            "/apis/{}/{}/namespaces/{namespace}/{}/{}",
            resource.group,
            resource.version,
            resource.resource,
            percent_encoding::utf8_percent_encode(name, percent_encoding::NON_ALPHANUMERIC)
        );
        let order = std::iter::once(owner).chain((0..self.routes.len()).filter(|i| *i != owner));
        for index in order {
            let request = http::Request::get(&path)
                .header(ACCEPT, "application/json")
                .body(kube::client::Body::from(Vec::new()))
                .map_err(|e| ApiError::internal(e.to_string()))?;
            let Ok(answer) = self.send(index, request).await else {
                continue;
            };
            if answer.status() != StatusCode::OK {
                continue;
            }
            let Ok(object) = read_list(answer).await else {
                continue;
            };
            if self.ownership.shows(index, &object["metadata"]) {
                return Ok(index);
            }
        }
        Ok(owner)
    }

    /// The user the app cluster's front proxy calls for (`None`: it names
    /// none, as its availability checks do); 401 for anyone else.
    fn caller(&self, parts: &http::request::Parts) -> Result<Option<RequestUser>, ApiError> {
        let peer = parts
            .extensions
            .get::<PeerCertificate>()
            .ok_or_else(ApiError::unauthorized)?;
        let allowed = self.front_proxy.allowed_names.is_empty()
            || self.front_proxy.allowed_names.contains(&peer.common_name);
        if !allowed || !self.front_proxy.ca.verifies(&peer.der) {
            return Err(ApiError::unauthorized());
        }
        Ok(crate::auth::front_proxy::from_headers(&parts.headers))
    }

    /// The provider that owns `namespace`, for a request of `verb`: a
    /// write waits while the namespace moves.
    pub(super) fn provider_of(&self, namespace: &str, verb: Verb) -> Result<usize, ApiError> {
        let labels = self.ownership.labels(namespace);
        if !matches!(verb, Verb::Get | Verb::List | Verb::Watch) {
            super::routes::may_write(namespace, labels.as_ref())?;
        }
        self.routes.of_namespace(namespace, labels.as_ref())
    }

    /// Whether `resource` is namespaced, as the default provider's discovery
    /// says (kept a while); a resource it does not list is taken as
    /// cluster-scoped, and so asked of the default provider, which answers
    /// for it.
    pub(super) async fn namespaced(&self, resource: &ResourceRequest) -> bool {
        let key = format!("{}/{}", resource.group, resource.version);
        let kept = |scopes: &HashMap<String, Scopes>| {
            scopes
                .get(&key)
                .filter(|(read, _)| read.elapsed() < SCOPES_KEPT)
                .map(|(_, resources)| resources.get(&resource.resource).copied())
        };
        if let Some(known) = kept(&self.scopes.lock().unwrap_or_else(|e| e.into_inner())) {
            return known.unwrap_or(false);
        }
        let path = format!("/apis/{}/{}", resource.group, resource.version);
        let request = http::Request::get(path)
            .body(Vec::new())
            .expect("a GET request builds");
        let client = &self.providers[self.routes.default()];
        let Ok(list) = client.request::<Value>(request).await else {
            return false;
        };
        let resources: HashMap<String, bool> = list["resources"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|r| Some((r["name"].as_str()?.to_string(), r["namespaced"].as_bool()?)))
            .collect();
        let namespaced = resources.get(&resource.resource).copied().unwrap_or(false);
        self.scopes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(key, (Instant::now(), resources));
        namespaced
    }

    /// Sends the request to provider `index` (its resourceVersions, in the
    /// query and the body, made that provider's own) and passes its answer
    /// back as it came.
    async fn forward(
        &self,
        index: usize,
        parts: &http::request::Parts,
        body: Bytes,
    ) -> Result<Response<BoxBody>, ApiError> {
        let providers = self.routes.len();
        let query = parts.uri.query().map(|query| {
            rewritten_query(query, |key, value| match key {
                "resourceVersion" => Some(version::routed(value, index, providers)),
                _ => Some(value.to_string()),
            })
        });
        let body = routed_body(&parts.headers, body, index, providers);
        let request = self.request(parts, query.as_deref(), &parts.headers, body)?;
        let response = self.send(index, request).await?;
        Ok(passed_back(response))
    }

    /// The provider request for `parts` with `query` and `body`.
    pub(super) fn request(
        &self,
        parts: &http::request::Parts,
        query: Option<&str>,
        headers: &HeaderMap,
        body: Bytes,
    ) -> Result<http::Request<kube::client::Body>, ApiError> {
        let uri = match query {
            Some(query) if !query.is_empty() => format!("{}?{query}", parts.uri.path()),
            _ => parts.uri.path().to_string(),
        };
        let mut request = http::Request::builder()
            .method(parts.method.clone())
            .uri(uri);
        for name in FORWARDED_REQUEST_HEADERS {
            for value in headers.get_all(name) {
                request = request.header(name, value);
            }
        }
        request
            .body(kube::client::Body::from(body))
            .map_err(|e| ApiError::bad_request(e.to_string()))
    }

    pub(super) async fn send(
        &self,
        index: usize,
        request: http::Request<kube::client::Body>,
    ) -> Result<Response<kube::client::Body>, ApiError> {
        let name = &self.routes.names()[index];
        if let Some(refusal) = self.held.refusal(index, name) {
            return Err(refusal);
        }
        self.providers[index].send(request).await.map_err(|error| {
            tracing::warn!(provider = %name, %error, "a provider could not be reached");
            ApiError::unavailable(format!("the provider {name} cannot be reached"))
        })
    }
}
