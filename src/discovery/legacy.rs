//! Unaggregated discovery: `/api` (APIVersions), `/apis` (APIGroupList),
//! `/apis/<g>` (APIGroup) and `/apis/<g>/<v>` (APIResourceList), shaped as
//! kube-apiserver serves them for CRDs (its aggregator lists groups and
//! versions; its CRD discovery controller lists resources).

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinitionSpec;
use ring::digest;
use serde_json::{Map, Value, json};

use super::served::{Group, Served};

/// The verbs kube-apiserver lists for a CRD's resource.
pub(crate) const VERBS: [&str; 8] = [
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "create",
    "update",
    "watch",
];
/// The verbs of a CRD's status and scale subresources.
pub(crate) const SUBRESOURCE_VERBS: [&str; 3] = ["get", "patch", "update"];

/// `/api`: bindery serves no core group, so no versions. kube-apiserver lists
/// `serverAddressByClientCIDRs` (always); `server_address` (`host:port`
/// clients reach this server at) fills it the same way, else it is empty.
pub fn api_versions(server_address: Option<&str>) -> Value {
    let cidrs: Vec<Value> = server_address
        .map(|a| json!({"clientCIDR": "0.0.0.0/0", "serverAddress": a}))
        .into_iter()
        .collect();
    json!({"kind": "APIVersions", "versions": [], "serverAddressByClientCIDRs": cidrs})
}

