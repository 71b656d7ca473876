//! `snowline bench-api`: what the gRPC path costs against the native client, in one run. One local cluster
//! serves both; the same closed loop (single-key reads and writes over uniform keys) runs first through
//! the native client library (this process hosts the protocol's client nodes and talks to the servers),
//! then through the gRPC API (the endpoint in each server process hosts them, one hop further). Both
//! drivers live in this process, on one current-thread runtime.

use crate::client_cmd::{LocalSetup, with_local_cluster};
use anyhow::Result;
use clap::Args;
use hdrhistogram::Histogram;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use snowline_api::pb::{self, snowline_client::SnowlineClient};
use snowline_core::{Protocol, Request, Topology};
use snowline_net::{ClientRuntime, ClusterConfig};
use std::time::{Duration, Instant};

#[derive(Args, Clone, Debug)]
pub struct ApiBenchArgs {
    /// The protocol (one that offers single-key reads and blind writes: the causal family, 2pl, occ, ...).
    #[arg(long, default_value = "cure")]
    pub protocol: String,
    /// Closed-loop clients (sessions) per path.
    #[arg(long, default_value_t = 16)]
    pub clients: usize,
    /// Measured seconds per path (after a one-second warm-up).
    #[arg(long, default_value_t = 10.0)]
    pub seconds: f64,
    /// Keys, drawn uniformly.
    #[arg(long, default_value_t = 10_000)]
    pub keys: u64,
    /// Bytes per written value.
    #[arg(long, default_value_t = 100)]
    pub value_bytes: usize,
    /// Share of writes (the rest are reads).
    #[arg(long, default_value_t = 0.5)]
    pub write_ratio: f64,
    /// Partitions of the local cluster (one datacenter).
    #[arg(long, default_value_t = 2)]
    pub partitions: u16,
}

/// One path's figures.
struct PathFigures {
    ops: u64,
    errors: u64,
    seconds: f64,
    latency: Histogram<u64>,
}

impl PathFigures {
    fn throughput(&self) -> f64 {
        self.ops as f64 / self.seconds
    }
    fn ms(&self, q: f64) -> f64 {
        self.latency.value_at_quantile(q) as f64 / 1e3
    }
}

pub fn run(args: ApiBenchArgs) -> Result<()> {
    let topology = Topology::new(1, args.partitions);
    let setup = LocalSetup { grpc: true, ..Default::default() };
    let protocol = args.protocol.clone();
    let ((native, grpc), _) = with_local_cluster(&protocol, topology, 0.0, setup, |config| {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
        snowline_protocols::with_protocol!(&protocol, P => rt.block_on(both_paths::<P>(config, &args)))?
    })?;
    println!(
        "bench-api: {} clients per path, {:.0} s each, {} keys, {} B values, {:.0}% writes, protocol {protocol}, 1 dc × {} partitions",
        args.clients,
        args.seconds,
        args.keys,
        args.value_bytes,
        args.write_ratio * 100.0,
        args.partitions
    );
    println!("{:<8} {:>10} {:>9} {:>9} {:>9} {:>7}", "path", "ops/s", "p50 ms", "p99 ms", "p999 ms", "errors");
    for (name, f) in [("native", &native), ("grpc", &grpc)] {
        println!(
            "{name:<8} {:>10.0} {:>9.3} {:>9.3} {:>9.3} {:>7}",
            f.throughput(),
            f.ms(0.5),
            f.ms(0.99),
            f.ms(0.999),
            f.errors
        );
    }
    println!(
        "grpc/native: throughput {:.2}×, p50 {:.2}× (+{:.3} ms per call)",
        grpc.throughput() / native.throughput(),
        grpc.ms(0.5) / native.ms(0.5),
        grpc.ms(0.5) - native.ms(0.5)
    );
    Ok(())
}

