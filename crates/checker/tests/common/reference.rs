//! A brute-force reference checker for tiny histories, written from the definitions in the crate docs
//! without sharing the checker's algorithms: happens-before by Floyd–Warshall closure; the version order of a
//! key by enumerating every total order of its versions consistent with happens-before (a version precedes
//! another when it does in all of them); each anomaly by quantifying over all transactions.

// Index loops read closer to the definitions here.
#![allow(clippy::needless_range_loop)]

use snowline_checker::{CommitOrder, History, Level, TxnStatus};
use snowline_core::history::OpKind;
use snowline_core::request::{Key, Value};
use std::collections::BTreeMap;

/// The class names compared with the fast checker (`monotonic-writes` and `writes-follow-reads` merged).
pub const SESSION_ORDER: &str = "monotonic-writes|writes-follow-reads";

struct ExtRead {
    key: Key,
    source: Option<usize>,
}

/// Anomaly counts per name, one per offending read (cycles: one per strongly connected component).
pub fn reference(h: &History, level: Level) -> BTreeMap<&'static str, usize> {
    let txns = &h.txns;
    let n = txns.len();
    let committed = |t: usize| txns[t].status != TxnStatus::Fail;
    let mut out: BTreeMap<&'static str, usize> = BTreeMap::new();
    let mut bump = |name: &'static str| *out.entry(name).or_insert(0) += 1;
    // The final write of `key` by `t`, if any.
    let final_write = |t: usize, key: &Key| -> Option<usize> {
        txns[t].ops.iter().rposition(|o| o.0 == OpKind::Write && &o.1 == key)
    };
    // Read resolution.
    let mut ext: Vec<Vec<ExtRead>> = (0..n).map(|_| Vec::new()).collect();
    for t in 0..n {
        if txns[t].status != TxnStatus::Ok {
            continue;
        }
        for (i, op) in txns[t].ops.iter().enumerate() {
            if op.0 != OpKind::Read {
                continue;
            }
            if let Some(j) = txns[t].ops[..i].iter().rposition(|o| o.0 == OpKind::Write && o.1 == op.1) {
                if txns[t].ops[j].2 != op.2 {
                    bump("internal-read");
                }
                continue;
            }
            let Some(v) = &op.2 else {
                ext[t].push(ExtRead { key: op.1.clone(), source: None });
                continue;
            };
            let mut writer = None;
            for (u, tx) in txns.iter().enumerate() {
                for (j, o) in tx.ops.iter().enumerate() {
                    if o.0 == OpKind::Write && o.2.as_ref() == Some(v) {
                        writer = Some((u, j));
                    }
                }
            }
            match writer {
                None => bump("thin-air-read"),
                Some((u, j)) if txns[u].ops[j].1 != op.1 => bump("thin-air-read"),
                Some((u, _)) if u == t => bump("internal-read"),
                Some((u, _)) if txns[u].status == TxnStatus::Fail => bump("aborted-read"),
                Some((u, j)) if final_write(u, &op.1) != Some(j) => bump("intermediate-read"),
                Some((u, _)) => ext[t].push(ExtRead { key: op.1.clone(), source: Some(u) }),
            }
        }
    }
    if level == Level::Rc {
        return out;
    }
    // Happens-before: closure of session order and reads-from.
    let mut reach = vec![vec![false; n]; n];
    for a in 0..n {
        for b in a + 1..n {
            if committed(a) && committed(b) && txns[a].process == txns[b].process {
                reach[a][b] = true;
            }
        }
        for r in &ext[a] {
            if let Some(u) = r.source {
                reach[u][a] = true;
            }
        }
    }
    for k in 0..n {
        for i in 0..n {
            if reach[i][k] {
                for j in 0..n {
                    if reach[k][j] {
                        reach[i][j] = true;
                    }
                }
            }
        }
    }
    let causal = matches!(level, Level::Causal | Level::Tcc);
    if causal {
        let mut class_seen = vec![false; n];
        for a in 0..n {
            if reach[a][a] && !class_seen[a] {
                bump("cyclic-causality");
                for b in 0..n {
                    if reach[a][b] && reach[b][a] {
                        class_seen[b] = true;
                    }
                }
            }
        }
    }
    // Version order per key: precedes in every total order of the key's writers that respects strict hb.
    let mut writers: BTreeMap<Key, Vec<usize>> = BTreeMap::new();
    for t in (0..n).filter(|&t| committed(t)) {
        for o in &txns[t].ops {
            if o.0 == OpKind::Write && final_write(t, &o.1).is_some() {
                let w = writers.entry(o.1.clone()).or_default();
                if !w.contains(&t) {
                    w.push(t);
                }
            }
        }
    }
    let strict = |a: usize, b: usize| reach[a][b] && !reach[b][a];
    let mut before: BTreeMap<Key, Vec<Vec<bool>>> = BTreeMap::new();
    for (key, ws) in &writers {
        let m = ws.len();
        let mut all = vec![vec![true; m]; m];
        let mut any = false;
        permutations(m, &mut |perm: &[usize]| {
            let mut at = vec![0; m];
            for (i, &x) in perm.iter().enumerate() {
                at[x] = i;
            }
            let consistent = (0..m).all(|a| (0..m).all(|b| !strict(ws[a], ws[b]) || at[a] < at[b]));
            if consistent {
                any = true;
                for a in 0..m {
                    for b in 0..m {
                        if at[a] >= at[b] {
                            all[a][b] = false;
                        }
                    }
                }
            }
        });
        assert!(any, "a strict partial order has a linear extension");
        before.insert(key.clone(), all);
    }
    let prec = |key: &Key, v: Option<usize>, w: usize| -> bool {
        let Some(v) = v else { return true };
        let ws = &writers[key];
        let (Some(a), Some(b)) = (ws.iter().position(|&x| x == v), ws.iter().position(|&x| x == w)) else {
            return false;
        };
        before[key][a][b]
    };
    let writes = |t: usize, key: &Key| committed(t) && final_write(t, key).is_some();
    let atomic = matches!(level, Level::Ra | Level::Tcc);
    let order_preserving = matches!(level, Level::CausalSnapshot | Level::Causal | Level::Tcc);
    for t in 0..n {
        let sources: Vec<usize> = ext[t].iter().filter_map(|r| r.source).collect();
        let earlier: Vec<usize> = (0..t).filter(|&s| committed(s) && txns[s].process == txns[t].process).collect();
        for (i, r) in ext[t].iter().enumerate() {
            if let Some(r0) = ext[t][..i].iter().find(|r0| r0.key == r.key) {
                if r0.source != r.source {
                    bump("non-repeatable-read");
                }
                continue;
            }
            let v = r.source;
            let y = &r.key;
            if atomic && sources.iter().any(|&u| Some(u) != v && writes(u, y) && prec(y, v, u)) {
                bump("fractured-read");
                continue;
            }
            let misses = |w: usize| writes(w, y) && prec(y, v, w);
            if order_preserving && sources.iter().any(|&u| (0..n).any(|w| reach[w][u] && misses(w))) {
                bump("causality-gap");
                continue;
            }
            if !causal {
                continue;
            }
            if earlier.iter().any(|&w| misses(w)) {
                bump("read-your-writes");
                continue;
            }
            let observed = earlier.iter().flat_map(|&s| ext[s].iter());
            let mr =
                observed.clone().any(|o| o.source.is_some_and(|x| (level == Level::Tcc || &o.key == y) && misses(x)));
            if mr {
                bump("monotonic-reads");
                continue;
            }
            if observed.filter_map(|o| o.source).any(|x| (0..n).any(|w| reach[w][x] && misses(w))) {
                bump(SESSION_ORDER);
            }
        }
    }
    out
}

