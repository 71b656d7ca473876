//! Genuine atomic multicast across replica groups: Skeen's timestamp protocol run over Raft groups
//! ([`super::consensus`]), as in Fritzke, Ingels, Mostéfaoui and Raynal ("Fault-tolerant total order
//! multicast to asynchronous groups", SRDS 1998) and the "white-box" treatment of Gotsman, Lefort and
//! Chockler (DSN 2019): each group acts as one reliable Skeen process whose every step is a command of its
//! Raft log.
//!
//! # The protocol
//!
//! A message `m` is addressed to a set of groups `dest(m)` (partitions; a group is a partition's replica
//! group). Each group keeps, in its replicated state, a logical clock and the messages it has accepted but
//! not delivered, each with a timestamp that is either *local* (the group's proposal) or *final*.
//!
//! 1. The origin sends `Submit(m)` to (the leader of) every group in `dest(m)`. Origins retry, so a group
//!    may see `m` more than once; its state ignores duplicates.
//! 2. The leader of group `g` proposes `Start(m)` to its log. Applying it, every member ticks the clock and
//!    gives `m` the local timestamp: the clock's next value that is the group's own (congruent to its
//!    partition modulo the number of partitions), so no two messages share a timestamp. If `g` is `m`'s
//!    only destination this timestamp is final (one consensus round in all). Otherwise the leader sends `Proposal(m, g, ts)` to every member of
//!    the other destination groups.
//! 3. Once the leader of `g` holds a proposal from every destination group, it proposes
//!    `Final(m, max of the proposals)`. Applying it, every member marks `m` final with that timestamp and
//!    raises its clock to at least it, so every message `g` starts later gets a larger timestamp.
//! 4. A member delivers, in `(timestamp, id)` order, every final message that no undelivered message
//!    precedes: an undelivered message's final timestamp is at least its local one, so nothing can later
//!    be ordered before what is delivered. All groups thus deliver in the order of `(final timestamp,
//!    id)`, one global total order: acyclic.
//!
//! Only the groups in `dest(m)` take steps for `m` (genuineness): the origin submits to them alone and
//! proposals go only to them.
//!
//! # Faults
//!
//! Everything a group decides is in its log, so it survives the crash of any minority of its members,
//! leader included: a new leader finds the undelivered messages in its applied state. What is not in the
//! log — proposals received from other groups — is re-sent: every [`McastParams::retry_ns`] a leader sends
//! its proposal again for each message still waiting for its final timestamp (and proposes `Final` again
//! when it has every proposal). Proposals go to every member of a destination group, not only to its
//! leader, so a new leader usually holds them already.
//!
//! # Message delays (the analysis the benchmark checks)
//!
//! With one-way delay `δ` between any two processes and a leader that is not the origin: submit `δ`, a
//! consensus round `2δ` (append to the followers, their acknowledgements: the leader then applies). To one
//! group: the leader delivers after **3δ** (its members learn the commit with the next append, `δ` later).
//! To several groups: submit `δ` + Start `2δ` + proposal exchange `δ` + Final `2δ` = **6δ** at the
//! leaders. A client that waits for each group's answer sees one more `δ`: 4 and 7.
//!
//! # Embedding
//!
//! The host's message type carries [`RaftWire`] and [`McastWire`], its timer type [`RaftTick`] and
//! [`McastTick`]; the host hands them to its [`McastMember`] and acts on the [`McastEvent`]s returned. The
//! host may add state of its own to the group's snapshots ([`McastMember::compact`]). Origins embed
//! [`McastOrigin`], which submits and retries.

use super::consensus::{Event, RaftGroup, RaftParams, RaftTick, RaftWire};
use serde::{Deserialize, Serialize};
use snowline_core::{Addr, Ctx, PartitionId, Protocol, ServerId, Topology};
use std::collections::{BTreeMap, BTreeSet, VecDeque};

/// A multicast message's identity: who multicast it, and its number there.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct McastId {
    pub origin: Addr,
    pub seq: u64,
}

impl std::fmt::Display for McastId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}#{}", self.origin, self.seq)
    }
}

/// A message and the groups it is addressed to (sorted, without duplicates, never empty).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct McastMsg {
    pub id: McastId,
    pub dest: Vec<PartitionId>,
    #[serde(with = "serde_bytes")]
    pub payload: Vec<u8>,
}

impl McastMsg {
    pub fn new(id: McastId, dest: impl IntoIterator<Item = PartitionId>, payload: Vec<u8>) -> Self {
        let dest: BTreeSet<PartitionId> = dest.into_iter().collect();
        Self { id, dest: dest.into_iter().collect(), payload }
    }
}

