//! Datacenters × partitions, the deterministic key → partition map, and the placement of each partition's
//! replica group.

use crate::ids::{DcId, PartitionId, ReplicaId, ServerId};
use serde::{Deserialize, Serialize};

/// Where a partition's replica group lives: the choice of [`Topology::placement`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Placement {
    /// Groups spread across the datacenters: member `m` of partition `p`'s group lives in datacenter
    /// `(p + m) mod dcs`, as replica `m div dcs` there (the default).
    #[default]
    Spread,
    /// Every group at a single site (NMSI §V: "Every group is replicated at a single site"): every member of
    /// partition `p`'s group lives in datacenter `p mod dcs`; member `m` is replica `m` there.
    Site,
}

impl Placement {
    pub const ALL: [Placement; 2] = [Placement::Spread, Placement::Site];

    pub fn name(self) -> &'static str {
        match self {
            Placement::Spread => "spread",
            Placement::Site => "site",
        }
    }
}

impl std::fmt::Display for Placement {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Placement {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "spread" => Ok(Placement::Spread),
            "site" => Ok(Placement::Site),
            other => Err(format!("unknown placement {other:?}; valid placements: spread, site")),
        }
    }
}

/// `partitions` partitions, each replicated by a group of `replicas` servers placed over `dcs` datacenters as
/// `placement` says.
///
/// **Spread placement** (the default). Member `m` (0 ≤ m < `replicas`) of partition `p`'s group lives in
/// datacenter `(p + m) mod dcs`, as replica `m div dcs` of that datacenter. So:
///
/// * `replicas == dcs` (the default, [`Topology::new`]) is full geo-replication with one server per partition
///   per datacenter (Tomsic §4.2: "all sites follow the same partitioning scheme"), which the causal family
///   and 2PL assume: every server is replica 0 of its datacenter;
/// * `replicas < dcs` is partial replication (Jessy): each datacenter holds some partitions, and groups start
///   at different datacenters so the load spreads;
/// * `replicas > dcs` puts several replicas of a group in one datacenter (e.g. a 3-replica Raft group in a
///   one-datacenter cluster).
///
/// **Site placement** ([`Placement::Site`], NMSI §V). The whole group of partition `p` lives in datacenter
/// `p mod dcs`: member `m` is replica `m` there. A datacenter holds the partitions congruent to it modulo
/// `dcs`, every one of them `replicas` times; clients elsewhere read remotely.
///
/// Every runtime routes through this one map: [`Topology::servers`] lists the servers in their canonical
/// order and [`Topology::index_of`] / [`Topology::server_at`] convert to and from that order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Topology {
    pub dcs: u16,
    pub partitions: u16,
    /// Servers per replica group (the replication factor).
    pub replicas: u16,
    /// Where each group's members live; absent in a serialized topology of an earlier version: spread.
    #[serde(default)]
    pub placement: Placement,
}

impl Topology {
    /// Full replication: one server per partition in every datacenter.
    pub fn new(dcs: u16, partitions: u16) -> Self {
        Self::replicated(dcs, partitions, dcs)
    }

    /// `replicas` servers per partition, spread as the type's documentation says.
    pub fn replicated(dcs: u16, partitions: u16, replicas: u16) -> Self {
        Self::placed(dcs, partitions, replicas, Placement::Spread)
    }

    /// `replicas` servers per partition, placed by `placement`.
    pub fn placed(dcs: u16, partitions: u16, replicas: u16, placement: Placement) -> Self {
        assert!(
            dcs >= 1 && partitions >= 1 && replicas >= 1,
            "a topology needs at least one datacenter, one partition and one replica"
        );
        Self { dcs, partitions, replicas, placement }
    }

    /// The datacenter that holds every member of `partition`'s group under site placement.
    fn site_of(&self, partition: PartitionId) -> DcId {
        (u32::from(partition) % u32::from(self.dcs)) as DcId
    }

