//! `snowline snow`: the SNOW table measured in the simulator.

use std::process::{Command, Output};

fn snowline(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_snowline")).args(args).output().expect("running snowline")
}

fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

/// The table's row of `protocol`, as a map from column header to cell (columns are separated by two or
/// more spaces; no cell holds two spaces in a row).
fn row(out: &str, protocol: &str) -> std::collections::BTreeMap<String, String> {
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

#[test]
fn the_snow_corners_measure_as_the_paper_says() {
    let dir = std::env::temp_dir().join(format!("snowline-snow-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let md = dir.join("snow.md");
    let o = snowline(&["snow", "--quick", "--protocols", "cops-snow,eiger-ps,cops-dw", "--out", md.to_str().unwrap()]);
    let out = text(&o);
    assert!(o.status.success(), "{out}");

    // Eiger-PS: process-ordered serializability, and not strict serializability (§4.4), one response.
    let eiger = row(&out, "eiger-ps");
    assert_eq!(eiger["S"], "pos", "{out}");
    assert_eq!(eiger["paper S"], "pos");
    assert_eq!((eiger["N"].as_str(), eiger["O"].as_str(), eiger["W"].as_str()), ("yes", "yes", "yes"), "{out}");
    // COPS-DW: strictly serializable, one round, one version per key, no write transactions (§4.3).
    let dw = row(&out, "cops-dw");
    assert_eq!((dw["S"].as_str(), dw["DCs"].as_str()), ("strict-ser", "1"), "{out}");
    assert_eq!((dw["O: max rounds"].as_str(), dw["O"].as_str(), dw["W"].as_str()), ("1", "yes", "no"), "{out}");
    assert_eq!(dw["disagreements"], "none", "{out}");
    // COPS-SNOW: latency-optimal, non-blocking with one round (Fig. 8), in two datacenters, and not
    // strictly serializable there.
    let snow = row(&out, "cops-snow");
    assert_eq!((snow["N: max wait"].as_str(), snow["N"].as_str()), ("0.0 µs", "yes"), "{out}");
    assert_eq!((snow["O: max rounds"].as_str(), snow["O: max versions/key"].as_str()), ("1", "1.00"), "{out}");
    assert_eq!(snow["DCs"], "2");
    assert_ne!(snow["S"], "strict-ser", "{out}");
    let ok: u64 = snow["ROTs ok/failed"].split('/').next().unwrap().parse().unwrap();
    assert!(ok > 100, "{out}");

    let written = std::fs::read_to_string(&md).unwrap();
    assert!(written.contains("| eiger-ps | 1 |") && written.contains("| pos | pos |"), "{written}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn unknown_protocols_are_refused_naming_the_valid_ones() {
    let o = snowline(&["snow", "--quick", "--protocols", "cops,paxos"]);
    assert!(!o.status.success());
    let t = text(&o);
    assert!(t.contains("unknown protocol \"paxos\"") && t.contains("cops-snow"), "{t}");
}
