//! Coordination-free TPC-C (the coordination-avoidance paper's §6) on RAMP in the simulator: New-Order's
//! inserts and stock updates in one atomically visible write with its `O_ID` taken after the fact at the
//! district's owner, Payment's sums as merges, Delivery single-partition. Afterwards the 12 consistency
//! conditions hold on the final state and the history is read atomic (`ra`), with and without message loss;
//! it is not serializable, and the checker says so where contention makes that visible.

use snowline_checker::Level;
use snowline_core::{Protocol, ProtocolConfig, ServerId, Topology};
use snowline_harness::tpcc::{Scale, TpccSpec};
use snowline_harness::{MixedWorkload, Pattern, RetryPolicy, RunSpec, drive_sim};
use snowline_protocols::{RampF, RampH, RampS};
use snowline_sim::{Sim, SimConfig};

fn spec(seed: u64, clients: usize) -> RunSpec {
    RunSpec {
        clients_per_dc: clients,
        client_dcs: None,
        duration_ns: 300_000_000,
        warmup_ns: 0,
        cooldown_ns: 0,
        workload: MixedWorkload {
            pattern: Pattern::Tpcc,
            tpcc: TpccSpec { scale: Scale::Small, seed, rollback: Some(true), ..Default::default() },
            ..Default::default()
        },
        record_history: true,
        seed,
        final_reads_after_ns: None,
        retry: RetryPolicy::default(),
    }
}

const KINDS: [&str; 5] =
    ["tpcc-cf-new-order", "tpcc-cf-payment", "tpcc-cf-order-status", "tpcc-cf-delivery", "tpcc-cf-stock-level"];

/// `seed`'s run: audited, every transaction committed at least once, the history `ra` (without loss: a
/// call whose reply is lost is recorded without its writes, which the client never learned, so reads of
/// them would look out of thin air). With `ser`, the verdict at `ser` is returned (else `true`).
fn run<P: Protocol>(seed: u64, clients: usize, loss: f64, ser: bool) -> bool {
    let topology = Topology::new(1, 2);
    let mut config = SimConfig::new(seed, topology, ProtocolConfig::default());
    if loss > 0.0 {
        // Durable servers, one of which crashes and restarts from its log mid-run, and lost messages.
        config.durable = true;
        config.op_timeout_ns = Some(1_000_000_000);
    }
    let mut sim: Sim<P> = Sim::new(config);
    if loss > 0.0 {
        sim.lose(loss, 0, u64::MAX);
        sim.schedule_crash(ServerId::new(0, 1), 400_000_000, 100_000_000);
    }
    let report = drive_sim(&mut sim, &spec(seed, clients));
    let audit = report.tpcc.as_ref().expect("a tpcc run is audited");
    assert!(audit.ok(), "{} seed {seed}: {audit}", P::NAME);
    assert!(audit.conditions.iter().all(|c| c.checked > 0), "{audit}");
    assert!(audit.deliveries > 0, "{audit}");
    let s = &report.summary;
    for kind in KINDS {
        assert!(s.kind(kind).is_some_and(|k| k.ok > 0), "{} seed {seed}: no committed {kind}:\n{s}", P::NAME);
    }
    if loss > 0.0 {
        return true;
    }
    let history = report.history.expect("recorded");
    let validated = snowline_checker::validate(&history).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
    let verdict = snowline_checker::check_history(&validated, Level::Ra);
    assert!(verdict.ok, "{} seed {seed}: {verdict}", P::NAME);
    if !ser {
        return true;
    }
    let verdict = snowline_checker::check_history(&validated, Level::Ser);
    if !verdict.ok {
        eprintln!("{} seed {seed} at ser (coordination-free is not serializable): {verdict}", P::NAME);
    }
    verdict.ok
}

#[test]
fn ramp_runs_tpcc_coordination_free_consistent_and_read_atomic() {
    assert!(!run::<RampF>(1, 40, 0.0, true), "two terminals per district contend: the run is not serializable");
    run::<RampS>(3, 20, 0.0, false);
    run::<RampH>(4, 20, 0.0, false);
}

/// Lost messages and a crashed server leave calls' outcomes unknown; the consistency conditions still hold
/// (a commit is sent again until every partition acknowledged it: none is left half visible).
#[test]
fn coordination_free_tpcc_keeps_consistent_under_message_loss_and_a_crash() {
    run::<RampF>(5, 20, 0.01, false);
}

/// A schema whose floor on `S_QUANTITY` is not invariant-confluent under New-Order's decrements (the
/// analyzer says so: `examples/tpcc-stock-floor`): the bounded New-Order keeps it at each stock row's owner.
/// Without restocking the stock runs down, New-Orders that would pass the floor abort (cause `user`), and
/// afterwards the floor holds on every stock row beside TPC-C's 12 conditions, the history read atomic.
#[test]
fn a_stock_floor_is_kept_by_aborting_the_new_orders_that_would_break_it() {
    let seed = 3;
    let mut spec = spec(seed, 40);
    spec.duration_ns = 500_000_000;
    spec.workload.tpcc.stock_floor = Some(10);
    let mut sim: Sim<RampF> = Sim::new(SimConfig::new(seed, Topology::new(1, 2), ProtocolConfig::default()));
    let report = drive_sim(&mut sim, &spec);
    let audit = report.tpcc.as_ref().expect("audited");
    assert!(audit.ok() && audit.count() == 13, "{audit}");
    assert!(audit.conditions[12].checked >= 1000, "every stock row checked: {audit}");
    let s = &report.summary;
    let new_order = s.kind("tpcc-cf-new-order-bounded").expect("bounded New-Orders ran");
    assert!(new_order.ok > 0, "{s}");
    let floor_aborts: u64 = s
        .failures
        .iter()
        .filter(|f| f.cause.contains("aborted (user)") && f.cause.contains("below its floor"))
        .map(|f| f.count)
        .sum();
    assert!(floor_aborts > 0, "the stock ran down to the floor and New-Orders aborted there:\n{s}\n{:?}", s.failures);
    let history = report.history.expect("recorded");
    let validated = snowline_checker::validate(&history).unwrap();
    let verdict = snowline_checker::check_history(&validated, Level::Ra);
    assert!(verdict.ok, "{verdict}");
}

/// The audit's floor condition catches a stock row below the floor.
#[test]
fn the_audit_catches_a_stock_row_below_the_floor() {
    use snowline_harness::tpcc;
    let spec = TpccSpec { scale: Scale::Small, stock_floor: Some(10), ..Default::default() };
    let shape = spec.shape(Topology::new(1, 1));
    let mut db: std::collections::BTreeMap<_, _> =
        tpcc::initial_database(&shape, 5).into_iter().flatten().map(|(k, v)| (k, Some(v))).collect();
    let audit = tpcc::audit(&shape, &db);
    assert!(audit.ok() && audit.count() == 13, "{audit}");
    db.insert(snowline_core::tpcc::stock_key(shape.districts_per_warehouse, 1, 7), Some("9,5,1,0;x".into()));
    let audit = tpcc::audit(&shape, &db);
    assert_eq!(audit.violated(), vec![13], "{audit}");
}
