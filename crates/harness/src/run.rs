//! Closed-loop drivers: the same workload, metrics and history recording over the simulator and over a
//! real cluster.

use crate::client_loop::{Action, ClientLoop, RetryPolicy, Sink};
use crate::metrics::{Metrics, Summary};
use crate::workload::{Generator, MixedWorkload};
use rand::SeedableRng;
use rand::rngs::SmallRng;
use serde::Serialize;
use snowline_core::history::HistoryRecorder;
use snowline_core::{ClientId, DcId, HistoryEvent, OpId, Protocol, Request};
use snowline_sim::{Sim, SimConfig};
use std::collections::{BTreeMap, BTreeSet};

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
    /// How clients retry aborted transactions.
    pub retry: RetryPolicy,
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

    /// This spec with its clock moved `offset_ns` later: the measured run starts after the load.
    pub(crate) fn after(&self, offset_ns: u64) -> RunSpec {
        RunSpec { duration_ns: self.duration_ns + offset_ns, warmup_ns: self.warmup_ns + offset_ns, ..self.clone() }
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
    /// The tpcc workload: the 12 consistency conditions checked on the final state.
    pub tpcc: Option<crate::tpcc::Audit>,
    /// With final reads: the most protocol rounds (`OpMetrics::rounds`) one of them took. They run once the
    /// system is quiet, so no write races them.
    pub final_read_rounds: Option<u32>,
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
    let mut workload = spec.workload.clone();
    workload.tpcc.coordination_free = P::COORDINATION_FREE_TPCC;
    let generator = Generator::new(workload, topology)
        .write_transactions(P::OFFERS.write_transactions)
        .blind_writes(P::OFFERS.blind_writes || !P::OFFERS.interactive);
    let mut recorder = HistoryRecorder::new();
    let mut metrics = Metrics::default();
    let tpcc = generator.tpcc().map(|g| g.shape.clone());
    // TPC-C: load the initial database through the protocol; the measured run starts after it.
    let shifted;
    let spec = match &tpcc {
        Some(shape) => {
            load_sim(sim, shape, spec, &mut recorder);
            shifted = spec.after(sim.now_ns());
            &shifted
        }
        None => spec,
    };
    let mut clients: BTreeMap<ClientId, ClientLoop> = BTreeMap::new();
    for dc in topology.dc_ids().filter(|dc| spec.loads(*dc)) {
        for _ in 0..spec.clients_per_dc {
            let id = sim.add_client(dc);
            let rng = spec.generator_rng(clients.len());
            let index = clients.len();
            clients.insert(id, ClientLoop::new(dc, recorder.new_process(), rng, spec.retry).with_index(index));
        }
    }
    // Clients waiting out a retry backoff: (wake time, client).
    let mut sleeping: BTreeSet<(u64, ClientId)> = BTreeSet::new();
    let mut next_op = 0u64;
    let mut act =
        |sim: &mut Sim<P>, sleeping: &mut BTreeSet<(u64, ClientId)>, id: ClientId, action: Action| match action {
            Action::Submit(request) => {
                sim.submit(id, OpId(next_op), request);
                next_op += 1;
            }
            Action::WaitUntil(t) => {
                sleeping.insert((t, id));
            }
        };
    for (id, c) in clients.iter_mut() {
        let mut sink = Sink { spec, metrics: &mut metrics, recorder: &mut recorder };
        let action = c.next(&generator, sim.now_ns(), &mut sink);
        act(sim, &mut sleeping, *id, action);
    }
    // A transaction under way when the run ends still finishes its steps (so that it releases what it holds);
    // no new job starts after the end.
    loop {
        let wake = sleeping.first().map_or(spec.duration_ns, |(t, _)| (*t).min(spec.duration_ns));
        let (id, action) = match sim.step_until(wake) {
            Some(done) => {
                let c = clients.get_mut(&done.client).expect("completions come from our clients");
                let mut sink = Sink { spec, metrics: &mut metrics, recorder: &mut recorder };
                let now = done.time_ns;
                let action = match c.on_result(&generator, now, done.result, &mut sink) {
                    Some(a) => a,
                    None if now > spec.duration_ns => continue,
                    None => c.next(&generator, now, &mut sink),
                };
                (done.client, action)
            }
            None if wake >= spec.duration_ns => break,
            None => {
                let (t, id) = sleeping.pop_first().expect("woken by a sleeping client");
                let mut sink = Sink { spec, metrics: &mut metrics, recorder: &mut recorder };
                (id, clients.get_mut(&id).expect("our client").next(&generator, t, &mut sink))
            }
        };
        act(sim, &mut sleeping, id, action);
    }
    let (mut converged, mut divergent, mut final_read_rounds) = (None, Vec::new(), None);
    if let Some(quiet_ns) = spec.final_reads_after_ns {
        // Let outstanding operations finish (without issuing more), then read everything everywhere.
        let deadline = sim.now_ns() + quiet_ns;
        while let Some(done) = sim.step_until(deadline) {
            let c = clients.get_mut(&done.client).expect("our client");
            let mut sink = Sink { spec, metrics: &mut metrics, recorder: &mut recorder };
            // A transaction in the middle of its steps finishes them (its commit may be what quiescing waits for).
            if let Some(action @ Action::Submit(_)) = c.on_result(&generator, done.time_ns, done.result, &mut sink) {
                act(sim, &mut sleeping, done.client, action);
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
            final_read_rounds = Some(final_read_rounds.unwrap_or(0).max(reply.metrics.rounds));
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
    let audit = tpcc.map(|shape| {
        // Let the calls under way finish (they start no new ones), then read the final state.
        let mut idle_since = sim.now_ns();
        while clients.values().any(ClientLoop::busy) && sim.now_ns() < idle_since + 60_000_000_000 {
            match sim.step_until(sim.now_ns() + 1_000_000_000) {
                Some(done) => {
                    idle_since = done.time_ns;
                    let c = clients.get_mut(&done.client).expect("our client");
                    let mut sink = Sink { spec, metrics: &mut metrics, recorder: &mut recorder };
                    if let Some(action @ Action::Submit(_)) =
                        c.on_result(&generator, done.time_ns, done.result, &mut sink)
                    {
                        act(sim, &mut sleeping, done.client, action);
                    }
                }
                None => continue,
            }
        }
        audit_sim(sim, &shape)
    });
    let end = sim.now_ns();
    for c in clients.values_mut() {
        c.finish(end, &mut Sink { spec, metrics: &mut metrics, recorder: &mut recorder });
    }
    RunReport {
        protocol: P::NAME.to_string(),
        summary: metrics.summary(spec.measured_seconds()),
        history: spec.record_history.then_some(recorder.events),
        sim_events: Some(sim.events_processed()),
        converged,
        divergent,
        tpcc: audit,
        final_read_rounds,
    }
}

/// Submit `request` from `client` and step the simulator until it completes (or `patience_ns` passes).
fn await_op<P: Protocol>(
    sim: &mut Sim<P>,
    client: ClientId,
    request: Request,
    patience_ns: u64,
) -> Option<(u64, Result<snowline_core::Reply, snowline_core::OpError>)> {
    sim.submit(client, OpId(0), request);
    let deadline = sim.now_ns() + patience_ns;
    while let Some(done) = sim.step_until(deadline) {
        if done.client == client {
            return Some((done.time_ns, done.result));
        }
    }
    None
}

/// TPC-C's initial database, written through the protocol by one loader client (`Update`s of one
/// partition's rows, or `Put`s where the protocol has no write transactions) and recorded in the history.
/// An attempt that fails is retried (it is recorded only once it succeeds: a failed one had no effect).
fn load_sim<P: Protocol>(sim: &mut Sim<P>, shape: &crate::tpcc::Shape, spec: &RunSpec, recorder: &mut HistoryRecorder) {
    let loader = sim.add_client(0);
    let process = recorder.new_process();
    for batch in crate::tpcc::initial_database(shape, spec.workload.tpcc.seed) {
        for request in crate::tpcc::load_requests(batch, P::OFFERS.write_transactions) {
            let mut attempts = 0;
            loop {
                attempts += 1;
                let start = sim.now_ns();
                let done = await_op(sim, loader, request.clone(), 60_000_000_000);
                match done {
                    Some((end, Ok(reply))) => {
                        if spec.record_history {
                            recorder.invoke(process, 0, &request, start);
                            recorder.complete(process, 0, &request, &Ok(reply), end);
                        }
                        break;
                    }
                    other if attempts < 100 => {
                        let _ = other;
                        sim.advance(10_000_000);
                    }
                    other => panic!("the TPC-C load failed 100 times: {other:?}"),
                }
            }
        }
    }
}

/// Read what the TPC-C audit needs, in read-only transactions of a fresh client after the run, and audit it.
fn audit_sim<P: Protocol>(sim: &mut Sim<P>, shape: &crate::tpcc::Shape) -> crate::tpcc::Audit {
    let reader = sim.add_client(0);
    let mut read = |keys: Vec<snowline_core::Key>| {
        let mut state = BTreeMap::new();
        for chunk in keys.chunks(crate::tpcc::AUDIT_CHUNK) {
            let request = Request::Rot { keys: chunk.to_vec() };
            let mut attempts = 0;
            let reply = loop {
                attempts += 1;
                match await_op(sim, reader, request.clone(), 60_000_000_000) {
                    Some((_, Ok(reply))) => break Some(reply),
                    _ if attempts < 20 => {
                        sim.advance(10_000_000);
                    }
                    _ => break None,
                }
            };
            for (i, k) in chunk.iter().enumerate() {
                let value = reply.as_ref().and_then(|r| r.reads.get(i)).and_then(|r| r.value.clone());
                state.insert(k.clone(), value);
            }
        }
        state
    };
    let mut state = BTreeMap::new();
    loop {
        let keys = crate::tpcc::audit_next_keys(shape, &state);
        if keys.is_empty() {
            break;
        }
        state.extend(read(keys));
    }
    crate::tpcc::audit(shape, &state)
}
