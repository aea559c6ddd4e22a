//! `clusters/*`: one provider list or watch across every consumer of an
//! export, each object shown in its consumer's terms and marked with its
//! consumer. The provider's resourceVersions and bookmarks pass as they are,
//! so one watch resumes like any other. Everything but list and watch needs
//! a consumer's path.

use super::respond::{Filter, filtered, upstream_get};
use crate::catalog::Catalog;
use crate::proxy::{decoded_query, watch};
use crate::route::{ResourceRequest, Verb};
use crate::router::App;
use crate::status::ApiError;
use crate::translate::BoundResource;
use crate::translate::continue_token::TokenError;
use crate::translate::request::encode;
use crate::translate::workspace::Consumers;
use crate::upstream::BoxBody;
use http::{Method, Response};
use std::sync::Arc;

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

/// Serves a list or watch of `request`'s resource across every consumer of
/// the export.
pub async fn serve(
    app: &App,
    export: &str,
    request: ResourceRequest,
    parts: http::request::Parts,
) -> Result<Response<BoxBody>, ApiError> {
    let (generation, bounds) = app
        .catalog
        .read(|c| (c.generation(), bounds_of(c, export, &request)));
    let Some(first) = bounds.first().cloned() else {
        return Err(ApiError::page_not_found());
    };
    let query = decoded_query(&parts.uri);
    let verb = Verb::of_query(&parts.method, &request, parts.uri.query());
    if !matches!(verb, Some(Verb::List | Verb::Watch)) || parts.method != Method::GET {
        return Err(ApiError::method_not_allowed(
            parts.method.as_str(),
            &first.group,
            &first.resource,
        ));
    }
    if request.namespace.is_some() {
        return Err(ApiError::bad_request(
            "a namespace belongs to one consumer: list it at clusters/<consumer>/",
        ));
    }
    let scope = format!("workspace/{export}/{}", first.qualified_resource());
    let mut provider_query = Vec::new();
    for (key, value) in &query {
        match key.as_str() {
            "labelSelector" => {}
            "fieldSelector" if value.contains("metadata.namespace") => {
                return Err(ApiError::bad_request(
                    "metadata.namespace names a namespace of one consumer: select it at clusters/<consumer>/",
                ));
            }
            "continue" => {
                let token = app.proxy.tokens.open(&scope, value).map_err(|e| match e {
                    TokenError::Forged => ApiError::bad_request(
                        "invalid continue token: continue key is not valid: it was not issued for this request",
                    ),
                    other => ApiError::bad_request(format!(
                        "invalid continue token: continue key is not valid: {other}"
                    )),
                })?;
                provider_query.push((key.clone(), token));
            }
            _ => provider_query.push((key.clone(), value.clone())),
        }
    }
    let caller_selector = query
        .iter()
        .find(|(k, _)| k == "labelSelector")
        .map(|(_, v)| v.as_str());
    provider_query.push(("labelSelector".into(), Consumers::selector(caller_selector)));
    let uri = format!(
        "/apis/{}/{}/{}?{}",
        encode(&request.group),
        encode(&request.version),
        encode(&request.resource),
        form_urlencoded::Serializer::new(String::new())
            .extend_pairs(&provider_query)
            .finish()
    );
    let is_watch = verb == Some(Verb::Watch);
    let (upstream, to_yaml) = upstream_get(&uri, &parts.headers, is_watch)?;
    let response = app
        .proxy
        .upstream
        .send(upstream)
        .await
        .map_err(|e| ApiError::unavailable(format!("the provider cannot be reached: {e}")))?;
    let consumers = Arc::new(Consumers::new(bounds));
    // A watch outlives catalog changes (a consumer binds, a namespace is
    // recorded): it sees each event with the consumers as they are then.
    let watch = is_watch.then(|| {
        let (catalog, key, request) = (app.catalog.clone(), export.to_string(), request.clone());
        let mut current = (generation, consumers.clone());
        watch::json_lines(move |event: &mut serde_json::Value| {
            let now = catalog.read(Catalog::generation);
            if now != current.0 {
                let bounds = catalog.read(|c| bounds_of(c, &key, &request));
                current = (now, Arc::new(Consumers::new(bounds)));
            }
            current.1.event_up(event)
        })
    });
    let rewrite = |value: &mut serde_json::Value| {
        consumers.list_up(value);
        if let Some(serde_json::Value::String(token)) = value.pointer_mut("/metadata/continue")
            && !token.is_empty()
        {
            *token = app.proxy.tokens.seal(&scope, token);
        }
        Ok(())
    };
    let filter = Filter {
        watch,
        rewrite,
        to_yaml,
        upstream: "the provider",
    };
    filtered(response, filter, app.proxy.shutdown.clone()).await
}
