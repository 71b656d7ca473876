//! The `snowline` command, as a library: `src/main.rs` only calls [`main`]. Being a library is for build
//! time: the crates' test suites link it, so the code it instantiates for every protocol (servers, clients,
//! the simulator) is compiled once and shared instead of once per test binary (docs/ARCHITECTURE.md, "Build
//! time").
// The CLI is a runtime edge: it reads real clocks to time runs and seeds from the OS.
#![allow(clippy::disallowed_methods)]

mod api_bench;
mod bench_cmd;
mod bound_cmd;
mod check_cmd;
mod client_cmd;
mod demo;
#[cfg(test)]
mod doc_commands;
mod duration;
mod multicast_bench;
mod nemesis;
mod pinning;
mod progress;
mod redis_baseline;
mod reproduce;
mod sim_cmd;
mod snow_cmd;
mod ycsb_cmd;

use anyhow::{Context, Result};
use clap::{Args, CommandFactory, FromArgMatches, Parser, Subcommand};
use std::path::PathBuf;

#[derive(Parser)]
#[command(
    name = "snowline",
    version,
    about = "A geo-replicated transactional key-value store with interchangeable protocols"
)]
struct Cli {
    /// Directory of a running cluster (holds cluster.toml), for the client commands.
    #[arg(long, global = true, env = "SNOWLINE_CLUSTER")]
    cluster: Option<PathBuf>,
    /// Datacenter the client commands connect to.
    #[arg(long, global = true, default_value_t = 0)]
    dc: u16,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Start a local two-datacenter cluster of real processes, run a short workload against every protocol,
    /// check each history and print one table.
    Demo(demo::DemoArgs),
    /// Run a workload against a real local cluster while injecting faults drawn from a seed (network
    /// partitions, delay, loss, connection resets, paused and killed servers, clock offsets); check the history at the protocol's claimed
    /// level and that every acknowledged write is readable in every datacenter after healing.
    Nemesis(nemesis::NemesisArgs),
    /// Read a SQL schema (and transaction templates) and say, per invariant and transaction, whether the
    /// transaction needs coordination to keep it (invariant confluence), and the least each needs
    /// (docs/ANALYZER.md). Exits 1 on bad input, with the file, line and column.
    Analyze {
        /// The schema: CREATE TABLE statements with their constraints, and annotations in comments;
        /// transactions may follow (`-- transaction: NAME`).
        schema: PathBuf,
        /// Transaction templates in a file of their own.
        #[arg(long)]
        transactions: Option<PathBuf>,
        /// One JSON object (`verdicts`, `transactions`; docs/ANALYZER.md) instead of the text report.
        #[arg(long)]
        json: bool,
    },
    /// Throughput bounds coordination puts on conflicting transactions (`bound 2pc`: two-phase commit,
    /// the coordination-avoidance paper's §6.1).
    Bound(bound_cmd::BoundArgs),
    /// Run one server process (hosting the partitions the config assigns to NODE).
    Server {
        /// The cluster's config file (docs/CONFIG.md), the same for every process of the cluster.
        #[arg(long)]
        config: PathBuf,
        /// Which node of the config this process is (its [[node]] id).
        #[arg(long)]
        node: u32,
        /// Keep this server's data here and recover it on restart (default: in memory, lost on exit).
        #[arg(long)]
        data_dir: Option<PathBuf>,
        /// With --data-dir, how inputs reach the disk; every policy but none holds a reply or message back
        /// until what caused it is on disk. group (default): one fsync for everything that arrived together
        /// (at most 128 records, or 2 ms while busy); per-write: one fsync per input (slower, same promise);
        /// none: no fsync (a crash of the machine loses acknowledged writes; benchmarks only).
        #[arg(long, default_value = "group")]
        fsync: snowline_storage::FsyncPolicy,
        /// Serve metrics (Prometheus text, GET http://ADDR/metrics) on ADDR (host:port), overriding the
        /// node's `metrics` in the config (docs/OPERATIONS.md). Default: the config's, else none.
        #[arg(long, value_name = "ADDR")]
        metrics: Option<String>,
        /// Serve the public gRPC API (docs/API.md) on ADDR (host:port), overriding the node's `grpc` in the
        /// config. Default: the config's, else none.
        #[arg(long, value_name = "ADDR")]
        grpc: Option<String>,
    },
    /// Start, inspect, restart nodes of and stop a local cluster of server processes.
    #[command(subcommand)]
    Cluster(ClusterCommand),
    /// Make a CA and a certificate and key for every node of a cluster config (for a multi-host cluster;
    /// `cluster up` does this by itself), and print the [tls] section that names them.
    Certs {
        /// The cluster.toml whose nodes need certificates (it may lack its [tls] section yet).
        #[arg(long)]
        config: PathBuf,
        /// Where to write ca.pem, node-N.pem and node-N.key.
        #[arg(long)]
        out: PathBuf,
    },
    /// Run a closed-loop workload in the deterministic simulator.
    Sim(sim_cmd::SimArgs),
    /// Run a closed-loop workload against a real local cluster that this command starts and stops.
    Bench(bench_cmd::BenchArgs),
    /// Run YCSB's own client (site.ycsb.Client) with the snowline binding (clients/ycsb, built with Maven
    /// once) against a local cluster or --cluster: the load phase, then the run phase, printing YCSB's
    /// reports (docs/API.md).
    Ycsb(ycsb_cmd::YcsbArgs),
    /// What the gRPC API costs against the native client: the same closed loop of single-key reads and
    /// writes through each, one after the other against one local cluster; throughput and latency of both.
    BenchApi(api_bench::ApiBenchArgs),
    /// Measure genuine atomic multicast (Skeen over Raft groups, amcast-kv) beside two-phase commit over the
    /// same groups (tpc-kv) per number of destination groups, LAN and WAN: latency in time and in message
    /// delays beside the analysis, messages per operation, throughput and aborts; in the simulator
    /// (default) or on local clusters of server processes (--runtime real).
    BenchMulticast(multicast_bench::MulticastBenchArgs),
    /// Reproduce a paper's experiment end to end: the sweep, every protocol, the charts, and a summary
    /// beside the paper's figures.
    Reproduce(reproduce::ReproduceArgs),
    /// The SNOW theorem's table, measured: every protocol with read-only transactions on one contended
    /// workload in the simulator, its S, N, O and W beside the SNOW paper's cells (Fig. 8), a verdict
    /// separating disagreements from results stronger than the paper's, and failed operations by cause.
    Snow(snow_cmd::SnowArgs),
    /// Check a recorded history (docs/HISTORY.md) at a consistency level: exit 0 if it holds, 1 with a
    /// witness if not, 2 if the input is not a valid history.
    Check {
        /// The history file (JSON lines, docs/HISTORY.md), as `sim` or `bench --history` write it.
        history: PathBuf,
        /// A consistency level (rc, ra, causal-snapshot, causal, tcc, ser, strict-ser, si, psi, nmsi, us, pos), or
        /// `claimed`: the level the protocol claims (the protocol from --protocol or the history's metadata).
        #[arg(long)]
        level: String,
        /// With --level claimed: the protocol whose claim to check (default: the history's metadata line).
        #[arg(long)]
        protocol: Option<String>,
        /// Print the verdict as JSON.
        #[arg(long)]
        json: bool,
        /// List every witness (up to a cap per kind), not just the first of each kind.
        #[arg(long)]
        all: bool,
    },
    /// Write KEY = VALUE (or the contents of --value-file); the protocols that serve it are listed below.
    Put {
        /// The key to write.
        key: String,
        /// The value to write (or --value-file).
        #[arg(required_unless_present = "value_file", conflicts_with = "value_file")]
        value: Option<String>,
        /// Read the value from this file (for values too large for a command line).
        #[arg(long)]
        value_file: Option<PathBuf>,
    },
    /// Read KEY; the protocols that serve it are listed below.
    Get {
        /// The key to read.
        key: String,
    },
    /// A read-only transaction over KEYS, from one snapshot; prints JSON. The protocols that serve it are
    /// listed below.
    Rot {
        /// The keys to read, from one snapshot.
        #[arg(required = true)]
        keys: Vec<String>,
    },
    /// A transaction: reads (--get K, one round, in order), then writes (--put K=V), committed atomically.
    /// With a protocol that offers interactive transactions it reads and writes under its isolation and may
    /// abort: then it prints the cause and exits 3. Protocols with only blind write transactions take --put
    /// alone. Prints JSON: the values read and the commit version. Which protocols serve which form is listed
    /// below.
    Txn {
        /// A key to read (repeatable), before the writes.
        #[arg(long = "get", value_name = "KEY")]
        gets: Vec<String>,
        /// A key to write and its value (repeatable), committed with the transaction.
        #[arg(long = "put", value_name = "KEY=VALUE", required_unless_present = "gets")]
        puts: Vec<String>,
    },
}

