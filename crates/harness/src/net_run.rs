//! The closed-loop driver over a real cluster: the same workload, metrics and history as the simulator's.
// This driver is a runtime edge: it times operations with the real monotonic clock.
#![allow(clippy::disallowed_methods)]

use crate::client_loop::{Action, ClientLoop, Sink};
use crate::metrics::Metrics;
use crate::run::{RunReport, RunSpec};
use crate::workload::Generator;
use snowline_core::Protocol;
use snowline_core::history::HistoryRecorder;
use snowline_net::{ClientRuntime, ClusterConfig, DEFAULT_OP_TIMEOUT};
use std::cell::RefCell;
use std::time::{Duration, Instant};

/// Run `spec` against the running cluster described by `config`: `clients_per_dc` sessions per datacenter,
/// each issuing its next operation as soon as the previous one completes, until the duration is over.
pub async fn run_net<P: Protocol>(config: &ClusterConfig, spec: &RunSpec) -> anyhow::Result<RunReport> {
    run_net_with::<P>(config, spec, DEFAULT_OP_TIMEOUT).await
}

/// [`run_net`] with operations given up on (outcome unknown) after `op_timeout` instead of the client
/// library's default: runs that kill servers on purpose use a short one.
pub async fn run_net_with<P: Protocol>(
    config: &ClusterConfig,
    spec: &RunSpec,
    op_timeout: Duration,
) -> anyhow::Result<RunReport> {
    Ok(run_net_window::<P, ()>(config, spec, op_timeout, || ()).await?.0)
}

/// [`run_net_with`], also calling `probe` when the measured window starts (the warmup is over) and when it
/// ends (the cooldown begins), and returning both samples: what a benchmark measures over the window only
/// (CPU time, say).
pub async fn run_net_window<P: Protocol, T>(
    config: &ClusterConfig,
    spec: &RunSpec,
    op_timeout: Duration,
    mut probe: impl FnMut() -> T,
) -> anyhow::Result<(RunReport, [T; 2])> {
    let mut workload = spec.workload.clone();
    workload.tpcc.coordination_free = P::COORDINATION_FREE_TPCC;
    let generator = Generator::new(workload, config.topology())
        .write_transactions(P::OFFERS.write_transactions)
        .blind_writes(P::OFFERS.blind_writes || !P::OFFERS.interactive);
    let recorder = RefCell::new(HistoryRecorder::new());
    let metrics = RefCell::new(Metrics::default());
    let mut runtimes = Vec::new();
    for dc in config.topology().dc_ids().filter(|dc| spec.loads(*dc)) {
        runtimes.push((dc, ClientRuntime::<P>::connect(config, dc).await?.with_timeout(op_timeout)));
    }
    let start = Instant::now();
    let now_ns = || start.elapsed().as_nanos() as u64;
    // TPC-C: load the initial database through the protocol; the measured run starts after it.
    let tpcc = generator.tpcc().map(|g| g.shape.clone());
    let shifted;
    let spec = match (&tpcc, runtimes.first()) {
        (Some(shape), Some((_, runtime))) => {
            let loaded = load_net(&runtime.session(), shape, spec, P::OFFERS.write_transactions, now_ns).await?;
            if spec.record_history {
                let mut recorder = recorder.borrow_mut();
                let process = recorder.new_process();
                for (request, start, reply, end) in loaded {
                    recorder.invoke(process, 0, &request, start);
                    recorder.complete(process, 0, &request, &Ok(reply), end);
                }
            }
            shifted = spec.after(now_ns());
            &shifted
        }
        _ => spec,
    };
    let mut loops = Vec::new();
    for (dc, runtime) in &runtimes {
        for _ in 0..spec.clients_per_dc {
            let index = loops.len();
            let session = runtime.session();
            let (generator, recorder, metrics) = (&generator, &recorder, &metrics);
            let dc = *dc;
            loops.push(async move {
                let process = recorder.borrow_mut().new_process();
                let mut client = ClientLoop::new(dc, process, spec.generator_rng(index), spec.retry).with_index(index);
                // The borrows of the shared recorder and metrics never span an await.
                let sink = |f: &mut dyn FnMut(&mut Sink<'_>) -> Option<Action>| {
                    let (mut m, mut r) = (metrics.borrow_mut(), recorder.borrow_mut());
                    f(&mut Sink { spec, metrics: &mut m, recorder: &mut r })
                };
                let mut action = sink(&mut |s| Some(client.next(generator, now_ns(), s)));
                // A transaction under way when the run ends finishes its steps; no new job starts.
                while let Some(a) = action.take() {
                    match a {
                        Action::Submit(request) => {
                            client.submitted(now_ns());
                            let mut result = Some(session.execute(request).await);
                            action = sink(&mut |s| {
                                let now = now_ns();
                                let result = result.take().expect("handled once");
                                match client.on_result(generator, now, result, s) {
                                    Some(next) => Some(next),
                                    None if now >= spec.duration_ns => None,
                                    None => Some(client.next(generator, now, s)),
                                }
                            });
                        }
                        Action::WaitUntil(t) => {
                            if t >= spec.duration_ns {
                                break;
                            }
                            tokio::time::sleep(Duration::from_nanos(t.saturating_sub(now_ns()))).await;
                            action = sink(&mut |s| Some(client.next(generator, now_ns(), s)));
                        }
                    }
                }
                sink(&mut |s| {
                    client.finish(now_ns(), s);
                    None
                });
            });
        }
    }
    // The window's edges, on the clients' clock (after TPC-C's load, where the spec was shifted).
    let window = async {
        let until = |ns: u64| tokio::time::sleep(Duration::from_nanos(ns.saturating_sub(now_ns())));
        until(spec.warmup_ns).await;
        let first = probe();
        until(spec.duration_ns.saturating_sub(spec.cooldown_ns)).await;
        [first, probe()]
    };
    let (_, window) = futures::future::join(futures::future::join_all(loops), window).await;
    let audit = match (&tpcc, runtimes.first()) {
        (Some(shape), Some((_, runtime))) => Some(audit_net(&runtime.session(), shape).await),
        _ => None,
    };
    let metrics = metrics.into_inner();
    let report = RunReport {
        protocol: P::NAME.to_string(),
        summary: metrics.summary(spec.measured_seconds()),
        history: spec.record_history.then(|| recorder.into_inner().events),
        sim_events: None,
        converged: None,
        divergent: Vec::new(),
        tpcc: audit,
        final_read_rounds: None,
    };
    Ok((report, window))
}

