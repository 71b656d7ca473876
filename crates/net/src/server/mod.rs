//! The server process: [`run_server`] hosts the partition servers a node of `cluster.toml` lists and
//! drives them by the driver contract of `snowline_core::protocol`.
//!
//! # Structure
//!
//! * One **event loop** (`EventLoop`, run by the future `run_server` itself) owns every hosted
//!   `P::Server`, their clocks and random generators, the timer heap and the routing tables. Nodes get one
//!   input at a time: the event loop's task fires timers, serves metrics and (durable) drains the inbox,
//!   and connection tasks hand in what they read, each holding the event loop's one lock.
//! * An **accept task** spawns one task per inbound connection. It checks the `Hello` (protocol name),
//!   then decodes frames and hands each to the event loop ([`Handoff`]): in memory it handles the frame
//!   itself, under the event loop's lock (the runtime has one thread, so the lock is never contended), and
//!   a durable server's connection tasks push frames into the event loop's bounded inbox instead, over
//!   which its group commits batch (a slow event loop pushes back on TCP). The connection task also writes
//!   what the event loop sends to clients on that connection. On a plain TCP connection the reply is
//!   written in place when nothing is queued ahead of it (`conn::SharedWrite`), corked until the handler
//!   has no more whole frames in hand (`EventLoop::uncork`: one write per burst); the connection task then
//!   only writes what a full socket left over.
//! * One **outbound link task** per peer node, started on the first message to it: it connects lazily,
//!   sends `Hello`, reconnects with backoff while queueing, and writes everything queued with one write
//!   call. A link to a node of another datacenter holds each frame for the configured one-way latency
//!   (constant per link, so FIFO order is kept) in its queue: one delay queue per peer, not a task per
//!   message.
//! * Messages between partitions hosted in the same process never touch a socket: they go through a
//!   local queue of the event loop.
//! * Messages to `Addr::Client(id)` go back on the connection that client's last message arrived on, or
//!   else on a connection from the same client runtime (its `Hello` carries the runtime's id prefix, the
//!   high 32 bits of its client ids); if there is none they are dropped (driver contract, rule 4). So a
//!   server can reach a client only over a connection that client's runtime opened to this process.
//!
//! Clocks: each input gets the wall clock (nanoseconds since the UNIX epoch, so clocks are comparable
//! across processes), kept non-decreasing per node. Timers run on tokio's monotonic clock.

mod inbound;
mod render;

use inbound::accept_loop;

use crate::NetError;
use crate::admission::{Admission, Role, Slot};
use crate::config::{ClusterConfig, Routes};
use crate::conn::{self, OutTx, PeerSpec, ReadHalf, SharedWrite, WriteHalf};
use crate::faults::{Faults, LinkFaults};
use crate::frame::{self, Frame};
use crate::limits::{
    BudgetedCodec, ConnLimits, ConnQueue, FRAME_BUFFER_BUDGET, FrameBudget, HALF_CLOSED_LINGER, HANDSHAKE_TIMEOUT,
    IDLE_TIMEOUT, InFlightTotal, MAX_QUEUED_REPLIES, PARTIAL_FRAME_TIMEOUT, RateLimitedLog, SLOW_READER_TIMEOUT,
};
use crate::memory;
use crate::metrics::{self, Counters, Scrape, Text};
use crate::tls::{NodeTls, TLS_HANDSHAKE_BYTE};
use crate::util::{NodeClock, TimerHeap, far_future, node_rng, os_u64, wall_ns};
use futures::StreamExt;
use rand::rngs::SmallRng;
use snowline_core::frames;
use snowline_core::host::{self, ContractViolation, NodeInput};
use snowline_core::links::{LinkFrame, MemLinks};
use snowline_core::{
    Addr, ClientId, Ctx, DcId, Effects, InvalidInput, InvalidKind, Message, Protocol, ReplicaId, ServerId, ServerNode,
    Topology,
};
use snowline_storage::{DurableHost, FsyncPolicy, Log, Output};
use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tokio::time::{Duration, Instant};
use tokio_util::codec::FramedRead;

/// Capacity of the event loop's inbox (messages from all connections).
const INBOX: usize = 64 * 1024;
/// How long shutdown waits for queued outbound frames to be written.
const SHUTDOWN_FLUSH: Duration = Duration::from_millis(500);

enum Inbound<M> {
    /// A connection completed its handshake; frames to clients on it go to `tx`, or straight to `direct`
    /// (plain TCP) when nothing is queued. `from` is the `Hello`'s.
    Connected {
        conn: u64,
        from: Addr,
        tx: OutTx<M>,
        queue: Arc<ConnQueue>,
        direct: Option<Arc<SharedWrite>>,
    },
    Msg {
        conn: u64,
        from: Addr,
        to: Addr,
        /// Where it stands on its link, for a sequenced (`Frame::Seq`) message.
        seq: Option<LinkPlace>,
        msg: M,
    },
    Ack {
        conn: u64,
        from: ServerId,
        to: ServerId,
        epoch: u64,
        seq: u64,
        resend: bool,
    },
    Closed {
        conn: u64,
    },
}

/// A sequenced message's place on its link (`Frame::Seq`).
#[derive(Clone, Copy, Debug)]
struct LinkPlace {
    epoch: u64,
    floor: u64,
    seq: u64,
}

/// Where connection tasks hand what they read.
enum Handoff<P: Protocol> {
    /// Into the event loop's bounded inbox (a slow event loop pushes back on TCP). Durable servers: their
    /// group commits batch over what waits there.
    Inbox(mpsc::Sender<Inbound<P::Msg>>),
    /// Handled at once in the connection's own task, under the event loop's lock (in memory). A request is
    /// then read, handled and answered by one task: no hand-off to the event loop's task and back, which
    /// measured about 1 µs of CPU per request on this machine. `rearm` wakes the event loop when a handler
    /// set a timer earlier than the one it sleeps until.
    InPlace { server: Arc<std::sync::Mutex<EventLoop<P>>>, rearm: Arc<tokio::sync::Notify> },
}

impl<P: Protocol> Clone for Handoff<P> {
    fn clone(&self) -> Self {
        match self {
            Handoff::Inbox(tx) => Handoff::Inbox(tx.clone()),
            Handoff::InPlace { server, rearm } => Handoff::InPlace { server: server.clone(), rearm: rearm.clone() },
        }
    }
}

