//! Issue 32's connection limits on a real server (in this process): a departed client's socket is closed at
//! once (no CLOSE-WAIT), peers have connections clients cannot take, each source has its share, and a client
//! whose requests wait on another server stops being read when its budget of requests in flight is spent.

// Tests of a real server: they wait on the real clock.
#![allow(clippy::disallowed_methods)]

use bytes::BytesMut;
use futures::StreamExt;
use snowline_core::{Addr, ClientId, OpId, Protocol, Request, ServerId};
use snowline_net::frame::{self, Frame};
use snowline_net::limits::ConnLimits;
use snowline_net::server::run_server_limited;
use snowline_net::{ClientRuntime, ClusterConfig, NetError, free_base_port};
use snowline_protocols::Cv;
use snowline_protocols::causal::tomsic::{Session, TomsicMsg};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tokio::time::{Instant, timeout};
use tokio_util::codec::FramedRead;

const CLIENT: ClientId = ClientId(0xc0de_0000_0001);

fn encode(f: &Frame<TomsicMsg>) -> BytesMut {
    let mut buf = BytesMut::new();
    frame::encode_into(f, 1 << 23, &mut buf).unwrap();
    buf
}

fn hello() -> BytesMut {
    encode(&Frame::Hello { protocol: Cv::NAME.into(), from: Addr::Client(CLIENT) })
}

/// A ROT of `keys`, sent to dc0/p0 (which coordinates it, reading other partitions' keys from them).
fn rot(op: u64, keys: &[String]) -> BytesMut {
    encode(&Frame::Msg {
        from: Addr::Client(CLIENT),
        to: Addr::Server(ServerId::new(0, 0)),
        msg: TomsicMsg::Begin {
            op: OpId(op),
            request: Request::Rot { keys: keys.iter().map(|k| k.as_str().into()).collect() },
            session: Session::default(),
        },
    })
}

/// One node of `config` under `limits`; stopped by the sender.
fn node(
    config: &ClusterConfig,
    id: u32,
    limits: ConnLimits,
) -> (oneshot::Sender<()>, JoinHandle<Result<(), NetError>>) {
    let (stop, stopped) = oneshot::channel::<()>();
    let handle = tokio::spawn(run_server_limited::<Cv>(config.clone(), id, None, limits, async move {
        let _ = stopped.await;
    }));
    (stop, handle)
}

