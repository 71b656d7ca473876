//! `raft-kv` in the simulator: replication to every member, failover when the leader is cut off, retries
//! that never apply a write twice, and byte-for-byte reproducible runs.

use snowline_core::{Addr, ClientId, Key, OpError, OpId, Reply, Request, ServerId, Topology, Value};
use snowline_protocols::RaftKv;
use snowline_sim::{Sim, SimConfig};

const SECOND: u64 = 1_000_000_000;

fn sim(seed: u64, dcs: u16, partitions: u16, replicas: u16) -> Sim<RaftKv> {
    Sim::new(SimConfig::exact(seed, Topology::replicated(dcs, partitions, replicas), 100_000, 5_000_000))
}

fn run(sim: &mut Sim<RaftKv>, client: ClientId, op: &mut u64, request: Request, within: u64) -> Result<Reply, OpError> {
    *op += 1;
    sim.execute(client, OpId(*op), request, within).expect("the operation completes in time")
}

fn put(sim: &mut Sim<RaftKv>, client: ClientId, op: &mut u64, key: &Key, value: &str) -> Reply {
    run(sim, client, op, Request::Put { key: key.clone(), value: value.into() }, 10 * SECOND).expect("put succeeds")
}

fn get(sim: &mut Sim<RaftKv>, client: ClientId, op: &mut u64, key: &Key) -> Option<Value> {
    let reply = run(sim, client, op, Request::Rot { keys: vec![key.clone()] }, 10 * SECOND).expect("get succeeds");
    reply.reads[0].value.clone()
}

fn leader(sim: &Sim<RaftKv>, partition: u16) -> Option<ServerId> {
    let t = sim.topology();
    let leaders: Vec<ServerId> = t.group(partition).filter(|s| sim.server(*s).group().is_leader()).collect();
    // Two members may both think they lead during a partition (different terms); take the newest term.
    leaders.into_iter().max_by_key(|s| sim.server(*s).group().term())
}

#[test]
fn a_put_is_applied_by_every_member_and_read_back_through_the_leader() {
    let mut sim = sim(1, 1, 2, 3);
    let c = sim.add_client(0);
    let mut op = 0;
    let k: Key = sim.topology().key_on(1, "k").into();
    let reply = put(&mut sim, c, &mut op, &k, "v1");
    assert!(reply.commit.expect("a version").time > 0, "the version is the log index");
    assert_eq!(get(&mut sim, c, &mut op, &k).as_deref(), Some("v1"));
    sim.advance(SECOND);
    for s in sim.topology().group(1) {
        assert_eq!(sim.server(s).value(&k).map(|v| &**v), Some("v1"), "{s} applied the put");
    }
    assert!(leader(&sim, 0).is_some() && leader(&sim, 1).is_some(), "both groups have a leader");
}

#[test]
fn a_cut_off_leader_is_replaced_and_no_acknowledged_write_is_lost() {
    for seed in 1..=5 {
        let mut sim = sim(seed, 3, 1, 3);
        let c = sim.add_client(0);
        let mut op = 0;
        let k: Key = "x".into();
        put(&mut sim, c, &mut op, &k, "before");
        let old = leader(&sim, 0).expect("a leader");
        // Cut the leader off from everyone (its members and clients): as good as crashed.
        sim.drop_matching(move |e| e.from == Addr::Server(old) || e.to == Addr::Server(old));
        let reply = put(&mut sim, c, &mut op, &k, "after");
        assert!(reply.commit.is_some());
        let new = leader(&sim, 0).expect("a new leader");
        assert_ne!(new, old, "seed {seed}: another member leads");
        assert!(sim.server(new).group().term() > sim.server(old).group().term() || new != old);
        assert_eq!(get(&mut sim, c, &mut op, &k).as_deref(), Some("after"), "seed {seed}");
    }
}

#[test]
fn a_retried_put_is_applied_once() {
    let mut sim = sim(7, 1, 1, 3);
    let c = sim.add_client(0);
    let mut op = 0;
    let k: Key = "x".into();
    put(&mut sim, c, &mut op, &k, "a");
    // Lose the first answer to the next put: the client resends it, and the members apply it once.
    let l = leader(&sim, 0).expect("leader");
    let dropper = sim.drop_matching(move |e| e.from == Addr::Server(l) && matches!(e.to, Addr::Client(_)));
    op += 1;
    sim.submit(c, OpId(op), Request::Put { key: k.clone(), value: "b".into() });
    sim.advance(SECOND);
    sim.stop_holding(dropper);
    let done = sim.run_until(sim.now_ns() + 10 * SECOND);
    let reply = done.iter().find(|d| d.op == OpId(op)).expect("completed").result.clone().expect("committed");
    let first = reply.commit.expect("version");
    let applied: Vec<u64> = sim.topology().group(0).map(|s| sim.server(s).group().applied()).collect();
    put(&mut sim, c, &mut op, &k, "c");
    let third = sim.server(l).group().applied();
    assert!(first.time < third, "the retry did not write again after the first application: {applied:?}");
    assert_eq!(get(&mut sim, c, &mut op, &k).as_deref(), Some("c"));
}

