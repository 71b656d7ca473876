//! The rules: the paper's Table 2 (Bailis et al., VLDB 2015, §5) and the rules its text adds, as syntactic
//! checks of one transaction template against one invariant.
//!
//! A pair (invariant *I*, transaction *T*) is judged I-confluent when every merge of two I-valid branches
//! from a common I-valid ancestor, one running *T* and the other running *T* or any other transaction of the
//! workload, is I-valid. Most rules look at *T* alone; the foreign-key, auto-increment and view rules also
//! look at what the rest of the workload does (a plain delete of a parent is only unsafe when something can
//! insert a child concurrently, which Table 2 takes for granted).
//!
//! Table 2 as printed repeats the rows `> / Increment / Yes` and `< / Decrement / No`, which contradicts its
//! own §5.2 text. The rules follow the text: "a row-level `>` threshold invariant is I-confluent for
//! increment and update but not decrement, while a row-level `<` threshold invariant is I-confluent for
//! decrement and update but not increment", and "we can similarly guarantee equality but not in-equality for
//! counters supporting increment and decrement" (so `counter = k` holds: a branch can only keep it by a
//! zero change; `counter <> k` does not).

use crate::model::{Aggregate, CmpOp, Invariant, InvariantKind, Operand, Schema, SetValue, Stmt, Transaction};

/// A rule's decision for one pair.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    /// I-confluent?
    pub confluent: bool,
    /// The rule's stable identifier (see docs/ANALYZER.md for the list).
    pub rule: &'static str,
    /// One sentence of reasoning.
    pub why: String,
}

/// Rules whose "not I-confluent" a deferred id assignment resolves: one atomic increment at the owner of the
/// generator (the paper's §6 treatment of `D_NEXT_O_ID`).
pub const OWNER_INCREMENT_RULES: &[&str] = &["auto-increment-insert", "auto-increment-delete", "uniqueness-sequence"];

/// A deliberately wrong rule, for testing that the bounded checker catches a broken rule set.
#[doc(hidden)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mutation {
    /// Treat a `>` threshold on a counter as safe under decrements (the paper says it is not).
    CounterDecrementSafe,
    /// Treat inserting a specific unique value as safe (the paper says it is not).
    UniqueSpecificSafe,
}

fn yes(rule: &'static str, why: impl Into<String>) -> Decision {
    Decision { confluent: true, rule, why: why.into() }
}

fn no(rule: &'static str, why: impl Into<String>) -> Decision {
    Decision { confluent: false, rule, why: why.into() }
}

/// Decides one pair.
pub fn decide(schema: &Schema, inv: &Invariant, t: &Transaction, workload: &[Transaction]) -> Decision {
    decide_with(schema, inv, t, workload, None)
}

/// [`decide`], with an optional deliberate mistake (tests only).
#[doc(hidden)]
pub fn decide_with(
    schema: &Schema,
    inv: &Invariant,
    t: &Transaction,
    workload: &[Transaction],
    mutation: Option<Mutation>,
) -> Decision {
    let touches = inv.kind.tables().iter().any(|tb| t.stmts.iter().any(|s| s.written_table() == Some(tb)));
    match &inv.kind {
        InvariantKind::Unique { table, columns } => unique(schema, table, columns, t, workload, mutation),
        InvariantKind::NotNull { .. } | InvariantKind::Check { .. } => yes(
            "per-record",
            "a per-record equality/inequality holds on every row of either branch, and a merge only contains rows \
             of the branches (Table 2: equality and inequality, any operation)",
        ),
        InvariantKind::Counter { table, column, op, value } => counter(t, table, column, *op, *value, mutation),
        InvariantKind::ForeignKey { table, columns, parent, parent_columns, cascade } => {
            let fk = Fk { child: table, columns, parent, parent_columns, cascade: *cascade };
            foreign_key(&fk, t, workload)
        }
        InvariantKind::AutoIncrement { table, column, counter } => {
            auto_increment(schema, table, column, counter.as_ref().map(|c| (&c.table, &c.column)), t, workload)
        }
        InvariantKind::Index { .. } => yes(
            "secondary-index",
            "the database maintains the index with its rows, and merge maintains it too: it reflects merged \
             primary data (Table 2: secondary indexing, update)",
        ),
        InvariantKind::View { columns, base, aggregate, filter } => {
            let v = View {
                columns,
                base,
                aggregate,
                filter: filter.as_ref().map(|f| f.column.as_str()),
                filter_is_null: filter.as_ref().map(|f| f.is_null),
            };
            view(schema, &v, t, workload)
        }
    }
    .or_untouched(touches)
}

