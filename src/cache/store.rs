//! The objects of one provider resource as the watch cache holds them: each
//! kept serialized once per change (shared bytes) with its labels, ordered
//! by namespace and name (kube-apiserver's list order), and the
//! resourceVersion the store has reached. A LIST is answered by joining the
//! selected objects' bytes, with no decoding or encoding per request; every
//! change the store goes through is handed back as a [`Change`] for the
//! watchers. Pure.

use super::changes::{Change, ChangeKind};
use super::query::CacheableList;
use crate::upstream::Translation;
use bytes::Bytes;
use kube::core::WatchEvent;
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

/// One stored object: its provider form, and the consumer form last made
/// from it (with the translation's key; `None` inside: not the consumer's).
#[derive(Debug)]
pub struct Stored {
    pub namespace: String,
    pub name: String,
    pub bytes: Bytes,
    pub labels: BTreeMap<String, String>,
    version: u64,
    translated: Mutex<Option<(u64, Option<Bytes>)>>,
}

impl Stored {
    /// An object as stored.
    pub fn of(object: &Value) -> Self {
        let (namespace, name) = key_of(object);
        let labels = object["metadata"]["labels"]
            .as_object()
            .into_iter()
            .flatten()
            .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
            .collect();
        Self {
            namespace,
            name,
            bytes: Bytes::from(serde_json::to_vec(object).unwrap_or_default()),
            labels,
            version: version_of(object).unwrap_or(0),
            translated: Mutex::new(None),
        }
    }

    /// The consumer form under `translation`, made at most once per change
    /// of the object (and per translation key).
    pub fn translated(&self, translation: &Translation) -> Option<Bytes> {
        let mut memo = self.translated.lock().unwrap_or_else(|p| p.into_inner());
        match memo.as_ref() {
            Some((key, made)) if *key == translation.key => made.clone(),
            _ => {
                let made = (translation.item)(&self.bytes).map(Bytes::from);
                *memo = Some((translation.key, made.clone()));
                made
            }
        }
    }
}

/// What a watch event did to the store.
#[derive(Debug, PartialEq, Eq)]
pub enum Applied {
    /// The store moved to this resourceVersion.
    Advanced(u64),
    /// The watch ended with an error (410 Gone and the like): relist.
    Relist,
    /// Not understood; ignored.
    Ignored,
}

/// The objects of one resource.
#[derive(Debug)]
pub struct Store {
    objects: BTreeMap<(String, String), Arc<Stored>>,
    resource_version: u64,
    api_version: String,
    list_kind: String,
}

impl Store {
    /// A store from a provider LIST; `None` when the list is not one (or
    /// its resourceVersion is not a number).
    pub fn from_list(list: &Value) -> Option<Self> {
        let resource_version = list["metadata"]["resourceVersion"].as_str()?.parse().ok()?;
        let mut store = Self {
            objects: BTreeMap::new(),
            resource_version,
            api_version: list["apiVersion"].as_str()?.to_string(),
            list_kind: list["kind"].as_str()?.to_string(),
        };
        // Items of a list carry no apiVersion/kind; watch events do.
        let kind = store.list_kind.strip_suffix("List")?.to_string();
        for item in list["items"].as_array()? {
            let mut item = item.clone();
            if let Some(object) = item.as_object_mut() {
                object
                    .entry("apiVersion")
                    .or_insert_with(|| store.api_version.clone().into());
                object.entry("kind").or_insert_with(|| kind.clone().into());
            }
            store.put(&item);
        }
        Some(store)
    }

    pub fn resource_version(&self) -> u64 {
        self.resource_version
    }

    pub fn len(&self) -> usize {
        self.objects.len()
    }

    pub fn is_empty(&self) -> bool {
        self.objects.is_empty()
    }

    /// The resource's apiVersion and kind, as its objects carry them.
    pub fn api_version(&self) -> &str {
        &self.api_version
    }

