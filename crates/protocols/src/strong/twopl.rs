//! Two-phase locking with two-phase commit (`--protocol 2pl`, alias `2pl-2pc`): the strictly serializable
//! baseline that the SNOW paper's Rococo-SNOW evaluation (§6.2, Fig. 7) measures against, as in Rococo's
//! evaluation. Strict two-phase locking (Eswaran, Gray, Lorie, Traiger, CACM 1976: a transaction acquires
//! every lock before it releases any; strict: it releases them only at commit or abort) over single-copy
//! partitions, two-phase commit (Gray 1978) for atomicity across partitions, and wound-wait (Rosenkrantz,
//! Stearns, Lewis, ACM TODS 1978) against deadlocks.
//!
//! The module is generic over its concurrency control ([`SingleCopy`]`<C: `[`ConcurrencyControl`]`>`):
//! [`TwoPl`] locks ([`Control::Locking`] with long read locks, this doc), [`occ::Occ`] validates
//! ([`Control::Validation`], its module doc), and the RAMP paper's weaker locking baselines, `lwsr` and `lwnr`,
//! lock writes as 2PL does but hold read locks only until the read is answered, or take none
//! ([`read_locks::ReadLocks`], its module doc). Placement, the client, the coordinator and two-phase commit
//! are one implementation; reads, prepares and read-only commits branch on the control.
//!
//! # Guarantees
//!
//! Strict serializability: every committed transaction held shared locks on what it read and exclusive locks
//! on what it wrote from its lock point (all locks held) until its decision was applied, so the order of lock
//! points is a serial order consistent with real time. Commit versions totally order each key's writes (the
//! registry says `orders_versions`): a version is a Lamport-style number above every version its partitions
//! had applied when they voted.
//!
//! # Placement
//!
//! One copy per key: key `k` lives at partition `topology.partition_of(k)` of datacenter 0
//! (`ServerId::new(0, p)`, its *home*). Clients of every datacenter talk to datacenter 0's servers and pay
//! the WAN latency; the servers of the other datacenters serve nothing (they answer requests with a refusal):
//! replica groups come with a later issue.
//!
//! # Roles and messages
//!
//! - The **client node** runs one transaction at a time per session. `Begin` is local: it assigns the
//!   transaction id `(client, seq)` ([`TxnId`]) and the wound-wait priority [`Age`] `(clock reading, client)`,
//!   and completes at once. `Read{keys}` sends one [`TwoPlMsg::Read`] per partition touched to its home; the
//!   home acquires shared locks (waiting if needed) and answers with values and versions
//!   ([`TwoPlMsg::ReadReply`]); the client completes with the reads in request order. `Commit{writes}` sends
//!   the transaction ([`TwoPlMsg::Commit`]: writes grouped per partition, plus the partitions where it holds
//!   locks) to a **coordinator**: the home of the lowest participant partition. A read-only commit needs no
//!   two-phase commit: it sends [`TwoPlMsg::Release`] to every partition read; the partition that answered
//!   the last read held all the transaction's locks there when it answered, and every other one confirms
//!   ([`TwoPlMsg::Released`]) that it still held them all when the release arrived (later), so all were held
//!   together at that answer. A read-only transaction of one partition (a GET) thus completes without
//!   waiting; one of several partitions waits for the confirmations, and aborts if a partition no longer
//!   held its locks (it was wounded there while another read was in flight: what it read was then never
//!   current at once). `Abort` sends `Release` and completes with `Aborted(User)`. The one-shot requests
//!   run as transactions inside the client node: a ROT (GET: one key) is Begin + Read + read-only commit (a
//!   multi-shot ROT: one Read round per round), a `Put` is a one-write blind transaction, an `Update` a blind
//!   multi-write one (their participants get `Prepare` as first contact). They are not retried inside the
//!   client node: an abort is reported, with its cause.
//! - The **coordinator** is a server, so its state survives a crash of a durable server and a client that
//!   disappears after `Commit` blocks no participant. It runs two-phase commit: [`TwoPlMsg::Prepare`] to every
//!   participant (its writes there; a read-only participant just confirms it still holds the read locks),
//!   each answers [`TwoPlMsg::Vote`] yes with a proposed commit time or no with a cause; the decision (commit
//!   at `Version { time: max proposed, dc: 0 }`, or abort) goes to every participant ([`TwoPlMsg::Decide`]) and
//!   to the client ([`TwoPlMsg::Outcome`]); participants apply the writes, release every lock of the
//!   transaction, and acknowledge ([`TwoPlMsg::Ack`]) so the coordinator can forget it. The coordinator's own
//!   partition is reached through a local loopback queue drained before the handler returns, never by
//!   re-entering a handler.
//! - A **participant** (every partition server of datacenter 0) keeps the store (one version per key), the
//!   lock table and its transactions. A vote yes proposes `max(clock reading, Lamport clock + 1)`: above the
//!   version of every key the transaction writes or reads there, since the Lamport clock covers every version
//!   applied and every decision seen. Reads return `versions_skipped: 0` (single version).
//! - A **stored procedure** (`Call`) runs wave by wave (`procedure::Call`): the client locks every key of a
//!   wave's pieces in one round (shared for keys only read, exclusive for keys written: declared upfront, so
//!   no upgrade within a wave; a key written by a later wave is upgraded then), reads the read keys, runs the
//!   pieces, plans the next wave from their outputs, and once the plan is complete commits the writes through
//!   the same coordinator. A procedure's own error aborts it with cause `User`.
//!
//! # Locks and deadlocks: wound-wait
//!
//! Each key has holders and a FIFO queue of waiters; compatible requests are granted in queue order (an
//! upgrade S→X of a holder goes to the front of the queue). When T's request conflicts with a transaction B
//! it would wait for — a holder, or a waiter queued ahead of it — and T is older than B (smaller
//! `(age, txn)`) and B has not voted yes here, B is **wounded**: the participant aborts B locally (releases
//! its locks there, answers B's waiting request if any, and remembers B as aborted with cause `Deadlock`) and
//! T proceeds or waits behind the rest. If B has voted yes here, the participant may not abort it, so T waits
//! and the participant asks B's coordinator once ([`TwoPlMsg::Wound`]) to abort B, which it does (cause
//! `Deadlock`) unless it has decided already — then the decision is on its way and B waits for nothing. If T
//! is younger, T waits. Waiters ahead count as well as holders because a FIFO queue makes T wait for them;
//! without wounding them an older T could wait behind a younger waiter that waits for T elsewhere. The
//! coordinator's wound is needed because "prepared" is per partition: B may have voted yes at p (say as a
//! read-only participant) while its Prepare at q waits for T's lock, and T at p waits for B. So an older
//! transaction waits for a younger one only until that one's decision is known, every other wait is for an
//! older transaction, and no cycle of waits lasts.
//!
//! A wounded transaction learns of it from the answer to its pending or next request to that participant: a
//! `Read` gets `Err(Aborted(Deadlock, "wounded by an older transaction"))`, a `Prepare` a vote no with cause
//! `Deadlock`. The client then sends `Release` to its other partitions. A transaction begun right after the
//! session's previous transaction aborted with a non-user cause reuses that transaction's age: a retried
//! transaction keeps getting older relative to newcomers, so eventually it is the oldest in the system, and
//! the oldest transaction is never wounded and waits for others only until their decisions are known: it
//! commits (wound-wait's starvation freedom).
//!
//! Why wound-wait rather than wait-die: both are deadlock-free by timestamps, but under wound-wait an older
//! transaction does not wait for a younger one (beyond a decision in flight) and never aborts for a deadlock,
//! whereas wait-die aborts the
//! younger requester every time it meets an older holder, repeatedly while the holder lives. Long transactions
//! (the old ones, by the time they conflict) thus restart less, and a wounded transaction is often one that
//! has not done much yet.
//!
//! # Timeouts and failures
//!
//! - A participant aborts a transaction that is not prepared and has had no request from its client or
//!   coordinator for [`IDLE_ABORT_NS`] (the client may have died; a request waiting that long counts too),
//!   with cause `Timeout`; a periodic [`TwoPlTimer::Sweep`] every [`SWEEP_EVERY_NS`] finds them (one timer,
//!   not one per lock).
//! - Prepared transactions are never aborted unilaterally: they wait for the coordinator's decision.
//!   Coordinators are servers; a durable server recovers its coordinator and participant state by log
//!   replay, and server-to-server links are exactly-once across crashes. A coordinator whose participant does
//!   not answer keeps waiting (two-phase commit blocks); the client's operation then times out as `Unknown`
//!   in the runtime.
//! - Stale or duplicate messages (a decision for an unknown transaction, a read for an aborted one) are
//!   answered or ignored without panicking; a request that did not arrive at the home server of its keys, or
//!   that names another client's transaction, is answered with `Rejected`. Requests carry `held`: whether the
//!   client believes the partition already holds locks for the transaction, so a partition that no longer
//!   knows the transaction (aborted and forgotten) refuses rather than granting fresh locks to it.
//! - A session that sends a new request while its previous operation is unanswered (the runtime gave up on
//!   it) abandons that operation: it completes it as `Unknown`, releases the locks of an uncommitted
//!   transaction, and forgets a committing one (its coordinator decides it).
//!
//! # Metrics
//!
//! `rounds`: client↔server rounds (a Read or a ROT round 1 each, a commit 1, a read-only commit 0 on one
//! partition and 1 on several, a `Call` one per wave plus 1); `blocked_ns`: time its reads and prepares waited for locks;
//! `versions_returned`: read results.
//!
//! Session tokens: none (the default): one copy per key and strict serializability (`rc` for the locking
//! baselines) need nothing from a session's earlier transactions.

