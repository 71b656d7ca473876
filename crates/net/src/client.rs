//! The client library: [`ClientRuntime`] hosts the protocol's client nodes (one per [`Session`]) in one
//! driver task and shares one TCP connection per server node among all of them.
//!
//! ```no_run
//! # async fn demo<P: snowline_core::Protocol>(
//! #     config: snowline_net::ClusterConfig,
//! # ) -> Result<(), Box<dyn std::error::Error>> {
//! use snowline_core::Request;
//! let runtime = snowline_net::ClientRuntime::<P>::connect(&config, 0).await?;
//! let session = runtime.session();
//! let reply = session.execute(Request::Put { key: "k".into(), value: "v".into() }).await?;
//! # Ok(()) }
//! ```
//!
//! * The driver task owns every client node, feeds them one input at a time (driver contract), runs their
//!   timers, and routes their sends: to servers over lazily opened, reconnecting, batching links (one per
//!   server node, any datacenter), to other sessions of the same runtime locally.
//! * Client ids are `(random 32 bits from OS entropy) << 32 | counter`, unique across client processes;
//!   the high half is the runtime's prefix, announced in every connection's `Hello`.
//! * Emulated WAN latency applies to clients too: a frame to a server of another datacenter is held for
//!   the one-way latency on the way out, and replies from it on the way in.
//! * [`Session::execute`] validates the request (`ProtocolConfig::check_request` and the frame limit) and
//!   returns `OpError::Rejected` without sending anything if it fails. It gives up after the runtime's
//!   timeout (`OpError::Unknown("timed out after ..")`) and, when a connection to a server the session
//!   was talking to breaks or cannot be opened, fails the session's pending operations with
//!   `OpError::Unknown`: the outcome of a write is then unknown. Later completions are ignored.

use crate::NetError;
use crate::config::{ClusterConfig, Routes};
use crate::conn::{self, NetIn, OutTx, PeerSpec};
use crate::frame::Frame;
use crate::tls::ClientDialer;
use crate::util::{NodeClock, TimerHeap, far_future, node_rng, os_u64};
use rand::rngs::SmallRng;
use snowline_core::{
    Addr, ClientId, ClientNode, Ctx, DcId, Effects, Message, OpError, OpId, Protocol, ProtocolConfig, Reply, Request,
};
use std::collections::{HashMap, VecDeque};
use std::marker::PhantomData;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinSet;
use tokio::time::{Duration, Instant};

/// How long [`Session::execute`] waits by default.
pub const DEFAULT_OP_TIMEOUT: Duration = Duration::from_secs(10);
/// Room left in a frame for everything but keys and values.
const FRAME_OVERHEAD: usize = 4096;

type Completion = oneshot::Sender<Result<Reply, OpError>>;

enum Cmd {
    NewSession {
        client: ClientId,
    },
    DropSession {
        client: ClientId,
    },
    Request {
        client: ClientId,
        op: OpId,
        request: Request,
        done: Completion,
    },
    /// The application gave up on `op` (timeout): ignore its completion.
    Abandon {
        client: ClientId,
        op: OpId,
    },
}

/// A client library instance: one driver task and its connections. Cheap to share by reference; create
/// as many [`Session`]s as needed. The driver stops when the runtime and all its sessions are dropped.
pub struct ClientRuntime<P: Protocol> {
    cmd: mpsc::UnboundedSender<Cmd>,
    prefix: u64,
    next_client: AtomicU64,
    timeout: Duration,
    limits: Arc<Limits>,
    dc: DcId,
    _p: PhantomData<fn() -> P>,
}

struct Limits {
    protocol: ProtocolConfig,
    max_frame_bytes: usize,
}

