//! Golden histories: for each anomaly one history that must fail and a near-identical one that must pass.
//! Process 0 is usually the writer ("Alice"), process 1 the reader ("Bob").

use crate::common;

use common::{Builder, expect, parse_jsonl};
use snowline_checker::{CommitOrder, Level, check, check_with_order, validate};
use std::collections::BTreeMap;

const ALL: [Level; 5] = Level::VISIBILITY;
use Level::{Causal, CausalSnapshot, Ra, Rc, Tcc};

fn all_pass(b: &Builder) {
    let expected: Vec<(Level, &[&str])> = ALL.iter().map(|&l| (l, &[][..])).collect();
    expect(&b.events, &expected);
}

fn golden(name: &str) -> Vec<snowline_core::HistoryEvent> {
    let path = format!("{}/tests/golden/{name}.jsonl", env!("CARGO_MANIFEST_DIR"));
    parse_jsonl(&std::fs::read_to_string(path).unwrap())
}

/// Tomsic et al. §2.2 and Didona et al. §1: Alice restricts the ACL, then posts a photo; Bob's read-only
/// transaction sees the photo with the old ACL.
#[test]
fn photo_acl_is_a_causality_gap() {
    let fail = golden("photo-acl-fail");
    let gap: &[&str] = &["causality-gap"];
    expect(&fail, &[(Rc, &[]), (Ra, &[]), (CausalSnapshot, gap), (Causal, gap), (Tcc, gap)]);
    let v = check(&fail, CausalSnapshot);
    let text = v.to_string();
    assert!(text.contains("T4 read photos=photo-beach (written by T2), but acl=<initial>"), "{text}");
    assert!(text.contains("SO: T0 then T2 in process 0"), "{text}");
    assert!(text.contains("WR: T4 read photos=photo-beach written by T2"), "{text}");
    assert!(text.contains("RW: T4 read acl=<initial>, older than acl=acl-friends-only written by T0"), "{text}");
    let json = serde_json::to_value(&v).unwrap();
    assert_eq!(json["ok"], false);
    assert_eq!(json["level"], "causal-snapshot");
    assert_eq!(json["anomalies"][0]["name"], "causality-gap");
    assert_eq!(json["counts"]["causality-gap"], 1);
    for name in ["photo-acl-pass", "photo-acl-old-photos"] {
        let events = golden(name);
        for level in ALL {
            assert!(check(&events, level).ok, "{name} at {level}");
        }
    }
}

#[test]
fn thin_air_read() {
    let mut b = Builder::new();
    b.txn(0, "ok", "w x x1").txn(1, "ok", "r x x2");
    expect(&b.events, &[(Rc, &["thin-air-read"]), (Tcc, &["thin-air-read"])]);
    // A value written, but to another key.
    let mut b = Builder::new();
    b.txn(0, "ok", "w y x2").txn(1, "ok", "r x x2");
    expect(&b.events, &[(Rc, &["thin-air-read"])]);
    let mut b = Builder::new();
    b.txn(0, "ok", "w x x1").txn(1, "ok", "r x x1");
    all_pass(&b);
}

#[test]
fn aborted_read_but_info_writes_may_be_read() {
    let mut b = Builder::new();
    b.txn(0, "fail", "w x x1").txn(1, "ok", "r x x1");
    expect(&b.events, &[(Rc, &["aborted-read"]), (Tcc, &["aborted-read"])]);
    let mut b = Builder::new();
    b.txn(0, "info", "w x x1").txn(1, "ok", "r x x1");
    all_pass(&b);
    // An invoke never completed counts as info.
    let mut b = Builder::new();
    b.invoke(0, "w x x1").txn(1, "ok", "r x x1");
    all_pass(&b);
}

#[test]
fn intermediate_read() {
    let mut b = Builder::new();
    b.txn(0, "ok", "w x x1, w x x2").txn(1, "ok", "r x x1");
    expect(&b.events, &[(Rc, &["intermediate-read"]), (Tcc, &["intermediate-read"])]);
    let mut b = Builder::new();
    b.txn(0, "ok", "w x x1, w x x2").txn(1, "ok", "r x x2");
    all_pass(&b);
}

#[test]
fn internal_read() {
    let mut b = Builder::new();
    b.txn(0, "ok", "w x x1, r x _");
    expect(&b.events, &[(Rc, &["internal-read"])]);
    let mut b = Builder::new();
    b.txn(0, "ok", "r x x1, w x x1");
    expect(&b.events, &[(Rc, &["internal-read"])]);
    let mut b = Builder::new();
    b.txn(0, "ok", "w x x1, r x x1");
    all_pass(&b);
}

#[test]
fn non_repeatable_read() {
    let mut b = Builder::new();
    b.txn(0, "ok", "w x x1").txn(1, "ok", "r x x1, r x _");
    let nr: &[&str] = &["non-repeatable-read"];
    expect(&b.events, &[(Rc, &[]), (Ra, nr), (CausalSnapshot, nr), (Causal, nr), (Tcc, nr)]);
    let mut b = Builder::new();
    b.txn(0, "ok", "w x x1").txn(1, "ok", "r x x1, r x x1");
    all_pass(&b);
}

