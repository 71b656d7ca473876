//! Each test drives one state machine directly and asserts the effects of one input.
use super::*;
use rand::SeedableRng;
use rand::rngs::SmallRng;
use snowline_core::Effects;

const NOW: u64 = 1_000_000_000;
const CLIENT: ClientId = ClientId(9);

fn topo() -> Topology {
    Topology::new(2, 2)
}

fn server<F: Flavour>(dc: DcId, p: PartitionId) -> TomsicServer<F> {
    Tomsic::<F>::server(ServerId::new(dc, p), topo(), &ProtocolConfig::default())
}

fn deliver_at<F: Flavour>(
    node: &mut TomsicServer<F>,
    now: u64,
    from: impl Into<Addr>,
    msg: TomsicMsg,
) -> Effects<Tomsic<F>> {
    let mut rng = SmallRng::seed_from_u64(1);
    let mut out = Effects::default();
    let _ = node.on_message(&mut Ctx::new(now, &mut rng, &mut out), from.into(), msg);
    out
}

fn deliver<F: Flavour>(node: &mut TomsicServer<F>, from: impl Into<Addr>, msg: TomsicMsg) -> Effects<Tomsic<F>> {
    deliver_at(node, NOW, from, msg)
}

fn fire<F: Flavour>(node: &mut TomsicServer<F>, now: u64, timer: TomsicTimer) -> Effects<Tomsic<F>> {
    let mut rng = SmallRng::seed_from_u64(1);
    let mut out = Effects::default();
    node.on_timer(&mut Ctx::new(now, &mut rng, &mut out), timer);
    out
}

/// Fires the live stabilisation timer.
fn stabilise_round<F: Flavour>(p: &mut TomsicServer<F>, now: u64) -> Effects<Tomsic<F>> {
    let generation = p.stabilise_pacer.generation();
    fire(p, now, TomsicTimer::Stabilise(generation))
}

/// Fires the live garbage-collection timer.
fn gc_round<F: Flavour>(p: &mut TomsicServer<F>, now: u64) -> Effects<Tomsic<F>> {
    let generation = p.gc_pacer.generation();
    fire(p, now, TomsicTimer::CollectGarbage(generation))
}

fn key(p: PartitionId) -> Key {
    topo().key_on(p, "k").into()
}

fn vc(v: [u64; 2]) -> VectorClock {
    VectorClock(v.to_vec())
}

fn begin(op: u64, request: Request) -> TomsicMsg {
    TomsicMsg::Begin { op: OpId(op), request, session: Session::default() }
}

fn done<F: Flavour>(out: &Effects<Tomsic<F>>) -> &Result<Reply, OpError> {
    match out.sends.iter().find_map(|(_, m)| if let TomsicMsg::Done { result, .. } = m { Some(result) } else { None }) {
        Some(r) => r,
        None => panic!("no reply to the client in {:?}", out.sends),
    }
}

fn read_reply<F: Flavour>(out: &Effects<Tomsic<F>>) -> (&[ReadResult], u64) {
    match out.sends.iter().find_map(|(_, m)| match m {
        TomsicMsg::ReadReply { results, blocked_ns, .. } => Some((results.as_slice(), *blocked_ns)),
        _ => None,
    }) {
        Some(r) => r,
        None => panic!("no read reply in {:?}", out.sends),
    }
}

/// A committed version of `key` at a partition of dc 0, with dependency vector `dep`, at time `ct`.
fn committed<F: Flavour>(p: &mut TomsicServer<F>, key: Key, value: &str, dep: [u64; 2], ct: u64) {
    let tc = ServerId::new(0, 1 - p.id.partition);
    deliver(p, tc, TomsicMsg::Prepare { txn: ct, writes: vec![(key, value.into())], dep: vc(dep), ct });
    deliver(p, tc, TomsicMsg::Commit { txn: ct, ct });
}

