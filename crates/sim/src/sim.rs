//! The event loop: one virtual clock, one event queue, one inbox per node.

use crate::model::{CLOCK_BASE_NS, ClockModel, NetworkModel, SimConfig};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use snowline_core::host::{self, NodeInput};
use snowline_core::{
    Addr, ClientId, Ctx, DcId, Effects, InvalidInput, Message, OpError, OpId, PartitionId, Protocol, Reply, Request,
    ServerId, ServerNode, Topology,
};
use snowline_storage::{DurableHost, MemLog, Output, Recovered};
use std::cmp::Ordering;
use std::collections::hash_map::Entry;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap, HashMap, VecDeque};
use std::hash::{BuildHasherDefault, Hasher};

/// A message in flight, as the scenario API's filters see it.
#[derive(Clone, Debug, PartialEq)]
pub struct Envelope<M> {
    pub from: Addr,
    pub to: Addr,
    pub msg: M,
    /// Virtual time the message left its sender (the end of the handler that sent it).
    pub sent_at_ns: u64,
    /// Between durable servers: the message's number on its link (`snowline_storage::host`).
    pub seq: Option<u64>,
}

/// An operation completed by a client node, at virtual time `time_ns`.
#[derive(Clone, Debug, PartialEq)]
pub struct Completion {
    pub client: ClientId,
    pub op: OpId,
    pub result: Result<Reply, OpError>,
    pub time_ns: u64,
}

/// Names a message filter installed by [`Sim::hold`] or [`Sim::drop_matching`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct HoldId(pub u64);

type Filter<M> = Box<dyn Fn(&Envelope<M>) -> bool>;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum FilterKind {
    Hold,
    Drop,
}

/// One input to a node's handler.
enum Input<P: Protocol> {
    Message(Envelope<P::Msg>),
    /// A timer set in the node's incarnation `.1` (stale after a crash; clients are always incarnation 0).
    Timer(P::Timer, u32),
    Request(OpId, Request),
    /// A durable server's timer `id`, set in its incarnation `incarnation` (stale after a crash).
    HostTimer {
        id: u64,
        incarnation: u32,
    },
    /// A durable server's link acknowledgement (`Output::Ack`).
    Ack {
        from: ServerId,
        to: ServerId,
        seq: u64,
        resend: bool,
    },
}

/// What an event does when its time comes.
enum Payload<P: Protocol> {
    /// A message reaches its destination: the filters see it, then it joins the inbox of node `.0`.
    Net(u32, Envelope<P::Msg>),
    /// An input joins the inbox of node `.0`, bypassing the filters (timers, requests, released messages).
    Input(u32, Input<P>),
    /// Node `.0` is free again and handles the next input of its inbox.
    Run(u32),
    /// A completion reaches the application.
    Complete(Completion),
    /// Durable server `.0` (in incarnation `.1`) acknowledges and probes its links.
    HostTick(u32, u32),
    /// A durable server's background commit (`SimConfig::fsync_ns`) ends: server, incarnation.
    CommitDone(u32, u32),
    /// Client operation `.1` of client `.0` has had its time ([`SimConfig::op_timeout_ns`]).
    OpTimeout(ClientId, OpId),
    Crash(u32),
    /// Restart server `.0`, from its log (`.1`) or with a fresh state.
    Restart(u32, bool),
    /// Leader fault `.0` of [`Sim::leader_faults`] comes due.
    LeaderFault(u32),
}

/// A server's state machine: plain, hosted durably, or crashed (only its log is left).
enum ServerSlot<P: Protocol> {
    Plain(P::Server),
    Durable(Box<DurableHost<P, MemLog>>),
    Down(MemLog),
}

/// How often a durable server acknowledges and probes its links (the networked runtime's tick).
const HOST_TICK_NS: u64 = 100_000_000;

/// A queue entry; the payload lives in the slab so heap moves stay small. Ordered so that the
/// `BinaryHeap` (a max-heap) pops the smallest `(time, seq)` first.
#[derive(Clone, Copy, PartialEq, Eq)]
struct QueueEntry {
    time: u64,
    seq: u64,
    slot: u32,
}

impl Ord for QueueEntry {
    fn cmp(&self, other: &Self) -> Ordering {
        (other.time, other.seq).cmp(&(self.time, self.seq))
    }
}

impl PartialOrd for QueueEntry {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// A node's physical clock: offset and drift fixed at creation, readings clamped to be non-decreasing.
#[derive(Clone, Copy, Debug)]
struct Clock {
    offset_ns: i64,
    /// Drift as a fraction (ppm · 1e-6).
    drift: f64,
    last_ns: u64,
}

impl Clock {
    fn new(model: &ClockModel, rng: &mut SmallRng) -> Self {
        let skew = model.max_skew_ns as i64;
        let offset_ns = rng.random_range(-skew..=skew);
        let ppm = model.max_drift_ppm;
        let drift = if ppm > 0.0 { rng.random_range(-ppm..=ppm) * 1e-6 } else { 0.0 };
        Self { offset_ns, drift, last_ns: 0 }
    }

    fn peek(&self, virtual_ns: u64) -> u64 {
        let drifted = (virtual_ns as f64 * self.drift) as i64;
        let raw = (CLOCK_BASE_NS as i64).saturating_add(virtual_ns as i64).saturating_add(drifted + self.offset_ns);
        (raw.max(0) as u64).max(self.last_ns)
    }

    fn read(&mut self, virtual_ns: u64) -> u64 {
        self.last_ns = self.peek(virtual_ns);
        self.last_ns
    }
}

/// Everything the simulator keeps per node besides the protocol's state machine.
struct NodeMeta<P: Protocol> {
    addr: Addr,
    dc: DcId,
    rng: SmallRng,
    clock: Clock,
    /// The node handles its next input no earlier than this.
    busy_until: u64,
    /// Total virtual time spent in handlers.
    busy_ns: u64,
    /// A `Run` event is queued (invariant: the inbox is non-empty only while one is).
    scheduled: bool,
    inbox: VecDeque<Input<P>>,
}

/// One side of a network partition ([`Sim::partition`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Side {
    /// These nodes (servers or clients).
    Nodes(BTreeSet<Addr>),
    /// Every node of these datacenters, clients included.
    Dcs(BTreeSet<DcId>),
    /// Every node not on the other side (clients included).
    Rest,
}

impl Side {
    /// These servers (their datacenters' clients stay connected to everyone).
    pub fn servers(servers: impl IntoIterator<Item = ServerId>) -> Self {
        Side::Nodes(servers.into_iter().map(Addr::Server).collect())
    }

    /// Every node of these datacenters, clients included.
    pub fn dcs(dcs: impl IntoIterator<Item = DcId>) -> Self {
        Side::Dcs(dcs.into_iter().collect())
    }

    fn has(&self, addr: Addr, dc: DcId) -> bool {
        match self {
            Side::Nodes(set) => set.contains(&addr),
            Side::Dcs(set) => set.contains(&dc),
            Side::Rest => false,
        }
    }
}

impl std::fmt::Display for Side {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Side::Nodes(set) => {
                let names: Vec<String> = set.iter().map(|a| a.to_string()).collect();
                write!(f, "{{{}}}", names.join(","))
            }
            Side::Dcs(set) => {
                let names: Vec<String> = set.iter().map(|d| format!("dc{d}")).collect();
                write!(f, "{{{}}}", names.join(","))
            }
            Side::Rest => f.write_str("the rest"),
        }
    }
}

/// What a server that crashes does next ([`Sim::schedule_crash_with`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Restart {
    /// Crash-stop: it stays down.
    Never,
    /// It comes back `after_ns` later from its log ([`Sim::restart`]: durable servers).
    WithDisk { after_ns: u64 },
    /// It comes back `after_ns` later with a fresh state ([`Sim::restart_without_disk`]: only for protocols
    /// whose servers can rejoin empty).
    WithoutDisk { after_ns: u64 },
}

