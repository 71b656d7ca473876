//! `snowline bench`: the `sim` workload against real local clusters, with the side-by-side comparison table.

use crate::sim_cmd::{WorkloadArgs, finish, print_report, write_sweep};
use anyhow::Result;
use clap::Args;
use snowline_core::{Protocol, ProtocolConfig};
use snowline_harness::{RunReport, RunSpec};
use snowline_protocols::with_protocol;
use std::path::{Path, PathBuf};
use std::time::Instant;

#[derive(Args, Clone, Debug)]
pub struct BenchArgs {
    #[command(flatten)]
    pub run: WorkloadArgs,
    /// Emulated one-way latency between datacenters, in milliseconds.
    #[arg(long, default_value_t = 0.0)]
    pub latency_ms: f64,
    /// Keep the cluster's directory (config and logs) here instead of a temporary one.
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Run durable servers with these fsync policies (memory, none, group, per-write; comma-separated), each
    /// over the whole sweep, and print what durability costs against the first (default: memory only).
    /// `--fsync memory,none,group,per-write` measures every policy.
    #[arg(long, value_delimiter = ',', default_value = "memory")]
    pub fsync: Vec<Storage>,
    /// With a durable --fsync policy: keep the servers' data under DIR/<policy>-c<clients>/node-N (default: a
    /// temporary directory, removed after each run).
    #[arg(long)]
    pub data_dir: Option<PathBuf>,
    /// How the servers authenticate each other: tls (mutual TLS, the default) or insecure; comma-separated
    /// to run the sweep under each and print what TLS costs (throughput, p95 latency and, with two or more
    /// datacenters, how soon a write in dc0 is visible in dc1).
    #[arg(long, value_delimiter = ',', default_value = "tls")]
    pub peers: Vec<PeerAuth>,
    /// Also run redis-server with redis-benchmark (GET, one connection per snowline client) and a Rust
    /// client in the same command, before and after snowline's runs, and print its latency beside
    /// snowline's GET (or ROT) latency; skipped with a note when they are not installed
    /// (`apt-get install redis-server`).
    #[arg(long)]
    pub vs_redis: bool,
    /// Pin processes to CPUs: off (the scheduler places them), split (servers on the first CPU, this
    /// benchmark's clients on the others) or same (everything on the first CPU). At low load the figure
    /// depends on whether client and server share a core; pinning makes it repeatable, and `--vs-redis`
    /// places redis-server and redis-benchmark the same way.
    #[arg(long, default_value = "off")]
    pub pin: crate::pinning::Pinning,
    /// OS threads this benchmark's clients run on, each with its own connections (at most one per client).
    /// One thread batches the most requests per write; on 2 cores, 2 threads used the idle CPU but cost more
    /// per transaction, and slowed si and ser (docs/RESULTS.md, "The Jessy family's speed").
    #[arg(long, default_value_t = 1)]
    pub client_threads: usize,
}

impl BenchArgs {
    /// `--client-threads`, at least one.
    pub fn client_threads(&self) -> usize {
        self.client_threads.max(1)
    }
}

/// How the servers of a benchmarked cluster authenticate each other.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PeerAuth {
    Tls,
    Insecure,
}

impl std::str::FromStr for PeerAuth {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s.trim() {
            "tls" => Ok(PeerAuth::Tls),
            "insecure" => Ok(PeerAuth::Insecure),
            other => Err(format!("unknown peer authentication {other:?} (tls or insecure)")),
        }
    }
}

impl std::fmt::Display for PeerAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            PeerAuth::Tls => "tls",
            PeerAuth::Insecure => "insecure",
        })
    }
}

/// In memory, or durable with an fsync policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Storage {
    Memory,
    Durable(snowline_storage::FsyncPolicy),
}

impl std::str::FromStr for Storage {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s.trim() {
            "memory" | "in-memory" => Ok(Storage::Memory),
            other => other
                .parse()
                .map(Storage::Durable)
                .map_err(|e: snowline_storage::ParsePolicyError| format!("{e} (or memory)")),
        }
    }
}

impl std::fmt::Display for Storage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Storage::Memory => f.write_str("memory"),
            Storage::Durable(p) => write!(f, "fsync {p}"),
        }
    }
}

