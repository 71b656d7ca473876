//! Rococo (`--protocol rococo`: Mu, Nguyen, Wang, Li, "Extracting More Concurrency from Distributed
//! Transactions", OSDI 2014) and Rococo-SNOW (`--protocol rococo-snow`: Lu et al., "The SNOW Theorem and
//! Latency-Optimal Read-Only Transactions", OSDI 2016, §5.4): strictly serializable transactions that
//! *reorder* conflicting transactions instead of aborting them, with two read-only transaction algorithms.
//!
//! # Transactions: pieces, dependencies, one order everywhere
//!
//! A transaction is a stored procedure (`core::procedure`), chopped into pieces that each touch one server.
//! An *immediate* piece runs when it is dispatched (its output is needed: later pieces' keys depend on it);
//! a *deferrable* piece waits until the transaction's place among its conflicting transactions is decided.
//!
//! 1. **Start phase.** The coordinator dispatches each wave of pieces to their servers
//!    ([`RccMsg::Dispatch`]). A server runs the immediate pieces, buffers the deferrable ones, and tracks
//!    dependencies per key: a read depends on the last unexecuted writer of the key, a write on the last
//!    unexecuted writer and every unexecuted reader since (an edge `parent → child`, marked *immediate* when
//!    the child's access ran immediately, so its order is already fixed). It answers with the outputs and
//!    the dependency graph it knows of the transaction's unexecuted ancestors ([`RccMsg::Dispatched`]).
//! 2. **Commit phase.** Once every piece is dispatched, the coordinator merges the graphs, marks the
//!    transaction *committing* (its parents and servers are now final) and sends the graph to every
//!    participant ([`RccMsg::Commit`]).
//! 3. **Inquire.** A server executes a transaction only when every ancestor is committing. An ancestor that
//!    has no piece here is asked about at one of its servers ([`RccMsg::Inquire`], answered once it is
//!    committing there); one that has a piece here will get its own commit.
//! 4. **Execution order.** Every server computes the strongly connected components of the committed
//!    graph (Tarjan), runs them in topological order, and inside a component orders the transactions
//!    deterministically: a topological order of the *fixed* edges, ties broken by transaction id. An edge
//!    is fixed when the parent's access was an immediate piece: that access already ran, so the child
//!    must follow it whether the child's piece is immediate or deferrable (one New-Order's immediate
//!    `D_NEXT_O_ID` increment and the next New-Order's of the same district).
//!    Such an edge comes from every undone transaction whose immediate access to the key conflicts (one
//!    of the two writes), not only from the last writer: a deferred writer between the two may be ordered
//!    after the later transaction, which would then come before the immediate write it has already seen
//!    (found on TPC-C at three terminals per district, when Payment's deferred `D_YTD` update shared
//!    New-Order's district row: a second Payment's last writer was the first Payment). Deferrable accesses
//!    alone are reordered freely inside a component; that is Rococo's point. The
//!    committed graph of a component is the same on every server, so every server runs the same order; a
//!    server answers [`RccMsg::Executed`] with the deferred pieces' outputs, and the coordinator answers the
//!    client when every server has.
//!
//! Rococo's offline check (§3.3 of its paper) admits only procedures whose immediate accesses cannot
//! be reordered: here an immediate piece may not touch a key with an unexecuted *deferrable* access of
//! another transaction (it would run before that access while the graph says after), and a transaction's
//! immediate pieces must all be on one server (two transactions then cannot form a cycle of immediate
//! edges). A call that meets another's deferrable access is aborted as a conflict (`Aborted(Conflict)`: it
//! may pass when retried), one whose immediate pieces span servers is refused (`Rejected`); either way its
//! dispatched pieces are discarded; an
//! immediate piece that already wrote elsewhere in the same transaction keeps its writes, which is why the
//! registered procedures keep their immediate pieces on one server and fail, if at all, before writing.
//! A procedure error in an immediate piece aborts the transaction the same way, with its cause
//! (`procedure::PieceError`: `user`, or `conflict` when what it read moved since an earlier wave).
//! A deferrable piece cannot abort: the order is decided; Rococo has no aborts after the start phase.
//!
//! # Read-only transactions
//!
//! - **Rococo** (`rococo`): a round of reads, one per server, each waiting until the transactions that
//!   had written, or were to write, its keys when it arrived have executed there; then the same round again;
//!   the transaction succeeds when two consecutive rounds read the same values, otherwise it goes on with
//!   another round (SNOW §5.4). Blocking, strictly serializable, at least two rounds. After
//!   [`MAX_ROT_ROUNDS`] rounds it gives up with `Aborted(Conflict)` (the harness retries).
//! - **Rococo-SNOW** (`rococo-snow`): one round, one version per key, blocking. The paper sketches the
//!   algorithm (it omits the pseudocode): a read piece blocks until the conflicting writes at its server
//!   have executed, and the knowledge that a read did *not* see a write travels with Rococo's dependency
//!   closure, so no other piece of that read sees the write or anything after it. The part left unwritten is
//!   how that knowledge composes, and the plain version of it (each write carrying the set of readers that
//!   precede it, inherited by its descendants) is not enough for strict serializability: two read-only
//!   transactions can each precede one write and see another, a long fork made of four transactions that
//!   no server sees whole (our crash seeds found one). So the readers check here carries *timestamps*
//!   through the closure:
//!   - a read-only transaction R reads at `t_R`, its start time (client clock). Its read registers at the
//!     server (`t_R`, per key) when it arrives, waits until the transactions writing its keys at arrival
//!     have executed there, and returns each key's newest version with a timestamp at most `t_R` — once the
//!     server's clock has passed that version's timestamp by the clock-skew bound ε (`max_clock_skew_us`),
//!     waiting if needed;
//!   - a write transaction T gets a timestamp when it executes: above its coordinator's start time plus ε,
//!     above `t_R` for every read registered on a key it writes when it was dispatched there (the readers
//!     check: R read before T reached that key, so T comes after R), above every parent's timestamp, and
//!     above the timestamps of the transactions done at its servers on its keys (parents the graph no longer
//!     names); inside a strongly connected component the members take consecutive timestamps in the
//!     component's order, and a child takes a timestamp above the largest of its parent's whole component
//!     (the component order may reverse the dispatch order the edges recorded, so the parent's own
//!     timestamp is not enough). Every input is part of the committed graph, so every server gives T the same
//!     timestamp, and the timestamps follow the execution order on every key;
//!   - strict serializability: transactions are serialized in timestamp order, a read-only one at `t_R`
//!     after the writes of equal timestamp. A read sees exactly the writes with timestamps at most `t_R`: those
//!     executed at its servers before it answered (it waited for the ones pending at its arrival), while every
//!     write dispatched on its keys after its arrival was pushed above `t_R`. Real time, with clocks that
//!     differ by at most ε: a write's answer waits until its coordinator's clock passes its timestamp plus ε
//!     (Spanner's commit wait), so a read that begins after the answer has `t_R` at or above the timestamp; a
//!     read returns a version only once its server's clock passed the version's timestamp plus ε, so a read
//!     that begins after it ended has a later `t_R`; and a write's timestamp is above its start plus ε, so a
//!     write that begins after a read ended comes after it. The shifting of cost from reads to writes is the
//!     paper's own insight; the commit wait, and the short wait of a read on a version younger than ε, are
//!     this implementation's price for one-round reads that compose.
//!
//!   A server keeps the registrations as one watermark per key, the latest `t_R` read there, and never
//!   drops it: a writer may reach a server long after a read there ended (a delayed or partitioned
//!   dispatch) and must still come after it. (A first version kept a record per reader and dropped it when
//!   the read completed; crash seed 58 found the write that arrived 600 ms late, took a timestamp below a
//!   finished read's and made a long fork.) Versions older than [`READERS_HORIZON_NS`] are collected, so a
//!   read-only transaction whose answers come later than half that after its start is discarded by the
//!   client and run again.
//!
//! Read-only stored procedures (TPC-C's Order-Status and Stock-Level) run at the client on the protocol's
//! read-only algorithm, wave by wave: `rococo-snow` one round per wave; `rococo` repeats the whole
//! procedure until two consecutive executions read the same values.
//!
//! # Placement, coordinator and failures
//!
//! One copy per key at datacenter 0, as in 2PL (Rococo is a single-datacenter system); the other
//! datacenters' servers refuse requests. The coordinator is the server of the call's first key (Rococo runs
//! its coordinators in client processes; a server coordinator survives a client that vanishes mid-call,
//! which would otherwise leave its dependents waiting for ever, and a durable server recovers it by log
//! replay). Links between servers are reliable and FIFO (a durable host's sequenced links); Rococo, like its
//! paper, does not tolerate the loss of a server without durability. Vertices executed here are remembered
//! for [`DONE_MEMORY_NS`] to answer inquiries; an inquiry about a transaction a server no longer knows is
//! answered as executed long ago.
//!
//! # Metrics
//!
//! `rounds`: a call 1 (client → coordinator); a ROT its rounds; `blocked_ns`: the longest time a ROT's read
//! waited at a server; `versions_returned`: values returned.
//!
//! Session tokens: none (the default): strict serializability needs nothing from a session's earlier
//! transactions.

use serde::{Deserialize, Serialize};
use snowline_core::procedure::{self, Piece};
use snowline_core::{
    AbortCause, Addr, Check, ClientId, ClientNode, Ctx, DcId, InvalidInput, InvalidKind, Key, LinkAssumptions, Message,
    Offers, OpError, OpId, OpMetrics, PartitionId, Protocol, ProtocolConfig, ReadResult, Reply, ReplyNote, Request,
    ServerId, ServerNode, Topology, Value, Version,
};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::marker::PhantomData;

