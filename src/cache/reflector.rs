//! Keeps one [`Store`] in step with the provider: one LIST, then one WATCH
//! from its resourceVersion (with bookmarks), resumed from the last version
//! seen when the stream ends, and a fresh LIST when the provider says the
//! version is gone (410) or cannot be reached. One reflector per provider
//! resource, however many consumers and clients read it. Every change is
//! kept in a window and handed to the attached watchers; a relist is handed
//! out as the changes it makes, so watchers stay attached across it.

use super::changes::{Change, Window};
use super::provider_read;
use super::store::{Applied, Store, Stored};
use super::subscribers::Subscribers;
use crate::metrics::cache::ResourceMetrics;
use http::header::ACCEPT;
use kube::core::WatchEvent;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;
use tokio::sync::{mpsc, watch};

/// How many changes a resource keeps for watches that resume.
const WINDOW: usize = 4096;

/// The store with the changes that led to it.
struct Cached {
    store: Store,
    window: Window,
}

/// A store, its recent changes, its watchers and the version it has
/// reached, shared by the reflector (the writer) and every reader. Changes
/// are handed out while the store is locked for writing, and watchers attach
/// while it is locked for reading, so a watcher sees each change exactly
/// once: in what it read when it attached, or in its queue.
pub struct Reflected {
    cached: RwLock<Option<Cached>>,
    subscribers: Mutex<Subscribers>,
    version: watch::Sender<u64>,
    /// Its last LIST failed (a resource the provider does not serve, or
    /// will not list to bindery): readers then do not wait for it.
    list_failed: AtomicBool,
    /// Its last LIST was refused in a way waiting does not mend (the
    /// provider does not serve the resource, or will not let bindery list
    /// it): it does not hold bindery back from being ready.
    list_refused: AtomicBool,
    /// Readers that waited too long for a version ask the reflector to
    /// watch the provider again; at most once per [`NUDGE_INTERVAL`].
    nudge: Nudge,
    metrics: ResourceMetrics,
}

/// A reader's request that the reflector watch the provider again, with
/// the newest version a reader waited for.
#[derive(Default)]
struct Nudge {
    notify: tokio::sync::Notify,
    wanted: AtomicU64,
    last: Mutex<Option<tokio::time::Instant>>,
}

/// How long a reader waits for a version before nudging the reflector:
/// long enough for a change already on its way to arrive.
const NUDGE_AFTER: Duration = Duration::from_millis(250);
/// How long a write through bindery waits for the watch to bring it before
/// nudging the reflector.
const WRITE_NUDGE_AFTER: Duration = Duration::from_secs(1);
/// At most one nudge per resource this often.
const NUDGE_INTERVAL: Duration = Duration::from_secs(1);
/// The `timeoutSeconds` of the watch a nudge starts. kube-apiserver plans
/// each watcher's bookmark 2 s before its deadline, if that is still to
/// come, and sends planned bookmarks at its next tick (about every second)
/// once their second has begun (`k8s.io/apiserver` v1.34,
/// `cacher/cache_watcher.go`, `nextBookmarkTime`; `cacher.go`,
/// `watcherBookmarkTimeBuckets`). A 3 s watch so gets one within about
/// 2 s (0.7 to 2 s measured), not after a minute. The bookmark carries the
/// version the provider's watch cache has reached, which a consistent list
/// (the metadata probe) brought up to the provider's revision: on a
/// resource no one writes, that is what brings the store to a list's
/// version. The watch after it is a long one again.
const PROMPT_BOOKMARK_TIMEOUT_SECONDS: u64 = 3;
/// The `timeoutSeconds` of the reflector's other watches.
const WATCH_TIMEOUT_SECONDS: u64 = 600;
/// An upstream watch that sends nothing, not even the bookmark
/// kube-apiserver sends each watcher every minute, for this long is
/// replaced.
const SILENCE: Duration = Duration::from_secs(75);

impl Reflected {
    /// Reads the store and its window, if it has been listed.
    pub fn read<T>(&self, f: impl FnOnce(&Store, &Window) -> T) -> Option<T> {
        let guard = self.cached.read().unwrap_or_else(|p| p.into_inner());
        guard
            .as_ref()
            .map(|cached| f(&cached.store, &cached.window))
    }

