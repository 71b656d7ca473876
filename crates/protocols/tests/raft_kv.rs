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
