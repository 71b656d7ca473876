//! Small helpers over sqlparser's AST shared by the DDL and DML readers.

use crate::error::{AnalyzeError, Loc, Result};
use crate::model::{CmpOp, Operand};
use sqlparser::ast::Spanned;
use sqlparser::ast::{BinaryOperator, Expr, Ident, ObjectName, ObjectNamePart, UnaryOperator, Value};

/// An identifier's lower-cased name.
pub fn name(i: &Ident) -> String {
    i.value.to_ascii_lowercase()
}

/// Location of an identifier.
pub fn ident_loc(i: &Ident, file: &str, fallback: &Loc) -> Loc {
    Loc::of_span(file, i.span, fallback)
}

/// Location of any AST node.
pub fn loc_of<T: Spanned>(node: &T, file: &str, fallback: &Loc) -> Loc {
    Loc::of_span(file, node.span(), fallback)
}

/// The last part of a (possibly qualified) object name, lower-cased, with its identifier.
pub fn object_ident(o: &ObjectName, file: &str, fallback: &Loc) -> Result<Ident> {
    match o.0.last() {
        Some(ObjectNamePart::Identifier(i)) => Ok(i.clone()),
        _ => Err(AnalyzeError::at(&loc_of(o, file, fallback), format!("unsupported name `{o}`"))),
    }
}

/// A comparison operator.
pub fn cmp_op(op: &BinaryOperator) -> Option<CmpOp> {
    Some(match op {
        BinaryOperator::Eq => CmpOp::Eq,
        BinaryOperator::NotEq => CmpOp::Ne,
        BinaryOperator::Lt => CmpOp::Lt,
        BinaryOperator::LtEq => CmpOp::Le,
        BinaryOperator::Gt => CmpOp::Gt,
        BinaryOperator::GtEq => CmpOp::Ge,
        _ => return None,
    })
}

/// An integer constant (`5`, `-5`, `(5)`), if the expression is one.
pub fn int_const(e: &Expr) -> Option<i64> {
    match e {
        Expr::Value(v) => match &v.value {
            Value::Number(s, _) => s.parse().ok(),
            _ => None,
        },
        Expr::UnaryOp { op: UnaryOperator::Minus, expr } => int_const(expr).map(|v| -v),
        Expr::UnaryOp { op: UnaryOperator::Plus, expr } => int_const(expr),
        Expr::Nested(e) => int_const(e),
        _ => None,
    }
}

/// A template operand: `?`/`$n`, an integer, `NULL` or `DEFAULT`, if the expression is one.
pub fn operand(e: &Expr) -> Option<Operand> {
    if let Some(v) = int_const(e) {
        return Some(Operand::Const(v));
    }
    match e {
        Expr::Value(v) => match &v.value {
            Value::Placeholder(_) => Some(Operand::Param),
            Value::Null => Some(Operand::Null),
            _ => None,
        },
        Expr::Identifier(i) if i.value.eq_ignore_ascii_case("default") && i.quote_style.is_none() => {
            Some(Operand::Default)
        }
        Expr::Nested(e) => operand(e),
        _ => None,
    }
}

/// The column an expression names (`c` or `t.c`), with its identifier.
pub fn column_ident(e: &Expr) -> Option<&Ident> {
    match e {
        Expr::Identifier(i) => Some(i),
        Expr::CompoundIdentifier(parts) => parts.last(),
        Expr::Nested(e) => column_ident(e),
        _ => None,
    }
}
