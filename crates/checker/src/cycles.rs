//! The dependency-graph levels (`ser`, `strict-ser`, `pos`, `si`, `psi`, `nmsi`, `us`): each holds when some
//! per-key version order makes the dependency graph free of the cycles the level forbids (definitions and
//! sources: crate documentation and `docs/CHECKER.md`).
//!
//! Nodes are the *included* transactions: `ok` ones, and `info` ones that some read observed (an unread
//! `info` transaction may never have taken effect; leaving it out only removes edges, so it never hides an
//! anomaly). An `info` transaction takes part with its writes only (its reads are unknown). Edges: WR from
//! a writer to each transaction whose first external read of a key returned its version; WW along a
//! generating set of the version order; RW from a transaction that read version `V` of `x` to each
//! generating successor of `V` (its transitive closure is `RW ; WW*`, which is all the levels need); SO
//! between consecutive transactions of a process (`pos`, `si`, `psi`); RT for `strict-ser`, through one
//! auxiliary node per distinct completion time (`A` completed before `B` was invoked iff a path
//! `A -> t_i -> .. -> t_j -> B` exists), so real time adds O(transactions) edges.
//!
//! The version order is decided in phases:
//! 1. *Forced*: orders every version order satisfying the level must contain (reported commit order;
//!    initial version first; read-modify-write; happens-before for the session levels; real time for
//!    `strict-ser`). A forbidden cycle in the graph of forced edges is in every completion: a sound anomaly.
//! 2. If the forced order is total per key the verdict is exact. Otherwise a *candidate* completion is
//!    tried (the order of a greedy serial schedule, else writers by completion), then an exhaustive
//!    backtracking search over the unordered pairs, pruned by forbidden cycles, within a budget.
//!
//! Cycle search: Tarjan's strongly connected components of the level's graph, then inside each component
//! the shortest cycle of the first class the level forbids, in this order: write-write only (G0);
//! write-write and write-read (G1c); exactly one read-write edge (a breadth-first search from each RW
//! edge's target back to its source); then the level's own rule (any cycle for the serializable levels;
//! no two adjacent RW edges for `si`, searched on a two-layer graph; for `us`, a cycle among updates or
//! through a single read-only transaction). Each class is searched first without SO/RT edges, so a cycle
//! needs session order or real time only when it is named so.

use crate::anomaly::{Anomaly, AnomalyKind, Edge, EdgeKind};
use crate::checks::{Reporter, non_repeatable};
use crate::graph::{ExtRead, Graph, Witness};
use crate::input::{TxnId, TxnStatus, fmt_value};
use crate::level::Level;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, HashSet, VecDeque};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum K {
    So,
    Wr,
    Ww,
    Rw,
    Rt,
}

/// Why one version precedes another in the order used.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Why {
    Reported,
    Rmw,
    Hb,
    RealTime,
    /// What a read implies: the writer precedes the version this transaction read (it happens-before,
    /// was read by, or completed before the reader).
    Observed(TxnId),
    /// Not inferred: decided by the search.
    Chosen,
    /// Not inferred: how a candidate completion orders writers the order leaves unordered.
    Candidate,
}

/// A transaction's first valid external read of a key.
#[derive(Clone, Copy, Debug)]
struct Rd {
    key: u32,
    src: Option<TxnId>,
    /// Index into `Graph::ext_reads[t]`.
    ext: u32,
}

/// A version order: per key, a generating set of `(earlier, later, why)` between included writers.
#[derive(Clone, Debug, Default)]
struct Order {
    per_key: Vec<Vec<(TxnId, TxnId, Why)>>,
    present: HashSet<(u32, TxnId, TxnId)>,
}

impl Order {
    fn new(keys: usize) -> Self {
        Order { per_key: vec![Vec::new(); keys], present: HashSet::new() }
    }

    fn add(&mut self, k: u32, a: TxnId, b: TxnId, why: Why) {
        if self.present.insert((k, a, b)) {
            self.per_key[k as usize].push((a, b, why));
        }
    }

    fn why(&self, k: u32, a: TxnId, b: TxnId) -> Option<Why> {
        if !self.present.contains(&(k, a, b)) {
            return None;
        }
        self.per_key[k as usize].iter().find(|&&(x, y, _)| x == a && y == b).map(|x| x.2)
    }
}

#[derive(Clone, Copy, Debug)]
struct Ed {
    from: u32,
    to: u32,
    kind: K,
    key: u32,
    why: Why,
    /// WR: index into `reads[to]`; RW: index into `reads[from]`.
    rd: u32,
}

/// The dependency graph for one version order, adjacency in compressed rows.
struct Dg {
    nodes: usize,
    off: Vec<u32>,
    edges: Vec<Ed>,
}

impl Dg {
    fn out(&self, v: u32) -> std::ops::Range<usize> {
        self.off[v as usize] as usize..self.off[v as usize + 1] as usize
    }
}

/// Real-time edges through auxiliary nodes `base + i`, one per distinct completion time `times[i]`.
struct Rt {
    times: Vec<u64>,
    /// Per transaction: the auxiliary node of its completion (`ok` only).
    out: Vec<Option<u32>>,
    /// Per transaction: the latest auxiliary node before its invoke.
    inn: Vec<Option<u32>>,
}

/// A cycle step between transactions (a run of RT edges through auxiliary nodes is one step).
#[derive(Clone, Copy, Debug)]
struct Step {
    kind: K,
    from: TxnId,
    to: TxnId,
    /// The global edge (for RT: the first one).
    edge: u32,
}

/// A local subgraph: global node ids and adjacency `(local target, global edge)`.
struct Sub {
    nodes: Vec<u32>,
    adj: Vec<Vec<(u32, u32)>>,
}

