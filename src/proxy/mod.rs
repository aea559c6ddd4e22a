//! Resource requests of a consumer, served from the provider in one hop
//! through the forwarding pipeline (`crate::forward`): the request is read
//! in full with kube-apiserver's rules, a named write's target is checked
//! to be the consumer's own, a patch is applied by bindery and its result
//! stored, the provider is asked in JSON, and its answer (or watch stream)
//! is read by what was asked, translated through the consumer's view, and
//! encoded as the consumer negotiated. The `Exchange` here is the one
//! exchange with the store; the steps writes add to it are in `writes`, and
//! whom a request runs as (and whether the cache may answer it) in
//! `as_consumer`.

pub mod access;
mod as_consumer;
mod gate;
pub mod namespaces;
mod patch;
pub mod provider;
mod table;
mod writes;

use crate::catalog::{ConsumerView, ServedResource};
use crate::forward::answer::{Expected, Shape};
use crate::forward::encode::{self, ErrorForm, Failure};
use crate::forward::request::{ApiRequest, Body, Incoming};
use crate::forward::store::{self, Named, Read, Store};
use crate::forward::watch;
use crate::quota::QuotaAdmission;
use crate::resolved::Resolved;
use crate::route::{ResourceRequest, Verb};
use crate::status::ApiError;
use crate::translate::binding::BoundResource;
pub use crate::translate::consumer_view::BoundView;
use crate::translate::continue_token::ContinueTokens;
use crate::translate::continue_token::TokenError;
use crate::translate::objects::Refusal;
use crate::translate::request::{ProviderRequest, RequestError, request_down, token_scope};
use crate::upstream::{BoxBody, CacheRead, Translation, Upstream};
use crate::wire::accept::{Media, Target};
use crate::wire::body::PatchType;
use bytes::Bytes;
use http::header::{ACCEPT, USER_AGENT};
use http::{HeaderValue, Method, Response, StatusCode};
use http_body_util::BodyExt;
use namespaces::NamespaceProvisioner;
use provider::PROVIDER;
use std::sync::Arc;
use tokio::sync::watch as signal;

/// What serving resources needs.
pub struct Proxy {
    pub upstream: Arc<dyn Upstream>,
    pub tokens: Arc<ContinueTokens>,
    pub namespaces: NamespaceProvisioner,
    pub shutdown: signal::Receiver<bool>,
    /// Makes a consumer's requests as its own provider-side account
    /// (`None`: as bindery's, kept apart by translation alone).
    pub access: Option<access::Access>,
    /// Charges creates to the app cluster's ResourceQuotas.
    pub quota: QuotaAdmission,
    /// Each consumer's share of what bindery does on its behalf.
    pub fairness: crate::fairness::Fairness,
}

/// A complete response with `body`.
pub fn full(status: u16, content_type: &str, body: impl Into<Bytes>) -> Response<BoxBody> {
    encode::full(status, content_type, body)
}

/// The response for one of bindery's errors, as JSON.
pub fn error(error: &ApiError) -> Response<BoxBody> {
    ErrorForm::JSON.error(error)
}

/// How many times a patch is applied again when its object changed under it.
const PATCH_ATTEMPTS: usize = 5;

/// How the shared cache answered a list or watch ([`Exchange::cached_answer`]).
enum Cached {
    /// In the consumer's form: the answer as it is sent.
    Answered(Response<BoxBody>),
    /// In the provider's form: read and translated as the provider's own.
    Provider(http::Response<BoxBody>),
}

/// One resource request on its way through.
struct Exchange<'a> {
    proxy: &'a Proxy,
    served: &'a ServedResource,
    resource: &'a ResourceRequest,
    request: ApiRequest,
    /// The consumer's view, shared with the watch cache's translation.
    view: Arc<BoundView>,
    shape: Shape,
    user_agent: Option<HeaderValue>,
    /// Who is asking, as refusals name them.
    user: String,
    /// When the request's time is up: its `timeout`, at most
    /// kube-apiserver's default request timeout. What bindery waits for on
    /// its behalf (RBAC on its way) is waited for until then.
    deadline: tokio::time::Instant,
    /// Its consumer's seat (or, a watch, its place among the consumer's
    /// watches), held while it is served.
    held: crate::fairness::Held,
}

/// kube-apiserver's default `--request-timeout`: the longest a request
/// that is not a watch is given.
const REQUEST_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

