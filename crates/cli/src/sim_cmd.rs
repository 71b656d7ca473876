//! `snowline sim`, and what it shares with `snowline bench` (`bench_cmd.rs`): the workload flags, the report,
//! the history and the results directory.

use crate::{check_cmd, duration};
use anyhow::{Context, Result};
use clap::Args;
use snowline_core::{HistoryWriter, Placement, Protocol, ProtocolConfig, Topology};
use snowline_harness::{MixedWorkload, RunRecord, RunReport, RunSpec};
use snowline_protocols::with_protocol;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The workload and cluster shape shared by `sim` and `bench`.
#[derive(Args, Clone, Debug)]
pub struct WorkloadArgs {
    /// The protocol (docs/PROTOCOLS.md; `--help` lists the names, from the registry). `bench` takes a
    /// comma-separated list (nmsi,rc,ser): one run per protocol (and --termination, and --clients count), each
    /// on a fresh cluster, then a side-by-side table.
    #[arg(long, default_value = "cv")]
    pub protocol: String,
    /// Datacenters.
    #[arg(long, default_value_t = 2)]
    pub dcs: u16,
    /// Partitions per datacenter.
    #[arg(long, default_value_t = 4)]
    pub partitions: u16,
    /// Servers per partition (its replica group), placed as --placement says (docs/ARCHITECTURE.md,
    /// placement). Default: one per datacenter, which every protocol but the replica-group ones (`--help`
    /// lists them) requires.
    #[arg(long)]
    pub replicas: Option<u16>,
    /// Where each partition's replica group lives: spread (member m of partition p in datacenter
    /// (p + m) mod dcs) or site (the whole group in datacenter p mod dcs, as in the NMSI paper's set-up).
    #[arg(long, default_value = "spread")]
    pub placement: Placement,
    /// Closed-loop clients per datacenter; a comma-separated list (10,50,100) sweeps them, one run each.
    #[arg(long, value_delimiter = ',', default_value = "50")]
    pub clients: Vec<usize>,
    /// How long each run lasts (virtual time in `sim`), e.g. 10s, 500ms.
    #[arg(long, default_value = "10s", value_parser = duration::parse)]
    pub duration: Duration,
    /// Not measured at the start of the run.
    #[arg(long, default_value = "0s", value_parser = duration::parse)]
    pub warmup: Duration,
    /// Not measured at the end of the run.
    #[arg(long, default_value = "0s", value_parser = duration::parse)]
    pub cooldown: Duration,
    /// The operation pattern: mixed (GET/ROT/PUT/update over a Zipfian key space), photo-acl (Contrarian
    /// Fig. 1: ACL then photo writes, and ROTs over both; --keys / 2 albums), contrarian (Contrarian Table 1:
    /// ROTs over --partitions-per-rot partitions and PUTs, --write-ratio w), eiger (SNOW §6.1: ROTs of
    /// --keys-per-op keys and writes of as many PUTs), tomsic-single (Tomsic §5.3.2: a ROT of --keys-per-op
    /// reads, then an update of --update-keys of them, keys 80/20), ycsb-t (NMSI's transactional YCSB, --mix),
    /// kv (single-key GETs and PUTs, --write-ratio of PUTs: YCSB A by default; what raft-kv serves), tpcc (TPC-C as
    /// stored procedures, loaded before and audited after the run: --tpcc-setup, --tpcc-scale; docs/WORKLOADS.md),
    /// hot-item (every transaction writes one hot key on partition 1 and a key of its own on partition 0: the
    /// 2PC bound's check, `snowline bound 2pc --profile sim`).
    /// Default: mixed, or ycsb-t for a protocol without blind writes (nmsi).
    #[arg(long)]
    pub workload: Option<snowline_harness::Pattern>,
    /// Size of the key space (default: 1000; eiger and tomsic-single: 100000).
    #[arg(long)]
    pub keys: Option<usize>,
    /// Zipf constant (default: 0.8; contrarian: 0.99).
    #[arg(long)]
    pub zipf: Option<f64>,
    /// contrarian: w = #PUT / (#PUT + #individual reads) (default 0.05); eiger: write fraction (default 0.1); ycsb-t:
    /// share of update transactions (default 0.2); kv: share of PUTs (default 0.5).
    #[arg(long)]
    pub write_ratio: Option<f64>,
    /// contrarian: partitions per ROT, one key on each (default 4).
    #[arg(long)]
    pub partitions_per_rot: Option<usize>,
    /// contrarian: keys stored per partition (default 10000).
    #[arg(long)]
    pub keys_per_partition: Option<usize>,
    /// Value size in bytes (default 16; contrarian 8; eiger 128 per column; tomsic-single 100).
    #[arg(long)]
    pub value_bytes: Option<usize>,
    /// eiger: keys per operation (default 5); tomsic-single: reads per ROT (default 100); mixed: keys per ROT.
    #[arg(long)]
    pub keys_per_op: Option<usize>,
    /// tomsic-single: keys updated after each ROT (default 10); mixed: keys per update transaction.
    #[arg(long)]
    pub update_keys: Option<usize>,
    /// eiger: columns per key (default 5).
    #[arg(long)]
    pub columns: Option<usize>,
    /// ycsb-t: the NMSI paper's transactional YCSB mix: a (Zipfian; 4 reads / 2 reads + 2 writes), b (uniform;
    /// 4 reads / 3 reads + 1 write) or c (uniform; 2 reads / 1 read + 1 write). --write-ratio is the share of
    /// update transactions (default 0.2). A preset: --ro-reads, --update-reads, --update-writes and
    /// --key-dist override its values.
    #[arg(long, default_value = "a")]
    pub mix: snowline_harness::YcsbMix,
    /// ycsb-t: reads per read-only transaction (default: the --mix preset's).
    #[arg(long, value_name = "N")]
    pub ro_reads: Option<usize>,
    /// ycsb-t: reads per update transaction (default: the --mix preset's).
    #[arg(long, value_name = "N")]
    pub update_reads: Option<usize>,
    /// ycsb-t: how many of the keys an update transaction read it then writes (read-modify-writes; 1 to
    /// --update-reads; default: the --mix preset's).
    #[arg(long, value_name = "N")]
    pub update_writes: Option<usize>,
    /// ycsb-t: the share of read-only transactions, 0 to 1 (default 0.8): another way to say --write-ratio,
    /// the share of update transactions; giving both is refused unless they add up to 1.
    #[arg(long, value_name = "F")]
    pub read_only_share: Option<f64>,
    /// ycsb-t: how transactions pick keys: uniform, or zipfian with --zipf (default 0.99) (default: the --mix
    /// preset's: zipfian for a, uniform for b and c).
    #[arg(long, value_name = "DIST")]
    pub key_dist: Option<snowline_harness::KeyDist>,
    /// tpcc: the set-up: snow (the SNOW paper's and Rococo's: one warehouse, 10 districts per partition,
    /// district-sharded, clients pinned to a home district, no rollbacks) or standard (TPC-C's: --tpcc-warehouses
    /// of 10 districts, each warehouse on one partition, remote lines and payments, 1% rollbacks). WORKLOADS.md.
    #[arg(long, default_value = "snow")]
    pub tpcc_setup: snowline_harness::tpcc::Setup,
    /// tpcc, standard set-up: warehouses.
    #[arg(long, default_value_t = 1)]
    pub tpcc_warehouses: u32,
    /// tpcc: the population: full (TPC-C's: 100,000 items, 3,000 customers and orders per district), small
    /// (1,000 items, 30 customers and orders per district: for tests), items (100,000 items, 30 customers and
    /// orders per district: full-scale stock contention, quick to load) or tiny (100 items, 10 customers and
    /// orders per district: hundreds of warehouses in seconds).
    #[arg(long, default_value = "full")]
    pub tpcc_scale: snowline_harness::tpcc::Scale,
    /// tpcc: New-Order's 1% rollback (an unused item) on or off (default: on in standard, off in snow).
    #[arg(long)]
    pub tpcc_rollback: Option<bool>,
    /// tpcc: run only New-Order (the coordination-avoidance paper's experiment) instead of the mix.
    #[arg(long)]
    pub tpcc_new_order_only: bool,
    /// tpcc, standard set-up with 2 or more warehouses: PCT% of New-Orders get exactly one line supplied by a
    /// remote warehouse (on another server when there is one), the others none, instead of TPC-C's 1% of
    /// lines.
    #[arg(long, value_name = "PCT")]
    pub tpcc_distributed: Option<u32>,
    /// tpcc on a coordination-free protocol (ramp-f, ramp-s, ramp-h, nocc): the analyzer's verdicts
    /// (`snowline analyze SCHEMA --transactions FILE --json > FILE`) choose each transaction's mechanism;
    /// one that needs more coordination than the store can give is refused. docs/COORDINATION.md.
    #[arg(long, value_name = "FILE")]
    pub tpcc_verdicts: Option<std::path::PathBuf>,
    /// How clients retry aborted transactions: off, a number of retries, or until-commit (the default).
    #[arg(long, default_value = "until-commit")]
    pub retry: snowline_harness::RetryPolicy,
    /// Backoff before the first retry; it doubles per attempt (with jitter), up to 100 ms.
    #[arg(long, default_value = "1ms", value_parser = duration::parse)]
    pub backoff: Duration,
    /// Write the client-observed history here (JSON Lines, docs/HISTORY.md). `sim`: one client count only;
    /// `bench` with several runs writes one file per run, named after it (h.jsonl → h-nmsi-multicast-c8.jsonl).
    #[arg(long)]
    pub history: Option<PathBuf>,
    /// Write the summary as JSON here. `sim`: one client count only; `bench` with several runs writes one file
    /// per run, named as --history's.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Write a results directory: every run's summary as JSON and CSV, results.csv, a throughput vs p95 ROT
    /// latency chart and the summary table.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Check the recorded history at this level (rc, ra, causal-snapshot, causal, tcc, ser, strict-ser, si, psi, nmsi, us, pos, or `claimed`: the
    /// protocol's own claim) and print the verdict; exits 1 if it fails. `sim`: one client count only; `bench`
    /// checks every run, each at its own protocol's claim with `claimed`, and exits 1 after the last if any failed.
    #[arg(long, value_name = "LEVEL")]
    pub check: Option<String>,
    /// The Jessy family (nmsi, rc, ser, us, si, psi): how update transactions terminate, by genuine atomic
    /// multicast or two-phase commit over the replica groups. `bench` takes a comma-separated list
    /// (multicast,2pc): one run each; other protocols in a --protocol list run once, with their own.
    #[arg(long, value_delimiter = ',', default_value = "multicast")]
    pub termination: Vec<snowline_core::Termination>,
}

