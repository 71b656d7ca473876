//! The expectation matrix of `docs/CHECKER.md`: for every anomaly class, a small hand-written history that
//! shows it and a near-identical one that does not. The failing history must produce exactly the anomaly
//! kinds the matrix lists at each level (`ok`: passes), and the passing one must pass at every level. The
//! test parses the matrix from the document, so the two cannot drift apart.

use crate::common;

use common::{Builder, kinds, parse_jsonl};
use snowline_checker::{CommitOrder, Level, Verdict, check_with_order, check_with_versions, validate};
use snowline_core::HistoryEvent;

/// How a history is checked.
#[derive(Clone)]
enum How {
    /// `check`: the version order is inferred.
    Plain,
    /// `check_with_versions`: the order comes from the `version` fields.
    Versions,
    /// `check_with_order` with this per-key order.
    Order(Vec<(&'static str, Vec<&'static str>)>),
}

struct Case {
    class: &'static str,
    how: How,
    fail: Vec<HistoryEvent>,
    pass: Vec<HistoryEvent>,
}

fn verdict(events: &[HistoryEvent], how: &How, level: Level) -> Verdict {
    let h = validate(events).expect("well formed");
    match how {
        How::Plain => snowline_checker::check_history(&h, level),
        How::Versions => check_with_versions(&h, level),
        How::Order(o) => {
            let keys = o.iter().map(|(k, vs)| ((*k).into(), vs.iter().map(|&v| v.into()).collect())).collect();
            check_with_order(&h, level, &CommitOrder { keys }).expect("a well-formed order")
        }
    }
}

fn b() -> Builder {
    Builder::new()
}

fn golden(name: &str) -> Vec<HistoryEvent> {
    let path = format!("{}/tests/golden/{name}.jsonl", env!("CARGO_MANIFEST_DIR"));
    parse_jsonl(&std::fs::read_to_string(path).unwrap())
}

