//! The multi-version store: per key, a chain of versions ordered by [`Version`], with garbage collection.

use crate::request::{Key, Value, Version};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// One stored version of a key with the protocol's metadata (dependency or commit vectors, ...).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredVersion<M> {
    pub value: Value,
    pub version: Version,
    pub meta: M,
}

impl<M> StoredVersion<M> {
    /// The total order of versions of one key.
    pub fn order(&self) -> (Version, &str) {
        (self.version, &self.value)
    }
}

/// Which versions garbage collection may drop.
///
/// With `SingleVersion` a key keeps only its newest version (CV). With `KeepSince { horizon }`
/// a key keeps every version newer than `horizon` plus the newest one at or before it: every snapshot whose
/// time is at or after the horizon still reads exactly what it would have read without collection; a
/// snapshot older than the horizon may no longer find its version, and the protocol must not serve one.
/// Protocols whose snapshots are vectors rather than times (Contrarian) use [`MvStore::collect_below`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum GcPolicy {
    SingleVersion,
    KeepSince { horizon: u64 },
}

/// Versions of each key, oldest first, ordered by `(version, value)`: two writes that got the same version
/// (equal commit timestamps from different coordinators) are ordered by value, the same way in every
/// replica, so last-writer-wins replicas converge whatever order updates arrive in. Keys iterate in order (a `BTreeMap`) so nothing depends on hashing.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct MvStore<M> {
    keys: BTreeMap<Key, Vec<StoredVersion<M>>>,
    /// Keys holding more than one version: the only ones garbage collection needs to visit.
    multi: BTreeSet<Key>,
    versions: usize,
}

impl<M> Default for MvStore<M> {
    fn default() -> Self {
        Self { keys: BTreeMap::new(), multi: BTreeSet::new(), versions: 0 }
    }
}

impl<M> MvStore<M> {
    pub fn new() -> Self {
        Self::default()
    }

    /// Total versions stored.
    pub fn version_count(&self) -> usize {
        self.versions
    }

    pub fn versions(&self, key: &str) -> &[StoredVersion<M>] {
        self.keys.get(key).map(Vec::as_slice).unwrap_or(&[])
    }

    pub fn latest(&self, key: &str) -> Option<&StoredVersion<M>> {
        self.versions(key).last()
    }

    /// Add a version, keeping the chain ordered. Returns false (and stores nothing) if that exact version exists.
    pub fn insert(&mut self, key: Key, v: StoredVersion<M>) -> bool {
        let chain = self.keys.entry(key.clone()).or_default();
        let pos = chain.partition_point(|x| x.order() < v.order());
        if chain.get(pos).is_some_and(|x| x.order() == v.order()) {
            return false;
        }
        chain.insert(pos, v);
        self.versions += 1;
        if chain.len() == 2 {
            self.multi.insert(key);
        }
        true
    }

    /// Last-writer-wins single-version update ("ver[k] = {val}", Tomsic Alg. 2 line 23): keeps `v` only if
    /// it is newer than what is stored. Returns whether it was kept.
    pub fn put_if_newer(&mut self, key: Key, v: StoredVersion<M>) -> bool {
        match self.keys.get_mut(&key) {
            Some(chain) => {
                if chain.last().is_some_and(|x| x.order() >= v.order()) {
                    return false;
                }
                self.versions -= chain.len() - 1;
                chain.clear();
                chain.push(v);
                self.multi.remove(&key);
                true
            }
            None => {
                self.keys.insert(key, vec![v]);
                self.versions += 1;
                true
            }
        }
    }

    /// The newest version satisfying `visible`, and how many newer versions it skipped.
    pub fn newest_where(
        &self,
        key: &str,
        mut visible: impl FnMut(&StoredVersion<M>) -> bool,
    ) -> (Option<&StoredVersion<M>>, u32) {
        let chain = self.versions(key);
        for (skipped, v) in chain.iter().rev().enumerate() {
            if visible(v) {
                return (Some(v), skipped as u32);
            }
        }
        (None, chain.len() as u32)
    }

    /// Drop the versions `policy` allows; returns how many were dropped.
    pub fn collect_garbage(&mut self, policy: GcPolicy) -> usize {
        match policy {
            GcPolicy::SingleVersion => self.collect_below(|_| true),
            // The newest version at or before the horizon stays: snapshots at the horizon read it.
            GcPolicy::KeepSince { horizon } => self.collect_below(|v| v.version.time <= horizon),
        }
    }

    /// For each key, keep the newest version for which `below_horizon` holds and everything newer; drop the
    /// older ones. Use it when every snapshot still to be served sees `below_horizon` versions (for example
    /// a vector horizon: `cv ≤ horizon` entry-wise): such a snapshot reads that version or a newer one, so
    /// the dropped versions are unreachable. Returns how many were dropped.
    pub fn collect_below(&mut self, mut below_horizon: impl FnMut(&StoredVersion<M>) -> bool) -> usize {
        let mut dropped = 0;
        let mut done = Vec::new();
        for key in &self.multi {
            let chain = self.keys.get_mut(key).expect("multi-version keys are stored");
            let keep_from = chain.iter().rposition(&mut below_horizon).unwrap_or(0);
            if keep_from > 0 {
                chain.drain(..keep_from);
                dropped += keep_from;
            }
            if chain.len() < 2 {
                done.push(key.clone());
            }
        }
        for key in done {
            self.multi.remove(&key);
        }
        self.versions -= dropped;
        dropped
    }