#[test]
fn client_sends_the_operation_to_the_server_of_its_first_key_in_its_own_dc() {
    // Tomsic §4.2.1: "The server that receives a new transaction starts a new TC process".
    let mut client = Cv::client(CLIENT, 1, topo(), &ProtocolConfig::default());
    let mut rng = SmallRng::seed_from_u64(1);
    let mut out = Effects::default();
    let req = Request::Rot { keys: vec![key(1), key(0)] };
    client.on_request(&mut Ctx::new(NOW, &mut rng, &mut out), OpId(3), req.clone());
    let session = Session { dep: vc([0, 0]), ss: vc([0, 0]), observed: vc([0, 0]) };
    assert_eq!(
        out.sends,
        vec![(Addr::Server(ServerId::new(1, 1)), TomsicMsg::Begin { op: OpId(3), request: req, session })]
    );
}

#[test]
fn tc_reads_its_own_partition_in_place_and_the_others_in_parallel() {
    // Alg. 1 lines 4–6: split keys by partition, one read request per partition, in parallel.
    let mut tc = server::<CvFlavour>(0, 0);
    deliver(
        &mut tc,
        ServerId::new(0, 1),
        TomsicMsg::CommitSingle { txn: 5, writes: vec![(key(0), "a".into())], dep: vc([0, 0]), ct: 1 },
    );
    let out = deliver(&mut tc, CLIENT, begin(1, Request::Rot { keys: vec![key(1), key(0)] }));
    assert_eq!(
        out.sends,
        vec![(Addr::Server(ServerId::new(0, 1)), TomsicMsg::Read { txn: 0, keys: vec![key(1)], ss: vc([0, 0]) })]
    );
    let remote =
        ReadResult { key: key(1), value: Some("b".into()), version: Version { time: 5, dc: 1 }, versions_skipped: 0 };
    let reply = TomsicMsg::ReadReply { txn: 0, results: vec![remote.clone()], max_cv: vc([0, 0]), blocked_ns: 0 };
    let out = deliver(&mut tc, ServerId::new(0, 1), reply);
    let reply = done(&out).as_ref().unwrap();
    assert_eq!(reply.reads[0], remote, "results come back in request order");
    assert_eq!(reply.reads[1].value.as_deref(), Some("a"));
    assert_eq!((reply.metrics.rounds, reply.metrics.versions_returned), (1, 2));
}

#[test]
fn a_multi_shot_read_only_transaction_sends_its_rounds_one_after_another_at_one_snapshot() {
    // Tomsic §5.3 (multi-shot workload: rounds of parallel reads in one transaction) with Alg. 1 lines
    // 1–13 per round: every round reads at the snapshot assigned at INIT.
    let mut tc = server::<AvFlavour>(0, 0);
    let request = Request::RotRounds { rounds: vec![vec![key(1)], vec![key(1), key(0)]] };
    let out = deliver(&mut tc, CLIENT, begin(1, request));
    let ss = vc([0, 0]);
    assert_eq!(
        out.sends,
        vec![(Addr::Server(ServerId::new(0, 1)), TomsicMsg::Read { txn: 0, keys: vec![key(1)], ss: ss.clone() })]
    );
    let result = |v: &str| ReadResult {
        key: key(1),
        value: Some(v.into()),
        version: Version { time: 3, dc: 0 },
        versions_skipped: 0,
    };
    let reply = |v: &str| TomsicMsg::ReadReply { txn: 0, results: vec![result(v)], max_cv: vc([3, 0]), blocked_ns: 0 };
    let out = deliver(&mut tc, ServerId::new(0, 1), reply("a"));
    assert_eq!(
        out.sends,
        vec![(Addr::Server(ServerId::new(0, 1)), TomsicMsg::Read { txn: 0, keys: vec![key(1)], ss })],
        "the second round goes out once the first has answered, at the same snapshot; key(0) is read in place"
    );
    let out = deliver(&mut tc, ServerId::new(0, 1), reply("b"));
    let reply = done(&out).as_ref().unwrap();
    let values: Vec<_> = reply.reads.iter().map(|r| r.value.clone()).collect();
    assert_eq!(values, vec![Some("a".into()), Some("b".into()), None]);
    assert_eq!(reply.metrics.rounds, 2);
}

