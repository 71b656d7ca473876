//! `raft-kv` under the simulator's faults (issue 11): the leader killed at chosen protocol steps (as it sends
//! its first AppendEntries carrying a PUT, right after it sent it, a follower as it receives it), crash-stop of
//! a minority, and a leader isolated by a partition that drops messages. No acknowledged write is lost, a
//! retried PUT is applied once, and the group keeps serving.

use protobuf::Message as _;
use raft::eraftpb::{EntryType, Message as RaftMessage, MessageType};
use snowline_core::{Addr, ClientId, Key, OpError, OpId, Reply, Request, ServerId, Topology, Value};
use snowline_protocols::RaftKv;
use snowline_protocols::strong::raft_kv::KvMsg;
use snowline_sim::{Envelope, Sim, SimConfig};

const SECOND: u64 = 1_000_000_000;

fn sim(seed: u64, dcs: u16, partitions: u16, replicas: u16) -> Sim<RaftKv> {
    Sim::new(SimConfig::exact(seed, Topology::replicated(dcs, partitions, replicas), 100_000, 5_000_000))
}

fn run(sim: &mut Sim<RaftKv>, client: ClientId, op: &mut u64, request: Request) -> Result<Reply, OpError> {
    *op += 1;
    sim.execute(client, OpId(*op), request, 30 * SECOND).expect("the operation completes in time")
}

fn put(sim: &mut Sim<RaftKv>, client: ClientId, op: &mut u64, key: &Key, value: &str) -> Reply {
    run(sim, client, op, Request::Put { key: key.clone(), value: value.into() }).expect("put succeeds")
}

fn get(sim: &mut Sim<RaftKv>, client: ClientId, op: &mut u64, key: &Key) -> Option<Value> {
    let reply = run(sim, client, op, Request::Rot { keys: vec![key.clone()] }).expect("get succeeds");
    reply.reads[0].value.clone()
}

/// Whether `e` is an AppendEntries carrying a client command (not the empty entry of a new term).
fn appends_a_put(e: &Envelope<KvMsg>) -> bool {
    let KvMsg::Raft(wire) = &e.msg else { return false };
    let Ok(m) = RaftMessage::parse_from_bytes(&wire.bytes) else { return false };
    m.get_msg_type() == MessageType::MsgAppend
        && m.get_entries().iter().any(|en| en.get_entry_type() == EntryType::EntryNormal && !en.get_data().is_empty())
}

/// Faults drop messages; validation refuses none of what the correct members and clients send.
fn nothing_refused(sim: &Sim<RaftKv>) {
    assert_eq!(sim.invalid_inputs(), 0, "refused: {:?}", sim.invalid_examples());
}

/// The value every member that is up has applied for `key`, once they agree (and nothing was refused).
fn applied_everywhere(sim: &mut Sim<RaftKv>, partition: u16, key: &Key) -> Vec<Option<String>> {
    sim.advance(3 * SECOND);
    nothing_refused(sim);
    let members: Vec<ServerId> = sim.topology().group(partition).filter(|s| !sim.is_down(*s)).collect();
    members.iter().map(|s| sim.server(*s).value(key).map(|v| v.to_string())).collect()
}

#[test]
fn the_leader_killed_as_it_sends_its_first_append_for_a_put_loses_no_acknowledged_write() {
    for seed in 1..=5 {
        let mut sim = sim(seed, 3, 1, 3);
        let c = sim.add_client(0);
        let mut op = 0;
        let k: Key = "x".into();
        put(&mut sim, c, &mut op, &k, "before");
        let old = sim.leader_of(0).expect("a leader");
        let hook = sim.crash_on_send(move |e| e.from == Addr::Server(old) && appends_a_put(e));
        let reply = put(&mut sim, c, &mut op, &k, "after");
        assert!(reply.commit.is_some());
        assert_eq!(sim.hook_fired(hook).map(|h| h.0), Some(old), "seed {seed}: the leader was killed");
        assert!(sim.is_down(old));
        let new = sim.leader_of(0).expect("a new leader");
        assert_ne!(new, old, "seed {seed}");
        assert_eq!(get(&mut sim, c, &mut op, &k).as_deref(), Some("after"), "seed {seed}");
        assert_eq!(applied_everywhere(&mut sim, 0, &k), vec![Some("after".to_string()); 2], "seed {seed}");
        // The group keeps serving with two of three members.
        put(&mut sim, c, &mut op, &k, "later");
        assert_eq!(get(&mut sim, c, &mut op, &k).as_deref(), Some("later"));
    }
}

