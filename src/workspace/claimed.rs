//! Consumer-owned claimed objects on one consumer's workspace path. They are
//! read from that consumer's app cluster, as bindery's account there (which
//! bind allowed to read exactly the claimed resources). Only the claims that
//! the export makes on objects the consumer owns count, and only those the
//! consumer accepted in its APIServiceBinding. Each get, list and watch is
//! filtered by them ([`crate::translate::claimed`]); writes are checked
//! against them before and after ([`super::claimed_writes`]).

use super::claimed_writes::APP_CLUSTER;
use crate::api::{APIServiceExport, APIServiceNamespace, ClaimOwner, PermissionClaim};
use crate::app::App;
use crate::claim_referrers::{Referrers, namespace_map};
use crate::forward::answer::Shape;
use crate::forward::encode::Failure;
use crate::forward::request::{ApiRequest, Incoming, Options};
use crate::forward::store::{self, Named, Store};
use crate::resolved::Resolved;
use crate::route::{ConsumerId, ResourceRequest, Verb};
use crate::status::ApiError;
use crate::translate::claim_references::Pick;
use crate::translate::claimed::{CheckedApart, ClaimedView, ClaimedWatch};
use crate::translate::request::{include_object, upstream_accept};
use crate::upstream::{BoxBody, KubeUpstream};
use crate::wire::query::{Pairs, Query};
use crate::wire::restful;
use bytes::Bytes;
use http::Response;
use http::header::{ACCEPT, USER_AGENT};
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
    resolved: &Resolved,
    parts: &http::request::Parts,
    body: Bytes,
) -> Result<Response<BoxBody>, Failure> {
    let request = resolved.resource().ok_or_else(ApiError::page_not_found)?;
    let verb = resolved.verb;
    let only = (request.group.as_str(), request.resource.as_str());
    let claims = accepted_claims(app, target, Some(only)).await?;
    if claims.is_empty() || request.subresource.is_some() {
        return Err(ApiError::page_not_found().into());
    }
    let not_allowed =
        || ApiError::method_not_allowed(parts.method.as_str(), &request.group, &request.resource);
    if verb.is_none_or(|v| v == Verb::DeleteCollection) {
        return Err(not_allowed().into());
    }
    let client = app
        .registrations
        .get(target.consumer.as_str())
        .map(|registration| registration.app.clone())
        .ok_or_else(|| ApiError::unavailable("the consumer's app cluster is not registered"))?;
    let kind = claimed_kind(&client, request).await?;
    let incoming = Incoming {
        method: &parts.method,
        resource: request,
        query: &resolved.query,
        verb,
        headers: &parts.headers,
        body: &body,
        kind: &kind,
        body_too_large: parts
            .extensions
            .get::<crate::request_body::TooLarge>()
            .is_some(),
        field_labels: None,
    };
    // Read as the app cluster reads it: a built-in kind's request as
    // kube-apiserver reads built-in kinds.
    let api = ApiRequest::parse_with(&incoming, restful::rules(&request.group))?
        .ok_or_else(not_allowed)?;
    let view = ClaimedView::new(with_picks(app, target, claims).await?);
    let paths = UpstreamPaths::of(request, &resolved.query);
    let app_cluster = KubeUpstream::new(client.clone());
    match api.verb {
        Verb::Get | Verb::List | Verb::Watch => {
            let read = Read {
                client: &client,
                app_cluster: &app_cluster,
                view,
                request,
                kind: &kind,
                paths: &paths,
            };
            read.send(&api, app.proxy.shutdown.clone()).await
        }
        _ => {
            let path = match api.verb {
                Verb::Create => &paths.collection,
                _ => &paths.target,
            };
            let write = super::claimed_writes::Write {
                app_cluster: &app_cluster,
                view: &view,
                request,
                api: &api,
                kind: &kind,
                path,
                user_agent: parts.headers.get(USER_AGENT),
            };
            write.send().await
        }
    }
}

/// Where a claimed request goes in the app cluster.
pub struct UpstreamPaths {
    /// The collection: `/api/v1/namespaces/<ns>/configmaps`.
    pub collection: String,
    /// The object when the request names one, else the collection.
    pub target: String,
    /// The caller's query, as resolved.
    pub query: Query,
}

impl UpstreamPaths {
    fn of(request: &ResourceRequest, query: &Query) -> Self {
        let object = ResourceRequest {
            subresource: None,
            watch_prefix: false,
            ..request.clone()
        };
        let collection = ResourceRequest {
            name: None,
            ..object.clone()
        };
        Self {
            collection: collection.path(),
            target: object.path(),
            query: query.clone(),
        }
    }
}

/// A get, list or watch through the forwarding pipeline, with the claims
/// as the view: only what an accepted claim covers, in any representation
/// (a Table row is checked by its object, which is always asked for).
struct Read<'a> {
    client: &'a kube::Client,
    app_cluster: &'a KubeUpstream,
    view: ClaimedView,
    request: &'a ResourceRequest,
    kind: &'a str,
    paths: &'a UpstreamPaths,
}

