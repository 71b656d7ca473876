//! Connection plumbing shared by the server and the client runtime: batching writers with an emulated-latency
//! delay queue, and outbound peer links that connect lazily and reconnect with backoff.

use crate::faults::LinkFaults;
use crate::frame::{self, Frame};
use crate::limits::{ConnQueue, HANDSHAKE_TIMEOUT};
use crate::tls::Dial;
use bytes::{Buf, BytesMut};
use futures::StreamExt;
use rand::{Rng, SeedableRng};
use snowline_core::{Addr, Message};
use std::collections::VecDeque;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::mpsc::{self, UnboundedReceiver, UnboundedSender, error::TryRecvError};
use tokio::time::{Duration, Instant, sleep, sleep_until};
use tokio_util::codec::FramedRead;

/// A frame queued for writing, stamped with when it was sent (the delay queue adds the link latency).
pub(crate) type Out<M> = (Instant, Frame<M>);
/// The sending side of a connection's write queue.
pub(crate) type OutTx<M> = UnboundedSender<Out<M>>;

/// The reading half of a connection, plain TCP or TLS.
pub(crate) type ReadHalf = Box<dyn AsyncRead + Send + Unpin>;
/// The writing half of a connection, plain TCP or TLS.
pub(crate) type WriteHalf = Box<dyn AsyncWrite + Send + Unpin>;

/// Split a plain TCP connection.
pub(crate) fn split_tcp(stream: TcpStream) -> (ReadHalf, WriteHalf) {
    let (rd, wr) = stream.into_split();
    (Box::new(rd), Box::new(wr))
}

/// Split a TLS connection (either side).
pub(crate) fn split_tls<S: AsyncRead + AsyncWrite + Send + 'static>(stream: S) -> (ReadHalf, WriteHalf) {
    let (rd, wr) = tokio::io::split(stream);
    (Box::new(rd), Box::new(wr))
}

/// Connect to `addr`, with TLS when `dial` says so (verifying the node it names).
async fn connect(addr: &str, dial: Option<&Dial>) -> std::io::Result<(ReadHalf, WriteHalf)> {
    let stream = TcpStream::connect(addr).await?;
    let _ = stream.set_nodelay(true);
    let Some(dial) = dial else { return Ok(split_tcp(stream)) };
    match tokio::time::timeout(HANDSHAKE_TIMEOUT, dial.connector.connect(dial.name.clone(), stream)).await {
        Ok(Ok(tls)) => Ok(split_tls(tls)),
        Ok(Err(e)) => Err(std::io::Error::new(e.kind(), format!("TLS handshake with {addr} failed: {e}"))),
        Err(_) => Err(std::io::Error::new(std::io::ErrorKind::TimedOut, "TLS handshake timed out")),
    }
}

/// Write at most this many bytes per `write_all` before looking at the queue again.
const MAX_BATCH_BYTES: usize = 1 << 20;

/// How a write loop ended.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum WriteEnd {
    /// Every sender was dropped and everything queued was written.
    Drained,
    /// The connection broke or `stop` resolved; `pending` keeps what was not yet written.
    Broken,
}

