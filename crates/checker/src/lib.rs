//! Offline consistency checker: proves that a recorded history satisfies a consistency level, or names an
//! anomaly with a minimal witness. Definitions, sources and the expectation matrix: `docs/CHECKER.md`.
//!
//! # Model
//!
//! A history (format: `snowline_core::history`) is first validated ([`validate`], rules in [`input`]). A
//! transaction is *committed* when it ended `ok` or `info` (or never completed): `info` writes may have
//! taken effect, `info` reads are unknown; `fail` transactions have no effect. Written values are unique, so
//! each read names the write it observed. A read of a key the transaction already wrote is *internal*; other
//! reads are *external*. A *version* of key `y` is the final write of `y` by a committed transaction, or the
//! initial version ⊥ (read as `null`).
//!
//! - *Session order* (SO): `A` SO `B` when both are committed transactions of one process and `A` was
//!   invoked first. After an `info`, the client continues as a new process: a new session.
//! - *Reads-from* (WR): `U` WR `T` when an external read of `T` returns a version `U` wrote.
//! - *Happens-before* (hb): the transitive closure of SO ∪ WR (Lamport; Didona et al., "Causal Consistency
//!   and Latency Optimality", §2.4). `T`'s *causal past* is `{W : W hb T}`.
//! - *Version order* (≺) of key `y`, for the visibility levels (the graph levels below quantify over
//!   version orders instead): ⊥ ≺ every version; `V ≺ W` when `V` hb `W` and not `W` hb `V` (session
//!   order of writers, write-read-write chains and every longer chain of SO and WR edges); for a key with a
//!   [`CommitOrder`] accepted by [`check_with_order`], `V ≺ W` when it lists `V` before `W` (it must agree
//!   with hb). No other order is assumed: concurrent versions are unordered.
//! - `T` *reads* `y = V` means an external read of `T` on key `y` returns version `V`. "`T` misses `W`"
//!   below means: `W` wrote `y`, `T` reads `y = V` and `V ≺ W`.
//!
//! # Anomalies
//!
//! Committed visibility (all levels; Adya's G1a is `aborted-read`, G1b `intermediate-read`):
//! - `thin-air-read`: a read returns a value never written to that key.
//! - `aborted-read`: an external read returns a value written by a `fail` transaction.
//! - `intermediate-read`: an external read returns a write that its transaction overwrote (wrote the same
//!   key again later).
//! - `internal-read`: a read of a key its own transaction already wrote does not return that transaction's
//!   latest write of the key, or a read returns a value its own transaction writes only later.
//!
//! Reads that show one of these take no further part in the checks. The next anomalies are about a
//! transaction `T` that reads `y = V`; each read is reported once, under the first of these names that
//! applies (in this order):
//! - `non-repeatable-read`: `T` reads `y` twice with different versions (not at `rc`).
//! - `fractured-read` (atomic visibility; Tomsic et al., Definition 3, "broken reads"): `T` reads some key
//!   from `U` and misses `U`'s own version of `y`.
//! - `causality-gap` (order-preserving visibility, Definition 2, with O = hb): `T` reads some key from `U` and
//!   misses a `W` with `W` hb `U`. The photo/ACL anomaly: Alice removes Bob from the ACL (`W`) then posts a
//!   photo (`U`); Bob's read-only transaction reads the photo and the old ACL.
//! - `read-your-writes`: `T` misses a `W` of its own session (`W` SO `T`).
//! - `monotonic-reads`: an earlier transaction `S` of `T`'s session read `y` from `X` (at `tcc`: read any key
//!   from `X`), and `T` misses `X`.
//! - `monotonic-writes`: an earlier transaction `S` of `T`'s session read from `X`, and `T` misses a `W` with
//!   `W` hb `X`, `W` in `X`'s process (the first such `X` the session read decides the name).
//! - `writes-follow-reads`: the same with `W` in another process than `X` (a chain through a read).
//!
//! Graph-wide:
//! - `cyclic-causality`: hb has a cycle (reported once per strongly connected component).
//! - `inconsistent-commit-order`: a reported [`CommitOrder`] lists `V` before `W` although `W` hb `V`.
//!
//! # Levels
//!
//! Levels are not a chain (for instance `si` and `us` are incomparable, and a lost update passes `tcc` but
//! fails every graph level); `docs/CHECKER.md` gives the expectation matrix of every anomaly class at every
//! level, checked by `tests/levels.rs`.
//!
//! Visibility levels, defined by what each read observes under the version order ≺ above:
//!
//! - `rc` — committed visibility (Tomsic et al. §2.2, Definition 1: every snapshot consists of committed
//!   versions): no `thin-air-read`, `aborted-read`, `intermediate-read`, `internal-read`. `info` writes
//!   may be read.
//! - `ra` — read atomic, atomic visibility (Definition 3): `rc`, no `non-repeatable-read`, no
//!   `fractured-read`.
//! - `causal-snapshot` — order-preserving visibility under hb (Definition 2; the causally consistent
//!   snapshot of Didona et al. §2.4: no `X ⇝ X' ⇝ Y` with `X` and `Y` read): `rc`, no
//!   `non-repeatable-read`, no `causality-gap`.
//! - `causal` — causal consistency (Didona et al. §2.4: "if a client reads Y and X ⇝ Y, any later read of
//!   x returns X or newer"): `causal-snapshot`, plus no `read-your-writes`, `monotonic-reads`,
//!   `monotonic-writes`, `writes-follow-reads` (together: no read misses a version in the causal past of the
//!   session, counted per version: reading one key of a multi-key write does not oblige later reads to see
//!   its other keys) and no `cyclic-causality`.
//! - `tcc` — transactional causal consistency: `causal` plus atomic visibility (`fractured-read`, and
//!   `monotonic-reads` counts every key of a transaction the session read from). Equivalently: no `T` misses
//!   any `W` with `W` hb `T`, and hb is acyclic.
//!
//! Dependency-graph levels ([`Level::GRAPH`]), defined by the existence of a total version order of each
//! key under which the graph of WR, WW and RW edges (over `ok` transactions and the `info` ones some read
//! observed), plus SO or RT edges where said, has no cycle of the kinds the level forbids. Each also
//! requires committed visibility and no `non-repeatable-read`.
//!
//! - `ser` — serializability (Adya's PL-3; Papadimitriou 1979): no cycle.
//! - `strict-ser` — strict serializability (Herlihy and Wing; SNOW §2): no cycle with RT edges (`A` RT `B`
//!   when `A` ended `ok` before `B` was invoked).
//! - `pos` — process-ordered serializability (SNOW §4.4): no cycle with SO edges.
//! - `si` — snapshot isolation (Cerone, Bernardi, Gotsman, CONCUR 2015, with the SESSION axiom;
//!   characterisation of Cerone and Gotsman, PODC 2016): `((SO ∪ WR ∪ WW) ; RW?)` acyclic, i.e. every
//!   cycle has two adjacent RW edges.
//! - `psi` — parallel snapshot isolation (Sovran et al.; same sources): `((SO ∪ WR ∪ WW)+ ; RW?)`
//!   irreflexive, i.e. every cycle has two or more RW edges.
//! - `nmsi` — non-monotonic snapshot isolation (Saeida Ardekani, Sutra, Shapiro, §III, Definitions 1–5,
//!   with write-conflict freedom counting the write-write dependency): every cycle without SO edges has two
//!   or more RW edges.
//! - `us` — update serializability (Adya's PL-3U; Garcia-Molina and Wiederhold): no cycle among update
//!   transactions and none through exactly one read-only transaction.
//!
//! Graph anomalies (each a cycle, reported once per strongly connected component, as the shortest cycle
//! found of the first class the level forbids: WW only, then WW and WR, then exactly one RW, then the
//! level's own rule; searched first without SO and RT edges): `g0` (WW only), `g1c` (WW and WR),
//! `lost-update` (two transactions read the same version of a key and both wrote it), `g-single` (exactly
//! one RW; read skew), `write-skew` (exactly two RW edges, nothing else), `read-only-anomaly` (adjacent RW
//! edges through a read-only transaction; Fekete et al. 2004), `long-fork` (two or more RW, none adjacent),
//! `g2-item` (other cycles with two or more RW), `non-monotonic-snapshot` (one RW edge `T -RW-> W`, entered
//! through SO into `T`: a session's snapshot goes back), `process-order-violation` (other cycles needing
//! SO), `real-time-violation` (cycles needing RT). `aborted-read` and `intermediate-read` are Adya's G1a and
//! G1b ([`AnomalyKind::from_name`] accepts those names).
//!
//! # Version order of the graph levels
//!
//! A reported commit order ([`check_with_order`], or [`check_with_versions`] from the `version` fields of a
//! history whose metadata says `version_order`) is verified against hb and used. Otherwise the checker
//! uses only sound inferences: the initial version first; read-modify-write (a transaction that reads
//! `x=V` and then writes `x` orders `V` before its write); hb for `pos`, `si`, `psi`; real time for
//! `strict-ser`. A forbidden cycle under those is certain. If writers remain unordered, it adds what reads
//! imply (a writer that must precede a transaction reading an older version precedes that version), then
//! looks for a completion under which the level holds: a greedy earliest-deadline-first serial schedule,
//! then a conflict-directed search that is exact within a budget. [`Verdict::basis`] says which case the
//! verdict rests on; when the budget runs out the verdict is `ok` with [`Verdict::inconclusive`] set.
//!
//! Complexity: visibility levels O((transactions + reads) · processes · log) time, O(transactions ·
//! processes) memory, the per-read checks testing only the latest writer of each process under a
//! vector-clock frontier. Graph levels: linear graph construction (real time through one auxiliary node
//! per distinct completion time), Tarjan's components, and breadth-first searches inside non-trivial
//! components only; a valid history whose version order is known or completed by the schedule is checked
//! in near-linear time (`cargo run --release -p snowline-checker --example checker_bench`).

