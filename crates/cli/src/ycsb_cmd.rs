//! `snowline ycsb`: YCSB's own client (`site.ycsb.Client`) driving snowline through the gRPC API, with the
//! binding in `clients/ycsb/` (docs/API.md, "YCSB"). The binding is built with Maven once (again when its
//! sources change); the command starts a local cluster unless given one, runs the load phase and then the
//! run phase, and prints YCSB's reports as YCSB prints them.

use crate::client_cmd::{LocalSetup, start_local_cluster};
use anyhow::{Context, Result, bail};
use clap::Args;
use snowline_core::{Protocol, Topology};
use snowline_net::ClusterConfig;
use std::path::{Path, PathBuf};
use std::process::Command;

#[derive(Args, Clone, Debug)]
pub struct YcsbArgs {
    /// The protocol of the local cluster this command starts (without --cluster; with it, the cluster's).
    #[arg(long, default_value = "2pl")]
    pub protocol: String,
    /// A core workload (a .. f: YCSB's A–F; e answers its scans NOT_IMPLEMENTED, as snowline has no range
    /// reads), closedeconomy (money moved between accounts in transactions; the total is checked after the
    /// run), or a workload file.
    #[arg(long, default_value = "a")]
    pub workload: String,
    /// Records loaded (YCSB's recordcount).
    #[arg(long, default_value_t = 1000)]
    pub records: u64,
    /// Operations of the run phase (YCSB's operationcount).
    #[arg(long, default_value_t = 10_000)]
    pub operations: u64,
    /// YCSB client threads (each a snowline session, spread over the datacenter's endpoints).
    #[arg(long, default_value_t = 4)]
    pub threads: u32,
    /// Run each YCSB operation as one interactive transaction (true) or as single-key calls (false).
    /// Default: transactions where the protocol offers them and the workload needs them (the closed
    /// economy) or the protocol has no blind writes (the Jessy family); single-key calls otherwise.
    #[arg(long)]
    pub transactional: Option<bool>,
    /// Datacenters of the local cluster.
    #[arg(long, default_value_t = 1)]
    pub dcs: u16,
    /// Partitions per datacenter of the local cluster.
    #[arg(long, default_value_t = 2)]
    pub partitions: u16,
    /// Servers per partition (default: one per datacenter; the Jessy family runs with replica groups too).
    #[arg(long)]
    pub replicas: Option<u16>,
    /// The Jessy family: how update transactions terminate.
    #[arg(long, default_value = "multicast")]
    pub termination: snowline_core::Termination,
    /// Where the binding's Maven project is (default: clients/ycsb of the source tree this command runs
    /// from or in).
    #[arg(long, env = "SNOWLINE_YCSB_DIR")]
    pub ycsb_dir: Option<PathBuf>,
    /// More YCSB arguments, after `--` (e.g. `-- -p requestdistribution=uniform`).
    #[arg(last = true)]
    pub extra: Vec<String>,
}

/// `snowline [--cluster DIR] [--dc N] ycsb ...`: with `--cluster` (the client commands' flag), against that
/// running cluster's endpoints in datacenter `dc`; without it, against a local cluster started for the run.
pub fn run(args: YcsbArgs, cluster: Option<PathBuf>, dc: u16) -> Result<()> {
    let project = find_project(args.ycsb_dir.as_deref())?;
    let workload = workload_file(&project, &args.workload)?;
    build_binding(&project)?;
    match &cluster {
        Some(dir) => {
            let config = crate::client_cmd::load_config(&dir.join(snowline_net::cluster::CONFIG_FILE))
                .with_context(|| format!("reading the cluster in {}", dir.display()))?;
            run_phases(&project, &workload, &config, &args, dc)
        }
        None => {
            let replicas = args.replicas.unwrap_or(args.dcs);
            let topology = Topology::placed(args.dcs, args.partitions, replicas, Default::default());
            snowline_protocols::with_protocol!(&args.protocol, P => P::check_topology(&topology))?
                .map_err(|e| anyhow::anyhow!(e))?;
            let setup = LocalSetup {
                grpc: true,
                protocol_config: snowline_core::ProtocolConfig { termination: args.termination, ..Default::default() },
                ..Default::default()
            };
            let (cluster, config, dir) = start_local_cluster(&args.protocol, topology, 0.0, setup)?;
            println!("ycsb: a local {} cluster in {}", config.protocol, dir.display());
            let result = run_phases(&project, &workload, &config, &args, dc);
            cluster.stop();
            if result.is_ok() {
                let _ = std::fs::remove_dir_all(&dir);
            }
            result.with_context(|| format!("server logs are in {}", dir.display()))
        }
    }
}

