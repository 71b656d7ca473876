//! `raft-kv` (`--protocol raft-kv --replicas 3`): each partition is a Raft group serving linearizable
//! single-key GET and PUT through its leader — the baseline every user of etcd or TiKV knows, and the first
//! user of the consensus component ([`crate::components::consensus`]).
//!
//! # Guarantees
//!
//! Linearizability of single-key operations (claimed level `strict-ser`: a history of single-key operations
//! is strictly serializable exactly when it is linearizable). A PUT is a command in its partition's Raft log,
//! acknowledged once committed and applied; a GET is served by the leader with Raft's ReadIndex (§6.4 of
//! Ongaro's thesis, what etcd does by default): the leader records its commit index, confirms with a quorum
//! that it still leads, waits until it has applied that index, then reads its state. Version = the log index
//! of the write, so each key's versions are totally ordered (`orders_versions`).
//!
//! # Clients
//!
//! A client session sends each operation to the member it believes leads the key's group (first guess: the
//! member nearest its datacenter). A member that does not lead answers [`KvMsg::Redirect`] with its own
//! guess; with none (an election is going on) the client waits [`RETRY_NS`] and tries the next member. An
//! operation unanswered for [`RETRY_NS`] is sent again to the next member (the leader may have crashed).
//! Retrying a PUT is safe: commands carry `(client, seq)` and the state machine applies each session's
//! command at most once (Raft §8's client sessions), answering a duplicate with the original version, so a
//! write is never applied twice however often it is retried. A session runs one operation at a time; when the
//! runtime gives up on one (timeout, broken connection: outcome unknown) and the application submits the
//! same PUT again, the session retries it under its old sequence number (applied at most once) and starts
//! with the next member of the group, since the one it talked to may be down.
//!
//! # Placement and faults
//!
//! Any placement (`Topology::replicated`): with `--replicas 3 --dcs 1` a group is three servers of one
//! datacenter; with `--dcs 3` one per datacenter. A group keeps serving while a majority of its members is
//! up and connected. Raft tolerates lost, duplicated and reordered messages, so the links need not be
//! reliable or FIFO. Raft's state (log, hard state, snapshot) is part of the server's serialized state; a
//! member that comes back without it must not rejoin as the same member (membership is static).
//!
//! # Choices where the papers are silent
//!
//! Member 0 of a fresh group campaigns at start, so a new cluster has leaders at once instead of after an
//! election timeout. Multi-key requests are refused: use `2pl` for transactions across keys.
//!
//! Session tokens: none (the default): linearizable operations need nothing from a session's earlier ones.

use crate::components::consensus::{Event, RaftGroup, RaftParams, RaftTick, RaftWire};
use serde::{Deserialize, Serialize};
use snowline_core::{
    Addr, Check, ClientId, ClientNode, Ctx, DcId, Durability, InvalidInput, InvalidKind, Key, LinkAssumptions, Message,
    Offers, OpError, OpId, OpMetrics, PartitionId, Protocol, ProtocolConfig, ReadResult, Reply, Request, ServerId,
    ServerNode, Topology, Value, Version,
};
use std::collections::BTreeMap;

/// A client resends an operation that has had no answer for this long (to the next member), and waits this
/// long before retrying when no member knows a leader.
pub const RETRY_NS: u64 = 1_500_000_000;

pub struct RaftKv;

impl Protocol for RaftKv {
    const NAME: &'static str = "raft-kv";
    type Msg = KvMsg;
    type Timer = KvTimer;
    type Server = RaftKvServer;
    type Client = RaftKvClient;
    // Single-key operations only: a read-only transaction of several keys is refused up front (by the
    // client library and the CLI, from this offer) and by the client node.
    const OFFERS: Offers = Offers {
        read_only: true,
        multi_key_rots: false,
        multi_shot_rots: false,
        blind_writes: true,
        write_transactions: false,
        interactive: false,
        stored_procedures: false,
    };

