//! Mutation tests: a serial execution against one copy of the store satisfies every level; one injected
//! anomaly is caught under its own name (for read-write histories: at every dependency-graph level that
//! forbids it, while the levels that allow it pass). The injectors at the end are shared with the harness,
//! which applies them to histories recorded from 2PL runs (`crates/harness/tests/injected_anomalies.rs`).

use crate::common;

use common::inject::{self, Subject};
use common::{kinds, serial_events, serial_events_with_aborts, serial_history, serial_rw_txns, serial_skew_txns};
use snowline_checker::{Level, check};
use snowline_core::history::{EventType, HistoryEvent, HistoryOp, OpKind};
use snowline_core::request::{Key, Value};

/// A completed `ok` transaction of a serial history: (process, event position, op kinds/keys/values).
struct Done {
    process: u64,
    at: usize,
}

fn done(events: &[HistoryEvent]) -> Vec<Done> {
    events
        .iter()
        .enumerate()
        .filter(|(_, e)| e.kind == EventType::Ok)
        .map(|(at, e)| Done { process: e.process, at })
        .collect()
}

/// The writer (event position) of a value in a serial history.
fn writer_of(events: &[HistoryEvent], v: &str) -> Option<usize> {
    events.iter().position(|e| {
        e.kind == EventType::Ok && e.value.iter().any(|o| o.0 == OpKind::Write && o.2.as_deref() == Some(v))
    })
}

fn is_read_only(e: &HistoryEvent) -> bool {
    e.value.iter().all(|o| o.0 == OpKind::Read)
}

fn writes_key(e: &HistoryEvent, k: &str) -> bool {
    e.value.iter().any(|o| o.0 == OpKind::Write && &*o.1 == k)
}

#[test]
fn serial_executions_pass_every_level() {
    for seed in 0..20 {
        let events = serial_history(seed, 4, 300, 5);
        for level in Level::ALL {
            let v = check(&events, level);
            assert!(v.ok, "seed {seed} at {level}:\n{v}");
        }
    }
}

#[test]
fn injected_thin_air_read_is_caught() {
    let mut events = serial_history(1, 4, 200, 5);
    let d = done(&events).into_iter().find(|d| is_read_only(&events[d.at])).unwrap();
    events[d.at].value[0].2 = Some("never-written".into());
    for level in Level::ALL {
        assert_eq!(kinds(&check(&events, level)), ["thin-air-read"], "{level}");
    }
}

#[test]
fn injected_fractured_read_is_caught() {
    let mut hits = 0;
    for seed in 0..10 {
        let mut events = serial_history(seed, 4, 300, 4);
        // A read-only transaction that read two keys from the same multi-key update: it now misses one.
        let target = done(&events).into_iter().find_map(|d| {
            let e = &events[d.at];
            if !is_read_only(e) {
                return None;
            }
            let w: Vec<Option<usize>> =
                e.value.iter().map(|o| o.2.as_deref().and_then(|v| writer_of(&events, v))).collect();
            (0..w.len())
                .find_map(|i| (0..w.len()).find(|&j| j != i && w[i].is_some() && w[i] == w[j]).map(|j| (d.at, j)))
        });
        let Some((at, j)) = target else { continue };
        events[at].value[j].2 = None;
        for level in [Level::Ra, Level::Tcc] {
            assert_eq!(kinds(&check(&events, level)), ["fractured-read"], "seed {seed} at {level}");
        }
        hits += 1;
    }
    assert!(hits >= 5, "only {hits} seeds had a read to fracture");
}

