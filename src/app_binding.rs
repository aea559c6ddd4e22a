//! Which APIServiceBinding of an app cluster is bindery's binding of an
//! export. bindery names its own [`binding_name`], never as the export:
//! kube-bind's konnector pairs every export of the cluster namespace its
//! kubeconfig names with the app cluster's binding of the same name, and
//! starts syncing it (its finalizer on every object, its conditions on the
//! binding and the BoundSchema). bindery's consumer of an app cluster has
//! the same cluster namespace as kube-bind's binding of that app cluster, so
//! a konnector kept for another binding, beside bindery or after `bindery
//! migrate`, would take bindery's exports for its own.

use crate::api::APIServiceBinding;
use kube::api::Api;

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
