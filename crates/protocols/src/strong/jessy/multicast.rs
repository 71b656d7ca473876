//! Termination by atomic multicast: delivery into `Q`, certification, votes, commits applied in order.

use super::criteria::voters;
use super::group::GroupData;
use super::server::Engine;
use super::{Criterion, Cx, JessyMsg, JessyServer, MAX_EARLY_VOTES, MAX_VOTES_PER_ANSWER, TxPayload};
use crate::components::multicast::{McastEvent, McastId};
use crate::strong::dependence::DepVector;
use serde::{Deserialize, Serialize};
use snowline_core::{Key, PartitionId, ServerId};
use std::collections::{BTreeMap, BTreeSet};

/// A delivered update transaction not applied yet (an element of `Q`).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(super) struct Queued {
    pub(super) id: McastId,
    pub(super) stamp: u64,
    dest: Vec<PartitionId>,
    pub(super) tx: TxPayload,
    /// Votes known, by group (this group's own once cast).
    pub(super) votes: BTreeMap<PartitionId, bool>,
    pub(super) outcome: Option<bool>,
}

impl<C: Criterion> JessyServer<C> {
    pub(super) fn handle(&mut self, cx: &mut Cx<'_, C>, events: Vec<McastEvent>) {
        for event in events {
            match event {
                McastEvent::Deliver { msg, ts, .. } => {
                    cx.charge(1);
                    // Members deliver only what passed `check_submit`; anything else is skipped.
                    let Ok(tx) = postcard::from_bytes::<TxPayload>(&msg.payload) else { continue };
                    let votes = self.early_votes.remove(&msg.id).unwrap_or_default();
                    self.data.queue.push_back(Queued {
                        id: msg.id,
                        stamp: ts,
                        dest: msg.dest,
                        tx,
                        votes,
                        outcome: None,
                    });
                }
                McastEvent::Restore { data } => {
                    if let Ok(d) = postcard::from_bytes::<GroupData>(&data) {
                        self.data = d;
                    }
                }
                McastEvent::Leader { .. } => {}
            }
        }
        self.progress(cx);
        if let Engine::Multicast(member) = &mut self.engine
            && member.wants_compaction()
        {
            let state = postcard::to_stdvec(&self.data).expect("the group's data serializes");
            member.compact(cx, state);
        }
    }

    /// Votes, decides and applies what it can, in queue order (Algorithm 2 `vote`, `commit`, `abort`).
    pub(super) fn progress(&mut self, cx: &mut Cx<'_, C>) {
        let g = self.id.partition;
        let mut applied: Vec<(u64, DepVector)> = Vec::new();
        loop {
            let mut changed = false;
            // Vote on every transaction no earlier undecided one write-conflicts with here.
            let mut undecided_keys: BTreeSet<Key> = BTreeSet::new();
            // Stamps of writes decided to commit but not applied yet, per key.
            let mut pending_writes: BTreeMap<Key, u64> = BTreeMap::new();
            for i in 0..self.data.queue.len() {
                let q = &self.data.queue[i];
                let mine: Vec<Key> = self.data.writes_here(&self.topology, &q.tx).cloned().collect();
                let read_here: Vec<&(Key, u64)> =
                    q.tx.reads.iter().filter(|(k, _)| self.topology.partition_of(k) == g).collect();
                let blocked = mine.iter().chain(read_here.iter().map(|(k, _)| k)).any(|k| undecided_keys.contains(k));
                let voters = voters(&self.topology, &q.tx);
                if !q.votes.contains_key(&g) && !voters.contains(&g) {
                    // Delivered here only to be ordered (non-genuine): acknowledge to the coordinator.
                    let (id, stamp) = (q.id, q.stamp);
                    self.data.queue[i].votes.insert(g, true);
                    cx.send(id.origin, JessyMsg::Vote { id, yes: true, stamp });
                    self.waiting_since.insert(id, cx.now_ns());
                    changed = true;
                } else if !q.votes.contains_key(&g) && !blocked {
                    let last = |k: &Key| pending_writes.get(k).copied().unwrap_or_else(|| self.data.latest_stamp(k));
                    let latest: Vec<u64> = mine.iter().map(last).collect();
                    let reads: Vec<(u64, u64)> = read_here.iter().map(|(k, read)| (*read, last(k))).collect();
                    let yes = C::certify(&q.tx.snapshot, g, &latest, &reads);
                    let (id, stamp, dest) = (q.id, q.stamp, q.dest.clone());
                    self.data.queue[i].votes.insert(g, yes);
                    self.cast_vote(cx, id, yes, stamp, &dest);
                    self.waiting_since.insert(id, cx.now_ns());
                    changed = true;
                }
                let q = &mut self.data.queue[i];
                if q.outcome.is_none() && voters.iter().all(|d| q.votes.contains_key(d)) {
                    q.outcome = Some(voters.iter().all(|d| q.votes.get(d) == Some(&true)));
                    changed = true;
                }
                match q.outcome {
                    None => undecided_keys.extend(mine),
                    Some(true) => pending_writes.extend(mine.into_iter().map(|k| (k, q.stamp))),
                    Some(false) => {}
                }
            }
            // Apply, in delivery order, what is decided.
            while let Some(q) = self.data.queue.front() {
                let Some(commit) = q.outcome else { break };
                let q = self.data.queue.pop_front().expect("front");
                self.waiting_since.remove(&q.id);
                if let Some(&yes) = q.votes.get(&g) {
                    self.data.cast.insert(q.id, (yes, q.stamp, q.dest.clone()));
                    self.data.cast_order.push_back(q.id);
                }
                if commit {
                    // Every destination group orders the transaction (its heads record it): the groups it
                    // writes, and those that certified its reads or only order it.
                    cx.charge(1);
                    applied.push(self.data.apply(&self.topology, q.stamp, q.tx, &q.dest));
                }
                changed = true;
            }
            if !changed {
                break;
            }
        }
        self.applied(cx, applied);
    }

