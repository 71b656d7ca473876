//! Swarm fault schedules (issue 11): every seed draws its own subset of fault kinds (crashes, leader crashes,
//! leader kills mid-protocol, isolations, partitions that drop messages, random loss), within what the
//! protocol survives, and the run's history must pass the checker at the protocol's claimed level.
//!
//! * `raft-kv`: `strict-ser` with leader crashes (or kills as the leader sends) and partitions (or
//!   isolations) on every seed, crash-stop of at most a minority of each group; the groups keep serving
//!   after the faults heal. 20 seeds by default, 200 with `SNOWLINE_LONG_TESTS=1`. (A deliberately broken
//!   raft-kv whose members answer GETs from their own state, without ReadIndex, fails on 44 of the 200 seeds,
//!   six of them among the first 20.) The same for `amcast-kv` (`ser`), `tpc-kv` (`strict-ser`) and the Jessy
//!   family's `nmsi` (`nmsi`, on read-modify-write transactions), `rc` (`rc`) and `ser` (`ser`).
//! * The replica groups again with durable members that come back from their disks (crash seeds), and a whole
//!   cluster that crashes at once and comes back without losing an acknowledged write.
//! * The causal family (durable servers, so crashed servers come back from their logs and the sequenced links
//!   resend what partitions drop): its claimed level and convergence after quiescence.
//! * The same seed gives the same history, byte for byte.
//!
//! To study one crash seed: `ONLY_SEED=58 SNOWLINE_LONG_TESTS=1 DUMP_HISTORY=/tmp/h cargo test -p
//! snowline-harness --test swarm_faults rococo_snow` runs seed 58 alone and writes its history to
//! `/tmp/h-58.jsonl` (`snowline check` reads it).

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use snowline_checker::Level;
use snowline_core::history::{EventType, HistoryEvent, OpKind};
use snowline_core::{Protocol, ProtocolConfig, Termination, Topology};
use snowline_harness::{MixedWorkload, RunSpec, drive_sim};
use snowline_sim::{FaultKind, FaultSchedule, Sim, SimConfig, SwarmOptions};

const MS: u64 = 1_000_000;

fn long() -> bool {
    std::env::var("SNOWLINE_LONG_TESTS").is_ok_and(|v| v == "1")
}

fn level_of(name: &str) -> Level {
    snowline_protocols::claimed_level(name).unwrap().parse().unwrap()
}

fn check(name: &str, history: &[HistoryEvent], replay: &str) {
    let validated = snowline_checker::validate(history).unwrap_or_else(|e| panic!("{replay}: {e}"));
    let level = level_of(name);
    let verdict = if snowline_protocols::lookup(name).unwrap().orders_versions {
        snowline_checker::check_with_versions(&validated, level)
    } else {
        snowline_checker::check_history(&validated, level)
    };
    assert!(verdict.ok, "{replay}: {verdict}");
}

struct RaftRun {
    history: Vec<HistoryEvent>,
    replay: String,
    crashes: usize,
    dropped: u64,
}

/// A seed of a protocol whose partitions are replica groups (raft-kv, amcast-kv, tpc-kv). With `durable`,
/// servers log their changes (odd seeds with group commit) and crashed ones come back from their disks;
/// otherwise crashes are crash-stop.
fn group_seed<P: Protocol>(seed: u64, durable: bool) -> RaftRun {
    group_seed_with::<P>(seed, durable, Termination::Multicast)
}

