//! The objects of one provider resource as the watch cache holds them: each
//! kept serialized once per change (shared bytes) with its labels, ordered
//! by key as kube-apiserver orders its storage (its list order), and the
//! resourceVersion the store has reached. A LIST page is chosen as
//! kube-apiserver's watch cache chooses it, now or at an older version, and
//! answered by joining the selected objects' bytes, with no decoding or
//! encoding per request; every change the store goes through is handed back
//! as a [`Change`] for the watchers. Pure.

use super::query::{CacheableList, ContinueToken, Labels, Selection};
use crate::table::RowParts;
use crate::table::jsonpath::Unsupported;
use crate::upstream::{RowMaker, Rows, Translation};
use bytes::Bytes;
use kube::core::WatchEvent;
use serde_json::Value;
use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::{Arc, Mutex};

/// What happened to an object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChangeKind {
    Added,
    Modified,
    Deleted,
}

/// One change of one object, at one resourceVersion.
#[derive(Debug)]
pub struct Change {
    pub version: u64,
    pub kind: ChangeKind,
    /// The object after the change (for a deletion: as it was deleted).
    pub object: Arc<Stored>,
    /// The object before the change, when the store had it.
    pub previous: Option<Arc<Stored>>,
}

/// One stored object: its provider form, and the consumer form last made
/// from it (with the translation's key; `None` inside: not the consumer's).
#[derive(Debug)]
pub struct Stored {
    pub namespace: String,
    pub name: String,
    pub bytes: Bytes,
    pub labels: Labels,
    version: u64,
    translated: Mutex<Option<(u64, Option<Bytes>)>>,
    /// The Table row last made from the consumer form, with the key of the
    /// translation and row maker it was made under (boxed: most objects
    /// are never shown in a Table).
    row: Mutex<Option<Box<(u64, MadeRow)>>>,
}

/// A row made from an object: `None` when it is not the consumer's.
type MadeRow = Result<Option<Arc<RowParts>>, Unsupported>;

impl Stored {
    /// An object as stored.
    pub fn of(object: &Value) -> Self {
        let (namespace, name) = key_of(object);
        let labels = object["metadata"]["labels"]
            .as_object()
            .into_iter()
            .flatten()
            .filter_map(|(k, v)| Some((k.as_str(), v.as_str()?)))
            .collect();
        Self {
            namespace,
            name,
            bytes: exact(serde_json::to_vec(object).unwrap_or_default()),
            labels,
            version: version_of(object).unwrap_or(0),
            translated: Mutex::new(None),
            row: Mutex::new(None),
        }
    }

    /// Its key in the store.
    pub fn key(&self) -> String {
        object_key(&self.namespace, &self.name)
    }

    /// Whether it is object `namespace`/`name` at `version`.
    pub fn is(&self, namespace: &str, name: &str, version: u64) -> bool {
        self.version == version && self.name == name && self.namespace == namespace
    }

    /// The consumer form under `translation`, made at most once per change
    /// of the object (and per translation key).
    pub fn translated(&self, translation: &Translation) -> Option<Bytes> {
        let mut memo = self.translated.lock().unwrap_or_else(|p| p.into_inner());
        match memo.as_ref() {
            Some((key, made)) if *key == translation.key() => made.clone(),
            _ => {
                let made = translation.item(&self.bytes).map(exact);
                *memo = Some((translation.key(), made.clone()));
                made
            }
        }
    }
}

impl Stored {
    /// The Table row of the consumer form under `translation`, made by
    /// `rows` at most once per change of the object and per `key` (which
    /// names the translation and the row maker together: [`row_key`]).
    pub fn row(&self, key: u64, translation: &Translation, rows: &RowMaker) -> MadeRow {
        {
            let memo = self.row.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(made) = memo.as_ref().filter(|made| made.0 == key) {
                return made.1.clone();
            }
        }
        let made = match self.translated(translation) {
            None => Ok(None),
            Some(consumer) => rows.row(&consumer).map(|row| Some(Arc::new(row))),
        };
        *self.row.lock().unwrap_or_else(|p| p.into_inner()) = Some(Box::new((key, made.clone())));
        made
    }
}

/// The key [`Stored::row`] keeps a row under: `translation`'s and `rows`'.
pub fn row_key(translation: &Translation, rows: &RowMaker) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    (translation.key(), rows.key()).hash(&mut hasher);
    hasher.finish()
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
    objects: BTreeMap<String, Arc<Stored>>,
    /// How many objects carry each (consumer, export) identity label pair:
    /// what a consumer keeps of a resource, for its export's cap.
    owned: std::collections::HashMap<(Box<str>, Box<str>), u64>,
    resource_version: u64,
    api_version: String,
    list_kind: String,
}