#[test]
fn presumed_commit_answers_the_client_after_prepare_then_commits_at_the_max_time() {
    // Tomsic §4.1 (presumed commit) and Alg. 1 lines 18–28: ok to the client once all prepared, then
    // commit with ct = max of the proposed times.
    let mut tc = server::<CvFlavour>(0, 0);
    let writes = vec![(key(0), "x".into()), (key(1), "y".into())];
    let out = deliver(&mut tc, CLIENT, begin(1, Request::Update { writes }));
    let prepare = TomsicMsg::Prepare { txn: 0, writes: vec![(key(1), "y".into())], dep: vc([0, 0]), ct: 1 };
    assert_eq!(out.sends, vec![(Addr::Server(ServerId::new(0, 1)), prepare)]);
    assert_eq!(tc.prepared_count(), 1, "the TC's own partition prepared in place");
    assert_eq!(tc.versions(&key(0)), vec![], "prepared updates are not visible (Alg. 2 line 10)");

    let later = NOW * 50;
    let out = deliver(&mut tc, ServerId::new(0, 1), TomsicMsg::Prepared { txn: 0, time: later });
    let commit = done(&out).as_ref().unwrap().commit.unwrap();
    assert_eq!(commit, Version { time: later, dc: 0 });
    assert!(out.sends.contains(&(Addr::Server(ServerId::new(0, 1)), TomsicMsg::Commit { txn: 0, ct: later })));
    assert!(out.sends.contains(&(
        Addr::Server(ServerId::new(1, 0)),
        TomsicMsg::Replicate { writes: vec![(key(0), "x".into())], version: commit }
    )));
    assert_eq!(tc.versions(&key(0)), vec![(commit, "x".into())]);
    assert_eq!(tc.prepared_count(), 0);
}

#[test]
fn a_partition_proposes_increasing_times_and_commits_only_what_it_prepared() {
    // Alg. 2 lines 7–16; line 9: time = MAX(READ_CLOCK(), ct_T).
    let mut p = server::<CvFlavour>(0, 1);
    let tc = ServerId::new(0, 0);
    let prepare = |txn, v: &str, ct| TomsicMsg::Prepare { txn, writes: vec![(key(1), v.into())], dep: vc([0, 0]), ct };
    let a = deliver(&mut p, tc, prepare(7, "y", 1));
    let b = deliver(&mut p, tc, prepare(8, "z", 1));
    let c = deliver(&mut p, tc, prepare(9, "w", NOW * 3));
    let time = |e: &Effects<Cv>| match &e.sends[0].1 {
        TomsicMsg::Prepared { time, .. } => *time,
        m => panic!("{m:?}"),
    };
    assert!(time(&b) > time(&a));
    assert_eq!(time(&c), NOW * 3, "a coordinator's ct_T above the clock wins");
    assert_eq!(p.oldest_prepared_time(), Some(time(&a)));
    let out = deliver(&mut p, tc, TomsicMsg::Commit { txn: 99, ct: 1 });
    assert!(out.sends.is_empty(), "a commit for nothing prepared is ignored");
    let out = deliver(&mut p, tc, TomsicMsg::Commit { txn: 8, ct: time(&b) + 10 });
    assert_eq!(out.sends.len(), 1, "one Replicate to the one sibling");
    assert_eq!(p.versions(&key(1)), vec![(Version { time: time(&b) + 10, dc: 0 }, "z".into())]);
}

#[test]
fn cv_reads_the_latest_committed_version_and_replicas_converge_last_writer_wins() {
    // Alg. 2 line 18 (COND is true under CV) and line 23 (one version per key).
    let mut p = server::<CvFlavour>(1, 0);
    let s = ServerId::new(0, 0);
    let newer = Version { time: 20, dc: 0 };
    deliver(&mut p, s, TomsicMsg::Replicate { writes: vec![(key(0), "new".into())], version: newer });
    deliver(
        &mut p,
        s,
        TomsicMsg::Replicate { writes: vec![(key(0), "old".into())], version: Version { time: 10, dc: 0 } },
    );
    assert_eq!(p.versions(&key(0)), vec![(newer, "new".into())]);
    let out = deliver(&mut p, ServerId::new(1, 1), TomsicMsg::Read { txn: 4, keys: vec![key(0)], ss: vc([0, 0]) });
    let (results, blocked) = read_reply(&out);
    assert_eq!(results, &[ReadResult { key: key(0), value: Some("new".into()), version: newer, versions_skipped: 0 }]);
    assert_eq!(blocked, 0);
}

