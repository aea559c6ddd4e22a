//! `clusters/*`: one provider list or watch across every consumer of an
//! export, through the forwarding pipeline (`crate::forward`) with every
//! consumer of the export as the view: each object shown in its consumer's
//! terms and marked with its consumer. The provider's resourceVersions and
//! bookmarks pass as they are, so one watch resumes like any other. When a
//! consumer leaves the export while a watch runs, its objects leave the
//! watch as DELETED events (as kcp's virtual workspace shows the objects
//! its APIBinding deletion removes), and a consumer that joins brings its
//! objects as ADDED ones. Everything but list and watch needs a consumer's
//! path.

use crate::app::App;
use crate::catalog::Catalog;
use crate::catalog::watch::SharedCatalog;
use crate::forward::answer::{Shape, View, Visibility};
use crate::forward::encode::{self, Failure};
use crate::forward::request::{ApiRequest, Incoming};
use crate::forward::store::{self, Named, Store};
use crate::forward::watch;
use crate::proxy::provider::{self, PROVIDER};
use crate::resolved::Resolved;
use crate::route::{ResourceRequest, Verb};
use crate::status::ApiError;
use crate::translate::BoundResource;
use crate::translate::continue_token::{ContinueTokens, TokenError};
use crate::translate::identity::EXPORT_LABEL;
use crate::translate::request::{ProviderRequest, include_object, upstream_accept};
use crate::translate::workspace::Consumers;
use crate::upstream::{BoxBody, Upstream};
use crate::wire::accept::{Output, Target};
use crate::wire::query::{ListOptions, Pairs};
use bytes::{Bytes, BytesMut};
use http::header::USER_AGENT;
use http::{Method, Response};
use http_body_util::BodyExt;
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use tokio::sync::watch as signal;

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

/// The consumers a wildcard request shows, by their objects' export label.
/// A list's are the catalog's when it was asked for; a watch's change only
/// where the watch says so (a [`Cut`]).
struct Everyone {
    shown: Mutex<Arc<Consumers>>,
    tokens: Arc<ContinueTokens>,
    scope: String,
}

impl Everyone {
    fn consumers(&self) -> Arc<Consumers> {
        self.shown.lock().expect("not poisoned").clone()
    }

    fn show(&self, bounds: &Shown) {
        *self.shown.lock().expect("not poisoned") =
            Arc::new(Consumers::new(bounds.values().cloned()));
    }
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

/// The bound resources a watch shows, by their export label (one consumer
/// each).
type Shown = BTreeMap<String, BoundResource>;

fn by_label(bounds: Vec<BoundResource>) -> Shown {
    bounds
        .into_iter()
        .map(|b| (b.identity.label_value().to_string(), b))
        .collect()
}

/// What changed between the consumers a watch shows and the catalog's: the
/// export labels of those that left, and of those that joined. A consumer
/// whose bound resource changed otherwise (a namespace more) is neither.
fn changes<T>(
    shown: &BTreeMap<String, T>,
    now: &BTreeMap<String, T>,
) -> (Vec<String>, Vec<String>) {
    let left = shown.keys().filter(|l| !now.contains_key(*l)).cloned();
    let joined = now.keys().filter(|l| !shown.contains_key(*l)).cloned();
    (left.collect(), joined.collect())
}

/// Where a watcher's state stands in the provider's history: the version of
/// the last event it was given, once that version tells its whole state.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Standing {
    /// A watch from now (`resourceVersion` "" or "0"): its first events
    /// carry their objects' own versions, and nothing marks their end.
    Unknown,
    /// A watch with `sendInitialEvents`, until the bookmark that ends them.
    Initial,
    /// Every change up to this version, and none after it.
    At(String),
}

impl Standing {
    fn of(options: &ListOptions) -> Self {
        if options.send_initial_events == Some(true) {
            return Self::Initial;
        }
        match options.resource_version.as_str() {
            "" | "0" => Self::Unknown,
            version => Self::At(version.to_string()),
        }
    }

    /// Once the watcher was given the event `mark` was read from.
    fn after(&mut self, mark: &Mark) {
        let Some(version) = &mark.version else {
            return;
        };
        match (&*self, mark.kind.as_str()) {
            (Self::At(_), "ADDED" | "MODIFIED" | "DELETED" | "BOOKMARK") => {
                *self = Self::At(version.clone())
            }
            (Self::Initial, "BOOKMARK") if mark.ends_initial => *self = Self::At(version.clone()),
            _ => {}
        }
    }
}

