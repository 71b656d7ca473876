//! `amcast-kv` (`--protocol amcast-kv --replicas 3`): a key-value store in which every operation is ordered
//! by genuine atomic multicast ([`crate::components::multicast`]) — state-machine replication partitioned
//! the way Bezerra, Pedone and van Renesse's S-SMR (DSN 2014) partitions it. The first user of the
//! multicast component, in both runtimes; what the multicast benchmark and checker drive.
//!
//! # Operations
//!
//! A GET, a PUT, a multi-key read-only transaction and a blind multi-key update are each one multicast
//! message addressed to the groups (partitions) of their keys, and only to those. Every member of a
//! destination group executes the message's part for its own keys when it delivers it: reads read the
//! group's state at that point of the delivery order, writes apply there. The leader of each group answers
//! the client with its part; the client completes once every destination group has answered.
//!
//! # Guarantees
//!
//! Serializability (claimed level `ser`): all groups deliver in one global order (final timestamp, then
//! message id), and each operation reads and writes at its position in it, so the history is equivalent
//! to running the operations one at a time in that order. Not strict: Skeen's order can place an operation
//! before one that finished before it started when they share no group but are linked through a third
//! (the final timestamp of a message may exceed a later one's in a group that had not applied its `Final`
//! yet). The version of a write is its final timestamp, so each key's versions follow its group's delivery
//! order (`orders_versions`; final timestamps are unique, so two writes never share a version).
//!
//! # Faults
//!
//! A group keeps serving while a majority of its members is up and connected; the multicast survives the
//! crash of any minority of each group, leader included, mid-protocol. Clients resend to the next member
//! of a group that has not answered ([`crate::components::multicast::McastOrigin`]); the groups ignore
//! duplicates, and each group remembers its last answer to each client (in its replicated state) to answer
//! a retry whose first answer was lost.
//!
//! # Invalid input
//!
//! A server refuses ([`snowline_core::InvalidInput`]) before anything changes: Raft messages from anyone
//! but its group's members, a `Submit` from a client in another origin's name or from a server outside its
//! destination groups (their members forward and relay it), one whose operation does not decode or whose
//! keys are not exactly on its destination groups, proposals and decisions from anyone but a member of another group (or with a
//! timestamp beyond [`crate::components::multicast::MAX_TIMESTAMP`]), and answers, which only clients get.
//!
//! Session tokens: none (the default): the client keeps nothing between operations and `ser` has no
//! session order.

use crate::components::consensus::{RaftTick, RaftWire};
use crate::components::multicast::{
    McastEvent, McastId, McastMember, McastMsg, McastOrigin, McastParams, McastRetry, McastTick, McastWire,
    check_submit_sender,
};
use serde::{Deserialize, Serialize};
use snowline_core::{
    Addr, Check, ClientId, ClientNode, Ctx, DcId, Durability, InvalidInput, InvalidKind, Key, LinkAssumptions, Message,
    Offers, OpError, OpId, PartitionId, Protocol, ProtocolConfig, Request, ServerId, ServerNode, Topology, Value,
    Version,
};
use std::collections::{BTreeMap, BTreeSet};

pub struct AmcastKv;

impl Protocol for AmcastKv {
    const NAME: &'static str = "amcast-kv";
    type Msg = AmMsg;
    type Timer = AmTimer;
    type Server = AmcastKvServer;
    type Client = AmcastKvClient;
    const OFFERS: Offers = Offers {
        read_only: true,
        multi_key_rots: true,
        multi_shot_rots: false,
        blind_writes: true,
        write_transactions: true,
        interactive: false,
        stored_procedures: false,
    };

    fn links() -> LinkAssumptions {
        // Raft and the multicast's re-sends need neither order nor delivery.
        LinkAssumptions { fifo: false }
    }

    const DURABILITY: Durability = Durability::PersistChanges;
    // Raft resends what a follower lacks; proposals and decisions between groups are re-sent on the
    // origin's retry timer until every destination has answered.
    const TOLERATES_LOSS: bool = true;

    fn check_topology(_topology: &Topology) -> Result<(), String> {
        Ok(())
    }

    fn server(id: ServerId, topology: Topology, config: &ProtocolConfig) -> AmcastKvServer {
        AmcastKvServer::new(id, topology, params(config), config)
    }

    fn client(id: ClientId, dc: DcId, topology: Topology, config: &ProtocolConfig) -> AmcastKvClient {
        AmcastKvClient::new(id, dc, topology, config.clone())
    }
}

