//! `snowline bench-multicast`: what genuine atomic multicast (Skeen over Raft groups,
//! `snowline_protocols::components::multicast`) costs per number of destination groups, measured in the
//! simulator on the protocol that embeds it (`amcast-kv`: each multi-key update is one multicast to the
//! groups of its keys), beside two-phase commit over the same groups (`components::twopc`, embedded by
//! `tpc-kv`: each update one transaction over the groups of its keys).
//!
//! For each latency profile and destination count `k` it prints: the latency one client sees without
//! contention (p50, in time and in one-way delays `δ`), beside the algorithm's analysis; the messages one
//! multicast costs (everything sent during the run, minus what an idle cluster sends in as long: Raft
//! heartbeats); and the throughput of many closed-loop clients with the default CPU model (committed
//! operations; 2PC's aborts, a group voting no on a key locked by a concurrent update, counted apart).

use crate::duration;
use anyhow::{Result, bail};
use clap::Args;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use snowline_core::{OpId, Protocol, ProtocolConfig, Request, Topology};
use snowline_protocols::{AmcastKv, TpcKv};
use snowline_sim::{CpuModel, NetworkModel, Sim, SimConfig};
use std::collections::BTreeSet;
use std::time::Duration;

#[derive(Args, Debug)]
pub struct MulticastBenchArgs {
    /// Destination groups per multicast: every count from 1 to this (at most --groups).
    #[arg(long, default_value_t = 5)]
    max_dest: u16,
    /// Replica groups (partitions) in the cluster.
    #[arg(long, default_value_t = 5)]
    groups: u16,
    /// Members per group.
    #[arg(long, default_value_t = 3)]
    replicas: u16,
    /// Latency profiles: lan (one datacenter, δ = --lan-us between any two processes) and/or wan (three
    /// datacenters, δ = --wan-ms between them, --lan-us within one; each group's members in three).
    #[arg(long, value_delimiter = ',', default_value = "lan,wan")]
    latency: Vec<String>,
    /// One-way delay within a datacenter (the LAN rows), in microseconds.
    #[arg(long, default_value_t = 100)]
    lan_us: u64,
    /// One-way delay between datacenters (the WAN rows), in milliseconds.
    #[arg(long, default_value_t = 40)]
    wan_ms: u64,
    /// Closed-loop clients of the throughput run.
    #[arg(long, default_value_t = 30)]
    clients: u16,
    /// Simulated length of each run.
    #[arg(long, default_value = "5s", value_parser = duration::parse)]
    duration: Duration,
    /// Seed of the simulator runs (the same seed, the same figures).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// sim (the simulator, exact delays, message counts) or real (a local cluster of server processes per
    /// row, TCP, the WAN delay emulated by the runtime; read-only transactions over `dest` groups, one
    /// multicast or one 2PC transaction each).
    #[arg(long, default_value = "sim")]
    runtime: String,
}

struct Profile {
    name: &'static str,
    dcs: u16,
    /// One-way delay within a datacenter and between two.
    intra_ns: u64,
    inter_ns: u64,
}

struct Measured {
    ops: u64,
    aborts: u64,
    p50_ns: u64,
    messages: u64,
    seconds: f64,
}

/// Elections settle before measuring.
const WARMUP_NS: u64 = 3_000_000_000;