use serde::{Deserialize, Serialize};
use snowline_core::procedure::{self, Piece};
use snowline_core::{
    Abort, AbortCause, Addr, Check, ClientId, ClientNode, Ctx, DcId, InvalidInput, InvalidKind, Key, LinkAssumptions,
    Message, Offers, OpError, OpId, OpMetrics, PartitionId, Protocol, ProtocolConfig, ReadResult, Reply, ReplyNote,
    Request, ServerId, ServerNode, Topology, Value, Version,
};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::marker::PhantomData;
use std::ops::Range;

mod limits;
pub mod occ;
pub mod read_locks;

pub use read_locks::ReadLocks;

/// The datacenter whose servers hold the single copy of every key.
pub const HOME_DC: DcId = 0;
/// A transaction that is not prepared and has had no request at a partition for this long is aborted there
/// (cause `Timeout`).
pub const IDLE_ABORT_NS: u64 = 5_000_000_000;
/// How often a partition looks for idle transactions.
pub const SWEEP_EVERY_NS: u64 = 1_000_000_000;
/// How long a partition remembers why it aborted a transaction (to tell its late requests the cause).
pub const ABORTED_MEMORY_NS: u64 = 60_000_000_000;

/// How a protocol of this module keeps concurrent transactions apart at a partition. Everything else —
/// single-copy placement, the client (read rounds, stored procedures' waves, read-only commits), the
/// coordinator and two-phase commit — is one implementation for all.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Control {
    /// Two-phase locking with wound-wait: prepares lock exclusively and wait; reads lock shared until the
    /// decision (`2pl`, this module: [`ReadLocks::Long`]), until answered (`lwsr`) or not at all (`lwnr`).
    Locking(ReadLocks),
    /// Optimistic: reads take no lock, a prepare validates the reads with no-wait locks (`occ`, [`occ`]).
    Validation,
}

/// Selects a protocol of this module: its name and its [`Control`].
pub trait ConcurrencyControl: Send + 'static {
    const NAME: &'static str;
    const CONTROL: Control;
}

/// Two-phase locking: [`Control::Locking`] with long read locks.
pub struct Pessimistic;

impl ConcurrencyControl for Pessimistic {
    const NAME: &'static str = "2pl";
    const CONTROL: Control = Control::Locking(ReadLocks::Long);
}

/// Two-phase commit over single-copy partitions, with the concurrency control `C`.
pub struct SingleCopy<C>(PhantomData<C>);

/// Two-phase locking with two-phase commit. See the module docs.
pub type TwoPl = SingleCopy<Pessimistic>;

impl<C: ConcurrencyControl> Protocol for SingleCopy<C> {
    const NAME: &'static str = C::NAME;
    type Msg = TwoPlMsg;
    type Timer = TwoPlTimer;
    type Server = TwoPlServer<C>;
    type Client = TwoPlClient<C>;
    const OFFERS: Offers = Offers {
        read_only: true,
        multi_key_rots: true,
        multi_shot_rots: true,
        blind_writes: true,
        write_transactions: true,
        interactive: true,
        stored_procedures: true,
    };

    fn links() -> LinkAssumptions {
        // A client's Release follows its Read, and a coordinator's Decide its Prepare, on the same link.
        LinkAssumptions { fifo: true }
    }

    fn server(id: ServerId, topology: Topology, config: &ProtocolConfig) -> TwoPlServer<C> {
        TwoPlServer::with_config(id, topology, config)
    }

    fn client(id: ClientId, _dc: DcId, topology: Topology, config: &ProtocolConfig) -> TwoPlClient<C> {
        TwoPlClient::new(id, topology, config.clone())
    }
}

/// A transaction: its client and the client's sequence number. Unique in a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct TxnId {
    pub client: ClientId,
    pub seq: u64,
}

/// A transaction's wound-wait priority: the client's clock when the transaction (or the first of its
/// retries) began, then the client id. Smaller is older. Ties between a session's retries are broken by
/// [`TxnId`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Age {
    pub time: u64,
    pub client: ClientId,
}

/// A lock mode. `Shared < Exclusive`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Mode {
    Shared,
    Exclusive,
}

fn conflicts(a: Mode, b: Mode) -> bool {
    a == Mode::Exclusive || b == Mode::Exclusive
}

/// One participant of a commit, as the client sends it to the coordinator.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Participant {
    pub partition: PartitionId,
    /// The transaction's writes on this partition (empty: a read-only participant).
    pub writes: Vec<(Key, Value)>,
    /// The client holds locks there (it read there; 2PL).
    pub held: bool,
    /// The keys the transaction read there, with the versions it read (OCC validates them; 2PL's locks
    /// make them current, so it sends none).
    pub reads: Vec<(Key, Version)>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum TwoPlMsg {
    /// Client → home server: lock `keys` shared and `exclusive` exclusively, and read `keys`. `held`: an
    /// earlier request of the transaction left locks here (lwsr's and lwnr's: exclusive ones only).
    Read { txn: TxnId, age: Age, keys: Vec<Key>, exclusive: Vec<Key>, held: bool },
    /// Home server → client: the values of the keys read, in request order, or why not; how long the
    /// request waited for locks.
    ReadReply { txn: TxnId, result: Result<Vec<ReadResult>, OpError>, blocked_ns: u64 },
    /// Client → coordinator: commit this transaction.
    Commit { txn: TxnId, age: Age, participants: Vec<Participant> },
    /// Coordinator → participant: lock the writes exclusively and vote (OCC: validate `reads` too).
    Prepare { txn: TxnId, age: Age, writes: Vec<(Key, Value)>, held: bool, reads: Vec<(Key, Version)> },
    /// Participant → coordinator: yes with a proposed commit time, or no with a cause.
    Vote { txn: TxnId, vote: Result<u64, Abort>, blocked_ns: u64 },
    /// Coordinator → participant: commit with this version, or abort (`None`).
    Decide { txn: TxnId, commit: Option<Version> },
    /// Participant → coordinator: the decision is applied.
    Ack { txn: TxnId },
    /// Client → home server: drop the transaction and its locks (an abort, or the end of a read-only
    /// transaction). With `confirm`, answer whether the transaction still held its locks here
    /// ([`TwoPlMsg::Released`]).
    Release { txn: TxnId, confirm: bool },
    /// Home server → client: the transaction held its locks here until the release (2PL), or its reads
    /// here were still current ([`TwoPlMsg::Validate`], OCC); or why not.
    Released { txn: TxnId, result: Result<(), Abort> },
    /// Client → home server (OCC's read-only commit): answer ([`TwoPlMsg::Released`]) whether these keys
    /// still have the versions read and no prepared transaction is writing them.
    Validate { txn: TxnId, reads: Vec<(Key, Version)> },
    /// Participant → coordinator: an older transaction waits for this one, which is prepared here; abort it
    /// if it is not decided yet.
    Wound { txn: TxnId },
    /// Coordinator → client: the commit's outcome.
    Outcome { txn: TxnId, result: Result<Reply, OpError> },
}

