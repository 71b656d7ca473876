//! The brute-force bounded checker: an independent witness for the rules.
//!
//! For one pair (invariant *I*, transaction *T*) and the workload *W*, it enumerates, within a bound:
//!
//! 1. every ancestor state of the tables *I* reads: each table holds 0 to [`Bound::max_rows`] rows, each
//!    column a value of [`Bound::values`] plus, for a `CHECK`, its constant ± 2 (or NULL where the column is
//!    nullable), keeping those where *I* and the schema's keys over the same columns hold;
//! 2. every left branch: *T* applied to the ancestor with every assignment of the non-negative values to
//!    its parameters, keeping the results where *I* and those keys hold; every right branch likewise for
//!    each transaction of *W* (including *T*);
//! 3. every merge of a left and a right branch, and checks *I* on it.
//!
//! Merge semantics (the paper's §3 and §5): rows are identified by a hidden row id and merged by set union;
//! a row deleted on either side is gone; `ON DELETE CASCADE` also deletes, after the merge, rows left
//! referencing a deleted parent; a `@counter` column merges as ancestor + both branches' changes; any other
//! column changed on both sides takes one side's value (last writer wins; both choices are tried). Ids asked
//! for with `@unique-any` come from each branch's own namespace (branch 1: 101, 102, ...; branch 2: 201, ...);
//! AUTO_INCREMENT columns left out of an insert take the branch's local maximum + 1.
//!
//! Statements on tables that *I* does not read cannot change *I* and are skipped, and so are columns that
//! neither *I* nor a `WHERE` reads (with their parameters). Secondary indexes
//! (`@index`) are maintained by the database and recomputed by merge, so the checker holds them true by
//! construction. Views are checked over whole tables (no grouping). The default bound is values {0, 1, 2},
//! at most 2 rows per table in the ancestor, one transaction per branch; a bound that spans too many states
//! answers [`Outcome::Inconclusive`] (never "confluent"), and [`Bound::smaller`] gives the fallbacks.

use crate::model::{Aggregate, Invariant, InvariantKind, Operand, Pred, PredOp, Schema, SetValue, Stmt, Transaction};
use serde::Serialize;
use std::collections::{BTreeMap, HashSet};

/// How far the checker looks.
#[derive(Debug, Clone)]
pub struct Bound {
    /// The values columns and parameters range over.
    pub values: Vec<i64>,
    /// The most rows a table holds in the ancestor state.
    pub max_rows: usize,
    /// Give up (inconclusive) after this many merges.
    pub max_merges: u64,
    /// Give up (inconclusive) when the bound spans more ancestor states than this.
    pub max_ancestors: u128,
    /// Give up (inconclusive) when a transaction has more parameter assignments than this.
    pub max_assignments: u128,
}

impl Default for Bound {
    fn default() -> Bound {
        Bound {
            values: vec![0, 1, 2],
            max_rows: 2,
            max_merges: 300_000,
            max_ancestors: 100_000,
            max_assignments: 20_000,
        }
    }
}

impl Bound {
    /// Smaller bounds to fall back on when `self` spans too much: one row per table, then values {0, 1} (with
    /// a larger merge budget, since it is the last resort).
    pub fn smaller(&self) -> Vec<Bound> {
        let one_row = Bound { max_rows: 1, ..self.clone() };
        let binary = Bound { values: vec![0, 1], max_rows: 1, max_merges: self.max_merges * 8, ..self.clone() };
        vec![one_row, binary]
    }
}

/// A database state as shown in a counterexample: table → rows, each row column → value (`null` for NULL).
pub type ShownState = BTreeMap<String, Vec<BTreeMap<String, Option<i64>>>>;

/// A violating merge: the ancestor, the two branches and their merge.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Counterexample {
    /// The common ancestor (I holds).
    pub ancestor: ShownState,
    /// The transaction the left branch ran.
    pub left_transaction: String,
    /// The left branch's state (I holds).
    pub left: ShownState,
    /// The transaction the right branch ran.
    pub right_transaction: String,
    /// The right branch's state (I holds).
    pub right: ShownState,
    /// The merge (I fails).
    pub merged: ShownState,
}

/// What the checker found.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// No violating merge within the bound.
    NoCounterexample,
    /// A violating merge.
    Counterexample(Box<Counterexample>),
    /// The bound's merge budget ran out first.
    Inconclusive,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Row {
    rid: u32,
    vals: Vec<Option<i64>>,
}

