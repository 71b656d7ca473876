//! Bounds on what one connection, and all of them together, may make a server hold; and rate-limited
//! logging of bad connections. The numbers are documented in `docs/ARCHITECTURE.md` ("Limits").

use bytes::BytesMut;
use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use tokio::time::{Duration, Instant};
use tokio_util::codec::{Decoder, LengthDelimitedCodec};

/// Inbound connections one server keeps past their `Hello`, peers and clients together; a connection beyond
/// this gets an `Error` frame and is closed.
pub const MAX_CONNECTIONS: usize = 8192;
/// Of [`MAX_CONNECTIONS`], the connections only peers (servers of the cluster, authenticated) may take:
/// clients may hold at most `MAX_CONNECTIONS - PEER_RESERVE`, so idle clients never stop a node's peers from
/// opening their links to it.
pub const PEER_RESERVE: usize = 256;
/// Client connections from one source address (IP) at once: one source cannot take the clients' allowance.
pub const MAX_CONNECTIONS_PER_SOURCE: usize = 1024;
/// Connections not yet past their `Hello` (TLS handshake included); a new one beyond this closes the oldest
/// of them, so a flood of silent connections cannot keep a peer from reaching its `Hello`.
pub const MAX_HANDSHAKING: usize = 1024;
/// Requests a client connection may have in flight (read, not yet answered) plus replies queued for it
/// (not yet handed to its socket); at this count the server stops reading that connection (TCP flow
/// control then stops its client) until replies go out.
pub const MAX_REQUESTS_IN_FLIGHT: usize = 4096;
/// Bytes of the request frames a client connection has in flight; at this many the server stops reading
/// that connection, as for [`MAX_REQUESTS_IN_FLIGHT`]. One request is always read when below it, so a
/// request of any allowed size gets through.
pub const MAX_IN_FLIGHT_BYTES: usize = 16 << 20;
/// Requests in flight over all client connections of a server: at this many (or
/// [`MAX_SERVER_IN_FLIGHT_BYTES`]) every client connection stops being read until some are answered, so many
/// connections cannot add their budgets up to more than the server can hold (peers are always read).
pub const MAX_SERVER_REQUESTS_IN_FLIGHT: usize = 65_536;
/// Bytes of the request frames in flight over all client connections of a server (as above).
pub const MAX_SERVER_IN_FLIGHT_BYTES: usize = 64 << 20;
/// A request no reply has answered for this long stops counting as in flight (some protocols answer from
/// another server: a replica group's leader answers a request a follower forwarded, so this server never
/// sees its reply). Beyond a client's own timeout (10 s by default): by then the client has given up.
pub const IN_FLIGHT_EXPIRY: Duration = Duration::from_secs(30);
/// Replies queued for one connection (not yet handed to its socket) before the server stops reading that
/// connection's requests: a client that pipelines requests and never reads its replies stops being read.
pub const MAX_QUEUED_REPLIES: usize = 1024;
/// A connection that is not being read (its reply queue full) and whose client takes none of its replies
/// for this long is dropped.
pub const SLOW_READER_TIMEOUT: Duration = Duration::from_secs(30);
/// How often a connection is checked for a stalled frame: one found incomplete at two checks in a row,
/// with no frame completed in between (so after 10–20 s), closes the connection with an `Error` frame.
pub const PARTIAL_FRAME_TIMEOUT: Duration = Duration::from_secs(10);
/// A connection must send its `Hello` within this long.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// A client connection that sends nothing for this long is closed (the client runtime reconnects on its
/// next request). Long, because a client may wait for a blocked operation that long. Peer links never
/// time out when idle.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(600);
/// After a client half-closes its side (`SHUT_WR`), the server still writes its replies; it closes the
/// connection once no reply has been written for this long.
pub const HALF_CLOSED_LINGER: Duration = Duration::from_secs(5);
/// All connections of a server together may buffer this many bytes of frames that have not fully arrived
/// (beyond [`UNBUDGETED_FRAME_BYTES`] each); a frame that would exceed it is refused with an `Error` frame.
pub const FRAME_BUFFER_BUDGET: usize = 64 << 20;
/// Frames up to this size are read without drawing on the global budget.
pub const UNBUDGETED_FRAME_BYTES: usize = 64 << 10;
/// At most this many warnings about bad connections per [`LOG_WINDOW`]; the rest are counted and summed up.
pub const LOG_BURST: u32 = 10;
pub const LOG_WINDOW: Duration = Duration::from_secs(10);

