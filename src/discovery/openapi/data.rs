//! What kube-apiserver's CRD OpenAPI takes from Kubernetes' own types
//! (ObjectMeta, ListMeta, Status, DeleteOptions, Patch, autoscaling/v1 Scale
//! and what they reference; the TypeMeta properties; the query parameters of
//! each action), captured once from a real kube-apiserver by
//! `conformance/reference/capture-discovery.sh` into `../data/` and embedded.

use std::sync::LazyLock;

use serde_json::{Map, Value};

/// One of the two captured data sets.
pub(crate) struct Data {
    doc: Value,
}

static V2: LazyLock<Data> = LazyLock::new(|| Data::parse(include_str!("../data/openapi-v2.json")));
static V3: LazyLock<Data> = LazyLock::new(|| Data::parse(include_str!("../data/openapi-v3.json")));

/// The OpenAPI v2 data: `top` (the document's top-level fields),
/// `parameters` (shared parameters), `definitions`.
pub(crate) fn v2() -> &'static Data {
    &V2
}

/// The OpenAPI v3 data: `openapi`, `info`, `schemas`.
pub(crate) fn v3() -> &'static Data {
    &V3
}

static EMPTY: LazyLock<Map<String, Value>> = LazyLock::new(Map::new);

impl Data {
    fn parse(text: &str) -> Data {
        // The text is a committed constant; the tests parse it too.
        Data {
            doc: serde_json::from_str(text).expect("embedded OpenAPI data is valid JSON"),
        }
    }

    /// A top-level field.
    pub fn get(&self, key: &str) -> &Value {
        self.doc.get(key).unwrap_or(&Value::Null)
    }

    /// A top-level object field, or an empty one.
    pub fn map(&self, key: &str) -> &Map<String, Value> {
        self.doc
            .get(key)
            .and_then(Value::as_object)
            .unwrap_or(&EMPTY)
    }

    /// The query parameters an action (`list`, `post`, `deletecollection`,
    /// `get`, `put`, `delete`, `patch`) adds, as the document writes them.
    pub fn action(&self, action: &str) -> &[Value] {
        self.map("actions")
            .get(action)
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or_default()
    }

    /// A path-level parameter (`pretty`, `namespace`).
    pub fn path_parameter(&self, name: &str) -> Value {
        self.map("pathParameters")
            .get(name)
            .cloned()
            .unwrap_or(Value::Null)
    }

    /// TypeMeta's `apiVersion` or `kind` property.
    pub fn type_meta(&self, field: &str) -> Value {
        self.map("typeMeta")
            .get(field)
            .cloned()
            .unwrap_or(Value::Null)
    }

    /// The description of a kind's `metadata` (ObjectMeta) property.
    pub fn object_meta_description(&self) -> &str {
        self.get("objectMetaDescription")
            .as_str()
            .unwrap_or_default()
    }

    /// The description of a list's `metadata` (ListMeta) property.
    pub fn list_meta_description(&self) -> &str {
        self.get("listMetaDescription").as_str().unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embedded_data_has_what_the_generator_reads() {
        for (data, table) in [(v2(), "definitions"), (v3(), "schemas")] {
            for name in [
                "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta",
                "io.k8s.api.autoscaling.v1.Scale",
            ] {
                assert!(data.map(table).contains_key(name), "{table} lacks {name}");
            }
            for action in [
                "list",
                "post",
                "deletecollection",
                "get",
                "put",
                "delete",
                "patch",
            ] {
                assert!(!data.action(action).is_empty(), "{action}");
            }
            for p in ["pretty", "namespace"] {
                assert!(data.path_parameter(p).is_object(), "{p}");
            }
            assert_eq!(data.type_meta("kind")["type"], "string");
            assert!(
                data.object_meta_description()
                    .starts_with("Standard object's metadata.")
            );
            assert!(
                data.list_meta_description()
                    .starts_with("Standard list metadata.")
            );
        }
        assert!(v2().map("parameters").contains_key("pretty-tJGM1-ng"));
        assert_eq!(v2().map("top")["swagger"], "2.0");
        assert_eq!(v3().get("openapi"), "3.0.0");
    }
}
