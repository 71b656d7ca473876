//! A RAMP client session: write transactions (prepare everywhere, then commit everywhere) and read-only
//! transactions (a first round of latest committed versions, and the second round the metadata asks for).

use super::calls::CallOp;
use super::{FirstRead, Found, Get, Metadata, Ramp, RampMsg, RampTimer, Ts, wire_bytes};
use crate::components::session;
use snowline_core::procedure::DeferredId;
use snowline_core::{
    Addr, ClientId, ClientNode, Ctx, DcId, Key, OpError, OpId, OpMetrics, PartitionId, Protocol, ProtocolConfig,
    ReadResult, Reply, Request, ServerId, Topology, Value, Version,
};
use std::collections::{BTreeMap, BTreeSet};

type Cx<'a, M> = Ctx<'a, Ramp<M>>;

/// A transaction's commits (or aborts) not yet acknowledged everywhere.
#[derive(Debug)]
struct Committing {
    op: OpId,
    /// The partitions still to acknowledge, each with the deferred id its commit carries.
    partitions: BTreeMap<PartitionId, Option<DeferredId>>,
    /// When the commits were last sent (this client's clock).
    sent_ns: u64,
    /// Aborts, not commits: a partition refused a prepare.
    abort: bool,
}

/// A write transaction in flight.
#[derive(Debug)]
struct WriteOp {
    ts: Ts,
    partitions: Vec<PartitionId>,
    /// Partitions whose acknowledgement of the current phase is awaited.
    awaiting: BTreeSet<PartitionId>,
    /// The prepares are all acknowledged and the commits sent.
    committing: bool,
    metadata_bytes: u64,
}

/// A read-only transaction in flight.
#[derive(Debug)]
struct ReadOp<Meta> {
    keys: Vec<Key>,
    /// Rounds sent so far, over every attempt; replies carry the round they answer.
    rounds: u32,
    /// Whether the current round is a second round.
    second: bool,
    /// When the current attempt's first round was sent (this client's clock).
    started_ns: u64,
    /// Per key, the version read so far (`None`: the initial state).
    result: Vec<Option<Found<Meta>>>,
    /// The partitions whose answer to the current round is awaited, with the positions of their keys.
    slots: BTreeMap<PartitionId, Vec<usize>>,
    /// A second-round request for an exact version found nothing: it was collected; start again.
    missed: bool,
    versions_returned: u32,
    metadata_bytes: u64,
}

#[derive(Debug)]
enum ClientOp<Meta> {
    Write(WriteOp),
    Read(ReadOp<Meta>),
}

/// A RAMP client session.
pub struct RampClient<M: Metadata> {
    id: ClientId,
    pub(super) dc: DcId,
    pub(super) topology: Topology,
    pub(super) config: ProtocolConfig,
    /// The time part of the last timestamp this session gave a transaction, or of the newest version it
    /// read if that is later.
    pub(super) last_time: u64,
    ops: BTreeMap<OpId, ClientOp<M::Meta>>,
    /// Stored procedures in flight ([`super::calls`]).
    pub(super) calls: BTreeMap<OpId, CallOp<M::Meta>>,
    /// Commits sent and not yet acknowledged by every partition, sent again every
    /// [`super::COMMIT_RESEND_NS`]: per transaction, its operation and the partitions (with the deferred id
    /// one rides on).
    committing: BTreeMap<Ts, Committing>,
    resend_armed: bool,
}

impl<M: Metadata> RampClient<M> {
    pub fn new(id: ClientId, dc: DcId, topology: Topology, config: ProtocolConfig) -> Self {
        Self {
            id,
            dc,
            topology,
            config,
            last_time: 0,
            ops: BTreeMap::new(),
            calls: BTreeMap::new(),
            committing: BTreeMap::new(),
            resend_armed: false,
        }
    }

    pub fn id(&self) -> ClientId {
        self.id
    }

    /// A timestamp above every earlier one of this session and every version it read: the clock, or one
    /// more than the last time.
    pub(super) fn next_ts(&mut self, now_ns: u64) -> Ts {
        self.last_time = now_ns.max(self.last_time.saturating_add(1));
        Ts { time: self.last_time, client: self.id }
    }

    pub(super) fn server(&self, partition: PartitionId) -> ServerId {
        ServerId::new(self.dc, partition)
    }

