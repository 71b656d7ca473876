//! A replica group's member ([`JessyServer`]): its state, input checks, sweep, message and timer dispatch.

use super::criteria::{certifies_reads, destinations, voters};
use super::group::GroupData;
use super::reads::Parked;
use super::{
    Criterion, Cx, HEADS_PER_ANSWER, Jessy, JessyMsg, JessyTimer, MAX_HEADS_PER_MESSAGE, MAX_READS_CARRIED,
    MAX_VOTES_PER_ANSWER, PARKED_READ_TTL_NS, TxPayload,
};
use crate::components::multicast::{
    MAX_TIMESTAMP, McastId, McastMember, McastMsg, McastParams, McastWire, check_submit_sender,
};
use crate::components::twopc::{TpcMember, TpcParams, TpcWire};
use crate::strong::dependence::{DepVector, ReadAt};
use serde::{Deserialize, Serialize};
use snowline_core::{
    Addr, Check, InvalidInput, InvalidKind, Key, Message, PartitionId, ProtocolConfig, ServerId, ServerNode,
    Termination, Topology, Value,
};
use std::collections::{BTreeMap, BTreeSet};
use std::marker::PhantomData;

/// How a member terminates update transactions ([`ProtocolConfig::termination`]).
#[derive(Serialize, Deserialize)]
pub(super) enum Engine {
    Multicast(McastMember),
    TwoPc(TpcMember),
}

/// A member of a partition's replica group.
#[derive(Serialize, Deserialize)]
#[serde(bound = "")]
pub struct JessyServer<C> {
    pub(super) id: ServerId,
    pub(super) topology: Topology,
    retry_ns: u64,
    pub(super) engine: Engine,
    pub(super) data: GroupData,
    /// Votes from other groups for transactions not delivered here yet. Soft: re-asked for.
    #[serde(skip)]
    pub(super) early_votes: BTreeMap<McastId, BTreeMap<PartitionId, bool>>,
    #[serde(skip)]
    pub(super) parked: Vec<Parked>,
    /// Since when (ns) each queued transaction with this group's vote has waited for the others' (from the
    /// vote, or from the first sweep after a restart).
    #[serde(skip)]
    pub(super) waiting_since: BTreeMap<McastId, u64>,
    #[serde(skip)]
    sweep_armed: bool,
    /// With propagation: the heads other groups applied, by group, ascending, each list starting with the
    /// initial `(0, zero)`. Soft: propagation and queries refill it.
    #[serde(skip)]
    pub(super) remote: BTreeMap<PartitionId, Vec<(u64, DepVector)>>,
    #[serde(skip)]
    criterion: PhantomData<C>,
    /// The limits clients' transactions and reads are checked against.
    config: ProtocolConfig,
}

impl<C: Criterion> JessyServer<C> {
    pub fn new(id: ServerId, topology: Topology, params: McastParams, termination: Termination) -> Self {
        let engine = match termination {
            Termination::Multicast => Engine::Multicast(McastMember::new(id, topology, params)),
            Termination::TwoPc => {
                let tpc = TpcParams { raft: params.raft, retry_ns: params.retry_ns };
                Engine::TwoPc(TpcMember::new(id, topology, tpc))
            }
        };
        Self {
            id,
            topology,
            retry_ns: params.retry_ns,
            engine,
            data: GroupData::new(id.partition),
            early_votes: BTreeMap::new(),
            parked: Vec::new(),
            waiting_since: BTreeMap::new(),
            sweep_armed: false,
            remote: BTreeMap::new(),
            criterion: PhantomData,
            config: ProtocolConfig::default(),
        }
    }

    /// Check clients' requests against `config`'s limits (the default limits otherwise).
    pub fn with_limits(mut self, config: &ProtocolConfig) -> Self {
        self.config = config.clone();
        self
    }

