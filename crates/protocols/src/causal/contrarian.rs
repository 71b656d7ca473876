//! **Contrarian** (Didona, Guerraoui, Wang, Zwaenepoel, "Causal Consistency and Latency Optimality: Friend or
//! Foe?", PVLDB 11(11), 2018, §4): causally consistent PUTs and read-only transactions (ROTs) that are
//! nonblocking and one-version but take two rounds, so that PUTs carry no readers-check overhead.
//!
//! # Guarantee
//!
//! Transactional causal consistency (checker level `tcc`) with eventual visibility and convergence (§2.4):
//! every ROT reads a causally consistent snapshot (no `X ⇝ X' ⇝ Y` with `X` and `Y` read), a session never
//! misses a version in its causal past (its own writes, and everything that happened before what it read),
//! every version eventually enters every snapshot, and replicas converge by last writer wins on
//! `(timestamp, datacenter, value)`. There are no write transactions (§2.1: the API is PUT and ROT):
//! `Request::Update` is rejected.
//!
//! # Roles and messages
//!
//! - **Client** (§4.1, §4.2). Keeps the session's *dependency vector* `dv` (one entry per datacenter: the
//!   versions the session depends on) and the last *snapshot vector* it read at. `Put` goes to the key's
//!   partition in the client's datacenter with `dv`; `PutDone` returns the new version's timestamp, which
//!   becomes `dv[m]` (m: the local datacenter). A ROT runs two rounds (§4.2, Fig. 2): `Snapshot` to a
//!   coordinator with `max(dv, last snapshot)`, `SnapshotIs { sv }` back; then `Read { keys, sv }` to every
//!   partition of the ROT in parallel, `ReadReply` with one version per key and its dependency vector. The
//!   session's `dv` then absorbs the dependency vectors of the versions returned.
//! - **Coordinator** (any partition server, §4.2). Computes the snapshot vector `SV`: the local entry is the
//!   maximum of its clock and the client's local entry; each remote entry the maximum of its GSS and the
//!   client's entry. It moves its own clock to `SV[m]`.
//! - **Partition** (§4.1, §4.2). A PUT gets an HLC timestamp greater than every entry of the client's `dv`;
//!   the version's dependency vector is the client's `dv` with the local entry set to the timestamp. A `Read`
//!   with `SV` moves the clock forward to `SV[m]` (instead of blocking: every later local version gets a
//!   larger timestamp) and returns, per key, the newest version `Y` with `Y.DV ≤ SV`. Versions go to the
//!   sibling partitions in the other datacenters (`Replicate`), in timestamp order; after `heartbeat_ms`
//!   without sending one, a partition sends `Heartbeat { time }` with its clock instead.
//! - **Stabilization** (§4.1). A partition's *version vector* `VV` holds, for each remote datacenter, the
//!   timestamp of the latest update or heartbeat received from its replica there. Every `gss_interval_ms` the
//!   partitions of a datacenter exchange their VVs (`Vv`, local entry = the sender's clock) and each computes
//!   the *Global Stable Snapshot* (GSS) as the entry-wise minimum of its own and the latest VV of every peer;
//!   a remote version is stable (readable) once its dependency vector is within the snapshot, whose remote
//!   entries come from the GSS. A partition receiving a VV moves its clock forward to the VV's local entry.
//!
//! # Choices where the paper is silent
//!
//! - **Coordinator**: the client picks one of the ROT's partitions (in its datacenter) uniformly at random
//!   with its seeded generator (§4.2: "selects one of them as the coordinator").
//! - **Who sends the round-2 reads**: the client, as §4.2 says ("sends it back to the client. The client then
//!   contacts the partitions"). `OpMetrics::rounds` = 2.
//! - **The client's snapshot**: the client sends the coordinator `max(dv, last SV)` (Fig. 2's caption: "the
//!   client always piggybacks on its requests the last snapshot it has seen, so as to observe monotonically
//!   increasing snapshots"), but a PUT carries only `dv`, the versions actually observed, so a PUT does not
//!   inherit false dependencies on the whole snapshot.
//! - **Clock reading**: "the clock" of a partition (for `SV[m]`, a heartbeat, a VV's local entry) is its HLC
//!   moved forward to the physical clock, `max(physical, last timestamp)`; later local timestamps are larger.
//!   Receiving a replicated version does not move the receiver's clock (nothing needs it: a PUT's timestamp
//!   already exceeds its dependencies).
//! - **GSS exchange**: all-to-all inside the datacenter (each partition sends its VV to each peer), so every
//!   partition computes the GSS itself; no GSS exists until a partition has heard from every peer, so
//!   remote versions stay invisible until then. With one partition per datacenter the GSS is the own VV.
//! - **Heartbeats**: sent exactly `heartbeat_ms` after the last `Replicate` or heartbeat to the siblings.
//! - **Staleness**: `versions_skipped` counts the versions of the key newer than the returned one stored at
//!   the answering partition (local ones after the snapshot, and remote ones not yet stable).
//! - **Garbage collection** (the paper keeps the versions snapshots may read, without details). Every
//!   `gc_interval_ms` a partition computes the vector `L`: its GSS's remote entries and its clock, each minus
//!   `gc_retain_ms`. For each key it keeps the newest version `W` with `W.DV ≤ L` and all newer ones: every
//!   snapshot `SV ≥ L` contains `W`, so it never needs an older version. `L` only grows; a read at a snapshot
//!   not `≥` the latest `L` (older than `gc_retain_ms`: it cannot happen while delays stay below that) is
//!   answered `ReadStale`, and the client restarts the ROT with a fresh snapshot (4 rounds then).
//! - **Durable hosts** (`docs/DURABILITY.md`): snapshot and read requests are read-only (not logged): their
//!   clock moves go through the host (`Ctx::raise_clock`), a read of a key whose latest write is not durable
//!   yet waits for it, and a snapshot's remote entries are capped by the partition's logged version vector.
//! - **Session tokens** (`ClientNode::save_session`): `dv`, the last snapshot and the datacenter whose GSS
//!   covers their remote entries; resuming merges them entry-wise. In another datacenter that is not so: the
//!   coordinator takes the client's remote entries as they are (`SV = max(GSS, client)`) and partitions
//!   never wait, so the session could miss its own writes. There the session's remote entries become a
//!   *floor*: until a snapshot covers it, the client asks for snapshots with its remote entries zeroed (the
//!   answer's remote entries are then the coordinator's GSS) and asks again every `gss_interval_ms`
//!   (`Resnapshot`); the first snapshot at or above the floor clears it. PUTs need no wait: a version's
//!   dependency vector holds the floor, so it enters no snapshot here before what it depends on. A session
//!   saved with its floor pending records no datacenter, so its next resume waits too.
//! - **Links**: FIFO. The GSS argument needs a partition to receive its sibling's updates and heartbeats in
//!   timestamp order, as they were sent.

