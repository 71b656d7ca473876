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
    #[serde(default)]
    invariants: Vec<InvariantSummary>,
    verdicts: Vec<Verdict>,
    transactions: Vec<TxnVerdict>,
}

#[derive(Deserialize)]
struct InvariantSummary {
    name: String,
    #[serde(default)]
    bound: Option<Bound>,
}

#[derive(Deserialize)]
struct Bound {
    table: String,
    column: String,
    op: String,
    value: i64,
}

#[derive(Deserialize)]
struct Verdict {
    invariant: String,
    transaction: String,
    confluent: bool,
    #[serde(default)]
    rule: String,
}

/// The analyzer's rules whose violations a deferred id at the counter's owner repairs (sequential ids;
/// `snowline_analyzer::rules::OWNER_INCREMENT_RULES`, which a test of the command compares).
pub const OWNER_INCREMENT_RULES: &[&str] = &["auto-increment-insert", "auto-increment-delete", "uniqueness-sequence"];

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
    /// New-Order's floor on `S_QUANTITY` when the verdicts demand one (its bounded mechanism), and the
    /// invariant's name.
    pub stock_floor: Option<(i64, String)>,
}

/// TPC-C's transactions as the analyzer's example names them, with the mechanisms the store has for each
/// (least first) and the procedure of each.
const MECHANISMS: [(&str, &[(Coordination, &str)]); 5] = [
    (
        "new_order",
        &[(Coordination::OwnerIncrement, "tpcc-cf-new-order"), (Coordination::Serializable, BOUNDED_NEW_ORDER)],
    ),
    ("payment", &[(Coordination::None, "tpcc-cf-payment")]),
    ("order_status", &[(Coordination::None, "tpcc-cf-order-status")]),
    ("delivery", &[(Coordination::None, "tpcc-cf-delivery-free"), (Coordination::Serializable, "tpcc-cf-delivery")]),
    ("stock_level", &[(Coordination::None, "tpcc-cf-stock-level")]),
];

/// New-Order keeping a floor on `S_QUANTITY` at the stock rows' owners.
const BOUNDED_NEW_ORDER: &str = "tpcc-cf-new-order-bounded";

/// The floor (`S_QUANTITY >= floor`) and invariant that make New-Order need serializable execution, if
/// that is all that does: every other invariant it breaks is one the deferred id repairs. `None` when
/// something else is at stake (no mechanism of the store then meets the requirement).
fn stock_floor(v: &Verdicts, transaction: &str) -> Option<(i64, String)> {
    let mut floor: Option<(i64, String)> = None;
    for x in v.verdicts.iter().filter(|x| x.transaction == transaction && !x.confluent) {
        if OWNER_INCREMENT_RULES.contains(&x.rule.as_str()) {
            continue;
        }
        let b = v.invariants.iter().find(|i| i.name == x.invariant)?.bound.as_ref()?;
        if !(b.table.eq_ignore_ascii_case("stock") && b.column.eq_ignore_ascii_case("s_quantity")) {
            return None;
        }
        let f = match b.op.as_str() {
            ">=" => b.value,
            ">" => b.value.checked_add(1)?,
            _ => return None,
        };
        // Several floors: the highest keeps them all.
        if floor.as_ref().is_none_or(|(g, _)| f > *g) {
            floor = Some((f, x.invariant.clone()));
        }
    }
    floor
}

impl Plan {
    /// The plan for the analyzer's JSON output; `Err` names a transaction the store cannot run with the
    /// coordination it needs (and the invariants that need it), or what is wrong with the input.
    pub fn from_json(json: &str) -> Result<Plan, String> {
        let v: Verdicts = serde_json::from_str(json)
            .map_err(|e| format!("not the analyzer's JSON output (snowline analyze --json): {e}"))?;
        let mut choices = Vec::new();
        let mut floor = None;
        for (name, mechanisms) in MECHANISMS {
            let required = v
                .transactions
                .iter()
                .find(|t| t.name == name)
                .map(|t| t.coordination)
                .ok_or_else(|| format!("the verdicts name no transaction {name:?} (TPC-C's five: new_order, payment, order_status, delivery, stock_level)"))?;
            let bounded = if name == "new_order" && required == Coordination::Serializable {
                floor = stock_floor(&v, name);
                floor.is_some()
            } else {
                false
            };
            let usable = |(m, p): &&(Coordination, &str)| *m >= required && (*p != BOUNDED_NEW_ORDER || bounded);
            let Some((mechanism, procedure)) = mechanisms.iter().find(usable) else {
                let why: Vec<&str> = v
                    .verdicts
                    .iter()
                    .filter(|x| x.transaction == name && !x.confluent)
                    .map(|x| x.invariant.as_str())
                    .collect();
                return Err(format!(
                    "{name} needs {required} execution (not invariant-confluent with {}), which a coordination-free \
                     store cannot give it (it keeps only sequential ids at their owner and floors on S_QUANTITY): \
                     run TPC-C on a serializable protocol (2pl, occ, rococo), or change the invariant",
                    if why.is_empty() { "its invariants".to_string() } else { why.join(", ") }
                ));
            };
            choices.push(Choice { transaction: name.into(), required, mechanism: *mechanism, procedure });
        }
        Ok(Plan { choices, stock_floor: floor })
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
        if let Some((floor, invariant)) = &self.stock_floor {
            writeln!(
                f,
                "  ({invariant}: S_QUANTITY >= {floor} kept at each stock row's owner; a New-Order that would break it \
                 aborts)"
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn json(new_order: &str, delivery: &str) -> String {
        json_with(new_order, delivery, "customer", "c_balance", ">=")
    }

    fn json_with(new_order: &str, delivery: &str, table: &str, column: &str, op: &str) -> String {
        format!(
            r#"{{"invariants": [
                {{"name": "stock.s_quantity_min", "kind": "counter", "confluent": false,
                  "bound": {{"table": "{table}", "column": "{column}", "op": "{op}", "value": 10}}}}],
              "verdicts": [
                {{"invariant": "stock.s_quantity_min", "kind": "counter", "transaction": "new_order", "confluent": false, "rule": "r"}},
                {{"invariant": "orders.o_id", "kind": "uniqueness", "transaction": "new_order", "confluent": false, "rule": "uniqueness-sequence"}}],
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
    fn a_floor_on_the_stock_quantity_runs_the_bounded_new_order() {
        let plan = Plan::from_json(&json_with("serializable", "serializable", "stock", "s_quantity", ">=")).unwrap();
        assert_eq!(plan.procedure("new_order"), Some(BOUNDED_NEW_ORDER));
        assert_eq!(plan.stock_floor, Some((10, "stock.s_quantity_min".into())));
        let plan = Plan::from_json(&json_with("serializable", "serializable", "stock", "s_quantity", ">")).unwrap();
        assert_eq!(plan.stock_floor.map(|f| f.0), Some(11));
        assert!(Plan::from_json(&json_with("serializable", "none", "stock", "s_quantity", "<=")).is_err());
        let plan = Plan::from_json(&json("owner-increment", "none")).unwrap();
        assert_eq!((plan.procedure("new_order"), plan.stock_floor), (Some("tpcc-cf-new-order"), None));
    }

    #[test]
    fn a_requirement_no_mechanism_meets_is_refused_with_its_invariants() {
        let err = Plan::from_json(&json("serializable", "serializable")).unwrap_err();
        assert!(err.contains("new_order needs serializable") && err.contains("stock.s_quantity_min"), "{err}");
        assert!(Plan::from_json("{}").unwrap_err().contains("snowline analyze --json"));
    }
}
