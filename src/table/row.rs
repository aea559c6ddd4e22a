//! A Table row with its object's metadata (`includeObject=Metadata`,
//! kubectl's default) read in one pass over the item: the parts its cells
//! read, as [`Keep`] keeps them, and its metadata in `ObjectMeta`'s order,
//! each metadata field parsed once for both. Reading the item for its
//! cells, again for its metadata and once more to reorder that cost three
//! passes; this is the Table's hottest loop. Pure.

use super::jsonpath::Unsupported;
use super::pruned::Keep;
use crate::wire::object_meta::ObjectMeta;
use serde::de::{self, IgnoredAny, MapAccess, Visitor};
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::fmt;

/// How to read an item for a row with metadata.
#[derive(Clone, Debug)]
pub struct MetadataRows {
    /// What the cells read outside `metadata`.
    rest: BTreeMap<String, Keep>,
    /// What they read of `metadata`: plain fields of `ObjectMeta` only;
    /// `None` when they read nothing of it.
    metadata: Option<BTreeMap<String, Keep>>,
}

/// One item read for its row.
#[derive(Debug, PartialEq)]
pub struct Read {
    /// What the cells read of it, as [`Keep::decode`] gives it.
    pub kept: Value,
    /// Its metadata as `ObjectMeta` writes it (`{}` when it has none).
    pub metadata: String,
}

impl MetadataRows {
    /// The reader for cells that read `keep`; `None` when they read the
    /// item whole, its metadata whole, or metadata fields other than
    /// `ObjectMeta`'s plain ones (owner references, managed fields).
    pub fn of(keep: &Keep) -> Option<MetadataRows> {
        let mut rest = keep.fields()?.clone();
        let metadata = match rest.remove("metadata") {
            None => None,
            Some(metadata) => {
                let fields = metadata.fields()?;
                if !fields.keys().all(|name| ObjectMeta::is_plain_field(name)) {
                    return None;
                }
                Some(fields.clone())
            }
        };
        Some(MetadataRows { rest, metadata })
    }

    /// `item` (an object's JSON) read for its row.
    pub fn read(&self, item: &str) -> Result<Read, Unsupported> {
        let read = crate::deep::read_str(item, |deserializer| {
            serde::Deserializer::deserialize_map(deserializer, ItemVisitor(self))
        })
        .map_err(|_| Unsupported)?;
        read.map_err(|()| Unsupported)
    }
}

struct ItemVisitor<'r>(&'r MetadataRows);

