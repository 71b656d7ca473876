//! Parsing transaction templates (SQL DML) into [`Transaction`]s, checked against the [`Schema`].
//!
//! Supported statements: `INSERT INTO t [(cols)] VALUES (...)[, (...)]`, `UPDATE t SET c = ? | constant |
//! c + k | c - k | c + ? | c - ? [WHERE conj]`, `DELETE FROM t [WHERE conj]`, `SELECT ...` (read only;
//! table and column names are checked), and `BEGIN`/`COMMIT` (ignored). A `WHERE` is a conjunction (`AND`) of
//! `column op (? | constant)` and `column IS [NOT] NULL`.

use crate::error::{AnalyzeError, Loc, Result};
use crate::model::{Operand, Pred, PredOp, Schema, SetValue, Stmt, Table, Transaction};
use crate::source::Part;
use crate::sqlutil::{cmp_op, column_ident, ident_loc, loc_of, name, object_ident, operand};
use sqlparser::ast::{
    AssignmentTarget, BinaryOperator, Expr, FromTable, FunctionArg, FunctionArgExpr, FunctionArguments, Ident,
    SelectItem, SetExpr, Statement, TableFactor, TableObject, TableWithJoins,
};

/// Parses one transaction part.
pub fn transaction(schema: &Schema, part: &Part, file: &str) -> Result<Transaction> {
    let name = part.name.clone().expect("a transaction part");
    let stmts = crate::source::parse(&part.padded, file, &part.loc)?;
    let starts = crate::source::statement_starts(&part.padded, file);
    let mut out = Vec::new();
    for (i, st) in stmts.iter().enumerate() {
        if let Some(s) = statement(schema, st, file, starts.get(i).unwrap_or(&part.loc))? {
            out.push(s);
        }
    }
    if out.is_empty() {
        return Err(AnalyzeError::at(&part.loc, format!("transaction `{name}` has no statements")));
    }
    Ok(Transaction { name, stmts: out, loc: part.loc.clone() })
}

struct Ctx<'a> {
    schema: &'a Schema,
    file: &'a str,
    fb: &'a Loc,
}

impl Ctx<'_> {
    fn table(&self, id: &Ident) -> Result<&Table> {
        let n = name(id);
        self.schema
            .table(&n)
            .ok_or_else(|| AnalyzeError::at(&ident_loc(id, self.file, self.fb), format!("unknown table `{n}`")))
    }
    fn column(&self, t: &Table, id: &Ident) -> Result<String> {
        let c = name(id);
        if t.column(&c).is_none() {
            return Err(AnalyzeError::at(
                &ident_loc(id, self.file, self.fb),
                format!("unknown column `{c}` in table `{}`", t.name),
            ));
        }
        Ok(c)
    }
    fn single_table(&self, twj: &TableWithJoins, what: &str) -> Result<Ident> {
        let loc = loc_of(twj, self.file, self.fb);
        if !twj.joins.is_empty() {
            return Err(AnalyzeError::at(&loc, format!("unsupported: a join in {what}")));
        }
        match &twj.relation {
            TableFactor::Table { name, .. } => Ok(name_ident(name, self)?),
            _ => Err(AnalyzeError::at(&loc, format!("unsupported: {what} of something other than a table"))),
        }
    }
    fn filter(&self, t: &Table, e: Option<&Expr>, out: &mut Vec<Pred>) -> Result<()> {
        let Some(e) = e else { return Ok(()) };
        let unsupported = || {
            AnalyzeError::at(
                &loc_of(e, self.file, self.fb),
                format!("unsupported WHERE `{e}`: only AND of `column op ?|constant` and `column IS [NOT] NULL`"),
            )
        };
        match e {
            Expr::Nested(inner) => self.filter(t, Some(inner), out),
            Expr::BinaryOp { left, op: BinaryOperator::And, right } => {
                self.filter(t, Some(left), out)?;
                self.filter(t, Some(right), out)
            }
            Expr::BinaryOp { left, op, right } => {
                let op = cmp_op(op).ok_or_else(unsupported)?;
                let (id, op, rhs) = match (column_ident(left), operand(right), column_ident(right), operand(left)) {
                    (Some(id), Some(v), _, _) => (id, op, v),
                    (_, _, Some(id), Some(v)) => (id, op.flipped(), v),
                    _ => return Err(unsupported()),
                };
                if matches!(rhs, Operand::Null | Operand::Default) {
                    return Err(unsupported());
                }
                out.push(Pred { column: self.column(t, id)?, op: PredOp::Cmp(op, rhs) });
                Ok(())
            }
            Expr::IsNull(inner) | Expr::IsNotNull(inner) => {
                let id = column_ident(inner).ok_or_else(unsupported)?;
                out.push(Pred { column: self.column(t, id)?, op: PredOp::IsNull(matches!(e, Expr::IsNull(_))) });
                Ok(())
            }
            _ => Err(unsupported()),
        }
    }
    /// Checks that the identifiers of a read-only expression name columns of `tables`.
    fn read_expr(&self, tables: &[&Table], e: &Expr) -> Result<()> {
        match e {
            Expr::Identifier(_) | Expr::CompoundIdentifier(_) if !tables.is_empty() => {
                let id = column_ident(e).expect("an identifier");
                let c = name(id);
                if let Expr::CompoundIdentifier(parts) = e
                    && parts.len() == 2
                    && let Some(t) = tables.iter().find(|t| t.name == name(&parts[0]))
                {
                    return self.column(t, id).map(|_| ());
                }
                if tables.iter().any(|t| t.column(&c).is_some()) {
                    Ok(())
                } else {
                    let names: Vec<_> = tables.iter().map(|t| format!("`{}`", t.name)).collect();
                    Err(AnalyzeError::at(
                        &ident_loc(id, self.file, self.fb),
                        format!("unknown column `{c}` in {}", names.join(", ")),
                    ))
                }
            }
            Expr::Nested(x) | Expr::IsNull(x) | Expr::IsNotNull(x) | Expr::UnaryOp { expr: x, .. } => {
                self.read_expr(tables, x)
            }
            Expr::BinaryOp { left, right, .. } => {
                self.read_expr(tables, left)?;
                self.read_expr(tables, right)
            }
            Expr::Between { expr, low, high, .. } => {
                self.read_expr(tables, expr)?;
                self.read_expr(tables, low)?;
                self.read_expr(tables, high)
            }
            Expr::Function(f) => {
                if let FunctionArguments::List(l) = &f.args {
                    for a in &l.args {
                        if let FunctionArg::Unnamed(FunctionArgExpr::Expr(x)) = a {
                            self.read_expr(tables, x)?;
                        }
                    }
                }
                Ok(())
            }
            _ => Ok(()),
        }
    }
}