#[test]
fn multi_key_reads_are_refused() {
    let mut sim = sim(1, 1, 1, 3);
    let c = sim.add_client(0);
    let mut op = 0;
    let r = run(&mut sim, c, &mut op, Request::Rot { keys: vec!["a".into(), "b".into()] }, SECOND);
    let why = "raft-kv offers no read-only transactions over several keys";
    assert!(matches!(r, Err(OpError::Rejected(ref m)) if m == why), "{r:?}");
    assert!(!snowline_protocols::lookup("raft-kv").unwrap().offers.multi_key_rots, "the registry knows");
}

#[test]
fn the_same_seed_gives_the_same_run() {
    let trace = |seed| {
        let mut sim = sim(seed, 2, 2, 3);
        sim.set_trace(true);
        let c = sim.add_client(1);
        let mut op = 0;
        for i in 0..20 {
            if i == 10 {
                // Force an election: the seeded timeouts decide who wins and when.
                let old = leader(&sim, 0).expect("leader");
                sim.drop_matching(move |e| e.from == Addr::Server(old) || e.to == Addr::Server(old));
            }
            let k: Key = sim.topology().key_on(0, &format!("k{i}")).into();
            put(&mut sim, c, &mut op, &k, &format!("v{i}"));
            get(&mut sim, c, &mut op, &k);
        }
        sim.trace().join("\n")
    };
    assert!(trace(3) == trace(3), "the same seed gives the same trace");
    assert!(trace(3) != trace(4), "different seeds draw different election timeouts");
}

/// What a client is told (docs/OPERATIONS.md): a PUT refused (a full disk, a key of another group) at its
/// first attempt, or after members said they had done nothing, certainly had no effect: rejected. A PUT
/// refused after an earlier attempt went unanswered (the client resent it after `RETRY_NS`) or was proposed by
/// a member that then lost its leadership may have been applied: outcome unknown, never rejected.
#[test]
fn a_refused_retry_of_a_put_that_may_have_been_applied_is_outcome_unknown() {
    use rand::SeedableRng;
    use snowline_core::{ClientNode, Ctx, Effects, Protocol, ProtocolConfig};
    use snowline_protocols::raft_kv::{KvMsg, KvTimer, RETRY_NS};
    let topology = Topology::replicated(1, 1, 3);
    let mut rng = rand::rngs::SmallRng::seed_from_u64(1);
    let mut client = RaftKv::client(ClientId(0), 0, topology, &ProtocolConfig::default());
    let member = topology.group(0).next().expect("a member");
    let mut op = 0;
    // Submits a PUT; returns where its first attempt went.
    let mut put = |client: &mut <RaftKv as Protocol>::Client, op: &mut u64| {
        *op += 1;
        let mut fx = Effects::<RaftKv>::default();
        let request = Request::Put { key: "k".into(), value: format!("v{op}").into() };
        client.on_request(&mut Ctx::new(0, &mut rng, &mut fx), OpId(*op), request);
        assert!(matches!(fx.sends.as_slice(), [(_, KvMsg::Request { attempt: 1, .. })]), "{:?}", fx.sends);
        OpId(*op)
    };
    let mut rng2 = rand::rngs::SmallRng::seed_from_u64(2);
    let mut answer = |client: &mut <RaftKv as Protocol>::Client, msg: KvMsg| {
        let mut fx = Effects::<RaftKv>::default();
        client.on_message(&mut Ctx::new(0, &mut rng2, &mut fx), Addr::Server(member), msg);
        fx
    };
    let refused = |op, attempt| KvMsg::Refused { op, attempt, reason: "the disk is full".into() };
    let outcome = |fx: &Effects<RaftKv>| fx.completions.first().map(|(_, r)| r.clone()).expect("completed");

    // Refused at the first attempt: rejected.
    let o = put(&mut client, &mut op);
    assert!(matches!(outcome(&answer(&mut client, refused(o, 1))), Err(OpError::Rejected(_))));

    // Unanswered, resent after RETRY_NS, then refused: unknown.
    let o = put(&mut client, &mut op);
    let mut fx = Effects::<RaftKv>::default();
    let mut rng3 = rand::rngs::SmallRng::seed_from_u64(3);
    client.on_timer(&mut Ctx::new(RETRY_NS, &mut rng3, &mut fx), KvTimer::Retry { op: o, attempt: 1 });
    assert!(matches!(fx.sends.as_slice(), [(_, KvMsg::Request { attempt: 2, .. })]), "resent: {:?}", fx.sends);
    match outcome(&answer(&mut client, refused(o, 2))) {
        Err(OpError::Unknown(why)) => assert!(why.contains("may have been applied") && why.contains("full"), "{why}"),
        other => panic!("{other:?}"),
    }

    // Redirected by a member that did nothing, then refused: rejected.
    let o = put(&mut client, &mut op);
    let next = topology.next_member(member);
    let fx = answer(&mut client, KvMsg::Redirect { op: o, attempt: 1, hint: Some(next), proposed: false });
    assert!(matches!(fx.sends.as_slice(), [(to, KvMsg::Request { attempt: 2, .. })] if *to == Addr::Server(next)));
    assert!(matches!(outcome(&answer(&mut client, refused(o, 2))), Err(OpError::Rejected(_))));

    // Redirected by a member that had proposed it (and lost its leadership), then refused: unknown.
    let o = put(&mut client, &mut op);
    answer(&mut client, KvMsg::Redirect { op: o, attempt: 1, hint: Some(next), proposed: true });
    assert!(matches!(outcome(&answer(&mut client, refused(o, 2))), Err(OpError::Unknown(_))));
}
