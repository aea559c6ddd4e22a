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
//! export ([`wildcard`]). Beside them, the kcp dialect ([`kcp`]): the
//! export's APIExportEndpointSlice at its root, the consumers' APIBindings
//! at `*` and on each consumer's path, and the `kcp.io/cluster` annotation
//! on every object shown (set in `translate::objects`).

pub mod claimed;
mod claimed_documents;
mod claimed_writes;
pub mod kcp;
pub mod target;
pub mod wildcard;

use crate::app::App;
use crate::catalog::ConsumerView;
use crate::forward::encode::{ErrorForm, Failure};
use crate::resolved::Resolved;
use crate::route::{ApiPath, ConsumerId};
use crate::status::ApiError;
use crate::translate::workspace::without_consumer_annotation;
use crate::upstream::BoxBody;
use bytes::Bytes;
use http::Response;
use target::Target;

/// Where in the workspace a request is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum At {
    /// `/services/export/<export>/...`: the export's own root.
    Root,
    /// `clusters/*`: every consumer.
    Every,
    /// `clusters/<consumer>`.
    One(ConsumerId),
}

impl At {
    /// The place the router's parse names.
    pub fn of(consumer: Option<ConsumerId>, root: bool) -> Self {
        match (consumer, root) {
            (_, true) => At::Root,
            (Some(consumer), false) => At::One(consumer),
            (None, false) => At::Every,
        }
    }

    fn consumer(&self) -> Option<&ConsumerId> {
        match self {
            At::One(consumer) => Some(consumer),
            _ => None,
        }
    }
}

/// Serves one workspace request for `target`, which the authorization layer
/// resolved and the provider allowed the caller.
pub async fn serve(
    app: &App,
    target: &Target,
    at: At,
    resolved: &Resolved,
    parts: http::request::Parts,
    body: Bytes,
) -> Response<BoxBody> {
    // Every error in the form the caller negotiated, as kube-apiserver
    // answers.
    let errors = ErrorForm::of(&parts.headers, Some(&resolved.query));
    match try_serve(app, target, at, resolved, parts, body).await {
        Ok(response) => response,
        Err(failure) => errors.failure(&failure),
    }
}

async fn try_serve(
    app: &App,
    target: &Target,
    at: At,
    resolved: &Resolved,
    parts: http::request::Parts,
    body: Bytes,
) -> Result<Response<BoxBody>, Failure> {
    let Some(path) = resolved.endpoint.api_path() else {
        return Err(ApiError::page_not_found().into());
    };
    // The kcp dialect: the export's root serves only its endpoint slice,
    // which exists before any consumer binds (with its one URL).
    let resource = resolved.resource();
    if resource.is_some_and(kcp::names_kcp) {
        return kcp::serve(app, target, &at, resolved, &parts).await;
    }
    if at == At::Root {
        let root_document = matches!(
            path,
            ApiPath::LegacyRoot
                | ApiPath::GroupList
                | ApiPath::Group(_)
                | ApiPath::GroupVersion { .. }
                | ApiPath::OpenApiV2
                | ApiPath::OpenApiV3Root
                | ApiPath::OpenApiV3GroupVersion { .. }
        );
        if !root_document {
            return Err(ApiError::page_not_found().into());
        }
        let specs = || kcp::specs_at(&At::Root);
        let mut document = crate::documents::document_of(specs, path, &parts.headers).flatten();
        if let Some(document) = document.as_mut() {
            crate::translate::kcp::narrow_verbs(document.value_mut());
        }
        return Ok(crate::documents::respond(document, &parts.headers));
    }
    let consumer = at.consumer().cloned();
    let Some(export_name) = &target.export_name else {
        return Err(ApiError::page_not_found().into());
    };
    let views: Vec<ConsumerView> = app.catalog.read(|catalog| {
        target
            .consumers
            .iter()
            .map(|c| catalog.view(c).through_export(&target.key))
            .collect()
    });
    let Some(first) = views.first() else {
        return Err(ApiError::page_not_found().into());
    };
    let Some(request) = resource else {
        return Ok(documents(app, first, &at, export_name, path, &parts).await?);
    };
    let Some(consumer) = consumer else {
        return wildcard::serve(app, &target.key, resolved, parts).await;
    };
    if first.find(&request.group, &request.resource).is_none() {
        // Not an exported resource: perhaps a claimed one of the consumer's.
        let target = claimed::ClaimedTarget {
            consumer: &consumer,
            cluster_namespace: &first.cluster_namespace,
            export: export_name,
        };
        return claimed::serve(app, &target, resolved, &parts, body).await;
    }
    let body = without_consumer_annotation(&body).map_or(body, Bytes::from);
    Ok(app.proxy.serve(first, resolved, parts, body).await)
}

/// Discovery and OpenAPI: the export's resources, and on one consumer's
/// path also the claimed resources it accepted.
async fn documents(
    app: &App,
    view: &ConsumerView,
    at: &At,
    export_name: &str,
    path: &ApiPath,
    parts: &http::request::Parts,
) -> Result<Response<BoxBody>, ApiError> {
    let consumer = at.consumer();
    // The exported resources, and the kcp dialect's APIBindings.
    let specs = || {
        let mut specs = view.specs();
        specs.extend(kcp::specs_at(at));
        specs
    };
    let exported = match (
        crate::documents::document_of(specs, path, &parts.headers),
        path,
    ) {
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
    if let Some(document) = document.as_mut() {
        crate::translate::kcp::narrow_verbs(document.value_mut());
    }
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
