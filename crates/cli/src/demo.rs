//! `snowline demo`: the main job. For every implemented protocol: start a local two-datacenter cluster of
//! real server processes, show a write crossing datacenters, run a short mixed workload with a recorded
//! history, and print one table.

use crate::client_cmd::start_local_cluster;
use anyhow::{Context, Result};
use clap::Args;
use snowline_core::{Protocol, Topology};
use snowline_harness::{MixedWorkload, RunReport, RunSpec};
use snowline_net::ClusterConfig;
use snowline_protocols::with_protocol;
use std::fmt::Write as _;
use std::path::PathBuf;

#[derive(Args, Clone, Debug)]
pub struct DemoArgs {
    /// Seconds of workload per protocol.
    #[arg(long, default_value_t = 3.0)]
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
    /// Where to write the report (table and JSON).
    #[arg(long, default_value = "demo-report")]
    pub out: PathBuf,
}

struct Row {
    protocol: String,
    report: RunReport,
    /// `None`: a one-datacenter protocol, no other datacenter to see the write.
    visible_after_ms: Option<f64>,
    verdict: String,
}

pub fn run(args: DemoArgs) -> Result<()> {
    anyhow::ensure!(args.partitions > 0, "--partitions must be at least 1");
    anyhow::ensure!(args.clients > 0, "--clients must be at least 1");
    let topology = Topology::new(2, args.partitions);
    println!(
        "snowline demo: {} datacenters × {} partitions of real server processes, {} ms emulated one-way WAN latency, {} clients per datacenter, {:.1} s per protocol",
        topology.dcs, topology.partitions, args.latency_ms, args.clients, args.seconds
    );
    let mut rows = Vec::new();
    for name in snowline_protocols::names() {
        println!("\n== {name}");
        // A protocol that runs in one datacenter only (cops-dw) gets one.
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
            // Protocols with interactive transactions run the NMSI paper's transactional YCSB (mix A).
            workload: if snowline_protocols::lookup(name)?.offers.interactive {
                MixedWorkload { value_bytes: 16, ..MixedWorkload::ycsb_t(snowline_harness::YcsbMix::A) }
            } else {
                MixedWorkload::default()
            },
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
            println!("a PUT in dc0 was readable in dc1 after {ms:.1} ms");
        }
        println!("{}", report.summary);
        let level = crate::check_cmd::resolve_level("claimed", name)?;
        let verdict = crate::check_cmd::check_recorded(report.history.as_deref().unwrap_or_default(), level, name)?;
        print!("history check: ");
        crate::check_cmd::print_verdict(&verdict, false);
        let verdict = format!("{level} {}", if verdict.ok { "ok" } else { "FAILED" });
        rows.push(Row { protocol: name.to_string(), report, visible_after_ms, verdict });
    }
    let table = table(&rows);
    println!("\n{table}");
    std::fs::create_dir_all(&args.out).with_context(|| format!("creating {}", args.out.display()))?;
    std::fs::write(args.out.join("table.txt"), &table)?;
    let json: Vec<_> = rows
        .iter()
        .map(|r| serde_json::json!({"protocol": r.protocol, "summary": r.report.summary, "visible_after_ms": r.visible_after_ms, "verdict": r.verdict}))
        .collect();
    std::fs::write(args.out.join("summary.json"), serde_json::to_string_pretty(&json)?)?;
    for r in &rows {
        if let Some(h) = &r.report.history {
            let meta = crate::sim_cmd::history_meta(&r.protocol, "real", 1)?;
            crate::sim_cmd::write_history(&args.out.join(format!("{}.history.jsonl", r.protocol)), h, Some(&meta))?;
        }
    }
    let chart = snowline_harness::charts::LineChart {
        title: format!("snowline demo: ROT latency and throughput, real processes ({} clients per DC)", args.clients),
        x_label: "throughput (ops/s)".into(),
        y_label: "ROT latency, p50 (lower point) to p95 (upper point) (ms)".into(),
        series: rows
            .iter()
            .map(|r| {
                let s = &r.report.summary;
                let rot = s.kind("rot").or(s.kind("ro-txn")).map_or((0.0, 0.0), |k| (k.p50_us / 1e3, k.p95_us / 1e3));
                snowline_harness::charts::Series {
                    name: format!("{} (fresh {:.1}%)", r.protocol, s.fresh_read_share * 100.0),
                    points: vec![(s.ops_per_s, rot.0), (s.ops_per_s, rot.1)],
                }
            })
            .collect(),
        y_from_zero: true,
        reference: None,
        legend_lower: false,
    };
    chart.draw_png(&args.out.join("rot-latency.png"), 900, 600)?;
    println!("report (table.txt, summary.json, rot-latency.png, histories) written to {}", args.out.display());
    Ok(())
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

fn table(rows: &[Row]) -> String {
    let mut t = String::new();
    let _ = writeln!(
        t,
        "{:<12} {:>11} {:>11} {:>10} {:>8} {:>10} {:>8} {:>8} {:>11} {:>16}",
        "protocol",
        "ROT p50 µs",
        "ROT p95 µs",
        "ops/s",
        "fresh %",
        "max rounds",
        "blocked",
        "abort %",
        "dc1 vis ms",
        "history"
    );
    for r in rows {
        let s = &r.report.summary;
        // Protocols with interactive transactions run ycsb-t: their read-only transactions stand in for ROTs;
        // the single-key protocols' reads are GETs.
        let rot = ["rot", "ro-txn", "get"].iter().filter_map(|kind| s.kind(kind)).find(|k| k.ok > 0);
        let us = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.1}"));
        let _ = writeln!(
            t,
            "{:<12} {:>11} {:>11} {:>10.0} {:>8.2} {:>10} {:>8} {:>8.2} {:>11} {:>16}",
            r.protocol,
            us(rot.map(|k| k.p50_us)),
            us(rot.map(|k| k.p95_us)),
            s.ops_per_s,
            s.fresh_read_share * 100.0,
            s.max_rot_rounds,
            s.blocked_ops,
            s.abort_rate * 100.0,
            us(r.visible_after_ms),
            r.verdict
        );
    }
    let _ = writeln!(
        t,
        "(causal protocols: the mixed workload; protocols with interactive transactions: ycsb-t mix A, whose \
         read-only transactions fill the ROT columns; single-key protocols: their GETs)"
    );
    t
}