impl Store {
    /// A store from a provider LIST; `None` when the list is not one (or
    /// its resourceVersion is not a number).
    pub fn from_list(list: &Value) -> Option<Self> {
        Self::from_listed(super::provider_read::Listed {
            api_version: list["apiVersion"].as_str()?.to_string(),
            kind: list["kind"].as_str()?.to_string(),
            resource_version: list["metadata"]["resourceVersion"].as_str()?.parse().ok()?,
            items: list["items"].as_array()?.clone(),
            unreadable: Vec::new(),
        })
    }

    /// A store from a provider LIST as the reflector reads it; `None` when
    /// the list's kind is not one.
    pub fn from_listed(list: super::provider_read::Listed) -> Option<Self> {
        let mut store = Self {
            objects: BTreeMap::new(),
            owned: std::collections::HashMap::new(),
            resource_version: list.resource_version,
            api_version: list.api_version,
            list_kind: list.kind,
        };
        // Items of a list of built-in objects carry no apiVersion/kind;
        // watch events and GETs do, first, and so does the stored form (a
        // GET's answer may be the consumer form made from it).
        let kind = store.list_kind.strip_suffix("List")?.to_string();
        for mut item in list.items {
            if let Some(object) = item.as_object_mut() {
                if !object.contains_key("apiVersion") {
                    object.shift_insert(0, "apiVersion".into(), store.api_version.clone().into());
                }
                if !object.contains_key("kind") {
                    object.shift_insert(1, "kind".into(), kind.clone().into());
                }
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
                let previous = self.insert(stored.clone());
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
                let (namespace, name) = key_of(object);
                let previous = self.remove(&object_key(&namespace, &name));
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
        self.insert(Arc::new(Stored::of(object)));
    }

    /// Keeps `stored`, counted by its owner; the object it replaces.
    fn insert(&mut self, stored: Arc<Stored>) -> Option<Arc<Stored>> {
        self.count(&stored, true);
        let previous = self.objects.insert(stored.key(), stored);
        if let Some(previous) = &previous {
            self.count(previous, false);
        }
        previous
    }

    /// Drops the object at `key`, counted out.
    fn remove(&mut self, key: &str) -> Option<Arc<Stored>> {
        let previous = self.objects.remove(key);
        if let Some(previous) = &previous {
            self.count(previous, false);
        }
        previous
    }

    fn count(&mut self, stored: &Stored, counted_in: bool) {
        use crate::translate::identity::{CONSUMER_LABEL, EXPORT_LABEL};
        let (Some(consumer), Some(export)) = (
            stored.labels.get(CONSUMER_LABEL),
            stored.labels.get(EXPORT_LABEL),
        ) else {
            return;
        };
        let key = (Box::from(consumer), Box::from(export));
        if counted_in {
            *self.owned.entry(key).or_default() += 1;
        } else if let Some(count) = self.owned.get_mut(&key) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                self.owned.remove(&key);
            }
        }
    }

    /// How many objects carry `consumer`'s and `export`'s identity labels.
    pub fn owned_by(&self, consumer: &str, export: &str) -> u64 {
        self.owned
            .get(&(Box::from(consumer), Box::from(export)))
            .copied()
            .unwrap_or(0)
    }

