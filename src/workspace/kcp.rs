//! The kcp dialect of the workspace (`translate::kcp`), served beside
//! bindery's own so that controllers written for kcp's APIExport virtual
//! workspace run unmodified: at the export's root
//! (`/services/export/<export>`), its `APIExportEndpointSlice`; at
//! `clusters/*` and `clusters/<consumer>`, one `APIBinding` per consumer,
//! made from the consumer's APIServiceExport as the provider lists and
//! watches them (the provider's resourceVersions, continue tokens sealed to
//! the workspace, so a watch resumes like any other). Read only: get, list
//! and watch, in JSON or YAML.

use super::At;
use crate::app::App;
use crate::catalog::watch::export_record;
use crate::controllers::ownership::Ours;
use crate::forward::answer::{Shape, View, Visibility, event_up, status_up};
use crate::forward::encode::{self, Failure};
use crate::forward::request::{ApiRequest, Incoming, Options};
use crate::forward::store::{Named, Store};
use crate::forward::watch;
use crate::proxy::provider::{self, PROVIDER};
use crate::resolved::Resolved;
use crate::route::{ConsumerId, ResourceRequest, Verb};
use crate::status::ApiError;
use crate::translate::continue_token::ContinueTokens;
use crate::translate::kcp;
use crate::translate::request::ProviderRequest;
use crate::upstream::BoxBody;
use crate::wire::query::{ListOptions, Pairs};
use crate::wire::selector::{
    FieldSelector, LabelSelector, parse_field_selector, parse_label_selector,
};
use bytes::Bytes;
use http::header::{ACCEPT, HOST, USER_AGENT};
use http::{Method, Response};
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;

/// The provider's exports, which the bindings are made from.
const EXPORT_GROUP: &str = "kube-bind.io";
const EXPORT_API_VERSION: &str = "v1alpha2";
const EXPORT_RESOURCE: &str = "apiserviceexports";
const EXPORT_KIND: &str = "APIServiceExport";
const EXPORT_VERSION: &str = "kube-bind.io/v1alpha2";
/// How long a watch of the endpoint slice (which never changes) stays open
/// without `timeoutSeconds`: kube-apiserver's default minimum.
const SLICE_WATCH: Duration = Duration::from_secs(1800);

/// Whether `request` names one of the kcp dialect's resources.
pub fn names_kcp(request: &ResourceRequest) -> bool {
    request.group == kcp::GROUP
}

/// The CRD specs of what the dialect serves at `at`, for discovery.
pub fn specs_at(
    at: &At,
) -> Vec<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinitionSpec>
{
    match at {
        At::Root => vec![kcp::slices_spec()],
        At::Every | At::One(_) => vec![kcp::bindings_spec()],
    }
}

/// Serves a request for one of the kcp dialect's resources at `at`.
pub async fn serve(
    app: &App,
    target: &super::target::Target,
    at: &At,
    resolved: &Resolved,
    parts: &http::request::Parts,
) -> Result<Response<BoxBody>, Failure> {
    let request = resolved.resource().ok_or_else(ApiError::page_not_found)?;
    let resource = match at {
        At::Root => kcp::SLICES,
        At::Every | At::One(_) => kcp::BINDINGS,
    };
    if request.resource != resource
        || request.version != kcp::VERSION
        || request.namespace.is_some()
        || request.subresource.is_some()
    {
        return Err(ApiError::page_not_found().into());
    }
    let verb = resolved.verb;
    let read = matches!(verb, Some(Verb::Get | Verb::List | Verb::Watch))
        && matches!(parts.method, Method::GET | Method::HEAD);
    if !read {
        return Err(ApiError::method_not_allowed(
            verb.map_or(parts.method.as_str(), |v| v.as_str()),
            kcp::GROUP,
            resource,
        )
        .into());
    }
    let kind = match at {
        At::Root => kcp::SLICE_KIND,
        _ => kcp::BINDING_KIND,
    };
    let incoming = Incoming {
        method: &parts.method,
        resource: request,
        query: &resolved.query,
        verb,
        headers: &parts.headers,
        body: &[],
        kind,
        body_too_large: false,
        field_labels: None,
    };
    let mut api =
        ApiRequest::parse(&incoming)?.ok_or_else(|| ApiError::internal("a read without a verb"))?;
    let accept = parts.headers.get(ACCEPT).and_then(|v| v.to_str().ok());
    api.output = crate::wire::accept::object_output(accept, api.verb == Verb::Watch)?;
    // Never a Table: the Table's options are not read.
    api.table = Ok(Default::default());
    let (labels, fields) = selectors(&api)?;
    let selection = Selection { labels, fields };
    match at {
        At::Root => Ok(slices(app, target, request, &api, &selection, parts)?),
        At::Every | At::One(_) => bindings(app, target, at, resolved, &api, selection, parts).await,
    }
}

