//! The crate's integration tests as one binary: each module was a test binary of its own, and every one
//! linked the workspace again (docs/ARCHITECTURE.md, "Build time").

// Linked so that the generic code the command's library compiled for every protocol (servers, clients, the
// simulator) is reused here rather than compiled again.
use snowline as _;

mod cluster;
mod common;
mod conn_limits;
mod faults;
mod frame_limits;
mod hostile;
mod loopback;
mod metrics;
mod peer_auth;
mod unanswered;
