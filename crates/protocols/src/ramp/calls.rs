//! Stored procedures on RAMP (`Request::Call`): the coordination-avoidance paper's §6 execution, where a
//! transaction coordinates only where an invariant demands it.
//!
//! - **Distributed, coordination-free** (the default): the client runs the procedure's waves against
//!   versions it reads with RAMP's first round (each wave fetches only the keys it has not read yet), then
//!   repairs every fractured read across all waves with RAMP's second round (the variant's metadata over
//!   everything read so far) and runs the procedure again on the repaired versions, until a pass reads
//!   nothing new; its writes (puts and merges, [`snowline_core::merge`]) then go out as one RAMP write
//!   transaction, atomically visible. So the whole call reads atomically (`ra`), not just each wave.
//! - **A deferred sequential id** ([`snowline_core::procedure::DeferredId`], New-Order's `D_NEXT_O_ID`):
//!   rides on the commit message to the counter's partition, where the server takes the id in one atomic
//!   increment and writes the mapping with the transaction; the reply names the id. The counter's partition
//!   must be one the transaction writes (New-Order's order rows live with their district).
//! - **Single-partition** ([`snowline_core::procedure::Procedure::home`], TPC-C's Delivery): the whole call is
//!   sent to the home key's partition ([`RampMsg::RunLocal`]) and runs there serially in one step.
//!
//! A call whose repair keeps finding newer versions ([`MAX_PASSES`]) aborts with cause `conflict`, as does
//! one whose reads took half the collection delay (its exact second-round versions may be gone); the
//! harness retries it like any conflict.

use super::{FirstRead, Found, Get, LocalEffects, Metadata, RampMsg, Ts, client::RampClient, wire_bytes};
use snowline_core::procedure::{self, DeferredId};
use snowline_core::{
    AbortCause, Ctx, Key, OpError, OpId, OpMetrics, PartitionId, ReadResult, Reply, ServerId, Value, Version,
};
use std::collections::{BTreeMap, BTreeSet};

type Cx<'a, M> = Ctx<'a, super::Ramp<M>>;

/// Passes over the procedure (each after a round of reads) before a call gives up as a conflict.
pub const MAX_PASSES: u32 = 16;

/// A call in flight.
#[derive(Debug)]
pub(super) struct CallOp<Meta> {
    procedure: String,
    args: Vec<Value>,
    /// Every key read so far and the version read (`None`: the initial state).
    cache: BTreeMap<Key, Option<Found<Meta>>>,
    /// The cache changed since the last repair round (a repair that changes nothing settles the reads).
    dirty: bool,
    passes: u32,
    started_ns: u64,
    phase: Phase,
    rounds: u32,
    versions_returned: u32,
    metadata_bytes: u64,
}

#[derive(Debug)]
enum Phase {
    /// A round of reads: the partitions awaited, with the keys asked of each; whether it repairs.
    Reading { round: u32, repair: bool, slots: BTreeMap<PartitionId, Vec<Key>> },
    /// The writes: prepared, then committed everywhere.
    Writing(Box<Writing>),
    /// Sent to one partition whole.
    Local,
}

#[derive(Debug)]
struct Writing {
    ts: Ts,
    partitions: Vec<PartitionId>,
    awaiting: BTreeSet<PartitionId>,
    committing: bool,
    deferred: Option<(PartitionId, DeferredId)>,
    id: Option<u64>,
    reads: Vec<ReadResult>,
    writes: Vec<(Key, Value)>,
}

impl<M: Metadata> RampClient<M> {
    pub(super) fn call(&mut self, cx: &mut Cx<'_, M>, op: OpId, procedure: String, args: Vec<Value>) {
        let p = match procedure::lookup(&procedure) {
            Ok(p) => p,
            Err(e) => return cx.complete(op, Err(OpError::Rejected(e))),
        };
        let mut c = CallOp {
            procedure,
            args,
            cache: BTreeMap::new(),
            dirty: false,
            passes: 0,
            started_ns: cx.now_ns(),
            phase: Phase::Local,
            rounds: 0,
            versions_returned: 0,
            metadata_bytes: 0,
        };
        if let Some(home) = p.home(&c.args) {
            let ts = self.next_ts(cx.now_ns());
            c.rounds = 1;
            let msg = RampMsg::RunLocal { op, ts, procedure: c.procedure.clone(), args: c.args.clone() };
            cx.send(self.server(self.topology.partition_of(&home)), msg);
            self.calls.insert(op, c);
            return;
        }
        self.calls.insert(op, c);
        self.pass(cx, op);
    }

