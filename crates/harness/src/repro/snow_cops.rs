//! `reproduce snow-cops`: SNOW §6.1, Fig. 5 — its set-up, charts and headline beside the paper's.

use super::{Experiment, Variant, peak_throughput, runs_of};
use crate::charts::{LineChart, Series};
use crate::report::RunRecord;
use crate::workload::MixedWorkload;
use snowline_core::Topology;
use std::fmt::Write as _;

/// The set-up: `(variants, clients per datacenter swept, seconds of run, warm-up, cool-down)`, with its notes.
pub(super) fn setup(sim: bool, quick: bool, notes: &mut Vec<String>) -> (Vec<Variant>, Vec<usize>, [f64; 3]) {
    let (partitions, keys) = match (sim, quick) {
        (true, true) => (8, 100_000),
        (true, false) => (8, 1_000_000),
        (false, _) => (2, 100_000),
    };
    let fractions: &[f64] = match (sim, quick) {
        (true, false) => &[0.01, 0.05, 0.1, 0.2, 0.3, 0.5],
        (true, true) => &[0.01, 0.1, 0.3, 0.5],
        (false, _) => &[0.01, 0.1, 0.3],
    };
    let variants = fractions
        .iter()
        .map(|&w| Variant {
            label: format!("w={w}"),
            x: w,
            workload: MixedWorkload { keys, write_ratio: w, ..MixedWorkload::eiger() },
            topology: Topology::new(2, partitions),
            // Two logical datacenters co-located in one testbed.
            inter_dc_ms: vec![vec![0.15]],
            intra_dc_ms: 0.15,
            clients: None,
            figure: None,
            ramp: None,
            protocols: None,
        })
        .collect();
    notes.push(format!(
        "2 DCs × {partitions} servers, clients in DC 0 only, {keys} keys, 5 keys per operation, Zipf 0.8, \
         5 columns × 128 bytes per key (one value: the columns concatenated); a write of 5 keys is 5 PUTs \
         issued one after another in the session (the paper: in parallel)"
    ));
    let clients = match (sim, quick) {
        (true, true) => vec![16, 64, 256],
        (true, false) => vec![16, 32, 64, 128, 256, 512],
        (false, true) => vec![1, 4, 16],
        (false, false) => vec![1, 2, 4, 8, 16, 32],
    };
    let d = if sim {
        if quick { (0.4, 0.1, 0.05) } else { (2.0, 0.5, 0.5) }
    } else if quick {
        (2.0, 0.5, 0.25)
    } else {
        (6.0, 1.5, 1.5)
    };
    (variants, clients, [d.0, d.1, d.2])
}