pub fn bench(args: BenchArgs) -> Result<()> {
    // Every run's arguments first: a refused command prints only why, before any run.
    args.run.validate_bench()?;
    let runs = args.run.per_protocol()?;
    let several = runs.len() > 1;
    if several {
        anyhow::ensure!(
            args.fsync.len() == 1 && args.peers.len() == 1,
            "--fsync and --peers lists compare settings of one protocol: with several protocols or terminations give \
             one of each"
        );
        anyhow::ensure!(
            !args.vs_redis,
            "--vs-redis compares one protocol with redis-server: give one --protocol and one --termination with it"
        );
        let family = snowline_protocols::jessy::FAMILY;
        let own: Vec<&str> = args.run.protocols()?.into_iter().filter(|n| !family.contains(n)).collect();
        if !own.is_empty() && args.run.termination != [snowline_core::Termination::default()] {
            println!(
                "note: --termination applies to the Jessy family ({}); {} run{} once, with {} own termination",
                family.join(", "),
                own.join(", "),
                if own.len() == 1 { "s" } else { "" },
                if own.len() == 1 { "its" } else { "their" }
            );
        }
    }
    let runs_total = runs.len() * args.run.clients.len() * args.fsync.len() * args.peers.len();
    println!("load average (1 min) at start: {}", load_average());
    let mut rows = Vec::new();
    let mut failed = Vec::new();
    for run in runs {
        let mut one = BenchArgs { run, ..args.clone() };
        if several {
            println!("\n== {} ==", one.run.run_label());
            if let Some(out) = &args.run.out {
                one.run.out = Some(out.join(one.run.file_label()));
            }
        }
        bench_protocol(&one, runs_total > 1, &mut rows, &mut failed)?;
    }
    println!("load average (1 min) at end: {}", load_average());
    if several {
        println!("\n{}", comparison_table(&rows));
        for line in nmsi_ratios(&rows) {
            println!("{line}");
        }
    }
    anyhow::ensure!(failed.is_empty(), "{}", failed.join("; "));
    Ok(())
}