/// Call `f` with every permutation of `0..m`.
fn permutations(m: usize, f: &mut impl FnMut(&[usize])) {
    fn go(prefix: &mut Vec<usize>, used: &mut Vec<bool>, f: &mut impl FnMut(&[usize])) {
        if prefix.len() == used.len() {
            f(prefix);
            return;
        }
        for i in 0..used.len() {
            if !used[i] {
                used[i] = true;
                prefix.push(i);
                go(prefix, used, f);
                prefix.pop();
                used[i] = false;
            }
        }
    }
    go(&mut Vec::new(), &mut vec![false; m], f);
}

/// Whether a tiny history satisfies a dependency-graph level, decided from the definitions in
/// `docs/CHECKER.md` by enumeration, sharing nothing with the checker's graph algorithms:
/// - `ser`, `pos`, `strict-ser`: some total order of the committed transactions (each `info` one included or
///   not) in which every `ok` transaction's reads return the latest preceding writes (its own, for a key it
///   already wrote), respecting process order (`pos`) or real time (`strict-ser`);
/// - `us`: some serial order of the update transactions, and for each read-only one a serial order of it
///   with all updates that keeps every key's writers in that same order;
/// - `si`, `psi`: an abstract execution (Cerone, Bernardi, Gotsman): a total arbitration order, and for each
///   transaction the smallest visible set the axioms force (SESSION, NOCONFLICT, its reads' writers, closed
///   under PREFIX for `si` and TRANSVIS for `psi`), whose latest writer of each key gives every external
///   read (a larger set only adds writers, so the smallest is the best choice);
/// - `nmsi`: a total commit order extending reads-from (ACA) whose restriction to each key's writers is the
///   version order, such that no transaction reads a version older than one written by a transaction it
///   depends on through reads-from and version order (CONS; WCF read with write-write dependency).
///
/// With `order` (a reported commit order), each listed key's writers must appear in that order, and the
/// order must not contradict happens-before.
pub fn reference_graph(h: &History, level: Level, order: Option<&CommitOrder>) -> bool {
    let txns = &h.txns;
    let n = txns.len();
    let committed = |t: usize| txns[t].status != TxnStatus::Fail;
    let final_write = |t: usize, key: &Key| -> Option<Value> {
        txns[t].ops.iter().rev().find(|o| o.0 == OpKind::Write && &o.1 == key).and_then(|o| o.2.clone())
    };
    let writes = |t: usize, key: &Key| committed(t) && final_write(t, key).is_some();
    // The committed writer whose final write of `key` is `v`.
    let writer_of = |key: &Key, v: &Value| -> Option<usize> {
        (0..n).find(|&u| committed(u) && final_write(u, key).as_ref() == Some(v))
    };
    // Per ok transaction: its external reads (key, value), in order.
    let external: Vec<Vec<(Key, Option<Value>)>> = (0..n)
        .map(|t| {
            if txns[t].status != TxnStatus::Ok {
                return Vec::new();
            }
            let mut out = Vec::new();
            for (i, op) in txns[t].ops.iter().enumerate() {
                let own = txns[t].ops[..i].iter().any(|o| o.0 == OpKind::Write && o.1 == op.1);
                if op.0 == OpKind::Read && !own {
                    out.push((op.1.clone(), op.2.clone()));
                }
            }
            out
        })
        .collect();
    // Internal reads must return the transaction's own latest write (INT): the same in every model.
    for t in (0..n).filter(|&t| txns[t].status == TxnStatus::Ok) {
        for (i, op) in txns[t].ops.iter().enumerate() {
            if op.0 != OpKind::Read {
                continue;
            }
            if let Some(w) = txns[t].ops[..i].iter().rev().find(|o| o.0 == OpKind::Write && o.1 == op.1)
                && w.2 != op.2
            {
                return false;
            }
        }
    }
    let keys: Vec<Key> = {
        let mut ks: Vec<Key> = txns.iter().flat_map(|t| t.ops.iter().map(|o| o.1.clone())).collect();
        ks.sort();
        ks.dedup();
        ks
    };
    // A reported order must agree with happens-before (SO and valid reads-from, transitively).
    let listed: BTreeMap<Key, Vec<usize>> = order
        .map(|o| {
            o.keys.iter().map(|(k, vs)| (k.clone(), vs.iter().filter_map(|v| writer_of(k, v)).collect())).collect()
        })
        .unwrap_or_default();
    if !listed.is_empty() {
        let mut hb = vec![vec![false; n]; n];
        for a in 0..n {
            for b in a + 1..n {
                hb[a][b] = committed(a) && committed(b) && txns[a].process == txns[b].process;
            }
            for (k, v) in &external[a] {
                if let Some(u) = v.as_ref().and_then(|v| writer_of(k, v))
                    && u != a
                {
                    hb[u][a] = true;
                }
            }
        }
        for m in 0..n {
            for i in 0..n {
                for j in 0..n {
                    if hb[i][m] && hb[m][j] {
                        hb[i][j] = true;
                    }
                }
            }
        }
        for seq in listed.values() {
            for (i, &a) in seq.iter().enumerate() {
                if seq[i + 1..].iter().any(|&b| hb[b][a]) {
                    return false;
                }
            }
        }
    }
    // Per listed key, the writers that must precede each writer.
    let listed_before = |t: usize, placed: &dyn Fn(usize) -> bool, included: &[bool]| -> bool {
        listed.values().all(|seq| match seq.iter().position(|&w| w == t) {
            Some(i) => seq[..i].iter().all(|&w| !included[w] || placed(w)),
            None => true,
        })
    };
    let infos: Vec<usize> = (0..n).filter(|&t| txns[t].status == TxnStatus::Info && !txns[t].ops.is_empty()).collect();
    for mask in 0..1u32 << infos.len() {
        let mut included: Vec<bool> = (0..n).map(|t| txns[t].status == TxnStatus::Ok).collect();
        for (i, &t) in infos.iter().enumerate() {
            if mask & (1 << i) != 0 {
                included[t] = true;
            }
        }
        let members: Vec<usize> = (0..n).filter(|&t| included[t]).collect();
        let ok = match level {
            Level::Ser | Level::Pos | Level::StrictSer => {
                let mut prefix = Vec::new();
                let extra = |t: usize, placed: &dyn Fn(usize) -> bool| listed_before(t, placed, &included);
                serial_dfs(txns, &members, &external, level, &extra, &mut prefix, &mut |_| true)
            }
            Level::Us => us_holds(txns, &members, &external, &included, &keys, &listed, &writes),
            Level::Si | Level::Psi => {
                abstract_execution(txns, &members, &external, &included, level, &keys, &listed, &writes)
            }
            Level::Nmsi => nmsi_holds(txns, &members, &external, &included, &listed, &writes, &writer_of),
            _ => unreachable!("graph levels only"),
        };
        if ok {
            return true;
        }
    }
    false
}

