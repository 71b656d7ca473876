//! Every anomaly class, injected into histories recorded from a real protocol run: 2PL with two-phase commit
//! in the simulator, running YCSB-T mix B (read-only transactions of 4 reads, updates of 3 reads and 1 write,
//! as interactive transactions) on a few keys, so that transactions conflict, abort and retry. Each recorded
//! history passes every level (`strict-ser` is 2PL's claim). Each injection edits it minimally, and the
//! checker must name the class at each level of the class's row of the expectation matrix
//! (`docs/CHECKER.md`), both with the version order 2PL reports (the `version` fields) and with the order
//! inferred from the reads (every 2PL write is a read-modify-write, so the reads order every key's writers).
//!
//! The injectors are shared with the checker's mutation tests, which apply them to generated serial
//! histories: `crates/checker/tests/common/inject.rs`, included here by path. Two classes need more than
//! edited reads: 2PL's transactions write each key once, so G1b adds an intermediate write to a recorded
//! transaction; and G0 needs two concurrent blind writes of the same two keys, which 2PL never records, so
//! its test appends two synthetic transactions (see [`g0_needs_appended_blind_writes`]).

#[path = "../../checker/tests/common/inject.rs"]
mod inject;

use inject::Subject;
use snowline_checker::Level;
use snowline_core::history::{HistoryEvent, OpKind};
use snowline_core::{Key, ProtocolConfig, Topology};
use snowline_harness::{MixedWorkload, RunSpec, YcsbMix, run_sim};
use snowline_sim::{CpuModel, SimConfig};
use std::collections::BTreeMap;
use std::sync::OnceLock;

const SEEDS: [u64; 4] = [1, 2, 3, 4];

/// One 2PL run of 0.4 s (virtual) with six clients on six keys: about 1,200 transactions.
fn record(seed: u64) -> Vec<HistoryEvent> {
    let mut config = SimConfig::new(seed, Topology::new(1, 2), ProtocolConfig::default());
    // The CPU model these histories were first recorded with (5 µs per handled message, no per-message
    // charge): the injectors need transactions of particular shapes, and the interleavings are the model's.
    config.cpu = CpuModel { base_ns: 5_000, per_work_unit_ns: 200, ..CpuModel::free() };
    let spec = RunSpec {
        clients_per_dc: 6,
        client_dcs: None,
        duration_ns: 400_000_000,
        warmup_ns: 0,
        cooldown_ns: 0,
        workload: MixedWorkload { keys: 6, write_ratio: 0.5, value_bytes: 8, ..MixedWorkload::ycsb_t(YcsbMix::B) },
        record_history: true,
        seed,
        final_reads_after_ns: None,
        retry: Default::default(),
    };
    run_sim::<snowline_protocols::TwoPl>(config, &spec).history.expect("recorded")
}

/// The recorded histories, once per test binary.
fn recorded() -> &'static [Subject] {
    static SUBJECTS: OnceLock<Vec<Subject>> = OnceLock::new();
    SUBJECTS.get_or_init(|| SEEDS.iter().map(|&seed| Subject::new(record(seed))).collect())
}

/// Inject `class` into every recorded history that has transactions to edit; the checker must name it
/// each time (and the unmutated history pass). At least two of the histories must have them.
fn injected(class: &str) {
    let mut hits = 0;
    for s in recorded() {
        let Some(m) = inject::injector(class)(s) else { continue };
        inject::assert_named(s, &m);
        hits += 1;
    }
    assert!(hits >= 2, "{class}: only {hits} of {} recorded histories had transactions to edit", SEEDS.len());
}

#[test]
fn recorded_2pl_histories_pass_every_level() {
    for (s, seed) in recorded().iter().zip(SEEDS) {
        for level in Level::ALL {
            for (how, v) in s.verdicts(&s.events, None, level) {
                assert!(v.ok && !v.inconclusive, "seed {seed} at {level} ({how}):\n{v}");
            }
        }
        // What the injections use: read-write transactions, read-only ones, aborted attempts that wrote.
        let txns = &s.history.txns;
        assert!(s.rmw_only, "every 2PL write follows a read of its key");
        assert!(s.serial.len() > 200, "seed {seed}: {} updates", s.serial.len());
        assert!(s.read_only().count() > 200, "seed {seed}: few read-only transactions");
        let aborted = txns.iter().filter(|t| t.status == snowline_checker::TxnStatus::Fail);
        assert!(aborted.filter(|t| t.ops.iter().any(|o| o.0 == OpKind::Write)).count() > 10, "seed {seed}");
    }
}

#[test]
fn aborted_read_g1a_injected_into_recorded_histories_is_named() {
    injected("aborted-read");
}

#[test]
fn intermediate_read_g1b_injected_into_recorded_histories_is_named() {
    // 2PL's transactions write each key once: the injector adds the intermediate write.
    let once =
        |t: &snowline_checker::Txn| inject::writes(t).len() == t.ops.iter().filter(|o| o.0 == OpKind::Write).count();
    assert!(recorded().iter().all(|s| s.history.txns.iter().all(once)));
    injected("intermediate-read");
}

/// G0 cannot be injected into a recorded 2PL history by editing it: every 2PL write is a read-modify-write,
/// so any two writers of a key are ordered by happens-before (the later read the earlier's version, or a
/// chain of such reads), and a commit order that contradicts it is an `inconsistent-commit-order`, not a
/// write cycle; and a 2PL commit version orders all of a transaction's writes at once. So two synthetic
/// blind writes of the two most written keys are appended (fresh processes, concurrent, committed after
/// every recorded transaction), and the commit order the checker gets lists them in opposite orders on the
/// two keys.
#[test]
fn g0_needs_appended_blind_writes() {
    for s in recorded() {
        assert!(inject::g0(s).is_none(), "no two recorded writers of a key are concurrent");
        let mut counts: BTreeMap<Key, usize> = BTreeMap::new();
        for &t in &s.serial {
            for k in inject::writes(s.txn(t)) {
                *counts.entry(k).or_default() += 1;
            }
        }
        let mut keys: Vec<(usize, Key)> = counts.into_iter().map(|(k, n)| (n, k)).collect();
        keys.sort();
        let (x, y) = (&keys[keys.len() - 1].1, &keys[keys.len() - 2].1);
        let mut events = s.events.clone();
        inject::append_concurrent_blind_writes(&mut events, x, y);
        let appended = Subject::new(events);
        let m = inject::g0(&appended).expect("the appended pair");
        assert!(m.what.contains(&format!("T{}", s.events.len())), "the appended pair is the one swapped: {}", m.what);
        inject::assert_named(&appended, &m);
    }
}

#[test]
fn g1c_injected_into_recorded_histories_is_named() {
    injected("g1c");
}

#[test]
fn lost_update_injected_into_recorded_histories_is_named() {
    injected("lost-update");
}

#[test]
fn g_single_read_skew_injected_into_recorded_histories_is_named() {
    injected("g-single");
}

#[test]
fn write_skew_injected_into_recorded_histories_is_named() {
    injected("write-skew");
}

#[test]
fn read_only_anomaly_injected_into_recorded_histories_is_named() {
    injected("read-only-anomaly");
}

#[test]
fn long_fork_injected_into_recorded_histories_is_named() {
    injected("long-fork");
}

#[test]
fn g2_item_injected_into_recorded_histories_is_named() {
    injected("g2-item");
}

#[test]
fn non_monotonic_snapshot_injected_into_recorded_histories_is_named() {
    injected("non-monotonic-snapshot");
}

#[test]
fn real_time_violation_injected_into_recorded_histories_is_named() {
    injected("real-time-violation");
}
