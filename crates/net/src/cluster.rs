//! Local cluster process management for `snowline cluster up/down/status/restart` and `snowline bench`.
//!
//! A cluster directory `DIR` holds
//!
//! * `cluster.toml` ([`CONFIG_FILE`]): the config;
//! * `servers.toml` ([`SERVERS_FILE`]): how its servers are started beyond the config — in memory, or durable
//!   with a data root and an fsync policy — so that one node ([`restart_node_in_dir`]) or the whole stopped
//!   cluster ([`resume_local_cluster`]) can be started again with the same arguments;
//! * `pids` ([`PIDS_FILE`]): `ID PID` lines, the processes started for it;
//! * `node-ID.log`: each node's stdout and stderr (appended to when the node is started again);
//! * `tls/`: the CA and node certificates, unless the config is `insecure` or names certificates already.
//!
//! [`spawn_local_cluster`] writes all of them and starts one child process per node of the config as
//! `EXE server --config DIR/cluster.toml --node ID [--data-dir ROOT/node-ID --fsync P]`, `DIR` and `ROOT`
//! absolute (so `EXE` must implement that subcommand by calling [`crate::run_server`]).
//!
//! **Which processes are this cluster's servers.** A process is one of `DIR`'s servers when its command
//! line (`/proc/PID/cmdline`) has the word `server`, `--node ID` and `--config PATH` where `PATH` is
//! `DIR/cluster.toml` (the same file, after resolving symbolic links and, for a relative path, the process's
//! working directory). Nothing here signals a pid without that check: a pid in `pids` that another process
//! has reused is left alone and reported ([`ForeignPid`]). Since the check reads the command line, a server
//! of the cluster started by hand (`snowline server --config DIR/cluster.toml --node ID ...`) counts too:
//! [`survey_cluster_dir`] finds every such process (Linux: it scans `/proc`), listed in `pids` or not.
//!
//! Starting a cluster in a directory whose cluster runs (any of its servers alive) is refused
//! ([`refuse_if_running`]). Children are stopped with SIGTERM (the server shuts down cleanly on it), then
//! SIGKILL after a grace period ([`STOP_GRACE`]).

use crate::NetError;
use crate::config::ClusterConfig;
use crate::util::os_u64;
use serde::{Deserialize, Serialize};
use snowline_storage::FsyncPolicy;
use std::net::{TcpListener, TcpStream, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long [`LocalCluster::stop`] and [`stop_cluster_dir`] wait after SIGTERM before SIGKILL.
pub const STOP_GRACE: Duration = Duration::from_secs(5);

/// The cluster config in a cluster directory.
pub const CONFIG_FILE: &str = "cluster.toml";
/// How a cluster directory's servers are started (in memory, or their data root and fsync policy).
pub const SERVERS_FILE: &str = "servers.toml";
/// `ID PID` lines: the server processes started for a cluster directory.
pub const PIDS_FILE: &str = "pids";

/// Running child server processes. Dropping it stops them (unless [`LocalCluster::detach`]ed).
pub struct LocalCluster {
    dir: PathBuf,
    config: ClusterConfig,
    exe: PathBuf,
    data: Option<LocalData>,
    /// Behind a mutex so that waiting and polling need only `&self`.
    children: Mutex<Vec<Running>>,
}

/// A child server process.
struct Running {
    id: u32,
    child: Child,
    /// Where this process's output begins in its (appended-to) log.
    log_from: u64,
}

/// Durable local clusters: node `N` keeps its data in `root/node-N` with the given fsync policy.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LocalData {
    pub root: PathBuf,
    pub fsync: FsyncPolicy,
}

impl LocalData {
    /// Node `id`'s data directory.
    pub fn node_dir(&self, id: u32) -> PathBuf {
        self.root.join(format!("node-{id}"))
    }
}

/// `DIR/servers.toml`.
#[derive(Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct ServersFile {
    /// Durable servers: node N keeps its data in `data_dir/node-N`. Absent: in memory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    data_dir: Option<PathBuf>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    fsync: Option<String>,
}

