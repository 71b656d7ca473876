//! `tpc-kv` (`--protocol tpc-kv --replicas 3`): a key-value store whose multi-key operations commit by
//! two-phase commit over replica groups ([`crate::components::twopc`]), with no-wait locking at each
//! group. The 2PC counterpart of `amcast-kv`, on the same groups, for comparing the two terminations.
//!
//! # Operations
//!
//! A read-only transaction, a PUT and a blind multi-key update are each one transaction over the groups of
//! their keys. Preparing its part, a group takes a shared lock on each key it reads and an exclusive lock
//! on each key it writes, and reads; a key already locked in a conflicting mode makes it vote no (no-wait:
//! nothing ever waits, so there is no deadlock). The decision applies the writes and releases the locks.
//! An aborted operation completes with `Aborted(Vote)`; the workload driver's retry policy decides whether
//! to run it again.
//!
//! # Guarantees
//!
//! Strict serializability (claimed `strict-ser`): strict two-phase locking — every lock taken before the
//! commit decision and held until it is applied — orders transactions by their lock points, which lie
//! inside their lifetimes. A write's version is the transaction's commit timestamp, the maximum of the
//! Lamport clocks its groups voted with; a group's clock passes every timestamp it applies, so a
//! transaction that locks a key after another released it commits above it (`orders_versions`).
//!
//! # Faults
//!
//! As the component: any minority of each group, leader included, may crash mid-protocol.
//!
//! # Invalid input
//!
//! A server refuses ([`snowline_core::InvalidInput`]) before anything changes: Raft messages from anyone
//! but its group's members, a `Begin` from a client in another origin's name or from a server that is not
//! a member of its group forwarding it, one whose operation does not decode or whose keys are not exactly
//! on its participants, votes and decisions from anyone but a member of another group (the component then
//! checks them against what is prepared here), and outcomes, which only origins get. Lamport clock
//! arithmetic saturates, so a peer's forged vote cannot overflow it.
//!
//! Session tokens: none (the default): strict serializability needs nothing from a session's earlier
//! transactions.

use crate::components::consensus::{RaftTick, RaftWire};
use crate::components::twopc::{TpcHost, TpcMember, TpcOrigin, TpcParams, TpcRetry, TpcTick, TpcWire, TxnId};
use serde::{Deserialize, Serialize};
use snowline_core::{
    AbortCause, Addr, Check, ClientId, ClientNode, Ctx, DcId, Durability, InvalidInput, InvalidKind, Key,
    LinkAssumptions, Message, Offers, OpError, OpId, PartitionId, Protocol, ProtocolConfig, Request, ServerId,
    ServerNode, Topology, Value, Version,
};
use std::collections::{BTreeMap, BTreeSet};

pub struct TpcKv;

impl Protocol for TpcKv {
    const NAME: &'static str = "tpc-kv";
    type Msg = TpcMsg;
    type Timer = TpcTimer;
    type Server = TpcKvServer;
    type Client = TpcKvClient;
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
        // Raft and the component's re-sends need neither order nor delivery.
        LinkAssumptions { fifo: false }
    }

    const DURABILITY: Durability = Durability::PersistChanges;
    const TOLERATES_LOSS: bool = true;

    fn check_topology(_topology: &Topology) -> Result<(), String> {
        Ok(())
    }

    fn server(id: ServerId, topology: Topology, config: &ProtocolConfig) -> TpcKvServer {
        TpcKvServer::new(id, topology, TpcParams::default(), config)
    }

    fn client(id: ClientId, dc: DcId, topology: Topology, config: &ProtocolConfig) -> TpcKvClient {
        TpcKvClient::new(id, dc, topology, config.clone())
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum TpcMsg {
    Raft(RaftWire),
    Tpc(TpcWire),
}

impl Message for TpcMsg {
    fn kind(&self) -> &'static str {
        match self {
            TpcMsg::Raft(_) => "raft",
            TpcMsg::Tpc(TpcWire::Begin { .. }) => "begin",
            TpcMsg::Tpc(TpcWire::Vote { .. }) => "vote",
            TpcMsg::Tpc(TpcWire::Decision { .. }) => "decision",
            TpcMsg::Tpc(TpcWire::Outcome { .. }) => "outcome",
        }
    }

    /// A transaction that writes (one that does not decode is refused as one): on a full disk its host
    /// refuses it, while read-only ones go on.
    fn is_client_write(&self) -> bool {
        match self {
            TpcMsg::Tpc(TpcWire::Begin { payload, .. }) => {
                postcard::from_bytes::<Operation>(payload).map_or(true, |op| !op.writes.is_empty())
            }
            _ => false,
        }
    }

    fn expects_reply(&self, to: Addr) -> bool {
        match self {
            TpcMsg::Tpc(wire) => wire.answered_at(to),
            _ => true,
        }
    }
}

