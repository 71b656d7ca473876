//! Server processes, local clusters and the client commands.

use crate::ClusterUpArgs;
use anyhow::{Context, Result, bail};
use snowline_core::{Key, Protocol, Request, Topology, Value};
use snowline_net::ClusterConfig;
use snowline_net::cluster::{
    CONFIG_FILE, LocalCluster, LocalData, PIDS_FILE, SERVERS_FILE, STOP_GRACE, ServerProcess, load_local_data,
    spawn_local_cluster_with,
};
use snowline_protocols::with_protocol;
use snowline_storage::FsyncPolicy;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Load a cluster config, resolving a protocol alias (`cc-lo`) to its canonical name, which is what every
/// process of the cluster compares.
pub(crate) fn load_config(path: &Path) -> Result<ClusterConfig> {
    let mut config = ClusterConfig::load(path)?;
    config.protocol = snowline_protocols::canonical_name(&config.protocol)
        .with_context(|| format!("in {}", path.display()))?
        .to_string();
    Ok(config)
}

/// `snowline server`: one OS process hosting its partitions until SIGTERM or Ctrl-C.
pub fn server(
    config_path: &Path,
    node: u32,
    data_dir: Option<PathBuf>,
    fsync: FsyncPolicy,
    metrics: Option<String>,
    grpc: Option<String>,
) -> Result<()> {
    let mut config = load_config(config_path)?;
    let Some(me) = config.nodes.iter_mut().find(|n| n.id == node) else {
        bail!(
            "node {node} is not in {} (it lists nodes {:?})",
            config_path.display(),
            config.nodes.iter().map(|n| n.id).collect::<Vec<_>>()
        );
    };
    if metrics.is_some() {
        me.metrics = metrics;
        config.validate().context("--metrics")?;
    }
    let Some(me) = config.nodes.iter_mut().find(|n| n.id == node) else { unreachable!("found above") };
    if grpc.is_some() {
        me.grpc = grpc;
        config.validate().context("--grpc")?;
    }
    let protocol = config.protocol.clone();
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    // The server runs as a task, not as the future `block_on` polls: waking that future from another task
    // costs the runtime an extra epoll call, once per request (seen with strace).
    rt.block_on(async move {
        let durability = data_dir.map(|data_dir| snowline_net::Durability { data_dir, fsync });
        with_protocol!(&protocol, P => serve_node::<P>(config, node, durability).await)?
    })
}

/// One server process's tasks: its partition servers and, where the config gives it a `grpc` address, the
/// public API endpoint (docs/API.md), both until SIGTERM or Ctrl-C.
async fn serve_node<P: Protocol>(
    config: ClusterConfig,
    node: u32,
    durability: Option<snowline_net::Durability>,
) -> Result<()> {
    let api = match config.node(node).and_then(|n| n.grpc.clone()) {
        Some(addr) => {
            let registered = snowline_protocols::PROTOCOLS.iter().find(|r| r.name == P::NAME);
            let info = snowline_api::EndpointInfo {
                level: registered.map_or("", |r| r.claimed_level).to_string(),
                family: registered.map_or("", |r| r.family).to_string(),
            };
            let serve = snowline_api::serve::<P>(config.clone(), node, info, Default::default(), shutdown_signal());
            Some(tokio::spawn(async move { serve.await.with_context(|| format!("the gRPC API on {addr}")) }))
        }
        None => None,
    };
    let mut server = tokio::spawn(snowline_net::run_server_with::<P>(config, node, durability, shutdown_signal()));
    let Some(mut api) = api else { return Ok(server.await??) };
    tokio::select! {
        // The API stops on the same signal as the servers; one that cannot start (its address taken) stops
        // the process with its error rather than leave a node without the API its config promises.
        api_done = &mut api => {
            api_done??;
            Ok(server.await??)
        }
        served = &mut server => Ok(served??),
    }
}

/// `snowline certs`: certificates for every node of a config, and the `[tls]` section naming them.
pub fn certs(config_path: &Path, out: &Path) -> Result<()> {
    let config = ClusterConfig::load_unvalidated(config_path)?;
    anyhow::ensure!(!config.nodes.is_empty(), "{} lists no [[node]]", config_path.display());
    let out = std::path::absolute(out)?;
    let ids: Vec<u32> = config.nodes.iter().map(|n| n.id).collect();
    let tls = snowline_net::tls::generate(ids.iter().copied())?.write(&out)?;
    println!("wrote {} and a certificate and key for each of nodes {ids:?}", tls.ca.display());
    println!("add to {} (and remove any `insecure = true`):\n", config_path.display());
    println!("[tls]\nca = {:?}\ncert = {:?}\nkey = {:?}\n", tls.ca, tls.cert, tls.key);
    println!(
        "each host needs ca.pem and the certificates and keys of its own nodes only; keep the keys private (mode 0600)"
    );
    Ok(())
}

