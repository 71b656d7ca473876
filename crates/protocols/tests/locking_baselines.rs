//! The RAMP paper's locking baselines (`lwsr`: long write locks, short read locks; `lwnr`: long write locks,
//! no read locks) on 2PL's two-phase commit: a read racing a prepared write (lwsr waits for the decision, lwnr
//! returns the committed value at once), short locks that are gone once the read is answered, a lost update
//! neither prevents; then seeded simulator runs with faults whose histories must pass their claim, `rc`, and
//! contended runs where the checker must find what a stronger level forbids (`ra`: fractured or
//! non-repeatable reads; `ser`: lost updates).
//!
//! `SNOWLINE_LOCKING_SEEDS=N` runs N seeds with faults (default 12).

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use snowline_checker::{Level, Verdict};
use snowline_core::history::{EventType, HistoryEvent, OpKind};
use snowline_core::{Addr, Message, OpId, Protocol, ProtocolConfig, Request, ServerId, Topology};
use snowline_harness::{MixedWorkload, RunSpec, YcsbMix, drive_sim};
use snowline_protocols::{Lwnr, Lwsr, TwoPl};
use snowline_sim::{Sim, SimConfig};

use crate::common;

use common::{SECOND, keys, ok, run, update, values};

const MS: u64 = 1_000_000;

/// x (partition 0) and y (partition 1) written as x1, y1; then a second write of both whose decision to
/// partition 1 is held, so y2 is prepared there, not applied. Returns the simulator and a fresh reader.
fn prepared_write_of_y<P: Protocol>() -> (Sim<P>, snowline_core::ClientId) {
    let mut sim = common::sim::<P>(1, 2);
    let (x, y) = keys(&sim);
    let (writer, reader) = (sim.add_client(0), sim.add_client(0));
    let mut o = 0;
    ok(&mut sim, writer, &mut o, update(&[(&x, "x1"), (&y, "y1")]));
    let p1 = Addr::Server(ServerId::new(0, 1));
    sim.hold(move |e| e.to == p1 && e.msg.kind() == "decide");
    sim.submit(writer, OpId(100), update(&[(&x, "x2"), (&y, "y2")]));
    sim.advance(50 * MS);
    assert_eq!(sim.held().len(), 1, "the decision to partition 1 is held");
    (sim, reader)
}

#[test]
fn an_lwnr_read_takes_no_lock_and_returns_the_committed_value_beside_a_prepared_write() {
    let (mut sim, reader) = prepared_write_of_y::<Lwnr>();
    let (x, y) = keys(&sim);
    let mut o = 0;
    // Fractured: x2 is applied at partition 0, y2 only prepared at partition 1.
    let read = ok(&mut sim, reader, &mut o, Request::Rot { keys: vec![x.clone(), y.clone()] });
    assert_eq!(values(&read), vec![Some("x2".into()), Some("y1".into())]);
    assert_eq!(read.metrics.blocked_ns, 0, "nothing waits");
    let p1 = ServerId::new(0, 1);
    assert_eq!(sim.server(p1).holders(&y).len(), 1, "only the writer's exclusive lock");
    assert_eq!(sim.server(p1).transactions(), 1, "the reader left nothing behind");
    sim.release(|_| true);
    sim.advance(50 * MS);
    let read = ok(&mut sim, reader, &mut o, Request::Rot { keys: vec![x, y] });
    assert_eq!(values(&read), vec![Some("x2".into()), Some("y2".into())]);
}

#[test]
fn an_lwsr_read_waits_for_the_prepared_write_and_holds_nothing_once_answered() {
    let (mut sim, reader) = prepared_write_of_y::<Lwsr>();
    let (_, y) = keys(&sim);
    sim.submit(reader, OpId(1), Request::Rot { keys: vec![y.clone()] });
    assert!(sim.advance(100 * MS).is_empty(), "the read waits behind the exclusive lock");
    let p1 = ServerId::new(0, 1);
    assert_eq!(sim.server(p1).waiters(&y).len(), 1);
    sim.release(|_| true);
    let done = sim.advance(50 * MS);
    let read = done.iter().find(|d| d.op == OpId(1)).expect("answered").result.clone().expect("read");
    assert_eq!(values(&read), vec![Some("y2".into())], "the decision was applied first");
    assert!(read.metrics.blocked_ns > 0);
    assert!(sim.server(p1).holders(&y).is_empty(), "the short read lock is released");
    assert_eq!(sim.server(p1).transactions(), 0, "and the reader forgotten");
}

