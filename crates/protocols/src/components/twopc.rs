//! Two-phase commit over replica groups: the termination Jessy's framework calls `_2pc`, and what the
//! NMSI paper's baselines (GMU, Walter) used before they were moved onto atomic multicast (§V-A). Written
//! once as a component, beside [`crate::components::multicast`], so the two terminations can be compared
//! on one substrate (`snowline bench-multicast` prints both).
//!
//! # Protocol
//!
//! Every participant is a replica group (a partition's [`RaftGroup`]), so no single crash blocks a
//! transaction: each step a group takes is a command of its Raft log, and a new leader picks up where the
//! old one stopped. The transaction's *coordinator* is its lowest participant group (Spanner's choice of a
//! replicated coordinator, which removes classic 2PC's blocking on a crashed coordinator).
//!
//! 1. The origin sends `Begin` to every participant group (to the member it believes leads).
//! 2. Each group's leader proposes `Prepare`. Applying it, every member asks the host to prepare its part
//!    ([`TpcHost::prepare`]: lock, certify, read); the answer is the group's vote, replicated with it. The
//!    leader of a participant sends the vote to the coordinator group.
//! 3. The coordinator's leader, once it knows every vote (its own from its log), proposes `Decide`: commit
//!    if all voted yes, abort at the first no. The decision is durable once that entry commits; applying
//!    it, the coordinator's leader answers the origin (`Outcome`) and tells the participants (`Decision`).
//! 4. A participant's leader proposes the decision; applying it, every member hands it to the host
//!    ([`TpcHost::decide`]) and forgets the transaction.
//!
//! A transaction with one participant commits in one round: the coordinator decides while applying its
//! own `Prepare` (one-phase commit).
//!
//! # Message delays
//!
//! With δ one message delay and a Raft round two (append, acknowledgement), a transaction over one group
//! takes Begin 1 + Prepare round 2 + Outcome 1 = **4δ**; over several groups Begin 1 + Prepare round 2 +
//! Vote 1 + Decide round 2 + Outcome 1 = **7δ** at the client — the same as Skeen's multicast (Submit 1,
//! Start 2, Proposal 1, Final 2, answer 1), but a participant holds its prepared state (its locks) for
//! a further Decision 1 + round 2 after the client has its answer.
//!
//! # Faults
//!
//! Lost messages are re-sent on the retry tick: the origin re-sends `Begin` to the next member of every
//! group while it has no outcome; a participant's leader re-sends its vote for every transaction it has
//! held prepared for a whole tick, and the coordinator answers a re-sent vote with the decision. A
//! coordinator asked about a transaction it never prepared (the origin's `Begin` to it was lost) decides
//! abort (presumed abort) through its log, so a later `Begin` finds it decided. A coordinator that has
//! held a transaction prepared for a whole tick without every vote decides abort (a timeout: a
//! participant whose `Begin` was lost after its origin gave up would otherwise never vote).

use super::consensus::{Event, RaftGroup, RaftParams, RaftTick, RaftWire};
use super::multicast::McastId;
use serde::{Deserialize, Serialize};
use snowline_core::{Addr, Ctx, PartitionId, Protocol, ServerId, Topology};
use std::collections::{BTreeMap, BTreeSet, VecDeque};

/// A transaction's id: its origin and the origin's sequence number (the multicast's numbering).
pub type TxnId = McastId;

/// The host's side: what a group does with a transaction's part. Called while applying log entries, so
/// it must be deterministic over the host's replicated state.
pub trait TpcHost {
    /// Prepare `payload`'s part for this group (take its locks, certify it, read): `Some(part)` votes yes
    /// (the part travels to the coordinator and back in the decision), `None` votes no.
    fn prepare(&mut self, id: TxnId, payload: &[u8]) -> Option<Vec<u8>>;
    /// The transaction prepared here is decided: `Some(parts)` (every group's part) commits, `None`
    /// aborts.
    fn decide(&mut self, id: TxnId, commit: Option<&[(PartitionId, Vec<u8>)]>);
    /// The host's state, for a snapshot of the log.
    fn snapshot(&self) -> Vec<u8>;
    /// Replace the host's state by what [`TpcHost::snapshot`] returned at another member.
    fn restore(&mut self, data: &[u8]);
}