/// The caller's selectors, read as on an object of the dialect.
struct Selection {
    labels: LabelSelector,
    fields: FieldSelector,
}

impl Selection {
    fn selects(&self, name: &str) -> bool {
        kcp::selected(name, &self.labels, &self.fields)
    }
}

fn selectors(api: &ApiRequest) -> Result<(LabelSelector, FieldSelector), ApiError> {
    let (label, field) = api
        .list_options()
        .map(|o| (o.label_selector.as_str(), o.field_selector.as_str()))
        .unwrap_or_default();
    let labels = parse_label_selector(label).map_err(ApiError::bad_request)?;
    let fields = parse_field_selector(field).map_err(ApiError::bad_request)?;
    kcp::check_fields(&fields).map_err(ApiError::bad_request)?;
    Ok((labels, fields))
}

/// The export's endpoint slice: named after the path's key, its endpoint
/// the export's workspace URL (under `--external-url`, else where the
/// caller reached bindery).
fn slices(
    app: &App,
    target: &super::target::Target,
    request: &ResourceRequest,
    api: &ApiRequest,
    selection: &Selection,
    parts: &http::request::Parts,
) -> Result<Response<BoxBody>, ApiError> {
    let authority = parts
        .uri
        .authority()
        .map(|a| a.as_str().to_string())
        .or_else(|| {
            parts
                .headers
                .get(HOST)
                .and_then(|h| h.to_str().ok())
                .and_then(|h| h.parse::<http::uri::Authority>().ok())
                .map(|a| a.as_str().to_string())
        })
        .ok_or_else(|| ApiError::bad_request("the request names no host"))?;
    let key = &target.key;
    let url = kcp::workspace_url(app.external_url.as_deref(), &authority, key);
    let slice = kcp::endpoint_slice(key, &url);
    let media = api.output.media;
    match api.verb {
        Verb::Get => {
            if request.name.as_deref() != Some(key.as_str()) {
                return Err(ApiError::object_not_found(
                    kcp::GROUP,
                    kcp::SLICES,
                    request.name.as_deref().unwrap_or_default(),
                ));
            }
            respond(&slice, api)
        }
        Verb::List => {
            let items: Vec<Value> = selection
                .selects(key)
                .then_some(slice)
                .into_iter()
                .collect();
            let list = json!({
                "apiVersion": kcp::api_version(),
                "kind": format!("{}List", kcp::SLICE_KIND),
                "metadata": {"resourceVersion": kcp::SLICE_VERSION},
                "items": items,
            });
            respond(&list, api)
        }
        _ => {
            let options = api.list_options().cloned().unwrap_or_default();
            let mut events = Vec::new();
            let from_start = matches!(options.resource_version.as_str(), "" | "0")
                || options.send_initial_events == Some(true);
            if from_start && selection.selects(key) {
                events.push(json!({"type": "ADDED", "object": slice}));
            }
            if options.send_initial_events == Some(true) && options.allow_watch_bookmarks {
                events.push(json!({"type": "BOOKMARK", "object": {
                    "apiVersion": kcp::api_version(), "kind": kcp::SLICE_KIND,
                    "metadata": {"resourceVersion": kcp::SLICE_VERSION,
                        "annotations": {"k8s.io/initial-events-end": "true"}}}}));
            }
            let open_for = options
                .timeout_seconds
                .filter(|s| *s > 0)
                .map_or(SLICE_WATCH, |s| Duration::from_secs(s.unsigned_abs()));
            let body = still_watch(events, media, open_for, app.proxy.shutdown.clone());
            Ok(encode::watch_response(http::StatusCode::OK, body, media))
        }
    }
}

/// A watch that sends `events`, then nothing, until `open_for` passes or
/// bindery shuts down.
fn still_watch(
    events: Vec<Value>,
    media: crate::wire::accept::Media,
    open_for: Duration,
    mut shutdown: tokio::sync::watch::Receiver<bool>,
) -> BoxBody {
    let (tx, rx) = tokio::sync::mpsc::channel::<Bytes>(4);
    tokio::spawn(async move {
        for event in &events {
            if let Some(bytes) = encode::event(event, media)
                && tx.send(bytes).await.is_err()
            {
                return;
            }
        }
        tokio::select! {
            _ = tokio::time::sleep(open_for) => {}
            _ = shutdown.wait_for(|stop| *stop) => {}
            _ = tx.closed() => {}
        }
    });
    crate::forward::watch::channel_body(rx)
}