fn name_ident(o: &sqlparser::ast::ObjectName, cx: &Ctx) -> Result<Ident> {
    object_ident(o, cx.file, cx.fb)
}

fn statement(schema: &Schema, st: &Statement, file: &str, fb: &Loc) -> Result<Option<Stmt>> {
    let cx = Ctx { schema, file, fb };
    Ok(Some(match st {
        Statement::StartTransaction { .. } | Statement::Commit { .. } => return Ok(None),
        Statement::Insert(ins) => {
            let TableObject::TableName(tn) = &ins.table else {
                return Err(AnalyzeError::at(&loc_of(st, file, fb), "unsupported INSERT target"));
            };
            let tid = name_ident(tn, &cx)?;
            let loc = ident_loc(&tid, file, fb);
            let t = cx.table(&tid)?;
            let cols: Vec<String> = if ins.columns.is_empty() {
                t.columns.iter().map(|c| c.name.clone()).collect()
            } else {
                ins.columns.iter().map(|c| cx.column(t, &name_ident(c, &cx)?)).collect::<Result<_>>()?
            };
            if ins.on.is_some() || ins.returning.is_some() || !ins.assignments.is_empty() {
                return Err(AnalyzeError::at(
                    &loc,
                    "unsupported: INSERT with ON CONFLICT/ON DUPLICATE, RETURNING or SET",
                ));
            }
            let Some(src) = &ins.source else { return Err(AnalyzeError::at(&loc, "INSERT without VALUES")) };
            let SetExpr::Values(values) = src.body.as_ref() else {
                return Err(AnalyzeError::at(
                    &loc_of(src.as_ref(), file, &loc),
                    "unsupported: INSERT ... SELECT (use VALUES)",
                ));
            };
            let mut rows = Vec::new();
            for row in &values.rows {
                let row = &row.content;
                if row.len() != cols.len() {
                    return Err(AnalyzeError::at(
                        &loc_of(&row[0], file, &loc),
                        format!("INSERT into `{}`: {} values for {} columns", t.name, row.len(), cols.len()),
                    ));
                }
                let mut r = Vec::new();
                for (c, e) in cols.iter().zip(row) {
                    let v = operand(e).ok_or_else(|| {
                        AnalyzeError::at(
                            &loc_of(e, file, &loc),
                            format!("unsupported value `{e}`: only ?, $n, integer constants, NULL and DEFAULT"),
                        )
                    })?;
                    r.push((c.clone(), v));
                }
                rows.push(r);
            }
            Stmt::Insert { table: t.name.clone(), rows, loc }
        }
        Statement::Update(up) => {
            let tid = cx.single_table(&up.table, "UPDATE")?;
            let loc = ident_loc(&tid, file, fb);
            let t = cx.table(&tid)?;
            if up.from.is_some() {
                return Err(AnalyzeError::at(&loc, "unsupported: UPDATE ... FROM"));
            }
            let mut sets = Vec::new();
            for a in &up.assignments {
                let AssignmentTarget::ColumnName(cn) = &a.target else {
                    return Err(AnalyzeError::at(&loc, "unsupported: tuple assignment"));
                };
                let cid = name_ident(cn, &cx)?;
                let c = cx.column(t, &cid)?;
                let v = set_value(&c, &a.value).ok_or_else(|| {
                    AnalyzeError::at(
                        &loc_of(&a.value, file, &loc),
                        format!(
                            "unsupported SET `{c} = {}`: only `{c} = ?|constant` or `{c} = {c} + k` / `{c} - k`",
                            a.value
                        ),
                    )
                })?;
                if schema.is_counter(&t.name, &c) && matches!(v, SetValue::Assign(_)) {
                    return Err(AnalyzeError::at(
                        &ident_loc(&cid, file, &loc),
                        format!(
                            "`{}.{c}` is a @counter: change it with `{c} = {c} + k` or `{c} - k`, not an assignment",
                            t.name
                        ),
                    ));
                }
                sets.push((c, v));
            }
            let mut filter = Vec::new();
            cx.filter(t, up.selection.as_ref(), &mut filter)?;
            Stmt::Update { table: t.name.clone(), sets, filter, loc }
        }
        Statement::Delete(del) => {
            let from = match &del.from {
                FromTable::WithFromKeyword(v) | FromTable::WithoutKeyword(v) => v,
            };
            let [twj] = from.as_slice() else {
                return Err(AnalyzeError::at(&loc_of(st, file, fb), "unsupported: DELETE from several tables"));
            };
            let tid = cx.single_table(twj, "DELETE")?;
            let loc = ident_loc(&tid, file, fb);
            let t = cx.table(&tid)?;
            if del.using.is_some() || !del.tables.is_empty() {
                return Err(AnalyzeError::at(&loc, "unsupported: DELETE ... USING"));
            }
            let mut filter = Vec::new();
            cx.filter(t, del.selection.as_ref(), &mut filter)?;
            Stmt::Delete { table: t.name.clone(), filter, loc }
        }
        Statement::Query(q) => {
            let loc = loc_of(q.as_ref(), file, fb);
            let SetExpr::Select(sel) = q.body.as_ref() else {
                return Err(AnalyzeError::at(&loc, "unsupported query: only a plain SELECT"));
            };
            let mut tables = Vec::new();
            for twj in &sel.from {
                for tf in std::iter::once(&twj.relation).chain(twj.joins.iter().map(|j| &j.relation)) {
                    let TableFactor::Table { name: tn, .. } = tf else {
                        return Err(AnalyzeError::at(&loc, "unsupported: SELECT from something other than tables"));
                    };
                    tables.push(cx.table(&name_ident(tn, &cx)?)?);
                }
            }
            for item in &sel.projection {
                if let SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. } = item {
                    cx.read_expr(&tables, e)?;
                }
            }
            if let Some(e) = &sel.selection {
                cx.read_expr(&tables, e)?;
            }
            Stmt::Select { tables: tables.iter().map(|t| t.name.clone()).collect(), loc }
        }
        _ => {
            return Err(AnalyzeError::at(
                fb,
                "unsupported statement in a transaction: only INSERT, UPDATE, DELETE, SELECT, BEGIN, COMMIT",
            ));
        }
    }))
}

fn set_value(col: &str, e: &Expr) -> Option<SetValue> {
    if let Some(v) = operand(e) {
        return Some(SetValue::Assign(v));
    }
    let Expr::BinaryOp { left, op, right } = e else {
        return if let Expr::Nested(inner) = e { set_value(col, inner) } else { None };
    };
    let is_col = |x: &Expr| column_ident(x).is_some_and(|i| name(i) == col);
    let (by, increment) = match op {
        BinaryOperator::Plus if is_col(left) => (operand(right)?, true),
        BinaryOperator::Plus if is_col(right) => (operand(left)?, true),
        BinaryOperator::Minus if is_col(left) => (operand(right)?, false),
        _ => return None,
    };
    match by {
        Operand::Param => Some(SetValue::Add { increment, by }),
        Operand::Const(k) if k < 0 => Some(SetValue::Add { increment: !increment, by: Operand::Const(-k) }),
        Operand::Const(_) => Some(SetValue::Add { increment, by }),
        _ => None,
    }
}