type State = Vec<Vec<Row>>;

struct PTable {
    name: String,
    cols: Vec<String>,
    counter: Vec<bool>,
    nullable: Vec<bool>,
    auto_inc: Vec<bool>,
    unique_any: Vec<bool>,
}

struct Proj<'a> {
    inv: &'a Invariant,
    /// The schema's keys (uniqueness invariants) over projected columns: branches must keep them too, so a
    /// `WHERE id = ?` on a primary key selects one row.
    others: Vec<&'a Invariant>,
    /// Column values: the bound's, plus each constant of a CHECK on the invariant ± 2.
    values: Vec<i64>,
    /// Parameter values: the non-negative column values (`c + ?` is an increment).
    params: Vec<i64>,
    tables: Vec<PTable>,
    /// Cascading foreign keys among projected tables: (child, child cols, parent, parent cols).
    cascades: Vec<(usize, Vec<usize>, usize, Vec<usize>)>,
}

impl Proj<'_> {
    fn t(&self, name: &str) -> Option<usize> {
        self.tables.iter().position(|t| t.name == name)
    }
    fn c(&self, t: usize, col: &str) -> Option<usize> {
        self.tables[t].cols.iter().position(|c| c == col)
    }
}

/// Checks one pair within `bound`.
pub fn check<'a>(
    schema: &'a Schema,
    inv: &'a Invariant,
    t: &Transaction,
    workload: &[Transaction],
    bound: &Bound,
) -> Outcome {
    let mut proj = project(schema, inv, std::iter::once(t).chain(workload));
    let mut values = bound.values.clone();
    if let InvariantKind::Check { value, .. } | InvariantKind::Counter { value, .. } = &inv.kind {
        values.extend(value - 2..=value + 2);
    }
    values.sort();
    values.dedup();
    proj.params = values.iter().copied().filter(|v| *v >= 0).collect();
    proj.values = values;
    let assignments = |u: &Transaction| (proj.params.len() as u128).saturating_pow(param_count(&proj, u) as u32);
    if ancestor_count(&proj, bound) > bound.max_ancestors
        || std::iter::once(t).chain(workload).any(|u| assignments(u) > bound.max_assignments)
    {
        return Outcome::Inconclusive;
    }
    let ancestors = ancestors(&proj, bound);
    let mut merges = 0u64;
    for anc in ancestors {
        let lefts = outcomes(&proj, t, &anc, 1);
        if lefts.is_empty() {
            continue;
        }
        for u in workload {
            let rights = outcomes(&proj, u, &anc, 2);
            for l in &lefts {
                for r in &rights {
                    for right_wins in [true, false] {
                        merges += 1;
                        if merges > bound.max_merges {
                            return Outcome::Inconclusive;
                        }
                        let m = merge(&proj, &anc, l, r, right_wins);
                        if !holds(&proj, proj.inv, &m) {
                            return Outcome::Counterexample(Box::new(Counterexample {
                                ancestor: show(&proj, &anc),
                                left_transaction: t.name.clone(),
                                left: show(&proj, l),
                                right_transaction: u.name.clone(),
                                right: show(&proj, r),
                                merged: show(&proj, &m),
                            }));
                        }
                    }
                }
            }
        }
    }
    Outcome::NoCounterexample
}

