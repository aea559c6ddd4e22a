//! RBAC for a consumer's provider-side ServiceAccount: one ClusterRole per
//! export listing exactly the exported resources (with their status and
//! scale subresources), bound only in the consumer's own provider
//! namespaces, and in each of those a Role of the export's claims alone. The
//! claims are a Role, not part of the ClusterRole: bindery holds Secrets and
//! ConfigMaps only in the namespaces it serves (`namespace_access`), and
//! kube-apiserver lets it grant only what it holds where it grants it. A
//! cluster-scoped export needs a ClusterRoleBinding: RBAC cannot narrow by
//! name prefix, which is the one place the grant is wider than the
//! consumer's objects (documented in docs/DESIGN.md); the claims are never
//! granted cluster-wide. Under `Namespaced` isolation the consumer's objects
//! live in its cluster namespace, where a Role of the exported resources
//! alone (never the claims) is bound instead.

use super::{Context, naming};
use crate::api::{
    APIServiceExport, APIServiceNamespace, BoundSchema, Isolation, ResourceScope,
    isolation_in_force,
};
use k8s_openapi::api::rbac::v1::PolicyRule;
use kube::ResourceExt;
use kube::api::{Api, Patch};
use serde_json::json;

pub use crate::provider_namespace::EXPORT_RBAC_LABEL;

const OBJECT_VERBS: &[&str] = &[
    "get",
    "list",
    "watch",
    "create",
    "update",
    "patch",
    "delete",
    "deletecollection",
];
const CLAIM_VERBS: &[&str] = &[
    "get", "list", "watch", "create", "update", "patch", "delete",
];

/// The rules for `export`'s resources alone. Pure.
pub fn resource_rules(export: &APIServiceExport) -> Vec<PolicyRule> {
    let mut rules = Vec::new();
    for resource in &export.spec.resources {
        rules.push(PolicyRule {
            api_groups: Some(vec![resource.group.clone()]),
            resources: Some(vec![
                resource.resource.clone(),
                format!("{}/status", resource.resource),
                format!("{}/scale", resource.resource),
            ]),
            verbs: OBJECT_VERBS.iter().map(|v| v.to_string()).collect(),
            ..Default::default()
        });
    }
    rules
}

/// The rules for `export`'s claims alone. Pure.
pub fn claim_rules(export: &APIServiceExport) -> Vec<PolicyRule> {
    let mut rules = Vec::new();
    for claim in &export.spec.permission_claims {
        let mut rule = PolicyRule {
            api_groups: Some(vec![claim.group.clone()]),
            resources: Some(vec![claim.resource.clone()]),
            verbs: CLAIM_VERBS.iter().map(|v| v.to_string()).collect(),
            ..Default::default()
        };
        let names: Vec<String> = claim
            .selector
            .named_resources
            .iter()
            .map(|n| n.name.clone())
            .collect();
        if !names.is_empty() && claim.selector.label_selector.is_none() {
            // Named objects only: RBAC can say that much. `create` cannot
            // be limited by name, so it is left out.
            rule.resource_names = Some(names);
            rule.verbs.retain(|v| v != "create");
        }
        rules.push(rule);
    }
    rules
}

/// Applies the ServiceAccount, the ClusterRole and its bindings for `export`.
pub async fn grant(context: &Context, export: &APIServiceExport) -> kube::Result<()> {
    let client = &context.client;
    let cluster_namespace = export.namespace().unwrap_or_default();
    let export_name = export.name_any();
    let label = format!("{cluster_namespace}.{export_name}");
    let role = naming::export_cluster_role(&cluster_namespace, &export_name);
    let subject = json!({
        "kind": "ServiceAccount",
        "name": naming::CONSUMER_SERVICE_ACCOUNT,
        "namespace": cluster_namespace,
    });
    let account = json!({
        "apiVersion": "v1", "kind": "ServiceAccount",
        "metadata": {"name": naming::CONSUMER_SERVICE_ACCOUNT},
    });
    Api::<k8s_openapi::api::core::v1::ServiceAccount>::namespaced(
        client.clone(),
        &cluster_namespace,
    )
    .patch(
        naming::CONSUMER_SERVICE_ACCOUNT,
        &context.apply(),
        &Patch::Apply(account),
    )
    .await?;
    let cluster_role = json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": role, "labels": {EXPORT_RBAC_LABEL: label}},
        "rules": resource_rules(export),
    });
    Api::<k8s_openapi::api::rbac::v1::ClusterRole>::all(client.clone())
        .patch(&role, &context.apply(), &Patch::Apply(cluster_role))
        .await?;
    let binding_name = crate::provider_namespace::role_binding_name(&export_name);
    let cluster_scoped = is_cluster_scoped(client, export).await?;
    // Under `Namespaced` isolation a consumer's cluster-scoped objects live
    // in its cluster namespace: granted there, never cluster-wide.
    let in_cluster_namespace = isolation_in_force(export.spec.isolation) == Isolation::Namespaced;
    if cluster_scoped && !in_cluster_namespace {
        cluster_wide_grant(context, export, &role, subject, &label).await?;
    } else if cluster_scoped {
        // A cluster-wide grant an earlier bindery made for this export goes.
        let bindings = Api::<k8s_openapi::api::rbac::v1::ClusterRoleBinding>::all(client.clone());
        if bindings.get_opt(&role).await?.is_some() {
            match bindings.delete(&role, &Default::default()).await {
                Ok(_) => {}
                Err(kube::Error::Api(status)) if status.code == 404 => {}
                Err(error) => return Err(error),
            }
        }
    }
    let namespaces: Api<APIServiceNamespace> = Api::namespaced(client.clone(), &cluster_namespace);
    let recorded = namespaces.list(&Default::default()).await?;
    let provider_namespaces: Vec<String> = recorded
        .iter()
        .filter_map(|record| record.status.as_ref().and_then(|s| s.namespace.clone()))
        .collect();
    if cluster_scoped && in_cluster_namespace {
        home_grant(context, export, &binding_name, &label).await?;
    }
    let claims = claim_rules(export);
    // A namespace whose claims cannot be granted (one bindery may not
    // serve) holds up neither the others nor the answer: the first such
    // failure is returned once all have been tried.
    let mut failed = None;
    for provider in &provider_namespaces {
        let binding = crate::provider_namespace::role_binding(&cluster_namespace, &export_name);
        Api::<k8s_openapi::api::rbac::v1::RoleBinding>::namespaced(client.clone(), provider)
            .patch(&binding_name, &context.apply(), &Patch::Apply(binding))
            .await?;
        if claims.is_empty() {
            continue;
        }
        if let Err(error) = claims_grant(context, export, provider, &claims, &label).await {
            tracing::warn!(%error, namespace = provider, export = export_name,
                "granting an export's claims in a provider namespace failed");
            failed.get_or_insert(error);
        }
    }
    if claims.is_empty() {
        revoke_claims(context, &export_name, &label).await?;
    }
    failed.map_or(Ok(()), Err)
}