    fn request(&mut self, cx: &mut Cx<'_, M>, op: OpId, request: Request) {
        if let Err(reason) = self.config.check_request(&request) {
            cx.complete(op, Err(OpError::Rejected(reason)));
            return;
        }
        match request {
            Request::Rot { keys } => self.read(cx, op, keys),
            Request::Put { key, value } => self.write(cx, op, vec![(key, value)]),
            Request::Update { writes } => self.write(cx, op, writes),
            Request::Call { procedure, args } => self.call(cx, op, procedure, args),
            Request::RotRounds { .. } => {
                let reason = format!("{}'s read-only transactions are one-shot: name every key in one ROT", M::NAME);
                cx.complete(op, Err(OpError::Rejected(reason)));
            }
            other => cx.complete(op, Err(Ramp::<M>::OFFERS.refusal(M::NAME, &other))),
        }
    }

    /// `PUT_ALL`: prepare every partition's writes (with the transaction's timestamp and metadata).
    fn write(&mut self, cx: &mut Cx<'_, M>, op: OpId, writes: Vec<(Key, Value)>) {
        // One write per key: the last one named.
        let last: BTreeMap<Key, Value> = writes.into_iter().collect();
        if let Err(e) = Self::can_keep_bounds(last.values()) {
            return cx.complete(op, Err(OpError::Rejected(e)));
        }
        let keys: Vec<Key> = last.keys().cloned().collect();
        let ts = self.next_ts(cx.now_ns());
        let meta = M::describe(&keys, &self.config);
        let mut parts: BTreeMap<PartitionId, Vec<(Key, Value)>> = BTreeMap::new();
        for (k, v) in last {
            parts.entry(self.topology.partition_of(&k)).or_default().push((k, v));
        }
        cx.charge(keys.len() as u64);
        let per_message = wire_bytes(&ts) + wire_bytes(&meta);
        let partitions: Vec<PartitionId> = parts.keys().copied().collect();
        for (p, writes) in parts {
            cx.send(self.server(p), RampMsg::Prepare { op, ts, writes, meta: meta.clone() });
        }
        let w = WriteOp {
            ts,
            awaiting: partitions.iter().copied().collect(),
            metadata_bytes: per_message * partitions.len() as u64,
            partitions,
            committing: false,
        };
        self.ops.insert(op, ClientOp::Write(w));
    }

    /// A prepare or commit acknowledged by `partition`.
    fn acked(&mut self, cx: &mut Cx<'_, M>, op: OpId, partition: PartitionId, ts: Ts, commit: bool) {
        let dc = self.dc;
        let Some(ClientOp::Write(w)) = self.ops.get_mut(&op) else { return };
        // One-round writes are answered by the commit itself.
        let committing = w.committing || M::ONE_ROUND_WRITES;
        if w.ts != ts || committing != commit || !w.awaiting.remove(&partition) || !w.awaiting.is_empty() {
            return;
        }
        if !committing {
            // Every partition holds the versions: commit them everywhere.
            w.committing = true;
            w.awaiting = w.partitions.iter().copied().collect();
            w.metadata_bytes += wire_bytes(&ts) * w.partitions.len() as u64;
            let partitions = w.partitions.iter().map(|p| (*p, None)).collect();
            self.send_commits(cx, op, ts, partitions);
            return;
        }
        // Every commit acknowledged: the paper's PUT_ALL returns here.
        let Some(ClientOp::Write(w)) = self.ops.remove(&op) else { unreachable!("just seen") };
        let rounds = if M::ONE_ROUND_WRITES { 1 } else { 2 };
        let metrics = OpMetrics { rounds, metadata_bytes: w.metadata_bytes, ..Default::default() };
        let commit = Some(Version { time: ts.time, dc });
        cx.complete(op, Ok(Reply { reads: Vec::new(), commit, writes: Vec::new(), metrics }));
    }

