//! The changes a watch-cache store went through, kept for a while (the
//! window a watch may resume from), and how one watcher sees each of them:
//! an object entering its selection is ADDED, one leaving it is DELETED,
//! exactly as kube-apiserver's watch cache turns its changes into events.
//! Event lines are joined from the objects' shared bytes. Pure.

use super::query::Selection;
use super::store::Stored;
pub use super::store::{Change, ChangeKind};
use bytes::Bytes;
use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

/// The most recent changes, oldest first: every change newer than `oldest`
/// is here, so a watch from any version not older than `oldest` misses
/// nothing. From `exact_from` on they are every change one by one, so the
/// store's state at any such version can be told (a relist folds the
/// changes it missed into one per object).
#[derive(Debug)]
pub struct Window {
    changes: VecDeque<Arc<Change>>,
    oldest: u64,
    exact_from: u64,
    capacity: usize,
}

impl Window {
    /// An empty window of a store at `version`.
    pub fn new(version: u64, capacity: usize) -> Self {
        Self {
            changes: VecDeque::new(),
            oldest: version,
            exact_from: version,
            capacity: capacity.max(1),
        }
    }

    /// The store was listed afresh at `version`: states before it can no
    /// longer be told exactly.
    pub fn relisted(&mut self, version: u64) {
        self.exact_from = self.exact_from.max(version);
    }

    /// How the store's state at `version` differs from its state now: each
    /// object changed since, with what it was then (`None`: it did not
    /// exist). `None` when the window no longer tells every change since
    /// `version`.
    pub fn reverted_to(&self, version: u64) -> Option<BTreeMap<String, Option<Arc<Stored>>>> {
        if version < self.oldest.max(self.exact_from) {
            return None;
        }
        let mut then = BTreeMap::new();
        // Newest first, so that the oldest change after `version` tells
        // what the object was at `version`.
        for change in self.changes.iter().rev() {
            if change.version <= version {
                break;
            }
            then.insert(change.object.key(), change.previous.clone());
        }
        Some(then)
    }

    pub fn push(&mut self, change: Arc<Change>) {
        // A change older than one already kept breaks the order reverts
        // rely on (each object's oldest change after a version is found
        // walking back from the newest): no state before the newest kept
        // change is told exactly any more, and a continue page at one goes
        // to the provider instead of showing newer objects.
        if let Some(last) = self.changes.back()
            && change.version < last.version
        {
            self.exact_from = self.exact_from.max(last.version);
        }
        if self.changes.len() == self.capacity
            && let Some(dropped) = self.changes.pop_front()
        {
            self.oldest = self.oldest.max(dropped.version);
        }
        self.changes.push_back(change);
    }

    /// Object `namespace`/`name` as it was at `version`, if a kept change
    /// made or replaced it.
    pub fn find(&self, namespace: &str, name: &str, version: u64) -> Option<Arc<Stored>> {
        self.changes.iter().rev().find_map(|change| {
            let made = (change.kind != ChangeKind::Deleted).then_some(&change.object);
            [made, change.previous.as_ref()]
                .into_iter()
                .flatten()
                .find(|stored| stored.is(namespace, name, version))
                .cloned()
        })
    }

    /// The changes after `version`, oldest first; `None` when some of them
    /// are no longer kept.
    pub fn since(&self, version: u64) -> Option<Vec<Arc<Change>>> {
        if version < self.oldest {
            return None;
        }
        Some(
            self.changes
                .iter()
                .filter(|change| change.version > version)
                .cloned()
                .collect(),
        )
    }
}

/// How a watcher sees a change.
#[derive(Debug)]
pub enum Seen<'a> {
    /// An event of this type with this object.
    Event(&'static str, &'a Arc<Stored>),
    /// The object left the selection: DELETED, with its previous content
    /// at the change's resourceVersion (these bytes).
    Left(Vec<u8>),
}