impl From<RaftWire> for TpcMsg {
    fn from(w: RaftWire) -> Self {
        TpcMsg::Raft(w)
    }
}

impl From<TpcWire> for TpcMsg {
    fn from(w: TpcWire) -> Self {
        TpcMsg::Tpc(w)
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum TpcTimer {
    Raft(RaftTick),
    Tpc(TpcTick),
    Retry(TpcRetry),
}

impl From<RaftTick> for TpcTimer {
    fn from(t: RaftTick) -> Self {
        TpcTimer::Raft(t)
    }
}

impl From<TpcTick> for TpcTimer {
    fn from(t: TpcTick) -> Self {
        TpcTimer::Tpc(t)
    }
}

impl From<TpcRetry> for TpcTimer {
    fn from(t: TpcRetry) -> Self {
        TpcTimer::Retry(t)
    }
}

use super::group_op;
/// What a transaction carries (its `Begin` payload, postcard-encoded): all its keys (each group prepares
/// its own). Its participants are exactly the groups of its keys.
pub use super::group_op::GroupOp as Operation;

/// A group's vote: its reads and its clock.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
struct Part {
    reads: Vec<(Key, Option<Value>, Version)>,
    clock: u64,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
struct Lock {
    readers: BTreeSet<TxnId>,
    writer: Option<TxnId>,
}

/// A group's replicated state.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
struct KvState {
    partition: PartitionId,
    topology: Option<Topology>,
    store: BTreeMap<Key, (Value, Version)>,
    locks: BTreeMap<Key, Lock>,
    /// Each prepared transaction's writes to this group's keys.
    pending: BTreeMap<TxnId, Operation>,
    /// Lamport clock: above every commit timestamp applied here.
    clock: u64,
}

impl KvState {
    fn mine(&self, k: &Key) -> bool {
        self.topology.is_some_and(|t| t.partition_of(k) == self.partition)
    }
}

impl TpcHost for KvState {
    fn prepare(&mut self, id: TxnId, payload: &[u8]) -> Option<Vec<u8>> {
        let op: Operation = postcard::from_bytes(payload).ok()?;
        let reads: Vec<Key> = op.reads.into_iter().filter(|k| self.mine(k)).collect();
        let writes: Vec<(Key, Value)> = op.writes.into_iter().filter(|(k, _)| self.mine(k)).collect();
        let free = |l: Option<&Lock>, exclusive: bool| {
            l.is_none_or(|l| l.writer.is_none() && (!exclusive || l.readers.is_empty()))
        };
        if !reads.iter().all(|k| free(self.locks.get(k), false))
            || !writes.iter().all(|(k, _)| free(self.locks.get(k), true))
        {
            return None;
        }
        for k in &reads {
            self.locks.entry(k.clone()).or_default().readers.insert(id);
        }
        for (k, _) in &writes {
            self.locks.entry(k.clone()).or_default().writer = Some(id);
        }
        let part = Part {
            reads: reads
                .iter()
                .map(|k| match self.store.get(k) {
                    Some((v, ver)) => (k.clone(), Some(v.clone()), *ver),
                    None => (k.clone(), None, group_op::INITIAL),
                })
                .collect(),
            // Saturating: a vote forged by a peer can carry any clock (the decision raises this one to it).
            clock: self.clock.saturating_add(1),
        };
        self.pending.insert(id, Operation { reads, writes });
        Some(postcard::to_stdvec(&part).expect("a part serializes"))
    }

    fn decide(&mut self, id: TxnId, commit: Option<&[(PartitionId, Vec<u8>)]>) {
        let Some(op) = self.pending.remove(&id) else { return };
        if let Some(parts) = commit {
            let ts = parts
                .iter()
                .filter_map(|(_, p)| postcard::from_bytes::<Part>(p).ok())
                .map(|p| p.clock)
                .max()
                .unwrap_or(self.clock.saturating_add(1));
            self.clock = self.clock.max(ts);
            for (k, v) in &op.writes {
                self.store.insert(k.clone(), (v.clone(), Version { time: ts, dc: 0 }));
            }
        }
        for k in op.reads.iter().chain(op.writes.iter().map(|(k, _)| k)) {
            if let Some(l) = self.locks.get_mut(k) {
                l.readers.remove(&id);
                if l.writer == Some(id) {
                    l.writer = None;
                }
                if l.writer.is_none() && l.readers.is_empty() {
                    self.locks.remove(k);
                }
            }
        }
    }

    fn snapshot(&self) -> Vec<u8> {
        postcard::to_stdvec(self).expect("the state serializes")
    }

    fn restore(&mut self, data: &[u8]) {
        if let Ok(state) = postcard::from_bytes::<KvState>(data) {
            *self = state;
        }
    }
}

type Cx<'a> = Ctx<'a, TpcKv>;

/// A member of a partition's replica group.
#[derive(Serialize, Deserialize)]
pub struct TpcKvServer {
    id: ServerId,
    topology: Topology,
    member: TpcMember,
    state: KvState,
    /// The limits clients' operations are checked against.
    config: ProtocolConfig,
}

impl TpcKvServer {
    pub fn new(id: ServerId, topology: Topology, params: TpcParams, config: &ProtocolConfig) -> Self {
        let state = KvState { partition: id.partition, topology: Some(topology), ..KvState::default() };
        Self { id, topology, member: TpcMember::new(id, topology, params), state, config: config.clone() }
    }

    /// A `Begin` comes from its origin (a client beginning its own transaction) or from another member of
    /// this group forwarding it to its leader, and carries an operation whose keys are exactly on its
    /// participant groups. (The 2PC component then checks the participant list itself.)
    /// A client's operation is within the request limits (`ProtocolConfig`; `now_ns`: this server's clock).
    fn check_begin(
        &self,
        now_ns: u64,
        from: Addr,
        id: TxnId,
        participants: &[PartitionId],
        payload: &[u8],
    ) -> Result<(), (InvalidKind, String)> {
        match from {
            Addr::Client(_) if id.origin != from => {
                return Err((InvalidKind::Sender, format!("a client begins only its own transactions, not {id}")));
            }
            Addr::Client(_) => {}
            Addr::Server(s) => {
                if !self.topology.contains(s) || s.partition != self.id.partition || s == self.id {
                    let why = format!("{s} is not another member of {}'s group (only those forward a begin)", self.id);
                    return Err((InvalidKind::Sender, why));
                }
            }
        }
        let op = postcard::from_bytes::<Operation>(payload)
            .map_err(|e| (InvalidKind::Malformed, format!("{id}: undecodable operation: {e}")))?;
        let groups: BTreeSet<PartitionId> =
            op.reads.iter().chain(op.writes.iter().map(|(k, _)| k)).map(|k| self.topology.partition_of(k)).collect();
        if groups.is_empty() || !groups.iter().eq(participants.iter()) {
            let why = format!("{id} names participants {participants:?}, its keys are on {groups:?}");
            return Err((InvalidKind::Malformed, why));
        }
        if let Addr::Client(_) = from {
            let check = Check::new(&self.topology, &self.config, now_ns, from, "begin");
            check.request_writes(op.writes.iter().map(|(k, v)| (k, v)), &op.reads).map_err(|e| (e.kind, e.detail))?;
        }
        Ok(())
    }

    /// The 2PC endpoint (leadership, prepared transactions).
    pub fn member(&self) -> &TpcMember {
        &self.member
    }

    /// The value of `key` in this member's state.
    pub fn value(&self, key: &str) -> Option<&Value> {
        self.state.store.get(key).map(|(v, _)| v)
    }

    /// Keys locked here.
    pub fn locked(&self) -> usize {
        self.state.locks.len()
    }
}

impl ServerNode<TpcKv> for TpcKvServer {
    fn on_start(&mut self, cx: &mut Cx<'_>) {
        self.member.start(cx, &mut self.state);
    }

    fn on_message(&mut self, cx: &mut Cx<'_>, from: Addr, msg: TpcMsg) -> Result<(), InvalidInput> {
        cx.charge(1);
        let kind = msg.kind();
        let refuse = |k: InvalidKind, why: String| InvalidInput::new(k, kind, from, why);
        // The components check what they were sent (the group's membership, participant lists, votes and
        // decisions against what is prepared here) and change nothing when they refuse it.
        let malformed = |why: String| refuse(InvalidKind::Malformed, why);
        match (from, msg) {
            (Addr::Server(server), TpcMsg::Raft(wire)) => {
                self.member.on_raft(cx, server, wire, &mut self.state).map_err(malformed)?;
            }
            (Addr::Client(_), TpcMsg::Raft(_)) => {
                return Err(refuse(InvalidKind::Sender, "only the members of a group exchange raft messages".into()));
            }
            (_, TpcMsg::Tpc(TpcWire::Begin { id, participants, payload })) => {
                self.check_begin(cx.now_ns(), from, id, &participants, &payload).map_err(|(k, why)| refuse(k, why))?;
                let wire = TpcWire::Begin { id, participants, payload };
                self.member.on_wire(cx, from, wire, &mut self.state).map_err(malformed)?;
            }
            (_, TpcMsg::Tpc(TpcWire::Outcome { .. })) => {
                return Err(refuse(InvalidKind::Sender, "only origins are sent outcomes".into()));
            }
            (_, TpcMsg::Tpc(wire)) => {
                // Votes and decisions travel between the participant groups of a transaction.
                if !matches!(from, Addr::Server(s) if self.topology.contains(s) && s.partition != self.id.partition) {
                    return Err(refuse(InvalidKind::Sender, format!("{from} is not a member of another group")));
                }
                self.member.on_wire(cx, from, wire, &mut self.state).map_err(malformed)?;
            }
        }
        Ok(())
    }

    fn on_timer(&mut self, cx: &mut Cx<'_>, timer: TpcTimer) {
        match timer {
            TpcTimer::Raft(_) => self.member.on_raft_tick(cx, &mut self.state),
            TpcTimer::Tpc(_) => self.member.on_tick(cx, &mut self.state),
            TpcTimer::Retry(_) => {}
        }
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

struct Pending {
    op: OpId,
    id: TxnId,
    reads: Vec<Key>,
    is_write: bool,
}

/// A client session: one operation at a time.
pub struct TpcKvClient {
    topology: Topology,
    config: ProtocolConfig,
    origin: TpcOrigin,
    pending: Option<Pending>,
}

impl TpcKvClient {
    pub fn new(id: ClientId, dc: DcId, topology: Topology, config: ProtocolConfig) -> Self {
        let origin = TpcOrigin::new(Addr::Client(id), dc, topology, TpcParams::default().retry_ns);
        Self { topology, config, origin, pending: None }
    }
}

// Session tokens: none needed (the default). Strict serializability needs nothing from a session's earlier
// operations, and the client keeps nothing between them.
impl ClientNode<TpcKv> for TpcKvClient {
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
        let operation = match Operation::from_request(request, TpcKv::NAME, TpcKv::OFFERS) {
            Ok(operation) => operation,
            Err(e) => {
                cx.complete(op, Err(e));
                return;
            }
        };
        let participants = operation.groups(&self.topology);
        let payload = postcard::to_stdvec(&operation).expect("an operation serializes");
        let id = self.origin.begin(cx, participants, payload);
        let is_write = !operation.writes.is_empty();
        self.pending = Some(Pending { op, id, reads: operation.reads, is_write });
    }

    fn on_message(&mut self, cx: &mut Cx<'_>, from: Addr, msg: TpcMsg) {
        let (TpcMsg::Tpc(wire @ TpcWire::Outcome { id, .. }), Addr::Server(server)) = (msg, from) else { return };
        if self.pending.as_ref().is_none_or(|p| p.id != id) {
            return;
        }
        let Some(outcome) = self.origin.on_outcome(server, wire) else { return };
        let p = self.pending.take().expect("pending");
        let Some(parts) = outcome else {
            let reason = "a participant group found a key locked by a concurrent transaction";
            cx.complete(p.op, Err(OpError::aborted(AbortCause::Vote, reason)));
            return;
        };
        let parts: Vec<Part> = parts.iter().filter_map(|(_, b)| postcard::from_bytes::<Part>(b).ok()).collect();
        let ts = parts.iter().map(|part| part.clock).max().unwrap_or(0);
        let commit = p.is_write.then_some(Version { time: ts, dc: 0 });
        cx.complete(p.op, Ok(group_op::reply(&p.reads, parts.iter().flat_map(|part| part.reads.iter()), commit)));
    }

    fn on_timer(&mut self, cx: &mut Cx<'_>, timer: TpcTimer) {
        if let TpcTimer::Retry(t) = timer {
            self.origin.on_retry(cx, t);
        }
    }
}
