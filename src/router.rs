//! Dispatch: after authentication, a request goes to health, version,
//! discovery/OpenAPI or the resource proxy, for the consumer's view.

use crate::auth::User;
use crate::auth::front_proxy::Registrations;
use crate::authz::Authorizer;
use crate::authz::attributes::{Attributes, RequestUser};
use crate::catalog::watch::SharedCatalog;
use crate::proxy::{Proxy, error, full};
use crate::route::{ApiPath, Endpoint, Verb, parse};
use crate::status::ApiError;
use crate::upstream::BoxBody;
use bytes::Bytes;
use futures::future::BoxFuture;
use http::{Request, Response};
use http_body_util::{BodyExt, Limited};
use std::convert::Infallible;
use std::sync::Arc;
use std::task::{Context, Poll};

/// kube-apiserver's limit on request bodies.
pub const MAX_BODY_BYTES: usize = 3 * 1024 * 1024;

/// Everything requests are served from.
pub struct App {
    pub catalog: SharedCatalog,
    pub proxy: Proxy,
    /// The registered app clusters, whose users are authorized by them.
    pub registrations: Registrations,
    pub authorizer: Authorizer,
    /// The provider's `/version`, answered as bindery's own.
    pub version: serde_json::Value,
    /// The `/bind` endpoints.
    pub bind: crate::bind::server::BindService,
}

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
    let endpoint = parts
        .extensions
        .remove::<Endpoint>()
        .unwrap_or_else(|| parse(parts.uri.path()));
    let path = match endpoint {
        Endpoint::Health => return health(&app),
        Endpoint::Unknown => return error(&ApiError::page_not_found()),
        Endpoint::Bind(segments) => {
            return match read_body(body).await {
                Ok(body) => {
                    let caller = crate::bind::binder::Caller {
                        headers: &parts.headers,
                        peer: parts.extensions.get(),
                    };
                    app.bind
                        .serve(&parts.method, &caller, &segments, body)
                        .await
                }
                Err(too_large) => error(&too_large),
            };
        }
        Endpoint::Workspace {
            export,
            consumer,
            path,
        } => {
            return match read_body(body).await {
                Ok(body) => {
                    crate::workspace::serve(&app, &export, consumer, path, parts, body).await
                }
                Err(too_large) => error(&too_large),
            };
        }
        Endpoint::Consumer { path, .. } | Endpoint::Aggregated { path } => path,
    };
    let Some(user) = parts.extensions.get::<User>().cloned() else {
        return error(&ApiError::unauthorized());
    };
    let body = match read_body(body).await {
        Ok(body) => body,
        Err(too_large) => return error(&too_large),
    };
    if user.via.is_app_cluster_user()
        && let Err(denied) = authorize(&app, &user, &parts, &path).await
    {
        return error(&denied);
    }
    // A resource request needs only its resource's binding.
    let view = app.catalog.read(|catalog| match &path {
        ApiPath::Resource(request) => {
            catalog.resource_view(&user.consumer, &request.group, &request.resource)
        }
        _ => catalog.view(&user.consumer),
    });
    if let Some(response) = crate::documents::serve(&view, &path, &parts.headers) {
        return response;
    }
    match path {
        ApiPath::Version => json(&app.version),
        ApiPath::Health => health(&app),
        ApiPath::Resource(request) => app.proxy.serve(&view, request, parts, body).await,
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

/// The request body, up to kube-apiserver's limit.
async fn read_body<B>(body: B) -> Result<Bytes, ApiError>
where
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: std::error::Error + Send + Sync + 'static,
{
    match Limited::new(body, MAX_BODY_BYTES).collect().await {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(_) => Err(ApiError {
            code: 413,
            reason: "RequestEntityTooLarge",
            message: "the server has received too large a request body".into(),
            details: None,
            plain_text: false,
        }),
    }
}

/// An app cluster's user must be allowed by its app cluster, on the
/// attributes kube-apiserver would check for a local CRD.
async fn authorize(
    app: &App,
    user: &User,
    parts: &http::request::Parts,
    path: &ApiPath,
) -> Result<(), ApiError> {
    let ApiPath::Resource(request) = path else {
        // Discovery and OpenAPI: every authenticated user may read them, as
        // kube-apiserver's system:discovery role allows.
        return Ok(());
    };
    let Some(verb) = Verb::of_query(&parts.method, request, parts.uri.query()) else {
        return Ok(()); // Answered 405 by the proxy.
    };
    let registration = app
        .registrations
        .get(user.consumer.as_str())
        .ok_or_else(|| ApiError::internal("the app cluster's registration is gone"))?;
    let attributes = Attributes::of(
        RequestUser {
            name: user.name.clone(),
            uid: user.uid.clone(),
            groups: user.groups.clone(),
            extra: user.extra.clone(),
        },
        verb,
        request,
    );
    app.authorizer
        .authorize(&registration.app, user.consumer.as_str(), &attributes)
        .await
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

fn health(app: &App) -> Response<BoxBody> {
    if app.catalog.is_synced() {
        full(200, "text/plain; charset=utf-8", "ok")
    } else {
        error(&ApiError::unavailable(
            "the provider's exports have not been listed yet",
        ))
    }
}

fn json(value: &serde_json::Value) -> Response<BoxBody> {
    full(
        200,
        "application/json",
        serde_json::to_vec(value).expect("JSON serializes"),
    )
}