/// How long a refused watch waits for RBAC on its way before it is
/// answered 403.
const WATCH_RBAC_PATIENCE: std::time::Duration = std::time::Duration::from_secs(5);

/// When a request with `timeout` (its parameter) started now is up.
fn deadline_of(timeout: Option<&str>) -> tokio::time::Instant {
    let given = timeout
        .and_then(|text| crate::wire::query::go_duration(text).ok())
        .filter(|given| !given.is_zero())
        .unwrap_or(REQUEST_TIMEOUT);
    tokio::time::Instant::now() + given.min(REQUEST_TIMEOUT)
}

impl Proxy {
    /// Serves `resolved`, a request for a resource of `view`.
    pub async fn serve(
        &self,
        view: &ConsumerView,
        resolved: &Resolved,
        parts: http::request::Parts,
        body: Bytes,
    ) -> Response<BoxBody> {
        let errors = ErrorForm::of(&parts.headers, Some(&resolved.query));
        match self.try_serve(view, resolved, &parts, &body).await {
            Ok(response) => response,
            Err(failure) => errors.failure(&failure),
        }
    }

    async fn try_serve(
        &self,
        view: &ConsumerView,
        resolved: &Resolved,
        parts: &http::request::Parts,
        body: &Bytes,
    ) -> Result<Response<BoxBody>, Failure> {
        let resource = resolved.resource().ok_or_else(ApiError::page_not_found)?;
        let served = view
            .find(&resource.group, &resource.resource)
            .filter(|s| s.serves(&resource.version))
            .ok_or_else(ApiError::page_not_found)?;
        let bound = &served.bound;
        let verb = resolved.verb;
        check_scope(served, resource, verb)?;
        // The consumer's share: a seat while it is read, translated and
        // served (a watch: its place among the consumer's watches).
        let held = match verb {
            Some(Verb::Watch) => {
                crate::fairness::Held::Watch(self.fairness.watch(&bound.consumer)?)
            }
            _ => crate::fairness::Held::Seat(self.fairness.seat(&bound.consumer).await?),
        };
        // A CRD version's selectable fields are field labels too.
        let field_labels: Vec<String> = served
            .spec
            .versions
            .iter()
            .filter(|version| version.name == resource.version)
            .flat_map(|version| version.selectable_fields.iter().flatten())
            .map(|field| field.json_path.trim_start_matches('.').to_string())
            .collect();
        let incoming = Incoming {
            method: &parts.method,
            resource,
            query: &resolved.query,
            verb,
            headers: &parts.headers,
            body,
            kind: &bound.kind,
            body_too_large: parts
                .extensions
                .get::<crate::request_body::TooLarge>()
                .is_some(),
            field_labels: Some(&field_labels),
        };
        let request = ApiRequest::parse(&incoming)?
            .ok_or_else(|| ApiError::method_not_allowed("", &bound.group, &bound.resource))?;
        let api_version = format!("{}/{}", resource.group, resource.version);
        let shape = Shape::of(
            &request,
            resource.subresource.as_deref(),
            &bound.kind,
            &api_version,
        );
        let exchange = Exchange {
            proxy: self,
            served,
            resource,
            view: Arc::new(BoundView {
                bound: bound.clone(),
                tokens: self.tokens.clone(),
                scope: token_scope(bound, resource),
            }),
            shape,
            user_agent: parts.headers.get(USER_AGENT).cloned(),
            user: parts
                .extensions
                .get::<crate::auth::User>()
                .map_or_else(|| bound.consumer.to_string(), |user| user.name.clone()),
            deadline: deadline_of(request.timeout.as_deref()),
            held,
            request,
        };
        let deadline = exchange.deadline;
        exchange
            .run()
            .await
            .map_err(|failure| timed_out(failure, deadline))
    }
}

/// A provider that could not be reached, or whose answer broke off, once
/// the request's time was up: the request timed out, and is answered as
/// kube-apiserver answers one that did (its timeout filter's 504; the
/// provider itself resets a stream it had begun to answer when its own
/// deadline passes).
fn timed_out(failure: Failure, deadline: tokio::time::Instant) -> Failure {
    match failure {
        Failure::Api(error) if error.code == 503 && tokio::time::Instant::now() >= deadline => {
            Failure::Api(ApiError::timeout())
        }
        failure => failure,
    }
}

