//! **RAMP** (`--protocol ramp-f`, `ramp-s`, `ramp-h`): Read Atomic Multi-Partition transactions. Source:
//! Bailis, Fekete, Hellerstein, Ghodsi, Stoica, "Scalable Atomic Visibility with RAMP Transactions",
//! SIGMOD 2014 (§4, Algorithms 1–3).
//!
//! RAMP gives read atomic isolation (the checker's `ra`: no fractured reads) to multi-key read-only
//! transactions and multi-key blind write transactions, without coordination between partitions: writes
//! never block reads, and a read whose first round saw part of a write transaction repairs it in a second
//! round from versions every partition already holds.
//!
//! # One mechanism, three kinds of metadata
//!
//! The three variants share servers, clients and messages ([`Ramp`]) and differ only in the metadata each
//! version carries and how a reader derives its second round from it ([`Metadata`]):
//!
//! - **RAMP-Fast** ([`WriteSets`]): a version carries its transaction's write set. Round one reads each key's
//!   latest committed version; for each key `i`, `v_latest[i]` is the highest timestamp among the returned
//!   versions whose write set contains `i`; each key whose returned version is older than that is read again
//!   at exactly `v_latest[i]`. One round without a race, two with one; metadata linear in the write set.
//! - **RAMP-Small** ([`TimestampsOnly`]): a version carries only its timestamp. Round two always asks each
//!   key for its highest version whose timestamp is among the round-one timestamps. Two rounds (a read of
//!   one key needs one: it cannot be fractured), constant metadata.
//! - **RAMP-Hybrid** ([`BloomFilters`]): a version carries a Bloom filter of its write set
//!   ([`bloom::Bloom`], size and hash count from [`ProtocolConfig::ramp_bloom_bits`] and
//!   [`ProtocolConfig::ramp_bloom_hashes`]). Round two asks a key only for the round-one timestamps above
//!   its own whose filters may contain it, for the highest version among them; a false positive finds
//!   nothing new and the reader keeps its round-one version.
//!
//! # Servers and writes
//!
//! A server keeps every key's versions (timestamp, value, metadata) and `lastCommit[key]`. `Prepare` stores a
//! transaction's versions of the server's keys, not yet visible, and is acknowledged; `Commit(ts)` raises
//! `lastCommit` of each key `ts` wrote there to at least `ts`. A read names either nothing (the version at
//! `lastCommit`) or a set of timestamps (the highest version, prepared or committed, whose timestamp is in
//! the set; RAMP-F's set has one element, the paper's `GET(i, ts)`). A write (a `Put` is a transaction of
//! one key) prepares at every partition it writes, waits for every acknowledgement, then commits at each,
//! and completes once every commit is acknowledged, as the paper's client does (Algorithm 1: `PUT_ALL`
//! returns after its commit round), so a read that starts after a write completed sees it or a newer one.
//!
//! # Choices where the paper is silent, or that this implementation adds
//!
//! - **One datacenter.** `check_topology` refuses several: the paper evaluates RAMP within one
//!   datacenter, partitioned, with no replication; its §4.6 sketches replication without fixing a design.
//!   (Every datacenter a topology names would run an independent RAMP store, which the checker's histories
//!   would show as lost writes.)
//! - **Timestamps** ([`Ts`]): unique per transaction and totally ordered, the pair (the writing client's clock
//!   reading, made strictly increasing per client and above the timestamp of every version the session
//!   has read, a Lamport clock; the client's id), compared lexicographically. The Lamport rule makes each
//!   key's version order (by timestamp) agree with happens-before: without it a session whose clock lags
//!   could overwrite a version it has read with one that loses to it, and a reader could then see the
//!   lagging transaction's write of one key beside the older version of another (the checker infers the
//!   version order from happens-before, and calls that a fractured read). The
//!   reference implementation packs a sequence number and the client id into one integer with
//!   `seq << 10 + id`, which Java parses as `seq << (10 + id)` and which is not unique either way once ids or
//!   sequence numbers grow; a pair cannot collide. The clock part makes later writes of different clients
//!   usually win, as a counter would not. A reply reports a version as `Version { time: ts.time, dc }`, which
//!   drops the client id: the registry therefore says RAMP's versions do not order each key's writes, and the
//!   checker infers the order itself.
//! - **Garbage collection** ([`ProtocolConfig::ramp_gc_delay_ms`], 4 s as in the paper's evaluation): a
//!   version older than `lastCommit` is overwritten; it is dropped once it has been overwritten for the delay
//!   (from the moment `lastCommit` passed it, or it arrived below `lastCommit`). A prepared version newer
//!   than `lastCommit` is never dropped, nor the version at `lastCommit`. A second round only asks for
//!   versions newer than `lastCommit` when its first round read the key, so a read whose rounds finish
//!   within the delay never misses one; a client restarts a read whose rounds took half the delay or more,
//!   or whose exact second-round version is gone. A transaction whose client died between its prepares and
//!   its commits leaves invisible prepared versions behind for ever (the paper's §4.5 leaves their cleanup
//!   to a cooperative termination protocol, not implemented).
//! - **Batching**: a client sends one message per partition per round, naming every key of that partition.
//! - **Validation**: a server checks every client message with the core's limits (`Check::request_keys`,
//!   `Check::request_writes`), that a prepare's and a commit's timestamp belong to the client sending it and
//!   is not too far ahead of the server's clock, that its keys live on the server's partition, and that its
//!   metadata is well-formed ([`Metadata::check`]).
//! - **Metrics**: `OpMetrics::rounds` is 1 or 2 for a read (counting restarts' rounds too) and 2 for a
//!   write; `OpMetrics::metadata_bytes` counts the RAMP metadata the operation sent and received
//!   (timestamps, write sets or filters, second-round timestamp sets), as encoded on the wire.
//! - **Durability** (`docs/DURABILITY.md`): prepares, commits and collection are logged inputs; reads are
//!   read-only and wait for the durability of the writes of the keys they return.
//! - **Links**: no FIFO assumption (a commit is sent only after its prepare was acknowledged); a lost
//!   client message makes the operation's outcome unknown (the runtime's timeout), as in every protocol.
//! - **A broken variant** for the tests: [`ProtocolConfig::ramp_skip_second_round`] completes every read
//!   after its first round, so reads racing a write transaction can be fractured.
//! - **Session tokens** (`ClientNode::save_session`): the session's Lamport time (`last_time`), so a
//!   resumed session's timestamps stay above everything it wrote or read; one datacenter, so nothing else.

