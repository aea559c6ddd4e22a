//! What the two directions of claimed-object copies share: keeping a set
//! of copies exactly as wanted on one cluster, and a copy's content (its
//! data and its own labels and annotations, without bindery's, kubectl's
//! or kube-bind's owner mark).

use super::Context;
use super::export_status::binding;
use crate::api::keys::OWNER_LABEL;
use crate::api::{APIServiceExport, APIServiceNamespace, PermissionClaim};
use crate::claim_referrers::{Referrers, namespace_map};
use crate::translate::claim_references::Pick;
use crate::translate::identity::is_reserved_label;
use kube::ResourceExt;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams};
use serde_json::{Map, Value, json};
use std::collections::{BTreeMap, BTreeSet};

/// An export's consumer as far as copies go: its app cluster, those of
/// `claims` its binding accepted as offered, and its namespace records.
pub struct Accepted<'e> {
    pub app: kube::Client,
    pub claims: Vec<&'e PermissionClaim>,
    pub records: Vec<APIServiceNamespace>,
}

/// `export`'s [`Accepted`]; `None` while no app cluster holds its binding
/// (nothing can be copied or removed then).
pub async fn accepted<'e>(
    context: &Context,
    export: &APIServiceExport,
    claims: Vec<&'e PermissionClaim>,
) -> kube::Result<Option<Accepted<'e>>> {
    let cluster_namespace = export.namespace().unwrap_or_default();
    let (_, Some((app, app_binding))) =
        binding(context, &cluster_namespace, &export.name_any()).await?
    else {
        return Ok(None);
    };
    let decisions = app_binding.claim_decisions();
    let claims = claims
        .into_iter()
        .filter(|claim| {
            decisions
                .iter()
                .any(|a| a.is_accepted() && a.claim() == **claim)
        })
        .collect();
    let records =
        Api::<APIServiceNamespace>::namespaced(context.client.clone(), &cluster_namespace)
            .list(&ListParams::default())
            .await?
            .items;
    Ok(Some(Accepted {
        app,
        claims,
        records,
    }))
}

impl Accepted<'_> {
    /// What each of `claims` picks by its references, in their order.
    pub async fn picks(
        &self,
        context: &Context,
        export: &APIServiceExport,
        claims: &[&PermissionClaim],
    ) -> kube::Result<Vec<Vec<Pick>>> {
        let cluster_namespace = export.namespace().unwrap_or_default();
        let namespaces = namespace_map(&cluster_namespace, &self.records);
        let referrers = Referrers {
            provider: &context.client,
            export,
            consumer: context.consumer_of(&cluster_namespace),
            namespaces: &namespaces,
        };
        let mut picked = Vec::with_capacity(claims.len());
        for claim in claims {
            picked.push(referrers.picks(claim).await?);
        }
        Ok(picked)
    }
}