#[test]
fn fractured_read() {
    // Bob sees half of Alice's atomic update.
    let mut b = Builder::new();
    b.txn(0, "ok", "w x x1, w y y1").txn(1, "ok", "r x x1, r y _");
    let fr: &[&str] = &["fractured-read"];
    expect(&b.events, &[(Rc, &[]), (Ra, fr), (CausalSnapshot, &[]), (Causal, &[]), (Tcc, fr)]);
    let mut b = Builder::new();
    b.txn(0, "ok", "w x x1, w y y1").txn(1, "ok", "r x x1, r y y1");
    all_pass(&b);
    // An older version that happens-before the update is fractured too...
    let mut b = Builder::new();
    b.txn(0, "ok", "w y y0").txn(0, "ok", "w x x1, w y y1").txn(1, "ok", "r x x1, r y y0");
    expect(&b.events, &[(Ra, fr)]);
    // ...but a concurrent version is not ordered before the update.
    let mut b = Builder::new();
    b.txn(2, "ok", "w y y0").txn(0, "ok", "w x x1, w y y1").txn(1, "ok", "r x x1, r y y0");
    all_pass(&b);
    // A write-read-write chain orders y0 before y1: process 0 read y0, then updated.
    let mut b = Builder::new();
    b.txn(2, "ok", "w y y0").txn(0, "ok", "r y y0").txn(0, "ok", "w x x1, w y y1").txn(1, "ok", "r x x1, r y y0");
    expect(&b.events, &[(Ra, fr)]);
}

#[test]
fn read_your_writes() {
    let mut b = Builder::new();
    b.txn(0, "ok", "w x x1").txn(0, "ok", "r x _");
    let ryw: &[&str] = &["read-your-writes"];
    expect(&b.events, &[(Ra, &[]), (CausalSnapshot, &[]), (Causal, ryw), (Tcc, ryw)]);
    let mut b = Builder::new();
    b.txn(0, "ok", "w x x1").txn(0, "ok", "r x x1");
    all_pass(&b);
    // After an info the client is a new session: no obligation.
    let mut b = Builder::new();
    b.txn(0, "ok", "w x x1").txn(0, "info", "w z z1").txn(1, "ok", "r x _");
    all_pass(&b);
}

#[test]
fn monotonic_reads() {
    let mut b = Builder::new();
    b.txn(0, "ok", "w x x1").txn(0, "ok", "w x x2").txn(1, "ok", "r x x2").txn(1, "ok", "r x x1");
    let mr: &[&str] = &["monotonic-reads"];
    expect(&b.events, &[(CausalSnapshot, &[]), (Causal, mr), (Tcc, mr)]);
    let mut b = Builder::new();
    b.txn(0, "ok", "w x x1").txn(0, "ok", "w x x2").txn(1, "ok", "r x x1").txn(1, "ok", "r x x2");
    all_pass(&b);
    // Transactional: having observed one key of an atomic update, a session must see its other keys (tcc),
    // though plain causal consistency counts versions, not transactions.
    let mut b = Builder::new();
    b.txn(0, "ok", "w x x1, w y y1").txn(1, "ok", "r x x1").txn(1, "ok", "r y _");
    expect(&b.events, &[(Ra, &[]), (Causal, &[]), (Tcc, mr)]);
}

#[test]
fn monotonic_writes() {
    let mut b = Builder::new();
    b.txn(0, "ok", "w x x1").txn(0, "ok", "w y y1").txn(1, "ok", "r y y1").txn(1, "ok", "r x _");
    let mw: &[&str] = &["monotonic-writes"];
    expect(&b.events, &[(CausalSnapshot, &[]), (Causal, mw), (Tcc, mw)]);
    let mut b = Builder::new();
    b.txn(0, "ok", "w x x1").txn(0, "ok", "w y y1").txn(1, "ok", "r y y1").txn(1, "ok", "r x x1");
    all_pass(&b);
}

#[test]
fn writes_follow_reads() {
    let mut b = Builder::new();
    b.txn(0, "ok", "w x x1").txn(1, "ok", "r x x1").txn(1, "ok", "w y y1").txn(2, "ok", "r y y1").txn(2, "ok", "r x _");
    let wfr: &[&str] = &["writes-follow-reads"];
    expect(&b.events, &[(CausalSnapshot, &[]), (Causal, wfr), (Tcc, wfr)]);
    let v = check(&b.events, Causal);
    let edges: Vec<&str> = v.anomalies[0].edges.iter().map(|e| e.why.as_str()).collect();
    assert_eq!(
        edges,
        [
            "T2 read x=x1 written by T0",
            "T2 then T4 in process 1",
            "T6 read y=y1 written by T4",
            "T6 precedes T8 in process 2",
            "T8 read x=<initial>, the initial version",
            "the initial version of x precedes every write, here x=x1 (T0)",
            "T8 read x=<initial>, older than x=x1 written by T0",
        ]
    );
    let mut b = Builder::new();
    b.txn(0, "ok", "w x x1")
        .txn(1, "ok", "r x x1")
        .txn(1, "ok", "w y y1")
        .txn(2, "ok", "r y y1")
        .txn(2, "ok", "r x x1");
    all_pass(&b);
}

