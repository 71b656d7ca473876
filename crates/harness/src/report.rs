//! Results directories: one JSON and one CSV file per run, a CSV of every run, and the summary table printed
//! at the end of a sweep.

use crate::metrics::Summary;
use anyhow::{Context, Result};
use serde::Serialize;
use std::fmt::Write as _;
use std::path::Path;

/// One run of a sweep: where it ran, what it ran, and its figures.
#[derive(Clone, Debug, Serialize)]
pub struct RunRecord {
    /// The experiment or command that produced it ("contrarian", "sim", ...).
    pub experiment: String,
    /// "sim" or "real".
    pub runtime: String,
    /// The workload variant ("1 DC", "w=0.1", "10 updates", ...).
    pub variant: String,
    /// The variant's x value where a chart needs one (write fraction, update keys, datacenters).
    pub x: f64,
    pub protocol: String,
    pub workload: String,
    pub dcs: u16,
    pub partitions: u16,
    pub clients_per_dc: usize,
    pub clients_total: usize,
    pub summary: Summary,
    /// Simulated events (simulator runs).
    pub sim_events: Option<u64>,
    /// Wall-clock seconds the run took (the simulator's speed, the real runtime's length).
    pub wall_s: f64,
    /// The tpcc workload: the 12 consistency conditions checked on the final state.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tpcc: Option<crate::tpcc::Audit>,
}

impl RunRecord {
    /// A file-name stem unique within an experiment.
    pub fn stem(&self) -> String {
        let clean: String = self
            .variant
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() || c == '.' { c } else { '-' })
            .collect::<String>()
            .to_lowercase();
        format!("{}-{}-c{}", self.protocol, clean, self.clients_per_dc)
    }

    fn rot(&self) -> (f64, f64, f64, f64, f64) {
        // The ROT latency is that of multi-key ROTs; a workload with only single-key reads reports its GETs.
        let k = self.summary.kind("rot").or_else(|| self.summary.kind("get"));
        k.map_or((0.0, 0.0, 0.0, 0.0, 0.0), |k| (k.p50_us, k.p95_us, k.p99_us, k.mean_us, k.max_us))
    }

    /// p50, p95, p99, mean and max ROT latency in microseconds.
    pub fn rot_latency_us(&self) -> [f64; 5] {
        let (a, b, c, d, e) = self.rot();
        [a, b, c, d, e]
    }
}

const KINDS: [&str; 7] = ["rot", "get", "put", "update", "ro-txn", "rw-txn", "update-termination"];

/// The CSV header matching [`csv_row`].
pub fn csv_header() -> String {
    let mut h = String::from(
        "experiment,runtime,variant,x,protocol,workload,dcs,partitions,clients_per_dc,clients_total,seconds,ops_per_s,key_ops_per_s",
    );
    for k in KINDS {
        for f in ["ok", "fail", "info", "ops_per_s", "p50_us", "p95_us", "p99_us", "mean_us", "max_us"] {
            let _ = write!(h, ",{k}_{f}");
        }
    }
    h.push_str(
        ",reads,fresh_read_share,max_versions_skipped,multi_version_overhead,rot_rounds_mean,max_rot_rounds,\
versions_per_rot,versions_per_key_read,blocked_ops,blocked_mean_us,blocked_p99_us,blocked_total_ms,\
readers_checks,rc_rot_ids_total_mean,rc_rot_ids_distinct_mean,rc_keys_checked_mean,rc_partitions_contacted_mean,\
sim_events,wall_s,committed_txns_per_s,abort_rate,update_abort_rate,aborts,update_aborts",
    );
    h
}

fn quote(s: &str) -> String {
    if s.contains([',', '"', '\n']) { format!("\"{}\"", s.replace('"', "\"\"")) } else { s.to_string() }
}

