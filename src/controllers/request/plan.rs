//! Decides what an APIServiceExportRequest becomes, from the request, its
//! template and the provider's CRDs: the BoundSchemas, the export's resources
//! and claims, the namespaces to pre-seed. Or, when the request cannot be
//! met, a refusal a person can act on. Pure: the reconciler fetches, this
//! decides.

use crate::api::{
    APIServiceExportRequestSpec, APIServiceExportTemplateSpec, BoundSchemaSpec, ExportedResource,
    InformerScope, Isolation, PermissionClaim, ResourceScope, SchemaUpdatePolicy, keys,
};
use crate::route::is_dns_label;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use std::collections::BTreeMap;

/// One resource the export will grant, with the schema it is served with.
#[derive(Clone, Debug, PartialEq)]
pub struct PlannedResource {
    pub resource: ExportedResource,
    pub schema: BoundSchemaSpec,
}

/// Everything the request becomes.
#[derive(Clone, Debug, PartialEq)]
pub struct ExportPlan {
    pub resources: Vec<PlannedResource>,
    pub claims: Vec<PermissionClaim>,
    pub namespaces: Vec<String>,
    pub informer_scope: InformerScope,
    pub schema_update_policy: SchemaUpdatePolicy,
}

/// Why a request cannot be met: a condition reason and a message for people.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal {
    pub reason: &'static str,
    pub message: String,
}

impl Refusal {
    fn new(reason: &'static str, message: impl Into<String>) -> Self {
        Self {
            reason,
            message: message.into(),
        }
    }
}