fn run<P: Protocol>(
    args: &MulticastBenchArgs,
    p: &Profile,
    k: u16,
    clients: u16,
    cpu: CpuModel,
    work: bool,
) -> Measured {
    let topology = Topology::replicated(p.dcs, args.groups, args.replicas);
    let mut config = SimConfig::new(args.seed, topology, ProtocolConfig::default());
    config.network = NetworkModel::exact(p.intra_ns, p.inter_ns);
    config.clocks = snowline_sim::ClockModel::perfect();
    config.cpu = cpu;
    let mut sim: Sim<P> = Sim::new(config);
    let ids: Vec<_> = (0..clients).map(|i| sim.add_client(i % p.dcs)).collect();
    sim.advance(WARMUP_NS);
    let sent_before = sim.messages_sent();
    let start = sim.now_ns();
    let end = start + args.duration.as_nanos() as u64;
    let mut rng = SmallRng::seed_from_u64(args.seed);
    let mut op = 0u64;
    let mut submitted_at = vec![0u64; clients as usize];
    let mut latencies = Vec::new();
    let mut aborts = 0;
    let mut submit = |sim: &mut Sim<P>, rng: &mut SmallRng, c: usize, submitted_at: &mut Vec<u64>| {
        let mut groups = BTreeSet::new();
        while groups.len() < usize::from(k) {
            groups.insert(rng.random_range(0..args.groups));
        }
        let writes = groups
            .iter()
            .map(|g| (topology.key_on(*g, &format!("k{}", rng.random_range(0..1000))).into(), "v".into()))
            .collect();
        op += 1;
        submitted_at[c] = sim.now_ns();
        sim.submit(ids[c], OpId(op), Request::Update { writes });
    };
    if work {
        for c in 0..ids.len() {
            submit(&mut sim, &mut rng, c, &mut submitted_at);
        }
    }
    while let Some(done) = sim.step_until(end) {
        let c = ids.iter().position(|id| *id == done.client).expect("our client");
        if done.result.is_ok() {
            latencies.push(sim.now_ns() - submitted_at[c]);
        } else {
            aborts += 1;
        }
        submit(&mut sim, &mut rng, c, &mut submitted_at);
    }
    latencies.sort_unstable();
    Measured {
        ops: latencies.len() as u64,
        aborts,
        p50_ns: latencies.get(latencies.len() / 2).copied().unwrap_or(0),
        messages: sim.messages_sent() - sent_before,
        seconds: (end - start) as f64 / 1e9,
    }
}

/// One row of the real runtime: a local cluster, one client for the latency, then `--clients` for the
/// throughput; read-only transactions over `k` groups (the contrarian pattern, no writes, uniform keys).
fn run_real(args: &MulticastBenchArgs, p: &Profile, kind: &str, k: u16) -> Result<(f64, f64, f64)> {
    let topology = Topology::replicated(p.dcs, args.groups, args.replicas);
    let name = if kind == "mcast" { "amcast-kv" } else { "tpc-kv" };
    let latency_ms = if p.dcs > 1 { p.inter_ns as f64 / 1e6 } else { 0.0 };
    let spec = |clients: usize| snowline_harness::RunSpec {
        clients_per_dc: clients,
        client_dcs: Some(1),
        duration_ns: args.duration.as_nanos() as u64 + WARMUP_NS,
        warmup_ns: WARMUP_NS,
        cooldown_ns: 0,
        workload: snowline_harness::MixedWorkload {
            write_ratio: 0.0,
            partitions_per_rot: usize::from(k),
            zipf: 0.0,
            ..snowline_harness::MixedWorkload::contrarian()
        },
        record_history: false,
        seed: args.seed,
        final_reads_after_ns: None,
        retry: Default::default(),
    };
    let run = |clients: usize| -> Result<snowline_harness::RunReport> {
        let spec = spec(clients);
        let (report, _cpu) =
            crate::client_cmd::with_local_cluster(name, topology, latency_ms, Default::default(), |config| {
                snowline_protocols::with_protocol!(name, P => crate::bench_cmd::bench_on::<P>(config, &spec, false))
                    .map_err(anyhow::Error::from)?
                    .map(|(report, _)| report)
            })?;
        Ok(report)
    };
    // A read of one group is reported as a GET.
    let kind = if k == 1 { "get" } else { "rot" };
    let rot = |r: &snowline_harness::RunReport| r.summary.per_kind.iter().find(|s| s.kind == kind).cloned();
    let one = run(1)?;
    let many = run(usize::from(args.clients))?;
    let p50_ms = rot(&one).map_or(0.0, |s| s.p50_us / 1e3);
    let (ok, aborts) = rot(&many).map_or((0.0, 0.0), |s| (s.ops_per_s, s.fail as f64 / many.summary.seconds));
    Ok((p50_ms, ok, aborts))
}

