//! The `Snowline` service: sessions, interactive transactions and the calls, over any protocol's
//! [`Backend`]; and [`serve`], which runs it on a node's `grpc` address.
//!
//! Bounds (a hostile client cannot grow the endpoint without bound; docs/API.md, "Limits"):
//! * calls whose replies are not delivered yet ([`ApiLimits::max_pending_replies`]; `replies.rs` drops one
//!   not delivered within [`ApiLimits::reply_timeout`]);
//! * connections at once ([`ApiLimits::max_connections`]; more wait in the kernel's accept queue), calls
//!   at once per connection ([`ApiLimits::max_streams`]), a message at most the cluster's frame size;
//! * request bytes in flight over all calls ([`ApiLimits::max_inflight_bytes`]): beyond it a call is
//!   refused at once (RESOURCE_EXHAUSTED), so many connections cannot add their allowances up;
//! * open sessions ([`ApiLimits::max_sessions`]; idle ones close after [`ApiLimits::idle`]) and the bytes
//!   an open transaction buffers (the request frame limit);
//! * every call ends within the store's timeout (or the caller's shorter deadline): outcome unknown.

use crate::backend::{Backend, DynSession};
use crate::errors::{self, Kind, from_op_error, status};
use crate::pb::snowline_server::{Snowline, SnowlineServer};
use crate::pb::{self};
use crate::token::{self, Shape};
use snowline_core::{Key, Offers, Protocol, Reply, Request, Value};
use snowline_net::{ClientRuntime, ClusterConfig, NetError};
use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tonic::{Request as GrpcRequest, Response, Status};

/// What `Info` says of the protocol beyond its name (from the protocol registry, which this crate does
/// not depend on).
#[derive(Clone, Debug)]
pub struct EndpointInfo {
    /// The consistency level the protocol claims (`snowline check --level`).
    pub level: String,
    pub family: String,
}

/// The endpoint's bounds (see the module docs).
#[derive(Clone, Debug)]
pub struct ApiLimits {
    pub max_sessions: usize,
    pub idle: Duration,
    pub max_connections: usize,
    pub max_streams: u32,
    pub max_inflight_bytes: usize,
    /// Calls whose replies are not delivered yet, over all connections (`replies.rs`).
    pub max_pending_replies: usize,
    /// A reply not delivered within this long is dropped.
    pub reply_timeout: Duration,
}

impl Default for ApiLimits {
    fn default() -> Self {
        Self {
            max_sessions: 10_000,
            idle: Duration::from_secs(300),
            max_connections: 1024,
            max_streams: 64,
            max_inflight_bytes: 64 << 20,
            max_pending_replies: 4096,
            reply_timeout: Duration::from_secs(30),
        }
    }
}