/// The datacenter whose servers hold the single copy of every key.
pub const HOME_DC: DcId = 0;
/// How long superseded versions are kept (Rococo-SNOW reads at its start), and so how late a ROT's answers
/// may come.
pub const READERS_HORIZON_NS: u64 = 2_000_000_000;
/// How long an executed or aborted transaction's vertex is remembered.
pub const DONE_MEMORY_NS: u64 = 60_000_000_000;
/// Rococo's read-only transactions give up after this many rounds.
pub const MAX_ROT_ROUNDS: u32 = 64;
/// The timestamp of a version written by an immediate piece until its transaction executes.
const PENDING_TS: u64 = u64::MAX;
/// How often a server forgets what its horizons allow.
const SWEEP_EVERY_NS: u64 = 1_000_000_000;
/// Bounds on what a message may carry (untrusted input).
const MAX_GRAPH: usize = 100_000;
const MAX_SET: usize = 100_000;

/// The read-only transaction algorithm of a Rococo flavour.
pub trait Flavor: Send + Sync + 'static {
    const NAME: &'static str;
    /// Rococo-SNOW's one-round reads with the readers check.
    const SNOW: bool;
}

/// Rococo with its multi-round read-only transactions.
pub struct Rococo;
/// Rococo with Rococo-SNOW's one-round read-only transactions.
pub struct RococoSnow;

impl Flavor for Rococo {
    const NAME: &'static str = "rococo";
    const SNOW: bool = false;
}

impl Flavor for RococoSnow {
    const NAME: &'static str = "rococo-snow";
    const SNOW: bool = true;
}

macro_rules! rococo_protocol {
    ($t:ty) => {
        impl Protocol for $t {
            const NAME: &'static str = <$t as Flavor>::NAME;
            type Msg = RccMsg;
            type Timer = RccTimer;
            type Server = RccServer<$t>;
            type Client = RccClient<$t>;
            const OFFERS: Offers = Offers {
                read_only: true,
                multi_key_rots: true,
                multi_shot_rots: false,
                blind_writes: true,
                write_transactions: true,
                interactive: false,
                stored_procedures: true,
            };

            fn links() -> LinkAssumptions {
                // A coordinator's Commit follows its Dispatch on the same link.
                LinkAssumptions { fifo: true }
            }

            fn server(id: ServerId, topology: Topology, config: &ProtocolConfig) -> RccServer<$t> {
                RccServer::new(id, topology, config)
            }

            fn client(id: ClientId, _dc: DcId, topology: Topology, config: &ProtocolConfig) -> RccClient<$t> {
                RccClient::new(id, topology, config.clone())
            }
        }
    };
}

rococo_protocol!(Rococo);
rococo_protocol!(RococoSnow);

/// A transaction (or a read-only transaction): its client and the client's sequence number.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct TxnId {
    pub client: ClientId,
    pub seq: u64,
}

/// What one server (or the merge of several) knows of a transaction in the dependency graph.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Vertex {
    pub id: Option<TxnId>,
    /// Its coordinator had every piece dispatched: `parents`, `servers` and `floor` are final.
    pub committing: bool,
    pub aborted: bool,
    /// Partitions it has pieces on (as far as known).
    pub servers: BTreeSet<PartitionId>,
    /// Its parents, each with whether the edge is immediate (order already fixed).
    pub parents: BTreeMap<TxnId, bool>,
    /// Its coordinator's clock when the call arrived.
    pub start_ns: u64,
    /// A lower bound on its timestamp from what its servers saw at dispatch: registered readers of keys it
    /// writes (Rococo-SNOW) and the timestamps of transactions done there on its keys.
    pub floor: u64,
    /// Its timestamp, from a server where it is done: a server that lacks its ancestors (done at the
    /// sender, so not sent) takes it from here instead of computing it from less.
    pub ts: Option<u64>,
    /// With `ts`: the largest timestamp of its component. Its children come after the whole component,
    /// whose order may differ from the order of their dispatch.
    pub ts_end: Option<u64>,
}

impl Vertex {
    fn new(id: TxnId) -> Self {
        Vertex { id: Some(id), ..Default::default() }
    }

    /// Merge what another node knows. A committing vertex's sets are final, so they replace partial ones.
    fn merge(&mut self, other: &Vertex) {
        if other.committing && !self.committing {
            self.parents = other.parents.clone();
            self.servers = other.servers.clone();
            self.start_ns = other.start_ns;
            self.floor = other.floor;
            self.committing = true;
        } else if !self.committing {
            for (p, imm) in &other.parents {
                *self.parents.entry(*p).or_default() |= imm;
            }
            self.servers.extend(other.servers.iter().copied());
            self.start_ns = self.start_ns.max(other.start_ns);
            self.floor = self.floor.max(other.floor);
        }
        self.aborted |= other.aborted;
        if self.ts.is_none() {
            self.ts = other.ts;
            self.ts_end = other.ts_end;
        }
    }
}

/// One dispatched piece: its index in the call's plan, its keys and what is known of earlier pieces.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DispatchedPiece {
    pub index: usize,
    pub reads: Vec<Key>,
    pub writes: Vec<Key>,
    pub immediate: bool,
    pub known: Vec<Option<Vec<Value>>>,
}

/// A server's answer to a dispatch.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DispatchOk {
    /// Immediate pieces' outputs.
    pub outputs: Vec<(usize, Vec<Value>)>,
    pub reads: Vec<ReadResult>,
    pub writes: Vec<(Key, Value)>,
    /// The transaction's vertex here and its unexecuted ancestors known here.
    pub graph: Vec<Vertex>,
}

/// What a server's execution of a transaction's deferred pieces produced.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Execution {
    pub reads: Vec<ReadResult>,
    pub writes: Vec<(Key, Value)>,
    /// A deferred piece failed (outside Rococo's contract: the order was decided): its message.
    pub failed: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum RccMsg {
    /// Client → coordinator: run the stored procedure.
    Submit { txn: TxnId, procedure: String, args: Vec<Value> },
    /// Coordinator → client: the outcome.
    Outcome { txn: TxnId, result: Result<Reply, OpError> },
    /// Coordinator → server: pieces of `txn` (start phase).
    Dispatch { txn: TxnId, procedure: String, args: Vec<Value>, pieces: Vec<DispatchedPiece>, start_ns: u64 },
    /// Server → coordinator.
    Dispatched { txn: TxnId, result: Result<DispatchOk, OpError> },
    /// Coordinator → server: every piece is dispatched; the merged graph.
    Commit { txn: TxnId, graph: Vec<Vertex> },
    /// Coordinator → server: drop the transaction (an immediate piece failed).
    Abort { txn: TxnId },
    /// Server → coordinator: the transaction's deferred pieces ran here.
    Executed { txn: TxnId, execution: Execution, ts: u64 },
    /// Server → server: what do you know of `txn` once it is committing?
    Inquire { txn: TxnId },
    /// Server → server: `txn`'s committed vertex and ancestors (empty: forgotten, executed long ago).
    Inquired { txn: TxnId, graph: Vec<Vertex> },
    /// Client → server: read `keys` for read-only transaction `rot` (`snow`: Rococo-SNOW's readers check).
    RotRead { rot: TxnId, round: u32, keys: Vec<Key>, snow: bool, started_ns: u64 },
    /// Server → client.
    RotReply { rot: TxnId, round: u32, reads: Vec<ReadResult>, blocked_ns: u64 },
}

impl Message for RccMsg {
    fn kind(&self) -> &'static str {
        match self {
            RccMsg::Submit { .. } => "submit",
            RccMsg::Outcome { .. } => "outcome",
            RccMsg::Dispatch { .. } => "dispatch",
            RccMsg::Dispatched { .. } => "dispatched",
            RccMsg::Commit { .. } => "commit",
            RccMsg::Abort { .. } => "abort",
            RccMsg::Executed { .. } => "executed",
            RccMsg::Inquire { .. } => "inquire",
            RccMsg::Inquired { .. } => "inquired",
            RccMsg::RotRead { .. } => "rot-read",
            RccMsg::RotReply { .. } => "rot-reply",
        }
    }

    fn is_client_write(&self) -> bool {
        matches!(self, RccMsg::Submit { .. })
    }

    fn reply_note(&self) -> Option<ReplyNote> {
        match self {
            RccMsg::Outcome { result, .. } => Some(ReplyNote::of(result, 0)),
            RccMsg::RotReply { blocked_ns, .. } => Some(ReplyNote { blocked_ns: *blocked_ns, ..Default::default() }),
            _ => None,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum RccTimer {
    /// Forget what the horizons allow.
    Sweep,
    /// Rococo-SNOW: the commit wait of a transaction is over; answer its client.
    Reply(TxnId),
    /// Rococo-SNOW: a parked read may now return a version that was too fresh.
    Serve,
}

fn home(partition: PartitionId) -> ServerId {
    ServerId::new(HOME_DC, partition)
}

// ---------------------------------------------------------------------------------------------------------
// Server
// ---------------------------------------------------------------------------------------------------------

/// One version of a key.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct Stored {
    version: Version,
    value: Value,
    writer: TxnId,
}

/// A vertex as this server holds it.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct Node {
    v: Vertex,
    /// Executed here (or processed, for a transaction with no piece here), or aborted; when.
    done_ns: Option<u64>,
    /// Its timestamp, once done here: above its parents' and its floor, the same on every server.
    ts: u64,
    /// The largest timestamp of its component, once done here.
    ts_end: u64,
    /// An inquiry about it is in flight.
    asked: bool,
}

