//! A brute-force reference checker for tiny histories, written from the definitions in the crate docs
//! without sharing the checker's algorithms: happens-before by Floyd–Warshall closure; the version order of a
//! key by enumerating every total order of its versions consistent with happens-before (a version precedes
//! another when it does in all of them); each anomaly by quantifying over all transactions.

// Index loops read closer to the definitions here.
#![allow(clippy::needless_range_loop)]

use snowline_checker::{History, Level, TxnStatus};
use snowline_core::history::OpKind;
use snowline_core::request::Key;
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