/// Errors starting the endpoint.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error(transparent)]
    Net(#[from] NetError),
    #[error("node {0} has no grpc address in the cluster config")]
    NoAddress(u32),
    #[error("cannot listen for gRPC on {addr}: {error}")]
    Bind { addr: String, error: std::io::Error },
    #[error("gRPC TLS set-up: {0}")]
    Tls(String),
    #[error("gRPC server: {0}")]
    Transport(#[from] tonic::transport::Error),
}

/// Serve the API of node `node` of `config` on its `grpc` address until `shutdown` resolves. Its sessions
/// are client sessions of the node's datacenter. TLS when the cluster's clients use TLS (the node's own
/// certificate, issued for `node-<id>.snowline`).
pub async fn serve<P: Protocol>(
    config: ClusterConfig,
    node: u32,
    info: EndpointInfo,
    limits: ApiLimits,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ApiError> {
    let me = config.node(node).ok_or(NetError::UnknownNode(node))?.clone();
    let addr = me.grpc.clone().ok_or(ApiError::NoAddress(node))?;
    let runtime = ClientRuntime::<P>::connect(&config, me.dc).await?;
    let timeout = runtime.timeout();
    let endpoint = Endpoint::new(Arc::new(runtime), &config, me.dc, node, P::OFFERS, info, limits, timeout);
    endpoint.serve(&config, node, &addr, Box::pin(shutdown)).await
}

/// The service: shared by every connection.
#[derive(Clone)]
pub struct Endpoint {
    inner: Arc<Inner>,
}

struct Inner {
    backend: Arc<dyn Backend>,
    info: pb::InfoReply,
    offers: Offers,
    shape: Shape,
    timeout: Duration,
    limits: ApiLimits,
    /// Bytes a transaction's buffered writes may take (what one commit request may carry).
    max_txn_bytes: usize,
    max_message_bytes: usize,
    sessions: Mutex<HashMap<String, Arc<Slot>>>,
    inflight_bytes: AtomicUsize,
}

/// One open session.
struct Slot {
    session: Arc<dyn DynSession>,
    /// Held for the length of a call: a session's calls run one at a time.
    txn: Arc<tokio::sync::Mutex<TxnBuffer>>,
    last_used: Mutex<Instant>,
}

/// The session's open interactive transaction, if any: its writes wait here until the commit.
#[derive(Default)]
struct TxnBuffer {
    open: bool,
    writes: Vec<(Key, Value)>,
    bytes: usize,
}

impl TxnBuffer {
    fn close(&mut self) {
        *self = TxnBuffer::default();
    }

    /// The value this transaction wrote to `key` last, if it wrote it.
    fn own(&self, key: &Key) -> Option<Value> {
        self.writes.iter().rev().find(|(k, _)| k == key).map(|(_, v)| v.clone())
    }
}

/// A call's session: an open one (held for the call), or one of its own.
enum CallSession {
    Open(Arc<Slot>),
    OneOff(Arc<dyn DynSession>),
}

impl CallSession {
    fn session(&self) -> &dyn DynSession {
        match self {
            CallSession::Open(slot) => slot.session.as_ref(),
            CallSession::OneOff(s) => s.as_ref(),
        }
    }
}

/// Releases a call's share of the in-flight byte budget.
struct Inflight<'a>(&'a AtomicUsize, usize);

impl Drop for Inflight<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(self.1, Ordering::Relaxed);
    }
}

impl Endpoint {
    #[allow(clippy::too_many_arguments)]
    fn new(
        backend: Arc<dyn Backend>,
        config: &ClusterConfig,
        dc: u16,
        node: u32,
        offers: Offers,
        info: EndpointInfo,
        limits: ApiLimits,
        timeout: Duration,
    ) -> Self {
        let request_limit = snowline_core::frames::request_limit(config.max_frame_bytes);
        let info = pb::InfoReply {
            protocol: config.protocol.clone(),
            level: info.level,
            family: info.family,
            dcs: config.dcs.into(),
            partitions: config.partitions.into(),
            dc: dc.into(),
            node,
            offers: Some(pb::Offers {
                read_only: offers.read_only,
                multi_key_read_only: offers.read_only && offers.multi_key_rots,
                blind_writes: offers.blind_writes,
                write_only_transactions: offers.write_transactions,
                interactive: offers.interactive,
                stored_procedures: offers.stored_procedures,
            }),
            max_value_bytes: config.protocol_config.max_value_bytes as u64,
            op_timeout_ms: timeout.as_millis() as u64,
            api_version: crate::API_VERSION.into(),
        };
        Endpoint {
            inner: Arc::new(Inner {
                backend,
                info,
                offers,
                shape: Shape { protocol: config.protocol.clone(), dcs: config.dcs, partitions: config.partitions },
                timeout,
                limits,
                max_txn_bytes: request_limit.saturating_sub(snowline_core::frames::REQUEST_OVERHEAD),
                max_message_bytes: config.max_frame_bytes,
                sessions: Mutex::new(HashMap::new()),
                inflight_bytes: AtomicUsize::new(0),
            }),
        }
    }

