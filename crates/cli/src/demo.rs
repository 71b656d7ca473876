//! `snowline demo`: the main job. For every implemented protocol: start a local two-datacenter cluster of
//! real server processes, show a write crossing datacenters, run a short mixed workload with a recorded
//! history, and print one table. Each protocol runs the workload it serves (`workload_for`), and the table counts
//! every failure and abort by cause.

use crate::client_cmd::start_local_cluster;
use anyhow::{Context, Result};
use clap::Args;
use snowline_core::{Protocol, Topology};
use snowline_harness::{MixedWorkload, RunReport, RunSpec, Summary};
use snowline_net::ClusterConfig;
use snowline_protocols::{Registered, with_protocol};
use std::fmt::Write as _;
use std::path::PathBuf;

#[derive(Args, Clone, Debug)]
pub struct DemoArgs {
    /// Seconds of workload per protocol.
    #[arg(long, default_value_t = 2.0)]
    pub seconds: f64,
    /// Closed-loop clients per datacenter.
    #[arg(long, default_value_t = 8)]
    pub clients: usize,
    /// Partitions per datacenter.
    #[arg(long, default_value_t = 2)]
    pub partitions: u16,
    /// Emulated one-way latency between the two datacenters, in milliseconds.
    #[arg(long, default_value_t = 5.0)]
    pub latency_ms: f64,
    /// Run only these protocols (comma-separated; default: every protocol).
    #[arg(long, value_delimiter = ',')]
    pub protocols: Vec<String>,
    /// Also write each protocol's recorded history (JSON lines, docs/HISTORY.md) into the report directory;
    /// by default histories are checked in memory and not kept (they run to tens of MB).
    #[arg(long)]
    pub keep_histories: bool,
    /// Where to write the report (table, JSON, chart).
    #[arg(long, default_value = "demo-report")]
    pub out: PathBuf,
}

struct Row {
    protocol: String,
    family: &'static str,
    /// The workload it ran (the operations it serves), in a word.
    workload: &'static str,
    summary: Summary,
    /// `None`: a one-datacenter protocol, no other datacenter to see the write.
    visible_after_ms: Option<f64>,
    verdict: String,
}

/// The workload a protocol serves, from what it offers (the registry): interactive transactions run the NMSI
/// paper's transactional YCSB (mix A); a protocol whose read-only transactions read one key runs GETs and
/// PUTs; every other one the mixed workload of ROTs and writes.
pub(crate) fn workload_for(entry: &Registered) -> (MixedWorkload, &'static str) {
    if entry.offers.interactive {
        (MixedWorkload { value_bytes: 16, ..MixedWorkload::ycsb_t(snowline_harness::YcsbMix::A) }, "ycsb-t A")
    } else if !entry.offers.multi_key_rots {
        (MixedWorkload::kv(), "get/put")
    } else {
        (MixedWorkload::default(), "rot/write")
    }
}

