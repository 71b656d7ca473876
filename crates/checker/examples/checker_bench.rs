//! How fast the checker checks a realistic history, at every level.
//!
//! `cargo run --release -p snowline-checker --example checker_bench [TXNS] [PROCESSES] [KEYS] [SEED]
//! [STALE]` (defaults: 100000 transactions, 16 processes, 1000 keys, seed 1, 0).
//!
//! The history is a simulated single-copy execution (two-phase-locking-like): each process invokes a
//! transaction, the transaction takes effect atomically at its commit time (transactions of different
//! processes overlap in real time) and completes a little later. Half the transactions are read-only, a
//! third read-modify-write one or two keys, the rest write keys blindly (so the version order of those keys
//! cannot be inferred from reads and the checker must complete it); 2% abort, 0.1% end `info`. Every
//! `ok` that wrote carries its commit version. The history is serializable, so every level passes; the
//! figure is the time to prove it, first inferring the version order, then (`+versions`) taking it from
//! the commit versions. With `STALE` > 0, that many reads in 10,000 return the version before the current
//! one: the history is full of anomalies, and the figure is the time to find them.

#![allow(clippy::disallowed_methods)] // a benchmark reads the clock

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use snowline_checker::{Level, check_history, check_with_versions, validate};
use snowline_core::HistoryEvent;
use snowline_core::history::{EventType, HistoryOp, OpKind};
use snowline_core::request::Version;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::time::Instant;

struct Pending {
    process: u64,
    invoke_time: u64,
    ops: Vec<HistoryOp>,
}

fn generate(txns: usize, processes: u64, keys: usize, seed: u64, stale: u32) -> Vec<HistoryEvent> {
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut store: HashMap<String, String> = HashMap::new();
    let mut previous: HashMap<String, String> = HashMap::new();
    // (time, order, event): sorted by time at the end.
    let mut timeline: Vec<(u64, u64, HistoryEvent)> = Vec::new();
    let mut seq = 0u64;
    let mut push = |timeline: &mut Vec<(u64, u64, HistoryEvent)>, time: u64, e: HistoryEvent| {
        timeline.push((time, seq, e));
        seq += 1;
    };
    let event = |process: u64, kind: EventType, value: Vec<HistoryOp>, time: u64| HistoryEvent {
        index: 0,
        process,
        dc: 0,
        kind,
        f: "txn".into(),
        value,
        time,
        error: None,
        cause: None,
        version: None,
    };
    let mut heap: BinaryHeap<Reverse<(u64, usize)>> = BinaryHeap::new();
    let mut slots: Vec<Pending> = Vec::new();
    let mut next_process = processes;
    let mut started = 0usize;
    let new_txn = |rng: &mut SmallRng, process: u64, now: u64, started: &mut usize| -> Pending {
        *started += 1;
        let n = rng.random_range(1..=4usize);
        let mut ops = Vec::new();
        let kind = rng.random_range(0..100);
        let mut used: Vec<String> = Vec::new();
        for j in 0..n {
            let k = format!("k{}", rng.random_range(0..keys));
            if used.contains(&k) {
                continue;
            }
            used.push(k.clone());
            let v = || format!("v{process}-{}-{j}", *started);
            match kind {
                0..50 => ops.push(HistoryOp(OpKind::Read, k.as_str().into(), None)),
                50..83 if j < 2 => {
                    ops.push(HistoryOp(OpKind::Read, k.as_str().into(), None));
                    ops.push(HistoryOp(OpKind::Write, k.as_str().into(), Some(v().into())));
                }
                50..83 => ops.push(HistoryOp(OpKind::Read, k.as_str().into(), None)),
                _ => ops.push(HistoryOp(OpKind::Write, k.as_str().into(), Some(v().into()))),
            }
        }
        Pending { process, invoke_time: now + rng.random_range(1..1_000), ops }
    };
    for p in 0..processes {
        let t = new_txn(&mut rng, p, 0, &mut started);
        push(&mut timeline, t.invoke_time, event(p, EventType::Invoke, t.ops.clone(), t.invoke_time));
        heap.push(Reverse((t.invoke_time + rng.random_range(100..20_000), slots.len())));
        slots.push(t);
    }
    let mut done = 0usize;
    while let Some(Reverse((commit, slot))) = heap.pop() {
        let t = std::mem::replace(&mut slots[slot], Pending { process: 0, invoke_time: 0, ops: Vec::new() });
        let complete = commit + rng.random_range(1..500);
        let roll = rng.random_range(0..1000);
        let mut process = t.process;
        if roll < 20 {
            push(&mut timeline, complete, event(t.process, EventType::Fail, t.ops.clone(), complete));
        } else {
            // Take effect now: reads see the store, writes apply (an info write may or may not).
            let info = roll < 21;
            let mut ops = t.ops.clone();
            let apply = !info || rng.random_bool(0.5);
            for op in &mut ops {
                match op.0 {
                    OpKind::Read if rng.random_range(0..10_000) < stale => {
                        op.2 = previous.get(&*op.1).map(|v| v.as_str().into());
                    }
                    OpKind::Read => op.2 = store.get(&*op.1).map(|v| v.as_str().into()),
                    OpKind::Write if apply => {
                        if let Some(old) = store.insert(op.1.to_string(), op.2.as_deref().unwrap().to_string()) {
                            previous.insert(op.1.to_string(), old);
                        }
                    }
                    OpKind::Write => {}
                }
            }
            if info {
                push(&mut timeline, complete, event(t.process, EventType::Info, t.ops.clone(), complete));
                process = next_process;
                next_process += 1;
            } else {
                let mut e = event(t.process, EventType::Ok, ops, complete);
                if t.ops.iter().any(|o| o.0 == OpKind::Write) {
                    e.version = Some(Version { time: commit, dc: 0 });
                }
                push(&mut timeline, complete, e);
            }
        }
        done += 1;
        if started < txns {
            let next = new_txn(&mut rng, process, complete, &mut started);
            push(
                &mut timeline,
                next.invoke_time,
                event(process, EventType::Invoke, next.ops.clone(), next.invoke_time),
            );
            heap.push(Reverse((next.invoke_time + rng.random_range(100..20_000), slot)));
            slots[slot] = next;
        }
    }
    assert_eq!(done, txns);
    timeline.sort_by_key(|(time, seq, _)| (*time, *seq));
    timeline
        .into_iter()
        .enumerate()
        .map(|(i, (_, _, mut e))| {
            e.index = i as u64;
            e
        })
        .collect()
}