pub mod bloom;
mod calls;
pub mod client;
pub mod metadata;
pub mod server;
mod versions;

pub use client::RampClient;
pub use metadata::{BloomFilters, FirstRead, Metadata, NoIsolation, TimestampsOnly, WriteSets};
pub use server::RampServer;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use snowline_core::procedure::DeferredId;
use snowline_core::{
    ClientId, DcId, Key, LinkAssumptions, Message, Offers, OpError, OpId, Protocol, ProtocolConfig, ServerId, Topology,
    Value,
};
use std::marker::PhantomData;

/// A transaction's timestamp: unique (the client id), totally ordered (lexicographically: time, then
/// client), and increasing per client.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Ts {
    /// The writing client's clock reading in nanoseconds, strictly increasing per client.
    pub time: u64,
    /// The writing client.
    pub client: ClientId,
}

/// How often a client sends again a commit that was not acknowledged. Once one partition may have made a
/// transaction visible, every partition must: a lost commit would otherwise leave it visible at some for
/// ever (readers repair it, but its merges would be counted at one partition and not at the other). Commits
/// are idempotent; the client keeps sending until every partition acknowledged, even after its operation
/// was given up on.
pub const COMMIT_RESEND_NS: u64 = 100_000_000;

/// The RAMP protocol with metadata strategy `M`: [`RampF`], [`RampS`] or [`RampH`].
pub struct Ramp<M>(PhantomData<M>);

/// RAMP-Fast: versions carry their transaction's write set.
pub type RampF = Ramp<WriteSets>;
/// RAMP-Small: versions carry their timestamp only.
pub type RampS = Ramp<TimestampsOnly>;
/// RAMP-Hybrid: versions carry a Bloom filter of their transaction's write set.
pub type RampH = Ramp<BloomFilters>;
/// The RAMP paper's baseline without concurrency control (`nocc`): one-round writes and reads, no metadata.
pub type NoCc = Ramp<NoIsolation>;

