//! Per-operation metrics: HdrHistograms over every sample, and the summary tables the commands print.

use hdrhistogram::Histogram;
use serde::Serialize;
use snowline_core::{AbortCause, OpError, Reply, Request};
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
    /// Aborted attempts (of transactions counted under this kind).
    aborted: u64,
    /// Protocol rounds (`OpMetrics::rounds`) of the committed stored-procedure calls counted here, summed.
    rounds: u64,
    /// Their executions (`OpMetrics::executions`), summed.
    executions: u64,
}

impl KindStats {
    fn new() -> Self {
        KindStats { latency_ns: histogram(), ok: 0, fail: 0, info: 0, aborted: 0, rounds: 0, executions: 0 }
    }
}

/// Everything measured about the operations of one run.
#[derive(Clone, Debug)]
pub struct Metrics {
    kinds: BTreeMap<&'static str, KindStats>,
    /// Per read: how many newer committed versions the answering server skipped (Tomsic §5.3).
    versions_skipped: Histogram<u64>,
    rot_rounds: Histogram<u64>,
    versions_returned: u64,
    /// Successful read-only operations (measured).
    rots: u64,
    /// Keys read by successful ROTs and keys written by successful writes (Tomsic's operations).
    keys_read: u64,
    keys_written: u64,
    blocked_ops: u64,
    blocked_ns: Histogram<u64>,
    blocked_ns_total: u64,
    /// Per-ROT maxima (SNOW's N and O): the longest a ROT waited at servers, and the most versions a ROT
    /// received per key it read.
    rot_blocked_ns_max: u64,
    rot_versions_per_key_max: f64,
    /// Committed operations and transactions that wrote two or more keys (SNOW's W).
    multi_key_writes: u64,
    readers_check: ReadersCheckTotals,
    /// Snapshot metadata per transaction that reported it, bytes.
    metadata_bytes: Histogram<u64>,
    /// Aborted transaction attempts, per cause.
    aborts: BTreeMap<AbortCause, u64>,
    /// Per committed transaction: the attempts it took.
    attempts: Histogram<u64>,
    /// Update transactions' termination (NMSI §V, Fig. 3): from sending `Commit` to its outcome, per attempt.
    update_termination: KindStats,
    /// Aborted attempts of update transactions, per cause.
    update_aborts: BTreeMap<AbortCause, u64>,
    /// Operations and transactions that ended in an error, per kind and cause ([`failure_cause`]).
    failures: BTreeMap<(&'static str, String), u64>,
}

/// Why an operation failed, in a few words that many failures share: the outcome (`rejected`, `aborted`,
/// `outcome unknown`) and its reason with numbers replaced by `N` (so that "key k17" and "key k3" count as one
/// cause; digits a letter follows are part of a name and stay: "2pl"), cut at 100 characters.
pub fn failure_cause(e: &OpError) -> String {
    let text = match e {
        OpError::Aborted(a) => format!("aborted ({}): {}", a.cause, a.detail),
        other => other.to_string(),
    };
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if !c.is_ascii_digit() {
            out.push(c);
            continue;
        }
        let mut digits = c.to_string();
        while let Some(d) = chars.next_if(char::is_ascii_digit) {
            digits.push(d);
        }
        if chars.peek().is_some_and(|c| c.is_alphabetic()) {
            out.push_str(&digits);
        } else {
            out.push('N');
        }
    }
    if out.chars().count() > 100 {
        out = out.chars().take(99).collect::<String>() + "…";
    }
    out
}

/// Sums of [`snowline_core::ReadersCheckCost`] over the writes that reported one.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct ReadersCheckTotals {
    pub checks: u64,
    pub rot_ids_total: u64,
    pub rot_ids_distinct: u64,
    pub keys_checked: u64,
    pub partitions_contacted: u64,
}

