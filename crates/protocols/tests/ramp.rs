//! RAMP (`ramp-f`, `ramp-s`, `ramp-h`): the repair round on a held commit, garbage collection, and many
//! seeded simulator runs of concurrent multi-key writes and reads whose histories must pass the checker at
//! `ra` — with message loss, isolated servers and durable servers that crash and come back from their logs —
//! while the deliberately broken variant that skips the second round (`ramp_skip_second_round`) is caught
//! with fractured reads.
//!
//! `SNOWLINE_LONG_TESTS=1` runs 200 seeds per configuration instead of 12.

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use snowline_checker::{AnomalyKind, Level, Verdict};
use snowline_core::history::{EventType, OpKind};
use snowline_core::{Addr, Key, Message, OpId, Protocol, ProtocolConfig, Reply, Request, ServerId, Topology, Value};
use snowline_harness::{MixedWorkload, RunSpec, drive_sim};
use snowline_protocols::ramp::{Metadata, Ramp};
use snowline_protocols::{NoCc, RampF, RampH, RampS};
use snowline_sim::{Sim, SimConfig};

const MS: u64 = 1_000_000;
const SECOND: u64 = 1_000 * MS;

fn seeds() -> u64 {
    if std::env::var("SNOWLINE_LONG_TESTS").is_ok_and(|v| v == "1") { 200 } else { 12 }
}

fn sim<P: Protocol>(partitions: u16, config: ProtocolConfig) -> Sim<P> {
    let mut c = SimConfig::exact(1, Topology::new(1, partitions), 100_000, 10 * MS);
    c.protocol = config;
    Sim::new(c)
}

fn update(writes: &[(&Key, &str)]) -> Request {
    Request::Update { writes: writes.iter().map(|(k, v)| ((*k).clone(), Value::from(*v))).collect() }
}

fn values(reply: &Reply) -> Vec<Option<&str>> {
    reply.reads.iter().map(|r| r.value.as_deref()).collect()
}

/// A write of x (partition 0) and y (partition 1) whose commit to partition 1 is held: a read of both sees
/// the new x in its first round and the old y. Returns the read's reply, and the simulator.
fn read_during_a_held_commit<P: Protocol>(config: ProtocolConfig) -> (Reply, Sim<P>) {
    let mut sim = sim::<P>(2, config);
    let topo = sim.topology();
    let (x, y): (Key, Key) = (topo.key_on(0, "x").into(), topo.key_on(1, "y").into());
    let (writer, reader) = (sim.add_client(0), sim.add_client(0));
    sim.execute(writer, OpId(1), update(&[(&x, "x1"), (&y, "y1")]), SECOND).unwrap().unwrap();
    let p1 = Addr::Server(ServerId::new(0, 1));
    sim.hold(move |e| e.to == p1 && e.msg.kind() == "commit");
    sim.submit(writer, OpId(2), update(&[(&x, "x2"), (&y, "y2")]));
    sim.advance(50 * MS);
    assert_eq!(sim.held().len(), 1, "the commit to partition 1 is held");
    let reply = sim.execute(reader, OpId(3), Request::Rot { keys: vec![x, y] }, SECOND).unwrap().unwrap();
    (reply, sim)
}

#[test]
fn the_second_round_repairs_a_read_that_races_a_commit() {
    fn check<M: Metadata>() {
        let (reply, mut sim) = read_during_a_held_commit::<Ramp<M>>(ProtocolConfig::default());
        assert_eq!(
            values(&reply),
            [Some("x2"), Some("y2")],
            "{}: y2 is prepared, fetched by the second round",
            M::NAME
        );
        assert_eq!(reply.metrics.rounds, 2, "{}", M::NAME);
        assert_eq!(reply.reads[0].version, reply.reads[1].version, "{}: one transaction", M::NAME);
        // The write completes once its held commit is delivered.
        sim.release(|_| true);
        let done = sim.advance(50 * MS);
        assert!(done.iter().any(|c| c.op == OpId(2) && c.result.is_ok()), "{}: {done:?}", M::NAME);
        assert_eq!(sim.invalid_inputs(), 0, "{}: {:?}", M::NAME, sim.invalid_examples());
    }
    check::<snowline_protocols::ramp::WriteSets>();
    check::<snowline_protocols::ramp::TimestampsOnly>();
    check::<snowline_protocols::ramp::BloomFilters>();
}