/// Write queued frames to `wr`: drain everything available, encode it into one buffer, write it with one
/// call (batching is what makes throughput), repeat. A frame is held until `delay` after its stamp; the
/// delay is constant per connection so order is kept. When every sender is gone, the rest is written at
/// once (ignoring the delay) and the write half is shut down. `taken` counts the frames taken from the
/// queue (one atomic add per batch: the owner's metrics compare it with what it queued).
#[allow(clippy::too_many_arguments)]
pub(crate) async fn write_loop<M: Message>(
    wr: &mut WriteHalf,
    rx: &mut UnboundedReceiver<Out<M>>,
    pending: &mut VecDeque<Out<M>>,
    delay: Duration,
    max_frame: usize,
    label: &str,
    queue: Option<&ConnQueue>,
    taken: Option<&AtomicU64>,
    faults: Option<&LinkFaults>,
    stop: impl Future<Output = ()>,
) -> WriteEnd {
    let mut stop = std::pin::pin!(stop);
    let mut buf = BytesMut::with_capacity(64 * 1024);
    let mut closed = false;
    let base_delay = delay;
    let mut loss_rng: Option<rand::rngs::SmallRng> = None;
    loop {
        while !closed {
            match rx.try_recv() {
                Ok(item) => pending.push_back(item),
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Disconnected) => closed = true,
            }
        }
        // A nemesis's partition holds every frame back until it heals; its extra delay adds to the latency;
        // a reset throws away what is queued and closes the connection; loss drops frames on their way.
        let (cut, delay, loss) = match faults {
            Some(f) => {
                let state = f.faults.for_link(f);
                if state.reset {
                    eprintln!("{label}: nemesis: connection reset, {} queued frames lost", pending.len());
                    pending.clear();
                    return WriteEnd::Broken;
                }
                (state.cut, base_delay + state.delay, state.loss)
            }
            None => (false, base_delay, 0.0),
        };
        let now = Instant::now();
        let mut batch = 0;
        while let Some((stamp, _)) = pending.front() {
            if cut || !(closed || delay.is_zero() || *stamp + delay <= now) || buf.len() >= MAX_BATCH_BYTES {
                break;
            }
            let (_, f) = pending.pop_front().expect("front exists");
            batch += 1;
            if let Some(q) = queue {
                q.pop();
            }
            if loss > 0.0 && loss_rng.get_or_insert_with(rand::rngs::SmallRng::from_os_rng).random::<f64>() < loss {
                continue;
            }
            if let Err(e) = frame::encode_into(&f, max_frame, &mut buf) {
                eprintln!("warning: {label}: dropping an outgoing {}: {e}", describe(&f));
            }
        }
        if let (Some(t), 1..) = (taken, batch) {
            t.fetch_add(batch, Ordering::Relaxed);
        }
        if !buf.is_empty() {
            let res = tokio::select! {
                biased;
                r = wr.write_all(&buf) => r,
                _ = &mut stop => return WriteEnd::Broken,
            };
            if let Err(e) = res {
                eprintln!("warning: {label}: write failed, {} bytes of frames lost: {e}", buf.len());
                return WriteEnd::Broken;
            }
            buf.clear();
            continue;
        }
        if closed && pending.is_empty() {
            let _ = wr.shutdown().await;
            return WriteEnd::Drained;
        }
        let wake = if cut || faults.is_some_and(|_| !pending.is_empty()) {
            // Faults change under a waiting link: look again soon.
            Some(now + crate::faults::POLL)
        } else {
            pending.front().map(|(stamp, _)| *stamp + delay)
        };
        tokio::select! {
            biased;
            _ = &mut stop => return WriteEnd::Broken,
            item = rx.recv(), if !closed => match item {
                Some(item) => pending.push_back(item),
                None => closed = true,
            },
            _ = sleep_until(wake.unwrap_or_else(Instant::now)), if wake.is_some() => {}
        }
    }
}

/// The write side of a plain TCP connection to a client, shared by its writer task and the server's event
/// loop: the event loop writes a reply in place when nothing waits ahead of it (no task hand-off on the way
/// out), and the writer task writes what was queued and what a full socket left over. Every write happens
/// under `buf`'s lock, so bytes never interleave, and frames keep their order (see [`SharedWrite::write_now`]).
pub(crate) struct SharedWrite {
    half: tokio::net::tcp::OwnedWriteHalf,
    /// Encoded frames not yet written.
    buf: std::sync::Mutex<Buffered>,
    /// Wakes the writer task: `buf` holds what a full socket left over.
    wake: tokio::sync::Notify,
}

/// A [`SharedWrite`]'s bytes not yet written, and whether they are corked replies (appended by
/// [`SharedWrite::write_now`], not yet tried on the socket) rather than what a full socket left over.
#[derive(Default)]
struct Buffered {
    bytes: BytesMut,
    corked: bool,
}

