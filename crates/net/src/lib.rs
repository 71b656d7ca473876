//! The networked runtime: the same sans-IO protocol state machines the simulator drives, driven here by
//! real clocks, OS randomness and TCP.
//!
//! * [`config`]: `cluster.toml`, the description every process of a deployment shares.
//! * [`frame`]: the wire format (length-delimited, versioned postcard frames with a protocol handshake).
//! * [`server`]: [`run_server`], one OS process hosting one or more partition servers of one datacenter.
//!   One event loop owns all hosted nodes (no locks around protocol state); connection tasks only move
//!   bytes. Inter-datacenter latency is emulated inside the runtime, per link, preserving FIFO order.
//! * [`client`]: [`ClientRuntime`] and [`Session`], the async client library hosting the protocol's
//!   client nodes and sharing one connection per server node among all sessions.
//! * [`metrics`]: a server's counters and histograms, served as Prometheus text on an opt-in port.
//! * [`tls`]: peer authentication (mutual TLS between servers, opt-in TLS for clients).
//! * [`cluster`]: starting, surveying, restarting and stopping a cluster of local server processes
//!   (`snowline cluster up/status/restart/down`, `snowline bench`).
//!
//! Everything is designed for a current-thread tokio runtime per process (faster than the multi-thread
//! scheduler on small machines); it also works on a multi-thread runtime.

// This crate IS the runtime that reads real clocks and OS entropy and hands them to the protocols through
// `Ctx`; the workspace-wide ban on `Instant::now`/`SystemTime::now` (clippy.toml) is for protocol code.
#![allow(clippy::disallowed_methods)]

mod admission;
pub mod client;
pub mod cluster;
pub mod config;
mod conn;
pub mod faults;
pub mod frame;
pub mod limits;
mod memory;
pub mod metrics;
pub mod server;
pub mod tls;
mod util;

pub use client::{ClientRuntime, DEFAULT_OP_TIMEOUT, Session, Txn};
pub use cluster::{
    LocalCluster, LocalData, StopReport, Survey, free_base_port, restart_node_in_dir, resume_local_cluster,
    spawn_local_cluster, spawn_local_cluster_with, stop_cluster_dir, survey_cluster_dir,
};
pub use config::{ClusterConfig, ConfigError, NodeConfig, Routes, TlsConfig};
pub use frame::{Frame, FrameError, WIRE_VERSION};
pub use server::{Durability, run_server, run_server_with, shutdown_signal};

use std::path::PathBuf;

/// Errors of the networked runtime (as opposed to an operation's [`snowline_core::OpError`]).
///
/// Each message is whole: a variant that wraps an OS error says it in its message and does not also
/// return it as its `source()` (a field named `error`, not `source`), so that a printer of the error chain
/// (anyhow's `{:#}`) does not say it twice.
#[derive(Debug, thiserror::Error)]
pub enum NetError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("node {0} is not in the cluster config")]
    UnknownNode(u32),
    #[error("datacenter {dc} does not exist (the cluster has {dcs})")]
    UnknownDc { dc: u16, dcs: u16 },
    #[error("the cluster config says protocol {config:?} but this runtime was built for {runtime:?}")]
    ProtocolMismatch { config: String, runtime: &'static str },
    #[error("cannot listen on {addr}: {error}")]
    Bind { addr: String, error: std::io::Error },
    /// The node's metrics address (`metrics` in its `[[node]]` entry, or `--metrics`) cannot be bound.
    #[error("cannot listen for metrics on {addr}: {error}")]
    MetricsBind { addr: String, error: std::io::Error },
    #[error("no tokio runtime: {0} must be called from inside a tokio runtime")]
    NoRuntime(&'static str),
    #[error("cannot start {}: {error}", exe.display())]
    Spawn { exe: PathBuf, error: std::io::Error },
    #[error("{0}")]
    Cluster(String),
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// Certificates or keys that cannot be read, generated or used (the message names the file).
    #[error("TLS: {0}")]
    Tls(String),
    /// The data directory of a durable server cannot be used (the message names the file).
    #[error(transparent)]
    Storage(#[from] snowline_storage::StorageError),
}
