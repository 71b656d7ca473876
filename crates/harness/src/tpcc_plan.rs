//! The analyzer's verdicts choosing how a coordination-free store runs each TPC-C transaction: the link
//! between `snowline analyze --json` (`docs/ANALYZER.md`) and the `tpcc-cf-*` procedures
//! (`docs/COORDINATION.md`).
//!
//! For each of TPC-C's five transactions the analyzer names the least coordination its invariants need
//! (`none`, `owner-increment` or `serializable`). A coordination-free store has one mechanism per level:
//! RAMP's atomically visible write (none), the deferred id at the counter's owner (owner-increment, which
//! only New-Order's sequential id can use), and serial execution at one partition (serializable, which only
//! a single-partition transaction can use: Delivery of one district). The plan takes, per transaction, the
//! least mechanism at or above what the analyzer requires; a transaction whose requirement no mechanism of
//! the store meets (New-Order under `CHECK (S_QUANTITY >= 10)`: serializable, across partitions) is refused
//! with the invariants that demand it, rather than run with less coordination than it needs.

use serde::Deserialize;
use std::fmt;

/// Coordination levels, least first (the analyzer's `coordination` values).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Coordination {
    None,
    OwnerIncrement,
    Serializable,
}

impl fmt::Display for Coordination {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(match self {
            Coordination::None => "none",
            Coordination::OwnerIncrement => "owner-increment",
            Coordination::Serializable => "serializable",
        })
    }
}

#[derive(Deserialize)]
struct Verdicts {
    verdicts: Vec<Verdict>,
    transactions: Vec<TxnVerdict>,
}

#[derive(Deserialize)]
struct Verdict {
    invariant: String,
    transaction: String,
    confluent: bool,
}

#[derive(Deserialize)]
struct TxnVerdict {
    name: String,
    coordination: Coordination,
}

/// One transaction's choice.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Choice {
    /// The analyzer's name (`new_order`, …).
    pub transaction: String,
    pub required: Coordination,
    /// What the store runs it with.
    pub mechanism: Coordination,
    /// The procedure that runs it.
    pub procedure: &'static str,
}

/// Every transaction's choice.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Plan {
    pub choices: Vec<Choice>,
}

/// TPC-C's transactions as the analyzer's example names them, with the mechanisms the store has for each
/// (least first) and the procedure of each.
const MECHANISMS: [(&str, &[(Coordination, &str)]); 5] = [
    ("new_order", &[(Coordination::OwnerIncrement, "tpcc-cf-new-order")]),
    ("payment", &[(Coordination::None, "tpcc-cf-payment")]),
    ("order_status", &[(Coordination::None, "tpcc-cf-order-status")]),
    ("delivery", &[(Coordination::None, "tpcc-cf-delivery-free"), (Coordination::Serializable, "tpcc-cf-delivery")]),
    ("stock_level", &[(Coordination::None, "tpcc-cf-stock-level")]),
];

impl Plan {
    /// The plan for the analyzer's JSON output; `Err` names a transaction the store cannot run with the
    /// coordination it needs (and the invariants that need it), or what is wrong with the input.
    pub fn from_json(json: &str) -> Result<Plan, String> {
        let v: Verdicts = serde_json::from_str(json)
            .map_err(|e| format!("not the analyzer's JSON output (snowline analyze --json): {e}"))?;
        let mut choices = Vec::new();
        for (name, mechanisms) in MECHANISMS {
            let required = v
                .transactions
                .iter()
                .find(|t| t.name == name)
                .map(|t| t.coordination)
                .ok_or_else(|| format!("the verdicts name no transaction {name:?} (TPC-C's five: new_order, payment, order_status, delivery, stock_level)"))?;
            let Some((mechanism, procedure)) = mechanisms.iter().find(|(m, _)| *m >= required) else {
                let why: Vec<&str> = v
                    .verdicts
                    .iter()
                    .filter(|x| x.transaction == name && !x.confluent)
                    .map(|x| x.invariant.as_str())
                    .collect();
                let best = mechanisms.last().map_or(Coordination::None, |(m, _)| *m);
                return Err(format!(
                    "{name} needs {required} execution (not invariant-confluent with {}), which a coordination-free \
                     store cannot give it (its most is {best}): run TPC-C on a serializable protocol (2pl, occ, \
                     rococo), or change the invariant",
                    if why.is_empty() { "its invariants".to_string() } else { why.join(", ") }
                ));
            };
            choices.push(Choice { transaction: name.into(), required, mechanism: *mechanism, procedure });
        }
        Ok(Plan { choices })
    }

    /// The procedure running the classic transaction `tpcc-…` (`None`: the plan does not say).
    pub fn procedure(&self, transaction: &str) -> Option<&'static str> {
        self.choices.iter().find(|c| c.transaction == transaction).map(|c| c.procedure)
    }
}

impl fmt::Display for Plan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "mechanisms, from the analyzer's verdicts:")?;
        for c in &self.choices {
            writeln!(f, "  {:<13} needs {:<16} runs {:<16} ({})", c.transaction, c.required, c.mechanism, c.procedure)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn json(new_order: &str, delivery: &str) -> String {
        format!(
            r#"{{"invariants": [], "verdicts": [
                {{"invariant": "stock.s_quantity_min", "kind": "check", "transaction": "new_order", "confluent": false, "rule": "r"}}],
              "transactions": [
                {{"name": "new_order", "coordination": "{new_order}"}},
                {{"name": "payment", "coordination": "none"}},
                {{"name": "order_status", "coordination": "none"}},
                {{"name": "delivery", "coordination": "{delivery}"}},
                {{"name": "stock_level", "coordination": "none"}}]}}"#
        )
    }

    #[test]
    fn each_transaction_gets_the_least_mechanism_at_or_above_its_requirement() {
        let plan = Plan::from_json(&json("owner-increment", "serializable")).unwrap();
        assert_eq!(plan.procedure("new_order"), Some("tpcc-cf-new-order"));
        assert_eq!(plan.procedure("delivery"), Some("tpcc-cf-delivery"));
        let plan = Plan::from_json(&json("none", "none")).unwrap();
        assert_eq!(plan.procedure("delivery"), Some("tpcc-cf-delivery-free"));
        assert_eq!(plan.choices[0].mechanism, Coordination::OwnerIncrement, "ids are always taken at the owner");
    }

    #[test]
    fn a_requirement_no_mechanism_meets_is_refused_with_its_invariants() {
        let err = Plan::from_json(&json("serializable", "serializable")).unwrap_err();
        assert!(err.contains("new_order needs serializable") && err.contains("stock.s_quantity_min"), "{err}");
        assert!(Plan::from_json("{}").unwrap_err().contains("snowline analyze --json"));
    }
}
