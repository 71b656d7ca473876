//! COPS and COPS-SNOW on the papers' interleavings, written with the simulator's scenario API.

use snowline_core::{Addr, ClientId, Key, OpId, Protocol, Reply, Request, ServerId, Topology, Value};
use snowline_protocols::cops::{CopsFamily, CopsMsg};
use snowline_protocols::{Cops, CopsSnow};
use snowline_sim::{Sim, SimConfig};

const WAN_NS: u64 = 10_000_000;

fn sim<P: Protocol>(dcs: u16, partitions: u16) -> Sim<P> {
    Sim::new(SimConfig::exact(1, Topology::new(dcs, partitions), 100_000, WAN_NS))
}

fn run_to_completion<P: Protocol>(sim: &mut Sim<P>, client: ClientId, op: u64, request: Request) -> Reply {
    sim.execute(client, OpId(op), request, 1_000_000_000)
        .expect("the operation completes")
        .expect("the operation succeeds")
}

fn values(reply: &Reply) -> Vec<Option<Value>> {
    reply.reads.iter().map(|r| r.value.clone()).collect()
}

/// SNOW Fig. 3 / Contrarian Fig. 1, the photo/ACL interleaving, in datacenter `bob_dc`: the album starts
/// public with an old photo; Bob's ROT reads the ACL before Alice (in dc0) makes the album private, and the
/// album after she adds a private photo (his read of the album is held until then). Returns Bob's reply.
fn photo_acl<P: Protocol<Msg = CopsMsg>>(dcs: u16, bob_dc: u16) -> Reply {
    let mut sim = sim::<P>(dcs, 2);
    let topo = sim.topology();
    let acl: Key = topo.key_on(0, "acl").into();
    let album: Key = topo.key_on(1, "album").into();
    let alice = sim.add_client(0);
    let bob = sim.add_client(bob_dc);
    run_to_completion(&mut sim, alice, 0, Request::Put { key: acl.clone(), value: "public".into() });
    run_to_completion(&mut sim, alice, 1, Request::Put { key: album.clone(), value: "old-photo".into() });
    sim.advance(3 * WAN_NS);

    let album_server = Addr::Server(ServerId::new(bob_dc, 1));
    let bob_addr = Addr::Client(bob);
    sim.hold(move |e| e.from == bob_addr && e.to == album_server && matches!(e.msg, CopsMsg::Read { .. }));
    sim.submit(bob, OpId(0), Request::Rot { keys: vec![acl.clone(), album.clone()] });
    assert!(sim.advance(1_000_000).is_empty(), "Bob waits for the album's partition");
    assert_eq!(sim.held().len(), 1);

    run_to_completion(&mut sim, alice, 2, Request::Put { key: acl.clone(), value: "private".into() });
    run_to_completion(&mut sim, alice, 3, Request::Put { key: album.clone(), value: "private-photo".into() });
    sim.advance(3 * WAN_NS);
    if bob_dc != 0 {
        // Both writes have been replicated and applied where Bob is.
        let reader = sim.add_client(bob_dc);
        let now = run_to_completion(&mut sim, reader, 0, Request::Rot { keys: vec![acl.clone(), album.clone()] });
        assert_eq!(values(&now), vec![Some("private".into()), Some("private-photo".into())]);
    }

    assert_eq!(sim.release(|_| true), 1);
    let bob_sees = sim.advance(1_000_000);
    assert_eq!(bob_sees.len(), 1);
    bob_sees[0].result.clone().expect("Bob's ROT succeeds")
}

/// SNOW §5.3 and Fig. 3a: COPS's first round returns the public ACL with the private photo, whose logical
/// time is past the ACL's validity; the second round re-reads the ACL at that time and returns the private
/// ACL: a causally consistent pair in two rounds.
#[test]
fn cops_answers_the_photo_acl_interleaving_consistently_in_two_rounds() {
    let reply = photo_acl::<Cops>(1, 0);
    assert_eq!(values(&reply), vec![Some("private".into()), Some("private-photo".into())]);
    assert_eq!(reply.metrics.rounds, 2);
    assert_eq!(reply.metrics.versions_returned, 3, "two in round 1, the ACL again in round 2");
    assert_eq!(reply.metrics.blocked_ns, 0, "non-blocking");
}