/// One run as a CSV line (no newline).
pub fn csv_row(r: &RunRecord) -> String {
    let s = &r.summary;
    let mut row = format!(
        "{},{},{},{},{},{},{},{},{},{},{:.3},{:.1},{:.1}",
        quote(&r.experiment),
        r.runtime,
        quote(&r.variant),
        r.x,
        quote(&r.protocol),
        r.workload,
        r.dcs,
        r.partitions,
        r.clients_per_dc,
        r.clients_total,
        s.seconds,
        s.ops_per_s,
        s.key_ops_per_s
    );
    for k in KINDS {
        let kind = if k == "update-termination" { s.update_termination.as_ref() } else { s.kind(k) };
        match kind {
            Some(k) => {
                let _ = write!(
                    row,
                    ",{},{},{},{:.1},{:.1},{:.1},{:.1},{:.1},{:.1}",
                    k.ok, k.fail, k.info, k.ops_per_s, k.p50_us, k.p95_us, k.p99_us, k.mean_us, k.max_us
                );
            }
            None => row.push_str(",,,,,,,,,"),
        }
    }
    let rc = s.readers_check.as_ref();
    let opt = |v: Option<f64>| v.map(|v| format!("{v:.2}")).unwrap_or_default();
    let _ = write!(
        row,
        ",{},{:.6},{},{:.6},{:.3},{},{:.3},{:.3},{},{:.1},{:.1},{:.3},{},{},{},{},{},{},{:.2}",
        s.reads,
        s.fresh_read_share,
        s.max_versions_skipped,
        s.multi_version_overhead,
        s.rot_rounds_mean,
        s.max_rot_rounds,
        s.versions_per_rot,
        s.versions_per_key_read,
        s.blocked_ops,
        s.blocked_mean_us,
        s.blocked_p99_us,
        s.blocked_total_ms,
        rc.map(|rc| rc.checks.to_string()).unwrap_or_default(),
        opt(rc.map(|rc| rc.rot_ids_total_mean)),
        opt(rc.map(|rc| rc.rot_ids_distinct_mean)),
        opt(rc.map(|rc| rc.keys_checked_mean)),
        opt(rc.map(|rc| rc.partitions_contacted_mean)),
        r.sim_events.map(|e| e.to_string()).unwrap_or_default(),
        r.wall_s
    );
    let causes = |m: &std::collections::BTreeMap<String, u64>| {
        m.iter().map(|(c, n)| format!("{c}={n}")).collect::<Vec<_>>().join(" ")
    };
    let _ = write!(
        row,
        ",{:.1},{:.6},{:.6},{},{}",
        s.committed_txns_per_s,
        s.abort_rate,
        s.update_abort_rate,
        causes(&s.aborts),
        causes(&s.update_aborts)
    );
    row
}

/// Write `runs/<stem>.json` and `runs/<stem>.csv` under `dir`.
pub fn write_run(dir: &Path, record: &RunRecord) -> Result<()> {
    let runs = dir.join("runs");
    std::fs::create_dir_all(&runs).with_context(|| format!("creating {}", runs.display()))?;
    let stem = record.stem();
    let json = runs.join(format!("{stem}.json"));
    std::fs::write(&json, serde_json::to_string_pretty(record)?)
        .with_context(|| format!("writing {}", json.display()))?;
    let csv = runs.join(format!("{stem}.csv"));
    std::fs::write(&csv, format!("{}\n{}\n", csv_header(), csv_row(record)))
        .with_context(|| format!("writing {}", csv.display()))?;
    Ok(())
}

/// Write every run as `results.csv` and `results.json` under `dir`.
pub fn write_all(dir: &Path, records: &[RunRecord]) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let mut csv = csv_header();
    csv.push('\n');
    for r in records {
        csv.push_str(&csv_row(r));
        csv.push('\n');
    }
    std::fs::write(dir.join("results.csv"), csv).with_context(|| format!("writing {}/results.csv", dir.display()))?;
    std::fs::write(dir.join("results.json"), serde_json::to_string_pretty(records)?)
        .with_context(|| format!("writing {}/results.json", dir.display()))?;
    Ok(())
}

/// The table printed at the end of a sweep: one line per run.
pub fn table(records: &[RunRecord]) -> String {
    let mut t = String::new();
    let _ = writeln!(
        t,
        "{:<12} {:<12} {:>10} {:>10} {:>11} {:>9} {:>9} {:>9} {:>9} {:>8} {:>7} {:>7} {:>8}",
        "variant",
        "protocol",
        "clients/DC",
        "ops/s",
        "key ops/s",
        "ROT p50",
        "ROT p95",
        "ROT p99",
        "PUT p50",
        "fresh %",
        "mv ovh",
        "rounds",
        "rc ids"
    );
    for r in records {
        let [p50, p95, p99, _, _] = r.rot_latency_us();
        let s = &r.summary;
        let put = s.kind("put").or_else(|| s.kind("update")).map_or(0.0, |k| k.p50_us);
        let rc = s.readers_check.as_ref().map_or("-".to_string(), |rc| format!("{:.1}", rc.rot_ids_total_mean));
        let _ = writeln!(
            t,
            "{:<12} {:<12} {:>10} {:>10.0} {:>11.0} {:>9} {:>9} {:>9} {:>9} {:>8.2} {:>7.3} {:>7.2} {:>8}",
            r.variant,
            r.protocol,
            r.clients_per_dc,
            s.ops_per_s,
            s.key_ops_per_s,
            fmt_us(p50),
            fmt_us(p95),
            fmt_us(p99),
            fmt_us(put),
            s.fresh_read_share * 100.0,
            s.multi_version_overhead,
            s.rot_rounds_mean,
            rc
        );
    }
    t.push_str("(latencies: µs below 10 ms, else ms; ROT = multi-key ROTs, or GETs where a workload has only those)\n");
    t
}

