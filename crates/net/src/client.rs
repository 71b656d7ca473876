//! The client library: [`ClientRuntime`] hosts the protocol's client nodes (one per [`Session`]) and shares
//! one TCP connection per server node among all of them.
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
//! * The runtime's state — every client node, their timers, the links — sits behind one mutex and is run
//!   by whichever task has something for it, one input at a time (driver contract): a session's own task
//!   hands its request to its client node, whose frames wait in the link's buffer until the link's task
//!   (woken behind the sessions already woken) writes them all at once (`Core::settle`); a task
//!   waiting for its reply reads the sockets it sent on and hands what arrives to the client nodes (other
//!   sessions' replies included). No task hand-off sits between a request and its frame, or between a
//!   reply's bytes and its session: measured in `docs/RESULTS.md` ("Against redis-server").
//! * One task per link connects it lazily (sending `Hello` first), reconnects with backoff while frames
//!   wait, writes what a full socket left over, and reads replies nobody is waiting on; one timer task runs
//!   the client nodes' timers. Links to servers of another datacenter (emulated latency) and TLS links
//!   (`[tls] clients = true`) keep the queued writer and reader tasks of `conn.rs`, whose frames a small
//!   task hands to the state.
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
use crate::frame::{self, Frame};
use crate::tls::ClientDialer;
use crate::util::{NodeClock, TimerHeap, far_future, node_rng, os_u64};
use bytes::{Buf, BytesMut};
use futures::task::AtomicWaker;
use rand::rngs::SmallRng;
use snowline_core::host::{self, NodeInput};
use snowline_core::{
    Addr, ClientId, ClientNode, Ctx, DcId, Effects, Message, OpError, OpId, Protocol, ProtocolConfig, Reply, Request,
    Topology,
};
use std::collections::{HashMap, VecDeque};
use std::marker::PhantomData;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::task::Poll;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio::sync::{Notify, mpsc};
use tokio::task::JoinSet;
use tokio::time::{Duration, Instant};
use tokio_util::codec::{Decoder, LengthDelimitedCodec};

/// How long [`Session::execute`] waits by default.
pub const DEFAULT_OP_TIMEOUT: Duration = Duration::from_secs(10);
/// Bytes a direct link's read buffer offers each read.
const READ_CHUNK: usize = 16 * 1024;

/// Where an operation's outcome is left for its session. Not a oneshot channel: a session that reads its
/// own reply completes its own operation, and a wake-up of itself then would only cost the runtime a
/// needless turn (on a current-thread runtime, an extra `epoll_wait` before the next request).
#[derive(Default)]
struct Slot {
    /// `Some(None)`: the operation was dropped unanswered (the runtime stopped).
    outcome: Mutex<Option<Option<Result<Reply, OpError>>>>,
    waker: AtomicWaker,
}

impl Slot {
    fn finish(&self, outcome: Option<Result<Reply, OpError>>) {
        *self.outcome.lock().unwrap_or_else(|e| e.into_inner()) = Some(outcome);
        self.waker.wake();
    }

    /// The outcome, if the operation is over.
    fn take(&self) -> Option<Option<Result<Reply, OpError>>> {
        self.outcome.lock().unwrap_or_else(|e| e.into_inner()).take()
    }

    fn poll_outcome(&self, cx: &mut std::task::Context<'_>) -> Poll<Option<Result<Reply, OpError>>> {
        self.waker.register(cx.waker());
        match self.take() {
            Some(outcome) => Poll::Ready(outcome),
            None => Poll::Pending,
        }
    }
}

/// The state's end of a [`Slot`]: delivers the outcome once; dropped unsent, it says the runtime stopped.
struct Completion(Option<Arc<Slot>>);

impl Completion {
    fn send(mut self, result: Result<Reply, OpError>) {
        if let Some(slot) = self.0.take() {
            slot.finish(Some(result));
        }
    }
}

impl Drop for Completion {
    fn drop(&mut self) {
        if let Some(slot) = self.0.take() {
            slot.finish(None);
        }
    }
}

