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
    let object: Identity = serde_json::from_slice(body).ok()?;
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
    translation: &(dyn Fn() -> Translation + Send + Sync),
) -> Option<Bytes> {
    let (got_namespace, got_name, version) = identity(body)?;
    if got_namespace != namespace || got_name != name {
        return None;
    }
    let stored = reflected
        .read(|store, _| store.object_at(namespace, name, version))
        .flatten()?;
    stored.translated(&translation())
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
}