impl<P: Protocol> ClientRuntime<P> {
    /// Start a client runtime whose sessions live in datacenter `dc`. Connections open on first use (so
    /// this does no IO and fails only on a bad config, an unknown dc or a missing tokio runtime; an
    /// unreachable server shows up as `OpError::Unknown` on the operations that need it).
    pub async fn connect(config: &ClusterConfig, dc: DcId) -> Result<Self, NetError> {
        config.validate_layout()?;
        if config.protocol != P::NAME {
            return Err(NetError::ProtocolMismatch { config: config.protocol.clone(), runtime: P::NAME });
        }
        if dc >= config.dcs {
            return Err(NetError::UnknownDc { dc, dcs: config.dcs });
        }
        let handle =
            tokio::runtime::Handle::try_current().map_err(|_| NetError::NoRuntime("ClientRuntime::connect"))?;
        // A zero prefix would make the runtime's first ids small and guessable; avoid it.
        let prefix = (os_u64() >> 32).max(1);
        let (cmd, cmd_rx) = mpsc::unbounded_channel();
        let dialer = crate::tls::client_dialer(config)?;
        let (driver, net_rx) = Driver::<P>::new(Arc::new(config.clone()), dc, prefix, dialer);
        handle.spawn(driver.run(net_rx, cmd_rx));
        Ok(Self {
            cmd,
            prefix,
            next_client: AtomicU64::new(0),
            timeout: DEFAULT_OP_TIMEOUT,
            limits: Arc::new(Limits {
                protocol: config.protocol_config.clone(),
                max_frame_bytes: config.max_frame_bytes,
            }),
            dc,
            _p: PhantomData,
        })
    }

    /// Set how long each operation of sessions created afterwards may take.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    pub fn set_timeout(&mut self, timeout: Duration) {
        self.timeout = timeout;
    }

    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// The datacenter this runtime's sessions belong to.
    pub fn dc(&self) -> DcId {
        self.dc
    }

    /// A new session: a new client node (fresh `ClientId`), started with `on_start`.
    pub fn session(&self) -> Session<P> {
        let n = self.next_client.fetch_add(1, Ordering::Relaxed) & 0xffff_ffff;
        let client = ClientId((self.prefix << 32) | n);
        let _ = self.cmd.send(Cmd::NewSession { client });
        Session {
            client,
            cmd: self.cmd.clone(),
            next_op: AtomicU64::new(0),
            timeout: self.timeout,
            limits: self.limits.clone(),
            _p: PhantomData,
        }
    }
}

/// One client session (a client node of the protocol). `Send + Sync`: it may be shared between tasks, but a
/// protocol's session guarantees assume one operation at a time per session.
pub struct Session<P: Protocol> {
    client: ClientId,
    cmd: mpsc::UnboundedSender<Cmd>,
    next_op: AtomicU64,
    timeout: Duration,
    limits: Arc<Limits>,
    _p: PhantomData<fn() -> P>,
}

impl<P: Protocol> Session<P> {
    pub fn id(&self) -> ClientId {
        self.client
    }

    /// Begin an interactive transaction in this session (the protocol must offer them: `Offers::interactive`).
    /// Reads go to the servers; writes are buffered here until [`Txn::commit`], and a read of a key the
    /// transaction wrote returns the buffered value. Dropping a `Txn` without committing leaves it to the
    /// protocol's idle timeout: call [`Txn::abort`] to release what it holds at once.
    pub async fn begin(&self) -> Result<Txn<'_, P>, OpError> {
        self.execute(Request::Begin).await?;
        Ok(Txn { session: self, writes: Vec::new() })
    }

    /// Submit `request` and wait for its outcome (see the module docs for the errors).
    pub async fn execute(&self, request: Request) -> Result<Reply, OpError> {
        P::OFFERS.missing(&request).map_or(Ok(()), |_| Err(P::OFFERS.refusal(P::NAME, &request)))?;
        self.limits.protocol.check_request(&request).map_err(OpError::Rejected)?;
        let size: usize = match &request {
            Request::Rot { keys } | Request::Read { keys } => keys.iter().map(|k| k.len()).sum(),
            _ => request.writes().iter().map(|(k, v)| k.len() + v.len()).sum(),
        };
        if size + FRAME_OVERHEAD > self.limits.max_frame_bytes {
            return Err(OpError::Rejected(format!(
                "request of {size} bytes of keys and values does not fit in one frame (max_frame_bytes = {})",
                self.limits.max_frame_bytes
            )));
        }
        let op = OpId(self.next_op.fetch_add(1, Ordering::Relaxed));
        let (done, rx) = oneshot::channel();
        let stopped = || OpError::Unknown("the client runtime stopped".into());
        self.cmd.send(Cmd::Request { client: self.client, op, request, done }).map_err(|_| stopped())?;
        match tokio::time::timeout(self.timeout, rx).await {
            Ok(Ok(result)) => result,
            Ok(Err(_)) => Err(stopped()),
            Err(_) => {
                let _ = self.cmd.send(Cmd::Abandon { client: self.client, op });
                Err(OpError::Unknown(format!("timed out after {:?}", self.timeout)))
            }
        }
    }
}

