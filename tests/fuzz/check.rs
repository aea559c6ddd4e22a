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
    /// Every consumer of one export (their ids): objects say whose they
    /// are, and no other export's consumer's may show.
    Export(Vec<String>),
}

/// Every version of every object the provider has stored since the fuzz
/// began, as its own watch told them: (provider namespace, name,
/// resourceVersion) → (consumer label, export label). An answer may show
/// an object as it was (a page at an old version, a watch from one), so
/// what is shown is checked at the version it carries.
#[derive(Default)]
pub struct History {
    pub versions: HashMap<(String, String, String), Identity>,
}

/// An object version's identity labels.
pub type Identity = (Option<String>, Option<String>);

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
            "bindery-consumer".into(),
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
        return serde_norway::from_slice::<Value>(body)
            .into_iter()
            .collect();
    }
    if let Ok(value) = serde_json::from_slice::<Value>(body) {
        return vec![value];
    }
    body.split(|b| *b == b'\n')
        .filter(|line| !line.iter().all(u8::is_ascii_whitespace))
        .filter_map(|line| serde_json::from_slice(line).ok())
        .collect()
}

/// An object an answer shows: namespace, name, resourceVersion (consumer
/// terms), and the consumer annotation the wildcard door marks it with.
#[derive(Clone, Debug)]
pub struct Shown {
    pub namespace: String,
    pub name: String,
    pub version: String,
    pub annotation: Option<String>,
}

/// Every object an answer shows.
pub fn objects(values: &[Value]) -> Vec<Shown> {
    let mut out = Vec::new();
    let mut push = |object: &Value| {
        let metadata = &object["metadata"];
        let Some(name) = metadata["name"].as_str() else {
            return;
        };
        let text = |v: &Value| v.as_str().unwrap_or_default().to_string();
        out.push(Shown {
            namespace: text(&metadata["namespace"]),
            name: name.to_string(),
            version: text(&metadata["resourceVersion"]),
            annotation: metadata["annotations"]["bindery.dev/consumer"]
                .as_str()
                .map(str::to_string),
        });
    };
    for value in values {
        if let Some(event) = value["type"].as_str() {
            let object = &value["object"];
            if object["kind"] == "Table" {
                for row in object["rows"].as_array().into_iter().flatten() {
                    push(&row["object"]);
                }
            } else if event != "BOOKMARK" && event != "ERROR" {
                push(object);
            }
            continue;
        }
        match value["kind"].as_str().unwrap_or_default() {
            "Status" => {}
            "Table" => {
                for row in value["rows"].as_array().into_iter().flatten() {
                    push(&row["object"]);
                }
            }
            kind if kind.ends_with("List") => {
                for item in value["items"].as_array().into_iter().flatten() {
                    push(item);
                }
            }
            _ => push(value),
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
        if i == 0 && matches!(owner, Owner::Export(_)) {
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

/// Where an object shown to `owner` must be stored: its consumer and
/// provider namespace.
pub fn home(world: &World, owner: &Owner, shown: &Shown) -> Result<(String, String), String> {
    let consumer = match owner {
        Owner::Consumer(consumer) => consumer.clone(),
        Owner::Export(consumers) => match &shown.annotation {
            Some(consumer) if consumers.contains(consumer) => consumer.clone(),
            Some(consumer) => {
                return Err(format!(
                    "{}/{} is another export's consumer's ({consumer})",
                    shown.namespace, shown.name
                ));
            }
            None => {
                return Err(format!(
                    "{}/{} carries no consumer",
                    shown.namespace, shown.name
                ));
            }
        },
    };
    // kube-bind's `<cluster-namespace>-<ns>`, or bindery's name for a
    // namespace too long for that.
    let namespace = bindery::translate::namespaces::fitted_name(
        &format!("{}{consumer}", world.prefix),
        &shown.namespace,
    );
    Ok((consumer, namespace))
}

/// Whether `identity` is `consumer`'s own.
pub fn owned(world: &World, consumer: &str, identity: &Identity) -> bool {
    identity.0.as_deref() == Some(consumer) && identity.1.as_ref() == world.identities.get(consumer)
}

/// Stored versions whose identity is not their namespace's consumer's.
/// Objects the harness planted (`planted-*`) are the provider's own.
pub fn misstored(world: &World, history: &History) -> Vec<String> {
    let mut out = Vec::new();
    for ((namespace, name, version), identity) in &history.versions {
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
        if !owned(world, owner, identity) {
            out.push(format!(
                "{namespace}/{name} at {version} is stored with {identity:?}"
            ));
        }
    }
    out.sort();
    out
}
