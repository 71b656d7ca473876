//! `reproduce tomsic`: Tomsic §5.3.2, Fig. 4 — its set-up, charts and headline beside the paper's.

use super::{Experiment, Variant, runs_of};
use crate::charts::{LineChart, Series};
use crate::report::RunRecord;
use crate::workload::MixedWorkload;
use snowline_core::Topology;
use std::fmt::Write as _;

fn ordinal(n: u64) -> String {
    let suffix = match (n % 10, n % 100) {
        (1, 11) | (2, 12) | (3, 13) => "th",
        (1, _) => "st",
        (2, _) => "nd",
        (3, _) => "rd",
        _ => "th",
    };
    if n == 1 { "the newest".into() } else { format!("{n}{suffix} newest") }
}

/// The set-up: `(variants, clients per datacenter swept, seconds of run, warm-up, cool-down)`, with its notes.
pub(super) fn setup(sim: bool, quick: bool, notes: &mut Vec<String>) -> (Vec<Variant>, Vec<usize>, [f64; 3]) {
    let (partitions, keys) = if sim { (16, 1_600_000) } else { (2, 100_000) };
    let updates: &[usize] = &[2, 10, 100];
    let variants = updates
        .iter()
        .map(|&u| Variant {
            label: format!("{u} updates"),
            x: u as f64,
            workload: MixedWorkload { keys, ..MixedWorkload::tomsic_single(u) },
            topology: Topology::new(2, partitions),
            // Two logical sites in one cluster: 0.15 ms between any two servers.
            inter_dc_ms: vec![vec![0.15]],
            intra_dc_ms: 0.15,
            clients: None,
            figure: None,
            ramp: None,
            protocols: None,
        })
        .collect();
    notes.push(format!(
        "2 DCs × {partitions} partitions, {keys} keys chosen 80/20, ROTs of 100 parallel reads, updates of \
         2/10/100 keys read (the paper: 2 logical DCs of 16 machines and 512 partitions in one cluster, \
         1.6M keys); tomsic-multi is not part of this reproduction yet (run it with --workload tomsic-multi)"
    ));
    let clients = match (sim, quick) {
        (true, true) => vec![8, 40, 160],
        (true, false) => vec![8, 32, 80, 160, 240],
        (false, true) => vec![1, 4, 16],
        (false, false) => vec![1, 2, 4, 8, 16, 32],
    };
    let d = if sim {
        if quick { (0.3, 0.1, 0.02) } else { (1.5, 0.5, 0.1) }
    } else if quick {
        (2.0, 0.5, 0.25)
    } else {
        (6.0, 1.0, 0.5)
    };
    (variants, clients, [d.0, d.1, d.2])
}

