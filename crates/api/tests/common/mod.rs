//! A cluster of in-process servers, each with its gRPC endpoint.

#![allow(dead_code)]

use snowline_api::pb::snowline_client::SnowlineClient;
use snowline_api::{ApiLimits, EndpointInfo};
use snowline_core::{Protocol, Topology};
use snowline_net::{ClusterConfig, run_server};
use std::time::Duration;
use tokio::net::TcpStream;
use tokio::sync::watch;
use tokio::time::Instant;
use tonic::transport::Channel;

pub struct Cluster {
    pub config: ClusterConfig,
    stop: watch::Sender<bool>,
    servers: Vec<tokio::task::JoinHandle<Result<(), snowline_net::NetError>>>,
    apis: Vec<tokio::task::JoinHandle<Result<(), snowline_api::service::ApiError>>>,
}

fn stopped(rx: &watch::Receiver<bool>) -> impl std::future::Future<Output = ()> + Send + 'static {
    let mut rx = rx.clone();
    async move {
        let _ = rx.wait_for(|s| *s).await;
    }
}

/// Start `P` on `dcs` × `partitions` with an endpoint per node under `limits`; returns once all listen.
pub async fn start<P: Protocol>(dcs: u16, partitions: u16, limits: ApiLimits) -> Cluster {
    let base = snowline_net::free_base_port();
    let config = ClusterConfig::local_replicated(P::NAME, Topology::new(dcs, partitions), base)
        .unwrap()
        .insecure()
        .with_grpc_ports(snowline_net::cluster::free_port_range(64))
        .unwrap();
    let (stop, rx) = watch::channel(false);
    let mut servers = Vec::new();
    let mut apis = Vec::new();
    for node in &config.nodes {
        servers.push(tokio::spawn(run_server::<P>(config.clone(), node.id, stopped(&rx))));
        let info = EndpointInfo { level: "test".into(), family: "test".into() };
        apis.push(tokio::spawn(snowline_api::serve::<P>(config.clone(), node.id, info, limits.clone(), stopped(&rx))));
    }
    for node in &config.nodes {
        for addr in [&node.addr, node.grpc.as_ref().unwrap()] {
            let deadline = Instant::now() + Duration::from_secs(10);
            while TcpStream::connect(addr).await.is_err() {
                assert!(Instant::now() < deadline, "node {} never listened on {addr}", node.id);
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
    }
    Cluster { config, stop, servers, apis }
}

impl Cluster {
    /// The gRPC address of the first node of datacenter `dc`.
    pub fn grpc(&self, dc: u16) -> String {
        self.config.nodes.iter().find(|n| n.dc == dc).and_then(|n| n.grpc.clone()).unwrap()
    }

    pub async fn client(&self, dc: u16) -> SnowlineClient<Channel> {
        SnowlineClient::connect(format!("http://{}", self.grpc(dc))).await.unwrap()
    }

    /// Stops everything; no server or endpoint may have panicked or failed.
    pub async fn stop(self) {
        let _ = self.stop.send(true);
        for h in self.apis {
            h.await.expect("an endpoint panicked").expect("an endpoint failed");
        }
        for h in self.servers {
            h.await.expect("a server panicked").expect("a server failed");
        }
    }
}

/// The `snowline-error` kind of a failed call.
pub fn kind(status: &tonic::Status) -> String {
    status.metadata().get("snowline-error").and_then(|v| v.to_str().ok()).unwrap_or("").to_string()
}
