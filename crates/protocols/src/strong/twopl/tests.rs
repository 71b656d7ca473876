//! Each test drives one state machine directly and asserts the effects of one input.
use super::*;
use rand::SeedableRng;
use rand::rngs::SmallRng;
use snowline_core::Effects;

const NOW: u64 = 1_000_000_000_000;
/// The coordinator in participant tests: another server, so votes and acks show up as messages.
const COORD: ServerId = ServerId::new(0, 1);

fn topo() -> Topology {
    Topology::new(2, 2)
}

fn server(p: PartitionId) -> TwoPlServer {
    TwoPl::server(ServerId::new(0, p), topo(), &ProtocolConfig::default())
}

fn deliver_at(node: &mut TwoPlServer, now: u64, from: impl Into<Addr>, msg: TwoPlMsg) -> Effects<TwoPl> {
    let mut rng = SmallRng::seed_from_u64(1);
    let mut out = Effects::default();
    let _ = node.on_message(&mut Ctx::new(now, &mut rng, &mut out), from.into(), msg);
    out
}

fn deliver(node: &mut TwoPlServer, from: impl Into<Addr>, msg: TwoPlMsg) -> Effects<TwoPl> {
    deliver_at(node, NOW, from, msg)
}

fn sweep(node: &mut TwoPlServer, now: u64) -> Effects<TwoPl> {
    let mut rng = SmallRng::seed_from_u64(1);
    let mut out = Effects::default();
    node.on_timer(&mut Ctx::new(now, &mut rng, &mut out), TwoPlTimer::Sweep);
    out
}

fn key(p: PartitionId, name: &str) -> Key {
    topo().key_on(p, name).into()
}

fn txn(client: u64) -> TxnId {
    TxnId { client: ClientId(client), seq: 0 }
}

/// Transaction `client` with age `time` (ns before `NOW`, less a millisecond): smaller is older.
fn age(client: u64, time: u64) -> Age {
    Age { time: NOW - 1_000_000 + time, client: ClientId(client) }
}

fn read(client: u64, time: u64, keys: &[&Key], held: bool) -> TwoPlMsg {
    let keys = keys.iter().map(|k| (*k).clone()).collect();
    TwoPlMsg::Read { txn: txn(client), age: age(client, time), keys, exclusive: vec![], held }
}

fn lock_x(client: u64, time: u64, k: &Key) -> TwoPlMsg {
    TwoPlMsg::Read { txn: txn(client), age: age(client, time), keys: vec![], exclusive: vec![k.clone()], held: false }
}

fn prepare(client: u64, time: u64, writes: &[(&Key, &str)], held: bool) -> TwoPlMsg {
    let writes = writes.iter().map(|(k, v)| ((*k).clone(), Value::from(*v))).collect();
    TwoPlMsg::Prepare { txn: txn(client), age: age(client, time), writes, held, reads: vec![] }
}

fn c(client: u64) -> Addr {
    Addr::Client(ClientId(client))
}

/// The single read reply in `out`, to `client`.
fn read_reply(out: &Effects<TwoPl>, client: u64) -> &Result<Vec<ReadResult>, OpError> {
    match out.sends.as_slice() {
        [(to, TwoPlMsg::ReadReply { result, .. })] if *to == c(client) => result,
        other => panic!("expected one read reply to c{client}, got {other:?}"),
    }
}

/// The single vote in `out`, to the coordinator.
fn vote(out: &Effects<TwoPl>) -> &Result<u64, Abort> {
    match out.sends.as_slice() {
        [(to, TwoPlMsg::Vote { vote, .. })] if *to == Addr::Server(COORD) => vote,
        other => panic!("expected one vote to the coordinator, got {other:?}"),
    }
}

fn cause(r: &Result<Vec<ReadResult>, OpError>) -> Option<AbortCause> {
    r.as_ref().err().and_then(OpError::abort_cause)
}

#[test]
fn shared_locks_are_compatible() {
    let mut p = server(0);
    let x = key(0, "x");
    let a = deliver(&mut p, c(1), read(1, 10, &[&x], false));
    let b = deliver(&mut p, c(2), read(2, 20, &[&x], false));
    let initial = ReadResult { key: x.clone(), value: None, version: Version::INITIAL, versions_skipped: 0 };
    assert_eq!(read_reply(&a, 1), &Ok(vec![initial.clone()]));
    assert_eq!(read_reply(&b, 2), &Ok(vec![initial]));
    assert_eq!(p.holders(&x), vec![(txn(1), Mode::Shared), (txn(2), Mode::Shared)]);
}

