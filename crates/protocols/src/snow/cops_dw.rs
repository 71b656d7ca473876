//! **COPS-DW** (`--protocol cops-dw`): strictly serializable, non-blocking, one-round, one-version read-only
//! transactions (S+N+O) over single-key writes that all go through a **distinguished writer**. Source: Lu et
//! al., "The SNOW Theorem and Latency-Optimal Read-Only Transactions", OSDI 2016, §4.3: "making all simple
//! write operations go through a distinguished writer. The distinguished writer totally orders the writes. In
//! addition, when each write commits, the distinguished writer computes a consistent snapshot for concurrent
//! or later read-only transactions to return." The paper gives no pseudocode; this module's construction
//! follows, with COPS-SNOW's readers (§5.3) as the snapshot information.
//!
//! # Construction
//!
//! - The **writer** is partition 0 of datacenter 0. Every `Put` goes to it; it gives each write the next
//!   sequence number `s` (its version is `Version { time: s, dc: 0 }`) and runs **one write at a time**, in
//!   two exchanges, acknowledging the client only at the end:
//!   1. `Announce(s, partition of the key)` to every server. A server records `s` as
//!      announced; if the key is not on its partition its state is the same at `s` as at `s - 1`, so its
//!      *visible point* becomes `s`. It answers (`Readers`) with its **readers**: the ROTs that read there
//!      (one per client, its latest ROT) and the point each read at.
//!   2. `Commit(s, key, value, old readers)` to the key's partition, with the readers collected (per ROT the
//!      smallest point reported). The partition records them as
//!      **old readers** (a ROT listed there reads at its recorded point), then makes the version visible
//!      (visible point `s`) and answers `Applied`. Then the writer acknowledges the client and starts the
//!      next write.
//! - A **ROT** sends one `Read` per partition of its datacenter. A partition answers at once: at the ROT's
//!   recorded point if it is one of its old readers, else at its visible point; each key returns its newest
//!   version with sequence number at or below that point (one version), and the read is recorded as a reader
//!   with that point.
//!
//! # Why S+N+O
//!
//! N and O hold by construction: one round, one version per key, answered without waiting. For **S**: let
//! `m` be the smallest point a ROT `R` read at. (a) *Consistent*: take a partition `q` where `R` read at a
//! point `v > m`, and a write `t` to `q` with `m < t <= v`. `R` read some partition `p` at point `m < t`,
//! so `p` had not yet answered `Announce(t)` (answering it lifts `p`'s point to `t`, unless `t`'s key is on
//! `p`, which is `q`): `p`'s answer lists `R`, and `Commit(t)` records `R` as an old reader of `q` at a point
//! `<= m` before `t` is visible there. `R`'s read of `q`, which saw `t`, came after that commit, so it read
//! at the recorded point: a contradiction. So every partition's answer equals its state at `m`: `R` reads
//! the snapshot after the first `m` writes. (b) *Real time*: a write acknowledged before `R` started was
//! announced at every server and applied at its key's partitions, so every point `R` reads at without a
//! record is at or above it, and a record of `R` only carries points `R` itself read at. Writes are
//! serialized in acknowledgement order. So the history is strictly serializable in sequence order, with each
//! ROT placed at its snapshot.
//!
//! # Choices where the paper is silent
//!
//! - **One write at a time** (the paper: "not practical because it serializes all writes"). A write costs
//!   two round trips from the writer to every server; a partitioned server stalls writes, never reads.
//! - **One datacenter** (the CLI refuses `--dcs` above 1). Committing a write at its key's partition in
//!   every datacenter, as a first version did, makes it visible at several moments: a ROT in one datacenter
//!   reads it, and a ROT invoked later in another, whose copy has not applied it yet, does not — a real-time
//!   violation the crash seeds found (`crates/harness/tests/swarm_faults.rs`, seed 20 of an earlier run).
//!   Several datacenters would need the write's copies treated as several partitions of one write, whose
//!   readers must be collected again once the copies are held invisible: not done.
//! - **Readers records** keep one entry per client (its latest ROT; a session runs one operation at a time)
//!   and are dropped `gc_retain_ms` after insertion; versions are kept `2 × gc_retain_ms`. A ROT whose reads
//!   would straddle that horizon is detected by its client (the whole ROT took longer than
//!   `gc_retain_ms / 2` on its clock) and run again under a new id, counted as a second round: never seen in
//!   the tests, but the claim does not rest on a timing assumption.
//! - **Writes** are single-key `Put`s; `Update` is rejected (no W). Reads are logged in a durable host (they
//!   record readers).
//! - **Links**: no FIFO assumption (each exchange is a request and its answer; duplicates are answered again).
//! - **Session tokens**: none (the default): strict serializability orders every operation after those that
//!   completed before it, wherever it runs.

