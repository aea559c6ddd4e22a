//! Which APIServiceBinding of an app cluster is bindery's binding of an
//! export. bindery names its own [`binding_name`], never as the export:
//! kube-bind's konnector pairs every export of the cluster namespace its
//! kubeconfig names with the app cluster's binding of the same name, and
//! starts syncing it (its finalizer on every object, its conditions on the
//! binding and the BoundSchema). bindery's consumer of an app cluster has
//! the same cluster namespace as kube-bind's binding of that app cluster, so
//! a konnector kept for another binding, beside bindery or after `bindery
//! migrate`, would take bindery's exports for its own. Also the labels of
//! what `bind` makes in an app cluster, and the availability of the
//! APIService a binding registers, which the controllers read back.

use crate::api::APIServiceBinding;
use kube::api::Api;
use serde_json::Value;

/// Label on everything bind makes.
pub const MANAGED_BY: (&str, &str) = ("app.kubernetes.io/managed-by", "bindery");
/// Label naming the binding an object belongs to.
pub const BINDING_LABEL: &str = "bindery.dev/binding";

/// The API resource of APIServices.
pub fn api_service_resource() -> kube::api::ApiResource {
    kube::api::ApiResource::from_gvk_with_plural(
        &kube::core::GroupVersionKind::gvk("apiregistration.k8s.io", "v1", "APIService"),
        "apiservices",
    )
}

/// An APIService's Available condition, from the object's `data` (its
/// status): whether it is True, and its message.
pub fn availability(data: &Value) -> (bool, String) {
    let available = data["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["type"] == "Available");
    (
        available.is_some_and(|c| c["status"] == "True"),
        available
            .and_then(|c| c["message"].as_str())
            .unwrap_or("no Available condition yet")
            .to_string(),
    )
}

/// What bindery's binding names start with.
pub const BINDING_NAME_PREFIX: &str = "bindery.";

/// The name of bindery's APIServiceBinding of `export`. Pure.
pub fn binding_name(export: &str) -> String {
    format!("{BINDING_NAME_PREFIX}{export}")
}

/// The names the binding of `export` may have, bindery's first; then the
/// export's own, as kube-bind's bindings have it (a binding `bindery
/// migrate` has not removed yet) and as bindery named its bindings before.
/// Pure.
pub fn binding_names(export: &str) -> [String; 2] {
    [binding_name(export), export.to_string()]
}

/// The app cluster's binding of `export`, under the first of
/// [`binding_names`] it has.
pub async fn find(app: &kube::Client, export: &str) -> kube::Result<Option<APIServiceBinding>> {
    let bindings = Api::<APIServiceBinding>::all(app.clone());
    for name in binding_names(export) {
        if let Some(binding) = bindings.get_opt(&name).await? {
            return Ok(Some(binding));
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn availability_reads_the_available_condition() {
        let up = json!({"status": {"conditions": [{"type": "Available", "status": "True", "message": "all checks passed"}]}});
        assert_eq!(availability(&up), (true, "all checks passed".into()));
        let down = json!({"status": {"conditions": [{"type": "Available", "status": "False", "message": "FailedDiscoveryCheck"}]}});
        assert_eq!(availability(&down), (false, "FailedDiscoveryCheck".into()));
        assert_eq!(
            availability(&json!({})),
            (false, "no Available condition yet".into())
        );
    }

    #[test]
    fn bindery_never_names_a_binding_as_its_export() {
        for export in ["postgresql", "postgresqlinstances.db.example.com"] {
            let [ours, theirs] = binding_names(export);
            assert_ne!(ours, export);
            assert_eq!(ours, binding_name(export));
            assert_eq!(theirs, export);
        }
    }
}
