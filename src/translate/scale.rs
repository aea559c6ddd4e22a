//! A custom resource's Scale as kube-apiserver makes it from the object to
//! apply a patch to (apiextensions-apiserver's `scaleFromCustomResource`
//! and `scaleUpdatedObjectInfo`): names, uid, version and creation time
//! from the object, replicas from the CRD's paths. An object without the
//! spec replicas field gives replicas -2147483648, which a patch must
//! replace (kube-apiserver's 400 otherwise), so a patch scales an object
//! its GET of the Scale cannot show. Pure.

use crate::status::ApiError;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceSubresourceScale;
use serde_json::{Map, Value, json};

/// The replicas of a Scale made from an object without its spec replicas.
pub const NO_REPLICAS: i64 = i32::MIN as i64;

/// Why no Scale is made from the object.
#[derive(Debug, PartialEq, Eq)]
pub enum Unscalable {
    /// A replicas field (or the selector) holds something else than an
    /// integer (a string): kube-apiserver's own error is the answer.
    NotAnInteger,
}

/// The Scale kube-apiserver patches for `object` (in whatever terms the
/// object is), by the CRD version's scale subresource `paths`.
pub fn scale_to_patch(
    object: &Value,
    paths: &CustomResourceSubresourceScale,
) -> Result<Value, Unscalable> {
    let spec = nested_int(object, &paths.spec_replicas_path)?.unwrap_or(NO_REPLICAS);
    let status = nested_int(object, &paths.status_replicas_path)?.unwrap_or(0);
    let selector = match &paths.label_selector_path {
        Some(path) => match nested(object, path) {
            None => None,
            Some(Value::String(selector)) => Some(selector.clone()),
            Some(_) => return Err(Unscalable::NotAnInteger),
        },
        None => None,
    };
    let metadata = &object["metadata"];
    let mut meta = Map::new();
    for field in [
        "name",
        "namespace",
        "uid",
        "resourceVersion",
        "creationTimestamp",
    ] {
        if let Some(value) = metadata.get(field).filter(|v| !v.is_null()) {
            meta.insert(field.into(), value.clone());
        }
    }
    let mut status_object = json!({"replicas": status});
    if let Some(selector) = selector.filter(|s| !s.is_empty()) {
        status_object["selector"] = Value::String(selector);
    }
    Ok(json!({
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": meta,
        "spec": {"replicas": spec},
        "status": status_object,
    }))
}

/// kube-apiserver's refusal of a patched Scale whose replicas are still
/// the placeholder of a missing field.
pub fn check_patched(
    scale: &Value,
    paths: &CustomResourceSubresourceScale,
) -> Result<(), ApiError> {
    if scale.pointer("/spec/replicas").and_then(Value::as_i64) == Some(NO_REPLICAS) {
        return Err(ApiError::bad_request(format!(
            "the spec replicas field {} cannot be empty",
            crate::wire::go_quote::go_quote(&paths.spec_replicas_path)
        )));
    }
    Ok(())
}

/// The value at `.a.b.c` of `object`.
fn nested<'a>(object: &'a Value, path: &str) -> Option<&'a Value> {
    path.trim_start_matches('.')
        .split('.')
        .try_fold(object, |value, field| value.as_object()?.get(field))
}

/// `unstructured.NestedInt64`: absent is `None`, an integer is itself,
/// anything else an error.
fn nested_int(object: &Value, path: &str) -> Result<Option<i64>, Unscalable> {
    match nested(object, path) {
        None => Ok(None),
        Some(value) => value.as_i64().map(Some).ok_or(Unscalable::NotAnInteger),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paths(selector: Option<&str>) -> CustomResourceSubresourceScale {
        CustomResourceSubresourceScale {
            spec_replicas_path: ".spec.replicas".into(),
            status_replicas_path: ".status.replicas".into(),
            label_selector_path: selector.map(str::to_string),
        }
    }

    #[test]
    fn the_scale_is_made_from_the_object() {
        let object = json!({"metadata": {"name": "a", "namespace": "n", "uid": "u",
            "resourceVersion": "7", "creationTimestamp": "2026-01-01T00:00:00Z",
            "labels": {"x": "y"}, "generation": 3},
            "spec": {"replicas": 2}, "status": {"replicas": 1, "selector": "app=a"}});
        assert_eq!(
            scale_to_patch(&object, &paths(Some(".status.selector"))).unwrap(),
            json!({"kind": "Scale", "apiVersion": "autoscaling/v1",
                "metadata": {"name": "a", "namespace": "n", "uid": "u",
                    "resourceVersion": "7", "creationTimestamp": "2026-01-01T00:00:00Z"},
                "spec": {"replicas": 2}, "status": {"replicas": 1, "selector": "app=a"}})
        );
    }

    #[test]
    fn an_object_without_replicas_scales_from_the_placeholder() {
        let object = json!({"metadata": {"name": "a"}, "spec": {"size": "small"}});
        let scale = scale_to_patch(&object, &paths(None)).unwrap();
        assert_eq!(scale["spec"]["replicas"], NO_REPLICAS);
        assert_eq!(scale["status"], json!({"replicas": 0}));
        let refused = check_patched(&scale, &paths(None)).unwrap_err();
        assert_eq!(refused.code, 400);
        assert_eq!(
            refused.message,
            r#"the spec replicas field ".spec.replicas" cannot be empty"#
        );
        let mut scaled = scale;
        scaled["spec"]["replicas"] = json!(3);
        assert!(check_patched(&scaled, &paths(None)).is_ok());
    }

    #[test]
    fn replicas_that_are_no_integer_are_the_providers_to_refuse() {
        let object = json!({"metadata": {"name": "a"}, "spec": {"replicas": "two"}});
        assert_eq!(
            scale_to_patch(&object, &paths(None)),
            Err(Unscalable::NotAnInteger)
        );
    }
}
