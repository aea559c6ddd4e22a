//! Reads across providers answered as one: the providers' lists (of the
//! resource, of its metadata, or Tables) joined into one, in the order
//! kube-apiserver lists (by namespace, then name), with a merged
//! resourceVersion; and the providers' watch events interleaved into one
//! stream, each event's object carrying the merged version it brings the
//! stream to, so that a client resumes from any event exactly. Pure.

use super::version::Versions;
use crate::status::ApiError;
use serde_json::{Value, json};

/// The annotation of the bookmark that ends a watch's initial events
/// (`sendInitialEvents`).
pub const INITIAL_EVENTS_END: &str = "k8s.io/initial-events-end";

/// Whether provider `index` owns the object whose metadata (namespace,
/// annotations) is given, now: what a provider holds in a namespace another
/// owns (copies of a namespace being moved there, or the originals once it
/// has moved), or that is routed to another, is not shown. Called only for
/// objects that name a namespace.
pub type Owns<'a> = &'a dyn Fn(usize, &Value) -> bool;

/// The providers' lists `answers` (one per provider, in the router's order)
/// as one list at `versions`, each provider's entries of the namespaces it
/// `owns`.
pub fn lists(answers: Vec<Value>, versions: &Versions, owns: Owns) -> Result<Value, ApiError> {
    let mut answers = answers.into_iter().enumerate();
    let (_, mut merged) = answers
        .next()
        .ok_or_else(|| ApiError::internal("no provider answered"))?;
    let field = field_of(&merged)?;
    let mut entries: Vec<Value> = take(&mut merged, field)
        .into_iter()
        .filter(|entry| owned(entry, field, 0, owns))
        .collect();
    for (index, mut answer) in answers {
        if answer["kind"] != merged["kind"] || answer["apiVersion"] != merged["apiVersion"] {
            return Err(unlike());
        }
        entries.extend(
            take(&mut answer, field)
                .into_iter()
                .filter(|entry| owned(entry, field, index, owns)),
        );
    }
    // A stable sort: rows without their object keep the providers' order.
    entries.sort_by_cached_key(|entry| key_of(entry, field));
    merged[field] = Value::Array(entries);
    list_metadata(&mut merged, versions, None, None);
    Ok(merged)
}

/// Writes `list`'s metadata as kube-apiserver writes it for a list at
/// `versions` continued by `next`: a custom resource's list (unstructured)
/// with its keys sorted and `continue` always there, a `meta.k8s.io` list
/// (a Table, a metadata list) in `ListMeta`'s order with `continue` only
/// when there is more; `remainingItemCount` (the merged list's count,
/// `remaining`) only beside a `continue`.
fn list_metadata(
    list: &mut Value,
    versions: &Versions,
    next: Option<String>,
    remaining: Option<u64>,
) {
    let typed = list["apiVersion"]
        .as_str()
        .is_some_and(|api_version| api_version.starts_with("meta.k8s.io/"));
    let remaining = remaining.filter(|_| next.is_some());
    let mut metadata = serde_json::Map::new();
    if typed {
        metadata.insert("resourceVersion".into(), versions.text().into());
    }
    if next.is_some() || !typed {
        metadata.insert("continue".into(), next.unwrap_or_default().into());
    }
    if let Some(remaining) = remaining {
        metadata.insert("remainingItemCount".into(), remaining.into());
    }
    if !typed {
        metadata.insert("resourceVersion".into(), versions.text().into());
    }
    list["metadata"] = Value::Object(metadata);
}

/// A provider's list `list` emptied of its entries (`items`, or a Table's
/// `rows`): where it kept them, and them.
pub fn entries(list: &mut Value) -> Result<(&'static str, Vec<Value>), ApiError> {
    let field = field_of(list)?;
    Ok((field, take(list, field)))
}

/// A page: `list` (a provider's answer emptied by [`entries`]) holding
/// `page` at `versions`, continued by `next` when there is more, with
/// `remaining` entries after it.
pub fn page(
    mut list: Value,
    field: &str,
    page: Vec<Value>,
    versions: &Versions,
    (next, remaining): (Option<String>, Option<u64>),
) -> Value {
    list[field] = Value::Array(page);
    list_metadata(&mut list, versions, next, remaining);
    list
}

