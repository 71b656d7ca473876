//! **Eiger-PS** (`--protocol eiger-ps`): process-ordered serializability with one-round, one-version,
//! non-blocking read-only transactions and write transactions (N+O+W). Source: Lu et al., "The SNOW Theorem
//! and Latency-Optimal Read-Only Transactions", OSDI 2016, §4.4; Lloyd et al., Eiger (NSDI 2013) for the
//! write transactions and logical time the SNOW paper builds on.
//!
//! # The algorithm (SNOW §4.4)
//!
//! - Every server keeps a **local safe time** (LST): the latest logical time at which it holds no write
//!   transaction in progress — one less than the earliest prepare time of its pending transactions, or its
//!   clock when none is pending.
//! - Every client periodically polls every server of its datacenter for its LST (`SafeTimeQuery` /
//!   `SafeTime`, every `gss_interval_ms` while the session is busy, backing off to `gc_retain_ms / 4` while
//!   idle) and keeps a **global safe time** GST = the minimum of the latest answers.
//! - A **read-only transaction** reads at the client's GST: one `Read` per partition, each answered at once
//!   with the newest version of each key whose commit time is at most the GST. One round, one version per
//!   key, never blocking: nothing at or below a server's LST can still commit there.
//! - A **write transaction** (`Update`; a `Put` is one of one key) is Eiger's two-phase commit with logical
//!   commit times: the client sends it to a coordinator (the server of its first key in the client's
//!   datacenter), which sends `Prepare` to the server of every written partition in **every** datacenter; each
//!   participant takes a prepare time from its clock and holds the transaction pending (its LST stays below);
//!   the commit time is the largest prepare time; `Commit` makes the versions visible at that time. The
//!   coordinator answers the client with the commit time, and the client completes the write only once its
//!   GST has reached it (polling at once, asking each server to move its clock up to the commit time), so the
//!   session's next read sees its own write.
//!
//! # Why process-ordered serializability
//!
//! Commit times are unique (each server's timestamps are congruent to its index modulo the number of servers,
//! and a commit time is one participant's prepare time, which belongs to one transaction), and totally order
//! the write transactions. A server's LST never decreases, and no version with a commit time at or below an
//! LST it reported can appear later: a transaction pending then has a larger prepare time, hence a larger
//! commit time, and a later prepare takes a time above the clock, which is at or above the LST. So a ROT
//! reading at `g <= GST` sees exactly the write transactions with commit time `<= g` (every datacenter
//! holds every write: the local server of each written partition is a participant), and serializes at `g`.
//! Each session's order is kept: its GST never decreases; a write it issues after a ROT at `g` gets a commit
//! time above every LST the session had seen (its prepares come later), hence above `g`; a ROT after a write
//! reads at a GST at or above the write's commit time (the write waited for that). Not strictly serializable:
//! a client whose GST lags misses a write another client completed before its ROT started (the scenario
//! test shows it).
//!
//! # Choices where the paper is silent
//!
//! - **Several datacenters**: writes are replicated synchronously, by making the server of each written
//!   partition in every datacenter a participant of the transaction's two-phase commit; clients read and
//!   poll only their own datacenter. A write then costs a wide-area round trip (and waits out an
//!   inter-datacenter partition), reads stay local and non-blocking. One datacenter is the paper's setting.
//! - **Clock**: one [`Hlc`] per server, kept near physical time. A safe-time query names the time the client
//!   waits for (its pending write's commit time, else 0); the server moves its clock there, so a write's
//!   client waits about one round trip, not for clocks to catch up.
//! - **A session's start**: a new session polls at once (`on_start`); a ROT issued before every server of
//!   its datacenter has answered that first poll waits at the client for it (no message of its own, no wait
//!   at a server: still one round), so a session never reads the empty snapshot at time 0 just because it
//!   is new.
//! - **Lost or forged prepares**: a participant holding a transaction pending for `INQUIRE_NS` asks its
//!   coordinator (`Inquire`), which answers with the commit (`Commit`) or, for a transaction it does not know
//!   or whose commit this participant already acknowledged, `Forget`; a coordinator re-sends `Prepare` to
//!   participants that have not answered for `INQUIRE_NS`. Participants acknowledge commits (`CommitAck`) so
//!   the coordinator knows when to forget a transaction. A forged prepare can thus hold an LST back only for
//!   a while.
//! - **Version GC**: a key keeps every version committed within `gc_retain_ms` of the server's clock plus
//!   the newest older one. A read below that horizon (a GST that lagged more than `gc_retain_ms`, which idle
//!   polling every `gc_retain_ms / 4` prevents) is refused with a clear error rather than answered from an
//!   incomplete snapshot.
//! - **Metrics**: a ROT reports 1 round, one version per key and `blocked_ns` 0; a write reports 1 round
//!   (its wait for the GST is at the client, not at a server).
//! - **Durability** (`docs/DURABILITY.md`): reads are read-only and wait for the durability of the latest
//!   write of each key they read; safe-time queries are logged (they move the clock and reveal that pending
//!   transactions committed).
//! - **Links**: no FIFO assumption (every exchange is a request and its answer; duplicates are idempotent).
//! - **Session tokens** (`ClientNode::save_session`): the session's GST (its reads were at or below it, its
//!   completed writes committed at or below it). A resumed session holds every request until the GST of its
//!   datacenter, polled with `at_least` set to the saved one, reaches it; then its ROTs see what it read and
//!   wrote, in any datacenter (every datacenter takes part in every write). A saved GST beyond
//!   `max_clock_ahead_ms` of the client's clock (garbage no server would wait for) fails each request with
//!   an error.