pub mod anomaly;
mod checks;
mod cycles;
pub mod graph;
pub mod input;
pub mod level;
pub mod multicast;

pub use anomaly::{Anomaly, AnomalyKind, Edge, EdgeKind, OpRef, Verdict};
pub use graph::Graph;
pub use input::{CommitOrder, History, InputError, Txn, TxnId, TxnStatus, validate};
pub use level::{Level, UnknownLevel};

use snowline_core::history::HistoryEvent;

/// Validate, then check. An invalid history yields a verdict with one `invalid-history` anomaly; callers
/// that must tell the two apart (the CLI exits 2 on invalid input) call [`validate`] first.
pub fn check(events: &[HistoryEvent], level: Level) -> Verdict {
    match validate(events) {
        Ok(history) => check_history(&history, level),
        Err(e) => invalid(level, e),
    }
}

/// Check a validated history.
pub fn check_history(history: &History, level: Level) -> Verdict {
    let graph = Graph::new(history);
    let mut rep = checks::Reporter::new(level);
    run(&graph, level, &mut rep);
    rep.finish()
}

fn run(graph: &Graph, level: Level, rep: &mut checks::Reporter) {
    if level.is_graph() {
        cycles::run(graph, level, rep);
        settle_by_strict_ser(graph, level, rep);
    } else {
        checks::run(graph, level, rep);
    }
}