/// What every task of a runtime shares: the state.
struct Inner<P: Protocol> {
    core: Mutex<Core<P>>,
}

impl<P: Protocol> Inner<P> {
    /// The state; `None` if a protocol handler panicked while holding it (the runtime is then stopped).
    fn lock(&self) -> Option<MutexGuard<'_, Core<P>>> {
        self.core.lock().ok()
    }
}

/// A client library instance: its client nodes, connections and tasks. Cheap to share by reference; create
/// as many [`Session`]s as needed. Its tasks stop when the runtime and all its sessions are dropped.
pub struct ClientRuntime<P: Protocol> {
    inner: Arc<Inner<P>>,
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
        let dialer = crate::tls::client_dialer(config)?;
        let timers_changed = Arc::new(Notify::new());
        let (net_tx, net_rx) = mpsc::unbounded_channel();
        let inner = Arc::new_cyclic(|me: &Weak<Inner<P>>| Inner {
            core: Mutex::new(Core::new(
                Arc::new(config.clone()),
                dc,
                prefix,
                dialer,
                net_tx,
                handle,
                me.clone(),
                timers_changed.clone(),
            )),
        });
        {
            let mut core = inner.lock().expect("new");
            let weak = Arc::downgrade(&inner);
            let handle = core.handle.clone();
            core.tasks.spawn_on(pump_task(weak.clone(), net_rx), &handle);
            core.tasks.spawn_on(timer_task(weak, timers_changed), &handle);
            if core.config.topology().replicas > 1 {
                // In a replica group the member a session asked may not be the one that answers (the group's
                // leader answers for it), and a server can answer only over a connection the client opened.
                for node in 0..core.links.len() {
                    core.link(node, true);
                }
            }
        }
        Ok(Self {
            inner,
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
        self.session_from(&[]).expect("an empty saved state resumes every protocol")
    }

    /// A new session that carries on from `saved` ([`Session::save`] of a session of this cluster, maybe
    /// in another process or datacenter: `ClientNode::resume_session`). `Err` says why `saved` is not one.
    pub fn session_from(&self, saved: &[u8]) -> Result<Session<P>, String> {
        let n = self.next_client.fetch_add(1, Ordering::Relaxed) & 0xffff_ffff;
        let client = ClientId((self.prefix << 32) | n);
        if let Some(mut core) = self.inner.lock() {
            core.new_session(client, saved)?;
        }
        Ok(Session {
            client,
            inner: self.inner.clone(),
            next_op: AtomicU64::new(0),
            timeout: self.timeout,
            limits: self.limits.clone(),
            _p: PhantomData,
        })
    }
}

/// One client session (a client node of the protocol). `Send + Sync`: it may be shared between tasks, but a
/// protocol's session guarantees assume one operation at a time per session.
pub struct Session<P: Protocol> {
    client: ClientId,
    inner: Arc<Inner<P>>,
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

    /// What this session's guarantees need carried to a later session (`ClientNode::save_session`): a
    /// session token's content. Empty if the runtime stopped.
    pub fn save(&self) -> Vec<u8> {
        self.inner
            .lock()
            .and_then(|core| core.clients.get(&self.client).map(|c| c.node.save_session()))
            .unwrap_or_default()
    }

    /// Submit `request` and wait for its outcome (see the module docs for the errors).
    pub async fn execute(&self, request: Request) -> Result<Reply, OpError> {
        self.execute_within(request, self.timeout).await
    }

