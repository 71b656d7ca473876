//! The client-facing operations and results: one set of types for every protocol, so that one workload
//! generator, one history recorder and one checker serve them all.

use crate::ids::DcId;
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// A key. Cheap to clone: protocols copy keys into messages and version chains.
pub type Key = Arc<str>;
/// A value. Cheap to clone for the same reason. Every value written in a recorded run is unique.
pub type Value = Arc<str>;

/// Identifies one version of a key: the commit timestamp the protocol gave it and the datacenter where it
/// was committed. Ordered by `(time, dc)`, the last-writer-wins order used to converge replicas.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Version {
    pub time: u64,
    pub dc: DcId,
}

impl Version {
    /// The version of a key never written (reads of it return `None`).
    pub const INITIAL: Version = Version { time: 0, dc: 0 };
}

/// What an application asks a client session to do.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Request {
    /// A one-shot read-only transaction (ROT) over a set of keys. A GET is a ROT of one key.
    Rot { keys: Vec<Key> },
    /// A multi-shot read-only transaction (Tomsic §5.3: "10 rounds of 100 parallel reads"): rounds of parallel
    /// reads over one snapshot, each round issued once the previous one has answered. The reply's reads are
    /// every round's results, in order. Protocols whose read-only transactions are one-shot reject it.
    RotRounds { rounds: Vec<Vec<Key>> },
    /// A single-key write.
    Put { key: Key, value: Value },
    /// A blind multi-key update transaction: all writes become visible atomically, or none.
    Update { writes: Vec<(Key, Value)> },
    /// Interactive read-write transactions (`Offers::interactive`): open one in this session. A session has
    /// at most one open transaction; its next requests are `Read`s, then one `Commit` or `Abort`.
    Begin,
    /// One round of reads in the session's open transaction (several calls: several rounds). Reads of keys
    /// the transaction already wrote are answered from its write buffer by the client library, not here.
    Read { keys: Vec<Key> },
    /// Commit the open transaction with its buffered writes (possibly none): `Ok` with the commit version,
    /// or `OpError::Aborted` with the cause. Either way the transaction is closed.
    Commit { writes: Vec<(Key, Value)> },
    /// Abort the open transaction (the application's choice): it releases what it holds and has no effect.
    Abort,
    /// Run a registered stored procedure (`Offers::stored_procedures`; registry: [`crate::procedure`]).
    /// The reply lists what it read (`reads`) and wrote (`writes`), in program order.
    Call { procedure: String, args: Vec<Value> },
}

impl Request {
    /// The operation-type label used by metrics ("rot", "put", "update").
    pub fn kind(&self) -> &'static str {
        match self {
            Request::Rot { keys } if keys.len() == 1 => "get",
            Request::Rot { .. } => "rot",
            Request::RotRounds { .. } => "rot-rounds",
            Request::Put { .. } => "put",
            Request::Update { .. } => "update",
            Request::Begin => "begin",
            Request::Read { .. } => "txn-read",
            Request::Commit { .. } => "commit",
            Request::Abort => "abort",
            Request::Call { .. } => "call",
        }
    }

    /// A read-only transaction (its unknown outcome is a certain no-effect).
    pub fn is_read_only(&self) -> bool {
        matches!(self, Request::Rot { .. } | Request::RotRounds { .. })
    }

    /// A step of an interactive transaction (`Begin`, `Read`, `Commit`, `Abort`).
    pub fn is_interactive(&self) -> bool {
        matches!(self, Request::Begin | Request::Read { .. } | Request::Commit { .. } | Request::Abort)
    }

    /// The keys this request reads, in order (every round of a multi-shot ROT).
    pub fn reads(&self) -> Vec<Key> {
        match self {
            Request::Rot { keys } => keys.clone(),
            Request::RotRounds { rounds } => rounds.concat(),
            Request::Read { keys } => keys.clone(),
            _ => Vec::new(),
        }
    }

    /// The keys and values this request writes, in order.
    pub fn writes(&self) -> Vec<(Key, Value)> {
        match self {
            Request::Put { key, value } => vec![(key.clone(), value.clone())],
            Request::Update { writes } | Request::Commit { writes } => writes.clone(),
            _ => Vec::new(),
        }
    }
}

/// One key's result in a read-only transaction.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReadResult {
    pub key: Key,
    /// `None`: the initial state (never written, as far as the snapshot read can see).
    pub value: Option<Value>,
    pub version: Version,
    /// Versions of this key newer than the returned one that the answering server had committed when it
    /// answered (Tomsic §5.3 staleness: 0 means the read was fresh).
    pub versions_skipped: u32,
}

