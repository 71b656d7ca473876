//! Every protocol's server handlers, fed well-behaved traffic and forged messages from any sender
//! (`snowline_protocols::fuzz`). The first byte picks the protocol.
#![no_main]

use libfuzzer_sys::fuzz_target;
use snowline_protocols::fuzz::{PROTOCOLS, server_inputs};

fuzz_target!(|data: &[u8]| {
    if let Some((first, rest)) = data.split_first() {
        server_inputs(PROTOCOLS[usize::from(*first) % PROTOCOLS.len()], rest);
    }
});