/// Makes the copies on `client` exactly `wanted`: deletes each of
/// `existing` (the copies there now) that is not wanted, and applies each
/// wanted one as `field_manager`, unless an object of its name there is not
/// `overwritable` (the cluster's own). A copy the cluster refuses holds up
/// none of the others: each is tried, and the first error is returned
/// once all were.
pub async fn mirror(
    client: &kube::Client,
    resource: &ApiResource,
    existing: &[DynamicObject],
    wanted: &[Value],
    overwritable: fn(&BTreeMap<String, String>) -> bool,
    field_manager: &str,
) -> kube::Result<()> {
    let key = |namespace: &str, name: &str| format!("{namespace}/{name}");
    let wanted_keys: BTreeSet<String> = wanted
        .iter()
        .map(|w| {
            key(
                w["metadata"]["namespace"].as_str().unwrap_or_default(),
                w["metadata"]["name"].as_str().unwrap_or_default(),
            )
        })
        .collect();
    let mut failed = FirstError::default();
    for copy in existing {
        let namespace = copy.namespace().unwrap_or_default();
        if !wanted_keys.contains(&key(&namespace, &copy.name_any())) {
            let api: Api<DynamicObject> =
                Api::namespaced_with(client.clone(), &namespace, resource);
            match api.delete(&copy.name_any(), &DeleteParams::default()).await {
                Ok(_) => {}
                Err(kube::Error::Api(s)) if s.code == 404 => {}
                Err(error) => failed.keep(error),
            }
        }
    }
    for copy in wanted {
        let namespace = copy["metadata"]["namespace"].as_str().unwrap_or_default();
        let name = copy["metadata"]["name"].as_str().unwrap_or_default();
        let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, resource);
        match api.get_opt(name).await {
            Ok(Some(present)) if !overwritable(present.labels()) => {
                tracing::warn!(%namespace, %name, kind = %resource.kind,
                    "an object of a claimed copy's name is not a copy; not overwritten");
                continue;
            }
            Err(error) => {
                failed.keep(error);
                continue;
            }
            _ => {}
        }
        match api
            .patch(
                name,
                &PatchParams::apply(field_manager).force(),
                &Patch::Apply(copy),
            )
            .await
        {
            Ok(_) => {}
            // A namespace the cluster does not have (any more): nothing to
            // copy into.
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(error) => failed.keep(error),
        }
    }
    failed.into_result()
}

/// The first of the errors of steps that go on past each other's (so that
/// one object or namespace a cluster refuses holds up none of the rest);
/// the later ones are logged.
#[derive(Debug, Default)]
pub struct FirstError(Option<kube::Error>);

impl FirstError {
    /// Keeps `error` if it is the first.
    pub fn keep(&mut self, error: kube::Error) {
        match &self.0 {
            None => self.0 = Some(error),
            Some(_) => tracing::warn!(%error, "another step of copying claimed objects failed"),
        }
    }

    /// `Err` with the first error kept, if any.
    pub fn into_result(self) -> kube::Result<()> {
        self.0.map_or(Ok(()), Err)
    }
}

/// Whether `source` may be copied at all: not a ServiceAccount token
/// Secret, which the receiving cluster's token controller would fill with
/// a token of the account it names there (a provider's Secret copied down
/// would hand it an app cluster's account, and the other way round). Pure.
pub fn copyable(source: &Value) -> bool {
    source["type"] != "kubernetes.io/service-account-token"
}

/// A copy of `source` (a Secret or a ConfigMap) named as it is, in
/// `namespace`: its content, its own labels and annotations (bindery's
/// reserved labels, kube-bind's owner mark, bindery's and kubectl's
/// annotations left out) and `extra_labels`. Pure.
pub fn copy_of(
    source: &Value,
    kind: &str,
    namespace: &str,
    extra_labels: &[(&str, &str)],
) -> Value {
    let metadata = &source["metadata"];
    let mut labels: Map<String, Value> = metadata["labels"]
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(k, _)| !is_reserved_label(k) && k.as_str() != OWNER_LABEL)
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    for (key, value) in extra_labels {
        labels.insert((*key).into(), json!(value));
    }
    let annotations: Map<String, Value> = metadata["annotations"]
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(k, _)| !k.starts_with("kubectl.kubernetes.io/") && !k.starts_with("bindery.dev/"))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let mut copy = json!({
        "apiVersion": "v1", "kind": kind,
        "metadata": {"name": metadata["name"], "namespace": namespace, "labels": labels},
    });
    if !annotations.is_empty() {
        copy["metadata"]["annotations"] = Value::Object(annotations);
    }
    for field in ["data", "binaryData", "type", "immutable"] {
        if let Some(value) = source.get(field).filter(|v| !v.is_null()) {
            copy[field] = value.clone();
        }
    }
    copy
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_service_account_token_secret_is_never_copied() {
        let secret = |type_: &str| json!({"kind": "Secret", "type": type_, "data": {}});
        assert!(!copyable(&secret("kubernetes.io/service-account-token")));
        assert!(copyable(&secret("Opaque")));
        assert!(copyable(&json!({"kind": "ConfigMap", "data": {}})));
    }
}
