//! Test helpers: a compact history notation, a serial single-copy store simulation, and a brute-force
//! reference checker.

#![allow(dead_code)]

pub mod inject;
pub mod reference;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use snowline_checker::{AnomalyKind, Level, Verdict};
use snowline_core::history::{EventType, HistoryEvent, HistoryOp, HistoryWriter, OpKind};
use std::collections::BTreeMap;

/// Parse `"r x 1, w y 2, r z _"` (`_` is null) into micro-operations.
pub fn ops(spec: &str) -> Vec<HistoryOp> {
    spec.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|op| {
            let parts: Vec<&str> = op.split_whitespace().collect();
            assert_eq!(parts.len(), 3, "bad micro-op {op:?}");
            let kind = match parts[0] {
                "r" => OpKind::Read,
                "w" => OpKind::Write,
                other => panic!("bad op kind {other:?}"),
            };
            let value = (parts[2] != "_").then(|| parts[2].into());
            HistoryOp(kind, parts[1].into(), value)
        })
        .collect()
}

/// Builds histories event by event.
#[derive(Default)]
pub struct Builder {
    pub events: Vec<HistoryEvent>,
}

impl Builder {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn push(&mut self, process: u64, kind: EventType, value: Vec<HistoryOp>) {
        let index = self.events.len() as u64;
        self.events.push(HistoryEvent {
            index,
            process,
            dc: 0,
            kind,
            f: "txn".into(),
            value,
            time: index * 10,
            error: None,
            cause: None,
            version: None,
        });
    }

    /// An invoke: reads carry null.
    pub fn invoke(&mut self, process: u64, spec: &str) -> &mut Self {
        let invoked =
            ops(spec).into_iter().map(|HistoryOp(k, key, v)| HistoryOp(k, key, v.filter(|_| k == OpKind::Write)));
        self.push(process, EventType::Invoke, invoked.collect());
        self
    }

    /// A completion: `ok` carries the reads' values; `fail`/`info` carry the ops as invoked.
    pub fn complete(&mut self, process: u64, status: &str, spec: &str) -> &mut Self {
        let kind = match status {
            "ok" => EventType::Ok,
            "fail" => EventType::Fail,
            "info" => EventType::Info,
            other => panic!("bad status {other:?}"),
        };
        let mut value = ops(spec);
        if kind != EventType::Ok {
            value.iter_mut().filter(|o| o.0 == OpKind::Read).for_each(|o| o.2 = None);
        }
        self.push(process, kind, value);
        self
    }

    /// Set the commit version (`time`, dc 0) of the last event, an `ok` completion.
    pub fn version(&mut self, time: u64) -> &mut Self {
        let e = self.events.last_mut().expect("an event");
        assert_eq!(e.kind, EventType::Ok, "versions are on ok completions");
        e.version = Some(snowline_core::request::Version { time, dc: 0 });
        self
    }

    /// A whole transaction: invoke then completion.
    pub fn txn(&mut self, process: u64, status: &str, spec: &str) -> &mut Self {
        self.invoke(process, spec).complete(process, status, spec)
    }

    pub fn jsonl(&self) -> String {
        let mut buf = Vec::new();
        HistoryWriter::write_jsonl(&self.events, &mut buf).unwrap();
        String::from_utf8(buf).unwrap()
    }
}

pub fn parse_jsonl(s: &str) -> Vec<HistoryEvent> {
    HistoryWriter::read_jsonl(s.as_bytes()).unwrap_or_else(|e| panic!("bad JSONL at line {}: {}", e.0, e.1))
}

pub fn kinds(v: &Verdict) -> Vec<&'static str> {
    v.counts.keys().map(|k: &AnomalyKind| k.name()).collect()
}

/// A serial execution against one copy of the store: each step one random session runs one transaction
/// (reads return the latest values). Always satisfies every level. `multi` makes some transactions write
/// several keys.
pub fn serial_history(seed: u64, sessions: u64, steps: usize, keys: usize) -> Vec<HistoryEvent> {
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut store: BTreeMap<String, String> = BTreeMap::new();
    let mut b = Builder::new();
    for step in 0..steps {
        let p = rng.random_range(0..sessions);
        let n = rng.random_range(1..=3usize);
        let mut spec = Vec::new();
        let read_only = rng.random_bool(0.5);
        let mut used = Vec::new();
        for j in 0..n {
            let k = format!("k{}", rng.random_range(0..keys));
            if used.contains(&k) {
                continue;
            }
            used.push(k.clone());
            if read_only {
                let v = store.get(&k).cloned().unwrap_or_else(|| "_".into());
                spec.push(format!("r {k} {v}"));
            } else {
                let v = format!("v{step}-{j}");
                store.insert(k.clone(), v.clone());
                spec.push(format!("w {k} {v}"));
            }
        }
        b.txn(p, "ok", &spec.join(", "));
    }
    b.events
}

