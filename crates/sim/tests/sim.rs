//! Tests of the simulator's model with a tiny protocol defined here ("echo"): a client sends a read or a
//! write to the server of its datacenter owning the key, the server answers; servers ping their siblings in
//! the other datacenters on a periodic timer.

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};
use snowline_core::{
    Addr, ClientId, ClientNode, Ctx, DcId, InvalidInput, LinkAssumptions, Message, OpError, OpId, Protocol,
    ProtocolConfig, ReadResult, Reply, Request, ServerId, ServerNode, Topology, Version,
};
use snowline_sim::{CLOCK_BASE_NS, ClockModel, Completion, CpuModel, NetworkModel, Sim, SimConfig};
use std::collections::BTreeMap;

/// The echo protocol; `FIFO` is what it declares of its links.
struct Echo<const FIFO: bool>;

#[derive(Clone, Debug, Serialize, Deserialize)]
enum Msg {
    Get { op: u64, key: String },
    Put { op: u64, key: String, value: String },
    Value { op: u64, key: String, value: Option<String>, version: u64 },
    Seq { n: u64 },
    Ping { n: u64 },
}

impl Message for Msg {
    fn kind(&self) -> &'static str {
        match self {
            Msg::Get { .. } => "get",
            Msg::Put { .. } => "put",
            Msg::Value { .. } => "value",
            Msg::Seq { .. } => "seq",
            Msg::Ping { .. } => "ping",
        }
    }
}

#[derive(Clone, Debug, Serialize, Deserialize)]
struct Tick;

#[derive(Serialize, Deserialize)]
struct EchoServer {
    id: ServerId,
    topology: Topology,
    ping_interval_ns: u64,
    store: BTreeMap<String, (String, u64)>,
    next_ping: u64,
    /// (sender dc, ping number, my clock when it arrived)
    pings: Vec<(DcId, u64, u64)>,
    seqs: Vec<u64>,
    clock_readings: Vec<u64>,
    ticks: u64,
}

impl<const F: bool> ServerNode<Echo<F>> for EchoServer {
    fn on_start(&mut self, cx: &mut Ctx<'_, Echo<F>>) {
        self.clock_readings.push(cx.now_ns());
        if self.ping_interval_ns > 0 {
            cx.set_timer(self.ping_interval_ns, Tick);
        }
    }

    fn on_message(&mut self, cx: &mut Ctx<'_, Echo<F>>, from: Addr, msg: Msg) -> Result<(), InvalidInput> {
        self.clock_readings.push(cx.now_ns());
        match msg {
            Msg::Get { op, key } => {
                cx.charge(1);
                let (value, version) = match self.store.get(&key) {
                    Some((v, t)) => (Some(v.clone()), *t),
                    None => (None, 0),
                };
                if key == "ghost" {
                    cx.send(ClientId(12_345), Msg::Value { op, key: key.clone(), value: value.clone(), version });
                }
                cx.send(from, Msg::Value { op, key, value, version });
            }
            Msg::Put { op, key, value } => {
                cx.charge(2);
                let version = cx.now_ns();
                self.store.insert(key.clone(), (value.clone(), version));
                cx.send(from, Msg::Value { op, key, value: Some(value), version });
            }
            Msg::Seq { n } => self.seqs.push(n),
            Msg::Ping { n } => {
                let Addr::Server(s) = from else { panic!("ping from a client") };
                self.pings.push((s.dc, n, cx.now_ns()));
            }
            Msg::Value { .. } => panic!("server got a reply"),
        }
        Ok(())
    }

    fn on_timer(&mut self, cx: &mut Ctx<'_, Echo<F>>, _timer: Tick) {
        self.clock_readings.push(cx.now_ns());
        self.ticks += 1;
        for s in self.topology.siblings(self.id) {
            cx.send(s, Msg::Ping { n: self.next_ping });
        }
        self.next_ping += 1;
        cx.set_timer(self.ping_interval_ns, Tick);
    }

    fn stored_versions(&self) -> usize {
        self.store.len()
    }
}

struct EchoClient {
    dc: DcId,
    topology: Topology,
}

