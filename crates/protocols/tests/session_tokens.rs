//! Session tokens (`ClientNode::save_session` / `resume_session`): a session saved in one datacenter and
//! resumed in another still reads its own writes, garbage is refused without a panic, and protocols whose
//! sessions carry nothing accept only the empty token.

use snowline_core::{Addr, ClientId, ClientNode, Key, OpId, Protocol, ProtocolConfig, Reply, Request, Topology, Value};
use snowline_protocols::components::session;
use snowline_protocols::contrarian::ContrarianMsg;
use snowline_protocols::cops::CopsMsg;
use snowline_protocols::tomsic::TomsicMsg;
use snowline_protocols::{
    Av, Contrarian, Cops, CopsDw, CopsSnow, Cure, Cv, EigerPs, Nmsi, Op, Psi, RaftKv, RampF, Rococo, Si, TpcKv, TwoPl,
};
use snowline_sim::{Sim, SimConfig};

const WAN_NS: u64 = 10_000_000;
const SECOND: u64 = 1_000_000_000;

fn sim<P: Protocol>(dcs: u16) -> Sim<P> {
    Sim::new(SimConfig::exact(1, Topology::new(dcs, 2), 100_000, WAN_NS))
}

fn ok<P: Protocol>(sim: &mut Sim<P>, client: ClientId, op: u64, request: Request) -> Reply {
    sim.execute(client, OpId(op), request, SECOND).expect("the operation completes").expect("the operation succeeds")
}

fn put(key: &Key, value: &str) -> Request {
    Request::Put { key: key.clone(), value: value.into() }
}

fn get(key: &Key) -> Request {
    Request::Rot { keys: vec![key.clone()] }
}

fn value_of(reply: &Reply) -> Option<Value> {
    reply.reads[0].value.clone()
}

/// A new client in `dc` carrying on from `token`.
fn resumed<P: Protocol>(sim: &mut Sim<P>, dc: u16, token: &[u8]) -> ClientId {
    let client = sim.add_client(dc);
    sim.client_mut(client).resume_session(token).expect("the token resumes");
    client
}

/// The cross-datacenter scenario: `x` is "old" everywhere; a session in dc0 writes "new" and saves its
/// token while replication to dc1 is held (`replication` picks those messages). A fresh session in dc1
/// reads "old" there; the resumed one must not: it waits, and reads "new" once replication is released.
fn resumed_in_another_dc_reads_its_write<P: Protocol>(replication: impl Fn(&P::Msg) -> bool + 'static) {
    let mut sim = sim::<P>(2);
    let x: Key = sim.topology().key_on(1, "x").into();
    let writer = sim.add_client(0);
    ok(&mut sim, writer, 0, put(&x, "old"));
    sim.advance(10 * WAN_NS);
    let hold = sim.hold(move |e| {
        matches!((e.from, e.to), (Addr::Server(a), Addr::Server(b)) if a.dc == 0 && b.dc == 1) && replication(&e.msg)
    });
    ok(&mut sim, writer, 1, put(&x, "new"));
    let token = sim.client(writer).save_session();
    assert!(!token.is_empty(), "{} carries the session's state", P::NAME);

    let fresh = sim.add_client(1);
    assert_eq!(value_of(&ok(&mut sim, fresh, 0, get(&x))), Some("old".into()), "dc1 lacks the new write");

    let session = resumed(&mut sim, 1, &token);
    sim.submit(session, OpId(0), get(&x));
    let meanwhile = sim.advance(5 * WAN_NS);
    assert!(
        meanwhile.iter().all(|c| c.client != session),
        "{}: the resumed session's read completes before its write reached dc1: {meanwhile:?}",
        P::NAME
    );
    sim.stop_holding(hold);
    sim.release(|_| true);
    let done = sim.advance(10 * WAN_NS);
    let read = done.iter().find(|c| c.client == session).expect("the read completes once replication resumes");
    let reply = read.result.as_ref().expect("the read succeeds");
    assert_eq!(value_of(reply), Some("new".into()), "{} reads its own write in dc1", P::NAME);
    // And afterwards, without waiting.
    assert_eq!(value_of(&ok(&mut sim, session, 1, get(&x))), Some("new".into()));
}

