//! The checks, one pass over the transactions in invoke order. For each valid external read `T` reads
//! `y = V` (`V` a writer, or the initial version) the checks run in this order and the first that finds a
//! version `W` of `y` with `V ≺ W` that `T` should have observed names the anomaly (one per read):
//! `non-repeatable-read`, `fractured-read`, `causality-gap`, `read-your-writes`, `monotonic-reads`, then
//! `monotonic-writes` / `writes-follow-reads`.
//!
//! Each check asks whether some writer in a set closed under "earlier in its session" is newer than `V`;
//! the version order extends session order, so only the latest such writer of each process needs testing,
//! found by binary search under a vector-clock frontier: O(processes · log) per read.

use crate::anomaly::{Anomaly, AnomalyKind, Edge, EdgeKind, Verdict};
use crate::graph::{ExtRead, Graph, Prec, Witness};
use crate::input::{TxnId, fmt_value};
use crate::level::Level;
use std::collections::{BTreeMap, HashMap, HashSet};

/// Collects anomalies: counts all, keeps witnesses for the first [`Verdict::MAX_PER_KIND`] of each kind.
pub(crate) struct Reporter {
    level: Level,
    listed: Vec<(Option<TxnId>, Anomaly)>,
    counts: BTreeMap<AnomalyKind, usize>,
    pub(crate) basis: Option<String>,
    pub(crate) inconclusive: bool,
}

impl Reporter {
    pub(crate) fn new(level: Level) -> Self {
        Reporter { level, listed: Vec::new(), counts: BTreeMap::new(), basis: None, inconclusive: false }
    }

    pub(crate) fn add(&mut self, at: Option<TxnId>, kind: AnomalyKind, build: impl FnOnce() -> Anomaly) {
        let n = self.counts.entry(kind).or_insert(0);
        *n += 1;
        if *n <= Verdict::MAX_PER_KIND {
            self.listed.push((at, build()));
        }
    }

    pub(crate) fn finish(mut self) -> Verdict {
        self.listed.sort_by_key(|(at, _)| *at);
        let ok = self.counts.is_empty();
        Verdict {
            level: self.level,
            ok,
            anomalies: self.listed.into_iter().map(|(_, a)| a).collect(),
            counts: self.counts,
            basis: self.basis,
            inconclusive: self.inconclusive && ok,
        }
    }
}

/// What a session has observed before its current transaction.
struct Session {
    /// Covers every transaction that happens-before a transaction the session read from.
    frontier: Vec<u32>,
    /// The transactions read from, with the session transaction that first read each.
    reads: Vec<(TxnId, TxnId)>,
    seen: HashSet<TxnId>,
    /// Per key, per process: the latest writer of a version the session observed (under `causal`: read that
    /// key from; under `tcc`: read any key from), with the session transaction that read it.
    observed: HashMap<u32, BTreeMap<u32, (TxnId, TxnId)>>,
}

