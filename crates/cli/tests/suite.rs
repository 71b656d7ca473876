//! The crate's integration tests as one binary: each module was a test binary of its own, and every one
//! linked the workspace again (docs/ARCHITECTURE.md, "Build time").

mod cli;
mod common;
mod disk_full;
mod durability;
mod faults;
mod lifecycle;
mod metrics;
mod snow;
