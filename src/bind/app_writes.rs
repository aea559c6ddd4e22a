//! What `bind` and `unbind` write to the app cluster, and how: server-side
//! applies under bind's field manager, creates of what is made only once,
//! the APIServiceBinding CRD made bindery's, the retirement of a binding
//! bindery named as its export before, and the deletes by label. Also the
//! kinds bind writes and where each lives.

use super::app_objects;
use anyhow::{Context, Result, anyhow, bail};
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams};
use kube::core::GroupVersionKind;
use serde_json::Value;
use std::time::{Duration, Instant};

const FIELD_MANAGER: &str = "bindery-bind";

/// Makes the APIServiceBinding CRD bindery's: created when missing; one
/// kube-bind installed (it lacks `spec.permissionClaims`, which kube-apiserver
/// would refuse on bindery's binding as a field not declared in schema) gets
/// bindery's schema, a superset of kube-bind's, without bindery's labels, so
/// that unbinding never removes a CRD kube-bind's own bindings still use.
pub(super) async fn install_binding_crd(app: &kube::Client) -> Result<()> {
    let crd = app_objects::binding_crd();
    let (resource, _, name) = locate(&crd)?;
    let Some(existing) = dynamic(app, &resource, None).get_opt(&name).await? else {
        return create_if_missing(app, &crd).await;
    };
    if app_objects::binding_crd_is_bindery_s(&existing.data) {
        return Ok(());
    }
    let mut schema_only = crd;
    if let Some(metadata) = schema_only["metadata"].as_object_mut() {
        metadata.remove("labels");
    }
    apply(app, &schema_only).await?;
    eprintln!("The app cluster's APIServiceBinding CRD (kube-bind's) now has bindery's fields too");
    Ok(())
}

pub(super) async fn apply(app: &kube::Client, object: &Value) -> Result<()> {
    let (resource, namespace, name) = locate(object)?;
    dynamic(app, &resource, namespace.as_deref())
        .patch(
            &name,
            &PatchParams::apply(FIELD_MANAGER).force(),
            &Patch::Apply(object),
        )
        .await
        .with_context(|| format!("applying {} {name}", object["kind"]))?;
    Ok(())
}

/// Deletes bindery's binding of `export` named as the export, as bindery
/// named its bindings before [`app_binding`]; whether there was one.
/// kube-bind's binding of that name (`bindery migrate` deletes it) stays.
pub(super) async fn retire_binding_named_as_export(
    app: &kube::Client,
    export: &str,
) -> Result<bool> {
    let bindings = dynamic(app, &binding_resource(), None);
    let Some(old) = bindings.get_opt(export).await? else {
        return Ok(false);
    };
    if kube::ResourceExt::labels(&old)
        .get(crate::app_binding::BINDING_LABEL)
        .map(String::as_str)
        != Some(export)
    {
        return Ok(false);
    }
    match bindings.delete(export, &DeleteParams::default()).await {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(false),
        Err(error) => Err(error.into()),
    }
}

/// Creates `object` unless one of its name exists (kept as it is then). One
/// being deleted (a namespace or CRD an unbind just removed) is waited for.
pub(super) async fn create_if_missing(app: &kube::Client, object: &Value) -> Result<()> {
    let (resource, namespace, name) = locate(object)?;
    let api = dynamic(app, &resource, namespace.as_deref());
    let deadline = Instant::now() + Duration::from_secs(120);
    let existing = loop {
        match api.get_opt(&name).await? {
            Some(found) if found.metadata.deletion_timestamp.is_some() => {
                if Instant::now() > deadline {
                    bail!("{} {name} is still being deleted", object["kind"]);
                }
                tokio::time::sleep(Duration::from_millis(300)).await;
            }
            other => break other,
        }
    };
    if existing.is_none() {
        let typed: DynamicObject = serde_json::from_value(object.clone())?;
        api.create(&Default::default(), &typed)
            .await
            .with_context(|| format!("creating {} {name}", object["kind"]))?;
    }
    Ok(())
}