/// `bench` for one protocol under one termination: every client count (and --fsync and --peers setting),
/// each on a fresh cluster. Each run's row goes to `rows`; checks that fail go to `failed`. With
/// `several_files`, --history and --json name one file per run.
fn bench_protocol(
    args: &BenchArgs,
    several_files: bool,
    rows: &mut Vec<RunRow>,
    failed: &mut Vec<String>,
) -> Result<()> {
    if let Some(plan) = args.run.tpcc_plan()? {
        print!("{plan}");
    }
    let topology = args.run.topology()?;
    let name = snowline_protocols::canonical_name(&args.run.protocol)?;
    anyhow::ensure!(!args.fsync.is_empty(), "--fsync needs at least one of memory, none, group, per-write");
    anyhow::ensure!(!args.peers.is_empty(), "--peers needs at least one of tls, insecure");
    let settings = args.fsync.len() * args.peers.len();
    anyhow::ensure!(
        settings == 1 || args.run.out.is_none(),
        "--out writes one results directory per setting: run one --fsync and one --peers value at a time with it"
    );
    // Comparing settings: also measure how soon a write crosses datacenters, where the protocol can say.
    let offers = snowline_protocols::lookup(name)?.offers;
    let probe_visibility = settings > 1 && topology.dcs >= 2 && offers.blind_writes && offers.read_only;
    let seed = rand_seed();
    let placement = args.pin.place()?;
    placement.pin_clients()?;
    // redis is measured before and after snowline's runs: on a shared machine, load that comes or goes during
    // the command weighs on both sides of the comparison.
    let redis_before = match args.vs_redis {
        true => Some(measure_redis(&args.run.clients, topology.dcs as usize, &placement)?),
        false => None,
    };
    let progress = crate::progress::bar((args.run.clients.len() * settings) as u64);
    let mut records = Vec::new();
    let mut costs = Vec::new();
    let mut points = Vec::new();
    for peers in &args.peers {
        for storage in &args.fsync {
            points.extend(args.run.clients.iter().map(|c| (*peers, *storage, *c)));
        }
    }
    let threads = args.client_threads();
    for (peers, storage, clients) in points {
        progress.set_message(format!("{storage}, {peers}, {clients} clients per DC"));
        let spec = args.run.spec(seed, clients);
        let started = Instant::now();
        let data = match storage {
            Storage::Memory => None,
            Storage::Durable(fsync) => {
                let root = match &args.data_dir {
                    Some(d) => d.join(format!("{fsync}-c{clients}")),
                    None => std::env::temp_dir()
                        .join(format!("snowline-bench-data-{}-{fsync}-{clients}", std::process::id())),
                };
                Some(snowline_net::LocalData { root, fsync })
            }
        };
        let setup = crate::client_cmd::LocalSetup {
            dir: args.dir.clone(),
            data: data.clone(),
            insecure: peers == PeerAuth::Insecure,
            pin: placement.clone(),
            protocol_config: ProtocolConfig { termination: args.run.termination(), ..ProtocolConfig::default() },
            ..Default::default()
        };
        let ((report, visibility, window), cpu) =
            crate::client_cmd::with_local_servers(name, topology, args.latency_ms, setup, |config, servers| {
                let probe = || CpuSample::now(servers);
                with_protocol!(name, P => bench_window::<P, _>(config, &spec, probe_visibility, threads, probe))?
            })?;
        let window = WindowCpu::between(window);
        if let (Some(d), None) = (&data, &args.data_dir) {
            let _ = std::fs::remove_dir_all(&d.root);
        }
        let wall = started.elapsed().as_secs_f64();
        progress.suspend(|| {
            println!("clients per DC {clients}");
            print_report(&report);
            println!("server CPU time {:.2} s over {:.2} s of run", cpu, args.run.duration.as_secs_f64());
            println!("{window}");
            match storage {
                Storage::Durable(p) => println!("durable servers, fsync {p}"),
                Storage::Memory => println!("in-memory servers"),
            }
            match peers {
                PeerAuth::Tls => println!("peers authenticated by mutual TLS"),
                PeerAuth::Insecure => println!("peers not authenticated (insecure)"),
            }
            if placement.is_pinned() {
                println!("{placement}");
            }
        });
        let mut label = format!("{}-c{clients}", args.run.file_label());
        if settings > 1 {
            label += &format!("-{storage}-{peers}").replace(' ', "-");
        }
        let files = match several_files {
            true => WorkloadArgs {
                history: args.run.history.as_deref().map(|p| suffixed(p, &label)),
                json: args.run.json.as_deref().map(|p| suffixed(p, &label)),
                ..args.run.clone()
            },
            false => args.run.clone(),
        };
        let fails = finish(&report, &files, "real", seed)?;
        rows.push(RunRow {
            protocol: name.to_string(),
            termination: snowline_protocols::jessy::FAMILY.contains(&name).then(|| args.run.termination()),
            clients,
            summary: report.summary.clone(),
            cpu: window,
            check: args.run.check.is_some().then_some(fails.is_empty()),
        });
        failed.extend(fails.into_iter().map(|f| format!("{label}: {f}")));
        let ops = report.summary.ops_per_s * report.summary.seconds;
        costs.push(Setting {
            label: format!("{storage}, {peers}"),
            clients,
            summary: report.summary.clone(),
            visibility,
            server_cpu_us_per_op: window.server_s * 1e6 / ops,
        });
        records.push(args.run.record("real", report, clients, wall));
        progress.inc(1);
    }
    progress.finish_and_clear();
    if let Some(before) = redis_before {
        let after = measure_redis(&args.run.clients, topology.dcs as usize, &placement)?;
        compare_with_redis(&costs, before.zip(after), &placement);
    }
    if settings > 1 {
        println!("\n{}", setting_costs(&costs));
        return Ok(());
    }
    write_sweep(&args.run, &records)
}

/// `--vs-redis`: redis-server's GET latency under as many connections as the last run has clients; `None`
/// if redis is not installed.
fn measure_redis(
    clients: &[usize],
    dcs: usize,
    pin: &crate::pinning::Placement,
) -> Result<Option<crate::redis_baseline::RedisGet>> {
    let connections = clients.last().copied().unwrap_or(1) * dcs;
    let requests = (20_000 * connections as u64).min(200_000);
    crate::redis_baseline::measure_get(connections, requests, pin)
}