    /// Whether this is full replication with one server per partition per datacenter.
    pub fn one_replica_per_dc(&self) -> bool {
        self.replicas == self.dcs && (self.placement == Placement::Spread || self.dcs == 1)
    }

    /// The server that is member `member` of `partition`'s group.
    pub fn member(&self, partition: PartitionId, member: u16) -> ServerId {
        debug_assert!(member < self.replicas);
        if self.placement == Placement::Site {
            return ServerId::replica(self.site_of(partition), partition, member);
        }
        let dc = ((u32::from(partition) + u32::from(member)) % u32::from(self.dcs)) as DcId;
        ServerId::replica(dc, partition, member / self.dcs)
    }

    /// `server`'s index in its partition's group, if it is a server of this topology.
    pub fn member_index(&self, server: ServerId) -> Option<u16> {
        if server.dc >= self.dcs || server.partition >= self.partitions {
            return None;
        }
        if self.placement == Placement::Site {
            let here = server.dc == self.site_of(server.partition) && server.replica < self.replicas;
            return here.then_some(server.replica);
        }
        let dcs = u32::from(self.dcs);
        let offset = (u32::from(server.dc) + dcs - u32::from(server.partition) % dcs) % dcs;
        let m = u32::from(server.replica) * dcs + offset;
        (m < u32::from(self.replicas)).then_some(m as u16)
    }

    /// The member of `server`'s group after it, wrapping around (member 0 for a server outside the
    /// topology): where a client tries next when `server` does not answer.
    pub fn next_member(&self, server: ServerId) -> ServerId {
        let m = self.member_index(server).unwrap_or(0);
        self.member(server.partition, (m + 1) % self.replicas)
    }

    /// The replica group of `partition`, in member order.
    pub fn group(&self, partition: PartitionId) -> impl Iterator<Item = ServerId> + use<> {
        let t = *self;
        (0..t.replicas).map(move |m| t.member(partition, m))
    }

    /// How many replicas of `partition` live in `dc`.
    pub fn replicas_in(&self, dc: DcId, partition: PartitionId) -> u16 {
        if self.placement == Placement::Site {
            return if dc == self.site_of(partition) { self.replicas } else { 0 };
        }
        let dcs = u32::from(self.dcs);
        let offset = (u32::from(dc) + dcs - u32::from(partition) % dcs) % dcs;
        if offset >= u32::from(self.replicas) { 0 } else { ((u32::from(self.replicas) - 1 - offset) / dcs + 1) as u16 }
    }