fn params(config: &ProtocolConfig) -> McastParams {
    McastParams { record: config.record_components, skip_final: config.multicast_skip_final, ..McastParams::default() }
}

/// One destination group's part of an operation's answer.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Part {
    /// The group's keys read: (key, value, version).
    pub reads: Vec<(Key, Option<Value>, Version)>,
    /// The message's final timestamp (the version of its writes).
    pub ts: u64,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum AmMsg {
    Raft(RaftWire),
    Mcast(McastWire),
    /// A group's leader → the client: its part of the operation `id`.
    Done {
        id: McastId,
        part: Part,
    },
}

impl Message for AmMsg {
    fn kind(&self) -> &'static str {
        match self {
            AmMsg::Raft(_) => "raft",
            AmMsg::Mcast(McastWire::Submit(_)) => "submit",
            AmMsg::Mcast(McastWire::Proposal { .. }) => "proposal",
            AmMsg::Mcast(McastWire::Decided { .. }) => "decided",
            AmMsg::Done { .. } => "done",
        }
    }

    /// A submitted operation that writes (one that does not decode is refused as one): on a full disk its
    /// host refuses it, while read-only operations go on.
    fn is_client_write(&self) -> bool {
        match self {
            AmMsg::Mcast(McastWire::Submit(m)) => {
                postcard::from_bytes::<Operation>(&m.payload).map_or(true, |op| !op.writes.is_empty())
            }
            _ => false,
        }
    }
}

impl From<RaftWire> for AmMsg {
    fn from(w: RaftWire) -> Self {
        AmMsg::Raft(w)
    }
}