fn tomsic_replication(msg: &TomsicMsg) -> bool {
    matches!(msg, TomsicMsg::Updates { .. } | TomsicMsg::Replicate { .. })
}

fn cops_replication(msg: &CopsMsg) -> bool {
    matches!(msg, CopsMsg::Replicate { .. })
}

#[test]
fn cure_session_resumed_in_another_datacenter_reads_its_own_write() {
    resumed_in_another_dc_reads_its_write::<Cure>(tomsic_replication);
}

#[test]
fn av_session_resumed_in_another_datacenter_reads_its_own_write() {
    resumed_in_another_dc_reads_its_write::<Av>(tomsic_replication);
}

#[test]
fn op_session_resumed_in_another_datacenter_reads_its_own_write() {
    resumed_in_another_dc_reads_its_write::<Op>(tomsic_replication);
}

#[test]
fn cops_session_resumed_in_another_datacenter_reads_its_own_write() {
    resumed_in_another_dc_reads_its_write::<Cops>(cops_replication);
}

#[test]
fn cops_snow_session_resumed_in_another_datacenter_reads_its_own_write() {
    resumed_in_another_dc_reads_its_write::<CopsSnow>(cops_replication);
}

/// COPS: the resumed session's PUT waits too (applied at once in dc1, it would be visible there before the
/// write it depends on).
#[test]
fn cops_resumed_session_writes_only_after_its_dependencies_arrive() {
    let mut sim = sim::<Cops>(2);
    let topo = sim.topology();
    let (x, y): (Key, Key) = (topo.key_on(0, "x").into(), topo.key_on(1, "y").into());
    let writer = sim.add_client(0);
    let hold = sim.hold(|e| matches!(e.to, Addr::Server(s) if s.dc == 1) && cops_replication(&e.msg));
    ok(&mut sim, writer, 0, put(&x, "x1"));
    let token = sim.client(writer).save_session();
    let session = resumed(&mut sim, 1, &token);
    sim.submit(session, OpId(0), put(&y, "y1"));
    assert!(sim.advance(5 * WAN_NS).is_empty(), "the PUT is held until x1 is applied in dc1");
    let reader = sim.add_client(1);
    let reply = ok(&mut sim, reader, 0, Request::Rot { keys: vec![x.clone(), y.clone()] });
    assert_eq!(reply.reads[1].value, None, "y1 is not visible in dc1 before x1");
    sim.stop_holding(hold);
    sim.release(|_| true);
    let done = sim.advance(10 * WAN_NS);
    assert!(done.iter().any(|c| c.client == session && c.result.is_ok()), "the PUT completes: {done:?}");
    let reply = ok(&mut sim, reader, 1, Request::Rot { keys: vec![x, y] });
    assert_eq!(
        reply.reads.iter().map(|r| r.value.clone()).collect::<Vec<_>>(),
        vec![Some("x1".into()), Some("y1".into())]
    );
}

/// AV in the same datacenter: a write not yet stable travels in the token's cache of own writes, so the
/// resumed session reads it at once, where a fresh session still reads the stable snapshot.
#[test]
fn av_session_resumed_in_the_same_datacenter_reads_its_cached_write() {
    let mut sim = sim::<Av>(1);
    let x: Key = sim.topology().key_on(1, "x").into();
    let writer = sim.add_client(0);
    ok(&mut sim, writer, 0, put(&x, "old"));
    sim.advance(SECOND);
    ok(&mut sim, writer, 1, put(&x, "new"));
    assert_eq!(sim.client(writer).cached_writes(), 1);
    let token = sim.client(writer).save_session();
    let session = resumed(&mut sim, 0, &token);
    assert_eq!(sim.client(session).cached_writes(), 1, "the cached write travels in the token");
    assert_eq!(value_of(&ok(&mut sim, session, 0, get(&x))), Some("new".into()));
}