    /// [`Session::execute`], giving up after `timeout` instead of the runtime's (a caller's deadline).
    pub async fn execute_within(&self, request: Request, timeout: Duration) -> Result<Reply, OpError> {
        P::OFFERS.missing(&request).map_or(Ok(()), |_| Err(P::OFFERS.refusal(P::NAME, &request)))?;
        self.limits.protocol.check_request(&request).map_err(OpError::Rejected)?;
        let size: usize = match &request {
            Request::Rot { keys } | Request::Read { keys } => keys.iter().map(|k| k.len()).sum(),
            _ => request.writes().iter().map(|(k, v)| k.len() + v.len()).sum(),
        };
        let limit = snowline_core::frames::request_limit(self.limits.max_frame_bytes);
        if size + snowline_core::frames::REQUEST_OVERHEAD > limit {
            return Err(OpError::Rejected(format!(
                "request of {size} bytes of keys and values does not fit in one request frame ({limit} bytes: \
                 max_frame_bytes = {} less {} of headroom for the messages that carry it)",
                self.limits.max_frame_bytes,
                snowline_core::frames::FRAME_HEADROOM
            )));
        }
        let op = OpId(self.next_op.fetch_add(1, Ordering::Relaxed));
        let slot = Arc::new(Slot::default());
        let done = Completion(Some(slot.clone()));
        let stopped = || OpError::Unknown("the client runtime stopped".into());
        let mut streams = Vec::new();
        {
            let Some(mut core) = self.inner.lock() else { return Err(stopped()) };
            core.request(self.client, op, request, done);
            core.streams_of(self.client, &mut streams);
        }
        match tokio::time::timeout(timeout, self.wait(&slot, streams)).await {
            Ok(Some(result)) => result,
            Ok(None) => Err(stopped()),
            Err(_) => {
                if let Some(mut core) = self.inner.lock() {
                    core.abandon(self.client, op);
                }
                Err(OpError::Unknown(format!("timed out after {timeout:?}")))
            }
        }
    }

    /// Wait for the outcome in `slot`, reading the connections the session sent on meanwhile (their link
    /// tasks read them too, so a reply arriving elsewhere still comes, one task hand-off later).
    async fn wait(&self, slot: &Slot, mut streams: Vec<Arc<TcpStream>>) -> Option<Result<Reply, OpError>> {
        loop {
            if let Some(outcome) = slot.take() {
                return outcome;
            }
            if streams.is_empty() {
                return std::future::poll_fn(|cx| slot.poll_outcome(cx)).await;
            }
            let readable = async {
                if let [one] = &streams[..] {
                    let _ = one.readable().await;
                } else {
                    let _ = futures::future::select_all(streams.iter().map(|s| Box::pin(s.readable()))).await;
                }
            };
            tokio::select! {
                biased;
                outcome = std::future::poll_fn(|cx| slot.poll_outcome(cx)) => return outcome,
                _ = readable => {}
            }
            // An outcome this task's own reading delivers needs no wake-up of this task.
            drop(slot.waker.take());
            let mut core = self.inner.lock()?;
            core.read_links_of(self.client);
            streams.clear();
            core.streams_of(self.client, &mut streams);
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
        if let Some(mut core) = self.inner.lock() {
            core.clients.remove(&self.client);
        }
    }
}

struct ClientState<P: Protocol> {
    node: P::Client,
    rng: SmallRng,
    clock: NodeClock,
    pending: HashMap<OpId, Completion>,
    /// Server nodes this session sent to while it had operations pending (which links it depends on).
    touched: Vec<usize>,
    /// Request frames sent while operations were pending (cleared with `touched`): more than one, and a
    /// refusal of the last says nothing certain about the earlier ones (a resend to the same server).
    sent: u32,
}

/// The link to one server node.
enum Link<M> {
    /// Plain TCP without emulated latency: frames are written and read by whichever task holds the state.
    Direct(Direct),
    /// TLS, or emulated latency: `conn.rs`'s queued writer and reader tasks.
    Queued(OutTx<M>),
}

/// A direct link's connection and buffers (its link task: [`direct_link`]).
struct Direct {
    /// The connection, once open and its `Hello` written.
    stream: Option<Arc<TcpStream>>,
    /// Encoded frames not yet written: queued while connecting, or left over by a full socket.
    out: BytesMut,
    /// Bytes read and not yet decoded.
    rbuf: BytesMut,
    codec: LengthDelimitedCodec,
    /// Wakes the link task: there is something to write (or to connect for).
    wake: Arc<Notify>,
}

/// The runtime's state: every client node and link. Run under [`Inner::core`] by whichever task has an
/// input for it; every entry point ends with [`Core::settle`].
struct Core<P: Protocol> {
    config: Arc<ClusterConfig>,
    /// With `[tls] clients = true`: connections to servers use TLS.
    dialer: Option<ClientDialer>,
    dc: DcId,
    prefix: u64,
    clients: HashMap<ClientId, ClientState<P>>,
    topology: Topology,
    routes: Routes,
    links: Vec<Option<Link<P::Msg>>>,
    /// Direct links with bytes in `out` to try writing at the end of this entry.
    dirty: Vec<usize>,
    /// Where queued links report what they read.
    net_tx: mpsc::UnboundedSender<NetIn<P::Msg>>,
    local: VecDeque<(ClientId, Addr, P::Msg)>,
    timers: TimerHeap<ClientId, P::Timer>,
    /// What the timer task sleeps until (`None`: nothing).
    timer_armed: Option<Instant>,
    timers_changed: Arc<Notify>,
    effects: Effects<P>,
    /// Messages decoded from a direct link, waiting to be handled.
    inbox: Vec<NetIn<P::Msg>>,
    tasks: JoinSet<()>,
    handle: tokio::runtime::Handle,
    me: Weak<Inner<P>>,
    now: Instant,
}

impl<P: Protocol> Core<P> {
    #[allow(clippy::too_many_arguments)]
    fn new(
        config: Arc<ClusterConfig>,
        dc: DcId,
        prefix: u64,
        dialer: Option<ClientDialer>,
        net_tx: mpsc::UnboundedSender<NetIn<P::Msg>>,
        handle: tokio::runtime::Handle,
        me: Weak<Inner<P>>,
        timers_changed: Arc<Notify>,
    ) -> Self {
        let routes = config.routes();
        Self {
            dialer,
            dc,
            prefix,
            links: (0..config.nodes.len()).map(|_| None).collect(),
            topology: config.topology(),
            config,
            clients: HashMap::new(),
            routes,
            dirty: Vec::new(),
            net_tx,
            local: VecDeque::new(),
            timers: TimerHeap::new(),
            timer_armed: None,
            timers_changed,
            effects: Effects::default(),
            inbox: Vec::new(),
            tasks: JoinSet::new(),
            handle,
            me,
            now: Instant::now(),
        }
    }