/// `value` in the negotiated representation.
fn respond(value: &Value, api: &ApiRequest) -> Result<Response<BoxBody>, ApiError> {
    let (content_type, body) = encode::encode(value, api.output.media, api.pretty)
        .map_err(|e| e.to_error(|| ApiError::internal("the answer could not be encoded")))?;
    Ok(encode::full(200, content_type, body))
}

/// The consumers' APIBindings: the provider's list, watch or get of the
/// exports named after the export (in the one consumer's cluster namespace
/// on its path), each made into its consumer's binding.
async fn bindings(
    app: &App,
    target: &super::target::Target,
    at: &At,
    resolved: &Resolved,
    api: &ApiRequest,
    selection: Selection,
    parts: &http::request::Parts,
) -> Result<Response<BoxBody>, Failure> {
    let request = resolved.resource().ok_or_else(ApiError::page_not_found)?;
    let name = target
        .export_name
        .clone()
        .unwrap_or_else(|| target.key.clone());
    let prefix = app.bind.prefix.clone();
    let scope = format!("workspace/{}/{}", target.key, kcp::BINDINGS);
    let view = Arc::new(Bindings {
        key: target.key.clone(),
        prefix: prefix.clone(),
        only: match at {
            At::One(consumer) => Some(consumer.clone()),
            _ => None,
        },
        selection,
        tokens: app.proxy.tokens.clone(),
        scope: scope.clone(),
    });
    let tokens = |token: &str| {
        app.proxy.tokens.open(&scope, token).map_err(|e| {
            ApiError::bad_request(format!(
                "invalid continue token: continue key is not valid: {e}"
            ))
        })
    };
    let provider = exports_read(target, at, request, api, &name, tokens)?;
    let sent = provider::http_request(&provider, parts.headers.get(USER_AGENT), [])?;
    let response = provider::read_through(app.proxy.upstream.as_ref(), &provider, sent).await?;
    let shape = Shape::of(api, None, EXPORT_KIND, EXPORT_VERSION);
    // The one store, with the consumers' exports as bindings as its scope.
    let store = Store {
        upstream: app.proxy.upstream.as_ref(),
        name: PROVIDER,
        view: view.as_ref(),
        shape: &shape,
        request: api,
        named: Named {
            group: kcp::GROUP,
            resource: kcp::BINDINGS,
            name: &name,
        },
    };
    if api.verb == Verb::Watch && response.status().is_success() {
        let each = watched(view.clone(), shape.clone(), api.output.media);
        return store
            .watch(response, each, app.proxy.shutdown.clone())
            .await;
    }
    let read = store.read(response).await?;
    if !(200..300).contains(&read.status) {
        return Err(refused(read.status, &read.body, api, view.as_ref(), &name));
    }
    let mut answer = store.up(&read)?;
    if api.verb == Verb::List {
        answer.value["kind"] = json!(format!("{}List", kcp::BINDING_KIND));
        answer.value["apiVersion"] = json!(kcp::api_version());
    }
    store.respond(answer.status, &answer.value, read.warnings)
}

/// The provider's watch events of the exports as events of the bindings.
fn watched(
    view: Arc<Bindings>,
    shape: Shape,
    media: crate::wire::accept::Media,
) -> watch::EventTranslator {
    Box::new(move |event| {
        let mut event = event_up(view.as_ref(), &shape, event)?;
        if event["type"] == "BOOKMARK" {
            event["object"]["kind"] = json!(kcp::BINDING_KIND);
            event["object"]["apiVersion"] = json!(kcp::api_version());
        }
        encode::event(&event, media)
    })
}

/// The provider's refusal (`code`, `body`) of the read of the exports
/// behind the bindings, as the bindings' own.
fn refused(code: u16, body: &[u8], api: &ApiRequest, view: &Bindings, name: &str) -> Failure {
    let unreadable = || crate::forward::answer::unreadable(PROVIDER).into();
    match code {
        404 if api.verb == Verb::Get => {
            ApiError::object_not_found(kcp::GROUP, kcp::BINDINGS, name).into()
        }
        400 | 410 | 422 => {
            let Ok(value) = crate::deep::from_slice::<Value>(body) else {
                return unreadable();
            };
            match status_up(view, &value) {
                Some(status) => Failure::Upstream(code, status),
                None => unreadable(),
            }
        }
        _ => ApiError::unavailable("the provider cannot list the export's consumers now").into(),
    }
}

