//! `reproduce snow-rococo`: SNOW §6.2, Fig. 7 — Rococo-SNOW, Rococo, 2PL and OCC on Rococo's district-sharded
//! TPC-C as the concurrent requests per server grow: New-Order throughput (7a), Stock-Level median latency
//! (7b) and Stock-Level commit rate (7c), with the 12-condition audit of every run.

use super::{Experiment, Variant, runs_of};
use crate::charts::{LineChart, Series};
use crate::report::{RunRecord, fmt_us};
use crate::tpcc::{Scale, Setup, TpccSpec};
use crate::workload::{MixedWorkload, Pattern};
use snowline_core::Topology;
use snowline_protocols::strong::rococo::MAX_ROT_ROUNDS;
use std::fmt::Write as _;

/// The paper's four protocols, subject first.
pub const PROTOCOLS: [&str; 4] = ["rococo-snow", "rococo", "2pl", "occ"];

const NEW_ORDER: &str = "tpcc-new-order";
const STOCK_LEVEL: &str = "tpcc-stock-level";

/// The set-up: `(variants, concurrent requests per server swept, seconds of run, warm-up, cool-down)`,
/// with its notes.
pub(super) fn setup(sim: bool, quick: bool, notes: &mut Vec<String>) -> (Vec<Variant>, Vec<usize>, [f64; 3]) {
    // The paper: 8 servers, one Rococo process each.
    let servers: u16 = if sim { 8 } else { 2 };
    let topology = Topology::new(1, servers);
    let variant = Variant {
        label: "tpcc".into(),
        x: f64::from(servers),
        workload: MixedWorkload {
            pattern: Pattern::Tpcc,
            tpcc: TpccSpec { setup: Setup::Snow, scale: Scale::Items, ..Default::default() },
            ..Default::default()
        },
        topology,
        inter_dc_ms: vec![vec![0.0]],
        intra_dc_ms: 0.1,
        clients: None,
        figure: None,
        ramp: None,
        protocols: None,
    };
    let per_server: Vec<usize> = match (sim, quick) {
        (true, true) => vec![1, 10, 30, 60],
        (true, false) => vec![1, 5, 10, 20, 30, 45, 60, 80],
        (false, true) => vec![1, 10, 30],
        (false, false) => vec![1, 5, 10, 20, 30, 45],
    };
    notes.push(format!(
        "TPC-C as --workload tpcc --tpcc-setup snow --tpcc-scale items: Rococo's district-sharded set-up, one \
         warehouse of 10 districts per server, client i pinned to district i mod {} (more clients than districts \
         contend on a district), the 44/44/4/4/4 mix, no New-Order rollback; 1 DC × {servers} servers (the paper: 8 \
         servers, 16 client machines); TPC-C's 100,000 items and stock rows but 30 customers and orders per \
         district (the paper: the full population) so that every run loads and audits in seconds",
        10 * servers
    ));
    notes.push(format!(
        "load = concurrent requests (closed-loop clients) per server, swept over {per_server:?} (the paper goes \
         from a few to about 100; the sweep stops where 2 shared cores still finish it)"
    ));
    notes.push(format!(
        "Stock-Level commit rate = committed calls / attempts. Rococo runs a read-only procedure until two \
         consecutive executions agree: every execution after the first is an attempt, committing when it agrees \
         with the one before (the paper's \"abort\" = another round); executions as the protocol reports them \
         per call, and a call given up after {MAX_ROT_ROUNDS} rounds (harness-retried) counts as many failed \
         attempts as executions fit in those rounds (at the committed calls' rounds per execution), less one. \
         Rococo-SNOW: each execution is an attempt (one, unless a stale readers record restarts it). 2PL and OCC: \
         the harness's attempts (aborted ones are retried)"
    ));
    let d = match (sim, quick) {
        (true, true) => [0.3, 0.1, 0.02],
        (true, false) => [1.0, 0.25, 0.1],
        (false, true) => [2.0, 0.5, 0.25],
        (false, false) => [5.0, 1.0, 0.5],
    };
    (vec![variant], per_server, d)
}