/// Two read-modify-write transactions read x's same version; under 2PL the reads' shared locks make one of
/// them lose (wounded, or deadlocked), but with short or no read locks both commit: one update is lost.
#[test]
fn short_or_no_read_locks_let_two_read_modify_writes_both_commit() {
    fn lost_update<P: Protocol>() -> bool {
        let mut sim = common::sim::<P>(1, 2);
        let (x, _) = keys(&sim);
        let (setup, t1, t2) = (sim.add_client(0), sim.add_client(0), sim.add_client(0));
        let (mut s, mut o1, mut o2) = (0, 0, 0);
        ok(&mut sim, setup, &mut s, update(&[(&x, "0")]));
        ok(&mut sim, t1, &mut o1, Request::Begin);
        ok(&mut sim, t2, &mut o2, Request::Begin);
        let r1 = run(&mut sim, t1, &mut o1, Request::Read { keys: vec![x.clone()] });
        let r2 = run(&mut sim, t2, &mut o2, Request::Read { keys: vec![x.clone()] });
        let (Ok(r1), Ok(r2)) = (r1, r2) else { return false };
        assert_eq!(r1.reads[0].version, r2.reads[0].version);
        let c1 = run(&mut sim, t1, &mut o1, Request::Commit { writes: vec![(x.clone(), "1".into())] });
        let c2 = run(&mut sim, t2, &mut o2, Request::Commit { writes: vec![(x.clone(), "1".into())] });
        c1.is_ok() && c2.is_ok()
    }
    assert!(lost_update::<Lwnr>());
    assert!(lost_update::<Lwsr>());
    assert!(!lost_update::<TwoPl>(), "2PL's long read locks prevent it");
}

// ---- seeded runs ----

fn seeds() -> u64 {
    std::env::var("SNOWLINE_LOCKING_SEEDS").ok().and_then(|s| s.parse().ok()).unwrap_or(12)
}

/// One seed of interactive YCSB-T transactions (read rounds of one key each, then writes of keys read) on
/// `keys` keys: with `faults`, drawn delays, clock skew, an inter-datacenter partition and, on a third of
/// the seeds, a durable server that crashes and restarts from its log.
fn seed_run<P: Protocol>(seed: u64, faults: bool, keys: usize) -> (Vec<HistoryEvent>, String) {
    let mut rng = SmallRng::seed_from_u64(seed ^ 0x10c5);
    let dcs = if faults { rng.random_range(1..=2) } else { 1 };
    let partitions = rng.random_range(2..=4);
    let topology = Topology::new(dcs, partitions);
    let mut config = SimConfig::new(seed, topology, ProtocolConfig::default());
    let mut crash = None;
    if faults {
        config.network.jitter = rng.random_range(0.0..2.0);
        config.network.reorder = true; // applied only where the protocol's links allow it
        config.network.spike_probability = rng.random_range(0.0..0.05);
        config.network.spike_ns = rng.random_range(MS..20 * MS);
        config.network = config.network.with_uniform_inter_dc(rng.random_range(MS..30 * MS));
        config.clocks.max_skew_ns = rng.random_range(0..20 * MS);
        crash = (seed % 3 == 1).then(|| {
            let server = topology.servers().nth(rng.random_range(0..usize::from(dcs * partitions))).unwrap();
            (server, rng.random_range(20 * MS..200 * MS), rng.random_range(5 * MS..100 * MS))
        });
        if crash.is_some() {
            config.durable = true;
            config.op_timeout_ns = Some(400 * MS);
        }
    }
    let mut sim: Sim<P> = Sim::new(config);
    if dcs > 1 {
        let from = rng.random_range(20 * MS..150 * MS);
        sim.partition_dcs(0, 1, from, from + rng.random_range(5 * MS..100 * MS));
    }
    if let Some((server, at, down)) = crash {
        sim.schedule_crash(server, at, down);
    }
    let mix = [YcsbMix::A, YcsbMix::B, YcsbMix::C][rng.random_range(0..3)];
    let workload = MixedWorkload { keys, write_ratio: 0.5, value_bytes: 8, ..MixedWorkload::ycsb_t(mix) };
    let spec = RunSpec {
        clients_per_dc: rng.random_range(3..=6),
        client_dcs: None,
        duration_ns: 600 * MS,
        warmup_ns: 0,
        cooldown_ns: 0,
        workload: workload.clone(),
        record_history: true,
        seed,
        // Past the idle abort (5 s): a release lost to a crashed participant holds its locks until then.
        final_reads_after_ns: Some(8 * SECOND),
        retry: Default::default(),
    };
    let replay = format!("{} seed {seed}: {topology:?}, {workload:?}, crash {crash:?}", P::NAME);
    let report = drive_sim(&mut sim, &spec);
    assert_eq!(report.converged, Some(true), "{replay}: datacenters diverge on {:?}", report.divergent);
    assert_eq!(sim.invalid_inputs(), 0, "{replay}: messages refused: {:?}", sim.invalid_examples());
    (report.history.expect("recorded"), replay)
}

