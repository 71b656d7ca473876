//! Consistency levels and which checks each one runs. The levels are not a chain: `si` and `us` are
//! incomparable, and so are `pos` and `strict-ser`, or `tcc` and `psi` (definitions and sources: crate
//! documentation and `docs/CHECKER.md`). The declaration order is only the order levels are listed in.

use serde::Serialize;
use std::fmt;
use std::str::FromStr;

/// A consistency level the checker can prove. Definitions: crate documentation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum Level {
    #[serde(rename = "rc")]
    Rc,
    #[serde(rename = "ra")]
    Ra,
    #[serde(rename = "causal-snapshot")]
    CausalSnapshot,
    #[serde(rename = "causal")]
    Causal,
    #[serde(rename = "tcc")]
    Tcc,
    /// Serializability.
    #[serde(rename = "ser")]
    Ser,
    /// Strict serializability: serializability respecting real time.
    #[serde(rename = "strict-ser")]
    StrictSer,
    /// Process-ordered serializability: serializability respecting each process's order.
    #[serde(rename = "pos")]
    Pos,
    /// Snapshot isolation.
    #[serde(rename = "si")]
    Si,
    /// Parallel snapshot isolation.
    #[serde(rename = "psi")]
    Psi,
    /// Non-monotonic snapshot isolation.
    #[serde(rename = "nmsi")]
    Nmsi,
    /// Update serializability.
    #[serde(rename = "us")]
    Us,
}

impl Level {
    pub const ALL: [Level; 12] = [
        Level::Rc,
        Level::Ra,
        Level::CausalSnapshot,
        Level::Causal,
        Level::Tcc,
        Level::Ser,
        Level::StrictSer,
        Level::Pos,
        Level::Si,
        Level::Psi,
        Level::Nmsi,
        Level::Us,
    ];

    /// The levels defined by what each read observes (visibility and session guarantees).
    pub const VISIBILITY: [Level; 5] = [Level::Rc, Level::Ra, Level::CausalSnapshot, Level::Causal, Level::Tcc];

    /// The levels defined by cycles in the dependency graph under some version order.
    pub const GRAPH: [Level; 7] =
        [Level::Ser, Level::StrictSer, Level::Pos, Level::Si, Level::Psi, Level::Nmsi, Level::Us];

    pub fn name(self) -> &'static str {
        match self {
            Level::Rc => "rc",
            Level::Ra => "ra",
            Level::CausalSnapshot => "causal-snapshot",
            Level::Causal => "causal",
            Level::Tcc => "tcc",
            Level::Ser => "ser",
            Level::StrictSer => "strict-ser",
            Level::Pos => "pos",
            Level::Si => "si",
            Level::Psi => "psi",
            Level::Nmsi => "nmsi",
            Level::Us => "us",
        }
    }

    /// A dependency-graph level (one of [`Level::GRAPH`]).
    pub fn is_graph(self) -> bool {
        Level::GRAPH.contains(&self)
    }

    /// Atomic visibility (`fractured-read`).
    pub(crate) fn atomic(self) -> bool {
        matches!(self, Level::Ra | Level::Tcc)
    }

    /// Order-preserving visibility under happens-before (`causality-gap`).
    pub(crate) fn order_preserving(self) -> bool {
        matches!(self, Level::CausalSnapshot | Level::Causal | Level::Tcc)
    }

    /// Session guarantees and acyclic happens-before.
    pub(crate) fn causal(self) -> bool {
        matches!(self, Level::Causal | Level::Tcc)
    }

    /// Uses the per-key version order (inferred or reported); commit orders are checked only then.
    pub(crate) fn uses_version_order(self) -> bool {
        self != Level::Rc
    }

    /// A graph level whose dependency graph includes session order (SO edges).
    pub(crate) fn session_order(self) -> bool {
        matches!(self, Level::Pos | Level::Si | Level::Psi)
    }
}

impl fmt::Display for Level {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// An unknown level name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnknownLevel(pub String);

impl fmt::Display for UnknownLevel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = Level::ALL.iter().map(|l| l.name()).collect();
        write!(f, "unknown consistency level {:?}", self.0)?;
        if let Some(near) = self.suggestion() {
            write!(f, " (did you mean {near}?)")?;
        }
        write!(f, "; valid levels: {}", names.join(", "))
    }
}

impl UnknownLevel {
    /// The level whose name is nearest to the unknown one, if it looks like a slip (`strict-serr`).
    pub fn suggestion(&self) -> Option<&'static str> {
        snowline_core::suggest::did_you_mean(&self.0, Level::ALL.iter().map(|l| l.name()))
    }
}

impl std::error::Error for UnknownLevel {}

impl FromStr for Level {
    type Err = UnknownLevel;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Level::ALL.into_iter().find(|l| l.name() == s).ok_or_else(|| UnknownLevel(s.to_string()))
    }
}