impl Default for Metrics {
    fn default() -> Self {
        Self {
            kinds: BTreeMap::new(),
            versions_skipped: Histogram::new(3).expect("valid"),
            rot_rounds: Histogram::new(3).expect("valid"),
            versions_returned: 0,
            rots: 0,
            keys_read: 0,
            keys_written: 0,
            blocked_ops: 0,
            blocked_ns: histogram(),
            blocked_ns_total: 0,
            rot_blocked_ns_max: 0,
            rot_versions_per_key_max: 0.0,
            multi_key_writes: 0,
            readers_check: ReadersCheckTotals::default(),
            metadata_bytes: Histogram::new(3).expect("valid"),
            aborts: BTreeMap::new(),
            attempts: Histogram::new(3).expect("valid"),
            update_termination: KindStats::new(),
            update_aborts: BTreeMap::new(),
            failures: BTreeMap::new(),
        }
    }
}

impl Metrics {
    pub fn record(&mut self, request: &Request, result: &Result<Reply, OpError>, latency_ns: u64) {
        let stats = self.kinds.entry(request.kind()).or_insert_with(KindStats::new);
        match result {
            Ok(reply) => {
                stats.ok += 1;
                stats.latency_ns.saturating_record(latency_ns.max(1));
                if request.is_read_only() {
                    self.rots += 1;
                    self.keys_read += reply.reads.len() as u64;
                    self.rot_rounds.saturating_record(u64::from(reply.metrics.rounds));
                    for r in &reply.reads {
                        self.versions_skipped.saturating_record(u64::from(r.versions_skipped));
                    }
                    self.versions_returned += u64::from(reply.metrics.versions_returned);
                    self.rot_blocked_ns_max = self.rot_blocked_ns_max.max(reply.metrics.blocked_ns);
                    if !reply.reads.is_empty() {
                        let per_key = f64::from(reply.metrics.versions_returned) / reply.reads.len() as f64;
                        self.rot_versions_per_key_max = self.rot_versions_per_key_max.max(per_key);
                    }
                } else {
                    self.record_txn_writes(request.writes().len());
                }
                if reply.metrics.blocked_ns > 0 {
                    self.blocked_ops += 1;
                    self.blocked_ns.saturating_record(reply.metrics.blocked_ns);
                    self.blocked_ns_total += reply.metrics.blocked_ns;
                }
                if reply.metrics.metadata_bytes > 0 {
                    self.metadata_bytes.saturating_record(reply.metrics.metadata_bytes);
                }
                if let Some(rc) = &reply.metrics.readers_check {
                    let t = &mut self.readers_check;
                    t.checks += 1;
                    t.rot_ids_total += rc.rot_ids_total;
                    t.rot_ids_distinct += rc.rot_ids_distinct;
                    t.keys_checked += rc.keys_checked;
                    t.partitions_contacted += rc.partitions_contacted;
                }
            }
            Err(e) if e.is_definite() => stats.fail += 1,
            Err(_) => stats.info += 1,
        }
        if let Err(e) = result {
            self.record_failure(request.kind(), e);
        }
    }

    /// One operation or transaction of `kind` that ended in `error`, by cause.
    fn record_failure(&mut self, kind: &'static str, error: &OpError) {
        *self.failures.entry((kind, failure_cause(error))).or_insert(0) += 1;
    }

    /// A whole transaction (all its attempts): committed (`Ok`) or given up on; `latency_ns` from the start of
    /// its first attempt. Counted under `kind` (`ro-txn`, `rw-txn`) in the per-kind table.
    pub fn record_txn(&mut self, kind: &'static str, outcome: &Result<(), OpError>, latency_ns: u64, attempts: u32) {
        let stats = self.kinds.entry(kind).or_insert_with(KindStats::new);
        match outcome {
            Ok(()) => {
                stats.ok += 1;
                stats.latency_ns.saturating_record(latency_ns.max(1));
                self.attempts.saturating_record(u64::from(attempts.max(1)));
            }
            Err(e) if e.is_definite() => stats.fail += 1,
            Err(_) => stats.info += 1,
        }
        if let Err(e) = outcome {
            self.record_failure(kind, e);
        }
    }

    /// What one step of an interactive transaction cost: time waited at servers; keys read.
    pub fn record_step(&mut self, reply: &Reply) {
        if reply.metrics.metadata_bytes > 0 {
            self.metadata_bytes.saturating_record(reply.metrics.metadata_bytes);
        }
        if reply.metrics.blocked_ns > 0 {
            self.blocked_ops += 1;
            self.blocked_ns.saturating_record(reply.metrics.blocked_ns);
            self.blocked_ns_total += reply.metrics.blocked_ns;
        }
        self.keys_read += reply.reads.len() as u64;
        for r in &reply.reads {
            self.versions_skipped.saturating_record(u64::from(r.versions_skipped));
        }
    }

