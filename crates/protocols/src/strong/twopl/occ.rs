//! Optimistic concurrency control with validation at two-phase commit (`--protocol occ`): the strictly
//! serializable baseline of Rococo's evaluation (Mu et al., OSDI 2014, §6) and of the SNOW paper's TPC-C
//! experiment (Lu et al., OSDI 2016, §6.2, Fig. 7), after Kung and Robinson (ACM TODS 1981) distributed as
//! Rococo's evaluation runs it: reads take no lock, and a commit's two-phase commit validates them.
//!
//! Everything but the concurrency control is [`super`]'s (2PL's): single-copy partitions at datacenter 0,
//! the client (read rounds, stored procedures wave by wave, one-shot requests as transactions), the
//! coordinator (a server: `Commit`, `Prepare`, `Vote`, `Decide`, `Ack`, `Outcome`, its own partition
//! through the loopback) and the commit versions (a vote proposes a time above every version its partition
//! applied; the commit version is the largest proposal). What differs is here:
//!
//! - **Reads** (`Read`, answered at once, never waiting) return each key's committed value and version and
//!   lock nothing. A read of a key that a prepared transaction is writing aborts (cause `Conflict`) rather
//!   than return a value about to be overwritten: what an answered read returns was current and not being
//!   committed over when the read ran. (Without this a read of the one partition a committed transaction's
//!   decision has not reached yet could return the old value after the writer's client had its answer.)
//! - **Prepare** validates, with no-wait locks: the participant takes a shared lock on every key the
//!   transaction read there and an exclusive one on every key it writes there, or votes no — cause
//!   `Certification` if a key read no longer has the version read (a transaction that committed since
//!   changed it), cause `Conflict` if a prepared transaction holds the key in a conflicting mode. Only
//!   prepared transactions hold locks, and they wait only for their decision, so nothing ever waits for a
//!   lock: there are no deadlocks, no wounds, and no idle transactions to sweep (a client that disappears
//!   before committing left nothing at the servers). The decision applies the writes and releases the locks.
//! - **Read-only transactions** (ROTs, and interactive transactions that commit without writes) need no
//!   two-phase commit. If one request read everything (one partition, one round), the transaction takes
//!   effect at that read, which was atomic and clean (previous point). Otherwise the client sends each
//!   partition it read a `Validate` with the versions it read there; the partition answers (`Released`)
//!   whether every such key still has that version and is not being written by a prepared transaction. One
//!   round, no locks, nothing to release.
//!
//! # Why it is strictly serializable
//!
//! Versions of a key strictly increase (a proposal exceeds every version its partition applied, and a
//! prepare of a key's writer comes after the decision of its previous writer, which raised the clock), so a
//! key that has the version a transaction read has not been written since that read.
//!
//! *Update transactions.* From its prepare at a partition until its decision is applied there, a
//! transaction holds its read keys shared and its write keys exclusively, so no conflicting transaction
//! prepares them in between, and its reads were current at the prepare. When the coordinator has every yes
//! vote, every participant holds those locks at once and every key read still has the version read: that
//! moment (its *lock point*, inside the commit's real-time interval) is where it serializes, exactly as
//! 2PL's lock point does. Conflicting transactions' lock points are ordered by their locks, so the order of
//! lock points is a serial order respecting real time.
//!
//! *Read-only transactions validated in a round.* Every read came before every `Validate` (the client sends
//! them once all reads are answered). A partition that confirms at time `v` that key `k` still has the
//! version read at time `r < v` shows that `k` did not change in `[r, v]`; so every key read was unchanged
//! from the last read to the first confirmation, an interval inside the transaction. Take a moment `m` in
//! it. An update transaction whose lock point precedes `m` and writes a key read was prepared at that key's
//! partition before `m`; at the confirmation it was either applied (its write is older than the version
//! read, which is unchanged since) or still prepared — then the key was being written and the confirmation
//! failed. One whose lock point follows `m` is applied after `m`, after the last read. So the reads are
//! exactly the state of the serial order at `m`. A single-request read-only transaction is the case
//! `m` = the read, the "not being written" check made by the read itself.
//!
//! # Choices the papers leave open
//!
//! - Abort causes: `Certification` for a read whose version changed (a committed transaction conflicts),
//!   `Conflict` for a key held by a prepared transaction (lost a no-wait lock race), `Vote` for a
//!   misdirected key, `User` for a stored procedure's own abort. The harness's retry policy reruns them.
//! - A read-write transaction's read-only participants validate and hold their shared locks until the
//!   decision: without them a read-only participant could validate, and a writer commit there, before
//!   another participant's validation (no common moment).
//! - Reads are logged by a durable host like 2PL's (they are cheap; marking them read-only would need the
//!   log positions of the versions they return).
//! - A stored procedure's wave reads its declared read keys (no locks); its writes go with the commit, and
//!   a wave that only writes needs no round.

use super::*;

