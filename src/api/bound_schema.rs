//! BoundSchema: the schema served for one bound resource, a copy of a CRD's
//! spec kept in the consumer's cluster namespace and named `<plural>.<group>`.
//! Its controller owner is the export that uses it.

use super::condition::Condition;
use super::resources::InformerScope;
use super::schema;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceConversion, CustomResourceDefinitionNames, CustomResourceDefinitionSpec,
    CustomResourceDefinitionVersion,
};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The CRD-like description of a bound resource, plus how it is watched.
#[derive(CustomResource, Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "kube-bind.io",
    version = "v1alpha2",
    kind = "BoundSchema",
    namespaced,
    status = "BoundSchemaStatus",
    derive = "PartialEq",
    shortname = "bs",
    category = "kube-bindings",
    doc = "The schema served for one bound resource: a CRD's spec, named <plural>.<group>.",
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct BoundSchemaSpec {
    /// Whether the resource is watched cluster-wide or per namespace.
    pub informer_scope: InformerScope,
    /// API group of the resource; empty for the core group.
    pub group: String,
    /// Kind and resource names.
    pub names: CustomResourceDefinitionNames,
    /// Whether the resource is cluster-scoped or namespaced.
    pub scope: ResourceScope,
    /// The versions, each with its schema.
    #[schemars(schema_with = "schema::crd_versions")]
    #[serde(deserialize_with = "versions_in_either_form")]
    pub versions: Vec<CustomResourceDefinitionVersion>,
    /// How objects are converted between versions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(transform = schema::conversion_rules)]
    pub conversion: Option<CustomResourceConversion>,
}

impl BoundSchemaSpec {
    /// The same description as a CustomResourceDefinition spec.
    pub fn crd_spec(&self) -> CustomResourceDefinitionSpec {
        CustomResourceDefinitionSpec {
            group: self.group.clone(),
            names: self.names.clone(),
            scope: self.scope.as_str().to_string(),
            versions: self.versions.clone(),
            conversion: self.conversion.clone(),
            preserve_unknown_fields: None,
        }
    }

    /// The object name a BoundSchema for this spec has: `<plural>.<group>`.
    pub fn object_name(&self) -> String {
        format!("{}.{}", self.names.plural, self.group)
    }
}

/// A BoundSchema's versions, whose `schema` kube-bind writes either as a
/// CRD's (`{openAPIV3Schema: …}`) or as the bare OpenAPI schema (what its
/// helpers and kcp's APIResourceSchema source write): read as kube-bind
/// reads them, wrapped form first, else the bare schema wrapped.
fn versions_in_either_form<'de, D>(
    deserializer: D,
) -> Result<Vec<CustomResourceDefinitionVersion>, D::Error>
where
    D: serde::Deserializer<'de>,
{
    let mut versions = Vec::<serde_json::Value>::deserialize(deserializer)?;
    for version in &mut versions {
        if let Some(schema) = version.get_mut("schema")
            && schema.is_object()
            && schema.get("openAPIV3Schema").is_none_or(|s| s.is_null())
        {
            *schema = serde_json::json!({"openAPIV3Schema": schema.take()});
        }
    }
    versions
        .into_iter()
        .map(serde_json::from_value)
        .collect::<Result<_, _>>()
        .map_err(serde::de::Error::custom)
}

/// Scope of the served resource, as in a CRD.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum ResourceScope {
    Cluster,
    Namespaced,
}

impl ResourceScope {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Cluster => "Cluster",
            Self::Namespaced => "Namespaced",
        }
    }
}

/// Observed state of a BoundSchema, as the consumer side reports it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BoundSchemaStatus {
    /// The names actually served.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accepted_names: Option<CustomResourceDefinitionNames>,
    /// Every version objects were ever stored in.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stored_versions: Vec<String>,
    /// How many objects of the resource the consumer has.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instantiations: Option<i64>,
    /// Valid and Invalid, with reasons Accepted, Rejected, Pending or DriftDetected.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "schema::conditions")]
    pub conditions: Vec<Condition>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::testing::assert_yaml_round_trip;

    const EXAMPLE: &str = r#"
