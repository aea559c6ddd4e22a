//! Keeps a [`Catalog`] in step with the provider: one watch each on
//! APIServiceExports, BoundSchemas and APIServiceNamespaces, in every
//! namespace. Each event changes one record; only a (re)list replaces a
//! kind's records, so the cost of an event does not grow with the number
//! of consumers, and the objects are not kept besides their records.

use super::index::{Catalog, ExportRecord, NamespaceRecord, SchemaRecord};
use super::interned::Specs;
use crate::api::{Condition, isolation_in_force};
use crate::controllers::export_status::flow::serving_stopped;
use crate::quota::caps::Caps;
use crate::translate::{IdentityHash, Isolation};
use futures::StreamExt;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind};
use kube::runtime::{WatchStreamExt, watcher};
use serde::Deserialize;
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

/// The kinds the catalog is made of.
#[derive(Clone, Copy, Debug)]
enum Kind {
    Export,
    Schema,
    Namespace,
}

impl Kind {
    fn api_resource(self) -> ApiResource {
        match self {
            Kind::Export => api_resource("APIServiceExport", "apiserviceexports"),
            Kind::Schema => api_resource("BoundSchema", "boundschemas"),
            Kind::Namespace => api_resource("APIServiceNamespace", "apiservicenamespaces"),
        }
    }

    /// Records `object` as it now is (an object that makes no record
    /// removes the one it made before).
    fn apply(self, catalog: &mut Catalog, object: &DynamicObject) {
        let Some(key) = namespace_and_name(object) else {
            return;
        };
        match self {
            Kind::Export => match export_record(object) {
                Some(record) => catalog.upsert_export(record),
                None => catalog.remove_export(&key),
            },
            Kind::Schema => match schema_record(object) {
                Some(record) => catalog.upsert_schema(record),
                None => catalog.remove_schema(&key),
            },
            Kind::Namespace => match namespace_record(object) {
                Some(record) => catalog.upsert_namespace(record),
                None => catalog.remove_namespace(&key),
            },
        }
    }

    fn delete(self, catalog: &mut Catalog, object: &DynamicObject) {
        let Some(key) = namespace_and_name(object) else {
            return;
        };
        match self {
            Kind::Export => catalog.remove_export(&key),
            Kind::Schema => catalog.remove_schema(&key),
            Kind::Namespace => catalog.remove_namespace(&key),
        }
    }

    /// Adds the record of `object`, one of a (re)list's, to `listing`.
    fn list(self, listing: &mut Listing, object: &DynamicObject) {
        match self {
            Kind::Export => listing.exports.extend(export_record(object)),
            Kind::Schema => listing.schemas.extend(schema_record(object)),
            Kind::Namespace => listing.namespaces.extend(namespace_record(object)),
        }
    }

    /// Replaces every record of this kind with those of a finished list.
    fn replace(self, catalog: &mut Catalog, listing: Listing) {
        match self {
            Kind::Export => catalog.set_exports(listing.exports),
            Kind::Schema => catalog.set_schemas(listing.schemas),
            Kind::Namespace => catalog.set_namespaces(listing.namespaces),
        }
    }
}

/// The records of a (re)list in progress, made as its objects arrive: the
/// objects themselves are not kept until it ends (a BoundSchema holds a
/// whole schema; a new replica lists every consumer's at once).
#[derive(Default)]
struct Listing {
    exports: Vec<ExportRecord>,
    schemas: Vec<SchemaRecord>,
    namespaces: Vec<NamespaceRecord>,
}

