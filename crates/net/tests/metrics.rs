//! The metrics endpoint of a real server (in this process): `GET /metrics` answers Prometheus text whose
//! every sample parses and belongs to a family with HELP and TYPE lines, and whose counters follow the
//! operations run; the durable log's counters move; garbage, oversized requests, wrong paths and a flood of
//! idle connections get an error or a closed connection while the server keeps serving; a taken metrics
//! port stops the server at startup. Requests are written by hand over plain TCP.

// Tests of a real server: they wait on the real clock.
#![allow(clippy::disallowed_methods)]

use crate::common;

use snowline_core::{Key, Protocol, Request, Value};
use snowline_net::metrics::{CONTENT_TYPE, MAX_SCRAPERS};
use snowline_net::{ClientRuntime, ClusterConfig, Durability, NetError, free_base_port, run_server_with};
use snowline_protocols::Cv;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::{Instant, timeout};

/// A one-dc cluster of `partitions` nodes; node 0 serves metrics (on a port of the free range, past the
/// servers' own).
fn config(partitions: u16) -> (ClusterConfig, String) {
    let base = free_base_port();
    let mut config = ClusterConfig::local(Cv::NAME, 1, partitions, base).insecure();
    let addr = format!("127.0.0.1:{}", base + 40);
    config.nodes[0].metrics = Some(addr.clone());
    (config, addr)
}

/// Write `request` on a new connection and read until the server closes it: `None` if it closed (or
/// reset) without answering.
async fn exchange(addr: &str, request: &[u8]) -> Option<String> {
    let mut s = TcpStream::connect(addr).await.expect("the metrics port accepts");
    // The server may answer and close before taking all of an oversized request.
    let _ = s.write_all(request).await;
    let mut out = Vec::new();
    let read = timeout(Duration::from_secs(10), s.read_to_end(&mut out)).await.expect("the server closes in time");
    if read.is_err() && out.is_empty() {
        return None;
    }
    (!out.is_empty()).then(|| String::from_utf8(out).expect("answers are text"))
}

/// `GET /metrics`: the status line, the headers (lower-cased names) and the body.
async fn scrape(addr: &str) -> (String, BTreeMap<String, String>, String) {
    let text = exchange(addr, b"GET /metrics HTTP/1.1\r\nHost: test\r\n\r\n").await.expect("an answer");
    let (head, body) = text.split_once("\r\n\r\n").expect("a head and a body");
    let mut lines = head.split("\r\n");
    let status = lines.next().unwrap().to_string();
    let headers = lines
        .map(|l| {
            let (k, v) = l.split_once(':').expect("header: value");
            (k.trim().to_ascii_lowercase(), v.trim().to_string())
        })
        .collect();
    (status, headers, body.to_string())
}

fn is_name(s: &str) -> bool {
    let mut chars = s.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == ':')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
}

/// Parses `name="value",...` (values with `\\`, `\"` and `\n` escapes); panics on anything else.
fn labels(text: &str, line: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut rest = text;
    while !rest.is_empty() {
        let (name, after) = rest.split_once("=\"").unwrap_or_else(|| panic!("label without =\": {line}"));
        assert!(is_name(name), "bad label name {name:?}: {line}");
        let mut value = String::new();
        let mut chars = after.char_indices();
        let end = loop {
            match chars.next() {
                Some((_, '\\')) => match chars.next() {
                    Some((_, 'n')) => value.push('\n'),
                    Some((_, c @ ('\\' | '"'))) => value.push(c),
                    other => panic!("bad escape {other:?}: {line}"),
                },
                Some((i, '"')) => break i,
                Some((_, c)) => value.push(c),
                None => panic!("unterminated label value: {line}"),
            }
        };
        assert!(out.insert(name.to_string(), value).is_none(), "label {name} twice: {line}");
        rest = &after[end + 1..];
        rest = rest.strip_prefix(',').unwrap_or_else(|| {
            assert!(rest.is_empty(), "junk after a label: {line}");
            rest
        });
    }
    out
}

