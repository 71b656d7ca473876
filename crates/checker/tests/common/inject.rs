//! Anomaly injection, shared by the checker's mutation tests (`crates/checker/tests/mutation.rs`, on
//! generated serial histories) and the harness's (`crates/harness/tests/injected_anomalies.rs`, on
//! histories recorded from protocol runs in the simulator; it includes this file by path).
//!
//! A [`Subject`] is a valid history of a single-copy store. Its committed update transactions (`ok`, with
//! writes) have a *serial order*: by their commit `version` when they carry one (2PL reports it), otherwise
//! the order they were invoked in (a generated serial history). *State* `s` is the store after the first `s`
//! updates of that order; every update reads the state at its own position, and every other committed
//! transaction reads one state or an interval of them (its *snapshot*). [`Subject::new`] verifies this.
//!
//! Each injector looks for transactions whose smallest edit creates one anomaly of its class and nothing
//! else, and returns the edited history (`None` when the history has no such transactions). The conditions
//! it checks are what make the class, and the verdict at every level of [`expected`], certain: for instance
//! write skew takes two updates adjacent in the serial order (so no third update can join them into a
//! cycle with a single anti-dependency), of different processes, and neither reachable from the other once
//! edited (so the snapshot levels, which order transactions after their session and what they read, allow
//! the skew). Edits change what a read returned (to another version of the same key), add an intermediate
//! write (G1b), or change the reported commit order (G0); the written values stay unique.

#![allow(dead_code)]

use snowline_checker::{CommitOrder, History, Level, Txn, TxnId, TxnStatus, Verdict};
use snowline_core::history::{EventType, HistoryEvent, HistoryOp, OpKind};
use snowline_core::request::{Key, Value, Version};
use std::collections::{BTreeMap, HashMap, VecDeque};

/// A state of the serial order: the store after its first `s` updates (0: the initial state).
pub type State = usize;

/// The keys `t` wrote, once each, in the order of their first write.
pub fn writes(t: &Txn) -> Vec<Key> {
    let mut out: Vec<Key> = Vec::new();
    for o in t.ops.iter().filter(|o| o.0 == OpKind::Write) {
        if !out.contains(&o.1) {
            out.push(o.1.clone());
        }
    }
    out
}

/// `t`'s final write of `k`.
pub fn final_write(t: &Txn, k: &Key) -> Option<Value> {
    t.ops.iter().rev().find(|o| o.0 == OpKind::Write && &o.1 == k).and_then(|o| o.2.clone())
}

/// `t`'s external reads (of keys it had not written before): (op index, key, value).
pub fn ext_reads(t: &Txn) -> Vec<(usize, Key, Option<Value>)> {
    (0..t.ops.len())
        .filter(|&j| {
            t.ops[j].0 == OpKind::Read && !t.ops[..j].iter().any(|o| o.0 == OpKind::Write && o.1 == t.ops[j].1)
        })
        .map(|j| (j, t.ops[j].1.clone(), t.ops[j].2.clone()))
        .collect()
}

/// The anomaly names of a verdict.
pub fn kinds(v: &Verdict) -> Vec<&'static str> {
    v.counts.keys().map(|k| k.name()).collect()
}

/// A valid single-copy history, indexed for injection.
pub struct Subject {
    pub events: Vec<HistoryEvent>,
    pub history: History,
    /// The committed update transactions in serial order.
    pub serial: Vec<TxnId>,
    pos: HashMap<TxnId, usize>,
    /// Per key, its versions in serial order: (the writer's serial position, value).
    chain: BTreeMap<Key, Vec<(usize, Value)>>,
    /// The writer of each version.
    writer: HashMap<Value, TxnId>,
    /// The position in `events` of each event `index`.
    at: HashMap<u64, usize>,
    /// Every write is a read-modify-write (its transaction read the key first): the reads then order every
    /// key's writers, and the order the checker infers is the serial order.
    pub rmw_only: bool,
}