    /// Keys a committed transaction wrote.
    pub fn record_txn_writes(&mut self, keys: usize) {
        self.keys_written += keys as u64;
        self.multi_key_writes += u64::from(keys >= 2);
    }

    /// One aborted attempt of a transaction counted under `kind` (a stored procedure's name): its kind's
    /// commit rate.
    pub fn record_kind_abort(&mut self, kind: &'static str) {
        self.kinds.entry(kind).or_insert_with(KindStats::new).aborted += 1;
    }

    /// The protocol rounds and executions a committed stored-procedure call of `kind` reported (a read-only
    /// procedure that a protocol runs again until two executions agree reports every round of every
    /// execution).
    pub fn record_kind_call(&mut self, kind: &'static str, metrics: &snowline_core::OpMetrics) {
        let k = self.kinds.entry(kind).or_insert_with(KindStats::new);
        k.rounds += u64::from(metrics.rounds);
        k.executions += u64::from(metrics.executions);
    }

    /// One aborted transaction attempt.
    pub fn record_abort(&mut self, cause: AbortCause) {
        *self.aborts.entry(cause).or_insert(0) += 1;
    }

    /// One aborted attempt of an update transaction (counted by [`Metrics::record_abort`] too).
    pub fn record_update_abort(&mut self, cause: AbortCause) {
        *self.update_aborts.entry(cause).or_insert(0) += 1;
    }

    /// The termination of one update-transaction attempt: its `Commit` answered after `latency_ns`, committed
    /// (`Ok`, the latency recorded) or not. Not an operation of its own: it does not count in the throughput.
    pub fn record_update_termination(&mut self, outcome: &Result<(), OpError>, latency_ns: u64) {
        let stats = &mut self.update_termination;
        match outcome {
            Ok(()) => {
                stats.ok += 1;
                stats.latency_ns.saturating_record(latency_ns.max(1));
            }
            Err(e) if e.is_definite() => stats.fail += 1,
            Err(_) => stats.info += 1,
        }
    }

    pub fn merge(&mut self, other: &Metrics) {
        for (key, n) in &other.failures {
            *self.failures.entry(key.clone()).or_insert(0) += n;
        }
        for (cause, n) in &other.aborts {
            *self.aborts.entry(*cause).or_insert(0) += n;
        }
        for (cause, n) in &other.update_aborts {
            *self.update_aborts.entry(*cause).or_insert(0) += n;
        }
        let (t, o) = (&mut self.update_termination, &other.update_termination);
        t.latency_ns.add(&o.latency_ns).expect("same bounds");
        t.ok += o.ok;
        t.fail += o.fail;
        t.info += o.info;
        self.attempts.add(&other.attempts).expect("same bounds");
        for (k, s) in &other.kinds {
            match self.kinds.get_mut(k) {
                Some(mine) => {
                    mine.latency_ns.add(&s.latency_ns).expect("same bounds");
                    mine.ok += s.ok;
                    mine.fail += s.fail;
                    mine.info += s.info;
                    mine.aborted += s.aborted;
                    mine.rounds += s.rounds;
                    mine.executions += s.executions;
                }
                None => {
                    self.kinds.insert(k, s.clone());
                }
            }
        }
        self.versions_skipped.add(&other.versions_skipped).expect("same bounds");
        self.rot_rounds.add(&other.rot_rounds).expect("same bounds");
        self.metadata_bytes.add(&other.metadata_bytes).expect("same bounds");
        self.blocked_ns.add(&other.blocked_ns).expect("same bounds");
        self.versions_returned += other.versions_returned;
        self.rots += other.rots;
        self.keys_read += other.keys_read;
        self.keys_written += other.keys_written;
        self.blocked_ops += other.blocked_ops;
        self.blocked_ns_total += other.blocked_ns_total;
        self.rot_blocked_ns_max = self.rot_blocked_ns_max.max(other.rot_blocked_ns_max);
        self.rot_versions_per_key_max = self.rot_versions_per_key_max.max(other.rot_versions_per_key_max);
        self.multi_key_writes += other.multi_key_writes;
        let (t, o) = (&mut self.readers_check, &other.readers_check);
        t.checks += o.checks;
        t.rot_ids_total += o.rot_ids_total;
        t.rot_ids_distinct += o.rot_ids_distinct;
        t.keys_checked += o.keys_checked;
        t.partitions_contacted += o.partitions_contacted;
    }