    /// A client's transaction or read is within the request limits (`ProtocolConfig`): its writes (at most
    /// `max_keys_per_request`, as the commit that sent them) and the keys it read (each of them, in
    /// several reads: their number is not one request's).
    fn check_limits<'k>(
        &self,
        now_ns: u64,
        from: Addr,
        kind: &'static str,
        writes: &'k [(Key, Value)],
        reads: impl IntoIterator<Item = &'k Key>,
    ) -> Result<(), InvalidInput> {
        if let Addr::Client(_) = from {
            let check = Check::new(&self.topology, &self.config, now_ns, from, kind);
            check.request_writes(writes.iter().map(|(k, v)| (k, v)), [])?;
            reads.into_iter().try_for_each(|k| check.request_keys([k]))?;
        }
        Ok(())
    }

    /// The latest value of `key` this member applied.
    pub fn value(&self, key: &str) -> Option<&Value> {
        self.data.versions.get(key).and_then(|v| v.last()).and_then(|(_, value)| value.as_ref())
    }

    /// After commits were applied: trims, propagates, answers the reads that waited for them.
    pub(super) fn applied(&mut self, cx: &mut Cx<'_, C>, applied: Vec<(u64, DepVector)>) {
        if !applied.is_empty() {
            self.data.trim();
            if C::PROPAGATES {
                self.propagate(cx, applied);
            }
            self.retry_parked(cx);
        }
        self.arm_sweep(cx);
    }

    pub(super) fn arm_sweep(&mut self, cx: &mut Cx<'_, C>) {
        let waiting = self.data.queue.iter().any(|q| q.outcome.is_none());
        if !self.sweep_armed && (waiting || !self.parked.is_empty()) {
            self.sweep_armed = true;
            cx.set_timer(self.retry_ns / 4, JessyTimer::Sweep);
        }
    }

    fn sweep(&mut self, cx: &mut Cx<'_, C>) {
        self.sweep_armed = false;
        let now = cx.now_ns();
        self.parked.retain(|p| now.saturating_sub(p.since) < PARKED_READ_TTL_NS);
        // Ask again for the votes of transactions that waited a retry period.
        let g = self.id.partition;
        let mut asks = Vec::new();
        for q in self.data.queue.iter().filter(|q| q.outcome.is_none() && q.votes.contains_key(&g)) {
            // Waiting since this member voted, or since the sweep first saw it (after a restart).
            let since = *self.waiting_since.entry(q.id).or_insert(now);
            if now.saturating_sub(since) < self.retry_ns {
                continue;
            }
            for d in voters(&self.topology, &q.tx).into_iter().filter(|d| *d != g && !q.votes.contains_key(d)) {
                asks.extend(self.topology.group(d).map(|s| (s, q.id)));
            }
        }
        for (s, id) in asks {
            cx.send(s, JessyMsg::VoteQuery { id });
            self.waiting_since.insert(id, now);
        }
        if C::PROPAGATES {
            // First reads waiting for what their sessions saw elsewhere: ask those groups for their heads
            // (propagation may have been lost).
            let snapshot = self.start_snapshot();
            let lagging: BTreeSet<PartitionId> = self
                .parked
                .iter()
                .filter(|p| p.reads.is_empty())
                .flat_map(|p| p.floor.entries().filter(|&(h, s)| s > snapshot.get(h)).map(|(h, _)| h))
                .filter(|&h| h != g)
                .collect();
            for h in lagging {
                for s in self.topology.group(h) {
                    cx.send(s, JessyMsg::HeadsQuery);
                }
            }
        }
        self.arm_sweep(cx);
    }

    /// A `Submit` comes from its origin (a client multicasting its own transaction) or from a member of a
    /// destination group, and carries a transaction whose writes are exactly on its destination groups.
    fn check_submit(&self, from: Addr, msg: &McastMsg) -> Result<TxPayload, (InvalidKind, String)> {
        check_submit_sender(&self.topology, self.id, from, msg)?;
        self.check_tx(msg.id, &msg.payload, &msg.dest)
    }

    /// A transaction (multicast or begun by two-phase commit) decodes, certifies reads only where its
    /// criterion does, carries stamps and vectors in range, and is addressed to exactly its destination
    /// groups.
    fn check_tx(&self, id: McastId, payload: &[u8], dest: &[PartitionId]) -> Result<TxPayload, (InvalidKind, String)> {
        let tx = postcard::from_bytes::<TxPayload>(payload)
            .map_err(|e| (InvalidKind::Malformed, format!("{id}: undecodable transaction: {e}")))?;
        if !certifies_reads::<C>(!tx.writes.is_empty()) && !tx.reads.is_empty() {
            return Err((InvalidKind::Malformed, format!("{}: {} certifies no reads here", id, C::NAME)));
        }
        if let Some((k, stamp)) = tx.reads.iter().find(|(_, stamp)| *stamp > MAX_TIMESTAMP) {
            return Err((InvalidKind::Malformed, format!("{}: a read of {k:?} at stamp {stamp}", id)));
        }
        let groups = destinations::<C>(&self.topology, &tx);
        if voters(&self.topology, &tx).is_empty() || !groups.iter().eq(dest.iter()) {
            let why = format!("{} is addressed to groups {:?}, its keys are on {groups:?}", id, dest);
            return Err((InvalidKind::Malformed, why));
        }
        check_vector(&self.topology, &tx.snapshot).map_err(|why| (InvalidKind::Malformed, why))?;
        Ok(tx)
    }

    /// Whether `msg` belongs to this member's termination (anything else is not a termination message).
    fn terminates_by(&self, msg: &JessyMsg) -> bool {
        match msg {
            JessyMsg::Mcast(_) => matches!(self.engine, Engine::Multicast(_)),
            JessyMsg::Tpc(_) => matches!(self.engine, Engine::TwoPc(_)),
            _ => true,
        }
    }

    fn check_read(&self, key: &Key, reads: &[(Key, ReadAt)]) -> Result<(), String> {
        if self.topology.partition_of(key) != self.id.partition {
            return Err(format!("key {key:?} is not on partition {}", self.id.partition));
        }
        if reads.len() > MAX_READS_CARRIED {
            return Err(format!("{} earlier reads (at most {MAX_READS_CARRIED})", reads.len()));
        }
        for (k, r) in reads {
            if self.topology.partition_of(k) != r.group {
                return Err(format!("a read of {k:?} claims group {}", r.group));
            }
            if r.version > MAX_TIMESTAMP || r.position > MAX_TIMESTAMP || r.version > r.position {
                return Err(format!("a read of {k:?} at stamps {} / {} out of range", r.version, r.position));
            }
            check_vector(&self.topology, &r.vector)?;
        }
        Ok(())
    }
}

