//! Partitioned dependence vectors: the snapshot metadata of Jessy's NMSI (Saeida Ardekani, Sutra and
//! Shapiro, "Non-Monotonic Snapshot Isolation", §IV-A, Definitions 6–7, Theorem 1, Proposition 1), and the
//! read rule and certification test built on them (Algorithm 1 line 6, Algorithm 2 `certify`).
//!
//! # The partition
//!
//! The paper coarsens one vector entry per object into one entry per block of a *proper* partition of the
//! objects: a partition whose updates are serialized. snowline's replica groups are such a partition: every
//! member of a group applies the group's update transactions in the order the atomic multicast delivers
//! them. So a vector has one entry per group ([`PartitionId`]). Where the paper counts a group's commits,
//! an entry here holds a *stamp*: the multicast's final timestamp of the transaction, which is unique, the
//! same in every group the transaction writes (so no group has to learn another's counter), and increasing
//! along each group's delivery order (`components::multicast`). Entry `g` of a vector is the stamp of the
//! last transaction of group `g` it depends on. Vectors are sparse (a missing entry is 0, before every
//! stamp), and their size on the wire is what [`DepVector::wire_bytes`] measures (the paper's vector-size
//! cost).
//!
//! # The rules
//!
//! * A committed write's vector (Def. 7, third rule): the join of the vectors of what the transaction
//!   read, with the entry of each group it writes set to its stamp ([`commit_vector`]). The rule's second
//!   part (the writes of the same group before it) is applied where it matters, when a version is read: a
//!   read's vector is its group's *head* at the read's position, the join of every vector the group
//!   applied up to there (next rule), so the partition's serialization is carried by every read.
//! * A read is taken at a *position* of its group's commit order at which the version read was its key's
//!   latest, and its vector is the group's head there (Def. 7, second rule: the writes of the group that
//!   precede the read and not the key's next version). A version that is not overwritten stays readable at
//!   later positions, so a read can see what another group's read depends on in this group.
//! * Reads are *compatible* (§IV-A, `compat`, with Theorem 1 and Proposition 1 for the partition): a read
//!   in another group `h` at position `q` with vector `W` needs this read's position `p ≥ W[g]` and
//!   `head(p)[h] ≤ q`; two reads in one group need both versions to be their keys' latest at one position
//!   (cases (i)–(iii)). A transaction whose reads are pairwise compatible observes a consistent snapshot.
//! * A replica answers a read with the newest version, at the latest position, compatible with everything
//!   the transaction read so far ([`choose`]; Algorithm 1 line 6): forward freshness, since nothing fixes
//!   the snapshot at the start. When there is none (the replica has not yet committed what another read
//!   depends on) the read waits for its group to commit more.
//! * NMSI's certification (Algorithm 2 `certify`): a transaction commits at group `g` when, for each key it
//!   writes there, it depends on the key's last committed version: its snapshot's entry `g` is at least
//!   that version's stamp ([`depends_on`]). Otherwise a write-conflicting transaction it did not see
//!   committed first, and it aborts (no lost update, WCF).

use serde::{Deserialize, Serialize};
use snowline_core::PartitionId;
use std::collections::BTreeMap;

/// A partitioned dependence vector: entry `g` is the stamp of a transaction group `g` applied (absent: 0).
///
/// Its non-zero entries sorted by group, in a vector: a group's heads keep one per applied transaction,
/// and reads, votes and snapshots clone, compare and encode them, where a B-tree's node allocation and
/// pointer chasing cost more than the few entries they hold. Encoded as a map from group to stamp (as the
/// B-tree it replaced was: the same postcard bytes).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DepVector(Vec<(PartitionId, u64)>);

impl DepVector {
    /// The vector of an initial version (and of an empty snapshot): all zeros.
    pub const fn zero() -> Self {
        Self(Vec::new())
    }

    /// A vector from its non-zero entries (a later entry for a group replaces an earlier one).
    pub fn from_entries(entries: impl IntoIterator<Item = (PartitionId, u64)>) -> Self {
        let mut v = Self::zero();
        for (g, c) in entries {
            v.set(g, c);
        }
        v
    }

    /// Entry `g`.
    pub fn get(&self, g: PartitionId) -> u64 {
        self.0.binary_search_by_key(&g, |(h, _)| *h).map_or(0, |i| self.0[i].1)
    }

