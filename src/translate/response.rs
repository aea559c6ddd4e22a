//! Provider responses into consumer terms: objects, lists, Tables, watch
//! events and `Status` messages. Objects that are not this consumer's
//! export's are dropped; provider namespace names and identity labels never
//! reach the consumer.

use super::binding::BoundResource;
use super::continue_token::ContinueTokens;
use super::objects::{Visibility, object_up};
use serde_json::Value;

/// A response body in consumer terms.
#[derive(Debug, PartialEq)]
pub enum Translated {
    /// The rewritten JSON body.
    Body(Vec<u8>),
    /// Not JSON: sent unchanged.
    Unchanged,
    /// A single object that is not the consumer's: answer 404.
    Hidden,
}

/// Translates a whole (non-watch) response body. `scope` binds continue tokens.
pub fn body_up(
    bound: &BoundResource,
    body: &[u8],
    tokens: &ContinueTokens,
    scope: &str,
) -> Translated {
    let Ok(mut value) = serde_json::from_slice::<Value>(body) else {
        return Translated::Unchanged;
    };
    if value_up(bound, &mut value, tokens, scope) == Visibility::Hidden {
        return Translated::Hidden;
    }
    Translated::Body(serde_json::to_vec(&value).expect("a JSON value serializes"))
}

/// Translates one decoded response value in place.
pub fn value_up(
    bound: &BoundResource,
    value: &mut Value,
    tokens: &ContinueTokens,
    scope: &str,
) -> Visibility {
    let kind = value
        .get("kind")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    match kind.as_str() {
        "Status" => {
            status_up(bound, value);
            Visibility::Visible
        }
        "Table" => {
            if let Some(rows) = value.get_mut("rows").and_then(Value::as_array_mut) {
                rows.retain_mut(|row| match row.get_mut("object") {
                    Some(object) if object.is_object() => {
                        object_up(bound, object, true) == Visibility::Visible
                    }
                    _ => true,
                });
            }
            continue_up(value, tokens, scope);
            Visibility::Visible
        }
        "Scale" => object_up(bound, value, false),
        _ if value.get("items").is_some_and(Value::is_array) => {
            if let Some(items) = value.get_mut("items").and_then(Value::as_array_mut) {
                items.retain_mut(|item| object_up(bound, item, true) == Visibility::Visible);
            }
            continue_up(value, tokens, scope);
            Visibility::Visible
        }
        _ => object_up(bound, value, true),
    }
}

/// Translates one watch event. `None` drops it (an object of another export).
pub fn event_up(
    bound: &BoundResource,
    event: &mut Value,
    tokens: &ContinueTokens,
    scope: &str,
) -> Option<()> {
    let kind = event
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let object = event.get_mut("object")?;
    match kind.as_str() {
        "BOOKMARK" => Some(()),
        "ERROR" => {
            status_up(bound, object);
            Some(())
        }
        _ => (value_up(bound, object, tokens, scope) == Visibility::Visible).then_some(()),
    }
}

fn continue_up(value: &mut Value, tokens: &ContinueTokens, scope: &str) {
    if let Some(Value::String(token)) = value
        .get_mut("metadata")
        .and_then(|m| m.get_mut("continue"))
        && !token.is_empty()
    {
        *token = tokens.seal(scope, token);
    }
}

/// Rewrites a `Status` so that it names consumer namespaces and names only.
pub fn status_up(bound: &BoundResource, status: &mut Value) {
    if let Some(Value::String(message)) = status.get_mut("message") {
        *message = text_up(bound, message);
    }
    let Some(details) = status.get_mut("details").and_then(Value::as_object_mut) else {
        return;
    };
    if let Some(Value::String(name)) = details.get_mut("name") {
        *name = text_up(bound, name);
    }
    if let Some(Value::Array(causes)) = details.get_mut("causes") {
        for cause in causes {
            for field in ["message", "field"] {
                if let Some(Value::String(text)) = cause.get_mut(field) {
                    *text = text_up(bound, text);
                }
            }
        }
    }
}

/// Rewrites free text (error messages): the identity selector bindery added is
/// removed, provider namespaces and prefixed names become consumer ones, and
/// the cluster namespace itself never shows.
pub fn text_up(bound: &BoundResource, text: &str) -> String {
    let selector = bound.identity_selector();
    let mut out = text
        .replace(&format!(",{selector}"), "")
        .replace(&selector, "");
    for (key, value) in bound.identity_labels() {
        out = out.replace(&format!("{key}={value}"), "");
    }
    for (provider, consumer) in bound.namespaces.recorded() {
        out = replace_word(&out, provider, consumer);
    }
    let prefix = format!("{}-", bound.namespaces.cluster_namespace());
    out = strip_prefixed_words(&out, &prefix);
    replace_word(&out, bound.namespaces.cluster_namespace(), "")
}

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '-' || c == '.'
}

