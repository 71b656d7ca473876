//! End-to-end tests of the `snowline` binary: real server processes on loopback.
// These tests drive real processes: they poll with the real clock.
#![allow(clippy::disallowed_methods)]

use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

fn snowline(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_snowline")).args(args).output().expect("running snowline")
}

fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

/// Stops the background cluster even when an assertion fails.
struct Cluster<'a>(&'a Path);

impl Drop for Cluster<'_> {
    fn drop(&mut self) {
        let _ = snowline(&["cluster", "down", "--dir", self.0.to_str().unwrap()]);
    }
}

#[test]
fn unknown_protocol_is_a_clear_error_listing_the_valid_ones() {
    let o = snowline(&["sim", "--protocol", "paxos", "--duration", "10ms"]);
    assert!(!o.status.success());
    let t = text(&o);
    assert!(t.contains("unknown protocol \"paxos\"") && t.contains("cv"), "{t}");
}

/// `bench --cluster DIR` once benchmarked a cluster of its own and ignored DIR without a word.
#[test]
fn client_flags_are_refused_by_commands_that_would_ignore_them() {
    let o = snowline(&["bench", "--cluster", "/tmp/some-cluster", "--protocol", "cops", "--duration", "1s"]);
    assert!(!o.status.success());
    let t = text(&o);
    assert!(t.contains("--cluster is for the client commands") && t.contains("its own"), "{t}");
    let o = snowline(&["--dc", "1", "sim", "--protocol", "cops", "--duration", "10ms"]);
    assert!(!o.status.success());
    assert!(text(&o).contains("--dc is for the client commands"), "{}", text(&o));
    let o = snowline(&["cluster", "status", "--cluster", "/tmp/some-cluster", "--dir", "/tmp/some-cluster"]);
    assert!(text(&o).contains("cluster commands take --dir"), "{}", text(&o));
}

/// `sim --write-ratio 0.3` on the default mixed workload once ran the mixed workload's own mix.
#[test]
fn workload_flags_the_workload_does_not_read_are_refused() {
    let o = snowline(&["sim", "--protocol", "cops", "--write-ratio", "0.3", "--duration", "10ms"]);
    assert!(!o.status.success());
    assert!(text(&o).contains("--write-ratio does not apply to the mixed workload"), "{}", text(&o));
    let o = snowline(&["sim", "--protocol", "cops", "--workload", "kv", "--partitions-per-rot", "2"]);
    assert!(text(&o).contains("--partitions-per-rot does not apply to the kv workload"), "{}", text(&o));
    let o = snowline(&["sim", "--protocol", "cops", "--workload", "kv", "--write-ratio", "0.3", "--duration", "10ms"]);
    assert!(o.status.success(), "{}", text(&o));
}

#[test]
fn missing_and_invalid_configs_are_clear_errors() {
    let o = snowline(&["server", "--config", "/nonexistent/cluster.toml", "--node", "0"]);
    assert!(!o.status.success());
    assert!(text(&o).contains("/nonexistent/cluster.toml"), "{}", text(&o));

    let dir = tempdir("badconfig");
    let path = dir.join("cluster.toml");
    std::fs::write(&path, "protocol = \"cv\"\ndcs = 2\npartitions = [oops\n").unwrap();
    let o = snowline(&["server", "--config", path.to_str().unwrap(), "--node", "0"]);
    assert!(!o.status.success());
    assert!(text(&o).contains("cluster.toml"), "{}", text(&o));

    let o = snowline(&["get", "k"]);
    assert!(!o.status.success());
    assert!(text(&o).contains("--cluster"), "{}", text(&o));
}

#[test]
fn a_put_in_one_datacenter_becomes_readable_in_the_other_and_bad_input_is_refused() {
    let dir = tempdir("cluster");
    let d = dir.to_str().unwrap();
    let o =
        snowline(&["cluster", "up", "--protocol", "cv", "--dcs", "2", "--partitions", "2", "--dir", d, "--background"]);
    assert!(o.status.success(), "{}", text(&o));
    let _guard = Cluster(&dir);

    let o = snowline(&["--cluster", d, "put", "photo", "sunset"]);
    assert!(o.status.success(), "{}", text(&o));
    let o = snowline(&["--cluster", d, "txn", "--put", "a=1", "--put", "b=2", "--put", "c=3"]);
    assert!(o.status.success(), "{}", text(&o));
    // Reading in a transaction needs interactive transactions, which cv lacks: refused, naming who offers them.
    let o = snowline(&["--cluster", d, "txn", "--get", "a", "--put", "b=4"]);
    assert!(!o.status.success());
    assert!(text(&o).contains("cv offers no interactive transactions; use 2pl"), "{}", text(&o));

    // Empty keys are refused, whatever the command, before anything is sent.
    for args in [&["put", "", "v"][..], &["get", ""], &["rot", "a", ""], &["txn", "--put", "=v"], &["txn", "--get", ""]]
    {
        let o = snowline(&[&["--cluster", d][..], args].concat());
        assert!(!o.status.success(), "{args:?}: {}", text(&o));
        assert!(text(&o).contains("error: empty key: a key must be at least one byte long"), "{args:?}: {}", text(&o));
    }
    // A datacenter the cluster lacks: the ones it has, as --dc flags.
    let o = snowline(&["--cluster", d, "--dc", "5", "get", "a"]);
    assert!(!o.status.success());
    assert!(text(&o).contains("--dc 5: the cluster has 2 datacenters: --dc 0 or --dc 1"), "{}", text(&o));

    // Replication is asynchronous: poll datacenter 1 until the value arrives.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let o = snowline(&["--cluster", d, "--dc", "1", "rot", "photo", "a", "b", "c"]);
        assert!(o.status.success(), "{}", text(&o));
        let json: serde_json::Value = serde_json::from_slice(&o.stdout).expect("rot prints JSON");
        let values: Vec<&str> =
            json["reads"].as_array().unwrap().iter().map(|r| r["value"].as_str().unwrap_or("")).collect();
        if values == ["sunset", "1", "2", "3"] {
            assert!(json["reads"][0]["version"]["time"].as_u64().unwrap() > 0);
            break;
        }
        assert!(Instant::now() < deadline, "dc1 never saw the writes: {values:?}");
        std::thread::sleep(Duration::from_millis(50));
    }

    // An oversized value is refused with the limit named; the cluster keeps serving.
    let big = dir.join("big-value");
    std::fs::write(&big, "x".repeat((1 << 20) + 1)).unwrap();
    let o = snowline(&["--cluster", d, "put", "big", "--value-file", big.to_str().unwrap()]);
    assert!(!o.status.success());
    assert!(text(&o).contains("max_value_bytes"), "{}", text(&o));
    let o = snowline(&["--cluster", d, "get", "photo"]);
    assert!(o.status.success() && text(&o).contains("sunset"), "{}", text(&o));

    // Garbage bytes on a server's port close that connection only.
    let config = std::fs::read_to_string(dir.join("cluster.toml")).unwrap();
    let addr = config.lines().find_map(|l| l.strip_prefix("addr = ")).unwrap().trim_matches('"').to_string();
    {
        use std::io::{Read, Write};
        let mut s = std::net::TcpStream::connect(&addr).unwrap();
        s.write_all(&[0, 0, 0, 5, 0xff, 0xfe, 0xfd, 0xfc, 0xfb]).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut buf = Vec::new();
        let _ = s.read_to_end(&mut buf); // the server closes the connection
    }
    let o = snowline(&["--cluster", d, "get", "photo"]);
    assert!(o.status.success() && text(&o).contains("sunset"), "{}", text(&o));
}