/// A fault aimed at whichever member of a replica group leads when it comes due ([`ServerNode::leads`]).
#[derive(Clone, Copy, Debug)]
struct LeaderFault {
    partition: PartitionId,
    /// Crash it at once, or the moment it next sends a message to a server (until `until_ns`).
    on_send_until: Option<u64>,
    restart: Restart,
}

/// When a crash hook fires ([`Sim::crash_on_send`], [`Sim::crash_after_send`], [`Sim::crash_on_deliver`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum HookKind {
    BeforeSend,
    AfterSend,
    OnDeliver,
}

struct Hook<M> {
    id: HoldId,
    kind: HookKind,
    filter: Filter<M>,
    /// Not fired by this time: removed.
    until_ns: u64,
    restart: Restart,
}

/// A network partition between two sides: messages between them are delayed until it heals (`drop: false`,
/// [`Sim::partition_dcs`]) or lost ([`Sim::partition`]).
struct Partition {
    a: Side,
    b: Side,
    from_ns: u64,
    until_ns: u64,
    drop: bool,
}

impl Partition {
    /// Whether the partition stands between nodes `x` and `y` (each an address and its datacenter).
    fn separates(&self, x: (Addr, DcId), y: (Addr, DcId)) -> bool {
        let on = |side: &Side, other: &Side, n: (Addr, DcId)| match side {
            Side::Rest => !other.has(n.0, n.1),
            s => s.has(n.0, n.1),
        };
        (on(&self.a, &self.b, x) && on(&self.b, &self.a, y)) || (on(&self.a, &self.b, y) && on(&self.b, &self.a, x))
    }

    fn covers(&self, t: u64) -> bool {
        self.from_ns <= t && t < self.until_ns
    }
}

/// FxHash-style hasher for the per-link FIFO map (keys are `u64`s; the map is looked up, never iterated).
#[derive(Default)]
struct LinkHasher(u64);

impl Hasher for LinkHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.write_u64(u64::from(*b));
        }
    }

    fn write_u64(&mut self, i: u64) {
        self.0 = (self.0.rotate_left(5) ^ i).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}

const STREAM_NODE_RNG: u64 = 1;
const STREAM_CLOCK: u64 = 2;
const STREAM_NETWORK: u64 = 3;
const STREAM_LOSS: u64 = 4;