#[derive(Subcommand)]
enum ClusterCommand {
    /// Start a local cluster, or the stopped cluster of --dir again; foreground until Ctrl-C unless
    /// --background.
    ///
    /// With --dir DIR where DIR holds a cluster already (DIR/cluster.toml, from an earlier `cluster up`):
    /// refused while any of its servers runs. A stopped cluster is started again as it was: same config,
    /// ports and certificates (DIR/tls), and a durable cluster recovers its data (DIR/servers.toml records
    /// the --data-dir and --fsync it was started with). Flags may then be left out; those given must agree with
    /// DIR's cluster, except --fsync, which may change. A stopped in-memory cluster has no data to keep: flags
    /// that differ replace it with a new cluster. Use another --dir for a new durable cluster.
    Up(ClusterUpArgs),
    /// Stop every server of the cluster of --dir (verifying each pid first); `cluster up --dir` resumes it.
    ///
    /// Stops every process that is verifiably one of its servers (its command line says `server --config
    /// DIR/cluster.toml --node N`), whether `cluster up`, `cluster restart` or a user started it; a pid in
    /// DIR/pids that is not one of them is left alone and reported. Prints how many were running, which were
    /// stopped and which nodes were down already. DIR keeps the config, the certificates and the data
    /// directory's location: `cluster up --dir DIR` starts the cluster again.
    Down {
        /// The cluster's directory (what `cluster up` printed).
        #[arg(long)]
        dir: PathBuf,
    },
    /// Show each node of the cluster of --dir: up or down, pid, address, data directory, memory and CPU.
    ///
    /// One line per node: id, the servers it hosts, up/down, protocol, pid, address, metrics address (when a
    /// node has one), data directory, and for a running node its resident memory, CPU time, average share of
    /// one core since it started and bytes it wrote to storage. Notes a server missing from DIR/pids (started by hand) and a pid in DIR/pids that is
    /// not one of its servers. Exits 0 whatever runs.
    Status {
        /// The cluster's directory (what `cluster up` printed).
        #[arg(long)]
        dir: PathBuf,
    },
    /// Start node N of a durable cluster again after it stopped or crashed; it recovers its data.
    ///
    /// Starts it with the arguments `cluster up` used (DIR/servers.toml: its data directory and fsync policy),
    /// appending to DIR/node-N.log and recording its pid in DIR/pids so that `cluster down` stops it; returns
    /// once it accepts connections. It recovers its data and catches up with the other servers. Refused if
    /// node N runs, and for an in-memory cluster (the node would come back empty, without the writes it held).
    Restart {
        /// The cluster's directory (what `cluster up` printed).
        #[arg(long)]
        dir: PathBuf,
        /// The node to start (`cluster status` lists them); repeat for several.
        #[arg(long = "node", value_name = "N", required = true)]
        nodes: Vec<u32>,
    },
}