/// How the phases ended, for the verdict's basis line.
enum Outcome {
    Anomalies,
    Total,
    /// Anomalies under the order completed with what reads imply.
    Derived,
    /// What reads imply completes the order.
    TotalDerived,
    Witness(&'static str),
    Exhausted,
    Budget,
}

struct Ctx<'a, 'h> {
    g: &'a Graph<'h>,
    level: Level,
    n: usize,
    inc: Vec<bool>,
    query: Vec<bool>,
    reads: Vec<Vec<Rd>>,
    /// Per key, the included writers.
    writers: Vec<Vec<TxnId>>,
    so_next: Vec<Option<TxnId>>,
    rt: Option<Rt>,
    /// See `set_deadlines`.
    prio: Vec<Prio>,
}

/// (deadline, completion index, invoke index): smaller runs first.
type Prio = (u64, u64, u64);

pub(crate) fn run(g: &Graph, level: Level, rep: &mut Reporter) {
    for (t, a) in &g.read_anomalies {
        rep.add(Some(*t), a.name, || a.clone());
    }
    for t in 0..g.history.txns.len() {
        let mut first: HashMap<u32, &ExtRead> = HashMap::new();
        for r in &g.ext_reads[t] {
            match first.get(&r.key) {
                Some(r0) if r0.source != r.source => {
                    rep.add(Some(t), AnomalyKind::NonRepeatableRead, || non_repeatable(g, t, r0, r));
                }
                Some(_) => {}
                None => {
                    first.insert(r.key, r);
                }
            }
        }
    }
    let mut cx = Ctx::new(g, level);
    let forced = cx.infer();
    let dg = cx.build(&forced);
    let unordered = cx.unordered_keys(&forced);
    let found = cx.analyze(&dg, false);
    let outcome = if !found.is_empty() {
        cx.report(&dg, &found, rep, false);
        Outcome::Anomalies
    } else if unordered == 0 {
        Outcome::Total
    } else {
        let derived = cx.derive(&forced);
        let dg = cx.build(&derived);
        let found = cx.analyze(&dg, false);
        if !found.is_empty() {
            // Every completion has an anomaly; show one as a completion of the forced order, whose cycles
            // read more naturally than cycles through the implied edges.
            cx.set_deadlines(&dg);
            cx.report_completion(&forced, rep);
            Outcome::Derived
        } else if cx.unordered_keys(&derived) == 0 {
            Outcome::TotalDerived
        } else {
            cx.set_deadlines(&dg);
            cx.complete(&derived, &forced, rep)
        }
    };
    rep.basis = Some(cx.basis(unordered, outcome));
}

impl<'a, 'h> Ctx<'a, 'h> {
    fn new(g: &'a Graph<'h>, level: Level) -> Self {
        let txns = &g.history.txns;
        let n = txns.len();
        let mut inc: Vec<bool> = txns.iter().map(|t| t.status == TxnStatus::Ok).collect();
        for t in 0..n {
            for r in &g.ext_reads[t] {
                if let Some(u) = r.source {
                    inc[u] = true;
                }
            }
        }
        let mut reads: Vec<Vec<Rd>> = vec![Vec::new(); n];
        for t in (0..n).filter(|&t| inc[t]) {
            for (i, r) in g.ext_reads[t].iter().enumerate() {
                if !reads[t].iter().any(|x| x.key == r.key) {
                    reads[t].push(Rd { key: r.key, src: r.source, ext: i as u32 });
                }
            }
        }
        let query: Vec<bool> =
            (0..n).map(|t| inc[t] && txns[t].status == TxnStatus::Ok && g.writes[t].is_empty()).collect();
        let mut writers = vec![Vec::new(); g.keys.len()];
        for t in (0..n).filter(|&t| inc[t]) {
            for &(k, _) in &g.writes[t] {
                writers[k as usize].push(t);
            }
        }
        let mut so_next = vec![None; n];
        if level.session_order() {
            for t in (0..n).filter(|&t| inc[t]) {
                so_next[t] = g.so_next[t].filter(|&u| inc[u]);
            }
        }
        let rt = (level == Level::StrictSer).then(|| {
            let mut times: Vec<u64> = (0..n)
                .filter(|&t| inc[t] && txns[t].status == TxnStatus::Ok)
                .filter_map(|t| txns[t].complete_time)
                .collect();
            times.sort_unstable();
            times.dedup();
            let mut out = vec![None; n];
            let mut inn = vec![None; n];
            for t in (0..n).filter(|&t| inc[t]) {
                if txns[t].status == TxnStatus::Ok
                    && let Some(c) = txns[t].complete_time
                {
                    out[t] = Some(times.partition_point(|&x| x < c) as u32);
                }
                let below = times.partition_point(|&x| x < txns[t].invoke_time);
                inn[t] = (below > 0).then(|| below as u32 - 1);
            }
            Rt { times, out, inn }
        });
        let prio = txns
            .iter()
            .map(|t| {
                let done = t.complete_index.unwrap_or(u64::MAX);
                (done, done, t.invoke_index)
            })
            .collect();
        Ctx { g, level, n, inc, query, reads, writers, so_next, rt, prio }
    }

    /// Priorities for completing the version order: each transaction's *deadline*, an upper bound on its
    /// place in the real execution (the earliest completion, by history index, among itself and everything
    /// the forced graph orders after it: a transaction commits before it completes and before whatever
    /// depends on it), then its completion and invoke indexes. For the snapshot levels RW edges do not order
    /// commits and are left out. Ordering by deadline first is earliest-deadline-first scheduling.
    fn set_deadlines(&mut self, dg: &Dg) {
        let with_rw = matches!(self.level, Level::Ser | Level::Pos | Level::StrictSer);
        let all: Vec<u32> = (0..dg.nodes as u32).collect();
        let sub = subgraph(dg, &all, |e| with_rw || e.kind != K::Rw);
        let mut deadline = vec![u64::MAX; dg.nodes];
        let mut comp_of = vec![usize::MAX; dg.nodes];
        // Tarjan lists components sinks first: successors are done before their predecessors.
        for (c, comp) in tarjan(&sub.adj).into_iter().enumerate() {
            let mut d = u64::MAX;
            for &v in &comp {
                comp_of[v as usize] = c;
                if (v as usize) < self.n {
                    d = d.min(self.prio[v as usize].1);
                }
                for &(w, _) in &sub.adj[v as usize] {
                    if comp_of[w as usize] != c {
                        d = d.min(deadline[w as usize]);
                    }
                }
            }
            for &v in &comp {
                deadline[v as usize] = d;
            }
        }
        for (p, &d) in self.prio.iter_mut().zip(&deadline) {
            p.0 = d;
        }
    }

    fn has_extras(&self) -> bool {
        self.level.session_order() || self.rt.is_some()
    }

    fn writes_key(&self, t: TxnId, k: u32) -> bool {
        self.g.final_write(t, k).is_some()
    }

    /// Phase 1: the orders every version order satisfying the level contains.
    fn infer(&self) -> Order {
        let g = self.g;
        let txns = &g.history.txns;
        let mut order = Order::new(g.keys.len());
        let mut reported = vec![false; g.keys.len()];
        for k in 0..g.keys.len() as u32 {
            if let Some(seq) = g.reported_order(k) {
                let seq: Vec<TxnId> = seq.into_iter().filter(|&t| self.inc[t]).collect();
                for p in seq.windows(2) {
                    order.add(k, p[0], p[1], Why::Reported);
                }
                // A partial order (info writers left out) is completed by inference like any other key.
                if g.reported_total(k) {
                    reported[k as usize] = true;
                    continue;
                }
            }
            if self.level.session_order() {
                for (v, w) in g.hb_generating(k) {
                    if self.inc[v] && self.inc[w] {
                        order.add(k, v, w, Why::Hb);
                    }
                }
            }
        }
        for t in (0..self.n).filter(|&t| self.inc[t]) {
            for rd in &self.reads[t] {
                if let Some(v) = rd.src
                    && !reported[rd.key as usize]
                    && self.writes_key(t, rd.key)
                {
                    order.add(rd.key, v, t, Why::Rmw);
                }
            }
        }
        if self.rt.is_some() {
            for (k, &rep) in reported.iter().enumerate() {
                if rep {
                    continue;
                }
                let mut done: Vec<(u64, TxnId)> = self.writers[k]
                    .iter()
                    .filter(|&&t| txns[t].status == TxnStatus::Ok)
                    .filter_map(|&t| txns[t].complete_time.map(|c| (c, t)))
                    .collect();
                done.sort_unstable();
                for &b in &self.writers[k] {
                    let i = done.partition_point(|&(c, _)| c < txns[b].invoke_time);
                    if i > 0 && done[i - 1].1 != b {
                        order.add(k as u32, done[i - 1].1, b, Why::RealTime);
                    }
                }
            }
        }
        order
    }