trait Untouched {
    fn or_untouched(self, touches: bool) -> Decision;
}

impl Untouched for Decision {
    fn or_untouched(self, touches: bool) -> Decision {
        if !touches && self.confluent && self.rule != "per-record" {
            return yes("untouched", "the transaction writes none of the invariant's tables");
        }
        self
    }
}

/// Whether `table.column` takes its values from a sequence: AUTO_INCREMENT/SERIAL or an `@sequence`.
fn sequenced(schema: &Schema, table: &str, column: &str) -> bool {
    schema.table(table).and_then(|t| t.column(column)).is_some_and(|c| c.auto_increment)
        || schema.invariants.iter().any(|i| {
            matches!(&i.kind, InvariantKind::AutoIncrement { table: t, column: c, .. } if t == table && c == column)
        })
}

/// Whether `table.column` is a sequenced column or a foreign-key copy of one (an order line's order id).
fn sequence_derived(schema: &Schema, table: &str, column: &str) -> bool {
    sequenced(schema, table, column)
        || schema.invariants.iter().any(|i| match &i.kind {
            InvariantKind::ForeignKey { table: t, columns, parent, parent_columns, .. } if t == table => {
                columns.iter().zip(parent_columns).any(|(c, pc)| c == column && sequenced(schema, parent, pc))
            }
            _ => false,
        })
}

fn unique(
    schema: &Schema,
    table: &str,
    cols: &[String],
    t: &Transaction,
    w: &[Transaction],
    m: Option<Mutation>,
) -> Decision {
    let mut generated = false;
    let mut sequence = None;
    for s in &t.stmts {
        match s {
            Stmt::Insert { table: tb, rows, .. } if tb == table => {
                for row in rows {
                    if !full_key(schema, table, cols, row) {
                        continue; // a NULL in the key: SQL uniqueness never compares it
                    }
                    if cols.iter().any(|c| schema.table(table).and_then(|t| t.column(c)).is_some_and(|x| x.unique_any))
                    {
                        generated = true;
                    } else if let Some(c) = cols.iter().find(|c| sequence_derived(schema, table, c)) {
                        sequence.get_or_insert_with(|| c.clone());
                    } else if m != Some(Mutation::UniqueSpecificSafe) {
                        return no(
                            "uniqueness-specific-value",
                            format!(
                                "the insert into `{table}` chooses a specific key: two branches may choose the same \
                                 one (Table 2: uniqueness, choose specific value)"
                            ),
                        );
                    }
                }
            }
            Stmt::Update { table: tb, sets, .. } if tb == table => {
                let Some((c, _)) = key_writes(cols, sets).next() else { continue };
                if shifts_alone(schema, table, cols, s, w) || groups_alone(schema, table, cols, s, w) {
                    continue;
                }
                return no(
                    "uniqueness-specific-value",
                    format!("the update sets key column `{table}.{c}` to a value two branches may both choose"),
                );
            }
            _ => {}
        }
    }
    if let Some(c) = sequence {
        return no(
            "uniqueness-sequence",
            format!(
                "`{table}.{c}` comes from a sequence: two branches draw the same next value; deferring the id to one \
                 atomic increment at its owner makes it unique (§6)"
            ),
        );
    }
    if generated {
        return yes(
            "uniqueness-some-value",
            "the insert asks for some unique value, which each replica draws from its own namespace (Table 2: \
             uniqueness, choose some value)",
        );
    }
    yes("uniqueness-delete-or-read", "deleting, reading or writing other columns cannot introduce a duplicate (§5.1)")
}

/// Whether an inserted row has a value (or a generated one) in every key column: a NULL is never compared.
fn full_key(schema: &Schema, table: &str, cols: &[String], row: &[(String, Operand)]) -> bool {
    cols.iter().all(|c| match row.iter().find(|(n, _)| n == c).map(|(_, o)| *o) {
        Some(Operand::Null) => false,
        Some(_) => true,
        None => schema.table(table).and_then(|t| t.column(c)).is_some_and(|x| x.auto_increment || x.unique_any),
    })
}