impl Experiment {
    /// The charts, named, drawn like Fig. 5a–c.
    pub(super) fn snow_cops_charts(&self, records: &[RunRecord]) -> Vec<(String, LineChart)> {
        let mut charts = Vec::new();
        let by = |variant: &str, protocol: &str| runs_of(records, variant, protocol);
        let runtime = self.runtime.name();
        let (subject, baseline) = (&self.protocols[0], &self.protocols[self.protocols.len() - 1]);
        let lines = self
            .clients
            .iter()
            .map(|c| Series {
                name: format!("{} clients", c * usize::from(self.client_dcs.unwrap_or(1))),
                points: self
                    .variants
                    .iter()
                    .filter_map(|v| {
                        let s = by(&v.label, subject).into_iter().find(|r| r.clients_per_dc == *c)?;
                        let b = by(&v.label, baseline).into_iter().find(|r| r.clients_per_dc == *c)?;
                        let (s, b) = (s.rot_latency_us()[0], b.rot_latency_us()[0]);
                        (b > 0.0).then_some((v.x, s / b))
                    })
                    .collect(),
            })
            .collect();
        charts.push((
            "normalised-median-rot-latency.png".into(),
            LineChart {
                title: format!("Median ROT latency of {subject} normalised to {baseline} ({runtime}; SNOW Fig. 5b)"),
                x_label: "write fraction".into(),
                y_label: format!("{subject} / {baseline} median ROT latency"),
                series: lines,
                y_from_zero: true,
                reference: Some((1.0, format!("{baseline} = 1"))),
                legend: crate::charts::Legend::UpperLeft,
            },
        ));
        let peak = self
            .protocols
            .iter()
            .map(|p| Series {
                name: p.clone(),
                points: self.variants.iter().map(|v| (v.x, peak_throughput(&by(&v.label, p)) / 1e3)).collect(),
            })
            .collect();
        charts.push((
            "peak-throughput.png".into(),
            LineChart {
                title: format!("Peak throughput ({runtime}; SNOW Fig. 5c)"),
                x_label: "write fraction".into(),
                y_label: "peak throughput (Kops/s)".into(),
                series: peak,
                y_from_zero: true,
                reference: None,
                legend: crate::charts::Legend::UpperLeft,
            },
        ));
        if let Some(v) = self.variants.iter().find(|v| (v.x - 0.1).abs() < 1e-9) {
            let series =
                self.per_protocol(records, &v.label, |r| (r.summary.ops_per_s / 1e3, r.rot_latency_us()[0] / 1e3));
            charts.push((
                "throughput-vs-median-rot-latency-w0.1.png".into(),
                LineChart {
                    title: format!("Throughput vs median ROT latency, w = 0.1 ({runtime}; SNOW Fig. 5a)"),
                    x_label: "throughput (Kops/s)".into(),
                    y_label: "median ROT latency (ms)".into(),
                    series,
                    y_from_zero: true,
                    reference: None,
                    legend: crate::charts::Legend::UpperLeft,
                },
            ));
        }
        charts
    }

    /// The headline: ROT latency normalised to the baseline's and peak throughput beside the paper's.
    pub(super) fn snow_cops_headline(&self, records: &[RunRecord], subject: &str, baseline: &str) -> String {
        let mut out = String::new();
        let by = |variant: &str, protocol: &str| runs_of(records, variant, protocol);
        let _ = writeln!(
            out,
            "| write fraction | {subject} / {baseline} median ROT latency, per client count {:?} | peak throughput {subject} / {baseline} (ratio) | mean ROT rounds {subject} / {baseline} |\n| --- | --- | --- | --- |",
            self.clients.iter().map(|c| c * usize::from(self.client_dcs.unwrap_or(1))).collect::<Vec<_>>()
        );
        for v in &self.variants {
            let (s, b) = (by(&v.label, subject), by(&v.label, baseline));
            let ratios: Vec<String> = self
                .clients
                .iter()
                .map(|c| {
                    let rs = s.iter().find(|r| r.clients_per_dc == *c);
                    let rb = b.iter().find(|r| r.clients_per_dc == *c);
                    match (rs, rb) {
                        (Some(x), Some(y)) if y.rot_latency_us()[0] > 0.0 => {
                            format!("{:.2}", x.rot_latency_us()[0] / y.rot_latency_us()[0])
                        }
                        _ => "-".into(),
                    }
                })
                .collect();
            let (ps, pb) = (peak_throughput(&s), peak_throughput(&b));
            let rounds =
                |rs: &[&RunRecord]| rs.iter().map(|r| r.summary.rot_rounds_mean).sum::<f64>() / rs.len().max(1) as f64;
            let _ = writeln!(
                out,
                "| {} | {} | {ps:.0} / {pb:.0} ({:.2}) | {:.2} / {:.2} |",
                v.x,
                ratios.join(", "),
                ps / pb.max(1.0),
                rounds(&s),
                rounds(&b)
            );
        }
        let _ = writeln!(
            out,
            "\nPaper (SNOW §6.1, Fig. 5b–c): COPS-SNOW's median ROT latency normalised to COPS falls as the write \
             fraction grows (similar at 0.01, a substantial gain near 0.3); COPS-SNOW trades throughput for it \
             (lower peak throughput: extra messages in its write path)."
        );
        out
    }
}
