//! The sans-IO boundary: a protocol is a set of deterministic state machines, one per node.
//!
//! # Nodes
//!
//! A protocol has two kinds of node: a [`ServerNode`] per partition server (`ServerId`: datacenter ×
//! partition) and a [`ClientNode`] per client session (the client library's half of the protocol: it keeps
//! the session's causal context, picks a coordinator, runs client-side rounds). Both are plain structs;
//! neither reads a clock, spawns a thread, touches a socket or uses a global random generator. Everything
//! from outside arrives as an argument, everything to the outside leaves as data in [`Effects`].
//!
//! # Driver contract
//!
//! A runtime (the simulator in `snowline-sim`, the networked runtime in `snowline-net`) must:
//!
//! 1. Build every node with [`Protocol::server`] / [`Protocol::client`], then call `on_start` exactly once
//!    on each, before any other input. (Servers set their periodic timers there.)
//! 2. Feed a node one input at a time, never concurrently: `on_message`, `on_timer`, and for clients
//!    `on_request`. For each input build a fresh [`Ctx`] carrying the node's physical clock reading in
//!    nanoseconds (non-decreasing per node; it may be skewed and drift relative to other nodes) and the
//!    node's own seeded random generator.
//! 3. After the handler returns, carry out the effects in the order they were emitted: each `(to, msg)`
//!    in `sends` is delivered to node `to` (links may delay messages; they reorder or lose them only if
//!    [`Protocol::links`] says the protocol tolerates it); each timer fires `on_timer` once, `delay_ns` of
//!    the node's clock later (there is no cancellation: protocols ignore stale timers); each completion is
//!    handed to the application that submitted the operation. `work` is the CPU cost the handler reports,
//!    in abstract work units: the simulator's CPU model charges time for it, the networked runtime ignores it.
//! 4. A message addressed to a client that no longer exists is dropped. A client node completes every
//!    operation exactly once; a runtime may give up on an operation earlier (timeout: outcome unknown) and
//!    then ignores its later completion.

use crate::config::ProtocolConfig;
use crate::ids::{Addr, ClientId, DcId, OpId, ServerId};
use crate::request::{Key, OpError, Reply, Request, Value};
use crate::topology::Topology;
use crate::validate::InvalidInput;
use rand::rngs::SmallRng;
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::fmt::Debug;

/// A protocol's internal message type: serializable for the networked runtime, cloneable for the simulator.
pub trait Message: Serialize + DeserializeOwned + Clone + Debug + Send + 'static {
    /// A short name of the message's kind ("read", "prepare", ...), for traces and per-kind counts.
    fn kind(&self) -> &'static str;
    /// Whether this message, from a client, asks its server to write: a durable server whose disk is full
    /// refuses it (and lets reads through; `snowline_storage::host`). Server-to-server messages answer false.
    fn is_client_write(&self) -> bool {
        false
    }
    /// Whether this message, from a client, is one its server answers with a message back to that client.
    /// A notice that gets no answer (2PL's release of the read locks a finished read-only transaction held)
    /// must say false: the networked server counts a client connection's requests until they are answered
    /// and stops reading the connection when the count reaches its budget (`snowline_net::limits`), so a
    /// notice counted as a request would use the budget up and stall every session on that connection.
    /// `to`: the server it was sent to. A request sent to several servers that only one of them answers
    /// (two-phase commit's `Begin`, which only the coordinator's group answers) says false at the others.
    fn expects_reply(&self, _to: Addr) -> bool {
        true
    }
    /// For a client's request that its server's host refuses without handling it (a full disk,
    /// `snowline_storage::host`), the protocol's own answer saying so (`why`), sent to the client in the
    /// server's name: the client node then decides what its application is told (a refused retry of a write
    /// whose earlier attempt may have been applied is outcome unknown, not rejected). `None` (the default):
    /// the host answers with its generic refusal, which the client library reports as rejected, so a
    /// protocol whose client node resends writes must answer here.
    fn refusal(&self, _why: &str) -> Option<Self> {
        None
    }
    /// For a server's message to a client that ends an operation or a step of one: how it went, for the
    /// server's metrics (aborts by cause, time spent waiting). `None` for every other message, and in
    /// protocols whose clients assemble the outcome from several replies.
    fn reply_note(&self) -> Option<ReplyNote> {
        None
    }
}

