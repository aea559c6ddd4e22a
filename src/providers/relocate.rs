//! `bindery move-namespace`: moves one namespace of the app cluster from
//! the provider that owns it to another, losing no object. Its writes wait
//! first (the Namespace's `bindery.dev/moving-to` label, which the router
//! answers with 503 and a time to come back); every bound resource's
//! objects in it are copied to the new provider ([`super::copy`]: status
//! after, owner references between moved objects to the copies); the
//! Namespace is then switched to the new provider in one update, which ends
//! every watch that saw the old objects (the router's 410) and lets writes
//! through; only then are the old objects deleted. Run again after an
//! interruption, it goes on: copies already made are taken as they are.

use super::copy::{copy_of, owners_moved};
use super::routes::{MOVING_LABEL, PROVIDER_LABEL, Routes};
use anyhow::{Context, Result, anyhow, bail};
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, Patch, PatchParams};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Duration;

/// What `bindery move-namespace` is told.
pub struct Options {
    /// The app cluster's kubeconfig (`None`: inferred).
    pub kubeconfig: Option<PathBuf>,
    /// The router's providers: name and consumer kubeconfig.
    pub providers: Vec<(String, PathBuf)>,
    pub default_provider: String,
    pub namespace: String,
    /// The provider it moves to.
    pub to: String,
}

/// How long writes the router took before it saw the namespace was moving
/// are given to land at the old provider before its objects are read.
const SETTLE: Duration = Duration::from_secs(2);

/// One object moved: where it was read, and its uid there.
struct Moved {
    collection: String,
    name: String,
    uid: String,
}

/// Moves the namespace; prints what it did.
pub async fn run(options: Options) -> Result<()> {
    let app = crate::serve::provider_client(options.kubeconfig.as_deref())
        .await
        .context("reaching the app cluster")?;
    let names: Vec<String> = options.providers.iter().map(|(n, _)| n.clone()).collect();
    let routes = Routes::new(names, &options.default_provider).map_err(anyhow::Error::msg)?;
    let mut clients = super::serve::provider_clients(&options.providers).await?;
    let clients: Vec<kube::Client> = routes
        .names()
        .iter()
        .filter_map(|name| clients.remove(name))
        .collect();
    let namespaces = Api::<Namespace>::all(app.clone());
    let namespace = &options.namespace;
    let found = namespaces
        .get(namespace)
        .await
        .with_context(|| format!("reading the namespace {namespace}"))?;
    let from = routes
        .of_namespace(namespace, found.metadata.labels.as_ref())
        .map_err(|e| anyhow!(e.message))?;
    let to = routes
        .names()
        .iter()
        .position(|name| *name == options.to)
        .ok_or_else(|| {
            anyhow!(
                "{} is not one of the providers {:?}",
                options.to,
                routes.names()
            )
        })?;
    let (from_name, to_name) = (&routes.names()[from], &routes.names()[to]);
    let label = |labels: Value| label(&namespaces, namespace, labels);
    if from == to {
        label(json!({MOVING_LABEL: null})).await?;
        println!("{namespace} is at the provider {to_name} already");
        return Ok(());
    }
    label(json!({MOVING_LABEL: to_name}))
        .await
        .context("holding the namespace's writes")?;
    println!("{namespace}: writes wait while it moves from {from_name} to {to_name}");
    tokio::time::sleep(SETTLE).await;
    let ends = Ends {
        source: &clients[from],
        target: &clients[to],
        from: from_name,
        to: to_name,
    };
    let moved = ends.copy(namespace).await?;
    label(json!({PROVIDER_LABEL: to_name, MOVING_LABEL: null}))
        .await
        .context("switching the namespace to its new provider")?;
    ends.delete(&moved).await?;
    println!(
        "{namespace}: {} objects moved from {from_name} to {to_name}",
        moved.len()
    );
    Ok(())
}

/// Merges `labels` into the Namespace `namespace`'s.
async fn label(
    namespaces: &Api<Namespace>,
    namespace: &str,
    labels: Value,
) -> kube::Result<Namespace> {
    let patch = Patch::Merge(json!({"metadata": {"labels": labels}}));
    namespaces
        .patch(namespace, &PatchParams::default(), &patch)
        .await
}

/// The two providers of a move, and their names.
struct Ends<'a> {
    source: &'a kube::Client,
    target: &'a kube::Client,
    from: &'a str,
    to: &'a str,
}