use crate::components::{Pacer, UnloggedWrites, session};
use rand::Rng;
use serde::{Deserialize, Serialize};
use snowline_core::{
    Addr, Check, ClientId, ClientNode, Ctx, DcId, Hlc, InvalidInput, InvalidKind, Key, LinkAssumptions, Message,
    MvStore, OpError, OpId, OpMetrics, PartitionId, Protocol, ProtocolConfig, ReadResult, Reply, Request, ServerId,
    ServerNode, StoredVersion, Topology, Value, VectorClock, Version,
};
use std::collections::{BTreeMap, BTreeSet, VecDeque};

const MS: u64 = 1_000_000;

/// The Contrarian protocol.
pub struct Contrarian;

impl Protocol for Contrarian {
    const NAME: &'static str = "contrarian";
    type Msg = ContrarianMsg;
    type Timer = ContrarianTimer;
    type Server = ContrarianServer;
    type Client = ContrarianClient;
    const OFFERS: snowline_core::Offers = snowline_core::Offers::CAUSAL;

    fn links() -> LinkAssumptions {
        LinkAssumptions { fifo: true }
    }

    fn server(id: ServerId, topology: Topology, config: &ProtocolConfig) -> ContrarianServer {
        ContrarianServer::new(id, topology, config.clone())
    }

    fn client(id: ClientId, dc: DcId, topology: Topology, config: &ProtocolConfig) -> ContrarianClient {
        ContrarianClient::new(id, dc, topology, config.clone())
    }
}

/// One version returned by a read, with its dependency vector (the client absorbs it, §4.1).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct VersionRead {
    pub read: ReadResult,
    pub dv: VectorClock,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ContrarianMsg {
    /// Client → the key's partition in its datacenter: PUT with the session's dependency vector (§4.1).
    Put { op: OpId, key: Key, value: Value, dv: VectorClock },
    /// Partition → client: the PUT's version (its timestamp and datacenter), or why it was refused.
    PutDone { op: OpId, result: Result<Version, OpError> },
    /// Client → coordinator, ROT round 1: the session's dependencies and last snapshot (§4.2).
    Snapshot { op: OpId, attempt: u32, dv: VectorClock },
    /// Coordinator → client: the ROT's snapshot vector SV (§4.2).
    SnapshotIs { op: OpId, attempt: u32, sv: VectorClock },
    /// Client → partition, ROT round 2: read these keys at SV (§4.2).
    Read { op: OpId, attempt: u32, keys: Vec<Key>, sv: VectorClock },
    /// Partition → client: one version per key, in request order (§4.3, one-version).
    ReadReply { op: OpId, attempt: u32, results: Vec<VersionRead> },
    /// Partition → client: SV is older than what garbage collection kept; take a new snapshot.
    ReadStale { op: OpId, attempt: u32 },
    /// Partition → sibling partitions: a new version with its dependency vector (asynchronous replication).
    Replicate { key: Key, value: Value, version: Version, dv: VectorClock },
    /// Partition → sibling partitions: no update since; the sender's clock (§4.1).
    Heartbeat { time: u64, busy: bool },
    /// Partition → the other partitions of its datacenter: its version vector, local entry = its clock (§4.1).
    Vv { vv: VectorClock, busy: bool },
}

