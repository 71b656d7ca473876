//! Identifiers of datacenters, partitions, servers, clients and operations.

use serde::{Deserialize, Serialize};
use std::fmt;

/// A datacenter (a "site" in the Tomsic paper), numbered from 0.
pub type DcId = u16;
/// A partition index inside a datacenter, numbered from 0. Sibling partitions share the index.
pub type PartitionId = u16;

/// Which of a partition's servers in one datacenter (0 unless a replica group places several there).
pub type ReplicaId = u16;

/// One partition server: replica `replica` of partition `partition` in datacenter `dc`. Where a partition's
/// replicas live is the [`crate::Topology`]'s placement; with one replica per datacenter (the causal family's
/// full geo-replication) every server is replica 0 of its datacenter.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ServerId {
    pub dc: DcId,
    pub partition: PartitionId,
    #[serde(default)]
    pub replica: ReplicaId,
}

impl ServerId {
    /// Replica 0 of `partition` in `dc`.
    pub const fn new(dc: DcId, partition: PartitionId) -> Self {
        Self { dc, partition, replica: 0 }
    }

    pub const fn replica(dc: DcId, partition: PartitionId, replica: ReplicaId) -> Self {
        Self { dc, partition, replica }
    }
}

impl fmt::Display for ServerId {
    /// `dc1/p0`, or `dc0/p1/r2` for a replica other than 0.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "dc{}/p{}", self.dc, self.partition)?;
        if self.replica != 0 {
            write!(f, "/r{}", self.replica)?;
        }
        Ok(())
    }
}

impl std::str::FromStr for ServerId {
    type Err = String;

    /// `dcD/pP` or `dcD/pP/rR`, as `Display` writes it.
    fn from_str(s: &str) -> Result<Self, String> {
        let bad = || format!("{s:?} is not a server like dc1/p0 or dc0/p1/r2");
        let mut parts = s.trim().split('/');
        let dc = parts.next().and_then(|d| d.strip_prefix("dc")).and_then(|d| d.parse().ok()).ok_or_else(bad)?;
        let p = parts.next().and_then(|p| p.strip_prefix('p')).and_then(|p| p.parse().ok()).ok_or_else(bad)?;
        let r = match parts.next() {
            None => 0,
            Some(r) => r.strip_prefix('r').and_then(|r| r.parse().ok()).ok_or_else(bad)?,
        };
        if parts.next().is_some() {
            return Err(bad());
        }
        Ok(ServerId::replica(dc, p, r))
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