#[test]
fn sim_is_deterministic_and_writes_a_history() {
    let dir = tempdir("sim");
    let run = |name: &str| {
        let h = dir.join(name);
        let o = snowline(&[
            "sim",
            "--protocol",
            "cv",
            "--dcs",
            "2",
            "--partitions",
            "3",
            "--clients",
            "5",
            "--duration",
            "300ms",
            "--seed",
            "42",
            "--history",
            h.to_str().unwrap(),
        ]);
        assert!(o.status.success(), "{}", text(&o));
        assert!(String::from_utf8_lossy(&o.stdout).starts_with("seed 42"), "the seed is printed first");
        std::fs::read(h).unwrap()
    };
    let a = run("a.jsonl");
    assert!(a.len() > 1000);
    assert_eq!(a, run("b.jsonl"), "the same seed gives a byte-identical history");
}

/// `sim --workload tpcc` loads TPC-C's database through the protocol, runs the five transactions and audits
/// the 12 consistency conditions afterwards; with `--check` the history is checked too. A protocol without
/// stored procedures is refused up front.
#[test]
fn sim_runs_tpcc_under_2pl_and_audits_the_twelve_conditions() {
    let o = snowline(&[
        "sim",
        "--protocol",
        "2pl",
        "--dcs",
        "1",
        "--partitions",
        "2",
        "--clients",
        "20",
        "--workload",
        "tpcc",
        "--tpcc-scale",
        "small",
        "--duration",
        "200ms",
        "--check",
        "claimed",
    ]);
    let out = text(&o);
    assert!(o.status.success(), "{out}");
    assert!(out.contains("tpcc audit: all 12 conditions hold"), "{out}");
    for n in 1..=12 {
        assert!(out.lines().any(|l| l.trim_start().starts_with(&format!("{n} ")) && l.contains("ok (")), "{n}: {out}");
    }
    assert!(
        out.contains("tpcc: New-Order") && out.contains("tpcc-stock-level") && out.contains("commit rate"),
        "{out}"
    );
    assert!(out.contains("check: strict-ser: ok"), "{out}");
    let o =
        snowline(&["sim", "--protocol", "cv", "--workload", "tpcc", "--tpcc-scale", "small", "--duration", "100ms"]);
    assert!(!o.status.success() && text(&o).contains("stored procedures"), "{}", text(&o));
}

/// The coordination-avoidance paper's experiment from the command line: New-Order alone, warehouse-partitioned,
/// every New-Order with one remote line, coordination-free on RAMP-F; audited. Bad shares are refused.
#[test]
fn sim_runs_new_order_only_with_a_distributed_share() {
    let args = |share: &str, setup: &str| -> Vec<String> {
        let a = "sim --protocol ramp-f --dcs 1 --partitions 2 --clients 8 --workload tpcc --tpcc-scale tiny \
                 --tpcc-warehouses 4 --tpcc-new-order-only --duration 100ms --tpcc-setup";
        let mut v: Vec<String> = a.split_whitespace().map(String::from).collect();
        v.extend([setup.to_string(), "--tpcc-distributed".into(), share.into()]);
        v
    };
    let run = |share: &str, setup: &str| snowline(&args(share, setup).iter().map(String::as_str).collect::<Vec<_>>());
    let o = run("100", "standard");
    let out = text(&o);
    assert!(o.status.success(), "{out}");
    assert!(out.contains("tpcc audit: all 12 conditions hold"), "{out}");
    assert!(out.contains("tpcc-cf-new-order") && !out.contains("tpcc-cf-payment"), "{out}");
    let o = run("101", "standard");
    assert!(!o.status.success() && text(&o).contains("0 to 100"), "{}", text(&o));
    let o = run("50", "snow");
    assert!(!o.status.success() && text(&o).contains("--tpcc-setup standard"), "{}", text(&o));
}

/// `sim --durable` runs the servers in the durable host with commits that take virtual time: writes wait
/// for their commit, so they get slower as commits do, and a protocol without a durable mode is refused.
#[test]
fn sim_durable_charges_virtual_time_for_commits() {
    let put_p50 = |extra: &[&str]| {
        let mut args = vec!["sim", "--protocol", "contrarian", "--dcs", "2", "--partitions", "2", "--clients", "5"];
        args.extend_from_slice(&["--duration", "300ms", "--check", "claimed"]);
        args.extend_from_slice(extra);
        let o = snowline(&args);
        assert!(o.status.success(), "{}", text(&o));
        let out = String::from_utf8_lossy(&o.stdout).into_owned();
        let line = out.lines().find(|l| l.starts_with("put ")).unwrap_or_else(|| panic!("no put line in {out}"));
        // op, ok, fail, info, ops/s, p50
        let p50: f64 = line.split_whitespace().nth(5).unwrap().parse().unwrap();
        (p50, out)
    };
    let (memory, out) = put_p50(&[]);
    assert!(!out.contains("durable servers"), "{out}");
    let (fast, out) = put_p50(&["--durable", "--fsync-us", "0"]);
    assert!(out.contains("durable servers, every input committed at once"), "{out}");
    let (slow, out) = put_p50(&["--durable", "--fsync-us", "2000"]);
    assert!(out.contains("durable servers, group commit of 2000 µs of virtual time"), "{out}");
    assert!(out.contains("check: tcc: ok"), "the history still passes the checker: {out}");
    assert!(
        slow >= fast + 1_000.0 && slow >= memory + 1_000.0,
        "put p50: memory {memory}, free commits {fast}, 2 ms commits {slow}"
    );
    // Raft's members log their changes, not their inputs: durable too.
    let o = snowline(&["sim", "--protocol", "raft-kv", "--durable", "--duration", "1s", "--check", "claimed"]);
    assert!(o.status.success() && text(&o).contains("check: strict-ser: ok"), "{}", text(&o));
}

