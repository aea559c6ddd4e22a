//! One object, either way: consumer → provider (namespace and cluster-scoped
//! name mapped, identity labels stamped, reserved labels and annotations
//! refused, ownerReferences split by cluster) and provider → consumer
//! (identity checked, names mapped back, identity labels and their
//! managed-fields entries removed, ownerReferences joined).

use super::binding::BoundResource;
use super::forget::forget;
use super::identity::is_reserved_label;
use super::kcp;
use super::kube_bind_marks;
use super::owners::{OWNER_REFERENCES_ANNOTATION, references_down, references_up};
use serde_json::{Map, Value};

/// Why a consumer's object cannot go to the provider.
#[derive(Debug, PartialEq, Eq)]
pub enum Refusal {
    /// The object sets a label bindery reserves.
    ReservedLabel { name: String, key: String },
    /// The object sets an annotation bindery reserves.
    ReservedAnnotation { name: String, key: String },
}

pub use crate::forward::answer::Visibility;

/// Rewrites a consumer object of the request's `namespace` into provider
/// terms, in place. `with_labels` is false for bodies without labels of
/// their own (a Scale).
pub fn object_down(
    bound: &BoundResource,
    namespace: Option<&str>,
    object: &mut Value,
    with_labels: bool,
) -> Result<(), Refusal> {
    let Some(object) = object.as_object_mut() else {
        return Ok(());
    };
    // A `null` metadata is read by Go as none at all.
    let metadata = object.entry("metadata").or_insert(Value::Null);
    if metadata.is_null() {
        *metadata = Value::Object(Map::new());
    }
    // Any other shape is left for the provider to refuse as Go refuses it.
    let Some(metadata) = metadata.as_object_mut() else {
        return Ok(());
    };
    metadata_down(bound, namespace, metadata, with_labels)
}

/// Rewrites an object's `metadata` into provider terms, in place.
pub fn metadata_down(
    bound: &BoundResource,
    namespace: Option<&str>,
    metadata: &mut Map<String, Value>,
    with_labels: bool,
) -> Result<(), Refusal> {
    let name = metadata
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    if with_labels {
        if let Some(labels) = metadata.get("labels").and_then(Value::as_object)
            && let Some(key) = labels.keys().find(|k| is_reserved_label(k))
        {
            return Err(Refusal::ReservedLabel {
                name,
                key: key.clone(),
            });
        }
        if metadata
            .get("annotations")
            .and_then(Value::as_object)
            .is_some_and(|a| a.contains_key(OWNER_REFERENCES_ANNOTATION))
        {
            return Err(Refusal::ReservedAnnotation {
                name,
                key: OWNER_REFERENCES_ANNOTATION.into(),
            });
        }
        if let Some(key) = kube_bind_marks::set_by_consumer(metadata) {
            return Err(Refusal::ReservedAnnotation {
                name,
                key: key.into(),
            });
        }
        // Accepted and ignored, as kcp ignores it: never stored.
        kcp::unmark(metadata);
        stamp_labels(bound, metadata);
        let consumer_namespace = match bound.namespaced {
            true => namespace.unwrap_or_default(),
            false => "",
        };
        kube_bind_marks::stamp(
            metadata,
            bound.namespaces.cluster_namespace(),
            consumer_namespace,
        );
        references_down(
            &bound.provider_kinds,
            bound.namespaces.cluster_namespace(),
            metadata,
        );
    }
    if bound.namespaced {
        if let Some(Value::String(ns)) = metadata.get_mut("namespace")
            && !ns.is_empty()
        {
            *ns = bound.namespaces.to_provider(ns);
        }
    } else {
        for field in ["name", "generateName"] {
            if let Some(Value::String(value)) = metadata.get_mut(field)
                && !value.is_empty()
            {
                *value = bound.provider_name(value);
            }
        }
        // Under `Namespaced` isolation the object lives in the consumer's
        // cluster namespace (whatever namespace the body named: the app
        // cluster's kube-apiserver clears it for a cluster-scoped kind).
        if let Some(ns) = bound.provider_namespace_of_cluster_scoped() {
            metadata.insert("namespace".into(), Value::String(ns.to_string()));
        }
    }
    Ok(())
}

/// Sets the export's identity labels, keeping the consumer's own labels.
/// Labels that are not a map (nor `null`, which Go reads as none) are left
/// as they are: the provider refuses them as kube-apiserver refuses them,
/// and nothing without the identity is stored.
pub fn stamp_labels(bound: &BoundResource, metadata: &mut Map<String, Value>) {
    let labels = metadata.entry("labels").or_insert(Value::Null);
    if labels.is_null() {
        *labels = Value::Object(Map::new());
    }
    if let Some(labels) = labels.as_object_mut() {
        for (key, value) in bound.identity_labels() {
            labels.insert(key.to_string(), Value::String(value.to_string()));
        }
    }
}