    pub fn kind(&self) -> &str {
        self.list_kind
            .strip_suffix("List")
            .unwrap_or(&self.list_kind)
    }

    /// Applies one watch event; the change it made, if any.
    pub fn apply(&mut self, event: &WatchEvent<Value>) -> (Applied, Option<Change>) {
        match event {
            WatchEvent::Error(_) => (Applied::Relist, None),
            WatchEvent::Added(object) | WatchEvent::Modified(object) => {
                let Some(version) = version_of(object) else {
                    return (Applied::Ignored, None);
                };
                let stored = Arc::new(Stored::of(object));
                let key = (stored.namespace.clone(), stored.name.clone());
                let previous = self.objects.insert(key, stored.clone());
                let kind = match previous {
                    Some(_) => ChangeKind::Modified,
                    None => ChangeKind::Added,
                };
                let change = Change {
                    version,
                    kind,
                    object: stored,
                    previous,
                };
                (self.advance(version), Some(change))
            }
            WatchEvent::Deleted(object) => {
                let Some(version) = version_of(object) else {
                    return (Applied::Ignored, None);
                };
                let previous = self.objects.remove(&key_of(object));
                let change = Change {
                    version,
                    kind: ChangeKind::Deleted,
                    object: Arc::new(Stored::of(object)),
                    previous,
                };
                (self.advance(version), Some(change))
            }
            WatchEvent::Bookmark(bookmark) => match bookmark.metadata.resource_version.parse() {
                Ok(version) => (self.advance(version), None),
                Err(_) => (Applied::Ignored, None),
            },
        }
    }

    fn advance(&mut self, version: u64) -> Applied {
        self.resource_version = self.resource_version.max(version);
        Applied::Advanced(self.resource_version)
    }

    fn put(&mut self, object: &Value) {
        let stored = Stored::of(object);
        let key = (stored.namespace.clone(), stored.name.clone());
        self.objects.insert(key, Arc::new(stored));
    }

