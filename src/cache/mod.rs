//! The shared watch cache: an [`Upstream`] in front of the provider that
//! answers the LISTs and WATCHes it can answer exactly ([`query`]) from one
//! store per provider resource ([`store`]), kept by one list+watch per
//! resource ([`reflector`]) however many consumers, exports and clients read
//! it; each client watch is fed from that one stream ([`subscribers`],
//! [`watcher`]). A consistent list has the provider name its objects and
//! their versions in a metadata list ([`metadata_probe`]) and is answered
//! with the store's bodies of exactly those versions.
//! Everything else, and every list the cache is not ready for, goes to the
//! provider unchanged. Consumers are kept apart exactly as on the way to
//! the provider: the request reaching the cache is already in provider
//! terms (the consumer's provider namespace, the identity label selector),
//! and the cache evaluates it as kube-apiserver would.

pub mod changes;
pub mod got;
pub mod metadata_probe;
pub mod provider_read;
pub mod query;
pub mod reflector;
pub mod store;
pub mod subscribers;
pub mod watcher;

use crate::route::ResourceRequest;
use crate::upstream::{
    BoxBody, BoxError, CacheRead, RowMaker, Rows, Sender, Sent, Translation, Upstream,
};
use bytes::Bytes;
use changes::Window;
use dashmap::DashMap;
use http::header::{ACCEPT, CONTENT_TYPE};
use http_body_util::{BodyExt, Full};
use query::{CacheableList, CacheableWatch, ListAt, WatchStart};
use reflector::Reflected;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;
use store::{Page, Store};
use tokio::sync::watch as signal;
use watcher::{Beginning, Watcher};

/// How long a list waits for its resource's first LIST, or for the store to
/// reach a `NotOlderThan` version, before going to the provider instead.
const PATIENCE: Duration = Duration::from_secs(3);
/// How long a consistent list waits for the store to hold the object
/// versions the provider named (changes already on their way to it).
const CATCH_UP: Duration = Duration::from_secs(1);

/// The provider behind a watch cache.
pub struct CachedUpstream {
    inner: Arc<dyn Upstream>,
    client: kube::Client,
    resources: DashMap<String, Arc<Reflected>>,
    /// The newest resourceVersion a write through bindery answered with,
    /// per reflected collection: a later list waits for the store to reach
    /// it, so that whoever wrote through bindery reads their write.
    written: DashMap<String, u64>,
    /// Ends every watch the cache serves when bindery shuts down.
    shutdown: signal::Receiver<bool>,
}

impl CachedUpstream {
    pub fn new(
        inner: Arc<dyn Upstream>,
        client: kube::Client,
        shutdown: signal::Receiver<bool>,
    ) -> Self {
        Self {
            inner,
            client,
            resources: DashMap::new(),
            written: DashMap::new(),
            shutdown,
        }
    }

    /// How many provider resources the cache reflects (one upstream watch
    /// each).
    pub fn reflected_resources(&self) -> usize {
        self.resources.len()
    }

    /// Starts reflecting `collections` (`/apis/<g>/<v>/<resource>`) now,
    /// rather than at their first read: a replica warms its cache before it
    /// says it is ready.
    pub fn warm(&self, collections: impl IntoIterator<Item = String>) {
        for collection in collections {
            self.reflected(&collection);
        }
    }

    /// `Ok` once every reflected resource has listed (or its list was
    /// refused for good); else how many have not.
    pub fn settled(&self) -> Result<(), String> {
        let waiting = self
            .resources
            .iter()
            .filter(|entry| !entry.value().settled())
            .count();
        match waiting {
            0 => Ok(()),
            n => Err(format!(
                "{n} of {} resources not listed yet",
                self.resources.len()
            )),
        }
    }

    fn reflected(&self, collection: &str) -> Arc<Reflected> {
        // Read first: after its first request a resource is only looked up,
        // without a shard's write lock or a key copy on every request.
        if let Some(reflected) = self.resources.get(collection) {
            return reflected.clone();
        }
        self.resources
            .entry(collection.to_string())
            .or_insert_with(|| reflector::start(self.client.clone(), collection.to_string()))
            .clone()
    }

