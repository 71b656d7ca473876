//! The harness: workload generators, closed-loop drivers for both runtimes, metrics and reports.
//!
//! One workload, one metrics pipeline and one history recorder serve every protocol in both the
//! simulator ([`run::run_sim`]) and a real cluster ([`net_run::run_net`]).

pub mod bound;
pub mod charts;
pub mod client_loop;
pub mod metrics;
pub mod net_run;
pub mod report;
pub mod repro;
pub mod run;
pub mod snow_table;
pub mod tpcc;
pub mod tpcc_plan;
pub mod workload;

pub use client_loop::{ClientLoop, RetryPolicy};
pub use metrics::{FailureCount, Metrics, Summary, failure_cause};
pub use report::RunRecord;
pub use repro::{Experiment, Paper, Runtime};
pub use run::{RunReport, RunSpec, drive_sim, run_sim};
pub use workload::{
    CallJob, Generator, HotSpot, Job, KeyDist, MixedWorkload, Pattern, TxnPlan, YcsbMix, YcsbShape, Zipf,
};