/// How an operation (or a step of an interactive transaction) went, as its server's reply says.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReplyNote {
    /// Aborted, and why.
    pub abort: Option<crate::AbortCause>,
    /// Refused without effect (bad input, an offer the protocol lacks, a snapshot too old).
    pub rejected: bool,
    /// Time the request waited at the servers (locks, snapshots, stabilisation), as the reply reports it.
    pub blocked_ns: u64,
}

impl ReplyNote {
    /// The note of a reply that carries a whole outcome.
    pub fn of<T>(result: &Result<T, crate::OpError>, blocked_ns: u64) -> Self {
        match result {
            Ok(_) => ReplyNote { blocked_ns, ..Default::default() },
            Err(e) => {
                ReplyNote { abort: e.abort_cause(), rejected: matches!(e, crate::OpError::Rejected(_)), blocked_ns }
            }
        }
    }
}

/// What a protocol assumes of the links between nodes. The simulator injects only faults within them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LinkAssumptions {
    /// Messages between two nodes arrive in the order sent (TCP gives this while a connection lives).
    pub fifo: bool,
}

/// What kinds of request a protocol offers. The client library refuses the others up front
/// (`OpError::Rejected`), and the CLI names the protocols that do offer them and the operations the
/// cluster's protocol serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Offers {
    /// One-shot read-only transactions (`Request::Rot`; a GET is one of one key).
    pub read_only: bool,
    /// Read-only transactions over more than one key (false: one key per `Request::Rot`, a GET: raft-kv).
    pub multi_key_rots: bool,
    /// Multi-shot read-only transactions (`Request::RotRounds`: several rounds over one snapshot).
    pub multi_shot_rots: bool,
    /// Blind writes: single-key PUTs (`Request::Put`), and in an interactive transaction writes of keys it
    /// did not read. Without them (the Jessy family's write-certifying criteria) an interactive
    /// transaction must read every key it writes first ([`Offers::unread_writes`]).
    pub blind_writes: bool,
    /// Blind multi-key update transactions (`Request::Update`; the W of SNOW). Workloads issue single-key
    /// PUTs instead where a protocol lacks them.
    pub write_transactions: bool,
    /// Interactive read-write transactions (`Begin`, `Read`, `Commit`, `Abort`).
    pub interactive: bool,
    /// Stored procedures (`Request::Call`, [`crate::procedure`]).
    pub stored_procedures: bool,
}

impl Offers {
    /// The causal family's offer: ROTs and blind writes.
    pub const CAUSAL: Offers = Offers {
        read_only: true,
        multi_key_rots: true,
        multi_shot_rots: false,
        blind_writes: true,
        write_transactions: false,
        interactive: false,
        stored_procedures: false,
    };

    /// The capability a request needs, in words ("interactive transactions"), and whether this offer has it.
    pub fn capability(&self, request: &Request) -> (&'static str, bool) {
        match request {
            Request::Rot { keys } if keys.len() > 1 => {
                ("read-only transactions over several keys", self.read_only && self.multi_key_rots)
            }
            Request::Rot { .. } => ("read-only transactions", self.read_only),
            Request::RotRounds { .. } => ("multi-shot read-only transactions", self.multi_shot_rots),
            Request::Put { .. } => ("blind writes", self.blind_writes),
            Request::Update { .. } => ("write transactions", self.write_transactions),
            Request::Begin | Request::Read { .. } | Request::Commit { .. } | Request::Abort => {
                ("interactive transactions", self.interactive)
            }
            Request::Call { .. } => ("stored procedures", self.stored_procedures),
        }
    }

    /// The capability a request needs, in words, if this offer lacks it.
    pub fn missing(&self, request: &Request) -> Option<&'static str> {
        let (what, offered) = self.capability(request);
        (!offered).then_some(what)
    }

    /// The refusal a client of `protocol` gets for a request of a kind it does not offer.
    pub fn refusal(&self, protocol: &str, request: &Request) -> OpError {
        OpError::Rejected(format!("{protocol} offers no {}", self.capability(request).0))
    }

    /// The keys an interactive transaction that read `reads` would write blindly (without having read
    /// them) with `writes`, where this offer has no blind writes; empty where it has them. Such a write
    /// depends on no version of its key, so write-conflict certification aborts it whenever the key was
    /// ever written (and a protocol certifying reads could commit it unserializably): it is refused before
    /// it is sent ([`Offers::blind_write_refusal`]).
    pub fn unread_writes<'a>(&self, reads: &[Key], writes: &'a [(Key, Value)]) -> Vec<&'a Key> {
        if self.blind_writes {
            return Vec::new();
        }
        let mut unread: Vec<&Key> = Vec::new();
        for (k, _) in writes {
            if !reads.contains(k) && !unread.contains(&k) {
                unread.push(k);
            }
        }
        unread
    }

    /// Why `protocol` refuses a transaction that writes `unread` keys it did not read (see
    /// [`Offers::unread_writes`]), and what to do instead.
    pub fn blind_write_refusal(protocol: &str, unread: &[&Key]) -> String {
        let keys: Vec<String> = unread.iter().map(|k| format!("{k:?}")).collect();
        format!(
            "{protocol} offers no blind writes: a transaction must read each key it writes (it writes {} without \
             reading {}); {protocol} certifies a write against the versions the transaction read, so an unread \
             key's write would abort whenever the key already exists. Read it in the same transaction first",
            keys.join(", "),
            if keys.len() == 1 { "it" } else { "them" }
        )
    }
}