/// `--vs-redis`: the last run's single-key reads beside redis-server's GETs, measured before and after
/// snowline's runs (each ratio is to the mean of the two).
fn compare_with_redis(
    costs: &[Setting],
    redis: Option<(crate::redis_baseline::RedisGet, crate::redis_baseline::RedisGet)>,
    pin: &crate::pinning::Placement,
) {
    let Some(last) = costs.last() else { return };
    let Some((before, after)) = redis else {
        println!("\nredis-server / redis-benchmark not installed (apt-get install redis-server): comparison skipped");
        return;
    };
    let mean = |f: fn(&crate::redis_baseline::RedisGet) -> f64| (f(&before) + f(&after)) / 2.0;
    println!(
        "\nredis-server {} GET (redis-benchmark, {} connection{}, {} requests, before / after snowline): p50 {:.1} / \
         {:.1} µs, p95 {:.1} / {:.1} µs, p99 {:.1} / {:.1} µs, {:.0} / {:.0} requests/s; {}",
        before.version,
        before.connections,
        if before.connections == 1 { "" } else { "s" },
        before.requests,
        before.p50_us,
        after.p50_us,
        before.p95_us,
        after.p95_us,
        before.p99_us,
        after.p99_us,
        before.requests_per_s,
        after.requests_per_s,
        pin
    );
    let rust = before.rust_client.zip(after.rust_client).map(|(b, a)| ((b.0 + a.0) / 2.0, (b.1 + a.1) / 2.0));
    if let (Some(b), Some(a)) = (before.rust_client, after.rust_client) {
        println!(
            "redis-server {} GET (a blocking Rust client in this process, 1 connection, {} requests, before / after \
             snowline): p50 {:.1} / {:.1} µs, p95 {:.1} / {:.1} µs",
            before.version, before.requests, b.0, a.0, b.1, a.1
        );
    }
    let Some(k) = ["get", "rot"].iter().find_map(|k| last.summary.kind(k)) else {
        println!("(the workload had no single-key reads to compare: use --workload kv --write-ratio 0)");
        return;
    };
    println!(
        "snowline {} ({}, {} clients): p50 {:.1} µs, p95 {:.1} µs",
        k.kind, last.label, before.connections, k.p50_us, k.p95_us
    );
    // The like-for-like ratio first: one client, timing both servers the same way. redis-benchmark's own
    // figures come from another client (C, its own clock, p50 in 8 µs histogram steps here) and read lower
    // for any server (docs/RESULTS.md, "Against redis-server").
    if let Some((p50, p95)) = rust {
        println!(
            "  against redis-server timed the same way (a blocking Rust client in this process): p50 {:.2}×, p95 \
             {:.2}×",
            k.p50_us / p50,
            k.p95_us / p95
        );
    }
    println!(
        "  against redis-benchmark's own figures (its client, its clock): p50 {:.2}×, p95 {:.2}×",
        k.p50_us / mean(|r| r.p50_us),
        k.p95_us / mean(|r| r.p95_us)
    );
}

/// One benchmarked setting (storage and peer authentication) at one client count.
struct Setting {
    label: String,
    clients: usize,
    summary: snowline_harness::Summary,
    /// Milliseconds from a PUT in dc0 to its value read in dc1, one per probe.
    visibility: Option<Vec<f64>>,
    /// The servers' CPU time (user and system, every thread) over the run, per operation.
    server_cpu_us_per_op: f64,
}

/// Throughput, p95 latency, cross-datacenter visibility and the servers' CPU per operation per setting,
/// each against the first setting at the same client count.
fn setting_costs(runs: &[Setting]) -> String {
    let mut out = format!(
        "{:<26} {:>10} {:>10} {:>8} {:>12} {:>12} {:>14} {:>12}\n",
        "setting", "clients/DC", "ops/s", "× base", "p95 write", "p95 read", "visible p50", "server CPU/op"
    );
    let p95 = |s: &snowline_harness::Summary, kinds: &[&str]| {
        s.per_kind.iter().filter(|k| kinds.contains(&k.kind.as_str())).map(|k| k.p95_us).fold(f64::NAN, f64::max)
    };
    for run in runs {
        let s = &run.summary;
        let base = runs.iter().find(|r| r.clients == run.clients).map(|r| r.summary.ops_per_s).unwrap_or(f64::NAN);
        let visible = match &run.visibility {
            Some(v) if !v.is_empty() => {
                let mut v = v.clone();
                v.sort_by(f64::total_cmp);
                format!("{:.2} ms", v[v.len() / 2])
            }
            _ => "-".into(),
        };
        out += &format!(
            "{:<26} {:>10} {:>10.0} {:>8.2} {:>9.0} µs {:>9.0} µs {:>14} {:>9.1} µs\n",
            run.label,
            run.clients,
            s.ops_per_s,
            s.ops_per_s / base,
            p95(s, &["put", "update"]),
            p95(s, &["rot", "get", "rot-rounds"]),
            visible,
            run.server_cpu_us_per_op,
        );
    }
    out
}

