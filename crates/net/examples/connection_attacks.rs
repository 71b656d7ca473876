//! Issue 32's connection attacks against a running local cluster of cv servers (`snowline cluster up
//! --protocol cv --dcs 1 --partitions 2 --insecure --dir DIR --background`), printed as figures:
//!
//! * `burst --config DIR/cluster.toml [--n 5000]`: that many short client connections to node 0 (Hello, one
//!   read, close; 50 at a time), then the server's sockets in CLOSE-WAIT a second later (`ss`).
//! * `memory --config DIR/cluster.toml --pid0 P --pid1 Q [--conns 64] [--seconds 20]`: pauses node 1 (SIGSTOP), opens
//!   `--conns` connections to node 0 that pipeline cross-partition reads (which wait on node 1) and never
//!   read, until the server stops reading them; then closes them, resumes node 1, and prints node 0's
//!   resident set (VmRSS) every 5 s for a minute.
//!
//! `cargo run -p snowline-net --example connection_attacks -- burst --config DIR/cluster.toml`

// A benchmark of a real server: it waits on the real clock.
#![allow(clippy::disallowed_methods)]

use bytes::BytesMut;
use snowline_core::{Addr, ClientId, OpId, Request, ServerId};
use snowline_net::ClusterConfig;
use snowline_net::frame::{self, Frame};
use snowline_protocols::causal::tomsic::{Session, TomsicMsg};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::{Instant, timeout};

fn encode(f: &Frame<TomsicMsg>) -> BytesMut {
    let mut buf = BytesMut::new();
    frame::encode_into(f, 1 << 23, &mut buf).expect("a frame encodes");
    buf
}

fn hello(id: u64) -> BytesMut {
    encode(&Frame::Hello { protocol: "cv".into(), from: Addr::Client(ClientId(id << 32)) })
}

fn rot(client: u64, op: u64, keys: &[String]) -> BytesMut {
    encode(&Frame::Msg {
        from: Addr::Client(ClientId(client << 32)),
        to: Addr::Server(ServerId::new(0, 0)),
        msg: TomsicMsg::Begin {
            op: OpId(op),
            request: Request::Rot { keys: keys.iter().map(|k| k.as_str().into()).collect() },
            session: Session::default(),
        },
    })
}

fn rss_mb(pid: u32) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let kb: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0.0);
    kb / 1024.0
}

fn close_wait() -> usize {
    let out = std::process::Command::new("ss").args(["-tan", "state", "close-wait"]).output().expect("ss runs");
    String::from_utf8_lossy(&out.stdout).lines().skip(1).count()
}

fn arg(args: &[String], name: &str) -> Option<String> {
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1).cloned())
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let config = arg(&args, "--config").expect("--config DIR/cluster.toml");
    let config = ClusterConfig::load(std::path::Path::new(&config)).expect("a cluster config");
    let addr = config.nodes[0].addr.clone();
    let t = config.topology();
    match args.first().map(String::as_str) {
        Some("burst") => {
            let n: u64 = arg(&args, "--n").map_or(5000, |n| n.parse().expect("--n N"));
            let key = t.key_on(0, "burst-");
            let before = close_wait();
            let started = Instant::now();
            let mut done = 0u64;
            while done < n {
                let batch = (n - done).min(50);
                let conns = (done..done + batch).map(|i| {
                    let (addr, key) = (addr.clone(), key.clone());
                    async move {
                        let mut s = TcpStream::connect(&addr).await.expect("connects");
                        s.write_all(&hello(i + 1)).await.expect("hello");
                        s.write_all(&rot(i + 1, i, &[key])).await.expect("request");
                        let mut buf = [0u8; 4096];
                        let _ = timeout(Duration::from_secs(5), s.read(&mut buf)).await;
                    }
                });
                futures::future::join_all(conns).await;
                done += batch;
            }
            println!("{n} short connections in {:.1} s", started.elapsed().as_secs_f64());
            tokio::time::sleep(Duration::from_secs(1)).await;
            println!("sockets in CLOSE-WAIT: {before} before, {} a second after the burst", close_wait());
        }
        Some("memory") => {
            let pid0: u32 = arg(&args, "--pid0").expect("--pid0").parse().unwrap();
            let pid1: i32 = arg(&args, "--pid1").expect("--pid1").parse().unwrap();
            let conns: u64 = arg(&args, "--conns").map_or(64, |n| n.parse().unwrap());
            let seconds: u64 = arg(&args, "--seconds").map_or(20, |n| n.parse().unwrap());
            let pad = "x".repeat(400);
            let keys = [t.key_on(0, &format!("{pad}-")), t.key_on(1, &format!("{pad}-"))];
            println!("node 0 VmRSS at start: {:.0} MB", rss_mb(pid0));
            // SAFETY: kill(2) with a pid the caller named.
            unsafe { libc::kill(pid1, libc::SIGSTOP) };
            let mut streams = Vec::new();
            for c in 0..conns {
                let mut s = TcpStream::connect(&addr).await.expect("connects");
                s.write_all(&hello(c + 1)).await.expect("hello");
                streams.push(s);
            }
            let started = Instant::now();
            let pushes = streams.iter_mut().enumerate().map(|(c, s)| {
                // Each connection speaks for its own client id.
                let mut batch = BytesMut::new();
                for i in 0..1000 {
                    batch.extend_from_slice(&rot(c as u64 + 1, i, &keys));
                }
                let mut sent = 0usize;
                async move {
                    let _ = timeout(Duration::from_secs(seconds), async {
                        loop {
                            if s.write_all(&batch).await.is_err() {
                                break;
                            }
                            sent += batch.len();
                        }
                    })
                    .await;
                    batch.clear();
                    sent
                }
            });
            let sent: usize = futures::future::join_all(pushes).await.into_iter().sum();
            println!(
                "{conns} connections sent {} MB of requests in {:.0} s; node 0 VmRSS {:.0} MB",
                sent >> 20,
                started.elapsed().as_secs_f64(),
                rss_mb(pid0)
            );
            drop(streams);
            // SAFETY: as above.
            unsafe { libc::kill(pid1, libc::SIGCONT) };
            let ended = Instant::now();
            for _ in 0..13 {
                println!(
                    "{:>3.0} s after the attack: node 0 VmRSS {:.0} MB",
                    ended.elapsed().as_secs_f64(),
                    rss_mb(pid0)
                );
                tokio::time::sleep(Duration::from_secs(5)).await;
            }
        }
        _ => eprintln!("usage: connection_attacks burst|memory --config DIR/cluster.toml ..."),
    }
}