/// A scraped body, checked line by line: every sample is `name{labels} value` with a numeric value and
/// its family has HELP and TYPE lines before it. Samples keyed by name and labels.
struct Scraped {
    samples: BTreeMap<(String, BTreeMap<String, String>), f64>,
    types: BTreeMap<String, String>,
}

impl Scraped {
    fn parse(body: &str) -> Self {
        let (mut helps, mut types) = (BTreeSet::new(), BTreeMap::new());
        let mut samples = BTreeMap::new();
        for line in body.lines() {
            if let Some(help) = line.strip_prefix("# HELP ") {
                let (name, text) = help.split_once(' ').expect("# HELP name text");
                assert!(is_name(name) && !text.is_empty(), "{line}");
                assert!(helps.insert(name.to_string()), "HELP twice: {line}");
                continue;
            }
            if let Some(ty) = line.strip_prefix("# TYPE ") {
                let (name, ty) = ty.split_once(' ').expect("# TYPE name type");
                assert!(["counter", "gauge", "histogram", "summary", "untyped"].contains(&ty), "{line}");
                assert!(types.insert(name.to_string(), ty.to_string()).is_none(), "TYPE twice: {line}");
                continue;
            }
            assert!(!line.starts_with('#') && !line.is_empty(), "unexpected line {line:?}");
            let (series, value) = line.rsplit_once(' ').expect("a sample: series value");
            let value: f64 = value.parse().unwrap_or_else(|_| panic!("value is not a number: {line}"));
            let (name, labels) = match series.split_once('{') {
                Some((name, rest)) => (name, labels(rest.strip_suffix('}').expect("labels end with }"), line)),
                None => (series, BTreeMap::new()),
            };
            assert!(is_name(name), "bad metric name: {line}");
            assert!(name.starts_with("snowline_"), "{line}");
            let family = ["_bucket", "_sum", "_count"]
                .iter()
                .find_map(|s| name.strip_suffix(s).filter(|f| types.get(*f).is_some_and(|t| t == "histogram")))
                .unwrap_or(name);
            assert!(types.contains_key(family) && helps.contains(family), "no HELP/TYPE before: {line}");
            assert!(samples.insert((name.to_string(), labels), value).is_none(), "sample twice: {line}");
        }
        assert_eq!(helps, types.keys().cloned().collect(), "every family has both HELP and TYPE");
        Self { samples, types }
    }

    /// The sum of the samples of `name` whose labels include `with`.
    fn sum(&self, name: &str, with: &[(&str, &str)]) -> f64 {
        self.samples
            .iter()
            .filter(|((n, l), _)| n == name && with.iter().all(|(k, v)| l.get(*k).map(String::as_str) == Some(*v)))
            .map(|(_, v)| v)
            .sum()
    }

    fn has(&self, name: &str) -> bool {
        self.types.contains_key(name)
    }
}

/// A scrape that must succeed and parse.
async fn metrics(addr: &str) -> Scraped {
    let (status, headers, body) = scrape(addr).await;
    assert_eq!(status, "HTTP/1.1 200 OK");
    let ct = headers.get("content-type").expect("a content type");
    assert!(ct.starts_with("text/plain; version=0.0.4"), "{ct}");
    assert_eq!(ct, CONTENT_TYPE);
    assert_eq!(headers.get("content-length").map(|l| l.parse::<usize>().unwrap()), Some(body.len()));
    Scraped::parse(&body)
}

/// `n` puts and reads of keys on partition 0 (node 0's) through a client of dc 0.
async fn some_operations(config: &ClusterConfig, n: usize) {
    let client = ClientRuntime::<Cv>::connect(config, 0).await.unwrap().with_timeout(Duration::from_secs(10));
    let session = client.session();
    for i in 0..n {
        let key: Key = config.topology().key_on(0, &format!("metrics-{i}-")).into();
        let value: Value = format!("v{i}").into();
        session.execute(Request::Put { key: key.clone(), value }).await.unwrap();
        session.execute(Request::Rot { keys: vec![key] }).await.unwrap();
    }
}