#[test]
fn injected_causality_gap_is_caught() {
    let mut hits = 0;
    for seed in 0..10 {
        let mut events = serial_history(seed, 4, 300, 4);
        // A read-only transaction read key a from U, and key b that U's session wrote before U (but U did
        // not): it now reads b's initial version.
        let target = done(&events).into_iter().find_map(|d| {
            let e = &events[d.at];
            if !is_read_only(e) {
                return None;
            }
            e.value
                .iter()
                .find_map(|a| {
                    let u = writer_of(&events, a.2.as_deref()?)?;
                    e.value.iter().position(|b| {
                        b.1 != a.1
                            && !writes_key(&events[u], &b.1)
                            && events[..u].iter().any(|w| {
                                w.kind == EventType::Ok && w.process == events[u].process && writes_key(w, &b.1)
                            })
                    })
                })
                .map(|j| (d.at, j))
        });
        let Some((at, j)) = target else { continue };
        events[at].value[j].2 = None;
        assert_eq!(kinds(&check(&events, Level::CausalSnapshot)), ["causality-gap"], "seed {seed}");
        assert!(!check(&events, Level::Tcc).ok);
        hits += 1;
    }
    assert!(hits >= 5, "only {hits} seeds had a gap to inject");
}

#[test]
fn injected_session_violations_are_caught() {
    let mut ryw = 0;
    let mut mr = 0;
    for seed in 0..10 {
        let events = serial_history(seed, 4, 300, 4);
        let ds = done(&events);
        // Read-your-writes: a one-key read of a key the session wrote before now returns the initial version.
        let target = ds.iter().find(|d| {
            let e = &events[d.at];
            is_read_only(e)
                && e.value.len() == 1
                && events[..d.at]
                    .iter()
                    .any(|w| w.kind == EventType::Ok && w.process == d.process && writes_key(w, &e.value[0].1))
        });
        if let Some(d) = target {
            let mut events = events.clone();
            events[d.at].value[0].2 = None;
            for level in [Level::Causal, Level::Tcc] {
                assert_eq!(kinds(&check(&events, level)), ["read-your-writes"], "seed {seed} at {level}");
            }
            assert!(check(&events, Level::CausalSnapshot).ok);
            ryw += 1;
        }
        // Monotonic reads: a one-key read after the session read a written version of that key (and wrote
        // none itself) now returns the initial version.
        let target = ds.iter().find(|d| {
            let e = &events[d.at];
            let k = &e.value[0].1;
            is_read_only(e)
                && e.value.len() == 1
                && e.value[0].2.is_some()
                && !events[..d.at].iter().any(|w| w.process == d.process && writes_key(w, k))
                && events[..d.at].iter().any(|s| {
                    s.kind == EventType::Ok
                        && s.process == d.process
                        && s.value.iter().any(|o| o.0 == OpKind::Read && &o.1 == k && o.2.is_some())
                })
        });
        if let Some(d) = target {
            let mut events = events.clone();
            events[d.at].value[0].2 = None;
            for level in [Level::Causal, Level::Tcc] {
                assert_eq!(kinds(&check(&events, level)), ["monotonic-reads"], "seed {seed} at {level}");
            }
            mr += 1;
        }
    }
    assert!(ryw >= 5 && mr >= 5, "ryw {ryw}, mr {mr}");
}

/// A large valid history passes (its checking time is a benchmark figure, printed by `snowline check`, not
/// asserted here).
#[test]
fn large_histories_pass() {
    let events = serial_history(7, 64, 100_000, 2_000);
    let v = check(&events, Level::Tcc);
    assert!(v.ok, "{v}");
}

// Read-write serial histories: each injected graph anomaly is named at the levels that forbid it, and the
// levels that allow it still pass.

type Txns = Vec<(u64, Vec<HistoryOp>)>;

fn rw_history(seed: u64) -> Txns {
    serial_rw_txns(seed, 4, 300, 5)
}

/// The value of `key` current before transaction `i` (the latest write by an earlier one).
fn value_before(txns: &Txns, i: usize, key: &str) -> Option<Value> {
    txns[..i]
        .iter()
        .rev()
        .find_map(|(_, ops)| ops.iter().rev().find(|o| o.0 == OpKind::Write && &*o.1 == key).map(|o| o.2.clone()))
        .flatten()
}

/// The transaction that wrote `v`.
fn writer(txns: &Txns, v: &Value) -> Option<usize> {
    txns.iter().position(|(_, ops)| ops.iter().any(|o| o.0 == OpKind::Write && o.2.as_ref() == Some(v)))
}