impl WorkloadArgs {
    /// The operation pattern: `--workload`, else mixed, or ycsb-t where the protocol offers no blind writes
    /// (every other pattern writes blindly).
    pub fn pattern(&self) -> snowline_harness::Pattern {
        use snowline_harness::Pattern;
        self.workload.unwrap_or_else(|| match snowline_protocols::lookup(&self.protocol) {
            Ok(p) if !p.offers.blind_writes => Pattern::YcsbT { mix: self.mix },
            _ => Pattern::Mixed,
        })
    }

    /// The mechanisms the analyzer's verdicts (`--tpcc-verdicts`) choose; `Err` if they cannot be read or
    /// ask for more than a coordination-free store gives.
    pub fn tpcc_plan(&self) -> Result<Option<snowline_harness::tpcc_plan::Plan>> {
        let Some(path) = &self.tpcc_verdicts else { return Ok(None) };
        let text = std::fs::read_to_string(path).with_context(|| format!("--tpcc-verdicts {}", path.display()))?;
        let plan = snowline_harness::tpcc_plan::Plan::from_json(&text)
            .map_err(|e| anyhow::anyhow!("--tpcc-verdicts {}: {e}", path.display()))?;
        Ok(Some(plan))
    }

    pub fn workload(&self) -> MixedWorkload {
        use snowline_harness::Pattern;
        let mut w = match self.pattern() {
            Pattern::Contrarian => MixedWorkload::contrarian(),
            Pattern::Eiger => MixedWorkload::eiger(),
            Pattern::TomsicSingle => MixedWorkload::tomsic_single(10),
            Pattern::TomsicMulti { .. } => MixedWorkload::tomsic_multi(100),
            Pattern::YcsbT { .. } => MixedWorkload::ycsb_t(self.mix),
            Pattern::Kv => MixedWorkload::kv(),
            p => MixedWorkload { pattern: p, ..Default::default() },
        };
        if let Some(k) = self.keys {
            w.keys = k;
        }
        if let Some(z) = self.zipf {
            w.zipf = z;
        }
        if let Some(x) = self.write_ratio {
            w.write_ratio = x;
        }
        if let Some(x) = self.partitions_per_rot {
            w.partitions_per_rot = x;
        }
        if let Some(x) = self.keys_per_partition {
            w.keys_per_partition = x;
        }
        if let Some(x) = self.value_bytes {
            w.value_bytes = x;
        }
        if let Some(x) = self.keys_per_op {
            w.rot_keys = x;
        }
        if let Some(x) = self.update_keys {
            w.update_keys = x;
        }
        if let Some(x) = self.columns {
            w.columns = x;
        }
        if let Pattern::YcsbT { .. } = w.pattern {
            if let Some(x) = self.ro_reads {
                w.ycsb.ro_reads = x;
            }
            if let Some(x) = self.update_reads {
                w.ycsb.update_reads = x;
            }
            if let Some(x) = self.update_writes {
                w.ycsb.update_writes = x;
            }
            if let Some(x) = self.key_dist {
                w.ycsb.key_dist = x;
            }
            if let Some(x) = self.read_only_share {
                w.write_ratio = 1.0 - x;
            }
        }
        let plan = self.tpcc_plan().ok().flatten();
        w.tpcc = snowline_harness::tpcc::TpccSpec {
            setup: self.tpcc_setup,
            warehouses: self.tpcc_warehouses,
            scale: self.tpcc_scale,
            rollback: self.tpcc_rollback,
            new_order_only: self.tpcc_new_order_only,
            distributed: self.tpcc_distributed,
            seed: 0,
            coordination_free: false,
            free_delivery: plan.as_ref().is_some_and(|p| p.procedure("delivery") == Some("tpcc-cf-delivery-free")),
            stock_floor: plan.as_ref().and_then(|p| p.stock_floor.as_ref().map(|(f, _)| *f)),
        };
        if let Pattern::PhotoAcl { .. } = w.pattern {
            // One album per two keys.
            w.pattern = Pattern::PhotoAcl { albums: (w.keys / 2).max(1) };
        }
        w
    }