    /// Sets entry `g` (0 removes it).
    pub fn set(&mut self, g: PartitionId, stamp: u64) {
        match (self.0.binary_search_by_key(&g, |(h, _)| *h), stamp) {
            (Ok(i), 0) => {
                self.0.remove(i);
            }
            (Ok(i), _) => self.0[i].1 = stamp,
            (Err(_), 0) => {}
            (Err(i), _) => self.0.insert(i, (g, stamp)),
        }
    }

    /// Raises each entry to `other`'s where that is larger (the `max` of Definitions 6–7).
    pub fn join(&mut self, other: &DepVector) {
        for &(g, c) in &other.0 {
            match self.0.binary_search_by_key(&g, |(h, _)| *h) {
                Ok(i) => self.0[i].1 = self.0[i].1.max(c),
                Err(i) => self.0.insert(i, (g, c)),
            }
        }
    }

    /// Whether every entry is at most `other`'s (this vector's snapshot is within `other`'s).
    pub fn le(&self, other: &DepVector) -> bool {
        self.0.iter().all(|&(g, c)| c <= other.get(g))
    }

    /// The non-zero entries, by group.
    pub fn entries(&self) -> impl Iterator<Item = (PartitionId, u64)> + '_ {
        self.0.iter().copied()
    }

    /// Bytes this vector takes on the wire (postcard), the metadata a transaction ships per read and vote.
    pub fn wire_bytes(&self) -> usize {
        postcard::to_stdvec(self).map_or(0, |b| b.len())
    }
}

impl Serialize for DepVector {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_map(self.0.iter().map(|(g, c)| (g, c)))
    }
}

impl<'de> Deserialize<'de> for DepVector {
    /// Any map from group to stamp: zero entries are dropped and a repeated group keeps its last stamp (as
    /// the B-tree did), so a forged vector still holds the invariant.
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Entries;
        impl<'de> serde::de::Visitor<'de> for Entries {
            type Value = DepVector;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a map from group to stamp")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<DepVector, A::Error> {
                let mut v = DepVector::zero();
                while let Some((g, c)) = map.next_entry::<PartitionId, u64>()? {
                    v.set(g, c);
                }
                Ok(v)
            }
        }
        deserializer.deserialize_map(Entries)
    }
}

/// The vector of a transaction's writes once it commits with stamp `stamp`: its snapshot, with the entry
/// of each group it writes set to the stamp (later than anything the snapshot holds for that group, since
/// the group delivered the transaction after everything it had applied).
pub fn commit_vector(snapshot: &DepVector, written: impl IntoIterator<Item = PartitionId>, stamp: u64) -> DepVector {
    let mut v = snapshot.clone();
    for g in written {
        v.set(g, stamp);
    }
    v
}

/// A read, as the transaction carries it to its later reads: the group that holds the key, the stamp of
/// the version read, the position in the group's commit order the read was taken at (the version was the
/// key's latest there), and the read's vector: the group's head at that position (Def. 7, second rule).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReadAt {
    pub group: PartitionId,
    pub version: u64,
    pub position: u64,
    pub vector: DepVector,
}

/// What a transaction depends on: the join, over the groups it read, of the vector of its last read in
/// each (reads in the order taken). Every read in a group is its key's latest at the last one's position
/// (each is chosen where the group's earlier reads still are), so the group's head there covers all of
/// them; an earlier read's own position may be later, with a later read's key overwritten there, and
/// its head would claim writes the transaction did not see (certification would then miss a conflict).
pub fn snapshot_of<'a>(reads: impl IntoIterator<Item = &'a ReadAt>) -> DepVector {
    let mut v = DepVector::zero();
    for r in last_per_group(reads).values() {
        v.join(&r.vector);
    }
    v
}

/// The last read in each group.
fn last_per_group<'a>(reads: impl IntoIterator<Item = &'a ReadAt>) -> BTreeMap<PartitionId, &'a ReadAt> {
    reads.into_iter().map(|r| (r.group, r)).collect()
}

/// What a replica of group `group` knows when it answers a read: the group's applied update transactions
/// in order, each `(stamp, head after it)`, oldest kept first (starting with `(0, zero)` until old entries
/// are dropped), and the stamps of the versions of a key it holds (ascending; 0 is the initial version).
pub trait GroupView {
    fn group(&self) -> PartitionId;
    fn heads(&self) -> &[(u64, DepVector)];
    fn versions(&self, key: &str) -> Vec<u64>;
}

