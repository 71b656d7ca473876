//! The no-IO foundation every other snowline crate stands on.
//!
//! It owns the vocabulary shared by all protocols and both runtimes: identifiers and the [`Topology`]
//! (datacenters × partitions, deterministic key → partition hash), clocks ([`Hlc`], [`VectorClock`]),
//! the [`MvStore`] multi-version store, the client-facing [`Request`]/[`Reply`] types, the per-operation
//! [`OpMetrics`], the history records of `docs/HISTORY.md`, and the sans-IO boundary ([`Protocol`],
//! [`ServerNode`], [`ClientNode`], [`Ctx`]) whose driver contract both runtimes implement.
//!
//! Nothing here reads the system clock, spawns a thread or touches a socket.

pub mod clock;
pub mod config;
pub mod frames;
pub mod history;
pub mod host;
pub mod ids;
pub mod links;
pub mod merge;
pub mod procedure;
pub mod protocol;
pub mod request;
pub mod store;
pub mod suggest;
pub mod topology;
pub mod tpcc;
pub mod validate;

pub use clock::{Hlc, VectorClock};
pub use config::{ProtocolConfig, Termination};
pub use history::{HistoryEvent, HistoryMeta, HistoryOp, HistoryWriter};
pub use host::{ContractViolation, NodeInput};
pub use ids::{Addr, ClientId, DcId, OpId, PartitionId, ReplicaId, ServerId};
pub use protocol::{
    ClientNode, Ctx, Durability, Effects, LinkAssumptions, Message, Offers, Protocol, ReplyNote, ServerNode,
};
pub use request::{
    Abort, AbortCause, Key, OpError, OpMetrics, ReadResult, ReadersCheckCost, Reply, Request, Value, Version,
};
pub use store::{GcPolicy, MvStore, StoredVersion};
pub use topology::{Placement, Topology};
pub use validate::{Check, InvalidInput, InvalidKind};
