//! The router's serving (`bindery route`): the app cluster's aggregator
//! calls it as it calls any aggregated API server. A caller is its front
//! proxy (a client certificate of the requestheader CA the app cluster
//! publishes, an allowed name) on behalf of the user it names; a resource
//! request is authorized by the app cluster (a SubjectAccessReview), then
//! sent to the provider that owns it ([`super::routes`]) at that provider's
//! bindery, with the consumer's own credential, and its answer passed back
//! as that bindery made it. Lists and watches across namespaces ask every
//! provider and are answered as one ([`super::merge`]). Discovery and
//! OpenAPI are the default provider's.

use super::merge::{self, Watches};
use super::routes::Routes;
use super::version::{self, Asked, Versions};
use crate::auth::{PeerCertificate, RequestUser};
use crate::authz::Authorizer;
use crate::authz::attributes::Attributes;
use crate::forward::encode::ErrorForm;
use crate::route::{ApiPath, Endpoint, ResourceRequest, Verb};
use crate::server::Incoming;
use crate::status::ApiError;
use crate::upstream::{BoxBody, BoxError};
use bytes::Bytes;
use futures::{SinkExt, StreamExt};
use http::header::{ACCEPT, CONTENT_TYPE, USER_AGENT};
use http::{HeaderMap, HeaderValue, Method, Response, StatusCode};
use http_body_util::{BodyExt, Full, Limited, StreamBody};
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
struct Ownership {
    routes: Routes,
    namespaces: Store<Namespace>,
    /// Moves on whenever a Namespace is seen to change provider.
    moved: tokio::sync::watch::Receiver<u64>,
}

impl Ownership {
    fn labels(&self, namespace: &str) -> Option<std::collections::BTreeMap<String, String>> {
        self.namespaces
            .get(&ObjectRef::new(namespace))
            .and_then(|ns| ns.metadata.labels.clone())
    }

    /// The provider that owns `namespace`.
    fn of(&self, namespace: &str) -> Result<usize, ApiError> {
        self.routes
            .of_namespace(namespace, self.labels(namespace).as_ref())
    }

    /// Whether provider `index` owns `namespace`.
    fn owns(&self, index: usize, namespace: &str) -> bool {
        self.of(namespace).ok() == Some(index)
    }