    fn new_session(&mut self, client: ClientId, saved: &[u8]) -> Result<(), String> {
        let mut node = P::client(client, self.dc, self.config.topology(), &self.config.protocol_config);
        node.resume_session(saved)?;
        let state = ClientState {
            node,
            rng: node_rng(client.0),
            clock: NodeClock::default(),
            pending: HashMap::new(),
            touched: Vec::new(),
            sent: 0,
        };
        self.clients.insert(client, state);
        self.handle(client, NodeInput::Start);
        self.settle();
        Ok(())
    }

    fn request(&mut self, client: ClientId, op: OpId, request: Request, done: Completion) {
        let Some(state) = self.clients.get_mut(&client) else {
            done.send(Err(OpError::Unknown("session is gone".into())));
            return;
        };
        state.pending.insert(op, done);
        self.handle(client, NodeInput::Request(op, request));
        self.settle();
    }

    /// The application gave up on `op` (timeout): ignore its completion.
    fn abandon(&mut self, client: ClientId, op: OpId) {
        if let Some(state) = self.clients.get_mut(&client) {
            state.pending.remove(&op);
            if state.pending.is_empty() {
                state.touched.clear();
                state.sent = 0;
            }
        }
    }

    /// The open direct connections `client` sent on while its operations are pending.
    fn streams_of(&self, client: ClientId, out: &mut Vec<Arc<TcpStream>>) {
        let Some(state) = self.clients.get(&client) else { return };
        for node in &state.touched {
            if let Some(Link::Direct(Direct { stream: Some(s), .. })) = &self.links[*node] {
                out.push(s.clone());
            }
        }
    }

