//! The CustomResourceDefinitions of the `kube-bind.io` kinds, generated from
//! the Rust types, and their YAML files as committed in `deploy/crds/`.

use super::bound_schema::BoundSchema;
use super::cluster_binding::ClusterBinding;
use super::service_binding::APIServiceBinding;
use super::service_export::APIServiceExport;
use super::service_export_request::APIServiceExportRequest;
use super::service_export_template::APIServiceExportTemplate;
use super::service_namespace::APIServiceNamespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, JSON, ValidationRule,
};
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
        .map(without_null_enum_values)
        .map(as_kube_bind_serves_it)
        .collect()
}

/// The kinds kube-bind also serves as `v1alpha1` (installs upgraded from
/// v1alpha1 keep it in `status.storedVersions`, and kube-apiserver refuses
/// a CRD that drops a stored version).
const ALSO_V1ALPHA1: [&str; 5] = [
    "apiservicebindings",
    "apiserviceexportrequests",
    "apiserviceexports",
    "apiservicenamespaces",
    "clusterbindings",
];

/// The spec fields kube-bind's CRDs keep immutable (`self == oldSelf`), with
/// kube-bind's messages.
const IMMUTABLE: [(&str, &str, &str); 11] = [
    (
        "apiservicebindings",
        "kubeconfigSecretRef",
        "kubeconfigSecretRef is immutable",
    ),
    (
        "apiserviceexportrequests",
        "namespaces",
        "namespaces are immutable",
    ),
    (
        "apiserviceexportrequests",
        "parameters",
        "parameters are immutable",
    ),
    (
        "apiserviceexportrequests",
        "permissionClaims",
        "permissionClaims are immutable",
    ),
    (
        "apiserviceexportrequests",
        "resources",
        "resources are immutable",
    ),
    (
        "apiserviceexportrequests",
        "schemaUpdatePolicy",
        "schemaUpdatePolicy is immutable",
    ),
    (
        "apiserviceexports",
        "clusterScopedIsolation",
        "clusterScopedIsolation is immutable",
    ),
    (
        "apiserviceexports",
        "informerScope",
        "informerScope is immutable",
    ),
    ("apiserviceexports", "isolation", "isolation is immutable"),
    (
        "apiserviceexports",
        "permissionClaims",
        "permissionClaims are immutable",
    ),
    ("apiserviceexports", "resources", "resources are immutable"),
];

fn rule(rule: &str, message: &str) -> ValidationRule {
    ValidationRule {
        rule: rule.to_string(),
        message: Some(message.to_string()),
        ..Default::default()
    }
}

/// What kube-bind's CRDs have beyond the derived schema: its immutability
/// rules and ClusterBinding's name rule ([`IMMUTABLE`]), `v1alpha1` served
/// beside `v1alpha2` (conversion `None`, as kube-bind has it: an object is
/// the same under both versions, so v1alpha1 has v1alpha2's schema here),
/// and a request's `status.phase` defaulting to `Pending` (kube-bind's
/// backend acts only on that).
fn as_kube_bind_serves_it(mut crd: CustomResourceDefinition) -> CustomResourceDefinition {
    if crd.spec.names.plural == "apiserviceexportrequests" {
        for version in &mut crd.spec.versions {
            let Some(status) = version
                .schema
                .as_mut()
                .and_then(|s| s.open_api_v3_schema.as_mut())
                .and_then(|s| s.properties.as_mut())
                .and_then(|p| p.get_mut("status"))
            else {
                continue;
            };
            status.default = Some(JSON(serde_json::json!({})));
            if let Some(phase) = status.properties.as_mut().and_then(|p| p.get_mut("phase")) {
                phase.default = Some(JSON(serde_json::json!("Pending")));
            }
        }
    }
    for version in &mut crd.spec.versions {
        let Some(root) = version
            .schema
            .as_mut()
            .and_then(|s| s.open_api_v3_schema.as_mut())
        else {
            continue;
        };
        for (plural, field, message) in IMMUTABLE {
            if plural != crd.spec.names.plural {
                continue;
            }
            if let Some(node) = root
                .properties
                .as_mut()
                .and_then(|p| p.get_mut("spec"))
                .and_then(|spec| spec.properties.as_mut())
                .and_then(|p| p.get_mut(field))
            {
                node.x_kubernetes_validations
                    .get_or_insert_with(Vec::new)
                    .push(rule("self == oldSelf", message));
            }
        }
        if crd.spec.names.plural == "clusterbindings" {
            root.x_kubernetes_validations
                .get_or_insert_with(Vec::new)
                .push(rule(
                    "self.metadata.name == \"cluster\"",
                    "cluster binding name should be cluster",
                ));
        }
    }
    if ALSO_V1ALPHA1.contains(&crd.spec.names.plural.as_str()) {
        let mut v1alpha1 = crd.spec.versions[0].clone();
        v1alpha1.name = "v1alpha1".into();
        v1alpha1.storage = false;
        crd.spec.versions.push(v1alpha1);
    }
    crd
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
            let yaml = serde_yaml::to_string(crd)
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
    fn kube_binds_versions_defaults_and_rules_are_kept() {
        for crd in crds() {
            let versions: Vec<(&str, bool, bool)> = crd
                .spec
                .versions
                .iter()
                .map(|v| (v.name.as_str(), v.served, v.storage))
                .collect();
            let expected: &[(&str, bool, bool)] =
                if ALSO_V1ALPHA1.contains(&crd.spec.names.plural.as_str()) {
                    &[("v1alpha2", true, true), ("v1alpha1", true, false)]
                } else {
                    &[("v1alpha2", true, true)]
                };
            assert_eq!(versions, expected, "{}", crd.spec.names.plural);
        }
        let exports = crd_json("apiserviceexports");
        let isolation = &exports["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]
            ["spec"]["properties"]["isolation"];
        assert_eq!(
            isolation["x-kubernetes-validations"],
            serde_json::json!([{"rule": "self == oldSelf", "message": "isolation is immutable"}])
        );
        let requests = crd_json("apiserviceexportrequests");
        for version in requests["spec"]["versions"].as_array().unwrap() {
            let status = &version["schema"]["openAPIV3Schema"]["properties"]["status"];
            assert_eq!(status["default"], serde_json::json!({}));
            assert_eq!(status["properties"]["phase"]["default"], "Pending");
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
            let crd: Value = serde_yaml::from_str(&yaml).unwrap();
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
        let embedded = &version["properties"]["schema"]["properties"]["openAPIV3Schema"];
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
            let parsed: CustomResourceDefinition = serde_yaml::from_str(&yaml).unwrap();
            assert_eq!(crd_file_name(&parsed), name);
        }
    }
}