/// The component's messages (Raft's travel as [`RaftWire`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum TpcWire {
    /// Origin → a member of each participant group: run transaction `id`.
    Begin {
        id: TxnId,
        participants: Vec<PartitionId>,
        #[serde(with = "serde_bytes")]
        payload: Vec<u8>,
    },
    /// A participant's leader → the coordinator group: its vote (`Some(part)` yes). `again` marks a
    /// re-sent vote, which the coordinator may answer with presumed abort.
    Vote {
        id: TxnId,
        group: PartitionId,
        #[serde(with = "serde_bytes")]
        part: Option<Vec<u8>>,
        again: bool,
    },
    /// The coordinator's leader → a participant group: the decision (`Some(parts)` commit).
    Decision { id: TxnId, parts: Option<Vec<(PartitionId, Vec<u8>)>> },
    /// The coordinator's leader → the origin: the outcome (`Some(parts)` committed).
    Outcome { id: TxnId, parts: Option<Vec<(PartitionId, Vec<u8>)>> },
}

impl TpcWire {
    /// Whether server `to`, sent this by a client, answers it (`Message::expects_reply`): an origin sends
    /// `Begin` to every participant group and only the coordinator's (the first) answers, with `Outcome`.
    pub fn answered_at(&self, to: Addr) -> bool {
        match (self, to) {
            (TpcWire::Begin { participants, .. }, Addr::Server(s)) => participants.first() == Some(&s.partition),
            _ => true,
        }
    }
}

/// The component's retry tick at a member.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TpcTick {
    pub partition: PartitionId,
}

/// An origin's retry timer for its transaction `seq`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TpcRetry {
    pub seq: u64,
    pub attempt: u32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TpcParams {
    pub raft: RaftParams,
    /// How often leaders re-send votes and origins re-send `Begin`.
    pub retry_ns: u64,
}

impl Default for TpcParams {
    fn default() -> Self {
        Self { raft: RaftParams::default(), retry_ns: 1_000_000_000 }
    }
}

type Parts = Vec<(PartitionId, Vec<u8>)>;

#[derive(Clone, Debug, Serialize, Deserialize)]
enum Command {
    Prepare {
        id: TxnId,
        participants: Vec<PartitionId>,
        #[serde(with = "serde_bytes")]
        payload: Vec<u8>,
    },
    Decide {
        id: TxnId,
        parts: Option<Parts>,
    },
}

/// A transaction prepared here and not yet decided.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct Prepared {
    participants: Vec<PartitionId>,
    vote: Option<Vec<u8>>,
}

/// A group's replicated state.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
struct GroupState {
    prepared: BTreeMap<TxnId, Prepared>,
    /// Outcomes of the latest [`KEEP_DECIDED`] transactions decided here, to answer duplicates.
    decided: BTreeMap<TxnId, Option<Parts>>,
    decided_order: VecDeque<TxnId>,
}

/// How many decided transactions a group remembers (to answer a re-sent `Begin` or vote).
const KEEP_DECIDED: usize = 100_000;
/// Bound on votes held for transactions the coordinator has not prepared yet.
const MAX_EARLY_VOTES: usize = 100_000;

#[derive(Serialize, Deserialize)]
struct Snapshot {
    group: GroupState,
    #[serde(with = "serde_bytes")]
    host: Vec<u8>,
}

