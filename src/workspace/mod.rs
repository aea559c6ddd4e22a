//! The virtual workspace of an export, for the provider's controllers:
//! `/services/export/<export>/clusters/<consumer or *>/...`. Callers show
//! provider credentials (a client certificate of the provider's client CA,
//! or a token the provider accepts) and are authorized by a
//! SubjectAccessReview in the provider on the export's `content`
//! subresource, with the verb they ask for. One consumer's path serves
//! exactly what that consumer sees of the export, writes included, and the
//! consumer's own objects that accepted claims cover, read and written in
//! its app cluster ([`claimed`]), with discovery and OpenAPI for both; `*`
//! lists and watches the exported resources across every consumer of the
//! export ([`wildcard`]).

pub mod claimed;
mod claimed_documents;
mod claimed_writes;
mod respond;
pub mod wildcard;

use crate::authz::attributes::{Attributes, RequestUser};
use crate::bind::binder::{self, Caller};
use crate::catalog::ConsumerView;
use crate::proxy::error;
use crate::route::{ApiPath, ConsumerId, ResourceRequest, Verb, parse_legacy_resource};
use crate::router::App;
use crate::status::ApiError;
use crate::translate::workspace::without_consumer_annotation;
use crate::upstream::BoxBody;
use bytes::Bytes;
use http::Response;

/// The group, version and resource whose `content` subresource the
/// workspace is authorized on.
const EXPORT_GROUP: &str = "kube-bind.io";
const EXPORT_VERSION: &str = "v1alpha2";
const EXPORT_RESOURCE: &str = "apiserviceexports";
const CONTENT: &str = "content";

/// Decisions of the provider are cached apart from every consumer's (a
/// consumer id is a DNS label, so it never contains `@`).
const PROVIDER_CACHE_KEY: &str = "@provider";

/// Serves one workspace request.
pub async fn serve(
    app: &App,
    export: &str,
    consumer: Option<ConsumerId>,
    path: ApiPath,
    parts: http::request::Parts,
    body: Bytes,
) -> Response<BoxBody> {
    match try_serve(app, export, consumer, path, parts, body).await {
        Ok(response) => response,
        Err(e) => error(&e),
    }
}

async fn try_serve(
    app: &App,
    export: &str,
    consumer: Option<ConsumerId>,
    path: ApiPath,
    parts: http::request::Parts,
    body: Bytes,
) -> Result<Response<BoxBody>, ApiError> {
    let caller = Caller {
        headers: &parts.headers,
        peer: parts.extensions.get(),
    };
    let user = binder::authenticate(
        &app.bind.provider,
        app.bind.provider_client_ca.as_ref(),
        &caller,
    )
    .await?
    .ok_or_else(ApiError::unauthorized)?;
    // Core-group paths (`/api/v1/...`) name claimed resources only.
    let resource = match &path {
        ApiPath::Resource(request) => Some(request.clone()),
        ApiPath::Legacy(segments) => parse_legacy_resource(segments),
        _ => None,
    };
    let verb = match &resource {
        Some(request) => Verb::of_query(&parts.method, request, parts.uri.query()),
        None => Some(Verb::Get),
    };
    let (consumers, export_name) = app.catalog.read(|catalog| {
        let all = catalog.consumers_of(export);
        let name = all.first().map(|(_, name)| name.clone());
        (all, name)
    });
    let chosen: Vec<ConsumerId> = match &consumer {
        Some(one) => consumers
            .iter()
            .filter(|(c, _)| c == one)
            .map(|(c, _)| c.clone())
            .collect(),
        None => consumers.into_iter().map(|(c, _)| c).collect(),
    };
    let Some(export_name) = export_name.filter(|_| !chosen.is_empty()) else {
        // Not found only for callers the provider would let in: others learn
        // nothing about which exports and consumers exist.
        if let Some(verb) = verb {
            let namespace = consumer
                .as_ref()
                .map(|c| app.catalog.read(|catalog| catalog.cluster_namespace(c)));
            authorize(app, user, verb, export, namespace).await?;
        }
        return Err(ApiError::page_not_found());
    };
    let views: Vec<ConsumerView> = app.catalog.read(|catalog| {
        chosen
            .iter()
            .map(|c| catalog.view(c).through_export(export))
            .collect()
    });
    if let Some(verb) = verb {
        let namespace = consumer
            .as_ref()
            .and_then(|_| views.first().map(|v| v.cluster_namespace.clone()));
        authorize(app, user, verb, &export_name, namespace).await?;
    }
    let first = views.first().expect("one view per chosen consumer");
    let Some(request) = resource else {
        return documents(app, first, consumer.as_ref(), &export_name, &path, &parts).await;
    };
    let Some(consumer) = consumer else {
        return wildcard::serve(app, export, request, parts).await;
    };
    if first.find(&request.group, &request.resource).is_none() {
        // Not an exported resource: perhaps a claimed one of the consumer's.
        let target = claimed::ClaimedTarget {
            consumer: &consumer,
            cluster_namespace: &first.cluster_namespace,
            export: &export_name,
        };
        return claimed::serve(app, &target, request, &parts, body).await;
    }
    let body = without_consumer_annotation(&body).map_or(body, Bytes::from);
    Ok(app.proxy.serve(first, request, parts, body).await)
}

