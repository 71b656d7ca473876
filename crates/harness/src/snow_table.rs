//! The SNOW table, measured (`snowline snow`): every protocol with read-only transactions run on one
//! contended workload in the simulator, and each of the SNOW properties (Lu et al., OSDI 2016, §3) read off
//! the run beside the paper's cell (Fig. 8, and §4.3–4.4 for COPS-DW and Eiger-PS).
//!
//! - **S**: the first level of [`LEVELS`] the recorded history passes (checked by the caller, which owns the
//!   checker).
//! - **N**: the longest a ROT waited at servers (`OpMetrics::blocked_ns`); non-blocking iff that is 0.
//! - **O**: the most rounds a ROT needed and the most versions it received per key read; one response iff
//!   both are 1. For a protocol whose paper answers in one round unless a write races the read (RAMP-F,
//!   RAMP-H: [`Rounds::OneWithoutRace`]), the run also ends with a read of every key once the system is quiet
//!   (the harness's final reads), and O without a race is the rounds that read took.
//! - **W**: whether the run committed write transactions (operations or transactions writing two or more
//!   keys).
//!
//! Each row's verdict ([`Row::verdict`], [`Row::findings`]) separates the cells where the run is weaker than
//! the paper's or different from it (`differs`: a disagreement) from those where the paper's cell holds and
//! the run showed more (`stronger`: a further level passed besides the paper's, no blocking where the paper
//! allows it, ...). The default table ([`text_table`]) fits [`WIDTH`] columns; the figures behind each
//! letter are in [`details_table`] and [`markdown_table`]; [`notes`] says in words what differs, what is
//! stronger, and why operations failed (the summary's [`Summary::failures`], by kind and cause).

use crate::metrics::{FailureCount, Summary};
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

/// The operation kinds of the table's ROTs: multi-key ROTs and single-key ones (GETs).
pub const ROT_KINDS: [&str; 2] = ["get", "rot"];

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
    /// Rounds of a read of every key with no write racing it (issued once the run is quiet), measured for
    /// the protocols whose paper cell is [`Rounds::OneWithoutRace`].
    pub quiet_rounds: Option<u32>,
}

impl Measured {
    /// ROTs (and GETs) completed, and those that failed (refused, aborted or of unknown outcome): the sum of
    /// their [`Summary::failures`], so that the causes [`notes`] lists add up to the table's count.
    pub fn rots(&self) -> (u64, u64) {
        let ok = ROT_KINDS.iter().filter_map(|k| self.summary.kind(k)).map(|k| k.ok).sum();
        let failed =
            self.summary.failures.iter().filter(|f| ROT_KINDS.contains(&f.kind.as_str())).map(|f| f.count).sum();
        (ok, failed)
    }

    pub fn non_blocking(&self) -> bool {
        self.summary.max_rot_blocked_us == 0.0
    }

    pub fn one_response(&self) -> bool {
        self.summary.max_rot_rounds == 1 && self.summary.max_rot_versions_per_key <= 1.0
    }

    /// The O cell: one response or not, and where measured, whether the quiet read took one round.
    pub fn o_cell(&self) -> String {
        let o = mark(self.one_response());
        match self.quiet_rounds {
            None => o.into(),
            Some(1) => format!("{o}; quiet yes"),
            Some(n) => format!("{o}; quiet {n} rounds"),
        }
    }

    pub fn write_transactions(&self) -> bool {
        self.summary.multi_key_writes > 0
    }
}

/// Run `P` on the workload in the simulator and find its S: `check(history, level)` says whether the history
/// passes a level (a name of [`LEVELS`]); levels are tried strongest first until one passes. When the
/// paper has a cell for `P` and the strongest passing level is not the paper's, the paper's level is checked
/// too (passing it too is stronger than the paper claims, failing it a disagreement).
pub fn measure<P: Protocol>(
    seed: u64,
    quick: bool,
    check: &mut dyn FnMut(&[HistoryEvent], &str) -> anyhow::Result<bool>,
) -> anyhow::Result<Measured> {
    let topology = topology::<P>();
    let config = SimConfig::new(seed, topology, ProtocolConfig::default());
    let mut spec = spec(seed, quick);
    if claim(P::NAME).is_some_and(|c| c.o == Rounds::OneWithoutRace) {
        // Quiesce, then read every key with no write racing: O without a race.
        spec.final_reads_after_ns = Some(QUIET_NS);
    }
    let report = run_sim::<P>(config, &spec);
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
        quiet_rounds: report.final_read_rounds,
    })
}

