//! Contrarian's adversarial interleavings, written with the simulator's scenario API.

use snowline_core::{Addr, ClientId, Key, OpId, Reply, Request, ServerId, Topology, Value};
use snowline_protocols::Contrarian;
use snowline_protocols::contrarian::ContrarianMsg;
use snowline_sim::{Sim, SimConfig};

const MS: u64 = 1_000_000;

fn sim(dcs: u16, partitions: u16) -> Sim<Contrarian> {
    Sim::new(SimConfig::exact(1, Topology::new(dcs, partitions), 100_000, 10_000_000))
}

fn run_to_completion(sim: &mut Sim<Contrarian>, client: ClientId, op: u64, request: Request) -> Reply {
    sim.execute(client, OpId(op), request, 1_000_000_000)
        .expect("the operation completes")
        .expect("the operation succeeds")
}

fn values(reply: &Reply) -> Vec<Option<Value>> {
    reply.reads.iter().map(|r| r.value.clone()).collect()
}

fn put(sim: &mut Sim<Contrarian>, client: ClientId, op: u64, key: &Key, value: &str) {
    run_to_completion(sim, client, op, Request::Put { key: key.clone(), value: value.into() });
}

/// Contrarian Fig. 1 / SNOW Fig. 3, the photo/ACL interleaving: Bob's ROT(acl, album) reads the ACL before
/// Alice makes the album private (PUT acl) and reads the album only after she then adds a photo (PUT album).
/// Contrarian §4.2: Bob's snapshot SV was fixed by his coordinator before Alice's PUTs; the ACL's partition
/// moved its clock to SV[local] when it served Bob, so both of Alice's versions get larger timestamps and the
/// album's partition returns the newest version within SV: the old photo. Bob sees a causally consistent
/// pair (public ACL, old photo), in two rounds, without blocking, one version per key.
#[test]
fn contrarian_returns_a_causally_consistent_photo_acl_pair() {
    let mut sim = sim(1, 2);
    let topo = sim.topology();
    let acl: Key = topo.key_on(0, "acl").into();
    let album: Key = topo.key_on(1, "album").into();
    let alice = sim.add_client(0);
    let bob = sim.add_client(0);
    put(&mut sim, alice, 0, &acl, "public");
    put(&mut sim, alice, 1, &album, "old-photo");

    // Round 2 of Bob's ROT: the read of the album is delayed until after Alice's two PUTs.
    let album_server = Addr::Server(ServerId::new(0, 1));
    let hold = sim.hold(move |e| e.to == album_server && matches!(e.msg, ContrarianMsg::Read { .. }));
    sim.submit(bob, OpId(0), Request::Rot { keys: vec![acl.clone(), album.clone()] });
    assert!(sim.advance(MS).is_empty(), "Bob waits for the album's partition");
    assert_eq!(sim.held().len(), 1);

    put(&mut sim, alice, 2, &acl, "private");
    put(&mut sim, alice, 3, &album, "new-photo");

    sim.stop_holding(hold);
    assert_eq!(sim.release(|_| true), 1);
    let bob_sees = sim.advance(MS);
    assert_eq!(bob_sees.len(), 1);
    let reply = bob_sees[0].result.as_ref().unwrap();
    assert_eq!(values(reply), vec![Some("public".into()), Some("old-photo".into())]);
    assert_eq!(reply.reads[1].versions_skipped, 1, "the new photo was committed but is outside Bob's snapshot");
    assert_eq!((reply.metrics.rounds, reply.metrics.versions_returned, reply.metrics.blocked_ns), (2, 2, 0));

    // Bob's next ROT takes a newer snapshot and sees both of Alice's writes.
    let again = run_to_completion(&mut sim, bob, 1, Request::Rot { keys: vec![acl.clone(), album.clone()] });
    assert_eq!(values(&again), vec![Some("private".into()), Some("new-photo".into())]);
}

/// The same anomaly across datacenters (Contrarian §3, "Challenges of geo-replication", and §4.1): Alice in
/// DC 0 makes the album private, then adds a photo; the ACL's replication to DC 1 is slow (its FIFO link
/// carries neither the update nor heartbeats), the photo's is not. In DC 1 the photo has arrived, but the
/// GSS's DC-0 entry cannot pass the ACL update's timestamp until it arrives, and the photo's timestamp is
/// larger, so Bob in DC 1 reads (public, old photo); once the link delivers, the GSS moves past both and Bob
/// sees (private, new photo).
#[test]
fn a_remote_photo_stays_invisible_until_the_acl_it_depends_on_is_stable() {
    let mut sim = sim(2, 2);
    let topo = sim.topology();
    let acl: Key = topo.key_on(0, "acl").into();
    let album: Key = topo.key_on(1, "album").into();
    let alice = sim.add_client(0);
    let bob = sim.add_client(1);
    put(&mut sim, alice, 0, &acl, "public");
    put(&mut sim, alice, 1, &album, "old-photo");
    sim.advance(50 * MS);
    let rot = Request::Rot { keys: vec![acl.clone(), album.clone()] };
    assert_eq!(
        values(&run_to_completion(&mut sim, bob, 0, rot.clone())),
        vec![Some("public".into()), Some("old-photo".into())]
    );

    let (from, to) = (Addr::Server(ServerId::new(0, 0)), Addr::Server(ServerId::new(1, 0)));
    let slow = sim.hold(move |e| e.from == from && e.to == to);
    put(&mut sim, alice, 2, &acl, "private");
    put(&mut sim, alice, 3, &album, "new-photo");
    sim.advance(50 * MS);
    let album_replica = sim.server(ServerId::new(1, 1));
    assert_eq!(album_replica.versions(&album).len(), 2, "the new photo has reached DC 1");
    let bob_sees = run_to_completion(&mut sim, bob, 1, rot.clone());
    assert_eq!(values(&bob_sees), vec![Some("public".into()), Some("old-photo".into())]);
    assert_eq!(bob_sees.reads[1].versions_skipped, 1, "received, not yet stable");

    sim.stop_holding(slow);
    assert!(sim.release(|_| true) > 0);
    sim.advance(50 * MS);
    assert_eq!(
        values(&run_to_completion(&mut sim, bob, 2, rot)),
        vec![Some("private".into()), Some("new-photo".into())]
    );
}