impl Message for TwoPlMsg {
    fn kind(&self) -> &'static str {
        match self {
            TwoPlMsg::Read { .. } => "read",
            TwoPlMsg::ReadReply { .. } => "read-reply",
            TwoPlMsg::Commit { .. } => "commit",
            TwoPlMsg::Prepare { .. } => "prepare",
            TwoPlMsg::Vote { .. } => "vote",
            TwoPlMsg::Decide { .. } => "decide",
            TwoPlMsg::Ack { .. } => "ack",
            TwoPlMsg::Release { .. } => "release",
            TwoPlMsg::Released { .. } => "released",
            TwoPlMsg::Validate { .. } => "validate",
            TwoPlMsg::Wound { .. } => "wound",
            TwoPlMsg::Outcome { .. } => "outcome",
        }
    }

    /// A commit may carry writes; one that does not is refused too (its locks go at the timeout sweep).
    fn is_client_write(&self) -> bool {
        matches!(self, TwoPlMsg::Commit { .. })
    }

    /// An unconfirmed release (after a read-only transaction, or an abort) gets no answer.
    fn expects_reply(&self, _to: Addr) -> bool {
        !matches!(self, TwoPlMsg::Release { confirm: false, .. })
    }

    fn reply_note(&self) -> Option<ReplyNote> {
        match self {
            TwoPlMsg::ReadReply { result, blocked_ns, .. } => Some(ReplyNote::of(result, *blocked_ns)),
            TwoPlMsg::Outcome { result, .. } => {
                Some(ReplyNote::of(result, result.as_ref().map_or(0, |r| r.metrics.blocked_ns)))
            }
            TwoPlMsg::Released { result: Err(abort), .. } => {
                Some(ReplyNote { abort: Some(abort.cause), ..Default::default() })
            }
            _ => None,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum TwoPlTimer {
    /// Abort idle transactions and forget old abort causes.
    Sweep,
}

fn home(partition: PartitionId) -> ServerId {
    ServerId::new(HOME_DC, partition)
}

fn wounded() -> Abort {
    Abort { cause: AbortCause::Deadlock, detail: "wounded by an older transaction".into() }
}

// ---------------------------------------------------------------------------------------------------------
// Server
// ---------------------------------------------------------------------------------------------------------

/// One key's lock: granted holders and FIFO waiters (an upgrading holder appears in both).
#[derive(Debug, Default, Serialize, Deserialize)]
struct Lock {
    holders: BTreeMap<TxnId, Mode>,
    queue: VecDeque<(TxnId, Mode)>,
}

/// A request waiting for locks at a participant.
#[derive(Debug, Serialize, Deserialize)]
enum Waiting {
    Read { client: ClientId, keys: Vec<Key> },
    Prepare { coordinator: ServerId, writes: Vec<(Key, Value)> },
}

#[derive(Debug, Serialize, Deserialize)]
struct Pending {
    what: Waiting,
    /// Keys not granted yet.
    keys: BTreeSet<Key>,
    arrived_ns: u64,
}

/// A transaction that voted yes here.
#[derive(Debug, Serialize, Deserialize)]
struct Prepared {
    coordinator: ServerId,
    writes: Vec<(Key, Value)>,
    /// Its coordinator was asked to abort it (once is enough).
    wound_sent: bool,
}

/// A transaction at a participant.
#[derive(Debug, Serialize, Deserialize)]
struct Local {
    age: Age,
    locks: BTreeMap<Key, Mode>,
    prepared: Option<Prepared>,
    pending: Option<Pending>,
    /// When its last request arrived here (idle abort).
    last_seen_ns: u64,
    /// Its age, or when it was first seen here if that is earlier (the lifetime's start, `limits`).
    born_ns: u64,
}

/// A transaction this server coordinates.
#[derive(Debug, Serialize, Deserialize)]
struct Coordinated {
    client: ClientId,
    votes: BTreeMap<PartitionId, Option<u64>>,
    blocked_ns: u64,
    decided: bool,
    unacked: BTreeSet<PartitionId>,
}

/// A partition server: participant (store, locks) and coordinator.
#[derive(Serialize, Deserialize)]
#[serde(bound = "")]
pub struct TwoPlServer<C = Pessimistic> {
    id: ServerId,
    topology: Topology,
    store: BTreeMap<Key, (Value, Version)>,
    /// Lamport clock: at least every version applied here and every decision seen.
    clock: u64,
    locks: BTreeMap<Key, Lock>,
    txns: BTreeMap<TxnId, Local>,
    /// Transactions aborted here by wound or timeout: why, and when.
    aborted: BTreeMap<TxnId, (Abort, u64)>,
    coordinated: BTreeMap<TxnId, Coordinated>,
    /// Messages to this server itself, drained before the handler returns (empty between handler calls).
    #[serde(skip)]
    loopback: VecDeque<(ServerId, TwoPlMsg)>,
    /// The limits messages are checked against (`max_clock_ahead_ms`, the request limits, the transaction
    /// lifetime and lock bound: `limits`).
    config: ProtocolConfig,
    #[serde(skip)]
    _control: PhantomData<C>,
}

type Cx<'a, C> = Ctx<'a, SingleCopy<C>>;

impl<C: ConcurrencyControl> TwoPlServer<C> {
    pub fn new(id: ServerId, topology: Topology) -> Self {
        Self::with_config(id, topology, &ProtocolConfig::default())
    }

    const OPTIMISTIC: bool = matches!(C::CONTROL, Control::Validation);

    pub fn with_config(id: ServerId, topology: Topology, config: &ProtocolConfig) -> Self {
        Self {
            config: config.clone(),
            id,
            topology,
            store: BTreeMap::new(),
            clock: 0,
            locks: BTreeMap::new(),
            txns: BTreeMap::new(),
            aborted: BTreeMap::new(),
            coordinated: BTreeMap::new(),
            loopback: VecDeque::new(),
            _control: PhantomData,
        }
    }

    /// The committed value and version of `key` (for tests and inspection).
    pub fn value(&self, key: &str) -> Option<(Value, Version)> {
        self.store.get(key).cloned()
    }

    /// The holders of `key`'s lock.
    pub fn holders(&self, key: &str) -> Vec<(TxnId, Mode)> {
        self.locks.get(key).map(|l| l.holders.iter().map(|(t, m)| (*t, *m)).collect()).unwrap_or_default()
    }

    /// The waiters of `key`'s lock, in queue order.
    pub fn waiters(&self, key: &str) -> Vec<(TxnId, Mode)> {
        self.locks.get(key).map(|l| l.queue.iter().copied().collect()).unwrap_or_default()
    }

    /// Transactions known here as a participant.
    pub fn transactions(&self) -> usize {
        self.txns.len()
    }

    /// Whether `txn` voted yes here and awaits its decision.
    pub fn is_prepared(&self, txn: TxnId) -> bool {
        self.txns.get(&txn).is_some_and(|t| t.prepared.is_some())
    }

    /// Transactions this server coordinates and has not forgotten.
    pub fn coordinating(&self) -> usize {
        self.coordinated.len()
    }

    /// Why this participant aborted `txn`, if it remembers.
    pub fn abort_cause(&self, txn: TxnId) -> Option<AbortCause> {
        self.aborted.get(&txn).map(|(a, _)| a.cause)
    }

    fn send_server(&mut self, cx: &mut Cx<'_, C>, to: ServerId, msg: TwoPlMsg) {
        if to == self.id {
            self.loopback.push_back((self.id, msg));
        } else {
            cx.send(to, msg);
        }
    }

    fn drain_loopback(&mut self, cx: &mut Cx<'_, C>) {
        while let Some((from, msg)) = self.loopback.pop_front() {
            self.handle(cx, Addr::Server(from), msg);
        }
    }

    /// Why a key set does not belong here, if it does not.
    fn misplaced<'k>(&self, mut keys: impl Iterator<Item = &'k Key>) -> Option<String> {
        keys.find(|k| self.topology.partition_of(k) != self.id.partition).map(|k| {
            format!("misdirected: key {k:?} lives on partition {}, not on {}", self.topology.partition_of(k), self.id)
        })
    }

    fn handle(&mut self, cx: &mut Cx<'_, C>, from: Addr, msg: TwoPlMsg) {
        if self.id.dc != HOME_DC {
            let reason = format!(
                "{} serves nothing: {} keeps the single copy of every key in datacenter {HOME_DC} (replica groups \
                 come later)",
                self.id,
                C::NAME
            );
            match (from, msg) {
                (Addr::Client(c), TwoPlMsg::Read { txn, .. }) => {
                    cx.send(c, TwoPlMsg::ReadReply { txn, result: Err(OpError::Rejected(reason)), blocked_ns: 0 })
                }
                (Addr::Client(c), TwoPlMsg::Commit { txn, .. }) => {
                    cx.send(c, TwoPlMsg::Outcome { txn, result: Err(OpError::Rejected(reason)) })
                }
                _ => {}
            }
            return;
        }
        match (from, msg) {
            (Addr::Client(c), TwoPlMsg::Read { txn, keys, .. }) if Self::OPTIMISTIC => {
                self.read_optimistic(cx, c, txn, keys)
            }
            (Addr::Client(c), TwoPlMsg::Read { txn, age, keys, exclusive, held }) => {
                self.on_read(cx, c, txn, age, keys, exclusive, held)
            }
            (Addr::Client(c), TwoPlMsg::Validate { txn, reads }) => self.on_validate(cx, c, txn, reads),
            (Addr::Client(c), TwoPlMsg::Commit { txn, age, participants }) => {
                self.on_commit(cx, c, txn, age, participants)
            }
            (Addr::Client(c), TwoPlMsg::Release { txn, confirm }) => self.on_release(cx, c, txn, confirm),
            (Addr::Server(s), TwoPlMsg::Prepare { txn, age, writes, held, reads }) if s.dc == HOME_DC => {
                self.on_prepare(cx, s, txn, age, writes, held, reads)
            }
            (Addr::Server(s), TwoPlMsg::Vote { txn, vote, blocked_ns }) if s.dc == HOME_DC => {
                self.on_vote(cx, s, txn, vote, blocked_ns)
            }
            (Addr::Server(s), TwoPlMsg::Decide { txn, commit }) if s.dc == HOME_DC => {
                self.on_decide(cx, s, txn, commit)
            }
            (Addr::Server(s), TwoPlMsg::Ack { txn }) if s.dc == HOME_DC => self.on_ack(s, txn),
            (Addr::Server(s), TwoPlMsg::Wound { txn }) if s.dc == HOME_DC => self.on_wound(cx, txn),
            // A message that does not fit its sender's role is a peer bug or a forged frame: ignore it.
            _ => {}
        }
    }

    /// Everything a message says that the handlers rely on, checked against the topology and this server's
    /// clock before the message touches any state (`snowline_core::validate`). Requests a client may get
    /// wrong by mistake (a commit naming a partition twice) are answered with a refusal instead.
    fn validate(&self, now_ns: u64, from: Addr, msg: &TwoPlMsg) -> Result<(), InvalidInput> {
        let check = Check::new(&self.topology, &self.config, now_ns, from, msg.kind());
        let home_server = || -> Result<ServerId, InvalidInput> {
            let s = check.server()?;
            check.ensure(s.dc == HOME_DC && s != self.id, InvalidKind::Sender, || {
                format!("{s} is not another server of datacenter {HOME_DC}")
            })?;
            Ok(s)
        };
        // What only one concurrency control sends: OCC's reads lock nothing and it never waits (so never
        // wounds); 2PL's locks keep what it read current (so it validates nothing).
        let optimistic = |yes: bool| {
            check.ensure(yes == Self::OPTIMISTIC, InvalidKind::Unexpected, || format!("{} never sends it", C::NAME))
        };
        let versions = |reads: &[(Key, Version)]| reads.iter().try_for_each(|(_, v)| check.version(v, "read version"));
        match msg {
            // The handlers answer a client that names another's transaction with a refusal.
            TwoPlMsg::Read { txn, age, keys, exclusive, .. } => {
                check.client()?;
                limits::check_age(&check, age, txn)?;
                check.request_keys(keys.iter().chain(exclusive))?;
                check.ensure(!Self::OPTIMISTIC || exclusive.is_empty(), InvalidKind::Malformed, || {
                    format!("{}'s reads lock nothing", C::NAME)
                })?;
            }
            TwoPlMsg::Commit { txn, age, participants } => {
                check.client()?;
                limits::check_age(&check, age, txn)?;
                // The writes are the commit request's; the reads (OCC's) were several requests' keys.
                check.request_writes(participants.iter().flat_map(|p| p.writes.iter().map(|(k, v)| (k, v))), [])?;
                let mut reads = participants.iter().flat_map(|p| &p.reads);
                reads.try_for_each(|(k, v)| check.request_keys([k]).and_then(|()| check.version(v, "read version")))?;
            }
            TwoPlMsg::Release { .. } => {
                check.client()?;
                optimistic(false)?;
            }
            TwoPlMsg::Validate { reads, .. } => {
                check.client()?;
                optimistic(true)?;
                reads.iter().try_for_each(|(k, _)| check.request_keys([k]))?;
                versions(reads)?;
            }
            TwoPlMsg::ReadReply { .. } | TwoPlMsg::Released { .. } | TwoPlMsg::Outcome { .. } => {
                return Err(check.fail(InvalidKind::Sender, "only a client is sent this"));
            }
            // A participant votes no on writes of another partition.
            TwoPlMsg::Prepare { age, reads, .. } => {
                home_server()?;
                check.time(age.time, "age")?;
                check.ensure(Self::OPTIMISTIC || reads.is_empty(), InvalidKind::Malformed, || {
                    format!("{} validates no reads", C::NAME)
                })?;
                versions(reads)?;
            }
            TwoPlMsg::Vote { vote, .. } => {
                home_server()?;
                if let Ok(time) = vote {
                    check.time(*time, "proposed commit time")?;
                }
            }
            TwoPlMsg::Decide { commit, .. } => {
                home_server()?;
                if let Some(v) = commit {
                    check.version(v, "commit version")?;
                }
            }
            TwoPlMsg::Ack { .. } => {
                home_server()?;
            }
            TwoPlMsg::Wound { .. } => {
                home_server()?;
                optimistic(false)?;
            }
        }
        Ok(())
    }

    // ---- participant ----

    /// Why a client's read request is refused, if it is: another client's transaction, no key, or a key of
    /// another partition.
    fn check_read<'k>(&self, client: ClientId, txn: TxnId, keys: impl Iterator<Item = &'k Key>) -> Result<(), String> {
        if txn.client != client {
            return Err(format!("transaction {txn:?} is not client {client}'s"));
        }
        let mut keys = keys.peekable();
        if keys.peek().is_none() {
            return Err("a read must name at least one key".into());
        }
        self.misplaced(keys).map_or(Ok(()), Err)
    }

    #[allow(clippy::too_many_arguments)]
    fn on_read(
        &mut self,
        cx: &mut Cx<'_, C>,
        client: ClientId,
        txn: TxnId,
        age: Age,
        keys: Vec<Key>,
        exclusive: Vec<Key>,
        held: bool,
    ) {
        cx.charge((keys.len() + exclusive.len()) as u64);
        let refuse = |cx: &mut Cx<'_, C>, error: OpError| {
            cx.send(client, TwoPlMsg::ReadReply { txn, result: Err(error), blocked_ns: 0 });
        };
        if let Err(reason) = self.check_read(client, txn, keys.iter().chain(&exclusive)) {
            return refuse(cx, OpError::Rejected(reason));
        }
        if let Some(abort) = limits::expired(&self.config, &age, cx.now_ns()) {
            let mut dirty = BTreeSet::new();
            self.abort_here(cx, txn, abort.clone(), false, &mut dirty);
            self.pump(cx, dirty);
            return refuse(cx, OpError::Aborted(abort));
        }
        if Self::UNLOCKED_READS && exclusive.is_empty() && !held && !self.txns.contains_key(&txn) {
            return self.read_unlocked(cx, client, txn, keys);
        }
        match self.txns.get(&txn) {
            Some(t) if t.pending.is_some() => {
                return refuse(cx, OpError::Rejected("a request of this transaction is already waiting here".into()));
            }
            Some(t) if t.prepared.is_some() => {
                return refuse(cx, OpError::Rejected("the transaction is already committing".into()));
            }
            Some(_) => {}
            None => {
                if let Some((abort, _)) = self.aborted.get(&txn) {
                    return refuse(cx, OpError::Aborted(abort.clone()));
                }
                if held {
                    return refuse(
                        cx,
                        OpError::aborted(AbortCause::Timeout, format!("{} no longer holds its locks", self.id)),
                    );
                }
                let born_ns = Self::born(&age, cx.now_ns());
                let local =
                    Local { age, locks: BTreeMap::new(), prepared: None, pending: None, last_seen_ns: 0, born_ns };
                self.txns.insert(txn, local);
            }
        }
        let wanted = Self::read_locks_wanted(&keys, exclusive);
        if let Some(why) = self.over_lock_bound(txn, &wanted) {
            // Released here; its client releases the rest when it learns of it.
            let mut dirty = BTreeSet::new();
            let abort = Abort { cause: AbortCause::User, detail: why.clone() };
            self.abort_here(cx, txn, abort, false, &mut dirty);
            self.pump(cx, dirty);
            return refuse(cx, OpError::Rejected(why));
        }
        let t = self.txns.get_mut(&txn).expect("present");
        t.last_seen_ns = cx.now_ns();
        t.pending =
            Some(Pending { what: Waiting::Read { client, keys }, keys: BTreeSet::new(), arrived_ns: cx.now_ns() });
        self.request_locks(cx, txn, wanted);
    }

    #[allow(clippy::too_many_arguments)]
    fn on_prepare(
        &mut self,
        cx: &mut Cx<'_, C>,
        coordinator: ServerId,
        txn: TxnId,
        age: Age,
        writes: Vec<(Key, Value)>,
        held: bool,
        reads: Vec<(Key, Version)>,
    ) {
        cx.charge(1 + (writes.len() + reads.len()) as u64);
        if Self::OPTIMISTIC {
            return self.prepare_optimistic(cx, coordinator, txn, age, writes, reads);
        }
        let no = |s: &mut Self, cx: &mut Cx<'_, C>, cause: AbortCause, detail: String| {
            s.send_server(cx, coordinator, TwoPlMsg::Vote { txn, vote: Err(Abort { cause, detail }), blocked_ns: 0 });
        };
        if let Some(reason) = self.misplaced(writes.iter().map(|(k, _)| k)) {
            return no(self, cx, AbortCause::Vote, reason);
        }
        match self.txns.get(&txn) {
            Some(t) if t.prepared.is_some() => return, // a duplicate: the vote was sent
            Some(t) if t.pending.is_some() => {
                return no(
                    self,
                    cx,
                    AbortCause::Vote,
                    format!("a read of the transaction is still waiting at {}", self.id),
                );
            }
            Some(_) => {}
            None => {
                if let Some((abort, _)) = self.aborted.get(&txn) {
                    let abort = abort.clone();
                    return no(self, cx, abort.cause, abort.detail);
                }
                if held {
                    return no(self, cx, AbortCause::Timeout, format!("{} no longer holds its locks", self.id));
                }
                let born_ns = Self::born(&age, cx.now_ns());
                let local =
                    Local { age, locks: BTreeMap::new(), prepared: None, pending: None, last_seen_ns: 0, born_ns };
                self.txns.insert(txn, local);
            }
        }
        let wanted: BTreeMap<Key, Mode> = writes.iter().map(|(k, _)| (k.clone(), Mode::Exclusive)).collect();
        if let Some(why) = self.over_lock_bound(txn, &wanted) {
            let mut dirty = BTreeSet::new();
            let abort = Abort { cause: AbortCause::Vote, detail: why.clone() };
            self.abort_here(cx, txn, abort, false, &mut dirty);
            self.pump(cx, dirty);
            return no(self, cx, AbortCause::Vote, why);
        }
        let t = self.txns.get_mut(&txn).expect("present");
        t.last_seen_ns = cx.now_ns();
        t.pending = Some(Pending {
            what: Waiting::Prepare { coordinator, writes },
            keys: BTreeSet::new(),
            arrived_ns: cx.now_ns(),
        });
        self.request_locks(cx, txn, wanted);
    }

    /// Request `wanted` for `txn` (which has a pending request), wounding younger unprepared transactions it
    /// would wait for; the pending request completes when every lock is granted.
    fn request_locks(&mut self, cx: &mut Cx<'_, C>, txn: TxnId, wanted: BTreeMap<Key, Mode>) {
        let mut dirty = BTreeSet::new();
        for (key, mode) in wanted {
            let Some(t) = self.txns.get(&txn) else { return };
            let held = t.locks.get(&key).copied();
            if held >= Some(mode) {
                continue;
            }
            let me = (t.age, txn);
            let upgrade = held.is_some();
            let lock = self.locks.entry(key.clone()).or_default();
            let ahead = if upgrade { 0 } else { lock.queue.len() };
            let blockers: BTreeSet<TxnId> = lock
                .holders
                .iter()
                .map(|(h, m)| (*h, *m))
                .chain(lock.queue.iter().take(ahead).copied())
                .filter(|(b, m)| *b != txn && conflicts(mode, *m))
                .map(|(b, _)| b)
                .collect();
            for b in blockers {
                let Some(bt) = self.txns.get_mut(&b) else { continue };
                if me > (bt.age, b) {
                    continue;
                }
                match &mut bt.prepared {
                    None => self.abort_here(cx, b, wounded(), true, &mut dirty),
                    // Prepared: only its coordinator may still abort it.
                    Some(p) if !p.wound_sent => {
                        p.wound_sent = true;
                        let coordinator = p.coordinator;
                        self.send_server(cx, coordinator, TwoPlMsg::Wound { txn: b });
                    }
                    Some(_) => {}
                }
            }
            let lock = self.locks.entry(key.clone()).or_default();
            if upgrade {
                lock.queue.push_front((txn, mode));
            } else {
                lock.queue.push_back((txn, mode));
            }
            if let Some(p) = self.txns.get_mut(&txn).and_then(|t| t.pending.as_mut()) {
                p.keys.insert(key.clone());
            }
            dirty.insert(key);
        }
        self.pump(cx, dirty);
        let ready = self.txns.get(&txn).and_then(|t| t.pending.as_ref()).is_some_and(|p| p.keys.is_empty());
        if ready {
            self.complete_pending(cx, txn);
        }
    }

    /// Grant, in queue order, the waiters of `keys` compatible with the holders; complete the requests
    /// that have all their locks.
    fn pump(&mut self, cx: &mut Cx<'_, C>, keys: BTreeSet<Key>) {
        let mut granted = Vec::new();
        for key in keys {
            let Some(lock) = self.locks.get_mut(&key) else { continue };
            while let Some(&(w, mode)) = lock.queue.front() {
                if lock.holders.iter().any(|(h, m)| *h != w && conflicts(mode, *m)) {
                    break;
                }
                lock.queue.pop_front();
                let m = lock.holders.entry(w).or_insert(mode);
                *m = (*m).max(mode);
                granted.push((w, key.clone(), mode));
            }
            if lock.holders.is_empty() && lock.queue.is_empty() {
                self.locks.remove(&key);
            }
        }
        for (w, key, mode) in granted {
            let Some(t) = self.txns.get_mut(&w) else { continue };
            let m = t.locks.entry(key.clone()).or_insert(mode);
            *m = (*m).max(mode);
            let done = t.pending.as_mut().is_some_and(|p| {
                p.keys.remove(&key);
                p.keys.is_empty()
            });
            if done {
                self.complete_pending(cx, w);
            }
        }
    }

    /// `txn`'s pending request has all its locks: answer the read, or vote yes.
    fn complete_pending(&mut self, cx: &mut Cx<'_, C>, txn: TxnId) {
        let now = cx.now_ns();
        let Some(pending) = self.txns.get_mut(&txn).and_then(|t| t.pending.take()) else { return };
        let blocked_ns = now.saturating_sub(pending.arrived_ns);
        match pending.what {
            Waiting::Read { client, keys } => {
                let results = keys.into_iter().map(|k| self.read(k)).collect();
                cx.send(client, TwoPlMsg::ReadReply { txn, result: Ok(results), blocked_ns });
                self.end_short_reads(cx, txn);
            }
            Waiting::Prepare { coordinator, writes } => self.vote_yes(cx, txn, coordinator, writes, blocked_ns),
        }
    }

    /// `txn` holds every lock it needs here: it is prepared; vote yes, proposing a commit time above every
    /// version applied here and every decision seen.
    fn vote_yes(
        &mut self,
        cx: &mut Cx<'_, C>,
        txn: TxnId,
        coordinator: ServerId,
        writes: Vec<(Key, Value)>,
        blocked_ns: u64,
    ) {
        let time = cx.now_ns().max(self.clock.saturating_add(1));
        self.clock = time;
        if let Some(t) = self.txns.get_mut(&txn) {
            t.prepared = Some(Prepared { coordinator, writes, wound_sent: false });
        }
        self.send_server(cx, coordinator, TwoPlMsg::Vote { txn, vote: Ok(time), blocked_ns });
    }

    fn read(&self, key: Key) -> ReadResult {
        match self.store.get(&key) {
            Some((value, version)) => {
                ReadResult { key, value: Some(value.clone()), version: *version, versions_skipped: 0 }
            }
            None => ReadResult { key, value: None, version: Version::INITIAL, versions_skipped: 0 },
        }
    }

    /// Drop `txn` here: its locks and queue entries (their keys join `dirty`).
    fn remove(&mut self, txn: TxnId, dirty: &mut BTreeSet<Key>) -> Option<Local> {
        let t = self.txns.remove(&txn)?;
        for key in t.locks.keys() {
            if let Some(lock) = self.locks.get_mut(key) {
                lock.holders.remove(&txn);
            }
            dirty.insert(key.clone());
        }
        if let Some(p) = &t.pending {
            for key in &p.keys {
                if let Some(lock) = self.locks.get_mut(key) {
                    lock.queue.retain(|(w, _)| *w != txn);
                }
                dirty.insert(key.clone());
            }
        }
        Some(t)
    }

    /// Abort `txn` here. With `answer` (a wound or a timeout), its waiting request gets the abort (a read) or
    /// a vote no (a prepare), and its later requests learn the cause.
    fn abort_here(&mut self, cx: &mut Cx<'_, C>, txn: TxnId, abort: Abort, answer: bool, dirty: &mut BTreeSet<Key>) {
        let Some(t) = self.remove(txn, dirty) else { return };
        let now = cx.now_ns();
        if let (true, Some(p)) = (answer, t.pending) {
            let blocked_ns = now.saturating_sub(p.arrived_ns);
            match p.what {
                Waiting::Read { client, .. } => cx.send(
                    client,
                    TwoPlMsg::ReadReply { txn, result: Err(OpError::Aborted(abort.clone())), blocked_ns },
                ),
                Waiting::Prepare { coordinator, .. } => {
                    self.send_server(cx, coordinator, TwoPlMsg::Vote { txn, vote: Err(abort.clone()), blocked_ns })
                }
            }
        }
        if answer {
            self.aborted.insert(txn, (abort, now));
        }
    }

    fn on_release(&mut self, cx: &mut Cx<'_, C>, client: ClientId, txn: TxnId, confirm: bool) {
        if txn.client != client {
            return; // another client's transaction
        }
        let result = match self.txns.get(&txn) {
            Some(t) if t.prepared.is_some() => {
                Err(Abort { cause: AbortCause::Vote, detail: "the transaction is committing".into() })
            }
            Some(_) => {
                let mut dirty = BTreeSet::new();
                let user = Abort { cause: AbortCause::User, detail: "released by its client".into() };
                self.abort_here(cx, txn, user, false, &mut dirty);
                self.pump(cx, dirty);
                Ok(())
            }
            None => Err(self.aborted.get(&txn).map(|(a, _)| a.clone()).unwrap_or_else(|| Abort {
                cause: AbortCause::Timeout,
                detail: format!("{} no longer holds its locks", self.id),
            })),
        };
        if confirm {
            cx.send(client, TwoPlMsg::Released { txn, result });
        }
    }

    fn on_decide(&mut self, cx: &mut Cx<'_, C>, coordinator: ServerId, txn: TxnId, commit: Option<Version>) {
        if let Some(v) = commit {
            self.clock = self.clock.max(v.time);
        }
        let mut dirty = BTreeSet::new();
        match (self.txns.get(&txn).map(|t| t.prepared.is_some()), commit) {
            (Some(true), _) => {
                let t = self.remove(txn, &mut dirty).expect("present");
                if let (Some(version), Some(p)) = (commit, t.prepared) {
                    cx.charge(p.writes.len() as u64);
                    for (key, value) in p.writes {
                        self.store.insert(key, (value, version));
                    }
                }
            }
            // An abort reaching a transaction still preparing here: drop it without voting.
            (Some(false), None) => {
                let abort = Abort { cause: AbortCause::Vote, detail: "aborted by its coordinator".into() };
                self.abort_here(cx, txn, abort, false, &mut dirty);
            }
            // A commit for a transaction that did not vote yes here cannot come from a coordinator; a
            // decision for an unknown transaction is a duplicate or came after a local abort.
            (Some(false), Some(_)) | (None, _) => {}
        }
        self.pump(cx, dirty);
        self.send_server(cx, coordinator, TwoPlMsg::Ack { txn });
    }

    fn sweep(&mut self, cx: &mut Cx<'_, C>) {
        cx.set_timer(SWEEP_EVERY_NS, TwoPlTimer::Sweep);
        let now = cx.now_ns();
        let idle: Vec<TxnId> = self
            .txns
            .iter()
            .filter(|(_, t)| t.prepared.is_none() && now.saturating_sub(t.last_seen_ns) > IDLE_ABORT_NS)
            .map(|(id, _)| *id)
            .collect();
        cx.charge(1 + idle.len() as u64);
        let mut dirty = BTreeSet::new();
        self.sweep_outlived(cx, &mut dirty);
        for txn in idle {
            let abort = Abort {
                cause: AbortCause::Timeout,
                detail: format!(
                    "idle for more than {} s at {} without committing",
                    IDLE_ABORT_NS / 1_000_000_000,
                    self.id
                ),
            };
            self.abort_here(cx, txn, abort, true, &mut dirty);
        }
        self.pump(cx, dirty);
        self.aborted.retain(|_, (_, at)| now.saturating_sub(*at) <= ABORTED_MEMORY_NS);
    }

    // ---- coordinator ----

    fn check_commit(&self, client: ClientId, txn: TxnId, participants: &[Participant]) -> Result<(), String> {
        if txn.client != client {
            return Err(format!("transaction {txn:?} is not client {client}'s"));
        }
        if participants.is_empty() {
            return Err("a commit needs at least one participant".into());
        }
        let mut seen = BTreeSet::new();
        for p in participants {
            if p.partition >= self.topology.partitions {
                return Err(format!("there is no partition {}", p.partition));
            }
            if !seen.insert(p.partition) {
                return Err(format!("partition {} is named twice", p.partition));
            }
            let keys = p.writes.iter().map(|(k, _)| k).chain(p.reads.iter().map(|(k, _)| k));
            if let Some(k) = keys.into_iter().find(|k| self.topology.partition_of(k) != p.partition) {
                return Err(format!("key {k:?} does not live on partition {}", p.partition));
            }
        }
        Ok(())
    }

    fn on_commit(
        &mut self,
        cx: &mut Cx<'_, C>,
        client: ClientId,
        txn: TxnId,
        age: Age,
        participants: Vec<Participant>,
    ) {
        cx.charge(participants.len() as u64);
        if let Err(reason) = self.check_commit(client, txn, &participants) {
            cx.send(client, TwoPlMsg::Outcome { txn, result: Err(OpError::Rejected(reason)) });
            return;
        }
        if self.coordinated.contains_key(&txn) {
            return;
        }
        // Its participants' sweeps release what it holds: it has outlived its lifetime there too.
        if let Some(abort) = limits::expired(&self.config, &age, cx.now_ns()) {
            cx.send(client, TwoPlMsg::Outcome { txn, result: Err(OpError::Aborted(abort)) });
            return;
        }
        let votes = participants.iter().map(|p| (p.partition, None)).collect();
        self.coordinated
            .insert(txn, Coordinated { client, votes, blocked_ns: 0, decided: false, unacked: BTreeSet::new() });
        for p in participants {
            let prepare = TwoPlMsg::Prepare { txn, age, writes: p.writes, held: p.held, reads: p.reads };
            self.send_server(cx, home(p.partition), prepare);
        }
    }

    fn on_vote(&mut self, cx: &mut Cx<'_, C>, from: ServerId, txn: TxnId, vote: Result<u64, Abort>, blocked_ns: u64) {
        let Some(c) = self.coordinated.get_mut(&txn) else { return };
        if c.decided {
            return;
        }
        let Some(slot) = c.votes.get_mut(&from.partition) else { return };
        if slot.is_some() {
            return;
        }
        c.blocked_ns = c.blocked_ns.saturating_add(blocked_ns);
        match vote {
            Err(abort) => self.decide(cx, txn, Err(abort)),
            Ok(time) => {
                *slot = Some(time);
                if c.votes.values().all(Option::is_some) {
                    let time = c.votes.values().flatten().copied().max().unwrap_or(time);
                    self.decide(cx, txn, Ok(Version { time, dc: HOME_DC }));
                }
            }
        }
    }

    fn decide(&mut self, cx: &mut Cx<'_, C>, txn: TxnId, decision: Result<Version, Abort>) {
        let Some(c) = self.coordinated.get_mut(&txn) else { return };
        c.decided = true;
        c.unacked = c.votes.keys().copied().collect();
        let metrics = OpMetrics { blocked_ns: c.blocked_ns, ..Default::default() };
        let commit = decision.as_ref().ok().copied();
        let result = match decision {
            Ok(version) => Ok(Reply { commit: Some(version), metrics, ..Default::default() }),
            Err(abort) => Err(OpError::Aborted(abort)),
        };
        cx.send(c.client, TwoPlMsg::Outcome { txn, result });
        for p in c.unacked.clone() {
            self.send_server(cx, home(p), TwoPlMsg::Decide { txn, commit });
        }
    }

    /// A participant asks to abort a transaction it holds prepared, for an older one waiting for it.
    fn on_wound(&mut self, cx: &mut Cx<'_, C>, txn: TxnId) {
        if self.coordinated.get(&txn).is_some_and(|c| !c.decided) {
            self.decide(cx, txn, Err(wounded()));
        }
    }

    fn on_ack(&mut self, from: ServerId, txn: TxnId) {
        let Some(c) = self.coordinated.get_mut(&txn) else { return };
        if c.decided {
            c.unacked.remove(&from.partition);
            if c.unacked.is_empty() {
                self.coordinated.remove(&txn);
            }
        }
    }
}