async fn listening(addr: &str) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while TcpStream::connect(addr).await.is_err() {
        assert!(Instant::now() < deadline, "{addr} never started listening");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

async fn stop(node: (oneshot::Sender<()>, JoinHandle<Result<(), NetError>>)) {
    let _ = node.0.send(());
    node.1.await.expect("the server did not panic").expect("the server stops cleanly");
}

/// The next frame from the server within `wait`: `None` if none came (or it closed).
async fn next_frame(
    rd: &mut FramedRead<TcpStream, tokio_util::codec::LengthDelimitedCodec>,
    wait: Duration,
) -> Option<Frame<TomsicMsg>> {
    match timeout(wait, rd.next()).await {
        Ok(Some(Ok(bytes))) => Some(frame::decode::<TomsicMsg>(&bytes).expect("well-formed")),
        _ => None,
    }
}

fn reader(s: TcpStream) -> FramedRead<TcpStream, tokio_util::codec::LengthDelimitedCodec> {
    FramedRead::new(s, frame::codec(1 << 23))
}

/// Sockets of this network namespace in CLOSE-WAIT whose local port is `port` (the server's side).
fn close_wait(port: u16) -> usize {
    let mut n = 0;
    for table in ["/proc/self/net/tcp", "/proc/self/net/tcp6"] {
        let text = std::fs::read_to_string(table).unwrap_or_default();
        for line in text.lines().skip(1) {
            let f: Vec<&str> = line.split_whitespace().collect();
            let local_port = f.get(1).and_then(|a| a.rsplit(':').next()).and_then(|p| u16::from_str_radix(p, 16).ok());
            if local_port == Some(port) && f.get(3) == Some(&"08") {
                n += 1;
            }
        }
    }
    n
}

async fn metric(addr: &str, name: &str) -> f64 {
    let mut s = TcpStream::connect(addr).await.expect("the metrics port accepts");
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: test\r\n\r\n").await.unwrap();
    let mut out = String::new();
    timeout(Duration::from_secs(5), s.read_to_string(&mut out)).await.expect("answered").unwrap();
    out.lines()
        .find_map(|l| {
            let rest = l.strip_prefix(name)?;
            if rest.starts_with('{') { rest.split_once("} ").map(|x| x.1) } else { rest.strip_prefix(' ') }
        })
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {name} in the metrics"))
}

/// Short client connections of every kind (a request answered and read; a request whose reply is never
/// read; a Hello alone; a cross-partition request, then a half-close, whose reply still comes) leave no
/// socket of the server in CLOSE-WAIT once their clients have gone: the server closes as soon as it owes
/// them nothing (it used to linger `HALF_CLOSED_LINGER`, 5 s, after every client).
#[tokio::test]
async fn departed_clients_leave_no_socket_in_close_wait() {
    let config = ClusterConfig::local(Cv::NAME, 1, 2, free_base_port()).insecure();
    let nodes = [node(&config, 0, ConnLimits::default()), node(&config, 1, ConnLimits::default())];
    let addr = config.nodes[0].addr.clone();
    let port: u16 = addr.rsplit(':').next().unwrap().parse().unwrap();
    listening(&config.nodes[1].addr).await;
    listening(&addr).await;
    let t = config.topology();
    let (k0, k1) = (t.key_on(0, "cw-"), t.key_on(1, "cw-"));

    // A half-closed client is still answered when its request waits on another server.
    let mut s = TcpStream::connect(&addr).await.unwrap();
    s.write_all(&hello()).await.unwrap();
    s.write_all(&rot(1, &[k0.clone(), k1.clone()])).await.unwrap();
    s.shutdown().await.unwrap();
    let mut rd = reader(s);
    let back = next_frame(&mut rd, Duration::from_secs(3)).await;
    assert!(matches!(back, Some(Frame::Msg { msg: TomsicMsg::Done { op: OpId(1), .. }, .. })), "{back:?}");
    drop(rd);

    for i in 0..60u64 {
        let mut s = TcpStream::connect(&addr).await.unwrap();
        s.write_all(&hello()).await.unwrap();
        match i % 3 {
            0 => {
                s.write_all(&rot(i, std::slice::from_ref(&k0))).await.unwrap();
                let mut rd = reader(s);
                assert!(next_frame(&mut rd, Duration::from_secs(3)).await.is_some(), "answered");
            }
            1 => s.write_all(&rot(i, &[k0.clone(), k1.clone()])).await.unwrap(),
            _ => {}
        }
    }
    // Closed within milliseconds; 2 s of slack for a loaded machine (the old linger kept them 5 s).
    let deadline = Instant::now() + Duration::from_secs(2);
    let mut left = close_wait(port);
    while left > 0 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
        left = close_wait(port);
    }
    assert_eq!(left, 0, "sockets of the server in CLOSE-WAIT two seconds after their clients left");
    for n in nodes {
        stop(n).await;
    }
}

/// A client that pipelines cross-partition reads and never reads a reply, while the other partition's
/// server takes its messages and never answers: once its budget of requests in flight is spent the server
/// stops reading it (its writes block), holds no more than the budget, and serves another client meanwhile.
/// (It used to read on: the reply queue, empty here, was the only bound.)
#[tokio::test]
async fn requests_waiting_on_a_silent_server_spend_the_connection_budget() {
    let base = free_base_port();
    let mut config = ClusterConfig::local(Cv::NAME, 1, 2, base).insecure();
    let metrics = format!("127.0.0.1:{}", base + 40);
    config.nodes[0].metrics = Some(metrics.clone());
    // Node 1 is a black hole: it accepts and reads everything, and answers nothing.
    let hole = TcpListener::bind(&config.nodes[1].addr).await.unwrap();
    let hole = tokio::spawn(async move {
        let mut readers = Vec::new();
        while let Ok((mut s, _)) = hole.accept().await {
            readers.push(tokio::spawn(async move {
                let mut buf = vec![0u8; 64 << 10];
                while matches!(s.read(&mut buf).await, Ok(1..)) {}
            }));
        }
    });
    let budget = 64;
    let limits = ConnLimits { max_requests_in_flight: budget, ..ConnLimits::default() };
    let n0 = node(&config, 0, limits);
    let addr = config.nodes[0].addr.clone();
    listening(&addr).await;
    let t = config.topology();
    let keys = [t.key_on(0, "silent-"), t.key_on(1, "silent-")];

    let mut s = TcpStream::connect(&addr).await.unwrap();
    s.write_all(&hello()).await.unwrap();
    let mut batch = BytesMut::new();
    for i in 0..1000 {
        batch.extend_from_slice(&rot(i, &keys));
    }
    let mut sent = 0usize;
    let pushed = timeout(Duration::from_secs(3), async {
        for _ in 0..(64 << 20) / batch.len() {
            s.write_all(&batch).await.unwrap();
            sent += batch.len();
        }
    })
    .await;
    eprintln!("sent {sent} bytes of requests before blocking");
    assert!(pushed.is_err(), "the server read all {sent} bytes of requests while none was answered");
    assert!(sent < 16 << 20, "the server read {sent} bytes of requests before pushing back");
    let in_flight = metric(&metrics, "snowline_requests_in_flight").await;
    assert_eq!(in_flight, budget as f64, "requests in flight: the budget, spent");

    // Others are served meanwhile.
    let client = ClientRuntime::<Cv>::connect(&config, 0).await.unwrap();
    let session = client.session();
    let put = Request::Put { key: keys[0].as_str().into(), value: "v".into() };
    timeout(Duration::from_secs(5), session.execute(put)).await.expect("served").unwrap();
    drop(session);
    drop(client);
    drop(s);
    stop(n0).await;
    hole.abort();
}

