//! kube-apiserver's wire formats, for what crosses bindery in them: query
//! parameters, media types, request bodies and protobuf. Each submodule
//! reads caller input exactly as kube-apiserver reads it, and refuses it
//! with kube-apiserver's words. Pure: no I/O.

pub mod accept;
pub mod body;
pub mod go_number;
pub mod go_quote;
pub mod gogo;
pub mod json;
pub mod object_meta;
pub mod patch;
pub mod protobuf;
pub mod query;
pub mod restful;
pub mod selector;
pub mod validate;
pub mod verb;
pub mod yaml;
