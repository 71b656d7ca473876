//! Verdicts and anomalies: what the checker reports, for humans (`Display`) and machines (`Serialize`).

use crate::input::TxnStatus;
use crate::level::Level;
use serde::Serialize;
use snowline_core::history::HistoryOp;
use snowline_core::request::Key;
use std::collections::BTreeMap;
use std::fmt;

/// The anomalies the checker names. Their exact definitions are in the crate documentation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum AnomalyKind {
    ThinAirRead,
    AbortedRead,
    IntermediateRead,
    InternalRead,
    NonRepeatableRead,
    FracturedRead,
    CausalityGap,
    ReadYourWrites,
    MonotonicReads,
    MonotonicWrites,
    WritesFollowReads,
    CyclicCausality,
    InconsistentCommitOrder,
    /// Adya's G0 (write cycle): a dependency cycle of write-write edges only.
    G0,
    /// Adya's G1c (circular information flow): a cycle of write-write and write-read edges, at least one
    /// write-read.
    G1c,
    /// Two transactions read the same version of a key and both wrote that key: a cycle `T -RW-> U -WW-> T`.
    LostUpdate,
    /// Adya's G-single: a cycle with exactly one read-write (anti-dependency) edge; read skew.
    GSingle,
    /// Berenson et al.'s write skew: a cycle of exactly two read-write edges.
    WriteSkew,
    /// Fekete et al.'s read-only transaction anomaly: a cycle with two adjacent read-write edges through a
    /// read-only transaction; the update transactions alone are serializable.
    ReadOnlyAnomaly,
    /// Sovran et al.'s long fork: a cycle with two or more read-write edges, no two adjacent (observers
    /// disagree on the order of independent updates).
    LongFork,
    /// Adya's G2-item: any other cycle with two or more read-write edges.
    G2Item,
    /// A transaction's snapshot misses a version that an earlier transaction of its own session wrote or
    /// observed: a cycle with one read-write edge `T -RW-> W` entered through session order into `T`.
    NonMonotonicSnapshot,
    /// A cycle that needs session order (SO) edges, other than a non-monotonic snapshot.
    ProcessOrderViolation,
    /// A cycle that needs real-time (RT) edges: a transaction ordered after one that completed before it
    /// was invoked.
    RealTimeViolation,
    /// The input is not a well-formed history (only from [`crate::check`], which validates first).
    InvalidHistory,
}

impl AnomalyKind {
    pub const ALL: [AnomalyKind; 25] = [
        AnomalyKind::ThinAirRead,
        AnomalyKind::AbortedRead,
        AnomalyKind::IntermediateRead,
        AnomalyKind::InternalRead,
        AnomalyKind::NonRepeatableRead,
        AnomalyKind::FracturedRead,
        AnomalyKind::CausalityGap,
        AnomalyKind::ReadYourWrites,
        AnomalyKind::MonotonicReads,
        AnomalyKind::MonotonicWrites,
        AnomalyKind::WritesFollowReads,
        AnomalyKind::CyclicCausality,
        AnomalyKind::InconsistentCommitOrder,
        AnomalyKind::G0,
        AnomalyKind::G1c,
        AnomalyKind::LostUpdate,
        AnomalyKind::GSingle,
        AnomalyKind::WriteSkew,
        AnomalyKind::ReadOnlyAnomaly,
        AnomalyKind::LongFork,
        AnomalyKind::G2Item,
        AnomalyKind::NonMonotonicSnapshot,
        AnomalyKind::ProcessOrderViolation,
        AnomalyKind::RealTimeViolation,
        AnomalyKind::InvalidHistory,
    ];

    /// The kebab-case name used in reports.
    pub fn name(self) -> &'static str {
        match self {
            AnomalyKind::ThinAirRead => "thin-air-read",
            AnomalyKind::AbortedRead => "aborted-read",
            AnomalyKind::IntermediateRead => "intermediate-read",
            AnomalyKind::InternalRead => "internal-read",
            AnomalyKind::NonRepeatableRead => "non-repeatable-read",
            AnomalyKind::FracturedRead => "fractured-read",
            AnomalyKind::CausalityGap => "causality-gap",
            AnomalyKind::ReadYourWrites => "read-your-writes",
            AnomalyKind::MonotonicReads => "monotonic-reads",
            AnomalyKind::MonotonicWrites => "monotonic-writes",
            AnomalyKind::WritesFollowReads => "writes-follow-reads",
            AnomalyKind::CyclicCausality => "cyclic-causality",
            AnomalyKind::InconsistentCommitOrder => "inconsistent-commit-order",
            AnomalyKind::G0 => "g0",
            AnomalyKind::G1c => "g1c",
            AnomalyKind::LostUpdate => "lost-update",
            AnomalyKind::GSingle => "g-single",
            AnomalyKind::WriteSkew => "write-skew",
            AnomalyKind::ReadOnlyAnomaly => "read-only-anomaly",
            AnomalyKind::LongFork => "long-fork",
            AnomalyKind::G2Item => "g2-item",
            AnomalyKind::NonMonotonicSnapshot => "non-monotonic-snapshot",
            AnomalyKind::ProcessOrderViolation => "process-order-violation",
            AnomalyKind::RealTimeViolation => "real-time-violation",
            AnomalyKind::InvalidHistory => "invalid-history",
        }
    }

    /// The kind with this name, or with this alias: Adya's `g1a` is `aborted-read` and `g1b` is
    /// `intermediate-read`.
    pub fn from_name(name: &str) -> Option<AnomalyKind> {
        match name {
            "g1a" => Some(AnomalyKind::AbortedRead),
            "g1b" => Some(AnomalyKind::IntermediateRead),
            _ => AnomalyKind::ALL.into_iter().find(|k| k.name() == name),
        }
    }
}