/// The template a request names, as found (or not) in the provider.
pub enum TemplateLookup<'a> {
    NotRequested,
    Missing(&'a str),
    Found(&'a APIServiceExportTemplateSpec),
}

/// Plans `request`. `crds` holds the provider's CRDs by name
/// (`<plural>.<group>`); only those the request names need to be there.
pub fn plan(
    request: &APIServiceExportRequestSpec,
    template: TemplateLookup<'_>,
    crds: &BTreeMap<String, CustomResourceDefinition>,
) -> Result<ExportPlan, Refusal> {
    let template = match template {
        TemplateLookup::Missing(name) => {
            return Err(Refusal::new(
                "TemplateNotFound",
                format!(
                    "APIServiceExportTemplate {name:?} does not exist; \
                     list the offered templates with `kubectl get apiserviceexporttemplates`"
                ),
            ));
        }
        TemplateLookup::Found(spec) => Some(spec),
        TemplateLookup::NotRequested => None,
    };
    let wanted = wanted_resources(request, template)?;
    let mut resources = Vec::new();
    for wanted in &wanted {
        resources.push(plan_resource(wanted, template.is_some(), crds)?);
    }
    check_one_scope(&resources)?;
    let claims = pick(
        &request.permission_claims,
        template.map(|t| t.permission_claims.as_slice()),
        "permission claim",
        // The whole claim: a request may drop a claim, never widen one.
        |c| {
            format!(
                "{} with selector {}",
                c.group_resource(),
                serde_json::to_string(&c.selector).unwrap_or_default()
            )
        },
    )?;
    for claim in &claims {
        check_claim(claim, &resources)?;
    }
    let mut namespaces: Vec<String> = request.namespaces.iter().map(|n| n.name.clone()).collect();
    if let Some(template) = template {
        namespaces.extend(template.namespaces.iter().map(|n| n.name.clone()));
    }
    namespaces.sort();
    namespaces.dedup();
    for namespace in &namespaces {
        if !is_dns_label(namespace) {
            return Err(Refusal::new(
                "InvalidNamespace",
                format!("pre-seeded namespace {namespace:?} is not a valid namespace name"),
            ));
        }
    }
    let informer_scope = template
        .and_then(|t| t.scope)
        .unwrap_or(InformerScope::Namespaced);
    let schema_update_policy = template
        .and_then(|t| t.schema_update_policy)
        .unwrap_or(request.schema_update_policy);
    let resources = resources
        .into_iter()
        .map(|mut r| {
            r.schema.informer_scope = informer_scope;
            r
        })
        .collect();
    Ok(ExportPlan {
        resources,
        claims,
        namespaces,
        informer_scope,
        schema_update_policy,
    })
}

/// The plan as the provider's settings lay it out, as kube-bind's backend
/// does: `consumer_scope`, when set, is every export's informer scope; under
/// `Namespaced` isolation a namespaced CRD is bound cluster-scoped (each
/// consumer's objects live in its cluster namespace on the provider), and a
/// cluster-scoped CRD, which no namespace can hold, is refused.
pub fn laid_out(
    mut plan: ExportPlan,
    isolation: Isolation,
    consumer_scope: Option<InformerScope>,
) -> Result<ExportPlan, Refusal> {
    if let Some(scope) = consumer_scope {
        plan.informer_scope = scope;
        for resource in &mut plan.resources {
            resource.schema.informer_scope = scope;
        }
    }
    if isolation == Isolation::Namespaced {
        for resource in &mut plan.resources {
            if resource.schema.scope == ResourceScope::Cluster {
                return Err(Refusal::new(
                    "ClusterScopedUnderNamespacedIsolation",
                    format!(
                        "{} is cluster-scoped: under Namespaced isolation each consumer's \
                         objects live in its cluster namespace, which cannot hold them",
                        resource.resource.group_resource()
                    ),
                ));
            }
            resource.schema.scope = ResourceScope::Cluster;
        }
    }
    Ok(plan)
}

/// The resources asked for: the request's, which must be offered by the
/// template when there is one, or else the template's.
fn wanted_resources(
    request: &APIServiceExportRequestSpec,
    template: Option<&APIServiceExportTemplateSpec>,
) -> Result<Vec<ExportedResource>, Refusal> {
    let offered = template.map(|t| t.effective_resources());
    let wanted = pick(
        &request.resources,
        offered.as_deref(),
        "resource",
        |r: &ExportedResource| r.group_resource().to_string(),
    )?;
    if wanted.is_empty() {
        return Err(Refusal::new(
            "NoResources",
            "the request names no resources: set spec.resources or spec.templateRef",
        ));
    }
    Ok(wanted)
}

/// The request's own entries when it has any (each must be offered), else
/// everything offered.
fn pick<T: Clone>(
    asked: &[T],
    offered: Option<&[T]>,
    what: &str,
    key: impl Fn(&T) -> String,
) -> Result<Vec<T>, Refusal> {
    let Some(offered) = offered else {
        return Ok(asked.to_vec());
    };
    if asked.is_empty() {
        return Ok(offered.to_vec());
    }
    for item in asked {
        if !offered.iter().any(|o| key(o) == key(item)) {
            return Err(Refusal::new(
                "NotOffered",
                format!("{what} {} is not offered by the template", key(item)),
            ));
        }
    }
    Ok(asked.to_vec())
}

fn plan_resource(
    wanted: &ExportedResource,
    from_template: bool,
    crds: &BTreeMap<String, CustomResourceDefinition>,
) -> Result<PlannedResource, Refusal> {
    let name = wanted.group_resource().to_string();
    let crd = crds.get(&name).ok_or_else(|| {
        Refusal::new(
            "CustomResourceDefinitionNotFound",
            format!("CustomResourceDefinition {name:?} does not exist in the provider cluster"),
        )
    })?;
    let exported = crd
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(keys::EXPORTED_LABEL))
        .is_some_and(|v| v == "true");
    if !from_template && !exported {
        return Err(Refusal::new(
            "NotExported",
            format!(
                "CustomResourceDefinition {name:?} is not exported: bind it through a template, \
                 or label it {}=true",
                keys::EXPORTED_LABEL
            ),
        ));
    }
    let served: Vec<_> = crd
        .spec
        .versions
        .iter()
        .filter(|v| v.served)
        .cloned()
        .collect();
    for version in &wanted.versions {
        if !served.iter().any(|v| &v.name == version) {
            let offered: Vec<&str> = served.iter().map(|v| v.name.as_str()).collect();
            return Err(Refusal::new(
                "VersionNotServed",
                format!(
                    "version {version:?} of {name} is not served; served versions: {}",
                    offered.join(", ")
                ),
            ));
        }
    }
    let scope = match crd.spec.scope.as_str() {
        "Cluster" => ResourceScope::Cluster,
        _ => ResourceScope::Namespaced,
    };
    let schema = BoundSchemaSpec {
        informer_scope: InformerScope::Namespaced,
        group: crd.spec.group.clone(),
        names: crd.spec.names.clone(),
        scope,
        // Every served version, so that clients of any of them keep working.
        versions: served.clone(),
        conversion: crd.spec.conversion.clone(),
    };
    Ok(PlannedResource {
        resource: ExportedResource {
            group: wanted.group.clone(),
            resource: wanted.resource.clone(),
            versions: served.iter().map(|v| v.name.clone()).collect(),
        },
        schema,
    })
}

