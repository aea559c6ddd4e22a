//! The virtual workspace of an export, for the provider's controllers:
//! `/services/export/<export>/clusters/<consumer or *>/...`. Callers show
//! provider credentials (a client certificate of the provider's client CA,
//! or a token the provider accepts), checked by the authentication layer,
//! and are authorized by the authorization layer with a
//! SubjectAccessReview in the provider on the export's `content`
//! subresource, with the verb they ask for ([`target`]). One consumer's path serves
//! exactly what that consumer sees of the export, writes included, and the
//! consumer's own objects that accepted claims cover, read and written in
//! its app cluster ([`claimed`]), with discovery and OpenAPI for both; `*`
//! lists and watches the exported resources across every consumer of the
//! export ([`wildcard`]).

pub mod claimed;
mod claimed_documents;
mod claimed_writes;
pub mod target;
pub mod wildcard;

use crate::app::App;
use crate::catalog::ConsumerView;
use crate::proxy::error;
use crate::route::{ApiPath, ConsumerId};
use crate::status::ApiError;
use crate::translate::workspace::without_consumer_annotation;
use crate::upstream::BoxBody;
use bytes::Bytes;
use http::Response;
use target::{Target, resource_of};

/// Serves one workspace request for `target`, which the authorization layer
/// resolved and the provider allowed the caller.
pub async fn serve(
    app: &App,
    target: &Target,
    consumer: Option<ConsumerId>,
    path: ApiPath,
    parts: http::request::Parts,
    body: Bytes,
) -> Response<BoxBody> {
    match try_serve(app, target, consumer, path, parts, body).await {
        Ok(response) => response,
        Err(e) => error(&e),
    }
}

async fn try_serve(
    app: &App,
    target: &Target,
    consumer: Option<ConsumerId>,
    path: ApiPath,
    parts: http::request::Parts,
    body: Bytes,
) -> Result<Response<BoxBody>, ApiError> {
    let Some(export_name) = &target.export_name else {
        return Err(ApiError::page_not_found());
    };
    let views: Vec<ConsumerView> = app.catalog.read(|catalog| {
        target
            .consumers
            .iter()
            .map(|c| catalog.view(c).through_export(&target.key))
            .collect()
    });
    let Some(first) = views.first() else {
        return Err(ApiError::page_not_found());
    };
    let Some(request) = resource_of(&path) else {
        return documents(app, first, consumer.as_ref(), export_name, &path, &parts).await;
    };
    let Some(consumer) = consumer else {
        return wildcard::serve(app, &target.key, request, parts).await;
    };
    if first.find(&request.group, &request.resource).is_none() {
        // Not an exported resource: perhaps a claimed one of the consumer's.
        let target = claimed::ClaimedTarget {
            consumer: &consumer,
            cluster_namespace: &first.cluster_namespace,
            export: export_name,
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
