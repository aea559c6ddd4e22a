//! Authorization decisions cached briefly, allows and denials apart (each
//! with its own time to live, like kube-apiserver's webhook authorizer
//! cache), each map bounded in size ([`crate::expiring`]). Keyed by the
//! authority asked and the whole review, so that no decision is ever reused
//! for another user, authority or attribute. Holds no I/O.

use crate::expiring::ExpiringMap;
use std::time::{Duration, Instant};

/// A cached decision.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    Allowed,
    /// Denied, with the authorizer's reason (may be empty).
    Denied(String),
}

/// How long decisions are kept, and how many of each.
#[derive(Clone, Copy, Debug)]
pub struct CacheSettings {
    pub allowed_ttl: Duration,
    pub denied_ttl: Duration,
    /// Entries per map at most.
    pub capacity: usize,
}

impl Default for CacheSettings {
    /// The defaults of an aggregated API server's delegated authorization:
    /// 10 s for both; 10,000 entries each.
    fn default() -> Self {
        Self {
            allowed_ttl: Duration::from_secs(10),
            denied_ttl: Duration::from_secs(10),
            capacity: 10_000,
        }
    }
}

pub struct DecisionCache {
    allowed: ExpiringMap<String, ()>,
    denied: ExpiringMap<String, String>,
}

impl DecisionCache {
    pub fn new(settings: CacheSettings) -> Self {
        Self {
            allowed: ExpiringMap::new(settings.allowed_ttl, settings.capacity),
            denied: ExpiringMap::new(settings.denied_ttl, settings.capacity),
        }
    }

    /// The decision for `key` if one is cached and fresh at `now`.
    pub fn get(&self, key: &str, now: Instant) -> Option<Decision> {
        let key = key.to_string();
        if self.allowed.get(&key, now).is_some() {
            return Some(Decision::Allowed);
        }
        self.denied.get(&key, now).map(Decision::Denied)
    }

    /// Caches `decision` for `key`, taken at `now`.
    pub fn put(&self, key: String, decision: &Decision, now: Instant) {
        match decision {
            Decision::Allowed => {
                self.denied.remove(&key);
                self.allowed.insert(key, (), now);
            }
            Decision::Denied(reason) => {
                self.allowed.remove(&key);
                self.denied.insert(key, reason.clone(), now);
            }
        }
    }

    /// How many decisions are held, allowed and denied.
    pub fn len(&self) -> (usize, usize) {
        (self.allowed.len(), self.denied.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cache(capacity: usize) -> DecisionCache {
        DecisionCache::new(CacheSettings {
            allowed_ttl: Duration::from_secs(10),
            denied_ttl: Duration::from_secs(2),
            capacity,
        })
    }

    #[test]
    fn allows_and_denials_expire_on_their_own_clocks() {
        let cache = cache(10);
        let start = Instant::now();
        cache.put("a".into(), &Decision::Allowed, start);
        cache.put("d".into(), &Decision::Denied("no".into()), start);
        let later = start + Duration::from_secs(3);
        assert_eq!(cache.get("a", later), Some(Decision::Allowed));
        assert_eq!(cache.get("d", later), None, "denials expire first");
        assert_eq!(cache.get("a", start + Duration::from_secs(11)), None);
        assert_eq!(cache.len(), (0, 0), "expired entries are dropped when met");
    }

    #[test]
    fn a_new_decision_replaces_the_other_kind() {
        let cache = cache(10);
        let now = Instant::now();
        cache.put("k".into(), &Decision::Allowed, now);
        cache.put("k".into(), &Decision::Denied("revoked".into()), now);
        assert_eq!(
            cache.get("k", now),
            Some(Decision::Denied("revoked".into()))
        );
        assert_eq!(cache.len(), (0, 1));
    }

    #[test]
    fn each_map_stays_within_its_capacity() {
        let cache = cache(3);
        let now = Instant::now();
        for i in 0..50 {
            cache.put(format!("a{i}"), &Decision::Allowed, now);
            cache.put(format!("d{i}"), &Decision::Denied(String::new()), now);
        }
        let (allowed, denied) = cache.len();
        assert!(allowed <= 3 && denied <= 3, "{allowed} {denied}");
        assert_eq!(
            cache.get("a49", now),
            Some(Decision::Allowed),
            "the newest is kept"
        );
    }
}
