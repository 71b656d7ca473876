//! Cross-checking the rules against the bounded checker.

use snowline_analyzer::Workload;
use snowline_analyzer::bounded::{self, Bound, Outcome};
use snowline_analyzer::rules::{self, Mutation};

/// Every pair where the rules and the bounded checker disagree, described.
pub fn defects(w: &Workload, bound: &Bound, mutation: Option<Mutation>) -> Vec<String> {
    let mut out = Vec::new();
    for inv in &w.schema.invariants {
        for t in &w.transactions {
            let d = rules::decide_with(&w.schema, inv, t, &w.transactions, mutation);
            let o = bounded::check(&w.schema, inv, t, &w.transactions, bound);
            match (d.confluent, &o) {
                (true, Outcome::Counterexample(c)) => {
                    out.push(format!("{} x {}: rule {} says safe, checker found {c:?}", inv.name, t.name, d.rule))
                }
                (false, Outcome::NoCounterexample) => {
                    // Some witnesses need a third row: look once more with one.
                    let wider = Bound { max_rows: bound.max_rows + 1, ..bound.clone() };
                    if !matches!(bounded::check(&w.schema, inv, t, &w.transactions, &wider), Outcome::Counterexample(_))
                    {
                        out.push(format!(
                            "{} x {}: rule {} says unsafe, checker found no counterexample",
                            inv.name, t.name, d.rule
                        ))
                    }
                }
                (_, Outcome::Inconclusive) => {
                    out.push(format!("{} x {}: checker inconclusive within its bound", inv.name, t.name))
                }
                _ => {}
            }
        }
    }
    out
}