async fn both_paths<P: Protocol>(config: &ClusterConfig, args: &ApiBenchArgs) -> Result<(PathFigures, PathFigures)> {
    anyhow::ensure!(
        P::OFFERS.read_only && P::OFFERS.blind_writes,
        "{} offers no single-key reads and blind writes; bench-api needs both",
        P::NAME
    );
    let native = native_path::<P>(config, args).await?;
    let grpc = grpc_path(config, args).await?;
    Ok((native, grpc))
}

fn value(args: &ApiBenchArgs, rng: &mut SmallRng) -> String {
    (0..args.value_bytes).map(|_| char::from(b'a' + rng.random_range(0..26u8))).collect()
}

/// Run `clients` loops of `op` for a warm-up second and then `seconds`, recording the measured ones.
async fn closed_loop<F, Fut>(args: &ApiBenchArgs, op: F) -> PathFigures
where
    F: Fn(usize, bool, String, String) -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let start = Instant::now();
    let measure_from = start + Duration::from_secs(1);
    let end = measure_from + Duration::from_secs_f64(args.seconds);
    let loops = (0..args.clients).map(|c| {
        let op = &op;
        async move {
            let mut rng = SmallRng::seed_from_u64(c as u64 + 1);
            let mut latency = Histogram::<u64>::new(3).expect("3 significant figures");
            let (mut ops, mut errors) = (0u64, 0u64);
            loop {
                let began = Instant::now();
                if began >= end {
                    break;
                }
                let key = format!("key{}", rng.random_range(0..args.keys));
                let write = rng.random_bool(args.write_ratio);
                let ok = op(c, write, key, value(args, &mut rng)).await;
                let done = Instant::now();
                if began >= measure_from && done <= end {
                    if ok {
                        ops += 1;
                        let _ = latency.record(done.duration_since(began).as_micros() as u64);
                    } else {
                        errors += 1;
                    }
                }
            }
            (ops, errors, latency)
        }
    });
    let mut figures = PathFigures {
        ops: 0,
        errors: 0,
        seconds: args.seconds,
        latency: Histogram::new(3).expect("3 significant figures"),
    };
    for (ops, errors, latency) in futures::future::join_all(loops).await {
        figures.ops += ops;
        figures.errors += errors;
        let _ = figures.latency.add(&latency);
    }
    figures
}

async fn native_path<P: Protocol>(config: &ClusterConfig, args: &ApiBenchArgs) -> Result<PathFigures> {
    let runtime = ClientRuntime::<P>::connect(config, 0).await?;
    let sessions: Vec<_> = (0..args.clients).map(|_| runtime.session()).collect();
    Ok(closed_loop(args, |c, write, key, value| {
        let session = &sessions[c];
        async move {
            let request = if write {
                Request::Put { key: key.into(), value: value.into() }
            } else {
                Request::Rot { keys: vec![key.into()] }
            };
            session.execute(request).await.is_ok()
        }
    })
    .await)
}

async fn grpc_path(config: &ClusterConfig, args: &ApiBenchArgs) -> Result<PathFigures> {
    let endpoints: Vec<String> = config.nodes.iter().filter_map(|n| n.grpc.clone()).collect();
    anyhow::ensure!(!endpoints.is_empty(), "the cluster serves no gRPC API");
    let mut clients = Vec::new();
    for c in 0..args.clients {
        let mut client = SnowlineClient::connect(format!("http://{}", endpoints[c % endpoints.len()])).await?;
        let id = client.open_session(pb::OpenSessionRequest::default()).await?.into_inner().id;
        clients.push((client, pb::SessionRef { id }));
    }
    Ok(closed_loop(args, |c, write, key, value| {
        let (mut client, session) = (clients[c].0.clone(), Some(clients[c].1.clone()));
        async move {
            if write {
                client.put(pb::PutRequest { session, key, value }).await.is_ok()
            } else {
                client.get(pb::GetRequest { session, key }).await.is_ok()
            }
        }
    })
    .await)
}