#[test]
fn without_its_second_round_the_read_is_fractured() {
    let broken = ProtocolConfig { ramp_skip_second_round: true, ..ProtocolConfig::default() };
    let (reply, _) = read_during_a_held_commit::<RampF>(broken);
    assert_eq!(values(&reply), [Some("x2"), Some("y1")]);
    assert_eq!(reply.metrics.rounds, 1);
}

#[test]
fn rounds_and_metadata_are_reported() {
    fn costs<P: Protocol>() -> (Reply, Reply, Reply) {
        let mut sim = sim::<P>(2, ProtocolConfig::default());
        let topo = sim.topology();
        let (x, y): (Key, Key) = (topo.key_on(0, "x").into(), topo.key_on(1, "y").into());
        let c = sim.add_client(0);
        let w = sim.execute(c, OpId(1), update(&[(&x, "a"), (&y, "b")]), SECOND).unwrap().unwrap();
        let rot = sim.execute(c, OpId(2), Request::Rot { keys: vec![x.clone(), y] }, SECOND).unwrap().unwrap();
        let get = sim.execute(c, OpId(3), Request::Rot { keys: vec![x] }, SECOND).unwrap().unwrap();
        (w, rot, get)
    }
    let (fw, fr, fg) = costs::<RampF>();
    let (sw, sr, sg) = costs::<RampS>();
    let (hw, hr, hg) = costs::<RampH>();
    // Writes: prepare and commit.
    assert!([&fw, &sw, &hw].iter().all(|w| w.metrics.rounds == 2 && w.commit.is_some()));
    // Without a race, RAMP-F and RAMP-H read in one round, RAMP-S in two (one for a single key).
    assert_eq!((fr.metrics.rounds, sr.metrics.rounds, hr.metrics.rounds), (1, 2, 1));
    assert_eq!((fg.metrics.rounds, sg.metrics.rounds, hg.metrics.rounds), (1, 1, 1));
    assert!([&fr, &sr, &hr].iter().all(|r| values(r) == [Some("a"), Some("b")]));
    // Metadata: write sets grow with the keys, a filter is fixed (256 bits), timestamps only are smallest.
    assert!(sw.metrics.metadata_bytes < fw.metrics.metadata_bytes, "{sw:?} {fw:?}");
    assert!(fw.metrics.metadata_bytes < hw.metrics.metadata_bytes, "two short keys are less than 32 bytes");
    assert!(fr.metrics.metadata_bytes > 0 && sr.metrics.metadata_bytes > 0 && hr.metrics.metadata_bytes > 0);
}

#[test]
fn overwritten_versions_are_collected_after_the_delay_and_prepared_ones_never() {
    let config = ProtocolConfig { ramp_gc_delay_ms: 500, gc_interval_ms: 50, ..ProtocolConfig::default() };
    let mut sim = sim::<RampF>(2, config);
    let topo = sim.topology();
    let (x, y): (Key, Key) = (topo.key_on(0, "x").into(), topo.key_on(1, "y").into());
    let c = sim.add_client(0);
    for (i, v) in ["1", "2", "3"].iter().enumerate() {
        sim.execute(c, OpId(i as u64), update(&[(&x, v), (&y, v)]), SECOND).unwrap().unwrap();
    }
    // A fourth write prepared at partition 0 and never committed (its commits are dropped).
    sim.drop_matching(|e| e.msg.kind() == "commit");
    sim.submit(c, OpId(9), update(&[(&x, "4"), (&y, "4")]));
    let p0 = ServerId::new(0, 0);
    sim.advance(200 * MS);
    assert_eq!(sim.server(p0).versions(&x).len(), 4, "nothing collected before the delay");
    sim.advance(SECOND);
    let left = sim.server(p0).versions(&x);
    let last = sim.server(p0).last_commit(&x).expect("committed");
    assert_eq!(left.len(), 2, "the version at lastCommit and the prepared one stay: {left:?}");
    assert_eq!(left[0], last);
    assert!(left[1] > last, "the prepared version, newer than lastCommit, is never collected");
    assert_eq!(sim.server(p0).prepared(), 1);
    // A read still sees the last committed write, atomically.
    let reply = sim.execute(c, OpId(10), Request::Rot { keys: vec![x, y] }, SECOND).unwrap().unwrap();
    assert_eq!(values(&reply), [Some("3"), Some("3")]);
}