pub(super) fn check_vector(topology: &Topology, v: &DepVector) -> Result<(), String> {
    match v.entries().find(|&(g, s)| g >= topology.partitions || s > MAX_TIMESTAMP) {
        Some((g, s)) => Err(format!("a dependence vector entry {g}: {s} is out of range")),
        None => Ok(()),
    }
}

impl<C: Criterion> ServerNode<Jessy<C>> for JessyServer<C> {
    fn on_start(&mut self, cx: &mut Cx<'_, C>) {
        self.sweep_armed = false;
        match &mut self.engine {
            Engine::Multicast(member) => {
                let events = member.start(cx);
                self.handle(cx, events);
            }
            Engine::TwoPc(_) => {
                self.with_tpc(cx, |m, cx, host| m.start(cx, host));
            }
        }
    }

    fn on_message(&mut self, cx: &mut Cx<'_, C>, from: Addr, msg: JessyMsg) -> Result<(), InvalidInput> {
        let kind = msg.kind();
        let refuse = |k: InvalidKind, why: String| InvalidInput::new(k, kind, from, why);
        let malformed = |why: String| refuse(InvalidKind::Malformed, why);
        let other_group = |s: ServerId| self.topology.contains(s) && s.partition != self.id.partition;
        if !self.terminates_by(&msg) {
            let mine = if matches!(self.engine, Engine::TwoPc(_)) { "2pc" } else { "multicast" };
            return Err(refuse(InvalidKind::Malformed, format!("this cluster terminates by {mine}")));
        }
        match (from, msg) {
            (Addr::Server(server), JessyMsg::Raft(wire)) => match &mut self.engine {
                Engine::Multicast(member) => {
                    let events = member.on_raft(cx, server, wire).map_err(malformed)?;
                    self.handle(cx, events);
                }
                Engine::TwoPc(_) => {
                    self.with_tpc(cx, |m, cx, host| m.on_raft(cx, server, wire, host))
                        .unwrap_or(Ok(()))
                        .map_err(malformed)?;
                }
            },
            (_, JessyMsg::Tpc(TpcWire::Begin { id, participants, payload })) => {
                let tx = self.check_tx(id, &payload, &participants).map_err(|(k, why)| refuse(k, why))?;
                self.check_limits(cx.now_ns(), from, kind, &tx.writes, tx.reads.iter().map(|(k, _)| k))?;
                let wire = TpcWire::Begin { id, participants, payload };
                self.with_tpc(cx, |m, cx, host| m.on_wire(cx, from, wire, host))
                    .unwrap_or(Ok(()))
                    .map_err(malformed)?;
            }
            (_, JessyMsg::Tpc(TpcWire::Outcome { .. })) => {
                return Err(refuse(InvalidKind::Sender, "only origins are sent outcomes".into()));
            }
            (Addr::Server(s), JessyMsg::Tpc(wire)) if other_group(s) => {
                // Votes and decisions travel between a transaction's groups; the component checks them
                // against what is prepared here.
                self.with_tpc(cx, |m, cx, host| m.on_wire(cx, from, wire, host))
                    .unwrap_or(Ok(()))
                    .map_err(malformed)?;
            }
            (_, JessyMsg::Mcast(McastWire::Submit(msg))) => {
                let tx = self.check_submit(from, &msg).map_err(|(k, why)| refuse(k, why))?;
                self.check_limits(cx.now_ns(), from, kind, &tx.writes, tx.reads.iter().map(|(k, _)| k))?;
                if let Some((yes, stamp)) = self.data.vote_of(&msg.id) {
                    // Voted already: the coordinator lost the vote; send it again.
                    cx.send(msg.id.origin, JessyMsg::Vote { id: msg.id, yes, stamp });
                    return Ok(());
                }
                let Engine::Multicast(member) = &mut self.engine else { return Ok(()) };
                let events = member.on_wire(cx, from, McastWire::Submit(msg)).map_err(malformed)?;
                self.handle(cx, events);
            }
            (Addr::Server(s), JessyMsg::Mcast(wire)) if other_group(s) => {
                let Engine::Multicast(member) = &mut self.engine else { return Ok(()) };
                let events = member.on_wire(cx, from, wire).map_err(malformed)?;
                self.handle(cx, events);
            }
            (Addr::Client(_), JessyMsg::Read { tag, key, reads, floor }) => {
                let read_keys = std::iter::once(&key).chain(reads.iter().map(|(k, _)| k));
                self.check_limits(cx.now_ns(), from, kind, &[], read_keys)?;
                self.check_read(&key, &reads).map_err(malformed)?;
                check_vector(&self.topology, &floor).map_err(malformed)?;
                self.on_read(cx, from, tag, key, reads, floor);
            }
            (Addr::Server(s), JessyMsg::Heads { heads }) if other_group(s) && C::PROPAGATES => {
                if heads.len() > MAX_HEADS_PER_MESSAGE {
                    return Err(malformed(format!("{} heads in one message", heads.len())));
                }
                for (position, head) in &heads {
                    if *position > MAX_TIMESTAMP {
                        return Err(malformed(format!("a head at position {position}")));
                    }
                    check_vector(&self.topology, head).map_err(malformed)?;
                }
                self.learn_heads(s.partition, heads);
                self.retry_parked(cx);
            }
            (Addr::Server(s), JessyMsg::HeadsQuery) if other_group(s) && C::PROPAGATES => {
                let heads = &self.data.heads;
                let latest = heads[heads.len().saturating_sub(HEADS_PER_ANSWER)..].to_vec();
                cx.send(s, JessyMsg::Heads { heads: latest });
            }
            (Addr::Server(s), JessyMsg::Vote { id, yes, stamp }) if other_group(s) => {
                if stamp > MAX_TIMESTAMP {
                    return Err(malformed(format!("a vote on {id} at stamp {stamp}")));
                }
                self.record_vote(s, id, yes);
                self.progress(cx);
            }
            (Addr::Server(s), JessyMsg::Votes { votes }) if other_group(s) => {
                if votes.len() > MAX_VOTES_PER_ANSWER {
                    return Err(malformed(format!("{} votes in one answer", votes.len())));
                }
                if let Some((id, _, stamp)) = votes.iter().find(|(_, _, stamp)| *stamp > MAX_TIMESTAMP) {
                    return Err(malformed(format!("a vote on {id} at stamp {stamp}")));
                }
                for (id, yes, _) in votes {
                    self.record_vote(s, id, yes);
                }
                self.progress(cx);
            }
            (Addr::Server(s), JessyMsg::VoteQuery { id }) if other_group(s) => {
                let votes = self.votes_from(&id, s.partition);
                if !votes.is_empty() {
                    cx.send(s, JessyMsg::Votes { votes });
                }
            }
            (_, msg) => {
                let why = match msg {
                    JessyMsg::ReadReply { .. } => "only clients are sent read replies".to_string(),
                    JessyMsg::Read { .. } => "only clients read".to_string(),
                    JessyMsg::Heads { .. } | JessyMsg::HeadsQuery if !C::PROPAGATES => {
                        format!("{} propagates no heads", C::NAME)
                    }
                    _ => format!(
                        "{from} may not send this (raft within a group; multicast steps, votes and queries between groups)"
                    ),
                };
                return Err(refuse(InvalidKind::Sender, why));
            }
        }
        Ok(())
    }

