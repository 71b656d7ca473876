//! Genuine atomic multicast (Skeen over Raft groups, `components::multicast`) checked by the multicast
//! checker on the delivery logs of simulated runs: randomized seeds, each with a swarm of faults drawn
//! from it (the leader of a group crashing at the moment it sends its first timestamp proposal, a
//! minority member crashing, a member cut off and healed, messages lost), and a deliberately broken
//! variant that the checker must catch.
//!
//! A crash here is crash-stop modelled as the loss of every message to and from the server from the moment
//! it crashes (the leader: right after its first proposal leaves), not `Sim::crash`, on purpose: a server
//! the simulator crashes loses its state, and with it the log of what it delivered before it died, which
//! uniform agreement is about (what a faulty member delivered, every correct member must deliver). Cut
//! off instead, the member is as dead to the protocol and its log stays readable for the checker.
//! (`crates/harness/tests/swarm_faults.rs` runs amcast-kv under the simulator's own crashes.)
//!
//! `SNOWLINE_LONG_TESTS=1` runs 200 seeds per configuration instead of 20.

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use snowline_checker::multicast::{McastHistory, MemberLog, Multicast, Violation, check};
use snowline_core::{Addr, ClientId, OpId, ProtocolConfig, Request, ServerId, Topology};
use snowline_protocols::AmcastKv;
use snowline_protocols::amcast_kv::AmMsg;
use snowline_protocols::components::{McastRecord, McastWire};
use snowline_sim::{Envelope, Sim, SimConfig};
use std::cell::Cell;
use std::collections::BTreeSet;
use std::rc::Rc;

const MS: u64 = 1_000_000;
const SECOND: u64 = 1_000 * MS;
/// Clients stop submitting here …
const STOP: u64 = 8 * SECOND;
/// … and the run ends here, every fault healed long before: time to deliver everything.
const END: u64 = 40 * SECOND;

fn seeds() -> u64 {
    if std::env::var("SNOWLINE_LONG_TESTS").is_ok_and(|v| v == "1") { 200 } else { 20 }
}

#[derive(Clone, Copy, Debug)]
struct Shape {
    dcs: u16,
    groups: u16,
    replicas: u16,
    inter_dc_ns: u64,
}

const LAN: Shape = Shape { dcs: 1, groups: 3, replicas: 3, inter_dc_ns: MS };
const WAN: Shape = Shape { dcs: 3, groups: 4, replicas: 3, inter_dc_ns: 20 * MS };

/// Which faults a seed drew, for failure messages.
#[derive(Debug, Default)]
struct Drawn {
    leader_crash: Option<u16>,
    minority_crash: Option<ServerId>,
    isolated: Option<(ServerId, u64, u64)>,
    drops: Option<(u64, u64)>,
}

struct Run {
    history: McastHistory,
    drawn: Drawn,
    completed: usize,
    sim: Sim<AmcastKv>,
}

fn is_server(a: Addr) -> bool {
    matches!(a, Addr::Server(_))
}

fn touches(e: &Envelope<AmMsg>, s: ServerId) -> bool {
    e.from == Addr::Server(s) || e.to == Addr::Server(s)
}