/// The multicast's own messages (Raft's travel as [`RaftWire`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum McastWire {
    /// Origin (or a member forwarding to its leader) → a member of a destination group: order `m`.
    Submit(McastMsg),
    /// The leader of `group` → the members of `m`'s other destination groups: `group`'s local timestamp.
    Proposal { id: McastId, group: PartitionId, ts: u64 },
    /// A member of a group where `m` is final → a proposer that is still waiting: `m`'s final timestamp
    /// (the proposal it needs may have been lost after this group stopped re-sending it).
    Decided { id: McastId, ts: u64 },
}

/// The multicast's periodic timer at a member (re-sends proposals).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct McastTick {
    pub partition: PartitionId,
}

/// An origin's retry timer for its message `seq`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct McastRetry {
    pub seq: u64,
    pub attempt: u32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct McastParams {
    pub raft: RaftParams,
    /// A leader re-sends its proposals for messages still without a final timestamp this often; an origin
    /// re-submits to groups that have not answered after this long.
    pub retry_ns: u64,
    /// Keep a log of every step and delivery ([`McastMember::log`]) for the multicast checker. Grows
    /// without bound: tests and benchmarks only.
    pub record: bool,
    /// A deliberately broken variant for the checker's tests: every group delivers at its local timestamp,
    /// skipping the exchange and the final-timestamp step. Not atomic multicast.
    #[doc(hidden)]
    pub skip_final: bool,
}

impl Default for McastParams {
    fn default() -> Self {
        Self { raft: RaftParams::default(), retry_ns: 1_000_000_000, record: false, skip_final: false }
    }
}

/// What the host acts on, in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum McastEvent {
    /// Deliver `msg` (at every member of every destination group, in the same global order). `ts` is its
    /// final timestamp; `position` counts this group's deliveries from 1.
    Deliver { msg: McastMsg, ts: u64, position: u64 },
    /// Replace the host's own state by `data` (what it gave [`McastMember::compact`]): this member lagged
    /// behind a compacted log.
    Restore { data: Vec<u8> },
    /// The leader this member knows changed.
    Leader { leader: Option<ServerId>, term: u64 },
}

/// One record of a member's log ([`McastParams::record`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum McastRecord {
    /// The member took a step on message `id` (received it or a proposal for it, or applied a command).
    Step { id: McastId },
    /// The member delivered `id` to its host.
    Deliver { id: McastId, ts: u64 },
}

/// A command of a group's Raft log.
#[derive(Clone, Debug, Serialize, Deserialize)]
enum Command {
    Start(McastMsg),
    Final { id: McastId, ts: u64 },
}

#[derive(Clone, Debug, Serialize, Deserialize)]
struct Undelivered {
    msg: McastMsg,
    ts: u64,
    is_final: bool,
}

/// A group's replicated multicast state (what its snapshots hold, with the host's state).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
struct GroupState {
    clock: u64,
    undelivered: BTreeMap<McastId, Undelivered>,
    /// `(ts, id)` of every undelivered message: the delivery order.
    queue: BTreeSet<(u64, McastId)>,
    /// Per origin, the numbers delivered (duplicates of these are ignored). Origins number their messages
    /// 1, 2, 3…, so this is a watermark plus the few delivered out of order.
    delivered: BTreeMap<Addr, Delivered>,
    deliveries: u64,
    /// Final timestamps of the latest [`KEEP_DECIDED`] delivered messages, to answer groups still waiting
    /// for them ([`McastWire::Decided`]).
    decided: BTreeMap<McastId, u64>,
    decided_order: VecDeque<McastId>,
}

/// How many delivered messages' final timestamps a group keeps for laggards. A group that waits longer
/// than this many deliveries for a decided message's final timestamp waits for good: far beyond any retry
/// schedule (a group waits at most a few retry ticks while the others deliver).
const KEEP_DECIDED: usize = 100_000;

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
struct Delivered {
    /// Every number up to this one is delivered.
    upto: u64,
    above: BTreeSet<u64>,
}

impl Delivered {
    fn contains(&self, seq: u64) -> bool {
        seq <= self.upto || self.above.contains(&seq)
    }

    fn insert(&mut self, seq: u64) {
        self.above.insert(seq);
        while self.above.remove(&(self.upto + 1)) {
            self.upto += 1;
        }
    }
}

impl GroupState {
    fn is_delivered(&self, id: &McastId) -> bool {
        self.delivered.get(&id.origin).is_some_and(|d| d.contains(id.seq))
    }
}