/// How a seed's run goes wrong on purpose.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Faults {
    None,
    /// Client–server messages lost, a server isolated for a while, and (durable servers) a crash with a
    /// restart from its log.
    Some,
}

/// One seeded run of `P`: a small key space (contention), many update transactions and multi-key reads, and
/// the faults asked; returns the verdict at `ra`, the acknowledged reads, and a replay line.
fn seed_run<P: Protocol>(seed: u64, faults: Faults, config: ProtocolConfig) -> (Verdict, usize, String) {
    seed_run_at::<P>(seed, faults, config, Level::Ra)
}

/// [`seed_run`], checked at `level`.
fn seed_run_at<P: Protocol>(
    seed: u64,
    faults: Faults,
    config: ProtocolConfig,
    level: Level,
) -> (Verdict, usize, String) {
    let mut rng = SmallRng::seed_from_u64(seed ^ 0x7a3b);
    let partitions = rng.random_range(2..=4);
    let topology = Topology::new(1, partitions);
    let mut c = SimConfig::new(seed, topology, config);
    c.network.jitter = rng.random_range(0.0..2.0);
    c.network.reorder = true;
    c.network.spike_probability = rng.random_range(0.0..0.05);
    c.network.spike_ns = rng.random_range(MS..20 * MS);
    c.clocks.max_skew_ns = rng.random_range(0..10 * MS);
    c.op_timeout_ns = Some(300 * MS);
    let durable = faults == Faults::Some && seed.is_multiple_of(2);
    c.durable = durable;
    // Under faults a client waits out its operation's timeout after a lost message: a longer run.
    let duration_ns = if faults == Faults::None { 600 * MS } else { 1_500 * MS };
    let mut replay = format!("{} seed {seed}: {partitions} partitions, {faults:?}", P::NAME);
    let mut sim: Sim<P> = Sim::new(c);
    if faults == Faults::Some {
        let from = rng.random_range(0..duration_ns / 2);
        sim.lose(0.05, from, from + rng.random_range(50 * MS..300 * MS));
        let s = ServerId::new(0, rng.random_range(0..partitions));
        let at = rng.random_range(0..duration_ns / 2);
        sim.isolate(s, at, at + rng.random_range(20 * MS..200 * MS));
        replay += &format!(", loss from {from} ns, {s} isolated at {at} ns");
        if durable {
            let s = ServerId::new(0, rng.random_range(0..partitions));
            let at = rng.random_range(0..duration_ns / 2);
            sim.schedule_crash(s, at, rng.random_range(10 * MS..200 * MS));
            replay += &format!(", durable, {s} crashes at {at} ns");
        }
    }
    let spec = RunSpec {
        clients_per_dc: 8,
        client_dcs: None,
        duration_ns,
        warmup_ns: 0,
        cooldown_ns: 0,
        workload: MixedWorkload {
            keys: 8,
            rot_keys: 3,
            update_keys: 3,
            mix: [0.15, 0.4, 0.1, 0.35],
            ..MixedWorkload::default()
        },
        record_history: true,
        seed,
        final_reads_after_ns: None,
        retry: Default::default(),
    };
    let report = drive_sim(&mut sim, &spec);
    assert_eq!(sim.invalid_inputs(), 0, "{replay}: refused {:?}", sim.invalid_examples());
    let history = report.history.expect("recorded");
    let reads = history
        .iter()
        .filter(|e| e.kind == EventType::Ok)
        .filter(|e| e.value.iter().filter(|op| op.0 == OpKind::Read).count() > 1)
        .count();
    (snowline_checker::check(&history, level), reads, replay)
}

fn passes_ra<P: Protocol>(faults: Faults) {
    assert_eq!(snowline_protocols::claimed_level(P::NAME), Ok("ra"));
    for seed in 0..seeds() {
        let (verdict, reads, replay) = seed_run::<P>(seed, faults, ProtocolConfig::default());
        assert!(verdict.ok, "{replay}: {verdict}");
        // (Clients wait out a lost message's operation timeout: fewer reads complete under faults.)
        let enough = if faults == Faults::None { 50 } else { 20 };
        assert!(reads > enough, "{replay}: only {reads} multi-key reads");
    }
}

#[test]
fn ramp_f_is_read_atomic() {
    passes_ra::<RampF>(Faults::None);
}

#[test]
fn ramp_s_is_read_atomic() {
    passes_ra::<RampS>(Faults::None);
}