/// [`group_seed`] with the Jessy family's termination chosen.
fn group_seed_with<P: Protocol>(seed: u64, durable: bool, termination: Termination) -> RaftRun {
    let mut rng = SmallRng::seed_from_u64(seed ^ 0x5a4f);
    let (dcs, partitions, replicas) = [(3, 2, 3), (1, 2, 3), (3, 1, 5), (2, 2, 3)][rng.random_range(0..4)];
    let topology = Topology::replicated(dcs, partitions, replicas);
    let mut config = SimConfig::new(seed, topology, ProtocolConfig { termination, ..ProtocolConfig::default() });
    config.network = config.network.with_uniform_inter_dc(rng.random_range(1..30) * MS);
    config.network.jitter = rng.random_range(0.0..1.0);
    config.op_timeout_ns = Some(3_000 * MS);
    config.durable = durable;
    if durable && seed % 2 == 1 {
        config.fsync_ns = rng.random_range(50..=2_000) * 1_000;
    }
    if durable && seed % 3 == 2 {
        // Frequent checkpoints: restarts start from one and redo the changes after it.
        config.checkpoint_every = 50;
    }
    let duration_ns = 4_000 * MS;
    let mut required = vec![
        if seed.is_multiple_of(2) { FaultKind::LeaderCrash } else { FaultKind::LeaderKill },
        if seed.is_multiple_of(3) { FaultKind::Isolate } else { FaultKind::Partition },
    ];
    if durable {
        required.push(FaultKind::Crash);
    }
    let options = SwarmOptions { duration_ns, restart_with_disk: durable, required };
    let schedule = FaultSchedule::swarm(seed, topology, &options);
    let replay = format!(
        "{}{} seed {seed}{}: {topology:?}, faults {schedule}",
        P::NAME,
        if termination == Termination::TwoPc { " (2pc)" } else { "" },
        if durable { format!(", durable, fsync {} µs", config.fsync_ns / 1_000) } else { String::new() }
    );
    let mut sim: Sim<P> = Sim::new(config);
    schedule.apply(&mut sim);
    let spec = RunSpec {
        clients_per_dc: 6 / usize::from(dcs),
        client_dcs: None,
        duration_ns,
        warmup_ns: 0,
        cooldown_ns: 0,
        // raft-kv serves single-key operations; amcast-kv and tpc-kv multi-key ROTs and updates across
        // groups too; the Jessy family read-modify-write transactions (NMSI aborts blind writes).
        workload: if !P::OFFERS.blind_writes {
            MixedWorkload { keys: 10, write_ratio: 0.5, ..MixedWorkload::ycsb_t(snowline_harness::YcsbMix::A) }
        } else if P::OFFERS.read_only {
            MixedWorkload { keys: 10, ..Default::default() }
        } else {
            MixedWorkload { keys: 10, ..MixedWorkload::kv() }
        },
        record_history: true,
        seed,
        final_reads_after_ns: None,
        retry: Default::default(),
    };
    let report = drive_sim(&mut sim, &spec);
    for p in 0..partitions {
        let down = topology.group(p).filter(|s| sim.is_down(*s)).count();
        assert!(down <= usize::from((replicas - 1) / 2), "{replay}: {down} members of p{p} down");
    }
    // Once the faults have healed, every group elects a leader (if it lost its own) and serves again: a new
    // session writes and reads back a key of each partition (each attempt gives up after the op timeout).
    let c = sim.add_client(0);
    let mut op = 1_000_000;
    let mut attempt = |sim: &mut Sim<P>, request: snowline_core::Request| {
        for _ in 0..30 {
            op += 1;
            match sim.execute(c, snowline_core::OpId(op), request.clone(), 4_000 * MS) {
                Some(Ok(reply)) => return reply,
                // An abort may repeat until the groups have applied what they decided (a read from a replica
                // that has not applied the session's own last write fails P-Store's certification): wait.
                Some(Err(snowline_core::OpError::Aborted(_))) => {
                    sim.advance(100 * MS);
                }
                Some(Err(snowline_core::OpError::Unknown(_))) | None => continue,
                Some(Err(e)) => panic!("{replay}: {e:?}"),
            }
        }
        panic!("{replay}: a group does not serve after the faults healed")
    };
    for p in 0..partitions {
        let key: snowline_core::Key = topology.key_on(p, "after-").into();
        let value: snowline_core::Value = "healed".into();
        if P::OFFERS.blind_writes {
            attempt(&mut sim, snowline_core::Request::Put { key: key.clone(), value });
        } else {
            // A read-modify-write transaction, retried whole until it commits.
            let mut committed = false;
            for commit_op in 2_000_000 + u64::from(p) * 100.. {
                attempt(&mut sim, snowline_core::Request::Begin);
                attempt(&mut sim, snowline_core::Request::Read { keys: vec![key.clone()] });
                let commit = snowline_core::Request::Commit { writes: vec![(key.clone(), value.clone())] };
                if let Some(Ok(_)) = sim.execute(c, snowline_core::OpId(commit_op), commit, 4_000 * MS) {
                    committed = true;
                    break;
                }
                if commit_op >= 2_000_010 + u64::from(p) * 100 {
                    break;
                }
            }
            assert!(committed, "{replay}: no transaction commits after the faults healed");
        }
        // The Jessy family promises no session order: the member a read reaches (the nearest, a follower
        // perhaps just back from a partition) may not have applied the commit yet, but every member does in
        // time. (The others read their own writes at once.)
        let mut read = attempt(&mut sim, snowline_core::Request::Rot { keys: vec![key.clone()] });
        for _ in 0..50 {
            if read.reads[0].value.as_deref() == Some("healed") {
                break;
            }
            sim.advance(200 * MS);
            read = attempt(&mut sim, snowline_core::Request::Rot { keys: vec![key.clone()] });
        }
        assert_eq!(read.reads[0].value.as_deref(), Some("healed"), "{replay}");
    }
    // Validation at the sans-IO boundary refuses nothing a correct peer sends, whatever the faults drop.
    assert_eq!(sim.invalid_inputs(), 0, "{replay}: messages refused: {:?}", sim.invalid_examples());
    let history = report.history.expect("recorded");
    RaftRun { history, replay, crashes: sim.crashes().len(), dropped: sim.messages_dropped() }
}

