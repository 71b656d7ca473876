//! Parsing DDL (`CREATE TABLE`, `CREATE [UNIQUE] INDEX`) and annotation comments into a [`Schema`].
//!
//! Annotations (one per comment line, anywhere in the schema or transactions file; `NAME:` is optional and
//! names the invariant):
//!
//! | annotation | meaning |
//! | --- | --- |
//! | `-- @counter t.c[, t.c2 ...]` | `t.c` is a counter ADT: concurrent `c = c ± k` merge by adding both deltas |
//! | `-- @unique-any t.c` | inserts into `t` ask for *some* unique `c` (e.g. a UUID), not a specific value |
//! | `-- @sequence [NAME:] t.c BY g.n` | `t.c` takes dense sequential ids from the counter `g.n` (`max(t.c) = g.n - 1`) |
//! | `-- @index [NAME:] t.c` | a secondary index on `t.c`, maintained by the database |
//! | `-- @view [NAME:] v.a [+ v.b] = SELECT SUM(x) \| COUNT(*) FROM b [WHERE y IS [NOT] NULL]` | a materialized view kept in the counters `v.a (+ v.b)` |

use crate::error::{AnalyzeError, Loc, Result};
use crate::model::{Aggregate, ColRef, Column, Invariant, InvariantKind, NullFilter, Schema, Table};
use crate::source::{self, Annotation};
use crate::sqlutil::{cmp_op, column_ident, ident_loc, int_const, loc_of, name, object_ident};
use sqlparser::ast::{
    ColumnOption, CreateTable, DataType, Expr, FunctionArg, FunctionArgExpr, FunctionArguments, IndexColumn,
    ReferentialAction, SelectItem, SetExpr, Statement, TableConstraint, TableFactor,
};

/// Builds the tables and DDL invariants of `stmts` (annotations come after, in [`apply_annotations`]).
pub fn build(stmts: &[Statement], starts: &[Loc], file: &str, fallback: &Loc) -> Result<Schema> {
    let mut schema = Schema::default();
    let mut fks = Vec::new();
    for (i, st) in stmts.iter().enumerate() {
        let fallback = starts.get(i).unwrap_or(fallback);
        match st {
            Statement::CreateTable(ct) => create_table(&mut schema, &mut fks, ct, file, fallback)?,
            Statement::CreateIndex(ci) => {
                let loc = loc_of(&ci.table_name, file, fallback);
                let t = object_ident(&ci.table_name, file, fallback)?;
                let table = known_table(&schema, &t, file, fallback)?.name.clone();
                let cols = index_columns(&schema, &table, &ci.columns, file, &loc)?;
                let iname = match &ci.name {
                    Some(n) => name(&object_ident(n, file, fallback)?),
                    None => format!("{table}.{}", cols.join(",")),
                };
                let kind = if ci.unique {
                    InvariantKind::Unique { table, columns: cols }
                } else if cols.len() == 1 {
                    InvariantKind::Index { table, column: cols[0].clone() }
                } else {
                    return Err(AnalyzeError::at(&loc, "unsupported: a secondary index over several columns"));
                };
                schema.invariants.push(Invariant { name: iname, kind, loc });
            }
            _ => {
                return Err(AnalyzeError::at(
                    fallback,
                    "unsupported statement in the schema: only CREATE TABLE and CREATE INDEX (put transactions \
                     after a `-- transaction: NAME` line)",
                ));
            }
        }
    }
    for (inv, ident_locs) in fks {
        check_fk(&schema, &inv, &ident_locs)?;
        schema.invariants.push(inv);
    }
    Ok(schema)
}

fn known_table<'a>(schema: &'a Schema, t: &sqlparser::ast::Ident, file: &str, fallback: &Loc) -> Result<&'a Table> {
    schema
        .table(&name(t))
        .ok_or_else(|| AnalyzeError::at(&ident_loc(t, file, fallback), format!("unknown table `{}`", name(t))))
}