    /// Reads the store and its window with `f` and, when `f` gives a
    /// value, attaches a watcher of `namespace` (all when `None`) that
    /// receives every change after what `f` read.
    pub fn attach<T>(
        &self,
        namespace: Option<&str>,
        f: impl FnOnce(&Store, &Window) -> Option<T>,
    ) -> Option<(T, mpsc::Receiver<Arc<Change>>)> {
        let guard = self.cached.read().unwrap_or_else(|p| p.into_inner());
        let cached = guard.as_ref()?;
        let value = f(&cached.store, &cached.window)?;
        Some((value, self.subscribe(namespace)))
    }

    /// The store's version, and the changes up to it still waiting in
    /// `queue` (taken out of it): once they are sent, a bookmark at that
    /// version hides nothing from the watcher.
    pub fn settle(&self, queue: &mut mpsc::Receiver<Arc<Change>>) -> (Vec<Arc<Change>>, u64) {
        let guard = self.cached.read().unwrap_or_else(|p| p.into_inner());
        let mut waiting = Vec::new();
        while let Ok(change) = queue.try_recv() {
            waiting.push(change);
        }
        let version = guard.as_ref().map_or(0, |c| c.store.resource_version());
        (waiting, version)
    }

    /// Waits until the store has reached `version` (0: until it is listed),
    /// at most `patience`, and not at all while its LIST fails. Whether it
    /// did.
    /// A reader that waits longer than [`NUDGE_AFTER`] for a version it
    /// was given nudges the reflector to watch the provider again: either
    /// its watch has gone silent, or the resource is quiet and a new watch
    /// costs the provider little.
    pub async fn reached(&self, version: u64, patience: Duration) -> bool {
        if self.list_failed.load(Ordering::Relaxed) && *self.version.borrow() < version.max(1) {
            return false;
        }
        let mut seen = self.version.subscribe();
        let wanted = version.max(1);
        let first = NUDGE_AFTER.min(patience);
        let waiting = std::time::Instant::now();
        let observe = |reached: bool| {
            self.metrics.wait.observe(waiting.elapsed().as_secs_f64());
            reached
        };
        if tokio::time::timeout(first, seen.wait_for(|v| *v >= wanted))
            .await
            .is_ok_and(|r| r.is_ok())
        {
            return observe(true);
        }
        if version > 0 {
            self.nudge(version);
        }
        let reached = tokio::time::timeout(patience - first, seen.wait_for(|v| *v >= wanted))
            .await
            .is_ok_and(|r| r.is_ok());
        if !reached {
            self.metrics.impatient.inc();
            tracing::info!(
                at = self.at(),
                wanted,
                ?patience,
                "a reader waited the watch cache's full patience; the provider answers it"
            );
        }
        observe(reached)
    }

    /// Whether it has listed, or its list was refused for good.
    pub fn settled(&self) -> bool {
        self.list_refused.load(Ordering::Relaxed)
            || self
                .cached
                .read()
                .unwrap_or_else(|p| p.into_inner())
                .is_some()
    }

    /// Attaches a watcher's queue (see [`Reflected::attach`]).
    fn subscribe(&self, namespace: Option<&str>) -> mpsc::Receiver<Arc<Change>> {
        let mut subscribers = self.subscribers.lock().unwrap_or_else(|p| p.into_inner());
        let queue = subscribers.subscribe(namespace);
        self.metrics.watchers.set(subscribers.len() as i64);
        queue
    }

    /// Hands `change` to the watchers, counting those dropped for being slow.
    fn dispatch(&self, subscribers: &mut Subscribers, change: &Arc<Change>) {
        let dropped = subscribers.dispatch(change);
        if dropped > 0 {
            self.metrics.terminated_watchers.inc_by(dropped);
        }
        self.metrics.watchers.set(subscribers.len() as i64);
    }