impl Ends<'_> {
    /// Copies every object of `namespace` from the source to the target,
    /// its status after, and owner references between moved objects to the
    /// copies; what it moved.
    async fn copy(&self, namespace: &str) -> Result<Vec<Moved>> {
        let (source, target, to) = (self.source, self.target, self.to);
        let mut moved = Vec::new();
        let mut copies: HashMap<String, String> = HashMap::new();
        let mut made: Vec<(String, Value)> = Vec::new();
        for (collection, has_status) in collections(source, namespace).await? {
            let list: Value = source
                .request(get(&collection))
                .await
                .with_context(|| format!("listing {collection} at {}", self.from))?;
            for object in list["items"].as_array().into_iter().flatten() {
                let text = |field: &str| {
                    object["metadata"][field]
                        .as_str()
                        .unwrap_or_default()
                        .to_string()
                };
                let (name, uid) = (text("name"), text("uid"));
                let (mut copy, mut status) = copy_of(object);
                // Without a status subresource, status is written as any field.
                if !has_status && let Some(status) = status.take() {
                    copy["status"] = status;
                }
                let mut created = create(target, &collection, &name, &copy)
                    .await
                    .with_context(|| format!("copying {collection}/{name} to {to}"))?;
                if let Some(status) = status {
                    created["status"] = status;
                    created = target
                        .request(put(&format!("{collection}/{name}/status"), &created))
                        .await
                        .with_context(|| {
                            format!("writing the status of {collection}/{name} at {to}")
                        })?;
                }
                if let Some(copy_uid) = created["metadata"]["uid"].as_str() {
                    copies.insert(uid.clone(), copy_uid.to_string());
                }
                made.push((format!("{collection}/{name}"), created));
                moved.push(Moved {
                    collection: collection.clone(),
                    name,
                    uid,
                });
            }
        }
        for (path, created) in &made {
            if let Some(owners) = owners_moved(&created["metadata"]["ownerReferences"], &copies) {
                let patch = json!({"metadata": {"ownerReferences": owners}});
                target
                    .request::<Value>(merge_patch(path, &patch))
                    .await
                    .with_context(|| format!("pointing {path}'s owners at their copies"))?;
            }
        }
        Ok(moved)
    }

    /// Deletes the `moved` objects at the source, each only if it is still
    /// the one copied (its uid).
    async fn delete(&self, moved: &[Moved]) -> Result<()> {
        for Moved {
            collection,
            name,
            uid,
        } in moved
        {
            let options = json!({"kind": "DeleteOptions", "apiVersion": "v1",
                "preconditions": {"uid": uid}});
            let path = format!("{collection}/{name}");
            match self.source.request::<Value>(delete(&path, &options)).await {
                Ok(_) => {}
                Err(kube::Error::Api(status)) if status.code == 404 || status.code == 409 => {}
                Err(error) => bail!("deleting {path} at {}: {error}", self.from),
            }
        }
        Ok(())
    }
}

/// The collections of `namespace` at the provider `client` reaches: every
/// namespaced resource it serves the consumer (its preferred version), and
/// whether it has a status subresource.
async fn collections(client: &kube::Client, namespace: &str) -> Result<Vec<(String, bool)>> {
    let groups: Value = client
        .request(get("/apis"))
        .await
        .context("reading discovery")?;
    let mut found = Vec::new();
    for group in groups["groups"].as_array().into_iter().flatten() {
        let Some(version) = group["preferredVersion"]["groupVersion"].as_str() else {
            continue;
        };
        let resources: Value = client
            .request(get(&format!("/apis/{version}")))
            .await
            .with_context(|| format!("reading the discovery of {version}"))?;
        let all = resources["resources"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        for resource in &all {
            let name = resource["name"].as_str().unwrap_or_default();
            if name.contains('/') || resource["namespaced"] != true {
                continue;
            }
            let has_status = all.iter().any(|r| r["name"] == format!("{name}/status"));
            found.push((
                format!("/apis/{version}/namespaces/{namespace}/{name}"),
                has_status,
            ));
        }
    }
    Ok(found)
}

/// Creates `copy` in `collection`; a copy made by an interrupted run before
/// is taken as it is.
async fn create(
    client: &kube::Client,
    collection: &str,
    name: &str,
    copy: &Value,
) -> Result<Value> {
    match client.request::<Value>(post(collection, copy)).await {
        Err(kube::Error::Api(status)) if status.code == 409 => {
            Ok(client.request(get(&format!("{collection}/{name}"))).await?)
        }
        made => Ok(made?),
    }
}

fn json_request(
    method: &str,
    path: &str,
    content_type: &str,
    body: Option<&Value>,
) -> http::Request<Vec<u8>> {
    http::Request::builder()
        .method(method)
        .uri(path)
        .header(http::header::ACCEPT, "application/json")
        .header(http::header::CONTENT_TYPE, content_type)
        .body(body.map_or_else(Vec::new, |b| serde_json::to_vec(b).unwrap_or_default()))
        .expect("a request of a path bindery made")
}

fn get(path: &str) -> http::Request<Vec<u8>> {
    json_request("GET", path, "application/json", None)
}

fn post(path: &str, body: &Value) -> http::Request<Vec<u8>> {
    json_request("POST", path, "application/json", Some(body))
}

fn put(path: &str, body: &Value) -> http::Request<Vec<u8>> {
    json_request("PUT", path, "application/json", Some(body))
}

fn merge_patch(path: &str, body: &Value) -> http::Request<Vec<u8>> {
    json_request("PATCH", path, "application/merge-patch+json", Some(body))
}

fn delete(path: &str, body: &Value) -> http::Request<Vec<u8>> {
    json_request("DELETE", path, "application/json", Some(body))
}