fn run(seed: u64, shape: Shape, faults: bool, broken: bool) -> Run {
    let topology = Topology::replicated(shape.dcs, shape.groups, shape.replicas);
    let mut config = SimConfig::exact(seed, topology, 100_000, shape.inter_dc_ns);
    config.protocol = ProtocolConfig { record_components: true, multicast_skip_final: broken, ..Default::default() };
    let mut sim: Sim<AmcastKv> = Sim::new(config);
    let mut rng = SmallRng::seed_from_u64(seed ^ 0x5eed_fa17);
    let mut drawn = Drawn::default();
    let crashed: Rc<Cell<Option<ServerId>>> = Rc::new(Cell::new(None));
    if faults {
        // Swarm testing: each kind of fault is on or off per seed.
        let kinds: u8 = rng.random_range(1..16);
        if kinds & 1 != 0 {
            // The leader of group g crashes when it sends its first proposal after `at`: mid-protocol,
            // with its Start committed and its proposal reaching one member at most.
            let g = rng.random_range(0..shape.groups);
            let at = rng.random_range(500 * MS..6 * SECOND);
            drawn.leader_crash = Some(g);
            let crashed = crashed.clone();
            sim.drop_matching(move |e| {
                if let Some(c) = crashed.get() {
                    return touches(e, c);
                }
                match (e.from, &e.msg) {
                    (Addr::Server(s), AmMsg::Mcast(McastWire::Proposal { .. }))
                        if s.partition == g && e.sent_at_ns >= at =>
                    {
                        crashed.set(Some(s));
                        false // this one proposal gets through
                    }
                    _ => false,
                }
            });
        }
        if kinds & 2 != 0 {
            // A member of another group crashes for good (a minority: one of three).
            let g = (drawn.leader_crash.map_or(0, |l| l + 1) + rng.random_range(0..shape.groups - 1)) % shape.groups;
            let s = topology.member(g, rng.random_range(0..shape.replicas));
            let at = rng.random_range(0..6 * SECOND);
            drawn.minority_crash = Some(s);
            sim.drop_matching(move |e| touches(e, s) && e.sent_at_ns >= at);
        }
        if kinds & 4 != 0 {
            // A member cut off from everyone, then healed.
            let s = topology.member(rng.random_range(0..shape.groups), rng.random_range(0..shape.replicas));
            let from = rng.random_range(0..6 * SECOND);
            let until = from + rng.random_range(300 * MS..4 * SECOND);
            drawn.isolated = Some((s, from, until));
            sim.drop_matching(move |e| touches(e, s) && (from..until).contains(&e.sent_at_ns));
        }
        if kinds & 8 != 0 {
            // One message in ten between servers lost for a while (chosen by a hash: reproducible).
            let from = rng.random_range(0..5 * SECOND);
            let until = from + rng.random_range(SECOND..4 * SECOND);
            drawn.drops = Some((from, until));
            sim.drop_matching(move |e| {
                use std::hash::{Hash, Hasher};
                let mut h = std::collections::hash_map::DefaultHasher::new(); // fixed keys: reproducible
                (e.from, e.to, e.sent_at_ns).hash(&mut h);
                is_server(e.from)
                    && is_server(e.to)
                    && (from..until).contains(&e.sent_at_ns)
                    && h.finish().is_multiple_of(10)
            });
        }
    }

    let clients: Vec<ClientId> = (0..2 * shape.dcs).map(|i| sim.add_client(i % shape.dcs)).collect();
    let mut op = 0u64;
    let mut value = 0u64;
    let mut next = |sim: &mut Sim<AmcastKv>, rng: &mut SmallRng, c: ClientId| {
        op += 1;
        let k = rng.random_range(1..=shape.groups.min(3));
        let mut groups = BTreeSet::new();
        while groups.len() < usize::from(k) {
            groups.insert(rng.random_range(0..shape.groups));
        }
        let keys: Vec<String> =
            groups.iter().map(|g| topology.key_on(*g, &format!("k{}", rng.random_range(0..4)))).collect();
        let request = if rng.random_bool(0.5) {
            Request::Update {
                writes: keys
                    .into_iter()
                    .map(|k| {
                        value += 1;
                        (k.into(), format!("v{value}").into())
                    })
                    .collect(),
            }
        } else {
            Request::Rot { keys: keys.into_iter().map(Into::into).collect() }
        };
        sim.submit(c, OpId(op), request);
    };
    for c in &clients {
        next(&mut sim, &mut rng, *c);
    }
    let mut completed = 0;
    while let Some(done) = sim.step_until(END) {
        completed += 1;
        assert!(done.result.is_ok(), "seed {seed}: {:?}", done.result);
        if sim.now_ns() < STOP {
            next(&mut sim, &mut rng, done.client);
        }
    }

    let mut messages = Vec::new();
    for c in &clients {
        for (id, dest) in sim.client(*c).origin().sent() {
            messages.push(Multicast { id: id.to_string(), dest: dest.iter().copied().collect(), must_deliver: true });
        }
    }
    let down: Vec<ServerId> = [crashed.get(), drawn.minority_crash].into_iter().flatten().collect();
    let members = topology
        .servers()
        .map(|s| {
            let mut log = MemberLog {
                name: s.to_string(),
                group: s.partition,
                correct: !down.contains(&s),
                ..Default::default()
            };
            for r in sim.server(s).member().log() {
                match r {
                    McastRecord::Step { id } => log.steps.push(id.to_string()),
                    McastRecord::Deliver { id, .. } => log.deliveries.push(id.to_string()),
                }
            }
            log
        })
        .collect();
    Run { history: McastHistory { messages, members }, drawn, completed, sim }
}

