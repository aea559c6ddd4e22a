//! The identity a cluster namespace records, under kube-bind's current key
//! or its legacy one (`example-backend.kube-bind.io/identity`, which early
//! kube-bind backends wrote), and the move of the legacy key to the current
//! one when that consumer binds, as kube-bind v0.8.2's backend moves it.
//! Pure but for [`move_to_current_key`].

use crate::api::keys::{IDENTITY_ANNOTATION, LEGACY_IDENTITY_ANNOTATION};
use k8s_openapi::api::core::v1::Namespace;
use serde_json::{Value, json};
use std::collections::BTreeMap;

/// The identity `annotations` (a cluster namespace's) record: the current
/// key's, else the legacy key's. Pure.
pub fn recorded(annotations: &BTreeMap<String, String>) -> Option<&str> {
    annotations
        .get(IDENTITY_ANNOTATION)
        .or_else(|| annotations.get(LEGACY_IDENTITY_ANNOTATION))
        .map(String::as_str)
}

/// The merge patch moving the legacy key to the current one, when
/// `annotations` record `identity` under the legacy key alone. Pure.
pub fn moved(annotations: &BTreeMap<String, String>, identity: &str) -> Option<Value> {
    let legacy_only = !annotations.contains_key(IDENTITY_ANNOTATION)
        && annotations
            .get(LEGACY_IDENTITY_ANNOTATION)
            .map(String::as_str)
            == Some(identity);
    legacy_only.then(|| {
        json!({"metadata": {"annotations": {
            IDENTITY_ANNOTATION: identity,
            LEGACY_IDENTITY_ANNOTATION: null,
        }}})
    })
}

/// Moves `existing`'s legacy key to the current one, when it records
/// `identity` there alone ([`moved`]), as `field_manager`.
pub async fn move_to_current_key(
    namespaces: &kube::Api<Namespace>,
    existing: &Namespace,
    identity: &str,
    field_manager: &str,
) -> kube::Result<()> {
    let annotations = existing.metadata.annotations.clone().unwrap_or_default();
    let Some(patch) = moved(&annotations, identity) else {
        return Ok(());
    };
    let params = kube::api::PatchParams {
        field_manager: Some(field_manager.to_string()),
        ..Default::default()
    };
    let name = existing.metadata.name.as_deref().unwrap_or_default();
    namespaces
        .patch(name, &params, &kube::api::Patch::Merge(patch))
        .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn annotations(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn the_current_key_is_read_first_and_the_legacy_one_otherwise() {
        let both = annotations(&[
            (IDENTITY_ANNOTATION, "a"),
            (LEGACY_IDENTITY_ANNOTATION, "b"),
        ]);
        assert_eq!(recorded(&both), Some("a"));
        let legacy = annotations(&[(LEGACY_IDENTITY_ANNOTATION, "b")]);
        assert_eq!(recorded(&legacy), Some("b"));
        assert_eq!(recorded(&annotations(&[])), None);
    }

    #[test]
    fn only_a_legacy_key_of_the_binders_identity_is_moved() {
        let legacy = annotations(&[(LEGACY_IDENTITY_ANNOTATION, "b")]);
        let patch = moved(&legacy, "b").expect("moved");
        assert_eq!(patch["metadata"]["annotations"][IDENTITY_ANNOTATION], "b");
        assert!(patch["metadata"]["annotations"][LEGACY_IDENTITY_ANNOTATION].is_null());
        assert_eq!(moved(&legacy, "c"), None, "another identity's");
        let current = annotations(&[
            (IDENTITY_ANNOTATION, "b"),
            (LEGACY_IDENTITY_ANNOTATION, "b"),
        ]);
        assert_eq!(moved(&current, "b"), None, "the current key is there");
        assert_eq!(moved(&annotations(&[]), "b"), None);
    }
}