/// How a durable host makes a protocol's servers survive a crash (`snowline_storage::host` has the details).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Durability {
    /// The server's whole state round-trips through its serialization and its handlers are deterministic:
    /// the host checkpoints the state and logs the inputs that change it; a restart replays them.
    ReplayInputs,
    /// The server says what it changed that a restart needs ([`Ctx::persist`]); the host logs those changes
    /// and nothing else. A restart rebuilds the server from its checkpoint and the changes
    /// ([`ServerNode::apply_change`]) and starts it again (`on_start`): state outside the changes is soft.
    /// Raft's members are made durable this way, as a Raft node is (its hard state, log and snapshot;
    /// role, leader and followers' progress are rebuilt). Their links need not be reliable
    /// ([`Protocol::TOLERATES_LOSS`]): the host does not sequence them.
    PersistChanges,
}

/// A protocol: its message and timer types and how to build its nodes.
pub trait Protocol: Sized + 'static {
    /// The name users select it by (`--protocol NAME`).
    const NAME: &'static str;
    type Msg: Message;
    /// A protocol's timers; fired back into `on_timer` unchanged. Serializable so a durable server can
    /// log them and keep them across a restart.
    type Timer: Serialize + DeserializeOwned + Clone + Debug + Send + 'static;
    type Server: ServerNode<Self>;
    type Client: ClientNode<Self>;

    /// What the protocol offers its clients; a request outside it is refused before it is sent.
    const OFFERS: Offers;
    /// Runs TPC-C coordination-free (`crate::tpcc::coordfree`): merge writes and deferred ids, atomically
    /// visible multi-partition writes, single-partition calls at their home.
    const COORDINATION_FREE_TPCC: bool = false;

    fn links() -> LinkAssumptions;

    /// How a durable host (`snowline-storage`'s `DurableHost`) makes this protocol's servers survive a crash.
    const DURABILITY: Durability = Durability::ReplayInputs;

    /// Whether the protocol's servers tolerate lost messages between them (Raft does: a leader resends what a
    /// follower lacks). When false the simulator loses a server-to-server message only where something below
    /// the protocol resends it (a durable host's sequenced links, `SimConfig::durable`); otherwise a network
    /// partition that drops messages delays such messages until it heals, as TCP would. Messages between
    /// clients and servers may always be lost: the client library reports the operation's outcome as unknown.
    const TOLERATES_LOSS: bool = false;

    /// Whether the protocol runs on `topology`'s placement; `Err` says why not, for the user. By default a
    /// protocol needs full replication with one server per partition per datacenter, as every protocol
    /// written before replica groups assumes.
    fn check_topology(topology: &Topology) -> Result<(), String> {
        if topology.one_replica_per_dc() {
            Ok(())
        } else {
            Err(format!(
                "{} runs with one replica of each partition per datacenter (replicas = dcs = {}), not {}",
                Self::NAME,
                topology.dcs,
                topology.replicas
            ))
        }
    }

    fn server(id: ServerId, topology: Topology, config: &ProtocolConfig) -> Self::Server;
    fn client(id: ClientId, dc: DcId, topology: Topology, config: &ProtocolConfig) -> Self::Client;
}