/// One key of a read, as a client asks it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Get {
    pub key: Key,
    /// `None`: the version at `lastCommit` (round one). `Some(set)`: the highest version whose timestamp is
    /// in the set, prepared or committed (round two; one timestamp for RAMP-F).
    pub among: Option<Vec<Ts>>,
}

/// A version as a server returns it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(bound = "M: Serialize + DeserializeOwned")]
pub struct Found<M> {
    pub ts: Ts,
    /// The version as written (a merge's operations: what identifies it in a history).
    pub value: Value,
    pub meta: M,
    /// A merge's row as a reader sees it ([`versions`](self::versions): the fold up to this version);
    /// `None` for a put.
    pub merged: Option<Value>,
}

impl<M> Found<M> {
    /// What the application reads: the materialized row of a merge, the value of a put.
    pub fn visible(&self) -> &Value {
        self.merged.as_ref().unwrap_or(&self.value)
    }
}

/// What a single-partition call did ([`RampMsg::RunLocal`]): its reads (the versions as written) and
/// writes, in program order.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LocalEffects {
    pub reads: Vec<(Key, Option<Value>)>,
    pub writes: Vec<(Key, Value)>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(bound = "M: Serialize + DeserializeOwned")]
pub enum RampMsg<M> {
    /// Client → server: store these versions of the server's keys, invisible until committed.
    Prepare { op: OpId, ts: Ts, writes: Vec<(Key, Value)>, meta: M },
    /// Server → client: stored.
    Prepared { op: OpId, ts: Ts },
    /// Server → client: not stored, because a bounded add ([`snowline_core::merge`]'s `-N>=F`) could take
    /// its field below the floor (or the transaction was aborted already); the client aborts the
    /// transaction everywhere.
    Refused { op: OpId, ts: Ts, reason: String },
    /// Client → server: drop transaction `ts`'s prepared versions (never committed anywhere: a refusal
    /// comes before any commit), and refuse a prepare of it that arrives later.
    Abort { op: OpId, ts: Ts },
    /// Server → client: done.
    Aborted { op: OpId, ts: Ts },
    /// Client → server: raise `lastCommit` of every key `ts` wrote here to at least `ts`; with `deferred`,
    /// also take the next sequential id there and write it with the transaction (the coordination-avoidance
    /// paper's §6: the one atomic increment at the counter's owner).
    Commit { op: OpId, ts: Ts, deferred: Option<DeferredId> },
    /// Server → client: done; `id`: the sequential id taken.
    Committed { op: OpId, ts: Ts, id: Option<u64> },
    /// Client → server: run stored procedure `procedure(args)`, every key of which lives on this partition,
    /// in one step against the latest committed versions, and commit its writes at once at a timestamp above
    /// every version of the keys it touched (a serial, single-partition transaction).
    RunLocal { op: OpId, ts: Ts, procedure: String, args: Vec<Value> },
    /// Server → client: the call's outcome and the timestamp its writes took.
    RanLocal { op: OpId, ts: Ts, outcome: Result<LocalEffects, OpError> },
    /// Client → server: read these keys (all of this server's partition); `round` is echoed back.
    Get { op: OpId, round: u32, gets: Vec<Get> },
    /// Server → client: one answer per asked key, in order (`None`: no such version, or the initial state).
    Got { op: OpId, round: u32, found: Vec<Option<Found<M>>> },
}

