//! Cure and its minimal-delay variants AV, OP and CV (Tomsic, Bravo, Shapiro, Middleware 2018, §4,
//! Algorithms 1–3). The paper presents the four as one skeleton that branches on `protocol`; so does this
//! module ([`Variant`]), so each protocol is exactly the paper's branch and nothing is copied.
//!
//! # Roles and messages
//!
//! - The **client node** sends each operation (`Begin`, with its session state) to a transaction coordinator
//!   (TC) and waits for `Done`. The paper: "the server that receives a new transaction starts a new TC
//!   process" (§4.2.1). Choice (the paper is silent on which server): the partition server of the
//!   operation's first key in the client's own datacenter, so a single-key operation costs one client round
//!   trip.
//! - The **TC** (inside a partition server) assigns the snapshot `ss_T` and dependency vector `dep_T`
//!   (Alg. 1 lines 30–35), sends `Read` to each partition in parallel (lines 1–13; under OP it merges the
//!   commit vectors read into `dep_T`, lines 10–12), and for updates runs presumed-commit two-phase commit
//!   (§4.1, lines 18–28): `ct_T = dep_T[n] + 1`, `Prepare` to each updated partition, `Prepared{time}` back,
//!   the client is answered as soon as every participant has prepared, `ct = max(times)`, then
//!   `Commit{ct}`. A single-partition update collapses prepare and commit into `CommitSingle` (§4.2.1). A
//!   TC's own partition is called in place, without a message.
//! - The **partition** answers reads with the newest version satisfying COND (Alg. 2 lines 1–6, 17–20),
//!   keeps prepared updates invisible until `Commit` (lines 7–16), and replicates committed updates to its
//!   siblings in the other datacenters.
//! - **Stabilisation** (Alg. 3; Cure, AV, OP): every `stabilisation_interval_ms` a partition computes
//!   `stable_n` (just below its oldest prepared time, else its clock), sends its vector `vec_p` to the other
//!   partitions of its datacenter (`Stable`), and sends its committed updates with `ct ≤ stable_n`, in `ct`
//!   order, to its siblings (`Updates`). The stable vector `SV` is the entry-wise minimum of the vectors of
//!   all partitions of the datacenter.
//!
//! # The four variants
//!
//! | | snapshot `ss_T` | COND (which version a read returns) | blocks |
//! |---|---|---|---|
//! | Cure | `SV`, local entry raised to the TC's physical clock | newest with `cv ≤ ss_T` | until the partition's clock passes `ss_T[n]`, no transaction prepared at or before `ss_T[n]`, and remote updates up to `ss_T` applied |
//! | AV | `SV` | newest with `cv ≤ ss_T` (Stable Freshness) | never |
//! | OP | `SV` | newest with `dep ≤ ss_T` (a compatible version, Def. 5; Concurrent Freshness) | never |
//! | CV | none | the latest committed version (Latest Freshness) | never |
//!
//! # Choices written down
//!
//! - **Session guarantees** (Appendix A). The client sends its latest snapshot `ss` and dependency vector
//!   with every operation; the TC uses `max(SV, client ss)` (same datacenter: "updates its SV to ss
//!   immediately") and `dep_T = max(ss_T, client dep)`, so a client's later updates are ordered after its
//!   earlier ones. Under AV and OP the client caches its own unstable writes and returns a cached version
//!   when it is fresher than the one read (read your writes); `Done` carries the TC's `SV`, which the client
//!   merges into its `ss`, and each operation it starts drops the cached writes with `cv ≤ ss` (its
//!   snapshot includes them). Not on `Done`: after a timeout the client may start an operation while an
//!   abandoned one is still under way, and the late `Done` of the abandoned one must not take from the
//!   newer one, snapshotted earlier, the cached writes it needs. Cure needs no cache: its snapshot includes the client's own
//!   commits, and its reads wait for them.
//! - **Session tokens** (`ClientNode::save_session`): the session state above (`dep`, `ss`, OP's
//!   `observed`), AV and OP's cached own writes not yet covered by `ss` (up to
//!   `components::session::MAX_CACHED_BYTES` of keys and values; a write past that travels as a vector in
//!   `observed` instead), and the datacenter it was saved in. Resuming merges entry-wise. Cure resumes in any
//!   datacenter as is: its reads wait until remote updates up to the snapshot are applied. AV and OP read
//!   without waiting, and a snapshot `ss` of another datacenter may hold versions not applied here yet: there
//!   the whole saved past (`ss`, `dep`, `observed`) becomes `observed`, `ss` starts from this datacenter's
//!   stable vector, and the TC parks the session's read-only transactions until its stable vector covers
//!   `observed` (OP's catch-up rule, applied by AV to such a session only; an AV session that was never
//!   resumed elsewhere has a zero `observed` and never waits). CV carries `dep` (commit-time order of the
//!   session's writes); it claims no session guarantee.
//! - **CV's commit times.** The paper gives CV none (Alg. 1 line 25, Alg. 2 lines 8–11). Replicas must still
//!   converge when two datacenters write a key concurrently, so CV keeps the same timestamps and a replica
//!   keeps a remote update only if its `(ct, dc, value)` is greater than what it stores (last writer wins).
//!   CV makes remote updates "visible as they arrive" (§4.2.2): a partition sends `Replicate` to its
//!   siblings as soon as it commits, without stabilisation. Versions of one key from different datacenters
//!   are likewise ordered last-writer-wins by `(ct, dc, value)` under Cure, AV and OP (Antidote's LWW
//!   registers, §5.2).
//! - **Commit times across datacenters.** Alg. 1 line 19 takes `ct_T = dep_T[n] + 1`; snowline takes one
//!   more than the largest entry of `dep_T`, so that a write causally after a version from another
//!   datacenter also wins last-writer-wins against it even when that datacenter's clock runs ahead.
//! - **Clocks.** Prepare times and single-partition commit times are hybrid-logical-clock ticks
//!   (`max(physical, last + 1)`), so a partition's times are unique and `stable_n` can be a tick that every
//!   later prepare exceeds. Cure's snapshot uses the TC's physical clock, as Cure does.
//! - **Replication batching.** One `Updates` message per stabilisation round carries the updates with
//!   `ct ≤ stable_n` in `ct` order and `stable_n` itself: Alg. 3 lines 7–10 (updates, else heartbeat)
//!   folded into one message that always advances the receiver's `vec_p[j]`. It needs FIFO links, which
//!   Cure, AV and OP declare; CV does not.
//! - **Idle back-off.** Alg. 3 runs every interval; here a round that finds no work (no request, commit,
//!   prepared transaction, pending update or waiting read since the last) doubles the period, up to
//!   `idle_backoff_ms`, and news pulls the next round in (`components::pacer`). `Stable` and `Updates` carry
//!   a `busy` flag so peers and siblings keep the base period while one partition works; a partition does not
//!   pass on a flag it received, so flags do not echo once the work stops.
//! - **Version garbage collection** (`gc_retain_ms`, every `gc_interval_ms`): the paper's prototype
//!   truncated version lists at 50 to 20. Here a partition keeps, per key, the newest version with
//!   `cv ≤ horizon` (entry-wise) and everything newer, where the horizon is the smallest stable vector of the
//!   datacenter as it stood `gc_retain_ms` ago: every snapshot at or above it reads exactly what it would
//!   have read without collection, and every transaction younger than `gc_retain_ms` has such a snapshot. A
//!   read whose snapshot is below the horizon (a transaction older than that) is refused with a clear error
//!   rather than answered wrongly.

use crate::components::{Pacer, session};
use serde::{Deserialize, Serialize};
use snowline_core::frames;
use snowline_core::{
    Addr, Check, ClientId, ClientNode, Ctx, DcId, Hlc, InvalidInput, InvalidKind, Key, LinkAssumptions, Message,
    MvStore, OpError, OpId, OpMetrics, PartitionId, Protocol, ProtocolConfig, ReadResult, Reply, ReplyNote, Request,
    ServerId, ServerNode, StoredVersion, Topology, Value, VectorClock, Version,
};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::marker::PhantomData;