#[test]
fn ramp_h_is_read_atomic() {
    passes_ra::<RampH>(Faults::None);
}

#[test]
fn ramp_is_read_atomic_under_loss_isolation_and_crashes() {
    passes_ra::<RampF>(Faults::Some);
    passes_ra::<RampS>(Faults::Some);
    passes_ra::<RampH>(Faults::Some);
}

/// A tiny Bloom filter (one word, one hash) makes false positives common: RAMP-H stays read atomic.
#[test]
fn ramp_h_with_a_tiny_filter_is_read_atomic() {
    for seed in 0..seeds() / 2 {
        let config = ProtocolConfig { ramp_bloom_bits: 64, ramp_bloom_hashes: 1, ..ProtocolConfig::default() };
        let (verdict, _, replay) = seed_run::<RampH>(seed, Faults::None, config);
        assert!(verdict.ok, "{replay}: {verdict}");
    }
}

/// The mutation test: skipping the repair round must be caught (fractured reads) on some of a few seeds.
#[test]
fn the_broken_variant_is_caught_with_fractured_reads() {
    let broken = ProtocolConfig { ramp_skip_second_round: true, ..ProtocolConfig::default() };
    let caught: Vec<u64> = (0..6)
        .filter(|seed| {
            let (verdict, _, _) = seed_run::<RampF>(*seed, Faults::None, broken.clone());
            !verdict.ok && verdict.kinds().contains(&AnomalyKind::FracturedRead)
        })
        .collect();
    println!("reads without their second round: fractured on seeds {caught:?} of 0..6");
    assert!(!caught.is_empty(), "no seed of 6 caught reads without their second round");
}

/// RAMP-H's false positive: a transaction's filter says it may have written a key it did not write; the
/// second round asks that key for the transaction's version, finds nothing, and the read keeps its first
/// round's version.
#[test]
fn a_bloom_filter_false_positive_costs_a_round_and_changes_nothing() {
    let config = ProtocolConfig { ramp_bloom_bits: 64, ramp_bloom_hashes: 1, ..ProtocolConfig::default() };
    let mut sim = sim::<RampH>(2, config);
    let topo = sim.topology();
    let (x, y): (Key, Key) = (topo.key_on(0, "x").into(), topo.key_on(1, "y").into());
    // A key the filter of {x, y} falsely contains (64 bits, one hash: one key in 32 does).
    let filter = snowline_protocols::ramp::bloom::Bloom::of([&*x, &*y], 64, 1);
    let z: Key = (0..10_000)
        .map(|i| topo.key_on(1, &format!("z{i}-")))
        .find(|k| filter.may_contain(k) && k.as_str() != &*y)
        .expect("a false positive among 10000 keys")
        .into();
    let c = sim.add_client(0);
    sim.execute(c, OpId(1), Request::Put { key: z.clone(), value: "z1".into() }, SECOND).unwrap().unwrap();
    sim.execute(c, OpId(2), update(&[(&x, "x2"), (&y, "y2")]), SECOND).unwrap().unwrap();
    let reply = sim.execute(c, OpId(3), Request::Rot { keys: vec![x, z] }, SECOND).unwrap().unwrap();
    assert_eq!(values(&reply), [Some("x2"), Some("z1")]);
    assert_eq!(reply.metrics.rounds, 2, "the false positive asked z again");
    assert_eq!(reply.metrics.versions_returned, 2, "and found nothing");
}

