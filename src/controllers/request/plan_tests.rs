//! Unit tests of [`plan`]: every refusal (its reason, and that its message
//! names what is wrong), the plans made from requests with and without a
//! template (kube-bind's and klutch's form), and a property that arbitrary
//! namespace and claim names never make it panic. Requests, templates and
//! CRDs are built from JSON, so the wire form is exercised too.

use super::plan::*;
use crate::api::{
    APIServiceExportRequestSpec, APIServiceExportTemplateSpec, ExportedResource, InformerScope,
    Isolation, ResourceScope, SchemaUpdatePolicy, keys,
};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use proptest::prelude::*;
use serde_json::{Value, json};
use std::collections::BTreeMap;

// ---------------------------------------------------------------------------
// Builders
// ---------------------------------------------------------------------------

/// A CRD `<plural>.<group>` under construction: namespaced, serving `v1`,
/// not labelled exported, unless told otherwise.
struct Crd {
    plural: &'static str,
    group: &'static str,
    scope: &'static str,
    versions: Vec<(&'static str, bool)>,
    exported: Option<&'static str>,
    conversion: Option<Value>,
}

fn crd(plural: &'static str, group: &'static str) -> Crd {
    Crd {
        plural,
        group,
        scope: "Namespaced",
        versions: vec![("v1", true)],
        exported: None,
        conversion: None,
    }
}

impl Crd {
    fn cluster_scoped(mut self) -> Self {
        self.scope = "Cluster";
        self
    }