/// The writes of key columns other than `= NULL` (which never makes a duplicate).
fn key_writes<'a>(cols: &'a [String], sets: &'a [(String, SetValue)]) -> impl Iterator<Item = &'a (String, SetValue)> {
    sets.iter().filter(|(c, v)| cols.contains(c) && *v != SetValue::Assign(Operand::Null))
}

/// The statements of the workload that can make a duplicate key: key writes, and inserts of whole keys.
fn key_writers<'a>(
    schema: &'a Schema,
    table: &'a str,
    cols: &'a [String],
    w: &'a [Transaction],
) -> impl Iterator<Item = &'a Stmt> {
    w.iter().flat_map(|u| &u.stmts).filter(move |s| match s {
        Stmt::Insert { table: tb, rows, .. } => tb == table && rows.iter().any(|r| full_key(schema, table, cols, r)),
        Stmt::Update { table: tb, sets, .. } => tb == table && key_writes(cols, sets).next().is_some(),
        _ => false,
    })
}

/// No transaction writes keys in two statements (which could shift one row twice, or rewrite a group and
/// then part of it), or writes keys and inserts (its own new row, NULL key and all, could be rewritten): the
/// shift and group arguments are about one write per existing row and side.
fn one_key_write_each(table: &str, cols: &[String], w: &[Transaction]) -> bool {
    w.iter().all(|u| {
        let writes = u
            .stmts
            .iter()
            .filter(|s| matches!(s, Stmt::Update { table: tb, sets, .. } if tb == table && key_writes(cols, sets).next().is_some()))
            .count();
        let inserts = u.stmts.iter().any(|s| matches!(s, Stmt::Insert { table: tb, .. } if tb == table));
        writes == 0 || (writes == 1 && !inserts)
    })
}

/// `c = c + k` for one constant k is every key write of the workload, and nothing inserts whole keys:
/// shifting by one constant keeps distinct values distinct, and a row shifted on one side cannot land on a
/// row the other side left alone (that side would hold both).
fn shifts_alone(schema: &Schema, table: &str, cols: &[String], s: &Stmt, w: &[Transaction]) -> bool {
    let Stmt::Update { sets, .. } = s else { return false };
    if !one_key_write_each(table, cols, w) {
        return false;
    }
    let writes: Vec<_> = key_writes(cols, sets).collect();
    let [(c, v @ SetValue::Add { by: Operand::Const(_), .. })] = writes.as_slice() else { return false };
    key_writers(schema, table, cols, w).all(|x| match x {
        Stmt::Update { sets, .. } => key_writes(cols, sets).all(|(c2, v2)| c2 == c && v2 == v),
        _ => false,
    })
}

/// The key columns an update writes and the ones it does not, when its `WHERE` only pins (`= value`) key
/// columns it does not write: it rewrites whole groups of rows (rows sharing the unwritten key columns).
fn key_group(cols: &[String], s: &Stmt) -> Option<(Vec<String>, Vec<String>)> {
    let Stmt::Update { sets, filter, .. } = s else { return None };
    let written: Vec<String> = cols.iter().filter(|c| key_writes(cols, sets).any(|(x, _)| x == *c)).cloned().collect();
    let pinned: Vec<String> = cols.iter().filter(|c| !written.contains(c)).cloned().collect();
    let pins =
        |p: &crate::model::Pred| pinned.contains(&p.column) && matches!(p.op, crate::model::PredOp::Cmp(CmpOp::Eq, _));
    (!pinned.is_empty() && filter.iter().all(pins)).then_some((written, pinned))
}

/// Every key write of the workload rewrites whole groups the same way ([`key_group`]) and nothing inserts
/// whole keys: groups never mix, and inside a group each side keeps its keys distinct (a merge takes one
/// side's write of each row, and a transaction's writes win or lose together).
fn groups_alone(schema: &Schema, table: &str, cols: &[String], s: &Stmt, w: &[Transaction]) -> bool {
    let Some(g) = key_group(cols, s) else { return false };
    if !one_key_write_each(table, cols, w) {
        return false;
    }
    key_writers(schema, table, cols, w).all(|x| {
        key_group(cols, x).as_ref() == Some(&g) || shifts_all_others(cols, s, x) || shifts_all_others(cols, x, s)
    })
}