#[derive(Args, Clone)]
pub struct ClusterUpArgs {
    /// The protocol every server runs (docs/PROTOCOLS.md; `--help` lists the names, from the registry).
    #[arg(long, default_value = "cv")]
    pub protocol: String,
    /// Datacenters.
    #[arg(long, default_value_t = 2)]
    pub dcs: u16,
    /// Partitions per datacenter.
    #[arg(long, default_value_t = 4)]
    pub partitions: u16,
    /// Servers per partition (its replica group), placed as --placement says. Default: one per datacenter,
    /// which every protocol but the replica-group ones (`--help` lists them) requires.
    #[arg(long)]
    pub replicas: Option<u16>,
    /// Where each partition's replica group lives: spread (member m of partition p in datacenter
    /// (p + m) mod dcs) or site (the whole group in datacenter p mod dcs, as in the NMSI paper's set-up).
    #[arg(long, default_value = "spread")]
    pub placement: snowline_core::Placement,
    /// The Jessy family: how update transactions terminate, by genuine atomic multicast or two-phase commit
    /// (written into cluster.toml's [protocol_config]).
    #[arg(long, default_value = "multicast")]
    pub termination: snowline_core::Termination,
    /// Where to write cluster.toml, servers.toml, pids, the logs and tls/ (default: a new temporary
    /// directory). If it holds a stopped cluster, that cluster is started again (see above).
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Emulated one-way latency between datacenters, in milliseconds.
    #[arg(long, default_value_t = 0.0)]
    pub latency_ms: f64,
    /// First TCP port (default: a free range).
    #[arg(long)]
    pub base_port: Option<u16>,
    /// Return once the cluster is up, leaving it running (stop it with `cluster down`).
    #[arg(long)]
    pub background: bool,
    /// Make the servers durable: node N keeps its data in DIR/node-N and recovers it when started again.
    #[arg(long)]
    pub data_dir: Option<PathBuf>,
    /// With --data-dir: group (default), per-write or none (see `snowline server --help`).
    #[arg(long, default_value = "group")]
    pub fsync: snowline_storage::FsyncPolicy,
    /// Run without peer authentication: any connection may then speak for any server (experiments only).
    /// Default: the servers authenticate each other by mutual TLS, with a CA and node certificates made in
    /// DIR/tls.
    #[arg(long)]
    pub insecure: bool,
    /// Clients must connect with TLS too (they verify the servers against DIR/tls/ca.pem); default: clients
    /// may use plain TCP or TLS.
    #[arg(long, conflicts_with = "insecure")]
    pub client_tls: bool,
    /// Give every server a metrics port (Prometheus text at http://127.0.0.1:PORT/metrics, free ports written
    /// into cluster.toml as each node's `metrics`; `cluster status` lists them). Default: no metrics.
    #[arg(long)]
    pub metrics: bool,
    /// The flags given on the command line (not defaulted), by argument id: a resumed cluster checks them.
    #[arg(skip)]
    pub given: Vec<String>,
}