impl<const F: bool> ClientNode<Echo<F>> for EchoClient {
    fn on_request(&mut self, cx: &mut Ctx<'_, Echo<F>>, op: OpId, request: Request) {
        match request {
            Request::Rot { keys } => {
                let key = keys[0].to_string();
                cx.send(self.topology.server_of(self.dc, &key), Msg::Get { op: op.0, key });
            }
            Request::Put { key, value } => {
                let to = self.topology.server_of(self.dc, &key);
                cx.send(to, Msg::Put { op: op.0, key: key.to_string(), value: value.to_string() });
            }
            // Test-only meaning: send one `Seq` per write, in order, to the first key's server, in one handler.
            Request::Update { writes } => {
                let to = self.topology.server_of(self.dc, &writes[0].0);
                for n in 0..writes.len() as u64 {
                    cx.send(to, Msg::Seq { n });
                }
                cx.complete(op, Ok(Reply::default()));
            }
            _ => cx.complete(op, Err(OpError::Rejected("unsupported".into()))),
        }
    }

    fn on_message(&mut self, cx: &mut Ctx<'_, Echo<F>>, from: Addr, msg: Msg) {
        let Msg::Value { op, key, value, version } = msg else { panic!("client got {msg:?} from {from}") };
        let Addr::Server(s) = from else { panic!("reply from a client") };
        let read = ReadResult {
            key: key.into(),
            value: value.map(Into::into),
            version: Version { time: version, dc: s.dc },
            versions_skipped: 0,
        };
        cx.complete(OpId(op), Ok(Reply { reads: vec![read], ..Reply::default() }));
    }
}

impl<const F: bool> Protocol for Echo<F> {
    const NAME: &'static str = "echo";
    type Msg = Msg;
    type Timer = Tick;
    type Server = EchoServer;
    type Client = EchoClient;
    const OFFERS: snowline_core::Offers = snowline_core::Offers::CAUSAL;

    fn links() -> LinkAssumptions {
        LinkAssumptions { fifo: F }
    }

    fn server(id: ServerId, topology: Topology, config: &ProtocolConfig) -> EchoServer {
        EchoServer {
            id,
            topology,
            ping_interval_ns: config.stabilisation_interval_ms * 1_000_000,
            store: BTreeMap::new(),
            next_ping: 0,
            pings: Vec::new(),
            seqs: Vec::new(),
            clock_readings: Vec::new(),
            ticks: 0,
        }
    }

    fn client(_id: ClientId, dc: DcId, topology: Topology, _config: &ProtocolConfig) -> EchoClient {
        EchoClient { dc, topology }
    }
}

type EchoFifo = Echo<true>;
type EchoUnordered = Echo<false>;

const MS: u64 = 1_000_000;

fn config(seed: u64, dcs: u16, partitions: u16) -> SimConfig {
    SimConfig::new(seed, Topology::new(dcs, partitions), ProtocolConfig::default())
}

fn get(key: &str) -> Request {
    Request::Rot { keys: vec![key.into()] }
}

fn put(key: &str, value: &str) -> Request {
    Request::Put { key: key.into(), value: value.into() }
}

/// A closed-loop workload: each client keeps one operation outstanding; the operation choice comes from a
/// generator seeded by the run's seed (the application side, outside the simulator).
fn closed_loop<const F: bool>(seed: u64, ops: u64) -> (Vec<Completion>, u64, Vec<String>) {
    let mut sim = Sim::<Echo<F>>::new(config(seed, 3, 4));
    sim.set_trace(true);
    let mut app = SmallRng::seed_from_u64(seed);
    let clients: Vec<ClientId> = (0..12).map(|i| sim.add_client(i % 3)).collect();
    let mut next_op = 0u64;
    let mut request = |app: &mut SmallRng| {
        let key = format!("k{}", app.random_range(0..20));
        let op = OpId(next_op);
        next_op += 1;
        let r = if app.random_bool(0.5) { get(&key) } else { put(&key, &format!("v{}", op.0)) };
        (op, r)
    };
    for c in &clients {
        let (op, r) = request(&mut app);
        sim.submit(*c, op, r);
    }
    let mut done = Vec::new();
    while (done.len() as u64) < ops {
        let c = sim.step_until(u64::MAX).expect("closed loop never runs dry");
        let (op, r) = request(&mut app);
        sim.submit(c.client, op, r);
        done.push(c);
    }
    let trace = sim.trace().to_vec();
    (done, sim.events_processed(), trace)
}

