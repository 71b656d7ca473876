//! A durable cluster on a disk that fills up (issue 16): writes fail with an error that says so, reads go
//! on, writes are taken again once space is freed, and every acknowledged write stays readable. The disk is
//! a small tmpfs, which needs root to mount: without it the test says so and does nothing.

// These tests drive real processes: they poll with the real clock.
#![allow(clippy::disallowed_methods)]

use snowline_core::{OpError, Request, Value};
use snowline_net::{ClientRuntime, ClusterConfig, LocalData, spawn_local_cluster_with};
use snowline_protocols::Cv;
use snowline_storage::FsyncPolicy;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// Unmounts the tmpfs when the test ends, however it ends.
struct Mount(PathBuf);

impl Drop for Mount {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

fn mount_tmpfs(at: &Path, size: &str) -> Option<Mount> {
    std::fs::create_dir_all(at).unwrap();
    let ok = Command::new("mount")
        .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
        .arg(at)
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    ok.then(|| Mount(at.to_owned()))
}

/// Write zeros to `path` until the disk refuses more.
fn fill(path: &Path) {
    use std::io::Write;
    let mut f = std::fs::File::create(path).unwrap();
    let chunk = vec![0u8; 1 << 20];
    while f.write_all(&chunk).is_ok() {}
    let _ = f.sync_all();
}

#[test]
fn a_full_disk_refuses_writes_serves_reads_and_takes_writes_again_once_space_is_freed() {
    let dir = std::env::temp_dir().join(format!("snowline-test-{}-disk-full", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let disk = dir.join("disk");
    let Some(mount) = mount_tmpfs(&disk, "64m") else {
        eprintln!("SKIPPED: mounting a tmpfs needs root; the full-disk test did not run");
        return;
    };
    let config = ClusterConfig::local("cv", 1, 2, snowline_net::free_base_port());
    let data = LocalData { root: disk.join("data"), fsync: FsyncPolicy::GROUP_DEFAULT };
    let cluster =
        spawn_local_cluster_with(env!("CARGO_BIN_EXE_snowline").as_ref(), &dir.join("cluster"), &config, Some(data))
            .expect("spawning the cluster");
    cluster.wait_ready(Duration::from_secs(20)).expect("cluster ready");
    let config = cluster.config().clone();
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let client = ClientRuntime::<Cv>::connect(&config, 0).await.unwrap();
        let session = client.session();
        let big = |i: usize| Value::from(format!("{i}{}", "x".repeat(64 << 10)));
        let mut acked: BTreeMap<String, Value> = BTreeMap::new();
        let put = |key: String, value: Value| Request::Put { key: key.into(), value };
        let get = |key: &str| Request::Rot { keys: vec![key.into()] };
        for i in 0..10 {
            session.execute(put(format!("before{i}"), big(i))).await.unwrap();
            acked.insert(format!("before{i}"), big(i));
        }

        // Fill the disk: the next writes that need space are refused, saying why.
        fill(&disk.join("filler"));
        let mut refused = None;
        for i in 0..2000 {
            match session.execute(put(format!("during{i}"), big(i))).await {
                Ok(_) => {
                    acked.insert(format!("during{i}"), big(i));
                }
                Err(OpError::Rejected(why)) => {
                    refused = Some((why, format!("during{i}")));
                    break;
                }
                Err(e) => panic!("a write on a full disk failed without saying why: {e:?}"),
            }
        }
        let (why, refused_key) = refused.expect("no write was refused on a full disk");
        assert!(why.contains("disk") && why.contains("full"), "{why}");
        // That server refuses every write now (another one refuses once its own write finds no space).
        let full_partition = config.topology().partition_of(&refused_key);
        let still_full = config.topology().key_on(full_partition, "still-full");
        // Reads go on (every partition), writes stay refused.
        for (key, value) in acked.iter().take(5) {
            let reply = session.execute(get(key)).await.expect("a read on a full disk");
            assert_eq!(reply.reads[0].value.as_ref(), Some(value), "{key}");
        }
        // The refused write may have given back the space its partial log record took (the log truncates a
        // record it could not finish): take that too, or the next write can rightly fit and be acknowledged.
        fill(&disk.join("filler-2"));
        let e = session.execute(put(still_full.clone(), big(0))).await.unwrap_err();
        assert!(matches!(&e, OpError::Rejected(m) if m.contains("full")), "{e:?}");

        // Free the space: writes are taken again, within a few ticks.
        std::fs::remove_file(disk.join("filler")).unwrap();
        std::fs::remove_file(disk.join("filler-2")).unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            match session.execute(put(still_full.clone(), big(1))).await {
                Ok(_) => break,
                Err(OpError::Rejected(_)) => assert!(Instant::now() < deadline, "writes never resumed"),
                Err(e) => panic!("{e:?}"),
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        acked.insert(still_full, big(1));

        // Nothing acknowledged was lost, not even across a SIGKILL and restart of every server afterwards
        // (their logs went through the full disk).
        for node in [0, 1] {
            cluster.kill_node(node).unwrap();
            cluster.restart_node(node, Duration::from_secs(20)).unwrap();
        }
        let client = ClientRuntime::<Cv>::connect(&config, 0).await.unwrap();
        let session = client.session();
        for (key, value) in &acked {
            let reply = session.execute(get(key)).await.unwrap();
            assert_eq!(reply.reads[0].value.as_ref(), Some(value), "{key} lost");
        }
    });
    assert!(cluster.exited().is_empty(), "a server died: {:?}", cluster.exited());
    drop(cluster);
    drop(mount);
    let _ = std::fs::remove_dir_all(&dir);
}