/// The connection limits of one server: the constants above by default; tests shrink them
/// (`server::run_server_limited`) instead of opening thousands of sockets.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConnLimits {
    /// [`MAX_CONNECTIONS`].
    pub max_connections: usize,
    /// [`PEER_RESERVE`] (at most `max_connections`).
    pub peer_reserve: usize,
    /// [`MAX_CONNECTIONS_PER_SOURCE`].
    pub max_per_source: usize,
    /// [`MAX_HANDSHAKING`] (at least 1).
    pub max_handshaking: usize,
    /// [`MAX_REQUESTS_IN_FLIGHT`] (at least 1).
    pub max_requests_in_flight: usize,
    /// [`MAX_IN_FLIGHT_BYTES`] (at least 1).
    pub max_in_flight_bytes: usize,
    /// [`MAX_SERVER_REQUESTS_IN_FLIGHT`] (at least 1).
    pub max_server_requests_in_flight: usize,
    /// [`MAX_SERVER_IN_FLIGHT_BYTES`] (at least 1).
    pub max_server_in_flight_bytes: usize,
}

impl Default for ConnLimits {
    fn default() -> Self {
        Self {
            max_connections: MAX_CONNECTIONS,
            peer_reserve: PEER_RESERVE,
            max_per_source: MAX_CONNECTIONS_PER_SOURCE,
            max_handshaking: MAX_HANDSHAKING,
            max_requests_in_flight: MAX_REQUESTS_IN_FLIGHT,
            max_in_flight_bytes: MAX_IN_FLIGHT_BYTES,
            max_server_requests_in_flight: MAX_SERVER_REQUESTS_IN_FLIGHT,
            max_server_in_flight_bytes: MAX_SERVER_IN_FLIGHT_BYTES,
        }
    }
}

impl ConnLimits {
    /// Client connections allowed in all: what the peers' reserve leaves.
    pub fn client_allowance(&self) -> usize {
        self.max_connections.saturating_sub(self.peer_reserve)
    }
}

/// The bytes of partially received frames, shared by every connection of a server.
#[derive(Debug, Default)]
pub struct FrameBudget {
    used: AtomicUsize,
    limit: usize,
}

impl FrameBudget {
    pub fn new(limit: usize) -> Arc<Self> {
        Arc::new(Self { used: AtomicUsize::new(0), limit })
    }

    fn reserve(&self, n: usize) -> bool {
        self.used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |u| u.checked_add(n).filter(|t| *t <= self.limit))
            .is_ok()
    }

    fn release(&self, n: usize) {
        self.used.fetch_sub(n, Ordering::AcqRel);
    }

    /// Bytes currently reserved.
    pub fn used(&self) -> usize {
        self.used.load(Ordering::Acquire)
    }
}

/// [`LengthDelimitedCodec`] that reserves a large frame's length from a [`FrameBudget`] as soon as its
/// length prefix arrives, and releases it when the frame is complete or the connection ends.
pub struct BudgetedCodec {
    inner: LengthDelimitedCodec,
    budget: Arc<FrameBudget>,
    reserved: usize,
}

impl BudgetedCodec {
    pub fn new(max_frame: usize, budget: Arc<FrameBudget>) -> Self {
        Self { inner: crate::frame::codec(max_frame), budget, reserved: 0 }
    }

    fn settle(&mut self) {
        if self.reserved > 0 {
            self.budget.release(self.reserved);
            self.reserved = 0;
        }
    }
}

impl Drop for BudgetedCodec {
    fn drop(&mut self) {
        self.settle();
    }
}