impl<C: ConcurrencyControl> ServerNode<SingleCopy<C>> for TwoPlServer<C> {
    fn on_start(&mut self, cx: &mut Cx<'_, C>) {
        // OCC holds nothing for a transaction before it is prepared: nothing can idle.
        if self.id.dc == HOME_DC && !Self::OPTIMISTIC {
            cx.set_timer(SWEEP_EVERY_NS, TwoPlTimer::Sweep);
        }
    }

    fn on_message(&mut self, cx: &mut Cx<'_, C>, from: Addr, msg: TwoPlMsg) -> Result<(), InvalidInput> {
        cx.charge(1);
        self.validate(cx.now_ns(), from, &msg)?;
        self.handle(cx, from, msg);
        self.drain_loopback(cx);
        Ok(())
    }

    fn on_timer(&mut self, cx: &mut Cx<'_, C>, timer: TwoPlTimer) {
        match timer {
            TwoPlTimer::Sweep => self.sweep(cx),
        }
        self.drain_loopback(cx);
    }

    fn stored_versions(&self) -> usize {
        self.store.len()
    }
}

// ---------------------------------------------------------------------------------------------------------
// Client
// ---------------------------------------------------------------------------------------------------------

/// The locks a wave of stored-procedure pieces takes: shared on the keys it reads, exclusive on the keys it
/// writes (declared upfront, so no upgrade within the wave), each key once.
fn wave_locks(pieces: &[Piece]) -> (Vec<Key>, Vec<Key>) {
    let (mut reads, mut exclusive) = (Vec::new(), Vec::new());
    let (mut seen_r, mut seen_w) = (BTreeSet::new(), BTreeSet::new());
    for piece in pieces {
        reads.extend(piece.reads.iter().filter(|k| seen_r.insert((*k).clone())).cloned());
        exclusive.extend(piece.writes.iter().filter(|k| seen_w.insert((*k).clone())).cloned());
    }
    (reads, exclusive)
}