    fn links() -> LinkAssumptions {
        // Raft needs neither order nor delivery; clients resend.
        LinkAssumptions { fifo: false }
    }

    const DURABILITY: Durability = Durability::PersistChanges;

    const TOLERATES_LOSS: bool = true;

    fn check_topology(_topology: &Topology) -> Result<(), String> {
        Ok(())
    }

    fn server(id: ServerId, topology: Topology, config: &ProtocolConfig) -> RaftKvServer {
        RaftKvServer::new(id, topology, RaftParams::default()).with_limits(config)
    }

    fn client(id: ClientId, dc: DcId, topology: Topology, config: &ProtocolConfig) -> RaftKvClient {
        RaftKvClient::new(id, dc, topology, config.clone())
    }
}

/// A client's operation, as sent to a member.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum KvOp {
    Get {
        key: Key,
    },
    /// The session's `seq`-th PUT (numbers increase by one per PUT of the session).
    Put {
        key: Key,
        value: Value,
        seq: u64,
    },
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum KvMsg {
    /// Between the members of a group.
    Raft(RaftWire),
    /// Client → member. `attempt` tells a retry's answer from a stale one.
    Request { op: OpId, attempt: u32, kv: KvOp },
    /// Member → client: done. For a GET the value read (and its version), for a PUT the version written.
    Done { op: OpId, attempt: u32, value: Option<Value>, version: Version },
    /// Member → client: ask `hint` (or, without one, try again later). `proposed`: this member had proposed
    /// the PUT before it lost its leadership, so it may still commit; otherwise nothing was done.
    Redirect { op: OpId, attempt: u32, hint: Option<ServerId>, proposed: bool },
    /// Member → client: this attempt is refused and had no effect (a key of another group, a full disk).
    /// Earlier attempts of the same operation may have: the client tells its application so.
    Refused { op: OpId, attempt: u32, reason: String },
}

impl Message for KvMsg {
    fn kind(&self) -> &'static str {
        match self {
            KvMsg::Raft(_) => "raft",
            KvMsg::Request { kv: KvOp::Get { .. }, .. } => "get",
            KvMsg::Request { kv: KvOp::Put { .. }, .. } => "put",
            KvMsg::Done { .. } => "done",
            KvMsg::Redirect { .. } => "redirect",
            KvMsg::Refused { .. } => "refused",
        }
    }

    fn is_client_write(&self) -> bool {
        matches!(self, KvMsg::Request { kv: KvOp::Put { .. }, .. })
    }

    /// A request its host refuses unhandled (a full disk) is answered as the member refuses one, so that
    /// the client node, which knows whether an earlier attempt may have been applied, says what happened.
    fn refusal(&self, why: &str) -> Option<Self> {
        match self {
            KvMsg::Request { op, attempt, .. } => {
                Some(KvMsg::Refused { op: *op, attempt: *attempt, reason: why.into() })
            }
            _ => None,
        }
    }
}

impl From<RaftWire> for KvMsg {
    fn from(w: RaftWire) -> Self {
        KvMsg::Raft(w)
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum KvTimer {
    Raft(RaftTick),
    /// Client: resend `op` if `attempt` is still its latest.
    Retry {
        op: OpId,
        attempt: u32,
    },
}

impl From<RaftTick> for KvTimer {
    fn from(t: RaftTick) -> Self {
        KvTimer::Raft(t)
    }
}

/// A command in the Raft log.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct Command {
    client: ClientId,
    seq: u64,
    key: Key,
    value: Value,
}

/// Who waits for what at the member that took it.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct Waiter {
    client: ClientId,
    op: OpId,
    attempt: u32,
}

/// The replicated state machine: the store and the sessions. What a snapshot holds.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
struct KvState {
    /// key → (value, log index that wrote it).
    store: BTreeMap<Key, (Value, u64)>,
    /// client → (last applied seq, its log index).
    sessions: BTreeMap<ClientId, (u64, u64)>,
}