    /// The forced order plus what reads imply (sound for the level, used to complete the order): when `T`
    /// reads `x=V` and a writer `W` of `x` other than `V`'s must come before `T` (it wrote a version `T`
    /// read; for the session levels it happens-before `T`; for `strict-ser` it completed before `T` was
    /// invoked), then `W`'s version precedes `V`: otherwise `T` would miss it.
    fn derive(&self, forced: &Order) -> Order {
        let g = self.g;
        let txns = &g.history.txns;
        let mut order = forced.clone();
        let mut done_per_key: Vec<Vec<(u64, TxnId)>> = Vec::new();
        if self.rt.is_some() {
            done_per_key = self
                .writers
                .iter()
                .map(|ws| {
                    let mut d: Vec<(u64, TxnId)> = ws
                        .iter()
                        .filter(|&&t| txns[t].status == TxnStatus::Ok)
                        .filter_map(|&t| txns[t].complete_time.map(|c| (c, t)))
                        .collect();
                    d.sort_unstable();
                    d
                })
                .collect();
        }
        for t in (0..self.n).filter(|&t| self.inc[t]) {
            for rd in &self.reads[t] {
                let k = rd.key;
                // A read-modify-write of the initial version comes before every other write of the key
                // (any write between would make `T -RW-> W -WW-> T`).
                if rd.src.is_none() && self.writes_key(t, k) {
                    for &w in self.writers[k as usize].iter().filter(|&&w| w != t) {
                        order.add(k, t, w, Why::Observed(t));
                    }
                }
                let Some(v) = rd.src else { continue };
                let mut before: Vec<TxnId> =
                    g.read_from[t].iter().copied().filter(|&u| self.writes_key(u, k)).collect();
                if self.level.session_order() {
                    before.extend(g.writers_below(k, g.clock_row(t)));
                }
                if let Some(d) = done_per_key.get(k as usize) {
                    let i = d.partition_point(|&(c, _)| c < txns[t].invoke_time);
                    if i > 0 {
                        before.push(d[i - 1].1);
                    }
                }
                before.retain(|&w| w != v && w != t && self.inc[w]);
                // Only the latest of them matter when happens-before orders the others before them.
                let dominated = |a: TxnId, b: TxnId| self.level.session_order() && a != b && g.hb(a, b) && !g.hb(b, a);
                for &w in &before {
                    if !before.iter().any(|&x| dominated(w, x)) {
                        order.add(k, w, v, Why::Observed(t));
                    }
                }
            }
        }
        order
    }

    /// Keys whose writers the order does not totally order.
    fn unordered_keys(&self, order: &Order) -> usize {
        (0..self.writers.len()).filter(|&k| self.linearize(order, k as u32).ambiguous.is_some()).count()
    }

    /// Kahn's algorithm over key `k`'s order, highest priority (earliest completion) first: a linear
    /// extension, and the first two writers it found available together (unordered), if any.
    fn linearize(&self, order: &Order, k: u32) -> Lin {
        self.linearize_with(order, k, &self.prio)
    }

    fn linearize_with(&self, order: &Order, k: u32, prio: &[Prio]) -> Lin {
        let ws = &self.writers[k as usize];
        if ws.len() < 2 {
            return Lin { seq: ws.clone(), ambiguous: None, cyclic: false };
        }
        let idx: HashMap<TxnId, usize> = ws.iter().enumerate().map(|(i, &t)| (t, i)).collect();
        let mut indeg = vec![0u32; ws.len()];
        let mut succ: Vec<Vec<usize>> = vec![Vec::new(); ws.len()];
        for &(a, b, _) in &order.per_key[k as usize] {
            let (ia, ib) = (idx[&a], idx[&b]);
            succ[ia].push(ib);
            indeg[ib] += 1;
        }
        let mut heap: BinaryHeap<Reverse<(Prio, usize)>> =
            (0..ws.len()).filter(|&i| indeg[i] == 0).map(|i| Reverse((prio[ws[i]], i))).collect();
        let mut seq = Vec::with_capacity(ws.len());
        let mut ambiguous = None;
        while let Some(Reverse((_, i))) = heap.pop() {
            if ambiguous.is_none()
                && let Some(Reverse((_, j))) = heap.peek()
            {
                ambiguous = Some((ws[i], ws[*j]));
            }
            seq.push(ws[i]);
            for &j in &succ[i] {
                indeg[j] -= 1;
                if indeg[j] == 0 {
                    heap.push(Reverse((prio[ws[j]], j)));
                }
            }
        }
        let cyclic = seq.len() < ws.len();
        Lin { seq, ambiguous, cyclic }
    }

    /// The dependency graph for an order.
    fn build(&self, order: &Order) -> Dg {
        let n = self.n;
        let aux = self.rt.as_ref().map_or(0, |r| r.times.len());
        let nodes = n + aux;
        let mut edges: Vec<Ed> = Vec::new();
        let mut succ: HashMap<(u32, TxnId), Vec<(TxnId, Why)>> = HashMap::new();
        let mut has_pred: HashSet<(u32, TxnId)> = HashSet::new();
        for (k, list) in order.per_key.iter().enumerate() {
            let k = k as u32;
            for &(a, b, why) in list {
                edges.push(Ed { from: a as u32, to: b as u32, kind: K::Ww, key: k, why, rd: 0 });
                succ.entry((k, a)).or_default().push((b, why));
                has_pred.insert((k, b));
            }
        }
        let minimal: Vec<Vec<TxnId>> = self
            .writers
            .iter()
            .enumerate()
            .map(|(k, ws)| ws.iter().copied().filter(|&w| !has_pred.contains(&(k as u32, w))).collect())
            .collect();
        for t in (0..n).filter(|&t| self.inc[t]) {
            for (i, rd) in self.reads[t].iter().enumerate() {
                let e = Ed { from: 0, to: 0, kind: K::Wr, key: rd.key, why: Why::Chosen, rd: i as u32 };
                if let Some(u) = rd.src {
                    edges.push(Ed { from: u as u32, to: t as u32, ..e });
                }
                // The RW edge carries why the version read precedes the target's.
                let next: Vec<(TxnId, Why)> = match rd.src {
                    Some(u) => succ.get(&(rd.key, u)).cloned().unwrap_or_default(),
                    None => minimal[rd.key as usize].iter().map(|&w| (w, Why::Reported)).collect(),
                };
                for (w, why) in next.into_iter().filter(|&(w, _)| w != t) {
                    edges.push(Ed { from: t as u32, to: w as u32, kind: K::Rw, why, ..e });
                }
            }
            if let Some(u) = self.so_next[t] {
                let e = Ed { from: t as u32, to: u as u32, kind: K::So, key: u32::MAX, why: Why::Chosen, rd: 0 };
                edges.push(e);
            }
        }
        if let Some(rt) = &self.rt {
            let e = |from: usize, to: usize| Ed {
                from: from as u32,
                to: to as u32,
                kind: K::Rt,
                key: u32::MAX,
                why: Why::Chosen,
                rd: 0,
            };
            for t in 0..n {
                if let Some(i) = rt.out[t] {
                    edges.push(e(t, n + i as usize));
                }
                if let Some(i) = rt.inn[t] {
                    edges.push(e(n + i as usize, t));
                }
            }
            for i in 1..aux {
                edges.push(e(n + i - 1, n + i));
            }
        }
        edges.sort_by_key(|e| e.from);
        let mut off = vec![0u32; nodes + 1];
        for e in &edges {
            off[e.from as usize + 1] += 1;
        }
        for i in 0..nodes {
            off[i + 1] += off[i];
        }
        Dg { nodes, off, edges }
    }

    /// The forbidden cycles: one per strongly connected component that has any (`first_only`: stop at the
    /// first).
    fn analyze(&self, dg: &Dg, first_only: bool) -> Vec<Vec<Step>> {
        let all: Vec<u32> = (0..dg.nodes as u32).collect();
        let sub = subgraph(dg, &all, |_| true);
        let mut out = Vec::new();
        for comp in tarjan(&sub.adj) {
            if comp.len() < 2 {
                continue;
            }
            let nodes: Vec<u32> = comp.iter().map(|&i| sub.nodes[i as usize]).collect();
            if let Some(c) = self.forbidden_in(dg, &nodes) {
                out.push(c);
                if first_only {
                    break;
                }
            }
        }
        out
    }

