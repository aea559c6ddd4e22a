//! Consumer namespace ⇄ provider namespace, as recorded by APIServiceNamespaces.
//!
//! kube-bind's scheme names the provider namespace `<cluster-namespace>-<X>`
//! for consumer namespace X; an APIServiceNamespace's `status.namespace` is the
//! record and wins when present.

use std::collections::BTreeMap;

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NamespaceMap {
    cluster_namespace: String,
    to_provider: BTreeMap<String, String>,
    to_consumer: BTreeMap<String, String>,
}

impl NamespaceMap {
    pub fn new(cluster_namespace: impl Into<String>) -> Self {
        Self {
            cluster_namespace: cluster_namespace.into(),
            ..Self::default()
        }
    }

    /// Records that consumer namespace `consumer` lives in provider namespace `provider`.
    pub fn insert(&mut self, consumer: impl Into<String>, provider: impl Into<String>) {
        let (consumer, provider) = (consumer.into(), provider.into());
        if let Some(old) = self.to_provider.insert(consumer.clone(), provider.clone()) {
            self.to_consumer.remove(&old);
        }
        self.to_consumer.insert(provider, consumer);
    }

    pub fn cluster_namespace(&self) -> &str {
        &self.cluster_namespace
    }

    /// The provider namespace for consumer namespace `consumer`: the recorded
    /// one, else the one kube-bind's scheme gives.
    pub fn to_provider(&self, consumer: &str) -> String {
        match self.to_provider.get(consumer) {
            Some(provider) => provider.clone(),
            None => self.scheme_name(consumer),
        }
    }

    /// Whether `consumer` has a recorded provider namespace.
    pub fn is_recorded(&self, consumer: &str) -> bool {
        self.to_provider.contains_key(consumer)
    }

    /// The consumer namespace of provider namespace `provider`, if it is one of
    /// this consumer's.
    pub fn to_consumer(&self, provider: &str) -> Option<String> {
        if let Some(consumer) = self.to_consumer.get(provider) {
            return Some(consumer.clone());
        }
        let consumer = provider
            .strip_prefix(&self.cluster_namespace)?
            .strip_prefix('-')?;
        // A recorded namespace elsewhere owns this consumer name.
        (!consumer.is_empty() && !self.to_provider.contains_key(consumer))
            .then(|| consumer.to_string())
    }

    /// Every provider namespace name this map knows, with its consumer name.
    pub fn recorded(&self) -> impl Iterator<Item = (&str, &str)> {
        self.to_consumer
            .iter()
            .map(|(provider, consumer)| (provider.as_str(), consumer.as_str()))
    }

    fn scheme_name(&self, consumer: &str) -> String {
        format!("{}-{consumer}", self.cluster_namespace)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scheme_and_records() {
        let mut map = NamespaceMap::new("kube-bind-abc");
        assert_eq!(map.to_provider("default"), "kube-bind-abc-default");
        assert_eq!(
            map.to_consumer("kube-bind-abc-default").as_deref(),
            Some("default")
        );
        assert_eq!(map.to_consumer("kube-bind-abcd-default"), None);
        assert_eq!(map.to_consumer("kube-bind-abc-"), None);
        assert_eq!(map.to_consumer("kube-bind-abc"), None);
        assert_eq!(map.to_consumer("other"), None);

        map.insert("team", "elsewhere");
        assert_eq!(map.to_provider("team"), "elsewhere");
        assert_eq!(map.to_consumer("elsewhere").as_deref(), Some("team"));
        // The scheme name of a recorded namespace is not this consumer's.
        assert_eq!(map.to_consumer("kube-bind-abc-team"), None);
    }
}
