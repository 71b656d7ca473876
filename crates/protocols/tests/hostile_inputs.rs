//! Hostile input at the sans-IO boundary: every protocol's servers, fed forged and malformed messages from
//! any sender among well-behaved traffic, never panic, and refuse nothing a correct peer sends
//! (`snowline_protocols::fuzz`). The same target runs under cargo-fuzz (`fuzz/`, docs/FUZZING.md); here it
//! runs over the committed corpus and over proptest's random scripts.

use proptest::prelude::*;
use snowline_protocols::fuzz::{PROTOCOLS, server_inputs};
use std::path::PathBuf;

fn corpus_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/protocol_handlers")
}

/// Every committed corpus input, for every protocol (the fuzz target picks the protocol from the first
/// byte; here each input runs against all of them).
#[test]
fn committed_corpus_runs_clean_for_every_protocol() {
    let mut files: Vec<PathBuf> =
        std::fs::read_dir(corpus_dir()).expect("fuzz/corpus/protocol_handlers").map(|e| e.unwrap().path()).collect();
    files.sort();
    assert!(files.len() >= 8, "the corpus has {} inputs", files.len());
    for f in &files {
        let data = std::fs::read(f).unwrap();
        for p in PROTOCOLS {
            server_inputs(p, &data);
        }
    }
}

/// A script that only submits requests, delivers and fires timers forges nothing: every message is
/// accepted (the fuzz driver asserts it) and the forged-message counter stays zero.
#[test]
fn well_formed_traffic_is_never_refused() {
    // shape 1x2 dcs x partitions; then (submit, client/key byte), deliveries, timers, clock steps.
    let mut script = vec![4u8];
    for i in 0..64u8 {
        script.extend([0, i.wrapping_mul(37)]);
        script.extend([3, 4, 5, 6, 7, 8, 9, 3, 3, 3]);
        script.extend([10, i, 12, 3, 3, 3, 3]);
    }
    for p in PROTOCOLS {
        let out = server_inputs(p, &script);
        assert_eq!((out.forged, out.refused), (0, 0), "{p}: {out:?}");
        assert!(out.completed >= 32 && out.delivered >= 64, "{p}: too little happened: {out:?}");
    }
}

/// Forged messages are refused, not applied silently: the driver counts refusals in a script full of them.
#[test]
fn forged_messages_are_refused() {
    let mut script = vec![4u8];
    for i in 0..32u8 {
        script.extend([0, i.wrapping_mul(11), 3, 3, 3, 3, 3, 3]);
        // Forge: a server out of range (sender kind 1: dc 9, partition 9) resending a real message.
        script.extend([14, 1, 9, 9, 0, i, 1 | (i << 2)]);
    }
    for p in PROTOCOLS {
        let out = server_inputs(p, &script);
        assert!(out.forged >= 16 && out.refused >= out.forged, "{p}: {out:?}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_scripts_never_panic(data in proptest::collection::vec(any::<u8>(), 0..1024), p in 0..PROTOCOLS.len()) {
        server_inputs(PROTOCOLS[p], &data);
    }
}