/// The binding's Maven project: `--ycsb-dir`, else `clients/ycsb` above the working directory or the
/// executable (a source tree's `target/…/snowline`).
fn find_project(given: Option<&Path>) -> Result<PathBuf> {
    if let Some(dir) = given {
        anyhow::ensure!(dir.join("pom.xml").exists(), "{} has no pom.xml: not the YCSB binding", dir.display());
        return Ok(dir.to_path_buf());
    }
    let mut starts = vec![std::env::current_dir()?];
    if let Ok(exe) = std::env::current_exe() {
        starts.push(exe);
    }
    for start in starts {
        for dir in start.ancestors() {
            let candidate = dir.join("clients/ycsb");
            if candidate.join("pom.xml").exists() {
                return Ok(candidate);
            }
        }
    }
    bail!(
        "cannot find the YCSB binding (clients/ycsb of the snowline source tree): run from the source tree or pass --ycsb-dir"
    )
}

fn workload_file(project: &Path, name: &str) -> Result<PathBuf> {
    let file = match name {
        "a" | "b" | "c" | "d" | "e" | "f" => project.join(format!("workloads/workload{name}")),
        "closedeconomy" => project.join("workloads/closedeconomy"),
        other => PathBuf::from(other),
    };
    anyhow::ensure!(
        file.exists(),
        "no workload {name:?} (a .. f, closedeconomy, or a file): {} is missing",
        file.display()
    );
    Ok(file)
}

fn require(tool: &str, install: &str) -> Result<()> {
    let found =
        Command::new(tool).arg("-version").output().is_ok() || Command::new(tool).arg("--version").output().is_ok();
    anyhow::ensure!(found, "`{tool}` is not installed: the YCSB binding needs it ({install})");
    Ok(())
}

/// Build the binding unless its jar is newer than every source file of the project (and the `.proto`).
fn build_binding(project: &Path) -> Result<()> {
    require("java", "Java 17: apt-get install openjdk-17-jdk-headless")?;
    let jar = project.join("target/snowline-ycsb.jar");
    let built = std::fs::metadata(&jar).and_then(|m| m.modified()).ok();
    let mut sources = vec![project.join("pom.xml"), project.join("../../proto/snowline/v1/snowline.proto")];
    collect_files(&project.join("src/main"), &mut sources);
    let newest = sources.iter().filter_map(|p| std::fs::metadata(p).and_then(|m| m.modified()).ok()).max();
    if let (Some(built), Some(newest)) = (built, newest)
        && built >= newest
        && project.join("target/dependency").exists()
    {
        return Ok(());
    }
    require("mvn", "Maven 3.8 or later: apt-get install maven")?;
    println!("ycsb: building the binding in {} (mvn package, once)", project.display());
    let status = Command::new("mvn")
        .args(["-q", "-B", "-Dstyle.color=never", "package", "-DskipTests"])
        .current_dir(project)
        .status()
        .context("running mvn")?;
    anyhow::ensure!(status.success(), "building the YCSB binding failed (mvn package in {})", project.display());
    Ok(())
}

fn collect_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            collect_files(&path, out);
        } else {
            out.push(path);
        }
    }
}

/// The load phase, then the run phase, each YCSB's own report on stdout.
fn run_phases(project: &Path, workload: &Path, config: &ClusterConfig, args: &YcsbArgs, dc: u16) -> Result<()> {
    let targets: Vec<String> = config.nodes.iter().filter(|n| n.dc == dc).filter_map(|n| n.grpc.clone()).collect();
    anyhow::ensure!(
        !targets.is_empty(),
        "no node of datacenter {} serves the gRPC API (no `grpc` address in its cluster.toml)",
        dc
    );
    let classpath = format!(
        "{}:{}/*",
        project.join("target/snowline-ycsb.jar").display(),
        project.join("target/dependency").display()
    );
    let offers = snowline_protocols::with_protocol!(&config.protocol, P => P::OFFERS)?;
    let transactional =
        args.transactional.unwrap_or(offers.interactive && (args.workload == "closedeconomy" || !offers.blind_writes));
    if transactional && !offers.interactive {
        println!(
            "ycsb: {} offers no interactive transactions: every operation will answer NOT_IMPLEMENTED",
            config.protocol
        );
    }
    for (phase, flag) in [("load", "-load"), ("run", "-t")] {
        println!(
            "ycsb: {phase} phase, workload {}, {} ({}) against {}",
            workload.display(),
            config.protocol,
            if transactional { "each operation a transaction" } else { "single-key calls" },
            targets.join(",")
        );
        let mut java = Command::new("java");
        java.args(["-cp", &classpath, "site.ycsb.Client", flag, "-db", "dev.snowline.ycsb.SnowlineClient", "-P"])
            .arg(workload)
            .args(["-p", &format!("snowline.target={}", targets.join(","))])
            .args(["-p", &format!("recordcount={}", args.records)])
            .args(["-p", &format!("operationcount={}", args.operations)])
            .args(["-p", &format!("snowline.transactional={transactional}")])
            .args(["-threads", &args.threads.to_string(), "-s"])
            .args(&args.extra);
        if let Some(tls) = config.tls.as_ref().filter(|t| t.clients) {
            java.args(["-p", &format!("snowline.tls_ca={}", tls.ca.display())]);
        }
        let status = java.status().context("running java (YCSB's client)")?;
        anyhow::ensure!(status.success(), "YCSB's {phase} phase failed ({status})");
    }
    Ok(())
}