#[test]
fn same_seed_same_run() {
    let a = closed_loop::<true>(7, 300);
    let b = closed_loop::<true>(7, 300);
    assert_eq!(format!("{:?}", a.0), format!("{:?}", b.0));
    assert_eq!(a.1, b.1);
    assert_eq!(a.2, b.2);
    let c = closed_loop::<false>(7, 300);
    let d = closed_loop::<false>(7, 300);
    assert_eq!(format!("{:?}", c.0), format!("{:?}", d.0));
    assert_eq!(c.1, d.1);
}

#[test]
fn different_seeds_different_timing() {
    let a = closed_loop::<true>(1, 100);
    let b = closed_loop::<true>(2, 100);
    let times = |v: &Vec<Completion>| v.iter().map(|c| c.time_ns).collect::<Vec<_>>();
    assert_ne!(times(&a.0), times(&b.0));
}

#[test]
fn completions_answer_requests() {
    let mut sim = Sim::<EchoFifo>::new(config(3, 2, 3));
    let c = sim.add_client(1);
    sim.submit(c, OpId(1), put("x", "1"));
    let w = sim.step_until(u64::MAX).unwrap();
    assert_eq!((w.client, w.op), (c, OpId(1)));
    sim.submit(c, OpId(2), get("x"));
    let r = sim.step_until(u64::MAX).unwrap();
    let read = &r.result.as_ref().unwrap().reads[0];
    assert_eq!(read.value.as_deref(), Some("1"));
    assert_eq!(read.version.dc, 1);
    assert!(r.time_ns > w.time_ns);
    assert_eq!(sim.messages_by_kind().get("put"), Some(&1));
}

/// Send 200 messages in one handler over a link with 100% jitter: a FIFO protocol sees them in order, an
/// unordered one (with `reorder`) does not.
fn seqs_received<const F: bool>(seed: u64) -> Vec<u64> {
    let mut cfg = config(seed, 1, 1);
    cfg.network.jitter = 1.0;
    cfg.network.reorder = true;
    cfg.protocol.stabilisation_interval_ms = 0;
    let mut sim = Sim::<Echo<F>>::new(cfg);
    let c = sim.add_client(0);
    let writes = (0..200).map(|i| ("k".into(), format!("{i}").into())).collect();
    sim.submit(c, OpId(0), Request::Update { writes });
    sim.run_until(10 * MS);
    sim.server(ServerId::new(0, 0)).seqs.clone()
}

#[test]
fn fifo_links_preserve_order_under_jitter() {
    let fifo = seqs_received::<true>(5);
    assert_eq!(fifo, (0..200).collect::<Vec<_>>());
    let unordered = seqs_received::<false>(5);
    assert_eq!(unordered.len(), 200);
    assert_ne!(unordered, (0..200).collect::<Vec<_>>(), "jitter should reorder an unordered link");
}

#[test]
fn cpu_model_queues_simultaneous_inputs() {
    let mut cfg = config(11, 1, 1);
    cfg.network = NetworkModel::exact(100_000, 0);
    cfg.cpu = CpuModel { base_ns: 7_000, per_work_unit_ns: 1_000, ..CpuModel::free() };
    cfg.protocol.stabilisation_interval_ms = 0;
    let mut sim = Sim::<EchoFifo>::new(cfg);
    let (a, b) = (sim.add_client(0), sim.add_client(0));
    sim.submit(a, OpId(0), get("k"));
    sim.submit(b, OpId(0), get("k"));
    let done = sim.run_until(MS);
    assert_eq!(done.len(), 2);
    let cost = 7_000 + 1_000; // one Get charges one unit
    // Both arrive at 100 µs; the first is answered at 100 µs + cost, the second one cost later.
    assert_eq!(done[0].time_ns, 100_000 + cost + 100_000);
    assert_eq!(done[1].time_ns, done[0].time_ns + cost);
    assert_eq!(sim.cpu_busy_ns(ServerId::new(0, 0)), 2 * cost + 7_000); // + on_start
}

