//! The cluster lifecycle end to end (issue 14, "Safe operations"), with real server processes: `cluster up`
//! refuses a directory whose cluster runs and starts a stopped one again from its config, certificates and
//! data; `cluster status` shows each node; `cluster restart --node N` brings a killed server back with its
//! data; `cluster down` stops exactly the cluster's servers (restarted and hand-started ones too), verifying
//! each pid, and leaves a foreign process whose pid is in the pid file alone.
// These tests drive real processes: they poll with the real clock.
#![allow(clippy::disallowed_methods)]

use crate::common;

use common::*;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Stops the background cluster even when an assertion fails.
struct Cluster<'a>(&'a Path);

impl Drop for Cluster<'_> {
    fn drop(&mut self) {
        let _ = snowline(&["cluster", "down", "--dir", self.0.to_str().unwrap()]);
    }
}

/// Whether `pid` is a live process (not gone, not a zombie), from /proc.
fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .is_ok_and(|stat| stat.rsplit_once(')').is_some_and(|(_, rest)| !rest.trim_start().starts_with('Z')))
}

/// Node `node`'s pid in DIR/pids.
fn pid_of(dir: &Path, node: u32) -> u32 {
    let pids = std::fs::read_to_string(dir.join("pids")).unwrap();
    pids.lines()
        .find_map(|l| l.strip_prefix(&format!("{node} ")))
        .and_then(|p| p.trim().parse().ok())
        .unwrap_or_else(|| panic!("node {node} in {pids}"))
}

/// The line of `cluster status` output for node `node`.
fn status_line(status: &str, node: u32) -> String {
    status
        .lines()
        .find(|l| l.split_whitespace().next() == Some(&node.to_string()))
        .unwrap_or_else(|| panic!("no line for node {node} in:\n{status}"))
        .to_string()
}