    async fn serve(
        self,
        config: &ClusterConfig,
        node: u32,
        addr: &str,
        shutdown: std::pin::Pin<Box<dyn Future<Output = ()> + Send>>,
    ) -> Result<(), ApiError> {
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|error| ApiError::Bind { addr: addr.to_string(), error })?;
        let mut builder = tonic::transport::Server::builder()
            .concurrency_limit_per_connection(self.inner.limits.max_streams as usize)
            .max_concurrent_streams(Some(self.inner.limits.max_streams))
            // A call ends within the store's timeout; this only stops a handler that somehow does not.
            .timeout(self.inner.timeout + Duration::from_secs(5))
            .http2_keepalive_interval(Some(Duration::from_secs(30)))
            .http2_keepalive_timeout(Some(Duration::from_secs(20)));
        if let Some(pem) = snowline_net::tls::client_facing_identity(config, node)? {
            let identity = tonic::transport::Identity::from_pem(pem.cert, pem.key);
            let tls = tonic::transport::ServerTlsConfig::new().identity(identity);
            builder = builder.tls_config(tls).map_err(|e| ApiError::Tls(e.to_string()))?;
        }
        let (health, health_service) = tonic_health::server::health_reporter();
        health.set_serving::<SnowlineServer<Endpoint>>().await;
        let reaper = tokio::spawn(reap_idle(Arc::downgrade(&self.inner)));
        let max = self.inner.max_message_bytes;
        let budget =
            crate::replies::ReplyBudget::new(self.inner.limits.max_pending_replies, self.inner.limits.reply_timeout);
        let max_connections = self.inner.limits.max_connections;
        let service = SnowlineServer::new(self).max_decoding_message_size(max).max_encoding_message_size(max);
        let incoming = crate::incoming::limited(listener, max_connections);
        let result = builder
            .layer(budget)
            .add_service(health_service)
            .add_service(service)
            .serve_with_incoming_shutdown(incoming, shutdown)
            .await;
        reaper.abort();
        Ok(result?)
    }

    fn deadline(&self, metadata: &tonic::metadata::MetadataMap) -> (Duration, bool) {
        match metadata.get("grpc-timeout").and_then(|v| v.to_str().ok()).and_then(parse_grpc_timeout) {
            Some(d) if d < self.inner.timeout => (d, true),
            _ => (self.inner.timeout, false),
        }
    }

    fn slot(&self, id: &str) -> Result<Arc<Slot>, Status> {
        let slot = self.inner.sessions.lock().unwrap_or_else(|e| e.into_inner()).get(id).cloned();
        let slot = slot.ok_or_else(|| {
            status(
                Kind::UnknownSession,
                format!(
                    "session {id:?} is not open at this endpoint (closed, idle for more than {:?}, or opened at \
                     another endpoint): open it again with its token",
                    self.inner.limits.idle
                ),
            )
        })?;
        *slot.last_used.lock().unwrap_or_else(|e| e.into_inner()) = Instant::now();
        Ok(slot)
    }

    /// The session a call names: its open session, or one of its own (no id).
    fn call_session(&self, session: &Option<pb::SessionRef>) -> Result<CallSession, Status> {
        match session.as_ref().map(|s| s.id.as_str()).unwrap_or("") {
            "" => Ok(CallSession::OneOff(self.inner.backend.open(&[]).map_err(|e| status(Kind::Unavailable, e))?)),
            id => Ok(CallSession::Open(self.slot(id)?)),
        }
    }

    /// Take `bytes` of the in-flight budget for a call, or refuse it.
    fn admit(&self, bytes: usize) -> Result<Inflight<'_>, Status> {
        let budget = &self.inner.inflight_bytes;
        let before = budget.fetch_add(bytes, Ordering::Relaxed);
        let guard = Inflight(budget, bytes);
        if before + bytes > self.inner.limits.max_inflight_bytes && before > 0 {
            return Err(errors::exhausted(format!(
                "the endpoint has {} bytes of requests in flight (limit {}): retry shortly",
                before, self.inner.limits.max_inflight_bytes
            )));
        }
        Ok(guard)
    }

    fn refuse_unoffered(&self, request: &Request) -> Result<(), Status> {
        match self.inner.offers.missing(request) {
            Some(what) => Err(status(
                Kind::NotOffered,
                format!("{} offers no {what} (Info lists what it offers)", self.inner.shape.protocol),
            )),
            None => Ok(()),
        }
    }

    /// Run `request` in the call's session, outside any transaction; the reply and the session's token.
    async fn run(
        &self,
        session: &Option<pb::SessionRef>,
        metadata: &tonic::metadata::MetadataMap,
        request: Request,
    ) -> Result<(Reply, Vec<u8>), Status> {
        self.refuse_unoffered(&request)?;
        let _inflight = self.admit(request_bytes(&request))?;
        let call = self.call_session(session)?;
        let (timeout, deadline) = self.deadline(metadata);
        let read_only = request.is_read_only();
        let _held = match &call {
            CallSession::Open(slot) => Some(slot.txn.lock().await),
            CallSession::OneOff(_) => None,
        };
        let reply =
            call.session().execute(request, timeout).await.map_err(|e| from_op_error(e, read_only, deadline))?;
        Ok((reply, self.token_of(&call)))
    }

    fn token_of(&self, call: &CallSession) -> Vec<u8> {
        match call {
            CallSession::Open(slot) => token::encode(&self.inner.shape, slot.session.save()),
            CallSession::OneOff(_) => Vec::new(),
        }
    }

    fn meta(reply: &Reply, session_token: Vec<u8>) -> Option<pb::Meta> {
        Some(pb::Meta {
            rounds: reply.metrics.rounds,
            blocked_ns: reply.metrics.blocked_ns,
            version: reply.commit.map(version),
            session_token,
        })
    }

    /// The session a step of its open transaction names, and its transaction, held for the step.
    async fn open_txn(
        &self,
        session: &Option<pb::SessionRef>,
    ) -> Result<(Arc<Slot>, tokio::sync::OwnedMutexGuard<TxnBuffer>), Status> {
        let slot = self.txn_slot(session)?;
        let txn = slot.txn.clone().lock_owned().await;
        if !txn.open {
            return Err(status(Kind::InvalidArgument, "no transaction is open in this session: Begin one first"));
        }
        Ok((slot, txn))
    }

    /// The open session a transaction step names (a transaction needs one), held for the step.
    fn txn_slot(&self, session: &Option<pb::SessionRef>) -> Result<Arc<Slot>, Status> {
        match session.as_ref().map(|s| s.id.as_str()).unwrap_or("") {
            "" => Err(status(Kind::InvalidArgument, "a transaction runs in a session: OpenSession first and name it")),
            id => self.slot(id),
        }
    }
}

