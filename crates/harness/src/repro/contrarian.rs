//! `reproduce contrarian`: Contrarian §5.2, Fig. 4a–c — its set-up, charts and headline beside the paper's.

use super::{Crossover, Experiment, Variant, crossover, peak_throughput, runs_of};
use crate::charts::{LineChart, Series};
use crate::report::{RunRecord, fmt_us};
use crate::workload::MixedWorkload;
use snowline_core::Topology;
use std::fmt::Write as _;

/// Contrarian's three AWS regions (Virginia, Oregon, Ireland): one-way latencies, ms (half the typical RTTs).
fn aws_three_dcs() -> Vec<Vec<f64>> {
    vec![vec![0.0, 35.0, 38.0], vec![35.0, 0.0, 65.0], vec![38.0, 65.0, 0.0]]
}

/// The set-up: `(variants, clients per datacenter swept, seconds of run, warm-up, cool-down)`, with its notes.
pub(super) fn setup(sim: bool, quick: bool, notes: &mut Vec<String>) -> (Vec<Variant>, Vec<usize>, [f64; 3]) {
    let (partitions, keys_per_partition) = match (sim, quick) {
        (true, true) => (45, 10_000),
        (true, false) => (45, 100_000),
        (false, _) => (4, 10_000),
    };
    let workload = MixedWorkload { keys_per_partition, ..MixedWorkload::contrarian() };
    let dcs: &[u16] = &[1, 3];
    let variants = dcs
        .iter()
        .map(|&d| Variant {
            label: format!("{d} DC"),
            x: f64::from(d),
            workload: workload.clone(),
            topology: Topology::new(d, partitions),
            inter_dc_ms: if d == 1 { vec![vec![0.0]] } else { aws_three_dcs() },
            intra_dc_ms: 0.15,
            clients: None,
            figure: None,
            ramp: None,
            protocols: None,
        })
        .collect();
    notes.push(format!(
        "{partitions} partitions per DC, {keys_per_partition} keys per partition (the paper: 45 partitions, \
         1M keys per partition); w = 0.05, p = 4, b = 8, z = 0.99"
    ));
    let clients = match (sim, quick) {
        (true, true) => vec![1, 16, 64, 160, 320, 480],
        (true, false) => vec![1, 8, 32, 64, 128, 200, 300, 450, 600, 900],
        (false, true) => vec![1, 4, 16, 48],
        (false, false) => vec![1, 2, 4, 8, 16, 32, 64, 128],
    };
    let d = if sim {
        if quick { (0.4, 0.1, 0.05) } else { (2.0, 0.5, 0.25) }
    } else if quick {
        (2.0, 0.5, 0.25)
    } else {
        (6.0, 1.0, 0.5)
    };
    (variants, clients, [d.0, d.1, d.2])
}

impl Experiment {
    /// The charts, named, drawn like Fig. 4a–c.
    pub(super) fn contrarian_charts(&self, records: &[RunRecord]) -> Vec<(String, LineChart)> {
        let mut charts = Vec::new();
        let by = |variant: &str, protocol: &str| runs_of(records, variant, protocol);
        let runtime = self.runtime.name();
        for v in &self.variants {
            let series =
                self.per_protocol(records, &v.label, |r| (r.summary.ops_per_s / 1e3, r.rot_latency_us()[1] / 1e3));
            charts.push((
                format!("throughput-vs-p95-rot-latency-{}dc.png", v.topology.dcs),
                LineChart {
                    title: format!("Throughput vs p95 ROT latency, {} ({runtime}; Contrarian Fig. 4a/b)", v.label),
                    x_label: "throughput (Kops/s)".into(),
                    y_label: "p95 ROT latency (ms)".into(),
                    series,
                    y_from_zero: true,
                    reference: None,
                    legend: crate::charts::Legend::UpperLeft,
                },
            ));
            let baseline = &self.protocols[self.protocols.len() - 1];
            let rc: Vec<&RunRecord> =
                by(&v.label, baseline).into_iter().filter(|r| r.summary.readers_check.is_some()).collect();
            if !rc.is_empty() {
                let pick = |f: fn(&crate::metrics::ReadersCheckSummary) -> f64| -> Vec<(f64, f64)> {
                    rc.iter()
                        .map(|r| (r.clients_total as f64, f(r.summary.readers_check.as_ref().expect("filtered"))))
                        .collect()
                };
                charts.push((
                    format!("readers-check-{}dc.png", v.topology.dcs),
                    LineChart {
                        title: format!("{baseline} readers check, {} ({runtime}; Contrarian Fig. 4c)", v.label),
                        x_label: "client threads".into(),
                        y_label: "ROT ids per readers check".into(),
                        series: vec![
                            Series { name: "total".into(), points: pick(|c| c.rot_ids_total_mean) },
                            Series { name: "distinct".into(), points: pick(|c| c.rot_ids_distinct_mean) },
                        ],
                        y_from_zero: true,
                        reference: None,
                        legend: crate::charts::Legend::UpperLeft,
                    },
                ));
            }
        }
        charts
    }