/// A snapshot: the multicast's state and the host's.
#[derive(Serialize, Deserialize)]
struct Snapshot {
    group: GroupState,
    #[serde(with = "serde_bytes")]
    host: Vec<u8>,
}

/// A [`Snapshot`] as it is written (the same fields, so the same bytes), borrowing the state: a compaction
/// serializes the multicast's state in place instead of cloning it first.
#[derive(Serialize)]
struct SnapshotRef<'a> {
    group: &'a GroupState,
    #[serde(with = "serde_bytes")]
    host: &'a [u8],
}

/// A member of a partition's replica group, as a multicast endpoint. See the module docs.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct McastMember {
    me: ServerId,
    topology: Topology,
    params: McastParams,
    raft: RaftGroup,
    state: GroupState,
    /// Proposals heard from other groups for messages not yet final here: id → group → ts. Volatile.
    #[serde(skip)]
    proposals: BTreeMap<McastId, BTreeMap<PartitionId, u64>>,
    /// Messages this member proposed `Start` for while leading and has not seen applied (not re-proposed
    /// on a duplicate submit). Volatile.
    #[serde(skip)]
    starting: BTreeSet<McastId>,
    /// Messages whose `Final` this member proposed since the last retry tick. Volatile.
    #[serde(skip)]
    finishing: BTreeSet<McastId>,
    /// Submits that reached this member while it knew no leader (a group just started, or electing): sent
    /// on (or proposed) once one is known, instead of waiting for the origin's retry. Volatile, bounded.
    #[serde(skip)]
    leaderless: Vec<McastMsg>,
    log: Vec<McastRecord>,
}

/// Bound on submits a member holds while it knows no leader.
const MAX_LEADERLESS: usize = 1024;
/// Bound on proposals held for messages this group has not started: a peer cannot grow it without limit.
const MAX_EARLY_PROPOSALS: usize = 100_000;

/// The largest timestamp a proposal or a decision may carry. A group's clock counts the messages it started
/// (and follows the final timestamps it applied), so real timestamps stay far below this; a larger one is
/// forged, and would overflow the clock.
pub const MAX_TIMESTAMP: u64 = u64::MAX / 2;

impl McastMember {
    pub fn new(me: ServerId, topology: Topology, params: McastParams) -> Self {
        Self {
            me,
            topology,
            params,
            raft: RaftGroup::new(me, topology, params.raft),
            state: GroupState::default(),
            proposals: BTreeMap::new(),
            starting: BTreeSet::new(),
            finishing: BTreeSet::new(),
            leaderless: Vec::new(),
            log: Vec::new(),
        }
    }

    /// The group's consensus member (leadership, term, applied index).
    /// Redo a change of the group's log on a member rebuilt from a checkpoint ([`RaftGroup::apply_change`]).
    pub fn apply_change(&mut self, change: &[u8]) -> Result<(), String> {
        self.raft.apply_change(change)
    }

    pub fn raft(&self) -> &RaftGroup {
        &self.raft
    }

    pub fn is_leader(&self) -> bool {
        self.raft.is_leader()
    }

    /// The recorded steps and deliveries ([`McastParams::record`]).
    pub fn log(&self) -> &[McastRecord] {
        &self.log
    }

    /// Messages accepted and not yet delivered.
    pub fn undelivered(&self) -> usize {
        self.state.undelivered.len()
    }

    /// Whether `id` has been delivered here.
    pub fn is_delivered(&self, id: &McastId) -> bool {
        self.state.is_delivered(id)
    }

