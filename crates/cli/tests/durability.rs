//! Durability end to end (issue 6): real server processes with `--data-dir`, killed with SIGKILL mid-load and
//! restarted. Every acknowledged write must be readable afterwards in both datacenters, the recorded history
//! must pass the checker at the protocol's claimed level, and the datacenters must converge.
//!
//! The replica-group protocols (raft-kv, amcast-kv, tpc-kv) run three datacenters with one member of each
//! group in each: the one server killed is the member that leads at start, the datacenter killed holds a
//! member of every group.

use snowline_checker::Level;
use snowline_core::{Durability, Key, OpError, Protocol, Reply, Request, ServerId, Topology, Value};
use snowline_harness::{MixedWorkload, RunSpec};
use snowline_net::{ClientRuntime, ClusterConfig, LocalCluster, LocalData, spawn_local_cluster_with};
use snowline_storage::FsyncPolicy;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

const LOAD: Duration = Duration::from_millis(3_000);
const KILL_AT: Duration = Duration::from_millis(800);
const DOWN_FOR: Duration = Duration::from_millis(800);
const OP_TIMEOUT: Duration = Duration::from_millis(1_000);
const KEYS: usize = 30;

fn tempdir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("snowline-durability-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Which processes die: one server, or every server of datacenter 1.
#[derive(Clone, Copy, Debug)]
enum Crash {
    OneServer,
    WholeDc,
}

fn crash_and_recover<P: Protocol>(crash: Crash) {
    let dir = tempdir(&format!("{}-{crash:?}", P::NAME));
    let groups = P::DURABILITY == Durability::PersistChanges;
    let config = if groups {
        ClusterConfig::local_replicated(P::NAME, Topology::replicated(3, 2, 3), snowline_net::free_base_port()).unwrap()
    } else {
        ClusterConfig::local(P::NAME, 2, 2, snowline_net::free_base_port())
    };
    let (topology, routes) = (config.topology(), config.routes());
    // Both durable policies: one fsync per input when one server dies, group commit when a datacenter does.
    let fsync = match crash {
        Crash::OneServer => FsyncPolicy::PerWrite,
        Crash::WholeDc => FsyncPolicy::GROUP_DEFAULT,
    };
    let data = LocalData { root: dir.join("data"), fsync };
    let cluster = spawn_local_cluster_with(env!("CARGO_BIN_EXE_snowline").as_ref(), &dir, &config, Some(data))
        .expect("spawning the cluster");
    cluster.wait_ready(Duration::from_secs(20)).expect("cluster ready");
    // dc0/p0 (where datacenter 0's writers write too; a group's member 0, which leads at start), or every
    // server of datacenter 1.
    let node = |s: ServerId| config.nodes[routes.node_of(s).unwrap()].id;
    let victims: Vec<u32> = match crash {
        Crash::OneServer => vec![node(topology.member(0, 0))],
        Crash::WholeDc => topology.servers().filter(|s| s.dc == 1).map(node).collect(),
    };
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    if groups {
        // Listening is not serving: the groups elect their first leaders (and the members connect) first.
        rt.block_on(serving::<P>(&config, &topology));
    }
    let (history, acked) = std::thread::scope(|s| {
        let killer = s.spawn(|| {
            std::thread::sleep(KILL_AT);
            for v in &victims {
                cluster.kill_node(*v).expect("kill");
            }
            std::thread::sleep(DOWN_FOR);
            for v in &victims {
                cluster.restart_node(*v, Duration::from_secs(20)).expect("restart");
            }
        });
        let result = rt.block_on(load::<P>(&config, groups));
        killer.join().unwrap();
        result
    });
    for v in &victims {
        let log = std::fs::read_to_string(dir.join(format!("node-{v}.log"))).unwrap();
        assert!(log.contains("recovered"), "node {v} did not recover from its data directory:\n{log}");
    }
    assert!(acked.len() > 20, "only {} unique writes were acknowledged", acked.len());
    rt.block_on(converged::<P>(&config, &acked, &cluster, groups));

    let level: Level = snowline_protocols::claimed_level(P::NAME).unwrap().parse().unwrap();
    let verdict = snowline_checker::check(&history, level);
    if !verdict.ok {
        // Keep what explains the failure: the history (with commit versions) beside the servers' logs.
        let file = dir.join("history.jsonl");
        let out = std::fs::File::create(&file).expect("history file");
        snowline_core::history::HistoryWriter::write_jsonl(&history, std::io::BufWriter::new(out)).expect("history");
        panic!("{} after {crash:?}: {verdict}\n(history and server logs in {})", P::NAME, dir.display());
    }
    cluster.stop();
    let _ = std::fs::remove_dir_all(&dir);
}

/// The mixed workload with a recorded history in both datacenters, and beside it a writer in datacenter 0
/// that puts unique keys and remembers which were acknowledged.
/// `single_keys`: one key per operation (raft-kv's offer), for the replica-group protocols.
async fn load<P: Protocol>(
    config: &ClusterConfig,
    single_keys: bool,
) -> (Vec<snowline_core::HistoryEvent>, BTreeMap<Key, Value>) {
    let spec = RunSpec {
        clients_per_dc: 3,
        client_dcs: None,
        duration_ns: LOAD.as_nanos() as u64,
        warmup_ns: 0,
        cooldown_ns: 0,
        workload: if single_keys {
            MixedWorkload { keys: KEYS, ..MixedWorkload::kv() }
        } else {
            MixedWorkload { keys: KEYS, ..Default::default() }
        },
        record_history: true,
        seed: 7,
        final_reads_after_ns: None,
        retry: Default::default(),
    };
    let stop = Arc::new(AtomicBool::new(false));
    let writer = async {
        let rt = ClientRuntime::<P>::connect(config, 0).await.unwrap().with_timeout(OP_TIMEOUT);
        let session = rt.session();
        let mut acked = BTreeMap::new();
        let mut n = 0;
        while !stop.load(Ordering::Relaxed) {
            n += 1;
            let (key, value): (Key, Value) = (format!("u{n}").into(), format!("w{n}").into());
            if session.execute(Request::Put { key: key.clone(), value: value.clone() }).await.is_ok() {
                acked.insert(key, value);
            }
        }
        acked
    };
    let history = async {
        let report = snowline_harness::net_run::run_net_with::<P>(config, &spec, OP_TIMEOUT).await.unwrap();
        stop.store(true, Ordering::Relaxed);
        report.history.unwrap()
    };
    let (history, acked) = futures::join!(history, writer);
    (history, acked)
}

/// Waits until a PUT and a read of a key of every partition succeed.
async fn serving<P: Protocol>(config: &ClusterConfig, topology: &Topology) {
    let rt = ClientRuntime::<P>::connect(config, 0).await.unwrap().with_timeout(Duration::from_secs(2));
    let session = rt.session();
    for p in 0..topology.partitions {
        let key: Key = topology.key_on(p, "warm-").into();
        let mut tries = 0;
        while session.execute(Request::Put { key: key.clone(), value: "up".into() }).await.is_err()
            || session.execute(Request::Rot { keys: vec![key.clone()] }).await.is_err()
        {
            tries += 1;
            assert!(tries < 15, "{}: partition {p} does not serve", P::NAME);
        }
    }
}

async fn read_all<P: Protocol>(
    rt: &ClientRuntime<P>,
    keys: &[Key],
    per_read: usize,
) -> Result<BTreeMap<Key, Option<Value>>, OpError> {
    let session = rt.session();
    let mut out = BTreeMap::new();
    for chunk in keys.chunks(per_read) {
        let reply: Reply = session.execute(Request::Rot { keys: chunk.to_vec() }).await?;
        for r in reply.reads {
            out.insert(r.key, r.value);
        }
    }
    Ok(out)
}

/// Polls until both datacenters return every acknowledged unique write and agree on the workload's keys.
async fn converged<P: Protocol>(
    config: &ClusterConfig,
    acked: &BTreeMap<Key, Value>,
    cluster: &LocalCluster,
    single_keys: bool,
) {
    let per_read = if single_keys { 1 } else { 16 };
    let mut keys: Vec<Key> = acked.keys().cloned().collect();
    keys.extend((0..KEYS).map(|i| Key::from(format!("k{i}"))));
    let rts = [
        ClientRuntime::<P>::connect(config, 0).await.unwrap().with_timeout(Duration::from_secs(3)),
        ClientRuntime::<P>::connect(config, 1).await.unwrap().with_timeout(Duration::from_secs(3)),
    ];
    let mut last = String::new();
    for _ in 0..60 {
        let (a, b) = (read_all(&rts[0], &keys, per_read).await, read_all(&rts[1], &keys, per_read).await);
        match (a, b) {
            (Ok(a), Ok(b)) => {
                let lost: Vec<&Key> = acked
                    .iter()
                    .filter(|(k, v)| a[*k].as_ref() != Some(v) || b[*k].as_ref() != Some(v))
                    .map(|(k, _)| k)
                    .collect();
                let differ: Vec<&Key> = a.keys().filter(|k| a[*k] != b[*k]).collect();
                if lost.is_empty() && differ.is_empty() {
                    return;
                }
                last = format!("acknowledged writes not readable in both DCs: {lost:?}; DCs differ on {differ:?}");
            }
            (a, b) => last = format!("final reads failed: {:?} / {:?}", a.err(), b.err()),
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    panic!("{} did not converge after the restart: {last} (logs in {})", P::NAME, cluster.dir().display());
}

#[test]
fn cv_loses_no_acknowledged_write_when_a_server_is_killed() {
    crash_and_recover::<snowline_protocols::Cv>(Crash::OneServer);
}

#[test]
fn contrarian_loses_no_acknowledged_write_when_a_server_is_killed() {
    crash_and_recover::<snowline_protocols::Contrarian>(Crash::OneServer);
}

#[test]
fn cure_loses_no_acknowledged_write_when_a_server_is_killed() {
    crash_and_recover::<snowline_protocols::Cure>(Crash::OneServer);
}

#[test]
fn av_loses_no_acknowledged_write_when_a_server_is_killed() {
    crash_and_recover::<snowline_protocols::Av>(Crash::OneServer);
}

#[test]
fn op_loses_no_acknowledged_write_when_a_server_is_killed() {
    crash_and_recover::<snowline_protocols::Op>(Crash::OneServer);
}

#[test]
fn cops_loses_no_acknowledged_write_when_a_server_is_killed() {
    crash_and_recover::<snowline_protocols::Cops>(Crash::OneServer);
}

#[test]
fn cops_snow_loses_no_acknowledged_write_when_a_server_is_killed() {
    crash_and_recover::<snowline_protocols::CopsSnow>(Crash::OneServer);
}

#[test]
fn cv_datacenter_restarted_while_the_other_takes_writes_catches_up() {
    crash_and_recover::<snowline_protocols::Cv>(Crash::WholeDc);
}

#[test]
fn contrarian_datacenter_restarted_while_the_other_takes_writes_catches_up() {
    crash_and_recover::<snowline_protocols::Contrarian>(Crash::WholeDc);
}

#[test]
fn cure_datacenter_restarted_while_the_other_takes_writes_catches_up() {
    crash_and_recover::<snowline_protocols::Cure>(Crash::WholeDc);
}

#[test]
fn av_datacenter_restarted_while_the_other_takes_writes_catches_up() {
    crash_and_recover::<snowline_protocols::Av>(Crash::WholeDc);
}

#[test]
fn op_datacenter_restarted_while_the_other_takes_writes_catches_up() {
    crash_and_recover::<snowline_protocols::Op>(Crash::WholeDc);
}

#[test]
fn cops_datacenter_restarted_while_the_other_takes_writes_catches_up() {
    crash_and_recover::<snowline_protocols::Cops>(Crash::WholeDc);
}

#[test]
fn cops_snow_datacenter_restarted_while_the_other_takes_writes_catches_up() {
    crash_and_recover::<snowline_protocols::CopsSnow>(Crash::WholeDc);
}

#[test]
fn twopl_datacenter_restarted_while_the_other_takes_writes_catches_up() {
    crash_and_recover::<snowline_protocols::TwoPl>(Crash::WholeDc);
}

#[test]
fn twopl_loses_no_acknowledged_write_when_a_server_is_killed() {
    crash_and_recover::<snowline_protocols::TwoPl>(Crash::OneServer);
}

#[test]
fn occ_loses_no_acknowledged_write_when_a_server_is_killed() {
    crash_and_recover::<snowline_protocols::Occ>(Crash::OneServer);
}

/// A damaged data file stops the server with an error naming the file; nothing is served from it.
#[test]
fn raft_kv_loses_no_acknowledged_write_when_its_leader_is_killed() {
    crash_and_recover::<snowline_protocols::RaftKv>(Crash::OneServer);
}

#[test]
fn raft_kv_datacenter_restarted_while_the_others_take_writes_catches_up() {
    crash_and_recover::<snowline_protocols::RaftKv>(Crash::WholeDc);
}

#[test]
fn amcast_kv_loses_no_acknowledged_write_when_its_leader_is_killed() {
    crash_and_recover::<snowline_protocols::AmcastKv>(Crash::OneServer);
}

#[test]
fn amcast_kv_datacenter_restarted_while_the_others_take_writes_catches_up() {
    crash_and_recover::<snowline_protocols::AmcastKv>(Crash::WholeDc);
}

#[test]
fn tpc_kv_loses_no_acknowledged_write_when_its_leader_is_killed() {
    crash_and_recover::<snowline_protocols::TpcKv>(Crash::OneServer);
}

#[test]
fn tpc_kv_datacenter_restarted_while_the_others_take_writes_catches_up() {
    crash_and_recover::<snowline_protocols::TpcKv>(Crash::WholeDc);
}

#[test]
fn a_corrupted_or_truncated_data_file_is_a_clear_error_naming_it() {
    let dir = tempdir("corrupt");
    let config = ClusterConfig::local("cv", 1, 1, snowline_net::free_base_port());
    let data = LocalData { root: dir.join("data"), fsync: FsyncPolicy::PerWrite };
    let cluster = spawn_local_cluster_with(env!("CARGO_BIN_EXE_snowline").as_ref(), &dir, &config, Some(data))
        .expect("spawning the cluster");
    cluster.wait_ready(Duration::from_secs(20)).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let client = ClientRuntime::<snowline_protocols::Cv>::connect(&config, 0).await.unwrap();
        for n in 0..50 {
            let put = Request::Put { key: format!("k{n}").into(), value: "x".repeat(200).into() };
            client.session().execute(put).await.unwrap();
        }
    });
    cluster.stop();
    let segments = dir.join("data/node-0/wal");
    let file = std::fs::read_dir(&segments).unwrap().map(|e| e.unwrap().path()).max().expect("a segment");
    let start = || {
        std::process::Command::new(env!("CARGO_BIN_EXE_snowline"))
            .args(["server", "--config"])
            .arg(dir.join("cluster.toml"))
            .args(["--node", "0", "--data-dir"])
            .arg(dir.join("data/node-0"))
            .output()
            .unwrap()
    };
    let bytes = std::fs::read(&file).unwrap();
    for (what, damaged) in [("truncated", bytes[..bytes.len() / 2].to_vec()), ("garbage", vec![0x5a; bytes.len()])] {
        std::fs::write(&file, &damaged).unwrap();
        let out = start();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{what}: the server must not start on a damaged file");
        assert!(err.contains(&file.display().to_string()) && err.contains("corrupted or truncated"), "{what}: {err}");
        assert!(!err.contains("panicked"), "{what}: {err}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
