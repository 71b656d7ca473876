//! Rococo and Rococo-SNOW in the simulator: a dependency cycle reordered, not aborted; the two read-only
//! transaction algorithms under the interleaving that separates them (SNOW §5.4).

use snowline_core::{ClientId, Key, OpId, Protocol, Reply, Request, Value};
use snowline_protocols::rococo::{RccMsg, TxnId};
use snowline_protocols::{Rococo, RococoSnow};
use snowline_sim::{Sim, SimConfig};

const SECOND: u64 = 1_000_000_000;

fn sim<P: Protocol<Msg = RccMsg>>() -> Sim<P> {
    Sim::new(SimConfig::exact(1, snowline_core::Topology::new(1, 2), 100_000, 10_000_000))
}

fn keys<P: Protocol>(sim: &Sim<P>) -> (Key, Key) {
    let topo = sim.topology();
    (topo.key_on(0, "x").into(), topo.key_on(1, "y").into())
}

fn ok<P: Protocol>(sim: &mut Sim<P>, client: ClientId, op: u64, request: Request) -> Reply {
    sim.execute(client, OpId(op), request, SECOND).expect("completes within a second").expect("succeeds")
}

fn update(writes: &[(&Key, &str)]) -> Request {
    Request::Update { writes: writes.iter().map(|(k, v)| ((*k).clone(), Value::from(*v))).collect() }
}

fn dispatch_of(txn_client: ClientId) -> impl Fn(&snowline_sim::Envelope<RccMsg>) -> bool {
    move |e| matches!(&e.msg, RccMsg::Dispatch { txn: TxnId { client, .. }, .. } if *client == txn_client)
}

fn values(reply: &Reply) -> Vec<String> {
    reply.reads.iter().map(|r| r.value.as_deref().unwrap_or("").to_string()).collect()
}

/// T1 and T2 both write x (partition 0) and y (partition 1). T1's pieces reach x's server first and T2's
/// reach y's server first, so the servers see T1 → T2 at x and T2 → T1 at y: a cycle. Rococo aborts neither:
/// both servers put the cycle in the same order, so x and y end up written by the same transaction, and
/// both commit at their first attempt.
fn cycle<P: Protocol<Msg = RccMsg>>() {
    let mut sim = sim::<P>();
    let (x, y) = keys(&sim);
    let (t1, t2, reader) = (sim.add_client(0), sim.add_client(0), sim.add_client(0));
    // Both coordinated at x's server (their first key); hold T1's piece for y.
    let held = sim.hold(dispatch_of(t1));
    sim.submit(t1, OpId(1), update(&[(&x, "t1"), (&y, "t1")]));
    sim.advance(5_000_000);
    sim.stop_holding(held);
    sim.submit(t2, OpId(1), update(&[(&x, "t2"), (&y, "t2")]));
    sim.advance(5_000_000);
    assert_eq!(sim.release(dispatch_of(t1)), 1, "T1's piece for y was held");
    let done = sim.run_until(sim.now_ns() + SECOND);
    assert_eq!(done.len(), 2, "both complete: {done:?}");
    for c in &done {
        let reply = c.result.as_ref().expect("committed at the first attempt");
        assert_eq!(reply.writes.len(), 2);
    }
    let read = ok(&mut sim, reader, 1, Request::Rot { keys: vec![x, y] });
    let v = values(&read);
    assert_eq!(v[0], v[1], "both servers ordered the cycle the same way: {v:?}");
}

#[test]
fn a_dependency_cycle_is_ordered_the_same_on_both_servers_and_both_commit() {
    cycle::<Rococo>();
    cycle::<RococoSnow>();
}

/// The interleaving of SNOW §5.4: a read-only transaction R reads x before a write transaction W reaches
/// x's server, and y after W reached y's server. Returns R's reply.
fn rot_under_concurrent_write<P: Protocol<Msg = RccMsg>>() -> Reply {
    let mut sim = sim::<P>();
    let (x, y) = keys(&sim);
    let (setup, writer, reader) = (sim.add_client(0), sim.add_client(0), sim.add_client(0));
    ok(&mut sim, setup, 1, update(&[(&x, "x0"), (&y, "y0")]));
    // W is coordinated at y's server (its first key); its piece for x is held.
    sim.hold(dispatch_of(writer));
    sim.submit(writer, OpId(1), update(&[(&y, "y1"), (&x, "x1")]));
    sim.advance(5_000_000);
    sim.submit(reader, OpId(1), Request::Rot { keys: vec![x.clone(), y.clone()] });
    sim.advance(5_000_000);
    assert_eq!(sim.release(dispatch_of(writer)), 1, "W's piece for x was held");
    let done = sim.run_until(sim.now_ns() + SECOND);
    let r = done.iter().find(|c| c.client == reader).expect("the read-only transaction completes");
    let w = done.iter().find(|c| c.client == writer).expect("the write completes");
    assert!(w.result.is_ok(), "{:?}", w.result);
    r.result.clone().expect("the read-only transaction succeeds")
}

#[test]
fn rococo_snow_answers_in_one_round_with_one_version_and_never_a_mix() {
    let reply = rot_under_concurrent_write::<RococoSnow>();
    let v = values(&reply);
    assert!(v == ["x0", "y0"] || v == ["x1", "y1"], "a mix of old and new: {v:?}");
    assert_eq!(reply.metrics.rounds, 1);
    assert_eq!(reply.metrics.versions_returned, 2, "one version per key");
    assert!(reply.metrics.blocked_ns > 0, "its read of y waited for W (SNOW: N is given up)");
}