    pub fn spec(&self, seed: u64, clients: usize) -> RunSpec {
        RunSpec {
            clients_per_dc: clients,
            client_dcs: None,
            duration_ns: self.duration.as_nanos() as u64,
            warmup_ns: self.warmup.as_nanos() as u64,
            cooldown_ns: self.cooldown.as_nanos() as u64,
            workload: {
                let mut w = self.workload();
                w.tpcc.seed = seed;
                w
            },
            record_history: self.history.is_some() || self.check.is_some(),
            seed,
            final_reads_after_ns: None,
            retry: snowline_harness::RetryPolicy { backoff_ns: self.backoff.as_nanos() as u64, ..self.retry },
        }
    }

    /// A run's protocol and, for the Jessy family, termination: "nmsi, multicast termination".
    pub(crate) fn run_label(&self) -> String {
        match snowline_protocols::jessy::FAMILY.contains(&self.protocol.as_str()) {
            true => format!("{}, {} termination", self.protocol, self.termination()),
            false => self.protocol.clone(),
        }
    }

    /// [`Self::run_label`] for a file name: "nmsi-multicast".
    pub(crate) fn file_label(&self) -> String {
        match snowline_protocols::jessy::FAMILY.contains(&self.protocol.as_str()) {
            true => format!("{}-{}", self.protocol, self.termination()),
            false => self.protocol.clone(),
        }
    }

    /// The termination of a single run (the first of --termination).
    pub fn termination(&self) -> snowline_core::Termination {
        self.termination.first().copied().unwrap_or_default()
    }