impl Exchange<'_> {
    fn bound(&self) -> &BoundResource {
        &self.served.bound
    }

    /// The one store, in this consumer's scope: its binding's view of the
    /// provider's answers.
    fn store(&self) -> Store<'_> {
        let bound = self.bound();
        Store {
            upstream: self.proxy.upstream.as_ref(),
            name: PROVIDER,
            view: self.view.as_ref(),
            shape: &self.shape,
            request: &self.request,
            named: Named {
                group: &bound.group,
                resource: &bound.resource,
                name: self.resource.name.as_deref().unwrap_or_default(),
            },
        }
    }

    fn not_found(&self) -> ApiError {
        let bound = self.bound();
        ApiError::object_not_found(
            &bound.group,
            &bound.resource,
            self.resource.name.as_deref().unwrap_or_default(),
        )
    }

    async fn run(mut self) -> Result<Response<BoxBody>, Failure> {
        let unprovisioned = self.unprovisioned()?;
        if let Some(namespace) = &unprovisioned {
            // Its answer names the provider namespace it is about to have.
            let provider_ns = self.bound().namespaces.to_provider(namespace);
            Arc::make_mut(&mut self.view)
                .bound
                .namespaces
                .insert(namespace.clone(), provider_ns);
        }
        let bound = self.bound();
        let current = self.checked_target().await?;
        // A patch kube-apiserver cannot read is refused once its object
        // is found: a missing object is not found first.
        if let Some(error) = &self.request.patch_error {
            return Err(match current {
                None => self.not_found(),
                Some(_) => error.clone(),
            }
            .into());
        }
        if let Some(Body::Patch(patch_type @ (PatchType::Json | PatchType::Merge), patch)) =
            &self.request.body
        {
            return self.patch(*patch_type, patch, current).await;
        }
        let owner = self.cluster_namespace_owner(current.as_ref()).await?;
        let mut provider = request_down(
            bound,
            self.resource,
            &self.request,
            &self.proxy.tokens,
            current.as_ref().or(owner.as_ref()),
        )
        .map_err(|e| request_error(bound, e))?;
        self.pin_delete(&mut provider, current.as_ref());
        if creates(&self.request) && current.is_none() && self.resource.subresource.is_none() {
            self.quota_admits().await?;
        }
        if let Some(answer) = self
            .admit(&provider, current.as_ref(), unprovisioned.as_deref())
            .await?
        {
            return Ok(answer);
        }
        if let Some(namespace) = &unprovisioned {
            let cap = |used| self.namespace_cap(used);
            self.proxy.namespaces.ensure(bound, namespace, cap).await?;
        }
        self.close_unreadable_namespaces().await;
        match self.request.verb {
            Verb::Watch => {
                let watch = self.watch(provider).await?;
                // Counted among the consumer's watches while it lasts.
                let held = self.held;
                Ok(watch.map(|body| {
                    body.map_frame(move |frame| {
                        let _held = &held;
                        frame
                    })
                    .boxed_unsync()
                }))
            }
            _ if creates(&self.request) => self.create(provider).await,
            _ => self.exchange(provider).await,
        }
    }

    /// A JSON GET of `target` at the provider (as the consumer, when its
    /// requests are impersonated), read whole.
    async fn get(
        &self,
        target: ResourceRequest,
        subresource: Option<&str>,
    ) -> Result<Read, Failure> {
        let provider = ProviderRequest {
            method: Method::GET,
            target,
            query: Vec::new(),
            accept: "application/json".into(),
            body: None,
        };
        let response = self
            .send_as_consumer(|| self.build(&provider), "get", subresource)
            .await?;
        self.store().read(response).await
    }

    async fn send(
        &self,
        request: http::Request<Bytes>,
    ) -> Result<http::Response<BoxBody>, Failure> {
        self.store().send(request).await
    }

    /// The HTTP request for `provider`.
    fn build(&self, provider: &ProviderRequest) -> Result<http::Request<Bytes>, Failure> {
        // Lists and watches too, in a namespace of the consumer's: the
        // provider's priority and fairness then tells consumers apart.
        let impersonation = match self.impersonated() {
            true => Some(self.bound().impersonation()),
            false => None,
        };
        Ok(provider::http_request(
            provider,
            self.user_agent.as_ref(),
            impersonation.into_iter().flatten(),
        )?)
    }

    /// `provider`, as it is sent (`sent`), as the watch cache is asked it.
    fn cache_read<'a>(
        &'a self,
        provider: &'a ProviderRequest,
        sent: &'a http::Request<Bytes>,
        identity_scope: Option<&'a str>,
    ) -> CacheRead<'a> {
        CacheRead {
            target: &provider.target,
            query: &provider.query,
            sent,
            identity_scope,
        }
    }

    /// On a list across namespaces, the label selector bindery added to
    /// narrow it to the consumer's objects.
    fn identity_scope(&self) -> Option<String> {
        (self.request.verb == Verb::List && self.resource.namespace.is_none())
            .then(|| self.bound().identity_selector())
    }

    /// Whether the shared cache may answer: the resource itself, in JSON.
    fn cacheable(&self) -> bool {
        self.request.output.target == Target::Resource
            && self.shape.expected != Expected::Scale
            && self.request.output.media != Media::Protobuf
    }

    /// The view's translation (its map has the namespaces a request made
    /// or closed), for the cache.
    fn translation(&self) -> Translation {
        Translation::of(self.view.clone())
    }

    /// The one place that decides whether the shared cache answers a list
    /// or watch, and in which form: not at all where the consumer's account
    /// may not read what it asks ([`Self::cache_may_answer`]); a Table of a
    /// list from the rows the cache keeps; the consumer's form where the
    /// cache translates this request's (the resource itself, in JSON, a
    /// watch's events in JSON only); else the provider's, where the cache
    /// can tell it. `None`: the provider is asked. `make` builds the request
    /// as it would be sent, which is what the cache is asked.
    async fn cached_answer(
        &self,
        provider: &ProviderRequest,
        make: impl Fn() -> Result<http::Request<Bytes>, Failure>,
    ) -> Result<Option<Cached>, Failure> {
        let watch = self.request.verb == Verb::Watch;
        if !self
            .cache_may_answer(if watch { "watch" } else { "list" })
            .await
        {
            return Ok(None);
        }
        if !watch && let Some(table) = self.table_from_cache(provider).await? {
            return Ok(Some(Cached::Answered(table)));
        }
        let sent = make()?;
        let scope = self.identity_scope();
        let read = self.cache_read(provider, &sent, scope.as_deref());
        let upstream = &self.proxy.upstream;
        let media = self.request.output.media;
        if !self.cacheable() || (watch && media != Media::Json) {
            return Ok(upstream.cached(&read).await.map(Cached::Provider));
        }
        let translation = self.translation();
        let answered = if watch {
            upstream
                .watch_translated(&read, &translation)
                .await
                .map(|body| encode::watch_response(StatusCode::OK, body, media))
        } else {
            match upstream.list_translated(&read, &translation).await {
                Some(bytes) => Some(self.store().translated(200, &bytes, Vec::new())?),
                None => None,
            }
        };
        Ok(answered.map(Cached::Answered))
    }

    /// Any request but a watch: sent, and its answer read and translated.
    async fn exchange(&self, provider: ProviderRequest) -> Result<Response<BoxBody>, Failure> {
        let response = if self.request.verb == Verb::List {
            let make = || self.build(&provider);
            match self.cached_answer(&provider, make).await? {
                Some(Cached::Answered(answer)) => return Ok(answer),
                Some(Cached::Provider(response)) => response,
                None => self.send_as_consumer(make, "list", None).await?,
            }
        } else {
            let verb = rbac_verb(self.request.verb, &provider.method);
            let subresource = self.resource.subresource.as_deref();
            self.send_as_consumer(|| self.build(&provider), verb, subresource)
                .await?
        };
        let store = self.store();
        let read = store.read(response).await?;
        // A plain GET whose version the cache holds already has its
        // consumer form.
        if self.request.verb == Verb::Get
            && read.status == 200
            && self.cacheable()
            && let Some(made) = self.proxy.upstream.object_translated(
                &provider.target,
                &read.body,
                &self.translation(),
            )
        {
            tracing::trace!(target = ?provider.target, "GET answered with the cached consumer form");
            return store.translated(200, &made, read.warnings);
        }
        store.answer(read)
    }

    /// A watch: the cache's shared stream when it can serve it, else the
    /// provider's, each event read, translated and encoded as negotiated.
    async fn watch(&self, provider: ProviderRequest) -> Result<Response<BoxBody>, Failure> {
        let media = self.request.output.media;
        // A metadata watch (what the app cluster's collector and quota
        // controller run) is made of the whole objects' events: the cache
        // serves those, so it holds through the provider's restarts as a
        // whole-object watch does. Each object is cut to its metadata
        // before it is read as the provider's PartialObjectMetadata.
        let partial = match self.request.output.target {
            Target::PartialObjectMetadata(meta) | Target::PartialObjectMetadataList(meta) => {
                Some(meta)
            }
            _ => None,
        };
        let make = || {
            let mut upstream = self.build(&provider)?;
            if partial.is_some() {
                upstream
                    .headers_mut()
                    .insert(ACCEPT, HeaderValue::from_static("application/json"));
            }
            Ok(upstream)
        };
        let response = match self.cached_answer(&provider, make).await? {
            Some(Cached::Answered(answer)) => return Ok(answer),
            Some(Cached::Provider(response)) => response,
            None => self.send_as_consumer(make, "watch", None).await?,
        };
        let (view, shape) = (self.view.clone(), self.shape.clone());
        let each = Box::new(move |mut event| {
            if let Some(meta) = partial {
                watch::cut_to_metadata(&mut event, meta);
            }
            store::event(view.as_ref(), &shape, event, media)
        });
        let shutdown = self.proxy.shutdown.clone();
        self.store().watch(response, each, shutdown).await
    }
}

