//! The papers' adversarial interleavings, written with the simulator's scenario API.

use snowline_core::{Addr, ClientId, Key, Message, OpId, Protocol, Reply, Request, ServerId, Topology, Value};
use snowline_protocols::{Av, Cure, Cv, Op};
use snowline_sim::{Sim, SimConfig};

fn sim<P: Protocol>(dcs: u16, partitions: u16) -> Sim<P> {
    Sim::new(SimConfig::exact(1, Topology::new(dcs, partitions), 100_000, 10_000_000))
}

fn submit_and_wait<P: Protocol>(sim: &mut Sim<P>, client: ClientId, op: u64, request: Request) -> Reply {
    sim.execute(client, OpId(op), request, 1_000_000_000)
        .expect("the operation completes")
        .expect("the operation succeeds")
}

fn values(reply: &Reply) -> Vec<Option<Value>> {
    reply.reads.iter().map(|r| r.value.clone()).collect()
}

fn some(v: &str) -> Option<Value> {
    Some(v.into())
}

/// Contrarian Fig. 1 / SNOW Fig. 3, the photo/ACL anomaly: Alice makes her album private, then adds a photo;
/// Bob's read-only transaction reaches the ACL before Alice's first write and the album after her second.
/// Returns what Bob read: `[acl, album]`.
fn photo_acl<P: Protocol>() -> (Reply, Sim<P>) {
    let mut sim = sim::<P>(1, 2);
    let topo = sim.topology();
    let acl: Key = topo.key_on(0, "acl").into();
    let album: Key = topo.key_on(1, "album").into();
    let alice = sim.add_client(0);
    let bob = sim.add_client(0);
    submit_and_wait(&mut sim, alice, 0, Request::Put { key: acl.clone(), value: "public".into() });
    submit_and_wait(&mut sim, alice, 1, Request::Put { key: album.clone(), value: "old-photo".into() });
    sim.advance(50_000_000); // let the initial state become stable

    // Bob's coordinator is the ACL's partition (his first key); hold its read of the album.
    let album_server = Addr::Server(ServerId::new(0, 1));
    sim.hold(move |e| e.to == album_server && e.msg.kind() == "read");
    sim.submit(bob, OpId(0), Request::Rot { keys: vec![acl.clone(), album.clone()] });
    assert!(sim.advance(1_000_000).is_empty(), "Bob waits for the album's partition");
    assert_eq!(sim.held().len(), 1);

    submit_and_wait(&mut sim, alice, 2, Request::Put { key: acl, value: "private".into() });
    submit_and_wait(&mut sim, alice, 3, Request::Put { key: album, value: "new-photo".into() });

    assert_eq!(sim.release(|_| true), 1);
    let bob_sees = sim.advance(1_000_000);
    assert_eq!(bob_sees.len(), 1);
    (bob_sees[0].result.clone().unwrap(), sim)
}

/// CV (Tomsic §4.3: "Under CV, COND returns the latest committed version") returns exactly the anomaly: the
/// new photo with the old, public ACL.
#[test]
fn cv_returns_the_photo_acl_anomaly() {
    let (reply, _) = photo_acl::<Cv>();
    assert_eq!(values(&reply), vec![some("public"), some("new-photo")]);
    assert_eq!(reply.metrics.rounds, 1, "CV answers in one round");
    assert!(reply.reads.iter().all(|r| r.versions_skipped == 0), "Latest Freshness");
}

/// Cure, AV and OP read a snapshot that preserves causal order (Tomsic §4.3): Bob sees the old ACL with the
/// old photo, in one round. (The new photo depends on the private ACL, outside Bob's snapshot.)
#[test]
fn cure_av_and_op_return_a_causally_consistent_pair() {
    fn check<P: Protocol>() {
        let (reply, _) = photo_acl::<P>();
        assert_eq!(values(&reply), vec![some("public"), some("old-photo")], "{}", P::NAME);
        assert_eq!(reply.metrics.rounds, 1, "{}", P::NAME);
        assert_eq!(reply.reads[1].versions_skipped, 1, "{}: the new photo was skipped", P::NAME);
    }
    check::<Cure>();
    check::<Av>();
    check::<Op>();
}

