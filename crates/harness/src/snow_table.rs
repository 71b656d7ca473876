//! The SNOW table, measured (`snowline snow`): every protocol with read-only transactions run on one
//! contended workload in the simulator, and each of the SNOW properties (Lu et al., OSDI 2016, §3) read off
//! the run beside the paper's cell (Fig. 8, and §4.3–4.4 for COPS-DW and Eiger-PS).
//!
//! - **S**: the first level of [`LEVELS`] the recorded history passes (checked by the caller, which owns the
//!   checker).
//! - **N**: the longest a ROT waited at servers (`OpMetrics::blocked_ns`); non-blocking iff that is 0.
//! - **O**: the most rounds a ROT needed and the most versions it received per key read; one response iff
//!   both are 1.
//! - **W**: whether the run committed write transactions (operations or transactions writing two or more
//!   keys).

use crate::metrics::Summary;
use crate::run::{RunSpec, run_sim};
use crate::workload::{MixedWorkload, Pattern};
use snowline_core::{HistoryEvent, Protocol, ProtocolConfig, Topology};
use snowline_sim::SimConfig;
use std::fmt::Write as _;

/// The consistency levels tried for S, strongest first: the S cell is the first the history passes. The
/// levels are not a chain (`si` and `us`, or `tcc` and `psi`, are incomparable); the order puts each level
/// before every level it implies.
pub const LEVELS: [&str; 12] =
    ["strict-ser", "pos", "ser", "si", "us", "psi", "nmsi", "tcc", "causal", "causal-snapshot", "ra", "rc"];

/// Datacenters and partitions of the runs (see [`topology`]).
pub const DCS: u16 = 2;
pub const PARTITIONS: u16 = 4;

/// The contended workload: `Pattern::Mixed` over 16 keys (Zipf 0.8) on 4 partitions: 10% GETs, 50% ROTs of
/// 4 keys (so most ROTs span several partitions), 20% PUTs and 20% write transactions of 3 keys. A protocol
/// without write transactions issues the latter as PUTs; one without blind writes (`nmsi`, `si`, `psi`)
/// issues every write as an interactive transaction reading, then writing the same keys.
pub fn workload() -> MixedWorkload {
    MixedWorkload {
        pattern: Pattern::Mixed,
        keys: 16,
        zipf: 0.8,
        rot_keys: 4,
        update_keys: 3,
        mix: [0.1, 0.5, 0.2, 0.2],
        ..MixedWorkload::default()
    }
}

/// Closed-loop clients per datacenter.
pub const CLIENTS_PER_DC: usize = 8;

/// The run: [`workload`], [`CLIENTS_PER_DC`], 2 s of virtual time (0.5 s with `quick`), history recorded.
pub fn spec(seed: u64, quick: bool) -> RunSpec {
    RunSpec {
        clients_per_dc: CLIENTS_PER_DC,
        client_dcs: None,
        duration_ns: if quick { 500_000_000 } else { 2_000_000_000 },
        warmup_ns: 0,
        cooldown_ns: 0,
        workload: workload(),
        record_history: true,
        seed,
        final_reads_after_ns: None,
        retry: Default::default(),
    }
}

/// [`PARTITIONS`] partitions, one replica of each per datacenter, in [`DCS`] datacenters for a protocol whose
/// datacenters accept writes independently and replicate them lazily (the causal family: their weaker levels
/// need replication lag to show), in one for a protocol that keeps one order of each key's versions (the
/// registry's `orders_versions`: single-copy and replica-group protocols, whose weaknesses need no lag; in
/// two, their replica groups or remote clients would only pay wide-area round trips, leaving a few dozen
/// ROTs in a short run) or refuses several datacenters (cops-dw).
pub fn topology<P: Protocol>() -> Topology {
    let ordered = snowline_protocols::lookup(P::NAME).is_ok_and(|p| p.orders_versions);
    let wide = Topology::new(DCS, PARTITIONS);
    if !ordered && P::check_topology(&wide).is_ok() { wide } else { Topology::new(1, PARTITIONS) }
}