    /// The changes that lead from this store to `newer` (a fresh list of the
    /// same resource), in resourceVersion order, each at its own version:
    /// what a watcher missed while the store could not follow the provider.
    /// An object changed several times in between shows once, in its newest
    /// form. When a deletion happened is not known, only that it took a
    /// version between the two lists that no listed object has; each is told
    /// at the first such version still free. So a watcher that resumes from
    /// any version it was told misses nothing: no two changes share one.
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
        let taken: std::collections::BTreeSet<u64> = changes.iter().map(|c| c.version).collect();
        let mut free = (self.resource_version + 1..=newer.resource_version)
            .filter(|version| !taken.contains(version));
        for (key, previous) in &self.objects {
            if newer.objects.contains_key(key) {
                continue;
            }
            let Ok(mut object) = crate::deep::from_slice::<Value>(&previous.bytes) else {
                continue;
            };
            let version = free.next().unwrap_or(newer.resource_version);
            if let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) {
                metadata.insert("resourceVersion".into(), version.to_string().into());
            }
            changes.push(Change {
                version,
                kind: ChangeKind::Deleted,
                object: Arc::new(Stored::of(&object)),
                previous: Some(previous.clone()),
            });
        }
        changes.sort_by_key(|change| change.version);
        changes
    }

    /// Object `namespace`/`name`, if the store holds it at `version`.
    pub fn object_at(&self, namespace: &str, name: &str, version: u64) -> Option<Arc<Stored>> {
        self.objects
            .get(&object_key(namespace, name))
            .filter(|stored| stored.version == version)
            .cloned()
    }

    /// The objects `selection` selects in `namespace` (all when `None`), in
    /// list order.
    pub fn selected(&self, namespace: Option<&str>, selection: &Selection) -> Vec<Arc<Stored>> {
        self.scope(namespace, None)
            .map(|(_, stored)| stored)
            .filter(|s| selection.selects(&s.namespace, &s.name, &s.labels))
            .cloned()
            .collect()
    }

    /// The page `list` asks for in `namespace` (all when `None`): of the
    /// store as it is, at `version` (its own), or, given `then` (what
    /// [`super::changes::Window::reverted_to`] told for an older
    /// `version`), as it was at that version. Chosen as kube-apiserver's
    /// watch cache pages: in key order from the token's key, `limit`
    /// selected objects, a token when any object follows, and the count of
    /// those when everything is selected; objects outside the list's scope
    /// are not there at all.
    pub fn page<'s>(
        &'s self,
        namespace: Option<&str>,
        list: &CacheableList,
        version: u64,
        then: Option<&'s Reverted>,
    ) -> Page {
        let start = list.start.as_ref().map(|start| match namespace {
            Some(ns) => format!("{ns}/{start}"),
            None => start.clone(),
        });
        let now = self.scope(namespace, start.as_deref());
        static NOTHING_CHANGED: Reverted = BTreeMap::new();
        let then = scoped(
            then.unwrap_or(&NOTHING_CHANGED),
            namespace,
            start.as_deref(),
        );
        let mut objects = as_it_was(now, then)
            .filter(|stored| list.scope.matches(&stored.labels))
            .peekable();
        let mut page = Page {
            items: Vec::new(),
            version,
            continue_token: None,
            remaining: None,
        };
        while let Some(stored) = objects.next() {
            if list
                .selection
                .selects(&stored.namespace, &stored.name, &stored.labels)
            {
                page.items.push(stored.clone());
            }
            if list.limit == Some(page.items.len() as u64) {
                if objects.peek().is_some() {
                    let last = page.items.last().map(|s| s.key()).unwrap_or_default();
                    let relative = match namespace {
                        Some(ns) => last.strip_prefix(&format!("{ns}/")).unwrap_or(&last),
                        None => &last,
                    };
                    page.continue_token = Some(ContinueToken::after(version, relative));
                    page.remaining = list
                        .selection
                        .is_everything()
                        .then(|| objects.count() as u64);
                }
                break;
            }
        }
        page
    }

    /// How many of `list`'s objects of `namespace` (all when `None`) the
    /// store holds after `page`'s last one, as kube-apiserver's
    /// `remainingItemCount` counts them: `None` when the caller selected
    /// some (kube-apiserver does not count those) or the page is empty.
    pub fn remaining_after(
        &self,
        namespace: Option<&str>,
        list: &CacheableList,
        page: &Page,
    ) -> Option<u64> {
        if !list.selection.is_everything() {
            return None;
        }
        let last = page.items.last()?.key();
        let count = self
            .scope(namespace, Some(&last))
            .filter(|(key, stored)| **key != last && list.scope.matches(&stored.labels))
            .count();
        Some(count as u64)
    }

    /// The objects of `namespace` (all when `None`) in key order, from the
    /// key `from` on.
    fn scope<'a>(
        &'a self,
        namespace: Option<&str>,
        from: Option<&str>,
    ) -> impl Iterator<Item = (&'a String, &'a Arc<Stored>)> + 'a {
        let (prefix, lower) = bounds(namespace, from);
        self.objects
            .range::<str, _>((Bound::Included(lower.as_str()), Bound::Unbounded))
            .take_while(move |(key, _)| key.starts_with(&prefix))
    }

    /// The LIST body of `page`, each object written by `item` (`None`: left
    /// out), its continue token by `token`, as kube-apiserver writes a list
    /// of custom resources (metadata keys in order).
    pub fn list_body(
        &self,
        page: &Page,
        item: impl Fn(&Arc<Stored>) -> Option<Bytes>,
        token: impl Fn(&str) -> String,
    ) -> Vec<u8> {
        let items: Vec<Bytes> = page.items.iter().filter_map(item).collect();
        let size: usize = items.iter().map(|s| s.len() + 1).sum();
        let mut body = Vec::with_capacity(size + 300);
        body.extend_from_slice(b"{\"apiVersion\":");
        body.extend_from_slice(&json_string(&self.api_version));
        body.extend_from_slice(b",\"items\":[");
        for (i, bytes) in items.iter().enumerate() {
            if i > 0 {
                body.push(b',');
            }
            body.extend_from_slice(bytes);
        }
        body.extend_from_slice(b"],\"kind\":");
        body.extend_from_slice(&json_string(&self.list_kind));
        body.extend_from_slice(b",\"metadata\":{\"continue\":");
        let token = page
            .continue_token
            .as_deref()
            .map(token)
            .unwrap_or_default();
        body.extend_from_slice(&json_string(&token));
        if let Some(remaining) = page.remaining {
            body.extend_from_slice(b",\"remainingItemCount\":");
            body.extend_from_slice(remaining.to_string().as_bytes());
        }
        body.extend_from_slice(b",\"resourceVersion\":\"");
        body.extend_from_slice(page.version.to_string().as_bytes());
        body.extend_from_slice(b"\"}}");
        body
    }
}