pub fn run(args: DemoArgs) -> Result<()> {
    anyhow::ensure!(args.partitions > 0, "--partitions must be at least 1");
    anyhow::ensure!(args.clients > 0, "--clients must be at least 1");
    let names: Vec<&'static str> = if args.protocols.is_empty() {
        snowline_protocols::names()
    } else {
        args.protocols.iter().map(|p| snowline_protocols::canonical_name(p)).collect::<Result<_, _>>()?
    };
    let topology = Topology::new(2, args.partitions);
    println!(
        "snowline demo: {} datacenters × {} partitions of real server processes, {} ms emulated one-way WAN latency, {} clients per datacenter, {:.1} s per protocol",
        topology.dcs, topology.partitions, args.latency_ms, args.clients, args.seconds
    );
    std::fs::create_dir_all(&args.out).with_context(|| format!("creating {}", args.out.display()))?;
    let mut rows = Vec::new();
    let mut written: Vec<PathBuf> = Vec::new();
    for name in names {
        let entry = snowline_protocols::lookup(name)?;
        let (workload, workload_name) = workload_for(entry);
        println!("\n== {name} ({workload_name})");
        // A protocol that runs in one datacenter only (cops-dw): a one-datacenter cluster.
        let topology = match with_protocol!(name, P => P::check_topology(&topology))? {
            Ok(()) => topology,
            Err(why) => {
                println!("(one datacenter: {why})");
                Topology::new(1, topology.partitions)
            }
        };
        let (cluster, config, dir) = start_local_cluster(name, topology, args.latency_ms, Default::default())?;
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
        let spec = RunSpec {
            clients_per_dc: args.clients,
            client_dcs: None,
            duration_ns: (args.seconds * 1e9) as u64,
            warmup_ns: 200_000_000,
            cooldown_ns: 0,
            workload,
            record_history: true,
            seed: 1,
            final_reads_after_ns: None,
            retry: Default::default(),
        };
        let result = rt.block_on(async { with_protocol!(name, P => demo_one::<P>(&config, &spec).await)? });
        cluster.stop();
        let (report, visible_after_ms) =
            result.with_context(|| format!("{name} (server logs in {})", dir.display()))?;
        let _ = std::fs::remove_dir_all(&dir); // a temporary cluster directory: logs are kept only on failure
        if let Some(ms) = visible_after_ms {
            println!("a write in dc0 was readable in dc1 after {ms:.1} ms");
        }
        println!("{}", report.summary);
        let history = report.history.as_deref().unwrap_or_default();
        let level = crate::check_cmd::resolve_level("claimed", name)?;
        let verdict = crate::check_cmd::check_recorded(history, level, name)?;
        print!("history check ({} events): ", history.len());
        crate::check_cmd::print_verdict(&verdict, false);
        if args.keep_histories {
            let path = args.out.join(format!("{name}.history.jsonl"));
            let meta = crate::sim_cmd::history_meta(name, "real", 1)?;
            crate::sim_cmd::write_history(&path, history, Some(&meta))?;
            written.push(path);
        }
        let verdict = format!("{level} {}", if verdict.ok { "ok" } else { "FAILED" });
        rows.push(Row {
            protocol: name.to_string(),
            family: entry.family,
            workload: workload_name,
            summary: report.summary,
            visible_after_ms,
            verdict,
        });
    }
    let table = table(&rows);
    println!("\n{table}");
    let table_path = args.out.join("table.txt");
    std::fs::write(&table_path, &table).with_context(|| format!("writing {}", table_path.display()))?;
    let json: Vec<_> = rows
        .iter()
        .map(|r| serde_json::json!({"protocol": r.protocol, "family": r.family, "workload": r.workload, "summary": r.summary, "visible_after_ms": r.visible_after_ms, "verdict": r.verdict}))
        .collect();
    let json_path = args.out.join("summary.json");
    std::fs::write(&json_path, serde_json::to_string_pretty(&json)?)
        .with_context(|| format!("writing {}", json_path.display()))?;
    let chart_path = args.out.join("latency-throughput.png");
    chart(&rows, args.clients, &chart_path)?;
    written.splice(0..0, [table_path, json_path, chart_path]);
    println!("report in {}:", args.out.display());
    let mut total = 0;
    for path in &written {
        let bytes = std::fs::metadata(path).map_or(0, |m| m.len());
        total += bytes;
        println!("  {:<40} {}", path.file_name().unwrap_or_default().to_string_lossy(), human_bytes(bytes));
    }
    println!(
        "  {} in all{}",
        human_bytes(total),
        if args.keep_histories { "" } else { " (histories were checked in memory; --keep-histories writes them)" }
    );
    Ok(())
}

fn human_bytes(bytes: u64) -> String {
    match bytes {
        b if b >= 1 << 20 => format!("{:.1} MiB", b as f64 / f64::from(1 << 20)),
        b if b >= 1 << 10 => format!("{:.1} KiB", b as f64 / f64::from(1 << 10)),
        b => format!("{b} B"),
    }
}

