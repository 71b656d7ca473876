//! Per-operation metrics: HdrHistograms over every sample, and the summary tables the commands print.

use hdrhistogram::Histogram;
use serde::Serialize;
use snowline_core::{OpError, Reply, Request};
use std::collections::BTreeMap;
use std::fmt;

fn histogram() -> Histogram<u64> {
    // 1 ns .. 1 hour at 3 significant digits.
    Histogram::new_with_bounds(1, 3_600_000_000_000, 3).expect("valid histogram bounds")
}

#[derive(Clone, Debug)]
struct KindStats {
    latency_ns: Histogram<u64>,
    ok: u64,
    fail: u64,
    info: u64,
}

/// Everything measured about the operations of one run.
#[derive(Clone, Debug)]
pub struct Metrics {
    kinds: BTreeMap<&'static str, KindStats>,
    /// Per read: how many newer committed versions the answering server skipped (Tomsic §5.3).
    versions_skipped: Histogram<u64>,
    rot_rounds: Histogram<u64>,
    versions_returned: u64,
    blocked_ops: u64,
    blocked_ns: Histogram<u64>,
}

impl Default for Metrics {
    fn default() -> Self {
        Self {
            kinds: BTreeMap::new(),
            versions_skipped: Histogram::new(3).expect("valid"),
            rot_rounds: Histogram::new(3).expect("valid"),
            versions_returned: 0,
            blocked_ops: 0,
            blocked_ns: histogram(),
        }
    }
}

impl Metrics {
    pub fn record(&mut self, request: &Request, result: &Result<Reply, OpError>, latency_ns: u64) {
        let stats = self.kinds.entry(request.kind()).or_insert_with(|| KindStats {
            latency_ns: histogram(),
            ok: 0,
            fail: 0,
            info: 0,
        });
        match result {
            Ok(reply) => {
                stats.ok += 1;
                stats.latency_ns.saturating_record(latency_ns.max(1));
                if request.is_read_only() {
                    self.rot_rounds.saturating_record(u64::from(reply.metrics.rounds));
                    for r in &reply.reads {
                        self.versions_skipped.saturating_record(u64::from(r.versions_skipped));
                    }
                    self.versions_returned += u64::from(reply.metrics.versions_returned);
                }
                if reply.metrics.blocked_ns > 0 {
                    self.blocked_ops += 1;
                    self.blocked_ns.saturating_record(reply.metrics.blocked_ns);
                }
            }
            Err(e) if e.is_definite() => stats.fail += 1,
            Err(_) => stats.info += 1,
        }
    }

    pub fn merge(&mut self, other: &Metrics) {
        for (k, s) in &other.kinds {
            match self.kinds.get_mut(k) {
                Some(mine) => {
                    mine.latency_ns.add(&s.latency_ns).expect("same bounds");
                    mine.ok += s.ok;
                    mine.fail += s.fail;
                    mine.info += s.info;
                }
                None => {
                    self.kinds.insert(k, s.clone());
                }
            }
        }
        self.versions_skipped.add(&other.versions_skipped).expect("same bounds");
        self.rot_rounds.add(&other.rot_rounds).expect("same bounds");
        self.blocked_ns.add(&other.blocked_ns).expect("same bounds");
        self.versions_returned += other.versions_returned;
        self.blocked_ops += other.blocked_ops;
    }

    /// Summarise over a measured interval of `seconds`.
    pub fn summary(&self, seconds: f64) -> Summary {
        let us = |h: &Histogram<u64>, q: f64| h.value_at_quantile(q) as f64 / 1_000.0;
        let per_kind: Vec<KindSummary> = self
            .kinds
            .iter()
            .map(|(kind, s)| KindSummary {
                kind: kind.to_string(),
                ok: s.ok,
                fail: s.fail,
                info: s.info,
                ops_per_s: s.ok as f64 / seconds,
                p50_us: us(&s.latency_ns, 0.50),
                p95_us: us(&s.latency_ns, 0.95),
                p99_us: us(&s.latency_ns, 0.99),
                max_us: s.latency_ns.max() as f64 / 1_000.0,
                mean_us: s.latency_ns.mean() / 1_000.0,
            })
            .collect();
        let reads = self.versions_skipped.len();
        let fresh = self.versions_skipped.count_between(0, 0);
        Summary {
            seconds,
            ops_per_s: per_kind.iter().map(|k| k.ops_per_s).sum(),
            per_kind,
            reads,
            fresh_read_share: if reads == 0 { 1.0 } else { fresh as f64 / reads as f64 },
            max_versions_skipped: self.versions_skipped.max(),
            max_rot_rounds: self.rot_rounds.max() as u32,
            versions_returned: self.versions_returned,
            blocked_ops: self.blocked_ops,
            blocked_p99_us: us(&self.blocked_ns, 0.99),
        }
    }
}

