//! Set-up shared by the single-copy protocols' scenario tests (`twopl_scenarios`, `occ_scenarios`): an
//! exact-clock simulation, operations run to completion, and two keys on two partitions.

#![allow(dead_code)] // each test binary uses its own part

use snowline_core::{ClientId, Key, OpError, OpId, Protocol, Reply, Request, Topology, Value};
use snowline_sim::{Sim, SimConfig};

pub const WAN_NS: u64 = 10_000_000;
pub const SECOND: u64 = 1_000_000_000;

/// Exact clocks, 100 µs within a datacenter, [`WAN_NS`] between datacenters.
pub fn config(dcs: u16, partitions: u16) -> SimConfig {
    SimConfig::exact(1, Topology::new(dcs, partitions), 100_000, WAN_NS)
}

pub fn sim<P: Protocol>(dcs: u16, partitions: u16) -> Sim<P> {
    Sim::new(config(dcs, partitions))
}

/// Run `request` to completion (within a second of virtual time) and return its result.
pub fn run<P: Protocol>(sim: &mut Sim<P>, client: ClientId, op: &mut u64, request: Request) -> Result<Reply, OpError> {
    *op += 1;
    sim.execute(client, OpId(*op), request, SECOND).expect("the operation completes within a second")
}

pub fn ok<P: Protocol>(sim: &mut Sim<P>, client: ClientId, op: &mut u64, request: Request) -> Reply {
    run(sim, client, op, request).expect("the operation succeeds")
}

pub fn values(reply: &Reply) -> Vec<Option<Value>> {
    reply.reads.iter().map(|r| r.value.clone()).collect()
}

/// A key on partition 0 and one on partition 1.
pub fn keys<P: Protocol>(sim: &Sim<P>) -> (Key, Key) {
    let topo = sim.topology();
    (topo.key_on(0, "x").into(), topo.key_on(1, "y").into())
}

pub fn update(pairs: &[(&Key, &str)]) -> Request {
    Request::Update { writes: pairs.iter().map(|(k, v)| ((*k).clone(), Value::from(*v))).collect() }
}