/// Record in `DIR/servers.toml` how the cluster's servers are started (`data`: durable, else in memory).
pub fn save_local_data(dir: &Path, data: Option<&LocalData>) -> Result<(), NetError> {
    let file = ServersFile { data_dir: data.map(|d| d.root.clone()), fsync: data.map(|d| d.fsync.to_string()) };
    let body = toml::to_string(&file).map_err(|e| NetError::Cluster(format!("writing {SERVERS_FILE}: {e}")))?;
    let text = format!(
        "# How `snowline cluster up` started this directory's servers; `cluster restart` and a `cluster up` that\n\
         # resumes the stopped cluster start them the same way. No data_dir: in memory.\n{body}"
    );
    write_atomically(&dir.join(SERVERS_FILE), &text)
}

/// How `DIR`'s servers are started, from `DIR/servers.toml`: `Some` for durable servers, `None` in memory.
/// An error names the file if it is missing or malformed.
pub fn load_local_data(dir: &Path) -> Result<Option<LocalData>, NetError> {
    let path = dir.join(SERVERS_FILE);
    let text = std::fs::read_to_string(&path).map_err(|e| {
        NetError::Cluster(format!(
            "cannot read {} ({e}): it records how the cluster's servers are started (in memory, or where their \
             data is); `snowline cluster up` writes it",
            path.display()
        ))
    })?;
    let file: ServersFile = toml::from_str(&text)
        .map_err(|e| NetError::Cluster(format!("{}: {}", path.display(), e.to_string().trim_end())))?;
    match (file.data_dir, file.fsync) {
        (None, _) => Ok(None),
        (Some(root), fsync) => {
            let fsync = match fsync {
                Some(f) => f.parse().map_err(|e| NetError::Cluster(format!("{}: {e}", path.display())))?,
                None => FsyncPolicy::GROUP_DEFAULT,
            };
            Ok(Some(LocalData { root, fsync }))
        }
    }
}

/// Write `text` to `path` through a temporary file and a rename, so a reader never sees half of it.
fn write_atomically(path: &Path, text: &str) -> Result<(), NetError> {
    let tmp = path.with_extension(format!("tmp-{}", std::process::id()));
    std::fs::write(&tmp, text)?;
    std::fs::rename(&tmp, path)?;
    Ok(())
}

/// The `(node, pid)` lines of `DIR/pids` (none if the file does not exist).
pub fn read_pids(dir: &Path) -> Result<Vec<(u32, u32)>, NetError> {
    let path = dir.join(PIDS_FILE);
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(NetError::Cluster(format!("cannot read {}: {e}", path.display()))),
    };
    let mut pids = Vec::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let mut words = line.split_whitespace();
        match (words.next().map(str::parse), words.next().map(str::parse), words.next()) {
            (Some(Ok(node)), Some(Ok(pid)), None) => pids.push((node, pid)),
            _ => {
                return Err(NetError::Cluster(format!(
                    "{}: malformed line {line:?} (expected `NODE PID`)",
                    path.display()
                )));
            }
        }
    }
    Ok(pids)
}

/// Replace `DIR/pids` with `pids` (sorted by node), or remove it when there are none.
fn write_pids_file(dir: &Path, mut pids: Vec<(u32, u32)>) -> Result<(), NetError> {
    let path = dir.join(PIDS_FILE);
    if pids.is_empty() {
        match std::fs::remove_file(&path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e.into()),
            _ => return Ok(()),
        }
    }
    pids.sort_unstable();
    pids.dedup();
    write_atomically(&path, &pids.iter().map(|(id, pid)| format!("{id} {pid}\n")).collect::<String>())
}

/// Change `DIR/pids` under `f` (read, modify, write back).
fn update_pids(dir: &Path, f: impl FnOnce(&mut Vec<(u32, u32)>)) -> Result<(), NetError> {
    let mut pids = read_pids(dir).unwrap_or_default();
    f(&mut pids);
    write_pids_file(dir, pids)
}

/// Start one server process per node of `config`, in memory; see the module docs.
pub fn spawn_local_cluster(exe: &Path, dir: &Path, config: &ClusterConfig) -> Result<LocalCluster, NetError> {
    spawn_local_cluster_with(exe, dir, config, None)
}

