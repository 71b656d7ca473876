//! Consistency levels, weakest first, and which checks each one runs.

use serde::Serialize;
use std::fmt;
use std::str::FromStr;

/// A consistency level the checker can prove. Definitions: crate documentation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
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
}

impl Level {
    pub const ALL: [Level; 5] = [Level::Rc, Level::Ra, Level::CausalSnapshot, Level::Causal, Level::Tcc];

    pub fn name(self) -> &'static str {
        match self {
            Level::Rc => "rc",
            Level::Ra => "ra",
            Level::CausalSnapshot => "causal-snapshot",
            Level::Causal => "causal",
            Level::Tcc => "tcc",
        }
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
        write!(f, "unknown consistency level {:?}; valid levels: {}", self.0, names.join(", "))
    }
}

impl std::error::Error for UnknownLevel {}

impl FromStr for Level {
    type Err = UnknownLevel;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Level::ALL.into_iter().find(|l| l.name() == s).ok_or_else(|| UnknownLevel(s.to_string()))
    }
}
