//! Each test drives one state machine directly and asserts the exact effects of its inputs.
use super::*;
use rand::SeedableRng;
use rand::rngs::SmallRng;
use snowline_core::Effects;

/// 1 s: the physical clock of every node in these tests unless a test says otherwise.
const NOW: u64 = 1_000_000_000;
const ALICE: ClientId = ClientId(1);
const BOB: ClientId = ClientId(2);

fn topo() -> Topology {
    Topology::new(2, 2)
}

fn key(p: PartitionId, prefix: &str) -> Key {
    topo().key_on(p, prefix).into()
}

fn server<P: CopsFamily>(dc: DcId, p: PartitionId) -> CopsServer {
    P::server(ServerId::new(dc, p), topo(), &ProtocolConfig::default())
}

fn deliver<P: CopsFamily>(node: &mut CopsServer, now: u64, from: impl Into<Addr>, msg: CopsMsg) -> Effects<P>
where
    CopsServer: ServerNode<P>,
{
    let mut rng = SmallRng::seed_from_u64(1);
    let mut out = Effects::default();
    let _ = ServerNode::<P>::on_message(node, &mut Ctx::new(now, &mut rng, &mut out), from.into(), msg);
    out
}

fn fire<P: CopsFamily>(node: &mut CopsServer, now: u64) -> Effects<P>
where
    CopsServer: ServerNode<P>,
{
    let mut rng = SmallRng::seed_from_u64(1);
    let mut out = Effects::default();
    ServerNode::<P>::on_timer(node, &mut Ctx::new(now, &mut rng, &mut out), CopsTimer::Gc);
    out
}

fn request<P: CopsFamily>(client: &mut CopsClient, op: u64, req: Request) -> Effects<P>
where
    CopsClient: ClientNode<P>,
{
    let mut rng = SmallRng::seed_from_u64(1);
    let mut out = Effects::default();
    ClientNode::<P>::on_request(client, &mut Ctx::new(NOW, &mut rng, &mut out), OpId(op), req);
    out
}

fn to_client<P: CopsFamily>(client: &mut CopsClient, from: ServerId, msg: CopsMsg) -> Effects<P>
where
    CopsClient: ClientNode<P>,
{
    let mut rng = SmallRng::seed_from_u64(1);
    let mut out = Effects::default();
    ClientNode::<P>::on_message(client, &mut Ctx::new(NOW, &mut rng, &mut out), Addr::Server(from), msg);
    out
}

fn put(op: u64, key: &Key, value: &str, deps: Vec<Dep>) -> CopsMsg {
    CopsMsg::Put { op: OpId(op), key: key.clone(), value: value.into(), deps, ts: 0 }
}

fn read(op: u64, rot: RotId, keys: Vec<Key>) -> CopsMsg {
    CopsMsg::Read { op: OpId(op), rot, keys, ts: 0 }
}

