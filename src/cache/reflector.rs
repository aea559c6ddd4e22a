//! Keeps one [`Store`] in step with the provider: one LIST, then one WATCH
//! from its resourceVersion (with bookmarks), resumed from the last version
//! seen when the stream ends, and a fresh LIST when the provider says the
//! version is gone (410) or cannot be reached. One reflector per provider
//! resource, however many consumers and clients read it. Every change is
//! kept in a window and handed to the attached watchers; a relist is handed
//! out as the changes it makes, so watchers stay attached across it.

use super::changes::{Change, Window};
use super::store::{Applied, Store, Stored};
use super::subscribers::Subscribers;
use http::header::ACCEPT;
use kube::core::WatchEvent;
use std::sync::atomic::{AtomicBool, Ordering};
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
}

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
        let queue = self
            .subscribers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .subscribe(namespace);
        Some((value, queue))
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
    pub async fn reached(&self, version: u64, patience: Duration) -> bool {
        if self.list_failed.load(Ordering::Relaxed) && *self.version.borrow() < version.max(1) {
            return false;
        }
        let mut seen = self.version.subscribe();
        let wanted = version.max(1);
        tokio::time::timeout(patience, seen.wait_for(|v| *v >= wanted))
            .await
            .is_ok_and(|r| r.is_ok())
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
                    subscribers.dispatch(&change);
                    window.push(change);
                }
                window.relisted(version);
                Cached { store, window }
            }
        };
        *guard = Some(cached);
        self.version.send_replace(version);
    }

    fn apply(&self, event: &WatchEvent<serde_json::Value>) -> Applied {
        let mut guard = self.cached.write().unwrap_or_else(|p| p.into_inner());
        let Some(cached) = guard.as_mut() else {
            return Applied::Relist;
        };
        let (applied, change) = cached.store.apply(event);
        if let Some(change) = change {
            let change = Arc::new(change);
            self.subscribers
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .dispatch(&change);
            cached.window.push(change);
        }
        if let Applied::Advanced(version) = applied {
            self.version.send_replace(version);
        }
        applied
    }
}

/// Starts reflecting `collection` (`/apis/<g>/<v>/<resource>`, all
/// namespaces) from the provider.
pub fn start(client: kube::Client, collection: String) -> Arc<Reflected> {
    let (version, _) = watch::channel(0);
    let reflected = Arc::new(Reflected {
        cached: RwLock::new(None),
        subscribers: Mutex::new(Subscribers::default()),
        version,
        list_failed: AtomicBool::new(false),
    });
    tokio::spawn(run(client, collection, reflected.clone()));
    reflected
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
    match client.request::<serde_json::Value>(request).await {
        Ok(list) => {
            let store = Store::from_list(&list)?;
            let version = store.resource_version();
            reflected.set(store);
            reflected.list_failed.store(false, Ordering::Relaxed);
            Some(version)
        }
        Err(e) => {
            reflected.list_failed.store(true, Ordering::Relaxed);
            tracing::warn!(%collection, error = %e, "the watch cache cannot list");
            None
        }
    }
}

/// Watches from `version` until the provider says to list again.
async fn follow(client: &kube::Client, collection: &str, reflected: &Reflected, mut version: u64) {
    use futures::TryStreamExt;
    loop {
        let uri = format!(
            "{collection}?watch=true&allowWatchBookmarks=true&resourceVersion={version}&timeoutSeconds=600"
        );
        let Ok(request) = http::Request::builder()
            .uri(uri)
            .header(ACCEPT, "application/json")
            .body(Vec::new())
        else {
            return;
        };
        let stream = match client.request_events::<serde_json::Value>(request).await {
            Ok(stream) => stream,
            Err(e) => {
                tracing::warn!(%collection, error = %e, "the watch cache cannot watch; relisting");
                tokio::time::sleep(Duration::from_secs(1)).await;
                return;
            }
        };
        let mut stream = std::pin::pin!(stream);
        loop {
            match stream.try_next().await {
                Ok(Some(event)) => match reflected.apply(&event) {
                    Applied::Advanced(v) => version = v,
                    Applied::Relist => return,
                    Applied::Ignored => {}
                },
                // The stream ended (timeout): watch on from where it was.
                Ok(None) => break,
                Err(e) => {
                    tracing::debug!(%collection, error = %e, "the watch cache's watch broke");
                    if matches!(&e, kube::Error::Api(status) if status.code == 410) {
                        return;
                    }
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    break;
                }
            }
        }
    }
}

/// A reflected resource that has listed `store`, with no reflector behind
/// it.
#[cfg(test)]
pub fn listed(store: Store) -> Reflected {
    let reflected = Reflected {
        cached: RwLock::new(None),
        subscribers: Mutex::new(Subscribers::default()),
        version: watch::channel(0).0,
        list_failed: AtomicBool::new(false),
    };
    reflected.set(store);
    reflected
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unlisted(list_failed: bool) -> Reflected {
        Reflected {
            cached: RwLock::new(None),
            subscribers: Mutex::new(Subscribers::default()),
            version: watch::channel(0).0,
            list_failed: AtomicBool::new(list_failed),
        }
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
