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
//! - **Links**: FIFO. The GSS argument needs a partition to receive its sibling's updates and heartbeats in
//!   timestamp order, as they were sent.

use rand::Rng;
use serde::{Deserialize, Serialize};
use snowline_core::{
    Addr, ClientId, ClientNode, Ctx, DcId, Hlc, Key, LinkAssumptions, Message, MvStore, OpError, OpId, OpMetrics,
    PartitionId, Protocol, ProtocolConfig, ReadResult, Reply, Request, ServerId, ServerNode, StoredVersion, Topology,
    Value, VectorClock, Version,
};
use std::collections::BTreeMap;

const MS: u64 = 1_000_000;

/// The Contrarian protocol.
pub struct Contrarian;

impl Protocol for Contrarian {
    const NAME: &'static str = "contrarian";
    type Msg = ContrarianMsg;
    type Timer = ContrarianTimer;
    type Server = ContrarianServer;
    type Client = ContrarianClient;
    const WRITE_TRANSACTIONS: bool = false;

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
    Heartbeat { time: u64 },
    /// Partition → the other partitions of its datacenter: its version vector, local entry = its clock (§4.1).
    Vv { vv: VectorClock },
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
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ContrarianTimer {
    /// Check whether a heartbeat is due (§4.1).
    Heartbeat,
    /// Exchange version vectors and recompute the GSS (§4.1).
    Gss,
    /// Collect garbage.
    Gc,
}

/// A partition server, which also coordinates ROTs.
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
}