    /// Run the procedure on what has been read: fetch what it still needs, repair fractured reads, or write.
    fn pass(&mut self, cx: &mut Cx<'_, M>, op: OpId) {
        let Some(c) = self.calls.get_mut(&op) else { return };
        c.passes += 1;
        let slow = cx.now_ns().saturating_sub(c.started_ns) >= self.config.ramp_gc_delay_ms.saturating_mul(500_000);
        if c.passes > MAX_PASSES || slow {
            let why = if slow { "its reads took half the collection delay" } else { "its reads kept racing writes" };
            return self.call_done(cx, op, Err(OpError::aborted(AbortCause::Conflict, why)));
        }
        let mut call = match procedure::Call::start(&c.procedure, c.args.clone()) {
            Ok(call) => call,
            Err(e) => return self.call_done(cx, op, Err(OpError::Rejected(e))),
        };
        let progress =
            procedure::run_cached(&mut call, |k| c.cache.get(k).map(|f| f.as_ref().map(|f| f.visible().clone())));
        cx.charge(call.pieces.len() as u64);
        let result = match progress {
            Ok(procedure::Progress::Need(keys)) => {
                let asks = keys.into_iter().map(|key| Get { key, among: None }).collect();
                return self.call_round(cx, op, asks, false);
            }
            Ok(procedure::Progress::Done(effects)) => Ok(effects),
            Err(e) => Err(e),
        };
        if c.dirty {
            c.dirty = false;
            let keys: Vec<Key> = c.cache.keys().cloned().collect();
            let first: Vec<FirstRead<'_, M::Meta>> =
                c.cache.iter().map(|(key, f)| FirstRead { key, found: f.as_ref().map(|f| (f.ts, &f.meta)) }).collect();
            let plan = M::second_round(&first);
            let asks: Vec<Get> = keys
                .into_iter()
                .zip(plan)
                .filter_map(|(key, set)| set.map(|among| Get { key, among: Some(among) }))
                .collect();
            if !asks.is_empty() && !self.config.ramp_skip_second_round {
                return self.call_round(cx, op, asks, true);
            }
        }
        let (reads, writes) = match result {
            Ok(effects) => effects,
            Err(e) => return self.call_done(cx, op, Err(OpError::aborted(e.cause(), e.to_string()))),
        };
        let deferred = match call.procedure.deferred_id(&call.args, &call.known) {
            Ok(d) => d,
            Err(e) => return self.call_done(cx, op, Err(OpError::Rejected(e))),
        };
        let dc = self.dc;
        let reads: Vec<ReadResult> = reads
            .into_iter()
            .map(|(key, _)| match c.cache.get(&key).cloned().flatten() {
                Some(f) => ReadResult {
                    key,
                    value: Some(f.value),
                    version: Version { time: f.ts.time, dc },
                    versions_skipped: 0,
                },
                None => ReadResult { key, value: None, version: Version::INITIAL, versions_skipped: 0 },
            })
            .collect();
        if let Some(seen) = c.cache.values().flatten().map(|f| f.ts.time).max() {
            self.last_time = self.last_time.max(seen);
        }
        if writes.is_empty() && deferred.is_none() {
            let reply = Reply { reads, commit: None, writes: Vec::new(), metrics: OpMetrics::default() };
            return self.call_done(cx, op, Ok(reply));
        }
        self.call_write(cx, op, reads, writes, deferred);
    }