#[test]
fn the_leader_killed_right_after_replicating_a_put_has_it_applied_exactly_once() {
    for seed in 1..=5 {
        let mut sim = sim(seed, 3, 1, 3);
        let c = sim.add_client(1);
        let mut op = 0;
        let k: Key = "x".into();
        put(&mut sim, c, &mut op, &k, "before");
        let old = sim.leader_of(0).expect("a leader");
        let applied_before = sim.server(old).group().applied();
        // The append leaves for one follower, then the leader dies: the entry may survive in the new leader's
        // log, and the client's retry of the same PUT must not apply it a second time.
        let hook = sim.crash_after_send(move |e| e.from == Addr::Server(old) && appends_a_put(e));
        let reply = put(&mut sim, c, &mut op, &k, "after");
        assert_eq!(sim.hook_fired(hook).map(|h| h.0), Some(old), "seed {seed}");
        let version = reply.commit.expect("a version").time;
        assert!(version > applied_before, "seed {seed}: written after the first put");
        assert_eq!(get(&mut sim, c, &mut op, &k).as_deref(), Some("after"), "seed {seed}");
        // Another write: if the retry had been applied twice the value would be overwritten by "after" again.
        put(&mut sim, c, &mut op, &k, "later");
        assert_eq!(applied_everywhere(&mut sim, 0, &k), vec![Some("later".to_string()); 2], "seed {seed}");
    }
}

#[test]
fn a_follower_killed_as_it_receives_a_put_does_not_stop_the_group() {
    let mut sim = sim(2, 3, 2, 3);
    let c = sim.add_client(2);
    let mut op = 0;
    let k: Key = sim.topology().key_on(1, "k").into();
    put(&mut sim, c, &mut op, &k, "a");
    let leader = sim.leader_of(1).expect("leader");
    let hook = sim.crash_on_deliver(move |e| e.from == Addr::Server(leader) && appends_a_put(e));
    put(&mut sim, c, &mut op, &k, "b");
    let (victim, _) = sim.hook_fired(hook).expect("fired");
    assert_ne!(victim, leader);
    assert!(sim.is_down(victim));
    assert_eq!(sim.leader_of(1), Some(leader), "losing a follower costs no election");
    assert_eq!(get(&mut sim, c, &mut op, &k).as_deref(), Some("b"));
    nothing_refused(&sim);
}

#[test]
fn an_isolated_leader_is_replaced_and_serves_again_after_the_partition_heals() {
    let mut sim = sim(4, 3, 1, 3);
    let c = sim.add_client(0);
    let mut op = 0;
    let k: Key = "x".into();
    put(&mut sim, c, &mut op, &k, "a");
    let old = sim.leader_of(0).expect("leader");
    let now = sim.now_ns();
    sim.isolate(old, now, now + 5 * SECOND);
    put(&mut sim, c, &mut op, &k, "b");
    let new = sim.leader_of(0).expect("leader");
    assert_ne!(new, old);
    assert!(sim.messages_dropped() > 0, "raft tolerates loss: the partition drops messages");
    sim.run_until(now + 8 * SECOND);
    assert!(!sim.server(old).group().is_leader(), "the old leader stepped down once it heard the new term");
    assert_eq!(applied_everywhere(&mut sim, 0, &k), vec![Some("b".to_string()); 3], "it caught up");
}

#[test]
fn crash_stop_of_a_minority_of_every_group_keeps_every_group_serving() {
    let mut sim = sim(6, 3, 2, 3);
    let c = sim.add_client(0);
    let mut op = 0;
    sim.advance(SECOND);
    for p in 0..2 {
        let leader = sim.leader_of(p).expect("leader");
        sim.crash(leader);
    }
    for p in 0..2 {
        let k: Key = sim.topology().key_on(p, "k").into();
        put(&mut sim, c, &mut op, &k, "v");
        assert_eq!(get(&mut sim, c, &mut op, &k).as_deref(), Some("v"));
    }
    nothing_refused(&sim);
}
