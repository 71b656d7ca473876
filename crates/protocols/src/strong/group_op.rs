//! What `amcast-kv` and `tpc-kv` share: a one-shot operation over the groups of its keys (a read-only
//! transaction, a PUT or a blind multi-key update), and the reply assembled from the groups' reads.

use serde::{Deserialize, Serialize};
use snowline_core::{
    Key, Offers, OpError, OpMetrics, PartitionId, ReadResult, Reply, Request, Topology, Value, Version,
};
use std::collections::{BTreeMap, BTreeSet};

/// An operation as it travels to its groups: all its keys (each group takes its own).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupOp {
    pub reads: Vec<Key>,
    pub writes: Vec<(Key, Value)>,
}

impl GroupOp {
    /// The operation a request asks for, or why the protocol `name` refuses it.
    pub fn from_request(request: Request, name: &str, offers: Offers) -> Result<Self, OpError> {
        let op = match request {
            Request::Rot { keys } => GroupOp { reads: keys, writes: Vec::new() },
            Request::Put { key, value } => GroupOp { reads: Vec::new(), writes: vec![(key, value)] },
            Request::Update { writes } => GroupOp { reads: Vec::new(), writes },
            other => return Err(offers.refusal(name, &other)),
        };
        if op.reads.is_empty() && op.writes.is_empty() {
            return Err(OpError::Rejected("an operation needs at least one key".into()));
        }
        Ok(op)
    }

    /// The groups (partitions) holding its keys.
    pub fn groups(&self, topology: &Topology) -> BTreeSet<PartitionId> {
        self.reads.iter().chain(self.writes.iter().map(|(k, _)| k)).map(|k| topology.partition_of(k)).collect()
    }
}

/// The version of a key never written.
pub(crate) const INITIAL: Version = Version { time: 0, dc: 0 };

/// The reply to an operation that read `reads` (in its order) from what the groups `found`, and wrote at
/// `commit` if it wrote.
pub(crate) fn reply<'a>(
    reads: &[Key],
    found: impl IntoIterator<Item = &'a (Key, Option<Value>, Version)>,
    commit: Option<Version>,
) -> Reply {
    let found: BTreeMap<&Key, (&Option<Value>, Version)> =
        found.into_iter().map(|(k, v, ver)| (k, (v, *ver))).collect();
    let reads: Vec<ReadResult> = reads
        .iter()
        .map(|k| {
            let (value, version) = found.get(k).map_or((None, INITIAL), |(v, ver)| ((*v).clone(), *ver));
            ReadResult { key: k.clone(), value, version, versions_skipped: 0 }
        })
        .collect();
    let metrics = OpMetrics {
        rounds: 1,
        versions_returned: u32::try_from(reads.len()).unwrap_or(u32::MAX),
        ..OpMetrics::default()
    };
    Reply { reads, commit, metrics, ..Reply::default() }
}