fn group_protocol_keeps_its_claim_under_swarm_faults<P: Protocol>() {
    group_protocol_under_swarm_faults::<P>(false, if long() { 200 } else { 20 });
}

fn group_protocol_under_swarm_faults<P: Protocol>(durable: bool, seeds: u64) {
    group_protocol_under_swarm_faults_with::<P>(durable, seeds, Termination::Multicast);
}

fn group_protocol_under_swarm_faults_with<P: Protocol>(durable: bool, seeds: u64, termination: Termination) {
    let (mut crashes, mut dropped, mut writes) = (0, 0, 0);
    let only: Option<u64> = std::env::var("ONLY_SEED").ok().and_then(|s| s.parse().ok());
    for seed in 0..seeds {
        if only.is_some_and(|o| o != seed) {
            continue;
        }
        let run = group_seed_with::<P>(seed, durable, termination);
        check(P::NAME, &run.history, &run.replay);
        crashes += run.crashes;
        dropped += run.dropped;
        writes += run
            .history
            .iter()
            .filter(|e| e.kind == EventType::Ok && e.value.iter().any(|o| o.0 == OpKind::Write))
            .count();
    }
    println!(
        "{}{}: {seeds} seeds, {crashes} crashes, {dropped} messages dropped, {writes} acknowledged writes",
        P::NAME,
        if durable { " (durable, restarts from disk)" } else { "" }
    );
    assert!(crashes >= seeds as usize / 2, "leaders were crashed: {crashes}");
    assert!(dropped > 0 && writes > 20 * seeds as usize);
}

#[test]
fn raft_kv_is_strictly_serializable_under_swarm_faults_with_leader_crashes_and_partitions() {
    group_protocol_keeps_its_claim_under_swarm_faults::<snowline_protocols::RaftKv>();
}

#[test]
fn amcast_kv_is_serializable_under_swarm_faults_with_leader_crashes_and_partitions() {
    group_protocol_keeps_its_claim_under_swarm_faults::<snowline_protocols::AmcastKv>();
}

#[test]
fn nmsi_keeps_nmsi_under_swarm_faults_with_leader_crashes_and_partitions() {
    group_protocol_keeps_its_claim_under_swarm_faults::<snowline_protocols::Nmsi>();
}

#[test]
fn jessy_rc_keeps_rc_under_swarm_faults_with_leader_crashes_and_partitions() {
    group_protocol_keeps_its_claim_under_swarm_faults::<snowline_protocols::Rc>();
}

#[test]
fn jessy_ser_keeps_ser_under_swarm_faults_with_leader_crashes_and_partitions() {
    group_protocol_keeps_its_claim_under_swarm_faults::<snowline_protocols::Ser>();
}

#[test]
fn jessy_us_keeps_us_under_swarm_faults_with_leader_crashes_and_partitions() {
    group_protocol_keeps_its_claim_under_swarm_faults::<snowline_protocols::Us>();
}

#[test]
fn jessy_si_keeps_si_under_swarm_faults_with_leader_crashes_and_partitions() {
    group_protocol_keeps_its_claim_under_swarm_faults::<snowline_protocols::Si>();
}

#[test]
fn jessy_psi_keeps_psi_under_swarm_faults_with_leader_crashes_and_partitions() {
    group_protocol_keeps_its_claim_under_swarm_faults::<snowline_protocols::Psi>();
}