/// What one protocol's run measured.
#[derive(Clone, Debug)]
pub struct Measured {
    pub protocol: String,
    pub dcs: u16,
    /// The first of [`LEVELS`] the history passes (`None`: none does).
    pub strongest: Option<&'static str>,
    /// Whether the history passes the paper's level, when the paper has a cell and `strongest` differs.
    pub passes_paper_level: Option<bool>,
    pub summary: Summary,
}

impl Measured {
    /// ROTs (and GETs) completed, and those that failed (refused, aborted or of unknown outcome).
    pub fn rots(&self) -> (u64, u64) {
        let kinds = || ["get", "rot"].into_iter().filter_map(|k| self.summary.kind(k));
        (kinds().map(|k| k.ok).sum(), kinds().map(|k| k.fail + k.info).sum())
    }

    pub fn non_blocking(&self) -> bool {
        self.summary.max_rot_blocked_us == 0.0
    }

    pub fn one_response(&self) -> bool {
        self.summary.max_rot_rounds == 1 && self.summary.max_rot_versions_per_key <= 1.0
    }

    pub fn write_transactions(&self) -> bool {
        self.summary.multi_key_writes > 0
    }
}

/// Run `P` on the workload in the simulator and find its S: `check(history, level)` says whether the history
/// passes a level (a name of [`LEVELS`]); levels are tried strongest first until one passes. When the
/// paper has a cell for `P` and the strongest passing level is not the paper's, the paper's level is checked
/// too (so a disagreement says whether the run was stronger than claimed or failed the claim).
pub fn measure<P: Protocol>(
    seed: u64,
    quick: bool,
    check: &mut dyn FnMut(&[HistoryEvent], &str) -> anyhow::Result<bool>,
) -> anyhow::Result<Measured> {
    let topology = topology::<P>();
    let config = SimConfig::new(seed, topology, ProtocolConfig::default());
    let report = run_sim::<P>(config, &spec(seed, quick));
    let history = report.history.as_deref().unwrap_or_default();
    let mut strongest = None;
    for level in LEVELS {
        if check(history, level)? {
            strongest = Some(level);
            break;
        }
    }
    let passes_paper_level = match claim(P::NAME) {
        Some(c) if strongest != Some(c.s) => Some(check(history, c.s)?),
        _ => None,
    };
    Ok(Measured {
        protocol: P::NAME.to_string(),
        dcs: topology.dcs,
        strongest,
        passes_paper_level,
        summary: report.summary,
    })
}

/// The paper's O cell: rounds of one response, or a bound on them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rounds {
    /// ✓: one round, one version per key.
    One,
    AtMost(u32),
    AtLeast(u32),
}

/// A row of the paper's table for one of this build's protocols.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Claim {
    /// The paper's name for the system.
    pub system: &'static str,
    /// Where the paper says it: Fig. 8, or the section that describes a system the figure leaves out.
    pub source: &'static str,
    /// S as a `snowline check` level (the figure's ✓ is `strict-ser`).
    pub s: &'static str,
    pub n: bool,
    pub o: Rounds,
    pub w: bool,
}

/// The paper's cells for the protocols of this build it classifies (`None` for the others).
pub fn claim(protocol: &str) -> Option<Claim> {
    let c = |system, source, s, n, o, w| Some(Claim { system, source, s, n, o, w });
    match protocol {
        "cops" => c("COPS", "Fig. 8", "causal", true, Rounds::AtMost(2), false),
        "cops-snow" => c("COPS-SNOW", "Fig. 8", "causal", true, Rounds::One, false),
        "rococo" => c("Rococo", "Fig. 8", "strict-ser", false, Rounds::AtLeast(1), true),
        "rococo-snow" => c("Rococo-SNOW", "Fig. 8", "strict-ser", false, Rounds::One, true),
        "psi" => c("Walter", "Fig. 8", "psi", true, Rounds::AtMost(2), true),
        "eiger-ps" => c("Eiger-PS", "§4.4", "pos", true, Rounds::One, true),
        "cops-dw" => c("COPS-DW", "§4.3", "strict-ser", true, Rounds::One, false),
        _ => None,
    }
}

/// One row: the measurement and the paper's cells.
#[derive(Clone, Debug)]
pub struct Row {
    pub measured: Measured,
    pub claim: Option<Claim>,
}

impl Row {
    pub fn new(measured: Measured) -> Self {
        let claim = claim(&measured.protocol);
        Row { measured, claim }
    }