/// External reads of transaction `i`: (op index, key, value).
fn ext_reads(txns: &Txns, i: usize) -> Vec<(usize, Key, Option<Value>)> {
    let ops = &txns[i].1;
    (0..ops.len())
        .filter(|&j| ops[j].0 == OpKind::Read && !ops[..j].iter().any(|o| o.0 == OpKind::Write && o.1 == ops[j].1))
        .map(|j| (j, ops[j].1.clone(), ops[j].2.clone()))
        .collect()
}

fn writes(txns: &Txns, i: usize) -> Vec<Key> {
    txns[i].1.iter().filter(|o| o.0 == OpKind::Write).map(|o| o.1.clone()).collect()
}

fn rw_read_only(txns: &Txns, i: usize) -> bool {
    writes(txns, i).is_empty()
}

/// Assert that each level reports the named kind (and, at `ser`, which infers the least, only it), or
/// passes (empty). An injected anomaly can have consequences: under a session or real-time level the
/// changed read may also reorder the versions that level infers.
fn assert_kinds(txns: &Txns, expected: &[(Level, &[&str])], what: &str) {
    let events = serial_events(txns);
    for &(level, names) in expected {
        let v = check(&events, level);
        let got = kinds(&v);
        if names.is_empty() || level == Level::Ser {
            assert_eq!(got, names.to_vec(), "{what} at {level}:\n{v}");
        } else {
            assert!(names.iter().all(|n| got.contains(n)), "{what} at {level}: expected {names:?}\n{v}");
        }
    }
}

#[test]
fn serial_rw_executions_pass_every_level() {
    for seed in 0..8 {
        let txns = rw_history(seed);
        let events = serial_events(&txns);
        let h = snowline_checker::validate(&events).unwrap();
        for level in Level::ALL {
            let v = check(&events, level);
            assert!(v.ok && !v.inconclusive, "seed {seed} at {level}:\n{v}");
        }
        // With commit versions (the serial position), as a single-copy protocol reports them.
        let mut versioned = events.clone();
        for (i, e) in versioned.iter_mut().enumerate() {
            if e.kind == EventType::Ok && e.value.iter().any(|o| o.0 == OpKind::Write) {
                e.version = Some(snowline_core::request::Version { time: i as u64, dc: 0 });
            }
        }
        let hv = snowline_checker::validate(&versioned).unwrap();
        assert_eq!(hv.commit_order_from_versions().keys.len(), 5, "every key has a reported order");
        for level in Level::GRAPH {
            let v = snowline_checker::check_with_versions(&hv, level);
            assert!(v.ok, "seed {seed} at {level} with versions:\n{v}");
            assert!(v.basis.as_deref().unwrap().contains("the reported commit order"), "{v}");
            assert!(snowline_checker::check_history(&h, level).ok);
        }
    }
}

#[test]
fn injected_lost_update_is_named() {
    let mut hits = 0;
    for seed in 0..10 {
        let mut txns = rw_history(seed);
        // Two read-modify-writes of x, the second reading the first's write: it now reads what the first read.
        let found = (0..txns.len()).find_map(|j| {
            ext_reads(&txns, j).into_iter().find_map(|(op, key, v)| {
                let i = writer(&txns, v.as_ref()?)?;
                let rmw = |t: usize| writes(&txns, t).contains(&key) && ext_reads(&txns, t).iter().any(|r| r.1 == key);
                (rmw(i) && rmw(j)).then(|| (j, op, ext_reads(&txns, i).into_iter().find(|r| r.1 == key).unwrap().2))
            })
        });
        let Some((j, op, older)) = found else { continue };
        txns[j].1[op].2 = older;
        let lu: &[&str] = &["lost-update"];
        let expected: Vec<(Level, &[&str])> = Level::GRAPH.iter().map(|&l| (l, lu)).collect();
        assert_kinds(&txns, &expected, &format!("seed {seed}"));
        hits += 1;
    }
    assert!(hits >= 5, "only {hits} seeds had a lost update to inject");
}