fn sigkill(pid: u32) {
    assert!(Command::new("kill").args(["-9", &pid.to_string()]).status().unwrap().success());
    let deadline = Instant::now() + Duration::from_secs(10);
    while alive(pid) {
        assert!(Instant::now() < deadline, "pid {pid} survived SIGKILL");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Reads KEYS from the cluster (retrying while a restarted server comes back) until each has its value.
fn assert_readable(d: &str, keys: &[(String, String)]) {
    let names: Vec<&str> = keys.iter().map(|(k, _)| k.as_str()).collect();
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let o = snowline(&[&["--cluster", d, "rot"][..], &names].concat());
        if o.status.success() {
            let json: serde_json::Value = serde_json::from_slice(&o.stdout).expect("rot prints JSON");
            let values: Vec<&str> =
                json["reads"].as_array().unwrap().iter().map(|r| r["value"].as_str().unwrap_or("")).collect();
            let want: Vec<&str> = keys.iter().map(|(_, v)| v.as_str()).collect();
            if values == want {
                return;
            }
            assert!(Instant::now() < deadline, "acknowledged writes lost: read {values:?}, wrote {want:?}");
        } else {
            assert!(Instant::now() < deadline, "reads keep failing: {}", text(&o));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn a_durable_cluster_refuses_a_second_up_and_brings_a_killed_node_back_with_its_data() {
    let root = tempdir("lifecycle", "durable");
    let (dir, data) = (root.join("cluster"), root.join("data"));
    let (d, data_dir) = (dir.to_str().unwrap(), data.to_str().unwrap());
    let up = ["cluster", "up", "--protocol", "cv", "--dcs", "1", "--partitions", "2", "--dir", d, "--background"];
    ok(&[&up[..], &["--data-dir", data_dir]].concat());
    let _guard = Cluster(&dir);
    let (p0, p1) = (pid_of(&dir, 0), pid_of(&dir, 1));

    // Writes on both partitions, acknowledged before anything is killed.
    let keys: Vec<(String, String)> = (0..10).map(|i| (format!("k{i}"), format!("v{i}"))).collect();
    let puts: Vec<String> = keys.iter().map(|(k, v)| format!("--put={k}={v}")).collect();
    ok(&[&["--cluster", d, "txn"][..], &puts.iter().map(String::as_str).collect::<Vec<_>>()].concat());

    // A second `cluster up` on the running cluster's directory, with or without flags: refused, naming the
    // directory, the running nodes and how to stop it; the cluster keeps running untouched.
    let config_before = std::fs::read(dir.join("cluster.toml")).unwrap();
    for second in [&[&up[..], &["--data-dir", data_dir]].concat()[..], &["cluster", "up", "--dir", d, "--background"]] {
        let err = refused(second);
        assert!(err.contains(&format!("{d} holds a running cluster")), "{err}");
        assert!(err.contains(&format!("node 0 (pid {p0})")) && err.contains(&format!("node 1 (pid {p1})")), "{err}");
        assert!(err.contains(&format!("snowline cluster down --dir {d}")), "{err}");
    }
    assert_eq!(std::fs::read(dir.join("cluster.toml")).unwrap(), config_before, "the config was not replaced");
    assert!(alive(p0) && alive(p1));

    // Status: one line per node, up, with its protocol, pid, address and data directory.
    let config = snowline_net::ClusterConfig::load(dir.join("cluster.toml")).unwrap();
    let status = ok(&["cluster", "status", "--dir", d]);
    for (node, pid) in [(0, p0), (1, p1)] {
        let line = status_line(&status, node);
        let addr = &config.node(node).unwrap().addr;
        let node_data = data.join(format!("node-{node}"));
        for want in [" up ", " cv ", &format!(" {pid} "), addr, node_data.to_str().unwrap(), "MiB"] {
            assert!(line.contains(want), "node {node}: {want:?} missing from {line:?}\n{status}");
        }
    }
    assert!(status.contains("2 of 2 nodes up"), "{status}");

    // SIGKILL node 1: status shows it down (and how to bring it back); the cluster still runs, so `up` is
    // still refused.
    sigkill(p1);
    let status = ok(&["cluster", "status", "--dir", d]);
    assert!(status_line(&status, 1).contains(" down "), "{status}");
    assert!(status_line(&status, 0).contains(" up "), "{status}");
    assert!(status.contains(&format!("snowline cluster restart --dir {d} --node 1")), "{status}");
    let err = refused(&["cluster", "up", "--dir", d, "--background"]);
    assert!(err.contains(&format!("node 0 (pid {p0}) is up")), "{err}");

    // `cluster restart --node 1` brings it back from its data, with a new pid recorded in DIR/pids.
    let out = ok(&["cluster", "restart", "--dir", d, "--node", "1"]);
    let p1b = pid_of(&dir, 1);
    assert!(p1b != p1 && alive(p1b), "{out}");
    assert!(out.contains(&format!("node 1 is running again: pid {p1b}")), "{out}");
    let err = refused(&["cluster", "restart", "--dir", d, "--node", "1"]);
    assert!(err.contains(&format!("node 1 is already running (pid {p1b})")), "{err}");
    let log = std::fs::read_to_string(dir.join("node-1.log")).unwrap();
    assert!(log.contains("---- node 1 started again ----") && log.contains("recovered"), "{log}");
    assert_readable(d, &keys);
    let status = ok(&["cluster", "status", "--dir", d]);
    let line = status_line(&status, 1);
    assert!(line.contains(" up ") && line.contains(&format!(" {p1b} ")), "{status}");
    assert!(status.contains("2 of 2 nodes up"), "{status}");

    // `cluster down` stops every server, the restarted one too, and says how many ran.
    let out = ok(&["cluster", "down", "--dir", d]);
    assert!(out.contains("stopped 2 server processes (2 were running)"), "{out}");
    assert!(out.contains(&format!("node 0 (pid {p0})")) && out.contains(&format!("node 1 (pid {p1b})")), "{out}");
    assert!(!alive(p0) && !alive(p1b), "a server survived `cluster down`");
    let status = ok(&["cluster", "status", "--dir", d]);
    assert!(status.contains("0 of 2 nodes up") && status_line(&status, 0).contains(" down "), "{status}");
    let out = ok(&["cluster", "down", "--dir", d]);
    assert!(out.contains("nothing to stop") && out.contains("already down: node 0, node 1"), "{out}");

    // `cluster up --dir` starts the stopped cluster again: the same config and certificates, and its data.
    let ca = std::fs::read(dir.join("tls/ca.pem")).unwrap();
    let key = std::fs::read(dir.join("tls/node-1.key")).unwrap();
    let err = refused(&["cluster", "up", "--dir", d, "--protocol", "cure", "--background"]);
    assert!(err.contains("stopped durable cluster") && err.contains("--protocol cure (the cluster's: cv)"), "{err}");
    let out = ok(&["cluster", "up", "--dir", d, "--background"]);
    assert!(out.contains("cluster up again") && out.contains(data_dir), "{out}");
    assert_eq!(std::fs::read(dir.join("cluster.toml")).unwrap(), config_before, "the same config");
    assert_eq!(std::fs::read(dir.join("tls/ca.pem")).unwrap(), ca, "the same CA");
    assert_eq!(std::fs::read(dir.join("tls/node-1.key")).unwrap(), key, "the same node keys");
    assert_readable(d, &keys);
    let (q0, q1) = (pid_of(&dir, 0), pid_of(&dir, 1));
    let out = ok(&["cluster", "down", "--dir", d]);
    assert!(out.contains("stopped 2 server processes"), "{out}");
    assert!(!alive(q0) && !alive(q1));
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn cluster_down_stops_a_server_started_by_hand_and_leaves_a_foreign_pid_alone() {
    let root = tempdir("lifecycle", "foreign");
    let dir = root.join("cluster");
    let d = dir.to_str().unwrap();
    let up = ["cluster", "up", "--protocol", "cv", "--dcs", "1", "--partitions", "2", "--dir", d, "--background"];
    ok(&up);
    let _guard = Cluster(&dir);
    let (p0, p1) = (pid_of(&dir, 0), pid_of(&dir, 1));

    // In memory a restarted node would come back empty: refused, saying why.
    sigkill(p0);
    let err = refused(&["cluster", "restart", "--dir", d, "--node", "0"]);
    assert!(err.contains("runs in memory") && err.contains("come back empty"), "{err}");

    // Node 0 started by hand (relative config path, from the cluster's directory), as an operator might.
    let log = std::fs::File::create(root.join("by-hand.log")).unwrap();
    let mut by_hand = Command::new(env!("CARGO_BIN_EXE_snowline"))
        .args(["server", "--config", "cluster.toml", "--node", "0"])
        .current_dir(&dir)
        .stdin(Stdio::null())
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .unwrap();
    // A foreign process whose pid DIR/pids lists for node 1 (as if the pid had been reused).
    let mut foreign = Command::new("sleep").arg("30").spawn().unwrap();
    let (hand, sleep) = (by_hand.id(), foreign.id());
    std::fs::write(dir.join("pids"), format!("0 {p0}\n1 {sleep}\n")).unwrap();

    let status = ok(&["cluster", "status", "--dir", d]);
    assert!(status_line(&status, 0).contains(&format!(" {hand} ")), "{status}");
    assert!(status_line(&status, 1).contains(&format!(" {p1} ")), "{status}");
    assert!(status.contains(&format!("node 0 (pid {hand}) is not in")), "{status}");
    assert!(status.contains(&format!("lists pid {sleep} for node 1")) && status.contains("sleep 30"), "{status}");

    let out = ok(&["cluster", "down", "--dir", d]);
    assert!(out.contains("stopped 2 server processes (2 were running)"), "{out}");
    assert!(out.contains(&format!("node 0 (pid {hand}, not in")) && out.contains(&format!("node 1 (pid {p1}, not in")));
    assert!(out.contains(&format!("left alone: pid {sleep} (listed for node 1")) && out.contains("sleep 30"), "{out}");
    assert!(foreign.try_wait().unwrap().is_none() && alive(sleep), "the foreign process was signalled");
    let exited = by_hand.wait().unwrap();
    assert!(exited.success(), "the hand-started server stopped on SIGTERM, cleanly: {exited}");
    assert!(!alive(p1));
    foreign.kill().unwrap();
    foreign.wait().unwrap();

    // A stopped in-memory cluster held no data: other flags make a new cluster in its place.
    let out =
        ok(&["cluster", "up", "--protocol", "2pl", "--dcs", "1", "--partitions", "2", "--dir", d, "--background"]);
    assert!(out.contains("replacing the stopped in-memory cluster") && out.contains("protocol 2pl"), "{out}");
    let config = snowline_net::ClusterConfig::load(dir.join("cluster.toml")).unwrap();
    assert_eq!(config.protocol, "2pl");
    ok(&["cluster", "down", "--dir", d]);
    let _ = std::fs::remove_dir_all(&root);
}

/// An operator deleted a running cluster's directory: its servers are still found by their command line,
/// `cluster up` on the directory is refused and `cluster down` stops them.
#[test]
fn cluster_down_stops_the_servers_of_a_deleted_directory() {
    let root = tempdir("lifecycle", "deleted");
    let dir = root.join("cluster");
    let d = dir.to_str().unwrap();
    ok(&["cluster", "up", "--protocol", "cv", "--dcs", "1", "--partitions", "2", "--dir", d, "--background"]);
    let _guard = Cluster(&dir);
    let (p0, p1) = (pid_of(&dir, 0), pid_of(&dir, 1));
    std::fs::remove_dir_all(&dir).unwrap();
    let err = refused(&["cluster", "up", "--protocol", "cv", "--dcs", "1", "--partitions", "2", "--dir", d]);
    assert!(err.contains("holds a running cluster"), "{err}");
    let out = ok(&["cluster", "down", "--dir", d]);
    assert!(out.contains("stopped 2 server processes"), "{out}");
    assert!(!alive(p0) && !alive(p1));
    let err = refused(&["cluster", "down", "--dir", d]);
    assert!(err.contains("no cluster to stop"), "{err}");
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn cluster_help_names_every_protocol_and_every_lifecycle_command() {
    let help = ok(&["cluster", "up", "--help"]);
    for name in snowline_protocols::names() {
        assert!(help.contains(&format!(" {name},")) || help.contains(&format!(" {name} ")), "{name}: {help}");
    }
    let help = ok(&["cluster", "--help"]);
    for command in ["up", "status", "restart", "down"] {
        assert!(help.lines().any(|l| l.trim_start().starts_with(command)), "{command}: {help}");
    }
}