/// A member of a participant group.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct TpcMember {
    me: ServerId,
    topology: Topology,
    params: TpcParams,
    raft: RaftGroup,
    state: GroupState,
    /// As the coordinator's leader: votes heard, per transaction and group. Volatile.
    #[serde(skip)]
    votes: BTreeMap<TxnId, BTreeMap<PartitionId, Option<Vec<u8>>>>,
    /// Commands this member proposed as leader and has not seen applied. Volatile.
    #[serde(skip)]
    proposing: BTreeSet<(TxnId, bool)>,
    /// Prepared transactions seen at the previous tick (their votes are re-sent at this one). Volatile.
    #[serde(skip)]
    aging: BTreeSet<TxnId>,
}

/// The host, carried down to where log entries are applied.
struct Apply<'h> {
    host: &'h mut dyn TpcHost,
}

impl TpcMember {
    pub fn new(me: ServerId, topology: Topology, params: TpcParams) -> Self {
        Self {
            me,
            topology,
            params,
            raft: RaftGroup::new(me, topology, params.raft),
            state: GroupState::default(),
            votes: BTreeMap::new(),
            proposing: BTreeSet::new(),
            aging: BTreeSet::new(),
        }
    }

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

    /// Transactions prepared here and not yet decided.
    pub fn prepared(&self) -> usize {
        self.state.prepared.len()
    }

