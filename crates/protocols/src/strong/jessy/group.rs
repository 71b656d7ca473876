//! A group's data as its members hold it ([`GroupData`]): versions, heads, the queue `Q` and the votes cast.

use super::multicast::Queued;
use super::tpc::TpcState;
use super::{KEEP_HEADS, KEEP_VOTES, TxPayload};
use crate::components::multicast::McastId;
use crate::strong::dependence::{DepVector, GroupView, commit_vector};
use serde::{Deserialize, Serialize};
use snowline_core::{Key, PartitionId, Topology, Value};
use std::collections::{BTreeMap, HashMap, VecDeque};

/// A hasher without a random seed (SipHash with zero keys): the same inputs give the same layout in every run.
type FixedHasher = std::hash::BuildHasherDefault<std::hash::DefaultHasher>;

/// A group's data as its members hold it: versions, heads, the queue and the votes cast.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(super) struct GroupData {
    pub(super) group: PartitionId,
    /// `(stamp, head after it)` for every applied update transaction, from the oldest kept.
    pub(super) heads: Vec<(u64, DepVector)>,
    /// Per key written here: its versions, oldest first, starting with the initial one `(0, None)` until
    /// old versions are dropped. Hashed, not ordered: every read looks its key up, and a B-tree's search
    /// compares the key with a dozen others behind as many pointers (it was most of a read's cost); nothing
    /// iterates it in an order that matters, and the fixed hasher keeps runs reproducible.
    pub(super) versions: HashMap<Key, Vec<(u64, Option<Value>)>, FixedHasher>,
    pub(super) queue: VecDeque<Queued>,
    /// This group's votes on applied transactions: id → (yes, stamp, destination groups), with their
    /// order (the apply order) for trimming and for answering queries.
    pub(super) cast: BTreeMap<McastId, (bool, u64, Vec<PartitionId>)>,
    pub(super) cast_order: VecDeque<McastId>,
    /// Under two-phase commit: the group's state there.
    pub(super) tpc: TpcState,
}

impl GroupView for GroupData {
    fn group(&self) -> PartitionId {
        self.group
    }

    fn heads(&self) -> &[(u64, DepVector)] {
        &self.heads
    }

    fn versions(&self, key: &str) -> Vec<u64> {
        match self.versions.get(key) {
            Some(v) => v.iter().map(|(s, _)| *s).collect(),
            None => vec![0],
        }
    }
}

impl GroupData {
    pub(super) fn new(group: PartitionId) -> Self {
        Self {
            group,
            heads: vec![(0, DepVector::zero())],
            versions: HashMap::default(),
            queue: VecDeque::new(),
            cast: BTreeMap::new(),
            cast_order: VecDeque::new(),
            tpc: TpcState::default(),
        }
    }

    /// Applies a committed transaction with stamp `stamp` delivered to groups `dest`: its writes here are
    /// new versions, and the group's order records it (a new head). Returns the new position and head.
    pub(super) fn apply(
        &mut self,
        topology: &Topology,
        stamp: u64,
        tx: TxPayload,
        dest: &[PartitionId],
    ) -> (u64, DepVector) {
        let g = self.group;
        let cv = commit_vector(&tx.snapshot, dest.iter().copied(), stamp);
        for (k, v) in tx.writes.into_iter().filter(|(k, _)| topology.partition_of(k) == g) {
            self.versions.entry(k).or_insert_with(|| vec![(0, None)]).push((stamp, Some(v)));
        }
        let mut head = self.heads.last().map(|(_, h)| h.clone()).unwrap_or_default();
        head.join(&cv);
        self.heads.push((stamp, head.clone()));
        (stamp, head)
    }

    /// The versions of `key`, oldest first (as [`GroupView::versions`] lists their stamps).
    pub(super) fn versions_of(&self, key: &str) -> &[(u64, Option<Value>)] {
        static INITIAL: [(u64, Option<Value>); 1] = [(0, None)];
        self.versions.get(key).map_or(&INITIAL[..], |v| &v[..])
    }

    /// The stamp of `key`'s last applied version (0: the initial one), without listing them all.
    pub(super) fn latest_stamp(&self, key: &str) -> u64 {
        self.versions_of(key).last().map_or(0, |(s, _)| *s)
    }

    pub(super) fn head_at(&self, position: u64) -> DepVector {
        let i = self.heads.partition_point(|(s, _)| *s <= position);
        self.heads.get(i.wrapping_sub(1)).map(|(_, h)| h.clone()).unwrap_or_default()
    }

    /// This group's vote on `id`, if cast.
    pub(super) fn vote_of(&self, id: &McastId) -> Option<(bool, u64)> {
        if let Some((yes, stamp, _)) = self.cast.get(id) {
            return Some((*yes, *stamp));
        }
        self.queue.iter().find(|q| q.id == *id).and_then(|q| q.votes.get(&self.group).map(|&yes| (yes, q.stamp)))
    }

    pub(super) fn writes_here<'a>(
        &self,
        topology: &'a Topology,
        tx: &'a TxPayload,
    ) -> impl Iterator<Item = &'a Key> + 'a {
        let g = self.group;
        tx.writes.iter().map(|(k, _)| k).filter(move |k| topology.partition_of(k) == g)
    }

    /// Drops heads and versions no read can be taken at any more.
    pub(super) fn trim(&mut self) {
        if self.heads.len() > 2 * KEEP_HEADS {
            self.heads.drain(..self.heads.len() - KEEP_HEADS);
            let oldest = self.heads[0].0;
            for versions in self.versions.values_mut() {
                // A version superseded at or before the oldest kept position can never be read again.
                let superseded = versions.iter().skip(1).take_while(|(s, _)| *s <= oldest).count();
                versions.drain(..superseded);
            }
        }
        while self.cast_order.len() > KEEP_VOTES {
            if let Some(old) = self.cast_order.pop_front() {
                self.cast.remove(&old);
            }
        }
    }
}