/// A transaction's pieces here.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct Local {
    coordinator: ServerId,
    procedure: String,
    args: Vec<Value>,
    deferred: Vec<DispatchedPiece>,
    /// Keys it accesses here, to clean up the dependency tracking when it is done.
    keys: BTreeSet<Key>,
    /// Keys its immediate pieces wrote here (their versions get its timestamp when it executes).
    immediate_writes: Vec<Key>,
}

/// A read-only transaction's read waiting at this server.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct ParkedRead {
    client: ClientId,
    rot: TxnId,
    round: u32,
    keys: Vec<Key>,
    snow: bool,
    /// Transactions writing its keys at arrival that have not executed here yet.
    waiting: BTreeSet<TxnId>,
    arrived_ns: u64,
    /// The timestamp Rococo-SNOW reads at: its transaction's start (client clock).
    started_ns: u64,
}

/// A call this server coordinates.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct Coordinated {
    client: ClientId,
    procedure: String,
    args: Vec<Value>,
    pieces: Vec<Piece>,
    known: Vec<Option<Vec<Value>>>,
    /// Partitions of the current wave that have not answered.
    waiting: BTreeSet<PartitionId>,
    wave_end: usize,
    servers: BTreeSet<PartitionId>,
    /// The partition of the immediate pieces (one at most).
    immediate_at: Option<PartitionId>,
    graph: BTreeMap<TxnId, Vertex>,
    reads: Vec<ReadResult>,
    writes: Vec<(Key, Value)>,
    /// Its coordinator's clock when the call arrived.
    start_ns: u64,
    /// The timestamp its servers gave it.
    ts: u64,
    /// Committing: the partitions whose execution is awaited.
    executing: Option<BTreeSet<PartitionId>>,
    /// A deferrable piece failed at execution (outside Rococo's contract): its message.
    failed: Option<String>,
    /// The first dispatch error of the current wave, which the call ends with once the wave has answered.
    wave_error: Option<OpError>,
}

/// A partition server of Rococo: participant and coordinator.
#[derive(Serialize, Deserialize)]
#[serde(bound = "")]
pub struct RccServer<F: Flavor> {
    id: ServerId,
    topology: Topology,
    store: BTreeMap<Key, Vec<Stored>>,
    graph: BTreeMap<TxnId, Node>,
    /// The vertices of `graph` not done here (what the component search walks).
    undone: BTreeSet<TxnId>,
    local: BTreeMap<TxnId, Local>,
    /// Per key, its last unexecuted writer and the unexecuted readers since.
    last_write: BTreeMap<Key, TxnId>,
    reads_since: BTreeMap<Key, BTreeSet<TxnId>>,
    /// Per key, unexecuted transactions with a deferrable access to it (the offline-check test), and those
    /// writing it (what a read-only read waits for).
    deferred_access: BTreeMap<Key, BTreeSet<TxnId>>,
    /// Per key, unexecuted transactions whose immediate piece accessed it: an edge from one of them is
    /// fixed (that access already ran), whatever the child's piece.
    immediate_access: BTreeMap<Key, BTreeSet<TxnId>>,
    writers: BTreeMap<Key, BTreeSet<TxnId>>,
    /// Rococo-SNOW: per key, the latest start of a read-only transaction that read it here (the readers
    /// check as a watermark: a writer dispatched on the key later takes a timestamp above it). Never
    /// dropped: a writer can arrive here long after the read ended, and must still come after it.
    read_ts: BTreeMap<Key, u64>,
    /// Per key, the largest timestamp of the transactions done here that accessed it: a transaction
    /// dispatched on the key later comes after them (the graph no longer links it to them).
    carried: BTreeMap<Key, u64>,
    parked: Vec<ParkedRead>,
    /// Inquiries to answer once a transaction is committing here.
    inquirers: BTreeMap<TxnId, BTreeSet<ServerId>>,
    coordinated: BTreeMap<TxnId, Coordinated>,
    #[serde(skip)]
    loopback: VecDeque<(ServerId, RccMsg)>,
    /// What input checks need (`max_clock_ahead_ms`).
    config: ProtocolConfig,
    /// Rococo-SNOW: the bound on clock differences (`ProtocolConfig::max_clock_skew_us`).
    skew_ns: u64,
    #[serde(skip)]
    _flavor: PhantomData<F>,
}

type Cx<'a, F> = Ctx<'a, F>;