use crate::components::{Pacer, UnloggedWrites, session};
use serde::{Deserialize, Serialize};
use snowline_core::{
    Addr, Check, ClientId, ClientNode, Ctx, DcId, Hlc, InvalidInput, InvalidKind, Key, LinkAssumptions, Message,
    MvStore, OpError, OpId, OpMetrics, PartitionId, Protocol, ProtocolConfig, ReadResult, Reply, ReplyNote, Request,
    ServerId, ServerNode, StoredVersion, Topology, Value, Version,
};
use std::collections::{BTreeMap, BTreeSet};

/// A participant holding a transaction pending this long asks its coordinator; a coordinator re-sends a
/// prepare unanswered this long.
pub const INQUIRE_NS: u64 = 500_000_000;

/// The Eiger-PS protocol.
pub struct EigerPs;

/// A write transaction's id: its coordinator and the coordinator's sequence number.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct TxnId {
    pub coordinator: ServerId,
    pub seq: u64,
}

/// One key's answer to a read.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Item {
    pub key: Key,
    pub value: Option<Value>,
    pub version: Version,
    /// Newer versions the server had when it answered.
    pub skipped: u32,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum EigerMsg {
    /// Client → server: your local safe time, please; move your clock to at least `at_least` first.
    SafeTimeQuery { at_least: u64 },
    /// Server → client.
    SafeTime { lst: u64 },
    /// Client → server: read these keys (all on this partition) at logical time `at` (the client's GST).
    Read { op: OpId, keys: Vec<Key>, at: u64 },
    /// Server → client: one item per key, in request order; `Err` if `at` is older than the GC horizon.
    ReadReply { op: OpId, result: Result<Vec<Item>, OpError> },
    /// Client → coordinator (the server of the first key in the client's datacenter): a write transaction.
    Write { op: OpId, writes: Vec<(Key, Value)> },
    /// Coordinator → client: committed at `commit` (the client completes once its GST reaches it).
    WriteDone { op: OpId, result: Result<u64, OpError> },
    /// Coordinator → participant: hold these writes (all on the participant's partition) pending.
    Prepare { txn: TxnId, writes: Vec<(Key, Value)> },
    /// Participant → coordinator: pending since `time`.
    Prepared { txn: TxnId, time: u64 },
    /// Coordinator → participant: make the writes visible at `time`.
    Commit { txn: TxnId, time: u64 },
    /// Participant → coordinator: applied.
    CommitAck { txn: TxnId },
    /// Participant → coordinator: a transaction pending here for `INQUIRE_NS`.
    Inquire { txn: TxnId },
    /// Coordinator → participant: drop that pending transaction (unknown, or its commit already applied).
    Forget { txn: TxnId },
}