fn version(v: snowline_core::Version) -> pb::Version {
    pb::Version { time: v.time, dc: v.dc.into() }
}

fn read_result(r: snowline_core::ReadResult) -> pb::ReadResult {
    pb::ReadResult { key: r.key.to_string(), value: r.value.map(|v| v.to_string()), version: Some(version(r.version)) }
}

fn request_bytes(request: &Request) -> usize {
    let reads: usize = request.reads().iter().map(|k| k.len()).sum();
    let writes: usize = request.writes().iter().map(|(k, v)| k.len() + v.len()).sum();
    let args = match request {
        Request::Call { procedure, args } => procedure.len() + args.iter().map(|a| a.len()).sum::<usize>(),
        _ => 0,
    };
    reads + writes + args + 64
}

fn keys(keys: Vec<String>) -> Vec<Key> {
    keys.into_iter().map(Key::from).collect()
}

fn writes(kvs: Vec<pb::KeyValue>) -> Vec<(Key, Value)> {
    kvs.into_iter().map(|kv| (Key::from(kv.key), Value::from(kv.value))).collect()
}

/// A `grpc-timeout` header's duration ("100m", "5S", ...: at most 8 digits and a unit).
pub fn parse_grpc_timeout(v: &str) -> Option<Duration> {
    if v.len() < 2 || v.len() > 9 {
        return None;
    }
    let (digits, unit) = v.split_at(v.len() - 1);
    let n: u64 = digits.parse().ok()?;
    Some(match unit {
        "H" => Duration::from_secs(n * 3600),
        "M" => Duration::from_secs(n * 60),
        "S" => Duration::from_secs(n),
        "m" => Duration::from_millis(n),
        "u" => Duration::from_micros(n),
        "n" => Duration::from_nanos(n),
        _ => return None,
    })
}

