//! The virtual workspace across every consumer of an export: which provider
//! objects belong to which consumer (by the export label, then checked like
//! any consumer response), each shown in its consumer's terms and marked
//! with its consumer in an annotation. Pure.

use super::binding::BoundResource;
use super::identity::EXPORT_LABEL;
use super::objects::{Visibility, object_up};
use serde_json::Value;
use std::collections::HashMap;

/// The annotation naming an object's consumer in the virtual workspace.
pub const CONSUMER_ANNOTATION: &str = "bindery.dev/consumer";

/// The consumers of one export, each with its bound resource, found by the
/// export label their objects carry.
pub struct Consumers {
    by_export_label: HashMap<String, BoundResource>,
}

impl Consumers {
    pub fn new(bounds: impl IntoIterator<Item = BoundResource>) -> Self {
        Self {
            by_export_label: bounds
                .into_iter()
                .map(|b| (b.identity.label_value().to_string(), b))
                .collect(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.by_export_label.is_empty()
    }

    /// The provider label selector: objects of any export, and the caller's
    /// own selector. Objects of other exports are dropped on the way back,
    /// so the query does not grow with the number of consumers.
    pub fn selector(caller: Option<&str>) -> String {
        match caller.filter(|s| !s.is_empty()) {
            Some(caller) => format!("{EXPORT_LABEL},{caller}"),
            None => EXPORT_LABEL.to_string(),
        }
    }

    /// Rewrites one provider object for its consumer and marks it;
    /// `Hidden` for an object of no consumer of this export.
    pub fn object_up(&self, object: &mut Value) -> Visibility {
        let Some(bound) = object
            .pointer(&format!(
                "/metadata/labels/{}",
                EXPORT_LABEL.replace('/', "~1")
            ))
            .and_then(Value::as_str)
            .and_then(|label| self.by_export_label.get(label))
        else {
            return Visibility::Hidden;
        };
        if object_up(bound, object, true) == Visibility::Hidden {
            return Visibility::Hidden;
        }
        let metadata = object
            .get_mut("metadata")
            .and_then(Value::as_object_mut)
            .expect("object_up saw metadata");
        let annotations = metadata
            .entry("annotations")
            .or_insert_with(|| Value::Object(Default::default()));
        if !annotations.is_object() {
            *annotations = Value::Object(Default::default());
        }
        annotations.as_object_mut().expect("an object").insert(
            CONSUMER_ANNOTATION.into(),
            Value::String(bound.consumer.to_string()),
        );
        Visibility::Visible
    }

    /// Free text from the provider (a Status about the caller's request)
    /// without the requirement bindery added to the caller's selector.
    pub fn text_up(text: &str) -> String {
        text.replace(&format!("{EXPORT_LABEL},"), "")
    }
}

/// A write's body without the consumer annotation the workspace added, so
/// that an object read from the workspace can be written back as it is;
/// `None` when there is nothing to remove.
pub fn without_consumer_annotation(body: &[u8]) -> Option<Vec<u8>> {
    let mut value: Value = crate::deep::from_slice(body).ok()?;
    let annotations = value
        .get_mut("metadata")?
        .get_mut("annotations")?
        .as_object_mut()?;
    annotations.remove(CONSUMER_ANNOTATION)?;
    if annotations.is_empty() {
        value
            .get_mut("metadata")
            .and_then(Value::as_object_mut)
            .map(|m| m.shift_remove("annotations"));
    }
    Some(serde_json::to_vec(&value).expect("a JSON value serializes"))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::route::ConsumerId;
    use crate::translate::{IdentityHash, Isolation, NamespaceMap};
    use serde_json::json;

    pub(crate) fn bound(consumer: &str, secret: &str) -> BoundResource {
        let mut namespaces = NamespaceMap::new(format!("kube-bind-{consumer}"));
        namespaces.insert("default", format!("kube-bind-{consumer}-default"));
        BoundResource {
            consumer: ConsumerId::parse(consumer).unwrap(),
            group: "db.example.com".into(),
            resource: "things".into(),
            kind: "Thing".into(),
            namespaced: true,
            isolation: Isolation::Prefixed,
            export: "things".into(),
            identity: IdentityHash::of_secret(secret.as_bytes()),
            has_status: true,
            has_scale: false,
            namespaces,
            provider_kinds: Default::default(),
            in_workspace: true,
        }
    }

    pub(crate) fn provider_object(b: &BoundResource, name: &str) -> Value {
        json!({
            "apiVersion": "db.example.com/v1", "kind": "Thing",
            "metadata": {
                "name": name,
                "namespace": format!("kube-bind-{}-default", b.consumer),
                "labels": {
                    EXPORT_LABEL: b.identity.label_value(),
                    "bindery.dev/consumer": b.consumer.as_str(),
                    "app": "x",
                },
            },
        })
    }

    #[test]
    fn every_consumers_objects_come_back_in_its_own_terms_marked_with_it() {
        let (one, two) = (bound("one", "s1"), bound("two", "s2"));
        let stranger = bound("three", "s3");
        let consumers = Consumers::new([one.clone(), two.clone()]);
        let mut items: Vec<Value> = [
            provider_object(&one, "a"),
            provider_object(&two, "a"),
            provider_object(&stranger, "b"),
        ]
        .into_iter()
        .filter_map(|mut item| {
            (consumers.object_up(&mut item) == Visibility::Visible).then_some(item)
        })
        .collect();
        assert_eq!(items.len(), 2, "the other export's object is dropped");
        let items = &mut items;
        for (item, consumer) in items.iter().zip(["one", "two"]) {
            assert_eq!(item["metadata"]["namespace"], "default");
            assert_eq!(
                item["metadata"]["annotations"][CONSUMER_ANNOTATION],
                consumer
            );
            assert_eq!(item["metadata"]["labels"], json!({"app": "x"}));
        }
    }

    #[test]
    fn an_object_whose_labels_disagree_with_its_namespace_is_hidden() {
        let (one, two) = (bound("one", "s1"), bound("two", "s2"));
        let consumers = Consumers::new([one.clone(), two.clone()]);
        // Labelled for export one, but stored in consumer two's namespace.
        let mut forged = provider_object(&one, "a");
        forged["metadata"]["namespace"] = json!("kube-bind-two-default");
        assert_eq!(consumers.object_up(&mut forged), Visibility::Hidden);
        let mut unlabelled =
            json!({"metadata": {"name": "a", "namespace": "kube-bind-one-default"}});
        assert_eq!(consumers.object_up(&mut unlabelled), Visibility::Hidden);
    }

    #[test]
    fn the_selector_keeps_the_callers_and_the_annotation_is_removed_on_writes() {
        assert_eq!(Consumers::selector(None), EXPORT_LABEL);
        assert_eq!(
            Consumers::text_up(&format!("unable to parse requirement: {EXPORT_LABEL},a=(")),
            "unable to parse requirement: a=("
        );
        assert_eq!(
            Consumers::selector(Some("app=x")),
            format!("{EXPORT_LABEL},app=x")
        );
        let body = json!({"metadata": {"name": "a", "annotations": {CONSUMER_ANNOTATION: "one"},
            "namespace": "n", "uid": "u"}});
        let stripped = without_consumer_annotation(&body.to_string().into_bytes()).unwrap();
        assert_eq!(
            String::from_utf8(stripped).unwrap(),
            r#"{"metadata":{"name":"a","namespace":"n","uid":"u"}}"#,
            "the other fields keep their order"
        );
        let kept = json!({"metadata": {"annotations": {CONSUMER_ANNOTATION: "one", "b": "c"}}});
        let kept: Value = serde_json::from_slice(
            &without_consumer_annotation(&kept.to_string().into_bytes()).unwrap(),
        )
        .unwrap();
        assert_eq!(kept, json!({"metadata": {"annotations": {"b": "c"}}}));
        assert_eq!(without_consumer_annotation(b"{\"metadata\":{}}"), None);
        assert_eq!(without_consumer_annotation(b"not json"), None);
    }
}