impl<F: Flavor> RccServer<F>
where
    F: Protocol<Msg = RccMsg, Timer = RccTimer>,
{
    pub fn new(id: ServerId, topology: Topology, config: &ProtocolConfig) -> Self {
        Self {
            id,
            topology,
            store: BTreeMap::new(),
            graph: BTreeMap::new(),
            undone: BTreeSet::new(),
            local: BTreeMap::new(),
            last_write: BTreeMap::new(),
            reads_since: BTreeMap::new(),
            deferred_access: BTreeMap::new(),
            immediate_access: BTreeMap::new(),
            writers: BTreeMap::new(),
            read_ts: BTreeMap::new(),
            carried: BTreeMap::new(),
            parked: Vec::new(),
            inquirers: BTreeMap::new(),
            coordinated: BTreeMap::new(),
            loopback: VecDeque::new(),
            config: config.clone(),
            skew_ns: config.max_clock_skew_us.saturating_mul(1_000),
            _flavor: PhantomData,
        }
    }

    /// The newest value of `key` (for tests and inspection).
    pub fn value(&self, key: &str) -> Option<Value> {
        self.store.get(key).and_then(|v| v.last()).map(|s| s.value.clone())
    }

    /// Transactions in the dependency graph here that are not done.
    pub fn undone(&self) -> usize {
        self.undone.len()
    }

    /// Read-only reads waiting here.
    pub fn parked_reads(&self) -> usize {
        self.parked.len()
    }

    fn me(&self) -> PartitionId {
        self.id.partition
    }

    fn send(&mut self, cx: &mut Cx<'_, F>, to: ServerId, msg: RccMsg) {
        if to == self.id {
            self.loopback.push_back((to, msg));
        } else {
            cx.send(Addr::Server(to), msg);
        }
    }

    fn is_done(&self, t: &TxnId) -> bool {
        self.graph.get(t).is_none_or(|n| n.done_ns.is_some())
    }

    // ----- start phase (participant) -----

    #[allow(clippy::too_many_arguments)]
    fn on_dispatch(
        &mut self,
        cx: &mut Cx<'_, F>,
        coordinator: ServerId,
        txn: TxnId,
        procedure: String,
        args: Vec<Value>,
        pieces: Vec<DispatchedPiece>,
        start_ns: u64,
    ) {
        let result = self.dispatch(cx, coordinator, txn, procedure, args, pieces, start_ns);
        self.send(cx, coordinator, RccMsg::Dispatched { txn, result });
    }

    #[allow(clippy::too_many_arguments)]
    fn dispatch(
        &mut self,
        cx: &mut Cx<'_, F>,
        coordinator: ServerId,
        txn: TxnId,
        name: String,
        args: Vec<Value>,
        pieces: Vec<DispatchedPiece>,
        start_ns: u64,
    ) -> Result<DispatchOk, OpError> {
        if self.graph.get(&txn).is_some_and(|n| n.done_ns.is_some() || n.v.committing) {
            return Err(OpError::Rejected(format!("rococo: {txn:?} is past its start phase here")));
        }
        let procedure = procedure::lookup(&name).map_err(OpError::Rejected)?;
        // The offline check: an immediate access must not overtake another transaction's deferred one.
        for p in pieces.iter().filter(|p| p.immediate) {
            for k in p.reads.iter().chain(&p.writes) {
                if self.deferred_access.get(k).is_some_and(|s| s.iter().any(|t| *t != txn)) {
                    // Not bad input: the same call may pass once that piece has run, so it is a conflict
                    // (the application may retry), and nothing of it ran.
                    return Err(OpError::aborted(
                        AbortCause::Conflict,
                        format!(
                            "rococo: {name} runs key {k} immediately while another transaction's deferrable piece \
                             waits on it (Rococo's offline check)"
                        ),
                    ));
                }
            }
        }
        let snow = F::SNOW;
        let mut node = self.graph.remove(&txn).unwrap_or_else(|| Node {
            v: Vertex::new(txn),
            done_ns: None,
            ts: 0,
            ts_end: 0,
            asked: false,
        });
        node.v.servers.insert(self.me());
        node.v.start_ns = node.v.start_ns.max(start_ns);
        let mut local = self.local.remove(&txn).unwrap_or_else(|| Local {
            coordinator,
            procedure: name.clone(),
            args: args.clone(),
            deferred: Vec::new(),
            keys: BTreeSet::new(),
            immediate_writes: Vec::new(),
        });
        let mut ok = DispatchOk { outputs: Vec::new(), reads: Vec::new(), writes: Vec::new(), graph: Vec::new() };
        let mut failure = None;
        for piece in pieces {
            // Dependencies. An edge is fixed when the parent's access to the key was immediate: it already
            // ran, so the child follows it whatever the component order (an immediate child of a deferred
            // access was refused above). Every undone transaction whose immediate access to a key conflicts
            // with this one is such a parent, not only the last writer: a deferred writer between the two may
            // be reordered after this transaction, which would then come before the immediate write it has
            // already seen. The last-writer and readers edges below are therefore fixed exactly when this
            // loop already made them so; they add the unfixed ones.
            let earlier_immediate = |s: &Self, k: &Key, writes: bool| -> Vec<TxnId> {
                s.immediate_access
                    .get(k)
                    .into_iter()
                    .flatten()
                    .filter(|t| **t != txn && !s.is_done(t))
                    .filter(|t| writes || s.writers.get(k).is_some_and(|w| w.contains(*t)))
                    .copied()
                    .collect()
            };
            for (k, writes) in piece.reads.iter().map(|k| (k, false)).chain(piece.writes.iter().map(|k| (k, true))) {
                for t in earlier_immediate(self, k, writes) {
                    node.v.parents.insert(t, true);
                }
            }
            for k in &piece.reads {
                if let Some(w) = self.last_write.get(k).copied().filter(|w| *w != txn && !self.is_done(w)) {
                    node.v.parents.entry(w).or_insert(false);
                }
            }
            for k in &piece.writes {
                let mut parents: Vec<TxnId> = self.last_write.get(k).copied().into_iter().collect();
                parents.extend(self.reads_since.get(k).into_iter().flatten().copied());
                for p in parents {
                    if p != txn && !self.is_done(&p) {
                        node.v.parents.entry(p).or_insert(false);
                    }
                }
                // Rococo-SNOW's readers check: a writer of a key a read-only transaction registered on comes
                // after it.
                if let Some(latest) = self.read_ts.get(k).filter(|_| snow) {
                    node.v.floor = node.v.floor.max(latest + 1);
                }
            }
            for k in piece.reads.iter().chain(&piece.writes) {
                if let Some(ts) = self.carried.get(k) {
                    node.v.floor = node.v.floor.max(ts + 1);
                }
            }
            for k in &piece.reads {
                self.reads_since.entry(k.clone()).or_default().insert(txn);
            }
            for k in &piece.writes {
                self.last_write.insert(k.clone(), txn);
                self.reads_since.remove(k);
                self.writers.entry(k.clone()).or_default().insert(txn);
            }
            local.keys.extend(piece.reads.iter().chain(&piece.writes).cloned());
            if piece.immediate {
                for k in piece.reads.iter().chain(&piece.writes) {
                    self.immediate_access.entry(k.clone()).or_default().insert(txn);
                }
                if failure.is_some() {
                    continue;
                }
                let values: Vec<Option<Value>> = piece.reads.iter().map(|k| self.latest(k).map(|s| s.1)).collect();
                match procedure.run(piece.index, &args, &piece.known, &values) {
                    Ok(ran) if ran.writes.len() == piece.writes.len() => {
                        for (k, v) in piece.reads.iter().zip(&values) {
                            let version = self.latest(k).map_or(Version::INITIAL, |s| s.0);
                            ok.reads.push(ReadResult {
                                key: k.clone(),
                                value: v.clone(),
                                version,
                                versions_skipped: 0,
                            });
                        }
                        for (k, v) in piece.writes.iter().zip(ran.writes) {
                            // Its timestamp is known when it executes.
                            self.put(k, v.clone(), txn, PENDING_TS);
                            local.immediate_writes.push(k.clone());
                            ok.writes.push((k.clone(), v));
                        }
                        ok.outputs.push((piece.index, ran.output));
                    }
                    Ok(_) => {
                        let e = format!("{name} piece {} wrote other keys than it declared", piece.index);
                        failure = Some((AbortCause::User, e));
                    }
                    Err(e) => failure = Some((e.cause(), format!("{name}: {e}"))),
                }
            } else {
                for k in piece.reads.iter().chain(&piece.writes) {
                    self.deferred_access.entry(k.clone()).or_default().insert(txn);
                }
                local.deferred.push(piece);
            }
        }
        self.graph.insert(txn, node);
        self.undone.insert(txn);
        self.local.insert(txn, local);
        if let Some((cause, e)) = failure {
            // The coordinator aborts the transaction everywhere; this server already knows.
            self.abort_local(cx, txn);
            return Err(OpError::aborted(cause, e));
        }
        ok.graph = self.ancestry(txn);
        Ok(ok)
    }

    /// The newest version of `key` and its value.
    fn latest(&self, key: &str) -> Option<(Version, Value)> {
        self.store.get(key).and_then(|v| v.last()).map(|s| (s.version, s.value.clone()))
    }

    fn put(&mut self, key: &Key, value: Value, writer: TxnId, ts: u64) {
        let version = Version { time: ts, dc: HOME_DC };
        self.store.entry(key.clone()).or_default().push(Stored { version, value, writer });
    }

    /// `txn`'s vertex and its ancestors known here, through vertices not done here.
    fn ancestry(&self, txn: TxnId) -> Vec<Vertex> {
        let mut out = Vec::new();
        let mut seen = BTreeSet::from([txn]);
        let mut queue = VecDeque::from([txn]);
        while let Some(t) = queue.pop_front() {
            let Some(n) = self.graph.get(&t) else { continue };
            let mut v = n.v.clone();
            if n.done_ns.is_some() && !v.aborted {
                v.ts = Some(n.ts);
                v.ts_end = Some(n.ts_end);
            }
            out.push(v);
            if n.done_ns.is_some() && t != txn {
                continue;
            }
            for p in n.v.parents.keys() {
                if seen.insert(*p) {
                    queue.push_back(*p);
                }
            }
        }
        out
    }

    fn merge_graph(&mut self, graph: Vec<Vertex>) {
        for v in graph {
            let Some(id) = v.id else { continue };
            match self.graph.get_mut(&id) {
                Some(n) => n.v.merge(&v),
                None => {
                    self.graph.insert(id, Node { v, done_ns: None, ts: 0, ts_end: 0, asked: false });
                    self.undone.insert(id);
                }
            }
        }
    }

    // ----- commit phase (participant) -----

    fn on_commit(&mut self, cx: &mut Cx<'_, F>, graph: Vec<Vertex>) {
        self.merge_graph(graph);
        self.advance(cx);
    }

    fn abort_local(&mut self, cx: &mut Cx<'_, F>, txn: TxnId) {
        let now = cx.now_ns();
        if let Some(n) = self.graph.get_mut(&txn) {
            n.v.aborted = true;
            if n.done_ns.is_none() {
                n.done_ns = Some(now);
            }
            self.undone.remove(&txn);
        }
        self.forget_accesses(txn);
        self.answer_inquiries(cx, txn);
    }

    fn forget_accesses(&mut self, txn: TxnId) {
        let Some(local) = self.local.remove(&txn) else { return };
        for k in &local.keys {
            if self.last_write.get(k) == Some(&txn) {
                self.last_write.remove(k);
            }
            for map in [&mut self.reads_since, &mut self.deferred_access, &mut self.immediate_access, &mut self.writers]
            {
                if let Some(s) = map.get_mut(k) {
                    s.remove(&txn);
                    if s.is_empty() {
                        map.remove(k);
                    }
                }
            }
        }
    }

    /// Execute every component whose ancestors are all committing and done, in topological order; inquire
    /// about ancestors this server cannot learn of otherwise.
    fn advance(&mut self, cx: &mut Cx<'_, F>) {
        loop {
            let sccs = self.components();
            let mut progressed = false;
            for scc in sccs {
                if scc.iter().any(|t| self.is_done(t)) {
                    continue;
                }
                if !self.ready(cx, &scc) {
                    continue;
                }
                self.execute(cx, scc);
                progressed = true;
            }
            if !progressed {
                break;
            }
        }
        self.serve_parked(cx);
    }

    /// Whether a component may execute: every member committing (inquiring about those with no piece
    /// here) and every parent outside it done.
    fn ready(&mut self, cx: &mut Cx<'_, F>, scc: &[TxnId]) -> bool {
        let me = self.me();
        let mut ready = true;
        let mut ask = Vec::new();
        for t in scc {
            let Some(n) = self.graph.get(t) else { return false };
            if !n.v.committing {
                ready = false;
                if let Some(p) = n.v.servers.iter().next().filter(|_| !n.v.servers.contains(&me) && !n.asked) {
                    ask.push((*t, *p));
                }
                continue;
            }
            if n.v.parents.keys().any(|p| !scc.contains(p) && !self.is_done(p)) {
                ready = false;
            }
        }
        for (t, p) in ask {
            if let Some(n) = self.graph.get_mut(&t) {
                n.asked = true;
            }
            self.send(cx, home(p), RccMsg::Inquire { txn: t });
        }
        ready
    }

    /// The strongly connected components of the undone part of the graph, parents before children
    /// (Tarjan, iterative; edges child → parent, so a component comes out after every component it
    /// depends on).
    fn components(&self) -> Vec<Vec<TxnId>> {
        let nodes: Vec<TxnId> = self.undone.iter().copied().filter(|t| self.graph.contains_key(t)).collect();
        let index_of: BTreeMap<TxnId, usize> = nodes.iter().enumerate().map(|(i, t)| (*t, i)).collect();
        let edges: Vec<Vec<usize>> = nodes
            .iter()
            .map(|t| self.graph[t].v.parents.keys().filter_map(|p| index_of.get(p).copied()).collect())
            .collect();
        let n = nodes.len();
        let (mut index, mut low, mut on_stack) = (vec![usize::MAX; n], vec![0; n], vec![false; n]);
        let (mut stack, mut out, mut next) = (Vec::new(), Vec::new(), 0);
        for root in 0..n {
            if index[root] != usize::MAX {
                continue;
            }
            let mut work = vec![(root, 0usize)];
            while let Some((v, i)) = work.pop() {
                if i == 0 {
                    index[v] = next;
                    low[v] = next;
                    next += 1;
                    stack.push(v);
                    on_stack[v] = true;
                }
                if let Some(&w) = edges[v].get(i) {
                    work.push((v, i + 1));
                    if index[w] == usize::MAX {
                        work.push((w, 0));
                    } else if on_stack[w] {
                        low[v] = low[v].min(index[w]);
                    }
                    continue;
                }
                if let Some(&(parent, _)) = work.last() {
                    low[parent] = low[parent].min(low[v]);
                }
                if low[v] == index[v] {
                    let mut scc = Vec::new();
                    while let Some(w) = stack.pop() {
                        on_stack[w] = false;
                        scc.push(nodes[w]);
                        if w == v {
                            break;
                        }
                    }
                    out.push(scc);
                }
            }
        }
        out
    }

    /// The deterministic order inside a component: a topological order of the fixed edges, ties by id.
    fn order(&self, scc: &[TxnId]) -> Vec<TxnId> {
        let mut remaining: BTreeSet<TxnId> = scc.iter().copied().collect();
        let mut order = Vec::with_capacity(scc.len());
        while !remaining.is_empty() {
            let next = remaining
                .iter()
                .copied()
                .find(|t| self.graph[t].v.parents.iter().all(|(p, imm)| !*imm || !remaining.contains(p) || p == t))
                // Fixed edges follow the real order of immediate accesses at one server, so they form a cycle
                // only if transactions each ran an immediate piece on a key the next accesses deferred, around
                // a loop, or if another's immediate access came between two immediate waves of one
                // transaction that both conflict with it. Procedures that can do that fail Rococo's offline
                // check, and none registered can: TPC-C's only table accessed immediately by one procedure and
                // deferred by another is New-Order's inserted rows, which Delivery reads immediately, and New-
                // Order's one immediate access (`D_NEXT_O_ID`, a key Payment's `D_YTD` is not on) conflicts
                // only with other New-Orders'; Delivery accesses the delivery pointer, the new-order and the
                // order immediately only, and fails, before writing, when the pointer moved between its waves
                // (`tpcc::Delivery`; the table graph is checked by `crates/harness/tests/tpcc.rs`). Should a
                // cycle appear anyway, the id order keeps servers agreeing.
                .unwrap_or_else(|| *remaining.iter().next().expect("non-empty"));
            remaining.remove(&next);
            order.push(next);
        }
        order
    }

    fn execute(&mut self, cx: &mut Cx<'_, F>, scc: Vec<TxnId>) {
        let now = cx.now_ns();
        let order = self.order(&scc);
        // The component's timestamps: above every member's start and floor and every parent's, then one
        // apart in the order. Every input is part of the committed graph, so every server computes the same.
        let mut base = 1;
        for t in &scc {
            let n = &self.graph[t];
            base = base.max(n.v.start_ns.saturating_add(self.skew_ns)).max(n.v.floor);
            for p in n.v.parents.keys().filter(|p| !scc.contains(p)) {
                if let Some(pn) = self.graph.get(p) {
                    base = base.max(pn.ts_end.saturating_add(1));
                }
            }
        }
        // A member whose timestamp a server where it is done sent fixes the component's (that server knew
        // ancestors this one was not sent).
        if let Some(known) =
            order.iter().enumerate().find_map(|(i, t)| self.graph[t].v.ts.map(|ts| ts.saturating_sub(i as u64)))
        {
            base = known;
        }
        let shipped_end = scc.iter().filter_map(|t| self.graph[t].v.ts_end).max().unwrap_or(0);
        let end = base.saturating_add(order.len() as u64 - 1).max(shipped_end);
        for (i, t) in order.into_iter().enumerate() {
            let ts = base.saturating_add(i as u64);
            self.undone.remove(&t);
            if let Some(n) = self.graph.get_mut(&t) {
                n.done_ns = Some(now);
                n.ts = ts;
                n.ts_end = end;
            }
            let aborted = self.graph.get(&t).is_some_and(|n| n.v.aborted);
            if let Some(local) = self.local.get(&t).cloned().filter(|_| !aborted) {
                let execution = self.run_deferred(t, &local, ts);
                self.send(cx, local.coordinator, RccMsg::Executed { txn: t, execution, ts });
            }
            // Later transactions on its keys come after it.
            if let Some(local) = self.local.get(&t) {
                for k in &local.keys {
                    let c = self.carried.entry(k.clone()).or_default();
                    *c = (*c).max(ts);
                }
            }
            self.forget_accesses(t);
            self.answer_inquiries(cx, t);
        }
    }

    fn run_deferred(&mut self, txn: TxnId, local: &Local, ts: u64) -> Execution {
        let mut execution = Execution::default();
        let Ok(procedure) = procedure::lookup(&local.procedure) else {
            execution.failed = Some(format!("no procedure {}", local.procedure));
            return execution;
        };
        // Its immediate writes get their timestamp now.
        for k in &local.immediate_writes {
            if let Some(s) = self.store.get_mut(k).and_then(|v| v.iter_mut().find(|s| s.writer == txn)) {
                s.version.time = ts;
            }
        }
        for piece in &local.deferred {
            let values: Vec<Option<Value>> = piece.reads.iter().map(|k| self.latest(k).map(|s| s.1)).collect();
            match procedure.run(piece.index, &local.args, &piece.known, &values) {
                Ok(ran) if ran.writes.len() == piece.writes.len() => {
                    for (k, v) in piece.reads.iter().zip(values) {
                        let version = self.latest(k).map_or(Version::INITIAL, |s| s.0);
                        execution.reads.push(ReadResult { key: k.clone(), value: v, version, versions_skipped: 0 });
                    }
                    for (k, v) in piece.writes.iter().zip(ran.writes) {
                        self.put(k, v.clone(), txn, ts);
                        execution.writes.push((k.clone(), v));
                    }
                }
                Ok(_) => {
                    execution.failed = Some(format!("piece {} wrote other keys than it declared", piece.index));
                }
                Err(e) => execution.failed = Some(format!("piece {}: {e}", piece.index)),
            }
        }
        execution
    }

    // ----- inquiries -----

    fn on_inquire(&mut self, cx: &mut Cx<'_, F>, from: ServerId, txn: TxnId) {
        match self.graph.get(&txn) {
            None => self.send(cx, from, RccMsg::Inquired { txn, graph: Vec::new() }),
            Some(n) if n.v.committing || n.v.aborted => {
                let graph = self.ancestry(txn);
                self.send(cx, from, RccMsg::Inquired { txn, graph });
            }
            Some(_) => {
                self.inquirers.entry(txn).or_default().insert(from);
            }
        }
    }

    fn answer_inquiries(&mut self, cx: &mut Cx<'_, F>, txn: TxnId) {
        if let Some(who) = self.inquirers.remove(&txn) {
            let graph = self.ancestry(txn);
            for s in who {
                self.send(cx, s, RccMsg::Inquired { txn, graph: graph.clone() });
            }
        }
    }

    fn on_inquired(&mut self, cx: &mut Cx<'_, F>, txn: TxnId, graph: Vec<Vertex>) {
        if graph.is_empty() {
            // Forgotten there: executed long ago.
            let now = cx.now_ns();
            if let Some(n) = self.graph.get_mut(&txn) {
                n.v.committing = true;
                n.done_ns.get_or_insert(now);
            }
            self.undone.remove(&txn);
        } else {
            self.merge_graph(graph);
        }
        if let Some(n) = self.graph.get_mut(&txn) {
            n.asked = false;
        }
        self.advance(cx);
    }

    // ----- read-only transactions -----

    #[allow(clippy::too_many_arguments)]
    fn on_rot_read(
        &mut self,
        cx: &mut Cx<'_, F>,
        client: ClientId,
        rot: TxnId,
        round: u32,
        keys: Vec<Key>,
        snow: bool,
        started_ns: u64,
    ) {
        let now = cx.now_ns();
        let snow = snow && F::SNOW;
        if snow {
            for k in &keys {
                let t = self.read_ts.entry(k.clone()).or_default();
                *t = (*t).max(started_ns);
            }
        }
        let waiting: BTreeSet<TxnId> =
            keys.iter().flat_map(|k| self.writers.get(k).into_iter().flatten()).copied().collect();
        let parked = ParkedRead { client, rot, round, keys, snow, waiting, arrived_ns: now, started_ns };
        if parked.waiting.is_empty() {
            if let Err(p) = self.answer_read(cx, parked) {
                self.parked.push(p);
            }
        } else {
            self.parked.push(parked);
        }
    }

    fn serve_parked(&mut self, cx: &mut Cx<'_, F>) {
        if self.parked.is_empty() {
            return;
        }
        let parked = std::mem::take(&mut self.parked);
        for mut p in parked {
            p.waiting.retain(|t| !self.is_done(t));
            if p.waiting.is_empty() {
                if let Err(p) = self.answer_read(cx, p) {
                    self.parked.push(p);
                }
            } else {
                self.parked.push(p);
            }
        }
    }

    /// Answer `p`, or give it back when a version it must return is too fresh to be returned yet
    /// (Rococo-SNOW: a version is returned once every clock has passed its timestamp, so a read-only
    /// transaction that begins after this one ended reads at a timestamp at or above it).
    fn answer_read(&mut self, cx: &mut Cx<'_, F>, p: ParkedRead) -> Result<(), ParkedRead> {
        if p.snow {
            let now = cx.now_ns();
            let freshest = p
                .keys
                .iter()
                .filter_map(|k| self.store.get(k)?.iter().rev().find(|s| s.version.time <= p.started_ns))
                .map(|s| s.version.time)
                .max();
            if let Some(ts) = freshest.filter(|ts| ts.saturating_add(self.skew_ns) > now) {
                cx.set_timer(ts.saturating_add(self.skew_ns) - now, RccTimer::Serve);
                return Err(p);
            }
        }
        let mut reads = Vec::with_capacity(p.keys.len());
        for k in &p.keys {
            let versions = self.store.get(k).map(Vec::as_slice).unwrap_or_default();
            // Rococo-SNOW: the read is at its start timestamp; later versions belong to transactions ordered
            // after it.
            let skip =
                if p.snow { versions.iter().rev().take_while(|s| s.version.time > p.started_ns).count() } else { 0 };
            let chosen = versions.len() - skip;
            let (value, version) = match chosen.checked_sub(1).map(|i| &versions[i]) {
                Some(s) => (Some(s.value.clone()), s.version),
                None => (None, Version::INITIAL),
            };
            reads.push(ReadResult { key: k.clone(), value, version, versions_skipped: skip as u32 });
        }
        let blocked_ns = cx.now_ns().saturating_sub(p.arrived_ns);
        cx.send(Addr::Client(p.client), RccMsg::RotReply { rot: p.rot, round: p.round, reads, blocked_ns });
        Ok(())
    }

    // ----- coordinator -----

    fn on_submit(&mut self, cx: &mut Cx<'_, F>, client: ClientId, txn: TxnId, name: String, args: Vec<Value>) {
        if self.coordinated.contains_key(&txn) {
            return;
        }
        let call = match procedure::Call::start(&name, args) {
            Ok(call) => call,
            Err(e) => {
                cx.send(Addr::Client(client), RccMsg::Outcome { txn, result: Err(OpError::Rejected(e)) });
                return;
            }
        };
        let c = Coordinated {
            client,
            procedure: name,
            args: call.args,
            pieces: Vec::new(),
            known: Vec::new(),
            waiting: BTreeSet::new(),
            wave_end: 0,
            servers: BTreeSet::new(),
            immediate_at: None,
            graph: BTreeMap::new(),
            reads: Vec::new(),
            writes: Vec::new(),
            start_ns: cx.now_ns(),
            ts: 0,
            executing: None,
            failed: None,
            wave_error: None,
        };
        self.coordinated.insert(txn, c);
        self.dispatch_wave(cx, txn, call.pieces);
    }

    /// Dispatch `pieces` (the next wave) of `txn`.
    fn dispatch_wave(&mut self, cx: &mut Cx<'_, F>, txn: TxnId, pieces: Vec<Piece>) {
        let Some(c) = self.coordinated.get_mut(&txn) else { return };
        let first = c.pieces.len();
        c.known.resize(first + pieces.len(), None);
        let mut per: BTreeMap<PartitionId, Vec<DispatchedPiece>> = BTreeMap::new();
        let mut refusal = None;
        for (i, piece) in pieces.iter().enumerate() {
            let mut parts = piece.reads.iter().chain(&piece.writes).map(|k| self.topology.partition_of(k));
            let Some(p) = parts.next() else { continue };
            if parts.any(|q| q != p) {
                refusal = Some(format!("{}: piece {} spans several servers", c.procedure, first + i));
                break;
            }
            if piece.immediate {
                if c.immediate_at.is_some_and(|q| q != p) {
                    refusal =
                        Some(format!("{}: immediate pieces on several servers (Rococo's offline check)", c.procedure));
                    break;
                }
                c.immediate_at = Some(p);
            }
            per.entry(p).or_default().push(DispatchedPiece {
                index: first + i,
                reads: piece.reads.clone(),
                writes: piece.writes.clone(),
                immediate: piece.immediate,
                known: c.known.clone(),
            });
        }
        c.pieces.extend(pieces);
        c.wave_end = c.pieces.len();
        if let Some(e) = refusal {
            self.finish_aborted(cx, txn, OpError::Rejected(e));
            return;
        }
        let (name, args, start_ns) = (c.procedure.clone(), c.args.clone(), c.start_ns);
        c.waiting = per.keys().copied().collect();
        c.servers.extend(per.keys().copied());
        if per.is_empty() {
            self.commit_call(cx, txn);
            return;
        }
        for (p, pieces) in per {
            let dispatch = RccMsg::Dispatch { txn, procedure: name.clone(), args: args.clone(), pieces, start_ns };
            self.send(cx, home(p), dispatch);
        }
    }

    fn on_dispatched(
        &mut self,
        cx: &mut Cx<'_, F>,
        from: PartitionId,
        txn: TxnId,
        result: Result<DispatchOk, OpError>,
    ) {
        let Some(c) = self.coordinated.get_mut(&txn) else { return };
        if c.executing.is_some() || !c.waiting.remove(&from) {
            return;
        }
        match result {
            Err(e) => {
                // The first error is what the call ends with, once every server of the wave has answered.
                let first = c.wave_error.get_or_insert(e);
                if c.waiting.is_empty() {
                    let e = first.clone();
                    self.finish_aborted(cx, txn, e);
                }
            }
            Ok(ok) => {
                for (i, out) in ok.outputs {
                    if let Some(k) = c.known.get_mut(i) {
                        *k = Some(out);
                    }
                }
                c.reads.extend(ok.reads);
                c.writes.extend(ok.writes);
                for v in ok.graph {
                    let Some(id) = v.id else { continue };
                    c.graph.entry(id).or_insert_with(|| Vertex::new(id)).merge(&v);
                }
                if !c.waiting.is_empty() {
                    return;
                }
                if let Some(e) = c.wave_error.clone() {
                    self.finish_aborted(cx, txn, e);
                    return;
                }
                // Plan the next wave from what the immediate pieces returned.
                let procedure = match procedure::lookup(&c.procedure) {
                    Ok(p) => p,
                    Err(e) => return self.finish_aborted(cx, txn, OpError::Rejected(e)),
                };
                match procedure.plan(&c.args, &c.known) {
                    Ok(planned) if planned.len() >= c.pieces.len() && planned[..c.pieces.len()] == c.pieces[..] => {
                        let next = planned[c.pieces.len()..].to_vec();
                        if next.is_empty() {
                            self.commit_call(cx, txn);
                        } else {
                            self.dispatch_wave(cx, txn, next);
                        }
                    }
                    Ok(_) => {
                        let e = format!("{}: a later plan changed pieces already planned", c.procedure);
                        self.finish_aborted(cx, txn, OpError::Rejected(e));
                    }
                    Err(e) => {
                        let e = format!("{}: {e}", c.procedure);
                        self.finish_aborted(cx, txn, OpError::aborted(AbortCause::User, e));
                    }
                }
            }
        }
    }

    fn commit_call(&mut self, cx: &mut Cx<'_, F>, txn: TxnId) {
        let Some(c) = self.coordinated.get_mut(&txn) else { return };
        let v = c.graph.entry(txn).or_insert_with(|| Vertex::new(txn));
        v.servers = c.servers.clone();
        v.committing = true;
        c.executing = Some(c.servers.clone());
        let graph: Vec<Vertex> = c.graph.values().cloned().collect();
        let servers: Vec<PartitionId> = c.servers.iter().copied().collect();
        c.graph.clear();
        if servers.is_empty() {
            self.finish(cx, txn);
            return;
        }
        for p in servers {
            self.send(cx, home(p), RccMsg::Commit { txn, graph: graph.clone() });
        }
    }

    fn on_executed(&mut self, cx: &mut Cx<'_, F>, from: PartitionId, txn: TxnId, execution: Execution, ts: u64) {
        let Some(c) = self.coordinated.get_mut(&txn) else { return };
        let Some(waiting) = c.executing.as_mut() else { return };
        if !waiting.remove(&from) {
            return;
        }
        c.reads.extend(execution.reads);
        c.writes.extend(execution.writes);
        c.ts = c.ts.max(ts);
        if let Some(e) = execution.failed {
            c.failed.get_or_insert(e);
        }
        if !waiting.is_empty() {
            return;
        }
        // Rococo-SNOW's commit wait: answer once no clock can be behind the timestamp, so a read-only
        // transaction that begins after the answer reads at a later timestamp and sees the writes.
        let wait_until = c.ts.saturating_add(self.skew_ns);
        if F::SNOW && cx.now_ns() < wait_until {
            cx.set_timer(wait_until - cx.now_ns(), RccTimer::Reply(txn));
        } else {
            self.finish(cx, txn);
        }
    }

    fn finish(&mut self, cx: &mut Cx<'_, F>, txn: TxnId) {
        let Some(c) = self.coordinated.remove(&txn) else { return };
        let result = match c.failed {
            // Outside the contract: a deferred piece failed after the order was decided.
            Some(e) => Err(OpError::Rejected(format!("{}: a deferrable piece failed after commit: {e}", c.procedure))),
            // The transaction's timestamp is every one of its versions': the checker orders writes by it.
            None => Ok(Reply {
                reads: c.reads,
                writes: c.writes,
                commit: Some(Version { time: c.ts, dc: HOME_DC }),
                metrics: OpMetrics { rounds: 1, ..Default::default() },
            }),
        };
        cx.send(Addr::Client(c.client), RccMsg::Outcome { txn, result });
    }

    fn finish_aborted(&mut self, cx: &mut Cx<'_, F>, txn: TxnId, error: OpError) {
        let Some(c) = self.coordinated.remove(&txn) else { return };
        for p in c.servers {
            self.send(cx, home(p), RccMsg::Abort { txn });
        }
        cx.send(Addr::Client(c.client), RccMsg::Outcome { txn, result: Err(error) });
    }

    fn on_abort(&mut self, cx: &mut Cx<'_, F>, txn: TxnId) {
        if self.graph.get(&txn).is_some_and(|n| n.done_ns.is_some() && !n.v.aborted) {
            return;
        }
        self.abort_local(cx, txn);
        self.advance(cx);
    }

    fn sweep(&mut self, now: u64) {
        self.graph.retain(|_, n| n.done_ns.is_none_or(|d| now.saturating_sub(d) < DONE_MEMORY_NS));
        // Versions: keep the newest one older than the horizon and everything newer (a read-only read may
        // skip back that far).
        let graph = &self.graph;
        for versions in self.store.values_mut() {
            if versions.len() <= 1 {
                continue;
            }
            let old = versions.iter().rposition(|s| {
                graph
                    .get(&s.writer)
                    .is_none_or(|n| n.done_ns.is_some_and(|d| now.saturating_sub(d) >= READERS_HORIZON_NS))
            });
            if let Some(i) = old {
                versions.drain(..i);
            }
        }
    }

    fn drain_loopback(&mut self, cx: &mut Cx<'_, F>) {
        while let Some((_, msg)) = self.loopback.pop_front() {
            let me = self.id;
            let _ = self.handle(cx, Addr::Server(me), msg);
        }
    }

    fn handle(&mut self, cx: &mut Cx<'_, F>, from: Addr, msg: RccMsg) -> Result<(), InvalidInput> {
        let check = Check::new(&self.topology, &self.config, cx.now_ns(), from, msg.kind());
        let me = self.me();
        if self.id.dc != HOME_DC {
            if let Addr::Client(c) = from {
                let refusal = OpError::Rejected(format!(
                    "{} keeps every key in datacenter {HOME_DC}; this server of datacenter {} serves nothing",
                    <F as Flavor>::NAME,
                    self.id.dc
                ));
                match msg {
                    RccMsg::Submit { txn, .. } => {
                        cx.send(Addr::Client(c), RccMsg::Outcome { txn, result: Err(refusal) });
                    }
                    RccMsg::RotRead { .. } => {}
                    _ => return Err(check.fail(InvalidKind::Sender, "not a client request")),
                }
                return Ok(());
            }
            return Err(check.fail(InvalidKind::Sender, "servers outside datacenter 0 take no part"));
        }
        match msg {
            RccMsg::Submit { txn, procedure, args } => {
                let client = check.client()?;
                check.ensure(txn.client == client, InvalidKind::Sender, || "a transaction of another client".into())?;
                check.request(&Request::Call { procedure: procedure.clone(), args: args.clone() })?;
                self.on_submit(cx, client, txn, procedure, args);
            }
            RccMsg::RotRead { rot, round, keys, snow, started_ns } => {
                let client = check.client()?;
                check.ensure(rot.client == client, InvalidKind::Sender, || "a read of another client".into())?;
                check.ensure(keys.len() <= MAX_SET, InvalidKind::Malformed, || "too many keys".into())?;
                check.request_keys(&keys)?;
                for k in &keys {
                    check.key_on(k, me)?;
                }
                check.time(started_ns, "the read-only transaction's start")?;
                self.on_rot_read(cx, client, rot, round, keys, snow, started_ns);
            }
            RccMsg::Dispatch { txn, procedure, args, pieces, start_ns } => {
                check.time(start_ns, "a transaction's start")?;
                let from = self.home_server(&check)?;
                for p in &pieces {
                    for k in p.reads.iter().chain(&p.writes) {
                        check.key_on(k, me)?;
                    }
                    check.ensure(p.known.len() <= MAX_SET, InvalidKind::Malformed, || "too many outputs".into())?;
                }
                self.on_dispatch(cx, from, txn, procedure, args, pieces, start_ns);
            }
            RccMsg::Dispatched { txn, result } => {
                let from = self.home_server(&check)?;
                if let Ok(ok) = &result {
                    check_graph(&check, &self.topology, &ok.graph)?;
                }
                self.on_dispatched(cx, from.partition, txn, result);
            }
            RccMsg::Commit { txn, graph } => {
                self.home_server(&check)?;
                check_graph(&check, &self.topology, &graph)?;
                check.ensure(
                    graph.iter().any(|v| v.id == Some(txn) && v.committing),
                    InvalidKind::Malformed,
                    || "a commit without its committing vertex".into(),
                )?;
                self.on_commit(cx, graph);
            }
            RccMsg::Abort { txn } => {
                self.home_server(&check)?;
                self.on_abort(cx, txn);
            }
            RccMsg::Executed { txn, execution, ts } => {
                let from = self.home_server(&check)?;
                self.on_executed(cx, from.partition, txn, execution, ts);
            }
            RccMsg::Inquire { txn } => {
                let from = self.home_server(&check)?;
                self.on_inquire(cx, from, txn);
            }
            RccMsg::Inquired { txn, graph } => {
                self.home_server(&check)?;
                check_graph(&check, &self.topology, &graph)?;
                self.on_inquired(cx, txn, graph);
            }
            RccMsg::Outcome { .. } | RccMsg::RotReply { .. } => {
                return Err(check.fail(InvalidKind::Sender, "a reply to a client sent to a server"));
            }
        }
        Ok(())
    }

    /// The sender must be a server of datacenter 0.
    fn home_server(&self, check: &Check<'_>) -> Result<ServerId, InvalidInput> {
        let from = check.server()?;
        check.ensure(from.dc == HOME_DC, InvalidKind::Sender, || "only datacenter 0's servers take part".into())?;
        Ok(from)
    }
}

