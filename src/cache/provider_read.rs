//! The provider's LIST and WATCH bodies as the watch cache reads them: one
//! object at a time, as deep as kube-apiserver stores them
//! ([`crate::deep`]), so that an object bindery cannot read costs that
//! object alone. It is named in a warning and counted, and left out of the
//! cache (a watch event of it takes its older form out), never the reason a
//! whole list fails and is retried, which would keep every consumer of the
//! resource waiting. Pure.

use kube::core::WatchEvent;
use serde::Deserialize;
use serde_json::Value;
use serde_json::value::RawValue;

/// A LIST, its items read.
#[derive(Debug)]
pub struct Listed {
    pub api_version: String,
    /// The list's kind (`WidgetList`).
    pub kind: String,
    pub resource_version: u64,
    pub items: Vec<Value>,
    /// What is known of each item that could not be read (its position,
    /// and its namespace and name where they could be found).
    pub unreadable: Vec<String>,
}

#[derive(Deserialize)]
struct ListBody<'a> {
    #[serde(rename = "apiVersion")]
    api_version: String,
    kind: String,
    metadata: ListMeta,
    #[serde(borrow, default)]
    items: Option<Vec<&'a RawValue>>,
}

#[derive(Deserialize)]
struct ListMeta {
    #[serde(rename = "resourceVersion")]
    resource_version: String,
}

/// Reads a LIST's body; `None` when it is not a list at a version.
pub fn list(body: &str) -> Option<Listed> {
    // Items are skipped, not read, here: serde_json skips without recursion.
    let list: ListBody = serde_json::from_str(body).ok()?;
    let mut listed = Listed {
        api_version: list.api_version,
        kind: list.kind,
        resource_version: list.metadata.resource_version.parse().ok()?,
        items: Vec::new(),
        unreadable: Vec::new(),
    };
    for (position, item) in list.items.unwrap_or_default().into_iter().enumerate() {
        match crate::deep::from_str::<Value>(item.get()) {
            Ok(value) => listed.items.push(value),
            Err(error) => listed.unreadable.push(format!(
                "item {position} ({}): {error}",
                Named::of(item.get()).describe()
            )),
        }
    }
    Some(listed)
}

/// One line of a watch.
#[derive(Debug)]
pub enum Line {
    Event(WatchEvent<Value>),
    /// An event whose object could not be read: the cache takes its older
    /// form out, as if deleted at `version`.
    Unreadable {
        object: Value,
        description: String,
    },
    /// Not a watch event at all.
    Garbage,
}

/// Reads one line of a watch's body.
pub fn watch_line(line: &str) -> Line {
    if let Ok(event) = crate::deep::from_str::<WatchEvent<Value>>(line) {
        return Line::Event(event);
    }
    #[derive(Deserialize)]
    struct Envelope<'a> {
        #[serde(rename = "type")]
        kind: String,
        #[serde(borrow)]
        object: &'a RawValue,
    }
    let Ok(envelope) = serde_json::from_str::<Envelope>(line) else {
        return Line::Garbage;
    };
    let named = Named::of(envelope.object.get());
    let error = crate::deep::from_str::<Value>(envelope.object.get())
        .err()
        .map(|e| e.to_string())
        .unwrap_or_else(|| "not a watch event".into());
    let (Some(name), Some(version)) = (&named.name, &named.resource_version) else {
        return Line::Garbage;
    };
    let mut metadata = serde_json::Map::new();
    if let Some(namespace) = &named.namespace {
        metadata.insert("namespace".into(), namespace.clone().into());
    }
    metadata.insert("name".into(), name.clone().into());
    metadata.insert("resourceVersion".into(), version.clone().into());
    Line::Unreadable {
        object: serde_json::json!({"metadata": metadata}),
        description: format!("{} event of {}: {error}", envelope.kind, named.describe()),
    }
}

/// What can be found of an object that cannot be read whole: its names
/// and version, read without looking into anything else.
#[derive(Debug, Default)]
struct Named {
    namespace: Option<String>,
    name: Option<String>,
    resource_version: Option<String>,
}