    fn on_timer(&mut self, cx: &mut Cx<'_, C>, timer: JessyTimer) {
        let events = match (&mut self.engine, timer) {
            (_, JessyTimer::Sweep) => return self.sweep(cx),
            (Engine::Multicast(member), JessyTimer::Raft(_)) => member.on_raft_tick(cx),
            (Engine::Multicast(member), JessyTimer::Mcast(_)) => member.on_tick(cx),
            (Engine::TwoPc(_), JessyTimer::Raft(_)) => {
                self.with_tpc(cx, |m, cx, host| m.on_raft_tick(cx, host));
                return;
            }
            (Engine::TwoPc(_), JessyTimer::Tpc(_)) => {
                self.with_tpc(cx, |m, cx, host| m.on_tick(cx, host));
                return;
            }
            _ => return,
        };
        self.handle(cx, events);
    }

    fn leads(&self) -> Option<u64> {
        match &self.engine {
            Engine::Multicast(m) => m.is_leader().then(|| m.raft().term()),
            Engine::TwoPc(m) => m.is_leader().then(|| m.raft().term()),
        }
    }

    fn apply_change(&mut self, change: &[u8]) -> Result<(), String> {
        match &mut self.engine {
            Engine::Multicast(m) => m.apply_change(change),
            Engine::TwoPc(m) => m.apply_change(change),
        }
    }

    fn stored_versions(&self) -> usize {
        self.data.versions.values().map(Vec::len).sum()
    }
}