#[test]
fn free_cpu_answers_in_one_round_trip() {
    let mut cfg = config(11, 1, 1);
    cfg.network = NetworkModel::exact(100_000, 0);
    cfg.cpu = CpuModel::free();
    let mut sim = Sim::<EchoFifo>::new(cfg);
    let a = sim.add_client(0);
    sim.submit(a, OpId(9), get("k"));
    let c = sim.step_until(MS).unwrap();
    assert_eq!((c.op, c.time_ns), (OpId(9), 200_000));
}

#[test]
fn hold_release_and_drop() {
    let mut cfg = config(4, 1, 2);
    cfg.protocol.stabilisation_interval_ms = 0;
    let mut sim = Sim::<EchoFifo>::new(cfg);
    let c = sim.add_client(0);
    let replies = sim.hold(|e| matches!(e.msg, Msg::Value { .. }));
    sim.submit(c, OpId(0), get("a"));
    sim.submit(c, OpId(1), get("b"));
    assert!(sim.run_until(100 * MS).is_empty());
    assert_eq!(sim.held().len(), 2);
    assert!(sim.held().iter().all(|e| e.to == Addr::Client(c)));
    // Release only the reply to op 1: it completes first, although it was sent second.
    assert_eq!(sim.release(|e| matches!(e.msg, Msg::Value { op: 1, .. })), 1);
    let done = sim.advance(MS);
    assert_eq!(done.iter().map(|d| d.op).collect::<Vec<_>>(), vec![OpId(1)]);
    assert_eq!(done[0].time_ns, 100 * MS);
    assert_eq!(sim.drop_held(|_| true), 1);
    assert!(sim.held().is_empty());
    sim.stop_holding(replies);

    // Dropping: requests to the server are lost, so nothing completes.
    let lost = sim.drop_matching(|e| matches!(e.msg, Msg::Get { .. }));
    sim.submit(c, OpId(2), get("a"));
    assert!(sim.advance(100 * MS).is_empty());
    assert_eq!(sim.messages_dropped(), 2);
    sim.stop_holding(lost);
    sim.submit(c, OpId(3), get("a"));
    assert_eq!(sim.advance(100 * MS).len(), 1);
}

#[test]
fn step_processes_one_event_at_a_time() {
    let mut cfg = config(4, 1, 1);
    cfg.protocol.stabilisation_interval_ms = 0;
    let mut sim = Sim::<EchoFifo>::new(cfg);
    let c = sim.add_client(0);
    sim.submit(c, OpId(0), get("a"));
    let mut steps = 0;
    while sim.step() {
        steps += 1;
    }
    // request input, Get delivery, Value delivery, completion
    assert_eq!(steps, 4);
    assert_eq!(sim.events_processed(), 4);
    let done = sim.drain_completions();
    assert_eq!(done.len(), 1);
    assert!(!sim.step());
}

#[test]
fn partition_delays_then_heals_in_order() {
    let mut cfg = config(8, 2, 1);
    cfg.network = NetworkModel::exact(100_000, 20 * MS);
    cfg.clocks = ClockModel::perfect();
    cfg.cpu = CpuModel::free();
    cfg.protocol.stabilisation_interval_ms = 5;
    let mut sim = Sim::<EchoFifo>::new(cfg);
    sim.run_until(100 * MS);
    // Pings sent every 5 ms, 20 ms in flight: 4 are in flight now and are caught by the partition too.
    sim.partition_dcs(0, 1, 100 * MS, 300 * MS);
    sim.run_until(400 * MS);
    let s1 = sim.server(ServerId::new(1, 0));
    let virt = |clock: u64| clock - CLOCK_BASE_NS;
    let ns: Vec<u64> = s1.pings.iter().map(|p| p.1).collect();
    assert_eq!(ns, (0..ns.len() as u64).collect::<Vec<_>>(), "no ping lost or reordered");
    // A ping due at exactly 100 ms was delivered by `run_until(100 ms)`, before the partition started.
    let cut = 100 * MS + 1..300 * MS;
    assert!(s1.pings.iter().all(|p| !cut.contains(&virt(p.2))), "nothing crosses the partition");
    let at_heal = s1.pings.iter().filter(|p| virt(p.2) == 300 * MS).count();
    assert_eq!(at_heal, 40, "pings sent in (80 ms, 280 ms] arrive when it heals");
    // Pings sent after 280 ms take 20 ms again: every ping sent at 5, 10, ..., 380 ms has arrived by 400 ms.
    assert_eq!(ns.len(), 76);
    // The other direction is delayed alike.
    let s0 = sim.server(ServerId::new(0, 0));
    assert!(s0.pings.iter().all(|p| !cut.contains(&virt(p.2))));
}