#[test]
fn an_exclusive_request_waits_behind_a_shared_holder() {
    let mut p = server(0);
    let x = key(0, "x");
    deliver(&mut p, c(1), read(1, 10, &[&x], false));
    let out = deliver(&mut p, COORD, prepare(2, 20, &[(&x, "v")], false));
    assert!(out.sends.is_empty(), "the younger writer waits: {:?}", out.sends);
    assert_eq!(p.waiters(&x), vec![(txn(2), Mode::Exclusive)]);
    let out = deliver_at(&mut p, NOW + 7, c(1), TwoPlMsg::Release { txn: txn(1), confirm: false });
    assert_eq!(
        out.sends,
        vec![(Addr::Server(COORD), TwoPlMsg::Vote { txn: txn(2), vote: Ok(NOW + 7), blocked_ns: 7 })]
    );
    assert_eq!(p.holders(&x), vec![(txn(2), Mode::Exclusive)]);
    assert!(p.is_prepared(txn(2)));
}

#[test]
fn wound_wait_wounds_a_younger_holder_and_its_next_read_learns_it() {
    let mut p = server(0);
    let (x, y) = (key(0, "x"), key(0, "y"));
    deliver(&mut p, c(2), read(2, 20, &[&x], false));
    let out = deliver(&mut p, COORD, prepare(1, 10, &[(&x, "v")], false));
    assert!(vote(&out).is_ok(), "the older writer does not wait for the younger reader");
    assert_eq!(p.holders(&x), vec![(txn(1), Mode::Exclusive)]);
    assert_eq!(p.abort_cause(txn(2)), Some(AbortCause::Deadlock));
    let out = deliver(&mut p, c(2), read(2, 20, &[&y], true));
    assert_eq!(read_reply(&out, 2), &Err(OpError::aborted(AbortCause::Deadlock, "wounded by an older transaction")));
    assert_eq!(p.transactions(), 1, "the wounded transaction holds nothing here");
}

#[test]
fn an_older_shared_holder_upgrades_by_wounding_a_younger_one() {
    let mut p = server(0);
    let x = key(0, "x");
    deliver(&mut p, c(1), read(1, 10, &[&x], false));
    deliver(&mut p, c(2), read(2, 20, &[&x], false));
    let out = deliver(&mut p, COORD, prepare(1, 10, &[(&x, "v")], true));
    assert!(vote(&out).is_ok());
    assert_eq!(p.holders(&x), vec![(txn(1), Mode::Exclusive)]);
    assert_eq!(p.abort_cause(txn(2)), Some(AbortCause::Deadlock));
}

#[test]
fn a_younger_requester_waits() {
    let mut p = server(0);
    let x = key(0, "x");
    let out = deliver(&mut p, c(1), lock_x(1, 10, &x));
    assert_eq!(read_reply(&out, 1).as_ref().map(Vec::len), Ok(0), "locked, nothing read");
    let out = deliver(&mut p, c(2), read(2, 20, &[&x], false));
    assert!(out.sends.is_empty());
    assert_eq!(p.waiters(&x), vec![(txn(2), Mode::Shared)]);
    assert_eq!(p.holders(&x), vec![(txn(1), Mode::Exclusive)], "the older holder is not wounded");
}

#[test]
fn a_prepared_holder_is_not_wounded_here_but_its_coordinator_is_asked_to_abort_it() {
    // It voted yes, so only its coordinator may abort it (if it has not decided yet): without asking, an
    // older transaction waiting here could wait for one that waits for it at another partition.
    let mut p = server(0);
    let x = key(0, "x");
    assert!(vote(&deliver(&mut p, COORD, prepare(2, 20, &[(&x, "v")], false))).is_ok());
    let out = deliver(&mut p, c(1), read(1, 10, &[&x], false));
    assert_eq!(out.sends, vec![(Addr::Server(COORD), TwoPlMsg::Wound { txn: txn(2) })], "the reader waits");
    assert!(p.is_prepared(txn(2)));
    assert_eq!(p.abort_cause(txn(2)), None);
    let out = deliver(&mut p, c(3), read(3, 5, &[&x], false));
    assert!(out.sends.is_empty(), "its coordinator is asked once");
    // A younger reader just waits.
    let mut p = server(0);
    deliver(&mut p, COORD, prepare(2, 20, &[(&x, "v")], false));
    assert!(deliver(&mut p, c(4), read(4, 40, &[&x], false)).sends.is_empty());
}

