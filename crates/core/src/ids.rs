//! Identifiers of datacenters, partitions, servers, clients and operations.

use serde::{Deserialize, Serialize};
use std::fmt;

/// A datacenter (a "site" in the Tomsic paper), numbered from 0.
pub type DcId = u16;
/// A partition index inside a datacenter, numbered from 0. Sibling partitions share the index.
pub type PartitionId = u16;

/// One partition server: partition `partition` of datacenter `dc`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ServerId {
    pub dc: DcId,
    pub partition: PartitionId,
}

impl ServerId {
    pub fn new(dc: DcId, partition: PartitionId) -> Self {
        Self { dc, partition }
    }
}

impl fmt::Display for ServerId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "dc{}/p{}", self.dc, self.partition)
    }
}

impl std::str::FromStr for ServerId {
    type Err = String;

    /// `dcD/pP`, as `Display` writes it.
    fn from_str(s: &str) -> Result<Self, String> {
        let bad = || format!("{s:?} is not a server like dc1/p0");
        let (dc, p) = s.trim().split_once('/').ok_or_else(bad)?;
        let dc = dc.strip_prefix("dc").and_then(|d| d.parse().ok()).ok_or_else(bad)?;
        let p = p.strip_prefix('p').and_then(|p| p.parse().ok()).ok_or_else(bad)?;
        Ok(ServerId::new(dc, p))
    }
}

/// A client session. Unique in a run; the runtime assigns it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ClientId(pub u64);

impl fmt::Display for ClientId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "c{}", self.0)
    }
}

/// Where a protocol message goes or came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Addr {
    Server(ServerId),
    Client(ClientId),
}

impl fmt::Display for Addr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Addr::Server(s) => s.fmt(f),
            Addr::Client(c) => c.fmt(f),
        }
    }
}

/// An application operation submitted to a client session; unique per session.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct OpId(pub u64);
