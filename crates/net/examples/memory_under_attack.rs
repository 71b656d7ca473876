//! What two hostile clients cost a server in memory (issue 16), printed as figures:
//!
//! 1. a client that pipelines GETs and never reads its replies, for `--seconds` (default 60), while another
//!    client is served: the server's growth must stay under 64 MB;
//! 2. 200 connections, each sending an almost complete 8 MB frame and stalling: growth under 128 MB.
//!
//! The server (cv, one node) runs in this process, so the figure is this process's resident set (VmRSS)
//! growth; the attacking clients reuse one buffer and add little.
//!
//! `cargo run --release -p snowline-net --example memory_under_attack [-- --seconds 60]`

// A benchmark of a real server: it waits on the real clock.
#![allow(clippy::disallowed_methods)]

use bytes::BytesMut;
use snowline_core::{Addr, ClientId, OpId, Request, ServerId};
use snowline_net::frame::{self, Frame};
use snowline_net::{ClientRuntime, ClusterConfig, free_base_port, run_server};
use snowline_protocols::Cv;
use snowline_protocols::causal::tomsic::{Session, TomsicMsg};
use std::time::Duration;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio::time::{Instant, timeout};

fn rss_mb() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let kb: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0.0);
    kb / 1024.0
}

fn encode(f: &Frame<TomsicMsg>) -> BytesMut {
    let mut buf = BytesMut::new();
    frame::encode_into(f, 1 << 23, &mut buf).expect("a frame encodes");
    buf
}

async fn hello(addr: &str, id: u64) -> TcpStream {
    let mut s = TcpStream::connect(addr).await.expect("connects");
    let hello = Frame::<TomsicMsg>::Hello { protocol: "cv".into(), from: Addr::Client(ClientId(id)) };
    s.write_all(&encode(&hello)).await.expect("hello");
    s
}

fn get(op: u64) -> Frame<TomsicMsg> {
    Frame::Msg {
        from: Addr::Client(ClientId(0xbad0_0001)),
        to: Addr::Server(ServerId::new(0, 0)),
        msg: TomsicMsg::Begin {
            op: OpId(op),
            request: Request::Rot { keys: vec!["k".into()] },
            session: Session::default(),
        },
    }
}

#[tokio::main]
async fn main() {
    let mut seconds = 60u64;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        if a == "--seconds" {
            seconds = args.next().and_then(|s| s.parse().ok()).expect("--seconds N");
        }
    }
    // The attacks are a client's: peer authentication plays no part, so the one server needs no certificates.
    let config = ClusterConfig::local("cv", 1, 1, free_base_port()).insecure();
    let addr = config.nodes[0].addr.clone();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(run_server::<Cv>(config.clone(), 0, async move {
        let _ = stopped.await;
    }));
    let deadline = Instant::now() + Duration::from_secs(5);
    while TcpStream::connect(&addr).await.is_err() {
        assert!(Instant::now() < deadline, "the server never listened");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let client = ClientRuntime::<Cv>::connect(&config, 0).await.expect("a client connects");
    let session = client.session();
    let put = Request::Put { key: "k".into(), value: "v".into() };
    session.execute(put.clone()).await.expect("served");
    let base = rss_mb();

    // 1. Pipelined GETs, never read.
    let mut s = hello(&addr, 0xbad0_0001).await;
    let mut batch = BytesMut::new();
    for i in 0..1000 {
        batch.extend_from_slice(&encode(&get(i)));
    }
    let end = Instant::now() + Duration::from_secs(seconds);
    let mut sent = 0usize;
    let mut served = 0u32;
    let mut peak = base;
    while Instant::now() < end {
        if let Ok(Ok(())) = timeout(Duration::from_millis(200), s.write_all(&batch)).await {
            sent += batch.len();
        }
        if timeout(Duration::from_secs(5), session.execute(put.clone())).await.is_ok_and(|r| r.is_ok()) {
            served += 1;
        }
        peak = peak.max(rss_mb());
    }
    drop(s);
    println!(
        "pipelining client, {seconds} s, never reading: {:.1} MB of requests accepted by the server, \
         resident set +{:.1} MB at the peak (limit 64 MB), another client served {served} times meanwhile",
        sent as f64 / 1e6,
        peak - base
    );

    // 2. 200 stalled, almost complete 8 MB frames.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let base = rss_mb();
    let len: u32 = 8 << 20;
    let chunk = vec![0u8; 1 << 20];
    let mut conns = Vec::new();
    for i in 0..200u64 {
        let mut s = hello(&addr, 0xbad1_0000 + i).await;
        let _ = s.write_all(&len.to_be_bytes()).await;
        // All but the last kilobyte, unless the server refuses the frame and stops reading.
        for n in 0..8 {
            let part = if n == 7 { &chunk[..chunk.len() - 1024] } else { &chunk[..] };
            if !matches!(timeout(Duration::from_millis(100), s.write_all(part)).await, Ok(Ok(()))) {
                break;
            }
        }
        conns.push(s);
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    let grown = rss_mb() - base;
    let ok = timeout(Duration::from_secs(5), session.execute(put.clone())).await.is_ok_and(|r| r.is_ok());
    println!(
        "200 connections each stalled in an almost complete 8 MB frame: resident set +{grown:.1} MB (limit 128 MB); \
         another client {}",
        if ok { "served" } else { "NOT served" }
    );
    drop(conns);
    drop(session);
    drop(client);
    let _ = stop.send(());
    server.await.expect("the server task did not panic").expect("the server stopped cleanly");
}
