//! **COPS** and **COPS-SNOW** (alias **CC-LO**): causally consistent, geo-replicated storage with single-key
//! PUTs and read-only transactions (ROTs). Sources: Lu et al., "The SNOW Theorem and Latency-Optimal
//! Read-Only Transactions", OSDI 2016, §5.3 and Figures 3–4 (COPS as the baseline, COPS-SNOW); Didona et
//! al., "Causal Consistency and Latency Optimality: Friend or Foe?" (Contrarian), VLDB 2018, §3 and §5.1
//! (CC-LO, the COPS-SNOW design with its garbage-collection and one-id-per-client optimisations).
//!
//! Both protocols share one mechanism; [`Variant`] marks the five server-side changes COPS-SNOW makes to
//! COPS ("two changes to reads, two to writes, and one to dependency checks", SNOW §5.3).
//!
//! # Guarantee
//!
//! Causal consistency (checker level `causal`): every ROT reads a causally consistent snapshot (no
//! `X ⇝ X' ⇝ Y` with `X` and `Y` read) that contains the session's causal past (read-your-writes,
//! monotonic reads, monotonic writes, writes-follow-reads); replicas converge by last-writer-wins. No write
//! transactions (`Request::Update` is rejected). COPS ROTs are non-blocking and take at most two rounds;
//! COPS-SNOW ROTs are non-blocking, one round, one version (latency-optimal), and PUTs pay for it with the
//! *readers check*. COPS-SNOW's ROTs are consistent only if each ROT's reads reach their partitions within
//! `old_readers_gc_ms` of each other (the CC-LO assumption, §5.1; 500 ms by default).
//!
//! # Roles and messages
//!
//! - The **client node** is the COPS client library. It keeps the session's causal context: the *nearest
//!   dependencies* (per key and origin datacenter, the newest version the session depends on) and the
//!   highest logical time it has seen. It sends `Read` to the partitions of its own datacenter (one message
//!   per partition, keys grouped), `Put` to the key's partition, and under COPS runs the second round itself
//!   (`ReadAt`). After a ROT it merges the versions read into its context; after a PUT the context becomes
//!   just the new write (COPS: the write depends on everything before it).
//! - A **partition server** stores a multi-version chain per key, with each version's *local visibility
//!   time* (EVT). A local `Put` gets a version from the server's Lamport clock, becomes visible, is answered
//!   (`PutReply`) and is sent to the sibling partitions in the other datacenters with its dependencies
//!   (`Replicate`). A sibling sends `DepCheck` to the local partitions holding the dependencies; each answers
//!   `DepOk` once every dependency it was asked about has been applied there (the COPS *dep_check*, which
//!   waits); then the write is applied. COPS-SNOW runs the same `DepCheck`/`DepOk` exchange for local PUTs
//!   too, before the write is applied: that is the *readers check*, and `DepOk` carries the old readers of
//!   the dependencies' keys (SNOW Fig. 4 lines 26–28, 35–37).
//!
//! # COPS: reads with Eiger's logical time
//!
//! The SNOW paper's COPS baseline is Eiger without write transactions (§6.1): an at-most-two-round ROT that
//! uses logical time. Round 1: each partition returns the current version of each key with its EVT and a
//! *latest valid time* LVT (the server's clock after observing the client's time: the version is the current
//! one over `[EVT, LVT]`). The client takes the *effective time* `eff = max EVT`. Every value with
//! `LVT >= eff` was valid at `eff`; for the others, round 2 asks their partitions for the version valid at
//! `eff` (`ReadAt`): the specific versions that the round-1 values depend on (SNOW §5.3: "if a0 and b1 are
//! returned in the first round then a1 will be requested in the second round"). The result is the
//! datacenter's snapshot at `eff`, which is causally consistent because a version becomes visible only after
//! its dependencies, with a larger EVT.
//!
//! # COPS-SNOW: the five changes (SNOW Fig. 4)
//!
//! 1. A read whose ROT is listed in the key's **old readers** (`old_rdrs`) returns the version valid at the
//!    recorded logical time (lines 18–20).
//! 2. Any other read records its ROT in the key's **current readers** (`curr_rdrs`) with the logical time of
//!    the read (lines 21–22) and returns the current version.
//! 3. A write first runs the readers check against the partitions of its dependencies, in parallel, and adds
//!    the old readers they return to its key's `old_rdrs` (lines 26–28).
//! 4. A write moves its key's current readers to its old readers (lines 29–30).
//! 5. A dependency check returns the old readers of the dependency's key (lines 35–37).
//!
//! # Choices where the papers are silent (what Eiger does, or why not)
//!
//! - **Clock.** One Lamport clock per partition server, kept close to physical time (an [`Hlc`]), so that
//!   logical times taken at different partitions are comparable and COPS rarely needs a second round under
//!   light load. A local PUT's version is `Version { time: tick, dc }`; versions of a key are unique because
//!   one server issues them.
//! - **Visibility time (EVT).** A local write's EVT is its version time. A replicated write gets a fresh local
//!   tick when it is applied, after observing its version time and the clocks in its `DepOk`s: a version that
//!   arrives late must not become visible "in the past" of reads already answered (Eiger's validity
//!   intervals are local). Within a datacenter, `X ⇝ Y` implies `EVT(X) < EVT(Y)`.
//! - **Last writer wins.** Versions are ordered by `(version, value)`. A replicated version older than the
//!   key's current one is applied (it counts for dependency checks) but never enters the chain: no snapshot
//!   could return it. So each chain is ordered by EVT as well, and the snapshot at logical time `t` is the
//!   newest version with `EVT <= t`.
//! - **Dependency check.** A dependency `(key, version)` is satisfied when that version has been applied at
//!   the key's local partition. Replicated writes of one key from one origin datacenter are applied in their
//!   origin order (a queue per key and origin; links are FIFO), so a watermark per key and origin datacenter
//!   decides it exactly, survives version GC, and a newer version of the same key from the same origin
//!   implies the older one. The client's context keeps one dependency per key and origin for the same reason.
//! - **Version GC** (`gc_retain_ms`, every `gc_interval_ms`): a key keeps every version with
//!   `EVT > clock - retain` plus the newest one at or before that horizon
//!   ([`MvStore::collect_garbage_by`]): every snapshot at a logical time at or after the horizon stays
//!   readable. COPS reads at most one round trip in the past; COPS-SNOW reads at an old reader's time, which
//!   lives `old_readers_gc_ms`, so COPS-SNOW retains `max(gc_retain_ms, 2 × old_readers_gc_ms)`. A read at a
//!   time before the horizon (a ROT slower than that) is served from the oldest retained version and counted
//!   ([`CopsServer::stale_reads`]).
//! - **Old readers' logical time.** SNOW Fig. 4 and Contrarian §3 copy each old reader's *remote* logical time
//!   into `old_rdrs[y]`. With Lamport clocks that is unsafe: if `p_y`'s clock is ahead of `p_x`'s, a version
//!   `Y1` (with a dependant `Z1`) written before `T`'s read of `x` can have a time above it; `T` then reads
//!   `Z1` and, as an old reader of `y`, `Y0`. Here the readers check returns ROT ids only, and the writer's
//!   partition records each new old reader with **its own** clock at the moment the write is applied, just
//!   before the write's EVT: the old reader sees exactly the versions of `y` visible before it was recorded.
//!   Current readers keep the time of their read when they move to `old_rdrs` (Fig. 4 lines 21, 29). A ROT
//!   listed twice for a key keeps the earlier time.
//! - **Old-reader GC** (Contrarian §5.1): an entry is dropped `old_readers_gc_ms` after its insertion in the
//!   key's readers record; moving from current to old readers keeps the insertion time.
//! - **One ROT id per client** (Contrarian §5.1): a ROT id is `(client, sequence)`. Each key's records keep
//!   one entry per client (its latest ROT), and each `DepOk` carries at most one id per client (the latest).
//!   A session runs one operation at a time, so its earlier ROTs have finished.
//! - **Remote datacenters** (Contrarian §3): a replicated write runs the readers check in the remote
//!   datacenter as in its origin: its `DepCheck`s return the old readers there when the dependencies are
//!   applied, and it is recorded into the old readers of its key when applied.
//! - **Which reads record readers.** Every ROT, including single-key GETs (Fig. 4 does not distinguish).
//! - **Readers-check cost** (`OpMetrics::readers_check`, per local PUT): ROT ids received (total and
//!   distinct), distinct dependency keys checked, and partitions contacted (the writer's own partition counts
//!   when it holds a dependency; it is checked in place, without a message).
//! - **Durable hosts** (`docs/DURABILITY.md`): COPS's reads are read-only (not logged): the clock moves past
//!   a read's logical time through the host (`Ctx::raise_clock`), and a read of a key whose latest write is
//!   not durable yet waits for it. COPS-SNOW's reads record readers and are logged.
//! - **Links**: FIFO (TCP), for the per-origin apply order of replicated writes.
//! - **Session tokens** (`ClientNode::save_session`): the session's logical time, its nearest dependencies
//!   (at most 65 536) and the datacenter where they are known to be applied. Resumed in that datacenter, the
//!   session goes on at once. Resumed in another, they may not be applied there yet (a read could return an
//!   older version of the session's own write, and a COPS PUT, applied at once, could become visible before
//!   its dependencies): the client sends COPS's dependency check for them to their partitions in its
//!   datacenter (`SessionCheck`, answered `SessionOk` once every dependency is applied there; a dependency
//!   implies its own causal past, which the replicated write waited for) and holds every request until all
//!   have answered, sending the checks again with each request held. A session saved before its checks were
//!   answered records no datacenter, so its next resume checks again.