    /// The protocols --protocol names (a comma-separated list), by their registry names; an unknown one is
    /// refused, naming the valid ones.
    pub fn protocols(&self) -> Result<Vec<&'static str>> {
        let mut names = Vec::new();
        for given in self.protocol.split(',').map(str::trim) {
            anyhow::ensure!(!given.is_empty(), "--protocol {:?}: an empty name in the list", self.protocol);
            let name = snowline_protocols::canonical_name(given)?;
            anyhow::ensure!(!names.contains(&name), "--protocol names {name} twice");
            names.push(name);
        }
        Ok(names)
    }

    /// One set of arguments per protocol and termination of the lists (--protocol, --termination), in their
    /// order: the Jessy family's protocols run under each termination, the others once, with their own.
    pub fn per_protocol(&self) -> Result<Vec<WorkloadArgs>> {
        use snowline_core::Termination;
        let names = self.protocols()?;
        anyhow::ensure!(!self.termination.is_empty(), "--termination needs at least one of multicast, 2pc");
        for (i, t) in self.termination.iter().enumerate() {
            anyhow::ensure!(!self.termination[..i].contains(t), "--termination names {t} twice");
        }
        let jessy = |name: &str| snowline_protocols::jessy::FAMILY.contains(&name);
        let mut runs = Vec::new();
        for name in &names {
            let terminations = match jessy(name) {
                true => self.termination.clone(),
                // Alone (no Jessy protocol in the list), a termination other than the default is refused below.
                false if !names.iter().any(|n| jessy(n)) => self.termination.clone(),
                false => vec![Termination::Multicast],
            };
            for t in terminations {
                runs.push(WorkloadArgs { protocol: name.to_string(), termination: vec![t], ..self.clone() });
            }
        }
        Ok(runs)
    }

    /// Reject bad arguments before any work starts (`sim`: one protocol, one termination).
    pub fn validate(&self) -> Result<()> {
        let runs = self.per_protocol()?;
        anyhow::ensure!(
            runs.len() == 1,
            "`snowline sim` runs one protocol under one termination; `snowline bench` takes lists (--protocol {}, \
             --termination {})",
            self.protocol,
            self.termination.iter().map(ToString::to_string).collect::<Vec<_>>().join(",")
        );
        runs[0].validate_run(false)
    }

    /// Reject bad arguments before any work starts (`bench`: lists of protocols and terminations; with
    /// several runs --history and --json write one file per run and --check checks each).
    pub fn validate_bench(&self) -> Result<()> {
        for run in self.per_protocol()? {
            run.validate_run(true)?;
        }
        Ok(())
    }

    /// Validate the arguments of one protocol under one termination; `several_files` allows --history,
    /// --json and --check with a client sweep (one file, one check per run).
    fn validate_run(&self, several_files: bool) -> Result<()> {
        snowline_protocols::canonical_name(&self.protocol)?;
        if let Some(request) = self.pattern().needs() {
            let what = snowline_core::Offers::CAUSAL.capability(&request).0;
            let hint = if matches!(request, snowline_core::Request::Put { .. }) {
                " (--workload ycsb-t runs read-modify-write transactions)"
            } else {
                ""
            };
            snowline_protocols::check_offered(&self.protocol, &request)
                .map_err(|e| anyhow::anyhow!("workload {} needs {what}: {e}{hint}", self.pattern().name()))?;
        }
        if let Some(level) = &self.check {
            check_cmd::resolve_level(level, &self.protocol)?;
        }
        let name = snowline_protocols::canonical_name(&self.protocol)?;
        if self.tpcc_verdicts.is_some() {
            anyhow::ensure!(
                self.pattern() == snowline_harness::Pattern::Tpcc,
                "--tpcc-verdicts applies to --workload tpcc"
            );
            let coordination_free = with_protocol!(name, P => P::COORDINATION_FREE_TPCC)?;
            anyhow::ensure!(
                coordination_free,
                "--tpcc-verdicts chooses mechanisms of a coordination-free store (ramp-f, ramp-s, ramp-h, nocc); {name} \
                 runs every TPC-C transaction under its own concurrency control"
            );
            if let Some((floor, invariant)) = self.tpcc_plan()?.and_then(|p| p.stock_floor) {
                anyhow::ensure!(
                    name != "nocc",
                    "the verdicts ask New-Order to keep {invariant} (S_QUANTITY >= {floor}), which needs a store that \
                     can abort a write: nocc applies every write at once; use ramp-f, ramp-s or ramp-h"
                );
            }
        }
        anyhow::ensure!(
            self.termination.iter().all(|t| *t == snowline_core::Termination::Multicast)
                || snowline_protocols::jessy::FAMILY.contains(&name),
            "--termination applies to the Jessy family ({}); {name} has its own",
            snowline_protocols::jessy::FAMILY.join(", ")
        );
        anyhow::ensure!(!self.clients.is_empty(), "--clients needs at least one count");
        anyhow::ensure!(!self.clients.contains(&0), "--clients must be at least 1 (clients per datacenter)");
        anyhow::ensure!(
            several_files
                || self.clients.len() == 1
                || (self.history.is_none() && self.check.is_none() && self.json.is_none()),
            "--history, --check and --json take one client count; use --out for a sweep"
        );
        if let Some(share) = self.read_only_share {
            anyhow::ensure!(
                (0.0..=1.0).contains(&share),
                "--read-only-share is a share of transactions, from 0 to 1, not {share}"
            );
            if let Some(w) = self.write_ratio {
                anyhow::ensure!(
                    (w - (1.0 - share)).abs() < 1e-9,
                    "--write-ratio {w} and --read-only-share {share} disagree: for ycsb-t --write-ratio is the share \
                     of update transactions, 1 - --read-only-share; give one of them"
                );
            }
        }
        anyhow::ensure!(
            self.warmup + self.cooldown < self.duration,
            "--warmup plus --cooldown must be shorter than --duration"
        );
        self.refuse_unused_workload_flags()?;
        self.workload().validate(self.topology()?).map_err(|e| anyhow::anyhow!(e))?;
        Ok(())
    }

    /// A workload flag the chosen workload does not read is refused, not ignored (`--write-ratio 0.3` on the
    /// mixed workload once ran the default mix without a word).
    fn refuse_unused_workload_flags(&self) -> Result<()> {
        use snowline_harness::Pattern;
        let pattern = self.pattern();
        let name = pattern.name();
        let mixed_or_tomsic = matches!(pattern, Pattern::Mixed | Pattern::TomsicSingle | Pattern::TomsicMulti { .. });
        let ycsb = matches!(pattern, Pattern::YcsbT { .. });
        if ycsb && self.zipf.is_some() && self.workload().ycsb.key_dist == snowline_harness::KeyDist::Uniform {
            let why = match self.key_dist {
                Some(_) => "--key-dist uniform".to_string(),
                None => format!("--mix {}'s preset", format!("{:?}", self.mix).to_lowercase()),
            };
            anyhow::bail!(
                "--zipf shapes Zipfian keys, and ycsb-t's keys are uniform here ({why}): add --key-dist zipfian, or \
                 drop --zipf"
            );
        }
        // (flag, given, read by this workload)
        let flags = [
            (
                "write-ratio",
                self.write_ratio.is_some(),
                matches!(pattern, Pattern::Contrarian | Pattern::Eiger | Pattern::YcsbT { .. } | Pattern::Kv),
            ),
            ("partitions-per-rot", self.partitions_per_rot.is_some(), pattern == Pattern::Contrarian),
            ("keys-per-partition", self.keys_per_partition.is_some(), pattern == Pattern::Contrarian),
            ("keys-per-op", self.keys_per_op.is_some(), mixed_or_tomsic || pattern == Pattern::Eiger),
            ("update-keys", self.update_keys.is_some(), mixed_or_tomsic),
            ("columns", self.columns.is_some(), pattern == Pattern::Eiger),
            ("ro-reads", self.ro_reads.is_some(), ycsb),
            ("update-reads", self.update_reads.is_some(), ycsb),
            ("update-writes", self.update_writes.is_some(), ycsb),
            ("read-only-share", self.read_only_share.is_some(), ycsb),
            ("key-dist", self.key_dist.is_some(), ycsb),
        ];
        match flags.iter().find(|(_, given, read)| *given && !read) {
            Some((flag, ..)) => anyhow::bail!(
                "--{flag} does not apply to the {name} workload (--help says which workloads read it; choose one \
                 with --workload)"
            ),
            None => Ok(()),
        }
    }

    pub fn topology(&self) -> Result<Topology> {
        anyhow::ensure!(self.dcs >= 1 && self.partitions >= 1, "--dcs and --partitions must be at least 1");
        anyhow::ensure!(self.replicas != Some(0), "--replicas must be at least 1");
        let topology = Topology::placed(self.dcs, self.partitions, self.replicas.unwrap_or(self.dcs), self.placement);
        with_protocol!(&self.protocol, P => P::check_topology(&topology))?.map_err(|e| anyhow::anyhow!(e))?;
        Ok(topology)
    }

    pub(crate) fn record(&self, runtime: &str, report: RunReport, clients: usize, wall_s: f64) -> RunRecord {
        RunRecord {
            experiment: runtime.into(),
            runtime: runtime.into(),
            variant: self.pattern().name().into(),
            x: 0.0,
            protocol: report.protocol.clone(),
            workload: self.pattern().name().into(),
            dcs: self.dcs,
            partitions: self.partitions,
            clients_per_dc: clients,
            clients_total: clients * usize::from(self.dcs),
            summary: report.summary,
            sim_events: report.sim_events,
            wall_s,
            tpcc: report.tpcc,
        }
    }
}