    /// Whether this variant can keep the bounds of `writes`' bounded adds (`-N>=F`): one-round writes
    /// (`nocc`) apply at once and cannot abort, so they cannot.
    pub(super) fn can_keep_bounds<'v>(mut writes: impl Iterator<Item = &'v Value>) -> Result<(), String> {
        if M::ONE_ROUND_WRITES && writes.any(|v| !snowline_core::merge::bounds(v).is_empty()) {
            return Err(format!(
                "{} applies every write at once, without concurrency control: it cannot keep a bounded add's floor \
                 (-N>=F); ramp-f, ramp-s and ramp-h check it at the row's owner",
                M::NAME
            ));
        }
        Ok(())
    }

    /// A partition refused a prepare: abort the transaction everywhere it went (no partition committed it:
    /// commits wait for every prepare).
    fn refused(&mut self, cx: &mut Cx<'_, M>, op: OpId, ts: Ts, reason: String) {
        let Some(ClientOp::Write(w)) = self.ops.get(&op) else { return };
        if w.ts != ts || w.committing {
            return;
        }
        let Some(ClientOp::Write(w)) = self.ops.remove(&op) else { unreachable!("just seen") };
        self.send_aborts(cx, op, ts, &w.partitions);
        cx.complete(op, Err(OpError::aborted(snowline_core::AbortCause::User, reason)));
    }

    /// Send transaction `ts`'s aborts to `partitions`, and keep sending them until acknowledged.
    pub(super) fn send_aborts(&mut self, cx: &mut Cx<'_, M>, op: OpId, ts: Ts, partitions: &[PartitionId]) {
        for p in partitions {
            cx.send(ServerId::new(self.dc, *p), RampMsg::Abort { op, ts });
        }
        let partitions = partitions.iter().map(|p| (*p, None)).collect();
        self.committing.insert(ts, Committing { op, partitions, sent_ns: cx.now_ns(), abort: true });
        self.arm_resend(cx);
    }

    fn arm_resend(&mut self, cx: &mut Cx<'_, M>) {
        if !self.resend_armed {
            self.resend_armed = true;
            cx.set_timer(super::COMMIT_RESEND_NS, RampTimer::ResendCommits);
        }
    }

    /// Send transaction `ts`'s commits to `partitions` (each with the deferred id riding on it), and keep
    /// sending them until acknowledged.
    pub(super) fn send_commits(
        &mut self,
        cx: &mut Cx<'_, M>,
        op: OpId,
        ts: Ts,
        partitions: BTreeMap<PartitionId, Option<DeferredId>>,
    ) {
        for (p, deferred) in &partitions {
            cx.send(ServerId::new(self.dc, *p), RampMsg::Commit { op, ts, deferred: deferred.clone() });
        }
        self.committing.insert(ts, Committing { op, partitions, sent_ns: cx.now_ns(), abort: false });
        self.arm_resend(cx);
    }

    fn commit_acked(&mut self, ts: Ts, partition: PartitionId) {
        if let Some(c) = self.committing.get_mut(&ts) {
            c.partitions.remove(&partition);
            if c.partitions.is_empty() {
                self.committing.remove(&ts);
            }
        }
    }

    /// `GET_ALL`: start a read-only transaction with its first round.
    fn read(&mut self, cx: &mut Cx<'_, M>, op: OpId, keys: Vec<Key>) {
        let r = ReadOp {
            result: vec![None; keys.len()],
            keys,
            rounds: 0,
            second: false,
            started_ns: 0,
            slots: BTreeMap::new(),
            missed: false,
            versions_returned: 0,
            metadata_bytes: 0,
        };
        self.ops.insert(op, ClientOp::Read(r));
        self.first_round(cx, op);
    }

    fn first_round(&mut self, cx: &mut Cx<'_, M>, op: OpId) {
        let Some(ClientOp::Read(r)) = self.ops.get_mut(&op) else { return };
        let asks: Vec<(usize, Option<Vec<Ts>>)> = (0..r.keys.len()).map(|i| (i, None)).collect();
        r.result = vec![None; r.keys.len()];
        r.second = false;
        r.missed = false;
        r.started_ns = cx.now_ns();
        self.send_round(cx, op, asks);
    }

    /// Send one round: for each `(position, among)`, a `Get` to the key's partition.
    fn send_round(&mut self, cx: &mut Cx<'_, M>, op: OpId, asks: Vec<(usize, Option<Vec<Ts>>)>) {
        let Some(ClientOp::Read(r)) = self.ops.get_mut(&op) else { return };
        r.rounds += 1;
        let round = r.rounds;
        let mut by_partition: BTreeMap<PartitionId, (Vec<usize>, Vec<Get>)> = BTreeMap::new();
        for (i, among) in asks {
            let key = r.keys[i].clone();
            if let Some(set) = &among {
                r.metadata_bytes += wire_bytes(set);
            }
            let (positions, gets) = by_partition.entry(self.topology.partition_of(&key)).or_default();
            positions.push(i);
            gets.push(Get { key, among });
        }
        r.slots = BTreeMap::new();
        for (p, (positions, gets)) in by_partition {
            r.slots.insert(p, positions);
            cx.send(ServerId::new(self.dc, p), RampMsg::Get { op, round, gets });
        }
    }

    /// A partition's answer to a round.
    fn got(
        &mut self,
        cx: &mut Cx<'_, M>,
        op: OpId,
        partition: PartitionId,
        round: u32,
        found: Vec<Option<Found<M::Meta>>>,
    ) {
        let Some(ClientOp::Read(r)) = self.ops.get_mut(&op) else { return };
        if round != r.rounds || r.slots.get(&partition).is_none_or(|positions| positions.len() != found.len()) {
            return;
        }
        let positions = r.slots.remove(&partition).expect("checked above");
        for (i, f) in positions.into_iter().zip(found) {
            if let Some(f) = &f {
                r.versions_returned += 1;
                r.metadata_bytes += wire_bytes(&f.ts) + wire_bytes(&f.meta);
            }
            if !r.second {
                r.result[i] = f;
                continue;
            }
            match f {
                // Never older than the first round's version (every variant only asks for newer ones, or a set
                // holding the first round's own).
                Some(f) if r.result[i].as_ref().is_none_or(|old| f.ts > old.ts) => r.result[i] = Some(f),
                Some(_) => {}
                None => r.missed |= M::EXACT,
            }
        }
        if !r.slots.is_empty() {
            return;
        }
        if r.second {
            self.second_round_done(cx, op);
        } else {
            self.first_round_done(cx, op);
        }
    }

    fn first_round_done(&mut self, cx: &mut Cx<'_, M>, op: OpId) {
        let Some(ClientOp::Read(r)) = self.ops.get_mut(&op) else { return };
        if self.config.ramp_skip_second_round {
            // The deliberately broken variant: whatever the first round saw, fractured or not.
            return self.finish_read(cx, op);
        }
        let first: Vec<FirstRead<'_, M::Meta>> = r
            .keys
            .iter()
            .zip(&r.result)
            .map(|(key, f)| FirstRead { key, found: f.as_ref().map(|f| (f.ts, &f.meta)) })
            .collect();
        let plan = M::second_round(&first);
        cx.charge(r.keys.len() as u64);
        let asks: Vec<(usize, Option<Vec<Ts>>)> =
            plan.into_iter().enumerate().filter_map(|(i, set)| set.map(|s| (i, Some(s)))).collect();
        if asks.is_empty() {
            return self.finish_read(cx, op);
        }
        r.second = true;
        self.send_round(cx, op, asks);
    }

    fn second_round_done(&mut self, cx: &mut Cx<'_, M>, op: OpId) {
        let Some(ClientOp::Read(r)) = self.ops.get_mut(&op) else { return };
        // A version the second round needed may have been collected if the rounds took long (or was, for an
        // exact request that found nothing): start again, with a fresh first round.
        let slow = cx.now_ns().saturating_sub(r.started_ns) >= self.config.ramp_gc_delay_ms.saturating_mul(500_000);
        if r.missed || slow {
            return self.first_round(cx, op);
        }
        self.finish_read(cx, op);
    }

    fn finish_read(&mut self, cx: &mut Cx<'_, M>, op: OpId) {
        let Some(ClientOp::Read(r)) = self.ops.remove(&op) else { return };
        // The session's next write gets a timestamp above every version it read (a Lamport clock), so the
        // timestamp order of each key's versions agrees with happens-before (session order and reads-from).
        if let Some(seen) = r.result.iter().flatten().map(|f| f.ts.time).max() {
            self.last_time = self.last_time.max(seen);
        }
        let dc = self.dc;
        let reads = r
            .keys
            .into_iter()
            .zip(r.result)
            .map(|(key, f)| match f {
                Some(f) => ReadResult {
                    key,
                    value: Some(f.merged.unwrap_or(f.value)),
                    version: Version { time: f.ts.time, dc },
                    versions_skipped: 0,
                },
                None => ReadResult { key, value: None, version: Version::INITIAL, versions_skipped: 0 },
            })
            .collect();
        let metrics = OpMetrics {
            rounds: r.rounds,
            versions_returned: r.versions_returned,
            metadata_bytes: r.metadata_bytes,
            ..Default::default()
        };
        cx.complete(op, Ok(Reply { reads, commit: None, writes: Vec::new(), metrics }));
    }

    fn message(&mut self, cx: &mut Cx<'_, M>, from: Addr, msg: RampMsg<M::Meta>) {
        let Addr::Server(server) = from else { return };
        if server.dc != self.dc || server.partition >= self.topology.partitions {
            return;
        }
        let p = server.partition;
        if let RampMsg::Committed { ts, .. } | RampMsg::Aborted { ts, .. } = &msg {
            self.commit_acked(*ts, p);
        }
        match msg {
            RampMsg::Prepared { op, ts } if self.calls.contains_key(&op) => self.call_acked(cx, op, p, ts, false, None),
            RampMsg::Committed { op, ts, id } if self.calls.contains_key(&op) => {
                self.call_acked(cx, op, p, ts, true, id)
            }
            RampMsg::Got { op, round, found } if self.calls.contains_key(&op) => self.call_got(cx, op, p, round, found),
            RampMsg::RanLocal { op, ts, outcome } => self.call_ran(cx, op, ts, outcome),
            RampMsg::Refused { op, ts, reason } if self.calls.contains_key(&op) => {
                self.call_refused(cx, op, ts, reason)
            }
            RampMsg::Refused { op, ts, reason } => self.refused(cx, op, ts, reason),
            RampMsg::Aborted { .. } => {}
            RampMsg::Prepared { op, ts } => self.acked(cx, op, p, ts, false),
            RampMsg::Committed { op, ts, .. } => self.acked(cx, op, p, ts, true),
            RampMsg::Got { op, round, found } => self.got(cx, op, p, round, found),
            RampMsg::Prepare { .. }
            | RampMsg::Commit { .. }
            | RampMsg::Abort { .. }
            | RampMsg::Get { .. }
            | RampMsg::RunLocal { .. } => {}
        }
    }
}

