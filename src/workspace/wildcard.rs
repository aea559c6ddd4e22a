//! `clusters/*`: one provider list or watch across every consumer of an
//! export, through the forwarding pipeline (`crate::forward`) with every
//! consumer of the export as the view: each object shown in its consumer's
//! terms and marked with its consumer. The provider's resourceVersions and
//! bookmarks pass as they are, so one watch resumes like any other. A
//! watch whose consumer leaves the export ends with 410, to be listed again.
//! Everything but list and watch needs a consumer's path.

use crate::app::App;
use crate::catalog::Catalog;
use crate::catalog::watch::SharedCatalog;
use crate::forward::answer::{Shape, View, Visibility, answer_up, event_up};
use crate::forward::encode::{self, ErrorForm};
use crate::forward::request::{ApiRequest, Incoming};
use crate::proxy::watch;
use crate::route::{ConsumerId, ResourceRequest, Verb};
use crate::status::ApiError;
use crate::translate::BoundResource;
use crate::translate::continue_token::{ContinueTokens, TokenError};
use crate::translate::request::{encode as encode_segment, include_object, upstream_accept};
use crate::translate::workspace::Consumers;
use crate::upstream::BoxBody;
use crate::wire::query::Pairs;
use bytes::Bytes;
use http::header::{ACCEPT, CONTENT_TYPE, USER_AGENT};
use http::{Method, Response, StatusCode};
use http_body_util::BodyExt;
use serde_json::Value;
use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

/// The bound resources of `request`'s resource across every consumer of
/// export `key`, as `catalog` has them now.
fn bounds_of(catalog: &Catalog, key: &str, request: &ResourceRequest) -> Vec<BoundResource> {
    catalog
        .consumers_of(key)
        .iter()
        .filter_map(|(consumer, _)| {
            let view = catalog.view(consumer).through_export(key);
            view.find(&request.group, &request.resource)
                .filter(|s| s.serves(&request.version))
                .map(|s| s.bound.clone())
        })
        .collect()
}

/// Every consumer of the export, as the catalog has them at each object: a
/// long watch sees a consumer that bound after it started.
struct Everyone {
    catalog: SharedCatalog,
    export: String,
    request: ResourceRequest,
    current: Mutex<(u64, Arc<Consumers>)>,
    /// Every consumer this request has served (at `current`'s generation,
    /// or before).
    known: Mutex<(u64, BTreeSet<ConsumerId>)>,
    tokens: Arc<ContinueTokens>,
    scope: String,
}

impl Everyone {
    fn consumers(&self) -> Arc<Consumers> {
        let now = self.catalog.read(Catalog::generation);
        let mut current = self.current.lock().expect("not poisoned");
        if now != current.0 {
            let bounds = self
                .catalog
                .read(|c| bounds_of(c, &self.export, &self.request));
            *current = (now, Arc::new(Consumers::new(bounds)));
        }
        current.1.clone()
    }

    /// Whether a consumer this watch served has left the export since: the
    /// objects it was shown would stay in the watcher's cache, as no event
    /// deletes them, so the watch must end with 410 and be listed again.
    fn someone_left(&self) -> bool {
        let now = self.catalog.read(Catalog::generation);
        let mut known = self.known.lock().expect("not poisoned");
        if now == known.0 {
            return false;
        }
        let serving: BTreeSet<ConsumerId> = self
            .catalog
            .read(|c| bounds_of(c, &self.export, &self.request))
            .into_iter()
            .map(|b| b.consumer)
            .collect();
        let left = known.1.difference(&serving).next().is_some();
        known.0 = now;
        known.1.extend(serving);
        left
    }
}

/// How often a wildcard watch looks whether a consumer left.
const DEPARTURES: std::time::Duration = std::time::Duration::from_secs(1);