    /// Send a round of reads of the call.
    fn call_round(&mut self, cx: &mut Cx<'_, M>, op: OpId, asks: Vec<Get>, repair: bool) {
        let Some(c) = self.calls.get_mut(&op) else { return };
        c.rounds += 1;
        let round = c.rounds;
        let mut by_partition: BTreeMap<PartitionId, Vec<Get>> = BTreeMap::new();
        for g in asks {
            if let Some(set) = &g.among {
                c.metadata_bytes += wire_bytes(set);
            }
            by_partition.entry(self.topology.partition_of(&g.key)).or_default().push(g);
        }
        let mut slots = BTreeMap::new();
        for (p, gets) in by_partition {
            slots.insert(p, gets.iter().map(|g| g.key.clone()).collect());
            cx.send(ServerId::new(self.dc, p), RampMsg::Get { op, round, gets });
        }
        c.phase = Phase::Reading { round, repair, slots };
    }

    /// A partition's answer to a round of the call's reads.
    pub(super) fn call_got(
        &mut self,
        cx: &mut Cx<'_, M>,
        op: OpId,
        partition: PartitionId,
        round: u32,
        found: Vec<Option<Found<M::Meta>>>,
    ) {
        let Some(c) = self.calls.get_mut(&op) else { return };
        let Phase::Reading { round: r, repair, slots } = &mut c.phase else { return };
        if round != *r || slots.get(&partition).is_none_or(|keys| keys.len() != found.len()) {
            return;
        }
        let repair = *repair;
        let keys = slots.remove(&partition).expect("checked above");
        let done = slots.is_empty();
        let mut missed = false;
        for (key, f) in keys.into_iter().zip(found) {
            if let Some(f) = &f {
                c.versions_returned += 1;
                c.metadata_bytes += wire_bytes(&f.ts) + wire_bytes(&f.meta);
            }
            if !repair {
                c.cache.insert(key, f);
                c.dirty = true;
                continue;
            }
            let old = c.cache.get(&key).and_then(|o| o.as_ref().map(|o| o.ts));
            match f {
                Some(f) if old.is_none_or(|o| f.ts > o) => {
                    c.cache.insert(key, Some(f));
                    c.dirty = true;
                }
                Some(_) => {}
                None => missed |= M::EXACT,
            }
        }
        if missed {
            // An exact version was collected: read everything afresh.
            c.cache.clear();
            c.started_ns = cx.now_ns();
        }
        if done {
            self.pass(cx, op);
        }
    }

    /// Prepare the call's writes everywhere (RAMP's `PUT_ALL`), with the deferred id's counter in the
    /// transaction's write set.
    fn call_write(
        &mut self,
        cx: &mut Cx<'_, M>,
        op: OpId,
        reads: Vec<ReadResult>,
        writes: Vec<(Key, Value)>,
        deferred: Option<DeferredId>,
    ) {
        let last: BTreeMap<Key, Value> = writes.iter().cloned().collect();
        if let Err(e) = Self::can_keep_bounds(last.values()) {
            return self.call_done(cx, op, Err(OpError::Rejected(e)));
        }
        let mut described: Vec<Key> = last.keys().cloned().collect();
        if let Some(d) = &deferred
            && !last.contains_key(&d.counter)
        {
            described.push(d.counter.clone());
        }
        let ts = self.next_ts(cx.now_ns());
        let meta = M::describe(&described, &self.config);
        let mut parts: BTreeMap<PartitionId, Vec<(Key, Value)>> = BTreeMap::new();
        for (k, v) in last {
            parts.entry(self.topology.partition_of(&k)).or_default().push((k, v));
        }
        let deferred = deferred.map(|d| (self.topology.partition_of(&d.counter), d));
        if let Some((p, d)) = &deferred
            && !parts.contains_key(p)
        {
            let why = format!("the sequential id's counter {:?} does not live with any key the call writes", d.counter);
            return self.call_done(cx, op, Err(OpError::Rejected(why)));
        }
        let Some(c) = self.calls.get_mut(&op) else { return };
        c.metadata_bytes += (wire_bytes(&ts) + wire_bytes(&meta)) * parts.len() as u64;
        c.rounds += 1;
        let partitions: Vec<PartitionId> = parts.keys().copied().collect();
        for (p, w) in parts {
            cx.send(ServerId::new(self.dc, p), RampMsg::Prepare { op, ts, writes: w, meta: meta.clone() });
        }
        let awaiting = partitions.iter().copied().collect();
        let w = Writing { ts, partitions, awaiting, committing: false, deferred, id: None, reads, writes };
        c.phase = Phase::Writing(Box::new(w));
    }

