//! `snowline snow`: the SNOW table measured in the simulator.

use std::collections::BTreeMap;
use std::process::{Command, Output};

fn snowline(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_snowline")).args(args).output().expect("running snowline")
}

fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

/// The table's row of `protocol`, as a map from column header to cell (columns are separated by two or
/// more spaces; no cell holds two spaces in a row).
fn row(out: &str, protocol: &str) -> BTreeMap<String, String> {
    let split = |line: &str| -> Vec<String> {
        line.split("  ").map(str::trim).filter(|c| !c.is_empty()).map(String::from).collect()
    };
    let header = out.lines().find(|l| l.starts_with("protocol ")).expect("a table header");
    let line = out
        .lines()
        .skip_while(|l| !l.starts_with("protocol "))
        .find(|l| l.split_whitespace().next() == Some(protocol))
        .unwrap_or_else(|| panic!("no row for {protocol}:\n{out}"));
    let (h, c) = (split(header), split(line));
    assert_eq!(h.len(), c.len(), "{header}\n{line}");
    h.into_iter().zip(c).collect()
}

/// The lines of the section whose title starts with `title`, up to the next blank line.
fn section<'a>(out: &'a str, title: &str) -> Vec<&'a str> {
    let mut lines = out.lines().skip_while(|l| !l.starts_with(title));
    assert!(lines.next().is_some(), "no section {title:?}:\n{out}");
    lines.take_while(|l| !l.is_empty()).collect()
}

const DIFFERS: &str = "Disagreements with the paper";
const STRONGER: &str = "Stronger than the paper claims";
const FAILED: &str = "Failed operations by kind and cause";

