//! The dependency graph over committed (`ok` and `info`) transactions, and happens-before.
//!
//! Read resolution: because written values are unique, every read names its writer exactly. A read of a key
//! the transaction already wrote is *internal* and must return the transaction's latest write of that key;
//! any other read is *external*. An external read is *valid* when it returns `null` (the initial version) or
//! the final write of that key by another committed transaction; otherwise it is a `thin-air-read`,
//! `aborted-read`, `intermediate-read` or `internal-read` and takes no further part in the graph.
//!
//! Edges, each with the line that justifies it:
//! - SO: consecutive committed transactions of one process;
//! - WR: `U -> T` when a valid external read of `T` returns a version `U` wrote;
//! - WW: `V -> W` when `V`'s version of a key precedes `W`'s in the version order below ([`Graph::edges`]
//!   lists a generating set);
//! - RW: `T -> W` when `T` read a version whose WW successor is `W`.
//!
//! Happens-before (hb) is the transitive closure of SO ∪ WR. It is computed with one vector clock per
//! transaction over the condensation of the graph (Tarjan's strongly connected components, then topological
//! order): `clock[T][p]` is one more than the largest position (in process `p`'s session order) of a
//! transaction with a non-empty path to `T`. Because sessions are chains, `A` hb `T` iff
//! `pos(A) < clock[T][proc(A)]`. Time and memory are O((transactions + reads) · processes).
//!
//! The version order of a key `y` (≺): the initial version precedes every written version; `V ≺ W` when
//! `V` hb `W` but not `W` hb `V` — which covers session order of writers and write-read-write chains; the
//! versions of transactions on one happens-before cycle are unordered — or, for a key with an accepted
//! commit order, when the order lists `V` before `W`.

use crate::anomaly::{Anomaly, AnomalyKind, Edge, EdgeKind, OpRef};
use crate::input::{CommitOrder, History, InputError, TxnId, TxnStatus, fmt_value};
use snowline_core::history::OpKind;
use snowline_core::request::{Key, Value};
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet, VecDeque};

/// A valid external read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExtRead {
    /// Index of the micro-operation in the transaction.
    pub op: usize,
    pub key: u32,
    /// The writer, or `None` for the initial version.
    pub source: Option<TxnId>,
}

/// Why one version of a key precedes another.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Prec {
    Initial,
    Hb,
    CommitOrder,
}

/// One key's writers: per process (sorted), (position, transaction) in session order.
type KeyWriters = Vec<(u32, Vec<(u32, TxnId)>)>;

/// See the module documentation.
pub struct Graph<'h> {
    pub history: &'h History,
    pub keys: Vec<Key>,
    key_ids: HashMap<Key, u32>,
    /// Per transaction, its valid external reads in order (only `ok` transactions have any).
    pub ext_reads: Vec<Vec<ExtRead>>,
    /// Per transaction, its final write of each key: (key, micro-op index), sorted by key. Committed only.
    pub writes: Vec<Vec<(u32, usize)>>,
    /// Per transaction, the distinct other transactions it read from, in first-read order.
    pub read_from: Vec<Vec<TxnId>>,
    readers: Vec<Vec<TxnId>>,
    /// Per transaction, its dense process number and its position among its process's committed txns.
    pub proc: Vec<u32>,
    pub pos: Vec<u32>,
    pub so_prev: Vec<Option<TxnId>>,
    pub so_next: Vec<Option<TxnId>>,
    procs: Vec<u64>,
    nproc: usize,
    clock: Vec<u32>,
    /// Per transaction, its strongly connected component.
    comp: Vec<u32>,
    /// Strongly connected components with more than one member, each sorted, in order of first member.
    pub cycles: Vec<Vec<TxnId>>,
    /// Per key: per process (sorted), the writers of the key by position.
    writers: Vec<KeyWriters>,
    commit_rank: Vec<Option<HashMap<TxnId, u32>>>,
    /// Anomalies found while resolving reads (committed visibility).
    pub read_anomalies: Vec<(TxnId, Anomaly)>,
}

