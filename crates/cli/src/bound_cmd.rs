//! `snowline bound 2pc`: the throughput bound two-phase commit puts on conflicting transactions on one item
//! (the coordination-avoidance paper's §6.1, Fig. 3), by seeded Monte Carlo (`snowline_harness::bound`).

use anyhow::{Context, Result};
use snowline_harness::bound::{self, BoundRow, Delays};
use std::path::PathBuf;

#[derive(clap::Args, Debug)]
pub struct BoundArgs {
    #[command(subcommand)]
    what: BoundWhat,
}

#[derive(clap::Subcommand, Debug)]
enum BoundWhat {
    /// The most conflicting transactions per second on one item that coordinated (C-2PC) and decentralized
    /// (D-2PC) two-phase commit allow, for N participants, from a distribution of round trips.
    #[command(name = "2pc")]
    TwoPc(TwoPcArgs),
}

#[derive(clap::Args, Debug)]
struct TwoPcArgs {
    /// Where round trips come from: `lan` (a datacenter's: fast, with a long tail), `wan` (the eight EC2
    /// regions of the seed's Fig. 3b, the coordinator in Virginia), `sim` (the simulator's default network
    /// model over --dcs datacenters). Default: both `lan` and `wan`, beside the seed's figures.
    #[arg(long, value_enum)]
    profile: Option<Profile>,
    /// A cluster config whose one-way latency matrix (`inter_dc_latency_ms`) gives the round trips
    /// (participant i in datacenter i mod dcs; 0.2 ms within one).
    #[arg(long, conflicts_with_all = ["profile", "samples"])]
    config: Option<PathBuf>,
    /// A file of measured round trips, one per line in ms (`#` comments).
    #[arg(long, conflicts_with = "profile")]
    samples: Option<PathBuf>,
    /// Numbers of participants (a list, or a range such as 2-10).
    #[arg(long, default_value = "2-10")]
    participants: String,
    /// Datacenters of the `sim` profile (with one, the hot-item run of 2PL beside it).
    #[arg(long, default_value_t = 1)]
    dcs: u16,
    /// Closed-loop clients of the `sim` profile's hot-item run (all conflicting on the one item).
    #[arg(long, default_value_t = 16)]
    clients: usize,
    /// Draws per number of participants.
    #[arg(long, default_value_t = 100_000)]
    trials: usize,
    /// Seed of the draws (the same seed, the same table).
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum Profile {
    Lan,
    Wan,
    Sim,
}

pub fn run(args: BoundArgs) -> Result<()> {
    let BoundWhat::TwoPc(args) = args.what;
    let participants = parse_participants(&args.participants)?;
    anyhow::ensure!(args.trials > 0, "--trials must be at least 1");
    println!(
        "2PC throughput bound (the coordination-avoidance paper, §6.1): conflicting transactions on one item commit \
         one after another; C-2PC = max of N round trips + max of N more, D-2PC = max of N² round trips; \
         {} draws per row, seed {}",
        args.trials, args.seed
    );
    if let Some(path) = &args.config {
        let config = snowline_net::ClusterConfig::load(path)?;
        anyhow::ensure!(
            !config.inter_dc_latency_ms.is_empty(),
            "{}: no inter_dc_latency_ms: every round trip would be 0",
            path.display()
        );
        let delays = bound::from_matrix(&config.inter_dc_latency_ms, 0.2);
        return table(&format!("config {}", path.display()), &delays, &participants, &args, &[]);
    }
    if let Some(path) = &args.samples {
        let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        let delays = bound::parse_samples(&text, &path.display().to_string()).map_err(anyhow::Error::msg)?;
        return table(&format!("samples {}", path.display()), &delays, &participants, &args, &[]);
    }
    let profiles = match args.profile {
        Some(p) => vec![p],
        None => vec![Profile::Lan, Profile::Wan],
    };
    for p in profiles {
        match p {
            // The seed's Fig. 3a figures (LAN traces): N=2 and N=10.
            Profile::Lan => table(
                "lan (a stand-in for the seed's LAN traces, calibrated to its N = 2 and N = 10 figures)",
                &bound::lan(),
                &participants,
                &args,
                &[(2, "750", "1,100"), (10, "200", "120")],
            )?,
            // Fig. 3b: Virginia–Oregon, and all eight regions.
            Profile::Wan => {
                let wan: Vec<usize> = participants.iter().copied().filter(|&n| n <= bound::WAN_SITES.len()).collect();
                table(
                    "wan (mean round trips between EC2 regions, ±10 %; the seed's traces are not shipped)",
                    &bound::wan(),
                    &wan,
                    &args,
                    &[(2, "—", "12"), (8, "≈2", "≈2")],
                )?
            }
            Profile::Sim => {
                let model = snowline_sim::NetworkModel::default();
                let delays = bound::from_model(&model, args.dcs.max(1));
                table(
                    &format!("sim (the simulator's default network model, {} datacenter(s))", args.dcs),
                    &delays,
                    &participants,
                    &args,
                    &[],
                )?;
                if args.dcs == 1 {
                    hot_item_runs(&delays, &participants, &args)?;
                }
            }
        }
    }
    Ok(())
}

fn table(
    title: &str,
    delays: &Delays,
    participants: &[usize],
    args: &TwoPcArgs,
    seed: &[(usize, &str, &str)],
) -> Result<()> {
    let rows = bound::two_pc(delays, participants, args.trials, args.seed);
    println!();
    println!("profile {title}");
    let with_sites = delays.sites(1).is_some();
    println!(
        "{:>4}  {:>14}  {:>16}  {:>12}  {:>14}  seed's C / D commits/s",
        "N", "C-2PC commits/s", "D-2PC commits/s", "C-2PC ms", "D-2PC ms"
    );
    for r in &rows {
        let figure = seed.iter().find(|(n, _, _)| *n == r.participants).map(|(_, c, d)| format!("{c} / {d}"));
        let sites = if with_sites { delays.sites(r.participants).map(|s| format!("  [{s}]")) } else { None };
        println!(
            "{:>4}  {:>15.1}  {:>16.1}  {:>12.2}  {:>14.2}  {}{}",
            r.participants,
            r.coordinated_per_s(),
            r.decentralized_per_s(),
            r.coordinated_ms,
            r.decentralized_ms,
            figure.unwrap_or_default(),
            sites.unwrap_or_default()
        );
    }
    println!("{}", crossover_line(&rows));
    Ok(())
}

/// The bound's check: 2PL (its own two-phase commit) in the simulator, with the same network model, every
/// client looping a transaction on the one hot item and N − 1 keys of its own on other partitions
/// (`Pattern::HotItem`). It must come in under the bound (the run also pays for the client's round trips,
/// lock waits, wound-wait aborts with their backoff, and the CPU model's message costs).
fn hot_item_runs(delays: &Delays, participants: &[usize], args: &TwoPcArgs) -> Result<()> {
    use snowline_harness::run::{RunSpec, run_sim};
    use snowline_harness::workload::{MixedWorkload, Pattern};
    println!();
    println!(
        "hot-item run: 2pl in the simulator (the same network model and its CPU model), {} clients on one item, \
         2 s after 0.5 s of warm-up",
        args.clients
    );
    println!("{:>4}  {:>15}  {:>16}  {:>12}", "N", "2pl commits/s", "C-2PC bound /s", "of the bound");
    // One participant commits without 2PC: nothing to check.
    let participants: Vec<usize> = participants.iter().copied().filter(|&n| n >= 2).collect();
    let bound_rows = bound::two_pc(delays, &participants, args.trials.min(20_000), args.seed);
    let mut above = false;
    for (n, b) in participants.iter().zip(&bound_rows) {
        let topology = snowline_core::Topology::new(1, (*n).max(1) as u16);
        let workload = MixedWorkload {
            pattern: Pattern::HotItem { participants: *n },
            keys_per_partition: args.clients.max(1) + 1,
            ..MixedWorkload::default()
        };
        workload.validate(topology).map_err(anyhow::Error::msg)?;
        let spec = RunSpec {
            clients_per_dc: args.clients.max(1),
            client_dcs: None,
            duration_ns: 2_500_000_000,
            warmup_ns: 500_000_000,
            cooldown_ns: 0,
            workload,
            record_history: false,
            seed: args.seed,
            final_reads_after_ns: None,
            retry: Default::default(),
        };
        let config = snowline_sim::SimConfig::new(args.seed, topology, Default::default());
        let report = snowline_protocols::with_protocol!("2pl", P => run_sim::<P>(config, &spec))?;
        let ran = report.summary.ops_per_s;
        above |= ran > b.coordinated_per_s();
        println!(
            "{:>4}  {:>15.1}  {:>16.1}  {:>11.0}%",
            n,
            ran,
            b.coordinated_per_s(),
            100.0 * ran / b.coordinated_per_s()
        );
    }
    if above {
        println!(
            "above the bound: the seed's C-2PC model charges two waves of round trips per commit; 2pl's \
             coordinator is the lowest participant partition, here the hot item's own, so its prepare and \
             decision there are local and the hot lock is held for one round trip to the other participants \
             (plus CPU): 2pl on one hot item runs up to twice the model's bound"
        );
    }
    Ok(())
}

fn crossover_line(rows: &[BoundRow]) -> String {
    match bound::crossover(rows) {
        Some(n) => format!("crossover: coordinated 2PC allows more than decentralized from N = {n}"),
        None => "crossover: none in this range (decentralized 2PC allows more throughout)".into(),
    }
}

/// `2-10`, `2,4,8` or `5`.
fn parse_participants(s: &str) -> Result<Vec<usize>> {
    let bad =
        || anyhow::anyhow!("--participants {s:?}: give a number, a list (2,4,8) or a range (2-10) of numbers >= 1");
    let mut out = Vec::new();
    for part in s.split(',') {
        let part = part.trim();
        if let Some((a, b)) = part.split_once('-') {
            let (a, b): (usize, usize) = (a.trim().parse().map_err(|_| bad())?, b.trim().parse().map_err(|_| bad())?);
            anyhow::ensure!(a >= 1 && a <= b && b <= 1000, bad());
            out.extend(a..=b);
        } else {
            let n: usize = part.parse().map_err(|_| bad())?;
            anyhow::ensure!((1..=1000).contains(&n), bad());
            out.push(n);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn participants_parse_as_lists_and_ranges() {
        assert_eq!(parse_participants("2-4").unwrap(), vec![2, 3, 4]);
        assert_eq!(parse_participants("2,8, 10").unwrap(), vec![2, 8, 10]);
        assert!(parse_participants("0").is_err());
        assert!(parse_participants("5-2").unwrap_err().to_string().contains("a range (2-10)"));
        assert!(parse_participants("many").is_err());
    }
}