fn index_columns(schema: &Schema, table: &str, cols: &[IndexColumn], file: &str, loc: &Loc) -> Result<Vec<String>> {
    let t = schema.table(table).expect("known table");
    cols.iter()
        .map(|ic| {
            let id = column_ident(&ic.column.expr)
                .ok_or_else(|| AnalyzeError::at(&loc_of(&ic.column.expr, file, loc), "expected a column name"))?;
            let c = name(id);
            if t.column(&c).is_none() {
                return Err(AnalyzeError::at(
                    &ident_loc(id, file, loc),
                    format!("unknown column `{c}` in table `{table}`"),
                ));
            }
            Ok(c)
        })
        .collect()
}

type PendingFk = (Invariant, Vec<Loc>);

fn create_table(schema: &mut Schema, fks: &mut Vec<PendingFk>, ct: &CreateTable, file: &str, fb: &Loc) -> Result<()> {
    let tid = object_ident(&ct.name, file, fb)?;
    let tname = name(&tid);
    let tloc = ident_loc(&tid, file, fb);
    if schema.table(&tname).is_some() {
        return Err(AnalyzeError::at(&tloc, format!("table `{tname}` is declared twice")));
    }
    if ct.query.is_some() {
        return Err(AnalyzeError::at(&tloc, "unsupported: CREATE TABLE ... AS SELECT"));
    }
    let mut table = Table { name: tname.clone(), columns: Vec::new(), loc: tloc.clone() };
    let mut invs = Vec::new();
    for cd in &ct.columns {
        let cname = name(&cd.name);
        let cloc = ident_loc(&cd.name, file, fb);
        if table.column(&cname).is_some() {
            return Err(AnalyzeError::at(&cloc, format!("column `{cname}` is declared twice in `{tname}`")));
        }
        let serial = matches!(&cd.data_type, DataType::Custom(n, _)
            if ["serial", "bigserial", "smallserial"].contains(&n.to_string().to_ascii_lowercase().as_str()));
        let mut col = Column {
            name: cname.clone(),
            not_null: serial,
            auto_increment: serial,
            counter: false,
            unique_any: false,
            loc: cloc.clone(),
        };
        for opt in &cd.options {
            let cn = opt.name.as_ref().map(name);
            let iname = |default: String| cn.clone().unwrap_or(default);
            match &opt.option {
                ColumnOption::Null | ColumnOption::Default(_) | ColumnOption::Comment(_) => {}
                ColumnOption::CharacterSet(_) | ColumnOption::Collation(_) => {}
                ColumnOption::NotNull => {
                    col.not_null = true;
                    invs.push(Invariant {
                        name: iname(format!("{tname}.{cname}")),
                        kind: InvariantKind::NotNull { table: tname.clone(), column: cname.clone() },
                        loc: cloc.clone(),
                    });
                }
                ColumnOption::PrimaryKey(_) | ColumnOption::Unique(_) => {
                    if matches!(opt.option, ColumnOption::PrimaryKey(_)) {
                        col.not_null = true;
                    }
                    invs.push(Invariant {
                        name: iname(format!("{tname}.{cname}")),
                        kind: InvariantKind::Unique { table: tname.clone(), columns: vec![cname.clone()] },
                        loc: cloc.clone(),
                    });
                }
                ColumnOption::ForeignKey(fk) => {
                    let pid = object_ident(&fk.foreign_table, file, fb)?;
                    let refs: Vec<_> = fk.referred_columns.iter().map(|i| (name(i), ident_loc(i, file, fb))).collect();
                    fks.push(fk_invariant(
                        fk.name.as_ref().map(name).or(cn.clone()),
                        &tname,
                        vec![(cname.clone(), cloc.clone())],
                        (&pid, file, fb),
                        refs,
                        fk.on_delete.as_ref(),
                        cloc.clone(),
                    ));
                }
                ColumnOption::Check(cc) => {
                    invs.push(check_invariant(&tname, cc.name.as_ref().map(name).or(cn.clone()), &cc.expr, file, fb)?);
                }
                ColumnOption::DialectSpecific(tokens)
                    if tokens.iter().any(|t| {
                        let s = t.to_string().to_ascii_uppercase();
                        s == "AUTO_INCREMENT" || s == "AUTOINCREMENT"
                    }) =>
                {
                    col.auto_increment = true;
                }
                other => {
                    return Err(AnalyzeError::at(
                        &cloc,
                        format!("unsupported column option `{other}` on `{tname}.{cname}`"),
                    ));
                }
            }
        }
        if col.auto_increment {
            invs.push(Invariant {
                name: format!("{tname}.{cname}"),
                kind: InvariantKind::AutoIncrement { table: tname.clone(), column: cname.clone(), counter: None },
                loc: cloc.clone(),
            });
        }
        table.columns.push(col);
    }
    for c in &ct.constraints {
        match c {
            TableConstraint::PrimaryKey(pk) => {
                let cols = key_columns(&table, &pk.columns, file, &tloc)?;
                for cname in &cols {
                    table.column_mut(cname).expect("checked").not_null = true;
                }
                let n = pk.name.as_ref().map(name).unwrap_or_else(|| format!("{tname}.{}", cols.join(",")));
                let kind = InvariantKind::Unique { table: tname.clone(), columns: cols };
                invs.push(Invariant { name: n, kind, loc: loc_of(c, file, &tloc) });
            }
            TableConstraint::Unique(u) => {
                let cols = key_columns(&table, &u.columns, file, &tloc)?;
                let n = u.name.as_ref().map(name).unwrap_or_else(|| format!("{tname}.{}", cols.join(",")));
                let kind = InvariantKind::Unique { table: tname.clone(), columns: cols };
                invs.push(Invariant { name: n, kind, loc: loc_of(c, file, &tloc) });
            }
            TableConstraint::ForeignKey(fk) => {
                let mut cols = Vec::new();
                for i in &fk.columns {
                    let cn = name(i);
                    if table.column(&cn).is_none() {
                        return Err(AnalyzeError::at(
                            &ident_loc(i, file, &tloc),
                            format!("unknown column `{cn}` in table `{tname}`"),
                        ));
                    }
                    cols.push((cn, ident_loc(i, file, &tloc)));
                }
                let pid = object_ident(&fk.foreign_table, file, fb)?;
                let refs: Vec<_> = fk.referred_columns.iter().map(|i| (name(i), ident_loc(i, file, fb))).collect();
                fks.push(fk_invariant(
                    fk.name.as_ref().map(name),
                    &tname,
                    cols,
                    (&pid, file, fb),
                    refs,
                    fk.on_delete.as_ref(),
                    loc_of(c, file, &tloc),
                ));
            }
            TableConstraint::Check(cc) => {
                invs.push(check_invariant(&tname, cc.name.as_ref().map(name), &cc.expr, file, &tloc)?);
            }
            other => {
                return Err(AnalyzeError::at(&loc_of(other, file, &tloc), format!("unsupported constraint `{other}`")));
            }
        }
    }
    for inv in &invs {
        for c in inv.kind.columns() {
            if c.table == tname && table.column(&c.column).is_none() {
                return Err(AnalyzeError::at(&inv.loc, format!("unknown column `{}` in table `{tname}`", c.column)));
            }
        }
    }
    schema.tables.push(table);
    schema.invariants.extend(invs);
    Ok(())
}

