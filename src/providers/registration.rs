//! The router's own APIServices (`bindery route --register-service`): one
//! per group/version the default provider serves, as `bindery bind` writes
//! them, naming the router's Service instead of one provider's bindery, so
//! that an app cluster bound to a first provider is pointed at the router
//! by starting it. Applied server-side under the router's field manager,
//! taking over `spec.service` and `spec.caBundle` from the bind that made
//! them; their other fields and labels stay as they were.

use crate::bind::app_objects::api_services;
use crate::bind::wire::GroupVersion;
use anyhow::{Context, Result, anyhow};
use base64::Engine;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use serde_json::{Value, json};

/// The field manager of the router's writes.
const FIELD_MANAGER: &str = "bindery-route";

/// The label the router's APIServices carry.
pub const ROUTED_LABEL: (&str, &str) = ("bindery.dev/served-by", "bindery-route");

/// The Service reference `NAMESPACE/NAME` names, at `port`.
pub fn service_ref(text: &str, port: u16) -> Result<Value, String> {
    match text.split_once('/') {
        Some((namespace, name))
            if crate::route::is_dns_label(namespace) && crate::route::is_dns_label(name) =>
        {
            Ok(json!({"namespace": namespace, "name": name, "port": port}))
        }
        _ => Err(format!("{text:?} is not NAMESPACE/NAME of a Service")),
    }
}

/// The named groups' versions of a discovery `APIGroupList`, the preferred
/// version first within each group.
pub fn group_versions(apis: &Value) -> Vec<GroupVersion> {
    let mut out = Vec::new();
    for group in apis["groups"].as_array().into_iter().flatten() {
        let Some(name) = group["name"].as_str().filter(|name| !name.is_empty()) else {
            continue;
        };
        let preferred = group["preferredVersion"]["version"].as_str();
        let mut versions: Vec<&str> = group["versions"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|version| version["version"].as_str())
            .collect();
        // A stable sort: the preferred version first, the rest as listed.
        versions.sort_by_key(|version| Some(*version) != preferred);
        out.extend(versions.into_iter().map(|version| GroupVersion {
            group: name.to_string(),
            version: version.to_string(),
        }));
    }
    out
}

/// The group/versions `default_provider` serves, from its discovery.
pub async fn served(default_provider: &kube::Client) -> Result<Vec<GroupVersion>> {
    let request = http::Request::get("/apis")
        .body(Vec::new())
        .expect("a GET request builds");
    let apis: Value = default_provider
        .request(request)
        .await
        .context("reading the default provider's discovery")?;
    Ok(group_versions(&apis))
}

/// The names of the APIServices of `group_versions`.
pub fn names(group_versions: &[GroupVersion]) -> Vec<String> {
    group_versions
        .iter()
        .map(crate::bind::app_objects::api_service_name)
        .collect()
}

/// Points the APIService of every group/version of `group_versions` (what
/// the default provider serves) at `service`, trusting `ca_pem` (the
/// router's serving CA); the names of the APIServices written.
pub async fn register(
    app: &kube::Client,
    group_versions: &[GroupVersion],
    service: &Value,
    ca_pem: &[u8],
) -> Result<Vec<String>> {
    if group_versions.is_empty() {
        return Err(anyhow!("the default provider serves no group to register"));
    }
    let ca_bundle = base64::engine::general_purpose::STANDARD.encode(ca_pem);
    let labels = json!({ROUTED_LABEL.0: ROUTED_LABEL.1});
    let api: Api<DynamicObject> =
        Api::all_with(app.clone(), &crate::app_binding::api_service_resource());
    let mut written = Vec::new();
    for object in api_services(group_versions, &labels, &ca_bundle, service) {
        let name = object["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        api.patch(
            &name,
            &PatchParams::apply(FIELD_MANAGER).force(),
            &Patch::Apply(&object),
        )
        .await
        .with_context(|| format!("registering the APIService {name}"))?;
        written.push(name);
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_named_group_version_is_registered_preferred_first() {
        let apis = json!({"kind": "APIGroupList", "groups": [
            {"name": "db.example.com", "preferredVersion": {"version": "v2"},
                "versions": [{"version": "v1"}, {"version": "v2"}]},
            {"name": "", "versions": [{"version": "v1"}]},
            {"name": "routed.example.com", "versions": [{"version": "v1"}]},
        ]});
        let listed: Vec<String> = group_versions(&apis)
            .iter()
            .map(|gv| format!("{}/{}", gv.group, gv.version))
            .collect();
        assert_eq!(
            listed,
            [
                "db.example.com/v2",
                "db.example.com/v1",
                "routed.example.com/v1"
            ]
        );
    }

    #[test]
    fn a_service_is_named_by_namespace_and_name() {
        assert_eq!(
            service_ref("kube-bind/bindery-router", 443),
            Ok(json!({"namespace": "kube-bind", "name": "bindery-router", "port": 443}))
        );
        for bad in ["bindery-router", "a/b/c", "Kube/x", "/x"] {
            assert!(service_ref(bad, 443).is_err(), "{bad}");
        }
    }
}
