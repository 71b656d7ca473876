//! `snowline nemesis`: faults injected into a real local cluster while a workload runs. On a schedule drawn
//! from a seed it cuts the network between datacenters or isolates a node, adds delay, drops frames and
//! resets connections (inside the runtime's links: `snowline_net::faults`), pauses server processes (SIGSTOP/SIGCONT), kills them and
//! starts them again (durable servers), and moves node clocks; then it heals everything, checks the recorded history at the
//! protocol's claimed level, and reads every written key in every datacenter: every key with an
//! acknowledged write must hold a value that was written, the same in every datacenter.

use crate::client_cmd::{LocalSetup, start_local_cluster};
use anyhow::{Context, Result};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use snowline_core::history::{EventType, HistoryEvent, OpKind};
use snowline_core::{Key, Protocol, Request, Topology, Value};
use snowline_harness::run::RunSpec;
use snowline_net::faults::FaultPlan;
use snowline_net::{ClientRuntime, ClusterConfig, LocalCluster, LocalData};
use snowline_protocols::with_protocol;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

#[derive(clap::Args, Debug)]
pub struct NemesisArgs {
    /// Protocols to run (comma-separated; `all`: every protocol).
    #[arg(long, value_delimiter = ',', default_value = "cv")]
    pub protocols: Vec<String>,
    /// How many seeds per protocol (seeds FIRST_SEED, FIRST_SEED+1, ...).
    #[arg(long, default_value_t = 1)]
    pub seeds: u64,
    /// The first seed: a seed fixes the faults' schedule (the workload's timing is the machine's).
    #[arg(long, default_value_t = 1)]
    pub first_seed: u64,
    /// Seconds of workload per seed (faults stop one second before the end).
    #[arg(long, default_value_t = 8.0)]
    pub seconds: f64,
    /// The faults to draw from: partition, pause, kill, clock, delay, reset, loss.
    #[arg(long, value_delimiter = ',', default_value = "partition,pause,kill,clock,delay")]
    pub faults: Vec<FaultKind>,
    /// Partitions per datacenter (two datacenters, or one for a protocol that runs in one).
    #[arg(long, default_value_t = 2)]
    pub partitions: u16,
    /// Closed-loop clients per datacenter.
    #[arg(long, default_value_t = 4)]
    pub clients: usize,
    /// Emulated one-way latency between the two datacenters, in milliseconds.
    #[arg(long, default_value_t = 5.0)]
    pub latency_ms: f64,
    /// Run a deliberately broken variant, to see the nemesis catch it (never for real use).
    #[arg(long)]
    pub broken: Option<Broken>,
}

/// Deliberately broken variants the nemesis must catch.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Broken {
    /// In-memory servers, killed and started again: a restarted server has forgotten every write it held,
    /// acknowledged or not.
    ForgetOnRestart,
    /// The atomic multicast delivers at each group's local timestamp, skipping the final-timestamp step
    /// (`multicast_skip_final`; amcast-kv and the Jessy family with multicast termination).
    MulticastSkipFinal,
    /// In-memory servers send to each other without the sequenced links, so a reset or lossy connection
    /// loses messages (`broken_unsequenced_links` in the fault file).
    UnsequencedLinks,
    /// RAMP's reads skip their second (repair) round, so a read racing a write transaction can be fractured
    /// (`ramp_skip_second_round`; ramp-f, ramp-s, ramp-h).
    RampSkipSecondRound,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum FaultKind {
    /// Cut the links between the two datacenters, or between one node and every other.
    Partition,
    /// Stop a server process (SIGSTOP), then let it go on (SIGCONT).
    Pause,
    /// Kill a server process (SIGKILL) and start it again from its data.
    Kill,
    /// Move a node's clock by up to half the protocols' `max_clock_skew_us`, either way.
    Clock,
    /// Add 5 to 50 ms of one-way delay to every link between nodes for a while.
    Delay,
    /// Reset every connection between nodes at once, throwing away every frame queued on them.
    Reset,
    /// Drop 5 to 30 % of the frames between nodes for a while.
    Loss,
}