fn key_columns(table: &Table, cols: &[IndexColumn], file: &str, loc: &Loc) -> Result<Vec<String>> {
    cols.iter()
        .map(|ic| {
            let id = column_ident(&ic.column.expr)
                .ok_or_else(|| AnalyzeError::at(&loc_of(&ic.column.expr, file, loc), "expected a column name"))?;
            let c = name(id);
            if table.column(&c).is_none() {
                return Err(AnalyzeError::at(
                    &ident_loc(id, file, loc),
                    format!("unknown column `{c}` in table `{}`", table.name),
                ));
            }
            Ok(c)
        })
        .collect()
}

#[allow(clippy::too_many_arguments)]
fn fk_invariant(
    cname: Option<String>,
    table: &str,
    cols: Vec<(String, Loc)>,
    parent: (&sqlparser::ast::Ident, &str, &Loc),
    refs: Vec<(String, Loc)>,
    on_delete: Option<&ReferentialAction>,
    loc: Loc,
) -> PendingFk {
    let (pid, file, fb) = parent;
    let columns: Vec<String> = cols.iter().map(|c| c.0.clone()).collect();
    let name = cname.unwrap_or_else(|| format!("{table}.{}", columns.join(",")));
    let mut locs = vec![ident_loc(pid, file, fb)];
    locs.extend(refs.iter().map(|r| r.1.clone()));
    let inv = Invariant {
        name,
        kind: InvariantKind::ForeignKey {
            table: table.to_string(),
            columns,
            parent: crate::sqlutil::name(pid),
            parent_columns: refs.into_iter().map(|r| r.0).collect(),
            cascade: matches!(on_delete, Some(ReferentialAction::Cascade)),
        },
        loc,
    };
    (inv, locs)
}