impl Decoder for BudgetedCodec {
    type Item = BytesMut;
    type Error = std::io::Error;

    fn decode(&mut self, src: &mut BytesMut) -> Result<Option<BytesMut>, std::io::Error> {
        if self.reserved == 0 && src.len() >= crate::frame::LENGTH_PREFIX {
            let len = u32::from_be_bytes([src[0], src[1], src[2], src[3]]) as usize;
            // Oversized frames are the inner codec's error; only a frame it would read is budgeted.
            if len > UNBUDGETED_FRAME_BYTES && len <= self.inner.max_frame_length() {
                if !self.budget.reserve(len) {
                    return Err(std::io::Error::new(
                        std::io::ErrorKind::OutOfMemory,
                        format!(
                            "a frame of {len} bytes does not fit the server's budget for partly received frames \
                             ({FRAME_BUFFER_BUDGET} bytes over all connections); retry later"
                        ),
                    ));
                }
                self.reserved = len;
                // Reserve the memory now, so a stalled frame cannot make it grow later unaccounted.
            }
        }
        let out = self.inner.decode(src)?;
        if out.is_some() {
            self.settle();
        }
        Ok(out)
    }

    fn decode_eof(&mut self, buf: &mut BytesMut) -> Result<Option<BytesMut>, std::io::Error> {
        match self.decode(buf)? {
            Some(frame) => Ok(Some(frame)),
            None if buf.is_empty() => Ok(None),
            None => Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                format!("the stream ended {} bytes into a frame", buf.len()),
            )),
        }
    }
}

/// What the event loop and a connection's tasks share about what the server owes that connection: the
/// requests it read and has not answered (client connections) and the replies queued for it. This is the
/// connection's memory budget: its reader stops while the budget is spent ([`ConnQueue::over_budget`]).
#[derive(Debug, Default)]
pub struct ConnQueue {
    /// Replies queued and not yet taken by the writer.
    queued: AtomicUsize,
    /// Replies taken by the writer so far (progress, for the slow-reader and linger timeouts).
    taken: AtomicU64,
    /// Requests read and not yet answered, oldest first.
    in_flight: Mutex<InFlight>,
    /// Notified when a request is answered or a reply taken: a reader waiting for room looks again.
    room: tokio::sync::Notify,
    /// The server's requests in flight over all client connections, this one's included.
    total: Arc<InFlightTotal>,
}

/// Requests in flight over all client connections of a server.
#[derive(Debug, Default)]
pub struct InFlightTotal {
    requests: AtomicUsize,
    bytes: AtomicUsize,
}

impl InFlightTotal {
    fn add(&self, requests: usize, bytes: usize) {
        self.requests.fetch_add(requests, Ordering::AcqRel);
        self.bytes.fetch_add(bytes, Ordering::AcqRel);
    }

    fn sub(&self, requests: usize, bytes: usize) {
        self.requests.fetch_sub(requests, Ordering::AcqRel);
        self.bytes.fetch_sub(bytes, Ordering::AcqRel);
    }

    /// Requests in flight and their bytes.
    pub fn get(&self) -> (usize, usize) {
        (self.requests.load(Ordering::Acquire), self.bytes.load(Ordering::Acquire))
    }
}

#[derive(Debug, Default)]
struct InFlight {
    /// When each request was read, and its frame's size.
    requests: VecDeque<(Instant, usize)>,
    bytes: usize,
}

impl InFlight {
    fn expire(&mut self, now: Instant, total: &InFlightTotal) {
        while let Some(&(at, n)) = self.requests.front() {
            if now.saturating_duration_since(at) < IN_FLIGHT_EXPIRY {
                break;
            }
            self.requests.pop_front();
            self.bytes -= n;
            total.sub(1, n);
        }
    }
}

impl Drop for ConnQueue {
    fn drop(&mut self) {
        let f = self.lock();
        self.total.sub(f.requests.len(), f.bytes);
    }
}

