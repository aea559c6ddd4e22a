//! What one consumer has bound: the context every translation runs in.

use super::identity::{CONSUMER_LABEL, EXPORT_LABEL, IdentityHash};
use super::namespaces::NamespaceMap;
use super::owners::ProviderKinds;
use crate::route::ConsumerId;

/// Where a cluster-scoped object of an export lives on the provider
/// (kube-bind's `isolation`). Namespaced objects always map namespaces.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Isolation {
    /// Name prefixed with the cluster namespace: `<cluster-namespace>-<name>`.
    Prefixed,
    /// The same name, namespaced in the consumer's cluster namespace: the
    /// provider's CRD is namespaced, the consumer's view cluster-scoped.
    Namespaced,
    /// The same name: objects are shared (last writer wins).
    None,
}

impl From<crate::api::Isolation> for Isolation {
    fn from(isolation: crate::api::Isolation) -> Self {
        match isolation {
            crate::api::Isolation::Prefixed => Self::Prefixed,
            crate::api::Isolation::Namespaced => Self::Namespaced,
            crate::api::Isolation::None => Self::None,
        }
    }
}

/// One resource a consumer has bound through one export.
#[derive(Clone, Debug)]
pub struct BoundResource {
    pub consumer: ConsumerId,
    pub group: String,
    /// The plural resource name, as in the path.
    pub resource: String,
    pub kind: String,
    pub namespaced: bool,
    pub isolation: Isolation,
    /// The export this resource is bound through, and its identity.
    pub export: String,
    pub identity: IdentityHash,
    pub has_status: bool,
    pub has_scale: bool,
    pub namespaces: NamespaceMap,
    /// Every kind the consumer has bound: an ownerReference to one of them
    /// names an object on the provider.
    pub provider_kinds: ProviderKinds,
    /// Served in the export's virtual workspace: every object shown carries
    /// the `kcp.io/cluster` annotation naming its consumer (`translate::kcp`).
    pub in_workspace: bool,
}

impl BoundResource {
    /// Equal for two bindings that translate objects alike: every field
    /// counts, the namespace map by its generation (not by walking its
    /// records, which grow with the consumer's namespaces).
    pub fn translation_key(&self) -> u64 {
        use std::hash::{Hash, Hasher};
        let Self {
            consumer,
            group,
            resource,
            kind,
            namespaced,
            isolation,
            export,
            identity,
            has_status,
            has_scale,
            namespaces,
            provider_kinds,
            in_workspace,
        } = self;
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        (consumer, group, resource, kind, namespaced, isolation).hash(&mut hasher);
        (export, identity, has_status, has_scale, provider_kinds).hash(&mut hasher);
        in_workspace.hash(&mut hasher);
        (namespaces.cluster_namespace(), namespaces.generation()).hash(&mut hasher);
        hasher.finish()
    }

    /// `<resource>.<group>`, as kube-apiserver names it in messages.
    pub fn qualified_resource(&self) -> String {
        if self.group.is_empty() {
            self.resource.clone()
        } else {
            format!("{}.{}", self.resource, self.group)
        }
    }