/// The canonical histories, in the matrix's row order. Process 0 usually writes; builder times increase
/// with every event, so transactions built with `txn` do not overlap in real time.
fn cases() -> Vec<Case> {
    let plain = |class, fail: &mut Builder, pass: &mut Builder| Case {
        class,
        how: How::Plain,
        fail: fail.events.clone(),
        pass: pass.events.clone(),
    };
    vec![
        plain(
            "thin-air-read",
            b().txn(0, "ok", "w x x1").txn(1, "ok", "r x x2"),
            b().txn(0, "ok", "w x x1").txn(1, "ok", "r x x1"),
        ),
        plain(
            "aborted-read (g1a)",
            b().txn(0, "fail", "w x x1").txn(1, "ok", "r x x1"),
            b().txn(0, "info", "w x x1").txn(1, "ok", "r x x1"),
        ),
        plain(
            "intermediate-read (g1b)",
            b().txn(0, "ok", "w x x1, w x x2").txn(1, "ok", "r x x1"),
            b().txn(0, "ok", "w x x1, w x x2").txn(1, "ok", "r x x2"),
        ),
        plain("internal-read", b().txn(0, "ok", "w x x1, r x _"), b().txn(0, "ok", "w x x1, r x x1")),
        plain(
            "non-repeatable-read",
            b().txn(0, "ok", "w x x1").txn(1, "ok", "r x x1, r x _"),
            b().txn(0, "ok", "w x x1").txn(1, "ok", "r x x1, r x x1"),
        ),
        plain(
            "fractured-read",
            b().txn(0, "ok", "w x x1, w y y1").txn(1, "ok", "r x x1, r y _"),
            b().txn(0, "ok", "w x x1, w y y1").txn(1, "ok", "r x x1, r y y1"),
        ),
        Case {
            class: "causality-gap",
            how: How::Plain,
            fail: golden("photo-acl-fail"),
            pass: golden("photo-acl-pass"),
        },
        plain(
            "read-your-writes",
            b().txn(0, "ok", "w x x1").txn(0, "ok", "r x _"),
            b().txn(0, "ok", "w x x1").txn(0, "ok", "r x x1"),
        ),
        plain(
            "monotonic-reads",
            b().txn(0, "ok", "w x x1").txn(0, "ok", "w x x2").txn(1, "ok", "r x x2").txn(1, "ok", "r x x1"),
            b().txn(0, "ok", "w x x1").txn(0, "ok", "w x x2").txn(1, "ok", "r x x2").txn(1, "ok", "r x x2"),
        ),
        plain(
            "monotonic-writes",
            b().txn(0, "ok", "w x x1").txn(0, "ok", "w y y1").txn(1, "ok", "r y y1").txn(1, "ok", "r x _"),
            b().txn(0, "ok", "w x x1").txn(0, "ok", "w y y1").txn(1, "ok", "r y y1").txn(1, "ok", "r x x1"),
        ),
        plain(
            "writes-follow-reads",
            b().txn(0, "ok", "w x x1")
                .txn(1, "ok", "r x x1")
                .txn(1, "ok", "w y y1")
                .txn(2, "ok", "r y y1")
                .txn(2, "ok", "r x _"),
            b().txn(0, "ok", "w x x1")
                .txn(1, "ok", "r x x1")
                .txn(1, "ok", "w y y1")
                .txn(2, "ok", "r y y1")
                .txn(2, "ok", "r x x1"),
        ),
        plain(
            "cyclic-causality",
            b().txn(0, "ok", "w x x1, r y y1").txn(1, "ok", "w y y1, r x x1"),
            b().txn(0, "ok", "w x x1, r y _").txn(1, "ok", "w y y1, r x x1"),
        ),
        Case {
            class: "inconsistent-commit-order",
            how: How::Versions,
            fail: b().txn(0, "ok", "w x x1").version(20).txn(0, "ok", "w x x2").version(10).events.clone(),
            pass: b()
                .invoke(1, "w x x1")
                .invoke(0, "w x x2")
                .complete(1, "ok", "w x x1")
                .version(20)
                .complete(0, "ok", "w x x2")
                .version(10)
                .events
                .clone(),
        },
        Case {
            class: "g0",
            how: How::Order(vec![("x", vec!["x1", "x2"]), ("y", vec!["y2", "y1"])]),
            fail: b().txn(0, "ok", "w x x1, w y y1").txn(1, "ok", "w x x2, w y y2").events.clone(),
            pass: b().txn(0, "ok", "w x x1, w y y2").txn(1, "ok", "w x x2, w y y1").events.clone(),
        },
        plain(
            "g1c",
            b().txn(0, "ok", "r z z2, w x x1").txn(1, "ok", "r x x1, w y y1").txn(2, "ok", "r y y1, w z z2"),
            b().txn(0, "ok", "r z _, w x x1").txn(1, "ok", "r x x1, w y y1").txn(2, "ok", "r y y1, w z z2"),
        ),
        plain(
            "lost-update",
            b().txn(0, "ok", "r x _, w x x1").txn(1, "ok", "r x _, w x x2"),
            b().txn(0, "ok", "r x _, w x x1").txn(1, "ok", "r x x1, w x x2"),
        ),
        plain(
            "g-single",
            b().txn(0, "ok", "w x x1").txn(1, "ok", "r x x1, w y y1").txn(2, "ok", "r y y1, r x _"),
            b().txn(0, "ok", "w x x1").txn(1, "ok", "r x x1, w y y1").txn(2, "ok", "r y y1, r x x1"),
        ),
        plain(
            "write-skew",
            b().txn(0, "ok", "r x _, r y _, w x x1").txn(1, "ok", "r x _, r y _, w y y2"),
            b().txn(0, "ok", "r x _, r y _, w x x1").txn(1, "ok", "r x x1, r y _, w y y2"),
        ),
        plain(
            "read-only-anomaly",
            b().txn(0, "ok", "r y _, w y y1").txn(1, "ok", "r x _, r y _, w x x2").txn(2, "ok", "r x _, r y y1"),
            b().txn(0, "ok", "r y _, w y y1").txn(1, "ok", "r x _, r y y1, w x x2").txn(2, "ok", "r x x2, r y y1"),
        ),
        plain(
            "long-fork",
            b().txn(0, "ok", "w x x1").txn(1, "ok", "w y y2").txn(2, "ok", "r x x1, r y _").txn(
                3,
                "ok",
                "r x _, r y y2",
            ),
            b().txn(0, "ok", "w x x1").txn(1, "ok", "w y y2").txn(2, "ok", "r x x1, r y y2").txn(
                3,
                "ok",
                "r x x1, r y y2",
            ),
        ),
        plain(
            "g2-item",
            b().txn(0, "ok", "r x _, w y y1").txn(1, "ok", "r y _, w z z2").txn(2, "ok", "r z _, w x x3"),
            b().txn(0, "ok", "r x _, w y y1").txn(1, "ok", "r y y1, w z z2").txn(2, "ok", "r z z2, w x x3"),
        ),
        plain(
            "non-monotonic-snapshot",
            b().txn(0, "ok", "w x x1").txn(1, "ok", "r x x1").txn(1, "ok", "r x _"),
            b().txn(0, "ok", "w x x1").txn(1, "ok", "r x x1").txn(1, "ok", "r x x1"),
        ),
        plain(
            "process-order-violation",
            b().txn(0, "ok", "r x x1").txn(0, "ok", "w x x1"),
            b().txn(0, "ok", "r x _").txn(0, "ok", "w x x1"),
        ),
        plain(
            "real-time-violation",
            b().txn(0, "ok", "w x x1").txn(1, "ok", "r x _"),
            b().invoke(1, "r x _").txn(0, "ok", "w x x1").complete(1, "ok", "r x _"),
        ),
    ]
}