/// How long the run waits for the operations under way to finish before its quiet read (virtual time).
pub const QUIET_NS: u64 = 200_000_000;

/// The paper's O cell: rounds of one response, or a bound on them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rounds {
    /// ✓: one round, one version per key.
    One,
    AtMost(u32),
    AtLeast(u32),
    /// One round and one version per key unless a write races the read; then at most two rounds, and two
    /// versions of a key (one per round; RAMP-F; RAMP-H, barring Bloom-filter false positives).
    OneWithoutRace,
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
        // Not in the SNOW paper's figure: the RAMP paper's own claims (read atomic, synchronization
        // independence, one round trip without a race for RAMP-F and RAMP-H, always two for RAMP-S).
        "ramp-f" => c("RAMP-Fast", "RAMP §4.1", "ra", true, Rounds::OneWithoutRace, true),
        "ramp-h" => c("RAMP-Hybrid", "RAMP §4.3", "ra", true, Rounds::OneWithoutRace, true),
        "ramp-s" => c("RAMP-Small", "RAMP §4.2", "ra", true, Rounds::AtMost(2), true),
        _ => None,
    }
}

/// How a measured cell compares with the paper's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Weaker than the paper's cell, or different from it: the run contradicts the paper.
    Differs,
    /// The paper's cell holds and the run showed more (a further level passed, no ROT blocked where the paper
    /// allows blocking, one response where it allows more rounds, write transactions where it has none):
    /// not a disagreement, a run that did not exercise the worst case the paper describes, or a protocol that
    /// does more than the paper's.
    Stronger,
}

