//! Two-phase locking with two-phase commit in the simulator: deadlocks, contention, crashes, stored
//! procedures and user aborts.

use snowline_core::{AbortCause, Addr, ClientId, Message, OpError, OpId, Request, ServerId, Topology, Value};
use snowline_protocols::TwoPl;
use snowline_sim::{Sim, SimConfig};
use std::collections::BTreeMap;

use crate::common;

use common::{SECOND, WAN_NS, keys, ok, run, values};

fn sim(dcs: u16, partitions: u16) -> Sim<TwoPl> {
    common::sim(dcs, partitions)
}

fn durable_sim() -> Sim<TwoPl> {
    Sim::new(SimConfig { durable: true, ..common::config(1, 2) })
}

fn text(v: &Option<Value>) -> &str {
    v.as_deref().unwrap_or("")
}

/// The classic deadlock: T1 reads x, T2 reads y, then T1 writes y and T2 writes x, both committing at once.
/// Wound-wait lets the older T1 wound T2 (which aborts with cause Deadlock); T2, retried in the same session,
/// keeps its age and commits; the final state is that of the serial order T1, T2. Whichever commit reaches
/// the coordinator first: when T2's does, T2 is already prepared (a read-only participant) at y's partition
/// when T1 asks for y, and it is T2's coordinator that aborts it.
#[test]
fn a_deadlock_is_resolved_by_wounding_the_younger_transaction_which_commits_when_retried() {
    deadlock(false);
    deadlock(true);
}

fn deadlock(younger_commits_first: bool) {
    let mut sim = sim(1, 2);
    let (x, y) = keys(&sim);
    let (setup, t1, t2) = (sim.add_client(0), sim.add_client(0), sim.add_client(0));
    let (mut s, mut o1, mut o2) = (0, 0, 0);
    ok(&mut sim, setup, &mut s, Request::Update { writes: vec![(x.clone(), "x0".into()), (y.clone(), "y0".into())] });

    ok(&mut sim, t1, &mut o1, Request::Begin);
    let t1_read = ok(&mut sim, t1, &mut o1, Request::Read { keys: vec![x.clone()] });
    sim.advance(1_000_000);
    ok(&mut sim, t2, &mut o2, Request::Begin);
    let (_, t2_age) = sim.client(t2).open_transaction().expect("open");
    let t2_read = ok(&mut sim, t2, &mut o2, Request::Read { keys: vec![y.clone()] });
    assert!(t2_age > sim.client(t1).open_transaction().unwrap().1, "T2 is younger");

    // Both hold their shared locks; both commit now, each writing what the other read.
    let t1_write = format!("t1 saw {}", text(&t1_read.reads[0].value));
    let t2_write = format!("t2 saw {}", text(&t2_read.reads[0].value));
    let commits = [
        (t1, Request::Commit { writes: vec![(y.clone(), t1_write.as_str().into())] }),
        (t2, Request::Commit { writes: vec![(x.clone(), t2_write.as_str().into())] }),
    ];
    for i in [0, 1] {
        let (client, commit) = commits[if younger_commits_first { 1 - i } else { i }].clone();
        sim.submit(client, OpId(100), commit);
    }
    let done = sim.advance(SECOND);
    assert_eq!(done.len(), 2, "no deadlock");
    let result = |c: ClientId| done.iter().find(|d| d.client == c).expect("completed").result.clone();
    let t1_commit = result(t1).expect("the older transaction commits").commit.expect("a version");
    let t2_error = result(t2).expect_err("the younger transaction is the victim");
    assert_eq!(t2_error.abort_cause(), Some(AbortCause::Deadlock), "{t2_error}");

    // Retry T2 in its session: it keeps its age (and so eventually becomes the oldest).
    ok(&mut sim, t2, &mut o2, Request::Begin);
    assert_eq!(sim.client(t2).open_transaction().unwrap().1, t2_age);
    let t2_read = ok(&mut sim, t2, &mut o2, Request::Read { keys: vec![y.clone()] });
    let t2_write = format!("t2 saw {}", text(&t2_read.reads[0].value));
    let t2_commit = ok(&mut sim, t2, &mut o2, Request::Commit { writes: vec![(x.clone(), t2_write.as_str().into())] })
        .commit
        .expect("a version");
    assert!(t2_commit > t1_commit, "versions follow the serial order");

    let end = ok(&mut sim, setup, &mut s, Request::Rot { keys: vec![x, y] });
    assert_eq!(values(&end), vec![Some("t2 saw t1 saw x0".into()), Some("t1 saw x0".into())], "serial order T1, T2");
}