/// What one seed's run found.
struct Outcome {
    faults: BTreeMap<FaultKind, usize>,
    ops: usize,
    unknown: usize,
    verdict: String,
    problems: Vec<String>,
}

pub fn run(args: NemesisArgs) -> Result<()> {
    anyhow::ensure!(!args.faults.is_empty(), "--faults names no fault");
    anyhow::ensure!(args.seconds >= 2.0, "--seconds must be at least 2");
    let names: Vec<&'static str> = if args.protocols.iter().any(|p| p == "all") {
        snowline_protocols::names()
    } else {
        args.protocols.iter().map(|p| snowline_protocols::canonical_name(p)).collect::<Result<_, _>>()?
    };
    let mut failed = Vec::new();
    for name in names {
        for seed in args.first_seed..args.first_seed + args.seeds {
            let outcome = run_one(name, seed, &args).with_context(|| format!("{name} seed {seed}"))?;
            let faults: Vec<String> = outcome.faults.iter().map(|(k, n)| format!("{n} {k:?}").to_lowercase()).collect();
            println!(
                "{name:<12} seed {seed:<3} faults: {:<42} ops {:>6} (unknown {:>4})  {}{}",
                if faults.is_empty() { "none".to_string() } else { faults.join(", ") },
                outcome.ops,
                outcome.unknown,
                outcome.verdict,
                if outcome.problems.is_empty() {
                    String::new()
                } else {
                    format!("  FAILED: {}", outcome.problems.join("; "))
                }
            );
            if !outcome.problems.is_empty() {
                failed.push(format!("{name} seed {seed}"));
            }
        }
    }
    anyhow::ensure!(failed.is_empty(), "the nemesis found violations in: {}", failed.join(", "));
    Ok(())
}