/// A `ser`, `pos` or `us` verdict left inconclusive (the search for a version order ran out of budget) is
/// settled when the history is proven strictly serializable: a serial order that respects real time is a
/// serial order (`ser`), respects each process's order (`pos`: a process runs one transaction at a time)
/// and serializes the updates (`us`). Real time orders many writers that `ser` alone leaves unordered,
/// which is what makes `strict-ser` cheap to prove on the histories of strong protocols.
fn settle_by_strict_ser(graph: &Graph, level: Level, rep: &mut checks::Reporter) {
    if !rep.inconclusive || !matches!(level, Level::Ser | Level::Pos | Level::Us) {
        return;
    }
    let mut strict = checks::Reporter::new(Level::StrictSer);
    cycles::run(graph, Level::StrictSer, &mut strict);
    let strict = strict.finish();
    if strict.ok && !strict.inconclusive {
        rep.inconclusive = false;
        rep.basis = Some(format!(
            "the history is strictly serializable ({}), which implies {level}",
            strict.basis.as_deref().unwrap_or("proven at strict-ser").trim_end_matches('.')
        ));
    }
}

/// The per-key commit order implied by the history's `version` fields (see
/// [`History::commit_order_from_versions`]). Use it for histories whose metadata line says
/// `version_order: true`, with [`check_with_order`] or [`check_with_versions`].
pub fn commit_order_from_versions(history: &History) -> CommitOrder {
    history.commit_order_from_versions()
}