fn project<'a, 'b>(schema: &'a Schema, inv: &'a Invariant, txns: impl Iterator<Item = &'b Transaction>) -> Proj<'a> {
    let names = inv.kind.tables();
    let mut cols: Vec<Vec<String>> = names.iter().map(|_| Vec::new()).collect();
    let mut add = |t: &str, c: &str| {
        if let Some(i) = names.iter().position(|n| n == t)
            && !cols[i].iter().any(|x| x == c)
        {
            cols[i].push(c.to_string());
        }
    };
    for c in inv.kind.columns() {
        add(&c.table, &c.column);
    }
    let cascade_fks: Vec<_> = schema
        .invariants
        .iter()
        .filter_map(|i| match &i.kind {
            InvariantKind::ForeignKey { table, columns, parent, parent_columns, cascade: true }
                if names.contains(table) && names.contains(parent) =>
            {
                Some((table.clone(), columns.clone(), parent.clone(), parent_columns.clone()))
            }
            _ => None,
        })
        .collect();
    for (t, cs, p, ps) in &cascade_fks {
        cs.iter().for_each(|c| add(t, c));
        ps.iter().for_each(|c| add(p, c));
    }
    // Columns only written (inserted or set) and never read by the invariant or a WHERE cannot change
    // whether the invariant holds: they are left out, and so are their parameters.
    for tx in txns {
        for s in &tx.stmts {
            match s {
                Stmt::Update { table, filter, .. } | Stmt::Delete { table, filter, .. } => {
                    filter.iter().for_each(|p| add(table, &p.column))
                }
                Stmt::Insert { .. } | Stmt::Select { .. } => {}
            }
        }
    }
    let tables: Vec<PTable> = names
        .iter()
        .zip(cols)
        .map(|(n, cols)| {
            let t = schema.table(n).expect("known table");
            let col = |c: &String| t.column(c).expect("known column");
            PTable {
                name: n.clone(),
                counter: cols.iter().map(|c| col(c).counter).collect(),
                nullable: cols.iter().map(|c| !col(c).not_null && !col(c).counter).collect(),
                auto_inc: cols.iter().map(|c| col(c).auto_increment).collect(),
                unique_any: cols.iter().map(|c| col(c).unique_any).collect(),
                cols,
            }
        })
        .collect();
    let others = schema
        .invariants
        .iter()
        .filter(|o| {
            !std::ptr::eq(*o, inv)
                && matches!(o.kind, InvariantKind::Unique { .. })
                && o.kind.columns().iter().all(|c| {
                    names.iter().position(|n| *n == c.table).is_some_and(|i| tables[i].cols.contains(&c.column))
                })
        })
        .collect();
    let mut proj = Proj { inv, others, values: Vec::new(), params: Vec::new(), tables, cascades: Vec::new() };
    for (t, cs, p, ps) in cascade_fks {
        let (ti, pi) = (proj.t(&t).unwrap(), proj.t(&p).unwrap());
        let cs = cs.iter().map(|c| proj.c(ti, c).unwrap()).collect();
        let ps = ps.iter().map(|c| proj.c(pi, c).unwrap()).collect();
        proj.cascades.push((ti, cs, pi, ps));
    }
    proj
}

/// All multisets of at most `k` items from `0..n`, as sorted index vectors, smallest first.
fn multisets(n: usize, k: usize) -> Vec<Vec<usize>> {
    let mut out = vec![vec![]];
    let mut frontier = vec![vec![]];
    for _ in 0..k {
        let mut next = Vec::new();
        for m in &frontier {
            let start = m.last().copied().unwrap_or(0);
            for i in start..n {
                let mut m2: Vec<usize> = m.clone();
                m2.push(i);
                next.push(m2);
            }
        }
        out.extend(next.iter().cloned());
        frontier = next;
    }
    out
}

fn ancestors(proj: &Proj, bound: &Bound) -> Vec<State> {
    let per_table: Vec<Vec<Vec<Row>>> = proj
        .tables
        .iter()
        .map(|t| {
            let mut rows: Vec<Vec<Option<i64>>> = vec![vec![]];
            for nullable in &t.nullable {
                let mut dom: Vec<Option<i64>> = proj.values.iter().map(|v| Some(*v)).collect();
                if *nullable {
                    dom.push(None);
                }
                rows = rows.iter().flat_map(|r| dom.iter().map(move |v| [r.clone(), vec![*v]].concat())).collect();
            }
            multisets(rows.len(), bound.max_rows)
                .into_iter()
                .map(|m| m.iter().enumerate().map(|(i, &r)| Row { rid: i as u32, vals: rows[r].clone() }).collect())
                .collect()
        })
        .collect();
    let mut states: Vec<State> = vec![vec![]];
    for options in &per_table {
        states =
            states.iter().flat_map(|s| options.iter().map(move |o| [s.clone(), vec![o.clone()]].concat())).collect();
    }
    // Smaller ancestors first: their counterexamples are the easiest to read.
    states.sort_by_key(|s| s.iter().map(|t| t.len()).sum::<usize>());
    states.into_iter().filter(|s| valid(proj, s)).collect()
}

/// A statement compiled against the projection, with its parameter slots.
fn param_count(proj: &Proj, t: &Transaction) -> usize {
    let count = |o: &Operand| usize::from(*o == Operand::Param);
    let filter_params = |filter: &[Pred]| {
        filter
            .iter()
            .map(|p| match &p.op {
                PredOp::Cmp(_, o) => count(o),
                PredOp::IsNull(_) => 0,
            })
            .sum::<usize>()
    };
    let mut n = 0;
    for s in &t.stmts {
        match s {
            Stmt::Insert { table, rows, .. } => {
                let Some(ti) = proj.t(table) else { continue };
                n += rows
                    .iter()
                    .flatten()
                    .filter(|(c, _)| proj.c(ti, c).is_some())
                    .map(|(_, o)| count(o))
                    .sum::<usize>();
            }
            Stmt::Update { table, sets, filter, .. } => {
                let Some(ti) = proj.t(table) else { continue };
                n += sets
                    .iter()
                    .filter(|(c, _)| proj.c(ti, c).is_some())
                    .map(|(_, v)| match v {
                        SetValue::Assign(o) | SetValue::Add { by: o, .. } => count(o),
                    })
                    .sum::<usize>();
                n += filter_params(filter);
            }
            Stmt::Delete { table, filter, .. } if proj.t(table).is_some() => n += filter_params(filter),
            _ => {}
        }
    }
    n
}

/// How many ancestor states the bound enumerates before filtering, saturating.
fn ancestor_count(proj: &Proj, bound: &Bound) -> u128 {
    let mut total: u128 = 1;
    for t in &proj.tables {
        let rows: u128 = t.nullable.iter().map(|&n| proj.values.len() as u128 + u128::from(n)).product();
        // multisets of size <= k from `rows` items: sum over j of C(rows + j - 1, j)
        let mut sum: u128 = 1;
        let mut term: u128 = 1;
        for j in 1..=bound.max_rows as u128 {
            term = term.saturating_mul(rows + j - 1) / j;
            sum = sum.saturating_add(term);
        }
        total = total.saturating_mul(sum);
    }
    total
}

fn outcomes(proj: &Proj, t: &Transaction, anc: &State, tag: u32) -> Vec<State> {
    let k = param_count(proj, t);
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    let mut idx = vec![0usize; k];
    loop {
        let params: Vec<i64> = idx.iter().map(|&i| proj.params[i]).collect();
        let s = run(proj, t, anc, tag, &params);
        if s != *anc && valid(proj, &s) && seen.insert(s.clone()) {
            out.push(s);
        }
        // next assignment
        let mut i = 0;
        loop {
            if i == k {
                return out;
            }
            idx[i] += 1;
            if idx[i] < proj.params.len() {
                break;
            }
            idx[i] = 0;
            i += 1;
        }
    }
}

struct Run<'p> {
    params: std::slice::Iter<'p, i64>,
    next_rid: u32,
    next_fresh: i64,
}