/// Committed New-Order calls per second.
pub fn new_order_tps(r: &RunRecord) -> f64 {
    r.summary.kind(NEW_ORDER).map_or(0.0, |k| k.ops_per_s)
}

/// Median Stock-Level latency (first attempt to commit), µs; `None` if none committed.
pub fn stock_level_p50_us(r: &RunRecord) -> Option<f64> {
    r.summary.kind(STOCK_LEVEL).filter(|k| k.ok > 0).map(|k| k.p50_us)
}

/// Stock-Level's attempts and commits (module docs of [`setup`]'s note): `(committed, attempts)`.
pub fn stock_level_attempts(r: &RunRecord) -> Option<(f64, f64)> {
    let k = r.summary.kind(STOCK_LEVEL)?;
    let (ok, aborted) = (k.ok as f64, k.aborted as f64);
    let executions = k.executions_mean;
    // Rounds per execution (the procedure's waves), as the committed calls ran them.
    let waves = if executions > 0.0 { (k.rounds_mean / executions).max(1.0) } else { 1.0 };
    let per_give_up = (f64::from(MAX_ROT_ROUNDS) / waves).floor() - 1.0;
    let attempts = match r.protocol.as_str() {
        "rococo" => ok * (executions - 1.0).max(1.0) + aborted * per_give_up,
        "rococo-snow" => ok * executions.max(1.0) + aborted,
        _ => ok + aborted,
    };
    (attempts > 0.0).then_some((ok, attempts))
}

/// Stock-Level commit rate in (0, 1].
pub fn stock_level_commit_rate(r: &RunRecord) -> Option<f64> {
    stock_level_attempts(r).map(|(ok, attempts)| ok / attempts)
}

/// Concurrent requests per server of a run.
pub fn per_server(r: &RunRecord) -> f64 {
    r.clients_total as f64 / f64::from(r.partitions.max(1))
}

fn audit_cell(r: &RunRecord) -> String {
    match &r.tpcc {
        None => "not run".into(),
        Some(a) if a.ok() => "12/12 ok".into(),
        Some(a) => format!("VIOLATED {:?}", a.violated()),
    }
}

fn ratio(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => Some(a / b),
        _ => None,
    }
}