    /// Read what arrived on the direct links `client` sent on, and handle it.
    fn read_links_of(&mut self, client: ClientId) {
        let nodes = self.clients.get(&client).map(|s| s.touched.clone()).unwrap_or_default();
        for node in nodes {
            self.read_link(node);
        }
        self.settle();
    }

    /// Drain the local queue and write what the inputs queued; the end of every entry point.
    fn settle(&mut self) {
        while let Some((client, from, msg)) = self.local.pop_front() {
            if self.clients.contains_key(&client) {
                self.handle(client, NodeInput::Message(from, msg));
            }
        }
        // Corked: the link's task writes them once the tasks woken ahead of it have run, so the requests of
        // every session that a burst of replies set going leave in one write.
        for node in self.dirty.drain(..) {
            if let Some(Link::Direct(d)) = &self.links[node] {
                d.wake.notify_one();
            }
        }
        if let Some(next) = self.timers.next_due()
            && self.timer_armed.is_none_or(|armed| next < armed)
        {
            self.timer_armed = Some(next);
            self.timers_changed.notify_one();
        }
    }

    /// Write what direct link `node` holds, as far as the socket takes it; the rest waits for its link task.
    fn flush(&mut self, node: usize) {
        let Some(Link::Direct(d)) = &mut self.links[node] else { return };
        let Some(stream) = &d.stream else { return };
        let mut failed = None;
        while !d.out.is_empty() {
            match stream.try_write(&d.out) {
                Ok(n) => d.out.advance(n),
                // Full: the link task writes the rest once the socket is writable.
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                // Broken: tokio keeps a socket that failed this way writable, so leaving the rest to the link
                // task would spin it; the link goes down now.
                Err(e) => {
                    failed = Some(e);
                    break;
                }
            }
        }
        if let Some(e) = failed {
            let label = format!("server node {} ({})", self.config.nodes[node].id, self.config.nodes[node].addr);
            eprintln!("warning: {label}: write failed: {e}");
            self.reset_link(node);
            self.on_net(NetIn::Down { peer: node, reason: format!("connection to {label} lost") });
        } else if !d.out.is_empty() {
            d.wake.notify_one();
        }
    }

    /// Forget direct link `node`'s connection: its task reconnects when needed.
    fn reset_link(&mut self, node: usize) {
        if let Some(Link::Direct(d)) = &mut self.links[node] {
            d.stream = None;
            d.out.clear();
            d.rbuf.clear();
            d.codec = frame::codec(self.config.max_frame_bytes);
            d.wake.notify_one();
        }
    }

    /// Read what direct link `node` has, and handle it. A closed or broken connection, or bad input on it,
    /// takes the link down (its sessions' pending operations fail; its task reconnects when needed).
    fn read_link(&mut self, node: usize) {
        let Some(Link::Direct(d)) = &mut self.links[node] else { return };
        let Some(stream) = d.stream.clone() else { return };
        let label = || format!("server node {} ({})", self.config.nodes[node].id, self.config.nodes[node].addr);
        let mut broken = None;
        loop {
            d.rbuf.reserve(READ_CHUNK);
            let room = d.rbuf.capacity() - d.rbuf.len();
            // A short read empties the socket: the closure then reports `WouldBlock`, so that tokio forgets
            // the readiness now instead of a later read finding out with a syscall (tokio's own `poll_read`
            // does the same).
            let read = stream.try_io(tokio::io::Interest::READABLE, || match stream.try_read_buf(&mut d.rbuf) {
                Ok(n) if n > 0 && n < room => Err(std::io::ErrorKind::WouldBlock.into()),
                other => other,
            });
            match read {
                Ok(0) => {
                    broken = Some(format!("connection to {} lost", label()));
                    break;
                }
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) => {
                    eprintln!("warning: {}: read failed: {e}", label());
                    broken = Some(format!("connection to {} lost", label()));
                    break;
                }
            }
        }
        let mut inbox = std::mem::take(&mut self.inbox);
        loop {
            let bytes = match d.codec.decode(&mut d.rbuf) {
                Ok(Some(b)) => b,
                Ok(None) => break,
                Err(e) => {
                    eprintln!("warning: {}: closing connection: {e}", label());
                    broken.get_or_insert_with(|| format!("connection to {} lost", label()));
                    break;
                }
            };
            match frame::decode::<P::Msg>(&bytes) {
                Ok(f) => inbox.extend(conn::for_client(f, node, &label())),
                Err(e) => {
                    eprintln!("warning: {}: closing connection: {e}", label());
                    broken.get_or_insert_with(|| format!("connection to {} lost", label()));
                    break;
                }
            }
        }
        if broken.is_some() {
            self.reset_link(node);
        }
        // Messages already received are handled before the link is reported down.
        for m in inbox.drain(..) {
            self.on_net(m);
        }
        self.inbox = inbox;
        if let Some(reason) = broken {
            self.on_net(NetIn::Down { peer: node, reason });
        }
    }