use crate::components::{Pacer, UnloggedWrites, session};
use serde::{Deserialize, Serialize};
use snowline_core::{
    Addr, Check, ClientId, ClientNode, Ctx, DcId, Hlc, InvalidInput, InvalidKind, Key, LinkAssumptions, Message,
    MvStore, OpError, OpId, OpMetrics, PartitionId, Protocol, ProtocolConfig, ReadResult, ReadersCheckCost, Reply,
    Request, ServerId, ServerNode, StoredVersion, Topology, Value, Version,
};
use std::collections::{BTreeMap, BTreeSet, VecDeque};

/// Where COPS-SNOW departs from COPS.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Variant {
    /// COPS (Eiger without write transactions): ROTs in at most two rounds.
    Cops,
    /// COPS-SNOW / CC-LO: one-round ROTs, readers check on every PUT.
    CopsSnow,
}

impl Variant {
    pub fn name(self) -> &'static str {
        match self {
            Variant::Cops => Cops::NAME,
            Variant::CopsSnow => CopsSnow::NAME,
        }
    }
}

/// The COPS protocol.
pub struct Cops;

/// The COPS-SNOW protocol (CC-LO in Contrarian).
pub struct CopsSnow;

/// The two protocols share messages, timers and node types.
pub trait CopsFamily: Protocol<Msg = CopsMsg, Timer = CopsTimer, Server = CopsServer, Client = CopsClient> {
    const VARIANT: Variant;
}

impl CopsFamily for Cops {
    const VARIANT: Variant = Variant::Cops;
}

impl CopsFamily for CopsSnow {
    const VARIANT: Variant = Variant::CopsSnow;
}

macro_rules! cops_protocol {
    ($P:ty, $name:literal) => {
        impl Protocol for $P {
            const NAME: &'static str = $name;
            type Msg = CopsMsg;
            type Timer = CopsTimer;
            type Server = CopsServer;
            type Client = CopsClient;
            const OFFERS: snowline_core::Offers = snowline_core::Offers::CAUSAL;

            fn links() -> LinkAssumptions {
                LinkAssumptions { fifo: true }
            }

            fn server(id: ServerId, topology: Topology, config: &ProtocolConfig) -> CopsServer {
                CopsServer::new(<$P as CopsFamily>::VARIANT, id, topology, config.clone())
            }

            fn client(id: ClientId, dc: DcId, topology: Topology, config: &ProtocolConfig) -> CopsClient {
                CopsClient::new(<$P as CopsFamily>::VARIANT, id, dc, topology, config.clone())
            }
        }

        impl ServerNode<$P> for CopsServer {
            fn on_start(&mut self, cx: &mut Ctx<'_, $P>) {
                self.start(cx);
            }
            fn on_message(&mut self, cx: &mut Ctx<'_, $P>, from: Addr, msg: CopsMsg) -> Result<(), InvalidInput> {
                self.message(cx, from, msg)
            }
            fn on_timer(&mut self, cx: &mut Ctx<'_, $P>, timer: CopsTimer) {
                self.timer(cx, timer);
            }
            fn stored_versions(&self) -> usize {
                self.store.version_count()
            }
        }

        impl ClientNode<$P> for CopsClient {
            fn save_session(&self) -> Vec<u8> {
                CopsClient::save_session(self)
            }
            fn resume_session(&mut self, saved: &[u8]) -> Result<(), String> {
                CopsClient::resume_session(self, saved)
            }
            fn on_request(&mut self, cx: &mut Ctx<'_, $P>, op: OpId, request: Request) {
                self.request(cx, op, request);
            }
            fn on_message(&mut self, cx: &mut Ctx<'_, $P>, from: Addr, msg: CopsMsg) {
                self.message(cx, from, msg);
            }
        }
    };
}

cops_protocol!(Cops, "cops");
cops_protocol!(CopsSnow, "cops-snow");

/// A read-only transaction's id: the client that runs it and its sequence number in that session, so that
/// readers records and readers-check replies can keep one id per client (Contrarian §5.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct RotId {
    pub client: ClientId,
    pub seq: u64,
}

/// A causal dependency: this version of this key (COPS's nearest dependencies).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Dep {
    pub key: Key,
    pub version: Version,
}

/// A pending write at the partition that runs its dependency / readers check, unique at that partition.
pub type WriteId = u64;

/// One key's answer to a read.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReadItem {
    pub key: Key,
    pub value: Option<Value>,
    pub version: Version,
    /// The version's local visibility time (Eiger's earliest valid time); 0 for the initial version.
    pub evt: u64,
    /// The latest logical time at which the answering server vouches the version is current (Eiger's LVT);
    /// for a read at a given time, that time.
    pub lvt: u64,
    /// Newer versions of the key the server had when it answered.
    pub skipped: u32,
}