#[derive(Args, Clone, Debug)]
pub struct SimArgs {
    #[command(flatten)]
    pub run: WorkloadArgs,
    /// The simulator's seed: the same seed and flags give the same run, byte for byte.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// One-way latency between datacenters, in milliseconds.
    #[arg(long, default_value_t = 40.0)]
    pub latency_ms: f64,
    /// Maximum clock offset of a node from true time, in milliseconds.
    #[arg(long, default_value_t = 1.0)]
    pub skew_ms: f64,
    /// Crash a server: SERVER@AT+DOWN restarts it from its log DOWN later, e.g. dc1/p0@300ms+200ms (makes every
    /// server durable, docs/DURABILITY.md; protocols that input replay makes durable only); SERVER@AT crashes
    /// it for good (crash-stop, any protocol; for raft-kv keep it to a minority of each group). Repeatable.
    /// Operations caught by a crash time out after --op-timeout with outcome unknown.
    #[arg(long, value_parser = parse_crash)]
    pub crash: Vec<snowline_sim::CrashPlan>,
    /// Run durable servers (each in the durable host, over a simulated log committed as --fsync-us says)
    /// without crashing any: the figures then show what durability costs against a run without it. Only for
    /// protocols that input replay makes durable. --crash with a restart and --faults swarm imply it.
    #[arg(long)]
    pub durable: bool,
    /// With durable servers: the virtual time, in microseconds, a log commit takes (group commit: one at a
    /// time per server, replies wait for it, a crash before it ends loses its inputs); 0 commits every input
    /// at once, in no time. The default is what a commit of a few records took on the project machine's disk
    /// (docs/DURABILITY.md).
    #[arg(long, default_value_t = 100)]
    pub fsync_us: u64,
    /// Faults drawn from the seed: none, or swarm (a random subset of crashes, leader crashes, leader kills
    /// mid-protocol, isolations, partitions that drop messages and random loss; crashes keep a majority of
    /// every replica group up; everything heals by 70% of the run). docs/SIMULATOR.md.
    #[arg(long, default_value = "none")]
    pub faults: Faults,
    /// With --crash or --faults: give up on an operation after this long (outcome unknown). Default: 1s with
    /// --crash, 3s with --faults swarm.
    #[arg(long, value_parser = duration::parse)]
    pub op_timeout: Option<std::time::Duration>,
}