/// The command line, with what the protocol registry decides in its help texts: the protocols that serve
/// each client operation (`put`, `get`, `rot`, `txn`), the names `--protocol` takes and the protocols that
/// run in replica groups. Never a list kept by hand.
fn cli_command() -> clap::Command {
    let mut cmd = Cli::command();
    for name in ["put", "get", "rot", "txn"] {
        cmd = cmd.mut_subcommand(name, |c| c.after_help(served_by(name)));
    }
    let names = protocol_names();
    let groups = replica_group_protocols().join(", ");
    let protocol = |a: clap::Arg| {
        let help = a.get_help().map(|h| h.to_string()).unwrap_or_default();
        let help = help.split(" (docs/PROTOCOLS.md").next().unwrap_or_default().to_string();
        a.help(format!("{help}: {names} (docs/PROTOCOLS.md)."))
    };
    let replicas = |a: clap::Arg| {
        let help = a.get_help().map(|h| h.to_string()).unwrap_or_default();
        a.help(help.replace("(`--help` lists them)", &format!("({groups})")))
    };
    let family = snowline_protocols::jessy::FAMILY.join(", ");
    let termination = |a: clap::Arg| {
        let help = a.get_help().map(|h| h.to_string()).unwrap_or_default();
        a.help(help.replacen("The Jessy family", &format!("The Jessy family ({family})"), 1))
    };
    cmd = cmd.mut_subcommand("cluster", |c| {
        c.mut_subcommand("up", |up| {
            up.mut_arg("protocol", protocol).mut_arg("replicas", replicas).mut_arg("termination", termination)
        })
    });
    for name in ["sim", "bench"] {
        cmd = cmd.mut_subcommand(name, |c| {
            c.mut_arg("protocol", protocol).mut_arg("replicas", replicas).mut_arg("termination", termination)
        });
    }
    cmd
}