/// A graph from the network: bounded, with partitions in range.
fn check_graph(check: &Check<'_>, topology: &Topology, graph: &[Vertex]) -> Result<(), InvalidInput> {
    check.ensure(graph.len() <= MAX_GRAPH, InvalidKind::Malformed, || "graph too large".into())?;
    for v in graph {
        check.ensure(v.id.is_some(), InvalidKind::Malformed, || "a vertex without an id".into())?;
        check.ensure(v.parents.len() <= MAX_SET && v.servers.len() <= MAX_SET, InvalidKind::Malformed, || {
            "vertex too large".into()
        })?;
        for p in &v.servers {
            check
                .ensure(*p < topology.partitions, InvalidKind::OutOfRange, || format!("partition {p} out of range"))?;
        }
    }
    Ok(())
}

impl<F> ServerNode<F> for RccServer<F>
where
    F: Flavor + Protocol<Msg = RccMsg, Timer = RccTimer>,
{
    fn on_start(&mut self, cx: &mut Ctx<'_, F>) {
        if self.id.dc == HOME_DC {
            cx.set_timer(SWEEP_EVERY_NS, RccTimer::Sweep);
        }
    }

    fn on_message(&mut self, cx: &mut Ctx<'_, F>, from: Addr, msg: RccMsg) -> Result<(), InvalidInput> {
        let result = self.handle(cx, from, msg);
        self.drain_loopback(cx);
        result
    }

    fn on_timer(&mut self, cx: &mut Ctx<'_, F>, timer: RccTimer) {
        match timer {
            RccTimer::Sweep => {
                self.sweep(cx.now_ns());
                cx.set_timer(SWEEP_EVERY_NS, RccTimer::Sweep);
            }
            RccTimer::Reply(txn) => self.finish(cx, txn),
            RccTimer::Serve => self.serve_parked(cx),
        }
    }

    fn stored_versions(&self) -> usize {
        self.store.values().map(Vec::len).sum()
    }
}

