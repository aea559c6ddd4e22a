//! Which cluster namespace, and which identity, kube-bind bound an app
//! cluster with. kube-bind names the cluster namespace after the identity
//! its CLI or UI gave (`--cluster-identity`, the kube-system UID by
//! default) and records that identity on the namespace; the konnector's
//! kubeconfig Secret, which each APIServiceBinding names, has the namespace
//! in its context. bindery's consumer is named by the same hash of the same
//! identity, so the move keeps both.

use crate::api::keys::IDENTITY_ANNOTATION;
use crate::controllers::naming::cluster_namespace;
use anyhow::{Context as _, Result, anyhow, bail};
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, ApiResource, DynamicObject};
use std::collections::BTreeSet;

/// The cluster namespace and identity of the app cluster being moved.
#[derive(Debug, PartialEq, Eq)]
pub struct Bound {
    pub cluster_namespace: String,
    pub identity: String,
}

/// The namespace of a kubeconfig's current context. Pure.
pub fn namespace_of_kubeconfig(text: &str) -> Option<String> {
    let config = kube::config::Kubeconfig::from_yaml(text).ok()?;
    let current = config.current_context.as_deref()?;
    config
        .contexts
        .iter()
        .find(|c| c.name == current)?
        .context
        .as_ref()?
        .namespace
        .clone()
}

/// Decides the cluster namespace and identity from what was found: the
/// namespaces the konnector's kubeconfigs name, the identity the one
/// namespace records on the provider, and `fallback` (the identity the
/// user gave, else the kube-system UID) when no kubeconfig names one. Pure.
pub fn decide(
    prefix: &str,
    named: &BTreeSet<String>,
    recorded: Option<&str>,
    fallback: &str,
) -> Result<Bound> {
    let by_fallback = cluster_namespace(prefix, fallback);
    let Some(namespace) = named.first() else {
        return Ok(Bound {
            cluster_namespace: by_fallback,
            identity: fallback.to_string(),
        });
    };
    if named.len() > 1 {
        bail!(
            "the konnector's kubeconfigs name more than one cluster namespace ({}); move the \
             bindings of each with --export",
            named.iter().cloned().collect::<Vec<_>>().join(", ")
        );
    }
    if !namespace.starts_with(prefix) {
        bail!(
            "kube-bind bound this app cluster in cluster namespace {namespace}, which does not \
             start with bindery's prefix {prefix}; run bindery (and migrate) with kube-bind's \
             prefix (--cluster-namespace-prefix)"
        );
    }
    let identity = match recorded {
        Some(identity) => identity.to_string(),
        None if *namespace == by_fallback => fallback.to_string(),
        None => bail!(
            "cluster namespace {namespace} records no app cluster identity \
             ({IDENTITY_ANNOTATION}), and it is not the one of this app cluster's identity \
             {fallback:?} (--cluster-identity)"
        ),
    };
    if cluster_namespace(prefix, &identity) != *namespace {
        bail!(
            "cluster namespace {namespace} records identity {identity:?}, whose cluster namespace \
             would be {}; bindery names each consumer after its identity, so it cannot serve \
             this one",
            cluster_namespace(prefix, &identity)
        );
    }
    Ok(Bound {
        cluster_namespace: namespace.clone(),
        identity,
    })
}

/// The cluster namespaces the kubeconfig Secrets of `bindings` (kube-bind
/// APIServiceBindings of the app cluster) name. A binding whose Secret is
/// gone names none.
pub async fn named_by_konnector_secrets(
    app: &kube::Client,
    bindings: &ApiResource,
    names: &[String],
) -> Result<BTreeSet<String>> {
    let api = Api::<DynamicObject>::all_with(app.clone(), bindings);
    let mut named = BTreeSet::new();
    for name in names {
        let Some(binding) = api.get_opt(name).await? else {
            continue;
        };
        let reference = &binding.data["spec"]["kubeconfigSecretRef"];
        let (Some(namespace), Some(secret), Some(key)) = (
            reference["namespace"].as_str(),
            reference["name"].as_str(),
            reference["key"].as_str(),
        ) else {
            continue;
        };
        let Some(found) = Api::<Secret>::namespaced(app.clone(), namespace)
            .get_opt(secret)
            .await
            .with_context(|| format!("reading the konnector's Secret {namespace}/{secret}"))?
        else {
            continue;
        };
        let text = found
            .data
            .as_ref()
            .and_then(|d| d.get(key))
            .map(|b| String::from_utf8_lossy(&b.0).to_string())
            .ok_or_else(|| anyhow!("Secret {namespace}/{secret} has no key {key}"))?;
        if let Some(cluster_namespace) = namespace_of_kubeconfig(&text) {
            named.insert(cluster_namespace);
        }
    }
    Ok(named)
}

