//! Decoding only what a Table's columns read of an object: the fields on
//! the way to each column's value, and the whole value below the first step
//! that is not a plain field (an index, `[*]`, a filter). Everything else is
//! skipped while parsing, so a row costs a pass over the object's bytes
//! rather than building all of it. A column finds in the pruned object
//! exactly what it finds in the whole one. Pure.

use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};
use std::collections::BTreeMap;
use std::fmt;

/// The parts of an object to keep.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Keep {
    /// Kept fields of an object, and what to keep of each; `None`: the
    /// whole value.
    fields: Option<BTreeMap<String, Keep>>,
}

impl Keep {
    /// Keeps nothing of an object but what [`Keep::add`] names.
    pub fn nothing() -> Keep {
        Keep {
            fields: Some(BTreeMap::new()),
        }
    }

    /// Keeps the whole value at `keys` (from the root; no keys: all of it).
    pub fn add(&mut self, keys: &[String]) {
        let Some(fields) = &mut self.fields else {
            return; // already kept whole
        };
        match keys.split_first() {
            None => self.fields = None,
            Some((first, rest)) => fields
                .entry(first.clone())
                .or_insert_with(Keep::nothing)
                .add(rest),
        }
    }

    /// What is kept of each field of an object; `None` when all of it is.
    pub fn fields(&self) -> Option<&BTreeMap<String, Keep>> {
        self.fields.as_ref()
    }

    /// `json`, with only the kept parts; an error when it is not JSON.
    pub fn decode(&self, json: &str) -> Result<Value, serde_json::Error> {
        crate::deep::read_str(json, |deserializer| self.deserialize(deserializer))
    }
}

impl<'de> DeserializeSeed<'de> for &Keep {
    type Value = Value;

    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        match &self.fields {
            None => serde::Deserialize::deserialize(deserializer),
            Some(fields) => deserializer.deserialize_any(Pruning(fields)),
        }
    }
}

/// Reads one value keeping `fields` of it if it is an object, all of it
/// otherwise (as `serde_json::Value` reads it).
struct Pruning<'k>(&'k BTreeMap<String, Keep>);

impl<'de> Visitor<'de> for Pruning<'_> {
    type Value = Value;

    fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
        formatter.write_str("any JSON value")
    }

    fn visit_bool<E>(self, value: bool) -> Result<Value, E> {
        Ok(Value::Bool(value))
    }

    fn visit_i64<E>(self, value: i64) -> Result<Value, E> {
        Ok(Value::Number(value.into()))
    }

    fn visit_u64<E>(self, value: u64) -> Result<Value, E> {
        Ok(Value::Number(value.into()))
    }

    fn visit_f64<E>(self, value: f64) -> Result<Value, E> {
        Ok(Number::from_f64(value).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E>(self, value: &str) -> Result<Value, E> {
        Ok(Value::String(value.to_string()))
    }

    fn visit_string<E>(self, value: String) -> Result<Value, E> {
        Ok(Value::String(value))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_some<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        serde::Deserialize::deserialize(deserializer)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element()? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut kept = Map::new();
        while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
            match self.0.get(key.as_ref()) {
                Some(keep) => {
                    let value = map.next_value_seed(keep)?;
                    kept.insert(key.into_owned(), value);
                }
                None => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(Value::Object(kept))
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    /// Keeps the parts at `paths`.
    pub(crate) fn keep(paths: &[&[&str]]) -> Keep {
        let mut keep = Keep::nothing();
        for path in paths {
            keep.add(&path.iter().map(|k| k.to_string()).collect::<Vec<_>>());
        }
        keep
    }

    #[test]
    fn only_the_named_parts_are_kept_and_below_them_everything() {
        let object = json!({
            "metadata": {"name": "w", "labels": {"a": "b"}, "managedFields": [{"x": 1}]},
            "spec": {"plan": {"size": 3, "deep": [1, {"k": null}]}, "other": 1.5},
            "status": "not an object",
        });
        let text = object.to_string();
        let pruned = keep(&[
            &["metadata", "name"],
            &["spec", "plan"],
            &["status", "phase"],
        ])
        .decode(&text)
        .unwrap();
        assert_eq!(
            pruned,
            json!({
                "metadata": {"name": "w"},
                "spec": {"plan": {"size": 3, "deep": [1, {"k": null}]}},
                "status": "not an object",
            })
        );
        assert_eq!(keep(&[&[]]).decode(&text).unwrap(), object, "all of it");
        assert_eq!(
            keep(&[&["spec"], &["spec", "plan"]]).decode(&text).unwrap(),
            json!({"spec": object["spec"]}),
            "a whole part stays whole"
        );
        assert!(keep(&[]).decode("{\"a\":").is_err());
        assert!(keep(&[]).decode("{} x").is_err(), "trailing bytes");
    }

    #[test]
    fn escaped_and_repeated_keys_read_as_in_a_whole_decode() {
        let text = r#"{"spec":{"pl\u0061n":"first","plan":"second"},"sp\u0065c":{"x":1}}"#;
        let whole: Value = serde_json::from_str(text).unwrap();
        let pruned = keep(&[&["spec", "plan"]]).decode(text).unwrap();
        assert_eq!(pruned["spec"]["plan"], whole["spec"]["plan"]);
        assert_eq!(pruned["spec"].get("x"), None);
    }

    fn json_value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(|n| json!(n)),
            any::<f64>().prop_map(|n| json!(n)),
            "[a-c]{0,3}".prop_map(Value::String),
        ];
        leaf.prop_recursive(4, 40, 4, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                proptest::collection::btree_map("[a-c]{1,2}", inner, 0..4)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest! {
        /// What is kept is exactly the whole decode's value at that place.
        #[test]
        fn kept_parts_equal_the_whole_decode(
            object in json_value(),
            paths in proptest::collection::vec(proptest::collection::vec("[a-c]{1,2}", 0..3), 0..4),
        ) {
            let mut keep = Keep::nothing();
            for path in &paths {
                keep.add(path);
            }
            let text = object.to_string();
            let object: Value = serde_json::from_str(&text).unwrap();
            let pruned = keep.decode(&text).unwrap();
            for path in &paths {
                let mut whole = Some(&object);
                let mut part = Some(&pruned);
                for key in path {
                    whole = whole.and_then(|v| v.as_object()).and_then(|m| m.get(key));
                    part = part.and_then(|v| v.as_object()).and_then(|m| m.get(key));
                }
                prop_assert_eq!(whole, part, "{:?}", path);
            }
        }

        #[test]
        fn arbitrary_text_never_panics(text in ".{0,60}") {
            let _ = keep(&[&["a"], &["b", "c"]]).decode(&text);
        }
    }
}