/// Close sessions idle longer than the limit (aborting a transaction one left open), every quarter of it.
async fn reap_idle(inner: std::sync::Weak<Inner>) {
    loop {
        let period = match inner.upgrade() {
            Some(i) => i.limits.idle / 4,
            None => return,
        };
        tokio::time::sleep(period.max(Duration::from_millis(100))).await;
        let Some(inner) = inner.upgrade() else { return };
        let idle = inner.limits.idle;
        let expired: Vec<Arc<Slot>> = {
            let mut sessions = inner.sessions.lock().unwrap_or_else(|e| e.into_inner());
            let ids: Vec<String> = sessions
                .iter()
                .filter(|(_, s)| s.last_used.lock().unwrap_or_else(|e| e.into_inner()).elapsed() > idle)
                .filter(|(_, s)| s.txn.try_lock().is_ok())
                .map(|(id, _)| id.clone())
                .collect();
            ids.iter().filter_map(|id| sessions.remove(id)).collect()
        };
        for slot in expired {
            let timeout = inner.timeout;
            tokio::spawn(async move { close(&slot, timeout).await });
        }
    }
}

/// Abort the session's open transaction, if any, so that it releases what it holds at once.
async fn close(slot: &Slot, timeout: Duration) {
    let mut txn = slot.txn.lock().await;
    if txn.open {
        txn.close();
        let _ = slot.session.execute(Request::Abort, timeout).await;
    }
}

#[tonic::async_trait]
impl Snowline for Endpoint {
    async fn info(&self, _: GrpcRequest<pb::InfoRequest>) -> Result<Response<pb::InfoReply>, Status> {
        Ok(Response::new(self.inner.info.clone()))
    }

    async fn open_session(
        &self,
        request: GrpcRequest<pb::OpenSessionRequest>,
    ) -> Result<Response<pb::OpenSessionReply>, Status> {
        let token = request.into_inner().token;
        let saved = if token.is_empty() {
            Vec::new()
        } else {
            token::decode(&self.inner.shape, &token).map_err(|e| status(Kind::InvalidArgument, e))?
        };
        {
            let sessions = self.inner.sessions.lock().unwrap_or_else(|e| e.into_inner());
            if sessions.len() >= self.inner.limits.max_sessions {
                return Err(errors::exhausted(format!(
                    "this endpoint has {} sessions open, its limit: close some (idle ones close after {:?})",
                    sessions.len(),
                    self.inner.limits.idle
                )));
            }
        }
        let session = self
            .inner
            .backend
            .open(&saved)
            .map_err(|e| status(Kind::InvalidArgument, format!("the session token cannot be resumed here: {e}")))?;
        let id = new_session_id();
        let token = token::encode(&self.inner.shape, session.save());
        let slot = Arc::new(Slot {
            session,
            txn: Arc::new(tokio::sync::Mutex::new(TxnBuffer::default())),
            last_used: Mutex::new(Instant::now()),
        });
        self.inner.sessions.lock().unwrap_or_else(|e| e.into_inner()).insert(id.clone(), slot);
        Ok(Response::new(pb::OpenSessionReply { id, token }))
    }

    async fn close_session(
        &self,
        request: GrpcRequest<pb::CloseSessionRequest>,
    ) -> Result<Response<pb::CloseSessionReply>, Status> {
        let id = request.into_inner().id;
        let slot = self.inner.sessions.lock().unwrap_or_else(|e| e.into_inner()).remove(&id);
        match slot {
            Some(slot) => {
                close(&slot, self.inner.timeout).await;
                Ok(Response::new(pb::CloseSessionReply {}))
            }
            None => Err(status(Kind::UnknownSession, format!("session {id:?} is not open at this endpoint"))),
        }
    }

    async fn get(&self, request: GrpcRequest<pb::GetRequest>) -> Result<Response<pb::GetReply>, Status> {
        let (metadata, _, r) = request.into_parts();
        let (reply, token) = self.run(&r.session, &metadata, Request::Rot { keys: vec![Key::from(r.key)] }).await?;
        let meta = Self::meta(&reply, token);
        let read = reply.reads.into_iter().next();
        Ok(Response::new(pb::GetReply {
            value: read.as_ref().and_then(|r| r.value.as_ref().map(|v| v.to_string())),
            version: read.map(|r| version(r.version)),
            meta,
        }))
    }