impl Named {
    fn of(object: &str) -> Self {
        #[derive(Deserialize)]
        struct Object {
            #[serde(default)]
            metadata: Option<Meta>,
        }
        #[derive(Deserialize)]
        struct Meta {
            namespace: Option<String>,
            name: Option<String>,
            #[serde(rename = "resourceVersion")]
            resource_version: Option<String>,
        }
        // Unknown fields are skipped without recursion, however deep.
        match serde_json::from_str::<Object>(object) {
            Ok(Object {
                metadata: Some(meta),
            }) => Self {
                namespace: meta.namespace,
                name: meta.name,
                resource_version: meta.resource_version,
            },
            _ => Self::default(),
        }
    }

    fn describe(&self) -> String {
        match (&self.namespace, &self.name) {
            (Some(namespace), Some(name)) => format!("{namespace}/{name}"),
            (None, Some(name)) => name.clone(),
            _ => "an object without a name".into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An object nested deeper than bindery reads, under `spec`.
    fn too_deep(name: &str) -> String {
        let levels = crate::deep::MAX_DEPTH + 1;
        format!(
            r#"{{"apiVersion":"example.com/v1","kind":"Widget","metadata":{{"namespace":"a","name":"{name}","resourceVersion":"7"}},"spec":{}{}{}}}"#,
            "[".repeat(levels),
            "1",
            "]".repeat(levels)
        )
    }

    fn on_a_runtime_thread(f: impl FnOnce() + Send + 'static) {
        std::thread::Builder::new()
            .stack_size(crate::deep::THREAD_STACK)
            .spawn(f)
            .unwrap()
            .join()
            .unwrap();
    }

    #[test]
    fn an_unreadable_item_costs_that_item_only() {
        on_a_runtime_thread(|| {
            let body = format!(
                r#"{{"apiVersion":"example.com/v1","kind":"WidgetList","metadata":{{"resourceVersion":"9"}},"items":[{{"metadata":{{"name":"fine"}}}},{},{{"metadata":{{"name":"also"}}}}]}}"#,
                too_deep("deep")
            );
            let listed = list(&body).expect("a list");
            assert_eq!(listed.resource_version, 9);
            assert_eq!(listed.kind, "WidgetList");
            let names: Vec<_> = listed
                .items
                .iter()
                .map(|i| i["metadata"]["name"].as_str().unwrap())
                .collect();
            assert_eq!(names, ["fine", "also"]);
            assert_eq!(listed.unreadable.len(), 1);
            assert!(
                listed.unreadable[0].starts_with("item 1 (a/deep): nested"),
                "{:?}",
                listed.unreadable
            );
        });
    }

    #[test]
    fn an_unreadable_event_takes_its_object_out() {
        on_a_runtime_thread(|| {
            let line = format!(r#"{{"type":"MODIFIED","object":{}}}"#, too_deep("deep"));
            match watch_line(&line) {
                Line::Unreadable {
                    object,
                    description,
                } => {
                    assert_eq!(
                        object,
                        serde_json::json!({"metadata": {"namespace": "a", "name": "deep", "resourceVersion": "7"}})
                    );
                    assert!(description.starts_with("MODIFIED event of a/deep"));
                }
                other => panic!("{other:?}"),
            }
            let readable =
                r#"{"type":"ADDED","object":{"metadata":{"name":"x","resourceVersion":"3"}}}"#;
            assert!(matches!(
                watch_line(readable),
                Line::Event(WatchEvent::Added(_))
            ));
            assert!(matches!(watch_line("{\"type\":"), Line::Garbage));
        });
    }

    #[test]
    fn lists_and_events_at_kube_apiservers_depth_are_read() {
        on_a_runtime_thread(|| {
            let levels = crate::deep::OBJECT_DEPTH - 1;
            let object = format!(
                r#"{{"metadata":{{"name":"deep","resourceVersion":"4"}},"spec":{}null{}}}"#,
                "[".repeat(levels),
                "]".repeat(levels)
            );
            let body = format!(
                r#"{{"apiVersion":"v1","kind":"WidgetList","metadata":{{"resourceVersion":"4"}},"items":[{object}]}}"#
            );
            let listed = list(&body).unwrap();
            assert_eq!((listed.items.len(), listed.unreadable.len()), (1, 0));
            let line = format!(r#"{{"type":"ADDED","object":{object}}}"#);
            assert!(matches!(
                watch_line(&line),
                Line::Event(WatchEvent::Added(_))
            ));
        });
    }
}