/// `--faults`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Faults {
    None,
    Swarm,
}

impl std::str::FromStr for Faults {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s {
            "none" => Ok(Faults::None),
            "swarm" => Ok(Faults::Swarm),
            other => Err(format!("unknown fault mode {other:?}: use none or swarm")),
        }
    }
}

/// `dc1/p0@300ms+200ms`: crash dc1/p0 at 300 ms, restart it 200 ms later; `dc1/p0@300ms`: crash-stop.
fn parse_crash(s: &str) -> std::result::Result<snowline_sim::CrashPlan, String> {
    let usage = || format!("{s:?}: expected SERVER@AT[+DOWN], e.g. dc1/p0@300ms+200ms");
    let (server, times) = s.split_once('@').ok_or_else(usage)?;
    let (at, down) = match times.split_once('+') {
        Some((at, down)) => (at, Some(duration::parse(down)?.as_nanos() as u64)),
        None => (times, None),
    };
    Ok(snowline_sim::CrashPlan {
        server: server.parse()?,
        at_ns: duration::parse(at)?.as_nanos() as u64,
        down_ns: down,
    })
}

pub fn sim(args: SimArgs) -> Result<()> {
    // Arguments first: a refused command prints only why.
    args.run.validate()?;
    println!("seed {}", args.seed);
    if let Some(plan) = args.run.tpcc_plan()? {
        print!("{plan}");
    }
    let topology = args.run.topology()?;
    let protocol = ProtocolConfig { termination: args.run.termination(), ..ProtocolConfig::default() };
    let mut config = snowline_sim::SimConfig::new(args.seed, topology, protocol);
    let dcs = usize::from(topology.dcs);
    let wan_ns = (args.latency_ms * 1e6) as u64;
    config.network.inter_dc_latency_ns =
        (0..dcs).map(|a| (0..dcs).map(|b| if a == b { 0 } else { wan_ns }).collect()).collect();
    config.clocks.max_skew_ns = (args.skew_ms * 1e6) as u64;
    config.fsync_ns = args.fsync_us * 1_000;
    config.durable = args.durable;
    if !args.crash.is_empty() {
        let restarts = args.crash.iter().any(|c| c.down_ns.is_some());
        config.durable |= restarts;
        config.op_timeout_ns = Some(args.op_timeout.unwrap_or(Duration::from_secs(1)).as_nanos() as u64);
        config.crashes = args.crash.clone();
    }
    let schedule = match args.faults {
        Faults::None => snowline_sim::FaultSchedule::none(),
        Faults::Swarm => {
            // Durable servers: crashed ones come back from their disk, and sequenced links resend what
            // partitions and loss drop (Raft's groups resend by themselves).
            config.durable = true;
            if config.op_timeout_ns.is_none() {
                config.op_timeout_ns = Some(args.op_timeout.unwrap_or(Duration::from_secs(3)).as_nanos() as u64);
            }
            let options = snowline_sim::SwarmOptions {
                duration_ns: args.run.duration.as_nanos() as u64,
                restart_with_disk: true,
                required: Vec::new(),
            };
            snowline_sim::FaultSchedule::swarm(args.seed, topology, &options)
        }
    };
    config.validate().map_err(|e| anyhow::anyhow!(e))?;
    for c in &args.crash {
        match c.down_ns {
            Some(down) => println!(
                "crash {} at {} ms, restart {} ms later (durable servers)",
                c.server,
                c.at_ns / 1_000_000,
                down / 1_000_000
            ),
            None => println!("crash {} at {} ms for good (crash-stop)", c.server, c.at_ns / 1_000_000),
        }
    }
    if args.faults == Faults::Swarm {
        println!("faults: swarm, {schedule}");
    }
    if config.durable {
        match config.fsync_ns {
            0 => println!("durable servers, every input committed at once (--fsync-us 0)"),
            ns => println!("durable servers, group commit of {} µs of virtual time", ns / 1_000),
        }
    }
    let progress = crate::progress::bar(args.run.clients.len() as u64);
    let mut records = Vec::new();
    for &clients in &args.run.clients {
        progress.set_message(format!("{} clients per DC", clients));
        let spec = args.run.spec(args.seed, clients);
        let started = Instant::now();
        let (report, dropped) =
            with_protocol!(&args.run.protocol, P => run_with_faults::<P>(config.clone(), &schedule, &spec))?;
        let wall = started.elapsed().as_secs_f64();
        progress.suspend(|| {
            println!("clients per DC {clients}");
            print_report(&report);
            if args.faults != Faults::None || !args.crash.is_empty() {
                println!("messages dropped {dropped}");
            }
            let events = report.sim_events.unwrap_or(0);
            println!(
                "simulated {:.2} s in {:.2} s of wall time: {} events, {:.0} events/s",
                args.run.duration.as_secs_f64(),
                wall,
                events,
                events as f64 / wall
            );
        });
        let failed = finish(&report, &args.run, "sim", args.seed)?;
        anyhow::ensure!(failed.is_empty(), "{}", failed.join("; "));
        records.push(args.run.record("sim", report, clients, wall));
        progress.inc(1);
    }
    progress.finish_and_clear();
    write_sweep(&args.run, &records)?;
    println!("replay: {}", replay_command(args.seed));
    Ok(())
}

/// Run `spec` in the simulator with `schedule`'s faults; also returns the messages the network dropped.
fn run_with_faults<P: Protocol>(
    config: snowline_sim::SimConfig,
    schedule: &snowline_sim::FaultSchedule,
    spec: &RunSpec,
) -> (RunReport, u64) {
    let mut sim: snowline_sim::Sim<P> = snowline_sim::Sim::new(config);
    schedule.apply(&mut sim);
    let report = snowline_harness::drive_sim(&mut sim, spec);
    (report, sim.messages_dropped())
}

