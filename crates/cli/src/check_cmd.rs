//! `snowline check` and the `--check` option of `sim`, `bench` and `demo`.

use anyhow::{Context, Result};
use snowline_checker::{Level, Verdict};
use snowline_core::{HistoryEvent, HistoryWriter};
use std::path::Path;

/// Exit codes of `snowline check`.
pub const EXIT_OK: i32 = 0;
pub const EXIT_ANOMALY: i32 = 1;
pub const EXIT_INVALID: i32 = 2;

/// Resolve `--check LEVEL` where LEVEL may be `claimed` (the protocol's own claim).
pub fn resolve_level(level: &str, protocol: &str) -> Result<Level> {
    let name = if level == "claimed" { snowline_protocols::claimed_level(protocol)? } else { level };
    name.parse::<Level>().map_err(|e| anyhow::anyhow!(unknown_level(&e)))
}

/// The error for a level name that is neither a level nor `claimed`, with a "did you mean" for either.
pub fn unknown_level(e: &snowline_checker::UnknownLevel) -> String {
    let text = e.to_string();
    match (e.suggestion(), snowline_core::suggest::did_you_mean(&e.0, ["claimed"])) {
        (None, Some(near)) => {
            format!(
                "{} (or `claimed`)",
                text.replacen("; valid levels", &format!(" (did you mean {near}?); valid levels"), 1)
            )
        }
        _ => format!("{text} (or `claimed`)"),
    }
}

/// Check a history recorded by a run of `protocol`: where the protocol's commit versions order each key's
/// writes (the registry says so), the checker takes the version order from them (verified, not trusted).
pub fn check_recorded(history: &[HistoryEvent], level: Level, protocol: &str) -> Result<Verdict> {
    let h = snowline_checker::validate(history).map_err(|e| anyhow::anyhow!("the recorded history is invalid: {e}"))?;
    Ok(check_validated(&h, level, snowline_protocols::lookup(protocol)?.orders_versions))
}

pub fn check_validated(history: &snowline_checker::History, level: Level, version_order: bool) -> Verdict {
    if version_order {
        snowline_checker::check_with_versions(history, level)
    } else {
        snowline_checker::check_history(history, level)
    }
}

/// Print a verdict: the outcome, the count per anomaly, and the first witness of each kind (all with `all`).
pub fn print_verdict(verdict: &Verdict, all: bool) {
    if verdict.ok || all {
        print!("{verdict}");
        return;
    }
    let counts: Vec<String> = verdict.counts.iter().map(|(k, n)| format!("{k} x{n}")).collect();
    println!("{}: FAILED ({})", verdict.level, counts.join(", "));
    let mut shown = std::collections::BTreeSet::new();
    for a in &verdict.anomalies {
        if shown.insert(a.name) {
            print!("{a}");
        }
    }
    println!("(the first witness of each kind; --all lists up to {} per kind)", Verdict::MAX_PER_KIND);
}

/// `snowline check FILE --level LEVEL [--protocol P] [--json] [--all]`: exits 0 (holds), 1 (anomaly) or 2
/// (invalid input). `--level claimed` checks the claim of the protocol named by `--protocol`, or else by the
/// history's metadata line.
pub fn run(path: &Path, level: &str, protocol: Option<&str>, json: bool, all: bool) -> Result<i32> {
    if level != "claimed"
        && let Err(e) = level.parse::<Level>()
    {
        eprintln!("error: {}", unknown_level(&e));
        return Ok(EXIT_INVALID);
    }
    let file = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("error: cannot read history {}: {e}", path.display());
            return Ok(EXIT_INVALID);
        }
    };
    let (meta, events) = match HistoryWriter::read_with_meta(std::io::BufReader::new(file)) {
        Ok(e) => e,
        Err((line, reason)) => {
            eprintln!("error: {}:{line}: not a history event: {reason}", path.display());
            return Ok(EXIT_INVALID);
        }
    };
    let level: Level = if level == "claimed" {
        let Some(name) = protocol.or(meta.as_ref().map(|m| m.protocol.as_str())) else {
            eprintln!(
                "error: --level claimed needs the protocol: pass --protocol NAME (the history has no metadata line naming it)"
            );
            return Ok(EXIT_INVALID);
        };
        match resolve_level("claimed", name) {
            Ok(l) => {
                println!("level: {l}, claimed by {name}");
                l
            }
            Err(e) => {
                eprintln!("error: {e}");
                return Ok(EXIT_INVALID);
            }
        }
    } else {
        match level.parse() {
            Ok(l) => l,
            Err(e) => {
                eprintln!("error: {}", unknown_level(&e));
                return Ok(EXIT_INVALID);
            }
        }
    };
    let (lines, events): (Vec<usize>, Vec<HistoryEvent>) = events.into_iter().unzip();
    let history = match snowline_checker::validate(&events) {
        Ok(h) => h,
        Err(e) => {
            // The checker numbers events from 1; map that back to the file's line.
            let line = lines.get(e.line.wrapping_sub(1)).copied().unwrap_or(0);
            eprintln!("error: {}:{line}: invalid history: {}", path.display(), e.reason);
            return Ok(EXIT_INVALID);
        }
    };
    let verdict = check_validated(&history, level, meta.as_ref().is_some_and(|m| m.version_order));
    if json {
        println!("{}", serde_json::to_string_pretty(&verdict).context("serializing the verdict")?);
    } else {
        print_verdict(&verdict, all);
    }
    Ok(if verdict.ok { EXIT_OK } else { EXIT_ANOMALY })
}
