//! A nemesis's faults inside the runtime (`snowline_net::faults`): a cut between two datacenters holds
//! replication back until it heals, and loses nothing.

// Tests of a real server: they wait on the real clock.
#![allow(clippy::disallowed_methods)]

use snowline_core::{Key, Request};
use snowline_net::faults::FaultPlan;
use snowline_net::{ClientRuntime, ClusterConfig, free_base_port};
use snowline_protocols::Cv;
use std::time::Duration;
use tokio::time::Instant;

use crate::common;

#[tokio::test]
async fn a_cut_between_datacenters_delays_replication_until_it_heals() {
    let dir = std::env::temp_dir().join(format!("snowline-faults-{}-{}", std::process::id(), free_base_port()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("faults.json");
    let mut config = ClusterConfig::local("cv", 2, 1, free_base_port()).insecure();
    config.fault_file = Some(file.clone());
    let (a, b) = (config.nodes[0].id, config.nodes[1].id);
    assert_ne!(config.nodes[0].dc, config.nodes[1].dc);
    FaultPlan { cut: vec![(a, b)], ..Default::default() }.write(&file).unwrap();
    let cluster = common::start::<Cv>(config).await;
    tokio::time::sleep(Duration::from_millis(100)).await; // every server has read the plan

    let dc0 = ClientRuntime::<Cv>::connect(&cluster.config, 0).await.unwrap();
    let dc1 = ClientRuntime::<Cv>::connect(&cluster.config, 1).await.unwrap();
    let (w, r) = (dc0.session(), dc1.session());
    let key: Key = "k".into();
    w.execute(Request::Put { key: key.clone(), value: "v".into() }).await.unwrap();
    let read = || async { r.execute(Request::Rot { keys: vec![key.clone()] }).await.unwrap().reads[0].value.clone() };
    let cut_until = Instant::now() + Duration::from_millis(500);
    while Instant::now() < cut_until {
        assert_eq!(read().await, None, "nothing crosses the cut");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    FaultPlan::default().write(&file).unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    while read().await.is_none() {
        assert!(Instant::now() < deadline, "the write crosses once the cut heals");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    drop((w, r, dc0, dc1));
    cluster.stop().await;
    let _ = std::fs::remove_dir_all(&dir);
}
