//! The annotations kube-bind's konnector puts on every object it writes to
//! the provider, put by bindery on every object a consumer writes through
//! it, so that a provider controller written for kube-bind finds a
//! consumer's objects as it always did: `kube-bind.io/cluster-namespace`
//! (the consumer's cluster namespace) and `kube-bind.io/consumer-namespace`
//! (the app namespace the object lives in, empty for a cluster-scoped
//! one). They are the provider's words: a consumer may not set them and
//! never sees them, nor their managed-fields entries. Pure.

use serde_json::{Map, Value};

pub use crate::api::keys::{CLUSTER_NAMESPACE_ANNOTATION, CONSUMER_NAMESPACE_ANNOTATION};

const MARKS: [&str; 2] = [CLUSTER_NAMESPACE_ANNOTATION, CONSUMER_NAMESPACE_ANNOTATION];

/// The first of the marks a consumer's object sets, if any.
pub fn set_by_consumer(metadata: &Map<String, Value>) -> Option<&'static str> {
    let annotations = metadata.get("annotations").and_then(Value::as_object)?;
    MARKS.into_iter().find(|key| annotations.contains_key(*key))
}

/// Puts the marks on an object going to the provider. Annotations that are
/// not a map (nor `null`, which Go reads as none) are left as they are, for
/// the provider to refuse.
pub fn stamp(metadata: &mut Map<String, Value>, cluster_namespace: &str, consumer_namespace: &str) {
    let annotations = metadata.entry("annotations").or_insert(Value::Null);
    if annotations.is_null() {
        *annotations = Value::Object(Map::new());
    }
    if let Some(annotations) = annotations.as_object_mut() {
        annotations.insert(
            CLUSTER_NAMESPACE_ANNOTATION.into(),
            Value::String(cluster_namespace.into()),
        );
        annotations.insert(
            CONSUMER_NAMESPACE_ANNOTATION.into(),
            Value::String(consumer_namespace.into()),
        );
    }
}

/// Removes the marks, an annotations map they leave empty, and their
/// entries in `managedFields`, from an object going to a consumer.
pub fn strip(metadata: &mut Map<String, Value>) {
    super::forget::forget(metadata, "annotations", |key| MARKS.contains(&key));
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn metadata(value: Value) -> Map<String, Value> {
        value.as_object().expect("a map").clone()
    }

    #[test]
    fn marks_are_stamped_over_the_consumer_s_annotations_and_stripped_back() {
        for annotations in [json!(null), json!({}), json!({"keep": "me"})] {
            let original = metadata(json!({"name": "a", "annotations": annotations}));
            let mut down = original.clone();
            stamp(&mut down, "kube-bind-c1", "shop");
            assert_eq!(
                down["annotations"][CLUSTER_NAMESPACE_ANNOTATION],
                "kube-bind-c1"
            );
            assert_eq!(down["annotations"][CONSUMER_NAMESPACE_ANNOTATION], "shop");
            strip(&mut down);
            let expected = match annotations {
                Value::Object(map) if !map.is_empty() => {
                    json!({"name": "a", "annotations": map})
                }
                _ => json!({"name": "a"}),
            };
            assert_eq!(Value::Object(down), expected);
        }
    }

    #[test]
    fn an_empty_annotations_map_of_the_consumer_s_stays() {
        let mut up = metadata(json!({"annotations": {}}));
        strip(&mut up);
        assert_eq!(Value::Object(up), json!({"annotations": {}}));
    }

    #[test]
    fn annotations_that_are_not_a_map_are_left_for_the_provider_to_refuse() {
        let mut down = metadata(json!({"annotations": "x"}));
        stamp(&mut down, "kube-bind-c1", "");
        assert_eq!(Value::Object(down), json!({"annotations": "x"}));
    }

    #[test]
    fn a_consumer_may_not_set_a_mark() {
        assert_eq!(
            set_by_consumer(&metadata(
                json!({"annotations": {CONSUMER_NAMESPACE_ANNOTATION: ""}})
            )),
            Some(CONSUMER_NAMESPACE_ANNOTATION)
        );
        assert_eq!(
            set_by_consumer(&metadata(
                json!({"annotations": {"kube-bind.io/other": ""}})
            )),
            None
        );
        assert_eq!(set_by_consumer(&metadata(json!({"annotations": 3}))), None);
    }

    #[test]
    fn managed_fields_lose_the_marks_entries() {
        let mut up = metadata(json!({
            "annotations": {CLUSTER_NAMESPACE_ANNOTATION: "kube-bind-c1", CONSUMER_NAMESPACE_ANNOTATION: "shop", "a": "b"},
            "managedFields": [
                {"manager": "bindery-only", "fieldsV1": {"f:metadata": {"f:annotations": {
                    ".": {}, "f:kube-bind.io/cluster-namespace": {}, "f:kube-bind.io/consumer-namespace": {}}}}},
                {"manager": "mixed", "fieldsV1": {"f:metadata": {"f:annotations": {
                    ".": {}, "f:a": {}, "f:kube-bind.io/cluster-namespace": {}}}, "f:spec": {}}},
                {"manager": "untouched", "fieldsV1": {"f:spec": {"f:x": {}}}},
            ]
        }));
        strip(&mut up);
        assert_eq!(
            Value::Object(up),
            json!({
                "annotations": {"a": "b"},
                "managedFields": [
                    {"manager": "mixed", "fieldsV1": {"f:metadata": {"f:annotations": {".": {}, "f:a": {}}}, "f:spec": {}}},
                    {"manager": "untouched", "fieldsV1": {"f:spec": {"f:x": {}}}},
                ]
            })
        );
    }
}
