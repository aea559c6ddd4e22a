//! What a consistent list holds, learned cheaply from the provider: the same
//! list asked as `PartialObjectMetadataList` in protobuf, which names each
//! object and its resourceVersion, and the list's own version, continue
//! token and remaining count, without the objects' bodies. The watch cache
//! then answers with the bodies it holds for exactly those versions.
//!
//! Why not "learn the provider's current resourceVersion and wait until the
//! cache reaches it": a watch's version moves only with its own resource's
//! events, and with bookmarks kube-apiserver sends each watcher once a minute
//! (`k8s.io/apiserver` v1.34, `cacher/cache_watcher.go`, `nextBookmarkTime`),
//! while the provider's version moves with every write anywhere (leases every
//! few seconds). A quiet resource would make every consistent list wait.
//! Checked object by object instead, the cache has "reached" the list as soon
//! as it holds every listed object at its listed version. Pure.

use bytes::Bytes;
use prost::Message;

/// The Accept header of the probe.
pub const ACCEPT: &str =
    "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1";

/// kube-apiserver's protobuf envelope begins with these bytes.
const MAGIC: &[u8] = b"k8s\0";

/// A list as the provider's metadata tells it.
#[derive(Debug, PartialEq, Eq)]
pub struct ListedVersions {
    pub resource_version: u64,
    pub continue_token: Option<String>,
    pub remaining: Option<u64>,
    /// Each object's (namespace, name, resourceVersion), in list order.
    pub items: Vec<(String, String, u64)>,
}

/// Reads a probe's response body; `None` when it is not a
/// `PartialObjectMetadataList` this reads exactly.
pub fn decode(body: &[u8]) -> Option<ListedVersions> {
    let unknown = Unknown::decode(body.strip_prefix(MAGIC)?).ok()?;
    let kind = unknown.type_meta.as_ref()?.kind.as_deref();
    if kind != Some("PartialObjectMetadataList")
        || unknown
            .content_encoding
            .as_deref()
            .is_some_and(|e| !e.is_empty())
    {
        return None;
    }
    let list = PartialObjectMetadataList::decode(unknown.raw?).ok()?;
    let metadata = list.metadata.unwrap_or_default();
    let items = list
        .items
        .into_iter()
        .map(|item| {
            let meta = item.metadata?;
            Some((
                meta.namespace.unwrap_or_default(),
                meta.name?,
                meta.resource_version?.parse().ok()?,
            ))
        })
        .collect::<Option<_>>()?;
    Some(ListedVersions {
        resource_version: metadata.resource_version?.parse().ok()?,
        continue_token: metadata.continue_token.filter(|t| !t.is_empty()),
        remaining: match metadata.remaining_item_count {
            None => None,
            Some(count) => Some(u64::try_from(count).ok()?),
        },
        items,
    })
}

// The few fields read of `k8s.io/apimachinery`'s messages, with their
// numbers from its `generated.proto` files; prost skips the rest.

#[derive(Clone, PartialEq, Message)]
struct Unknown {
    #[prost(message, optional, tag = "1")]
    type_meta: Option<TypeMeta>,
    #[prost(bytes = "bytes", optional, tag = "2")]
    raw: Option<Bytes>,
    #[prost(string, optional, tag = "3")]
    content_encoding: Option<String>,
}

#[derive(Clone, PartialEq, Message)]
struct TypeMeta {
    #[prost(string, optional, tag = "2")]
    kind: Option<String>,
}

#[derive(Clone, PartialEq, Message)]
struct PartialObjectMetadataList {
    #[prost(message, optional, tag = "1")]
    metadata: Option<ListMeta>,
    #[prost(message, repeated, tag = "2")]
    items: Vec<PartialObjectMetadata>,
}

#[derive(Clone, PartialEq, Message)]
struct ListMeta {
    #[prost(string, optional, tag = "2")]
    resource_version: Option<String>,
    #[prost(string, optional, tag = "3")]
    continue_token: Option<String>,
    #[prost(int64, optional, tag = "4")]
    remaining_item_count: Option<i64>,
}

#[derive(Clone, PartialEq, Message)]
struct PartialObjectMetadata {
    #[prost(message, optional, tag = "1")]
    metadata: Option<ObjectMeta>,
}

#[derive(Clone, PartialEq, Message)]
struct ObjectMeta {
    #[prost(string, optional, tag = "1")]
    name: Option<String>,
    #[prost(string, optional, tag = "3")]
    namespace: Option<String>,
    #[prost(string, optional, tag = "6")]
    resource_version: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// An envelope as kube-apiserver writes one.
    fn envelope(kind: &str, list: &PartialObjectMetadataList) -> Vec<u8> {
        let unknown = Unknown {
            type_meta: Some(TypeMeta {
                kind: Some(kind.into()),
            }),
            raw: Some(Bytes::from(list.encode_to_vec())),
            content_encoding: Some(String::new()),
        };
        [MAGIC, &unknown.encode_to_vec()].concat()
    }

    fn item(namespace: &str, name: &str, version: &str) -> PartialObjectMetadata {
        PartialObjectMetadata {
            metadata: Some(ObjectMeta {
                name: Some(name.into()),
                namespace: Some(namespace.into()),
                resource_version: Some(version.into()),
            }),
        }
    }

    #[test]
    fn a_metadata_list_tells_each_object_and_how_the_list_goes_on() {
        let list = PartialObjectMetadataList {
            metadata: Some(ListMeta {
                resource_version: Some("120".into()),
                continue_token: Some("tok".into()),
                remaining_item_count: Some(3),
            }),
            items: vec![item("a", "w1", "7"), item("a", "w2", "9")],
        };
        assert_eq!(
            decode(&envelope("PartialObjectMetadataList", &list)),
            Some(ListedVersions {
                resource_version: 120,
                continue_token: Some("tok".into()),
                remaining: Some(3),
                items: vec![("a".into(), "w1".into(), 7), ("a".into(), "w2".into(), 9)],
            })
        );
        let whole = PartialObjectMetadataList {
            metadata: Some(ListMeta {
                resource_version: Some("5".into()),
                continue_token: Some(String::new()),
                remaining_item_count: None,
            }),
            items: vec![],
        };
        let decoded = decode(&envelope("PartialObjectMetadataList", &whole)).unwrap();
        assert_eq!(
            (decoded.continue_token, decoded.remaining),
            (None, None),
            "an empty token is no token"
        );
    }

    #[test]
    fn anything_else_is_not_read() {
        let list = PartialObjectMetadataList {
            metadata: Some(ListMeta {
                resource_version: Some("1".into()),
                ..ListMeta::default()
            }),
            items: vec![item("a", "w", "x")],
        };
        let body = envelope("PartialObjectMetadataList", &list);
        assert_eq!(decode(&body), None, "a version that is not a number");
        let status = envelope("Status", &PartialObjectMetadataList::default());
        assert_eq!(decode(&status), None);
        assert_eq!(decode(b"{\"kind\":\"Status\"}"), None, "JSON");
        assert_eq!(decode(&body[MAGIC.len()..]), None, "no magic");
    }

    proptest! {
        #[test]
        fn arbitrary_bodies_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = decode(&bytes);
            let _ = decode(&[MAGIC, &bytes].concat());
        }
    }
}