impl Store {
    /// The rows of `page`, each made by `row` (`Ok(None)`: not the
    /// consumer's, left out as [`Store::list_body`] leaves it out), with the
    /// metadata its list would have; `None` when a row cannot be made.
    pub fn rows(
        &self,
        page: &Page,
        row: impl Fn(&Arc<Stored>) -> MadeRow,
        token: impl Fn(&str) -> String,
    ) -> Option<Rows> {
        let mut rows = Vec::with_capacity(page.items.len());
        for stored in &page.items {
            rows.extend(row(stored).ok()?);
        }
        let mut metadata = serde_json::Map::new();
        let token = page
            .continue_token
            .as_deref()
            .map(token)
            .unwrap_or_default();
        metadata.insert("continue".into(), token.into());
        if let Some(remaining) = page.remaining {
            metadata.insert("remainingItemCount".into(), remaining.into());
        }
        metadata.insert("resourceVersion".into(), page.version.to_string().into());
        Some(Rows { metadata, rows })
    }
}

/// What objects were at an older version, where they differ from now (by
/// key; `None`: absent then).
pub type Reverted = BTreeMap<String, Option<Arc<Stored>>>;

/// One page of a list.
#[derive(Debug)]
pub struct Page {
    pub items: Vec<Arc<Stored>>,
    /// The version the page shows.
    pub version: u64,
    /// kube-apiserver's token for the next page, when objects follow.
    pub continue_token: Option<String>,
    /// How many objects follow, when everything is selected.
    pub remaining: Option<u64>,
}

/// An object's key, ordered as kube-apiserver orders its storage keys:
/// `<namespace>/<name>`, or `<name>` for a cluster-scoped object. (Ordering
/// by the pair instead would put namespace `a` before `a-b`; kube-apiserver
/// lists `a-b/…` first, since `-` sorts before `/`.)
pub fn object_key(namespace: &str, name: &str) -> String {
    if namespace.is_empty() {
        name.to_string()
    } else {
        format!("{namespace}/{name}")
    }
}

/// The key prefix of `namespace` (empty for all) and the key a scan from
/// `from` begins at.
fn bounds(namespace: Option<&str>, from: Option<&str>) -> (String, String) {
    let prefix = namespace.map(|ns| format!("{ns}/")).unwrap_or_default();
    let lower = match from {
        Some(from) if from > prefix.as_str() => from.to_string(),
        _ => prefix.clone(),
    };
    (prefix, lower)
}

/// The part of `then` a scan of `namespace` from `from` covers.
fn scoped<'a>(
    then: &'a Reverted,
    namespace: Option<&str>,
    from: Option<&str>,
) -> impl Iterator<Item = (&'a String, &'a Option<Arc<Stored>>)> + 'a {
    let (prefix, lower) = bounds(namespace, from);
    then.range::<str, _>((Bound::Included(lower.as_str()), Bound::Unbounded))
        .take_while(move |(key, _)| key.starts_with(&prefix))
}

/// The objects as they were: `now`, with the ones in `then` (both in key
/// order) replaced by what they were, or left out when they did not exist.
fn as_it_was<'a>(
    now: impl Iterator<Item = (&'a String, &'a Arc<Stored>)>,
    then: impl Iterator<Item = (&'a String, &'a Option<Arc<Stored>>)>,
) -> impl Iterator<Item = &'a Arc<Stored>> {
    let (mut now, mut then) = (now.peekable(), then.peekable());
    std::iter::from_fn(move || {
        loop {
            let order = match (now.peek(), then.peek()) {
                (None, None) => return None,
                (Some(_), None) => Ordering::Less,
                (None, Some(_)) => Ordering::Greater,
                (Some((n, _)), Some((t, _))) => n.cmp(t),
            };
            match order {
                Ordering::Less => return now.next().map(|(_, stored)| stored),
                // Changed since: what it was replaces it.
                Ordering::Equal => {
                    now.next();
                }
                // Gone since: it comes back.
                Ordering::Greater => {}
            }
            if let Some((_, Some(stored))) = then.next() {
                return Some(stored);
            }
        }
    })
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