    /// Arm the timers; a fresh group's member 0 campaigns at once. Call from the host's `on_start`.
    pub fn start<P: Protocol>(&mut self, cx: &mut Ctx<'_, P>) -> Vec<McastEvent>
    where
        P::Msg: From<RaftWire> + From<McastWire>,
        P::Timer: From<RaftTick> + From<McastTick>,
    {
        cx.set_timer(self.params.retry_ns, McastTick { partition: self.me.partition }.into());
        let campaign = self.topology.member_index(self.me) == Some(0) && self.raft.term() == 0;
        let events = self.raft.start(cx, campaign);
        self.handle(cx, events)
    }

    pub fn on_raft_tick<P: Protocol>(&mut self, cx: &mut Ctx<'_, P>) -> Vec<McastEvent>
    where
        P::Msg: From<RaftWire> + From<McastWire>,
        P::Timer: From<RaftTick> + From<McastTick>,
    {
        let events = self.raft.on_tick(cx);
        self.handle(cx, events)
    }

    pub fn on_raft<P: Protocol>(
        &mut self,
        cx: &mut Ctx<'_, P>,
        from: ServerId,
        wire: RaftWire,
    ) -> Result<Vec<McastEvent>, String>
    where
        P::Msg: From<RaftWire> + From<McastWire>,
        P::Timer: From<RaftTick> + From<McastTick>,
    {
        let events = self.raft.on_wire(cx, from, wire)?;
        Ok(self.handle(cx, events))
    }

    /// The retry tick: a leader re-sends its proposals and re-proposes what it can finish.
    pub fn on_tick<P: Protocol>(&mut self, cx: &mut Ctx<'_, P>) -> Vec<McastEvent>
    where
        P::Msg: From<RaftWire> + From<McastWire>,
        P::Timer: From<RaftTick> + From<McastTick>,
    {
        cx.set_timer(self.params.retry_ns, McastTick { partition: self.me.partition }.into());
        self.finishing.clear();
        self.starting.clear();
        if !self.is_leader() {
            return Vec::new();
        }
        let mut events = Vec::new();
        for (msg, ts) in self.waiting() {
            self.send_proposal(cx, &msg, ts);
            // A destination group not heard from by this tick may never have received the message (its origin
            // crashed, or gave up, after reaching this group only): relay it, or this group's delivery
            // queue waits behind it for good.
            let heard = self.proposals.get(&msg.id);
            let silent: Vec<PartitionId> = msg
                .dest
                .iter()
                .copied()
                .filter(|g| *g != self.me.partition && heard.is_none_or(|h| !h.contains_key(g)))
                .collect();
            for g in silent {
                for member in self.topology.group(g) {
                    cx.send(member, McastWire::Submit(msg.clone()).into());
                }
            }
            events.extend(self.try_finish(cx, msg.id));
        }
        events
    }

    /// A multicast message arrived from `from`.
    pub fn on_wire<P: Protocol>(
        &mut self,
        cx: &mut Ctx<'_, P>,
        from: Addr,
        wire: McastWire,
    ) -> Result<Vec<McastEvent>, String>
    where
        P::Msg: From<RaftWire> + From<McastWire>,
        P::Timer: From<RaftTick> + From<McastTick>,
    {
        match wire {
            McastWire::Submit(msg) => self.on_submit(cx, msg),
            McastWire::Proposal { id, group, ts } => {
                let Addr::Server(sender) = from else {
                    return Err(format!("a proposal for {id} from {from}, not a server"));
                };
                if sender.partition != group || self.topology.member_index(sender).is_none() {
                    return Err(format!("{sender} sent a proposal for group {group}"));
                }
                if group == self.me.partition {
                    return Err(format!("{sender} proposed a timestamp for {}'s own group", self.me));
                }
                if ts > MAX_TIMESTAMP {
                    return Err(format!("{sender} proposed {id} at {ts}, beyond any group's clock"));
                }
                self.record(McastRecord::Step { id });
                let decided = match self.state.undelivered.get(&id) {
                    Some(u) if u.is_final => Some(u.ts),
                    Some(_) => None,
                    None => self.state.decided.get(&id).copied(),
                };
                if let Some(ts) = decided {
                    // The proposer still waits for this group's proposal: tell it the outcome instead
                    // (the leader does; a follower's answer would only repeat it).
                    if self.is_leader() {
                        cx.send(sender, McastWire::Decided { id, ts }.into());
                    }
                    return Ok(Vec::new());
                }
                if self.state.is_delivered(&id) {
                    return Ok(Vec::new());
                }
                if !self.state.undelivered.contains_key(&id) && self.proposals.len() >= MAX_EARLY_PROPOSALS {
                    return Err("too many proposals for messages this group has not started".into());
                }
                self.proposals.entry(id).or_default().insert(group, ts);
                Ok(self.try_finish(cx, id))
            }
            McastWire::Decided { id, ts } => {
                let Addr::Server(sender) = from else {
                    return Err(format!("a decision for {id} from {from}, not a server"));
                };
                if sender.partition == self.me.partition || self.topology.member_index(sender).is_none() {
                    return Err(format!("{sender} sent a decision for {id}, not from another group"));
                }
                if ts > MAX_TIMESTAMP {
                    return Err(format!("{sender} decided {id} at {ts}, beyond any group's clock"));
                }
                self.record(McastRecord::Step { id });
                let Some(u) = self.state.undelivered.get(&id).filter(|u| !u.is_final) else { return Ok(Vec::new()) };
                if !u.msg.dest.contains(&sender.partition) {
                    return Err(format!("{sender} sent a decision for {id}, not addressed to its group"));
                }
                if ts < u.ts {
                    return Err(format!("{sender} decided {id} at {ts}, below this group's proposal {}", u.ts));
                }
                if !self.is_leader() || !self.finishing.insert(id) {
                    return Ok(Vec::new());
                }
                Ok(self.propose(cx, Command::Final { id, ts }))
            }
        }
    }

    fn on_submit<P: Protocol>(&mut self, cx: &mut Ctx<'_, P>, msg: McastMsg) -> Result<Vec<McastEvent>, String>
    where
        P::Msg: From<RaftWire> + From<McastWire>,
        P::Timer: From<RaftTick> + From<McastTick>,
    {
        let valid_dest = !msg.dest.is_empty()
            && msg.dest.windows(2).all(|w| w[0] < w[1])
            && msg.dest.iter().all(|p| *p < self.topology.partitions);
        if !valid_dest {
            return Err(format!("message {} has an invalid destination set {:?}", msg.id, msg.dest));
        }
        if !msg.dest.contains(&self.me.partition) {
            return Err(format!("message {} is not addressed to {}'s group", msg.id, self.me));
        }
        self.record(McastRecord::Step { id: msg.id });
        if self.state.is_delivered(&msg.id) || self.state.undelivered.contains_key(&msg.id) {
            return Ok(Vec::new());
        }
        if !self.is_leader() {
            // Forward to the leader; without one, hold it until one is known (the origin's retry covers
            // what does not fit).
            match self.raft.leader() {
                Some(leader) => cx.send(leader, McastWire::Submit(msg).into()),
                None if self.leaderless.len() < MAX_LEADERLESS => self.leaderless.push(msg),
                None => {}
            }
            return Ok(Vec::new());
        }
        if !self.starting.insert(msg.id) {
            return Ok(Vec::new());
        }
        Ok(self.propose(cx, Command::Start(msg)))
    }

    fn propose<P: Protocol>(&mut self, cx: &mut Ctx<'_, P>, cmd: Command) -> Vec<McastEvent>
    where
        P::Msg: From<RaftWire> + From<McastWire>,
        P::Timer: From<RaftTick> + From<McastTick>,
    {
        let data = postcard::to_stdvec(&cmd).expect("a command serializes");
        match self.raft.propose(cx, data) {
            Ok(events) => self.handle(cx, events),
            // Lost the leadership meanwhile: the origin's retry (or the next leader's tick) takes over.
            Err(_) => Vec::new(),
        }
    }

    /// As leader, propose `Final` for `id` once every destination group's proposal is known.
    fn try_finish<P: Protocol>(&mut self, cx: &mut Ctx<'_, P>, id: McastId) -> Vec<McastEvent>
    where
        P::Msg: From<RaftWire> + From<McastWire>,
        P::Timer: From<RaftTick> + From<McastTick>,
    {
        if !self.is_leader() || self.finishing.contains(&id) {
            return Vec::new();
        }
        let Some(u) = self.state.undelivered.get(&id).filter(|u| !u.is_final) else { return Vec::new() };
        let heard = self.proposals.get(&id);
        let mut ts = u.ts;
        for g in &u.msg.dest {
            if *g == self.me.partition {
                continue;
            }
            match heard.and_then(|h| h.get(g)) {
                Some(t) => ts = ts.max(*t),
                None => return Vec::new(),
            }
        }
        self.finishing.insert(id);
        self.propose(cx, Command::Final { id, ts })
    }

    fn send_proposal<P: Protocol>(&mut self, cx: &mut Ctx<'_, P>, msg: &McastMsg, ts: u64)
    where
        P::Msg: From<McastWire>,
    {
        for g in msg.dest.iter().filter(|g| **g != self.me.partition) {
            for member in self.topology.group(*g) {
                cx.send(member, McastWire::Proposal { id: msg.id, group: self.me.partition, ts }.into());
            }
        }
    }

    fn handle<P: Protocol>(&mut self, cx: &mut Ctx<'_, P>, events: Vec<Event>) -> Vec<McastEvent>
    where
        P::Msg: From<RaftWire> + From<McastWire>,
        P::Timer: From<RaftTick> + From<McastTick>,
    {
        let mut out = Vec::new();
        let mut took_over = false;
        // Messages started here: proposals from the other groups may have arrived before.
        let mut started = Vec::new();
        for event in events {
            match event {
                Event::Restore { data, .. } => {
                    // Only snapshots this component wrote reach here.
                    if let Ok(snap) = postcard::from_bytes::<Snapshot>(&data) {
                        if self.params.record {
                            // The snapshot delivers, in the group's order, what this member had not
                            // delivered yet (as far as the kept final timestamps reach).
                            let old = &self.state;
                            let caught_up: Vec<McastRecord> = snap
                                .group
                                .decided_order
                                .iter()
                                .filter(|id| !old.is_delivered(id))
                                .filter_map(|id| {
                                    Some(McastRecord::Deliver { id: *id, ts: *snap.group.decided.get(id)? })
                                })
                                .collect();
                            self.log.extend(caught_up);
                        }
                        self.state = snap.group;
                        out.push(McastEvent::Restore { data: snap.host });
                    }
                }
                Event::Apply { data, .. } => {
                    if let Ok(cmd) = postcard::from_bytes::<Command>(&data) {
                        if let Command::Start(msg) = &cmd {
                            started.push(msg.id);
                        }
                        self.apply(cx, cmd, &mut out);
                    }
                }
                Event::ReadReady { .. } => {}
                Event::Leader { leader, term } => {
                    if self.raft.is_leader() {
                        // A new leader takes over the exchange for what waits (proposals may have been lost).
                        for (msg, ts) in self.waiting() {
                            self.send_proposal(cx, &msg, ts);
                        }
                        took_over = true;
                    }
                    // Submits held for want of a leader go to it now (or are started here).
                    let known = self.raft.is_leader() || leader.is_some_and(|l| l != self.me);
                    let held = if known { std::mem::take(&mut self.leaderless) } else { Vec::new() };
                    for msg in held {
                        if self.raft.is_leader() {
                            if self.starting.insert(msg.id) && !self.state.undelivered.contains_key(&msg.id) {
                                let more = self.propose(cx, Command::Start(msg));
                                out.extend(more);
                            }
                        } else if let Some(to) = leader.filter(|l| *l != self.me) {
                            cx.send(to, McastWire::Submit(msg).into());
                        }
                    }
                    out.push(McastEvent::Leader { leader, term });
                }
            }
        }
        if self.is_leader() {
            if took_over {
                // Proposals heard while following may already complete some messages.
                started = self.state.undelivered.values().filter(|u| !u.is_final).map(|u| u.msg.id).collect();
            }
            for id in started {
                let more = self.try_finish(cx, id);
                out.extend(more);
            }
        }
        out
    }

    fn apply<P: Protocol>(&mut self, cx: &mut Ctx<'_, P>, cmd: Command, out: &mut Vec<McastEvent>)
    where
        P::Msg: From<McastWire>,
    {
        match cmd {
            Command::Start(msg) => {
                let id = msg.id;
                self.starting.remove(&id);
                self.record(McastRecord::Step { id });
                if self.state.is_delivered(&id) || self.state.undelivered.contains_key(&id) {
                    return;
                }
                // The next timestamp that is this group's own (≡ its partition, modulo the number of
                // partitions), so no two groups propose the same one and final timestamps are unique: one
                // message per timestamp, which hosts may use as a global stamp. Saturating: timestamps from
                // other groups are bounded by MAX_TIMESTAMP, far from the end.
                let groups = u64::from(self.topology.partitions);
                let ts = (self.state.clock / groups)
                    .saturating_add(1)
                    .saturating_mul(groups)
                    .saturating_add(u64::from(self.me.partition));
                self.state.clock = ts;
                let is_final = msg.dest.len() == 1 || self.params.skip_final;
                if !is_final && self.is_leader() {
                    self.send_proposal(cx, &msg, ts);
                }
                self.state.queue.insert((ts, id));
                self.state.undelivered.insert(id, Undelivered { msg, ts, is_final });
            }
            Command::Final { id, ts } => {
                self.record(McastRecord::Step { id });
                self.finishing.remove(&id);
                self.proposals.remove(&id);
                let Some(u) = self.state.undelivered.get_mut(&id).filter(|u| !u.is_final) else { return };
                self.state.queue.remove(&(u.ts, id));
                u.ts = ts;
                u.is_final = true;
                self.state.queue.insert((ts, id));
                self.state.clock = self.state.clock.max(ts);
            }
        }
        self.deliver_ready(out);
    }

    fn deliver_ready(&mut self, out: &mut Vec<McastEvent>) {
        while let Some(&(ts, id)) = self.state.queue.first() {
            if !self.state.undelivered.get(&id).is_some_and(|u| u.is_final) {
                break;
            }
            self.state.queue.pop_first();
            let u = self.state.undelivered.remove(&id).expect("queued messages are undelivered");
            self.state.delivered.entry(id.origin).or_default().insert(id.seq);
            self.state.deliveries += 1;
            self.state.decided.insert(id, ts);
            self.state.decided_order.push_back(id);
            if self.state.decided_order.len() > KEEP_DECIDED
                && let Some(old) = self.state.decided_order.pop_front()
            {
                self.state.decided.remove(&old);
            }
            self.proposals.remove(&id);
            self.record(McastRecord::Deliver { id, ts });
            out.push(McastEvent::Deliver { msg: u.msg, ts, position: self.state.deliveries });
        }
    }

    /// Whether the log holds enough applied entries to compact.
    pub fn wants_compaction(&self) -> bool {
        self.raft.wants_compaction()
    }

    /// Compact the log into a snapshot of the multicast state and `host`, the host's state at this point.
    pub fn compact<P: Protocol>(&mut self, cx: &mut Ctx<'_, P>, host: Vec<u8>) {
        let snap = SnapshotRef { group: &self.state, host: &host };
        self.raft.compact(cx, postcard::to_stdvec(&snap).expect("a snapshot serializes"));
    }

    /// Messages still without a final timestamp here, with this group's proposal.
    fn waiting(&self) -> Vec<(McastMsg, u64)> {
        self.state.undelivered.values().filter(|u| !u.is_final).map(|u| (u.msg.clone(), u.ts)).collect()
    }

    fn record(&mut self, r: McastRecord) {
        if self.params.record {
            self.log.push(r);
        }
    }
}

/// An origin's multicast in flight.
#[derive(Clone, Debug)]
struct InFlight {
    msg: McastMsg,
    /// Destination groups that have not answered yet, each with the member to try next.
    waiting: BTreeMap<PartitionId, ServerId>,
    attempt: u32,
}

/// Who may hand a member `me` the `Submit` of `msg`: its origin (a client multicasting its own message), or a
/// member of one of its destination groups other than `me` (a member forwarding it to its leader, or the
/// leader of another destination group relaying it). Hosts check this before they look at the payload.
pub fn check_submit_sender(
    topology: &Topology,
    me: ServerId,
    from: Addr,
    msg: &McastMsg,
) -> Result<(), (snowline_core::InvalidKind, String)> {
    use snowline_core::InvalidKind;
    match from {
        Addr::Client(_) if msg.id.origin != from => {
            Err((InvalidKind::Sender, format!("a client submits only its own messages, not {}", msg.id)))
        }
        Addr::Client(_) => Ok(()),
        Addr::Server(s) if !topology.contains(s) || s == me || !msg.dest.contains(&s.partition) => {
            let why = format!("{s} is not in a destination group of {} (only those forward a submit)", msg.id);
            Err((InvalidKind::Sender, why))
        }
        Addr::Server(_) => Ok(()),
    }
}

/// The origin side: numbers messages, submits them to their destination groups, and re-submits to the
/// groups that have not answered (the host tells it which did, [`McastOrigin::answered`]).
#[derive(Clone, Debug)]
pub struct McastOrigin {
    me: Addr,
    topology: Topology,
    retry_ns: u64,
    next_seq: u64,
    /// Per partition: the member believed to lead.
    leaders: Vec<ServerId>,
    in_flight: BTreeMap<u64, InFlight>,
    /// Every message multicast, with its destinations (when recording).
    sent: Option<Vec<(McastId, Vec<PartitionId>)>>,
}

impl McastOrigin {
    /// An origin at `me`, first trying the members nearest `dc`; with `record` it remembers what it
    /// multicast ([`McastOrigin::sent`]).
    pub fn new(me: Addr, dc: snowline_core::DcId, topology: Topology, retry_ns: u64, record: bool) -> Self {
        let leaders = (0..topology.partitions).map(|p| topology.nearest(dc, p)).collect();
        let sent = record.then(Vec::new);
        Self { me, topology, retry_ns, next_seq: 0, leaders, in_flight: BTreeMap::new(), sent }
    }

    /// Every message multicast so far and its destinations (empty unless recording).
    pub fn sent(&self) -> &[(McastId, Vec<PartitionId>)] {
        self.sent.as_deref().unwrap_or(&[])
    }

    /// Multicast `payload` to `dest` (deduplicated); returns its id.
    pub fn multicast<P: Protocol>(
        &mut self,
        cx: &mut Ctx<'_, P>,
        dest: impl IntoIterator<Item = PartitionId>,
        payload: Vec<u8>,
    ) -> McastId
    where
        P::Msg: From<McastWire>,
        P::Timer: From<McastRetry>,
    {
        self.next_seq += 1;
        let id = McastId { origin: self.me, seq: self.next_seq };
        let msg = McastMsg::new(id, dest, payload);
        if let Some(sent) = &mut self.sent {
            sent.push((id, msg.dest.clone()));
        }
        let waiting = msg.dest.iter().map(|p| (*p, self.leaders[usize::from(*p)])).collect();
        self.in_flight.insert(id.seq, InFlight { msg, waiting, attempt: 0 });
        self.send(cx, id.seq);
        id
    }

    fn send<P: Protocol>(&mut self, cx: &mut Ctx<'_, P>, seq: u64)
    where
        P::Msg: From<McastWire>,
        P::Timer: From<McastRetry>,
    {
        let Some(f) = self.in_flight.get_mut(&seq) else { return };
        f.attempt += 1;
        for to in f.waiting.values() {
            cx.send(*to, McastWire::Submit(f.msg.clone()).into());
        }
        cx.set_timer(self.retry_ns, McastRetry { seq, attempt: f.attempt }.into());
    }

    /// Group `from.partition` answered for `id` (the host's reply on delivery); true once every
    /// destination group has, and the multicast is over.
    pub fn answered(&mut self, id: McastId, from: ServerId) -> bool {
        let Some(f) = self.in_flight.get_mut(&id.seq).filter(|f| f.msg.id == id) else { return false };
        if f.waiting.remove(&from.partition).is_some() && self.topology.member_index(from).is_some() {
            self.leaders[usize::from(from.partition)] = from;
        }
        if f.waiting.is_empty() {
            self.in_flight.remove(&id.seq);
            return true;
        }
        false
    }

    /// Give up on `id` (the host's operation failed some other way: a timeout, a broken connection). The
    /// members that did not answer may be down: the next multicast starts with the next member of their
    /// groups.
    pub fn forget(&mut self, id: McastId) {
        if let Some(f) = self.in_flight.remove(&id.seq) {
            for (p, member) in f.waiting {
                self.leaders[usize::from(p)] = self.topology.next_member(member);
            }
        }
    }

    /// The retry timer fired: re-submit to the next member of every group that has not answered.
    pub fn on_retry<P: Protocol>(&mut self, cx: &mut Ctx<'_, P>, t: McastRetry)
    where
        P::Msg: From<McastWire>,
        P::Timer: From<McastRetry>,
    {
        let topology = self.topology;
        let Some(f) = self.in_flight.get_mut(&t.seq).filter(|f| f.attempt == t.attempt) else { return };
        for to in f.waiting.values_mut() {
            *to = topology.next_member(*to);
        }
        self.send(cx, t.seq);
    }

    /// Multicasts not yet answered by every destination.
    pub fn in_flight(&self) -> usize {
        self.in_flight.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `serde_bytes` changes how a payload is encoded (one copy, not a call per byte), not the bytes written:
    /// logs and snapshots stored before it read back the same.
    #[test]
    fn a_byte_payload_encodes_as_a_sequence_of_bytes_did() {
        #[derive(Serialize)]
        struct Before {
            id: McastId,
            dest: Vec<PartitionId>,
            payload: Vec<u8>,
        }
        let id = McastId { origin: Addr::Client(snowline_core::ClientId(7)), seq: 300 };
        let payload: Vec<u8> = (0..1_000u32).map(|i| (i * 37 % 251) as u8).collect();
        let now = McastMsg::new(id, [2, 0], payload.clone());
        let before = Before { id, dest: vec![0, 2], payload };
        let bytes = postcard::to_allocvec(&now).expect("encodes");
        assert_eq!(bytes, postcard::to_allocvec(&before).expect("encodes"));
        assert_eq!(postcard::from_bytes::<McastMsg>(&bytes).expect("decodes"), now);
    }

    /// A compaction writes its snapshot from borrowed state: the bytes are those of the owned snapshot a
    /// restore reads back.
    #[test]
    fn a_snapshot_written_from_borrowed_state_reads_back_as_the_owned_one() {
        let mut group = GroupState { clock: 41, deliveries: 3, ..GroupState::default() };
        let id = McastId { origin: Addr::Client(snowline_core::ClientId(2)), seq: 9 };
        group.decided.insert(id, 40);
        group.decided_order.push_back(id);
        group.queue.insert((12, id));
        let host: Vec<u8> = (0..300u32).map(|i| (i % 7) as u8).collect();
        let borrowed = postcard::to_allocvec(&SnapshotRef { group: &group, host: &host }).expect("encodes");
        let owned = postcard::to_allocvec(&Snapshot { group: group.clone(), host: host.clone() }).expect("encodes");
        assert_eq!(borrowed, owned);
        let back = postcard::from_bytes::<Snapshot>(&borrowed).expect("decodes");
        assert_eq!((back.group.clock, back.group.decided.get(&id), back.host), (41, Some(&40), host));
    }
}
