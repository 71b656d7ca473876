//! Local cluster process management for `snowline cluster up/down` and `snowline bench`.
//!
//! [`spawn_local_cluster`] writes `DIR/cluster.toml`, starts one child process per node of the config as
//! `EXE server --config DIR/cluster.toml --node ID` (so `EXE` must implement that subcommand by calling
//! [`crate::run_server`]), sends each child's stdout and stderr to `DIR/node-ID.log` and records
//! `ID PID` lines in `DIR/pids`. Unless the config is `insecure` or names certificates already, it makes
//! the cluster's CA and node certificates in `DIR/tls` (`crate::tls`). [`stop_cluster_dir`] stops such a cluster from another process.
//! Children are stopped with SIGTERM (the server shuts down cleanly on it), then SIGKILL after a grace
//! period.

use crate::NetError;
use crate::config::ClusterConfig;
use crate::util::os_u64;
use snowline_storage::FsyncPolicy;
use std::net::{TcpListener, TcpStream, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long [`LocalCluster::stop`] and [`stop_cluster_dir`] wait after SIGTERM before SIGKILL.
pub const STOP_GRACE: Duration = Duration::from_secs(5);

/// Running child server processes. Dropping it stops them (unless [`LocalCluster::detach`]ed).
pub struct LocalCluster {
    dir: PathBuf,
    config: ClusterConfig,
    exe: PathBuf,
    data: Option<LocalData>,
    /// `(node id, child)`; behind a mutex so that waiting and polling need only `&self`.
    children: Mutex<Vec<(u32, Child)>>,
}

/// Durable local clusters: node `N` keeps its data in `root/node-N` with the given fsync policy.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LocalData {
    pub root: PathBuf,
    pub fsync: FsyncPolicy,
}

/// Start one server process per node of `config`, in memory; see the module docs.
pub fn spawn_local_cluster(exe: &Path, dir: &Path, config: &ClusterConfig) -> Result<LocalCluster, NetError> {
    spawn_local_cluster_with(exe, dir, config, None)
}

/// [`spawn_local_cluster`], durable when `data` is given (`EXE server ... --data-dir ROOT/node-ID --fsync P`).
pub fn spawn_local_cluster_with(
    exe: &Path,
    dir: &Path,
    config: &ClusterConfig,
    data: Option<LocalData>,
) -> Result<LocalCluster, NetError> {
    std::fs::create_dir_all(dir)?;
    let mut config = config.clone();
    if config.tls.is_none() && !config.insecure {
        config = config.with_new_certs(&std::path::absolute(dir.join("tls"))?)?;
    }
    config.validate()?;
    config.save(dir.join("cluster.toml"))?;
    let mut cluster = LocalCluster {
        dir: dir.to_owned(),
        config: config.clone(),
        exe: exe.to_owned(),
        data,
        children: Mutex::default(),
    };
    for node in &config.nodes {
        let child = cluster.spawn_node(node.id, false)?;
        cluster.children.get_mut().expect("not poisoned").push((node.id, child));
    }
    cluster.write_pids()?;
    Ok(cluster)
}

impl LocalCluster {
    fn spawn_node(&self, id: u32, append_log: bool) -> Result<Child, NetError> {
        let log_path = self.dir.join(format!("node-{id}.log"));
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(append_log)
            .write(true)
            .truncate(!append_log)
            .open(&log_path)?;
        let mut cmd = Command::new(&self.exe);
        cmd.arg("server").arg("--config").arg(self.dir.join("cluster.toml")).arg("--node").arg(id.to_string());
        if let Some(d) = &self.data {
            cmd.arg("--data-dir").arg(d.root.join(format!("node-{id}"))).arg("--fsync").arg(d.fsync.to_string());
        }
        cmd.stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
            .map_err(|source| NetError::Spawn { exe: self.exe.clone(), source })
    }

    fn write_pids(&self) -> Result<(), NetError> {
        let pids: String = self.node_pids().iter().map(|(id, pid)| format!("{id} {pid}\n")).collect();
        std::fs::write(self.dir.join("pids"), pids)?;
        Ok(())
    }