    /// Whether direct link `node` still runs on `stream`.
    fn is_current(&self, node: usize, stream: &Arc<TcpStream>) -> bool {
        matches!(&self.links[node], Some(Link::Direct(Direct { stream: Some(s), .. })) if Arc::ptr_eq(s, stream))
    }

    fn fire_due_timers(&mut self) {
        self.timer_armed = None;
        let now = Instant::now();
        while let Some((client, timer)) = self.timers.pop_due(now) {
            self.handle(client, NodeInput::Timer(timer));
        }
        self.settle();
    }

    fn on_net(&mut self, ev: NetIn<P::Msg>) {
        match ev {
            NetIn::Msg { from, to, msg } => match to {
                Addr::Client(c) if self.clients.contains_key(&c) => self.handle(c, NodeInput::Message(from, msg)),
                _ => {} // A session that is gone (driver contract, rule 4).
            },
            NetIn::Refused { peer, client, message } => {
                if let Some(state) = self.clients.get_mut(&client) {
                    // Certainly without effect only if the refused request is the only one this operation
                    // sent: a request resent (raft-kv's, to another replica; amcast-kv's and tpc-kv's, to
                    // the same server) or a transaction that prepared at other servers may have taken
                    // effect with an earlier one.
                    let elsewhere = state.touched.iter().any(|n| *n != peer) || state.sent > 1;
                    for (_, done) in state.pending.drain() {
                        done.send(Err(if elsewhere {
                            OpError::Unknown(format!(
                                "{message} (a server refused the request after another had received it: the \
                                 operation may have taken effect there)"
                            ))
                        } else {
                            OpError::Rejected(message.clone())
                        }));
                    }
                    state.touched.clear();
                    state.sent = 0;
                }
            }
            NetIn::Unanswerable { client, message } => {
                if let Some(state) = self.clients.get_mut(&client) {
                    for (_, done) in state.pending.drain() {
                        done.send(Err(OpError::Unknown(message.clone())));
                    }
                    state.touched.clear();
                    state.sent = 0;
                }
            }
            NetIn::Down { peer, reason } => {
                for state in self.clients.values_mut() {
                    if state.touched.contains(&peer) {
                        for (_, done) in state.pending.drain() {
                            done.send(Err(OpError::Unknown(reason.clone())));
                        }
                        state.touched.clear();
                        state.sent = 0;
                    }
                }
            }
        }
    }