#[test]
fn rococo_needs_more_than_one_round_under_the_same_interleaving() {
    let reply = rot_under_concurrent_write::<Rococo>();
    let v = values(&reply);
    assert!(v == ["x0", "y0"] || v == ["x1", "y1"], "a mix of old and new: {v:?}");
    assert!(reply.metrics.rounds > 1, "rounds: {}", reply.metrics.rounds);
}

/// Crash seed 58's pattern: a write's piece reaches a server long after a read-only transaction read there
/// and ended. The write must still take a timestamp above the read's (the readers check is a watermark
/// kept for good), or another read-only transaction that sees the write at its other server would order it
/// before a read that did not see it (the long fork the seed found, when the read's record was dropped as
/// it completed). Timestamps are server clock readings; in this exact-clock simulation, every clock is the
/// simulated time plus one offset, which the first commit measures.
#[test]
fn a_write_reaching_a_server_after_a_read_there_ended_still_comes_after_it() {
    const EPSILON_NS: u64 = 2_100_000; // `max_clock_skew_us`' default: the commit wait
    let mut sim = sim::<RococoSnow>();
    let (x, y) = keys(&sim);
    let (setup, writer, reader) = (sim.add_client(0), sim.add_client(0), sim.add_client(0));
    let setup_at = sim.now_ns();
    let first = ok(&mut sim, setup, 1, update(&[(&x, "x0"), (&y, "y0")]));
    // The first write's timestamp is its start (its arrival, one 100 µs hop after the submit) plus ε.
    let offset = first.commit.expect("a commit version").time - EPSILON_NS - setup_at;
    // W is coordinated at y's server; its piece for x is held for 20 ms.
    sim.hold(dispatch_of(writer));
    sim.submit(writer, OpId(1), update(&[(&y, "y1"), (&x, "x1")]));
    sim.advance(5_000_000);
    let read_at = sim.now_ns() + offset;
    let read = ok(&mut sim, reader, 1, Request::Rot { keys: vec![x.clone()] });
    assert_eq!(values(&read), ["x0"], "W had not reached x's server");
    sim.advance(15_000_000);
    assert_eq!(sim.release(dispatch_of(writer)), 1, "W's piece for x was held");
    let done = sim.run_until(sim.now_ns() + SECOND);
    let w = done.iter().find(|c| c.client == writer).expect("the write completes");
    let ts = w.result.as_ref().expect("committed").commit.expect("a commit version").time;
    // Without the watermark W's timestamp would be its own start plus ε, about 3 ms below the read's.
    assert!(ts + 500_000 > read_at, "W's timestamp {ts} is not above the finished read's start {read_at}");
}

/// Rococo's offline check at run time: a call whose immediate piece meets another transaction's pending
/// deferrable access of the same key is aborted as a conflict (it had no effect and may pass when retried:
/// the harness retries it), not refused as bad input; once that access has run, the same call passes it.
#[test]
fn an_immediate_piece_meeting_a_pending_deferrable_access_aborts_as_a_retryable_conflict() {
    use snowline_core::tpcc::District;
    use snowline_core::{AbortCause, OpError};
    let mut sim = sim::<Rococo>();
    let topo = sim.topology();
    let district = District::new(1, 1, 1).unwrap().district_key();
    let p = topo.partition_of(&district);
    let other: Key = topo.key_on(1 - p, "o").into();
    let (writer, caller) = (sim.add_client(0), sim.add_client(0));
    // W writes `other` (its coordinator's key) and the district row (deferrable); its commit to the
    // district's server is held, so its deferrable access there stays pending.
    let held = sim.hold(move |e| {
        matches!(&e.msg, RccMsg::Commit { .. }) && matches!(e.to, snowline_core::Addr::Server(s) if s.partition == p)
    });
    sim.submit(writer, OpId(1), update(&[(&other, "w"), (&district, "1,1000")]));
    sim.advance(5_000_000);
    let new_order = |token: &str| Request::Call {
        procedure: "tpcc-new-order".into(),
        args: [token, "1", "1", "1", "1", "10", "1", "1", "1", "1"].map(Value::from).to_vec(),
    };
    let refused = sim.execute(caller, OpId(1), new_order("a"), SECOND).expect("completes");
    match refused {
        Err(OpError::Aborted(a)) => assert_eq!(a.cause, AbortCause::Conflict, "{a:?}"),
        other => panic!("expected a conflict abort, got {other:?}"),
    }
    sim.stop_holding(held);
    sim.release(|e| matches!(&e.msg, RccMsg::Commit { .. }));
    let done = sim.run_until(sim.now_ns() + SECOND);
    assert!(done.iter().any(|c| c.client == writer && c.result.is_ok()), "W commits: {done:?}");
    // Retried, the call gets past the check (and runs: the district row W wrote is `1,1000`).
    let retried = sim.execute(caller, OpId(2), new_order("b"), SECOND).expect("completes");
    assert!(!matches!(&retried, Err(OpError::Aborted(a)) if a.cause == AbortCause::Conflict), "{retried:?}");
}