/// What a RAMP session token carries (`super`'s docs, "Session tokens"): the session's Lamport time.
#[derive(serde::Serialize, serde::Deserialize)]
struct SavedSession {
    last_time: u64,
}

impl<M: Metadata> ClientNode<Ramp<M>> for RampClient<M> {
    fn save_session(&self) -> Vec<u8> {
        session::encode(Ramp::<M>::NAME, &SavedSession { last_time: self.last_time })
    }

    fn resume_session(&mut self, saved: &[u8]) -> Result<(), String> {
        let Some(s) = session::decode::<SavedSession>(Ramp::<M>::NAME, saved)? else { return Ok(()) };
        session::check_time(s.last_time, "the session's last timestamp")?;
        // The session's next timestamps stay above everything it wrote or read.
        self.last_time = self.last_time.max(s.last_time);
        Ok(())
    }

    fn on_request(&mut self, cx: &mut Cx<'_, M>, op: OpId, request: Request) {
        self.request(cx, op, request);
    }

    fn on_message(&mut self, cx: &mut Cx<'_, M>, from: Addr, msg: RampMsg<M::Meta>) {
        self.message(cx, from, msg);
    }

    fn on_timer(&mut self, cx: &mut Cx<'_, M>, timer: RampTimer) {
        if timer != RampTimer::ResendCommits {
            return;
        }
        self.resend_armed = false;
        let due = cx.now_ns().saturating_sub(super::COMMIT_RESEND_NS);
        let again: Vec<Ts> = self.committing.iter().filter(|(_, c)| c.sent_ns <= due).map(|(ts, _)| *ts).collect();
        for ts in again {
            let Some(c) = self.committing.remove(&ts) else { continue };
            if c.abort {
                let parts: Vec<PartitionId> = c.partitions.into_keys().collect();
                self.send_aborts(cx, c.op, ts, &parts);
            } else {
                self.send_commits(cx, c.op, ts, c.partitions);
            }
        }
        if !self.committing.is_empty() && !self.resend_armed {
            self.resend_armed = true;
            cx.set_timer(super::COMMIT_RESEND_NS, RampTimer::ResendCommits);
        }
    }
}
