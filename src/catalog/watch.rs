//! Keeps a [`Catalog`] in step with the provider: one watch each on
//! APIServiceExports, BoundSchemas and APIServiceNamespaces, in every
//! namespace.

use super::index::{Catalog, ExportRecord, NamespaceRecord, SchemaRecord};
use crate::controllers::export_status::flow::serving_stopped;
use crate::translate::{IdentityHash, Isolation};
use futures::StreamExt;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::Value;
use std::sync::{Arc, RwLock};
use tokio::sync::watch as signal;

pub const GROUP: &str = "kube-bind.io";
pub const VERSION: &str = "v1alpha2";

/// A catalog shared between the watches that fill it and the requests that read it.
#[derive(Clone)]
pub struct SharedCatalog {
    inner: Arc<RwLock<Catalog>>,
    synced: signal::Receiver<bool>,
}

impl SharedCatalog {
    /// A catalog that nothing fills: for tests and before start-up.
    pub fn fixed(catalog: Catalog) -> Self {
        let (_, synced) = signal::channel(true);
        Self {
            inner: Arc::new(RwLock::new(catalog)),
            synced,
        }
    }

    pub fn read<T>(&self, f: impl FnOnce(&Catalog) -> T) -> T {
        let guard = self.inner.read().unwrap_or_else(|e| e.into_inner());
        f(&guard)
    }

    /// Whether every watch has listed once.
    pub fn is_synced(&self) -> bool {
        *self.synced.borrow()
    }

    /// Waits until every watch has listed once.
    pub async fn wait_synced(&self) {
        let mut synced = self.synced.clone();
        let _ = synced.wait_for(|s| *s).await;
    }
}

fn api_resource(kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(GROUP, VERSION, kind), plural)
}

/// Starts the watches; the returned catalog fills as they list.
pub fn start(client: kube::Client, prefix: &str) -> SharedCatalog {
    let inner = Arc::new(RwLock::new(Catalog::new(prefix)));
    let (synced_tx, synced) = signal::channel(false);
    let kinds = [
        ("APIServiceExport", "apiserviceexports"),
        ("BoundSchema", "boundschemas"),
        ("APIServiceNamespace", "apiservicenamespaces"),
    ];
    let mut ready = Vec::new();
    for (kind, plural) in kinds {
        let resource = api_resource(kind, plural);
        let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
        let writer = reflector::store::Writer::new(resource);
        let store = writer.as_reader();
        ready.push(store.clone());
        let catalog = inner.clone();
        let events = watcher(api, watcher::Config::default())
            .default_backoff()
            .reflect(writer);
        tokio::spawn(async move {
            futures::pin_mut!(events);
            // Every event (applied, deleted, relisted) rebuilds this kind's records.
            while let Some(event) = events.next().await {
                match event {
                    Ok(_) => refresh(&catalog, kind, &store),
                    Err(error) => tracing::warn!(%error, kind, "provider watch failed; retrying"),
                }
            }
        });
    }
    tokio::spawn(async move {
        for store in &ready {
            let _ = store.wait_until_ready().await;
        }
        let _ = synced_tx.send(true);
        // Keep the sender alive so that the flag stays readable.
        std::future::pending::<()>().await;
    });
    SharedCatalog { inner, synced }
}

fn refresh(catalog: &RwLock<Catalog>, kind: &str, store: &Store<DynamicObject>) {
    let objects = store.state();
    let mut catalog = catalog.write().unwrap_or_else(|e| e.into_inner());
    match kind {
        "APIServiceExport" => catalog.set_exports(objects.iter().filter_map(|o| export_record(o))),
        "BoundSchema" => catalog.set_schemas(objects.iter().filter_map(|o| schema_record(o))),
        _ => catalog.set_namespaces(objects.iter().filter_map(|o| namespace_record(o))),
    }
}

fn namespace_and_name(object: &DynamicObject) -> Option<(String, String)> {
    Some((
        object.metadata.namespace.clone()?,
        object.metadata.name.clone()?,
    ))
}

