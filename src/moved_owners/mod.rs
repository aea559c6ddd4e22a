//! The app cluster's references to objects that move to the provider: held
//! aside on their dependents while `bindery migrate` removes the copied CRD,
//! put back by `bindery bind` once bindery serves the owners
//! ([`references`] decides; this module finds the objects and writes).

pub mod references;

use anyhow::{Context as _, Result};
use kube::api::{Api, ApiResource, DynamicObject, ListParams, Patch, PatchParams};
use kube::discovery::{Discovery, verbs};
use references::Renamed;
use serde_json::Value;

/// Every resource of the app cluster that can be listed and patched.
async fn resources(app: &kube::Client) -> Result<Vec<(ApiResource, bool)>> {
    let discovery = Discovery::new(app.clone())
        .run_aggregated()
        .await
        .context("discovering the app cluster's resources")?;
    Ok(discovery
        .groups()
        .flat_map(|group| group.recommended_resources())
        .filter(|(_, caps)| {
            caps.supports_operation(verbs::LIST) && caps.supports_operation(verbs::PATCH)
        })
        .map(|(resource, caps)| {
            let namespaced = caps.scope == kube::discovery::Scope::Namespaced;
            (resource, namespaced)
        })
        .collect())
}

/// Each object of `resource` (as its metadata), a page at a time.
async fn objects(
    app: &kube::Client,
    resource: &ApiResource,
    selector: Option<&str>,
) -> Result<Vec<Value>> {
    let api = Api::<DynamicObject>::all_with(app.clone(), resource);
    let mut params = ListParams::default().limit(500);
    if let Some(selector) = selector {
        params = params.labels(selector);
    }
    let mut all = Vec::new();
    loop {
        let page = api
            .list_metadata(&params)
            .await
            .with_context(|| format!("listing {}", resource.plural))?;
        all.extend(
            page.items
                .iter()
                .map(|o| serde_json::json!({"metadata": serde_json::to_value(&o.metadata).unwrap_or_default()})),
        );
        match page.metadata.continue_.filter(|c| !c.is_empty()) {
            Some(token) => params = params.continue_token(&token),
            None => return Ok(all),
        }
    }
}

/// Patches `object` with what `decide` makes of it; on a conflict, reads
/// it again and decides again. Whether it was patched.
async fn patch_each(
    app: &kube::Client,
    resource: &ApiResource,
    namespaced: bool,
    object: &Value,
    decide: &dyn Fn(&Value) -> Option<Value>,
) -> Result<bool> {
    let name = object["metadata"]["name"].as_str().unwrap_or_default();
    let api = match object["metadata"]["namespace"].as_str() {
        Some(namespace) if namespaced => {
            Api::<DynamicObject>::namespaced_with(app.clone(), namespace, resource)
        }
        _ => Api::<DynamicObject>::all_with(app.clone(), resource),
    };
    let mut current = object.clone();
    for _ in 0..5 {
        let Some(patch) = decide(&current) else {
            return Ok(false);
        };
        match api
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => return Ok(true),
            Err(kube::Error::Api(status)) if status.code == 409 => {
                let Some(read) = api.get_metadata_opt(name).await? else {
                    return Ok(false);
                };
                current = serde_json::json!({"metadata": serde_json::to_value(&read.metadata)?});
            }
            Err(kube::Error::Api(status)) if status.code == 404 => return Ok(false),
            Err(error) => {
                return Err(error).with_context(|| format!("patching {} {name}", resource.plural));
            }
        }
    }
    anyhow::bail!(
        "{} {name}: changed five times while it was patched; run again",
        resource.plural
    )
}

/// Holds aside every app object's references to the moved objects
/// (`renamed`'s keys), except the moved objects' own. The count of objects
/// changed.
pub async fn hold_all(app: &kube::Client, renamed: &Renamed) -> Result<usize> {
    let mut changed = 0;
    for (resource, namespaced) in resources(app).await? {
        for object in objects(app, &resource, None).await? {
            let moved = object["metadata"]["uid"]
                .as_str()
                .is_some_and(|u| renamed.contains_key(u));
            if moved || references::hold(&object, renamed).is_none() {
                continue;
            }
            let decide = |o: &Value| references::hold(o, renamed);
            if patch_each(app, &resource, namespaced, &object, &decide).await? {
                changed += 1;
            }
        }
    }
    Ok(changed)
}

/// Puts back the references held on app objects whose owners' API
/// (`group/version`, as an ownerReference's `apiVersion`) is in `served`.
/// The count of objects changed.
pub async fn put_back_all(app: &kube::Client, served: &[String]) -> Result<usize> {
    let is_served = |api_version: &str| served.iter().any(|s| s == api_version);
    let mut changed = 0;
    let selector = format!("{}=true", references::HELD_LABEL);
    for (resource, namespaced) in resources(app).await? {
        for object in objects(app, &resource, Some(&selector)).await? {
            let decide = |o: &Value| references::put_back(o, &is_served);
            if patch_each(app, &resource, namespaced, &object, &decide).await? {
                changed += 1;
            }
        }
    }
    Ok(changed)
}