impl ConnQueue {
    /// The queue of one connection of a server whose requests in flight are counted in `total`.
    pub fn new(total: Arc<InFlightTotal>) -> Self {
        Self {
            queued: AtomicUsize::new(0),
            taken: AtomicU64::new(0),
            in_flight: Mutex::default(),
            room: tokio::sync::Notify::new(),
            total,
        }
    }

    pub fn queued(&self) -> usize {
        self.queued.load(Ordering::Acquire)
    }

    pub fn taken(&self) -> u64 {
        self.taken.load(Ordering::Acquire)
    }

    pub fn push(&self) {
        self.queued.fetch_add(1, Ordering::AcqRel);
    }

    pub fn pop(&self) {
        // Saturating: frames queued by others than the event loop (Error frames) are not counted.
        let _ = self.queued.fetch_update(Ordering::AcqRel, Ordering::Acquire, |q| q.checked_sub(1));
        self.taken.fetch_add(1, Ordering::AcqRel);
        self.room.notify_one();
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, InFlight> {
        self.in_flight.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A request of `bytes` was read at `now` (before it is handed to the event loop).
    pub fn request(&self, now: Instant, bytes: usize) {
        let mut f = self.lock();
        f.requests.push_back((now, bytes));
        f.bytes += bytes;
        self.total.add(1, bytes);
    }

    /// A frame went to this connection's client: it answers the oldest request in flight (requests answered
    /// twice, or not at all, are no error: the count saturates, and [`IN_FLIGHT_EXPIRY`] ends the rest).
    pub fn answered(&self) {
        let mut f = self.lock();
        if let Some((_, n)) = f.requests.pop_front() {
            f.bytes -= n;
            self.total.sub(1, n);
        }
        drop(f);
        self.room.notify_one();
    }

    /// Requests in flight and their bytes (expired ones left out).
    pub fn in_flight(&self) -> (usize, usize) {
        let mut f = self.lock();
        f.expire(Instant::now(), &self.total);
        (f.requests.len(), f.bytes)
    }

    /// Whether the connection's budget is spent: its reader must wait for room.
    pub fn over_budget(&self, limits: &ConnLimits) -> bool {
        let (requests, bytes) = self.in_flight();
        requests + self.queued() >= limits.max_requests_in_flight.max(1)
            || bytes >= limits.max_in_flight_bytes.max(1)
            || self.server_over_budget(limits)
    }

    /// Whether the server's budget (over all client connections) is spent.
    pub fn server_over_budget(&self, limits: &ConnLimits) -> bool {
        let (requests, bytes) = self.total.get();
        requests >= limits.max_server_requests_in_flight.max(1) || bytes >= limits.max_server_in_flight_bytes.max(1)
    }

    /// Whether the server still owes this connection anything: a request unanswered or a reply not taken.
    pub fn owes(&self) -> bool {
        self.queued() > 0 || self.in_flight().0 > 0
    }

    /// Wait until a request is answered or a reply taken (or `at_most` passed: expiry needs no event).
    pub async fn changed(&self, at_most: Duration) {
        let _ = tokio::time::timeout(at_most, self.room.notified()).await;
    }
}

/// Warnings about bad connections, at most [`LOG_BURST`] per [`LOG_WINDOW`]; the rest are counted and
/// reported in one line when the next window opens.
pub struct RateLimitedLog {
    state: Mutex<(Instant, u32, u64)>,
}

impl Default for RateLimitedLog {
    fn default() -> Self {
        Self { state: Mutex::new((Instant::now(), 0, 0)) }
    }
}

impl RateLimitedLog {
    pub fn warn(&self, line: impl FnOnce() -> String) {
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let (start, shown, suppressed) = &mut *s;
        if start.elapsed() >= LOG_WINDOW {
            if *suppressed > 0 {
                eprintln!("warning: {suppressed} more warnings about bad connections were not shown");
            }
            *start = Instant::now();
            *shown = 0;
            *suppressed = 0;
        }
        if *shown < LOG_BURST {
            *shown += 1;
            eprintln!("warning: {}", line());
        } else {
            *suppressed += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::BufMut;

    #[test]
    fn large_frames_draw_on_the_shared_budget_until_complete() {
        let budget = FrameBudget::new(300_000);
        let mut a = BudgetedCodec::new(1 << 20, budget.clone());
        let mut b = BudgetedCodec::new(1 << 20, budget.clone());
        let mut buf_a = BytesMut::new();
        buf_a.put_u32(200_000);
        buf_a.put_slice(&[1; 1000]);
        assert!(a.decode(&mut buf_a).unwrap().is_none());
        assert_eq!(budget.used(), 200_000);
        let mut buf_b = BytesMut::new();
        buf_b.put_u32(200_000);
        let err = b.decode(&mut buf_b).unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::OutOfMemory, "{err}");
        // Completing a frame returns its reservation; so does dropping a connection.
        buf_a.put_slice(&vec![2; 199_000]);
        assert_eq!(a.decode(&mut buf_a).unwrap().map(|f| f.len()), Some(200_000));
        assert_eq!(budget.used(), 0);
        let mut buf_b = BytesMut::new();
        buf_b.put_u32(200_000);
        assert!(b.decode(&mut buf_b).unwrap().is_none());
        assert_eq!(budget.used(), 200_000);
        drop(b);
        assert_eq!(budget.used(), 0);
        // Small frames are not budgeted.
        let mut buf = BytesMut::new();
        buf.put_u32(10);
        assert!(a.decode(&mut buf).unwrap().is_none());
        assert_eq!(budget.used(), 0);
    }

    #[test]
    fn truncated_frame_at_eof_is_unexpected_eof() {
        let mut c = BudgetedCodec::new(1 << 20, FrameBudget::new(1 << 20));
        let mut buf = BytesMut::new();
        buf.put_u32(10);
        buf.put_slice(b"abc");
        let err = c.decode_eof(&mut buf).unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::UnexpectedEof);
        assert!(c.decode_eof(&mut BytesMut::new()).unwrap().is_none());
    }

    #[test]
    fn requests_in_flight_and_queued_replies_share_one_budget() {
        let limits = ConnLimits { max_requests_in_flight: 3, max_in_flight_bytes: 100, ..ConnLimits::default() };
        let q = ConnQueue::default();
        let now = Instant::now();
        q.request(now, 10);
        q.request(now, 10);
        assert!(!q.over_budget(&limits) && q.owes());
        q.push();
        assert!(q.over_budget(&limits), "two in flight and one queued");
        q.pop();
        q.answered();
        assert_eq!(q.in_flight(), (1, 10));
        assert!(!q.over_budget(&limits));
        q.request(now, 200);
        assert!(q.over_budget(&limits), "bytes");
        q.answered();
        q.answered();
        q.answered();
        assert_eq!(q.in_flight(), (0, 0));
        assert!(!q.owes());
        // A request never answered stops counting after IN_FLIGHT_EXPIRY.
        q.request(now - IN_FLIGHT_EXPIRY, 10);
        assert_eq!(q.in_flight(), (0, 0));
    }

    #[test]
    fn the_server_budget_spans_connections() {
        let limits = ConnLimits { max_server_requests_in_flight: 3, ..ConnLimits::default() };
        let total = Arc::new(InFlightTotal::default());
        let (a, b) = (ConnQueue::new(total.clone()), ConnQueue::new(total.clone()));
        let now = Instant::now();
        a.request(now, 5);
        a.request(now, 5);
        assert!(!b.over_budget(&limits));
        b.request(now, 7);
        assert!(a.over_budget(&limits) && b.over_budget(&limits));
        assert_eq!(total.get(), (3, 17));
        drop(a);
        assert_eq!(total.get(), (1, 7), "a connection's end releases what it had in flight");
        b.answered();
        assert_eq!(total.get(), (0, 0));
    }

    #[test]
    fn reply_queue_counts_saturate() {
        let q = ConnQueue::default();
        q.push();
        q.pop();
        q.pop();
        assert_eq!((q.queued(), q.taken()), (0, 2));
    }
}