impl Run<'_> {
    fn val(&mut self, o: &Operand) -> Option<i64> {
        match o {
            Operand::Param => self.params.next().copied(),
            Operand::Const(v) => Some(*v),
            Operand::Null | Operand::Default => None,
        }
    }
}

fn matches(row: &Row, filter: &[(usize, PredOp, Option<i64>)]) -> bool {
    filter.iter().all(|(c, op, v)| match (op, row.vals[*c]) {
        (PredOp::IsNull(n), x) => x.is_none() == *n,
        (PredOp::Cmp(op, _), Some(x)) => v.is_some_and(|v| op.holds(x, v)),
        (PredOp::Cmp(..), None) => false,
    })
}

fn compile_filter(proj: &Proj, t: usize, filter: &[Pred], r: &mut Run) -> Vec<(usize, PredOp, Option<i64>)> {
    filter
        .iter()
        .map(|p| {
            let v = match &p.op {
                PredOp::Cmp(_, o) => r.val(o),
                PredOp::IsNull(_) => None,
            };
            (proj.c(t, &p.column).expect("projected"), p.op, v)
        })
        .collect()
}

fn run(proj: &Proj, tx: &Transaction, anc: &State, tag: u32, params: &[i64]) -> State {
    let mut s = anc.clone();
    let mut r = Run { params: params.iter(), next_rid: tag * 1000, next_fresh: tag as i64 * 100 + 1 };
    for st in &tx.stmts {
        match st {
            Stmt::Insert { table, rows, .. } => {
                let Some(t) = proj.t(table) else { continue };
                let pt = &proj.tables[t];
                for spec in rows {
                    let mut vals = vec![None; pt.cols.len()];
                    for (ci, c) in pt.cols.iter().enumerate() {
                        let op = spec.iter().find(|(n, _)| n == c).map(|(_, o)| *o);
                        vals[ci] = if pt.unique_any[ci] && op != Some(Operand::Null) {
                            // The parameter is drawn but unused: the replica picks the id.
                            if let Some(o) = op {
                                r.val(&o);
                            }
                            r.next_fresh += 1;
                            Some(r.next_fresh - 1)
                        } else if pt.auto_inc[ci] && matches!(op, None | Some(Operand::Default)) {
                            Some(s[t].iter().filter_map(|row| row.vals[ci]).max().unwrap_or(0) + 1)
                        } else {
                            op.and_then(|o| r.val(&o))
                        };
                    }
                    r.next_rid += 1;
                    s[t].push(Row { rid: r.next_rid, vals });
                }
            }
            Stmt::Update { table, sets, filter, .. } => {
                let Some(t) = proj.t(table) else { continue };
                let sets: Vec<(usize, SetValue, Option<i64>)> = sets
                    .iter()
                    .filter_map(|(c, v)| {
                        let o = match v {
                            SetValue::Assign(o) | SetValue::Add { by: o, .. } => o,
                        };
                        Some((proj.c(t, c)?, *v, r.val(o)))
                    })
                    .collect();
                let f = compile_filter(proj, t, filter, &mut r);
                for row in s[t].iter_mut() {
                    if matches(row, &f) {
                        for (c, v, x) in &sets {
                            row.vals[*c] = match v {
                                SetValue::Assign(_) => *x,
                                SetValue::Add { increment, .. } => match (row.vals[*c], x) {
                                    (Some(old), Some(by)) => Some(if *increment { old + by } else { old - by }),
                                    _ => None,
                                },
                            };
                        }
                    }
                }
            }
            Stmt::Delete { table, filter, .. } => {
                let Some(t) = proj.t(table) else { continue };
                let f = compile_filter(proj, t, filter, &mut r);
                let removed: Vec<Row> = s[t].iter().filter(|row| matches(row, &f)).cloned().collect();
                s[t].retain(|row| !matches(row, &f));
                cascade(proj, &mut s, t, removed);
            }
            Stmt::Select { .. } => {}
        }
    }
    s
}

