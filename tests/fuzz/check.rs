//! What counts as a leak, checked on every answer and every stored object:
//! - a provider namespace name, a cluster namespace, a reserved label key,
//!   an export's identity value, or the consumer's provider account, in any
//!   answer (raw, and decoded from protobuf or YAML), unless the caller sent
//!   it itself;
//! - an object shown to a door that is not that door's consumer's own, as
//!   the provider stores it (looked up by where it must live);
//! - a stored object whose identity is not its namespace's consumer's.

use serde_json::Value;
use std::collections::HashMap;

/// Who a door speaks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Owner {
    /// One consumer (its id).
    Consumer(String),
    /// Every consumer of the export: objects say whose they are.
    Everyone,
}

/// The provider's objects as last listed: (provider namespace, name) →
/// (consumer label, export label).
#[derive(Default)]
pub struct Snapshot {
    pub objects: HashMap<(String, String), (Option<String>, Option<String>)>,
}

/// The world as the checks know it.
pub struct World {
    pub consumers: Vec<String>,
    /// Consumer id → its export's identity label value.
    pub identities: HashMap<String, String>,
    pub prefix: String,
}

impl World {
    /// Everything an answer must not show (unless the caller sent it).
    pub fn forbidden(&self, provider_namespaces: &[String]) -> Vec<String> {
        let mut tokens: Vec<String> = provider_namespaces.to_vec();
        tokens.extend(self.consumers.iter().map(|c| format!("{}{c}", self.prefix)));
        tokens.extend(self.identities.values().cloned());
        tokens.extend([
            "bindery.dev/export".into(),
            "bindery.dev/consumer".into(),
            "kube-binder".into(),
        ]);
        tokens.sort();
        tokens.dedup();
        tokens
    }
}

/// An answer's decoded values (protobuf and YAML decoded to JSON, watch
/// streams split into events), and the text they are in.
pub fn decode(content_type: &str, body: &[u8]) -> Vec<Value> {
    if content_type.starts_with(bindery::wire::protobuf::MEDIA_TYPE) {
        if content_type.contains("stream=watch") {
            let mut stream = bytes::BytesMut::from(body);
            return bindery::wire::protobuf::decode_watch_frames(&mut stream).unwrap_or_default();
        }
        return bindery::wire::protobuf::decode(body).into_iter().collect();
    }
    if content_type.starts_with("application/yaml") {
        return serde_yaml::from_slice::<Value>(body).into_iter().collect();
    }
    if let Ok(value) = serde_json::from_slice::<Value>(body) {
        return vec![value];
    }
    body.split(|b| *b == b'\n')
        .filter(|line| !line.iter().all(u8::is_ascii_whitespace))
        .filter_map(|line| serde_json::from_slice(line).ok())
        .collect()
}