#[test]
fn a_coordinator_aborts_a_wounded_transaction_until_it_has_decided() {
    let mut tc = server(0);
    let (x, y) = (key(0, "x"), key(1, "y"));
    let participants = vec![
        Participant { partition: 0, writes: vec![(x.clone(), "x1".into())], held: false, reads: vec![] },
        Participant { partition: 1, writes: vec![(y, "y1".into())], held: false, reads: vec![] },
    ];
    deliver(&mut tc, c(1), TwoPlMsg::Commit { txn: txn(1), age: age(1, 10), participants });
    let out = deliver(&mut tc, COORD, TwoPlMsg::Wound { txn: txn(1) });
    assert_eq!(
        out.sends,
        vec![
            (c(1), TwoPlMsg::Outcome { txn: txn(1), result: Err(OpError::Aborted(wounded())) }),
            (Addr::Server(COORD), TwoPlMsg::Decide { txn: txn(1), commit: None }),
        ]
    );
    assert!(tc.holders(&x).is_empty(), "released in place");
    assert!(deliver(&mut tc, COORD, TwoPlMsg::Wound { txn: txn(1) }).sends.is_empty(), "decided: ignored");
}

#[test]
fn a_commit_decision_applies_the_writes_at_the_chosen_version_and_grants_the_waiter() {
    let mut p = server(0);
    let (x, y) = (key(0, "x"), key(0, "y"));
    deliver(&mut p, COORD, prepare(2, 20, &[(&x, "x2"), (&y, "y2")], false));
    deliver(&mut p, c(1), read(1, 10, &[&x], false));
    let version = Version { time: NOW + 500, dc: 0 };
    let out = deliver_at(&mut p, NOW + 40, COORD, TwoPlMsg::Decide { txn: txn(2), commit: Some(version) });
    let granted = ReadResult { key: x.clone(), value: Some("x2".into()), version, versions_skipped: 0 };
    assert_eq!(
        out.sends,
        vec![
            (c(1), TwoPlMsg::ReadReply { txn: txn(1), result: Ok(vec![granted]), blocked_ns: 40 }),
            (Addr::Server(COORD), TwoPlMsg::Ack { txn: txn(2) }),
        ]
    );
    assert_eq!(p.value(&y), Some(("y2".into(), version)));
    assert_eq!(p.holders(&x), vec![(txn(1), Mode::Shared)]);
    assert!(p.holders(&y).is_empty());
    // The Lamport clock passed the decision: the next proposal is above it.
    let out = deliver_at(&mut p, NOW + 50, COORD, prepare(3, 30, &[(&y, "y3")], false));
    assert_eq!(vote(&out), &Ok(NOW + 501));
}

#[test]
fn an_abort_decision_releases_and_a_stale_decision_is_only_acknowledged() {
    let mut p = server(0);
    let x = key(0, "x");
    deliver(&mut p, COORD, prepare(2, 20, &[(&x, "v")], false));
    let out = deliver(&mut p, COORD, TwoPlMsg::Decide { txn: txn(2), commit: None });
    assert_eq!(out.sends, vec![(Addr::Server(COORD), TwoPlMsg::Ack { txn: txn(2) })]);
    assert_eq!((p.value(&x), p.transactions()), (None, 0));
    let out = deliver(&mut p, COORD, TwoPlMsg::Decide { txn: txn(2), commit: Some(Version { time: 9, dc: 0 }) });
    assert_eq!(out.sends, vec![(Addr::Server(COORD), TwoPlMsg::Ack { txn: txn(2) })]);
    assert_eq!(p.value(&x), None, "nothing prepared: nothing applied");
}