impl ContrarianServer {
    pub fn new(id: ServerId, topology: Topology, config: ProtocolConfig) -> Self {
        let zero = VectorClock::zero(topology.dcs);
        Self {
            id,
            topology,
            config,
            clock: Hlc::default(),
            store: MvStore::new(),
            vv: zero.clone(),
            peer_vvs: BTreeMap::new(),
            gss: zero.clone(),
            last_sent_to_siblings_ns: 0,
            gc_floor: zero,
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
        self.store.insert(key.clone(), StoredVersion { value: value.clone(), version, meta: version_dv.clone() });
        self.vv.set(self.dc(), ts);
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
        if dv.0.len() != self.topology.dcs as usize {
            return;
        }
        let mut sv = self.gss.clone();
        sv.merge_max(&dv);
        // "The local entry of SV is the maximum between the clock at the coordinator and the highest local
        // timestamp seen by the client."
        let local = self.clock_reading(cx.now_ns()).max(dv.get(self.dc()));
        self.clock.advance_to(local);
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
        if sv.0.len() != self.topology.dcs as usize {
            return;
        }
        if !self.gc_floor.le(&sv) {
            cx.send(client, ContrarianMsg::ReadStale { op, attempt });
            return;
        }
        // "A partition moves its own clock to match the local entry of SV, if needed": versions created
        // here from now on get larger timestamps, so they are outside SV.
        self.clock.advance_to(sv.get(self.dc()));
        cx.charge(keys.len() as u64);
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

    // ---- Replication and stabilization (§4.1) ----

    fn replicated(&mut self, from: ServerId, key: Key, value: Value, version: Version, dv: VectorClock) {
        if from.dc == self.dc() || from.dc != version.dc || dv.0.len() != self.topology.dcs as usize {
            return;
        }
        self.store.insert(key, StoredVersion { value, version, meta: dv });
        let i = from.dc;
        self.vv.set(i, self.vv.get(i).max(version.time));
    }

    fn heartbeat_due(&mut self, cx: &mut Ctx<'_, Contrarian>) {
        let period = self.config.heartbeat_ms * MS;
        let idle = cx.now_ns().saturating_sub(self.last_sent_to_siblings_ns);
        if idle >= period {
            let time = self.clock_reading(cx.now_ns());
            for sibling in self.topology.siblings(self.id) {
                cx.send(sibling, ContrarianMsg::Heartbeat { time });
            }
            self.last_sent_to_siblings_ns = cx.now_ns();
            cx.set_timer(period.max(1), ContrarianTimer::Heartbeat);
        } else {
            cx.set_timer(period - idle, ContrarianTimer::Heartbeat);
        }
    }

    fn exchange_vv(&mut self, cx: &mut Ctx<'_, Contrarian>) {
        let mut vv = self.vv.clone();
        vv.set(self.dc(), self.clock_reading(cx.now_ns()));
        for peer in self.topology.local_peers(self.id) {
            cx.send(peer, ContrarianMsg::Vv { vv: vv.clone() });
        }
        self.recompute_gss();
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
        let dropped = self.store.collect_below_newest_where(|v| v.meta.le(&floor));
        cx.charge(dropped as u64);
    }
}

impl ServerNode<Contrarian> for ContrarianServer {
    fn on_start(&mut self, cx: &mut Ctx<'_, Contrarian>) {
        self.last_sent_to_siblings_ns = cx.now_ns();
        if self.topology.dcs > 1 {
            cx.set_timer((self.config.heartbeat_ms * MS).max(1), ContrarianTimer::Heartbeat);
        }
        cx.set_timer((self.config.gss_interval_ms * MS).max(1), ContrarianTimer::Gss);
        cx.set_timer((self.config.gc_interval_ms * MS).max(1), ContrarianTimer::Gc);
    }

    fn on_message(&mut self, cx: &mut Ctx<'_, Contrarian>, from: Addr, msg: ContrarianMsg) {
        cx.charge(1);
        match (from, msg) {
            (Addr::Client(client), ContrarianMsg::Put { op, key, value, dv }) => {
                self.put(cx, client, op, key, value, dv)
            }
            (Addr::Client(client), ContrarianMsg::Snapshot { op, attempt, dv }) => {
                self.snapshot(cx, client, op, attempt, dv)
            }
            (Addr::Client(client), ContrarianMsg::Read { op, attempt, keys, sv }) => {
                self.read(cx, client, op, attempt, keys, sv)
            }
            (Addr::Server(from), ContrarianMsg::Replicate { key, value, version, dv }) => {
                self.replicated(from, key, value, version, dv)
            }
            (Addr::Server(from), ContrarianMsg::Heartbeat { time }) if from.dc != self.dc() => {
                self.vv.set(from.dc, self.vv.get(from.dc).max(time));
            }
            (Addr::Server(from), ContrarianMsg::Vv { vv })
                if from.dc == self.dc() && from.partition != self.id.partition && vv.0.len() == self.vv.0.len() =>
            {
                // "The partitions also move their local clocks forward, if needed, to match the highest
                // timestamp corresponding to the local entry in any of the exchanged VVs."
                self.clock.advance_to(vv.get(self.dc()));
                self.peer_vvs.insert(from.partition, vv);
                self.recompute_gss();
            }
            // A message that does not fit its sender's role is a peer bug or a forged frame: ignore it.
            (_, _) => {}
        }
    }

    fn on_timer(&mut self, cx: &mut Ctx<'_, Contrarian>, timer: ContrarianTimer) {
        match timer {
            ContrarianTimer::Heartbeat => self.heartbeat_due(cx),
            ContrarianTimer::Gss => {
                self.exchange_vv(cx);
                cx.set_timer((self.config.gss_interval_ms * MS).max(1), ContrarianTimer::Gss);
            }
            ContrarianTimer::Gc => {
                self.collect_garbage(cx);
                cx.set_timer((self.config.gc_interval_ms * MS).max(1), ContrarianTimer::Gc);
            }
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
    puts: BTreeMap<OpId, ()>,
    rots: BTreeMap<OpId, PendingRot>,
}

impl ContrarianClient {
    pub fn new(id: ClientId, dc: DcId, topology: Topology, config: ProtocolConfig) -> Self {
        let zero = VectorClock::zero(topology.dcs);
        Self { id, dc, topology, config, dv: zero.clone(), last_sv: zero, puts: BTreeMap::new(), rots: BTreeMap::new() }
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
        cx.send(ServerId::new(self.dc, coordinator), ContrarianMsg::Snapshot { op, attempt: rot.attempt, dv });
    }
}

impl ClientNode<Contrarian> for ContrarianClient {
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
            Request::Put { key, value } => {
                self.puts.insert(op, ());
                let to = self.topology.server_of(self.dc, &key);
                cx.send(to, ContrarianMsg::Put { op, key, value, dv: self.dv.clone() });
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
                if self.puts.remove(&op).is_none() {
                    return;
                }
                let result = result.map(|version| {
                    let m = self.dc;
                    self.dv.set(m, self.dv.get(m).max(version.time));
                    Reply {
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
                let Some(positions) = rot.slots.remove(&server.partition) else { return };
                if positions.len() != results.len() {
                    return;
                }
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
                    let metrics = OpMetrics {
                        rounds: rot.rounds,
                        versions_returned: reads.len() as u32,
                        blocked_ns: 0,
                        readers_check: None,
                    };
                    cx.complete(op, Ok(Reply { reads, commit: None, metrics }));
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