/// An open interactive transaction of a [`Session`] (see [`Session::begin`]).
pub struct Txn<'s, P: Protocol> {
    session: &'s Session<P>,
    writes: Vec<(snowline_core::Key, snowline_core::Value)>,
}

impl<P: Protocol> Txn<'_, P> {
    /// Read `keys` in one round: the values in order (`None`: never written). Keys this transaction wrote
    /// read their buffered value. An `OpError::Aborted` means the transaction is over.
    pub async fn get(&mut self, keys: &[snowline_core::Key]) -> Result<Vec<Option<snowline_core::Value>>, OpError> {
        let own = |k: &snowline_core::Key| self.writes.iter().rev().find(|(w, _)| w == k).map(|(_, v)| v.clone());
        let remote: Vec<snowline_core::Key> = keys.iter().filter(|k| own(k).is_none()).cloned().collect();
        let mut fetched = if remote.is_empty() {
            Vec::new()
        } else {
            self.session.execute(Request::Read { keys: remote }).await?.reads.into_iter().map(|r| r.value).collect()
        }
        .into_iter();
        Ok(keys.iter().map(|k| own(k).map(Some).unwrap_or_else(|| fetched.next().flatten())).collect())
    }

    /// Buffer a write; it is sent with the commit.
    pub fn put(&mut self, key: impl Into<snowline_core::Key>, value: impl Into<snowline_core::Value>) {
        self.writes.push((key.into(), value.into()));
    }

    /// Commit: the reply carries the commit version, or the error says why it aborted (`OpError::Aborted`)
    /// or that the outcome is unknown.
    pub async fn commit(self) -> Result<Reply, OpError> {
        self.session.execute(Request::Commit { writes: self.writes }).await
    }

    /// Abort: nothing the transaction wrote takes effect, and what it holds is released.
    pub async fn abort(self) -> Result<(), OpError> {
        match self.session.execute(Request::Abort).await {
            Ok(_) | Err(OpError::Aborted(_)) => Ok(()),
            Err(e) => Err(e),
        }
    }
}

impl<P: Protocol> Drop for Session<P> {
    fn drop(&mut self) {
        let _ = self.cmd.send(Cmd::DropSession { client: self.client });
    }
}

struct ClientState<P: Protocol> {
    node: P::Client,
    rng: SmallRng,
    clock: NodeClock,
    pending: HashMap<OpId, Completion>,
    /// Server nodes this session sent to while it had operations pending (which links it depends on).
    touched: Vec<usize>,
}

enum Input {
    Start,
    Request(OpId, Request),
}

struct Driver<P: Protocol> {
    config: Arc<ClusterConfig>,
    /// With `[tls] clients = true`: connections to servers use TLS.
    dialer: Option<ClientDialer>,
    dc: DcId,
    prefix: u64,
    clients: HashMap<ClientId, ClientState<P>>,
    routes: Routes,
    peers: Vec<Option<OutTx<P::Msg>>>,
    net_tx: mpsc::UnboundedSender<NetIn<P::Msg>>,
    local: VecDeque<(ClientId, Addr, P::Msg)>,
    timers: TimerHeap<ClientId, P::Timer>,
    effects: Effects<P>,
    tasks: JoinSet<()>,
    now: Instant,
}