/// A completed PUT.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PutDone {
    pub version: Version,
    /// Its visibility time at the partition (the client's causal time moves past it).
    pub evt: u64,
    pub readers_check: Option<ReadersCheckCost>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum CopsMsg {
    /// Client → partition: read these keys (COPS round 1; COPS-SNOW's only round). `ts` is the client's
    /// causal time, which the server's clock observes.
    Read { op: OpId, rot: RotId, keys: Vec<Key>, ts: u64 },
    /// Client → partition, COPS round 2: read the versions valid at logical time `at`.
    ReadAt { op: OpId, keys: Vec<Key>, at: u64 },
    /// Partition → client: one item per key, in request order.
    ReadReply { op: OpId, round: u32, items: Vec<ReadItem> },
    /// Client → the key's partition: a PUT with the session's nearest dependencies and causal time.
    Put { op: OpId, key: Key, value: Value, deps: Vec<Dep>, ts: u64 },
    /// Partition → client.
    PutReply { op: OpId, result: Result<PutDone, OpError> },
    /// Partition → sibling partitions: a local write to apply once its dependencies are.
    Replicate { key: Key, value: Value, version: Version, deps: Vec<Dep> },
    /// Writer's partition → a partition holding dependencies: answer once they are all applied here; with
    /// `readers`, return their keys' old readers (COPS-SNOW's readers check).
    DepCheck { write: WriteId, deps: Vec<Dep>, readers: bool },
    /// The answer: the partition's clock (≥ the dependencies' visibility times) and at most one ROT id per
    /// client.
    DepOk { write: WriteId, clock: u64, old_readers: Vec<RotId> },
    /// Client → a partition of its datacenter: answer once these dependencies (keys of this partition) are
    /// applied here. A session resumed from another datacenter sends it before anything else (module docs,
    /// "Session tokens"); `check` numbers the client's checks.
    SessionCheck { check: u64, deps: Vec<Dep> },
    /// The answer to a `SessionCheck`.
    SessionOk { check: u64 },
}

impl Message for CopsMsg {
    fn kind(&self) -> &'static str {
        match self {
            CopsMsg::Read { .. } => "read",
            CopsMsg::ReadAt { .. } => "read-at",
            CopsMsg::ReadReply { .. } => "read-reply",
            CopsMsg::Put { .. } => "put",
            CopsMsg::PutReply { .. } => "put-reply",
            CopsMsg::Replicate { .. } => "replicate",
            CopsMsg::DepCheck { .. } => "dep-check",
            CopsMsg::DepOk { .. } => "dep-ok",
            CopsMsg::SessionCheck { .. } => "session-check",
            CopsMsg::SessionOk { .. } => "session-ok",
        }
    }

    fn is_client_write(&self) -> bool {
        matches!(self, CopsMsg::Put { .. })
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum CopsTimer {
    /// Version GC, and under COPS-SNOW readers-record GC; re-armed every `gc_interval_ms`.
    Gc,
}

/// Per-version metadata: the local visibility time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct Meta {
    evt: u64,
}

/// One ROT in a key's readers record.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct ReaderEntry {
    seq: u64,
    /// The local logical time whose snapshot this ROT must read.
    point: u64,
    /// Physical time of insertion in this key's readers record (for GC).
    inserted_ns: u64,
}

/// A key's readers record (COPS-SNOW): one entry per client in each part.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
struct Readers {
    /// `curr_rdrs`: ROTs that read the current version.
    curr: BTreeMap<ClientId, ReaderEntry>,
    /// `old_rdrs`: ROTs that must read an older version.
    old: BTreeMap<ClientId, ReaderEntry>,
}

impl Readers {
    fn merge_old(&mut self, client: ClientId, e: ReaderEntry, expired: impl Fn(&ReaderEntry) -> bool) {
        match self.old.get_mut(&client) {
            Some(o) if o.seq == e.seq && !expired(o) => {
                o.point = o.point.min(e.point);
                o.inserted_ns = o.inserted_ns.max(e.inserted_ns);
            }
            Some(o) if o.seq > e.seq && !expired(o) => {}
            _ => {
                self.old.insert(client, e);
            }
        }
    }

    fn is_empty(&self) -> bool {
        self.curr.is_empty() && self.old.is_empty()
    }
}

#[derive(Debug, Serialize, Deserialize)]
enum WriteOrigin {
    Local { client: ClientId, op: OpId, ts: u64 },
    Remote { version: Version },
}

/// A write waiting for its dependency / readers check at its key's partition.
#[derive(Debug, Serialize, Deserialize)]
struct PendingWrite {
    key: Key,
    value: Value,
    deps: Vec<Dep>,
    origin: WriteOrigin,
    awaiting: usize,
    /// The partitions whose `DepOk` is still awaited (a second or unasked one is refused).
    asked: BTreeSet<PartitionId>,
    /// The highest clock among the `DepOk`s.
    dep_clock: u64,
    /// Old readers collected, one per client (the latest ROT).
    collected: BTreeMap<ClientId, u64>,
    distinct: BTreeSet<RotId>,
    cost: ReadersCheckCost,
    ready: bool,
}

/// A `DepCheck` waiting here for a dependency to be applied.
#[derive(Debug, Serialize, Deserialize)]
struct WaitingCheck {
    /// A partition of this datacenter (a write's check), or a client (a resumed session's check).
    reply_to: Addr,
    write: WriteId,
    deps: Vec<Dep>,
    /// Dependencies before this index are satisfied.
    next: usize,
    readers: bool,
}

/// A partition server.
#[derive(Serialize, Deserialize)]
pub struct CopsServer {
    variant: Variant,
    id: ServerId,
    topology: Topology,
    config: ProtocolConfig,
    clock: Hlc,
    store: MvStore<Meta>,
    /// Per key, per origin datacenter: the highest version time applied here (in origin order).
    applied: BTreeMap<Key, Vec<u64>>,
    /// COPS-SNOW readers records.
    readers: BTreeMap<Key, Readers>,
    waiting: BTreeMap<u64, WaitingCheck>,
    /// Waiting checks by the `(key, origin)` and version time they wait for.
    wait_index: BTreeMap<(Key, DcId), BTreeMap<u64, Vec<u64>>>,
    next_wait: u64,
    writes: BTreeMap<WriteId, PendingWrite>,
    next_write: WriteId,
    /// Replicated writes of one key from one origin, in arrival (= origin) order.
    apply_queue: BTreeMap<(Key, DcId), VecDeque<WriteId>>,
    /// `DepOk`s this server addressed to itself, handled after the current input.
    internal: VecDeque<(WriteId, u64, Vec<RotId>)>,
    gc_horizon: u64,
    stale_reads: u64,
    /// Durability (`Ctx::read_only`, COPS only): the applied writes a read may have to wait for.
    unlogged_writes: UnloggedWrites,
    /// The garbage-collection schedule: it backs off while nothing changes (`idle_backoff_ms`).
    gc_pacer: Pacer,
    /// Versions held after the last collection (a change since means there is work again).
    gc_versions_seen: usize,
}

