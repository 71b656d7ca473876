//! How large a message may be on the wire, and the headroom that makes whatever a server accepts
//! deliverable.
//!
//! The networked runtime carries every message in one length-delimited frame of at most `max_frame_bytes`
//! (`snowline-net`'s cluster config). A server that accepted a request of exactly that size could not pass
//! it on: a Raft entry, an atomic-multicast `Submit` or a two-phase-commit prepare wraps the request in a few
//! more bytes, and a frame over the limit is dropped at every retry. So the limits are nested:
//!
//! - a client's request frame may be at most `max_frame_bytes - FRAME_HEADROOM` ([`request_limit`]); the
//!   server refuses a larger one, before it reaches the protocol, with an error naming the limit;
//! - a message between servers that carries one request (or one value) plus its protocol's metadata fits in
//!   `max_frame_bytes`;
//! - a request writing one value of `max_value_bytes` under one key of `max_key_bytes` fits the request
//!   limit, and a reply naming one key fits a frame: [`check_limits`] requires `max_value_bytes +
//!   max_key_bytes + REQUEST_OVERHEAD + FRAME_HEADROOM <= max_frame_bytes`. A reply to a request naming many keys may not; the server then
//!   tells the client that the reply could not be sent (`snowline-net`'s `Frame::Unanswerable`).
//!
//! The simulator has no frames; the limits are tested on real servers (`crates/net/tests/frame_limits.rs`:
//! a value at `max_value_bytes` written, replicated and read in every family at the smallest frame the
//! config allows), and the batch split by the protocols' own unit tests.

use crate::ProtocolConfig;

/// Bytes a frame keeps free beyond the request it carries, for the metadata of the messages that wrap a
/// request (Raft entries, multicast envelopes, prepares, replication) and of replies.
pub const FRAME_HEADROOM: usize = 64 << 10;

/// Bytes a request's frame may need beyond its keys and values (ids, a session's metadata). A request
/// whose frame needs more is refused by the server, with the limit in the error.
pub const REQUEST_OVERHEAD: usize = 4 << 10;

/// The largest request frame a server takes from a client.
pub fn request_limit(max_frame_bytes: usize) -> usize {
    max_frame_bytes.saturating_sub(FRAME_HEADROOM)
}

/// Whether `config`'s value and key limits leave the headroom that internal messages and one-key replies
/// need inside `max_frame_bytes`; `Err` says which setting to change.
pub fn check_limits(max_frame_bytes: usize, config: &ProtocolConfig) -> Result<(), String> {
    let needed = (config.max_value_bytes.saturating_add(config.max_key_bytes))
        .saturating_add(REQUEST_OVERHEAD)
        .saturating_add(FRAME_HEADROOM);
    if needed > max_frame_bytes {
        return Err(format!(
            "max_frame_bytes = {max_frame_bytes} leaves no room for a value of max_value_bytes = {} under a key of \
             max_key_bytes = {} with {REQUEST_OVERHEAD} bytes for the request's own metadata and {FRAME_HEADROOM} \
             bytes of headroom for the messages that carry it: raise \
             max_frame_bytes to at least {needed} or lower the others",
            config.max_value_bytes, config.max_key_bytes
        ));
    }
    Ok(())
}

/// The payload budget of one message that batches several requests' effects (replication of many
/// updates): about one request's worth, so that the batch fits a frame whatever the backlog.
pub fn batch_budget(config: &ProtocolConfig) -> usize {
    config.max_value_bytes.saturating_add(config.max_key_bytes)
}

/// What a key/value pair adds to an encoded message, at most (two length prefixes).
pub fn pair_size(key: &str, value: &str) -> usize {
    key.len() + value.len() + 2 * 10
}

/// `items` in order, cut into batches whose summed `size` stays within `budget`; an item larger than the
/// budget travels alone. Always at least one batch (empty when `items` is): a batch message may carry news
/// beside its items (a heartbeat).
pub fn split_by_size<T>(items: Vec<T>, budget: usize, size: impl Fn(&T) -> usize) -> Vec<Vec<T>> {
    let mut batches = vec![Vec::new()];
    let mut used = 0;
    for item in items {
        let n = size(&item);
        let current = batches.last_mut().expect("never empty");
        if !current.is_empty() && used + n > budget {
            batches.push(Vec::new());
            used = 0;
        }
        used += n;
        batches.last_mut().expect("never empty").push(item);
    }
    batches
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batches_stay_within_budget_and_keep_order() {
        let items: Vec<usize> = vec![5, 5, 5, 20, 1, 1, 9];
        let batches = split_by_size(items.clone(), 10, |n| *n);
        assert_eq!(batches, vec![vec![5, 5], vec![5], vec![20], vec![1, 1], vec![9]]);
        assert_eq!(batches.concat(), items);
        assert_eq!(split_by_size(Vec::<usize>::new(), 10, |n| *n), vec![Vec::<usize>::new()]);
    }

    #[test]
    fn defaults_leave_headroom_and_tight_frames_are_refused_with_the_fix() {
        let config = ProtocolConfig::default();
        check_limits(8 << 20, &config).unwrap();
        let e = check_limits(config.max_value_bytes + 100, &config).unwrap_err();
        assert!(e.contains("raise max_frame_bytes to at least"), "{e}");
        assert_eq!(request_limit(8 << 20), (8 << 20) - FRAME_HEADROOM);
        assert_eq!(request_limit(10), 0);
    }
}
