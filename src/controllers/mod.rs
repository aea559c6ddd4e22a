//! The provider-side controllers, run inside `bindery serve` or alone as
//! `bindery controllers`, by whichever replica holds the leader Lease.
//!
//! - `request`: APIServiceExportRequest → everything an export needs;
//! - `export`: each export's identity, RBAC and finalizer (`deletion`);
//! - `export_status`: each export's status, following kube-bind's flow;
//! - `schema`: BoundSchemas following their CRDs, breaking changes held back;
//! - `claim_sync`: provider-owned claimed Secrets/ConfigMaps copied into the
//!   app clusters that accepted the claim;
//! - `claim_push`: consumer-owned ones copied up into the provider namespaces,
//!   for exports that keep kube-bind's way;
//! - `identity`, `rbac`, `naming`, `conditions`, `runner`, `app_clusters`:
//!   what those share.

pub mod admission;
pub mod app_clusters;
pub mod app_namespaces;
pub mod claim_copies;
pub mod claim_push;
pub mod claim_sync;
pub mod conditions;
pub mod deletion;
pub mod export;
pub mod export_guard;
pub mod export_status;
pub mod identity;
pub mod instrument;
pub mod kube_bind_rbac_guard;
pub mod kube_bind_schema;
pub mod leader;
pub mod legacy_identity;
pub mod naming;
pub mod ownership;
pub mod rbac;
pub mod request;
pub mod runner;
pub mod schema;

use crate::api::{InformerScope, Isolation};
use kube::api::PatchParams;
use std::sync::Arc;
use std::time::Duration;

/// The field manager of everything the controllers apply.
pub const FIELD_MANAGER: &str = crate::provider_namespace::FIELD_MANAGER;

/// What every controller needs.
pub struct Context {
    pub client: kube::Client,
    /// Cluster namespaces are `<prefix><consumer>`.
    pub prefix: String,
    /// Recorded in each ClusterBinding.
    pub provider_pretty_name: String,
    /// Clients to the consumers' app clusters.
    pub app_clusters: app_clusters::AppClusters,
    /// bindery's URL for the provider's controllers, under which each export
    /// publishes its virtual workspace; `None` publishes none.
    pub external_url: Option<String>,
    /// The isolation of the exports the request controller makes.
    pub isolation: Isolation,
    /// The informer scope of every export the request controller makes,
    /// whatever its template says; `None` leaves it to the template.
    pub consumer_scope: Option<InformerScope>,
    /// bindery's own reach to Secrets and ConfigMaps, namespace by
    /// namespace, when its provider role holds none cluster-wide.
    pub namespace_access: Option<crate::namespace_access::NamespaceAccess>,
}

impl Context {
    /// Server-side apply as the controllers' field manager.
    pub fn apply(&self) -> PatchParams {
        PatchParams::apply(FIELD_MANAGER).force()
    }

    /// The consumer whose cluster namespace is `cluster_namespace`, as its
    /// objects' consumer label names it.
    pub fn consumer_of<'a>(&self, cluster_namespace: &'a str) -> &'a str {
        cluster_namespace
            .strip_prefix(&self.prefix)
            .unwrap_or(cluster_namespace)
    }
}

/// How the controllers run.
pub struct Options {
    pub prefix: String,
    pub provider_pretty_name: String,
    pub lease: leader::LeaseSettings,
    /// See [`Context::external_url`].
    pub external_url: Option<String>,
    /// See [`Context::isolation`]: kube-bind's backend's `--isolation`,
    /// `Prefixed` unless set.
    pub isolation: Isolation,
    /// See [`Context::consumer_scope`]: kube-bind's backend's
    /// `--consumer-scope`.
    pub consumer_scope: Option<InformerScope>,
    /// See [`Context::namespace_access`].
    pub namespace_access: Option<crate::namespace_access::NamespaceAccess>,
}

impl Options {
    /// Defaults: Lease `bindery-controllers` in `kube-system`, named after the
    /// host and process, held for 15 s.
    pub fn new(prefix: &str) -> Self {
        let host = std::env::var("HOSTNAME").unwrap_or_else(|_| "bindery".into());
        Self {
            prefix: prefix.to_string(),
            provider_pretty_name: "bindery".into(),
            lease: leader::LeaseSettings {
                namespace: "kube-system".into(),
                name: "bindery-controllers".into(),
                identity: format!("{host}-{}", std::process::id()),
                duration: Duration::from_secs(15),
            },
            external_url: None,
            isolation: Isolation::Prefixed,
            consumer_scope: None,
            namespace_access: None,
        }
    }
}

/// Keeps bindery's own access in the namespaces it serves, when it reaches
/// their Secrets namespace by namespace ([`crate::namespace_access`]).
async fn own_access(context: Arc<Context>) {
    match &context.namespace_access {
        Some(access) => {
            crate::namespace_access::follow(context.client.clone(), access.clone()).await
        }
        None => std::future::pending().await,
    }
}

/// Runs every controller while this replica leads; never returns.
pub async fn run(client: kube::Client, options: Options) {
    let context = Arc::new(Context {
        client: client.clone(),
        prefix: options.prefix,
        provider_pretty_name: options.provider_pretty_name,
        app_clusters: Default::default(),
        external_url: options.external_url,
        isolation: options.isolation,
        consumer_scope: options.consumer_scope,
        namespace_access: options.namespace_access,
    });
    leader::lead(client, options.lease, move || {
        let context = context.clone();
        async move {
            tokio::join!(
                admission::run(context.clone()),
                request::run(context.clone()),
                export::run(context.clone()),
                export_status::run(context.clone()),
                schema::run(context.clone()),
                claim_sync::run(context.clone()),
                claim_push::run(context.clone()),
                app_namespaces::run(context.clone()),
                own_access(context.clone())
            );
        }
    })
    .await;
}