/// A precondition for placing a transaction, given which ones are already placed.
type Precondition<'a> = &'a dyn Fn(usize, &dyn Fn(usize) -> bool) -> bool;

/// The visible set of a transaction placed after the arbitration order so far (with their visible sets),
/// or `None` if the axioms fail.
type Place<'a> = &'a dyn Fn(usize, &[usize], &[Vec<usize>]) -> Option<Vec<usize>>;

/// Run transactions serially: whether every `ok` transaction's external reads return the latest preceding
/// writes.
fn run_serial(txns: &[snowline_checker::Txn], order: &[usize], external: &[Vec<(Key, Option<Value>)>]) -> bool {
    let mut store: BTreeMap<Key, Option<Value>> = BTreeMap::new();
    for &t in order {
        for (k, v) in &external[t] {
            if store.get(k).cloned().flatten() != *v {
                return false;
            }
        }
        for o in txns[t].ops.iter().filter(|o| o.0 == OpKind::Write) {
            store.insert(o.1.clone(), o.2.clone());
        }
    }
    true
}

/// Calls `leaf` with each complete valid serial order until it returns true; returns whether it did.
#[allow(clippy::too_many_arguments)]
fn serial_dfs(
    txns: &[snowline_checker::Txn],
    members: &[usize],
    external: &[Vec<(Key, Option<Value>)>],
    level: Level,
    extra: Precondition,
    prefix: &mut Vec<usize>,
    leaf: &mut dyn FnMut(&[usize]) -> bool,
) -> bool {
    if prefix.len() == members.len() {
        return leaf(prefix);
    }
    for &t in members {
        if prefix.contains(&t) {
            continue;
        }
        let placed = |u: usize| prefix.contains(&u);
        let before_ok = members.iter().all(|&a| {
            let must = match level {
                Level::Pos => txns[a].process == txns[t].process && a < t,
                Level::StrictSer => {
                    txns[a].status == TxnStatus::Ok && txns[a].complete_time.is_some_and(|c| c < txns[t].invoke_time)
                }
                _ => false,
            };
            !must || placed(a)
        });
        if !before_ok || !extra(t, &placed) {
            continue;
        }
        prefix.push(t);
        let valid = run_serial(txns, prefix, external);
        if valid && serial_dfs(txns, members, external, level, extra, prefix, leaf) {
            prefix.pop();
            return true;
        }
        prefix.pop();
    }
    false
}