/// The Jessy family terminating by two-phase commit (`--termination 2pc`): every criterion keeps its level
/// under the same faults, durable members (crashes, restarts from disk) on every other seed.
fn jessy_two_phase_commit<P: Protocol>() {
    let seeds = if long() { 200 } else { 10 };
    group_protocol_under_swarm_faults_with::<P>(false, seeds, Termination::TwoPc);
    group_protocol_under_swarm_faults_with::<P>(true, seeds / 2, Termination::TwoPc);
}

#[test]
fn jessy_family_keeps_its_levels_terminating_by_two_phase_commit() {
    jessy_two_phase_commit::<snowline_protocols::Nmsi>();
    jessy_two_phase_commit::<snowline_protocols::Rc>();
    jessy_two_phase_commit::<snowline_protocols::Ser>();
    jessy_two_phase_commit::<snowline_protocols::Us>();
    jessy_two_phase_commit::<snowline_protocols::Si>();
    jessy_two_phase_commit::<snowline_protocols::Psi>();
}

#[test]
fn tpc_kv_is_strictly_serializable_under_swarm_faults_with_leader_crashes_and_partitions() {
    group_protocol_keeps_its_claim_under_swarm_faults::<snowline_protocols::TpcKv>();
}

#[test]
fn raft_kv_swarm_runs_are_reproducible() {
    type R = snowline_protocols::RaftKv;
    for (seed, durable) in [(3, false), (8, false), (5, true)] {
        let (a, b) = (group_seed::<R>(seed, durable), group_seed::<R>(seed, durable));
        assert!(a.history == b.history, "seed {seed}: same seed, same history");
        assert_eq!((a.crashes, a.dropped), (b.crashes, b.dropped));
    }
    assert!(group_seed::<R>(3, false).history != group_seed::<R>(4, false).history);
}

/// Crash seeds of the replica-group protocols (issue 14): durable members that log their Raft changes, crashed
/// (leaders too) and brought back from their disks while partitions strike; the claimed level holds and the
/// groups serve afterwards. 200 seeds each with `SNOWLINE_LONG_TESTS=1`, 3 otherwise.
fn group_crash_seeds<P: Protocol>() {
    group_protocol_under_swarm_faults::<P>(true, if long() { 200 } else { 3 });
}

#[test]
fn raft_kv_survives_crash_seeds() {
    group_crash_seeds::<snowline_protocols::RaftKv>();
}

#[test]
fn amcast_kv_survives_crash_seeds() {
    group_crash_seeds::<snowline_protocols::AmcastKv>();
}

#[test]
fn nmsi_survives_crash_seeds() {
    group_crash_seeds::<snowline_protocols::Nmsi>();
}

#[test]
fn jessy_rc_survives_crash_seeds() {
    group_crash_seeds::<snowline_protocols::Rc>();
}

#[test]
fn jessy_ser_survives_crash_seeds() {
    group_crash_seeds::<snowline_protocols::Ser>();
}

#[test]
fn jessy_us_survives_crash_seeds() {
    group_crash_seeds::<snowline_protocols::Us>();
}

#[test]
fn jessy_si_survives_crash_seeds() {
    group_crash_seeds::<snowline_protocols::Si>();
}

#[test]
fn jessy_psi_survives_crash_seeds() {
    group_crash_seeds::<snowline_protocols::Psi>();
}

#[test]
fn tpc_kv_survives_crash_seeds() {
    group_crash_seeds::<snowline_protocols::TpcKv>();
}