/// One matrix row: per level, the anomaly kinds expected (empty: passes).
type Row = Vec<(Level, Vec<String>)>;

/// The matrix in `docs/CHECKER.md`: class -> level -> expected kinds (empty: passes).
fn documented() -> Vec<(String, Row)> {
    let path = format!("{}/../../docs/CHECKER.md", env!("CARGO_MANIFEST_DIR"));
    let doc = std::fs::read_to_string(path).unwrap();
    let mut lines = doc.lines().skip_while(|l| !l.starts_with("| class |"));
    let header: Vec<Level> = lines
        .next()
        .expect("the matrix header `| class | rc | ...`")
        .split('|')
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .skip(1)
        .map(|c| c.parse().unwrap_or_else(|e| panic!("{e}")))
        .collect();
    lines
        .skip(1)
        .take_while(|l| l.starts_with('|'))
        .map(|l| {
            let cells: Vec<&str> = l.split('|').map(str::trim).filter(|c| !c.is_empty()).collect();
            assert_eq!(cells.len(), header.len() + 1, "row {l}");
            let class = cells[0].trim_matches('`').to_string();
            let row = header
                .iter()
                .zip(&cells[1..])
                .map(|(&lvl, c)| {
                    let kinds =
                        if *c == "ok" { Vec::new() } else { c.split('+').map(|k| k.trim().to_string()).collect() };
                    (lvl, kinds)
                })
                .collect();
            (class, row)
        })
        .collect()
}

fn observed(events: &[HistoryEvent], how: &How, level: Level) -> Vec<String> {
    kinds(&verdict(events, how, level)).into_iter().map(String::from).collect()
}

#[test]
fn the_documented_matrix_matches_the_checker() {
    let doc = documented();
    let cases = cases();
    let doc_classes: Vec<&str> = doc.iter().map(|(c, _)| c.as_str()).collect();
    let case_classes: Vec<&str> = cases.iter().map(|c| c.class).collect();
    assert_eq!(doc_classes, case_classes, "the matrix rows and the canonical histories differ");
    assert_eq!(doc[0].1.len(), Level::ALL.len(), "the matrix lists every level");
    for (case, (_, row)) in cases.iter().zip(&doc) {
        for (level, expected) in row.iter().map(|(l, e)| (*l, e)) {
            let got = observed(&case.fail, &case.how, level);
            assert_eq!(&got, expected, "{} at {level}:\n{}", case.class, verdict(&case.fail, &case.how, level));
            let pass = verdict(&case.pass, &case.how, level);
            assert!(pass.ok, "{}: the passing history fails at {level}:\n{pass}", case.class);
        }
    }
}