/// Check a validated history whose metadata line says `version_order: true`: the version order of each key
/// is taken from the protocol's commit versions ([`commit_order_from_versions`]), verified against
/// happens-before (`inconsistent-commit-order`), and used instead of an inferred one.
pub fn check_with_versions(history: &History, level: Level) -> Verdict {
    let order = history.commit_order_from_versions();
    check_with_order(history, level, &order).expect("an order built from the history's own versions is well formed")
}

/// Check a validated history against a level, with a per-key commit order reported by the protocol. The
/// order is verified, not trusted (see [`CommitOrder`]); a malformed order is an [`InputError`].
pub fn check_with_order(history: &History, level: Level, order: &CommitOrder) -> Result<Verdict, InputError> {
    let mut graph = Graph::new(history);
    let mut rep = checks::Reporter::new(level);
    let found = graph.apply_commit_order(order)?;
    if level.uses_version_order() {
        for a in found {
            rep.add(None, a.name, || a);
        }
    }
    run(&graph, level, &mut rep);
    Ok(rep.finish())
}

fn invalid(level: Level, e: InputError) -> Verdict {
    let mut rep = checks::Reporter::new(level);
    rep.add(None, AnomalyKind::InvalidHistory, || Anomaly {
        name: AnomalyKind::InvalidHistory,
        summary: e.to_string(),
        ops: Vec::new(),
        edges: Vec::new(),
    });
    rep.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use snowline_core::history::{EventType, HistoryOp, OpKind};

    /// One transaction: its process and its micro-operations `(read?, key, value)`.
    type Spec<'a> = (u64, &'a [(bool, &'a str, &'a str)]);

    /// Transactions one after another (none overlap in real time).
    fn serial(txns: &[Spec<'_>]) -> History {
        let mut events = Vec::new();
        for (p, ops) in txns {
            for kind in [EventType::Invoke, EventType::Ok] {
                let value = ops
                    .iter()
                    .map(|&(read, key, v)| {
                        let shown = (kind == EventType::Ok || !read).then(|| v.into());
                        HistoryOp(if read { OpKind::Read } else { OpKind::Write }, key.into(), shown)
                    })
                    .collect();
                let index = events.len() as u64;
                events.push(HistoryEvent {
                    index,
                    process: *p,
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
        }
        validate(&events).unwrap()
    }

    /// What the budget-bound search of a large history would leave: `ok`, inconclusive.
    fn settled(history: &History, level: Level) -> checks::Reporter {
        let mut rep = checks::Reporter::new(level);
        rep.inconclusive = true;
        settle_by_strict_ser(&Graph::new(history), level, &mut rep);
        rep
    }

    #[test]
    fn an_inconclusive_ser_verdict_is_settled_by_a_proof_of_strict_ser_and_only_by_one() {
        // Strictly serializable: process 2 reads what process 1 wrote before it started.
        let strict = serial(&[(1, &[(false, "x", "1")]), (2, &[(true, "x", "1"), (false, "y", "2")])]);
        for level in [Level::Ser, Level::Pos, Level::Us] {
            let rep = settled(&strict, level);
            assert!(!rep.inconclusive, "{level}");
            assert!(rep.basis.as_deref().is_some_and(|b| b.contains(&format!("implies {level}"))), "{:?}", rep.basis);
        }
        // Serializable but a stale read (not strict): the verdict stays inconclusive.
        let stale = serial(&[
            (1, &[(false, "x", "1")]),
            (2, &[(true, "x", "1")]),
            (1, &[(false, "x", "2")]),
            (3, &[(true, "x", "1")]),
        ]);
        assert!(check_history(&stale, Level::Ser).ok);
        assert!(!check_history(&stale, Level::StrictSer).ok);
        assert!(settled(&stale, Level::Ser).inconclusive);
        // Other levels are not settled this way.
        assert!(settled(&strict, Level::Si).inconclusive);
    }
}
