//! The wire decoder, as a server reads a connection, for every protocol's message type.
#![no_main]

use libfuzzer_sys::fuzz_target;
use snowline_net::frame::fuzz_decode_stream;

fuzz_target!(|data: &[u8]| {
    // A small frame limit as well as the default, so the oversized path is reached too.
    for max in [64, 8 << 20] {
        fuzz_decode_stream::<snowline_protocols::tomsic::TomsicMsg>(data, max);
        fuzz_decode_stream::<snowline_protocols::cops::CopsMsg>(data, max);
        fuzz_decode_stream::<snowline_protocols::contrarian::ContrarianMsg>(data, max);
        fuzz_decode_stream::<snowline_protocols::twopl::TwoPlMsg>(data, max);
        fuzz_decode_stream::<snowline_protocols::raft_kv::KvMsg>(data, max);
        fuzz_decode_stream::<snowline_protocols::amcast_kv::AmMsg>(data, max);
        fuzz_decode_stream::<snowline_protocols::tpc_kv::TpcMsg>(data, max);
    }
});