impl Message for ContrarianMsg {
    fn kind(&self) -> &'static str {
        match self {
            ContrarianMsg::Put { .. } => "put",
            ContrarianMsg::PutDone { .. } => "put-done",
            ContrarianMsg::Snapshot { .. } => "snapshot",
            ContrarianMsg::SnapshotIs { .. } => "snapshot-is",
            ContrarianMsg::Read { .. } => "read",
            ContrarianMsg::ReadReply { .. } => "read-reply",
            ContrarianMsg::ReadStale { .. } => "read-stale",
            ContrarianMsg::Replicate { .. } => "replicate",
            ContrarianMsg::Heartbeat { .. } => "heartbeat",
            ContrarianMsg::Vv { .. } => "vv",
        }
    }

    fn is_client_write(&self) -> bool {
        matches!(self, ContrarianMsg::Put { .. })
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ContrarianTimer {
    /// Check whether a heartbeat is due (§4.1). Each timer carries its pacer's generation: one replaced by a
    /// sooner round (`Pacer::wake`) does nothing.
    Heartbeat(u64),
    /// Exchange version vectors and recompute the GSS (§4.1).
    Gss(u64),
    /// Collect garbage.
    Gc(u64),
    /// Client: ask again for a snapshot for attempt `attempt` of ROT `op` (a resumed session waiting for the
    /// GSS to cover what it depends on; module docs, "Session tokens").
    Resnapshot { op: OpId, attempt: u32 },
}

/// A partition server, which also coordinates ROTs.
#[derive(Serialize, Deserialize)]
pub struct ContrarianServer {
    id: ServerId,
    topology: Topology,
    config: ProtocolConfig,
    clock: Hlc,
    /// Versions with their dependency vectors.
    store: MvStore<VectorClock>,
    /// VV: `[m]` the latest local version's timestamp, `[i]` the latest timestamp received from DC `i`.
    vv: VectorClock,
    /// The latest VV received from each other partition of the datacenter.
    peer_vvs: BTreeMap<PartitionId, VectorClock>,
    gss: VectorClock,
    /// This node's clock when it last sent its siblings a `Replicate` or `Heartbeat`.
    last_sent_to_siblings_ns: u64,
    /// The largest garbage-collection vector used: snapshots not above it may have lost versions.
    gc_floor: VectorClock,
    /// Schedules of the periodic duties: each backs off while idle (`idle_backoff_ms`).
    heartbeat_pacer: Pacer,
    gss_pacer: Pacer,
    gc_pacer: Pacer,
    /// Work arrived since the duty's last round (a client request, a replicated version): the round reports
    /// this partition busy. Peers' busy reports keep the pace up without being passed on (no echo).
    news: Duties,
    peer_busy: Duties,
    /// Durability (`Ctx::read_only`): the writes a read may have to wait for, and `vv` as far as it is
    /// durable: its logged part, and the raises since (position, datacenter, time). Both only for the
    /// read-only handlers; empty outside a durable host.
    unlogged_writes: UnloggedWrites,
    vv_logged: VectorClock,
    vv_unlogged: VecDeque<(u64, DcId, u64)>,
}

/// One flag per periodic duty, each cleared by its own round.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize)]
struct Duties {
    heartbeat: bool,
    gss: bool,
    gc: bool,
}

impl Duties {
    const ALL: Duties = Duties { heartbeat: true, gss: true, gc: true };

    fn set(&mut self) {
        *self = Self::ALL;
    }
}

impl ContrarianServer {
    pub fn new(id: ServerId, topology: Topology, config: ProtocolConfig) -> Self {
        let zero = VectorClock::zero(topology.dcs);
        Self {
            id,
            topology,
            clock: Hlc::default(),
            store: MvStore::new(),
            vv: zero.clone(),
            peer_vvs: BTreeMap::new(),
            gss: zero.clone(),
            last_sent_to_siblings_ns: 0,
            gc_floor: zero,
            heartbeat_pacer: Pacer::new(config.heartbeat_ms * MS, config.idle_backoff_ms * MS),
            gss_pacer: Pacer::new(config.gss_interval_ms * MS, config.idle_backoff_ms * MS),
            gc_pacer: Pacer::new(config.gc_interval_ms * MS, config.idle_backoff_ms * MS),
            news: Duties::default(),
            peer_busy: Duties::default(),
            unlogged_writes: UnloggedWrites::default(),
            vv_logged: VectorClock::zero(topology.dcs),
            vv_unlogged: VecDeque::new(),
            config,
        }
    }

    /// The stored versions of `key`, oldest first, with their dependency vectors.
    pub fn versions(&self, key: &str) -> Vec<(Version, Value, VectorClock)> {
        self.store.versions(key).iter().map(|v| (v.version, v.value.clone(), v.meta.clone())).collect()
    }

    pub fn gss(&self) -> &VectorClock {
        &self.gss
    }

    pub fn vv(&self) -> &VectorClock {
        &self.vv
    }

    /// The latest timestamp this partition's HLC issued or was moved to.
    pub fn clock(&self) -> u64 {
        self.clock.current()
    }

    fn dc(&self) -> u16 {
        self.id.dc
    }

    /// The partition's clock now: its HLC moved forward to the physical clock. Every later local timestamp
    /// is larger.
    fn clock_reading(&mut self, now_ns: u64) -> u64 {
        self.clock.advance_to(now_ns);
        self.clock.current()
    }

    // ---- PUT (§4.1) ----

    fn put(
        &mut self,
        cx: &mut Ctx<'_, Contrarian>,
        client: ClientId,
        op: OpId,
        key: Key,
        value: Value,
        dv: VectorClock,
    ) {
        let request = Request::Put { key: key.clone(), value: value.clone() };
        if let Err(reason) = self.config.check_request(&request) {
            cx.send(client, ContrarianMsg::PutDone { op, result: Err(OpError::Rejected(reason)) });
            return;
        }
        if dv.0.len() != self.topology.dcs as usize || self.topology.partition_of(&key) != self.id.partition {
            // A forged or misrouted request: refuse it rather than corrupt the version's metadata.
            let reason = format!("contrarian: PUT of {key:?} sent to the wrong partition or malformed");
            cx.send(client, ContrarianMsg::PutDone { op, result: Err(OpError::Rejected(reason)) });
            return;
        }
        cx.charge(1);
        // "This timestamp is enforced to be higher than any timestamps in the dependency vector".
        let deps_max = dv.0.iter().copied().max().unwrap_or(0);
        let ts = self.clock.observe(cx.now_ns(), deps_max);
        let mut version_dv = dv;
        version_dv.set(self.dc(), ts);
        let version = Version { time: ts, dc: self.dc() };
        self.unlogged_writes.note(cx, &key);
        self.store.insert(key.clone(), StoredVersion { value: value.clone(), version, meta: version_dv.clone() });
        self.vv.set(self.dc(), ts);
        self.note_vv(cx, self.dc(), ts);
        let mut sent = false;
        for sibling in self.topology.siblings(self.id) {
            let msg =
                ContrarianMsg::Replicate { key: key.clone(), value: value.clone(), version, dv: version_dv.clone() };
            cx.send(sibling, msg);
            sent = true;
        }
        if sent {
            self.last_sent_to_siblings_ns = cx.now_ns();
        }
        cx.send(client, ContrarianMsg::PutDone { op, result: Ok(version) });
    }

    // ---- ROT (§4.2) ----

    /// The coordinator picks the snapshot vector SV.
    fn snapshot(&mut self, cx: &mut Ctx<'_, Contrarian>, client: ClientId, op: OpId, attempt: u32, dv: VectorClock) {
        cx.read_only();
        if dv.0.len() != self.topology.dcs as usize {
            return;
        }
        // Remote entries: the GSS, as far as this partition's own part of it is durable (a restart must not
        // lose a version the snapshot covers; the other partitions' parts came from their logged state).
        let mut sv = self.gss.clone();
        sv.merge_min(self.logged_vv(cx.durable_position()));
        sv.merge_max(&dv);
        // "The local entry of SV is the maximum between the clock at the coordinator and the highest local
        // timestamp seen by the client." The clock moves past it through the host (`Ctx::raise_clock`), so
        // that this input changes no state and need not be logged.
        let local = self.clock.current().max(cx.now_ns()).max(dv.get(self.dc()));
        cx.raise_clock(local.saturating_add(1));
        sv.set(self.dc(), local);
        cx.send(client, ContrarianMsg::SnapshotIs { op, attempt, sv });
    }

    /// A partition reads at SV without blocking.
    fn read(
        &mut self,
        cx: &mut Ctx<'_, Contrarian>,
        client: ClientId,
        op: OpId,
        attempt: u32,
        keys: Vec<Key>,
        sv: VectorClock,
    ) {
        cx.read_only();
        if sv.0.len() != self.topology.dcs as usize {
            return;
        }
        if !self.gc_floor.le(&sv) {
            cx.send(client, ContrarianMsg::ReadStale { op, attempt });
            return;
        }
        // "A partition moves its own clock to match the local entry of SV, if needed": versions created
        // here from now on get larger timestamps, so they are outside SV.
        cx.raise_clock(sv.get(self.dc()).saturating_add(1));
        cx.charge(keys.len() as u64);
        // A local version whose PUT is not durable yet cannot be passed over (a session that sees the PUT
        // acknowledged may write a version depending on it at another partition before this ROT reads there,
        // inside a snapshot taken ahead of that partition's clock): the reply waits for the log. Remote
        // versions within `sv` are durable here (the GSS counts only logged ones).
        for key in &keys {
            self.unlogged_writes.wait_for(cx, key);
        }
        let results = keys.into_iter().map(|key| self.read_at(key, &sv)).collect();
        cx.send(client, ContrarianMsg::ReadReply { op, attempt, results });
    }

    /// The newest version of `key` whose dependency vector is within `sv` ("Y belongs to the snapshot encoded
    /// by SV if Y.DV ≤ SV").
    fn read_at(&self, key: Key, sv: &VectorClock) -> VersionRead {
        let (found, skipped) = self.store.newest_where(&key, |v| v.meta.le(sv));
        match found {
            Some(v) => VersionRead {
                read: ReadResult { key, value: Some(v.value.clone()), version: v.version, versions_skipped: skipped },
                dv: v.meta.clone(),
            },
            None => VersionRead {
                read: ReadResult { key, value: None, version: Version::INITIAL, versions_skipped: skipped },
                dv: VectorClock::zero(self.topology.dcs),
            },
        }
    }

    // ---- Input validation ----

    /// Everything a message says that the handlers rely on, checked against the topology and this server's
    /// clock before the message touches any state (`snowline_core::validate`).
    fn validate(&self, now_ns: u64, from: Addr, msg: &ContrarianMsg) -> Result<(), InvalidInput> {
        let check = Check::new(&self.topology, &self.config, now_ns, from, msg.kind());
        let me = self.id;
        match msg {
            ContrarianMsg::Put { key, value, dv, .. } => {
                check.client()?;
                check.request_writes([(key, value)], [])?;
                check.vector(dv, "dependency vector")?;
            }
            ContrarianMsg::Snapshot { dv, .. } => {
                check.client()?;
                check.vector(dv, "dependency vector")?;
            }
            ContrarianMsg::Read { keys, sv, .. } => {
                check.client()?;
                check.vector(sv, "snapshot vector")?;
                check.request_keys(keys)?;
                keys.iter().try_for_each(|k| check.key_on(k, me.partition))?;
            }
            ContrarianMsg::PutDone { .. }
            | ContrarianMsg::SnapshotIs { .. }
            | ContrarianMsg::ReadReply { .. }
            | ContrarianMsg::ReadStale { .. } => {
                return Err(check.fail(InvalidKind::Sender, "only a client is sent this"));
            }
            ContrarianMsg::Replicate { key, version, dv, .. } => {
                let sibling = check.sibling(me)?;
                check.ensure(version.dc == sibling.dc, InvalidKind::Sender, || {
                    format!("{sibling} replicates a version of dc{}", version.dc)
                })?;
                check.version(version, "version")?;
                check.vector(dv, "dependency vector")?;
                check.ensure(dv.get(version.dc) == version.time, InvalidKind::Malformed, || {
                    "the dependency vector's entry of the version's datacenter is not its time".into()
                })?;
                check.key_on(key, me.partition)?;
            }
            ContrarianMsg::Heartbeat { time, .. } => {
                check.sibling(me)?;
                check.time(*time, "heartbeat time")?;
            }
            ContrarianMsg::Vv { vv, .. } => {
                check.local_peer(me)?;
                check.vector(vv, "version vector")?;
            }
        }
        Ok(())
    }

    // ---- Replication and stabilization (§4.1) ----

    fn replicated(
        &mut self,
        cx: &mut Ctx<'_, Contrarian>,
        from: ServerId,
        key: Key,
        value: Value,
        version: Version,
        dv: VectorClock,
    ) {
        if from.dc == self.dc() || from.dc != version.dc || dv.0.len() != self.topology.dcs as usize {
            return;
        }
        self.unlogged_writes.note(cx, &key);
        self.store.insert(key, StoredVersion { value, version, meta: dv });
        let i = from.dc;
        self.vv.set(i, self.vv.get(i).max(version.time));
        self.note_vv(cx, i, version.time);
    }

    // ---- Durability (`Ctx::read_only`) ----

    /// A logged handler raised `vv[dc]` to `time`.
    fn note_vv(&mut self, cx: &Ctx<'_, Contrarian>, dc: DcId, time: u64) {
        if cx.position() <= cx.durable_position() {
            self.vv_logged.set(dc, self.vv_logged.get(dc).max(time));
        } else {
            self.logged_vv(cx.durable_position());
            self.vv_unlogged.push_back((cx.position(), dc, time));
        }
    }

    /// `vv` as far as what raised it is durable (log position `durable`).
    fn logged_vv(&mut self, durable: u64) -> &VectorClock {
        while let Some(&(position, dc, time)) = self.vv_unlogged.front() {
            if position > durable {
                break;
            }
            self.vv_unlogged.pop_front();
            self.vv_logged.set(dc, self.vv_logged.get(dc).max(time));
        }
        &self.vv_logged
    }

    /// A heartbeat round: siblings that were sent nothing for a heartbeat period get the clock. While idle
    /// the rounds back off, so a sibling's entry for this datacenter may lag; it has nothing to wait for.
    fn heartbeat_due(&mut self, cx: &mut Ctx<'_, Contrarian>) {
        let period = (self.config.heartbeat_ms * MS).max(1);
        let busy = std::mem::take(&mut self.news.heartbeat);
        let pace = busy || std::mem::take(&mut self.peer_busy.heartbeat);
        let idle = cx.now_ns().saturating_sub(self.last_sent_to_siblings_ns);
        let (delay, generation) = if idle >= period {
            let time = self.clock_reading(cx.now_ns());
            for sibling in self.topology.siblings(self.id) {
                cx.send(sibling, ContrarianMsg::Heartbeat { time, busy });
            }
            self.last_sent_to_siblings_ns = cx.now_ns();
            self.heartbeat_pacer.next(cx.now_ns(), pace)
        } else {
            // A message went to the siblings less than a period ago: the heartbeat is due a period after it.
            self.heartbeat_pacer.after(cx.now_ns(), period - idle)
        };
        cx.set_timer(delay, ContrarianTimer::Heartbeat(generation));
    }

    fn exchange_vv(&mut self, cx: &mut Ctx<'_, Contrarian>) {
        let busy = std::mem::take(&mut self.news.gss);
        let pace = busy || std::mem::take(&mut self.peer_busy.gss);
        let mut vv = self.vv.clone();
        vv.set(self.dc(), self.clock_reading(cx.now_ns()));
        for peer in self.topology.local_peers(self.id) {
            cx.send(peer, ContrarianMsg::Vv { vv: vv.clone(), busy });
        }
        self.recompute_gss();
        let (delay, generation) = self.gss_pacer.next(cx.now_ns(), pace);
        cx.set_timer(delay, ContrarianTimer::Gss(generation));
    }

    /// Work arrived: every duty reports this partition busy at its next round, which comes soon.
    fn note_news(&mut self, cx: &mut Ctx<'_, Contrarian>) {
        self.news.set();
        self.note_peer_busy(cx);
    }

    /// A peer or sibling is busy: heartbeats and the vector exchange keep its pace (every partition's
    /// entries must advance for its versions to become stable everywhere).
    fn note_peer_busy(&mut self, cx: &mut Ctx<'_, Contrarian>) {
        self.peer_busy.set();
        let now = cx.now_ns();
        if self.topology.dcs > 1
            && let Some((delay, generation)) = self.heartbeat_pacer.wake(now)
        {
            cx.set_timer(delay, ContrarianTimer::Heartbeat(generation));
        }
        if let Some((delay, generation)) = self.gss_pacer.wake(now) {
            cx.set_timer(delay, ContrarianTimer::Gss(generation));
        }
    }

    /// GSS = the aggregate (entry-wise) minimum of the own VV and the latest VV of every other partition of
    /// the datacenter; nothing until every peer has been heard from.
    fn recompute_gss(&mut self) {
        if self.peer_vvs.len() + 1 < self.topology.partitions as usize {
            return;
        }
        let mut gss = self.vv.clone();
        for vv in self.peer_vvs.values() {
            gss.merge_min(vv);
        }
        self.gss.merge_max(&gss);
    }

    fn collect_garbage(&mut self, cx: &mut Ctx<'_, Contrarian>) {
        let retain = self.config.gc_retain_ms * MS;
        let mut horizon = VectorClock(self.gss.0.iter().map(|t| t.saturating_sub(retain)).collect());
        horizon.set(self.dc(), self.clock_reading(cx.now_ns()).saturating_sub(retain));
        self.gc_floor.merge_max(&horizon);
        let floor = self.gc_floor.clone();
        let dropped = self.store.collect_below(|v| v.meta.le(&floor));
        cx.charge(dropped as u64);
    }
}

impl ServerNode<Contrarian> for ContrarianServer {
    fn on_start(&mut self, cx: &mut Ctx<'_, Contrarian>) {
        self.last_sent_to_siblings_ns = cx.now_ns();
        let now = cx.now_ns();
        if self.topology.dcs > 1 {
            let (delay, generation) = self.heartbeat_pacer.start(now);
            cx.set_timer(delay, ContrarianTimer::Heartbeat(generation));
        }
        let (delay, generation) = self.gss_pacer.start(now);
        cx.set_timer(delay, ContrarianTimer::Gss(generation));
        let (delay, generation) = self.gc_pacer.start(now);
        cx.set_timer(delay, ContrarianTimer::Gc(generation));
    }

    fn on_message(&mut self, cx: &mut Ctx<'_, Contrarian>, from: Addr, msg: ContrarianMsg) -> Result<(), InvalidInput> {
        cx.charge(1);
        self.validate(cx.now_ns(), from, &msg)?;
        match (from, msg) {
            (Addr::Client(client), ContrarianMsg::Put { op, key, value, dv }) => {
                self.note_news(cx);
                self.put(cx, client, op, key, value, dv)
            }
            // Reads change nothing (read-only: a durable host does not log them); they do not pull the
            // periodic duties in either: with nothing written, there is nothing new to stabilise.
            (Addr::Client(client), ContrarianMsg::Snapshot { op, attempt, dv }) => {
                self.snapshot(cx, client, op, attempt, dv)
            }
            (Addr::Client(client), ContrarianMsg::Read { op, attempt, keys, sv }) => {
                self.read(cx, client, op, attempt, keys, sv)
            }
            (Addr::Server(from), ContrarianMsg::Replicate { key, value, version, dv }) => {
                self.note_news(cx);
                self.replicated(cx, from, key, value, version, dv)
            }
            (Addr::Server(from), ContrarianMsg::Heartbeat { time, busy }) => {
                if busy {
                    self.note_peer_busy(cx);
                }
                self.vv.set(from.dc, self.vv.get(from.dc).max(time));
                self.note_vv(cx, from.dc, time);
            }
            (Addr::Server(from), ContrarianMsg::Vv { vv, busy }) => {
                if busy {
                    self.note_peer_busy(cx);
                }
                // "The partitions also move their local clocks forward, if needed, to match the highest
                // timestamp corresponding to the local entry in any of the exchanged VVs."
                self.clock.advance_to(vv.get(self.dc()));
                self.peer_vvs.insert(from.partition, vv);
                self.recompute_gss();
            }
            (from, msg) => unreachable!("validate admits no {} from {from}", msg.kind()),
        }
        Ok(())
    }

    fn on_timer(&mut self, cx: &mut Ctx<'_, Contrarian>, timer: ContrarianTimer) {
        match timer {
            ContrarianTimer::Heartbeat(g) if self.heartbeat_pacer.live(g) => self.heartbeat_due(cx),
            ContrarianTimer::Gss(g) if self.gss_pacer.live(g) => self.exchange_vv(cx),
            ContrarianTimer::Gc(g) if self.gc_pacer.live(g) => {
                self.collect_garbage(cx);
                let news = std::mem::take(&mut self.news.gc);
                let (delay, generation) = self.gc_pacer.next(cx.now_ns(), news);
                cx.set_timer(delay, ContrarianTimer::Gc(generation));
            }
            // Replaced by a sooner round when news arrived.
            ContrarianTimer::Heartbeat(_)
            | ContrarianTimer::Gss(_)
            | ContrarianTimer::Gc(_)
            | ContrarianTimer::Resnapshot { .. } => {}
        }
    }

    fn stored_versions(&self) -> usize {
        self.store.version_count()
    }
}

/// A ROT in progress at the client.
#[derive(Debug)]
struct PendingRot {
    keys: Vec<Key>,
    /// Increases when the ROT restarts after `ReadStale`; replies of earlier attempts are ignored.
    attempt: u32,
    rounds: u32,
    sv: Option<VectorClock>,
    /// For each partition asked, the request positions of the keys sent to it.
    slots: BTreeMap<PartitionId, Vec<usize>>,
    results: Vec<Option<VersionRead>>,
    pending: usize,
}

/// The client session (§4.1): the dependency vector, the last snapshot, the in-flight operations.
pub struct ContrarianClient {
    id: ClientId,
    dc: DcId,
    topology: Topology,
    config: ProtocolConfig,
    dv: VectorClock,
    last_sv: VectorClock,
    puts: BTreeSet<OpId>,
    rots: BTreeMap<OpId, PendingRot>,
    /// A session resumed from another datacenter: the remote entries this datacenter's GSS must reach before
    /// a ROT may use a snapshot (module docs, "Session tokens").
    floor: Option<VectorClock>,
}

impl ContrarianClient {
    pub fn new(id: ClientId, dc: DcId, topology: Topology, config: ProtocolConfig) -> Self {
        let zero = VectorClock::zero(topology.dcs);
        Self {
            id,
            dc,
            topology,
            config,
            dv: zero.clone(),
            last_sv: zero,
            puts: BTreeSet::new(),
            rots: BTreeMap::new(),
            floor: None,
        }
    }

    pub fn id(&self) -> ClientId {
        self.id
    }

    /// The session's dependency vector.
    pub fn dv(&self) -> &VectorClock {
        &self.dv
    }

    /// The newest snapshot the session has read at (entry-wise maximum).
    pub fn last_snapshot(&self) -> &VectorClock {
        &self.last_sv
    }

    fn start_rot(&mut self, cx: &mut Ctx<'_, Contrarian>, op: OpId) {
        let rot = self.rots.get_mut(&op).expect("pending");
        rot.rounds += 1;
        rot.sv = None;
        let mut partitions: Vec<PartitionId> = rot.keys.iter().map(|k| self.topology.partition_of(k)).collect();
        partitions.sort_unstable();
        partitions.dedup();
        // §4.2: "selects one of them as the coordinator for the ROT".
        let coordinator = partitions[cx.rng().random_range(0..partitions.len())];
        let mut dv = self.dv.clone();
        dv.merge_max(&self.last_sv);
        if self.floor.is_some() {
            // Until the GSS covers the floor, ask with no remote entries: the answer's are then the GSS.
            for d in self.topology.dc_ids().filter(|d| *d != self.dc) {
                dv.set(d, 0);
            }
        }
        cx.send(ServerId::new(self.dc, coordinator), ContrarianMsg::Snapshot { op, attempt: rot.attempt, dv });
    }
}

/// What a Contrarian session token carries (module docs, "Session tokens").
#[derive(Serialize, Deserialize)]
struct SavedSession {
    /// The datacenter whose GSS covers the session's remote entries (`None`: a resumed session still
    /// waiting for that).
    dc: Option<DcId>,
    dv: VectorClock,
    last_sv: VectorClock,
}

impl ClientNode<Contrarian> for ContrarianClient {
    fn save_session(&self) -> Vec<u8> {
        let dc = self.floor.is_none().then_some(self.dc);
        let saved = SavedSession { dc, dv: self.dv.clone(), last_sv: self.last_sv.clone() };
        session::encode(Contrarian::NAME, &saved)
    }

    fn resume_session(&mut self, saved: &[u8]) -> Result<(), String> {
        let Some(s) = session::decode::<SavedSession>(Contrarian::NAME, saved)? else { return Ok(()) };
        if let Some(dc) = s.dc {
            session::check_dc(&self.topology, dc, "the session's datacenter")?;
        }
        session::check_vector(&self.topology, &s.dv, "the session's dependency vector")?;
        session::check_vector(&self.topology, &s.last_sv, "the session's snapshot")?;
        if s.dc != Some(self.dc) {
            // The coordinator trusts the client's remote entries (SV = max(GSS, client)) and a partition never
            // waits for a read: entries from another datacenter's clock and GSS could name versions not
            // applied here yet. The session's ROTs wait until this datacenter's GSS covers them.
            let mut floor = self.floor.take().unwrap_or_else(|| VectorClock::zero(self.topology.dcs));
            floor.merge_max(&s.dv);
            floor.merge_max(&s.last_sv);
            floor.set(self.dc, 0);
            self.floor = floor.0.iter().any(|t| *t > 0).then_some(floor);
        }
        self.dv.merge_max(&s.dv);
        self.last_sv.merge_max(&s.last_sv);
        Ok(())
    }

    fn on_timer(&mut self, cx: &mut Ctx<'_, Contrarian>, timer: ContrarianTimer) {
        let ContrarianTimer::Resnapshot { op, attempt } = timer else { return };
        let Some(rot) = self.rots.get_mut(&op) else { return };
        if rot.attempt == attempt && rot.sv.is_none() {
            rot.attempt += 1;
            self.start_rot(cx, op);
        }
    }

    fn on_request(&mut self, cx: &mut Ctx<'_, Contrarian>, op: OpId, request: Request) {
        if let Err(reason) = self.config.check_request(&request) {
            cx.complete(op, Err(OpError::Rejected(reason)));
            return;
        }
        match request {
            Request::Update { .. } => {
                let reason = "contrarian offers no write transactions (Contrarian §2.1: the API is PUT and ROT); \
                              issue single-key PUTs";
                cx.complete(op, Err(OpError::Rejected(reason.into())));
            }
            Request::RotRounds { .. } => {
                let reason = "contrarian's read-only transactions are one-shot (Contrarian §2.3.2): \
                              name every key in one ROT";
                cx.complete(op, Err(OpError::Rejected(reason.into())));
            }
            Request::Put { key, value } => {
                self.puts.insert(op);
                let to = self.topology.server_of(self.dc, &key);
                cx.send(to, ContrarianMsg::Put { op, key, value, dv: self.dv.clone() });
            }
            other @ (Request::Begin
            | Request::Read { .. }
            | Request::Commit { .. }
            | Request::Abort
            | Request::Call { .. }) => {
                cx.complete(op, Err(Contrarian::OFFERS.refusal(Contrarian::NAME, &other)));
            }
            Request::Rot { keys } => {
                let n = keys.len();
                self.rots.insert(
                    op,
                    PendingRot {
                        keys,
                        attempt: 0,
                        rounds: 0,
                        sv: None,
                        slots: BTreeMap::new(),
                        results: vec![None; n],
                        pending: 0,
                    },
                );
                self.start_rot(cx, op);
            }
        }
    }

    fn on_message(&mut self, cx: &mut Ctx<'_, Contrarian>, from: Addr, msg: ContrarianMsg) {
        match msg {
            ContrarianMsg::PutDone { op, result } => {
                if !self.puts.remove(&op) {
                    return;
                }
                let result = result.map(|version| {
                    let m = self.dc;
                    self.dv.set(m, self.dv.get(m).max(version.time));
                    Reply {
                        writes: Vec::new(),
                        reads: Vec::new(),
                        commit: Some(version),
                        metrics: OpMetrics { rounds: 1, ..Default::default() },
                    }
                });
                cx.complete(op, result);
            }
            ContrarianMsg::SnapshotIs { op, attempt, sv } => {
                let Some(rot) = self.rots.get_mut(&op) else { return };
                if rot.attempt != attempt || rot.sv.is_some() || sv.0.len() != self.dv.0.len() {
                    return;
                }
                if let Some(floor) = &self.floor {
                    if !floor.le(&sv) {
                        // The GSS does not cover the session's past yet: ask again a GSS round later.
                        let delay = self.config.gss_interval_ms.max(1).saturating_mul(1_000_000);
                        cx.set_timer(delay, ContrarianTimer::Resnapshot { op, attempt });
                        return;
                    }
                    self.floor = None;
                }
                rot.rounds += 1;
                let mut slots: BTreeMap<PartitionId, Vec<usize>> = BTreeMap::new();
                for (i, key) in rot.keys.iter().enumerate() {
                    slots.entry(self.topology.partition_of(key)).or_default().push(i);
                }
                for (p, positions) in &slots {
                    let keys = positions.iter().map(|i| rot.keys[*i].clone()).collect();
                    cx.send(ServerId::new(self.dc, *p), ContrarianMsg::Read { op, attempt, keys, sv: sv.clone() });
                }
                rot.pending = slots.len();
                rot.slots = slots;
                rot.results = vec![None; rot.keys.len()];
                rot.sv = Some(sv);
            }
            ContrarianMsg::ReadReply { op, attempt, results } => {
                let Some(rot) = self.rots.get_mut(&op) else { return };
                let Addr::Server(server) = from else { return };
                if rot.attempt != attempt {
                    return;
                }
                // A reply that does not answer every position asked of its partition is ignored, and the
                // partition is still waited for.
                if rot.slots.get(&server.partition).is_none_or(|positions| positions.len() != results.len()) {
                    return;
                }
                let positions = rot.slots.remove(&server.partition).expect("checked above");
                for (pos, r) in positions.into_iter().zip(results) {
                    rot.results[pos] = Some(r);
                }
                rot.pending -= 1;
                if rot.pending == 0 {
                    let rot = self.rots.remove(&op).expect("present");
                    let sv = rot.sv.expect("reads are sent after the snapshot");
                    self.last_sv.merge_max(&sv);
                    let mut reads = Vec::with_capacity(rot.results.len());
                    for r in rot.results {
                        let r = r.expect("every slot answered");
                        self.dv.merge_max(&r.dv);
                        reads.push(r.read);
                    }
                    let metrics =
                        OpMetrics { rounds: rot.rounds, versions_returned: reads.len() as u32, ..OpMetrics::default() };
                    cx.complete(op, Ok(Reply { reads, commit: None, metrics, writes: Vec::new() }));
                }
            }
            ContrarianMsg::ReadStale { op, attempt } => {
                let Some(rot) = self.rots.get_mut(&op) else { return };
                if rot.attempt != attempt {
                    return;
                }
                rot.attempt += 1;
                rot.slots.clear();
                self.start_rot(cx, op);
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests;