impl Subject {
    /// Index `events`, and verify that they are a valid single-copy history (panics otherwise).
    pub fn new(events: Vec<HistoryEvent>) -> Self {
        let history = snowline_checker::validate(&events).expect("a well-formed history");
        let txns = &history.txns;
        let mut serial: Vec<TxnId> = txns
            .iter()
            .filter(|t| t.status == TxnStatus::Ok && t.ops.iter().any(|o| o.0 == OpKind::Write))
            .map(|t| t.id)
            .collect();
        if serial.iter().any(|&t| txns[t].version.is_some()) {
            assert!(serial.iter().all(|&t| txns[t].version.is_some()), "every update has a version, or none has");
            serial.sort_by_key(|&t| (txns[t].version, t));
        }
        let pos = serial.iter().enumerate().map(|(i, &t)| (t, i)).collect();
        let mut chain: BTreeMap<Key, Vec<(usize, Value)>> = BTreeMap::new();
        let mut writer = HashMap::new();
        for (i, &t) in serial.iter().enumerate() {
            for k in writes(&txns[t]) {
                let v = final_write(&txns[t], &k).expect("writes carry values");
                chain.entry(k).or_default().push((i, v.clone()));
                writer.insert(v, t);
            }
        }
        let at = events.iter().enumerate().map(|(i, e)| (e.index, i)).collect();
        let rmw_only = serial.iter().all(|&t| {
            let reads = ext_reads(&txns[t]);
            writes(&txns[t]).iter().all(|k| reads.iter().any(|r| &r.1 == k))
        });
        let s = Self { events, history, serial, pos, chain, writer, at, rmw_only };
        for t in s.history.txns.iter().filter(|t| t.status == TxnStatus::Ok) {
            let snap = s.snapshot(t.id);
            let name = t.name();
            let Some((lo, hi)) = snap else { panic!("not a single-copy history: {name} reads no state") };
            if let Some(&p) = s.pos.get(&t.id) {
                assert!(
                    lo <= p && p <= hi,
                    "not a single-copy history: update {name} reads states {lo}..={hi}, not {p}"
                );
            }
        }
        s
    }

    pub fn txn(&self, t: TxnId) -> &Txn {
        &self.history.txns[t]
    }

    /// The transaction that wrote version `v`.
    pub fn writer_of(&self, v: &Value) -> Option<TxnId> {
        self.writer.get(v).copied()
    }

    /// The version of `k` before `v` (`None`: the initial version).
    pub fn before(&self, k: &Key, v: &Value) -> Option<Value> {
        let chain = &self.chain[k];
        let i = chain.iter().position(|(_, x)| x == v).expect("a version");
        i.checked_sub(1).map(|i| chain[i].1.clone())
    }

    /// The states at which reading `k = v` is current: from its writer's position + 1 to the next writer's
    /// position. `None`: `v` is no committed version of `k`.
    pub fn current(&self, k: &Key, v: &Option<Value>) -> Option<(State, State)> {
        let chain = self.chain.get(k).map(Vec::as_slice).unwrap_or(&[]);
        let i = match v {
            None => None,
            Some(v) => Some(chain.iter().position(|(_, x)| x == v)?),
        };
        let lo = i.map_or(0, |i| chain[i].0 + 1);
        let hi = chain.get(i.map_or(0, |i| i + 1)).map_or(self.serial.len(), |(p, _)| *p);
        Some((lo, hi))
    }

    /// The states every external read of `t` is current at (`None`: no state).
    pub fn snapshot(&self, t: TxnId) -> Option<(State, State)> {
        let mut out = (0, self.serial.len());
        for (_, k, v) in ext_reads(self.txn(t)) {
            let (lo, hi) = self.current(&k, &v)?;
            out = (out.0.max(lo), out.1.min(hi));
        }
        (out.0 <= out.1).then_some(out)
    }