#[tokio::test]
async fn metrics_parse_and_count_the_operations() {
    let (config, addr) = config(2);
    let cluster = common::start::<Cv>(config.clone()).await;
    let before = metrics(&addr).await;
    for family in [
        "snowline_server_info",
        "snowline_uptime_seconds",
        "snowline_messages_received_total",
        "snowline_messages_sent_total",
        "snowline_invalid_inputs_total",
        "snowline_contract_violations_total",
        "snowline_refused_requests_total",
        "snowline_handler_seconds",
        "snowline_replies_noted_total",
        "snowline_replies_rejected_total",
        "snowline_aborts_total",
        "snowline_blocked_seconds",
        "snowline_versions_stored",
        "snowline_connections",
        "snowline_peer_queue_frames",
        "snowline_link_unacked_messages",
        "snowline_log_records_total",
        "snowline_log_bytes_total",
        "snowline_log_commits_total",
        "snowline_log_fsyncs_total",
        "snowline_log_commit_seconds",
    ] {
        assert!(before.has(family), "{family} missing");
    }
    assert_eq!(before.sum("snowline_server_info", &[("node", "0"), ("protocol", "cv"), ("mode", "memory")]), 1.0);
    assert_eq!(before.sum("snowline_log_records_total", &[]), 0.0, "in memory: nothing logged");

    some_operations(&config, 10).await;
    let after = metrics(&addr).await;
    let from_clients = |m: &Scraped| m.sum("snowline_messages_received_total", &[("from", "client")]);
    let to_clients = |m: &Scraped| m.sum("snowline_messages_sent_total", &[("to", "client")]);
    assert!(from_clients(&after) > from_clients(&before), "requests counted");
    assert!(to_clients(&after) > to_clients(&before), "replies counted");
    assert!(
        after.sum("snowline_handler_seconds_count", &[]) >= from_clients(&after),
        "every message's handling is timed"
    );
    // CV's coordinator answers each operation with its outcome: every answer is noted, none aborts.
    let noted = after.sum("snowline_replies_noted_total", &[]);
    assert!(noted > 0.0 && noted <= to_clients(&after), "{noted}");
    assert_eq!(after.sum("snowline_blocked_seconds_count", &[]), noted, "each noted reply's waiting is recorded");
    assert_eq!(after.sum("snowline_aborts_total", &[]), 0.0);
    assert_eq!(after.sum("snowline_aborts_total", &[("cause", "conflict")]), 0.0, "every cause is listed");
    assert!(after.sum("snowline_versions_stored", &[]) > 0.0, "node 0 holds versions");
    assert!(after.sum("snowline_uptime_seconds", &[]) > 0.0);
    cluster.stop().await;
}

