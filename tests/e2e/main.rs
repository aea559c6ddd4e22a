//! Cluster tests: one test binary, so the real clusters start once per run.
//! Every test here runs against real kube-apiserver, etcd and
//! kube-controller-manager processes, and real kubectl.

mod aggregation;
mod app_controllers;
mod authn;
mod authz;
mod availability;
mod bind;
mod bind_takeover;
mod binder;
mod bindery;
mod browser;
mod cache;
mod cache_stall;
mod chart;
mod claims;
mod connections;
mod containment;
mod controllers;
mod deletion;
mod export_status;
mod fixture;
mod front_proxy;
mod hostile;
mod http2;
mod impersonation;
mod kcp;
mod kube_bind_controller;
mod kube_bind_crds;
mod kube_bind_live;
mod kube_bind_move;
mod layout;
mod leader;
mod lifecycle;
mod migrate;
mod namespace_access;
mod operations;
mod owners;
mod pods;
mod providers;
mod recording_server;
mod replicas;
mod rolling_restart;
mod router_fixture;
mod serving;
mod side_by_side;
mod smoke;
// libtest starts tests in the order of their names, two at a time: the
// soak (ten minutes) is named to start first, so that the other tests run
// beside it instead of leaving it to run alone at the end (about 4 minutes
// of the suite).
#[path = "soak.rs"]
mod a_soak;
mod streams;
mod tokens;
mod workspace;
