//! Hostile input at the sans-IO boundary: every protocol's servers, fed forged and malformed messages from
//! any sender among well-behaved traffic, never panic, and refuse nothing a correct peer sends
//! (`snowline_protocols::fuzz`). The same target runs under cargo-fuzz (`fuzz/`, docs/FUZZING.md); here it
//! runs over the committed corpus and over proptest's random scripts.

use proptest::prelude::*;
use snowline_protocols::fuzz::{PROTOCOLS, server_inputs};
use std::path::PathBuf;

fn corpus_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/protocol_handlers")
}

/// Every committed corpus input, for every protocol: as the fuzz target reads it (its first byte picks the
/// protocol, the rest is the script; here every protocol runs the rest, so an input found for one protocol
/// replays exactly whatever the list's order) and whole.
#[test]
fn committed_corpus_runs_clean_for_every_protocol() {
    let mut files: Vec<PathBuf> =
        std::fs::read_dir(corpus_dir()).expect("fuzz/corpus/protocol_handlers").map(|e| e.unwrap().path()).collect();
    files.sort();
    assert!(files.len() >= 8, "the corpus has {} inputs", files.len());
    for f in &files {
        let data = std::fs::read(f).unwrap();
        for p in PROTOCOLS {
            server_inputs(p, data.get(1..).unwrap_or_default());
            server_inputs(p, &data);
        }
    }
}

/// A script that only submits requests, delivers and fires timers forges nothing: every message is
/// accepted (the fuzz driver asserts it) and the forged-message counter stays zero.
#[test]
fn well_formed_traffic_is_never_refused() {
    // shape 1x2 dcs x partitions; then (submit, client/key byte), deliveries, timers, clock steps.
    let mut script = vec![4u8];
    for i in 0..64u8 {
        script.extend([0, i.wrapping_mul(37)]);
        script.extend([3, 4, 5, 6, 7, 8, 9, 3, 3, 3]);
        script.extend([10, i, 12, 3, 3, 3, 3]);
    }
    for p in PROTOCOLS {
        let out = server_inputs(p, &script);
        assert_eq!((out.forged, out.refused), (0, 0), "{p}: {out:?}");
        assert!(out.completed >= 32 && out.delivered >= 64, "{p}: too little happened: {out:?}");
    }
}