enum Event<P: Protocol> {
    Input(Input),
    Msg(Addr, P::Msg),
    Timer(P::Timer),
}

impl<P: Protocol> Driver<P> {
    fn new(
        config: Arc<ClusterConfig>,
        dc: DcId,
        prefix: u64,
        dialer: Option<ClientDialer>,
    ) -> (Self, mpsc::UnboundedReceiver<NetIn<P::Msg>>) {
        let routes = config.routes();
        let (net_tx, net_rx) = mpsc::unbounded_channel();
        let driver = Self {
            dialer,
            dc,
            prefix,
            peers: vec![None; config.nodes.len()],
            config,
            clients: HashMap::new(),
            routes,
            net_tx,
            local: VecDeque::new(),
            timers: TimerHeap::new(),
            effects: Effects::default(),
            tasks: JoinSet::new(),
            now: Instant::now(),
        };
        (driver, net_rx)
    }
}

impl<P: Protocol> Driver<P> {
    async fn run(mut self, mut net: mpsc::UnboundedReceiver<NetIn<P::Msg>>, mut cmds: mpsc::UnboundedReceiver<Cmd>) {
        let d = &mut self;
        if d.config.topology().replicas > 1 {
            // In a replica group the member a session asked may not be the one that answers (the group's
            // leader answers for it), and a server can answer only over a connection the client opened.
            for node in 0..d.peers.len() {
                d.link(node, true);
            }
        }
        let sleep = tokio::time::sleep_until(far_future());
        let mut sleep = std::pin::pin!(sleep);
        let mut armed: Option<Instant> = None;
        loop {
            let next = d.timers.next_due();
            if next != armed {
                sleep.as_mut().reset(next.unwrap_or_else(far_future));
                armed = next;
            }
            tokio::select! {
                biased;
                _ = &mut sleep, if armed.is_some() => {
                    armed = None;
                    let now = Instant::now();
                    while let Some((client, timer)) = d.timers.pop_due(now) {
                        d.handle(client, Event::Timer(timer));
                    }
                }
                cmd = cmds.recv() => {
                    let Some(cmd) = cmd else { break };
                    d.on_cmd(cmd);
                    for _ in 0..1024 {
                        match cmds.try_recv() {
                            Ok(cmd) => d.on_cmd(cmd),
                            Err(_) => break,
                        }
                    }
                }
                Some(ev) = net.recv() => {
                    d.on_net(ev);
                    for _ in 0..1024 {
                        match net.try_recv() {
                            Ok(ev) => d.on_net(ev),
                            Err(_) => break,
                        }
                    }
                }
            }
            d.drain_local();
        }
        // Dropping `d` aborts the link tasks.
    }

    fn on_cmd(&mut self, cmd: Cmd) {
        match cmd {
            Cmd::NewSession { client } => {
                let state = ClientState {
                    node: P::client(client, self.dc, self.config.topology(), &self.config.protocol_config),
                    rng: node_rng(client.0),
                    clock: NodeClock::default(),
                    pending: HashMap::new(),
                    touched: Vec::new(),
                };
                self.clients.insert(client, state);
                self.handle(client, Event::Input(Input::Start));
            }
            Cmd::DropSession { client } => {
                self.clients.remove(&client);
            }
            Cmd::Request { client, op, request, done } => {
                let Some(state) = self.clients.get_mut(&client) else {
                    let _ = done.send(Err(OpError::Unknown("session is gone".into())));
                    return;
                };
                state.pending.insert(op, done);
                self.handle(client, Event::Input(Input::Request(op, request)));
            }
            Cmd::Abandon { client, op } => {
                if let Some(state) = self.clients.get_mut(&client) {
                    state.pending.remove(&op);
                    if state.pending.is_empty() {
                        state.touched.clear();
                    }
                }
            }
        }
    }