use crate::components::Pacer;
use serde::{Deserialize, Serialize};
use snowline_core::{
    Addr, Check, ClientId, ClientNode, Ctx, DcId, InvalidInput, InvalidKind, Key, LinkAssumptions, Message, MvStore,
    OpError, OpId, OpMetrics, PartitionId, Protocol, ProtocolConfig, ReadResult, Reply, ReplyNote, Request, ServerId,
    ServerNode, StoredVersion, Topology, Value, Version,
};
use std::collections::{BTreeMap, BTreeSet, VecDeque};

/// The distinguished writer.
pub const WRITER: ServerId = ServerId::new(0, 0);

/// The COPS-DW protocol.
pub struct CopsDw;

/// A reader: a ROT (its client's sequence number) and the point it reads at.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReaderPoint {
    pub client: ClientId,
    pub rot: u64,
    pub point: u64,
}

/// One key's answer to a read.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Item {
    pub key: Key,
    pub value: Option<Value>,
    pub version: Version,
    pub skipped: u32,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum DwMsg {
    /// Client → partition: read these keys (all on this partition) for ROT `rot` of the client.
    Read { op: OpId, rot: u64, keys: Vec<Key> },
    /// Partition → client: one item per key, in request order.
    ReadReply { op: OpId, items: Vec<Item> },
    /// Client → writer.
    Put { op: OpId, key: Key, value: Value },
    /// Writer → client: the write's sequence number.
    PutReply { op: OpId, result: Result<u64, OpError> },
    /// Writer → every server: write `seq` is to a key of `partition`.
    Announce { seq: u64, partition: PartitionId },
    /// Server → writer: its readers, as it answers `Announce(seq)`.
    Readers { seq: u64, readers: Vec<ReaderPoint> },
    /// Writer → the key's partition in every datacenter: record the old readers, then make the write visible.
    Commit { seq: u64, key: Key, value: Value, old: Vec<ReaderPoint> },
    /// Partition → writer.
    Applied { seq: u64 },
}

