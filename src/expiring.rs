//! A concurrent map whose entries expire after a fixed time and whose size
//! is bounded: what bindery remembers of the answers it asked for
//! (authorization decisions, token reviews), for their time to live and
//! never beyond a number of entries. Holds no I/O.

use dashmap::DashMap;
use std::hash::Hash;
use std::time::{Duration, Instant};

pub struct ExpiringMap<K: Eq + Hash, V> {
    entries: DashMap<K, (Instant, V)>,
    ttl: Duration,
    capacity: usize,
}

impl<K: Eq + Hash + Clone, V: Clone> ExpiringMap<K, V> {
    /// Entries live `ttl`; at most `capacity` of them (at least one).
    pub fn new(ttl: Duration, capacity: usize) -> Self {
        Self {
            entries: DashMap::new(),
            ttl,
            capacity: capacity.max(1),
        }
    }

    /// The value for `key` if it is fresh at `now`; an expired one is dropped.
    pub fn get(&self, key: &K, now: Instant) -> Option<V> {
        let (expiry, value) = self.entries.get(key).map(|e| e.clone())?;
        if now < expiry {
            return Some(value);
        }
        self.entries.remove(key);
        None
    }

    /// Keeps `value` for `key`, as of `now`. When the map is full, expired
    /// entries go first, then arbitrary ones: losing an entry costs one more
    /// question, never a wrong answer.
    pub fn insert(&self, key: K, value: V, now: Instant) {
        if self.entries.len() >= self.capacity && !self.entries.contains_key(&key) {
            self.entries.retain(|_, (expiry, _)| *expiry > now);
            while self.entries.len() >= self.capacity {
                let Some(victim) = self.entries.iter().next().map(|e| e.key().clone()) else {
                    break;
                };
                self.entries.remove(&victim);
            }
        }
        self.entries.insert(key, (now + self.ttl, value));
    }

    pub fn remove(&self, key: &K) {
        self.entries.remove(key);
    }

    /// How many entries are held, fresh or not yet dropped.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_expire_after_their_time_to_live() {
        let map = ExpiringMap::new(Duration::from_secs(10), 10);
        let start = Instant::now();
        map.insert("a", 1, start);
        assert_eq!(map.get(&"a", start + Duration::from_secs(9)), Some(1));
        assert_eq!(map.get(&"a", start + Duration::from_secs(10)), None);
        assert!(map.is_empty(), "an expired entry is dropped when met");
    }

    #[test]
    fn the_map_stays_within_its_capacity_and_keeps_the_newest() {
        let map = ExpiringMap::new(Duration::from_secs(10), 3);
        let now = Instant::now();
        for i in 0..50 {
            map.insert(i, i, now);
            assert!(map.len() <= 3);
        }
        assert_eq!(map.get(&49, now), Some(49));
    }

    #[test]
    fn expired_entries_make_room_before_fresh_ones() {
        let map = ExpiringMap::new(Duration::from_secs(10), 2);
        let start = Instant::now();
        map.insert("old", 0, start);
        let later = start + Duration::from_secs(5);
        map.insert("fresh", 1, later);
        map.insert("new", 2, start + Duration::from_secs(11));
        assert_eq!(map.get(&"fresh", start + Duration::from_secs(11)), Some(1));
        assert_eq!(map.get(&"new", start + Duration::from_secs(11)), Some(2));
    }

    #[test]
    fn replacing_a_key_in_a_full_map_evicts_nothing() {
        let map = ExpiringMap::new(Duration::from_secs(10), 2);
        let now = Instant::now();
        map.insert("a", 1, now);
        map.insert("b", 2, now);
        map.insert("a", 3, now);
        assert_eq!((map.get(&"a", now), map.get(&"b", now)), (Some(3), Some(2)));
    }
}