// ---------------------------------------------------------------------------------------------------------
// Client
// ---------------------------------------------------------------------------------------------------------

/// A read-only transaction in progress.
struct Rot {
    op: OpId,
    id: TxnId,
    started_ns: u64,
    /// For a read-only procedure, the call; for a plain ROT, `None`.
    call: Option<procedure::Call>,
    /// The keys of the current round, in order, and their answers.
    keys: Vec<Key>,
    answers: BTreeMap<Key, ReadResult>,
    waiting: BTreeSet<PartitionId>,
    round: u32,
    /// Rococo: the reads of the previous execution, to compare.
    previous: Option<Vec<ReadResult>>,
    /// The reads of the current execution so far.
    reads: Vec<ReadResult>,
    metrics: OpMetrics,
}

enum Pending {
    Call { op: OpId, txn: TxnId },
    Rot(Box<Rot>),
}

impl Pending {
    fn is_call(&self, id: TxnId) -> bool {
        matches!(self, Pending::Call { txn, .. } if *txn == id)
    }
}

/// A client session: submits calls to coordinators and runs read-only transactions itself.
pub struct RccClient<F: Flavor> {
    id: ClientId,
    topology: Topology,
    seq: u64,
    pending: Option<Pending>,
    _config: ProtocolConfig,
    _flavor: PhantomData<F>,
}