    /// Committed read-only transactions that read something.
    pub fn read_only(&self) -> impl Iterator<Item = TxnId> + '_ {
        self.history
            .txns
            .iter()
            .filter(|t| t.status == TxnStatus::Ok && !t.ops.is_empty() && t.ops.iter().all(|o| o.0 == OpKind::Read))
            .map(|t| t.id)
    }

    /// Whether `t` read some version `u` wrote.
    pub fn reads_from(&self, t: TxnId, u: TxnId) -> bool {
        ext_reads(self.txn(t)).iter().any(|r| r.2.as_ref().and_then(|v| self.writer_of(v)) == Some(u))
    }

    /// Whether `t` read (externally) one of `keys`.
    pub fn reads_any(&self, t: TxnId, keys: &[Key]) -> bool {
        ext_reads(self.txn(t)).iter().any(|r| keys.contains(&r.1))
    }

    fn disjoint_writes(&self, ts: &[TxnId]) -> bool {
        let mut seen: Vec<Key> = Vec::new();
        for &t in ts {
            for k in writes(self.txn(t)) {
                if seen.contains(&k) {
                    return false;
                }
                seen.push(k);
            }
        }
        true
    }

    fn distinct_processes(&self, ts: &[TxnId]) -> bool {
        ts.iter().enumerate().all(|(i, &a)| ts[i + 1..].iter().all(|&b| self.txn(a).process != self.txn(b).process))
    }

    /// The committed version order of every key (the serial order), as a protocol reports it.
    pub fn commit_order(&self) -> CommitOrder {
        CommitOrder {
            keys: self.chain.iter().map(|(k, c)| (k.clone(), c.iter().map(|x| x.1.clone()).collect())).collect(),
        }
    }

    fn ok_event(&self, t: TxnId) -> usize {
        self.at[&self.txn(t).complete_index.expect("completed")]
    }

    fn invoke_event(&self, t: TxnId) -> usize {
        self.at[&self.txn(t).invoke_index]
    }

    /// Make read `op` of `t` return `v`.
    fn set_read(&self, events: &mut [HistoryEvent], t: TxnId, op: usize, v: Option<Value>) {
        let e = &mut events[self.ok_event(t)];
        assert_eq!(e.value[op].0, OpKind::Read);
        e.value[op].2 = v;
    }

    /// Make `t`'s reads of `u`'s versions return the versions `u` overwrote (`t` no longer sees `u`).
    fn unsee(&self, events: &mut [HistoryEvent], t: TxnId, u: TxnId) {
        for (op, k, v) in ext_reads(self.txn(t)) {
            if let Some(v) = v.filter(|v| self.writer_of(v) == Some(u)) {
                self.set_read(events, t, op, self.before(&k, &v));
            }
        }
    }

    /// The edges of session order and reads-from (happens-before), and with `ww` also of the version order,
    /// in `events` (an edit of this history: the same transactions and versions): successors per transaction.
    fn edges(&self, events: &[HistoryEvent], ww: bool) -> Vec<Vec<TxnId>> {
        let h = snowline_checker::validate(events).expect("a well-formed edit");
        let mut next: Vec<Vec<TxnId>> = vec![Vec::new(); h.txns.len()];
        let mut last: HashMap<u64, TxnId> = HashMap::new();
        let mut writer: HashMap<Value, TxnId> = HashMap::new();
        for t in h.txns.iter().filter(|t| t.is_committed()) {
            if let Some(p) = last.insert(t.process, t.id) {
                next[p].push(t.id);
            }
            for k in writes(t) {
                writer.insert(final_write(t, &k).unwrap(), t.id);
            }
        }
        for t in h.txns.iter().filter(|t| t.status == TxnStatus::Ok) {
            for (_, _, v) in ext_reads(t) {
                if let Some(&w) = v.as_ref().and_then(|v| writer.get(v)) {
                    next[w].push(t.id);
                }
            }
        }
        if ww {
            for c in self.chain.values() {
                for w in c.windows(2) {
                    next[self.serial[w[0].0]].push(self.serial[w[1].0]);
                }
            }
        }
        next
    }

    /// Whether `b` is reachable from `a` in `events` by session order and reads-from (happens-before), and
    /// with `ww` also the version order: then `pos`, `si` and `psi` make `b` see `a`.
    pub fn reaches(&self, events: &[HistoryEvent], a: TxnId, b: TxnId, ww: bool) -> bool {
        let next = self.edges(events, ww);
        let mut seen = vec![false; next.len()];
        let mut todo = VecDeque::from([a]);
        while let Some(x) = todo.pop_front() {
            for &y in &next[x] {
                if y == b {
                    return true;
                }
                if !seen[y] {
                    seen[y] = true;
                    todo.push_back(y);
                }
            }
        }
        false
    }

    /// Whether an update at serial position `p` or later reaches `t` in `events` by session order,
    /// reads-from and the version order. If none does, `t` can read the state before position `p` under
    /// `si` too (whose snapshots are prefixes of one order): every update `t` must see precedes `p`.
    pub fn reached_from(&self, events: &[HistoryEvent], t: TxnId, p: usize) -> bool {
        let next = self.edges(events, true);
        let mut prev: Vec<Vec<TxnId>> = vec![Vec::new(); next.len()];
        for (a, list) in next.iter().enumerate() {
            for &b in list {
                prev[b].push(a);
            }
        }
        let mut seen = vec![false; next.len()];
        let mut todo = VecDeque::from([t]);
        while let Some(x) = todo.pop_front() {
            for &y in &prev[x] {
                if self.pos.get(&y).is_some_and(|&q| q >= p) {
                    return true;
                }
                if !seen[y] {
                    seen[y] = true;
                    todo.push_back(y);
                }
            }
        }
        false
    }

    fn mutant(&self, class: &'static str, what: String, events: Vec<HistoryEvent>) -> Mutant {
        Mutant { class, what, events, order: None, control: None }
    }

    fn name(&self, t: TxnId) -> String {
        self.txn(t).name()
    }
}