/// The read rule (Algorithm 1 line 6): the newest version of `key` (its index among
/// `view.versions(key)`) and the latest position (a stamp of `view.heads()`) at which it was the key's
/// latest and is compatible with every earlier read, `reads[i]` being of key `read_keys[i]`; `None` when
/// there is none yet (the replica has not applied what an earlier read depends on: the read waits).
///
/// Compatible (§IV-A, `compat`, at positions): with the reads in another group `h`, whose last read is at
/// position `q` with vector `W` (all of them are their keys' latest there, [`snapshot_of`]), position `p`
/// needs `p ≥ W[g]` (the snapshot holds what those reads depend on in `g`) and `head(p)[h] ≤ q` (nothing
/// read here depends on a write of `h` they missed). Bounding by each read's own position instead can
/// leave no position at all, and the read would wait for ever. With a read in the same group, both versions
/// must be their keys' latest at `p` (cases (i)–(iii): neither was overwritten before the other
/// committed).
pub fn choose(view: &impl GroupView, key: &str, reads: &[ReadAt], read_keys: &[&str]) -> Option<(usize, u64)> {
    let g = view.group();
    let heads = view.heads();
    let now = heads.last().map_or(0, |(stamp, _)| *stamp);
    let mut lo_all = 0;
    let mut hi_all = now;
    for (r, k) in reads.iter().zip(read_keys).filter(|(r, _)| r.group == g) {
        // The interval over which that version was its key's latest.
        let next = view.versions(k).into_iter().find(|&c| c > r.version);
        lo_all = lo_all.max(r.version);
        hi_all = hi_all.min(next.map_or(now, |n| n - 1));
    }
    // Another group's reads stand at its last read's position, with that read's vector (`snapshot_of`).
    let others: Vec<&ReadAt> = last_per_group(reads).into_values().filter(|r| r.group != g).collect();
    for r in &others {
        lo_all = lo_all.max(r.vector.get(g));
    }
    let stamps = view.versions(key);
    for (i, &c) in stamps.iter().enumerate().rev() {
        let next = stamps.get(i + 1).map_or(now, |n| n - 1);
        let (lo, hi) = (lo_all.max(c), hi_all.min(next));
        if lo > hi {
            continue;
        }
        // The positions in [lo, hi], latest first; heads only grow along the order, so the first that
        // fits is the latest.
        let from = heads.partition_point(|(stamp, _)| *stamp < lo);
        let to = heads.partition_point(|(stamp, _)| *stamp <= hi);
        // Reads in one group are all their keys' latest at the last one's position (each was chosen
        // compatible with the earlier ones there), so that position bounds what this read may depend on.
        let fits = |head: &DepVector| others.iter().all(|r| head.get(r.group) <= r.position);
        if let Some((p, _)) = heads[from..to].iter().rev().find(|(_, head)| fits(head)) {
            return Some((i, *p));
        }
    }
    None
}