/// AV: own writes beyond the token's budget for cached values travel as a vector to wait for instead: the
/// resumed session still reads both of its writes, the one past the budget once it is stable.
#[test]
fn av_session_with_more_cached_writes_than_a_token_holds_still_reads_them() {
    let mut sim = sim::<Av>(1);
    let topo = sim.topology();
    let (x, y): (Key, Key) = (topo.key_on(0, "x").into(), topo.key_on(1, "y").into());
    let big = |c: char| std::iter::repeat_n(c, 600 << 10).collect::<String>();
    let writer = sim.add_client(0);
    ok(&mut sim, writer, 0, put(&x, "old"));
    ok(&mut sim, writer, 1, put(&y, "old"));
    sim.advance(SECOND);
    ok(&mut sim, writer, 2, Request::Put { key: x.clone(), value: big('x').into() });
    ok(&mut sim, writer, 3, Request::Put { key: y.clone(), value: big('y').into() });
    assert_eq!(sim.client(writer).cached_writes(), 2);
    let token = sim.client(writer).save_session();
    assert!(token.len() < 1 << 20, "one value fits the budget, not two: {} bytes", token.len());
    let session = resumed(&mut sim, 0, &token);
    assert_eq!(sim.client(session).cached_writes(), 1);
    let reply = ok(&mut sim, session, 0, Request::Rot { keys: vec![x, y] });
    let lens: Vec<usize> = reply.reads.iter().map(|r| r.value.as_ref().map_or(0, |v| v.len())).collect();
    assert_eq!(lens, vec![600 << 10, 600 << 10], "both own writes are read back");
}

#[test]
fn contrarian_session_resumed_in_another_datacenter_reads_its_own_write() {
    resumed_in_another_dc_reads_its_write::<Contrarian>(|m| {
        matches!(m, ContrarianMsg::Replicate { .. } | ContrarianMsg::Heartbeat { .. })
    });
}

#[test]
fn contrarian_session_resumed_in_its_datacenter_carries_its_vectors() {
    let mut sim = sim::<Contrarian>(2);
    let x: Key = sim.topology().key_on(1, "x").into();
    let writer = sim.add_client(0);
    ok(&mut sim, writer, 0, put(&x, "old"));
    sim.advance(10 * WAN_NS);
    ok(&mut sim, writer, 1, put(&x, "new"));
    let token = sim.client(writer).save_session();
    let session = resumed(&mut sim, 0, &token);
    assert_eq!(sim.client(session).dv(), sim.client(writer).dv());
    assert_eq!(value_of(&ok(&mut sim, session, 0, get(&x))), Some("new".into()));
}

#[test]
fn eiger_ps_session_resumed_in_another_datacenter_reads_at_or_above_its_safe_time() {
    let mut sim = sim::<EigerPs>(2);
    let x: Key = sim.topology().key_on(1, "x").into();
    let writer = sim.add_client(0);
    ok(&mut sim, writer, 0, put(&x, "old"));
    ok(&mut sim, writer, 1, put(&x, "new"));
    let saved_gst = sim.client(writer).gst();
    let token = sim.client(writer).save_session();
    let session = resumed(&mut sim, 1, &token);
    assert_eq!(value_of(&ok(&mut sim, session, 0, get(&x))), Some("new".into()));
    assert!(sim.client(session).gst() >= saved_gst);
}

#[test]
fn ramp_session_resumed_writes_above_what_it_wrote() {
    let mut sim = Sim::<RampF>::new(SimConfig::exact(1, Topology::new(1, 2), 100_000, WAN_NS));
    let x: Key = sim.topology().key_on(1, "x").into();
    let writer = sim.add_client(0);
    let first = ok(&mut sim, writer, 0, put(&x, "a")).commit.expect("a version");
    // A token from a session whose clock ran far ahead: the resumed session's timestamps stay above it.
    let mut ahead = <RampF as Protocol>::client(ClientId(99), 0, sim.topology(), &ProtocolConfig::default());
    ahead.resume_session(&session::encode("ramp-f", &(first.time + SECOND,))).expect("a RAMP token");
    let token = ahead.save_session();
    let session = resumed(&mut sim, 0, &token);
    let second = ok(&mut sim, session, 0, put(&x, "b")).commit.expect("a version");
    assert!(second.time > first.time + SECOND, "{second:?} after {first:?}");
}