#[test]
fn an_older_request_wounds_a_younger_waiter_queued_ahead_of_it() {
    // FIFO queues: the old reader would wait behind the young writer, which waits for the prepared holder;
    // wound-wait must not let an older transaction wait for a younger one, so the waiter is wounded.
    let mut p = server(0);
    let x = key(0, "x");
    deliver(&mut p, COORD, prepare(3, 3, &[(&x, "v")], false));
    assert!(deliver(&mut p, c(2), lock_x(2, 20, &x)).sends.is_empty());
    let out = deliver_at(&mut p, NOW + 3, c(1), read(1, 10, &[&x], false));
    assert_eq!(cause(read_reply(&out, 2)), Some(AbortCause::Deadlock), "the waiting request is answered");
    assert_eq!(p.waiters(&x), vec![(txn(1), Mode::Shared)]);
    assert!(p.is_prepared(txn(3)));
}

#[test]
fn a_confirmed_release_says_whether_the_locks_were_still_held() {
    let mut p = server(0);
    let x = key(0, "x");
    deliver(&mut p, c(2), read(2, 20, &[&x], false));
    let out = deliver(&mut p, c(2), TwoPlMsg::Release { txn: txn(2), confirm: true });
    assert_eq!(out.sends, vec![(c(2), TwoPlMsg::Released { txn: txn(2), result: Ok(()) })]);
    assert!(p.holders(&x).is_empty());
    // Wounded meanwhile: the release says so.
    deliver(&mut p, c(3), read(3, 30, &[&x], false));
    deliver(&mut p, COORD, prepare(1, 10, &[(&x, "v")], false));
    let out = deliver(&mut p, c(3), TwoPlMsg::Release { txn: txn(3), confirm: true });
    assert_eq!(out.sends, vec![(c(3), TwoPlMsg::Released { txn: txn(3), result: Err(wounded()) })]);
}

#[test]
fn a_transaction_idle_for_too_long_is_aborted_and_its_waiter_granted() {
    let mut p = server(0);
    let x = key(0, "x");
    deliver(&mut p, c(1), lock_x(1, 10, &x));
    assert!(deliver_at(&mut p, NOW + IDLE_ABORT_NS / 2, c(2), read(2, 20, &[&x], false)).sends.is_empty());
    let out = sweep(&mut p, NOW + IDLE_ABORT_NS);
    assert!(out.sends.is_empty(), "not idle for longer than the limit yet");
    assert_eq!(out.timers, vec![(SWEEP_EVERY_NS, TwoPlTimer::Sweep)]);
    let out = sweep(&mut p, NOW + IDLE_ABORT_NS + 1);
    assert!(read_reply(&out, 2).is_ok(), "the waiter is granted");
    assert_eq!(p.abort_cause(txn(1)), Some(AbortCause::Timeout));
    let out = deliver_at(&mut p, NOW + IDLE_ABORT_NS + 2, c(1), read(1, 10, &[&x], true));
    assert_eq!(cause(read_reply(&out, 1)), Some(AbortCause::Timeout));
    // A prepared transaction is never aborted by the sweep.
    let y = key(0, "y");
    deliver_at(&mut p, NOW, COORD, prepare(3, 30, &[(&y, "v")], false));
    sweep(&mut p, NOW + 10 * IDLE_ABORT_NS);
    assert!(p.is_prepared(txn(3)));
}