    /// The list body for `request` from the store, in provider terms or
    /// translated; `None` when the cache cannot answer it (yet).
    async fn list(
        &self,
        read: &CacheRead<'_>,
        translation: Option<&Translation>,
    ) -> Option<Vec<u8>> {
        let (reflected, page) = self.page(read).await?;
        reflected.read(|store, _| match &translation {
            Some(translation) => store.list_body(
                &page,
                |stored| stored.translated(translation),
                |token| translation.continue_token(token),
            ),
            None => store.list_body(&page, |stored| Some(stored.bytes.clone()), str::to_string),
        })
    }

    /// The page of the store that answers the list `read`, with its
    /// resource's reflection; `None` when the cache cannot answer it (yet).
    async fn page(&self, read: &CacheRead<'_>) -> Option<(Arc<Reflected>, Page)> {
        let (collection, namespace, list) = cacheable(read)?;
        let reflected = self.reflected(&collection);
        let page = match list.at {
            ListAt::Consistent => {
                let mut page = self.listed_page(read.sent, &reflected).await?;
                if page.remaining.is_none() && page.continue_token.is_some() {
                    // The provider does not count a list bindery narrowed
                    // to one consumer by label; kube-apiserver counts the
                    // caller's when it selected nothing, so the store does.
                    page.remaining = reflected
                        .read(|store, _| store.remaining_after(namespace.as_deref(), &list, &page))
                        .flatten();
                }
                page
            }
            ListAt::NotOlderThan(version) | ListAt::Exact(version) => {
                let wanted = match list.at {
                    ListAt::NotOlderThan(_) => version.max(self.written(&collection)),
                    _ => version,
                };
                if !reflected.reached(wanted, PATIENCE).await {
                    return None;
                }
                reflected
                    .read(|store, window| stored_page(store, window, namespace.as_deref(), &list))
                    .flatten()?
            }
        };
        Some((reflected, page))
    }

    /// The page of a consistent list: which objects at which versions, and
    /// how the list goes on, the provider tells in a metadata list; their
    /// bodies are the store's (waiting briefly for changes it has not seen
    /// yet). `None` when the provider says anything else, or the store does
    /// not come to hold every object it names.
    async fn listed_page(
        &self,
        request: &http::Request<Bytes>,
        reflected: &Reflected,
    ) -> Option<Page> {
        if !reflected.reached(0, PATIENCE).await {
            return None;
        }
        let listed = self.probe(request.uri().clone(), request.headers()).await?;
        let items = reflected.resolve(&listed.items, CATCH_UP).await?;
        Some(Page {
            items,
            version: listed.resource_version,
            continue_token: listed.continue_token,
            remaining: listed.remaining,
        })
    }

    /// The newest version a write through bindery answered with.
    fn written(&self, collection: &str) -> u64 {
        self.written.get(collection).map_or(0, |v| *v)
    }

    /// The watch stream for `request` from the shared stream, in provider
    /// terms or translated; `None` when the cache cannot serve it exactly
    /// (yet): a consistent watch, or one from a version it no longer holds
    /// every change after (the provider then answers, 410 included).
    async fn watch(
        &self,
        read: &CacheRead<'_>,
        translation: Option<&Translation>,
    ) -> Option<BoxBody> {
        let (collection, namespace, watch) = cacheable_watch(read)?;
        let reflected = self.reflected(&collection);
        let wanted = match watch.start {
            WatchStart::State => watch.not_older_than.max(self.written(&collection)),
            WatchStart::After(version) => version,
        };
        if !reflected.reached(wanted, PATIENCE).await {
            return None;
        }
        let selection = &watch.selection;
        let ((beginning, api_version, kind), queue) =
            reflected.attach(namespace.as_deref(), |store, window| {
                let beginning = match watch.start {
                    WatchStart::State => Beginning::State {
                        objects: store.selected(namespace.as_deref(), selection),
                        version: store.resource_version(),
                        initial_events_end: watch.initial_events_end,
                    },
                    WatchStart::After(version) => Beginning::Changes(window.since(version)?),
                };
                Some((
                    beginning,
                    store.api_version().to_string(),
                    store.kind().to_string(),
                ))
            })?;
        let watcher = Watcher {
            namespace,
            selection: watch.selection,
            translation: translation.cloned(),
            bookmarks: watch.bookmarks,
            timeout: watch.timeout_seconds.map(Duration::from_secs),
            api_version,
            kind,
        };
        Some(watcher::stream(
            reflected,
            watcher,
            beginning,
            queue,
            self.shutdown.clone(),
        ))
    }

