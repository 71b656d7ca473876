//! snowline-analyzer: which transactions need coordination to keep a schema's invariants.
//!
//! An implementation of invariant confluence (I-confluence) analysis from Bailis et al., "Coordination
//! Avoidance in Database Systems" (VLDB 2015): a set of transactions can run without coordination while
//! keeping invariant *I* iff any two I-valid states reached from a common I-valid ancestor merge into an
//! I-valid state. The analyzer reads SQL DDL (the invariants) and transaction templates (SQL DML), decides
//! each (invariant, transaction) pair with the paper's Table 2 rules ([`rules`]), backs each "not
//! I-confluent" with a counterexample from a brute-force bounded checker ([`bounded`]), and classifies each
//! transaction's least coordination: `none`, `owner-increment` or `serializable`.
//!
//! ```
//! let schema = "CREATE TABLE account (id INT PRIMARY KEY, balance INT NOT NULL, CHECK (balance >= 0));\n\
//!               -- @counter account.balance\n\
//!               -- transaction: deposit\n\
//!               UPDATE account SET balance = balance + ? WHERE id = ?;\n\
//!               -- transaction: withdraw\n\
//!               UPDATE account SET balance = balance - ? WHERE id = ?;\n";
//! let report = snowline_analyzer::analyze(schema, "bank.sql", None).unwrap();
//! assert_eq!(report.coordination("deposit"), Some(snowline_analyzer::Coordination::None));
//! assert_eq!(report.coordination("withdraw"), Some(snowline_analyzer::Coordination::Serializable));
//! ```
//!
//! # Input
//!
//! The schema file holds `CREATE TABLE` (and `CREATE [UNIQUE] INDEX`) statements; transactions follow a line
//! `-- transaction: NAME`, in the schema file after the DDL or in a separate file. Annotations in comments
//! declare what DDL cannot say; see [`schema`] and docs/ANALYZER.md.
//!
//! # JSON output (stable)
//!
//! ```json
//! {
//!   "invariants":   [ { "name": "...", "kind": "...", "confluent": true,
//!                       "bound": { "table": "...", "column": "...", "op": ">=", "value": 0 } } ],
//!   "verdicts":     [ { "invariant": "account.balance", "kind": "counter", "transaction": "withdraw",
//!                       "confluent": false, "rule": "counter-lower-bound-decrement", "reason": "...",
//!                       "counterexample": { "ancestor": {TABLE: [ {COLUMN: VALUE-or-null} ]},
//!                                           "left_transaction": "...", "left": {...},
//!                                           "right_transaction": "...", "right": {...}, "merged": {...} } } ],
//!   "transactions": [ { "name": "withdraw", "coordination": "serializable" } ]
//! }
//! ```
//!
//! `kind` is one of `uniqueness`, `not-null`, `check`, `counter`, `foreign-key`, `auto-increment`, `index`,
//! `view`; `coordination` one of `none`, `owner-increment`, `serializable`. `counterexample` appears only on
//! non-confluent verdicts, and only when the checker found one within its bound. `bound` appears on `check`
//! and `counter` invariants only.

pub mod bounded;
pub mod error;
pub mod model;
pub mod report;
pub mod rules;
pub mod schema;
mod source;
mod sqlutil;
pub mod txn;

pub use error::{AnalyzeError, Loc};
pub use report::{Coordination, Report, Verdict};

use model::{Schema, Transaction};

/// A parsed workload: the schema and its transaction templates.
#[derive(Debug, Clone)]
pub struct Workload {
    /// Tables and invariants.
    pub schema: Schema,
    /// Transaction templates, schema file first.
    pub transactions: Vec<Transaction>,
}

