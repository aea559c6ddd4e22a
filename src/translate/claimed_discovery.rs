//! Discovery and OpenAPI of the claimed resources on a consumer's workspace
//! path: an app cluster's own documents narrowed to the resources that the
//! consumer's accepted claims name, and merged into the documents of the
//! export. Pure: the documents come in as JSON values.

use crate::api::PermissionClaim;
use serde_json::Value;

/// The verbs the workspace serves on a claimed resource. No
/// `deletecollection`: a claim is checked object by object.
pub const CLAIMED_VERBS: [&str; 7] = [
    "create", "delete", "get", "list", "patch", "update", "watch",
];

/// The group/resources that accepted claims name.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClaimedResources(Vec<(String, String)>);

impl ClaimedResources {
    pub fn new(claims: &[PermissionClaim]) -> Self {
        let mut named: Vec<(String, String)> = claims
            .iter()
            .map(|c| (c.group.clone(), c.resource.clone()))
            .collect();
        named.sort();
        named.dedup();
        Self(named)
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn has(&self, group: &str, resource: &str) -> bool {
        self.0.iter().any(|(g, r)| g == group && r == resource)
    }

    pub fn has_group(&self, group: &str) -> bool {
        self.0.iter().any(|(g, _)| g == group)
    }

    /// Whether a claim names a resource outside the core group.
    pub fn has_named_group(&self) -> bool {
        self.0.iter().any(|(g, _)| !g.is_empty())
    }

    /// Narrows an `APIGroupDiscoveryList` (aggregated `/api` or `/apis`) to
    /// the claimed resources, with the workspace's verbs and no
    /// subresources; versions and groups left empty go.
    pub fn narrow_aggregated(&self, list: &mut Value) {
        let Some(items) = list.get_mut("items").and_then(Value::as_array_mut) else {
            return;
        };
        for item in items.iter_mut() {
            let group = item["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            let Some(versions) = item.get_mut("versions").and_then(Value::as_array_mut) else {
                continue;
            };
            for version in versions.iter_mut() {
                if let Some(resources) = version.get_mut("resources").and_then(Value::as_array_mut)
                {
                    resources.retain(|r| self.has(&group, r["resource"].as_str().unwrap_or("")));
                    for resource in resources.iter_mut() {
                        self.narrow_resource(resource);
                    }
                }
            }
            versions.retain(|v| v["resources"].as_array().is_some_and(|r| !r.is_empty()));
        }
        items.retain(|i| i["versions"].as_array().is_some_and(|v| !v.is_empty()));
    }

    /// Narrows an `APIResourceList` (`/api/<v>`, `/apis/<g>/<v>`).
    pub fn narrow_resource_list(&self, list: &mut Value) {
        let group_version = list["groupVersion"].as_str().unwrap_or_default();
        let group = match group_version.split_once('/') {
            Some((group, _)) => group.to_string(),
            None => String::new(),
        };
        if let Some(resources) = list.get_mut("resources").and_then(Value::as_array_mut) {
            resources.retain(|r| self.has(&group, r["name"].as_str().unwrap_or("")));
            for resource in resources.iter_mut() {
                self.narrow_resource(resource);
            }
        }
    }

    /// Narrows an `APIGroupList` (`/apis`) to the groups claims name.
    pub fn narrow_group_list(&self, list: &mut Value) {
        if let Some(groups) = list.get_mut("groups").and_then(Value::as_array_mut) {
            groups.retain(|g| self.has_group(g["name"].as_str().unwrap_or("")));
        }
    }

    /// Narrows the OpenAPI v3 root to the group-versions of claimed groups.
    pub fn narrow_openapi_root(&self, root: &mut Value) {
        if let Some(paths) = root.get_mut("paths").and_then(Value::as_object_mut) {
            paths.retain(|key, _| openapi_group(key).is_some_and(|g| self.has_group(g)));
        }
    }

    /// Narrows an OpenAPI v3 group-version document of `group` to the paths
    /// of claimed resources (collections and objects, no subresources).
    pub fn narrow_openapi_document(&self, group: &str, document: &mut Value) {
        if let Some(paths) = document.get_mut("paths").and_then(Value::as_object_mut) {
            paths.retain(|path, _| {
                resource_of_openapi_path(path).is_some_and(|resource| self.has(group, resource))
            });
        }
    }

    fn narrow_resource(&self, resource: &mut Value) {
        if let Some(object) = resource.as_object_mut() {
            object.insert("verbs".into(), serde_json::json!(CLAIMED_VERBS));
            object.shift_remove("subresources");
        }
    }
}

/// The group of an OpenAPI v3 root key (`api/v1` → "", `apis/g/v` → g).
fn openapi_group(key: &str) -> Option<&str> {
    let segments: Vec<&str> = key.split('/').collect();
    match segments.as_slice() {
        ["api", _] => Some(""),
        ["apis", group, _] => Some(group),
        _ => None,
    }
}

/// The resource an OpenAPI path serves as a collection or an object:
/// `/api/v1/namespaces/{namespace}/configmaps/{name}` → `configmaps`;
/// `None` for subresources and the namespaces of `/namespaces/{name}`.
fn resource_of_openapi_path(path: &str) -> Option<&str> {
    let segments: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    let mut rest: &[&str] = match segments.as_slice() {
        ["api", _, rest @ ..] => rest,
        ["apis", _, _, rest @ ..] => rest,
        _ => return None,
    };
    if let ["watch", tail @ ..] = rest {
        rest = tail;
    }
    if let ["namespaces", "{namespace}", tail @ ..] = rest
        && !tail.is_empty()
    {
        rest = tail;
    }
    match rest {
        [resource] | [resource, "{name}"] => Some(resource),
        _ => None,
    }
}

/// Adds `claimed`'s groups to the `APIGroupDiscoveryList` `into`; a group
/// both have gets the claimed versions' resources added.
pub fn merge_aggregated(into: &mut Value, claimed: Value) {
    let Value::Array(claimed_items) = claimed["items"].clone() else {
        return;
    };
    let Some(items) = into.get_mut("items").and_then(Value::as_array_mut) else {
        return;
    };
    for claimed_item in claimed_items {
        let name = &claimed_item["metadata"]["name"];
        let Some(item) = items.iter_mut().find(|i| &i["metadata"]["name"] == name) else {
            items.push(claimed_item);
            continue;
        };
        let Value::Array(claimed_versions) = claimed_item["versions"].clone() else {
            continue;
        };
        let Some(versions) = item.get_mut("versions").and_then(Value::as_array_mut) else {
            continue;
        };
        for claimed_version in claimed_versions {
            match versions
                .iter_mut()
                .find(|v| v["version"] == claimed_version["version"])
            {
                Some(version) => {
                    if let (Some(resources), Value::Array(more)) = (
                        version.get_mut("resources").and_then(Value::as_array_mut),
                        claimed_version["resources"].clone(),
                    ) {
                        resources.extend(more);
                    }
                }
                None => versions.push(claimed_version),
            }
        }
    }
}

/// Adds the claimed resources of an `APIResourceList` to the export's one
/// of the same group-version (if there is one).
pub fn merge_resource_list(into: Option<Value>, claimed: Value) -> Value {
    let Some(mut into) = into else {
        return claimed;
    };
    if let (Some(resources), Value::Array(more)) = (
        into.get_mut("resources").and_then(Value::as_array_mut),
        claimed["resources"].clone(),
    ) {
        resources.extend(more);
    }
    into
}

/// Adds the claimed groups of an `APIGroupList` the export's list lacks.
pub fn merge_group_list(into: &mut Value, claimed: Value) {
    let Value::Array(claimed_groups) = claimed["groups"].clone() else {
        return;
    };
    if let Some(groups) = into.get_mut("groups").and_then(Value::as_array_mut) {
        for group in claimed_groups {
            if !groups.iter().any(|g| g["name"] == group["name"]) {
                groups.push(group);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn claimed(pairs: &[(&str, &str)]) -> ClaimedResources {
        let claims: Vec<PermissionClaim> = pairs
            .iter()
            .map(|(g, r)| serde_json::from_value(json!({"group": g, "resource": r})).unwrap())
            .collect();
        ClaimedResources::new(&claims)
    }

    #[test]
    fn aggregated_lists_keep_only_claimed_resources_with_the_workspace_verbs() {
        let mut core = json!({"kind": "APIGroupDiscoveryList", "items": [{"metadata": {},
            "versions": [{"version": "v1", "resources": [
                {"resource": "configmaps", "verbs": ["deletecollection"]},
                {"resource": "pods", "verbs": ["get"], "subresources": [{"subresource": "log"}]},
                {"resource": "secrets", "verbs": ["get"]}]}]}]});
        claimed(&[("", "configmaps")]).narrow_aggregated(&mut core);
        let resources = &core["items"][0]["versions"][0]["resources"];
        assert_eq!(resources.as_array().unwrap().len(), 1);
        assert_eq!(resources[0]["resource"], "configmaps");
        assert_eq!(resources[0]["verbs"], json!(CLAIMED_VERBS));

        let mut groups = json!({"items": [
            {"metadata": {"name": "apps"}, "versions": [{"version": "v1", "resources": [
                {"resource": "deployments", "subresources": [{"subresource": "scale"}]}]}]},
            {"metadata": {"name": "batch"}, "versions": [{"version": "v1", "resources": [
                {"resource": "jobs"}]}]}]});
        claimed(&[("apps", "deployments"), ("", "jobs")]).narrow_aggregated(&mut groups);
        assert_eq!(groups["items"].as_array().unwrap().len(), 1, "{groups}");
        assert!(claimed(&[("apps", "deployments")]).has_named_group());
        assert!(!claimed(&[("", "configmaps")]).has_named_group());
        assert_eq!(groups["items"][0]["metadata"]["name"], "apps");
        assert!(
            groups["items"][0]["versions"][0]["resources"][0]
                .get("subresources")
                .is_none()
        );
    }

    #[test]
    fn resource_lists_keep_claimed_resources_of_their_group_only() {
        let mut core = json!({"groupVersion": "v1", "resources": [
            {"name": "configmaps"}, {"name": "pods/log"}, {"name": "pods"}]});
        claimed(&[("", "configmaps"), ("", "pods")]).narrow_resource_list(&mut core);
        let names: Vec<&str> = core["resources"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["configmaps", "pods"], "no subresources");
        let mut apps = json!({"groupVersion": "apps/v1", "resources": [{"name": "configmaps"}]});
        claimed(&[("", "configmaps")]).narrow_resource_list(&mut apps);
        assert_eq!(apps["resources"], json!([]), "same name, other group");
    }

    #[test]
    fn openapi_keeps_the_paths_of_claimed_collections_and_objects() {
        let mut document = json!({"paths": {
            "/api/v1/configmaps": {}, "/api/v1/namespaces/{namespace}/configmaps": {},
            "/api/v1/namespaces/{namespace}/configmaps/{name}": {},
            "/api/v1/watch/namespaces/{namespace}/configmaps/{name}": {},
            "/api/v1/namespaces/{namespace}/pods/{name}/log": {},
            "/api/v1/namespaces/{name}": {}, "/api/v1/namespaces/{namespace}/secrets": {},
            "/api/v1/": {}}, "components": {"schemas": {"x": {}}}});
        claimed(&[("", "configmaps"), ("", "pods")]).narrow_openapi_document("", &mut document);
        let mut kept: Vec<&String> = document["paths"].as_object().unwrap().keys().collect();
        kept.sort();
        assert_eq!(
            kept,
            [
                "/api/v1/configmaps",
                "/api/v1/namespaces/{namespace}/configmaps",
                "/api/v1/namespaces/{namespace}/configmaps/{name}",
                "/api/v1/watch/namespaces/{namespace}/configmaps/{name}",
            ]
        );
        assert_eq!(document["components"]["schemas"]["x"], json!({}));

        let mut root = json!({"paths": {"api/v1": {}, "apis/apps/v1": {}, "version": {},
            "apis/batch/v1": {}}});
        claimed(&[("", "configmaps"), ("apps", "deployments")]).narrow_openapi_root(&mut root);
        let mut kept: Vec<&String> = root["paths"].as_object().unwrap().keys().collect();
        kept.sort();
        assert_eq!(kept, ["api/v1", "apis/apps/v1"]);
    }

    #[test]
    fn merging_adds_groups_versions_and_resources_without_duplicating_groups() {
        let mut exported = json!({"items": [{"metadata": {"name": "db.example.com"},
            "versions": [{"version": "v1", "resources": [{"resource": "dbs"}]}]}]});
        merge_aggregated(
            &mut exported,
            json!({"items": [
                {"metadata": {"name": "db.example.com"}, "versions": [
                    {"version": "v1", "resources": [{"resource": "backups"}]},
                    {"version": "v2", "resources": [{"resource": "backups"}]}]},
                {"metadata": {"name": "apps"}, "versions": [
                    {"version": "v1", "resources": [{"resource": "deployments"}]}]}]}),
        );
        assert_eq!(exported["items"].as_array().unwrap().len(), 2);
        assert_eq!(
            exported["items"][0]["versions"][0]["resources"],
            json!([{"resource": "dbs"}, {"resource": "backups"}])
        );
        assert_eq!(exported["items"][0]["versions"][1]["version"], "v2");

        let list = merge_resource_list(None, json!({"resources": [{"name": "configmaps"}]}));
        assert_eq!(list["resources"][0]["name"], "configmaps");
        let list = merge_resource_list(
            Some(json!({"resources": [{"name": "dbs"}]})),
            json!({"resources": [{"name": "backups"}]}),
        );
        assert_eq!(
            list["resources"],
            json!([{"name": "dbs"}, {"name": "backups"}])
        );

        let mut groups = json!({"groups": [{"name": "db.example.com"}]});
        merge_group_list(
            &mut groups,
            json!({"groups": [{"name": "db.example.com"}, {"name": "apps"}]}),
        );
        assert_eq!(
            groups["groups"],
            json!([{"name": "db.example.com"}, {"name": "apps"}])
        );
    }
}