    fn handle(&mut self, client: ClientId, input: NodeInput<P>) {
        self.now = Instant::now();
        let Some(state) = self.clients.get_mut(&client) else { return };
        let now_ns = state.clock.read();
        let mut cx = Ctx::new(now_ns, &mut state.rng, &mut self.effects);
        host::drive(&mut state.node, &mut cx, input);
        for v in host::audit(Addr::Client(client), &self.topology, &mut self.effects) {
            // A protocol bug, not the application's: its effect is dropped and said (the operation times out).
            eprintln!("warning: driver contract broken: {v}");
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
                    done.send(result);
                }
            }
            if state.pending.is_empty() {
                state.touched.clear();
                state.sent = 0;
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
        {
            state.sent += 1;
            if !state.touched.contains(&node) {
                state.touched.push(node);
            }
        }
        let frame = Frame::Msg { from: Addr::Client(from), to, msg };
        let max_frame = self.config.max_frame_bytes;
        let now = self.now;
        match self.link(node, false) {
            Link::Queued(tx) => {
                let _ = tx.send((now, frame));
            }
            Link::Direct(d) => {
                let was_empty = d.out.is_empty();
                if let Err(e) = frame::encode_into(&frame, max_frame, &mut d.out) {
                    eprintln!(
                        "warning: client {from}: dropping an outgoing {} message to {s}: {e}",
                        frame_kind(&frame)
                    );
                    return;
                }
                if was_empty {
                    if d.stream.is_some() {
                        self.dirty.push(node);
                    } else {
                        d.wake.notify_one();
                    }
                }
            }
        }
    }

    /// The link to server node `node`, opened on first use.
    fn link(&mut self, node: usize, eager: bool) -> &mut Link<P::Msg> {
        if self.links[node].is_none() {
            let peer = &self.config.nodes[node];
            let hello = Frame::Hello { protocol: P::NAME.to_owned(), from: Addr::Client(ClientId(self.prefix << 32)) };
            let label = format!("server node {} ({})", peer.id, peer.addr);
            let write_delay = Duration::from_nanos(self.config.latency_ns(self.dc, peer.dc));
            let read_delay = Duration::from_nanos(self.config.latency_ns(peer.dc, self.dc));
            let link = if self.dialer.is_none() && write_delay.is_zero() && read_delay.is_zero() {
                let wake = Arc::new(Notify::new());
                let spec = DirectSpec {
                    node,
                    addr: peer.addr.clone(),
                    label,
                    hello,
                    max_frame: self.config.max_frame_bytes,
                    wake: wake.clone(),
                    eager,
                };
                self.tasks.spawn_on(direct_link(self.me.clone(), spec), &self.handle);
                Link::Direct(Direct {
                    stream: None,
                    out: BytesMut::new(),
                    rbuf: BytesMut::new(),
                    codec: frame::codec(self.config.max_frame_bytes),
                    wake,
                })
            } else {
                let spec = PeerSpec {
                    peer: node,
                    addr: peer.addr.clone(),
                    label,
                    hello,
                    write_delay,
                    read_delay,
                    max_frame: self.config.max_frame_bytes,
                    inbound: Some(self.net_tx.clone()),
                    dial: self.dialer.as_ref().map(|d| d.dial(peer.id)),
                    taken: None,
                    eager,
                    faults: None,
                };
                let _guard = self.handle.enter();
                Link::Queued(conn::spawn_peer(&mut self.tasks, spec))
            };
            self.links[node] = Some(link);
        }
        self.links[node].as_mut().expect("opened above")
    }
}

fn frame_kind<M: Message>(f: &Frame<M>) -> &'static str {
    match f {
        Frame::Msg { msg, .. } => msg.kind(),
        _ => "control",
    }
}

/// What a direct link's task needs.
struct DirectSpec<M> {
    node: usize,
    addr: String,
    /// For messages: "server node 3 (127.0.0.1:7103)".
    label: String,
    hello: Frame<M>,
    max_frame: usize,
    wake: Arc<Notify>,
    /// Connect at once instead of on the first frame (a client that must be reachable by a server it has
    /// not sent to yet).
    eager: bool,
}

/// A direct link's task: connects when there is something to write (or at once if `eager`), writes `Hello`
/// first on every connection, then reads what nobody waits for and writes what a full socket left over.
/// Frames queued while disconnected wait; the connection is retried with exponential backoff.
async fn direct_link<P: Protocol>(inner: Weak<Inner<P>>, spec: DirectSpec<P::Msg>) {
    // `None`: the runtime is gone.
    let _ = run_direct_link(inner, spec).await;
}

