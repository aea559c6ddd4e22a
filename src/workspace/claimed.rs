//! Consumer-owned claimed objects on one consumer's workspace path. They are
//! read from that consumer's app cluster, as bindery's account there (which
//! bind allowed to read exactly the claimed resources). Only the claims that
//! the export makes on objects the consumer owns count, and only those the
//! consumer accepted in its APIServiceBinding. Each get, list and watch is
//! filtered by them ([`crate::translate::claimed`]); writes are checked
//! against them before and after ([`super::claimed_writes`]).

use super::respond::{Filter, filtered, upstream_get};
use crate::api::{APIServiceBinding, APIServiceExport, ClaimOwner, PermissionClaim};
use crate::proxy::{decoded_query, watch};
use crate::route::{ConsumerId, ResourceRequest, Verb};
use crate::router::App;
use crate::status::ApiError;
use crate::translate::claimed::{ClaimedView, ClaimedWatch};
use crate::translate::request::encode;
use crate::upstream::{BoxBody, KubeUpstream, Upstream};
use bytes::Bytes;
use http::Response;
use http::header::ACCEPT;
use kube::api::Api;

/// Where the consumer's claimed objects are.
pub struct ClaimedTarget<'a> {
    pub consumer: &'a ConsumerId,
    pub cluster_namespace: &'a str,
    pub export: &'a str,
}

/// Serves a request on a claimed resource; a resource no accepted claim
/// names is not found, as it would be if it did not exist.
pub async fn serve(
    app: &App,
    target: &ClaimedTarget<'_>,
    request: ResourceRequest,
    parts: &http::request::Parts,
    body: Bytes,
) -> Result<Response<BoxBody>, ApiError> {
    let verb = Verb::of_query(&parts.method, &request, parts.uri.query());
    let only = (request.group.as_str(), request.resource.as_str());
    let claims = accepted_claims(app, target, Some(only)).await?;
    if claims.is_empty() || request.subresource.is_some() {
        return Err(ApiError::page_not_found());
    }
    let Some(verb) = verb.filter(|v| *v != Verb::DeleteCollection) else {
        return Err(ApiError::method_not_allowed(
            parts.method.as_str(),
            &request.group,
            &request.resource,
        ));
    };
    let client = app
        .registrations
        .get(target.consumer.as_str())
        .map(|registration| registration.app.clone())
        .ok_or_else(|| ApiError::unavailable("the consumer's app cluster is not registered"))?;
    let view = ClaimedView::new(claims);
    let paths = UpstreamPaths::of(&request, &parts.uri);
    let shutdown = app.proxy.shutdown.clone();
    match verb {
        Verb::Get | Verb::List | Verb::Watch => {
            read(&client, view, &request, verb, &paths, parts, shutdown).await
        }
        _ => {
            let write = super::claimed_writes::Write {
                client: &client,
                view: &view,
                request: &request,
                verb,
                paths: &paths,
            };
            write.send(parts, body, shutdown).await
        }
    }
}

/// Where a claimed request goes in the app cluster.
pub struct UpstreamPaths {
    /// The collection: `/api/v1/namespaces/<ns>/configmaps`.
    pub collection: String,
    /// The object when the request names one, else the collection.
    pub target: String,
    /// The caller's query, decoded.
    pub query: Vec<(String, String)>,
}

impl UpstreamPaths {
    fn of(request: &ResourceRequest, uri: &http::Uri) -> Self {
        let mut collection = if request.group.is_empty() {
            format!("/api/{}", encode(&request.version))
        } else {
            format!(
                "/apis/{}/{}",
                encode(&request.group),
                encode(&request.version)
            )
        };
        if let Some(namespace) = &request.namespace {
            collection.push_str(&format!("/namespaces/{}", encode(namespace)));
        }
        collection.push_str(&format!("/{}", encode(&request.resource)));
        let target = match &request.name {
            Some(name) => format!("{collection}/{}", encode(name)),
            None => collection.clone(),
        };
        Self {
            collection,
            target,
            query: decoded_query(uri),
        }
    }

    /// The object (or collection) with the caller's query, plus `extra`.
    pub fn target_with_query(&self, extra: &[(&str, &str)]) -> String {
        let mut pairs: Vec<(&str, &str)> = self
            .query
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        pairs.extend_from_slice(extra);
        if pairs.is_empty() {
            return self.target.clone();
        }
        let query = form_urlencoded::Serializer::new(String::new())
            .extend_pairs(&pairs)
            .finish();
        format!("{}?{query}", self.target)
    }
}