    /// The versions, in order, each with whether it is served.
    fn versions(mut self, versions: &[(&'static str, bool)]) -> Self {
        self.versions = versions.to_vec();
        self
    }

    /// Labels it `kube-bind.io/exported=true`.
    fn exported(self) -> Self {
        self.exported_label("true")
    }

    fn exported_label(mut self, value: &'static str) -> Self {
        self.exported = Some(value);
        self
    }

    fn conversion(mut self, conversion: Value) -> Self {
        self.conversion = Some(conversion);
        self
    }

    fn build(self) -> CustomResourceDefinition {
        let singular = self.plural.strip_suffix('s').unwrap_or(self.plural);
        let kind = format!("{}{}", singular[..1].to_uppercase(), &singular[1..]);
        let versions: Vec<Value> = self
            .versions
            .iter()
            .enumerate()
            .map(|(i, (name, served))| {
                json!({
                    "name": name,
                    "served": served,
                    "storage": i == 0,
                    "schema": {"openAPIV3Schema": {
                        "type": "object",
                        "properties": {"spec": {
                            "type": "object",
                            "properties": {"size": {"type": "string"}},
                        }},
                    }},
                })
            })
            .collect();
        let mut value = json!({
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": format!("{}.{}", self.plural, self.group)},
            "spec": {
                "group": self.group,
                "names": {
                    "plural": self.plural,
                    "singular": singular,
                    "kind": kind,
                    "listKind": format!("{kind}List"),
                },
                "scope": self.scope,
                "versions": versions,
            },
        });
        if let Some(label) = self.exported {
            value["metadata"]["labels"] = json!({ keys::EXPORTED_LABEL: label });
        }
        if let Some(conversion) = self.conversion {
            value["spec"]["conversion"] = conversion;
        }
        serde_json::from_value(value).expect("the test CRD parses")
    }
}

/// The provider's CRDs, by name, as the reconciler hands them to `plan`.
fn crds(list: impl IntoIterator<Item = Crd>) -> BTreeMap<String, CustomResourceDefinition> {
    list.into_iter()
        .map(Crd::build)
        .map(|crd| (crd.metadata.name.clone().expect("named"), crd))
        .collect()
}

/// `widgets.example.com`, labelled exported.
fn widgets() -> Crd {
    crd("widgets", "example.com").exported()
}

/// `gadgets.example.com`, labelled exported.
fn gadgets() -> Crd {
    crd("gadgets", "example.com").exported()
}

#[track_caller]
fn request(spec: Value) -> APIServiceExportRequestSpec {
    serde_json::from_value(spec).expect("the test request parses")
}

#[track_caller]
fn template(spec: Value) -> APIServiceExportTemplateSpec {
    serde_json::from_value(spec).expect("the test template parses")
}

/// A request for `widgets.example.com` and nothing else.
fn widgets_request() -> APIServiceExportRequestSpec {
    request(json!({"resources": [{"group": "example.com", "resource": "widgets"}]}))
}

/// A request for one resource of a template named "widgets".
fn templated_request() -> APIServiceExportRequestSpec {
    request(json!({"templateRef": {"name": "widgets"}}))
}

#[track_caller]
fn planned(result: Result<ExportPlan, Refusal>) -> ExportPlan {
    match result {
        Ok(plan) => plan,
        Err(refusal) => panic!("expected a plan, got {refusal:?}"),
    }
}

/// Checks `result` is a refusal with `reason` whose message mentions every
/// one of `mentions`; returns the refusal.
#[track_caller]
fn assert_refused(result: Result<ExportPlan, Refusal>, reason: &str, mentions: &[&str]) -> Refusal {
    let refusal = match result {
        Ok(plan) => panic!("expected a {reason} refusal, got {plan:#?}"),
        Err(refusal) => refusal,
    };
    assert_eq!(refusal.reason, reason, "message: {}", refusal.message);
    for mention in mentions {
        assert!(
            refusal.message.contains(mention),
            "the {reason} message should mention {mention:?}: {}",
            refusal.message
        );
    }
    refusal
}

fn version_names(plan: &PlannedResource) -> Vec<&str> {
    plan.schema
        .versions
        .iter()
        .map(|v| v.name.as_str())
        .collect()
}

fn resource_names(plan: &ExportPlan) -> Vec<String> {
    plan.resources
        .iter()
        .map(|r| r.resource.group_resource().to_string())
        .collect()
}

// ---------------------------------------------------------------------------
// Refusals: template and resources
// ---------------------------------------------------------------------------

#[test]
fn a_missing_template_is_refused_by_name() {
    let refusal = assert_refused(
        plan(
            &request(json!({"templateRef": {"name": "postgresql"}})),
            TemplateLookup::Missing("postgresql"),
            &crds([widgets()]),
        ),
        "TemplateNotFound",
        &["\"postgresql\"", "apiserviceexporttemplates"],
    );
    assert!(refusal.message.contains("APIServiceExportTemplate"));
}

#[test]
fn a_missing_template_is_refused_even_when_the_request_names_resources() {
    let request = request(json!({
        "templateRef": {"name": "gone"},
        "resources": [{"group": "example.com", "resource": "widgets"}],
    }));
    assert_refused(
        plan(
            &request,
            TemplateLookup::Missing("gone"),
            &crds([widgets()]),
        ),
        "TemplateNotFound",
        &["\"gone\""],
    );
}

#[test]
fn a_request_without_resources_or_template_is_refused() {
    assert_refused(
        plan(
            &request(json!({})),
            TemplateLookup::NotRequested,
            &crds([widgets()]),
        ),
        "NoResources",
        &["spec.resources", "spec.templateRef"],
    );
}

#[test]
fn a_template_offering_no_resources_gives_no_resources() {
    assert_refused(
        plan(
            &templated_request(),
            TemplateLookup::Found(&template(json!({"description": "empty"}))),
            &crds([widgets()]),
        ),
        "NoResources",
        &[],
    );
}

#[test]
fn a_requested_resource_the_template_does_not_offer_is_refused() {
    let request = request(json!({
        "templateRef": {"name": "widgets"},
        "resources": [
            {"group": "example.com", "resource": "widgets"},
            {"group": "example.com", "resource": "gadgets"},
        ],
    }));
    let template =
        template(json!({"resources": [{"group": "example.com", "resource": "widgets"}]}));
    assert_refused(
        plan(
            &request,
            TemplateLookup::Found(&template),
            &crds([widgets(), gadgets()]),
        ),
        "NotOffered",
        &["resource gadgets.example.com", "template"],
    );
}

#[test]
fn a_requested_resource_of_another_group_is_not_offered() {
    let request = request(json!({
        "templateRef": {"name": "widgets"},
        "resources": [{"group": "other.example.com", "resource": "widgets"}],
    }));
    let template =
        template(json!({"resources": [{"group": "example.com", "resource": "widgets"}]}));
    assert_refused(
        plan(
            &request,
            TemplateLookup::Found(&template),
            &crds([widgets()]),
        ),
        "NotOffered",
        &["widgets.other.example.com"],
    );
}

#[test]
fn a_requested_claim_the_template_does_not_offer_is_refused() {
    let request = request(json!({
        "templateRef": {"name": "widgets"},
        "permissionClaims": [{"resource": "configmaps"}],
    }));
    let template = template(json!({
        "resources": [{"group": "example.com", "resource": "widgets"}],
        "permissionClaims": [{"resource": "secrets"}],
    }));
    assert_refused(
        plan(
            &request,
            TemplateLookup::Found(&template),
            &crds([widgets()]),
        ),
        "NotOffered",
        &["permission claim configmaps", "template"],
    );
}

#[test]
fn a_requested_claim_is_not_offered_by_a_template_without_claims() {
    let request = request(json!({
        "templateRef": {"name": "widgets"},
        "permissionClaims": [{"resource": "secrets"}],
    }));
    let template =
        template(json!({"resources": [{"group": "example.com", "resource": "widgets"}]}));
    assert_refused(
        plan(
            &request,
            TemplateLookup::Found(&template),
            &crds([widgets()]),
        ),
        "NotOffered",
        &["permission claim secrets"],
    );
}

#[test]
fn a_missing_crd_is_refused_by_name() {
    assert_refused(
        plan(
            &widgets_request(),
            TemplateLookup::NotRequested,
            &crds([gadgets()]),
        ),
        "CustomResourceDefinitionNotFound",
        &["\"widgets.example.com\"", "provider cluster"],
    );
}

#[test]
fn a_missing_crd_of_a_template_is_refused_by_name() {
    let template =
        template(json!({"resources": [{"group": "example.com", "resource": "widgets"}]}));
    assert_refused(
        plan(
            &templated_request(),
            TemplateLookup::Found(&template),
            &crds([]),
        ),
        "CustomResourceDefinitionNotFound",
        &["\"widgets.example.com\""],
    );
}

#[test]
fn without_template_an_unlabelled_crd_is_not_exported() {
    assert_refused(
        plan(
            &widgets_request(),
            TemplateLookup::NotRequested,
            &crds([crd("widgets", "example.com")]),
        ),
        "NotExported",
        &[
            "\"widgets.example.com\"",
            "kube-bind.io/exported=true",
            "template",
        ],
    );
}

#[test]
fn without_template_an_exported_label_other_than_true_is_not_exported() {
    for value in ["false", "True", "yes", ""] {
        assert_refused(
            plan(
                &widgets_request(),
                TemplateLookup::NotRequested,
                &crds([crd("widgets", "example.com").exported_label(value)]),
            ),
            "NotExported",
            &["widgets.example.com"],
        );
    }
}

#[test]
fn without_template_a_labelled_crd_is_planned() {
    let plan = planned(plan(
        &widgets_request(),
        TemplateLookup::NotRequested,
        &crds([widgets()]),
    ));
    assert_eq!(resource_names(&plan), ["widgets.example.com"]);
}

#[test]
fn with_template_an_unlabelled_crd_is_planned() {
    // The template is the provider operator's consent; no label needed.
    let template =
        template(json!({"resources": [{"group": "example.com", "resource": "widgets"}]}));
    let plan = planned(plan(
        &templated_request(),
        TemplateLookup::Found(&template),
        &crds([crd("widgets", "example.com")]),
    ));
    assert_eq!(resource_names(&plan), ["widgets.example.com"]);
}

#[test]
fn a_requested_version_that_is_not_served_is_refused() {
    let request = request(json!({
        "resources": [{"group": "example.com", "resource": "widgets", "versions": ["v1alpha1"]}],
    }));
    let crds = crds([widgets().versions(&[("v1", true), ("v1beta1", true), ("v1alpha1", false)])]);
    assert_refused(
        plan(&request, TemplateLookup::NotRequested, &crds),
        "VersionNotServed",
        &["\"v1alpha1\"", "widgets.example.com", "v1, v1beta1"],
    );
}

#[test]
fn a_requested_version_the_crd_does_not_have_is_refused() {
    let request = request(json!({
        "resources": [{"group": "example.com", "resource": "widgets", "versions": ["v1", "v2"]}],
    }));
    assert_refused(
        plan(&request, TemplateLookup::NotRequested, &crds([widgets()])),
        "VersionNotServed",
        &["\"v2\"", "widgets.example.com", "served versions: v1"],
    );
}

#[test]
fn a_klutch_selector_version_that_is_not_served_is_refused() {
    let template = template(json!({
        "APIServiceSelector": {"group": "example.com", "resource": "widgets", "version": "v2"},
    }));
    assert_refused(
        plan(
            &templated_request(),
            TemplateLookup::Found(&template),
            &crds([widgets()]),
        ),
        "VersionNotServed",
        &["\"v2\"", "widgets.example.com"],
    );
}

#[test]
fn resources_of_different_scopes_are_refused() {
    let request = request(json!({
        "resources": [
            {"group": "example.com", "resource": "widgets"},
            {"group": "example.com", "resource": "gadgets"},
        ],
    }));
    let crds = crds([widgets(), gadgets().cluster_scoped()]);
    assert_refused(
        plan(&request, TemplateLookup::NotRequested, &crds),
        "DifferentScopes",
        &[
            "widgets.example.com is Namespaced",
            "gadgets.example.com is Cluster",
        ],
    );
}

#[test]
fn resources_of_one_scope_are_planned_together() {
    let request = request(json!({
        "resources": [
            {"group": "example.com", "resource": "widgets"},
            {"group": "example.com", "resource": "gadgets"},
        ],
    }));
    let crds = crds([widgets().cluster_scoped(), gadgets().cluster_scoped()]);
    let plan = planned(plan(&request, TemplateLookup::NotRequested, &crds));
    assert_eq!(
        resource_names(&plan),
        ["widgets.example.com", "gadgets.example.com"]
    );
    assert!(
        plan.resources
            .iter()
            .all(|r| r.schema.scope == ResourceScope::Cluster)
    );
}

// ---------------------------------------------------------------------------
// Refusals: permission claims
// ---------------------------------------------------------------------------

/// Plans a request for the exported widgets with `claim`.
fn plan_with_claim(claim: Value) -> Result<ExportPlan, Refusal> {
    let request = request(json!({
        "resources": [{"group": "example.com", "resource": "widgets"}],
        "permissionClaims": [claim],
    }));
    plan(&request, TemplateLookup::NotRequested, &crds([widgets()]))
}

#[test]
fn a_claim_with_an_upper_case_resource_is_invalid() {
    assert_refused(
        plan_with_claim(json!({"resource": "Secrets"})),
        "InvalidPermissionClaim",
        &[
            "permission claim on Secrets",
            "\"Secrets\"",
            "lower-case plural",
        ],
    );
}

#[test]
fn a_claim_with_a_malformed_resource_is_invalid() {
    for resource in [
        "", "secret s", "pods/log", "-secrets", "secrets.", "sécrets",
    ] {
        assert_refused(
            plan_with_claim(json!({"resource": resource})),
            "InvalidPermissionClaim",
            &[&format!("{resource:?}")],
        );
    }
}

#[test]
fn a_claim_on_a_malformed_namespace_is_invalid_and_a_good_one_is_planned() {
    assert_refused(
        plan_with_claim(json!({"resource": "secrets", "selector": {"namespaces": ["Apps"]}})),
        "InvalidPermissionClaim",
        &["namespace \"Apps\"", "not a valid namespace name"],
    );
    let plan = planned(plan_with_claim(
        json!({"resource": "secrets", "selector": {"namespaces": ["apps"]}}),
    ));
    assert_eq!(plan.claims[0].selector.namespaces, vec!["apps".to_string()]);
}

#[test]
fn a_claim_on_an_exported_resource_is_invalid() {
    assert_refused(
        plan_with_claim(json!({"group": "example.com", "resource": "widgets"})),
        "InvalidPermissionClaim",
        &[
            "permission claim on widgets.example.com",
            "already exported",
        ],
    );
}

#[test]
fn a_claim_on_the_same_resource_of_another_group_is_valid() {
    let plan = planned(plan_with_claim(
        json!({"group": "other.example.com", "resource": "widgets"}),
    ));
    assert_eq!(plan.claims[0].group, "other.example.com");
}

#[test]
fn a_label_selector_with_an_unknown_operator_is_invalid() {
    assert_refused(
        plan_with_claim(json!({
            "resource": "secrets",
            "selector": {"labelSelector": {"matchExpressions": [
                {"key": "app", "operator": "Matches", "values": ["db"]},
            ]}},
        })),
        "InvalidPermissionClaim",
        &["permission claim on secrets", "\"app\"", "\"Matches\""],
    );
}

#[test]
fn a_label_selector_operator_is_case_sensitive() {
    assert_refused(
        plan_with_claim(json!({
            "resource": "secrets",
            "selector": {"labelSelector": {"matchExpressions": [
                {"key": "app", "operator": "in", "values": ["db"]},
            ]}},
        })),
        "InvalidPermissionClaim",
        &["\"in\""],
    );
}

#[test]
fn in_and_not_in_without_values_are_invalid() {
    for operator in ["In", "NotIn"] {
        for values in [json!(null), json!([])] {
            let mut expression = json!({"key": "tier", "operator": operator});
            if !values.is_null() {
                expression["values"] = values;
            }
            assert_refused(
                plan_with_claim(json!({
                    "resource": "secrets",
                    "selector": {"labelSelector": {"matchExpressions": [expression]}},
                })),
                "InvalidPermissionClaim",
                &["\"tier\"", &format!("{operator:?}"), "0 values"],
            );
        }
    }
}

#[test]
fn exists_and_does_not_exist_with_values_are_invalid() {
    for operator in ["Exists", "DoesNotExist"] {
        assert_refused(
            plan_with_claim(json!({
                "resource": "secrets",
                "selector": {"labelSelector": {"matchExpressions": [
                    {"key": "tier", "operator": operator, "values": ["a", "b"]},
                ]}},
            })),
            "InvalidPermissionClaim",
            &["\"tier\"", &format!("{operator:?}"), "2 values"],
        );
    }
}

#[test]
fn the_first_invalid_label_requirement_is_named() {
    assert_refused(
        plan_with_claim(json!({
            "resource": "secrets",
            "selector": {"labelSelector": {"matchExpressions": [
                {"key": "good", "operator": "Exists"},
                {"key": "bad", "operator": "In"},
            ]}},
        })),
        "InvalidPermissionClaim",
        &["\"bad\""],
    );
}

#[test]
fn a_named_resource_without_name_is_invalid() {
    assert_refused(
        plan_with_claim(json!({
            "resource": "secrets",
            "selector": {"namedResources": [
                {"name": "db-credentials"},
                {"name": "", "namespace": "default"},
            ]},
        })),
        "InvalidPermissionClaim",
        &["permission claim on secrets", "no name"],
    );
}

#[test]
fn a_reference_to_a_resource_that_is_not_exported_is_invalid() {
    assert_refused(
        plan_with_claim(json!({
            "resource": "secrets",
            "selector": {"references": [{
                "group": "example.com",
                "resource": "gadgets",
                "jsonPath": {"name": "$.spec.secretRef.name"},
            }]},
        })),
        "InvalidPermissionClaim",
        &[
            "permission claim on secrets",
            "gadgets.example.com",
            "does not export",
        ],
    );
}

#[test]
fn a_reference_without_json_path_is_invalid() {
    assert_refused(
        plan_with_claim(json!({
            "resource": "secrets",
            "selector": {"references": [{"group": "example.com", "resource": "widgets"}]},
        })),
        "InvalidPermissionClaim",
        &[
            "permission claim on secrets",
            "widgets.example.com",
            "jsonPath.name",
        ],
    );
}

#[test]
fn a_reference_with_only_a_namespace_path_is_invalid() {
    assert_refused(
        plan_with_claim(json!({
            "resource": "secrets",
            "selector": {"references": [{
                "group": "example.com",
                "resource": "widgets",
                "jsonPath": {"namespace": "$.metadata.namespace"},
            }]},
        })),
        "InvalidPermissionClaim",
        &["widgets.example.com", "jsonPath.name"],
    );
}

#[test]
fn an_invalid_claim_of_the_template_is_refused_too() {
    let template = template(json!({
        "resources": [{"group": "example.com", "resource": "widgets"}],
        "permissionClaims": [{"resource": "ConfigMaps"}],
    }));
    assert_refused(
        plan(
            &templated_request(),
            TemplateLookup::Found(&template),
            &crds([widgets()]),
        ),
        "InvalidPermissionClaim",
        &["\"ConfigMaps\""],
    );
}

#[test]
fn valid_claims_of_every_selector_form_are_planned() {
    let claim = json!({
        "resource": "secrets",
        "selector": {
            "namedResources": [{"name": "db-credentials", "namespace": "default"}],
            "labelSelector": {
                "matchLabels": {"app": "db"},
                "matchExpressions": [
                    {"key": "a", "operator": "In", "values": ["x"]},
                    {"key": "b", "operator": "NotIn", "values": ["y", "z"]},
                    {"key": "c", "operator": "Exists"},
                    {"key": "d", "operator": "DoesNotExist", "values": []},
                ],
            },
            "references": [{
                "group": "example.com",
                "resource": "widgets",
                "jsonPath": {"name": "$.spec.secretRef.name"},
            }],
            "owner": "Provider",
        },
    });
    let plan = planned(plan_with_claim(claim.clone()));
    assert_eq!(plan.claims.len(), 1);
    assert_eq!(serde_json::to_value(&plan.claims[0]).unwrap(), claim);
}

// ---------------------------------------------------------------------------
// Refusals: namespaces
// ---------------------------------------------------------------------------

#[test]
fn an_invalid_namespace_of_the_request_is_refused_by_name() {
    for name in [
        "Team-A",
        "team_a",
        "-team",
        "team-",
        "",
        "team.a",
        "a".repeat(64).as_str(),
    ] {
        let request = request(json!({
            "resources": [{"group": "example.com", "resource": "widgets"}],
            "namespaces": [{"name": "default"}, {"name": name}],
        }));
        assert_refused(
            plan(&request, TemplateLookup::NotRequested, &crds([widgets()])),
            "InvalidNamespace",
            &[&format!("{name:?}")],
        );
    }
}

#[test]
fn an_invalid_namespace_of_the_template_is_refused_by_name() {
    let template = template(json!({
        "resources": [{"group": "example.com", "resource": "widgets"}],
        "namespaces": [{"name": "Kube System"}],
    }));
    assert_refused(
        plan(
            &templated_request(),
            TemplateLookup::Found(&template),
            &crds([widgets()]),
        ),
        "InvalidNamespace",
        &["\"Kube System\""],
    );
}

#[test]
fn a_namespace_name_of_63_characters_is_valid() {
    let name = format!("a{}z", "-0".repeat(30) + "9");
    assert_eq!(name.len(), 63);
    let request = request(json!({
        "resources": [{"group": "example.com", "resource": "widgets"}],
        "namespaces": [{"name": name}],
    }));
    let plan = planned(plan(
        &request,
        TemplateLookup::NotRequested,
        &crds([widgets()]),
    ));
    assert_eq!(plan.namespaces, [name]);
}

// ---------------------------------------------------------------------------
// Plans
// ---------------------------------------------------------------------------

#[test]
fn the_bound_schema_holds_every_served_version_and_no_other() {
    let request = request(json!({
        "resources": [{"group": "example.com", "resource": "widgets", "versions": ["v1"]}],
    }));
    let crds = crds([widgets().versions(&[("v1", true), ("v1beta1", true), ("v1alpha1", false)])]);
    let plan = planned(plan(&request, TemplateLookup::NotRequested, &crds));
    let [widget] = plan.resources.as_slice() else {
        panic!("one resource expected: {plan:#?}");
    };
    assert_eq!(version_names(widget), ["v1", "v1beta1"]);
    assert_eq!(widget.resource.versions, ["v1", "v1beta1"]);
    // The versions are the CRD's, schema and storage flag included.
    let crd = &crds["widgets.example.com"];
    assert_eq!(widget.schema.versions[..], crd.spec.versions[..2]);
    assert!(widget.schema.versions[0].storage);
    assert!(widget.schema.versions[0].schema.is_some());
}

#[test]
fn a_request_without_versions_gets_every_served_version() {
    let crds = crds([widgets().versions(&[("v2", true), ("v1", false), ("v1beta1", true)])]);
    let plan = planned(plan(
        &widgets_request(),
        TemplateLookup::NotRequested,
        &crds,
    ));
    assert_eq!(version_names(&plan.resources[0]), ["v2", "v1beta1"]);
    assert_eq!(plan.resources[0].resource.versions, ["v2", "v1beta1"]);
}

#[test]
fn a_plan_without_template_takes_everything_from_the_request() {
    let request = request(json!({
        "resources": [{"group": "example.com", "resource": "widgets"}],
        "permissionClaims": [{"resource": "secrets"}, {"resource": "configmaps"}],
        "namespaces": [{"name": "team-b"}, {"name": "team-a"}, {"name": "team-b"}],
        "schemaUpdatePolicy": "Always",
    }));
    let plan = planned(plan(
        &request,
        TemplateLookup::NotRequested,
        &crds([widgets()]),
    ));
    assert_eq!(plan.claims, request.permission_claims);
    assert_eq!(plan.namespaces, ["team-a", "team-b"]);
    assert_eq!(plan.informer_scope, InformerScope::Namespaced);
    assert_eq!(plan.schema_update_policy, SchemaUpdatePolicy::Always);
    assert_eq!(
        plan.resources[0].resource,
        ExportedResource {
            group: "example.com".into(),
            resource: "widgets".into(),
            versions: vec!["v1".into()],
        }
    );
}

#[test]
fn a_template_gives_resources_claims_namespaces_scope_and_policy() {
    let request = request(json!({
        "templateRef": {"name": "widgets"},
        "namespaces": [{"name": "team-b"}, {"name": "default"}],
    }));
    let template = template(json!({
        "description": "widgets and gadgets",
        "scope": "Cluster",
        "resources": [
            {"group": "example.com", "resource": "widgets", "versions": ["v1"]},
            {"group": "example.com", "resource": "gadgets"},
        ],
        "permissionClaims": [
            {"resource": "secrets", "selector": {"references": [{
                "group": "example.com", "resource": "gadgets",
                "jsonPath": {"name": "$.spec.secretRef.name"},
            }]}},
            {"resource": "configmaps", "selector": {"owner": "Provider"}},
        ],
        "namespaces": [{"name": "team-a"}, {"name": "default"}],
        "schemaUpdatePolicy": "Always",
    }));
    let plan = planned(plan(
        &request,
        TemplateLookup::Found(&template),
        &crds([crd("widgets", "example.com"), gadgets()]),
    ));
    assert_eq!(
        resource_names(&plan),
        ["widgets.example.com", "gadgets.example.com"]
    );
    assert_eq!(plan.claims, template.permission_claims);
    assert_eq!(plan.namespaces, ["default", "team-a", "team-b"]);
    assert_eq!(plan.informer_scope, InformerScope::Cluster);
    assert!(
        plan.resources
            .iter()
            .all(|r| r.schema.informer_scope == InformerScope::Cluster),
        "every BoundSchema takes the template's scope: {plan:#?}"
    );
    assert_eq!(plan.schema_update_policy, SchemaUpdatePolicy::Always);
}

#[test]
fn a_request_may_pick_some_of_the_template_offer() {
    let request = request(json!({
        "templateRef": {"name": "widgets"},
        "resources": [{"group": "example.com", "resource": "gadgets", "versions": ["v1"]}],
        "permissionClaims": [{"resource": "secrets", "selector": {"owner": "Consumer"}}],
    }));
    let template = template(json!({
        "resources": [
            {"group": "example.com", "resource": "widgets"},
            {"group": "example.com", "resource": "gadgets"},
        ],
        "permissionClaims": [
            {"resource": "secrets", "selector": {"owner": "Consumer"}},
            {"resource": "configmaps"},
        ],
    }));
    let plan = planned(plan(
        &request,
        TemplateLookup::Found(&template),
        &crds([widgets(), gadgets()]),
    ));
    assert_eq!(resource_names(&plan), ["gadgets.example.com"]);
    assert_eq!(plan.claims, request.permission_claims);
}

#[test]
fn the_template_scope_defaults_to_namespaced() {
    let template =
        template(json!({"resources": [{"group": "example.com", "resource": "widgets"}]}));
    let plan = planned(plan(
        &templated_request(),
        TemplateLookup::Found(&template),
        &crds([widgets()]),
    ));
    assert_eq!(plan.informer_scope, InformerScope::Namespaced);
    assert_eq!(
        plan.resources[0].schema.informer_scope,
        InformerScope::Namespaced
    );
}

#[test]
fn the_schema_update_policy_of_the_template_wins_over_the_request() {
    let with_policy = |policy: Value| {
        let mut spec = json!({"templateRef": {"name": "widgets"}});
        if !policy.is_null() {
            spec["schemaUpdatePolicy"] = policy;
        }
        request(spec)
    };
    let template_with = |policy: Value| {
        let mut spec = json!({"resources": [{"group": "example.com", "resource": "widgets"}]});
        if !policy.is_null() {
            spec["schemaUpdatePolicy"] = policy;
        }
        template(spec)
    };
    let crds = crds([widgets()]);
    let cases = [
        // (request, template, expected)
        (json!("Always"), json!("Never"), SchemaUpdatePolicy::Never),
        (json!("Never"), json!("Always"), SchemaUpdatePolicy::Always),
        (json!(null), json!("Always"), SchemaUpdatePolicy::Always),
        (json!("Always"), json!(null), SchemaUpdatePolicy::Always),
        (json!(null), json!(null), SchemaUpdatePolicy::Never),
    ];
    for (request_policy, template_policy, expected) in cases {
        let template = template_with(template_policy.clone());
        let plan = planned(plan(
            &with_policy(request_policy.clone()),
            TemplateLookup::Found(&template),
            &crds,
        ));
        assert_eq!(
            plan.schema_update_policy, expected,
            "request {request_policy}, template {template_policy}"
        );
    }
}

#[test]
fn without_template_the_schema_update_policy_is_the_request_s() {
    let crds = crds([widgets()]);
    for (policy, expected) in [
        (Some("Always"), SchemaUpdatePolicy::Always),
        (Some("Never"), SchemaUpdatePolicy::Never),
        (None, SchemaUpdatePolicy::Never),
    ] {
        let mut spec = json!({"resources": [{"group": "example.com", "resource": "widgets"}]});
        if let Some(policy) = policy {
            spec["schemaUpdatePolicy"] = json!(policy);
        }
        let plan = planned(plan(&request(spec), TemplateLookup::NotRequested, &crds));
        assert_eq!(plan.schema_update_policy, expected, "policy {policy:?}");
    }
}

#[test]
fn the_klutch_template_form_gives_its_resource() {
    let template = template(json!({
        "APIServiceSelector": {"group": "example.com", "resource": "widgets", "version": "v1"},
        "permissionClaims": [{"resource": "secrets", "selector": {"owner": "Provider"}}],
    }));
    let crds = crds([crd("widgets", "example.com").versions(&[("v1", true), ("v2", true)])]);
    let plan = planned(plan(
        &templated_request(),
        TemplateLookup::Found(&template),
        &crds,
    ));
    assert_eq!(resource_names(&plan), ["widgets.example.com"]);
    assert_eq!(version_names(&plan.resources[0]), ["v1", "v2"]);
    assert_eq!(plan.claims, template.permission_claims);
}

#[test]
fn the_klutch_template_form_without_version_gives_every_served_version() {
    let template =
        template(json!({"APIServiceSelector": {"group": "example.com", "resource": "widgets"}}));
    let crds = crds([crd("widgets", "example.com").versions(&[("v1", false), ("v2", true)])]);
    let plan = planned(plan(
        &templated_request(),
        TemplateLookup::Found(&template),
        &crds,
    ));
    assert_eq!(plan.resources[0].resource.versions, ["v2"]);
}

#[test]
fn a_request_may_name_the_resource_of_a_klutch_template() {
    let request = request(json!({
        "templateRef": {"name": "widgets"},
        "resources": [{"group": "example.com", "resource": "widgets"}],
    }));
    let template = template(json!({
        "APIServiceSelector": {"group": "example.com", "resource": "widgets", "version": "v1"},
    }));
    let plan = planned(plan(
        &request,
        TemplateLookup::Found(&template),
        &crds([widgets()]),
    ));
    assert_eq!(resource_names(&plan), ["widgets.example.com"]);
}

#[test]
fn the_bound_schema_copies_group_names_scope_and_conversion_from_the_crd() {
    let conversion = json!({
        "strategy": "Webhook",
        "webhook": {
            "conversionReviewVersions": ["v1"],
            "clientConfig": {"url": "https://convert.example.com/widgets"},
        },
    });
    let mut crds = crds([widgets()
        .cluster_scoped()
        .versions(&[("v1", true), ("v2", true)])
        .conversion(conversion.clone())]);
    let crd = crds.get_mut("widgets.example.com").unwrap();
    crd.spec.names.short_names = Some(vec!["wd".into()]);
    crd.spec.names.categories = Some(vec!["all".into(), "toys".into()]);
    let crd = crd.clone();

    let plan = planned(plan(
        &widgets_request(),
        TemplateLookup::NotRequested,
        &crds,
    ));
    let schema = &plan.resources[0].schema;
    assert_eq!(schema.group, "example.com");
    assert_eq!(schema.names, crd.spec.names);
    assert_eq!(schema.names.kind, "Widget");
    assert_eq!(schema.scope, ResourceScope::Cluster);
    assert_eq!(schema.conversion, crd.spec.conversion);
    assert_eq!(
        serde_json::to_value(&schema.conversion).unwrap(),
        conversion
    );
    assert_eq!(schema.object_name(), "widgets.example.com");
    // The BoundSchema describes the same resource as the CRD.
    assert_eq!(schema.crd_spec().versions, crd.spec.versions);
    assert_eq!(schema.crd_spec().scope, crd.spec.scope);
}

#[test]
fn a_crd_without_conversion_gives_a_schema_without_conversion() {
    let plan = planned(plan(
        &widgets_request(),
        TemplateLookup::NotRequested,
        &crds([widgets()]),
    ));
    assert_eq!(plan.resources[0].schema.conversion, None);
}

#[test]
fn resources_keep_the_order_they_were_asked_in() {
    let request = request(json!({
        "resources": [
            {"group": "example.com", "resource": "widgets"},
            {"group": "example.com", "resource": "gadgets"},
            {"group": "b.example.com", "resource": "gizmos"},
        ],
    }));
    let crds = crds([
        widgets(),
        gadgets(),
        crd("gizmos", "b.example.com").exported(),
    ]);
    let plan = planned(plan(&request, TemplateLookup::NotRequested, &crds));
    assert_eq!(
        resource_names(&plan),
        [
            "widgets.example.com",
            "gadgets.example.com",
            "gizmos.b.example.com"
        ]
    );
}

#[test]
fn plan_is_deterministic() {
    let request = request(json!({
        "resources": [{"group": "example.com", "resource": "widgets"}],
        "permissionClaims": [{"resource": "secrets"}],
        "namespaces": [{"name": "z"}, {"name": "a"}],
    }));
    let crds = crds([widgets()]);
    assert_eq!(
        plan(&request, TemplateLookup::NotRequested, &crds),
        plan(&request, TemplateLookup::NotRequested, &crds)
    );
}

#[test]
fn a_request_claim_must_not_widen_the_template_claim() {
    // The template offers one named Secret; the request claims every Secret
    // (an empty selector) and flips the owner: not what was offered.
    let request = request(json!({
        "templateRef": {"name": "widgets"},
        "permissionClaims": [{"resource": "secrets", "selector": {"owner": "Consumer"}}],
    }));
    let template = template(json!({
        "resources": [{"group": "example.com", "resource": "widgets"}],
        "permissionClaims": [{"resource": "secrets", "selector": {
            "namedResources": [{"name": "db-credentials"}],
            "owner": "Provider",
        }}],
    }));
    assert_refused(
        plan(
            &request,
            TemplateLookup::Found(&template),
            &crds([widgets()]),
        ),
        "NotOffered",
        &["secrets"],
    );
}

// ---------------------------------------------------------------------------
// Properties
// ---------------------------------------------------------------------------

const REASONS: &[&str] = &[
    "TemplateNotFound",
    "NoResources",
    "NotOffered",
    "CustomResourceDefinitionNotFound",
    "NotExported",
    "VersionNotServed",
    "DifferentScopes",
    "InvalidPermissionClaim",
    "InvalidNamespace",
];

/// Any string, with a good share of near-valid names.
fn name() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<String>(),
        "[a-z0-9-]{0,70}",
        "[a-zA-Z0-9._/ -]{0,10}",
        Just(String::new()),
    ]
}

fn is_namespace_name(name: &str) -> bool {
    (1..=63).contains(&name.len())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !name.starts_with('-')
        && !name.ends_with('-')
}

proptest! {
    #[test]
    fn arbitrary_names_never_panic(
        namespaces in proptest::collection::vec(name(), 0..4),
        claim_resources in proptest::collection::vec(name(), 0..3),
        through_template in any::<bool>(),
    ) {
        let namespaces: Vec<Value> = namespaces.iter().map(|n| json!({"name": n})).collect();
        let claims: Vec<Value> = claim_resources.iter().map(|r| json!({"resource": r})).collect();
        let offer = json!({
            "resources": [{"group": "example.com", "resource": "widgets"}],
            "permissionClaims": claims,
            "namespaces": namespaces,
        });
        let crds = crds([widgets()]);
        let (request, template) = if through_template {
            (templated_request(), Some(template(offer)))
        } else {
            (request(offer), None)
        };
        let lookup = match &template {
            Some(template) => TemplateLookup::Found(template),
            None => TemplateLookup::NotRequested,
        };
        match plan(&request, lookup, &crds) {
            Ok(plan) => {
                prop_assert!(plan.namespaces.iter().all(|n| is_namespace_name(n)), "{:?}", plan.namespaces);
                prop_assert!(plan.namespaces.windows(2).all(|w| w[0] < w[1]), "{:?}", plan.namespaces);
                let mut expected: Vec<&String> = namespaces_of(&request, template.as_ref());
                expected.sort();
                expected.dedup();
                prop_assert_eq!(plan.namespaces.iter().collect::<Vec<_>>(), expected);
                let planned: Vec<&str> = plan.claims.iter().map(|c| c.resource.as_str()).collect();
                prop_assert_eq!(planned, claim_resources.iter().map(String::as_str).collect::<Vec<_>>());
            }
            Err(refusal) => {
                prop_assert!(!refusal.message.trim().is_empty(), "{:?}", refusal);
                prop_assert!(REASONS.contains(&refusal.reason), "{:?}", refusal);
                prop_assert!(
                    ["InvalidPermissionClaim", "InvalidNamespace"].contains(&refusal.reason),
                    "only the names can be wrong here: {:?}", refusal
                );
            }
        }
    }
}

fn namespaces_of<'a>(
    request: &'a APIServiceExportRequestSpec,
    template: Option<&'a APIServiceExportTemplateSpec>,
) -> Vec<&'a String> {
    request
        .namespaces
        .iter()
        .chain(template.iter().flat_map(|t| t.namespaces.iter()))
        .map(|n| &n.name)
        .collect()
}

