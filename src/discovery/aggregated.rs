//! Aggregated discovery, `apidiscovery.k8s.io/v2` `APIGroupDiscoveryList`:
//! every group, version and resource in one document, as kube-apiserver's CRD
//! discovery controller feeds it (groups by name, since all CRD groups share
//! priority 1000; versions by Kubernetes version priority; resources by name).

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinitionSpec;
use serde_json::{Map, Value, json};

use super::legacy::{SUBRESOURCE_VERBS, VERBS};
use super::served::Served;

/// `/apis` as `application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList`.
pub fn apis(specs: &[CustomResourceDefinitionSpec]) -> Value {
    let served = Served::new(specs);
    let items: Vec<Value> = served
        .groups
        .iter()
        .map(|g| {
            let versions: Vec<Value> = g
                .versions
                .iter()
                .map(|v| {
                    let resources: Vec<Value> = served
                        .crds_in(g.name, v)
                        .into_iter()
                        .map(|crd| resource(crd, g.name, v))
                        .collect();
                    json!({"version": v, "resources": resources, "freshness": "Current"})
                })
                .collect();
            json!({"metadata": {"name": g.name}, "versions": versions})
        })
        .collect();
    list(items)
}

/// `/api` as aggregated discovery: bindery serves no core group.
pub fn api() -> Value {
    list(Vec::new())
}

fn list(items: Vec<Value>) -> Value {
    json!({
        "kind": "APIGroupDiscoveryList",
        "apiVersion": "apidiscovery.k8s.io/v2",
        "metadata": {},
        "items": items,
    })
}

fn resource(crd: &super::served::Crd, group: &str, version: &str) -> Value {
    let mut r = Map::new();
    r.insert("resource".into(), crd.plural.into());
    r.insert(
        "responseKind".into(),
        json!({"group": group, "version": version, "kind": crd.kind}),
    );
    r.insert(
        "scope".into(),
        if crd.namespaced {
            "Namespaced"
        } else {
            "Cluster"
        }
        .into(),
    );
    r.insert("singularResource".into(), crd.singular.as_str().into());
    r.insert("verbs".into(), json!(VERBS));
    if !crd.short_names.is_empty() {
        r.insert("shortNames".into(), json!(crd.short_names));
    }
    if !crd.categories.is_empty() {
        r.insert("categories".into(), json!(crd.categories));
    }
    let sub = crd.version(version).and_then(|v| v.subresources.as_ref());
    let mut subresources = Vec::new();
    if sub.is_some_and(|s| s.status.is_some()) {
        subresources.push(json!({
            "subresource": "status",
            "responseKind": {"group": group, "version": version, "kind": crd.kind},
            "verbs": SUBRESOURCE_VERBS,
        }));
    }
    if sub.is_some_and(|s| s.scale.is_some()) {
        subresources.push(json!({
            "subresource": "scale",
            "responseKind": {"group": "autoscaling", "version": "v1", "kind": "Scale"},
            "verbs": SUBRESOURCE_VERBS,
        }));
    }
    if !subresources.is_empty() {
        r.insert("subresources".into(), subresources.into());
    }
    Value::Object(r)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::discovery::testdata::{spec, version};

    #[test]
    fn empty_set_is_an_empty_list() {
        for doc in [api(), apis(&[])] {
            assert_eq!(doc["kind"], "APIGroupDiscoveryList");
            assert_eq!(doc["apiVersion"], "apidiscovery.k8s.io/v2");
            assert_eq!(doc["items"], json!([]));
        }
    }

    #[test]
    fn resources_of_a_version_are_sorted_by_name() {
        let specs = [
            spec(
                "a.example.com",
                "Zebra",
                "Cluster",
                vec![version("v1", true)],
            ),
            spec(
                "a.example.com",
                "Apple",
                "Namespaced",
                vec![version("v1", true)],
            ),
        ];
        let doc = apis(&specs);
        let names: Vec<&str> = doc["items"][0]["versions"][0]["resources"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["resource"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["apples", "zebras"]);
        assert_eq!(
            doc["items"][0]["versions"][0]["resources"][0]["scope"],
            "Namespaced"
        );
        assert_eq!(
            doc["items"][0]["versions"][0]["resources"][1]["scope"],
            "Cluster"
        );
    }
}