// ---- Untrusted tokens ----

/// Garbage, truncations, another protocol's token and an empty token, for a client of `P` built by itself.
fn refuses_garbage<P: Protocol>(topology: Topology, token: &[u8]) {
    let fresh = || P::client(ClientId(7), 0, topology, &ProtocolConfig::default());
    assert_eq!(fresh().resume_session(&[]), Ok(()), "{}: the empty token is a new session", P::NAME);
    assert_eq!(fresh().resume_session(token), Ok(()), "{}: its own token resumes", P::NAME);
    for garbage in [&[0xffu8; 40][..], b"not a token", &[0u8; 3], &[1, 0, 0, 0]] {
        assert!(fresh().resume_session(garbage).is_err(), "{} accepts garbage {garbage:?}", P::NAME);
    }
    for cut in 1..token.len() {
        assert!(fresh().resume_session(&token[..cut]).is_err(), "{} accepts a token cut at {cut}", P::NAME);
    }
    let mut longer = token.to_vec();
    longer.push(0);
    assert!(fresh().resume_session(&longer).is_err(), "{} accepts trailing bytes", P::NAME);
    let other = session::encode("no-such-protocol", &());
    let err = fresh().resume_session(&other).expect_err("another protocol's token");
    assert!(err.contains("no-such-protocol"), "{err}");
}

/// A token saved by a session of `P` that has done one PUT (or, for the Jessy family, a fresh one).
fn token_after_a_put<P: Protocol>(dcs: u16) -> Vec<u8> {
    let mut sim = sim::<P>(dcs);
    let x: Key = sim.topology().key_on(1, "x").into();
    let c = sim.add_client(0);
    ok(&mut sim, c, 0, put(&x, "v"));
    sim.client(c).save_session()
}

#[test]
fn stateful_sessions_refuse_garbage_tokens() {
    refuses_garbage::<Cure>(Topology::new(2, 2), &token_after_a_put::<Cure>(2));
    refuses_garbage::<Av>(Topology::new(2, 2), &token_after_a_put::<Av>(2));
    refuses_garbage::<Op>(Topology::new(2, 2), &token_after_a_put::<Op>(2));
    refuses_garbage::<Cv>(Topology::new(2, 2), &token_after_a_put::<Cv>(2));
    refuses_garbage::<Cops>(Topology::new(2, 2), &token_after_a_put::<Cops>(2));
    refuses_garbage::<CopsSnow>(Topology::new(2, 2), &token_after_a_put::<CopsSnow>(2));
    refuses_garbage::<Contrarian>(Topology::new(2, 2), &token_after_a_put::<Contrarian>(2));
    refuses_garbage::<EigerPs>(Topology::new(2, 2), &token_after_a_put::<EigerPs>(2));
    let ramp = {
        let mut sim = Sim::<RampF>::new(SimConfig::exact(1, Topology::new(1, 2), 100_000, WAN_NS));
        let x: Key = sim.topology().key_on(1, "x").into();
        let c = sim.add_client(0);
        ok(&mut sim, c, 0, put(&x, "v"));
        sim.client(c).save_session()
    };
    refuses_garbage::<RampF>(Topology::new(1, 2), &ramp);
    let jessy = Topology::replicated(2, 2, 3);
    let si = Si::client(ClientId(1), 0, jessy, &ProtocolConfig::default()).save_session();
    refuses_garbage::<Si>(jessy, &si);
    let psi = Psi::client(ClientId(1), 0, jessy, &ProtocolConfig::default()).save_session();
    refuses_garbage::<Psi>(jessy, &psi);
}

/// A Tomsic token's cached write, as postcard sees it: `(key, value, (time, dc), commit vector)`.
type CachedWrite = (String, String, (u64, u16), Vec<u64>);

