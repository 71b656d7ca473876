//! The crate's integration tests as one binary: each module was a test binary of its own, and every one
//! linked the workspace again (docs/ARCHITECTURE.md, "Build time").

// Linked so that the generic code the command's library compiled for every protocol (servers, clients, the
// simulator) is reused here rather than compiled again.
use snowline as _;

mod anomalies;
mod coordination;
mod faults;
mod injected_anomalies;
mod snow_rococo;
mod strong_faults;
mod swarm_faults;
mod tpcc;
mod tpcc_coordfree;