fn run_one(name: &'static str, seed: u64, args: &NemesisArgs) -> Result<Outcome> {
    let entry = snowline_protocols::lookup(name)?;
    let mut topology = Topology::new(2, args.partitions);
    if let Ok(Err(why)) = with_protocol!(name, P => P::check_topology(&topology)) {
        println!("({name}: one datacenter: {why})");
        topology = Topology::new(1, args.partitions);
    }
    let dir = std::env::temp_dir().join(format!("snowline-nemesis-{name}-{seed}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    // Kills need durable servers: an in-memory server forgets everything when killed (the broken variant).
    let durable = args.faults.contains(&FaultKind::Kill) && args.broken != Some(Broken::ForgetOnRestart);
    let setup = LocalSetup {
        dir: Some(dir.clone()),
        data: durable.then(|| LocalData { root: dir.join("data"), fsync: Default::default() }),
        faults: true,
        protocol_config: snowline_core::ProtocolConfig {
            multicast_skip_final: args.broken == Some(Broken::MulticastSkipFinal),
            ramp_skip_second_round: args.broken == Some(Broken::RampSkipSecondRound),
            ..Default::default()
        },
        ..Default::default()
    };
    let (cluster, config, dir) = start_local_cluster(name, topology, args.latency_ms, setup)?;
    let fault_file = config.fault_file.clone().expect("asked for");
    let (workload, _) = crate::demo::workload_for(entry);
    let spec = RunSpec {
        clients_per_dc: args.clients,
        client_dcs: None,
        duration_ns: (args.seconds * 1e9) as u64,
        warmup_ns: 0,
        cooldown_ns: 0,
        workload,
        record_history: true,
        seed,
        final_reads_after_ns: None,
        retry: Default::default(),
    };
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let stop = AtomicBool::new(false);
    let (report, faults) = std::thread::scope(|s| {
        let injector = s.spawn(|| inject(&cluster, &config, &fault_file, seed, args, &stop));
        let report = rt.block_on(async {
            with_protocol!(name, P => snowline_harness::net_run::run_net_with::<P>(&config, &spec, Duration::from_secs(3)).await)
        });
        stop.store(true, Ordering::Relaxed);
        let faults = injector.join().map_err(|_| anyhow::anyhow!("the fault injector panicked"))?;
        anyhow::Ok((report, faults?))
    })?;
    let report = report??;
    let history = report.history.unwrap_or_default();
    let level = crate::check_cmd::resolve_level("claimed", name)?;
    let verdict = crate::check_cmd::check_recorded(&history, level, name)?;
    let mut problems = Vec::new();
    if !verdict.ok {
        problems.push(format!("the history fails {level}"));
    }
    // Healed: every key written must now read the same written value everywhere.
    std::thread::sleep(Duration::from_secs(2));
    let final_check = rt
        .block_on(async { with_protocol!(name, P => final_reads::<P>(&config, &history).await) })
        .map_err(anyhow::Error::from)
        .and_then(|r| r);
    match final_check {
        Ok(mut found) => problems.append(&mut found),
        Err(e) => problems.push(format!("final reads: {e:#}")),
    }
    cluster.stop();
    if problems.is_empty() {
        let _ = std::fs::remove_dir_all(&dir);
    } else {
        problems.push(format!("server logs in {}", dir.display()));
    }
    let completions = history.iter().filter(|e| e.kind != EventType::Invoke);
    Ok(Outcome {
        faults,
        ops: completions.clone().count(),
        unknown: completions.filter(|e| e.kind == EventType::Info).count(),
        verdict: format!("{level} {}", if verdict.ok { "ok" } else { "FAILED" }),
        problems,
    })
}

/// Draw and apply faults, one at a time, until `stop` (or one second before the run ends); heal all.
fn inject(
    cluster: &LocalCluster,
    config: &ClusterConfig,
    file: &std::path::Path,
    seed: u64,
    args: &NemesisArgs,
    stop: &AtomicBool,
) -> Result<BTreeMap<FaultKind, usize>> {
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut done: BTreeMap<FaultKind, usize> = BTreeMap::new();
    let ids: Vec<u32> = config.nodes.iter().map(|n| n.id).collect();
    let end = Instant::now() + Duration::from_secs_f64(args.seconds - 1.0);
    let skew_ms = (config.protocol_config.max_clock_skew_us / 2000) as i64;
    let mut plan =
        FaultPlan { broken_unsequenced_links: args.broken == Some(Broken::UnsequencedLinks), ..Default::default() };
    plan.write(file)?;
    let sleep = |d: Duration| {
        let until = Instant::now() + d;
        while Instant::now() < until && !stop.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(10));
        }
    };
    sleep(Duration::from_millis(300));
    while Instant::now() + Duration::from_millis(500) < end && !stop.load(Ordering::Relaxed) {
        let kind = args.faults[rng.random_range(0..args.faults.len())];
        let hold = Duration::from_millis(rng.random_range(200..900));
        let node = ids[rng.random_range(0..ids.len())];
        match kind {
            FaultKind::Partition => {
                let cut: Vec<(u32, u32)> = if config.dcs > 1 && rng.random_bool(0.5) {
                    let dc_of = |id: u32| config.node(id).map(|n| n.dc);
                    pairs(&ids).filter(|(a, b)| dc_of(*a) != dc_of(*b)).collect()
                } else {
                    ids.iter().filter(|&&o| o != node).map(|&o| (node, o)).collect()
                };
                plan.cut = cut;
                plan.write(file)?;
                sleep(hold);
                plan.cut.clear();
                plan.write(file)?;
            }
            FaultKind::Pause => {
                let pid = pid_of(cluster, node)?;
                signal(pid, libc::SIGSTOP)?;
                sleep(hold);
                signal(pid, libc::SIGCONT)?;
            }
            FaultKind::Kill => {
                cluster.kill_node(node)?;
                sleep(hold / 2);
                cluster.restart_node(node, Duration::from_secs(30))?;
            }
            FaultKind::Delay => {
                plan.extra_delay_ms = rng.random_range(5..=50);
                plan.write(file)?;
                sleep(hold);
                plan.extra_delay_ms = 0;
                plan.write(file)?;
            }
            FaultKind::Reset => {
                plan.resets += 1;
                plan.write(file)?;
            }
            FaultKind::Loss => {
                plan.loss = rng.random_range(0.05..0.3);
                plan.write(file)?;
                sleep(hold);
                plan.loss = 0.0;
                plan.write(file)?;
            }
            FaultKind::Clock => {
                let offset = if skew_ms > 0 { rng.random_range(-skew_ms..=skew_ms) } else { 0 };
                plan.clock_offset_ms.insert(node, offset);
                plan.write(file)?;
            }
        }
        *done.entry(kind).or_default() += 1;
        sleep(Duration::from_millis(rng.random_range(100..500)));
    }
    // Healed: links whole and prompt, clocks left where they are (an offset is not a fault that heals).
    plan.cut.clear();
    plan.extra_delay_ms = 0;
    plan.loss = 0.0;
    plan.write(file)?;
    Ok(done)
}