    /// A prepare or commit of the call's writes acknowledged.
    pub(super) fn call_acked(
        &mut self,
        cx: &mut Cx<'_, M>,
        op: OpId,
        partition: PartitionId,
        ts: Ts,
        commit: bool,
        id: Option<u64>,
    ) {
        let dc = self.dc;
        let Some(c) = self.calls.get_mut(&op) else { return };
        let Phase::Writing(w) = &mut c.phase else { return };
        let committing = w.committing || M::ONE_ROUND_WRITES;
        if w.ts != ts || committing != commit || !w.awaiting.remove(&partition) {
            return;
        }
        if commit && w.deferred.as_ref().is_some_and(|(p, _)| *p == partition) {
            w.id = w.id.or(id);
        }
        if !w.awaiting.is_empty() {
            return;
        }
        if !committing {
            w.committing = true;
            w.awaiting = w.partitions.iter().copied().collect();
            c.rounds += 1;
            c.metadata_bytes += wire_bytes(&ts) * w.partitions.len() as u64;
            let partitions = w
                .partitions
                .iter()
                .map(|p| (*p, w.deferred.as_ref().filter(|(dp, _)| dp == p).map(|(_, d)| d.clone())))
                .collect();
            self.send_commits(cx, op, ts, partitions);
            return;
        }
        let Phase::Writing(w) = std::mem::replace(&mut c.phase, Phase::Local) else { unreachable!("just seen") };
        let Writing { reads, mut writes, deferred, id, .. } = *w;
        if let Some((_, d)) = deferred {
            let Some(n) = id else {
                let why = "committed, but the counter's owner did not take the sequential id (not a number?)";
                return self.call_done(cx, op, Err(OpError::Unknown(why.into())));
            };
            writes.push((d.counter.clone(), d.counter_value.clone()));
            writes.push((d.map_key(n), d.map_value.clone()));
        }
        let reply = Reply { reads, commit: Some(Version { time: ts.time, dc }), writes, metrics: OpMetrics::default() };
        self.call_done(cx, op, Ok(reply));
    }

    /// A partition refused the call's prepare (a bounded add would break its floor): abort the write
    /// everywhere; the call aborts as the application's constraint says (cause `user`: retrying would meet
    /// the same floor).
    pub(super) fn call_refused(&mut self, cx: &mut Cx<'_, M>, op: OpId, ts: Ts, reason: String) {
        let Some(c) = self.calls.get(&op) else { return };
        let Phase::Writing(w) = &c.phase else { return };
        if w.ts != ts || w.committing {
            return;
        }
        let partitions = w.partitions.clone();
        self.send_aborts(cx, op, ts, &partitions);
        self.call_done(cx, op, Err(OpError::aborted(AbortCause::User, reason)));
    }

    /// A single-partition call's outcome.
    pub(super) fn call_ran(&mut self, cx: &mut Cx<'_, M>, op: OpId, ts: Ts, outcome: Result<LocalEffects, OpError>) {
        let Some(c) = self.calls.get(&op) else { return };
        if !matches!(c.phase, Phase::Local) {
            return;
        }
        self.last_time = self.last_time.max(ts.time);
        let dc = self.dc;
        let reply = outcome.map(|e| Reply {
            reads: e
                .reads
                .into_iter()
                .map(|(key, value)| ReadResult { key, value, version: Version::INITIAL, versions_skipped: 0 })
                .collect(),
            commit: (!e.writes.is_empty()).then_some(Version { time: ts.time, dc }),
            writes: e.writes,
            metrics: OpMetrics::default(),
        });
        self.call_done(cx, op, reply);
    }

    fn call_done(&mut self, cx: &mut Cx<'_, M>, op: OpId, result: Result<Reply, OpError>) {
        let Some(c) = self.calls.remove(&op) else { return };
        let metrics = OpMetrics {
            rounds: c.rounds,
            versions_returned: c.versions_returned,
            metadata_bytes: c.metadata_bytes,
            ..Default::default()
        };
        cx.complete(op, result.map(|r| Reply { metrics, ..r }));
    }
}