/// The version a PUT reply carries.
fn put_version<P: CopsFamily>(out: &Effects<P>) -> Version {
    out.sends
        .iter()
        .find_map(|(_, m)| match m {
            CopsMsg::PutReply { result: Ok(done), .. } => Some(done.version),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no PUT reply in {:?}", out.sends))
}

fn dep(key: &Key, version: Version) -> Dep {
    Dep { key: key.clone(), version }
}

fn values(out_sends: &[(Addr, CopsMsg)]) -> Vec<Option<Value>> {
    match &out_sends[0].1 {
        CopsMsg::ReadReply { items, .. } => items.iter().map(|i| i.value.clone()).collect(),
        m => panic!("not a read reply: {m:?}"),
    }
}

/// SNOW §5.3, Fig. 4 lines 18–22 and 26–30, at one partition holding both keys: Bob's ROT reads `x`
/// (recorded in `curr_rdrs[x]`); Alice overwrites `x` (Bob moves to `old_rdrs[x]`, line 29), then
/// writes `y` depending on her `x` (the readers check of line 27, run in place, makes Bob an old reader
/// of `y`); Bob's read of `y` then returns the older version (lines 18–20), while a new ROT reads the
/// new one.
#[test]
fn an_old_reader_reads_the_older_version() {
    let mut p = server::<CopsSnow>(0, 0);
    let (x, y) = (key(0, "x"), key(0, "y"));
    let y0 = put_version(&deliver::<CopsSnow>(&mut p, NOW, ALICE, put(0, &y, "y0", vec![])));
    let x0 = put_version(&deliver::<CopsSnow>(&mut p, NOW, ALICE, put(1, &x, "x0", vec![dep(&y, y0)])));
    let bob = RotId { client: BOB, seq: 7 };
    let out = deliver::<CopsSnow>(&mut p, NOW + 10, BOB, read(0, bob, vec![x.clone()]));
    assert_eq!(values(&out.sends), vec![Some("x0".into())]);
    let read_time = p.clock();
    assert_eq!(p.current_readers(&x), vec![(bob, read_time)], "line 21: the read is recorded with its time");

    let x1 = put_version(&deliver::<CopsSnow>(&mut p, NOW + 20, ALICE, put(2, &x, "x1", vec![dep(&x, x0)])));
    assert_eq!(p.current_readers(&x), vec![], "line 30: curr_rdrs cleared");
    assert_eq!(p.old_readers(&x), vec![(bob, read_time)], "line 29: the readers of x0 are old readers now");

    let before_y1 = p.clock();
    let out = deliver::<CopsSnow>(&mut p, NOW + 30, ALICE, put(3, &y, "y1", vec![dep(&x, x1)]));
    let cost = match &out.sends[0].1 {
        CopsMsg::PutReply { result: Ok(done), .. } => done.readers_check.clone().unwrap(),
        m => panic!("{m:?}"),
    };
    assert_eq!(
        cost,
        ReadersCheckCost { rot_ids_total: 1, rot_ids_distinct: 1, keys_checked: 1, partitions_contacted: 1 }
    );
    assert_eq!(p.old_readers(&y), vec![(bob, before_y1)], "line 28: Bob is an old reader of y");

    let out = deliver::<CopsSnow>(&mut p, NOW + 40, BOB, read(0, bob, vec![y.clone()]));
    match &out.sends[..] {
        [(_, CopsMsg::ReadReply { items, .. })] => {
            assert_eq!((items[0].value.as_deref(), items[0].version, items[0].skipped), (Some("y0"), y0, 1));
        }
        other => panic!("{other:?}"),
    }
    let carol = RotId { client: ClientId(3), seq: 0 };
    let out = deliver::<CopsSnow>(&mut p, NOW + 40, ClientId(3), read(0, carol, vec![y.clone()]));
    assert_eq!(values(&out.sends), vec![Some("y1".into())], "a ROT that is no old reader reads the latest");
}

/// SNOW §5.3, Fig. 4 lines 26–30 and 35–37, with messages: a PUT on `y` sends its readers check to the
/// partition of its dependency and is not applied until the answer; the dependency's partition answers
/// with its key's old readers; the write then records them, answers the client with the check's cost
/// (Contrarian §5.1 metrics) and replicates with its dependencies.
#[test]
fn a_put_collects_the_old_readers_of_its_dependencies_before_it_is_applied() {
    let (x, y) = (key(0, "x"), key(1, "y"));
    let mut px = server::<CopsSnow>(0, 0);
    let x0 = put_version(&deliver::<CopsSnow>(&mut px, NOW, ALICE, put(0, &x, "x0", vec![])));
    let bob = RotId { client: BOB, seq: 0 };
    deliver::<CopsSnow>(&mut px, NOW + 10, BOB, read(0, bob, vec![x.clone()]));
    let x1 = put_version(&deliver::<CopsSnow>(&mut px, NOW + 20, ALICE, put(1, &x, "x1", vec![dep(&x, x0)])));

    let mut py = server::<CopsSnow>(0, 1);
    let deps = vec![dep(&x, x1)];
    let out = deliver::<CopsSnow>(&mut py, NOW + 30, ALICE, put(2, &y, "y1", deps.clone()));
    assert_eq!(
        out.sends,
        vec![(Addr::Server(ServerId::new(0, 0)), CopsMsg::DepCheck { write: 0, deps: deps.clone(), readers: true })]
    );
    assert_eq!(py.versions(&y), vec![], "not applied before the readers check returns");

    let out = deliver::<CopsSnow>(
        &mut px,
        NOW + 40,
        ServerId::new(0, 1),
        CopsMsg::DepCheck { write: 0, deps: deps.clone(), readers: true },
    );
    let clock = px.clock();
    assert_eq!(
        out.sends,
        vec![(Addr::Server(ServerId::new(0, 1)), CopsMsg::DepOk { write: 0, clock, old_readers: vec![bob] })]
    );

    let out = deliver::<CopsSnow>(
        &mut py,
        NOW + 50,
        ServerId::new(0, 0),
        CopsMsg::DepOk { write: 0, clock, old_readers: vec![bob] },
    );
    let [(to, CopsMsg::PutReply { op, result: Ok(done) }), (sibling, replicate)] = &out.sends[..] else {
        panic!("{:?}", out.sends)
    };
    assert_eq!((*to, *op), (Addr::Client(ALICE), OpId(2)));
    assert!(done.evt > clock, "the write becomes visible after its dependency");
    assert_eq!(
        done.readers_check,
        Some(ReadersCheckCost { rot_ids_total: 1, rot_ids_distinct: 1, keys_checked: 1, partitions_contacted: 1 })
    );
    assert_eq!(*sibling, Addr::Server(ServerId::new(1, 1)));
    assert_eq!(*replicate, CopsMsg::Replicate { key: y.clone(), value: "y1".into(), version: done.version, deps });
    // Recorded at p_y's clock just before the write (here: the clock it learned from p_x).
    assert_eq!(py.old_readers(&y), vec![(bob, clock)]);
}

/// Contrarian §5.1: "each readers check response message contains at most one ROT id per client, i.e., the
/// one corresponding to the most recent ROT of that client". Bob's ROT 1 is an old reader of `a`, his
/// ROT 2 of `b`; a check of both keys returns ROT 2 only, plus Carol's.
#[test]
fn a_readers_check_reply_carries_at_most_one_rot_id_per_client() {
    let mut p = server::<CopsSnow>(0, 0);
    let (a, b) = (key(0, "a"), key(0, "b"));
    let carol = ClientId(3);
    deliver::<CopsSnow>(&mut p, NOW, BOB, read(0, RotId { client: BOB, seq: 1 }, vec![a.clone()]));
    deliver::<CopsSnow>(&mut p, NOW, carol, read(0, RotId { client: carol, seq: 4 }, vec![a.clone()]));
    deliver::<CopsSnow>(&mut p, NOW, BOB, read(1, RotId { client: BOB, seq: 2 }, vec![b.clone()]));
    let va = put_version(&deliver::<CopsSnow>(&mut p, NOW, ALICE, put(0, &a, "a1", vec![])));
    let vb = put_version(&deliver::<CopsSnow>(&mut p, NOW, ALICE, put(1, &b, "b1", vec![])));
    let check = CopsMsg::DepCheck { write: 9, deps: vec![dep(&a, va), dep(&b, vb)], readers: true };
    let out = deliver::<CopsSnow>(&mut p, NOW, ServerId::new(0, 1), check);
    let clock = p.clock();
    let old_readers = vec![RotId { client: BOB, seq: 2 }, RotId { client: carol, seq: 4 }];
    assert_eq!(out.sends, vec![(Addr::Server(ServerId::new(0, 1)), CopsMsg::DepOk { write: 9, clock, old_readers })]);
}

/// Contrarian §5.1: a ROT id is garbage-collected `old_readers_gc_ms` (500 ms) after its insertion in a
/// key's readers record; after that the ROT reads the latest version again and checks no longer return it.
#[test]
fn old_readers_are_collected_after_the_timeout() {
    let mut p = server::<CopsSnow>(0, 0);
    let x = key(0, "x");
    let bob = RotId { client: BOB, seq: 0 };
    deliver::<CopsSnow>(&mut p, NOW, BOB, read(0, bob, vec![x.clone()]));
    let x1 = put_version(&deliver::<CopsSnow>(&mut p, NOW + 1_000_000, ALICE, put(0, &x, "x1", vec![])));
    assert_eq!(p.old_readers(&x).len(), 1);

    let gc = ProtocolConfig::default().old_readers_gc_ms * 1_000_000;
    let out = fire::<CopsSnow>(&mut p, NOW + gc - 1);
    assert_eq!(out.timers, vec![(ProtocolConfig::default().gc_interval_ms * 1_000_000, CopsTimer::Gc)]);
    assert_eq!(p.old_readers(&x).len(), 1, "kept until the timeout");
    fire::<CopsSnow>(&mut p, NOW + gc);
    assert_eq!(p.old_readers(&x), vec![], "collected 500 ms after the read inserted it");
    let out = deliver::<CopsSnow>(&mut p, NOW + gc, BOB, read(0, bob, vec![x.clone()]));
    assert_eq!(values(&out.sends), vec![Some("x1".into())]);
    let check = CopsMsg::DepCheck { write: 0, deps: vec![dep(&x, x1)], readers: true };
    let out = deliver::<CopsSnow>(&mut p, NOW + gc, ServerId::new(0, 1), check);
    assert!(matches!(&out.sends[0].1, CopsMsg::DepOk { old_readers, .. } if old_readers.is_empty()));
}

/// The choice the module doc argues for (SNOW Fig. 4 line 28 with Lamport time): a new old reader of `y`
/// is recorded at `p_y`'s own clock. Here `p_y`'s clock is far ahead of `p_x`'s: `y1` was written before
/// Bob read `x`, yet has a time above Bob's read time at `p_x`. Bob must still read `y1` (a `Z` depending
/// on it may be in his snapshot) and must not read `y2`, which depends on the `x` he missed. Reading at
/// Bob's time at `p_x`, as Fig. 4 line 19 does literally, would return a version older than `y1` (here:
/// none at all).
#[test]
fn an_old_reader_of_a_key_reads_what_was_visible_there_when_it_was_recorded() {
    let y = key(1, "y");
    let mut py = server::<CopsSnow>(0, 1);
    let far_ahead = NOW * 5;
    put_version(&deliver::<CopsSnow>(&mut py, far_ahead, ALICE, put(0, &y, "y0", vec![])));
    put_version(&deliver::<CopsSnow>(&mut py, far_ahead + 10, ALICE, put(1, &y, "y1", vec![])));
    let bob = RotId { client: BOB, seq: 0 };
    let x1 = Version { time: NOW + 5, dc: 0 };
    let x = key(0, "x");
    deliver::<CopsSnow>(&mut py, far_ahead + 20, ALICE, put(2, &y, "y2", vec![dep(&x, x1)]));
    // Bob read x at p_x at time NOW (< y1's time) and is an old reader of x.
    deliver::<CopsSnow>(
        &mut py,
        far_ahead + 30,
        ServerId::new(0, 0),
        CopsMsg::DepOk { write: 0, clock: NOW + 5, old_readers: vec![bob] },
    );
    let out = deliver::<CopsSnow>(&mut py, far_ahead + 40, BOB, read(0, bob, vec![y.clone()]));
    assert_eq!(values(&out.sends), vec![Some("y1".into())]);
}

/// SNOW §5.3 / Contrarian §3, dependency checking: a replicated write is applied in a remote datacenter
/// only after the local partitions holding its dependencies have applied them; the check waits there.
#[test]
fn a_replicated_write_waits_for_its_dependency_check() {
    let (x, y) = (key(0, "x"), key(1, "y"));
    let x1 = Version { time: NOW, dc: 0 };
    let y1 = Version { time: NOW + 5, dc: 0 };
    let mut py = server::<Cops>(1, 1);
    let deps = vec![dep(&x, x1)];
    let out = deliver::<Cops>(
        &mut py,
        NOW,
        ServerId::new(0, 1),
        CopsMsg::Replicate { key: y.clone(), value: "y1".into(), version: y1, deps: deps.clone() },
    );
    assert_eq!(
        out.sends,
        vec![(Addr::Server(ServerId::new(1, 0)), CopsMsg::DepCheck { write: 0, deps: deps.clone(), readers: false })]
    );
    assert_eq!(py.versions(&y), vec![]);

    let mut px = server::<Cops>(1, 0);
    let out = deliver::<Cops>(
        &mut px,
        NOW,
        ServerId::new(1, 1),
        CopsMsg::DepCheck { write: 0, deps: deps.clone(), readers: false },
    );
    assert!(out.sends.is_empty(), "x1 has not arrived: the check waits");
    assert_eq!(px.waiting_checks(), 1);
    let out = deliver::<Cops>(
        &mut px,
        NOW + 10,
        ServerId::new(0, 0),
        CopsMsg::Replicate { key: x.clone(), value: "x1".into(), version: x1, deps: vec![] },
    );
    let x1_evt = px.versions(&x)[0].2;
    let clock = px.clock();
    assert_eq!(clock, x1_evt);
    assert_eq!(
        out.sends,
        vec![(Addr::Server(ServerId::new(1, 1)), CopsMsg::DepOk { write: 0, clock, old_readers: vec![] })]
    );
    assert_eq!(px.waiting_checks(), 0);

    deliver::<Cops>(&mut py, NOW + 20, ServerId::new(1, 0), CopsMsg::DepOk { write: 0, clock, old_readers: vec![] });
    let stored = py.versions(&y);
    assert_eq!((stored[0].0, stored[0].1.as_ref()), (y1, "y1"));
    assert!(stored[0].2 > x1_evt, "visible after its dependency, in this datacenter's logical time");
}

/// SNOW §5.3 (COPS): "if a0 and b1 are returned in the first round then a1 will be requested in the
/// second round". With Eiger's logical time: the album's EVT (30) is past the ACL's LVT (20), so the client
/// re-reads the ACL at time 30, and only the ACL.
#[test]
fn the_second_round_requests_the_version_valid_at_the_effective_time() {
    let topo = Topology::new(1, 2);
    let mut c = Cops::client(ALICE, 0, topo, &ProtocolConfig::default());
    let (acl, album): (Key, Key) = (topo.key_on(0, "acl").into(), topo.key_on(1, "album").into());
    let out = request::<Cops>(&mut c, 5, Request::Rot { keys: vec![album.clone(), acl.clone()] });
    let rot = RotId { client: ALICE, seq: 0 };
    assert_eq!(
        out.sends,
        vec![
            (Addr::Server(ServerId::new(0, 0)), read(5, rot, vec![acl.clone()])),
            (Addr::Server(ServerId::new(0, 1)), read(5, rot, vec![album.clone()])),
        ]
    );
    let item = |key: &Key, value: &str, time, evt, lvt| ReadItem {
        key: key.clone(),
        value: Some(value.into()),
        version: Version { time, dc: 0 },
        evt,
        lvt,
        skipped: 0,
    };
    let r1 = vec![item(&acl, "public", 10, 10, 20)];
    assert!(
        to_client::<Cops>(&mut c, ServerId::new(0, 0), CopsMsg::ReadReply { op: OpId(5), round: 1, items: r1 })
            .is_empty()
    );
    let r1 = vec![item(&album, "private-photo", 30, 30, 40)];
    let out = to_client::<Cops>(&mut c, ServerId::new(0, 1), CopsMsg::ReadReply { op: OpId(5), round: 1, items: r1 });
    assert_eq!(
        out.sends,
        vec![(Addr::Server(ServerId::new(0, 0)), CopsMsg::ReadAt { op: OpId(5), keys: vec![acl.clone()], at: 30 })]
    );
    assert!(out.completions.is_empty());

    let r2 = vec![item(&acl, "private", 25, 25, 30)];
    let out = to_client::<Cops>(&mut c, ServerId::new(0, 0), CopsMsg::ReadReply { op: OpId(5), round: 2, items: r2 });
    let [(OpId(5), Ok(reply))] = &out.completions[..] else { panic!("{:?}", out.completions) };
    let got: Vec<_> = reply.reads.iter().map(|r| r.value.as_deref().unwrap()).collect();
    assert_eq!(got, vec!["private-photo", "private"]);
    assert_eq!((reply.metrics.rounds, reply.metrics.versions_returned, reply.metrics.blocked_ns), (2, 3, 0));
    // The reads join the causal context: the next PUT depends on both.
    assert_eq!(c.context(), vec![dep(&acl, Version { time: 25, dc: 0 }), dep(&album, Version { time: 30, dc: 0 })]);
    assert_eq!(c.causal_time(), 30);
}

/// SNOW §5.3: COPS-SNOW's ROTs "return the values from the first and only round", whatever the times.
#[test]
fn cops_snow_answers_in_one_round() {
    let topo = Topology::new(1, 2);
    let mut c = CopsSnow::client(ALICE, 0, topo, &ProtocolConfig::default());
    let (a, b): (Key, Key) = (topo.key_on(0, "a").into(), topo.key_on(1, "b").into());
    request::<CopsSnow>(&mut c, 1, Request::Rot { keys: vec![a.clone(), b.clone()] });
    let item = |key: &Key, evt, lvt| ReadItem {
        key: key.clone(),
        value: Some(format!("{key}").into()),
        version: Version { time: evt, dc: 0 },
        evt,
        lvt,
        skipped: 0,
    };
    to_client::<CopsSnow>(
        &mut c,
        ServerId::new(0, 0),
        CopsMsg::ReadReply { op: OpId(1), round: 1, items: vec![item(&a, 10, 20)] },
    );
    let out = to_client::<CopsSnow>(
        &mut c,
        ServerId::new(0, 1),
        CopsMsg::ReadReply { op: OpId(1), round: 1, items: vec![item(&b, 30, 40)] },
    );
    assert!(out.sends.is_empty());
    let [(OpId(1), Ok(reply))] = &out.completions[..] else { panic!("{:?}", out.completions) };
    assert_eq!((reply.metrics.rounds, reply.metrics.versions_returned), (1, 2));
}

/// COPS nearest dependencies (SNOW §5.3 "update causal dependencies"): a PUT carries the session's
/// context and the context becomes the new write alone.
#[test]
fn a_put_carries_the_context_and_then_replaces_it() {
    let mut c = Cops::client(ALICE, 0, topo(), &ProtocolConfig::default());
    let (a, b) = (key(0, "a"), key(1, "b"));
    request::<Cops>(&mut c, 1, Request::Rot { keys: vec![a.clone()] });
    let got = ReadItem {
        key: a.clone(),
        value: Some("a1".into()),
        version: Version { time: 7, dc: 1 },
        evt: 9,
        lvt: 12,
        skipped: 0,
    };
    to_client::<Cops>(&mut c, ServerId::new(0, 0), CopsMsg::ReadReply { op: OpId(1), round: 1, items: vec![got] });
    let out = request::<Cops>(&mut c, 2, Request::Put { key: b.clone(), value: "b1".into() });
    let deps = vec![dep(&a, Version { time: 7, dc: 1 })];
    assert_eq!(
        out.sends,
        vec![(
            Addr::Server(ServerId::new(0, 1)),
            CopsMsg::Put { op: OpId(2), key: b.clone(), value: "b1".into(), deps, ts: 9 }
        )]
    );
    let b1 = Version { time: 15, dc: 0 };
    let done = PutDone { version: b1, evt: 15, readers_check: None };
    let out = to_client::<Cops>(&mut c, ServerId::new(0, 1), CopsMsg::PutReply { op: OpId(2), result: Ok(done) });
    assert_eq!(out.completions[0].1.as_ref().unwrap().commit, Some(b1));
    assert_eq!(c.context(), vec![dep(&b, b1)]);
    assert_eq!(c.causal_time(), 15);
}

/// SNOW §5.3: "COPS has single-key write operations and does not have write transactions".
#[test]
fn update_transactions_are_rejected_naming_the_protocol() {
    for (mut c, name) in [
        (Cops::client(ALICE, 0, topo(), &ProtocolConfig::default()), "cops"),
        (CopsSnow::client(ALICE, 0, topo(), &ProtocolConfig::default()), "cops-snow"),
    ] {
        let writes = vec![(key(0, "a"), "1".into()), (key(1, "b"), "2".into())];
        let out = request::<Cops>(&mut c, 1, Request::Update { writes });
        assert!(out.sends.is_empty());
        match &out.completions[..] {
            [(OpId(1), Err(OpError::Rejected(msg)))] => {
                assert!(msg.starts_with(name) && msg.contains("write transactions"), "{msg}")
            }
            other => panic!("{other:?}"),
        }
    }
}

/// Version GC (module doc): the newest version at or before the horizon and every later one stay, so a
/// read at any logical time after the horizon is unchanged; LWW keeps an older replicated version out.
#[test]
fn version_gc_keeps_the_snapshots_after_its_horizon_and_older_replicas_lose() {
    let mut p = server::<Cops>(0, 0);
    let x = key(0, "x");
    let ms = 1_000_000;
    for (i, t) in [0, 100, 200, 1_500].into_iter().enumerate() {
        deliver::<Cops>(&mut p, NOW + t * ms, ALICE, put(i as u64, &x, &format!("v{t}"), vec![]));
    }
    // A concurrent write from dc1 with an older time arrives late: applied, never visible.
    deliver::<Cops>(
        &mut p,
        NOW + 1_600 * ms,
        ServerId::new(1, 0),
        CopsMsg::Replicate {
            key: x.clone(),
            value: "old".into(),
            version: Version { time: NOW + 150 * ms, dc: 1 },
            deps: vec![],
        },
    );
    assert_eq!(p.versions(&x).len(), 4);
    fire::<Cops>(&mut p, NOW + 1_600 * ms);
    // Horizon: clock (1.6 s) − gc_retain_ms (1 s) = 600 ms after NOW: v200 is the newest at or before it.
    let kept: Vec<_> = p.versions(&x).into_iter().map(|(_, v, _)| v).collect();
    assert_eq!(kept, vec![Value::from("v200"), "v1500".into()]);
    let out = deliver::<Cops>(
        &mut p,
        NOW + 1_600 * ms,
        ALICE,
        CopsMsg::ReadAt { op: OpId(9), keys: vec![x.clone()], at: NOW + 700 * ms },
    );
    assert_eq!(values(&out.sends), vec![Some("v200".into())]);
    assert_eq!(p.stale_reads(), 0);
}