/// `/apis`: every served group. kube-apiserver's aggregator orders the groups
/// of CRDs (all of group priority 1000) by the name of their first APIService,
/// `<version>.<group>`, and each group's versions by Kubernetes version
/// priority; the first is the preferred version.
pub fn api_group_list(specs: &[CustomResourceDefinitionSpec]) -> Value {
    let served = Served::new(specs);
    let mut groups: Vec<(String, &Group)> = served
        .groups
        .iter()
        .map(|g| {
            let first = g
                .versions
                .iter()
                .map(|v| format!("{v}.{}", g.name))
                .min()
                .unwrap_or_default();
            (first, g)
        })
        .collect();
    groups.sort_by(|a, b| a.0.cmp(&b.0));
    let groups: Vec<Value> = groups.into_iter().map(|(_, g)| group_json(g)).collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

/// `/apis/<g>`, or `None` when no CRD serves group `group`.
pub fn api_group(specs: &[CustomResourceDefinitionSpec], group: &str) -> Option<Value> {
    let served = Served::new(specs);
    let g = served.group(group)?;
    let mut out = Map::new();
    out.insert("kind".into(), "APIGroup".into());
    out.insert("apiVersion".into(), "v1".into());
    if let Value::Object(fields) = group_json(g) {
        out.extend(fields);
    }
    Some(Value::Object(out))
}

fn group_json(g: &Group) -> Value {
    let versions: Vec<Value> = g
        .versions
        .iter()
        .map(|v| json!({"groupVersion": format!("{}/{v}", g.name), "version": v}))
        .collect();
    let preferred = versions.first().cloned().unwrap_or(Value::Null);
    json!({"name": g.name, "versions": versions, "preferredVersion": preferred})
}

/// `/apis/<g>/<v>`, or `None` when no CRD serves that group-version. Each CRD
/// is listed with its `status` and then `scale` subresource, if that version
/// has them.
pub fn api_resource_list(
    specs: &[CustomResourceDefinitionSpec],
    group: &str,
    version: &str,
) -> Option<Value> {
    let served = Served::new(specs);
    let crds = served.crds_in(group, version);
    if crds.is_empty() {
        return None;
    }
    let mut resources = Vec::new();
    for crd in crds {
        let mut r = Map::new();
        r.insert("name".into(), crd.plural.into());
        r.insert("singularName".into(), crd.singular.as_str().into());
        r.insert("namespaced".into(), crd.namespaced.into());
        r.insert("kind".into(), crd.kind.into());
        r.insert("verbs".into(), json!(VERBS));
        if !crd.short_names.is_empty() {
            r.insert("shortNames".into(), json!(crd.short_names));
        }
        if !crd.categories.is_empty() {
            r.insert("categories".into(), json!(crd.categories));
        }
        if let Some(storage) = crd.storage_version() {
            r.insert(
                "storageVersionHash".into(),
                storage_version_hash(crd.group, storage, crd.kind).into(),
            );
        }
        resources.push(Value::Object(r));
        let sub = crd.version(version).and_then(|v| v.subresources.as_ref());
        if sub.is_some_and(|s| s.status.is_some()) {
            resources.push(json!({
                "name": format!("{}/status", crd.plural),
                "singularName": "",
                "namespaced": crd.namespaced,
                "kind": crd.kind,
                "verbs": SUBRESOURCE_VERBS,
            }));
        }
        if sub.is_some_and(|s| s.scale.is_some()) {
            resources.push(json!({
                "name": format!("{}/scale", crd.plural),
                "singularName": "",
                "namespaced": crd.namespaced,
                "group": "autoscaling",
                "version": "v1",
                "kind": "Scale",
                "verbs": SUBRESOURCE_VERBS,
            }));
        }
    }
    Some(json!({
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": format!("{group}/{version}"),
        "resources": resources,
    }))
}

/// `storageVersionHash`: base64 of the first 8 bytes of the SHA-256 of
/// `<group>/<version>/<kind>` for the storage version.
pub fn storage_version_hash(group: &str, version: &str, kind: &str) -> String {
    use base64::Engine as _;
    let d = digest::digest(
        &digest::SHA256,
        format!("{group}/{version}/{kind}").as_bytes(),
    );
    base64::engine::general_purpose::STANDARD.encode(&d.as_ref()[..8])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::discovery::testdata::{spec, version};

    #[test]
    fn storage_version_hash_matches_kube_apiserver() {
        // Values from a real kube-apiserver 1.34 (testdata/real).
        assert_eq!(
            storage_version_hash("testing.bindery.dev", "v1", "Gizmo"),
            "BGHg7xkp2uM="
        );
        assert_eq!(
            storage_version_hash("testing.bindery.dev", "v1", "GizmoClass"),
            "iex83+mZJHs="
        );
    }

    #[test]
    fn unknown_group_or_version_is_none() {
        let specs = [spec(
            "a.example.com",
            "Thing",
            "Namespaced",
            vec![version("v1", true)],
        )];
        assert!(api_group(&specs, "b.example.com").is_none());
        assert!(api_resource_list(&specs, "a.example.com", "v2").is_none());
        assert!(api_resource_list(&specs, "b.example.com", "v1").is_none());
        assert!(api_group(&specs, "a.example.com").is_some());
        assert!(api_resource_list(&specs, "a.example.com", "v1").is_some());
    }

    #[test]
    fn unserved_versions_do_not_exist() {
        let mut v2 = version("v2", false);
        v2.storage = true;
        let mut v1 = version("v1", true);
        v1.storage = false;
        let specs = [spec("a.example.com", "Thing", "Cluster", vec![v1, v2])];
        assert!(api_resource_list(&specs, "a.example.com", "v2").is_none());
        let list = api_resource_list(&specs, "a.example.com", "v1").unwrap();
        // The storage version is not served: no hash, as kube-apiserver.
        assert_eq!(list["resources"][0].get("storageVersionHash"), None);
        assert_eq!(list["resources"][0]["namespaced"], false);
        let group = api_group(&specs, "a.example.com").unwrap();
        assert_eq!(group["versions"].as_array().unwrap().len(), 1);
        // A spec that serves nothing is not there at all.
        let specs = [spec(
            "a.example.com",
            "Thing",
            "Cluster",
            vec![version("v1", false)],
        )];
        assert_eq!(api_group_list(&specs)["groups"], json!([]));
    }

    #[test]
    fn groups_are_ordered_by_their_first_apiservice_name() {
        // APIServices "alpha.zeta.io" < "v1.beta.io": the aggregator lists
        // zeta.io first (aggregated discovery sorts by group name instead).
        let specs = [
            spec("beta.io", "B", "Cluster", vec![version("v1", true)]),
            spec("zeta.io", "Z", "Cluster", vec![version("alpha", true)]),
        ];
        let names: Vec<Value> = api_group_list(&specs)["groups"]
            .as_array()
            .unwrap()
            .iter()
            .map(|g| g["name"].clone())
            .collect();
        assert_eq!(names, [json!("zeta.io"), json!("beta.io")]);
        let agg = crate::discovery::aggregated::apis(&specs);
        assert_eq!(agg["items"][0]["metadata"]["name"], "beta.io");
    }

    #[test]
    fn names_are_defaulted_like_kube_apiserver() {
        let mut s = spec(
            "a.example.com",
            "BigThing",
            "Namespaced",
            vec![version("v1", true)],
        );
        s.names.singular = None;
        let list = api_resource_list(&[s], "a.example.com", "v1").unwrap();
        assert_eq!(list["resources"][0]["singularName"], "bigthing");
    }

    #[test]
    fn api_lists_no_versions() {
        assert_eq!(
            api_versions(None),
            json!({"kind": "APIVersions", "versions": [], "serverAddressByClientCIDRs": []})
        );
        assert_eq!(
            api_versions(Some("10.0.0.1:6443"))["serverAddressByClientCIDRs"],
            json!([{"clientCIDR": "0.0.0.0/0", "serverAddress": "10.0.0.1:6443"}])
        );
    }
}