    /// Every cell where the measurement and the paper disagree, in words.
    pub fn disagreements(&self) -> Vec<String> {
        let Some(c) = self.claim else { return Vec::new() };
        let m = &self.measured;
        let mut out = Vec::new();
        if m.strongest != Some(c.s) {
            out.push(match m.passes_paper_level {
                Some(true) => format!("S: passes {} and the earlier {}", c.s, m.strongest.unwrap_or("none")),
                _ => format!("S: fails {}", c.s),
            });
        }
        if m.non_blocking() != c.n {
            out.push(if c.n { "N: blocked".into() } else { "N: never blocked".into() });
        }
        let rounds = m.summary.max_rot_rounds;
        match c.o {
            Rounds::One if !m.one_response() => out.push("O: not one response".into()),
            Rounds::AtMost(n) if rounds > n => out.push(format!("O: {rounds} rounds > {n}")),
            Rounds::AtMost(_) | Rounds::AtLeast(_) if m.one_response() => out.push("O: always one response".into()),
            Rounds::AtLeast(n) if rounds < n => out.push(format!("O: {rounds} rounds < {n}")),
            _ => {}
        }
        if m.write_transactions() != c.w {
            out.push(if c.w { "W: no write transactions".into() } else { "W: ran write transactions".into() });
        }
        out
    }
}

fn mark(b: bool) -> &'static str {
    if b { "yes" } else { "no" }
}

fn rounds_cell(o: Rounds) -> String {
    match o {
        Rounds::One => "yes".into(),
        Rounds::AtMost(n) => format!("≤{n} rounds"),
        Rounds::AtLeast(n) => format!("≥{n} rounds"),
    }
}

/// The table's header and one line of cells per row.
fn cells(rows: &[Row]) -> (Vec<&'static str>, Vec<Vec<String>>) {
    let header = vec![
        "protocol",
        "DCs",
        "ROTs ok/failed",
        "S",
        "paper S",
        "N: max wait",
        "N",
        "paper N",
        "O: max rounds",
        "O: max versions/key",
        "O",
        "paper O",
        "W: multi-key writes",
        "W",
        "paper W",
        "paper row",
        "disagreements",
    ];
    let lines = rows
        .iter()
        .map(|r| {
            let m = &r.measured;
            let s = &m.summary;
            let paper = |f: &dyn Fn(&Claim) -> String| r.claim.as_ref().map_or("-".to_string(), f);
            let flags = r.disagreements();
            vec![
                m.protocol.clone(),
                m.dcs.to_string(),
                format!("{}/{}", m.rots().0, m.rots().1),
                m.strongest.unwrap_or("none").to_string(),
                paper(&|c| c.s.to_string()),
                format!("{:.1} µs", s.max_rot_blocked_us),
                mark(m.non_blocking()).into(),
                paper(&|c| mark(c.n).into()),
                s.max_rot_rounds.to_string(),
                format!("{:.2}", s.max_rot_versions_per_key),
                mark(m.one_response()).into(),
                paper(&|c| rounds_cell(c.o)),
                s.multi_key_writes.to_string(),
                mark(m.write_transactions()).into(),
                paper(&|c| mark(c.w).into()),
                paper(&|c| format!("{} ({})", c.system, c.source)),
                if r.claim.is_none() {
                    "-".into()
                } else if flags.is_empty() {
                    "none".into()
                } else {
                    flags.join("; ")
                },
            ]
        })
        .collect();
    (header, lines)
}

/// The table as aligned text.
pub fn text_table(rows: &[Row]) -> String {
    let (header, lines) = cells(rows);
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for l in &lines {
        for (w, c) in widths.iter_mut().zip(l) {
            *w = (*w).max(c.chars().count());
        }
    }
    let mut out = String::new();
    let mut line = |cells: Vec<String>| {
        let padded: Vec<String> = cells.iter().zip(&widths).map(|(c, w)| format!("{c:<w$}")).collect();
        let _ = writeln!(out, "{}", padded.join("  ").trim_end());
    };
    line(header.iter().map(|h| h.to_string()).collect());
    for l in lines {
        line(l);
    }
    out
}

