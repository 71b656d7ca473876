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
/// lowest, is another partition and the hot lock is held across the vote and the decision; at the
/// coordinator's own partition its prepare and decision would be local). Two bounds beside it: the seed's
/// C-2PC model (two whole waves per commit) and what 2PL's hot lock is held for at least (one round trip
/// between the coordinator and the hot item's partition: `bound::hot_lock_ms`). The run must come in under
/// the second (it also pays for the client's round trips, lock waits, wound-wait aborts with their backoff,
/// and the CPU model's message costs); the command says by how much, and where it stands to the first.
fn hot_item_runs(delays: &Delays, participants: &[usize], args: &TwoPcArgs) -> Result<()> {
    use snowline_harness::run::{RunSpec, run_sim};
    use snowline_harness::workload::{MixedWorkload, Pattern};
    println!();
    println!(
        "hot-item run: 2pl in the simulator (the same network model and its CPU model), {} clients on one item, \
         2 s after 0.5 s of warm-up; the hot item on the highest participant partition, 2pl's coordinator on \
         the lowest",
        args.clients
    );
    println!(
        "{:>4}  {:>15}  {:>16}  {:>12}  {:>18}  {:>12}",
        "N", "2pl commits/s", "C-2PC bound /s", "of it", "2PL hot-lock /s", "of it"
    );
    // One participant commits without 2PC: nothing to check.
    let participants: Vec<usize> = participants.iter().copied().filter(|&n| n >= 2).collect();
    let trials = args.trials.min(20_000);
    let bound_rows = bound::two_pc(delays, &participants, trials, args.seed);
    let lock_ms = bound::hot_lock_ms(delays, &participants, trials, args.seed);
    // Per N: the run's share of the seed's bound and of the hot-lock bound.
    let mut shares: Vec<(usize, f64, f64)> = Vec::new();
    for ((n, b), lock) in participants.iter().zip(&bound_rows).zip(&lock_ms) {
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
        let lock_per_s = 1000.0 / lock;
        let (seed_share, lock_share) = (ran / b.coordinated_per_s(), ran / lock_per_s);
        shares.push((*n, seed_share, lock_share));
        println!(
            "{:>4}  {:>15.1}  {:>16.1}  {:>11.0}%  {:>18.1}  {:>11.0}%",
            n,
            ran,
            b.coordinated_per_s(),
            100.0 * seed_share,
            lock_per_s,
            100.0 * lock_share
        );
    }
    for line in verdict_lines(&shares) {
        println!("{line}");
    }
    Ok(())
}

/// What the hot-item table says: the run against 2PL's hot-lock bound (it must come in under it), and
/// against the seed's C-2PC model. `shares`: per N, the run's share of the seed's bound and of the lock's.
fn verdict_lines(shares: &[(usize, f64, f64)]) -> Vec<String> {
    let pct = |x: f64| format!("{:.0}%", 100.0 * x);
    let range = |xs: &[f64]| {
        let (lo, hi) = xs.iter().fold((f64::MAX, f64::MIN), |(lo, hi), &x| (lo.min(x), hi.max(x)));
        if (hi - lo).abs() < 0.005 { pct(lo) } else { format!("{}–{}", pct(lo), pct(hi)) }
    };
    let ns = |pick: &dyn Fn(&(usize, f64, f64)) -> bool| {
        shares.iter().filter(|s| pick(s)).map(|s| s.0.to_string()).collect::<Vec<_>>().join(", ")
    };
    let mut lines = Vec::new();
    if shares.is_empty() {
        return lines;
    }
    let over_lock: Vec<f64> = shares.iter().filter(|s| s.2 > 1.0).map(|s| s.2).collect();
    let under_lock: Vec<f64> = shares.iter().map(|s| 1.0 - s.2).collect();
    if over_lock.is_empty() {
        lines.push(format!(
            "the run is under 2PL's hot-lock bound (one round trip between the coordinator and the hot item's \
             partition per commit) at every N, by {} of it",
            range(&under_lock)
        ));
    } else {
        lines.push(format!(
            "ABOVE 2PL's hot-lock bound at N = {} ({} of it): no 2PC that holds the lock across its vote and \
             decision can do that; a bug",
            ns(&|s| s.2 > 1.0),
            range(&over_lock)
        ));
    }
    let above_seed: Vec<f64> = shares.iter().filter(|s| s.1 > 1.0).map(|s| s.1).collect();
    if above_seed.is_empty() {
        let under: Vec<f64> = shares.iter().map(|s| 1.0 - s.1).collect();
        lines.push(format!("and under the seed's C-2PC bound at every N, by {} of it", range(&under)));
    } else {
        lines.push(format!(
            "and above the seed's C-2PC bound at N = {} ({} of it; under it at N = {}): that model charges two \
             whole waves of N round trips per commit, while 2PL holds the hot lock only from its prepare's grant \
             to the decision's arrival, one round trip to the coordinator; the prepare's way out and the \
             acknowledgements are outside it, and the other participants voted while the prepare queued",
            ns(&|s| s.1 > 1.0),
            range(&above_seed),
            if above_seed.len() == shares.len() { "none".to_string() } else { ns(&|s| s.1 <= 1.0) }
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
    fn the_verdict_says_by_how_much_the_run_is_under_each_bound() {
        let lines = verdict_lines(&[(2, 1.2, 0.6), (3, 0.9, 0.5)]);
        assert_eq!(lines.len(), 2);
        assert!(
            lines[0].starts_with("the run is under 2PL's hot-lock bound") && lines[0].ends_with("by 40%–50% of it")
        );
        assert!(lines[1].starts_with("and above the seed's C-2PC bound at N = 2 (120% of it; under it at N = 3)"));
        let lines = verdict_lines(&[(2, 0.5, 1.1)]);
        assert!(lines[0].starts_with("ABOVE 2PL's hot-lock bound at N = 2 (110% of it)"), "{lines:?}");
        assert_eq!(lines[1], "and under the seed's C-2PC bound at every N, by 50% of it");
    }
}
