//! The consumer's objects that a claim's `references` read, listed from
//! the provider and put in the consumer's terms, and what they pick
//! ([`crate::translate::claim_references`]). kube-bind lists them in the
//! consumer's cluster; bindery's are the consumer's bound objects on the
//! provider, found by both identity labels (the export's and the
//! consumer's). A reference to a resource the export does not export picks
//! nothing: kube-bind allows that only under isolation `None`, and bindery
//! has no such objects of the consumer to read.

use crate::api::{APIServiceExport, APIServiceNamespace, PermissionClaim, SelectorReference};
use crate::translate::claim_references::{Pick, picks};
use crate::translate::identity::{CONSUMER_LABEL, EXPORT_LABEL};
use crate::translate::{IdentityHash, NamespaceMap};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::ResourceExt;
use kube::api::{Api, ApiResource, DynamicObject, ListParams};
use serde_json::Value;

/// Whose objects: one consumer of one export.
pub struct Referrers<'a> {
    pub provider: &'a kube::Client,
    pub export: &'a APIServiceExport,
    /// The consumer's id, as its objects' consumer label holds it.
    pub consumer: &'a str,
    /// The consumer's namespaces (its APIServiceNamespace records).
    pub namespaces: &'a NamespaceMap,
}

impl Referrers<'_> {
    /// What `claim`'s references pick; empty when it has none.
    pub async fn picks(&self, claim: &PermissionClaim) -> kube::Result<Vec<Pick>> {
        let isolation = self.export.spec.effective_isolation();
        let mut picked = Vec::new();
        for reference in &claim.selector.references {
            let referring = self.referring(reference).await?;
            picked.extend(picks(reference, &referring, isolation));
        }
        Ok(picked)
    }

    /// The consumer's objects of `reference`'s resource, in its terms.
    async fn referring(&self, reference: &SelectorReference) -> kube::Result<Vec<Value>> {
        let spec = &self.export.spec;
        let Some(exported) = spec
            .resources
            .iter()
            .find(|r| r.group == reference.group && r.resource == reference.resource)
        else {
            return Ok(Vec::new());
        };
        let Some(hash) = self
            .export
            .status
            .as_ref()
            .and_then(|s| s.identity_hash.as_deref())
            .and_then(IdentityHash::parse)
        else {
            return Ok(Vec::new());
        };
        let crds: Api<CustomResourceDefinition> = Api::all(self.provider.clone());
        let Some(crd) = crds.get_opt(&exported.group_resource().to_string()).await? else {
            return Ok(Vec::new());
        };
        let wanted = if reference.versions.is_empty() {
            &exported.versions
        } else {
            &reference.versions
        };
        let served: Vec<&str> = crd
            .spec
            .versions
            .iter()
            .filter(|v| v.served && (wanted.is_empty() || wanted.contains(&v.name)))
            .map(|v| v.name.as_str())
            .collect();
        let selector = format!(
            "{EXPORT_LABEL}={},{CONSUMER_LABEL}={}",
            hash.label_value(),
            self.consumer
        );
        let mut referring = Vec::new();
        for version in served {
            let resource = ApiResource {
                group: crd.spec.group.clone(),
                version: version.to_string(),
                api_version: format!("{}/{version}", crd.spec.group),
                kind: crd.spec.names.kind.clone(),
                plural: crd.spec.names.plural.clone(),
            };
            let all: Api<DynamicObject> = Api::all_with(self.provider.clone(), &resource);
            for object in all.list(&ListParams::default().labels(&selector)).await? {
                let mut value = serde_json::to_value(&object).unwrap_or_default();
                match object.namespace() {
                    None => {}
                    // The consumer's cluster-scoped object, kept namespaced
                    // in its cluster namespace.
                    Some(ns) if ns == self.namespaces.cluster_namespace() => {
                        value["metadata"]
                            .as_object_mut()
                            .map(|m| m.remove("namespace"));
                    }
                    Some(ns) => match self.namespaces.to_consumer(&ns) {
                        Some(consumer) => value["metadata"]["namespace"] = Value::from(consumer),
                        None => continue,
                    },
                }
                referring.push(value);
            }
        }
        Ok(referring)
    }
}

/// The namespace map of `records` (a consumer's APIServiceNamespaces in its
/// cluster namespace): the recorded ones, ready or not yet.
pub fn namespace_map(cluster_namespace: &str, records: &[APIServiceNamespace]) -> NamespaceMap {
    let mut map = NamespaceMap::new(cluster_namespace);
    for record in records {
        if let Some(provider) = record.status.as_ref().and_then(|s| s.namespace.clone()) {
            map.insert(record.name_any(), provider);
        }
    }
    map
}