async fn run_direct_link<P: Protocol>(inner: Weak<Inner<P>>, spec: DirectSpec<P::Msg>) -> Option<()> {
    let node = spec.node;
    let mut redial = conn::Redial::new();
    let mut eager = spec.eager;
    let mut hello = BytesMut::new();
    frame::encode_into(&spec.hello, spec.max_frame, &mut hello).expect("a hello fits in any frame");
    // Whether frames wait to be written (None: the runtime is gone).
    let waiting = || -> Option<bool> {
        let inner = inner.upgrade()?;
        let core = inner.lock()?;
        Some(matches!(&core.links[node], Some(Link::Direct(d)) if !d.out.is_empty()))
    };
    loop {
        if !std::mem::take(&mut eager) {
            loop {
                if waiting()? {
                    break;
                }
                spec.wake.notified().await;
            }
        }
        let connected = async {
            let mut stream = TcpStream::connect(&spec.addr).await?;
            let _ = stream.set_nodelay(true);
            stream.write_all(&hello).await?;
            Ok::<_, std::io::Error>(stream)
        };
        let stream = match connected.await {
            Ok(s) => Arc::new(s),
            Err(e) => {
                if redial.failed(&spec.label, &e, waiting()?) {
                    let reason = format!("cannot connect to {}: {e}", spec.label);
                    let inner = inner.upgrade()?;
                    let mut core = inner.lock()?;
                    core.on_net(NetIn::Down { peer: node, reason });
                    core.settle();
                }
                redial.pause().await;
                continue;
            }
        };
        redial.connected(&spec.label);
        {
            let inner = inner.upgrade()?;
            let mut core = inner.lock()?;
            if let Some(Link::Direct(d)) = &mut core.links[node] {
                d.stream = Some(stream.clone());
            }
            core.dirty.push(node);
            core.settle();
        }
        loop {
            let (current, pending) = {
                let inner = inner.upgrade()?;
                let core = inner.lock()?;
                let pending = matches!(&core.links[node], Some(Link::Direct(d)) if !d.out.is_empty());
                (core.is_current(node, &stream), pending)
            };
            if !current {
                break;
            }
            tokio::select! {
                biased;
                _ = stream.readable() => {
                    let inner = inner.upgrade()?;
                    let mut core = inner.lock()?;
                    core.read_link(node);
                    core.settle();
                }
                // Also what `Core::settle` corked (the socket is writable until a write finds it full).
                _ = stream.writable(), if pending => {
                    let inner = inner.upgrade()?;
                    let mut core = inner.lock()?;
                    core.flush(node);
                }
                _ = spec.wake.notified() => {}
            }
        }
        // The link went down (reported by `read_link`).
        redial.pause().await;
    }
}

/// Hands what queued links read (TLS, emulated latency) to the state.
async fn pump_task<P: Protocol>(inner: Weak<Inner<P>>, mut rx: mpsc::UnboundedReceiver<NetIn<P::Msg>>) {
    while let Some(ev) = rx.recv().await {
        let Some(inner) = inner.upgrade() else { return };
        let Some(mut core) = inner.lock() else { return };
        core.on_net(ev);
        for _ in 0..1024 {
            match rx.try_recv() {
                Ok(ev) => core.on_net(ev),
                Err(_) => break,
            }
        }
        core.settle();
    }
}

/// Runs the client nodes' timers.
async fn timer_task<P: Protocol>(inner: Weak<Inner<P>>, changed: Arc<Notify>) {
    loop {
        let next = {
            let Some(inner) = inner.upgrade() else { return };
            let Some(mut core) = inner.lock() else { return };
            let next = core.timers.next_due();
            core.timer_armed = next;
            next
        };
        tokio::select! {
            _ = tokio::time::sleep_until(next.unwrap_or_else(far_future)) => {
                let Some(inner) = inner.upgrade() else { return };
                let Some(mut core) = inner.lock() else { return };
                core.fire_due_timers();
            }
            _ = changed.notified() => {}
        }
    }
}