/// The name of an export's claims Role (and its RoleBinding) in each
/// provider namespace.
pub fn claims_role_name(export: &str) -> String {
    format!("bindery:export:{export}:claims")
}

/// The grant of `export`'s claims in its provider namespace `namespace`: a
/// Role of `claims` bound to the consumer's account. Refused because
/// bindery does not hold them there yet (a namespace just made), it binds
/// its own access there first and tries again.
async fn claims_grant(
    context: &Context,
    export: &APIServiceExport,
    namespace: &str,
    claims: &[PolicyRule],
    label: &str,
) -> kube::Result<()> {
    use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
    let client = &context.client;
    let name = claims_role_name(&export.name_any());
    let role = json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
        "metadata": {"name": name, "labels": {EXPORT_RBAC_LABEL: label}},
        "rules": claims,
    });
    let roles = Api::<Role>::namespaced(client.clone(), namespace);
    let (params, patch) = (context.apply(), Patch::Apply(role));
    let apply = || roles.patch(&name, &params, &patch);
    match (apply().await, &context.namespace_access) {
        (Err(kube::Error::Api(status)), Some(access)) if status.code == 403 => {
            access.grant_in_force(client, namespace).await?;
            apply().await?;
        }
        (result, _) => {
            result?;
        }
    }
    let mut binding = crate::provider_namespace::role_binding(
        &export.namespace().unwrap_or_default(),
        &export.name_any(),
    );
    binding["metadata"]["name"] = json!(name);
    binding["roleRef"] =
        json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name});
    Api::<RoleBinding>::namespaced(client.clone(), namespace)
        .patch(&name, &context.apply(), &Patch::Apply(binding))
        .await?;
    Ok(())
}

/// Removes the claims Roles of an export that claims nothing (any more).
async fn revoke_claims(context: &Context, export: &str, label: &str) -> kube::Result<()> {
    use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
    let name = claims_role_name(export);
    let by_label = kube::api::ListParams::default().labels(&format!("{EXPORT_RBAC_LABEL}={label}"));
    let client = &context.client;
    for role in Api::<Role>::all(client.clone()).list(&by_label).await? {
        if role.name_any() != name {
            continue;
        }
        let namespace = role.namespace().unwrap_or_default();
        for gone in [
            Api::<RoleBinding>::namespaced(client.clone(), &namespace)
                .delete(&name, &Default::default())
                .await
                .map(|_| ()),
            Api::<Role>::namespaced(client.clone(), &namespace)
                .delete(&name, &Default::default())
                .await
                .map(|_| ()),
        ] {
            match gone {
                Ok(()) => {}
                Err(kube::Error::Api(status)) if status.code == 404 => {}
                Err(error) => return Err(error),
            }
        }
    }
    Ok(())
}