    /// The first forbidden cycle class found in one strongly connected component.
    fn forbidden_in(&self, dg: &Dg, scc: &[u32]) -> Option<Vec<Step>> {
        if let Some(c) = self.lost_update_in(dg, scc) {
            return Some(c);
        }
        let passes: &[bool] = if self.has_extras() { &[false, true] } else { &[false] };
        for &extra in passes {
            let xk = move |k: K| matches!(k, K::Ww | K::Wr) || (extra && matches!(k, K::So | K::Rt));
            let ww_only = move |k: K| k == K::Ww || (extra && matches!(k, K::So | K::Rt));
            if let Some(c) = self.any_cycle(dg, scc, move |e: &Ed| ww_only(e.kind)) {
                return Some(c);
            }
            if let Some(c) = self.any_cycle(dg, scc, move |e: &Ed| xk(e.kind)) {
                return Some(c);
            }
            let decisive = matches!(self.level, Level::Psi | Level::Nmsi);
            if let Some(c) = self.one_rw_cycle(dg, scc, xk, decisive) {
                return Some(c);
            }
            let dk = move |e: &Ed| xk(e.kind) || e.kind == K::Rw;
            let found = match self.level {
                Level::Ser | Level::Pos | Level::StrictSer => self.any_cycle(dg, scc, dk),
                Level::Si => self.si_cycle(dg, scc, xk),
                Level::Us => self.us_cycle(dg, scc, dk),
                _ => None,
            };
            if found.is_some() {
                return found;
            }
        }
        None
    }

    /// A lost update: two transactions that read the same version of a key and both wrote it have RW edges
    /// both ways. Every level forbids it, even those that allow two adjacent RW edges: whichever write
    /// comes first, the other transaction read an older version and overwrote it (`T -RW-> U -WW-> T`).
    fn lost_update_in(&self, dg: &Dg, scc: &[u32]) -> Option<Vec<Step>> {
        for &b in scc.iter().filter(|&&b| (b as usize) < self.n) {
            for e1 in dg.out(b) {
                let first = &dg.edges[e1];
                if first.kind != K::Rw {
                    continue;
                }
                for e2 in dg.out(first.to) {
                    let back = &dg.edges[e2];
                    if back.kind == K::Rw && back.to == b && back.key == first.key {
                        let steps = vec![
                            Step { kind: K::Rw, from: b as TxnId, to: first.to as TxnId, edge: e1 as u32 },
                            Step { kind: K::Rw, from: first.to as TxnId, to: b as TxnId, edge: e2 as u32 },
                        ];
                        if self.lost_update(dg, &steps).is_some() {
                            return Some(steps);
                        }
                    }
                }
            }
        }
        None
    }

    /// A shortest-found cycle among the edges `allow` admits inside `scc`.
    fn any_cycle(&self, dg: &Dg, scc: &[u32], allow: impl Fn(&Ed) -> bool) -> Option<Vec<Step>> {
        let sub = subgraph(dg, scc, allow);
        let comp = tarjan(&sub.adj).into_iter().find(|c| c.len() > 1)?;
        let mut best: Option<Vec<u32>> = None;
        let mut starts: Vec<u32> = comp.clone();
        starts.sort_by_key(|&v| (sub.nodes[v as usize] as usize >= self.n, v));
        for &s in starts.iter().take(16) {
            if let Some(p) = bfs(&sub, s, |_| true, |v| v == s, usize::MAX)
                && best.as_ref().is_none_or(|b| p.len() < b.len())
            {
                best = Some(p);
            }
        }
        best.map(|edges| self.steps(dg, &edges))
    }

    /// A cycle with exactly one RW edge, the rest admitted by `xk` (which admits no RW edge), inside `scc`.
    /// The non-RW subgraph is acyclic here (a cycle in it was reported first), so an RW edge `b -> c` closes
    /// a cycle only if `c` precedes `b` topologically; the search from `c` stays between the two.
    /// `decisive`: the level's verdict depends on this search (otherwise it only names the cycle and gives
    /// up after a work budget).
    fn one_rw_cycle(&self, dg: &Dg, scc: &[u32], xk: impl Fn(K) -> bool, decisive: bool) -> Option<Vec<Step>> {
        let sub = subgraph(dg, scc, |e| xk(e.kind));
        let comps = tarjan(&sub.adj);
        let mut topo = vec![0usize; sub.nodes.len()];
        for (i, c) in comps.iter().enumerate() {
            for &v in c {
                topo[v as usize] = comps.len() - 1 - i;
            }
        }
        let local: HashMap<u32, u32> = sub.nodes.iter().enumerate().map(|(i, &v)| (v, i as u32)).collect();
        let mut best: Option<Vec<u32>> = None;
        let mut work = 0usize;
        let budget = 4_000_000usize;
        for (bi, &b) in sub.nodes.iter().enumerate() {
            for ei in dg.out(b) {
                let e = &dg.edges[ei];
                if e.kind != K::Rw {
                    continue;
                }
                let Some(&c) = local.get(&e.to) else { continue };
                let (tb, tc) = (topo[bi], topo[c as usize]);
                if tc > tb {
                    continue;
                }
                let limit = best.as_ref().map_or(usize::MAX, |p| p.len().saturating_sub(1));
                let found =
                    bfs(&sub, c, |v| topo[v as usize] >= tc && topo[v as usize] <= tb, |v| v == bi as u32, limit);
                work += tb - tc + 1;
                if let Some(mut p) = found {
                    p.insert(0, ei as u32);
                    if best.as_ref().is_none_or(|q| p.len() < q.len()) {
                        best = Some(p);
                    }
                }
                if best.as_ref().is_some_and(|p| p.len() <= 2) || (best.is_some() && work > budget) {
                    return best.map(|p| self.steps(dg, &p));
                }
                if !decisive && work > budget {
                    return None;
                }
            }
        }
        best.map(|p| self.steps(dg, &p))
    }

    /// SI (Cerone and Gotsman): a cycle of `(X ; RW?)` steps, X the non-RW edges `xk` admits; that is, a
    /// cycle with no two adjacent RW edges. Searched on two layers: `v0` (any step may start) and `v1`
    /// (just arrived by an X edge, may continue by one RW edge back to layer 0).
    fn si_cycle(&self, dg: &Dg, scc: &[u32], xk: impl Fn(K) -> bool) -> Option<Vec<Step>> {
        let base = subgraph(dg, scc, |e| xk(e.kind) || e.kind == K::Rw);
        let m = base.nodes.len();
        let mut adj: Vec<Vec<(u32, u32)>> = vec![Vec::new(); 2 * m];
        for (a, list) in base.adj.iter().enumerate() {
            for &(b, ei) in list {
                if dg.edges[ei as usize].kind == K::Rw {
                    adj[2 * a + 1].push((2 * b, ei));
                } else {
                    adj[2 * a].push((2 * b, ei));
                    adj[2 * a].push((2 * b + 1, ei));
                }
            }
        }
        let two = Sub { nodes: (0..2 * m).map(|i| base.nodes[i / 2]).collect(), adj };
        let comp = tarjan(&two.adj).into_iter().find(|c| c.len() > 1)?;
        let mut best: Option<Vec<u32>> = None;
        for &s in comp.iter().filter(|&&v| v % 2 == 0).take(16) {
            if let Some(p) = bfs(&two, s, |_| true, |v| v == s, usize::MAX)
                && best.as_ref().is_none_or(|b| p.len() < b.len())
            {
                best = Some(p);
            }
        }
        best.map(|p| self.steps(dg, &p))
    }

    /// US (Adya's PL-3U): a cycle among update transactions, or a cycle through exactly one read-only
    /// transaction.
    fn us_cycle(&self, dg: &Dg, scc: &[u32], dk: impl Fn(&Ed) -> bool + Copy) -> Option<Vec<Step>> {
        let updates: Vec<u32> = scc.iter().copied().filter(|&v| !self.query[v as usize]).collect();
        if let Some(c) = self.any_cycle(dg, &updates, dk) {
            return Some(c);
        }
        let sub = subgraph(dg, scc, dk);
        let mut best: Option<Vec<u32>> = None;
        for (q, &v) in sub.nodes.iter().enumerate() {
            if !self.query[v as usize] {
                continue;
            }
            let q = q as u32;
            let limit = best.as_ref().map_or(usize::MAX, |p| p.len());
            let ok = |u: u32| u == q || !self.query[sub.nodes[u as usize] as usize];
            if let Some(p) = bfs(&sub, q, ok, |u| u == q, limit)
                && best.as_ref().is_none_or(|b| p.len() < b.len())
            {
                best = Some(p);
            }
        }
        best.map(|p| self.steps(dg, &p))
    }

