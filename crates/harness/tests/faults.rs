//! Randomized simulation runs with faults: message reordering, delay spikes, clock skew and drift, and an
//! inter-datacenter partition that heals. Fault parameters are drawn per seed ("swarm" testing) within the
//! protocol's declared link assumptions. Each run must produce a history that passes the checker at the
//! protocol's claimed level (so every read returns a value some operation wrote, or the initial state),
//! complete every operation once the partition heals, and converge: after quiescence every datacenter reads
//! the same value for every key.
//!
//! `SNOWLINE_SEEDS=N` runs N seeds instead of the default few.

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use snowline_checker::Level;
use snowline_core::history::{EventType, OpKind};
use snowline_core::{Protocol, ProtocolConfig, Topology};
use snowline_harness::{MixedWorkload, RunSpec, drive_sim};
use snowline_sim::{Sim, SimConfig};

fn seeds() -> u64 {
    std::env::var("SNOWLINE_SEEDS").ok().and_then(|s| s.parse().ok()).unwrap_or(12)
}

/// The faults of one seed.
fn faulty_config(seed: u64) -> (SimConfig, (u64, u64)) {
    let mut rng = SmallRng::seed_from_u64(seed ^ 0x5eed);
    let dcs = rng.random_range(2..=3);
    let partitions = rng.random_range(1..=4);
    let mut config = SimConfig::new(seed, Topology::new(dcs, partitions), ProtocolConfig::default());
    config.network.jitter = rng.random_range(0.0..2.0);
    config.network.reorder = true;
    config.network.spike_probability = rng.random_range(0.0..0.05);
    config.network.spike_ns = rng.random_range(1_000_000..50_000_000);
    config.network = config.network.with_uniform_inter_dc(rng.random_range(1_000_000..80_000_000));
    config.clocks.max_skew_ns = rng.random_range(0..20_000_000);
    config.clocks.max_drift_ppm = rng.random_range(0.0..200.0);
    let cut_from = rng.random_range(50_000_000..300_000_000);
    let cut_until = cut_from + rng.random_range(10_000_000..400_000_000);
    (config, (cut_from, cut_until))
}

/// 800 ms of closed-loop load, then quiescence and a read of every key in every datacenter.
fn spec(seed: u64, workload: MixedWorkload, clients_per_dc: usize, final_reads_after_ns: u64) -> RunSpec {
    RunSpec {
        clients_per_dc,
        client_dcs: None,
        duration_ns: 800_000_000,
        warmup_ns: 0,
        cooldown_ns: 0,
        workload,
        record_history: true,
        seed,
        final_reads_after_ns: Some(final_reads_after_ns),
        retry: Default::default(),
    }
}

/// Runs `spec`, checks the history at the protocol's claimed level and that the datacenters converged, and
/// returns the history.
fn run_and_check<P: Protocol>(sim: &mut Sim<P>, spec: &RunSpec, replay: &str) -> Vec<snowline_core::HistoryEvent> {
    let report = drive_sim(sim, spec);
    let history = report.history.expect("recorded");
    let level: Level = snowline_protocols::claimed_level(P::NAME).unwrap().parse().unwrap();
    // With the protocol's version order where the registry says its versions order each key's writes.
    let verdict = if snowline_protocols::lookup(P::NAME).unwrap().orders_versions {
        let validated = snowline_checker::validate(&history).unwrap_or_else(|e| panic!("{replay}: {e}"));
        snowline_checker::check_with_versions(&validated, level)
    } else {
        snowline_checker::check(&history, level)
    };
    assert!(verdict.ok, "{replay}: {verdict}");
    assert_eq!(report.converged, Some(true), "{replay}: datacenters diverge on {:?}", report.divergent);
    // Validation at the sans-IO boundary refuses nothing a correct peer sends, whatever the faults.
    assert_eq!(sim.invalid_inputs(), 0, "{replay}: messages refused: {:?}", sim.invalid_examples());
    history
}

/// Reads or writes in operations that completed successfully.
fn acknowledged(history: &[snowline_core::HistoryEvent], kind: OpKind) -> usize {
    history.iter().filter(|e| e.kind == EventType::Ok).flat_map(|e| &e.value).filter(|op| op.0 == kind).count()
}

/// A protocol that runs in one datacenter only (COPS-DW) gets the seed's partitions in one datacenter, and no
/// inter-datacenter partition; returns whether it did.
fn one_dc<P: Protocol>(config: &mut SimConfig) -> bool {
    if P::check_topology(&config.topology).is_ok() {
        return false;
    }
    config.topology = Topology::new(1, config.topology.partitions);
    true
}