impl CopsServer {
    pub fn new(variant: Variant, id: ServerId, topology: Topology, config: ProtocolConfig) -> Self {
        Self {
            variant,
            id,
            topology,
            clock: Hlc::default(),
            store: MvStore::new(),
            unlogged_writes: UnloggedWrites::default(),
            applied: BTreeMap::new(),
            readers: BTreeMap::new(),
            waiting: BTreeMap::new(),
            wait_index: BTreeMap::new(),
            next_wait: 0,
            writes: BTreeMap::new(),
            next_write: 0,
            apply_queue: BTreeMap::new(),
            internal: VecDeque::new(),
            gc_horizon: 0,
            stale_reads: 0,
            gc_pacer: Pacer::new(config.gc_interval_ms * 1_000_000, config.idle_backoff_ms * 1_000_000),
            gc_versions_seen: 0,
            config,
        }
    }

    /// The stored versions of `key`, oldest first, with their visibility times (for tests and inspection).
    pub fn versions(&self, key: &str) -> Vec<(Version, Value, u64)> {
        self.store.versions(key).iter().map(|v| (v.version, v.value.clone(), v.meta.evt)).collect()
    }

    /// This server's logical clock.
    pub fn clock(&self) -> u64 {
        self.clock.current()
    }

    /// `curr_rdrs[key]` (COPS-SNOW): `(ROT id, logical time)`.
    pub fn current_readers(&self, key: &str) -> Vec<(RotId, u64)> {
        self.readers.get(key).map_or_else(Vec::new, |r| {
            r.curr.iter().map(|(c, e)| (RotId { client: *c, seq: e.seq }, e.point)).collect()
        })
    }

    /// `old_rdrs[key]` (COPS-SNOW): `(ROT id, logical time)`.
    pub fn old_readers(&self, key: &str) -> Vec<(RotId, u64)> {
        self.readers
            .get(key)
            .map_or_else(Vec::new, |r| r.old.iter().map(|(c, e)| (RotId { client: *c, seq: e.seq }, e.point)).collect())
    }

    /// Writes waiting for their dependency or readers check here.
    pub fn pending_writes(&self) -> usize {
        self.writes.len()
    }

    /// Dependency checks waiting here for a dependency to be applied.
    pub fn waiting_checks(&self) -> usize {
        self.waiting.len()
    }

    /// Reads served at a logical time older than the version-GC horizon (see the module doc).
    pub fn stale_reads(&self) -> u64 {
        self.stale_reads
    }

    fn old_readers_gc_ns(&self) -> u64 {
        self.config.old_readers_gc_ms * 1_000_000
    }

    fn expired(gc_ns: u64, now: u64) -> impl Fn(&ReaderEntry) -> bool {
        move |e| e.inserted_ns.saturating_add(gc_ns) <= now
    }

    fn start<P: CopsFamily>(&mut self, cx: &mut Ctx<'_, P>) {
        let (delay, _) = self.gc_pacer.start(cx.now_ns());
        cx.set_timer(delay, CopsTimer::Gc);
    }

    fn timer<P: CopsFamily>(&mut self, cx: &mut Ctx<'_, P>, timer: CopsTimer) {
        match timer {
            CopsTimer::Gc => {
                let mut retain_ms = self.config.gc_retain_ms;
                if self.variant == Variant::CopsSnow {
                    retain_ms = retain_ms.max(2 * self.config.old_readers_gc_ms);
                }
                self.gc_horizon = self.clock.current().saturating_sub(retain_ms * 1_000_000);
                let dropped = self.store.collect_garbage_by(self.gc_horizon, |v| v.meta.evt);
                let mut swept = 0;
                if self.variant == Variant::CopsSnow {
                    let expired = Self::expired(self.old_readers_gc_ns(), cx.now_ns());
                    self.readers.retain(|_, r| {
                        swept += r.curr.len() + r.old.len();
                        r.curr.retain(|_, e| !expired(e));
                        r.old.retain(|_, e| !expired(e));
                        !r.is_empty()
                    });
                }
                cx.charge((dropped + swept) as u64 / 16 + 1);
                // One timer chain (nothing pulls it in): versions that came or went, or readers records
                // left to expire, keep the base period; otherwise it backs off.
                let news =
                    self.store.version_count() != self.gc_versions_seen || dropped > 0 || !self.readers.is_empty();
                self.gc_versions_seen = self.store.version_count();
                let (delay, _) = self.gc_pacer.next(cx.now_ns(), news);
                cx.set_timer(delay, CopsTimer::Gc);
            }
        }
    }

    /// Everything a message says that the handlers rely on, checked against the topology, this server's
    /// clock and the origin order of replicated versions before the message touches any state
    /// (`snowline_core::validate`).
    fn validate(&self, now_ns: u64, from: Addr, msg: &CopsMsg) -> Result<(), InvalidInput> {
        let check = Check::new(&self.topology, &self.config, now_ns, from, msg.kind());
        let me = self.id;
        let deps_valid = |deps: &[Dep]| deps.iter().try_for_each(|d| check.version(&d.version, "dependency"));
        match msg {
            CopsMsg::Read { rot, keys, ts, .. } => {
                let c = check.client()?;
                check.ensure(rot.client == c, InvalidKind::Sender, || format!("{c} sends a ROT of {}", rot.client))?;
                check.time(*ts, "causal time")?;
                check.request_keys(keys)?;
                keys.iter().try_for_each(|k| check.key_on(k, me.partition))?;
            }
            CopsMsg::ReadAt { keys, at, .. } => {
                check.client()?;
                check.time(*at, "read time")?;
                check.request_keys(keys)?;
                keys.iter().try_for_each(|k| check.key_on(k, me.partition))?;
            }
            CopsMsg::Put { key, value, deps, ts, .. } => {
                check.client()?;
                check.request_writes([(key, value)], [])?;
                check.key_on(key, me.partition)?;
                check.time(*ts, "causal time")?;
                deps_valid(deps)?;
            }
            CopsMsg::ReadReply { .. } | CopsMsg::PutReply { .. } | CopsMsg::SessionOk { .. } => {
                return Err(check.fail(InvalidKind::Sender, "only a client is sent this"));
            }
            CopsMsg::Replicate { key, version, deps, .. } => {
                let sibling = check.sibling(me)?;
                check.ensure(version.dc == sibling.dc, InvalidKind::Sender, || {
                    format!("{sibling} replicates a version of dc{}", version.dc)
                })?;
                check.version(version, "version")?;
                check.key_on(key, me.partition)?;
                deps_valid(deps)?;
                // Versions of a key from one origin arrive in origin order (FIFO links, increasing clocks):
                // one that does not follow the last one applied or queued is a duplicate or a forgery.
                let applied = self.applied.get(key).map_or(0, |a| a[usize::from(version.dc)]);
                let queued = self
                    .apply_queue
                    .get(&(key.clone(), version.dc))
                    .and_then(|q| q.back())
                    .and_then(|id| self.writes.get(id))
                    .map_or(0, |w| match w.origin {
                        WriteOrigin::Remote { version } => version.time,
                        WriteOrigin::Local { .. } => 0,
                    });
                check.ensure(version.time > applied.max(queued), InvalidKind::Unexpected, || {
                    format!(
                        "version {} of {key:?} from dc{} does not follow {}",
                        version.time,
                        version.dc,
                        applied.max(queued)
                    )
                })?;
            }
            CopsMsg::DepCheck { deps, .. } => {
                check.local_peer(me)?;
                deps_valid(deps)?;
                deps.iter().try_for_each(|d| check.key_on(&d.key, me.partition))?;
            }
            CopsMsg::DepOk { clock, .. } => {
                check.local_peer(me)?;
                check.time(*clock, "clock")?;
            }
            CopsMsg::SessionCheck { deps, .. } => {
                check.client()?;
                check.request_keys(deps.iter().map(|d| &d.key))?;
                deps_valid(deps)?;
                deps.iter().try_for_each(|d| check.key_on(&d.key, me.partition))?;
            }
        }
        Ok(())
    }