/// Several clients increment a counter stored in both x and y (read x and y, write both), retrying on
/// abort. No update is lost: the final counter is the number of commits, and x and y always agree.
#[test]
fn concurrent_increments_under_contention_lose_no_update() {
    for seed in 1..=3 {
        let topology = Topology::new(1, 2);
        let mut sim: Sim<TwoPl> = Sim::new(SimConfig::new(seed, topology, Default::default()));
        let (x, y) = keys(&sim);
        const CLIENTS: usize = 4;
        const EACH: u32 = 5;
        let clients: Vec<ClientId> = (0..CLIENTS).map(|_| sim.add_client(0)).collect();
        let mut op = 0u64;
        let mut submit = |sim: &mut Sim<TwoPl>, c: ClientId, r: Request| {
            op += 1;
            sim.submit(c, OpId(op), r);
        };
        // Per client: commits still to make, and the request in flight.
        let mut left: BTreeMap<ClientId, u32> = clients.iter().map(|c| (*c, EACH)).collect();
        let mut in_flight: BTreeMap<ClientId, Request> = BTreeMap::new();
        for c in &clients {
            submit(&mut sim, *c, Request::Begin);
            in_flight.insert(*c, Request::Begin);
        }
        let (mut commits, mut aborts) = (0u32, 0u32);
        let deadline = sim.now_ns() + 60 * SECOND;
        while left.values().any(|n| *n > 0) {
            let done = sim.step_until(deadline).expect("every client finishes");
            let request = in_flight.remove(&done.client).expect("a request in flight");
            let next = match (request, done.result) {
                (Request::Begin, Ok(_)) => Request::Read { keys: vec![x.clone(), y.clone()] },
                (Request::Read { .. }, Ok(reply)) => {
                    let counters: Vec<u32> = reply
                        .reads
                        .iter()
                        .map(|r| r.value.as_deref().map_or(0, |v| v.split(':').next().unwrap().parse().unwrap()))
                        .collect();
                    assert_eq!(counters[0], counters[1], "x and y are written together");
                    let v: Value = format!("{}:{}:{}", counters[0] + 1, done.client, done.op.0).into();
                    Request::Commit { writes: vec![(x.clone(), v.clone()), (y.clone(), v)] }
                }
                (Request::Commit { .. }, Ok(reply)) => {
                    assert!(reply.commit.is_some());
                    commits += 1;
                    let n = left.get_mut(&done.client).unwrap();
                    *n -= 1;
                    if *n == 0 {
                        continue;
                    }
                    Request::Begin
                }
                (Request::Read { .. } | Request::Commit { .. }, Err(e)) if e.abort_cause().is_some() => {
                    aborts += 1;
                    Request::Begin
                }
                (r, result) => panic!("seed {seed}: {r:?} ended with {result:?}"),
            };
            submit(&mut sim, done.client, next.clone());
            in_flight.insert(done.client, next);
        }
        assert_eq!(commits, CLIENTS as u32 * EACH);
        let reader = sim.add_client(0);
        let end = sim.execute(reader, OpId(0), Request::Rot { keys: vec![x.clone(), y.clone()] }, SECOND);
        let end = end.unwrap().unwrap();
        for v in values(&end) {
            assert_eq!(text(&v).split(':').next(), Some(commits.to_string().as_str()), "seed {seed}: no lost update");
        }
        assert!(aborts > 0, "seed {seed}: the upgrades conflicted at least once");
    }
}