type Cx<'a> = Ctx<'a, RaftKv>;

/// A member of a partition's Raft group.
#[derive(Serialize, Deserialize)]
pub struct RaftKvServer {
    id: ServerId,
    topology: Topology,
    group: RaftGroup,
    state: KvState,
    /// PUTs this member proposed: (client, seq) → who waits.
    puts: BTreeMap<(ClientId, u64), Waiter>,
    /// GETs waiting for their ReadIndex: read id → (waiter, key).
    reads: BTreeMap<u64, (Waiter, Key)>,
    next_read: u64,
    /// The limits clients' requests are checked against.
    config: ProtocolConfig,
}

impl RaftKvServer {
    pub fn new(id: ServerId, topology: Topology, params: RaftParams) -> Self {
        Self {
            id,
            topology,
            group: RaftGroup::new(id, topology, params),
            state: KvState::default(),
            puts: BTreeMap::new(),
            reads: BTreeMap::new(),
            next_read: 0,
            config: ProtocolConfig::default(),
        }
    }

    /// Check clients' requests against `config`'s limits (the default limits otherwise).
    pub fn with_limits(mut self, config: &ProtocolConfig) -> Self {
        self.config = config.clone();
        self
    }

    /// The consensus member (for tests and metrics: leadership, term, applied index).
    pub fn group(&self) -> &RaftGroup {
        &self.group
    }

    /// The value of `key` in this member's applied state.
    pub fn value(&self, key: &str) -> Option<&Value> {
        self.state.store.get(key).map(|(v, _)| v)
    }

    fn on_request(&mut self, cx: &mut Cx<'_>, client: ClientId, op: OpId, attempt: u32, kv: KvOp) {
        let key = match &kv {
            KvOp::Get { key } | KvOp::Put { key, .. } => key.clone(),
        };
        if self.topology.partition_of(&key) != self.id.partition {
            let reason = format!("key {key:?} does not belong to partition {}", self.id.partition);
            cx.send(client, KvMsg::Refused { op, attempt, reason });
            return;
        }
        let waiter = Waiter { client, op, attempt };
        let result = match kv {
            KvOp::Get { key } => {
                let id = self.next_read;
                self.next_read += 1;
                let r = self.group.read_index(cx, id.to_be_bytes().to_vec());
                if r.is_ok() {
                    self.reads.insert(id, (waiter, key));
                }
                r
            }
            KvOp::Put { key, value, seq } => {
                if let Some((done, index)) = self.state.sessions.get(&client)
                    && *done >= seq
                {
                    // Already applied (a retry after a lost answer): answer with what it wrote.
                    if *done == seq {
                        let version = Version { time: *index, dc: 0 };
                        cx.send(client, KvMsg::Done { op, attempt, value: None, version });
                    }
                    return;
                }
                let cmd = Command { client, seq, key, value };
                let data = postcard::to_stdvec(&cmd).expect("a command serializes");
                let r = self.group.propose(cx, data);
                if r.is_ok() {
                    self.puts.insert((client, seq), waiter);
                }
                r
            }
        };
        match result {
            Ok(events) => self.handle(cx, events),
            Err(not_leader) => cx.send(client, KvMsg::Redirect { op, attempt, hint: not_leader.hint, proposed: false }),
        }
    }

