//! Dispatch: after the layers have authenticated and authorized the
//! caller, a request's body is read ([`crate::request_body`]) and it goes to
//! health, metrics, version, discovery/OpenAPI or the resource proxy for the
//! consumer's view, to the virtual workspace, or to `/bind`.

use crate::app::App;
use crate::auth::{ProviderUser, SharedFrontProxy, User};
use crate::bind::routes::BindRoute;
use crate::proxy::{error, full};
use crate::resolved::Resolved;
use crate::route::{ApiPath, Endpoint, ResourceRequest};
use crate::status::ApiError;
use crate::upstream::BoxBody;
use crate::wire::query::Query;
use crate::workspace::target::Target;
use bytes::Bytes;
use futures::future::BoxFuture;
use http::{Request, Response};
use std::convert::Infallible;
use std::sync::Arc;
use std::task::{Context, Poll};

#[derive(Clone)]
pub struct Router {
    app: Arc<App>,
}

impl Router {
    pub fn new(app: Arc<App>) -> Self {
        Self { app }
    }
}

impl<B> tower::Service<Request<B>> for Router
where
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: std::error::Error + Send + Sync + 'static,
{
    type Response = Response<BoxBody>;
    type Error = Infallible;
    type Future = BoxFuture<'static, Result<Self::Response, Infallible>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        let app = self.app.clone();
        Box::pin(async move { Ok(route(app, request).await) })
    }
}

async fn route<B>(app: Arc<App>, request: Request<B>) -> Response<BoxBody>
where
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: std::error::Error + Send + Sync + 'static,
{
    let (mut parts, body) = request.into_parts();
    let resolved = parts
        .extensions
        .remove::<Resolved>()
        .unwrap_or_else(|| Resolved::of(&parts.method, &parts.uri));
    match &resolved.endpoint {
        Endpoint::Health => health(&app, parts.uri.path(), &resolved.query).await,
        Endpoint::Metrics => metrics(&parts.headers),
        Endpoint::Unknown => error(&ApiError::page_not_found()),
        Endpoint::Bind(segments) => serve_bind(&app, parts, segments, body).await,
        Endpoint::Workspace { consumer, root, .. } => {
            let at = crate::workspace::At::of(consumer.clone(), *root);
            serve_workspace(&app, parts, at, &resolved, body).await
        }
        Endpoint::Consumer { path, .. } | Endpoint::Aggregated { path } => {
            serve_consumer(&app, parts, path, &resolved, body).await
        }
    }
}

/// A request of `/bind`: the binder's, its body read within its route's
/// limit.
async fn serve_bind<B>(
    app: &App,
    mut parts: http::request::Parts,
    segments: &[String],
    body: B,
) -> Response<BoxBody>
where
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: std::error::Error + Send + Sync + 'static,
{
    let route = parts
        .extensions
        .remove::<BindRoute>()
        .unwrap_or_else(|| BindRoute::of(&parts.method, segments));
    let binder = parts.extensions.get::<ProviderUser>().map(|u| &u.0);
    match crate::request_body::read(body, route.body_limit(), app.body_timeout).await {
        Ok(body) => app.bind.serve(&route, binder, body).await,
        Err(refused) => error(&refused),
    }
}

/// A request of a provider's virtual workspace, its target resolved and
/// authorized by the authorization layer.
async fn serve_workspace<B>(
    app: &App,
    mut parts: http::request::Parts,
    at: crate::workspace::At,
    resolved: &Resolved,
    body: B,
) -> Response<BoxBody>
where
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: std::error::Error + Send + Sync + 'static,
{
    let Some(target) = parts.extensions.remove::<Target>() else {
        return error(&ApiError::unauthorized());
    };
    let serves = match resolved.endpoint.api_path() {
        Some(ApiPath::Resource(request)) => workspace_serves(app, &target, request),
        _ => false,
    };
    let read =
        crate::request_body::read_for_resource(body, app.body_timeout, &mut parts.extensions).await;
    let response = match read {
        Ok(body) => crate::workspace::serve(app, &target, at, resolved, parts, body).await,
        Err(refused) => error(&refused),
    };
    // A resource (and version) the export serves, and an answer that is
    // not its 404.
    let served = serves && response.status() != http::StatusCode::NOT_FOUND;
    if served {
        mark_served(response)
    } else {
        response
    }
}