/// `ON DELETE CASCADE`: deletes the rows that referenced the `removed` rows of table `t` and now reference
/// no row, and so on down.
fn cascade(proj: &Proj, s: &mut State, t: usize, removed: Vec<Row>) {
    let mut work = vec![(t, removed)];
    while let Some((pt, removed)) = work.pop() {
        for (ct, cc, p, pc) in &proj.cascades {
            if *p != pt {
                continue;
            }
            let key = |r: &Row, cols: &[usize]| cols.iter().map(|&c| r.vals[c]).collect::<Vec<Option<i64>>>();
            let gone: HashSet<Vec<Option<i64>>> = removed.iter().map(|r| key(r, pc)).collect();
            let live: HashSet<Vec<Option<i64>>> = s[pt].iter().map(|r| key(r, pc)).collect();
            let doomed = |r: &Row| {
                let k = key(r, cc);
                gone.contains(&k) && !live.contains(&k)
            };
            let children: Vec<Row> = s[*ct].iter().filter(|r| doomed(r)).cloned().collect();
            if !children.is_empty() {
                s[*ct].retain(|r| !doomed(r));
                work.push((*ct, children));
            }
        }
    }
}

fn merge(proj: &Proj, anc: &State, a: &State, b: &State, b_wins: bool) -> State {
    let mut out = Vec::new();
    for (t, pt) in proj.tables.iter().enumerate() {
        let mut rows = Vec::new();
        for o in &anc[t] {
            let (Some(ra), Some(rb)) = (a[t].iter().find(|r| r.rid == o.rid), b[t].iter().find(|r| r.rid == o.rid))
            else {
                continue;
            };
            let vals = (0..pt.cols.len())
                .map(|c| {
                    let (ov, av, bv) = (o.vals[c], ra.vals[c], rb.vals[c]);
                    if pt.counter[c]
                        && let (Some(ov), Some(av), Some(bv)) = (ov, av, bv)
                    {
                        return Some(ov + (av - ov) + (bv - ov));
                    }
                    match (av != ov, bv != ov) {
                        (true, true) => {
                            if b_wins {
                                bv
                            } else {
                                av
                            }
                        }
                        (true, false) => av,
                        _ => bv,
                    }
                })
                .collect();
            rows.push(Row { rid: o.rid, vals });
        }
        for side in [a, b] {
            rows.extend(side[t].iter().filter(|r| !anc[t].iter().any(|o| o.rid == r.rid)).cloned());
        }
        out.push(rows);
    }
    for t in 0..proj.tables.len() {
        let removed: Vec<Row> = anc[t].iter().filter(|o| !out[t].iter().any(|r| r.rid == o.rid)).cloned().collect();
        if !removed.is_empty() {
            cascade(proj, &mut out, t, removed);
        }
    }
    out
}

