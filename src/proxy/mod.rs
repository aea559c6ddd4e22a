//! Resource requests of a consumer, served from the provider in one hop
//! through the forwarding pipeline (`crate::forward`): the request is read
//! in full with kube-apiserver's rules, a named write's target is checked
//! to be the consumer's own, a patch is applied by bindery and its result
//! stored, the provider is asked in JSON, and its answer (or watch stream)
//! is read by what was asked, translated through the consumer's view, and
//! encoded as the consumer negotiated.

pub mod access;
mod gate;
pub mod namespaces;
mod patch;
pub mod provider;
mod table;

use crate::catalog::{ConsumerView, ServedResource};
use crate::forward::answer::{Expected, Shape};
use crate::forward::encode::{self, ErrorForm, Failure};
use crate::forward::request::{ApiRequest, Body, Incoming, Options};
use crate::forward::store::{self, Named, Read, Store};
use crate::forward::watch;
use crate::quota::{QuotaAdmission, Subject};
use crate::resolved::Resolved;
use crate::route::{ResourceRequest, Verb};
use crate::status::ApiError;
use crate::translate::binding::BoundResource;
pub use crate::translate::consumer_view::BoundView;
use crate::translate::continue_token::ContinueTokens;
use crate::translate::continue_token::TokenError;
use crate::translate::objects::Refusal;
use crate::translate::request::{
    ProviderRequest, RequestError, provider_target, request_down, token_scope, update_down,
};
use crate::translate::scale;
use crate::upstream::{BoxBody, CacheRead, Translation, Upstream};
use crate::wire::accept::{Media, Target};
use crate::wire::body::PatchType;
use bytes::Bytes;
use http::header::{ACCEPT, USER_AGENT};
use http::{HeaderValue, Method, Response, StatusCode};
use http_body_util::BodyExt;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceSubresourceScale;
use namespaces::NamespaceProvisioner;
use provider::PROVIDER;
use serde_json::Value;
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
        if let (Verb::Delete, Some(current)) = (self.request.verb, &current) {
            pin_delete(&mut provider, current);
        }
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

    /// The object behind a named write, or a Scale, read first: it must be
    /// the consumer's own (the Scale itself carries no labels to tell).
    async fn checked_target(&self) -> Result<Option<Value>, Failure> {
        let scale = self.resource.subresource.as_deref() == Some("scale");
        Ok(match (&self.resource.name, self.request.verb) {
            (Some(_), Verb::Update | Verb::Patch | Verb::Delete) => self.current().await?,
            (Some(_), Verb::Get) if scale => {
                Some(self.current().await?.ok_or_else(|| self.not_found())?)
            }
            _ => None,
        })
    }

    /// The app cluster's quota and the export's object cap, for a create of
    /// a new object.
    async fn quota_admits(&self) -> Result<(), Failure> {
        if let Some(namespace) = &self.resource.namespace {
            self.proxy
                .quota
                .namespace_admits(self.bound().consumer.as_str(), namespace, &self.subject())
                .await?;
        }
        self.object_cap()?;
        Ok(())
    }

    /// A create (or an apply): when the provider says its namespace is not
    /// there or is going (deleted on the provider, or with its app
    /// namespace, while bindery still knew it), the namespace is made again
    /// and the create sent once more, within the request's time.
    async fn create(&self, provider: ProviderRequest) -> Result<Response<BoxBody>, Failure> {
        let answer = self.exchange(provider.clone()).await;
        let (Some(namespace), Err(Failure::Upstream(code, status))) =
            (&self.resource.namespace, &answer)
        else {
            return answer;
        };
        let gone = *code == 404 && status["details"]["kind"] == "namespaces";
        let going = *code == 403
            && status["details"]["causes"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|cause| cause["reason"] == "NamespaceTerminating");
        if !(gone || going) {
            return answer;
        }
        tracing::info!(consumer = %self.bound().consumer, %namespace,
            "a provider namespace bindery knew is gone; making it again");
        if !self
            .proxy
            .namespaces
            .remake(self.bound(), namespace, self.deadline)
            .await
        {
            return answer;
        }
        self.exchange(provider).await
    }

    /// The consumer namespace a create goes to that has no provider
    /// namespace yet, if any; kube-apiserver's 404 for a namespace no
    /// namespace can have (`UPPER`, `a.b`, 64 characters), before anything
    /// reaches the provider.
    fn unprovisioned(&self) -> Result<Option<String>, ApiError> {
        let (Some(namespace), true) = (&self.resource.namespace, creates(&self.request)) else {
            return Ok(None);
        };
        if !crate::route::is_dns_label(namespace) {
            return Err(ApiError::object_not_found("", "namespaces", namespace));
        }
        if self.proxy.namespaces.exists(self.bound(), namespace) {
            return Ok(None);
        }
        self.namespace_cap(self.proxy.namespaces.used(self.bound()))?;
        Ok(Some(namespace.clone()))
    }

    /// The export's cap on provider namespaces, beside `used` of them.
    fn namespace_cap(&self, used: u64) -> Result<(), ApiError> {
        self.served
            .caps
            .one_more_namespace(&self.bound().export, used)
            .map_err(|refusal| crate::quota::refused(&self.subject(), &refusal))
    }

    /// The export's cap on the consumer's objects of its resources; open
    /// when the cache cannot count them (as kcp's object count fails open).
    fn object_cap(&self) -> Result<(), ApiError> {
        let bound = self.bound();
        let export = bound.identity.label_value();
        let mut used = None;
        for (group, resource) in self.served.export_resources.iter() {
            if let Some(owned) =
                self.proxy
                    .upstream
                    .owned_by(group, resource, bound.consumer.as_str(), export)
            {
                *used.get_or_insert(0) += owned;
            }
        }
        let Some(used) = used else {
            return Ok(());
        };
        self.served
            .caps
            .one_more_object(&bound.export, used)
            .map_err(|refusal| crate::quota::refused(&self.subject(), &refusal))
    }

    /// The object a create's refusal names.
    fn subject(&self) -> Subject<'_> {
        Subject {
            group: &self.bound().group,
            resource: &self.bound().resource,
            name: self.created_name(),
        }
    }

    /// Admission for a create: tried first as a dry run when its namespace
    /// has no provider namespace yet (so that an invalid create, or a dry
    /// run, makes none), or when a ResourceQuota of the app cluster
    /// constrains it (so that what kube-apiserver checks before its quota
    /// admission, validation, the provider's own admission, a name in use,
    /// refuses first and an invalid create is never charged); then the
    /// quota is charged, and the create goes on as it came. A dry run's
    /// answer is the answer to a dry run.
    async fn admit(
        &self,
        provider: &ProviderRequest,
        current: Option<&Value>,
        unprovisioned: Option<&str>,
    ) -> Result<Option<Response<BoxBody>>, Failure> {
        let bound = self.bound();
        // An apply creates only when there is no object yet.
        let creates =
            creates(&self.request) && (self.request.verb == Verb::Create || current.is_none());
        let (true, Some(namespace), None) = (
            creates,
            &self.resource.namespace,
            &self.resource.subresource,
        ) else {
            return Ok(None);
        };
        let pending = self
            .proxy
            .quota
            .pending(
                bound.consumer.as_str(),
                namespace,
                &bound.group,
                &bound.resource,
            )
            .await?;
        if pending.is_none() && unprovisioned.is_none() {
            return Ok(None);
        }
        let dry_run = match &self.request.options {
            Options::Create(options) | Options::Patch(options) => !options.dry_run.is_empty(),
            _ => false,
        };
        let answer = match unprovisioned {
            Some(namespace) => self.trial_elsewhere(namespace).await?,
            None => {
                let mut trial = provider.clone();
                if !dry_run {
                    trial.query.push(("dryRun".into(), "All".into()));
                }
                self.exchange(trial).await?
            }
        };
        if !answer.status().is_success() {
            return Ok(Some(answer));
        }
        if let Some(pending) = pending {
            pending.charge(&self.subject(), dry_run).await?;
        }
        Ok(dry_run.then_some(answer))
    }

    /// The create as a dry run in the consumer's cluster namespace, for a
    /// consumer namespace that has no provider namespace yet: the
    /// provider's validation and admission of it, without making the
    /// namespace first. Its answer is in the consumer's terms, the object in
    /// the namespace it was asked for.
    async fn trial_elsewhere(&self, namespace: &str) -> Result<Response<BoxBody>, Failure> {
        let mut elsewhere = self.bound().clone();
        let cluster_namespace = elsewhere.namespaces.cluster_namespace().to_string();
        elsewhere
            .namespaces
            .insert(namespace.to_string(), cluster_namespace.clone());
        let mut trial = request_down(
            &elsewhere,
            self.resource,
            &self.request,
            &self.proxy.tokens,
            None,
        )
        .map_err(|e| request_error(&elsewhere, e))?;
        if !trial.query.iter().any(|(key, _)| key == "dryRun") {
            trial.query.push(("dryRun".into(), "All".into()));
        }
        let store = self.store();
        let mut read = store.exchange(self.build(&trial)?).await?;
        let mut answer: Value =
            crate::deep::from_slice(&read.body).map_err(|_| store.unreadable())?;
        if let Some(metadata) = answer.get_mut("metadata").and_then(Value::as_object_mut)
            && metadata.get("namespace").and_then(Value::as_str) == Some(&cluster_namespace)
        {
            let provider_ns = self.bound().namespaces.to_provider(namespace);
            metadata.insert("namespace".into(), provider_ns.into());
        }
        read.body = serde_json::to_vec(&answer)
            .map_err(|_| store.unreadable())?
            .into();
        store.answer(read)
    }

    /// For a create of a cluster-scoped object beside every other
    /// consumer's, the reference to the consumer's cluster Namespace that
    /// kube-bind's konnector gives it, as a stored object holding it.
    async fn cluster_namespace_owner(
        &self,
        current: Option<&Value>,
    ) -> Result<Option<Value>, Failure> {
        let bound = self.bound();
        let plain_create = self.request.verb == Verb::Create && self.resource.subresource.is_none();
        if current.is_some() || !plain_create || !bound.owned_by_cluster_namespace() {
            return Ok(None);
        }
        let uid = self.proxy.namespaces.cluster_namespace_uid(bound).await?;
        Ok(uid.map(|uid| {
            crate::translate::owners::owned_by_cluster_namespace(
                bound.namespaces.cluster_namespace(),
                &uid,
            )
        }))
    }

    /// The name a create's refusal gives its object, as kube-apiserver's
    /// admission errors do: its name, else its `generateName`, else
    /// `Unknown`.
    fn created_name(&self) -> &str {
        if let Some(name) = &self.resource.name {
            return name;
        }
        let metadata = match &self.request.body {
            Some(Body::Object(object)) => &object["metadata"],
            _ => &Value::Null,
        };
        ["name", "generateName"]
            .iter()
            .filter_map(|key| metadata[key].as_str())
            .find(|value| !value.is_empty())
            .unwrap_or("Unknown")
    }

    /// The provider's current object behind the request's name, in provider
    /// terms; `None` when there is none. Anything but the consumer's own
    /// object or a plain "not found" stops the request: a throttled or
    /// failing read is no proof of ownership.
    async fn current(&self) -> Result<Option<Value>, Failure> {
        let mut main = self.resource.clone();
        main.subresource = None;
        let target = provider_target(self.bound(), &main);
        let read = self.get(target, None).await?;
        if read.status == StatusCode::NOT_FOUND {
            return Ok(None);
        }
        let shape = Shape {
            expected: Expected::Object,
            ..self.shape.clone()
        };
        let store = Store {
            shape: &shape,
            ..self.store()
        };
        // Visible: the provider's own form is what a patch applies to.
        store.up(&read)?;
        if read.status != StatusCode::OK {
            return Err(store.unreadable());
        }
        let object = crate::deep::from_slice(&read.body).map_err(|_| store.unreadable())?;
        Ok(Some(object))
    }

    /// The scale subresource's paths in the requested version's schema.
    fn scale_paths(&self) -> Option<CustomResourceSubresourceScale> {
        self.served
            .spec
            .versions
            .iter()
            .find(|version| version.name == self.resource.version)?
            .subresources
            .as_ref()?
            .scale
            .clone()
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

    /// Whether this request is made as the consumer's own account: every
    /// request in one of its provider namespaces, and every request of a
    /// cluster-scoped resource (whose grant is the account's cluster-wide,
    /// or in its cluster namespace under `Namespaced` isolation). Lists and
    /// watches across namespaces are bindery's: RBAC cannot grant one
    /// consumer's objects of every namespace, so they are narrowed to the
    /// consumer's identity and checked object by object. So are requests
    /// in a namespace the consumer has none of on the provider yet, where
    /// there is nothing to reach (a write makes it first).
    fn impersonated(&self) -> bool {
        if self.proxy.access.is_none() {
            return false;
        }
        let bound = self.bound();
        match &self.resource.namespace {
            Some(namespace) => self.proxy.namespaces.exists(bound, namespace),
            None => !bound.namespaced,
        }
    }

    /// This request as RBAC sees it, for `verb`.
    fn attempt(&self, verb: &'static str, subresource: Option<&str>) -> access::Attempt {
        let bound = self.bound();
        access::Attempt {
            verb,
            group: bound.group.clone(),
            resource: bound.resource.clone(),
            subresource: subresource.map(str::to_string),
            namespace: match &self.resource.namespace {
                Some(namespace) => Some(bound.namespaces.to_provider(namespace)),
                None => bound
                    .provider_namespace_of_cluster_scoped()
                    .map(str::to_string),
            },
            name: self.resource.name.as_ref().map(|n| bound.provider_name(n)),
        }
    }

    /// A list or watch across namespaces, made as bindery: the provider
    /// namespaces the consumer's account may not read are closed in the
    /// view (`gate`), so their objects reach the caller from neither the
    /// provider nor the cache.
    async fn close_unreadable_namespaces(&mut self) {
        let verb = match self.request.verb {
            Verb::List => "list",
            Verb::Watch => "watch",
            _ => return,
        };
        let bound = &self.served.bound;
        let (Some(access), None, true) = (
            &self.proxy.access,
            &self.resource.namespace,
            bound.namespaced,
        ) else {
            return;
        };
        let namespaces = self.proxy.namespaces.all(bound);
        for closed in gate::unreadable(access, bound, verb, namespaces).await {
            tracing::warn!(consumer = %bound.consumer, resource = %bound.qualified_resource(),
                "a provider namespace of the consumer's is not readable by its account: its objects are left out");
            Arc::make_mut(&mut self.view).bound.namespaces.close(closed);
        }
    }

    /// Whether the shared cache may answer this read (`verb`: list or
    /// watch) without asking the provider: a request made as the consumer
    /// only where its account may read, as the provider's review says; one
    /// of bindery's own (across namespaces) is narrowed to the identity.
    async fn cache_may_answer(&self, verb: &'static str) -> bool {
        match (&self.proxy.access, self.impersonated()) {
            (Some(access), true) => access.may(self.bound(), &self.attempt(verb, None)).await,
            _ => true,
        }
    }

    /// Sends what `make` builds; as the consumer, a refusal is waited out
    /// while the consumer's RBAC may still be on its way, then answered in
    /// the consumer's terms.
    async fn send_as_consumer(
        &self,
        make: impl Fn() -> Result<http::Request<Bytes>, Failure>,
        verb: &'static str,
        subresource: Option<&str>,
    ) -> Result<http::Response<BoxBody>, Failure> {
        let response = self.send(make()?).await?;
        let (true, Some(access)) = (
            response.status() == StatusCode::FORBIDDEN && self.impersonated(),
            &self.proxy.access,
        ) else {
            return Ok(response);
        };

        let bound = self.bound();
        let attempt = self.attempt(verb, subresource);
        // A watch's deadline is its whole life: RBAC on its way is waited
        // for only a short while.
        let deadline = match verb {
            "watch" => self
                .deadline
                .min(tokio::time::Instant::now() + WATCH_RBAC_PATIENCE),
            _ => self.deadline,
        };
        let settled = access.settles(bound, &attempt, deadline).await;
        let response = match settled {
            // Allowed at once: unless the refusal is in RBAC's words (its
            // authorizer had not seen the grant yet), it is the provider's
            // own (its admission, a quota of its own), answered as it came.
            access::Settled::Already => Some(kept(response).await?),
            access::Settled::Now => Some(kept(self.send(make()?).await?).await?),
            access::Settled::Never => None,
        };
        if let Some((response, body)) = response {
            let by_rbac =
                response.status() == StatusCode::FORBIDDEN && access::refused_by_rbac(bound, &body);
            match (by_rbac, settled) {
                (false, _) => return Ok(response),
                (true, access::Settled::Already) => {
                    let again = self.send(make()?).await?;
                    let (again, body) = kept(again).await?;
                    if again.status() != StatusCode::FORBIDDEN
                        || !access::refused_by_rbac(bound, &body)
                    {
                        return Ok(again);
                    }
                }
                (true, _) => {}
            }
        }
        Err(access::refused(
            bound,
            &self.user,
            verb,
            self.resource.namespace.as_deref(),
            self.resource.name.as_deref(),
        )
        .into())
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

    /// A JSON or merge patch: applied by bindery to the consumer's form of
    /// the object as it is, and its result stored with an update pinned to
    /// the version it was applied to; applied again when the object
    /// changed in between, as kube-apiserver applies a patch again.
    async fn patch(
        &self,
        patch_type: PatchType,
        patch: &Value,
        mut current: Option<Value>,
    ) -> Result<Response<BoxBody>, Failure> {
        let bound = self.bound();
        let Options::Patch(options) = &self.request.options else {
            return Err(ApiError::internal("a patch without patch options").into());
        };
        let scale = self.resource.subresource.as_deref() == Some("scale");
        let target = provider_target(bound, self.resource);
        for attempt in 0.. {
            let Some(object) = current.take() else {
                return Err(self.not_found().into());
            };
            // A Scale is patched as kube-apiserver patches it: made from
            // the object (its GET of the Scale fails where the object has
            // no replicas yet, its patch does not).
            let scale_paths = scale.then(|| self.scale_paths()).flatten();
            let base = match &scale_paths {
                Some(paths) => match scale::scale_to_patch(&object, paths) {
                    Ok(made) => made,
                    Err(scale::Unscalable::NotAnInteger) => {
                        let read = self.get(target.clone(), Some("scale")).await?;
                        if !(200..300).contains(&read.status) {
                            return self.store().answer(read);
                        }
                        crate::deep::from_slice(&read.body)
                            .map_err(|_| self.store().unreadable())?
                    }
                },
                None => object,
            };
            let mut result = patch::patched(bound, patch_type, patch, &base, !scale)?;
            if let Some(paths) = &scale_paths {
                scale::check_patched(&result, paths)?;
            }
            let pinned = result.pointer("/metadata/resourceVersion")
                == base.pointer("/metadata/resourceVersion");
            let body = update_down(bound, self.resource, &mut result, &base)
                .map_err(|refusal| request_error(bound, RequestError::Refused(refusal)))?;
            let mut query = Vec::new();
            options.encode(&mut query);
            query.retain(|(key, _)| key != "force");
            let provider = ProviderRequest {
                method: Method::PUT,
                target: target.clone(),
                query,
                accept: crate::translate::request::upstream_accept(self.request.output.target),
                body: Some(body),
            };
            let subresource = self.resource.subresource.as_deref();
            let response = self
                .send_as_consumer(|| self.build(&provider), "update", subresource)
                .await?;
            let read = self.store().read(response).await?;
            if read.status == StatusCode::CONFLICT && pinned && attempt + 1 < PATCH_ATTEMPTS {
                current = self.current().await?;
                continue;
            }
            return self.store().answer(read);
        }
        unreachable!("the loop returns")
    }
}

/// The verb RBAC checks for a request sent with `method`.
fn rbac_verb(verb: Verb, method: &Method) -> &'static str {
    match verb {
        Verb::Patch if method == Method::PUT => "update",
        other => other.as_str(),
    }
}

