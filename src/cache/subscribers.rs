//! The watchers attached to one reflected resource, indexed by the
//! namespace they watch, and the hand-out of each change to those it may
//! concern. Handing out never waits: a watcher whose queue is full is
//! dropped (its stream ends, as kube-apiserver ends an unresponsive
//! watcher's), so one slow client never slows the others.

use super::changes::Change;
use std::collections::HashMap;
use std::sync::Arc;
use tokio::sync::mpsc;

/// How many changes a watcher may have waiting before it is dropped.
pub const QUEUE: usize = 1024;

/// The watchers of one resource.
#[derive(Default)]
pub struct Subscribers {
    by_namespace: HashMap<String, Vec<mpsc::Sender<Arc<Change>>>>,
    everywhere: Vec<mpsc::Sender<Arc<Change>>>,
    dropped: u64,
}

impl Subscribers {
    /// A new watcher of `namespace` (every namespace when `None`).
    pub fn subscribe(&mut self, namespace: Option<&str>) -> mpsc::Receiver<Arc<Change>> {
        let (tx, rx) = mpsc::channel(QUEUE);
        match namespace {
            Some(ns) => self
                .by_namespace
                .entry(ns.to_string())
                .or_default()
                .push(tx),
            None => self.everywhere.push(tx),
        }
        rx
    }

    /// Hands `change` to every watcher of its namespace and of all; how
    /// many were dropped for being too slow.
    pub fn dispatch(&mut self, change: &Arc<Change>) -> u64 {
        let namespace = &change.object.namespace;
        let mut dropped = 0;
        if let Some(watchers) = self.by_namespace.get_mut(namespace) {
            dropped += hand_out(watchers, change);
            if watchers.is_empty() {
                self.by_namespace.remove(namespace);
            }
        }
        dropped += hand_out(&mut self.everywhere, change);
        if dropped > 0 {
            self.dropped += dropped;
            tracing::info!(
                dropped,
                "watchers too slow for the watch cache were dropped"
            );
        }
        dropped
    }

    /// How many watchers are attached.
    pub fn len(&self) -> usize {
        self.everywhere.len() + self.by_namespace.values().map(Vec::len).sum::<usize>()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// How many watchers were dropped for being too slow, ever.
    pub fn dropped(&self) -> u64 {
        self.dropped
    }
}

/// Offers `change` to each watcher; forgets those gone or full. How many
/// were full.
fn hand_out(watchers: &mut Vec<mpsc::Sender<Arc<Change>>>, change: &Arc<Change>) -> u64 {
    let mut full = 0;
    watchers.retain(|tx| match tx.try_send(change.clone()) {
        Ok(()) => true,
        Err(mpsc::error::TrySendError::Full(_)) => {
            full += 1;
            false
        }
        Err(mpsc::error::TrySendError::Closed(_)) => false,
    });
    full
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::changes::ChangeKind;
    use crate::cache::store::Stored;
    use serde_json::json;

    fn change(namespace: &str, version: u64) -> Arc<Change> {
        Arc::new(Change {
            version,
            kind: ChangeKind::Added,
            object: Arc::new(Stored::of(&json!({"metadata": {"namespace": namespace,
                "name": "w", "resourceVersion": version.to_string()}}))),
            previous: None,
        })
    }

    #[test]
    fn changes_reach_watchers_of_their_namespace_and_of_all() {
        let mut subscribers = Subscribers::default();
        let mut a = subscribers.subscribe(Some("a"));
        let mut b = subscribers.subscribe(Some("b"));
        let mut all = subscribers.subscribe(None);
        subscribers.dispatch(&change("a", 1));
        assert_eq!(a.try_recv().unwrap().version, 1);
        assert!(
            b.try_recv().is_err(),
            "another namespace's watcher is not woken"
        );
        assert_eq!(all.try_recv().unwrap().version, 1);
    }

    #[test]
    fn a_full_watcher_is_dropped_and_the_others_go_on() {
        let mut subscribers = Subscribers::default();
        let mut slow = subscribers.subscribe(Some("a"));
        let mut quick = subscribers.subscribe(Some("a"));
        for version in 1..=QUEUE as u64 + 1 {
            subscribers.dispatch(&change("a", version));
            quick
                .try_recv()
                .expect("the quick watcher gets every change");
        }
        assert_eq!(subscribers.dropped(), 1);
        assert_eq!(subscribers.len(), 1, "only the quick watcher is left");
        let mut received = 0;
        while slow.try_recv().is_ok() {
            received += 1;
        }
        assert_eq!(
            received, QUEUE,
            "the slow one gets what it had queued, then its end"
        );
        assert!(matches!(
            slow.try_recv(),
            Err(mpsc::error::TryRecvError::Disconnected)
        ));
    }

    #[test]
    fn gone_watchers_are_forgotten() {
        let mut subscribers = Subscribers::default();
        drop(subscribers.subscribe(Some("a")));
        drop(subscribers.subscribe(None));
        subscribers.dispatch(&change("a", 1));
        assert!(subscribers.is_empty());
        assert_eq!(subscribers.dropped(), 0, "gone is not slow");
    }
}
