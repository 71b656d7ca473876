//! The papers' adversarial interleavings, written with the simulator's scenario API.

use snowline_core::{Addr, OpId, ProtocolConfig, Reply, Request, ServerId, Topology, Value};
use snowline_protocols::Cv;
use snowline_protocols::tomsic::TomsicMsg;
use snowline_sim::{ClockModel, CpuModel, NetworkModel, Sim, SimConfig};

fn sim(dcs: u16, partitions: u16) -> Sim<Cv> {
    let mut config = SimConfig::new(1, Topology::new(dcs, partitions), ProtocolConfig::default());
    config.network = NetworkModel::exact(100_000, 10_000_000);
    config.clocks = ClockModel::perfect();
    config.cpu = CpuModel::free();
    Sim::new(config)
}

fn run_to_completion(sim: &mut Sim<Cv>, client: snowline_core::ClientId, op: u64, request: Request) -> Reply {
    sim.submit(client, OpId(op), request);
    let deadline = sim.now_ns() + 1_000_000_000;
    loop {
        let done = sim.step_until(deadline).expect("the operation completes");
        if done.client == client && done.op == OpId(op) {
            return done.result.expect("the operation succeeds");
        }
    }
}

fn values(reply: &Reply) -> Vec<Option<Value>> {
    reply.reads.iter().map(|r| r.value.clone()).collect()
}

/// Contrarian Fig. 1 / SNOW Fig. 3, the photo/ACL anomaly: Alice makes her album private, then adds a photo;
/// Bob's read-only transaction reads the ACL before Alice's first write and the album after her second.
/// CV (Tomsic §4.3: "Under CV, COND returns the latest committed version") returns exactly that pair: the new
/// photo with the old, public ACL.
#[test]
fn cv_returns_the_photo_acl_anomaly() {
    let mut sim = sim(1, 2);
    let topo = sim.topology();
    let acl: snowline_core::Key = topo.key_on(0, "acl").into();
    let album: snowline_core::Key = topo.key_on(1, "album").into();
    let alice = sim.add_client(0);
    let bob = sim.add_client(0);
    run_to_completion(&mut sim, alice, 0, Request::Put { key: acl.clone(), value: "public".into() });

    // Bob's coordinator is the ACL's partition (his first key); hold its read of the album.
    let album_server = Addr::Server(ServerId::new(0, 1));
    sim.hold(move |e| e.to == album_server && matches!(e.msg, TomsicMsg::Read { .. }));
    sim.submit(bob, OpId(0), Request::Rot { keys: vec![acl.clone(), album.clone()] });
    assert!(sim.advance(1_000_000).is_empty(), "Bob waits for the album's partition");
    assert_eq!(sim.held().len(), 1);

    run_to_completion(&mut sim, alice, 1, Request::Put { key: acl.clone(), value: "private".into() });
    run_to_completion(&mut sim, alice, 2, Request::Put { key: album.clone(), value: "new-photo".into() });

    assert_eq!(sim.release(|_| true), 1);
    let bob_sees = sim.advance(1_000_000);
    assert_eq!(bob_sees.len(), 1);
    let reply = bob_sees[0].result.as_ref().unwrap();
    assert_eq!(values(reply), vec![Some("public".into()), Some("new-photo".into())]);
    assert_eq!(reply.metrics.rounds, 1, "CV answers in one round");
    assert!(reply.reads.iter().all(|r| r.versions_skipped == 0), "Latest Freshness");
}

/// Tomsic §4.2.2: a partition propagates committed updates to its siblings asynchronously; CV makes them
/// visible as they arrive. A remote datacenter sees a write one WAN delay after its commit, not before.
#[test]
fn a_committed_write_becomes_visible_in_the_other_datacenter_after_one_wan_delay() {
    let mut sim = sim(2, 2);
    let key: snowline_core::Key = sim.topology().key_on(1, "k").into();
    let writer = sim.add_client(0);
    let reader = sim.add_client(1);
    run_to_completion(&mut sim, writer, 0, Request::Put { key: key.clone(), value: "v".into() });
    let read =
        |sim: &mut Sim<Cv>, op| values(&run_to_completion(sim, reader, op, Request::Rot { keys: vec![key.clone()] }));
    assert_eq!(read(&mut sim, 0), vec![None], "not yet replicated");
    sim.advance(10_000_000);
    assert_eq!(read(&mut sim, 1), vec![Some("v".into())]);
}