impl<P: Protocol> Handoff<P> {
    /// Hand `ev` over; false once the event loop is gone (stopped, or a handler panicked under its lock).
    /// `more`: the caller has another frame in hand and hands it over next, without waiting, so the replies
    /// stay corked until the last of them (one write for a burst of requests).
    async fn deliver(&self, ev: Inbound<P::Msg>, more: bool) -> bool {
        match self {
            Handoff::Inbox(tx) => tx.send(ev).await.is_ok(),
            Handoff::InPlace { server, rearm } => {
                let _wake = WakeOnPanic(rearm);
                let Ok(mut server) = server.lock() else { return false };
                if server.stopping {
                    return false;
                }
                server.on_inbound(ev);
                server.drain_local();
                if !more {
                    server.uncork();
                }
                if server.deadline_moved_up() {
                    rearm.notify_one();
                }
                true
            }
        }
    }

    /// Write the replies corked so far: before a connection task waits for anything but its next frame.
    fn uncork(&self) {
        if let Handoff::InPlace { server, .. } = self
            && let Ok(mut server) = server.lock()
        {
            server.uncork();
        }
    }
}

/// Wakes the event loop's task if a handler panics in a connection's task: it then finds the lock poisoned
/// and stops the server, as that panic would have in its own task.
struct WakeOnPanic<'a>(&'a tokio::sync::Notify);

impl Drop for WakeOnPanic<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.notify_one();
        }
    }
}

struct Hosted<P: Protocol> {
    id: ServerId,
    node: P::Server,
    rng: SmallRng,
    clock: NodeClock,
}

/// Where and how a durable server keeps its data (`snowline server --data-dir DIR --fsync POLICY`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Durability {
    /// The server's own data directory (one per server process).
    pub data_dir: PathBuf,
    pub fsync: FsyncPolicy,
}

/// Pending records that start a commit at once on an idle server, without the rest after the last one: with
/// many writes waiting, their latency costs more than the commit's CPU. Measured with `bench --protocol
/// contrarian --dcs 2 --partitions 2 --workload contrarian --partitions-per-rot 2 --clients 20 --fsync
/// memory,group` (8 s, two runs each, the threshold set through a temporary switch, 2026-11-26): 8 gave
/// 0.63-0.64x of in-memory throughput at 5% writes and 0.50x at 50%; 4 gave 0.64-0.68x and 0.41-0.42x;
/// always resting gave 0.64-0.68x and 0.27-0.30x.
const WORTH_A_COMMIT: usize = 8;

/// How long a message for a client that has not connected to this process yet is kept for it.
const UNROUTED_FOR: Duration = Duration::from_secs(1);
/// How many such messages are kept at most.
const UNROUTED_LIMIT: usize = 1024;

/// How often a durable server acknowledges what it delivered and retransmits stalled links.
const DURABLE_TICK: Duration = Duration::from_millis(100);