/// Whether a branch state is valid: the invariant and the other invariants over its columns hold.
fn valid(proj: &Proj, s: &State) -> bool {
    holds(proj, proj.inv, s) && proj.others.iter().all(|o| holds(proj, o, s))
}

/// Whether invariant `inv` (over projected columns) holds in `s`.
fn holds(proj: &Proj, inv: &Invariant, s: &State) -> bool {
    let col = |t: &str, c: &str| {
        let ti = proj.t(t).expect("projected table");
        (ti, proj.c(ti, c).expect("projected column"))
    };
    match &inv.kind {
        InvariantKind::Unique { table, columns } => {
            let t = proj.t(table).unwrap();
            let cs: Vec<usize> = columns.iter().map(|c| col(table, c).1).collect();
            let mut seen = HashSet::new();
            s[t].iter().all(|r| {
                let key: Vec<Option<i64>> = cs.iter().map(|&c| r.vals[c]).collect();
                key.iter().any(|v| v.is_none()) || seen.insert(key)
            })
        }
        InvariantKind::NotNull { table, column } => {
            let (t, c) = col(table, column);
            s[t].iter().all(|r| r.vals[c].is_some())
        }
        InvariantKind::Check { table, column, op, value } | InvariantKind::Counter { table, column, op, value } => {
            let (t, c) = col(table, column);
            s[t].iter().all(|r| r.vals[c].is_none_or(|v| op.holds(v, *value)))
        }
        InvariantKind::ForeignKey { table, columns, parent, parent_columns, .. } => {
            let ct = proj.t(table).unwrap();
            let pt = proj.t(parent).unwrap();
            let cc: Vec<usize> = columns.iter().map(|c| col(table, c).1).collect();
            let pc: Vec<usize> = parent_columns.iter().map(|c| col(parent, c).1).collect();
            s[ct].iter().all(|r| {
                let key: Vec<Option<i64>> = cc.iter().map(|&c| r.vals[c]).collect();
                key.iter().any(|v| v.is_none())
                    || s[pt].iter().any(|p| pc.iter().map(|&c| p.vals[c]).collect::<Vec<_>>() == key)
            })
        }
        InvariantKind::AutoIncrement { table, column, counter } => {
            let (t, c) = col(table, column);
            let vals: Vec<i64> = s[t].iter().filter_map(|r| r.vals[c]).collect();
            let distinct: HashSet<i64> = vals.iter().copied().collect();
            if distinct.len() != vals.len() {
                return false;
            }
            let (Some(min), Some(max)) = (vals.iter().min(), vals.iter().max()) else { return true };
            if max - min + 1 != vals.len() as i64 {
                return false;
            }
            match counter {
                Some(g) => {
                    let (gt, gc) = col(&g.table, &g.column);
                    s[gt].iter().all(|r| r.vals[gc].is_none_or(|v| v - 1 == *max))
                }
                None => true,
            }
        }
        InvariantKind::Index { .. } => true,
        InvariantKind::View { columns, base, aggregate, filter } => {
            let lhs: i64 = columns
                .iter()
                .map(|c| {
                    let (t, ci) = col(&c.table, &c.column);
                    s[t].iter().map(|r| r.vals[ci].unwrap_or(0)).sum::<i64>()
                })
                .sum();
            let bt = proj.t(base).unwrap();
            let keep = |r: &&Row| filter.as_ref().is_none_or(|f| r.vals[col(base, &f.column).1].is_none() == f.is_null);
            let rhs: i64 = match aggregate {
                Aggregate::Sum(x) => {
                    let xc = col(base, x).1;
                    s[bt].iter().filter(keep).map(|r| r.vals[xc].unwrap_or(0)).sum()
                }
                Aggregate::Count => s[bt].iter().filter(keep).count() as i64,
            };
            lhs == rhs
        }
    }
}

fn show(proj: &Proj, s: &State) -> ShownState {
    proj.tables
        .iter()
        .zip(s)
        .map(|(pt, rows)| {
            let rows = rows.iter().map(|r| pt.cols.iter().cloned().zip(r.vals.iter().copied()).collect()).collect();
            (pt.name.clone(), rows)
        })
        .collect()
}