/// Show one write crossing datacenters, then run the workload.
async fn demo_one<P: Protocol>(config: &ClusterConfig, spec: &RunSpec) -> Result<(RunReport, Option<f64>)> {
    // One datacenter (cops-dw): nothing crosses datacenters; the table shows "-".
    let visible_after_ms = if config.dcs > 1 {
        Some(crate::client_cmd::visibility_ms::<P>(config, 1, "demo-key").await?[0])
    } else {
        None
    };
    let report = snowline_harness::net_run::run_net::<P>(config, spec).await?;
    Ok((report, visible_after_ms))
}

/// The read a row's latency columns show: read-only transactions (ROTs, or ycsb-t's read-only transactions),
/// else GETs.
fn read_kind(s: &Summary) -> Option<&snowline_harness::metrics::KindSummary> {
    ["rot", "ro-txn", "get"].iter().filter_map(|kind| s.kind(kind)).find(|k| k.ok > 0)
}

/// One panel per protocol family: throughput against read latency, p50 (lower point) to p95 (upper).
fn chart(rows: &[Row], clients: usize, path: &std::path::Path) -> Result<()> {
    use snowline_harness::charts::{Legend, LineChart, Series};
    let mut families: Vec<&str> = Vec::new();
    for r in rows {
        if !families.contains(&r.family) {
            families.push(r.family);
        }
    }
    let panels: Vec<LineChart> = families
        .iter()
        .map(|family| LineChart {
            title: format!("{family} ({clients} clients per DC)"),
            x_label: "throughput (ops/s)".into(),
            y_label: "read latency p50 to p95 (ms)".into(),
            series: rows
                .iter()
                .filter(|r| r.family == *family)
                .map(|r| {
                    let (p50, p95) = read_kind(&r.summary).map_or((0.0, 0.0), |k| (k.p50_us / 1e3, k.p95_us / 1e3));
                    let ops = r.summary.ops_per_s;
                    Series { name: format!("{} ({})", r.protocol, r.workload), points: vec![(ops, p50), (ops, p95)] }
                })
                .collect(),
            y_from_zero: true,
            reference: None,
            legend: Legend::Right,
        })
        .collect();
    LineChart::draw_panels_png(&panels, 2, path, 1400, 900)
}

/// The summary table: every protocol's throughput and read latency, and every failure and abort it had, with
/// the causes below (a protocol that refused operations shows them as failed, never as 0%).
fn table(rows: &[Row]) -> String {
    let mut t = String::new();
    let _ = writeln!(
        t,
        "{:<12} {:<9} {:>8} {:>8} {:>8} {:>7} {:>6} {:>7} {:>6} {:>6}  history",
        "protocol", "workload", "ops/s", "read p50", "read p95", "failed", "fail%", "aborts", "abort%", "dc1 ms"
    );
    for r in rows {
        let s = &r.summary;
        let read = read_kind(s);
        let us = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{:.0}µs", v));
        let ok: u64 = s.per_kind.iter().map(|k| k.ok).sum();
        let failed: u64 = s.per_kind.iter().map(|k| k.fail + k.info).sum();
        let aborts: u64 = s.aborts.values().sum();
        let _ = writeln!(
            t,
            "{:<12} {:<9} {:>8.0} {:>8} {:>8} {:>7} {:>6} {:>7} {:>6} {:>6}  {}",
            r.protocol,
            r.workload,
            s.ops_per_s,
            us(read.map(|k| k.p50_us)),
            us(read.map(|k| k.p95_us)),
            failed,
            percent(failed, ok + failed),
            aborts,
            if aborts == 0 && s.committed_txns_per_s == 0.0 {
                "-".into()
            } else {
                format!("{:.2}", s.abort_rate * 100.0)
            },
            r.visible_after_ms.map_or("-".to_string(), |v| format!("{v:.1}")),
            r.verdict
        );
    }
    let _ = writeln!(
        t,
        "failed: operations that ended in an error (refused, aborted for good, or outcome unknown), of all that \
         ended; aborts: transaction attempts that aborted (most were retried), abort% of attempts"
    );
    let causes: Vec<String> = rows
        .iter()
        .flat_map(|r| {
            let failures = r
                .summary
                .failures
                .iter()
                .map(move |f| format!("  {}: {} {} × {}", r.protocol, f.kind, f.count, f.cause));
            let aborts = r
                .summary
                .aborts
                .iter()
                .map(move |(cause, n)| format!("  {}: {n} aborted attempts ({cause})", r.protocol));
            failures.chain(aborts)
        })
        .collect();
    if causes.is_empty() {
        let _ = writeln!(t, "no operation failed and no transaction aborted");
    } else {
        let _ = writeln!(t, "failures and aborts by cause:");
        for line in causes {
            let _ = writeln!(t, "{line}");
        }
    }
    t
}