/// [`run_server_with`] without durability: everything in memory.
pub async fn run_server<P: Protocol>(
    config: ClusterConfig,
    node_id: u32,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<(), NetError> {
    run_server_with::<P>(config, node_id, None, shutdown).await
}

/// Run node `node_id` of `config` until `shutdown` resolves, then stop accepting, give queued outbound
/// frames a moment to be written, and return `Ok(())`. With `durability`, the hosted servers log their
/// inputs there and recover from it on start (`snowline_storage::host`): nothing they acknowledged is lost
/// when the process dies, and they catch up with the rest of the cluster.
///
/// Errors: an invalid config, a `node_id` not in it, a config naming another protocol than `P`, an
/// address that cannot be bound, or a data directory that cannot be used (damaged, another deployment's,
/// a failed write). Works on a current-thread runtime (the recommended setup).
pub async fn run_server_with<P: Protocol>(
    config: ClusterConfig,
    node_id: u32,
    durability: Option<Durability>,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<(), NetError> {
    run_server_limited::<P>(config, node_id, durability, ConnLimits::default(), shutdown).await
}

/// [`run_server_with`] under other connection limits than the defaults (`limits::ConnLimits`): tests
/// shrink them instead of opening thousands of connections.
pub async fn run_server_limited<P: Protocol>(
    config: ClusterConfig,
    node_id: u32,
    durability: Option<Durability>,
    limits: ConnLimits,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<(), NetError> {
    // One instance of the server's body per protocol, whatever future stops it (build time: the body is
    // large, and callers pass futures of many types).
    let shutdown: Pin<Box<dyn Future<Output = ()> + Send + '_>> = Box::pin(shutdown);
    serve_node::<P>(config, node_id, durability, limits, shutdown).await
}

async fn serve_node<P: Protocol>(
    config: ClusterConfig,
    node_id: u32,
    durability: Option<Durability>,
    limits: ConnLimits,
    shutdown: Pin<Box<dyn Future<Output = ()> + Send + '_>>,
) -> Result<(), NetError> {
    config.validate()?;
    if config.protocol != P::NAME {
        return Err(NetError::ProtocolMismatch { config: config.protocol.clone(), runtime: P::NAME });
    }
    let started = Instant::now();
    let me = config.node(node_id).ok_or(NetError::UnknownNode(node_id))?.clone();
    // Opened before anything listens: a damaged or foreign data directory stops the server here.
    let opened = match &durability {
        Some(d) => Some((Log::open_with(&d.data_dir, d.fsync)?, d.fsync)),
        None => None,
    };
    let listener =
        TcpListener::bind(&me.addr).await.map_err(|error| NetError::Bind { addr: me.addr.clone(), error })?;
    // Bound before anything runs: a taken metrics port stops the server here, not half-started.
    let metrics_listener = match &me.metrics {
        Some(addr) => {
            Some(TcpListener::bind(addr).await.map_err(|error| NetError::MetricsBind { addr: addr.clone(), error })?)
        }
        None => None,
    };
    eprintln!(
        "snowline server: node {node_id} ({}) listening on {}, hosting {}",
        P::NAME,
        me.addr,
        me.servers().map(|s| s.to_string()).collect::<Vec<_>>().join(", ")
    );
    if let Some(addr) = &me.metrics {
        eprintln!("snowline server: node {node_id}: metrics at http://{addr}/metrics");
    }
    let config = Arc::new(config);
    let max_frame = config.max_frame_bytes;
    let (stop_accept, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let tls = NodeTls::load(&config, node_id)?;
    if tls.is_none() {
        eprintln!(
            "snowline server: node {node_id}: WARNING: insecure = true: peers are not authenticated, so any \
             connection may speak for any server (experiments only)"
        );
    }
    let shared = Arc::new(Shared {
        budget: FrameBudget::new(FRAME_BUFFER_BUDGET),
        log: RateLimitedLog::default(),
        tls,
        routes: config.routes(),
        node_ids: config.nodes.iter().map(|n| n.id).collect(),
        open_conns: AtomicUsize::new(0),
        admission: Admission::new(limits.clone()),
        in_flight: Arc::default(),
        limits,
    });
    let mut server = EventLoop::<P>::new(config, node_id, shared.clone(), started);
    server.timed = metrics_listener.is_some();
    let _fault_watch = server.config.fault_file.as_ref().map(|path| {
        eprintln!(
            "snowline server: node {node_id}: WARNING: fault_file = {}: a nemesis may cut links and move clocks \
             (experiments only)",
            path.display()
        );
        let faults = Faults::new(node_id);
        server.faults = Some(faults.clone());
        AbortOnDrop(faults.watch(path.clone()))
    });
    if let Some(((log, recovered), fsync)) = opened {
        let (records, from_checkpoint) = (recovered.records.len(), recovered.checkpoint.is_some());
        let hosted: Vec<ServerId> = server.hosted.iter().map(|h| h.id).collect();
        let file = log.path().to_path_buf();
        let committed = Arc::new(tokio::sync::Notify::new());
        let mut log = log;
        let wake = Arc::clone(&committed);
        log.set_commit_waker(Arc::new(move || wake.notify_one()));
        let host = DurableHost::open(
            log,
            &file,
            recovered,
            server.config.topology(),
            &server.config.protocol_config,
            &hosted,
            os_u64(),
            wall_ns(),
        )?;
        eprintln!(
            "snowline server: node {node_id}: data in {} (fsync {}): {}",
            file.display(),
            fsync,
            if records == 0 && !from_checkpoint {
                "new".to_owned()
            } else if P::DURABILITY == snowline_core::Durability::PersistChanges {
                format!(
                    "recovered {}{records} logged changes; rejoining the replica group",
                    if from_checkpoint { "a checkpoint and " } else { "" }
                )
            } else {
                format!(
                    "recovered {}{records} logged inputs; asking the cluster for what was missed",
                    if from_checkpoint { "a checkpoint and " } else { "" }
                )
            }
        );
        server.durable = Some(DurableState {
            host,
            policy: fsync,
            timers: TimerHeap::new(),
            oldest_pending: None,
            last_started: None,
            committed,
            backlog_warned: None,
            full_retry_at: None,
        });
    } else {
        for idx in 0..server.hosted.len() {
            server.handle(idx, NodeInput::Start);
        }
        server.drain_local();
    }
    server.flush_durable(Flush::Idle)?;

    let durable = server.durable.is_some();
    let server = Arc::new(std::sync::Mutex::new(server));
    let rearm = Arc::new(tokio::sync::Notify::new());
    let (handoff, mut inbox) = if durable {
        let (tx, rx) = mpsc::channel(INBOX);
        (Handoff::Inbox(tx), Some(rx))
    } else {
        (Handoff::InPlace { server: server.clone(), rearm: rearm.clone() }, None)
    };
    let accept = tokio::spawn(accept_loop::<P>(listener, handoff, max_frame, stop_rx, shared));
    let (mut scrapes, metrics_task) = match metrics_listener {
        Some(l) => {
            let (tx, rx) = mpsc::channel(metrics::MAX_SCRAPERS);
            (Some(rx), Some(tokio::spawn(metrics::serve(l, tx))))
        }
        None => (None, None),
    };
    // Poisoned: a protocol handler panicked in a connection's task; the server stops as it would had the
    // handler run here.
    let lock = || server.lock().map_err(|_| NetError::Cluster(format!("node {node_id}: a protocol handler panicked")));

    let mut shutdown = std::pin::pin!(shutdown);
    let sleep = tokio::time::sleep_until(far_future());
    let mut sleep = std::pin::pin!(sleep);
    let commit_done = lock()?.durable.as_ref().map(|d| Arc::clone(&d.committed));
    let mut tick = tokio::time::interval(DURABLE_TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut trim_tick = tokio::time::interval(memory::TRIM_EVERY);
    trim_tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut trimmer = memory::Trimmer::default();
    loop {
        // `EventLoop::armed` is the one record of what `sleep` waits for: connection tasks compare their
        // timers with it.
        let armed = {
            let mut server = lock()?;
            let next = server.next_deadline();
            if next != server.armed {
                sleep.as_mut().reset(next.unwrap_or_else(far_future));
                server.armed = next;
            }
            server.armed
        };
        tokio::select! {
            biased;
            _ = &mut shutdown => break,
            _ = &mut sleep, if armed.is_some() => {
                let mut server = lock()?;
                server.armed = None;
                server.fire_due_timers()?;
            }
            _ = rearm.notified() => {}
            scrape = next_scrape(&mut scrapes) => match scrape {
                Some(reply) => {
                    let _ = reply.send(lock()?.render_metrics());
                }
                None => scrapes = None,
            },
            _ = committed(&commit_done) => {}
            _ = trim_tick.tick() => {
                let inputs = lock()?.inputs;
                if let Some(took) = trimmer.tick(inputs) && took > Duration::from_millis(50) {
                    eprintln!("snowline server: node {node_id}: giving freed memory back took {took:?}");
                }
            }
            _ = tick.tick() => {
                let mut server = lock()?;
                // In memory: the sequenced links (a durable host keeps its own, ticked below).
                server.tick_links();
                let now_ns = server.host_now();
                if let Some(d) = &mut server.durable {
                    d.host.tick(now_ns);
                    d.warn_about_backlog();
                    let was_full = d.host.disk_full();
                    if was_full && d.host.reclaim_space() {
                        eprintln!("snowline server: node {node_id}: disk space is available again: writes are taken");
                        d.full_retry_at = None;
                    }
                }
            }
            ev = next_inbound(&mut inbox) => {
                let Some(ev) = ev else { break };
                let mut server = lock()?;
                server.on_inbound(ev);
                server.flush_durable(Flush::Input)?;
                for _ in 0..1024 {
                    match inbox.as_mut().map(|i| i.try_recv()) {
                        Some(Ok(ev)) => {
                            server.on_inbound(ev);
                            server.flush_durable(Flush::Input)?;
                        }
                        _ => break,
                    }
                }
            }
        }
        let mut server = lock()?;
        server.drain_local();
        server.flush_durable(if inbox.as_ref().is_none_or(|i| i.is_empty()) { Flush::Idle } else { Flush::Busy })?;
        server.uncork();
    }
    // A clean stop makes everything handled durable, so the effects it held can go out.
    {
        let mut server = lock()?;
        server.flush_durable(Flush::Stop)?;
        server.uncork();
    }

    // Shutdown: stop accepting, let links write what is queued (ignoring emulated latency), then abort.
    let _ = stop_accept.send(());
    if let Some(t) = metrics_task {
        t.abort();
    }
    // The links end once their queues are written and their senders gone (connection tasks may still hold
    // the event loop itself until the accept task is aborted below).
    let (mut tasks, peers) = {
        let mut server = lock()?;
        server.stopping = true;
        (std::mem::take(&mut server.tasks), std::mem::take(&mut server.peers))
    };
    drop(peers);
    let _ = tokio::time::timeout(SHUTDOWN_FLUSH, async { while tasks.join_next().await.is_some() {} }).await;
    accept.abort();
    let _ = accept.await;
    eprintln!("snowline server: node {node_id} stopped");
    Ok(())
}

/// The next input from the inbox; never, for a server without one (its connection tasks hand over in place).
async fn next_inbound<M>(inbox: &mut Option<mpsc::Receiver<Inbound<M>>>) -> Option<Inbound<M>> {
    match inbox {
        Some(rx) => rx.recv().await,
        None => std::future::pending().await,
    }
}

/// Resolves when the durable log's background commit is done (never in memory).
async fn committed(signal: &Option<Arc<tokio::sync::Notify>>) {
    match signal {
        Some(done) => done.notified().await,
        None => std::future::pending().await,
    }
}

struct EventLoop<P: Protocol> {
    config: Arc<ClusterConfig>,
    /// Faults a nemesis injects (`fault_file` in the config); `None` for every real cluster.
    faults: Option<Arc<Faults>>,
    /// The clock the durable host is fed (with the nemesis's offset; never backwards).
    host_clock: NodeClock,
    dc: DcId,
    /// The replica (in `dc`) of every hosted partition.
    replica: ReplicaId,
    hosted: Vec<Hosted<P>>,
    /// Partition of our dc → index into `hosted`.
    by_partition: Vec<Option<usize>>,
    /// Server → index of the hosting node in `config.nodes`.
    routes: Routes,
    /// Outbound links, by node index; started on first use.
    peers: Vec<Option<PeerLink<P::Msg>>>,
    /// Per connection: its write queue and who its `Hello` said it is.
    conns: HashMap<u64, ConnEntry<P::Msg>>,
    clients: HashMap<ClientId, u64>,
    /// Client runtime id prefix (high 32 bits of its client ids, from its `Hello`) → connection: reaches
    /// a client of that runtime that has not sent anything on a connection to this process yet.
    client_runtimes: HashMap<u64, u64>,
    /// Messages for clients whose runtime has not connected to this process yet, oldest first (a replica
    /// group's leader answers sessions that asked another member; their connection may still be opening).
    unrouted: VecDeque<(Instant, ClientId, Frame<P::Msg>)>,
    local: VecDeque<(usize, Addr, P::Msg)>,
    timers: TimerHeap<usize, P::Timer>,
    effects: Effects<P>,
    hello: Frame<P::Msg>,
    tasks: JoinSet<()>,
    /// Monotonic time of the input being handled (stamps outgoing frames for the latency queues).
    now: Instant,
    /// With a data directory: the hosted servers live in the durable host instead of `hosted[..].node`.
    durable: Option<DurableState<P>>,
    /// In memory: the sequenced links to and from servers of other processes (`snowline_core::links`;
    /// the durable host keeps its own).
    links: MemLinks<P::Msg>,
    /// Link messages shed (`MemLinks::shed`) as last reported.
    links_shed_reported: u64,
    /// Messages the hosted servers refused as invalid input (each answered with an `Error` frame).
    invalid_inputs: u64,
    /// Driver-contract violations of the hosted servers (`core::host::ContractViolation`).
    contract_violations: u64,
    topology: Topology,
    shared: Arc<Shared>,
    node_id: u32,
    /// When the process started serving (uptime).
    started: Instant,
    counters: Counters,
    /// Metrics are served: time each message's handling.
    timed: bool,
    /// The deadline the event loop's task sleeps until (`next_deadline` when it last looked).
    armed: Option<Instant>,
    /// Shutting down: connection tasks hand in nothing more (as the inbox is no longer read then).
    stopping: bool,
    /// Inputs from the network handled so far (whether the server is quiet: `memory::Trimmer`).
    inputs: u64,
    /// Client connections with corked replies ([`EventLoop::answer`]).
    corked: Vec<Arc<SharedWrite>>,
}

/// An outbound link to a peer node: its queue, and what was queued and taken for the backlog metric.
struct PeerLink<M> {
    tx: OutTx<M>,
    /// Frames queued (event loop only: a plain integer).
    queued: u64,
    /// Frames its writer has taken from the queue.
    taken: Arc<AtomicU64>,
}

/// The next scrape request, if metrics are on (else never).
async fn next_scrape(rx: &mut Option<mpsc::Receiver<Scrape>>) -> Option<Scrape> {
    match rx {
        Some(rx) => rx.recv().await,
        None => std::future::pending().await,
    }
}

/// An inbound connection as the event loop knows it: its write queue, who its `Hello` said it is, and its
/// socket's shared write side (plain TCP: replies are written in place when nothing is queued).
type ConnEntry<M> = (OutTx<M>, Arc<ConnQueue>, Addr, Option<Arc<SharedWrite>>);

/// What the event loop and every connection task share.
struct Shared {
    budget: Arc<FrameBudget>,
    log: RateLimitedLog,
    /// Peer authentication; `None` for an `insecure` cluster.
    tls: Option<NodeTls>,
    routes: Routes,
    /// Node ids by index in the config (what `Routes::node_of` returns).
    node_ids: Vec<u32>,
    /// Inbound connections open (handshake done or not), kept by the accept task.
    open_conns: AtomicUsize,
    /// Which inbound connections are kept (`admission`), under `limits`.
    admission: Arc<Admission>,
    /// Requests in flight over all client connections (each connection's `ConnQueue` counts into it).
    in_flight: Arc<InFlightTotal>,
    limits: ConnLimits,
}

/// Who is at the other end of an inbound connection, as far as its authentication tells.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Caller {
    /// TLS with a certificate of the cluster's CA naming this node.
    Node(u32),
    /// TLS without a certificate.
    TlsClient,
    /// Plain TCP.
    PlainClient,
}

impl Shared {
    /// Whether a connection whose authentication found `caller` may say it is `from` in its `Hello`.
    fn admit(&self, caller: Caller, from: Addr) -> Result<(), String> {
        let Some(tls) = &self.tls else { return Ok(()) };
        match from {
            Addr::Client(_) if caller == Caller::PlainClient && tls.clients_need_tls => {
                Err("this cluster requires TLS from clients ([tls] clients = true)".into())
            }
            Addr::Client(_) => Ok(()),
            Addr::Server(s) => {
                let host = self.routes.node_of(s).and_then(|i| self.node_ids.get(i).copied());
                match caller {
                    Caller::Node(n) if Some(n) == host => Ok(()),
                    Caller::Node(n) => {
                        Err(format!("this connection's certificate is node {n}'s, which does not host {s}"))
                    }
                    Caller::TlsClient | Caller::PlainClient => Err(format!(
                        "a Hello in the name of server {s} without a peer certificate: servers authenticate each \
                         other by mutual TLS, so this connection may carry client requests only"
                    )),
                }
            }
        }
    }
}

/// When [`EventLoop::flush_durable`] is called.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Flush {
    /// Right after one input.
    Input,
    /// At the end of a loop turn, with more input already waiting.
    Busy,
    /// At the end of a loop turn, with nothing waiting.
    Idle,
    /// At shutdown: everything.
    Stop,
}

struct DurableState<P: Protocol> {
    host: DurableHost<P, Log>,
    policy: FsyncPolicy,
    /// (hosted index, timer id).
    timers: TimerHeap<usize, u64>,
    /// When the oldest record not yet committed was appended (group commit's delay bound).
    oldest_pending: Option<Instant>,
    /// When the last background commit started (`group`).
    last_started: Option<Instant>,
    /// Notified by the log when a background commit is done.
    committed: Arc<tokio::sync::Notify>,
    /// When a link backlog was last reported.
    backlog_warned: Option<Instant>,
    /// After a commit found the disk full: no new try before this (each try reopens the data file).
    full_retry_at: Option<Instant>,
}

/// How long a server whose commit found the disk full waits before trying again.
const DISK_FULL_RETRY: Duration = Duration::from_millis(100);

/// A link backlog this long (messages a peer has not acknowledged) is reported, at most every 10 s.
const BACKLOG_WARNING: usize = 100_000;

impl<P: Protocol> DurableState<P> {
    fn warn_about_backlog(&mut self) {
        let Some((from, to, n)) = self.host.largest_backlog() else { return };
        let quiet = self.backlog_warned.is_some_and(|t| t.elapsed() < Duration::from_secs(10));
        if n >= BACKLOG_WARNING && !quiet {
            self.backlog_warned = Some(Instant::now());
            eprintln!(
                "warning: {to} has not acknowledged {n} messages from {from}; they are kept (in memory and in \
                 checkpoints) until it comes back"
            );
        }
    }

    /// How long a record may wait for its commit while the server stays busy, and how many may wait.
    fn batch_limits(&self) -> (Duration, usize) {
        match self.policy {
            FsyncPolicy::Group { max_delay_ms, max_batch } => (Duration::from_millis(max_delay_ms), max_batch.max(1)),
            FsyncPolicy::PerWrite | FsyncPolicy::None => {
                let FsyncPolicy::Group { max_delay_ms, max_batch } = FsyncPolicy::GROUP_DEFAULT else {
                    unreachable!("the group default is a group policy")
                };
                (Duration::from_millis(max_delay_ms), max_batch)
            }
        }
    }

    /// When what is pending must be committed even if the server stays busy.
    fn commit_deadline(&self) -> Option<Instant> {
        self.oldest_pending.map(|t| t + self.batch_limits().0)
    }

    /// Background commits (`group`): whether to start one now for what is pending. A server with nothing
    /// else to do starts one at once if [`WORTH_A_COMMIT`] records are pending or no commit started in the
    /// last `max_delay_ms`; a busy one lets the batch grow to `max_batch` records or `max_delay_ms` (each
    /// commit costs CPU: fewer, larger batches leave more of it to the work). Servers that log changes
    /// (Raft's members) never rest: every consensus round waits for a commit at the leader and at the
    /// followers, so a rest would be paid at every hop of a chain of rounds.
    fn batch_due(&mut self, when: Flush) -> bool {
        let oldest = *self.oldest_pending.get_or_insert_with(Instant::now);
        let (max_delay, max_batch) = self.batch_limits();
        // The rest pays (0.49× against 0.37× of in-memory throughput at 5% writes, measured with redb).
        let rested = self.last_started.is_none_or(|t| t.elapsed() >= max_delay)
            || P::DURABILITY == snowline_core::Durability::PersistChanges;
        let worth = self.host.pending() >= WORTH_A_COMMIT;
        (when == Flush::Idle && (rested || worth)) || self.host.pending() >= max_batch || oldest.elapsed() >= max_delay
    }

    /// Whether to commit now, at `when`, what is pending.
    fn commit_due(&mut self, when: Flush) -> bool {
        let oldest = *self.oldest_pending.get_or_insert_with(Instant::now);
        let (max_delay, max_batch) = self.batch_limits();
        matches!(when, Flush::Idle | Flush::Stop)
            || self.policy == FsyncPolicy::PerWrite
            || self.host.pending() >= max_batch
            || oldest.elapsed() >= max_delay
    }
}

impl<P: Protocol> EventLoop<P> {
    fn new(config: Arc<ClusterConfig>, node_id: u32, shared: Arc<Shared>, started: Instant) -> Self {
        let me = config.node(node_id).expect("checked by the caller").clone();
        let topology = config.topology();
        let mut by_partition = vec![None; usize::from(config.partitions)];
        let mut hosted = Vec::new();
        for id in me.servers() {
            by_partition[usize::from(id.partition)] = Some(hosted.len());
            let salt = (u64::from(id.replica) << 32) | (u64::from(id.dc) << 16) | u64::from(id.partition);
            hosted.push(Hosted {
                id,
                node: P::server(id, topology, &config.protocol_config),
                rng: node_rng(salt),
                clock: NodeClock::default(),
            });
        }
        let routes = config.routes();
        let hello = Frame::Hello { protocol: P::NAME.to_owned(), from: Addr::Server(hosted[0].id) };
        Self {
            faults: None,
            host_clock: NodeClock::default(),
            dc: me.dc,
            replica: me.replica,
            peers: (0..config.nodes.len()).map(|_| None).collect(),
            config,
            topology,
            hosted,
            by_partition,
            routes,
            conns: HashMap::new(),
            clients: HashMap::new(),
            client_runtimes: HashMap::new(),
            unrouted: VecDeque::new(),
            local: VecDeque::new(),
            timers: TimerHeap::new(),
            effects: Effects::default(),
            hello,
            tasks: JoinSet::new(),
            now: Instant::now(),
            durable: None,
            links: MemLinks::new(wall_ns()),
            links_shed_reported: 0,
            invalid_inputs: 0,
            contract_violations: 0,
            shared,
            node_id,
            started,
            counters: Counters::default(),
            timed: false,
            armed: None,
            stopping: false,
            inputs: 0,
            corked: Vec::new(),
        }
    }

    /// Whether a deadline came up earlier than the one the event loop's task sleeps until (an input handled
    /// in a connection's task set a timer): that task must wake to re-arm.
    fn deadline_moved_up(&self) -> bool {
        match (self.next_deadline(), self.armed) {
            (Some(next), Some(armed)) => next < armed,
            (Some(_), None) => true,
            (None, _) => false,
        }
    }

    /// The earliest protocol timer or group-commit deadline.
    fn next_deadline(&self) -> Option<Instant> {
        let mut next = self.timers.next_due();
        if let Some(d) = &self.durable {
            for t in [d.timers.next_due(), d.commit_deadline()].into_iter().flatten() {
                next = Some(next.map_or(t, |n| n.min(t)));
            }
        }
        next
    }

    /// Durable mode: commit as the fsync policy says, then carry out what the host released.
    ///
    /// `per-write` commits after every input from outside the process (one fsync each), and `none` whenever
    /// `DurableState::commit_due` says (a write without fsync), both on the event loop. `group` commits in
    /// the background (`DurableHost::start_commit`), one commit at a time and when `DurableState::batch_due`
    /// says: what arrives during one fsync forms the next batch while the loop goes on serving (reads and
    /// anything else that waits for nothing).
    fn flush_durable(&mut self, when: Flush) -> Result<(), NetError> {
        let Some(d) = &mut self.durable else { return Ok(()) };
        let retry_wait = d.full_retry_at.is_some_and(|at| Instant::now() < at) && when != Flush::Stop;
        // Only an fsync is worth a thread: without one (`none`) a commit is a write to the OS cache, cheaper
        // than the handoffs to and from the log's thread (the Contrarian bench of `WORTH_A_COMMIT`, both ways
        // through a temporary switch: 0.82-0.87x of in-memory throughput against 0.72-0.73x at 5% writes,
        // 0.79-0.83x against 0.63x at 50%).
        let background = d.policy.is_durable() && d.policy != FsyncPolicy::PerWrite && when != Flush::Stop;
        let outcome = if !background {
            if d.host.pending() > 0 && !retry_wait && d.commit_due(when) {
                let started = Instant::now();
                let outcome = d.host.commit().map(|_| ());
                if outcome.is_ok() {
                    self.counters.commit.record(started.elapsed());
                }
                outcome
            } else {
                Ok(())
            }
        } else {
            let mut outcome = Ok(());
            if d.host.committing() {
                outcome = d.host.poll_commit().map(|_| ());
                if let (false, true, Some(since)) = (d.host.committing(), outcome.is_ok(), d.last_started) {
                    self.counters.commit.record(since.elapsed());
                }
            }
            if outcome.is_ok() && d.host.pending() > 0 && !retry_wait && !d.host.committing() && d.batch_due(when) {
                outcome = d.host.start_commit();
                if d.host.committing() {
                    d.last_started = Some(Instant::now());
                    d.oldest_pending = None;
                }
            }
            outcome
        };
        match outcome {
            Ok(()) => {
                if d.host.pending() == 0 {
                    d.oldest_pending = None;
                }
                if !retry_wait {
                    d.full_retry_at = None;
                }
            }
            // Not a failed write: what was handled stays pending, its effects held, and client requests
            // are refused until space is freed (`DurableHost::commit`).
            Err(e @ snowline_storage::StorageError::DiskFull { .. }) => {
                if d.full_retry_at.is_none() {
                    eprintln!("snowline server: {e}: refusing client requests until space is freed");
                }
                d.full_retry_at = Some(Instant::now() + DISK_FULL_RETRY);
            }
            Err(e) => return Err(e.into()),
        }
        let outputs = d.host.take_outputs();
        let violations = d.host.take_violations();
        self.report_violations(violations);
        self.now = Instant::now();
        for out in outputs {
            match out {
                Output::ToClient { from, to, msg } => self.send(from, to, msg),
                Output::Seq { from, to, seq, msg } => {
                    self.counters.sent_to_servers.add(msg.kind());
                    self.send_frame(to, Frame::Seq { from, to, epoch: 0, floor: 0, seq, msg });
                }
                Output::Ack { from, to, seq, resend } => {
                    self.send_frame(to, Frame::Ack { from, to, epoch: 0, seq, resend });
                }
                Output::Timer { node, id, delay_ns } => {
                    let d = self.durable.as_mut().expect("durable");
                    d.timers.push(self.now, delay_ns, node, id);
                }
            }
        }
        Ok(())
    }

    /// This node's clock offset from a nemesis (0 without one).
    fn clock_offset_ns(&self) -> i64 {
        self.faults.as_ref().map_or(0, |f| f.clock_offset_ns())
    }

    /// The wall-clock reading the durable host is fed.
    fn host_now(&mut self) -> u64 {
        let offset = self.clock_offset_ns();
        self.host_clock.read_offset(offset)
    }

    fn hosted_index(&self, s: ServerId) -> Option<usize> {
        if s.dc != self.dc || s.replica != self.replica {
            return None;
        }
        self.by_partition.get(usize::from(s.partition)).copied().flatten()
    }

    fn on_inbound(&mut self, ev: Inbound<P::Msg>) {
        self.inputs += 1;
        match ev {
            Inbound::Connected { conn, from, tx, queue, direct } => {
                self.conns.insert(conn, (tx, queue, from, direct));
                if let Addr::Client(c) = from {
                    self.client_runtimes.insert(c.0 >> 32, conn);
                    self.route_unrouted(c.0 >> 32, conn);
                }
            }
            Inbound::Closed { conn } => {
                self.conns.remove(&conn);
                self.clients.retain(|_, c| *c != conn);
                self.client_runtimes.retain(|_, c| *c != conn);
            }
            Inbound::Ack { conn, from, to, epoch, seq, resend } => {
                if let Err(e) = self.check_sender(conn, Addr::Server(from), "ack") {
                    return self.refuse(conn, e);
                }
                if self.durable.is_some() {
                    let now_ns = self.host_now();
                    let d = self.durable.as_mut().expect("durable");
                    d.host.on_ack(from, to, seq, resend, now_ns);
                } else {
                    let mut out = Vec::new();
                    self.links.on_ack(from, to, epoch, seq, resend, self.link_now(), &mut out);
                    self.send_link_frames(out);
                }
            }
            // Timed only when someone can read the histogram: two clock reads per message otherwise saved.
            Inbound::Msg { conn, from, to, seq, msg } if self.timed => {
                let started = Instant::now();
                self.on_message(conn, from, to, seq, msg);
                self.counters.handler.record(started.elapsed());
            }
            Inbound::Msg { conn, from, to, seq, msg } => self.on_message(conn, from, to, seq, msg),
        }
    }

    /// A message from connection `conn`: checked, counted, handed to its server.
    fn on_message(&mut self, conn: u64, from: Addr, to: Addr, seq: Option<LinkPlace>, msg: P::Msg) {
        if let Err(e) = self.check_sender(conn, from, msg.kind()) {
            return self.refuse(conn, e);
        }
        match from {
            Addr::Client(_) => self.counters.received_from_clients.add(msg.kind()),
            Addr::Server(_) => self.counters.received_from_servers.add(msg.kind()),
        }
        let Addr::Server(to_server) = to else {
            eprintln!("warning: dropping a {} message from {from} addressed to client {to}", msg.kind());
            return;
        };
        let now_ns = if self.durable.is_some() { self.host_now() } else { 0 };
        if let Some(d) = &mut self.durable {
            if let Addr::Client(c) = from {
                self.clients.insert(c, conn);
            }
            if !d.host.on_message(to_server, from, seq.map(|p| p.seq), msg, now_ns) {
                eprintln!("warning: dropping a message from {from} to {to}: not hosted here");
            }
            let (invalid, refusals) = (d.host.take_invalid(), d.host.take_refusals());
            for e in invalid {
                self.refuse(conn, e);
            }
            for r in refusals {
                self.counters.refused_disk_full += 1;
                self.shared.log.warn(|| format!("refused a {} from {}: {}", r.msg, r.client, r.why));
                if !r.answered {
                    self.answer(conn, Frame::Refused { client: r.client, message: r.why });
                }
            }
            return;
        }
        let Some(idx) = self.hosted_index(to_server) else {
            eprintln!("warning: dropping a {} message from {from} to {to}: not hosted here", msg.kind());
            return;
        };
        if let Addr::Client(c) = from {
            self.clients.insert(c, conn);
        }
        if let (Addr::Server(sender), Some(place)) = (from, seq) {
            // In order and once, whatever the connections lost (`snowline_core::links`).
            let (mut out, now) = (Vec::new(), self.link_now());
            let run = self.links.receive(sender, to_server, place.epoch, place.floor, place.seq, msg, now, &mut out);
            self.send_link_frames(out);
            for msg in run {
                if let Some(e) = self.handle(idx, NodeInput::Message(from, msg)) {
                    self.refuse(conn, e);
                }
            }
            self.drain_local();
            return;
        }
        if let Some(e) = self.handle(idx, NodeInput::Message(from, msg)) {
            self.refuse(conn, e);
        }
    }

    /// In memory, every ~100 ms: acknowledge, ask for what lasting gaps lack, probe silent links; warn
    /// about a peer that stays away.
    fn tick_links(&mut self) {
        let mut out = Vec::new();
        let now = self.link_now();
        self.links.tick(now, &mut out);
        self.now = Instant::now();
        self.send_link_frames(out);
        let shed = self.links.shed();
        if shed > self.links_shed_reported {
            self.links_shed_reported = shed;
            self.shared.log.warn(|| {
                format!(
                    "a peer has not acknowledged {} messages: the oldest were dropped ({shed} so far); a peer that \
                     stays away has lost its in-memory state anyway",
                    snowline_core::links::MEM_LINK_LIMIT
                )
            });
        }
    }

    /// The clock of the in-memory links (monotonic, since the process started).
    fn link_now(&self) -> u64 {
        self.started.elapsed().as_nanos() as u64
    }

    /// Sends what the in-memory links ask for.
    fn send_link_frames(&mut self, frames: Vec<LinkFrame<P::Msg>>) {
        for f in frames {
            match f {
                LinkFrame::Seq { from, to, epoch, floor, seq, msg } => {
                    self.send_frame(to, Frame::Seq { from, to, epoch, floor, seq, msg })
                }
                LinkFrame::Ack { from, to, epoch, seq, resend } => {
                    self.send_frame(to, Frame::Ack { from, to, epoch, seq, resend })
                }
            }
        }
    }

    /// A message's sender must fit what the connection's `Hello` said: a client connection speaks only for
    /// client ids of its runtime (the prefix in its `Hello`), so it can neither pose as a server nor take
    /// over another runtime's replies; a server's connection speaks only for the servers of its node. The
    /// `Hello` itself was admitted by what the connection's certificate proves (`Shared::admit`).
    fn check_sender(&self, conn: u64, from: Addr, kind: &'static str) -> Result<(), InvalidInput> {
        let Some((_, _, hello, _)) = self.conns.get(&conn) else { return Ok(()) };
        let fits = match (*hello, from) {
            (Addr::Client(h), Addr::Client(c)) => h.0 >> 32 == c.0 >> 32,
            (Addr::Server(h), Addr::Server(s)) => {
                self.routes.node_of(h).is_some_and(|node| self.routes.node_of(s) == Some(node))
            }
            _ => false,
        };
        if fits {
            Ok(())
        } else {
            let why = format!("this connection's Hello named {hello}, which does not speak for {from}");
            Err(InvalidInput::new(InvalidKind::Sender, kind, from, why))
        }
    }

    /// A hosted server refused a message that arrived on connection `conn`: count it, say why on that
    /// connection (an `Error` frame; the connection stays open) and in the log (rate-limited).
    fn refuse(&mut self, conn: u64, e: InvalidInput) {
        self.invalid_inputs += 1;
        let n = self.invalid_inputs;
        self.shared.log.warn(|| format!("connection {conn}: refused {e} ({n} refused so far)"));
        self.answer(conn, Frame::Error { message: format!("refused: {e}") });
    }

    /// A hosted server broke the driver contract (its offending effects were dropped): a protocol bug,
    /// counted and logged (rate-limited); the server keeps serving.
    fn report_violations(&mut self, violations: Vec<ContractViolation>) {
        for v in violations {
            self.contract_violations += 1;
            let n = self.contract_violations;
            self.shared.log.warn(|| format!("driver contract broken: {v} ({n} so far)"));
        }
    }

    /// Send `frame` on inbound connection `conn` (if it is still open): written in place when nothing is
    /// queued ahead of it on a plain TCP connection, else queued for its writer (counted in its reply queue).
    /// Corked (`SharedWrite::write_now`): whoever holds the event loop writes them with
    /// [`EventLoop::uncork`] before it lets go, unless it has more input in hand.
    fn answer(&mut self, conn: u64, frame: Frame<P::Msg>) {
        if let Some((tx, queue, _, direct)) = self.conns.get(&conn) {
            queue.answered();
            if let Some(w) = direct
                && let Some(first) = w.write_now(&frame, self.config.max_frame_bytes, queue, "connection to a client")
            {
                if first {
                    self.corked.push(w.clone());
                }
                return;
            }
            queue.push();
            let _ = tx.send((self.now, frame));
        }
    }

    /// Write every reply corked since the last call (one write per connection).
    fn uncork(&mut self) {
        for w in self.corked.drain(..) {
            w.uncork();
        }
    }

    fn fire_due_timers(&mut self) -> Result<(), NetError> {
        let now = Instant::now();
        while let Some((idx, timer)) = self.timers.pop_due(now) {
            self.handle(idx, NodeInput::Timer(timer));
        }
        while let Some((idx, id)) = self.durable.as_mut().and_then(|d| d.timers.pop_due(now)) {
            let now_ns = self.host_now();
            if let Some(d) = &mut self.durable {
                d.host.on_timer(idx, id, now_ns);
            }
            self.flush_durable(Flush::Input)?;
        }
        Ok(())
    }

    fn drain_local(&mut self) {
        while let Some((idx, from, msg)) = self.local.pop_front() {
            if let Some(e) = self.handle(idx, NodeInput::Message(from, msg)) {
                // Between servers of one process: a protocol bug, not hostile input.
                self.invalid_inputs += 1;
                eprintln!("warning: a hosted server refused a message from another: {e}");
            }
        }
    }

    /// Feed one input to hosted node `idx` and carry out its effects in order; a refused message's error.
    fn handle(&mut self, idx: usize, input: NodeInput<P>) -> Option<InvalidInput> {
        self.now = Instant::now();
        let offset = self.clock_offset_ns();
        let h = &mut self.hosted[idx];
        let now_ns = h.clock.read_offset(offset);
        let me = h.id;
        let mut cx = Ctx::new(now_ns, &mut h.rng, &mut self.effects);
        let served = host::serve(&mut h.node, Addr::Server(me), &mut cx, input);
        h.clock.raise(self.effects.raise_clock);
        let mut violations = host::audit(Addr::Server(me), &self.topology, &mut self.effects);
        let refused = served.unwrap_or_else(|v| {
            violations.push(v);
            None
        });
        self.report_violations(violations);
        let mut effects = std::mem::take(&mut self.effects);
        for (to, msg) in effects.sends.drain(..) {
            self.send(me, to, msg);
        }
        for (delay_ns, timer) in effects.timers.drain(..) {
            self.timers.push(self.now, delay_ns, idx, timer);
        }
        effects.clear();
        self.effects = effects;
        refused
    }

    fn send(&mut self, from: ServerId, to: Addr, msg: P::Msg) {
        match to {
            Addr::Server(s) => {
                if let Some(idx) = self.hosted_index(s) {
                    self.local.push_back((idx, Addr::Server(from), msg));
                    return;
                }
                self.counters.sent_to_servers.add(msg.kind());
                if self.faults.as_ref().is_some_and(|f| f.plan().broken_unsequenced_links) {
                    return self.send_frame(s, Frame::Msg { from: Addr::Server(from), to, msg });
                }
                let now = self.link_now();
                match self.links.send(from, s, msg, now) {
                    LinkFrame::Seq { from, to, epoch, floor, seq, msg } => {
                        self.send_frame(to, Frame::Seq { from, to, epoch, floor, seq, msg })
                    }
                    LinkFrame::Ack { .. } => unreachable!("send numbers a message"),
                }
            }
            Addr::Client(c) => {
                let Some(&conn) = self.clients.get(&c).or_else(|| self.client_runtimes.get(&(c.0 >> 32))) else {
                    self.hold_unrouted(c, Frame::Msg { from: Addr::Server(from), to, msg });
                    return;
                };
                self.counters.sent_to_clients.add(msg.kind());
                if let Some(note) = msg.reply_note() {
                    self.counters.note_reply(note);
                }
                self.answer(conn, Frame::Msg { from: Addr::Server(from), to, msg });
            }
        }
    }

    /// Keeps a message for a client that has no connection here for up to [`UNROUTED_FOR`] (at most
    /// [`UNROUTED_LIMIT`] of them); what is older, or over the limit, is dropped and counted.
    fn hold_unrouted(&mut self, to: ClientId, frame: Frame<P::Msg>) {
        let now = Instant::now();
        while self.unrouted.front().is_some_and(|(t, _, _)| now.duration_since(*t) >= UNROUTED_FOR)
            || self.unrouted.len() >= UNROUTED_LIMIT
        {
            self.unrouted.pop_front();
            self.counters.client_replies_dropped += 1;
        }
        self.unrouted.push_back((now, to, frame));
    }

    /// A client runtime (`prefix`) connected: hand it what waited for it.
    fn route_unrouted(&mut self, prefix: u64, conn: u64) {
        if self.unrouted.iter().all(|(_, c, _)| c.0 >> 32 != prefix) {
            return;
        }
        let now = Instant::now();
        for (t, c, frame) in std::mem::take(&mut self.unrouted) {
            if c.0 >> 32 != prefix {
                self.unrouted.push_back((t, c, frame));
            } else if now.duration_since(t) < UNROUTED_FOR {
                if let Frame::Msg { msg, .. } = &frame {
                    self.counters.sent_to_clients.add(msg.kind());
                }
                self.answer(conn, frame);
            } else {
                self.counters.client_replies_dropped += 1;
            }
        }
    }

    /// Queue `frame` on the link to the node hosting server `s` (of another process), starting it if needed.
    fn send_frame(&mut self, s: ServerId, frame: Frame<P::Msg>) {
        let Some(node) = self.routes.node_of(s) else { return };
        {
            {
                let link = match &mut self.peers[node] {
                    Some(link) => link,
                    None => {
                        let taken = Arc::new(AtomicU64::new(0));
                        let peer = &self.config.nodes[node];
                        let delay = Duration::from_nanos(self.config.latency_ns(self.dc, peer.dc));
                        let spec = PeerSpec {
                            peer: node,
                            addr: peer.addr.clone(),
                            label: format!("link to node {} ({})", peer.id, peer.addr),
                            hello: self.hello.clone(),
                            write_delay: delay,
                            read_delay: Duration::ZERO,
                            max_frame: self.config.max_frame_bytes,
                            inbound: None,
                            dial: self.shared.tls.as_ref().map(|t| t.dial(peer.id)),
                            taken: Some(taken.clone()),
                            eager: false,
                            faults: self.faults.as_ref().map(|f| LinkFaults::new(f.clone(), peer.id)),
                        };
                        let tx = conn::spawn_peer(&mut self.tasks, spec);
                        self.peers[node].insert(PeerLink { tx, queued: 0, taken })
                    }
                };
                link.queued += 1;
                let _ = link.tx.send((self.now, frame));
            }
        }
    }
}

/// Aborts a background task when the server that started it returns.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Resolves on SIGTERM or ctrl-c (SIGINT): the `shutdown` future for `snowline server`.
pub async fn shutdown_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    match signal(SignalKind::terminate()) {
        Ok(mut term) => {
            tokio::select! {
                _ = term.recv() => {}
                _ = tokio::signal::ctrl_c() => {}
            }
        }
        Err(e) => {
            eprintln!("warning: cannot listen for SIGTERM ({e}); stop with ctrl-c");
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}