    /// A write through bindery answered with `version`: the watch should
    /// bring it within moments. When it has not after [`NUDGE_AFTER`], the
    /// reflector is nudged, so that a watch that went silent is found by
    /// the first write after, not by the readers that would wait for it.
    pub fn expect(self: &Arc<Self>, version: u64) {
        if self.at() >= version {
            return;
        }
        let reflected = self.clone();
        tokio::spawn(async move {
            let mut seen = reflected.version.subscribe();
            let brought =
                tokio::time::timeout(WRITE_NUDGE_AFTER, seen.wait_for(|v| *v >= version)).await;
            if brought.is_err() {
                reflected.nudge(version);
            }
        });
    }

    /// Asks the reflector to watch again, unless it was asked recently.
    fn nudge(&self, wanted: u64) {
        self.nudge.wanted.fetch_max(wanted, Ordering::Relaxed);
        let mut last = self.nudge.last.lock().unwrap_or_else(|p| p.into_inner());
        if last.is_some_and(|at| at.elapsed() < NUDGE_INTERVAL) {
            return;
        }
        *last = Some(tokio::time::Instant::now());
        self.nudge.notify.notify_one();
    }

    /// The version the store has reached.
    fn at(&self) -> u64 {
        *self.version.borrow()
    }

    /// The objects `listed` names ((namespace, name, resourceVersion)), in
    /// order, from the store or the changes it kept; when some are not
    /// there yet, waits for the store to move, at most `patience`. `None`
    /// when they never all are.
    pub async fn resolve(
        &self,
        listed: &[(String, String, u64)],
        patience: Duration,
    ) -> Option<Vec<Arc<Stored>>> {
        let deadline = tokio::time::Instant::now() + patience;
        let mut moved = self.version.subscribe();
        loop {
            moved.borrow_and_update();
            let found = self.read(|store, window| {
                listed
                    .iter()
                    .map(|(namespace, name, version)| {
                        store
                            .object_at(namespace, name, *version)
                            .or_else(|| window.find(namespace, name, *version))
                    })
                    .collect::<Option<Vec<_>>>()
            });
            if let Some(Some(found)) = found {
                return Some(found);
            }
            tokio::time::timeout_at(deadline, moved.changed())
                .await
                .ok()?
                .ok()?;
        }
    }

    /// Takes a fresh list: the first, or a relist, which is handed out as
    /// the changes it makes.
    fn set(&self, store: Store) {
        let version = store.resource_version();
        let mut guard = self.cached.write().unwrap_or_else(|p| p.into_inner());
        let cached = match guard.take() {
            None => Cached {
                window: Window::new(version, WINDOW),
                store,
            },
            Some(Cached {
                store: old,
                mut window,
            }) => {
                let mut subscribers = self.subscribers.lock().unwrap_or_else(|p| p.into_inner());
                for change in old.changes_to(&store) {
                    let change = Arc::new(change);
                    self.dispatch(&mut subscribers, &change);
                    window.push(change);
                }
                // A list older than what the store had seen tells no state
                // before the newer of the two exactly.
                window.relisted(version.max(old.resource_version()));
                Cached { store, window }
            }
        };
        self.metrics.lists.inc();
        self.metrics.objects.set(cached.store.len() as i64);
        self.metrics.resource_version.set(version as i64);
        *guard = Some(cached);
        self.version.send_replace(version);
    }

    fn apply(&self, event: &WatchEvent<serde_json::Value>) -> Applied {
        let mut guard = self.cached.write().unwrap_or_else(|p| p.into_inner());
        let Some(cached) = guard.as_mut() else {
            return Applied::Relist;
        };
        self.metrics.events.inc();
        let (applied, change) = cached.store.apply(event);
        if let Some(change) = change {
            let change = Arc::new(change);
            let mut subscribers = self.subscribers.lock().unwrap_or_else(|p| p.into_inner());
            self.dispatch(&mut subscribers, &change);
            cached.window.push(change);
        }
        self.metrics.objects.set(cached.store.len() as i64);
        if let Applied::Advanced(version) = applied {
            self.metrics.resource_version.set(version as i64);
            self.version.send_replace(version);
        }
        applied
    }
}

/// Starts reflecting `collection` (`/apis/<g>/<v>/<resource>`, all
/// namespaces) from the provider.
pub fn start(client: kube::Client, collection: String) -> Arc<Reflected> {
    let metrics = crate::metrics::metrics()
        .cache
        .resource(crate::metrics::resource_label(&collection));
    let reflected = Arc::new(Reflected::new(metrics));
    tokio::spawn(run(client, collection, reflected.clone()));
    reflected
}