/// One operation type's figures.
#[derive(Clone, Debug, Serialize)]
pub struct KindSummary {
    pub kind: String,
    pub ok: u64,
    pub fail: u64,
    pub info: u64,
    pub ops_per_s: f64,
    pub p50_us: f64,
    pub p95_us: f64,
    pub p99_us: f64,
    pub max_us: f64,
    pub mean_us: f64,
}

/// A run's figures, printed as a table and written as JSON.
#[derive(Clone, Debug, Serialize)]
pub struct Summary {
    pub seconds: f64,
    pub ops_per_s: f64,
    pub per_kind: Vec<KindSummary>,
    pub reads: u64,
    /// Share of key reads that returned the newest version the answering server had committed.
    pub fresh_read_share: f64,
    pub max_versions_skipped: u64,
    pub max_rot_rounds: u32,
    pub versions_returned: u64,
    /// Operations that waited at a server, and the p99 of that wait.
    pub blocked_ops: u64,
    pub blocked_p99_us: f64,
}

impl Summary {
    pub fn kind(&self, kind: &str) -> Option<&KindSummary> {
        self.per_kind.iter().find(|k| k.kind == kind)
    }
}

impl fmt::Display for Summary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{:<8} {:>9} {:>6} {:>6} {:>11} {:>10} {:>10} {:>10} {:>10}",
            "op", "ok", "fail", "info", "ops/s", "p50 µs", "p95 µs", "p99 µs", "max µs"
        )?;
        for k in &self.per_kind {
            writeln!(
                f,
                "{:<8} {:>9} {:>6} {:>6} {:>11.0} {:>10.1} {:>10.1} {:>10.1} {:>10.1}",
                k.kind, k.ok, k.fail, k.info, k.ops_per_s, k.p50_us, k.p95_us, k.p99_us, k.max_us
            )?;
        }
        writeln!(f, "total    {:>9.0} ops/s over {:.2} s", self.ops_per_s, self.seconds)?;
        write!(
            f,
            "reads: {} keys, fresh {:.2}%, max versions skipped {}, max ROT rounds {}, blocked ops {}",
            self.reads,
            self.fresh_read_share * 100.0,
            self.max_versions_skipped,
            self.max_rot_rounds,
            self.blocked_ops
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use snowline_core::{OpMetrics, ReadResult, Version};

    fn rot_reply(skips: &[u32]) -> Reply {
        Reply {
            reads: skips
                .iter()
                .map(|s| ReadResult { key: "k".into(), value: None, version: Version::INITIAL, versions_skipped: *s })
                .collect(),
            commit: None,
            metrics: OpMetrics { rounds: 2, versions_returned: skips.len() as u32, ..Default::default() },
        }
    }

    #[test]
    fn percentiles_freshness_and_outcomes() {
        let mut m = Metrics::default();
        let get = Request::Rot { keys: vec!["k".into()] };
        for i in 1..=100u64 {
            m.record(&get, &Ok(rot_reply(&[0])), i * 1_000);
        }
        let put = Request::Put { key: "k".into(), value: "v".into() };
        m.record(&put, &Err(OpError::Unknown("timeout".into())), 5);
        m.record(&put, &Err(OpError::Rejected("too big".into())), 5);
        let mut other = Metrics::default();
        other.record(&Request::Rot { keys: vec!["a".into(), "b".into()] }, &Ok(rot_reply(&[0, 3])), 1_000);
        m.merge(&other);
        let s = m.summary(2.0);
        let g = s.kind("get").unwrap();
        assert_eq!(g.ok, 100);
        assert!((g.p50_us - 50.0).abs() < 0.1 && (g.p99_us - 99.0).abs() < 0.1 && (g.max_us - 100.0).abs() < 0.1);
        assert_eq!(g.ops_per_s, 50.0);
        let p = s.kind("put").unwrap();
        assert_eq!((p.ok, p.fail, p.info), (0, 1, 1));
        assert_eq!(s.reads, 102);
        assert!((s.fresh_read_share - 101.0 / 102.0).abs() < 1e-9);
        assert_eq!((s.max_versions_skipped, s.max_rot_rounds), (3, 2));
        assert!(s.to_string().contains("get"));
    }
}