/// A participant crashes before the Prepare reaches it: the read locks it granted survive in its log, the
/// Prepare is retransmitted after the restart, and the transaction commits.
#[test]
fn a_participant_that_crashes_before_voting_recovers_its_locks_and_the_commit_completes() {
    let mut sim = durable_sim();
    let (x, y) = keys(&sim);
    let (client, reader) = (sim.add_client(0), sim.add_client(0));
    let (mut o, mut r) = (0, 0);
    ok(&mut sim, client, &mut o, Request::Begin);
    ok(&mut sim, client, &mut o, Request::Read { keys: vec![x.clone(), y.clone()] });
    let p1 = ServerId::new(0, 1);
    sim.submit(client, OpId(100), Request::Commit { writes: vec![(x.clone(), "x1".into()), (y.clone(), "y1".into())] });
    sim.crash(p1);
    assert!(sim.advance(50_000_000).is_empty(), "the coordinator waits for the crashed participant");
    sim.restart(p1);
    let done = sim.advance(2 * SECOND);
    assert_eq!(done.len(), 1);
    let commit = done[0].result.as_ref().expect("committed").commit.expect("a version");
    let end = ok(&mut sim, reader, &mut r, Request::Rot { keys: vec![x, y.clone()] });
    assert_eq!(values(&end), vec![Some("x1".into()), Some("y1".into())]);
    assert_eq!(sim.server(p1).value(&y), Some(("y1".into(), commit)));
}

/// A participant crashes after voting yes and before the decision reaches it: it comes back prepared (still
/// holding its locks), the decision is retransmitted, and nothing committed is lost.
#[test]
fn a_participant_that_crashes_while_prepared_applies_the_decision_after_restart() {
    let mut sim = durable_sim();
    let (x, y) = keys(&sim);
    let (client, reader) = (sim.add_client(0), sim.add_client(0));
    let (mut o, mut r) = (0, 0);
    let p1 = ServerId::new(0, 1);
    let to_p1 = Addr::Server(p1);
    let hold = sim.hold(move |e| e.to == to_p1 && e.msg.kind() == "decide");
    let reply = ok(
        &mut sim,
        client,
        &mut o,
        Request::Update { writes: vec![(x.clone(), "x1".into()), (y.clone(), "y1".into())] },
    );
    let commit = reply.commit.expect("a version");
    assert_eq!(sim.held().len(), 1);
    assert!(sim.server(p1).value(&y).is_none(), "prepared, not applied");
    sim.crash(p1);
    sim.drop_held(|_| true);
    sim.stop_holding(hold);
    sim.restart(p1);
    sim.advance(2 * SECOND);
    assert_eq!(sim.server(p1).value(&y), Some(("y1".into(), commit)), "the decision came again");
    assert_eq!(sim.server(ServerId::new(0, 0)).coordinating(), 0, "every participant acknowledged");
    let end = ok(&mut sim, reader, &mut r, Request::Rot { keys: vec![x, y] });
    assert_eq!(values(&end), vec![Some("x1".into()), Some("y1".into())]);
}

/// A stored procedure (`rw`) locks its declared keys, reads, writes and commits in two rounds; an unknown
/// procedure is refused.
#[test]
fn a_stored_procedure_reads_and_writes_atomically() {
    let mut sim = sim(1, 2);
    let (x, y) = keys(&sim);
    let client = sim.add_client(0);
    let mut o = 0;
    ok(&mut sim, client, &mut o, Request::Put { key: x.clone(), value: "x0".into() });
    let args = vec!["1".into(), x.clone(), y.clone(), "from-call".into()];
    let reply = ok(&mut sim, client, &mut o, Request::Call { procedure: "rw".into(), args });
    assert_eq!(values(&reply), vec![Some("x0".into())]);
    assert_eq!(reply.writes, vec![(y.clone(), "from-call".into())]);
    assert!(reply.commit.is_some());
    assert_eq!(reply.metrics.rounds, 2);
    let end = ok(&mut sim, client, &mut o, Request::Rot { keys: vec![y] });
    assert_eq!(values(&end), vec![Some("from-call".into())]);
    let refused = run(&mut sim, client, &mut o, Request::Call { procedure: "nope".into(), args: vec![] });
    assert!(matches!(refused, Err(OpError::Rejected(_))), "{refused:?}");
}

