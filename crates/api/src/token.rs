//! Session tokens: a session's saved state (`ClientNode::save_session`) wrapped with what it belongs to, so
//! that a token from another cluster shape or protocol is refused with a clear error instead of misread.
//! Opaque to clients; untrusted on the way in (bounded, validated by the protocol's `resume_session`).

use serde::{Deserialize, Serialize};

/// The token format's version.
const VERSION: u8 = 1;
/// Tokens larger than this are refused unread.
pub const MAX_TOKEN_BYTES: usize = 1 << 20;

#[derive(Serialize, Deserialize)]
struct Token {
    version: u8,
    protocol: String,
    dcs: u16,
    partitions: u16,
    saved: Vec<u8>,
}

/// What a token says a session belongs to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Shape {
    pub protocol: String,
    pub dcs: u16,
    pub partitions: u16,
}

/// The token of a session of `shape` whose client node saved `saved`.
pub fn encode(shape: &Shape, saved: Vec<u8>) -> Vec<u8> {
    let token = Token {
        version: VERSION,
        protocol: shape.protocol.clone(),
        dcs: shape.dcs,
        partitions: shape.partitions,
        saved,
    };
    postcard::to_allocvec(&token).unwrap_or_default()
}

/// The saved state in `token`, if it is a token of a session of `shape`; `Err` says why not.
pub fn decode(shape: &Shape, token: &[u8]) -> Result<Vec<u8>, String> {
    if token.len() > MAX_TOKEN_BYTES {
        return Err(format!("the session token is {} bytes; tokens are at most {MAX_TOKEN_BYTES}", token.len()));
    }
    let t: Token = postcard::from_bytes(token).map_err(|e| format!("the session token is not one: {e}"))?;
    if t.version != VERSION {
        return Err(format!("session token version {} is not {VERSION}, the version this endpoint reads", t.version));
    }
    if t.protocol != shape.protocol || t.dcs != shape.dcs || t.partitions != shape.partitions {
        return Err(format!(
            "the session token is of a {} cluster of {} dcs × {} partitions; this cluster runs {} on {} × {}",
            t.protocol, t.dcs, t.partitions, shape.protocol, shape.dcs, shape.partitions
        ));
    }
    Ok(t.saved)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape() -> Shape {
        Shape { protocol: "cure".into(), dcs: 2, partitions: 4 }
    }

    #[test]
    fn a_token_round_trips_and_names_its_cluster() {
        let t = encode(&shape(), vec![1, 2, 3]);
        assert_eq!(decode(&shape(), &t).unwrap(), vec![1, 2, 3]);
        let other = Shape { protocol: "cops".into(), ..shape() };
        let e = decode(&other, &t).unwrap_err();
        assert!(e.contains("cure cluster of 2 dcs × 4 partitions; this cluster runs cops"), "{e}");
    }

    #[test]
    fn garbage_and_huge_tokens_are_refused() {
        assert!(decode(&shape(), b"\xff\xff\xff\xff\xff garbage").unwrap_err().contains("not one"));
        assert!(decode(&shape(), &vec![0; MAX_TOKEN_BYTES + 1]).unwrap_err().contains("at most"));
        let mut t = encode(&shape(), vec![]);
        t[0] = 9;
        assert!(decode(&shape(), &t).unwrap_err().contains("version 9"));
    }
}