impl SharedWrite {
    pub(crate) fn new(half: tokio::net::tcp::OwnedWriteHalf) -> Self {
        Self { half, buf: std::sync::Mutex::new(Buffered::default()), wake: tokio::sync::Notify::new() }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Buffered> {
        self.buf.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Write as much of `buf` as the socket takes now.
    fn flush(&self, buf: &mut BytesMut) -> std::io::Result<()> {
        while !buf.is_empty() {
            match self.half.try_write(buf) {
                Ok(n) => buf.advance(n),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Take `frame` for writing now, if nothing waits ahead of it: none of the connection's queued frames
    /// (`queue` counts what was queued and not yet taken by the writer task, which takes a frame into `buf`
    /// under the same lock) and nothing a full socket left in `buf`. The frame is corked: appended to what
    /// this turn already answered on the connection, written by [`SharedWrite::uncork`] once the turn is
    /// over, so a burst of requests read in one go is answered in one write. `None`: queue it instead;
    /// `Some(true)`: the first corked frame since the last uncork (the caller must uncork this writer).
    pub(crate) fn write_now<M: Message>(
        &self,
        frame: &Frame<M>,
        max_frame: usize,
        queue: &ConnQueue,
        label: &str,
    ) -> Option<bool> {
        let mut buf = self.lock();
        if (!buf.bytes.is_empty() && !buf.corked) || queue.queued() > 0 {
            return None;
        }
        if let Err(e) = frame::encode_into(frame, max_frame, &mut buf.bytes) {
            eprintln!("warning: {label}: dropping an outgoing {}: {e}", describe(frame));
            return Some(false);
        }
        // Queued and taken at once: the slow-reader and linger checks see the progress.
        queue.push();
        queue.pop();
        Some(!std::mem::replace(&mut buf.corked, true))
    }

    /// Write the corked frames as far as the socket takes them; what it does not take now is left for the
    /// writer task (a write error too).
    pub(crate) fn uncork(&self) {
        let mut buf = self.lock();
        if !buf.corked {
            return;
        }
        buf.corked = false;
        let _ = self.flush(&mut buf.bytes);
        if !buf.bytes.is_empty() {
            self.wake.notify_one();
        }
    }
}

/// [`write_loop`] for a [`SharedWrite`] (no emulated latency: a client connection): takes queued frames into
/// the shared buffer and writes it, waiting for the socket when it is full. When every sender is gone and
/// everything is written it returns `Drained` (the write half shuts down when the last holder drops it).
pub(crate) async fn shared_write_loop<M: Message>(
    w: &SharedWrite,
    rx: &mut UnboundedReceiver<Out<M>>,
    max_frame: usize,
    label: &str,
    queue: &ConnQueue,
) -> WriteEnd {
    let mut closed = false;
    let mut next: Option<Out<M>> = None;
    loop {
        let waiting = {
            let mut guard = w.lock();
            // What the writer task takes is written now: corked frames ahead of it go with it.
            guard.corked = false;
            let buf = &mut guard.bytes;
            let take = |f: Frame<M>, buf: &mut BytesMut| {
                queue.pop();
                if let Err(e) = frame::encode_into(&f, max_frame, buf) {
                    eprintln!("warning: {label}: dropping an outgoing {}: {e}", describe(&f));
                }
            };
            if let Some((_, f)) = next.take() {
                take(f, buf);
            }
            while !closed && buf.len() < MAX_BATCH_BYTES {
                match rx.try_recv() {
                    Ok((_, f)) => take(f, buf),
                    Err(TryRecvError::Empty) => break,
                    Err(TryRecvError::Disconnected) => closed = true,
                }
            }
            if let Err(e) = w.flush(buf) {
                eprintln!("warning: {label}: write failed, {} bytes of frames lost: {e}", buf.len());
                return WriteEnd::Broken;
            }
            !buf.is_empty()
        };
        if closed && !waiting {
            return WriteEnd::Drained;
        }
        tokio::select! {
            biased;
            r = w.half.writable(), if waiting => {
                if let Err(e) = r {
                    eprintln!("warning: {label}: write failed: {e}");
                    return WriteEnd::Broken;
                }
            }
            item = rx.recv(), if !closed && !waiting => match item {
                Some(item) => next = Some(item),
                None => closed = true,
            },
            _ = w.wake.notified() => {}
        }
    }
}

fn describe<M: Message>(f: &Frame<M>) -> String {
    match f {
        Frame::Msg { from, to, msg } => format!("{} message {from} -> {to}", msg.kind()),
        Frame::Hello { .. } => "hello".into(),
        Frame::Error { .. } => "error frame".into(),
        Frame::Seq { from, to, seq, msg, .. } => format!("{} message {from} -> {to} (#{seq})", msg.kind()),
        Frame::Ack { from, to, seq, .. } => format!("ack {from} -> {to} (#{seq})"),
        Frame::Refused { client, .. } => format!("refusal to {client}"),
        Frame::Unanswerable { client, .. } => format!("news of an unsendable reply to {client}"),
    }
}

/// What a peer link's reader reports to its owner (the client driver).
pub(crate) enum NetIn<M> {
    Msg {
        from: Addr,
        to: Addr,
        msg: M,
    },
    /// The server did not take client `client`'s last request (`Frame::Refused`).
    Refused {
        /// The node that refused.
        peer: usize,
        client: snowline_core::ClientId,
        message: String,
    },
    /// The server could not send client `client` its reply (`Frame::Unanswerable`).
    Unanswerable {
        client: snowline_core::ClientId,
        message: String,
    },
    /// The link to peer `peer` broke or could not be established.
    Down {
        peer: usize,
        reason: String,
    },
}

/// Everything a lazily connected outbound link needs.
pub(crate) struct PeerSpec<M> {
    /// Index of the peer node (reported in [`NetIn::Down`]).
    pub peer: usize,
    pub addr: String,
    /// For messages: "dc0/p1 -> node 3 (127.0.0.1:7103)".
    pub label: String,
    pub hello: Frame<M>,
    /// Emulated latency of frames written on this link.
    pub write_delay: Duration,
    /// Emulated latency of frames read from this link (client runtime: replies from a remote dc).
    pub read_delay: Duration,
    pub max_frame: usize,
    /// Where frames read back are forwarded; `None`: only `Error` frames are logged.
    pub inbound: Option<UnboundedSender<NetIn<M>>>,
    /// TLS: how to prove who we are (a server) and check the node reached; `None`: plain TCP.
    pub dial: Option<Dial>,
    /// Counts the frames taken from the link's queue (`write_loop`'s `taken`), for the server's metrics.
    pub taken: Option<Arc<AtomicU64>>,
    /// Connect at once instead of on the first frame (a client that must be reachable by a server it has
    /// not sent to yet).
    pub eager: bool,
    /// A nemesis's faults on this link (`crate::faults`); `None` for every real cluster.
    pub faults: Option<LinkFaults>,
}

/// Start an outbound link; returns its queue. The task connects on the first frame, sends `Hello` first on
/// every connection, keeps frames queued while disconnected and reconnects with exponential backoff.
/// It ends when every sender is dropped and the queue is written (or when aborted).
pub(crate) fn spawn_peer<M: Message>(tasks: &mut tokio::task::JoinSet<()>, spec: PeerSpec<M>) -> OutTx<M> {
    let (tx, rx) = mpsc::unbounded_channel();
    tasks.spawn(peer_task(spec, rx));
    tx
}

/// How an outbound link (a server's peer link, a client's link) redials: exponential backoff between
/// attempts (20 ms doubling to 1 s, short again after a connection that lasted), one warning per outage
/// and a line when it ends.
pub(crate) struct Redial {
    backoff: Duration,
    failing: bool,
    connected_at: Option<Instant>,
}

impl Redial {
    pub(crate) fn new() -> Self {
        Redial { backoff: Duration::from_millis(20), failing: false, connected_at: None }
    }

    /// A connection attempt failed. An outage that matters (frames wait) is warned about once; true the
    /// first time, when the caller reports the link down.
    pub(crate) fn failed(&mut self, label: &str, e: &std::io::Error, frames_wait: bool) -> bool {
        if !frames_wait {
            // An eager link with nothing to send (a server that may answer this client) is not worth a
            // warning; the first frame queued on it is.
            return false;
        }
        let first = !self.failing;
        if first {
            eprintln!("warning: {label}: cannot connect ({e}); queueing and retrying");
        }
        self.failing = true;
        first
    }

    pub(crate) fn connected(&mut self, label: &str) {
        if self.failing {
            eprintln!("{label}: connected");
        }
        self.failing = false;
        self.connected_at = Some(Instant::now());
    }

    /// Wait before the next attempt. A peer that keeps closing right away (e.g. refusing our protocol) is
    /// retried ever more slowly.
    pub(crate) async fn pause(&mut self) {
        if self.connected_at.take().is_some_and(|t| t.elapsed() > Duration::from_secs(1)) {
            self.backoff = Duration::from_millis(20);
        }
        sleep(self.backoff).await;
        self.backoff = (self.backoff * 2).min(Duration::from_secs(1));
    }
}

/// What an outbound link does with a frame a server sent back: a message or refusal for the client state
/// (`Some`); an `Error` frame is logged; sequenced frames and acknowledgements never go to clients.
pub(crate) fn for_client<M>(frame: Frame<M>, peer: usize, label: &str) -> Option<NetIn<M>> {
    match frame {
        Frame::Msg { from, to, msg } => Some(NetIn::Msg { from, to, msg }),
        Frame::Refused { client, message } => Some(NetIn::Refused { peer, client, message }),
        Frame::Unanswerable { client, message } => Some(NetIn::Unanswerable { client, message }),
        // A server says why it closes the connection, or why it refused one message.
        Frame::Error { message } => {
            eprintln!("warning: {label}: peer reports: {message}");
            None
        }
        Frame::Hello { .. } | Frame::Seq { .. } | Frame::Ack { .. } => None,
    }
}

async fn peer_task<M: Message>(spec: PeerSpec<M>, mut rx: UnboundedReceiver<Out<M>>) {
    let mut pending: VecDeque<Out<M>> = VecDeque::new();
    let mut redial = Redial::new();
    let mut eager = spec.eager;
    loop {
        if pending.is_empty() && !std::mem::take(&mut eager) {
            match rx.recv().await {
                Some(item) => pending.push_back(item),
                None => return,
            }
        }
        let (rd, mut wr) = match connect(&spec.addr, spec.dial.as_ref()).await {
            Ok(halves) => halves,
            Err(e) => {
                if redial.failed(&spec.label, &e, !pending.is_empty())
                    && let Some(inbound) = &spec.inbound
                {
                    let reason = format!("cannot connect to {}: {e}", spec.label);
                    let _ = inbound.send(NetIn::Down { peer: spec.peer, reason });
                }
                redial.pause().await;
                continue;
            }
        };
        redial.connected(&spec.label);
        let mut hello = BytesMut::new();
        frame::encode_into(&spec.hello, spec.max_frame, &mut hello).expect("a hello fits in any frame");
        if let Err(e) = wr.write_all(&hello).await {
            eprintln!("warning: {}: handshake failed: {e}", spec.label);
            redial.pause().await;
            continue;
        }
        let reader = tokio::spawn(read_peer(
            rd,
            spec.peer,
            spec.label.clone(),
            spec.max_frame,
            spec.read_delay,
            spec.inbound.clone(),
        ));
        let abort = reader.abort_handle();
        let end = write_loop(
            &mut wr,
            &mut rx,
            &mut pending,
            spec.write_delay,
            spec.max_frame,
            &spec.label,
            None,
            spec.taken.as_deref(),
            spec.faults.as_ref(),
            async {
                let _ = reader.await;
            },
        )
        .await;
        abort.abort();
        if end == WriteEnd::Drained {
            return;
        }
        if let Some(inbound) = &spec.inbound {
            let reason = format!("connection to {} lost", spec.label);
            let _ = inbound.send(NetIn::Down { peer: spec.peer, reason });
        }
        redial.pause().await;
    }
}

/// Read what a peer sends back on an outbound link: `Error` frames are logged, messages forwarded (held
/// for `delay` first). Returns when the connection closes or fails.
async fn read_peer<M: Message>(
    rd: ReadHalf,
    peer: usize,
    label: String,
    max_frame: usize,
    delay: Duration,
    inbound: Option<UnboundedSender<NetIn<M>>>,
) {
    let mut frames = FramedRead::new(rd, frame::codec(max_frame));
    let mut held: VecDeque<(Instant, NetIn<M>)> = VecDeque::new();
    loop {
        let wake = held.front().map(|(due, _)| *due);
        let next = tokio::select! {
            biased;
            _ = sleep_until(wake.unwrap_or_else(Instant::now)), if wake.is_some() => {
                let now = Instant::now();
                while held.front().is_some_and(|(due, _)| *due <= now) {
                    let (_, m) = held.pop_front().expect("front exists");
                    if let Some(inbound) = &inbound {
                        let _ = inbound.send(m);
                    }
                }
                continue;
            }
            next = frames.next() => next,
        };
        let bytes = match next {
            None => break,
            Some(Ok(b)) => b,
            Some(Err(e)) => {
                eprintln!("warning: {label}: closing connection: {e}");
                break;
            }
        };
        let m = match frame::decode::<M>(&bytes).map(|f| for_client(f, peer, &label)) {
            Ok(Some(m)) => m,
            Ok(None) => continue,
            Err(e) => {
                eprintln!("warning: {label}: closing connection: {e}");
                break;
            }
        };
        let Some(inbound) = &inbound else { continue };
        if delay.is_zero() {
            let _ = inbound.send(m);
        } else {
            held.push_back((Instant::now() + delay, m));
        }
    }
    // Messages already received are still delivered, after their emulated latency.
    if let (Some((due, _)), Some(inbound)) = (held.back(), &inbound) {
        sleep_until(*due).await;
        for (_, m) in held {
            let _ = inbound.send(m);
        }
    }
}