/// Rewrites a provider object into consumer terms, in place, after checking
/// that it belongs to this consumer's export. `with_labels` is false for
/// bodies that carry no labels (a Scale): they are checked by name only.
pub fn object_up(bound: &BoundResource, object: &mut Value, with_labels: bool) -> Visibility {
    let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) else {
        return Visibility::Hidden;
    };
    if with_labels && !carries_identity(bound, metadata) {
        return Visibility::Hidden;
    }
    if bound.namespaced {
        let Some(provider) = metadata.get("namespace").and_then(Value::as_str) else {
            return Visibility::Hidden;
        };
        let Some(consumer) = bound.namespaces.to_consumer(provider) else {
            return Visibility::Hidden;
        };
        metadata.insert("namespace".into(), Value::String(consumer));
    } else {
        if let Some(home) = bound.provider_namespace_of_cluster_scoped() {
            if metadata.get("namespace").and_then(Value::as_str) != Some(home) {
                return Visibility::Hidden;
            }
            metadata.remove("namespace");
        }
        let Some(provider) = metadata.get("name").and_then(Value::as_str) else {
            return Visibility::Hidden;
        };
        let Some(consumer) = bound.consumer_name(provider) else {
            return Visibility::Hidden;
        };
        metadata.insert("name".into(), Value::String(consumer));
        if let Some(Value::String(generate)) = metadata.get_mut("generateName")
            && let Some(consumer) = bound.consumer_name(generate)
        {
            *generate = consumer;
        }
    }
    if with_labels {
        strip_labels(metadata);
        kube_bind_marks::strip(metadata);
        references_up(
            &bound.provider_kinds,
            bound.namespaces.cluster_namespace(),
            metadata,
        );
        // The kcp cluster is bindery's word alone: whatever the provider
        // stored goes, and the workspace names the object's consumer.
        kcp::unmark(metadata);
        if bound.in_workspace {
            kcp::mark(metadata, &bound.consumer);
        }
    }
    Visibility::Visible
}

fn carries_identity(bound: &BoundResource, metadata: &Map<String, Value>) -> bool {
    let Some(labels) = metadata.get("labels").and_then(Value::as_object) else {
        return false;
    };
    bound
        .identity_labels()
        .iter()
        .all(|(key, value)| labels.get(*key).and_then(Value::as_str) == Some(*value))
}