impl<F> RccClient<F>
where
    F: Flavor + Protocol<Msg = RccMsg, Timer = RccTimer>,
{
    pub fn new(id: ClientId, topology: Topology, config: ProtocolConfig) -> Self {
        Self { id, topology, seq: 0, pending: None, _config: config, _flavor: PhantomData }
    }

    fn next_txn(&mut self) -> TxnId {
        self.seq += 1;
        TxnId { client: self.id, seq: self.seq }
    }

    fn abandon(&mut self, cx: &mut Cx<'_, F>) {
        match self.pending.take() {
            Some(Pending::Call { op, .. }) => cx.complete(op, Err(OpError::Unknown("abandoned".into()))),
            Some(Pending::Rot(r)) => cx.complete(r.op, Err(OpError::Unknown("abandoned".into()))),
            None => {}
        }
    }

    fn submit(&mut self, cx: &mut Cx<'_, F>, op: OpId, name: String, args: Vec<Value>) {
        let call = match procedure::Call::start(&name, args) {
            Ok(call) => call,
            Err(e) => return cx.complete(op, Err(OpError::Rejected(e))),
        };
        if call.procedure.read_only() {
            let txn = self.next_txn();
            let rot = Rot::new(op, txn, cx.now_ns(), Some(call));
            return self.start_round(cx, rot);
        }
        let Some(first) = call.pieces.iter().flat_map(|p| p.reads.iter().chain(&p.writes)).next() else {
            return cx.complete(op, Err(OpError::Rejected(format!("{name}: the call names no key"))));
        };
        let coordinator = home(self.topology.partition_of(first));
        let txn = self.next_txn();
        self.pending = Some(Pending::Call { op, txn });
        cx.send(Addr::Server(coordinator), RccMsg::Submit { txn, procedure: name, args: call.args });
    }

    /// Send the current round of `rot` (its keys: a plain ROT's, or the call's current wave's reads).
    fn start_round(&mut self, cx: &mut Cx<'_, F>, mut rot: Rot) {
        rot.round += 1;
        rot.metrics.rounds += 1;
        rot.answers.clear();
        let mut per: BTreeMap<PartitionId, Vec<Key>> = BTreeMap::new();
        for k in &rot.keys {
            per.entry(self.topology.partition_of(k)).or_default().push(k.clone());
        }
        rot.waiting = per.keys().copied().collect();
        for (p, keys) in per {
            let read =
                RccMsg::RotRead { rot: rot.id, round: rot.round, keys, snow: F::SNOW, started_ns: rot.started_ns };
            cx.send(Addr::Server(home(p)), read);
        }
        if rot.waiting.is_empty() {
            // A wave that reads nothing.
            self.pending = Some(Pending::Rot(Box::new(rot)));
            return self.round_done(cx);
        }
        self.pending = Some(Pending::Rot(Box::new(rot)));
    }

    fn on_rot_reply(
        &mut self,
        cx: &mut Cx<'_, F>,
        from: ServerId,
        rot: TxnId,
        round: u32,
        reads: Vec<ReadResult>,
        blocked_ns: u64,
    ) {
        let Some(Pending::Rot(r)) = self.pending.as_mut() else { return };
        if r.id != rot || r.round != round || !r.waiting.remove(&from.partition) {
            return;
        }
        r.metrics.blocked_ns = r.metrics.blocked_ns.max(blocked_ns);
        for read in reads {
            r.answers.insert(read.key.clone(), read);
        }
        if r.waiting.is_empty() {
            self.round_done(cx);
        }
    }

    fn round_done(&mut self, cx: &mut Cx<'_, F>) {
        let Some(Pending::Rot(mut r)) = self.pending.take() else { return };
        if F::SNOW && cx.now_ns().saturating_sub(r.started_ns) > READERS_HORIZON_NS / 2 {
            // Too late: the versions it reads at its start may have been collected. Start again.
            let call = r.call.take().map(restart);
            let mut fresh = Rot::new(r.op, self.next_txn(), cx.now_ns(), call);
            if fresh.call.is_none() {
                fresh.keys = std::mem::take(&mut r.keys);
            }
            fresh.metrics = std::mem::take(&mut r.metrics);
            return self.start_round(cx, fresh);
        }
        let mut round_reads = Vec::with_capacity(r.keys.len());
        for k in &r.keys {
            if let Some(a) = r.answers.get(k) {
                round_reads.push(a.clone());
            }
        }
        r.metrics.versions_returned += round_reads.len() as u32;
        // Run the wave of a read-only procedure on what it read; plan the next.
        if let Some(call) = r.call.as_mut() {
            let wave: Vec<usize> = (0..call.pieces.len()).filter(|i| call.known[*i].is_none()).collect();
            for i in wave {
                let values: Vec<Option<Value>> =
                    call.pieces[i].reads.iter().map(|k| r.answers.get(k).and_then(|a| a.value.clone())).collect();
                if let Err(e) = call.run(i, &values) {
                    let name = call.procedure.name();
                    return cx.complete(r.op, Err(OpError::aborted(e.cause(), format!("{name}: {e}"))));
                }
            }
            r.reads.extend(round_reads);
            match call.next_wave() {
                Err(e) => return cx.complete(r.op, Err(OpError::Rejected(e))),
                Ok(next) if !next.is_empty() => {
                    r.keys = dedup(call.pieces[next].iter().flat_map(|p| p.reads.iter().cloned()));
                    return self.start_round(cx, *r);
                }
                Ok(_) => {}
            }
        } else {
            r.reads = round_reads;
        }
        // One execution is complete.
        r.metrics.executions += 1;
        if F::SNOW {
            return self.complete_rot(cx, *r);
        }
        let same = r.previous.as_ref().is_some_and(|prev| {
            prev.len() == r.reads.len() && prev.iter().zip(&r.reads).all(|(a, b)| a.key == b.key && a.value == b.value)
        });
        if same {
            return self.complete_rot(cx, *r);
        }
        if r.round >= MAX_ROT_ROUNDS {
            let e = format!("no two consecutive rounds agreed in {} rounds", r.round);
            return cx.complete(r.op, Err(OpError::aborted(AbortCause::Conflict, e)));
        }
        // Rococo: read again (the whole procedure again, for a read-only procedure).
        r.previous = Some(std::mem::take(&mut r.reads));
        if let Some(call) = r.call.take() {
            let call = restart(call);
            r.keys = dedup(call.pieces.iter().flat_map(|p| p.reads.iter().cloned()));
            r.call = Some(call);
        }
        self.start_round(cx, *r);
    }

    fn complete_rot(&mut self, cx: &mut Cx<'_, F>, r: Rot) {
        let reply = Reply { reads: r.reads, metrics: r.metrics, ..Default::default() };
        cx.complete(r.op, Ok(reply));
    }
}