/// Parses a schema (and transactions, from the schema file and/or `txns` = `(text, file name)`).
pub fn parse(schema_sql: &str, schema_file: &str, txns: Option<(&str, &str)>) -> Result<Workload, AnalyzeError> {
    let (parts, mut anns) = source::split(schema_sql, schema_file)?;
    let ddl = source::parse(&parts[0].padded, schema_file, &parts[0].loc)?;
    let starts = source::statement_starts(&parts[0].padded, schema_file);
    let mut schema = schema::build(&ddl, &starts, schema_file, &parts[0].loc)?;
    let mut txn_parts: Vec<(source::Part, String)> =
        parts.into_iter().skip(1).map(|p| (p, schema_file.to_string())).collect();
    if let Some((text, file)) = txns {
        let (parts, more) = source::split(text, file)?;
        anns.extend(more);
        let pre = source::parse(&parts[0].padded, file, &parts[0].loc)?;
        if let Some(st) = pre.first() {
            let loc = Loc::of_span(file, sqlparser::ast::Spanned::span(st), &parts[0].loc);
            return Err(AnalyzeError::at(
                &loc,
                "statement outside a transaction: start one with `-- transaction: NAME`",
            ));
        }
        for p in parts.into_iter().skip(1) {
            if let Some((q, _)) = txn_parts.iter().find(|(q, _)| q.name == p.name) {
                return Err(AnalyzeError::at(
                    &p.loc,
                    format!("transaction {:?} is declared twice (first at {})", p.name.as_deref().unwrap_or(""), q.loc),
                ));
            }
            txn_parts.push((p, file.to_string()));
        }
    }
    schema::apply_annotations(&mut schema, &anns)?;
    let transactions =
        txn_parts.iter().map(|(p, file)| txn::transaction(&schema, p, file)).collect::<Result<Vec<_>, _>>()?;
    Ok(Workload { schema, transactions })
}

/// Analyzes a schema and its transactions with the default checker bound.
pub fn analyze(schema_sql: &str, schema_file: &str, txns: Option<(&str, &str)>) -> Result<Report, AnalyzeError> {
    Ok(analyze_workload(&parse(schema_sql, schema_file, txns)?, &bounded::Bound::default()))
}

/// [`analyze`] on files: the schema at `schema`, transactions (if any) at `txns`. A file that cannot be read
/// is an error at its line 1 (for a CLI command: print the error, exit non-zero).
pub fn analyze_files(schema: &std::path::Path, txns: Option<&std::path::Path>) -> Result<Report, AnalyzeError> {
    let read = |p: &std::path::Path| {
        let name = p.display().to_string();
        std::fs::read_to_string(p)
            .map(|t| (t, name.clone()))
            .map_err(|e| AnalyzeError::at(&Loc::new(&name, 1, 1), format!("cannot read the file: {e}")))
    };
    let (schema_sql, schema_file) = read(schema)?;
    let txns = txns.map(read).transpose()?;
    analyze(&schema_sql, &schema_file, txns.as_ref().map(|(t, f)| (t.as_str(), f.as_str())))
}

/// Decides every pair of a parsed workload; `bound` limits the search for counterexamples.
pub fn analyze_workload(w: &Workload, bound: &bounded::Bound) -> Report {
    let mut verdicts = Vec::new();
    for inv in &w.schema.invariants {
        for t in &w.transactions {
            let d = rules::decide(&w.schema, inv, t, &w.transactions);
            let counterexample = if d.confluent {
                None
            } else {
                // The bound first, then smaller ones when it spans too many states (large schemas).
                std::iter::once(bound.clone())
                    .chain(bound.smaller())
                    .find_map(|b| match bounded::check(&w.schema, inv, t, &w.transactions, &b) {
                        bounded::Outcome::Counterexample(c) => Some(Some(*c)),
                        bounded::Outcome::NoCounterexample => Some(None),
                        bounded::Outcome::Inconclusive => None,
                    })
                    .flatten()
            };
            verdicts.push(Verdict {
                invariant: inv.name.clone(),
                kind: inv.kind.kind_name().to_string(),
                transaction: t.name.clone(),
                confluent: d.confluent,
                rule: d.rule.to_string(),
                reason: d.why,
                counterexample,
            });
        }
    }
    let transactions = w
        .transactions
        .iter()
        .map(|t| {
            let bad: Vec<&Verdict> = verdicts.iter().filter(|v| v.transaction == t.name && !v.confluent).collect();
            let coordination = if bad.is_empty() {
                Coordination::None
            } else if bad.iter().all(|v| rules::OWNER_INCREMENT_RULES.contains(&v.rule.as_str())) {
                Coordination::OwnerIncrement
            } else {
                Coordination::Serializable
            };
            report::TransactionSummary { name: t.name.clone(), coordination }
        })
        .collect();
    let invariants = w
        .schema
        .invariants
        .iter()
        .map(|i| report::InvariantSummary {
            name: i.name.clone(),
            kind: i.kind.kind_name().to_string(),
            confluent: verdicts.iter().filter(|v| v.invariant == i.name).all(|v| v.confluent),
            bound: match &i.kind {
                model::InvariantKind::Check { table, column, op, value }
                | model::InvariantKind::Counter { table, column, op, value } => Some(report::Bound {
                    table: table.clone(),
                    column: column.clone(),
                    op: op.sql().to_string(),
                    value: *value,
                }),
                _ => None,
            },
        })
        .collect();
    Report { invariants, verdicts, transactions }
}
