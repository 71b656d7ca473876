//! The paper reproductions behind `snowline reproduce`: each experiment's set-up (protocols, workload
//! variants, client sweep, topology, durations, simulator models), the charts drawn like the paper's figures,
//! and the headline comparison with the paper's own figures. Each paper's own set-up, charts and headline live
//! beside this file, in `repro/<paper>.rs`.
//!
//! Running the points is the caller's job (the CLI starts real clusters or calls [`Experiment::run_sim`]), so
//! this module stays free of processes and wall clocks.

use crate::charts::{LineChart, Series};
use crate::report::{RunRecord, fmt_us};
use crate::run::{RunReport, RunSpec, run_sim};
use crate::workload::MixedWorkload;
use anyhow::Result;
use snowline_core::{Protocol, ProtocolConfig, Topology};
use snowline_sim::{CpuModel, SimConfig};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

mod contrarian;
mod coordination;
mod nmsi;
mod ramp;
mod snow_cops;
mod snow_rococo;
mod tomsic;

pub use coordination::{PROTOCOLS as COORDINATION_PROTOCOLS, WAREHOUSES_PER_SERVER, new_orders};
pub use ramp::{PROTOCOLS as RAMP_PROTOCOLS, RampSweep};

pub use snow_rococo::{
    PROTOCOLS as SNOW_ROCOCO_PROTOCOLS, new_order_tps, per_server, stock_level_attempts, stock_level_commit_rate,
    stock_level_p50_us,
};

/// Which runtime runs the points.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Runtime {
    Sim,
    Real,
}

impl Runtime {
    pub fn name(&self) -> &'static str {
        match self {
            Runtime::Sim => "sim",
            Runtime::Real => "real",
        }
    }
}

impl std::str::FromStr for Runtime {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "sim" => Ok(Runtime::Sim),
            "real" => Ok(Runtime::Real),
            other => Err(format!("unknown runtime {other:?}; valid runtimes: sim, real")),
        }
    }
}

/// The reproductions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Paper {
    /// Contrarian §5.2, Fig. 4a–c: Contrarian vs CC-LO, default workload, 1 and 3 datacenters.
    Contrarian,
    /// Tomsic §5.3.2, Fig. 4: Cure, AV, OP, CV under single-shot ROTs at three update rates.
    Tomsic,
    /// SNOW §6.1, Fig. 5: COPS-SNOW vs COPS over write fractions.
    SnowCops,
    /// NMSI (Saeida Ardekani et al., SRDS 2013) §V, Figs. 1, 3, 4: NMSI against RC, SER, US, SI and PSI on
    /// transactional YCSB, groups of three replicas each at one site.
    Nmsi,
    /// SNOW §6.2, Fig. 7: Rococo-SNOW, Rococo, 2PL and OCC on Rococo's district-sharded TPC-C over the
    /// concurrent requests per server.
    SnowRococo,
    /// RAMP (Bailis et al., SIGMOD 2014) §5: RAMP-F, RAMP-S, RAMP-H against no concurrency control, 2PL and
    /// Eiger on multi-key read-only and blind write transactions, over clients, read share, transaction size
    /// and value size, and RAMP-F's scale-out in the simulator.
    Ramp,
    /// Coordination avoidance (Bailis et al., VLDB 2015) §6.2, Figs. 5–6: coordination-free TPC-C New-Order
    /// on RAMP-F against 2PL, OCC and Rococo, over the servers and the share of distributed New-Orders.
    Coordination,
}

impl std::str::FromStr for Paper {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "contrarian" => Ok(Paper::Contrarian),
            "tomsic" => Ok(Paper::Tomsic),
            "snow-cops" => Ok(Paper::SnowCops),
            "nmsi" => Ok(Paper::Nmsi),
            "snow-rococo" => Ok(Paper::SnowRococo),
            "ramp" => Ok(Paper::Ramp),
            "coordination" => Ok(Paper::Coordination),
            other => Err(format!(
                "unknown reproduction {other:?}; valid: contrarian, tomsic, snow-cops, nmsi, snow-rococo, ramp, \
                 coordination"
            )),
        }
    }
}