pub(super) fn dynamic(
    app: &kube::Client,
    resource: &ApiResource,
    namespace: Option<&str>,
) -> Api<DynamicObject> {
    match namespace {
        Some(ns) => Api::namespaced_with(app.clone(), ns, resource),
        None => Api::all_with(app.clone(), resource),
    }
}

/// The API resource, namespace and name of `object`.
pub(super) fn locate(object: &Value) -> Result<(ApiResource, Option<String>, String)> {
    let resource = resource_of(
        object["apiVersion"].as_str().unwrap_or_default(),
        object["kind"].as_str().unwrap_or_default(),
    )?;
    Ok((
        resource,
        object["metadata"]["namespace"].as_str().map(str::to_string),
        object["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
    ))
}

/// The API resource of a kind bind writes.
pub(super) fn resource_of(api_version: &str, kind: &str) -> Result<ApiResource> {
    let plural = plural_of(kind).ok_or_else(|| anyhow!("bind does not write {kind}"))?;
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    Ok(ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(group, version, kind),
        plural,
    ))
}

pub(super) fn plural_of(kind: &str) -> Option<&'static str> {
    Some(match kind {
        "Namespace" => "namespaces",
        "ServiceAccount" => "serviceaccounts",
        "Secret" => "secrets",
        "ConfigMap" => "configmaps",
        "Service" => "services",
        "ClusterRole" => "clusterroles",
        "ClusterRoleBinding" => "clusterrolebindings",
        "RoleBinding" => "rolebindings",
        "APIService" => "apiservices",
        "APIServiceBinding" => "apiservicebindings",
        "CustomResourceDefinition" => "customresourcedefinitions",
        _ => return None,
    })
}

pub(super) fn binding_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("kube-bind.io", "v1alpha2", "APIServiceBinding"),
        "apiservicebindings",
    )
}

/// Deletes bind's objects carrying `labels`, bindings and APIServices first,
/// the namespace and the CRD last; none of the kinds `kept`.
pub(super) async fn delete_labelled(app: &kube::Client, labels: &str, kept: &[&str]) -> Result<()> {
    let kinds = [
        ("kube-bind.io/v1alpha2", "APIServiceBinding", false),
        ("apiregistration.k8s.io/v1", "APIService", false),
        ("v1", "Secret", true),
        ("v1", "ConfigMap", true),
        ("v1", "Service", true),
        ("v1", "ServiceAccount", true),
        ("rbac.authorization.k8s.io/v1", "RoleBinding", true),
        ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding", false),
        ("rbac.authorization.k8s.io/v1", "ClusterRole", false),
        ("v1", "Namespace", false),
        ("apiextensions.k8s.io/v1", "CustomResourceDefinition", false),
    ];
    for (api_version, kind, namespaced) in kinds {
        if kept.contains(&kind) {
            continue;
        }
        let resource = resource_of(api_version, kind)?;
        // Namespaced kinds in every namespace: the claimed objects copied
        // into consumer namespaces carry the binding's labels too.
        let found = match dynamic(app, &resource, None)
            .list(&ListParams::default().labels(labels))
            .await
        {
            Ok(list) => list.items,
            Err(kube::Error::Api(s)) if s.code == 404 => continue,
            Err(e) => return Err(e.into()),
        };
        for object in found {
            let name = object.metadata.name.clone().unwrap_or_default();
            let namespace = object.metadata.namespace.clone();
            let api = dynamic(app, &resource, namespace.as_deref().filter(|_| namespaced));
            match api.delete(&name, &DeleteParams::default()).await {
                Ok(_) => {}
                Err(kube::Error::Api(s)) if s.code == 404 => {}
                Err(e) => return Err(anyhow!(e).context(format!("deleting {kind} {name}"))),
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_bind_writes_can_be_located() {
        let mut all = vec![app_objects::namespace(), app_objects::binding_crd()];
        all.extend(app_objects::account());
        for object in &all {
            let (_, _, name) = locate(object).unwrap();
            assert!(!name.is_empty());
        }
    }
}