impl<'h> Graph<'h> {
    pub fn new(history: &'h History) -> Self {
        let txns = &history.txns;
        let n = txns.len();
        let mut keys: Vec<Key> = Vec::new();
        let mut key_ids: HashMap<Key, u32> = HashMap::new();
        let mut intern = |k: &Key| -> u32 {
            *key_ids.entry(k.clone()).or_insert_with(|| {
                keys.push(k.clone());
                (keys.len() - 1) as u32
            })
        };
        let mut values: HashMap<Value, (TxnId, usize)> = HashMap::new();
        let mut writes: Vec<Vec<(u32, usize)>> = vec![Vec::new(); n];
        for t in txns {
            let mut last: BTreeMap<u32, usize> = BTreeMap::new();
            for (i, op) in t.ops.iter().enumerate() {
                let k = intern(&op.1);
                if op.0 == OpKind::Write {
                    values.insert(op.2.clone().expect("validated: writes carry values"), (t.id, i));
                    last.insert(k, i);
                }
            }
            if t.is_committed() {
                writes[t.id] = last.into_iter().collect();
            }
        }
        let final_write = |writes: &Vec<Vec<(u32, usize)>>, t: TxnId, k: u32| -> Option<usize> {
            writes[t].binary_search_by_key(&k, |w| w.0).ok().map(|i| writes[t][i].1)
        };
        let mut ext_reads = vec![Vec::new(); n];
        let mut read_anomalies = Vec::new();
        for t in txns.iter().filter(|t| t.status == TxnStatus::Ok) {
            let mut own: HashMap<&Key, usize> = HashMap::new();
            for (i, op) in t.ops.iter().enumerate() {
                let k = key_ids[&op.1];
                if op.0 == OpKind::Write {
                    own.insert(&op.1, i);
                    continue;
                }
                let read = format!("{} read {}={}", t.name(), op.1, fmt_value(op.2.as_ref()));
                let local = |kind, summary: String, writer: Option<(TxnId, usize)>| {
                    let mut w = Witness::default();
                    w.op(t.id, i);
                    let mut edges = Vec::new();
                    if let Some((u, j)) = writer {
                        w.op(u, j);
                        edges.push(Edge {
                            kind: EdgeKind::WR,
                            from: txns[u].name(),
                            to: t.name(),
                            key: Some(op.1.clone()),
                            why: format!("{read} written by {} ({})", txns[u].name(), txns[u].status),
                        });
                    }
                    (t.id, Anomaly { name: kind, summary, ops: w.op_refs(history), edges })
                };
                if let Some(&j) = own.get(&op.1) {
                    if op.2 != t.ops[j].2 {
                        let s = format!(
                            "{read}, but its own latest write of {} is {}",
                            op.1,
                            fmt_value(t.ops[j].2.as_ref())
                        );
                        read_anomalies.push(local(AnomalyKind::InternalRead, s, None));
                    }
                    continue;
                }
                let Some(v) = &op.2 else {
                    ext_reads[t.id].push(ExtRead { op: i, key: k, source: None });
                    continue;
                };
                let Some(&(u, j)) = values.get(v) else {
                    read_anomalies.push(local(
                        AnomalyKind::ThinAirRead,
                        format!("{read}, a value never written"),
                        None,
                    ));
                    continue;
                };
                let w = &txns[u].ops[j];
                if w.1 != op.1 {
                    let s = format!("{read}, a value {} wrote to key {}, not {}", txns[u].name(), w.1, op.1);
                    read_anomalies.push(local(AnomalyKind::ThinAirRead, s, Some((u, j))));
                } else if u == t.id {
                    let s = format!("{read}, a value it writes only later");
                    read_anomalies.push(local(AnomalyKind::InternalRead, s, None));
                } else if txns[u].status == TxnStatus::Fail {
                    let s = format!("{read} written by {}, which failed", txns[u].name());
                    read_anomalies.push(local(AnomalyKind::AbortedRead, s, Some((u, j))));
                } else if final_write(&writes, u, k) != Some(j) {
                    let s = format!("{read}, an intermediate write of {} (it wrote {} again)", txns[u].name(), op.1);
                    read_anomalies.push(local(AnomalyKind::IntermediateRead, s, Some((u, j))));
                } else {
                    ext_reads[t.id].push(ExtRead { op: i, key: k, source: Some(u) });
                }
            }
        }
        let mut read_from = vec![Vec::new(); n];
        let mut readers = vec![Vec::new(); n];
        for t in 0..n {
            for r in &ext_reads[t] {
                if let Some(u) = r.source
                    && !read_from[t].contains(&u)
                {
                    read_from[t].push(u);
                    readers[u].push(t);
                }
            }
        }
        // Sessions.
        let procs: Vec<u64> =
            txns.iter().filter(|t| t.is_committed()).map(|t| t.process).collect::<BTreeSet<_>>().into_iter().collect();
        let nproc = procs.len();
        let mut proc = vec![u32::MAX; n];
        let mut pos = vec![u32::MAX; n];
        let mut so_prev = vec![None; n];
        let mut so_next = vec![None; n];
        let mut last_in: Vec<Option<TxnId>> = vec![None; nproc];
        for t in txns.iter().filter(|t| t.is_committed()) {
            let p = procs.binary_search(&t.process).expect("listed") as u32;
            proc[t.id] = p;
            if let Some(prev) = last_in[p as usize] {
                pos[t.id] = pos[prev] + 1;
                so_prev[t.id] = Some(prev);
                so_next[prev] = Some(t.id);
            } else {
                pos[t.id] = 0;
            }
            last_in[p as usize] = Some(t.id);
        }
        let mut writers: Vec<BTreeMap<u32, Vec<(u32, TxnId)>>> = vec![BTreeMap::new(); keys.len()];
        for t in txns.iter().filter(|t| t.is_committed()) {
            for &(k, _) in &writes[t.id] {
                writers[k as usize].entry(proc[t.id]).or_default().push((pos[t.id], t.id));
            }
        }
        let writers = writers.into_iter().map(|m| m.into_iter().collect()).collect();
        let mut g = Graph {
            history,
            keys,
            key_ids,
            ext_reads,
            writes,
            read_from,
            readers,
            proc,
            pos,
            so_prev,
            so_next,
            procs,
            nproc,
            clock: Vec::new(),
            comp: Vec::new(),
            cycles: Vec::new(),
            writers,
            commit_rank: Vec::new(),
            read_anomalies,
        };
        g.commit_rank = vec![None; g.keys.len()];
        g.compute_clocks();
        g
    }