fn check_fk(schema: &Schema, inv: &Invariant, locs: &[Loc]) -> Result<()> {
    let InvariantKind::ForeignKey { columns, parent, parent_columns, .. } = &inv.kind else { return Ok(()) };
    let Some(p) = schema.table(parent) else {
        return Err(AnalyzeError::at(&locs[0], format!("unknown table `{parent}`")));
    };
    for (i, c) in parent_columns.iter().enumerate() {
        if p.column(c).is_none() {
            return Err(AnalyzeError::at(&locs[i + 1], format!("unknown column `{c}` in table `{parent}`")));
        }
    }
    let n = if parent_columns.is_empty() { 1 } else { parent_columns.len() };
    if n != columns.len() {
        return Err(AnalyzeError::at(&inv.loc, "foreign key: the two column lists differ in length"));
    }
    Ok(())
}

fn check_invariant(table: &str, cname: Option<String>, e: &Expr, file: &str, fb: &Loc) -> Result<Invariant> {
    let loc = loc_of(e, file, fb);
    let unsupported = || {
        AnalyzeError::at(
            &loc,
            format!(
                "unsupported CHECK `{e}`: only `column op constant` with op one of = <> < <= > >=, or `column IS NOT NULL`"
            ),
        )
    };
    match e {
        Expr::Nested(inner) => check_invariant(table, cname, inner, file, fb),
        Expr::IsNotNull(inner) => {
            let id = column_ident(inner).ok_or_else(unsupported)?;
            Ok(Invariant {
                name: cname.unwrap_or_else(|| format!("{table}.{}", name(id))),
                kind: InvariantKind::NotNull { table: table.to_string(), column: name(id) },
                loc: ident_loc(id, file, fb),
            })
        }
        Expr::BinaryOp { left, op, right } => {
            let op = cmp_op(op).ok_or_else(unsupported)?;
            let (id, op, value) = match (column_ident(left), int_const(right), column_ident(right), int_const(left)) {
                (Some(id), Some(v), _, _) => (id, op, v),
                (_, _, Some(id), Some(v)) => (id, op.flipped(), v),
                _ => return Err(unsupported()),
            };
            Ok(Invariant {
                name: cname.unwrap_or_else(|| format!("{table}.{}", name(id))),
                kind: InvariantKind::Check { table: table.to_string(), column: name(id), op, value },
                loc: ident_loc(id, file, fb),
            })
        }
        _ => Err(unsupported()),
    }
}

/// A cursor over an annotation's arguments that knows each character's column.
struct Args<'a> {
    text: &'a str,
    pos: usize,
    ann: &'a Annotation,
}

impl<'a> Args<'a> {
    fn loc(&self) -> Loc {
        Loc { column: self.ann.args_column + self.pos as u64, ..self.ann.loc.clone() }
    }
    fn skip_ws(&mut self) {
        while self.text[self.pos..].starts_with(char::is_whitespace) {
            self.pos += 1;
        }
    }
    fn err<T>(&self, msg: impl Into<String>) -> Result<T> {
        Err(AnalyzeError::at(&self.loc(), msg))
    }
    fn at_end(&mut self) -> bool {
        self.skip_ws();
        self.pos >= self.text.len()
    }
    fn ident(&mut self) -> Result<(String, Loc)> {
        self.skip_ws();
        let loc = self.loc();
        let rest = &self.text[self.pos..];
        let n = rest.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).unwrap_or(rest.len());
        if n == 0 || rest.starts_with(|c: char| c.is_ascii_digit()) {
            return self.err(format!("@{}: expected a name", self.ann.word));
        }
        self.pos += n;
        Ok((rest[..n].to_ascii_lowercase(), loc))
    }
    fn eat(&mut self, s: &str) -> bool {
        self.skip_ws();
        if self.text[self.pos..].to_ascii_lowercase().starts_with(s) {
            self.pos += s.len();
            true
        } else {
            false
        }
    }
    /// `[NAME:]`: an optional invariant name.
    fn opt_name(&mut self) -> Result<Option<String>> {
        let save = self.pos;
        if let Ok((n, _)) = self.ident()
            && self.eat(":")
        {
            return Ok(Some(n));
        }
        self.pos = save;
        Ok(None)
    }
    /// `table.column`, checked against the schema.
    fn colref(&mut self, schema: &Schema) -> Result<(ColRef, Loc)> {
        let (t, tloc) = self.ident()?;
        if !self.eat(".") {
            return self.err(format!("@{}: expected `table.column`", self.ann.word));
        }
        let (c, cloc) = self.ident()?;
        let Some(table) = schema.table(&t) else {
            return Err(AnalyzeError::at(&tloc, format!("unknown table `{t}`")));
        };
        if table.column(&c).is_none() {
            return Err(AnalyzeError::at(&cloc, format!("unknown column `{c}` in table `{t}`")));
        }
        Ok((ColRef { table: t, column: c }, tloc))
    }
    fn end(&mut self) -> Result<()> {
        if self.at_end() { Ok(()) } else { self.err(format!("@{}: unexpected text", self.ann.word)) }
    }
}