#[test]
fn the_snow_corners_measure_as_the_paper_says() {
    let dir = std::env::temp_dir().join(format!("snowline-snow-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let md = dir.join("snow.md");
    let protocols = "cops-snow,psi,eiger-ps,cops-dw";
    let o = snowline(&["snow", "--quick", "--protocols", protocols, "--out", md.to_str().unwrap()]);
    let out = text(&o);
    assert!(o.status.success(), "{out}");

    // The default output fits an 100-column terminal, the set-up paragraph and the notes included.
    for line in out.lines() {
        assert!(line.chars().count() <= 100, "{} columns: {line}\n{out}", line.chars().count());
    }
    assert!(!out.contains("max wait") && !out.contains("µs"), "the figures are for --details: {out}");

    // Eiger-PS: process-ordered serializability, and not strict serializability (§4.4), one response.
    let eiger = row(&out, "eiger-ps");
    assert_eq!(eiger["S"], "pos", "{out}");
    assert_eq!(eiger["paper: S N O W"], "pos yes yes yes");
    assert_eq!((eiger["N"].as_str(), eiger["O"].as_str(), eiger["W"].as_str()), ("yes", "yes", "yes"), "{out}");
    assert_eq!(eiger["verdict"], "agrees", "{out}");
    // COPS-DW: strictly serializable, one round, one version per key, no write transactions (§4.3).
    let dw = row(&out, "cops-dw");
    assert_eq!((dw["S"].as_str(), dw["O"].as_str(), dw["W"].as_str()), ("strict-ser", "yes", "no"), "{out}");
    assert_eq!(dw["verdict"], "agrees", "{out}");
    // COPS-SNOW: latency-optimal, non-blocking with one response (Fig. 8), and not strictly serializable in two
    // datacenters. Its history passes the paper's causal and, before it in the list, us: more than the paper
    // claims, not a disagreement.
    let snow = row(&out, "cops-snow");
    assert_eq!((snow["N"].as_str(), snow["O"].as_str(), snow["W"].as_str()), ("yes", "yes", "no"), "{out}");
    assert_ne!(snow["S"], "strict-ser", "{out}");
    let ok: u64 = snow["ROTs ok/fail"].split('/').next().unwrap().parse().unwrap();
    assert!(ok > 100, "{out}");
    assert_eq!(snow["verdict"], "stronger: S", "{out}");
    let stronger = section(&out, STRONGER);
    assert!(stronger.iter().any(|l| l.starts_with("  cops-snow: S: passes the paper's causal")), "{out}");
    // Walter (psi): its history passes the stronger pos besides the paper's psi (stronger), and its ROTs
    // read key by key, more rounds than the paper's 2 (a disagreement): one row, both verdicts, apart.
    assert_eq!(row(&out, "psi")["verdict"], "differs: O; stronger: S", "{out}");
    let differs = section(&out, DIFFERS);
    assert!(differs.iter().any(|l| l.starts_with("  psi: O: up to ")), "{out}");
    assert!(stronger.iter().any(|l| l.starts_with("  psi: S: passes the paper's psi")), "{out}");
    assert!(differs.iter().all(|l| !l.contains("cops-snow") && !l.contains(" S: ")), "{out}");
    assert_eq!(differs.len(), 1, "only psi's O disagrees: {out}");

    // The markdown keeps every figure behind the letters, and the notes.
    let written = std::fs::read_to_string(&md).unwrap();
    assert!(written.contains("| eiger-ps | 1 |") && written.contains("| pos | pos |"), "{written}");
    let snow_md = written.lines().find(|l| l.starts_with("| cops-snow | 2 |")).expect("cops-snow's row");
    // Max wait, N, paper N, max rounds, max versions per key, quiet rounds (not measured for COPS-SNOW), O.
    assert!(snow_md.contains("| 0.0 µs | yes | yes | 1 | 1.00 | - | yes | yes |"), "{snow_md}");
    assert!(written.contains("- cops-snow: S: passes the paper's causal"), "{written}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn details_print_the_figures_behind_each_letter() {
    let o = snowline(&["snow", "--quick", "--protocols", "cops-dw", "--details"]);
    let out = text(&o);
    assert!(o.status.success(), "{out}");
    let dw = row(&out, "cops-dw");
    assert_eq!((dw["DCs"].as_str(), dw["N: max wait"].as_str(), dw["O: max rounds"].as_str()), ("1", "0.0 µs", "1"));
    assert_eq!((dw["O: max versions/key"].as_str(), dw["paper row"].as_str()), ("1.00", "COPS-DW (§4.3)"));
    assert_eq!((dw["W: multi-key writes"].as_str(), dw["verdict"].as_str()), ("0", "agrees"), "{out}");
    assert!(out.lines().any(|l| l.chars().count() > 100), "the wide table: {out}");
}

#[test]
fn failed_rots_are_explained_by_cause() {
    // 2PL's ROTs take read locks on 16 hot keys: some are refused or abort.
    let o = snowline(&["snow", "--quick", "--protocols", "2pl"]);
    let out = text(&o);
    assert!(o.status.success(), "{out}");
    let failed: u64 = row(&out, "2pl")["ROTs ok/fail"].split('/').nth(1).unwrap().parse().unwrap();
    assert!(failed > 0, "{out}");
    // Each cause on a line of its own, `2pl: KIND COUNT × CAUSE`; the ROT kinds' counts add up to the table's.
    let causes: Vec<(&str, u64, &str)> = section(&out, FAILED)
        .into_iter()
        .filter_map(|l| l.strip_prefix("  2pl: "))
        .map(|l| {
            let (kind, rest) = l.split_once(' ').unwrap();
            let (count, cause) = rest.split_once(" × ").unwrap_or_else(|| panic!("{l}"));
            (kind, count.parse().unwrap(), cause)
        })
        .collect();
    let rot_failures: u64 = causes.iter().filter(|(k, ..)| ["get", "rot"].contains(k)).map(|(_, n, _)| n).sum();
    assert_eq!(rot_failures, failed, "{out}");
    assert!(causes.iter().all(|(.., cause)| !cause.is_empty()), "{out}");
}

#[test]
fn unknown_protocols_are_refused_naming_the_valid_ones() {
    let o = snowline(&["snow", "--quick", "--protocols", "cops,paxos"]);
    assert!(!o.status.success());
    let t = text(&o);
    assert!(t.contains("unknown protocol \"paxos\"") && t.contains("cops-snow"), "{t}");
}