/// Optimistic concurrency control: [`Control::Validation`].
pub struct Optimistic;

impl ConcurrencyControl for Optimistic {
    const NAME: &'static str = "occ";
    const CONTROL: Control = Control::Validation;
}

/// OCC with two-phase commit. See the module docs.
pub type Occ = SingleCopy<Optimistic>;

impl<C: ConcurrencyControl> TwoPlServer<C> {
    /// OCC's read: the committed values and versions, at once, unless a key is being written.
    pub(super) fn read_optimistic(&mut self, cx: &mut Cx<'_, C>, client: ClientId, txn: TxnId, keys: Vec<Key>) {
        cx.charge(keys.len() as u64);
        let result = match self.check_read(client, txn, keys.iter()) {
            Err(reason) => Err(OpError::Rejected(reason)),
            Ok(()) => match keys.iter().find(|k| self.held_against(k, Mode::Shared, txn)) {
                Some(key) => Err(OpError::Aborted(self.being_committed(key))),
                None => Ok(keys.into_iter().map(|k| self.read(k)).collect()),
            },
        };
        cx.send(client, TwoPlMsg::ReadReply { txn, result, blocked_ns: 0 });
    }

    /// OCC's prepare: validate the reads and take no-wait locks on the reads and writes, then vote.
    pub(super) fn prepare_optimistic(
        &mut self,
        cx: &mut Cx<'_, C>,
        coordinator: ServerId,
        txn: TxnId,
        age: Age,
        writes: Vec<(Key, Value)>,
        reads: Vec<(Key, Version)>,
    ) {
        if self.txns.contains_key(&txn) {
            return; // a duplicate: the vote was sent
        }
        let mut wanted: BTreeMap<Key, Mode> = reads.iter().map(|(k, _)| (k.clone(), Mode::Shared)).collect();
        wanted.extend(writes.iter().map(|(k, _)| (k.clone(), Mode::Exclusive)));
        let bound = self.over_lock_bound(txn, &wanted).map(|detail| Abort { cause: AbortCause::Vote, detail });
        if let Some(abort) = bound.map_or_else(|| self.validation(txn, &reads, &wanted).err(), Some) {
            return self.send_server(cx, coordinator, TwoPlMsg::Vote { txn, vote: Err(abort), blocked_ns: 0 });
        }
        for (key, mode) in &wanted {
            self.locks.entry(key.clone()).or_default().holders.insert(txn, *mode);
        }
        let (last_seen_ns, born_ns) = (cx.now_ns(), Self::born(&age, cx.now_ns()));
        let local = Local { age, locks: wanted, prepared: None, pending: None, last_seen_ns, born_ns };
        self.txns.insert(txn, local);
        self.vote_yes(cx, txn, coordinator, writes, 0);
    }

    /// OCC's read-only commit at one partition: are the reads still current, and none being written?
    pub(super) fn on_validate(&mut self, cx: &mut Cx<'_, C>, client: ClientId, txn: TxnId, reads: Vec<(Key, Version)>) {
        if txn.client != client {
            return; // another client's transaction
        }
        cx.charge(reads.len() as u64);
        let shared = reads.iter().map(|(k, _)| (k.clone(), Mode::Shared)).collect();
        let result = self.validation(txn, &reads, &shared);
        cx.send(client, TwoPlMsg::Released { txn, result });
    }

    /// Whether `txn` may hold `wanted` here now, having read `reads`: every key here, every read's version
    /// still current, and no other (prepared) transaction holding a key in a conflicting mode.
    fn validation(&self, txn: TxnId, reads: &[(Key, Version)], wanted: &BTreeMap<Key, Mode>) -> Result<(), Abort> {
        if let Some(reason) = self.misplaced(wanted.keys()) {
            return Err(Abort { cause: AbortCause::Vote, detail: reason });
        }
        for (key, read) in reads {
            let now = self.store.get(key).map_or(Version::INITIAL, |(_, v)| *v);
            if now != *read {
                return Err(Abort {
                    cause: AbortCause::Certification,
                    detail: format!(
                        "{key:?} changed since it was read (version {} read, {} committed at {})",
                        read.time, now.time, self.id
                    ),
                });
            }
        }
        match wanted.iter().find(|(k, m)| self.held_against(k, **m, txn)) {
            Some((key, _)) => Err(self.being_committed(key)),
            None => Ok(()),
        }
    }

    /// Whether a transaction other than `txn` holds `key` in a mode that conflicts with `mode` (under OCC:
    /// a prepared transaction).
    fn held_against(&self, key: &Key, mode: Mode, txn: TxnId) -> bool {
        self.locks.get(key).is_some_and(|l| l.holders.iter().any(|(h, m)| *h != txn && conflicts(mode, *m)))
    }

    fn being_committed(&self, key: &Key) -> Abort {
        Abort {
            cause: AbortCause::Conflict,
            detail: format!("{key:?} is locked by a transaction committing at {}", self.id),
        }
    }
}