    /// The staleness CDF: for each number of versions skipped `s` from 0 to the largest seen, the share of
    /// key reads that skipped at most `s` (Tomsic Fig. 4g–i). Empty if no key was read.
    pub fn staleness_cdf(&self) -> Vec<(u64, f64)> {
        let reads = self.versions_skipped.len();
        if reads == 0 {
            return Vec::new();
        }
        let mut out = Vec::new();
        let mut cumulative = 0u64;
        for s in 0..=self.versions_skipped.max() {
            cumulative += self.versions_skipped.count_at(s);
            out.push((s, cumulative as f64 / reads as f64));
        }
        out
    }

    /// Tomsic §5.3.2's multi-version overhead: the mean of `versions_skipped + 1` over key reads (a read of
    /// the second-newest version costs 2× a single-version store's), which is the area over the staleness
    /// CDF. 1.0 if no key was read.
    pub fn multi_version_overhead(&self) -> f64 {
        if self.versions_skipped.is_empty() {
            return 1.0;
        }
        let skipped: u64 =
            self.versions_skipped.iter_recorded().map(|v| v.value_iterated_to() * v.count_at_value()).sum();
        1.0 + skipped as f64 / self.versions_skipped.len() as f64
    }

    /// Summarise over a measured interval of `seconds`.
    pub fn summary(&self, seconds: f64) -> Summary {
        let us = |h: &Histogram<u64>, q: f64| h.value_at_quantile(q) as f64 / 1_000.0;
        let kind_summary = |kind: &str, s: &KindStats| KindSummary {
            kind: kind.to_string(),
            ok: s.ok,
            fail: s.fail,
            info: s.info,
            aborted: s.aborted,
            rounds_mean: if s.ok == 0 { 0.0 } else { s.rounds as f64 / s.ok as f64 },
            executions_mean: if s.ok == 0 { 0.0 } else { s.executions as f64 / s.ok as f64 },
            ops_per_s: s.ok as f64 / seconds,
            p50_us: us(&s.latency_ns, 0.50),
            p95_us: us(&s.latency_ns, 0.95),
            p99_us: us(&s.latency_ns, 0.99),
            max_us: s.latency_ns.max() as f64 / 1_000.0,
            mean_us: s.latency_ns.mean() / 1_000.0,
        };
        let per_kind: Vec<KindSummary> = self.kinds.iter().map(|(kind, s)| kind_summary(kind, s)).collect();
        let t = &self.update_termination;
        let update_termination =
            (t.ok + t.fail + t.info > 0).then(|| kind_summary("update-termination", &self.update_termination));
        let update_aborted: u64 = self.update_aborts.values().sum();
        let update_committed = self.kinds.get("rw-txn").map_or(0, |k| k.ok);
        let reads = self.versions_skipped.len();
        let fresh = self.versions_skipped.count_between(0, 0);
        let per = |total: u64, n: u64| if n == 0 { 0.0 } else { total as f64 / n as f64 };
        let rc = self.readers_check;
        let committed = self.attempts.len();
        let attempts_total: u64 =
            self.attempts.iter_recorded().map(|v| v.value_iterated_to() * v.count_at_value()).sum();
        let aborted: u64 = self.aborts.values().sum();
        Summary {
            failures: self
                .failures
                .iter()
                .map(|((kind, cause), count)| FailureCount {
                    kind: kind.to_string(),
                    cause: cause.clone(),
                    count: *count,
                })
                .collect(),
            update_termination,
            update_abort_rate: if update_committed + update_aborted == 0 {
                0.0
            } else {
                update_aborted as f64 / (update_committed + update_aborted) as f64
            },
            update_aborts: self.update_aborts.iter().map(|(c, n)| (c.name().to_string(), *n)).collect(),
            committed_txns_per_s: committed as f64 / seconds,
            attempts_per_commit: if committed == 0 { 0.0 } else { attempts_total as f64 / committed as f64 },
            metadata_bytes_per_txn: if self.metadata_bytes.is_empty() { 0.0 } else { self.metadata_bytes.mean() },
            abort_rate: if committed + aborted == 0 { 0.0 } else { aborted as f64 / (committed + aborted) as f64 },
            aborts: self.aborts.iter().map(|(c, n)| (c.name().to_string(), *n)).collect(),
            seconds,
            // Folded from 0.0: a float `sum()` of nothing is -0.0, which prints as "-0".
            ops_per_s: per_kind.iter().map(|k| k.ops_per_s).fold(0.0, |a, b| a + b),
            key_ops_per_s: (self.keys_read + self.keys_written) as f64 / seconds,
            staleness_cdf: self.staleness_cdf(),
            multi_version_overhead: self.multi_version_overhead(),
            rot_rounds_mean: if self.rots == 0 { 0.0 } else { self.rot_rounds.mean() },
            versions_per_rot: per(self.versions_returned, self.rots),
            versions_per_key_read: per(self.versions_returned, self.keys_read),
            blocked_mean_us: per(self.blocked_ns_total, self.blocked_ops) / 1_000.0,
            blocked_total_ms: self.blocked_ns_total as f64 / 1e6,
            readers_check: (rc.checks > 0).then(|| ReadersCheckSummary {
                checks: rc.checks,
                rot_ids_total_mean: per(rc.rot_ids_total, rc.checks),
                rot_ids_distinct_mean: per(rc.rot_ids_distinct, rc.checks),
                keys_checked_mean: per(rc.keys_checked, rc.checks),
                partitions_contacted_mean: per(rc.partitions_contacted, rc.checks),
            }),
            per_kind,
            reads,
            fresh_read_share: if reads == 0 { 1.0 } else { fresh as f64 / reads as f64 },
            max_versions_skipped: self.versions_skipped.max(),
            max_rot_rounds: self.rot_rounds.max() as u32,
            versions_returned: self.versions_returned,
            blocked_ops: self.blocked_ops,
            blocked_p99_us: us(&self.blocked_ns, 0.99),
            max_rot_blocked_us: self.rot_blocked_ns_max as f64 / 1_000.0,
            max_rot_versions_per_key: self.rot_versions_per_key_max,
            multi_key_writes: self.multi_key_writes,
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
    /// Aborted attempts (retried or not) of the transactions counted here.
    pub aborted: u64,
    /// Stored-procedure calls: mean protocol rounds (`OpMetrics::rounds`) per committed call; 0 otherwise.
    pub rounds_mean: f64,
    /// Read-only stored-procedure calls: mean executions (`OpMetrics::executions`) per committed call; 0 where
    /// the protocol does not count them.
    pub executions_mean: f64,
    pub ops_per_s: f64,
    pub p50_us: f64,
    pub p95_us: f64,
    pub p99_us: f64,
    pub max_us: f64,
    pub mean_us: f64,
}

/// CC-LO's readers check (Contrarian Fig. 4c, Fig. 6): means per check over the writes that ran one.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ReadersCheckSummary {
    pub checks: u64,
    pub rot_ids_total_mean: f64,
    pub rot_ids_distinct_mean: f64,
    pub keys_checked_mean: f64,
    pub partitions_contacted_mean: f64,
}

/// A run's figures, printed as a table and written as JSON.
#[derive(Clone, Debug, Serialize)]
pub struct Summary {
    pub seconds: f64,
    /// Completed operations (ROTs, GETs, PUTs, updates) per second: Contrarian's and SNOW's throughput.
    pub ops_per_s: f64,
    /// Keys read plus keys written per second: Tomsic's throughput ("each operation is a read or write in a
    /// transaction").
    pub key_ops_per_s: f64,
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
    /// Mean wait of the operations that waited, and the total waited.
    pub blocked_mean_us: f64,
    pub blocked_total_ms: f64,
    /// The longest one ROT waited at servers (exact, not from a histogram; 0: no ROT ever waited).
    pub max_rot_blocked_us: f64,
    /// The most versions one ROT received per key it read (1.0: one version per key; 0: no ROT).
    pub max_rot_versions_per_key: f64,
    /// Committed operations and transactions that wrote two or more keys.
    pub multi_key_writes: u64,
    /// `(versions skipped s, share of key reads that skipped at most s)` for s = 0..=max.
    pub staleness_cdf: Vec<(u64, f64)>,
    /// Mean of (versions skipped + 1) over key reads (Tomsic §5.3.2).
    pub multi_version_overhead: f64,
    pub rot_rounds_mean: f64,
    pub versions_per_rot: f64,
    pub versions_per_key_read: f64,
    /// Present when the protocol reported readers checks (COPS-SNOW / CC-LO).
    pub readers_check: Option<ReadersCheckSummary>,
    /// Interactive transactions committed per second (all kinds).
    pub committed_txns_per_s: f64,
    /// Aborted attempts / (aborted attempts + committed transactions): the share of attempts that aborted.
    pub abort_rate: f64,
    /// Aborted attempts per cause (`deadlock`, `conflict`, ...).
    pub aborts: BTreeMap<String, u64>,
    /// Mean attempts per committed transaction (1.0: nothing retried).
    pub attempts_per_commit: f64,
    /// Mean snapshot metadata a transaction shipped, bytes (0: not measured; the Jessy family's vector
    /// cost, NMSI §IV-A; RAMP's timestamps, write sets or Bloom filters).
    pub metadata_bytes_per_txn: f64,
    /// Update transactions' termination latency (NMSI §V, Fig. 3): from sending `Commit` to its answer, per
    /// attempt; `ok` counts the attempts that committed (their latencies are the percentiles), `fail` those
    /// that aborted at termination. Not counted in `ops_per_s`. `None` without update transactions.
    pub update_termination: Option<KindSummary>,
    /// Aborted attempts of update transactions / (those + committed update transactions).
    pub update_abort_rate: f64,
    /// Aborted attempts of update transactions, per cause.
    pub update_aborts: BTreeMap<String, u64>,
    /// Operations and transactions that ended in an error (`fail` and `info` of `per_kind`), per kind and cause.
    pub failures: Vec<FailureCount>,
}

/// How many operations of one kind failed for one cause ([`failure_cause`]).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FailureCount {
    pub kind: String,
    pub cause: String,
    pub count: u64,
}

