//! Mechanisms written once and embedded by protocols: consensus for a replica group (raft-rs, driven
//! sans-IO). A component sends and sets timers through the embedding server's `Ctx`, and the server's
//! message and timer types carry the component's own (`From` conversions), so protocols share the code
//! rather than copy it.

pub mod consensus;

pub use consensus::{Event, NotLeader, RaftGroup, RaftParams, RaftTick, RaftWire};