#[test]
fn forged_and_misdirected_messages_get_errors_and_never_panic() {
    let mut p = server(0);
    let (x, elsewhere) = (key(0, "x"), key(1, "z"));
    let rejected = |r: &Result<Vec<ReadResult>, OpError>, what: &str| {
        assert!(matches!(r, Err(OpError::Rejected(m)) if m.contains(what)), "{r:?} should mention {what}")
    };
    rejected(read_reply(&deliver(&mut p, c(1), read(1, 10, &[&elsewhere], false)), 1), "misdirected");
    rejected(read_reply(&deliver(&mut p, c(1), read(1, 10, &[], false)), 1), "at least one key");
    // Client 1 names client 2's transaction.
    let forged = TwoPlMsg::Read { txn: txn(2), age: age(2, 1), keys: vec![x.clone()], exclusive: vec![], held: false };
    rejected(read_reply(&deliver(&mut p, c(1), forged), 1), "not client c1's");
    assert!(matches!(
        vote(&deliver(&mut p, COORD, prepare(4, 40, &[(&elsewhere, "v")], false))),
        Err(Abort { cause: AbortCause::Vote, .. })
    ));
    // Replies and decisions nobody asked for.
    assert!(deliver(&mut p, COORD, TwoPlMsg::Vote { txn: txn(5), vote: Ok(1), blocked_ns: 0 }).sends.is_empty());
    assert!(deliver(&mut p, COORD, TwoPlMsg::Ack { txn: txn(5) }).sends.is_empty());
    assert!(deliver(&mut p, c(1), TwoPlMsg::Outcome { txn: txn(1), result: Ok(Reply::default()) }).sends.is_empty());
    assert!(deliver(&mut p, c(1), TwoPlMsg::Decide { txn: txn(1), commit: None }).sends.is_empty());
    // A server of another datacenter is no coordinator or participant.
    assert!(deliver(&mut p, ServerId::new(1, 0), prepare(6, 60, &[(&x, "v")], false)).sends.is_empty());
    // Commits naming partitions that do not exist or keys on the wrong partition.
    let mut coordinator = server(0);
    for participants in [
        vec![Participant { partition: 7, writes: vec![], held: true, reads: vec![] }],
        vec![Participant { partition: 0, writes: vec![(elsewhere.clone(), "v".into())], held: false, reads: vec![] }],
        vec![],
    ] {
        let out = deliver(&mut coordinator, c(1), TwoPlMsg::Commit { txn: txn(1), age: age(1, 1), participants });
        assert!(matches!(out.sends.as_slice(), [(_, TwoPlMsg::Outcome { result: Err(OpError::Rejected(_)), .. })]));
    }
    // Another client cannot release someone's locks.
    deliver(&mut p, c(1), read(1, 10, &[&x], false));
    deliver(&mut p, c(2), TwoPlMsg::Release { txn: txn(1), confirm: false });
    assert_eq!(p.holders(&x), vec![(txn(1), Mode::Shared)]);
    // Datacenter 1 serves nothing.
    let mut dc1 = TwoPl::server(ServerId::new(1, 0), topo(), &ProtocolConfig::default());
    rejected(read_reply(&deliver(&mut dc1, c(1), read(1, 10, &[&x], false)), 1), "serves nothing");
}

#[test]
fn the_coordinator_prepares_every_participant_and_commits_at_the_largest_proposed_time() {
    let mut tc = server(0);
    let (x, y) = (key(0, "x"), key(1, "y"));
    let participants = vec![
        Participant { partition: 0, writes: vec![(x.clone(), "x1".into())], held: false, reads: vec![] },
        Participant { partition: 1, writes: vec![(y.clone(), "y1".into())], held: true, reads: vec![] },
    ];
    let out = deliver(&mut tc, c(1), TwoPlMsg::Commit { txn: txn(1), age: age(1, 10), participants });
    let prepare_y = TwoPlMsg::Prepare {
        txn: txn(1),
        age: age(1, 10),
        writes: vec![(y.clone(), "y1".into())],
        held: true,
        reads: vec![],
    };
    assert_eq!(out.sends, vec![(Addr::Server(COORD), prepare_y)], "its own partition prepared in place");
    assert!(tc.is_prepared(txn(1)));
    let late = NOW + 1_000;
    let out = deliver(&mut tc, COORD, TwoPlMsg::Vote { txn: txn(1), vote: Ok(late), blocked_ns: 5 });
    let version = Version { time: late, dc: 0 };
    let metrics = OpMetrics { blocked_ns: 5, ..Default::default() };
    assert_eq!(
        out.sends,
        vec![
            (
                c(1),
                TwoPlMsg::Outcome {
                    txn: txn(1),
                    result: Ok(Reply { commit: Some(version), metrics, ..Default::default() })
                }
            ),
            (Addr::Server(COORD), TwoPlMsg::Decide { txn: txn(1), commit: Some(version) }),
        ]
    );
    assert_eq!(tc.value(&x), Some(("x1".into(), version)), "applied in place");
    assert_eq!(tc.coordinating(), 1, "until every participant acknowledged");
    deliver(&mut tc, COORD, TwoPlMsg::Ack { txn: txn(1) });
    assert_eq!(tc.coordinating(), 0);
}

