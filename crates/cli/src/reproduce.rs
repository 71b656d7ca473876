//! `snowline reproduce contrarian|tomsic|snow-cops|nmsi|snow-rococo|ramp|coordination`: a paper's experiment end to end — the client sweep for
//! every protocol and variant, in the simulator or on real local clusters, then the results directory, the
//! charts and a summary putting the paper's headline figures beside snowline's.

use anyhow::{Context, Result};
use clap::Args;
use snowline_harness::report::{self, RunRecord};
use snowline_harness::{Experiment, Paper, Runtime};
use snowline_protocols::with_protocol;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::Instant;

#[derive(Args, Clone, Debug)]
pub struct ReproduceArgs {
    /// contrarian (Contrarian §5.2, Fig. 4), tomsic (Tomsic §5.3.2, Fig. 4), snow-cops (SNOW §6.1, Fig. 5),
    /// nmsi (NMSI §V, Figs. 1, 3, 4: the criteria this build has of nmsi, rc, ser, us, si, psi) or snow-rococo
    /// (SNOW §6.2, Fig. 7: rococo-snow, rococo, 2pl and occ on TPC-C over the concurrent requests per server)
    /// or ramp (RAMP §5: ramp-f, ramp-s, ramp-h, nocc, 2pl and eiger-ps over clients, read share, transaction
    /// size and value size, and RAMP-F's scale-out in the simulator) or coordination (coordination avoidance
    /// §6.2, Figs. 5–6: coordination-free TPC-C New-Order on ramp-f against 2pl, occ and rococo, over 1 to 100
    /// servers with 5 warehouses each and over the share of distributed New-Orders).
    pub paper: Paper,
    /// sim: the papers' set-ups in the simulator; real: real server processes, scaled down to this machine.
    #[arg(long, default_value = "sim")]
    pub runtime: Runtime,
    /// Short runs and a short sweep (a few minutes on 2 cores).
    #[arg(long)]
    pub quick: bool,
    /// Results directory (default: results/<paper>-<runtime>).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Replace the paper's protocols (subject first, baseline last), e.g. to try the plumbing with protocols
    /// this build has.
    #[arg(long, value_delimiter = ',', hide = true)]
    pub protocols: Vec<String>,
    /// Replace the client sweep (clients per loaded datacenter; snow-rococo: clients in all, spread over the
    /// servers).
    #[arg(long, value_delimiter = ',')]
    pub clients: Vec<usize>,
}

pub fn run(args: ReproduceArgs) -> Result<()> {
    let mut exp = Experiment::new(args.paper, args.runtime, args.quick);
    if !args.protocols.is_empty() {
        exp.protocols = args.protocols.clone();
        exp.notes.push(format!("protocols overridden: {}", exp.protocols.join(", ")));
    }
    if !args.clients.is_empty() {
        exp.clients = args.clients.clone();
        for v in &mut exp.variants {
            v.clients = None;
        }
    }
    for p in &exp.protocols {
        snowline_protocols::canonical_name(p).with_context(|| {
            format!("the {} reproduction needs protocol {p}, which this build does not have", args.paper.name())
        })?;
    }
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from(format!("results/{}-{}", exp.paper.name(), exp.runtime.name())));
    std::fs::create_dir_all(&out).with_context(|| format!("creating {}", out.display()))?;
    println!("{}", exp.setup());
    let points = exp.points();
    let progress = crate::progress::bar(points.len() as u64);
    let started = Instant::now();
    let mut records: Vec<RunRecord> = Vec::new();
    for (variant, protocol, clients) in points {
        progress.set_message(format!("{} {protocol} {clients} clients/DC", exp.variants[variant].label));
        let t = Instant::now();
        let report = match exp.runtime {
            Runtime::Sim => with_protocol!(&protocol, P => exp.run_sim::<P>(variant, clients))?,
            Runtime::Real => run_real(&exp, variant, &protocol, clients)?,
        };
        let record = exp.record(variant, clients, report, &protocol, t.elapsed().as_secs_f64());
        report::write_run(&out, &record)?;
        progress.suspend(|| println!("{}", exp.point_line(&record)));
        records.push(record);
        progress.inc(1);
    }
    progress.finish_and_clear();
    report::write_all(&out, &records)?;
    let table = exp.table(&records);
    std::fs::write(out.join("table.txt"), &table)?;
    let charts = exp.charts(&records, &out)?;
    let headline = exp.headline(&records);
    let mut summary = format!("# snowline reproduce {}\n\n", exp.paper.name());
    let _ = writeln!(
        summary,
        "Command: `snowline reproduce {} --runtime {}{}`; {} runs in {:.0} s of wall time on a machine with {} cores.\n",
        exp.paper.name(),
        exp.runtime.name(),
        if exp.quick { " --quick" } else { "" },
        records.len(),
        started.elapsed().as_secs_f64(),
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    let _ = writeln!(summary, "## Set-up\n\n{}\n\n## Headline: the paper beside snowline\n\n{headline}", exp.setup());
    let _ = writeln!(summary, "## Runs\n\n```\n{table}```\n\n## Charts\n");
    for c in &charts {
        let name = c.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_default();
        let _ = writeln!(summary, "- ![{name}]({name})");
    }
    std::fs::write(out.join("summary.md"), &summary)?;
    println!("\n{table}");
    println!("{headline}");
    println!("results, charts and summary.md written to {}", out.display());
    Ok(())
}

/// One point on a fresh local cluster of real server processes.
fn run_real(exp: &Experiment, variant: usize, protocol: &str, clients: usize) -> Result<snowline_harness::RunReport> {
    let v = &exp.variants[variant];
    let spec = exp.spec(variant, clients);
    let name = snowline_protocols::canonical_name(protocol)?;
    let (report, _cpu) = crate::client_cmd::with_local_cluster(
        name,
        v.topology,
        v.uniform_inter_dc_ms(),
        Default::default(),
        |config| {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
            with_protocol!(name, P => rt.block_on(snowline_harness::net_run::run_net::<P>(config, &spec)))?
        },
    )?;
    Ok(report)
}