/// The command line that replays this run: the arguments as given, with the seed made explicit.
fn replay_command(seed: u64) -> String {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    match args.iter().position(|a| a == "--seed") {
        Some(i) if i + 1 < args.len() => args[i + 1] = seed.to_string(),
        _ => {
            args.retain(|a| !a.starts_with("--seed="));
            args.extend(["--seed".to_string(), seed.to_string()]);
        }
    }
    let quoted: Vec<String> = args.iter().map(|a| if a.contains(' ') { format!("'{a}'") } else { a.clone() }).collect();
    format!("snowline {}", quoted.join(" "))
}

/// After a sweep of several client counts, or with --out: the summary table, and the results directory.
pub(crate) fn write_sweep(args: &WorkloadArgs, records: &[RunRecord]) -> Result<()> {
    if records.len() > 1 {
        println!("\n{}", snowline_harness::report::table(records));
    }
    let Some(dir) = &args.out else { return Ok(()) };
    for r in records {
        snowline_harness::report::write_run(dir, r)?;
    }
    snowline_harness::report::write_all(dir, records)?;
    std::fs::write(dir.join("table.txt"), snowline_harness::report::table(records))?;
    let chart = snowline_harness::charts::LineChart {
        title: format!("{} on {}: throughput vs p95 ROT latency", args.protocol, args.pattern().name()),
        x_label: "throughput (Kops/s)".into(),
        y_label: "p95 ROT latency (ms)".into(),
        series: vec![snowline_harness::charts::Series {
            name: args.protocol.clone(),
            points: records.iter().map(|r| (r.summary.ops_per_s / 1e3, r.rot_latency_us()[1] / 1e3)).collect(),
        }],
        y_from_zero: true,
        reference: None,
        legend: snowline_harness::charts::Legend::UpperLeft,
    };
    chart.draw_png(&dir.join("throughput-vs-p95-rot-latency.png"), 900, 600)?;
    println!("results written to {}", dir.display());
    Ok(())
}

pub(crate) fn print_report(report: &RunReport) {
    println!("protocol {}", report.protocol);
    println!("{}", report.summary);
    if let Some(audit) = &report.tpcc {
        print_tpcc(&report.summary);
        println!("{audit}");
    }
}

/// The figures TPC-C reports: New-Order throughput (tpmC's numerator), and per transaction its latency and
/// commit rate (committed / attempts).
fn print_tpcc(summary: &snowline_harness::Summary) {
    if let Some(k) = summary.kind("tpcc-new-order") {
        println!("tpcc: New-Order {:.0}/s ({:.0} per minute)", k.ops_per_s, k.ops_per_s * 60.0);
    }
    for k in summary.per_kind.iter().filter(|k| k.kind.starts_with("tpcc-")) {
        println!(
            "tpcc: {:<17} p50 {:>9.1} µs, p99 {:>9.1} µs, commit rate {:.2}% ({} committed, {} aborted attempts)",
            k.kind,
            k.p50_us,
            k.p99_us,
            k.commit_rate() * 100.0,
            k.ok,
            k.aborted
        );
    }
}

/// Write the run's history and summary where asked, and check them with --check. The checks that fail are
/// returned (the caller decides whether the command goes on), not raised.
pub(crate) fn finish(report: &RunReport, args: &WorkloadArgs, runtime: &str, seed: u64) -> Result<Vec<String>> {
    let mut failed = Vec::new();
    if let (Some(path), Some(history)) = (&args.history, &report.history) {
        write_history(path, history, Some(&history_meta(&args.protocol, runtime, seed)?))?;
        println!("history: {} events written to {}", history.len(), path.display());
    }
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_string_pretty(report)?)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    if let (Some(level), Some(history)) = (&args.check, &report.history) {
        let level = check_cmd::resolve_level(level, &args.protocol)?;
        let verdict = check_cmd::check_recorded(history, level, &args.protocol)?;
        print!("check: ");
        check_cmd::print_verdict(&verdict, false);
        if !verdict.ok {
            failed.push(format!("the history does not satisfy {level}"));
        }
    }
    if let (Some(_), Some(audit)) = (&args.check, &report.tpcc)
        && !audit.ok()
    {
        failed.push(format!(
            "the TPC-C consistency audit failed: condition(s) {:?} violated{}",
            audit.violated(),
            if audit.malformed.is_empty() { "" } else { ", malformed rows" }
        ));
    }
    Ok(failed)
}

/// The metadata line of a history recorded by a run of `protocol`.
pub fn history_meta(protocol: &str, runtime: &str, seed: u64) -> Result<snowline_core::HistoryMeta> {
    let entry = snowline_protocols::lookup(protocol)?;
    Ok(snowline_core::HistoryMeta {
        protocol: entry.name.to_string(),
        runtime: runtime.to_string(),
        seed: Some(seed),
        version_order: entry.orders_versions,
    })
}