/// A load request that succeeded: the request, its start, its reply, its end.
type Loaded = (snowline_core::Request, u64, snowline_core::Reply, u64);

/// TPC-C's initial database through `session` (see the simulator's loader); what to record in the history.
async fn load_net<P: Protocol>(
    session: &snowline_net::Session<P>,
    shape: &crate::tpcc::Shape,
    spec: &RunSpec,
    write_transactions: bool,
    now_ns: impl Fn() -> u64,
) -> anyhow::Result<Vec<Loaded>> {
    let mut loaded = Vec::new();
    for batch in crate::tpcc::initial_database(shape, spec.workload.tpcc.seed) {
        for request in crate::tpcc::load_requests(batch, write_transactions) {
            let mut attempts = 0;
            loop {
                attempts += 1;
                let start = now_ns();
                match session.execute(request.clone()).await {
                    Ok(reply) => {
                        if spec.record_history {
                            loaded.push((request, start, reply, now_ns()));
                        }
                        break;
                    }
                    Err(e) if attempts >= 20 => anyhow::bail!("loading TPC-C's initial database: {e}"),
                    Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
                }
            }
        }
    }
    Ok(loaded)
}

/// Read what the TPC-C audit needs after the clients stopped, and audit it.
async fn audit_net<P: Protocol>(session: &snowline_net::Session<P>, shape: &crate::tpcc::Shape) -> crate::tpcc::Audit {
    async fn read<P: Protocol>(
        session: &snowline_net::Session<P>,
        keys: Vec<snowline_core::Key>,
    ) -> std::collections::BTreeMap<snowline_core::Key, Option<snowline_core::Value>> {
        let mut state = std::collections::BTreeMap::new();
        for chunk in keys.chunks(crate::tpcc::AUDIT_CHUNK) {
            let request = snowline_core::Request::Rot { keys: chunk.to_vec() };
            let mut reply = None;
            for _ in 0..20 {
                match session.execute(request.clone()).await {
                    Ok(r) => {
                        reply = Some(r);
                        break;
                    }
                    Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
                }
            }
            for (i, k) in chunk.iter().enumerate() {
                let value = reply.as_ref().and_then(|r| r.reads.get(i)).and_then(|r| r.value.clone());
                state.insert(k.clone(), value);
            }
        }
        state
    }
    let mut state = std::collections::BTreeMap::new();
    loop {
        let keys = crate::tpcc::audit_next_keys(shape, &state);
        if keys.is_empty() {
            break;
        }
        state.extend(read(session, keys).await);
    }
    crate::tpcc::audit(shape, &state)
}