    /// Whether provider `index` owns the object with `metadata`: its
    /// namespace's, or, where the namespace routes objects, the one the
    /// object names.
    fn shows(&self, index: usize, metadata: &Value) -> bool {
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
    routes: Routes,
    /// In the order of `routes`.
    providers: Vec<kube::Client>,
    app: kube::Client,
    front_proxy: FrontProxy,
    ownership: Ownership,
    authorizer: Authorizer,
    /// Whether each resource of a group/version is namespaced, as the
    /// default provider's discovery says, and when that was read.
    scopes: Mutex<HashMap<String, Scopes>>,
}

/// Whether each resource of one group/version is namespaced, and when
/// that was read.
type Scopes = (Instant, HashMap<String, bool>);

/// The scope the app cluster's decisions are cached under.
const AUTHORIZATION_SCOPE: &str = "router";

/// How long a group/version's discovery is kept.
const SCOPES_KEPT: Duration = Duration::from_secs(30);

/// The largest answer of one provider a merged list reads.
const LARGEST_LIST: usize = 1 << 30;

/// The request headers a provider is given; the rest stay with the router.
const FORWARDED_REQUEST_HEADERS: [&str; 4] = ["accept", "content-type", "user-agent", "audit-id"];

/// The answer headers the caller is given.
const FORWARDED_ANSWER_HEADERS: [&str; 5] = [
    "content-type",
    "content-encoding",
    "warning",
    "retry-after",
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
        let refused = incompatible(&routes, &providers).await?;
        if !refused.is_empty() {
            anyhow::bail!(
                "a provider's schema is not compatible with the default provider's {}:\n{}",
                routes.names()[routes.default()],
                refused.join("\n")
            );
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
        }))
    }

    /// Serves one request.
    pub async fn serve(self: Arc<Self>, request: Incoming) -> Response<BoxBody> {
        let errors = ErrorForm::of(request.headers(), request.uri().query());
        let (parts, body) = request.into_parts();
        match self.try_serve(parts, body).await {
            Ok(response) => response,
            Err(error) => errors.error(&error),
        }
    }

    async fn try_serve(
        &self,
        parts: http::request::Parts,
        body: crate::server::unread::Unread<hyper::body::Incoming>,
    ) -> Result<Response<BoxBody>, ApiError> {
        let path = match crate::route::parse(parts.uri.path()) {
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
        let verb =
            Verb::of_query(&parts.method, &resource, parts.uri.query()).ok_or_else(|| {
                ApiError::method_not_allowed(
                    parts.method.as_str(),
                    &resource.group,
                    &resource.resource,
                )
            })?;
        let attributes = Attributes::of(user, verb, &resource);
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
                self.object_routed(&parts, body, &resource, verb, namespace)
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
            None if !self.namespaced(&resource).await => {
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
    fn provider_of(&self, namespace: &str, verb: Verb) -> Result<usize, ApiError> {
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
    async fn namespaced(&self, resource: &ResourceRequest) -> bool {
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
    fn request(
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

    async fn send(
        &self,
        index: usize,
        request: http::Request<kube::client::Body>,
    ) -> Result<Response<kube::client::Body>, ApiError> {
        let name = &self.routes.names()[index];
        self.providers[index].send(request).await.map_err(|error| {
            tracing::warn!(provider = %name, %error, "a provider could not be reached");
            ApiError::unavailable(format!("the provider {name} cannot be reached"))
        })
    }

    /// A list (or a deletecollection) across namespaces: every provider's,
    /// whole, joined into one at the merged resourceVersion. Paging is not
    /// merged: the whole list is the answer, as kube-apiserver's watch
    /// cache answers a list at any version.
    async fn merged_list(
        &self,
        parts: &http::request::Parts,
        body: Bytes,
    ) -> Result<Response<BoxBody>, ApiError> {
        let providers = self.routes.len();
        let raw = parts.uri.query().unwrap_or_default();
        let limit = query_value(raw, "limit")
            .parse::<usize>()
            .ok()
            .filter(|l| *l > 0);
        let token = query_value(raw, "continue");
        if parts.method == Method::GET && (limit.is_some() || !token.is_empty()) {
            return self.merged_page(parts, limit, &token).await;
        }
        let asked = Asked::parse(&query_value(raw, "resourceVersion"), providers)?;
        let headers = json_accept(&parts.headers)?;
        let requests = (0..providers).map(|index| {
            let query = rewritten_query(raw, |key, value| match key {
                "resourceVersion" => Some(asked.of(index).to_string()),
                "limit" | "continue" => None,
                _ => Some(value.to_string()),
            });
            let request = self.request(parts, Some(&query), &headers, body.clone());
            async move { self.send(index, request?).await }
        });
        let answers = futures::future::join_all(requests).await;
        let mut lists = Vec::with_capacity(providers);
        let mut versions = Versions::all("0", providers);
        for (index, answer) in answers.into_iter().enumerate() {
            let answer = answer?;
            if answer.status() != StatusCode::OK {
                return Ok(passed_back(answer));
            }
            let list = read_list(answer).await?;
            versions.advance(
                index,
                list["metadata"]["resourceVersion"]
                    .as_str()
                    .unwrap_or_default(),
            );
            lists.push(list);
        }
        let ownership = &self.ownership;
        let merged = merge::lists(lists, &versions, &|index, metadata| {
            ownership.shows(index, metadata)
        })?;
        json_answer(&merged)
    }

    /// One page of a list across namespaces ([`super::pages`]): each
    /// provider asked for its next entries from its cursor, at the first
    /// page's versions, and the first `limit` of them all given, with a
    /// token for the rest.
    async fn merged_page(
        &self,
        parts: &http::request::Parts,
        limit: Option<usize>,
        token: &str,
    ) -> Result<Response<BoxBody>, ApiError> {
        use super::pages::{Batch, Continue, Cursor, first, next_cursors};
        let providers = self.routes.len();
        let raw = parts.uri.query().unwrap_or_default();
        let asked_version = query_value(raw, "resourceVersion");
        let headers = json_accept(&parts.headers)?;
        let limit = limit.unwrap_or(usize::MAX);
        let (mut cursors, fixed) = if token.is_empty() {
            let asked = Asked::parse(&asked_version, providers)?;
            (vec![Cursor::default(); providers], Err(asked))
        } else {
            if !asked_version.is_empty() {
                return Err(ApiError::bad_request(
                    "specifying resource version is not allowed when using continue",
                ));
            }
            let token = Continue::decode(token, providers)?;
            let versions = Versions::parse(&token.version, providers)
                .ok_or_else(|| ApiError::bad_request("continue key is not valid"))?;
            (token.cursors, Ok(versions))
        };
        // Where provider `index` is asked from: its token, else its start
        // at the first page's version (exactly that one, after the first).
        let from = |index: usize, cursor: &Cursor, count: Option<usize>| {
            let mut query = form_urlencoded::Serializer::new(String::new());
            for (key, value) in form_urlencoded::parse(raw.as_bytes()) {
                if !matches!(
                    &*key,
                    "limit" | "continue" | "resourceVersion" | "resourceVersionMatch"
                ) {
                    query.append_pair(&key, &value);
                }
            }
            match (&cursor.after, &fixed) {
                (Some(after), _) => {
                    query.append_pair("continue", after);
                }
                (None, Ok(versions)) => {
                    query.append_pair("resourceVersion", versions.of(index));
                    query.append_pair("resourceVersionMatch", "Exact");
                }
                (None, Err(asked)) => {
                    if !asked.of(index).is_empty() {
                        query.append_pair("resourceVersion", asked.of(index));
                    }
                    if let Some(matching) = form_urlencoded::parse(raw.as_bytes())
                        .find(|(k, _)| k == "resourceVersionMatch")
                    {
                        query.append_pair("resourceVersionMatch", &matching.1);
                    }
                }
            }
            if let Some(count) = count.filter(|c| *c < usize::MAX / 2) {
                query.append_pair("limit", &count.to_string());
            }
            query.finish()
        };
        let ask = |index: usize, query: String| {
            let request = self.request(parts, Some(&query), &headers, Bytes::new());
            async move {
                let answer = self.send(index, request?).await?;
                if answer.status() != StatusCode::OK {
                    return Err(Stop::Answered(passed_back(answer)));
                }
                Ok(read_list(answer).await?)
            }
        };
        // Cursors far into a provider's entries first move to a token past
        // them.
        for (index, slot) in cursors.iter_mut().enumerate() {
            if !slot.needs_token(limit) {
                continue;
            }
            let cursor = slot.clone();
            let query = from(index, &cursor, Some(cursor.skip));
            let list = match ask(index, query).await {
                Ok(list) => list,
                Err(stop) => return stop.into(),
            };
            *slot = match list["metadata"]["continue"]
                .as_str()
                .filter(|c| !c.is_empty())
            {
                Some(next) => Cursor {
                    after: Some(next.to_string()),
                    skip: 0,
                    done: false,
                },
                None => Cursor {
                    done: true,
                    ..cursor
                },
            };
        }
        let asks = cursors.iter().enumerate().map(|(index, cursor)| {
            let query = (!cursor.done)
                .then(|| from(index, cursor, Some(cursor.skip.saturating_add(limit))));
            async move {
                match query {
                    Some(query) => ask(index, query).await.map(Some),
                    None => Ok(None),
                }
            }
        });
        let answers = futures::future::join_all(asks).await;
        let mut versions = match &fixed {
            Ok(versions) => versions.clone(),
            Err(_) => Versions::all("0", providers),
        };
        let mut envelope = None;
        let mut field = "items";
        let mut tagged = Vec::new();
        let mut batches = Vec::with_capacity(providers);
        for (index, answer) in answers.into_iter().enumerate() {
            let mut list = match answer {
                Ok(Some(list)) => list,
                Ok(None) => {
                    batches.push(None);
                    continue;
                }
                Err(stop) => return stop.into(),
            };
            if fixed.is_err() {
                versions.advance(
                    index,
                    list["metadata"]["resourceVersion"]
                        .as_str()
                        .unwrap_or_default(),
                );
            }
            let (kept_in, entries) = merge::entries(&mut list)?;
            field = kept_in;
            let next = list["metadata"]["continue"]
                .as_str()
                .filter(|c| !c.is_empty())
                .map(str::to_string);
            let given: Vec<Value> = entries.into_iter().skip(cursors[index].skip).collect();
            batches.push(Some(Batch {
                given: given.len(),
                next,
            }));
            tagged.extend(given.into_iter().map(|entry| (index, entry)));
            envelope.get_or_insert(list);
        }
        let more: Vec<bool> = batches
            .iter()
            .map(|batch| batch.as_ref().is_some_and(|b| b.next.is_some()))
            .collect();
        let ownership = &self.ownership;
        let (page, taken) = first(
            tagged,
            limit,
            &more,
            |entry| merge::order_of(entry, field),
            |index, entry| {
                merge::is_owned(entry, field, index, &|i, metadata| {
                    ownership.shows(i, metadata)
                })
            },
        );
        let cursors = next_cursors(&cursors, &batches, &taken);
        let next = (!cursors.iter().all(|c| c.done)).then(|| {
            Continue {
                version: versions.text(),
                cursors,
            }
            .encode()
        });
        let envelope = envelope.unwrap_or_else(
            || serde_json::json!({"kind": "List", "apiVersion": "v1", "items": []}),
        );
        let merged = merge::page(envelope, field, page, &versions, next);
        json_answer(&merged)
    }

    /// A watch across namespaces: every provider's watch, from its own
    /// version, interleaved into one stream ([`Watches`]). The stream ends
    /// when any provider's does (the client resumes from the last version
    /// it was given), or at an error event.
    async fn merged_watch(
        &self,
        parts: &http::request::Parts,
    ) -> Result<Response<BoxBody>, ApiError> {
        let providers = self.routes.len();
        let raw = parts.uri.query().unwrap_or_default();
        let asked = Asked::parse(&query_value(raw, "resourceVersion"), providers)?;
        let initial_events = query_value(raw, "sendInitialEvents") == "true";
        let headers = json_accept(&parts.headers)?;
        let requests = (0..providers).map(|index| {
            let query = rewritten_query(raw, |key, value| match key {
                "resourceVersion" => Some(asked.of(index).to_string()),
                _ => Some(value.to_string()),
            });
            let request = self.request(parts, Some(&query), &headers, Bytes::new());
            async move { self.send(index, request?).await }
        });
        let answers = futures::future::join_all(requests).await;
        let mut streams = Vec::with_capacity(providers);
        for answer in answers {
            let answer = answer?;
            if answer.status() != StatusCode::OK {
                return Ok(passed_back(answer));
            }
            if !is_json(answer.headers()) {
                return Err(crate::forward::answer::unreadable("a provider"));
            }
            streams.push(answer.into_body());
        }
        let start = match &asked {
            Asked::Exact(versions) => versions.clone(),
            _ => Versions::all("0", providers),
        };
        let watches = Watches::new(start, providers, initial_events);
        let body = interleaved(streams, watches, self.ownership.clone());
        Ok(crate::forward::encode::watch_response(
            StatusCode::OK,
            body,
            crate::wire::accept::Media::Json,
        ))
    }
}

/// Each resource the default provider serves, in every group/version it
/// serves, judged against every other provider's schema of it
/// ([`super::schemas`]): what breaks, in words (empty: one schema).
async fn incompatible(routes: &Routes, providers: &[kube::Client]) -> anyhow::Result<Vec<String>> {
    let read = |client: &kube::Client, path: String| {
        let client = client.clone();
        async move {
            let request = http::Request::get(&path)
                .header(ACCEPT, "application/json")
                .body(Vec::new())
                .expect("a GET request builds");
            client
                .request::<Value>(request)
                .await
                .unwrap_or(Value::Null)
        }
    };
    let first = &providers[routes.default()];
    let groups = read(first, "/apis".to_string()).await;
    let mut refused = Vec::new();
    let versions = groups["groups"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|group| group["versions"].as_array().cloned().unwrap_or_default())
        .filter_map(|version| version["groupVersion"].as_str().map(str::to_string));
    for group_version in versions {
        let (group, version) = group_version
            .split_once('/')
            .unwrap_or(("", &group_version));
        let discovery = |client| read(client, format!("/apis/{group_version}"));
        let openapi = |client| read(client, format!("/openapi/v3/apis/{group_version}"));
        let (first_discovery, first_openapi) = (discovery(first).await, openapi(first).await);
        for (index, other) in providers.iter().enumerate() {
            if index == routes.default() {
                continue;
            }
            let (other_discovery, other_openapi) = (discovery(other).await, openapi(other).await);
            for resource in first_discovery["resources"]
                .as_array()
                .into_iter()
                .flatten()
            {
                let Some(name) = resource["name"].as_str().filter(|n| !n.contains('/')) else {
                    continue;
                };
                let theirs = other_discovery["resources"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .find(|r| r["name"] == name);
                let kind = resource["kind"].as_str().unwrap_or_default();
                let first_served = super::schemas::Served {
                    group,
                    version,
                    kind,
                    namespaced: resource["namespaced"] == true,
                    openapi: &first_openapi,
                };
                let empty = Value::Null;
                let other_served = super::schemas::Served {
                    group,
                    version,
                    kind,
                    namespaced: theirs.is_some_and(|r| r["namespaced"] == true),
                    openapi: if theirs.is_some() {
                        &other_openapi
                    } else {
                        &empty
                    },
                };
                for broken in super::schemas::breaks(&first_served, &other_served) {
                    refused.push(format!(
                        "{} serves {name}.{group} otherwise: {broken}",
                        routes.names()[index]
                    ));
                }
            }
        }
    }
    Ok(refused)
}

/// The providers' watch `streams` as one, each event through `watches`,
/// ended with kube-apiserver's 410 when a namespace changes provider (what
/// the client holds of it is then another provider's: it lists again).
fn interleaved(
    streams: Vec<kube::client::Body>,
    mut watches: Watches,
    ownership: Ownership,
) -> BoxBody {
    let (events_tx, mut events) = tokio::sync::mpsc::channel::<(usize, Option<Value>)>(64);
    let mut readers = tokio::task::JoinSet::new();
    for (index, mut stream) in streams.into_iter().enumerate() {
        let events_tx = events_tx.clone();
        readers.spawn(async move {
            let mut pending = bytes::BytesMut::new();
            while let Some(Ok(frame)) = stream.frame().await {
                let Ok(data) = frame.into_data() else {
                    continue;
                };
                for line in crate::proxy::watch::complete_lines(&mut pending, &data) {
                    let Some(event) = crate::proxy::watch::event_of(&line) else {
                        continue;
                    };
                    if events_tx.send((index, Some(event))).await.is_err() {
                        return;
                    }
                }
            }
            let _ = events_tx.send((index, None)).await;
        });
    }
    drop(events_tx);
    let (mut tx, rx) = futures::channel::mpsc::channel::<Bytes>(64);
    tokio::spawn(async move {
        // The readers end with this task: when a provider's stream ends,
        // or the client goes away.
        let _readers = readers;
        let mut moved = ownership.moved.clone();
        moved.mark_unchanged();
        loop {
            let (index, event) = tokio::select! {
                next = events.recv() => match next {
                    Some((index, Some(event))) => (index, event),
                    _ => break,
                },
                _ = moved.changed() => {
                    let _ = tx.send(gone(crate::wire::accept::Media::Json)).await;
                    break;
                }
            };
            let error = event["type"] == "ERROR";
            let owns = |index: usize, metadata: &Value| ownership.shows(index, metadata);
            let Some(out) = watches.event(index, event, &owns) else {
                continue;
            };
            let Some(line) = crate::forward::encode::event(&out, crate::wire::accept::Media::Json)
            else {
                continue;
            };
            if tx.send(line).await.is_err() || error {
                break;
            }
        }
    });
    StreamBody::new(rx.map(|bytes| Ok::<_, BoxError>(hyper::body::Frame::data(bytes))))
        .boxed_unsync()
}

/// kube-apiserver's 410 `Expired` watch event, in `media`: the namespaces
/// a watch covers changed provider.
fn gone(media: crate::wire::accept::Media) -> Bytes {
    let event = serde_json::json!({"type": "ERROR", "object": {
        "kind": "Status", "apiVersion": "v1", "metadata": {},
        "status": "Failure", "reason": "Expired", "code": 410,
        "message": "a namespace moved to another provider: list again",
    }});
    crate::forward::encode::event(&event, media).unwrap_or_default()
}

impl Router {
    /// A watch of one namespace at provider `index`, as it came, ended with
    /// kube-apiserver's 410 once the namespace belongs to another provider
    /// (its objects are then the other provider's, and the versions too).
    fn ended_when_moved(
        &self,
        response: Response<BoxBody>,
        namespace: &str,
        index: usize,
    ) -> Response<BoxBody> {
        let (head, mut upstream) = response.into_parts();
        let media = match head.headers.get(CONTENT_TYPE) {
            Some(ct)
                if ct
                    .as_bytes()
                    .starts_with(b"application/vnd.kubernetes.protobuf") =>
            {
                crate::wire::accept::Media::Protobuf
            }
            _ => crate::wire::accept::Media::Json,
        };
        let ownership = self.ownership.clone();
        let namespace = namespace.to_string();
        let (mut tx, rx) = futures::channel::mpsc::channel::<Bytes>(64);
        tokio::spawn(async move {
            let mut moved = ownership.moved.clone();
            moved.mark_unchanged();
            loop {
                tokio::select! {
                    frame = upstream.frame() => {
                        let Some(Ok(frame)) = frame else { break };
                        let Ok(data) = frame.into_data() else { continue };
                        if tx.send(data).await.is_err() {
                            break;
                        }
                    }
                    _ = moved.changed() => {
                        if !ownership.owns(index, &namespace) {
                            let _ = tx.send(gone(media)).await;
                            break;
                        }
                    }
                }
            }
        });
        let body =
            StreamBody::new(rx.map(|bytes| Ok::<_, BoxError>(hyper::body::Frame::data(bytes))))
                .boxed_unsync();
        Response::from_parts(head, body)
    }
}

/// Why a merged page stops early: a provider's answer that is not a list
/// (passed back as it came), or an error of the router's.
enum Stop {
    Answered(Response<BoxBody>),
    Failed(ApiError),
}

impl From<ApiError> for Stop {
    fn from(error: ApiError) -> Self {
        Stop::Failed(error)
    }
}

impl From<Stop> for Result<Response<BoxBody>, ApiError> {
    fn from(stop: Stop) -> Self {
        match stop {
            Stop::Answered(answer) => Ok(answer),
            Stop::Failed(error) => Err(error),
        }
    }
}

/// A provider's list answer (200), read whole.
async fn read_list(answer: Response<kube::client::Body>) -> Result<Value, ApiError> {
    if !is_json(answer.headers()) {
        return Err(crate::forward::answer::unreadable("a provider"));
    }
    let bytes = Limited::new(answer.into_body(), LARGEST_LIST)
        .collect()
        .await
        .map_err(|_| crate::forward::answer::unreadable("a provider"))?
        .to_bytes();
    crate::deep::from_slice(&bytes).map_err(|_| crate::forward::answer::unreadable("a provider"))
}

/// `value` as a 200 JSON answer.
fn json_answer(value: &Value) -> Result<Response<BoxBody>, ApiError> {
    let bytes = serde_json::to_vec(value).map_err(|e| ApiError::internal(e.to_string()))?;
    let mut response = Response::new(
        Full::new(Bytes::from(bytes))
            .map_err(|never| match never {})
            .boxed_unsync(),
    );
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    Ok(response)
}

/// A provider's answer, as it came: its status, the headers a caller may
/// see, its body.
fn passed_back(response: Response<kube::client::Body>) -> Response<BoxBody> {
    let (head, body) = response.into_parts();
    let mut out = Response::new(body.map_err(|e| Box::new(e) as BoxError).boxed_unsync());
    *out.status_mut() = head.status;
    for name in FORWARDED_ANSWER_HEADERS {
        for value in head.headers.get_all(name) {
            out.headers_mut().append(name, value.clone());
        }
    }
    out
}

fn is_json(headers: &HeaderMap) -> bool {
    headers
        .get(CONTENT_TYPE)
        .is_some_and(|ct| ct.as_bytes().starts_with(b"application/json"))
}

/// The headers a merged read asks each provider with: the caller's, its
/// `Accept` cut to the JSON forms (the router joins JSON); kube-apiserver's
/// 406 when the caller accepts none of them.
fn json_accept(headers: &HeaderMap) -> Result<HeaderMap, ApiError> {
    let asked = headers
        .get_all(ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .collect::<Vec<_>>();
    let json: Vec<&str> = asked
        .iter()
        .copied()
        .filter(|range| {
            let media = range.split(';').next().unwrap_or_default().trim();
            matches!(media, "application/json" | "application/*" | "*/*")
        })
        .collect();
    let accept = match (asked.is_empty(), json.is_empty()) {
        (true, _) => "application/json".to_string(),
        (false, true) => {
            return Err(ApiError::route_not_acceptable(&["application/json"]));
        }
        (false, false) => json.join(", "),
    };
    let mut out = headers.clone();
    out.remove(ACCEPT);
    out.insert(
        ACCEPT,
        HeaderValue::from_str(&accept).map_err(|e| ApiError::bad_request(e.to_string()))?,
    );
    if let Some(agent) = headers.get(USER_AGENT) {
        out.insert(USER_AGENT, agent.clone());
    }
    Ok(out)
}

/// The annotations a JSON request body's object (or merge patch) gives.
fn annotations_of(headers: &HeaderMap, body: &Bytes) -> Option<Value> {
    let json = headers
        .get(CONTENT_TYPE)
        .and_then(|ct| ct.to_str().ok())
        .is_some_and(|ct| ct.contains("json"));
    if !json || body.is_empty() {
        return None;
    }
    let value: Value = crate::deep::from_slice(body).ok()?;
    value.pointer("/metadata/annotations").cloned()
}

/// The decoded value of `key` in the raw query `raw` (its first), or empty.
fn query_value(raw: &str, key: &str) -> String {
    form_urlencoded::parse(raw.as_bytes())
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.into_owned())
        .unwrap_or_default()
}

/// The raw query `raw` with each pair through `rewrite` (`None` leaves it
/// out), encoded again.
fn rewritten_query(raw: &str, rewrite: impl Fn(&str, &str) -> Option<String>) -> String {
    let mut out = form_urlencoded::Serializer::new(String::new());
    for (key, value) in form_urlencoded::parse(raw.as_bytes()) {
        if let Some(value) = rewrite(&key, &value) {
            out.append_pair(&key, &value);
        }
    }
    out.finish()
}

/// A JSON request body for provider `index`: a merged resourceVersion in
/// its `metadata` or its delete preconditions made the provider's own.
/// Anything else goes as it came.
fn routed_body(headers: &HeaderMap, body: Bytes, index: usize, providers: usize) -> Bytes {
    let json = headers
        .get(CONTENT_TYPE)
        .and_then(|ct| ct.to_str().ok())
        .is_some_and(|ct| ct.contains("json"));
    if !json || providers < 2 || body.is_empty() {
        return body;
    }
    let Ok(mut value) = crate::deep::from_slice::<Value>(&body) else {
        return body;
    };
    let mut changed = false;
    for pointer in [
        "/metadata/resourceVersion",
        "/preconditions/resourceVersion",
    ] {
        if let Some(slot) = value.pointer_mut(pointer)
            && let Some(text) = slot.as_str()
        {
            let own = version::routed(text, index, providers);
            if own != text {
                *slot = Value::String(own);
                changed = true;
            }
        }
    }
    match changed.then(|| serde_json::to_vec(&value)) {
        Some(Ok(bytes)) => Bytes::from(bytes),
        _ => body,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_query_keeps_its_pairs_but_those_rewritten() {
        let query =
            rewritten_query(
                "labelSelector=a%3Db&resourceVersion=1.2&limit=5",
                |k, v| match k {
                    "resourceVersion" => Some(version::routed(v, 1, 2)),
                    "limit" => None,
                    _ => Some(v.to_string()),
                },
            );
        assert_eq!(query, "labelSelector=a%3Db&resourceVersion=2");
        assert_eq!(
            query_value("a=1&resourceVersion=7.8", "resourceVersion"),
            "7.8"
        );
        assert_eq!(query_value("a=1", "continue"), "");
    }

    #[test]
    fn a_merged_version_in_a_body_becomes_the_providers_own() {
        let mut headers = HeaderMap::new();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        let body = Bytes::from_static(br#"{"metadata":{"name":"a","resourceVersion":"10.20"}}"#);
        let routed = routed_body(&headers, body.clone(), 1, 2);
        let value: Value = serde_json::from_slice(&routed).expect("JSON");
        assert_eq!(value["metadata"]["resourceVersion"], "20");
        let own = Bytes::from_static(br#"{"metadata":{"resourceVersion":"20"}}"#);
        assert_eq!(routed_body(&headers, own.clone(), 1, 2), own);
        let preconditions = Bytes::from_static(br#"{"preconditions":{"resourceVersion":"3.4"}}"#);
        let routed: Value =
            serde_json::from_slice(&routed_body(&headers, preconditions, 0, 2)).expect("JSON");
        assert_eq!(routed["preconditions"]["resourceVersion"], "3");
    }

    #[test]
    fn a_merged_read_asks_in_json_or_is_refused() {
        let mut headers = HeaderMap::new();
        headers.insert(
            ACCEPT,
            HeaderValue::from_static(
                "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json",
            ),
        );
        let asked = json_accept(&headers).expect("JSON accepted");
        assert_eq!(
            asked[ACCEPT],
            "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1, application/json"
        );
        headers.insert(
            ACCEPT,
            HeaderValue::from_static("application/vnd.kubernetes.protobuf"),
        );
        assert_eq!(json_accept(&headers).expect_err("protobuf only").code, 406);
        assert_eq!(
            json_accept(&HeaderMap::new()).expect("none")[ACCEPT],
            "application/json"
        );
    }
}