    fn message<P: CopsFamily>(&mut self, cx: &mut Ctx<'_, P>, from: Addr, msg: CopsMsg) -> Result<(), InvalidInput> {
        cx.charge(1);
        self.validate(cx.now_ns(), from, &msg)?;
        match (from, msg) {
            (Addr::Client(c), CopsMsg::Read { op, rot, keys, ts }) => {
                let items = self.read(cx, rot, keys, ts);
                cx.send(c, CopsMsg::ReadReply { op, round: 1, items });
            }
            (Addr::Client(c), CopsMsg::ReadAt { op, keys, at }) => {
                // Read-only: the clock moves past `at` through the host (later versions get larger EVTs).
                cx.read_only();
                cx.charge(keys.len() as u64);
                cx.raise_clock(at.saturating_add(1));
                self.wait_for_writes(cx, &keys);
                let items = keys.into_iter().map(|k| self.read_at(k, at)).collect();
                cx.send(c, CopsMsg::ReadReply { op, round: 2, items });
            }
            (Addr::Client(client), CopsMsg::Put { op, key, value, deps, ts }) => {
                cx.charge(1 + deps.len() as u64);
                // COPS applies a local PUT at once (its dependencies are visible here); COPS-SNOW runs the
                // readers check against its dependencies first (Fig. 4 lines 26–28).
                let checks = if self.variant == Variant::CopsSnow { deps.clone() } else { Vec::new() };
                self.start_write(cx, key, value, deps, WriteOrigin::Local { client, op, ts }, checks);
            }
            (Addr::Server(_), CopsMsg::Replicate { key, value, version, deps }) => {
                cx.charge(1 + deps.len() as u64);
                let checks = deps.clone();
                self.start_write(cx, key, value, deps, WriteOrigin::Remote { version }, checks);
            }
            (Addr::Server(s), CopsMsg::DepCheck { write, deps, readers }) => {
                cx.charge(deps.len() as u64);
                let check = WaitingCheck { reply_to: Addr::Server(s), write, deps, next: 0, readers };
                self.advance_check(cx, check);
            }
            (Addr::Client(c), CopsMsg::SessionCheck { check, deps }) => {
                cx.charge(deps.len() as u64);
                let check = WaitingCheck { reply_to: Addr::Client(c), write: check, deps, next: 0, readers: false };
                self.advance_check(cx, check);
            }
            (Addr::Server(s), CopsMsg::DepOk { write, clock, old_readers }) => {
                self.dep_ok(cx, s.partition, write, clock, old_readers);
            }
            (from, msg) => unreachable!("validate admits no {} from {from}", msg.kind()),
        }
        while let Some((write, clock, old_readers)) = self.internal.pop_front() {
            self.dep_ok(cx, self.id.partition, write, clock, old_readers);
        }
        Ok(())
    }

    // ---- Reads ----

    /// Round 1 (COPS) or the only round (COPS-SNOW).
    fn read<P: CopsFamily>(&mut self, cx: &mut Ctx<'_, P>, rot: RotId, keys: Vec<Key>, ts: u64) -> Vec<ReadItem> {
        cx.charge(keys.len() as u64);
        let now = cx.now_ns();
        let lvt = if self.variant == Variant::Cops {
            // COPS's reads change no state (read-only: a durable host does not log them): the clock moves
            // past the read's logical time through the host. COPS-SNOW's record their readers.
            cx.read_only();
            self.wait_for_writes(cx, &keys);
            let lvt = now.max(self.clock.current().max(ts).saturating_add(1));
            cx.raise_clock(lvt.saturating_add(1));
            lvt
        } else {
            self.clock.observe(now, ts)
        };
        let mut items = Vec::with_capacity(keys.len());
        for key in keys {
            if self.variant == Variant::CopsSnow {
                let expired = Self::expired(self.old_readers_gc_ns(), now);
                let old = self.readers.get(&key).and_then(|r| r.old.get(&rot.client)).copied();
                // Fig. 4 lines 18–20: an old reader reads the version valid at its recorded time.
                if let Some(e) = old.filter(|e| e.seq == rot.seq && !expired(e)) {
                    cx.charge(1);
                    items.push(self.read_at(key, e.point));
                    continue;
                }
                // Lines 21–22: record the read in curr_rdrs with its logical time.
                let r = self.readers.entry(key.clone()).or_default();
                if r.curr.get(&rot.client).is_none_or(|e| e.seq <= rot.seq || expired(e)) {
                    r.curr.insert(rot.client, ReaderEntry { seq: rot.seq, point: lvt, inserted_ns: now });
                }
            }
            let (found, skipped) = self.store.newest_where(&key, |_| true);
            items.push(match found {
                Some(v) => {
                    ReadItem { key, value: Some(v.value.clone()), version: v.version, evt: v.meta.evt, lvt, skipped }
                }
                None => ReadItem { key, value: None, version: Version::INITIAL, evt: 0, lvt, skipped },
            });
        }
        items
    }

    /// A read-only read of `keys` returns what a logged write applied: it waits for that write's record.
    fn wait_for_writes<P: CopsFamily>(&self, cx: &mut Ctx<'_, P>, keys: &[Key]) {
        for key in keys {
            self.unlogged_writes.wait_for(cx, key);
        }
    }

    /// The version of `key` valid at logical time `at`: the newest with `EVT <= at`.
    fn read_at(&mut self, key: Key, at: u64) -> ReadItem {
        if at < self.gc_horizon {
            self.stale_reads += 1;
        }
        let chain = self.store.versions(&key);
        let (found, skipped) = self.store.newest_where(&key, |v| v.meta.evt <= at);
        // Past the GC horizon the version may be gone: serve the oldest kept one (module doc).
        let found = match found {
            None if at < self.gc_horizon && !chain.is_empty() => Some((&chain[0], chain.len() as u32 - 1)),
            other => other.map(|v| (v, skipped)),
        };
        match found {
            Some((v, skipped)) => {
                ReadItem { key, value: Some(v.value.clone()), version: v.version, evt: v.meta.evt, lvt: at, skipped }
            }
            None => ReadItem { key, value: None, version: Version::INITIAL, evt: 0, lvt: at, skipped },
        }
    }

    // ---- Writes ----