impl Message for EigerMsg {
    fn kind(&self) -> &'static str {
        match self {
            EigerMsg::SafeTimeQuery { .. } => "safe-time-query",
            EigerMsg::SafeTime { .. } => "safe-time",
            EigerMsg::Read { .. } => "read",
            EigerMsg::ReadReply { .. } => "read-reply",
            EigerMsg::Write { .. } => "write",
            EigerMsg::WriteDone { .. } => "write-done",
            EigerMsg::Prepare { .. } => "prepare",
            EigerMsg::Prepared { .. } => "prepared",
            EigerMsg::Commit { .. } => "commit",
            EigerMsg::CommitAck { .. } => "commit-ack",
            EigerMsg::Inquire { .. } => "inquire",
            EigerMsg::Forget { .. } => "forget",
        }
    }

    fn is_client_write(&self) -> bool {
        matches!(self, EigerMsg::Write { .. })
    }

    fn reply_note(&self) -> Option<ReplyNote> {
        match self {
            EigerMsg::ReadReply { result, .. } => Some(ReplyNote::of(result, 0)),
            EigerMsg::WriteDone { result, .. } => Some(ReplyNote::of(result, 0)),
            _ => None,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum EigerTimer {
    /// Server: version GC, inquiries and prepare re-sends (`gen`: the pacer's generation).
    Tick { generation: u64 },
    /// Client: poll every server's local safe time.
    Poll { generation: u64 },
}

impl Protocol for EigerPs {
    const NAME: &'static str = "eiger-ps";
    type Msg = EigerMsg;
    type Timer = EigerTimer;
    type Server = EigerServer;
    type Client = EigerClient;
    const OFFERS: snowline_core::Offers = snowline_core::Offers {
        read_only: true,
        multi_key_rots: true,
        multi_shot_rots: false,
        blind_writes: true,
        write_transactions: true,
        interactive: false,
        stored_procedures: false,
    };

    fn links() -> LinkAssumptions {
        LinkAssumptions { fifo: false }
    }

    fn server(id: ServerId, topology: Topology, config: &ProtocolConfig) -> EigerServer {
        EigerServer::new(id, topology, config.clone())
    }

    fn client(id: ClientId, dc: DcId, topology: Topology, config: &ProtocolConfig) -> EigerClient {
        EigerClient::new(id, dc, topology, config.clone())
    }
}

type Cx<'a> = Ctx<'a, EigerPs>;

/// A transaction pending at a participant.
#[derive(Debug, Serialize, Deserialize)]
struct Pending {
    time: u64,
    writes: Vec<(Key, Value)>,
    since_ns: u64,
}

/// A transaction this server coordinates.
#[derive(Debug, Serialize, Deserialize)]
struct Coordinated {
    client: ClientId,
    op: OpId,
    /// Each participant's writes.
    parts: BTreeMap<ServerId, Vec<(Key, Value)>>,
    /// Participants whose `Prepared` is awaited.
    awaiting: BTreeSet<ServerId>,
    max_time: u64,
    /// The commit time, once every participant prepared.
    commit: Option<u64>,
    /// Participants whose `CommitAck` is awaited (after the commit).
    unacked: BTreeSet<ServerId>,
    sent_ns: u64,
}

/// A partition server.
#[derive(Serialize, Deserialize)]
pub struct EigerServer {
    id: ServerId,
    topology: Topology,
    config: ProtocolConfig,
    /// This server's index and the number of servers: its timestamps are `index` modulo `servers`.
    index: u64,
    servers: u64,
    clock: Hlc,
    store: MvStore<()>,
    pending: BTreeMap<TxnId, Pending>,
    /// Pending prepare times (the LST is one less than the smallest).
    pending_times: BTreeSet<(u64, TxnId)>,
    coordinated: BTreeMap<u64, Coordinated>,
    next_txn: u64,
    gc_horizon: u64,
    unlogged_writes: UnloggedWrites,
    pacer: Pacer,
}

impl EigerServer {
    pub fn new(id: ServerId, topology: Topology, config: ProtocolConfig) -> Self {
        let index = topology.index_of(id).unwrap_or(0) as u64;
        Self {
            id,
            servers: topology.server_count().max(1) as u64,
            index,
            topology,
            clock: Hlc::default(),
            store: MvStore::new(),
            pending: BTreeMap::new(),
            pending_times: BTreeSet::new(),
            coordinated: BTreeMap::new(),
            next_txn: 0,
            gc_horizon: 0,
            unlogged_writes: UnloggedWrites::default(),
            pacer: Pacer::new(config.gc_interval_ms * 1_000_000, config.idle_backoff_ms * 1_000_000),
            config,
        }
    }

    /// The local safe time: no transaction can commit here at or below it.
    pub fn local_safe_time(&self) -> u64 {
        match self.pending_times.first() {
            Some((t, _)) => t - 1,
            None => self.clock.current(),
        }
    }

    /// Transactions pending here.
    pub fn pending(&self) -> usize {
        self.pending.len()
    }

    /// The stored versions of `key`, oldest first (for tests).
    pub fn versions(&self, key: &str) -> Vec<(Version, Value)> {
        self.store.versions(key).iter().map(|v| (v.version, v.value.clone())).collect()
    }

    /// A timestamp above every earlier one, congruent to this server's index modulo the number of servers.
    fn unique_tick(&mut self, now: u64) -> u64 {
        let t = self.clock.tick(now);
        let r = t % self.servers;
        let u = t + (self.index + self.servers - r) % self.servers;
        self.clock.advance_to(u);
        u
    }

    fn start(&mut self, cx: &mut Cx<'_>) {
        let (delay, generation) = self.pacer.start(cx.now_ns());
        cx.set_timer(delay, EigerTimer::Tick { generation });
    }

    fn wake(&mut self, cx: &mut Cx<'_>) {
        if let Some((delay, generation)) = self.pacer.wake(cx.now_ns()) {
            cx.set_timer(delay, EigerTimer::Tick { generation });
        }
    }

    fn tick(&mut self, cx: &mut Cx<'_>, generation: u64) {
        if !self.pacer.live(generation) {
            return;
        }
        let now = cx.now_ns();
        self.gc_horizon = self.clock.current().saturating_sub(self.config.gc_retain_ms * 1_000_000);
        let horizon = self.gc_horizon;
        let dropped = self.store.collect_garbage_by(horizon, |v| v.version.time);
        cx.charge(dropped as u64 / 16 + 1);
        for (txn, p) in &mut self.pending {
            if now.saturating_sub(p.since_ns) >= INQUIRE_NS {
                p.since_ns = now;
                if txn.coordinator == self.id {
                    continue;
                }
                cx.send(txn.coordinator, EigerMsg::Inquire { txn: *txn });
            }
        }
        for (seq, c) in &mut self.coordinated {
            if c.commit.is_none() && now.saturating_sub(c.sent_ns) >= INQUIRE_NS {
                c.sent_ns = now;
                let txn = TxnId { coordinator: self.id, seq: *seq };
                for s in &c.awaiting {
                    if *s != self.id {
                        cx.send(*s, EigerMsg::Prepare { txn, writes: c.parts[s].clone() });
                    }
                }
            }
        }
        let news = dropped > 0 || !self.pending.is_empty() || !self.coordinated.is_empty();
        let (delay, generation) = self.pacer.next(now, news);
        cx.set_timer(delay, EigerTimer::Tick { generation });
    }

    /// Everything a message says that the handlers rely on, checked before it touches any state.
    fn validate(&self, now_ns: u64, from: Addr, msg: &EigerMsg) -> Result<(), InvalidInput> {
        let check = Check::new(&self.topology, &self.config, now_ns, from, msg.kind());
        let me = self.id;
        let own_txn = |txn: &TxnId| {
            check.ensure(txn.coordinator == me, InvalidKind::Unexpected, || format!("{txn:?} is not coordinated here"))
        };
        let keys_here = |writes: &[(Key, Value)]| {
            check.ensure(!writes.is_empty(), InvalidKind::Malformed, || "no writes".into())?;
            writes.iter().try_for_each(|(k, _)| {
                check.ensure(k.len() <= self.config.max_key_bytes, InvalidKind::Malformed, || {
                    format!("a key of {} bytes; the limit is {} (max_key_bytes)", k.len(), self.config.max_key_bytes)
                })?;
                check.key_on(k, me.partition)
            })
        };
        match msg {
            EigerMsg::SafeTimeQuery { at_least } => {
                check.client()?;
                check.time(*at_least, "time")?;
            }
            EigerMsg::Read { keys, at, .. } => {
                check.client()?;
                check.time(*at, "read time")?;
                check.ensure(*at <= self.local_safe_time(), InvalidKind::Unexpected, || {
                    format!("a read at {at}, above this server's safe time {}", self.local_safe_time())
                })?;
                check.request_keys(keys)?;
                keys.iter().try_for_each(|k| check.key_on(k, me.partition))?;
            }
            EigerMsg::Write { writes, .. } => {
                check.client()?;
                check.ensure(!writes.is_empty(), InvalidKind::Malformed, || "no writes".into())?;
                check.request_writes(writes.iter().map(|(k, v)| (k, v)), [])?;
                check.key_on(&writes[0].0, me.partition)?;
            }
            EigerMsg::SafeTime { .. } | EigerMsg::ReadReply { .. } | EigerMsg::WriteDone { .. } => {
                return Err(check.fail(InvalidKind::Sender, "only a client is sent this"));
            }
            EigerMsg::Prepare { txn, writes } => {
                let s = check.server()?;
                check.ensure(txn.coordinator == s, InvalidKind::Sender, || format!("{s} prepares {txn:?}"))?;
                keys_here(writes)?;
            }
            EigerMsg::Prepared { txn, time } => {
                let s = check.server()?;
                own_txn(txn)?;
                check.time(*time, "prepare time")?;
                let awaited = self.coordinated.get(&txn.seq).is_some_and(|c| c.parts.contains_key(&s));
                check.ensure(awaited, InvalidKind::Unexpected, || format!("{s} is no participant of {txn:?}"))?;
            }
            EigerMsg::Commit { txn, time } => {
                let s = check.server()?;
                check.ensure(txn.coordinator == s, InvalidKind::Sender, || format!("{s} commits {txn:?}"))?;
                check.time(*time, "commit time")?;
                if let Some(p) = self.pending.get(txn) {
                    check.ensure(*time >= p.time, InvalidKind::Unexpected, || {
                        format!("commit time {time} below the prepare time {}", p.time)
                    })?;
                }
            }
            EigerMsg::CommitAck { txn } | EigerMsg::Inquire { txn } => {
                check.server()?;
                own_txn(txn)?;
            }
            EigerMsg::Forget { txn } => {
                let s = check.server()?;
                check.ensure(txn.coordinator == s, InvalidKind::Sender, || format!("{s} forgets {txn:?}"))?;
            }
        }
        Ok(())
    }

    fn message(&mut self, cx: &mut Cx<'_>, from: Addr, msg: EigerMsg) -> Result<(), InvalidInput> {
        cx.charge(1);
        self.validate(cx.now_ns(), from, &msg)?;
        let now = cx.now_ns();
        match (from, msg) {
            (Addr::Client(c), EigerMsg::SafeTimeQuery { at_least }) => {
                self.clock.advance_to(at_least);
                self.clock.tick(now);
                cx.send(c, EigerMsg::SafeTime { lst: self.local_safe_time() });
            }
            (Addr::Client(c), EigerMsg::Read { op, keys, at }) => {
                cx.read_only();
                cx.charge(keys.len() as u64);
                // At 0 (a session that has no GST yet) every key reads its initial state: exact whatever GC did.
                let result = if at != 0 && at < self.gc_horizon {
                    Err(OpError::Rejected(format!(
                        "a snapshot at {at} is older than the version-GC horizon {} (gc_retain_ms)",
                        self.gc_horizon
                    )))
                } else {
                    for key in &keys {
                        self.unlogged_writes.wait_for(cx, key);
                    }
                    Ok(keys.into_iter().map(|key| self.read_at(key, at)).collect())
                };
                cx.send(c, EigerMsg::ReadReply { op, result });
            }
            (Addr::Client(c), EigerMsg::Write { op, writes }) => self.coordinate(cx, c, op, writes),
            (Addr::Server(s), EigerMsg::Prepare { txn, writes }) => self.prepare(cx, s, txn, writes),
            (Addr::Server(s), EigerMsg::Prepared { txn, time }) => self.prepared(cx, s, txn, time),
            (Addr::Server(s), EigerMsg::Commit { txn, time }) => {
                self.commit(cx, txn, time);
                cx.send(s, EigerMsg::CommitAck { txn });
            }
            (Addr::Server(s), EigerMsg::CommitAck { txn }) => self.acked(txn, s),
            (Addr::Server(s), EigerMsg::Inquire { txn }) => {
                match self.coordinated.get(&txn.seq) {
                    // Still preparing: the commit will come.
                    Some(c) if c.commit.is_none() => {}
                    Some(c) if c.unacked.contains(&s) => {
                        let time = c.commit.expect("committed");
                        cx.send(s, EigerMsg::Commit { txn, time });
                    }
                    _ => cx.send(s, EigerMsg::Forget { txn }),
                }
            }
            (Addr::Server(_), EigerMsg::Forget { txn }) => {
                if let Some(p) = self.pending.remove(&txn) {
                    self.pending_times.remove(&(p.time, txn));
                }
            }
            (from, msg) => unreachable!("validate admits no {} from {from}", msg.kind()),
        }
        Ok(())
    }

    /// The newest version of `key` committed at or before `at`.
    fn read_at(&self, key: Key, at: u64) -> Item {
        let (found, skipped) = self.store.newest_where(&key, |v| v.version.time <= at);
        match found {
            Some(v) => Item { key, value: Some(v.value.clone()), version: v.version, skipped },
            None => Item { key, value: None, version: Version::INITIAL, skipped },
        }
    }

    /// A client's write transaction: prepare it at the server of every written partition in every datacenter.
    fn coordinate(&mut self, cx: &mut Cx<'_>, client: ClientId, op: OpId, writes: Vec<(Key, Value)>) {
        if let Err(reason) = self.config.check_request(&Request::Update { writes: writes.clone() }) {
            cx.send(client, EigerMsg::WriteDone { op, result: Err(OpError::Rejected(reason)) });
            return;
        }
        cx.charge(writes.len() as u64);
        // One write per key: the last one named.
        let mut last: BTreeMap<Key, Value> = BTreeMap::new();
        for (k, v) in writes {
            last.insert(k, v);
        }
        let mut parts: BTreeMap<ServerId, Vec<(Key, Value)>> = BTreeMap::new();
        for (k, v) in last {
            for dc in self.topology.dc_ids() {
                parts.entry(self.topology.server_of(dc, &k)).or_default().push((k.clone(), v.clone()));
            }
        }
        let seq = self.next_txn;
        self.next_txn += 1;
        let txn = TxnId { coordinator: self.id, seq };
        let awaiting: BTreeSet<ServerId> = parts.keys().copied().collect();
        let own = parts.get(&self.id).cloned();
        for (s, w) in &parts {
            if *s != self.id {
                cx.send(*s, EigerMsg::Prepare { txn, writes: w.clone() });
            }
        }
        let c = Coordinated {
            client,
            op,
            parts,
            awaiting,
            max_time: 0,
            commit: None,
            unacked: BTreeSet::new(),
            sent_ns: cx.now_ns(),
        };
        self.coordinated.insert(seq, c);
        self.wake(cx);
        if let Some(w) = own {
            let me = self.id;
            self.prepare(cx, me, txn, w);
        }
    }

    /// Hold a transaction pending (or answer again for one already pending).
    fn prepare(&mut self, cx: &mut Cx<'_>, coordinator: ServerId, txn: TxnId, writes: Vec<(Key, Value)>) {
        cx.charge(writes.len() as u64);
        let time = match self.pending.get(&txn) {
            Some(p) => p.time,
            None => {
                let time = self.unique_tick(cx.now_ns());
                self.pending.insert(txn, Pending { time, writes, since_ns: cx.now_ns() });
                self.pending_times.insert((time, txn));
                self.wake(cx);
                time
            }
        };
        if coordinator == self.id {
            self.prepared(cx, coordinator, txn, time);
        } else {
            cx.send(coordinator, EigerMsg::Prepared { txn, time });
        }
    }

    /// A participant's prepare time: once all are in, commit at the largest.
    fn prepared(&mut self, cx: &mut Cx<'_>, from: ServerId, txn: TxnId, time: u64) {
        let Some(c) = self.coordinated.get_mut(&txn.seq) else { return };
        if c.commit.is_some() || !c.awaiting.remove(&from) {
            return;
        }
        c.max_time = c.max_time.max(time);
        if !c.awaiting.is_empty() {
            return;
        }
        let commit = c.max_time;
        c.commit = Some(commit);
        c.unacked = c.parts.keys().copied().filter(|s| *s != self.id).collect();
        let (client, op) = (c.client, c.op);
        let others: Vec<ServerId> = c.unacked.iter().copied().collect();
        if c.unacked.is_empty() {
            self.coordinated.remove(&txn.seq);
        }
        for s in others {
            cx.send(s, EigerMsg::Commit { txn, time: commit });
        }
        self.commit(cx, txn, commit);
        cx.send(client, EigerMsg::WriteDone { op, result: Ok(commit) });
    }

    /// Make a pending transaction's writes visible at `time` (a commit of nothing pending is a duplicate).
    fn commit(&mut self, cx: &mut Cx<'_>, txn: TxnId, time: u64) {
        let Some(p) = self.pending.remove(&txn) else { return };
        self.pending_times.remove(&(p.time, txn));
        self.clock.advance_to(time);
        cx.charge(p.writes.len() as u64);
        let version = Version { time, dc: txn.coordinator.dc };
        for (key, value) in p.writes {
            self.store.insert(key.clone(), StoredVersion { value, version, meta: () });
            self.unlogged_writes.note(cx, &key);
        }
    }

    fn acked(&mut self, txn: TxnId, from: ServerId) {
        let Some(c) = self.coordinated.get_mut(&txn.seq) else { return };
        if c.commit.is_some() {
            c.unacked.remove(&from);
            if c.unacked.is_empty() {
                self.coordinated.remove(&txn.seq);
            }
        }
    }
}

impl ServerNode<EigerPs> for EigerServer {
    fn on_start(&mut self, cx: &mut Cx<'_>) {
        self.start(cx);
    }
    fn on_message(&mut self, cx: &mut Cx<'_>, from: Addr, msg: EigerMsg) -> Result<(), InvalidInput> {
        self.message(cx, from, msg)
    }
    fn on_timer(&mut self, cx: &mut Cx<'_>, timer: EigerTimer) {
        if let EigerTimer::Tick { generation } = timer {
            self.tick(cx, generation);
        }
    }
    fn stored_versions(&self) -> usize {
        self.store.version_count()
    }
}

/// An operation in flight at a client.
#[derive(Debug)]
enum ClientOp {
    Rot {
        items: Vec<Option<Item>>,
        slots: BTreeMap<PartitionId, Vec<usize>>,
    },
    /// A ROT waiting for the session's first GST.
    Waiting {
        keys: Vec<Key>,
    },
    /// A write sent to its coordinator; `commit` once it answered (the op completes when the GST reaches it).
    Write {
        commit: Option<u64>,
    },
}

/// The client session.
pub struct EigerClient {
    id: ClientId,
    dc: DcId,
    topology: Topology,
    config: ProtocolConfig,
    /// The latest local safe time each partition of this datacenter reported (`None`: not yet).
    lst: Vec<Option<u64>>,
    gst: u64,
    ops: BTreeMap<OpId, ClientOp>,
    pacer: Pacer,
    /// A resumed session's GST (module docs, "Session tokens"): requests are held until the GST reaches it.
    floor: u64,
    held: Vec<(OpId, Request)>,
}

/// What an Eiger-PS session token carries: the session's GST.
#[derive(Serialize, Deserialize)]
struct SavedSession {
    gst: u64,
}

impl EigerClient {
    pub fn new(id: ClientId, dc: DcId, topology: Topology, config: ProtocolConfig) -> Self {
        let pacer = Pacer::new(config.gss_interval_ms * 1_000_000, (config.gc_retain_ms / 4).max(1) * 1_000_000);
        Self {
            id,
            dc,
            lst: vec![None; usize::from(topology.partitions)],
            topology,
            config,
            gst: 0,
            ops: BTreeMap::new(),
            pacer,
            floor: 0,
            held: Vec::new(),
        }
    }

    pub fn id(&self) -> ClientId {
        self.id
    }

    /// The session's global safe time: every ROT reads at it.
    pub fn gst(&self) -> u64 {
        self.gst
    }

    fn poll(&mut self, cx: &mut Cx<'_>) {
        // Ask every server to move its clock up to the commit time a write waits for.
        let at_least = self
            .ops
            .values()
            .filter_map(|o| match o {
                ClientOp::Write { commit } => *commit,
                ClientOp::Rot { .. } | ClientOp::Waiting { .. } => None,
            })
            .max()
            .unwrap_or(0)
            .max(if self.gst < self.floor { self.floor } else { 0 });
        for p in 0..self.topology.partitions {
            cx.send(ServerId::new(self.dc, p), EigerMsg::SafeTimeQuery { at_least });
        }
    }

    fn request(&mut self, cx: &mut Cx<'_>, op: OpId, request: Request) {
        if let Err(reason) = self.config.check_request(&request) {
            cx.complete(op, Err(OpError::Rejected(reason)));
            return;
        }
        // Busy: poll at the base period again.
        if let Some((delay, generation)) = self.pacer.wake(cx.now_ns()) {
            cx.set_timer(delay, EigerTimer::Poll { generation });
        }
        if self.gst < self.floor {
            // A resumed session: nothing runs until this datacenter's GST has reached the session's (its
            // reads must see what it read and wrote). The poll asks every server to move its clock there.
            let ahead_ns = self.config.max_clock_ahead_ms.saturating_mul(1_000_000);
            if self.floor > cx.now_ns().saturating_add(ahead_ns) {
                let reason = format!(
                    "the resumed session's safe time {} is more than max_clock_ahead_ms ahead of this client's \
                     clock ({}): no server would wait for it",
                    self.floor,
                    cx.now_ns()
                );
                cx.complete(op, Err(OpError::Rejected(reason)));
                return;
            }
            self.held.push((op, request));
            self.poll(cx);
            return;
        }
        match request {
            Request::Rot { keys } if !self.has_gst() => {
                self.ops.insert(op, ClientOp::Waiting { keys });
            }
            Request::Rot { keys } => self.send_rot(cx, op, keys),
            Request::Put { key, value } => self.write(cx, op, vec![(key, value)]),
            Request::Update { writes } => self.write(cx, op, writes),
            Request::RotRounds { .. } => {
                let reason = "eiger-ps's read-only transactions are one-shot: name every key in one ROT".to_string();
                cx.complete(op, Err(OpError::Rejected(reason)));
            }
            other => cx.complete(op, Err(EigerPs::OFFERS.refusal(EigerPs::NAME, &other))),
        }
    }

    /// Whether every server of the datacenter has answered a poll.
    fn has_gst(&self) -> bool {
        self.lst.iter().all(Option::is_some)
    }

    fn send_rot(&mut self, cx: &mut Cx<'_>, op: OpId, keys: Vec<Key>) {
        let mut slots: BTreeMap<PartitionId, Vec<usize>> = BTreeMap::new();
        for (i, key) in keys.iter().enumerate() {
            slots.entry(self.topology.partition_of(key)).or_default().push(i);
        }
        for (p, positions) in &slots {
            let keys = positions.iter().map(|i| keys[*i].clone()).collect();
            cx.send(ServerId::new(self.dc, *p), EigerMsg::Read { op, keys, at: self.gst });
        }
        self.ops.insert(op, ClientOp::Rot { items: vec![None; keys.len()], slots });
        if keys.is_empty() {
            self.rot_done(cx, op);
        }
    }

    fn write(&mut self, cx: &mut Cx<'_>, op: OpId, writes: Vec<(Key, Value)>) {
        if writes.is_empty() {
            cx.complete(op, Ok(Reply { metrics: OpMetrics { rounds: 0, ..Default::default() }, ..Default::default() }));
            return;
        }
        let server = self.topology.server_of(self.dc, &writes[0].0);
        cx.send(server, EigerMsg::Write { op, writes });
        self.ops.insert(op, ClientOp::Write { commit: None });
    }

    fn message(&mut self, cx: &mut Cx<'_>, from: Addr, msg: EigerMsg) {
        let Addr::Server(server) = from else { return };
        match msg {
            EigerMsg::SafeTime { lst } => {
                if server.dc != self.dc || server.partition >= self.topology.partitions {
                    return;
                }
                let slot = &mut self.lst[usize::from(server.partition)];
                *slot = Some(slot.map_or(lst, |l| l.max(lst)));
                if let Some(gst) =
                    self.lst.iter().copied().collect::<Option<Vec<u64>>>().and_then(|v| v.into_iter().min())
                {
                    self.gst = self.gst.max(gst);
                    let waiting: Vec<OpId> = self
                        .ops
                        .iter()
                        .filter(|(_, o)| matches!(o, ClientOp::Waiting { .. }))
                        .map(|(op, _)| *op)
                        .collect();
                    for op in waiting {
                        if let Some(ClientOp::Waiting { keys }) = self.ops.remove(&op) {
                            self.send_rot(cx, op, keys);
                        }
                    }
                }
                self.finish_writes(cx);
                if self.gst >= self.floor && !self.held.is_empty() {
                    for (op, request) in std::mem::take(&mut self.held) {
                        self.request(cx, op, request);
                    }
                }
            }
            EigerMsg::ReadReply { op, result } => {
                let Some(ClientOp::Rot { items, slots }) = self.ops.get_mut(&op) else { return };
                let got = match result {
                    Ok(got) => got,
                    Err(e) => {
                        self.ops.remove(&op);
                        cx.complete(op, Err(e));
                        return;
                    }
                };
                if slots.get(&server.partition).is_none_or(|positions| positions.len() != got.len()) {
                    return;
                }
                let positions = slots.remove(&server.partition).expect("checked above");
                for (pos, item) in positions.into_iter().zip(got) {
                    items[pos] = Some(item);
                }
                if slots.is_empty() {
                    self.rot_done(cx, op);
                }
            }
            EigerMsg::WriteDone { op, result } => {
                let Some(ClientOp::Write { commit }) = self.ops.get_mut(&op) else { return };
                match result {
                    Ok(c) => {
                        *commit = Some(c);
                        if self.gst < c {
                            // Poll at once, asking every server to move its clock to the commit time.
                            self.poll(cx);
                        }
                        self.finish_writes(cx);
                    }
                    Err(e) => {
                        self.ops.remove(&op);
                        cx.complete(op, Err(e));
                    }
                }
            }
            _ => {}
        }
    }

    /// Complete the writes whose commit time the GST has reached.
    fn finish_writes(&mut self, cx: &mut Cx<'_>) {
        let gst = self.gst;
        let done: Vec<(OpId, u64)> = self
            .ops
            .iter()
            .filter_map(|(op, o)| match o {
                ClientOp::Write { commit: Some(c) } if *c <= gst => Some((*op, *c)),
                _ => None,
            })
            .collect();
        for (op, c) in done {
            self.ops.remove(&op);
            let metrics = OpMetrics { rounds: 1, ..Default::default() };
            // The coordinator is in this client's datacenter: its commit version names it.
            let commit = Some(Version { time: c, dc: self.dc });
            cx.complete(op, Ok(Reply { reads: Vec::new(), commit, metrics, writes: Vec::new() }));
        }
    }

    fn rot_done(&mut self, cx: &mut Cx<'_>, op: OpId) {
        let Some(ClientOp::Rot { items, .. }) = self.ops.remove(&op) else { return };
        let returned = items.len() as u32;
        let reads = items
            .into_iter()
            .map(|i| {
                let i = i.expect("every position answered");
                ReadResult { key: i.key, value: i.value, version: i.version, versions_skipped: i.skipped }
            })
            .collect();
        let metrics = OpMetrics { rounds: 1, versions_returned: returned, blocked_ns: 0, ..Default::default() };
        cx.complete(op, Ok(Reply { reads, commit: None, metrics, writes: Vec::new() }));
    }
}

impl ClientNode<EigerPs> for EigerClient {
    fn save_session(&self) -> Vec<u8> {
        session::encode(EigerPs::NAME, &SavedSession { gst: self.gst.max(self.floor) })
    }

    fn resume_session(&mut self, saved: &[u8]) -> Result<(), String> {
        let Some(s) = session::decode::<SavedSession>(EigerPs::NAME, saved)? else { return Ok(()) };
        session::check_time(s.gst, "the session's safe time")?;
        self.floor = self.floor.max(s.gst);
        Ok(())
    }

    fn on_start(&mut self, cx: &mut Cx<'_>) {
        self.poll(cx);
        let (delay, generation) = self.pacer.start(cx.now_ns());
        cx.set_timer(delay, EigerTimer::Poll { generation });
    }
    fn on_request(&mut self, cx: &mut Cx<'_>, op: OpId, request: Request) {
        self.request(cx, op, request);
    }
    fn on_message(&mut self, cx: &mut Cx<'_>, from: Addr, msg: EigerMsg) {
        self.message(cx, from, msg);
    }
    fn on_timer(&mut self, cx: &mut Cx<'_>, timer: EigerTimer) {
        let EigerTimer::Poll { generation } = timer else { return };
        if !self.pacer.live(generation) {
            return;
        }
        self.poll(cx);
        let busy = !self.ops.is_empty() || !self.held.is_empty();
        let (delay, generation) = self.pacer.next(cx.now_ns(), busy);
        cx.set_timer(delay, EigerTimer::Poll { generation });
    }
}