/// Connect to `addr` from `source` and say Hello as a client. With `refusal`, the server must refuse it
/// with an `Error` frame containing that text; without, it must keep it open (the connection is returned).
async fn idle_client(addr: &str, source: &str, refusal: Option<&str>) -> Option<TcpStream> {
    let socket = TcpSocket::new_v4().unwrap();
    socket.bind(format!("{source}:0").parse().unwrap()).unwrap();
    let mut s = socket.connect(addr.parse().unwrap()).await.unwrap();
    s.write_all(&hello()).await.unwrap();
    let mut buf = [0u8; 4096];
    let wait = if refusal.is_some() { Duration::from_secs(5) } else { Duration::from_millis(100) };
    let read = timeout(wait, s.read(&mut buf)).await;
    match (refusal, read) {
        (None, Err(_)) => Some(s),
        (Some(why), Ok(Ok(n))) => {
            let text = String::from_utf8_lossy(&buf[..n]);
            assert!(text.contains(why), "expected a refusal with {why:?}, got {text:?}");
            None
        }
        (want, got) => panic!("expected {want:?}, got {got:?}"),
    }
}

/// Idle clients (and silent connections that never say Hello) fill node 1: each source gets its share, the
/// clients' allowance runs out, and then node 0 still opens its link to node 1 (the connections reserved
/// for peers) and a cross-partition read-only transaction completes.
#[tokio::test]
async fn peers_connect_when_idle_clients_hold_every_client_connection() {
    let config = ClusterConfig::local(Cv::NAME, 1, 2, free_base_port()).insecure();
    let limits = ConnLimits {
        max_connections: 8,
        peer_reserve: 2,
        max_per_source: 4,
        max_handshaking: 8,
        ..ConnLimits::default()
    };
    // Node 1 first, alone: node 0's link to it opens only after the flood.
    let n1 = node(&config, 1, limits.clone());
    let addr1 = config.nodes[1].addr.clone();
    listening(&addr1).await;
    let mut held = Vec::new();
    for _ in 0..4 {
        held.push(idle_client(&addr1, "127.0.0.1", None).await.expect("within the source's share"));
    }
    idle_client(&addr1, "127.0.0.1", Some("per source address")).await;
    for _ in 0..2 {
        held.push(idle_client(&addr1, "127.0.0.2", None).await.expect("within the allowance"));
    }
    idle_client(&addr1, "127.0.0.3", Some("kept for its peers")).await;
    // And more silent connections than the handshake slots.
    for _ in 0..12 {
        held.push(TcpStream::connect(&addr1).await.unwrap());
    }

    let n0 = node(&config, 0, limits);
    listening(&config.nodes[0].addr).await;
    let client = ClientRuntime::<Cv>::connect(&config, 0).await.unwrap();
    let session = client.session();
    let t = config.topology();
    let keys = vec![t.key_on(0, "peer-").as_str().into(), t.key_on(1, "peer-").as_str().into()];
    let reply =
        timeout(Duration::from_secs(5), session.execute(Request::Rot { keys })).await.expect("completed").unwrap();
    assert_eq!(reply.reads.len(), 2);
    drop(session);
    drop(client);
    drop(held);
    stop(n0).await;
    stop(n1).await;
}