/// One cell where the measurement is not the paper's cell, in words.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finding {
    /// `S`, `N`, `O` or `W`.
    pub letter: char,
    pub verdict: Verdict,
    pub text: String,
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

    /// Every cell where the measurement is not the paper's, weaker or different ([`Verdict::Differs`]) or
    /// stronger ([`Verdict::Stronger`]), in the order S, N, O, W. Each property is ordered from weaker to
    /// stronger (S: passing the paper's level and another besides is more than passing it alone; N:
    /// non-blocking over blocking; O: fewer rounds and versions; W: write transactions over none).
    pub fn findings(&self) -> Vec<Finding> {
        let Some(c) = self.claim else { return Vec::new() };
        let m = &self.measured;
        let s = &m.summary;
        let mut out = Vec::new();
        let mut push = |letter, verdict, text: String| out.push(Finding { letter, verdict, text });
        let first = m.strongest.unwrap_or("none");
        if m.strongest != Some(c.s) {
            match m.passes_paper_level {
                Some(true) => push(
                    'S',
                    Verdict::Stronger,
                    format!("S: passes the paper's {} and, earlier in the list of levels, {first}", c.s),
                ),
                _ => push(
                    'S',
                    Verdict::Differs,
                    format!("S: fails the paper's {}; the first level passed is {first}", c.s),
                ),
            }
        }
        match (c.n, m.non_blocking()) {
            (true, false) => push(
                'N',
                Verdict::Differs,
                format!("N: a ROT waited {:.1} µs at servers; the paper says non-blocking", s.max_rot_blocked_us),
            ),
            (false, true) => {
                push('N', Verdict::Stronger, "N: no ROT waited at servers; the paper says it may block".into())
            }
            _ => {}
        }
        let (rounds, versions) = (s.max_rot_rounds, s.max_rot_versions_per_key);
        let paper_o = rounds_cell(c.o);
        match c.o {
            Rounds::One if !m.one_response() => push(
                'O',
                Verdict::Differs,
                format!("O: up to {rounds} rounds and {versions:.2} versions per key; the paper says one response"),
            ),
            Rounds::AtMost(n) if rounds > n => {
                push('O', Verdict::Differs, format!("O: up to {rounds} rounds; the paper says {paper_o}"))
            }
            Rounds::AtMost(_) | Rounds::AtLeast(_) if m.one_response() => push(
                'O',
                Verdict::Stronger,
                format!("O: every ROT took one round and one version per key; the paper says {paper_o}"),
            ),
            Rounds::AtLeast(n) if rounds < n => {
                push('O', Verdict::Stronger, format!("O: at most {rounds} rounds; the paper says {paper_o}"))
            }
            Rounds::OneWithoutRace => match m.quiet_rounds {
                None => push('O', Verdict::Differs, "O: the quiet read was not measured".into()),
                Some(q) if q > 1 => push(
                    'O',
                    Verdict::Differs,
                    format!("O: a read with no write racing it took {q} rounds; the paper says {paper_o}"),
                ),
                // A repaired read receives a key's version in each round: up to two per key.
                Some(_) if rounds > 2 || versions > 2.0 => push(
                    'O',
                    Verdict::Differs,
                    format!("O: up to {rounds} rounds and {versions:.2} versions per key; the paper says {paper_o}"),
                ),
                Some(_) if m.one_response() => push(
                    'O',
                    Verdict::Stronger,
                    format!("O: every ROT took one round, none needing a second; the paper says {paper_o}"),
                ),
                Some(_) => {}
            },
            _ => {}
        }
        match (c.w, m.write_transactions()) {
            (true, false) => push(
                'W',
                Verdict::Differs,
                "W: no write of two or more keys committed; the paper says write transactions".into(),
            ),
            (false, true) => push(
                'W',
                Verdict::Stronger,
                format!("W: {} writes of two or more keys committed; the paper's has none", s.multi_key_writes),
            ),
            _ => {}
        }
        out
    }

    /// The cells where the measurement is weaker than the paper's or different, in words.
    pub fn disagreements(&self) -> Vec<String> {
        self.texts(Verdict::Differs)
    }

    /// The cells where the paper's cell holds and the run showed more, in words.
    pub fn stronger(&self) -> Vec<String> {
        self.texts(Verdict::Stronger)
    }

    fn texts(&self, verdict: Verdict) -> Vec<String> {
        self.findings().into_iter().filter(|f| f.verdict == verdict).map(|f| f.text).collect()
    }

    /// The verdict in a few words: `-` (the paper has no cell), `agrees`, or `differs: ` and `stronger: `
    /// with the letters of each.
    pub fn verdict(&self) -> String {
        if self.claim.is_none() {
            return "-".into();
        }
        let findings = self.findings();
        let letters = |v: Verdict| -> String {
            findings.iter().filter(|f| f.verdict == v).map(|f| f.letter.to_string()).collect::<Vec<_>>().join(",")
        };
        let parts: Vec<String> = [(Verdict::Differs, "differs"), (Verdict::Stronger, "stronger")]
            .into_iter()
            .map(|(v, word)| (letters(v), word))
            .filter(|(l, _)| !l.is_empty())
            .map(|(l, word)| format!("{word}: {l}"))
            .collect();
        if parts.is_empty() { "agrees".into() } else { parts.join("; ") }
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
        Rounds::OneWithoutRace => "1 round without a racing write, ≤2 with one".into(),
    }
}

/// The paper's four cells in one: S as a level, N and W as yes or no, O as yes or a bound on rounds.
fn paper_cell(c: &Claim) -> String {
    let o = match c.o {
        Rounds::One => "yes".into(),
        Rounds::AtMost(n) => format!("≤{n}"),
        Rounds::AtLeast(n) => format!("≥{n}"),
        Rounds::OneWithoutRace => "1/≤2".into(),
    };
    format!("{} {} {o} {}", c.s, mark(c.n), mark(c.w))
}

/// The width the default table fits (`snowline snow` without `--details`): an 100-column terminal.
pub const WIDTH: usize = 100;

/// The compact table's header and cells: each letter as measured, the paper's cell, the verdict.
fn compact_cells(rows: &[Row]) -> (Vec<&'static str>, Vec<Vec<String>>) {
    let header = vec!["protocol", "ROTs ok/fail", "S", "N", "O", "W", "paper: S N O W", "verdict"];
    let lines = rows
        .iter()
        .map(|r| {
            let m = &r.measured;
            let (ok, failed) = m.rots();
            vec![
                m.protocol.clone(),
                format!("{ok}/{failed}"),
                m.strongest.unwrap_or("none").to_string(),
                mark(m.non_blocking()).into(),
                m.o_cell(),
                mark(m.write_transactions()).into(),
                r.claim.as_ref().map_or("-".to_string(), paper_cell),
                r.verdict(),
            ]
        })
        .collect();
    (header, lines)
}