/// Starts the watches; the returned catalog fills as they list.
pub fn start(client: kube::Client, prefix: &str) -> SharedCatalog {
    let inner = Arc::new(RwLock::new(Catalog::new(prefix)));
    let (synced_tx, synced) = signal::channel(false);
    let listed = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let kinds = [Kind::Export, Kind::Schema, Kind::Namespace];
    // Synced once every kind has listed once; the watch tasks share the sender.
    let synced_tx = Arc::new(synced_tx);
    for kind in kinds {
        let api: Api<DynamicObject> = Api::all_with(client.clone(), &kind.api_resource());
        let catalog = inner.clone();
        let (listed, synced_tx) = (listed.clone(), synced_tx.clone());
        let events = watcher(api, watcher::Config::default()).default_backoff();
        tokio::spawn(async move {
            futures::pin_mut!(events);
            let mut listing = Listing::default();
            let mut first_list = true;
            while let Some(event) = events.next().await {
                let event = match event {
                    Ok(event) => event,
                    Err(error) => {
                        tracing::warn!(%error, ?kind, "provider watch failed; retrying");
                        continue;
                    }
                };
                let write = || catalog.write().unwrap_or_else(|e| e.into_inner());
                match event {
                    watcher::Event::Init => listing = Listing::default(),
                    watcher::Event::InitApply(object) => kind.list(&mut listing, &object),
                    watcher::Event::InitDone => {
                        kind.replace(&mut write(), std::mem::take(&mut listing));
                        if std::mem::take(&mut first_list)
                            && listed.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1
                                == kinds.len()
                        {
                            synced_tx.send_replace(true);
                        }
                    }
                    watcher::Event::Apply(object) => kind.apply(&mut write(), &object),
                    watcher::Event::Delete(object) => kind.delete(&mut write(), &object),
                }
            }
        });
    }
    // The watch tasks never end, so their senders keep the flag readable.
    SharedCatalog { inner, synced }
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
    // As kube-bind's konnector reads it (`isolation_in_force`).
    let isolation: Isolation = isolation_in_force(
        spec.get("isolation")
            .and_then(|value| crate::api::Isolation::deserialize(value).ok()),
    )
    .into();
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
    let caps = object
        .metadata
        .annotations
        .as_ref()
        .map(Caps::of)
        .unwrap_or_default();
    Some(ExportRecord {
        namespace,
        name,
        resources,
        isolation,
        identity,
        created,
        caps,
    })
}

pub fn schema_record(object: &DynamicObject) -> Option<SchemaRecord> {
    static SPECS: std::sync::LazyLock<Specs> = std::sync::LazyLock::new(Specs::default);
    let (namespace, name) = namespace_and_name(object)?;
    let spec = SPECS.get(object.data.get("spec")?)?;
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

    #[test]
    fn a_doubted_identity_stops_serving_beside_a_condition_without_a_reason() {
        // kube-bind's konnector leaves reason out; on main one such
        // condition failed the list's decoding, and the export was served
        // as if it had no conditions at all.
        let conditions = serde_json::json!([
            {"type": "Connected", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"},
            condition("IdentityValid", "False", "IdentityMismatch"),
        ]);
        assert!(
            export_record(&export(conditions))
                .unwrap()
                .identity
                .is_none()
        );
    }

    #[test]
    fn isolation_is_read_as_kube_bind_reads_it() {
        use serde_json::json;
        let isolation = |spec: Value| {
            let mut object = export(serde_json::json!([]));
            let data = object.data.as_object_mut().unwrap();
            let merged = data["spec"].as_object_mut().unwrap();
            for (key, value) in spec.as_object().unwrap() {
                merged.insert(key.clone(), value.clone());
            }
            export_record(&object).unwrap().isolation
        };
        assert_eq!(isolation(json!({})), Isolation::None);
        assert_eq!(
            isolation(json!({"isolation": "Namespaced"})),
            Isolation::Namespaced
        );
        assert_eq!(isolation(json!({"isolation": "None"})), Isolation::None);
        assert_eq!(
            isolation(json!({"clusterScopedIsolation": "Namespaced"})),
            Isolation::None,
            "the konnector does not read the deprecated field"
        );
        assert_eq!(
            isolation(json!({"isolation": "Prefixed", "clusterScopedIsolation": "None"})),
            Isolation::Prefixed
        );
    }
}