    /// Kill node `id`'s process with SIGKILL (no chance to flush anything) and reap it.
    pub fn kill_node(&self, id: u32) -> Result<(), NetError> {
        let mut children = self.lock();
        let pos = children
            .iter()
            .position(|(n, _)| *n == id)
            .ok_or_else(|| NetError::Cluster(format!("node {id} is not running")))?;
        let (_, mut child) = children.remove(pos);
        let _ = child.kill();
        child.wait()?;
        drop(children);
        self.write_pids()
    }

    /// Start node `id` again (after [`kill_node`](Self::kill_node)) with the same arguments; its log is
    /// appended to. Returns once it accepts connections.
    pub fn restart_node(&self, id: u32, timeout: Duration) -> Result<(), NetError> {
        if self.lock().iter().any(|(n, _)| *n == id) {
            return Err(NetError::Cluster(format!("node {id} is already running")));
        }
        let child = self.spawn_node(id, true)?;
        self.lock().push((id, child));
        self.write_pids()?;
        self.wait_ready(timeout)
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn config(&self) -> &ClusterConfig {
        &self.config
    }

    /// `(node id, pid)` of each running child.
    pub fn node_pids(&self) -> Vec<(u32, u32)> {
        self.lock().iter().map(|(id, c)| (*id, c.id())).collect()
    }

    /// The pid of each running child, in node order.
    pub fn pids(&self) -> Vec<u32> {
        self.lock().iter().map(|(_, c)| c.id()).collect()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<(u32, Child)>> {
        self.children.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Wait until every running node has bound its address (its log says so: a port held by another process
    /// accepts connections too) and accepts TCP connections. Fails early, naming the log, if a child exits.
    pub fn wait_ready(&self, timeout: Duration) -> Result<(), NetError> {
        let deadline = Instant::now() + timeout;
        let running: Vec<u32> = self.lock().iter().map(|(id, _)| *id).collect();
        let mut waiting: Vec<(u32, String)> =
            self.config.nodes.iter().filter(|n| running.contains(&n.id)).map(|n| (n.id, n.addr.clone())).collect();
        loop {
            for (id, child) in self.lock().iter_mut() {
                if let Some(status) = child.try_wait()? {
                    return Err(NetError::Cluster(format!(
                        "node {id} exited ({status}) before the cluster was ready; see {}",
                        self.dir.join(format!("node-{id}.log")).display()
                    )));
                }
            }
            // Ready: its log says it listens (another process may hold its port and accept in its stead)
            // and its address accepts connections.
            waiting.retain(|(id, addr)| !(self.says_listening(*id) && accepts(addr)));
            if waiting.is_empty() {
                return Ok(());
            }
            if Instant::now() >= deadline {
                let names: Vec<String> = waiting
                    .iter()
                    .map(|(id, addr)| {
                        format!("node {id} ({addr}, log {})", self.dir.join(format!("node-{id}.log")).display())
                    })
                    .collect();
                return Err(NetError::Cluster(format!(
                    "cluster not ready after {timeout:?}: {} not accepting connections",
                    names.join(", ")
                )));
            }
            std::thread::sleep(Duration::from_millis(25));
        }
    }

    /// Whether node `id`'s log has its "listening on" line (written once it has bound its address).
    fn says_listening(&self, id: u32) -> bool {
        std::fs::read_to_string(self.dir.join(format!("node-{id}.log")))
            .is_ok_and(|log| log.contains(&format!("node {id} (")) && log.contains("listening on"))
    }

    /// The nodes whose process has exited, with how.
    pub fn exited(&self) -> Vec<(u32, std::process::ExitStatus)> {
        self.lock().iter_mut().filter_map(|(id, child)| Some((*id, child.try_wait().ok()??))).collect()
    }

    /// SIGTERM every child, wait up to [`STOP_GRACE`], SIGKILL what is left, and remove `DIR/pids`.
    /// (Dropping the cluster does the same.)
    pub fn stop(self) {
        drop(self);
    }

    fn stop_children(&mut self) {
        let children = self.children.get_mut().unwrap_or_else(|e| e.into_inner());
        for (_, child) in children.iter_mut() {
            if matches!(child.try_wait(), Ok(None)) {
                signal(child.id(), libc::SIGTERM);
            }
        }
        let deadline = Instant::now() + STOP_GRACE;
        for (_, child) in children.iter_mut() {
            while matches!(child.try_wait(), Ok(None)) {
                if Instant::now() >= deadline {
                    let _ = child.kill();
                    let _ = child.wait();
                    break;
                }
                std::thread::sleep(Duration::from_millis(10));
            }
        }
        children.clear();
        let _ = std::fs::remove_file(self.dir.join("pids"));
    }

    /// Leave the processes running (for `snowline cluster up`); stop them later with [`stop_cluster_dir`].
    pub fn detach(mut self) {
        self.children.get_mut().unwrap_or_else(|e| e.into_inner()).clear();
    }
}

impl Drop for LocalCluster {
    fn drop(&mut self) {
        if !self.children.get_mut().unwrap_or_else(|e| e.into_inner()).is_empty() {
            self.stop_children();
        }
    }
}

fn accepts(addr: &str) -> bool {
    let Ok(addrs) = addr.to_socket_addrs() else { return false };
    addrs.into_iter().any(|a| TcpStream::connect_timeout(&a, Duration::from_millis(200)).is_ok())
}

/// Send `sig` to `pid`; true if the process existed.
fn signal(pid: u32, sig: libc::c_int) -> bool {
    let Ok(pid) = libc::pid_t::try_from(pid) else { return false };
    // SAFETY: kill(2) has no memory-safety preconditions.
    unsafe { libc::kill(pid, sig) == 0 }
}

/// Whether `pid` exists and is not a zombie (an exited child its parent has not reaped yet).
fn is_running(pid: u32) -> bool {
    if !signal(pid, 0) {
        return false;
    }
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state follows the parenthesised command name.
        Ok(stat) => stat.rsplit_once(')').is_none_or(|(_, rest)| !rest.trim_start().starts_with('Z')),
        Err(_) => true,
    }
}

/// Stop the cluster whose `DIR/pids` was written by [`spawn_local_cluster`] (possibly by another process):
/// SIGTERM each, wait up to [`STOP_GRACE`], SIGKILL the rest, remove `DIR/pids`. Returns how many processes
/// were still running.
pub fn stop_cluster_dir(dir: &Path) -> Result<usize, NetError> {
    let path = dir.join("pids");
    let text = std::fs::read_to_string(&path).map_err(|e| {
        NetError::Cluster(format!("no cluster to stop in {}: cannot read {}: {e}", dir.display(), path.display()))
    })?;
    let mut pids = Vec::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let pid = line.split_whitespace().last().and_then(|p| p.parse::<u32>().ok());
        match pid {
            Some(pid) => pids.push(pid),
            None => return Err(NetError::Cluster(format!("{}: malformed line {line:?}", path.display()))),
        }
    }
    let running: Vec<u32> = pids.into_iter().filter(|pid| signal(*pid, libc::SIGTERM)).collect();
    let deadline = Instant::now() + STOP_GRACE;
    for pid in &running {
        while is_running(*pid) {
            if Instant::now() >= deadline {
                signal(*pid, libc::SIGKILL);
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
    let _ = std::fs::remove_file(&path);
    Ok(running.len())
}

/// A base port `b` such that `b..b + 64` could all be bound on 127.0.0.1 just now (random in 20000–60000).
pub fn free_base_port() -> u16 {
    free_port_range(64)
}

/// A base port `b` such that `b..b + count` could all be bound on 127.0.0.1 just now.
pub fn free_port_range(count: u16) -> u16 {
    let span = 40_000u64.saturating_sub(u64::from(count)).max(1);
    let mut base = 20_000;
    for _ in 0..200 {
        base = 20_000 + (os_u64() % span) as u16;
        let all_free = (0..count).all(|i| TcpListener::bind(("127.0.0.1", base + i)).is_ok());
        if all_free {
            return base;
        }
    }
    base
}