#[test]
fn av_reads_the_newest_version_in_the_stable_snapshot_and_counts_the_skipped_ones() {
    // Tomsic §4.3 and Alg. 2 line 20: under AV, COND is cv ≤ ss_T; newer versions are skipped (Stable
    // Freshness).
    let mut p = server::<AvFlavour>(0, 0);
    committed(&mut p, key(0), "old", [0, 0], 100);
    committed(&mut p, key(0), "new", [0, 0], 200);
    let out = deliver(&mut p, ServerId::new(0, 1), TomsicMsg::Read { txn: 1, keys: vec![key(0)], ss: vc([150, 0]) });
    let (results, _) = read_reply(&out);
    assert_eq!((results[0].value.as_deref(), results[0].versions_skipped), (Some("old"), 1));
    let out = deliver(&mut p, ServerId::new(0, 1), TomsicMsg::Read { txn: 2, keys: vec![key(0)], ss: vc([50, 0]) });
    assert_eq!(read_reply(&out).0[0].value, None, "nothing in the snapshot: the initial state");
}

#[test]
fn op_returns_a_newer_compatible_version_where_av_does_not() {
    // Tomsic §3.3.2 (Def. 5, Concurrent Freshness) and Alg. 2 line 19: under OP a version whose
    // dependencies are in the snapshot is compatible even if its commit vector is not.
    let read = TomsicMsg::Read { txn: 1, keys: vec![key(0)], ss: vc([150, 0]) };
    let mut op = server::<OpFlavour>(0, 0);
    let mut av = server::<AvFlavour>(0, 0);
    committed(&mut op, key(0), "old", [0, 0], 100);
    committed(&mut op, key(0), "new", [120, 0], 200);
    committed(&mut av, key(0), "old", [0, 0], 100);
    committed(&mut av, key(0), "new", [120, 0], 200);
    assert_eq!(read_reply(&deliver(&mut op, ServerId::new(0, 1), read.clone())).0[0].value.as_deref(), Some("new"));
    assert_eq!(read_reply(&deliver(&mut av, ServerId::new(0, 1), read)).0[0].value.as_deref(), Some("old"));
    // A version depending on something outside the snapshot is not compatible.
    committed(&mut op, key(0), "newest", [180, 0], 300);
    let read = TomsicMsg::Read { txn: 2, keys: vec![key(0)], ss: vc([150, 0]) };
    let out = deliver(&mut op, ServerId::new(0, 1), read);
    assert_eq!((read_reply(&out).0[0].value.as_deref(), read_reply(&out).0[0].versions_skipped), (Some("new"), 1));
}

#[test]
fn op_coordinator_merges_the_commit_vectors_it_read_into_the_dependencies() {
    // Alg. 1 lines 10–12.
    let mut tc = server::<OpFlavour>(0, 0);
    deliver(&mut tc, CLIENT, begin(1, Request::Rot { keys: vec![key(1)] }));
    let result =
        ReadResult { key: key(1), value: Some("v".into()), version: Version { time: 9, dc: 1 }, versions_skipped: 0 };
    let out = deliver(
        &mut tc,
        ServerId::new(0, 1),
        TomsicMsg::ReadReply { txn: 0, results: vec![result], max_cv: vc([7, 9]), blocked_ns: 0 },
    );
    match out.sends.iter().find_map(|(_, m)| if let TomsicMsg::Done { session, .. } = m { Some(session) } else { None })
    {
        Some(session) => assert_eq!(session.dep, vc([7, 9])),
        None => panic!("no reply: {:?}", out.sends),
    }
}