    /// [`GcPolicy::KeepSince`] over a protocol-defined time instead of `version.time`: keeps every version
    /// with `time_of(v) > horizon` plus the newest one with `time_of(v) <= horizon`, so a snapshot at any
    /// time at or after `horizon` (in `time_of` units) reads what it would have read without collection.
    /// COPS uses each version's local visibility time, which does not decrease along a chain.
    /// Returns how many versions were dropped.
    pub fn collect_garbage_by(&mut self, horizon: u64, time_of: impl Fn(&StoredVersion<M>) -> u64) -> usize {
        self.collect_below(|v| time_of(v) <= horizon)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sv(t: u64) -> StoredVersion<()> {
        StoredVersion { value: format!("v{t}").into(), version: Version { time: t, dc: 0 }, meta: () }
    }

    #[test]
    fn versions_stay_ordered_and_lookup_counts_skips() {
        let mut s = MvStore::new();
        for t in [5, 1, 3] {
            assert!(s.insert("k".into(), sv(t)));
        }
        assert!(!s.insert("k".into(), sv(3)));
        assert_eq!(s.version_count(), 3);
        assert_eq!(s.latest("k").unwrap().version.time, 5);
        let (v, skipped) = s.newest_where("k", |v| v.version.time <= 4);
        assert_eq!((v.unwrap().version.time, skipped), (3, 1));
        let (v, skipped) = s.newest_where("k", |_| false);
        assert_eq!((v, skipped), (None, 3));
    }

    #[test]
    fn gc_keeps_what_snapshots_at_the_horizon_read() {
        let mut s = MvStore::new();
        for t in [1, 2, 3, 4, 5] {
            s.insert("k".into(), sv(t));
        }
        s.insert("single".into(), sv(1));
        assert_eq!(s.collect_garbage(GcPolicy::KeepSince { horizon: 3 }), 2);
        let times: Vec<u64> = s.versions("k").iter().map(|v| v.version.time).collect();
        assert_eq!(times, vec![3, 4, 5]);
        assert_eq!(s.collect_garbage(GcPolicy::SingleVersion), 2);
        assert_eq!(s.version_count(), 2);
        assert_eq!(s.collect_garbage(GcPolicy::SingleVersion), 0);
    }

    #[test]
    fn gc_by_predicate_keeps_the_newest_stable_version_and_everything_newer() {
        let mut s = MvStore::new();
        for t in [1, 2, 3, 4, 5] {
            s.insert("k".into(), sv(t));
        }
        s.insert("u".into(), sv(7));
        s.insert("u".into(), sv(9));
        // Version 2 and 4 are "stable"; 4 is the newest stable one: 1, 2 and 3 go.
        assert_eq!(s.collect_below(|v| v.version.time % 2 == 0 || v.version.time == 1), 3);
        let times: Vec<u64> = s.versions("k").iter().map(|v| v.version.time).collect();
        assert_eq!(times, vec![4, 5]);
        assert_eq!(s.versions("u").len(), 2, "nothing stable: all kept");
        assert_eq!(s.version_count(), 4);
    }

    #[test]
    fn gc_by_another_time_keeps_what_snapshots_at_the_horizon_read() {
        // meta = the local visibility time, here 10× the version time.
        let mut s = MvStore::new();
        for t in [1, 2, 3, 4] {
            s.insert(
                "k".into(),
                StoredVersion { value: format!("v{t}").into(), version: Version { time: t, dc: 1 }, meta: t * 10 },
            );
        }
        assert_eq!(s.collect_garbage_by(25, |v| v.meta), 1);
        let times: Vec<u64> = s.versions("k").iter().map(|v| v.meta).collect();
        assert_eq!(times, vec![20, 30, 40], "the newest at or before the horizon stays");
        assert_eq!(s.collect_garbage_by(1_000, |v| v.meta), 2);
        assert_eq!(s.version_count(), 1);
    }

    #[test]
    fn equal_versions_are_ordered_by_value_in_every_replica() {
        let a = StoredVersion { value: "a".into(), version: Version { time: 7, dc: 0 }, meta: () };
        let b = StoredVersion { value: "b".into(), version: Version { time: 7, dc: 0 }, meta: () };
        let mut r1 = MvStore::new();
        let mut r2 = MvStore::new();
        r1.put_if_newer("k".into(), a.clone());
        r1.put_if_newer("k".into(), b.clone());
        r2.put_if_newer("k".into(), b);
        r2.put_if_newer("k".into(), a);
        assert_eq!(r1.latest("k").unwrap().value, r2.latest("k").unwrap().value);
    }

    #[test]
    fn last_writer_wins() {
        let mut s = MvStore::new();
        assert!(s.put_if_newer("k".into(), sv(2)));
        assert!(!s.put_if_newer("k".into(), sv(1)));
        assert!(s.put_if_newer("k".into(), sv(3)));
        assert_eq!(s.version_count(), 1);
        assert_eq!(s.latest("k").unwrap().version.time, 3);
    }
}
