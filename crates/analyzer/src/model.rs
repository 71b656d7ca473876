//! The analyzer's model of a schema (tables, columns, invariants) and of transaction templates.
//!
//! Both the rules ([`crate::rules`]) and the bounded checker ([`crate::bounded`]) read only this model, never
//! SQL: the parsers ([`crate::schema`], [`crate::txn`]) are the one place where SQL is understood.

use crate::error::Loc;
use serde::Serialize;

/// A comparison operator in a `CHECK` or a `WHERE`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum CmpOp {
    /// `=`
    Eq,
    /// `<>` or `!=`
    Ne,
    /// `<`
    Lt,
    /// `<=`
    Le,
    /// `>`
    Gt,
    /// `>=`
    Ge,
}

impl CmpOp {
    /// Whether `a op b` holds.
    pub fn holds(self, a: i64, b: i64) -> bool {
        match self {
            CmpOp::Eq => a == b,
            CmpOp::Ne => a != b,
            CmpOp::Lt => a < b,
            CmpOp::Le => a <= b,
            CmpOp::Gt => a > b,
            CmpOp::Ge => a >= b,
        }
    }

    /// The operator with its operands swapped (`k < c` is `c > k`).
    pub fn flipped(self) -> CmpOp {
        match self {
            CmpOp::Lt => CmpOp::Gt,
            CmpOp::Le => CmpOp::Ge,
            CmpOp::Gt => CmpOp::Lt,
            CmpOp::Ge => CmpOp::Le,
            other => other,
        }
    }

    /// SQL spelling.
    pub fn sql(self) -> &'static str {
        match self {
            CmpOp::Eq => "=",
            CmpOp::Ne => "<>",
            CmpOp::Lt => "<",
            CmpOp::Le => "<=",
            CmpOp::Gt => ">",
            CmpOp::Ge => ">=",
        }
    }
}

/// A column of a table.
#[derive(Debug, Clone)]
pub struct Column {
    /// Lower-case name.
    pub name: String,
    /// Declared `NOT NULL` (or part of the primary key).
    pub not_null: bool,
    /// `AUTO_INCREMENT`, `AUTOINCREMENT` or `SERIAL`: the database assigns dense sequential values.
    pub auto_increment: bool,
    /// `-- @counter`: a counter ADT; concurrent increments merge by adding.
    pub counter: bool,
    /// `-- @unique-any`: inserts ask for "some unique value", which each replica draws from its own namespace.
    pub unique_any: bool,
    /// Where the column is declared.
    pub loc: Loc,
}

/// A table.
#[derive(Debug, Clone)]
pub struct Table {
    /// Lower-case name.
    pub name: String,
    /// Its columns, in declaration order.
    pub columns: Vec<Column>,
    /// Where the table is declared.
    pub loc: Loc,
}

impl Table {
    /// The column called `name`, if any.
    pub fn column(&self, name: &str) -> Option<&Column> {
        self.columns.iter().find(|c| c.name == name)
    }

    /// The column called `name`, mutably.
    pub fn column_mut(&mut self, name: &str) -> Option<&mut Column> {
        self.columns.iter_mut().find(|c| c.name == name)
    }
}

/// A `table.column` reference.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ColRef {
    /// Table name.
    pub table: String,
    /// Column name.
    pub column: String,
}

impl std::fmt::Display for ColRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}", self.table, self.column)
    }
}

/// The aggregate a materialized view keeps.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Aggregate {
    /// `SUM(col)`; NULLs count as 0.
    Sum(String),
    /// `COUNT(*)`.
    Count,
}

/// A filter on the rows a view aggregates: `col IS NULL` (`is_null`) or `col IS NOT NULL`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NullFilter {
    /// The filtered column of the base table.
    pub column: String,
    /// `IS NULL` when true, `IS NOT NULL` when false.
    pub is_null: bool,
}

/// What an invariant says.
#[derive(Debug, Clone)]
pub enum InvariantKind {
    /// `PRIMARY KEY` or `UNIQUE`: no two rows share these columns' values.
    Unique { table: String, columns: Vec<String> },
    /// `NOT NULL`.
    NotNull { table: String, column: String },
    /// `CHECK (column op constant)` on an ordinary column (a per-record invariant).
    Check { table: String, column: String, op: CmpOp, value: i64 },
    /// `CHECK (column op constant)` on a `@counter` column.
    Counter { table: String, column: String, op: CmpOp, value: i64 },
    /// `FOREIGN KEY (columns) REFERENCES parent (parent_columns) [ON DELETE CASCADE]`.
    ForeignKey { table: String, columns: Vec<String>, parent: String, parent_columns: Vec<String>, cascade: bool },
    /// Dense sequential ids: the column's values are unique and contiguous; with a generator counter
    /// (`@sequence`), also `max(column) = counter - 1` for every row of the counter's table.
    AutoIncrement { table: String, column: String, counter: Option<ColRef> },
    /// `@index`: a secondary index on `table.column`, maintained by the database with the base rows.
    Index { table: String, column: String },
    /// `@view`: the sum of `columns` (rows of one table) equals an aggregate over `base` rows.
    View { columns: Vec<ColRef>, base: String, aggregate: Aggregate, filter: Option<NullFilter> },
}