/// Every dependency-graph failure names its class, and its witness is a cycle of justified edges.
#[test]
fn graph_witnesses_are_justified_cycles() {
    use snowline_checker::AnomalyKind as A;
    let cycle_kinds = [
        A::G0,
        A::G1c,
        A::LostUpdate,
        A::GSingle,
        A::WriteSkew,
        A::ReadOnlyAnomaly,
        A::LongFork,
        A::G2Item,
        A::NonMonotonicSnapshot,
        A::ProcessOrderViolation,
        A::RealTimeViolation,
    ];
    let mut seen = std::collections::BTreeSet::new();
    for case in cases() {
        for level in Level::GRAPH {
            let v = verdict(&case.fail, &case.how, level);
            assert!(v.basis.is_some(), "graph levels state their version order");
            for a in v.anomalies.iter().filter(|a| cycle_kinds.contains(&a.name)) {
                seen.insert(a.name);
                assert!(a.edges.len() >= 2, "{}: {a}", case.class);
                assert_eq!(a.edges[0].from, a.edges.last().unwrap().to, "{} at {level}: not a cycle\n{a}", case.class);
                for w in a.edges.windows(2) {
                    assert_eq!(w[0].to, w[1].from, "{} at {level}: edges do not chain\n{a}", case.class);
                }
                assert!(a.edges.iter().all(|e| !e.why.is_empty()));
            }
        }
    }
    assert_eq!(seen.len(), cycle_kinds.len(), "every cycle class has a canonical history: {seen:?}");
}

/// Prints the matrix as the checker computes it (`cargo test -p snowline-checker --test levels --
/// --ignored --nocapture`), to update `docs/CHECKER.md` after reviewing each cell.
#[test]
#[ignore]
fn print_matrix() {
    let names: Vec<&str> = Level::ALL.iter().map(|l| l.name()).collect();
    println!("| class | {} |", names.join(" | "));
    println!("|---|{}", "---|".repeat(names.len()));
    for case in cases() {
        let cells: Vec<String> = Level::ALL
            .iter()
            .map(|&l| {
                let k = observed(&case.fail, &case.how, l);
                if k.is_empty() { "ok".into() } else { k.join("+") }
            })
            .collect();
        println!("| `{}` | {} |", case.class, cells.join(" | "));
    }
}

#[test]
fn commit_order_from_versions_leaves_out_keys_it_cannot_order() {
    let mut b = Builder::new();
    b.txn(0, "ok", "w a a1, w b b1").version(20);
    b.txn(1, "ok", "w a a2").version(10);
    b.txn(2, "ok", "w b b2"); // no version: b is left out
    b.txn(3, "ok", "w c c1").version(30);
    b.txn(4, "ok", "w c c2").version(30); // a tie: c is left out
    b.txn(5, "info", "w d d1, w e e1"); // observed below, no version: not listed, its place inferred
    b.txn(6, "ok", "r d d1, w e e2").version(40);
    b.txn(7, "info", "w f f1"); // never observed: not listed
    b.txn(8, "ok", "w f f2").version(50);
    let h = validate(&b.events).unwrap();
    let order = h.commit_order_from_versions();
    let listed: Vec<(String, Vec<String>)> =
        order.keys.iter().map(|(k, vs)| (k.to_string(), vs.iter().map(|v| v.to_string()).collect())).collect();
    let expected = [("a", vec!["a2", "a1"]), ("e", vec!["e2"]), ("f", vec!["f2"])]
        .map(|(k, vs)| (k.to_string(), vs.into_iter().map(String::from).collect::<Vec<_>>()));
    assert_eq!(listed, expected);
    assert_eq!(snowline_checker::commit_order_from_versions(&h), order);
    let v = check_with_versions(&h, Level::Ser);
    assert!(v.ok, "{v}");
    assert!(v.basis.as_deref().unwrap().contains("the reported commit order for 3 of 6 written keys"), "{v}");
}

