//! Consumer ⇄ provider translation: pure functions, no I/O.
//!
//! A request arrives in consumer terms (its namespaces, its names, no identity
//! labels) and leaves in provider terms; a response comes back from the
//! provider and leaves in consumer terms, with nothing of the provider's
//! namespaces, another consumer or another export left in it.

pub mod binding;
pub mod claim_filter;
pub mod claim_references;
pub mod claimed;
pub mod claimed_discovery;
pub mod claimed_writes;
pub mod consumer_view;
pub mod continue_token;
pub mod fields;
pub mod forget;
pub mod identity;
pub mod kcp;
pub mod kube_bind_marks;
pub mod namespaces;
pub mod objects;
pub mod owners;
pub mod request;
pub mod response;
pub mod scale;
pub mod workspace;

pub use binding::{BoundResource, Isolation};
pub use identity::IdentityHash;
pub use namespaces::NamespaceMap;