fn main() {
    let args: Vec<u64> = std::env::args().skip(1).map(|a| a.parse().expect("numeric arguments")).collect();
    let arg = |i: usize, default: u64| args.get(i).copied().unwrap_or(default);
    let (txns, processes, keys, seed) = (arg(0, 100_000) as usize, arg(1, 16), arg(2, 1_000) as usize, arg(3, 1));
    let stale = arg(4, 0) as u32;
    let t0 = Instant::now();
    let events = generate(txns, processes, keys, seed, stale);
    println!(
        "generated {txns} transactions ({} events, {processes} processes, {keys} keys) in {:.2}s",
        events.len(),
        t0.elapsed().as_secs_f64()
    );
    let t0 = Instant::now();
    let history = validate(&events).expect("a well-formed history");
    println!("validate: {:.2}s", t0.elapsed().as_secs_f64());
    let mut rows = Vec::new();
    for level in Level::ALL {
        rows.push((level.name().to_string(), level, false));
    }
    for level in Level::GRAPH {
        rows.push((format!("{}+versions", level.name()), level, true));
    }
    for (name, level, versions) in rows {
        let t0 = Instant::now();
        let verdict = if versions { check_with_versions(&history, level) } else { check_history(&history, level) };
        let secs = t0.elapsed().as_secs_f64();
        let outcome = match (verdict.ok, verdict.inconclusive) {
            (true, false) => "ok".to_string(),
            (true, true) => "ok (inconclusive)".to_string(),
            (false, _) => {
                let counts: Vec<String> = verdict.counts.iter().map(|(k, n)| format!("{k} x{n}")).collect();
                format!("FAILED ({})", counts.join(", "))
            }
        };
        println!("{name:>20}: {secs:>7.3}s {:>12.0} txns/s  {outcome}", txns as f64 / secs);
        if (!verdict.ok && stale == 0) || verdict.inconclusive {
            println!("{verdict}");
        }
    }
}
