//! Two-phase commit over replica groups (`components::twopc`, protocol `tpc-kv`): message delays,
//! conflicts voted down, and strict serializability under crashes, partitions and loss.

use snowline_core::{OpError, OpId, Request, Topology};
use snowline_protocols::TpcKv;
use snowline_sim::{Sim, SimConfig};

const MS: u64 = 1_000_000;
const SECOND: u64 = 1_000 * MS;

#[test]
fn one_group_commits_in_one_round_and_several_in_two() {
    // One client, no contention, exact latencies: δ = 20 ms between datacenters, the leaders elsewhere.
    let topology = Topology::replicated(3, 3, 3);
    let mut sim: Sim<TpcKv> = Sim::new(SimConfig::exact(1, topology, 0, 20 * MS));
    let c = sim.add_client(0);
    sim.advance(2 * SECOND); // member 0 of each group leads
    let key = |g: u16| topology.key_on(g, "x");
    let latency = |sim: &mut Sim<TpcKv>, op: u64, keys: Vec<String>| {
        let start = sim.now_ns();
        let writes = keys.into_iter().map(|k| (k.into(), "v".into())).collect();
        sim.execute(c, OpId(op), Request::Update { writes }, 10 * SECOND).expect("completes").expect("ok");
        sim.now_ns() - start
    };
    // Begin δ, Prepare appended and acknowledged 2δ (decided with it: one participant), Outcome δ.
    assert_eq!(latency(&mut sim, 1, vec![key(1)]), 4 * 20 * MS);
    // Begin, Prepare round, Vote, Decide round, Outcome.
    assert_eq!(latency(&mut sim, 2, vec![key(1), key(2)]), 7 * 20 * MS);
    // With group 0, the coordinator is group 0, whose leader is in the client's datacenter (intra-datacenter
    // latency 0 here): its Begin and Outcome cost nothing, the others' votes still a Begin, a round and a
    // vote (4δ), then its Decide round.
    assert_eq!(latency(&mut sim, 3, vec![key(0), key(1), key(2)]), 6 * 20 * MS);
    assert_eq!(sim.invalid_inputs(), 0, "refused: {:?}", sim.invalid_examples());
}

#[test]
fn a_key_locked_by_a_prepared_transaction_makes_its_group_vote_no() {
    let topology = Topology::replicated(1, 2, 3);
    let mut sim: Sim<TpcKv> = Sim::new(SimConfig::exact(1, topology, 0, MS));
    let a = sim.add_client(0);
    let b = sim.add_client(0);
    sim.advance(2 * SECOND);
    let x = topology.key_on(0, "x");
    let y = topology.key_on(1, "y");
    let update =
        |keys: &[&String]| Request::Update { writes: keys.iter().map(|k| ((*k).clone().into(), "v".into())).collect() };
    // Both write x and y at once: whichever group prepares the other first votes it down.
    sim.submit(a, OpId(1), update(&[&x, &y]));
    sim.submit(b, OpId(2), update(&[&y, &x]));
    let mut results = Vec::new();
    while let Some(done) = sim.step_until(sim.now_ns() + 5 * SECOND) {
        results.push(done.result);
        if results.len() == 2 {
            break;
        }
    }
    assert_eq!(results.len(), 2);
    assert!(results.iter().any(Result::is_ok) || results.iter().all(|r| matches!(r, Err(OpError::Aborted(_)))));
    // Every lock is released once both are decided.
    sim.advance(3 * SECOND);
    for s in topology.servers() {
        assert_eq!(sim.server(s).locked(), 0, "{s} still holds locks");
        assert_eq!(sim.server(s).member().prepared(), 0, "{s} still holds prepared transactions");
    }
    assert_eq!(sim.invalid_inputs(), 0, "refused: {:?}", sim.invalid_examples());
}