/// The verb RBAC checks for a request sent with `method`.
fn rbac_verb(verb: Verb, method: &Method) -> &'static str {
    match verb {
        Verb::Patch if method == Method::PUT => "update",
        other => other.as_str(),
    }
}

/// Namespaced resources are reached in a namespace (lists and watches
/// also across all); cluster-scoped ones never in a namespace. Anything
/// else is the delegate's plain 404, as kube-apiserver's CRD handler
/// answers. Subresources must exist, and take gets, updates and patches
/// only (405 for any other verb).
fn check_scope(
    served: &ServedResource,
    request: &ResourceRequest,
    verb: Option<Verb>,
) -> Result<(), ApiError> {
    let bound = &served.bound;
    let across = matches!(verb, Some(Verb::List | Verb::Watch));
    match (bound.namespaced, &request.namespace) {
        (true, None) if !across => return Err(ApiError::page_not_found()),
        (false, Some(_)) => return Err(ApiError::page_not_found()),
        _ => {}
    }
    let Some(subresource) = request.subresource.as_deref() else {
        return Ok(());
    };
    let exists = match subresource {
        "status" => bound.has_status,
        "scale" => bound.has_scale,
        _ => false,
    };
    if !exists {
        return Err(ApiError::object_not_found(
            &bound.group,
            &bound.resource,
            request.name.as_deref().unwrap_or_default(),
        ));
    }
    match verb {
        Some(Verb::Get | Verb::Update | Verb::Patch) | None => Ok(()),
        Some(other) => Err(ApiError::method_not_allowed(
            other.as_str(),
            &bound.group,
            &bound.resource,
        )),
    }
}