// ---------------------------------------------------------------------------
// The provider's settings, as kube-bind's backend applies its flags
// ---------------------------------------------------------------------------

#[test]
fn consumer_scope_is_every_exports_scope_whatever_the_template_says() {
    let cluster_template = template(
        json!({"scope": "Cluster", "resources": [{"group": "example.com", "resource": "widgets"}]}),
    );
    let templated = || {
        planned(plan(
            &templated_request(),
            TemplateLookup::Found(&cluster_template),
            &crds([widgets()]),
        ))
    };
    assert_eq!(
        templated().informer_scope,
        InformerScope::Cluster,
        "the template's, unset"
    );
    let unset = planned(laid_out(templated(), Isolation::Prefixed, None));
    assert_eq!(unset.informer_scope, InformerScope::Cluster);
    let set = planned(laid_out(
        templated(),
        Isolation::Prefixed,
        Some(InformerScope::Namespaced),
    ));
    assert_eq!(set.informer_scope, InformerScope::Namespaced);
    assert_eq!(
        set.resources[0].schema.informer_scope,
        InformerScope::Namespaced
    );
}

#[test]
fn namespaced_isolation_binds_a_namespaced_crd_cluster_scoped_as_kube_bind_does() {
    let widgets_plan = || {
        planned(plan(
            &widgets_request(),
            TemplateLookup::NotRequested,
            &crds([widgets()]),
        ))
    };
    for isolation in [Isolation::Prefixed, Isolation::None] {
        let kept = planned(laid_out(widgets_plan(), isolation, None));
        assert_eq!(
            kept.resources[0].schema.scope,
            ResourceScope::Namespaced,
            "{isolation:?}"
        );
    }
    let namespaced = planned(laid_out(widgets_plan(), Isolation::Namespaced, None));
    assert_eq!(namespaced.resources[0].schema.scope, ResourceScope::Cluster);

    let cluster_plan = planned(plan(
        &widgets_request(),
        TemplateLookup::NotRequested,
        &crds([widgets().cluster_scoped()]),
    ));
    assert_refused(
        laid_out(cluster_plan, Isolation::Namespaced, None),
        "ClusterScopedUnderNamespacedIsolation",
        &["widgets.example.com", "Namespaced isolation"],
    );
}
