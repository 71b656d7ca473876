//! The fast checker agrees with the brute-force reference (`common/reference.rs`) on random tiny histories:
//! same anomaly counts per name at every level (`monotonic-writes` and `writes-follow-reads` merged, since
//! their split depends on which observed transaction is found first).

mod common;

use common::reference::{SESSION_ORDER, reference};
use common::{Builder, parse_jsonl};
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use snowline_checker::{Level, check, validate};
use snowline_core::history::HistoryEvent;
use std::collections::BTreeMap;

const KEYS: [&str; 3] = ["x", "y", "z"];

#[derive(Clone, Debug)]
struct TxnSpec {
    client: u8,
    /// 0: fail, 1: info, otherwise ok.
    status: u8,
    /// (is a write, key, choice of the value read).
    ops: Vec<(bool, u8, u8)>,
}

fn txn_spec() -> impl Strategy<Value = TxnSpec> {
    (0u8..3, 0u8..14, prop::collection::vec((any::<bool>(), 0u8..3, any::<u8>()), 1..4))
        .prop_map(|(client, status, ops)| TxnSpec { client, status, ops })
}

/// Turn specs into a history: every write gets a unique value; a read returns (by its choice byte) the
/// initial version, a final write of an earlier committed transaction, any write of the key (aborted,
/// intermediate, own or later ones included), a value of another key, or a value never written.
fn build(specs: &[TxnSpec]) -> Vec<HistoryEvent> {
    let value = |t: usize, i: usize| format!("v{t}-{i}");
    let mut all: Vec<(usize, usize, u8)> = Vec::new();
    for (t, s) in specs.iter().enumerate() {
        for (i, &(w, k, _)) in s.ops.iter().enumerate() {
            if w {
                all.push((t, i, k));
            }
        }
    }
    let is_final = |t: usize, i: usize, k: u8| !specs[t].ops[i + 1..].iter().any(|&(w, k2, _)| w && k2 == k);
    let mut process = [0u64, 1, 2];
    let mut next_process = 3;
    let mut b = Builder::new();
    for (t, s) in specs.iter().enumerate() {
        let mut ops = Vec::new();
        for (i, &(w, k, c)) in s.ops.iter().enumerate() {
            let key = KEYS[k as usize];
            if w {
                ops.push(format!("w {key} {}", value(t, i)));
                continue;
            }
            let own = s.ops[..i].iter().rposition(|&(w2, k2, _)| w2 && k2 == k);
            let pick = |list: Vec<(usize, usize, u8)>| -> String {
                if list.is_empty() {
                    "_".into()
                } else {
                    let (u, j, _) = list[(c as usize / 32) % list.len()];
                    value(u, j)
                }
            };
            let v = match (own, c % 32) {
                (Some(j), c) if c % 4 != 0 => value(t, j),
                (_, 0) => format!("ghost{t}-{i}"),
                (_, 1) => pick(all.iter().copied().filter(|&(_, _, k2)| k2 != k).collect()),
                (_, 2..=9) => "_".into(),
                (_, 10..=25) => pick(
                    all.iter()
                        .copied()
                        .filter(|&(u, j, k2)| u < t && k2 == k && specs[u].status != 0 && is_final(u, j, k2))
                        .collect(),
                ),
                _ => pick(all.iter().copied().filter(|&(_, _, k2)| k2 == k).collect()),
            };
            ops.push(format!("r {key} {v}"));
        }
        let p = process[s.client as usize];
        let status = match s.status {
            0 => "fail",
            1 => "info",
            _ => "ok",
        };
        b.txn(p, status, &ops.join(", "));
        if status == "info" {
            process[s.client as usize] = next_process;
            next_process += 1;
        }
    }
    b.events
}

fn fast_counts(events: &[HistoryEvent], level: Level) -> BTreeMap<&'static str, usize> {
    let v = check(events, level);
    let mut out = BTreeMap::new();
    for (k, n) in v.counts {
        let name = match k.name() {
            "monotonic-writes" | "writes-follow-reads" => SESSION_ORDER,
            other => other,
        };
        *out.entry(name).or_insert(0) += n;
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 4000, ..ProptestConfig::default() })]

    #[test]
    fn fast_checker_agrees_with_the_reference(specs in prop::collection::vec(txn_spec(), 1..10)) {
        let events = build(&specs);
        let history = validate(&events).expect("generated histories are well formed");
        for level in Level::VISIBILITY {
            let fast = fast_counts(&events, level);
            let slow = reference(&history, level);
            prop_assert_eq!(&fast, &slow, "level {}; history:\n{}", level, {
                let mut b = Builder::new();
                b.events = events.clone();
                b.jsonl()
            });
        }
    }
}

/// Levels are ordered: a history that passes a level passes every weaker one it includes.
#[test]
fn levels_nest_on_random_histories() {
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    for _ in 0..500 {
        let specs = prop::collection::vec(txn_spec(), 1..10).new_tree(&mut runner).unwrap().current();
        let events = build(&specs);
        let pass = |l| check(&events, l).ok;
        if pass(Level::Tcc) {
            assert!(pass(Level::Causal) && pass(Level::Ra));
        }
        if pass(Level::Causal) {
            assert!(pass(Level::CausalSnapshot));
        }
        if pass(Level::Ra) || pass(Level::CausalSnapshot) {
            assert!(pass(Level::Rc));
        }
    }
}

/// A regression case kept as JSONL: a causality gap through a write-read chain.
#[test]
fn reference_agrees_on_a_write_read_chain() {
    let mut b = Builder::new();
    b.txn(0, "ok", "w x x1").txn(1, "ok", "r x x1, w y y1").txn(2, "ok", "r y y1, r x _");
    let events = parse_jsonl(&b.jsonl());
    let h = validate(&events).unwrap();
    for level in Level::VISIBILITY {
        assert_eq!(fast_counts(&events, level), reference(&h, level), "{level}");
    }
    assert_eq!(reference(&h, Level::CausalSnapshot).get("causality-gap"), Some(&1));
}