impl From<McastWire> for AmMsg {
    fn from(w: McastWire) -> Self {
        AmMsg::Mcast(w)
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum AmTimer {
    Raft(RaftTick),
    Mcast(McastTick),
    Retry(McastRetry),
}

impl From<RaftTick> for AmTimer {
    fn from(t: RaftTick) -> Self {
        AmTimer::Raft(t)
    }
}

impl From<McastTick> for AmTimer {
    fn from(t: McastTick) -> Self {
        AmTimer::Mcast(t)
    }
}

impl From<McastRetry> for AmTimer {
    fn from(t: McastRetry) -> Self {
        AmTimer::Retry(t)
    }
}

use super::group_op;
/// What a multicast message carries (its payload, postcard-encoded): the operation, all its keys (each
/// group executes its own). Its destination groups are exactly the groups of its keys.
pub use super::group_op::GroupOp as Operation;

/// A group's replicated state: the store and each client's last answer.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
struct KvState {
    store: BTreeMap<Key, (Value, Version)>,
    answers: BTreeMap<Addr, (McastId, Part)>,
}

type Cx<'a> = Ctx<'a, AmcastKv>;

/// A member of a partition's replica group.
#[derive(Serialize, Deserialize)]
pub struct AmcastKvServer {
    id: ServerId,
    topology: Topology,
    member: McastMember,
    state: KvState,
    /// The limits clients' operations are checked against.
    config: ProtocolConfig,
}

impl AmcastKvServer {
    pub fn new(id: ServerId, topology: Topology, params: McastParams, config: &ProtocolConfig) -> Self {
        let member = McastMember::new(id, topology, params);
        Self { id, topology, member, state: KvState::default(), config: config.clone() }
    }

    /// The multicast endpoint (its log, leadership, pending messages).
    pub fn member(&self) -> &McastMember {
        &self.member
    }

    /// The value of `key` in this member's state.
    pub fn value(&self, key: &str) -> Option<&Value> {
        self.state.store.get(key).map(|(v, _)| v)
    }

    fn handle(&mut self, cx: &mut Cx<'_>, events: Vec<McastEvent>) {
        for event in events {
            match event {
                McastEvent::Deliver { msg, ts, .. } => {
                    cx.charge(1);
                    // Members only deliver what passed `check_submit` (a decodable operation on exactly its
                    // destination groups); anything else has no effect, and its client hears nothing.
                    let Ok(op) = postcard::from_bytes::<Operation>(&msg.payload) else { continue };
                    let mine = |k: &Key| self.topology.partition_of(k) == self.id.partition;
                    let reads = op
                        .reads
                        .iter()
                        .filter(|k| mine(k))
                        .map(|k| match self.state.store.get(k) {
                            Some((v, ver)) => (k.clone(), Some(v.clone()), *ver),
                            None => (k.clone(), None, group_op::INITIAL),
                        })
                        .collect();
                    let version = Version { time: ts, dc: 0 };
                    for (k, v) in op.writes.into_iter().filter(|(k, _)| mine(k)) {
                        self.state.store.insert(k, (v, version));
                    }
                    let part = Part { reads, ts };
                    if self.member.is_leader() {
                        cx.send(msg.id.origin, AmMsg::Done { id: msg.id, part: part.clone() });
                    }
                    self.state.answers.insert(msg.id.origin, (msg.id, part));
                }
                McastEvent::Restore { data } => {
                    if let Ok(state) = postcard::from_bytes::<KvState>(&data) {
                        self.state = state;
                    }
                }
                McastEvent::Leader { .. } => {}
            }
        }
        if self.member.wants_compaction() {
            let state = postcard::to_stdvec(&self.state).expect("the state serializes");
            self.member.compact(cx, state);
        }
    }

    /// A `Submit` comes from its origin (a client multicasting its own message) or from a member of one of
    /// its destination groups (a member of this group forwarding it to its leader, or the leader of another
    /// destination group relaying it), and carries an operation whose keys are exactly on its destination
    /// groups. (The multicast component then checks the destination set itself.)
    /// A client's operation is within the request limits (`ProtocolConfig`; `now_ns`: this server's clock).
    fn check_submit(&self, now_ns: u64, from: Addr, msg: &McastMsg) -> Result<(), (InvalidKind, String)> {
        check_submit_sender(&self.topology, self.id, from, msg)?;
        let op = postcard::from_bytes::<Operation>(&msg.payload)
            .map_err(|e| (InvalidKind::Malformed, format!("{}: undecodable operation: {e}", msg.id)))?;
        if let Addr::Client(_) = from {
            let check = Check::new(&self.topology, &self.config, now_ns, from, "submit");
            check.request_writes(op.writes.iter().map(|(k, v)| (k, v)), &op.reads).map_err(|e| (e.kind, e.detail))?;
        }
        let groups: BTreeSet<PartitionId> =
            op.reads.iter().chain(op.writes.iter().map(|(k, _)| k)).map(|k| self.topology.partition_of(k)).collect();
        if groups.is_empty() || !groups.iter().eq(msg.dest.iter()) {
            let why = format!("{} is addressed to groups {:?}, its keys are on {groups:?}", msg.id, msg.dest);
            return Err((InvalidKind::Malformed, why));
        }
        Ok(())
    }

    fn on_submit(&mut self, cx: &mut Cx<'_>, from: Addr, msg: McastMsg) -> Result<(), String> {
        if let Some((id, part)) = self.state.answers.get(&msg.id.origin)
            && *id == msg.id
        {
            // Delivered already: the answer was lost. The leader answers again.
            if self.member.is_leader() {
                cx.send(msg.id.origin, AmMsg::Done { id: *id, part: part.clone() });
            }
            return Ok(());
        }
        let events = self.member.on_wire(cx, from, McastWire::Submit(msg))?;
        self.handle(cx, events);
        Ok(())
    }
}

impl ServerNode<AmcastKv> for AmcastKvServer {
    fn on_start(&mut self, cx: &mut Cx<'_>) {
        let events = self.member.start(cx);
        self.handle(cx, events);
    }

    fn on_message(&mut self, cx: &mut Cx<'_>, from: Addr, msg: AmMsg) -> Result<(), InvalidInput> {
        let kind = msg.kind();
        let refuse = |k: InvalidKind, why: String| InvalidInput::new(k, kind, from, why);
        // The components check what they were sent (the group's membership, destination sets, timestamps)
        // and change nothing when they refuse it.
        let malformed = |why: String| refuse(InvalidKind::Malformed, why);
        match (from, msg) {
            (Addr::Server(server), AmMsg::Raft(wire)) => {
                let events = self.member.on_raft(cx, server, wire).map_err(malformed)?;
                self.handle(cx, events);
            }
            (Addr::Client(_), AmMsg::Raft(_)) => {
                return Err(refuse(InvalidKind::Sender, "only the members of a group exchange raft messages".into()));
            }
            (_, AmMsg::Mcast(McastWire::Submit(msg))) => {
                self.check_submit(cx.now_ns(), from, &msg).map_err(|(k, why)| refuse(k, why))?;
                self.on_submit(cx, from, msg).map_err(malformed)?;
            }
            (_, AmMsg::Mcast(wire)) => {
                // Proposals and decisions travel between the destination groups of a message.
                if !matches!(from, Addr::Server(s) if self.topology.contains(s) && s.partition != self.id.partition) {
                    let why = format!("{from} is not a member of another group");
                    return Err(refuse(InvalidKind::Sender, why));
                }
                let events = self.member.on_wire(cx, from, wire).map_err(malformed)?;
                self.handle(cx, events);
            }
            (_, AmMsg::Done { .. }) => {
                return Err(refuse(InvalidKind::Sender, "only clients are sent answers".into()));
            }
        }
        Ok(())
    }

    fn on_timer(&mut self, cx: &mut Cx<'_>, timer: AmTimer) {
        let events = match timer {
            AmTimer::Raft(_) => self.member.on_raft_tick(cx),
            AmTimer::Mcast(_) => self.member.on_tick(cx),
            AmTimer::Retry(_) => return,
        };
        self.handle(cx, events);
    }

    fn leads(&self) -> Option<u64> {
        self.member.is_leader().then(|| self.member.raft().term())
    }

    fn apply_change(&mut self, change: &[u8]) -> Result<(), String> {
        self.member.apply_change(change)
    }

    fn stored_versions(&self) -> usize {
        self.state.store.len()
    }
}

/// The operation a session runs.
struct Pending {
    op: OpId,
    id: McastId,
    reads: Vec<Key>,
    is_write: bool,
    parts: BTreeMap<PartitionId, Part>,
}

/// A client session: one operation at a time.
pub struct AmcastKvClient {
    dc: DcId,
    topology: Topology,
    config: ProtocolConfig,
    origin: McastOrigin,
    pending: Option<Pending>,
}

impl AmcastKvClient {
    pub fn new(id: ClientId, dc: DcId, topology: Topology, config: ProtocolConfig) -> Self {
        let p = params(&config);
        let origin = McastOrigin::new(Addr::Client(id), dc, topology, p.retry_ns, p.record);
        Self { dc, topology, config, origin, pending: None }
    }

    /// The datacenter this session runs in.
    pub fn dc(&self) -> DcId {
        self.dc
    }

    /// The session's multicast origin (what it multicast, with [`ProtocolConfig::record_components`]).
    pub fn origin(&self) -> &McastOrigin {
        &self.origin
    }
}

// Session tokens: none needed (the default). The client keeps nothing between operations, and the claimed
// level (`ser`) has no session order to carry.
impl ClientNode<AmcastKv> for AmcastKvClient {
    fn on_request(&mut self, cx: &mut Cx<'_>, op: OpId, request: Request) {
        if let Err(reason) = self.config.check_request(&request) {
            cx.complete(op, Err(OpError::Rejected(reason)));
            return;
        }
        // A session runs one operation at a time, so a new one means the runtime gave up on the previous
        // one (driver contract 4: a timeout or a broken connection, outcome unknown). Stop waiting for it;
        // the groups still finish it, at most once.
        if let Some(p) = self.pending.take() {
            self.origin.forget(p.id);
        }
        let operation = match Operation::from_request(request, AmcastKv::NAME, AmcastKv::OFFERS) {
            Ok(operation) => operation,
            Err(e) => {
                cx.complete(op, Err(e));
                return;
            }
        };
        let dest = operation.groups(&self.topology);
        let payload = postcard::to_stdvec(&operation).expect("an operation serializes");
        let id = self.origin.multicast(cx, dest, payload);
        let is_write = !operation.writes.is_empty();
        self.pending = Some(Pending { op, id, reads: operation.reads, is_write, parts: BTreeMap::new() });
    }

    fn on_message(&mut self, cx: &mut Cx<'_>, from: Addr, msg: AmMsg) {
        let (AmMsg::Done { id, part }, Addr::Server(server)) = (msg, from) else { return };
        let Some(p) = self.pending.as_mut().filter(|p| p.id == id) else { return };
        p.parts.entry(server.partition).or_insert(part);
        if !self.origin.answered(id, server) {
            return;
        }
        let p = self.pending.take().expect("pending");
        let ts = p.parts.values().map(|part| part.ts).max().unwrap_or(0);
        let commit = p.is_write.then_some(Version { time: ts, dc: 0 });
        let found = p.parts.values().flat_map(|part| part.reads.iter());
        cx.complete(p.op, Ok(group_op::reply(&p.reads, found, commit)));
    }

    fn on_timer(&mut self, cx: &mut Cx<'_>, timer: AmTimer) {
        if let AmTimer::Retry(t) = timer {
            self.origin.on_retry(cx, t);
        }
    }
}