/// Forged messages are refused, not applied silently: the driver counts refusals in a script full of them.
#[test]
fn forged_messages_are_refused() {
    // 64 rounds: how many forgeries decode depends on the traffic seen (amcast-kv's had 15 of 32 rounds, occ's
    // 16 of 48); every third round resends a real message, which always decodes.
    let mut script = vec![4u8];
    for i in 0..64u8 {
        script.extend([0, i.wrapping_mul(11), 3, 3, 3, 3, 3, 3]);
        // Forge: a server out of range (sender kind 1: dc 9, partition 9) resending a real message.
        script.extend([14, 1, 9, 9, 0, i, 1 | (i << 2)]);
    }
    for p in PROTOCOLS {
        let out = server_inputs(p, &script);
        assert!(out.forged >= 20 && out.refused >= out.forged, "{p}: {out:?}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_scripts_never_panic(data in proptest::collection::vec(any::<u8>(), 0..1024), p in 0..PROTOCOLS.len()) {
        server_inputs(PROTOCOLS[p], &data);
    }
}

mod in_the_simulator {
    //! The same property in the simulator (its network, clock and CPU models; durable hosts too): forged
    //! messages decoded from arbitrary bytes, injected from arbitrary senders among a client workload,
    //! never make a server panic, and the workload's operations still complete. A run without them has no
    //! refused message at all.

    use proptest::prelude::*;
    use snowline_core::{Addr, ClientId, Message, OpId, Protocol, ProtocolConfig, Request, ServerId, Topology};
    use snowline_protocols::{
        AmcastKv, Av, Contrarian, Cops, CopsDw, CopsSnow, Cure, Cv, EigerPs, Nmsi, Op, Psi, RaftKv, Rc, Ser, Si, TpcKv,
        TwoPl, Us,
    };
    use snowline_sim::{Sim, SimConfig};

    /// Runs 24 operations from two clients with `forgeries` injected among them; returns (completed,
    /// refused).
    fn run<P: Protocol>(seed: u64, durable: bool, forgeries: &[(u8, u8, Vec<u8>)]) -> (usize, u64) {
        let topology = Topology::new(2, 2);
        let mut config = SimConfig::new(seed, topology, ProtocolConfig::default());
        config.durable = durable;
        let mut sim = Sim::<P>::new(config);
        let clients = [sim.add_client(0), sim.add_client(1)];
        let mut forged = forgeries.iter();
        let mut completed = 0;
        for op in 0..12u64 {
            for (i, c) in clients.iter().enumerate() {
                let key = format!("k{}", (op + i as u64) % 5);
                let request = if op % 2 == 0 {
                    Request::Put { key: key.into(), value: format!("v{op}").into() }
                } else {
                    Request::Rot { keys: vec![key.into()] }
                };
                sim.submit(*c, OpId(op), request);
            }
            if let Some((sender, target, bytes)) = forged.next()
                && let Ok(msg) = postcard::from_bytes::<P::Msg>(bytes)
            {
                let to = topology.server_at(usize::from(*target) % topology.server_count()).unwrap();
                let from = match sender % 3 {
                    0 => Addr::Client(ClientId(u64::from(sender / 3) % 4)),
                    1 => Addr::Server(ServerId::new(u16::from(sender / 3) % 4, u16::from(*target) % 3)),
                    _ => Addr::Server(topology.server_at(usize::from(sender / 3) % topology.server_count()).unwrap()),
                };
                // raft-rs trusts its group's members (see `snowline_protocols::fuzz`).
                let member = matches!(from, Addr::Server(s) if topology.contains(s) && s.partition == to.partition);
                if !(msg.kind() == "raft" && member) {
                    sim.inject(from, to, msg);
                }
            }
            completed += sim.advance(2_000_000_000).len();
        }
        (completed, sim.invalid_inputs())
    }

    fn check<P: Protocol>(seed: u64, forgeries: &[(u8, u8, Vec<u8>)]) {
        for durable in [false, true] {
            let (completed, refused) = run::<P>(seed, durable, forgeries);
            assert_eq!(completed, 24, "{} (durable {durable}): operations lost", P::NAME);
            if forgeries.is_empty() {
                assert_eq!(refused, 0, "{}: a well-behaved run refused messages", P::NAME);
            }
        }
    }

    /// Faults and forgeries together: what an isolation drops is lost, not refused; messages forged during
    /// the isolation (one in the name of a server outside the topology) still reach their target and are
    /// refused; a forged message to a crashed server is lost like any input. The group serves after the heal.
    #[test]
    fn faults_drop_without_refusing_and_forgeries_are_refused_through_them() {
        use snowline_protocols::amcast_kv::{AmMsg, Part};
        use snowline_protocols::components::consensus::RaftWire;
        use snowline_protocols::components::{McastId, McastWire};
        const SECOND: u64 = 1_000_000_000;
        let topology = Topology::replicated(3, 1, 3);
        let mut sim = Sim::<AmcastKv>::new(SimConfig::new(5, topology, ProtocolConfig::default()));
        let c = sim.add_client(0);
        sim.advance(2 * SECOND);
        let leader = sim.leader_of(0).expect("a leader");
        let now = sim.now_ns();
        sim.isolate(leader, now, now + 3 * SECOND);
        sim.submit(c, OpId(1), Request::Put { key: "k".into(), value: "v".into() });
        sim.advance(SECOND);
        assert!(sim.messages_dropped() > 0, "the isolation drops messages");
        assert_eq!(sim.invalid_inputs(), 0, "dropped is not refused: {:?}", sim.invalid_examples());

        let id = McastId { origin: Addr::Client(ClientId(77)), seq: 1 };
        let nowhere = Addr::Server(ServerId::new(9, 0));
        sim.inject(nowhere, leader, AmMsg::Raft(RaftWire { partition: 0, bytes: vec![8, 3] }));
        sim.inject(nowhere, leader, AmMsg::Mcast(McastWire::Decided { id, ts: 3 }));
        sim.inject(Addr::Client(ClientId(77)), leader, AmMsg::Done { id, part: Part::default() });
        sim.advance(SECOND / 10);
        assert_eq!(sim.invalid_inputs(), 3, "{:?}", sim.invalid_examples());

        let follower = topology.group(0).find(|s| *s != leader).expect("a follower");
        sim.crash(follower);
        let dropped = sim.messages_dropped();
        sim.inject(nowhere, follower, AmMsg::Mcast(McastWire::Decided { id, ts: 3 }));
        sim.advance(SECOND / 10);
        assert_eq!(sim.invalid_inputs(), 3, "a crashed server refuses nothing: {:?}", sim.invalid_examples());
        assert!(sim.messages_dropped() > dropped, "the forged message to a crashed server is lost");

        let completed = sim.advance(20 * SECOND);
        assert!(completed.iter().any(|d| d.client == c && d.op == OpId(1) && d.result.is_ok()), "{completed:?}");
        assert_eq!(sim.invalid_inputs(), 3, "{:?}", sim.invalid_examples());
    }

    #[test]
    fn well_behaved_runs_refuse_nothing() {
        check::<Cops>(1, &[]);
        check::<CopsSnow>(1, &[]);
        check::<EigerPs>(1, &[]);
        check::<CopsDw>(1, &[]);
        check::<Contrarian>(1, &[]);
        check::<Cure>(1, &[]);
        check::<Av>(1, &[]);
        check::<Op>(1, &[]);
        check::<Cv>(1, &[]);
        check::<TwoPl>(1, &[]);
        check::<snowline_protocols::Occ>(1, &[]);
        check::<RaftKv>(1, &[]);
        check::<AmcastKv>(1, &[]);
        check::<TpcKv>(1, &[]);
        check::<Nmsi>(1, &[]);
        check::<Rc>(1, &[]);
        check::<Ser>(1, &[]);
        check::<Us>(1, &[]);
        check::<Si>(1, &[]);
        check::<Psi>(1, &[]);
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 8, ..ProptestConfig::default() })]

        #[test]
        fn forged_messages_in_a_simulated_run(
            seed in any::<u64>(),
            forgeries in proptest::collection::vec(
                (any::<u8>(), any::<u8>(), proptest::collection::vec(any::<u8>(), 0..48)), 0..12),
        ) {
            check::<Cops>(seed, &forgeries);
            check::<CopsSnow>(seed, &forgeries);
            check::<EigerPs>(seed, &forgeries);
            check::<CopsDw>(seed, &forgeries);
            check::<Contrarian>(seed, &forgeries);
            check::<Cure>(seed, &forgeries);
            check::<Av>(seed, &forgeries);
            check::<Op>(seed, &forgeries);
            check::<Cv>(seed, &forgeries);
            check::<TwoPl>(seed, &forgeries);
            check::<snowline_protocols::Occ>(seed, &forgeries);
            check::<RaftKv>(seed, &forgeries);
            check::<AmcastKv>(seed, &forgeries);
            check::<TpcKv>(seed, &forgeries);
            check::<Nmsi>(seed, &forgeries);
            check::<Rc>(seed, &forgeries);
            check::<Ser>(seed, &forgeries);
            check::<Us>(seed, &forgeries);
            check::<Si>(seed, &forgeries);
            check::<Psi>(seed, &forgeries);
        }
    }
}