/// Discovery and OpenAPI: the export's resources, and on one consumer's
/// path also the claimed resources it accepted.
async fn documents(
    app: &App,
    view: &ConsumerView,
    consumer: Option<&ConsumerId>,
    export_name: &str,
    path: &ApiPath,
    parts: &http::request::Parts,
) -> Result<Response<BoxBody>, ApiError> {
    let exported = match (crate::documents::document(view, path, &parts.headers), path) {
        (Some(document), _) => document,
        // `/api/<version>`: the core group, which only claims can name.
        (None, ApiPath::Legacy(segments)) if segments.len() == 1 => None,
        (None, _) => return Err(ApiError::page_not_found()),
    };
    let mut document = match consumer {
        Some(consumer) => {
            let target = claimed::ClaimedTarget {
                consumer,
                cluster_namespace: &view.cluster_namespace,
                export: export_name,
            };
            claimed_documents::add_claimed(app, &target, path, exported).await?
        }
        None => exported,
    };
    if let (ApiPath::OpenApiV3Root, Some(root)) = (path, document.as_mut()) {
        // Clients fetch the links as server-relative URIs, which replace
        // the whole path of their server URL: keep the workspace in them.
        let prefix = parts.uri.path().trim_end_matches('/');
        let prefix = prefix.strip_suffix("/openapi/v3").unwrap_or(prefix);
        if let Some(paths) = root.value_mut()["paths"].as_object_mut() {
            for link in paths.values_mut() {
                if let Some(url) = link["serverRelativeURL"].as_str() {
                    link["serverRelativeURL"] = format!("{prefix}{url}").into();
                }
            }
        }
    }
    Ok(crate::documents::respond(document, &parts.headers))
}

/// The provider must allow `user` `verb` on the export's content: in the
/// consumer's cluster namespace for one consumer, in every namespace for all.
async fn authorize(
    app: &App,
    user: RequestUser,
    verb: Verb,
    export: &str,
    namespace: Option<String>,
) -> Result<(), ApiError> {
    let request = ResourceRequest {
        group: EXPORT_GROUP.into(),
        version: EXPORT_VERSION.into(),
        namespace,
        resource: EXPORT_RESOURCE.into(),
        name: Some(export.into()),
        subresource: Some(CONTENT.into()),
        watch_prefix: false,
    };
    let attributes = Attributes::of(user, verb, &request);
    app.authorizer
        .authorize(&app.bind.provider, PROVIDER_CACHE_KEY, &attributes)
        .await
}