/// `x` shifts one key column of every row by one constant (`c = c + k`, no `WHERE`) and `y` writes other
/// key columns only: a merged row then has `y`'s side's other columns and `x`'s shifted column, and two
/// merged rows collide only if they collided on `y`'s side.
fn shifts_all_others(cols: &[String], x: &Stmt, y: &Stmt) -> bool {
    let (Stmt::Update { sets: xs, filter, .. }, Stmt::Update { sets: ys, .. }) = (x, y) else { return false };
    let writes: Vec<_> = key_writes(cols, xs).collect();
    let [(c, SetValue::Add { by: Operand::Const(_), .. })] = writes.as_slice() else { return false };
    filter.is_empty() && key_writes(cols, ys).all(|(c2, _)| c2 != c)
}

fn counter(t: &Transaction, table: &str, column: &str, op: CmpOp, k: i64, m: Option<Mutation>) -> Decision {
    let (mut inc, mut dec) = (false, false);
    for s in &t.stmts {
        if let Stmt::Update { table: tb, sets, .. } = s
            && tb == table
        {
            for (c, v) in sets {
                if let (true, SetValue::Add { increment, by }) = (c == column, v) {
                    if *by == Operand::Const(0) {
                        continue;
                    }
                    if *increment { inc = true } else { dec = true }
                }
            }
        }
    }
    let c = format!("{table}.{column}");
    if !inc && !dec {
        return yes("counter-unchanged", format!("the transaction does not change `{c}`"));
    }
    let inv = format!("`{c} {} {k}`", op.sql());
    match op {
        CmpOp::Eq => yes(
            "counter-equality",
            format!("{inv}: a branch keeps it only by a zero net change, and zero changes merge to zero (§5.2)"),
        ),
        CmpOp::Ne => no(
            "counter-inequality",
            format!("{inv}: two branches' changes, each allowed alone, can add up to exactly {k} (§5.2)"),
        ),
        CmpOp::Gt | CmpOp::Ge if dec && m != Some(Mutation::CounterDecrementSafe) => no(
            "counter-lower-bound-decrement",
            format!("{inv} with decrements: each branch stays above the bound, their sum may not (§5.2)"),
        ),
        CmpOp::Gt | CmpOp::Ge => yes(
            "counter-lower-bound-increment",
            format!("{inv} with increments only: the merged value is at least either branch's (§5.2)"),
        ),
        CmpOp::Lt | CmpOp::Le if inc => no(
            "counter-upper-bound-increment",
            format!("{inv} with increments: each branch stays below the bound, their sum may not (§5.2)"),
        ),
        CmpOp::Lt | CmpOp::Le => yes(
            "counter-upper-bound-decrement",
            format!("{inv} with decrements only: the merged value is at most either branch's (§5.2)"),
        ),
    }
}

struct Fk<'a> {
    child: &'a str,
    columns: &'a [String],
    parent: &'a str,
    parent_columns: &'a [String],
    cascade: bool,
}

impl Fk<'_> {
    /// Whether `u` can create a reference: insert a child with a non-NULL key or set a child's key.
    fn creates_refs(&self, u: &Transaction) -> bool {
        u.stmts.iter().any(|s| match s {
            Stmt::Insert { table, rows, .. } if table == self.child => {
                rows.iter().any(|r| self.columns.iter().all(|c| r.iter().any(|(n, o)| n == c && *o != Operand::Null)))
            }
            Stmt::Update { table, sets, .. } if table == self.child => {
                sets.iter().any(|(c, v)| self.columns.contains(c) && *v != SetValue::Assign(Operand::Null))
            }
            _ => false,
        })
    }
    /// Whether `u` can move a referenced key to another parent row: it updates a parent key and, in another
    /// statement, deletes or re-keys a parent (the key's old row). A concurrent removal of the new row then
    /// leaves the key nowhere.
    fn transplants(&self, u: &Transaction) -> bool {
        let rekeys = |s: &Stmt| {
            matches!(s, Stmt::Update { table, sets, .. }
                if table == self.parent && sets.iter().any(|(c, _)| self.parent_columns.contains(c)))
        };
        let removes = |s: &Stmt| rekeys(s) || matches!(s, Stmt::Delete { table, .. } if table == self.parent);
        u.stmts.iter().any(rekeys) && u.stmts.iter().filter(|s| removes(s)).count() >= 2
    }
    /// Whether `u` can remove a referenced parent without cascading: a plain delete or a key update.
    fn removes_parents(&self, u: &Transaction) -> bool {
        u.stmts.iter().any(|s| match s {
            Stmt::Delete { table, .. } if table == self.parent => !self.cascade,
            Stmt::Update { table, sets, .. } if table == self.parent => {
                sets.iter().any(|(c, _)| self.parent_columns.contains(c))
            }
            _ => false,
        })
    }
}

