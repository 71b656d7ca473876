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
use std::collections::{BTreeMap, VecDeque};

/// What a run does, in either runtime.
#[derive(Clone, Debug)]
pub struct RunSpec {
    pub clients_per_dc: usize,
    /// Put clients only in the first this-many datacenters (SNOW §6.1 loads one datacenter); `None`: all.
    pub client_dcs: Option<u16>,
    pub duration_ns: u64,
    /// Operations started before this much time are not measured (they still enter the history).
    pub warmup_ns: u64,
    /// Operations ending in the last this-much time are not measured.
    pub cooldown_ns: u64,
    pub workload: MixedWorkload,
    pub record_history: bool,
    /// Seeds the clients' workload generators.
    pub seed: u64,
    /// After the run, let the system quiesce this long, then read every key in every datacenter and compare
    /// (simulator only). The reads enter the history.
    pub final_reads_after_ns: Option<u64>,
}

impl RunSpec {
    pub fn measured_seconds(&self) -> f64 {
        self.duration_ns.saturating_sub(self.warmup_ns + self.cooldown_ns) as f64 / 1e9
    }

    /// Whether datacenter `dc` runs clients.
    pub fn loads(&self, dc: DcId) -> bool {
        self.client_dcs.is_none_or(|n| dc < n)
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
    /// With final reads: whether every datacenter returned the same value for every key.
    pub converged: Option<bool>,
    /// With final reads: the keys on which datacenters disagreed, with each datacenter's value.
    pub divergent: Vec<(String, Vec<Option<String>>)>,
}

/// One closed-loop client: issues its next operation as soon as the previous one completes.
struct LoopClient {
    dc: DcId,
    process: u64,
    seq: u64,
    rng: SmallRng,
    current: Option<(OpId, Request, u64)>,
    /// The rest of the generator's current batch, issued before asking it for more.
    pending: VecDeque<Request>,
}

/// Run `spec` in the simulator and return the figures (and the history if asked).
pub fn run_sim<P: Protocol>(config: SimConfig, spec: &RunSpec) -> RunReport {
    let mut sim: Sim<P> = Sim::new(config);
    drive_sim(&mut sim, spec)
}

/// Drive `spec`'s closed-loop clients on an existing simulator (which tests may have set up with faults or
/// scenario holds), then, if asked, quiesce and do the final reads.
pub fn drive_sim<P: Protocol>(sim: &mut Sim<P>, spec: &RunSpec) -> RunReport {
    let topology = sim.topology();
    let generator = Generator::new(spec.workload.clone(), topology).write_transactions(P::OFFERS.write_transactions);
    let mut recorder = HistoryRecorder::new();
    let mut metrics = Metrics::default();
    let mut clients = BTreeMap::new();
    for dc in topology.dc_ids().filter(|dc| spec.loads(*dc)) {
        for _ in 0..spec.clients_per_dc {
            let id = sim.add_client(dc);
            let index = clients.len();
            let process = recorder.new_process();
            clients.insert(
                id,
                LoopClient {
                    dc,
                    process,
                    seq: 0,
                    rng: spec.generator_rng(index),
                    current: None,
                    pending: VecDeque::new(),
                },
            );
        }
    }
    let mut issue_op = 0u64;
    let mut issue = |sim: &mut Sim<P>, recorder: &mut HistoryRecorder, id, c: &mut LoopClient| {
        if c.pending.is_empty() {
            c.pending.extend(generator.next_batch(&mut c.rng, c.process, c.seq));
        }
        let request = c.pending.pop_front().expect("a batch has at least one request");
        c.seq += 1;
        let op = OpId(issue_op);
        issue_op += 1;
        let now = sim.now_ns();
        if spec.record_history {
            recorder.invoke(c.process, c.dc, &request, now);
        }
        c.current = Some((op, request.clone(), now));
        sim.submit(id, op, request);
    };
    for (id, c) in clients.iter_mut() {
        issue(sim, &mut recorder, *id, c);
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
        issue(sim, &mut recorder, done.client, c);
    }
    let (mut converged, mut divergent) = (None, Vec::new());
    if let Some(quiet_ns) = spec.final_reads_after_ns {
        // Let outstanding operations finish (without issuing more), then read everything everywhere.
        let deadline = sim.now_ns() + quiet_ns;
        while let Some(done) = sim.step_until(deadline) {
            let c = clients.get_mut(&done.client).expect("our client");
            let (_, request, _) = c.current.take().expect("current operation");
            if spec.record_history {
                c.process = recorder.complete(c.process, c.dc, &request, &done.result, done.time_ns);
            }
        }
        let keys = generator.keys();
        let mut by_dc = Vec::new();
        for dc in topology.dc_ids() {
            let reader = sim.add_client(dc);
            let process = recorder.new_process();
            let request = Request::Rot { keys: keys.clone() };
            if spec.record_history {
                recorder.invoke(process, dc, &request, sim.now_ns());
            }
            sim.submit(reader, OpId(0), request.clone());
            let done = loop {
                let done =
                    sim.step_until(sim.now_ns() + quiet_ns).expect("a final read completes once the system is quiet");
                if done.client == reader {
                    break done;
                }
            };
            if spec.record_history {
                recorder.complete(process, dc, &request, &done.result, done.time_ns);
            }
            let reply = done.result.expect("final reads succeed");
            by_dc.push(reply.reads.into_iter().map(|r| r.value).collect::<Vec<_>>());
        }
        for (i, key) in keys.iter().enumerate() {
            let values: Vec<Option<String>> = by_dc.iter().map(|vals| vals[i].as_deref().map(String::from)).collect();
            if values.iter().any(|v| *v != values[0]) {
                divergent.push((key.to_string(), values));
            }
        }
        converged = Some(divergent.is_empty());
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
        converged,
        divergent,
    }
}