    fn handle(&mut self, cx: &mut Cx<'_>, events: Vec<Event>) {
        for event in events {
            match event {
                Event::Restore { data, .. } => {
                    if let Ok(state) = postcard::from_bytes::<KvState>(&data) {
                        self.state = state;
                    }
                }
                Event::Apply { index, data } => self.apply(cx, index, &data),
                Event::ReadReady { ctx } => {
                    let Ok(id) = <[u8; 8]>::try_from(ctx.as_slice()).map(u64::from_be_bytes) else { continue };
                    let Some((w, key)) = self.reads.remove(&id) else { continue };
                    let (value, index) = match self.state.store.get(&key) {
                        Some((v, i)) => (Some(v.clone()), *i),
                        None => (None, 0),
                    };
                    cx.charge(1);
                    let version = Version { time: index, dc: 0 };
                    cx.send(w.client, KvMsg::Done { op: w.op, attempt: w.attempt, value, version });
                }
                Event::Leader { leader, .. } => {
                    if !self.group.is_leader() {
                        // What waited here will not be answered here: send the clients to the new leader.
                        // (A PUT already proposed may still commit; the retry is deduplicated.)
                        for (_, (w, _)) in std::mem::take(&mut self.reads) {
                            let redirect =
                                KvMsg::Redirect { op: w.op, attempt: w.attempt, hint: leader, proposed: false };
                            cx.send(w.client, redirect);
                        }
                        for (_, w) in std::mem::take(&mut self.puts) {
                            let redirect =
                                KvMsg::Redirect { op: w.op, attempt: w.attempt, hint: leader, proposed: true };
                            cx.send(w.client, redirect);
                        }
                    }
                }
            }
        }
        if self.group.wants_compaction() {
            let state = postcard::to_stdvec(&self.state).expect("the state serializes");
            self.group.compact(cx, state);
        }
    }

    fn apply(&mut self, cx: &mut Cx<'_>, index: u64, data: &[u8]) {
        // Every member proposed only what it encoded itself, so an undecodable entry is a bug, not input.
        let Ok(cmd) = postcard::from_bytes::<Command>(data) else { return };
        cx.charge(1);
        let session = self.state.sessions.get(&cmd.client).copied();
        let version = match session {
            Some((done, _)) if done >= cmd.seq => {
                // A retried PUT committed twice: the first application stands.
                match session {
                    Some((done, at)) if done == cmd.seq => Version { time: at, dc: 0 },
                    _ => return,
                }
            }
            _ => {
                self.state.store.insert(cmd.key.clone(), (cmd.value.clone(), index));
                self.state.sessions.insert(cmd.client, (cmd.seq, index));
                Version { time: index, dc: 0 }
            }
        };
        if let Some(w) = self.puts.remove(&(cmd.client, cmd.seq)) {
            cx.send(w.client, KvMsg::Done { op: w.op, attempt: w.attempt, value: None, version });
        }
    }
}

impl ServerNode<RaftKv> for RaftKvServer {
    fn on_start(&mut self, cx: &mut Cx<'_>) {
        // A fresh group's first member campaigns at once (see the module docs).
        let campaign = self.topology.member_index(self.id) == Some(0) && self.group.term() == 0;
        let events = self.group.start(cx, campaign);
        self.handle(cx, events);
    }

    fn on_message(&mut self, cx: &mut Cx<'_>, from: Addr, msg: KvMsg) -> Result<(), InvalidInput> {
        let kind = msg.kind();
        match (from, msg) {
            (Addr::Server(server), KvMsg::Raft(wire)) => {
                // The group checks the sender is a member and the message is addressed to this one; a message
                // it refuses changes nothing.
                let events = self
                    .group
                    .on_wire(cx, server, wire)
                    .map_err(|why| InvalidInput::new(InvalidKind::Malformed, kind, from, why))?;
                self.handle(cx, events);
            }
            (Addr::Client(client), KvMsg::Request { op, attempt, kv }) => {
                let check = Check::new(&self.topology, &self.config, cx.now_ns(), from, kind);
                match &kv {
                    KvOp::Get { key } => check.request_keys([key])?,
                    KvOp::Put { key, value, .. } => check.request_writes([(key, value)], [])?,
                }
                self.on_request(cx, client, op, attempt, kv)
            }
            (Addr::Client(_), _) => {
                return Err(InvalidInput::new(InvalidKind::Sender, kind, from, "a client sends only requests"));
            }
            (Addr::Server(_), _) => {
                return Err(InvalidInput::new(InvalidKind::Sender, kind, from, "servers exchange only raft messages"));
            }
        }
        Ok(())
    }