pub fn export_record(object: &DynamicObject) -> Option<ExportRecord> {
    let (namespace, name) = namespace_and_name(object)?;
    let spec = object.data.get("spec")?;
    let resources = spec
        .get("resources")
        .and_then(Value::as_array)
        .map(|resources| {
            resources
                .iter()
                .filter_map(|r| {
                    let group = r.get("group").and_then(Value::as_str).unwrap_or_default();
                    let resource = r.get("resource").and_then(Value::as_str)?;
                    Some((group.to_string(), resource.to_string()))
                })
                .collect()
        })
        .unwrap_or_default();
    let isolation = match spec.get("isolation").and_then(Value::as_str) {
        Some("None") => Isolation::None,
        _ => Isolation::Prefixed,
    };
    let status = object.data.get("status");
    let conditions: Vec<Condition> = status
        .and_then(|s| s.get("conditions"))
        .and_then(|c| serde_json::from_value(c.clone()).ok())
        .unwrap_or_default();
    // An identity the controllers found in doubt is not served at all, nor
    // is an export whose status flow stopped it (binding or schema gone).
    let identity_in_doubt = conditions
        .iter()
        .any(|c| c.type_ == crate::api::IDENTITY_VALID_CONDITION && c.status == "False");
    let stopped = identity_in_doubt || serving_stopped(&conditions);
    let identity = status
        .and_then(|s| s.get("identityHash"))
        .and_then(Value::as_str)
        .and_then(IdentityHash::parse)
        .filter(|_| !stopped);
    let created = object
        .metadata
        .creation_timestamp
        .as_ref()
        .map(|t| t.0.to_string())
        .unwrap_or_default();
    Some(ExportRecord {
        namespace,
        name,
        resources,
        isolation,
        identity,
        created,
    })
}

pub fn schema_record(object: &DynamicObject) -> Option<SchemaRecord> {
    let (namespace, name) = namespace_and_name(object)?;
    let spec = serde_json::from_value(object.data.get("spec")?.clone()).ok()?;
    Some(SchemaRecord {
        namespace,
        name,
        spec,
    })
}

pub fn namespace_record(object: &DynamicObject) -> Option<NamespaceRecord> {
    let (namespace, name) = namespace_and_name(object)?;
    let provider = object
        .data
        .get("status")
        .and_then(|s| s.get("namespace"))
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(str::to_string);
    Some(NamespaceRecord {
        namespace,
        name,
        provider,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn export(conditions: Value) -> DynamicObject {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "kube-bind.io/v1alpha2", "kind": "APIServiceExport",
            "metadata": {"name": "e", "namespace": "kube-bind-abc"},
            "spec": {"resources": [{"group": "example.com", "resource": "things"}]},
            "status": {"identityHash": "a".repeat(64), "conditions": conditions},
        }))
        .unwrap()
    }

    fn condition(type_: &str, status: &str, reason: &str) -> Value {
        serde_json::json!({"type": type_, "status": status, "reason": reason, "message": "",
            "lastTransitionTime": "2026-01-01T00:00:00Z"})
    }

    #[test]
    fn only_a_stopped_or_doubted_export_loses_its_identity() {
        let served = |conditions| {
            export_record(&export(conditions))
                .unwrap()
                .identity
                .is_some()
        };
        assert!(served(serde_json::json!([])));
        assert!(served(serde_json::json!([condition(
            "Connected",
            "False",
            "AppClusterUnreachable"
        )])));
        assert!(!served(serde_json::json!([condition(
            "Connected",
            "False",
            "APIServiceBindingNotFound"
        )])));
        assert!(!served(serde_json::json!([condition(
            "Ready",
            "False",
            "BoundSchemaNotFound"
        )])));
        assert!(!served(serde_json::json!([condition(
            "IdentityValid",
            "False",
            "IdentityMismatch"
        )])));
    }
}