/// How a watcher selecting `selection` sees `change`, if at all.
pub fn seen_by<'a>(change: &'a Change, selection: &Selection) -> Option<Seen<'a>> {
    let passes =
        |stored: &Stored| selection.selects(&stored.namespace, &stored.name, &stored.labels);
    let now = change.kind != ChangeKind::Deleted && passes(&change.object);
    let before = match (&change.previous, change.kind) {
        (Some(previous), _) => passes(previous),
        // A deletion the store had not seen: judged by the deleted object.
        (None, ChangeKind::Deleted) => passes(&change.object),
        (None, _) => false,
    };
    match (now, before) {
        (true, false) => Some(Seen::Event("ADDED", &change.object)),
        (true, true) => Some(Seen::Event("MODIFIED", &change.object)),
        (false, true) if change.kind == ChangeKind::Deleted => {
            Some(Seen::Event("DELETED", &change.object))
        }
        (false, true) => {
            let previous = change.previous.as_ref()?;
            Some(Seen::Left(with_resource_version(
                &previous.bytes,
                change.version,
            )?))
        }
        (false, false) => None,
    }
}

/// An object's JSON with `metadata.resourceVersion` set to `version`.
fn with_resource_version(bytes: &[u8], version: u64) -> Option<Vec<u8>> {
    let mut object: serde_json::Value = crate::deep::from_slice(bytes).ok()?;
    object
        .get_mut("metadata")?
        .as_object_mut()?
        .insert("resourceVersion".into(), version.to_string().into());
    serde_json::to_vec(&object).ok()
}

/// One watch event line, `{"type":…,"object":…}` and a newline.
pub fn event_line(kind: &str, object: &[u8]) -> Bytes {
    let mut line = Vec::with_capacity(object.len() + 32);
    line.extend_from_slice(b"{\"type\":\"");
    line.extend_from_slice(kind.as_bytes());
    line.extend_from_slice(b"\",\"object\":");
    line.extend_from_slice(object);
    line.extend_from_slice(b"}\n");
    Bytes::from(line)
}

/// A BOOKMARK event line at `version`, as kube-apiserver writes one for a
/// custom resource; `initial_events_end` marks the end of a watch-list's
/// initial events.
pub fn bookmark_line(
    api_version: &str,
    kind: &str,
    version: u64,
    initial_events_end: bool,
) -> Bytes {
    // Keys in Go's order (sorted), as kube-apiserver writes them.
    let metadata = match initial_events_end {
        true => serde_json::json!({
            "annotations": {"k8s.io/initial-events-end": "true"},
            "resourceVersion": version.to_string(),
        }),
        false => serde_json::json!({"resourceVersion": version.to_string()}),
    };
    let object = serde_json::json!({"apiVersion": api_version, "kind": kind, "metadata": metadata});
    event_line(
        "BOOKMARK",
        &serde_json::to_vec(&object).expect("a JSON value serializes"),
    )
}

#[cfg(test)]
mod tests {

    /// A change kept out of order (a relist's, a watch replayed from an
    /// older version) leaves no exact state the window would tell wrong:
    /// a continue page at an earlier version is the provider's to serve.
    #[test]
    fn a_change_kept_out_of_order_ends_exact_reverts_before_it() {
        let stored = |name: &str, version: u64| {
            Arc::new(Stored::of(
                &serde_json::json!({"metadata": {"namespace": "n", "name": name,
                "resourceVersion": version.to_string()}}),
            ))
        };
        let change = |name: &str, version: u64, previous: Option<u64>| {
            Arc::new(Change {
                version,
                kind: if previous.is_some() {
                    ChangeKind::Modified
                } else {
                    ChangeKind::Added
                },
                object: stored(name, version),
                previous: previous.map(|v| stored(name, v)),
            })
        };
        let mut window = Window::new(10, 16);
        window.push(change("d", 11, None));
        window.push(change("c", 13, Some(9)));
        let then = window.reverted_to(10).expect("told exactly");
        assert_eq!(
            then["n/c"].as_ref().map(|c| c.key()),
            Some("n/c".to_string())
        );
        assert!(then["n/d"].is_none());
        // A change at 12 after one at 13: from here on, 10 is not told.
        window.push(change("e", 12, None));
        assert!(window.reverted_to(10).is_none());
        assert!(window.reverted_to(12).is_none());
        assert!(
            window.reverted_to(13).is_some(),
            "the newest state still is"
        );
    }

    use super::*;
    use serde_json::{Value, json};

    fn stored(name: &str, version: u64, app: &str) -> Arc<Stored> {
        Arc::new(Stored::of(
            &json!({"apiVersion": "example.com/v1", "kind": "Widget",
            "metadata": {"namespace": "a", "name": name,
                "resourceVersion": version.to_string(), "labels": {"app": app}}}),
        ))
    }