impl Paper {
    pub fn name(&self) -> &'static str {
        match self {
            Paper::Contrarian => "contrarian",
            Paper::Tomsic => "tomsic",
            Paper::SnowCops => "snow-cops",
            Paper::Nmsi => "nmsi",
            Paper::SnowRococo => "snow-rococo",
            Paper::Ramp => "ramp",
            Paper::Coordination => "coordination",
        }
    }

    /// The protocols the paper compares, subject first (contrarian before cc-lo, cops-snow before cops).
    pub fn protocols(&self) -> Vec<String> {
        let names: &[&str] = match self {
            Paper::Contrarian => &["contrarian", "cc-lo"],
            Paper::Tomsic => &["cure", "av", "op", "cv"],
            Paper::SnowCops => &["cops-snow", "cops"],
            Paper::Nmsi => &NMSI_PROTOCOLS,
            Paper::SnowRococo => &SNOW_ROCOCO_PROTOCOLS,
            Paper::Ramp => &RAMP_PROTOCOLS,
            Paper::Coordination => &COORDINATION_PROTOCOLS,
        };
        names.iter().map(|s| s.to_string()).collect()
    }
}

/// The NMSI paper's criteria, subject first: NMSI, then RC (the weakest), then the strong ones.
pub const NMSI_PROTOCOLS: [&str; 6] = ["nmsi", "rc", "ser", "us", "si", "psi"];

/// Which of the NMSI paper's figures a variant of `reproduce nmsi` feeds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NmsiFigure {
    /// Fig. 4: maximum throughput against the number of sites, workload B, 10% updates.
    Scalability,
    /// Fig. 3: update termination latency and abort ratio against the update ratio, workload A, 4 sites.
    Termination,
    /// Fig. 1: throughput against termination latency, workload C, 4 sites.
    Load,
}

/// One workload variant of an experiment (a topology, a write fraction, an update size).
#[derive(Clone, Debug)]
pub struct Variant {
    pub label: String,
    /// The variant's value on a chart's x axis (datacenters, write fraction, update keys).
    pub x: f64,
    pub workload: MixedWorkload,
    pub topology: Topology,
    /// One-way latency between distinct datacenters, ms, as a matrix (sim) — the real runtime uses the
    /// largest entry for every pair (its emulation is uniform).
    pub inter_dc_ms: Vec<Vec<f64>>,
    /// One-way latency inside a datacenter (sim), ms.
    pub intra_dc_ms: f64,
    /// Clients per loaded datacenter for this variant, replacing the experiment's sweep (`None`: the sweep).
    pub clients: Option<Vec<usize>>,
    /// The NMSI figure the variant feeds (`None` for the other papers).
    pub figure: Option<NmsiFigure>,
    /// The RAMP sweep the variant belongs to (`None` for the other papers).
    pub ramp: Option<RampSweep>,
    /// Run only these of the experiment's protocols in this variant (`None`: all of them).
    pub protocols: Option<Vec<String>>,
}

impl Variant {
    /// The largest one-way inter-datacenter latency, ms (the real runtime emulates it between every pair).
    pub fn uniform_inter_dc_ms(&self) -> f64 {
        self.inter_dc_ms.iter().flatten().copied().fold(0.0, f64::max)
    }
}

/// A reproduction's full set-up.
#[derive(Clone, Debug)]
pub struct Experiment {
    pub paper: Paper,
    pub runtime: Runtime,
    pub quick: bool,
    pub protocols: Vec<String>,
    pub variants: Vec<Variant>,
    /// Closed-loop clients per loaded datacenter, swept.
    pub clients: Vec<usize>,
    /// Clients only in the first this-many datacenters (SNOW loads one); `None`: all.
    pub client_dcs: Option<u16>,
    pub duration_ns: u64,
    pub warmup_ns: u64,
    pub cooldown_ns: u64,
    /// The simulator's CPU model (per handled message and per work unit).
    pub cpu: CpuModel,
    pub seed: u64,
    /// How this set-up differs from the paper's, printed and written into the summary.
    pub notes: Vec<String>,
}

fn ms(x: f64) -> u64 {
    (x * 1e6) as u64
}

