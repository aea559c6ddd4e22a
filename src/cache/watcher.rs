//! One client's WATCH, served from the shared stream of its resource: the
//! events it starts with (the state, or the kept changes after its
//! resourceVersion), then each change from its queue as it sees it, with
//! bookmarks when asked for, until its timeout, its queue is dropped (too
//! slow), the client goes away, or bindery shuts down. Objects are written
//! from their shared bytes, in the consumer's terms when a translation is
//! given (made once per change, whoever watches).

use super::changes::{Change, Seen, bookmark_line, event_line, seen_by};
use super::query::Selection;
use super::reflector::Reflected;
use super::store::Stored;
use crate::upstream::{BoxBody, BoxError, Translation};
use bytes::Bytes;
use futures::StreamExt;
use http_body_util::{BodyExt, StreamBody};
use hyper::body::Frame;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, watch as signal};
use tokio::time::Instant;

/// kube-apiserver's bookmark period.
const BOOKMARK_EVERY: Duration = Duration::from_secs(60);
/// A watch without `timeoutSeconds` ends after kube-apiserver's default
/// minimum request timeout.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(1800);
/// Lines written ahead of a slow client before its queue backs up.
const BODY_BUFFER: usize = 64;

/// What one watch selects and how it is written.
pub struct Watcher {
    pub namespace: Option<String>,
    pub selection: Selection,
    pub translation: Option<Translation>,
    pub bookmarks: bool,
    pub timeout: Option<Duration>,
    pub api_version: String,
    pub kind: String,
}

/// What a watch begins with.
pub enum Beginning {
    /// The state at `version`: ADDED events, then (for a watch-list) the
    /// bookmark that ends them.
    State {
        objects: Vec<Arc<Stored>>,
        version: u64,
        initial_events_end: bool,
    },
    /// The kept changes after the watch's resourceVersion.
    Changes(Vec<Arc<Change>>),
}

impl Watcher {
    /// The event line for `change`, if this watcher sees it.
    fn line(&self, change: &Change) -> Option<Bytes> {
        if let Some(ns) = &self.namespace
            && *ns != change.object.namespace
        {
            return None;
        }
        match seen_by(change, &self.selection)? {
            Seen::Event(kind, object) => Some(event_line(kind, &self.object(object)?)),
            Seen::Left(bytes) => {
                let bytes = match &self.translation {
                    Some(translation) => translation.item(&bytes)?,
                    None => bytes,
                };
                Some(event_line("DELETED", &bytes))
            }
        }
    }

    fn object(&self, stored: &Stored) -> Option<Bytes> {
        match &self.translation {
            Some(translation) => stored.translated(translation),
            None => Some(stored.bytes.clone()),
        }
    }

    fn bookmark(&self, version: u64, initial_events_end: bool) -> Bytes {
        bookmark_line(&self.api_version, &self.kind, version, initial_events_end)
    }

    /// The lines a watch begins with.
    fn beginning(&self, beginning: Beginning) -> Vec<Bytes> {
        match beginning {
            Beginning::State {
                objects,
                version,
                initial_events_end,
            } => {
                let mut lines: Vec<Bytes> = objects
                    .iter()
                    .filter_map(|stored| Some(event_line("ADDED", &self.object(stored)?)))
                    .collect();
                if initial_events_end {
                    lines.push(self.bookmark(version, true));
                }
                lines
            }
            Beginning::Changes(changes) => changes.iter().filter_map(|c| self.line(c)).collect(),
        }
    }
}

/// The response body of one watch: `beginning`, then the changes in
/// `queue`.
pub fn stream(
    reflected: Arc<Reflected>,
    watcher: Watcher,
    beginning: Beginning,
    mut queue: mpsc::Receiver<Arc<Change>>,
    mut shutdown: signal::Receiver<bool>,
) -> BoxBody {
    let (tx, rx) = mpsc::channel::<Bytes>(BODY_BUFFER);
    tokio::spawn(async move {
        let deadline = Instant::now() + watcher.timeout.unwrap_or(DEFAULT_TIMEOUT);
        for line in watcher.beginning(beginning) {
            if tx.send(line).await.is_err() {
                return;
            }
        }
        let mut next_bookmark = next_bookmark_time(Instant::now(), deadline);
        loop {
            tokio::select! {
                _ = stopping(&mut shutdown) => return,
                _ = tx.closed() => return,
                _ = tokio::time::sleep_until(deadline) => return,
                change = queue.recv() => {
                    // None: dropped for being too slow; the stream ends and
                    // the client resumes from the last version it saw.
                    let Some(change) = change else { return };
                    if let Some(line) = watcher.line(&change)
                        && tx.send(line).await.is_err()
                    {
                        return;
                    }
                }
                _ = sleep_until_some(next_bookmark), if watcher.bookmarks => {
                    let (waiting, version) = reflected.settle(&mut queue);
                    for line in waiting.iter().filter_map(|c| watcher.line(c)) {
                        if tx.send(line).await.is_err() {
                            return;
                        }
                    }
                    if tx.send(watcher.bookmark(version, false)).await.is_err() {
                        return;
                    }
                    next_bookmark = next_bookmark_time(Instant::now(), deadline);
                }
            }
        }
    });
    let lines = futures::stream::unfold(rx, |mut rx| async move {
        let line = rx.recv().await?;
        Some((Ok::<_, BoxError>(Frame::data(line)), rx))
    });
    StreamBody::new(lines.boxed()).boxed_unsync()
}

/// When the next bookmark is due, as kube-apiserver schedules them: every
/// minute, and about two seconds before the watch's deadline; `None` when
/// that is already past.
fn next_bookmark_time(now: Instant, deadline: Instant) -> Option<Instant> {
    let due = (now + BOOKMARK_EVERY).min(deadline.checked_sub(Duration::from_secs(2))?);
    (due > now).then_some(due)
}

/// Resolves when bindery shuts down.
async fn stopping(shutdown: &mut signal::Receiver<bool>) {
    let _ = shutdown.wait_for(|stop| *stop).await;
}

async fn sleep_until_some(when: Option<Instant>) {
    match when {
        Some(when) => tokio::time::sleep_until(when).await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bookmarks_come_every_minute_and_before_the_deadline() {
        let now = Instant::now();
        let far = now + Duration::from_secs(600);
        assert_eq!(next_bookmark_time(now, far), Some(now + BOOKMARK_EVERY));
        let near = now + Duration::from_secs(30);
        assert_eq!(
            next_bookmark_time(now, near),
            Some(near - Duration::from_secs(2))
        );
        assert_eq!(next_bookmark_time(now, now + Duration::from_secs(1)), None);
    }
}