/// How long the final reads wait for quiescence: COPS-DW serializes every write through its writer, two
/// wide-area round trips each, so the writes queued during the partition take longer to drain.
fn quiet_ns<P: Protocol>() -> u64 {
    if P::NAME == "cops-dw" { 8_000_000_000 } else { 2_000_000_000 }
}

fn check_protocol<P: Protocol>() {
    check_protocol_with::<P>(MixedWorkload { keys: 30, ..Default::default() }, seeds());
}

fn check_protocol_with<P: Protocol>(workload: MixedWorkload, seeds: u64) {
    for seed in 0..seeds {
        let (mut config, (cut_from, cut_until)) = faulty_config(seed);
        let one_dc = one_dc::<P>(&mut config);
        let replay = format!("seed {seed}: {config:?}, partition dc0|dc1 over [{cut_from}, {cut_until}) ns");
        let mut sim: Sim<P> = Sim::new(config);
        if !one_dc {
            sim.partition_dcs(0, 1, cut_from, cut_until);
        }
        let history = run_and_check(&mut sim, &spec(seed, workload.clone(), 4, quiet_ns::<P>()), &replay);
        let reads = acknowledged(&history, OpKind::Read);
        assert!(reads > 100, "{replay}: only {reads} reads");
        let unfinished: Vec<_> =
            history.iter().filter(|e| matches!(e.kind, EventType::Info | EventType::Fail)).collect();
        assert!(unfinished.is_empty(), "{replay}: every operation completes once the partition heals: {unfinished:?}");
    }
}

#[test]
fn cv_survives_reordering_spikes_skew_and_a_healing_partition() {
    check_protocol::<snowline_protocols::Cv>();
}

#[test]
fn cure_survives_reordering_spikes_skew_and_a_healing_partition() {
    check_protocol::<snowline_protocols::Cure>();
}

#[test]
fn av_survives_reordering_spikes_skew_and_a_healing_partition() {
    check_protocol::<snowline_protocols::Av>();
}

#[test]
fn op_survives_reordering_spikes_skew_and_a_healing_partition() {
    check_protocol::<snowline_protocols::Op>();
}

/// Contrarian §4.3: nonblocking, one-version ROTs from causally consistent snapshots, eventual visibility
/// and convergence, under delay spikes, clock skew and drift, and a healing inter-datacenter partition (links
/// stay FIFO: Contrarian declares it).
#[test]
fn contrarian_survives_spikes_skew_and_a_healing_partition() {
    check_protocol::<snowline_protocols::Contrarian>();
}

/// COPS (SNOW §5.3): causal consistency with at most two-round ROTs; remote writes become visible only after
/// their dependency checks.
#[test]
fn cops_survives_spikes_skew_and_a_healing_partition() {
    check_protocol::<snowline_protocols::Cops>();
}

#[test]
fn cops_snow_survives_spikes_skew_and_a_healing_partition() {
    check_protocol::<snowline_protocols::CopsSnow>();
}

/// Eiger-PS (SNOW §4.4): process-ordered serializability, with write transactions replicated synchronously
/// through their two-phase commit (no FIFO assumption: messages are reordered too).
#[test]
fn eiger_ps_survives_reordering_spikes_skew_and_a_healing_partition() {
    check_protocol::<snowline_protocols::EigerPs>();
}

/// COPS-DW (SNOW §4.3): strictly serializable one-round ROTs over writes ordered by the distinguished writer.
#[test]
fn cops_dw_survives_reordering_spikes_skew_and_a_healing_partition() {
    check_protocol::<snowline_protocols::CopsDw>();
}

/// RAMP (Bailis et al., SIGMOD 2014): read atomic multi-key reads and write transactions, in one datacenter.
#[test]
fn ramp_survives_reordering_spikes_and_skew() {
    check_protocol::<snowline_protocols::RampF>();
    check_protocol::<snowline_protocols::RampS>();
    check_protocol::<snowline_protocols::RampH>();
}

/// Multi-shot read-only transactions (Tomsic §5.3.3: rounds of reads over one snapshot, then an update of
/// keys read) keep each protocol's claim under the same faults.
#[test]
fn multi_shot_rots_keep_the_claims_of_the_tomsic_protocols() {
    let workload = MixedWorkload {
        keys: 60,
        rot_keys: 4,
        update_keys: 3,
        pattern: snowline_harness::Pattern::TomsicMulti { rounds: 3 },
        ..MixedWorkload::tomsic_single(3)
    };
    let seeds = seeds().div_ceil(3);
    check_protocol_with::<snowline_protocols::Cure>(workload.clone(), seeds);
    check_protocol_with::<snowline_protocols::Av>(workload.clone(), seeds);
    check_protocol_with::<snowline_protocols::Op>(workload.clone(), seeds);
    check_protocol_with::<snowline_protocols::Cv>(workload, seeds);
}