    /// Arm the timers; a fresh group's member 0 campaigns at once. Call from the host's `on_start`.
    pub fn start<P: Protocol>(&mut self, cx: &mut Ctx<'_, P>, host: &mut dyn TpcHost)
    where
        P::Msg: From<RaftWire> + From<TpcWire>,
        P::Timer: From<RaftTick> + From<TpcTick>,
    {
        cx.set_timer(self.params.retry_ns, TpcTick { partition: self.me.partition }.into());
        let campaign = self.topology.member_index(self.me) == Some(0) && self.raft.term() == 0;
        let events = self.raft.start(cx, campaign);
        self.handle(cx, events, &mut Apply { host });
    }

    pub fn on_raft_tick<P: Protocol>(&mut self, cx: &mut Ctx<'_, P>, host: &mut dyn TpcHost)
    where
        P::Msg: From<RaftWire> + From<TpcWire>,
        P::Timer: From<RaftTick> + From<TpcTick>,
    {
        let events = self.raft.on_tick(cx);
        self.handle(cx, events, &mut Apply { host });
    }

    pub fn on_raft<P: Protocol>(
        &mut self,
        cx: &mut Ctx<'_, P>,
        from: ServerId,
        wire: RaftWire,
        host: &mut dyn TpcHost,
    ) -> Result<(), String>
    where
        P::Msg: From<RaftWire> + From<TpcWire>,
        P::Timer: From<RaftTick> + From<TpcTick>,
    {
        let events = self.raft.on_wire(cx, from, wire)?;
        self.handle(cx, events, &mut Apply { host });
        Ok(())
    }

    /// The retry tick: a participant's leader re-sends the votes of transactions prepared for a whole
    /// tick; a coordinator's leader re-proposes what it can decide.
    pub fn on_tick<P: Protocol>(&mut self, cx: &mut Ctx<'_, P>, host: &mut dyn TpcHost)
    where
        P::Msg: From<RaftWire> + From<TpcWire>,
        P::Timer: From<RaftTick> + From<TpcTick>,
    {
        cx.set_timer(self.params.retry_ns, TpcTick { partition: self.me.partition }.into());
        self.proposing.clear();
        if !self.is_leader() {
            self.aging.clear();
            return;
        }
        let old = std::mem::take(&mut self.aging);
        let ids: Vec<TxnId> = self.state.prepared.keys().copied().collect();
        for id in ids {
            if old.contains(&id) {
                self.send_vote(cx, id, true);
            }
            self.aging.insert(id);
            if self.coordinates(id) {
                self.try_decide(cx, id, &mut Apply { host });
                if old.contains(&id) {
                    self.time_out(cx, id, &mut Apply { host });
                }
            }
        }
    }

    /// As the coordinator's leader, decide abort on a transaction held prepared for a whole tick without
    /// every vote: a participant that never got `Begin` (its origin gave up) or is cut off would otherwise
    /// keep it prepared, and its keys locked, for ever. Aborting before deciding is always safe.
    fn time_out<P: Protocol>(&mut self, cx: &mut Ctx<'_, P>, id: TxnId, host: &mut Apply<'_>)
    where
        P::Msg: From<RaftWire> + From<TpcWire>,
        P::Timer: From<RaftTick> + From<TpcTick>,
    {
        let Some(p) = self.state.prepared.get(&id) else { return };
        let heard = self.votes.get(&id);
        let missing =
            p.participants.iter().any(|g| *g != self.me.partition && heard.is_none_or(|h| !h.contains_key(g)));
        if missing {
            self.propose(cx, Command::Decide { id, parts: None }, host);
        }
    }

    /// A message of the component arrived from `from`.
    pub fn on_wire<P: Protocol>(
        &mut self,
        cx: &mut Ctx<'_, P>,
        from: Addr,
        wire: TpcWire,
        host: &mut dyn TpcHost,
    ) -> Result<(), String>
    where
        P::Msg: From<RaftWire> + From<TpcWire>,
        P::Timer: From<RaftTick> + From<TpcTick>,
    {
        let host = &mut Apply { host };
        match wire {
            TpcWire::Begin { id, participants, payload } => {
                let valid = participants.windows(2).all(|w| w[0] < w[1])
                    && participants.contains(&self.me.partition)
                    && participants.iter().all(|p| *p < self.topology.partitions);
                // From its origin, or forwarded by a member of this group to its leader.
                let forwarded = matches!(from, Addr::Server(s) if s.partition == self.me.partition
                    && self.topology.member_index(s).is_some());
                if !valid || (id.origin != from && !forwarded) {
                    return Err(format!("{from} began {id} with participants {participants:?}"));
                }
                if let Some(parts) = self.state.decided.get(&id) {
                    // Decided already: the outcome was lost. The coordinator's leader answers again.
                    if self.is_leader() && participants.first() == Some(&self.me.partition) {
                        cx.send(id.origin, TpcWire::Outcome { id, parts: parts.clone() }.into());
                    }
                    return Ok(());
                }
                if self.state.prepared.contains_key(&id) {
                    return Ok(());
                }
                if !self.is_leader() {
                    if let Some(leader) = self.raft.leader().filter(|l| *l != self.me) {
                        cx.send(leader, TpcWire::Begin { id, participants, payload }.into());
                    }
                    return Ok(());
                }
                self.propose(cx, Command::Prepare { id, participants, payload }, host);
                Ok(())
            }
            TpcWire::Vote { id, group, part, again } => {
                let Addr::Server(sender) = from else { return Err(format!("a vote for {id} from {from}")) };
                if sender.partition != group
                    || self.topology.member_index(sender).is_none()
                    || group == self.me.partition
                {
                    return Err(format!("{sender} voted for group {group}"));
                }
                if let Some(parts) = self.state.decided.get(&id) {
                    if self.is_leader() {
                        for m in self.topology.group(group) {
                            cx.send(m, TpcWire::Decision { id, parts: parts.clone() }.into());
                        }
                    }
                    return Ok(());
                }
                match self.state.prepared.get(&id) {
                    Some(p) if p.participants.first() == Some(&self.me.partition) => {
                        if !p.participants.contains(&group) {
                            return Err(format!("{sender} voted for {id}, which does not involve its group"));
                        }
                    }
                    Some(_) => return Err(format!("{sender} sent a vote for {id} to a group not coordinating it")),
                    None => {
                        if again && self.is_leader() {
                            // The coordinator never prepared it: the origin's Begin was lost. Presumed
                            // abort, decided through the log so that a late Begin finds it decided.
                            self.propose(cx, Command::Decide { id, parts: None }, host);
                            return Ok(());
                        }
                        if self.votes.len() >= MAX_EARLY_VOTES && !self.votes.contains_key(&id) {
                            return Err("too many votes for transactions not prepared here".into());
                        }
                    }
                }
                self.votes.entry(id).or_default().insert(group, part);
                if self.state.prepared.contains_key(&id) {
                    self.try_decide(cx, id, host);
                }
                Ok(())
            }
            TpcWire::Decision { id, parts } => {
                let Addr::Server(sender) = from else {
                    return Err(format!("a decision for {id} from {from}"));
                };
                let Some(p) = self.state.prepared.get(&id) else {
                    // An abort can overtake this group's own Begin (another participant voted no): record
                    // it, so that the late Begin finds the transaction decided and takes no locks. A
                    // commit cannot: it needs this group's vote.
                    let from_coordinator =
                        sender.partition < self.me.partition && self.topology.member_index(sender).is_some();
                    if parts.is_none() && from_coordinator && !self.state.decided.contains_key(&id) && self.is_leader()
                    {
                        self.propose(cx, Command::Decide { id, parts: None }, host);
                    }
                    return Ok(());
                };
                if p.participants.first() != Some(&sender.partition) || self.topology.member_index(sender).is_none() {
                    return Err(format!("{sender} decided {id}, which it does not coordinate"));
                }
                if self.is_leader() {
                    self.propose(cx, Command::Decide { id, parts }, host);
                }
                Ok(())
            }
            TpcWire::Outcome { id, .. } => Err(format!("{from} sent a server the outcome of {id}")),
        }
    }

    /// Whether this group coordinates `id` (prepared here, and the lowest participant).
    fn coordinates(&self, id: TxnId) -> bool {
        self.state.prepared.get(&id).is_some_and(|p| p.participants.first() == Some(&self.me.partition))
    }

    fn propose<P: Protocol>(&mut self, cx: &mut Ctx<'_, P>, cmd: Command, host: &mut Apply<'_>)
    where
        P::Msg: From<RaftWire> + From<TpcWire>,
        P::Timer: From<RaftTick> + From<TpcTick>,
    {
        let key = match &cmd {
            Command::Prepare { id, .. } => (*id, false),
            Command::Decide { id, .. } => (*id, true),
        };
        if !self.proposing.insert(key) {
            return;
        }
        let data = postcard::to_stdvec(&cmd).expect("a command serializes");
        if let Ok(events) = self.raft.propose(cx, data) {
            self.handle(cx, events, host);
        }
        // Not the leader any more: the origin's retry or the next leader's tick takes over.
    }

    /// As the coordinator's leader, propose the decision once every vote is known (or one is no).
    fn try_decide<P: Protocol>(&mut self, cx: &mut Ctx<'_, P>, id: TxnId, host: &mut Apply<'_>)
    where
        P::Msg: From<RaftWire> + From<TpcWire>,
        P::Timer: From<RaftTick> + From<TpcTick>,
    {
        if !self.is_leader() {
            return;
        }
        let Some(p) = self.state.prepared.get(&id) else { return };
        let heard = self.votes.get(&id);
        let mut parts = Vec::with_capacity(p.participants.len());
        for g in &p.participants {
            let vote = if *g == self.me.partition { Some(&p.vote) } else { heard.and_then(|h| h.get(g)) };
            match vote {
                Some(Some(part)) => parts.push((*g, part.clone())),
                Some(None) => {
                    self.propose(cx, Command::Decide { id, parts: None }, host);
                    return;
                }
                None => return,
            }
        }
        self.propose(cx, Command::Decide { id, parts: Some(parts) }, host);
    }

    fn send_vote<P: Protocol>(&mut self, cx: &mut Ctx<'_, P>, id: TxnId, again: bool)
    where
        P::Msg: From<TpcWire>,
    {
        let Some(p) = self.state.prepared.get(&id) else { return };
        let Some(&coordinator) = p.participants.first() else { return };
        if coordinator == self.me.partition {
            return;
        }
        let wire = TpcWire::Vote { id, group: self.me.partition, part: p.vote.clone(), again };
        for m in self.topology.group(coordinator) {
            cx.send(m, wire.clone().into());
        }
    }

    fn handle<P: Protocol>(&mut self, cx: &mut Ctx<'_, P>, events: Vec<Event>, host: &mut Apply<'_>)
    where
        P::Msg: From<RaftWire> + From<TpcWire>,
        P::Timer: From<RaftTick> + From<TpcTick>,
    {
        let mut took_over = false;
        for event in events {
            match event {
                Event::Restore { data, .. } => {
                    if let Ok(snap) = postcard::from_bytes::<Snapshot>(&data) {
                        self.state = snap.group;
                        host.host.restore(&snap.host);
                    }
                }
                Event::Apply { data, .. } => {
                    if let Ok(cmd) = postcard::from_bytes::<Command>(&data) {
                        self.apply(cx, cmd, host);
                    }
                }
                Event::ReadReady { .. } => {}
                Event::Leader { .. } => took_over |= self.raft.is_leader(),
            }
        }
        if took_over {
            // A new leader: votes may have been lost with the old one. Participants re-send theirs now.
            let ids: Vec<TxnId> = self.state.prepared.keys().copied().collect();
            for id in ids {
                self.send_vote(cx, id, false);
            }
        }
        if self.raft.wants_compaction() {
            let snap = Snapshot { group: self.state.clone(), host: host.host.snapshot() };
            self.raft.compact(cx, postcard::to_stdvec(&snap).expect("a snapshot serializes"));
        }
    }

    fn apply<P: Protocol>(&mut self, cx: &mut Ctx<'_, P>, cmd: Command, host: &mut Apply<'_>)
    where
        P::Msg: From<RaftWire> + From<TpcWire>,
        P::Timer: From<RaftTick> + From<TpcTick>,
    {
        match cmd {
            Command::Prepare { id, participants, payload } => {
                self.proposing.remove(&(id, false));
                if self.state.decided.contains_key(&id) || self.state.prepared.contains_key(&id) {
                    return;
                }
                let vote = host.host.prepare(id, &payload);
                let coordinator = participants.first() == Some(&self.me.partition);
                let alone = participants.len() == 1;
                self.state.prepared.insert(id, Prepared { participants, vote: vote.clone() });
                if coordinator && alone {
                    // One participant: decided by its own vote, at every member alike (one-phase commit).
                    let parts = vote.map(|part| vec![(self.me.partition, part)]);
                    self.apply(cx, Command::Decide { id, parts }, host);
                } else if coordinator {
                    self.try_decide(cx, id, host);
                } else if self.is_leader() {
                    self.send_vote(cx, id, false);
                }
            }
            Command::Decide { id, parts } => {
                self.proposing.remove(&(id, true));
                if self.state.decided.contains_key(&id) {
                    return;
                }
                self.votes.remove(&id);
                self.aging.remove(&id);
                if let Some(p) = self.state.prepared.remove(&id) {
                    host.host.decide(id, parts.as_deref());
                    if self.is_leader() && p.participants.first() == Some(&self.me.partition) {
                        for g in p.participants.iter().skip(1) {
                            for m in self.topology.group(*g) {
                                cx.send(m, TpcWire::Decision { id, parts: parts.clone() }.into());
                            }
                        }
                        cx.send(id.origin, TpcWire::Outcome { id, parts: parts.clone() }.into());
                    }
                }
                self.state.decided.insert(id, parts);
                self.state.decided_order.push_back(id);
                if self.state.decided_order.len() > KEEP_DECIDED
                    && let Some(old) = self.state.decided_order.pop_front()
                {
                    self.state.decided.remove(&old);
                }
            }
        }
    }
}

/// A transaction in flight at its origin.
#[derive(Clone, Debug)]
struct InFlight {
    id: TxnId,
    participants: Vec<PartitionId>,
    payload: Vec<u8>,
    attempt: u32,
}

/// The origin side: numbers transactions, sends `Begin` to their participants and re-sends it to the next
/// member of each group until the coordinator's outcome arrives.
#[derive(Clone, Debug)]
pub struct TpcOrigin {
    me: Addr,
    topology: Topology,
    retry_ns: u64,
    next_seq: u64,
    /// Per partition: the member tried next.
    targets: Vec<ServerId>,
    in_flight: BTreeMap<u64, InFlight>,
}

impl TpcOrigin {
    /// An origin at `me`, first trying the members nearest `dc`.
    pub fn new(me: Addr, dc: snowline_core::DcId, topology: Topology, retry_ns: u64) -> Self {
        let targets = (0..topology.partitions).map(|p| topology.nearest(dc, p)).collect();
        Self { me, topology, retry_ns, next_seq: 0, targets, in_flight: BTreeMap::new() }
    }

    /// Run a transaction with `payload` over `participants` (deduplicated, not empty); returns its id.
    pub fn begin<P: Protocol>(
        &mut self,
        cx: &mut Ctx<'_, P>,
        participants: impl IntoIterator<Item = PartitionId>,
        payload: Vec<u8>,
    ) -> TxnId
    where
        P::Msg: From<TpcWire>,
        P::Timer: From<TpcRetry>,
    {
        self.next_seq += 1;
        let id = TxnId { origin: self.me, seq: self.next_seq };
        let participants: Vec<PartitionId> = participants.into_iter().collect::<BTreeSet<_>>().into_iter().collect();
        self.in_flight.insert(id.seq, InFlight { id, participants, payload, attempt: 0 });
        self.send(cx, id.seq);
        id
    }

    fn send<P: Protocol>(&mut self, cx: &mut Ctx<'_, P>, seq: u64)
    where
        P::Msg: From<TpcWire>,
        P::Timer: From<TpcRetry>,
    {
        let Some(f) = self.in_flight.get_mut(&seq) else { return };
        f.attempt += 1;
        for p in &f.participants {
            let wire = TpcWire::Begin { id: f.id, participants: f.participants.clone(), payload: f.payload.clone() };
            cx.send(self.targets[usize::from(*p)], wire.into());
        }
        cx.set_timer(self.retry_ns, TpcRetry { seq, attempt: f.attempt }.into());
    }

    /// The outcome of a transaction arrived from `from`: `Some(parts)` if it is one in flight (committed
    /// with those parts, or `Some(None)`: aborted), and the transaction is over.
    pub fn on_outcome(&mut self, from: ServerId, wire: TpcWire) -> Option<Option<Parts>> {
        let TpcWire::Outcome { id, parts } = wire else { return None };
        let f = self.in_flight.get(&id.seq).filter(|f| f.id == id)?;
        if f.participants.first() != Some(&from.partition) || self.topology.member_index(from).is_none() {
            return None;
        }
        self.targets[usize::from(from.partition)] = from;
        self.in_flight.remove(&id.seq);
        Some(parts)
    }

    /// The retry timer fired: re-send `Begin` to the next member of every participant group.
    pub fn on_retry<P: Protocol>(&mut self, cx: &mut Ctx<'_, P>, t: TpcRetry)
    where
        P::Msg: From<TpcWire>,
        P::Timer: From<TpcRetry>,
    {
        let Some(f) = self.in_flight.get(&t.seq).filter(|f| f.attempt == t.attempt) else { return };
        for p in f.participants.clone() {
            self.targets[usize::from(p)] = self.topology.next_member(self.targets[usize::from(p)]);
        }
        self.send(cx, t.seq);
    }

    /// Stop waiting for `id` (the host gave up on it: a timeout, a broken connection). Its groups still
    /// decide it. The members it was sent to may be down: the next transaction starts with the next member
    /// of its groups.
    pub fn forget(&mut self, id: TxnId) {
        if let Some(f) = self.in_flight.remove(&id.seq) {
            for p in f.participants {
                self.targets[usize::from(p)] = self.topology.next_member(self.targets[usize::from(p)]);
            }
        }
    }

    /// Transactions without an outcome yet.
    pub fn in_flight(&self) -> usize {
        self.in_flight.len()
    }
}