impl Message for DwMsg {
    fn kind(&self) -> &'static str {
        match self {
            DwMsg::Read { .. } => "read",
            DwMsg::ReadReply { .. } => "read-reply",
            DwMsg::Put { .. } => "put",
            DwMsg::PutReply { .. } => "put-reply",
            DwMsg::Announce { .. } => "announce",
            DwMsg::Readers { .. } => "readers",
            DwMsg::Commit { .. } => "commit",
            DwMsg::Applied { .. } => "applied",
        }
    }

    fn is_client_write(&self) -> bool {
        matches!(self, DwMsg::Put { .. })
    }

    fn reply_note(&self) -> Option<ReplyNote> {
        match self {
            DwMsg::PutReply { result, .. } => Some(ReplyNote::of(result, 0)),
            DwMsg::ReadReply { .. } => Some(ReplyNote::default()),
            _ => None,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum DwTimer {
    /// Version and readers GC (`generation`: the pacer's).
    Gc { generation: u64 },
}

impl Protocol for CopsDw {
    const NAME: &'static str = "cops-dw";
    type Msg = DwMsg;
    type Timer = DwTimer;
    type Server = DwServer;
    type Client = DwClient;
    const OFFERS: snowline_core::Offers = snowline_core::Offers::CAUSAL;

    fn links() -> LinkAssumptions {
        LinkAssumptions { fifo: false }
    }

    /// One datacenter (module doc: a write applied at its key's partition in two datacenters would become
    /// visible at two moments, and a ROT in one could see it before a later ROT in the other does not).
    fn check_topology(topology: &Topology) -> Result<(), String> {
        if topology.dcs == 1 && topology.one_replica_per_dc() {
            Ok(())
        } else {
            Err(format!(
                "cops-dw runs in one datacenter with one replica of each partition (--dcs 1), not {} datacenters \
                 with {} replicas of each partition: a write replicated to several would become visible at several \
                 moments, which strict serializability does not allow",
                topology.dcs, topology.replicas
            ))
        }
    }

    fn server(id: ServerId, topology: Topology, config: &ProtocolConfig) -> DwServer {
        DwServer::new(id, topology, config.clone())
    }

    fn client(id: ClientId, dc: DcId, topology: Topology, config: &ProtocolConfig) -> DwClient {
        DwClient::new(id, dc, topology, config.clone())
    }
}

type Cx<'a> = Ctx<'a, CopsDw>;

#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
struct Entry {
    rot: u64,
    point: u64,
    inserted_ns: u64,
}

#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
struct Meta {
    /// When the version became visible here (physical time, for GC).
    applied_ns: u64,
}

#[derive(Debug, Serialize, Deserialize)]
struct Queued {
    client: ClientId,
    op: OpId,
    key: Key,
    value: Value,
}

#[derive(Debug, Serialize, Deserialize)]
enum Phase {
    /// Waiting for `Readers`; per datacenter, per client: its latest ROT and smallest point.
    Announcing {
        collected: BTreeMap<DcId, BTreeMap<ClientId, (u64, u64)>>,
    },
    Committing,
}

#[derive(Debug, Serialize, Deserialize)]
struct InFlight {
    seq: u64,
    write: Queued,
    phase: Phase,
    awaiting: BTreeSet<ServerId>,
}

/// The writer's state (at [`WRITER`] only).
#[derive(Debug, Default, Serialize, Deserialize)]
struct Writer {
    queue: VecDeque<Queued>,
    in_flight: Option<InFlight>,
    last_seq: u64,
}

/// A partition server.
#[derive(Serialize, Deserialize)]
pub struct DwServer {
    id: ServerId,
    topology: Topology,
    config: ProtocolConfig,
    store: MvStore<Meta>,
    /// The last write announced here.
    announced: u64,
    /// Reads not listed as old readers read at this point.
    visible: u64,
    readers: BTreeMap<ClientId, Entry>,
    old: BTreeMap<ClientId, Entry>,
    writer: Option<Writer>,
    pacer: Pacer,
}

/// Merge one report of a ROT into a per-client record: the latest ROT wins; for the same ROT, the smaller
/// point.
fn merge(record: &mut BTreeMap<ClientId, (u64, u64)>, r: &ReaderPoint) {
    match record.get_mut(&r.client) {
        Some((rot, point)) if *rot == r.rot => *point = (*point).min(r.point),
        Some((rot, _)) if *rot > r.rot => {}
        _ => {
            record.insert(r.client, (r.rot, r.point));
        }
    }
}

impl DwServer {
    pub fn new(id: ServerId, topology: Topology, config: ProtocolConfig) -> Self {
        Self {
            id,
            topology,
            store: MvStore::new(),
            announced: 0,
            visible: 0,
            readers: BTreeMap::new(),
            old: BTreeMap::new(),
            writer: (id == WRITER).then(Writer::default),
            pacer: Pacer::new(config.gc_interval_ms * 1_000_000, config.idle_backoff_ms * 1_000_000),
            config,
        }
    }

    /// The point a read that is no old reader reads at.
    pub fn visible(&self) -> u64 {
        self.visible
    }

    /// The stored versions of `key`, oldest first (for tests).
    pub fn versions(&self, key: &str) -> Vec<(Version, Value)> {
        self.store.versions(key).iter().map(|v| (v.version, v.value.clone())).collect()
    }

    /// The old readers recorded here: `(client, ROT, point)`.
    pub fn old_readers(&self) -> Vec<ReaderPoint> {
        self.old.iter().map(|(c, e)| ReaderPoint { client: *c, rot: e.rot, point: e.point }).collect()
    }

    fn horizon_ns(&self) -> u64 {
        self.config.gc_retain_ms * 1_000_000
    }

    fn live(&self, e: &Entry, now: u64) -> bool {
        e.inserted_ns.saturating_add(self.horizon_ns()) > now
    }

    fn gc(&mut self, cx: &mut Cx<'_>, generation: u64) {
        if !self.pacer.live(generation) {
            return;
        }
        let now = cx.now_ns();
        let horizon = now.saturating_sub(2 * self.horizon_ns());
        let dropped = self.store.collect_garbage_by(horizon, |v| v.meta.applied_ns);
        let before = self.readers.len() + self.old.len();
        let keep = self.horizon_ns();
        self.readers.retain(|_, e| e.inserted_ns.saturating_add(keep) > now);
        self.old.retain(|_, e| e.inserted_ns.saturating_add(keep) > now);
        let swept = before - self.readers.len() - self.old.len();
        cx.charge((dropped + swept) as u64 / 16 + 1);
        let news = dropped > 0 || swept > 0 || !self.readers.is_empty() || !self.old.is_empty();
        let (delay, generation) = self.pacer.next(now, news);
        cx.set_timer(delay, DwTimer::Gc { generation });
    }

    fn validate(&self, now_ns: u64, from: Addr, msg: &DwMsg) -> Result<(), InvalidInput> {
        let check = Check::new(&self.topology, &self.config, now_ns, from, msg.kind());
        let me = self.id;
        let from_writer = || {
            let s = check.server()?;
            check.ensure(s == WRITER, InvalidKind::Sender, || format!("{s} is not the writer {WRITER}"))
        };
        let in_flight = |seq: u64| {
            let s = check.server()?;
            let awaited = self
                .writer
                .as_ref()
                .and_then(|w| w.in_flight.as_ref())
                .is_some_and(|f| f.seq == seq && f.awaiting.contains(&s));
            check.ensure(awaited, InvalidKind::Unexpected, || format!("write {seq} awaits nothing from {s}"))
        };
        let points = |rs: &[ReaderPoint], below: u64| {
            rs.iter().try_for_each(|r| {
                check.ensure(r.point < below, InvalidKind::Malformed, || {
                    format!("a reader at point {} reported for write {below}", r.point)
                })
            })
        };
        match msg {
            DwMsg::Read { keys, .. } => {
                check.client()?;
                check.request_keys(keys)?;
                keys.iter().try_for_each(|k| check.key_on(k, me.partition))?;
            }
            DwMsg::Put { key, value, .. } => {
                check.client()?;
                check.ensure(me == WRITER, InvalidKind::Unexpected, || format!("{me} is not the writer"))?;
                check.request_writes([(key, value)], [])?;
            }
            DwMsg::ReadReply { .. } | DwMsg::PutReply { .. } => {
                return Err(check.fail(InvalidKind::Sender, "only a client is sent this"));
            }
            DwMsg::Announce { seq, partition } => {
                from_writer()?;
                check.partition(*partition)?;
                check.ensure(*seq == self.announced || *seq == self.announced + 1, InvalidKind::Unexpected, || {
                    format!("write {seq} announced after {}", self.announced)
                })?;
            }
            DwMsg::Commit { seq, key, old, .. } => {
                from_writer()?;
                check.key_on(key, me.partition)?;
                check.ensure(*seq == self.announced, InvalidKind::Unexpected, || {
                    format!("commit of write {seq}; the last announced is {}", self.announced)
                })?;
                points(old, *seq)?;
            }
            DwMsg::Readers { seq, readers } => {
                in_flight(*seq)?;
                points(readers, *seq)?;
            }
            DwMsg::Applied { seq } => in_flight(*seq)?,
        }
        Ok(())
    }

    fn message(&mut self, cx: &mut Cx<'_>, from: Addr, msg: DwMsg) -> Result<(), InvalidInput> {
        cx.charge(1);
        self.validate(cx.now_ns(), from, &msg)?;
        match (from, msg) {
            (Addr::Client(c), DwMsg::Read { op, rot, keys }) => {
                let items = self.read(cx, c, rot, keys);
                cx.send(c, DwMsg::ReadReply { op, items });
            }
            (Addr::Client(client), DwMsg::Put { op, key, value }) => {
                let w = self.writer.as_mut().expect("validated: the writer");
                w.queue.push_back(Queued { client, op, key, value });
                if w.in_flight.is_none() {
                    self.next_write(cx);
                }
            }
            (Addr::Server(s), DwMsg::Announce { seq, partition }) => {
                let readers = self.announce(cx, seq, partition);
                cx.send(s, DwMsg::Readers { seq, readers });
            }
            (Addr::Server(s), DwMsg::Commit { seq, key, value, old }) => {
                self.commit(cx, seq, key, value, old);
                cx.send(s, DwMsg::Applied { seq });
            }
            (Addr::Server(s), DwMsg::Readers { readers, .. }) => self.readers_in(cx, s, &readers),
            (Addr::Server(s), DwMsg::Applied { .. }) => self.applied(cx, s),
            (from, msg) => unreachable!("validate admits no {} from {from}", msg.kind()),
        }
        Ok(())
    }

    fn read(&mut self, cx: &mut Cx<'_>, client: ClientId, rot: u64, keys: Vec<Key>) -> Vec<Item> {
        let now = cx.now_ns();
        cx.charge(keys.len() as u64);
        let point = match self.old.get(&client) {
            Some(e) if e.rot == rot && self.live(e, now) => e.point,
            _ => self.visible,
        };
        if self.readers.get(&client).is_none_or(|e| e.rot <= rot || !self.live(e, now)) {
            self.readers.insert(client, Entry { rot, point, inserted_ns: now });
        }
        keys.into_iter()
            .map(|key| {
                let (found, skipped) = self.store.newest_where(&key, |v| v.version.time <= point);
                match found {
                    Some(v) => Item { key, value: Some(v.value.clone()), version: v.version, skipped },
                    None => Item { key, value: None, version: Version::INITIAL, skipped },
                }
            })
            .collect()
    }

    /// `Announce(seq)`: this partition's point moves to `seq` unless the write is here; its readers.
    fn announce(&mut self, cx: &mut Cx<'_>, seq: u64, partition: PartitionId) -> Vec<ReaderPoint> {
        if seq == self.announced + 1 {
            self.announced = seq;
            if partition != self.id.partition {
                self.visible = seq;
            }
        }
        let now = cx.now_ns();
        cx.charge(1 + self.readers.len() as u64);
        self.readers
            .iter()
            .filter(|(_, e)| self.live(e, now))
            .map(|(c, e)| ReaderPoint { client: *c, rot: e.rot, point: e.point })
            .collect()
    }

    /// `Commit(seq)`: record the old readers, then make the write visible (a repeated commit only answers).
    fn commit(&mut self, cx: &mut Cx<'_>, seq: u64, key: Key, value: Value, old: Vec<ReaderPoint>) {
        if self.visible >= seq {
            return;
        }
        let now = cx.now_ns();
        cx.charge(1 + old.len() as u64);
        for r in old {
            let fresh = Entry { rot: r.rot, point: r.point, inserted_ns: now };
            match self.old.get_mut(&r.client) {
                Some(e)
                    if e.rot == r.rot && e.inserted_ns.saturating_add(self.config.gc_retain_ms * 1_000_000) > now =>
                {
                    e.point = e.point.min(r.point);
                }
                Some(e) if e.rot > r.rot => {}
                _ => {
                    self.old.insert(r.client, fresh);
                }
            }
        }
        let version = Version { time: seq, dc: 0 };
        self.store.insert(key, StoredVersion { value, version, meta: Meta { applied_ns: now } });
        self.visible = seq;
    }

    // ---- The writer ----

    fn next_write(&mut self, cx: &mut Cx<'_>) {
        let w = self.writer.as_mut().expect("the writer");
        let Some(write) = w.queue.pop_front() else { return };
        w.last_seq += 1;
        let seq = w.last_seq;
        let partition = self.topology.partition_of(&write.key);
        let awaiting: BTreeSet<ServerId> = self.topology.servers().filter(|s| *s != self.id).collect();
        for s in &awaiting {
            cx.send(*s, DwMsg::Announce { seq, partition });
        }
        w.in_flight = Some(InFlight { seq, write, phase: Phase::Announcing { collected: BTreeMap::new() }, awaiting });
        let own = self.announce(cx, seq, partition);
        let me = self.id;
        self.readers_in(cx, me, &own);
        // (Our own answer does not count among `awaiting`.)
        self.maybe_commit(cx);
    }

    fn readers_in(&mut self, cx: &mut Cx<'_>, from: ServerId, readers: &[ReaderPoint]) {
        let Some(f) = self.writer.as_mut().and_then(|w| w.in_flight.as_mut()) else { return };
        let Phase::Announcing { collected } = &mut f.phase else { return };
        if from != self.id && !f.awaiting.remove(&from) {
            return;
        }
        cx.charge(readers.len() as u64);
        let record = collected.entry(from.dc).or_default();
        for r in readers {
            merge(record, r);
        }
        if from != self.id {
            self.maybe_commit(cx);
        }
    }

    /// Every server answered the announcement: commit at the key's partition in every datacenter.
    fn maybe_commit(&mut self, cx: &mut Cx<'_>) {
        let Some(f) = self.writer.as_mut().and_then(|w| w.in_flight.as_mut()) else { return };
        if !f.awaiting.is_empty() {
            return;
        }
        let Phase::Announcing { collected } = std::mem::replace(&mut f.phase, Phase::Committing) else { return };
        let seq = f.seq;
        let (key, value) = (f.write.key.clone(), f.write.value.clone());
        let targets: Vec<ServerId> = self.topology.dc_ids().map(|dc| self.topology.server_of(dc, &key)).collect();
        f.awaiting = targets.iter().copied().filter(|s| *s != self.id).collect();
        let old_of = |dc: DcId| -> Vec<ReaderPoint> {
            collected.get(&dc).map_or_else(Vec::new, |r| {
                r.iter().map(|(c, (rot, point))| ReaderPoint { client: *c, rot: *rot, point: *point }).collect()
            })
        };
        for t in &targets {
            let msg = DwMsg::Commit { seq, key: key.clone(), value: value.clone(), old: old_of(t.dc) };
            if *t == self.id {
                let DwMsg::Commit { seq, key, value, old } = msg else { unreachable!() };
                self.commit(cx, seq, key, value, old);
            } else {
                cx.send(*t, msg);
            }
        }
        self.maybe_done(cx);
    }

    fn applied(&mut self, cx: &mut Cx<'_>, from: ServerId) {
        let Some(f) = self.writer.as_mut().and_then(|w| w.in_flight.as_mut()) else { return };
        if matches!(f.phase, Phase::Committing) && f.awaiting.remove(&from) {
            self.maybe_done(cx);
        }
    }

    fn maybe_done(&mut self, cx: &mut Cx<'_>) {
        let w = self.writer.as_mut().expect("the writer");
        let done = w.in_flight.as_ref().is_some_and(|f| matches!(f.phase, Phase::Committing) && f.awaiting.is_empty());
        if !done {
            return;
        }
        let f = w.in_flight.take().expect("checked");
        cx.send(f.write.client, DwMsg::PutReply { op: f.write.op, result: Ok(f.seq) });
        self.next_write(cx);
    }
}

impl ServerNode<CopsDw> for DwServer {
    fn on_start(&mut self, cx: &mut Cx<'_>) {
        let (delay, generation) = self.pacer.start(cx.now_ns());
        cx.set_timer(delay, DwTimer::Gc { generation });
    }
    fn on_message(&mut self, cx: &mut Cx<'_>, from: Addr, msg: DwMsg) -> Result<(), InvalidInput> {
        self.message(cx, from, msg)
    }
    fn on_timer(&mut self, cx: &mut Cx<'_>, timer: DwTimer) {
        let DwTimer::Gc { generation } = timer;
        self.gc(cx, generation);
    }
    fn stored_versions(&self) -> usize {
        self.store.version_count()
    }
}

#[derive(Debug)]
enum ClientOp {
    Rot {
        keys: Vec<Key>,
        items: Vec<Option<Item>>,
        slots: BTreeMap<PartitionId, Vec<usize>>,
        sent_ns: u64,
        round: u32,
        returned: u32,
    },
    Put,
}

/// The client session.
pub struct DwClient {
    id: ClientId,
    dc: DcId,
    topology: Topology,
    config: ProtocolConfig,
    next_rot: u64,
    ops: BTreeMap<OpId, ClientOp>,
}

impl DwClient {
    pub fn new(id: ClientId, dc: DcId, topology: Topology, config: ProtocolConfig) -> Self {
        Self { id, dc, topology, config, next_rot: 0, ops: BTreeMap::new() }
    }

    pub fn id(&self) -> ClientId {
        self.id
    }

    /// Send (or send again, under a new id) every read of a ROT.
    fn send_rot(&mut self, cx: &mut Cx<'_>, op: OpId, keys: &[Key]) -> BTreeMap<PartitionId, Vec<usize>> {
        let rot = self.next_rot;
        self.next_rot += 1;
        let mut slots: BTreeMap<PartitionId, Vec<usize>> = BTreeMap::new();
        for (i, key) in keys.iter().enumerate() {
            slots.entry(self.topology.partition_of(key)).or_default().push(i);
        }
        for (p, positions) in &slots {
            let keys = positions.iter().map(|i| keys[*i].clone()).collect();
            cx.send(ServerId::new(self.dc, *p), DwMsg::Read { op, rot, keys });
        }
        slots
    }

    fn request(&mut self, cx: &mut Cx<'_>, op: OpId, request: Request) {
        if let Err(reason) = self.config.check_request(&request) {
            cx.complete(op, Err(OpError::Rejected(reason)));
            return;
        }
        match request {
            Request::Rot { keys } => {
                let slots = self.send_rot(cx, op, &keys);
                let items = vec![None; keys.len()];
                let rot = ClientOp::Rot { keys, items, slots, sent_ns: cx.now_ns(), round: 1, returned: 0 };
                self.ops.insert(op, rot);
                self.maybe_done(cx, op);
            }
            Request::Put { key, value } => {
                cx.send(WRITER, DwMsg::Put { op, key, value });
                self.ops.insert(op, ClientOp::Put);
            }
            Request::Update { .. } => {
                let reason = "cops-dw has no write transactions (SNOW §4.3): issue single-key PUTs".to_string();
                cx.complete(op, Err(OpError::Rejected(reason)));
            }
            Request::RotRounds { .. } => {
                let reason = "cops-dw's read-only transactions are one-shot: name every key in one ROT".to_string();
                cx.complete(op, Err(OpError::Rejected(reason)));
            }
            other => cx.complete(op, Err(CopsDw::OFFERS.refusal(CopsDw::NAME, &other))),
        }
    }

    fn message(&mut self, cx: &mut Cx<'_>, from: Addr, msg: DwMsg) {
        let Addr::Server(server) = from else { return };
        match msg {
            DwMsg::ReadReply { op, items: got } => {
                let Some(ClientOp::Rot { items, slots, returned, .. }) = self.ops.get_mut(&op) else { return };
                if server.dc != self.dc || slots.get(&server.partition).is_none_or(|p| p.len() != got.len()) {
                    return;
                }
                let positions = slots.remove(&server.partition).expect("checked above");
                *returned += got.len() as u32;
                for (pos, item) in positions.into_iter().zip(got) {
                    items[pos] = Some(item);
                }
                self.maybe_done(cx, op);
            }
            DwMsg::PutReply { op, result } => {
                let Some(ClientOp::Put) = self.ops.get(&op) else { return };
                self.ops.remove(&op);
                let result = result.map(|seq| Reply {
                    reads: Vec::new(),
                    commit: Some(Version { time: seq, dc: 0 }),
                    metrics: OpMetrics { rounds: 1, ..Default::default() },
                    writes: Vec::new(),
                });
                cx.complete(op, result);
            }
            _ => {}
        }
    }

    /// Every partition answered: complete, or run the ROT again if it outlasted the readers' horizon.
    fn maybe_done(&mut self, cx: &mut Cx<'_>, op: OpId) {
        let Some(ClientOp::Rot { slots, sent_ns, .. }) = self.ops.get(&op) else { return };
        if !slots.is_empty() {
            return;
        }
        let now = cx.now_ns();
        if now.saturating_sub(*sent_ns) > self.config.gc_retain_ms * 1_000_000 / 2 {
            let Some(ClientOp::Rot { keys, .. }) = self.ops.get(&op) else { return };
            let keys = keys.clone();
            let slots = self.send_rot(cx, op, &keys);
            let Some(ClientOp::Rot { slots: s, items, sent_ns, round, .. }) = self.ops.get_mut(&op) else { return };
            *s = slots;
            items.iter_mut().for_each(|i| *i = None);
            *sent_ns = now;
            *round += 1;
            if s.is_empty() {
                self.maybe_done(cx, op);
            }
            return;
        }
        let Some(ClientOp::Rot { items, round, returned, .. }) = self.ops.remove(&op) else { return };
        let reads = items
            .into_iter()
            .map(|i| {
                let i = i.expect("every position answered");
                ReadResult { key: i.key, value: i.value, version: i.version, versions_skipped: i.skipped }
            })
            .collect();
        let metrics = OpMetrics { rounds: round, versions_returned: returned, blocked_ns: 0, ..Default::default() };
        cx.complete(op, Ok(Reply { reads, commit: None, metrics, writes: Vec::new() }));
    }
}

// Session tokens: none needed (the default). Strict serializability orders every operation after those that
// completed before it, wherever it runs, so a session carries nothing; its ROT ids are new under a new client id.
impl ClientNode<CopsDw> for DwClient {
    fn on_request(&mut self, cx: &mut Cx<'_>, op: OpId, request: Request) {
        self.request(cx, op, request);
    }
    fn on_message(&mut self, cx: &mut Cx<'_>, from: Addr, msg: DwMsg) {
        self.message(cx, from, msg);
    }
}