/// The (namespace, name, consumer annotation, event type) of every object
/// an answer shows.
pub fn objects(values: &[Value]) -> Vec<(String, String, Option<String>, Option<String>)> {
    let mut out = Vec::new();
    let mut push = |object: &Value, event: Option<&str>| {
        let metadata = &object["metadata"];
        let Some(name) = metadata["name"].as_str() else {
            return;
        };
        out.push((
            metadata["namespace"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
            name.to_string(),
            metadata["annotations"]["bindery.dev/consumer"]
                .as_str()
                .map(str::to_string),
            event.map(str::to_string),
        ));
    };
    for value in values {
        if let Some(event) = value["type"].as_str() {
            let object = &value["object"];
            if object["kind"] == "Table" {
                for row in object["rows"].as_array().into_iter().flatten() {
                    push(&row["object"], Some(event));
                }
            } else if event != "BOOKMARK" && event != "ERROR" {
                push(object, Some(event));
            }
            continue;
        }
        match value["kind"].as_str().unwrap_or_default() {
            "Status" => {}
            "Table" => {
                for row in value["rows"].as_array().into_iter().flatten() {
                    push(&row["object"], None);
                }
            }
            kind if kind.ends_with("List") => {
                for item in value["items"].as_array().into_iter().flatten() {
                    push(item, None);
                }
            }
            _ => push(value, None),
        }
    }
    out
}

/// The leaks in one answer to `owner`'s door. `sent` is everything the
/// caller sent (path, headers, body), whose echo is no leak.
pub fn leaks(
    forbidden: &[String],
    owner: &Owner,
    sent: &str,
    body: &[u8],
    values: &[Value],
) -> Vec<String> {
    let mut found = Vec::new();
    let mut texts = vec![String::from_utf8_lossy(body).into_owned()];
    texts.extend(
        values
            .iter()
            .map(|v| without_consumer_annotation(v).to_string()),
    );
    for (i, text) in texts.iter().enumerate() {
        // The wildcard door marks objects with an annotation by design:
        // its raw bytes are checked decoded, without it.
        if i == 0 && *owner == Owner::Everyone {
            continue;
        }
        for token in forbidden {
            if text.contains(token.as_str()) && !sent.contains(token.as_str()) {
                found.push(format!("shows {token:?}"));
            }
        }
    }
    found.sort();
    found.dedup();
    found
}

/// A value without the workspace's consumer annotation (by design on the
/// wildcard door, and stripped there from what is checked).
fn without_consumer_annotation(value: &Value) -> Value {
    let mut value = value.clone();
    strip(&mut value);
    value
}

fn strip(value: &mut Value) {
    match value {
        Value::Object(map) => {
            if let Some(Value::Object(annotations)) = map.get_mut("annotations") {
                annotations.shift_remove("bindery.dev/consumer");
            }
            for item in map.values_mut() {
                strip(item);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(strip),
        _ => {}
    }
}

/// Whether an object shown to `owner` is its own as the provider stores it:
/// `Some(problem)` when it is not. `None` also when it cannot be told (a
/// deletion's object, gone since).
pub fn foreign(
    world: &World,
    snapshot: &Snapshot,
    owner: &Owner,
    object: &(String, String, Option<String>, Option<String>),
    deleting: bool,
) -> Option<String> {
    let (namespace, name, annotation, event) = object;
    let consumer = match owner {
        Owner::Consumer(consumer) => consumer.clone(),
        Owner::Everyone => match annotation {
            Some(consumer) => consumer.clone(),
            None => return Some(format!("{namespace}/{name} carries no consumer")),
        },
    };
    let provider_namespace = format!("{}{consumer}-{namespace}", world.prefix);
    match snapshot
        .objects
        .get(&(provider_namespace.clone(), name.clone()))
    {
        Some((Some(label), Some(export)))
            if *label == consumer && world.identities.get(&consumer) == Some(export) =>
        {
            None
        }
        Some(labels) => Some(format!(
            "{namespace}/{name} shown to {consumer} is stored as {labels:?}"
        )),
        None if deleting || event.as_deref() == Some("DELETED") => None,
        None => Some(format!(
            "{namespace}/{name} shown to {consumer} is not in {provider_namespace}"
        )),
    }
}

/// Stored objects whose identity is not their namespace's consumer's.
/// Objects the harness planted (`planted-*`) are the provider's own.
pub fn misstored(world: &World, snapshot: &Snapshot) -> Vec<String> {
    let mut out = Vec::new();
    for ((namespace, name), (consumer, export)) in &snapshot.objects {
        if name.starts_with("planted-") {
            continue;
        }
        let Some(owner) = world
            .consumers
            .iter()
            .find(|c| namespace.starts_with(&format!("{}{c}-", world.prefix)))
        else {
            continue;
        };
        if consumer.as_deref() != Some(owner.as_str())
            || export.as_ref() != world.identities.get(owner)
        {
            out.push(format!(
                "{namespace}/{name} is stored with consumer {consumer:?} and export {export:?}"
            ));
        }
    }
    out
}
