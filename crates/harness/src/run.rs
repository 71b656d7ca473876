//! Closed-loop drivers: the same workload, metrics and history recording over the simulator and over a
//! real cluster.

use crate::metrics::{Metrics, Summary};
use crate::workload::{Generator, MixedWorkload};
use rand::SeedableRng;
use rand::rngs::SmallRng;
use serde::Serialize;
use snowline_core::history::HistoryRecorder;
use snowline_core::{DcId, HistoryEvent, OpError, OpId, Protocol, Request};
use snowline_sim::{Sim, SimConfig};
use std::collections::BTreeMap;

/// What a run does, in either runtime.
#[derive(Clone, Debug)]
pub struct RunSpec {
    pub clients_per_dc: usize,
    pub duration_ns: u64,
    /// Operations started before this much time are not measured (they still enter the history).
    pub warmup_ns: u64,
    /// Operations ending in the last this-much time are not measured.
    pub cooldown_ns: u64,
    pub workload: MixedWorkload,
    pub record_history: bool,
    /// Seeds the clients' workload generators.
    pub seed: u64,
}

impl RunSpec {
    pub fn measured_seconds(&self) -> f64 {
        self.duration_ns.saturating_sub(self.warmup_ns + self.cooldown_ns) as f64 / 1e9
    }

    pub(crate) fn measured(&self, start_ns: u64, end_ns: u64) -> bool {
        start_ns >= self.warmup_ns && end_ns + self.cooldown_ns <= self.duration_ns
    }

    pub(crate) fn generator_rng(&self, client_index: usize) -> SmallRng {
        SmallRng::seed_from_u64(self.seed ^ (client_index as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15))
    }
}

/// What a run produced.
#[derive(Clone, Debug, Serialize)]
pub struct RunReport {
    pub protocol: String,
    pub summary: Summary,
    #[serde(skip)]
    pub history: Option<Vec<HistoryEvent>>,
    /// Simulated events processed (simulator runs only).
    pub sim_events: Option<u64>,
}

/// One closed-loop client: issues its next operation as soon as the previous one completes.
struct LoopClient {
    dc: DcId,
    process: u64,
    seq: u64,
    rng: SmallRng,
    current: Option<(OpId, Request, u64)>,
}

/// Run `spec` in the simulator and return the figures (and the history if asked).
pub fn run_sim<P: Protocol>(config: SimConfig, spec: &RunSpec) -> RunReport {
    let generator = Generator::new(spec.workload.clone());
    let mut sim: Sim<P> = Sim::new(config.clone());
    let mut recorder = HistoryRecorder::new();
    let mut metrics = Metrics::default();
    let mut clients = BTreeMap::new();
    for dc in config.topology.dc_ids() {
        for _ in 0..spec.clients_per_dc {
            let id = sim.add_client(dc);
            let index = clients.len();
            let process = recorder.new_process();
            clients.insert(id, LoopClient { dc, process, seq: 0, rng: spec.generator_rng(index), current: None });
        }
    }
    let mut next_op = 0u64;
    let mut issue = |sim: &mut Sim<P>, recorder: &mut HistoryRecorder, id, c: &mut LoopClient| {
        let request = generator.next(&mut c.rng, c.process, c.seq);
        c.seq += 1;
        let op = OpId(next_op);
        next_op += 1;
        let now = sim.now_ns();
        if spec.record_history {
            recorder.invoke(c.process, c.dc, &request, now);
        }
        c.current = Some((op, request.clone(), now));
        sim.submit(id, op, request);
    };
    for (id, c) in clients.iter_mut() {
        issue(&mut sim, &mut recorder, *id, c);
    }
    while let Some(done) = sim.step_until(spec.duration_ns) {
        let c = clients.get_mut(&done.client).expect("completions come from our clients");
        let (op, request, start) = c.current.take().expect("a completion answers the current operation");
        assert_eq!(op, done.op, "a client completes the operation it was given");
        if spec.measured(start, done.time_ns) {
            metrics.record(&request, &done.result, done.time_ns - start);
        }
        if spec.record_history {
            c.process = recorder.complete(c.process, c.dc, &request, &done.result, done.time_ns);
        }
        issue(&mut sim, &mut recorder, done.client, c);
    }
    if spec.record_history {
        let end = sim.now_ns();
        for c in clients.values_mut() {
            if let Some((_, request, _)) = c.current.take() {
                let unknown = Err(OpError::Unknown("the run ended before the operation completed".into()));
                recorder.complete(c.process, c.dc, &request, &unknown, end);
            }
        }
    }
    RunReport {
        protocol: P::NAME.to_string(),
        summary: metrics.summary(spec.measured_seconds()),
        history: spec.record_history.then_some(recorder.events),
        sim_events: Some(sim.events_processed()),
    }
}
