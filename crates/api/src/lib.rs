//! The public API: `snowline.v1` (proto/snowline/v1/snowline.proto) over gRPC, served by every server
//! process that has a `grpc` address (docs/API.md).
//!
//! * The endpoint is a client of the cluster hosted inside the server process: it runs the protocol's
//!   client nodes (the same [`snowline_net::ClientRuntime`] a native Rust client uses) for its sessions, in
//!   the datacenter of its node, and reaches the partitions over the cluster's own links. A gRPC call
//!   therefore costs the native client's path plus one gRPC hop to the endpoint (`snowline bench-api`
//!   measures the difference).
//! * [`service`] keeps the sessions: each is one client node with at most one open interactive
//!   transaction, whose writes wait at the endpoint until its commit. Sessions are bounded in number and
//!   close after an idle time; calls of one session run one at a time.
//! * [`token`]: a session's token is what its client node tracks for its guarantees
//!   (`ClientNode::save_session`), versioned and tagged with the protocol and topology it belongs to.
//! * [`errors`]: an operation's outcome becomes a gRPC status from a closed set of kinds.
//! * [`backend`]: the one generic piece, the protocol's client runtime behind an object-safe trait, so
//!   that the service is compiled once and not once per protocol.

// A runtime edge, as `snowline-net` is: it reads the real clock for session idle times and deadlines (the
// workspace's ban on `Instant::now` is for protocol code; clippy.toml).
#![allow(clippy::disallowed_methods)]

pub mod backend;
pub mod errors;
mod incoming;
mod replies;
pub mod service;
pub mod token;

/// The code generated from the `.proto` at build time (`build.rs`, by protox: no `protoc` needed).
pub mod pb {
    tonic::include_proto!("snowline.v1");
}

pub use service::{ApiLimits, EndpointInfo, serve};

/// The API version this build serves, as `Info` reports it.
pub const API_VERSION: &str = "snowline.v1";