impl Experiment {
    /// The experiment's set-up for `runtime`; `quick` shortens runs and the sweep.
    pub fn new(paper: Paper, runtime: Runtime, quick: bool) -> Self {
        let sim = runtime == Runtime::Sim;
        let mut notes = Vec::new();
        let cpu = CpuModel::default();
        let (variants, clients, client_dcs, duration_s, warmup_s, cooldown_s) = match paper {
            Paper::Contrarian => {
                let (variants, clients, [run, warmup, cooldown]) = contrarian::setup(sim, quick, &mut notes);
                (variants, clients, None, run, warmup, cooldown)
            }
            Paper::Tomsic => {
                let (variants, clients, [run, warmup, cooldown]) = tomsic::setup(sim, quick, &mut notes);
                (variants, clients, None, run, warmup, cooldown)
            }
            Paper::SnowCops => {
                let (variants, clients, [run, warmup, cooldown]) = snow_cops::setup(sim, quick, &mut notes);
                // Clients in datacenter 0 only.
                (variants, clients, Some(1), run, warmup, cooldown)
            }
            Paper::Nmsi => {
                let (variants, clients, [run, warmup, cooldown]) = nmsi::setup(sim, quick, &mut notes);
                (variants, clients, None, run, warmup, cooldown)
            }
            Paper::SnowRococo => {
                let (variants, per_server, [run, warmup, cooldown]) = snow_rococo::setup(sim, quick, &mut notes);
                let servers = usize::from(variants[0].topology.partitions);
                (variants, per_server.iter().map(|n| n * servers).collect(), None, run, warmup, cooldown)
            }
            Paper::Ramp => {
                let (variants, clients, [run, warmup, cooldown]) = ramp::setup(sim, quick, &mut notes);
                (variants, clients, None, run, warmup, cooldown)
            }
            Paper::Coordination => {
                let (variants, clients, [run, warmup, cooldown]) = coordination::setup(sim, quick, &mut notes);
                (variants, clients, None, run, warmup, cooldown)
            }
        };
        if sim {
            notes.push(format!(
                "simulator CPU model: {} µs per handled message + {} µs per sent message + {} ns per KiB sent + {} \
                 ns per work unit, one message at a time per server (5 µs per message handled and answered gives \
                 the ~200k messages/s per server that Contrarian's peak of 1,150 Kops/s over 45 servers implies at \
                 ~8 messages per operation)",
                cpu.base_ns as f64 / 1_000.0,
                cpu.per_message_ns as f64 / 1_000.0,
                cpu.per_kib_ns,
                cpu.per_work_unit_ns
            ));
        } else {
            notes.push(
                "real runtime scaled down to fit a 2-core machine: every server is an OS process on loopback, the \
                 clients share one process, inter-DC latency is emulated uniformly (the largest of the paper's \
                 latencies); absolute figures measure this machine, not the paper's cluster"
                    .into(),
            );
        }
        if quick {
            notes.push("--quick: short runs and a short client sweep".into());
        }
        let mut protocols = paper.protocols();
        if paper == Paper::Nmsi {
            let missing: Vec<String> =
                protocols.iter().filter(|p| snowline_protocols::canonical_name(p).is_err()).cloned().collect();
            protocols.retain(|p| !missing.contains(p));
            if !missing.is_empty() {
                notes.push(format!(
                    "not run: {} (this build's protocol registry does not have {}; the paper's figures for {} are \
                     shown as \"not run\")",
                    missing.join(", "),
                    if missing.len() == 1 { "it" } else { "them" },
                    if missing.len() == 1 { "it" } else { "them" }
                ));
            }
        }
        Self {
            paper,
            runtime,
            quick,
            protocols,
            variants,
            clients,
            client_dcs,
            duration_ns: ms(duration_s * 1e3),
            warmup_ns: ms(warmup_s * 1e3),
            cooldown_ns: ms(cooldown_s * 1e3),
            cpu,
            seed: 1,
            notes,
        }
    }

    /// Every point to run: `(variant index, protocol, clients per loaded DC)`, variant by variant.
    pub fn points(&self) -> Vec<(usize, String, usize)> {
        let mut out = Vec::new();
        for (v, variant) in self.variants.iter().enumerate() {
            for p in &self.protocols {
                if variant.protocols.as_ref().is_some_and(|only| !only.contains(p)) {
                    continue;
                }
                for c in variant.clients.as_ref().unwrap_or(&self.clients) {
                    out.push((v, p.clone(), *c));
                }
            }
        }
        out
    }

    pub fn spec(&self, variant: usize, clients: usize) -> RunSpec {
        RunSpec {
            clients_per_dc: clients,
            client_dcs: self.client_dcs,
            duration_ns: self.duration_ns,
            warmup_ns: self.warmup_ns,
            cooldown_ns: self.cooldown_ns,
            workload: self.variants[variant].workload.clone(),
            record_history: false,
            seed: self.seed,
            final_reads_after_ns: None,
            retry: Default::default(),
        }
    }