/// A delete removes exactly the object whose ownership was checked: its
/// uid is a precondition (unless the caller gave one).
fn pin_delete(provider: &mut ProviderRequest, current: &Value) {
    let Some(uid) = current.pointer("/metadata/uid").and_then(Value::as_str) else {
        return;
    };
    let Some((_, bytes)) = &mut provider.body else {
        return;
    };
    let Ok(mut options) = crate::deep::from_slice::<Value>(bytes) else {
        return;
    };
    let preconditions = options.as_object_mut().map(|o| {
        o.entry("preconditions")
            .or_insert_with(|| serde_json::json!({}))
    });
    if let Some(Value::Object(preconditions)) = preconditions
        && !preconditions.contains_key("uid")
    {
        preconditions.insert("uid".into(), Value::String(uid.to_string()));
        *bytes = serde_json::to_vec(&options).expect("a JSON value serializes");
    }
}

/// `response` read whole, and the same response again with its body (to
/// look at it before it is answered).
async fn kept(
    response: http::Response<BoxBody>,
) -> Result<(http::Response<BoxBody>, Bytes), Failure> {
    let (parts, body) = response.into_parts();
    let bytes = body
        .collect()
        .await
        .map(|collected| collected.to_bytes())
        .map_err(|e| ApiError::unavailable(format!("reading the provider's answer: {e}")))?;
    let again = http_body_util::Full::new(bytes.clone())
        .map_err(|never| match never {})
        .boxed_unsync();
    Ok((http::Response::from_parts(parts, again), bytes))
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
