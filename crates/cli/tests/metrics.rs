//! Metrics with real processes: `cluster up --metrics` gives every node an endpoint written into its config,
//! `cluster status` lists them, each answers Prometheus text; `server --metrics ADDR` overrides the config,
//! and a taken or malformed address stops the server at startup with an error naming it.
// These tests drive real processes: they poll with the real clock.
#![allow(clippy::disallowed_methods)]

use crate::common;

use common::*;

use snowline_net::ClusterConfig;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Stops the cluster's servers (hand-started ones too) even when an assertion fails.
struct Cluster<'a>(&'a Path);

impl Drop for Cluster<'_> {
    fn drop(&mut self) {
        let _ = snowline(&["cluster", "down", "--dir", self.0.to_str().unwrap()]);
    }
}

/// `GET /metrics` on `addr` by hand: the whole answer, or `None` if nothing listens or answers.
fn get_metrics(addr: &str) -> Option<String> {
    let mut s = TcpStream::connect(addr).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n").ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).ok()?;
    (!out.is_empty()).then_some(out)
}

/// The sum of the samples of metric `name` in a scraped body.
fn sum(body: &str, name: &str) -> f64 {
    body.lines()
        .filter(|l| l.starts_with(&format!("{name}{{")))
        .map(|l| l.rsplit_once(' ').unwrap().1.parse::<f64>().unwrap())
        .sum()
}

/// A loopback address nothing listens on just now.
fn free_addr() -> String {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().to_string()
}

#[test]
fn cluster_up_metrics_and_server_metrics_override() {
    let dir = tempdir("metrics", "up");
    let d = dir.to_str().unwrap();
    let up = ["cluster", "up", "--protocol", "cv", "--dcs", "1", "--partitions", "2", "--dir", d, "--background"];
    let out = ok(&[&up[..], &["--metrics"]].concat());
    let _guard = Cluster(&dir);
    let config_path = dir.join("cluster.toml");
    let config = ClusterConfig::load(&config_path).unwrap();
    let addrs: Vec<String> = config.nodes.iter().map(|n| n.metrics.clone().expect("a metrics address")).collect();
    for a in &addrs {
        assert!(out.contains(&format!("http://{a}/metrics")), "cluster up names {a}: {out}");
    }

    let status = ok(&["cluster", "status", "--dir", d]);
    assert!(status.lines().any(|l| l.contains("METRICS")), "{status}");
    for (node, a) in config.nodes.iter().zip(&addrs) {
        let line = status.lines().find(|l| l.split_whitespace().next() == Some(&node.id.to_string())).unwrap();
        assert!(line.contains(a.as_str()), "node {}'s line names {a}: {line}", node.id);
    }

    ok(&["--cluster", d, "put", "k1", "v1"]);
    ok(&["--cluster", d, "get", "k1"]);
    let mut from_clients = 0.0;
    for (node, a) in config.nodes.iter().zip(&addrs) {
        let answer = get_metrics(a).expect("an answer");
        let (head, body) = answer.split_once("\r\n\r\n").unwrap();
        assert!(head.starts_with("HTTP/1.1 200 OK"), "{head}");
        assert!(head.contains("Content-Type: text/plain; version=0.0.4"), "{head}");
        assert!(body.contains(&format!("snowline_server_info{{node=\"{}\",protocol=\"cv\"", node.id)), "{body}");
        from_clients += sum(body, "snowline_messages_received_total");
    }
    assert!(from_clients >= 2.0, "the put and the get were counted");
    ok(&["cluster", "down", "--dir", d]);
    let cfg = config_path.to_str().unwrap();

    // A taken or malformed --metrics address: an error at startup naming it, nothing left running.
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let taken_addr = taken.local_addr().unwrap().to_string();
    let o = snowline(&["server", "--config", cfg, "--node", "0", "--metrics", &taken_addr]);
    assert!(!o.status.success(), "{}", text(&o));
    assert!(text(&o).contains(&format!("cannot listen for metrics on {taken_addr}")), "{}", text(&o));
    let o = snowline(&["server", "--config", cfg, "--node", "0", "--metrics", "nowhere"]);
    assert!(!o.status.success() && text(&o).contains("metrics = \"nowhere\""), "{}", text(&o));
    drop(taken);

    // --metrics overrides the config's address.
    let addr = free_addr();
    let mut child = Command::new(env!("CARGO_BIN_EXE_snowline"))
        .args(["server", "--config", cfg, "--node", "0", "--metrics", &addr])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    let answer = loop {
        if let Some(a) = get_metrics(&addr) {
            break a;
        }
        assert!(Instant::now() < deadline, "the server never served metrics on {addr}");
        assert!(child.try_wait().unwrap().is_none(), "the server exited");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(answer.starts_with("HTTP/1.1 200 OK") && answer.contains("node=\"0\""), "{answer}");
    assert!(get_metrics(&addrs[0]).is_none(), "the config's address is not used");
    let _ = child.kill();
    let _ = child.wait();
    let _ = std::fs::remove_dir_all(&dir);
}