/// `list` (a Table) without its rows' objects, as kube-apiserver writes
/// them for `includeObject=None` (`"object": null`; the router asked for
/// their metadata to place them).
pub fn without_row_objects(list: &mut Value) {
    if list["kind"] != "Table" {
        return;
    }
    for row in list["rows"].as_array_mut().into_iter().flatten() {
        if let Some(object) = row.get_mut("object") {
            *object = Value::Null;
        }
    }
}

/// Whether provider `index`'s `entry` is in a namespace it owns.
pub fn is_owned(entry: &Value, field: &str, index: usize, owns: Owns) -> bool {
    owned(entry, field, index, owns)
}

/// Where a list keeps its entries: `rows` of a Table, `items` of a list.
fn field_of(list: &Value) -> Result<&'static str, ApiError> {
    match list["kind"].as_str() {
        Some("Table") if list["rows"].is_array() || list["rows"].is_null() => Ok("rows"),
        Some(kind)
            if kind.ends_with("List") && (list["items"].is_array() || list["items"].is_null()) =>
        {
            Ok("items")
        }
        _ => Err(unlike()),
    }
}

/// Whether an entry of provider `index` is in a namespace it owns (an
/// entry that names no namespace is kept: a Table row without its object).
fn owned(entry: &Value, field: &str, index: usize, owns: Owns) -> bool {
    let metadata = match field {
        "rows" => &entry["object"]["metadata"],
        _ => &entry["metadata"],
    };
    metadata["namespace"].as_str().is_none() || owns(index, metadata)
}

fn take(list: &mut Value, field: &str) -> Vec<Value> {
    match list.get_mut(field).map(Value::take) {
        Some(Value::Array(entries)) => entries,
        _ => Vec::new(),
    }
}

/// The key kube-apiserver lists in, its storage key's tail
/// `<namespace>/<name>` (a Table row's object's, when it has one), compared
/// byte by byte: `conf-a/x` before `conf/x`, as `-` sorts before `/`.
pub fn key_of(entry: &Value, field: &str) -> Option<String> {
    let metadata = match field {
        "rows" => &entry["object"]["metadata"],
        _ => &entry["metadata"],
    };
    let name = metadata["name"].as_str()?;
    Some(match metadata["namespace"].as_str() {
        Some(namespace) if !namespace.is_empty() => format!("{namespace}/{name}"),
        _ => name.to_string(),
    })
}

fn unlike() -> ApiError {
    ApiError::internal("the providers answered a list in different forms")
}

/// The providers' watches, interleaved: what each of their events becomes
/// in the one stream.
#[derive(Debug)]
pub struct Watches {
    versions: Versions,
    /// Which providers have ended their initial events, for a watch asked
    /// for them (`sendInitialEvents`); `None` otherwise.
    initial_ended: Option<Vec<bool>>,
}

impl Watches {
    /// A watch across providers from `versions`, waiting for every
    /// provider's end of initial events when `initial_events` was asked.
    pub fn new(versions: Versions, providers: usize, initial_events: bool) -> Self {
        Self {
            versions,
            initial_ended: initial_events.then(|| vec![false; providers]),
        }
    }