#[test]
fn a_no_vote_aborts_every_participant_with_the_voters_cause() {
    let mut tc = server(0);
    let (x, y) = (key(0, "x"), key(1, "y"));
    let participants = vec![
        Participant { partition: 0, writes: vec![(x.clone(), "x1".into())], held: false, reads: vec![] },
        Participant { partition: 1, writes: vec![(y, "y1".into())], held: true, reads: vec![] },
    ];
    deliver(&mut tc, c(1), TwoPlMsg::Commit { txn: txn(1), age: age(1, 10), participants });
    let out = deliver(&mut tc, COORD, TwoPlMsg::Vote { txn: txn(1), vote: Err(wounded()), blocked_ns: 0 });
    assert_eq!(
        out.sends,
        vec![
            (c(1), TwoPlMsg::Outcome { txn: txn(1), result: Err(OpError::Aborted(wounded())) }),
            (Addr::Server(COORD), TwoPlMsg::Decide { txn: txn(1), commit: None }),
        ]
    );
    assert!(tc.holders(&x).is_empty(), "its own partition released in place");
    assert!(deliver(&mut tc, COORD, TwoPlMsg::Vote { txn: txn(1), vote: Ok(5), blocked_ns: 0 }).sends.is_empty());
}

// ---- client ----

/// The age a client gives a transaction begun at its clock reading `time`.
fn client_age(client: u64, time: u64) -> Age {
    Age { time, client: ClientId(client) }
}

fn client() -> TwoPlClient {
    TwoPl::client(ClientId(1), 1, topo(), &ProtocolConfig::default())
}

fn request(cl: &mut TwoPlClient, now: u64, op: u64, req: Request) -> Effects<TwoPl> {
    let mut rng = SmallRng::seed_from_u64(1);
    let mut out = Effects::default();
    cl.on_request(&mut Ctx::new(now, &mut rng, &mut out), OpId(op), req);
    out
}

fn answer(cl: &mut TwoPlClient, from: ServerId, msg: TwoPlMsg) -> Effects<TwoPl> {
    let mut rng = SmallRng::seed_from_u64(1);
    let mut out = Effects::default();
    cl.on_message(&mut Ctx::new(NOW, &mut rng, &mut out), Addr::Server(from), msg);
    out
}

fn value(key: &Key, v: &str, time: u64) -> ReadResult {
    ReadResult { key: key.clone(), value: Some(v.into()), version: Version { time, dc: 0 }, versions_skipped: 0 }
}

fn completion(out: &Effects<TwoPl>) -> &Result<Reply, OpError> {
    match out.completions.as_slice() {
        [(_, r)] => r,
        other => panic!("expected one completion, got {other:?}"),
    }
}

#[test]
fn begin_is_local_and_reads_go_to_the_home_servers_in_datacenter_0() {
    let mut cl = client();
    let out = request(&mut cl, NOW, 0, Request::Begin);
    assert_eq!((out.sends.len(), completion(&out)), (0, &Ok(Reply::default())));
    let me = TxnId { client: ClientId(1), seq: 0 };
    assert_eq!(cl.open_transaction(), Some((me, client_age(1, NOW))));
    let (x, y) = (key(0, "x"), key(1, "y"));
    let out = request(&mut cl, NOW + 1, 1, Request::Read { keys: vec![y.clone(), x.clone()] });
    let lock = |k: &Key| TwoPlMsg::Read {
        txn: me,
        age: client_age(1, NOW),
        keys: vec![k.clone()],
        exclusive: vec![],
        held: false,
    };
    assert_eq!(
        out.sends,
        vec![(Addr::Server(ServerId::new(0, 0)), lock(&x)), (Addr::Server(ServerId::new(0, 1)), lock(&y))]
    );
    let reply = |r: ReadResult, blocked_ns| TwoPlMsg::ReadReply { txn: me, result: Ok(vec![r]), blocked_ns };
    assert!(answer(&mut cl, ServerId::new(0, 0), reply(value(&x, "a", 3), 7)).completions.is_empty());
    // A reply from a server not asked is ignored.
    assert!(answer(&mut cl, ServerId::new(1, 1), reply(value(&y, "forged", 3), 0)).completions.is_empty());
    let out = answer(&mut cl, ServerId::new(0, 1), reply(value(&y, "b", 4), 2));
    let got = completion(&out).as_ref().unwrap();
    assert_eq!(got.reads, vec![value(&y, "b", 4), value(&x, "a", 3)], "request order");
    assert_eq!((got.metrics.rounds, got.metrics.versions_returned, got.metrics.blocked_ns), (1, 2, 9));
    // The next read of the same partition says it already holds locks there.
    let out = request(&mut cl, NOW + 2, 2, Request::Read { keys: vec![x.clone()] });
    assert!(matches!(out.sends.as_slice(), [(_, TwoPlMsg::Read { held: true, .. })]));
}