    pub fn sim_config(&self, variant: usize) -> SimConfig {
        let v = &self.variants[variant];
        let mut config = SimConfig::new(self.seed, v.topology, ProtocolConfig::default());
        config.cpu = self.cpu;
        config.network.intra_dc_latency_ns = ms(v.intra_dc_ms);
        config.network.client_latency_ns = ms(v.intra_dc_ms);
        let dcs = usize::from(v.topology.dcs);
        config.network.inter_dc_latency_ns = if v.inter_dc_ms.len() == dcs {
            v.inter_dc_ms.iter().map(|row| row.iter().map(|x| ms(*x)).collect()).collect()
        } else {
            vec![vec![ms(v.uniform_inter_dc_ms())]]
        };
        config
    }

    /// Run one point in the simulator.
    pub fn run_sim<P: Protocol>(&self, variant: usize, clients: usize) -> RunReport {
        run_sim::<P>(self.sim_config(variant), &self.spec(variant, clients))
    }

    /// The record of a finished point.
    pub fn record(&self, variant: usize, clients: usize, report: RunReport, protocol: &str, wall_s: f64) -> RunRecord {
        let v = &self.variants[variant];
        let loaded = self.client_dcs.map_or(v.topology.dcs, |n| n.min(v.topology.dcs));
        RunRecord {
            experiment: self.paper.name().into(),
            runtime: self.runtime.name().into(),
            variant: v.label.clone(),
            x: v.x,
            protocol: protocol.into(),
            workload: v.workload.pattern.name().into(),
            dcs: v.topology.dcs,
            partitions: v.topology.partitions,
            clients_per_dc: clients,
            clients_total: clients * usize::from(loaded),
            summary: report.summary,
            sim_events: report.sim_events,
            wall_s,
            tpcc: report.tpcc,
        }
    }

    /// A one-paragraph description of the set-up.
    pub fn setup(&self) -> String {
        let mut s = format!(
            "reproduce {} ({} runtime): protocols {}; {} variants × {} client counts per DC {:?}; {:.2} s per run, \
             {:.2} s warm-up and {:.2} s cool-down trimmed",
            self.paper.name(),
            self.runtime.name(),
            self.protocols.join(", "),
            self.variants.len(),
            self.clients.len(),
            self.clients,
            self.duration_ns as f64 / 1e9,
            self.warmup_ns as f64 / 1e9,
            self.cooldown_ns as f64 / 1e9
        );
        for n in &self.notes {
            let _ = write!(s, "\n- {n}");
        }
        s
    }

    /// The line printed for one finished point.
    pub fn point_line(&self, record: &RunRecord) -> String {
        let s = &record.summary;
        match self.paper {
            Paper::SnowRococo => self.snow_rococo_line(record),
            Paper::Ramp => self.ramp_line(record),
            Paper::Coordination => self.coordination_line(record),
            Paper::Nmsi => self.nmsi_line(record),
            _ => {
                let [p50, p95, ..] = record.rot_latency_us();
                format!(
                    "{:<10} {:<11} {:>5} clients: {:>10.0} ops/s, ROT p50 {} p95 {}, fresh {:.2}% ({:.1} s)",
                    record.variant,
                    record.protocol,
                    record.clients_total,
                    s.ops_per_s,
                    fmt_us(p50),
                    fmt_us(p95),
                    s.fresh_read_share * 100.0,
                    record.wall_s
                )
            }
        }
    }

    /// The table of every run, printed and written as `table.txt`.
    pub fn table(&self, records: &[RunRecord]) -> String {
        match self.paper {
            Paper::SnowRococo => self.snow_rococo_table(records),
            Paper::Ramp => self.ramp_table(records),
            Paper::Coordination => self.coordination_table(records),
            Paper::Nmsi => crate::report::txn_table(records),
            _ => crate::report::table(records),
        }
    }

    /// Draw the paper's charts from the finished runs into `dir`; returns the files written.
    /// One line per protocol over the runs of `variant`; `point` places each run.
    fn per_protocol(
        &self,
        records: &[RunRecord],
        variant: &str,
        point: impl Fn(&RunRecord) -> (f64, f64),
    ) -> Vec<Series> {
        let series = |p: &String| Series {
            name: p.clone(),
            points: runs_of(records, variant, p).into_iter().map(&point).collect(),
        };
        self.protocols.iter().map(series).collect()
    }

