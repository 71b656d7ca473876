//! Mutation tests: a serial execution against one copy of the store satisfies every level; one injected
//! anomaly is caught under its own name.

mod common;

use common::{kinds, serial_history};
use snowline_checker::{Level, check};
use snowline_core::history::{EventType, HistoryEvent, OpKind};

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