#[test]
fn cure_blocks_a_read_until_the_partition_clock_passes_the_snapshot() {
    // Tomsic §4.1: in Cure a partition delays a read while "the clock at the partition is behind the
    // snapshot timestamp".
    let mut p = server::<CureFlavour>(0, 0);
    let ahead = NOW + 5_000;
    let out = deliver(&mut p, ServerId::new(0, 1), TomsicMsg::Read { txn: 1, keys: vec![key(0)], ss: vc([ahead, 0]) });
    assert!(out.sends.is_empty(), "the read waits");
    assert_eq!(out.timers.len(), 1, "a wake-up when the clock passes the snapshot");
    assert_eq!(p.waiting_reads(), 1);
    let out = fire(&mut p, ahead + 1, TomsicTimer::ClockCaughtUp);
    assert_eq!(read_reply(&out).1, 5_001, "blocked from arrival to answer");
    assert_eq!(p.waiting_reads(), 0);
}

#[test]
fn cure_blocks_a_read_on_a_prepared_transaction_that_may_commit_into_its_snapshot() {
    // Tomsic §4.1: a read is delayed when "an instance of 2PC is committing a transaction which needs to
    // be included in the snapshot".
    let mut p = server::<CureFlavour>(0, 0);
    let tc = ServerId::new(0, 1);
    let out =
        deliver(&mut p, tc, TomsicMsg::Prepare { txn: 3, writes: vec![(key(0), "x".into())], dep: vc([0, 0]), ct: 1 });
    let TomsicMsg::Prepared { time, .. } = out.sends[0].1 else { panic!("{:?}", out.sends) };
    let later = time + 1_000;
    let out = deliver_at(&mut p, later, tc, TomsicMsg::Read { txn: 1, keys: vec![key(0)], ss: vc([later - 1, 0]) });
    assert!(out.sends.is_empty(), "the prepared transaction may commit below the snapshot");
    let out = deliver_at(&mut p, later + 10, tc, TomsicMsg::Commit { txn: 3, ct: time });
    let (results, blocked) = read_reply(&out);
    assert_eq!((results[0].value.as_deref(), blocked), (Some("x"), 10));
}

#[test]
fn stabilisation_holds_back_updates_above_the_oldest_prepared_time() {
    // Alg. 3 lines 2–10: stable_n is just below the oldest prepared time; only updates with ct ≤ stable_n
    // go to the siblings, in ct order, with stable_n as the heartbeat; vec_p goes to the local peers.
    let mut p = server::<AvFlavour>(0, 0);
    committed(&mut p, key(0), "a", [0, 0], NOW + 10);
    let tc = ServerId::new(0, 1);
    let out =
        deliver(&mut p, tc, TomsicMsg::Prepare { txn: 5, writes: vec![(key(0), "b".into())], dep: vc([0, 0]), ct: 1 });
    let TomsicMsg::Prepared { time: held, .. } = out.sends[0].1 else { panic!() };
    deliver(&mut p, tc, TomsicMsg::CommitSingle { txn: 6, writes: vec![(key(0), "c".into())], dep: vc([0, 0]), ct: 1 });
    let out = stabilise_round(&mut p, NOW + 1_000_000);
    let stable_n = held - 1;
    let mut sent_updates = None;
    for (to, m) in &out.sends {
        match m {
            TomsicMsg::Stable { vec, .. } => {
                assert_eq!(*to, Addr::Server(ServerId::new(0, 1)));
                assert_eq!(vec.get(0), stable_n);
            }
            TomsicMsg::Updates { updates, stable, .. } => {
                assert_eq!(*to, Addr::Server(ServerId::new(1, 0)));
                assert_eq!(*stable, stable_n);
                sent_updates = Some(updates.iter().map(|u| u.ct).collect::<Vec<_>>());
            }
            m => panic!("{m:?}"),
        }
    }
    assert_eq!(sent_updates, Some(vec![NOW + 10]), "the commit above stable_n waits for a later round");
}