    /// Register a write and send its dependency / readers checks (`checks`: the dependencies to check).
    fn start_write<P: CopsFamily>(
        &mut self,
        cx: &mut Ctx<'_, P>,
        key: Key,
        value: Value,
        deps: Vec<Dep>,
        origin: WriteOrigin,
        checks: Vec<Dep>,
    ) {
        let write = self.next_write;
        self.next_write += 1;
        let mut by_partition: BTreeMap<PartitionId, Vec<Dep>> = BTreeMap::new();
        for d in checks {
            if d.version != Version::INITIAL {
                by_partition.entry(self.topology.partition_of(&d.key)).or_default().push(d);
            }
        }
        let keys: BTreeSet<&Key> = by_partition.values().flatten().map(|d| &d.key).collect();
        let cost = ReadersCheckCost {
            keys_checked: keys.len() as u64,
            partitions_contacted: by_partition.len() as u64,
            ..Default::default()
        };
        if let WriteOrigin::Remote { version } = &origin {
            let queue = self.apply_queue.entry((key.clone(), version.dc)).or_default();
            queue.push_back(write);
        }
        let origin_dc = match &origin {
            WriteOrigin::Remote { version } => Some(version.dc),
            WriteOrigin::Local { .. } => None,
        };
        let pending = PendingWrite {
            key: key.clone(),
            value,
            deps,
            origin,
            awaiting: by_partition.len(),
            asked: by_partition.keys().copied().collect(),
            dep_clock: 0,
            collected: BTreeMap::new(),
            distinct: BTreeSet::new(),
            cost,
            ready: by_partition.is_empty(),
        };
        self.writes.insert(write, pending);
        let readers = self.variant == Variant::CopsSnow;
        for (p, deps) in by_partition {
            if p == self.id.partition {
                let check = WaitingCheck { reply_to: Addr::Server(self.id), write, deps, next: 0, readers };
                self.advance_check(cx, check);
            } else {
                cx.send(ServerId::new(self.id.dc, p), CopsMsg::DepCheck { write, deps, readers });
            }
        }
        if self.writes.get(&write).is_some_and(|w| w.ready) {
            self.write_ready(cx, write, &key, origin_dc);
        }
    }

    /// A `DepOk` for one of this server's pending writes.
    fn dep_ok<P: CopsFamily>(
        &mut self,
        cx: &mut Ctx<'_, P>,
        from: PartitionId,
        write: WriteId,
        clock: u64,
        old_readers: Vec<RotId>,
    ) {
        let Some(w) = self.writes.get_mut(&write) else { return };
        if w.awaiting == 0 || !w.asked.remove(&from) {
            return;
        }
        cx.charge(1 + old_readers.len() as u64);
        w.dep_clock = w.dep_clock.max(clock);
        w.cost.rot_ids_total += old_readers.len() as u64;
        for r in old_readers {
            w.distinct.insert(r);
            let seq = w.collected.entry(r.client).or_insert(r.seq);
            *seq = (*seq).max(r.seq);
        }
        w.awaiting -= 1;
        if w.awaiting == 0 {
            w.ready = true;
            let key = w.key.clone();
            let origin_dc = match &w.origin {
                WriteOrigin::Remote { version } => Some(version.dc),
                WriteOrigin::Local { .. } => None,
            };
            self.write_ready(cx, write, &key, origin_dc);
        }
    }

    /// A write's checks are done: apply it, or (replicated) apply its key's queue from its origin in order.
    fn write_ready<P: CopsFamily>(&mut self, cx: &mut Ctx<'_, P>, write: WriteId, key: &Key, origin_dc: Option<DcId>) {
        let Some(dc) = origin_dc else {
            let w = self.writes.remove(&write).expect("pending");
            self.apply(cx, w);
            return;
        };
        let qkey = (key.clone(), dc);
        loop {
            let Some(queue) = self.apply_queue.get_mut(&qkey) else { return };
            let head = match queue.front() {
                Some(id) if self.writes[id].ready => *id,
                Some(_) => return,
                None => {
                    self.apply_queue.remove(&qkey);
                    return;
                }
            };
            queue.pop_front();
            let w = self.writes.remove(&head).expect("queued writes are pending");
            self.apply(cx, w);
        }
    }

    /// Make a write visible (Fig. 4 lines 28–31), answer the client or replicate, and wake dependency checks.
    fn apply<P: CopsFamily>(&mut self, cx: &mut Ctx<'_, P>, w: PendingWrite) {
        let now = cx.now_ns();
        cx.charge(1);
        self.clock.advance_to(w.dep_clock);
        match &w.origin {
            WriteOrigin::Local { ts, .. } => self.clock.advance_to(*ts),
            WriteOrigin::Remote { version } => self.clock.advance_to(version.time),
        }
        if self.variant == Variant::CopsSnow {
            // Every version visible now has EVT <= point; this write gets a larger one.
            let point = self.clock.current();
            let expired = Self::expired(self.old_readers_gc_ns(), now);
            let r = self.readers.entry(w.key.clone()).or_default();
            cx.charge((r.curr.len() + w.collected.len()) as u64);
            // Lines 29–30: the current readers become old readers, with the time of their read.
            for (client, e) in std::mem::take(&mut r.curr) {
                if !expired(&e) {
                    r.merge_old(client, e, &expired);
                }
            }
            // Line 28: the old readers of the dependencies become old readers of this key.
            for (client, seq) in &w.collected {
                r.merge_old(*client, ReaderEntry { seq: *seq, point, inserted_ns: now }, &expired);
            }
            if r.is_empty() {
                self.readers.remove(&w.key);
            }
        }
        let evt = self.clock.tick(now);
        let version = match &w.origin {
            WriteOrigin::Local { .. } => Version { time: evt, dc: self.id.dc },
            WriteOrigin::Remote { version } => *version,
        };
        let newer = self.store.latest(&w.key).is_none_or(|l| (version, &*w.value) > l.order());
        if newer {
            let v = StoredVersion { value: w.value.clone(), version, meta: Meta { evt } };
            self.store.insert(w.key.clone(), v);
            self.unlogged_writes.note(cx, &w.key);
        }
        match w.origin {
            WriteOrigin::Local { client, op, .. } => {
                let readers_check = (self.variant == Variant::CopsSnow).then(|| {
                    let mut cost = w.cost.clone();
                    cost.rot_ids_distinct = w.distinct.len() as u64;
                    cost
                });
                cx.send(client, CopsMsg::PutReply { op, result: Ok(PutDone { version, evt, readers_check }) });
                for sibling in self.topology.siblings(self.id) {
                    let msg = CopsMsg::Replicate {
                        key: w.key.clone(),
                        value: w.value.clone(),
                        version,
                        deps: w.deps.clone(),
                    };
                    cx.send(sibling, msg);
                }
            }
            WriteOrigin::Remote { .. } => {}
        }
        self.raise_applied(cx, w.key, version);
    }

    // ---- Dependency checks ----

    fn is_applied(&self, d: &Dep) -> bool {
        d.version == Version::INITIAL
            || self
                .applied
                .get(&d.key)
                .is_some_and(|a| a.get(d.version.dc as usize).is_some_and(|t| *t >= d.version.time))
    }