/// The identity cluster namespace `namespace` records on the provider.
pub async fn recorded_identity(provider: &kube::Client, namespace: &str) -> Result<Option<String>> {
    crate::bind::proof::recorded_identity(provider, namespace)
        .await
        .with_context(|| format!("reading cluster namespace {namespace}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    const PREFIX: &str = "kube-bind-";

    fn kubeconfig(namespace: &str) -> String {
        format!(
            "apiVersion: v1\nkind: Config\ncurrent-context: default\n\
             clusters: [{{name: p, cluster: {{server: 'https://p'}}}}]\n\
             users: [{{name: u, user: {{token: t}}}}]\n\
             contexts:\n- name: other\n  context: {{cluster: p, user: u, namespace: wrong}}\n\
             - name: default\n  context: {{cluster: p, user: u, namespace: {namespace}}}\n"
        )
    }

    #[test]
    fn the_current_contexts_namespace() {
        assert_eq!(
            namespace_of_kubeconfig(&kubeconfig("kube-bind-abc")).as_deref(),
            Some("kube-bind-abc")
        );
        assert_eq!(namespace_of_kubeconfig("not: [a kubeconfig"), None);
        assert_eq!(
            namespace_of_kubeconfig("apiVersion: v1\nkind: Config\n"),
            None
        );
    }

    #[test]
    fn an_identity_kube_bind_was_given_names_the_consumer() {
        let uid = "0b6e7c6a-4a43-4d3c-8f0e-3b1e2b2f6f11";
        // Nothing found: the kube-system UID, as before.
        let plain = decide(PREFIX, &BTreeSet::new(), None, uid).unwrap();
        assert_eq!(plain.identity, uid);
        assert_eq!(plain.cluster_namespace, cluster_namespace(PREFIX, uid));
        // `--cluster-identity prod-eu`: the namespace records it.
        let given = cluster_namespace(PREFIX, "prod-eu");
        let named = BTreeSet::from([given.clone()]);
        let bound = decide(PREFIX, &named, Some("prod-eu"), uid).unwrap();
        assert_eq!(
            bound,
            Bound {
                cluster_namespace: given.clone(),
                identity: "prod-eu".into()
            }
        );
        // A namespace recording no identity is the UID's, or refused.
        let by_uid = BTreeSet::from([cluster_namespace(PREFIX, uid)]);
        assert_eq!(decide(PREFIX, &by_uid, None, uid).unwrap().identity, uid);
        let error = decide(PREFIX, &named, None, uid).unwrap_err().to_string();
        assert!(error.contains("records no app cluster identity"), "{error}");
        // An identity that does not hash to its namespace cannot be served.
        let error = decide(PREFIX, &named, Some("other"), uid)
            .unwrap_err()
            .to_string();
        assert!(error.contains("cannot serve"), "{error}");
        // Another prefix, or two namespaces, stop the move.
        let foreign = BTreeSet::from(["cluster-abc".to_string()]);
        let error = decide(PREFIX, &foreign, Some("x"), uid)
            .unwrap_err()
            .to_string();
        assert!(error.contains("--cluster-namespace-prefix"), "{error}");
        let two = BTreeSet::from([given, cluster_namespace(PREFIX, uid)]);
        let error = decide(PREFIX, &two, None, uid).unwrap_err().to_string();
        assert!(error.contains("more than one"), "{error}");
    }
}