#[test]
fn a_transaction_retried_after_a_deadlock_abort_keeps_its_age() {
    let mut cl = client();
    let x = key(0, "x");
    request(&mut cl, NOW, 0, Request::Begin);
    request(&mut cl, NOW, 1, Request::Read { keys: vec![x.clone()] });
    let me = TxnId { client: ClientId(1), seq: 0 };
    let out = answer(
        &mut cl,
        ServerId::new(0, 0),
        TwoPlMsg::ReadReply { txn: me, result: Err(OpError::Aborted(wounded())), blocked_ns: 0 },
    );
    assert_eq!(completion(&out), &Err(OpError::Aborted(wounded())));
    assert!(out.sends.is_empty(), "the wounding partition already released; no other holds locks");
    assert_eq!(cl.open_transaction(), None);
    request(&mut cl, NOW + 1_000, 2, Request::Begin);
    let retry = TxnId { client: ClientId(1), seq: 1 };
    assert_eq!(cl.open_transaction(), Some((retry, client_age(1, NOW))), "same age, new id");
    // A user abort does not carry the age over.
    let out = request(&mut cl, NOW + 2_000, 3, Request::Abort);
    assert_eq!(completion(&out).as_ref().err().and_then(OpError::abort_cause), Some(AbortCause::User));
    request(&mut cl, NOW + 3_000, 4, Request::Begin);
    assert_eq!(cl.open_transaction().map(|(_, a)| a), Some(client_age(1, NOW + 3_000)));
}

#[test]
fn commit_goes_to_the_lowest_participant_and_a_read_only_commit_releases() {
    let mut cl = client();
    let (x, y) = (key(0, "x"), key(1, "y"));
    let me = TxnId { client: ClientId(1), seq: 0 };
    request(&mut cl, NOW, 0, Request::Begin);
    request(&mut cl, NOW, 1, Request::Read { keys: vec![y.clone()] });
    answer(
        &mut cl,
        ServerId::new(0, 1),
        TwoPlMsg::ReadReply { txn: me, result: Ok(vec![value(&y, "b", 4)]), blocked_ns: 0 },
    );
    let out = request(&mut cl, NOW, 2, Request::Commit { writes: vec![(x.clone(), "x1".into())] });
    let participants = vec![
        Participant { partition: 0, writes: vec![(x.clone(), "x1".into())], held: false, reads: vec![] },
        Participant { partition: 1, writes: vec![], held: true, reads: vec![] },
    ];
    assert_eq!(
        out.sends,
        vec![(Addr::Server(ServerId::new(0, 0)), TwoPlMsg::Commit { txn: me, age: client_age(1, NOW), participants })]
    );
    let version = Version { time: 77, dc: 0 };
    let outcome = Ok(Reply { commit: Some(version), ..Default::default() });
    let out = answer(&mut cl, ServerId::new(0, 0), TwoPlMsg::Outcome { txn: me, result: outcome });
    let reply = completion(&out).as_ref().unwrap();
    assert_eq!((reply.commit, reply.metrics.rounds), (Some(version), 1));

    let me = TxnId { client: ClientId(1), seq: 1 };
    request(&mut cl, NOW, 3, Request::Begin);
    request(&mut cl, NOW, 4, Request::Read { keys: vec![y.clone()] });
    answer(
        &mut cl,
        ServerId::new(0, 1),
        TwoPlMsg::ReadReply { txn: me, result: Ok(vec![value(&y, "b", 4)]), blocked_ns: 0 },
    );
    let out = request(&mut cl, NOW, 5, Request::Commit { writes: vec![] });
    assert_eq!(out.sends, vec![(Addr::Server(ServerId::new(0, 1)), TwoPlMsg::Release { txn: me, confirm: false })]);
    assert_eq!(completion(&out).as_ref().unwrap().commit, None);
}

