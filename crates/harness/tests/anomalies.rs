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