#[test]
fn injected_write_skew_is_named() {
    let mut hits = 0;
    for seed in 0..40 {
        let mut txns = rw_history(seed);
        // T1 reads a and b and writes a; a later T2 reads b and a (T1's) and writes b, with b unchanged in
        // between: T2 now reads the a that T1 read.
        let skew = |t: usize| ext_reads(&txns, t).len() == 2 && writes(&txns, t).len() == 1;
        let found = (0..txns.len()).filter(|&j| skew(j)).find_map(|j| {
            let r2 = ext_reads(&txns, j);
            let b = writes(&txns, j)[0].clone();
            let (op, a, va) = r2.iter().find(|r| r.1 != b)?.clone();
            let i = writer(&txns, va.as_ref()?)?;
            let r1 = ext_reads(&txns, i);
            let ok = skew(i)
                && writes(&txns, i) == [a.clone()]
                && r1.iter().any(|r| r.1 == b && r2.iter().any(|x| x.1 == b && x.2 == r.2));
            ok.then(|| (j, op, r1.iter().find(|r| r.1 == a).unwrap().2.clone()))
        });
        let Some((j, op, older)) = found else { continue };
        txns[j].1[op].2 = older;
        let ws: &[&str] = &["write-skew"];
        let none: &[&str] = &[];
        // (Not `si` and `psi`: if T2's session wrote or saw the newer version, T2's snapshot also goes back.)
        assert_kinds(
            &txns,
            &[(Level::Ser, ws), (Level::StrictSer, ws), (Level::Pos, ws), (Level::Us, ws), (Level::Nmsi, none)],
            &format!("seed {seed}"),
        );
        hits += 1;
    }
    assert!(hits >= 5, "only {hits} seeds had a write skew to inject");
}

#[test]
fn injected_read_skew_is_named() {
    let mut hits = 0;
    for seed in 0..10 {
        let mut txns = rw_history(seed);
        // A read-only transaction read two keys from one writer, which read-modified-wrote one of them: it
        // now reads that one as it was before.
        let found = (0..txns.len()).filter(|&t| rw_read_only(&txns, t)).find_map(|t| {
            let rs = ext_reads(&txns, t);
            rs.iter().find_map(|x| {
                let u = writer(&txns, x.2.as_ref()?)?;
                let y = rs.iter().find(|y| {
                    y.1 != x.1
                        && y.2.as_ref().and_then(|v| writer(&txns, v)) == Some(u)
                        && ext_reads(&txns, u).iter().any(|r| r.1 == y.1)
                })?;
                Some((t, y.0, value_before(&txns, u, &y.1)))
            })
        });
        let Some((t, op, older)) = found else { continue };
        txns[t].1[op].2 = older;
        let gs: &[&str] = &["g-single"];
        let expected: Vec<(Level, &[&str])> = Level::GRAPH.iter().map(|&l| (l, gs)).collect();
        assert_kinds(&txns, &expected, &format!("seed {seed}"));
        hits += 1;
    }
    assert!(hits >= 5, "only {hits} seeds had a read skew to inject");
}

#[test]
fn injected_long_fork_is_named() {
    let mut hits = 0;
    for seed in 0..10 {
        let mut txns = rw_history(seed);
        // Read-modify-writes U1 (of x only) and U2 (of y only) of different sessions, with nothing touching x
        // or y between them (so nothing orders U1 before U2); two new read-only observers, right after U2 in
        // new sessions, each see one of the two writes and miss the other.
        let single_rmw = |t: usize| {
            let (w, r) = (writes(&txns, t), ext_reads(&txns, t));
            (w.len() == 1 && r.len() == 1 && r[0].1 == w[0]).then(|| w[0].clone())
        };
        let touches = |t: usize, k: &Key| txns[t].1.iter().any(|o| &o.1 == k);
        let found = (0..txns.len()).find_map(|u1| {
            let x = single_rmw(u1)?;
            (u1 + 1..txns.len().min(u1 + 10)).find_map(|u2| {
                let y = single_rmw(u2)?;
                let apart =
                    x != y && txns[u1].0 != txns[u2].0 && (u1 + 1..u2).all(|m| !touches(m, &x) && !touches(m, &y));
                apart.then(|| (u1, u2, x.clone(), y))
            })
        });
        let Some((u1, u2, x, y)) = found else { continue };
        let now = |k: &Key| value_before(&txns, u2 + 1, k);
        let read = |k: &Key, v: Option<Value>| HistoryOp(OpKind::Read, k.clone(), v);
        let a = (1000, vec![read(&x, now(&x)), read(&y, value_before(&txns, u2, &y))]);
        let b = (1001, vec![read(&x, value_before(&txns, u1, &x)), read(&y, now(&y))]);
        txns.insert(u2 + 1, a);
        txns.insert(u2 + 2, b);
        let lf: &[&str] = &["long-fork"];
        let none: &[&str] = &[];
        // (Not `psi`: session order may make U1 visible to U2, and then B's snapshot misses it.)
        assert_kinds(
            &txns,
            &[(Level::Ser, lf), (Level::Si, lf), (Level::Pos, lf), (Level::Nmsi, none), (Level::Us, none)],
            &format!("seed {seed}"),
        );
        hits += 1;
    }
    assert!(hits >= 5, "only {hits} seeds had a pair of writes to fork");
}