/// How long a write in dc0 (a PUT, or a read-modify-write transaction where the protocol offers no blind
/// writes) takes to become readable in dc1, in milliseconds, for `probes` writes one after
/// another (each a new key starting with `tag`). The reader polls every 200 µs.
pub async fn visibility_ms<P: Protocol>(config: &ClusterConfig, probes: usize, tag: &str) -> Result<Vec<f64>> {
    let dc0 = snowline_net::ClientRuntime::<P>::connect(config, 0).await?;
    let dc1 = snowline_net::ClientRuntime::<P>::connect(config, 1).await?;
    let (writer, reader) = (dc0.session(), dc1.session());
    let mut out = Vec::with_capacity(probes);
    for i in 0..probes {
        let key: Key = format!("{tag}-{i}").into();
        let value: Value = format!("{tag}-value-{i}").into();
        let put = if P::OFFERS.blind_writes {
            let put = std::time::Instant::now();
            writer.execute(Request::Put { key: key.clone(), value: value.clone() }).await?;
            put
        } else {
            // A protocol without blind writes (NMSI aborts them): read the key, then commit the write.
            let mut txn = writer.begin().await?;
            txn.get(std::slice::from_ref(&key)).await?;
            txn.put(key.clone(), value.clone());
            let put = std::time::Instant::now();
            txn.commit().await?;
            put
        };
        loop {
            // A protocol that certifies reads (ser) may abort the read: poll again.
            let reply = match reader.execute(Request::Rot { keys: vec![key.clone()] }).await {
                Err(snowline_core::OpError::Aborted(_)) => None,
                other => Some(other?),
            };
            if reply.is_some_and(|r| r.reads[0].value.as_ref() == Some(&value)) {
                out.push(put.elapsed().as_secs_f64() * 1e3);
                break;
            }
            anyhow::ensure!(put.elapsed() < Duration::from_secs(10), "a write in dc0 never became visible in dc1");
            tokio::time::sleep(Duration::from_micros(200)).await;
        }
    }
    Ok(out)
}

/// "2 datacenters × 4 partitions × 1 replica", plus ", site placement" for that placement.
fn shape(t: &Topology) -> String {
    let n = |count: u16, what: &str| format!("{count} {what}{}", if count == 1 { "" } else { "s" });
    let placement = if t.placement == snowline_core::Placement::Spread { "" } else { ", site placement" };
    format!("{} × {} × {}{placement}", n(t.dcs, "datacenter"), n(t.partitions, "partition"), n(t.replicas, "replica"))
}

/// Resolves on SIGTERM or Ctrl-C.
async fn shutdown_signal() {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .expect("installing a SIGTERM handler");
    tokio::select! {
        _ = term.recv() => {}
        _ = tokio::signal::ctrl_c() => {}
    }
}

fn new_cluster_dir(dir: Option<PathBuf>) -> Result<PathBuf> {
    let dir = match dir {
        Some(d) => d,
        None => {
            let stamp = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH)?.as_millis();
            std::env::temp_dir().join(format!("snowline-{}-{stamp}", std::process::id()))
        }
    };
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    Ok(dir)
}

/// How a local cluster is set up beyond its protocol, topology and latency.
#[derive(Clone, Debug, Default)]
pub struct LocalSetup {
    /// Where its config, certificates, pids and logs go (default: a new temporary directory).
    pub dir: Option<PathBuf>,
    pub base_port: Option<u16>,
    /// Durable servers (default: in memory).
    pub data: Option<LocalData>,
    /// No peer authentication (default: mutual TLS with certificates made in DIR/tls).
    pub insecure: bool,
    /// Clients must use TLS too.
    pub client_tls: bool,
    /// Every server gets a metrics port.
    pub metrics: bool,
    /// Every server serves the gRPC API on a port of its own.
    pub grpc: bool,
    /// The CPUs the servers are pinned to (`bench --pin`).
    pub pin: crate::pinning::Placement,
    /// The protocols' tunables, written into the cluster's config file.
    pub protocol_config: snowline_core::ProtocolConfig,
    /// Servers follow a nemesis's fault file, DIR/faults.json (`snowline nemesis`; experiments only).
    pub faults: bool,
}

/// Start a local cluster of real server processes and wait until every one accepts connections.
pub fn start_local_cluster(
    protocol: &str,
    topology: Topology,
    latency_ms: f64,
    setup: LocalSetup,
) -> Result<(LocalCluster, ClusterConfig, PathBuf)> {
    let LocalSetup { dir, base_port, data, insecure, client_tls, metrics, grpc, pin, protocol_config, faults } = setup;
    anyhow::ensure!(!(insecure && client_tls), "--client-tls needs certificates: it cannot go with --insecure");
    let protocol = snowline_protocols::canonical_name(protocol)?;
    let dir = new_cluster_dir(dir)?;
    let port = match base_port {
        Some(p) => p,
        None => snowline_net::cluster::free_base_port(),
    };
    let mut config = ClusterConfig::local_replicated(protocol, topology, port)?.with_uniform_latency_ms(latency_ms);
    config.protocol_config = protocol_config;
    if faults {
        config.fault_file = Some(std::path::absolute(dir.join("faults.json"))?);
    }
    let mut taken = vec![port];
    if metrics {
        let base = listener_base_port(&taken, config.nodes.len());
        taken.push(base);
        config = config.with_metrics_ports(base)?;
    }
    if grpc {
        let base = listener_base_port(&taken, config.nodes.len());
        config = config.with_grpc_ports(base)?;
    }
    if insecure {
        config = config.insecure();
    } else if client_tls {
        config = config.with_new_certs(&std::path::absolute(dir.join("tls"))?)?;
        config.tls.as_mut().expect("just made").clients = true;
    }
    let exe = std::env::current_exe().context("locating the snowline executable")?;
    let cluster = spawn_local_cluster_with(&exe, &dir, &config, data)?;
    // The certificates made for it are in the config the cluster was started with.
    let config = cluster.config().clone();
    cluster
        .wait_ready(Duration::from_secs(20))
        .with_context(|| format!("waiting for the servers to start (their logs are in {})", dir.display()))?;
    for pid in cluster.pids() {
        pin.pin_server(pid)?;
    }
    Ok((cluster, config, dir))
}

