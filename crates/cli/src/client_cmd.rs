//! Server processes, local clusters and the client commands.

use crate::ClusterUpArgs;
use anyhow::{Context, Result, bail};
use snowline_core::{Key, Protocol, Request, Topology, Value};
use snowline_net::ClusterConfig;
use snowline_net::cluster::{LocalCluster, LocalData, spawn_local_cluster_with};
use snowline_protocols::with_protocol;
use snowline_storage::FsyncPolicy;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Load a cluster config, resolving a protocol alias (`cc-lo`) to its canonical name, which is what every
/// process of the cluster compares.
fn load_config(path: &Path) -> Result<ClusterConfig> {
    let mut config = ClusterConfig::load(path)?;
    config.protocol = snowline_protocols::canonical_name(&config.protocol)
        .with_context(|| format!("in {}", path.display()))?
        .to_string();
    Ok(config)
}

/// `snowline server`: one OS process hosting its partitions until SIGTERM or Ctrl-C.
pub fn server(config_path: &Path, node: u32, data_dir: Option<PathBuf>, fsync: FsyncPolicy) -> Result<()> {
    let config = load_config(config_path)?;
    anyhow::ensure!(
        config.node(node).is_some(),
        "node {node} is not in {} (it lists nodes {:?})",
        config_path.display(),
        config.nodes.iter().map(|n| n.id).collect::<Vec<_>>()
    );
    let protocol = config.protocol.clone();
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    rt.block_on(async move {
        let durability = data_dir.map(|data_dir| snowline_net::Durability { data_dir, fsync });
        with_protocol!(&protocol, P => snowline_net::run_server_with::<P>(config, node, durability, shutdown_signal()).await)?
            .map_err(anyhow::Error::from)
    })
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

/// How long a PUT in dc0 takes to become readable in dc1, in milliseconds, for `probes` writes one after
/// another (each a new key starting with `tag`). The reader polls every 200 µs.
pub async fn visibility_ms<P: Protocol>(config: &ClusterConfig, probes: usize, tag: &str) -> Result<Vec<f64>> {
    let dc0 = snowline_net::ClientRuntime::<P>::connect(config, 0).await?;
    let dc1 = snowline_net::ClientRuntime::<P>::connect(config, 1).await?;
    let (writer, reader) = (dc0.session(), dc1.session());
    let mut out = Vec::with_capacity(probes);
    for i in 0..probes {
        let key: Key = format!("{tag}-{i}").into();
        let value: Value = format!("{tag}-value-{i}").into();
        let put = std::time::Instant::now();
        writer.execute(Request::Put { key: key.clone(), value: value.clone() }).await?;
        loop {
            let reply = reader.execute(Request::Rot { keys: vec![key.clone()] }).await?;
            if reply.reads[0].value.as_ref() == Some(&value) {
                out.push(put.elapsed().as_secs_f64() * 1e3);
                break;
            }
            anyhow::ensure!(put.elapsed() < Duration::from_secs(10), "a write in dc0 never became visible in dc1");
            tokio::time::sleep(Duration::from_micros(200)).await;
        }
    }
    Ok(out)
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
}

/// Start a local cluster of real server processes and wait until every one accepts connections.
pub fn start_local_cluster(
    protocol: &str,
    topology: Topology,
    latency_ms: f64,
    setup: LocalSetup,
) -> Result<(LocalCluster, ClusterConfig, PathBuf)> {
    let LocalSetup { dir, base_port, data, insecure, client_tls } = setup;
    anyhow::ensure!(!(insecure && client_tls), "--client-tls needs certificates: it cannot go with --insecure");
    let protocol = snowline_protocols::canonical_name(protocol)?;
    let dir = new_cluster_dir(dir)?;
    let port = match base_port {
        Some(p) => p,
        None => snowline_net::cluster::free_base_port(),
    };
    if data.is_some() {
        let replayable = snowline_protocols::with_protocol!(protocol, P => P::REPLAYABLE)?;
        anyhow::ensure!(
            replayable,
            "{protocol} cannot run durable servers yet: its servers are not made durable by replaying logged inputs \
             (docs/DURABILITY.md); run it in memory (no --data-dir / --fsync memory)"
        );
    }
    let mut config = ClusterConfig::local_replicated(protocol, topology, port)?.with_uniform_latency_ms(latency_ms);
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
    Ok((cluster, config, dir))
}

/// `snowline cluster up`.
pub fn cluster_up(args: ClusterUpArgs) -> Result<()> {
    anyhow::ensure!(args.replicas != Some(0), "--replicas must be at least 1");
    anyhow::ensure!(args.dcs > 0 && args.partitions > 0, "--dcs and --partitions must be at least 1");
    let (dcs, partitions) = (args.dcs, args.partitions);
    let topology = Topology::replicated(dcs, partitions, args.replicas.unwrap_or(dcs));
    snowline_protocols::with_protocol!(&args.protocol, P => P::check_topology(&topology))?
        .map_err(|e| anyhow::anyhow!(e))?;
    let data = args.data_dir.clone().map(|root| LocalData { root, fsync: args.fsync });
    let setup = LocalSetup {
        dir: args.dir.clone(),
        base_port: args.base_port,
        data,
        insecure: args.insecure,
        client_tls: args.client_tls,
    };
    let (cluster, config, dir) = start_local_cluster(&args.protocol, topology, args.latency_ms, setup)?;
    println!(
        "cluster up: protocol {}, {} datacenters × {} partitions × {} replicas, {} server processes",
        config.protocol,
        topology.dcs,
        topology.partitions,
        topology.replicas,
        config.nodes.len()
    );
    match &args.data_dir {
        Some(d) => println!(
            "durable: node N keeps its data in {}/node-N (fsync {}); restarting with the same --data-dir recovers it",
            d.display(),
            args.fsync
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
    println!("config: {}", dir.join("cluster.toml").display());
    println!(
        "connect: snowline --cluster {} [--dc N] put KEY VALUE | get KEY | rot KEY... | txn --put K=V ...",
        dir.display()
    );
    if args.background {
        println!("stop:    snowline cluster down --dir {}", dir.display());
        cluster.detach();
        return Ok(());
    }
    println!("press Ctrl-C to stop every server process");
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    rt.block_on(shutdown_signal());
    cluster.stop();
    println!("cluster stopped");
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
    let temporary = setup.dir.is_none();
    let (cluster, config, dir) = start_local_cluster(protocol, topology, latency_ms, setup)?;
    let result = f(&config);
    let cpu = cluster.pids().iter().map(|pid| cpu_seconds(*pid)).sum();
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
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { return 0.0 };
    // Fields after the parenthesised command name; utime and stime are the 14th and 15th fields.
    let Some(rest) = stat.rsplit_once(')').map(|(_, r)| r) else { return 0.0 };
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: f64 = fields.get(11..13).map(|f| f.iter().filter_map(|x| x.parse::<f64>().ok()).sum()).unwrap_or(0.0);
    ticks / 100.0
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
    let path = if dir.is_dir() { dir.join("cluster.toml") } else { dir.clone() };
    let config = load_config(&path)?;
    anyhow::ensure!(dc < config.dcs, "--dc {dc}: the cluster has datacenters 0..{}", config.dcs);
    let protocol = config.protocol.clone();
    let offers = snowline_protocols::lookup(&protocol)?.offers;
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let request = match op {
        Op::Put(key, value) => Request::Put { key, value },
        Op::Rot(keys) => Request::Rot { keys },
        Op::Txn { reads, writes } if offers.interactive => {
            let result = rt.block_on(async {
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
                    _ => Err(e),
                },
            };
        }
        Op::Txn { reads, writes } => {
            if !reads.is_empty() {
                snowline_protocols::check_offered(&protocol, &Request::Begin).map_err(|e| {
                    anyhow::anyhow!("txn --get needs interactive transactions: {e}; read with `rot` instead")
                })?;
            }
            Request::Update { writes }
        }
    };
    snowline_protocols::check_offered(&protocol, &request).map_err(anyhow::Error::msg)?;
    let out = rt.block_on(async { with_protocol!(&protocol, P => execute::<P>(&config, dc, request).await)? })?;
    println!("{out}");
    Ok(())
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

async fn execute<P: Protocol>(config: &ClusterConfig, dc: u16, request: Request) -> Result<String> {
    let runtime = snowline_net::ClientRuntime::<P>::connect(config, dc).await?;
    let session = runtime.session();
    let read_only = request.is_read_only();
    // An operation whose outcome is unknown (a server that is down refused the connection, or no answer in
    // time) is retried where that is safe: a read, or any request to raft-kv, whose session resubmits a PUT
    // under its old sequence number (applied at most once) and tries the next member of the group — so a
    // client survives a dead leader while the group elects another.
    let retry = read_only || P::NAME == snowline_protocols::RaftKv::NAME;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let reply = loop {
        match session.execute(request.clone()).await {
            Err(snowline_core::OpError::Unknown(why)) if retry && tokio::time::Instant::now() < deadline => {
                eprintln!("outcome unknown ({why}); retrying");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
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