/// Every protocol name, its aliases in parentheses: "cops, cops-snow (cc-lo), ...".
fn protocol_names() -> String {
    snowline_protocols::PROTOCOLS
        .iter()
        .map(
            |p| {
                if p.aliases.is_empty() { p.name.to_string() } else { format!("{} ({})", p.name, p.aliases.join(", ")) }
            },
        )
        .collect::<Vec<_>>()
        .join(", ")
}

/// The protocols whose partitions may be replica groups (several servers each).
fn replica_group_protocols() -> Vec<&'static str> {
    let groups = snowline_core::Topology::replicated(1, 1, 3);
    snowline_protocols::PROTOCOLS
        .iter()
        .filter(|p| {
            snowline_protocols::with_protocol!(p.name, P => <P as snowline_core::Protocol>::check_topology(&groups).is_ok()).unwrap_or(false)
        })
        .map(|p| p.name)
        .collect()
}

/// The `after_help` of a client command: per form of it, the protocols that serve it, from the registry.
fn served_by(command: &str) -> String {
    let mut out = String::from(
        "Served by (the cluster's protocol decides; `cluster up` and `cluster status` list what it serves):",
    );
    for op in snowline_protocols::CLIENT_OPERATIONS.iter().filter(|op| op.command == command) {
        out += &format!("\n  {} ({}):\n      {}", op.usage, op.what, op.protocols().join(", "));
        let read_first: Vec<&str> = snowline_protocols::PROTOCOLS
            .iter()
            .filter(|p| {
                op.served_by(&p.offers)
                    && op.usage.contains("--get")
                    && !p.offers.unread_writes(&[], &[("k".into(), "v".into())]).is_empty()
            })
            .map(|p| p.name)
            .collect();
        if !read_first.is_empty() {
            out +=
                &format!("\n      ({}: every key written must be read first, no blind writes)", read_first.join(", "));
        }
        out += &format!("\n      e.g. snowline --cluster DIR {}", op.example);
    }
    out
}

/// An error and its causes, each cause left out where the message so far says it already (an error that
/// embeds its source's text and also returns it as its source).
fn error_chain(e: &anyhow::Error) -> String {
    let mut out = e.to_string();
    for cause in e.chain().skip(1) {
        let text = cause.to_string();
        if !out.contains(&text) {
            out += ": ";
            out += &text;
        }
    }
    out
}

/// Run the command line this process was started with, and exit.
pub fn main() {
    quiet_on_broken_pipe();
    let matches = cli_command().get_matches();
    let mut cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    if let (Command::Cluster(ClusterCommand::Up(args)), Some(up)) =
        (&mut cli.command, matches.subcommand_matches("cluster").and_then(|m| m.subcommand_matches("up")))
    {
        args.given = up
            .ids()
            .filter(|id| up.value_source(id.as_str()) == Some(clap::parser::ValueSource::CommandLine))
            .map(|id| id.as_str().to_owned())
            .collect();
    }
    if let Err(e) = refuse_client_flags(&matches).and_then(|()| run(cli)) {
        eprintln!("error: {}", error_chain(&e));
        std::process::exit(1);
    }
}