/// Replaces whole-word occurrences of `from` (not inside a longer name).
fn replace_word(text: &str, from: &str, to: &str) -> String {
    if from.is_empty() {
        return text.to_string();
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find(from) {
        let before_ok = rest[..i]
            .chars()
            .next_back()
            .is_none_or(|c| !is_name_char(c));
        let after = &rest[i + from.len()..];
        let after_ok = after.chars().next().is_none_or(|c| !is_name_char(c));
        out.push_str(&rest[..i]);
        out.push_str(if before_ok && after_ok { to } else { from });
        rest = after;
    }
    out.push_str(rest);
    out
}

/// Removes `prefix` where it starts a name: `<cluster-ns>-x` becomes `x`.
fn strip_prefixed_words(text: &str, prefix: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find(prefix) {
        let before_ok = rest[..i]
            .chars()
            .next_back()
            .is_none_or(|c| !is_name_char(c));
        out.push_str(&rest[..i]);
        if !before_ok {
            out.push_str(prefix);
        }
        rest = &rest[i + prefix.len()..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::translate::binding::fixtures::widgets;
    use crate::translate::objects::stamp_labels;
    use serde_json::json;

    fn provider_object(bound: &BoundResource, name: &str, ns: &str) -> Value {
        let mut object = json!({"apiVersion": "example.com/v1", "kind": "Widget",
            "metadata": {"name": name, "namespace": ns, "resourceVersion": "5"}});
        stamp_labels(bound, object["metadata"].as_object_mut().unwrap());
        object
    }

    #[test]
    fn lists_drop_foreign_items_and_seal_continue() {
        let w = widgets();
        let mut other = widgets();
        other.identity = crate::translate::IdentityHash::of_secret(b"other");
        let tokens = ContinueTokens::random();
        let list = json!({"kind": "WidgetList", "apiVersion": "example.com/v1",
            "metadata": {"resourceVersion": "9", "continue": "upstream"},
            "items": [provider_object(&w, "a", "kube-bind-c1-ns"), provider_object(&other, "b", "kube-bind-c1-ns"),
                      provider_object(&w, "c", "kube-bind-c2-ns")]});
        let Translated::Body(body) = body_up(&w, &serde_json::to_vec(&list).unwrap(), &tokens, "s")
        else {
            panic!()
        };
        let out: Value = serde_json::from_slice(&body).unwrap();
        let items = out["items"].as_array().unwrap();
        assert_eq!(items.len(), 1);
        assert_eq!(
            items[0]["metadata"],
            json!({"name": "a", "namespace": "ns", "resourceVersion": "5"})
        );
        let token = out["metadata"]["continue"].as_str().unwrap();
        assert_eq!(tokens.open("s", token).as_deref(), Ok("upstream"));
    }

    #[test]
    fn a_foreign_object_is_hidden() {
        let w = widgets();
        let mut other = widgets();
        other.identity = crate::translate::IdentityHash::of_secret(b"other");
        let body = serde_json::to_vec(&provider_object(&other, "a", "kube-bind-c1-ns")).unwrap();
        assert_eq!(
            body_up(&w, &body, &ContinueTokens::random(), "s"),
            Translated::Hidden
        );
        assert_eq!(
            body_up(&w, b"not json", &ContinueTokens::random(), "s"),
            Translated::Unchanged
        );
    }

    #[test]
    fn table_rows_are_filtered_and_mapped() {
        let w = widgets();
        let mut row_object = provider_object(&w, "a", "kube-bind-c1-ns");
        row_object["kind"] = json!("PartialObjectMetadata");
        let mut table = json!({"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": {},
            "columnDefinitions": [], "rows": [{"cells": ["a"], "object": row_object}, {"cells": ["x"], "object": {"metadata": {"name": "x", "namespace": "elsewhere"}}}]});
        assert_eq!(
            value_up(&w, &mut table, &ContinueTokens::random(), "s"),
            Visibility::Visible
        );
        assert_eq!(table["rows"].as_array().unwrap().len(), 1);
        assert_eq!(table["rows"][0]["object"]["metadata"]["namespace"], "ns");
    }

    #[test]
    fn status_messages_name_consumer_namespaces() {
        let mut w = widgets();
        w.namespaces.insert("team", "provider-team-ns");
        let mut status = json!({"kind": "Status", "message":
            "namespaces \"kube-bind-c1-ns\" not found; provider-team-ns; kube-bind-c1",
            "details": {"name": "kube-bind-c1-ns"}});
        status_up(&w, &mut status);
        assert_eq!(status["message"], "namespaces \"ns\" not found; team; ");
        assert_eq!(status["details"]["name"], "ns");

        let text = format!("unable to parse requirement: x,{}", w.identity_selector());
        assert_eq!(text_up(&w, &text), "unable to parse requirement: x");
    }

    #[test]
    fn watch_events() {
        let w = widgets();
        let tokens = ContinueTokens::random();
        let mut added =
            json!({"type": "ADDED", "object": provider_object(&w, "a", "kube-bind-c1-ns")});
        assert_eq!(event_up(&w, &mut added, &tokens, "s"), Some(()));
        assert_eq!(added["object"]["metadata"]["namespace"], "ns");
        let mut foreign =
            json!({"type": "ADDED", "object": {"metadata": {"name": "b", "namespace": "x"}}});
        assert_eq!(event_up(&w, &mut foreign, &tokens, "s"), None);
        let mut bookmark = json!({"type": "BOOKMARK", "object": {"kind": "Widget", "metadata": {"resourceVersion": "7"}}});
        assert_eq!(event_up(&w, &mut bookmark, &tokens, "s"), Some(()));
    }

    proptest::proptest! {
        #[test]
        fn text_rewriting_never_leaks_the_cluster_namespace(words in proptest::collection::vec("[a-z-]{0,6}", 0..6)) {
            let w = widgets();
            let text = words.join(" kube-bind-c1-");
            let out = text_up(&w, &text);
            proptest::prop_assert!(!out.contains("kube-bind-c1-"), "{out}");
        }
    }
}
