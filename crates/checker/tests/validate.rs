//! Input validation: malformed histories are refused with the event and the reason.

use crate::common;

use common::{Builder, parse_jsonl};
use snowline_checker::{AnomalyKind, Level, TxnStatus, check, validate};

fn refused(jsonl: &str) -> String {
    let e = validate(&parse_jsonl(jsonl)).unwrap_err();
    e.to_string()
}

#[test]
fn malformed_histories_are_refused() {
    let inv = |i: u64, p: u64, ops: &str| {
        format!(r#"{{"index":{i},"process":{p},"dc":0,"type":"invoke","f":"txn","value":{ops},"time":{i}}}"#)
    };
    let done = |i: u64, p: u64, kind: &str, ops: &str| {
        format!(r#"{{"index":{i},"process":{p},"dc":0,"type":"{kind}","f":"txn","value":{ops},"time":{i}}}"#)
    };
    let w1 = r#"[["w","x","v1"]]"#;
    let cases = [
        (done(0, 1, "ok", w1), "event 1 (index 0): ok without a pending invoke on process 1"),
        (
            [inv(0, 1, w1), done(1, 1, "ok", w1), inv(2, 2, w1)].join("\n"),
            "event 3 (index 2): value \"v1\" is written twice (first at index 0)",
        ),
        (
            [inv(0, 1, w1), inv(1, 1, r#"[["w","y","v2"]]"#)].join("\n"),
            "event 2 (index 1): process 1 has two concurrent invokes (the first at index 0)",
        ),
        (inv(0, 1, w1).replace("\"txn\"", "\"read\""), "event 1 (index 0): f is \"read\"; only \"txn\" is supported"),
        (
            [inv(3, 1, w1), done(2, 1, "ok", w1)].join("\n"),
            "event 2 (index 2): index 2 does not follow the previous index 3",
        ),
        (
            [inv(0, 1, w1), done(1, 1, "ok", r#"[["w","x","v9"]]"#)].join("\n"),
            "event 2 (index 1): micro-op 0 w x=v9 differs from its invoke's (index 0) w x=v1",
        ),
        (
            [inv(0, 1, w1), done(1, 1, "info", w1), inv(2, 1, r#"[["r","x",null]]"#)].join("\n"),
            "event 3 (index 2): process 1 invokes again after an info completion",
        ),
        (
            inv(0, 1, r#"[["r","x","v1"]]"#),
            "event 1 (index 0): micro-op 0: invoke reads key \"x\" with value \"v1\", not null",
        ),
        (inv(0, 1, r#"[["w","x",null]]"#), "event 1 (index 0): micro-op 0 writes key \"x\" without a value"),
    ];
    for (jsonl, expected) in cases {
        let got = refused(&jsonl);
        assert!(got.starts_with(expected), "got {got:?}, expected {expected:?}");
    }
}

#[test]
fn check_reports_invalid_input_as_an_anomaly() {
    let mut b = Builder::new();
    b.complete(0, "ok", "w x x1");
    let v = check(&b.events, Level::Rc);
    assert!(!v.ok);
    assert_eq!(v.kinds(), [AnomalyKind::InvalidHistory]);
}

#[test]
fn completions_pair_with_invokes() {
    let mut b = Builder::new();
    b.invoke(0, "r x _")
        .invoke(1, "w x x1")
        .complete(1, "ok", "w x x1")
        .complete(0, "ok", "r x x1")
        .invoke(2, "w y y1");
    let h = validate(&b.events).unwrap();
    let summary: Vec<(u64, TxnStatus, Option<u64>)> =
        h.txns.iter().map(|t| (t.process, t.status, t.complete_index)).collect();
    assert_eq!(summary, [(0, TxnStatus::Ok, Some(3)), (1, TxnStatus::Ok, Some(2)), (2, TxnStatus::Info, None)]);
    assert_eq!(h.txns[0].ops[0].2.as_deref(), Some("x1"));
}