/// Update serializability: a serial order of the updates, and for each read-only transaction a serial
/// order of it with all updates keeping each key's writers in the same order.
fn us_holds(
    txns: &[snowline_checker::Txn],
    members: &[usize],
    external: &[Vec<(Key, Option<Value>)>],
    included: &[bool],
    keys: &[Key],
    listed: &BTreeMap<Key, Vec<usize>>,
    writes: &dyn Fn(usize, &Key) -> bool,
) -> bool {
    let updates: Vec<usize> = members.iter().copied().filter(|&t| keys.iter().any(|k| writes(t, k))).collect();
    let queries: Vec<usize> = members.iter().copied().filter(|t| !updates.contains(t)).collect();
    let key_order = |seq: &[usize]| -> Vec<Vec<usize>> {
        keys.iter().map(|k| seq.iter().copied().filter(|&t| writes(t, k)).collect()).collect()
    };
    let mut seen: Vec<Vec<Vec<usize>>> = Vec::new();
    let mut prefix = Vec::new();
    let follows_listed = |t: usize, placed: &dyn Fn(usize) -> bool| {
        listed.values().all(|seq| match seq.iter().position(|&w| w == t) {
            Some(i) => seq[..i].iter().all(|&w| !included[w] || placed(w)),
            None => true,
        })
    };
    serial_dfs(txns, &updates, external, Level::Ser, &follows_listed, &mut prefix, &mut |seq| {
        let vo = key_order(seq);
        if seen.contains(&vo) {
            return false;
        }
        seen.push(vo.clone());
        // Every query fits a serial order of all updates that keeps these version orders.
        queries.iter().all(|&q| {
            let mut with: Vec<usize> = updates.clone();
            with.push(q);
            let keeps = |t: usize, placed: &dyn Fn(usize) -> bool| {
                vo.iter().all(|ws| match ws.iter().position(|&w| w == t) {
                    Some(i) => ws[..i].iter().all(|&w| placed(w)),
                    None => true,
                })
            };
            let mut p = Vec::new();
            serial_dfs(txns, &with, external, Level::Ser, &keeps, &mut p, &mut |_| true)
        })
    })
}