    fn change(
        kind: ChangeKind,
        version: u64,
        object: Arc<Stored>,
        previous: Option<Arc<Stored>>,
    ) -> Change {
        Change {
            version,
            kind,
            object,
            previous,
        }
    }

    fn selecting(selector: &str) -> Selection {
        Selection::of(Some(selector), None).unwrap()
    }

    fn seen(change: &Change, selector: &str) -> Option<(String, Value)> {
        match seen_by(change, &selecting(selector))? {
            Seen::Event(kind, object) => Some((
                kind.to_string(),
                serde_json::from_slice(&object.bytes).unwrap(),
            )),
            Seen::Left(bytes) => Some(("DELETED".into(), serde_json::from_slice(&bytes).unwrap())),
        }
    }

    #[test]
    fn objects_entering_and_leaving_a_selection_are_added_and_deleted() {
        let db = stored("w", 5, "db");
        let web = stored("w", 6, "web");
        let entered = change(
            ChangeKind::Modified,
            6,
            db.clone(),
            Some(stored("w", 4, "web")),
        );
        assert_eq!(seen(&entered, "app=db").unwrap().0, "ADDED");
        let stayed = change(
            ChangeKind::Modified,
            5,
            db.clone(),
            Some(stored("w", 4, "db")),
        );
        assert_eq!(seen(&stayed, "app=db").unwrap().0, "MODIFIED");
        let left = change(ChangeKind::Modified, 6, web.clone(), Some(db.clone()));
        let (kind, object) = seen(&left, "app=db").unwrap();
        assert_eq!(kind, "DELETED");
        assert_eq!(
            object["metadata"]["labels"]["app"], "db",
            "the object as it was selected"
        );
        assert_eq!(
            object["metadata"]["resourceVersion"], "6",
            "at the change's version"
        );
        assert!(
            seen(&left, "app=other").is_none(),
            "never selected: not seen"
        );
        let created = change(ChangeKind::Added, 5, db.clone(), None);
        assert_eq!(seen(&created, "").unwrap().0, "ADDED");
        assert!(seen(&created, "app=web").is_none());
    }

    #[test]
    fn deletions_are_judged_by_the_object_before_them() {
        let deleted = change(
            ChangeKind::Deleted,
            7,
            stored("w", 7, "db"),
            Some(stored("w", 5, "db")),
        );
        let (kind, object) = seen(&deleted, "app=db").unwrap();
        assert_eq!(
            (kind.as_str(), &object["metadata"]["resourceVersion"]),
            ("DELETED", &json!("7"))
        );
        assert!(seen(&deleted, "app=web").is_none());
        let unseen_before = change(ChangeKind::Deleted, 7, stored("w", 7, "db"), None);
        assert_eq!(seen(&unseen_before, "app=db").unwrap().0, "DELETED");
    }

    #[test]
    fn a_window_answers_only_versions_it_holds_every_change_after() {
        let mut window = Window::new(10, 2);
        for version in [11, 12, 13] {
            window.push(Arc::new(change(
                ChangeKind::Added,
                version,
                stored("w", version, "db"),
                None,
            )));
        }
        let versions = |since: u64| {
            window
                .since(since)
                .map(|changes| changes.iter().map(|c| c.version).collect::<Vec<_>>())
        };
        assert_eq!(versions(10), None, "11 fell out of the window");
        assert_eq!(versions(11), Some(vec![12, 13]));
        assert_eq!(versions(13), Some(vec![]));
        assert_eq!(versions(20), Some(vec![]));
    }

    #[test]
    fn lines_are_json_events() {
        let line = event_line("ADDED", br#"{"a":1}"#);
        assert_eq!(&line[..], b"{\"type\":\"ADDED\",\"object\":{\"a\":1}}\n");
        let bookmark: Value =
            serde_json::from_slice(&bookmark_line("example.com/v1", "Widget", 42, true)).unwrap();
        assert_eq!(
            bookmark,
            json!({"type": "BOOKMARK", "object": {"apiVersion": "example.com/v1", "kind": "Widget",
                "metadata": {"resourceVersion": "42",
                    "annotations": {"k8s.io/initial-events-end": "true"}}}})
        );
    }
}