    /// FNV-1a over the key's bytes: stable across runs, platforms and versions (unlike `DefaultHasher`).
    /// A *pinned* key, `{N}rest` with `N` decimal, lives at partition `N mod partitions` instead: how a
    /// workload places rows together (TPC-C's district-sharded placement keeps a district's rows on one
    /// server), in the spirit of Redis Cluster's hash tags.
    pub fn partition_of(&self, key: &str) -> PartitionId {
        if let Some(pin) = pinned_partition(key) {
            return (pin % u64::from(self.partitions)) as PartitionId;
        }
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for b in key.as_bytes() {
            h ^= u64::from(*b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
        (h % u64::from(self.partitions)) as PartitionId
    }

    /// The server holding `key` that a client in `dc` talks to: with full replication the key's partition
    /// in `dc`; with site placement the nearest member of its group ([`Topology::nearest`]).
    pub fn server_of(&self, dc: DcId, key: &str) -> ServerId {
        match self.placement {
            Placement::Spread => ServerId::new(dc, self.partition_of(key)),
            Placement::Site => self.nearest(dc, self.partition_of(key)),
        }
    }

    pub fn dc_ids(&self) -> impl Iterator<Item = DcId> + use<> {
        0..self.dcs
    }

    /// Whether `s` is a server of this topology.
    pub fn contains(&self, s: ServerId) -> bool {
        self.member_index(s).is_some()
    }

    /// Every server, in the canonical order: by datacenter, then partition, then replica.
    pub fn servers(&self) -> impl Iterator<Item = ServerId> + use<> {
        let t = *self;
        (0..t.dcs).flat_map(move |dc| {
            (0..t.partitions).flat_map(move |p| (0..t.replicas_in(dc, p)).map(move |r| ServerId::replica(dc, p, r)))
        })
    }

    /// The number of servers.
    pub fn server_count(&self) -> usize {
        usize::from(self.partitions) * usize::from(self.replicas)
    }

    /// `server`'s position in [`Topology::servers`], if it is a server of this topology. O(dcs × partitions):
    /// runtimes that need it per message build a table once.
    pub fn index_of(&self, server: ServerId) -> Option<usize> {
        self.member_index(server)?;
        if self.one_replica_per_dc() {
            return Some(usize::from(server.dc) * usize::from(self.partitions) + usize::from(server.partition));
        }
        let before_dc: usize = (0..server.dc)
            .flat_map(|dc| (0..self.partitions).map(move |p| (dc, p)))
            .map(|(dc, p)| usize::from(self.replicas_in(dc, p)))
            .sum();
        let before_p: usize = (0..server.partition).map(|p| usize::from(self.replicas_in(server.dc, p))).sum();
        Some(before_dc + before_p + usize::from(server.replica))
    }

    /// The server at position `index` of [`Topology::servers`].
    pub fn server_at(&self, index: usize) -> Option<ServerId> {
        if self.one_replica_per_dc() {
            let p = usize::from(self.partitions);
            return (index < self.server_count())
                .then(|| ServerId::new((index / p) as DcId, (index % p) as PartitionId));
        }
        self.servers().nth(index)
    }

    /// The group member of `partition` to talk to from datacenter `dc`: replica 0 there if the datacenter holds
    /// one, else the first member of the group (partial replication reads remotely).
    pub fn nearest(&self, dc: DcId, partition: PartitionId) -> ServerId {
        if self.replicas_in(dc, partition) > 0 {
            ServerId::replica(dc, partition, 0 as ReplicaId)
        } else {
            self.member(partition, 0)
        }
    }

    /// The partitions of the same datacenter, other than `me` (with site placement, only those the
    /// datacenter holds).
    pub fn local_peers(&self, me: ServerId) -> impl Iterator<Item = ServerId> + use<> {
        let t = *self;
        (0..self.partitions)
            .filter(move |p| *p != me.partition && (t.placement == Placement::Spread || t.site_of(*p) == me.dc))
            .map(move |p| ServerId::new(me.dc, p))
    }

    /// The other members of `me`'s replica group.
    pub fn group_peers(&self, me: ServerId) -> impl Iterator<Item = ServerId> + use<> {
        self.group(me.partition).filter(move |s| *s != me)
    }

    /// The sibling partitions (same partition index) in the other datacenters: none with site placement,
    /// where a partition lives in one datacenter only.
    pub fn siblings(&self, me: ServerId) -> impl Iterator<Item = ServerId> + use<> {
        let spread = self.placement == Placement::Spread;
        (0..self.dcs).filter(move |d| spread && *d != me.dc).map(move |d| ServerId::new(d, me.partition))
    }

    /// A key that lives on `partition`, for tests and workloads: `"{prefix}{n}"` for the first `n` that hashes there.
    pub fn key_on(&self, partition: PartitionId, prefix: &str) -> String {
        (0u64..)
            .map(|n| format!("{prefix}{n}"))
            .find(|k| self.partition_of(k) == partition)
            .expect("some key hashes to every partition")
    }
}

/// The `N` of a pinned key `{N}rest` (at most 18 digits, so it fits a `u64`), if `key` is one.
fn pinned_partition(key: &str) -> Option<u64> {
    let rest = key.strip_prefix('{')?;
    let end = rest.find('}')?;
    let digits = &rest[..end];
    if digits.is_empty() || digits.len() > 18 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pinned_keys_live_at_their_partition() {
        let t = Topology::new(1, 4);
        assert_eq!(t.partition_of("{2}district/7"), 2);
        assert_eq!(t.partition_of("{6}x"), 2);
        // Not pins: hashed like any key.
        for k in ["{}x", "{a1}x", "{1", "x{1}", "{1234567890123456789}x"] {
            assert_eq!(t.partition_of(k), Topology::new(1, 4).partition_of(k));
            assert_eq!(pinned_partition(k), None, "{k}");
        }
    }

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

    #[test]
    fn placement_covers_every_member_once_and_indexes_round_trip() {
        for dcs in 1..=4u16 {
            for partitions in 1..=4u16 {
                for replicas in 1..=6u16 {
                    let t = Topology::replicated(dcs, partitions, replicas);
                    let all: Vec<ServerId> = t.servers().collect();
                    assert_eq!(all.len(), t.server_count(), "{t:?}");
                    for (i, s) in all.iter().enumerate() {
                        assert_eq!(t.index_of(*s), Some(i), "{t:?} {s}");
                        assert_eq!(t.server_at(i), Some(*s), "{t:?} {i}");
                        let m = t.member_index(*s).expect("member");
                        assert_eq!(t.member(s.partition, m), *s);
                    }
                    assert_eq!(t.server_at(all.len()), None);
                    for p in 0..partitions {
                        let group: Vec<ServerId> = t.group(p).collect();
                        assert_eq!(group.len(), usize::from(replicas));
                        let mut dedup = group.clone();
                        dedup.sort();
                        dedup.dedup();
                        assert_eq!(dedup.len(), group.len(), "{t:?} p{p}");
                        // Spread: datacenters' replica counts differ by at most one.
                        let counts: Vec<u16> = (0..dcs).map(|d| t.replicas_in(d, p)).collect();
                        let (lo, hi) = (counts.iter().min().unwrap(), counts.iter().max().unwrap());
                        assert!(hi - lo <= 1, "{t:?} p{p} {counts:?}");
                        assert!(t.contains(t.nearest(0, p)));
                    }
                    assert!(!t.contains(ServerId::replica(0, 0, replicas)));
                    assert!(!t.contains(ServerId::new(dcs, 0)));
                }
            }
        }
    }

    #[test]
    fn full_replication_is_one_server_per_partition_per_dc() {
        let t = Topology::new(3, 2);
        assert!(t.one_replica_per_dc());
        let all: Vec<ServerId> = t.servers().collect();
        let expected: Vec<ServerId> = (0..3).flat_map(|d| (0..2).map(move |p| ServerId::new(d, p))).collect();
        assert_eq!(all, expected);
        let partial = Topology::replicated(3, 3, 2);
        // Partition 0 on dc0 and dc1, partition 1 on dc1 and dc2, partition 2 on dc2 and dc0.
        assert_eq!(partial.group(1).collect::<Vec<_>>(), vec![ServerId::new(1, 1), ServerId::new(2, 1)]);
        assert_eq!(partial.nearest(0, 1), ServerId::new(1, 1));
        let local = Topology::replicated(1, 2, 3);
        assert_eq!(local.group(1).map(|s| s.to_string()).collect::<Vec<_>>(), ["dc0/p1", "dc0/p1/r1", "dc0/p1/r2"]);
        assert_eq!("dc0/p1/r2".parse::<ServerId>(), Ok(ServerId::replica(0, 1, 2)));
    }

    #[test]
    fn site_placement_keeps_each_group_in_one_datacenter() {
        for dcs in 1..=5u16 {
            for partitions in 1..=6u16 {
                for replicas in 1..=4u16 {
                    let t = Topology::placed(dcs, partitions, replicas, Placement::Site);
                    let all: Vec<ServerId> = t.servers().collect();
                    assert_eq!(all.len(), t.server_count(), "{t:?}");
                    let mut dedup = all.clone();
                    dedup.sort();
                    dedup.dedup();
                    assert_eq!(dedup.len(), all.len(), "{t:?}: a server listed twice");
                    for (i, s) in all.iter().enumerate() {
                        assert_eq!(t.index_of(*s), Some(i), "{t:?} {s}");
                        assert_eq!(t.server_at(i), Some(*s), "{t:?} {i}");
                        let m = t.member_index(*s).expect("member");
                        assert_eq!(t.member(s.partition, m), *s);
                        assert_eq!(m, s.replica);
                        assert!(t.contains(*s));
                        assert_eq!(t.siblings(*s).count(), 0);
                        assert!(t.local_peers(*s).all(|peer| t.contains(peer) && peer.dc == s.dc));
                    }
                    assert_eq!(t.server_at(all.len()), None);
                    for p in 0..partitions {
                        let site = p % dcs;
                        let group: Vec<ServerId> = t.group(p).collect();
                        let expected: Vec<ServerId> = (0..replicas).map(|r| ServerId::replica(site, p, r)).collect();
                        assert_eq!(group, expected, "{t:?} p{p}");
                        for d in 0..dcs {
                            assert_eq!(t.replicas_in(d, p), if d == site { replicas } else { 0 });
                            let near = t.nearest(d, p);
                            assert!(t.contains(near));
                            if d == site {
                                assert_eq!(near, ServerId::replica(d, p, 0), "a same-dc member when there is one");
                            }
                            assert!(!t.contains(ServerId::replica(d, p, replicas)));
                        }
                        let last = t.member(p, replicas - 1);
                        assert_eq!(t.next_member(last), t.member(p, 0));
                        let key = t.key_on(p, "k");
                        assert!(t.contains(t.server_of(dcs - 1, &key)));
                    }
                    assert!(!t.contains(ServerId::new(dcs, 0)));
                }
            }
        }
    }

    #[test]
    fn site_placement_of_the_nmsi_set_up() {
        // Four sites, one group of three per site: partition p is dc p's r0..r2.
        let t = Topology::placed(4, 4, 3, Placement::Site);
        assert!(!t.one_replica_per_dc());
        assert_eq!(t.group(2).map(|s| s.to_string()).collect::<Vec<_>>(), ["dc2/p2", "dc2/p2/r1", "dc2/p2/r2"]);
        assert_eq!(
            t.servers().take(4).map(|s| s.to_string()).collect::<Vec<_>>(),
            ["dc0/p0", "dc0/p0/r1", "dc0/p0/r2", "dc1/p1"]
        );
        assert_eq!(t.nearest(0, 3), ServerId::new(3, 3));
        assert_eq!(t.member_index(ServerId::new(0, 1)), None);
        // More partitions than sites: dc1 holds p1 and p5.
        let t = Topology::placed(4, 6, 2, Placement::Site);
        assert_eq!(t.local_peers(ServerId::new(1, 1)).collect::<Vec<_>>(), vec![ServerId::new(1, 5)]);
        assert_eq!("site".parse::<Placement>(), Ok(Placement::Site));
        assert!("sited".parse::<Placement>().unwrap_err().contains("spread, site"));
    }

    #[test]
    fn a_topology_without_a_placement_deserializes_as_spread() {
        let t: Topology = serde_json::from_str(r#"{"dcs":3,"partitions":2,"replicas":3}"#).unwrap();
        assert_eq!(t, Topology::new(3, 2));
        let site = Topology::placed(2, 2, 3, Placement::Site);
        let json = serde_json::to_string(&site).unwrap();
        assert!(json.contains(r#""placement":"site""#), "{json}");
        assert_eq!(serde_json::from_str::<Topology>(&json).unwrap(), site);
    }
}