#[test]
fn injected_circular_information_flow_is_named() {
    let mut hits = 0;
    for seed in 0..20 {
        let mut txns = rw_history(seed);
        // T2 read from T1 and writes y, which T1 reads without writing: T1 now reads T2's y.
        let found = (0..txns.len()).find_map(|t2| {
            let t1 = ext_reads(&txns, t2).into_iter().find_map(|r| writer(&txns, r.2.as_ref()?))?;
            let y = writes(&txns, t2).into_iter().find(|y| !writes(&txns, t1).contains(y))?;
            let op = ext_reads(&txns, t1).into_iter().find(|r| r.1 == y)?.0;
            let v = txns[t2].1.iter().rev().find(|o| o.0 == OpKind::Write && o.1 == y)?.2.clone();
            Some((t1, op, v))
        });
        let Some((t1, op, v)) = found else { continue };
        txns[t1].1[op].2 = v;
        let g1c: &[&str] = &["g1c"];
        let expected: Vec<(Level, &[&str])> = Level::GRAPH.iter().map(|&l| (l, g1c)).collect();
        assert_kinds(&txns, &expected, &format!("seed {seed}"));
        assert!(kinds(&check(&serial_events(&txns), Level::Causal)).contains(&"cyclic-causality"));
        hits += 1;
    }
    assert!(hits >= 5, "only {hits} seeds had a read to redirect");
}

#[test]
fn injected_stale_read_is_a_real_time_violation() {
    let mut hits = 0;
    for seed in 0..10 {
        let mut txns = rw_history(seed);
        // A one-read read-only transaction now reads the version before the one it read.
        let found = (0..txns.len()).filter(|&t| rw_read_only(&txns, t) && txns[t].1.len() == 1).find_map(|t| {
            let w = writer(&txns, txns[t].1[0].2.as_ref()?)?;
            Some((t, value_before(&txns, w, &txns[t].1[0].1)))
        });
        let Some((t, older)) = found else { continue };
        txns[t].1[0].2 = older;
        let none: &[&str] = &[];
        assert_kinds(
            &txns,
            &[(Level::Ser, none), (Level::Us, none), (Level::Nmsi, none), (Level::StrictSer, &["real-time-violation"])],
            &format!("seed {seed}"),
        );
        hits += 1;
    }
    assert!(hits >= 5, "only {hits} seeds had a read to make stale");
}

#[test]
fn injected_non_monotonic_snapshot_is_named() {
    let mut hits = 0;
    for seed in 0..20 {
        let mut txns = rw_history(seed);
        // A one-read read-only transaction whose session read the same version earlier now reads the one
        // before it.
        let found = (0..txns.len()).filter(|&t| rw_read_only(&txns, t) && txns[t].1.len() == 1).find_map(|t| {
            let (key, v) = (txns[t].1[0].1.clone(), txns[t].1[0].2.clone()?);
            let earlier = (0..t).any(|s| {
                txns[s].0 == txns[t].0 && ext_reads(&txns, s).iter().any(|r| r.1 == key && r.2.as_ref() == Some(&v))
            });
            let w = writer(&txns, &v)?;
            earlier.then(|| (t, value_before(&txns, w, &key)))
        });
        let Some((t, older)) = found else { continue };
        txns[t].1[0].2 = older;
        let nms: &[&str] = &["non-monotonic-snapshot"];
        let none: &[&str] = &[];
        assert_kinds(
            &txns,
            &[
                (Level::Pos, nms),
                (Level::Si, nms),
                (Level::Psi, nms),
                (Level::Ser, none),
                (Level::Nmsi, none),
                (Level::Us, none),
            ],
            &format!("seed {seed}"),
        );
        hits += 1;
    }
    assert!(hits >= 5, "only {hits} seeds had a session to break");
}

