//! `ObjectMeta` as kube-apiserver writes it from its Go struct (in a
//! `PartialObjectMetadata`, a Table row's object): its fields in the
//! struct's order, owner references and managed-fields entries in theirs,
//! and fields the struct does not have dropped. A custom resource's own
//! metadata is written from a map instead, keys sorted; this turns one into
//! the other without decoding the values (each field's JSON is kept as it
//! came). Pure.

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

type Raw<'a> = Option<&'a RawValue>;

/// `metav1.ObjectMeta`, its fields in order, each as its JSON (owner
/// references and managed-fields entries as their structs): read once, it
/// gives a field's JSON ([`ObjectMeta::plain_field`]) and the whole in the
/// struct's order ([`ObjectMeta::to_json`]).
#[derive(Default, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectMeta<'a> {
    #[serde(borrow, default, skip_serializing_if = "Field::is_absent_or_null")]
    name: Field<'a>,
    #[serde(borrow, default, skip_serializing_if = "Field::is_absent_or_null")]
    generate_name: Field<'a>,
    #[serde(borrow, default, skip_serializing_if = "Field::is_absent_or_null")]
    namespace: Field<'a>,
    #[serde(borrow, default, skip_serializing_if = "Field::is_absent_or_null")]
    self_link: Field<'a>,
    #[serde(borrow, default, skip_serializing_if = "Field::is_absent_or_null")]
    uid: Field<'a>,
    #[serde(borrow, default, skip_serializing_if = "Field::is_absent_or_null")]
    resource_version: Field<'a>,
    #[serde(borrow, default, skip_serializing_if = "Field::is_absent_or_null")]
    generation: Field<'a>,
    #[serde(borrow, default, skip_serializing_if = "Field::is_absent_or_null")]
    creation_timestamp: Field<'a>,
    #[serde(borrow, default, skip_serializing_if = "Field::is_absent_or_null")]
    deletion_timestamp: Field<'a>,
    #[serde(borrow, default, skip_serializing_if = "Field::is_absent_or_null")]
    deletion_grace_period_seconds: Field<'a>,
    #[serde(borrow, default, skip_serializing_if = "Field::is_absent_or_null")]
    labels: Field<'a>,
    #[serde(borrow, default, skip_serializing_if = "Field::is_absent_or_null")]
    annotations: Field<'a>,
    #[serde(borrow, skip_serializing_if = "Option::is_none")]
    owner_references: Option<Vec<OwnerReference<'a>>>,
    #[serde(borrow, default, skip_serializing_if = "Field::is_absent_or_null")]
    finalizers: Field<'a>,
    #[serde(borrow, skip_serializing_if = "Option::is_none")]
    managed_fields: Option<Vec<ManagedFieldsEntry<'a>>>,
}

/// A plain field's JSON as it came, `null` included (so that a cell that
/// reads it finds the `null` the object has); absent when the object has
/// no such field. Written as Go's struct writes it: a `null` leaves the
/// field at its zero value, which `omitempty` leaves out.
#[derive(Clone, Copy, Default)]
struct Field<'a>(Raw<'a>);

impl<'de: 'a, 'a> Deserialize<'de> for Field<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        <&'a RawValue>::deserialize(deserializer).map(|raw| Field(Some(raw)))
    }
}

impl Serialize for Field<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(serializer)
    }
}

impl Field<'_> {
    fn is_absent_or_null(&self) -> bool {
        self.0.is_none_or(|raw| raw.get() == "null")
    }
}

/// `metav1.OwnerReference`, its fields in order.
#[derive(Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
struct OwnerReference<'a> {
    #[serde(borrow, skip_serializing_if = "Option::is_none")]
    api_version: Raw<'a>,
    #[serde(borrow, skip_serializing_if = "Option::is_none")]
    kind: Raw<'a>,
    #[serde(borrow, skip_serializing_if = "Option::is_none")]
    name: Raw<'a>,
    #[serde(borrow, skip_serializing_if = "Option::is_none")]
    uid: Raw<'a>,
    #[serde(borrow, skip_serializing_if = "Option::is_none")]
    controller: Raw<'a>,
    #[serde(borrow, skip_serializing_if = "Option::is_none")]
    block_owner_deletion: Raw<'a>,
}