apiVersion: kube-bind.io/v1alpha2
kind: BoundSchema
metadata:
  name: postgresqlinstances.db.example.com
  namespace: kube-bind-enkvby5uzkct
  ownerReferences:
  - apiVersion: kube-bind.io/v1alpha2
    kind: APIServiceExport
    name: postgresql
    uid: 4f1c7b0e-6d2a-4c55-9d3e-0a1b2c3d4e5f
    controller: true
spec:
  informerScope: Namespaced
  group: db.example.com
  names:
    kind: PostgreSQLInstance
    listKind: PostgreSQLInstanceList
    plural: postgresqlinstances
    singular: postgresqlinstance
    shortNames: [pgi]
    categories: [databases]
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            required: [version]
            properties:
              version:
                type: string
                enum: ["15", "16"]
              storage:
                x-kubernetes-int-or-string: true
          status:
            type: object
            x-kubernetes-preserve-unknown-fields: true
    subresources:
      status: {}
    additionalPrinterColumns:
    - name: Version
      type: string
      jsonPath: .spec.version
  - name: v1beta1
    served: true
    storage: false
    deprecated: true
    deprecationWarning: use v1
    schema:
      openAPIV3Schema:
        type: object
        x-kubernetes-preserve-unknown-fields: true
  conversion:
    strategy: None
status:
  acceptedNames:
    kind: PostgreSQLInstance
    plural: postgresqlinstances
  storedVersions: [v1]
  instantiations: 3
  conditions:
  - type: Valid
    status: "True"
    reason: Accepted
    lastTransitionTime: "2025-05-01T10:00:00Z"
"#;

    #[test]
    fn example_round_trips() {
        let schema: BoundSchema = assert_yaml_round_trip(EXAMPLE);
        assert_eq!(
            schema.spec.object_name(),
            "postgresqlinstances.db.example.com"
        );
        assert_eq!(schema.status.expect("status").instantiations, Some(3));
    }

    #[test]
    fn a_bare_schema_as_kube_binds_helpers_write_it_is_read_wrapped() {
        let bare = EXAMPLE.replace(
            "    schema:\n      openAPIV3Schema:\n        type: object\n        x-kubernetes-preserve-unknown-fields: true",
            "    schema:\n      type: object\n      x-kubernetes-preserve-unknown-fields: true",
        );
        assert_ne!(bare, EXAMPLE, "the example has the wrapped form");
        let schema: BoundSchema = serde_norway::from_str(&bare).unwrap();
        let openapi = schema.spec.versions[1]
            .schema
            .as_ref()
            .and_then(|s| s.open_api_v3_schema.as_ref())
            .expect("the bare schema, wrapped");
        assert_eq!(openapi.x_kubernetes_preserve_unknown_fields, Some(true));
    }

    #[test]
    fn crd_spec_carries_the_crd_fields() {
        let schema: BoundSchema = serde_norway::from_str(EXAMPLE).unwrap();
        let crd = schema.spec.crd_spec();
        assert_eq!(crd.group, "db.example.com");
        assert_eq!(crd.scope, "Namespaced");
        assert_eq!(crd.names.kind, "PostgreSQLInstance");
        assert_eq!(crd.versions.len(), 2);
        assert!(crd.versions[0].storage);
        let openapi = crd.versions[0]
            .schema
            .as_ref()
            .and_then(|s| s.open_api_v3_schema.as_ref())
            .expect("openAPIV3Schema");
        assert!(openapi.properties.as_ref().unwrap().contains_key("spec"));
        assert_eq!(
            crd.conversion.as_ref().map(|c| c.strategy.as_str()),
            Some("None")
        );
    }

    #[test]
    fn unknown_enum_strings_are_rejected() {
        let bad_scope = EXAMPLE.replace("  scope: Namespaced", "  scope: Global");
        assert!(serde_norway::from_str::<BoundSchema>(&bad_scope).is_err());
        let bad_informer = EXAMPLE.replace("informerScope: Namespaced", "informerScope: All");
        assert!(serde_norway::from_str::<BoundSchema>(&bad_informer).is_err());
    }
}
