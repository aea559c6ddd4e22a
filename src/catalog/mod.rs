//! What each consumer may see: its exports, their BoundSchemas and its
//! namespace records, joined into a [`ConsumerView`]. The index is pure;
//! `watch` keeps it in step with the provider.

pub mod index;
pub mod interned;
pub mod watch;

pub use index::{
    Catalog, ConsumerView, ExportRecord, NamespaceRecord, SchemaRecord, ServedResource,
};