/// `metav1.ManagedFieldsEntry`, its fields in order.
#[derive(Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
struct ManagedFieldsEntry<'a> {
    #[serde(borrow, skip_serializing_if = "Option::is_none")]
    manager: Raw<'a>,
    #[serde(borrow, skip_serializing_if = "Option::is_none")]
    operation: Raw<'a>,
    #[serde(borrow, skip_serializing_if = "Option::is_none")]
    api_version: Raw<'a>,
    #[serde(borrow, skip_serializing_if = "Option::is_none")]
    time: Raw<'a>,
    #[serde(borrow, skip_serializing_if = "Option::is_none")]
    fields_type: Raw<'a>,
    #[serde(borrow, skip_serializing_if = "Option::is_none")]
    fields_v1: Raw<'a>,
    #[serde(borrow, skip_serializing_if = "Option::is_none")]
    subresource: Raw<'a>,
}

impl<'a> ObjectMeta<'a> {
    /// The JSON of the field named `name` (as JSON names it) when it is one
    /// kept as it came (`Some(None)`: absent); `None` for owner references,
    /// managed fields, and names the struct does not have.
    pub fn plain_field(&self, name: &str) -> Option<Raw<'a>> {
        let field = match name {
            "name" => self.name,
            "generateName" => self.generate_name,
            "namespace" => self.namespace,
            "selfLink" => self.self_link,
            "uid" => self.uid,
            "resourceVersion" => self.resource_version,
            "generation" => self.generation,
            "creationTimestamp" => self.creation_timestamp,
            "deletionTimestamp" => self.deletion_timestamp,
            "deletionGracePeriodSeconds" => self.deletion_grace_period_seconds,
            "labels" => self.labels,
            "annotations" => self.annotations,
            "finalizers" => self.finalizers,
            _ => return None,
        };
        Some(field.0)
    }

    /// Whether [`ObjectMeta::plain_field`] gives the field named `name`.
    pub fn is_plain_field(name: &str) -> bool {
        ObjectMeta::default().plain_field(name).is_some()
    }

    /// The metadata as the struct writes it.
    pub fn to_json(&self) -> Option<String> {
        serde_json::to_string(self).ok()
    }
}

/// An object's `metadata` JSON as the `ObjectMeta` struct writes it;
/// `None` when it is not an object of that shape.
pub fn in_struct_order(metadata: &str) -> Option<String> {
    let meta: ObjectMeta = crate::deep::from_str(metadata).ok()?;
    meta.to_json()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_come_in_the_structs_order_and_unknown_ones_go() {
        let metadata = r#"{"creationTimestamp":"t","generation":1,"labels":{"a":"b"},
            "managedFields":[{"apiVersion":"v1","fieldsType":"FieldsV1",
                "fieldsV1":{"f:spec":{}},"manager":"m","operation":"Update","time":"t"}],
            "name":"x","namespace":"ns","ownerReferences":[{"kind":"K","uid":"u",
                "name":"o","apiVersion":"v1","controller":true}],
            "resourceVersion":"5","uid":"u1","unknown":1}"#;
        assert_eq!(
            in_struct_order(metadata).unwrap(),
            concat!(
                r#"{"name":"x","namespace":"ns","uid":"u1","resourceVersion":"5","generation":1,"#,
                r#""creationTimestamp":"t","labels":{"a":"b"},"ownerReferences":[{"apiVersion":"v1","kind":"K","name":"o","uid":"u","controller":true}],"#,
                r#""managedFields":[{"manager":"m","operation":"Update","apiVersion":"v1","time":"t","fieldsType":"FieldsV1","fieldsV1":{"f:spec":{}}}]}"#
            )
        );
        assert_eq!(in_struct_order("{}").unwrap(), "{}");
        assert_eq!(in_struct_order("null"), None);
        let nulls = r#"{"name":null,"labels":null,"uid":"u"}"#;
        assert_eq!(in_struct_order(nulls).unwrap(), r#"{"uid":"u"}"#);
        let meta: ObjectMeta = serde_json::from_str(nulls).unwrap();
        assert_eq!(meta.plain_field("labels").unwrap().unwrap().get(), "null");
        assert!(meta.plain_field("annotations").unwrap().is_none());
        assert_eq!(in_struct_order(r#"{"ownerReferences":1}"#), None);
    }
}