/// What of a provider event tells where its watcher stands.
struct Mark {
    kind: String,
    version: Option<String>,
    ends_initial: bool,
}

impl Mark {
    fn of(event: &Value) -> Self {
        let metadata = event.pointer("/object/metadata");
        Self {
            kind: event["type"].as_str().unwrap_or_default().to_string(),
            version: metadata
                .and_then(|m| m["resourceVersion"].as_str())
                .filter(|v| !v.is_empty())
                .map(str::to_string),
            ends_initial: metadata
                .and_then(|m| m.pointer("/annotations/k8s.io~1initial-events-end"))
                .and_then(Value::as_str)
                == Some("true"),
        }
    }
}

/// The label selector of the objects of the consumers with `labels`, within
/// the caller's own selector.
fn selector_of(labels: &[String], caller: &str) -> String {
    let set = format!("{EXPORT_LABEL} in ({})", labels.join(","));
    if caller.is_empty() {
        set
    } else {
        format!("{set},{caller}")
    }
}

/// A watch event bindery makes, `(type, provider object, version)`, in
/// the caller's terms (`view`, `shape`, `output`) as the provider's own
/// events are: the object's kind and apiVersion filled in where a list left
/// them out, its resourceVersion `version` if given, cut to its metadata
/// for a metadata watch. `None` when the view hides it.
fn made_event(
    view: &dyn View,
    shape: &Shape,
    output: Output,
    (kind, mut object, version): (&str, Value, Option<&str>),
) -> Option<Bytes> {
    let fields = object.as_object_mut()?;
    fields
        .entry("apiVersion")
        .or_insert_with(|| Value::String(shape.api_version.clone()));
    fields
        .entry("kind")
        .or_insert_with(|| Value::String(shape.kind.clone()));
    if let Some(version) = version
        && let Some(Value::Object(metadata)) = fields.get_mut("metadata")
    {
        metadata.insert("resourceVersion".into(), Value::String(version.into()));
    }
    let mut event = serde_json::json!({"type": kind, "object": object});
    if let Target::PartialObjectMetadata(meta) | Target::PartialObjectMetadataList(meta) =
        output.target
    {
        watch::cut_to_metadata(&mut event, meta);
    }
    store::event(view, shape, event, output.media)
}

/// How often an idle wildcard watch looks whether its consumers changed.
const CONSUMERS_CHECKED: std::time::Duration = std::time::Duration::from_secs(1);

/// A wildcard watch as it goes: the provider's events in the caller's
/// terms, and, where the export's consumers change, the events that keep
/// the watcher's cache exact.
struct Following {
    upstream: Arc<dyn Upstream>,
    catalog: SharedCatalog,
    export: String,
    request: ResourceRequest,
    /// The catalog's generation `shown` was read at.
    generation: u64,
    shown: Shown,
    view: Arc<Everyone>,
    shape: Shape,
    output: Output,
    /// The caller's selectors, in provider terms (the export label apart).
    label_selector: String,
    field_selector: String,
    standing: Standing,
}

/// What comes of the export's consumers changing.
enum Cut {
    /// The watcher was told (or there was nothing to tell).
    Told(Vec<Bytes>),
    /// A consumer left and what the watcher holds of it cannot be told:
    /// the watch ends with 410 `Expired`, to be listed again.
    Expired(Bytes),
}

impl Following {
    /// A watch of `request` across the export's consumers, `shown` as the
    /// catalog's generation they were read at, asked as `api`.
    fn of(
        app: &App,
        export: &str,
        request: ResourceRequest,
        (generation, shown): (u64, Shown),
        view: Arc<Everyone>,
        shape: Shape,
        api: &ApiRequest,
    ) -> Result<Self, ApiError> {
        let options = api
            .list_options()
            .ok_or_else(|| ApiError::internal("a watch without list options"))?;
        Ok(Following {
            upstream: app.proxy.upstream.clone(),
            catalog: app.catalog.clone(),
            export: export.to_string(),
            request,
            generation,
            shown,
            view,
            shape,
            output: api.output,
            label_selector: options.label_selector.clone(),
            field_selector: options.field_selector.clone(),
            standing: Standing::of(options),
        })
    }