/// What a client-side transaction is for.
enum Purpose {
    /// Begin / Read / Commit / Abort from the application.
    Interactive,
    /// A ROT: its remaining rounds and the reads so far.
    ReadOnly { rounds: VecDeque<Vec<Key>>, reads: Vec<ReadResult> },
    /// A Put or an Update.
    Blind,
    /// A stored procedure; `reads` and `writes` are filled once it has run.
    Call { call: procedure::Call, wave: Range<usize>, reads: Vec<ReadResult>, writes: Vec<(Key, Value)> },
}

/// One round of reads in flight.
struct Round {
    keys: Vec<Key>,
    results: Vec<Option<ReadResult>>,
    /// Per partition asked, the positions of its keys in `keys`.
    slots: BTreeMap<PartitionId, Vec<usize>>,
    waiting: BTreeSet<PartitionId>,
}

enum Step {
    /// An interactive transaction between operations.
    Idle,
    Reading {
        op: OpId,
        round: Round,
    },
    Committing {
        op: OpId,
    },
    /// A read-only commit waiting for partitions to confirm they held its locks until the release.
    Finishing {
        op: OpId,
        waiting: BTreeSet<PartitionId>,
        error: Option<OpError>,
    },
}

/// The session's open transaction.
struct Open {
    id: TxnId,
    age: Age,
    purpose: Purpose,
    /// Partitions sent a Read (they may hold locks).
    contacted: BTreeSet<PartitionId>,
    /// The partition whose answer completed the last read round.
    last_answer: Option<PartitionId>,
    /// What the transaction read, with the first version read of each key (OCC validates it).
    read_set: BTreeMap<Key, Version>,
    /// Read requests answered (one, on one partition: OCC's read-only commit needs no validation).
    read_messages: u32,
    step: Step,
    /// The current operation's costs.
    metrics: OpMetrics,
}