/// Every member of every group crashes at once mid-load (the one datacenter goes down) and comes back from its
/// disk: every acknowledged write is still there. A member that forgot what it acknowledged would lose
/// writes here: no quorum outside the crashed members remembers them.
fn whole_cluster_restart<P: Protocol>() {
    for seed in 0..3 {
        let topology = Topology::replicated(1, 2, 3);
        let mut config = SimConfig::new(seed, topology, ProtocolConfig::default());
        config.durable = true;
        config.fsync_ns = [0, 300_000, 1_500_000][seed as usize];
        // Seed 1 checkpoints often, so its members recover from a checkpoint and the changes after it.
        config.checkpoint_every = if seed == 1 { 40 } else { config.checkpoint_every };
        config.op_timeout_ns = Some(2_000 * MS);
        let mut sim: Sim<P> = Sim::new(config);
        let crash_at = sim.now_ns() + 1_000 * MS + seed * 7 * MS;
        for s in topology.servers() {
            sim.schedule_crash_with(s, crash_at, snowline_sim::Restart::WithDisk { after_ns: 300 * MS });
        }
        let c = sim.add_client(0);
        let (mut op, mut acked) = (0, Vec::new());
        while sim.now_ns() < crash_at + 2_000 * MS {
            op += 1;
            let key: snowline_core::Key = format!("u{op}").into();
            let put = snowline_core::Request::Put { key: key.clone(), value: format!("v{op}").into() };
            if let Some(Ok(_)) = sim.execute(c, snowline_core::OpId(op), put, 3_000 * MS) {
                acked.push((key, format!("v{op}")));
            }
        }
        assert_eq!(sim.crashes().len(), 6, "seed {seed}: every server crashed");
        assert!(acked.len() > 20, "seed {seed}: only {} writes acknowledged", acked.len());
        for (key, value) in &acked {
            let read = (0..5).find_map(|_| {
                op += 1;
                let get = snowline_core::Request::Rot { keys: vec![key.clone()] };
                match sim.execute(c, snowline_core::OpId(op), get, 3_000 * MS) {
                    Some(Ok(reply)) => Some(reply.reads[0].value.clone()),
                    _ => None,
                }
            });
            let read = read.unwrap_or_else(|| panic!("{} seed {seed}: {key:?} cannot be read", P::NAME));
            assert_eq!(read.as_deref(), Some(value.as_str()), "{} seed {seed}: acknowledged {key:?} lost", P::NAME);
        }
        assert_eq!(sim.invalid_inputs(), 0, "seed {seed}: {:?}", sim.invalid_examples());
    }
}

#[test]
fn raft_kv_keeps_every_acknowledged_write_when_the_whole_cluster_restarts() {
    whole_cluster_restart::<snowline_protocols::RaftKv>();
}

#[test]
fn amcast_kv_keeps_every_acknowledged_write_when_the_whole_cluster_restarts() {
    whole_cluster_restart::<snowline_protocols::AmcastKv>();
}

#[test]
fn tpc_kv_keeps_every_acknowledged_write_when_the_whole_cluster_restarts() {
    whole_cluster_restart::<snowline_protocols::TpcKv>();
}

/// A causal protocol under a swarm schedule with durable servers: crashes come back from the disk, and
/// partitions and loss drop messages that the hosts' sequenced links resend.
fn causal_seed<P: Protocol>(seed: u64) -> Vec<HistoryEvent> {
    durable_seed::<P>(seed, FaultKind::Partition).0
}

/// A seed of a protocol made durable by input replay, with `required` among its faults; returns the history,
/// how many servers crashed and how many log records the crashes lost before their commit ended.
fn durable_seed<P: Protocol>(seed: u64, required: FaultKind) -> (Vec<HistoryEvent>, usize, u64) {
    let mut rng = SmallRng::seed_from_u64(seed ^ 0xca5);
    let mut topology = Topology::new(rng.random_range(2..=3), rng.random_range(1..=3));
    if P::check_topology(&topology).is_err() {
        // COPS-DW runs in one datacenter: the seed's faults strike its servers there.
        topology = Topology::new(1, topology.partitions + 1);
    }
    let mut config = SimConfig::new(seed, topology, ProtocolConfig::default());
    config.network = config.network.with_uniform_inter_dc(rng.random_range(1..40) * MS);
    config.durable = true;
    // Odd seeds commit in the background, as group commit does: a crash may then lose the batch whose
    // fsync had not ended (and whose effects nobody saw).
    config.fsync_ns = if seed % 2 == 1 { rng.random_range(50..=2_000) * 1_000 } else { 0 };
    config.op_timeout_ns = Some(500 * MS);
    let duration_ns = 1_000 * MS;
    let required = vec![required];
    let schedule =
        FaultSchedule::swarm(seed, topology, &SwarmOptions { duration_ns, restart_with_disk: true, required });
    let replay =
        format!("{} seed {seed}: {topology:?}, fsync {} µs, faults {schedule}", P::NAME, config.fsync_ns / 1_000);
    let mut sim: Sim<P> = Sim::new(config);
    schedule.apply(&mut sim);
    let spec = RunSpec {
        clients_per_dc: 3,
        client_dcs: None,
        duration_ns,
        warmup_ns: 0,
        cooldown_ns: 0,
        workload: MixedWorkload { keys: 30, ..Default::default() },
        record_history: true,
        seed,
        // 2PL: a transaction whose client gave up during a crash holds its locks until the idle abort.
        final_reads_after_ns: Some(if P::NAME == "2pl" {
            snowline_protocols::twopl::IDLE_ABORT_NS + 2_000 * MS
        } else {
            3_000 * MS
        }),
        retry: Default::default(),
    };
    let report = drive_sim(&mut sim, &spec);
    let history = report.history.expect("recorded");
    if let Ok(path) = std::env::var("DUMP_HISTORY") {
        // For study: the history as `snowline check` reads it.
        let mut out = String::new();
        for e in &history {
            out.push_str(&serde_json::to_string(e).unwrap());
            out.push('\n');
        }
        std::fs::write(format!("{path}-{seed}.jsonl"), out).unwrap();
    }
    check(P::NAME, &history, &replay);
    assert_eq!(report.converged, Some(true), "{replay}: datacenters diverge on {:?}", report.divergent);
    assert_eq!(sim.invalid_inputs(), 0, "{replay}: messages refused: {:?}", sim.invalid_examples());
    (history, sim.crashes().len(), sim.records_lost_in_crashes())
}