    /// The changes that lead from this store to `newer` (a fresh list of the
    /// same resource), in resourceVersion order: what a watcher missed while
    /// the store could not follow the provider. An object changed several
    /// times in between shows once, in its newest form; deletions come last,
    /// at `newer`'s version.
    pub fn changes_to(&self, newer: &Store) -> Vec<Change> {
        let mut changes: Vec<Change> = newer
            .objects
            .iter()
            .filter_map(|(key, object)| {
                let previous = self.objects.get(key);
                let kind = match previous {
                    None => ChangeKind::Added,
                    Some(previous) if previous.version != object.version => ChangeKind::Modified,
                    Some(_) => return None,
                };
                Some(Change {
                    version: object.version,
                    kind,
                    object: object.clone(),
                    previous: previous.cloned(),
                })
            })
            .collect();
        changes.sort_by_key(|change| change.version);
        for (key, previous) in &self.objects {
            if newer.objects.contains_key(key) {
                continue;
            }
            let Ok(mut object) = serde_json::from_slice::<Value>(&previous.bytes) else {
                continue;
            };
            if let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) {
                metadata.insert(
                    "resourceVersion".into(),
                    newer.resource_version.to_string().into(),
                );
            }
            changes.push(Change {
                version: newer.resource_version,
                kind: ChangeKind::Deleted,
                object: Arc::new(Stored::of(&object)),
                previous: Some(previous.clone()),
            });
        }
        changes
    }

    /// The objects `list` selects in `namespace` (all when `None`), in list
    /// order.
    pub fn selected(&self, namespace: Option<&str>, list: &CacheableList) -> Vec<Arc<Stored>> {
        self.selected_map(namespace, list, |stored| Some(stored.clone()))
    }

    /// The LIST body for `namespace` (all when `None`), as kube-apiserver
    /// writes a list it serves from its watch cache.
    pub fn list_body(&self, namespace: Option<&str>, list: &CacheableList) -> Vec<u8> {
        self.list_body_of(namespace, list, |stored| Some(stored.bytes.clone()))
    }

    /// [`Store::list_body`] with each item in the consumer's terms.
    pub fn translated_list_body(
        &self,
        namespace: Option<&str>,
        list: &CacheableList,
        translation: &Translation,
    ) -> Vec<u8> {
        self.list_body_of(namespace, list, |stored| stored.translated(translation))
    }

    fn selected_map<T>(
        &self,
        namespace: Option<&str>,
        list: &CacheableList,
        item: impl Fn(&Arc<Stored>) -> Option<T>,
    ) -> Vec<T> {
        match namespace {
            Some(ns) => self
                .objects
                .range((ns.to_string(), String::new())..)
                .take_while(|((n, _), _)| n == ns)
                .filter(|((n, name), s)| list.selects(n, name, &s.labels))
                .filter_map(|(_, s)| item(s))
                .collect(),
            None => self
                .objects
                .iter()
                .filter(|((n, name), s)| list.selects(n, name, &s.labels))
                .filter_map(|(_, s)| item(s))
                .collect(),
        }
    }

    fn list_body_of(
        &self,
        namespace: Option<&str>,
        list: &CacheableList,
        item: impl Fn(&Arc<Stored>) -> Option<Bytes>,
    ) -> Vec<u8> {
        let selected = self.selected_map(namespace, list, item);
        let size: usize = selected.iter().map(|s| s.len() + 1).sum();
        let mut body = Vec::with_capacity(size + 200);
        body.extend_from_slice(b"{\"apiVersion\":");
        body.extend_from_slice(&json_string(&self.api_version));
        body.extend_from_slice(b",\"items\":[");
        for (i, bytes) in selected.iter().enumerate() {
            if i > 0 {
                body.push(b',');
            }
            body.extend_from_slice(bytes);
        }
        body.extend_from_slice(b"],\"kind\":");
        body.extend_from_slice(&json_string(&self.list_kind));
        body.extend_from_slice(b",\"metadata\":{\"continue\":\"\",\"resourceVersion\":\"");
        body.extend_from_slice(self.resource_version.to_string().as_bytes());
        body.extend_from_slice(b"\"}}");
        body
    }
}

