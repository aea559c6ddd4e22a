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
use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, watch as signal};
use tokio::time::{Instant, Sleep};

/// kube-apiserver's bookmark period.
const BOOKMARK_EVERY: Duration = Duration::from_secs(60);
/// A watch without `timeoutSeconds` ends after kube-apiserver's default
/// minimum request timeout.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(1800);

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
/// `queue`. The body is the watch: hyper's stream polls it, and each change
/// reaches the connection from the queue directly, with no task or buffer
/// of its own between them (one wake per watcher and change, not two).
/// A client that reads no more leaves its changes in `queue` until the
/// cache drops it for being too slow; one that goes away drops the queue.
pub fn stream(
    reflected: Arc<Reflected>,
    watcher: Watcher,
    beginning: Beginning,
    queue: mpsc::Receiver<Arc<Change>>,
    shutdown: signal::Receiver<bool>,
) -> BoxBody {
    let deadline = Instant::now() + watcher.timeout.unwrap_or(DEFAULT_TIMEOUT);
    let next_bookmark = next_bookmark_time(Instant::now(), deadline);
    let watch = Watch {
        reflected,
        watcher,
        beginning: Some(beginning),
        pending: VecDeque::new(),
        queue,
        shutdown,
        deadline,
        timeout: Box::pin(tokio::time::sleep_until(deadline)),
        next_bookmark,
        bookmark: Box::pin(tokio::time::sleep_until(next_bookmark.unwrap_or(deadline))),
    };
    let lines = futures::stream::unfold(watch, |mut watch| async move {
        let line = watch.next_line().await?;
        Some((Ok::<_, BoxError>(Frame::data(line)), watch))
    });
    StreamBody::new(lines.boxed()).boxed_unsync()
}

/// A watch being written: what it selects, the lines due before the next
/// change, and when it ends.
struct Watch {
    reflected: Arc<Reflected>,
    watcher: Watcher,
    /// Written out on the first poll.
    beginning: Option<Beginning>,
    pending: VecDeque<Bytes>,
    queue: mpsc::Receiver<Arc<Change>>,
    shutdown: signal::Receiver<bool>,
    deadline: Instant,
    timeout: Pin<Box<Sleep>>,
    next_bookmark: Option<Instant>,
    /// Set to `next_bookmark` (to the deadline, unarmed, when there is none).
    bookmark: Pin<Box<Sleep>>,
}

impl Watch {
    /// The next line of the body; `None` when the watch ends: at its
    /// timeout, when bindery shuts down, or when its queue was dropped for
    /// being too slow (the client resumes from the last version it saw).
    async fn next_line(&mut self) -> Option<Bytes> {
        if let Some(beginning) = self.beginning.take() {
            self.pending.extend(self.watcher.beginning(beginning));
        }
        loop {
            if let Some(line) = self.pending.pop_front() {
                return Some(line);
            }
            let bookmarks = self.watcher.bookmarks && self.next_bookmark.is_some();
            tokio::select! {
                _ = stopping(&mut self.shutdown) => return None,
                _ = &mut self.timeout => return None,
                change = self.queue.recv() => {
                    let change = change?;
                    if let Some(line) = self.watcher.line(&change) {
                        return Some(line);
                    }
                }
                _ = &mut self.bookmark, if bookmarks => {
                    let (waiting, version) = self.reflected.settle(&mut self.queue);
                    let watcher = &self.watcher;
                    self.pending.extend(waiting.iter().filter_map(|c| watcher.line(c)));
                    self.pending.push_back(watcher.bookmark(version, false));
                    self.next_bookmark = next_bookmark_time(Instant::now(), self.deadline);
                    if let Some(due) = self.next_bookmark {
                        self.bookmark.as_mut().reset(due);
                    }
                }
            }
        }
    }
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