fn percent(part: u64, whole: u64) -> String {
    if whole == 0 { "-".into() } else { format!("{:.2}", part as f64 * 100.0 / whole as f64) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use snowline_core::{AbortCause, OpError, Reply, Request};
    use snowline_harness::Metrics;

    /// A run in which raft-kv refused every ROT, tpc-kv's transactions aborted (some for good), and cv had
    /// nothing go wrong: the table shows each truthfully, with the causes.
    #[test]
    fn the_table_counts_refusals_and_aborts_by_cause() {
        let get = Request::Rot { keys: vec!["k".into()] };
        let rot = Request::Rot { keys: vec!["a".into(), "b".into()] };
        let mut refused = Metrics::default();
        for _ in 0..10 {
            refused.record(&get, &Ok(Reply::default()), 1_000);
        }
        for i in 0..30 {
            let e = OpError::Rejected(format!("raft-kv reads one key per read-only transaction, not {}", 2 + i % 3));
            refused.record(&rot, &Err(e), 1_000);
        }
        let mut aborting = Metrics::default();
        for _ in 0..6 {
            aborting.record_abort(AbortCause::Conflict);
            aborting.record_txn("rw-txn", &Ok(()), 1_000, 2);
        }
        aborting.record_txn("rw-txn", &Err(OpError::aborted(AbortCause::Conflict, "gave up")), 1_000, 3);
        let mut fine = Metrics::default();
        fine.record(&get, &Ok(Reply::default()), 1_000);
        let row = |protocol: &str, m: &Metrics| Row {
            protocol: protocol.into(),
            family: "test",
            workload: "rot/write",
            summary: m.summary(1.0),
            visible_after_ms: None,
            verdict: "ok".into(),
        };
        let t = table(&[row("raft-kv", &refused), row("tpc-kv", &aborting), row("cv", &fine)]);
        let line = |p: &str| t.lines().find(|l| l.starts_with(p)).unwrap().split_whitespace().collect::<Vec<_>>();
        // protocol workload ops/s p50 p95 failed fail% aborts abort% ...
        assert_eq!(&line("raft-kv")[5..7], &["30", "75.00"], "{t}");
        assert_eq!(&line("tpc-kv")[5..9], &["1", "14.29", "6", "50.00"], "{t}");
        assert_eq!(&line("cv")[5..9], &["0", "0.00", "0", "-"], "{t}");
        // The refusals are one cause (the numbers in the message vary), named.
        assert!(
            t.contains("raft-kv: rot 30 × rejected: raft-kv reads one key per read-only transaction, not N"),
            "{t}"
        );
        assert!(t.contains("tpc-kv: rw-txn 1 × aborted (conflict): gave up"), "{t}");
        assert!(t.contains("tpc-kv: 6 aborted attempts (conflict)"), "{t}");
    }
}