    /// The labels every object of this export carries on the provider.
    pub fn identity_labels(&self) -> [(&'static str, &str); 2] {
        [
            (EXPORT_LABEL, self.identity.label_value()),
            (CONSUMER_LABEL, self.consumer.as_str()),
        ]
    }

    /// The label selector that restricts provider lists to this export.
    pub fn identity_selector(&self) -> String {
        self.identity_labels()
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// The headers that make a provider request as this consumer's own
    /// account, for this export: kube-apiserver's impersonation, which the
    /// provider's RBAC and admission then hold.
    pub fn impersonation(&self) -> [(&'static str, String); 2] {
        let account = super::identity::consumer_account(self.namespaces.cluster_namespace());
        [
            ("impersonate-user", account),
            (
                // `Impersonate-Extra-<key>`, the key percent-escaped.
                "impersonate-extra-bindery.dev%2fexport",
                self.identity.label_value().to_string(),
            ),
        ]
    }

    /// The provider namespace a cluster-scoped object of this binding lives
    /// in: the cluster namespace under `Namespaced` isolation, else none.
    pub fn provider_namespace_of_cluster_scoped(&self) -> Option<&str> {
        (!self.namespaced && self.isolation == Isolation::Namespaced)
            .then(|| self.namespaces.cluster_namespace())
    }

    /// Whether the objects are cluster-scoped and laid out beside every
    /// other consumer's (`Prefixed` or `None`): kube-bind's konnector gives
    /// each a reference to the consumer's cluster Namespace, so that they
    /// go with it; under `Namespaced` they live in it.
    pub fn owned_by_cluster_namespace(&self) -> bool {
        !self.namespaced && self.isolation != Isolation::Namespaced
    }

    /// The provider name of cluster-scoped object `name`.
    pub fn provider_name(&self, name: &str) -> String {
        match (self.namespaced, self.isolation) {
            (false, Isolation::Prefixed) => {
                format!("{}-{name}", self.namespaces.cluster_namespace())
            }
            _ => name.to_string(),
        }
    }

    /// The consumer name of provider object `name`; `None` when the name is
    /// not one this consumer could have made.
    pub fn consumer_name(&self, name: &str) -> Option<String> {
        match (self.namespaced, self.isolation) {
            (false, Isolation::Prefixed) => name
                .strip_prefix(self.namespaces.cluster_namespace())?
                .strip_prefix('-')
                .filter(|rest| !rest.is_empty())
                .map(str::to_string),
            _ => Some(name.to_string()),
        }
    }
}

#[cfg(test)]
pub(crate) mod fixtures {
    use super::*;

    /// A namespaced `widgets.example.com` bound by consumer `c1`.
    pub fn widgets() -> BoundResource {
        BoundResource {
            consumer: ConsumerId::parse("c1").unwrap(),
            group: "example.com".into(),
            resource: "widgets".into(),
            kind: "Widget".into(),
            namespaced: true,
            isolation: Isolation::Prefixed,
            export: "widgets".into(),
            identity: IdentityHash::of_secret(b"export-1"),
            has_status: true,
            has_scale: true,
            namespaces: NamespaceMap::new("kube-bind-c1"),
            provider_kinds: Default::default(),
            in_workspace: false,
        }
    }

    /// A cluster-scoped `gadgets.example.com` bound by consumer `c1`, prefixed.
    pub fn gadgets() -> BoundResource {
        BoundResource {
            resource: "gadgets".into(),
            kind: "Gadget".into(),
            namespaced: false,
            ..widgets()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::fixtures::*;
    use super::*;

    #[test]
    fn a_consumer_is_impersonated_as_its_own_account_for_its_export() {
        let w = widgets();
        let [user, extra] = w.impersonation();
        assert_eq!(
            user,
            (
                "impersonate-user",
                "system:serviceaccount:kube-bind-c1:bindery-consumer".into()
            )
        );
        assert_eq!(extra.0, "impersonate-extra-bindery.dev%2fexport");
        assert_eq!(extra.1, w.identity.label_value());
        assert!(
            http::HeaderName::from_static(extra.0)
                .as_str()
                .starts_with("impersonate-extra-")
        );
    }

    #[test]
    fn prefixed_names_round_trip() {
        let gadgets = gadgets();
        assert_eq!(gadgets.provider_name("g"), "kube-bind-c1-g");
        assert_eq!(
            gadgets.consumer_name("kube-bind-c1-g").as_deref(),
            Some("g")
        );
        assert_eq!(gadgets.consumer_name("kube-bind-c2-g"), None);
        assert_eq!(gadgets.consumer_name("kube-bind-c1-"), None);
        assert_eq!(widgets().provider_name("w"), "w");
    }

    #[test]
    fn bindings_that_translate_differently_have_different_keys() {
        let base = widgets();
        assert_eq!(base.translation_key(), base.clone().translation_key());
        let mut variants = vec![gadgets()];
        let mut other = widgets();
        other.consumer = ConsumerId::parse("c2").unwrap();
        variants.push(other);
        let mut other = widgets();
        other.identity = IdentityHash::of_secret(b"export-2");
        variants.push(other);
        let mut other = widgets();
        other.isolation = Isolation::None;
        variants.push(other);
        let mut other = widgets();
        other.has_status = false;
        variants.push(other);
        let mut other = widgets();
        other.namespaces = NamespaceMap::new("kube-bind-c9");
        variants.push(other);
        let mut other = widgets();
        other.namespaces.insert("team", "p-team");
        variants.push(other);
        for variant in &variants {
            assert_ne!(
                variant.translation_key(),
                base.translation_key(),
                "{variant:?}"
            );
        }
    }
}