/// [`spawn_local_cluster`], durable when `data` is given (`EXE server ... --data-dir ROOT/node-ID --fsync P`).
/// Refused if `dir` holds a cluster that is running ([`refuse_if_running`]); otherwise whatever `dir` held
/// (config, certificates, pids) is replaced and the logs start afresh.
pub fn spawn_local_cluster_with(
    exe: &Path,
    dir: &Path,
    config: &ClusterConfig,
    data: Option<LocalData>,
) -> Result<LocalCluster, NetError> {
    let dir = std::path::absolute(dir)?;
    std::fs::create_dir_all(&dir)?;
    refuse_if_running(&dir)?;
    let data = match data {
        Some(d) => Some(LocalData { root: std::path::absolute(&d.root)?, fsync: d.fsync }),
        None => None,
    };
    let mut config = config.clone();
    if config.tls.is_none() && !config.insecure {
        config = config.with_new_certs(&dir.join("tls"))?;
    }
    config.validate()?;
    config.save(dir.join(CONFIG_FILE))?;
    save_local_data(&dir, data.as_ref())?;
    let cluster = LocalCluster { dir, config, exe: exe.to_owned(), data, children: Mutex::default() };
    cluster.start_all(false)?;
    Ok(cluster)
}

/// Start the stopped cluster in `dir` again, as it was: its `cluster.toml` as it stands (same ports, same
/// certificates), its servers durable as `data` says (the caller reads what `servers.toml` records with
/// [`load_local_data`] and may change the fsync policy; durable nodes recover their data) or in memory. The
/// logs are appended to. Refused if any of its servers runs.
pub fn resume_local_cluster(exe: &Path, dir: &Path, data: Option<LocalData>) -> Result<LocalCluster, NetError> {
    let dir = std::path::absolute(dir)?;
    refuse_if_running(&dir)?;
    let config = ClusterConfig::load(dir.join(CONFIG_FILE))?;
    let data = match data {
        Some(d) => Some(LocalData { root: std::path::absolute(&d.root)?, fsync: d.fsync }),
        None => None,
    };
    save_local_data(&dir, data.as_ref())?;
    let cluster = LocalCluster { dir, config, exe: exe.to_owned(), data, children: Mutex::default() };
    cluster.start_all(true)?;
    Ok(cluster)
}

/// Start node `id` of the cluster in `dir` again, with the arguments `servers.toml` records (a durable node
/// recovers its data), appending to its log and recording its pid in `pids` (so `cluster down` stops it).
/// Refused if node `id` runs already. Returns its pid once it accepts connections (within `timeout`).
pub fn restart_node_in_dir(exe: &Path, dir: &Path, id: u32, timeout: Duration) -> Result<u32, NetError> {
    let dir = std::path::absolute(dir)?;
    let config = ClusterConfig::load(dir.join(CONFIG_FILE))?;
    if config.node(id).is_none() {
        return Err(NetError::Cluster(format!(
            "node {id} is not in {} (it lists nodes {:?})",
            dir.join(CONFIG_FILE).display(),
            config.nodes.iter().map(|n| n.id).collect::<Vec<_>>()
        )));
    }
    let data = load_local_data(&dir)?;
    let survey = survey_cluster_dir(&dir)?;
    if let Some(p) = survey.running.iter().find(|p| p.node == id) {
        return Err(NetError::Cluster(format!("node {id} is already running (pid {})", p.pid)));
    }
    let cluster = LocalCluster { dir, config, exe: exe.to_owned(), data, children: Mutex::default() };
    // On failure the child is stopped (by dropping the cluster, which forgets its pid).
    let pid = cluster.restart_node(id, timeout)?;
    cluster.detach();
    Ok(pid)
}

impl LocalCluster {
    fn start_all(&self, append_logs: bool) -> Result<(), NetError> {
        for node in &self.config.nodes {
            let (child, log_from) = self.spawn_node(node.id, append_logs)?;
            self.lock().push(Running { id: node.id, child, log_from });
        }
        write_pids_file(&self.dir, self.node_pids())
    }

    fn spawn_node(&self, id: u32, append_log: bool) -> Result<(Child, u64), NetError> {
        let log_path = self.dir.join(format!("node-{id}.log"));
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(append_log)
            .write(true)
            .truncate(!append_log)
            .open(&log_path)?;
        let mut log_from = log.metadata()?.len();
        if log_from > 0 {
            // Where this run's output begins, for whoever reads the log.
            use std::io::Write;
            let line = format!("---- node {id} started again ----\n");
            (&log).write_all(line.as_bytes())?;
            log_from += line.len() as u64;
        }
        let mut cmd = Command::new(&self.exe);
        cmd.arg("server").arg("--config").arg(self.dir.join(CONFIG_FILE)).arg("--node").arg(id.to_string());
        if let Some(d) = &self.data {
            cmd.arg("--data-dir").arg(d.node_dir(id)).arg("--fsync").arg(d.fsync.to_string());
        }
        let child = cmd
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
            .map_err(|error| NetError::Spawn { exe: self.exe.clone(), error })?;
        // Until its command line shows, the new process cannot be told apart from a foreign one: a `cluster
        // down` right now would leave it running.
        let _ = settled_cmdline(child.id());
        Ok((child, log_from))
    }