fn check_seeds(shape: Shape) {
    let mut failures = Vec::new();
    let mut crashed_leaders = 0;
    for seed in 1..=seeds() {
        let r = run(seed, shape, true, false);
        assert!(r.completed > 0, "seed {seed}: nothing completed ({:?}; {:?})", r.drawn, check(&r.history));
        // Crashes, cuts and loss drop messages; validation refuses none of what correct members send.
        assert_eq!(r.sim.invalid_inputs(), 0, "seed {seed} {:?}: refused {:?}", r.drawn, r.sim.invalid_examples());
        if r.drawn.leader_crash.is_some() {
            crashed_leaders += 1;
        }
        let v = check(&r.history);
        if !v.is_empty() {
            failures.push(format!(
                "seed {seed} {:?}: {}",
                r.drawn,
                v.iter().map(Violation::to_string).collect::<Vec<_>>().join("; ")
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(crashed_leaders > 0, "some seeds crash a leader");
}

#[test]
fn every_property_holds_under_crashes_partitions_and_loss_on_a_lan() {
    check_seeds(LAN);
}

#[test]
fn every_property_holds_under_crashes_partitions_and_loss_on_a_wan() {
    check_seeds(WAN);
}

#[test]
fn a_multicast_to_one_group_takes_one_consensus_round_and_several_groups_two() {
    // One client, no contention, exact latencies: δ = 20 ms between datacenters, the leaders elsewhere.
    let topology = Topology::replicated(3, 3, 3);
    let mut sim: Sim<AmcastKv> = Sim::new(SimConfig::exact(1, topology, 0, 20 * MS));
    let c = sim.add_client(0);
    sim.advance(2 * SECOND); // member 0 of each group leads
    let key = |g: u16| topology.key_on(g, "x");
    let latency = |sim: &mut Sim<AmcastKv>, op: u64, keys: Vec<String>| {
        let start = sim.now_ns();
        let writes = keys.into_iter().map(|k| (k.into(), "v".into())).collect();
        sim.execute(c, OpId(op), Request::Update { writes }, 10 * SECOND).expect("completes").expect("ok");
        sim.now_ns() - start
    };
    // Group 1's leader (member 0) is in dc 1, its followers in dcs 2 and 0: submit δ, append δ, ack δ,
    // answer δ.
    assert_eq!(latency(&mut sim, 1, vec![key(1)]), 4 * 20 * MS);
    // Groups 1 and 2: submit, Start (2δ), proposals, Final (2δ), answer.
    assert_eq!(latency(&mut sim, 2, vec![key(1), key(2)]), 7 * 20 * MS);
    assert_eq!(sim.invalid_inputs(), 0, "refused: {:?}", sim.invalid_examples());
}

#[test]
fn skipping_the_final_timestamp_is_caught() {
    let mut caught = 0;
    for seed in 1..=seeds() {
        let r = run(seed, WAN, false, true);
        let v = check(&r.history);
        if v.iter().any(|v| matches!(v, Violation::Order(_))) {
            caught += 1;
        }
    }
    assert!(caught * 2 > seeds(), "the broken variant's cycles were caught in only {caught} of {} seeds", seeds());
}

#[test]
fn a_run_is_reproducible_from_its_seed() {
    let a = run(3, WAN, true, false);
    let b = run(3, WAN, true, false);
    assert_eq!(a.history, b.history);
    assert_eq!(a.sim.messages_sent(), b.sim.messages_sent());
}