/// `--cluster` and `--dc` choose where the client commands connect; any other command would ignore them
/// (`bench` and `demo` start clusters of their own), so giving them there is refused rather than ignored.
/// `SNOWLINE_CLUSTER` in the environment is not: it stays set while other commands run.
fn refuse_client_flags(matches: &clap::ArgMatches) -> Result<()> {
    const CLIENT_COMMANDS: [&str; 5] = ["put", "get", "rot", "txn", "ycsb"];
    let Some((name, _)) = matches.subcommand() else { return Ok(()) };
    if CLIENT_COMMANDS.contains(&name) {
        return Ok(());
    }
    let mut m = matches;
    loop {
        for flag in ["cluster", "dc"] {
            if m.value_source(flag) == Some(clap::parser::ValueSource::CommandLine) {
                anyhow::bail!(
                    "--{flag} is for the client commands ({}); `snowline {name}` does not use it{}",
                    CLIENT_COMMANDS.join(", "),
                    match name {
                        "bench" | "demo" | "reproduce" => ": it starts and stops a cluster of its own",
                        "cluster" => ": cluster commands take --dir",
                        _ => "",
                    }
                );
            }
        }
        match m.subcommand() {
            Some((_, sub)) => m = sub,
            None => return Ok(()),
        }
    }
}

/// Output piped into a reader that stops (`snowline check ... | head`) ends the command quietly with
/// status 141, as a Unix tool killed by SIGPIPE would, instead of a panic message from `println!`. (SIGPIPE
/// itself stays ignored: the process also writes to sockets, where a closed peer must be an error.)
fn quiet_on_broken_pipe() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let msg = info
            .payload()
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| info.payload().downcast_ref::<&str>().copied())
            .unwrap_or("");
        if msg.starts_with("failed printing to stdout") && msg.contains("Broken pipe") {
            std::process::exit(141);
        }
        default(info);
    }));
}

fn run(cli: Cli) -> Result<()> {
    match cli.command {
        Command::Demo(args) => demo::run(args),
        Command::Nemesis(args) => nemesis::run(args),
        Command::Bound(args) => bound_cmd::run(args),
        Command::Analyze { schema, transactions, json } => {
            use std::io::Write;
            let report = snowline_analyzer::analyze_files(&schema, transactions.as_deref())
                .map_err(|e| anyhow::anyhow!("{e}"))?;
            // A closed pipe (`| head`) ends the output quietly.
            let _ = if json {
                writeln!(std::io::stdout(), "{}", report.to_json())
            } else {
                write!(std::io::stdout(), "{report}")
            };
            Ok(())
        }
        Command::Check { history, level, protocol, json, all } => {
            std::process::exit(check_cmd::run(&history, &level, protocol.as_deref(), json, all)?)
        }
        Command::Server { config, node, data_dir, fsync, metrics, grpc } => {
            client_cmd::server(&config, node, data_dir, fsync, metrics, grpc)
        }
        Command::Cluster(ClusterCommand::Up(args)) => client_cmd::cluster_up(args),
        Command::Certs { config, out } => client_cmd::certs(&config, &out),
        Command::Cluster(ClusterCommand::Down { dir }) => client_cmd::cluster_down(&dir),
        Command::Cluster(ClusterCommand::Status { dir }) => client_cmd::cluster_status(&dir),
        Command::Cluster(ClusterCommand::Restart { dir, nodes }) => client_cmd::cluster_restart(&dir, &nodes),
        Command::Sim(args) => sim_cmd::sim(args),
        Command::Bench(args) => bench_cmd::bench(args),
        Command::Ycsb(args) => ycsb_cmd::run(args, cli.cluster, cli.dc),
        Command::BenchApi(args) => api_bench::run(args),
        Command::BenchMulticast(args) => multicast_bench::run_bench(args),
        Command::Reproduce(args) => reproduce::run(args),
        Command::Snow(args) => snow_cmd::run(args),
        Command::Put { key, value, value_file } => {
            let value = match (value, value_file) {
                (Some(v), _) => v,
                (None, Some(path)) => std::fs::read_to_string(&path)
                    .with_context(|| format!("reading the value from {}", path.display()))?,
                (None, None) => unreachable!("clap requires a value or --value-file"),
            };
            client_cmd::client(cli.cluster, cli.dc, client_cmd::Op::Put(key.into(), value.into()))
        }
        Command::Get { key } => client_cmd::client(cli.cluster, cli.dc, client_cmd::Op::Rot(vec![key.into()])),
        Command::Rot { keys } => {
            client_cmd::client(cli.cluster, cli.dc, client_cmd::Op::Rot(keys.into_iter().map(Into::into).collect()))
        }
        Command::Txn { gets, puts } => {
            let mut writes = Vec::new();
            for p in puts {
                let (k, v) = p.split_once('=').with_context(|| format!("--put {p:?}: expected KEY=VALUE"))?;
                writes.push((k.into(), v.into()));
            }
            let reads = gets.into_iter().map(Into::into).collect();
            client_cmd::client(cli.cluster, cli.dc, client_cmd::Op::Txn { reads, writes })
        }
    }
}