// The injectors shared with the recorded-history tests of the harness (`common/inject.rs`), on generated
// serial histories: G0, G1a, G1b, the read-only anomaly and G2-item here (the other classes have their own
// tests above, and are injected the shared way by the last test). Each injection is named at every level of
// its class's row of the expectation matrix, the unmutated history passes those levels, and the harmless
// half of an edit (G1b's extra write, the read-only anomaly's update) passes alone.

/// A generated read-write serial history with aborted attempts, as a single-copy store would record it.
fn generated(seed: u64) -> Subject {
    Subject::new(serial_events_with_aborts(&serial_rw_txns(seed, 4, 300, 4)))
}

/// Inject `class` into each subject that has transactions to edit; assert that it is named each time and
/// that at least `min_hits` subjects had them.
fn inject_into(class: &str, subjects: impl Iterator<Item = Subject>, min_hits: usize) {
    let mut hits = 0;
    for s in subjects {
        let Some(m) = inject::injector(class)(&s) else { continue };
        inject::assert_named(&s, &m);
        hits += 1;
    }
    assert!(hits >= min_hits, "{class}: only {hits} histories had transactions to edit");
}

#[test]
fn serial_rw_executions_with_aborted_attempts_pass_every_level() {
    for seed in 0..8 {
        let s = generated(seed);
        assert!(s.history.txns.iter().any(|t| t.status == snowline_checker::TxnStatus::Fail));
        for level in Level::ALL {
            for (how, v) in s.verdicts(&s.events, None, level) {
                assert!(v.ok && !v.inconclusive, "seed {seed} at {level} ({how}):\n{v}");
            }
        }
    }
}

/// G0: two concurrent blind writes of the same two keys, listed in opposite orders on the two keys by the
/// commit order the checker is given (the only way a write cycle can show: an inferred order never orders
/// blind writes against each other).
#[test]
fn injected_write_cycle_g0_is_named() {
    inject_into("g0", (0..10).map(generated), 8);
}

/// G1a: a read returns the value of an aborted attempt that ended before the reader began.
#[test]
fn injected_aborted_read_g1a_is_named() {
    inject_into("aborted-read", (0..10).map(generated), 8);
}

/// G1b: a committed update gets an intermediate write of a key, which a transaction that read the update
/// now returns.
#[test]
fn injected_intermediate_read_g1b_is_named() {
    inject_into("intermediate-read", (0..10).map(generated), 8);
}

/// The read-only anomaly: of two adjacent updates, the later now misses the earlier (still serializable),
/// and a read-only transaction that saw both now sees only the earlier.
#[test]
fn injected_read_only_anomaly_is_named() {
    inject_into("read-only-anomaly", (0..20).map(generated), 10);
}

/// G2-item: three adjacent updates whose reads and writes chain; the second now misses the first and the
/// third the second. (Histories of read-two-write-one updates have such chains often.)
#[test]
fn injected_g2_item_is_named() {
    let skew = |seed| Subject::new(serial_events_with_aborts(&serial_skew_txns(seed, 4, 300, 4)));
    inject_into("g2-item", (0..20).map(skew), 10);
}

#[test]
fn the_shared_injectors_name_every_other_class_in_generated_histories() {
    let others =
        ["g1c", "lost-update", "g-single", "write-skew", "long-fork", "non-monotonic-snapshot", "real-time-violation"];
    for class in others {
        inject_into(class, (0..10).map(generated), 5);
    }
    let tested = ["g0", "aborted-read", "intermediate-read", "read-only-anomaly", "g2-item"];
    assert!(inject::CLASSES.iter().all(|c| others.contains(&c.0) || tested.contains(&c.0)), "every class is injected");
}