impl<M: Serialize + DeserializeOwned + Clone + std::fmt::Debug + Send + 'static> Message for RampMsg<M> {
    fn kind(&self) -> &'static str {
        match self {
            RampMsg::Prepare { .. } => "prepare",
            RampMsg::Prepared { .. } => "prepared",
            RampMsg::Refused { .. } => "refused",
            RampMsg::Abort { .. } => "abort",
            RampMsg::Aborted { .. } => "aborted",
            RampMsg::Commit { .. } => "commit",
            RampMsg::Committed { .. } => "committed",
            RampMsg::Get { .. } => "get",
            RampMsg::Got { .. } => "got",
            RampMsg::RunLocal { .. } => "run-local",
            RampMsg::RanLocal { .. } => "ran-local",
        }
    }

    /// A prepare writes. A commit does not count as a client's write: refusing it on a full disk would
    /// leave a transaction visible at some partitions and not yet at others, which readers repair anyway,
    /// but its client would be told it had no effect.
    fn is_client_write(&self) -> bool {
        matches!(self, RampMsg::Prepare { .. } | RampMsg::RunLocal { .. })
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum RampTimer {
    /// Server: collect overwritten versions (`generation`: the pacer's).
    Collect { generation: u64 },
    /// Client: send again the commits and aborts not acknowledged yet ([`COMMIT_RESEND_NS`]).
    ResendCommits,
}

impl<M: Metadata> Protocol for Ramp<M> {
    const NAME: &'static str = M::NAME;
    type Msg = RampMsg<M::Meta>;
    type Timer = RampTimer;
    type Server = RampServer<M>;
    type Client = RampClient<M>;
    const OFFERS: Offers = Offers {
        read_only: true,
        multi_key_rots: true,
        multi_shot_rots: false,
        blind_writes: true,
        write_transactions: true,
        interactive: false,
        stored_procedures: true,
    };
    const COORDINATION_FREE_TPCC: bool = true;

    fn links() -> LinkAssumptions {
        LinkAssumptions { fifo: false }
    }

    /// One datacenter, one server per partition (the module docs say why).
    fn check_topology(topology: &Topology) -> Result<(), String> {
        if topology.dcs == 1 && topology.one_replica_per_dc() {
            Ok(())
        } else {
            let given = if topology.dcs != 1 {
                format!("{} datacenters", topology.dcs)
            } else {
                format!("{} servers per partition", topology.replicas)
            };
            Err(format!(
                "{} runs in one datacenter with one server per partition (--dcs 1), not {given}: RAMP partitions one \
                 datacenter's data without replicating it, as the paper evaluates it",
                M::NAME
            ))
        }
    }

    fn server(id: ServerId, topology: Topology, config: &ProtocolConfig) -> RampServer<M> {
        RampServer::new(id, topology, config.clone())
    }

    fn client(id: ClientId, dc: DcId, topology: Topology, config: &ProtocolConfig) -> RampClient<M> {
        RampClient::new(id, dc, topology, config.clone())
    }
}

/// Bytes of `t` on the wire (postcard), for the metadata metric: counted by a pass over `t` that does not
/// encode it (the client counted every version's metadata of every read; encoding each into a fresh buffer
/// only to take its length allocated on every read).
pub(crate) fn wire_bytes<T: Serialize>(t: &T) -> u64 {
    postcard::experimental::serialized_size(t).map_or(0, |n| n as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_order_by_time_then_client_and_never_collide() {
        let ts = |time, c| Ts { time, client: ClientId(c) };
        assert!(ts(1, 9) < ts(2, 0));
        assert!(ts(2, 0) < ts(2, 1));
        assert_eq!(ts(5, 3).cmp(&ts(5, 3)), std::cmp::Ordering::Equal);
        // The reference code's `seq << 10 + id` collides (and is `seq << (10 + id)` in Java); pairs do not.
        let mut all: Vec<Ts> = (0..64).flat_map(|t| (0..2048).map(move |c| ts(t, c))).collect();
        let n = all.len();
        all.sort();
        all.dedup();
        assert_eq!(all.len(), n);
        assert!(all.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn wire_bytes_counts_what_postcard_encodes() {
        let ts = Ts { time: 1 << 40, client: ClientId(300) };
        let keys: Vec<Key> = vec!["alpha".into(), "b".into()];
        assert_eq!(wire_bytes(&ts), postcard::to_stdvec(&ts).unwrap().len() as u64);
        assert_eq!(wire_bytes(&keys), postcard::to_stdvec(&keys).unwrap().len() as u64);
    }

    #[test]
    fn several_datacenters_are_refused_with_the_reason() {
        assert!(RampF::check_topology(&Topology::new(1, 4)).is_ok());
        let err = RampH::check_topology(&Topology::new(2, 4)).unwrap_err();
        assert!(err.contains("ramp-h runs in one datacenter") && err.contains("as the paper evaluates"), "{err}");
        assert!(RampS::check_topology(&Topology::replicated(1, 2, 3)).is_err());
    }
}