    fn on_net(&mut self, ev: NetIn<P::Msg>) {
        match ev {
            NetIn::Msg { from, to, msg } => match to {
                Addr::Client(c) if self.clients.contains_key(&c) => self.handle(c, Event::Msg(from, msg)),
                _ => {} // A session that is gone (driver contract, rule 4).
            },
            NetIn::Refused { client, message } => {
                if let Some(state) = self.clients.get_mut(&client) {
                    for (_, done) in state.pending.drain() {
                        let _ = done.send(Err(OpError::Rejected(message.clone())));
                    }
                    state.touched.clear();
                }
            }
            NetIn::Down { peer, reason } => {
                for state in self.clients.values_mut() {
                    if state.touched.contains(&peer) {
                        for (_, done) in state.pending.drain() {
                            let _ = done.send(Err(OpError::Unknown(reason.clone())));
                        }
                        state.touched.clear();
                    }
                }
            }
        }
    }

    fn drain_local(&mut self) {
        while let Some((client, from, msg)) = self.local.pop_front() {
            if self.clients.contains_key(&client) {
                self.handle(client, Event::Msg(from, msg));
            }
        }
    }

    fn handle(&mut self, client: ClientId, ev: Event<P>) {
        self.now = Instant::now();
        let Some(state) = self.clients.get_mut(&client) else { return };
        let now_ns = state.clock.read();
        let mut cx = Ctx::new(now_ns, &mut state.rng, &mut self.effects);
        match ev {
            Event::Input(Input::Start) => state.node.on_start(&mut cx),
            Event::Input(Input::Request(op, request)) => state.node.on_request(&mut cx, op, request),
            Event::Msg(from, msg) => state.node.on_message(&mut cx, from, msg),
            Event::Timer(t) => state.node.on_timer(&mut cx, t),
        }
        let mut effects = std::mem::take(&mut self.effects);
        for (to, msg) in effects.sends.drain(..) {
            self.send(client, to, msg);
        }
        for (delay_ns, timer) in effects.timers.drain(..) {
            self.timers.push(self.now, delay_ns, client, timer);
        }
        if let Some(state) = self.clients.get_mut(&client) {
            for (op, result) in effects.completions.drain(..) {
                if let Some(done) = state.pending.remove(&op) {
                    let _ = done.send(result);
                }
            }
            if state.pending.is_empty() {
                state.touched.clear();
            }
        }
        effects.clear();
        self.effects = effects;
    }

    fn send(&mut self, from: ClientId, to: Addr, msg: P::Msg) {
        let s = match to {
            Addr::Client(c) => {
                self.local.push_back((c, Addr::Client(from), msg));
                return;
            }
            Addr::Server(s) => s,
        };
        let Some(node) = self.routes.node_of(s) else {
            eprintln!("warning: client {from} sent a {} message to {s}, which does not exist", msg.kind());
            return;
        };
        if let Some(state) = self.clients.get_mut(&from)
            && !state.pending.is_empty()
            && !state.touched.contains(&node)
        {
            state.touched.push(node);
        }
        let now = self.now;
        let _ = self.link(node, false).send((now, Frame::Msg { from: Addr::Client(from), to, msg }));
    }

    /// The link to server node `node`, opened on first use.
    fn link(&mut self, node: usize, eager: bool) -> &OutTx<P::Msg> {
        if self.peers[node].is_none() {
            {
                let peer = &self.config.nodes[node];
                let spec = PeerSpec {
                    peer: node,
                    addr: peer.addr.clone(),
                    label: format!("server node {} ({})", peer.id, peer.addr),
                    hello: Frame::Hello {
                        protocol: P::NAME.to_owned(),
                        from: Addr::Client(ClientId(self.prefix << 32)),
                    },
                    write_delay: Duration::from_nanos(self.config.latency_ns(self.dc, peer.dc)),
                    read_delay: Duration::from_nanos(self.config.latency_ns(peer.dc, self.dc)),
                    max_frame: self.config.max_frame_bytes,
                    inbound: Some(self.net_tx.clone()),
                    dial: self.dialer.as_ref().map(|d| d.dial(peer.id)),
                    taken: None,
                    eager,
                };
                self.peers[node] = Some(conn::spawn_peer(&mut self.tasks, spec));
            }
        }
        self.peers[node].as_ref().expect("opened above")
    }
}
