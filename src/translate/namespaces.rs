//! Consumer namespace ⇄ provider namespace, as recorded by APIServiceNamespaces.
//!
//! kube-bind's scheme names the provider namespace `<cluster-namespace>-<X>`
//! for consumer namespace X; an APIServiceNamespace's `status.namespace` is the
//! record and wins when present.
//!
//! A map is cheap to clone (its records are shared), and carries a
//! generation that names its records: two maps of one cluster namespace with
//! the same generation map alike, so what was translated under one holds
//! for the other.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

#[derive(Clone, Debug)]
pub struct NamespaceMap {
    cluster_namespace: String,
    records: Arc<Records>,
    /// 0 while there are no records; a number no other map's records had
    /// once there are.
    generation: u64,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Records {
    to_provider: BTreeMap<String, String>,
    to_consumer: BTreeMap<String, String>,
}

/// Maps are equal when they map alike, whatever their generations.
impl PartialEq for NamespaceMap {
    fn eq(&self, other: &Self) -> bool {
        self.cluster_namespace == other.cluster_namespace && self.records == other.records
    }
}

impl Eq for NamespaceMap {}

impl NamespaceMap {
    pub fn new(cluster_namespace: impl Into<String>) -> Self {
        Self {
            cluster_namespace: cluster_namespace.into(),
            records: Arc::default(),
            generation: 0,
        }
    }

    /// Records that consumer namespace `consumer` lives in provider namespace `provider`.
    pub fn insert(&mut self, consumer: impl Into<String>, provider: impl Into<String>) {
        static GENERATIONS: AtomicU64 = AtomicU64::new(1);
        let (consumer, provider) = (consumer.into(), provider.into());
        let records = Arc::make_mut(&mut self.records);
        if let Some(old) = records
            .to_provider
            .insert(consumer.clone(), provider.clone())
        {
            records.to_consumer.remove(&old);
        }
        records.to_consumer.insert(provider, consumer);
        self.generation = GENERATIONS.fetch_add(1, Ordering::Relaxed);
    }

    /// Names this map's records (see the module's comment).
    pub fn generation(&self) -> u64 {
        self.generation
    }

    pub fn cluster_namespace(&self) -> &str {
        &self.cluster_namespace
    }

    /// The provider namespace for consumer namespace `consumer`: the recorded
    /// one, else the one kube-bind's scheme gives.
    pub fn to_provider(&self, consumer: &str) -> String {
        match self.records.to_provider.get(consumer) {
            Some(provider) => provider.clone(),
            None => self.scheme_name(consumer),
        }
    }

    /// Whether `consumer` has a recorded provider namespace.
    pub fn is_recorded(&self, consumer: &str) -> bool {
        self.records.to_provider.contains_key(consumer)
    }

    /// The consumer namespace of provider namespace `provider`, if it is one of
    /// this consumer's.
    pub fn to_consumer(&self, provider: &str) -> Option<String> {
        if let Some(consumer) = self.records.to_consumer.get(provider) {
            return Some(consumer.clone());
        }
        let consumer = provider
            .strip_prefix(&self.cluster_namespace)?
            .strip_prefix('-')?;
        // A recorded namespace elsewhere owns this consumer name.
        (!consumer.is_empty() && !self.records.to_provider.contains_key(consumer))
            .then(|| consumer.to_string())
    }

    /// Every provider namespace name this map knows, with its consumer name.
    pub fn recorded(&self) -> impl Iterator<Item = (&str, &str)> {
        self.records
            .to_consumer
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

    #[test]
    fn a_generation_names_the_records() {
        let empty = NamespaceMap::new("kube-bind-abc");
        assert_eq!(empty.generation(), 0);
        let mut one = empty.clone();
        one.insert("team", "elsewhere");
        assert_ne!(one.generation(), 0);
        let copy = one.clone();
        assert_eq!(copy.generation(), one.generation());
        let mut changed = one.clone();
        changed.insert("other", "far");
        assert_ne!(changed.generation(), one.generation());
        assert_eq!(
            one.to_provider("other"),
            "kube-bind-abc-other",
            "a clone's change is its own"
        );
        let mut same = NamespaceMap::new("kube-bind-abc");
        same.insert("team", "elsewhere");
        assert_eq!(same, one, "equal records are equal maps");
        assert_ne!(same.generation(), one.generation());
    }
}