/// A client session: runs one transaction at a time.
pub struct TwoPlClient<C = Pessimistic> {
    id: ClientId,
    topology: Topology,
    config: ProtocolConfig,
    next_seq: u64,
    txn: Option<Open>,
    /// The age of the session's last transaction, when it aborted with a non-user cause (the next one reuses
    /// it).
    retry_age: Option<u64>,
    _control: PhantomData<C>,
}

impl<C: ConcurrencyControl> TwoPlClient<C> {
    pub fn new(id: ClientId, topology: Topology, config: ProtocolConfig) -> Self {
        Self { id, topology, config, next_seq: 0, txn: None, retry_age: None, _control: PhantomData }
    }

    const OPTIMISTIC: bool = matches!(C::CONTROL, Control::Validation);

    pub fn id(&self) -> ClientId {
        self.id
    }

    /// The open transaction's id and age.
    pub fn open_transaction(&self) -> Option<(TxnId, Age)> {
        self.txn.as_ref().map(|t| (t.id, t.age))
    }

    fn open(&mut self, cx: &mut Cx<'_, C>, purpose: Purpose) {
        let id = TxnId { client: self.id, seq: self.next_seq };
        self.next_seq += 1;
        let age =
            Age { time: limits::next_age_time(&self.config, self.retry_age.take(), cx.now_ns()), client: self.id };
        self.txn = Some(Open {
            id,
            age,
            purpose,
            contacted: BTreeSet::new(),
            last_answer: None,
            read_set: BTreeMap::new(),
            read_messages: 0,
            step: Step::Idle,
            metrics: OpMetrics::default(),
        });
    }