    /// Transaction-level steps of a cycle of global edges (runs of RT edges merged).
    fn steps(&self, dg: &Dg, edges: &[u32]) -> Vec<Step> {
        // Rotate so the cycle starts at a transaction.
        let start = edges.iter().position(|&e| (dg.edges[e as usize].from as usize) < self.n).unwrap_or(0);
        let mut steps: Vec<Step> = Vec::new();
        let mut rt_from: Option<(TxnId, u32)> = None;
        for i in 0..edges.len() {
            let ei = edges[(start + i) % edges.len()];
            let e = &dg.edges[ei as usize];
            let (from, to) = (e.from as usize, e.to as usize);
            if e.kind == K::Rt {
                if from < self.n {
                    rt_from = Some((from, ei));
                }
                if to < self.n {
                    let (f, first) = rt_from.take().expect("an RT run starts at a transaction");
                    steps.push(Step { kind: K::Rt, from: f, to, edge: first });
                }
                continue;
            }
            steps.push(Step { kind: e.kind, from, to, edge: ei });
        }
        steps
    }

    /// Phase 2: the order is not total. Try candidate completions, then search.
    /// `forced`: the order without what reads imply, to show a failure as a completion of it.
    fn complete(&self, order: &Order, forced: &Order, rep: &mut Reporter) -> Outcome {
        let scheduled = self.schedule(order).map(|seq| self.order_from_sequence(order, &seq));
        if let Some(o) = &scheduled
            && self.analyze(&self.build(o), true).is_empty()
        {
            return Outcome::Witness("the order of a serial schedule of the transactions");
        }
        let size =
            order.per_key.iter().map(Vec::len).sum::<usize>() + self.reads.iter().map(Vec::len).sum::<usize>() + self.n;
        let mut budget = (5_000_000 / (size + 1)).clamp(2, 200_000);
        match self.search(order.clone(), &mut budget) {
            Ok(Some(_)) => Outcome::Witness("a search over the unordered writers"),
            Ok(None) => {
                self.report_completion(forced, rep);
                Outcome::Exhausted
            }
            Err(()) => {
                rep.inconclusive = true;
                Outcome::Budget
            }
        }
    }

    /// Report the anomalies of the completion by priority, whose unordered pairs are marked as chosen
    /// (when every completion has anomalies).
    fn report_completion(&self, order: &Order, rep: &mut Reporter) {
        // By completion (what most likely happened), not by deadline.
        let natural: Vec<Prio> = self.prio.iter().map(|&(_, c, i)| (c, c, i)).collect();
        let shown = self.complete_with(order, &natural).unwrap_or_else(|| order.clone());
        let dg = self.build(&shown);
        let found = self.analyze(&dg, false);
        self.report(&dg, &found, rep, true);
    }

    /// Conflict-directed search over the total orders extending `order`: complete it by priority; if the
    /// completion has a forbidden cycle, some pair of versions the completion ordered on that cycle (a WW
    /// edge, or the version order behind an RW edge) must be the other way round in any solution. A cycle
    /// with no such pair: no solution. A cycle with one: flip it (unit propagation). Otherwise branch on
    /// which of the pairs of the cycle with the fewest is the first flipped (earlier ones kept). Exact:
    /// `Ok(Some)` an order with no forbidden cycle, `Ok(None)` none exists; `Err` the budget ran out.
    fn search(&self, mut order: Order, budget: &mut usize) -> Result<Option<Order>, ()> {
        let pairs = loop {
            if *budget == 0 {
                return Err(());
            }
            *budget -= 1;
            let Some(candidate) = self.complete_by_priority(&order) else { return Ok(None) };
            let dg = self.build(&candidate);
            let cycles = self.analyze(&dg, false);
            if cycles.is_empty() {
                return Ok(Some(candidate));
            }
            let choices: Vec<Vec<(u32, TxnId, TxnId)>> =
                cycles.iter().map(|c| self.choices(&dg, &candidate, c)).collect();
            if choices.iter().any(Vec::is_empty) {
                return Ok(None);
            }
            let units: Vec<(u32, TxnId, TxnId)> = choices.iter().filter(|c| c.len() == 1).map(|c| c[0]).collect();
            if units.is_empty() {
                break choices.into_iter().min_by_key(Vec::len).expect("non-empty");
            }
            for (k, a, b) in units {
                order.add(k, b, a, Why::Chosen);
            }
        };
        for (i, &(k, a, b)) in pairs.iter().enumerate() {
            let mut next = order.clone();
            for &(k2, a2, b2) in &pairs[..i] {
                next.add(k2, a2, b2, Why::Chosen);
            }
            next.add(k, b, a, Why::Chosen);
            if let Some(found) = self.search(next, budget)? {
                return Ok(Some(found));
            }
        }
        Ok(None)
    }

    /// The version pairs a candidate completion chose that a cycle of it depends on: its WW edges, and the
    /// orders behind its RW edges, that the completion added.
    fn choices(&self, dg: &Dg, candidate: &Order, cycle: &[Step]) -> Vec<(u32, TxnId, TxnId)> {
        let mut pairs = Vec::new();
        for st in cycle {
            let e = &dg.edges[st.edge as usize];
            let pair = match st.kind {
                K::Ww if e.why == Why::Candidate => Some((e.key, st.from, st.to)),
                K::Rw => self.reads[st.from][e.rd as usize]
                    .src
                    .filter(|&v| candidate.why(e.key, v, st.to) == Some(Why::Candidate))
                    .map(|v| (e.key, v, st.to)),
                _ => None,
            };
            if let Some(p) = pair.filter(|p| !pairs.contains(p)) {
                pairs.push(p);
            }
        }
        pairs
    }

    /// Each key's writers by Kahn's algorithm over the forced order, highest priority (earliest completion)
    /// first.
    fn complete_by_priority(&self, forced: &Order) -> Option<Order> {
        self.complete_with(forced, &self.prio)
    }

    fn complete_with(&self, forced: &Order, prio: &[Prio]) -> Option<Order> {
        let mut out = Order::new(self.writers.len());
        for k in 0..self.writers.len() as u32 {
            let lin = self.linearize_with(forced, k, prio);
            if lin.cyclic {
                return None;
            }
            self.chain(forced, k, &lin.seq, &mut out);
        }
        Some(out)
    }

    /// The order a sequence of transactions gives each key's writers (forced justifications kept).
    fn order_from_sequence(&self, forced: &Order, seq: &[TxnId]) -> Order {
        let mut at = vec![usize::MAX; self.n];
        for (i, &t) in seq.iter().enumerate() {
            at[t] = i;
        }
        let mut out = Order::new(self.writers.len());
        for k in 0..self.writers.len() as u32 {
            let mut ws = self.writers[k as usize].clone();
            ws.sort_by_key(|&t| at[t]);
            self.chain(forced, k, &ws, &mut out);
        }
        out
    }

    fn chain(&self, forced: &Order, k: u32, seq: &[TxnId], out: &mut Order) {
        for p in seq.windows(2) {
            let why = forced.why(k, p[0], p[1]).unwrap_or(Why::Candidate);
            out.add(k, p[0], p[1], why);
        }
    }

    /// A greedy serial schedule, repaired and retried when it gets stuck (at most `ROUNDS` times).
    fn schedule(&self, forced: &Order) -> Option<Vec<TxnId>> {
        const ROUNDS: usize = 4;
        let mut hints: Vec<(TxnId, TxnId)> = Vec::new();
        for _ in 0..ROUNDS {
            match self.schedule_once(forced, &hints) {
                Ok(seq) => return Some(seq),
                Err(more) if !more.is_empty() => hints.extend(more),
                Err(_) => return None,
            }
        }
        None
    }