/// The table of a transactional sweep (ycsb-t): committed transactions, update termination and aborts.
pub fn txn_table(records: &[RunRecord]) -> String {
    let mut t = String::new();
    let _ = writeln!(
        t,
        "{:<18} {:<8} {:>10} {:>10} {:>10} {:>10} {:>9} {:>9} aborts per cause",
        "variant", "protocol", "clients/DC", "txn/s", "term mean", "term p95", "upd abort", "abort %"
    );
    for r in records {
        let s = &r.summary;
        let term = s.update_termination.as_ref();
        let causes: Vec<String> = s.aborts.iter().map(|(c, n)| format!("{c} {n}")).collect();
        let _ = writeln!(
            t,
            "{:<18} {:<8} {:>10} {:>10.0} {:>10} {:>10} {:>8.2}% {:>8.2}% {}",
            r.variant,
            r.protocol,
            r.clients_per_dc,
            s.committed_txns_per_s,
            term.map_or("-".into(), |k| fmt_us(k.mean_us)),
            term.map_or("-".into(), |k| fmt_us(k.p95_us)),
            s.update_abort_rate * 100.0,
            s.abort_rate * 100.0,
            if causes.is_empty() { "-".into() } else { causes.join(", ") }
        );
    }
    t.push_str(
        "(term = update transactions' termination, Commit sent → outcome, of those that committed; upd abort = aborted \
         attempts of update transactions; latencies: µs below 10 ms, else ms)\n",
    );
    t
}

/// A latency for a table: `812µs` or `12.3ms`.
pub fn fmt_us(us: f64) -> String {
    if us < 10_000.0 { format!("{us:.0}µs") } else { format!("{:.1}ms", us / 1_000.0) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::Metrics;
    use snowline_core::{OpMetrics, ReadResult, Reply, Request, Version};

    #[test]
    fn csv_rows_match_the_header_and_files_are_written() {
        let mut m = Metrics::default();
        let rot = Request::Rot { keys: vec!["a".into(), "b".into()] };
        let read = |k: &str| ReadResult { key: k.into(), value: None, version: Version::INITIAL, versions_skipped: 0 };
        let reply = Reply {
            reads: vec![read("a"), read("b")],
            commit: None,
            metrics: OpMetrics { rounds: 1, versions_returned: 2, ..Default::default() },
            writes: Vec::new(),
        };
        m.record(&rot, &Ok(reply), 2_000);
        let record = RunRecord {
            experiment: "test".into(),
            runtime: "sim".into(),
            variant: "w=0.1, \"x\"".into(),
            x: 0.1,
            protocol: "av".into(),
            workload: "mixed".into(),
            dcs: 1,
            partitions: 2,
            clients_per_dc: 3,
            clients_total: 3,
            summary: m.summary(1.0),
            sim_events: Some(10),
            tpcc: None,
            wall_s: 0.5,
        };
        let header_fields = csv_header().split(',').count();
        // The quoted variant holds a comma: count fields outside quotes.
        let row = csv_row(&record);
        let mut fields = 1;
        let mut quoted = false;
        for c in row.chars() {
            match c {
                '"' => quoted = !quoted,
                ',' if !quoted => fields += 1,
                _ => {}
            }
        }
        assert_eq!(fields, header_fields, "{row}");
        let dir = std::env::temp_dir().join(format!("snowline-report-test-{}", std::process::id()));
        write_run(&dir, &record).unwrap();
        write_all(&dir, std::slice::from_ref(&record)).unwrap();
        assert!(dir.join("runs").join(format!("{}.json", record.stem())).exists());
        assert!(std::fs::read_to_string(dir.join("results.csv")).unwrap().lines().count() == 2);
        assert!(table(&[record]).contains("av"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