/// Removes reserved labels, and their entries in `managedFields`, so the
/// object reads as if they had never been set.
fn strip_labels(metadata: &mut Map<String, Value>) {
    forget(metadata, "labels", is_reserved_label);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::translate::binding::fixtures::{gadgets, widgets};
    use serde_json::json;

    #[test]
    fn namespaced_object_round_trip() {
        let w = widgets();
        let mut object = json!({"apiVersion": "example.com/v1", "kind": "Widget",
            "metadata": {"name": "a", "namespace": "ns", "labels": {"app": "x"}}});
        object_down(&w, Some("ns"), &mut object, true).unwrap();
        assert_eq!(object["metadata"]["namespace"], "kube-bind-c1-ns");
        assert_eq!(object["metadata"]["labels"]["app"], "x");
        assert_eq!(
            object["metadata"]["labels"]["bindery.dev/export"],
            w.identity.label_value()
        );
        assert_eq!(object["metadata"]["labels"]["bindery.dev/consumer"], "c1");

        assert_eq!(object_up(&w, &mut object, true), Visibility::Visible);
        assert_eq!(
            object,
            json!({"apiVersion": "example.com/v1", "kind": "Widget",
                "metadata": {"name": "a", "namespace": "ns", "labels": {"app": "x"}}})
        );
    }

    #[test]
    fn null_metadata_and_labels_are_read_as_none_and_stamped() {
        let w = widgets();
        for mut object in [
            json!({"metadata": null}),
            json!({"metadata": {"name": "a", "labels": null}}),
        ] {
            object_down(&w, Some("ns"), &mut object, true).unwrap();
            assert_eq!(object["metadata"]["labels"]["bindery.dev/consumer"], "c1");
        }
    }

    #[test]
    fn labels_that_are_not_a_map_are_left_for_the_provider_to_refuse() {
        let w = widgets();
        for labels in [json!("x"), json!([]), json!(1)] {
            let mut object = json!({"metadata": {"name": "a", "labels": labels.clone()}});
            object_down(&w, Some("ns"), &mut object, true).unwrap();
            assert_eq!(object["metadata"]["labels"], labels);
        }
    }

    #[test]
    fn reserved_labels_are_refused() {
        let mut object = json!({"metadata": {"name": "a", "labels": {"bindery.dev/export": "x"}}});
        assert_eq!(
            object_down(&widgets(), Some("ns"), &mut object, true),
            Err(Refusal::ReservedLabel {
                name: "a".into(),
                key: "bindery.dev/export".into()
            })
        );
    }

    #[test]
    fn the_owner_references_annotation_is_bindery_s() {
        let w = widgets();
        let mut object = json!({"metadata": {"name": "a",
            "annotations": {OWNER_REFERENCES_ANNOTATION: "[]"}}});
        assert_eq!(
            object_down(&w, Some("ns"), &mut object, true),
            Err(Refusal::ReservedAnnotation {
                name: "a".into(),
                key: OWNER_REFERENCES_ANNOTATION.into()
            })
        );
    }

    #[test]
    fn app_cluster_owners_round_trip_through_the_provider_form() {
        let mut w = widgets();
        w.provider_kinds = vec![crate::translate::owners::ProviderKind {
            group: "example.com".into(),
            kind: "Widget".into(),
            prefixed: false,
        }]
        .into();
        let references = json!([
            {"apiVersion": "v1", "kind": "ConfigMap", "name": "cm", "uid": "u1", "controller": true},
            {"apiVersion": "example.com/v1", "kind": "Widget", "name": "w", "uid": "u2"},
        ]);
        let written = json!({"apiVersion": "example.com/v1", "kind": "Widget",
            "metadata": {"name": "a", "namespace": "ns", "ownerReferences": references}});
        let mut object = written.clone();
        object_down(&w, Some("ns"), &mut object, true).unwrap();
        assert_eq!(
            object["metadata"]["ownerReferences"],
            json!([references[1]])
        );
        assert_eq!(object_up(&w, &mut object, true), Visibility::Visible);
        assert_eq!(object, written);
    }

    #[test]
    fn foreign_objects_are_hidden() {
        let w = widgets();
        let mut other_export = widgets();
        other_export.identity = crate::translate::IdentityHash::of_secret(b"export-2");
        let mut object = json!({"metadata": {"name": "a", "namespace": "ns"}});
        object_down(&other_export, Some("ns"), &mut object, true).unwrap();
        assert_eq!(object_up(&w, &mut object.clone(), true), Visibility::Hidden);

        let mut unlabelled = json!({"metadata": {"name": "a", "namespace": "kube-bind-c1-ns"}});
        assert_eq!(object_up(&w, &mut unlabelled, true), Visibility::Hidden);

        let mut elsewhere = json!({"metadata": {"name": "a", "namespace": "kube-bind-c2-ns"}});
        stamp_labels(&w, elsewhere["metadata"].as_object_mut().unwrap());
        assert_eq!(object_up(&w, &mut elsewhere, true), Visibility::Hidden);
    }

    #[test]
    fn cluster_scoped_names_are_prefixed() {
        let g = gadgets();
        let mut object = json!({"metadata": {"generateName": "g-"}});
        object_down(&g, None, &mut object, true).unwrap();
        assert_eq!(object["metadata"]["generateName"], "kube-bind-c1-g-");
        object["metadata"]["name"] = json!("kube-bind-c1-g-x1");
        assert_eq!(object_up(&g, &mut object, true), Visibility::Visible);
        assert_eq!(object["metadata"]["name"], "g-x1");
        assert_eq!(object["metadata"]["generateName"], "g-");
    }

    #[test]
    fn objects_go_up_with_kube_bind_s_marks_and_come_back_without_them() {
        use crate::translate::kube_bind_marks::{
            CLUSTER_NAMESPACE_ANNOTATION, CONSUMER_NAMESPACE_ANNOTATION,
        };
        let w = widgets();
        let mut object = json!({"metadata": {"name": "a", "namespace": "ns",
            "annotations": {"keep": "me"}}});
        object_down(&w, Some("ns"), &mut object, true).unwrap();
        assert_eq!(
            object["metadata"]["annotations"],
            json!({"keep": "me", CLUSTER_NAMESPACE_ANNOTATION: "kube-bind-c1",
                CONSUMER_NAMESPACE_ANNOTATION: "ns"})
        );
        assert_eq!(object_up(&w, &mut object, true), Visibility::Visible);
        assert_eq!(object["metadata"]["annotations"], json!({"keep": "me"}));
        // A cluster-scoped object has no consumer namespace.
        let g = gadgets();
        let mut object = json!({"metadata": {"name": "g"}});
        object_down(&g, None, &mut object, true).unwrap();
        assert_eq!(
            object["metadata"]["annotations"][CONSUMER_NAMESPACE_ANNOTATION],
            ""
        );
        assert_eq!(object_up(&g, &mut object, true), Visibility::Visible);
        assert!(object["metadata"].get("annotations").is_none(), "{object}");
        // A consumer cannot set them.
        let mut forged = json!({"metadata": {"name": "a",
            "annotations": {CLUSTER_NAMESPACE_ANNOTATION: "kube-bind-other"}}});
        assert_eq!(
            object_down(&w, Some("ns"), &mut forged, true),
            Err(Refusal::ReservedAnnotation {
                name: "a".into(),
                key: CLUSTER_NAMESPACE_ANNOTATION.into()
            })
        );
        // A Scale carries none.
        let mut scale = json!({"metadata": {"name": "a", "namespace": "ns"}});
        object_down(&w, Some("ns"), &mut scale, false).unwrap();
        assert!(scale["metadata"].get("annotations").is_none(), "{scale}");
    }

    #[test]
    fn the_kcp_cluster_is_dropped_on_the_way_down_and_set_by_bindery_in_the_workspace() {
        let mut w = widgets();
        w.namespaces.insert("default", "kube-bind-c1-default");
        let mut object = json!({"metadata": {"name": "a", "namespace": "",
            "annotations": {"kcp.io/cluster": "someone-else", "keep": "me"}}});
        object_down(&w, Some("ns"), &mut object, true).unwrap();
        let annotations = &object["metadata"]["annotations"];
        assert!(
            annotations.get("kcp.io/cluster").is_none(),
            "a caller's kcp cluster is never stored: {annotations}"
        );
        assert_eq!(annotations["keep"], "me");
        let stored = |annotation: &str| {
            let mut object = json!({"metadata": {"name": "a", "namespace": "kube-bind-c1-default",
                "annotations": {"kcp.io/cluster": annotation}}});
            stamp_labels(&w, object["metadata"].as_object_mut().unwrap());
            object
        };
        let mut read = stored("forged");
        assert_eq!(object_up(&w, &mut read, true), Visibility::Visible);
        assert!(
            read["metadata"].get("annotations").is_none(),
            "outside the workspace no kcp cluster is shown: {read}"
        );
        let in_workspace = BoundResource {
            in_workspace: true,
            ..w.clone()
        };
        let mut read = stored("forged");
        assert_eq!(
            object_up(&in_workspace, &mut read, true),
            Visibility::Visible
        );
        assert_eq!(
            read["metadata"]["annotations"],
            json!({"kcp.io/cluster": "c1"})
        );
        assert_ne!(
            w.translation_key(),
            in_workspace.translation_key(),
            "the two are translated apart"
        );
    }

    #[test]
    fn namespaced_isolation_keeps_cluster_scoped_objects_in_the_cluster_namespace() {
        let g = BoundResource {
            isolation: crate::translate::Isolation::Namespaced,
            ..gadgets()
        };
        let mut object = json!({"metadata": {"name": "g", "namespace": "whatever"}});
        object_down(&g, None, &mut object, true).unwrap();
        assert_eq!(object["metadata"]["name"], "g", "the name is kept");
        assert_eq!(object["metadata"]["namespace"], "kube-bind-c1");
        assert_eq!(object_up(&g, &mut object, true), Visibility::Visible);
        assert_eq!(object["metadata"], json!({"name": "g"}));

        for elsewhere in [json!("kube-bind-c2"), Value::Null] {
            let mut other = json!({"metadata": {"name": "g", "namespace": elsewhere}});
            stamp_labels(&g, other["metadata"].as_object_mut().unwrap());
            assert_eq!(
                object_up(&g, &mut other, true),
                Visibility::Hidden,
                "{elsewhere}"
            );
        }
    }

    #[test]
    fn managed_fields_lose_identity_labels() {
        let w = widgets();
        let mut object = json!({"metadata": {"name": "a", "namespace": "kube-bind-c1-ns",
        "managedFields": [
            {"manager": "kubectl-create", "fieldsType": "FieldsV1", "fieldsV1": {
                "f:metadata": {"f:labels": {".": {}, "f:bindery.dev/export": {}, "f:bindery.dev/consumer": {}}},
                "f:spec": {".": {}, "f:size": {}}}},
            {"manager": "labeller", "fieldsType": "FieldsV1", "fieldsV1": {
                "f:metadata": {"f:labels": {".": {}, "f:app": {}, "f:bindery.dev/export": {}}}}}
        ]}});
        stamp_labels(&w, object["metadata"].as_object_mut().unwrap());
        assert_eq!(object_up(&w, &mut object, true), Visibility::Visible);
        assert_eq!(
            object["metadata"]["managedFields"],
            json!([
                {"manager": "kubectl-create", "fieldsType": "FieldsV1", "fieldsV1": {
                    "f:spec": {".": {}, "f:size": {}}}},
                {"manager": "labeller", "fieldsType": "FieldsV1", "fieldsV1": {
                    "f:metadata": {"f:labels": {".": {}, "f:app": {}}}}}
            ])
        );
        assert!(object["metadata"].get("labels").is_none());
    }
}