/// The cluster-wide grant of a cluster-scoped export's resources, never its
/// claims: the ClusterRoleBinding `name` to a ClusterRole of the resources
/// alone. One an earlier bindery bound to the whole export ClusterRole
/// (claims included: a Secrets claim was every Secret of the provider) is
/// replaced, since a roleRef cannot change.
async fn cluster_wide_grant(
    context: &Context,
    export: &APIServiceExport,
    name: &str,
    subject: serde_json::Value,
    label: &str,
) -> kube::Result<()> {
    use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
    let client = &context.client;
    let resources_role = format!("{name}:resources");
    let role = json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": resources_role, "labels": {EXPORT_RBAC_LABEL: label}},
        "rules": resource_rules(export),
    });
    Api::<ClusterRole>::all(client.clone())
        .patch(&resources_role, &context.apply(), &Patch::Apply(role))
        .await?;
    let bindings = Api::<ClusterRoleBinding>::all(client.clone());
    if let Some(existing) = bindings.get_opt(name).await?
        && existing.role_ref.name != resources_role
    {
        match bindings.delete(name, &Default::default()).await {
            Ok(_) => {}
            Err(kube::Error::Api(status)) if status.code == 404 => {}
            Err(error) => return Err(error),
        }
    }
    let binding = json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": name, "labels": {EXPORT_RBAC_LABEL: label}},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
            "name": resources_role},
        "subjects": [subject],
    });
    bindings
        .patch(name, &context.apply(), &Patch::Apply(binding))
        .await?;
    Ok(())
}

/// The grant in the consumer's cluster namespace, where its objects live
/// under `Namespaced` isolation: a Role of the exported resources alone,
/// never the claims (the namespace also holds the export's identity
/// Secret), bound to the consumer's account.
async fn home_grant(
    context: &Context,
    export: &APIServiceExport,
    name: &str,
    label: &str,
) -> kube::Result<()> {
    use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
    let client = &context.client;
    let cluster_namespace = export.namespace().unwrap_or_default();
    let role = json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
        "metadata": {"name": name, "labels": {EXPORT_RBAC_LABEL: label}},
        "rules": resource_rules(export),
    });
    Api::<Role>::namespaced(client.clone(), &cluster_namespace)
        .patch(name, &context.apply(), &Patch::Apply(role))
        .await?;
    let mut binding =
        crate::provider_namespace::role_binding(&cluster_namespace, &export.name_any());
    binding["roleRef"] =
        json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name});
    let bindings = Api::<RoleBinding>::namespaced(client.clone(), &cluster_namespace);
    // A roleRef cannot change: one naming the export's ClusterRole goes first.
    if let Some(existing) = bindings.get_opt(name).await?
        && existing.role_ref.kind != "Role"
    {
        bindings.delete(name, &Default::default()).await?;
    }
    bindings
        .patch(name, &context.apply(), &Patch::Apply(binding))
        .await?;
    Ok(())
}

/// Whether any BoundSchema of the export is cluster-scoped.
async fn is_cluster_scoped(client: &kube::Client, export: &APIServiceExport) -> kube::Result<bool> {
    let schemas: Api<BoundSchema> =
        Api::namespaced(client.clone(), &export.namespace().unwrap_or_default());
    for resource in &export.spec.resources {
        let name = resource.group_resource().to_string();
        if let Some(schema) = schemas.get_opt(&name).await?
            && schema.spec.scope == ResourceScope::Cluster
        {
            return Ok(true);
        }
    }
    Ok(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn export(spec: serde_json::Value) -> APIServiceExport {
        serde_json::from_value(json!({
            "apiVersion": "kube-bind.io/v1alpha2", "kind": "APIServiceExport",
            "metadata": {"name": "db", "namespace": "kube-bind-abc"},
            "spec": spec,
        }))
        .unwrap()
    }

    #[test]
    fn rules_list_exactly_the_resources_and_claims() {
        let export = export(json!({
            "informerScope": "Namespaced",
            "resources": [{"group": "db.example.com", "resource": "postgresqlinstances"}],
            "permissionClaims": [
                {"resource": "secrets", "selector": {"labelSelector": {"matchLabels": {"a": "b"}}}},
                {"resource": "configmaps", "selector": {"namedResources": [{"name": "settings"}]}},
            ],
        }));
        let mut rules = resource_rules(&export);
        assert_eq!(rules.len(), 1, "the ClusterRole lists the resources alone");
        rules.extend(claim_rules(&export));
        assert_eq!(rules.len(), 3);
        assert_eq!(
            rules[0].api_groups.as_deref(),
            Some(&["db.example.com".to_string()][..])
        );
        assert_eq!(
            rules[0].resources.as_deref().unwrap(),
            [
                "postgresqlinstances",
                "postgresqlinstances/status",
                "postgresqlinstances/scale"
            ]
        );
        assert_eq!(rules[1].resources.as_deref().unwrap(), ["secrets"]);
        assert!(rules[1].resource_names.is_none());
        assert_eq!(rules[2].resource_names.as_deref().unwrap(), ["settings"]);
        assert!(!rules[2].verbs.iter().any(|v| v == "create"));
        for rule in &rules {
            assert!(!rule.verbs.iter().any(|v| v == "*"), "no wildcard verbs");
            assert!(
                rule.resources.iter().flatten().all(|r| r != "*"),
                "no wildcard resources"
            );
            assert!(
                rule.api_groups.iter().flatten().all(|g| g != "*"),
                "no wildcard groups"
            );
        }
    }
}