/// Bytes that hold `bytes` and no spare capacity (a store keeps them for as
/// long as the object is unchanged).
fn exact(mut bytes: Vec<u8>) -> Bytes {
    bytes.shrink_to_fit();
    Bytes::from(bytes)
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

    #[test]
    fn the_store_counts_each_consumers_objects_through_each_export() {
        let object = |name: &str, consumer: &str, version: u64| {
            json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {
                "namespace": "p", "name": name, "resourceVersion": version.to_string(),
                "labels": {"bindery.dev/consumer": consumer, "bindery.dev/export": "e"}}})
        };
        let mut store = Store::from_list(&json!({"apiVersion": "example.com/v1",
            "kind": "WidgetList", "metadata": {"resourceVersion": "1"},
            "items": [object("a", "c1", 1), object("b", "c2", 1)]}))
        .unwrap();
        assert_eq!(
            (store.owned_by("c1", "e"), store.owned_by("c2", "e")),
            (1, 1)
        );
        store.apply(&event(
            json!({"type": "ADDED", "object": object("c", "c1", 2)}),
        ));
        assert_eq!(store.owned_by("c1", "e"), 2);
        // A change of owner moves the count.
        store.apply(&event(
            json!({"type": "MODIFIED", "object": object("b", "c1", 3)}),
        ));
        assert_eq!(
            (store.owned_by("c1", "e"), store.owned_by("c2", "e")),
            (3, 0)
        );
        store.apply(&event(
            json!({"type": "DELETED", "object": object("a", "c1", 4)}),
        ));
        assert_eq!(store.owned_by("c1", "e"), 2);
        assert_eq!(store.owned_by("c1", "other"), 0);
    }

    fn any() -> CacheableList {
        list(&[("resourceVersion", "0")])
    }

    fn list(pairs: &[(&str, &str)]) -> CacheableList {
        let pairs: Vec<(String, String)> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        CacheableList::of_query(&pairs).expect("a cacheable list")
    }

    /// The body of `list` in `namespace`, now.
    fn listed(store: &Store, namespace: Option<&str>, list: &CacheableList) -> Vec<u8> {
        let page = store.page(namespace, list, store.resource_version(), None);
        store.list_body(&page, |s| Some(s.bytes.clone()), str::to_string)
    }

    fn translated(store: &Store, translation: &Translation) -> Vec<u8> {
        let page = store.page(None, &any(), store.resource_version(), None);
        store.list_body(
            &page,
            |s| s.translated(translation),
            |token| translation.continue_token(token),
        )
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
        let body = listed(&store, None, &any());
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
        assert_eq!(names(&listed(&store, None, &any())), ["a/w0", "a/w2"]);
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
        assert_eq!(names(&listed(&store, Some("a"), &any())), ["a/w2", "a/w3"]);
        let db = list(&[("resourceVersion", "0"), ("labelSelector", "app=db")]);
        assert_eq!(names(&listed(&store, None, &db)), ["a/w3", "ab/w4", "b/w1"]);
        assert_eq!(names(&listed(&store, Some("a"), &db)), ["a/w3"]);
        assert!(names(&listed(&store, Some("c"), &any())).is_empty());
    }

    /// The store of [`store`], with namespace `a`'s objects (and a third,
    /// `a/w3`) consumer `c1`'s, as its export stores them.
    fn stamped_store() -> Store {
        use crate::translate::consumer_view::fixtures::stamped;
        let mut store = store();
        for (name, version) in [("w2", "11"), ("w3", "12")] {
            let object = stamped(widget("a", name, version, json!({})));
            store.apply(&event(json!({"type": "MODIFIED", "object": object})));
        }
        store
    }

    /// Stored object `a/<name>` at `version`.
    fn stored(store: &Store, name: &str, version: u64) -> Arc<Stored> {
        store.object_at("a", name, version).expect("stored")
    }

    /// Where a consumer form's bytes are: the same place when it was kept,
    /// not made again.
    fn made_at(stored: &Stored, translation: &Translation) -> *const u8 {
        stored
            .translated(translation)
            .expect("the consumer's")
            .as_ptr()
    }

    #[test]
    fn each_object_is_translated_once_per_change_and_key() {
        use crate::translate::consumer_view::fixtures::mine;
        let mut store = stamped_store();
        let first = mine(0);
        let body = translated(&store, &first);
        assert_eq!(
            names(&body),
            ["mine/w2", "mine/w3"],
            "only c1's, in its terms"
        );
        let (w2, w3) = (
            made_at(&stored(&store, "w2", 11), &first),
            made_at(&stored(&store, "w3", 12), &first),
        );
        translated(&store, &first);
        assert_eq!(
            (
                made_at(&stored(&store, "w2", 11), &first),
                made_at(&stored(&store, "w3", 12), &first)
            ),
            (w2, w3),
            "nothing changed, nothing redone"
        );
        let changed =
            crate::translate::consumer_view::fixtures::stamped(widget("a", "w2", "13", json!({})));
        store.apply(&event(json!({"type": "MODIFIED", "object": changed})));
        translated(&store, &first);
        assert_eq!(
            made_at(&stored(&store, "w3", 12), &first),
            w3,
            "the unchanged object is not made again"
        );
        let second = mine(1);
        assert_ne!(second.key(), first.key());
        assert_ne!(
            made_at(&stored(&store, "w3", 12), &second),
            w3,
            "another translation makes it again"
        );
        assert_eq!(
            names(&listed(&store, None, &any())),
            ["a/w2", "a/w3", "b/w1"],
            "the provider form is kept"
        );
    }

    /// A Table's rows are made once per change of an object and per key,
    /// from the consumer form; objects not the consumer's are left out, and
    /// a row that cannot be made leaves no rows at all.
    #[test]
    fn each_row_is_made_once_per_change_and_key() {
        use crate::table::Columns;
        use crate::translate::consumer_view::fixtures::{mine, stamped};
        use crate::wire::query::IncludeObject;
        let mut store = stamped_store();
        store.apply(&event(json!({"type": "DELETED",
            "object": stamped(widget("a", "w3", "13", json!({})))})));
        let translation = mine(0);
        let spec = serde_json::from_value(json!({"group": "example.com",
            "names": {"plural": "widgets", "kind": "Widget"}, "scope": "Namespaced",
            "versions": [{"name": "v1", "served": true, "storage": true,
                "additionalPrinterColumns": [{"name": "Size", "type": "number", "jsonPath": ".spec.size"}]}]}))
        .unwrap();
        let columns = Columns::of(&spec, "v1").unwrap();
        let rows = |store: &Store, include| {
            let page = store_page(store);
            let maker = RowMaker {
                columns: &columns,
                include,
            };
            let key = row_key(&translation, &maker);
            store
                .rows(
                    &page,
                    |s| s.row(key, &translation, &maker),
                    |token| translation.continue_token(token),
                )
                .map(|rows| rows.rows)
        };
        let first = rows(&store, IncludeObject::None).unwrap();
        assert_eq!(first.len(), 1, "only namespace a's object");
        let again = rows(&store, IncludeObject::None).unwrap();
        assert!(
            Arc::ptr_eq(&first[0], &again[0]),
            "nothing changed, nothing made"
        );
        let other = rows(&store, IncludeObject::Metadata).unwrap();
        assert!(
            !Arc::ptr_eq(&first[0], &other[0]),
            "another key makes it again"
        );
        store.apply(&event(json!({"type": "MODIFIED",
            "object": stamped(widget("a", "w2", "14", json!({})))})));
        let changed = rows(&store, IncludeObject::Metadata).unwrap();
        assert!(
            !Arc::ptr_eq(&other[0], &changed[0]),
            "a change makes it again"
        );
        // A cell bindery cannot show exactly as Go (a negative zero).
        let mut unshowable = stamped(widget("a", "w2", "15", json!({})));
        unshowable["spec"]["size"] = json!(-0.0);
        store.apply(&event(json!({"type": "MODIFIED", "object": unshowable})));
        assert!(rows(&store, IncludeObject::None).is_none());
        let page = store_page(&store);
        let metadata = store
            .rows(
                &page,
                |_| Ok(None),
                |token| translation.continue_token(token),
            )
            .unwrap()
            .metadata;
        assert_eq!(
            Value::Object(metadata),
            json!({"continue": "", "resourceVersion": "15"})
        );
    }

    fn store_page(store: &Store) -> Page {
        store.page(None, &any(), store.resource_version(), None)
    }

    #[test]
    fn events_hand_back_the_change_with_the_object_before_it() {
        let mut store = store();
        let (_, change) = store.apply(&event(json!({"type": "MODIFIED",
            "object": widget("b", "w1", "11", json!({"app": "web"}))})));
        let change = change.expect("a change");
        assert_eq!((change.version, change.kind), (11, ChangeKind::Modified));
        assert_eq!(
            change.previous.as_ref().unwrap().labels.get("app"),
            Some("db")
        );
        assert_eq!(change.object.labels.get("app"), Some("web"));
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
                (11, ChangeKind::Deleted, "w2".to_string()),
                (12, ChangeKind::Added, "w5".to_string()),
                (14, ChangeKind::Modified, "w1".to_string()),
            ],
            "in version order, each at a version of its own (the deletion at the \
             first one no listed object has), the unchanged object left out"
        );
        let deleted = &old_with_same.changes_to(&newer)[0];
        let object: Value = serde_json::from_slice(&deleted.object.bytes).unwrap();
        assert_eq!(object["metadata"]["resourceVersion"], "11");
        // Versions an object has are never a deletion's: two deletions
        // around an object at 12 take 11 and 13.
        let mut last = widget("c", "w5", "12", json!({}));
        last.as_object_mut().unwrap().remove("kind");
        let tight = Store::from_list(
            &json!({"apiVersion": "example.com/v1", "kind": "WidgetList",
            "metadata": {"resourceVersion": "13"}, "items": [last]}),
        )
        .unwrap();
        let versions: Vec<(u64, ChangeKind)> = store()
            .changes_to(&tight)
            .iter()
            .map(|c| (c.version, c.kind))
            .collect();
        assert_eq!(
            versions,
            [
                (11, ChangeKind::Deleted),
                (12, ChangeKind::Added),
                (13, ChangeKind::Deleted)
            ]
        );
    }

    #[test]
    fn listed_objects_are_stored_as_a_get_answers_them() {
        let get = json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"namespace": "a", "name": "s", "resourceVersion": "7"}, "type": "Opaque"});
        let mut item = get.clone();
        let fields = item.as_object_mut().unwrap();
        fields.shift_remove("apiVersion");
        fields.shift_remove("kind");
        let store = Store::from_list(&json!({"apiVersion": "v1", "kind": "SecretList",
            "metadata": {"resourceVersion": "9"}, "items": [item]}))
        .unwrap();
        let stored = store.object_at("a", "s", 7).unwrap();
        assert_eq!(&stored.bytes[..], &serde_json::to_vec(&get).unwrap()[..]);
    }

    #[test]
    fn lists_without_numeric_versions_are_not_cached() {
        assert!(
            Store::from_list(&json!({"apiVersion": "v1", "kind": "WidgetList",
            "metadata": {"resourceVersion": "abc"}, "items": []}))
            .is_none()
        );
    }

    /// A store of `objects` ((namespace, name, version)) at version 100.
    fn store_of(objects: &[(&str, &str, &str)]) -> Store {
        let items: Vec<Value> = objects
            .iter()
            .map(|(ns, name, version)| widget(ns, name, version, json!({})))
            .collect();
        Store::from_list(
            &json!({"apiVersion": "example.com/v1", "kind": "WidgetList",
            "metadata": {"resourceVersion": "100"}, "items": items}),
        )
        .unwrap()
    }

    fn metadata(body: &[u8]) -> Value {
        serde_json::from_slice::<Value>(body).unwrap()["metadata"].clone()
    }

    #[test]
    fn lists_are_in_kube_apiservers_key_order() {
        // `-` sorts before `/`: kube-apiserver's keys `a-b/x` < `a/x`.
        let store = store_of(&[("a", "x", "1"), ("a-b", "x", "2"), ("a", "y", "3")]);
        assert_eq!(
            names(&listed(&store, None, &any())),
            ["a-b/x", "a/x", "a/y"]
        );
        assert_eq!(names(&listed(&store, Some("a"), &any())), ["a/x", "a/y"]);
    }

    #[test]
    fn a_consistent_page_the_provider_did_not_count_is_counted_by_the_store() {
        let store = store_of(&[
            ("a", "w1", "1"),
            ("a-b", "w2", "2"),
            ("a", "w3", "3"),
            ("b", "w4", "4"),
        ]);
        // The provider's page of two across namespaces: a-b/w2, a/w1.
        let page = store.page(None, &list(&[("limit", "2")]), 100, None);
        let count = |namespace, list: &CacheableList| store.remaining_after(namespace, list, &page);
        assert_eq!(count(None, &any()), Some(2), "a/w3 and b/w4");
        let selected = list(&[("labelSelector", "tier=db")]);
        assert_eq!(
            count(None, &selected),
            None,
            "a selected list is not counted"
        );
        let empty = Page {
            items: Vec::new(),
            version: 100,
            continue_token: None,
            remaining: None,
        };
        assert_eq!(store.remaining_after(None, &any(), &empty), None);
    }

    #[test]
    fn pages_go_on_with_kube_apiservers_tokens_and_counts() {
        let store = store_of(&[
            ("a", "w1", "1"),
            ("a", "w2", "2"),
            ("a", "w3", "3"),
            ("b", "w4", "4"),
        ]);
        let first = list(&[
            ("resourceVersion", "1"),
            ("resourceVersionMatch", "NotOlderThan"),
            ("limit", "2"),
        ]);
        let body = listed(&store, Some("a"), &first);
        assert_eq!(names(&body), ["a/w1", "a/w2"]);
        let meta = metadata(&body);
        assert_eq!(meta["remainingItemCount"], 1);
        assert_eq!(meta["resourceVersion"], "100");
        let token = meta["continue"].as_str().unwrap().to_string();
        assert_eq!(
            ContinueToken::decode(&token),
            Some(ContinueToken {
                version: 100,
                start: "w2\0".into()
            }),
            "relative to the namespace, as kube-apiserver writes it"
        );
        let next = list(&[("limit", "2"), ("continue", &token)]);
        let body = listed(&store, Some("a"), &next);
        assert_eq!(names(&body), ["a/w3"]);
        assert_eq!(
            metadata(&body),
            json!({"continue": "", "resourceVersion": "100"})
        );

        // Across namespaces the token names the namespace too.
        let body = listed(&store, None, &first);
        let token = metadata(&body)["continue"].as_str().unwrap().to_string();
        assert_eq!(ContinueToken::decode(&token).unwrap().start, "a/w2\0");
        let body = listed(&store, None, &list(&[("limit", "5"), ("continue", &token)]));
        assert_eq!(names(&body), ["a/w3", "b/w4"]);

        // A selector: no count, and a token whenever any object follows,
        // selected or not.
        let selected = list(&[
            ("resourceVersion", "0"),
            ("resourceVersionMatch", "NotOlderThan"),
            ("fieldSelector", "metadata.name!=w3"),
        ]);
        assert_eq!(
            names(&listed(&store, None, &selected)),
            ["a/w1", "a/w2", "b/w4"]
        );
        let selected = list(&[
            ("resourceVersion", "5"),
            ("resourceVersionMatch", "NotOlderThan"),
            ("fieldSelector", "metadata.name=w2"),
            ("limit", "1"),
        ]);
        let body = listed(&store, Some("a"), &selected);
        assert_eq!(names(&body), ["a/w2"]);
        let meta = metadata(&body);
        assert!(meta.get("remainingItemCount").is_none(), "{meta}");
        assert_ne!(
            meta["continue"], "",
            "w3 follows, though it is not selected"
        );
        // A limit met by the last object: no token.
        let exact = list(&[
            ("resourceVersion", "5"),
            ("resourceVersionMatch", "NotOlderThan"),
            ("limit", "3"),
        ]);
        assert_eq!(metadata(&listed(&store, Some("a"), &exact))["continue"], "");
    }

    #[test]
    fn objects_outside_the_scope_are_not_counted_or_followed() {
        let mine = json!({"consumer": "me"});
        let items: Vec<Value> = [
            ("a", "w1", &mine),
            ("a", "w2", &mine),
            ("b", "w3", &json!({"consumer": "other"})),
        ]
        .iter()
        .map(|(ns, name, labels)| widget(ns, name, "1", (*labels).clone()))
        .collect();
        let store = Store::from_list(
            &json!({"apiVersion": "example.com/v1", "kind": "WidgetList",
            "metadata": {"resourceVersion": "100"}, "items": items}),
        )
        .unwrap();
        let pairs: Vec<(String, String)> = [
            ("resourceVersion", "1"),
            ("limit", "1"),
            ("labelSelector", "consumer=me"),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let scoped = CacheableList::of_scoped_query(&pairs, Some("consumer=me")).unwrap();
        let body = listed(&store, None, &scoped);
        assert_eq!(names(&body), ["a/w1"]);
        assert_eq!(
            metadata(&body)["remainingItemCount"],
            1,
            "w2 only; w3 is another's"
        );
        let token = metadata(&body)["continue"].as_str().unwrap().to_string();
        let next = CacheableList::of_scoped_query(
            &[
                ("limit".into(), "1".into()),
                ("continue".into(), token),
                ("labelSelector".into(), "consumer=me".into()),
            ],
            Some("consumer=me"),
        )
        .unwrap();
        let body = listed(&store, None, &next);
        assert_eq!(names(&body), ["a/w2"]);
        assert_eq!(
            metadata(&body)["continue"],
            "",
            "nothing of this consumer follows"
        );
    }

    #[test]
    fn a_page_at_an_older_version_shows_the_objects_as_they_were() {
        use super::super::changes::Window;
        let mut store = store_of(&[("a", "w1", "1"), ("a", "w2", "2"), ("a", "w3", "3")]);
        let mut window = Window::new(100, 16);
        for happened in [
            json!({"type": "MODIFIED", "object": widget("a", "w1", "101", json!({"v": "new"}))}),
            json!({"type": "DELETED", "object": widget("a", "w2", "102", json!({}))}),
            json!({"type": "ADDED", "object": widget("a", "w0", "103", json!({}))}),
            json!({"type": "MODIFIED", "object": widget("a", "w1", "104", json!({"v": "newer"}))}),
        ] {
            let (_, change) = store.apply(&event(happened));
            window.push(Arc::new(change.unwrap()));
        }
        let at = |version: u64, pairs: &[(&str, &str)]| {
            let then = window.reverted_to(version).expect("the window tells");
            let page = store.page(Some("a"), &list(pairs), version, Some(&then));
            let versions: Vec<String> = page
                .items
                .iter()
                .map(|s| format!("{}@{}", s.name, s.version))
                .collect();
            (versions, page.continue_token)
        };
        assert_eq!(
            at(
                100,
                &[
                    ("resourceVersion", "100"),
                    ("resourceVersionMatch", "Exact")
                ]
            )
            .0,
            ["w1@1", "w2@2", "w3@3"]
        );
        assert_eq!(
            at(
                101,
                &[
                    ("resourceVersion", "101"),
                    ("resourceVersionMatch", "Exact")
                ]
            )
            .0,
            ["w1@101", "w2@2", "w3@3"]
        );
        assert_eq!(
            at(
                103,
                &[
                    ("resourceVersion", "103"),
                    ("resourceVersionMatch", "Exact")
                ]
            )
            .0,
            ["w0@103", "w1@101", "w3@3"]
        );
        assert_eq!(
            at(
                104,
                &[
                    ("resourceVersion", "104"),
                    ("resourceVersionMatch", "Exact")
                ]
            )
            .0,
            ["w0@103", "w1@104", "w3@3"]
        );
        // Pages of an older version go on at that version.
        let (first, token) = at(101, &[("resourceVersion", "101"), ("limit", "1")]);
        assert_eq!(first, ["w1@101"]);
        let token = token.expect("more follow");
        let (second, _) = at(101, &[("limit", "5"), ("continue", &token)]);
        assert_eq!(second, ["w2@2", "w3@3"], "w2 was there at 101, w0 was not");
        assert!(window.reverted_to(99).is_none(), "before the window");
        window.relisted(104);
        assert!(
            window.reverted_to(103).is_none(),
            "a relist folds what it missed"
        );
        assert!(window.reverted_to(104).is_some());
    }
}