    fn on_timer(&mut self, cx: &mut Cx<'_>, timer: KvTimer) {
        if let KvTimer::Raft(_) = timer {
            let events = self.group.on_tick(cx);
            self.handle(cx, events);
        }
    }

    fn apply_change(&mut self, change: &[u8]) -> Result<(), String> {
        self.group.apply_change(change)
    }

    fn stored_versions(&self) -> usize {
        self.state.store.len()
    }

    fn leads(&self) -> Option<u64> {
        self.group.is_leader().then(|| self.group.term())
    }
}

/// The operation a session runs.
struct Pending {
    op: OpId,
    kv: KvOp,
    partition: PartitionId,
    attempt: u32,
    rounds: u32,
    /// The current attempt was sent and has had no answer yet.
    in_flight: bool,
    /// An earlier attempt of this PUT may have been applied (it had no answer before it was sent again,
    /// its member had proposed it, or it is an abandoned PUT submitted again): a refusal of a later attempt
    /// then leaves the outcome unknown.
    maybe_applied: bool,
}

/// A client session: one operation at a time, sent to the believed leader of its key's group.
pub struct RaftKvClient {
    id: ClientId,
    dc: DcId,
    topology: Topology,
    config: ProtocolConfig,
    /// Per partition: the member believed to lead.
    leaders: Vec<ServerId>,
    next_seq: u64,
    pending: Option<Pending>,
}

impl RaftKvClient {
    pub fn new(id: ClientId, dc: DcId, topology: Topology, config: ProtocolConfig) -> Self {
        let leaders = (0..topology.partitions).map(|p| topology.nearest(dc, p)).collect();
        Self { id, dc, topology, config, leaders, next_seq: 0, pending: None }
    }

    pub fn id(&self) -> ClientId {
        self.id
    }

    /// The member after `s` in its group (round robin).
    fn send(&mut self, cx: &mut Cx<'_>) {
        let Some(p) = &mut self.pending else { return };
        p.attempt += 1;
        p.rounds += 1;
        p.in_flight = true;
        let to = self.leaders[usize::from(p.partition)];
        cx.send(to, KvMsg::Request { op: p.op, attempt: p.attempt, kv: p.kv.clone() });
        cx.set_timer(RETRY_NS, KvTimer::Retry { op: p.op, attempt: p.attempt });
    }

    fn current(&self, op: OpId, attempt: u32) -> bool {
        matches!(&self.pending, Some(p) if p.op == op && p.attempt == attempt)
    }
}

// Session tokens: none needed (the default). Linearizable: every operation sees all that completed before it;
// the client's leader hints are not state a guarantee needs.
impl ClientNode<RaftKv> for RaftKvClient {
    fn on_request(&mut self, cx: &mut Cx<'_>, op: OpId, request: Request) {
        if let Err(reason) = self.config.check_request(&request) {
            cx.complete(op, Err(OpError::Rejected(reason)));
            return;
        }
        // A session runs one operation at a time, so a new one means the runtime gave up on the previous one
        // (driver contract 4: a timeout or a broken connection, outcome unknown). Forget it: its late answers
        // no longer match. The member it went to may be down: try the next one first. A PUT already proposed
        // may still be applied, once; the next PUT's higher sequence number keeps a late duplicate of it from
        // being applied after it — unless the new PUT is the abandoned one again (same key and value), which
        // keeps its sequence number, so that resubmitting it is a retry and applies it at most once.
        let abandoned = self.pending.take().map(|p| {
            let tried = self.leaders[usize::from(p.partition)];
            self.leaders[usize::from(p.partition)] = self.topology.next_member(tried);
            p.kv
        });
        let mut maybe_applied = false;
        let kv = match request {
            Request::Rot { mut keys } if keys.len() == 1 => KvOp::Get { key: keys.remove(0) },
            Request::Put { key, value } => {
                let seq = match abandoned {
                    Some(KvOp::Put { key: k, value: v, seq }) if k == key && v == value => {
                        maybe_applied = true;
                        seq
                    }
                    _ => {
                        self.next_seq += 1;
                        self.next_seq
                    }
                };
                KvOp::Put { key, value, seq }
            }
            other => {
                cx.complete(op, Err(RaftKv::OFFERS.refusal(RaftKv::NAME, &other)));
                return;
            }
        };
        let key = match &kv {
            KvOp::Get { key } | KvOp::Put { key, .. } => key,
        };
        let partition = self.topology.partition_of(key);
        self.pending = Some(Pending { op, kv, partition, attempt: 0, rounds: 0, in_flight: false, maybe_applied });
        self.send(cx);
    }