/// An injected anomaly.
pub struct Mutant {
    /// The class, as [`expected`] names it.
    pub class: &'static str,
    /// Which transactions were edited, for failure messages.
    pub what: String,
    pub events: Vec<HistoryEvent>,
    /// G0: check with this commit order (the history's own, with one pair of writers swapped on one key).
    pub order: Option<CommitOrder>,
    /// The part of the edit that is harmless alone, and the levels at which it must pass.
    pub control: Option<(Vec<HistoryEvent>, &'static [Level])>,
}

/// An injector: the edited history, or `None` when the subject has no transactions to edit.
pub type Injector = fn(&Subject) -> Option<Mutant>;

/// Every class, with its injector, in the order of the expectation matrix of `docs/CHECKER.md`.
pub const CLASSES: [(&str, Injector); 12] = [
    ("aborted-read", aborted_read),
    ("intermediate-read", intermediate_read),
    ("g0", g0),
    ("g1c", g1c),
    ("lost-update", lost_update),
    ("g-single", g_single),
    ("write-skew", write_skew),
    ("read-only-anomaly", read_only_anomaly),
    ("long-fork", long_fork),
    ("g2-item", g2_item),
    ("non-monotonic-snapshot", non_monotonic_snapshot),
    ("real-time-violation", real_time_violation),
];

/// The injector of `class`.
pub fn injector(class: &str) -> Injector {
    CLASSES.iter().find(|c| c.0 == class).unwrap_or_else(|| panic!("no injector for {class}")).1
}

/// G1a: a committed transaction invoked after an aborted attempt ended now reads, for a key the attempt
/// wrote, the attempt's value.
pub fn aborted_read(s: &Subject) -> Option<Mutant> {
    let txns = &s.history.txns;
    for f in txns.iter().filter(|f| f.status == TxnStatus::Fail) {
        let Some(end) = f.complete_time else { continue };
        for w in f.ops.iter().filter(|o| o.0 == OpKind::Write) {
            let found = txns
                .iter()
                .filter(|t| t.status == TxnStatus::Ok && t.invoke_time > end)
                .find_map(|t| ext_reads(t).into_iter().find(|r| r.1 == w.1).map(|r| (t.id, r.0)));
            if let Some((t, op)) = found {
                let mut events = s.events.clone();
                s.set_read(&mut events, t, op, w.2.clone());
                return Some(s.mutant("aborted-read", format!("{} reads {}'s {}", s.name(t), f.name(), w.1), events));
            }
        }
    }
    None
}

/// G1b: an update `U` that a transaction `T` read from gets an extra write of the key `T` read, with a fresh
/// value, just before its final write of it; `T` now reads that intermediate value. (The extra write alone,
/// the control, is harmless.)
pub fn intermediate_read(s: &Subject) -> Option<Mutant> {
    for t in s.history.txns.iter().filter(|t| t.status == TxnStatus::Ok) {
        for (op, k, v) in ext_reads(t) {
            let Some(v) = v else { continue };
            let Some(u) = s.writer_of(&v) else { continue };
            let fresh: Value = format!("{v}-intermediate").into();
            let mut control = s.events.clone();
            for at in [s.invoke_event(u), s.ok_event(u)] {
                let ops = &mut control[at].value;
                let i = ops.iter().rposition(|o| o.0 == OpKind::Write && o.1 == k).unwrap();
                ops.insert(i, HistoryOp(OpKind::Write, k.clone(), Some(fresh.clone())));
            }
            let mut events = control.clone();
            s.set_read(&mut events, t.id, op, Some(fresh));
            let what = format!("{} reads an intermediate write of {k} added to {}", t.name(), s.name(u));
            return Some(Mutant {
                control: Some((control, &Level::ALL)),
                ..s.mutant("intermediate-read", what, events)
            });
        }
    }
    None
}

/// G0: two updates `A` and `B`, consecutive writers of a key `y`, that both also wrote a key `x`, and neither
/// of which happens before the other (so `B` wrote both keys blindly, and `A` and `B` are concurrent): the
/// commit order now lists them `A, B` on `x` and `B, A` on `y`. Only a reported commit order can show a
/// write cycle: an inferred one never orders blind writes against each other.
pub fn g0(s: &Subject) -> Option<Mutant> {
    for (y, chain) in &s.chain {
        for w in chain.windows(2) {
            let (a, b) = (s.serial[w[0].0], s.serial[w[1].0]);
            let wb = writes(s.txn(b));
            let Some(x) = writes(s.txn(a)).into_iter().find(|x| x != y && wb.contains(x)) else { continue };
            if s.reaches(&s.events, a, b, false) {
                continue;
            }
            let mut order = s.commit_order();
            let list = order.keys.get_mut(y).unwrap();
            let i = list.iter().position(|v| v == &w[0].1).unwrap();
            list.swap(i, i + 1);
            let what = format!("{} and {} swapped in the commit order of {y} (not of {x})", s.name(a), s.name(b));
            return Some(Mutant { order: Some(order), ..s.mutant("g0", what, s.events.clone()) });
        }
    }
    None
}

/// G1c: updates `T1`, `T2` adjacent in the serial order, with disjoint writes; `T2` read from `T1` and wrote
/// a key `T1` read: `T1` now reads `T2`'s versions of the keys `T2` wrote (each read the other's writes).
pub fn g1c(s: &Subject) -> Option<Mutant> {
    for p in 1..s.serial.len() {
        let (t1, t2) = (s.serial[p - 1], s.serial[p]);
        if !s.disjoint_writes(&[t1, t2]) || !s.reads_from(t2, t1) {
            continue;
        }
        let w2 = writes(s.txn(t2));
        let reads: Vec<(usize, Key)> =
            ext_reads(s.txn(t1)).into_iter().filter(|r| w2.contains(&r.1)).map(|r| (r.0, r.1)).collect();
        if reads.is_empty() {
            continue;
        }
        let mut events = s.events.clone();
        for (op, k) in &reads {
            s.set_read(&mut events, t1, *op, final_write(s.txn(t2), k));
        }
        return Some(s.mutant("g1c", format!("{} reads {}'s writes", s.name(t1), s.name(t2)), events));
    }
    None
}

/// Lost update: update `T2` read-modified-wrote `x` over `T1`'s version, and `T1` read-modified-wrote `x`
/// too: `T2` now reads the version `T1` read. `T1` must not happen before `T2` otherwise, so that only the
/// dependency graph sees the lost write.
pub fn lost_update(s: &Subject) -> Option<Mutant> {
    for &t2 in &s.serial {
        for (op, x, v) in ext_reads(s.txn(t2)) {
            let Some(v) = v.filter(|_| writes(s.txn(t2)).contains(&x)) else { continue };
            let Some(t1) = s.writer_of(&v) else { continue };
            if !ext_reads(s.txn(t1)).iter().any(|r| r.1 == x) {
                continue;
            }
            let mut events = s.events.clone();
            s.set_read(&mut events, t2, op, s.before(&x, &v));
            if s.reaches(&events, t1, t2, false) {
                continue;
            }
            return Some(s.mutant("lost-update", format!("{} reads the {x} {} read", s.name(t2), s.name(t1)), events));
        }
    }
    None
}

/// G-single (read skew): a read-only `T` read from `U` and from `W`, and `U` read from `W`: `T` now misses
/// `W` (reads the versions `W` overwrote), while still seeing `U`.
pub fn g_single(s: &Subject) -> Option<Mutant> {
    for t in s.read_only() {
        let sources: Vec<TxnId> =
            ext_reads(s.txn(t)).iter().filter_map(|r| r.2.as_ref().and_then(|v| s.writer_of(v))).collect();
        for &u in &sources {
            let Some(&w) = sources.iter().find(|&&w| w != u && s.reads_from(u, w)) else { continue };
            let mut events = s.events.clone();
            s.unsee(&mut events, t, w);
            let what = format!("{} misses {} but sees {}, which read from it", s.name(t), s.name(w), s.name(u));
            return Some(s.mutant("g-single", what, events));
        }
    }
    None
}

/// Write skew: updates `T1`, `T2` adjacent in the serial order, of different processes, with disjoint
/// writes; `T2` read from `T1`, and `T1` read a key `T2` wrote: `T2` now misses `T1`, so each read what
/// the other overwrote. Neither reaches the other once edited.
pub fn write_skew(s: &Subject) -> Option<Mutant> {
    for p in 1..s.serial.len() {
        let (t1, t2) = (s.serial[p - 1], s.serial[p]);
        let pair = [t1, t2];
        if !s.distinct_processes(&pair)
            || !s.disjoint_writes(&pair)
            || !s.reads_from(t2, t1)
            || !s.reads_any(t1, &writes(s.txn(t2)))
        {
            continue;
        }
        let mut events = s.events.clone();
        s.unsee(&mut events, t2, t1);
        if s.reaches(&events, t1, t2, true) {
            continue;
        }
        return Some(s.mutant("write-skew", format!("{} misses {}", s.name(t2), s.name(t1)), events));
    }
    None
}

/// Fekete et al.'s read-only anomaly: updates `P`, `Q` adjacent in the serial order, of different processes,
/// with disjoint writes; `Q` read from `P`, `P` read nothing `Q` wrote. `Q` now misses `P` (the control: the
/// updates alone stay serializable, `Q` before `P`), and a read-only `R` that saw both now misses `Q`: it
/// saw `P` without `Q`, which no serial order of the updates allows. No read-only transaction saw the state
/// between `P` and `Q` before the edit (it would already be such an `R`, and the control would fail), and
/// neither `Q` nor a later update reaches `R` (so `si` lets it miss `Q`).
pub fn read_only_anomaly(s: &Subject) -> Option<Mutant> {
    let snaps: Vec<(TxnId, (State, State))> = s.read_only().filter_map(|r| Some((r, s.snapshot(r)?))).collect();
    for p in 1..s.serial.len() {
        let (pp, q) = (s.serial[p - 1], s.serial[p]);
        let pair = [pp, q];
        let (wp, wq) = (writes(s.txn(pp)), writes(s.txn(q)));
        if !s.distinct_processes(&pair) || !s.disjoint_writes(&pair) || !s.reads_from(q, pp) || s.reads_any(pp, &wq) {
            continue;
        }
        // State p is after P and before Q.
        if snaps.iter().any(|&(_, (lo, hi))| lo >= p && hi <= p) {
            continue;
        }
        let mut control = s.events.clone();
        s.unsee(&mut control, q, pp);
        if s.reaches(&control, pp, q, true) {
            continue;
        }
        for &(r, _) in snaps.iter().filter(|&&(r, (lo, hi))| (lo..=hi).contains(&(p + 1)) && s.reads_any(r, &wp)) {
            if !s.reads_any(r, &wq) {
                continue;
            }
            let mut events = control.clone();
            s.unsee(&mut events, r, q);
            if s.reached_from(&events, r, p) {
                continue;
            }
            let what = format!(
                "{} misses {}, and {} sees {} but not {}",
                s.name(q),
                s.name(pp),
                s.name(r),
                s.name(pp),
                s.name(q)
            );
            const UPDATES_SERIALIZABLE: &[Level] =
                &[Level::Ser, Level::Pos, Level::Si, Level::Psi, Level::Nmsi, Level::Us];
            return Some(Mutant {
                control: Some((control, UPDATES_SERIALIZABLE)),
                ..s.mutant("read-only-anomaly", what, events)
            });
        }
    }
    None
}

/// Long fork: independent updates `U1`, `U2` (adjacent in the serial order, different processes, disjoint
/// writes, neither read a key the other wrote) and two read-only observers that saw both: one now misses
/// `U2`, the other `U1`, so they disagree on the order of the two. No session or dependency makes an
/// observer see the update it misses.
pub fn long_fork(s: &Subject) -> Option<Mutant> {
    let snaps: Vec<(TxnId, (State, State))> = s.read_only().filter_map(|r| Some((r, s.snapshot(r)?))).collect();
    for p in 1..s.serial.len() {
        let (u1, u2) = (s.serial[p - 1], s.serial[p]);
        let pair = [u1, u2];
        let (w1, w2) = (writes(s.txn(u1)), writes(s.txn(u2)));
        if !s.distinct_processes(&pair) || !s.disjoint_writes(&pair) || s.reads_any(u2, &w1) || s.reads_any(u1, &w2) {
            continue;
        }
        let observers: Vec<TxnId> = snaps
            .iter()
            .filter(|&&(r, (lo, hi))| (lo..=hi).contains(&(p + 1)) && s.reads_any(r, &w1) && s.reads_any(r, &w2))
            .map(|x| x.0)
            .collect();
        for &a in &observers {
            for &b in observers.iter().filter(|&&b| b != a) {
                let mut events = s.events.clone();
                s.unsee(&mut events, a, u2);
                s.unsee(&mut events, b, u1);
                let reach = |x, y| s.reaches(&events, x, y, true);
                if reach(u1, u2) || reach(u2, u1) || reach(u2, a) || reach(u1, b) {
                    continue;
                }
                let what =
                    format!("{} sees {} without {}, {} the reverse", s.name(a), s.name(u1), s.name(u2), s.name(b));
                return Some(s.mutant("long-fork", what, events));
            }
        }
    }
    None
}

/// G2-item: updates `T1`, `T2`, `T3` adjacent in the serial order, of three processes, with disjoint writes;
/// `T2` read from `T1`, `T3` from `T2`, and `T1` read a key `T3` wrote (but nothing `T2` wrote, and `T2`
/// nothing `T3` wrote, which would close a two-transaction skew). `T2` now misses `T1` and `T3` misses
/// `T2`: a cycle of three anti-dependencies among updates. No read-only transaction saw a state strictly
/// between `T1` and `T3` (it would close a shorter cycle through itself, a read-only anomaly).
pub fn g2_item(s: &Subject) -> Option<Mutant> {
    let snaps: Vec<(State, State)> = s.read_only().filter_map(|r| s.snapshot(r)).collect();
    for p in 2..s.serial.len() {
        let (t1, t2, t3) = (s.serial[p - 2], s.serial[p - 1], s.serial[p]);
        let all = [t1, t2, t3];
        if !s.distinct_processes(&all)
            || !s.disjoint_writes(&all)
            || !s.reads_from(t2, t1)
            || !s.reads_from(t3, t2)
            || !s.reads_any(t1, &writes(s.txn(t3)))
            || s.reads_any(t1, &writes(s.txn(t2)))
            || s.reads_any(t2, &writes(s.txn(t3)))
        {
            continue;
        }
        // States p - 1 and p are strictly between T1 and T3.
        if snaps.iter().any(|&(lo, hi)| lo >= p - 1 && hi <= p) {
            continue;
        }
        let mut events = s.events.clone();
        s.unsee(&mut events, t2, t1);
        s.unsee(&mut events, t3, t2);
        if s.reaches(&events, t1, t2, true) || s.reaches(&events, t2, t3, true) {
            continue;
        }
        let what = format!("{} misses {}, {} misses {}", s.name(t2), s.name(t1), s.name(t3), s.name(t2));
        return Some(s.mutant("g2-item", what, events));
    }
    None
}

/// Non-monotonic snapshot: a read-only `T` whose latest source is an update `W` of another process, and an
/// earlier transaction of `T`'s process that read a key from `W` that `T` read too: `T` now misses `W`
/// (reads the state just before it, which is consistent), so its session's snapshots go backwards.
pub fn non_monotonic_snapshot(s: &Subject) -> Option<Mutant> {
    for t in s.read_only() {
        let Some((lo, _)) = s.snapshot(t).filter(|x| x.0 > 0) else { continue };
        let w = s.serial[lo - 1];
        let (tt, tw) = (s.txn(t), s.txn(w));
        if tt.process == tw.process {
            continue;
        }
        let from_w: Vec<(Key, Option<Value>)> = ext_reads(tt)
            .into_iter()
            .filter(|r| r.2.as_ref().and_then(|v| s.writer_of(v)) == Some(w))
            .map(|r| (r.1, r.2))
            .collect();
        let earlier = s.history.txns[..t].iter().find(|e| {
            e.process == tt.process
                && e.status == TxnStatus::Ok
                && ext_reads(e).iter().any(|r| from_w.iter().any(|(k, v)| &r.1 == k && &r.2 == v))
        });
        let Some(e) = earlier else { continue };
        let mut events = s.events.clone();
        s.unsee(&mut events, t, w);
        let what = format!("{} misses {}, which {} of its session saw", tt.name(), tw.name(), e.name());
        return Some(s.mutant("non-monotonic-snapshot", what, events));
    }
    None
}

/// Real-time violation (a stale read): a read-only `T` invoked after its latest source `W` completed now
/// misses `W` (reads the state just before it, which is consistent), and neither `W` nor a later update
/// reaches `T` otherwise: only real time orders `W` before `T`.
pub fn real_time_violation(s: &Subject) -> Option<Mutant> {
    for t in s.read_only() {
        let Some((lo, _)) = s.snapshot(t).filter(|x| x.0 > 0) else { continue };
        let w = s.serial[lo - 1];
        if s.txn(w).complete_time.is_none_or(|end| end >= s.txn(t).invoke_time) {
            continue;
        }
        let mut events = s.events.clone();
        s.unsee(&mut events, t, w);
        if s.reached_from(&events, t, lo - 1) {
            continue;
        }
        let what = format!("{} misses {}, which completed before it was invoked", s.name(t), s.name(w));
        return Some(s.mutant("real-time-violation", what, events));
    }
    None
}

/// What the checker must report at one level.
#[derive(Clone, Copy, Debug)]
pub enum Want {
    /// Exactly these anomaly kinds (none: the level holds).
    Exactly(&'static [&'static str]),
    /// This kind, maybe with others the edit causes as well.
    Includes(&'static str),
}

/// What the checker reports for an injected class at each level it is checked at: the class's row of the
/// expectation matrix in `docs/CHECKER.md`, except where an edit of a real history has consequences the
/// canonical history has not. G0 and lost update are checked at the dependency-graph levels only (a swapped
/// commit order, or a write lost by a transaction that a later session depends on, can also break causal
/// visibility). For G1c, the cycle runs through read-modify-writes, whose reads of their own keys miss the
/// other transaction's causal past: `causal-snapshot` may report a causality gap, and `causal` and `tcc`
/// include one besides the cyclic causality. For a non-monotonic snapshot, the session may also have read
/// something the missed update happens before: `causal` and `tcc` may add `writes-follow-reads`.
pub fn expected(class: &str) -> Vec<(Level, Want)> {
    use Level::*;
    use Want::*;
    let row = |named: &[Level], kinds: &'static [&'static str], ok: &[Level]| -> Vec<(Level, Want)> {
        named.iter().map(|&l| (l, Exactly(kinds))).chain(ok.iter().map(|&l| (l, Exactly(&[])))).collect()
    };
    let vis = Level::VISIBILITY;
    let and = |a: &[Level], b: &[Level]| [a, b].concat();
    match class {
        "aborted-read" => row(&Level::ALL, &["aborted-read"], &[]),
        "intermediate-read" => row(&Level::ALL, &["intermediate-read"], &[]),
        "g0" => row(&Level::GRAPH, &["g0"], &[]),
        "g1c" => {
            let mut out = row(&Level::GRAPH, &["g1c"], &[Rc, Ra]);
            out.extend([(Causal, Includes("cyclic-causality")), (Tcc, Includes("cyclic-causality"))]);
            out
        }
        "lost-update" => row(&Level::GRAPH, &["lost-update"], &[]),
        "g-single" => {
            [row(&Level::GRAPH, &["g-single"], &[Rc, Ra]), row(&[CausalSnapshot, Causal, Tcc], &["causality-gap"], &[])]
                .concat()
        }
        "write-skew" => row(&[Ser, StrictSer, Pos, Us], &["write-skew"], &and(&vis, &[Si, Psi, Nmsi])),
        "read-only-anomaly" => row(&[Ser, StrictSer, Pos, Us], &["read-only-anomaly"], &and(&vis, &[Si, Psi, Nmsi])),
        "long-fork" => row(&[Ser, StrictSer, Pos, Si], &["long-fork"], &and(&vis, &[Psi, Nmsi, Us])),
        "g2-item" => row(&[Ser, StrictSer, Pos, Us], &["g2-item"], &and(&vis, &[Si, Psi, Nmsi])),
        "non-monotonic-snapshot" => [
            row(&[Pos, Si, Psi], &["non-monotonic-snapshot"], &[Rc, Ra, CausalSnapshot, Ser, Nmsi, Us]),
            row(&[StrictSer], &["real-time-violation"], &[]),
            vec![(Causal, Includes("monotonic-reads")), (Tcc, Includes("monotonic-reads"))],
        ]
        .concat(),
        "real-time-violation" => {
            row(&[StrictSer], &["real-time-violation"], &and(&vis, &[Ser, Pos, Si, Psi, Nmsi, Us]))
        }
        other => panic!("no expectations for {other}"),
    }
}