/// The table as markdown.
pub fn markdown_table(rows: &[Row]) -> String {
    let (header, lines) = cells(rows);
    let mut out = format!("| {} |\n|{}\n", header.join(" | "), " --- |".repeat(header.len()));
    for mut l in lines {
        // Disagreements in bold.
        if let Some(flags) = l.last_mut().filter(|f| !["-", "none"].contains(&f.as_str())) {
            *flags = format!("**{flags}**");
        }
        let _ = writeln!(out, "| {} |", l.join(" | "));
    }
    out
}

/// What the runs were, in a paragraph (printed above the table).
pub fn setup(seed: u64, quick: bool) -> String {
    let s = spec(seed, quick);
    format!(
        "Simulator, seed {seed}, {} s of virtual time per protocol, no faults; {PARTITIONS} partitions, in {DCS} \
         datacenters for the lazily geo-replicated (causal) protocols and in 1 for the others (single-copy or \
         replica-group protocols, and cops-dw), {CLIENTS_PER_DC} closed-loop clients per datacenter; workload mixed over {} keys (Zipf {}): 10% GETs, 50% ROTs of {} keys, 20% PUTs, 20% write \
         transactions of {} keys. S: the first of {} the history passes. N: the longest a ROT waited at servers. \
         O: the most rounds and versions per key of a ROT. W: committed writes of two or more keys.",
        s.duration_ns as f64 / 1e9,
        s.workload.keys,
        s.workload.zipf,
        s.workload.rot_keys,
        s.workload.update_keys,
        LEVELS.join(" > "),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn measured(protocol: &str, strongest: &'static str, blocked_us: f64, rounds: u32, writes: u64) -> Measured {
        let mut summary = crate::metrics::Metrics::default().summary(1.0);
        summary.max_rot_blocked_us = blocked_us;
        summary.max_rot_rounds = rounds;
        summary.max_rot_versions_per_key = 1.0;
        summary.multi_key_writes = writes;
        Measured { protocol: protocol.into(), dcs: 1, strongest: Some(strongest), passes_paper_level: None, summary }
    }

    #[test]
    fn agreement_and_each_kind_of_disagreement_is_flagged() {
        assert!(Row::new(measured("cops-snow", "causal", 0.0, 1, 0)).disagreements().is_empty());
        assert!(Row::new(measured("rococo", "strict-ser", 5.0, 3, 9)).disagreements().is_empty());
        let mut m = measured("eiger-ps", "strict-ser", 2.0, 2, 0);
        m.passes_paper_level = Some(true);
        let flags = Row::new(m).disagreements();
        assert_eq!(
            flags,
            [
                "S: passes pos and the earlier strict-ser",
                "N: blocked",
                "O: not one response",
                "W: no write transactions"
            ],
            "{flags:?}"
        );
        let flags = Row::new(measured("cops", "rc", 0.0, 3, 0)).disagreements();
        assert_eq!(flags, ["S: fails causal", "O: 3 rounds > 2"], "{flags:?}");
        assert_eq!(Row::new(measured("cops", "causal", 0.0, 1, 0)).disagreements(), ["O: always one response"]);
        assert!(Row::new(measured("2pl", "strict-ser", 1.0, 2, 1)).disagreements().is_empty());
        let md = markdown_table(&[Row::new(measured("2pl", "strict-ser", 1.0, 2, 1))]);
        assert!(md.lines().nth(2).unwrap().starts_with("| 2pl | 1 | 0/0 | strict-ser | - |"), "{md}");
        let md = markdown_table(&[Row::new(measured("cops", "rc", 0.0, 3, 0))]);
        assert!(md.trim_end().ends_with("| **S: fails causal; O: 3 rounds > 2** |"), "{md}");
        assert!(text_table(&[Row::new(measured("cops", "rc", 0.0, 3, 0))]).trim_end().ends_with("O: 3 rounds > 2"));
    }

    #[test]
    fn causal_protocols_run_in_two_datacenters_and_the_others_in_one() {
        assert_eq!(topology::<snowline_protocols::CopsDw>().dcs, 1);
        assert_eq!(topology::<snowline_protocols::EigerPs>().dcs, 1);
        assert_eq!(topology::<snowline_protocols::CopsSnow>().dcs, 2);
        workload().validate(Topology::new(DCS, PARTITIONS)).unwrap();
    }
}