    /// One greedy serial schedule: repeatedly run the transaction with the earliest deadline (see
    /// `set_deadlines`) that can run next: its forced predecessors, session predecessor, real-time
    /// predecessors and hinted predecessors ran; every read returns the current version; no pending reader
    /// still needs the current version of a key it overwrites. `Err(hints)` when it gets stuck: for each
    /// stuck writer `T` of a key whose current version `C` still has pending readers, the hint `(T, C)`
    /// (`C` should wait for `T`), unless the forced order puts `C` first.
    fn schedule_once(&self, forced: &Order, hints: &[(TxnId, TxnId)]) -> Result<Vec<TxnId>, Vec<(TxnId, TxnId)>> {
        let g = self.g;
        let txns = &g.history.txns;
        let n = self.n;
        let mut preds: Vec<Vec<TxnId>> = vec![Vec::new(); n];
        let mut forced_pairs: HashSet<(TxnId, TxnId)> = HashSet::new();
        for list in &forced.per_key {
            for &(a, b, _) in list {
                preds[b].push(a);
                forced_pairs.insert((a, b));
            }
        }
        for t in 0..n {
            if let Some(u) = self.so_next[t] {
                preds[u].push(t);
            }
        }
        for &(a, b) in hints {
            preds[b].push(a);
        }
        let mut done_sorted: Vec<(u64, TxnId)> = Vec::new();
        let mut rt_need = vec![0usize; n];
        if self.rt.is_some() {
            done_sorted = (0..n)
                .filter(|&t| self.inc[t] && txns[t].status == TxnStatus::Ok)
                .filter_map(|t| txns[t].complete_time.map(|c| (c, t)))
                .collect();
            done_sorted.sort_unstable();
            for t in (0..n).filter(|&t| self.inc[t]) {
                rt_need[t] = done_sorted.partition_point(|&(c, _)| c < txns[t].invoke_time);
            }
        }
        let mut pending: HashMap<(u32, Option<TxnId>), u32> = HashMap::new();
        for t in 0..n {
            for rd in &self.reads[t] {
                *pending.entry((rd.key, rd.src)).or_insert(0) += 1;
            }
        }
        let mut cur: Vec<Option<TxnId>> = vec![None; g.keys.len()];
        let mut placed = vec![false; n];
        let mut heap: BinaryHeap<Reverse<(Prio, TxnId)>> =
            (0..n).filter(|&t| self.inc[t]).map(|t| Reverse((self.prio[t], t))).collect();
        let total = heap.len();
        let mut wait_txn: Vec<Vec<TxnId>> = vec![Vec::new(); n];
        let mut wait_key: Vec<Vec<TxnId>> = vec![Vec::new(); g.keys.len()];
        let mut wait_rt: BinaryHeap<Reverse<(usize, TxnId)>> = BinaryHeap::new();
        let mut prefix = 0usize;
        let mut seq = Vec::with_capacity(total);
        'next: while let Some(Reverse((_, t))) = heap.pop() {
            if placed[t] {
                continue;
            }
            if let Some(&p) = preds[t].iter().find(|&&p| !placed[p]) {
                wait_txn[p].push(t);
                continue;
            }
            if prefix < rt_need[t] {
                wait_rt.push(Reverse((rt_need[t], t)));
                continue;
            }
            for rd in &self.reads[t] {
                if cur[rd.key as usize] != rd.src {
                    wait_key[rd.key as usize].push(t);
                    continue 'next;
                }
            }
            for &(k, _) in &g.writes[t] {
                if self.blocked(t, k, cur[k as usize], &pending) {
                    wait_key[k as usize].push(t);
                    continue 'next;
                }
            }
            placed[t] = true;
            seq.push(t);
            let mut wake: Vec<TxnId> = std::mem::take(&mut wait_txn[t]);
            for rd in &self.reads[t] {
                let p = pending.get_mut(&(rd.key, rd.src)).expect("counted");
                *p -= 1;
                // A writer that also reads the version counts itself among its pending readers.
                if *p <= 1 {
                    wake.append(&mut wait_key[rd.key as usize]);
                }
            }
            for &(k, _) in &g.writes[t] {
                cur[k as usize] = Some(t);
                wake.append(&mut wait_key[k as usize]);
            }
            while prefix < done_sorted.len() && placed[done_sorted[prefix].1] {
                prefix += 1;
            }
            while let Some(&Reverse((need, u))) = wait_rt.peek() {
                if need > prefix {
                    break;
                }
                wait_rt.pop();
                wake.push(u);
            }
            heap.extend(wake.into_iter().map(|u| Reverse((self.prio[u], u))));
        }
        if seq.len() == total {
            return Ok(seq);
        }
        let mut more = Vec::new();
        for t in (0..n).filter(|&t| self.inc[t] && !placed[t]) {
            if preds[t].iter().any(|&p| !placed[p]) || self.reads[t].iter().any(|rd| cur[rd.key as usize] != rd.src) {
                continue;
            }
            for &(k, _) in &g.writes[t] {
                if let Some(c) = cur[k as usize]
                    && self.blocked(t, k, Some(c), &pending)
                    && !forced_pairs.contains(&(c, t))
                    && !hints.contains(&(t, c))
                {
                    more.push((t, c));
                }
            }
        }
        Err(more)
    }

    /// Whether `t` cannot overwrite key `k` yet: a transaction other than `t` still has to read `cur`.
    fn blocked(&self, t: TxnId, k: u32, cur: Option<TxnId>, pending: &HashMap<(u32, Option<TxnId>), u32>) -> bool {
        let mut p = pending.get(&(k, cur)).copied().unwrap_or(0);
        if self.reads[t].iter().any(|rd| rd.key == k && rd.src == cur) {
            p -= 1;
        }
        p > 0
    }

    /// Anomalies for cycles found.
    fn report(&self, dg: &Dg, cycles: &[Vec<Step>], rep: &mut Reporter, chosen: bool) {
        for steps in cycles {
            let kind = self.classify(dg, steps);
            let at = steps.iter().map(|s| s.from).min();
            rep.add(at, kind, || self.anomaly(dg, steps, kind, chosen));
        }
    }

    fn classify(&self, dg: &Dg, steps: &[Step]) -> AnomalyKind {
        let len = steps.len();
        let rw = steps.iter().filter(|s| s.kind == K::Rw).count();
        if steps.iter().any(|s| s.kind == K::Rt) {
            return AnomalyKind::RealTimeViolation;
        }
        if steps.iter().any(|s| s.kind == K::So) {
            let i = steps.iter().position(|s| s.kind == K::Rw);
            return match i {
                Some(i) if rw == 1 && steps[(i + len - 1) % len].kind == K::So => AnomalyKind::NonMonotonicSnapshot,
                _ => AnomalyKind::ProcessOrderViolation,
            };
        }
        if rw > 0 && self.lost_update(dg, steps).is_some() {
            return AnomalyKind::LostUpdate;
        }
        match rw {
            0 if steps.iter().all(|s| s.kind == K::Ww) => AnomalyKind::G0,
            0 => AnomalyKind::G1c,
            1 => AnomalyKind::GSingle,
            _ => {
                let adjacent = (0..len).any(|i| steps[i].kind == K::Rw && steps[(i + 1) % len].kind == K::Rw);
                if !adjacent {
                    AnomalyKind::LongFork
                } else if len == 2 {
                    AnomalyKind::WriteSkew
                } else if steps.iter().any(|s| self.query[s.from]) {
                    AnomalyKind::ReadOnlyAnomaly
                } else {
                    AnomalyKind::G2Item
                }
            }
        }
    }