fn tempdir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("snowline-test-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn check_exits_0_1_or_2() {
    let dir = tempdir("check");
    let path = dir.join("h.jsonl");
    let path_s = path.to_str().unwrap();
    // T0 writes x and y atomically; T1 reads the new x but the initial y: a fractured read.
    let fractured = r#"{"index":0,"process":0,"dc":0,"type":"invoke","f":"txn","value":[["w","x","x1"],["w","y","y1"]],"time":1}
{"index":1,"process":0,"dc":0,"type":"ok","f":"txn","value":[["w","x","x1"],["w","y","y1"]],"time":2}
{"index":2,"process":1,"dc":0,"type":"invoke","f":"txn","value":[["r","x",null],["r","y",null]],"time":3}
{"index":3,"process":1,"dc":0,"type":"ok","f":"txn","value":[["r","x","x1"],["r","y",null]],"time":4}
"#;
    std::fs::write(&path, fractured).unwrap();
    let o = snowline(&["check", path_s, "--level", "rc"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let o = snowline(&["check", path_s, "--level", "ra"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("fractured-read"), "{}", text(&o));
    let o = snowline(&["check", path_s, "--level", "ra", "--json"]);
    let json: serde_json::Value = serde_json::from_slice(&o.stdout).expect("--json prints JSON");
    assert_eq!(json["ok"], false);

    std::fs::write(&path, format!("{fractured}{{\"index\":4,\"oops\n")).unwrap();
    let o = snowline(&["check", path_s, "--level", "rc"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("h.jsonl:5"), "the error names the line: {}", text(&o));
    let o = snowline(&["check", path_s, "--level", "snapshot-isolation-please"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("valid levels"), "{}", text(&o));

    // `claimed`: the protocol comes from --protocol, or from the history's metadata line.
    std::fs::write(&path, fractured).unwrap();
    let o = snowline(&["check", path_s, "--level", "claimed"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("--protocol"), "{}", text(&o));
    let o = snowline(&["check", path_s, "--level", "claimed", "--protocol", "cv"]);
    assert_eq!(o.status.code(), Some(0), "cv claims rc: {}", text(&o));
    let meta = r#"{"meta":{"protocol":"cure","runtime":"sim","seed":1,"version_order":false}}"#;
    std::fs::write(&path, format!("{meta}\n{fractured}")).unwrap();
    let o = snowline(&["check", path_s, "--level", "claimed"]);
    assert_eq!(o.status.code(), Some(1), "cure claims tcc, which forbids the fractured read: {}", text(&o));
    assert!(text(&o).contains("claimed by cure"), "{}", text(&o));
}

#[test]
fn a_sim_sweep_of_the_contrarian_workload_writes_a_results_directory_with_a_chart() {
    let dir = tempdir("sweep");
    let o = snowline(&[
        "sim",
        "--protocol",
        "av",
        "--dcs",
        "1",
        "--partitions",
        "4",
        "--workload",
        "contrarian",
        "--write-ratio",
        "0.05",
        "--partitions-per-rot",
        "4",
        "--value-bytes",
        "8",
        "--zipf",
        "0.99",
        "--keys-per-partition",
        "100",
        "--clients",
        "1,3",
        "--duration",
        "200ms",
        "--warmup",
        "50ms",
        "--out",
        dir.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let t = text(&o);
    assert!(t.contains("clients per DC 3") && t.contains("ROT p95"), "{t}");
    let csv = std::fs::read_to_string(dir.join("results.csv")).unwrap();
    assert_eq!(csv.lines().count(), 3, "{csv}");
    assert!(dir.join("runs/av-contrarian-c3.json").exists());
    assert!(std::fs::read(dir.join("throughput-vs-p95-rot-latency.png")).unwrap().starts_with(b"\x89PNG"));

    // Bad workload parameters are refused before any work.
    let o = snowline(&["sim", "--workload", "contrarian", "--partitions", "2", "--partitions-per-rot", "4"]);
    assert!(!o.status.success());
    assert!(text(&o).contains("partitions per ROT"), "{}", text(&o));
    let o = snowline(&["sim", "--workload", "tomsic-multi", "--protocol", "cops"]);
    assert!(!o.status.success());
    assert!(text(&o).contains("multi-shot read-only transactions"), "{}", text(&o));
    let o = snowline(&["sim", "--workload", "ycsb-t", "--protocol", "cure"]);
    assert!(!o.status.success());
    assert!(text(&o).contains("ycsb-t needs interactive transactions: cure offers no"), "{}", text(&o));
    // Crashes in the simulator: durable servers restart from their logs; the history still checks.
    let o = snowline(&[
        "sim",
        "--protocol",
        "contrarian",
        "--dcs",
        "2",
        "--partitions",
        "2",
        "--clients",
        "3",
        "--duration",
        "800ms",
        "--crash",
        "dc1/p0@200ms+200ms",
        "--crash",
        "dc0/p1@300ms+100ms",
        "--check",
        "claimed",
    ]);
    let t = text(&o);
    assert!(o.status.success() && t.contains("crash dc1/p0 at 200 ms") && t.contains("check: tcc: ok"), "{t}");
    let o = snowline(&["sim", "--crash", "dc7/p0@1s+1s"]);
    assert!(!o.status.success() && text(&o).contains("cannot crash dc7/p0"), "{}", text(&o));
    // Multi-shot ROTs (Tomsic §5.3.3) run where the protocol offers them.
    let o = snowline(&[
        "sim",
        "--workload",
        "tomsic-multi",
        "--protocol",
        "cure",
        "--partitions",
        "2",
        "--keys",
        "2000",
        "--update-keys",
        "2",
        "--clients",
        "2",
        "--duration",
        "300ms",
        "--warmup",
        "0s",
        "--check",
        "claimed",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let t = text(&o);
    assert!(t.contains("rot-rounds") && t.contains("ROT rounds mean 10.00") && t.contains("check: tcc: ok"), "{t}");
}

#[test]
fn reproduce_runs_its_sweep_and_writes_charts_and_a_summary() {
    // The plumbing of a two-protocol reproduction, with protocols this build has and one tiny client count.
    let dir = tempdir("reproduce");
    let o = snowline(&[
        "reproduce",
        "snow-cops",
        "--quick",
        "--protocols",
        "cv,av",
        "--clients",
        "2",
        "--out",
        dir.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let summary = std::fs::read_to_string(dir.join("summary.md")).unwrap();
    assert!(summary.contains("Headline") && summary.contains("normalised"), "{summary}");
    for chart in
        ["normalised-median-rot-latency.png", "peak-throughput.png", "throughput-vs-median-rot-latency-w0.1.png"]
    {
        assert!(std::fs::read(dir.join(chart)).unwrap().starts_with(b"\x89PNG"), "{chart}");
    }
    // A protocol this build lacks is a clear error naming it.
    let o = snowline(&["reproduce", "tomsic", "--protocols", "paxos,cv", "--out", dir.to_str().unwrap()]);
    assert!(!o.status.success());
    assert!(text(&o).contains("paxos"), "{}", text(&o));
}

#[test]
fn reproduce_nmsi_runs_all_six_criteria() {
    let dir = tempdir("reproduce-nmsi");
    let o = snowline(&["reproduce", "nmsi", "--quick", "--clients", "2", "--out", dir.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o));
    let summary = std::fs::read_to_string(dir.join("summary.md")).unwrap();
    assert!(summary.contains("NMSI's throughput is comparable to RC's"), "{summary}");
    assert!(!summary.contains("not run"), "every criterion of the paper is registered: {summary}");
    // Every criterion committed transactions in every Fig. 4 row.
    for p in ["nmsi", "rc", "ser", "us", "si", "psi"] {
        let row = summary.lines().find(|l| l.starts_with(&format!("| {p} | "))).expect("a Fig. 4 row");
        assert!(!row.contains("| - |") && !row.contains("| 0 |"), "{row}");
    }
    for chart in [
        "fig4-max-throughput-vs-sites.png",
        "fig3-termination-latency.png",
        "fig3-abort-ratio.png",
        "fig1-throughput-vs-termination-latency.png",
    ] {
        assert!(std::fs::read(dir.join(chart)).unwrap().starts_with(b"\x89PNG"), "{chart}");
    }
}

/// `snowline txn` against a 2PL cluster: reads then writes commit atomically; a transaction that loses a
/// deadlock to an older one is aborted, prints its cause and exits 3.
#[test]
fn txn_commits_on_a_2pl_cluster_and_an_aborted_one_prints_its_cause_and_exits_3() {
    let dir = tempdir("txn-2pl");
    let d = dir.to_str().unwrap();
    let o = snowline(&[
        "cluster",
        "up",
        "--protocol",
        "2pl",
        "--dcs",
        "1",
        "--partitions",
        "2",
        "--dir",
        d,
        "--background",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let _guard = Cluster(&dir);
    let o = snowline(&["--cluster", d, "txn", "--get", "k", "--put", "k=1", "--put", "k2=1"]);
    assert!(o.status.success(), "{}", text(&o));
    let json: serde_json::Value = serde_json::from_slice(&o.stdout).expect("txn prints JSON");
    assert_eq!(json["committed"], true);
    assert_eq!(json["reads"][0]["value"], serde_json::Value::Null);

    // An older transaction (begun first, through the client library) holds a shared lock on k. The CLI's
    // transaction reads k2, then waits to write k; the older one then writes k2, which the younger holds:
    // wound-wait aborts the younger (the CLI's) with cause deadlock, and the older commits.
    let config = snowline_net::ClusterConfig::load(dir.join("cluster.toml")).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let runtime = snowline_net::ClientRuntime::<snowline_protocols::TwoPl>::connect(&config, 0).await.unwrap();
        let session = runtime.session();
        let mut older = session.begin().await.unwrap();
        assert_eq!(older.get(&["k".into()]).await.unwrap(), vec![Some("1".into())]);
        let cli = tokio::process::Command::new(env!("CARGO_BIN_EXE_snowline"))
            .args(["--cluster", d, "txn", "--get", "k2", "--put", "k=2"])
            .output();
        let cli = tokio::spawn(cli);
        tokio::time::sleep(Duration::from_millis(700)).await; // the CLI's commit now waits for k
        older.put("k2", "older");
        let committed = older.commit().await;
        let o = cli.await.unwrap().unwrap();
        assert_eq!(o.status.code(), Some(3), "{}", text(&o));
        assert!(text(&o).contains("transaction aborted (deadlock)"), "{}", text(&o));
        assert!(committed.is_ok(), "the older transaction commits: {committed:?}");
    });
    let o = snowline(&["--cluster", d, "rot", "k", "k2"]);
    assert!(text(&o).contains("\"older\"") && text(&o).contains("\"1\""), "{}", text(&o));
}

#[test]
fn cluster_up_authenticates_peers_unless_told_otherwise_and_refuses_impossible_sizes() {
    let dir = tempdir("peer-auth");
    let o = snowline(&["cluster", "up", "--protocol", "cv", "--dcs", "1", "--partitions", "0"]);
    assert!(!o.status.success() && text(&o).contains("--dcs and --partitions must be at least 1"), "{}", text(&o));
    let o = snowline(&["cluster", "up", "--protocol", "cv", "--dcs", "1", "--partitions", "2", "--base-port", "65535"]);
    assert!(!o.status.success() && text(&o).contains("base port 65535 leaves no room for 2 nodes"), "{}", text(&o));
    let o = snowline(&["bench", "--protocol", "cv", "--clients", "0", "--duration", "1s"]);
    assert!(!o.status.success() && text(&o).contains("--clients must be at least 1"), "{}", text(&o));

    // Client TLS on: the CLI's client connects with TLS, verifying the servers; replication runs over mutual TLS.
    let secure = dir.join("secure");
    let d = secure.to_str().unwrap();
    let up = ["cluster", "up", "--protocol", "cv", "--dcs", "2", "--partitions", "1", "--background", "--dir", d];
    let o = snowline(&[&up[..], &["--client-tls"]].concat());
    assert!(o.status.success(), "{}", text(&o));
    let _guard = Cluster(&secure);
    assert!(text(&o).contains("peers authenticated by mutual TLS") && text(&o).contains("clients must use TLS"));
    let config = snowline_net::ClusterConfig::load(secure.join("cluster.toml")).unwrap();
    assert!(config.tls.as_ref().is_some_and(|t| t.clients) && !config.insecure);
    let o = snowline(&["--cluster", d, "put", "k", "v"]);
    assert!(o.status.success(), "{}", text(&o));
    let deadline = Instant::now() + Duration::from_secs(10);
    while !text(&snowline(&["--cluster", d, "--dc", "1", "get", "k"])).contains("\"v\"") {
        assert!(Instant::now() < deadline, "the write never reached dc1 over mutual TLS");
        std::thread::sleep(Duration::from_millis(50));
    }

    // --insecure says so, on the command line and in every server's log.
    let insecure = dir.join("insecure");
    let d = insecure.to_str().unwrap();
    let up = ["cluster", "up", "--protocol", "cv", "--dcs", "1", "--partitions", "1", "--background", "--dir", d];
    let o = snowline(&[&up[..], &["--insecure"]].concat());
    assert!(o.status.success() && text(&o).contains("INSECURE"), "{}", text(&o));
    let _guard2 = Cluster(&insecure);
    let log = std::fs::read_to_string(insecure.join("node-0.log")).unwrap();
    assert!(log.contains("WARNING: insecure = true"), "{log}");

    // `certs` completes a multi-host config that has no [tls] yet.
    let path = dir.join("multi.toml");
    let mut text_config =
        std::fs::read_to_string(insecure.join("cluster.toml")).unwrap().replace("insecure = true\n", "");
    std::fs::write(&path, &text_config).unwrap();
    let o = snowline(&["server", "--config", path.to_str().unwrap(), "--node", "0"]);
    assert!(!o.status.success() && text(&o).contains("no [tls] section"), "{}", text(&o));
    let o = snowline(&["certs", "--config", path.to_str().unwrap(), "--out", dir.join("tls").to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o));
    let section =
        String::from_utf8_lossy(&o.stdout).lines().skip_while(|l| *l != "[tls]").take(4).collect::<Vec<_>>().join("\n");
    text_config += &format!("\n{section}\n");
    std::fs::write(&path, &text_config).unwrap();
    let config = snowline_net::ClusterConfig::load(&path).unwrap();
    assert!(config.tls.is_some(), "{text_config}");
    assert!(dir.join("tls/node-0.key").exists() && dir.join("tls/ca.pem").exists());
}

#[test]
fn output_into_a_closed_pipe_ends_quietly() {
    use std::io::{BufRead, BufReader};
    let mut child = Command::new(env!("CARGO_BIN_EXE_snowline"))
        .args(["sim", "--protocol", "cv", "--clients", "2", "--duration", "10s"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut first).unwrap();
    assert!(first.starts_with("seed"), "{first}");
    // The reader is gone (as `| head -1` leaves it): the next line the command prints meets a closed pipe.
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(141), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(out.stderr.is_empty(), "{}", String::from_utf8_lossy(&out.stderr));
}

/// `bench --vs-redis` runs snowline's GETs and redis-server's in one command and prints their ratios, the
/// like-for-like one (both timed by one client) first; without redis installed it says so and still runs.
#[test]
fn bench_vs_redis_prints_both_systems_or_says_redis_is_missing() {
    let o = snowline(&[
        "bench",
        "--protocol",
        "cops",
        "--dcs",
        "1",
        "--partitions",
        "1",
        "--workload",
        "kv",
        "--write-ratio",
        "0",
        "--clients",
        "1",
        "--duration",
        "500ms",
        "--vs-redis",
    ]);
    let out = text(&o);
    assert!(o.status.success(), "{out}");
    let installed = ["redis-server", "redis-benchmark"]
        .iter()
        .all(|b| std::process::Command::new(b).arg("--version").output().is_ok_and(|o| o.status.success()));
    if !installed {
        assert!(out.contains("not installed (apt-get install redis-server): comparison skipped"), "{out}");
        return;
    }
    let line = |start: &str| out.lines().find(|l| l.trim_start().starts_with(start)).map(str::to_owned);
    let ratio = |l: &str, what: &str| -> f64 {
        let rest = &l[l.find(what).unwrap_or_else(|| panic!("no {what} in {l}")) + what.len()..];
        rest.split('×').next().unwrap().trim().parse().unwrap_or_else(|e| panic!("{l}: {e}"))
    };
    assert!(line("redis-server").is_some(), "redis figures printed: {out}");
    let get = line("snowline get").unwrap_or_else(|| panic!("snowline's GETs printed: {out}"));
    assert!(get.contains("p50") && get.contains("µs"), "{get}");
    let same = line("against redis-server timed the same way").unwrap_or_else(|| panic!("{out}"));
    let theirs = line("against redis-benchmark's own figures").unwrap_or_else(|| panic!("{out}"));
    for l in [&same, &theirs] {
        let p50 = ratio(l, "p50 ");
        // A well-formed ratio, not a speed target (those live in benchmarks).
        assert!(p50.is_finite() && p50 > 0.0, "{l}");
    }
}

/// The lines of `text` that show an operation: the block `cluster up`, `cluster status` and every refusal
/// print, "the operations P serves" and one example command line per operation.
fn served_block(text: &str, protocol: &str) -> Vec<String> {
    let head = format!("the operations {protocol} serves");
    let mut lines = text.lines().skip_while(|l| !l.starts_with(&head));
    assert!(lines.next().is_some(), "no {head:?} in:\n{text}");
    lines.take_while(|l| l.starts_with("  snowline --cluster ")).map(str::to_owned).collect()
}

/// Each served operation's example, in the order the block lists them (the arguments after the directory).
fn examples(block: &[String], dir: &str) -> Vec<String> {
    let prefix = format!("  snowline --cluster {dir} ");
    block
        .iter()
        .map(|l| {
            let rest = l.strip_prefix(&prefix).unwrap_or_else(|| panic!("{l:?} starts with {prefix:?}"));
            rest.split("  ").next().unwrap().trim().to_string()
        })
        .collect()
}

/// raft-kv serves single-key operations only and nmsi no blind writes: `cluster up`, `cluster status` and
/// every refusal name the operations the cluster's protocol serves, one example each, and the examples work.
#[test]
fn refusals_name_the_operations_the_clusters_protocol_serves() {
    let dir = tempdir("served-raft");
    let d = dir.to_str().unwrap();
    let up = ["cluster", "up", "--protocol", "raft-kv", "--replicas", "3", "--dcs", "1", "--partitions", "1"];
    let o = snowline(&[&up[..], &["--dir", d, "--background"]].concat());
    assert!(o.status.success(), "{}", text(&o));
    let _guard = Cluster(&dir);
    let served = ["put k1 hello", "get k1"];
    assert_eq!(examples(&served_block(&text(&o), "raft-kv"), d), served, "{}", text(&o));
    let status = text(&snowline(&["cluster", "status", "--dir", d]));
    assert_eq!(examples(&served_block(&status, "raft-kv"), d), served, "{status}");
    for example in served {
        let o = snowline(&[&["--cluster", d][..], &example.split(' ').collect::<Vec<_>>()].concat());
        assert!(o.status.success(), "{example}: {}", text(&o));
    }
    // A read of several keys is refused up front (raft-kv's offer says single-key reads), and so are
    // transactions; `txn --get` no longer suggests `rot`, which raft-kv refuses too.
    let o = snowline(&["--cluster", d, "rot", "k1"]);
    assert!(o.status.success(), "one key is a GET: {}", text(&o));
    for (args, why) in [
        (&["rot", "k1", "k2"][..], "raft-kv offers no read-only transactions over several keys; use cops"),
        (&["txn", "--get", "k1"], "txn --get needs interactive transactions: raft-kv offers no interactive"),
        (&["txn", "--put", "k1=a", "--put", "k2=b"], "raft-kv offers no write transactions"),
    ] {
        let o = snowline(&[&["--cluster", d][..], args].concat());
        assert_eq!(o.status.code(), Some(1), "{args:?}: {}", text(&o));
        let t = text(&o);
        assert!(t.contains(why) && !t.contains("rot` instead"), "{args:?}: {t}");
        assert_eq!(examples(&served_block(&t, "raft-kv"), d), served, "{args:?}: {t}");
    }

    // nmsi: no put, and no transaction that writes a key it did not read (its snapshot would hold no version
    // of the key: certification would abort it, blaming a concurrent transaction there is none of).
    let dir = tempdir("served-nmsi");
    let d = dir.to_str().unwrap();
    let up = ["cluster", "up", "--protocol", "nmsi", "--replicas", "1", "--dcs", "1", "--partitions", "1"];
    let o = snowline(&[&up[..], &["--dir", d, "--background"]].concat());
    assert!(o.status.success(), "{}", text(&o));
    let _guard = Cluster(&dir);
    let served = ["get k1", "rot k1 k2", "txn --get k1 --put k1=b"];
    assert_eq!(examples(&served_block(&text(&o), "nmsi"), d), served, "{}", text(&o));
    for _ in 0..2 {
        // Twice: the second writes over an existing version, which a blind write never could.
        let o = snowline(&["--cluster", d, "txn", "--get", "a", "--put", "a=1"]);
        assert!(o.status.success(), "{}", text(&o));
    }
    let o = snowline(&["--cluster", d, "txn", "--put", "a=2"]);
    assert_eq!(o.status.code(), Some(1), "refused, not aborted (exit 3): {}", text(&o));
    let t = text(&o);
    assert!(t.contains("nmsi offers no blind writes: a transaction must read each key it writes"), "{t}");
    assert!(t.contains(&format!("snowline --cluster {d} txn --get a --put a=2")), "the form that works: {t}");
    assert!(!t.contains("concurrent transaction"), "{t}");
    assert_eq!(examples(&served_block(&t, "nmsi"), d), served, "{t}");
    let o = snowline(&["--cluster", d, "put", "a", "3"]);
    let t = text(&o);
    assert!(!o.status.success() && t.contains("nmsi offers no blind writes; use cops"), "{t}");
    assert!(t.contains("txn --get a --put a=3"), "{t}");
    assert_eq!(examples(&served_block(&t, "nmsi"), d), served, "{t}");
    let o = snowline(&["--cluster", d, "txn", "--get", "a", "--put", "a=2"]);
    assert!(o.status.success(), "{}", text(&o));
    let o = snowline(&["--cluster", d, "get", "a"]);
    assert!(text(&o).contains("\"2\""), "{}", text(&o));
}

/// `--help` of each client command lists, per form of it, the protocols that serve it (from the registry),
/// and no list kept by hand.
#[test]
fn client_command_help_lists_the_protocols_serving_each_operation() {
    let help = |cmd: &str| {
        let o = snowline(&[cmd, "--help"]);
        assert!(o.status.success(), "{}", text(&o));
        text(&o)
    };
    // The protocols listed under the line that starts with `usage`.
    let serving = |help: &str, usage: &str| -> Vec<String> {
        let mut lines = help.lines().skip_while(|l| !l.trim_start().starts_with(usage));
        assert!(lines.next().is_some(), "no {usage:?} in:\n{help}");
        lines.next().unwrap().split(", ").map(|p| p.trim().to_string()).collect()
    };
    let put = serving(&help("put"), "put KEY VALUE");
    assert!(put.contains(&"raft-kv".into()) && put.contains(&"cv".into()) && !put.contains(&"nmsi".into()), "{put:?}");
    let get = serving(&help("get"), "get KEY");
    assert!(get.contains(&"raft-kv".into()) && get.contains(&"nmsi".into()), "{get:?}");
    let rot = serving(&help("rot"), "rot KEY KEY...");
    assert!(!rot.contains(&"raft-kv".into()) && rot.contains(&"nmsi".into()), "{rot:?}");
    let txn = help("txn");
    assert!(!txn.contains("(2pl, occ)") && !txn.contains("(cure, av, op, cv)"), "{txn}");
    let interactive = serving(&txn, "txn --get KEY... [--put KEY=VALUE...]");
    for p in ["2pl", "occ", "nmsi", "rc", "ser", "us", "si", "psi"] {
        assert!(interactive.contains(&p.to_string()), "{p}: {interactive:?}");
    }
    assert!(!interactive.contains(&"cv".into()), "{interactive:?}");
    let blind = serving(&txn, "txn --put KEY=VALUE...");
    assert!(blind.contains(&"cv".into()) && !blind.contains(&"nmsi".into()) && !blind.contains(&"raft-kv".into()));
    let up = text(&snowline(&["cluster", "up", "--help"]));
    assert!(up.contains("cops-snow (cc-lo)") && up.contains("nmsi (jessy, jessy-nmsi)"), "{up}");
}

/// Every server of the cluster stopped: a client says at once that the cluster looks down and how to see
/// which nodes run, instead of retrying for 30 s or printing "queueing and retrying" then "outcome unknown".
#[test]
fn a_client_of_a_stopped_cluster_says_it_looks_down_within_seconds() {
    let dir = tempdir("looks-down");
    let d = dir.to_str().unwrap();
    let o =
        snowline(&["cluster", "up", "--protocol", "cv", "--dcs", "1", "--partitions", "2", "--dir", d, "--background"]);
    assert!(o.status.success(), "{}", text(&o));
    let _guard = Cluster(&dir);
    let o = snowline(&["--cluster", d, "put", "a", "1"]);
    assert!(o.status.success(), "{}", text(&o));
    let o = snowline(&["cluster", "down", "--dir", d]);
    assert!(o.status.success(), "{}", text(&o));
    for args in [&["get", "a"][..], &["put", "a", "2"], &["rot", "a", "b"], &["txn", "--put", "a=3"]] {
        let start = Instant::now();
        let o = snowline(&[&["--cluster", d][..], args].concat());
        let took = start.elapsed();
        let t = text(&o);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {t}");
        assert!(took < Duration::from_secs(5), "{args:?} took {took:?}: {t}");
        assert!(t.contains(&format!("error: the cluster in {d} looks down")), "{args:?}: {t}");
        assert!(t.contains(&format!("`snowline cluster status --dir {d}`")), "{args:?}: {t}");
        assert!(!t.contains("outcome unknown") && !t.contains("retrying"), "{args:?}: {t}");
    }
}

/// An OS error is said once: `cluster up` on a port another process holds names the node, the address and
/// the error, and its server's log says it once too.
#[test]
fn a_port_in_use_is_said_once() {
    let squatter = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = squatter.local_addr().unwrap().port().to_string();
    let dir = tempdir("port-in-use");
    let d = dir.to_str().unwrap();
    let up = ["cluster", "up", "--protocol", "cv", "--dcs", "1", "--partitions", "1", "--base-port", &port];
    let o = snowline(&[&up[..], &["--dir", d, "--background"]].concat());
    let _guard = Cluster(&dir);
    let t = text(&o);
    assert!(!o.status.success(), "{t}");
    assert_eq!(t.matches("Address already in use (os error 98)").count(), 1, "{t}");
    assert!(t.contains("node 0 exited") && t.contains(&format!("cannot listen on 127.0.0.1:{port}")), "{t}");
    let log = std::fs::read_to_string(dir.join("node-0.log")).unwrap();
    assert_eq!(log.matches("Address already in use (os error 98)").count(), 1, "{log}");
}

/// A misspelt protocol or consistency level gets a "did you mean".
#[test]
fn misspelt_protocols_and_levels_get_a_did_you_mean() {
    let o = snowline(&["cluster", "up", "--protocol", "nmis", "--dir", tempdir("nmis").to_str().unwrap()]);
    assert!(!o.status.success() && text(&o).contains("unknown protocol \"nmis\" (did you mean nmsi?)"), "{}", text(&o));
    let o = snowline(&["sim", "--protocol", "contrarain", "--duration", "10ms"]);
    assert!(!o.status.success() && text(&o).contains("(did you mean contrarian?)"), "{}", text(&o));
    let o = snowline(&["sim", "--protocol", "cv", "--check", "causl", "--duration", "10ms"]);
    assert!(!o.status.success() && text(&o).contains("unknown consistency level \"causl\" (did you mean causal?)"));
    let dir = tempdir("did-you-mean");
    let h = dir.join("h.jsonl");
    std::fs::write(&h, "").unwrap();
    let o = snowline(&["check", h.to_str().unwrap(), "--level", "strict-serr"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("(did you mean strict-ser?)"), "{}", text(&o));
    let o = snowline(&["check", h.to_str().unwrap(), "--level", "claimd"]);
    assert!(text(&o).contains("(did you mean claimed?)"), "{}", text(&o));
    let o = snowline(&["sim", "--protocol", "paxos", "--duration", "10ms"]);
    assert!(!text(&o).contains("did you mean"), "{}", text(&o));
}

/// `snowline bound 2pc` (issue 33): the LAN and WAN tables with the seed's figures beside them, a
/// crossover, seeded (the same output twice); bad participant lists are refused.
#[test]
fn bound_2pc_prints_both_profiles_beside_the_seed_and_is_seeded() {
    let run = |extra: &[&str]| {
        let mut args = vec!["bound", "2pc", "--trials", "3000"];
        args.extend_from_slice(extra);
        snowline(&args)
    };
    let o = run(&[]);
    assert!(o.status.success(), "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout).to_string();
    assert!(out.contains("profile lan") && out.contains("profile wan"), "{out}");
    assert!(out.contains("750 / 1,100") && out.contains("200 / 120") && out.contains("[VA+OR]"), "{out}");
    assert!(out.contains("crossover: coordinated 2PC allows more than decentralized from N = "), "{out}");
    assert_eq!(out, String::from_utf8_lossy(&run(&[]).stdout), "seeded");
    let bad = run(&["--participants", "ten"]);
    assert!(!bad.status.success() && text(&bad).contains("--participants \"ten\""), "{}", text(&bad));
}

/// `snowline analyze` (issue 34): the TPC-C example's classification as the paper's §6 gives it, the JSON
/// tools read, and a located error (exit 1, no verdict) for a bad schema.
#[test]
fn analyze_classifies_tpcc_and_locates_bad_input() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let schema = root.join("examples/tpcc/schema.sql");
    let txns = root.join("examples/tpcc/transactions.sql");
    let (schema, txns) = (schema.to_str().unwrap(), txns.to_str().unwrap());
    let o = snowline(&["analyze", schema, "--transactions", txns, "--json"]);
    assert!(o.status.success(), "{}", text(&o));
    let json: serde_json::Value = serde_json::from_slice(&o.stdout).expect("one JSON object");
    let coordination = |name: &str| {
        json["transactions"].as_array().unwrap().iter().find(|t| t["name"] == name).map(|t| t["coordination"].clone())
    };
    assert_eq!(coordination("new_order"), Some("owner-increment".into()), "{json}");
    assert_eq!(coordination("payment"), Some("none".into()), "{json}");
    let dir = std::env::temp_dir().join(format!("snowline-analyze-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bad = dir.join("bad.sql");
    std::fs::write(&bad, "CREATE TABLE t (a INT PRIMARY KEY);\nCREATE TABLE u (b INT REFERENCES nowhere(x));\n")
        .unwrap();
    let o = snowline(&["analyze", bad.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("bad.sql:2:"), "{}", text(&o));
    assert!(o.stdout.is_empty(), "no verdict: {}", text(&o));
    let _ = std::fs::remove_dir_all(&dir);
}

/// The analyzer's verdicts choose the mechanisms of a coordination-free TPC-C run: TPC-C's own schema runs
/// (New-Order with its owner increment, Delivery serially at its district) and passes the audit and `ra`;
/// with a floor on stock that New-Order's decrements can break, the analyzer says New-Order needs
/// serializable execution and the coordination-free run is refused, naming the invariant.
#[test]
fn analyzer_verdicts_choose_the_coordination_free_tpcc_mechanisms() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let dir = std::env::temp_dir().join(format!("snowline-verdicts-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let verdicts = |example: &str| {
        let schema = root.join(format!("examples/{example}/schema.sql"));
        let txns = root.join(format!("examples/{example}/transactions.sql"));
        let o = snowline(&["analyze", schema.to_str().unwrap(), "--transactions", txns.to_str().unwrap(), "--json"]);
        assert!(o.status.success(), "{}", text(&o));
        let file = dir.join(format!("{example}.json"));
        std::fs::write(&file, &o.stdout).unwrap();
        file.to_str().unwrap().to_string()
    };
    let run = |file: &str| {
        snowline(&[
            "sim",
            "--protocol",
            "ramp-f",
            "--dcs",
            "1",
            "--partitions",
            "2",
            "--clients",
            "20",
            "--workload",
            "tpcc",
            "--tpcc-scale",
            "small",
            "--duration",
            "100ms",
            "--check",
            "ra",
            "--tpcc-verdicts",
            file,
        ])
    };
    let o = run(&verdicts("tpcc"));
    let out = text(&o);
    assert!(o.status.success(), "{out}");
    assert!(out.contains("new_order     needs owner-increment"), "{out}");
    assert!(out.contains("delivery      needs serializable     runs serializable     (tpcc-cf-delivery)"), "{out}");
    assert!(out.contains("tpcc audit: all 12 conditions hold") && out.contains("check: ra: ok"), "{out}");
    // A floor on S_QUANTITY without restocking: New-Order needs coordination on the stock rows, which the
    // store gives it (bounded decrements checked at each stock row's owner), and the audit checks the floor.
    let floor = verdicts("tpcc-stock-floor");
    let o = run(&floor);
    let out = text(&o);
    assert!(o.status.success(), "{out}");
    assert!(
        out.contains("new_order     needs serializable     runs serializable     (tpcc-cf-new-order-bounded)"),
        "{out}"
    );
    assert!(out.contains("s_quantity_floor: S_QUANTITY >= 10 kept at each stock row's owner"), "{out}");
    assert!(out.contains("tpcc audit: all 13 conditions hold") && out.contains("check: ra: ok"), "{out}");
    assert!(out.contains("S_QUANTITY >= the schema's floor"), "{out}");
    // nocc cannot abort a write, so it cannot keep the floor: refused before running.
    let o = snowline(&["sim", "--protocol", "nocc", "--dcs", "1", "--workload", "tpcc", "--tpcc-verdicts", &floor]);
    let out = text(&o);
    assert!(!o.status.success() && out.contains("needs a store that can abort a write"), "{out}");
    // A bound the store has no mechanism for (an upper bound on the quantity): refused, naming the invariant.
    let json = std::fs::read_to_string(&floor).unwrap().replace("\"op\": \">=\"", "\"op\": \"<=\"");
    let upper = dir.join("upper.json");
    std::fs::write(&upper, json).unwrap();
    let o = run(upper.to_str().unwrap());
    let out = text(&o);
    assert_eq!(o.status.code(), Some(1), "{out}");
    assert!(out.contains("new_order needs serializable execution") && out.contains("s_quantity_floor"), "{out}");
    assert!(!out.contains("tpcc audit"), "refused before running: {out}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The plan's list of the analyzer's owner-increment rules is the analyzer's.
#[test]
fn the_plan_knows_the_analyzers_owner_increment_rules() {
    assert_eq!(snowline_harness::tpcc_plan::OWNER_INCREMENT_RULES, snowline_analyzer::rules::OWNER_INCREMENT_RULES);
}

/// `bench` with a list of protocols runs each on its own cluster, checks each history, and ends with one row
/// per run and NMSI's throughput ratio.
#[test]
fn bench_runs_a_list_of_protocols_side_by_side() {
    let dir = tempdir("bench-list");
    let history = dir.join("h.jsonl");
    let o = snowline(&[
        "bench",
        "--protocol",
        "nmsi,rc",
        "--workload",
        "ycsb-t",
        "--dcs",
        "1",
        "--partitions",
        "2",
        "--clients",
        "2",
        "--keys",
        "100",
        "--ro-reads",
        "2",
        "--update-reads",
        "2",
        "--update-writes",
        "1",
        "--read-only-share",
        "0.5",
        "--key-dist",
        "uniform",
        "--duration",
        "1s",
        "--check",
        "claimed",
        "--history",
        history.to_str().unwrap(),
    ]);
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    assert!(t.contains("load average (1 min) at start") && t.contains("load average (1 min) at end"), "{t}");
    assert!(t.contains("check: nmsi: ok") && t.contains("check: rc: ok"), "{t}");
    // The table's header (each run's own output starts with "protocol NAME").
    let table: Vec<&str> =
        t.lines().skip_while(|l| !(l.starts_with("protocol ") && l.contains("termination"))).collect();
    assert!(table.first().is_some_and(|h| h.contains("server µs") && h.contains("machine")), "{t}");
    for protocol in ["nmsi", "rc"] {
        let row = table.iter().find(|l| l.starts_with(&format!("{protocol} "))).unwrap_or_else(|| panic!("{t}"));
        assert!(row.contains("multicast") && row.contains(" ok "), "{row}");
        assert!(dir.join(format!("h-{protocol}-multicast-c2.jsonl")).exists(), "one history per run");
    }
    assert!(t.contains("nmsi/rc = "), "{t}");
    let _ = std::fs::remove_dir_all(&dir);
}
