//! Keeps one [`Store`] in step with the provider: one LIST, then one WATCH
//! from its resourceVersion (with bookmarks), resumed from the last version
//! seen when the stream ends, and a fresh LIST when the provider says the
//! version is gone (410) or cannot be reached. One reflector per provider
//! resource, however many consumers and clients read it.

use super::store::{Applied, Store};
use http::header::ACCEPT;
use kube::core::WatchEvent;
use std::sync::{Arc, RwLock};
use std::time::Duration;
use tokio::sync::watch;

/// A store and the version it has reached, shared by the reflector (the
/// writer) and every reader.
pub struct Reflected {
    store: RwLock<Option<Store>>,
    version: watch::Sender<u64>,
}

impl Reflected {
    /// Reads the store, if it has been listed.
    pub fn read<T>(&self, f: impl FnOnce(&Store) -> T) -> Option<T> {
        let guard = self.store.read().unwrap_or_else(|p| p.into_inner());
        guard.as_ref().map(f)
    }

    /// Waits until the store has reached `version` (0: until it is listed),
    /// at most `patience`. Whether it did.
    pub async fn reached(&self, version: u64, patience: Duration) -> bool {
        let mut seen = self.version.subscribe();
        let wanted = version.max(1);
        tokio::time::timeout(patience, seen.wait_for(|v| *v >= wanted))
            .await
            .is_ok_and(|r| r.is_ok())
    }

    fn set(&self, store: Store) {
        let version = store.resource_version();
        *self.store.write().unwrap_or_else(|p| p.into_inner()) = Some(store);
        self.version.send_replace(version);
    }

    fn apply(&self, event: &WatchEvent<serde_json::Value>) -> Applied {
        let mut guard = self.store.write().unwrap_or_else(|p| p.into_inner());
        let Some(store) = guard.as_mut() else {
            return Applied::Relist;
        };
        let applied = store.apply(event);
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
        store: RwLock::new(None),
        version,
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
            Some(version)
        }
        Err(e) => {
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