    /// For a two-transaction cycle through a key `x` that both transactions read at the same version and
    /// both wrote (`T -RW x-> U` back by `WW x` or `RW x`): `(T, U, x)`.
    fn lost_update(&self, dg: &Dg, steps: &[Step]) -> Option<(TxnId, TxnId, u32)> {
        if steps.len() != 2 {
            return None;
        }
        let rw = steps.iter().find(|s| s.kind == K::Rw)?;
        let other = steps.iter().find(|s| s.from == rw.to)?;
        let (er, eo) = (&dg.edges[rw.edge as usize], &dg.edges[other.edge as usize]);
        if er.key != eo.key || !matches!(other.kind, K::Ww | K::Rw) {
            return None;
        }
        let (t, u, k) = (rw.from, rw.to, er.key);
        let src = self.reads[t][er.rd as usize].src;
        let both_write = self.writes_key(t, k) && self.writes_key(u, k);
        (both_write && self.reads[u].iter().any(|r| r.key == k && r.src == src)).then_some((t, u, k))
    }

    fn anomaly(&self, dg: &Dg, steps: &[Step], kind: AnomalyKind, chosen: bool) -> Anomaly {
        let g = self.g;
        let txns = &g.history.txns;
        let mut wit = Witness::default();
        let mut edges = Vec::new();
        let mut path = txns[steps[0].from].name();
        for s in steps {
            let e = &dg.edges[s.edge as usize];
            let key = (e.key != u32::MAX).then(|| g.keys[e.key as usize].clone());
            path.push_str(&format!(
                " -{:?}{}-> {}",
                edge_kind(s.kind),
                key.as_ref().map_or(String::new(), |k| format!(" {k}")),
                txns[s.to].name()
            ));
            edges.push(self.edge(dg, s, &mut wit));
        }
        let name = |t: TxnId| txns[t].name();
        let describe = match kind {
            AnomalyKind::G0 => "a cycle of write-write dependencies (G0)".to_string(),
            AnomalyKind::G1c => "a cycle of write-write and write-read dependencies (G1c)".to_string(),
            AnomalyKind::LostUpdate => {
                let (t, u, k) = self.lost_update(dg, steps).expect("classified");
                let rd = self.reads[t].iter().find(|r| r.key == k).expect("read");
                let v = &txns[t].ops[g.ext_reads[t][rd.ext as usize].op].2;
                let key = &g.keys[k as usize];
                format!(
                    "{} and {} both read {key}={} and both wrote {key} (lost update)",
                    name(u),
                    name(t),
                    fmt_value(v.as_ref())
                )
            }
            AnomalyKind::GSingle => "a cycle with exactly one anti-dependency (G-single, read skew)".to_string(),
            AnomalyKind::WriteSkew => {
                format!(
                    "{} and {} each overwrote a version the other read (write skew)",
                    name(steps[0].from),
                    name(steps[0].to)
                )
            }
            AnomalyKind::ReadOnlyAnomaly => {
                let q = steps.iter().find(|s| self.query[s.from]).expect("classified").from;
                format!(
                    "read-only {} observes the updates in an order no serialization of them allows (read-only transaction anomaly)",
                    name(q)
                )
            }
            AnomalyKind::LongFork => {
                let rw = steps.iter().filter(|s| s.kind == K::Rw).count();
                format!(
                    "transactions observe independent updates in different orders: {rw} anti-dependencies, no two adjacent (long fork)"
                )
            }
            AnomalyKind::G2Item => {
                let rw = steps.iter().filter(|s| s.kind == K::Rw).count();
                format!("a cycle with {rw} anti-dependencies (G2-item)")
            }
            AnomalyKind::NonMonotonicSnapshot => {
                let s = steps.iter().find(|s| s.kind == K::Rw).expect("classified");
                format!(
                    "{} misses {}, which its own session had already written or observed (non-monotonic snapshot)",
                    name(s.from),
                    name(s.to)
                )
            }
            AnomalyKind::ProcessOrderViolation => "a cycle through session order (process-order violation)".to_string(),
            _ => "a cycle through real-time order (real-time violation)".to_string(),
        };
        let suffix = if chosen {
            " (some version orders here are not inferred: every order of the writers left unordered yields an anomaly; this is one)"
        } else {
            ""
        };
        Anomaly { name: kind, summary: format!("{describe}: {path}{suffix}"), ops: wit.op_refs(g.history), edges }
    }

    fn edge(&self, dg: &Dg, s: &Step, wit: &mut Witness) -> Edge {
        let g = self.g;
        let txns = &g.history.txns;
        let e = &dg.edges[s.edge as usize];
        let (a, b) = (s.from, s.to);
        match s.kind {
            K::So => {
                wit.txn(a);
                wit.txn(b);
                Edge {
                    kind: EdgeKind::SO,
                    from: txns[a].name(),
                    to: txns[b].name(),
                    key: None,
                    why: format!("{} then {} in process {}", txns[a].name(), txns[b].name(), txns[a].process),
                }
            }
            K::Rt => {
                wit.txn(a);
                wit.txn(b);
                Edge {
                    kind: EdgeKind::RT,
                    from: txns[a].name(),
                    to: txns[b].name(),
                    key: None,
                    why: format!(
                        "{} completed (time {}) before {} was invoked (time {})",
                        txns[a].name(),
                        txns[a].complete_time.unwrap_or_default(),
                        txns[b].name(),
                        txns[b].invoke_time
                    ),
                }
            }
            K::Wr => {
                let r = &g.ext_reads[b][self.reads[b][e.rd as usize].ext as usize];
                wit.op(b, r.op);
                wit.op(a, g.final_write(a, r.key).expect("writer"));
                g.wr_edge(b, r)
            }
            K::Rw => {
                let r = &g.ext_reads[a][self.reads[a][e.rd as usize].ext as usize];
                wit.op(a, r.op);
                wit.op(b, g.final_write(b, r.key).expect("writer"));
                let mut edge = g.rw_edge(a, r, b);
                if matches!(e.why, Why::Chosen | Why::Candidate) {
                    edge.why.push_str(" in the version order chosen here (not inferred)");
                }
                edge
            }
            K::Ww => {
                let k = e.key;
                wit.op(a, g.final_write(a, k).expect("writer"));
                wit.op(b, g.final_write(b, k).expect("writer"));
                let key = &g.keys[k as usize];
                let ver = |t: TxnId| format!("{key}={} ({})", fmt_value(g.written_value(t, k)), txns[t].name());
                let why = match e.why {
                    Why::Reported => format!("the commit order lists {} before {}", ver(a), ver(b)),
                    Why::Rmw => format!(
                        "{} precedes {}: {} read {} and then wrote {key}",
                        ver(a),
                        ver(b),
                        txns[b].name(),
                        ver(a)
                    ),
                    Why::Hb => {
                        let path = g.path(a, b).unwrap_or_default();
                        let names: Vec<String> = path.iter().map(|&t| txns[t].name()).collect();
                        format!(
                            "{} precedes {}: {} happens-before {} ({})",
                            ver(a),
                            ver(b),
                            txns[a].name(),
                            txns[b].name(),
                            names.join(" -> ")
                        )
                    }
                    Why::RealTime => format!(
                        "{} precedes {}: {} completed (time {}) before {} was invoked (time {})",
                        ver(a),
                        ver(b),
                        txns[a].name(),
                        txns[a].complete_time.unwrap_or_default(),
                        txns[b].name(),
                        txns[b].invoke_time
                    ),
                    Why::Observed(t) if t == a => format!(
                        "{} precedes {}: {} read the initial version of {key} and then wrote {key}",
                        ver(a),
                        ver(b),
                        txns[t].name()
                    ),
                    Why::Observed(t) => format!(
                        "{} precedes {}: {} read {}, and {}",
                        ver(a),
                        ver(b),
                        txns[t].name(),
                        ver(b),
                        self.must_precede(a, t)
                    ),
                    Why::Chosen | Why::Candidate => {
                        format!("{} precedes {} in the version order chosen here (not inferred)", ver(a), ver(b))
                    }
                };
                Edge { kind: EdgeKind::WW, from: txns[a].name(), to: txns[b].name(), key: Some(key.clone()), why }
            }
        }
    }