pub(crate) fn bench_on<P: Protocol>(
    config: &snowline_net::ClusterConfig,
    spec: &RunSpec,
    probe_visibility: bool,
) -> Result<(RunReport, Option<Vec<f64>>)> {
    let (report, visibility, _) = bench_window::<P, ()>(config, spec, probe_visibility, 1, || ())?;
    Ok((report, visibility))
}

/// [`bench_on`], also calling `probe` when the measured window starts and ends (see
/// [`snowline_harness::net_run::run_net_window`]).
fn bench_window<P: Protocol, T>(
    config: &snowline_net::ClusterConfig,
    spec: &RunSpec,
    probe_visibility: bool,
    threads: usize,
    probe: impl FnMut() -> T,
) -> Result<(RunReport, Option<Vec<f64>>, [T; 2])> {
    /// Writes probed one after another, after the run.
    const PROBES: usize = 100;
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    rt.block_on(async {
        let (report, window) = snowline_harness::net_run::run_net_window::<P, T>(
            config,
            spec,
            snowline_net::DEFAULT_OP_TIMEOUT,
            threads,
            probe,
        )
        .await?;
        let visibility = match probe_visibility {
            true => Some(crate::client_cmd::visibility_ms::<P>(config, PROBES, "bench-visibility").await?),
            false => None,
        };
        Ok((report, visibility, window))
    })
}

/// CPU time so far: the servers' and this process's (the benchmark's clients), at a moment.
#[derive(Clone, Copy, Debug)]
struct CpuSample {
    at: Instant,
    server_s: f64,
    client_s: f64,
}

impl CpuSample {
    fn now(servers: &[u32]) -> Self {
        CpuSample {
            at: Instant::now(),
            server_s: crate::client_cmd::servers_cpu_seconds(servers),
            client_s: crate::client_cmd::own_cpu_seconds(),
        }
    }
}

/// CPU time over a run's measured window (after the warmup, before the cooldown).
#[derive(Clone, Copy, Debug)]
struct WindowCpu {
    wall_s: f64,
    server_s: f64,
    client_s: f64,
}

impl WindowCpu {
    fn between([start, end]: [CpuSample; 2]) -> Self {
        WindowCpu {
            wall_s: end.at.duration_since(start.at).as_secs_f64(),
            server_s: end.server_s - start.server_s,
            client_s: end.client_s - start.client_s,
        }
    }

    /// Server plus client CPU over the window's wall time, as a percentage of every core's (100 × cores).
    fn machine_percent(&self) -> f64 {
        (self.server_s + self.client_s) / (self.wall_s * cores() as f64) * 100.0
    }
}

impl std::fmt::Display for WindowCpu {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "measured window {:.2} s: server CPU {:.2} s, client CPU (this process) {:.2} s, machine CPU {:.0}% of {} \
             cores",
            self.wall_s,
            self.server_s,
            self.client_s,
            self.machine_percent(),
            cores()
        )
    }
}

/// The machine's online CPUs.
fn cores() -> usize {
    // SAFETY: sysconf has no memory-safety preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    if n > 0 { n as usize } else { std::thread::available_parallelism().map_or(1, |n| n.get()) }
}

/// The 1-minute load average (/proc/loadavg), as printed.
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|l| l.split_whitespace().next().map(str::to_string))
        .map_or_else(|| "unknown (no /proc/loadavg)".into(), |l| format!("{l} on {} cores", cores()))
}

/// `path` with `-label` before its extension: h.jsonl, nmsi-multicast-c8 → h-nmsi-multicast-c8.jsonl.
pub(crate) fn suffixed(path: &Path, label: &str) -> PathBuf {
    let stem = path.file_stem().map_or_else(String::new, |s| s.to_string_lossy().into_owned());
    let name = match path.extension() {
        Some(ext) => format!("{stem}-{label}.{}", ext.to_string_lossy()),
        None => format!("{stem}-{label}"),
    };
    path.with_file_name(name)
}

/// One run of `bench`, for the side-by-side table.
struct RunRow {
    protocol: String,
    /// The Jessy family's termination; `None` for a protocol with its own.
    termination: Option<snowline_core::Termination>,
    clients: usize,
    summary: snowline_harness::Summary,
    cpu: WindowCpu,
    /// With --check: whether the history passed.
    check: Option<bool>,
}

