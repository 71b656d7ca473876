//! Servers of a cluster run as tasks of the test's own process (`run_server`), for the networked runtime's
//! integration tests.

#![allow(dead_code)]

use snowline_core::Protocol;
use snowline_net::{ClusterConfig, NetError, run_server};
use std::time::Duration;
use tokio::net::TcpStream;
use tokio::sync::oneshot;
use tokio::time::Instant;

pub struct Cluster {
    pub config: ClusterConfig,
    /// Per node (by index in the config): resolving it shuts the node down.
    pub stops: Vec<oneshot::Sender<()>>,
    pub handles: Vec<tokio::task::JoinHandle<Result<(), NetError>>>,
}

/// Start every node of `config` and return once each accepts connections.
pub async fn start<P: Protocol>(config: ClusterConfig) -> Cluster {
    let mut stops = Vec::new();
    let mut handles = Vec::new();
    for node in &config.nodes {
        let (stop, handle) = spawn_node::<P>(&config, node.id);
        stops.push(stop);
        handles.push(handle);
    }
    for node in &config.nodes {
        let deadline = Instant::now() + Duration::from_secs(5);
        while TcpStream::connect(&node.addr).await.is_err() {
            assert!(Instant::now() < deadline, "node {} never started listening", node.id);
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
    Cluster { config, stops, handles }
}

/// Run node `id` of `config` until the returned sender is used (or dropped).
pub fn spawn_node<P: Protocol>(
    config: &ClusterConfig,
    id: u32,
) -> (oneshot::Sender<()>, tokio::task::JoinHandle<Result<(), NetError>>) {
    let (stop, stopped) = oneshot::channel::<()>();
    let handle = tokio::spawn(run_server::<P>(config.clone(), id, async move {
        let _ = stopped.await;
    }));
    (stop, handle)
}

impl Cluster {
    /// Stops every server; each must have survived (no panic) and stop cleanly.
    pub async fn stop(self) {
        for s in self.stops {
            let _ = s.send(());
        }
        for h in self.handles {
            h.await.expect("a server task panicked").expect("a server returned an error");
        }
    }
}