#[test]
fn cyclic_causality() {
    // Each reads the other's write.
    let mut b = Builder::new();
    b.txn(0, "ok", "w x x1, r y y1").txn(1, "ok", "w y y1, r x x1");
    let cyc: &[&str] = &["cyclic-causality"];
    expect(&b.events, &[(Rc, &[]), (Ra, &[]), (CausalSnapshot, &[]), (Causal, cyc), (Tcc, cyc)]);
    let v = check(&b.events, Causal);
    assert!(v.anomalies[0].summary.contains("T0 -> T2 -> T0"), "{v}");
    // Reading a value the own session writes only later.
    let mut b = Builder::new();
    b.txn(0, "ok", "r x x1").txn(0, "ok", "w x x1");
    expect(&b.events, &[(Causal, cyc)]);
    let mut b = Builder::new();
    b.txn(0, "ok", "w x x1, r y _").txn(1, "ok", "w y y1, r x x1");
    all_pass(&b);
}

#[test]
fn commit_order_is_verified_then_used() {
    let order = |pairs: &[(&str, &[&str])]| CommitOrder {
        keys: pairs.iter().map(|(k, vs)| ((*k).into(), vs.iter().map(|&v| v.into()).collect())).collect(),
    };
    // Contradicting happens-before.
    let mut b = Builder::new();
    b.txn(0, "ok", "w x x1").txn(0, "ok", "w x x2");
    let h = validate(&b.events).unwrap();
    let v = check_with_order(&h, Ra, &order(&[("x", &["x2", "x1"])])).unwrap();
    assert_eq!(common::kinds(&v), ["inconsistent-commit-order"], "{v}");
    assert!(check_with_order(&h, Ra, &order(&[("x", &["x1", "x2"])])).unwrap().ok);
    assert!(check_with_order(&h, Rc, &order(&[("x", &["x2", "x1"])])).unwrap().ok);
    // Malformed orders are input errors.
    for (bad, why) in [
        (order(&[("x", &["x1"])]), "missing"),
        (order(&[("x", &["x1", "x2", "x9"])]), "never written"),
        (order(&[("x", &["x1", "x1", "x2"])]), "listed twice"),
        (order(&[("q", &["x1"])]), "never written"),
    ] {
        let e = check_with_order(&h, Ra, &bad).unwrap_err();
        assert!(e.to_string().contains(why), "{e}");
    }
    // The order decides between concurrent versions.
    let mut b = Builder::new();
    b.txn(2, "ok", "w y y0").txn(0, "ok", "w x x1, w y y1").txn(1, "ok", "r x x1, r y y0");
    let h = validate(&b.events).unwrap();
    let fractured = check_with_order(&h, Ra, &order(&[("y", &["y0", "y1"])])).unwrap();
    assert_eq!(common::kinds(&fractured), ["fractured-read"]);
    assert!(
        fractured.anomalies[0].edges.iter().any(|e| e.why.contains("the commit order lists y=y0 (T0) before y=y1"))
    );
    assert!(check_with_order(&h, Ra, &order(&[("y", &["y1", "y0"])])).unwrap().ok);
    assert!(check_with_order(&h, Tcc, &CommitOrder { keys: BTreeMap::new() }).unwrap().ok);
}

#[test]
fn graph_edges_are_justified() {
    let mut b = Builder::new();
    b.txn(0, "ok", "w x x1").txn(1, "ok", "r x x1, w x x2").txn(2, "ok", "r x x1");
    let h = validate(&b.events).unwrap();
    let g = snowline_checker::Graph::new(&h);
    let lines: Vec<String> = g.edges().iter().map(|e| format!("{:?} {}", e.kind, e.why)).collect();
    assert_eq!(
        lines,
        [
            "WR T2 read x=x1 written by T0",
            "WR T4 read x=x1 written by T0",
            "WW the initial version of x precedes every write, here x=x1 (T0)",
            "WW the initial version of x precedes every write, here x=x2 (T2)",
            "WW x=x1 (T0) precedes x=x2 (T2): T0 happens-before T2",
            "RW T4 read x=x1, older than x=x2 written by T2",
        ]
    );
}

#[test]
fn levels_parse_and_list_valid_names() {
    for l in ALL {
        assert_eq!(l.name().parse::<Level>().unwrap(), l);
    }
    for l in Level::GRAPH {
        assert_eq!(l.name().parse::<Level>().unwrap(), l);
    }
    let e = "serializable".parse::<Level>().unwrap_err().to_string();
    assert_eq!(
        e,
        "unknown consistency level \"serializable\"; valid levels: rc, ra, causal-snapshot, causal, tcc, ser, strict-ser, pos, si, psi, nmsi, us"
    );
    let e = "strict-serr".parse::<Level>().unwrap_err().to_string();
    assert!(
        e.starts_with("unknown consistency level \"strict-serr\" (did you mean strict-ser?); valid levels: rc"),
        "{e}"
    );
    let e = "causl".parse::<Level>().unwrap_err().to_string();
    assert!(e.contains("(did you mean causal?)"), "{e}");
}
