//! Development PKI: every CA, serving certificate and client certificate the
//! test clusters and bindery need (`bindery certs`). `authority` makes PEM,
//! `store` lays it out on disk. See `certs/README.md` for what each file is for.

pub mod authority;
pub mod store;

pub use store::{BinderyPki, ClusterPki, ensure_bindery, ensure_cluster, ensure_consumer};