/// Tokens that decode but do not fit the topology: vectors of the wrong length, unknown datacenters,
/// partitions outside the topology, timestamps no server would accept.
#[test]
fn tokens_that_do_not_fit_the_topology_are_refused() {
    let topo = Topology::new(2, 2);
    let config = ProtocolConfig::default();
    let no_cache: Vec<CachedWrite> = Vec::new();
    // Tomsic: (dc, dep, ss, observed, cache).
    let three = session::encode("cure", &(0u16, vec![1u64, 2, 3], vec![0u64; 2], vec![0u64; 2], no_cache.clone()));
    let err = Cure::client(ClientId(1), 0, topo, &config).resume_session(&three).expect_err("three entries");
    assert!(err.contains("not one per datacenter"), "{err}");
    let dc9 = session::encode("cure", &(9u16, vec![0u64; 2], vec![0u64; 2], vec![0u64; 2], no_cache.clone()));
    assert!(Cure::client(ClientId(1), 0, topo, &config).resume_session(&dc9).is_err());
    let huge = session::encode("cure", &(0u16, vec![u64::MAX; 2], vec![0u64; 2], vec![0u64; 2], no_cache));
    assert!(Cure::client(ClientId(1), 0, topo, &config).resume_session(&huge).is_err());
    let cached = vec![("x".to_string(), "v".to_string(), (5u64, 0u16), vec![5u64, 0])];
    let cure_cache = session::encode("cure", &(0u16, vec![0u64; 2], vec![0u64; 2], vec![0u64; 2], cached));
    assert!(Cure::client(ClientId(1), 0, topo, &config).resume_session(&cure_cache).is_err(), "Cure caches nothing");
    // COPS: (applied_in, ts, deps).
    let bad_dep = session::encode("cops", &(Some(0u16), 5u64, vec![("x".to_string(), 4u16, 5u64)]));
    assert!(Cops::client(ClientId(1), 0, topo, &config).resume_session(&bad_dep).is_err());
    let empty_key = session::encode("cops", &(Some(0u16), 5u64, vec![(String::new(), 0u16, 5u64)]));
    assert!(Cops::client(ClientId(1), 0, topo, &config).resume_session(&empty_key).is_err());
    // Contrarian: (dc, dv, last_sv).
    let short = session::encode("contrarian", &(Some(0u16), vec![1u64], vec![0u64; 2]));
    assert!(Contrarian::client(ClientId(1), 0, topo, &config).resume_session(&short).is_err());
    // Jessy with sessions: a dependence vector naming a group outside the topology.
    let jessy = Topology::replicated(2, 2, 3);
    let group9 = session::encode("si", &std::collections::BTreeMap::from([(9u16, 3u64)]));
    assert!(Si::client(ClientId(1), 0, jessy, &config).resume_session(&group9).is_err());
}

/// Protocols whose sessions carry nothing: an empty token, which resumes; anything else is refused.
fn stateless<P: Protocol>(topology: Topology) {
    let mut c = P::client(ClientId(3), 0, topology, &ProtocolConfig::default());
    assert!(c.save_session().is_empty(), "{} saves nothing", P::NAME);
    assert_eq!(c.resume_session(&[]), Ok(()), "{}", P::NAME);
    assert!(c.resume_session(&[1, 2, 3]).is_err(), "{} accepts state it has no use for", P::NAME);
}

#[test]
fn stateless_sessions_accept_only_the_empty_token() {
    stateless::<TwoPl>(Topology::new(1, 2));
    stateless::<Rococo>(Topology::new(1, 2));
    stateless::<CopsDw>(Topology::new(1, 2));
    stateless::<RaftKv>(Topology::replicated(3, 2, 3));
    stateless::<TpcKv>(Topology::replicated(3, 2, 3));
    stateless::<Nmsi>(Topology::replicated(3, 2, 3));
}

