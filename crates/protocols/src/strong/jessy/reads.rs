//! Reads at a member: the read rules, first reads' snapshots and propagated heads, parked reads.

use super::{
    Criterion, Cx, JessyMsg, JessyServer, KEEP_REMOTE_HEADS, MAX_HEADS_PER_MESSAGE, MAX_PARKED_READS, ReadRule,
};
use crate::strong::dependence::{DepVector, ReadAt, choose};
use snowline_core::{Addr, Key, PartitionId, Value};

/// A read a replica cannot answer yet.
#[derive(Clone, Debug)]
pub(super) struct Parked {
    from: Addr,
    tag: u64,
    key: Key,
    pub(super) reads: Vec<(Key, ReadAt)>,
    pub(super) floor: DepVector,
    pub(super) since: u64,
}

impl<C: Criterion> JessyServer<C> {
    pub(super) fn on_read(
        &mut self,
        cx: &mut Cx<'_, C>,
        from: Addr,
        tag: u64,
        key: Key,
        reads: Vec<(Key, ReadAt)>,
        floor: DepVector,
    ) {
        cx.charge(1);
        let parked = Parked { from, tag, key, reads, floor, since: cx.now_ns() };
        if !self.answer_read(cx, &parked, &mut None) {
            if self.parked.len() >= MAX_PARKED_READS {
                // Full: the oldest held read gives way (its client re-sends it elsewhere).
                self.parked.remove(0);
            }
            self.parked.push(parked);
            self.arm_sweep(cx);
        }
    }

    /// Answers a read if a version its criterion allows is applied here; false if not yet. `start` caches
    /// the snapshot a first read would fix ([`JessyServer::start_snapshot`]) across the reads of one pass.
    fn answer_read(&self, cx: &mut Cx<'_, C>, read: &Parked, start: &mut Option<DepVector>) -> bool {
        // One lookup of the key's versions serves the rule and the reply.
        let versions = self.data.versions_of(&read.key);
        let Some((index, position, vector)) = self.pick(&read.key, versions, &read.reads, &read.floor, start) else {
            return false;
        };
        let Some((version, value)) = versions.get(index) else { return false };
        let skipped = u32::try_from(versions.len() - 1 - index).unwrap_or(u32::MAX);
        let at = ReadAt { group: self.id.partition, version: *version, position, vector };
        let reply = JessyMsg::ReadReply { tag: read.tag, key: read.key.clone(), value: value.clone(), at, skipped };
        cx.send(read.from, reply);
        true
    }

    /// The criterion's read rule: the version of `key` to read (its index among the group's versions of
    /// it), the position read at and the read's vector; `None` when this replica cannot answer yet.
    fn pick(
        &self,
        key: &Key,
        versions: &[(u64, Option<Value>)],
        reads: &[(Key, ReadAt)],
        floor: &DepVector,
        start: &mut Option<DepVector>,
    ) -> Option<(usize, u64, DepVector)> {
        if C::READS == ReadRule::Latest || C::READS == ReadRule::Forward && reads.is_empty() {
            // What `choose` gives without earlier reads, without its search: the newest version, at the
            // group's latest position (the version is its key's latest there).
            let (now, head) = self.data.heads.last().map_or((0, None), |(p, h)| (*p, Some(h)));
            // Without snapshot reads nothing uses the read's vector: none is shipped.
            let vector = match head {
                Some(h) if C::READS == ReadRule::Forward => h.clone(),
                _ => DepVector::zero(),
            };
            return Some((versions.len().checked_sub(1)?, now, vector));
        }
        if C::READS == ReadRule::AtStart {
            let snapshot = match reads.first() {
                // Every read of the transaction carries the one snapshot.
                Some((_, first)) => first.vector.clone(),
                None => start.get_or_insert_with(|| self.start_snapshot()).clone(),
            };
            if reads.is_empty() && !floor.le(&snapshot) {
                return None;
            }
            let position = snapshot.get(self.id.partition);
            let now = self.data.heads.last().map_or(0, |(p, _)| *p);
            if position > now {
                return None;
            }
            // The key's version at the snapshot's position (none if that was trimmed away).
            let index = versions.iter().rposition(|(v, _)| *v <= position)?;
            return Some((index, position, snapshot));
        }
        let keys: Vec<&str> = reads.iter().map(|(k, _)| &**k).collect();
        let at: Vec<ReadAt> = reads.iter().map(|(_, r)| r.clone()).collect();
        let (index, position) = choose(&self.data, key, &at, &keys)?;
        Some((index, position, self.data.head_at(position)))
    }