    async fn put(&self, request: GrpcRequest<pb::PutRequest>) -> Result<Response<pb::PutReply>, Status> {
        let (metadata, _, r) = request.into_parts();
        let put = Request::Put { key: Key::from(r.key), value: Value::from(r.value) };
        let (reply, token) = self.run(&r.session, &metadata, put).await?;
        Ok(Response::new(pb::PutReply { meta: Self::meta(&reply, token) }))
    }

    async fn read_only(
        &self,
        request: GrpcRequest<pb::ReadOnlyRequest>,
    ) -> Result<Response<pb::ReadOnlyReply>, Status> {
        let (metadata, _, r) = request.into_parts();
        let (reply, token) = self.run(&r.session, &metadata, Request::Rot { keys: keys(r.keys) }).await?;
        let meta = Self::meta(&reply, token);
        Ok(Response::new(pb::ReadOnlyReply { reads: reply.reads.into_iter().map(read_result).collect(), meta }))
    }

    async fn write_only(
        &self,
        request: GrpcRequest<pb::WriteOnlyRequest>,
    ) -> Result<Response<pb::WriteOnlyReply>, Status> {
        let (metadata, _, r) = request.into_parts();
        let (reply, token) = self.run(&r.session, &metadata, Request::Update { writes: writes(r.writes) }).await?;
        Ok(Response::new(pb::WriteOnlyReply { meta: Self::meta(&reply, token) }))
    }

    async fn begin(&self, request: GrpcRequest<pb::BeginRequest>) -> Result<Response<pb::BeginReply>, Status> {
        let (metadata, _, r) = request.into_parts();
        self.refuse_unoffered(&Request::Begin)?;
        let slot = self.txn_slot(&r.session)?;
        let mut txn = slot.txn.lock().await;
        if txn.open {
            return Err(status(
                Kind::InvalidArgument,
                "this session has a transaction open already: commit or abort it first",
            ));
        }
        let (timeout, deadline) = self.deadline(&metadata);
        let reply =
            slot.session.execute(Request::Begin, timeout).await.map_err(|e| from_op_error(e, true, deadline))?;
        txn.open = true;
        let token = token::encode(&self.inner.shape, slot.session.save());
        Ok(Response::new(pb::BeginReply { meta: Self::meta(&reply, token) }))
    }

    async fn read(&self, request: GrpcRequest<pb::ReadRequest>) -> Result<Response<pb::ReadReply>, Status> {
        let (metadata, _, r) = request.into_parts();
        let (slot, mut txn) = self.open_txn(&r.session).await?;
        let wanted = keys(r.keys);
        let remote: Vec<Key> = wanted.iter().filter(|k| txn.own(k).is_none()).cloned().collect();
        let _inflight = self.admit(remote.iter().map(|k| k.len()).sum::<usize>() + 64)?;
        let (timeout, deadline) = self.deadline(&metadata);
        let mut reply = Reply::default();
        if !remote.is_empty() || wanted.is_empty() {
            reply = match slot.session.execute(Request::Read { keys: remote }, timeout).await {
                Ok(reply) => reply,
                Err(e) => {
                    if e.abort_cause().is_some() {
                        // An abort ends the transaction.
                        txn.close();
                    }
                    return Err(from_op_error(e, true, deadline));
                }
            };
        }
        let mut fetched = std::mem::take(&mut reply.reads).into_iter();
        let reads = wanted
            .into_iter()
            .map(|key| match txn.own(&key) {
                Some(v) => pb::ReadResult { key: key.to_string(), value: Some(v.to_string()), version: None },
                None => fetched.next().map(read_result).unwrap_or(pb::ReadResult {
                    key: key.to_string(),
                    value: None,
                    version: None,
                }),
            })
            .collect();
        let token = token::encode(&self.inner.shape, slot.session.save());
        Ok(Response::new(pb::ReadReply { reads, meta: Self::meta(&reply, token) }))
    }

