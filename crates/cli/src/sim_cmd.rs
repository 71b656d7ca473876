//! `snowline sim` and `snowline bench`: one workload, two runtimes.

use crate::{check_cmd, duration};
use anyhow::{Context, Result};
use clap::Args;
use snowline_core::{HistoryWriter, Protocol, ProtocolConfig, Topology};
use snowline_harness::{MixedWorkload, RunReport, RunSpec};
use snowline_protocols::with_protocol;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The workload and cluster shape shared by `sim` and `bench`.
#[derive(Args, Clone, Debug)]
pub struct WorkloadArgs {
    #[arg(long, default_value = "cv")]
    pub protocol: String,
    #[arg(long, default_value_t = 2)]
    pub dcs: u16,
    #[arg(long, default_value_t = 4)]
    pub partitions: u16,
    /// Closed-loop clients per datacenter.
    #[arg(long, default_value_t = 50)]
    pub clients: usize,
    #[arg(long, default_value = "10s", value_parser = duration::parse)]
    pub duration: Duration,
    /// Not measured at the start of the run.
    #[arg(long, default_value = "0s", value_parser = duration::parse)]
    pub warmup: Duration,
    /// The operation pattern: mixed (GET/ROT/PUT/update over a Zipfian key space) or photo-acl (Contrarian
    /// Fig. 1: ACL then photo writes, and ROTs over both; --keys / 2 albums).
    #[arg(long, default_value = "mixed")]
    pub workload: snowline_harness::Pattern,
    #[arg(long, default_value_t = 1000)]
    pub keys: usize,
    #[arg(long, default_value_t = 0.8)]
    pub zipf: f64,
    /// Write the client-observed history here (JSON Lines, docs/HISTORY.md).
    #[arg(long)]
    pub history: Option<PathBuf>,
    /// Write the summary as JSON here.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Check the recorded history at this level (rc, ra, causal-snapshot, causal, tcc, or `claimed`: the
    /// protocol's own claim) and print the verdict; exits 1 if it fails.
    #[arg(long, value_name = "LEVEL")]
    pub check: Option<String>,
}

impl WorkloadArgs {
    pub fn spec(&self, seed: u64) -> RunSpec {
        let duration_ns = self.duration.as_nanos() as u64;
        RunSpec {
            clients_per_dc: self.clients,
            client_dcs: None,
            duration_ns,
            warmup_ns: self.warmup.as_nanos() as u64,
            cooldown_ns: 0,
            workload: MixedWorkload { pattern: self.pattern(), keys: self.keys, zipf: self.zipf, ..Default::default() },
            record_history: self.history.is_some() || self.check.is_some(),
            seed,
            final_reads_after_ns: None,
        }
    }

    /// The pattern, sized by `--keys` (photo-acl: one album per two keys).
    pub fn pattern(&self) -> snowline_harness::Pattern {
        match self.workload {
            snowline_harness::Pattern::PhotoAcl { .. } => {
                snowline_harness::Pattern::PhotoAcl { albums: (self.keys / 2).max(1) }
            }
            mixed => mixed,
        }
    }

    /// Reject bad arguments before any work starts.
    pub fn validate(&self) -> Result<()> {
        snowline_protocols::canonical_name(&self.protocol)?;
        if let Some(level) = &self.check {
            check_cmd::resolve_level(level, &self.protocol)?;
        }
        anyhow::ensure!(self.keys >= 1, "--keys must be at least 1");
        anyhow::ensure!(self.zipf >= 0.0 && self.zipf.is_finite(), "--zipf must be a non-negative number");
        anyhow::ensure!(self.warmup < self.duration, "--warmup must be shorter than --duration");
        Ok(())
    }

    pub fn topology(&self) -> Result<Topology> {
        anyhow::ensure!(self.dcs >= 1 && self.partitions >= 1, "--dcs and --partitions must be at least 1");
        Ok(Topology::new(self.dcs, self.partitions))
    }
}

#[derive(Args, Clone, Debug)]
pub struct SimArgs {
    #[command(flatten)]
    pub run: WorkloadArgs,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// One-way latency between datacenters, in milliseconds.
    #[arg(long, default_value_t = 40.0)]
    pub latency_ms: f64,
    /// Maximum clock offset of a node from true time, in milliseconds.
    #[arg(long, default_value_t = 1.0)]
    pub skew_ms: f64,
}

