//! Discovery and OpenAPI documents for the CRDs one consumer is served,
//! generated the way kube-apiserver generates them for the same CRDs, so that
//! kubectl and controllers cannot tell bindery from the real thing.
//!
//! Pure: every function takes the served set (a slice of
//! `CustomResourceDefinitionSpec`, one per bound CRD) and returns a document;
//! nothing here does I/O. The HTTP layer picks the function by path, serves the
//! `serde_json::Value` as JSON and uses [`etag`] for `ETag`/`If-None-Match`.
//!
//! | endpoint | function | real server's headers |
//! | --- | --- | --- |
//! | `/api` | [`legacy::api_versions`], or [`aggregated::api`] | |
//! | `/apis` | [`legacy::api_group_list`], or [`aggregated::apis`] (see [`negotiate`]) | aggregated: `ETag`, `Vary: Accept`, `Cache-Control: public` |
//! | `/apis/<g>` | [`legacy::api_group`] | |
//! | `/apis/<g>/<v>` | [`legacy::api_resource_list`] | |
//! | `/openapi/v2` | [`openapi::v2`] | `ETag` |
//! | `/openapi/v3` | [`openapi::v3_root`] | |
//! | `/openapi/v3/apis/<g>/<v>` | [`openapi::v3_group_version`] | `ETag`; with the right `?hash=`, `Cache-Control: public, immutable` |
//!
//! Only versions with `served: true` are considered; a spec without any is
//! ignored. What the real server takes from a CRD's status (accepted names, the
//! Terminating condition) is taken from the spec here.

pub mod aggregated;
pub mod etag;
pub mod legacy;
pub mod negotiate;
pub mod openapi;
mod served;
pub mod version;

#[cfg(test)]
mod reference_tests;
#[cfg(test)]
mod robustness_tests;
#[cfg(test)]
mod testdata;

pub use etag::Document;
pub use negotiate::DiscoveryFormat;