/// Whether a write may create its object (and so needs its provider namespace).
fn creates(request: &ApiRequest) -> bool {
    request.verb == Verb::Create || matches!(request.body, Some(Body::Patch(PatchType::Apply, _)))
}

fn request_error(bound: &BoundResource, error: RequestError) -> ApiError {
    match error {
        RequestError::Refused(Refusal::ReservedLabel { name, key }) => ApiError::field_forbidden(
            &bound.group,
            &bound.kind,
            &name,
            &format!("metadata.labels[{key}]"),
            "the label is reserved by bindery",
        ),
        RequestError::Refused(Refusal::ReservedAnnotation { name, key }) => {
            ApiError::field_forbidden(
                &bound.group,
                &bound.kind,
                &name,
                &format!("metadata.annotations[{key}]"),
                "the annotation is reserved by bindery",
            )
        }
        RequestError::Continue(error @ TokenError::Encoding(_)) => ApiError::bad_request(format!(
            "invalid continue token: continue key is not valid: {error}"
        )),
        RequestError::Undecoded => ApiError::internal("a body bindery did not decode"),
        RequestError::Continue(TokenError::Forged) => ApiError::bad_request(
            "invalid continue token: continue key is not valid: it was not issued for this request",
        ),
    }
}

#[cfg(test)]
mod tests;
