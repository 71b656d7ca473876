//! The crate's integration tests as one binary: each module was a test binary of its own, and every one
//! linked the workspace again (docs/ARCHITECTURE.md, "Build time").

mod cluster;
mod common;
mod hostile;
mod loopback;
mod metrics;
mod peer_auth;