/// The verdict at `level`, reading each key's version order from the history (single-copy commit versions).
fn verdict(history: &[HistoryEvent], level: Level, replay: &str) -> Verdict {
    let validated = snowline_checker::validate(history).unwrap_or_else(|e| panic!("{replay}: {e}"));
    snowline_checker::check_with_versions(&validated, level)
}

fn passes_its_claim<P: Protocol>() {
    let claim = snowline_protocols::claimed_level(P::NAME).unwrap();
    assert_eq!(claim, "rc");
    assert!(snowline_protocols::lookup(P::NAME).unwrap().orders_versions);
    let mut committed = 0;
    for seed in 0..seeds() {
        let (history, replay) = seed_run::<P>(seed, true, 8);
        let v = verdict(&history, claim.parse().unwrap(), &replay);
        assert!(v.ok, "{replay}: {v}");
        committed +=
            history.iter().filter(|e| e.kind == EventType::Ok && e.value.iter().any(|o| o.0 == OpKind::Write)).count();
    }
    println!("{}: {committed} update transactions committed over {} seeds with faults", P::NAME, seeds());
    assert!(committed > 20 * seeds() as usize, "transactions keep committing under the faults");
}

#[test]
fn lwnr_is_read_committed_under_contention_delays_and_crashes() {
    passes_its_claim::<Lwnr>();
}

#[test]
fn lwsr_is_read_committed_under_contention_delays_and_crashes() {
    passes_its_claim::<Lwsr>();
}

/// On a few hot keys the checker finds what the stronger levels forbid: at `ra` fractured or non-repeatable
/// reads, at `ser` a cycle (lost updates), on some of a few seeds each.
fn fails_stronger_levels<P: Protocol>() {
    let (mut not_ra, mut not_ser) = (Vec::new(), Vec::new());
    for seed in 0..6 {
        let (history, replay) = seed_run::<P>(seed, false, 3);
        let ra = verdict(&history, Level::Ra, &replay);
        if !ra.ok {
            not_ra.push((seed, ra.kinds()));
        }
        if !verdict(&history, Level::Ser, &replay).ok {
            not_ser.push(seed);
        }
    }
    println!("{}: not ra on {not_ra:?}, not ser on seeds {not_ser:?} of 0..6", P::NAME);
    assert!(!not_ra.is_empty(), "{}: no seed of 6 showed a fractured or non-repeatable read", P::NAME);
    assert!(!not_ser.is_empty(), "{}: no seed of 6 was found not serializable", P::NAME);
}

#[test]
fn lwnr_is_neither_read_atomic_nor_serializable_on_hot_keys() {
    fails_stronger_levels::<Lwnr>();
}

#[test]
fn lwsr_is_neither_read_atomic_nor_serializable_on_hot_keys() {
    fails_stronger_levels::<Lwsr>();
}

/// The same contended runs under 2PL (long read locks) are serializable: the anomalies above are the read
/// locks' doing.
#[test]
fn the_same_hot_keys_under_2pl_are_serializable() {
    for seed in 0..3 {
        let (history, replay) = seed_run::<TwoPl>(seed, false, 3);
        let v = verdict(&history, Level::Ser, &replay);
        assert!(v.ok, "{replay}: {v}");
    }
}
