//! How `bind` waits for the app cluster's aggregator to serve what it
//! registered: every APIService Available, then each bound group/version
//! in the aggregated discovery kubectl maps kinds with and in the OpenAPI v3
//! index `kubectl explain` reads.

use super::wire::GroupVersion;
use crate::app_binding::{api_service_resource, availability};
use anyhow::{Result, bail};
use kube::api::{Api, DynamicObject};
use serde_json::Value;
use std::time::{Duration, Instant};

/// Waits until the aggregator reports every APIService Available.
pub(super) async fn wait_available(
    app: &kube::Client,
    names: &[String],
    timeout: Duration,
) -> Result<()> {
    let api: Api<DynamicObject> = Api::all_with(app.clone(), &api_service_resource());
    let deadline = Instant::now() + timeout;
    for name in names {
        loop {
            let (available, message) = availability(&api.get(name).await?.data);
            if available {
                break;
            }
            if Instant::now() > deadline {
                bail!("APIService {name} is not Available: {message}");
            }
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
    }
    Ok(())
}

/// Waits until the app cluster's aggregated discovery (what kubectl reads to
/// map kinds) and its OpenAPI v3 index (what `kubectl explain` reads) list
/// every bound group/version. The aggregator refreshes both on its own after
/// an APIService turns Available, and until then kubectl cannot map or
/// explain the bound kinds.
pub(super) async fn wait_discovered(
    app: &kube::Client,
    bound: &[GroupVersion],
    timeout: Duration,
) -> Result<()> {
    let deadline = Instant::now() + timeout;
    let documents: [(&str, &str, &str, ListsGroupVersion); 2] = [
        (
            "/apis",
            "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList",
            "discovery",
            discovered,
        ),
        (
            "/openapi/v3",
            "application/json",
            "OpenAPI v3 index",
            in_openapi_index,
        ),
    ];
    for (uri, accept, what, lists) in documents {
        loop {
            let request = http::Request::builder()
                .uri(uri)
                .header(http::header::ACCEPT, accept)
                .body(Vec::new())?;
            let document: Value = app.request(request).await?;
            let missing: Vec<String> = bound
                .iter()
                .filter(|gv| !lists(&document, &gv.group, &gv.version))
                .map(|gv| format!("{}/{}", gv.group, gv.version))
                .collect();
            if missing.is_empty() {
                break;
            }
            if Instant::now() > deadline {
                bail!(
                    "the app cluster's {what} does not list {} yet",
                    missing.join(", ")
                );
            }
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
    }
    Ok(())
}

/// Whether a document lists a group/version.
type ListsGroupVersion = fn(&Value, &str, &str) -> bool;

/// Whether an OpenAPI v3 index (`/openapi/v3`) has `group`/`version`.
fn in_openapi_index(document: &Value, group: &str, version: &str) -> bool {
    let path = match group {
        "" => format!("api/{version}"),
        group => format!("apis/{group}/{version}"),
    };
    document["paths"].get(&path).is_some()
}

/// Whether an aggregated discovery document lists `group`/`version` with
/// resources, and not as stale.
fn discovered(document: &Value, group: &str, version: &str) -> bool {
    document["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|g| g["metadata"]["name"] == group)
        .flat_map(|g| g["versions"].as_array().into_iter().flatten())
        .any(|v| {
            v["version"] == version
                && v["freshness"] != "Stale"
                && v["resources"].as_array().is_some_and(|r| !r.is_empty())
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_openapi_index_must_have_the_group_version() {
        let index = serde_json::json!({"paths": {"apis/db.example.com/v1": {"serverRelativeURL": "/openapi/v3/apis/db.example.com/v1?hash=X"},
            "api/v1": {}}});
        assert!(in_openapi_index(&index, "db.example.com", "v1"));
        assert!(in_openapi_index(&index, "", "v1"));
        assert!(!in_openapi_index(&index, "db.example.com", "v1beta1"));
        assert!(!in_openapi_index(
            &serde_json::json!({}),
            "db.example.com",
            "v1"
        ));
    }

    #[test]
    fn discovery_must_list_the_version_with_resources_and_fresh() {
        let document = serde_json::json!({"items": [
            {"metadata": {"name": "db.example.com"}, "versions": [
                {"version": "v1", "resources": [{"resource": "postgresqlinstances"}], "freshness": "Current"},
                {"version": "v1beta1", "resources": [{"resource": "postgresqlinstances"}], "freshness": "Stale"},
                {"version": "v2", "resources": []},
            ]},
        ]});
        assert!(discovered(&document, "db.example.com", "v1"));
        assert!(!discovered(&document, "db.example.com", "v1beta1"), "stale");
        assert!(
            !discovered(&document, "db.example.com", "v2"),
            "no resources"
        );
        assert!(!discovered(&document, "other.io", "v1"));
        assert!(!discovered(&serde_json::json!({}), "db.example.com", "v1"));
    }
}
