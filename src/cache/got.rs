//! A GET answered with the consumer form the cache already made: when the
//! provider answers a GET with the very version of an object the store
//! holds, the consumer form lists and watches use (made once per change) is
//! the answer, and the provider's body need not be decoded and encoded
//! again. Only the object's identity is read from the body.

use super::reflector::Reflected;
use crate::upstream::Translation;
use bytes::Bytes;
use serde::Deserialize;
use std::borrow::Cow;

/// What a provider object's JSON says it is; every other field is skipped
/// unread.
#[derive(Deserialize)]
struct Identity<'a> {
    #[serde(borrow)]
    metadata: IdentityMetadata<'a>,
}

#[derive(Deserialize)]
struct IdentityMetadata<'a> {
    #[serde(borrow, default)]
    namespace: Option<Cow<'a, str>>,
    #[serde(borrow)]
    name: Cow<'a, str>,
    #[serde(borrow, rename = "resourceVersion")]
    resource_version: Cow<'a, str>,
}

/// `(namespace, name, resourceVersion)` of the object in `body`.
fn identity(body: &[u8]) -> Option<(Cow<'_, str>, Cow<'_, str>, u64)> {
    let object: Identity = crate::deep::from_slice(body).ok()?;
    let metadata = object.metadata;
    let version = metadata.resource_version.parse().ok()?;
    Some((
        metadata.namespace.unwrap_or_default(),
        metadata.name,
        version,
    ))
}

/// The consumer form of `body`, a GET's answer for object
/// `namespace`/`name`, when `reflected` holds the object at the version the
/// body has and `translation` shows it to the consumer.
pub fn translated(
    reflected: &Reflected,
    namespace: &str,
    name: &str,
    body: &[u8],
    translation: &Translation,
) -> Option<Bytes> {
    let (got_namespace, got_name, version) = identity(body)?;
    if got_namespace != namespace || got_name != name {
        return None;
    }
    let stored = reflected
        .read(|store, _| store.object_at(namespace, name, version))
        .flatten()?;
    stored.translated(translation)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_identity_is_read_without_the_rest() {
        let body = br#"{"kind":"Widget","spec":{"deep":[{"a":1}]},"metadata":{"name":"w","namespace":"n","resourceVersion":"42","labels":{"x":"y"}}}"#;
        let (namespace, name, version) = identity(body).unwrap();
        assert_eq!((&*namespace, &*name, version), ("n", "w", 42));
        let cluster_scoped = br#"{"metadata":{"name":"c","resourceVersion":"7"}}"#;
        let (namespace, name, version) = identity(cluster_scoped).unwrap();
        assert_eq!((&*namespace, &*name, version), ("", "c", 7));
        // Escapes in strings are decoded, not compared raw.
        let escaped = br#"{"metadata":{"name":"a\u002db","resourceVersion":"1"}}"#;
        assert_eq!(&*identity(escaped).unwrap().1, "a-b");
    }

    #[test]
    fn bodies_without_an_identity_are_not_objects() {
        for body in [
            &br#"{"kind":"Status","metadata":{},"code":404}"#[..],
            br#"{"metadata":{"name":"w","resourceVersion":"abc"}}"#,
            br#"{"metadata":{"name":"w"}}"#,
            br#"not json"#,
            br#""#,
        ] {
            assert!(
                identity(body).is_none(),
                "{}",
                String::from_utf8_lossy(body)
            );
        }
    }

    #[test]
    fn a_get_of_the_version_the_store_holds_is_answered_with_its_consumer_form() {
        use super::super::store::Store;
        use crate::translate::consumer_view::fixtures::{mine, stamped};
        let object = |version: &str| {
            stamped(
                serde_json::json!({"apiVersion": "example.com/v1", "kind": "Widget",
                "metadata": {"namespace": "a", "name": "w", "resourceVersion": version}}),
            )
        };
        let store = Store::from_list(&serde_json::json!({"apiVersion": "example.com/v1",
            "kind": "WidgetList", "metadata": {"resourceVersion": "9"}, "items": [object("5")]}))
        .unwrap();
        let reflected = super::super::reflector::listed(store);
        let translation = mine(0);
        let body = |version| serde_json::to_vec(&object(version)).unwrap();
        let answer = translated(&reflected, "a", "w", &body("5"), &translation).unwrap();
        let answer: serde_json::Value = serde_json::from_slice(&answer).unwrap();
        assert_eq!(answer["metadata"]["namespace"], "mine", "the consumer form");
        let again = translated(&reflected, "a", "w", &body("5"), &translation).unwrap();
        let kept = translated(&reflected, "a", "w", &body("5"), &translation).unwrap();
        assert_eq!(again.as_ptr(), kept.as_ptr(), "made once per change");
        // Another version, or another object's body, is translated as usual.
        assert!(translated(&reflected, "a", "w", &body("6"), &translation).is_none());
        assert!(translated(&reflected, "a", "x", &body("5"), &translation).is_none());
        assert!(translated(&reflected, "m", "w", &body("5"), &translation).is_none());
    }
}