/// A base port for `count` listeners (metrics, gRPC): free just now and clear of the ranges
/// `base..base + count` of each base in `taken` (the servers' own ports, listeners placed before).
fn listener_base_port(taken: &[u16], count: usize) -> u16 {
    let count = u16::try_from(count).unwrap_or(u16::MAX);
    let clear =
        |m: u16| taken.iter().all(|&t| u32::from(m) + u32::from(count) <= u32::from(t) || m >= t.saturating_add(count));
    let mut base = snowline_net::cluster::free_port_range(count);
    for _ in 0..20 {
        if clear(base) {
            break;
        }
        base = snowline_net::cluster::free_port_range(count);
    }
    base
}

/// `snowline cluster up`: a new cluster, or (`--dir` holding a stopped one) that cluster started again.
pub fn cluster_up(args: ClusterUpArgs) -> Result<()> {
    anyhow::ensure!(args.replicas != Some(0), "--replicas must be at least 1");
    anyhow::ensure!(args.dcs > 0 && args.partitions > 0, "--dcs and --partitions must be at least 1");
    if let Some(dir) = &args.dir
        && dir.join(CONFIG_FILE).exists()
    {
        snowline_net::cluster::refuse_if_running(dir)?;
        if let UpPlan::Resume(data) = plan_for_existing(&args, dir)? {
            let exe = std::env::current_exe().context("locating the snowline executable")?;
            let cluster = snowline_net::resume_local_cluster(&exe, dir, data)
                .with_context(|| format!("starting the stopped cluster in {} again", dir.display()))?;
            cluster
                .wait_ready(Duration::from_secs(60))
                .with_context(|| format!("waiting for the servers to start (their logs are in {})", dir.display()))?;
            return serve_until_stopped(cluster, true, args.background);
        }
    }
    let (dcs, partitions) = (args.dcs, args.partitions);
    let topology = Topology::placed(dcs, partitions, args.replicas.unwrap_or(dcs), args.placement);
    snowline_protocols::with_protocol!(&args.protocol, P => P::check_topology(&topology))?
        .map_err(|e| anyhow::anyhow!(e))?;
    let data = args.data_dir.clone().map(|root| LocalData { root, fsync: args.fsync });
    let setup = LocalSetup {
        dir: args.dir.clone(),
        base_port: args.base_port,
        data,
        insecure: args.insecure,
        client_tls: args.client_tls,
        metrics: args.metrics,
        grpc: true,
        pin: Default::default(),
        protocol_config: snowline_core::ProtocolConfig { termination: args.termination, ..Default::default() },
        faults: false,
    };
    let (cluster, _, _) = start_local_cluster(&args.protocol, topology, args.latency_ms, setup)?;
    serve_until_stopped(cluster, false, args.background)
}

/// What `cluster up --dir DIR` does when DIR holds a stopped cluster.
enum UpPlan {
    /// Start it again, its servers durable (`Some`) or in memory.
    Resume(Option<LocalData>),
    /// Start a new cluster in its place (it ran in memory and the flags ask for another).
    New,
}

/// Compare the flags given on the command line with the stopped cluster in `dir`: start it again if they
/// agree (flags left out agree; --fsync may change), a new one in place of an in-memory cluster if not, and
/// refuse to replace a durable cluster.
fn plan_for_existing(args: &ClusterUpArgs, dir: &Path) -> Result<UpPlan> {
    let path = dir.join(CONFIG_FILE);
    let config = load_config(&path).with_context(|| {
        format!("{} holds a cluster whose config cannot be used; remove it or use another --dir", dir.display())
    })?;
    let recorded = if dir.join(SERVERS_FILE).exists() { load_local_data(dir)? } else { None };
    let topology = config.topology();
    let given = |id: &str| args.given.iter().any(|g| g == id);
    let mut differ = Vec::new();
    let mut check = |id: &str, ours: String, theirs: String| {
        if given(id) && ours != theirs {
            differ.push(format!("--{} {ours} (the cluster's: {theirs})", id.replace('_', "-")));
        }
    };
    let protocol = snowline_protocols::canonical_name(&args.protocol).unwrap_or(&args.protocol);
    check("protocol", protocol.to_string(), config.protocol.clone());
    check("dcs", args.dcs.to_string(), topology.dcs.to_string());
    check("partitions", args.partitions.to_string(), topology.partitions.to_string());
    check("replicas", args.replicas.unwrap_or(args.dcs).to_string(), topology.replicas.to_string());
    check("placement", args.placement.to_string(), topology.placement.to_string());
    let latency = config.inter_dc_latency_ms.iter().flatten().fold(0.0_f64, |a, b| a.max(*b));
    check("latency_ms", args.latency_ms.to_string(), latency.to_string());
    let port = config.nodes.first().and_then(|n| n.addr.rsplit_once(':')).map(|(_, p)| p.to_string());
    check("base_port", args.base_port.map(|p| p.to_string()).unwrap_or_default(), port.unwrap_or_default());
    check("insecure", args.insecure.to_string(), config.insecure.to_string());
    let client_tls = config.tls.as_ref().is_some_and(|t| t.clients);
    check("client_tls", args.client_tls.to_string(), client_tls.to_string());
    let metrics = config.nodes.iter().any(|n| n.metrics.is_some());
    check("metrics", args.metrics.to_string(), metrics.to_string());
    let ours = match &args.data_dir {
        Some(d) => std::path::absolute(d)?.display().to_string(),
        None => String::new(),
    };
    let theirs = recorded.as_ref().map_or("none (in memory)".to_string(), |d| d.root.display().to_string());
    check("data_dir", ours, theirs);
    let described = format!("{}, {}", config.protocol, shape(&topology));
    if differ.is_empty() {
        let data = recorded.map(|d| LocalData { fsync: if given("fsync") { args.fsync } else { d.fsync }, ..d });
        return Ok(UpPlan::Resume(data));
    }
    let d = dir.display();
    match recorded {
        Some(data) => bail!(
            "{d} holds a stopped durable cluster ({described}; data in {}) and these flags differ from it: {}. \
             `snowline cluster up --dir {d}` (with no flags, or flags that agree) starts it again with its data; \
             for a new cluster use another --dir",
            data.root.display(),
            differ.join(", ")
        ),
        None => {
            println!(
                "replacing the stopped in-memory cluster in {d} ({described}; it held no data): {}",
                differ.join(", ")
            );
            Ok(UpPlan::New)
        }
    }
}

