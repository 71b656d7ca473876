//! The strong family: read-write transactions that lock, certify, vote and abort (`twopl`; `twopl::read_locks`:
//! the RAMP paper's `lwsr` and `lwnr`, 2PL with short or no read locks; and `twopl::occ`:
//! optimistic concurrency control on the same two-phase commit; the Jessy family's `nmsi`, `rc` and `ser` in
//! `jessy`, on `dependence`'s partitioned dependence vectors; Rococo and Rococo-SNOW in `rococo`), and linearizable replicated
//! storage (`raft-kv`), storage ordered by atomic multicast (`amcast-kv`), and its two-phase-commit
//! counterpart (`tpc-kv`).

pub mod amcast_kv;
pub mod dependence;
mod group_op;
pub mod jessy;
pub mod raft_kv;
pub mod rococo;
pub mod tpc_kv;
pub mod twopl;

pub use amcast_kv::AmcastKv;
pub use jessy::{Nmsi, Psi, Rc, Ser, Si, Us};
pub use raft_kv::RaftKv;
pub use rococo::{Rococo, RococoSnow};
pub use tpc_kv::TpcKv;
pub use twopl::TwoPl;
pub use twopl::occ::{self, Occ};
pub use twopl::read_locks::{Lwnr, Lwsr};