impl fmt::Display for AnomalyKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A transaction involved in an anomaly, with the micro-operations that matter to it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct OpRef {
    /// `T` and the invoke's history index.
    pub txn: String,
    /// History index of the invoke.
    pub index: u64,
    /// History index of the completion (`None`: never completed).
    pub complete_index: Option<u64>,
    pub process: u64,
    pub status: TxnStatus,
    /// The transaction's micro-operations on the keys the anomaly involves, in order.
    pub ops: Vec<HistoryOp>,
}

/// The dependency-graph edge kinds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub enum EdgeKind {
    /// Session order: same process, earlier.
    SO,
    /// Write-read: the target read a version the source wrote.
    WR,
    /// Write-write: the source's version of a key precedes the target's.
    WW,
    /// Read-write (anti-dependency): the target overwrote (a successor of) the version the source read.
    RW,
    /// Real time: the source completed before the target was invoked (strict serializability).
    RT,
}

/// One justified edge of a witness.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Edge {
    pub kind: EdgeKind,
    /// A transaction name, or `init` for the initial version.
    pub from: String,
    pub to: String,
    pub key: Option<Key>,
    /// One line: why the edge holds, e.g. "T5 read k1=v-3-17 written by T2".
    pub why: String,
}

/// One anomaly with a minimal witness.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Anomaly {
    pub name: AnomalyKind,
    /// One line describing the anomaly.
    pub summary: String,
    /// The transactions involved, in history order.
    pub ops: Vec<OpRef>,
    /// The edges that justify it.
    pub edges: Vec<Edge>,
}

impl fmt::Display for Anomaly {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "{}: {}", self.name, self.summary)?;
        for op in &self.ops {
            let done = op.complete_index.map_or("-".to_string(), |i| i.to_string());
            let micro: Vec<String> = op.ops.iter().map(crate::input::fmt_op).collect();
            writeln!(
                f,
                "    {} (index {}..{done}, process {}, {}): {}",
                op.txn,
                op.index,
                op.process,
                op.status,
                micro.join(", ")
            )?;
        }
        for e in &self.edges {
            writeln!(f, "    {:?}: {}", e.kind, e.why)?;
        }
        Ok(())
    }
}

/// The outcome of a check.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Verdict {
    pub level: Level,
    /// No anomaly found.
    pub ok: bool,
    /// The anomalies with their witnesses: at most [`Verdict::MAX_PER_KIND`] per kind, in history order.
    pub anomalies: Vec<Anomaly>,
    /// How many anomalies of each kind were found in all (including those not listed).
    pub counts: BTreeMap<AnomalyKind, usize>,
    /// For the dependency-graph levels: what the verdict rests on (the version order: reported, or which
    /// inference; and whether a search decided the writers the inference left unordered).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub basis: Option<String>,
    /// No anomaly was found, but the level is not proven: the version order could not be inferred and the
    /// search for one under which the level holds ran out of budget. `ok` is then `true`.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub inconclusive: bool,
}

impl Verdict {
    /// How many anomalies of one kind are listed with a witness.
    pub const MAX_PER_KIND: usize = 32;

    /// The kinds found, in name order.
    pub fn kinds(&self) -> Vec<AnomalyKind> {
        self.counts.keys().copied().collect()
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.ok {
            let what = if self.inconclusive { "ok (inconclusive: not proven)" } else { "ok" };
            writeln!(f, "{}: {what}", self.level)?;
            if let Some(b) = &self.basis {
                writeln!(f, "    {b}")?;
            }
            return Ok(());
        }
        let counts: Vec<String> = self.counts.iter().map(|(k, n)| format!("{k} x{n}")).collect();
        writeln!(f, "{}: FAILED ({})", self.level, counts.join(", "))?;
        if let Some(b) = &self.basis {
            writeln!(f, "    {b}")?;
        }
        for a in &self.anomalies {
            write!(f, "{a}")?;
        }
        let listed = self.anomalies.len();
        let total: usize = self.counts.values().sum();
        if total > listed {
            writeln!(f, "({} more not listed)", total - listed)?;
        }
        Ok(())
    }
}