#[test]
fn partition_in_future_applies_to_later_sends() {
    let mut cfg = config(8, 2, 1);
    cfg.network = NetworkModel::exact(100_000, 20 * MS);
    cfg.clocks = ClockModel::perfect();
    cfg.protocol.stabilisation_interval_ms = 5;
    let mut sim = Sim::<EchoUnordered>::new(cfg);
    sim.partition_dcs(1, 0, 50 * MS, 60 * MS);
    sim.run_until(200 * MS);
    let s1 = sim.server(ServerId::new(1, 0));
    let virt = |clock: u64| clock - CLOCK_BASE_NS;
    assert!(s1.pings.iter().all(|p| !(50 * MS..60 * MS).contains(&virt(p.2))));
    assert!(s1.pings.iter().any(|p| (60 * MS..61 * MS).contains(&virt(p.2))));
}

#[test]
fn timers_fire_periodically() {
    let mut cfg = config(2, 3, 2);
    cfg.protocol.stabilisation_interval_ms = 10;
    cfg.cpu = CpuModel::free();
    let mut sim = Sim::<EchoFifo>::new(cfg);
    sim.run_until(1_000 * MS);
    for s in Topology::new(3, 2).servers() {
        // fires at 10, 20, ..., 1000 ms
        assert_eq!(sim.server(s).ticks, 100, "{s}");
    }
    assert_eq!(sim.now_ns(), 1_000 * MS);
}

#[test]
fn clocks_stay_within_skew_and_never_go_back() {
    let mut cfg = config(9, 3, 3);
    let (skew, ppm) = (5 * MS, 100.0);
    cfg.clocks = ClockModel { max_skew_ns: skew, max_drift_ppm: ppm };
    cfg.protocol.stabilisation_interval_ms = 1;
    let mut sim = Sim::<EchoFifo>::new(cfg);
    let end = 2_000 * MS;
    sim.run_until(end);
    let bound = skew + (end as f64 * ppm * 1e-6) as u64 + 1;
    let mut offsets = Vec::new();
    for s in Topology::new(3, 3).servers() {
        let readings = &sim.server(s).clock_readings;
        assert!(readings.windows(2).all(|w| w[0] <= w[1]), "{s}'s clock went back");
        let now = sim.clock_ns(Addr::Server(s));
        let offset = now as i64 - (CLOCK_BASE_NS + end) as i64;
        assert!(offset.unsigned_abs() <= bound, "{s} off by {offset}");
        offsets.push(offset);
    }
    offsets.sort();
    offsets.dedup();
    assert!(offsets.len() > 1, "nodes should get different clocks");
}

#[test]
fn messages_to_unknown_clients_are_dropped() {
    let mut cfg = config(1, 1, 1);
    cfg.protocol.stabilisation_interval_ms = 0;
    let mut sim = Sim::<EchoFifo>::new(cfg);
    let c = sim.add_client(0);
    // The echo server also answers a read of "ghost" to a client that was never created.
    sim.submit(c, OpId(0), get("ghost"));
    assert_eq!(sim.advance(MS).len(), 1);
    assert_eq!(sim.messages_sent(), 3);
    assert_eq!(sim.messages_dropped(), 1);
}