    /// The answer to `read` in provider terms, a list or a watch.
    async fn answer(&self, read: &CacheRead<'_>) -> Option<http::Response<BoxBody>> {
        let body = match self.list(read, None).await {
            Some(list) => Full::new(Bytes::from(list))
                .map_err(|never| match never {})
                .boxed_unsync(),
            None => self.watch(read, None).await?,
        };
        let mut response = http::Response::new(body);
        response.headers_mut().insert(
            CONTENT_TYPE,
            http::HeaderValue::from_static("application/json"),
        );
        Some(response)
    }
}

impl CachedUpstream {
    /// Remembers the version a successful write answered with; a write
    /// whose answer names none (a delete answered with a Status) at the
    /// provider's version after it.
    async fn note_write(
        &self,
        write: Write,
        response: http::Response<BoxBody>,
    ) -> Result<http::Response<BoxBody>, BoxError> {
        let (head, body) = response.into_parts();
        let bytes = body.collect().await?.to_bytes();
        let answered = crate::deep::from_slice::<serde_json::Value>(&bytes)
            .ok()
            .and_then(|v| {
                v["metadata"]["resourceVersion"]
                    .as_str()?
                    .parse::<u64>()
                    .ok()
            });
        let version = match answered {
            Some(version) => Some(version),
            None => self.version_after(&write).await,
        };
        let collection = write.target.collection();
        if let Some(version) = version {
            if let Some(reflected) = self.resources.get(&collection) {
                reflected.expect(version);
            }
            let mut newest = self.written.entry(collection).or_insert(0);
            *newest = (*newest).max(version);
        }
        Ok(http::Response::from_parts(
            head,
            Full::new(bytes)
                .map_err(|never| match never {})
                .boxed_unsync(),
        ))
    }
}

/// A write through bindery to a reflected collection: its target, and a
/// delete's headers (its credentials, to ask the provider's version after
/// it as it was made: kube-apiserver answers an immediate delete with a
/// Status that names none).
struct Write {
    target: ResourceRequest,
    headers: Option<http::HeaderMap>,
}

impl CachedUpstream {
    /// The provider's version now, after a delete: a consistent list of at
    /// most one object's metadata in its namespace, made as the delete
    /// was. `None` for another write, or when the provider does not answer.
    async fn version_after(&self, write: &Write) -> Option<u64> {
        let headers = write.headers.as_ref()?;
        let collection = ResourceRequest {
            name: None,
            subresource: None,
            watch_prefix: false,
            ..write.target.clone()
        };
        let uri = format!("{}?limit=1", collection.path()).parse().ok()?;
        Some(self.probe(uri, headers).await?.resource_version)
    }

    /// The provider's metadata list at `uri`, asked with `headers` (a
    /// request's credentials; its body's headers and Accept left out).
    async fn probe(
        &self,
        uri: http::Uri,
        headers: &http::HeaderMap,
    ) -> Option<metadata_probe::ListedVersions> {
        let mut probe = http::Request::builder().method(http::Method::GET).uri(uri);
        for (name, value) in headers {
            if name != ACCEPT && name != CONTENT_TYPE && name != http::header::CONTENT_LENGTH {
                probe = probe.header(name, value);
            }
        }
        let probe = probe
            .header(ACCEPT, metadata_probe::ACCEPT)
            .body(Bytes::new())
            .ok()?;
        let response = self.inner.send(probe).await.ok()?;
        if response.status() != http::StatusCode::OK {
            return None;
        }
        let body = response.into_body().collect().await.ok()?.to_bytes();
        metadata_probe::decode(&body)
    }
}