    /// Why writer `w` comes before reader `t` (for `Why::Observed`).
    fn must_precede(&self, w: TxnId, t: TxnId) -> String {
        let txns = &self.g.history.txns;
        if self.g.read_from[t].contains(&w) {
            format!("{} read from {}", txns[t].name(), txns[w].name())
        } else if self.level.session_order() && self.g.hb(w, t) {
            let path = self.g.path(w, t).unwrap_or_default();
            let names: Vec<String> = path.iter().map(|&x| txns[x].name()).collect();
            format!("{} happens-before {} ({})", txns[w].name(), txns[t].name(), names.join(" -> "))
        } else {
            format!(
                "{} completed (time {}) before {} was invoked (time {})",
                txns[w].name(),
                txns[w].complete_time.unwrap_or_default(),
                txns[t].name(),
                txns[t].invoke_time
            )
        }
    }

    /// One line: what the verdict's version order rests on.
    fn basis(&self, unordered: usize, outcome: Outcome) -> String {
        let g = self.g;
        let written: Vec<u32> = (0..g.keys.len() as u32).filter(|&k| !self.writers[k as usize].is_empty()).collect();
        let reported = written.iter().filter(|&&k| g.reported_order(k).is_some()).count();
        let mut rules = vec![
            "the initial version first",
            "read-modify-write: a transaction that reads x=V and then writes x orders V before its write",
        ];
        if self.level.session_order() {
            rules.push("happens-before: a version that happens-before another (session order, reads-from) comes first");
        }
        if self.rt.is_some() {
            rules.push("real time: a writer that completed before another was invoked comes first");
        }
        let inferred = format!("inferred ({})", rules.join("; "));
        let mut s = if reported == written.len() && reported > 0 {
            "version order: the reported commit order".to_string()
        } else if reported > 0 {
            format!(
                "version order: the reported commit order for {reported} of {} written keys, the others {inferred}",
                written.len()
            )
        } else {
            format!("version order {inferred}")
        };
        let left = format!(
            "; it leaves the writers of {unordered} key{} partly unordered",
            if unordered == 1 { "" } else { "s" }
        );
        let reads = "what reads imply (a writer that must precede a transaction reading an older version of the key precedes that version)";
        let shown = "each anomaly shown is under one of them (pairs not inferred are marked chosen)";
        s.push_str(&match outcome {
            Outcome::Total | Outcome::Anomalies if unordered == 0 => {
                "; it orders every key's writers totally: the verdict is exact".to_string()
            }
            Outcome::Anomalies => format!("{left}; each anomaly shown holds under every order extending it"),
            Outcome::TotalDerived => format!("{left}, and with {reads} it is total: the verdict is exact"),
            Outcome::Derived => {
                format!("{left}, and {reads} leaves no total order without an anomaly: {shown}")
            }
            Outcome::Witness(how) => format!("{left}; {how} gives a total version order under which the level holds"),
            Outcome::Exhausted => format!("{left}, and a search shows that every total order yields an anomaly: {shown}"),
            Outcome::Budget => format!(
                "{left}, and the search for a total order under which the level holds ran out of budget: no anomaly found, but the level is not proven"
            ),
            Outcome::Total => unreachable!("a total order leaves nothing unordered"),
        });
        s.push('.');
        s
    }
}

/// A linear extension of one key's order.
struct Lin {
    seq: Vec<TxnId>,
    /// The first two writers found available together.
    ambiguous: Option<(TxnId, TxnId)>,
    /// The order has a cycle (`seq` is then partial).
    cyclic: bool,
}

fn edge_kind(k: K) -> EdgeKind {
    match k {
        K::So => EdgeKind::SO,
        K::Wr => EdgeKind::WR,
        K::Ww => EdgeKind::WW,
        K::Rw => EdgeKind::RW,
        K::Rt => EdgeKind::RT,
    }
}

/// The subgraph on `nodes` with the edges `allow` admits.
fn subgraph(dg: &Dg, nodes: &[u32], allow: impl Fn(&Ed) -> bool) -> Sub {
    let full = nodes.len() == dg.nodes && nodes.iter().enumerate().all(|(i, &v)| v as usize == i);
    let local: HashMap<u32, u32> =
        if full { HashMap::new() } else { nodes.iter().enumerate().map(|(i, &v)| (v, i as u32)).collect() };
    let mut adj = vec![Vec::new(); nodes.len()];
    for (i, &v) in nodes.iter().enumerate() {
        for ei in dg.out(v) {
            let e = &dg.edges[ei];
            if !allow(e) {
                continue;
            }
            let to = if full { Some(e.to) } else { local.get(&e.to).copied() };
            if let Some(to) = to {
                adj[i].push((to, ei as u32));
            }
        }
    }
    Sub { nodes: nodes.to_vec(), adj }
}

/// Tarjan's strongly connected components (iterative), sinks first.
fn tarjan(adj: &[Vec<(u32, u32)>]) -> Vec<Vec<u32>> {
    const UNSEEN: u32 = u32::MAX;
    let n = adj.len();
    let mut index = vec![UNSEEN; n];
    let mut low = vec![0u32; n];
    let mut on_stack = vec![false; n];
    let mut stack: Vec<u32> = Vec::new();
    let mut out = Vec::new();
    let mut next = 0u32;
    for root in 0..n {
        if index[root] != UNSEEN {
            continue;
        }
        let mut call: Vec<(u32, usize)> = vec![(root as u32, 0)];
        index[root] = next;
        low[root] = next;
        next += 1;
        stack.push(root as u32);
        on_stack[root] = true;
        while let Some(&(v, i)) = call.last() {
            let v = v as usize;
            if let Some(&(w, _)) = adj[v].get(i) {
                call.last_mut().expect("non-empty").1 += 1;
                let w = w as usize;
                if index[w] == UNSEEN {
                    index[w] = next;
                    low[w] = next;
                    next += 1;
                    stack.push(w as u32);
                    on_stack[w] = true;
                    call.push((w as u32, 0));
                } else if on_stack[w] {
                    low[v] = low[v].min(index[w]);
                }
            } else {
                call.pop();
                if let Some(&(p, _)) = call.last() {
                    low[p as usize] = low[p as usize].min(low[v]);
                }
                if low[v] == index[v] {
                    let mut comp = Vec::new();
                    loop {
                        let w = stack.pop().expect("on stack");
                        on_stack[w as usize] = false;
                        comp.push(w);
                        if w as usize == v {
                            break;
                        }
                    }
                    out.push(comp);
                }
            }
        }
    }
    out
}

/// Shortest path (global edge indices) from `src` to a node `target` accepts, through nodes `ok` accepts,
/// of at most `limit` edges. A path back to `src` itself is a cycle.
fn bfs(sub: &Sub, src: u32, ok: impl Fn(u32) -> bool, target: impl Fn(u32) -> bool, limit: usize) -> Option<Vec<u32>> {
    let mut prev: HashMap<u32, (u32, u32)> = HashMap::new();
    let mut depth: HashMap<u32, usize> = HashMap::from([(src, 0)]);
    let mut queue = VecDeque::from([src]);
    while let Some(v) = queue.pop_front() {
        let d = depth[&v];
        if d >= limit {
            continue;
        }
        for &(w, ei) in &sub.adj[v as usize] {
            if target(w) {
                let mut path = vec![ei];
                let mut cur = v;
                while cur != src {
                    let (p, pe) = prev[&cur];
                    path.push(pe);
                    cur = p;
                }
                path.reverse();
                return Some(path);
            }
            if w != src && ok(w) && !depth.contains_key(&w) {
                depth.insert(w, d + 1);
                prev.insert(w, (v, ei));
                queue.push_back(w);
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tarjan_finds_a_two_cycle() {
        let adj = vec![vec![(1, 0)], vec![(0, 1)]];
        let c = tarjan(&adj);
        assert_eq!(c.len(), 1, "{c:?}");
    }
}