/// Throughput at the target scale (3 DCs × 45 partitions, 1000 clients, closed loop). Run with
/// `cargo test --release -p snowline-sim --test sim -- --ignored --nocapture throughput`.
#[test]
#[ignore]
#[allow(clippy::disallowed_methods)] // wall-clock time measures the simulator, it never reaches it
fn throughput() {
    let mut cfg = config(42, 3, 45);
    cfg.protocol.stabilisation_interval_ms = 10;
    let mut sim = Sim::<EchoFifo>::new(cfg);
    let clients: Vec<ClientId> = (0..1000).map(|i| sim.add_client((i % 3) as u16)).collect();
    let keys: Vec<String> = (0..1000).map(|i| format!("k{i}")).collect();
    let mut app = SmallRng::seed_from_u64(1);
    let mut op = 0u64;
    for c in &clients {
        sim.submit(*c, OpId(op), get(&keys[app.random_range(0..keys.len())]));
        op += 1;
    }
    let start = std::time::Instant::now();
    let mut n = 0u64;
    while let Some(c) = sim.step_until(1_000 * MS) {
        let k = &keys[app.random_range(0..keys.len())];
        let r = if op.is_multiple_of(2) { get(k) } else { put(k, "v") };
        sim.submit(c.client, OpId(op), r);
        op += 1;
        n += 1;
    }
    let secs = start.elapsed().as_secs_f64();
    println!(
        "{n} ops, {} events, {} inputs in {secs:.2}s: {:.0} events/s, {:.0} inputs/s",
        sim.events_processed(),
        sim.inputs_handled(),
        sim.events_processed() as f64 / secs,
        sim.inputs_handled() as f64 / secs
    );
}

// ---- faults (issue 11) ----

use snowline_sim::{Fault, FaultKind, FaultSchedule, Restart, Side, SwarmOptions};

fn exact_echo(seed: u64, dcs: u16, partitions: u16, ping_ms: u64) -> SimConfig {
    let mut cfg = config(seed, dcs, partitions);
    cfg.network = NetworkModel::exact(100_000, 20 * MS);
    cfg.clocks = ClockModel::perfect();
    cfg.cpu = CpuModel::free();
    cfg.protocol.stabilisation_interval_ms = ping_ms;
    cfg
}

#[test]
fn crash_stop_then_restart_without_disk_starts_empty_and_drops_old_timers() {
    let mut sim = Sim::<EchoFifo>::new(exact_echo(3, 2, 1, 10));
    let s = ServerId::new(0, 0);
    let c = sim.add_client(0);
    assert!(sim.execute(c, OpId(1), put("k", "a"), 10 * MS).expect("answered").is_ok());
    sim.run_until(100 * MS);
    sim.crash(s);
    assert!(sim.is_down(s));
    assert_eq!(sim.crashes(), &[(s, 100 * MS)]);
    let dropped = sim.messages_dropped();
    assert_eq!(sim.execute(c, OpId(2), get("k"), 100 * MS), None, "a crashed server answers nothing");
    assert!(sim.messages_dropped() > dropped, "the request to the crashed server is lost and counted");
    sim.restart_without_disk(s);
    let r = sim.execute(c, OpId(3), get("k"), 10 * MS).expect("answered").expect("ok");
    assert_eq!(r.reads[0].value, None, "without its disk the server forgot the write");
    let ticks_before = sim.server(s).ticks;
    assert_eq!(ticks_before, 0, "the fresh server ticked nothing yet (the old incarnation's timer is stale)");
    sim.advance(100 * MS);
    // Fires at +10, +20, ..., +100 ms after the restart: one timer chain, not two.
    assert_eq!(sim.server(s).ticks, 10);
}

#[test]
fn crash_stop_is_allowed_without_durable_servers_and_schedules_fire() {
    let mut sim = Sim::<EchoUnordered>::new(exact_echo(4, 2, 2, 10));
    let (a, b) = (ServerId::new(1, 0), ServerId::new(0, 1));
    sim.schedule_crash_with(a, 50 * MS, Restart::Never);
    sim.schedule_crash_with(b, 60 * MS, Restart::WithoutDisk { after_ns: 40 * MS });
    sim.run_until(80 * MS);
    assert!(sim.is_down(a) && sim.is_down(b));
    sim.run_until(200 * MS);
    assert!(sim.is_down(a), "crash-stop: it stays down");
    assert!(!sim.is_down(b), "restarted without its disk at 100 ms");
    assert_eq!(sim.server(b).ticks, 10, "ticks since the restart only");
}

#[test]
fn isolation_drops_client_messages_and_heals() {
    let mut sim = Sim::<EchoFifo>::new(exact_echo(5, 2, 1, 0));
    let s = ServerId::new(0, 0);
    let c = sim.add_client(0);
    let now = sim.now_ns();
    sim.isolate(s, now, now + 100 * MS);
    assert_eq!(sim.execute(c, OpId(1), put("k", "a"), 50 * MS), None, "the request is lost");
    assert_eq!(sim.messages_dropped(), 1);
    sim.run_until(now + 100 * MS);
    let r = sim.execute(c, OpId(2), get("k"), 10 * MS).expect("answered after the heal").expect("ok");
    assert_eq!(r.reads[0].value, None, "the lost put never reached the server");
    assert_eq!(sim.messages_dropped(), 1);
}