impl RunRow {
    /// Committed transactions in the measured window (operations, for a workload without transactions).
    fn committed(&self) -> f64 {
        let s = &self.summary;
        let per_s = if s.committed_txns_per_s > 0.0 { s.committed_txns_per_s } else { s.ops_per_s };
        per_s * s.seconds
    }

    fn throughput(&self) -> f64 {
        let s = &self.summary;
        if s.committed_txns_per_s > 0.0 { s.committed_txns_per_s } else { s.ops_per_s }
    }
}

/// The side-by-side table of several runs: one row per run.
fn comparison_table(rows: &[RunRow]) -> String {
    let checked = rows.iter().any(|r| r.check.is_some());
    let mut out = format!(
        "{:<12} {:<11} {:>7} {:>9} {:>8} {:>8} {:>8} {:>8} {:>7} {:>10} {:>10} {:>8}{} aborts by cause\n",
        "protocol",
        "termination",
        "clients",
        "txn/s",
        "RO p50",
        "RO p99",
        "upd p50",
        "upd p99",
        "abort%",
        "server µs",
        "client µs",
        "machine",
        if checked { "  check" } else { "" }
    );
    let ms = |s: &snowline_harness::Summary, kind: &str, p99: bool| {
        s.kind(kind).map_or("-".to_string(), |k| format!("{:.2}", if p99 { k.p99_us } else { k.p50_us } / 1e3))
    };
    for r in rows {
        let s = &r.summary;
        let committed = r.committed();
        let per_txn = |cpu_s: f64| if committed > 0.0 { format!("{:.1}", cpu_s * 1e6 / committed) } else { "-".into() };
        let causes: Vec<String> = s.aborts.iter().map(|(c, n)| format!("{c} {n}")).collect();
        out += &format!(
            "{:<12} {:<11} {:>7} {:>9.0} {:>8} {:>8} {:>8} {:>8} {:>6.2}% {:>10} {:>10} {:>7.0}%{} {}\n",
            r.protocol,
            r.termination.map_or("-".to_string(), |t| t.to_string()),
            r.clients,
            r.throughput(),
            ms(s, "ro-txn", false),
            ms(s, "ro-txn", true),
            ms(s, "rw-txn", false),
            ms(s, "rw-txn", true),
            s.abort_rate * 100.0,
            per_txn(r.cpu.server_s),
            per_txn(r.cpu.client_s),
            r.cpu.machine_percent(),
            match r.check {
                Some(true) => format!("  {:>5}", "ok"),
                Some(false) => format!("  {:>5}", "FAIL"),
                None => String::new(),
            },
            if causes.is_empty() { "-".into() } else { causes.join(", ") }
        );
    }
    out += &format!(
        "(clients per datacenter; txn/s: committed transactions per second (operations for a workload without \
         transactions); RO / upd p50, p99: read-only and update transactions' latency in ms, retries included; \
         abort%: aborted attempts over all attempts; server µs, client µs: CPU time of the servers and of this \
         process (the clients) per committed transaction; machine: server plus client CPU over the wall time, as \
         a share of {} cores; all over the measured window only)",
        cores()
    );
    out
}

/// For the Jessy family: NMSI's committed transactions per second over each of rc, ser, us, si and psi, per
/// termination and client count (the NMSI paper's comparison).
fn nmsi_ratios(rows: &[RunRow]) -> Vec<String> {
    let mut lines = Vec::new();
    for nmsi in rows.iter().filter(|r| r.protocol == "nmsi") {
        let ratios: Vec<String> = ["rc", "ser", "us", "si", "psi"]
            .iter()
            .filter_map(|other| {
                let o = rows
                    .iter()
                    .find(|r| r.protocol == *other && r.termination == nmsi.termination && r.clients == nmsi.clients)?;
                Some(match o.throughput() {
                    t if t > 0.0 => format!("nmsi/{other} = {:.2}×", nmsi.throughput() / t),
                    _ => format!("nmsi/{other}: - ({other} committed nothing)"),
                })
            })
            .collect();
        if !ratios.is_empty() {
            lines.push(format!(
                "committed txn/s, {} termination, {} clients per DC: {}",
                nmsi.termination.map_or("-".to_string(), |t| t.to_string()),
                nmsi.clients,
                ratios.join(", ")
            ));
        }
    }
    lines
}

fn rand_seed() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(1)
}