/// Print what runs and how to use it; then return (`--background`, the servers left running) or wait for
/// Ctrl-C and stop every server of the directory (nodes that `cluster restart` started too).
fn serve_until_stopped(cluster: LocalCluster, resumed: bool, background: bool) -> Result<()> {
    let config = cluster.config().clone();
    let dir = cluster.dir().to_owned();
    let topology = config.topology();
    println!(
        "cluster up{}: protocol {}, {}, {} server processes",
        if resumed {
            " again (the stopped cluster of this directory: same config, ports and certificates)"
        } else {
            ""
        },
        config.protocol,
        shape(&topology),
        config.nodes.len()
    );
    match cluster.data() {
        Some(d) => println!(
            "durable: node N {} its data in {}/node-N (fsync {}); after `cluster down`, `cluster up --dir {}` \
             starts it again from there",
            if resumed { "recovered" } else { "keeps" },
            d.root.display(),
            d.fsync,
            dir.display()
        ),
        None => println!("in memory (no --data-dir): the data is lost when the servers stop"),
    }
    match &config.tls {
        Some(tls) => println!(
            "peers authenticated by mutual TLS (CA {}){}",
            tls.ca.display(),
            if tls.clients { "; clients must use TLS too" } else { "; clients may use plain TCP or TLS" }
        ),
        None => println!("INSECURE (--insecure): peers are not authenticated; any connection may speak for any server"),
    }
    println!("config: {}", dir.join(CONFIG_FILE).display());
    let metrics: Vec<String> = config
        .nodes
        .iter()
        .filter_map(|n| n.metrics.as_ref().map(|m| format!("node {}: http://{m}/metrics", n.id)))
        .collect();
    if !metrics.is_empty() {
        println!("metrics: {}", metrics.join(", "));
    }
    let grpc: Vec<String> = config
        .nodes
        .iter()
        .filter_map(|n| n.grpc.as_ref().map(|g| format!("node {} (dc{}): {g}", n.id, n.dc)))
        .collect();
    if !grpc.is_empty() {
        println!("gRPC API: {} (docs/API.md)", grpc.join(", "));
    }
    println!("{}", served_operations(&config.protocol, &dir));
    println!("status:  snowline cluster status --dir {}", dir.display());
    if background {
        println!("stop:    snowline cluster down --dir {}", dir.display());
        cluster.detach();
        return Ok(());
    }
    println!("press Ctrl-C to stop every server process");
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    rt.block_on(shutdown_signal());
    cluster.stop();
    // Nodes another process started (`cluster restart`) are not this process's children.
    let rest = snowline_net::stop_cluster_dir(&dir)?;
    if !rest.stopped.is_empty() {
        println!("stopped {} restarted server process(es) too: {}", rest.stopped.len(), list(&rest.stopped, &dir));
    }
    println!("cluster stopped");
    Ok(())
}