impl Experiment {
    fn sweep<'a>(&self, records: &'a [RunRecord], protocol: &str) -> Vec<&'a RunRecord> {
        self.variants.first().map_or_else(Vec::new, |v| runs_of(records, &v.label, protocol))
    }

    /// The run of `protocol` at `per_server` concurrent requests per server.
    fn at<'a>(&self, records: &'a [RunRecord], protocol: &str, load: f64) -> Option<&'a RunRecord> {
        self.sweep(records, protocol).into_iter().find(|r| (per_server(r) - load).abs() < 1e-9)
    }

    /// The concurrent requests per server the sweep ran, ascending.
    fn loads(&self) -> Vec<f64> {
        let servers = self.variants.first().map_or(1.0, |v| f64::from(v.topology.partitions));
        self.clients.iter().map(|c| *c as f64 / servers).collect()
    }

    /// One line per protocol over the load: `f` of each run that has it.
    fn per_load(&self, records: &[RunRecord], f: &dyn Fn(&RunRecord) -> Option<f64>) -> Vec<Series> {
        self.protocols
            .iter()
            .map(|p| Series {
                name: p.clone(),
                points: self.sweep(records, p).into_iter().filter_map(|r| Some((per_server(r), f(r)?))).collect(),
            })
            .collect()
    }

    /// Fig. 7a, 7b and 7c, named.
    pub(super) fn snow_rococo_charts(&self, records: &[RunRecord]) -> Vec<(String, LineChart)> {
        let runtime = self.runtime.name();
        let chart = |title: &str, y: &str, series: Vec<Series>| LineChart {
            title: format!("{title} ({runtime}; SNOW Fig. 7)"),
            x_label: "concurrent requests per server".into(),
            y_label: y.into(),
            series,
            y_from_zero: true,
            reference: None,
            legend: crate::charts::Legend::UpperLeft,
        };
        vec![
            (
                "fig7a-new-order-throughput.png".into(),
                chart(
                    "TPC-C New-Order throughput (7a)",
                    "New-Order commits/s",
                    self.per_load(records, &|r| Some(new_order_tps(r))),
                ),
            ),
            (
                "fig7b-stock-level-median-latency.png".into(),
                chart(
                    "Stock-Level median latency (7b)",
                    "median latency (ms)",
                    self.per_load(records, &|r| stock_level_p50_us(r).map(|us| us / 1e3)),
                ),
            ),
            (
                "fig7c-stock-level-commit-rate.png".into(),
                LineChart {
                    legend: crate::charts::Legend::LowerLeft,
                    ..chart(
                        "Stock-Level commit rate (7c)",
                        "commit rate (%)",
                        self.per_load(records, &|r| stock_level_commit_rate(r).map(|c| c * 100.0)),
                    )
                },
            ),
        ]
    }

    /// The table of a TPC-C sweep: one line per run.
    pub(super) fn snow_rococo_table(&self, records: &[RunRecord]) -> String {
        let mut t = String::new();
        let _ = writeln!(
            t,
            "{:<12} {:>8} {:>8} {:>12} {:>10} {:>10} {:>12} {:>10} {:>9}",
            "protocol", "req/srv", "clients", "New-Order/s", "txn/s", "SL p50", "SL commit %", "SL execs", "audit"
        );
        for r in records {
            let execs = r.summary.kind(STOCK_LEVEL).map(|k| k.executions_mean);
            let _ = writeln!(
                t,
                "{:<12} {:>8.0} {:>8} {:>12.0} {:>10.0} {:>10} {:>12} {:>10} {:>9}",
                r.protocol,
                per_server(r),
                r.clients_total,
                new_order_tps(r),
                r.summary.committed_txns_per_s,
                stock_level_p50_us(r).map_or("-".into(), fmt_us),
                stock_level_commit_rate(r).map_or("-".into(), |c| format!("{:.1}", c * 100.0)),
                match (r.protocol.as_str(), execs) {
                    ("rococo" | "rococo-snow", Some(e)) => format!("{e:.2}"),
                    _ => "-".into(),
                },
                audit_cell(r)
            );
        }
        t.push_str(
            "(SL = Stock-Level: median latency from its first attempt to its commit, commit rate = commits / \
             attempts, executions of the procedure per committed call for the Rococo family; audit = TPC-C's 12 \
             consistency conditions on the final state; - : no Stock-Level finished in the measured window)\n",
        );
        t
    }

    /// One point's line while the sweep runs.
    pub(super) fn snow_rococo_line(&self, r: &RunRecord) -> String {
        format!(
            "{:<12} {:>4.0} req/server: New-Order {:>7.0}/s, Stock-Level p50 {} commit rate {}, audit {} ({:.1} s)",
            r.protocol,
            per_server(r),
            new_order_tps(r),
            stock_level_p50_us(r).map_or("-".into(), fmt_us),
            stock_level_commit_rate(r).map_or("-".into(), |c| format!("{:.1}%", c * 100.0)),
            audit_cell(r),
            r.wall_s
        )
    }

    /// The paper's statements beside snowline's figures, as Markdown.
    pub(super) fn snow_rococo_headline(&self, records: &[RunRecord]) -> String {
        let mut out = String::new();
        let (snow, rococo) = ("rococo-snow", "rococo");
        let loads = self.loads();
        let (Some(&low), Some(&high)) = (loads.first(), loads.last()) else { return out };
        let mid = loads.iter().copied().min_by(|a, b| (a - 30.0).abs().total_cmp(&(b - 30.0).abs())).unwrap_or(low);
        let nos = |p: &str, load: f64| self.at(records, p, load).map(new_order_tps);
        let tput = |load: f64| match ratio(nos(snow, load), nos(rococo, load)) {
            Some(x) => format!("{x:.2}× at {load:.0} req/server"),
            None => "-".into(),
        };
        let per_load = |f: &dyn Fn(f64) -> Option<String>| -> String {
            let cells: Vec<String> = loads.iter().filter_map(|l| Some(format!("{l:.0}: {}", f(*l)?))).collect();
            if cells.is_empty() { "-".into() } else { cells.join(", ") }
        };
        let _ = writeln!(out, "| the paper's statement (SNOW §6.2, Fig. 7) | snowline |\n| --- | --- |");
        let _ = writeln!(
            out,
            "| Rococo-SNOW has a lower peak New-Order throughput than Rococo at low contention (7a) | Rococo-SNOW / Rococo New-Order throughput {} |",
            tput(low)
        );
        let _ = writeln!(
            out,
            "| they are about equal near 30 requests per server, then Rococo-SNOW exceeds Rococo (7a) | {} |",
            tput(mid)
        );
        let _ =
            writeln!(out, "| under high contention Rococo-SNOW's throughput is much higher (7a) | {} |", tput(high));
        let _ = writeln!(
            out,
            "| Rococo-SNOW's Stock-Level latency is much lower than Rococo's (7b) | Rococo / Rococo-SNOW median, per req/server: {} |",
            per_load(&|l| {
                let s = self.at(records, snow, l).and_then(stock_level_p50_us);
                let r = self.at(records, rococo, l).and_then(stock_level_p50_us);
                Some(format!("{:.2}×", ratio(r, s)?))
            })
        );
        let rate =
            |p: &str| per_load(&|l| Some(format!("{:.1}%", stock_level_commit_rate(self.at(records, p, l)?)? * 100.0)));
        let _ = writeln!(
            out,
            "| Rococo's Stock-Level commit rate drops as contention grows; Rococo-SNOW's read-only transactions always succeed after one blocking round (7c) | Rococo: {}; Rococo-SNOW: {} |",
            rate(rococo),
            rate(snow)
        );
        let peaks: Vec<String> = self
            .protocols
            .iter()
            .filter_map(|p| {
                let best =
                    self.sweep(records, p).into_iter().max_by(|a, b| new_order_tps(a).total_cmp(&new_order_tps(b)))?;
                Some(format!("{p} {:.0}/s at {:.0}", new_order_tps(best), per_server(best)))
            })
            .collect();
        let _ = writeln!(
            out,
            "| Rococo, 2PL and OCC behave as in Rococo's evaluation (Rococo ahead of 2PL and OCC as contention grows) | peak New-Order/s at req/server: {}; at {high:.0} req/server: {} |",
            peaks.join(", "),
            self.protocols
                .iter()
                .filter_map(|p| Some(format!("{p} {:.0}", nos(p, high)?)))
                .collect::<Vec<_>>()
                .join(", ")
        );
        let audited: Vec<&RunRecord> = records.iter().filter(|r| r.tpcc.is_some()).collect();
        let failed: Vec<String> = audited
            .iter()
            .filter(|r| r.tpcc.as_ref().is_some_and(|a| !a.ok()))
            .map(|r| format!("{} at {:.0}", r.protocol, per_server(r)))
            .collect();
        let _ = writeln!(
            out,
            "| (TPC-C's 12 consistency conditions, §3.3.2) | {} of {} runs audited; {} |",
            audited.len(),
            records.len(),
            if failed.is_empty() {
                "every audited run holds all 12".to_string()
            } else {
                format!("violated in {}", failed.join(", "))
            }
        );
        out
    }
}