fn foreign_key(fk: &Fk, t: &Transaction, w: &[Transaction]) -> Decision {
    if fk.removes_parents(t) {
        if w.iter().any(|u| fk.creates_refs(u) || fk.transplants(u)) {
            return no(
                "fk-delete",
                format!(
                    "a plain delete of a `{}` row can race an insert of a `{}` row that references it; the merge \
                     keeps the dangling child (Table 2: foreign key, delete)",
                    fk.parent, fk.child
                ),
            );
        }
        return yes(
            "fk-delete-no-inserts",
            "no transaction of the workload creates references (or moves a referenced key) to race the delete",
        );
    }
    if fk.creates_refs(t) {
        if w.iter().any(|u| fk.removes_parents(u)) {
            return no(
                "fk-insert-racing-delete",
                format!(
                    "another transaction deletes `{}` rows without cascading: the inserted reference can dangle",
                    fk.parent
                ),
            );
        }
        return yes("fk-insert", "a union merge never makes a referenced row disappear (Table 2: foreign key, insert)");
    }
    if fk.cascade && t.stmts.iter().any(|s| matches!(s, Stmt::Delete { table, .. } if table == fk.parent)) {
        return yes(
            "fk-cascading-delete",
            "with ON DELETE CASCADE the merge deletes the dangling references too (Table 2: foreign key, cascading delete)",
        );
    }
    yes("fk-unaffected", "the transaction neither creates references nor removes referenced rows")
}

fn auto_increment(
    schema: &Schema,
    table: &str,
    column: &str,
    generator: Option<(&String, &String)>,
    t: &Transaction,
    w: &[Transaction],
) -> Decision {
    // An insert takes an id unless it leaves the column NULL.
    let auto = schema.table(table).and_then(|t| t.column(column)).is_some_and(|c| c.auto_increment);
    let inserts = |u: &Transaction| {
        u.stmts.iter().any(|s| match s {
            Stmt::Insert { table: tb, rows, .. } if tb == table => {
                rows.iter().any(|r| match r.iter().find(|(n, _)| n == column).map(|(_, o)| *o) {
                    Some(Operand::Null) => false,
                    Some(_) => true,
                    None => auto,
                })
            }
            _ => false,
        })
    };
    // So does an update that writes the column (a NULL id becoming the one below the range, say).
    let takes_ids = |u: &Transaction| {
        inserts(u)
            || u.stmts.iter().any(|s| {
                matches!(s, Stmt::Update { table: tb, sets, .. }
                    if tb == table && sets.iter().any(|(c, v)| c == column && *v != SetValue::Assign(Operand::Null)))
            })
    };
    let c = format!("{table}.{column}");
    if inserts(t) {
        return no(
            "auto-increment-insert",
            format!(
                "`{c}` must be dense and sequential: two branches both take the next id (Table 2: AUTO_INCREMENT, \
                 insert); deferred to commit it costs one atomic increment at the owner (§6)"
            ),
        );
    }
    if t.stmts.iter().any(
        |s| matches!(s, Stmt::Update { table: tb, sets, .. } if tb == table && sets.iter().any(|(x, _)| x == column)),
    ) {
        return no("auto-increment-update", format!("the transaction rewrites sequential ids in `{c}`"));
    }
    if let Some((gt, gc)) = generator
        && t.stmts
            .iter()
            .any(|s| matches!(s, Stmt::Update { table: tb, sets, .. } if tb == gt && sets.iter().any(|(x, _)| x == gc)))
    {
        if w.iter().any(takes_ids) {
            return no(
                "auto-increment-generator",
                format!(
                    "the transaction moves the generator `{gt}.{gc}` without inserting: a concurrent insert's id then lags it"
                ),
            );
        }
        return yes(
            "auto-increment-generator-alone",
            "nothing inserts ids that the generator's change could desynchronize",
        );
    }
    // Deleting some rows races any id taken concurrently. Deleting every row (no WHERE) also removes the rows
    // a concurrent update gives ids to; it only races an insert, and only with a generator (an insert below
    // the old range would lose the newest id the generator counts); without one, nothing is left to gap.
    let deletes_some = t
        .stmts
        .iter()
        .any(|s| matches!(s, Stmt::Delete { table: tb, filter, .. } if tb == table && !filter.is_empty()));
    let deletes_all =
        t.stmts.iter().any(|s| matches!(s, Stmt::Delete { table: tb, filter, .. } if tb == table && filter.is_empty()));
    if deletes_some || (deletes_all && generator.is_some()) {
        if (deletes_some && w.iter().any(takes_ids)) || w.iter().any(inserts) {
            return no(
                "auto-increment-delete",
                format!(
                    "deleting `{c}` ids while another branch inserts one can leave a gap or a maximum the generator \
                     disagrees with; like the insert, the deletion is done at the sequence's owner (§6: \"a \
                     similar process can be performed for deletion during order delivery\")"
                ),
            );
        }
        return yes(
            "auto-increment-delete-oldest",
            "without inserts, each branch keeps a range of ids, and the intersection of two ranges is a range",
        );
    }
    yes("auto-increment-unaffected", format!("the transaction neither assigns nor removes `{c}` ids"))
}