/// A user abort releases the transaction's locks: a writer waiting behind its read lock then commits.
#[test]
fn a_user_abort_releases_the_locks() {
    let mut sim = sim(1, 2);
    let (x, _) = keys(&sim);
    let (reader, writer) = (sim.add_client(0), sim.add_client(0));
    let mut o = 0;
    ok(&mut sim, reader, &mut o, Request::Begin);
    ok(&mut sim, reader, &mut o, Request::Read { keys: vec![x.clone()] });
    sim.submit(writer, OpId(1), Request::Put { key: x.clone(), value: "w".into() });
    assert!(sim.advance(5_000_000).is_empty(), "the younger writer waits behind the read lock");
    let aborted = run(&mut sim, reader, &mut o, Request::Abort).expect_err("an abort");
    assert_eq!(aborted.abort_cause(), Some(AbortCause::User));
    let done = sim.advance(SECOND);
    let put = done[0].result.as_ref().expect("the writer commits");
    assert!(put.metrics.blocked_ns >= 5_000_000, "it waited for the abort: {:?}", put.metrics);
    let end = ok(&mut sim, reader, &mut o, Request::Rot { keys: vec![x] });
    assert_eq!(values(&end), vec![Some("w".into())]);
}

/// Clients of other datacenters use datacenter 0's servers and pay the WAN latency; multi-shot ROTs read
/// round after round under their locks.
#[test]
fn clients_of_every_datacenter_reach_the_single_copy_in_datacenter_0() {
    let mut sim = sim(2, 2);
    let (x, y) = keys(&sim);
    let (near, far) = (sim.add_client(0), sim.add_client(1));
    let mut o = 0;
    let start = sim.now_ns();
    ok(&mut sim, far, &mut o, Request::Put { key: x.clone(), value: "from-dc1".into() });
    assert!(sim.now_ns() - start >= 2 * WAN_NS, "one WAN round trip");
    let reply =
        ok(&mut sim, near, &mut o, Request::RotRounds { rounds: vec![vec![x.clone()], vec![y.clone(), x.clone()]] });
    assert_eq!(values(&reply), vec![Some("from-dc1".into()), None, Some("from-dc1".into())]);
    // Two rounds of reads, then the partition that answered first confirms it held its locks to the end.
    assert_eq!((reply.metrics.rounds, reply.metrics.versions_returned), (3, 3));
    assert!(reply.reads.iter().all(|r| r.versions_skipped == 0));
    let get = ok(&mut sim, far, &mut o, Request::Rot { keys: vec![x.clone()] });
    assert_eq!((values(&get), get.metrics.rounds), (vec![Some("from-dc1".into())], 1), "a GET is one round");
    let kinds = sim.messages_by_kind();
    assert!(kinds.contains_key("release") && !kinds.contains_key("prepare"), "{kinds:?}");
}

/// A read-only transaction wounded at one partition while its read at another is in flight must not return
/// what it read: the old x (read before an older writer wounded it) with the new y (read after that writer
/// committed) were never current together. The release round catches it: the wounding partition answers
/// that it no longer held the locks, and the ROT aborts with cause Deadlock.
#[test]
fn a_read_only_transaction_wounded_at_one_partition_aborts_rather_than_return_a_fractured_read() {
    let mut sim = sim(1, 2);
    let (x, y) = keys(&sim);
    let (writer, reader) = (sim.add_client(0), sim.add_client(0));
    let (mut w, mut r) = (0, 0);
    ok(&mut sim, writer, &mut w, Request::Update { writes: vec![(x.clone(), "x0".into()), (y.clone(), "y0".into())] });
    ok(&mut sim, writer, &mut w, Request::Begin); // the writer is the older transaction
    sim.advance(1_000_000);

    let (reader_addr, y_home) = (Addr::Client(reader), Addr::Server(ServerId::new(0, 1)));
    let hold = sim.hold(move |e| e.from == reader_addr && e.to == y_home && e.msg.kind() == "read");
    sim.submit(reader, OpId(1), Request::Rot { keys: vec![x.clone(), y.clone()] });
    assert!(sim.advance(1_000_000).is_empty(), "the ROT holds x's lock and waits for y's partition");
    ok(&mut sim, writer, &mut w, Request::Commit { writes: vec![(x.clone(), "x1".into()), (y.clone(), "y1".into())] });
    sim.stop_holding(hold);
    sim.release(|_| true);
    let done = sim.advance(SECOND);
    let error = done[0].result.clone().expect_err("the ROT must not return x0 with y1");
    assert_eq!(error.abort_cause(), Some(AbortCause::Deadlock), "{error}");
    // Retried, it reads the writer's state.
    let again = ok(&mut sim, reader, &mut r, Request::Rot { keys: vec![x, y] });
    assert_eq!(values(&again), vec![Some("x1".into()), Some("y1".into())]);
}