impl Reflected {
    fn new(metrics: ResourceMetrics) -> Self {
        Self {
            cached: RwLock::new(None),
            subscribers: Mutex::new(Subscribers::default()),
            version: watch::channel(0).0,
            list_failed: AtomicBool::new(false),
            list_refused: AtomicBool::new(false),
            nudge: Nudge::default(),
            metrics,
        }
    }
}

async fn run(client: kube::Client, collection: String, reflected: Arc<Reflected>) {
    loop {
        let Some(version) = list(&client, &collection, &reflected).await else {
            tokio::time::sleep(Duration::from_secs(1)).await;
            continue;
        };
        follow(&client, &collection, &reflected, version).await;
    }
}

/// Lists the collection into the store; its version, or `None` on failure.
async fn list(client: &kube::Client, collection: &str, reflected: &Reflected) -> Option<u64> {
    let request = http::Request::builder()
        .uri(collection)
        .header(ACCEPT, "application/json")
        .body(Vec::new())
        .ok()?;
    match client.request_text(request).await {
        Ok(body) => {
            let Some(listed) = provider_read::list(&body) else {
                reflected.list_failed.store(true, Ordering::Relaxed);
                tracing::warn!(%collection, "the watch cache cannot read the provider's list");
                return None;
            };
            for unreadable in &listed.unreadable {
                reflected.metrics.unreadable.inc();
                tracing::warn!(%collection, object = %unreadable,
                    "the watch cache cannot read an object and serves the rest without it");
            }
            let store = Store::from_listed(listed)?;
            let version = store.resource_version();
            reflected.set(store);
            reflected.list_failed.store(false, Ordering::Relaxed);
            reflected.list_refused.store(false, Ordering::Relaxed);
            Some(version)
        }
        Err(e) => {
            reflected.list_failed.store(true, Ordering::Relaxed);
            let refused = matches!(&e, kube::Error::Api(s) if (403..=405).contains(&s.code));
            reflected.list_refused.store(refused, Ordering::Relaxed);
            tracing::warn!(%collection, error = %e, "the watch cache cannot list");
            None
        }
    }
}

/// The events of a watch's body, one per line, each read by
/// [`provider_read::watch_line`]; an object that cannot be read comes as
/// its deletion, named in a warning and counted.
fn events(
    body: impl futures::AsyncBufRead + Send + Unpin,
    collection: &str,
    metrics: &ResourceMetrics,
) -> impl futures::Stream<Item = Result<WatchEvent<serde_json::Value>, std::io::Error>> + Send {
    use futures::{AsyncBufReadExt, StreamExt};
    let collection = collection.to_string();
    let unreadable = metrics.unreadable.clone();
    body.lines().filter_map(move |line| {
        let read = line.map(|line| match provider_read::watch_line(&line) {
            provider_read::Line::Event(event) => Some(event),
            provider_read::Line::Unreadable {
                object,
                description,
            } => {
                unreadable.inc();
                tracing::warn!(%collection, event = %description,
                    "the watch cache cannot read an object and serves the rest without it");
                Some(WatchEvent::Deleted(object))
            }
            provider_read::Line::Garbage if line.trim().is_empty() => None,
            provider_read::Line::Garbage => {
                tracing::debug!(%collection, "the provider's watch sent a line that is no event");
                None
            }
        });
        std::future::ready(read.transpose())
    })
}

