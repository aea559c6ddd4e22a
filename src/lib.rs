//! bindery: a virtual Kubernetes API endpoint that serves APIs living in a
//! provider cluster to app clusters, without copying CRDs or objects.
//!
//! The request flow and vocabulary are in `docs/DESIGN.md`. Each module owns one
//! step of it; modules that are still empty say which issue fills them.
#![forbid(unsafe_code)]

pub mod aggregation;
pub mod api;
pub mod app;
pub mod app_binding;
pub mod app_cluster;
pub mod auth;
pub mod authz;
pub mod bind;
pub mod cache;
pub mod catalog;
pub mod certs;
pub mod claim_referrers;
pub mod controllers;
pub mod deep;
pub mod discovery;
pub mod documents;
pub mod expiring;
pub mod fairness;
pub mod forward;
pub mod health;
pub mod kubeconfig;
pub mod metrics;
pub mod migrate;
pub mod moved_owners;
pub mod namespace_access;
pub mod percent;
pub mod provider_namespace;
pub mod providers;
pub mod proxy;
pub mod quota;
pub mod request_body;
pub mod resolved;
pub mod route;
pub mod router;
pub mod schema_compat;
pub mod sender;
pub mod serve;
pub mod server;
pub mod status;
pub mod table;
pub mod timing;
pub mod token_key;
pub mod translate;
pub mod upstream;
pub mod wire;
pub mod workspace;
