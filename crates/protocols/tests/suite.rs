//! The crate's integration tests as one binary: each module was a test binary of its own, and every one
//! linked the workspace again (docs/ARCHITECTURE.md, "Build time").

// Linked so that the generic code the command's library compiled for every protocol (servers, clients, the
// simulator) is reused here rather than compiled again.
use snowline as _;

mod common;
mod contrarian_scenarios;
mod cops_scenarios;
mod hostile_inputs;
mod jessy_scenarios;
mod locking_baselines;
mod multicast;
mod occ_scenarios;
mod raft_kv;
mod raft_kv_faults;
mod ramp;
mod ramp_bounds;
mod request_limits;
mod rococo_scenarios;
mod scenarios;
mod session_tokens;
mod snow_corners;
mod tpc_kv;
mod twopl_scenarios;
