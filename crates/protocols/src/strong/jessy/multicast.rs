//! Termination by atomic multicast: delivery into `Q`, certification, votes, commits applied in order.

use super::criteria::{is_voter, voter_groups};
use super::group::GroupData;
use super::server::Engine;
use super::{Criterion, Cx, JessyMsg, JessyServer, MAX_EARLY_VOTES, MAX_VOTES_PER_ANSWER, TxPayload};
use crate::components::multicast::{McastEvent, McastId};
use crate::strong::dependence::DepVector;
use serde::{Deserialize, Serialize};
use snowline_core::{Key, PartitionId, ServerId};
use std::collections::BTreeMap;

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
    ///
    /// Runs on every delivery and vote, over the whole queue: it keeps its per-pass sets as short vectors
    /// (a queue holds the few transactions in flight) and reads each transaction's groups off its keys,
    /// without building sets per element (that allocation was most of this function's cost under `si`,
    /// where every update is queued at every group).
    pub(super) fn progress(&mut self, cx: &mut Cx<'_, C>) {
        let g = self.id.partition;
        let mut applied: Vec<(u64, DepVector)> = Vec::new();
        // Written keys of transactions not decided yet, and stamps of writes decided to commit but not
        // applied yet (the last pushed for a key is its latest), both per pass.
        let mut undecided_keys: Vec<Key> = Vec::new();
        let mut pending_writes: Vec<(Key, u64)> = Vec::new();
        loop {
            let mut changed = false;
            undecided_keys.clear();
            pending_writes.clear();
            for i in 0..self.data.queue.len() {
                let q = &self.data.queue[i];
                let here = |k: &Key| self.topology.partition_of(k) == g;
                let mut keys_here = q.tx.writes.iter().map(|(k, _)| k).chain(q.tx.reads.iter().map(|(k, _)| k));
                let blocked = keys_here.any(|k| here(k) && undecided_keys.contains(k));
                let voted = q.votes.contains_key(&g);
                if !voted && !is_voter(&self.topology, &q.tx, g) {
                    // Delivered here only to be ordered (non-genuine): acknowledge to the coordinator.
                    let (id, stamp) = (q.id, q.stamp);
                    self.data.queue[i].votes.insert(g, true);
                    cx.send(id.origin, JessyMsg::Vote { id, yes: true, stamp });
                    self.waiting_since.insert(id, cx.now_ns());
                    changed = true;
                } else if !voted && !blocked {
                    let last = |k: &Key| {
                        pending_writes
                            .iter()
                            .rev()
                            .find(|(w, _)| w == k)
                            .map_or_else(|| self.data.latest_stamp(k), |w| w.1)
                    };
                    let latest: Vec<u64> = self.data.writes_here(&self.topology, &q.tx).map(last).collect();
                    let reads: Vec<(u64, u64)> =
                        q.tx.reads.iter().filter(|(k, _)| here(k)).map(|(k, read)| (*read, last(k))).collect();
                    let yes = C::certify(&q.tx.snapshot, g, &latest, &reads);
                    let (id, stamp, dest) = (q.id, q.stamp, q.dest.clone());
                    self.data.queue[i].votes.insert(g, yes);
                    self.cast_vote(cx, id, yes, stamp, &dest);
                    self.waiting_since.insert(id, cx.now_ns());
                    changed = true;
                }
                let q = &mut self.data.queue[i];
                if q.outcome.is_none() && voter_groups(&self.topology, &q.tx).all(|d| q.votes.contains_key(&d)) {
                    q.outcome = Some(voter_groups(&self.topology, &q.tx).all(|d| q.votes.get(&d) == Some(&true)));
                    changed = true;
                }
                let q = &self.data.queue[i];
                let mine = self.data.writes_here(&self.topology, &q.tx);
                match q.outcome {
                    None => undecided_keys.extend(mine.cloned()),
                    Some(true) => pending_writes.extend(mine.map(|k| (k.clone(), q.stamp))),
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