    /// Remember how a transaction ended, for the next one's age.
    fn ended(&mut self, t: &Open, result: Result<(), &OpError>) {
        self.retry_age = match result.err().and_then(OpError::abort_cause) {
            Some(cause) if cause != AbortCause::User => Some(t.age.time),
            _ => None,
        };
    }

    fn release(&self, cx: &mut Cx<'_, C>, t: &Open, except: Option<PartitionId>) {
        if Self::OPTIMISTIC {
            return; // OCC's reads hold nothing
        }
        for p in &t.contacted {
            if Some(*p) != except {
                cx.send(home(*p), TwoPlMsg::Release { txn: t.id, confirm: false });
            }
        }
    }

    /// Abort the open transaction, before another request, if its age has outlived the transaction lifetime
    /// (participants would refuse the request: `limits`).
    fn give_up_outlived(&mut self, cx: &mut Cx<'_, C>, op: OpId) -> bool {
        let now = cx.now_ns();
        let Some(why) = self.txn.as_ref().and_then(|t| limits::outlived(&self.config, &t.age, now)) else {
            return false;
        };
        let t = self.txn.take().expect("open");
        self.fail(cx, t, op, OpError::aborted(AbortCause::Timeout, why), None);
        true
    }

    /// End `t` with an error: release its locks and complete `op`.
    fn fail(&mut self, cx: &mut Cx<'_, C>, t: Open, op: OpId, error: OpError, except: Option<PartitionId>) {
        self.release(cx, &t, except);
        self.ended(&t, Err(&error));
        cx.complete(op, Err(error));
    }

    /// Give up on an operation the runtime no longer waits for (see the module docs).
    fn abandon(&mut self, cx: &mut Cx<'_, C>) {
        let Some(t) = self.txn.take_if(|t| !matches!(t.step, Step::Idle)) else { return };
        let gone = || OpError::Unknown("abandoned: the session sent another request before it completed".into());
        match t.step {
            Step::Reading { op, .. } => {
                self.release(cx, &t, None);
                cx.complete(op, Err(gone()));
            }
            Step::Committing { op } | Step::Finishing { op, .. } => cx.complete(op, Err(gone())),
            Step::Idle => {}
        }
        self.retry_age = None;
    }

    /// Send one round of lock-and-read requests: `keys` read under shared locks, `exclusive` locked
    /// exclusively (read too if also in `keys`). OCC reads without locks: it sends `keys` only. A round
    /// with nothing to send (OCC: a stored procedure's wave that only writes) is done at once.
    fn send_round(&mut self, cx: &mut Cx<'_, C>, op: OpId, keys: Vec<Key>, exclusive: Vec<Key>) {
        if self.give_up_outlived(cx, op) {
            return;
        }
        let Some(t) = self.txn.as_mut() else { return };
        let exclusive = if Self::OPTIMISTIC { Vec::new() } else { exclusive };
        let mut per: BTreeMap<PartitionId, (Vec<Key>, Vec<Key>)> = BTreeMap::new();
        let mut slots: BTreeMap<PartitionId, Vec<usize>> = BTreeMap::new();
        for (i, k) in keys.iter().enumerate() {
            let p = self.topology.partition_of(k);
            per.entry(p).or_default().0.push(k.clone());
            slots.entry(p).or_default().push(i);
        }
        for k in exclusive {
            per.entry(self.topology.partition_of(&k)).or_default().1.push(k);
        }
        let waiting: BTreeSet<PartitionId> = per.keys().copied().collect();
        let nothing = waiting.is_empty();
        t.last_answer = None;
        for (p, (keys, exclusive)) in per {
            let held = t.contacted.contains(&p);
            if Self::holds_after(&exclusive) {
                t.contacted.insert(p);
            }
            cx.send(home(p), TwoPlMsg::Read { txn: t.id, age: t.age, keys, exclusive, held });
        }
        t.metrics.rounds += u32::from(!nothing);
        let results = vec![None; keys.len()];
        t.step = Step::Reading { op, round: Round { keys, results, slots, waiting } };
        if nothing {
            self.round_done(cx, op);
        }
    }

    fn on_read_reply(
        &mut self,
        cx: &mut Cx<'_, C>,
        from: ServerId,
        txn: TxnId,
        result: Result<Vec<ReadResult>, OpError>,
        blocked_ns: u64,
    ) {
        let Some(t) = self.txn.as_mut() else { return };
        let Step::Reading { op, round } = &mut t.step else { return };
        if t.id != txn || from.dc != HOME_DC || !round.waiting.contains(&from.partition) {
            return;
        }
        let op = *op;
        let error = match result {
            Ok(results) => {
                let slots = round.slots.get(&from.partition).map(Vec::as_slice).unwrap_or_default();
                let matches =
                    results.len() == slots.len() && slots.iter().zip(&results).all(|(i, r)| round.keys[*i] == r.key);
                if matches {
                    t.metrics.blocked_ns += blocked_ns;
                    t.metrics.versions_returned += results.len() as u32;
                    t.read_messages += 1;
                    for r in &results {
                        t.read_set.entry(r.key.clone()).or_insert(r.version);
                    }
                    for (i, r) in slots.iter().copied().zip(results) {
                        round.results[i] = Some(r);
                    }
                    round.waiting.remove(&from.partition);
                    if round.waiting.is_empty() {
                        t.last_answer = Some(from.partition);
                        self.round_done(cx, op);
                    }
                    return;
                }
                OpError::Rejected(format!("{from} answered keys other than those asked"))
            }
            Err(e) => e,
        };
        let t = self.txn.take().expect("open");
        self.fail(cx, t, op, error, Some(from.partition));
    }

    /// Every partition of the round answered.
    fn round_done(&mut self, cx: &mut Cx<'_, C>, op: OpId) {
        let Some(mut t) = self.txn.take() else { return };
        let Step::Reading { round, .. } = std::mem::replace(&mut t.step, Step::Idle) else { return };
        let results: Vec<ReadResult> = round.results.into_iter().flatten().collect();
        match &mut t.purpose {
            Purpose::Interactive => {
                let metrics = std::mem::take(&mut t.metrics);
                self.txn = Some(t);
                cx.complete(op, Ok(Reply { reads: results, metrics, ..Default::default() }));
            }
            Purpose::ReadOnly { rounds, reads } => {
                reads.extend(results);
                match rounds.pop_front() {
                    Some(next) => {
                        self.txn = Some(t);
                        self.send_round(cx, op, next, Vec::new());
                    }
                    None => self.commit(cx, op, t, Vec::new()),
                }
            }
            Purpose::Call { call, wave, reads, writes } => {
                let by_key: BTreeMap<Key, ReadResult> = results.into_iter().map(|r| (r.key.clone(), r)).collect();
                match Self::run_wave(call, wave, &by_key, reads, writes) {
                    Ok(None) => {
                        let writes = writes.clone();
                        self.commit(cx, op, t, writes)
                    }
                    Ok(Some((shared, exclusive))) => {
                        self.txn = Some(t);
                        self.send_round(cx, op, shared, exclusive);
                    }
                    Err(e) => {
                        let error = OpError::aborted(e.cause(), e.to_string());
                        self.fail(cx, t, op, error, None);
                    }
                }
            }
            Purpose::Blind => self.txn = Some(t),
        }
    }

    /// Run a stored procedure's current wave on the values its round locked and read (or the call's own
    /// earlier writes), then plan the next: the keys to lock for it, or `None` when the plan is complete.
    #[allow(clippy::type_complexity)]
    fn run_wave(
        call: &mut procedure::Call,
        wave: &mut Range<usize>,
        by_key: &BTreeMap<Key, ReadResult>,
        reads: &mut Vec<ReadResult>,
        writes: &mut Vec<(Key, Value)>,
    ) -> Result<Option<(Vec<Key>, Vec<Key>)>, procedure::PieceError> {
        for i in wave.clone() {
            let keys = call.pieces[i].reads.clone();
            let mut values = Vec::with_capacity(keys.len());
            for key in keys {
                let own = writes.iter().rev().find(|(k, _)| *k == key).map(|(_, v)| v.clone());
                let read = by_key.get(&key);
                // A read of the call's own earlier write has no committed version yet.
                let (value, version) = match own {
                    Some(v) => (Some(v), Version::INITIAL),
                    None => (read.and_then(|r| r.value.clone()), read.map_or(Version::INITIAL, |r| r.version)),
                };
                values.push(value.clone());
                reads.push(ReadResult { key, value, version, versions_skipped: 0 });
            }
            let out = call.run(i, &values)?;
            writes.extend(call.pieces[i].writes.iter().cloned().zip(out));
        }
        *wave = call.next_wave()?;
        Ok(if wave.start == wave.end { None } else { Some(wave_locks(&call.pieces[wave.clone()])) })
    }

    /// The reply of a finished transaction: the current operation's metrics, plus what a ROT or a stored
    /// procedure read and wrote.
    fn reply(t: &Open, commit: Option<Version>) -> Reply {
        let mut reply = Reply { commit, metrics: t.metrics.clone(), ..Default::default() };
        match &t.purpose {
            Purpose::ReadOnly { reads, .. } => reply.reads = reads.clone(),
            Purpose::Call { reads, writes, .. } => {
                reply.reads = reads.clone();
                reply.writes = writes.clone();
            }
            Purpose::Interactive | Purpose::Blind => {}
        }
        reply
    }

