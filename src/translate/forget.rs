//! Taking keys out of an object's labels or annotations as if they had
//! never been set: out of the map (and the map out, when they were all it
//! held) and out of every `managedFields` entry (with the parents and
//! entries they leave empty). Pure.

use serde_json::{Map, Value};

/// Removes the keys of `metadata[field]` (`labels` or `annotations`) that
/// `gone` names, and their managed-fields entries.
pub fn forget(metadata: &mut Map<String, Value>, field: &str, gone: impl Fn(&str) -> bool) {
    if let Some(map) = metadata.get_mut(field).and_then(Value::as_object_mut) {
        let before = map.len();
        map.retain(|key, _| !gone(key));
        if map.is_empty() && before > 0 {
            metadata.shift_remove(field);
        }
    }
    let Some(Value::Array(entries)) = metadata.get_mut("managedFields") else {
        return;
    };
    for entry in entries.iter_mut() {
        if let Some(fields) = entry.get_mut("fieldsV1") {
            forget_managed(fields, &format!("f:{field}"), &gone);
        }
    }
    entries.retain(|entry| {
        entry
            .get("fieldsV1")
            .and_then(Value::as_object)
            .is_none_or(|fields| !fields.is_empty())
    });
    if entries.is_empty() {
        metadata.shift_remove("managedFields");
    }
}

/// Removes `f:metadata.<field>.f:<gone>` from one managed-fields set, and
/// the parents it leaves holding only their own `.` marker.
fn forget_managed(fields: &mut Value, field: &str, gone: &impl Fn(&str) -> bool) {
    let Some(root) = fields.as_object_mut() else {
        return;
    };
    let Some(metadata) = root.get_mut("f:metadata").and_then(Value::as_object_mut) else {
        return;
    };
    if let Some(map) = metadata.get_mut(field).and_then(Value::as_object_mut) {
        let before = map.len();
        map.retain(|key, _| key.strip_prefix("f:").is_none_or(|key| !gone(key)));
        if map.len() != before && map.keys().all(|k| k == ".") {
            metadata.shift_remove(field);
        }
    }
    if metadata.is_empty() {
        root.shift_remove("f:metadata");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn keys_go_from_the_map_and_from_managed_fields() {
        let mut metadata = json!({
            "labels": {"a": "1", "gone": "2"},
            "managedFields": [
                {"manager": "only-gone", "fieldsV1": {"f:metadata": {"f:labels": {".": {}, "f:gone": {}}}}},
                {"manager": "both", "fieldsV1": {"f:metadata": {"f:labels": {".": {}, "f:a": {}, "f:gone": {}}}}},
            ]
        })
        .as_object()
        .unwrap()
        .clone();
        forget(&mut metadata, "labels", |k| k == "gone");
        assert_eq!(
            Value::Object(metadata),
            json!({
                "labels": {"a": "1"},
                "managedFields": [
                    {"manager": "both", "fieldsV1": {"f:metadata": {"f:labels": {".": {}, "f:a": {}}}}},
                ]
            })
        );
        let mut only = json!({"annotations": {"gone": "x"}})
            .as_object()
            .unwrap()
            .clone();
        forget(&mut only, "annotations", |k| k == "gone");
        assert_eq!(Value::Object(only), json!({}));
        let mut empty = json!({"labels": {}}).as_object().unwrap().clone();
        forget(&mut empty, "labels", |_| true);
        assert_eq!(
            Value::Object(empty),
            json!({"labels": {}}),
            "an empty map of the owner's stays"
        );
    }
}