    pub(crate) fn committed(&self, t: TxnId) -> bool {
        self.proc[t] != u32::MAX
    }

    /// Whether the accepted commit order of key `k` lists every committed writer of it (an info writer left
    /// out of it is placed by inference).
    pub(crate) fn reported_total(&self, k: u32) -> bool {
        self.commit_rank[k as usize].as_ref().is_some_and(|rank| {
            self.writers[k as usize]
                .iter()
                .all(|(_, ws)| ws.iter().all(|&(_, t)| !self.committed(t) || rank.contains_key(&t)))
        })
    }

    /// The writers of key `k` in an accepted commit order, oldest first (`None`: no order for `k`).
    pub(crate) fn reported_order(&self, k: u32) -> Option<Vec<TxnId>> {
        let rank = self.commit_rank[k as usize].as_ref()?;
        let mut seq: Vec<(u32, TxnId)> = rank.iter().map(|(&t, &r)| (r, t)).collect();
        seq.sort_unstable();
        Some(seq.into_iter().map(|(_, t)| t).collect())
    }

    /// A generating set of the happens-before part of key `k`'s version order: pairs `(v, w)` with `v`
    /// happens-before `w`. For each writer `w`, the candidates are the latest writer of each process that
    /// happens-before `w` (in `w`'s own process: its previous writer); only the maximal ones are kept (a
    /// candidate that happens-before another is implied through it).
    pub(crate) fn hb_generating(&self, k: u32) -> Vec<(TxnId, TxnId)> {
        let per_proc = &self.writers[k as usize];
        let strict = |a: TxnId, b: TxnId| self.hb(a, b) && self.comp[a] != self.comp[b];
        let mut out = Vec::new();
        let mut cands: Vec<TxnId> = Vec::new();
        for (_, list) in per_proc {
            for &(_, w) in list {
                cands.clear();
                for (p, other) in per_proc {
                    let bound = if *p == self.proc[w] { self.pos[w] } else { self.clock_row(w)[*p as usize] };
                    let i = other.partition_point(|&(pos, _)| pos < bound);
                    if i > 0 && strict(other[i - 1].1, w) {
                        cands.push(other[i - 1].1);
                    }
                }
                for &c in &cands {
                    if !cands.iter().any(|&d| d != c && strict(c, d)) {
                        out.push((c, w));
                    }
                }
            }
        }
        out
    }