#[tokio::test]
async fn a_durable_server_reports_its_log() {
    let (config, addr) = config(1);
    let dir = std::env::temp_dir().join(format!("snowline-net-metrics-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let durability = Durability { data_dir: dir.clone(), fsync: snowline_storage::FsyncPolicy::GROUP_DEFAULT };
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(run_server_with::<Cv>(config.clone(), 0, Some(durability), async move {
        let _ = stopped.await;
    }));
    let deadline = Instant::now() + Duration::from_secs(10);
    while TcpStream::connect(&config.nodes[0].addr).await.is_err() {
        assert!(Instant::now() < deadline, "the server never listened");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    some_operations(&config, 5).await;
    let m = metrics(&addr).await;
    assert_eq!(m.sum("snowline_server_info", &[("mode", "durable")]), 1.0);
    assert!(m.sum("snowline_log_records_total", &[]) >= 10.0, "every input is logged");
    assert!(m.sum("snowline_log_bytes_total", &[]) > 0.0);
    assert!(m.sum("snowline_log_commits_total", &[]) > 0.0);
    assert!(m.sum("snowline_log_fsyncs_total", &[]) > 0.0, "group commit fsyncs");
    assert!(m.sum("snowline_log_commit_seconds_count", &[]) > 0.0, "commits are timed");
    let _ = stop.send(());
    server.await.unwrap().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn hostile_scrapers_get_errors_and_the_server_keeps_serving() {
    let (config, addr) = config(1);
    let cluster = common::start::<Cv>(config.clone()).await;
    let status = |answer: Option<String>| answer.map(|a| a.lines().next().unwrap_or_default().to_string());

    // Garbage, a request line over the limit, another path, another method, a cut-off request.
    assert_eq!(
        status(exchange(&addr, b"\x00\xff\xfe garbage\r\n\r\n").await).as_deref(),
        Some("HTTP/1.1 400 Bad Request")
    );
    let huge = [b"GET /".as_slice(), &vec![b'a'; 1 << 20], b" HTTP/1.1\r\n\r\n"].concat();
    let answer = status(exchange(&addr, &huge).await);
    assert!(
        answer.is_none() || answer.as_deref() == Some("HTTP/1.1 431 Request Header Fields Too Large"),
        "{answer:?}"
    );
    assert_eq!(status(exchange(&addr, b"GET / HTTP/1.1\r\n\r\n").await).as_deref(), Some("HTTP/1.1 404 Not Found"));
    assert_eq!(
        status(exchange(&addr, b"GET /metrics/../etc HTTP/1.1\r\n\r\n").await).as_deref(),
        Some("HTTP/1.1 404 Not Found")
    );
    assert_eq!(
        status(exchange(&addr, b"POST /metrics HTTP/1.1\r\nContent-Length: 0\r\n\r\n").await).as_deref(),
        Some("HTTP/1.1 405 Method Not Allowed")
    );
    let mut cut = TcpStream::connect(&addr).await.unwrap();
    cut.write_all(b"GET /metr").await.unwrap();
    cut.shutdown().await.unwrap();
    let mut out = String::new();
    let _ = cut.read_to_string(&mut out).await;
    assert!(out.is_empty() || out.starts_with("HTTP/1.1 400"), "{out}");

    // Idle connections beyond the limit are closed at once, unanswered; once they go, scrapes work again.
    let mut idle = Vec::new();
    for _ in 0..MAX_SCRAPERS {
        idle.push(TcpStream::connect(&addr).await.unwrap());
    }
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(exchange(&addr, b"GET /metrics HTTP/1.1\r\n\r\n").await, None, "over the limit: closed");
    drop(idle);
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        match exchange(&addr, b"GET /metrics HTTP/1.1\r\n\r\n").await {
            Some(a) if a.starts_with("HTTP/1.1 200") => break,
            other => assert!(Instant::now() < deadline, "scrapes never recovered: {other:?}"),
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }

    // The server served on throughout, and so does the endpoint.
    some_operations(&config, 2).await;
    let m = metrics(&addr).await;
    assert!(m.sum("snowline_messages_received_total", &[("from", "client")]) > 0.0);
    cluster.stop().await;
}

#[tokio::test]
async fn a_taken_metrics_port_stops_the_server_at_startup() {
    let (config, addr) = config(1);
    let taken = std::net::TcpListener::bind(&addr).unwrap();
    let started = Instant::now();
    let err = snowline_net::run_server::<Cv>(config.clone(), 0, std::future::pending()).await.unwrap_err();
    assert!(matches!(err, NetError::MetricsBind { .. }), "{err:?}");
    let message = err.to_string();
    assert!(message.contains(&format!("cannot listen for metrics on {addr}")), "{message}");
    assert!(started.elapsed() < Duration::from_secs(5));
    // Nothing was left listening.
    assert!(TcpStream::connect(&config.nodes[0].addr).await.is_err(), "the server port is closed again");
    drop(taken);
}