/// SI or PSI by abstract executions.
#[allow(clippy::too_many_arguments)]
fn abstract_execution(
    txns: &[snowline_checker::Txn],
    members: &[usize],
    external: &[Vec<(Key, Option<Value>)>],
    included: &[bool],
    level: Level,
    keys: &[Key],
    listed: &BTreeMap<Key, Vec<usize>>,
    writes: &dyn Fn(usize, &Key) -> bool,
) -> bool {
    fn go(cx: Place, members: &[usize], ar: &mut Vec<usize>, vis: &mut Vec<Vec<usize>>) -> bool {
        if ar.len() == members.len() {
            return true;
        }
        for &t in members {
            if ar.contains(&t) {
                continue;
            }
            if let Some(v) = cx(t, ar, vis) {
                ar.push(t);
                vis.push(v);
                if go(cx, members, ar, vis) {
                    return true;
                }
                ar.pop();
                vis.pop();
            }
        }
        false
    }
    let final_value = |t: usize, k: &Key| -> Option<Value> {
        txns[t].ops.iter().rev().find(|o| o.0 == OpKind::Write && &o.1 == k).and_then(|o| o.2.clone())
    };
    // The visible set of `t` placed after `ar` (whose visible sets are `vis`), or None if the axioms fail.
    let place = |t: usize, ar: &[usize], vis: &[Vec<usize>]| -> Option<Vec<usize>> {
        for seq in listed.values() {
            if let Some(i) = seq.iter().position(|&w| w == t)
                && seq[..i].iter().any(|&w| included[w] && !ar.contains(&w))
            {
                return None;
            }
        }
        let mut required: Vec<usize> = Vec::new();
        for &a in ar {
            let same_process = txns[a].process == txns[t].process && a < t;
            let conflict = keys.iter().any(|k| writes(a, k) && writes(t, k));
            if same_process || conflict {
                required.push(a);
            }
        }
        // Session predecessors must come earlier in the arbitration order.
        if members.iter().any(|&a| txns[a].process == txns[t].process && a < t && !ar.contains(&a)) {
            return None;
        }
        for (k, v) in &external[t] {
            if let Some(v) = v {
                let w = ar.iter().copied().find(|&u| final_value(u, k).as_ref() == Some(v))?;
                required.push(w);
            }
        }
        let visible: Vec<usize> = if level == Level::Si {
            let end = required.iter().map(|&r| ar.iter().position(|&x| x == r).unwrap() + 1).max().unwrap_or(0);
            ar[..end].to_vec()
        } else {
            let mut set: Vec<usize> = Vec::new();
            let mut todo = required.clone();
            while let Some(a) = todo.pop() {
                if set.contains(&a) {
                    continue;
                }
                set.push(a);
                let i = ar.iter().position(|&x| x == a).unwrap();
                todo.extend(vis[i].iter().copied());
            }
            ar.iter().copied().filter(|a| set.contains(a)).collect()
        };
        for (k, v) in &external[t] {
            let last = visible.iter().rev().find(|&&u| final_value(u, k).is_some());
            if last.and_then(|&u| final_value(u, k)) != *v {
                return None;
            }
        }
        Some(visible)
    };
    go(&place, members, &mut Vec::new(), &mut Vec::new())
}