    /// Follows the catalog: when the export's consumers changed since the
    /// last look, the events that make the watcher's cache what a list at
    /// its version would now show. Each consumer that left takes its
    /// objects away (DELETED, as they were at that version, at that
    /// version), each that joined brings its objects (ADDED, as they are at
    /// that version), as one exact list of the provider at that version
    /// tells them. Nothing passes between that version and the events, as
    /// this is done before the stream goes on.
    async fn follow_catalog(&mut self) -> Cut {
        let generation = self.catalog.read(Catalog::generation);
        if generation == self.generation {
            return Cut::Told(Vec::new());
        }
        self.generation = generation;
        let now = by_label(
            self.catalog
                .read(|c| bounds_of(c, &self.export, &self.request)),
        );
        let (left, joined) = changes(&self.shown, &now);
        if left.is_empty() && joined.is_empty() {
            self.shown = now;
            self.view.show(&self.shown);
            return Cut::Told(Vec::new());
        }
        let changed: Vec<String> = left.iter().chain(&joined).cloned().collect();
        let listed = match (&self.standing, self.output.target) {
            (_, Target::Table(_)) => None,
            (Standing::At(version), _) => {
                let version = version.clone();
                self.listed_at(&version, &changed)
                    .await
                    .map(|items| (version, items))
            }
            _ => None,
        };
        let Some((version, items)) = listed else {
            if !left.is_empty() {
                tracing::info!(export = %self.export, standing = ?self.standing,
                    "a consumer left, and what the watcher holds of it cannot be told: the wildcard watch ends with 410");
                return Cut::Expired(self.expired());
            }
            self.shown = now;
            self.view.show(&self.shown);
            return Cut::Told(Vec::new());
        };
        // The leavers' objects through the view that still shows them, the
        // newcomers' through the one that shows them.
        let mut events: Vec<Bytes> = items
            .iter()
            .filter_map(|item| self.event("DELETED", item.clone(), Some(&version)))
            .collect();
        let deleted = events.len();
        self.shown = now;
        self.view.show(&self.shown);
        events.extend(
            items
                .into_iter()
                .filter_map(|item| self.event("ADDED", item, None)),
        );
        tracing::info!(export = %self.export, left = left.len(), joined = joined.len(),
            deleted, added = events.len() - deleted, %version,
            "the export's consumers changed: the wildcard watch tells their objects");
        Cut::Told(events)
    }

    /// The provider's objects of the consumers with export labels `labels`,
    /// exactly as they were at `version`, within the caller's selectors;
    /// `None` when the provider (or the cache) cannot tell.
    async fn listed_at(&self, version: &str, labels: &[String]) -> Option<Vec<Value>> {
        let options = ListOptions {
            label_selector: selector_of(labels, &self.label_selector),
            field_selector: self.field_selector.clone(),
            resource_version: version.to_string(),
            resource_version_match: "Exact".to_string(),
            ..ListOptions::default()
        };
        let mut query = Pairs::new();
        options.encode(&mut query);
        let list = ProviderRequest {
            method: Method::GET,
            target: self.request.across_namespaces(),
            query,
            accept: "application/json".into(),
            body: None,
        };
        let sent = provider::http_request(&list, None, []).ok()?;
        let response = match provider::read_through(self.upstream.as_ref(), &list, sent).await {
            Ok(response) if response.status().is_success() => response,
            Ok(response) => {
                tracing::debug!(status = %response.status(), %version, "the exact list was refused");
                return None;
            }
            Err(error) => {
                tracing::debug!(%error, %version, "the exact list failed");
                return None;
            }
        };
        let body = response.into_body().collect().await.ok()?.to_bytes();
        let mut list: Value = crate::deep::from_slice(&body).ok()?;
        match list.get_mut("items")? {
            Value::Array(items) => Some(std::mem::take(items)),
            Value::Null => Some(Vec::new()),
            _ => None,
        }
    }

    /// One made event of a provider `object` in the caller's terms, at
    /// `version` if given; `None` when the view hides it.
    fn event(&self, kind: &str, object: Value, version: Option<&str>) -> Option<Bytes> {
        made_event(
            self.view.as_ref(),
            &self.shape,
            self.output,
            (kind, object, version),
        )
    }