/// An info transaction that took effect has no version: the versions still order the other writers of
/// its keys, and only its own place is inferred. Here two concurrent writers of x have versions x1 < x0 and
/// an info transaction that also wrote x was observed; a later reader of x1 read a stale version. (Leaving
/// x out of the reported order, as before, let the checker pick x0 < x1 and pass the history.)
#[test]
fn a_partial_commit_order_orders_the_versioned_writers_and_infers_the_info_one() {
    let history = |last_read: &str| {
        let mut b = Builder::new();
        b.invoke(0, "w x x0").invoke(1, "w x x1").invoke(2, "w x x9, w y y9");
        b.complete(0, "ok", "w x x0").version(20);
        b.complete(1, "ok", "w x x1").version(10);
        b.complete(2, "info", "w x x9, w y y9");
        b.txn(3, "ok", "r y y9").txn(4, "ok", last_read);
        validate(&b.events).unwrap()
    };
    let v = check_with_versions(&history("r x x0"), Level::StrictSer);
    assert!(v.ok, "{v}");
    let v = check_with_versions(&history("r x x1"), Level::StrictSer);
    assert!(!v.ok, "a read of x1 after x0 committed above it: {v}");
}

#[test]
fn anomaly_names_match_their_serialization_and_aliases_resolve() {
    use snowline_checker::AnomalyKind;
    for k in AnomalyKind::ALL {
        assert_eq!(serde_json::to_value(k).unwrap(), k.name(), "{k:?}");
        assert_eq!(AnomalyKind::from_name(k.name()), Some(k));
    }
    assert_eq!(AnomalyKind::from_name("g1a"), Some(AnomalyKind::AbortedRead));
    assert_eq!(AnomalyKind::from_name("g1b"), Some(AnomalyKind::IntermediateRead));
    assert_eq!(AnomalyKind::from_name("g2"), None);
    for l in Level::ALL {
        assert_eq!(serde_json::to_value(l).unwrap(), l.name());
    }
}

#[test]
fn graph_verdicts_state_their_basis() {
    let mut b = Builder::new();
    b.txn(0, "ok", "r x _, w x x1").txn(1, "ok", "r x x1, w x x2");
    let h = validate(&b.events).unwrap();
    let v = snowline_checker::check_history(&h, Level::Ser);
    let json = serde_json::to_value(&v).unwrap();
    assert!(json["basis"].as_str().unwrap().contains("read-modify-write"), "{json}");
    assert!(json.get("inconclusive").is_none(), "omitted unless true: {json}");
    assert!(v.to_string().starts_with("ser: ok\n    version order inferred (the initial version first"), "{v}");
    assert!(v.to_string().contains("the verdict is exact"), "{v}");
    // The visibility levels keep their output.
    let v = snowline_checker::check_history(&h, Level::Tcc);
    assert_eq!(v.to_string(), "tcc: ok\n");
    assert!(serde_json::to_value(&v).unwrap().get("basis").is_none());
    // A failure names its class with a justified cycle.
    let mut b = Builder::new();
    b.txn(0, "ok", "r x _, w x x1").txn(1, "ok", "r x _, w x x2");
    let v = snowline_checker::check(&b.events, Level::Si);
    let text = v.to_string();
    assert!(text.contains("lost-update: T0 and T2 both read x=<initial> and both wrote x"), "{text}");
    assert!(text.contains("RW: T0 read x=<initial>, older than x=x2 written by T2"), "{text}");
    assert!(text.contains("RW: T2 read x=<initial>, older than x=x1 written by T0"), "{text}");
    assert!(text.contains("each anomaly shown holds under every order extending it"), "{text}");
    // Blind writes: no inference orders them, and every order fails.
    let mut b = Builder::new();
    b.txn(0, "ok", "w x x1, w y y1").txn(1, "ok", "w x x2, w y y2").txn(2, "ok", "r x x1, r y y2");
    let v = snowline_checker::check(&b.events, Level::Ser);
    let text = v.to_string();
    assert_eq!(common::kinds(&v), ["g-single"], "{text}");
    assert!(text.contains("(pairs not inferred are marked chosen)"), "{text}");
    assert!(text.contains("in the version order chosen here (not inferred)"), "{text}");
}