impl Sender for CachedUpstream {
    fn send(&self, request: http::Request<Bytes>) -> Sent<'_> {
        Box::pin(async move {
            let written = (request.method() != http::Method::GET)
                .then(|| request.extensions().get::<ResourceRequest>())
                .flatten()
                .filter(|target| self.resources.contains_key(&target.collection()))
                .map(|target| Write {
                    target: target.clone(),
                    headers: (request.method() == http::Method::DELETE)
                        .then(|| request.headers().clone()),
                });
            let response = self.inner.send(request).await?;
            match written {
                Some(write) if response.status().is_success() => {
                    self.note_write(write, response).await
                }
                _ => Ok(response),
            }
        })
    }
}

impl Upstream for CachedUpstream {
    fn cached<'a>(
        &'a self,
        read: &'a CacheRead<'a>,
    ) -> Pin<Box<dyn Future<Output = Option<http::Response<BoxBody>>> + Send + 'a>> {
        Box::pin(self.answer(read))
    }

    fn list_translated<'a>(
        &'a self,
        read: &'a CacheRead<'a>,
        translation: &'a Translation,
    ) -> Pin<Box<dyn Future<Output = Option<Vec<u8>>> + Send + 'a>> {
        Box::pin(self.list(read, Some(translation)))
    }

    fn rows_translated<'a>(
        &'a self,
        read: &'a CacheRead<'a>,
        translation: &'a Translation,
        rows: &'a RowMaker<'a>,
    ) -> Pin<Box<dyn Future<Output = Option<Rows>> + Send + 'a>> {
        Box::pin(async move {
            let (reflected, page) = self.page(read).await?;
            let key = store::row_key(translation, rows);
            reflected
                .read(|store, _| {
                    store.rows(
                        &page,
                        |stored| stored.row(key, translation, rows),
                        |token| translation.continue_token(token),
                    )
                })
                .flatten()
        })
    }

    fn watch_translated<'a>(
        &'a self,
        read: &'a CacheRead<'a>,
        translation: &'a Translation,
    ) -> Pin<Box<dyn Future<Output = Option<BoxBody>> + Send + 'a>> {
        Box::pin(self.watch(read, Some(translation)))
    }

    fn object_translated(
        &self,
        target: &ResourceRequest,
        body: &[u8],
        translation: &Translation,
    ) -> Option<Bytes> {
        let name = target.name.as_deref()?;
        if target.subresource.is_some() || !reflectable(target) {
            return None;
        }
        let namespace = target.namespace.as_deref().unwrap_or_default();
        // The resource's one shared list+watch, started by the first GET
        // if no list or watch has started it.
        let reflected = self.reflected(&target.collection());
        got::translated(&reflected, namespace, name, body, translation)
    }

    fn owned_by(&self, group: &str, resource: &str, consumer: &str, export: &str) -> Option<u64> {
        // The resource is reflected at one version, whichever it is.
        let prefix = if group.is_empty() {
            "/api/".to_string()
        } else {
            format!("/apis/{group}/")
        };
        let suffix = format!("/{resource}");
        self.resources.iter().find_map(|entry| {
            let collection = entry.key();
            let version = collection.strip_prefix(&prefix)?.strip_suffix(&suffix)?;
            if version.contains('/') {
                return None;
            }
            entry
                .value()
                .read(|store, _| store.owned_by(consumer, export))
        })
    }
}

/// The page of a versioned `list` from the store: now, or as it was at an
/// exact version the window still tells.
fn stored_page(
    store: &Store,
    window: &Window,
    namespace: Option<&str>,
    list: &CacheableList,
) -> Option<Page> {
    match list.at {
        ListAt::NotOlderThan(_) => {
            Some(store.page(namespace, list, store.resource_version(), None))
        }
        // The provider answers versions the window no longer tells
        // (kube-apiserver's own cache then asks etcd).
        ListAt::Exact(version) => {
            let then = window.reverted_to(version)?;
            Some(store.page(namespace, list, version, Some(&then)))
        }
        ListAt::Consistent => None,
    }
}

/// A LIST the cache may answer: the collection across namespaces, the
/// namespace asked for, and the filter.
fn cacheable(read: &CacheRead<'_>) -> Option<(String, Option<String>, CacheableList)> {
    let (collection, namespace) = collection_read(read)?;
    let list = CacheableList::of_scoped_query(read.query, read.identity_scope)?;
    Some((collection, namespace, list))
}