    /// One provider event in the caller's terms, or nothing.
    fn translated(&mut self, event: Value) -> Option<Bytes> {
        let mark = Mark::of(&event);
        let out = store::event(self.view.as_ref(), &self.shape, event, self.output.media)?;
        self.standing.after(&mark);
        Some(out)
    }

    /// kube-apiserver's 410 `Expired` event.
    fn expired(&self) -> Bytes {
        let gone = serde_json::json!({"type": "ERROR", "object": {
            "kind": "Status", "apiVersion": "v1", "metadata": {},
            "status": "Failure", "reason": "Expired", "code": 410,
            "message": "the consumers of this export changed: list again",
        }});
        encode::event(&gone, self.output.media).unwrap_or_default()
    }

    /// The watch: the provider's stream `upstream`, each event after a look
    /// at the catalog, and a look every [`CONSUMERS_CHECKED`] while idle.
    fn run(mut self, mut upstream: BoxBody, mut shutdown: signal::Receiver<bool>) -> BoxBody {
        let (tx, rx) = tokio::sync::mpsc::channel::<Bytes>(64);
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(CONSUMERS_CHECKED);
            let mut pending = BytesMut::new();
            loop {
                let frame = tokio::select! {
                    frame = upstream.frame() => Some(frame),
                    _ = tick.tick() => None,
                    _ = shutdown.wait_for(|stop| *stop) => return,
                    _ = tx.closed() => return,
                };
                let Some(frame) = frame else {
                    if !self.tell(&tx).await {
                        return;
                    }
                    continue;
                };
                let Some(Ok(frame)) = frame else { break };
                let Ok(data) = frame.into_data() else {
                    continue;
                };
                for line in watch::complete_lines(&mut pending, &data) {
                    if !self.line(&line, &tx).await {
                        return;
                    }
                }
            }
            self.line(&pending, &tx).await;
        });
        watch::channel_body(rx)
    }

    /// Tells the watcher what a change of consumers means for it; `false`
    /// once the watch is over.
    async fn tell(&mut self, tx: &tokio::sync::mpsc::Sender<Bytes>) -> bool {
        match self.follow_catalog().await {
            Cut::Told(events) => {
                for event in events {
                    if tx.send(event).await.is_err() {
                        return false;
                    }
                }
                true
            }
            Cut::Expired(gone) => {
                let _ = tx.send(gone).await;
                false
            }
        }
    }

    /// One line of the provider's stream; `false` once the watch is over.
    async fn line(&mut self, line: &[u8], tx: &tokio::sync::mpsc::Sender<Bytes>) -> bool {
        let Some(event) = watch::event_of(line) else {
            return true;
        };
        if !self.tell(tx).await {
            return false;
        }
        match self.translated(event) {
            Some(out) => tx.send(out).await.is_ok(),
            None => true,
        }
    }
}

/// Serves a list or watch of `request`'s resource across every consumer of
/// the export.
pub async fn serve(
    app: &App,
    export: &str,
    resolved: &Resolved,
    parts: http::request::Parts,
) -> Result<Response<BoxBody>, Failure> {
    let request = resolved.resource().ok_or_else(ApiError::page_not_found)?;
    let (generation, bounds) = app
        .catalog
        .read(|c| (c.generation(), bounds_of(c, export, request)));
    let Some(first) = bounds.first().cloned() else {
        return Err(ApiError::page_not_found().into());
    };
    let api = read(resolved, request, &parts, &first)?;
    let scope = format!("workspace/{export}/{}", first.qualified_resource());
    let shown = by_label(bounds);
    let view = Arc::new(Everyone {
        shown: Mutex::new(Arc::new(Consumers::new(shown.values().cloned()))),
        tokens: app.proxy.tokens.clone(),
        scope: scope.clone(),
    });
    let provider = provider_list(app, request, &api, &scope)?;
    let sent = provider::http_request(&provider, parts.headers.get(USER_AGENT), [])?;
    let response = provider::read_through(app.proxy.upstream.as_ref(), &provider, sent).await?;
    let api_version = format!("{}/{}", request.group, request.version);
    let shape = Shape::of(&api, None, &first.kind, &api_version);
    // The one store, with every consumer of the export as its scope.
    let store = Store {
        upstream: app.proxy.upstream.as_ref(),
        name: PROVIDER,
        view: view.as_ref(),
        shape: &shape,
        request: &api,
        named: Named {
            group: &first.group,
            resource: &first.resource,
            name: "",
        },
    };
    let status = response.status();
    if api.verb != Verb::Watch || !status.is_success() {
        return store.answered(response).await;
    }
    if !store::is_json(response.headers()) {
        return Err(store.unreadable());
    }
    // Consumers leave and join while it runs: the stream follows them.
    let shown = (generation, shown);
    let following = Following::of(
        app,
        export,
        request.clone(),
        shown,
        view.clone(),
        shape.clone(),
        &api,
    )?;
    let body = following.run(response.into_body(), app.proxy.shutdown.clone());
    Ok(encode::watch_response(status, body, api.output.media))
}