fn real_table(args: &MulticastBenchArgs, profiles: &[Profile]) -> Result<()> {
    println!(
        "multicast (amcast-kv) and 2PC (tpc-kv) on local clusters of server processes (TCP; the WAN delay \
         emulated by the runtime, none added within a datacenter): {} groups x {} replicas, read-only \
         transactions over `dest` groups",
        args.groups, args.replicas
    );
    println!("analysis as in the simulator: 4δ for one group, 7δ for more (δ the emulated WAN delay; lan: loopback);");
    println!(
        "  a hop between two processes of one datacenter costs no δ: a leader in the client's datacenter saves some"
    );
    println!(
        "{:<5} {:<6} {:>5} {:>9} {:>12} {:>12} {:>12} {:>9}",
        "net", "kind", "dest", "δ ms", "p50 ms", "p50 in δ", "ops/s", "aborts/s"
    );
    for p in profiles {
        for kind in ["mcast", "2pc"] {
            for k in 1..=args.max_dest {
                let (p50_ms, ops, aborts) = run_real(args, p, kind, k)?;
                let delta_ms = if p.dcs > 1 { p.inter_ns as f64 / 1e6 } else { f64::NAN };
                let (delta, in_delta) = if delta_ms.is_nan() {
                    ("-".to_string(), "-".to_string())
                } else {
                    (format!("{delta_ms:.2}"), format!("{:.2}", p50_ms / delta_ms))
                };
                println!(
                    "{:<5} {:<6} {:>5} {:>9} {:>12.2} {:>12} {:>12.0} {:>9.0}",
                    p.name, kind, k, delta, p50_ms, in_delta, ops, aborts
                );
            }
        }
    }
    Ok(())
}

pub fn run_bench(args: MulticastBenchArgs) -> Result<()> {
    if args.groups == 0 || args.replicas == 0 || args.max_dest == 0 || args.clients == 0 {
        bail!("--groups, --replicas, --max-dest and --clients must be at least 1");
    }
    if args.max_dest > args.groups {
        bail!("--max-dest {} exceeds --groups {}", args.max_dest, args.groups);
    }
    let mut profiles = Vec::new();
    for l in &args.latency {
        profiles.push(match l.as_str() {
            "lan" => Profile { name: "lan", dcs: 1, intra_ns: args.lan_us * 1_000, inter_ns: args.lan_us * 1_000 },
            "wan" => Profile { name: "wan", dcs: 3, intra_ns: args.lan_us * 1_000, inter_ns: args.wan_ms * 1_000_000 },
            other => bail!("unknown latency profile {other:?}: use lan or wan"),
        });
    }
    match args.runtime.as_str() {
        "sim" => {}
        "real" => return real_table(&args, &profiles),
        other => bail!("unknown runtime {other:?}: use sim or real"),
    }
    println!(
        "genuine atomic multicast (Skeen over Raft groups, amcast-kv) and two-phase commit over the same groups \
         (tpc-kv) in the simulator: {} groups x {} replicas, updates of one key per destination group",
        args.groups, args.replicas
    );
    println!("analysis (client-observed, δ one-way):");
    println!("  mcast: 1 group 4δ = submit + consensus round (2δ) + answer;");
    println!("         k ≥ 2 groups 7δ = submit + Start round (2δ) + proposal exchange + Final round (2δ) + answer");
    println!("  2pc:   1 group 4δ = begin + Prepare round (2δ, decided with it) + outcome;");
    println!("         k ≥ 2 groups 7δ = begin + Prepare round (2δ) + vote + Decide round (2δ) + outcome,");
    println!("         and the participants hold their locks a further decision + round (3δ)");
    println!(
        "{:<5} {:<6} {:>5} {:>9} {:>12} {:>12} {:>11} {:>12} {:>9}",
        "net", "kind", "dest", "δ ms", "p50 ms", "p50 in δ", "msgs/op", "ops/s", "aborts/s"
    );
    for p in &profiles {
        for kind in ["mcast", "2pc"] {
            let measure = |k: u16, clients: u16, cpu: CpuModel, work: bool| match kind {
                "mcast" => run::<AmcastKv>(&args, p, k, clients, cpu, work),
                _ => run::<TpcKv>(&args, p, k, clients, cpu, work),
            };
            let idle = measure(1, 1, CpuModel::free(), false);
            for k in 1..=args.max_dest {
                let one = measure(k, 1, CpuModel::free(), true);
                let many = measure(k, args.clients, CpuModel::default(), true);
                let delta_ms = p.inter_ns as f64 / 1e6;
                let per = (one.messages.saturating_sub(idle.messages)) as f64 / one.ops.max(1) as f64;
                println!(
                    "{:<5} {:<6} {:>5} {:>9.2} {:>12.2} {:>12.2} {:>11.1} {:>12.0} {:>9.0}",
                    p.name,
                    kind,
                    k,
                    delta_ms,
                    one.p50_ns as f64 / 1e6,
                    one.p50_ns as f64 / p.inter_ns as f64,
                    per,
                    many.ops as f64 / many.seconds,
                    many.aborts as f64 / many.seconds
                );
            }
        }
    }
    println!("wan: hops within a datacenter take --lan-us, so p50 in δ counts only the wide-area hops' share");
    Ok(())
}