/// A consumer's request (aggregated, or on its own endpoint): its
/// documents, or its resources through the proxy.
async fn serve_consumer<B>(
    app: &App,
    mut parts: http::request::Parts,
    path: &ApiPath,
    resolved: &Resolved,
    body: B,
) -> Response<BoxBody>
where
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: std::error::Error + Send + Sync + 'static,
{
    let Some(user) = parts.extensions.get::<User>().cloned() else {
        return error(&ApiError::unauthorized());
    };
    let read =
        crate::request_body::read_for_resource(body, app.body_timeout, &mut parts.extensions).await;
    let body = match read {
        Ok(body) => body,
        Err(refused) => return error(&refused),
    };
    // A resource request needs only its resource's binding.
    let view = app.catalog.read(|catalog| match path {
        ApiPath::Resource(request) => {
            catalog.resource_view(&user.consumer, &request.group, &request.resource)
        }
        _ => match parts.extensions.get::<SharedFrontProxy>() {
            Some(SharedFrontProxy(consumers)) => catalog.union_view(&user.consumer, consumers),
            None => catalog.view(&user.consumer),
        },
    });
    if let Some(response) = crate::documents::serve(&view, path, &parts.headers) {
        return response;
    }
    match path {
        ApiPath::Version => json(&app.version),
        ApiPath::Health => health(app, "/healthz", &Query::default()).await,
        ApiPath::Resource(request) => {
            let served = view
                .find(&request.group, &request.resource)
                .is_some_and(|resource| resource.serves(&request.version));
            let response = app.proxy.serve(&view, resolved, parts, body).await;
            if served {
                mark_served(response)
            } else {
                response
            }
        }
        ApiPath::Legacy(segments) if parts.method == http::Method::GET => {
            match segments.as_slice() {
                [v1, namespaces, name] if v1 == "v1" && namespaces == "namespaces" => {
                    consumer_namespace(&view, name)
                }
                _ => error(&ApiError::resource_not_found()),
            }
        }
        _ => error(&ApiError::page_not_found()),
    }
}

/// A consumer namespace bindery has a provider namespace for, as the
/// Namespace kubectl reads to tell "object not found" from "namespace not
/// found"; any other is not found.
fn consumer_namespace(view: &crate::catalog::ConsumerView, name: &str) -> Response<BoxBody> {
    let recorded = view
        .resources
        .first()
        .is_some_and(|r| r.bound.namespaces.is_recorded(name));
    if !recorded {
        return error(&ApiError::object_not_found("", "namespaces", name));
    }
    json(&serde_json::json!({
        "kind": "Namespace",
        "apiVersion": "v1",
        "metadata": {"name": name},
        "spec": {"finalizers": ["kubernetes"]},
        "status": {"phase": "Active"},
    }))
}

/// The answer of `/livez`, `/readyz` or `/healthz` (or one of their checks)
/// at `path`, as kube-apiserver's health handlers write it.
async fn health(app: &App, path: &str, query: &Query) -> Response<BoxBody> {
    match app.health.answer(path, query).await {
        Some((status, text)) => {
            let mut response = full(status, "text/plain; charset=utf-8", text);
            response.headers_mut().insert(
                "x-content-type-options",
                http::HeaderValue::from_static("nosniff"),
            );
            response
        }
        None => error(&ApiError::page_not_found()),
    }
}

/// Every metric, in the format the scraper's `Accept` prefers.
fn metrics(headers: &http::HeaderMap) -> Response<BoxBody> {
    let accept = headers
        .get(http::header::ACCEPT)
        .and_then(|v| v.to_str().ok());
    let (media_type, text) = crate::metrics::render(accept);
    full(200, media_type, text)
}

/// Whether the workspace of `target` serves `request`'s group, version and
/// resource: kcp's dialect, or a resource some consumer it is for has bound
/// at that version.
fn workspace_serves(app: &App, target: &Target, request: &ResourceRequest) -> bool {
    use crate::translate::kcp;
    if request.group == kcp::GROUP {
        return request.version == kcp::VERSION
            && [kcp::BINDINGS, kcp::SLICES].contains(&request.resource.as_str());
    }
    app.catalog.read(|catalog| {
        target.consumers.iter().any(|consumer| {
            catalog
                .resource_view(consumer, &request.group, &request.resource)
                .find(&request.group, &request.resource)
                .is_some_and(|resource| resource.serves(&request.version))
        })
    })
}

/// `response`, marked as the answer of a served resource: its metrics may
/// name the resource.
fn mark_served(mut response: Response<BoxBody>) -> Response<BoxBody> {
    response
        .extensions_mut()
        .insert(crate::metrics::requests::Served);
    response
}

fn json(value: &serde_json::Value) -> Response<BoxBody> {
    full(
        200,
        "application/json",
        serde_json::to_vec(value).expect("JSON serializes"),
    )
}