fn pairs(ids: &[u32]) -> impl Iterator<Item = (u32, u32)> + '_ {
    ids.iter().enumerate().flat_map(move |(i, a)| ids[i + 1..].iter().map(move |b| (*a, *b)))
}

fn pid_of(cluster: &LocalCluster, node: u32) -> Result<u32> {
    cluster
        .node_pids()
        .into_iter()
        .find(|(id, _)| *id == node)
        .map(|(_, pid)| pid)
        .with_context(|| format!("node {node} is not running"))
}

fn signal(pid: u32, sig: libc::c_int) -> Result<()> {
    // SAFETY: kill(2) on a pid of a child this process started; no memory is shared.
    let rc = unsafe { libc::kill(pid as libc::pid_t, sig) };
    anyhow::ensure!(rc == 0, "signal {sig} to pid {pid}: {}", std::io::Error::last_os_error());
    Ok(())
}

/// Read every key the history wrote, in every datacenter; what is wrong, if anything.
async fn final_reads<P: Protocol>(config: &ClusterConfig, history: &[HistoryEvent]) -> Result<Vec<String>> {
    let mut written: BTreeMap<Key, BTreeSet<Value>> = BTreeMap::new();
    let mut acked: BTreeSet<Key> = BTreeSet::new();
    for e in history {
        for op in e.value.iter().filter(|op| op.0 == OpKind::Write) {
            if let Some(v) = &op.2 {
                written.entry(op.1.clone()).or_default().insert(v.clone());
                if e.kind == EventType::Ok {
                    acked.insert(op.1.clone());
                }
            }
        }
    }
    let keys: Vec<Key> = written.keys().cloned().collect();
    let mut by_dc = Vec::new();
    for dc in config.topology().dc_ids() {
        let client = ClientRuntime::<P>::connect(config, dc).await?.with_timeout(Duration::from_secs(10));
        let session = client.session();
        let mut values = Vec::new();
        let chunk = if P::OFFERS.multi_key_rots || !P::OFFERS.read_only { 50 } else { 1 };
        for keys in keys.chunks(chunk) {
            let reply = if P::OFFERS.read_only {
                session.execute(Request::Rot { keys: keys.to_vec() }).await
            } else {
                let mut txn = session.begin().await?;
                let got = txn.get(keys).await?;
                txn.abort().await?;
                values.extend(got);
                continue;
            };
            values.extend(reply.with_context(|| format!("final read in dc{dc}"))?.reads.into_iter().map(|r| r.value));
        }
        by_dc.push(values);
    }
    let mut problems = Vec::new();
    for (i, key) in keys.iter().enumerate() {
        let seen: Vec<&Option<Value>> = by_dc.iter().map(|vals| &vals[i]).collect();
        if seen.iter().any(|v| *v != seen[0]) {
            problems.push(format!("{key} differs between datacenters: {seen:?}"));
        } else if acked.contains(key) && seen[0].as_ref().is_none_or(|v| !written[key].contains(v)) {
            problems.push(format!("{key} had an acknowledged write but reads {:?}", seen[0]));
        }
        if problems.len() >= 5 {
            break;
        }
    }
    Ok(problems)
}