/// The token of a resumed COPS session whose dependency checks are unanswered still asks for the checks
/// when resumed in the same datacenter (its dependencies are not known to be applied there).
#[test]
fn cops_resaved_before_its_checks_are_answered_still_checks() {
    let mut sim = sim::<Cops>(2);
    let x: Key = sim.topology().key_on(1, "x").into();
    let writer = sim.add_client(0);
    let hold = sim.hold(|e| matches!(e.to, Addr::Server(s) if s.dc == 1) && cops_replication(&e.msg));
    ok(&mut sim, writer, 0, put(&x, "new"));
    let token = sim.client(writer).save_session();
    let first = resumed(&mut sim, 1, &token);
    let again = sim.client(first).save_session();
    let second = resumed(&mut sim, 1, &again);
    sim.submit(second, OpId(0), get(&x));
    assert!(sim.advance(5 * WAN_NS).is_empty(), "the second resume waits for the dependency as well");
    let checks = sim.held().iter().filter(|e| e.from == Addr::Client(second)).count();
    assert_eq!(checks, 0, "session checks are not held");
    sim.stop_holding(hold);
    sim.release(|_| true);
    let done = sim.advance(10 * WAN_NS);
    let read = done.iter().find(|c| c.client == second).expect("completes");
    assert_eq!(value_of(read.result.as_ref().expect("succeeds")), Some("new".into()));
}

/// One Jessy transaction of session `client`: reads `reads` one by one, then commits `writes`; returns what
/// it read.
fn jessy_txn<P: Protocol>(
    sim: &mut Sim<P>,
    client: ClientId,
    op: &mut u64,
    reads: &[&Key],
    writes: &[(&Key, &str)],
) -> Vec<Option<Value>> {
    let mut run = |sim: &mut Sim<P>, request: Request| {
        *op += 1;
        sim.execute(client, OpId(*op), request, 3 * SECOND).expect("completes within 3 s").expect("succeeds")
    };
    run(sim, Request::Begin);
    let seen = reads.iter().map(|k| value_of(&run(sim, Request::Read { keys: vec![(*k).clone()] }))).collect();
    let writes = writes.iter().map(|(k, v)| ((*k).clone(), Value::from(*v))).collect();
    run(sim, Request::Commit { writes });
    seen
}

/// SI and PSI sessions see what they saw and wrote before (the NMSI paper's session axiom), also resumed in
/// another datacenter: a session in dc1 writes y1, then x1; resumed in dc0, whose member of y's group is
/// cut off and never applied y1, its first read of y returns y1 (the stale member cannot hold the session's
/// floor; the client tries the next member), where a fresh session there reads y0.
fn jessy_session_resumed_in_another_dc_keeps_its_snapshots<P: Protocol>() {
    let topology = Topology::replicated(2, 2, 3);
    let mut sim = Sim::<P>::new(SimConfig::exact(1, topology, 100_000, WAN_NS));
    let (x, y): (Key, Key) = (topology.key_on(0, "x").into(), topology.key_on(1, "y").into());
    sim.advance(SECOND / 10);
    let setup = sim.add_client(0);
    let mut op = 0;
    jessy_txn(&mut sim, setup, &mut op, &[&x], &[(&x, "x0")]);
    jessy_txn(&mut sim, setup, &mut op, &[&y], &[(&y, "y0")]);
    sim.advance(SECOND / 10);
    let stale = Addr::Server(topology.nearest(0, topology.partition_of(&y)));
    sim.hold(move |e| {
        (e.to == stale && matches!(e.from, Addr::Server(_))) || (e.from == stale && matches!(e.to, Addr::Server(_)))
    });
    let writer = sim.add_client(1);
    let mut op = 0;
    jessy_txn(&mut sim, writer, &mut op, &[&y], &[(&y, "y1")]);
    jessy_txn(&mut sim, writer, &mut op, &[&y, &x], &[(&x, "x1")]);
    sim.advance(SECOND / 10);
    let token = sim.client(writer).save_session();

    let fresh = sim.add_client(0);
    let mut op = 0;
    assert_eq!(jessy_txn(&mut sim, fresh, &mut op, &[&y], &[]), vec![Some("y0".into())], "the stale member");
    let session = resumed(&mut sim, 0, &token);
    let mut op = 0;
    assert_eq!(jessy_txn(&mut sim, session, &mut op, &[&y], &[]), vec![Some("y1".into())], "{}", P::NAME);
}

#[test]
fn si_and_psi_sessions_resumed_in_another_datacenter_keep_their_snapshots() {
    jessy_session_resumed_in_another_dc_keeps_its_snapshots::<Si>();
    jessy_session_resumed_in_another_dc_keeps_its_snapshots::<Psi>();
}