    /// Record that `version` of `key` has been applied and wake the checks it satisfies.
    fn raise_applied<P: CopsFamily>(&mut self, cx: &mut Ctx<'_, P>, key: Key, version: Version) {
        let dcs = self.topology.dcs as usize;
        let a = self.applied.entry(key.clone()).or_insert_with(|| vec![0; dcs]);
        let slot = &mut a[version.dc as usize];
        assert!(
            *slot < version.time,
            "{}: versions of {key:?} from dc{} applied out of origin order ({} after {})",
            self.id,
            version.dc,
            version.time,
            *slot
        );
        *slot = version.time;
        let ikey = (key, version.dc);
        let Some(waiters) = self.wait_index.get_mut(&ikey) else { return };
        let later = waiters.split_off(&(version.time + 1));
        let woken = std::mem::replace(waiters, later);
        if waiters.is_empty() {
            self.wait_index.remove(&ikey);
        }
        for id in woken.into_values().flatten() {
            let check = self.waiting.remove(&id).expect("indexed checks wait");
            self.advance_check(cx, check);
        }
    }

    /// Skip the satisfied dependencies of a check; wait on the first unsatisfied one, or answer.
    fn advance_check<P: CopsFamily>(&mut self, cx: &mut Ctx<'_, P>, mut check: WaitingCheck) {
        while let Some(d) = check.deps.get(check.next) {
            if !self.is_applied(d) {
                let id = self.next_wait;
                self.next_wait += 1;
                let slot = self.wait_index.entry((d.key.clone(), d.version.dc)).or_default();
                slot.entry(d.version.time).or_default().push(id);
                self.waiting.insert(id, check);
                return;
            }
            check.next += 1;
        }
        let old_readers = if check.readers { self.old_readers_of(cx, &check.deps) } else { Vec::new() };
        let clock = self.clock.current();
        match check.reply_to {
            Addr::Server(s) if s == self.id => self.internal.push_back((check.write, clock, old_readers)),
            Addr::Server(s) => cx.send(s, CopsMsg::DepOk { write: check.write, clock, old_readers }),
            Addr::Client(c) => cx.send(c, CopsMsg::SessionOk { check: check.write }),
        }
    }

    /// Fig. 4 line 36: the old readers of the dependencies' keys, at most one ROT id per client (its latest).
    fn old_readers_of<P: CopsFamily>(&self, cx: &mut Ctx<'_, P>, deps: &[Dep]) -> Vec<RotId> {
        let expired = Self::expired(self.old_readers_gc_ns(), cx.now_ns());
        let keys: BTreeSet<&Key> = deps.iter().map(|d| &d.key).collect();
        let mut latest: BTreeMap<ClientId, u64> = BTreeMap::new();
        for key in keys {
            let Some(r) = self.readers.get(key) else { continue };
            cx.charge(r.old.len() as u64);
            for (client, e) in r.old.iter().filter(|(_, e)| !expired(e)) {
                let seq = latest.entry(*client).or_insert(e.seq);
                *seq = (*seq).max(e.seq);
            }
        }
        latest.into_iter().map(|(client, seq)| RotId { client, seq }).collect()
    }
}

/// An operation in flight at a client.
#[derive(Debug)]
enum ClientOp {
    Rot {
        keys: Vec<Key>,
        items: Vec<Option<ReadItem>>,
        /// The partitions still to answer in the current round, with the request positions sent to each.
        slots: BTreeMap<PartitionId, Vec<usize>>,
        round: u32,
        returned: u32,
    },
    Put {
        key: Key,
    },
}

/// The client session: the COPS client library.
pub struct CopsClient {
    variant: Variant,
    id: ClientId,
    dc: DcId,
    topology: Topology,
    config: ProtocolConfig,
    /// The highest logical time of anything the session has seen (its Lamport time).
    ts: u64,
    /// Nearest dependencies: per key and origin datacenter, the newest version time depended upon.
    deps: BTreeMap<(Key, DcId), u64>,
    next_rot: u64,
    ops: BTreeMap<OpId, ClientOp>,
    /// A session resumed from another datacenter: its `SessionCheck`s not yet answered, by number, with the
    /// partition asked and the dependencies (module docs, "Session tokens").
    checks: BTreeMap<u64, (PartitionId, Vec<Dep>)>,
    /// Requests held until every check is answered.
    held: VecDeque<(OpId, Request)>,
}

/// What a COPS or COPS-SNOW session token carries (module docs, "Session tokens").
#[derive(Serialize, Deserialize)]
struct SavedSession {
    /// The datacenter where every dependency is known to be applied (`None`: a resumed session whose
    /// checks were still unanswered).
    applied_in: Option<DcId>,
    ts: u64,
    /// The nearest dependencies: `(key, origin datacenter, version time)`.
    deps: Vec<(Key, DcId, u64)>,
}

/// The most nearest dependencies a token may carry.
const MAX_SAVED_DEPS: usize = 1 << 16;

impl CopsClient {
    pub fn new(variant: Variant, id: ClientId, dc: DcId, topology: Topology, config: ProtocolConfig) -> Self {
        Self {
            variant,
            id,
            dc,
            topology,
            config,
            ts: 0,
            deps: BTreeMap::new(),
            next_rot: 0,
            ops: BTreeMap::new(),
            checks: BTreeMap::new(),
            held: VecDeque::new(),
        }
    }

    /// This session's token.
    pub fn save_session(&self) -> Vec<u8> {
        let applied_in = self.checks.is_empty().then_some(self.dc);
        let deps = self.deps.iter().map(|((key, dc), time)| (key.clone(), *dc, *time)).collect();
        session::encode(self.variant.name(), &SavedSession { applied_in, ts: self.ts, deps })
    }

    /// Carry on from a token. From another datacenter, the dependencies may not be applied here yet: the
    /// session then asks their partitions here (`SessionCheck`, COPS's dependency check) and holds every
    /// request until all have answered.
    pub fn resume_session(&mut self, saved: &[u8]) -> Result<(), String> {
        let name = self.variant.name();
        let Some(s) = session::decode::<SavedSession>(name, saved)? else { return Ok(()) };
        if let Some(dc) = s.applied_in {
            session::check_dc(&self.topology, dc, "the session's datacenter")?;
        }
        session::check_time(s.ts, "the session's causal time")?;
        if s.deps.len() > MAX_SAVED_DEPS {
            return Err(format!("{} dependencies in a {name} session token, more than {MAX_SAVED_DEPS}", s.deps.len()));
        }
        for (key, dc, time) in &s.deps {
            session::check_sizes(&self.config, key, None)?;
            session::check_version(&self.topology, &Version { time: *time, dc: *dc }, "a dependency")?;
        }
        self.ts = self.ts.max(s.ts);
        let mut to_check: BTreeMap<PartitionId, Vec<Dep>> = BTreeMap::new();
        for (key, dc, time) in s.deps {
            if time == 0 {
                continue;
            }
            if s.applied_in != Some(self.dc) {
                let dep = Dep { key: key.clone(), version: Version { time, dc } };
                to_check.entry(self.topology.partition_of(&key)).or_default().push(dep);
            }
            let t = self.deps.entry((key, dc)).or_insert(time);
            *t = (*t).max(time);
        }
        let chunk = self.config.max_keys_per_request.max(1);
        for (p, deps) in to_check {
            for part in deps.chunks(chunk) {
                let n = self.checks.keys().next_back().map_or(0, |n| n + 1);
                self.checks.insert(n, (p, part.to_vec()));
            }
        }
        Ok(())
    }