impl<'de> Visitor<'de> for ItemVisitor<'_> {
    /// `Err` for metadata the struct cannot read or a kept field that fails.
    type Value = Result<Read, ()>;

    fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
        formatter.write_str("an object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut kept = Map::new();
        let mut metadata: Option<Option<ObjectMeta<'de>>> = None;
        while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
            if key == "metadata" {
                if metadata.is_some() {
                    return Err(de::Error::duplicate_field("metadata"));
                }
                metadata = Some(map.next_value()?);
            } else if let Some(keep) = self.0.rest.get(key.as_ref()) {
                let value = map.next_value_seed(keep)?;
                kept.insert(key.into_owned(), value);
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        let written = match &metadata {
            Some(Some(meta)) => match meta.to_json() {
                Some(json) => json,
                None => return Ok(Err(())),
            },
            _ => "{}".into(),
        };
        if let (Some(wanted), Some(found)) = (&self.0.metadata, metadata) {
            let value = match found {
                None => Value::Null,
                Some(meta) => {
                    let mut fields = Map::new();
                    for (name, keep) in wanted {
                        if let Some(Some(raw)) = meta.plain_field(name) {
                            let Ok(value) = keep.decode(raw.get()) else {
                                return Ok(Err(()));
                            };
                            fields.insert(name.clone(), value);
                        }
                    }
                    Value::Object(fields)
                }
            };
            kept.insert("metadata".into(), value);
        }
        Ok(Ok(Read {
            kept: Value::Object(kept),
            metadata: written,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::table::pruned::tests::keep;
    use crate::wire::object_meta::in_struct_order;
    use proptest::prelude::*;
    use serde_json::json;

    /// The three passes this replaces: the kept parts, the metadata found
    /// by a second parse, and that metadata reordered by a third.
    fn three_passes(keep: &Keep, item: &str) -> Result<Read, Unsupported> {
        #[derive(serde::Deserialize)]
        struct ItemMeta<'a> {
            #[serde(borrow, default)]
            metadata: Option<&'a serde_json::value::RawValue>,
        }
        let kept = keep.decode(item).map_err(|_| Unsupported)?;
        let metadata = serde_json::from_str::<ItemMeta>(item)
            .map_err(|_| Unsupported)?
            .metadata;
        let metadata = match metadata {
            Some(raw) => in_struct_order(raw.get()).ok_or(Unsupported)?,
            None => "{}".into(),
        };
        Ok(Read { kept, metadata })
    }

    #[test]
    fn reads_what_the_three_passes_read() {
        let keep = keep(&[
            &["metadata", "name"],
            &["metadata", "creationTimestamp"],
            &["metadata", "labels", "app"],
            &["spec", "size"],
        ]);
        let rows = MetadataRows::of(&keep).unwrap();
        for item in [
            json!({"metadata": {"name": "a", "labels": {"app": "x", "b": "c"},
                "managedFields": [{"time": "t", "manager": "m"}], "zzz": 1,
                "creationTimestamp": "2026-01-01T00:00:00Z"},
                "spec": {"size": 3, "other": [1]}, "status": {}}),
            json!({"spec": {"size": "s"}}),
            json!({"metadata": null, "spec": null}),
            json!({"metadata": {}}),
            json!({"metadata": {"labels": null, "name": null, "creationTimestamp": null}}),
            json!({"metadata": {"labels": {"app": null}}}),
        ] {
            let text = item.to_string();
            assert_eq!(rows.read(&text), three_passes(&keep, &text), "{text}");
        }
        for bad in [
            r#"{"metadata":{"ownerReferences":1}}"#,
            r#"{"metadata":5}"#,
            r#"{"metadata":{},"metadata":{}}"#,
            r#"["not an object"]"#,
            r#"{"spec":{}} trailing"#,
            r#"{"metadata":{"name":"a","name":"b"}}"#,
        ] {
            assert_eq!(rows.read(bad), Err(Unsupported), "{bad}");
            assert_eq!(
                three_passes(&keep, bad).map(|_| ()),
                Err(Unsupported),
                "{bad}"
            );
        }
    }

    #[test]
    fn cells_reading_more_of_metadata_than_its_plain_fields_take_the_three_passes() {
        assert!(MetadataRows::of(&keep(&[&["metadata"]])).is_none());
        assert!(MetadataRows::of(&keep(&[&["metadata", "ownerReferences"]])).is_none());
        assert!(MetadataRows::of(&keep(&[&["metadata", "managedFields"]])).is_none());
        assert!(MetadataRows::of(&keep(&[&["metadata", "unknown"]])).is_none());
        assert!(MetadataRows::of(&keep(&[&[]])).is_none());
        assert!(MetadataRows::of(&keep(&[&["spec"], &["metadata", "labels"]])).is_some());
    }

    fn leaf() -> impl Strategy<Value = Value> {
        prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i32>().prop_map(|n| json!(n)),
            "[a-c]{0,3}".prop_map(Value::String),
        ]
    }

    fn value() -> impl Strategy<Value = Value> {
        leaf().prop_recursive(3, 20, 3, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..3).prop_map(Value::Array),
                proptest::collection::btree_map("[a-c]{1,2}", inner, 0..3)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    fn metadata() -> impl Strategy<Value = Value> {
        let field = prop_oneof![
            Just("name"),
            Just("namespace"),
            Just("labels"),
            Just("annotations"),
            Just("creationTimestamp"),
            Just("finalizers"),
            Just("ownerReferences"),
            Just("managedFields"),
            Just("unknown"),
        ];
        proptest::collection::vec((field, value()), 0..6).prop_map(|fields| {
            Value::Object(
                fields
                    .into_iter()
                    .map(|(k, v)| (k.to_string(), v))
                    .collect(),
            )
        })
    }

    proptest! {
        /// Whatever the item, one pass reads what the three passes read.
        #[test]
        fn one_pass_equals_three(
            meta in prop_oneof![Just(None), Just(Some(Value::Null)), metadata().prop_map(Some)],
            spec in value(),
            paths in proptest::collection::vec(
                prop_oneof![
                    Just(vec!["metadata", "name"]),
                    Just(vec!["metadata", "labels", "a"]),
                    Just(vec!["metadata", "annotations"]),
                    Just(vec!["metadata", "creationTimestamp"]),
                    Just(vec!["spec", "a"]),
                    Just(vec!["spec"]),
                    Just(vec!["status", "b"]),
                ],
                0..4,
            ),
        ) {
            let mut item = Map::new();
            item.insert("spec".into(), spec);
            if let Some(meta) = meta {
                item.insert("metadata".into(), meta);
            }
            let text = Value::Object(item).to_string();
            let paths: Vec<&[&str]> = paths.iter().map(|p| p.as_slice()).collect();
            let keep = keep(&paths);
            let rows = MetadataRows::of(&keep).expect("plain fields only");
            prop_assert_eq!(rows.read(&text), three_passes(&keep, &text));
        }
    }
}