/// The request read: a list or a watch (anything else needs a consumer's
/// path), across namespaces (a namespace is one consumer's).
fn read(
    resolved: &Resolved,
    request: &ResourceRequest,
    parts: &http::request::Parts,
    first: &BoundResource,
) -> Result<ApiRequest, ApiError> {
    let verb = resolved.verb;
    if !matches!(verb, Some(Verb::List | Verb::Watch)) || parts.method != Method::GET {
        return Err(ApiError::method_not_allowed(
            parts.method.as_str(),
            &first.group,
            &first.resource,
        ));
    }
    let incoming = Incoming {
        method: &parts.method,
        resource: request,
        query: &resolved.query,
        verb,
        headers: &parts.headers,
        body: &[],
        kind: &first.kind,
        body_too_large: parts
            .extensions
            .get::<crate::request_body::TooLarge>()
            .is_some(),
        field_labels: None,
    };
    let api =
        ApiRequest::parse(&incoming)?.ok_or_else(|| ApiError::internal("a list without a verb"))?;
    if request.namespace.is_some() {
        return Err(ApiError::bad_request(
            "a namespace belongs to one consumer: list it at clusters/<consumer>/",
        ));
    }
    Ok(api)
}

/// The provider's collection across namespaces, with the caller's options:
/// its label selector narrowed to objects of any export (others are
/// dropped on the way back), a namespace selector refused (a namespace is
/// one consumer's), its continue token opened.
fn provider_list(
    app: &App,
    request: &ResourceRequest,
    api: &ApiRequest,
    scope: &str,
) -> Result<ProviderRequest, ApiError> {
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
    Ok(ProviderRequest {
        method: Method::GET,
        target: request.across_namespaces(),
        query,
        accept: upstream_accept(api.output.target),
        body: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::forward::answer::Expected;
    use crate::translate::workspace::tests::{bound, provider_object};
    use crate::wire::accept::{Media, MetaVersion};
    use serde_json::json;

    fn options(version: &str, initial: Option<bool>) -> ListOptions {
        ListOptions {
            resource_version: version.into(),
            send_initial_events: initial,
            ..ListOptions::default()
        }
    }

    fn event(kind: &str, version: &str, end: bool) -> Value {
        let mut event = json!({"type": kind, "object": {"metadata": {"resourceVersion": version}}});
        if end {
            event["object"]["metadata"]["annotations"] =
                json!({"k8s.io/initial-events-end": "true"});
        }
        event
    }

    #[test]
    fn a_watcher_stands_at_the_last_version_it_was_given_once_that_tells_its_state() {
        assert_eq!(Standing::of(&options("", None)), Standing::Unknown);
        assert_eq!(Standing::of(&options("0", None)), Standing::Unknown);
        assert_eq!(Standing::of(&options("7", Some(true))), Standing::Initial);
        let mut from_a_list = Standing::of(&options("7", None));
        assert_eq!(from_a_list, Standing::At("7".into()));
        from_a_list.after(&Mark::of(&event("MODIFIED", "9", false)));
        from_a_list.after(&Mark::of(&event("BOOKMARK", "12", false)));
        assert_eq!(from_a_list, Standing::At("12".into()));
        from_a_list.after(&Mark::of(
            &json!({"type": "ERROR", "object": {"kind": "Status", "code": 500}}),
        ));
        assert_eq!(from_a_list, Standing::At("12".into()));

        // Initial events carry their objects' own versions: only the
        // bookmark that ends them tells where the watcher stands.
        let mut streamed = Standing::Initial;
        streamed.after(&Mark::of(&event("ADDED", "3", false)));
        streamed.after(&Mark::of(&event("BOOKMARK", "20", false)));
        assert_eq!(streamed, Standing::Initial);
        streamed.after(&Mark::of(&event("BOOKMARK", "21", true)));
        streamed.after(&Mark::of(&event("ADDED", "22", false)));
        assert_eq!(streamed, Standing::At("22".into()));
        let mut from_now = Standing::Unknown;
        from_now.after(&Mark::of(&event("BOOKMARK", "30", true)));
        from_now.after(&Mark::of(&event("ADDED", "31", false)));
        assert_eq!(from_now, Standing::Unknown);
    }

    #[test]
    fn leavers_and_joiners_are_told_apart_and_listed_by_their_export_labels() {
        let shown: BTreeMap<String, u8> = [("a".into(), 1), ("b".into(), 1)].into();
        let now: BTreeMap<String, u8> = [("b".into(), 2), ("c".into(), 1)].into();
        assert_eq!(
            changes(&shown, &now),
            (vec!["a".to_string()], vec!["c".to_string()])
        );
        assert_eq!(changes(&now, &now), (vec![], vec![]));
        let labels = ["a".to_string(), "c".to_string()];
        assert_eq!(selector_of(&labels, ""), format!("{EXPORT_LABEL} in (a,c)"));
        assert_eq!(
            selector_of(&labels, "app=x"),
            format!("{EXPORT_LABEL} in (a,c),app=x")
        );
    }

    fn made(view: &Everyone, target: Target, kind: &str, object: Value) -> Option<Value> {
        let shape = Shape {
            expected: match target {
                Target::Resource => Expected::List,
                _ => Expected::PartialList,
            },
            kind: "Thing".into(),
            api_version: "db.example.com/v1".into(),
            include: Default::default(),
        };
        let output = Output {
            media: Media::Json,
            target,
            pretty: false,
        };
        let bytes = made_event(view, &shape, output, (kind, object, Some("42")))?;
        Some(serde_json::from_slice(&bytes).unwrap())
    }

    #[test]
    fn a_leavers_object_leaves_the_watch_in_the_consumers_terms_at_the_watchers_version() {
        let (one, two) = (bound("one", "s1"), bound("two", "s2"));
        let stranger = bound("three", "s3");
        let view = Everyone {
            shown: Mutex::new(Arc::new(Consumers::new([one.clone(), two.clone()]))),
            tokens: Arc::new(ContinueTokens::random()),
            scope: "workspace/things/things.db.example.com".into(),
        };
        // As a list's item: no kind, no apiVersion, its own version.
        let mut item = provider_object(&two, "a");
        item.as_object_mut().unwrap().retain(|k, _| k == "metadata");
        item["metadata"]["resourceVersion"] = json!("17");
        let deleted = made(&view, Target::Resource, "DELETED", item.clone()).unwrap();
        assert_eq!(deleted["type"], "DELETED");
        let object = &deleted["object"];
        assert_eq!(object["kind"], "Thing");
        assert_eq!(object["apiVersion"], "db.example.com/v1");
        assert_eq!(object["metadata"]["namespace"], "default");
        assert_eq!(object["metadata"]["resourceVersion"], "42");
        assert_eq!(object["metadata"]["annotations"]["kcp.io/cluster"], "two");
        assert_eq!(
            object["metadata"]["annotations"]["bindery.dev/consumer"],
            "two"
        );
        assert_eq!(object["metadata"]["labels"], json!({"app": "x"}));

        let partial = made(
            &view,
            Target::PartialObjectMetadata(MetaVersion::V1),
            "DELETED",
            item,
        )
        .unwrap();
        assert_eq!(partial["object"]["kind"], "PartialObjectMetadata");
        assert_eq!(
            partial["object"]["metadata"]["annotations"]["kcp.io/cluster"],
            "two"
        );
        assert!(partial["object"].get("spec").is_none());

        // Another export's object is never shown, made or not.
        let other = provider_object(&stranger, "b");
        assert_eq!(made(&view, Target::Resource, "DELETED", other), None);
    }
}
