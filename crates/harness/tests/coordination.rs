//! `reproduce coordination` in miniature: a tiny simulator run of the coordination-avoidance paper's New-Order
//! scale-out and distributed-share sweeps, coordination-free (RAMP-F) beside 2PL, through the reproduction's
//! own set-up, records, table, charts and headline.

use snowline_harness::report::RunRecord;
use snowline_harness::repro::{COORDINATION_PROTOCOLS, WAREHOUSES_PER_SERVER, new_orders};
use snowline_harness::{Experiment, Paper, Runtime};
use snowline_protocols::{RampF, TwoPl};

#[test]
fn a_tiny_coordination_sweep_scales_new_orders_and_audits_them() {
    let mut e = Experiment::new(Paper::Coordination, Runtime::Sim, true);
    assert_eq!(e.protocols, COORDINATION_PROTOCOLS);
    e.protocols = vec!["ramp-f".into(), "2pl".into()];
    // 1 and 2 servers, the distributed sweep's 0% and 100% on 2 servers; 8 clients per server, short runs.
    e.variants.retain(|v| ["1 servers", "10 servers", "0% distributed", "100% distributed"].contains(&&*v.label));
    for v in &mut e.variants {
        let servers: u16 = if v.label == "1 servers" { 1 } else { 2 };
        v.topology.partitions = servers;
        v.workload.tpcc.warehouses = WAREHOUSES_PER_SERVER * u32::from(servers);
        v.x = if v.label.ends_with(" servers") { f64::from(servers) } else { v.x };
        v.clients = Some(vec![8 * usize::from(servers)]);
        v.protocols = None;
        assert!(v.workload.tpcc.new_order_only);
    }
    e.variants[1].label = "2 servers".into();
    e.duration_ns = 40_000_000;
    e.warmup_ns = 10_000_000;
    e.cooldown_ns = 0;
    let mut records: Vec<RunRecord> = Vec::new();
    for (variant, protocol, clients) in e.points() {
        let report = match protocol.as_str() {
            "ramp-f" => e.run_sim::<RampF>(variant, clients),
            _ => e.run_sim::<TwoPl>(variant, clients),
        };
        records.push(e.record(variant, clients, report, &protocol, 1.0));
    }
    assert_eq!(records.len(), 8);
    for r in &records {
        let at = format!("{} {}", r.protocol, r.variant);
        assert!(new_orders(r) > 0.0, "{at}: no New-Order committed");
        let only: Vec<&str> =
            r.summary.per_kind.iter().map(|k| k.kind.as_str()).filter(|k| k.starts_with("tpcc")).collect();
        assert_eq!(only.len(), 1, "{at}: New-Order only: {only:?}");
        let audit = r.tpcc.as_ref().unwrap_or_else(|| panic!("{at}: not audited"));
        assert!(audit.ok(), "{at}: {audit}");
    }
    let table = e.table(&records);
    assert!(table.contains("ramp-f") && table.contains("12/12 ok"), "{table}");
    let headline = e.headline(&records);
    for needle in
        ["89.5%", "of linear from 1 to 2 servers", "at 100% distributed", "2pl", "8 of 8 runs audited", "events/s"]
    {
        assert!(headline.contains(needle), "{needle}: {headline}");
    }
    let dir = std::env::temp_dir().join(format!("snowline-coordination-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let charts = e.charts(&records, &dir).unwrap();
    assert_eq!(charts.len(), 3);
    assert!(charts.iter().all(|c| c.exists()));
    std::fs::remove_dir_all(&dir).unwrap();
}