/// A WATCH the cache may answer, like [`cacheable`].
fn cacheable_watch(read: &CacheRead<'_>) -> Option<(String, Option<String>, CacheableWatch)> {
    let (collection, namespace) = collection_read(read)?;
    Some((collection, namespace, CacheableWatch::of_query(read.query)?))
}

/// A JSON GET of a whole collection: the collection across namespaces, and
/// the namespace asked for.
fn collection_read(read: &CacheRead<'_>) -> Option<(String, Option<String>)> {
    if read.sent.method() != http::Method::GET {
        return None;
    }
    let accept = read
        .sent
        .headers()
        .get(ACCEPT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("application/json");
    if !matches!(accept, "application/json" | "*/*") {
        return None;
    }
    let target = read.target;
    if target.name.is_some() || target.subresource.is_some() || !reflectable(target) {
        return None;
    }
    Some((target.collection(), target.namespace.clone()))
}

/// Whether the cache keeps the resource `target` is for: not the
/// deprecated `/watch/` paths, and not Namespaces.
fn reflectable(target: &ResourceRequest) -> bool {
    !target.watch_prefix && !target.resource.is_empty() && target.resource != "namespaces"
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resource(group: &str, namespace: Option<&str>, resource: &str) -> ResourceRequest {
        ResourceRequest {
            group: group.into(),
            version: "v1".into(),
            namespace: namespace.map(str::to_string),
            resource: resource.into(),
            name: None,
            subresource: None,
            watch_prefix: false,
        }
    }

    fn widgets(namespace: Option<&str>) -> ResourceRequest {
        resource("example.com", namespace, "widgets")
    }

    /// The collection and namespace of `target` asked with `query` and
    /// `accept`, if the cache may answer it as a list.
    fn cacheable_as(
        target: &ResourceRequest,
        query: &[(&str, &str)],
        accept: Option<&str>,
    ) -> Option<(String, Option<String>)> {
        let mut sent = http::Request::builder().uri(target.path());
        if let Some(accept) = accept {
            sent = sent.header(ACCEPT, accept);
        }
        let sent = sent.body(Bytes::new()).unwrap();
        let query: Vec<(String, String)> = query
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let read = CacheRead {
            target,
            query: &query,
            sent: &sent,
            identity_scope: None,
        };
        cacheable(&read).map(|(collection, namespace, _)| (collection, namespace))
    }

    const ANY: &[(&str, &str)] = &[("resourceVersion", "0")];

    #[test]
    fn collections_are_keyed_across_namespaces() {
        assert_eq!(
            cacheable_as(&widgets(Some("kube-bind-x-default")), ANY, None),
            Some((
                "/apis/example.com/v1/widgets".to_string(),
                Some("kube-bind-x-default".to_string())
            ))
        );
        assert_eq!(
            cacheable_as(&resource("", None, "secrets"), ANY, Some("*/*")),
            Some(("/api/v1/secrets".to_string(), None))
        );
    }

    #[test]
    fn objects_watches_tables_namespaces_and_watch_paths_go_to_the_provider() {
        let named = ResourceRequest {
            name: Some("w".into()),
            ..widgets(Some("a"))
        };
        let status = ResourceRequest {
            subresource: Some("status".into()),
            ..widgets(Some("a"))
        };
        let watch_path = ResourceRequest {
            watch_prefix: true,
            ..widgets(None)
        };
        let table = Some("application/json;as=Table;v=v1;g=meta.k8s.io");
        let watch: &[(&str, &str)] = &[("watch", "true"), ("resourceVersion", "0")];
        assert_eq!(cacheable_as(&named, ANY, None), None);
        assert_eq!(cacheable_as(&status, ANY, None), None);
        assert_eq!(cacheable_as(&watch_path, ANY, None), None);
        assert_eq!(cacheable_as(&widgets(None), watch, None), None);
        assert_eq!(cacheable_as(&widgets(None), ANY, table), None);
        assert_eq!(
            cacheable_as(&resource("", None, "namespaces"), ANY, None),
            None
        );
        assert!(cacheable_as(&widgets(None), ANY, None).is_some());
    }
}