    pub fn charts(&self, records: &[RunRecord], dir: &Path) -> Result<Vec<PathBuf>> {
        let mut written = Vec::new();
        let mut draw = |name: &str, chart: LineChart| -> Result<()> {
            let path = dir.join(name);
            chart.draw_png(&path, 900, 600)?;
            written.push(path);
            Ok(())
        };
        match self.paper {
            Paper::Contrarian => {
                for (name, chart) in self.contrarian_charts(records) {
                    draw(&name, chart)?;
                }
            }
            Paper::Tomsic => {
                for (name, chart) in self.tomsic_charts(records) {
                    draw(&name, chart)?;
                }
            }
            Paper::SnowCops => {
                for (name, chart) in self.snow_cops_charts(records) {
                    draw(&name, chart)?;
                }
            }
            Paper::Nmsi => {
                for (name, chart) in self.nmsi_charts(records) {
                    draw(&name, chart)?;
                }
            }
            Paper::SnowRococo => {
                for (name, chart) in self.snow_rococo_charts(records) {
                    draw(&name, chart)?;
                }
            }
            Paper::Ramp => {
                for (name, chart) in self.ramp_charts(records) {
                    draw(&name, chart)?;
                }
            }
            Paper::Coordination => {
                for (name, chart) in self.coordination_charts(records) {
                    draw(&name, chart)?;
                }
            }
        }
        Ok(written)
    }

    /// The paper's headline figures beside snowline's, as Markdown.
    pub fn headline(&self, records: &[RunRecord]) -> String {
        let (subject, baseline) = (&self.protocols[0], &self.protocols[self.protocols.len() - 1]);
        match self.paper {
            Paper::Contrarian => self.contrarian_headline(records, subject, baseline),
            Paper::Tomsic => self.tomsic_headline(records),
            Paper::SnowCops => self.snow_cops_headline(records, subject, baseline),
            Paper::Nmsi => self.nmsi_headline(records),
            Paper::SnowRococo => self.snow_rococo_headline(records),
            Paper::Ramp => self.ramp_headline(records),
            Paper::Coordination => self.coordination_headline(records),
        }
    }
}

/// The highest throughput of a sweep (ops/s).
/// The runs of one protocol in one variant, by client count.
fn runs_of<'a>(records: &'a [RunRecord], variant: &str, protocol: &str) -> Vec<&'a RunRecord> {
    let mut v: Vec<&RunRecord> = records.iter().filter(|r| r.variant == variant && r.protocol == protocol).collect();
    v.sort_by_key(|r| r.clients_per_dc);
    v
}

pub fn peak_throughput(records: &[&RunRecord]) -> f64 {
    records.iter().map(|r| r.summary.ops_per_s).fold(0.0, f64::max)
}

/// Where a subject's p95 ROT latency curve drops below a baseline's, by throughput.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Crossover {
    /// From this throughput (ops/s) on, every measured subject point is faster than the baseline at the same
    /// load (the baseline's latency interpolated linearly; beyond the baseline's peak it counts as slower).
    From(f64),
    Never,
}