/// A read-only procedure from its first wave again.
fn restart(call: procedure::Call) -> procedure::Call {
    let pieces = call.procedure.plan(&call.args, &[]).unwrap_or_default();
    let known = vec![None; pieces.len()];
    procedure::Call { pieces, known, ..call }
}

fn dedup(keys: impl Iterator<Item = Key>) -> Vec<Key> {
    let mut seen = BTreeSet::new();
    keys.filter(|k| seen.insert(k.clone())).collect()
}

impl Rot {
    fn new(op: OpId, id: TxnId, now: u64, call: Option<procedure::Call>) -> Self {
        let keys =
            call.as_ref().map_or_else(Vec::new, |c| dedup(c.pieces.iter().flat_map(|p| p.reads.iter().cloned())));
        Rot {
            op,
            id,
            started_ns: now,
            call,
            keys,
            answers: BTreeMap::new(),
            waiting: BTreeSet::new(),
            round: 0,
            previous: None,
            reads: Vec::new(),
            metrics: OpMetrics::default(),
        }
    }
}

// Session tokens: none needed (the default). Strict serializability orders each transaction after every one
// that completed before it started; the client keeps only its transaction sequence, unique under a new id.
impl<F> ClientNode<F> for RccClient<F>
where
    F: Flavor + Protocol<Msg = RccMsg, Timer = RccTimer>,
{
    fn on_request(&mut self, cx: &mut Ctx<'_, F>, op: OpId, request: Request) {
        self.abandon(cx);
        match request {
            Request::Rot { keys } => {
                if keys.is_empty() {
                    return cx.complete(op, Err(OpError::Rejected("a read-only transaction names no key".into())));
                }
                let txn = self.next_txn();
                let mut rot = Rot::new(op, txn, cx.now_ns(), None);
                rot.keys = keys;
                self.start_round(cx, rot);
            }
            Request::Put { key, value } => {
                self.submit(cx, op, "rw".into(), vec!["0".into(), key.clone(), value]);
            }
            Request::Update { writes } => {
                let mut args = vec![Value::from("0")];
                for (k, v) in writes {
                    args.push(k);
                    args.push(v);
                }
                self.submit(cx, op, "rw".into(), args);
            }
            Request::Call { procedure, args } => self.submit(cx, op, procedure, args),
            other => cx.complete(
                op,
                Err(OpError::Rejected(format!("{} does not offer {} requests", <F as Flavor>::NAME, other.kind()))),
            ),
        }
    }

    fn on_message(&mut self, cx: &mut Ctx<'_, F>, from: Addr, msg: RccMsg) {
        match (from, msg) {
            (Addr::Server(_), RccMsg::Outcome { txn, result }) => {
                if let Some(Pending::Call { op, .. }) = self.pending.as_ref().filter(|p| p.is_call(txn)) {
                    let op = *op;
                    self.pending = None;
                    cx.complete(op, result);
                }
            }
            (Addr::Server(s), RccMsg::RotReply { rot, round, reads, blocked_ns }) => {
                self.on_rot_reply(cx, s, rot, round, reads, blocked_ns)
            }
            _ => {}
        }
    }
}
