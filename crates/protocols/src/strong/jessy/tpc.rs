//! Termination by two-phase commit (`--termination 2pc`): certifying prepares, commits in stamp order.

use super::criteria::{destinations, voters};
use super::group::GroupData;
use super::server::Engine;
use super::{Criterion, Cx, JessyServer, TxPayload};
use crate::components::multicast::McastId;
use crate::components::twopc::{TpcHost, TpcMember};
use crate::strong::dependence::DepVector;
use serde::{Deserialize, Serialize};
use snowline_core::{AbortCause, Key, PartitionId, Topology};
use std::collections::BTreeMap;
use std::marker::PhantomData;

/// A group's state under two-phase commit: its clock (the largest stamp it proposed or applied) and the
/// transactions prepared or decided here and not applied yet.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub(super) struct TpcState {
    clock: u64,
    /// Prepared here, undecided: each with the timestamp this group proposed.
    prepared: BTreeMap<McastId, (u64, TxPayload)>,
    /// Decided to commit, by final stamp, waiting until no prepared transaction may end below it.
    committed: BTreeMap<u64, (McastId, TxPayload)>,
}

/// A group's verdict under two-phase commit, carried as its part of the transaction: every member of every
/// group decides from all the parts (so a no travels with its cause to the client).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
enum TpcVerdict {
    /// Prepared, with the timestamp this group proposes.
    Yes { ts: u64 },
    /// Certification failed against a committed transaction.
    Certification,
    /// A prepared, undecided transaction here holds a conflicting key (no-wait: vote no).
    Locked,
}

/// A transaction's outcome from every group's part (its verdict): committed at the largest proposed stamp
/// if every group prepared it, else aborted for the first cause found (certification before a lock). Every
/// member and the client decide alike from the same parts.
pub(super) fn tpc_outcome(parts: &[(PartitionId, Vec<u8>)]) -> Result<u64, AbortCause> {
    let verdicts: Vec<TpcVerdict> = parts.iter().filter_map(|(_, b)| postcard::from_bytes(b).ok()).collect();
    if verdicts.contains(&TpcVerdict::Certification) {
        return Err(AbortCause::Certification);
    }
    let stamps: Vec<u64> =
        verdicts.iter().filter_map(|v| if let TpcVerdict::Yes { ts } = v { Some(*ts) } else { None }).collect();
    match stamps.iter().max() {
        Some(&stamp) if stamps.len() == parts.len() => Ok(stamp),
        _ => Err(AbortCause::Vote),
    }
}

/// The smallest stamp above `floor` in group `g`'s residue class (stamps are unique across groups, as
/// the multicast's are).
fn next_stamp(floor: u64, topology: &Topology, g: PartitionId) -> u64 {
    let n = u64::from(topology.partitions);
    (floor / n + 1) * n + u64::from(g)
}

impl GroupData {
    /// Two-phase commit's prepare of `tx` here: a group that holds none of its certified keys only orders
    /// it; the others refuse it if a prepared transaction holds a conflicting key (no-wait locking: a
    /// write conflicts with prepared writes and certified reads of its key, a certified read with prepared
    /// writes), then certify it as the multicast termination does. A yes proposes a stamp above the
    /// group's clock and above the snapshot's entry here (so the transaction follows what it depends on).
    fn tpc_prepare<C: Criterion>(&mut self, topology: &Topology, id: McastId, tx: TxPayload) -> TpcVerdict {
        let g = self.group;
        if C::CERTIFIES && voters(topology, &tx).contains(&g) {
            let here = |k: &Key| topology.partition_of(k) == g;
            let writes: Vec<&Key> = tx.writes.iter().map(|(k, _)| k).filter(|k| here(k)).collect();
            let reads: Vec<&(Key, u64)> = tx.reads.iter().filter(|(k, _)| here(k)).collect();
            let locked = self.tpc.prepared.values().any(|(_, p)| {
                let p_writes = || p.writes.iter().map(|(k, _)| k);
                p_writes().any(|k| writes.contains(&k) || reads.iter().any(|(r, _)| r == k))
                    || p.reads.iter().any(|(k, _)| writes.contains(&k))
            });
            if locked {
                return TpcVerdict::Locked;
            }
            let last = |k: &Key| {
                let pending = self.tpc.committed.iter().rev().find(|(_, (_, t))| t.writes.iter().any(|(w, _)| w == k));
                pending.map(|(s, _)| *s).unwrap_or_else(|| self.latest_stamp(k))
            };
            let latest: Vec<u64> = writes.iter().map(|k| last(k)).collect();
            let read_at: Vec<(u64, u64)> = reads.iter().map(|(k, read)| (*read, last(k))).collect();
            if !C::certify(&tx.snapshot, g, &latest, &read_at) {
                return TpcVerdict::Certification;
            }
        }
        let ts = next_stamp(self.tpc.clock.max(tx.snapshot.get(g)), topology, g);
        self.tpc.clock = ts;
        self.tpc.prepared.insert(id, (ts, tx));
        TpcVerdict::Yes { ts }
    }