impl Subject {
    /// The verdicts on `events` (this history or an edit of it) at `level`: with `order` if given (G0);
    /// otherwise with the serial order as the commit order (from the `version` fields when the updates carry
    /// them, as `snowline check` does for a 2PL history), and, when every write is a read-modify-write, also
    /// with the order inferred from the reads. (Blind writes leave an inferred order free, and then an edit
    /// made under the serial order may be no anomaly under another one.)
    pub fn verdicts(
        &self,
        events: &[HistoryEvent],
        order: Option<&CommitOrder>,
        level: Level,
    ) -> Vec<(&'static str, Verdict)> {
        let h = snowline_checker::validate(events).expect("well formed");
        if let Some(order) = order {
            return vec![(
                "the given commit order",
                snowline_checker::check_with_order(&h, level, order).expect("an order"),
            )];
        }
        let reported = if h.txns.iter().any(|t| t.version.is_some()) {
            ("reported versions", snowline_checker::check_with_versions(&h, level))
        } else {
            let order = self.commit_order();
            (
                "the serial order as the commit order",
                snowline_checker::check_with_order(&h, level, &order).expect("an order"),
            )
        };
        let mut out = vec![reported];
        if self.rmw_only {
            out.push(("inferred order", snowline_checker::check_history(&h, level)));
        }
        out
    }
}

