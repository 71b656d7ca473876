//! Session tokens ([`snowline_core::ClientNode::save_session`] / `resume_session`): the framing every
//! stateful client node shares. A token is `(protocol name, format version, state)` in postcard; the state is
//! the protocol's own small struct of what its guarantees carry from one operation to the next (never
//! operations in flight). Decoding treats the bytes as untrusted: a bounded size, the right protocol and
//! version, no trailing bytes, and helpers to check vectors and datacenters against the topology. Nothing here
//! panics on garbage; every refusal says what was wrong.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use snowline_core::{DcId, Topology, VectorClock, Version};

/// The largest token `resume_session` accepts. Tokens are small (vectors, a few dependencies, cached own
/// writes up to [`MAX_CACHED_BYTES`]); this bound only stops garbage from costing memory.
pub const MAX_TOKEN_BYTES: usize = 4 << 20;

/// Own writes a token carries by value at most (AV and OP's cache of unstable writes), in bytes of keys and
/// values; a session whose cache is larger carries the rest as dependencies to wait for instead.
pub const MAX_CACHED_BYTES: usize = 1 << 20;

/// The format version of every token written by this code.
pub const TOKEN_FORMAT: u8 = 1;

/// Timestamps in a token must be below this (as servers require of the times clients send).
const TIME_LIMIT: u64 = u64::MAX / 2;

#[derive(Serialize, Deserialize)]
struct Header {
    protocol: String,
    format: u8,
}

/// The token of `protocol`'s session `state`.
pub fn encode<T: Serialize>(protocol: &str, state: &T) -> Vec<u8> {
    let mut bytes = postcard::to_stdvec(&Header { protocol: protocol.into(), format: TOKEN_FORMAT })
        .expect("a token header serializes");
    bytes.extend(postcard::to_stdvec(state).expect("a session state serializes"));
    bytes
}

/// The state in a token of `protocol`: `Ok(None)` for the empty token (a session that has nothing to carry
/// on from), `Err` for anything that is not a whole token of this protocol in this format.
pub fn decode<T: DeserializeOwned>(protocol: &str, saved: &[u8]) -> Result<Option<T>, String> {
    if saved.is_empty() {
        return Ok(None);
    }
    if saved.len() > MAX_TOKEN_BYTES {
        return Err(format!("session token of {} bytes is larger than the limit of {MAX_TOKEN_BYTES}", saved.len()));
    }
    let (header, rest): (Header, &[u8]) =
        postcard::take_from_bytes(saved).map_err(|e| format!("not a session token: {e}"))?;
    if header.protocol != protocol {
        return Err(format!("a session token of {:?}, not of {protocol:?}", header.protocol));
    }
    if header.format != TOKEN_FORMAT {
        return Err(format!(
            "{protocol} session token format {} is unknown (this build reads {TOKEN_FORMAT})",
            header.format
        ));
    }
    let (state, rest): (T, &[u8]) =
        postcard::take_from_bytes(rest).map_err(|e| format!("damaged {protocol} session token: {e}"))?;
    if !rest.is_empty() {
        return Err(format!("damaged {protocol} session token: {} bytes after its state", rest.len()));
    }
    Ok(Some(state))
}

/// A datacenter of the topology.
pub fn check_dc(topology: &Topology, dc: DcId, what: &str) -> Result<(), String> {
    if dc < topology.dcs { Ok(()) } else { Err(format!("{what} names datacenter {dc}, not one of {}", topology.dcs)) }
}

/// A timestamp a server would accept from a client at all.
pub fn check_time(t: u64, what: &str) -> Result<(), String> {
    if t < TIME_LIMIT { Ok(()) } else { Err(format!("{what} = {t} is not a timestamp")) }
}

/// A vector with one bounded entry per datacenter of the topology.
pub fn check_vector(topology: &Topology, v: &VectorClock, what: &str) -> Result<(), String> {
    if v.0.len() != usize::from(topology.dcs) {
        return Err(format!("{what} has {} entries, not one per datacenter ({})", v.0.len(), topology.dcs));
    }
    v.0.iter().try_for_each(|t| check_time(*t, what))
}

/// A version of a datacenter of the topology with a bounded time.
pub fn check_version(topology: &Topology, v: &Version, what: &str) -> Result<(), String> {
    check_dc(topology, v.dc, what)?;
    check_time(v.time, what)
}

/// A key and value within the configured limits (what a client could have written).
pub fn check_sizes(config: &snowline_core::ProtocolConfig, key: &str, value: Option<&str>) -> Result<(), String> {
    if key.is_empty() || key.len() > config.max_key_bytes {
        return Err(format!("a key of {} bytes (keys hold 1 to {} bytes)", key.len(), config.max_key_bytes));
    }
    if let Some(v) = value
        && v.len() > config.max_value_bytes
    {
        return Err(format!("a value of {} bytes (the limit is {})", v.len(), config.max_value_bytes));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_round_trips_and_garbage_is_refused() {
        let bytes = encode("cure", &(7u64, vec![1u64, 2]));
        assert_eq!(decode::<(u64, Vec<u64>)>("cure", &bytes), Ok(Some((7, vec![1, 2]))));
        assert_eq!(decode::<(u64, Vec<u64>)>("cure", &[]), Ok(None));
        assert!(decode::<(u64, Vec<u64>)>("av", &bytes).unwrap_err().contains("not of \"av\""));
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(decode::<(u64, Vec<u64>)>("cure", &longer).is_err());
        for cut in 1..bytes.len() {
            assert!(decode::<(u64, Vec<u64>)>("cure", &bytes[..cut]).is_err());
        }
        assert!(decode::<(u64, Vec<u64>)>("cure", &[0xff; 64]).is_err());
        assert!(decode::<(u64, Vec<u64>)>("cure", &vec![0; MAX_TOKEN_BYTES + 1]).is_err());
    }
}
