//! `snowline snow`: the SNOW theorem's table (Lu et al., OSDI 2016, Fig. 8), measured.
//!
//! Every protocol of this build with read-only transactions runs the same contended workload in the
//! deterministic simulator (fixed seed, no fault injection), and each row prints what the run measured for S,
//! N, O and W beside the paper's cell and a verdict: `agrees`, `differs` (weaker than the paper's cell, or
//! different: a disagreement) or `stronger` (the paper's cell holds and the run showed more). The default
//! table fits 100 columns; `--details` prints the figures behind each letter instead (the `--out` markdown
//! always has them). Below the table, in words: the disagreements, the stronger cells, and the failed
//! operations by kind and cause (`snowline_harness::snow_table` has the definitions).
//!
//! The workload (`snow_table::workload`): the mixed pattern over only 16 keys (Zipf 0.8) on 4 partitions —
//! 10% GETs, 50% ROTs of 4 keys (most span several partitions), 20% PUTs and 20% write transactions of 3 keys
//! (PUTs for a protocol without write transactions, interactive read-then-write transactions of the same keys for one without blind writes) —
//! with 8 closed-loop clients per datacenter: few keys and many writes make ROTs meet writes in flight, which
//! is where blocking, extra rounds and weaker consistency show. Not TPC-C: a plain key-value workload is
//! what every protocol runs, and what the paper's table is about.
//!
//! The cluster (`snow_table::topology`): 4 partitions, one replica of each per datacenter, with the
//! simulator's default network and clocks. The causal family (datacenters accepting writes on their own and
//! replicating them lazily) runs in 2 datacenters: in one it looks strictly serializable, its weaker levels
//! need replication lag to show. Every other protocol keeps one order of each key's versions (single-copy
//! 2PL, OCC, Rococo; the replica-group protocols; Eiger-PS; COPS-DW, which refuses several datacenters) and
//! runs in 1 datacenter, the SNOW paper's setting for Eiger-PS and COPS-DW: a second would only add wide-area
//! round trips (their replica groups spanning both, or remote clients), leaving a few dozen ROTs per run.
//!
//! RAMP-F, RAMP-S and RAMP-H are not in the SNOW paper's figure; their rows take the RAMP paper's own cells
//! (read atomic, non-blocking, write transactions; one round unless a write races for RAMP-F and RAMP-H, at
//! most two for RAMP-S). For a cell of one round unless a write races, the run ends, once quiet, with a read
//! of every key, and the O column adds the rounds that read took (`no; quiet yes`: a racing write made some
//! ROT take two rounds, and the read with none racing took one).

use crate::check_cmd;
use anyhow::{Context, Result};
use clap::Args;
use snowline_harness::snow_table::{self, Row};
use snowline_protocols::with_protocol;
use std::path::PathBuf;
use std::time::Instant;

#[derive(Args, Clone, Debug)]
pub struct SnowArgs {
    /// Short runs (0.5 s of virtual time per protocol instead of 2 s).
    #[arg(long)]
    pub quick: bool,
    /// The simulator's seed: the same seed and flags print the same table.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Only these protocols, comma-separated (names or aliases); default: every protocol with read-only
    /// transactions.
    #[arg(long, value_delimiter = ',')]
    pub protocols: Vec<String>,
    /// Print the wide table: the figures behind each letter (longest wait, rounds, versions per key,
    /// multi-key writes, datacenters) and the paper's cells one by one, instead of the 100-column one.
    #[arg(long)]
    pub details: bool,
    /// Also write the set-up, the wide table and the notes below it as markdown to this file.
    #[arg(long)]
    pub out: Option<PathBuf>,
}

/// The protocols to run: `--protocols` resolved to canonical names (unknown names and protocols without
/// read-only transactions refused), or every protocol that has them.
fn protocols(args: &SnowArgs) -> Result<Vec<&'static str>> {
    let rot = snowline_core::Request::Rot { keys: Vec::new() };
    if args.protocols.is_empty() {
        return Ok(snowline_protocols::PROTOCOLS
            .iter()
            .filter(|p| p.offers.missing(&rot).is_none())
            .map(|p| p.name)
            .collect());
    }
    let mut out = Vec::new();
    for name in &args.protocols {
        let name = snowline_protocols::canonical_name(name.trim())?;
        snowline_protocols::check_offered(name, &rot).map_err(|e| anyhow::anyhow!(e))?;
        if !out.contains(&name) {
            out.push(name);
        }
    }
    Ok(out)
}

pub fn run(args: SnowArgs) -> Result<()> {
    let names = protocols(&args)?;
    let setup = snow_table::setup(args.seed, args.quick);
    println!("{}\n", snow_table::wrap(&setup, snow_table::WIDTH, "", ""));
    let progress = crate::progress::bar(names.len() as u64);
    let started = Instant::now();
    let mut rows = Vec::new();
    for name in names {
        progress.set_message(name);
        let t = Instant::now();
        // The history is validated once, then checked at each level in turn.
        let orders_versions = snowline_protocols::lookup(name)?.orders_versions;
        let mut validated = None;
        let mut check = |history: &[snowline_core::HistoryEvent], level: &str| -> Result<bool> {
            let level = check_cmd::resolve_level(level, name)?;
            let h = match &mut validated {
                Some(h) => h,
                slot => slot.insert(
                    snowline_checker::validate(history)
                        .map_err(|e| anyhow::anyhow!("the recorded history is invalid: {e}"))?,
                ),
            };
            Ok(check_cmd::check_validated(h, level, orders_versions).ok)
        };
        let measured = with_protocol!(name, P => snow_table::measure::<P>(args.seed, args.quick, &mut check))?
            .with_context(|| format!("measuring {name}"))?;
        progress.suspend(|| {
            println!(
                "{name}: {} ROTs, S {} ({:.1} s)",
                measured.rots().0,
                measured.strongest.unwrap_or("none"),
                t.elapsed().as_secs_f64()
            )
        });
        rows.push(Row::new(measured));
        progress.inc(1);
    }
    progress.finish_and_clear();
    if args.details {
        println!("\n{}", snow_table::details_table(&rows));
    } else {
        println!("\n{}", snow_table::text_table(&rows));
        println!("(--details: the figures behind each letter)\n");
    }
    println!("{}", snow_table::notes(&rows));
    println!("({:.0} s of wall time)", started.elapsed().as_secs_f64());
    if let Some(path) = &args.out {
        let command = format!(
            "snowline snow --seed {}{}{}",
            args.seed,
            if args.quick { " --quick" } else { "" },
            if args.protocols.is_empty() {
                String::new()
            } else {
                format!(" --protocols {}", args.protocols.join(","))
            }
        );
        let md = format!(
            "# The SNOW table, measured\n\nCommand: `{command}`\n\n{setup}\n\n{}",
            snow_table::markdown_table(&rows)
        );
        std::fs::write(path, md).with_context(|| format!("writing {}", path.display()))?;
        println!("markdown written to {}", path.display());
    }
    Ok(())
}
