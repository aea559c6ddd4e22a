//! bindery: a virtual Kubernetes API endpoint that serves APIs living in a
//! provider cluster to app clusters, without copying CRDs or objects.
//!
//! The request flow and vocabulary are in `docs/DESIGN.md`. Each module owns one
//! step of it; modules that are still empty say which issue fills them.
#![forbid(unsafe_code)]

pub mod certs;