/// The wide table's header and cells: the figures behind each letter, the paper's cells one by one.
fn detail_cells(rows: &[Row]) -> (Vec<&'static str>, Vec<Vec<String>>) {
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
        "O: quiet rounds",
        "O",
        "paper O",
        "W: multi-key writes",
        "W",
        "paper W",
        "paper row",
        "verdict",
    ];
    let lines = rows
        .iter()
        .map(|r| {
            let m = &r.measured;
            let s = &m.summary;
            let paper = |f: &dyn Fn(&Claim) -> String| r.claim.as_ref().map_or("-".to_string(), f);
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
                m.quiet_rounds.map_or("-".to_string(), |q| q.to_string()),
                m.o_cell(),
                paper(&|c| rounds_cell(c.o)),
                s.multi_key_writes.to_string(),
                mark(m.write_transactions()).into(),
                paper(&|c| mark(c.w).into()),
                paper(&|c| format!("{} ({})", c.system, c.source)),
                r.verdict(),
            ]
        })
        .collect();
    (header, lines)
}

/// `text` cut into lines of at most `width` characters at spaces (a longer word stays whole); the first line
/// starts with `first`, the others with `indent`.
pub fn wrap(text: &str, width: usize, first: &str, indent: &str) -> String {
    let mut out = String::new();
    let mut line = first.to_string();
    let mut empty = true;
    for word in text.split_whitespace() {
        if !empty && line.chars().count() + 1 + word.chars().count() > width {
            out.push_str(&line);
            out.push('\n');
            line = indent.to_string();
            empty = true;
        }
        if !empty {
            line.push(' ');
        }
        line.push_str(word);
        empty = false;
    }
    out.push_str(&line);
    out
}

/// Aligned columns; with `width`, the last column is wrapped onto continuation lines so that no line is
/// longer (unless the other columns alone are).
fn aligned(header: &[&str], lines: &[Vec<String>], width: Option<usize>) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for l in lines {
        for (w, c) in widths.iter_mut().zip(l) {
            *w = (*w).max(c.chars().count());
        }
    }
    let last = widths.len() - 1;
    let start: usize = widths[..last].iter().map(|w| w + 2).sum();
    let room = width.map(|w| w.saturating_sub(start)).filter(|&r| r >= header[last].chars().count().max(8));
    let mut out = String::new();
    let mut line = |cells: &[String]| {
        let padded: Vec<String> = cells[..last].iter().zip(&widths).map(|(c, w)| format!("{c:<w$}")).collect();
        let lead = padded.join("  ") + "  ";
        let text = match room {
            Some(room) => wrap(&cells[last], room + lead.chars().count(), &lead, &" ".repeat(start)),
            None => lead + &cells[last],
        };
        for l in text.lines() {
            let _ = writeln!(out, "{}", l.trim_end());
        }
    };
    line(&header.iter().map(|h| h.to_string()).collect::<Vec<_>>());
    for l in lines {
        line(l);
    }
    out
}

/// The default table as aligned text, at most [`WIDTH`] columns: protocol, ROTs completed and failed, S, N, O,
/// W as measured, the paper's cell and the verdict.
pub fn text_table(rows: &[Row]) -> String {
    let (header, lines) = compact_cells(rows);
    aligned(&header, &lines, Some(WIDTH))
}

/// The wide table as aligned text (`--details`): every figure behind each letter, the paper's cells one by one.
pub fn details_table(rows: &[Row]) -> String {
    let (header, lines) = detail_cells(rows);
    aligned(&header, &lines, None)
}

/// The failures of the ROT kinds first (`get`, `rot`: the table's failed ROTs), then the others.
fn failures(m: &Measured) -> Vec<&FailureCount> {
    let mut out: Vec<&FailureCount> = m.summary.failures.iter().collect();
    out.sort_by_key(|f| !ROT_KINDS.contains(&f.kind.as_str()));
    out
}