/// Applies `-- @...` annotations, then classifies `CHECK`s on counters as counter invariants.
pub fn apply_annotations(schema: &mut Schema, anns: &[Annotation]) -> Result<()> {
    // Column marks first: a `@view` or `@sequence` may name a counter marked further down.
    for ann in anns {
        let mut a = Args { text: &ann.args, pos: 0, ann };
        match ann.word.as_str() {
            "counter" | "unique-any" => loop {
                let (c, _) = a.colref(schema)?;
                let col = schema.tables.iter_mut().find(|t| t.name == c.table).unwrap().column_mut(&c.column).unwrap();
                if ann.word == "counter" {
                    col.counter = true;
                } else {
                    col.unique_any = true;
                }
                if a.at_end() {
                    break;
                }
                if !a.eat(",") {
                    return a.err(format!("@{}: expected `,` or the end of the line", ann.word));
                }
            },
            "sequence" | "index" | "view" => {}
            other => {
                return Err(AnalyzeError::at(
                    &ann.loc,
                    format!("unknown annotation `@{other}` (known: @counter, @unique-any, @sequence, @index, @view)"),
                ));
            }
        }
    }
    for ann in anns {
        let mut a = Args { text: &ann.args, pos: 0, ann };
        let inv = match ann.word.as_str() {
            "sequence" => {
                let n = a.opt_name()?;
                let (c, _) = a.colref(schema)?;
                if !a.eat("by ") {
                    return a.err("@sequence: expected `BY counter_table.column`");
                }
                let (g, gloc) = a.colref(schema)?;
                a.end()?;
                if !schema.is_counter(&g.table, &g.column) {
                    return Err(AnalyzeError::at(&gloc, format!("@sequence: `{g}` must be declared a @counter")));
                }
                Invariant {
                    name: n.unwrap_or_else(|| c.to_string()),
                    kind: InvariantKind::AutoIncrement { table: c.table, column: c.column, counter: Some(g) },
                    loc: ann.loc.clone(),
                }
            }
            "index" => {
                let n = a.opt_name()?;
                let (c, _) = a.colref(schema)?;
                a.end()?;
                Invariant {
                    name: n.unwrap_or_else(|| format!("index {c}")),
                    kind: InvariantKind::Index { table: c.table, column: c.column },
                    loc: ann.loc.clone(),
                }
            }
            "view" => view(schema, &mut a)?,
            _ => continue,
        };
        schema.invariants.push(inv);
    }
    dedupe_names(&mut schema.invariants);
    for inv in &mut schema.invariants {
        if let InvariantKind::Check { table, column, op, value } = &inv.kind {
            let t = schema.tables.iter().find(|t| &t.name == table).unwrap();
            if t.column(column).is_some_and(|c| c.counter) {
                inv.kind =
                    InvariantKind::Counter { table: table.clone(), column: column.clone(), op: *op, value: *value };
            }
        }
    }
    Ok(())
}