    /// The headline: peak throughput, the latency crossover and the readers check beside the paper's.
    pub(super) fn contrarian_headline(&self, records: &[RunRecord], subject: &str, baseline: &str) -> String {
        let mut out = String::new();
        let by = |variant: &str, protocol: &str| runs_of(records, variant, protocol);
        let _ = writeln!(
            out,
            "| set-up | {subject} peak ops/s | {baseline} peak ops/s | ratio (paper) | {subject} p95 ROT below {baseline}'s from (paper) | lowest-load ROT p50 {subject} / {baseline} (paper) | {baseline} readers check at its peak: ROT ids total / distinct (paper) |\n| --- | --- | --- | --- | --- | --- | --- |"
        );
        for v in &self.variants {
            let (s, b) = (by(&v.label, subject), by(&v.label, baseline));
            let (ps, pb) = (peak_throughput(&s), peak_throughput(&b));
            let paper_ratio =
                if v.topology.dcs == 1 { "3.7× (1,150 vs 310 Kops/s)" } else { "5× (3,000 vs 600 Kops/s)" };
            let paper_cross =
                if v.topology.dcs == 1 { "≈17% of peak (≈200 Kops/s)" } else { "≈12% of peak (≈350 Kops/s)" };
            let paper_low = if v.topology.dcs == 1 { "0.31 / 0.18 ms" } else { "0.36 / 0.22 ms" };
            let cross = match crossover(&s, &b) {
                Crossover::Never => "never in the sweep".to_string(),
                Crossover::From(x) if s.first().is_some_and(|r| r.summary.ops_per_s == x) => {
                    "at every load measured".to_string()
                }
                Crossover::From(x) => format!("{:.0} ops/s = {:.0}% of peak", x, 100.0 * x / ps.max(1.0)),
            };
            let low = |rs: &[&RunRecord]| rs.first().map_or("-".into(), |r| fmt_us(r.rot_latency_us()[0]));
            let rc = b
                .iter()
                .max_by(|x, y| x.summary.ops_per_s.total_cmp(&y.summary.ops_per_s))
                .and_then(|r| r.summary.readers_check.as_ref())
                .map_or("not reported".to_string(), |rc| {
                    format!("{:.0} / {:.0}", rc.rot_ids_total_mean, rc.rot_ids_distinct_mean)
                });
            let rc_paper = if v.topology.dcs == 1 { " (1023 / 267 at 270 threads)" } else { "" };
            let _ = writeln!(
                out,
                "| {} | {:.0} | {:.0} | {:.2}× ({paper_ratio}) | {cross} ({paper_cross}) | {} / {} ({paper_low}) | {rc}{rc_paper} |",
                v.label,
                ps,
                pb,
                ps / pb.max(1.0),
                low(&s),
                low(&b)
            );
        }
        out
    }
}
