//! Optimistic concurrency control with validation at two-phase commit (`occ`) in the simulator: which of two
//! conflicting transactions aborts and why, read-only transactions that must not return what no single
//! moment saw, stored procedures, and a crash while prepared.

use snowline_core::{AbortCause, Addr, Message, OpError, OpId, Request, ServerId};
use snowline_protocols::Occ;
use snowline_sim::{Sim, SimConfig};

use crate::common;

use common::{SECOND, keys, ok, run, update, values};

fn sim(dcs: u16, partitions: u16) -> Sim<Occ> {
    common::sim(dcs, partitions)
}

#[test]
fn validation_aborts_the_later_committer_of_two_conflicting_transactions() {
    let mut sim = sim(1, 2);
    let (x, y) = keys(&sim);
    let (setup, t1, t2) = (sim.add_client(0), sim.add_client(0), sim.add_client(0));
    let (mut s, mut o1, mut o2) = (0, 0, 0);
    ok(&mut sim, setup, &mut s, update(&[(&x, "x0"), (&y, "y0")]));

    ok(&mut sim, t1, &mut o1, Request::Begin);
    ok(&mut sim, t2, &mut o2, Request::Begin);
    let r1 = ok(&mut sim, t1, &mut o1, Request::Read { keys: vec![x.clone(), y.clone()] });
    let r2 = ok(&mut sim, t2, &mut o2, Request::Read { keys: vec![y.clone(), x.clone()] });
    assert_eq!((r1.metrics.blocked_ns, r2.metrics.blocked_ns), (0, 0), "reads never wait");
    assert_eq!(values(&r1), vec![Some("x0".into()), Some("y0".into())]);

    // T2 began later but commits first.
    let c2 =
        ok(&mut sim, t2, &mut o2, Request::Commit { writes: vec![(x.clone(), "x2".into()), (y.clone(), "y2".into())] });
    assert!(c2.commit.is_some());
    let c1 = run(
        &mut sim,
        t1,
        &mut o1,
        Request::Commit { writes: vec![(x.clone(), "x1".into()), (y.clone(), "y1".into())] },
    );
    let error = c1.expect_err("the later committer read what the first one overwrote");
    assert_eq!(error.abort_cause(), Some(AbortCause::Certification), "{error}");
    assert!(error.to_string().contains("changed since it was read"), "{error}");

    // Retried: it reads T2's writes, validates and commits at a later version.
    ok(&mut sim, t1, &mut o1, Request::Begin);
    let again = ok(&mut sim, t1, &mut o1, Request::Read { keys: vec![x.clone(), y.clone()] });
    assert_eq!(values(&again), vec![Some("x2".into()), Some("y2".into())]);
    let c1 =
        ok(&mut sim, t1, &mut o1, Request::Commit { writes: vec![(x.clone(), "x1".into()), (y.clone(), "y1".into())] });
    assert!(c1.commit > c2.commit, "versions follow the serial order");
    let end = ok(&mut sim, setup, &mut s, Request::Rot { keys: vec![x, y] });
    assert_eq!(values(&end), vec![Some("x1".into()), Some("y1".into())]);
}

/// A transaction whose prepare meets a key locked by another prepared transaction votes no at once (cause
/// Conflict: no-wait), rather than wait; the prepared one commits.
#[test]
fn a_prepare_meeting_a_prepared_transaction_s_lock_aborts_without_waiting() {
    let mut sim = sim(1, 2);
    let (x, y) = keys(&sim);
    let (w1, w2) = (sim.add_client(0), sim.add_client(0));
    let (mut o1, mut o2) = (0, 0);
    // W1 prepares at both partitions; its decision to y's partition is held, so y stays locked there.
    let to_p1 = Addr::Server(ServerId::new(0, 1));
    let hold = sim.hold(move |e| e.to == to_p1 && e.msg.kind() == "decide");
    ok(&mut sim, w1, &mut o1, update(&[(&x, "x1"), (&y, "y1")]));
    assert_eq!(sim.held().len(), 1);
    let error = run(&mut sim, w2, &mut o2, update(&[(&y, "y2")])).expect_err("y is locked by a prepared transaction");
    assert_eq!(error.abort_cause(), Some(AbortCause::Conflict), "{error}");
    sim.stop_holding(hold);
    sim.release(|_| true);
    sim.advance(SECOND);
    ok(&mut sim, w2, &mut o2, update(&[(&y, "y2")]));
    let end = ok(&mut sim, w2, &mut o2, Request::Rot { keys: vec![x, y] });
    assert_eq!(values(&end), vec![Some("x1".into()), Some("y2".into())]);
}