/// The provider's read of the exports behind the bindings `request` asks
/// for: the one named `name` (on a consumer's path, in its cluster
/// namespace), or those named so, listed across namespaces with the
/// caller's continue token opened by `open_token`.
fn exports_read(
    target: &super::target::Target,
    at: &At,
    request: &ResourceRequest,
    api: &ApiRequest,
    name: &str,
    open_token: impl Fn(&str) -> Result<String, ApiError>,
) -> Result<ProviderRequest, ApiError> {
    let namespace = match (at, &target.namespace) {
        (At::One(_), Some(namespace)) => Some(namespace.clone()),
        (At::One(_), None) => return Err(ApiError::page_not_found()),
        _ => None,
    };
    let mut exports = ResourceRequest {
        group: EXPORT_GROUP.into(),
        version: EXPORT_API_VERSION.into(),
        namespace,
        resource: EXPORT_RESOURCE.into(),
        name: None,
        subresource: None,
        watch_prefix: false,
    };
    let mut query = Pairs::new();
    match (&api.options, &request.name) {
        (Options::Get(options), Some(asked)) => {
            if !matches!(at, At::One(_)) {
                // A name is one consumer's: get it at clusters/<consumer>/.
                return Err(ApiError::method_not_allowed(
                    "get",
                    kcp::GROUP,
                    kcp::BINDINGS,
                ));
            }
            if asked != name {
                return Err(ApiError::object_not_found(kcp::GROUP, kcp::BINDINGS, asked));
            }
            options.encode(&mut query);
            exports.name = Some(name.to_string());
        }
        (Options::List(options), None) => {
            let mut options: ListOptions = options.clone();
            options.label_selector = String::new();
            options.field_selector = format!(
                "metadata.name={}",
                crate::wire::selector::escape_field_value(name)
            );
            if !options.continue_token.is_empty() {
                options.continue_token = open_token(&options.continue_token)?;
            }
            options.encode(&mut query);
        }
        _ => return Err(ApiError::page_not_found()),
    }
    Ok(ProviderRequest {
        method: Method::GET,
        target: exports,
        query,
        accept: "application/json".into(),
        body: None,
    })
}

/// The provider's exports as the consumers' APIBindings: an export shows
/// when it is a consumer's (its namespace is a cluster namespace, on a
/// consumer's path that consumer's) of this workspace's export (named
/// after it, or with its identity), bindery's, and selected by the caller.
struct Bindings {
    key: String,
    prefix: String,
    only: Option<ConsumerId>,
    selection: Selection,
    tokens: Arc<ContinueTokens>,
    scope: String,
}

impl Bindings {
    fn consumer_of(&self, export: &Value) -> Option<ConsumerId> {
        let metadata = export.get("metadata")?;
        let namespace = metadata.get("namespace")?.as_str()?;
        let consumer = ConsumerId::parse(namespace.strip_prefix(&self.prefix)?)?;
        if self.only.as_ref().is_some_and(|only| *only != consumer) {
            return None;
        }
        let name = metadata.get("name")?.as_str()?;
        let identity = export
            .pointer("/status/identityHash")
            .and_then(Value::as_str);
        if name != self.key && identity != Some(self.key.as_str()) {
            return None;
        }
        let typed: crate::api::APIServiceExport = serde_json::from_value(export.clone()).ok()?;
        typed.ours(&self.prefix).then_some(consumer)
    }
}

impl View for Bindings {
    fn object_up(&self, object: &mut Value) -> Visibility {
        let Some(consumer) = self.consumer_of(object) else {
            return Visibility::Hidden;
        };
        let served = serde_json::from_value::<kube::api::DynamicObject>(object.clone())
            .ok()
            .and_then(|o| export_record(&o))
            .is_some_and(|record| record.identity.is_some());
        let Some(binding) = kcp::binding_of(object, &consumer, served) else {
            return Visibility::Hidden;
        };
        let name = binding["metadata"]["name"].as_str().unwrap_or_default();
        if !self.selection.selects(name) {
            return Visibility::Hidden;
        }
        *object = binding;
        Visibility::Visible
    }

    fn scale_up(&self, _scale: &mut Value) -> Visibility {
        Visibility::Hidden
    }

    /// The provider's words about its exports, about bindings; nothing
    /// that names a cluster namespace is said.
    fn text_up(&self, text: &str) -> String {
        let text = text
            .replace("apiserviceexports.kube-bind.io", "apibindings.apis.kcp.io")
            .replace("apiserviceexports", kcp::BINDINGS)
            .replace(EXPORT_KIND, kcp::BINDING_KIND);
        if text.contains(&self.prefix) {
            "the provider refused the request".to_string()
        } else {
            text
        }
    }

    fn continue_up(&self, token: &str) -> String {
        self.tokens.seal(&self.scope, token)
    }
}