impl KindSummary {
    /// Committed / (committed + aborted attempts): 1.0 when nothing aborted.
    pub fn commit_rate(&self) -> f64 {
        if self.ok + self.aborted == 0 { 1.0 } else { self.ok as f64 / (self.ok + self.aborted) as f64 }
    }
}

impl Summary {
    pub fn kind(&self, kind: &str) -> Option<&KindSummary> {
        self.per_kind.iter().find(|k| k.kind == kind)
    }
}

impl fmt::Display for Summary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The op column fits the longest kind (stored procedures have long names).
        let w = self.per_kind.iter().map(|k| k.kind.chars().count()).max().unwrap_or(0).max(8);
        writeln!(
            f,
            "{:<w$} {:>9} {:>6} {:>6} {:>11} {:>10} {:>10} {:>10} {:>10}",
            "op", "ok", "fail", "info", "ops/s", "p50 µs", "p95 µs", "p99 µs", "max µs"
        )?;
        for k in &self.per_kind {
            writeln!(
                f,
                "{:<w$} {:>9} {:>6} {:>6} {:>11.0} {:>10.1} {:>10.1} {:>10.1} {:>10.1}",
                k.kind, k.ok, k.fail, k.info, k.ops_per_s, k.p50_us, k.p95_us, k.p99_us, k.max_us
            )?;
        }
        writeln!(f, "total    {:>9.0} ops/s over {:.2} s", self.ops_per_s, self.seconds)?;
        writeln!(f, "         {:>9.0} key reads+writes/s", self.key_ops_per_s)?;
        write!(
            f,
            "reads: {} keys, fresh {:.2}%, max versions skipped {}, multi-version overhead {:.3}×; ROT rounds mean {:.2} max {}, versions per ROT {:.2}; blocked ops {} (mean {:.1} µs)",
            self.reads,
            self.fresh_read_share * 100.0,
            self.max_versions_skipped,
            self.multi_version_overhead,
            self.rot_rounds_mean,
            self.max_rot_rounds,
            self.versions_per_rot,
            self.blocked_ops,
            self.blocked_mean_us
        )?;
        if let Some(rc) = &self.readers_check {
            write!(
                f,
                "\nreaders checks: {}, per check: {:.1} ROT ids ({:.1} distinct), {:.1} keys, {:.1} partitions",
                rc.checks,
                rc.rot_ids_total_mean,
                rc.rot_ids_distinct_mean,
                rc.keys_checked_mean,
                rc.partitions_contacted_mean
            )?;
        }
        for failed in &self.failures {
            write!(f, "\nfailed {}: {} × {}", failed.kind, failed.count, failed.cause)?;
        }
        if self.committed_txns_per_s > 0.0 || !self.aborts.is_empty() {
            let causes: Vec<String> = self.aborts.iter().map(|(c, n)| format!("{c} {n}")).collect();
            write!(
                f,
                "\ntransactions: {:.0} committed/s, abort rate {:.2}% ({}), attempts per commit {:.3}",
                self.committed_txns_per_s,
                self.abort_rate * 100.0,
                if causes.is_empty() { "no aborts".to_string() } else { causes.join(", ") },
                self.attempts_per_commit
            )?;
        }
        if self.metadata_bytes_per_txn > 0.0 {
            write!(f, "\nsnapshot metadata: {:.1} bytes per transaction", self.metadata_bytes_per_txn)?;
        }
        if let Some(t) = &self.update_termination {
            write!(
                f,
                "\nupdate transactions: termination (commit → outcome) p50 {:.1} µs, p95 {:.1} µs, mean {:.1} µs over \
                 {} commits; abort rate {:.2}%",
                t.p50_us,
                t.p95_us,
                t.mean_us,
                t.ok,
                self.update_abort_rate * 100.0
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failure_causes_replace_numbers_and_keep_names() {
        let e = OpError::aborted(AbortCause::Conflict, "\"k17\" is locked at dc0/p12 by txn 42");
        assert_eq!(failure_cause(&e), "aborted (conflict): \"kN\" is locked at dcN/pN by txn N");
        let e = OpError::Rejected("raft-kv reads one key per request; use 2pl for 3 keys".into());
        assert_eq!(failure_cause(&e), "rejected: raft-kv reads one key per request; use 2pl for N keys");
        let long = failure_cause(&OpError::Unknown("x".repeat(200)));
        assert_eq!((long.chars().count(), long.ends_with('…')), (100, true));
    }
    use snowline_core::{OpMetrics, ReadResult, Version};

    fn rot_reply(skips: &[u32]) -> Reply {
        Reply {
            reads: skips
                .iter()
                .map(|s| ReadResult { key: "k".into(), value: None, version: Version::INITIAL, versions_skipped: *s })
                .collect(),
            commit: None,
            metrics: OpMetrics { rounds: 2, versions_returned: skips.len() as u32, ..Default::default() },
            writes: Vec::new(),
        }
    }

    #[test]
    fn a_run_without_operations_reports_zero_not_minus_zero() {
        let s = Metrics::default().summary(1.0);
        assert!(s.ops_per_s == 0.0 && s.ops_per_s.is_sign_positive(), "{}", s.ops_per_s);
        assert!(s.to_string().contains("total            0 ops/s"), "{s}");
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

    #[test]
    fn freshness_staleness_cdf_and_multi_version_overhead() {
        // Tomsic §5.3.2: 6 reads skipping 0, 0, 0, 1, 1, 3 versions.
        let mut m = Metrics::default();
        let rot = Request::Rot { keys: (0..6).map(|i| format!("k{i}").into()).collect() };
        m.record(&rot, &Ok(rot_reply(&[0, 0, 0, 1, 1, 3])), 1_000);
        let s = m.summary(1.0);
        assert!((s.fresh_read_share - 0.5).abs() < 1e-12);
        let cdf = m.staleness_cdf();
        assert_eq!(cdf.len(), 4);
        let shares: Vec<f64> = cdf.iter().map(|(_, share)| *share).collect();
        for (got, want) in shares.iter().zip([0.5, 5.0 / 6.0, 5.0 / 6.0, 1.0]) {
            assert!((got - want).abs() < 1e-12, "{shares:?}");
        }
        // Mean of (skipped + 1) = (1+1+1+2+2+4)/6 = 11/6, which is also the area over the CDF: 1 + Σ (1 − F(s)).
        let area = 1.0 + cdf.iter().map(|(_, f)| 1.0 - f).sum::<f64>();
        assert!((s.multi_version_overhead - 11.0 / 6.0).abs() < 1e-12);
        assert!((area - 11.0 / 6.0).abs() < 1e-12);
        assert_eq!(s.staleness_cdf, cdf);
        // Six keys read in one operation: Tomsic's throughput counts six.
        assert_eq!((s.ops_per_s, s.key_ops_per_s), (1.0, 6.0));
        assert!((s.versions_per_rot - 6.0).abs() < 1e-12 && (s.rot_rounds_mean - 2.0).abs() < 1e-12);
        // No reads at all: everything fresh, no overhead.
        let empty = Metrics::default().summary(1.0);
        assert_eq!((empty.fresh_read_share, empty.multi_version_overhead), (1.0, 1.0));
        assert!(empty.staleness_cdf.is_empty());
    }

    #[test]
    fn readers_check_costs_and_blocking_are_averaged_over_the_operations_that_had_them() {
        let mut m = Metrics::default();
        let put = Request::Put { key: "k".into(), value: "v".into() };
        let with = |total, distinct, blocked_ns| Reply {
            metrics: OpMetrics {
                blocked_ns,
                readers_check: Some(snowline_core::ReadersCheckCost {
                    rot_ids_total: total,
                    rot_ids_distinct: distinct,
                    keys_checked: 3,
                    partitions_contacted: 2,
                }),
                ..Default::default()
            },
            ..Default::default()
        };
        m.record(&put, &Ok(with(10, 4, 0)), 1_000);
        m.record(&put, &Ok(with(20, 6, 4_000)), 1_000);
        m.record(&put, &Ok(Reply::default()), 1_000);
        let s = m.summary(1.0);
        let rc = s.readers_check.expect("reported");
        assert_eq!(rc.checks, 2);
        assert_eq!((rc.rot_ids_total_mean, rc.rot_ids_distinct_mean), (15.0, 5.0));
        assert_eq!((rc.keys_checked_mean, rc.partitions_contacted_mean), (3.0, 2.0));
        assert_eq!((s.blocked_ops, s.blocked_mean_us, s.key_ops_per_s), (1, 4.0, 3.0));
        assert!(Metrics::default().summary(1.0).readers_check.is_none());
    }

    #[test]
    fn per_rot_maxima_and_multi_key_writes() {
        let mut m = Metrics::default();
        let rot = Request::Rot { keys: vec!["a".into(), "b".into()] };
        let mut reply = rot_reply(&[0, 0]);
        reply.metrics.versions_returned = 3;
        reply.metrics.blocked_ns = 7_000;
        m.record(&rot, &Ok(reply), 1_000);
        m.record(&rot, &Ok(rot_reply(&[0, 0])), 1_000);
        // A write that waited longer does not count as a ROT's wait.
        let update = Request::Update { writes: vec![("a".into(), "1".into()), ("b".into(), "2".into())] };
        m.record(
            &update,
            &Ok(Reply { metrics: OpMetrics { blocked_ns: 9_000, ..Default::default() }, ..Default::default() }),
            1,
        );
        m.record(&Request::Put { key: "a".into(), value: "3".into() }, &Ok(Reply::default()), 1);
        m.record_txn_writes(3);
        m.record_txn_writes(1);
        let s = m.summary(1.0);
        assert_eq!((s.max_rot_blocked_us, s.max_rot_versions_per_key, s.multi_key_writes), (7.0, 1.5, 2));
        let empty = Metrics::default().summary(1.0);
        assert_eq!((empty.max_rot_blocked_us, empty.max_rot_versions_per_key, empty.multi_key_writes), (0.0, 0.0, 0));
    }
}