#[test]
fn a_read_only_commit_over_several_partitions_waits_for_the_others_to_confirm() {
    let mut cl = client();
    let (x, y) = (key(0, "x"), key(1, "y"));
    let me = TxnId { client: ClientId(1), seq: 0 };
    request(&mut cl, NOW, 0, Request::Rot { keys: vec![x.clone(), y.clone()] });
    let reply = |r: ReadResult| TwoPlMsg::ReadReply { txn: me, result: Ok(vec![r]), blocked_ns: 0 };
    answer(&mut cl, ServerId::new(0, 1), reply(value(&y, "b", 4)));
    let out = answer(&mut cl, ServerId::new(0, 0), reply(value(&x, "a", 3)));
    assert!(out.completions.is_empty());
    assert_eq!(
        out.sends,
        vec![
            (Addr::Server(ServerId::new(0, 0)), TwoPlMsg::Release { txn: me, confirm: false }),
            (Addr::Server(ServerId::new(0, 1)), TwoPlMsg::Release { txn: me, confirm: true }),
        ],
        "x's partition answered last: only y's must confirm"
    );
    let out = answer(&mut cl, ServerId::new(0, 1), TwoPlMsg::Released { txn: me, result: Ok(()) });
    let got = completion(&out).as_ref().unwrap();
    assert_eq!((values_of(got), got.metrics.rounds), (vec![Some("a".into()), Some("b".into())], 2));
    // The same, but y's partition had wounded it: the ROT aborts.
    let me = TxnId { client: ClientId(1), seq: 1 };
    request(&mut cl, NOW, 1, Request::Rot { keys: vec![x.clone(), y.clone()] });
    let reply = |r: ReadResult| TwoPlMsg::ReadReply { txn: me, result: Ok(vec![r]), blocked_ns: 0 };
    answer(&mut cl, ServerId::new(0, 1), reply(value(&y, "b", 4)));
    answer(&mut cl, ServerId::new(0, 0), reply(value(&x, "a", 3)));
    let out = answer(&mut cl, ServerId::new(0, 1), TwoPlMsg::Released { txn: me, result: Err(wounded()) });
    assert_eq!(completion(&out), &Err(OpError::Aborted(wounded())));
}

fn values_of(reply: &Reply) -> Vec<Option<Value>> {
    reply.reads.iter().map(|r| r.value.clone()).collect()
}

#[test]
fn requests_outside_a_transaction_are_refused_and_a_new_request_abandons_an_unanswered_one() {
    let mut cl = client();
    let x = key(0, "x");
    for req in [Request::Read { keys: vec![x.clone()] }, Request::Commit { writes: vec![] }, Request::Abort] {
        assert!(matches!(completion(&request(&mut cl, NOW, 0, req)), Err(OpError::Rejected(_))));
    }
    request(&mut cl, NOW, 1, Request::Begin);
    assert!(matches!(completion(&request(&mut cl, NOW, 2, Request::Begin)), Err(OpError::Rejected(_))));
    request(&mut cl, NOW, 3, Request::Read { keys: vec![x.clone()] });
    // The runtime gave up on the read; the application moves on.
    let out = request(&mut cl, NOW, 4, Request::Rot { keys: vec![x.clone()] });
    assert!(matches!(out.completions.as_slice(), [(OpId(3), Err(OpError::Unknown(_)))]));
    let me = TxnId { client: ClientId(1), seq: 0 };
    assert_eq!(out.sends[0], (Addr::Server(ServerId::new(0, 0)), TwoPlMsg::Release { txn: me, confirm: false }));
    assert!(matches!(out.sends[1].1, TwoPlMsg::Read { .. }), "the ROT starts");
}

#[test]
fn replies_to_clients_note_aborts_and_waiting_for_the_metrics() {
    let conflict = Abort { cause: AbortCause::Conflict, detail: "held".into() };
    let released = TwoPlMsg::Released { txn: txn(1), result: Err(conflict.clone()) };
    assert_eq!(released.reply_note().unwrap().abort, Some(AbortCause::Conflict));
    let read = TwoPlMsg::ReadReply { txn: txn(1), result: Ok(Vec::new()), blocked_ns: 7 };
    assert_eq!(read.reply_note(), Some(ReplyNote { abort: None, rejected: false, blocked_ns: 7 }));
    let outcome = TwoPlMsg::Outcome { txn: txn(1), result: Err(OpError::Aborted(conflict)) };
    assert_eq!(outcome.reply_note().unwrap().abort, Some(AbortCause::Conflict));
    let refused = TwoPlMsg::Outcome { txn: txn(1), result: Err(OpError::Rejected("no".into())) };
    assert!(refused.reply_note().unwrap().rejected);
    assert_eq!(TwoPlMsg::Ack { txn: txn(1) }.reply_note(), None, "server-to-server");
}