    /// Commit `t` with `writes`: a read-only transaction finishes at the client (2PL releases its locks, OCC
    /// validates its reads unless one request read them all); any other goes to its coordinator.
    fn commit(&mut self, cx: &mut Cx<'_, C>, op: OpId, mut t: Open, writes: Vec<(Key, Value)>) {
        // OCC's participants validate what the transaction read on them.
        let mut reads: BTreeMap<PartitionId, Vec<(Key, Version)>> = BTreeMap::new();
        if Self::OPTIMISTIC {
            for (k, v) in &t.read_set {
                reads.entry(self.topology.partition_of(k)).or_default().push((k.clone(), *v));
            }
        }
        let held = !Self::OPTIMISTIC;
        let mut parts: BTreeMap<PartitionId, Participant> = t
            .contacted
            .iter()
            .map(|p| {
                (
                    *p,
                    Participant { partition: *p, writes: Vec::new(), held, reads: reads.remove(p).unwrap_or_default() },
                )
            })
            .collect();
        for (k, v) in writes {
            let p = self.topology.partition_of(&k);
            let fresh = Participant { partition: p, writes: Vec::new(), held: false, reads: Vec::new() };
            parts.entry(p).or_insert(fresh).writes.push((k, v));
        }
        if parts.values().all(|p| p.writes.is_empty()) {
            let waiting: BTreeSet<PartitionId> = if Self::OPTIMISTIC {
                // Read-only under OCC. One request read everything (one partition, one round): that read was
                // atomic and none of its keys was being committed (such a read aborts), so the transaction
                // takes effect at it. Otherwise every partition read confirms that its keys still have the
                // versions read and no prepared transaction writes them; every read came before every
                // confirmation, so all the reads were current together in between (`occ`'s module docs).
                if t.read_messages <= 1 {
                    BTreeSet::new()
                } else {
                    for p in parts.into_values() {
                        cx.send(home(p.partition), TwoPlMsg::Validate { txn: t.id, reads: p.reads });
                    }
                    t.contacted.clone()
                }
            } else if !Self::RELEASES_READS {
                // Read-only under lwsr or lwnr: its reads hold nothing now; a stored procedure's exclusive
                // locks go.
                for p in &t.contacted {
                    cx.send(home(*p), TwoPlMsg::Release { txn: t.id, confirm: false });
                }
                BTreeSet::new()
            } else {
                // Read-only under 2PL. The partition that answered last held every lock of the transaction when
                // it answered; each other one confirms that it still held them all when the release arrived,
                // which was later. (Without the confirmation a transaction wounded at one partition while its
                // read at another was in flight would return reads that no single moment saw.)
                let waiting: BTreeSet<PartitionId> =
                    t.contacted.iter().copied().filter(|p| Some(*p) != t.last_answer).collect();
                for p in &t.contacted {
                    cx.send(home(*p), TwoPlMsg::Release { txn: t.id, confirm: waiting.contains(p) });
                }
                waiting
            };
            if waiting.is_empty() {
                self.ended(&t, Ok(()));
                cx.complete(op, Ok(Self::reply(&t, None)));
            } else {
                t.metrics.rounds += 1;
                t.step = Step::Finishing { op, waiting, error: None };
                self.txn = Some(t);
            }
            return;
        }
        if let Some(why) = limits::outlived(&self.config, &t.age, cx.now_ns()) {
            return self.fail(cx, t, op, OpError::aborted(AbortCause::Timeout, why), None);
        }
        let coordinator = home(*parts.keys().next().expect("a participant"));
        cx.send(coordinator, TwoPlMsg::Commit { txn: t.id, age: t.age, participants: parts.into_values().collect() });
        t.metrics.rounds += 1;
        t.step = Step::Committing { op };
        self.txn = Some(t);
    }

    fn on_released(&mut self, cx: &mut Cx<'_, C>, from: ServerId, txn: TxnId, result: Result<(), Abort>) {
        let Some(t) = self.txn.as_mut() else { return };
        let Step::Finishing { waiting, error, .. } = &mut t.step else { return };
        if t.id != txn || from.dc != HOME_DC || !waiting.remove(&from.partition) {
            return;
        }
        if let Err(abort) = result {
            error.get_or_insert(OpError::Aborted(abort));
        }
        if !waiting.is_empty() {
            return;
        }
        let t = self.txn.take().expect("open");
        let Step::Finishing { op, error, .. } = &t.step else { return };
        let op = *op;
        match error.clone() {
            // Every partition has released already.
            Some(e) => {
                self.ended(&t, Err(&e));
                cx.complete(op, Err(e));
            }
            None => {
                self.ended(&t, Ok(()));
                cx.complete(op, Ok(Self::reply(&t, None)));
            }
        }
    }

    fn on_outcome(&mut self, cx: &mut Cx<'_, C>, txn: TxnId, result: Result<Reply, OpError>) {
        let Some(t) = self.txn.take_if(|t| t.id == txn && matches!(t.step, Step::Committing { .. })) else { return };
        let Step::Committing { op } = t.step else { return };
        match result {
            Ok(outcome) => {
                let mut reply = Self::reply(&t, outcome.commit);
                reply.metrics.blocked_ns += outcome.metrics.blocked_ns;
                self.ended(&t, Ok(()));
                cx.complete(op, Ok(reply));
            }
            // Refused before any prepare: the locks are still held.
            Err(e @ OpError::Rejected(_)) => self.fail(cx, t, op, e, None),
            // Decided: the coordinator's decision releases every participant.
            Err(e) => {
                self.ended(&t, Err(&e));
                cx.complete(op, Err(e));
            }
        }
    }
}

// Session tokens: none needed (the default). Each key has one copy and the claimed levels (`strict-ser`, the
// baselines' `rc`) promise nothing a session carries; `retry_age` only helps a retry win wound-wait.
impl<C: ConcurrencyControl> ClientNode<SingleCopy<C>> for TwoPlClient<C> {
    fn on_request(&mut self, cx: &mut Cx<'_, C>, op: OpId, request: Request) {
        if let Err(reason) = self.config.check_request(&request) {
            cx.complete(op, Err(OpError::Rejected(reason)));
            return;
        }
        self.abandon(cx);
        let reject = |cx: &mut Cx<'_, C>, why: &str| cx.complete(op, Err(OpError::Rejected(why.into())));
        const NONE_OPEN: &str = "no open transaction in this session: send Begin first";
        let interactive = matches!(&self.txn, Some(t) if matches!(t.purpose, Purpose::Interactive));
        match request {
            Request::Begin if self.txn.is_some() => {
                reject(cx, "a transaction is already open in this session: commit or abort it first")
            }
            Request::Begin => {
                self.open(cx, Purpose::Interactive);
                cx.complete(op, Ok(Reply::default()));
            }
            Request::Read { .. } | Request::Commit { .. } | Request::Abort if !interactive => reject(cx, NONE_OPEN),
            Request::Read { keys } => {
                if let Some(t) = self.txn.as_mut() {
                    t.metrics = OpMetrics::default();
                }
                self.send_round(cx, op, keys, Vec::new());
            }
            Request::Commit { writes } => {
                let mut t = self.txn.take().expect("an interactive transaction is open");
                t.metrics = OpMetrics::default();
                self.commit(cx, op, t, writes);
            }
            Request::Abort => {
                let t = self.txn.take().expect("an interactive transaction is open");
                let error = OpError::aborted(AbortCause::User, "aborted by the application");
                self.fail(cx, t, op, error, None);
            }
            _ if self.txn.is_some() => {
                reject(cx, "a transaction is open in this session: commit or abort it before other operations")
            }
            Request::Rot { keys } => {
                self.open(cx, Purpose::ReadOnly { rounds: VecDeque::new(), reads: Vec::new() });
                self.send_round(cx, op, keys, Vec::new());
            }
            Request::RotRounds { rounds } => {
                let mut rounds = VecDeque::from(rounds);
                let Some(first) = rounds.pop_front() else { return reject(cx, "no rounds") };
                self.open(cx, Purpose::ReadOnly { rounds, reads: Vec::new() });
                self.send_round(cx, op, first, Vec::new());
            }
            Request::Put { key, value } => {
                self.open(cx, Purpose::Blind);
                let t = self.txn.take().expect("just opened");
                self.commit(cx, op, t, vec![(key, value)]);
            }
            Request::Update { writes } => {
                self.open(cx, Purpose::Blind);
                let t = self.txn.take().expect("just opened");
                self.commit(cx, op, t, writes);
            }
            Request::Call { procedure: name, args } => {
                let call = match procedure::Call::start(&name, args) {
                    Ok(call) => call,
                    Err(e) => return reject(cx, &e),
                };
                let (reads, exclusive) = wave_locks(&call.pieces);
                let wave = 0..call.pieces.len();
                self.open(cx, Purpose::Call { call, wave, reads: Vec::new(), writes: Vec::new() });
                self.send_round(cx, op, reads, exclusive);
            }
        }
    }

    fn on_message(&mut self, cx: &mut Cx<'_, C>, from: Addr, msg: TwoPlMsg) {
        match (from, msg) {
            (Addr::Server(s), TwoPlMsg::ReadReply { txn, result, blocked_ns }) => {
                self.on_read_reply(cx, s, txn, result, blocked_ns)
            }
            (Addr::Server(_), TwoPlMsg::Outcome { txn, result }) => self.on_outcome(cx, txn, result),
            (Addr::Server(s), TwoPlMsg::Released { txn, result }) => self.on_released(cx, s, txn, result),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests;