/// Assert that the unmutated subject passes every level `m`'s class is checked at, that the checker names
/// the class at each level as [`expected`] says, and that the control passes.
pub fn assert_named(s: &Subject, m: &Mutant) {
    let own = m.order.as_ref().map(|_| s.commit_order());
    for (level, want) in expected(m.class) {
        for (how, v) in s.verdicts(&s.events, own.as_ref(), level) {
            assert!(v.ok, "the unmutated history fails {level} ({how}):\n{v}");
        }
        for (how, v) in s.verdicts(&m.events, m.order.as_ref(), level) {
            let got = kinds(&v);
            let fine = match want {
                Want::Exactly(names) => got == names,
                Want::Includes(name) => got.contains(&name),
            };
            assert!(fine, "{} ({}) at {level} ({how}): expected {want:?}, got {got:?}\n{v}", m.class, m.what);
        }
    }
    if let Some((events, levels)) = &m.control {
        for &level in levels.iter() {
            for (how, v) in s.verdicts(events, None, level) {
                assert!(v.ok, "{} control ({}) fails {level} ({how}):\n{v}", m.class, m.what);
            }
        }
    }
}

/// Append two concurrent blind writes of keys `x` and `y` (fresh processes, fresh values, versions after
/// every other) to a history whose own transactions cannot show a write cycle: the pair [`g0`] needs.
pub fn append_concurrent_blind_writes(events: &mut Vec<HistoryEvent>, x: &Key, y: &Key) {
    let process = events.iter().map(|e| e.process).max().map_or(0, |p| p + 1);
    let time = events.iter().map(|e| e.time).max().unwrap_or(0) + 1;
    let top = events.iter().filter_map(|e| e.version).max().map_or(0, |v| v.time);
    let ops = |i: u64| -> Vec<HistoryOp> {
        [x, y].iter().map(|k| HistoryOp(OpKind::Write, (*k).clone(), Some(format!("blind-{i}-{k}").into()))).collect()
    };
    // Both are invoked before either completes.
    let steps = [(0, EventType::Invoke, 0), (1, EventType::Invoke, 0), (0, EventType::Ok, 1), (1, EventType::Ok, 2)];
    for (i, kind, dt) in steps {
        let index = events.last().map_or(0, |e| e.index + 1);
        events.push(HistoryEvent {
            index,
            process: process + i,
            dc: 0,
            kind,
            f: "txn".into(),
            value: ops(i),
            time: time + dt,
            error: None,
            cause: None,
            version: (kind == EventType::Ok).then_some(Version { time: top + 1 + i, dc: 0 }),
        });
    }
}
