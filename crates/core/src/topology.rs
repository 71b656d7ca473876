//! Datacenters × partitions and the deterministic key → partition map.

use crate::ids::{DcId, PartitionId, ServerId};
use serde::{Deserialize, Serialize};

/// Every datacenter holds a full replica, split into the same `partitions` (Tomsic §4.2: "all sites follow
/// the same partitioning scheme"), so partition `p` of every datacenter stores the same keys.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Topology {
    pub dcs: u16,
    pub partitions: u16,
}

impl Topology {
    pub fn new(dcs: u16, partitions: u16) -> Self {
        assert!(dcs >= 1 && partitions >= 1, "a topology needs at least one datacenter and one partition");
        Self { dcs, partitions }
    }

    /// FNV-1a over the key's bytes: stable across runs, platforms and versions (unlike `DefaultHasher`).
    pub fn partition_of(&self, key: &str) -> PartitionId {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for b in key.as_bytes() {
            h ^= u64::from(*b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
        (h % u64::from(self.partitions)) as PartitionId
    }

    pub fn server_of(&self, dc: DcId, key: &str) -> ServerId {
        ServerId::new(dc, self.partition_of(key))
    }

    pub fn dc_ids(&self) -> impl Iterator<Item = DcId> + use<> {
        0..self.dcs
    }

    /// Whether `s` is a server of this topology.
    pub fn contains(&self, s: ServerId) -> bool {
        s.dc < self.dcs && s.partition < self.partitions
    }

    pub fn servers(&self) -> impl Iterator<Item = ServerId> + use<> {
        let partitions = self.partitions;
        (0..self.dcs).flat_map(move |dc| (0..partitions).map(move |p| ServerId::new(dc, p)))
    }

    /// The partitions of the same datacenter, other than `me`.
    pub fn local_peers(&self, me: ServerId) -> impl Iterator<Item = ServerId> + use<> {
        (0..self.partitions).filter(move |p| *p != me.partition).map(move |p| ServerId::new(me.dc, p))
    }

    /// The sibling partitions (same partition index) in the other datacenters.
    pub fn siblings(&self, me: ServerId) -> impl Iterator<Item = ServerId> + use<> {
        (0..self.dcs).filter(move |d| *d != me.dc).map(move |d| ServerId::new(d, me.partition))
    }

    /// A key that lives on `partition`, for tests and workloads: `"{prefix}{n}"` for the first `n` that hashes there.
    pub fn key_on(&self, partition: PartitionId, prefix: &str) -> String {
        (0u64..)
            .map(|n| format!("{prefix}{n}"))
            .find(|k| self.partition_of(k) == partition)
            .expect("some key hashes to every partition")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partition_hash_is_stable_and_spreads_keys() {
        let t = Topology::new(2, 4);
        // Fixed values: the map must never change between versions or data would move.
        assert_eq!(t.partition_of("k1"), t.partition_of("k1"));
        let mut counts = [0u32; 4];
        for i in 0..4000 {
            counts[t.partition_of(&format!("key{i}")) as usize] += 1;
        }
        assert!(counts.iter().all(|c| *c > 800), "uneven spread {counts:?}");
    }

    #[test]
    fn siblings_and_peers() {
        let t = Topology::new(3, 4);
        let me = ServerId::new(1, 2);
        assert_eq!(t.siblings(me).collect::<Vec<_>>(), vec![ServerId::new(0, 2), ServerId::new(2, 2)]);
        assert_eq!(t.local_peers(me).count(), 3);
        assert_eq!(t.servers().count(), 12);
        let k = t.key_on(3, "x");
        assert_eq!(t.partition_of(&k), 3);
    }
}
