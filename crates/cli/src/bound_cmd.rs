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
/// (`Pattern::HotItem`: the hot item on the highest participant partition, so that 2PL's coordinator, the
/// lowest, is another partition). Two runs per N:
/// - **read-modify-write** (the `rw` procedure: read the hot item, then write it and the own keys, as a
///   counter's increment): 2PL holds the hot lock from the read through the commit's two phases, the
///   transaction the seed's C-2PC model describes. It must come in at or under that bound.
/// - **blind write** (one update transaction): the lock is taken at the prepare and released at the decision,
///   one round trip between the coordinator and the hot item's partition (`bound::hot_lock_ms`), which is
///   less than the seed's two whole waves; it must come in under that hot-lock bound, and may pass the seed's.
///
/// The command says by how much each run is under its bound.
fn hot_item_runs(delays: &Delays, participants: &[usize], args: &TwoPcArgs) -> Result<()> {
    println!();
    println!(
        "hot-item runs: 2pl in the simulator (the same network model and its CPU model), {} clients on one item, \
         2 s after 0.5 s of warm-up; the hot item on the highest participant partition, 2pl's coordinator on \
         the lowest; rmw: read the item, then write it (the lock held from the read through both phases); \
         blind: write it (the lock held from the prepare to the decision)",
        args.clients
    );
    println!(
        "{:>4}  {:>12}  {:>15}  {:>7}  {:>12}  {:>16}  {:>7}",
        "N", "rmw 2pl /s", "C-2PC bound /s", "of it", "blind 2pl /s", "2PL hot-lock /s", "of it"
    );
    // One participant commits without 2PC: nothing to check.
    let participants: Vec<usize> = participants.iter().copied().filter(|&n| n >= 2).collect();
    let trials = args.trials.min(20_000);
    let bound_rows = bound::two_pc(delays, &participants, trials, args.seed);
    let lock_ms = bound::hot_lock_ms(delays, &participants, trials, args.seed);
    // Per N: the read-modify-write run's share of the seed's bound, the blind run's of the seed's and of
    // the hot-lock bound.
    let mut shares: Vec<Shares> = Vec::new();
    for ((n, b), lock) in participants.iter().zip(&bound_rows).zip(&lock_ms) {
        let rmw = hot_item_run(*n, true, args)?;
        let blind = hot_item_run(*n, false, args)?;
        let lock_per_s = 1000.0 / lock;
        let seed = b.coordinated_per_s();
        shares.push(Shares {
            n: *n,
            rmw_of_seed: rmw / seed,
            blind_of_seed: blind / seed,
            blind_of_lock: blind / lock_per_s,
        });
        println!(
            "{:>4}  {:>12.1}  {:>15.1}  {:>6.0}%  {:>12.1}  {:>16.1}  {:>6.0}%",
            n,
            rmw,
            seed,
            100.0 * rmw / seed,
            blind,
            lock_per_s,
            100.0 * blind / lock_per_s
        );
    }
    for line in verdict_lines(&shares) {
        println!("{line}");
    }
    Ok(())
}

/// One hot-item run of 2PL among `n` participants: commits per second.
fn hot_item_run(n: usize, read_modify_write: bool, args: &TwoPcArgs) -> Result<f64> {
    use snowline_harness::run::{RunSpec, run_sim};
    use snowline_harness::workload::{MixedWorkload, Pattern};
    let topology = snowline_core::Topology::new(1, n.max(1) as u16);
    let workload = MixedWorkload {
        pattern: Pattern::HotItem { participants: n, read_modify_write },
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
    Ok(report.summary.ops_per_s)
}

/// One N's runs as shares of their bounds.
struct Shares {
    n: usize,
    rmw_of_seed: f64,
    blind_of_seed: f64,
    blind_of_lock: f64,
}

/// What the hot-item table says: the read-modify-write run against the seed's C-2PC bound and the blind run
/// against 2PL's hot-lock bound (each must come in under its bound), and where the blind run stands to the
/// seed's.
fn verdict_lines(shares: &[Shares]) -> Vec<String> {
    let pct = |x: f64| format!("{:.0}%", 100.0 * x);
    let range = |xs: &[f64]| {
        let (lo, hi) = xs.iter().fold((f64::MAX, f64::MIN), |(lo, hi), &x| (lo.min(x), hi.max(x)));
        if (hi - lo).abs() < 0.005 { pct(lo) } else { format!("{}–{}", pct(lo), pct(hi)) }
    };
    let ns = |pick: &dyn Fn(&Shares) -> bool| {
        shares.iter().filter(|s| pick(s)).map(|s| s.n.to_string()).collect::<Vec<_>>().join(", ")
    };
    let mut lines = Vec::new();
    if shares.is_empty() {
        return lines;
    }
    let verdict = |share: &dyn Fn(&Shares) -> f64, run: &str, bound: &str| {
        let over: Vec<f64> = shares.iter().map(share).filter(|x| *x > 1.0).collect();
        if over.is_empty() {
            let under: Vec<f64> = shares.iter().map(|s| 1.0 - share(s)).collect();
            format!("the {run} run is at or under {bound} at every N, by {} of it", range(&under))
        } else {
            format!("the {run} run is ABOVE {bound} at N = {} ({} of it): a bug", ns(&|s| share(s) > 1.0), range(&over))
        }
    };
    lines.push(verdict(&|s| s.rmw_of_seed, "read-modify-write", "the seed's C-2PC bound"));
    lines.push(verdict(
        &|s| s.blind_of_lock,
        "blind-write",
        "2PL's hot-lock bound (one round trip between the coordinator and the hot item's partition per commit)",
    ));
    let above_seed: Vec<f64> = shares.iter().filter(|s| s.blind_of_seed > 1.0).map(|s| s.blind_of_seed).collect();
    if !above_seed.is_empty() {
        lines.push(format!(
            "the blind-write run passes the seed's C-2PC bound at N = {} ({} of it): that model charges two whole \
             waves of N round trips per commit, while a blind write holds the hot lock only from its prepare's \
             grant to the decision's arrival, one round trip to the coordinator; the prepare's way out and the \
             acknowledgements are outside it, and the other participants voted while the prepare queued",
            ns(&|s| s.blind_of_seed > 1.0),
            range(&above_seed)
        ));
    }
    lines
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

    #[test]
    fn the_verdict_says_by_how_much_each_run_is_under_its_bound() {
        let s = |n, rmw_of_seed, blind_of_seed, blind_of_lock| Shares { n, rmw_of_seed, blind_of_seed, blind_of_lock };
        let lines = verdict_lines(&[s(2, 0.78, 1.2, 0.6), s(3, 0.77, 0.9, 0.5)]);
        assert_eq!(lines.len(), 3, "{lines:?}");
        assert_eq!(
            lines[0],
            "the read-modify-write run is at or under the seed's C-2PC bound at every N, by 22%–23% of it"
        );
        assert!(
            lines[1].starts_with("the blind-write run is at or under 2PL's hot-lock bound")
                && lines[1].ends_with("by 40%–50% of it")
        );
        assert!(
            lines[2].starts_with("the blind-write run passes the seed's C-2PC bound at N = 2 (120% of it)"),
            "{lines:?}"
        );
        let lines = verdict_lines(&[s(2, 1.1, 0.5, 1.1)]);
        assert!(
            lines[0].starts_with("the read-modify-write run is ABOVE the seed's C-2PC bound at N = 2 (110% of it)")
        );
        assert!(lines[1].contains("ABOVE 2PL's hot-lock bound"), "{lines:?}");
        assert_eq!(lines.len(), 2);
    }
}