/// NMSI: a commit order extending reads-from, with consistent snapshots under reads-from and version order.
fn nmsi_holds(
    txns: &[snowline_checker::Txn],
    members: &[usize],
    external: &[Vec<(Key, Option<Value>)>],
    included: &[bool],
    listed: &BTreeMap<Key, Vec<usize>>,
    writes: &dyn Fn(usize, &Key) -> bool,
    writer_of: &dyn Fn(&Key, &Value) -> Option<usize>,
) -> bool {
    let n = txns.len();
    // Each external read's writer (None: the initial version); a value no included transaction wrote as
    // its final write fails.
    let mut source: Vec<Vec<(Key, Option<usize>)>> = vec![Vec::new(); n];
    for &t in members {
        for (k, v) in &external[t] {
            let src = match v {
                None => None,
                Some(v) => match writer_of(k, v) {
                    Some(u) if included[u] && u != t => Some(u),
                    _ => return false,
                },
            };
            source[t].push((k.clone(), src));
        }
    }
    let mut all = false;
    permutations(members.len(), &mut |perm: &[usize]| {
        if all {
            return;
        }
        let c: Vec<usize> = perm.iter().map(|&i| members[i]).collect();
        let at = |t: usize| c.iter().position(|&x| x == t).unwrap();
        // ACA: writers commit before their readers.
        if members.iter().any(|&t| source[t].iter().any(|(_, s)| s.is_some_and(|u| at(u) > at(t)))) {
            return;
        }
        if listed.values().any(|seq| {
            let s: Vec<usize> = seq.iter().copied().filter(|&w| included[w]).collect();
            s.windows(2).any(|p| at(p[0]) > at(p[1]))
        }) {
            return;
        }
        // Dependency: reads-from and version order (commit order of each key's writers), transitively.
        let mut dep = vec![vec![false; n]; n];
        for &t in members {
            for (_, s) in &source[t] {
                if let Some(u) = s {
                    dep[*u][t] = true;
                }
            }
            for &u in members {
                let conflict = txns[t].ops.iter().any(|o| writes(t, &o.1) && writes(u, &o.1));
                if u != t && conflict && at(u) < at(t) {
                    dep[u][t] = true;
                }
            }
        }
        for m in 0..n {
            for i in 0..n {
                for j in 0..n {
                    if dep[i][m] && dep[m][j] {
                        dep[i][j] = true;
                    }
                }
            }
        }
        // CONS.
        let cons = members.iter().all(|&t| {
            source[t].iter().all(|(k, s)| {
                members.iter().all(|&w| {
                    if !dep[w][t] || !writes(w, k) {
                        return true;
                    }
                    match s {
                        None => false,
                        Some(v) => w == *v || at(w) < at(*v),
                    }
                })
            })
        });
        if cons {
            all = true;
        }
    });
    all
}
