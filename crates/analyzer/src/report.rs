//! The verdicts and their two renderings: JSON ([`Report::to_json`]) and text ([`std::fmt::Display`]).

use crate::bounded::{Counterexample, ShownState};
use serde::Serialize;
use std::fmt;

/// The least coordination a transaction needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Coordination {
    /// Every invariant is I-confluent under it: run it anywhere, merge later.
    None,
    /// Only sequential ids are at stake: assign them at commit with one atomic increment at the owner of the
    /// generator (AUTO_INCREMENT, or TPC-C's `D_NEXT_O_ID`).
    OwnerIncrement,
    /// Some other invariant needs the transaction to coordinate (e.g. run it serializably).
    Serializable,
}

impl fmt::Display for Coordination {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Coordination::None => "none",
            Coordination::OwnerIncrement => "owner-increment",
            Coordination::Serializable => "serializable",
        })
    }
}

/// The verdict for one (invariant, transaction) pair.
#[derive(Debug, Clone, Serialize)]
pub struct Verdict {
    /// The constraint's name, or `table.column` where it has none.
    pub invariant: String,
    /// `uniqueness`, `not-null`, `check`, `counter`, `foreign-key`, `auto-increment`, `index` or `view`.
    pub kind: String,
    /// The transaction's name.
    pub transaction: String,
    /// I-confluent?
    pub confluent: bool,
    /// The rule that decided.
    pub rule: String,
    /// The rule's reasoning in one sentence.
    pub reason: String,
    /// For a non-confluent pair: a violating merge the bounded checker found (absent if it found none within
    /// its bound).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub counterexample: Option<Counterexample>,
}

/// One transaction's least coordination.
#[derive(Debug, Clone, Serialize)]
pub struct TransactionSummary {
    /// The transaction's name.
    pub name: String,
    /// `none`, `owner-increment` or `serializable`.
    pub coordination: Coordination,
}

/// One invariant of the schema.
#[derive(Debug, Clone, Serialize)]
pub struct InvariantSummary {
    /// Its name.
    pub name: String,
    /// Its kind.
    pub kind: String,
    /// Whether it is I-confluent under every transaction.
    pub confluent: bool,
    /// For a `CHECK (column op constant)` (kinds `check` and `counter`): what it bounds, so that a store can
    /// keep the bound where it needs coordination (absent for other kinds).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bound: Option<Bound>,
}

/// The column and comparison of a `CHECK (column op constant)`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Bound {
    pub table: String,
    pub column: String,
    /// `>=`, `>`, `<=`, `<`, `=` or `<>`.
    pub op: String,
    pub value: i64,
}

/// The analysis of a schema and its transactions.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// The schema's invariants.
    pub invariants: Vec<InvariantSummary>,
    /// One verdict per (invariant, transaction) pair, invariants in declaration order, then transactions.
    pub verdicts: Vec<Verdict>,
    /// Each transaction's least coordination.
    pub transactions: Vec<TransactionSummary>,
}

impl Report {
    /// The JSON rendering (stable; documented in the crate docs and docs/ANALYZER.md).
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("a report serializes")
    }

    /// The verdict for a pair, if there is one.
    pub fn verdict(&self, invariant: &str, transaction: &str) -> Option<&Verdict> {
        self.verdicts.iter().find(|v| v.invariant == invariant && v.transaction == transaction)
    }

    /// A transaction's coordination, if it exists.
    pub fn coordination(&self, transaction: &str) -> Option<Coordination> {
        self.transactions.iter().find(|t| t.name == transaction).map(|t| t.coordination)
    }
}

fn show_state(f: &mut fmt::Formatter<'_>, label: &str, s: &ShownState) -> fmt::Result {
    write!(f, "      {label:<9}")?;
    let mut first = true;
    for (table, rows) in s {
        if !first {
            write!(f, "; ")?;
        }
        first = false;
        let rows: Vec<String> = rows
            .iter()
            .map(|r| {
                let cols: Vec<String> =
                    r.iter().map(|(c, v)| format!("{c}={}", v.map_or("NULL".to_string(), |v| v.to_string()))).collect();
                format!("({})", cols.join(", "))
            })
            .collect();
        write!(f, "{table} {{{}}}", rows.join(" "))?;
    }
    writeln!(f)
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let unsafe_pairs = self.verdicts.iter().filter(|v| !v.confluent).count();
        writeln!(
            f,
            "{} invariants x {} transactions: {} of {} pairs not I-confluent",
            self.invariants.len(),
            self.transactions.len(),
            unsafe_pairs,
            self.verdicts.len()
        )?;
        writeln!(f)?;
        writeln!(f, "Transactions (least coordination needed, and the invariants that need it):")?;
        for t in &self.transactions {
            let because: Vec<&str> = self
                .verdicts
                .iter()
                .filter(|v| v.transaction == t.name && !v.confluent)
                .map(|v| v.invariant.as_str())
                .collect();
            if because.is_empty() {
                writeln!(f, "  {:<24} {}", t.name, t.coordination)?;
            } else {
                writeln!(f, "  {:<24} {:<16} {}", t.name, t.coordination.to_string(), because.join(", "))?;
            }
        }
        writeln!(f)?;
        writeln!(f, "Invariants:")?;
        for i in &self.invariants {
            let v = if i.confluent { "I-confluent under every transaction" } else { "NOT I-confluent" };
            writeln!(f, "  {:<32} {:<15} {v}", i.name, i.kind)?;
        }
        writeln!(f)?;
        writeln!(f, "Verdicts:")?;
        for v in &self.verdicts {
            let mark = if v.confluent { "ok " } else { "NO " };
            writeln!(f, "  {mark} {} ({}) x {}: {}", v.invariant, v.kind, v.transaction, v.rule)?;
            if !v.confluent {
                writeln!(f, "      {}", v.reason)?;
                match &v.counterexample {
                    Some(c) => {
                        writeln!(f, "      counterexample ({} | {}):", c.left_transaction, c.right_transaction)?;
                        show_state(f, "ancestor", &c.ancestor)?;
                        show_state(f, "left", &c.left)?;
                        show_state(f, "right", &c.right)?;
                        show_state(f, "merged", &c.merged)?;
                    }
                    None => writeln!(f, "      (no counterexample within the checker's bound)")?,
                }
            }
        }
        Ok(())
    }
}
