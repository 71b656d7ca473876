//! Contrarian's unit tests: each rule of the paper's protocol on a hand-driven partition and client.

//! Each test drives one state machine directly and asserts the exact effects of its inputs.
use super::*;
use rand::SeedableRng;
use rand::rngs::SmallRng;
use snowline_core::Effects;

const NOW: u64 = 1_000_000;
const CLIENT: ClientId = ClientId(9);

fn topo() -> Topology {
    Topology::new(2, 2)
}

fn vc(v: &[u64]) -> VectorClock {
    VectorClock(v.to_vec())
}

fn key(t: Topology, p: PartitionId) -> Key {
    t.key_on(p, "k").into()
}

fn server_in(t: Topology, dc: DcId, p: PartitionId, config: &ProtocolConfig) -> ContrarianServer {
    Contrarian::server(ServerId::new(dc, p), t, config)
}

fn server(dc: DcId, p: PartitionId) -> ContrarianServer {
    server_in(topo(), dc, p, &ProtocolConfig::default())
}

fn with_ctx(now: u64, f: impl FnOnce(&mut Ctx<'_, Contrarian>)) -> Effects<Contrarian> {
    let mut rng = SmallRng::seed_from_u64(1);
    let mut out = Effects::default();
    f(&mut Ctx::new(now, &mut rng, &mut out));
    out
}

fn deliver(node: &mut ContrarianServer, now: u64, from: impl Into<Addr>, msg: ContrarianMsg) -> Effects<Contrarian> {
    let from = from.into();
    with_ctx(now, |cx| {
        let _ = node.on_message(cx, from, msg);
    })
}

fn fire(node: &mut ContrarianServer, now: u64, timer: ContrarianTimer) -> Effects<Contrarian> {
    with_ctx(now, |cx| node.on_timer(cx, timer))
}

fn to_client(msg: ContrarianMsg) -> (Addr, ContrarianMsg) {
    (Addr::Client(CLIENT), msg)
}

fn put(node: &mut ContrarianServer, now: u64, key: &Key, value: &str, dv: VectorClock) -> Version {
    let out = deliver(node, now, CLIENT, ContrarianMsg::Put { op: OpId(0), key: key.clone(), value: value.into(), dv });
    match out.sends.last() {
        Some((_, ContrarianMsg::PutDone { result: Ok(v), .. })) => *v,
        other => panic!("no PutDone: {other:?}"),
    }
}

fn read_reply(out: &Effects<Contrarian>) -> Vec<VersionRead> {
    match &out.sends[..] {
        [(_, ContrarianMsg::ReadReply { results, .. })] => results.clone(),
        other => panic!("expected one ReadReply, got {other:?}"),
    }
}

fn snapshot_of(out: &Effects<Contrarian>) -> VectorClock {
    match &out.sends[..] {
        [(_, ContrarianMsg::SnapshotIs { sv, .. })] => sv.clone(),
        other => panic!("expected one SnapshotIs, got {other:?}"),
    }
}

/// §4.1, "Encoding dependencies": the partition serving a PUT copies the client's dependency vector into
/// the version's, sets the local entry to the version's timestamp, and "this timestamp is enforced to be
/// higher than any timestamps in the dependency vector provided by the client". The version goes to the
/// sibling replica (asynchronous replication) and VV's local entry becomes its timestamp.
/// The timers set, by kind (their generations aside).
fn timer_kinds(out: &Effects<Contrarian>) -> Vec<(u64, &'static str)> {
    out.timers
        .iter()
        .map(|(d, t)| {
            (
                *d,
                match t {
                    ContrarianTimer::Heartbeat(_) => "heartbeat",
                    ContrarianTimer::Gss(_) => "gss",
                    ContrarianTimer::Gc(_) => "gc",
                    ContrarianTimer::Resnapshot { .. } => "resnapshot",
                },
            )
        })
        .collect()
}

#[test]
fn put_timestamp_exceeds_the_dependencies_and_the_version_carries_them() {
    let mut p = server(0, 0);
    let k = key(topo(), 0);
    let out = deliver(
        &mut p,
        NOW,
        CLIENT,
        ContrarianMsg::Put { op: OpId(4), key: k.clone(), value: "x".into(), dv: vc(&[0, 5_000_000]) },
    );
    let version = Version { time: 5_000_001, dc: 0 };
    let dv = vc(&[5_000_001, 5_000_000]);
    assert_eq!(
        out.sends,
        vec![
            (
                Addr::Server(ServerId::new(1, 0)),
                ContrarianMsg::Replicate { key: k.clone(), value: "x".into(), version, dv: dv.clone() }
            ),
            to_client(ContrarianMsg::PutDone { op: OpId(4), result: Ok(version) }),
        ]
    );
    assert!(out.timers.is_empty() && out.completions.is_empty());
    assert_eq!(p.versions(&k), vec![(version, "x".into(), dv)]);
    assert_eq!(p.vv(), &vc(&[5_000_001, 0]));
    // Without dependencies ahead of it, the HLC follows physical time.
    assert_eq!(put(&mut p, 9_000_000, &k, "y", vc(&[0, 0])).time, 9_000_000);
}

/// §4.1: "each client c maintains a dependency vector"; a PUT piggybacks it, and the new version's
/// timestamp becomes the session's local entry. §2.1: the API is PUT and ROT, so multi-key updates are
/// refused, naming the protocol.
#[test]
fn client_puts_carry_its_dependency_vector_and_updates_are_rejected() {
    let t = topo();
    let mut c = Contrarian::client(CLIENT, 1, t, &ProtocolConfig::default());
    let k = key(t, 1);
    let out = with_ctx(NOW, |cx| c.on_request(cx, OpId(1), Request::Put { key: k.clone(), value: "v".into() }));
    assert_eq!(
        out.sends,
        vec![(
            Addr::Server(ServerId::new(1, 1)),
            ContrarianMsg::Put { op: OpId(1), key: k.clone(), value: "v".into(), dv: vc(&[0, 0]) }
        )]
    );
    let version = Version { time: 77, dc: 1 };
    let out = with_ctx(NOW, |cx| {
        c.on_message(cx, ServerId::new(1, 1).into(), ContrarianMsg::PutDone { op: OpId(1), result: Ok(version) })
    });
    assert_eq!(out.completions.len(), 1);
    assert_eq!(out.completions[0].1.as_ref().unwrap().commit, Some(version));
    assert_eq!(c.dv(), &vc(&[0, 77]));

    let out = with_ctx(NOW, |cx| c.on_request(cx, OpId(2), Request::Update { writes: vec![(k.clone(), "w".into())] }));
    assert!(out.sends.is_empty());
    match &out.completions[..] {
        [(OpId(2), Err(OpError::Rejected(msg)))] => assert!(msg.contains("contrarian"), "{msg}"),
        other => panic!("{other:?}"),
    }
}

/// §4.2: "The local entry of SV is the maximum between the clock at the coordinator and the highest local
/// timestamp seen by the client. The remote entries of SV are given by the entry-wise maximum between the
/// GSS at the coordinator and the dependency vector of the client."
#[test]
fn coordinator_computes_the_snapshot_vector_from_its_clock_its_gss_and_the_client() {
    let mut coord = server(0, 0);
    deliver(&mut coord, NOW, ServerId::new(1, 0), ContrarianMsg::Heartbeat { time: 7_000, busy: false });
    deliver(&mut coord, NOW, ServerId::new(0, 1), ContrarianMsg::Vv { vv: vc(&[2_000_000, 4_000]), busy: false });
    assert_eq!(coord.gss(), &vc(&[0, 4_000]), "min of [0, 7000] and [2000000, 4000]");
    assert_eq!(coord.clock(), 2_000_000, "moved forward to the peer's clock (§4.1)");

    let snap = |dv| ContrarianMsg::Snapshot { op: OpId(1), attempt: 0, dv };
    let out = deliver(&mut coord, NOW, CLIENT, snap(vc(&[10, 3_000])));
    assert_eq!(
        out.sends,
        vec![to_client(ContrarianMsg::SnapshotIs { op: OpId(1), attempt: 0, sv: vc(&[2_000_000, 4_000]) })]
    );

    // A client ahead of the coordinator: its local timestamp and its remote dependency win.
    let out = deliver(&mut coord, NOW, CLIENT, snap(vc(&[9_000_000, 6_000])));
    assert_eq!(snapshot_of(&out), vc(&[9_000_000, 6_000]));
    // The snapshot changes no state (a durable host need not log it): the host moves the clock.
    assert!(out.read_only);
    assert_eq!(out.raise_clock, 9_000_001, "the coordinator's later versions fall outside the snapshot");
    let k = key(topo(), 0);
    assert_eq!(put(&mut coord, out.raise_clock, &k, "v", vc(&[0, 0])).time, 9_000_001);
}

/// §4.2: "Upon receiving a ROT request with snapshot SV, a partition moves its own clock to match the
/// local entry of SV, if needed. A version Y belongs to the snapshot encoded by SV if Y.DV ≤ SV. For any
/// requested key, a partition returns the version with the highest timestamp that belongs to the
/// specified snapshot." §4.3: it answers at once (nonblocking) with one version per key.
#[test]
fn a_partition_returns_the_newest_version_within_sv_and_moves_its_clock_instead_of_blocking() {
    let mut p = server(0, 1);
    let k = key(topo(), 1);
    let a = put(&mut p, NOW, &k, "a", vc(&[0, 0]));
    deliver(
        &mut p,
        NOW,
        ServerId::new(1, 1),
        ContrarianMsg::Replicate {
            key: k.clone(),
            value: "r".into(),
            version: Version { time: NOW + 5, dc: 1 },
            dv: vc(&[0, NOW + 5]),
        },
    );
    let b = put(&mut p, NOW + 10, &k, "b", vc(&[0, 0]));
    assert_eq!((a.time, b.time), (NOW, NOW + 10));

    let read = |sv| ContrarianMsg::Read { op: OpId(2), attempt: 0, keys: vec![k.clone()], sv };
    // "b" is after the snapshot's local entry, "r" is not stable (its DC-1 entry exceeds SV's).
    let got = read_reply(&deliver(&mut p, NOW + 20, CLIENT, read(vc(&[NOW + 9, 0]))));
    assert_eq!(
        got,
        vec![VersionRead {
            read: ReadResult { key: k.clone(), value: Some("a".into()), version: a, versions_skipped: 2 },
            dv: vc(&[NOW, 0]),
        }]
    );

    // A snapshot far ahead of this partition's clock: no waiting, the clock jumps forward. ("r", still
    // unstable, is older than "b": nothing newer is skipped.)
    let ahead = 50_000_000;
    let out = deliver(&mut p, NOW + 20, CLIENT, read(vc(&[ahead, 0])));
    assert!(out.timers.is_empty());
    assert_eq!(
        read_reply(&out),
        vec![VersionRead {
            read: ReadResult { key: k.clone(), value: Some("b".into()), version: b, versions_skipped: 0 },
            dv: vc(&[NOW + 10, 0]),
        }]
    );
    // Read-only: the host raises the clock for later inputs.
    assert!(out.read_only);
    assert_eq!(out.raise_clock, ahead + 1);
    let now = (NOW + 30).max(out.raise_clock);
    assert_eq!(put(&mut p, now, &k, "c", vc(&[0, 0])).time, ahead + 1, "later versions are outside SV");
}

/// §4.1, "GSS computation": "Periodically, the partitions in a DC exchange their VVs and compute the GSS
/// as the aggregate minimum vector"; "the partitions also move their local clocks forward, if needed, to
/// match the highest timestamp corresponding to the local entry in any of the exchanged VVs".
#[test]
fn gss_is_the_aggregate_minimum_of_the_exchanged_version_vectors() {
    let t = Topology::new(3, 3);
    let mut p = server_in(t, 0, 0, &ProtocolConfig::default());
    deliver(&mut p, NOW, ServerId::new(1, 0), ContrarianMsg::Heartbeat { time: 500, busy: false });
    deliver(&mut p, NOW, ServerId::new(2, 0), ContrarianMsg::Heartbeat { time: 900, busy: false });
    assert_eq!(p.vv(), &vc(&[0, 500, 900]));
    deliver(&mut p, NOW, ServerId::new(0, 1), ContrarianMsg::Vv { vv: vc(&[3_000_000, 400, 1_000]), busy: false });
    assert_eq!(p.gss(), &vc(&[0, 0, 0]), "no GSS before every partition of the DC is heard from");
    deliver(&mut p, NOW, ServerId::new(0, 2), ContrarianMsg::Vv { vv: vc(&[2_000_000, 800, 700]), busy: false });
    assert_eq!(p.gss(), &vc(&[0, 400, 700]));
    assert_eq!(p.clock(), 3_000_000);

    // Every gss_interval_ms (5 ms, §5.1) it sends its own VV, local entry = its clock, to each peer.
    let out = {
        let g = p.gss_pacer.generation();
        fire(&mut p, NOW, ContrarianTimer::Gss(g))
    };
    let vv = vc(&[3_000_000, 500, 900]);
    assert_eq!(
        out.sends,
        vec![
            (Addr::Server(ServerId::new(0, 1)), ContrarianMsg::Vv { vv: vv.clone(), busy: false }),
            (Addr::Server(ServerId::new(0, 2)), ContrarianMsg::Vv { vv, busy: false }),
        ]
    );
    assert_eq!(timer_kinds(&out), vec![(10_000_000, "gss")], "nothing new here: the next exchange backs off");
}

/// §4.1: "a partition sends a heartbeat message with its current clock value to its replicas if it does
/// not process a PUT for a given amount of time" — 1 ms in §5.1.
#[test]
fn a_heartbeat_goes_to_the_replicas_after_1_ms_without_a_put() {
    let mut p = server(0, 1);
    let out = with_ctx(NOW, |cx| p.on_start(cx));
    assert!(out.sends.is_empty());
    assert_eq!(timer_kinds(&out), vec![(1_000_000, "heartbeat"), (5_000_000, "gss"), (100_000_000, "gc")]);
    let out = {
        let g = p.heartbeat_pacer.generation();
        fire(&mut p, NOW + 1_000_000, ContrarianTimer::Heartbeat(g))
    };
    assert_eq!(
        out.sends,
        vec![(Addr::Server(ServerId::new(1, 1)), ContrarianMsg::Heartbeat { time: 2_000_000, busy: false })]
    );
    assert_eq!(timer_kinds(&out), vec![(2_000_000, "heartbeat")], "idle: the next round backs off");

    // A PUT at 2.2 ms replicates (and pulls the next round in); at 3 ms the partition has been idle only
    // 0.8 ms: no heartbeat yet.
    put(&mut p, 2_200_000, &key(topo(), 1), "v", vc(&[0, 0]));
    let out = {
        let g = p.heartbeat_pacer.generation();
        fire(&mut p, 3_000_000, ContrarianTimer::Heartbeat(g))
    };
    assert!(out.sends.is_empty());
    assert_eq!(timer_kinds(&out), vec![(200_000, "heartbeat")]);
    let out = {
        let g = p.heartbeat_pacer.generation();
        fire(&mut p, 3_200_000, ContrarianTimer::Heartbeat(g))
    };
    assert_eq!(
        out.sends,
        vec![(Addr::Server(ServerId::new(1, 1)), ContrarianMsg::Heartbeat { time: 3_200_000, busy: false })]
    );
}

/// §4.1: "A remote version can be read by clients in a DC only when it is stable", i.e. when its remote
/// entries are within the GSS; the remote entries of SV come from the GSS (§4.2).
#[test]
fn a_remote_update_is_not_visible_before_it_enters_the_gss() {
    let mut p = server(1, 0);
    let k = key(topo(), 0);
    let version = Version { time: 2_000_000, dc: 0 };
    deliver(
        &mut p,
        NOW,
        ServerId::new(0, 0),
        ContrarianMsg::Replicate { key: k.clone(), value: "w".into(), version, dv: vc(&[2_000_000, 0]) },
    );
    assert_eq!(p.vv(), &vc(&[2_000_000, 0]));
    let read_now = |p: &mut ContrarianServer| {
        let sv =
            snapshot_of(&deliver(p, NOW, CLIENT, ContrarianMsg::Snapshot { op: OpId(1), attempt: 0, dv: vc(&[0, 0]) }));
        let got = read_reply(&deliver(
            p,
            NOW,
            CLIENT,
            ContrarianMsg::Read { op: OpId(1), attempt: 0, keys: vec![k.clone()], sv },
        ));
        (got[0].read.value.clone(), got[0].read.versions_skipped)
    };
    assert_eq!(read_now(&mut p), (None, 1), "received, not stable: no GSS yet");
    // The other partition of DC 1 has received DC 0's updates only up to 1 ms: GSS[0] = 1 ms.
    deliver(&mut p, NOW, ServerId::new(1, 1), ContrarianMsg::Vv { vv: vc(&[1_000_000, NOW]), busy: false });
    assert_eq!(p.gss().get(0), 1_000_000);
    assert_eq!(read_now(&mut p), (None, 1));
    deliver(&mut p, NOW, ServerId::new(1, 1), ContrarianMsg::Vv { vv: vc(&[2_500_000, NOW]), busy: false });
    assert_eq!(p.gss().get(0), 2_000_000);
    assert_eq!(read_now(&mut p), (Some("w".into()), 0));
}

/// §4.2, Fig. 2: the client sends its dependency vector to a coordinator among the ROT's partitions, gets
/// SV back, then reads every partition at SV in parallel; two rounds, one version per key, no blocking.
/// §4.1: the session then depends on the versions it read.
#[test]
fn client_runs_a_rot_in_two_rounds_and_absorbs_the_dependencies_it_read() {
    let t = topo();
    let mut c = Contrarian::client(CLIENT, 0, t, &ProtocolConfig::default());
    let (k0, k1) = (key(t, 0), key(t, 1));
    let out = with_ctx(NOW, |cx| c.on_request(cx, OpId(3), Request::Rot { keys: vec![k1.clone(), k0.clone()] }));
    match &out.sends[..] {
        [(Addr::Server(s), ContrarianMsg::Snapshot { op: OpId(3), attempt: 0, dv })] => {
            assert!(s.dc == 0 && s.partition < 2, "a coordinator among the ROT's partitions: {s}");
            assert_eq!(dv, &vc(&[0, 0]));
        }
        other => panic!("{other:?}"),
    }
    let sv = vc(&[NOW, 40]);
    let out = with_ctx(NOW, |cx| {
        c.on_message(
            cx,
            ServerId::new(0, 0).into(),
            ContrarianMsg::SnapshotIs { op: OpId(3), attempt: 0, sv: sv.clone() },
        )
    });
    let read = |keys: Vec<Key>| ContrarianMsg::Read { op: OpId(3), attempt: 0, keys, sv: sv.clone() };
    assert_eq!(
        out.sends,
        vec![
            (Addr::Server(ServerId::new(0, 0)), read(vec![k0.clone()])),
            (Addr::Server(ServerId::new(0, 1)), read(vec![k1.clone()])),
        ]
    );
    let result = |k: &Key, v: &str, time, dv| VersionRead {
        read: ReadResult {
            key: k.clone(),
            value: Some(v.into()),
            version: Version { time, dc: 0 },
            versions_skipped: 0,
        },
        dv,
    };
    let out = with_ctx(NOW, |cx| {
        let results = vec![result(&k0, "x", 30, vc(&[30, 20]))];
        c.on_message(cx, ServerId::new(0, 0).into(), ContrarianMsg::ReadReply { op: OpId(3), attempt: 0, results })
    });
    assert!(out.completions.is_empty());
    let out = with_ctx(NOW, |cx| {
        let results = vec![result(&k1, "y", 50, vc(&[50, 10]))];
        c.on_message(cx, ServerId::new(0, 1).into(), ContrarianMsg::ReadReply { op: OpId(3), attempt: 0, results })
    });
    let reply = out.completions[0].1.as_ref().unwrap();
    let values: Vec<_> = reply.reads.iter().map(|r| r.value.as_deref()).collect();
    assert_eq!(values, vec![Some("y"), Some("x")], "request order");
    assert_eq!(reply.metrics, OpMetrics { rounds: 2, versions_returned: 2, ..OpMetrics::default() });
    assert_eq!(c.dv(), &vc(&[50, 20]));
    assert_eq!(c.last_snapshot(), &sv);
}

/// Garbage collection (the paper keeps the versions snapshots can read): with `gc_retain_ms` = 1, a
/// partition keeps the newest version every snapshot at least (GSS, clock) − 1 ms contains, and every newer
/// one; a read at an older snapshot is refused, and the client restarts the ROT from round 1.
#[test]
fn gc_keeps_what_recent_snapshots_read_and_refuses_older_snapshots() {
    let config = ProtocolConfig { gc_retain_ms: 1, ..Default::default() };
    let t = Topology::new(2, 1);
    let mut p = server_in(t, 0, 0, &config);
    let k = key(t, 0);
    for ms in [1, 2, 3] {
        put(&mut p, ms * 1_000_000, &k, &format!("v{ms}"), vc(&[0, 0]));
    }
    let out = {
        let g = p.gc_pacer.generation();
        fire(&mut p, 3_500_000, ContrarianTimer::Gc(g))
    };
    assert_eq!(timer_kinds(&out), vec![(100_000_000, "gc")], "versions arrived: the base period");
    let kept: Vec<u64> = p.versions(&k).iter().map(|v| v.0.time).collect();
    assert_eq!(kept, vec![2_000_000, 3_000_000], "snapshots from 2.5 ms on read v2 or v3");

    let read = |sv| ContrarianMsg::Read { op: OpId(1), attempt: 0, keys: vec![k.clone()], sv };
    let out = deliver(&mut p, 3_500_000, CLIENT, read(vc(&[2_400_000, 0])));
    assert_eq!(out.sends, vec![to_client(ContrarianMsg::ReadStale { op: OpId(1), attempt: 0 })]);
    let got = read_reply(&deliver(&mut p, 3_500_000, CLIENT, read(vc(&[2_600_000, 0]))));
    assert_eq!(got[0].read.value.as_deref(), Some("v2"));

    // The client takes a fresh snapshot; replies of the refused attempt are ignored.
    let mut c = Contrarian::client(CLIENT, 0, t, &config);
    let server = ServerId::new(0, 0);
    with_ctx(NOW, |cx| c.on_request(cx, OpId(1), Request::Rot { keys: vec![k.clone()] }));
    let sv = vc(&[2_400_000, 0]);
    with_ctx(NOW, |cx| c.on_message(cx, server.into(), ContrarianMsg::SnapshotIs { op: OpId(1), attempt: 0, sv }));
    let out = with_ctx(NOW, |cx| c.on_message(cx, server.into(), ContrarianMsg::ReadStale { op: OpId(1), attempt: 0 }));
    assert_eq!(
        out.sends,
        vec![(Addr::Server(server), ContrarianMsg::Snapshot { op: OpId(1), attempt: 1, dv: vc(&[0, 0]) })]
    );
    let sv = vc(&[2_600_000, 0]);
    with_ctx(NOW, |cx| c.on_message(cx, server.into(), ContrarianMsg::SnapshotIs { op: OpId(1), attempt: 1, sv }));
    let out = with_ctx(NOW, |cx| {
        c.on_message(cx, server.into(), ContrarianMsg::ReadReply { op: OpId(1), attempt: 1, results: got.clone() })
    });
    assert_eq!(out.completions[0].1.as_ref().unwrap().metrics.rounds, 4);
}
