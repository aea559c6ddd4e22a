//! `ObjectMeta` as kube-apiserver writes it from its Go struct (in a
//! `PartialObjectMetadata`, a Table row's object): its fields in the
//! struct's order, owner references and managed-fields entries in theirs,
//! and fields the struct does not have dropped. A custom resource's own
//! metadata is written from a map instead, keys sorted; this turns one into
//! the other. Pure.

use serde_json::{Map, Value};

/// `metav1.ObjectMeta`'s fields, in order.
const OBJECT_META: [&str; 15] = [
    "name",
    "generateName",
    "namespace",
    "selfLink",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "labels",
    "annotations",
    "ownerReferences",
    "finalizers",
    "managedFields",
];

/// `metav1.OwnerReference`'s fields, in order.
const OWNER_REFERENCE: [&str; 6] = [
    "apiVersion",
    "kind",
    "name",
    "uid",
    "controller",
    "blockOwnerDeletion",
];

/// `metav1.ManagedFieldsEntry`'s fields, in order.
const MANAGED_FIELDS_ENTRY: [&str; 7] = [
    "manager",
    "operation",
    "apiVersion",
    "time",
    "fieldsType",
    "fieldsV1",
    "subresource",
];

/// `metadata` (an object's) as the `ObjectMeta` struct writes it.
pub fn in_struct_order(metadata: &Value) -> Value {
    let Value::Object(fields) = metadata else {
        return Value::Object(Map::new());
    };
    let mut out = ordered(fields, &OBJECT_META);
    for (key, order) in [
        ("ownerReferences", &OWNER_REFERENCE[..]),
        ("managedFields", &MANAGED_FIELDS_ENTRY[..]),
    ] {
        if let Some(Value::Array(items)) = out.get_mut(key) {
            for item in items.iter_mut() {
                if let Value::Object(fields) = item {
                    *item = Value::Object(ordered(fields, order));
                }
            }
        }
    }
    Value::Object(out)
}

fn ordered(fields: &Map<String, Value>, order: &[&str]) -> Map<String, Value> {
    order
        .iter()
        .filter_map(|key| {
            fields
                .get(*key)
                .map(|value| (key.to_string(), value.clone()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn fields_come_in_the_structs_order_and_unknown_ones_go() {
        let metadata = json!({
            "creationTimestamp": "t", "generation": 1, "labels": {"a": "b"},
            "managedFields": [{"apiVersion": "v1", "fieldsType": "FieldsV1",
                "fieldsV1": {"f:spec": {}}, "manager": "m", "operation": "Update", "time": "t"}],
            "name": "x", "namespace": "ns", "ownerReferences": [{"kind": "K", "uid": "u",
                "name": "o", "apiVersion": "v1", "controller": true}],
            "resourceVersion": "5", "uid": "u1", "unknown": 1,
        });
        let text = serde_json::to_string(&in_struct_order(&metadata)).unwrap();
        assert_eq!(
            text,
            concat!(
                r#"{"name":"x","namespace":"ns","uid":"u1","resourceVersion":"5","generation":1,"#,
                r#""creationTimestamp":"t","labels":{"a":"b"},"ownerReferences":[{"apiVersion":"v1","kind":"K","name":"o","uid":"u","controller":true}],"#,
                r#""managedFields":[{"manager":"m","operation":"Update","apiVersion":"v1","time":"t","fieldsType":"FieldsV1","fieldsV1":{"f:spec":{}}}]}"#
            )
        );
        assert_eq!(in_struct_order(&Value::Null), json!({}));
    }
}
