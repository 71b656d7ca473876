//! The crate's integration tests as one binary: each module was a test binary of its own, and every one
//! linked the workspace again (docs/ARCHITECTURE.md, "Build time").

mod common;
mod contrarian_scenarios;
mod cops_scenarios;
mod hostile_inputs;
mod jessy_scenarios;
mod multicast;
mod occ_scenarios;
mod raft_kv;
mod raft_kv_faults;
mod rococo_scenarios;
mod scenarios;
mod snow_corners;
mod tpc_kv;
mod twopl_scenarios;