    /// Two-phase commit's decision on `id`: it commits if every group's part is a yes, at the largest
    /// proposed stamp; then every committed transaction no prepared one may precede is applied, in stamp
    /// order (each group applies in stamp order, as under the multicast). Returns what was applied.
    fn tpc_decide<C: Criterion>(
        &mut self,
        topology: &Topology,
        id: McastId,
        parts: Option<&[(PartitionId, Vec<u8>)]>,
    ) -> Vec<(u64, DepVector)> {
        if let Some((_, tx)) = self.tpc.prepared.remove(&id)
            && let Some(Ok(stamp)) = parts.map(tpc_outcome)
        {
            self.tpc.clock = self.tpc.clock.max(stamp);
            self.tpc.committed.insert(stamp, (id, tx));
        }
        let mut applied = Vec::new();
        while let Some((&stamp, _)) = self.tpc.committed.first_key_value() {
            if self.tpc.prepared.values().any(|(ts, _)| *ts < stamp) {
                break;
            }
            let (_, tx) = self.tpc.committed.remove(&stamp).expect("first");
            let dest: Vec<PartitionId> = destinations::<C>(topology, &tx).into_iter().collect();
            applied.push(self.apply(topology, stamp, tx, &dest));
        }
        applied
    }
}

/// The group's data as two-phase commit's host: prepare and decide change it while the component applies
/// its log, and what they apply is collected for the member to act on afterwards.
struct TpcView<'a, C> {
    data: &'a mut GroupData,
    topology: &'a Topology,
    applied: Vec<(u64, DepVector)>,
    criterion: PhantomData<C>,
}

impl<C: Criterion> TpcHost for TpcView<'_, C> {
    fn prepare(&mut self, id: McastId, payload: &[u8]) -> Option<Vec<u8>> {
        // Members prepare only what passed `check_tx`; anything else is refused.
        let tx = postcard::from_bytes::<TxPayload>(payload).ok()?;
        let verdict = self.data.tpc_prepare::<C>(self.topology, id, tx);
        Some(postcard::to_stdvec(&verdict).expect("a verdict serializes"))
    }

    fn decide(&mut self, id: McastId, commit: Option<&[(PartitionId, Vec<u8>)]>) {
        let applied = self.data.tpc_decide::<C>(self.topology, id, commit);
        self.applied.extend(applied);
    }

    fn snapshot(&self) -> Vec<u8> {
        postcard::to_stdvec(&*self.data).expect("the group's data serializes")
    }

    fn restore(&mut self, data: &[u8]) {
        if let Ok(d) = postcard::from_bytes::<GroupData>(data) {
            *self.data = d;
        }
    }
}

impl<C: Criterion> JessyServer<C> {
    /// Runs `f` on the two-phase commit member with the group's data as its host, then acts on what was
    /// applied. Nothing under the multicast.
    pub(super) fn with_tpc<R>(
        &mut self,
        cx: &mut Cx<'_, C>,
        f: impl FnOnce(&mut TpcMember, &mut Cx<'_, C>, &mut dyn TpcHost) -> R,
    ) -> Option<R> {
        let Engine::TwoPc(member) = &mut self.engine else { return None };
        let mut view = TpcView::<C> {
            data: &mut self.data,
            topology: &self.topology,
            applied: Vec::new(),
            criterion: PhantomData,
        };
        let r = f(member, cx, &mut view);
        let applied = view.applied;
        cx.charge(applied.len() as u64);
        self.applied(cx, applied);
        Some(r)
    }
}