struct View<'a> {
    columns: &'a [crate::model::ColRef],
    base: &'a str,
    aggregate: &'a Aggregate,
    filter: Option<&'a str>,
    filter_is_null: Option<bool>,
}

impl View<'_> {
    fn changes_view(&self, u: &Transaction) -> bool {
        u.stmts.iter().any(|s| match s {
            Stmt::Update { table, sets, .. } => {
                sets.iter().any(|(c, _)| self.columns.iter().any(|v| &v.table == table && &v.column == c))
            }
            _ => false,
        })
    }
    fn summed(&self) -> Option<&str> {
        match self.aggregate {
            Aggregate::Sum(x) => Some(x.as_str()),
            Aggregate::Count => None,
        }
    }
    /// How many statements of `u` change base rows in a way the aggregate can see.
    fn base_changes(&self, schema: &Schema, u: &Transaction) -> usize {
        let one = |s: &Stmt| Transaction { name: String::new(), stmts: vec![s.clone()], loc: u.loc.clone() };
        u.stmts
            .iter()
            .filter(|s| {
                matches!(s, Stmt::Insert { table, .. } if table == self.base) || {
                    let x = one(s);
                    self.deletes(&x) || self.overwrites(schema, &x) || self.adds_to_rows(schema, &x)
                }
            })
            .count()
    }
    fn deletes(&self, u: &Transaction) -> bool {
        u.stmts.iter().any(|s| matches!(s, Stmt::Delete { table, .. } if table == self.base))
    }
    /// Overwrites a base row's contribution: assigns the summed or the filtered column, or read-modify-writes
    /// a summed column that is not a counter (last writer wins: a merge keeps one side's write).
    fn overwrites(&self, schema: &Schema, u: &Transaction) -> bool {
        u.stmts.iter().any(|s| match s {
            Stmt::Update { table, sets, .. } if table == self.base => sets.iter().any(|(c, v)| {
                // `c = c ± k` keeps NULL NULL and a value a value: only an assignment moves a row across the filter.
                (Some(c.as_str()) == self.filter && matches!(v, SetValue::Assign(_)))
                    || (Some(c.as_str()) == self.summed()
                        && (matches!(v, SetValue::Assign(_)) || !schema.is_counter(self.base, c)))
            }),
            _ => false,
        })
    }
    /// Whether every row `u` deletes counts in a `COUNT(*)` view (so `u` cannot delete without changing the
    /// view, and a branch that does not change it deletes nothing).
    fn deletes_only_counted(&self, u: &Transaction) -> bool {
        if self.summed().is_some() {
            return false;
        }
        let Some(f) = self.filter else { return true };
        let not_null = matches!(self.filter_is_null, Some(false));
        not_null
            && u.stmts.iter().all(|s| match s {
                Stmt::Delete { table, filter, .. } if table == self.base => {
                    filter.iter().any(|p| p.column == f && matches!(p.op, crate::model::PredOp::Cmp(..)))
                }
                _ => true,
            })
    }
    /// Assigns the summed column in a way that can keep a row's contribution: NULL (for a 0), or a value
    /// where the column is nullable (for a NULL).
    fn assigns_summed_quietly(&self, schema: &Schema, u: &Transaction) -> bool {
        let Some(x) = self.summed() else { return false };
        let nullable = schema.table(self.base).and_then(|t| t.column(x)).is_some_and(|c| !c.not_null);
        u.stmts.iter().any(|s| match s {
            Stmt::Update { table, sets, .. } if table == self.base => sets.iter().any(|(c, v)| {
                c == x && (*v == SetValue::Assign(Operand::Null) || (nullable && matches!(v, SetValue::Assign(_))))
            }),
            _ => false,
        })
    }
    /// `COUNT(*) ... WHERE f IS [NOT] NULL`: `t` writes a value into a row's `f` while `u` sets `f` to NULL
    /// and changes the view; the merge may keep `t`'s value and `u`'s change of the count.
    fn leave_race(&self, t: &Transaction, u: &Transaction) -> bool {
        let (Aggregate::Count, Some(f)) = (self.aggregate, self.filter) else { return false };
        let assigns_null = u.stmts.iter().any(|s| match s {
            Stmt::Update { table, sets, .. } if table == self.base => {
                sets.iter().any(|(c, v)| c == f && *v == SetValue::Assign(Operand::Null))
            }
            _ => false,
        });
        let writes_value = t.stmts.iter().any(|s| match s {
            Stmt::Update { table, sets, .. } if table == self.base => {
                sets.iter().any(|(c, v)| c == f && *v != SetValue::Assign(Operand::Null))
            }
            _ => false,
        });
        writes_value && assigns_null && self.changes_view(u)
    }
    /// [`View::overwrites`] other than by NULL: a write that can give a row a (new) contribution.
    fn overwrites_with_value(&self, schema: &Schema, u: &Transaction) -> bool {
        let mut w = u.clone();
        for s in &mut w.stmts {
            if let Stmt::Update { sets, .. } = s {
                sets.retain(|(_, v)| *v != SetValue::Assign(Operand::Null));
            }
        }
        self.overwrites(schema, &w)
    }
    /// Adds to a counter summed column of existing base rows.
    fn adds_to_rows(&self, schema: &Schema, u: &Transaction) -> bool {
        u.stmts.iter().any(|s| match s {
            Stmt::Update { table, sets, .. } if table == self.base => sets.iter().any(|(c, v)| {
                Some(c.as_str()) == self.summed()
                    && matches!(v, SetValue::Add { .. })
                    && schema.is_counter(self.base, c)
            }),
            _ => false,
        })
    }
}

