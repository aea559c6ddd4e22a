//! The CustomResourceDefinitions of the `kube-bind.io` kinds, generated from
//! the Rust types, and their YAML files as committed in `deploy/crds/`.

use super::bound_schema::BoundSchema;
use super::cluster_binding::ClusterBinding;
use super::kube_bind_rules::as_kube_bind_serves_it;
use super::service_binding::APIServiceBinding;
use super::service_export::APIServiceExport;
use super::service_export_request::APIServiceExportRequest;
use super::service_export_template::APIServiceExportTemplate;
use super::service_namespace::APIServiceNamespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;
use serde_json::Value;

/// The comment every generated CRD file starts with.
pub const CRD_FILE_HEADER: &str = "\
# Generated from the Rust types in src/api/ by bindery::api::crds_yaml(). Do not edit.
# Regenerate with: BINDERY_UPDATE_CRDS=1 cargo test --test crds_are_fresh
";

/// Every CRD of the group, sorted by name.
pub fn crds() -> Vec<CustomResourceDefinition> {
    let mut crds = vec![
        APIServiceBinding::crd(),
        APIServiceExport::crd(),
        APIServiceExportRequest::crd(),
        APIServiceExportTemplate::crd(),
        APIServiceNamespace::crd(),
        BoundSchema::crd(),
        ClusterBinding::crd(),
    ];
    crds.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    crds.into_iter()
        .map(as_kube_bind_serves_it)
        .map(without_null_enum_values)
        .collect()
}

/// Drops `null` from the `enum` lists the derived schemas give optional enum
/// fields. The fields are `nullable` already, and a null among the allowed
/// strings only confuses readers of the CRD (and `kubectl explain`).
fn without_null_enum_values(crd: CustomResourceDefinition) -> CustomResourceDefinition {
    fn strip(value: &mut Value) {
        match value {
            Value::Object(map) => {
                if let Some(Value::Array(allowed)) = map.get_mut("enum") {
                    allowed.retain(|v| !v.is_null());
                }
                map.values_mut().for_each(strip);
            }
            Value::Array(items) => items.iter_mut().for_each(strip),
            _ => {}
        }
    }
    let mut value = serde_json::to_value(&crd).expect("a CustomResourceDefinition serializes");
    strip(&mut value);
    serde_json::from_value(value)
        .expect("stripping enum nulls keeps a valid CustomResourceDefinition")
}

/// The file a CRD is written to: `<plural>.<group>.yaml`.
pub fn crd_file_name(crd: &CustomResourceDefinition) -> String {
    format!("{}.{}.yaml", crd.spec.names.plural, crd.spec.group)
}