/// SNOW §5.3 and Fig. 3b: under COPS-SNOW the private photo's PUT ran the readers check against the ACL's
/// partition and made Bob an old reader of the album, so his read of the album returns the old photo: the
/// public ACL with the old photo, a causally consistent pair in one round.
#[test]
fn cops_snow_answers_the_photo_acl_interleaving_consistently_in_one_round() {
    let reply = photo_acl::<CopsSnow>(1, 0);
    assert_eq!(values(&reply), vec![Some("public".into()), Some("old-photo".into())]);
    assert_eq!(reply.metrics.rounds, 1);
    assert_eq!(reply.metrics.versions_returned, 2);
    assert_eq!(reply.reads[1].versions_skipped, 1, "the private photo was there and skipped");
}

/// Contrarian §3: "In COPS-SNOW, in addition, the readers check for X proceeds in a remote DC as it does in
/// the DC where X has been created." Bob reads in dc1 while Alice writes in dc0: the replicated private photo
/// runs the readers check in dc1 before it is applied there, so Bob still gets a consistent pair in one round.
#[test]
fn cops_snow_runs_the_readers_check_in_the_remote_datacenter_too() {
    let reply = photo_acl::<CopsSnow>(2, 1);
    assert_eq!(values(&reply), vec![Some("public".into()), Some("old-photo".into())]);
    assert_eq!(reply.metrics.rounds, 1);
}

/// The same interleaving in the remote datacenter under COPS: consistent, via the second round.
#[test]
fn cops_answers_the_photo_acl_interleaving_consistently_in_the_remote_datacenter() {
    let reply = photo_acl::<Cops>(2, 1);
    assert_eq!(values(&reply), vec![Some("private".into()), Some("private-photo".into())]);
    assert_eq!(reply.metrics.rounds, 2);
}

/// SNOW §5.3 ("Remote datacenters check that the write's causal dependencies are satisfied before applying
/// the write") and Contrarian §3 (dependency checking): while the ACL change is held on its way to dc1, the
/// photo that depends on it stays invisible there; it appears once the ACL change arrives.
fn remote_write_waits_for_its_dependency<P: CopsFamily>() {
    let mut sim = sim::<P>(2, 2);
    let topo = sim.topology();
    let acl: Key = topo.key_on(0, "acl").into();
    let album: Key = topo.key_on(1, "album").into();
    let alice = sim.add_client(0);
    let reader = sim.add_client(1);
    let acl_sibling = Addr::Server(ServerId::new(1, 0));
    sim.hold(move |e| e.to == acl_sibling && matches!(e.msg, CopsMsg::Replicate { .. }));
    run_to_completion(&mut sim, alice, 0, Request::Put { key: acl.clone(), value: "private".into() });
    run_to_completion(&mut sim, alice, 1, Request::Put { key: album.clone(), value: "private-photo".into() });
    sim.advance(5 * WAN_NS);
    let read = |sim: &mut Sim<P>, op| {
        values(&run_to_completion(sim, reader, op, Request::Rot { keys: vec![acl.clone(), album.clone()] }))
    };
    assert_eq!(read(&mut sim, 0), vec![None, None], "the photo waits for the ACL change");
    assert_eq!(sim.server(ServerId::new(1, 0)).waiting_checks(), 1, "its check waits at the ACL's partition");

    assert_eq!(sim.release(|_| true), 1);
    sim.advance(WAN_NS);
    assert_eq!(read(&mut sim, 1), vec![Some("private".into()), Some("private-photo".into())]);
}

#[test]
fn cops_applies_a_replicated_write_only_after_its_dependency() {
    remote_write_waits_for_its_dependency::<Cops>();
}

#[test]
fn cops_snow_applies_a_replicated_write_only_after_its_dependency() {
    remote_write_waits_for_its_dependency::<CopsSnow>();
}