    fn on_message(&mut self, cx: &mut Cx<'_>, from: Addr, msg: KvMsg) {
        match msg {
            KvMsg::Done { op, attempt, value, version } if self.current(op, attempt) => {
                let p = self.pending.take().expect("current");
                if let Addr::Server(s) = from {
                    self.leaders[usize::from(p.partition)] = s;
                }
                let metrics = OpMetrics { rounds: p.rounds, versions_returned: 1, ..OpMetrics::default() };
                let reply = match p.kv {
                    KvOp::Get { key } => {
                        let read = ReadResult { key, value, version, versions_skipped: 0 };
                        Reply { reads: vec![read], metrics, ..Reply::default() }
                    }
                    KvOp::Put { .. } => Reply { commit: Some(version), metrics, ..Reply::default() },
                };
                cx.complete(op, Ok(reply));
            }
            KvMsg::Redirect { op, attempt, hint, proposed } if self.current(op, attempt) => {
                let p = self.pending.as_mut().expect("current");
                p.in_flight = false;
                p.maybe_applied |= proposed && matches!(p.kv, KvOp::Put { .. });
                let partition = p.partition;
                match hint {
                    Some(leader)
                        if self.topology.member_index(leader).is_some()
                            && leader.partition == partition
                            && self
                                .pending
                                .as_ref()
                                .is_some_and(|p| p.rounds % u32::from(self.topology.replicas + 1) != 0) =>
                    {
                        self.leaders[usize::from(partition)] = leader;
                        self.send(cx);
                    }
                    _ => {
                        // No leader known (or the hints go round in circles): wait for the election, then try
                        // the next member.
                        let p = self.pending.as_mut().expect("current");
                        p.attempt += 1;
                        cx.set_timer(RETRY_NS / 4, KvTimer::Retry { op, attempt: p.attempt });
                    }
                }
            }
            KvMsg::Refused { op, attempt, reason } if self.current(op, attempt) => {
                let p = self.pending.take().expect("current");
                let error = if p.maybe_applied {
                    OpError::Unknown(format!(
                        "an earlier attempt may have been applied; this one was refused (no effect): {reason}"
                    ))
                } else {
                    OpError::Rejected(reason)
                };
                cx.complete(op, Err(error));
            }
            _ => {}
        }
    }

    fn on_timer(&mut self, cx: &mut Cx<'_>, timer: KvTimer) {
        if let KvTimer::Retry { op, attempt } = timer
            && self.current(op, attempt)
        {
            let p = self.pending.as_mut().expect("current");
            // An attempt unanswered may have been proposed, and may still be applied.
            p.maybe_applied |= p.in_flight && matches!(p.kv, KvOp::Put { .. });
            let partition = p.partition;
            let tried = self.leaders[usize::from(partition)];
            self.leaders[usize::from(partition)] = self.topology.next_member(tried);
            self.send(cx);
        }
    }
}

impl RaftKvClient {
    /// The datacenter this session runs in.
    pub fn dc(&self) -> DcId {
        self.dc
    }
}