    /// Kill node `id`'s process with SIGKILL (no chance to flush anything) and reap it.
    pub fn kill_node(&self, id: u32) -> Result<(), NetError> {
        let mut children = self.lock();
        let pos = children
            .iter()
            .position(|r| r.id == id)
            .ok_or_else(|| NetError::Cluster(format!("node {id} is not running")))?;
        let Running { mut child, .. } = children.remove(pos);
        let _ = child.kill();
        child.wait()?;
        drop(children);
        update_pids(&self.dir, |pids| pids.retain(|(n, _)| *n != id))
    }

    /// Start node `id` again (after [`kill_node`](Self::kill_node)) with the same arguments; its log is
    /// appended to. Returns once it accepts connections.
    pub fn restart_node(&self, id: u32, timeout: Duration) -> Result<u32, NetError> {
        if self.lock().iter().any(|r| r.id == id) {
            return Err(NetError::Cluster(format!("node {id} is already running")));
        }
        let (child, log_from) = self.spawn_node(id, true)?;
        let pid = child.id();
        self.lock().push(Running { id, child, log_from });
        // Recorded before waiting: if the caller is interrupted, `cluster down` still finds the pid.
        update_pids(&self.dir, |pids| {
            pids.retain(|(n, _)| *n != id);
            pids.push((id, pid));
        })?;
        self.wait_ready(timeout)?;
        Ok(pid)
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn config(&self) -> &ClusterConfig {
        &self.config
    }

    /// How the servers were started: durable (`Some`) or in memory.
    pub fn data(&self) -> Option<&LocalData> {
        self.data.as_ref()
    }

    /// `(node id, pid)` of each running child.
    pub fn node_pids(&self) -> Vec<(u32, u32)> {
        self.lock().iter().map(|r| (r.id, r.child.id())).collect()
    }

    /// The pid of each running child, in node order.
    pub fn pids(&self) -> Vec<u32> {
        self.lock().iter().map(|r| r.child.id()).collect()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Running>> {
        self.children.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Wait until every running node has bound its address (its log says so: a port held by another process
    /// accepts connections too) and accepts TCP connections. Fails early, naming the log, if a child exits.
    pub fn wait_ready(&self, timeout: Duration) -> Result<(), NetError> {
        let deadline = Instant::now() + timeout;
        let running: Vec<(u32, u64)> = self.lock().iter().map(|r| (r.id, r.log_from)).collect();
        let mut waiting: Vec<(u32, u64, String)> = self
            .config
            .nodes
            .iter()
            .filter_map(|n| running.iter().find(|(id, _)| *id == n.id).map(|(_, from)| (n.id, *from, n.addr.clone())))
            .collect();
        loop {
            for r in self.lock().iter_mut() {
                if let Some(status) = r.child.try_wait()? {
                    let log = self.dir.join(format!("node-{}.log", r.id));
                    let why = self.last_error(r.id, r.log_from).map(|e| format!(": {e}")).unwrap_or_default();
                    return Err(NetError::Cluster(format!(
                        "node {} exited ({status}) before the cluster was ready{why}; its log is {}",
                        r.id,
                        log.display()
                    )));
                }
            }
            // Ready: its log says it listens (another process may hold its port and accept in its stead)
            // and its address accepts connections.
            waiting.retain(|(id, from, addr)| !(self.says_listening(*id, *from) && accepts(addr)));
            if waiting.is_empty() {
                return Ok(());
            }
            if Instant::now() >= deadline {
                let names: Vec<String> = waiting
                    .iter()
                    .map(|(id, _, addr)| {
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

    /// Whether node `id`'s log, from byte `from` on (what this process wrote), has its "listening on" line
    /// (written once it has bound its address).
    fn says_listening(&self, id: u32, from: u64) -> bool {
        let Ok(log) = std::fs::read(self.dir.join(format!("node-{id}.log"))) else { return false };
        let ours = String::from_utf8_lossy(log.get(from as usize..).unwrap_or_default());
        ours.contains(&format!("node {id} (")) && ours.contains("listening on")
    }

    /// The last `error: ...` line node `id` wrote to its log since offset `from` (what made it exit).
    fn last_error(&self, id: u32, from: u64) -> Option<String> {
        let log = std::fs::read(self.dir.join(format!("node-{id}.log"))).ok()?;
        let ours = String::from_utf8_lossy(log.get(from as usize..).unwrap_or_default()).into_owned();
        ours.lines().rev().find_map(|l| l.strip_prefix("error: ")).map(str::to_owned)
    }

    /// The nodes whose process has exited, with how.
    pub fn exited(&self) -> Vec<(u32, std::process::ExitStatus)> {
        self.lock().iter_mut().filter_map(|r| Some((r.id, r.child.try_wait().ok()??))).collect()
    }

    /// SIGTERM every child, wait up to [`STOP_GRACE`], SIGKILL what is left, and take their lines out of
    /// `DIR/pids` (removing it when it lists nothing else). (Dropping the cluster does the same.) Servers of
    /// the directory that another process started (`cluster restart`) are not this value's children:
    /// [`stop_cluster_dir`] stops those.
    pub fn stop(self) {
        drop(self);
    }

    fn stop_children(&mut self) {
        let children = self.children.get_mut().unwrap_or_else(|e| e.into_inner());
        for r in children.iter_mut() {
            if matches!(r.child.try_wait(), Ok(None)) {
                signal(r.child.id(), libc::SIGTERM);
            }
        }
        let deadline = Instant::now() + STOP_GRACE;
        for r in children.iter_mut() {
            while matches!(r.child.try_wait(), Ok(None)) {
                if Instant::now() >= deadline {
                    let _ = r.child.kill();
                    let _ = r.child.wait();
                    break;
                }
                std::thread::sleep(Duration::from_millis(10));
            }
        }
        let ours: Vec<u32> = children.drain(..).map(|r| r.child.id()).collect();
        let _ = update_pids(&self.dir, |pids| pids.retain(|(_, pid)| !ours.contains(pid)));
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
    if pid <= 0 {
        return false; // 0 and negative pids name process groups
    }
    // SAFETY: kill(2) has no memory-safety preconditions.
    unsafe { libc::kill(pid, sig) == 0 }
}

/// Whether `pid` exists and is not a zombie (an exited child its parent has not reaped yet).
fn is_running(pid: u32) -> bool {
    if pid == 0 || libc::pid_t::try_from(pid).is_err() {
        return false;
    }
    if !signal(pid, 0) {
        // EPERM: it exists but belongs to someone else.
        if std::io::Error::last_os_error().raw_os_error() != Some(libc::EPERM) {
            return false;
        }
    }
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state follows the parenthesised command name.
        Ok(stat) => stat.rsplit_once(')').is_none_or(|(_, rest)| !rest.trim_start().starts_with('Z')),
        Err(_) => true,
    }
}

/// The config file a cluster's servers name on their command line, resolved once.
struct ConfigPath {
    absolute: PathBuf,
    canonical: Option<PathBuf>,
}

impl ConfigPath {
    fn of(dir: &Path) -> Result<Self, NetError> {
        let absolute = std::path::absolute(dir.join(CONFIG_FILE))?;
        let canonical = std::fs::canonicalize(&absolute).ok();
        Ok(Self { absolute, canonical })
    }

    /// Whether `path` names this file (the same file once links are resolved; the same absolute path when
    /// either cannot be resolved).
    fn is(&self, path: &Path) -> bool {
        match (&self.canonical, std::fs::canonicalize(path)) {
            (Some(ours), Ok(theirs)) => *ours == theirs,
            _ => std::path::absolute(path).is_ok_and(|p| p == self.absolute),
        }
    }
}

/// A process's command line (`/proc/PID/cmdline`), one string per argument; `None` if unreadable or empty
/// (a zombie, a kernel thread, or not Linux).
fn cmdline(pid: u32) -> Option<Vec<String>> {
    let raw = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    let raw = raw.strip_suffix(&[0]).unwrap_or(&raw);
    if raw.is_empty() {
        return None;
    }
    Some(raw.split(|b| *b == 0).map(|a| String::from_utf8_lossy(a).into_owned()).collect())
}

/// [`cmdline`] of a process expected to have one: a process that has just called exec shows an empty command
/// line for a moment (the kernel sets it up after the exec is already reported to the parent), so an empty
/// one of a live process is read again for up to a second before it counts.
fn settled_cmdline(pid: u32) -> Option<Vec<String>> {
    let deadline = Instant::now() + Duration::from_secs(1);
    loop {
        let args = cmdline(pid);
        if args.is_some() || !is_running(pid) || Instant::now() >= deadline {
            return args;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// The value of `--flag V` or `--flag=V` in `args`.
fn flag_value<'a>(args: &'a [String], flag: &str) -> Option<&'a str> {
    args.iter().enumerate().find_map(|(i, a)| {
        if a == flag { args.get(i + 1).map(String::as_str) } else { a.strip_prefix(flag)?.strip_prefix('=') }
    })
}

/// The node id if `pid` runs `... server ... --config CONFIG --node ID ...` with `CONFIG` this cluster's
/// config file (a relative path resolved against the process's working directory).
fn server_node(pid: u32, config: &ConfigPath) -> Option<u32> {
    server_node_of(pid, &cmdline(pid)?, config)
}

/// [`server_node`] given the process's command line.
fn server_node_of(pid: u32, args: &[String], config: &ConfigPath) -> Option<u32> {
    if !args.iter().any(|a| a == "server") {
        return None;
    }
    let node = flag_value(args, "--node")?.parse().ok()?;
    let path = Path::new(flag_value(args, "--config")?);
    let path = if path.is_relative() {
        std::fs::read_link(format!("/proc/{pid}/cwd")).ok()?.join(path)
    } else {
        path.to_owned()
    };
    config.is(&path).then_some(node)
}

/// Whether `pid` is alive and verifiably node `node` of the cluster whose config is `config`.
fn is_our_server(pid: u32, node: u32, config: &ConfigPath) -> bool {
    is_running(pid) && server_node(pid, config) == Some(node)
}

/// A server process of a cluster directory.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct ServerProcess {
    pub node: u32,
    pub pid: u32,
    /// Whether `DIR/pids` lists it (false: started some other way, e.g. by hand).
    pub listed: bool,
}

/// A live pid that `DIR/pids` lists for a node but that is not that node's server (the pid was reused).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ForeignPid {
    pub node: u32,
    pub pid: u32,
    /// What it runs (its command line, shortened), or `?` if unreadable.
    pub command: String,
}

/// What runs of a cluster directory ([`survey_cluster_dir`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Survey {
    /// Live processes that are verifiably the directory's servers, by node: those `DIR/pids` lists and any
    /// other (started by hand).
    pub running: Vec<ServerProcess>,
    /// `(node, pid)` lines of `DIR/pids` whose process has exited.
    pub exited: Vec<(u32, u32)>,
    /// Lines of `DIR/pids` whose pid is alive but runs something else.
    pub foreign: Vec<ForeignPid>,
}

/// Which of `DIR`'s servers run: each pid `DIR/pids` lists, checked against its command line (module docs),
/// and every other process whose command line makes it one of them. Signals nothing.
pub fn survey_cluster_dir(dir: &Path) -> Result<Survey, NetError> {
    let config = ConfigPath::of(dir)?;
    let mut survey = Survey::default();
    for (node, pid) in read_pids(dir)? {
        if !is_running(pid) {
            survey.exited.push((node, pid));
        } else if let Some(args) = settled_cmdline(pid)
            && server_node_of(pid, &args, &config) == Some(node)
        {
            survey.running.push(ServerProcess { node, pid, listed: true });
        } else {
            let mut command = settled_cmdline(pid).map(|a| a.join(" ")).unwrap_or_else(|| "?".into());
            if command.chars().count() > 120 {
                command = command.chars().take(117).collect::<String>() + "...";
            }
            survey.foreign.push(ForeignPid { node, pid, command });
        }
    }
    let me = std::process::id();
    if let Ok(entries) = std::fs::read_dir("/proc") {
        for entry in entries.flatten() {
            let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else { continue };
            if pid == me || survey.running.iter().any(|p| p.pid == pid) {
                continue;
            }
            if let Some(node) = server_node(pid, &config)
                && is_running(pid)
            {
                survey.running.push(ServerProcess { node, pid, listed: false });
            }
        }
    }
    // A fork of a server (a child that has not called exec yet, or a stand-in script's child) carries its
    // parent's command line: it is part of that server, not another one.
    let pids: Vec<u32> = survey.running.iter().map(|p| p.pid).collect();
    survey.running.retain(|p| p.listed || parent_pid(p.pid).is_none_or(|parent| !pids.contains(&parent)));
    survey.running.sort_unstable();
    Ok(survey)
}

/// The parent of a live process, from `/proc/PID/stat` (Linux).
fn parent_pid(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // After the parenthesised command name: the state, then the parent's pid.
    stat.rsplit_once(')')?.1.split_whitespace().nth(1)?.parse().ok()
}

/// An error if `dir` holds a cluster that is running (any of its servers alive, [`survey_cluster_dir`]),
/// naming the directory, the running nodes and how to stop it.
pub fn refuse_if_running(dir: &Path) -> Result<(), NetError> {
    let survey = survey_cluster_dir(dir)?;
    if survey.running.is_empty() {
        return Ok(());
    }
    let nodes: Vec<String> = survey.running.iter().map(|p| format!("node {} (pid {})", p.node, p.pid)).collect();
    let dir = dir.display();
    Err(NetError::Cluster(format!(
        "{dir} holds a running cluster: {} {} up. Stop it first with `snowline cluster down --dir {dir}` \
         (`snowline cluster status --dir {dir}` shows it; `snowline cluster restart --dir {dir} --node N` starts \
         a node that is down), or use another --dir",
        nodes.join(", "),
        if nodes.len() == 1 { "is" } else { "are" }
    )))
}

/// What [`stop_cluster_dir`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StopReport {
    /// The node ids of the directory's config (empty if it has none).
    pub nodes: Vec<u32>,
    /// The directory's servers that were running and were stopped (each verified before each signal).
    pub stopped: Vec<ServerProcess>,
    /// Those of `stopped` that ignored SIGTERM for [`STOP_GRACE`] and were killed with SIGKILL.
    pub killed: Vec<ServerProcess>,
    /// Servers still running after SIGKILL (not ours to signal?).
    pub still_running: Vec<ServerProcess>,
    /// `DIR/pids` lines whose process had exited already.
    pub exited: Vec<(u32, u32)>,
    /// `DIR/pids` lines naming a live process that is not the node's server: left alone.
    pub foreign: Vec<ForeignPid>,
}

impl StopReport {
    /// Nodes of the config that had no running server.
    pub fn already_down(&self) -> Vec<u32> {
        let ran: Vec<u32> = self.stopped.iter().chain(&self.still_running).map(|p| p.node).collect();
        self.nodes.iter().copied().filter(|n| !ran.contains(n)).collect()
    }
}

/// Stop the cluster in `dir` (possibly started by another process, nodes restarted by hand included):
/// SIGTERM each of its running servers ([`survey_cluster_dir`]: only pids verified to be its servers), wait
/// up to [`STOP_GRACE`], SIGKILL the rest (verified again), then remove `DIR/pids`. A pid in `DIR/pids`
/// that is not its server is left alone and reported. Servers whose directory was deleted under them are
/// still found by their command line and stopped. An error only if `dir` holds no cluster (no
/// `cluster.toml`, no `pids`) and no process runs as one of its servers.
pub fn stop_cluster_dir(dir: &Path) -> Result<StopReport, NetError> {
    let config = ConfigPath::of(dir)?;
    let survey = survey_cluster_dir(dir)?;
    if !dir.join(CONFIG_FILE).exists() && !dir.join(PIDS_FILE).exists() && survey.running.is_empty() {
        return Err(NetError::Cluster(format!(
            "no cluster to stop in {}: it has no {CONFIG_FILE}, no {PIDS_FILE}, and no process runs as one of \
             its servers",
            dir.display()
        )));
    }
    let mut report = StopReport {
        nodes: ClusterConfig::load_unvalidated(dir.join(CONFIG_FILE))
            .map(|c| c.nodes.iter().map(|n| n.id).collect())
            .unwrap_or_default(),
        exited: survey.exited,
        foreign: survey.foreign,
        ..Default::default()
    };
    let mut signalled = Vec::new();
    for p in survey.running {
        // Verified again just before the signal.
        if is_our_server(p.pid, p.node, &config) && signal(p.pid, libc::SIGTERM) {
            signalled.push(p);
        }
    }
    let deadline = Instant::now() + STOP_GRACE;
    for p in &signalled {
        while is_running(p.pid) {
            if Instant::now() >= deadline {
                if is_our_server(p.pid, p.node, &config) && signal(p.pid, libc::SIGKILL) {
                    report.killed.push(*p);
                }
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
    let kill_deadline = Instant::now() + Duration::from_secs(2);
    for p in signalled {
        while is_running(p.pid) && Instant::now() < kill_deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        if is_running(p.pid) {
            report.still_running.push(p);
        } else {
            report.stopped.push(p);
        }
    }
    if dir.exists() {
        write_pids_file(dir, report.still_running.iter().map(|p| (p.node, p.pid)).collect())?;
    }
    Ok(report)
}

/// What a process costs, from `/proc` (Linux).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ProcessStats {
    /// Resident memory.
    pub rss_bytes: u64,
    /// User plus system CPU time.
    pub cpu_seconds: f64,
    /// Time since the process started.
    pub age_seconds: f64,
    /// Bytes it caused to be written to storage (`/proc/PID/io`), if readable.
    pub written_bytes: Option<u64>,
}

impl ProcessStats {
    /// Average share of one core used since the process started, in percent.
    pub fn cpu_percent(&self) -> f64 {
        if self.age_seconds > 0.0 { 100.0 * self.cpu_seconds / self.age_seconds } else { 0.0 }
    }
}

/// [`ProcessStats`] of a live process, or `None` where `/proc` cannot say.
pub fn process_stats(pid: u32) -> Option<ProcessStats> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the parenthesised command name, from field 3 (the state) on.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let field = |n: usize| fields.get(n - 3).and_then(|f| f.parse::<u64>().ok());
    // SAFETY: sysconf has no memory-safety preconditions.
    let (ticks, page) = unsafe { (libc::sysconf(libc::_SC_CLK_TCK), libc::sysconf(libc::_SC_PAGESIZE)) };
    let ticks = if ticks > 0 { ticks as f64 } else { 100.0 };
    let page = if page > 0 { page as u64 } else { 4096 };
    let uptime: f64 = std::fs::read_to_string("/proc/uptime").ok()?.split_whitespace().next()?.parse().ok()?;
    let written_bytes = std::fs::read_to_string(format!("/proc/{pid}/io"))
        .ok()
        .and_then(|io| io.lines().find_map(|l| l.strip_prefix("write_bytes:")?.trim().parse().ok()));
    Some(ProcessStats {
        rss_bytes: field(24)? * page,
        cpu_seconds: (field(14)? + field(15)?) as f64 / ticks,
        age_seconds: (uptime - field(22)? as f64 / ticks).max(0.0),
        written_bytes,
    })
}

/// A base port `b` such that `b..b + 64` could all be bound on 127.0.0.1 just now (random, below the kernel's ephemeral range where there is room).
pub fn free_base_port() -> u16 {
    free_port_range(64)
}

/// The first port of the kernel's ephemeral range (Linux), if it can be read.
fn ephemeral_low() -> Option<u64> {
    let range = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range").ok()?;
    range.split_whitespace().next()?.parse().ok()
}

/// A base port `b` such that `b..b + count` could all be bound on 127.0.0.1 just now. Chosen below the
/// kernel's ephemeral range where there is room: a port in that range may be taken by any outgoing
/// connection between this check and the server's bind (seen as a test's node failing with "Address already
/// in use").
pub fn free_port_range(count: u16) -> u16 {
    let (low, high) = match ephemeral_low() {
        Some(e) if e > 10_000 + 4 * u64::from(count) => (10_000, e),
        _ => (20_000, 60_000),
    };
    let span = (high - low).saturating_sub(u64::from(count)).max(1);
    let mut base = low as u16;
    for _ in 0..200 {
        base = (low + os_u64() % span) as u16;
        let all_free = (0..count).all(|i| TcpListener::bind(("127.0.0.1", base + i)).is_ok());
        if all_free {
            return base;
        }
    }
    base
}
