//! The generated documents against a real kube-apiserver 1.34 serving the
//! same CRDs (`testdata/crds.yaml`; responses in `testdata/real/`, captured
//! by `conformance/reference/capture-discovery.sh`). The capture already
//! dropped the real server's other groups and paths; what is normalized here
//! is only what cannot match: the order in which the real server lists a
//! group-version's CRDs (its informer's), and the `?hash=` of the v3 root
//! (the hash of the real server's bytes).

use serde_json::{Value, json};

use super::testdata::{assert_same, captured_specs, captured_specs_all_versions, real};
use super::{aggregated, legacy, openapi};

/// The served group-versions of the captured CRDs.
fn group_versions() -> Vec<(String, String)> {
    let mut out = Vec::new();
    for s in captured_specs() {
        for v in s.versions {
            let gv = (s.group.clone(), v.name);
            if !out.contains(&gv) {
                out.push(gv);
            }
        }
    }
    out
}

/// An APIResourceList's resources as blocks (a resource and its
/// subresources), sorted by resource.
fn by_resource(list: &Value) -> Value {
    let mut blocks: Vec<Vec<Value>> = Vec::new();
    for r in list["resources"].as_array().into_iter().flatten() {
        let sub = r["name"].as_str().is_some_and(|n| n.contains('/'));
        match blocks.last_mut() {
            Some(b) if sub => b.push(r.clone()),
            _ => blocks.push(vec![r.clone()]),
        }
    }
    blocks.sort_by(|a, b| a[0]["name"].as_str().cmp(&b[0]["name"].as_str()));
    let mut out = list.clone();
    out["resources"] = Value::Array(blocks.into_iter().flatten().collect());
    out
}

#[test]
fn captured_set_covers_what_it_should() {
    // Guards the comparisons below against a capture that lost its variety.
    let gvs = group_versions();
    assert_eq!(gvs.len(), 6, "{gvs:?}");
    let all = captured_specs_all_versions();
    assert!(
        all.iter().any(|s| s.versions.iter().any(|v| !v.served)),
        "an unserved version"
    );
    assert!(
        all.iter().any(|s| s.scope == "Cluster") && all.iter().any(|s| s.scope == "Namespaced")
    );
}

#[test]
fn apis_matches_kube_apiserver() {
    let specs = captured_specs();
    assert_same("/apis", &legacy::api_group_list(&specs), &real("apis.json"));
    // Unserved versions in the input change nothing.
    assert_same(
        "/apis",
        &legacy::api_group_list(&captured_specs_all_versions()),
        &real("apis.json"),
    );
}

#[test]
fn api_group_matches_kube_apiserver() {
    let specs = captured_specs();
    for group in ["testing.bindery.dev", "alpha.bindery.dev"] {
        let got = legacy::api_group(&specs, group).expect("served group");
        assert_same(
            &format!("/apis/{group}"),
            &got,
            &real(&format!("apis-{group}.json")),
        );
    }
}

#[test]
fn api_resource_lists_match_kube_apiserver() {
    let specs = captured_specs();
    for (g, v) in group_versions() {
        let got = legacy::api_resource_list(&specs, &g, &v).expect("served group-version");
        let want = real(&format!("apis-{g}-{v}.json"));
        assert_same(
            &format!("/apis/{g}/{v}"),
            &by_resource(&got),
            &by_resource(&want),
        );
        // Ours is already in that order.
        assert_eq!(got, by_resource(&got));
    }
}

#[test]
fn aggregated_discovery_matches_kube_apiserver() {
    assert_same(
        "aggregated /apis",
        &aggregated::apis(&captured_specs()),
        &real("aggregated-apis.json"),
    );
}

#[test]
fn openapi_v2_matches_kube_apiserver() {
    assert_same(
        "/openapi/v2",
        &openapi::v2(&captured_specs()),
        &real("openapi-v2.json"),
    );
}

#[test]
fn openapi_v3_group_versions_match_kube_apiserver() {
    let specs = captured_specs();
    for (g, v) in group_versions() {
        let got = openapi::v3_group_version(&specs, &g, &v).expect("served group-version");
        assert_same(
            &format!("/openapi/v3/apis/{g}/{v}"),
            &got,
            &real(&format!("openapi-v3-apis-{g}-{v}.json")),
        );
    }
}

#[test]
fn openapi_v3_root_matches_kube_apiserver_but_for_hashes() {
    let specs = captured_specs();
    let strip = |root: &Value| {
        let mut root = root.clone();
        for (_, link) in root["paths"].as_object_mut().into_iter().flatten() {
            let url = link["serverRelativeURL"].as_str().unwrap_or_default();
            link["serverRelativeURL"] =
                json!(url.split_once("?hash=").map(|(u, _)| u).unwrap_or(url));
        }
        root
    };
    let got = openapi::v3_root(&specs);
    assert_same(
        "/openapi/v3",
        &strip(&got),
        &strip(&real("openapi-v3.json")),
    );
    for (g, v) in group_versions() {
        let doc = openapi::v3_group_version_document(&specs, &g, &v).expect("served");
        assert_eq!(
            got["paths"][format!("apis/{g}/{v}")]["serverRelativeURL"],
            format!("/openapi/v3/apis/{g}/{v}?hash={}", doc.hash)
        );
    }
}

/// What `kubectl explain` and `kubectl apply --validate=strict` read: the
/// component schema carrying the kind's GVK, and the PATCH operation's
/// `fieldValidation` parameter.
#[test]
fn explain_and_strict_validation_find_what_they_need() {
    let specs = captured_specs();
    let doc = openapi::v3_group_version(&specs, "testing.bindery.dev", "v1").unwrap();
    let schemas = doc["components"]["schemas"].as_object().unwrap();
    let gvk = json!([{"group": "testing.bindery.dev", "kind": "Gizmo", "version": "v1"}]);
    let found: Vec<&String> = schemas
        .iter()
        .filter(|(_, s)| s["x-kubernetes-group-version-kind"] == gvk)
        .map(|(k, _)| k)
        .collect();
    assert_eq!(found, ["dev.bindery.testing.v1.Gizmo"]);
    let patch =
        &doc["paths"]["/apis/testing.bindery.dev/v1/namespaces/{namespace}/gizmos/{name}"]["patch"];
    assert_eq!(patch["x-kubernetes-group-version-kind"]["kind"], "Gizmo");
    assert!(
        patch["parameters"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["name"] == "fieldValidation")
    );
}