    /// The event provider `index` sent, as the client gets it: its
    /// object's version is the merged one it brings the stream to. A
    /// provider's end of initial events is held until every provider has
    /// sent its own, and then sent once. An object of a namespace the
    /// provider does not own moves the versions on, and is not shown.
    /// `None`: nothing to send for it.
    pub fn event(&mut self, index: usize, mut event: Value, owns: Owns) -> Option<Value> {
        let kind = event["type"].as_str().unwrap_or_default().to_string();
        if kind == "ERROR" {
            return Some(event);
        }
        let object = event.get_mut("object")?;
        let own = object["metadata"]["resourceVersion"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        self.versions.advance(index, &own);
        if object["metadata"]["namespace"].is_string() && !owns(index, &object["metadata"]) {
            return None;
        }
        let ends_initial =
            kind == "BOOKMARK" && object["metadata"]["annotations"][INITIAL_EVENTS_END] == "true";
        if ends_initial && let Some(ended) = self.initial_ended.as_mut() {
            if let Some(slot) = ended.get_mut(index) {
                *slot = true;
            }
            if !ended.iter().all(|done| *done) {
                return None;
            }
            self.initial_ended = None;
        }
        if let Some(metadata) = object
            .as_object_mut()
            .map(|object| object.entry("metadata").or_insert_with(|| json!({})))
            .and_then(Value::as_object_mut)
        {
            metadata.insert("resourceVersion".into(), self.versions.text().into());
        }
        Some(event)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: Owns = &|_, _| true;

    fn item(namespace: &str, name: &str, version: &str) -> Value {
        json!({"metadata": {"namespace": namespace, "name": name, "resourceVersion": version}})
    }

    fn list(items: Vec<Value>, version: &str) -> Value {
        json!({"kind": "WidgetList", "apiVersion": "example.com/v1",
            "metadata": {"resourceVersion": version, "continue": "x", "remainingItemCount": 1},
            "items": items})
    }

    #[test]
    fn lists_join_in_namespace_then_name_order_at_the_merged_version() {
        let east = list(vec![item("a", "x", "5"), item("c", "a", "6")], "9");
        let west = list(vec![item("b", "z", "70"), item("a", "y", "71")], "80");
        let versions = Versions::parse("9.80", 2).expect("versions");
        let merged = lists(vec![east, west], &versions, &|_, _| true).expect("merged");
        let names: Vec<String> = merged["items"]
            .as_array()
            .expect("items")
            .iter()
            .map(|i| {
                format!(
                    "{}/{}",
                    i["metadata"]["namespace"].as_str().unwrap(),
                    i["metadata"]["name"].as_str().unwrap()
                )
            })
            .collect();
        assert_eq!(names, ["a/x", "a/y", "b/z", "c/a"]);
        // A custom resource's list: keys sorted, `continue` always.
        assert_eq!(
            merged["metadata"].to_string(),
            r#"{"continue":"","resourceVersion":"9.80"}"#
        );
        // Each object keeps its own provider's version: a write with it goes
        // to that provider.
        assert_eq!(merged["items"][1]["metadata"]["resourceVersion"], "71");
    }

    #[test]
    fn lists_join_in_kube_apiservers_key_order_where_a_namespace_prefixes_another() {
        let east = list(vec![item("conf", "x", "5")], "9");
        let west = list(
            vec![item("conf-a", "x", "70"), item("conf2", "a", "71")],
            "80",
        );
        let versions = Versions::parse("9.80", 2).expect("versions");
        let merged = lists(vec![east, west], &versions, ALL).expect("merged");
        let namespaces: Vec<&str> = merged["items"]
            .as_array()
            .expect("items")
            .iter()
            .filter_map(|i| i["metadata"]["namespace"].as_str())
            .collect();
        assert_eq!(namespaces, ["conf-a", "conf", "conf2"]);
    }

    #[test]
    fn what_a_provider_holds_in_a_namespace_it_does_not_own_is_not_shown() {
        // "moving" belongs to east (0); west (1) holds copies made there.
        let owns: Owns = &|index, metadata| metadata["namespace"] != "moving" || index == 0;
        let east = list(vec![item("moving", "x", "5")], "9");
        let west = list(vec![item("moving", "x", "70"), item("b", "y", "71")], "80");
        let merged = lists(vec![east, west], &Versions::all("0", 2), owns).expect("merged");
        let versions: Vec<&str> = merged["items"]
            .as_array()
            .expect("items")
            .iter()
            .filter_map(|i| i["metadata"]["resourceVersion"].as_str())
            .collect();
        assert_eq!(versions, ["71", "5"]);
        let mut watches = Watches::new(Versions::all("0", 2), 2, false);
        let copy = json!({"type": "ADDED", "object": {"metadata":
            {"namespace": "moving", "name": "x", "resourceVersion": "72"}}});
        assert_eq!(watches.event(1, copy, owns), None);
        let other = watches.event(1, event("ADDED", "73"), owns).expect("shown");
        assert_eq!(
            other["object"]["metadata"]["resourceVersion"], "0.73",
            "moved on past the copy"
        );
    }

    #[test]
    fn a_pages_metadata_is_written_in_the_order_of_its_kind_of_list() {
        let versions = Versions::parse("9.80", 2).expect("versions");
        let table = json!({"kind": "Table", "apiVersion": "meta.k8s.io/v1",
            "metadata": {"continue": "x", "resourceVersion": "1", "remainingItemCount": 3}});
        let next = Some("next".to_string());
        let typed = page(
            table.clone(),
            "rows",
            vec![],
            &versions,
            (next.clone(), Some(2)),
        );
        assert_eq!(
            typed["metadata"].to_string(),
            r#"{"resourceVersion":"9.80","continue":"next","remainingItemCount":2}"#
        );
        let last = page(table, "rows", vec![], &versions, (None, Some(2)));
        assert_eq!(
            last["metadata"].to_string(),
            r#"{"resourceVersion":"9.80"}"#
        );
        let custom = page(
            list(vec![], "1"),
            "items",
            vec![],
            &versions,
            (next, Some(3)),
        );
        assert_eq!(
            custom["metadata"].to_string(),
            r#"{"continue":"next","remainingItemCount":3,"resourceVersion":"9.80"}"#
        );
    }

    #[test]
    fn rows_lose_their_objects_when_none_were_asked() {
        let mut table = json!({"kind": "Table", "apiVersion": "meta.k8s.io/v1",
            "rows": [{"cells": ["a"], "object": {"metadata": {"name": "a"}}}]});
        without_row_objects(&mut table);
        assert_eq!(table["rows"], json!([{"cells": ["a"], "object": null}]));
        let mut list = json!({"kind": "WidgetList", "items": [{"object": 1}]});
        without_row_objects(&mut list);
        assert_eq!(list["items"], json!([{"object": 1}]), "only a Table's rows");
    }

    #[test]
    fn tables_join_their_rows_by_the_rows_objects() {
        let table = |rows: Vec<Value>| {
            json!({"kind": "Table", "apiVersion": "meta.k8s.io/v1",
            "metadata": {"resourceVersion": "1"}, "columnDefinitions": [{"name": "Name"}], "rows": rows})
        };
        let row = |ns: &str, name: &str| json!({"cells": [name], "object": item(ns, name, "1")});
        let merged = lists(
            vec![table(vec![row("b", "q")]), table(vec![row("a", "p")])],
            &Versions::parse("1.1", 2).expect("versions"),
            &|_, _| true,
        )
        .expect("merged");
        assert_eq!(merged["rows"][0]["cells"], json!(["p"]));
        assert_eq!(merged["columnDefinitions"], json!([{"name": "Name"}]));
    }

    #[test]
    fn lists_of_different_forms_are_refused() {
        let table = json!({"kind": "Table", "apiVersion": "meta.k8s.io/v1", "rows": []});
        let error = lists(
            vec![list(vec![], "1"), table],
            &Versions::all("0", 2),
            &|_, _| true,
        )
        .expect_err("a list and a Table");
        assert_eq!(error.code, 500);
        assert!(
            lists(
                vec![json!({"kind": "Status"})],
                &Versions::all("0", 1),
                &|_, _| true
            )
            .is_err()
        );
    }

    fn event(kind: &str, version: &str) -> Value {
        json!({"type": kind, "object": {"metadata": {"name": "n", "resourceVersion": version}}})
    }

    #[test]
    fn each_event_carries_the_version_it_brings_the_stream_to() {
        let mut watches = Watches::new(Versions::parse("10.20", 2).expect("v"), 2, false);
        let first = watches.event(1, event("ADDED", "21"), ALL).expect("sent");
        assert_eq!(first["object"]["metadata"]["resourceVersion"], "10.21");
        let second = watches
            .event(0, event("MODIFIED", "11"), ALL)
            .expect("sent");
        assert_eq!(second["object"]["metadata"]["resourceVersion"], "11.21");
        let error = json!({"type": "ERROR", "object": {"kind": "Status", "code": 410}});
        assert_eq!(watches.event(0, error.clone(), ALL), Some(error));
    }

    #[test]
    fn the_end_of_initial_events_is_sent_once_every_provider_has_ended_them() {
        let end = |version: &str| {
            json!({"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": version,
                "annotations": {INITIAL_EVENTS_END: "true"}}}})
        };
        let mut watches = Watches::new(Versions::all("0", 2), 2, true);
        assert!(watches.event(0, event("ADDED", "3"), ALL).is_some());
        assert_eq!(
            watches.event(0, end("7"), ALL),
            None,
            "held for the other provider"
        );
        assert!(watches.event(1, event("ADDED", "40"), ALL).is_some());
        let ended = watches.event(1, end("44"), ALL).expect("both ended");
        assert_eq!(ended["object"]["metadata"]["resourceVersion"], "7.44");
        assert_eq!(
            ended["object"]["metadata"]["annotations"][INITIAL_EVENTS_END],
            "true"
        );
    }
}