/// `body`, a translated watch, ended with kube-apiserver's 410 `Expired`
/// event once a consumer it served leaves the export: watchers (client-go's
/// reflector, kube-rs' watcher) list again, and the leaver's objects leave
/// their caches (for kcp's multicluster-provider in its `ObjectToWatch`
/// mode, that disengages the consumer).
fn ending_when_a_consumer_leaves(
    mut body: BoxBody,
    view: Arc<Everyone>,
    media: crate::wire::accept::Media,
) -> BoxBody {
    let (tx, rx) = tokio::sync::mpsc::channel::<Bytes>(16);
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(DEPARTURES);
        loop {
            tokio::select! {
                frame = body.frame() => {
                    let Some(Ok(frame)) = frame else { return };
                    if let Ok(data) = frame.into_data()
                        && tx.send(data).await.is_err()
                    {
                        return;
                    }
                }
                _ = tick.tick() => {
                    if view.someone_left() {
                        tracing::info!(export = %view.export, "a consumer left: the wildcard watch ends with 410");
                        let gone = serde_json::json!({"type": "ERROR", "object": {
                            "kind": "Status", "apiVersion": "v1", "metadata": {},
                            "status": "Failure", "reason": "Expired", "code": 410,
                            "message": "the consumers of this export changed: list again",
                        }});
                        if let Some(event) = encode::event(&gone, media) {
                            let _ = tx.send(event).await;
                        }
                        return;
                    }
                }
                _ = tx.closed() => return,
            }
        }
    });
    let frames = futures::stream::unfold(rx, |mut rx| async move {
        let bytes = rx.recv().await?;
        Some((
            Ok::<_, crate::upstream::BoxError>(hyper::body::Frame::data(bytes)),
            rx,
        ))
    });
    http_body_util::StreamBody::new(frames).boxed_unsync()
}

impl View for Everyone {
    fn object_up(&self, object: &mut Value) -> Visibility {
        self.consumers().object_up(object)
    }

    fn scale_up(&self, _scale: &mut Value) -> Visibility {
        Visibility::Hidden
    }

    fn text_up(&self, text: &str) -> String {
        Consumers::text_up(text)
    }

    fn continue_up(&self, token: &str) -> String {
        self.tokens.seal(&self.scope, token)
    }
}

