//! Consumer namespace ⇄ provider namespace, as recorded by APIServiceNamespaces.
//!
//! kube-bind's scheme names the provider namespace `<cluster-namespace>-<X>`
//! for consumer namespace X; an APIServiceNamespace's `status.namespace` is the
//! record and wins when present. Where that name would not fit a namespace's
//! 63 characters (a consumer namespace of more than about 39), bindery names
//! it `<cluster-namespace>--<the start of X>-<hash of X>` ([`fitted_name`]),
//! which no consumer namespace's scheme name can be (a namespace never
//! starts with `-`), and finds it back only by its record.
//!
//! A map may also *close* provider namespaces: objects there are no longer
//! found back to a consumer namespace (`proxy::gate` closes those that the
//! consumer's provider account may not read).
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
    /// Provider namespaces whose objects are found back to none.
    closed: std::collections::BTreeSet<String>,
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
        let (consumer, provider) = (consumer.into(), provider.into());
        let records = Arc::make_mut(&mut self.records);
        if let Some(old) = records
            .to_provider
            .insert(consumer.clone(), provider.clone())
        {
            records.to_consumer.remove(&old);
        }
        records.to_consumer.insert(provider, consumer);
        self.renamed();
    }

    /// Closes provider namespace `provider`: its objects map to no consumer
    /// namespace from now on, recorded or named by the scheme.
    pub fn close(&mut self, provider: impl Into<String>) {
        Arc::make_mut(&mut self.records)
            .closed
            .insert(provider.into());
        self.renamed();
    }

    /// A generation no other map's records had.
    fn renamed(&mut self) {
        static GENERATIONS: AtomicU64 = AtomicU64::new(1);
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
        if self.records.closed.contains(provider) {
            return None;
        }
        if let Some(consumer) = self.records.to_consumer.get(provider) {
            return Some(consumer.clone());
        }
        let consumer = provider
            .strip_prefix(&self.cluster_namespace)?
            .strip_prefix('-')?;
        // A recorded namespace elsewhere owns this consumer name; a name
        // that is no namespace's (a fitted name's `-…`) is not one.
        (crate::route::is_dns_label(consumer) && !self.records.to_provider.contains_key(consumer))
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
        fitted_name(&self.cluster_namespace, consumer)
    }
}

/// The longest name a namespace may have.
const NAMESPACE_LENGTH: usize = 63;
/// How many base36 digits of the hash a fitted name ends with (51 bits).
const HASH_DIGITS: usize = 10;

/// The provider namespace bindery names for consumer namespace `consumer`
/// of `cluster_namespace`: kube-bind's `<cluster-namespace>-<consumer>`
/// when it fits in a namespace's 63 characters (every name kube-bind could
/// make), else `<cluster-namespace>--<start>-<hash>`, as much of the
/// consumer namespace as fits and the base36 of sha224 of all of it.
pub fn fitted_name(cluster_namespace: &str, consumer: &str) -> String {
    let scheme = format!("{cluster_namespace}-{consumer}");
    if scheme.len() <= NAMESPACE_LENGTH {
        return scheme;
    }
    use sha2::{Digest, Sha224};
    let digest = Sha224::digest(consumer.as_bytes());
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    let hash = base36(u64::from_be_bytes(first));
    let hash = &hash[hash.len().saturating_sub(HASH_DIGITS)..];
    let room = NAMESPACE_LENGTH.saturating_sub(cluster_namespace.len() + 3 + hash.len());
    let start = consumer[..room.min(consumer.len())].trim_end_matches('-');
    if start.is_empty() {
        format!("{cluster_namespace}--{hash}")
    } else {
        format!("{cluster_namespace}--{start}-{hash}")
    }
}

/// `value` in lower-case base 36, most significant digit first.
pub fn base36(mut value: u64) -> String {
    const DIGITS: &[u8; 36] = b"0123456789abcdefghijklmnopqrstuvwxyz";
    if value == 0 {
        return "0".into();
    }
    let mut out = Vec::new();
    while value > 0 {
        out.push(DIGITS[(value % 36) as usize]);
        value /= 36;
    }
    out.reverse();
    String::from_utf8(out).expect("base36 digits are ASCII")
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
    fn long_consumer_namespaces_get_names_that_fit() {
        let cluster = "kube-bind-1a2b3c4d5e6f7";
        let fits = "a".repeat(63 - cluster.len() - 1);
        let map = NamespaceMap::new(cluster);
        assert_eq!(
            map.to_provider(&fits),
            format!("{cluster}-{fits}"),
            "kube-bind's name when it fits"
        );
        let long = format!("{fits}b");
        let fitted = map.to_provider(&long);
        assert!(crate::route::is_dns_label(&fitted), "{fitted}");
        assert!(fitted.starts_with(&format!("{cluster}--aaaa")), "{fitted}");
        assert_eq!(
            map.to_consumer(&fitted),
            None,
            "found back only by its record"
        );
        let mut recorded = map.clone();
        recorded.insert(long.clone(), fitted.clone());
        assert_eq!(recorded.to_consumer(&fitted), Some(long));
        // The start ends before a dash.
        let dashed = format!("{}-{}", "x".repeat(38), "y".repeat(24));
        assert!(
            !map.to_provider(&dashed).contains("x--"),
            "{}",
            map.to_provider(&dashed)
        );
    }

    proptest::proptest! {
        #[test]
        fn every_namespace_gets_a_namespace_name_of_its_own(
            cluster in "kube-bind-[0-9a-z]{1,13}",
            a in "[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?",
            b in "[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?",
        ) {
            let map = NamespaceMap::new(cluster.as_str());
            let (pa, pb) = (map.to_provider(&a), map.to_provider(&b));
            proptest::prop_assert!(crate::route::is_dns_label(&pa), "{}", pa);
            proptest::prop_assert_eq!(pa == pb, a == b);
            // Found back: by the scheme when it is kube-bind's name, else by
            // its record.
            let mut recorded = map.clone();
            recorded.insert(a.clone(), pa.clone());
            proptest::prop_assert_eq!(recorded.to_consumer(&pa), Some(a.clone()));
            if pa == format!("{cluster}-{a}") {
                proptest::prop_assert_eq!(map.to_consumer(&pa), Some(a));
            } else {
                proptest::prop_assert_eq!(map.to_consumer(&pa), None);
            }
        }
    }

    #[test]
    fn a_closed_namespace_is_no_consumers() {
        let mut map = NamespaceMap::new("kube-bind-abc");
        map.insert("team", "elsewhere");
        let open = map.clone();
        map.close("elsewhere");
        map.close("kube-bind-abc-default");
        assert_eq!(map.to_consumer("elsewhere"), None, "a recorded one");
        assert_eq!(
            map.to_consumer("kube-bind-abc-default"),
            None,
            "a scheme one"
        );
        assert_eq!(
            map.to_consumer("kube-bind-abc-other").as_deref(),
            Some("other"),
            "others stay open"
        );
        assert_ne!(map.generation(), open.generation(), "it maps otherwise");
        assert_ne!(map, open);
        assert_eq!(open.to_consumer("elsewhere").as_deref(), Some("team"));
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
