//! The runs that must show an anomaly do, and the protocols that claim to prevent it do: the photo/ACL
//! workload (Contrarian Fig. 1, SNOW Fig. 3) across two datacenters, checked at `causal-snapshot`.

use snowline_checker::{AnomalyKind, Level, Verdict};
use snowline_core::{Protocol, ProtocolConfig, Topology};
use snowline_harness::{MixedWorkload, Pattern, RunSpec, run_sim};
use snowline_sim::SimConfig;

fn photo_acl<P: Protocol>(seed: u64) -> Verdict {
    let mut config = SimConfig::new(seed, Topology::new(2, 4), ProtocolConfig::default());
    config.network = config.network.with_uniform_inter_dc(40_000_000);
    let spec = RunSpec {
        clients_per_dc: 20,
        client_dcs: None,
        duration_ns: 1_000_000_000,
        warmup_ns: 0,
        cooldown_ns: 0,
        workload: MixedWorkload { pattern: Pattern::PhotoAcl { albums: 1000 }, ..Default::default() },
        record_history: true,
        seed,
        final_reads_after_ns: None,
        retry: Default::default(),
    };
    let history = run_sim::<P>(config, &spec).history.expect("recorded");
    snowline_checker::check(&history, Level::CausalSnapshot)
}

#[test]
fn cv_histories_of_the_photo_acl_workload_fail_causal_snapshot_with_a_witness() {
    let verdict = photo_acl::<snowline_protocols::Cv>(3);
    assert!(!verdict.ok, "CV must show the photo/ACL anomaly");
    assert!(verdict.counts.contains_key(&AnomalyKind::CausalityGap), "{verdict}");
    let witness = verdict.anomalies.iter().find(|a| a.name == AnomalyKind::CausalityGap).unwrap().to_string();
    assert!(witness.contains("photo") && witness.contains("acl") && witness.contains("happens-before"), "{witness}");
}

#[test]
fn the_causal_protocols_give_causal_snapshots_on_the_same_workload() {
    for verdict in [
        photo_acl::<snowline_protocols::Cure>(3),
        photo_acl::<snowline_protocols::Av>(3),
        photo_acl::<snowline_protocols::Op>(3),
    ] {
        assert!(verdict.ok, "{verdict}");
    }
}

/// A valid recorded history (AV in the simulator, which passes `tcc`) with one injected anomaly: the
/// checker must catch each, under its own name. The injected transaction is appended by a fresh process, so
/// nothing else in the history changes.
#[test]
fn anomalies_injected_into_a_recorded_history_are_caught_by_name() {
    use snowline_core::history::{EventType, HistoryEvent, HistoryOp, OpKind};
    let mut config = SimConfig::new(5, Topology::new(2, 2), ProtocolConfig::default());
    config.network = config.network.with_uniform_inter_dc(5_000_000);
    let spec = RunSpec {
        clients_per_dc: 4,
        duration_ns: 300_000_000,
        warmup_ns: 0,
        cooldown_ns: 0,
        workload: MixedWorkload { keys: 20, ..Default::default() },
        record_history: true,
        seed: 5,
        final_reads_after_ns: None,
        retry: Default::default(),
        client_dcs: None,
    };
    let history = run_sim::<snowline_protocols::Av>(config, &spec).history.expect("recorded");
    assert!(snowline_checker::check(&history, Level::Tcc).ok, "the recorded history is valid");

    let ok_writes: Vec<&HistoryEvent> =
        history.iter().filter(|e| e.kind == EventType::Ok && e.value.iter().all(|op| op.0 == OpKind::Write)).collect();
    let update = ok_writes.iter().find(|e| e.value.len() >= 2).expect("a multi-key update");
    // Two consecutive single writes of one process to different keys: the second depends on the first.
    let (first, second) = ok_writes
        .windows(2)
        .map(|w| (w[0], w[1]))
        .find(|(a, b)| {
            a.process == b.process && a.value.len() == 1 && b.value.len() == 1 && a.value[0].1 != b.value[0].1
        })
        .expect("two writes in one session");

    let inject = |reads: Vec<HistoryOp>, extra: Vec<HistoryEvent>| {
        let mut h = history.clone();
        let process = h.iter().map(|e| e.process).max().unwrap() + 1;
        let time = h.last().unwrap().time + 1;
        for mut e in extra {
            e.index = h.len() as u64;
            e.process = process;
            e.time = time;
            h.push(e);
        }
        let mut push = |kind, value: Vec<HistoryOp>| {
            let index = h.len() as u64;
            h.push(HistoryEvent {
                index,
                process,
                dc: 0,
                kind,
                f: "txn".into(),
                value,
                time: time + 1,
                error: None,
                cause: None,
                version: None,
            });
        };
        let invoked: Vec<HistoryOp> = reads.iter().map(|op| HistoryOp(op.0, op.1.clone(), None)).collect();
        push(EventType::Invoke, invoked);
        push(EventType::Ok, reads);
        h
    };
    let read =
        |k: &snowline_core::Key, v: Option<&snowline_core::Value>| HistoryOp(OpKind::Read, k.clone(), v.cloned());
    let caught = |h: &[HistoryEvent], level, kind: AnomalyKind| {
        let v = snowline_checker::check(h, level);
        assert!(v.counts.contains_key(&kind), "expected {kind:?}, got: {v}");
    };

    // Thin air: a value nobody wrote.
    let k = &update.value[0].1;
    caught(&inject(vec![read(k, Some(&"never-written".into()))], vec![]), Level::Rc, AnomalyKind::ThinAirRead);
    // Fractured read: one write of the update, and the initial state of another key it wrote.
    let (x, y) = (&update.value[0], &update.value[1]);
    caught(&inject(vec![read(&x.1, x.2.as_ref()), read(&y.1, None)], vec![]), Level::Ra, AnomalyKind::FracturedRead);
    // Causality gap: the second write of the session without the first.
    let (a, b) = (&first.value[0], &second.value[0]);
    caught(
        &inject(vec![read(&b.1, b.2.as_ref()), read(&a.1, None)], vec![]),
        Level::CausalSnapshot,
        AnomalyKind::CausalityGap,
    );
    // Session violation: a process writes a key, then reads the initial state of it.
    let own_write = |kind| HistoryEvent {
        index: 0,
        process: 0,
        dc: 0,
        kind,
        f: "txn".into(),
        value: vec![HistoryOp(OpKind::Write, "fresh-key".into(), Some("own-value".into()))],
        time: 0,
        error: None,
        cause: None,
        version: None,
    };
    caught(
        &inject(vec![read(&"fresh-key".into(), None)], vec![own_write(EventType::Invoke), own_write(EventType::Ok)]),
        Level::Causal,
        AnomalyKind::ReadYourWrites,
    );
}