fn view(schema: &Schema, a: &mut Args) -> Result<Invariant> {
    let n = a.opt_name()?;
    let mut columns = Vec::new();
    loop {
        let (c, cloc) = a.colref(schema)?;
        if !schema.is_counter(&c.table, &c.column) {
            return Err(AnalyzeError::at(&cloc, format!("@view: `{c}` must be declared a @counter")));
        }
        if columns.first().is_some_and(|f: &ColRef| f.table != c.table) {
            return Err(AnalyzeError::at(&cloc, "@view: the view's columns must be in one table"));
        }
        columns.push(c);
        if !a.eat("+") {
            break;
        }
    }
    if !a.eat("=") {
        return a.err("@view: expected `=` and a SELECT");
    }
    a.skip_ws();
    let loc = a.loc();
    let file = loc.file.clone();
    let padded =
        format!("{}{}{}", "\n".repeat(loc.line as usize - 1), " ".repeat(loc.column as usize - 1), &a.text[a.pos..]);
    let stmts = source::parse(&padded, &file, &loc)?;
    let shape = || {
        AnalyzeError::at(
            &loc,
            "@view: expected `SELECT SUM(column) | COUNT(*) FROM table [WHERE column IS [NOT] NULL]`",
        )
    };
    let [Statement::Query(q)] = stmts.as_slice() else { return Err(shape()) };
    let SetExpr::Select(sel) = q.body.as_ref() else { return Err(shape()) };
    let ([SelectItem::UnnamedExpr(Expr::Function(f))], [from]) = (sel.projection.as_slice(), sel.from.as_slice())
    else {
        return Err(shape());
    };
    let TableFactor::Table { name: tn, .. } = &from.relation else { return Err(shape()) };
    let bid = object_ident(tn, &file, &loc)?;
    let base = known_table(schema, &bid, &file, &loc)?;
    let fname = f.name.to_string().to_ascii_lowercase();
    let FunctionArguments::List(args) = &f.args else { return Err(shape()) };
    let col_of = |e: &Expr| -> Result<String> {
        let id = column_ident(e).ok_or_else(shape)?;
        let c = name(id);
        if base.column(&c).is_none() {
            return Err(AnalyzeError::at(
                &ident_loc(id, &file, &loc),
                format!("unknown column `{c}` in table `{}`", base.name),
            ));
        }
        Ok(c)
    };
    let aggregate = match (fname.as_str(), args.args.as_slice()) {
        ("count", [FunctionArg::Unnamed(FunctionArgExpr::Wildcard)]) => Aggregate::Count,
        ("sum", [FunctionArg::Unnamed(FunctionArgExpr::Expr(e))]) => Aggregate::Sum(col_of(e)?),
        _ => return Err(shape()),
    };
    let filter = match &sel.selection {
        None => None,
        Some(Expr::IsNull(e)) => Some(NullFilter { column: col_of(e)?, is_null: true }),
        Some(Expr::IsNotNull(e)) => Some(NullFilter { column: col_of(e)?, is_null: false }),
        Some(_) => return Err(shape()),
    };
    Ok(Invariant {
        name: n.unwrap_or_else(|| columns.iter().map(|c| c.to_string()).collect::<Vec<_>>().join("+")),
        kind: InvariantKind::View { columns, base: base.name.clone(), aggregate, filter },
        loc: a.ann.loc.clone(),
    })
}

/// Gives invariants that share a name distinct names: the first one that is not a NOT NULL keeps it, the
/// others get their kind appended (`orders.id (not-null)`), and a number if that is still taken.
fn dedupe_names(invs: &mut [Invariant]) {
    let n = invs.len();
    for i in 0..n {
        let same: Vec<usize> = (0..n).filter(|&j| invs[j].name == invs[i].name).collect();
        if same.len() < 2 {
            continue;
        }
        let keep =
            same.iter().copied().find(|&j| !matches!(invs[j].kind, InvariantKind::NotNull { .. })).unwrap_or(same[0]);
        for j in same {
            if j != keep {
                let base = format!("{} ({})", invs[j].name, invs[j].kind.kind_name());
                let mut name = base.clone();
                let mut k = 2;
                while invs.iter().any(|x| x.name == name) {
                    name = format!("{base} #{k}");
                    k += 1;
                }
                invs[j].name = name;
            }
        }
    }
}