/// What the table does not say, in three sections: where the runs disagree with the paper, where they pass
/// more than the paper claims, and why operations failed (per protocol, each kind and cause with its count).
/// Lines are at most [`WIDTH`] columns.
pub fn notes(rows: &[Row]) -> String {
    let mut out = String::new();
    let mut section = |title: &str, items: Vec<(String, String)>| {
        if !out.is_empty() {
            out.push('\n');
        }
        let _ = writeln!(out, "{}", wrap(title, WIDTH, "", ""));
        if items.is_empty() {
            let _ = writeln!(out, "  none");
        }
        for (protocol, text) in items {
            let _ = writeln!(out, "{}", wrap(&text, WIDTH, &format!("  {protocol}: "), "      "));
        }
    };
    let each = |f: &dyn Fn(&Row) -> Vec<String>| -> Vec<(String, String)> {
        rows.iter().flat_map(|r| f(r).into_iter().map(|t| (r.measured.protocol.clone(), t))).collect()
    };
    section(
        "Disagreements with the paper (a measured property weaker than the paper's cell, or different):",
        each(&Row::disagreements),
    );
    section(
        "Stronger than the paper claims (the paper's cell holds and the run showed more; not disagreements):",
        each(&Row::stronger),
    );
    section(
        "Failed operations by kind and cause (get and rot: the table's failed ROTs):",
        each(&|r| failures(&r.measured).iter().map(|f| format!("{} {} × {}", f.kind, f.count, f.cause)).collect()),
    );
    out
}

