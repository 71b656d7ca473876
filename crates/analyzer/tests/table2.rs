//! One small schema per row of the paper's Table 2 (and the rules its text adds), each asserting the paper's
//! verdict, and every verdict cross-checked against the bounded checker.

use crate::common::defects;
use snowline_analyzer::bounded::Bound;
use snowline_analyzer::rules::Mutation;
use std::path::PathBuf;

fn cases() -> Vec<(String, String)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/table2");
    let mut files: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
    files.sort();
    files
        .into_iter()
        .map(|p| (p.file_name().unwrap().to_string_lossy().into_owned(), std::fs::read_to_string(&p).unwrap()))
        .collect()
}

#[test]
fn every_case_gets_the_papers_verdict() {
    let cases = cases();
    assert!(cases.len() >= 16, "one case per Table 2 row");
    for (file, text) in &cases {
        let report = snowline_analyzer::analyze(text, file, None).unwrap_or_else(|e| panic!("{e}"));
        let mut expectations = 0;
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("-- expect: ") {
                let f: Vec<&str> = rest.split_whitespace().collect();
                let v =
                    report.verdict(f[0], f[1]).unwrap_or_else(|| panic!("{file}: no verdict for {} x {}", f[0], f[1]));
                assert_eq!(v.confluent, f[2] == "yes", "{file}: {} x {}: {v:?}", f[0], f[1]);
                assert_eq!(v.rule, f[3], "{file}: {} x {}", f[0], f[1]);
                if !v.confluent {
                    assert!(v.counterexample.is_some(), "{file}: {} x {} has no counterexample", f[0], f[1]);
                }
                expectations += 1;
            }
            if let Some(rest) = line.strip_prefix("-- expect-coordination: ") {
                let f: Vec<&str> = rest.split_whitespace().collect();
                let c = report.coordination(f[0]).unwrap_or_else(|| panic!("{file}: no transaction {}", f[0]));
                assert_eq!(c.to_string(), f[1], "{file}: coordination of {}", f[0]);
                expectations += 1;
            }
        }
        assert!(expectations >= 2, "{file}: states its expectations");
    }
}

#[test]
fn rules_agree_with_the_bounded_checker_on_every_pair() {
    for (file, text) in cases() {
        let w = snowline_analyzer::parse(&text, &file, None).unwrap();
        let d = defects(&w, &Bound::default(), None);
        assert!(d.is_empty(), "{file}:\n{}", d.join("\n"));
    }
}

#[test]
fn an_inverted_counter_rule_is_caught_by_the_checker() {
    let (file, text) = cases().into_iter().find(|(f, _)| f.contains("counter_gt_decrement")).unwrap();
    let w = snowline_analyzer::parse(&text, &file, None).unwrap();
    let d = defects(&w, &Bound::default(), Some(Mutation::CounterDecrementSafe));
    assert!(d.iter().any(|d| d.contains("positive x withdraw") && d.contains("says safe")), "{d:?}");
}

#[test]
fn an_inverted_uniqueness_rule_is_caught_by_the_checker() {
    let (file, text) = cases().into_iter().find(|(f, _)| f.contains("unique_specific")).unwrap();
    let w = snowline_analyzer::parse(&text, &file, None).unwrap();
    let d = defects(&w, &Bound::default(), Some(Mutation::UniqueSpecificSafe));
    assert!(d.iter().any(|d| d.contains("users.id x register") && d.contains("says safe")), "{d:?}");
}