/// Servers refuse what no correct client sends: another client's timestamp, a key of another partition, a
/// write set that leaves out a written key, a reply addressed to a server.
#[test]
fn servers_refuse_forged_prepares_commits_and_reads() {
    use snowline_core::{ClientId, InvalidKind};
    use snowline_protocols::ramp::{Get, RampMsg, Ts};
    let mut sim = sim::<RampF>(2, ProtocolConfig::default());
    let topo = sim.topology();
    let (x, y): (Key, Key) = (topo.key_on(0, "x").into(), topo.key_on(1, "y").into());
    let c = sim.add_client(0);
    let p0 = ServerId::new(0, 0);
    let now = sim.clock_ns(Addr::Client(c));
    let mine = Ts { time: now, client: c };
    let theirs = Ts { time: now, client: ClientId(c.0 + 1) };
    let prepare = |ts: Ts, key: &Key, ws: Vec<Key>| RampMsg::<std::sync::Arc<[Key]>>::Prepare {
        op: OpId(1),
        ts,
        writes: vec![(key.clone(), Value::from("v"))],
        meta: ws.into(),
    };
    let deferred = |counter: &Key, map: &Key, add: &str| snowline_core::procedure::DeferredId {
        counter: counter.clone(),
        field: 0,
        counter_value: Value::from(add),
        // Pinned with partition 0's keys (`{0}…`); `map` only says which partition the counter test is for.
        map_prefix: if **map == *x { "{0}m/".to_string() } else { "{1}m/".to_string() },
        map_value: Value::from("t;tag"),
    };
    let forged = [
        (prepare(theirs, &x, vec![x.clone()]), InvalidKind::Sender),
        (prepare(mine, &y, vec![y.clone()]), InvalidKind::OutOfRange),
        (prepare(mine, &x, vec![y.clone()]), InvalidKind::Malformed),
        (prepare(Ts { time: u64::MAX - 1, client: c }, &x, vec![x.clone()]), InvalidKind::Timestamp),
        (RampMsg::Commit { op: OpId(1), ts: theirs, deferred: None }, InvalidKind::Sender),
        (
            RampMsg::Prepare {
                op: OpId(1),
                ts: mine,
                writes: vec![(x.clone(), Value::from("merge:+x;t"))],
                meta: vec![x.clone()].into(),
            },
            InvalidKind::Malformed,
        ),
        (
            RampMsg::Commit { op: OpId(1), ts: mine, deferred: Some(deferred(&y, &x, "merge:+1")) },
            InvalidKind::OutOfRange,
        ),
        (
            RampMsg::Commit { op: OpId(1), ts: mine, deferred: Some(deferred(&x, &x, "merge:+2")) },
            InvalidKind::Malformed,
        ),
        (RampMsg::RunLocal { op: OpId(1), ts: mine, procedure: "no-such".into(), args: vec![] }, InvalidKind::Limit),
        (
            RampMsg::Get { op: OpId(1), round: 1, gets: vec![Get { key: y.clone(), among: None }] },
            InvalidKind::OutOfRange,
        ),
        (
            RampMsg::Get { op: OpId(1), round: 1, gets: vec![Get { key: x.clone(), among: Some(vec![]) }] },
            InvalidKind::Malformed,
        ),
        (RampMsg::Got { op: OpId(1), round: 1, found: vec![] }, InvalidKind::Sender),
    ];
    for (i, (msg, kind)) in forged.into_iter().enumerate() {
        sim.inject(Addr::Client(c), p0, msg);
        sim.advance(MS);
        assert_eq!(sim.invalid_inputs(), i as u64 + 1, "message {i} refused");
        assert_eq!(sim.invalid_examples().last().map(|e| e.kind), Some(kind), "{:?}", sim.invalid_examples().last());
    }
    // Nothing forged reached the store; a correct prepare does.
    assert!(sim.server(p0).versions(&x).is_empty());
    sim.inject(Addr::Client(c), p0, prepare(mine, &x, vec![x.clone()]));
    sim.advance(MS);
    assert_eq!(sim.server(p0).versions(&x), [mine]);
    assert_eq!(sim.server(p0).last_commit(&x), None, "prepared, not visible");
}

/// The baseline without concurrency control (`nocc`, the RAMP paper's NWNR): its histories keep its claim,
/// read committed, and the checker finds the fractured reads RAMP prevents on the same workload.
#[test]
fn without_concurrency_control_reads_are_committed_but_fractured() {
    assert_eq!(snowline_protocols::claimed_level("nocc"), Ok("rc"));
    let mut fractured = Vec::new();
    for seed in 0..6 {
        let (verdict, reads, replay) = seed_run::<NoCc>(seed, Faults::None, ProtocolConfig::default());
        assert!(reads > 50, "{replay}: only {reads} multi-key reads");
        if !verdict.ok && verdict.kinds().contains(&AnomalyKind::FracturedRead) {
            fractured.push(seed);
        }
    }
    println!("nocc: fractured reads on seeds {fractured:?} of 0..6");
    assert!(!fractured.is_empty(), "no seed of 6 showed a fractured read without concurrency control");
}

#[test]
fn without_concurrency_control_histories_are_read_committed() {
    for seed in 0..seeds() {
        let (verdict, _, replay) = seed_run_at::<NoCc>(seed, Faults::None, ProtocolConfig::default(), Level::Rc);
        assert!(verdict.ok, "{replay}: {verdict}");
    }
}