pub fn write_history(
    path: &Path,
    history: &[snowline_core::HistoryEvent],
    meta: Option<&snowline_core::HistoryMeta>,
) -> Result<()> {
    let file = std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?;
    HistoryWriter::write_with_meta(meta, history, std::io::BufWriter::new(file))
        .with_context(|| format!("writing {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench_cmd::suffixed;
    use clap::Parser;
    use snowline_harness::{KeyDist, YcsbShape};

    #[derive(Parser)]
    struct Bench {
        #[command(flatten)]
        run: WorkloadArgs,
    }

    fn parse(args: &str) -> WorkloadArgs {
        Bench::try_parse_from(std::iter::once("bench").chain(args.split_whitespace())).unwrap().run
    }

    fn refused(args: &str) -> String {
        match parse(args).validate_bench() {
            Ok(()) => panic!("{args}: accepted"),
            Err(e) => format!("{e:#}"),
        }
    }

    const YCSB: &str = "--workload ycsb-t --dcs 1 --partitions 3";

    #[test]
    fn protocol_and_termination_lists_expand_into_one_run_each() {
        let a = parse(&format!("--protocol nmsi,rc,2pl --termination multicast,2pc {YCSB}"));
        a.validate_bench().unwrap();
        let runs: Vec<String> =
            a.per_protocol().unwrap().iter().map(|r| format!("{} {}", r.protocol, r.termination())).collect();
        assert_eq!(runs, ["nmsi multicast", "nmsi 2pc", "rc multicast", "rc 2pc", "2pl multicast"]);
        assert_eq!(a.per_protocol().unwrap()[1].file_label(), "nmsi-2pc");
        assert_eq!(a.per_protocol().unwrap()[4].file_label(), "2pl");
        // `sim` takes one of each.
        assert!(a.validate().unwrap_err().to_string().contains("`snowline bench` takes lists"));
        parse(&format!("--protocol nmsi {YCSB}")).validate().unwrap();
        // Every name is checked before any run.
        assert!(refused(&format!("--protocol nmsi,paxos {YCSB}")).contains("unknown protocol \"paxos\""));
        assert!(refused(&format!("--protocol nmsi,,rc {YCSB}")).contains("an empty name"));
        assert!(refused(&format!("--protocol nmsi,rc,nmsi {YCSB}")).contains("names nmsi twice"));
        assert!(refused(&format!("--protocol nmsi --termination 2pc,2pc {YCSB}")).contains("names 2pc twice"));
        // A protocol with its own termination, alone: the Jessy family's is refused, as before.
        assert!(refused(&format!("--protocol 2pl --termination 2pc {YCSB}")).contains("applies to the Jessy family"));
        assert!(Bench::try_parse_from(["bench", "--termination", "multicast,3pc"]).is_err());
        // Several runs: one history file each.
        let a = parse(&format!("--protocol nmsi,rc --clients 1,2 --history h.jsonl --check claimed {YCSB}"));
        a.validate_bench().unwrap();
        assert_eq!(suffixed(Path::new("out/h.jsonl"), "nmsi-multicast-c2"), Path::new("out/h-nmsi-multicast-c2.jsonl"));
        assert_eq!(suffixed(Path::new("h"), "rc-2pc-c1"), Path::new("h-rc-2pc-c1"));
    }

    #[test]
    fn ycsb_shape_flags_override_the_mix_preset() {
        let a = parse(&format!(
            "--protocol nmsi {YCSB} --mix b --ro-reads 2 --update-reads 1 --update-writes 1 --read-only-share 0.8 \
             --key-dist zipfian --keys 10000 --value-bytes 1000"
        ));
        a.validate_bench().unwrap();
        let w = a.workload();
        let shape = YcsbShape { ro_reads: 2, update_reads: 1, update_writes: 1, key_dist: KeyDist::Zipfian };
        assert_eq!(w.ycsb, shape);
        assert!((w.write_ratio - 0.2).abs() < 1e-12 && w.zipf == 0.99 && w.keys == 10_000 && w.value_bytes == 1000);
        // What the flags leave alone stays the preset's (mix b: 4 reads / 3 reads + 1 write, uniform).
        let w = parse(&format!("--protocol nmsi {YCSB} --mix b --update-writes 2")).workload();
        let shape = YcsbShape { ro_reads: 4, update_reads: 3, update_writes: 2, key_dist: KeyDist::Uniform };
        assert_eq!((w.ycsb, w.write_ratio), (shape, 0.2));
        // --write-ratio and --read-only-share may both be given when they agree; the spec carries the shape.
        let a = parse(&format!("--protocol nmsi {YCSB} --write-ratio 0.3 --read-only-share 0.7 --ro-reads 3"));
        a.validate_bench().unwrap();
        assert_eq!(a.spec(1, 4).workload.ycsb.ro_reads, 3);
    }

    #[test]
    fn ycsb_shape_flags_refuse_what_cannot_run() {
        let cases = [
            ("--update-reads 1 --update-writes 2", "--update-writes must be between 1 and --update-reads (1), not 2"),
            ("--update-writes 0", "--update-writes must be between 1"),
            ("--ro-reads 0", "--ro-reads) must be at least 1"),
            ("--update-reads 0 --update-writes 1", "--update-reads) must be at least 1"),
            ("--keys 3", "--keys (3) must be at least that"),
            ("--ro-reads 20 --keys 10", "--ro-reads 20"),
            ("--write-ratio 0.3 --read-only-share 0.8", "disagree"),
            ("--read-only-share 1.5", "from 0 to 1"),
            ("--mix b --zipf 0.9", "--zipf shapes Zipfian keys"),
            ("--key-dist uniform --zipf 0.9", "add --key-dist zipfian"),
        ];
        for (flags, error) in cases {
            let got = refused(&format!("--protocol nmsi {YCSB} {flags}"));
            assert!(got.contains(error), "{flags}: {got}");
        }
        assert!(Bench::try_parse_from(["bench", "--key-dist", "normal"]).is_err());
        parse(&format!("--protocol nmsi {YCSB} --key-dist zipfian --zipf 0.5 --mix c")).validate_bench().unwrap();
        let got = refused("--protocol cops --dcs 1 --ro-reads 2");
        assert!(got.contains("--ro-reads does not apply to the mixed workload"), "{got}");
    }
}