fn splitmix64(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A seed for generator `stream` of entity `id`, independent of the order entities are created in.
pub(crate) fn derive_seed(seed: u64, stream: u64, id: u64) -> u64 {
    splitmix64(splitmix64(seed ^ splitmix64(stream)) ^ id)
}

fn addr_code(addr: Addr) -> u64 {
    match addr {
        // Replica 0 keeps the code it had before replica groups, so older seeds replay unchanged.
        Addr::Server(s) => (1 << 63) | (u64::from(s.replica) << 32) | (u64::from(s.dc) << 16) | u64::from(s.partition),
        Addr::Client(c) => c.0 & !(1 << 63),
    }
}

/// A deterministic discrete-event simulation of protocol `P`. See the crate docs for the model.
pub struct Sim<P: Protocol> {
    config: SimConfig,
    fifo: bool,
    now: u64,
    seq: u64,
    queue: BinaryHeap<QueueEntry>,
    slab: Vec<Option<Payload<P>>>,
    free_slots: Vec<u32>,
    /// Per node, servers first (in `Topology::servers` order), then clients (index `servers + id`).
    meta: Vec<NodeMeta<P>>,
    servers: Vec<ServerSlot<P>>,
    /// Per server: how many times it has been restarted (timers of earlier incarnations are stale).
    incarnations: Vec<u32>,
    /// With an operation timeout: the operations submitted and not yet completed or given up.
    outstanding: BTreeSet<(ClientId, OpId)>,
    clients: Vec<P::Client>,
    /// Reused by every handler call.
    fx: Effects<P>,
    net_rng: SmallRng,
    /// Last delivery time per directed link `(from << 32) | to`, for FIFO links.
    links: HashMap<u64, u64, BuildHasherDefault<LinkHasher>>,
    partitions: Vec<Partition>,
    /// When the last partition heals (a send after it checks none).
    partitions_end_ns: u64,
    /// Random message loss: `(from_ns, until_ns, probability)` windows ([`Sim::lose`]).
    losses: Vec<(u64, u64, f64)>,
    loss_rng: SmallRng,
    hooks: Vec<Hook<P::Msg>>,
    /// Hooks that fired: which server they crashed, and when.
    fired: BTreeMap<HoldId, (ServerId, u64)>,
    /// The node whose handler's effects are being carried out when a hook decided it crashes: the rest of
    /// its effects are lost, and it crashes once they are done (with this restart plan).
    crashing: Option<(u32, Restart)>,
    leader_faults: Vec<LeaderFault>,
    /// Every crash so far: the server and the virtual time.
    crash_log: Vec<(ServerId, u64)>,
    /// Log records that crashes lost before they were durable.
    lost_records: u64,
    filters: Vec<(HoldId, FilterKind, Filter<P::Msg>)>,
    next_hold: u64,
    held: Vec<(u32, Envelope<P::Msg>)>,
    ready: VecDeque<Completion>,
    events: u64,
    inputs: u64,
    /// Messages servers refused as invalid input, and the first few of them (for a failing test's message).
    invalid: u64,
    invalid_first: Vec<InvalidInput>,
    messages_sent: u64,
    messages_dropped: u64,
    kinds: Vec<(&'static str, u64)>,
    trace: Option<Vec<String>>,
}

impl<P: Protocol> Sim<P> {
    /// Build one server node per topology server and call `on_start` on each at virtual time 0, in
    /// `ServerId` order. Panics if the config is invalid ([`SimConfig::validate`]).
    pub fn new(config: SimConfig) -> Self {
        if let Err(e) = config.validate() {
            panic!("invalid simulator config: {e}");
        }
        let topology = config.topology;
        let fifo = P::links().fifo || !config.network.reorder;
        let net_rng = SmallRng::seed_from_u64(derive_seed(config.seed, STREAM_NETWORK, 0));
        let mut sim = Self {
            fifo,
            now: 0,
            seq: 0,
            queue: BinaryHeap::new(),
            slab: Vec::new(),
            free_slots: Vec::new(),
            meta: Vec::new(),
            servers: Vec::new(),
            incarnations: Vec::new(),
            outstanding: BTreeSet::new(),
            clients: Vec::new(),
            fx: Effects::default(),
            net_rng,
            links: HashMap::default(),
            partitions: Vec::new(),
            partitions_end_ns: 0,
            losses: Vec::new(),
            loss_rng: SmallRng::seed_from_u64(derive_seed(config.seed, STREAM_LOSS, 0)),
            hooks: Vec::new(),
            fired: BTreeMap::new(),
            crashing: None,
            leader_faults: Vec::new(),
            crash_log: Vec::new(),
            lost_records: 0,
            filters: Vec::new(),
            next_hold: 0,
            held: Vec::new(),
            ready: VecDeque::new(),
            events: 0,
            inputs: 0,
            invalid: 0,
            invalid_first: Vec::new(),
            messages_sent: 0,
            messages_dropped: 0,
            kinds: Vec::new(),
            trace: None,
            config,
        };
        for id in topology.servers() {
            debug_assert_eq!(sim.server_index(id) as usize, sim.servers.len());
            let slot = if sim.config.durable {
                ServerSlot::Down(MemLog::new())
            } else {
                ServerSlot::Plain(P::server(id, topology, &sim.config.protocol))
            };
            sim.servers.push(slot);
            sim.incarnations.push(0);
            let meta = sim.new_meta(Addr::Server(id), id.dc);
            sim.meta.push(meta);
        }
        for idx in 0..sim.servers.len() as u32 {
            if sim.config.durable {
                sim.open_host(idx);
            } else {
                sim.start(idx);
            }
        }
        for c in sim.config.crashes.clone() {
            let restart = c.down_ns.map_or(Restart::Never, |after_ns| Restart::WithDisk { after_ns });
            sim.schedule_crash_with(c.server, c.at_ns, restart);
        }
        sim
    }

    /// Kill server `id` now: what it received and has not handled is lost, and so are its pending timers
    /// and messages reaching it while it is down. A durable server ([`SimConfig::durable`]) keeps what its
    /// log committed and may come back from it ([`Sim::restart`]); any server may stay down for good
    /// (crash-stop) or come back empty ([`Sim::restart_without_disk`]).
    pub fn crash(&mut self, id: ServerId) {
        let idx = self.server_index(id) as usize;
        let slot = std::mem::replace(&mut self.servers[idx], ServerSlot::Down(MemLog::new()));
        match slot {
            ServerSlot::Durable(host) => {
                let mut log = host.into_log();
                self.lost_records += log.not_durable() as u64;
                log.crash();
                self.servers[idx] = ServerSlot::Down(log);
            }
            ServerSlot::Plain(_) => {}
            ServerSlot::Down(_) => panic!("crash: server {id} is already down"),
        }
        self.incarnations[idx] += 1;
        self.meta[idx].inbox.clear();
        self.crash_log.push((id, self.now));
        self.trace_event(id, "CRASHED");
    }

    /// Start crashed server `id` again **with its disk**: it recovers from its log (`Protocol::DURABILITY`)
    /// and runs the catch-up exchange. Needs durable servers ([`SimConfig::durable`]).
    pub fn restart(&mut self, id: ServerId) {
        assert!(self.config.durable, "restart: a server comes back from its log only with SimConfig::durable");
        let idx = self.server_index(id);
        assert!(self.is_down(id), "restart: server {id} is not down");
        self.open_host(idx);
        self.trace_event(id, "RESTARTED");
    }

    /// Start crashed server `id` again **without its disk**: a fresh state machine from [`Protocol::server`]
    /// (durable servers: over an empty log), which runs `on_start`. Only for protocols whose servers can
    /// rejoin with an empty state; a Raft member (`raft-kv`) must not (it would forget its votes and log and
    /// could break safety): crash-stop a minority of its group instead.
    pub fn restart_without_disk(&mut self, id: ServerId) {
        let idx = self.server_index(id);
        assert!(self.is_down(id), "restart_without_disk: server {id} is not down");
        let i = idx as usize;
        self.meta[i].busy_until = self.meta[i].busy_until.max(self.now);
        if self.config.durable {
            self.servers[i] = ServerSlot::Down(MemLog::new());
            self.open_host(idx);
        } else {
            self.servers[i] = ServerSlot::Plain(P::server(id, self.config.topology, &self.config.protocol));
            self.start(idx);
        }
        self.trace_event(id, "RESTARTED WITHOUT DISK");
    }

    /// Crash server `id` at virtual time `at_ns` and restart it from its log `down_for_ns` later
    /// ([`Sim::restart`]).
    pub fn schedule_crash(&mut self, id: ServerId, at_ns: u64, down_for_ns: u64) {
        assert!(self.config.durable, "schedule_crash: the simulator must run durable servers (SimConfig::durable)");
        self.schedule_crash_with(id, at_ns, Restart::WithDisk { after_ns: down_for_ns });
    }

    /// Crash server `id` at virtual time `at_ns` (if it is up then), then as `restart` says.
    pub fn schedule_crash_with(&mut self, id: ServerId, at_ns: u64, restart: Restart) {
        self.check_restart(restart);
        let idx = self.server_index(id);
        self.schedule(at_ns, Payload::Crash(idx));
        self.schedule_restart(idx, at_ns, restart);
    }

    /// At virtual time `at_ns`, crash the member of `partition`'s group that leads then ([`ServerNode::leads`];
    /// the newest term if several believe they do); if none does, nothing happens. Then as `restart` says.
    pub fn schedule_leader_crash(&mut self, partition: PartitionId, at_ns: u64, restart: Restart) {
        self.check_restart(restart);
        assert!(partition < self.config.topology.partitions, "schedule_leader_crash: no partition {partition}");
        let i = self.leader_faults.len() as u32;
        self.leader_faults.push(LeaderFault { partition, on_send_until: None, restart });
        self.schedule(at_ns, Payload::LeaderFault(i));
    }

    /// At virtual time `at_ns`, pick the member of `partition`'s group that leads then (as
    /// [`Sim::schedule_leader_crash`]) and crash it the moment it next sends a message to a server (the
    /// message is lost: [`Sim::crash_on_send`]), unless that has not happened by `until_ns`. Then as `restart`
    /// says (counted from the crash).
    pub fn schedule_leader_kill_on_send(
        &mut self,
        partition: PartitionId,
        at_ns: u64,
        until_ns: u64,
        restart: Restart,
    ) {
        self.check_restart(restart);
        assert!(partition < self.config.topology.partitions, "schedule_leader_kill_on_send: no partition {partition}");
        let i = self.leader_faults.len() as u32;
        self.leader_faults.push(LeaderFault { partition, on_send_until: Some(until_ns), restart });
        self.schedule(at_ns, Payload::LeaderFault(i));
    }

    /// The member of `partition`'s group that is up and believes it leads in the newest term, if any.
    pub fn leader_of(&self, partition: PartitionId) -> Option<ServerId> {
        let t = self.config.topology;
        t.group(partition)
            .filter(|s| !self.is_down(*s))
            .filter_map(|s| self.server(s).leads().map(|term| (term, std::cmp::Reverse(s))))
            .max()
            .map(|(_, std::cmp::Reverse(s))| s)
    }

    fn check_restart(&self, restart: Restart) {
        if let Restart::WithDisk { .. } = restart {
            assert!(self.config.durable, "a restart with its disk needs durable servers (SimConfig::durable)");
        }
    }

    fn schedule_restart(&mut self, idx: u32, crash_at: u64, restart: Restart) {
        match restart {
            Restart::Never => {}
            Restart::WithDisk { after_ns } => {
                self.schedule(crash_at.saturating_add(after_ns), Payload::Restart(idx, true));
            }
            Restart::WithoutDisk { after_ns } => {
                self.schedule(crash_at.saturating_add(after_ns), Payload::Restart(idx, false));
            }
        }
    }

    fn trace_event(&mut self, id: ServerId, what: &str) {
        if let Some(t) = &mut self.trace {
            t.push(format!("t={} {id} {what}", self.now));
        }
    }

    /// Whether server `id` is crashed.
    pub fn is_down(&self, id: ServerId) -> bool {
        matches!(self.servers[self.server_index(id) as usize], ServerSlot::Down(_))
    }

    /// Add a client session in datacenter `dc` (ids 0, 1, 2, ... in call order) and call its `on_start` now.
    pub fn add_client(&mut self, dc: DcId) -> ClientId {
        assert!(dc < self.config.topology.dcs, "add_client: datacenter {dc} is not in the topology");
        let id = ClientId(self.clients.len() as u64);
        self.clients.push(P::client(id, dc, self.config.topology, &self.config.protocol));
        let meta = self.new_meta(Addr::Client(id), dc);
        self.meta.push(meta);
        self.start(self.meta.len() as u32 - 1);
        id
    }

    /// Hand `request` to client `client` now: it joins the client's inbox at the current virtual time.
    pub fn submit(&mut self, client: ClientId, op: OpId, request: Request) {
        let idx = self.client_index(client).unwrap_or_else(|| panic!("submit: no client {client}"));
        self.schedule(self.now, Payload::Input(idx, Input::Request(op, request)));
        if let Some(t) = self.config.op_timeout_ns {
            self.outstanding.insert((client, op));
            self.schedule(self.now.saturating_add(t), Payload::OpTimeout(client, op));
        }
    }

    /// Current virtual time in nanoseconds.
    pub fn now_ns(&self) -> u64 {
        self.now
    }

    pub fn seed(&self) -> u64 {
        self.config.seed
    }

    pub fn config(&self) -> &SimConfig {
        &self.config
    }

    pub fn topology(&self) -> Topology {
        self.config.topology
    }

    /// Run events until a completion is produced (returned) or the next event lies after `deadline_ns`
    /// (`None`; virtual time is then `deadline_ns`, or stays put if already later). Events at exactly
    /// `deadline_ns` are run.
    pub fn step_until(&mut self, deadline_ns: u64) -> Option<Completion> {
        loop {
            if let Some(c) = self.ready.pop_front() {
                return Some(c);
            }
            match self.queue.peek() {
                Some(e) if e.time <= deadline_ns => {
                    self.step();
                }
                _ => {
                    self.now = self.now.max(deadline_ns);
                    return None;
                }
            }
        }
    }

    /// Scenario convenience: submit `request` for `client` and run until that operation completes, for at most
    /// `within_ns` of virtual time (`None` if it did not). Other clients' completions meanwhile stay queued, in
    /// order, for the next [`Sim::step_until`] or [`Sim::drain_completions`].
    pub fn execute(
        &mut self,
        client: ClientId,
        op: OpId,
        request: Request,
        within_ns: u64,
    ) -> Option<Result<Reply, OpError>> {
        self.submit(client, op, request);
        let deadline = self.now.saturating_add(within_ns);
        let mut others = Vec::new();
        let result = loop {
            match self.step_until(deadline) {
                Some(c) if c.client == client && c.op == op => break Some(c.result),
                Some(c) => others.push(c),
                None => break None,
            }
        };
        for c in others.into_iter().rev() {
            self.ready.push_front(c);
        }
        result
    }

    /// Every completion until `deadline_ns`, in order.
    pub fn run_until(&mut self, deadline_ns: u64) -> Vec<Completion> {
        let mut out = Vec::new();
        while let Some(c) = self.step_until(deadline_ns) {
            out.push(c);
        }
        out
    }

    /// [`Sim::run_until`] `now + by_ns`.
    pub fn advance(&mut self, by_ns: u64) -> Vec<Completion> {
        self.run_until(self.now.saturating_add(by_ns))
    }

    /// Process exactly one event; `false` if the queue is empty. Completions it produces wait in
    /// [`Sim::drain_completions`] (and are also the next ones [`Sim::step_until`] returns).
    pub fn step(&mut self) -> bool {
        let Some(e) = self.queue.pop() else { return false };
        debug_assert!(e.time >= self.now, "time went backwards");
        self.now = e.time;
        self.events += 1;
        let payload = self.slab[e.slot as usize].take().expect("queued event has a payload");
        self.free_slots.push(e.slot);
        match payload {
            Payload::Net(to, env) => self.arrive(to, env),
            Payload::Input(to, Input::Ack { from, to: ack_to, seq, resend }) => {
                // A link acknowledgement travels the network too: a partition that drops messages loses it.
                let f = self.server_index(from);
                if self.cut(f, to, self.now, self.now) {
                    self.messages_dropped += 1;
                } else {
                    self.enqueue(to, Input::Ack { from, to: ack_to, seq, resend });
                }
            }
            Payload::Input(to, input) => self.enqueue(to, input),
            Payload::Run(idx) => {
                // The inbox can be empty here only if the node crashed meanwhile (its inbox was lost).
                if let Some(input) = self.meta[idx as usize].inbox.pop_front() {
                    self.exec(idx, input);
                }
                let m = &mut self.meta[idx as usize];
                if m.inbox.is_empty() {
                    m.scheduled = false;
                } else {
                    let at = m.busy_until;
                    self.schedule(at, Payload::Run(idx));
                }
            }
            Payload::Complete(c) => {
                // With an operation timeout, a completion after the operation was given up on is ignored.
                if self.config.op_timeout_ns.is_none() || self.outstanding.remove(&(c.client, c.op)) {
                    self.ready.push_back(c);
                }
            }
            Payload::OpTimeout(client, op) => {
                if self.outstanding.remove(&(client, op)) {
                    let t = self.config.op_timeout_ns.unwrap_or(0);
                    let result = Err(OpError::Unknown(format!("no answer within {} ms", t / 1_000_000)));
                    self.ready.push_back(Completion { client, op, result, time_ns: self.now });
                }
            }
            Payload::HostTick(idx, incarnation) => {
                if incarnation == self.incarnations[idx as usize] {
                    let clock = self.meta[idx as usize].clock.read(self.now);
                    if let ServerSlot::Durable(host) = &mut self.servers[idx as usize] {
                        host.tick(clock);
                    }
                    self.carry_out_host_outputs(idx, self.now);
                    self.start_commit(idx, self.now);
                    self.schedule(self.now + HOST_TICK_NS, Payload::HostTick(idx, incarnation));
                }
            }
            Payload::CommitDone(idx, incarnation) => {
                if incarnation == self.incarnations[idx as usize] {
                    if let ServerSlot::Durable(host) = &mut self.servers[idx as usize] {
                        host.poll_commit().expect("an in-memory log does not fail");
                    }
                    self.carry_out_host_outputs(idx, self.now);
                    self.start_commit(idx, self.now);
                }
            }
            Payload::Crash(idx) => {
                let id = self.server_id(idx);
                if !self.is_down(id) {
                    self.crash(id);
                }
            }
            Payload::Restart(idx, with_disk) => {
                let id = self.server_id(idx);
                if self.is_down(id) {
                    if with_disk { self.restart(id) } else { self.restart_without_disk(id) }
                }
            }
            Payload::LeaderFault(i) => {
                let f = self.leader_faults[i as usize];
                if let Some(leader) = self.leader_of(f.partition) {
                    match f.on_send_until {
                        None => {
                            self.crash(leader);
                            let idx = self.server_index(leader);
                            self.schedule_restart(idx, self.now, f.restart);
                        }
                        Some(until_ns) => {
                            let to_server = move |e: &Envelope<P::Msg>| {
                                e.from == Addr::Server(leader) && matches!(e.to, Addr::Server(_))
                            };
                            self.add_hook(HookKind::BeforeSend, Box::new(to_server), until_ns, f.restart);
                        }
                    }
                }
            }
        }
        true
    }

    /// Completions produced by [`Sim::step`] and not yet returned.
    pub fn drain_completions(&mut self) -> Vec<Completion> {
        self.ready.drain(..).collect()
    }

    /// Events taken off the queue so far (deliveries, queued inputs, handler runs, completions).
    pub fn events_processed(&self) -> u64 {
        self.events
    }

    /// Handler calls so far (`on_start` excluded).
    pub fn inputs_handled(&self) -> u64 {
        self.inputs
    }

    /// Messages servers refused as invalid input (`ServerNode::on_message` returned `Err`). A run of
    /// well-behaved nodes has none: tests assert that.
    pub fn invalid_inputs(&self) -> u64 {
        self.invalid
    }

    /// The first (up to 16) refused messages, with why.
    pub fn invalid_examples(&self) -> &[InvalidInput] {
        &self.invalid_first
    }

    /// Deliver `msg` to server `to` now, as if `from` had sent it: a forged or malformed message from the
    /// outside (hostile-input tests). It is handled like any message (`to`'s CPU queue, its durable host),
    /// and a refusal counts in [`Sim::invalid_inputs`]. It crossed no simulated link (`from` need not be a
    /// node of the simulation), so filters, partitions, random loss and delivery hooks do not apply; a
    /// crashed `to` loses it, as any input.
    pub fn inject(&mut self, from: Addr, to: ServerId, msg: P::Msg) {
        let to_idx = self.server_index(to);
        let env = Envelope { from, to: Addr::Server(to), msg, sent_at_ns: self.now, seq: None };
        self.trace_line(&env, " INJECTED");
        self.schedule(self.now, Payload::Input(to_idx, Input::Message(env)));
    }

    /// Events waiting in the queue.
    pub fn pending_events(&self) -> usize {
        self.queue.len()
    }

    /// Server `id`'s state machine. Panics if it is crashed.
    pub fn server(&self, id: ServerId) -> &P::Server {
        match &self.servers[self.server_index(id) as usize] {
            ServerSlot::Plain(s) => s,
            ServerSlot::Durable(host) => host.servers().next().expect("one server per host").1,
            ServerSlot::Down(_) => panic!("server {id} is down"),
        }
    }

    pub fn client(&self, id: ClientId) -> &P::Client {
        &self.clients[usize::try_from(id.0).expect("client id fits usize")]
    }

    /// Client `id`'s state machine, to change it between inputs (a test resuming a saved session into a new
    /// client: `ClientNode::resume_session`).
    pub fn client_mut(&mut self, id: ClientId) -> &mut P::Client {
        &mut self.clients[usize::try_from(id.0).expect("client id fits usize")]
    }

    pub fn clients(&self) -> usize {
        self.clients.len()
    }

    /// Messages handed to the network so far (including later held or dropped ones).
    pub fn messages_sent(&self) -> u64 {
        self.messages_sent
    }

    /// Messages lost: matched by [`Sim::drop_matching`], dropped from the held set, sent to no client, cut by a
    /// [`Sim::partition`] or [`Sim::isolate`], taken by [`Sim::lose`], or reaching a crashed server.
    pub fn messages_dropped(&self) -> u64 {
        self.messages_dropped
    }

    /// Messages sent per [`Message::kind`].
    pub fn messages_by_kind(&self) -> BTreeMap<&'static str, u64> {
        let mut out = BTreeMap::new();
        for (k, n) in &self.kinds {
            *out.entry(*k).or_insert(0) += n;
        }
        out
    }

    /// Virtual time server `id` has spent in handlers (its CPU utilisation is this over `now_ns`).
    pub fn cpu_busy_ns(&self, id: ServerId) -> u64 {
        self.meta[self.server_index(id) as usize].busy_ns
    }

    /// What node `addr`'s physical clock would read now (without consuming a reading).
    pub fn clock_ns(&self, addr: Addr) -> u64 {
        let idx = self.index_of(addr).unwrap_or_else(|| panic!("clock_ns: no node {addr}"));
        self.meta[idx as usize].clock.peek(self.now)
    }

    /// Record a line per delivered, held or dropped message: `t=<ns> <from>-><to> <kind>[ HELD| DROPPED]`.
    pub fn set_trace(&mut self, on: bool) {
        match (on, &self.trace) {
            (true, None) => self.trace = Some(Vec::new()),
            (false, _) => self.trace = None,
            _ => {}
        }
    }

    /// The trace recorded since tracing was turned on (empty when off).
    pub fn trace(&self) -> &[String] {
        self.trace.as_deref().unwrap_or(&[])
    }

    // ---- scenario API ----

    /// From now on, keep aside matching messages at the moment they would be delivered. When several
    /// filters match a message, the one installed first decides (hold or drop).
    pub fn hold(&mut self, filter: impl Fn(&Envelope<P::Msg>) -> bool + 'static) -> HoldId {
        self.add_filter(FilterKind::Hold, Box::new(filter))
    }

    /// From now on, lose matching messages at the moment they would be delivered.
    pub fn drop_matching(&mut self, filter: impl Fn(&Envelope<P::Msg>) -> bool + 'static) -> HoldId {
        self.add_filter(FilterKind::Drop, Box::new(filter))
    }

    /// Remove a filter installed by [`Sim::hold`] or [`Sim::drop_matching`], or a crash hook that has not fired
    /// ([`Sim::crash_on_send`]). Messages already held stay held.
    pub fn stop_holding(&mut self, id: HoldId) {
        self.filters.retain(|(h, _, _)| *h != id);
        self.hooks.retain(|h| h.id != id);
    }

    /// Messages held so far and not released or dropped, in the order they were held.
    pub fn held(&self) -> Vec<&Envelope<P::Msg>> {
        self.held.iter().map(|(_, e)| e).collect()
    }

    /// Deliver the matching held messages now, in the order they were held (they bypass the filters and
    /// partitions, and may overtake messages on their link). Returns how many.
    pub fn release(&mut self, filter: impl Fn(&Envelope<P::Msg>) -> bool) -> usize {
        let matching = self.take_held(&filter);
        let n = matching.len();
        for (to, env) in matching {
            self.trace_line(&env, " RELEASED");
            self.schedule(self.now, Payload::Input(to, Input::Message(env)));
        }
        n
    }

    /// Lose the matching held messages. Returns how many.
    pub fn drop_held(&mut self, filter: impl Fn(&Envelope<P::Msg>) -> bool) -> usize {
        let n = self.take_held(&filter).len();
        self.messages_dropped += n as u64;
        n
    }

    /// Between datacenters `a` and `b` (both directions), messages sent or due to arrive in
    /// `[from_ns, until_ns)` arrive at `until_ns` at the earliest, like TCP riding out an outage: none is
    /// lost, FIFO links stay FIFO. Applies to messages already in flight too.
    pub fn partition_dcs(&mut self, a: DcId, b: DcId, from_ns: u64, until_ns: u64) {
        assert!(a != b, "partition_dcs: a datacenter cannot be partitioned from itself");
        let dcs = self.config.topology.dcs;
        assert!(a < dcs && b < dcs, "partition_dcs: datacenter out of range");
        self.add_partition(Partition { a: Side::dcs([a]), b: Side::dcs([b]), from_ns, until_ns, drop: false });
    }

    /// A network partition that **drops** messages: between every node of side `a` and every node of side
    /// `b` (both directions), a message sent or due to arrive in `[from_ns, until_ns)` is lost (counted in
    /// [`Sim::messages_dropped`]); at `until_ns` the partition heals. Messages already in flight are caught
    /// too. A side names servers, clients, whole datacenters (their clients included) or the rest
    /// ([`Side`]); a client stays connected to everyone unless a side names it or its datacenter.
    ///
    /// Only losses the protocol can live with happen: a server-to-server message is lost only if the
    /// protocol tolerates loss ([`Protocol::TOLERATES_LOSS`]) or the servers are durable (their sequenced
    /// links resend it); otherwise it is delayed until the partition heals, as by [`Sim::partition_dcs`].
    /// Messages between clients and servers are lost: give clients an operation timeout
    /// ([`SimConfig::op_timeout_ns`]) unless the protocol's clients resend by themselves.
    pub fn partition(&mut self, a: Side, b: Side, from_ns: u64, until_ns: u64) {
        assert!(!(a == Side::Rest && b == Side::Rest), "partition: at most one side may be the rest");
        self.add_partition(Partition { a, b, from_ns, until_ns, drop: true });
    }

    /// Cut server `server` off from every other node, servers and clients, over `[from_ns, until_ns)`
    /// (a [`Sim::partition`] between it and the rest: messages are dropped, then it heals).
    pub fn isolate(&mut self, server: ServerId, from_ns: u64, until_ns: u64) {
        assert!(self.config.topology.contains(server), "isolate: no server {server} in the topology");
        self.partition(Side::servers([server]), Side::Rest, from_ns, until_ns);
    }

    /// Lose each message (that the protocol can lose, as for [`Sim::partition`]) with `probability` when it
    /// would be delivered in `[from_ns, until_ns)`. The draws come from their own generator, derived from the
    /// seed.
    pub fn lose(&mut self, probability: f64, from_ns: u64, until_ns: u64) {
        assert!((0.0..=1.0).contains(&probability), "lose: probability {probability} not in [0, 1]");
        assert!(from_ns <= until_ns, "lose: from_ns > until_ns");
        self.losses.push((from_ns, until_ns, probability));
    }

    /// One-shot: crash the **sender** of the first message matching `filter` from now on, as it sends it,
    /// before it leaves: that message and everything else the same handler emitted after it are lost (what it
    /// emitted before has left). Only messages from servers match. The leader kill at a chosen protocol step:
    /// e.g. `crash_on_send(|e| e.from == leader && is_append(&e.msg))`. [`Sim::stop_holding`] removes it;
    /// [`Sim::hook_fired`] says whom it crashed and when. The server stays down (crash-stop); restart it
    /// with [`Sim::restart`] / [`Sim::restart_without_disk`] if wanted.
    pub fn crash_on_send(&mut self, filter: impl Fn(&Envelope<P::Msg>) -> bool + 'static) -> HoldId {
        self.add_hook(HookKind::BeforeSend, Box::new(filter), u64::MAX, Restart::Never)
    }

    /// As [`Sim::crash_on_send`], but the matching message leaves; the sender crashes right after it (what
    /// the same handler emitted after it is lost).
    pub fn crash_after_send(&mut self, filter: impl Fn(&Envelope<P::Msg>) -> bool + 'static) -> HoldId {
        self.add_hook(HookKind::AfterSend, Box::new(filter), u64::MAX, Restart::Never)
    }

    /// One-shot: crash the **receiver** of the first message matching `filter` that is delivered from now on
    /// (after the filters of [`Sim::hold`] and partitions let it through), as it arrives: the message is
    /// lost with it. Only messages to servers match.
    pub fn crash_on_deliver(&mut self, filter: impl Fn(&Envelope<P::Msg>) -> bool + 'static) -> HoldId {
        self.add_hook(HookKind::OnDeliver, Box::new(filter), u64::MAX, Restart::Never)
    }

    /// Whom a crash hook crashed, and when (`None` while it has not fired).
    pub fn hook_fired(&self, id: HoldId) -> Option<(ServerId, u64)> {
        self.fired.get(&id).copied()
    }

    /// Every crash so far, in order: the server and the virtual time.
    pub fn crashes(&self) -> &[(ServerId, u64)] {
        &self.crash_log
    }

    /// Log records that crashes lost because their commit had not ended (`SimConfig::fsync_ns`): inputs
    /// whose effects nobody saw.
    pub fn records_lost_in_crashes(&self) -> u64 {
        self.lost_records
    }

    // ---- internals ----

    fn new_meta(&self, addr: Addr, dc: DcId) -> NodeMeta<P> {
        let code = addr_code(addr);
        let rng = SmallRng::seed_from_u64(derive_seed(self.config.seed, STREAM_NODE_RNG, code));
        let mut clock_rng = SmallRng::seed_from_u64(derive_seed(self.config.seed, STREAM_CLOCK, code));
        let clock = Clock::new(&self.config.clocks, &mut clock_rng);
        NodeMeta { addr, dc, rng, clock, busy_until: self.now, busy_ns: 0, scheduled: false, inbox: VecDeque::new() }
    }

    fn server_index(&self, id: ServerId) -> u32 {
        // Servers were built in the topology's canonical order.
        let index = self.config.topology.index_of(id);
        index.unwrap_or_else(|| panic!("no server {id} in the topology")) as u32
    }

    fn client_index(&self, id: ClientId) -> Option<u32> {
        (id.0 < self.clients.len() as u64).then(|| (self.servers.len() as u64 + id.0) as u32)
    }

    fn index_of(&self, addr: Addr) -> Option<u32> {
        match addr {
            Addr::Server(s) => Some(self.server_index(s)),
            Addr::Client(c) => self.client_index(c),
        }
    }

    fn schedule(&mut self, time: u64, payload: Payload<P>) {
        let slot = match self.free_slots.pop() {
            Some(s) => {
                self.slab[s as usize] = Some(payload);
                s
            }
            None => {
                self.slab.push(Some(payload));
                u32::try_from(self.slab.len() - 1).expect("fewer than 2^32 pending events")
            }
        };
        self.queue.push(QueueEntry { time, seq: self.seq, slot });
        self.seq += 1;
    }

    fn add_hook(&mut self, kind: HookKind, filter: Filter<P::Msg>, until_ns: u64, restart: Restart) -> HoldId {
        let id = HoldId(self.next_hold);
        self.next_hold += 1;
        self.hooks.push(Hook { id, kind, filter, until_ns, restart });
        id
    }

    /// The first live hook of a kind in `kinds` that matches `env`, removed (one-shot).
    fn take_hook(&mut self, kinds: &[HookKind], env: &Envelope<P::Msg>) -> Option<(HoldId, HookKind, Restart)> {
        let now = self.now;
        self.hooks.retain(|h| h.until_ns >= now);
        let pos = self.hooks.iter().position(|h| kinds.contains(&h.kind) && (h.filter)(env))?;
        let h = self.hooks.remove(pos);
        Some((h.id, h.kind, h.restart))
    }

    fn add_partition(&mut self, p: Partition) {
        assert!(p.from_ns <= p.until_ns, "partition: from_ns > until_ns");
        // Delay what is in flight across a partition that delays it.
        let mut entries = std::mem::take(&mut self.queue).into_vec();
        for e in &mut entries {
            if let Some(Payload::Net(to, env)) = &self.slab[e.slot as usize] {
                let from = self.index_of(env.from).expect("sender exists");
                let (x, y) = (self.node(from), self.node(*to));
                let delays = !p.drop || !self.droppable(from, *to);
                if delays && p.separates(x, y) && (p.covers(env.sent_at_ns) || p.covers(e.time)) {
                    e.time = e.time.max(p.until_ns);
                    if self.fifo {
                        let last = self.links.entry(link_key(from, *to)).or_insert(0);
                        *last = (*last).max(e.time);
                    }
                }
            }
        }
        self.queue = BinaryHeap::from(entries);
        self.partitions.retain(|q| q.until_ns > self.now);
        self.partitions.push(p);
        self.partitions_end_ns = self.partitions.iter().map(|q| q.until_ns).max().unwrap_or(0);
    }

    /// Node `idx`'s address and datacenter.
    fn node(&self, idx: u32) -> (Addr, DcId) {
        let m = &self.meta[idx as usize];
        (m.addr, m.dc)
    }

    /// Whether the network may lose a message from node `from` to node `to` (see [`Sim::partition`]).
    fn droppable(&self, from: u32, to: u32) -> bool {
        let n = self.servers.len() as u32;
        P::TOLERATES_LOSS || self.config.durable || from >= n || to >= n
    }

    /// Whether a partition that drops messages loses one from `from` to `to`, sent at `sent_at` and
    /// arriving at `at`.
    fn cut(&self, from: u32, to: u32, sent_at: u64, at: u64) -> bool {
        if self.partitions_end_ns <= sent_at || !self.droppable(from, to) {
            return false;
        }
        let (x, y) = (self.node(from), self.node(to));
        self.partitions.iter().any(|p| p.drop && (p.covers(sent_at) || p.covers(at)) && p.separates(x, y))
    }

    /// Whether random loss takes a message from `from` to `to` arriving now (draws only inside a window).
    fn lost(&mut self, from: u32, to: u32) -> bool {
        let now = self.now;
        let p = self.losses.iter().filter(|(a, b, _)| *a <= now && now < *b).map(|(_, _, p)| *p).fold(0.0, f64::max);
        p > 0.0 && self.droppable(from, to) && self.loss_rng.random::<f64>() < p
    }

    /// Crash the node a hook picked, once its handler's effects are carried out.
    fn finish_crash(&mut self) {
        if let Some((idx, restart)) = self.crashing.take() {
            let id = self.server_id(idx);
            if !self.is_down(id) {
                self.crash(id);
                self.schedule_restart(idx, self.now, restart);
            }
        }
    }

    fn add_filter(&mut self, kind: FilterKind, f: Filter<P::Msg>) -> HoldId {
        let id = HoldId(self.next_hold);
        self.next_hold += 1;
        self.filters.push((id, kind, f));
        id
    }

    fn take_held(&mut self, filter: &dyn Fn(&Envelope<P::Msg>) -> bool) -> Vec<(u32, Envelope<P::Msg>)> {
        let (matching, rest) = std::mem::take(&mut self.held).into_iter().partition(|(_, e)| filter(e));
        self.held = rest;
        matching
    }

    fn trace_line(&mut self, env: &Envelope<P::Msg>, suffix: &str) {
        if let Some(t) = &mut self.trace {
            t.push(format!("t={} {}->{} {}{suffix}", self.now, env.from, env.to, env.msg.kind()));
        }
    }

    /// A message reaches node `to`: the filters decide, then it joins the inbox.
    fn arrive(&mut self, to: u32, env: Envelope<P::Msg>) {
        let verdict = self.filters.iter().find(|(_, _, f)| f(&env)).map(|(_, k, _)| *k);
        match verdict {
            Some(FilterKind::Hold) => {
                self.trace_line(&env, " HELD");
                self.held.push((to, env));
            }
            Some(FilterKind::Drop) => {
                self.trace_line(&env, " DROPPED");
                self.messages_dropped += 1;
            }
            None => {
                if self.partitions_end_ns > env.sent_at_ns || !self.losses.is_empty() {
                    let from = self.index_of(env.from).expect("the sender exists");
                    if self.cut(from, to, env.sent_at_ns, self.now) {
                        self.trace_line(&env, " CUT");
                        self.messages_dropped += 1;
                        return;
                    }
                    if self.lost(from, to) {
                        self.trace_line(&env, " LOST");
                        self.messages_dropped += 1;
                        return;
                    }
                }
                if !self.hooks.is_empty()
                    && (to as usize) < self.servers.len()
                    && !matches!(self.servers[to as usize], ServerSlot::Down(_))
                    && let Some((id, _, restart)) = self.take_hook(&[HookKind::OnDeliver], &env)
                {
                    let server = self.server_id(to);
                    self.fired.insert(id, (server, self.now));
                    self.trace_line(&env, " CRASHES RECEIVER");
                    self.messages_dropped += 1;
                    self.crash(server);
                    self.schedule_restart(to, self.now, restart);
                    return;
                }
                self.trace_line(&env, "");
                self.enqueue(to, Input::Message(env));
            }
        }
    }

    /// Input arrives at node `idx` now: handle it at once if the node is idle, else queue it. A crashed
    /// server loses it.
    fn enqueue(&mut self, idx: u32, input: Input<P>) {
        if let Some(ServerSlot::Down(_)) = self.servers.get(idx as usize) {
            if matches!(input, Input::Message(_) | Input::Ack { .. }) {
                self.messages_dropped += 1;
            }
            return;
        }
        if let Input::Timer(_, incarnation) = input
            && self.incarnations.get(idx as usize).is_some_and(|i| *i != incarnation)
        {
            // Set before the server crashed: its state machine is gone.
            return;
        }
        let m = &mut self.meta[idx as usize];
        if !m.scheduled && m.busy_until <= self.now {
            self.exec(idx, input);
        } else {
            m.inbox.push_back(input);
            if !m.scheduled {
                m.scheduled = true;
                let at = m.busy_until;
                self.schedule(at, Payload::Run(idx));
            }
        }
    }

    fn start(&mut self, idx: u32) {
        self.run_handler(idx, None);
    }

    fn exec(&mut self, idx: u32, input: Input<P>) {
        self.inputs += 1;
        self.run_handler(idx, Some(input));
    }

    /// Call node `idx`'s handler for `input` (`None`: `on_start`) now, then carry out its effects at the end
    /// of its CPU time.
    fn run_handler(&mut self, idx: u32, input: Option<Input<P>>) {
        let now = self.now;
        let mut fx = std::mem::take(&mut self.fx);
        let n_servers = self.servers.len();
        let m = &mut self.meta[idx as usize];
        let clock = m.clock.read(now);
        let mut cx = Ctx::new(clock, &mut m.rng, &mut fx);
        let i = idx as usize;
        let mut durable = false;
        let mut invalid = Vec::new();
        let mut violations = Vec::new();
        let cost = if i < n_servers {
            match &mut self.servers[i] {
                ServerSlot::Plain(node) => {
                    let input = match input {
                        None => NodeInput::Start,
                        Some(Input::Message(env)) => NodeInput::Message(env.from, env.msg),
                        Some(Input::Timer(t, _)) => NodeInput::Timer(t),
                        Some(Input::Request(op, r)) => NodeInput::Request(op, r),
                        Some(Input::HostTimer { .. } | Input::Ack { .. }) => {
                            unreachable!("host inputs go to durable servers")
                        }
                    };
                    match host::serve(node, m.addr, &mut cx, input) {
                        Ok(refused) => invalid.extend(refused),
                        Err(v) => violations.push(v),
                    }
                }
                ServerSlot::Durable(host) => {
                    durable = true;
                    let Addr::Server(id) = m.addr else { unreachable!("servers have server addresses") };
                    match input {
                        Some(Input::Message(env)) => {
                            host.on_message(id, env.from, env.seq, env.msg, clock);
                        }
                        Some(Input::HostTimer { id: t, incarnation }) if incarnation == self.incarnations[i] => {
                            host.on_timer(0, t, clock);
                        }
                        Some(Input::Ack { from, to, seq, resend }) => host.on_ack(from, to, seq, resend, clock),
                        _ => {}
                    }
                    invalid.extend(host.take_invalid());
                    violations.extend(host.take_violations());
                    if self.config.fsync_ns == 0 {
                        // `per-write`: every input is committed before its effects leave (MemLog cannot fail).
                        host.commit().expect("an in-memory log does not fail");
                    }
                    fx.work += host.take_work();
                }
                ServerSlot::Down(_) => {}
            }
            let cpu = &self.config.cpu;
            fx.sends.iter().fold(cpu.cost_ns(fx.work), |ns, (_, msg)| ns.saturating_add(cpu.message_ns(msg)))
        } else {
            let node = &mut self.clients[i - n_servers];
            let input = match input {
                None => NodeInput::Start,
                Some(Input::Message(env)) => NodeInput::Message(env.from, env.msg),
                Some(Input::Timer(t, _)) => NodeInput::Timer(t),
                Some(Input::Request(op, r)) => NodeInput::Request(op, r),
                Some(Input::HostTimer { .. } | Input::Ack { .. }) => unreachable!("host inputs go to servers"),
            };
            host::drive(node, &mut cx, input);
            0
        };
        violations.extend(host::audit(self.meta[idx as usize].addr, &self.config.topology, &mut fx));
        if let Some(v) = violations.first() {
            // A protocol bug: fail the run at the seed that shows it (every runtime reports it as this error).
            panic!("driver contract broken: {v}");
        }
        for e in invalid {
            self.invalid += 1;
            if self.invalid_first.len() < 16 {
                self.invalid_first.push(e);
            }
        }
        let m = &mut self.meta[idx as usize];
        // A read's promise (`Ctx::raise_clock`); durable servers keep theirs in their host.
        m.clock.last_ns = m.clock.last_ns.max(fx.raise_clock);
        let done = now + cost;
        m.busy_until = done;
        m.busy_ns += cost;
        let from = m.addr;
        for (to, msg) in fx.sends.drain(..) {
            self.send(idx, from, to, msg, done);
        }
        let crashing = matches!(self.crashing, Some((i, _)) if i == idx);
        let incarnation = self.incarnations.get(i).copied().unwrap_or(0);
        for (delay, timer) in fx.timers.drain(..) {
            if !crashing {
                self.schedule(done.saturating_add(delay), Payload::Input(idx, Input::Timer(timer, incarnation)));
            }
        }
        if let Addr::Client(client) = from {
            for (op, result) in fx.completions.drain(..) {
                self.schedule(done, Payload::Complete(Completion { client, op, result, time_ns: done }));
            }
        }
        fx.clear();
        self.fx = fx;
        if durable {
            self.carry_out_host_outputs(idx, done);
            self.start_commit(idx, done);
        }
        self.finish_crash();
    }

    /// Group commit (`SimConfig::fsync_ns`): start a commit of what durable server `idx` logged, unless one
    /// runs; it ends `fsync_ns` after `at`.
    fn start_commit(&mut self, idx: u32, at: u64) {
        let i = idx as usize;
        if self.config.fsync_ns == 0 || matches!(self.crashing, Some((c, _)) if c == idx) {
            return;
        }
        let ServerSlot::Durable(host) = &mut self.servers[i] else { return };
        if host.committing() || host.pending() == 0 {
            return;
        }
        host.start_commit().expect("an in-memory log does not fail");
        let incarnation = self.incarnations[i];
        self.schedule(at.saturating_add(self.config.fsync_ns), Payload::CommitDone(idx, incarnation));
    }

    fn server_id(&self, idx: u32) -> ServerId {
        match self.meta[idx as usize].addr {
            Addr::Server(id) => id,
            Addr::Client(c) => panic!("node {idx} is client {c}, not a server"),
        }
    }

    /// Build durable server `idx` from its log (empty at the start), then carry out what it asks.
    fn open_host(&mut self, idx: u32) {
        let i = idx as usize;
        let id = self.server_id(idx);
        let slot = std::mem::replace(&mut self.servers[i], ServerSlot::Down(MemLog::new()));
        let ServerSlot::Down(mut log) = slot else { panic!("server {id} is already up") };
        if self.config.fsync_ns > 0 {
            log = log.with_background(true);
        }
        let recovered: Recovered = log.recovered();
        let clock = self.meta[i].clock.read(self.now);
        let seed = derive_seed(self.config.seed, STREAM_NODE_RNG, addr_code(Addr::Server(id)));
        let file = std::path::PathBuf::from(format!("<simulated log of {id}>"));
        let topology = self.config.topology;
        let mut host = DurableHost::open(log, &file, recovered, topology, &self.config.protocol, &[id], seed, clock)
            .unwrap_or_else(|e| panic!("recovering {id}: {e}"));
        host.set_checkpoint_every(self.config.checkpoint_every);
        host.commit().expect("an in-memory log does not fail");
        host.take_work();
        self.servers[i] = ServerSlot::Durable(Box::new(host));
        self.carry_out_host_outputs(idx, self.now);
        let incarnation = self.incarnations[i];
        self.schedule(self.now + HOST_TICK_NS, Payload::HostTick(idx, incarnation));
    }

    /// Send, schedule and acknowledge what durable server `idx` released, as of virtual time `at`.
    fn carry_out_host_outputs(&mut self, idx: u32, at: u64) {
        let ServerSlot::Durable(host) = &mut self.servers[idx as usize] else { return };
        let outputs = host.take_outputs();
        let from = self.meta[idx as usize].addr;
        let incarnation = self.incarnations[idx as usize];
        // The CPU model's per-message charge for what the host sends: the server is busy that much longer.
        let mut sending_ns = 0u64;
        for out in outputs {
            if matches!(self.crashing, Some((i, _)) if i == idx) {
                break;
            }
            match out {
                Output::ToClient { to, msg, .. } => {
                    sending_ns = sending_ns.saturating_add(self.config.cpu.message_ns(&msg));
                    self.send_with(idx, from, to, msg, at, None)
                }
                Output::Seq { to, seq, msg, .. } => {
                    sending_ns = sending_ns.saturating_add(self.config.cpu.message_ns(&msg));
                    self.send_with(idx, from, Addr::Server(to), msg, at, Some(seq))
                }
                Output::Ack { from: f, to, seq, resend } => {
                    let to_idx = self.server_index(to);
                    let due = at.saturating_add(self.config.network.inter_dc_ns(self.meta[idx as usize].dc, to.dc));
                    self.schedule(due, Payload::Input(to_idx, Input::Ack { from: f, to, seq, resend }));
                }
                Output::Timer { id, delay_ns, .. } => {
                    let due = at.saturating_add(delay_ns);
                    self.schedule(due, Payload::Input(idx, Input::HostTimer { id, incarnation }));
                }
            }
        }
        if sending_ns > 0 {
            let m = &mut self.meta[idx as usize];
            m.busy_until = m.busy_until.max(at).saturating_add(sending_ns);
            m.busy_ns = m.busy_ns.saturating_add(sending_ns);
        }
        self.finish_crash();
    }

    fn count_kind(&mut self, kind: &'static str) {
        for (k, n) in &mut self.kinds {
            if std::ptr::eq(*k, kind) || *k == kind {
                *n += 1;
                return;
            }
        }
        self.kinds.push((kind, 1));
    }

    fn send(&mut self, from_idx: u32, from: Addr, to: Addr, msg: P::Msg, sent_at: u64) {
        self.send_with(from_idx, from, to, msg, sent_at, None);
    }

    fn send_with(&mut self, from_idx: u32, from: Addr, to: Addr, msg: P::Msg, sent_at: u64, seq: Option<u64>) {
        if matches!(self.crashing, Some((i, _)) if i == from_idx) {
            // The sender crashed before this left.
            return;
        }
        self.messages_sent += 1;
        self.count_kind(msg.kind());
        let Some(to_idx) = self.index_of(to) else {
            // Driver contract 4: a message to a client that does not exist is dropped.
            self.messages_dropped += 1;
            return;
        };
        if !self.hooks.is_empty() && (from_idx as usize) < self.servers.len() {
            let env = Envelope { from, to, msg: msg.clone(), sent_at_ns: sent_at, seq };
            if let Some((id, kind, restart)) = self.take_hook(&[HookKind::BeforeSend, HookKind::AfterSend], &env) {
                self.fired.insert(id, (self.server_id(from_idx), self.now));
                self.crashing = Some((from_idx, restart));
                if kind == HookKind::BeforeSend {
                    self.trace_line(&env, " LOST: THE SENDER CRASHES");
                    self.messages_dropped += 1;
                    return;
                }
            }
        }
        let net: &NetworkModel = &self.config.network;
        let (fm, tm) = (&self.meta[from_idx as usize], &self.meta[to_idx as usize]);
        let (da, db) = (fm.dc, tm.dc);
        let client_side = matches!(from, Addr::Client(_)) || matches!(to, Addr::Client(_));
        let base = if da == db && client_side { net.client_latency_ns } else { net.inter_dc_ns(da, db) };
        let mut delay = base;
        if net.jitter > 0.0 {
            let factor = 1.0 + net.jitter * self.net_rng.random::<f64>();
            delay = (base as f64 * factor) as u64;
        }
        if net.spike_probability > 0.0 && self.net_rng.random::<f64>() < net.spike_probability {
            delay = delay.saturating_add(net.spike_ns);
        }
        let mut due = sent_at.saturating_add(delay);
        if self.partitions_end_ns > sent_at {
            // Partitions that delay (and those that drop, for messages the network must not lose) hold the
            // message until they heal.
            let undroppable = !self.droppable(from_idx, to_idx);
            let (x, y) = (self.node(from_idx), self.node(to_idx));
            loop {
                let mut moved = false;
                for p in &self.partitions {
                    if (!p.drop || undroppable)
                        && (p.covers(sent_at) || p.covers(due))
                        && due < p.until_ns
                        && p.separates(x, y)
                    {
                        due = p.until_ns;
                        moved = true;
                    }
                }
                if !moved {
                    break;
                }
            }
        }
        if self.fifo {
            match self.links.entry(link_key(from_idx, to_idx)) {
                Entry::Occupied(mut o) => {
                    due = due.max(*o.get());
                    *o.get_mut() = due;
                }
                Entry::Vacant(v) => {
                    v.insert(due);
                }
            }
        }
        self.schedule(due, Payload::Net(to_idx, Envelope { from, to, msg, sent_at_ns: sent_at, seq }));
    }
}

fn link_key(from: u32, to: u32) -> u64 {
    (u64::from(from) << 32) | u64::from(to)
}