    /// The `i`-th successor of `t`: its session successor first, then its readers.
    fn succ_at(&self, t: TxnId, i: usize) -> Option<TxnId> {
        match self.so_next[t] {
            Some(nx) if i == 0 => Some(nx),
            Some(_) => self.readers[t].get(i - 1).copied(),
            None => self.readers[t].get(i).copied(),
        }
    }

    fn preds(&self, t: TxnId) -> impl Iterator<Item = TxnId> + '_ {
        self.so_prev[t].into_iter().chain(self.read_from[t].iter().copied())
    }

    /// Tarjan's algorithm (iterative), then clocks in topological order of the components.
    fn compute_clocks(&mut self) {
        let n = self.history.txns.len();
        let np = self.nproc;
        const UNSEEN: u32 = u32::MAX;
        let mut index = vec![UNSEEN; n];
        let mut low = vec![0u32; n];
        let mut on_stack = vec![false; n];
        let mut stack: Vec<TxnId> = Vec::new();
        let mut sccs: Vec<Vec<TxnId>> = Vec::new();
        let mut next = 0u32;
        for root in 0..n {
            if !self.committed(root) || index[root] != UNSEEN {
                continue;
            }
            let mut call: Vec<(TxnId, usize)> = vec![(root, 0)];
            index[root] = next;
            low[root] = next;
            next += 1;
            stack.push(root);
            on_stack[root] = true;
            while let Some(&(v, child)) = call.last() {
                if let Some(w) = self.succ_at(v, child) {
                    call.last_mut().expect("non-empty").1 += 1;
                    if index[w] == UNSEEN {
                        index[w] = next;
                        low[w] = next;
                        next += 1;
                        stack.push(w);
                        on_stack[w] = true;
                        call.push((w, 0));
                    } else if on_stack[w] {
                        low[v] = low[v].min(index[w]);
                    }
                } else {
                    call.pop();
                    if let Some(&(parent, _)) = call.last() {
                        low[parent] = low[parent].min(low[v]);
                    }
                    if low[v] == index[v] {
                        let mut scc = Vec::new();
                        loop {
                            let w = stack.pop().expect("on stack");
                            on_stack[w] = false;
                            scc.push(w);
                            if w == v {
                                break;
                            }
                        }
                        sccs.push(scc);
                    }
                }
            }
        }
        let mut clock = vec![0u32; n * np];
        let mut comp = vec![usize::MAX; n];
        for (c, scc) in sccs.iter().enumerate() {
            for &m in scc {
                comp[m] = c;
            }
        }
        let mut acc = vec![0u32; np];
        // Tarjan emits components sinks first.
        for (c, scc) in sccs.iter().enumerate().rev() {
            acc.iter_mut().for_each(|x| *x = 0);
            for &m in scc {
                for q in self.preds(m) {
                    if comp[q] != c {
                        let row = &clock[q * np..(q + 1) * np];
                        for (a, &b) in acc.iter_mut().zip(row) {
                            *a = (*a).max(b);
                        }
                        let pq = self.proc[q] as usize;
                        acc[pq] = acc[pq].max(self.pos[q] + 1);
                    }
                }
            }
            if scc.len() > 1 {
                for &m in scc {
                    let pm = self.proc[m] as usize;
                    acc[pm] = acc[pm].max(self.pos[m] + 1);
                }
                let mut members = scc.clone();
                members.sort_unstable();
                self.cycles.push(members);
            }
            for &m in scc {
                clock[m * np..(m + 1) * np].copy_from_slice(&acc);
            }
        }
        self.cycles.sort();
        self.clock = clock;
        self.comp = comp.into_iter().map(|c| c as u32).collect();
    }

    /// `a` happens-before `b`: a non-empty path of SO and WR edges from `a` to `b`.
    pub fn hb(&self, a: TxnId, b: TxnId) -> bool {
        self.clock[b * self.nproc + self.proc[a] as usize] > self.pos[a]
    }

    pub(crate) fn clock_row(&self, t: TxnId) -> &[u32] {
        &self.clock[t * self.nproc..(t + 1) * self.nproc]
    }

    /// Raise `frontier` to cover everything that happens-before `t`.
    pub(crate) fn join_strict(&self, frontier: &mut [u32], t: TxnId) {
        for (a, &b) in frontier.iter_mut().zip(self.clock_row(t)) {
            *a = (*a).max(b);
        }
    }

    pub(crate) fn nproc(&self) -> usize {
        self.nproc
    }

    pub(crate) fn process_id(&self, p: u32) -> u64 {
        self.procs[p as usize]
    }

    pub fn key_id(&self, k: &Key) -> Option<u32> {
        self.key_ids.get(k).copied()
    }

    /// The transaction's final write of key `k`: its micro-op index.
    pub fn final_write(&self, t: TxnId, k: u32) -> Option<usize> {
        let w = &self.writes[t];
        w.binary_search_by_key(&k, |x| x.0).ok().map(|i| w[i].1)
    }

    pub fn written_value(&self, t: TxnId, k: u32) -> Option<&Value> {
        self.final_write(t, k).and_then(|i| self.history.txns[t].ops[i].2.as_ref())
    }

    /// The version order of key `k`: does version `v` (`None`: initial) precede `w`'s version?
    pub fn precedes(&self, k: u32, v: Option<TxnId>, w: TxnId) -> Option<Prec> {
        let Some(v) = v else { return Some(Prec::Initial) };
        if v == w {
            return None;
        }
        if let Some(rank) = &self.commit_rank[k as usize]
            && let (Some(a), Some(b)) = (rank.get(&v), rank.get(&w))
        {
            return (a < b).then_some(Prec::CommitOrder);
        }
        (self.hb(v, w) && self.comp[v] != self.comp[w]).then_some(Prec::Hb)
    }

    /// A writer `w` of key `k` among those that happen-before the frontier (for each process `p`, the
    /// transactions at positions below `frontier[p]`), with `v ≺ w`. Checks only the latest such writer of
    /// each process: the version order extends session order, so it is the one `v` precedes if any does.
    pub(crate) fn newer_below(&self, k: u32, frontier: &[u32], v: Option<TxnId>) -> Option<(TxnId, Prec)> {
        for (p, list) in &self.writers[k as usize] {
            let bound = frontier[*p as usize];
            let i = list.partition_point(|&(pos, _)| pos < bound);
            if i > 0 {
                let w = list[i - 1].1;
                if let Some(j) = self.precedes(k, v, w) {
                    return Some((w, j));
                }
            }
        }
        None
    }

    /// For each process that wrote `k`, its latest writer of `k` at a position below `frontier[p]`.
    pub(crate) fn writers_below<'a>(&'a self, k: u32, frontier: &'a [u32]) -> impl Iterator<Item = TxnId> + 'a {
        self.writers[k as usize].iter().filter_map(move |(p, list)| {
            let i = list.partition_point(|&(pos, _)| pos < frontier[*p as usize]);
            (i > 0).then(|| list[i - 1].1)
        })
    }

    /// The latest writer of `k` in process `p` at a position below `bound`.
    pub(crate) fn writer_below(&self, k: u32, p: u32, bound: u32) -> Option<TxnId> {
        let list = &self.writers[k as usize];
        let i = list.binary_search_by_key(&p, |x| x.0).ok()?;
        let list = &list[i].1;
        let j = list.partition_point(|&(pos, _)| pos < bound);
        (j > 0).then(|| list[j - 1].1)
    }

    /// Shortest non-empty SO/WR path from `a` to `b` (a cycle when `a == b`), as transactions `a, .., b`.
    pub fn path(&self, a: TxnId, b: TxnId) -> Option<Vec<TxnId>> {
        let mut toward: HashMap<TxnId, TxnId> = HashMap::new();
        let mut queue = VecDeque::from([b]);
        let mut seen: HashSet<TxnId> = HashSet::from([b]);
        while let Some(z) = queue.pop_front() {
            for q in self.preds(z) {
                if q == a {
                    let mut path = vec![a, z];
                    let mut cur = z;
                    while let Some(&nx) = toward.get(&cur) {
                        path.push(nx);
                        cur = nx;
                    }
                    return Some(path);
                }
                if (self.hb(a, q)) && seen.insert(q) {
                    toward.insert(q, z);
                    queue.push_back(q);
                }
            }
        }
        None
    }

    /// The edge `x -> y` of a happens-before path, justified (SO preferred).
    pub(crate) fn hb_edge(&self, x: TxnId, y: TxnId, w: &mut Witness) -> Edge {
        let txns = &self.history.txns;
        if self.so_next[x] == Some(y) {
            return Edge {
                kind: EdgeKind::SO,
                from: txns[x].name(),
                to: txns[y].name(),
                key: None,
                why: format!("{} then {} in process {}", txns[x].name(), txns[y].name(), txns[x].process),
            };
        }
        let r = self.ext_reads[y].iter().find(|r| r.source == Some(x)).expect("a WR edge");
        w.op(y, r.op);
        w.op(x, self.final_write(x, r.key).expect("writer"));
        self.wr_edge(y, r)
    }

    /// The WR edge (or the initial-version note) of one external read.
    pub(crate) fn wr_edge(&self, t: TxnId, r: &ExtRead) -> Edge {
        let txns = &self.history.txns;
        let op = &txns[t].ops[r.op];
        let read = format!("{} read {}={}", txns[t].name(), op.1, fmt_value(op.2.as_ref()));
        match r.source {
            Some(u) => Edge {
                kind: EdgeKind::WR,
                from: txns[u].name(),
                to: txns[t].name(),
                key: Some(op.1.clone()),
                why: format!("{read} written by {}", txns[u].name()),
            },
            None => Edge {
                kind: EdgeKind::WR,
                from: "init".into(),
                to: txns[t].name(),
                key: Some(op.1.clone()),
                why: format!("{read}, the initial version"),
            },
        }
    }

    /// Edges along a happens-before path.
    pub(crate) fn path_edges(&self, a: TxnId, b: TxnId, w: &mut Witness) -> Vec<Edge> {
        let path = self.path(a, b).expect("a path exists when hb holds");
        path.windows(2).map(|p| self.hb_edge(p[0], p[1], w)).collect()
    }

    /// The WW edge `v ≺ w` on key `k` with its justification, followed by the path that proves it.
    pub(crate) fn ww_edges(&self, k: u32, v: Option<TxnId>, w: TxnId, why: Prec, wit: &mut Witness) -> Vec<Edge> {
        let txns = &self.history.txns;
        let key = &self.keys[k as usize];
        let wv = format!("{}={} ({})", key, fmt_value(self.written_value(w, k)), txns[w].name());
        wit.op(w, self.final_write(w, k).expect("writer"));
        let Some(v) = v else {
            return vec![Edge {
                kind: EdgeKind::WW,
                from: "init".into(),
                to: txns[w].name(),
                key: Some(key.clone()),
                why: format!("the initial version of {key} precedes every write, here {wv}"),
            }];
        };
        wit.op(v, self.final_write(v, k).expect("writer"));
        let vv = format!("{}={} ({})", key, fmt_value(self.written_value(v, k)), txns[v].name());
        let mut edges = vec![Edge {
            kind: EdgeKind::WW,
            from: txns[v].name(),
            to: txns[w].name(),
            key: Some(key.clone()),
            why: match why {
                Prec::CommitOrder => format!("the commit order lists {vv} before {wv}"),
                _ => format!("{vv} precedes {wv}: {} happens-before {}", txns[v].name(), txns[w].name()),
            },
        }];
        if why == Prec::Hb {
            edges.extend(self.path_edges(v, w, wit));
        }
        edges
    }

    /// The RW edge: `t` read version `v` of `k`, which `w`'s version follows.
    pub(crate) fn rw_edge(&self, t: TxnId, r: &ExtRead, w: TxnId) -> Edge {
        let txns = &self.history.txns;
        let key = &self.keys[r.key as usize];
        Edge {
            kind: EdgeKind::RW,
            from: txns[t].name(),
            to: txns[w].name(),
            key: Some(key.clone()),
            why: format!(
                "{} read {}={}, older than {}={} written by {}",
                txns[t].name(),
                key,
                fmt_value(txns[t].ops[r.op].2.as_ref()),
                key,
                fmt_value(self.written_value(w, r.key)),
                txns[w].name()
            ),
        }
    }

    /// Validate a reported commit order and adopt it for the keys where it is consistent. Malformed orders
    /// are input errors; orders contradicting happens-before are anomalies (and are not adopted).
    pub fn apply_commit_order(&mut self, order: &CommitOrder) -> Result<Vec<Anomaly>, InputError> {
        let err = |reason: String| InputError { line: 0, index: None, reason };
        let txns = &self.history.txns;
        let mut by_value: HashMap<&Value, (TxnId, usize)> = HashMap::new();
        for t in txns {
            for (i, op) in t.ops.iter().enumerate() {
                if let Some(v) = op.2.as_ref().filter(|_| op.0 == OpKind::Write) {
                    by_value.insert(v, (t.id, i));
                }
            }
        }
        let mut anomalies = Vec::new();
        for (key, list) in &order.keys {
            let Some(k) = self.key_id(key) else {
                if list.is_empty() {
                    continue;
                }
                return Err(err(format!("key {key:?} is never written")));
            };
            let mut seq: Vec<TxnId> = Vec::with_capacity(list.len());
            let mut rank: HashMap<TxnId, u32> = HashMap::new();
            for v in list {
                let Some(&(t, i)) = by_value.get(v) else {
                    return Err(err(format!("key {key:?}: value {v:?} is never written")));
                };
                if txns[t].ops[i].1 != *key {
                    return Err(err(format!("key {key:?}: value {v:?} is written to key {:?}", txns[t].ops[i].1)));
                }
                if !txns[t].is_committed() {
                    return Err(err(format!(
                        "key {key:?}: value {v:?} is written by {}, which failed",
                        txns[t].name()
                    )));
                }
                if self.final_write(t, k) != Some(i) {
                    return Err(err(format!(
                        "key {key:?}: value {v:?} is an intermediate write of {}",
                        txns[t].name()
                    )));
                }
                if rank.insert(t, seq.len() as u32).is_some() {
                    return Err(err(format!("key {key:?}: value {v:?} is listed twice")));
                }
                seq.push(t);
            }
            for (_, ws) in &self.writers[k as usize] {
                for &(_, t) in ws {
                    // An info writer may be left out: its place is inferred.
                    if txns[t].status == TxnStatus::Ok && !rank.contains_key(&t) {
                        return Err(err(format!(
                            "key {key:?}: value {} written by {} is missing",
                            fmt_value(self.written_value(t, k)),
                            txns[t].name()
                        )));
                    }
                }
            }
            // Later-listed versions must not happen-before earlier ones.
            let mut min_later: BTreeMap<u32, (u32, TxnId)> = BTreeMap::new();
            let mut contradiction = None;
            'outer: for &t in seq.iter().rev() {
                for (&p, &(ppos, later)) in &min_later {
                    if self.clock_row(t)[p as usize] > ppos {
                        contradiction = Some((t, later));
                        break 'outer;
                    }
                }
                let e = min_later.entry(self.proc[t]).or_insert((self.pos[t], t));
                if self.pos[t] <= e.0 {
                    *e = (self.pos[t], t);
                }
            }
            if let Some((earlier, later)) = contradiction {
                let mut wit = Witness::default();
                wit.op(earlier, self.final_write(earlier, k).expect("writer"));
                wit.op(later, self.final_write(later, k).expect("writer"));
                let mut edges = vec![Edge {
                    kind: EdgeKind::WW,
                    from: txns[earlier].name(),
                    to: txns[later].name(),
                    key: Some(key.clone()),
                    why: format!(
                        "the commit order lists {key}={} ({}) before {key}={} ({})",
                        fmt_value(self.written_value(earlier, k)),
                        txns[earlier].name(),
                        fmt_value(self.written_value(later, k)),
                        txns[later].name()
                    ),
                }];
                edges.extend(self.path_edges(later, earlier, &mut wit));
                let summary = format!(
                    "the commit order of {key} puts {} before {}, but {} happens-before {}",
                    txns[earlier].name(),
                    txns[later].name(),
                    txns[later].name(),
                    txns[earlier].name()
                );
                anomalies.push(Anomaly {
                    name: AnomalyKind::InconsistentCommitOrder,
                    summary,
                    ops: wit.op_refs(self.history),
                    edges,
                });
                continue;
            }
            self.commit_rank[k as usize] = Some(rank);
        }
        Ok(anomalies)
    }

    /// The dependency graph's edges, each justified: SO between consecutive transactions of a process; WR
    /// per reads-from pair; WW a generating set of the version order (its transitive closure, for keys and
    /// transactions off happens-before cycles): the initial version to the first writer of each process,
    /// consecutive writers of a key in a process, for each writer `W` and process `p` the latest writer in
    /// `p` that happens-before `W`, and consecutive versions of an accepted commit order; RW from a
    /// transaction that read version `V` to each WW successor of `V`. For levels that search the graph
    /// for cycles (SI, serializability and the rest).
    pub fn edges(&self) -> Vec<Edge> {
        let txns = &self.history.txns;
        let mut scratch = Witness::default();
        let mut out = Vec::new();
        for t in (0..txns.len()).filter(|&t| self.committed(t)) {
            if let Some(nx) = self.so_next[t] {
                out.push(self.hb_edge(t, nx, &mut scratch));
            }
            for r in self.ext_reads[t].iter().filter(|r| r.source.is_some()) {
                out.push(self.wr_edge(t, r));
            }
        }
        let mut ww: BTreeSet<(u32, Option<TxnId>, TxnId)> = BTreeSet::new();
        for (k, per_proc) in self.writers.iter().enumerate() {
            let k = k as u32;
            let mut add = |v: Option<TxnId>, w: TxnId| {
                if self.precedes(k, v, w).is_some() {
                    ww.insert((k, v, w));
                }
            };
            for (_, list) in per_proc {
                add(None, list[0].1);
                for pair in list.windows(2) {
                    add(Some(pair[0].1), pair[1].1);
                }
                for &(_, w) in list {
                    for (p, other) in per_proc {
                        let bound = self.clock_row(w)[*p as usize];
                        let i = other.partition_point(|&(pos, _)| pos < bound);
                        if *p != self.proc[w] && i > 0 {
                            add(Some(other[i - 1].1), w);
                        }
                    }
                }
            }
            if let Some(rank) = &self.commit_rank[k as usize] {
                let mut seq: Vec<(u32, TxnId)> = rank.iter().map(|(&t, &r)| (r, t)).collect();
                seq.sort_unstable();
                for pair in seq.windows(2) {
                    add(Some(pair[0].1), pair[1].1);
                }
            }
        }
        let mut succ: HashMap<(u32, Option<TxnId>), Vec<TxnId>> = HashMap::new();
        for &(k, v, w) in &ww {
            let why = self.precedes(k, v, w).expect("filtered");
            out.push(self.ww_edges(k, v, w, why, &mut scratch).swap_remove(0));
            succ.entry((k, v)).or_default().push(w);
        }
        for t in (0..txns.len()).filter(|&t| self.committed(t)) {
            for r in &self.ext_reads[t] {
                for &w in succ.get(&(r.key, r.source)).into_iter().flatten() {
                    if w != t {
                        out.push(self.rw_edge(t, r, w));
                    }
                }
            }
        }
        out
    }
}

/// The transactions and micro-operations a witness involves.
#[derive(Default)]
pub(crate) struct Witness {
    ops: BTreeMap<TxnId, BTreeSet<usize>>,
}

impl Witness {
    pub(crate) fn op(&mut self, t: TxnId, i: usize) {
        self.ops.entry(t).or_default().insert(i);
    }

    pub(crate) fn txn(&mut self, t: TxnId) {
        self.ops.entry(t).or_default();
    }

    pub(crate) fn op_refs(&self, h: &History) -> Vec<OpRef> {
        self.ops
            .iter()
            .map(|(&t, ops)| {
                let txn = &h.txns[t];
                OpRef {
                    txn: txn.name(),
                    index: txn.invoke_index,
                    complete_index: txn.complete_index,
                    process: txn.process,
                    status: txn.status,
                    ops: ops.iter().map(|&i| txn.ops[i].clone()).collect(),
                }
            })
            .collect()
    }
}