/// A read-only transaction reads y, then (its read of x delayed) a writer commits x and y, then it reads the
/// new x: old y with new x was never the state at any moment. Its validation round finds y changed, and it
/// aborts (Certification) instead of returning them; retried, it reads both new values.
#[test]
fn a_read_only_transaction_that_saw_a_half_applied_commit_is_not_returned() {
    let mut sim = sim(1, 2);
    let (x, y) = keys(&sim);
    let (writer, reader) = (sim.add_client(0), sim.add_client(0));
    let (mut w, mut r) = (0, 0);
    ok(&mut sim, writer, &mut w, update(&[(&x, "x0"), (&y, "y0")]));

    let (reader_addr, x_home) = (Addr::Client(reader), Addr::Server(ServerId::new(0, 0)));
    let hold = sim.hold(move |e| e.from == reader_addr && e.to == x_home && e.msg.kind() == "read");
    sim.submit(reader, OpId(1), Request::Rot { keys: vec![x.clone(), y.clone()] });
    assert!(sim.advance(1_000_000).is_empty(), "y is read; the read of x is held");
    ok(&mut sim, writer, &mut w, update(&[(&x, "x1"), (&y, "y1")]));
    sim.stop_holding(hold);
    sim.release(|_| true);
    let done = sim.advance(SECOND);
    let error = done[0].result.clone().expect_err("the ROT must not return x1 with y0");
    assert_eq!(error.abort_cause(), Some(AbortCause::Certification), "{error}");
    assert_eq!(sim.messages_by_kind().get("validate"), Some(&2), "one validation per partition read");

    let again = ok(&mut sim, reader, &mut r, Request::Rot { keys: vec![x.clone(), y.clone()] });
    assert_eq!(values(&again), vec![Some("x1".into()), Some("y1".into())]);
    assert_eq!(again.metrics.rounds, 2, "a read round and a validation round");
}

/// A writer's decision has reached x's partition (the coordinator's own) but not y's yet: its client has its
/// answer. A later read of y must not return the old y (that would put the read before a transaction that
/// finished before it started): y is locked by the prepared writer, so the read aborts (Conflict), whether a
/// GET of y alone or a ROT of both. Once the decision arrives, both read the new values; a GET of one
/// partition needs no validation round.
#[test]
fn a_read_of_a_key_whose_commit_has_not_arrived_aborts_rather_than_return_the_old_value() {
    let mut sim = sim(1, 2);
    let (x, y) = keys(&sim);
    let (writer, reader) = (sim.add_client(0), sim.add_client(0));
    let (mut w, mut r) = (0, 0);
    ok(&mut sim, writer, &mut w, update(&[(&x, "x0"), (&y, "y0")]));
    let to_p1 = Addr::Server(ServerId::new(0, 1));
    let hold = sim.hold(move |e| e.to == to_p1 && e.msg.kind() == "decide");
    ok(&mut sim, writer, &mut w, update(&[(&x, "x1"), (&y, "y1")]));
    assert_eq!(sim.server(ServerId::new(0, 0)).value(&x).map(|(v, _)| v), Some("x1".into()), "applied at x");

    for keys in [vec![y.clone()], vec![x.clone(), y.clone()]] {
        let error = run(&mut sim, reader, &mut r, Request::Rot { keys }).expect_err("y is being committed");
        assert_eq!(error.abort_cause(), Some(AbortCause::Conflict), "{error}");
    }
    sim.stop_holding(hold);
    sim.release(|_| true);
    sim.advance(SECOND);
    let get = ok(&mut sim, reader, &mut r, Request::Rot { keys: vec![y.clone()] });
    assert_eq!((values(&get), get.metrics.rounds), (vec![Some("y1".into())], 1), "one round, no validation");
    let both = ok(&mut sim, reader, &mut r, Request::Rot { keys: vec![x, y] });
    assert_eq!(values(&both), vec![Some("x1".into()), Some("y1".into())]);
}