/// `node 0 (pid 11), node 1 (pid 12, not in DIR/pids)`.
fn list(processes: &[ServerProcess], dir: &Path) -> String {
    let pids = dir.join(PIDS_FILE);
    processes
        .iter()
        .map(|p| {
            let unlisted = if p.listed { String::new() } else { format!(", not in {}", pids.display()) };
            format!("node {} (pid {}{unlisted})", p.node, p.pid)
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// `snowline cluster down`.
pub fn cluster_down(dir: &Path) -> Result<()> {
    let r =
        snowline_net::stop_cluster_dir(dir).with_context(|| format!("stopping the cluster in {}", dir.display()))?;
    let running = r.stopped.len() + r.still_running.len();
    if running == 0 {
        println!("no server process of the cluster in {} was running: nothing to stop", dir.display());
    } else {
        println!(
            "stopped {} server process{} ({running} {} running): {}",
            r.stopped.len(),
            if r.stopped.len() == 1 { "" } else { "es" },
            if running == 1 { "was" } else { "were" },
            list(&r.stopped, dir)
        );
    }
    for p in &r.killed {
        println!("node {} (pid {}) ignored SIGTERM for {:?}: killed with SIGKILL", p.node, p.pid, STOP_GRACE);
    }
    let down = r.already_down();
    if !down.is_empty() {
        println!("already down: {}", down.iter().map(|n| format!("node {n}")).collect::<Vec<_>>().join(", "));
    }
    for f in &r.foreign {
        println!(
            "left alone: pid {} (listed for node {} in {}) is not this cluster's server; it runs: {}",
            f.pid,
            f.node,
            dir.join(PIDS_FILE).display(),
            f.command
        );
    }
    anyhow::ensure!(r.still_running.is_empty(), "still running after SIGKILL: {}", list(&r.still_running, dir));
    Ok(())
}

/// `snowline cluster status`: one line per node (one per process if a node has several).
pub fn cluster_status(dir: &Path) -> Result<()> {
    let path = dir.join(CONFIG_FILE);
    anyhow::ensure!(
        path.exists(),
        "no cluster in {}: it has no {CONFIG_FILE} (`snowline cluster up --dir {}` makes one)",
        dir.display(),
        dir.display()
    );
    let config = load_config(&path)?;
    // `None`: not recorded (a directory from an older snowline).
    let data = if dir.join(SERVERS_FILE).exists() { Some(load_local_data(dir)?) } else { None };
    let survey = snowline_net::survey_cluster_dir(dir)?;
    let topology = config.topology();
    let storage = match &data {
        Some(Some(d)) => format!("durable (data in {}, fsync {})", d.root.display(), d.fsync),
        Some(None) => "in memory".to_string(),
        None => format!("storage unknown (no {SERVERS_FILE})"),
    };
    let peers =
        if config.insecure { "peers NOT authenticated (insecure)" } else { "peers authenticated by mutual TLS" };
    println!("cluster {}: protocol {}, {}, {storage}, {peers}", dir.display(), config.protocol, shape(&topology));
    // The METRICS column only when some node has a metrics address.
    let with_metrics = config.nodes.iter().any(|n| n.metrics.is_some());
    let mut header: Vec<String> =
        ["NODE", "SERVERS", "STATE", "PROTOCOL", "PID", "ADDRESS", "DATA", "RSS", "CPU", "CPU%", "WRITTEN"]
            .map(String::from)
            .to_vec();
    let with_grpc = config.nodes.iter().any(|n| n.grpc.is_some());
    if with_metrics {
        header.insert(6, "METRICS".into());
    }
    if with_grpc {
        header.insert(6, "GRPC".into());
    }
    let mut rows = vec![header];
    let mut up = 0;
    let mut down = Vec::new();
    for node in &config.nodes {
        let partitions: Vec<String> = node.partitions.iter().map(|p| format!("p{p}")).collect();
        let replica = if node.replica > 0 { format!("/r{}", node.replica) } else { String::new() };
        let servers = format!("dc{}/{}{replica}", node.dc, partitions.join(","));
        let data_dir = match &data {
            Some(Some(d)) => d.node_dir(node.id).display().to_string(),
            Some(None) => "(memory)".to_string(),
            None => "?".to_string(),
        };
        let processes: Vec<&ServerProcess> = survey.running.iter().filter(|p| p.node == node.id).collect();
        let row = |state: &str, pid: String, stats: Option<snowline_net::cluster::ProcessStats>| {
            let dash = || "-".to_string();
            let mut row = vec![
                node.id.to_string(),
                servers.clone(),
                state.to_string(),
                config.protocol.clone(),
                pid,
                node.addr.clone(),
                data_dir.clone(),
                stats.map_or_else(dash, |s| mib(s.rss_bytes)),
                stats.map_or_else(dash, |s| format!("{:.2}s", s.cpu_seconds)),
                stats.map_or_else(dash, |s| format!("{:.1}", s.cpu_percent())),
                stats.and_then(|s| s.written_bytes).map_or_else(dash, mib),
            ];
            if with_metrics {
                row.insert(6, node.metrics.clone().unwrap_or_else(dash));
            }
            if with_grpc {
                row.insert(6, node.grpc.clone().unwrap_or_else(dash));
            }
            row
        };
        if processes.is_empty() {
            down.push(node.id);
            rows.push(row("down", "-".into(), None));
        } else {
            up += 1;
        }
        for p in processes {
            rows.push(row("up", p.pid.to_string(), snowline_net::cluster::process_stats(p.pid)));
        }
    }
    let widths: Vec<usize> =
        (0..rows[0].len()).map(|c| rows.iter().map(|r| r[c].chars().count()).max().unwrap_or(0)).collect();
    for row in &rows {
        let cells: Vec<String> = row.iter().zip(&widths).map(|(cell, w)| format!("{cell:<w$}")).collect();
        println!("{}", cells.join("  ").trim_end());
    }
    let d = dir.display();
    println!("{up} of {} nodes up", config.nodes.len());
    println!("{}", served_operations(&config.protocol, dir));
    if up == 0 {
        println!("stopped: `snowline cluster up --dir {d}` starts it again");
    } else if !down.is_empty() {
        match &data {
            Some(Some(_)) => {
                for n in &down {
                    println!("start node {n} again: snowline cluster restart --dir {d} --node {n}");
                }
            }
            _ => println!(
                "in memory, a node cannot come back with its data: `snowline cluster down --dir {d}` and \
                 `snowline cluster up --dir {d}` start the whole cluster again, empty"
            ),
        }
    }
    for p in survey.running.iter().filter(|p| !p.listed) {
        println!(
            "note: node {} (pid {}) is not in {} (started by hand?); `cluster down` stops it too",
            p.node,
            p.pid,
            dir.join(PIDS_FILE).display()
        );
    }
    for f in &survey.foreign {
        println!(
            "note: {} lists pid {} for node {}, but that process is not this cluster's server (it runs: {}); \
             `cluster down` leaves it alone",
            dir.join(PIDS_FILE).display(),
            f.pid,
            f.node,
            f.command
        );
    }
    Ok(())
}

fn mib(bytes: u64) -> String {
    format!("{:.1}MiB", bytes as f64 / (1024.0 * 1024.0))
}

/// `snowline cluster restart`.
pub fn cluster_restart(dir: &Path, nodes: &[u32]) -> Result<()> {
    let config = load_config(&dir.join(CONFIG_FILE))
        .with_context(|| format!("no cluster to restart a node of in {}", dir.display()))?;
    let Some(data) = load_local_data(dir)? else {
        bail!(
            "the cluster in {d} runs in memory: a restarted node would come back empty, without the writes it held \
             (a raft-kv member without its votes and log), so it is not restarted. Start the whole cluster again \
             (`snowline cluster down --dir {d}`, then `snowline cluster up --dir {d}`: empty), or run a durable \
             cluster (--data-dir)",
            d = dir.display()
        )
    };
    let exe = std::env::current_exe().context("locating the snowline executable")?;
    for &id in nodes {
        let pid = snowline_net::restart_node_in_dir(&exe, dir, id, Duration::from_secs(60))
            .with_context(|| format!("restarting node {id} of the cluster in {}", dir.display()))?;
        println!(
            "node {id} is running again: pid {pid}, {}, data {} (fsync {}), log {}",
            config.node(id).map_or("?", |n| n.addr.as_str()),
            data.node_dir(id).display(),
            data.fsync,
            dir.join(format!("node-{id}.log")).display()
        );
    }
    Ok(())
}

/// Run `f` against a fresh local cluster, then stop it; also returns the servers' CPU seconds.
pub fn with_local_cluster<T>(
    protocol: &str,
    topology: Topology,
    latency_ms: f64,
    setup: LocalSetup,
    f: impl FnOnce(&ClusterConfig) -> Result<T>,
) -> Result<(T, f64)> {
    with_local_servers(protocol, topology, latency_ms, setup, |config, _| f(config))
}

/// [`with_local_cluster`], also giving `f` the server processes' ids: [`servers_cpu_seconds`] of them at two
/// moments is the servers' CPU time in between (what `bench` measures over its window).
pub fn with_local_servers<T>(
    protocol: &str,
    topology: Topology,
    latency_ms: f64,
    setup: LocalSetup,
    f: impl FnOnce(&ClusterConfig, &[u32]) -> Result<T>,
) -> Result<(T, f64)> {
    let temporary = setup.dir.is_none();
    let (cluster, config, dir) = start_local_cluster(protocol, topology, latency_ms, setup)?;
    let result = f(&config, &cluster.pids());
    let cpu = servers_cpu_seconds(&cluster.pids());
    // A server that died during the run makes its figures meaningless: fail, naming it.
    let died: Vec<String> = cluster.exited().iter().map(|(id, status)| format!("node {id} ({status})")).collect();
    cluster.stop();
    let result = result.with_context(|| format!("server logs are in {}", dir.display()))?;
    anyhow::ensure!(
        died.is_empty(),
        "server process {} exited during the run; its log is in {}",
        died.join(", "),
        dir.display()
    );
    if temporary {
        // Keep the logs only when something went wrong.
        let _ = std::fs::remove_dir_all(&dir);
    }
    Ok((result, cpu))
}

/// User plus system CPU seconds of a live process, from /proc (0 where unavailable).
fn cpu_seconds(pid: u32) -> f64 {
    snowline_net::cluster::process_stats(pid).map_or(0.0, |s| s.cpu_seconds)
}

/// The servers' CPU seconds so far (user plus system, every thread), summed over their processes.
pub fn servers_cpu_seconds(pids: &[u32]) -> f64 {
    pids.iter().map(|pid| cpu_seconds(*pid)).sum()
}

/// This process's own CPU seconds so far (user plus system, every thread), measured as the servers' are.
pub fn own_cpu_seconds() -> f64 {
    cpu_seconds(std::process::id())
}

/// A client command's operation.
pub enum Op {
    Put(Key, Value),
    Rot(Vec<Key>),
    /// `txn`: reads, then writes; interactive where the protocol offers it, else a blind update.
    Txn {
        reads: Vec<Key>,
        writes: Vec<(Key, Value)>,
    },
}

/// The exit status of a client command whose transaction aborted (it certainly had no effect; retrying may
/// commit).
pub const EXIT_ABORTED: i32 = 3;

/// Run one client operation against the cluster in `dir` and print its result as JSON.
pub fn client(dir: Option<PathBuf>, dc: u16, op: Op) -> Result<()> {
    let Some(dir) = dir else {
        bail!(
            "no cluster given: pass --cluster DIR (the directory `snowline cluster up` printed) or set SNOWLINE_CLUSTER"
        )
    };
    let (path, dir) = if dir.is_dir() {
        (dir.join(CONFIG_FILE), dir)
    } else {
        let parent = dir.parent().map_or_else(|| PathBuf::from("."), Path::to_path_buf);
        (dir, parent)
    };
    let config = load_config(&path)?;
    anyhow::ensure!(dc < config.dcs, "--dc {dc}: {}", datacenters(config.dcs));
    let protocol = config.protocol.clone();
    let offers = snowline_protocols::lookup(&protocol)?.offers;
    // Everything that can be refused is refused before connecting: bad keys, then what the protocol does
    // not serve, each refusal naming what it does serve.
    let limits = &config.protocol_config;
    let refused = |why: String| anyhow::anyhow!("{why}\n{}", served_operations(&protocol, &dir));
    let request = match op {
        Op::Put(key, value) => {
            let request = Request::Put { key, value };
            limits.check_request(&request).map_err(anyhow::Error::msg)?;
            snowline_protocols::check_offered(&protocol, &request).map_err(|e| {
                let Request::Put { key, value } = &request else { unreachable!() };
                let read_first = if offers.interactive {
                    format!(
                        "; on {protocol}, write it in a transaction that reads it first: {}",
                        txn_line(&dir, std::slice::from_ref(key), &[(key.clone(), value.clone())])
                    )
                } else {
                    String::new()
                };
                refused(format!("{e}{read_first}"))
            })?;
            request
        }
        Op::Rot(keys) => {
            let request = Request::Rot { keys };
            limits.check_request(&request).map_err(anyhow::Error::msg)?;
            snowline_protocols::check_offered(&protocol, &request).map_err(refused)?;
            request
        }
        Op::Txn { reads, writes } if offers.interactive => {
            if !reads.is_empty() {
                limits.check_request(&Request::Read { keys: reads.clone() }).map_err(anyhow::Error::msg)?;
            }
            limits.check_request(&Request::Commit { writes: writes.clone() }).map_err(anyhow::Error::msg)?;
            snowline_protocols::check_transaction(&protocol, &reads, &writes).map_err(|e| {
                let mut all_reads = reads.clone();
                for (k, _) in &writes {
                    if !all_reads.contains(k) {
                        all_reads.push(k.clone());
                    }
                }
                refused(format!("{e}: {}", txn_line(&dir, &all_reads, &writes)))
            })?;
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
            let result = rt.block_on(async {
                reachable(&config, &dir).await?;
                with_protocol!(&protocol, P => interactive::<P>(&config, dc, reads, writes).await)?
            });
            return match result {
                Ok(out) => {
                    println!("{out}");
                    Ok(())
                }
                Err(e) => match e.downcast_ref::<snowline_core::OpError>() {
                    Some(snowline_core::OpError::Aborted(a)) => {
                        eprintln!("transaction aborted ({}): {}", a.cause, a.detail);
                        std::process::exit(EXIT_ABORTED)
                    }
                    Some(snowline_core::OpError::Unknown(_)) => Err(anyhow::anyhow!("{e}; {}", status_hint(&dir))),
                    _ => Err(e),
                },
            };
        }
        Op::Txn { reads, writes } => {
            if !reads.is_empty() {
                limits.check_request(&Request::Rot { keys: reads.clone() }).map_err(anyhow::Error::msg)?;
            }
            let request = Request::Update { writes };
            if !request.writes().is_empty() {
                limits.check_request(&request).map_err(anyhow::Error::msg)?;
            }
            if !reads.is_empty() {
                snowline_protocols::check_offered(&protocol, &Request::Begin)
                    .map_err(|e| refused(format!("txn --get needs interactive transactions: {e}")))?;
            }
            snowline_protocols::check_offered(&protocol, &request).map_err(refused)?;
            request
        }
    };
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let out = rt.block_on(async {
        reachable(&config, &dir).await?;
        with_protocol!(&protocol, P => execute::<P>(&config, &dir, dc, request).await)?
    })?;
    println!("{out}");
    Ok(())
}

/// "the cluster has 2 datacenters: --dc 0 or --dc 1".
fn datacenters(dcs: u16) -> String {
    match dcs {
        0 => "the cluster has no datacenter".to_string(),
        1 => "the cluster has 1 datacenter: --dc 0".to_string(),
        2..=6 => {
            let flags: Vec<String> = (0..dcs).map(|d| format!("--dc {d}")).collect();
            let (last, rest) = flags.split_last().expect("two or more");
            format!("the cluster has {dcs} datacenters: {} or {last}", rest.join(", "))
        }
        _ => format!("the cluster has {dcs} datacenters: --dc 0 to --dc {}", dcs - 1),
    }
}

/// `snowline --cluster DIR txn --get a --put a=2`.
fn txn_line(dir: &Path, reads: &[Key], writes: &[(Key, Value)]) -> String {
    let mut line = format!("snowline --cluster {} txn", dir.display());
    for k in reads {
        line += &format!(" --get {}", shell_word(k));
    }
    for (k, v) in writes {
        line += &format!(" --put {}", shell_word(&format!("{k}={v}")));
    }
    line
}

/// `word`, quoted for a shell where it needs it.
fn shell_word(word: &str) -> String {
    if !word.is_empty() && word.chars().all(|c| c.is_ascii_alphanumeric() || "-_=.,:/@+%".contains(c)) {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', "'\\''"))
    }
}

/// The client operations the cluster's protocol serves, one example command line each (what `cluster up`,
/// `cluster status` and every refusal print).
pub fn served_operations(protocol: &str, dir: &Path) -> String {
    let ops = snowline_protocols::client_operations(protocol).unwrap_or_default();
    let lines: Vec<(String, &str)> =
        ops.iter().map(|op| (format!("snowline --cluster {} {}", dir.display(), op.example), op.what)).collect();
    let width = lines.iter().map(|(l, _)| l.chars().count()).max().unwrap_or(0);
    let mut out = format!("the operations {protocol} serves (add --dc N for another datacenter):");
    for (line, what) in &lines {
        out += &format!("\n  {line:<width$}  {what}");
    }
    out
}

fn status_hint(dir: &Path) -> String {
    format!("`snowline cluster status --dir {}` shows which of the cluster's servers run", dir.display())
}

/// Fails at once, saying the cluster looks down, when none of its servers accepts a TCP connection, and
/// warns, naming them, when some do not: an operation that needs one of those fails or waits.
async fn reachable(config: &ClusterConfig, dir: &Path) -> Result<()> {
    let down = down_nodes(config).await?;
    if down.len() == config.nodes.len() {
        return Err(looks_down(dir, &down));
    }
    if !down.is_empty() {
        eprintln!(
            "warning: {} of the cluster's {} server processes accept no connections ({}): an operation that \
             needs {} fails or waits; `snowline cluster status --dir {}` shows which nodes run",
            down.len(),
            config.nodes.len(),
            listed(&down),
            if down.len() == 1 { "it" } else { "them" },
            dir.display()
        );
    }
    Ok(())
}

/// The server processes that accept no TCP connection, and why ("node 1 (127.0.0.1:7101): Connection
/// refused ..."), in node order. Each is tried at once, for at most 2 s; a server that is up closes the
/// probe's connection without a word.
async fn down_nodes(config: &ClusterConfig) -> Result<Vec<String>> {
    let mut tries = tokio::task::JoinSet::new();
    for node in &config.nodes {
        let (id, addr) = (node.id, node.addr.clone());
        tries.spawn(async move {
            let why = match tokio::time::timeout(Duration::from_secs(2), tokio::net::TcpStream::connect(&addr)).await {
                Ok(Ok(_)) => return None,
                Ok(Err(e)) => e.to_string(),
                Err(_) => "no answer within 2 s".to_string(),
            };
            Some((id, format!("node {id} ({addr}): {why}")))
        });
    }
    let mut down = Vec::new();
    while let Some(result) = tries.join_next().await {
        down.extend(result?);
    }
    down.sort();
    Ok(down.into_iter().map(|(_, why)| why).collect())
}

fn listed(down: &[String]) -> String {
    if down.len() > 3 { format!("{}, and {} more", down[..3].join(", "), down.len() - 3) } else { down.join(", ") }
}

fn looks_down(dir: &Path, down: &[String]) -> anyhow::Error {
    let d = dir.display();
    anyhow::anyhow!(
        "the cluster in {d} looks down: none of its {} server process{} accepts connections ({}). \
         `snowline cluster status --dir {d}` shows which nodes run; `snowline cluster up --dir {d}` starts a \
         stopped cluster again",
        down.len(),
        if down.len() == 1 { "" } else { "es" },
        listed(down)
    )
}

/// `txn --get ... --put ...` as an interactive transaction: begin, one round of reads, commit the writes.
async fn interactive<P: Protocol>(
    config: &ClusterConfig,
    dc: u16,
    reads: Vec<Key>,
    writes: Vec<(Key, Value)>,
) -> Result<String> {
    let runtime = snowline_net::ClientRuntime::<P>::connect(config, dc).await?;
    let session = runtime.session();
    let mut txn = session.begin().await?;
    let values = if reads.is_empty() { Vec::new() } else { txn.get(&reads).await? };
    for (k, v) in writes {
        txn.put(k, v);
    }
    let reply = txn.commit().await?;
    Ok(serde_json::to_string_pretty(&serde_json::json!({
        "reads": reads.iter().zip(values).map(|(k, v)| serde_json::json!({"key": k, "value": v})).collect::<Vec<_>>(),
        "committed": true,
        "version": reply.commit,
    }))?)
}

async fn execute<P: Protocol>(config: &ClusterConfig, dir: &Path, dc: u16, request: Request) -> Result<String> {
    let runtime = snowline_net::ClientRuntime::<P>::connect(config, dc).await?;
    let session = runtime.session();
    let read_only = request.is_read_only();
    // An operation whose outcome is unknown (a server that is down refused the connection, or no answer in
    // time) is retried where that is safe: a read, or any request to raft-kv, whose session resubmits a PUT
    // under its old sequence number (applied at most once) and tries the next member of the group — so a
    // client survives a dead leader while the group elects another. Not once the whole cluster is down.
    let retry = read_only || P::NAME == snowline_protocols::RaftKv::NAME;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let mut said = std::collections::BTreeSet::new();
    let reply = loop {
        match session.execute(request.clone()).await {
            Err(snowline_core::OpError::Unknown(why)) if retry && tokio::time::Instant::now() < deadline => {
                let down = down_nodes(config).await?;
                if down.len() == config.nodes.len() {
                    return Err(looks_down(dir, &down));
                }
                if said.insert(why.clone()) {
                    eprintln!("outcome unknown ({why}); retrying for up to 30 s");
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(e @ snowline_core::OpError::Unknown(_)) => bail!("{e}; {}", status_hint(dir)),
            result => break result?,
        }
    };
    let json = if read_only {
        serde_json::to_string_pretty(&serde_json::json!({
            "reads": reply.reads.iter().map(|r| serde_json::json!({
                "key": r.key, "value": r.value, "version": r.version
            })).collect::<Vec<_>>()
        }))?
    } else {
        serde_json::to_string_pretty(&serde_json::json!({ "ok": true, "version": reply.commit }))?
    };
    Ok(json)
}