    async fn write(&self, request: GrpcRequest<pb::WriteRequest>) -> Result<Response<pb::WriteReply>, Status> {
        let r = request.into_inner();
        let (_slot, mut txn) = self.open_txn(&r.session).await?;
        let added: usize = r.writes.iter().map(|kv| kv.key.len() + kv.value.len()).sum();
        if txn.bytes + added > self.inner.max_txn_bytes {
            return Err(status(
                Kind::InvalidArgument,
                format!(
                    "the transaction's writes would take {} bytes; one commit carries at most {} (the cluster's \
                     max_frame_bytes less headroom). The transaction stays open without these writes",
                    txn.bytes + added,
                    self.inner.max_txn_bytes
                ),
            ));
        }
        txn.bytes += added;
        txn.writes.extend(writes(r.writes));
        Ok(Response::new(pb::WriteReply {}))
    }

    async fn commit(&self, request: GrpcRequest<pb::CommitRequest>) -> Result<Response<pb::CommitReply>, Status> {
        let (metadata, _, r) = request.into_parts();
        let (slot, mut txn) = self.open_txn(&r.session).await?;
        let writes = std::mem::take(&mut txn.writes);
        let bytes = txn.bytes;
        txn.close();
        let _inflight = self.admit(bytes + 64)?;
        let (timeout, deadline) = self.deadline(&metadata);
        let read_only = writes.is_empty();
        let reply = slot
            .session
            .execute(Request::Commit { writes }, timeout)
            .await
            .map_err(|e| from_op_error(e, read_only, deadline))?;
        let token = token::encode(&self.inner.shape, slot.session.save());
        Ok(Response::new(pb::CommitReply { meta: Self::meta(&reply, token) }))
    }

    async fn abort(&self, request: GrpcRequest<pb::AbortRequest>) -> Result<Response<pb::AbortReply>, Status> {
        let (metadata, _, r) = request.into_parts();
        let (slot, mut txn) = self.open_txn(&r.session).await?;
        txn.close();
        let (timeout, deadline) = self.deadline(&metadata);
        match slot.session.execute(Request::Abort, timeout).await {
            Ok(_) | Err(snowline_core::OpError::Aborted(_)) => Ok(Response::new(pb::AbortReply {})),
            Err(e) => Err(from_op_error(e, true, deadline)),
        }
    }

    async fn call(&self, request: GrpcRequest<pb::CallRequest>) -> Result<Response<pb::CallReply>, Status> {
        let (metadata, _, r) = request.into_parts();
        let call = Request::Call { procedure: r.procedure, args: r.args.into_iter().map(Value::from).collect() };
        let (reply, token) = self.run(&r.session, &metadata, call).await?;
        let meta = Self::meta(&reply, token);
        Ok(Response::new(pb::CallReply {
            reads: reply.reads.into_iter().map(read_result).collect(),
            writes: reply
                .writes
                .into_iter()
                .map(|(k, v)| pb::KeyValue { key: k.to_string(), value: v.to_string() })
                .collect(),
            meta,
        }))
    }
}

/// A session id: 128 random bits from the OS, in hex (not guessable, so one client cannot use another's).
fn new_session_id() -> String {
    use rand::TryRngCore;
    let mut os = rand::rngs::OsRng;
    let hi = os.try_next_u64().unwrap_or_default();
    let lo = os.try_next_u64().unwrap_or_default();
    format!("{hi:016x}{lo:016x}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grpc_timeouts_parse_as_the_spec_writes_them() {
        assert_eq!(parse_grpc_timeout("100m"), Some(Duration::from_millis(100)));
        assert_eq!(parse_grpc_timeout("5S"), Some(Duration::from_secs(5)));
        assert_eq!(parse_grpc_timeout("2M"), Some(Duration::from_secs(120)));
        assert_eq!(parse_grpc_timeout("7u"), Some(Duration::from_micros(7)));
        assert_eq!(parse_grpc_timeout("123456789m"), None, "more than 8 digits");
        assert_eq!(parse_grpc_timeout("10x"), None);
        assert_eq!(parse_grpc_timeout("m"), None);
    }
}