    /// Sends this group's vote to the other written groups' members and to the coordinator.
    fn cast_vote(&self, cx: &mut Cx<'_, C>, id: McastId, yes: bool, stamp: u64, dest: &[PartitionId]) {
        for &d in dest.iter().filter(|&&d| d != self.id.partition) {
            for s in self.topology.group(d) {
                cx.send(s, JessyMsg::Vote { id, yes, stamp });
            }
        }
        cx.send(id.origin, JessyMsg::Vote { id, yes, stamp });
    }

    /// Records a vote of `from`'s group (the caller then calls `progress`).
    pub(super) fn record_vote(&mut self, from: ServerId, id: McastId, yes: bool) {
        if let Some(q) = self.data.queue.iter_mut().find(|q| q.id == id) {
            if q.dest.contains(&from.partition) {
                q.votes.entry(from.partition).or_insert(yes);
            }
        } else if !self.data.cast.contains_key(&id)
            && matches!(&self.engine, Engine::Multicast(m) if !m.is_delivered(&id))
        {
            // Not delivered here yet: keep it (bounded) for when it is.
            if self.early_votes.len() < MAX_EARLY_VOTES || self.early_votes.contains_key(&id) {
                self.early_votes.entry(id).or_default().entry(from.partition).or_insert(yes);
            }
        }
    }

    /// This group's votes on `id` and on the later transactions it shares with group `asker`.
    pub(super) fn votes_from(&self, id: &McastId, asker: PartitionId) -> Vec<(McastId, bool, u64)> {
        let g = self.id.partition;
        let applied = self.data.cast_order.iter().position(|x| x == id);
        let in_queue = self.data.queue.iter().position(|q| q.id == *id);
        if applied.is_none() && in_queue.is_none() {
            return Vec::new();
        }
        let from_cast =
            self.data.cast_order.iter().skip(applied.unwrap_or(self.data.cast_order.len())).filter_map(|x| {
                let (yes, stamp, dest) = self.data.cast.get(x)?;
                dest.contains(&asker).then_some((*x, *yes, *stamp))
            });
        let from_queue = self.data.queue.iter().skip(in_queue.unwrap_or(0)).filter_map(|q| {
            let yes = q.votes.get(&g)?;
            q.dest.contains(&asker).then_some((q.id, *yes, q.stamp))
        });
        from_cast.chain(from_queue).take(MAX_VOTES_PER_ANSWER).collect()
    }
}