#[derive(Args, Clone, Debug)]
pub struct BenchArgs {
    #[command(flatten)]
    pub run: WorkloadArgs,
    /// Emulated one-way latency between datacenters, in milliseconds.
    #[arg(long, default_value_t = 0.0)]
    pub latency_ms: f64,
    /// Keep the cluster's directory (config and logs) here instead of a temporary one.
    #[arg(long)]
    pub dir: Option<PathBuf>,
}

pub fn sim(args: SimArgs) -> Result<()> {
    println!("seed {}", args.seed);
    args.run.validate()?;
    let topology = args.run.topology()?;
    let mut config = snowline_sim::SimConfig::new(args.seed, topology, ProtocolConfig::default());
    let dcs = usize::from(topology.dcs);
    let wan_ns = (args.latency_ms * 1e6) as u64;
    config.network.inter_dc_latency_ns =
        (0..dcs).map(|a| (0..dcs).map(|b| if a == b { 0 } else { wan_ns }).collect()).collect();
    config.clocks.max_skew_ns = (args.skew_ms * 1e6) as u64;
    let spec = args.run.spec(args.seed);
    let started = Instant::now();
    let report = with_protocol!(&args.run.protocol, P => snowline_harness::run_sim::<P>(config, &spec))?;
    let wall = started.elapsed().as_secs_f64();
    print_report(&report);
    let events = report.sim_events.unwrap_or(0);
    println!(
        "simulated {:.2} s in {:.2} s of wall time: {} events, {:.0} events/s",
        args.run.duration.as_secs_f64(),
        wall,
        events,
        events as f64 / wall
    );
    finish(&report, &args.run)?;
    println!(
        "replay: snowline sim --protocol {} --dcs {} --partitions {} --clients {} --duration {}s --seed {}",
        args.run.protocol,
        args.run.dcs,
        args.run.partitions,
        args.run.clients,
        args.run.duration.as_secs_f64(),
        args.seed
    );
    Ok(())
}

pub fn bench(args: BenchArgs) -> Result<()> {
    args.run.validate()?;
    let topology = args.run.topology()?;
    let name = snowline_protocols::canonical_name(&args.run.protocol)?;
    let seed = rand_seed();
    let spec = args.run.spec(seed);
    let (report, cpu) =
        crate::client_cmd::with_local_cluster(name, topology, args.latency_ms, args.dir.clone(), |config| {
            with_protocol!(name, P => bench_on::<P>(config, &spec)).map_err(anyhow::Error::from)?
        })?;
    print_report(&report);
    println!("server CPU time {:.2} s over {:.2} s of run", cpu, args.run.duration.as_secs_f64());
    finish(&report, &args.run)
}

fn bench_on<P: Protocol>(config: &snowline_net::ClusterConfig, spec: &RunSpec) -> Result<RunReport> {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    rt.block_on(snowline_harness::net_run::run_net::<P>(config, spec))
}

fn rand_seed() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(1)
}

fn print_report(report: &RunReport) {
    println!("protocol {}", report.protocol);
    println!("{}", report.summary);
}

fn finish(report: &RunReport, args: &WorkloadArgs) -> Result<()> {
    if let (Some(path), Some(history)) = (&args.history, &report.history) {
        write_history(path, history)?;
        println!("history: {} events written to {}", history.len(), path.display());
    }
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_string_pretty(report)?)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    if let (Some(level), Some(history)) = (&args.check, &report.history) {
        let level = check_cmd::resolve_level(level, &args.protocol)?;
        let verdict = check_cmd::check_recorded(history, level)?;
        print!("check: ");
        check_cmd::print_verdict(&verdict, false);
        anyhow::ensure!(verdict.ok, "the history does not satisfy {level}");
    }
    Ok(())
}

pub fn write_history(path: &Path, history: &[snowline_core::HistoryEvent]) -> Result<()> {
    let file = std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?;
    HistoryWriter::write_jsonl(history, std::io::BufWriter::new(file))
        .with_context(|| format!("writing {}", path.display()))
}