/// The load from which `subject`'s p95 ROT latency stays below `baseline`'s (both sorted by clients).
pub fn crossover(subject: &[&RunRecord], baseline: &[&RunRecord]) -> Crossover {
    let mut curve: Vec<(f64, f64)> = baseline.iter().map(|r| (r.summary.ops_per_s, r.rot_latency_us()[1])).collect();
    curve.sort_by(|a, b| a.0.total_cmp(&b.0));
    let baseline_at = |x: f64| -> f64 {
        match curve.iter().position(|p| p.0 >= x) {
            None => f64::INFINITY,
            Some(0) => curve[0].1,
            Some(i) => {
                let (a, b) = (curve[i - 1], curve[i]);
                a.1 + (b.1 - a.1) * (x - a.0) / (b.0 - a.0).max(1e-9)
            }
        }
    };
    let mut from = None;
    for r in subject {
        let (x, y) = (r.summary.ops_per_s, r.rot_latency_us()[1]);
        if y < baseline_at(x) {
            from.get_or_insert(x);
        } else {
            from = None;
        }
    }
    from.map_or(Crossover::Never, Crossover::From)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::Metrics;
    use snowline_core::{Placement, Reply, Request};

    fn record(protocol: &str, clients: usize, ops: u64, p95_us: u64) -> RunRecord {
        let mut m = Metrics::default();
        let rot = Request::Rot { keys: vec!["a".into(), "b".into()] };
        for i in 0..ops {
            // 95% of samples at half the p95, the rest at p95.
            let lat = if i % 20 == 19 { p95_us } else { p95_us / 2 };
            m.record(&rot, &Ok(Reply::default()), lat * 1_000);
        }
        RunRecord {
            experiment: "contrarian".into(),
            runtime: "sim".into(),
            variant: "1 DC".into(),
            x: 1.0,
            protocol: protocol.into(),
            workload: "contrarian".into(),
            dcs: 1,
            partitions: 4,
            clients_per_dc: clients,
            clients_total: clients,
            summary: m.summary(1.0),
            sim_events: None,
            wall_s: 0.0,
            tpcc: None,
        }
    }

    #[test]
    fn crossover_is_where_the_subject_stays_faster_at_equal_load() {
        // The subject is slower at low load, faster from 400 ops/s on; the baseline peaks at 500.
        let s = [record("s", 1, 100, 300), record("s", 2, 400, 350), record("s", 4, 900, 800)];
        let b = [record("b", 1, 100, 200), record("b", 2, 300, 400), record("b", 4, 500, 2_000)];
        let (s, b): (Vec<&RunRecord>, Vec<&RunRecord>) = (s.iter().collect(), b.iter().collect());
        assert_eq!(crossover(&s, &b), Crossover::From(400.0));
        assert_eq!(crossover(&b, &s), Crossover::Never);
        assert_eq!(peak_throughput(&s), 900.0);
    }

    #[test]
    fn experiments_are_well_formed_in_both_runtimes() {
        for paper in [
            Paper::Contrarian,
            Paper::Tomsic,
            Paper::SnowCops,
            Paper::Nmsi,
            Paper::SnowRococo,
            Paper::Ramp,
            Paper::Coordination,
        ] {
            for runtime in [Runtime::Sim, Runtime::Real] {
                for quick in [true, false] {
                    let e = Experiment::new(paper, runtime, quick);
                    assert!(!e.points().is_empty());
                    for (i, v) in e.variants.iter().enumerate() {
                        v.workload.validate(v.topology).unwrap();
                        e.sim_config(i).validate().unwrap();
                    }
                    assert!(e.warmup_ns + e.cooldown_ns < e.duration_ns);
                    assert!(e.setup().contains(paper.name()));
                }
            }
        }
        assert_eq!("snow-cops".parse::<Paper>(), Ok(Paper::SnowCops));
        assert!("bogus".parse::<Paper>().is_err());
    }

    #[test]
    fn headlines_and_charts_come_from_the_records() {
        let mut e = Experiment::new(Paper::Contrarian, Runtime::Sim, true);
        e.protocols = vec!["s".into(), "b".into()];
        e.variants.truncate(1);
        let records = vec![
            record("s", 1, 100, 300),
            record("s", 16, 400, 350),
            record("b", 1, 100, 200),
            record("b", 16, 300, 400),
        ];
        let h = e.headline(&records);
        assert!(h.contains("1.33×") && h.contains("3.7×"), "{h}");
        let dir = std::env::temp_dir().join(format!("snowline-repro-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let files = e.charts(&records, &dir).unwrap();
        assert_eq!(files.len(), 1);
        assert!(files[0].exists());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn nmsi_sites_hold_whole_groups_and_global_updates_pay_for_the_wan() {
        let mut e = Experiment::new(Paper::Nmsi, Runtime::Sim, true);
        assert_eq!(e.protocols[..2], ["nmsi".to_string(), "rc".to_string()], "subject first, then RC");
        let setup = e.setup();
        for p in NMSI_PROTOCOLS {
            // Every criterion of the paper is run or named as not run.
            assert!(e.protocols.iter().any(|q| q == p) || setup.contains("not run:") && setup.contains(p), "{p}");
        }
        e.duration_ns = ms(300.0);
        e.warmup_ns = ms(50.0);
        e.cooldown_ns = ms(10.0);
        let fig4 = |sites: u16| {
            e.variants
                .iter()
                .position(|v| v.figure == Some(NmsiFigure::Scalability) && v.topology.dcs == sites)
                .expect("a Fig. 4 variant")
        };
        let (one, three) = (fig4(1), fig4(3));
        let t = e.variants[three].topology;
        assert_eq!((t.partitions, t.replicas, t.placement), (3, 3, Placement::Site));
        let term = |variant: usize| {
            let report = e.run_sim::<snowline_protocols::Nmsi>(variant, 4);
            assert!(report.summary.committed_txns_per_s > 0.0);
            report.summary.update_termination.expect("updates terminated").mean_us
        };
        let (local, global) = (term(one), term(three));
        // At one site a group certifies within the site (0.1 ms hops); over three sites most updates reach a
        // group at another site, 5-7.5 ms away.
        assert!(local < 2_000.0, "one site: {local} µs");
        assert!(global > 3_000.0 && global > 3.0 * local, "three sites: {global} µs vs {local} µs");
    }
}