/// Every CRD as `(file name, file contents)`, in the order of [`crds`].
pub fn crds_yaml() -> Vec<(String, String)> {
    crds()
        .iter()
        .map(|crd| {
            let yaml = serde_norway::to_string(crd)
                .expect("a CustomResourceDefinition always serializes to YAML");
            (crd_file_name(crd), format!("{CRD_FILE_HEADER}{yaml}"))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn crd_json(plural: &str) -> Value {
        let crd = crds()
            .into_iter()
            .find(|c| c.spec.names.plural == plural)
            .expect("CRD exists");
        serde_json::to_value(crd).unwrap()
    }

    fn walk(
        value: &Value,
        path: &str,
        visit: &mut dyn FnMut(&str, &serde_json::Map<String, Value>),
    ) {
        match value {
            Value::Object(map) => {
                visit(path, map);
                for (key, child) in map {
                    walk(child, &format!("{path}/{key}"), visit);
                }
            }
            Value::Array(items) => {
                for (i, child) in items.iter().enumerate() {
                    walk(child, &format!("{path}/{i}"), visit);
                }
            }
            _ => {}
        }
    }

    #[test]
    fn there_is_one_crd_per_kind_in_the_group() {
        let names: Vec<_> = crds_yaml().into_iter().map(|(name, _)| name).collect();
        assert_eq!(
            names,
            [
                "apiservicebindings.kube-bind.io.yaml",
                "apiserviceexportrequests.kube-bind.io.yaml",
                "apiserviceexports.kube-bind.io.yaml",
                "apiserviceexporttemplates.kube-bind.io.yaml",
                "apiservicenamespaces.kube-bind.io.yaml",
                "boundschemas.kube-bind.io.yaml",
                "clusterbindings.kube-bind.io.yaml",
            ]
        );
        for crd in crds() {
            assert_eq!(crd.spec.group, super::super::GROUP);
            assert_eq!(crd.spec.versions[0].name, super::super::VERSION);
            assert!(
                crd.spec.versions[0].subresources.is_some(),
                "status subresource"
            );
        }
    }

    #[test]
    fn scopes_and_short_names_match_kube_bind() {
        let scope = |plural: &str| crd_json(plural)["spec"]["scope"].clone();
        assert_eq!(scope("apiservicebindings"), "Cluster");
        assert_eq!(scope("apiserviceexporttemplates"), "Cluster");
        for plural in [
            "apiserviceexports",
            "apiserviceexportrequests",
            "apiservicenamespaces",
            "boundschemas",
            "clusterbindings",
        ] {
            assert_eq!(scope(plural), "Namespaced", "{plural}");
        }
        assert_eq!(
            crd_json("boundschemas")["spec"]["names"]["shortNames"],
            serde_json::json!(["bs"])
        );
        assert_eq!(
            crd_json("apiservicebindings")["spec"]["names"]["shortNames"],
            serde_json::json!(["sb"])
        );
    }

    #[test]
    fn schemas_have_no_references_and_every_node_has_a_type() {
        for crd in crds() {
            let name = crd.metadata.name.clone().unwrap_or_default();
            let schema = serde_json::to_value(&crd.spec.versions[0].schema).unwrap();
            walk(&schema["openAPIV3Schema"], "", &mut |path, node| {
                assert!(!node.contains_key("$ref"), "{name}{path} has a $ref");
                for forbidden in ["anyOf", "oneOf", "allOf", "not"] {
                    assert!(
                        !node.contains_key(forbidden),
                        "{name}{path} has {forbidden}"
                    );
                }
            });
            assert_typed(&name, "", &schema["openAPIV3Schema"]);
        }
    }

    /// Structural schemas need a type on every node, unless the node is
    /// int-or-string or keeps unknown fields.
    fn assert_typed(name: &str, path: &str, node: &Value) {
        let node = node.as_object().expect("schema node is an object");
        assert!(
            node.contains_key("type")
                || node.contains_key("x-kubernetes-int-or-string")
                || node.contains_key("x-kubernetes-preserve-unknown-fields"),
            "{name}{path} has no type"
        );
        if let Some(properties) = node.get("properties").and_then(Value::as_object) {
            for (key, child) in properties {
                assert_typed(name, &format!("{path}/{key}"), child);
            }
        }
        for key in ["items", "additionalProperties"] {
            if let Some(child) = node.get(key).filter(|c| c.is_object()) {
                assert_typed(name, &format!("{path}/{key}"), child);
            }
        }
    }

    #[test]
    fn enums_list_only_strings() {
        for (name, yaml) in crds_yaml() {
            let crd: Value = serde_norway::from_str(&yaml).unwrap();
            walk(&crd, "", &mut |path, node| {
                if let Some(Value::Array(allowed)) = node.get("enum") {
                    assert!(
                        allowed.iter().all(Value::is_string),
                        "{name}{path}: {allowed:?}"
                    );
                }
            });
        }
    }

    #[test]
    fn embedded_openapi_schemas_are_opaque_objects() {
        let crd = crd_json("boundschemas");
        let version = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
            ["properties"]["versions"]["items"];
        // Kept whole, in either form kube-bind writes (wrapped or bare).
        let embedded = &version["properties"]["schema"];
        assert_eq!(embedded["type"], "object");
        assert_eq!(embedded["x-kubernetes-preserve-unknown-fields"], true);
        assert!(embedded.get("properties").is_none());
        assert!(version["properties"]["subresources"].is_object());
        assert!(version["properties"]["additionalPrinterColumns"].is_object());
    }

    #[test]
    fn free_form_fields_preserve_unknown_fields() {
        let request = crd_json("apiserviceexportrequests");
        let parameters = &request["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]
            ["spec"]["properties"]["parameters"];
        assert_eq!(parameters["x-kubernetes-preserve-unknown-fields"], true);
        let binding = crd_json("clusterbindings");
        let provider_spec = &binding["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]
            ["spec"]["properties"]["serviceProviderSpec"];
        assert_eq!(provider_spec["x-kubernetes-preserve-unknown-fields"], true);
    }

    #[test]
    fn yaml_files_start_with_the_header_and_parse_back() {
        for (name, yaml) in crds_yaml() {
            assert!(yaml.starts_with(CRD_FILE_HEADER), "{name}");
            let parsed: CustomResourceDefinition = serde_norway::from_str(&yaml).unwrap();
            assert_eq!(crd_file_name(&parsed), name);
        }
    }
}