    pub fn id(&self) -> ClientId {
        self.id
    }

    /// The session's nearest dependencies, as the next PUT will send them.
    pub fn context(&self) -> Vec<Dep> {
        self.deps
            .iter()
            .map(|((key, dc), time)| Dep { key: key.clone(), version: Version { time: *time, dc: *dc } })
            .collect()
    }

    /// The session's logical time.
    pub fn causal_time(&self) -> u64 {
        self.ts
    }

    fn request<P: CopsFamily>(&mut self, cx: &mut Ctx<'_, P>, op: OpId, request: Request) {
        if !self.checks.is_empty() {
            // A resumed session waits until its dependencies are applied here. The checks go out again with
            // each request held (one may have been lost; a server answers a check twice harmlessly).
            for (check, (p, deps)) in &self.checks {
                cx.send(ServerId::new(self.dc, *p), CopsMsg::SessionCheck { check: *check, deps: deps.clone() });
            }
            self.held.push_back((op, request));
            return;
        }
        if let Err(reason) = self.config.check_request(&request) {
            cx.complete(op, Err(OpError::Rejected(reason)));
            return;
        }
        match request {
            Request::RotRounds { .. } => {
                let reason =
                    format!("{}'s read-only transactions are one-shot (SNOW §5.3): name every key in one ROT", P::NAME);
                cx.complete(op, Err(OpError::Rejected(reason)));
            }
            other @ (Request::Begin
            | Request::Read { .. }
            | Request::Commit { .. }
            | Request::Abort
            | Request::Call { .. }) => {
                cx.complete(op, Err(P::OFFERS.refusal(P::NAME, &other)));
            }
            Request::Rot { keys } => {
                let rot = RotId { client: self.id, seq: self.next_rot };
                self.next_rot += 1;
                let mut slots: BTreeMap<PartitionId, Vec<usize>> = BTreeMap::new();
                for (i, key) in keys.iter().enumerate() {
                    slots.entry(self.topology.partition_of(key)).or_default().push(i);
                }
                for (p, positions) in &slots {
                    let keys = positions.iter().map(|i| keys[*i].clone()).collect();
                    cx.send(ServerId::new(self.dc, *p), CopsMsg::Read { op, rot, keys, ts: self.ts });
                }
                let items = vec![None; keys.len()];
                self.ops.insert(op, ClientOp::Rot { keys, items, slots, round: 1, returned: 0 });
            }
            Request::Put { key, value } => {
                let server = self.topology.server_of(self.dc, &key);
                let msg = CopsMsg::Put { op, key: key.clone(), value, deps: self.context(), ts: self.ts };
                cx.send(server, msg);
                self.ops.insert(op, ClientOp::Put { key });
            }
            Request::Update { .. } => {
                let reason = format!("{} has no write transactions: issue single-key PUTs", self.variant.name());
                cx.complete(op, Err(OpError::Rejected(reason)));
            }
        }
    }

    fn message<P: CopsFamily>(&mut self, cx: &mut Ctx<'_, P>, from: Addr, msg: CopsMsg) {
        let Addr::Server(server) = from else { return };
        match msg {
            CopsMsg::ReadReply { op, round, items: got } => {
                let Some(ClientOp::Rot { items, slots, round: current, returned, .. }) = self.ops.get_mut(&op) else {
                    return;
                };
                if round != *current {
                    return;
                }
                // A reply that does not answer every position asked of its partition is ignored, and the
                // partition is still waited for (a round is done only with every position answered).
                if slots.get(&server.partition).is_none_or(|positions| positions.len() != got.len()) {
                    return;
                }
                let positions = slots.remove(&server.partition).expect("checked above");
                *returned += got.len() as u32;
                for (pos, item) in positions.into_iter().zip(got) {
                    items[pos] = Some(item);
                }
                if slots.is_empty() {
                    self.round_done(cx, op);
                }
            }
            CopsMsg::SessionOk { check } => {
                if server.dc != self.dc || self.checks.get(&check).is_none_or(|(p, _)| *p != server.partition) {
                    return;
                }
                self.checks.remove(&check);
                if self.checks.is_empty() {
                    for (op, request) in std::mem::take(&mut self.held) {
                        self.request(cx, op, request);
                    }
                }
            }
            CopsMsg::PutReply { op, result } => {
                let Some(ClientOp::Put { key }) = self.ops.remove(&op) else { return };
                let result = result.map(|done| {
                    // COPS: the new write depends on everything before it, so it is the only nearest
                    // dependency left.
                    self.deps.clear();
                    self.deps.insert((key, done.version.dc), done.version.time);
                    self.ts = self.ts.max(done.evt);
                    let metrics = OpMetrics { rounds: 1, readers_check: done.readers_check, ..Default::default() };
                    Reply { reads: Vec::new(), commit: Some(done.version), metrics, writes: Vec::new() }
                });
                cx.complete(op, result);
            }
            _ => {}
        }
    }

    /// Every partition of the current round answered: finish, or run COPS's second round.
    fn round_done<P: CopsFamily>(&mut self, cx: &mut Ctx<'_, P>, op: OpId) {
        let Some(ClientOp::Rot { keys, items, slots, round, .. }) = self.ops.get_mut(&op) else { return };
        if self.variant == Variant::Cops && *round == 1 {
            // Eiger: the effective time is the latest EVT; values not valid then are re-read at it.
            let eff = items.iter().flatten().map(|i| i.evt).max().unwrap_or(0);
            for (pos, item) in items.iter().enumerate() {
                if item.as_ref().is_some_and(|i| i.lvt < eff) {
                    slots.entry(self.topology.partition_of(&keys[pos])).or_default().push(pos);
                }
            }
            if !slots.is_empty() {
                *round = 2;
                for (p, positions) in slots.iter() {
                    let keys = positions.iter().map(|i| keys[*i].clone()).collect();
                    cx.send(ServerId::new(self.dc, *p), CopsMsg::ReadAt { op, keys, at: eff });
                }
                return;
            }
        }
        let Some(ClientOp::Rot { items, round, returned, .. }) = self.ops.remove(&op) else { return };
        let mut reads = Vec::with_capacity(items.len());
        for item in items {
            let item = item.expect("every position answered");
            self.ts = self.ts.max(item.evt);
            if item.version != Version::INITIAL {
                let t = self.deps.entry((item.key.clone(), item.version.dc)).or_insert(item.version.time);
                *t = (*t).max(item.version.time);
            }
            reads.push(ReadResult {
                key: item.key,
                value: item.value,
                version: item.version,
                versions_skipped: item.skipped,
            });
        }
        let metrics = OpMetrics { rounds: round, versions_returned: returned, ..OpMetrics::default() };
        cx.complete(op, Ok(Reply { reads, commit: None, metrics, writes: Vec::new() }));
    }
}

#[cfg(test)]
mod tests;
