//! Process management with a stand-in executable (a shell script), in its own test binary so no other
//! test forks while the script is being written.

// A test of process management: it times how fast children stop with the real clock.
#![allow(clippy::disallowed_methods)]

use snowline_net::{ClusterConfig, free_base_port, spawn_local_cluster, stop_cluster_dir, survey_cluster_dir};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

fn script(dir: &Path, name: &str, body: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

fn alive(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
        && !std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default().contains(") Z ")
}

#[test]
fn spawn_wait_stop() {
    let dir = std::env::temp_dir().join(format!("snowline-net-cluster-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let config = ClusterConfig::local("cv", 1, 2, free_base_port());
    // Arguments reach the child and its output goes to the node's log. The shell stays (no exec) so that its
    // command line is the server's, which is what marks it as one of the cluster's servers.
    let sleeper =
        script(&dir, "sleeper", "echo \"args: $*\"; trap 'kill $! 2>/dev/null; exit 0' TERM; sleep 30 & wait");
    let cluster = spawn_local_cluster(&sleeper, &dir.join("c1"), &config).unwrap();
    let pids = cluster.pids();
    assert_eq!(pids.len(), 2);
    let recorded = std::fs::read_to_string(dir.join("c1/pids")).unwrap();
    assert_eq!(recorded, format!("0 {}\n1 {}\n", pids[0], pids[1]));
    assert_eq!(cluster.node_pids(), vec![(0, pids[0]), (1, pids[1])]);
    assert_eq!(&ClusterConfig::load(dir.join("c1/cluster.toml")).unwrap(), cluster.config());
    // The cluster got its own CA and node certificates.
    let tls = cluster.config().tls.clone().expect("certificates made");
    assert!(tls.ca.starts_with(std::path::absolute(dir.join("c1/tls")).unwrap()), "{tls:?}");
    assert!(dir.join("c1/tls/node-1.key").exists());
    // Nobody listens: wait_ready times out naming the nodes.
    let err = cluster.wait_ready(Duration::from_millis(200)).unwrap_err().to_string();
    assert!(err.contains("node 0") && err.contains("not accepting"), "{err}");
    let log = std::fs::read_to_string(dir.join("c1/node-1.log")).unwrap();
    assert!(
        log.contains(&format!("args: server --config {} --node 1", dir.join("c1/cluster.toml").display())),
        "{log}"
    );
    let started = Instant::now();
    cluster.stop();
    assert!(started.elapsed() < Duration::from_secs(4), "SIGTERM should end sleep at once");
    assert!(pids.iter().all(|pid| !alive(*pid)));
    assert!(!dir.join("c1/pids").exists());

    // A child that exits early is reported with its log.
    let failing = script(&dir, "failing", "echo boom; exit 3");
    let cluster = spawn_local_cluster(&failing, &dir.join("c2"), &config).unwrap();
    let err = cluster.wait_ready(Duration::from_secs(5)).unwrap_err().to_string();
    assert!(err.contains("exited") && err.contains("node-"), "{err}");
    drop(cluster);

    // `cluster down` from another process: detach, then stop by directory.
    let c3 = dir.join("c3");
    let cluster = spawn_local_cluster(&sleeper, &c3, &config).unwrap();
    let pids = cluster.pids();
    cluster.detach();
    // A second cluster in a directory whose cluster runs is refused, naming it and its running nodes.
    let err = spawn_local_cluster(&sleeper, &c3, &config).err().expect("refused").to_string();
    assert!(err.contains(&c3.display().to_string()) && err.contains("holds a running cluster"), "{err}");
    assert!(err.contains(&format!("node 0 (pid {})", pids[0])) && err.contains("cluster down --dir"), "{err}");
    let report = stop_cluster_dir(&c3).unwrap();
    assert_eq!(report.stopped.iter().map(|p| (p.node, p.pid)).collect::<Vec<_>>(), vec![(0, pids[0]), (1, pids[1])]);
    assert!(report.already_down().is_empty() && report.foreign.is_empty() && report.killed.is_empty());
    // The children are ours (not reaped until waited for): they are zombies or gone, not running.
    assert!(pids.iter().all(|pid| !alive(*pid)));
    assert!(!c3.join("pids").exists());
    // Stopping it again stops nothing and says every node was down.
    let again = stop_cluster_dir(&c3).unwrap();
    assert!(again.stopped.is_empty());
    assert_eq!(again.already_down(), vec![0, 1]);
    let err = stop_cluster_dir(&dir.join("nothing-here")).unwrap_err().to_string();
    assert!(err.contains("no cluster to stop"), "{err}");

    // A foreign process whose pid is in DIR/pids is left alone and reported; a server missing from DIR/pids
    // (started some other way) is found by its command line and stopped.
    let c4 = dir.join("c4");
    let cluster = spawn_local_cluster(&sleeper, &c4, &config).unwrap();
    let pids = cluster.pids();
    cluster.detach();
    let mut foreign = std::process::Command::new("sleep").arg("30").spawn().unwrap();
    std::fs::write(c4.join("pids"), format!("0 {}\n1 {}\n", pids[0], foreign.id())).unwrap();
    let survey = survey_cluster_dir(&c4).unwrap();
    assert_eq!(
        survey.running.iter().map(|p| (p.node, p.pid, p.listed)).collect::<Vec<_>>(),
        vec![(0, pids[0], true), (1, pids[1], false)]
    );
    assert_eq!(survey.foreign.len(), 1);
    assert_eq!((survey.foreign[0].node, survey.foreign[0].pid), (1, foreign.id()));
    assert!(survey.foreign[0].command.contains("sleep 30"), "{:?}", survey.foreign);
    let report = stop_cluster_dir(&c4).unwrap();
    assert_eq!(report.stopped.len(), 2, "{report:?}");
    assert_eq!(report.foreign, survey.foreign);
    assert!(pids.iter().all(|pid| !alive(*pid)));
    assert!(alive(foreign.id()) && foreign.try_wait().unwrap().is_none(), "the foreign process is left running");
    foreign.kill().unwrap();
    foreign.wait().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}