/// Durable servers (issue 6) in the simulator: on top of the same faults, servers crash mid-run (one, or a
/// whole datacenter) and restart from their logs. Client operations caught by a crash time out (outcome
/// unknown); everything else must hold: the history passes the checker at the protocol's claimed level, and
/// after quiescence every datacenter reads the same value for every key — the restarted servers caught up.
fn check_protocol_with_crashes<P: Protocol>() {
    for seed in 0..seeds() {
        let (mut config, (cut_from, cut_until)) = faulty_config(seed);
        let one_dc = one_dc::<P>(&mut config);
        config.durable = true;
        // COPS-DW queues every write behind the others at its writer: its clients wait longer.
        config.op_timeout_ns = Some(if P::NAME == "cops-dw" { 5_000_000_000 } else { 500_000_000 });
        let topology = config.topology;
        let mut sim: Sim<P> = Sim::new(config);
        if !one_dc {
            sim.partition_dcs(0, 1, cut_from, cut_until);
        }
        let mut rng = SmallRng::seed_from_u64(seed ^ 0xc4a5);
        let at = rng.random_range(100_000_000..600_000_000);
        let down = rng.random_range(10_000_000..300_000_000);
        let crashed: Vec<_> = if seed % 3 == 2 {
            let dc = rng.random_range(0..topology.dcs);
            topology.servers().filter(|s| s.dc == dc).collect()
        } else {
            vec![topology.servers().nth(rng.random_range(0..usize::from(topology.dcs * topology.partitions))).unwrap()]
        };
        for s in &crashed {
            sim.schedule_crash(*s, at, down);
        }
        let replay = format!("seed {seed}: crash {crashed:?} at {at} ns for {down} ns");
        let workload = MixedWorkload { keys: 30, ..Default::default() };
        let history = run_and_check(&mut sim, &spec(seed, workload, 3, quiet_ns::<P>() + 1_000_000_000), &replay);
        let ok_writes = acknowledged(&history, OpKind::Write);
        // Eiger-PS and COPS-DW replicate writes synchronously (two wide-area round trips, and COPS-DW one write
        // at a time): with up to 80 ms between datacenters many writes outlast the 500 ms client timeout.
        let least = match P::NAME {
            "eiger-ps" => 0,
            "cops-dw" => 2,
            _ => 10,
        };
        assert!(ok_writes > least, "{replay}: only {ok_writes} acknowledged writes");
    }
}

#[test]
fn durable_cv_recovers_from_crashes_and_keeps_its_claim() {
    check_protocol_with_crashes::<snowline_protocols::Cv>();
}

#[test]
fn durable_contrarian_recovers_from_crashes_and_keeps_its_claim() {
    check_protocol_with_crashes::<snowline_protocols::Contrarian>();
}

#[test]
fn durable_cure_recovers_from_crashes_and_keeps_its_claim() {
    check_protocol_with_crashes::<snowline_protocols::Cure>();
}

#[test]
fn durable_cops_snow_recovers_from_crashes_and_keeps_its_claim() {
    check_protocol_with_crashes::<snowline_protocols::CopsSnow>();
}

#[test]
fn durable_eiger_ps_recovers_from_crashes_and_keeps_its_claim() {
    check_protocol_with_crashes::<snowline_protocols::EigerPs>();
}

#[test]
fn durable_cops_dw_recovers_from_crashes_and_keeps_its_claim() {
    check_protocol_with_crashes::<snowline_protocols::CopsDw>();
}

#[test]
fn durable_ramp_recovers_from_crashes_and_keeps_its_claim() {
    check_protocol_with_crashes::<snowline_protocols::RampF>();
    check_protocol_with_crashes::<snowline_protocols::RampS>();
    check_protocol_with_crashes::<snowline_protocols::RampH>();
}

#[test]
fn durable_av_op_and_cops_recover_from_crashes_and_keep_their_claims() {
    check_protocol_with_crashes::<snowline_protocols::Av>();
    check_protocol_with_crashes::<snowline_protocols::Op>();
    check_protocol_with_crashes::<snowline_protocols::Cops>();
}
