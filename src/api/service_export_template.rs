//! APIServiceExportTemplate: the provider operator's offer of resources and
//! permission claims that consumers can bind (cluster-scoped). Both the
//! kube-bind form (`resources[]`) and klutch's form (`APIServiceSelector`, one
//! group/resource/version) are read; [`APIServiceExportTemplateSpec::effective_resources`]
//! gives the resources whichever form was used.

use super::claims::PermissionClaim;
use super::condition::Condition;
use super::resources::{ExportedResource, InformerScope, PreseededNamespace, SchemaUpdatePolicy};
use super::schema;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// An offer of resources and permission claims.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "kube-bind.io",
    version = "v1alpha2",
    kind = "APIServiceExportTemplate",
    status = "APIServiceExportTemplateStatus",
    derive = "PartialEq",
    category = "kube-bindings",
    doc = "An offer of resources and permission claims that consumers can bind.",
    printcolumn(
        name = "Resources",
        type_ = "string",
        json_path = ".spec.resources[*].resource"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct APIServiceExportTemplateSpec {
    /// What the offer is, for people choosing one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Whether the offered resources are watched cluster-wide or per namespace.
    /// Required in kube-bind's form (a rule of the CRD, see
    /// [`super::kube_bind_rules`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<InformerScope>,
    /// The offered resources (kube-bind's form); required unless the klutch
    /// form is used.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(min = 1))]
    pub resources: Vec<ExportedResource>,
    /// klutch's form of the offered resource: exactly one group/resource/version.
    #[serde(
        default,
        rename = "APIServiceSelector",
        skip_serializing_if = "Option::is_none"
    )]
    pub api_service_selector: Option<KlutchServiceSelector>,
    /// Other objects the provider may reach in the consumer's space.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub permission_claims: Vec<PermissionClaim>,
    /// Consumer namespaces to create on the provider side right away.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub namespaces: Vec<PreseededNamespace>,
    /// Whether the BoundSchemas follow later changes of their CRDs; the CRD
    /// defaults it to `Never`, as kube-bind's does, so a template's policy
    /// always wins over a request's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "Never"))]
    pub schema_update_policy: Option<SchemaUpdatePolicy>,
}

impl APIServiceExportTemplateSpec {
    /// The offered resources, whichever form the template uses: `resources`,
    /// then the klutch selector's resource unless `resources` already lists it.
    pub fn effective_resources(&self) -> Vec<ExportedResource> {
        let mut resources = self.resources.clone();
        if let Some(selector) = &self.api_service_selector {
            let from_selector = selector.exported_resource();
            let listed = resources
                .iter()
                .any(|r| r.group == from_selector.group && r.resource == from_selector.resource);
            if !listed {
                resources.push(from_selector);
            }
        }
        resources
    }
}

/// klutch's `APIServiceSelector`: one resource, one version.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct KlutchServiceSelector {
    /// API group; empty for the core group.
    #[serde(default)]
    pub group: String,
    /// Plural resource name.
    pub resource: String,
    /// The version offered; empty leaves the choice to the provider.
    #[serde(default)]
    pub version: String,
}

impl KlutchServiceSelector {
    /// The selector in kube-bind's form.
    pub fn exported_resource(&self) -> ExportedResource {
        ExportedResource {
            group: self.group.clone(),
            resource: self.resource.clone(),
            versions: if self.version.is_empty() {
                Vec::new()
            } else {
                vec![self.version.clone()]
            },
        }
    }
}

/// Observed state of a template.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct APIServiceExportTemplateStatus {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "schema::conditions")]
    pub conditions: Vec<Condition>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::claims::ClaimOwner;
    use crate::api::testing::assert_yaml_round_trip;

    const KUBE_BIND_FORM: &str = r#"
apiVersion: kube-bind.io/v1alpha2
kind: APIServiceExportTemplate
metadata:
  name: postgresql
spec:
  description: Managed PostgreSQL with backups
  scope: Namespaced
  resources:
  - group: db.example.com
    resource: postgresqlinstances
    versions: [v1]
  - group: db.example.com
    resource: postgresqlbackups
  permissionClaims:
  - resource: secrets
    selector:
      labelSelector:
        matchExpressions:
        - key: db.example.com/instance
          operator: Exists
  namespaces:
  - name: default
  schemaUpdatePolicy: Always
"#;

    const KLUTCH_FORM: &str = r#"
apiVersion: kube-bind.io/v1alpha2
kind: APIServiceExportTemplate
metadata:
  name: postgresql
spec:
  APIServiceSelector:
    group: anynines.com
    resource: postgresqlinstances
    version: v1
  permissionClaims:
  - resource: secrets
    selector:
      owner: Provider
  - resource: configmaps
    selector:
      owner: Provider
"#;

    #[test]
    fn kube_bind_form_round_trips_and_gives_its_resources() {
        let template: APIServiceExportTemplate = assert_yaml_round_trip(KUBE_BIND_FORM);
        let resources = template.spec.effective_resources();
        assert_eq!(resources, template.spec.resources);
        assert_eq!(resources.len(), 2);
        assert_eq!(template.spec.scope, Some(InformerScope::Namespaced));
    }

    #[test]
    fn klutch_form_round_trips_and_gives_the_selected_resource() {
        let template: APIServiceExportTemplate = assert_yaml_round_trip(KLUTCH_FORM);
        assert_eq!(
            template.spec.effective_resources(),
            vec![ExportedResource {
                group: "anynines.com".into(),
                resource: "postgresqlinstances".into(),
                versions: vec!["v1".into()],
            }]
        );
        assert_eq!(
            template.spec.permission_claims[0].selector.owner,
            Some(ClaimOwner::Provider)
        );
    }

    #[test]
    fn a_selector_already_listed_in_resources_is_not_repeated() {
        let spec = APIServiceExportTemplateSpec {
            resources: vec![ExportedResource {
                group: "anynines.com".into(),
                resource: "postgresqlinstances".into(),
                versions: vec!["v1".into(), "v2".into()],
            }],
            api_service_selector: Some(KlutchServiceSelector {
                group: "anynines.com".into(),
                resource: "postgresqlinstances".into(),
                version: "v1".into(),
            }),
            ..Default::default()
        };
        assert_eq!(spec.effective_resources(), spec.resources);
    }

    #[test]
    fn a_selector_without_version_leaves_versions_open() {
        let selector = KlutchServiceSelector {
            group: String::new(),
            resource: "widgets".into(),
            version: String::new(),
        };
        assert!(selector.exported_resource().versions.is_empty());
    }

    #[test]
    fn unknown_enum_strings_are_rejected() {
        let bad_policy =
            KUBE_BIND_FORM.replace("schemaUpdatePolicy: Always", "schemaUpdatePolicy: always");
        assert!(serde_norway::from_str::<APIServiceExportTemplate>(&bad_policy).is_err());
        let bad_scope = KUBE_BIND_FORM.replace("scope: Namespaced", "scope: Everywhere");
        assert!(serde_norway::from_str::<APIServiceExportTemplate>(&bad_scope).is_err());
    }
}