impl InvariantKind {
    /// The JSON `kind` string.
    pub fn kind_name(&self) -> &'static str {
        match self {
            InvariantKind::Unique { .. } => "uniqueness",
            InvariantKind::NotNull { .. } => "not-null",
            InvariantKind::Check { .. } => "check",
            InvariantKind::Counter { .. } => "counter",
            InvariantKind::ForeignKey { .. } => "foreign-key",
            InvariantKind::AutoIncrement { .. } => "auto-increment",
            InvariantKind::Index { .. } => "index",
            InvariantKind::View { .. } => "view",
        }
    }

    /// The tables the invariant reads.
    pub fn tables(&self) -> Vec<String> {
        let mut t = match self {
            InvariantKind::Unique { table, .. }
            | InvariantKind::NotNull { table, .. }
            | InvariantKind::Check { table, .. }
            | InvariantKind::Counter { table, .. }
            | InvariantKind::Index { table, .. } => vec![table.clone()],
            InvariantKind::ForeignKey { table, parent, .. } => vec![table.clone(), parent.clone()],
            InvariantKind::AutoIncrement { table, counter, .. } => {
                let mut v = vec![table.clone()];
                if let Some(c) = counter {
                    v.push(c.table.clone());
                }
                v
            }
            InvariantKind::View { columns, base, .. } => {
                let mut v: Vec<String> = columns.iter().map(|c| c.table.clone()).collect();
                v.push(base.clone());
                v
            }
        };
        t.sort();
        t.dedup();
        t
    }

    /// The columns the invariant reads, as `(table, column)`.
    pub fn columns(&self) -> Vec<ColRef> {
        let c = |t: &String, c: &String| ColRef { table: t.clone(), column: c.clone() };
        match self {
            InvariantKind::Unique { table, columns } => columns.iter().map(|x| c(table, x)).collect(),
            InvariantKind::NotNull { table, column }
            | InvariantKind::Check { table, column, .. }
            | InvariantKind::Counter { table, column, .. }
            | InvariantKind::Index { table, column } => vec![c(table, column)],
            InvariantKind::ForeignKey { table, columns, parent, parent_columns, .. } => {
                columns.iter().map(|x| c(table, x)).chain(parent_columns.iter().map(|x| c(parent, x))).collect()
            }
            InvariantKind::AutoIncrement { table, column, counter } => {
                let mut v = vec![c(table, column)];
                v.extend(counter.iter().cloned());
                v
            }
            InvariantKind::View { columns, base, aggregate, filter } => {
                let mut v = columns.clone();
                if let Aggregate::Sum(x) = aggregate {
                    v.push(c(base, x));
                }
                if let Some(f) = filter {
                    v.push(c(base, &f.column));
                }
                v
            }
        }
    }
}

/// A named invariant.
#[derive(Debug, Clone)]
pub struct Invariant {
    /// The constraint's name, or `table.column` (`table.col1,col2` for several columns) where it has none.
    pub name: String,
    /// What it says.
    pub kind: InvariantKind,
    /// Where it is declared.
    pub loc: Loc,
}

/// A parsed schema: tables and the invariants over them.
#[derive(Debug, Clone, Default)]
pub struct Schema {
    /// The tables, in declaration order.
    pub tables: Vec<Table>,
    /// The invariants, in declaration order.
    pub invariants: Vec<Invariant>,
}

impl Schema {
    /// The table called `name`, if any.
    pub fn table(&self, name: &str) -> Option<&Table> {
        self.tables.iter().find(|t| t.name == name)
    }

    /// The column `c`, if it exists.
    pub fn column(&self, c: &ColRef) -> Option<&Column> {
        self.table(&c.table).and_then(|t| t.column(&c.column))
    }

    /// Whether `table.column` is a `@counter`.
    pub fn is_counter(&self, table: &str, column: &str) -> bool {
        self.table(table).and_then(|t| t.column(column)).is_some_and(|c| c.counter)
    }
}

/// A value in a template: a parameter, a constant, `NULL` or `DEFAULT`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operand {
    /// `?` or `$n`: the caller supplies it.
    Param,
    /// An integer constant.
    Const(i64),
    /// `NULL`.
    Null,
    /// `DEFAULT` (the database chooses, e.g. the next AUTO_INCREMENT value).
    Default,
}

/// The right-hand side of `SET column = ...`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SetValue {
    /// `column = operand`.
    Assign(Operand),
    /// `column = column + operand` (a non-negative operand) when `increment`, else `column = column - operand`.
    Add { increment: bool, by: Operand },
}

/// One conjunct of a `WHERE`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PredOp {
    /// `column op operand`.
    Cmp(CmpOp, Operand),
    /// `column IS NULL` (true) or `IS NOT NULL` (false).
    IsNull(bool),
}

/// `column PredOp`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pred {
    /// The column tested.
    pub column: String,
    /// The test.
    pub op: PredOp,
}

/// One statement of a transaction template.
#[derive(Debug, Clone)]
pub enum Stmt {
    /// `INSERT INTO table (columns) VALUES (...), ...`: one entry per row; columns left out are absent.
    Insert { table: String, rows: Vec<Vec<(String, Operand)>>, loc: Loc },
    /// `UPDATE table SET ... [WHERE conjunction]`.
    Update { table: String, sets: Vec<(String, SetValue)>, filter: Vec<Pred>, loc: Loc },
    /// `DELETE FROM table [WHERE conjunction]`.
    Delete { table: String, filter: Vec<Pred>, loc: Loc },
    /// `SELECT ...`: reads only.
    Select { tables: Vec<String>, loc: Loc },
}

impl Stmt {
    /// The table the statement writes, if it writes.
    pub fn written_table(&self) -> Option<&str> {
        match self {
            Stmt::Insert { table, .. } | Stmt::Update { table, .. } | Stmt::Delete { table, .. } => Some(table),
            Stmt::Select { .. } => None,
        }
    }
}

/// A named transaction template.
#[derive(Debug, Clone)]
pub struct Transaction {
    /// The name after `-- transaction:`.
    pub name: String,
    /// Its statements, in order.
    pub stmts: Vec<Stmt>,
    /// Where its header line is.
    pub loc: Loc,
}
