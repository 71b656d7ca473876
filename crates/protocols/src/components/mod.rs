//! Mechanisms written once and embedded by protocols: consensus for a replica group (raft-rs, driven
//! sans-IO), genuine atomic multicast across groups (Skeen's protocol over them) and two-phase commit over
//! groups, the pacing of periodic duties that back off while idle, and what read-only reads wait for in a
//! durable host, and the framing of session tokens (`session`). A component sends and sets timers through the embedding server's `Ctx`, and the server's message and timer types carry the component's own (`From` conversions), so protocols share the code
//! rather than copy it.

pub mod consensus;
pub mod multicast;
pub mod pacer;
pub mod session;
pub mod twopc;
pub mod unlogged;

pub use consensus::{Event, NotLeader, RaftGroup, RaftParams, RaftTick, RaftWire};
pub use multicast::{
    McastEvent, McastId, McastMember, McastMsg, McastOrigin, McastParams, McastRecord, McastRetry, McastTick, McastWire,
};
pub use pacer::Pacer;
pub use twopc::{TpcHost, TpcMember, TpcOrigin, TpcParams, TpcRetry, TpcTick, TpcWire, TxnId};
pub use unlogged::UnloggedWrites;
