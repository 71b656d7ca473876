//! `reproduce snow-rococo` in miniature: a tiny simulator sweep of SNOW Fig. 7's TPC-C experiment with two
//! protocols, through the reproduction's own set-up, records, table, charts and headline.

use snowline_harness::report::RunRecord;
use snowline_harness::repro::{new_order_tps, per_server, stock_level_commit_rate, stock_level_p50_us};
use snowline_harness::tpcc::Scale;
use snowline_harness::{Experiment, Paper, Runtime};
use snowline_protocols::{Rococo, RococoSnow};

#[test]
fn a_tiny_snow_rococo_sweep_records_new_orders_stock_levels_and_the_audit() {
    let mut e = Experiment::new(Paper::SnowRococo, Runtime::Sim, true);
    assert_eq!(e.protocols, ["rococo-snow", "rococo", "2pl", "occ"]);
    e.protocols = vec!["rococo-snow".into(), "rococo".into()];
    // 2 servers (20 districts) with the small population, 1 and 5 concurrent requests per server; short runs.
    e.variants[0].topology.partitions = 2;
    e.variants[0].workload.tpcc.scale = Scale::Small;
    e.clients = vec![2, 10];
    e.duration_ns = 250_000_000;
    e.warmup_ns = 50_000_000;
    e.cooldown_ns = 0;
    let mut records: Vec<RunRecord> = Vec::new();
    for (variant, protocol, clients) in e.points() {
        let report = match protocol.as_str() {
            "rococo-snow" => e.run_sim::<RococoSnow>(variant, clients),
            _ => e.run_sim::<Rococo>(variant, clients),
        };
        records.push(e.record(variant, clients, report, &protocol, 0.0));
    }
    assert_eq!(records.len(), 4);
    for r in &records {
        let at = format!("{} at {} req/server", r.protocol, per_server(r));
        assert!(new_order_tps(r) > 0.0, "{at}: no New-Order committed");
        assert!(stock_level_p50_us(r).is_some_and(|us| us > 0.0), "{at}: no Stock-Level latency");
        let rate = stock_level_commit_rate(r).unwrap_or_else(|| panic!("{at}: no Stock-Level attempts"));
        assert!(rate > 0.0 && rate <= 1.0, "{at}: commit rate {rate}");
        let audit = r.tpcc.as_ref().unwrap_or_else(|| panic!("{at}: not audited"));
        assert!(audit.conditions.len() == 12 && audit.conditions.iter().all(|c| c.checked > 0), "{at}: {audit}");
        // Rococo runs a read-only procedure at least twice, Rococo-SNOW once; each execution is one round
        // per wave of Stock-Level's plan (D_NEXT_O_ID, the last 20 orders, their lines, the stock reads).
        let k = r.summary.kind("tpcc-stock-level").expect("committed");
        let least = if r.protocol == "rococo" { 2.0 } else { 1.0 };
        assert!(k.executions_mean >= least, "{at}: {} executions per Stock-Level", k.executions_mean);
        // (More when Rococo-SNOW restarts a read that ran past its readers horizon.)
        assert!(k.rounds_mean >= 4.0 * k.executions_mean, "{at}: {} rounds per Stock-Level", k.rounds_mean);
    }
    let low_snow = &records[0];
    assert_eq!((low_snow.protocol.as_str(), per_server(low_snow)), ("rococo-snow", 1.0));
    assert_eq!(low_snow.summary.kind("tpcc-stock-level").expect("committed").executions_mean, 1.0);
    let table = e.table(&records);
    assert!(table.contains("rococo-snow") && table.contains("12/12 ok"), "{table}");
    let headline = e.headline(&records);
    assert!(headline.contains("Rococo-SNOW / Rococo New-Order throughput") && headline.contains("4 of 4 runs audited"));
    let dir = std::env::temp_dir().join(format!("snowline-snow-rococo-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let charts = e.charts(&records, &dir).unwrap();
    assert_eq!(charts.len(), 3);
    assert!(charts.iter().all(|c| c.exists()));
    std::fs::remove_dir_all(&dir).unwrap();
}