/// A get, list or watch, filtered by the claims.
async fn read(
    client: &kube::Client,
    view: ClaimedView,
    request: &ResourceRequest,
    verb: Verb,
    paths: &UpstreamPaths,
    parts: &http::request::Parts,
    shutdown: tokio::sync::watch::Receiver<bool>,
) -> Result<Response<BoxBody>, ApiError> {
    let (upstream, to_yaml) = upstream_get(
        &paths.target_with_query(&[]),
        &parts.headers,
        verb == Verb::Watch,
    )?;
    let response = KubeUpstream::new(client.clone())
        .send(upstream)
        .await
        .map_err(|e| ApiError::unavailable(format!("the app cluster cannot be reached: {e}")))?;
    let watch = if verb == Verb::Watch {
        let mut filter = ClaimedWatch::new(view.clone());
        if let Some(list) = resumed_state(client, &paths.collection, &paths.query).await {
            filter.seen_in(&list);
        }
        Some(watch::json_lines(move |event: &mut serde_json::Value| {
            filter.event(event)
        }))
    } else {
        None
    };
    let rewrite = |value: &mut serde_json::Value| {
        if verb != Verb::Get {
            view.list_up(value);
            Ok(())
        } else if view.covers(value) {
            Ok(())
        } else {
            Err(ApiError::object_not_found(
                &request.group,
                &request.resource,
                request.name.as_deref().unwrap_or_default(),
            ))
        }
    };
    let filter = Filter {
        watch,
        rewrite,
        to_yaml,
        upstream: "the app cluster",
    };
    filtered(response, filter, shutdown).await
}

/// What a watcher resuming from a resourceVersion has already been shown:
/// the list at that version (the current one if the app cluster no longer
/// has it). `None` when the watch starts afresh, with initial events.
async fn resumed_state(
    app: &kube::Client,
    collection: &str,
    query: &[(String, String)],
) -> Option<serde_json::Value> {
    let get = |k: &str| {
        query
            .iter()
            .find(|(key, _)| key == k)
            .map(|(_, v)| v.as_str())
    };
    let version = get("resourceVersion").filter(|v| !v.is_empty() && *v != "0")?;
    if get("sendInitialEvents") == Some("true") {
        return None;
    }
    let selectors: Vec<(&str, &str)> = ["labelSelector", "fieldSelector"]
        .into_iter()
        .filter_map(|k| get(k).map(|v| (k, v)))
        .collect();
    for exact in [true, false] {
        let mut pairs = selectors.clone();
        if exact {
            pairs.extend([
                ("resourceVersion", version),
                ("resourceVersionMatch", "Exact"),
            ]);
        }
        let uri = format!(
            "{collection}?{}",
            form_urlencoded::Serializer::new(String::new())
                .extend_pairs(&pairs)
                .finish()
        );
        let request = http::Request::builder()
            .uri(uri)
            .header(ACCEPT, "application/json")
            .body(Vec::new())
            .ok()?;
        if let Ok(list) = app.request::<serde_json::Value>(request).await {
            return Some(list);
        }
    }
    None
}

/// The export's claims (on one group/resource, or all) of objects the
/// consumer owns (or any side), that the consumer accepted as offered.
pub async fn accepted_claims(
    app: &App,
    target: &ClaimedTarget<'_>,
    only: Option<(&str, &str)>,
) -> Result<Vec<PermissionClaim>, ApiError> {
    let unavailable = |e: kube::Error| ApiError::unavailable(e.to_string());
    let export =
        Api::<APIServiceExport>::namespaced(app.bind.provider.clone(), target.cluster_namespace)
            .get_opt(target.export)
            .await
            .map_err(unavailable)?;
    let offered: Vec<PermissionClaim> = export
        .map(|e| e.spec.permission_claims)
        .unwrap_or_default()
        .into_iter()
        .filter(|c| only.is_none_or(|(g, r)| c.group == g && c.resource == r))
        .filter(|c| c.selector.owner != Some(ClaimOwner::Provider))
        .collect();
    if offered.is_empty() {
        return Ok(offered);
    }
    let Some(registration) = app.registrations.get(target.consumer.as_str()) else {
        return Ok(Vec::new());
    };
    let binding = Api::<APIServiceBinding>::all(registration.app.clone())
        .get_opt(target.export)
        .await
        .map_err(unavailable)?;
    let accepted: Vec<PermissionClaim> = binding
        .map(|b| b.spec.permission_claims)
        .unwrap_or_default()
        .into_iter()
        .filter(|a| a.is_accepted())
        .map(|a| a.claim())
        .collect();
    Ok(offered
        .into_iter()
        .filter(|c| accepted.contains(c))
        .collect())
}