const MS: u64 = 1_000_000;

/// Where the algorithms branch on `protocol` in the paper's pseudocode.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Variant {
    /// Transactional causal consistency; blocks on clock catch-up and on prepared transactions.
    Cure,
    /// Atomic Visibility, Minimal Delay, Stable Freshness.
    Av,
    /// Order-Preserving Visibility, Minimal Delay, Concurrent Freshness.
    Op,
    /// Committed Visibility, Minimal Delay, Latest Freshness.
    Cv,
}

impl Variant {
    /// Cure, AV and OP keep versions with vectors and run the stabilisation protocol; CV keeps one version.
    fn multi_version(self) -> bool {
        self != Variant::Cv
    }

    /// AV and OP read from a stable snapshot without blocking, so their clients cache their own writes.
    fn caches_own_writes(self) -> bool {
        matches!(self, Variant::Av | Variant::Op)
    }
}

/// Selects one of the four protocols of the skeleton.
pub trait Flavour: Send + 'static {
    const VARIANT: Variant;
    const NAME: &'static str;
}

macro_rules! flavour {
    ($(#[$doc:meta])* $flavour:ident, $alias:ident, $variant:ident, $name:literal) => {
        $(#[$doc])*
        pub struct $flavour;
        impl Flavour for $flavour {
            const VARIANT: Variant = Variant::$variant;
            const NAME: &'static str = $name;
        }
        $(#[$doc])*
        pub type $alias = Tomsic<$flavour>;
    };
}

flavour!(
    /// Cure (Akkoorath et al., ICDCS 2016) as the base protocol of Tomsic §4.1.
    CureFlavour, Cure, Cure, "cure"
);
flavour!(
    /// AV: Cure reading from the stable snapshot (Tomsic §4.3).
    AvFlavour, Av, Av, "av"
);
flavour!(
    /// OP: Cure returning newer compatible versions (Tomsic §3.3.2, §4.3).
    OpFlavour, Op, Op, "op"
);
flavour!(
    /// CV: Cure returning the latest committed version (Tomsic §3.3.1, §4.3).
    CvFlavour, Cv, Cv, "cv"
);

/// The skeleton, instantiated per [`Flavour`].
pub struct Tomsic<F>(PhantomData<F>);

impl<F: Flavour> Protocol for Tomsic<F> {
    const NAME: &'static str = F::NAME;
    type Msg = TomsicMsg;
    type Timer = TomsicTimer;
    type Server = TomsicServer<F>;
    type Client = TomsicClient<F>;
    const OFFERS: snowline_core::Offers =
        snowline_core::Offers { multi_shot_rots: true, write_transactions: true, ..snowline_core::Offers::CAUSAL };

    fn links() -> LinkAssumptions {
        LinkAssumptions { fifo: F::VARIANT.multi_version() }
    }

    fn server(id: ServerId, topology: Topology, config: &ProtocolConfig) -> TomsicServer<F> {
        TomsicServer::new(id, topology, config.clone())
    }

    fn client(id: ClientId, dc: DcId, topology: Topology, config: &ProtocolConfig) -> TomsicClient<F> {
        TomsicClient {
            id,
            dc,
            topology,
            config: config.clone(),
            dep: VectorClock::zero(topology.dcs),
            ss: VectorClock::zero(topology.dcs),
            observed: VectorClock::zero(topology.dcs),
            cache: BTreeMap::new(),
            pending: BTreeMap::new(),
            _flavour: PhantomData,
        }
    }
}

/// A transaction id, unique at its coordinator; partitions key prepared records by `(coordinator, txn)`.
pub type TxnId = u64;

/// The session state a client sends with each operation (Appendix A).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Session {
    /// The client's dependency vector: its own commits (and, under OP, the commit vectors it read).
    pub dep: VectorClock,
    /// The snapshot of the client's latest transaction.
    pub ss: VectorClock,
    /// OP: the commit vectors of the versions this session has read (it may have read versions newer than
    /// the stable snapshot; later transactions of the session must not miss them).
    pub observed: VectorClock,
}

/// What the TC tells the client besides the result.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionUpdate {
    /// The transaction's dependency vector (for an update: its commit vector is this with entry `dc` = ct).
    pub dep: VectorClock,
    pub ss: VectorClock,
    /// The TC's stable vector: cached writes with `cv ≤ stable` are visible to every later snapshot.
    pub stable: VectorClock,
}

/// A committed transaction's updates at one partition, as replicated (Alg. 3 line 9).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Replicated {
    pub writes: Vec<(Key, Value)>,
    pub dep: VectorClock,
    pub ct: u64,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum TomsicMsg {
    /// Client → TC: run this operation.
    Begin { op: OpId, request: Request, session: Session },
    /// TC → client: the operation's result.
    Done { op: OpId, result: Result<Reply, OpError>, session: SessionUpdate },
    /// TC → partition: read these keys at snapshot `ss` (Alg. 1 line 6).
    Read { txn: TxnId, keys: Vec<Key>, ss: VectorClock },
    /// Partition → TC: one result per key in request order, the commit vectors' maximum (for OP, Alg. 1
    /// line 11) and how long the read waited (Cure).
    ReadReply { txn: TxnId, results: Vec<ReadResult>, max_cv: VectorClock, blocked_ns: u64 },
    /// Partition → TC: the snapshot was garbage-collected here.
    ReadRefused { txn: TxnId, reason: String },
    /// TC → partition: first phase of presumed commit (Alg. 1 line 22).
    Prepare { txn: TxnId, writes: Vec<(Key, Value)>, dep: VectorClock, ct: u64 },
    /// Partition → TC: the proposed commit time (Alg. 2 line 12).
    Prepared { txn: TxnId, time: u64 },
    /// TC → partition: commit with time `ct` (Alg. 1 line 28).
    Commit { txn: TxnId, ct: u64 },
    /// TC → the only updated partition: prepare and commit collapsed.
    CommitSingle { txn: TxnId, writes: Vec<(Key, Value)>, dep: VectorClock, ct: u64 },
    /// Partition → TC: the single-partition update committed at `time`.
    Committed { txn: TxnId, time: u64 },
    /// CV, partition → siblings: a committed update, visible on arrival (§4.2.2).
    Replicate { writes: Vec<(Key, Value)>, version: Version },
    /// Cure/AV/OP, partition → siblings: committed updates with `ct ≤ stable`, in `ct` order, and `stable`
    /// (Alg. 3 lines 7–10).
    Updates { updates: Vec<Replicated>, stable: u64, busy: bool },
    /// Partition → the other partitions of its datacenter: its `vec_p` (Alg. 3 line 6), and its stable
    /// vector (for the garbage-collection horizon, below every snapshot any TC of the datacenter can use).
    Stable { vec: VectorClock, stable: VectorClock, busy: bool },
}

impl Message for TomsicMsg {
    fn kind(&self) -> &'static str {
        match self {
            TomsicMsg::Begin { .. } => "begin",
            TomsicMsg::Done { .. } => "done",
            TomsicMsg::Read { .. } => "read",
            TomsicMsg::ReadReply { .. } => "read-reply",
            TomsicMsg::ReadRefused { .. } => "read-refused",
            TomsicMsg::Prepare { .. } => "prepare",
            TomsicMsg::Prepared { .. } => "prepared",
            TomsicMsg::Commit { .. } => "commit",
            TomsicMsg::CommitSingle { .. } => "commit-single",
            TomsicMsg::Committed { .. } => "committed",
            TomsicMsg::Replicate { .. } => "replicate",
            TomsicMsg::Updates { .. } => "updates",
            TomsicMsg::Stable { .. } => "stable",
        }
    }

    fn reply_note(&self) -> Option<ReplyNote> {
        match self {
            TomsicMsg::Done { result, .. } => {
                Some(ReplyNote::of(result, result.as_ref().map_or(0, |r| r.metrics.blocked_ns)))
            }
            _ => None,
        }
    }

    fn is_client_write(&self) -> bool {
        matches!(self, TomsicMsg::Begin { request, .. } if !request.is_read_only())
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum TomsicTimer {
    /// Run a stabilisation round (Alg. 3 line 1), if this timer's generation is still the pacer's.
    Stabilise(u64),
    /// Collect old versions (same).
    CollectGarbage(u64),
    /// Cure: a waiting read's snapshot time has passed on this partition's clock; re-check waiting reads.
    ClockCaughtUp,
}

/// Per-version metadata (Alg. 2 line 24: `⟨val, dep_T, ct, n⟩`); empty vectors under CV.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct VersionMeta {
    pub dep: VectorClock,
    pub cv: VectorClock,
}

/// A TC's in-flight transaction.
#[derive(Debug, Serialize, Deserialize)]
enum Coordinated {
    Read {
        client: ClientId,
        op: OpId,
        ss: VectorClock,
        dep: VectorClock,
        /// Result slots in request order, filled as partitions answer.
        results: Vec<Option<ReadResult>>,
        /// For each partition asked and not yet answered, the request positions of the keys sent to it.
        slots: BTreeMap<PartitionId, Vec<usize>>,
        pending: usize,
        blocked_ns: u64,
        refused: Option<String>,
        /// Results of the rounds already answered, in order.
        done: Vec<ReadResult>,
        /// Rounds not yet sent (multi-shot transactions).
        remaining: VecDeque<Vec<Key>>,
        rounds: u32,
    },
    Write {
        client: ClientId,
        op: OpId,
        ss: VectorClock,
        dep: VectorClock,
        participants: Vec<PartitionId>,
        /// The maximum time proposed so far (Alg. 1 line 25).
        ct: u64,
        pending: usize,
        /// The participants that have not answered yet (a second answer from one is refused).
        awaiting: BTreeSet<PartitionId>,
    },
}

/// A prepared, not yet committed update (Alg. 2 line 10).
#[derive(Debug, Serialize, Deserialize)]
struct PreparedTxn {
    writes: Vec<(Key, Value)>,
    dep: VectorClock,
    time: u64,
}

/// An OP transaction waiting at its TC until the stable vector covers what its session has read.
#[derive(Debug, Serialize, Deserialize)]
struct Parked {
    client: ClientId,
    op: OpId,
    request: Request,
    session: Session,
    since_ns: u64,
}

/// A Cure read waiting for its snapshot to be safe at this partition.
#[derive(Debug, Serialize, Deserialize)]
struct WaitingRead {
    tc: ServerId,
    txn: TxnId,
    keys: Vec<Key>,
    ss: VectorClock,
    arrived_ns: u64,
}

/// A partition server, hosting the TC role as well.
#[derive(Serialize, Deserialize)]
#[serde(bound = "")]
pub struct TomsicServer<F> {
    id: ServerId,
    topology: Topology,
    config: ProtocolConfig,
    clock: Hlc,
    store: MvStore<VersionMeta>,
    prepared: BTreeMap<(ServerId, TxnId), PreparedTxn>,
    coordinated: BTreeMap<TxnId, Coordinated>,
    next_txn: TxnId,
    /// Committed updates not yet sent to the siblings (Alg. 2 line 16).
    to_send: Vec<Replicated>,
    /// `vec_p`: entry `n` is `stable_n`, entry `j` the updates applied from the sibling at site `j`.
    vec: VectorClock,
    /// The latest `vec_p` of every other partition of this datacenter.
    peer_vecs: BTreeMap<PartitionId, VectorClock>,
    /// The latest stable vector of every other partition of this datacenter.
    peer_stables: BTreeMap<PartitionId, VectorClock>,
    /// `SV`: the stable vector (Alg. 3 line 12).
    stable: VectorClock,
    /// Versions with `cv ≤ gc_horizon` have been collected down to the newest one.
    gc_horizon: VectorClock,
    /// The datacenter's smallest stable vector at each collection round of the last `gc_retain_ms`, oldest
    /// first: the horizon trails it by that long.
    floors: VecDeque<(u64, VectorClock)>,
    waiting: Vec<WaitingRead>,
    parked: Vec<Parked>,
    /// Cure: the clock reading at which a `ClockCaughtUp` timer is already due (0: none pending).
    wake_at_ns: u64,
    /// Schedules of the stabilisation rounds and of garbage collection: they back off while idle.
    stabilise_pacer: Pacer,
    gc_pacer: Pacer,
    /// Work arrived here since the last stabilisation round (a client request, a commit, replicated
    /// updates): the round reports the partition busy to its peers and siblings.
    news: bool,
    /// A peer or sibling reported itself busy since the last round: keep pace with it (without echoing it).
    peer_busy: bool,
    /// Versions arrived since the last collection round.
    gc_news: bool,
    _flavour: PhantomData<F>,
}

type Cx<'a, F> = Ctx<'a, Tomsic<F>>;

impl<F: Flavour> TomsicServer<F> {
    pub fn new(id: ServerId, topology: Topology, config: ProtocolConfig) -> Self {
        let zero = VectorClock::zero(topology.dcs);
        let stabilise_pacer = Pacer::new(config.stabilisation_interval_ms * MS, config.idle_backoff_ms * MS);
        let gc_pacer = Pacer::new(config.gc_interval_ms * MS, config.idle_backoff_ms * MS);
        Self {
            id,
            topology,
            config,
            clock: Hlc::default(),
            store: MvStore::new(),
            prepared: BTreeMap::new(),
            coordinated: BTreeMap::new(),
            next_txn: 0,
            to_send: Vec::new(),
            vec: zero.clone(),
            peer_vecs: BTreeMap::new(),
            peer_stables: BTreeMap::new(),
            stable: zero.clone(),
            gc_horizon: zero,
            floors: VecDeque::new(),
            waiting: Vec::new(),
            parked: Vec::new(),
            wake_at_ns: 0,
            stabilise_pacer,
            gc_pacer,
            news: false,
            peer_busy: false,
            gc_news: false,
            _flavour: PhantomData,
        }
    }

    const VARIANT: Variant = F::VARIANT;

    /// The stored versions of `key`, oldest first (for tests and inspection).
    pub fn versions(&self, key: &str) -> Vec<(Version, Value)> {
        self.store.versions(key).iter().map(|v| (v.version, v.value.clone())).collect()
    }

    /// Transactions prepared here and not yet committed.
    pub fn prepared_count(&self) -> usize {
        self.prepared.len()
    }

    /// The smallest time proposed by a transaction still prepared here (Alg. 3 line 3).
    pub fn oldest_prepared_time(&self) -> Option<u64> {
        self.prepared.values().map(|p| p.time).min()
    }

    /// This partition's stable vector `SV`.
    pub fn stable_vector(&self) -> &VectorClock {
        &self.stable
    }

    /// Reads waiting here (Cure).
    pub fn waiting_reads(&self) -> usize {
        self.waiting.len()
    }

    // ---- TC role (Alg. 1) ----

    /// INIT (Alg. 1 lines 30–35) with the session guarantees of Appendix A: the snapshot and dependencies.
    fn init(&self, now_ns: u64, session: &Session) -> (VectorClock, VectorClock) {
        let dcs = self.topology.dcs;
        let fit = |v: &VectorClock| if v.0.len() == usize::from(dcs) { v.clone() } else { VectorClock::zero(dcs) };
        let (client_ss, client_dep) = (fit(&session.ss), fit(&session.dep));
        let mut ss = self.stable.clone();
        match Self::VARIANT {
            Variant::Cv => return (VectorClock::zero(dcs), client_dep),
            Variant::Av | Variant::Op => ss.merge_max(&client_ss),
            Variant::Cure => {
                // Cure's snapshot: the stable vector with the local entry at the coordinator's clock, and at
                // least the client's own commits and previous snapshot.
                ss.merge_max(&client_ss);
                ss.merge_max(&client_dep);
                let local = ss.get(self.id.dc).max(now_ns);
                ss.set(self.id.dc, local);
            }
        }
        let mut dep = ss.clone();
        dep.merge_max(&client_dep);
        (ss, dep)
    }

    fn begin(&mut self, cx: &mut Cx<'_, F>, client: ClientId, op: OpId, request: Request, session: Session) {
        let offered = Tomsic::<F>::OFFERS.missing(&request).is_none();
        if let Err(reason) = self.config.check_request(&request).and(if offered {
            Ok(())
        } else {
            Err(format!("{} offers no {}", Tomsic::<F>::NAME, Tomsic::<F>::OFFERS.capability(&request).0))
        }) {
            let session = SessionUpdate { stable: self.stable.clone(), ..Default::default() };
            cx.send(client, TomsicMsg::Done { op, result: Err(OpError::Rejected(reason)), session });
            return;
        }
        if Self::VARIANT.caches_own_writes() && request.is_read_only() && !self.covers_observed(&session) {
            self.parked.push(Parked { client, op, request, session, since_ns: cx.now_ns() });
            return;
        }
        self.start(cx, client, op, request, session, 0);
    }

    /// OP: whether this TC's snapshot for the session includes everything the session has read. Appendix A
    /// lets a TC whose SV is behind a client's snapshot wait for stabilisation to catch up; OP applies the
    /// same rule to the newer-than-stable versions a session has read, so that its later transactions never
    /// miss their causal past. AV applies it too, for the one session whose observed vector is not zero: one
    /// resumed from another datacenter (module docs, "Session tokens").
    fn covers_observed(&self, session: &Session) -> bool {
        if session.observed.0.len() != self.stable.0.len() {
            return true;
        }
        let mut ss = self.stable.clone();
        if session.ss.0.len() == ss.0.len() {
            ss.merge_max(&session.ss);
        }
        session.observed.le(&ss)
    }

    /// Start the transactions parked until the stable vector covers their sessions.
    fn start_parked(&mut self, cx: &mut Cx<'_, F>) {
        if self.parked.is_empty() {
            return;
        }
        let parked = std::mem::take(&mut self.parked);
        for p in parked {
            if self.covers_observed(&p.session) {
                let waited = cx.now_ns().saturating_sub(p.since_ns);
                self.start(cx, p.client, p.op, p.request, p.session, waited);
            } else {
                self.parked.push(p);
            }
        }
    }

    fn start(
        &mut self,
        cx: &mut Cx<'_, F>,
        client: ClientId,
        op: OpId,
        request: Request,
        session: Session,
        waited_ns: u64,
    ) {
        let (ss, mut dep) = self.init(cx.now_ns(), &session);
        let txn = self.next_txn;
        self.next_txn += 1;
        match request {
            Request::Rot { .. } | Request::RotRounds { .. } => {
                if Self::VARIANT == Variant::Op {
                    // What the session observes: the snapshot, plus the versions read (Alg. 1 line 12).
                    dep = ss.clone();
                }
                let remaining: VecDeque<Vec<Key>> = match request {
                    Request::Rot { keys } => VecDeque::from([keys]),
                    Request::RotRounds { rounds } => rounds.into(),
                    _ => unreachable!("a read-only request"),
                };
                self.coordinated.insert(
                    txn,
                    Coordinated::Read {
                        client,
                        op,
                        ss,
                        dep,
                        results: Vec::new(),
                        slots: BTreeMap::new(),
                        pending: 0,
                        blocked_ns: waited_ns,
                        refused: None,
                        done: Vec::new(),
                        remaining,
                        rounds: 0,
                    },
                );
                self.next_round(cx, txn);
            }
            Request::Put { .. } | Request::Update { .. } => {
                let mut by_partition: BTreeMap<PartitionId, Vec<(Key, Value)>> = BTreeMap::new();
                for (k, v) in request.writes() {
                    by_partition.entry(self.topology.partition_of(&k)).or_default().push((k, v));
                }
                let participants: Vec<PartitionId> = by_partition.keys().copied().collect();
                let pending = participants.len();
                // Alg. 1 line 19 sets ct_T = dep_T[n] + 1. Versions of a key from different datacenters are
                // ordered last-writer-wins by (ct, dc), so ct_T also exceeds every other entry of dep_T: a
                // write that causally follows a remote version is then ordered after it (needed for read your
                // writes and causal order under clock skew).
                let ct = dep.0.iter().copied().max().unwrap_or(0) + 1;
                let awaiting = participants.iter().copied().collect();
                self.coordinated.insert(
                    txn,
                    Coordinated::Write { client, op, ss, dep: dep.clone(), participants, ct, pending, awaiting },
                );
                let single = pending == 1;
                for (p, writes) in by_partition {
                    let dep = dep.clone();
                    let msg = if single {
                        TomsicMsg::CommitSingle { txn, writes, dep, ct }
                    } else {
                        TomsicMsg::Prepare { txn, writes, dep, ct }
                    };
                    self.send_to_partition(cx, p, msg);
                }
            }
            // Refused in `begin`: the client library never sends them and a forged one is answered there.
            Request::Begin | Request::Read { .. } | Request::Commit { .. } | Request::Abort | Request::Call { .. } => {}
        }
    }

    /// Send the next round of a read-only transaction's reads, all at its snapshot (Alg. 1 lines 4–6); a
    /// multi-shot transaction sends each round once the previous one has answered (Tomsic §5.3).
    fn next_round(&mut self, cx: &mut Cx<'_, F>, txn: TxnId) {
        let Some(Coordinated::Read { ss, results, slots, pending, done, remaining, rounds, .. }) =
            self.coordinated.get_mut(&txn)
        else {
            unreachable!("transaction {txn} is a read")
        };
        done.extend(results.drain(..).map(|r| r.expect("every slot answered")));
        let keys = remaining.pop_front().expect("a round to send");
        slots.clear();
        for (i, key) in keys.iter().enumerate() {
            slots.entry(self.topology.partition_of(key)).or_default().push(i);
        }
        let reads: Vec<(PartitionId, Vec<Key>)> =
            slots.iter().map(|(p, idx)| (*p, idx.iter().map(|i| keys[*i].clone()).collect())).collect();
        *pending = slots.len();
        *results = vec![None; keys.len()];
        *rounds += 1;
        let ss = ss.clone();
        for (p, keys) in reads {
            self.send_to_partition(cx, p, TomsicMsg::Read { txn, keys, ss: ss.clone() });
        }
    }

    /// Send a TC → partition message, or handle it in place when the partition is this server.
    fn send_to_partition(&mut self, cx: &mut Cx<'_, F>, partition: PartitionId, msg: TomsicMsg) {
        if partition == self.id.partition {
            self.as_partition(cx, self.id, msg);
        } else {
            cx.send(ServerId::new(self.id.dc, partition), msg);
        }
    }

    /// Send a partition → TC reply, or handle it in place when the TC is this server.
    fn reply_to_coordinator(&mut self, cx: &mut Cx<'_, F>, tc: ServerId, msg: TomsicMsg) {
        if tc == self.id {
            // This server's own answer to its own request always fits the transaction.
            let _ = self.as_coordinator(cx, self.id.partition, msg);
        } else {
            cx.send(tc, msg);
        }
    }

    /// A partition's answer reaches the TC. Checked against the transaction before anything changes: the
    /// answer must come from a partition that was asked and has not answered yet, with one result per key
    /// asked, in order.
    fn as_coordinator(&mut self, cx: &mut Cx<'_, F>, from: PartitionId, msg: TomsicMsg) -> Result<(), InvalidInput> {
        let kind = msg.kind();
        let sender = Addr::Server(ServerId::new(self.id.dc, from));
        let bad = |k: InvalidKind, detail: String| InvalidInput::new(k, kind, sender, detail);
        let txn = match &msg {
            TomsicMsg::ReadReply { txn, .. }
            | TomsicMsg::ReadRefused { txn, .. }
            | TomsicMsg::Prepared { txn, .. }
            | TomsicMsg::Committed { txn, .. } => *txn,
            _ => return Err(bad(InvalidKind::Sender, "not a partition's reply".into())),
        };
        // A reply to a finished transaction is a late duplicate: nothing to do.
        let Some(state) = self.coordinated.get_mut(&txn) else { return Ok(()) };
        match (state, msg) {
            (
                Coordinated::Read { results, slots, pending, dep, blocked_ns, .. },
                TomsicMsg::ReadReply { results: got, max_cv, blocked_ns: waited, .. },
            ) => {
                let Some(positions) = slots.get(&from) else {
                    return Err(bad(
                        InvalidKind::Unexpected,
                        format!("transaction {txn} expects no reads from p{from}"),
                    ));
                };
                let fits =
                    positions.len() == got.len() && got.iter().all(|r| self.topology.partition_of(&r.key) == from);
                if !fits || max_cv.0.len() != dep.0.len() {
                    return Err(bad(InvalidKind::Malformed, format!("the reply does not match transaction {txn}")));
                }
                let positions = slots.remove(&from).expect("checked above");
                for (pos, r) in positions.iter().zip(got) {
                    results[*pos] = Some(r);
                }
                // Alg. 1 lines 10–12: OP's dependencies include what it read.
                if F::VARIANT == Variant::Op {
                    dep.merge_max(&max_cv);
                }
                *blocked_ns = blocked_ns.saturating_add(waited);
                *pending -= 1;
            }
            (Coordinated::Read { pending, refused, slots, .. }, TomsicMsg::ReadRefused { reason, .. }) => {
                if slots.remove(&from).is_none() {
                    return Err(bad(
                        InvalidKind::Unexpected,
                        format!("transaction {txn} expects no reads from p{from}"),
                    ));
                }
                *refused = Some(reason);
                *pending -= 1;
            }
            (Coordinated::Write { ct, pending, awaiting, .. }, TomsicMsg::Prepared { time, .. })
            | (Coordinated::Write { ct, pending, awaiting, .. }, TomsicMsg::Committed { time, .. }) => {
                if !awaiting.remove(&from) {
                    return Err(bad(
                        InvalidKind::Unexpected,
                        format!("transaction {txn} expects no answer from p{from}"),
                    ));
                }
                *ct = (*ct).max(time);
                *pending -= 1;
            }
            (_, other) => {
                return Err(bad(InvalidKind::Unexpected, format!("a {} does not fit transaction {txn}", other.kind())));
            }
        }
        let (done, more_rounds) = match &self.coordinated[&txn] {
            Coordinated::Read { pending, remaining, refused, .. } => {
                (*pending == 0, refused.is_none() && !remaining.is_empty())
            }
            Coordinated::Write { pending, .. } => (*pending == 0, false),
        };
        if done && more_rounds {
            self.next_round(cx, txn);
        } else if done {
            let state = self.coordinated.remove(&txn).expect("present");
            self.finish(cx, txn, state);
        }
        Ok(())
    }

    fn finish(&mut self, cx: &mut Cx<'_, F>, txn: TxnId, state: Coordinated) {
        let stable = self.stable.clone();
        match state {
            Coordinated::Read { client, op, refused: Some(reason), ss, dep, .. } => {
                let session = SessionUpdate { dep, ss, stable };
                cx.send(client, TomsicMsg::Done { op, result: Err(OpError::Rejected(reason)), session });
            }
            Coordinated::Read { client, op, results, ss, dep, blocked_ns, mut done, rounds, .. } => {
                done.extend(results.into_iter().map(|r| r.expect("every slot answered")));
                let reads = done;
                let metrics =
                    OpMetrics { rounds, versions_returned: reads.len() as u32, blocked_ns, ..Default::default() };
                let session = SessionUpdate { dep, ss, stable };
                cx.send(
                    client,
                    TomsicMsg::Done {
                        op,
                        result: Ok(Reply { reads, commit: None, metrics, writes: Vec::new() }),
                        session,
                    },
                );
            }
            Coordinated::Write { client, op, participants, ct, ss, dep, .. } => {
                // Presumed commit: every participant prepared, so the transaction is committed (§4.1).
                let metrics = OpMetrics { rounds: 1, ..Default::default() };
                let commit = Some(Version { time: ct, dc: self.id.dc });
                let session = SessionUpdate { dep, ss, stable };
                let reply = Reply { reads: Vec::new(), commit, metrics, writes: Vec::new() };
                cx.send(client, TomsicMsg::Done { op, result: Ok(reply), session });
                if participants.len() > 1 {
                    for p in participants {
                        self.send_to_partition(cx, p, TomsicMsg::Commit { txn, ct });
                    }
                }
            }
        }
    }

    // ---- Partition role (Alg. 2) ----

    /// Handle a TC's request; replies go back through [`Self::reply_to_coordinator`].
    fn as_partition(&mut self, cx: &mut Cx<'_, F>, tc: ServerId, msg: TomsicMsg) {
        match msg {
            TomsicMsg::Read { txn, keys, ss } => {
                cx.charge(keys.len() as u64);
                if Self::VARIANT.multi_version() && !self.gc_horizon.le(&ss) {
                    let reason = format!(
                        "snapshot {:?} is older than the garbage-collection horizon {:?} at {}; retry",
                        ss.0, self.gc_horizon.0, self.id
                    );
                    self.reply_to_coordinator(cx, tc, TomsicMsg::ReadRefused { txn, reason });
                    return;
                }
                let read = WaitingRead { tc, txn, keys, ss, arrived_ns: cx.now_ns() };
                if Self::VARIANT == Variant::Cure && !self.cure_can_serve(cx, &read.ss) {
                    self.waiting.push(read);
                } else {
                    self.serve(cx, read);
                }
            }
            TomsicMsg::Prepare { txn, writes, dep, ct } => {
                cx.charge(writes.len() as u64);
                // Alg. 2 line 9: time = MAX(READ_CLOCK(), ct_T), as a clock tick (unique, increasing).
                let time = self.clock.tick(cx.now_ns()).max(ct);
                self.clock.advance_to(time);
                self.prepared.insert((tc, txn), PreparedTxn { writes, dep, time });
                self.reply_to_coordinator(cx, tc, TomsicMsg::Prepared { txn, time });
            }
            TomsicMsg::Commit { txn, ct } => {
                // Presumed commit: a commit for a transaction not prepared here is a duplicate; ignore it.
                let Some(prepared) = self.prepared.remove(&(tc, txn)) else { return };
                cx.charge(prepared.writes.len() as u64);
                self.clock.observe(cx.now_ns(), ct);
                self.commit(cx, prepared.writes, prepared.dep, ct);
                self.serve_waiting(cx);
            }
            TomsicMsg::CommitSingle { txn, writes, dep, ct } => {
                cx.charge(writes.len() as u64);
                let time = self.clock.tick(cx.now_ns()).max(ct);
                self.clock.advance_to(time);
                self.commit(cx, writes, dep, time);
                self.reply_to_coordinator(cx, tc, TomsicMsg::Committed { txn, time });
                self.serve_waiting(cx);
            }
            other => unreachable!("not a TC → partition message: {other:?}"),
        }
    }

    /// Cure's blocking conditions (§4.1): the snapshot is safe here once this partition's clock has passed
    /// its local entry, no transaction prepared at or before it may still commit into it, and every remote
    /// update it includes has been applied.
    fn cure_can_serve(&mut self, cx: &mut Cx<'_, F>, ss: &VectorClock) -> bool {
        let local = ss.get(self.id.dc);
        let now = cx.now_ns();
        let clock_passed = now > local;
        let no_prepared = self.prepared.values().all(|p| p.time > local);
        let remote_applied = self.topology.dc_ids().filter(|d| *d != self.id.dc).all(|d| self.vec.get(d) >= ss.get(d));
        // Wake up when the clock passes the snapshot, unless an earlier wake-up is already due.
        if !clock_passed && (self.wake_at_ns <= now || self.wake_at_ns > local + 1) {
            self.wake_at_ns = local + 1;
            cx.set_timer(local + 1 - now, TomsicTimer::ClockCaughtUp);
        }
        clock_passed && no_prepared && remote_applied
    }

    /// Serve the waiting reads that can now be served, in arrival order.
    fn serve_waiting(&mut self, cx: &mut Cx<'_, F>) {
        if self.waiting.is_empty() {
            return;
        }
        let waiting = std::mem::take(&mut self.waiting);
        for read in waiting {
            if self.cure_can_serve(cx, &read.ss) {
                self.serve(cx, read);
            } else {
                self.waiting.push(read);
            }
        }
    }

    /// Answer a read (Alg. 2 lines 1–6).
    fn serve(&mut self, cx: &mut Cx<'_, F>, read: WaitingRead) {
        let mut max_cv = VectorClock::zero(self.topology.dcs);
        let mut results = Vec::with_capacity(read.keys.len());
        for key in read.keys {
            let (found, skipped) = self.store.newest_where(&key, |v| Self::cond(v, &read.ss));
            cx.charge(u64::from(skipped));
            results.push(match found {
                Some(v) => {
                    if Self::VARIANT.multi_version() {
                        max_cv.merge_max(&v.meta.cv);
                    }
                    ReadResult { key, value: Some(v.value.clone()), version: v.version, versions_skipped: skipped }
                }
                None => ReadResult { key, value: None, version: Version::INITIAL, versions_skipped: skipped },
            });
        }
        let blocked_ns = cx.now_ns().saturating_sub(read.arrived_ns);
        self.reply_to_coordinator(cx, read.tc, TomsicMsg::ReadReply { txn: read.txn, results, max_cv, blocked_ns });
    }

    /// COND (Alg. 2 lines 17–20).
    fn cond(v: &StoredVersion<VersionMeta>, ss: &VectorClock) -> bool {
        match Self::VARIANT {
            Variant::Cv => true,
            Variant::Op => v.meta.dep.le(ss),
            Variant::Av | Variant::Cure => v.meta.cv.le(ss),
        }
    }

    /// UPDATE_VERSIONS (Alg. 2 lines 21–24) for a local commit, then queue it for the siblings (line 16).
    fn commit(&mut self, cx: &mut Cx<'_, F>, writes: Vec<(Key, Value)>, dep: VectorClock, ct: u64) {
        let version = Version { time: ct, dc: self.id.dc };
        if Self::VARIANT == Variant::Cv {
            self.apply(&writes, &dep, version);
            for sibling in self.topology.siblings(self.id) {
                cx.send(sibling, TomsicMsg::Replicate { writes: writes.clone(), version });
            }
        } else {
            self.apply(&writes, &dep, version);
            self.to_send.push(Replicated { writes, dep, ct });
        }
    }

    fn apply(&mut self, writes: &[(Key, Value)], dep: &VectorClock, version: Version) {
        for (key, value) in writes {
            if Self::VARIANT.multi_version() {
                let mut cv = dep.clone();
                cv.set(version.dc, version.time);
                let meta = VersionMeta { dep: dep.clone(), cv };
                self.store.insert(key.clone(), StoredVersion { value: value.clone(), version, meta });
            } else {
                let meta = VersionMeta::default();
                self.store.put_if_newer(key.clone(), StoredVersion { value: value.clone(), version, meta });
            }
        }
    }

    // ---- Input validation ----

    /// Everything a message says that the handlers rely on, checked against the topology and this server's
    /// clock before the message touches any state (`snowline_core::validate`).
    fn validate(&self, now_ns: u64, from: Addr, msg: &TomsicMsg) -> Result<(), InvalidInput> {
        let check = Check::new(&self.topology, &self.config, now_ns, from, msg.kind());
        let me = self.id;
        let writes_here = |writes: &[(Key, Value)]| -> Result<(), InvalidInput> {
            writes.iter().try_for_each(|(k, _)| check.key_on(k, me.partition))
        };
        let multi = Self::VARIANT.multi_version();
        let variant =
            |ok: bool| check.ensure(ok, InvalidKind::Sender, || format!("{} servers send no such message", F::NAME));
        match msg {
            TomsicMsg::Begin { request, session, .. } => {
                check.client()?;
                check.request(request)?;
                // Empty: a session that has seen nothing yet.
                check.vector_or_empty(&session.dep, "session dependency vector")?;
                check.vector_or_empty(&session.ss, "session snapshot")?;
                check.vector_or_empty(&session.observed, "session observed vector")?;
            }
            TomsicMsg::Done { .. } => return Err(check.fail(InvalidKind::Sender, "only a client is sent this")),
            TomsicMsg::Read { keys, ss, .. } => {
                check.local_peer(me)?;
                keys.iter().try_for_each(|k| check.key_on(k, me.partition))?;
                check.vector(ss, "snapshot")?;
            }
            TomsicMsg::ReadReply { max_cv, .. } => {
                check.local_peer(me)?;
                check.vector(max_cv, "commit vector")?;
            }
            TomsicMsg::ReadRefused { .. } => {
                check.local_peer(me)?;
            }
            TomsicMsg::Prepared { time, .. } | TomsicMsg::Committed { time, .. } => {
                check.local_peer(me)?;
                check.time(*time, "time")?;
            }
            TomsicMsg::Prepare { writes, dep, ct, .. } | TomsicMsg::CommitSingle { writes, dep, ct, .. } => {
                check.local_peer(me)?;
                writes_here(writes)?;
                check.vector(dep, "dependency vector")?;
                check.time(*ct, "commit time")?;
            }
            TomsicMsg::Commit { ct, .. } => {
                check.local_peer(me)?;
                check.time(*ct, "commit time")?;
            }
            TomsicMsg::Replicate { writes, version } => {
                variant(!multi)?;
                let sibling = check.sibling(me)?;
                check.ensure(version.dc == sibling.dc, InvalidKind::Sender, || {
                    format!("{sibling} replicates a version of dc{}", version.dc)
                })?;
                check.version(version, "version")?;
                writes_here(writes)?;
            }
            TomsicMsg::Updates { updates, stable, .. } => {
                variant(multi)?;
                check.sibling(me)?;
                check.time(*stable, "stable time")?;
                for u in updates {
                    writes_here(&u.writes)?;
                    check.vector(&u.dep, "dependency vector")?;
                    check.time(u.ct, "commit time")?;
                }
            }
            TomsicMsg::Stable { vec, stable, .. } => {
                variant(multi)?;
                check.local_peer(me)?;
                check.vector(vec, "version vector")?;
                check.vector(stable, "stable vector")?;
            }
        }
        Ok(())
    }

    // ---- Stabilisation (Alg. 3) ----

    fn stabilise(&mut self, cx: &mut Cx<'_, F>) {
        // Lines 2–5: just below the oldest prepared time, else the clock (a tick every later prepare exceeds).
        let stable_n = match self.oldest_prepared_time() {
            Some(t) => t - 1,
            None => self.clock.tick(cx.now_ns()),
        };
        assert!(stable_n >= self.vec.get(self.id.dc), "stable_n never goes backwards");
        self.vec.set(self.id.dc, stable_n);
        // Line 6.
        // Busy: work arrived since the last round, or some is under way here. (A peer's report of being
        // busy keeps this partition's pace up but is not passed on, so reports do not echo forever.)
        let busy = std::mem::take(&mut self.news)
            || !self.prepared.is_empty()
            || !self.to_send.is_empty()
            || !self.coordinated.is_empty()
            || !self.waiting.is_empty()
            || !self.parked.is_empty();
        let pace = busy || std::mem::take(&mut self.peer_busy);
        for peer in self.topology.local_peers(self.id) {
            cx.send(peer, TomsicMsg::Stable { vec: self.vec.clone(), stable: self.stable.clone(), busy });
        }
        // Lines 7–10: updates with ct ≤ stable_n, in ct order, and stable_n as the heartbeat.
        self.to_send.sort_by_key(|u| u.ct);
        let ready = self.to_send.partition_point(|u| u.ct <= stable_n);
        let updates: Vec<Replicated> = self.to_send.drain(..ready).collect();
        cx.charge(1 + updates.len() as u64);
        // A backlog (a stalled round, a burst of large values) goes as several messages, each within a frame
        // (snowline_core::frames). All but the last say stable up to their own last update: the updates
        // travel in ct order over FIFO links, and a partition's commit times are unique.
        let size = |u: &Replicated| {
            16 + 10 * u.dep.0.len() + u.writes.iter().map(|(k, v)| frames::pair_size(k, v)).sum::<usize>()
        };
        let batches = frames::split_by_size(updates, frames::batch_budget(&self.config), size);
        let last = batches.len() - 1;
        for (i, batch) in batches.into_iter().enumerate() {
            let stable = if i == last { stable_n } else { batch.last().map_or(stable_n, |u| u.ct) };
            for sibling in self.topology.siblings(self.id) {
                cx.send(sibling, TomsicMsg::Updates { updates: batch.clone(), stable, busy });
            }
        }
        self.recompute_stable();
        self.start_parked(cx);
        let (delay, generation) = self.stabilise_pacer.next(cx.now_ns(), pace);
        cx.set_timer(delay, TomsicTimer::Stabilise(generation));
    }

    /// Line 12: `SV = MIN(vec_p)` over every partition of the datacenter (once all have reported).
    fn recompute_stable(&mut self) {
        if self.peer_vecs.len() + 1 < usize::from(self.topology.partitions) {
            return;
        }
        let mut sv = self.vec.clone();
        for v in self.peer_vecs.values() {
            sv.merge_min(v);
        }
        // Each entry only grows; keep SV monotonic even if a peer's report was overtaken.
        self.stable.merge_max(&sv);
    }

    /// Work arrived: the next stabilisation round comes at the base period, and reports this partition busy.
    fn note_news(&mut self, cx: &mut Cx<'_, F>) {
        self.news = true;
        self.gc_news = true;
        self.note_peer_busy(cx);
    }

    /// A peer or sibling is busy: stabilise at the base period while it is (its updates and stable times
    /// must reach every snapshot promptly).
    fn note_peer_busy(&mut self, cx: &mut Cx<'_, F>) {
        self.peer_busy = true;
        if !Self::VARIANT.multi_version() {
            return;
        }
        if let Some((delay, generation)) = self.stabilise_pacer.wake(cx.now_ns()) {
            cx.set_timer(delay, TomsicTimer::Stabilise(generation));
        }
    }

    fn collect_garbage(&mut self, cx: &mut Cx<'_, F>) {
        let (delay, generation) = self.gc_pacer.next(cx.now_ns(), std::mem::take(&mut self.gc_news));
        cx.set_timer(delay, TomsicTimer::CollectGarbage(generation));
        // Every TC of this datacenter snapshots at or above its own stable vector, which only grows, so the
        // minimum of all of them (as last reported) is below every snapshot issued from now on. The horizon is
        // that minimum as it stood `gc_retain_ms` ago: a transaction younger than that (whatever its snapshot,
        // even one taken before the stable vectors were first known) is never refused.
        if self.peer_stables.len() + 1 < usize::from(self.topology.partitions) {
            return;
        }
        let mut floor = self.stable.clone();
        for s in self.peer_stables.values() {
            floor.merge_min(s);
        }
        let now = cx.now_ns();
        self.floors.push_back((now, floor));
        let retain = self.config.gc_retain_ms * 1_000_000;
        while self.floors.len() > 1 && self.floors[1].0.saturating_add(retain) <= now {
            self.floors.pop_front();
        }
        let Some((at, horizon)) = self.floors.front() else { return };
        if at.saturating_add(retain) > now || !self.gc_horizon.le(horizon) {
            return;
        }
        self.gc_horizon = horizon.clone();
        let h = &self.gc_horizon;
        let dropped = self.store.collect_below(|v| v.meta.cv.le(h));
        cx.charge(dropped as u64);
    }
}

impl<F: Flavour> ServerNode<Tomsic<F>> for TomsicServer<F> {
    fn on_start(&mut self, cx: &mut Cx<'_, F>) {
        if Self::VARIANT.multi_version() {
            let (delay, generation) = self.stabilise_pacer.start(cx.now_ns());
            cx.set_timer(delay, TomsicTimer::Stabilise(generation));
            let (delay, generation) = self.gc_pacer.start(cx.now_ns());
            cx.set_timer(delay, TomsicTimer::CollectGarbage(generation));
        }
    }

    fn on_message(&mut self, cx: &mut Cx<'_, F>, from: Addr, msg: TomsicMsg) -> Result<(), InvalidInput> {
        cx.charge(1);
        self.validate(cx.now_ns(), from, &msg)?;
        match (from, msg) {
            (Addr::Client(client), TomsicMsg::Begin { op, request, session }) => {
                self.note_news(cx);
                self.begin(cx, client, op, request, session)
            }
            (Addr::Server(_), TomsicMsg::Replicate { writes, version }) => {
                cx.charge(writes.len() as u64);
                self.clock.observe(cx.now_ns(), version.time);
                self.apply(&writes, &VectorClock::default(), version);
            }
            (Addr::Server(sibling), TomsicMsg::Updates { updates, stable, busy }) => {
                if !updates.is_empty() {
                    self.note_news(cx);
                } else if busy {
                    self.note_peer_busy(cx);
                }
                // Alg. 3 lines 13–19.
                for u in updates {
                    cx.charge(u.writes.len() as u64);
                    self.apply(&u.writes, &u.dep, Version { time: u.ct, dc: sibling.dc });
                    self.vec.set(sibling.dc, self.vec.get(sibling.dc).max(u.ct));
                }
                self.vec.set(sibling.dc, self.vec.get(sibling.dc).max(stable));
                self.serve_waiting(cx);
            }
            (Addr::Server(peer), TomsicMsg::Stable { vec, stable, busy }) => {
                if busy {
                    self.note_peer_busy(cx);
                }
                self.peer_vecs.insert(peer.partition, vec);
                self.peer_stables.insert(peer.partition, stable);
                self.recompute_stable();
                self.start_parked(cx);
            }
            (
                Addr::Server(peer),
                msg @ (TomsicMsg::ReadReply { .. }
                | TomsicMsg::ReadRefused { .. }
                | TomsicMsg::Prepared { .. }
                | TomsicMsg::Committed { .. }),
            ) => self.as_coordinator(cx, peer.partition, msg)?,
            (
                Addr::Server(tc),
                msg @ (TomsicMsg::Read { .. }
                | TomsicMsg::Prepare { .. }
                | TomsicMsg::Commit { .. }
                | TomsicMsg::CommitSingle { .. }),
            ) => {
                self.note_news(cx);
                self.as_partition(cx, tc, msg)
            }
            (from, msg) => unreachable!("validate admits no {} from {from}", msg.kind()),
        }
        Ok(())
    }

    fn on_timer(&mut self, cx: &mut Cx<'_, F>, timer: TomsicTimer) {
        match timer {
            TomsicTimer::Stabilise(generation) if self.stabilise_pacer.live(generation) => self.stabilise(cx),
            TomsicTimer::CollectGarbage(generation) if self.gc_pacer.live(generation) => self.collect_garbage(cx),
            // Replaced by a sooner round when news arrived (`Pacer::wake`).
            TomsicTimer::Stabilise(_) | TomsicTimer::CollectGarbage(_) => {}
            TomsicTimer::ClockCaughtUp => {
                self.wake_at_ns = 0;
                self.serve_waiting(cx)
            }
        }
    }

    fn stored_versions(&self) -> usize {
        self.store.version_count()
    }
}

/// A write of this client's that may not be stable yet (AV and OP read your writes from it).
#[derive(Clone, Debug)]
struct CachedWrite {
    value: Value,
    version: Version,
    cv: VectorClock,
}

/// The client session: forwards each operation to its coordinator and keeps the session state of
/// Appendix A.
pub struct TomsicClient<F> {
    id: ClientId,
    dc: DcId,
    topology: Topology,
    config: ProtocolConfig,
    dep: VectorClock,
    ss: VectorClock,
    observed: VectorClock,
    cache: BTreeMap<Key, CachedWrite>,
    /// The operations in flight (a session normally has one) and their writes.
    pending: BTreeMap<OpId, Vec<(Key, Value)>>,
    _flavour: PhantomData<F>,
}

impl<F: Flavour> TomsicClient<F> {
    pub fn id(&self) -> ClientId {
        self.id
    }

    /// Own writes cached for reading them back.
    pub fn cached_writes(&self) -> usize {
        self.cache.len()
    }

    fn done(&mut self, op: OpId, mut result: Result<Reply, OpError>, session: SessionUpdate) -> Result<Reply, OpError> {
        let writes = self.pending.remove(&op).unwrap_or_default();
        if session.ss.0.len() == self.ss.0.len() && session.stable.0.len() == self.ss.0.len() {
            // Appendix A: the next snapshot is at least this one, and at least the stable vector this client
            // has seen (its cached writes are dropped below once that vector covers them).
            self.ss.merge_max(&session.ss);
            self.ss.merge_max(&session.stable);
            self.dep.merge_max(&session.dep);
            if F::VARIANT == Variant::Op && writes.is_empty() {
                self.observed.merge_max(&session.dep);
            }
        }
        if let Ok(reply) = &mut result {
            if let Some(commit) = reply.commit
                && F::VARIANT.multi_version()
            {
                let mut cv = session.dep.clone();
                cv.set(commit.dc, commit.time);
                self.dep.merge_max(&cv);
                if F::VARIANT.caches_own_writes() {
                    for (key, value) in writes {
                        // The newest own write of a key stays: the late reply of an abandoned older write
                        // must not displace a newer one.
                        let newer = self.cache.get(&key).is_none_or(|c| (commit, &value) > (c.version, &c.value));
                        if newer {
                            self.cache.insert(key, CachedWrite { value, version: commit, cv: cv.clone() });
                        }
                    }
                }
            }
            // Read your writes: a cached own write fresher than what was read replaces it.
            for r in &mut reply.reads {
                if let Some(c) = self.cache.get(&r.key) {
                    let fresher = match &r.value {
                        None => true,
                        Some(v) => (c.version, &*c.value) > (r.version, &**v),
                    };
                    if fresher {
                        r.value = Some(c.value.clone());
                        r.version = c.version;
                    }
                }
            }
        }
        result
    }
}

/// What a session token of the Tomsic skeleton carries (module docs, "Session tokens").
#[derive(Serialize, Deserialize)]
struct SavedSession {
    /// The datacenter the session ran in.
    dc: DcId,
    dep: VectorClock,
    ss: VectorClock,
    observed: VectorClock,
    /// AV and OP: cached own writes not yet covered by `ss`, as `(key, value, version, commit vector)`.
    cache: Vec<(Key, Value, Version, VectorClock)>,
}

impl<F: Flavour> TomsicClient<F> {
    fn saved(&self) -> SavedSession {
        let mut observed = self.observed.clone();
        let mut cache = Vec::new();
        let mut bytes = 0;
        for (key, c) in self.cache.iter().filter(|(_, c)| !c.cv.le(&self.ss)) {
            let size = key.len() + c.value.len();
            if bytes + size <= session::MAX_CACHED_BYTES {
                bytes += size;
                cache.push((key.clone(), c.value.clone(), c.version, c.cv.clone()));
            } else {
                // Too much to carry by value: the resumed session's next read-only transaction waits at its
                // TC until the stable vector covers this write instead (AV and OP park on `observed`).
                observed.merge_max(&c.cv);
            }
        }
        SavedSession { dc: self.dc, dep: self.dep.clone(), ss: self.ss.clone(), observed, cache }
    }

    fn resume(&mut self, saved: &[u8]) -> Result<(), String> {
        let Some(s) = session::decode::<SavedSession>(F::NAME, saved)? else { return Ok(()) };
        let topology = &self.topology;
        session::check_dc(topology, s.dc, "the session's datacenter")?;
        session::check_vector(topology, &s.dep, "the session's dependency vector")?;
        session::check_vector(topology, &s.ss, "the session's snapshot")?;
        session::check_vector(topology, &s.observed, "the session's observed vector")?;
        let mut bytes = 0usize;
        for (key, value, version, cv) in &s.cache {
            session::check_sizes(&self.config, key, Some(value))?;
            session::check_version(topology, version, "a cached write's version")?;
            session::check_vector(topology, cv, "a cached write's commit vector")?;
            bytes = bytes.saturating_add(key.len() + value.len());
        }
        if bytes > session::MAX_CACHED_BYTES {
            return Err(format!(
                "the session's cached writes hold {bytes} bytes, more than {}",
                session::MAX_CACHED_BYTES
            ));
        }
        if !s.cache.is_empty() && !F::VARIANT.caches_own_writes() {
            return Err(format!("{} sessions cache no writes, and this token carries some", F::NAME));
        }
        self.dep.merge_max(&s.dep);
        if s.dc != self.dc && F::VARIANT.caches_own_writes() {
            // AV and OP read at max(SV, ss) without waiting for remote updates: a snapshot taken in another
            // datacenter may hold versions not applied here yet. So the whole past of the session becomes
            // what it has observed, and its read-only transactions wait at their TC until this datacenter's
            // stable vector covers it; its snapshot starts from this datacenter's stable vector.
            self.observed.merge_max(&s.observed);
            self.observed.merge_max(&s.ss);
            self.observed.merge_max(&s.dep);
        } else {
            // Same datacenter (ss came from its stable vectors), or Cure, whose reads wait until the remote
            // updates up to the snapshot are applied; CV reads the latest versions and keeps only `dep`.
            self.ss.merge_max(&s.ss);
            self.observed.merge_max(&s.observed);
        }
        for (key, value, version, cv) in s.cache {
            let newer = self.cache.get(&key).is_none_or(|c| (version, &value) > (c.version, &c.value));
            if newer {
                self.cache.insert(key, CachedWrite { value, version, cv });
            }
        }
        Ok(())
    }
}

impl<F: Flavour> ClientNode<Tomsic<F>> for TomsicClient<F> {
    fn save_session(&self) -> Vec<u8> {
        session::encode(F::NAME, &self.saved())
    }

    fn resume_session(&mut self, saved: &[u8]) -> Result<(), String> {
        self.resume(saved)
    }

    fn on_request(&mut self, cx: &mut Cx<'_, F>, op: OpId, request: Request) {
        if let Err(reason) = self.config.check_request(&request) {
            cx.complete(op, Err(OpError::Rejected(reason)));
            return;
        }
        let first_key = match &request {
            Request::Rot { keys } => keys[0].clone(),
            Request::RotRounds { rounds } => rounds[0][0].clone(),
            Request::Put { key, .. } => key.clone(),
            Request::Update { writes } => writes[0].0.clone(),
            other => {
                cx.complete(op, Err(Tomsic::<F>::OFFERS.refusal(Tomsic::<F>::NAME, other)));
                return;
            }
        };
        self.pending.insert(op, request.writes());
        // Cached writes with cv ≤ ss are in this operation's snapshot (the TC snapshots at or above ss) and
        // in every later one. They are dropped here, when the snapshot is sent, and not when the reply that
        // raised ss arrives: the late reply of an abandoned operation can arrive while a newer operation,
        // snapshotted below it, is in flight, and that one still needs the cache.
        self.cache.retain(|_, c| !c.cv.le(&self.ss));
        let tc = self.topology.server_of(self.dc, &first_key);
        let session = Session { dep: self.dep.clone(), ss: self.ss.clone(), observed: self.observed.clone() };
        cx.send(tc, TomsicMsg::Begin { op, request, session });
    }

    fn on_message(&mut self, cx: &mut Cx<'_, F>, _from: Addr, msg: TomsicMsg) {
        if let TomsicMsg::Done { op, result, session } = msg {
            let result = self.done(op, result, session);
            cx.complete(op, result);
        }
    }
}
#[cfg(test)]
mod tests;