impl Read<'_> {
    async fn send(
        self,
        api: &ApiRequest,
        shutdown: tokio::sync::watch::Receiver<bool>,
    ) -> Result<Response<BoxBody>, Failure> {
        let Read {
            client,
            app_cluster,
            view,
            request,
            kind,
            paths,
        } = self;
        let mut query = Pairs::new();
        match &api.options {
            Options::Get(options) => options.encode(&mut query),
            Options::List(options) => options.encode(&mut query),
            _ => return Err(ApiError::internal("a read without read options").into()),
        }
        query.extend(include_object(api));
        let uri = with_query(&paths.target, &query);
        let upstream = http::Request::builder()
            .uri(uri)
            .header(ACCEPT, upstream_accept(api.output.target))
            .body(Bytes::new())
            .map_err(|e| ApiError::internal(e.to_string()))?;
        let api_version = if request.group.is_empty() {
            request.version.clone()
        } else {
            format!("{}/{}", request.group, request.version)
        };
        let shape = Shape::of(api, None, kind, &api_version);
        // The one store, with the consumer's accepted claims as its scope.
        let store = Store {
            upstream: app_cluster,
            name: APP_CLUSTER,
            view: &view,
            shape: &shape,
            request: api,
            named: Named {
                group: &request.group,
                resource: &request.resource,
                name: request.name.as_deref().unwrap_or_default(),
            },
        };
        let response = store.send(upstream).await?;
        if api.verb != Verb::Watch || !response.status().is_success() {
            return store.answered(response).await;
        }
        let mut filter = ClaimedWatch::new(view.clone());
        if let Some(list) = resumed_state(client, &paths.collection, &paths.query).await {
            filter.seen_in(&list);
        }
        let (media, events) = (api.output.media, shape.clone());
        let each = Box::new(move |mut event| {
            // The filter decides what the watcher sees (and makes a covered
            // object's leaving a DELETED); the store reads the event's shape.
            filter.event(&mut event)?;
            store::event(&CheckedApart, &events, event, media)
        });
        store.watch(response, each, shutdown).await
    }
}

/// The kind of a claimed resource, from the app cluster's discovery.
async fn claimed_kind(
    client: &kube::Client,
    request: &ResourceRequest,
) -> Result<String, ApiError> {
    let discovery = http::Request::builder()
        .uri(request.group_version_path())
        .header(ACCEPT, "application/json")
        .body(Vec::new())
        .map_err(|e| ApiError::internal(e.to_string()))?;
    let list: k8s_openapi::apimachinery::pkg::apis::meta::v1::APIResourceList = client
        .request(discovery)
        .await
        .map_err(super::claimed_writes::app_cluster_unreachable)?;
    list.resources
        .into_iter()
        .find(|r| r.name == request.resource)
        .map(|r| r.kind)
        .ok_or_else(ApiError::page_not_found)
}

fn with_query(path: &str, query: &Pairs) -> String {
    if query.is_empty() {
        return path.to_string();
    }
    let query = form_urlencoded::Serializer::new(String::new())
        .extend_pairs(query)
        .finish();
    format!("{path}?{query}")
}

/// What a watcher resuming from a resourceVersion has already been shown:
/// the list at that version (the current one if the app cluster no longer
/// has it). `None` when the watch starts afresh, with initial events.
async fn resumed_state(
    app: &kube::Client,
    collection: &str,
    query: &Query,
) -> Option<serde_json::Value> {
    let get = |k: &str| query.first(k);
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

/// `claims`, each with what its references pick among the consumer's
/// bound objects (read from the provider only when a claim has references).
async fn with_picks(
    app: &App,
    target: &ClaimedTarget<'_>,
    claims: Vec<PermissionClaim>,
) -> Result<Vec<(PermissionClaim, Vec<Pick>)>, ApiError> {
    if claims.iter().all(|c| c.selector.references.is_empty()) {
        return Ok(claims.into_iter().map(|c| (c, Vec::new())).collect());
    }
    let unavailable = |e: kube::Error| ApiError::unavailable(e.to_string());
    let provider = &app.bind.provider;
    let Some(export) =
        Api::<APIServiceExport>::namespaced(provider.clone(), target.cluster_namespace)
            .get_opt(target.export)
            .await
            .map_err(unavailable)?
    else {
        return Ok(Vec::new());
    };
    let records =
        Api::<APIServiceNamespace>::namespaced(provider.clone(), target.cluster_namespace)
            .list(&Default::default())
            .await
            .map_err(unavailable)?;
    let namespaces = namespace_map(target.cluster_namespace, &records.items);
    let referrers = Referrers {
        provider,
        export: &export,
        consumer: target.consumer.as_str(),
        namespaces: &namespaces,
    };
    let mut picked = Vec::with_capacity(claims.len());
    for claim in claims {
        let picks = referrers.picks(&claim).await.map_err(unavailable)?;
        picked.push((claim, picks));
    }
    Ok(picked)
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
    let binding = crate::app_binding::find(&registration.app, target.export)
        .await
        .map_err(unavailable)?;
    let accepted: Vec<PermissionClaim> = binding
        .map(|b| b.claim_decisions())
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