/// A stored procedure (`rw`) reads x without locks, writes y, and commits with x validated; one that only
/// writes needs no read round. An unknown procedure is refused.
#[test]
fn a_stored_procedure_call_commits() {
    let mut sim = sim(2, 2);
    let (x, y) = keys(&sim);
    let client = sim.add_client(1);
    let mut o = 0;
    ok(&mut sim, client, &mut o, Request::Put { key: x.clone(), value: "x0".into() });
    let args = vec!["1".into(), x.clone(), y.clone(), "from-call".into()];
    let reply = ok(&mut sim, client, &mut o, Request::Call { procedure: "rw".into(), args });
    assert_eq!(values(&reply), vec![Some("x0".into())]);
    assert_eq!(reply.writes, vec![(y.clone(), "from-call".into())]);
    assert!(reply.commit.is_some());
    assert_eq!(reply.metrics.rounds, 2, "one wave of reads, then the commit");

    let args = vec!["0".into(), x.clone(), "blind".into()];
    let blind = ok(&mut sim, client, &mut o, Request::Call { procedure: "rw".into(), args });
    assert_eq!((blind.metrics.rounds, blind.reads.len()), (1, 0), "only the commit");
    let end = ok(&mut sim, client, &mut o, Request::Rot { keys: vec![x, y] });
    assert_eq!(values(&end), vec![Some("blind".into()), Some("from-call".into())]);
    let refused = run(&mut sim, client, &mut o, Request::Call { procedure: "nope".into(), args: vec![] });
    assert!(matches!(refused, Err(OpError::Rejected(_))), "{refused:?}");
    let kinds = sim.messages_by_kind();
    assert!(!kinds.contains_key("release") && !kinds.contains_key("wound"), "nothing to release: {kinds:?}");
}

/// A stored procedure whose read is overwritten between its read and its commit aborts at validation.
#[test]
fn a_stored_procedure_whose_read_changed_aborts_at_validation() {
    let mut sim = sim(1, 2);
    let (x, y) = keys(&sim);
    let (caller, writer) = (sim.add_client(0), sim.add_client(0));
    let (mut c, mut w) = (0, 0);
    ok(&mut sim, writer, &mut w, Request::Put { key: x.clone(), value: "x0".into() });
    // Hold the call's commit until the writer has overwritten x.
    let caller_addr = Addr::Client(caller);
    let hold = sim.hold(move |e| e.from == caller_addr && e.msg.kind() == "commit");
    let args = vec!["1".into(), x.clone(), y.clone(), "from-call".into()];
    sim.submit(caller, OpId(1), Request::Call { procedure: "rw".into(), args });
    sim.advance(1_000_000);
    ok(&mut sim, writer, &mut w, Request::Put { key: x.clone(), value: "x1".into() });
    sim.stop_holding(hold);
    sim.release(|_| true);
    let done = sim.advance(SECOND);
    let error = done[0].result.clone().expect_err("x changed after the call read it");
    assert_eq!(error.abort_cause(), Some(AbortCause::Certification), "{error}");
    let end = ok(&mut sim, caller, &mut c, Request::Rot { keys: vec![y] });
    assert_eq!(values(&end), vec![None], "nothing written");
}

/// A participant crashes after voting yes: it comes back prepared, its no-wait locks restored from its log, so
/// a conflicting writer still aborts (Conflict) until the retransmitted decision is applied; then it commits.
#[test]
fn a_participant_that_crashes_while_prepared_keeps_its_locks_until_the_decision() {
    let mut sim: Sim<Occ> = Sim::new(SimConfig { durable: true, ..common::config(1, 2) });
    let (x, y) = keys(&sim);
    let (client, other) = (sim.add_client(0), sim.add_client(0));
    let (mut o, mut r) = (0, 0);
    let p1 = ServerId::new(0, 1);
    let to_p1 = Addr::Server(p1);
    let hold = sim.hold(move |e| e.to == to_p1 && e.msg.kind() == "decide");
    let commit = ok(&mut sim, client, &mut o, update(&[(&x, "x1"), (&y, "y1")])).commit.expect("a version");
    sim.crash(p1);
    sim.drop_held(|_| true);
    sim.restart(p1);
    let error = run(&mut sim, other, &mut r, update(&[(&y, "y2")])).expect_err("y is still locked after the restart");
    assert_eq!(error.abort_cause(), Some(AbortCause::Conflict), "{error}");
    sim.stop_holding(hold);
    sim.release(|_| true);
    sim.advance(2 * SECOND);
    assert_eq!(sim.server(p1).value(&y), Some(("y1".into(), commit)), "the decision came again");
    ok(&mut sim, other, &mut r, update(&[(&y, "y2")]));
    let end = ok(&mut sim, other, &mut r, Request::Rot { keys: vec![x, y] });
    assert_eq!(values(&end), vec![Some("x1".into()), Some("y2".into())]);
}