fn view(schema: &Schema, v: &View, t: &Transaction, w: &[Transaction]) -> Decision {
    let vname = v.columns.iter().map(|c| c.to_string()).collect::<Vec<_>>().join(" + ");
    let base = v.base;
    let keeps_view = |u: &Transaction| v.changes_view(u);
    // Two base changes in one transaction can cancel out in the aggregate: they act like a view change.
    if (keeps_view(t) || v.base_changes(schema, t) >= 2) && (v.deletes(t) || v.overwrites(schema, t)) {
        return no(
            "view-non-additive",
            format!(
                "the transaction deletes or overwrites `{base}` rows (a change both branches can make to the same \
                 row, which a merge applies once) while adding its effect to `{vname}` (which a merge applies \
                 twice): §5.2, lost update"
            ),
        );
    }
    let quiet = (v.deletes(t) && !v.deletes_only_counted(t)) || v.assigns_summed_quietly(schema, t);
    if let Some(u) = w.iter().find(|u| {
        (quiet && keeps_view(u) && (v.overwrites_with_value(schema, u) || v.adds_to_rows(schema, u)))
            || v.leave_race(t, u)
    }) {
        return no(
            "view-racing-update",
            format!(
                "the transaction deletes or overwrites `{base}` rows without changing the aggregate, while `{}` \
                 changes a row's contribution and adds it to `{vname}`: the merge keeps this side's row state and \
                 the other side's addition",
                u.name
            ),
        );
    }
    if keeps_view(t)
        && v.adds_to_rows(schema, t)
        && let Some(u) = w.iter().find(|u| v.deletes(u) || (keeps_view(u) && v.overwrites(schema, u)))
    {
        return no(
            "view-additive-racing-remove",
            format!(
                "`{}` deletes or overwrites the `{base}` rows this transaction adds to: the merge loses the addition",
                u.name
            ),
        );
    }
    yes(
        "view-additive",
        format!(
            "each branch keeps `{vname}` equal to its aggregate by additive changes (inserts, counter increments), \
             and a merge adds both branches' changes on both sides (Table 2: materialized views, update)"
        ),
    )
}