/// Crash seeds (issue 14): every seed crashes servers (1–3 of them, at random moments) and brings them back
/// from their logs while partitions, isolations and loss may strike too; the history must pass the checker at
/// the protocol's claimed level and the datacenters converge. 200 seeds per protocol with
/// `SNOWLINE_LONG_TESTS=1`, 3 otherwise. (The replica-group protocols, crash-stop by design, get their 200
/// seeds of leader crashes above.)
fn crash_seeds<P: Protocol>() {
    let seeds = if long() { 200 } else { 3 };
    let (mut crashes, mut lost) = (0, 0);
    for seed in 0..seeds {
        let (_, c, l) = durable_seed::<P>(seed, FaultKind::Crash);
        (crashes, lost) = (crashes + c, lost + l);
    }
    println!(
        "{}: {seeds} crash seeds passed, {crashes} crashes and restarts from the log, {lost} logged inputs lost \
         with a commit under way",
        P::NAME
    );
    assert!(crashes >= seeds as usize, "every seed crashed a server: {crashes}");
}

macro_rules! crash_seed_tests {
    ($($test:ident: $p:ty),* $(,)?) => {$(
        #[test]
        fn $test() {
            crash_seeds::<$p>();
        }
    )*};
}

crash_seed_tests! {
    cops_survives_crash_seeds: snowline_protocols::Cops,
    cops_snow_survives_crash_seeds: snowline_protocols::CopsSnow,
    contrarian_survives_crash_seeds: snowline_protocols::Contrarian,
    cure_survives_crash_seeds: snowline_protocols::Cure,
    av_survives_crash_seeds: snowline_protocols::Av,
    op_survives_crash_seeds: snowline_protocols::Op,
    cv_survives_crash_seeds: snowline_protocols::Cv,
    two_pl_survives_crash_seeds: snowline_protocols::TwoPl,
    rococo_survives_crash_seeds: snowline_protocols::Rococo,
    rococo_snow_survives_crash_seeds: snowline_protocols::RococoSnow,
    eiger_ps_survives_crash_seeds: snowline_protocols::EigerPs,
    cops_dw_survives_crash_seeds: snowline_protocols::CopsDw,
    occ_survives_crash_seeds: snowline_protocols::Occ,
    ramp_f_survives_crash_seeds: snowline_protocols::RampF,
    ramp_s_survives_crash_seeds: snowline_protocols::RampS,
    ramp_h_survives_crash_seeds: snowline_protocols::RampH,
}

#[test]
fn causal_protocols_keep_their_claims_under_swarm_faults_with_dropping_partitions() {
    let seeds = if long() { 40 } else { 4 };
    for seed in 0..seeds {
        causal_seed::<snowline_protocols::Cv>(seed);
        causal_seed::<snowline_protocols::Contrarian>(seed);
        causal_seed::<snowline_protocols::Cure>(seed);
    }
    assert!(causal_seed::<snowline_protocols::Cv>(1) == causal_seed::<snowline_protocols::Cv>(1), "reproducible");
}
