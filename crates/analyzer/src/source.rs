//! Reading an input file: splitting it at `-- transaction: NAME` lines, collecting `-- @annotation` lines and
//! handing each part to sqlparser with its original line numbers.
//!
//! Only comment lines are read here, line by line; SQL itself is only ever parsed by sqlparser. Each part is
//! padded with the blank lines that precede it in the file, so sqlparser's own line and column numbers (in
//! its errors and its AST spans) are those of the original file.

use crate::error::{AnalyzeError, Loc, Result};
use sqlparser::ast::Statement;
use sqlparser::dialect::GenericDialect;
use sqlparser::parser::Parser;

/// A part of a file: the text before the first transaction header (`name` is `None`) or one transaction.
#[derive(Debug, Clone)]
pub struct Part {
    /// The transaction's name, for a part that follows a header.
    pub name: Option<String>,
    /// The header's location, or the file's start for the first part.
    pub loc: Loc,
    /// The part's text, preceded by as many newlines as lines precede it in the file.
    pub padded: String,
}

/// A `-- @word args` comment line.
#[derive(Debug, Clone)]
pub struct Annotation {
    /// The word after `@`, lower-cased.
    pub word: String,
    /// The rest of the line, trimmed.
    pub args: String,
    /// Location of the `@`.
    pub loc: Loc,
    /// Column (from 1) of the first character of `args`.
    pub args_column: u64,
}

/// The comment text of a whole-line `--` comment, with the column (from 1) where it starts.
fn comment_body(line: &str) -> Option<(&str, usize)> {
    let indent = line.len() - line.trim_start().len();
    let rest = line.trim_start().strip_prefix("--")?;
    let lead = rest.len() - rest.trim_start().len();
    Some((rest.trim_start(), indent + 2 + lead + 1))
}

/// Splits `text` into parts and annotations.
pub fn split(text: &str, file: &str) -> Result<(Vec<Part>, Vec<Annotation>)> {
    let mut parts = vec![Part { name: None, loc: Loc::new(file, 1, 1), padded: String::new() }];
    let mut annotations = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let lineno = i as u64 + 1;
        if let Some((body, col)) = comment_body(line) {
            let lower = body.to_ascii_lowercase();
            if let Some(rest) = lower.strip_prefix("transaction:") {
                let name = body[body.len() - rest.len()..].trim();
                let loc = Loc::new(file, lineno, col as u64);
                if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') {
                    return Err(AnalyzeError::at(
                        &loc,
                        format!("bad transaction name {name:?}: use letters, digits, '_' or '-'"),
                    ));
                }
                if parts.iter().any(|p| p.name.as_deref() == Some(name)) {
                    return Err(AnalyzeError::at(&loc, format!("transaction {name:?} is declared twice")));
                }
                parts.push(Part { name: Some(name.to_string()), loc, padded: "\n".repeat(i + 1) });
                continue;
            }
            if let Some(rest) = body.strip_prefix('@') {
                let word_len = rest.find(|c: char| c.is_whitespace()).unwrap_or(rest.len());
                let args = rest[word_len..].trim_start();
                let args_column = col + 1 + word_len + (rest[word_len..].len() - args.len());
                annotations.push(Annotation {
                    word: rest[..word_len].to_ascii_lowercase(),
                    args: args.trim_end().to_string(),
                    loc: Loc::new(file, lineno, col as u64),
                    args_column: args_column as u64,
                });
            }
        }
        let part = parts.last_mut().expect("one part at least");
        part.padded.push_str(line);
        part.padded.push('\n');
    }
    Ok((parts, annotations))
}

/// Parses SQL whose line numbers are already those of `file`.
pub fn parse(padded: &str, file: &str, fallback: &Loc) -> Result<Vec<Statement>> {
    Parser::parse_sql(&GenericDialect {}, padded).map_err(|e| {
        let msg = e.to_string();
        if msg.contains("found: EOF") {
            // sqlparser places the end of input oddly: point at the end of the last line with text.
            let (i, line) = padded.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()).last().unwrap_or((0, ""));
            let loc = Loc::new(file, i as u64 + 1, line.trim_end().len() as u64 + 1);
            let m = msg.strip_prefix("sql parser error: ").unwrap_or(&msg);
            let m = m.rfind(" at Line: ").map_or(m, |at| &m[..at]);
            return AnalyzeError::at(&loc, format!("syntax error: {m}"));
        }
        parser_error(&msg, file, fallback)
    })
}

/// Where each statement of already parsed SQL starts: its first token after the previous `;`.
pub fn statement_starts(padded: &str, file: &str) -> Vec<Loc> {
    use sqlparser::tokenizer::{Token, Tokenizer};
    let Ok(tokens) = Tokenizer::new(&GenericDialect {}, padded).tokenize_with_location() else { return Vec::new() };
    let mut out = Vec::new();
    let mut at_start = true;
    for t in tokens {
        match t.token {
            Token::Whitespace(_) | Token::EOF => {}
            Token::SemiColon => at_start = true,
            _ if at_start => {
                out.push(Loc::new(file, t.span.start.line, t.span.start.column));
                at_start = false;
            }
            _ => {}
        }
    }
    out
}

/// Turns sqlparser's message (`... at Line: L, Column: C`) into a located error.
pub fn parser_error(message: &str, file: &str, fallback: &Loc) -> AnalyzeError {
    let message = message.strip_prefix("sql parser error: ").unwrap_or(message);
    if let Some(at) = message.rfind(" at Line: ") {
        let tail = &message[at + " at Line: ".len()..];
        if let Some((l, c)) = tail.split_once(", Column: ") {
            let c = c.trim_end_matches(|ch: char| !ch.is_ascii_digit());
            if let (Ok(line), Ok(column)) = (l.trim().parse::<u64>(), c.trim().parse::<u64>()) {
                return AnalyzeError::at(&Loc::new(file, line, column), format!("syntax error: {}", &message[..at]));
            }
        }
    }
    AnalyzeError::at(fallback, format!("syntax error: {message}"))
}