pub(crate) fn run(g: &Graph, level: Level, rep: &mut Reporter) {
    for (t, a) in &g.read_anomalies {
        rep.add(Some(*t), a.name, || a.clone());
    }
    if level.causal() {
        for cycle in &g.cycles {
            rep.add(Some(cycle[0]), AnomalyKind::CyclicCausality, || cycle_anomaly(g, cycle));
        }
    }
    if level == Level::Rc {
        return;
    }
    let np = g.nproc();
    let n = g.history.txns.len();
    let mut sessions: HashMap<u32, Session> = HashMap::new();
    let mut snap = vec![0u32; np];
    for t in (0..n).filter(|&t| g.history.txns[t].is_committed()) {
        let mut session = level.causal().then(|| {
            sessions.entry(g.proc[t]).or_insert_with(|| Session {
                frontier: vec![0; np],
                reads: Vec::new(),
                seen: HashSet::new(),
                observed: HashMap::new(),
            })
        });
        if level.order_preserving() {
            snap.iter_mut().for_each(|x| *x = 0);
            for &u in &g.read_from[t] {
                g.join_strict(&mut snap, u);
            }
        }
        let reads = &g.ext_reads[t];
        let mut first: HashMap<u32, &ExtRead> = HashMap::new();
        'reads: for r in reads {
            if let Some(r0) = first.get(&r.key) {
                if r0.source != r.source {
                    rep.add(Some(t), AnomalyKind::NonRepeatableRead, || non_repeatable(g, t, r0, r));
                }
                continue;
            }
            first.insert(r.key, r);
            if level.atomic() {
                for &u in &g.read_from[t] {
                    if Some(u) != r.source
                        && g.final_write(u, r.key).is_some()
                        && let Some(why) = g.precedes(r.key, r.source, u)
                    {
                        rep.add(Some(t), AnomalyKind::FracturedRead, || fractured(g, t, r, u, why));
                        continue 'reads;
                    }
                }
            }
            if level.order_preserving()
                && let Some((w, why)) = g.newer_below(r.key, &snap, r.source)
            {
                rep.add(Some(t), AnomalyKind::CausalityGap, || gap(g, t, r, w, why));
                continue;
            }
            let Some(s) = session.as_deref_mut() else { continue };
            if let Some(w) = g.writer_below(r.key, g.proc[t], g.pos[t])
                && let Some(why) = g.precedes(r.key, r.source, w)
            {
                rep.add(Some(t), AnomalyKind::ReadYourWrites, || read_your_writes(g, t, r, w, why));
                continue;
            }
            for &(x, st) in s.observed.get(&r.key).into_iter().flat_map(|m| m.values()) {
                if let Some(why) = g.precedes(r.key, r.source, x) {
                    rep.add(Some(t), AnomalyKind::MonotonicReads, || monotonic_reads(g, t, r, x, st, why));
                    continue 'reads;
                }
            }
            if let Some((w, why)) = g.newer_below(r.key, &s.frontier, r.source) {
                let &(x, st) = s.reads.iter().find(|(x, _)| g.hb(w, *x)).expect("the frontier covers w");
                let kind =
                    if g.proc[w] == g.proc[x] { AnomalyKind::MonotonicWrites } else { AnomalyKind::WritesFollowReads };
                rep.add(Some(t), kind, || session_order(g, kind, t, r, w, x, st, why));
            }
        }
        if let Some(s) = session {
            for &u in &g.read_from[t] {
                if s.seen.insert(u) {
                    s.reads.push((u, t));
                    g.join_strict(&mut s.frontier, u);
                    if level == Level::Tcc {
                        for &(k, _) in &g.writes[u] {
                            observe(g, s, k, u, t);
                        }
                    }
                }
            }
            if level != Level::Tcc {
                for r in reads {
                    if let Some(u) = r.source {
                        observe(g, s, r.key, u, t);
                    }
                }
            }
        }
    }
}

fn observe(g: &Graph, s: &mut Session, k: u32, u: TxnId, t: TxnId) {
    let e = s.observed.entry(k).or_default().entry(g.proc[u]).or_insert((u, t));
    if g.pos[u] > g.pos[e.0] {
        *e = (u, t);
    }
}

fn anomaly(g: &Graph, name: AnomalyKind, summary: String, wit: Witness, edges: Vec<Edge>) -> Anomaly {
    Anomaly { name, summary, ops: wit.op_refs(g.history), edges }
}

/// `T read k=v` (with the writer's name).
fn describe_read(g: &Graph, t: TxnId, r: &ExtRead) -> String {
    let txns = &g.history.txns;
    let op = &txns[t].ops[r.op];
    let from = r.source.map_or(String::new(), |u| format!(" (written by {})", txns[u].name()));
    format!("{} read {}={}{from}", txns[t].name(), op.1, fmt_value(op.2.as_ref()))
}

/// `k=v written by W`.
fn describe_version(g: &Graph, k: u32, w: TxnId) -> String {
    format!("{}={} written by {}", g.keys[k as usize], fmt_value(g.written_value(w, k)), g.history.txns[w].name())
}

fn so_span(g: &Graph, a: TxnId, b: TxnId) -> Edge {
    let txns = &g.history.txns;
    Edge {
        kind: EdgeKind::SO,
        from: txns[a].name(),
        to: txns[b].name(),
        key: None,
        why: format!("{} precedes {} in process {}", txns[a].name(), txns[b].name(), g.process_id(g.proc[a])),
    }
}

/// The read `r` of `t` and the version `w` it missed: the common tail of every witness.
fn read_tail(g: &Graph, t: TxnId, r: &ExtRead, w: TxnId, why: Prec, wit: &mut Witness, edges: &mut Vec<Edge>) {
    wit.op(t, r.op);
    edges.push(g.wr_edge(t, r));
    edges.extend(g.ww_edges(r.key, r.source, w, why, wit));
    edges.push(g.rw_edge(t, r, w));
}

pub(crate) fn non_repeatable(g: &Graph, t: TxnId, r0: &ExtRead, r: &ExtRead) -> Anomaly {
    let mut wit = Witness::default();
    wit.op(t, r0.op);
    wit.op(t, r.op);
    let summary = format!("{}, then {}", describe_read(g, t, r0), describe_read(g, t, r).replacen(' ', " again ", 1));
    anomaly(g, AnomalyKind::NonRepeatableRead, summary, wit, vec![g.wr_edge(t, r0), g.wr_edge(t, r)])
}