/// Tomsic §4.1: Cure delays a read while "an instance of 2PC is committing a transaction which needs to be
/// included in the snapshot"; AV and OP read a stable snapshot and answer at once (Minimal Delay).
#[test]
fn cure_blocks_on_a_committing_transaction_where_av_and_op_answer_at_once() {
    fn blocked_ns<P: Protocol>() -> u64 {
        let mut sim = sim::<P>(1, 2);
        let topo = sim.topology();
        let (x, y): (Key, Key) = (topo.key_on(0, "x").into(), topo.key_on(1, "y").into());
        let writer = sim.add_client(0);
        let reader = sim.add_client(0);
        sim.advance(50_000_000);
        // A two-partition update whose commit message to y's partition is held: y's partition stays prepared.
        let y_server = Addr::Server(ServerId::new(0, 1));
        sim.hold(move |e| e.to == y_server && e.msg.kind() == "commit");
        submit_and_wait(
            &mut sim,
            writer,
            0,
            Request::Update { writes: vec![(x, "x1".into()), (y.clone(), "y1".into())] },
        );
        sim.submit(reader, OpId(0), Request::Rot { keys: vec![y] });
        let early = sim.advance(5_000_000);
        if P::NAME == "cure" {
            assert!(early.is_empty(), "Cure's read waits for the prepared transaction");
            sim.release(|_| true);
            let late = sim.advance(1_000_000);
            let reply = late[0].result.as_ref().unwrap();
            assert_eq!(values(reply), vec![some("y1")], "Cure's snapshot includes the committing transaction");
            reply.metrics.blocked_ns
        } else {
            assert_eq!(early.len(), 1, "{} answers at once", P::NAME);
            early[0].result.as_ref().unwrap().metrics.blocked_ns
        }
    }
    assert!(blocked_ns::<Cure>() >= 4_500_000, "Cure waited until the commit was released");
    assert_eq!(blocked_ns::<Av>(), 0);
    assert_eq!(blocked_ns::<Op>(), 0);
}

/// Tomsic §3.3.2 (Lemma 3, Concurrent Freshness): OP may return a committed version newer than the stable
/// snapshot when it is compatible with it; AV (§3.3.3, Stable Freshness) must return the stable one.
#[test]
fn op_returns_a_fresher_version_than_av() {
    fn read_after_write<P: Protocol>() -> Reply {
        let mut sim = sim::<P>(1, 2);
        let photo: Key = sim.topology().key_on(1, "photo").into();
        let alice = sim.add_client(0);
        let bob = sim.add_client(0);
        submit_and_wait(&mut sim, alice, 0, Request::Put { key: photo.clone(), value: "old".into() });
        sim.advance(50_000_000);
        submit_and_wait(&mut sim, alice, 1, Request::Put { key: photo.clone(), value: "new".into() });
        // Before the next stabilisation round: the new version is committed but not stable.
        submit_and_wait(&mut sim, bob, 0, Request::Rot { keys: vec![photo] })
    }
    let op = read_after_write::<Op>();
    let av = read_after_write::<Av>();
    assert_eq!((values(&op), op.reads[0].versions_skipped), (vec![some("new")], 0));
    assert_eq!((values(&av), av.reads[0].versions_skipped), (vec![some("old")], 1));
}

/// Tomsic §4.2.2: a partition propagates committed updates to its siblings asynchronously; CV makes them
/// visible as they arrive. A remote datacenter sees a write one WAN delay after its commit, not before.
#[test]
fn a_committed_write_becomes_visible_in_the_other_datacenter_after_one_wan_delay() {
    let mut sim = sim::<Cv>(2, 2);
    let key: Key = sim.topology().key_on(1, "k").into();
    let writer = sim.add_client(0);
    let reader = sim.add_client(1);
    submit_and_wait(&mut sim, writer, 0, Request::Put { key: key.clone(), value: "v".into() });
    let read =
        |sim: &mut Sim<Cv>, op| values(&submit_and_wait(sim, reader, op, Request::Rot { keys: vec![key.clone()] }));
    assert_eq!(read(&mut sim, 0), vec![None], "not yet replicated");
    sim.advance(10_000_000);
    assert_eq!(read(&mut sim, 1), vec![some("v")]);
}