/// A serial execution of read-write transactions against one copy of the store, as (process, completed
/// micro-operations): read-only transactions, read-modify-writes, "skew" transactions (read two keys, write
/// one) and blind writes. Always satisfies every level. Record it with [`serial_events`].
pub fn serial_rw_txns(seed: u64, sessions: u64, steps: usize, keys: usize) -> Vec<(u64, Vec<HistoryOp>)> {
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut store: BTreeMap<String, String> = BTreeMap::new();
    let mut out = Vec::new();
    for step in 0..steps {
        let p = rng.random_range(0..sessions);
        let mut ks: Vec<String> = (0..3).map(|_| format!("k{}", rng.random_range(0..keys))).collect();
        ks.dedup();
        if ks.len() == 3 && ks[0] == ks[2] {
            ks.pop();
        }
        let read = |store: &BTreeMap<String, String>, k: &str| {
            HistoryOp(OpKind::Read, k.into(), store.get(k).map(|v| v.as_str().into()))
        };
        let mut ops = Vec::new();
        let write = |store: &mut BTreeMap<String, String>, ops: &mut Vec<HistoryOp>, k: &str, j: usize| {
            let v = format!("v{step}-{j}");
            store.insert(k.to_string(), v.clone());
            ops.push(HistoryOp(OpKind::Write, k.into(), Some(v.as_str().into())));
        };
        match rng.random_range(0..10) {
            0..4 => ops.extend(ks.iter().map(|k| read(&store, k))),
            4..6 => {
                for (j, k) in ks.iter().take(1 + step % 2).enumerate() {
                    ops.push(read(&store, k));
                    write(&mut store, &mut ops, k, j);
                }
            }
            6..8 if ks.len() >= 2 => {
                ops.push(read(&store, &ks[0]));
                ops.push(read(&store, &ks[1]));
                write(&mut store, &mut ops, &ks[0], 0);
            }
            _ => {
                for (j, k) in ks.iter().take(2).enumerate() {
                    write(&mut store, &mut ops, k, j);
                }
            }
        }
        out.push((p, ops));
    }
    out
}

/// A serial execution of "skew" updates (read two keys, write the first, as YCSB-T's mix B does with a third
/// read) and one-key reads, as (process, completed micro-operations). Updates whose reads and writes chain
/// through several transactions in a row, which G2-item needs, are common here. Always satisfies every
/// level.
pub fn serial_skew_txns(seed: u64, sessions: u64, steps: usize, keys: usize) -> Vec<(u64, Vec<HistoryOp>)> {
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut store: BTreeMap<String, String> = BTreeMap::new();
    let read = |store: &BTreeMap<String, String>, k: &str| {
        HistoryOp(OpKind::Read, k.into(), store.get(k).map(|v| v.as_str().into()))
    };
    (0..steps)
        .map(|step| {
            let p = rng.random_range(0..sessions);
            let a = rng.random_range(0..keys);
            let ka = format!("k{a}");
            if rng.random_bool(1.0 / 3.0) {
                return (p, vec![read(&store, &ka)]);
            }
            let kb = format!("k{}", (a + rng.random_range(1..keys)) % keys);
            let ops = vec![read(&store, &ka), read(&store, &kb)];
            let v = format!("v{step}");
            store.insert(ka.clone(), v.clone());
            (p, [ops, vec![HistoryOp(OpKind::Write, ka.as_str().into(), Some(v.as_str().into()))]].concat())
        })
        .collect()
}

/// Record transactions one after another (`ok`), in the builder's timing: none overlap in real time.
pub fn serial_events(txns: &[(u64, Vec<HistoryOp>)]) -> Vec<HistoryEvent> {
    let mut b = Builder::new();
    for (p, ops) in txns {
        let invoked: Vec<HistoryOp> = ops
            .iter()
            .map(|HistoryOp(k, key, v)| HistoryOp(*k, key.clone(), v.clone().filter(|_| *k == OpKind::Write)))
            .collect();
        b.push(*p, EventType::Invoke, invoked);
        b.push(*p, EventType::Ok, ops.clone());
    }
    b.events
}

/// Like [`serial_events`], with an aborted attempt before every third update: the same micro-operations by
/// the same process, ended `fail` (cause `conflict`), its written values suffixed `-aborted` (a retry writes
/// fresh values), its reads `null`. Aborted attempts have no effect, so the history stays valid at every
/// level.
pub fn serial_events_with_aborts(txns: &[(u64, Vec<HistoryOp>)]) -> Vec<HistoryEvent> {
    let mut b = Builder::new();
    let mut updates = 0;
    for (p, ops) in txns {
        let invoked = |suffix: &str| -> Vec<HistoryOp> {
            ops.iter()
                .map(|HistoryOp(k, key, v)| {
                    let v = v.as_ref().filter(|_| *k == OpKind::Write).map(|v| format!("{v}{suffix}").into());
                    HistoryOp(*k, key.clone(), v)
                })
                .collect()
        };
        if ops.iter().any(|o| o.0 == OpKind::Write) {
            updates += 1;
            if updates % 3 == 0 {
                b.push(*p, EventType::Invoke, invoked("-aborted"));
                b.push(*p, EventType::Fail, invoked("-aborted"));
                b.events.last_mut().unwrap().cause = Some(snowline_core::request::AbortCause::Conflict);
            }
        }
        b.push(*p, EventType::Invoke, invoked(""));
        b.push(*p, EventType::Ok, ops.clone());
    }
    b.events
}

/// Check every level and assert the expected anomaly kinds (empty: passes) at each.
pub fn expect(events: &[HistoryEvent], expected: &[(Level, &[&str])]) {
    for &(level, names) in expected {
        let v = snowline_checker::check(events, level);
        assert_eq!(kinds(&v), names.to_vec(), "at {level}:\n{v}");
        assert_eq!(v.ok, names.is_empty());
    }
}