/// Serves a list or watch of `request`'s resource across every consumer of
/// the export.
pub async fn serve(
    app: &App,
    export: &str,
    request: ResourceRequest,
    parts: http::request::Parts,
) -> Result<Response<BoxBody>, ApiError> {
    let errors = ErrorForm::of(&parts.headers, parts.uri.query());
    let (generation, bounds) = app
        .catalog
        .read(|c| (c.generation(), bounds_of(c, export, &request)));
    let Some(first) = bounds.first().cloned() else {
        return Err(ApiError::page_not_found());
    };
    // Only lists and watches: anything else needs a consumer's path.
    let verb = Verb::of_query(&parts.method, &request, parts.uri.query());
    if !matches!(verb, Some(Verb::List | Verb::Watch)) || parts.method != Method::GET {
        return Err(ApiError::method_not_allowed(
            parts.method.as_str(),
            &first.group,
            &first.resource,
        ));
    }
    let incoming = Incoming {
        method: &parts.method,
        resource: &request,
        query: parts.uri.query(),
        headers: &parts.headers,
        body: &[],
        kind: &first.kind,
    };
    let api =
        ApiRequest::parse(&incoming)?.ok_or_else(|| ApiError::internal("a list without a verb"))?;
    if request.namespace.is_some() {
        return Err(ApiError::bad_request(
            "a namespace belongs to one consumer: list it at clusters/<consumer>/",
        ));
    }
    let scope = format!("workspace/{export}/{}", first.qualified_resource());
    let known = bounds.iter().map(|b| b.consumer.clone()).collect();
    let view = Arc::new(Everyone {
        catalog: app.catalog.clone(),
        export: export.to_string(),
        request: request.clone(),
        known: Mutex::new((generation, known)),
        current: Mutex::new((generation, Arc::new(Consumers::new(bounds)))),
        tokens: app.proxy.tokens.clone(),
        scope: scope.clone(),
    });
    let uri = provider_uri(app, &request, &api, &scope)?;
    let mut upstream = http::Request::builder()
        .method(Method::GET)
        .uri(uri)
        .header(ACCEPT, upstream_accept(api.output.target));
    if let Some(agent) = parts.headers.get(USER_AGENT) {
        upstream = upstream.header(USER_AGENT, agent);
    }
    let upstream = upstream
        .body(Bytes::new())
        .map_err(|e| ApiError::internal(e.to_string()))?;
    let response = app
        .proxy
        .upstream
        .send(upstream)
        .await
        .map_err(|e| ApiError::unavailable(format!("the provider cannot be reached: {e}")))?;
    let api_version = format!("{}/{}", request.group, request.version);
    let shape = Shape::of(&api, None, &first.kind, &api_version);
    let status = response.status();
    let json = response
        .headers()
        .get(CONTENT_TYPE)
        .is_some_and(|ct| ct.as_bytes().starts_with(b"application/json"));
    if api.verb == Verb::Watch && status.is_success() {
        if !json {
            return Err(crate::forward::answer::unreadable("the provider"));
        }
        let media = api.output.media;
        let translating = view.clone();
        let body = watch::translate_stream(
            response.into_body(),
            Box::new(move |event| {
                encode::event(&event_up(translating.as_ref(), &shape, event)?, media)
            }),
            app.proxy.shutdown.clone(),
        );
        let body = ending_when_a_consumer_leaves(body, view, media);
        return Ok(encode::watch_response(status, body, media));
    }
    let bytes = response
        .into_body()
        .collect()
        .await
        .map_err(|e| ApiError::unavailable(format!("reading the provider's answer: {e}")))?
        .to_bytes();
    if !json {
        return Err(crate::forward::answer::unreadable("the provider"));
    }
    let answer = answer_up(view.as_ref(), &shape, status.as_u16(), &bytes).map_err(|refused| {
        refused.to_error("the provider", || {
            crate::forward::answer::unreadable("the provider")
        })
    })?;
    if answer.status >= 300 {
        return Ok(errors.status(answer.status, &answer.value));
    }
    if let Err(error) = &api.table {
        return Err(error.clone());
    }
    let (content_type, body) = encode::encode(&answer.value, api.output.media, api.pretty)
        .ok_or_else(|| crate::forward::answer::unreadable("the provider"))?;
    let mut response = encode::full(answer.status, content_type, body);
    *response.status_mut() = StatusCode::from_u16(answer.status).unwrap_or(StatusCode::OK);
    Ok(response)
}

/// The provider's collection across namespaces, with the caller's options:
/// its label selector narrowed to objects of any export (others are
/// dropped on the way back), a namespace selector refused (a namespace is
/// one consumer's), its continue token opened.
fn provider_uri(
    app: &App,
    request: &ResourceRequest,
    api: &ApiRequest,
    scope: &str,
) -> Result<String, ApiError> {
    let mut options = api
        .list_options()
        .cloned()
        .ok_or_else(|| ApiError::internal("a list without list options"))?;
    let names_a_namespace = crate::wire::selector::parse_field_selector(&options.field_selector)
        .is_ok_and(|fields| fields.terms().iter().any(|t| t.key == "metadata.namespace"));
    if names_a_namespace {
        return Err(ApiError::bad_request(
            "metadata.namespace names a namespace of one consumer: select it at clusters/<consumer>/",
        ));
    }
    let caller = Some(options.label_selector.as_str()).filter(|s| !s.is_empty());
    options.label_selector = Consumers::selector(caller);
    if !options.continue_token.is_empty() {
        options.continue_token = app
            .proxy
            .tokens
            .open(scope, &options.continue_token)
            .map_err(|e| match e {
                TokenError::Forged => ApiError::bad_request(
                    "invalid continue token: continue key is not valid: it was not issued for this request",
                ),
                other => ApiError::bad_request(format!(
                    "invalid continue token: continue key is not valid: {other}"
                )),
            })?;
    }
    let mut query = Pairs::new();
    options.encode(&mut query);
    query.extend(include_object(api));
    Ok(format!(
        "/apis/{}/{}/{}?{}",
        encode_segment(&request.group),
        encode_segment(&request.version),
        encode_segment(&request.resource),
        form_urlencoded::Serializer::new(String::new())
            .extend_pairs(&query)
            .finish()
    ))
}