    pub(super) fn retry_parked(&mut self, cx: &mut Cx<'_, C>) {
        let parked = std::mem::take(&mut self.parked);
        let mut start = None;
        for p in parked {
            if !self.answer_read(cx, &p, &mut start) {
                self.parked.push(p);
            }
        }
    }

    /// The snapshot a transaction's first read fixes (`ReadRule::AtStart`). Without propagation (`si`,
    /// where every group applies every commit and heads are uniform), this group's latest head. With it
    /// (`psi`), the latest consistent cut of the heads known here: a position per group whose heads all
    /// lie within the cut, so whatever a version read depends on is in the snapshot (Walter's
    /// causally-complete site vector). Found by lowering each group's position from its latest known
    /// until every chosen head fits (the zero cut always does).
    pub(super) fn start_snapshot(&self) -> DepVector {
        let own = self.data.heads.as_slice();
        if !C::PROPAGATES {
            return own.last().map(|(_, h)| h.clone()).unwrap_or_default();
        }
        let zero = [(0, DepVector::zero())];
        let lists: Vec<(PartitionId, &[(u64, DepVector)])> = (0..self.topology.partitions)
            .map(|h| match h == self.id.partition {
                true => (h, own),
                false => (h, self.remote.get(&h).map_or(&zero[..], |l| l.as_slice())),
            })
            .collect();
        let mut at: Vec<usize> = lists.iter().map(|(_, l)| l.len().saturating_sub(1)).collect();
        let cut = |at: &[usize]| DepVector::from_entries(lists.iter().zip(at).map(|((h, l), &i)| (*h, l[i].0)));
        loop {
            let mut x = cut(&at);
            let mut changed = false;
            for (j, (h, list)) in lists.iter().enumerate() {
                while at[j] > 0 && !list[at[j]].1.le(&x) {
                    at[j] -= 1;
                    changed = true;
                }
                x.set(*h, list[at[j]].0);
            }
            if !changed {
                // The oldest kept head of a group may still not fit (after trimming): then no cut.
                return x;
            }
        }
    }

    /// Sends heads this group applied to the member of every other group with this member's index (each
    /// member of a group thus hears from its peer in every other group).
    pub(super) fn propagate(&self, cx: &mut Cx<'_, C>, heads: Vec<(u64, DepVector)>) {
        let Some(index) = self.topology.member_index(self.id) else { return };
        for chunk in heads.chunks(MAX_HEADS_PER_MESSAGE) {
            for h in (0..self.topology.partitions).filter(|&h| h != self.id.partition) {
                cx.send(self.topology.member(h, index), JessyMsg::Heads { heads: chunk.to_vec() });
            }
        }
    }

    /// Keeps heads another group applied (propagation), in position order.
    pub(super) fn learn_heads(&mut self, group: PartitionId, heads: Vec<(u64, DepVector)>) {
        let list = self.remote.entry(group).or_insert_with(|| vec![(0, DepVector::zero())]);
        for (position, head) in heads {
            if let Err(i) = list.binary_search_by_key(&position, |(p, _)| *p) {
                list.insert(i, (position, head));
            }
        }
        if list.len() > KEEP_REMOTE_HEADS + 1 {
            let excess = list.len() - KEEP_REMOTE_HEADS - 1;
            list.drain(1..1 + excess);
        }
    }
}