/// `t` read some key from `u`, and `r` older than `u`'s own version.
fn fractured(g: &Graph, t: TxnId, r: &ExtRead, u: TxnId, why: Prec) -> Anomaly {
    let rx = g.ext_reads[t].iter().find(|x| x.source == Some(u)).expect("t read from u");
    let mut wit = Witness::default();
    wit.op(t, rx.op);
    wit.op(u, g.final_write(u, rx.key).expect("writer"));
    let mut edges = vec![g.wr_edge(t, rx)];
    read_tail(g, t, r, u, why, &mut wit, &mut edges);
    let summary = format!(
        "{}, but {}, older than {}",
        describe_read(g, t, rx),
        describe_read(g, t, r).split_once(" read ").map_or(String::new(), |x| x.1.to_string()),
        describe_version(g, r.key, u)
    );
    anomaly(g, AnomalyKind::FracturedRead, summary, wit, edges)
}

fn gap(g: &Graph, t: TxnId, r: &ExtRead, w: TxnId, why: Prec) -> Anomaly {
    let &u = g.read_from[t].iter().find(|&&u| g.hb(w, u)).expect("w happens-before a writer t read");
    let rx = g.ext_reads[t].iter().find(|x| x.source == Some(u)).expect("t read from u");
    let mut wit = Witness::default();
    wit.op(t, rx.op);
    wit.op(u, g.final_write(u, rx.key).expect("writer"));
    let mut edges = vec![g.wr_edge(t, rx)];
    edges.extend(g.path_edges(w, u, &mut wit));
    read_tail(g, t, r, w, why, &mut wit, &mut edges);
    let summary = format!(
        "{}, but {}, older than {}, which happens-before {}",
        describe_read(g, t, rx),
        describe_read(g, t, r).split_once(" read ").map_or(String::new(), |x| x.1.to_string()),
        describe_version(g, r.key, w),
        g.history.txns[u].name()
    );
    anomaly(g, AnomalyKind::CausalityGap, summary, wit, edges)
}

fn read_your_writes(g: &Graph, t: TxnId, r: &ExtRead, w: TxnId, why: Prec) -> Anomaly {
    let mut wit = Witness::default();
    let mut edges = vec![so_span(g, w, t)];
    read_tail(g, t, r, w, why, &mut wit, &mut edges);
    let summary = format!(
        "{}, older than its own session's earlier write {}",
        describe_read(g, t, r),
        describe_version(g, r.key, w)
    );
    anomaly(g, AnomalyKind::ReadYourWrites, summary, wit, edges)
}

fn monotonic_reads(g: &Graph, t: TxnId, r: &ExtRead, x: TxnId, st: TxnId, why: Prec) -> Anomaly {
    let mut wit = Witness::default();
    let rx = g.ext_reads[st].iter().find(|e| e.source == Some(x) && e.key == r.key);
    let rx = rx.or_else(|| g.ext_reads[st].iter().find(|e| e.source == Some(x))).expect("st read from x");
    wit.op(st, rx.op);
    let mut edges = vec![g.wr_edge(st, rx), so_span(g, st, t)];
    read_tail(g, t, r, x, why, &mut wit, &mut edges);
    let summary = format!(
        "{}, older than {}, which its session observed earlier ({})",
        describe_read(g, t, r),
        describe_version(g, r.key, x),
        describe_read(g, st, rx)
    );
    anomaly(g, AnomalyKind::MonotonicReads, summary, wit, edges)
}

#[allow(clippy::too_many_arguments)]
fn session_order(
    g: &Graph,
    kind: AnomalyKind,
    t: TxnId,
    r: &ExtRead,
    w: TxnId,
    x: TxnId,
    st: TxnId,
    why: Prec,
) -> Anomaly {
    let mut wit = Witness::default();
    let rx = g.ext_reads[st].iter().find(|e| e.source == Some(x)).expect("st read from x");
    wit.op(st, rx.op);
    let mut edges = g.path_edges(w, x, &mut wit);
    edges.push(g.wr_edge(st, rx));
    edges.push(so_span(g, st, t));
    read_tail(g, t, r, w, why, &mut wit, &mut edges);
    let summary = format!(
        "{}, older than {}, which happens-before {} that its session read earlier ({})",
        describe_read(g, t, r),
        describe_version(g, r.key, w),
        g.history.txns[x].name(),
        describe_read(g, st, rx)
    );
    anomaly(g, kind, summary, wit, edges)
}

fn cycle_anomaly(g: &Graph, members: &[TxnId]) -> Anomaly {
    let m = members[0];
    let mut wit = Witness::default();
    let edges = g.path_edges(m, m, &mut wit);
    let path = g.path(m, m).expect("a cycle");
    for &t in &path {
        wit.txn(t);
    }
    let names: Vec<String> = path.iter().map(|&t| g.history.txns[t].name()).collect();
    let summary = format!(
        "happens-before has a cycle {} ({} transactions are on cycles with {})",
        names.join(" -> "),
        members.len(),
        g.history.txns[m].name()
    );
    anomaly(g, AnomalyKind::CyclicCausality, summary, wit, edges)
}