impl Experiment {
    /// The charts, named, drawn like Fig. 4a–l.
    pub(super) fn tomsic_charts(&self, records: &[RunRecord]) -> Vec<(String, LineChart)> {
        let mut charts = Vec::new();
        let by = |variant: &str, protocol: &str| runs_of(records, variant, protocol);
        let runtime = self.runtime.name();
        for v in &self.variants {
            let tag = v.label.replace(' ', "-");
            let per_protocol = |f: &dyn Fn(&RunRecord) -> f64| -> Vec<Series> {
                self.per_protocol(records, &v.label, |r| (r.clients_total as f64, f(r)))
            };
            charts.push((
                format!("freshness-{tag}.png"),
                LineChart {
                    title: format!(
                        "Fresh reads, ROTs of 100 keys, updates of {} ({runtime}; Tomsic Fig. 4d-f)",
                        v.workload.update_keys
                    ),
                    x_label: "client threads".into(),
                    y_label: "reads returning the newest version (%)".into(),
                    series: per_protocol(&|r| r.summary.fresh_read_share * 100.0),
                    y_from_zero: false,
                    reference: None,
                    legend: crate::charts::Legend::LowerLeft,
                },
            ));
            charts.push((
                format!("multi-version-overhead-{tag}.png"),
                LineChart {
                    title: format!("Multi-version overhead, {} ({runtime}; Tomsic Fig. 4j-l)", v.label),
                    x_label: "client threads".into(),
                    y_label: "mean (versions skipped + 1)".into(),
                    series: per_protocol(&|r| r.summary.multi_version_overhead),
                    y_from_zero: false,
                    reference: Some((1.0, "single-version (CV)".into())),
                    legend: crate::charts::Legend::UpperLeft,
                },
            ));
            charts.push((
                format!("rot-latency-{tag}.png"),
                LineChart {
                    title: format!("Mean ROT latency, {} ({runtime}; Tomsic Fig. 4a-c)", v.label),
                    x_label: "client threads".into(),
                    y_label: "ROT latency (ms)".into(),
                    series: per_protocol(&|r| r.rot_latency_us()[3] / 1e3),
                    y_from_zero: true,
                    reference: None,
                    legend: crate::charts::Legend::UpperLeft,
                },
            ));
            let top = self.clients.iter().max().copied().unwrap_or(0);
            let cdf = self
                .protocols
                .iter()
                .filter_map(|p| {
                    let r = by(&v.label, p).into_iter().find(|r| r.clients_per_dc == top)?;
                    let points = r.summary.staleness_cdf.iter().map(|(s, f)| (*s as f64 + 1.0, f * 100.0)).collect();
                    Some(Series { name: p.clone(), points })
                })
                .collect();
            charts.push((
                format!("staleness-cdf-{tag}.png"),
                LineChart {
                    title: format!(
                        "Staleness CDF, {}, {} clients ({runtime}; Tomsic Fig. 4g-i)",
                        v.label,
                        top * usize::from(v.topology.dcs)
                    ),
                    x_label: "version read (1 = newest)".into(),
                    y_label: "reads (%, cumulative)".into(),
                    series: cdf,
                    y_from_zero: false,
                    reference: None,
                    legend: crate::charts::Legend::UpperLeft,
                },
            ));
        }
        charts
    }

    /// The headline: stale reads and multi-version overhead beside the paper's.
    pub(super) fn tomsic_headline(&self, records: &[RunRecord]) -> String {
        let mut out = String::new();
        let by = |variant: &str, protocol: &str| runs_of(records, variant, protocol);
        let paper_stale = |p: &str, u: usize| -> &'static str {
            match (p, u) {
                ("op", _) => "≤ 0.2%",
                ("av", 2) => "3%",
                ("av", 10) => "25%",
                ("av", 100) => "49%",
                ("cure", 2) => "2%",
                ("cure", 10) => "22%",
                ("cure", 100) => "41%",
                ("cv", _) => "0% (always newest)",
                _ => "-",
            }
        };
        let paper_mvo = |p: &str, u: usize| -> &'static str {
            match (p, u) {
                ("op", _) => "< 1.002×",
                ("av", 2) => "1.03×",
                ("av", 10) => "1.35×",
                ("av", 100) => "1.87×",
                ("cure", 2) => "1.02×",
                ("cure", 10) => "1.31×",
                ("cure", 100) => "1.7×",
                ("cv", _) => "1×",
                _ => "-",
            }
        };
        let _ = writeln!(
            out,
            "| updates per txn (update share) | protocol | worst stale-read share (paper) | worst multi-version overhead (paper) | oldest version read | peak key ops/s |\n| --- | --- | --- | --- | --- | --- |"
        );
        for v in &self.variants {
            let u = v.workload.update_keys;
            for p in &self.protocols {
                let rs = by(&v.label, p);
                if rs.is_empty() {
                    continue;
                }
                let stale = rs.iter().map(|r| 1.0 - r.summary.fresh_read_share).fold(0.0, f64::max);
                let mvo = rs.iter().map(|r| r.summary.multi_version_overhead).fold(0.0, f64::max);
                let oldest = rs.iter().map(|r| r.summary.max_versions_skipped).max().unwrap_or(0) + 1;
                let peak = rs.iter().map(|r| r.summary.key_ops_per_s).fold(0.0, f64::max);
                let share = u as f64 / (u as f64 + v.workload.rot_keys as f64) * 100.0;
                let _ = writeln!(
                    out,
                    "| {u} ({share:.0}%) | {p} | {:.2}% ({}) | {mvo:.3}× ({}) | {} | {peak:.0} |",
                    stale * 100.0,
                    paper_stale(p, u),
                    paper_mvo(p, u),
                    ordinal(oldest)
                );
            }
        }
        out
    }
}
