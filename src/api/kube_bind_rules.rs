//! What kube-bind's CRDs say beyond what the Rust types derive, put on the
//! generated CRDs by [`as_kube_bind_serves_it`]: the immutability rules and
//! ClusterBinding's name rule, a request's `status.phase` defaulting to
//! `Pending` (kube-bind's backend acts only on that), the rules standing in
//! for kube-bind's `required` where bindery's extensions need looser ones,
//! and `v1alpha1` served beside `v1alpha2` with kube-bind's `v1alpha1`
//! schema.
//!
//! The rest of kube-bind's validation (patterns, minimum lengths and items,
//! defaults, enums, required fields) is on the Rust types, as schemars
//! attributes. docs/DESIGN.md ("Coming from kube-bind") lists where bindery
//! is looser and why.

use super::v1alpha1;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, CustomResourceDefinitionVersion,
};
use kube::CustomResourceExt;
use serde_json::{Value, json};

/// The kinds kube-bind also serves as `v1alpha1` (installs upgraded from
/// v1alpha1 keep it in `status.storedVersions`, and kube-apiserver refuses
/// a CRD that drops a stored version).
pub(super) const ALSO_V1ALPHA1: [&str; 5] = [
    "apiservicebindings",
    "apiserviceexportrequests",
    "apiserviceexports",
    "apiservicenamespaces",
    "clusterbindings",
];

/// The spec fields kube-bind's CRDs keep immutable (`self == oldSelf`), with
/// kube-bind's messages.
const IMMUTABLE: [(&str, &str, &str); 12] = [
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
    (
        "clusterbindings",
        "kubeconfigSecretRef",
        "kubeconfigSecretRef is immutable",
    ),
];

/// Where kube-bind requires a field that one of bindery's extensions stands
/// in for: (plural, field, the extension that may replace it). A rule
/// requires the field unless the extension is set, and says so as
/// kube-apiserver says a required field is missing.
const REQUIRED_UNLESS: [(&str, &str, &str); 3] = [
    // A request naming a template (bindery's binding flow) lists nothing.
    ("apiserviceexportrequests", "resources", "templateRef"),
    // A template in klutch's form names its resource in APIServiceSelector,
    // and has no scope.
    (
        "apiserviceexporttemplates",
        "resources",
        "APIServiceSelector",
    ),
    ("apiserviceexporttemplates", "scope", "APIServiceSelector"),
];

fn rule(rule: &str, message: &str) -> Value {
    json!({"rule": rule, "message": message})
}

fn add_rule(node: &mut Value, rule: Value) {
    match node.get_mut("x-kubernetes-validations") {
        Some(Value::Array(rules)) => rules.push(rule),
        _ => node["x-kubernetes-validations"] = json!([rule]),
    }
}

/// A version's `openAPIV3Schema` as JSON, edited by `edit`.
fn edit_schema(version: &mut CustomResourceDefinitionVersion, edit: impl FnOnce(&mut Value)) {
    let Some(schema) = version.schema.as_mut() else {
        return;
    };
    let mut root =
        serde_json::to_value(&schema.open_api_v3_schema).expect("a JSONSchemaProps serializes");
    edit(&mut root);
    schema.open_api_v3_schema =
        Some(serde_json::from_value(root).expect("the edited schema is a JSONSchemaProps"));
}

/// `crd` with what kube-bind's CRD of the same kind has beyond the derived
/// schema (see the module documentation).
pub(super) fn as_kube_bind_serves_it(
    mut crd: CustomResourceDefinition,
) -> CustomResourceDefinition {
    let plural = crd.spec.names.plural.clone();
    for version in &mut crd.spec.versions {
        edit_schema(version, |root| v1alpha2_rules(&plural, root));
    }
    if ALSO_V1ALPHA1.contains(&plural.as_str()) {
        let mut v1alpha1 = crd.spec.versions[0].clone();
        v1alpha1.name = "v1alpha1".into();
        v1alpha1.storage = false;
        edit_schema(&mut v1alpha1, |root| as_v1alpha1(&plural, root));
        crd.spec.versions.push(v1alpha1);
    }
    crd
}

fn v1alpha2_rules(plural: &str, root: &mut Value) {
    if plural == "apiserviceexportrequests" {
        let status = &mut root["properties"]["status"];
        status["default"] = json!({});
        status["properties"]["phase"]["default"] = json!("Pending");
    }
    for (_, field, message) in IMMUTABLE.iter().filter(|(p, ..)| *p == plural) {
        if let Some(node) = root.pointer_mut(&format!("/properties/spec/properties/{field}")) {
            add_rule(node, rule("self == oldSelf", message));
        }
    }
    for (_, field, instead) in REQUIRED_UNLESS.iter().filter(|(p, ..)| *p == plural) {
        let mut required = rule(
            &format!("has(self.{field}) || has(self.{instead})"),
            &format!("{field} or {instead} must be set"),
        );
        required["fieldPath"] = json!(format!(".{field}"));
        required["reason"] = json!("FieldValueRequired");
        add_rule(&mut root["properties"]["spec"], required);
    }
    if plural == "clusterbindings" {
        add_rule(
            root,
            rule(
                "self.metadata.name == \"cluster\"",
                "cluster binding name should be cluster",
            ),
        );
    }
}

/// kube-bind's `v1alpha1` of `plural`, from bindery's `v1alpha2` schema
/// (`root`): what kube-bind's `v1alpha1` has that its `v1alpha2` has not.
/// bindery's `v1alpha2` fields stay, optional, so a `v1alpha1` client's
/// update does not prune them.
fn as_v1alpha1(plural: &str, root: &mut Value) {
    match plural {
        // A key of the konnector's kubeconfig Secret, `kubeconfig` only.
        "apiservicebindings" | "clusterbindings" => {
            if let Some(key) =
                root.pointer_mut("/properties/spec/properties/kubeconfigSecretRef/properties/key")
            {
                key["enum"] = json!(["kubeconfig"]);
            }
        }
        "apiserviceexports" => as_v1alpha1_export(root),
        _ => {}
    }
}

/// An export at `v1alpha1` is one CRD-like resource ([`v1alpha1`]): its
/// fields, required fields and rules are kube-bind's `v1alpha1` ones.
fn as_v1alpha1_export(root: &mut Value) {
    let crd = v1alpha1::APIServiceExport::crd();
    let theirs = serde_json::to_value(&crd.spec.versions[0].schema)
        .expect("a CRD's schema serializes")["openAPIV3Schema"]
        .take();
    for part in ["spec", "status"] {
        let ours = &mut root["properties"][part];
        let theirs = &theirs["properties"][part];
        if let (Some(Value::Object(properties)), Some(Value::Object(added))) =
            (ours.get_mut("properties"), theirs.get("properties"))
        {
            for (name, schema) in added {
                properties.insert(name.clone(), schema.clone());
            }
        }
        for key in ["required", "x-kubernetes-validations"] {
            match theirs.get(key) {
                Some(value) => ours[key] = value.clone(),
                None => {
                    if let Value::Object(ours) = ours {
                        ours.remove(key);
                    }
                }
            }
        }
    }
    let (name_rule, message) = v1alpha1::NAME_RULE;
    add_rule(root, rule(name_rule, message));
}