#[test]
fn a_dropping_partition_only_delays_server_messages_of_protocols_that_cannot_lose_them() {
    let mut sim = Sim::<EchoFifo>::new(exact_echo(6, 2, 1, 5));
    sim.run_until(100 * MS);
    sim.partition(Side::servers([ServerId::new(0, 0)]), Side::servers([ServerId::new(1, 0)]), 100 * MS, 300 * MS);
    // Clients are on neither side: they reach both servers.
    let c = sim.add_client(1);
    assert!(sim.execute(c, OpId(1), put("k", "a"), 10 * MS).expect("answered").is_ok());
    sim.run_until(400 * MS);
    assert_eq!(sim.messages_dropped(), 0, "echo does not tolerate loss: pings are delayed, not dropped");
    let s1 = sim.server(ServerId::new(1, 0));
    let ns: Vec<u64> = s1.pings.iter().map(|p| p.1).collect();
    assert_eq!(ns, (0..ns.len() as u64).collect::<Vec<_>>(), "no ping lost or reordered");
    let virt = |clock: u64| clock - CLOCK_BASE_NS;
    assert!(s1.pings.iter().all(|p| !(100 * MS + 1..300 * MS).contains(&virt(p.2))), "nothing crosses it");
}

#[test]
fn a_partition_of_datacenters_cuts_their_clients_off_too() {
    let mut sim = Sim::<EchoFifo>::new(exact_echo(7, 2, 1, 0));
    let c0 = sim.add_client(0);
    let c1 = sim.add_client(1);
    let now = sim.now_ns();
    sim.partition(Side::dcs([0]), Side::Rest, now, now + 100 * MS);
    // Inside a datacenter everything works; the echo client talks to its own datacenter only.
    assert!(sim.execute(c0, OpId(1), get("k"), 10 * MS).is_some());
    assert!(sim.execute(c1, OpId(2), get("k"), 10 * MS).is_some());
    let mut sim = Sim::<EchoFifo>::new(exact_echo(7, 2, 1, 0));
    let c0 = sim.add_client(0);
    let now = sim.now_ns();
    // A client named on a side is cut off from the servers of the other.
    sim.partition(Side::Nodes([Addr::Client(c0)].into()), Side::dcs([0]), now, now + 100 * MS);
    assert_eq!(sim.execute(c0, OpId(1), get("k"), 50 * MS), None);
    assert_eq!(sim.messages_dropped(), 1);
}

#[test]
fn crash_hooks_fire_once_on_send_and_on_deliver() {
    let mut sim = Sim::<EchoUnordered>::new(exact_echo(8, 3, 1, 5));
    // The first ping dc1 sends: dc1 crashes before it leaves, and nothing else of that handler leaves.
    let hook = sim.crash_on_send(|e| e.from == Addr::Server(ServerId::new(1, 0)) && e.msg.kind() == "ping");
    sim.run_until(100 * MS);
    assert_eq!(sim.hook_fired(hook), Some((ServerId::new(1, 0), 5 * MS)));
    assert!(sim.is_down(ServerId::new(1, 0)));
    for s in [ServerId::new(0, 0), ServerId::new(2, 0)] {
        assert!(sim.server(s).pings.iter().all(|p| p.0 != 1), "{s} got no ping from dc1");
    }
    // A put delivered to dc2's server crashes it on arrival.
    let hook = sim.crash_on_deliver(|e| e.msg.kind() == "put");
    let c = sim.add_client(2);
    assert_eq!(sim.execute(c, OpId(1), put("k", "a"), 50 * MS), None);
    assert_eq!(sim.hook_fired(hook).map(|h| h.0), Some(ServerId::new(2, 0)));
    assert_eq!(sim.crashes().len(), 2, "each hook fired once");
    // crash_after_send: the message leaves, then the sender is down.
    let hook = sim.crash_after_send(|e| e.msg.kind() == "ping");
    sim.advance(20 * MS);
    assert_eq!(sim.hook_fired(hook).map(|h| h.0), Some(ServerId::new(0, 0)));
    assert_eq!(sim.crashes().len(), 3);
}

