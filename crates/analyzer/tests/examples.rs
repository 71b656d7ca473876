//! The shipped examples: TPC-C against the paper's §6, and the bank whose verdicts follow its invariant.

use crate::common::defects;
use snowline_analyzer::bounded::{self, Bound, Outcome};
use snowline_analyzer::{Coordination, rules};
use std::path::PathBuf;

fn example(path: &str) -> (String, String) {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..").join(path);
    (std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{path}: {e}")), path.to_string())
}

fn tpcc() -> snowline_analyzer::Workload {
    let (s, sf) = example("examples/tpcc/schema.sql");
    let (t, tf) = example("examples/tpcc/transactions.sql");
    snowline_analyzer::parse(&s, &sf, Some((&t, &tf))).unwrap_or_else(|e| panic!("{e}"))
}

const CONDITIONS: [&str; 12] = [
    "cc1_w_ytd_districts",
    "cc2_order_ids",
    "cc3_new_order_ids",
    "cc4_line_order",
    "cc5_new_order_order",
    "cc6_order_customer",
    "cc7_line_stock",
    "cc8_w_ytd_history",
    "cc9_d_ytd_history",
    "cc10_c_ytd_payment",
    "cc11_history_customer",
    "cc12_c_balance",
];

#[test]
fn tpcc_classification_agrees_with_the_paper() {
    let w = tpcc();
    let r = snowline_analyzer::analyze_workload(&w, &Bound::default());
    for c in CONDITIONS {
        assert!(r.invariants.iter().any(|i| i.name == c), "condition {c} is stated");
    }
    // §6.2: of the twelve conditions, only the sequential ids (3.3.2.2-3) fail for New-Order and the
    // coordination-free transactions (Payment, Order-Status, Stock-Level): 10 of 12 need no coordination.
    let backbone = ["new_order", "payment", "order_status", "stock_level"];
    let failing: Vec<&str> =
        CONDITIONS.iter().copied().filter(|c| backbone.iter().any(|t| !r.verdict(c, t).unwrap().confluent)).collect();
    assert_eq!(failing, ["cc2_order_ids", "cc3_new_order_ids"]);
    for c in ["cc2_order_ids", "cc3_new_order_ids"] {
        let v = r.verdict(c, "new_order").unwrap();
        assert_eq!(v.rule, "auto-increment-insert");
        assert!(v.counterexample.is_some(), "{c}");
    }
    // ... and New-Order's only coordination is the district counter's one atomic increment.
    assert_eq!(r.coordination("new_order"), Some(Coordination::OwnerIncrement));
    // "All transactions except Delivery are implementable via a combination of foreign key updates and
    // commutative counter increment/decrement":
    for t in ["payment", "order_status", "stock_level"] {
        assert_eq!(r.coordination(t), Some(Coordination::None), "{t}");
    }
    // "... and Delivery is easily implemented as a single-partition transaction": it needs coordination.
    // Its deletion of the oldest NEW-ORDER races New-Order's insert on the sequential ids (3.3.2.3; "a similar
    // process can be performed for deletion during order delivery"), and two concurrent deliveries of the
    // same order count it twice in the materialized balance of 3.3.2.12.
    assert_eq!(r.coordination("delivery"), Some(Coordination::Serializable));
    let bad: Vec<&str> = r
        .verdicts
        .iter()
        .filter(|v| v.transaction == "delivery" && !v.confluent)
        .map(|v| v.invariant.as_str())
        .collect();
    assert_eq!(bad, ["cc3_new_order_ids", "cc12_c_balance"]);
    assert_eq!(r.verdict("cc3_new_order_ids", "delivery").unwrap().rule, "auto-increment-delete");
    assert!(r.verdict("cc12_c_balance", "delivery").unwrap().counterexample.is_some());
    // JSON round trip of the documented fields.
    let j: serde_json::Value = serde_json::from_str(&r.to_json()).unwrap();
    let t = j["transactions"].as_array().unwrap();
    assert_eq!(t.iter().find(|t| t["name"] == "new_order").unwrap()["coordination"], "owner-increment");
    let v = j["verdicts"].as_array().unwrap();
    let cc2 = v.iter().find(|v| v["invariant"] == "cc2_order_ids" && v["transaction"] == "new_order").unwrap();
    assert_eq!(cc2["kind"], "auto-increment");
    assert_eq!(cc2["confluent"], false);
    assert!(cc2["counterexample"]["merged"]["orders"].is_array());
}

#[test]
fn tpcc_rules_agree_with_the_bounded_checker() {
    // The full bound spans too many states for TPC-C's wide tables; every pair is checked at the largest of
    // the default bound and its fallbacks that the checker can finish, and must agree with the rules.
    let w = tpcc();
    let mut unchecked = Vec::new();
    for inv in &w.schema.invariants {
        for t in &w.transactions {
            let d = rules::decide(&w.schema, inv, t, &w.transactions);
            let base = Bound::default();
            let o = std::iter::once(base.clone())
                .chain(base.smaller())
                .map(|b| bounded::check(&w.schema, inv, t, &w.transactions, &b))
                .find(|o| *o != Outcome::Inconclusive)
                .unwrap_or(Outcome::Inconclusive);
            match o {
                Outcome::Counterexample(_) => {
                    assert!(!d.confluent, "{} x {}: rule {} says safe", inv.name, t.name, d.rule)
                }
                Outcome::NoCounterexample => {
                    assert!(d.confluent, "{} x {}: rule {} unwitnessed", inv.name, t.name, d.rule)
                }
                Outcome::Inconclusive => unchecked.push(format!("{} x {}", inv.name, t.name)),
            }
        }
    }
    assert!(unchecked.is_empty(), "pairs the checker could not finish: {unchecked:?}");
}

fn bank(schema: &str) -> snowline_analyzer::Report {
    let (s, sf) = example(schema);
    let (t, tf) = example("examples/bank/transactions.sql");
    snowline_analyzer::analyze(&s, &sf, Some((&t, &tf))).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn bank_verdicts_follow_the_invariant() {
    let r = bank("examples/bank/schema.sql");
    assert_eq!(r.coordination("deposit"), Some(Coordination::None));
    assert_eq!(r.coordination("withdraw"), Some(Coordination::Serializable));
    assert_eq!(r.coordination("open"), Some(Coordination::None));
    assert_eq!(r.coordination("balance"), Some(Coordination::None));
    let v = r.verdict("non_negative", "withdraw").unwrap();
    assert_eq!((v.confluent, v.rule.as_str()), (false, "counter-lower-bound-decrement"));
    assert!(v.counterexample.is_some());
    assert!(r.to_string().contains("NO  non_negative (counter) x withdraw"));

    let r = bank("examples/bank/schema-capped.sql");
    assert_eq!(r.coordination("deposit"), Some(Coordination::Serializable));
    assert_eq!(r.coordination("withdraw"), Some(Coordination::None));

    let r = bank("examples/bank/schema-unchecked.sql");
    assert!(r.transactions.iter().all(|t| t.coordination == Coordination::None));
}

#[test]
fn bank_rules_agree_with_the_bounded_checker() {
    for schema in ["examples/bank/schema.sql", "examples/bank/schema-capped.sql", "examples/bank/schema-unchecked.sql"]
    {
        let (s, sf) = example(schema);
        let (t, tf) = example("examples/bank/transactions.sql");
        let w = snowline_analyzer::parse(&s, &sf, Some((&t, &tf))).unwrap();
        let d = defects(&w, &Bound::default(), None);
        assert!(d.is_empty(), "{schema}:\n{}", d.join("\n"));
    }
}