/// The wide table as markdown, disagreements in bold, then the sections of [`notes`] as lists.
pub fn markdown_table(rows: &[Row]) -> String {
    let (header, lines) = detail_cells(rows);
    let mut out = format!("| {} |\n|{}\n", header.join(" | "), " --- |".repeat(header.len()));
    for mut l in lines {
        // Disagreements in bold (they come first in a verdict), not the stronger cells.
        if let Some(verdict) = l.last_mut().filter(|v| v.starts_with("differs")) {
            *verdict = match verdict.split_once("; ") {
                Some((differs, stronger)) => format!("**{differs}**; {stronger}"),
                None => format!("**{verdict}**"),
            };
        }
        let _ = writeln!(out, "| {} |", l.join(" | "));
    }
    let mut list = |title: &str, items: Vec<String>| {
        let _ = writeln!(out, "\n{title}\n");
        if items.is_empty() {
            let _ = writeln!(out, "- none");
        }
        for item in items {
            let _ = writeln!(out, "- {item}");
        }
    };
    let each = |f: &dyn Fn(&Row) -> Vec<String>| -> Vec<String> {
        rows.iter().flat_map(|r| f(r).into_iter().map(|t| format!("{}: {t}", r.measured.protocol))).collect()
    };
    list(
        "Disagreements with the paper (a measured property weaker than the paper's cell, or different):",
        each(&Row::disagreements),
    );
    list("Stronger than the paper claims (the paper's cell holds and the run showed more):", each(&Row::stronger));
    list(
        "Failed operations by kind and cause (get and rot: the table's failed ROTs):",
        each(&|r| failures(&r.measured).iter().map(|f| format!("{} {} × {}", f.kind, f.count, f.cause)).collect()),
    );
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
         O: the most rounds and versions per key of a ROT (and, for the protocols the paper says answer in one \
         round unless a write races, \"quiet\": the rounds of a read of every key once the run is quiet). W: \
         committed writes of two or more keys.",
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
        Measured {
            protocol: protocol.into(),
            dcs: 1,
            strongest: Some(strongest),
            passes_paper_level: None,
            summary,
            quiet_rounds: None,
        }
    }

    fn passing_paper_level(mut m: Measured, passes: bool) -> Measured {
        m.passes_paper_level = Some(passes);
        m
    }

    fn failure(kind: &str, cause: &str, count: u64) -> FailureCount {
        FailureCount { kind: kind.into(), cause: cause.into(), count }
    }

    #[test]
    fn agreement_and_each_kind_of_disagreement_is_flagged() {
        let row = Row::new(measured("cops-snow", "causal", 0.0, 1, 0));
        assert!(row.findings().is_empty());
        assert_eq!(row.verdict(), "agrees");
        assert!(Row::new(measured("rococo", "strict-ser", 5.0, 3, 9)).findings().is_empty());
        assert_eq!(Row::new(measured("2pl", "strict-ser", 1.0, 2, 1)).verdict(), "-");

        // Weaker than every cell: S fails the paper's level, N blocked, O not one response, W no transactions.
        let row = Row::new(passing_paper_level(measured("eiger-ps", "rc", 2.0, 2, 0), false));
        assert_eq!(row.verdict(), "differs: S,N,O,W");
        assert!(row.stronger().is_empty());
        let flags = row.disagreements();
        assert!(flags[0].starts_with("S: fails the paper's pos") && flags[0].contains("rc"), "{flags:?}");
        assert!(flags[1].starts_with("N: a ROT waited 2.0 µs"), "{flags:?}");
        assert!(flags[2].starts_with("O: up to 2 rounds"), "{flags:?}");
        assert!(flags[3].starts_with("W: no write"), "{flags:?}");
        let row = Row::new(passing_paper_level(measured("cops", "rc", 0.0, 3, 0), false));
        assert_eq!(row.verdict(), "differs: S,O");
        assert_eq!(row.disagreements()[1], "O: up to 3 rounds; the paper says ≤2 rounds");
    }

    #[test]
    fn passing_more_than_the_paper_claims_is_stronger_not_a_disagreement() {
        // COPS and COPS-SNOW's histories pass the paper's causal and, before it in the list, us.
        let row = Row::new(passing_paper_level(measured("cops-snow", "us", 0.0, 1, 0), true));
        assert!(row.disagreements().is_empty(), "{:?}", row.disagreements());
        assert_eq!(row.stronger(), ["S: passes the paper's causal and, earlier in the list of levels, us"]);
        assert_eq!(row.verdict(), "stronger: S");
        // COPS in a run where no ROT needed its second round: the paper's ≤2 rounds hold, and more.
        let row = Row::new(passing_paper_level(measured("cops", "us", 0.0, 1, 0), true));
        assert_eq!(row.verdict(), "stronger: S,O");
        // Rococo never blocking in one round, COPS committing write transactions: stronger too.
        assert_eq!(Row::new(measured("rococo", "strict-ser", 0.0, 1, 9)).verdict(), "stronger: N,O");
        assert_eq!(Row::new(measured("cops-snow", "causal", 0.0, 1, 5)).verdict(), "stronger: W");
        // Both at once (Walter: pos before the paper's psi, 4 rounds where the paper says at most 2).
        let row = Row::new(passing_paper_level(measured("psi", "pos", 0.0, 4, 7), true));
        assert_eq!(row.verdict(), "differs: O; stronger: S");
        assert_eq!(row.disagreements(), ["O: up to 4 rounds; the paper says ≤2 rounds"]);
        assert_eq!(row.stronger().len(), 1);
        let notes = notes(&[row]);
        let (differs, stronger) = notes.split_once("\n\nStronger").unwrap();
        assert!(differs.contains("  psi: O: up to 4 rounds") && !differs.contains("S: passes"), "{notes}");
        assert!(
            stronger.contains("  psi: S: passes the paper's psi and, earlier in the list of levels, pos")
                && !stronger.contains("O:"),
            "{notes}"
        );
    }

    #[test]
    fn failed_rots_are_counted_and_explained_by_cause() {
        let mut m = measured("occ", "strict-ser", 0.0, 2, 3);
        let long = "aborted (conflict): a version read moved before the commit ".repeat(2);
        m.summary.failures = vec![
            failure("get", "rejected: busy", 2),
            failure("put", "aborted (conflict): validation failed", 4),
            failure("rot", &long, 7),
        ];
        assert_eq!(m.rots(), (0, 9), "get and rot failures, not put");
        let rows = [Row::new(m), Row::new(measured("cops-dw", "strict-ser", 0.0, 1, 0))];
        let table = text_table(&rows);
        assert!(table.lines().any(|l| l.starts_with("occ ") && l.contains(" 0/9 ")), "{table}");
        let notes = notes(&rows);
        let causes = notes.split_once("Failed operations by kind and cause").unwrap().1;
        // ROT kinds first, each with its count and cause; a protocol without failures is not listed.
        let lines: Vec<&str> = causes.lines().skip(1).collect();
        assert_eq!(lines[0], "  occ: get 2 × rejected: busy", "{notes}");
        assert!(lines[1].starts_with("  occ: rot 7 × aborted (conflict): a version read moved"), "{notes}");
        assert!(lines[2].starts_with("      "), "a long cause continues indented: {notes}");
        assert!(lines.iter().any(|l| l.starts_with("  occ: put 4 × aborted (conflict)")), "{notes}");
        assert!(!causes.contains("cops-dw"), "{notes}");
        assert!(notes.lines().all(|l| l.chars().count() <= WIDTH), "{notes}");
        let md = markdown_table(&rows);
        assert!(md.contains("\n- occ: rot 7 × aborted (conflict)"), "{md}");
    }

    #[test]
    fn the_default_table_fits_100_columns_and_the_details_keep_every_figure() {
        // The widest cells there can be: the longest level, large counts, every letter in the verdict.
        let mut wide = passing_paper_level(measured("rococo-snow", "causal-snapshot", 12.5, 14, 0), true);
        wide.summary.failures = vec![failure("rot", "outcome unknown", 123_456)];
        let mut m = passing_paper_level(measured("eiger-ps", "causal-snapshot", 3687.7, 2, 0), false);
        m.summary.max_rot_versions_per_key = 1.75;
        let rows = [Row::new(wide), Row::new(m), Row::new(measured("2pl", "strict-ser", 1.0, 2, 1))];
        let table = text_table(&rows);
        assert!(table.lines().all(|l| l.chars().count() <= WIDTH), "{table}");
        assert!(table.starts_with("protocol "), "{table}");
        assert!(table.contains("differs: S,N,O,W"), "{table}");
        assert!(!table.contains("3687.7") && !table.contains("1.75"), "the figures are in the details: {table}");
        let details = details_table(&rows);
        assert!(details.lines().any(|l| l.chars().count() > WIDTH), "{details}");
        for figure in ["3687.7 µs", "1.75", "14", "0/123456", "Eiger-PS (§4.4)", "strict-ser"] {
            assert!(details.contains(figure), "{figure} missing: {details}");
        }
        let md = markdown_table(&rows);
        assert!(md.lines().nth(2).unwrap().starts_with("| rococo-snow | 1 | 0/123456 | causal-snapshot |"), "{md}");
        assert!(md.contains("| **differs: S,N,O,W** |"), "{md}");
        assert!(md.contains("| **differs: O,W**; stronger: S |"), "{md}");
        assert!(md.contains("| 2pl | 1 | 0/0 | strict-ser | - |") && md.contains("| - |\n"), "{md}");
        let md = markdown_table(&[Row::new(passing_paper_level(measured("cops", "us", 0.0, 2, 0), true))]);
        assert!(md.contains("| stronger: S |") && !md.contains("**"), "stronger is not bold: {md}");
    }

    #[test]
    fn ramp_rows_take_o_from_the_quiet_read() {
        let quiet = |rounds, quiet| Measured { quiet_rounds: quiet, ..measured("ramp-f", "ra", 0.0, rounds, 9) };
        // Reads racing writes took two rounds, the quiet read one: the paper's cell.
        let row = Row::new(quiet(2, Some(1)));
        assert_eq!(row.verdict(), "agrees", "{:?}", row.findings());
        assert_eq!(row.measured.o_cell(), "no; quiet yes");
        // A quiet read needing a second round contradicts it; so do three rounds.
        let row = Row::new(quiet(2, Some(2)));
        assert_eq!(row.verdict(), "differs: O");
        assert!(row.disagreements()[0].starts_with("O: a read with no write racing it took 2 rounds"));
        assert_eq!(Row::new(quiet(3, Some(1))).verdict(), "differs: O");
        // A repaired read receives a second version of the keys it repairs: not a disagreement.
        let mut repaired = quiet(2, Some(1));
        repaired.summary.max_rot_versions_per_key = 1.25;
        assert_eq!(Row::new(repaired).verdict(), "agrees");
        // No race made a second round: stronger than the paper's bound.
        assert_eq!(Row::new(quiet(1, Some(1))).verdict(), "stronger: O");
        // RAMP-S: at most two rounds, always.
        assert_eq!(Row::new(measured("ramp-s", "ra", 0.0, 2, 9)).verdict(), "agrees");
        let details = details_table(&[Row::new(quiet(2, Some(1)))]);
        assert!(details.contains("RAMP-Fast (RAMP §4.1)") && details.contains("1 round without a racing write"));
    }

    #[test]
    fn wrap_cuts_at_spaces_with_a_hanging_indent() {
        assert_eq!(wrap("aa bb cc dd", 8, "> ", "  "), "> aa bb\n  cc dd");
        assert_eq!(wrap("a verylongword b", 6, "", ""), "a\nverylongword\nb");
        assert_eq!(wrap("", 10, "x: ", ""), "x: ");
    }

    #[test]
    fn causal_protocols_run_in_two_datacenters_and_the_others_in_one() {
        assert_eq!(topology::<snowline_protocols::CopsDw>().dcs, 1);
        assert_eq!(topology::<snowline_protocols::EigerPs>().dcs, 1);
        assert_eq!(topology::<snowline_protocols::CopsSnow>().dcs, 2);
        workload().validate(Topology::new(DCS, PARTITIONS)).unwrap();
    }
}