#[test]
fn random_loss_drops_client_messages_reproducibly_and_spares_what_the_protocol_cannot_lose() {
    let run = |seed| {
        let mut sim = Sim::<EchoUnordered>::new(exact_echo(seed, 2, 2, 1));
        sim.lose(0.3, 0, 100 * MS);
        let c = sim.add_client(0);
        for i in 0..100 {
            sim.submit(c, OpId(i), get("k"));
        }
        let answered = sim.run_until(200 * MS).len();
        let pings: Vec<usize> = Topology::new(2, 2).servers().map(|s| sim.server(s).pings.len()).collect();
        (sim.messages_dropped(), answered, pings)
    };
    let (dropped, answered, pings) = run(1);
    assert!(dropped > 20 && dropped < 80, "about half of the 100 requests or their answers: {dropped}");
    assert_eq!(answered as u64, 100 - dropped, "each lost message loses one operation");
    // Pings every 1 ms, 20 ms in flight: 180 by 200 ms, none missing.
    assert!(pings.iter().all(|n| *n == 180), "server-to-server pings of echo are never lost: {pings:?}");
    assert_eq!(run(1), (dropped, answered, pings), "the same seed loses the same messages");
    assert_ne!(run(2).0, dropped);
}

#[test]
fn swarm_schedules_are_deterministic_varied_and_keep_a_majority_up() {
    let topology = Topology::replicated(3, 2, 3);
    let options = SwarmOptions { duration_ns: 5_000 * MS, restart_with_disk: false, required: Vec::new() };
    let mut kinds_seen = std::collections::BTreeSet::new();
    let mut distinct = std::collections::BTreeSet::new();
    for seed in 0..200 {
        let s = FaultSchedule::swarm(seed, topology, &options);
        assert_eq!(s, FaultSchedule::swarm(seed, topology, &options), "seed {seed}");
        assert!(!s.kinds.is_empty());
        kinds_seen.extend(s.kinds.iter().copied());
        distinct.insert(s.to_string());
        for p in 0..topology.partitions {
            let crashes = s
                .faults
                .iter()
                .filter(|f| match f {
                    Fault::Crash { server, .. } => server.partition == p,
                    Fault::LeaderCrash { partition, .. } | Fault::LeaderKill { partition, .. } => *partition == p,
                    _ => false,
                })
                .count();
            assert!(crashes <= 1, "seed {seed}: crash-stop of at most 1 of 3 members of p{p}: {s}");
        }
        for f in &s.faults {
            let end = match f {
                Fault::Isolate { until_ns, .. } | Fault::Partition { until_ns, .. } | Fault::Loss { until_ns, .. } => {
                    *until_ns
                }
                Fault::Crash { at_ns, restart, .. } | Fault::LeaderCrash { at_ns, restart, .. } => {
                    assert_eq!(*restart, Restart::Never);
                    *at_ns
                }
                Fault::LeaderKill { until_ns, .. } => *until_ns,
            };
            assert!(end <= 3_500 * MS, "seed {seed}: {f} ends by 70% of the run");
        }
    }
    assert_eq!(kinds_seen.len(), FaultKind::ALL.len(), "every kind is drawn by some seed");
    assert!(distinct.len() > 190, "seeds draw different schedules");
    let required = SwarmOptions { required: vec![FaultKind::LeaderKill], ..options };
    assert!((0..50).all(|seed| FaultSchedule::swarm(seed, topology, &required).kinds.contains(&FaultKind::LeaderKill)));
}

#[test]
fn a_swarm_run_is_reproducible() {
    let run = |seed| {
        let mut sim = Sim::<EchoUnordered>::new(config(seed, 3, 2));
        sim.set_trace(true);
        let options = SwarmOptions { duration_ns: 500 * MS, restart_with_disk: false, required: Vec::new() };
        FaultSchedule::swarm(seed, Topology::new(3, 2), &options).apply(&mut sim);
        sim.run_until(600 * MS);
        (sim.trace().to_vec(), sim.messages_dropped(), sim.crashes().to_vec())
    };
    for seed in 0..5 {
        assert!(run(seed) == run(seed), "seed {seed}");
    }
}
