//! The router's start: each provider's schema of every resource the default
//! provider serves, read from its discovery and OpenAPI v3 and judged
//! against the default's ([`super::schemas`]).

use super::routes::Routes;
use super::schemas::{Served, breaks};
use http::header::ACCEPT;
use serde_json::Value;

/// Reads `path` of a provider as JSON (`null` when it cannot be read).
async fn read(client: &kube::Client, path: String) -> Value {
    let request = http::Request::get(&path)
        .header(ACCEPT, "application/json")
        .body(Vec::new())
        .expect("a GET request builds");
    client
        .request::<Value>(request)
        .await
        .unwrap_or(Value::Null)
}

/// One group/version as a provider serves it: its discovery and OpenAPI v3.
struct Documents {
    discovery: Value,
    openapi: Value,
}

impl Documents {
    async fn of(client: &kube::Client, group_version: &str) -> Self {
        Self {
            discovery: read(client, format!("/apis/{group_version}")).await,
            openapi: read(client, format!("/openapi/v3/apis/{group_version}")).await,
        }
    }

    /// The resource `name` as served here, if it is.
    fn served<'a>(&'a self, group: &'a str, version: &'a str, name: &str) -> Option<Served<'a>> {
        let resource = self.discovery["resources"]
            .as_array()?
            .iter()
            .find(|r| r["name"] == name)?;
        Some(Served {
            group,
            version,
            kind: resource["kind"].as_str().unwrap_or_default(),
            namespaced: resource["namespaced"] == true,
            openapi: &self.openapi,
        })
    }
}

/// Each resource the default provider serves, in every group/version it
/// serves, judged against every other provider's schema of it
/// ([`super::schemas`]): what breaks, in words (empty: one schema).
pub(super) async fn incompatible(
    routes: &Routes,
    providers: &[kube::Client],
) -> anyhow::Result<Vec<String>> {
    let first = &providers[routes.default()];
    let groups = read(first, "/apis".to_string()).await;
    let versions = groups["groups"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|group| group["versions"].as_array().cloned().unwrap_or_default())
        .filter_map(|version| version["groupVersion"].as_str().map(str::to_string));
    let mut refused = Vec::new();
    for group_version in versions {
        let (group, version) = group_version
            .split_once('/')
            .unwrap_or(("", &group_version));
        let theirs_first = Documents::of(first, &group_version).await;
        for (index, other) in providers.iter().enumerate() {
            if index == routes.default() {
                continue;
            }
            let theirs = Documents::of(other, &group_version).await;
            let names = theirs_first.discovery["resources"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|r| r["name"].as_str())
                .filter(|name| !name.contains('/'));
            for name in names {
                let Some(first_served) = theirs_first.served(group, version, name) else {
                    continue;
                };
                // Not served there: judged against no schema, a removed version.
                let none = Value::Null;
                let other_served = theirs.served(group, version, name).unwrap_or(Served {
                    openapi: &none,
                    ..first_served
                });
                for broken in breaks(&first_served, &other_served) {
                    refused.push(format!(
                        "{} serves {name}.{group} otherwise: {broken}",
                        routes.names()[index]
                    ));
                }
            }
        }
    }
    Ok(refused)
}