/// Per-operation costs every protocol reports through the same boundary.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OpMetrics {
    /// Rounds of client- or coordinator-to-partition requests the operation needed.
    pub rounds: u32,
    /// How many times a read-only transaction ran whole (Rococo runs one again until two consecutive
    /// executions agree); 0 where the protocol does not count them.
    pub executions: u32,
    /// Versions the servers sent back (a one-version ROT returns one per key).
    pub versions_returned: u32,
    /// Total time the operation's requests waited at servers (Cure blocks; minimal-delay protocols don't).
    pub blocked_ns: u64,
    /// COPS-SNOW / CC-LO only: the cost of the readers check this write ran (SNOW §5.3, Contrarian §3).
    /// (No `skip_serializing_if` anywhere in wire types: postcard is not self-describing.)
    pub readers_check: Option<ReadersCheckCost>,
    /// Snapshot metadata the transaction shipped, in bytes (the Jessy family: the dependence vectors its
    /// reads carried and received and its commit's snapshot and read set; RAMP: the timestamps, write sets
    /// or Bloom filters its versions carried and the timestamp sets of its second round), reported once, on
    /// the operation that ends it; 0 where not measured.
    pub metadata_bytes: u64,
}

/// What one readers check cost: the metadata a write collected from the partitions of its dependencies.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReadersCheckCost {
    /// ROT ids received, counting repeats across partitions.
    pub rot_ids_total: u64,
    /// Distinct ROT ids received.
    pub rot_ids_distinct: u64,
    /// Dependency keys checked.
    pub keys_checked: u64,
    /// Partitions contacted.
    pub partitions_contacted: u64,
}

/// The result of a completed operation.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reply {
    /// For a ROT: one result per requested key, in request order.
    pub reads: Vec<ReadResult>,
    /// For a write: the version the writes were committed with.
    pub commit: Option<Version>,
    /// For a stored procedure: the writes it made, in program order (their values may depend on its reads).
    pub writes: Vec<(Key, Value)>,
    pub metrics: OpMetrics,
}

/// Why an operation did not complete with a reply.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
pub enum OpError {
    /// The operation was refused and certainly had no effect: bad input, or a request the protocol does
    /// not offer. Retrying it unchanged fails the same way.
    #[error("rejected: {0}")]
    Rejected(String),
    /// The transaction aborted: it certainly had no effect, and running it again may commit.
    #[error("aborted ({}): {}", .0.cause, .0.detail)]
    Aborted(Abort),
    /// The outcome is unknown: a write may still take effect later (timeout, lost connection).
    #[error("outcome unknown: {0}")]
    Unknown(String),
}

impl OpError {
    /// Whether the operation certainly had no effect.
    pub fn is_definite(&self) -> bool {
        matches!(self, OpError::Rejected(_) | OpError::Aborted(_))
    }

    /// An abort with its cause and a sentence saying what happened.
    pub fn aborted(cause: AbortCause, detail: impl Into<String>) -> Self {
        OpError::Aborted(Abort { cause, detail: detail.into() })
    }

    /// The abort cause, when this is an abort.
    pub fn abort_cause(&self) -> Option<AbortCause> {
        match self {
            OpError::Aborted(a) => Some(a.cause),
            _ => None,
        }
    }
}

/// A transaction abort: why, in a word a metric can count, and in a sentence a user can read.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Abort {
    pub cause: AbortCause,
    pub detail: String,
}

/// Why a transaction aborted. One word each, as metrics, histories and the CLI print them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AbortCause {
    /// A conflicting transaction held or changed what this one needed (lock conflict under no-wait,
    /// a lost validation race).
    Conflict,
    /// Certification found that a concurrent committed transaction conflicts (deferred update replication).
    Certification,
    /// A participant voted no in the commit protocol.
    Vote,
    /// The deadlock policy chose this transaction as the victim (wound-wait: wounded by an older one).
    Deadlock,
    /// The transaction did not finish in time (a lock wait or a participant that did not answer).
    Timeout,
    /// The application asked for the abort.
    User,
}

impl AbortCause {
    pub const ALL: [AbortCause; 6] = [
        AbortCause::Conflict,
        AbortCause::Certification,
        AbortCause::Vote,
        AbortCause::Deadlock,
        AbortCause::Timeout,
        AbortCause::User,
    ];

    pub fn name(self) -> &'static str {
        match self {
            AbortCause::Conflict => "conflict",
            AbortCause::Certification => "certification",
            AbortCause::Vote => "vote",
            AbortCause::Deadlock => "deadlock",
            AbortCause::Timeout => "timeout",
            AbortCause::User => "user",
        }
    }
}

impl std::fmt::Display for AbortCause {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}