/// A partition server's state machine. See the module docs for the call order.
///
/// Serializable: a durable server checkpoints its nodes' whole state (`snowline-storage`), so everything
/// a correct restart needs must be in the struct (and nothing may depend on hashing or addresses).
pub trait ServerNode<P: Protocol>: Serialize + DeserializeOwned + Send + 'static {
    fn on_start(&mut self, cx: &mut Ctx<'_, P>);
    /// Handle a message from a peer server or a client. `from` and `msg` are untrusted input: the server
    /// validates them against the topology and its clock ([`crate::validate`]) before touching its state and
    /// returns [`InvalidInput`] for a message that does not fit; no message may make it panic. The host
    /// decides what to do with the connection (the networked server answers with an `Error` frame and counts
    /// it; the simulator counts it). Effects emitted before an error are still carried out.
    fn on_message(&mut self, cx: &mut Ctx<'_, P>, from: Addr, msg: P::Msg) -> Result<(), InvalidInput>;
    fn on_timer(&mut self, cx: &mut Ctx<'_, P>, timer: P::Timer);
    /// Versions currently stored (for memory metrics).
    fn stored_versions(&self) -> usize;
    /// Redo one change this server reported with [`Ctx::persist`], on a server rebuilt from a checkpoint
    /// ([`Durability::PersistChanges`]; the host then calls `on_start`). `Err` says why the bytes are not a
    /// change of this server (the data directory is damaged).
    fn apply_change(&mut self, _change: &[u8]) -> Result<(), String> {
        Err("this protocol logs its inputs, not changes".into())
    }
    /// `Some(term)` while this server believes it leads its replica group (in that term or epoch), for
    /// protocols with leaders; the simulator's fault schedules use it to kill leaders. `None` by default.
    fn leads(&self) -> Option<u64> {
        None
    }
}

/// A client session's state machine. See the module docs for the call order.
pub trait ClientNode<P: Protocol>: Send + 'static {
    fn on_start(&mut self, _cx: &mut Ctx<'_, P>) {}
    /// The application submits an operation; the node must complete `op` exactly once.
    fn on_request(&mut self, cx: &mut Ctx<'_, P>, op: OpId, request: Request);
    fn on_message(&mut self, cx: &mut Ctx<'_, P>, from: Addr, msg: P::Msg);
    fn on_timer(&mut self, _cx: &mut Ctx<'_, P>, _timer: P::Timer) {}
    /// What this session tracks that its guarantees need across operations (dependencies, snapshot
    /// vectors, stable times, cached own writes), serialized, so that a later session, perhaps in another
    /// process or datacenter, can carry on from it ([`ClientNode::resume_session`]; the gRPC API's session
    /// token). Empty: the protocol's guarantees need nothing from one operation to the next (the default,
    /// right only for protocols whose clients keep no such state).
    fn save_session(&self) -> Vec<u8> {
        Vec::new()
    }
    /// Carry on from `saved` ([`ClientNode::save_session`] of a session of this protocol and topology, maybe
    /// in another datacenter), on a node that has handled no request yet: afterwards this session's
    /// guarantees include every operation of the saved one. `saved` is untrusted input: `Err` says why it is
    /// not a session of this protocol. The default accepts only the empty state.
    fn resume_session(&mut self, saved: &[u8]) -> Result<(), String> {
        if saved.is_empty() { Ok(()) } else { Err("this protocol's sessions carry no state".into()) }
    }
}

/// Everything a handler emits, as data.
#[derive(Debug)]
pub struct Effects<P: Protocol> {
    pub sends: Vec<(Addr, P::Msg)>,
    pub timers: Vec<(u64, P::Timer)>,
    pub completions: Vec<(OpId, Result<Reply, OpError>)>,
    pub work: u64,
    /// The handler changed no state a restart needs ([`Ctx::read_only`]).
    pub read_only: bool,
    /// The outputs of a read-only input may leave once this log position is durable ([`Ctx::reply_after`]).
    pub reply_after: u64,
    /// Later inputs of this node must get clock readings at or above this ([`Ctx::raise_clock`]).
    pub raise_clock: u64,
    /// Changes a restart needs, in order ([`Ctx::persist`]).
    pub changes: Vec<Vec<u8>>,
}

impl<P: Protocol> Default for Effects<P> {
    fn default() -> Self {
        Self {
            sends: Vec::new(),
            timers: Vec::new(),
            completions: Vec::new(),
            work: 0,
            read_only: false,
            reply_after: 0,
            raise_clock: 0,
            changes: Vec::new(),
        }
    }
}

impl<P: Protocol> Effects<P> {
    pub fn clear(&mut self) {
        self.sends.clear();
        self.timers.clear();
        self.completions.clear();
        self.work = 0;
        self.read_only = false;
        self.reply_after = 0;
        self.raise_clock = 0;
        self.changes.clear();
    }

    pub fn is_empty(&self) -> bool {
        self.sends.is_empty() && self.timers.is_empty() && self.completions.is_empty()
    }
}

/// The context of one handler call: the clock reading and random generator passed in, the effects out.
///
/// # The durable boundary
///
/// A durable host (`snowline-storage`'s `DurableHost`) logs the inputs that change what a restart needs and
/// holds their outputs until the log is durable. A handler that changed nothing a restart needs (a read)
/// says so with [`read_only`](Ctx::read_only): its input is not logged and its replies leave at once — or
/// once the log position it names with [`reply_after`](Ctx::reply_after) is durable (the position at which
/// the versions it returned were written, [`position`](Ctx::position)). What such a handler may still do:
/// change state that only read-only handlers read, and [`raise_clock`](Ctx::raise_clock) (the host keeps
/// that promise across a restart). It must not change state that logged handlers read, set timers or send
/// to servers (a host that sees it do the last two logs the input after all). Outside a durable host every
/// position is durable at once.
pub struct Ctx<'a, P: Protocol> {
    now_ns: u64,
    rng: &'a mut SmallRng,
    out: &'a mut Effects<P>,
    position: u64,
    durable: u64,
    persisting: bool,
}

impl<'a, P: Protocol> Ctx<'a, P> {
    pub fn new(now_ns: u64, rng: &'a mut SmallRng, out: &'a mut Effects<P>) -> Self {
        Self { now_ns, rng, out, position: 0, durable: u64::MAX, persisting: false }
    }

    /// A handler call inside a durable host that logs changes ([`Durability::PersistChanges`]).
    pub fn persisting_changes(mut self) -> Self {
        self.persisting = true;
        self
    }

    /// Whether what this handler [`persist`](Ctx::persist)s is kept (only inside a durable host of a
    /// [`Durability::PersistChanges`] protocol): a server skips encoding its changes otherwise.
    pub fn persisting(&self) -> bool {
        self.persisting
    }

    /// A change a restart needs ([`Durability::PersistChanges`]): the host logs it, holds every output of this
    /// input until it is durable, and after a crash hands it back to [`ServerNode::apply_change`].
    pub fn persist(&mut self, change: Vec<u8>) {
        if self.persisting {
            self.out.changes.push(change);
        }
    }

    /// A handler call inside a durable host: this input's log position, and the last durable one.
    pub fn logged(mut self, position: u64, durable: u64) -> Self {
        self.position = position;
        self.durable = durable;
        self
    }

    /// The log position this input's record gets (0 outside a durable host). A logged handler stamps what
    /// it writes with it, so that a read-only handler returning it can name it in [`reply_after`].
    ///
    /// [`reply_after`]: Ctx::reply_after
    pub fn position(&self) -> u64 {
        self.position
    }

    /// The last durable log position (`u64::MAX` outside a durable host). Only for state that read-only
    /// handlers read: a replay sees a different value than the original call did.
    pub fn durable_position(&self) -> u64 {
        self.durable
    }

    /// This handler changed no state a restart needs: the input is not logged (see the type's docs).
    pub fn read_only(&mut self) {
        self.out.read_only = true;
    }

    /// The outputs of this read-only input reveal what was logged at `position`: they leave once it is
    /// durable.
    pub fn reply_after(&mut self, position: u64) {
        self.out.reply_after = self.out.reply_after.max(position);
    }

    /// Later inputs of this node get clock readings of at least `ns` (a promise a read made: every later
    /// local timestamp is larger). Durable hosts keep it across a restart.
    pub fn raise_clock(&mut self, ns: u64) {
        self.out.raise_clock = self.out.raise_clock.max(ns);
    }

    /// This node's physical clock, in nanoseconds.
    pub fn now_ns(&self) -> u64 {
        self.now_ns
    }

    pub fn rng(&mut self) -> &mut SmallRng {
        self.rng
    }

    pub fn send(&mut self, to: impl Into<Addr>, msg: P::Msg) {
        self.out.sends.push((to.into(), msg));
    }

    pub fn set_timer(&mut self, delay_ns: u64, timer: P::Timer) {
        self.out.timers.push((delay_ns, timer));
    }

    pub fn complete(&mut self, op: OpId, result: Result<Reply, OpError>) {
        self.out.completions.push((op, result));
    }

    /// Report CPU work done by this handler, in work units (one unit ≈ one key touched or version scanned).
    pub fn charge(&mut self, units: u64) {
        self.out.work += units;
    }
}

impl From<ServerId> for Addr {
    fn from(s: ServerId) -> Self {
        Addr::Server(s)
    }
}

impl From<ClientId> for Addr {
    fn from(c: ClientId) -> Self {
        Addr::Client(c)
    }
}