fn key_of(object: &Value) -> (String, String) {
    let metadata = &object["metadata"];
    (
        metadata["namespace"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
        metadata["name"].as_str().unwrap_or_default().to_string(),
    )
}

fn version_of(object: &Value) -> Option<u64> {
    object["metadata"]["resourceVersion"]
        .as_str()
        .and_then(|v| v.parse::<u64>().ok())
}

fn json_string(s: &str) -> Vec<u8> {
    serde_json::to_vec(s).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn widget(ns: &str, name: &str, version: &str, labels: Value) -> Value {
        json!({"apiVersion": "example.com/v1", "kind": "Widget",
            "metadata": {"namespace": ns, "name": name, "resourceVersion": version, "labels": labels},
            "spec": {"size": 1}})
    }

    fn event(value: Value) -> WatchEvent<Value> {
        serde_json::from_value(value).expect("a watch event")
    }

    fn any() -> CacheableList {
        CacheableList::of_query(&[("resourceVersion".into(), "0".into())]).unwrap()
    }

    fn names(body: &[u8]) -> Vec<String> {
        let list: Value = serde_json::from_slice(body).expect("the body is JSON");
        list["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| {
                format!(
                    "{}/{}",
                    i["metadata"]["namespace"].as_str().unwrap(),
                    i["metadata"]["name"].as_str().unwrap()
                )
            })
            .collect()
    }

    fn store() -> Store {
        let mut b = widget("b", "w1", "5", json!({"app": "db"}));
        let mut a = widget("a", "w2", "6", json!({}));
        for item in [&mut a, &mut b] {
            let object = item.as_object_mut().unwrap();
            object.remove("apiVersion");
            object.remove("kind");
        }
        Store::from_list(
            &json!({"apiVersion": "example.com/v1", "kind": "WidgetList",
            "metadata": {"resourceVersion": "10"}, "items": [b, a]}),
        )
        .unwrap()
    }

    #[test]
    fn a_list_is_kept_in_key_order_with_its_version_and_items_complete() {
        let store = store();
        assert_eq!(store.resource_version(), 10);
        let body = store.list_body(None, &any());
        assert_eq!(names(&body), ["a/w2", "b/w1"]);
        let list: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(list["kind"], "WidgetList");
        assert_eq!(list["metadata"]["resourceVersion"], "10");
        assert_eq!(
            list["metadata"]["continue"], "",
            "as kube-apiserver writes it"
        );
        assert_eq!(list["items"][0]["kind"], "Widget", "items carry their kind");
        assert_eq!(list["items"][0]["apiVersion"], "example.com/v1");
    }

    #[test]
    fn events_change_the_store_and_move_its_version() {
        let mut store = store();
        let added = event(json!({"type": "ADDED", "object": widget("a", "w0", "11", json!({}))}));
        assert_eq!(store.apply(&added).0, Applied::Advanced(11));
        let deleted =
            event(json!({"type": "DELETED", "object": widget("b", "w1", "12", json!({}))}));
        assert_eq!(store.apply(&deleted).0, Applied::Advanced(12));
        let bookmark = event(
            json!({"type": "BOOKMARK", "object": {"apiVersion": "example.com/v1",
            "kind": "Widget", "metadata": {"resourceVersion": "20"}}}),
        );
        assert_eq!(store.apply(&bookmark).0, Applied::Advanced(20));
        assert_eq!(names(&store.list_body(None, &any())), ["a/w0", "a/w2"]);
        let gone = event(json!({"type": "ERROR", "object": {"kind": "Status", "code": 410}}));
        assert_eq!(store.apply(&gone).0, Applied::Relist);
        let unversioned = event(json!({"type": "ADDED", "object": {"metadata": {"name": "x"}}}));
        assert_eq!(store.apply(&unversioned).0, Applied::Ignored);
    }

    #[test]
    fn lists_are_narrowed_by_namespace_and_selectors() {
        let mut store = store();
        store.apply(&event(
            json!({"type": "ADDED", "object": widget("a", "w3", "11", json!({"app": "db"}))}),
        ));
        store.apply(&event(
            json!({"type": "ADDED", "object": widget("ab", "w4", "12", json!({"app": "db"}))}),
        ));
        assert_eq!(names(&store.list_body(Some("a"), &any())), ["a/w2", "a/w3"]);
        let db = CacheableList::of_query(&[
            ("resourceVersion".into(), "0".into()),
            ("labelSelector".into(), "app=db".into()),
        ])
        .unwrap();
        assert_eq!(
            names(&store.list_body(None, &db)),
            ["a/w3", "ab/w4", "b/w1"]
        );
        assert_eq!(names(&store.list_body(Some("a"), &db)), ["a/w3"]);
        assert!(names(&store.list_body(Some("c"), &any())).is_empty());
    }

    #[test]
    fn each_object_is_translated_once_per_change_and_key() {
        use std::sync::Arc;
        use std::sync::atomic::{AtomicUsize, Ordering};
        let mut store = store();
        let calls = Arc::new(AtomicUsize::new(0));
        let translation = |key: u64| {
            let calls = calls.clone();
            Translation {
                key,
                item: Box::new(move |bytes| {
                    calls.fetch_add(1, Ordering::SeqCst);
                    let mut object: Value = serde_json::from_slice(bytes).ok()?;
                    // Only namespace `a` is this consumer's, renamed `mine`.
                    (object["metadata"]["namespace"] == "a").then(|| {
                        object["metadata"]["namespace"] = "mine".into();
                        serde_json::to_vec(&object).unwrap()
                    })
                }),
            }
        };
        let first = translation(1);
        let body = store.translated_list_body(None, &any(), &first);
        assert_eq!(names(&body), ["mine/w2"]);
        assert_eq!(calls.load(Ordering::SeqCst), 2, "both objects once");
        store.translated_list_body(None, &any(), &first);
        assert_eq!(
            calls.load(Ordering::SeqCst),
            2,
            "nothing changed, nothing redone"
        );
        store.apply(&event(json!({"type": "MODIFIED",
            "object": widget("a", "w2", "11", json!({}))})));
        store.translated_list_body(None, &any(), &first);
        assert_eq!(
            calls.load(Ordering::SeqCst),
            3,
            "only the changed object again"
        );
        store.translated_list_body(None, &any(), &translation(2));
        assert_eq!(
            calls.load(Ordering::SeqCst),
            5,
            "another translation redoes all"
        );
        assert_eq!(
            names(&store.list_body(None, &any())),
            ["a/w2", "b/w1"],
            "the provider form is kept"
        );
    }

    #[test]
    fn events_hand_back_the_change_with_the_object_before_it() {
        let mut store = store();
        let (_, change) = store.apply(&event(json!({"type": "MODIFIED",
            "object": widget("b", "w1", "11", json!({"app": "web"}))})));
        let change = change.expect("a change");
        assert_eq!((change.version, change.kind), (11, ChangeKind::Modified));
        assert_eq!(change.previous.as_ref().unwrap().labels["app"], "db");
        assert_eq!(change.object.labels["app"], "web");
        let (_, change) = store.apply(&event(json!({"type": "DELETED",
            "object": widget("a", "w2", "12", json!({}))})));
        let change = change.expect("a change");
        assert_eq!(change.kind, ChangeKind::Deleted);
        assert!(change.previous.is_some(), "the store had it");
        let bookmark = event(
            json!({"type": "BOOKMARK", "object": {"apiVersion": "example.com/v1",
            "kind": "Widget", "metadata": {"resourceVersion": "20"}}}),
        );
        assert!(
            store.apply(&bookmark).1.is_none(),
            "a bookmark changes no object"
        );
    }

    #[test]
    fn a_relist_is_told_as_the_changes_it_makes() {
        let old = store();
        let mut changed = widget("b", "w1", "14", json!({"app": "db"}));
        let mut added = widget("c", "w5", "12", json!({}));
        let mut same = widget("z", "w9", "1", json!({}));
        for item in [&mut changed, &mut added, &mut same] {
            item.as_object_mut().unwrap().remove("kind");
        }
        let mut old_with_same = old;
        old_with_same.put(&widget("z", "w9", "1", json!({})));
        let newer = Store::from_list(
            &json!({"apiVersion": "example.com/v1", "kind": "WidgetList",
            "metadata": {"resourceVersion": "20"}, "items": [changed, added, same]}),
        )
        .unwrap();
        let told: Vec<(u64, ChangeKind, String)> = old_with_same
            .changes_to(&newer)
            .iter()
            .map(|c| (c.version, c.kind, c.object.name.clone()))
            .collect();
        assert_eq!(
            told,
            [
                (12, ChangeKind::Added, "w5".to_string()),
                (14, ChangeKind::Modified, "w1".to_string()),
                (20, ChangeKind::Deleted, "w2".to_string()),
            ],
            "in version order, the unchanged object left out"
        );
        let deleted = &old_with_same.changes_to(&newer)[2];
        let object: Value = serde_json::from_slice(&deleted.object.bytes).unwrap();
        assert_eq!(object["metadata"]["resourceVersion"], "20");
    }

    #[test]
    fn lists_without_numeric_versions_are_not_cached() {
        assert!(
            Store::from_list(&json!({"apiVersion": "v1", "kind": "WidgetList",
            "metadata": {"resourceVersion": "abc"}, "items": []}))
            .is_none()
        );
    }
}