#[test]
fn a_backlog_of_large_updates_is_replicated_in_messages_that_fit_a_frame() {
    // Three values of max_value_bytes committed in one round: one message each (one would not fit a
    // frame), in ct order, stable up to each message's last update and stable_n on the last.
    let config = ProtocolConfig { max_value_bytes: 1000, max_key_bytes: 100, ..Default::default() };
    let mut p = Av::server(ServerId::new(0, 0), topo(), &config);
    let big = "v".repeat(1000);
    for ct in [NOW + 10, NOW + 20, NOW + 30] {
        committed(&mut p, key(0), &big, [0, 0], ct);
    }
    let out = stabilise_round(&mut p, NOW + 1_000_000);
    let batches: Vec<(Vec<u64>, u64)> = out
        .sends
        .iter()
        .filter_map(|(_, m)| match m {
            TomsicMsg::Updates { updates, stable, .. } => Some((updates.iter().map(|u| u.ct).collect(), *stable)),
            _ => None,
        })
        .collect();
    assert_eq!(batches.len(), 3, "{batches:?}");
    assert_eq!(batches[0], (vec![NOW + 10], NOW + 10));
    assert_eq!(batches[1], (vec![NOW + 20], NOW + 20));
    assert_eq!(batches[2].0, vec![NOW + 30]);
    assert!(batches[2].1 >= NOW + 30);
    // The sibling applies them all, as it would one message.
    let mut sibling = Av::server(ServerId::new(1, 0), topo(), &config);
    for (_, m) in out.sends.iter().filter(|(_, m)| matches!(m, TomsicMsg::Updates { .. })) {
        deliver(&mut sibling, ServerId::new(0, 0), m.clone());
    }
    assert_eq!(sibling.vec.get(0), batches[2].1);
}

#[test]
fn the_stable_vector_is_the_minimum_over_the_datacenter() {
    // Alg. 3 lines 11–12.
    let mut p = server::<AvFlavour>(0, 0);
    stabilise_round(&mut p, NOW);
    assert_eq!(p.stable_vector(), &vc([0, 0]), "not every partition has reported yet");
    deliver(&mut p, ServerId::new(1, 0), TomsicMsg::Updates { updates: vec![], stable: 77, busy: false });
    deliver(&mut p, ServerId::new(0, 1), TomsicMsg::Stable { vec: vc([NOW - 5, 50]), stable: vc([0, 0]), busy: false });
    assert_eq!(p.stable_vector(), &vc([NOW - 5, 50]));
}

#[test]
fn garbage_collection_trails_the_smallest_stable_vector_by_the_retention_time() {
    // Module doc, "Version garbage collection": the horizon is the datacenter's smallest stable vector as
    // it stood gc_retain_ms ago; a read below it is refused, never answered from collected versions.
    let mut p = server::<AvFlavour>(0, 0);
    for (v, ct) in [("v1", 100), ("v2", 200), ("v3", 300)] {
        committed(&mut p, key(0), v, [0, 0], ct);
    }
    stabilise_round(&mut p, NOW);
    deliver(
        &mut p,
        ServerId::new(0, 1),
        TomsicMsg::Stable { vec: vc([1_000, 0]), stable: vc([1_000, 0]), busy: false },
    );
    let retain = ProtocolConfig::default().gc_retain_ms * 1_000_000;
    gc_round(&mut p, NOW);
    assert_eq!(p.versions(&key(0)).len(), 3, "nothing is older than the retention time yet");
    gc_round(&mut p, NOW + retain);
    assert_eq!(p.versions(&key(0)).len(), 1, "the newest version below the horizon stays");
    let out = deliver(&mut p, ServerId::new(0, 1), TomsicMsg::Read { txn: 1, keys: vec![key(0)], ss: vc([50, 0]) });
    assert!(matches!(&out.sends[0].1, TomsicMsg::ReadRefused { reason, .. } if reason.contains("garbage-collection")));
    let out = deliver(&mut p, ServerId::new(0, 1), TomsicMsg::Read { txn: 2, keys: vec![key(0)], ss: vc([1_000, 0]) });
    assert_eq!(read_reply(&out).0[0].value.as_deref(), Some("v3"));
}

