//! Located errors: every rejection of the input names the file, line and column it comes from.

use std::fmt;

/// A position in an input file (lines and columns count from 1).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Loc {
    /// The file name as the caller gave it.
    pub file: String,
    /// Line, from 1.
    pub line: u64,
    /// Column, from 1.
    pub column: u64,
}

impl Loc {
    /// A location in `file`.
    pub fn new(file: &str, line: u64, column: u64) -> Loc {
        Loc { file: file.to_string(), line: line.max(1), column: column.max(1) }
    }

    /// The location of a sqlparser span's start (sqlparser counts from 1; an empty span is line 0).
    pub fn of_span(file: &str, span: sqlparser::tokenizer::Span, fallback: &Loc) -> Loc {
        if span.start.line == 0 { fallback.clone() } else { Loc::new(file, span.start.line, span.start.column) }
    }
}

impl fmt::Display for Loc {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}", self.file, self.line, self.column)
    }
}

/// Why the analyzer gave no verdict: bad input, located in its file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{loc}: {message}")]
pub struct AnalyzeError {
    /// Where the problem is.
    pub loc: Loc,
    /// What is wrong, in words.
    pub message: String,
}

impl AnalyzeError {
    /// An error at `loc`.
    pub fn at(loc: &Loc, message: impl Into<String>) -> AnalyzeError {
        AnalyzeError { loc: loc.clone(), message: message.into() }
    }
}

/// Shorthand for results of the analyzer's parsing stages.
pub type Result<T> = std::result::Result<T, AnalyzeError>;