fn check_one_scope(resources: &[PlannedResource]) -> Result<(), Refusal> {
    let Some(first) = resources.first() else {
        return Ok(());
    };
    if let Some(other) = resources
        .iter()
        .find(|r| r.schema.scope != first.schema.scope)
    {
        return Err(Refusal::new(
            "DifferentScopes",
            format!(
                "resources have mixed scopes: {} is {}, {} is {}; bind them in separate requests",
                first.resource.group_resource(),
                first.schema.scope.as_str(),
                other.resource.group_resource(),
                other.schema.scope.as_str()
            ),
        ));
    }
    Ok(())
}

fn check_claim(claim: &PermissionClaim, resources: &[PlannedResource]) -> Result<(), Refusal> {
    let name = claim.group_resource().to_string();
    let invalid = |detail: String| {
        Refusal::new(
            "InvalidPermissionClaim",
            format!("permission claim on {name}: {detail}"),
        )
    };
    if !is_dns_label(&claim.resource) {
        return Err(invalid(format!(
            "resource {:?} is not a lower-case plural resource name",
            claim.resource
        )));
    }
    if resources
        .iter()
        .any(|r| r.resource.group_resource() == claim.group_resource())
    {
        return Err(invalid("the resource is already exported".into()));
    }
    let selector = &claim.selector;
    if let Some(labels) = &selector.label_selector {
        for expression in labels.match_expressions.iter().flatten() {
            let values = expression.values.as_deref().unwrap_or_default();
            let valid = match expression.operator.as_str() {
                "In" | "NotIn" => !values.is_empty(),
                "Exists" | "DoesNotExist" => values.is_empty(),
                _ => false,
            };
            if !valid {
                return Err(invalid(format!(
                    "label selector requirement on {:?} with operator {:?} and {} values is invalid",
                    expression.key,
                    expression.operator,
                    values.len()
                )));
            }
        }
    }
    for namespace in &selector.namespaces {
        if !is_dns_label(namespace) {
            return Err(invalid(format!(
                "namespace {namespace:?} is not a valid namespace name"
            )));
        }
    }
    for named in &selector.named_resources {
        if named.name.is_empty() {
            return Err(invalid("a named resource has no name".into()));
        }
    }
    for reference in &selector.references {
        let referring = crate::api::GroupResource::new(&reference.group, &reference.resource);
        if !resources
            .iter()
            .any(|r| r.resource.group_resource() == referring)
        {
            return Err(invalid(format!(
                "it refers to {referring}, which the request does not export"
            )));
        }
        if reference
            .json_path
            .as_ref()
            .is_none_or(|p| p.name.is_empty())
        {
            return Err(invalid(format!(
                "the reference from {referring} has no jsonPath.name"
            )));
        }
    }
    Ok(())
}