#[test]
fn oversized_values_are_rejected_with_the_limit_named() {
    let mut tc = server::<CvFlavour>(0, 0);
    let big: Value = "x".repeat(ProtocolConfig::default().max_value_bytes + 1).into();
    let mut rng = SmallRng::seed_from_u64(1);
    let mut out = Effects::default();
    let msg = begin(1, Request::Put { key: key(0), value: big });
    let err = tc.on_message(&mut Ctx::new(NOW, &mut rng, &mut out), CLIENT.into(), msg).unwrap_err();
    assert!(err.kind == InvalidKind::Limit && err.detail.contains("max_value_bytes"), "{err}");
    assert!(out.sends.is_empty());
    assert_eq!(tc.stored_versions(), 0);
}

/// Feeds one input to a client and returns what it completed.
fn client_step<F: Flavour>(
    c: &mut TomsicClient<F>,
    f: impl FnOnce(&mut TomsicClient<F>, &mut Cx<'_, F>),
) -> Vec<(OpId, Result<Reply, OpError>)> {
    let mut rng = SmallRng::seed_from_u64(1);
    let mut out = Effects::default();
    f(c, &mut Ctx::new(NOW, &mut rng, &mut out));
    std::mem::take(&mut out.completions)
}

fn client_done<F: Flavour>(
    c: &mut TomsicClient<F>,
    op: u64,
    reply: Reply,
    ss: [u64; 2],
    stable: [u64; 2],
) -> Vec<(OpId, Result<Reply, OpError>)> {
    let session = SessionUpdate { dep: vc(ss), ss: vc(ss), stable: vc(stable) };
    let msg = TomsicMsg::Done { op: OpId(op), result: Ok(reply), session };
    client_step(c, |c, cx| c.on_message(cx, ServerId::new(0, 0).into(), msg))
}

#[test]
fn av_client_reads_its_write_even_when_an_abandoned_operation_answers_late() {
    // The durability test's failure: after a timeout the session starts a read while an abandoned
    // operation is still under way; the abandoned one's late reply carries a stable vector covering the
    // session's cached write, but the read was snapshotted before it and misses that write.
    let mut c = Tomsic::<AvFlavour>::client(CLIENT, 0, topo(), &ProtocolConfig::default());
    let (k, old, mine) = (key(0), Value::from("old"), Value::from("mine"));
    client_step(&mut c, |c, cx| c.on_request(cx, OpId(1), Request::Put { key: k.clone(), value: mine.clone() }));
    let commit = Version { time: 10, dc: 0 };
    let put = Reply { reads: Vec::new(), commit: Some(commit), metrics: OpMetrics::default(), writes: Vec::new() };
    client_done(&mut c, 1, put, [5, 5], [5, 5]);
    assert_eq!(c.cached_writes(), 1);
    // Operation 2 is abandoned by the application; operation 3 reads the key.
    client_step(&mut c, |c, cx| c.on_request(cx, OpId(2), Request::Rot { keys: vec![key(1)] }));
    client_step(&mut c, |c, cx| c.on_request(cx, OpId(3), Request::Rot { keys: vec![k.clone()] }));
    let empty = Reply { reads: Vec::new(), commit: None, metrics: OpMetrics::default(), writes: Vec::new() };
    client_done(&mut c, 2, empty, [20, 20], [20, 20]);
    // Operation 3's snapshot [5, 5] excludes the write: the server returns the older version.
    let stale =
        ReadResult { key: k.clone(), value: Some(old), version: Version { time: 3, dc: 1 }, versions_skipped: 0 };
    let read = Reply { reads: vec![stale], commit: None, metrics: OpMetrics::default(), writes: Vec::new() };
    let completed = client_done(&mut c, 3, read, [5, 5], [5, 5]);
    match &completed[..] {
        [(OpId(3), Ok(reply))] => {
            assert_eq!(reply.reads[0].value.as_ref(), Some(&mine), "read your writes");
            assert_eq!(reply.reads[0].version, commit);
        }
        other => panic!("{other:?}"),
    }
    // The next operation's snapshot includes the write: the cache lets it go.
    client_step(&mut c, |c, cx| c.on_request(cx, OpId(4), Request::Rot { keys: vec![k.clone()] }));
    assert_eq!(c.cached_writes(), 0);
}

#[test]
fn av_client_keeps_its_newest_write_when_an_older_one_is_acknowledged_late() {
    let mut c = Tomsic::<AvFlavour>::client(CLIENT, 0, topo(), &ProtocolConfig::default());
    let k = key(0);
    let put = |v: &str| Request::Put { key: k.clone(), value: v.into() };
    let committed = |time| Reply {
        reads: Vec::new(),
        commit: Some(Version { time, dc: 0 }),
        metrics: OpMetrics::default(),
        writes: Vec::new(),
    };
    client_step(&mut c, |c, cx| c.on_request(cx, OpId(1), put("older")));
    client_step(&mut c, |c, cx| c.on_request(cx, OpId(2), put("newer")));
    client_done(&mut c, 2, committed(20), [5, 5], [5, 5]);
    client_done(&mut c, 1, committed(10), [5, 5], [5, 5]);
    client_step(&mut c, |c, cx| c.on_request(cx, OpId(3), Request::Rot { keys: vec![k.clone()] }));
    let stale = ReadResult { key: k.clone(), value: None, version: Version::INITIAL, versions_skipped: 0 };
    let read = Reply { reads: vec![stale], commit: None, metrics: OpMetrics::default(), writes: Vec::new() };
    let completed = client_done(&mut c, 3, read, [5, 5], [5, 5]);
    assert_eq!(completed[0].1.as_ref().unwrap().reads[0].value, Some(Value::from("newer")));
}

#[test]
fn an_idle_partition_backs_off_wakes_on_work_and_does_not_echo_a_peers_busy_report() {
    let mut p = server::<AvFlavour>(0, 0);
    let base = p.config.stabilisation_interval_ms * MS;
    let stable_busy = |out: &Effects<Tomsic<AvFlavour>>| {
        out.sends.iter().find_map(|(_, m)| if let TomsicMsg::Stable { busy, .. } = m { Some(*busy) } else { None })
    };
    let delay = |out: &Effects<Tomsic<AvFlavour>>| out.timers.iter().map(|(d, _)| *d).next().unwrap();
    // Quiet rounds: the period doubles up to the idle maximum, and each report says idle.
    let mut now = NOW;
    let mut delays = Vec::new();
    for _ in 0..12 {
        let out = stabilise_round(&mut p, now);
        assert_eq!(stable_busy(&out), Some(false));
        delays.push(delay(&out));
        now += delay(&out);
    }
    assert_eq!(delays[..3], [2 * base, 4 * base, 8 * base]);
    assert_eq!(*delays.last().unwrap(), p.config.idle_backoff_ms * MS, "capped");
    now -= delays.last().unwrap() - 1; // just after the last round
    let stale = p.stabilise_pacer.generation();
    // A client's request pulls the next round in to the base period; the far timer becomes stale.
    let out = deliver_at(&mut p, now, CLIENT, begin(1, Request::Rot { keys: vec![key(0)] }));
    let woken: Vec<&(u64, TomsicTimer)> =
        out.timers.iter().filter(|(_, t)| matches!(t, TomsicTimer::Stabilise(_))).collect();
    assert_eq!(woken.len(), 1);
    assert_eq!(woken[0].0, base);
    let late = now + p.config.idle_backoff_ms * MS;
    let out = fire(&mut p, late, TomsicTimer::Stabilise(stale));
    assert!(out.sends.is_empty() && out.timers.is_empty(), "a stale timer does nothing");
    let out = stabilise_round(&mut p, now + base);
    assert_eq!(stable_busy(&out), Some(true), "the round reports the work");
    assert_eq!(delay(&out), base);
    now += 2 * base;
    // A peer's busy report keeps this partition at the base period, but its own reports stay idle.
    for _ in 0..3 {
        deliver_at(
            &mut p,
            now,
            ServerId::new(0, 1),
            TomsicMsg::Stable { vec: vc([now, 0]), stable: vc([0, 0]), busy: true },
        );
        let out = stabilise_round(&mut p, now);
        assert_eq!(stable_busy(&out), Some(false), "no echo");
        assert_eq!(delay(&out), base);
        now += base;
    }
}