/// Watches from `version` until the provider says to list again. A watch
/// that goes silent for longer than [`SILENCE`], or that a reader nudges,
/// is replaced by a new one from the version reached (after a nudge, a
/// short one that brings a bookmark at once); watches that keep ending at
/// once without an event (a provider that cannot encode one) make it list
/// again.
async fn follow(client: &kube::Client, collection: &str, reflected: &Reflected, version: u64) {
    let mut barren = 0;
    let mut watch = Watch {
        collection,
        reflected,
        version,
        suspect: None,
        delivered: false,
        nudged: false,
    };
    loop {
        // The watch after a nudge is a short one.
        let timeout = match std::mem::take(&mut watch.nudged) {
            true => PROMPT_BOOKMARK_TIMEOUT_SECONDS,
            false => WATCH_TIMEOUT_SECONDS,
        };
        let Some(request) = watch_request(collection, watch.version, timeout) else {
            return;
        };
        let started = std::time::Instant::now();
        reflected.metrics.upstream_watches.inc();
        let stream = match client.request_stream(request).await {
            Ok(body) => events(body, collection, &reflected.metrics),
            Err(e) => {
                tracing::warn!(%collection, error = %e, "the watch cache cannot watch; relisting");
                tokio::time::sleep(Duration::from_secs(1)).await;
                return;
            }
        };
        watch.delivered = false;
        if watch.read(stream).await {
            return;
        }
        if watch.delivered || started.elapsed() >= Duration::from_secs(1) {
            barren = 0;
            continue;
        }
        barren += 1;
        if barren >= 3 {
            tracing::warn!(%collection, at = watch.version,
                "the provider's watch keeps ending without an event; listing again");
            tokio::time::sleep(Duration::from_secs(1)).await;
            return;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The provider watch of `collection` from `version`, with bookmarks, for
/// `timeout` seconds; uncompressed, as kube-rs asks for its own watches: a
/// watch is read line by line as it comes.
fn watch_request(collection: &str, version: u64, timeout: u64) -> Option<http::Request<Vec<u8>>> {
    let uri = format!(
        "{collection}?watch=true&allowWatchBookmarks=true&resourceVersion={version}&timeoutSeconds={timeout}"
    );
    http::Request::builder()
        .uri(uri)
        .header(ACCEPT, "application/json")
        .header(http::header::ACCEPT_ENCODING, "identity")
        .body(Vec::new())
        .ok()
}

/// [`follow`]'s provider watches, one after another, as they are read.
struct Watch<'a> {
    collection: &'a str,
    reflected: &'a Reflected,
    /// The version the store has reached.
    version: u64,
    /// The version a reader waited for when it nudged, and the cache's
    /// version then: a later watch that delivers it shows the lag.
    suspect: Option<(u64, u64)>,
    /// Whether the current watch brought an event.
    delivered: bool,
    /// Whether a reader's nudge ended the last watch.
    nudged: bool,
}

impl Watch<'_> {
    /// Applies `stream`'s events until it ends, goes silent for
    /// [`SILENCE`], breaks or is nudged; whether the store must list again.
    async fn read<S>(&mut self, stream: S) -> bool
    where
        S: futures::Stream<Item = Result<WatchEvent<serde_json::Value>, std::io::Error>>,
    {
        use futures::TryStreamExt;
        let (collection, reflected) = (self.collection, self.reflected);
        let mut stream = std::pin::pin!(stream);
        loop {
            let next = tokio::select! {
                next = tokio::time::timeout(SILENCE, stream.try_next()) => next,
                () = reflected.nudge.notify.notified() => {
                    let wanted = reflected.nudge.wanted.swap(0, Ordering::Relaxed);
                    tracing::debug!(%collection, at = self.version, wanted,
                        "a reader waited for a version the watch cache has not reached; watching the provider again");
                    self.suspect = Some((wanted, self.version));
                    self.nudged = true;
                    return false;
                }
            };
            let Ok(next) = next else {
                reflected.metrics.silences.inc();
                tracing::warn!(%collection, at = reflected.at(), silent_for = ?SILENCE,
                    "the provider's watch sent nothing, not even a bookmark; watching again");
                return false;
            };
            match next {
                Ok(Some(event)) => {
                    self.delivered = true;
                    match reflected.apply(&event) {
                        Applied::Advanced(v) => self.advanced(v),
                        Applied::Relist => return true,
                        Applied::Ignored => {}
                    }
                }
                // The stream ended (timeout): watch on from where it was.
                Ok(None) => return false,
                Err(e) => {
                    tracing::debug!(%collection, error = %e, "the watch cache's watch broke");
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    return false;
                }
            }
        }
    }

    /// The store reached `version`. The version a reader waited for, which
    /// the old watch had not delivered in that time: the cache was behind.
    /// (A reader may wait for a version the provider never had.)
    fn advanced(&mut self, version: u64) {
        if let Some((wanted, at)) = self.suspect
            && version >= wanted
        {
            self.reflected.metrics.behind.inc();
            tracing::warn!(collection = %self.collection, at, wanted, delivered = version,
                "the watch cache was behind a version bindery waited for; a new watch caught it up");
            self.suspect = None;
        }
        self.version = version;
    }
}

/// A reflected resource that has listed `store`, with no reflector behind
/// it.
#[cfg(test)]
pub fn listed(store: Store) -> Reflected {
    let reflected = Reflected::new(ResourceMetrics::detached());
    reflected.set(store);
    reflected
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unlisted(list_failed: bool) -> Reflected {
        let reflected = Reflected::new(ResourceMetrics::detached());
        reflected.list_failed.store(list_failed, Ordering::Relaxed);
        reflected
    }

    #[tokio::test(start_paused = true)]
    async fn a_reader_kept_waiting_nudges_the_reflector_once_in_a_while() {
        let reflected = listed(Store::from_list(&serde_json::json!({
            "apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": "5"}, "items": []
        })).unwrap());
        // Shorter than the nudge interval, so that a second reader comes
        // within it.
        let patience = NUDGE_INTERVAL / 2;
        assert!(patience > NUDGE_AFTER);
        assert!(
            reflected.reached(5, patience).await,
            "a version reached is not waited for"
        );
        let nudged = reflected.nudge.notify.notified();
        tokio::pin!(nudged);
        assert!(
            futures::poll!(nudged.as_mut()).is_pending(),
            "no nudge while no reader waited"
        );
        let started = tokio::time::Instant::now();
        assert!(!reflected.reached(9, patience).await);
        assert!(
            started.elapsed() >= patience,
            "the reader still waits its patience"
        );
        assert!(
            futures::poll!(nudged.as_mut()).is_ready(),
            "the reader nudged"
        );
        assert_eq!(reflected.nudge.wanted.load(Ordering::Relaxed), 9);
        // A second reader soon after does not nudge again.
        assert!(!reflected.reached(10, patience).await);
        let again = reflected.nudge.notify.notified();
        tokio::pin!(again);
        assert!(
            futures::poll!(again.as_mut()).is_pending(),
            "one nudge per interval"
        );
        tokio::time::advance(NUDGE_INTERVAL).await;
        assert!(!reflected.reached(11, patience).await);
        assert!(
            futures::poll!(again.as_mut()).is_ready(),
            "and one more after it"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_write_the_watch_does_not_bring_nudges_the_reflector() {
        let reflected = Arc::new(listed(Store::from_list(&serde_json::json!({
            "apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": "5"}, "items": []
        })).unwrap()));
        let nudged = reflected.nudge.notify.notified();
        tokio::pin!(nudged);
        reflected.expect(5);
        tokio::time::sleep(WRITE_NUDGE_AFTER * 2).await;
        assert!(
            futures::poll!(nudged.as_mut()).is_pending(),
            "a version the store has is not waited for"
        );
        reflected.expect(8);
        tokio::time::sleep(WRITE_NUDGE_AFTER / 2).await;
        assert!(
            futures::poll!(nudged.as_mut()).is_pending(),
            "the watch gets its moment"
        );
        tokio::time::sleep(WRITE_NUDGE_AFTER).await;
        assert!(
            futures::poll!(nudged.as_mut()).is_ready(),
            "a write the watch did not bring nudges"
        );
        assert_eq!(reflected.nudge.wanted.load(Ordering::Relaxed), 8);
    }

    // Paused time: the waits are counted, not timed.
    #[tokio::test(start_paused = true)]
    async fn readers_wait_for_a_list_only_while_it_can_come() {
        let patience = Duration::from_millis(300);
        let started = tokio::time::Instant::now();
        assert!(!unlisted(true).reached(0, patience).await);
        assert_eq!(
            started.elapsed(),
            Duration::ZERO,
            "a failing LIST is not waited for"
        );
        let started = tokio::time::Instant::now();
        assert!(!unlisted(false).reached(0, patience).await);
        assert!(started.elapsed() >= patience, "a LIST under way is");
    }
}
