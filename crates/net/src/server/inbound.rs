//! Inbound connections: the accept loop, each connection's authentication (`crate::tls`) and handshake, and
//! its reader, which hands frames to the event loop ([`Handoff`]) under the admission and in-flight
//! limits (`crate::limits`, `crate::admission`).

use super::*;

pub(super) async fn accept_loop<P: Protocol>(
    listener: TcpListener,
    handoff: Handoff<P>,
    max_frame: usize,
    mut stop: tokio::sync::oneshot::Receiver<()>,
    shared: Arc<Shared>,
) {
    // Connection tasks live in this set: aborting the accept task closes every inbound connection.
    let mut conns = JoinSet::new();
    let mut next_conn = 0u64;
    loop {
        let accepted = tokio::select! {
            biased;
            _ = &mut stop => break,
            Some(_) = conns.join_next(), if !conns.is_empty() => {
                shared.open_conns.store(conns.len(), Ordering::Relaxed);
                continue;
            }
            a = listener.accept() => a,
        };
        match accepted {
            Ok((stream, peer)) => {
                let _ = stream.set_nodelay(true);
                next_conn += 1;
                // Admission waits for the Hello (`Slot::admit`); until then the connection holds one of the
                // handshake slots, and a full table closes its oldest.
                let (slot, evicted) = shared.admission.arrive(next_conn, peer.ip());
                if evicted {
                    shared.log.warn(|| {
                        format!(
                            "{} connections are before their Hello: closed the oldest to take one from {peer}",
                            shared.limits.max_handshaking
                        )
                    });
                }
                let serve = serve_conn::<P>(stream, peer, next_conn, slot, handoff.clone(), max_frame, shared.clone());
                let handle = conns.spawn(serve);
                shared.admission.started(next_conn, handle);
                shared.open_conns.store(conns.len(), Ordering::Relaxed);
            }
            Err(e) => {
                // Typically out of file descriptors: back off instead of spinning.
                shared.log.warn(|| format!("accept failed: {e}"));
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
    drop(listener);
    // Keep serving established connections until aborted (shutdown lets them flush meanwhile).
    while conns.join_next().await.is_some() {}
}

/// How a connection's reader ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ReadEnd {
    /// The client closed its side cleanly (EOF between frames): its replies are still written.
    HalfClosed,
    /// A bad frame, a timeout, a failed read or the event loop gone: close now.
    Closed,
}

/// One inbound connection: authentication (`crate::tls`), handshake, then frames into the inbox; replies
/// to clients are written by a batching writer running alongside. See `limits` for the bounds and timeouts.
///
/// Security: the `Hello` must fit what authentication found (`Shared::admit`: only a connection with a
/// node's certificate may speak for that node's servers), every message's `from` must fit the `Hello`
/// (`EventLoop::check_sender`), and servers validate every message against the topology
/// (`snowline_core::validate`).
#[allow(clippy::too_many_arguments)]
async fn serve_conn<P: Protocol>(
    stream: TcpStream,
    peer: SocketAddr,
    conn: u64,
    mut slot: Slot,
    handoff: Handoff<P>,
    max_frame: usize,
    shared: Arc<Shared>,
) {
    let label = format!("connection from {peer}");
    let Some((rd, wr, caller)) = authenticate(stream, &label, &shared).await else { return };
    let (tx, mut rx) = mpsc::unbounded_channel();
    let queue = Arc::new(ConnQueue::new(shared.in_flight.clone()));
    let mut pending = VecDeque::new();
    let mut registered = false;
    let (direct, mut boxed) = match wr {
        Writer::Plain(half) => (Some(Arc::new(SharedWrite::new(half))), None),
        Writer::Tls(half) => (None, Some(half)),
    };
    let mut writer: std::pin::Pin<Box<dyn Future<Output = conn::WriteEnd> + Send + '_>> = match (&direct, &mut boxed) {
        (Some(w), _) => Box::pin(conn::shared_write_loop(w, &mut rx, max_frame, &label, &queue)),
        (None, Some(wr)) => Box::pin(conn::write_loop(
            wr,
            &mut rx,
            &mut pending,
            Duration::ZERO,
            max_frame,
            &label,
            Some(&queue),
            None,
            None,
            std::future::pending(),
        )),
        (None, None) => unreachable!("one of the two"),
    };
    let reader = read_conn::<P>(
        rd,
        &label,
        caller,
        conn,
        &tx,
        &queue,
        direct.as_ref(),
        &handoff,
        max_frame,
        &shared,
        &mut slot,
        &mut registered,
    );
    // The writer future must not be polled again once it has completed.
    let (end, mut writer_done) = tokio::select! {
        end = reader => (end, false),
        _ = &mut writer => (ReadEnd::Closed, true),
    };
    // The reader may have stopped with replies corked (`Handoff::deliver`).
    handoff.uncork();
    if end == ReadEnd::HalfClosed && registered && !writer_done {
        // A client that shut down its sending side still gets the replies it is owed (requests in flight,
        // replies queued): the connection stays registered while it is owed some and they keep coming (no
        // socket lingers in CLOSE-WAIT once nothing is owed), for at most HALF_CLOSED_LINGER without one.
        let (mut taken, mut since) = (queue.taken(), Instant::now());
        while queue.owes() && since.elapsed() < HALF_CLOSED_LINGER {
            tokio::select! {
                _ = &mut writer => {
                    writer_done = true;
                    break;
                }
                _ = queue.changed(HALF_CLOSED_LINGER.saturating_sub(since.elapsed())) => {
                    if queue.taken() != taken {
                        (taken, since) = (queue.taken(), Instant::now());
                    }
                }
            }
        }
    }
    if registered {
        handoff.deliver(Inbound::Closed { conn }, false).await;
    }
    drop(tx);
    if !writer_done {
        // Write what is still queued (an Error frame, replies), then close.
        let _ = tokio::time::timeout(Duration::from_secs(1), writer).await;
    }
}

/// Tell a TLS connection from a plain one by its first byte and complete a TLS handshake: the halves
/// and who the caller is, or `None` if the connection closed or its handshake failed (logged).
/// The write side of an inbound connection: plain TCP's is shared with the event loop.
enum Writer {
    Plain(tokio::net::tcp::OwnedWriteHalf),
    Tls(WriteHalf),
}

async fn authenticate(stream: TcpStream, label: &str, shared: &Shared) -> Option<(ReadHalf, Writer, Caller)> {
    let mut first = [0u8; 1];
    match tokio::time::timeout(HANDSHAKE_TIMEOUT, stream.peek(&mut first)).await {
        Ok(Ok(0)) => return None,
        Ok(Err(e)) => {
            shared.log.warn(|| format!("{label}: read failed: {e}"));
            return None;
        }
        // Silent so far: read_conn's handshake timeout closes it with an Error frame.
        Ok(Ok(_)) | Err(_) => {}
    }
    if first[0] != TLS_HANDSHAKE_BYTE {
        let (rd, wr) = stream.into_split();
        return Some((Box::new(rd), Writer::Plain(wr), Caller::PlainClient));
    }
    let Some(tls) = &shared.tls else {
        shared.log.warn(|| {
            format!("{label}: closing connection: it starts a TLS handshake, but this cluster is insecure (no [tls])")
        });
        return None;
    };
    match tokio::time::timeout(HANDSHAKE_TIMEOUT, tls.acceptor.accept(stream)).await {
        Ok(Ok(stream)) => {
            let caller = match tls.identify(stream.get_ref().1.peer_certificates()) {
                Some(node) => Caller::Node(node),
                None => Caller::TlsClient,
            };
            let (rd, wr) = conn::split_tls(stream);
            Some((rd, Writer::Tls(wr), caller))
        }
        Ok(Err(e)) => {
            shared.log.warn(|| format!("{label}: closing connection: TLS handshake failed: {e}"));
            None
        }
        Err(_) => {
            shared.log.warn(|| format!("{label}: closing connection: no TLS handshake within {HANDSHAKE_TIMEOUT:?}"));
            None
        }
    }
}

#[allow(clippy::too_many_arguments)]
async fn read_conn<P: Protocol>(
    rd: ReadHalf,
    label: &str,
    caller: Caller,
    conn: u64,
    tx: &OutTx<P::Msg>,
    queue: &Arc<ConnQueue>,
    direct: Option<&Arc<SharedWrite>>,
    handoff: &Handoff<P>,
    max_frame: usize,
    shared: &Shared,
    slot: &mut Slot,
    registered: &mut bool,
) -> ReadEnd {
    let mut frames = FramedRead::new(rd, BudgetedCodec::new(max_frame, shared.budget.clone()));
    let reject = |why: String| {
        shared.log.warn(|| format!("{label}: closing connection: {why}"));
        queue.push();
        let _ = tx.send((Instant::now(), Frame::Error { message: why }));
        ReadEnd::Closed
    };
    let mut last_frame = Instant::now();
    // One timer, re-armed only when it fires (not per frame: that cost a timer-wheel insertion and removal
    // per request): every PARTIAL_FRAME_TIMEOUT it checks for a stalled frame and idleness.
    let check =
        tokio::time::sleep_until(last_frame + if *registered { PARTIAL_FRAME_TIMEOUT } else { HANDSHAKE_TIMEOUT });
    let mut check = std::pin::pin!(check);
    // A partial frame was buffered at the last check and no frame has completed since.
    let mut partial_seen = false;
    // Replies may be corked: the last frame was handed over with another one in hand.
    let mut corked = false;
    // Only client connections time out when idle: a peer's link may be quiet for long, and closing it under
    // a frame in flight would lose that frame.
    let mut client = false;
    let limits = &shared.limits;
    let spent =
        |queue: &ConnQueue, client: bool| queue.queued() >= MAX_QUEUED_REPLIES || client && queue.over_budget(limits);
    loop {
        if spent(queue, client) {
            // Replies corked for the frames handed over so far go out before waiting for them.
            handoff.uncork();
            corked = false;
            // Backpressure: a connection whose budget (requests in flight plus replies queued) is spent stops
            // being read until replies go out; one whose client takes none of its queued replies for
            // SLOW_READER_TIMEOUT is dropped. (Requests waiting on other servers are no fault of the client.)
            let (mut taken, mut since) = (queue.taken(), Instant::now());
            while spent(queue, client) {
                // Other connections' answers do not wake this one: look again soon when it is the server's
                // budget that is spent.
                let server_wide = queue.server_over_budget(limits);
                queue.changed(if server_wide { Duration::from_millis(20) } else { Duration::from_secs(1) }).await;
                if queue.taken() != taken || queue.queued() == 0 {
                    (taken, since) = (queue.taken(), Instant::now());
                } else if since.elapsed() >= SLOW_READER_TIMEOUT {
                    shared.log.warn(|| {
                        format!(
                            "{label}: closing connection: {} replies queued and none read for {:?}",
                            queue.queued(),
                            SLOW_READER_TIMEOUT
                        )
                    });
                    return ReadEnd::Closed;
                }
            }
            last_frame = Instant::now();
            check.as_mut().reset(last_frame + PARTIAL_FRAME_TIMEOUT);
        }
        if corked && !frame::whole_frame_at_front(frames.read_buffer()) {
            // A frame was handed over with another in hand (or taken without a hand-off): nothing more is.
            handoff.uncork();
            corked = false;
        }
        let next = tokio::select! {
            next = frames.next() => next,
            _ = check.as_mut() => {
                if !*registered {
                    return reject(format!("no Hello within {HANDSHAKE_TIMEOUT:?}"));
                }
                if !frames.read_buffer().is_empty() {
                    if partial_seen {
                        return reject(format!(
                            "a frame has been incomplete for over {PARTIAL_FRAME_TIMEOUT:?} ({} bytes received)",
                            frames.read_buffer().len()
                        ));
                    }
                    partial_seen = true;
                } else if client && last_frame.elapsed() >= IDLE_TIMEOUT {
                    return reject(format!("idle for {IDLE_TIMEOUT:?}"));
                }
                check.as_mut().reset(Instant::now() + PARTIAL_FRAME_TIMEOUT);
                continue;
            }
        };
        let bytes = match next {
            None => return ReadEnd::HalfClosed,
            Some(Ok(b)) => b,
            Some(Err(e)) if e.kind() == std::io::ErrorKind::InvalidData => {
                return reject(format!("bad frame: {e} (max_frame_bytes = {max_frame})"));
            }
            Some(Err(e)) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
                return reject(format!("truncated frame at end of stream: {e}"));
            }
            Some(Err(e)) if e.kind() == std::io::ErrorKind::OutOfMemory => return reject(format!("busy: {e}")),
            Some(Err(e)) => {
                shared.log.warn(|| format!("{label}: read failed: {e}"));
                return ReadEnd::Closed;
            }
        };
        last_frame = Instant::now();
        partial_seen = false;
        // Another whole frame is buffered: it is handed over next without a wait, and the replies stay corked.
        let more = frame::whole_frame_at_front(frames.read_buffer());
        corked |= more;
        let frame = match frame::decode::<P::Msg>(&bytes) {
            Ok(f) => f,
            Err(e) => return reject(format!("bad frame: {e}")),
        };
        let len = bytes.len();
        drop(bytes);
        match frame {
            Frame::Hello { protocol, from } => {
                if *registered {
                    continue;
                }
                if protocol != P::NAME {
                    return reject(format!(
                        "protocol mismatch: this server runs {:?}, peer {from} runs {protocol:?}",
                        P::NAME
                    ));
                }
                if let Err(why) = shared.admit(caller, from) {
                    return reject(why);
                }
                client = matches!(from, Addr::Client(_));
                if let Err(why) = slot.admit(if client { Role::Client } else { Role::Peer }) {
                    return reject(why);
                }
                let ev =
                    Inbound::Connected { conn, from, tx: tx.clone(), queue: queue.clone(), direct: direct.cloned() };
                if !handoff.deliver(ev, more).await {
                    return ReadEnd::Closed;
                }
                *registered = true;
            }
            Frame::Msg { .. }
            | Frame::Error { .. }
            | Frame::Seq { .. }
            | Frame::Ack { .. }
            | Frame::Refused { .. }
            | Frame::Unanswerable { .. }
                if !*registered =>
            {
                return reject("the first frame on a connection must be Hello".into());
            }
            // A request that leaves no headroom for the messages that would carry it on is refused before
            // the protocol sees it (snowline_core::frames); the connection stays open.
            Frame::Msg { from: Addr::Client(c), msg, .. } if client && len > frames::request_limit(max_frame) => {
                let message = format!(
                    "a {} request of {len} bytes exceeds the request limit of {} bytes (max_frame_bytes = \
                     {max_frame} less {} of headroom)",
                    msg.kind(),
                    frames::request_limit(max_frame),
                    frames::FRAME_HEADROOM
                );
                shared.log.warn(|| format!("{label}: refused: {message}"));
                queue.push();
                let _ = tx.send((Instant::now(), Frame::Refused { client: c, message }));
            }
            Frame::Msg { from, to, msg } => {
                if client && msg.expects_reply(to) {
                    // In flight until a frame goes back to this connection (`EventLoop::answer`).
                    queue.request(last_frame, len);
                }
                if !handoff.deliver(Inbound::Msg { conn, from, to, seq: None, msg }, more).await {
                    return ReadEnd::Closed;
                }
            }
            Frame::Seq { from, to, epoch, floor, seq, msg } => {
                let place = Some(LinkPlace { epoch, floor, seq });
                let ev = Inbound::Msg { conn, from: Addr::Server(from), to: Addr::Server(to), seq: place, msg };
                if !handoff.deliver(ev, more).await {
                    return ReadEnd::Closed;
                }
            }
            Frame::Ack { from, to, epoch, seq, resend } => {
                if !handoff.deliver(Inbound::Ack { conn, from, to, epoch, seq, resend }, more).await {
                    return ReadEnd::Closed;
                }
            }
            Frame::Error { message } => shared.log.warn(|| format!("{label}: peer reports: {message}")),
            // Refusals go to clients; a server has no use for one.
            Frame::Refused { .. } | Frame::Unanswerable { .. } => {}
        }
    }
}