/// Whether a transaction with snapshot `snapshot` depends on the version of stamp `stamp` in group
/// `group` (so it saw that write, directly or through its group's order): NMSI's certification asks this
/// of the latest committed version of every key the transaction writes. A read at position `p` puts `p`
/// in the snapshot's entry `g`, and its version was the key's latest at `p`, so a later overwrite is never
/// covered by it (nor, by the read rule, by any other read).
pub fn depends_on(snapshot: &DepVector, group: PartitionId, stamp: u64) -> bool {
    snapshot.get(group) >= stamp
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    const X: PartitionId = 0;
    const Y: PartitionId = 1;

    fn v(entries: &[(PartitionId, u64)]) -> DepVector {
        DepVector::from_entries(entries.iter().copied())
    }

    /// The vector encodes as the B-tree it replaced did (snapshots and logs on disk read back), and a forged
    /// encoding with a zero entry or a repeated group decodes to a vector that holds the invariant.
    #[test]
    fn a_vector_encodes_as_a_map_and_decodes_forged_maps_to_its_invariant() {
        let a = v(&[(2, 7), (0, 3), (5, 1)]);
        let map: BTreeMap<PartitionId, u64> = [(0, 3), (2, 7), (5, 1)].into();
        assert_eq!(postcard::to_stdvec(&a).unwrap(), postcard::to_stdvec(&map).unwrap());
        assert_eq!(postcard::from_bytes::<DepVector>(&postcard::to_stdvec(&a).unwrap()).unwrap(), a);
        let forged: Vec<(PartitionId, u64)> = vec![(4, 9), (1, 0), (4, 2), (3, 6)];
        let back: DepVector = postcard::from_bytes(&postcard::to_stdvec(&forged).unwrap()).unwrap();
        assert_eq!(back, v(&[(3, 6), (4, 2)]));
        assert_eq!(back.entries().collect::<Vec<_>>(), vec![(3, 6), (4, 2)]);
        let mut j = v(&[(1, 4), (3, 1)]);
        j.join(&v(&[(0, 2), (3, 5)]));
        assert_eq!(j.entries().collect::<Vec<_>>(), vec![(0, 2), (1, 4), (3, 5)]);
        j.set(1, 0);
        assert_eq!((j.get(1), j.get(3), j.le(&v(&[(0, 2), (3, 5)]))), (0, 5, true));
    }

    /// Groups that apply every commit at once: per group the heads log, per key its versions' stamps (and
    /// values, for histories); stamps count commits over all groups, as the multicast's final timestamps
    /// order them. Keys name their group: `"x…"` → X, `"y…"` → Y, `"k<n>"` → n % 3.
    #[derive(Default)]
    struct World {
        stamp: u64,
        heads: BTreeMap<PartitionId, Vec<(u64, DepVector)>>,
        versions: BTreeMap<String, Vec<(u64, Option<String>)>>,
    }

    fn group_of(key: &str) -> PartitionId {
        match key.as_bytes()[0] {
            b'x' => X,
            b'y' => Y,
            _ => key[1..].parse::<PartitionId>().expect("k<n>") % 3,
        }
    }

    struct View<'a>(&'a World, PartitionId);

    static INITIAL: [(u64, DepVector); 1] = [(0, DepVector::zero())];

    impl GroupView for View<'_> {
        fn group(&self) -> PartitionId {
            self.1
        }
        fn heads(&self) -> &[(u64, DepVector)] {
            self.0.heads.get(&self.1).map_or(&INITIAL[..], |h| &h[..])
        }
        fn versions(&self, key: &str) -> Vec<u64> {
            let mut c: Vec<u64> =
                self.0.versions.get(key).map(|v| v.iter().map(|(c, _)| *c).collect()).unwrap_or_default();
            c.insert(0, 0);
            c
        }
    }

    impl World {
        fn read(&self, key: &str, reads: &[(String, ReadAt)]) -> Option<(ReadAt, Option<String>)> {
            let g = group_of(key);
            let view = View(self, g);
            let keys: Vec<&str> = reads.iter().map(|(k, _)| k.as_str()).collect();
            let at: Vec<ReadAt> = reads.iter().map(|(_, r)| r.clone()).collect();
            let (i, p) = choose(&view, key, &at, &keys)?;
            let version = view.versions(key)[i];
            let value = if i == 0 { None } else { self.versions[key][i - 1].1.clone() };
            let head = view.heads().iter().find(|(s, _)| *s == p).expect("a position is a head").1.clone();
            Some((ReadAt { group: g, version, position: p, vector: head }, value))
        }

        /// Commits writes on top of `snapshot`; returns the commit vector.
        fn commit(&mut self, snapshot: &DepVector, writes: &[(&str, String)]) -> DepVector {
            self.stamp += 1;
            let groups: BTreeSet<PartitionId> = writes.iter().map(|(k, _)| group_of(k)).collect();
            let cv = commit_vector(snapshot, groups.iter().copied(), self.stamp);
            for &g in &groups {
                let log = self.heads.entry(g).or_insert_with(|| INITIAL.to_vec());
                let mut head = log.last().expect("initial").1.clone();
                head.join(&cv);
                log.push((self.stamp, head));
            }
            for (k, value) in writes {
                self.versions.entry(k.to_string()).or_default().push((self.stamp, Some(value.clone())));
            }
            cv
        }

        fn latest(&self, key: &str) -> u64 {
            self.versions.get(key).and_then(|v| v.last()).map_or(0, |(c, _)| *c)
        }
    }

    /// History h5 of §IV-A, one object per group: T1 writes x, T2 writes y, T3 reads x1 and y2 and
    /// writes y: ⟨1,0⟩, ⟨0,1⟩ and ⟨1,2⟩ in the paper's counters; with stamps 1, 2, 3: ⟨1,0⟩, ⟨0,2⟩, ⟨1,3⟩.
    #[test]
    fn the_papers_h5_vectors() {
        let mut w = World::default();
        assert_eq!(w.commit(&DepVector::zero(), &[("x", "x1".into())]), v(&[(X, 1)]));
        assert_eq!(w.commit(&DepVector::zero(), &[("y", "y2".into())]), v(&[(Y, 2)]));
        let (rx, _) = w.read("x", &[]).unwrap();
        let (ry, _) = w.read("y", &[("x".into(), rx.clone())]).unwrap();
        assert_eq!(w.commit(&snapshot_of([&rx, &ry]), &[("y", "y3".into())]), v(&[(X, 1), (Y, 3)]));
    }

    /// History h4: T_a reads y2, which depends on x1; the read of x then takes x1, never x0.
    #[test]
    fn a_read_never_misses_a_dependency() {
        let mut w = World::default();
        let x1 = w.commit(&DepVector::zero(), &[("x", "x1".into())]);
        w.commit(&x1, &[("y", "y2".into())]);
        let (ry, value) = w.read("y", &[]).unwrap();
        assert_eq!(value.as_deref(), Some("y2"));
        let (_, value) = w.read("x", &[("y".into(), ry)]).unwrap();
        assert_eq!(value.as_deref(), Some("x1"));
    }

    /// Two reads in one group, the second answered by a member that lags (so at an earlier position):
    /// the snapshot stands at the second read's position, where both are their keys' latest, so NMSI's
    /// certification sees the write the transaction missed (the first read's own position covers it).
    #[test]
    fn a_later_read_at_an_earlier_position_bounds_the_snapshot() {
        let (mut w, mut lagging) = (World::default(), World::default());
        w.commit(&DepVector::zero(), &[("xa", "xa1".into())]);
        lagging.commit(&DepVector::zero(), &[("xa", "xa1".into())]);
        w.commit(&DepVector::zero(), &[("xb", "xb2".into())]);
        let (ra, _) = w.read("xa", &[]).unwrap();
        assert_eq!(ra.position, 2);
        let (rb, value) = lagging.read("xb", &[("xa".into(), ra.clone())]).unwrap();
        assert_eq!((value, rb.position), (None, 1));
        let snapshot = snapshot_of([&ra, &rb]);
        assert!(!depends_on(&snapshot, X, w.latest("xb")), "the transaction did not see xb2: {snapshot:?}");
    }

    /// A replica that has not committed what an earlier read depends on has nothing to answer yet.
    #[test]
    fn a_lagging_replica_makes_the_read_wait() {
        let mut w = World::default();
        let x1 = w.commit(&DepVector::zero(), &[("x", "x1".into())]);
        w.commit(&x1, &[("y", "y2".into())]);
        let (ry, _) = w.read("y", &[]).unwrap();
        let lagging = World::default();
        assert!(lagging.read("x", &[("y".into(), ry)]).is_none());
    }

    /// Forward freshness: the newest version that fits. After reading y0, x2 (which depends on y1) does
    /// not fit and x1 does; with nothing read, x2.
    #[test]
    fn reads_take_the_newest_compatible_version() {
        let mut w = World::default();
        let (y0, _) = w.read("y", &[]).unwrap();
        w.commit(&DepVector::zero(), &[("x", "x1".into())]);
        let y1 = w.commit(&DepVector::zero(), &[("y", "y1".into())]);
        w.commit(&y1, &[("x", "x2".into())]);
        assert_eq!(w.read("x", &[]).unwrap().1.as_deref(), Some("x2"));
        assert_eq!(w.read("x", &[("y".into(), y0)]).unwrap().1.as_deref(), Some("x1"));
    }

    /// Same group: after reading xa1, a later write of xb is readable only while xa1 is still the latest
    /// xa; once xa2 overwrites it, the xb written after that is not (cases (i)–(iii)).
    #[test]
    fn same_group_reads_see_one_point_of_the_group() {
        let mut w = World::default();
        w.commit(&DepVector::zero(), &[("xa", "xa1".into())]);
        let (ra, _) = w.read("xa", &[]).unwrap();
        w.commit(&DepVector::zero(), &[("xb", "xb2".into())]);
        assert_eq!(w.read("xb", &[("xa".into(), ra.clone())]).unwrap().1.as_deref(), Some("xb2"));
        w.commit(&DepVector::zero(), &[("xa", "xa3".into())]);
        w.commit(&DepVector::zero(), &[("xb", "xb4".into())]);
        assert_eq!(w.read("xb", &[("xa".into(), ra)]).unwrap().1.as_deref(), Some("xb2"));
    }

    /// Certification: a transaction that read x1 and writes x commits unless x was overwritten since.
    #[test]
    fn certification_refuses_a_lost_update() {
        let mut w = World::default();
        w.commit(&DepVector::zero(), &[("x", "x1".into())]);
        let (rx, _) = w.read("x", &[]).unwrap();
        let snapshot = snapshot_of([&rx]);
        assert!(depends_on(&snapshot, X, w.latest("x")));
        w.commit(&DepVector::zero(), &[("x", "x2".into())]);
        assert!(!depends_on(&snapshot, X, w.latest("x")));
    }

    #[test]
    fn vectors_are_sparse_on_the_wire() {
        assert_eq!(DepVector::zero().wire_bytes(), 1);
        assert!(v(&[(X, 1), (7, 300)]).wire_bytes() < 8);
        let mut w = v(&[(X, 5)]);
        w.set(X, 0);
        assert_eq!(w, DepVector::zero());
    }

    /// A model of Jessy's termination on these rules, every group applying at once: transactions interleave
    /// their reads (each by [`choose`]) and commits (certified by [`depends_on`] at every written group,
    /// versions stamped by [`commit_vector`]) in a random order. Its histories must pass the checker's
    /// `nmsi`; without certification (lost updates) or without the read rule (always the newest version:
    /// read skew) some seed must fail it, so the test can tell.
    #[test]
    fn a_model_of_jessy_on_these_rules_passes_the_nmsi_checker() {
        let verdicts = |certify: bool, read_rule: bool| {
            (0..60).map(move |seed| {
                snowline_checker::check(&model_history(seed, certify, read_rule), snowline_checker::Level::Nmsi).ok
            })
        };
        assert!(verdicts(true, true).all(|ok| ok), "a model history failed nmsi");
        assert!(verdicts(false, true).any(|ok| !ok), "no lost update without certification");
        assert!(verdicts(true, false).any(|ok| !ok), "no read skew without the read rule");
    }

    fn model_history(seed: u64, certify: bool, read_rule: bool) -> Vec<snowline_core::history::HistoryEvent> {
        use rand::{Rng, SeedableRng};
        use snowline_core::history::{HistoryOp, HistoryRecorder, OpKind};
        use snowline_core::{AbortCause, OpError};
        struct Txn {
            slot: usize,
            keys: Vec<String>,
            writes: usize,
            read: Vec<(String, ReadAt)>,
            ops: Vec<HistoryOp>,
        }
        let mut rng = rand::rngs::SmallRng::seed_from_u64(seed);
        let mut w = World::default();
        let mut history = HistoryRecorder::new();
        let mut open: Vec<Txn> = Vec::new();
        let (mut time, mut started) = (0u64, 0u32);
        while started < 40 || !open.is_empty() {
            time += 1;
            if started < 40 && (open.is_empty() || open.len() < 4 && rng.random_bool(0.5)) {
                started += 1;
                let process = history.new_process();
                let slot = history.invoke_txn(process, 0, time);
                let keys = (0..rng.random_range(1..=3)).map(|_| format!("k{}", rng.random_range(0..6))).collect();
                let writes = if rng.random_bool(0.5) { 1 } else { 0 };
                open.push(Txn { slot, keys, writes, read: Vec::new(), ops: Vec::new() });
                continue;
            }
            let i = rng.random_range(0..open.len());
            let t = &mut open[i];
            if t.read.len() < t.keys.len() {
                let key = t.keys[t.read.len()].clone();
                let (at, value) = if read_rule {
                    w.read(&key, &t.read).expect("every group is up to date in the model")
                } else {
                    w.read(&key, &[]).expect("the newest version")
                };
                t.ops.push(HistoryOp(OpKind::Read, key.clone().into(), value.map(Into::into)));
                t.read.push((key, at));
                continue;
            }
            let t = open.swap_remove(i);
            let snapshot = snapshot_of(t.read.iter().map(|(_, r)| r));
            let written: Vec<&String> = t.keys.iter().take(t.writes).collect();
            let mut ops = t.ops;
            let result = if written.is_empty() {
                Ok(None)
            } else if certify && !written.iter().all(|k| depends_on(&snapshot, group_of(k), w.latest(k))) {
                Err(OpError::aborted(AbortCause::Certification, "a concurrent write committed first"))
            } else {
                let writes: Vec<(&str, String)> =
                    written.iter().map(|k| (k.as_str(), format!("t{}-{k}", t.slot))).collect();
                w.commit(&snapshot, &writes);
                for (k, value) in writes {
                    ops.push(HistoryOp(OpKind::Write, k.into(), Some(value.into())));
                }
                Ok(None)
            };
            history.complete_txn(t.slot, ops, &result, time);
        }
        history.events
    }
}