#[cfg(test)]
mod help_tests {
    use super::*;

    fn missing(cmd: &clap::Command, path: &str, out: &mut Vec<String>) {
        for arg in cmd.get_arguments() {
            if arg.is_hide_set() || ["help", "version"].contains(&arg.get_id().as_str()) {
                continue;
            }
            if arg.get_help().is_none() && arg.get_long_help().is_none() {
                out.push(format!("{path} --{}", arg.get_long().unwrap_or(arg.get_id().as_str())));
            }
        }
        for sub in cmd.get_subcommands() {
            missing(sub, &format!("{path} {}", sub.get_name()), out);
        }
    }

    /// The help texts the registry writes: the protocols serving each client operation, the protocol names.
    #[test]
    fn help_lists_the_protocols_from_the_registry() {
        let mut cmd = cli_command();
        let txn = cmd.find_subcommand_mut("txn").unwrap().render_help().to_string();
        assert!(!txn.contains("(2pl, occ)"), "{txn}");
        let interactive = snowline_protocols::CLIENT_OPERATIONS.iter().find(|o| o.usage.contains("--get")).unwrap();
        assert!(txn.contains(&interactive.protocols().join(", ")), "{txn}");
        let rot = cmd.find_subcommand_mut("rot").unwrap().render_help().to_string();
        assert!(rot.contains("rot KEY KEY...") && rot.contains("cops") && !rot.contains("raft-kv"), "{rot}");
        let mut up = cmd.find_subcommand_mut("cluster").unwrap().find_subcommand_mut("up").unwrap().clone();
        let up = up.render_long_help().to_string();
        assert!(up.contains("cops-snow (cc-lo)") && up.contains("(raft-kv, amcast-kv, tpc-kv, nmsi"), "{up}");
    }

    /// A cause whose text the message already holds is not said twice.
    #[test]
    fn the_error_chain_says_each_cause_once() {
        let os = std::io::Error::from(std::io::ErrorKind::AddrInUse);
        let e = anyhow::Error::new(std::io::Error::other(format!("cannot listen: {os}")));
        let e = e.context("starting");
        assert_eq!(error_chain(&e), format!("starting: cannot listen: {os}"));
        let doubled = anyhow::anyhow!("cannot listen: {os}").context(format!("node 0: cannot listen: {os}"));
        assert_eq!(error_chain(&doubled), format!("node 0: cannot listen: {os}"));
    }

    /// Every flag and argument of every command says what it is for.
    #[test]
    fn every_flag_has_a_help_line() {
        let mut out = Vec::new();
        missing(&Cli::command(), "snowline", &mut out);
        assert!(out.is_empty(), "flags without a help line:\n{}", out.join("\n"));
    }
}
