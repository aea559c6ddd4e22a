//! What a template offers, in the words the bind page and the CLI show: its
//! description, resources (with the CRD's served versions and scope) and
//! permission claims. Pure.

use super::wire::{Offer, OfferedResource};
use crate::api::APIServiceExportTemplate;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::ResourceExt;
use std::collections::BTreeMap;

/// The offer of `template`, given the provider's CRDs by name.
pub fn offer(
    template: &APIServiceExportTemplate,
    crds: &BTreeMap<String, CustomResourceDefinition>,
) -> Offer {
    let resources = template
        .spec
        .effective_resources()
        .into_iter()
        .map(|wanted| {
            let crd = crds.get(&wanted.group_resource().to_string());
            let mut versions: Vec<String> = crd
                .map(|crd| {
                    crd.spec
                        .versions
                        .iter()
                        .filter(|v| v.served)
                        .filter(|v| wanted.versions.is_empty() || wanted.versions.contains(&v.name))
                        .map(|v| v.name.clone())
                        .collect()
                })
                .unwrap_or_default();
            crate::discovery::version::sort_by_priority(&mut versions);
            OfferedResource {
                group: wanted.group,
                resource: wanted.resource,
                versions,
                scope: crd.map(|c| c.spec.scope.clone()).unwrap_or_default(),
            }
        })
        .collect();
    Offer {
        name: template.name_any(),
        description: template.spec.description.clone().unwrap_or_default(),
        resources,
        claims: template.spec.permission_claims.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_offer_names_served_versions_preferred_first_and_the_claims() {
        let template: APIServiceExportTemplate = serde_json::from_value(serde_json::json!({
            "apiVersion": "kube-bind.io/v1alpha2", "kind": "APIServiceExportTemplate",
            "metadata": {"name": "postgresql"},
            "spec": {
                "description": "Managed PostgreSQL",
                "resources": [
                    {"group": "db.example.com", "resource": "postgresqlinstances"},
                    {"group": "db.example.com", "resource": "missing"},
                ],
                "permissionClaims": [{"group": "", "resource": "secrets", "selector": {"owner": "Provider"}}],
            },
        }))
        .unwrap();
        let crd: CustomResourceDefinition = serde_json::from_value(serde_json::json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "postgresqlinstances.db.example.com"},
            "spec": {
                "group": "db.example.com", "scope": "Namespaced",
                "names": {"plural": "postgresqlinstances", "kind": "PostgreSQLInstance"},
                "versions": [
                    {"name": "v1beta1", "served": true, "storage": false},
                    {"name": "v1alpha1", "served": false, "storage": false},
                    {"name": "v1", "served": true, "storage": true},
                ],
            },
        }))
        .unwrap();
        let crds = BTreeMap::from([(crd.name_any(), crd)]);
        let offer = offer(&template, &crds);
        assert_eq!(offer.description, "Managed PostgreSQL");
        assert_eq!(offer.resources[0].versions, ["v1", "v1beta1"]);
        assert_eq!(offer.resources[0].scope, "Namespaced");
        assert!(
            offer.resources[1].versions.is_empty(),
            "no CRD, no versions"
        );
        assert_eq!(offer.claims.len(), 1);
        assert_eq!(offer.claims[0].resource, "secrets");
    }
}
