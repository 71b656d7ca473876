//! The closed-loop driver over a real cluster: the same workload, metrics and history as the simulator's.
// This driver is a runtime edge: it times operations with the real monotonic clock.
#![allow(clippy::disallowed_methods)]

use crate::client_loop::{Action, ClientLoop, Sink};
use crate::metrics::Metrics;
use crate::run::{RunReport, RunSpec};
use crate::workload::Generator;
use snowline_core::history::HistoryRecorder;
use snowline_core::{DcId, Protocol};
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
    Ok(run_net_window::<P, ()>(config, spec, op_timeout, 1, || ()).await?.0)
}

/// [`run_net_with`], also calling `probe` when the measured window starts (the warmup is over) and when it
/// ends (the cooldown begins), and returning both samples: what a benchmark measures over the window only
/// (CPU time, say). The clients run on `threads` OS threads (at least one, at most one per client), each
/// with its own single-threaded runtime and connections, as an application's threads would: on one thread
/// every client's work queues behind one core (`docs/RESULTS.md`, "The Jessy family's speed").
pub async fn run_net_window<P: Protocol, T>(
    config: &ClusterConfig,
    spec: &RunSpec,
    op_timeout: Duration,
    threads: usize,
    mut probe: impl FnMut() -> T,
) -> anyhow::Result<(RunReport, [T; 2])> {
    let mut workload = spec.workload.clone();
    workload.tpcc.coordination_free = P::COORDINATION_FREE_TPCC;
    let generator = Generator::new(workload, config.topology())
        .write_transactions(P::OFFERS.write_transactions)
        .blind_writes(P::OFFERS.blind_writes || !P::OFFERS.interactive);
    let mut recorder = HistoryRecorder::new();
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
    // Every client's datacenter and index (which seeds its generator), dealt out to the threads in turn.
    let clients: Vec<(DcId, usize)> = runtimes
        .iter()
        .flat_map(|(dc, _)| std::iter::repeat_n(*dc, spec.clients_per_dc))
        .enumerate()
        .map(|(index, dc)| (dc, index))
        .collect();
    let threads = threads.clamp(1, clients.len().max(1));
    let share = |t: usize| clients.iter().copied().skip(t).step_by(threads).collect::<Vec<_>>();
    let mut others = Vec::new();
    for t in 1..threads {
        let (config, spec, generator, mine) = (config.clone(), spec.clone(), generator.clone(), share(t));
        let (tx, rx) = tokio::sync::oneshot::channel();
        let thread = std::thread::Builder::new().name(format!("clients-{t}")).spawn(move || {
            let run = async {
                let mut runtimes = Vec::new();
                for dc in mine.iter().map(|(dc, _)| *dc).collect::<std::collections::BTreeSet<_>>() {
                    runtimes.push((dc, ClientRuntime::<P>::connect(&config, dc).await?.with_timeout(op_timeout)));
                }
                // Process ids of its own: the threads' histories merge without clashes.
                let recorder = HistoryRecorder::starting_at(t as u64 * THREAD_PROCESSES);
                anyhow::Ok(run_clients(&runtimes, &mine, &spec, &generator, start, recorder).await)
            };
            let outcome = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(anyhow::Error::from)
                .and_then(|rt| rt.block_on(run));
            let _ = tx.send(outcome);
        })?;
        others.push((thread, rx));
    }
    // The window's edges, on the clients' clock (after TPC-C's load, where the spec was shifted).
    let window = async {
        let until = |ns: u64| tokio::time::sleep(Duration::from_nanos(ns.saturating_sub(now_ns())));
        until(spec.warmup_ns).await;
        let first = probe();
        until(spec.duration_ns.saturating_sub(spec.cooldown_ns)).await;
        [first, probe()]
    };
    let first = share(0);
    let mine = run_clients(&runtimes, &first, spec, &generator, start, recorder);
    let ((mut metrics, mut recorder), window) = futures::future::join(mine, window).await;
    for (thread, rx) in others {
        let outcome = rx.await.map_err(|_| anyhow::anyhow!("a client thread stopped without its results"));
        let _ = thread.join();
        let (m, r) = outcome??;
        metrics.merge(&m);
        recorder.absorb(r);
    }
    let audit = match (&tpcc, runtimes.first()) {
        (Some(shape), Some((_, runtime))) => Some(audit_net(&runtime.session(), shape).await),
        _ => None,
    };
    let report = RunReport {
        protocol: P::NAME.to_string(),
        summary: metrics.summary(spec.measured_seconds()),
        history: spec.record_history.then_some(recorder.events),
        sim_events: None,
        converged: None,
        divergent: Vec::new(),
        tpcc: audit,
        final_read_rounds: None,
    };
    Ok((report, window))
}

/// Process ids of each client thread (its recorder starts at its number times this).
const THREAD_PROCESSES: u64 = 1 << 32;

/// The closed loops of `clients` (datacenter, index) over `runtimes` until the run is over: their metrics
/// and history.
async fn run_clients<P: Protocol>(
    runtimes: &[(DcId, ClientRuntime<P>)],
    clients: &[(DcId, usize)],
    spec: &RunSpec,
    generator: &Generator,
    start: Instant,
    recorder: HistoryRecorder,
) -> (Metrics, HistoryRecorder) {
    let now_ns = || start.elapsed().as_nanos() as u64;
    let recorder = RefCell::new(recorder);
    let metrics = RefCell::new(Metrics::default());
    let mut loops = Vec::new();
    for &(dc, index) in clients {
        let Some((_, runtime)) = runtimes.iter().find(|(d, _)| *d == dc) else { continue };
        let session = runtime.session();
        let (recorder, metrics) = (&recorder, &metrics);
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
    futures::future::join_all(loops).await;
    (metrics.into_inner(), recorder.into_inner())
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
