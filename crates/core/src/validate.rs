//! What a server checks before an input from the network touches its state.
//!
//! A server's `on_message` receives whatever a peer or a client put in a frame. Every protocol validates
//! the sender's role and every id, vector and timestamp in a message against the [`Topology`] and its own
//! clock first, and returns [`InvalidInput`] for a message that does not fit; the host (simulator, networked
//! server, durable host) decides what to do with the connection. No message, however forged, may reach a
//! panic or an arithmetic overflow.
//!
//! Timestamps are bounded by [`ProtocolConfig::max_clock_ahead_ms`]: a timestamp further ahead of the
//! receiving server's physical clock than that is refused, so a forged `u64::MAX` can neither wrap a clock
//! nor hide every later write behind it.

use crate::clock::VectorClock;
use crate::config::ProtocolConfig;
use crate::ids::{Addr, ClientId, DcId, PartitionId, ServerId};
use crate::request::{Key, Value, Version};
use crate::topology::Topology;
use std::fmt;

/// Which rule a refused message broke.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum InvalidKind {
    /// The sender is not a server of the topology, or not one that may send this kind of message to this
    /// server (e.g. a `Replicate` not from a sibling of this partition, a client request from a server).
    Sender,
    /// A datacenter, partition or replica id outside the topology, or a key of another partition.
    OutOfRange,
    /// A vector clock of the wrong length, or a structure whose parts do not match (lengths, counts).
    Malformed,
    /// A timestamp too far ahead of this server's clock (or one that would overflow).
    Timestamp,
    /// A request over one of the limits of [`ProtocolConfig`] (key, value and request sizes, keys per
    /// request, a transaction's lifetime and locks); the detail names the limit and its value.
    Limit,
    /// A message that does not match this server's state (a reply to nothing it asked, a stale duplicate
    /// that would move state backwards).
    Unexpected,
}

impl fmt::Display for InvalidKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            InvalidKind::Sender => "wrong sender",
            InvalidKind::OutOfRange => "id out of range",
            InvalidKind::Malformed => "malformed",
            InvalidKind::Timestamp => "timestamp out of bounds",
            InvalidKind::Limit => "over a limit",
            InvalidKind::Unexpected => "unexpected",
        })
    }
}

/// A message a server refused, and why. The server's state is as it was before the message (handlers
/// validate before they change anything), except where a handler documents otherwise.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid {msg} message from {from}: {kind}: {detail}")]
pub struct InvalidInput {
    pub kind: InvalidKind,
    /// The message's kind (`Message::kind`).
    pub msg: &'static str,
    pub from: Addr,
    pub detail: String,
}

impl InvalidInput {
    pub fn new(kind: InvalidKind, msg: &'static str, from: Addr, detail: impl Into<String>) -> Self {
        Self { kind, msg, from, detail: detail.into() }
    }
}

/// The checks shared by every protocol, for one message: `check.server()?` etc.
#[derive(Clone, Copy, Debug)]
pub struct Check<'a> {
    pub topology: &'a Topology,
    pub from: Addr,
    pub msg: &'static str,
    /// The receiving server's physical clock.
    pub now_ns: u64,
    pub max_ahead_ns: u64,
    /// The limits client requests are checked against ([`Check::request_keys`], [`Check::request_writes`]).
    pub config: &'a ProtocolConfig,
}

impl<'a> Check<'a> {
    pub fn new(topology: &'a Topology, config: &'a ProtocolConfig, now_ns: u64, from: Addr, msg: &'static str) -> Self {
        let max_ahead_ns = config.max_clock_ahead_ms.saturating_mul(1_000_000);
        Self { topology, from, msg, now_ns, max_ahead_ns, config }
    }

    pub fn fail(&self, kind: InvalidKind, detail: impl Into<String>) -> InvalidInput {
        InvalidInput::new(kind, self.msg, self.from, detail)
    }

    /// The sender is a client (client requests are never accepted from a server address).
    pub fn client(&self) -> Result<ClientId, InvalidInput> {
        match self.from {
            Addr::Client(c) => Ok(c),
            Addr::Server(_) => Err(self.fail(InvalidKind::Sender, "only a client sends this")),
        }
    }

    /// The sender is a server of the topology.
    pub fn server(&self) -> Result<ServerId, InvalidInput> {
        match self.from {
            Addr::Server(s) if self.topology.contains(s) => Ok(s),
            Addr::Server(s) => {
                Err(self.fail(InvalidKind::Sender, format!("{s} is not a server of {:?}", self.topology)))
            }
            Addr::Client(_) => Err(self.fail(InvalidKind::Sender, "only a server sends this")),
        }
    }

    /// The sender is another server of `me`'s datacenter.
    pub fn local_peer(&self, me: ServerId) -> Result<ServerId, InvalidInput> {
        let s = self.server()?;
        if s.dc != me.dc || s == me {
            return Err(self.fail(InvalidKind::Sender, format!("{s} is not another server of {me}'s datacenter")));
        }
        Ok(s)
    }

    /// The sender holds the same partition as `me` in another datacenter (a replication sibling).
    pub fn sibling(&self, me: ServerId) -> Result<ServerId, InvalidInput> {
        let s = self.server()?;
        if s.partition != me.partition || s.dc == me.dc {
            return Err(self.fail(InvalidKind::Sender, format!("{s} is not a sibling of {me} in another datacenter")));
        }
        Ok(s)
    }

    /// The sender is another member of `me`'s replica group.
    pub fn group_peer(&self, me: ServerId) -> Result<ServerId, InvalidInput> {
        let s = self.server()?;
        if s.partition != me.partition || s == me {
            return Err(self.fail(InvalidKind::Sender, format!("{s} is not in {me}'s replica group")));
        }
        Ok(s)
    }

    pub fn dc(&self, dc: DcId) -> Result<DcId, InvalidInput> {
        if dc < self.topology.dcs {
            Ok(dc)
        } else {
            Err(self.fail(InvalidKind::OutOfRange, format!("datacenter {dc} (the cluster has {})", self.topology.dcs)))
        }
    }

    pub fn partition(&self, p: PartitionId) -> Result<PartitionId, InvalidInput> {
        if p < self.topology.partitions {
            Ok(p)
        } else {
            let n = self.topology.partitions;
            Err(self.fail(InvalidKind::OutOfRange, format!("partition {p} (the cluster has {n})")))
        }
    }

    /// `key` lives on partition `p`.
    pub fn key_on(&self, key: &str, p: PartitionId) -> Result<(), InvalidInput> {
        let at = self.topology.partition_of(key);
        if at == p {
            Ok(())
        } else {
            Err(self.fail(InvalidKind::OutOfRange, format!("key {key:?} lives on partition {at}, not {p}")))
        }
    }

    /// A timestamp no further ahead of this server's clock than `max_clock_ahead_ms`.
    pub fn time(&self, ts: u64, what: &str) -> Result<u64, InvalidInput> {
        let limit = self.now_ns.saturating_add(self.max_ahead_ns);
        if ts <= limit && ts < u64::MAX / 2 {
            Ok(ts)
        } else {
            Err(self.fail(
                InvalidKind::Timestamp,
                format!("{what} = {ts} is more than max_clock_ahead_ms ahead of this server's clock ({})", self.now_ns),
            ))
        }
    }

    /// A version from a datacenter of the topology with a bounded time.
    pub fn version(&self, v: &Version, what: &str) -> Result<(), InvalidInput> {
        self.dc(v.dc)?;
        self.time(v.time, what)?;
        Ok(())
    }

    /// A vector clock with one entry per datacenter, each a bounded timestamp.
    pub fn vector(&self, v: &VectorClock, what: &str) -> Result<(), InvalidInput> {
        let dcs = usize::from(self.topology.dcs);
        if v.0.len() != dcs {
            return Err(self.fail(InvalidKind::Malformed, format!("{what} has {} entries, not {dcs}", v.0.len())));
        }
        for t in &v.0 {
            self.time(*t, what)?;
        }
        Ok(())
    }

    /// An optional vector clock: empty (the protocol's "none") or a full one.
    pub fn vector_or_empty(&self, v: &VectorClock, what: &str) -> Result<(), InvalidInput> {
        if v.0.is_empty() { Ok(()) } else { self.vector(v, what) }
    }

    /// The keys a client's request names, against the limits a client checks before sending
    /// ([`ProtocolConfig::check_request`], same wording): at most `max_keys_per_request`, each at least one
    /// byte and at most `max_key_bytes` (whether a message may name no key is the protocol's to say). A server calls it on every client-originated
    /// message that names keys, so a client that skips the library's check gets the same refusal.
    pub fn request_keys<'k>(&self, keys: impl IntoIterator<Item = &'k Key>) -> Result<(), InvalidInput> {
        let limit = |why: String| self.fail(InvalidKind::Limit, why);
        let mut n = 0usize;
        for key in keys {
            n += 1;
            self.config.check_key(key).map_err(limit)?;
        }
        self.config.check_key_count(n.max(1)).map_err(limit)
    }

    /// The writes a client's request carries: its keys as [`Check::request_keys`] (together with `reads`,
    /// other keys the same request names), and each value at most `max_value_bytes`.
    pub fn request_writes<'k>(
        &self,
        writes: impl IntoIterator<Item = (&'k Key, &'k Value)> + Clone,
        reads: impl IntoIterator<Item = &'k Key>,
    ) -> Result<(), InvalidInput> {
        self.request_keys(writes.clone().into_iter().map(|(k, _)| k).chain(reads))?;
        for (key, value) in writes {
            self.config.check_value(key, value).map_err(|why| self.fail(InvalidKind::Limit, why))?;
        }
        Ok(())
    }

    /// A whole client request carried in a message (protocols whose servers take the client's `Request`):
    /// every limit [`ProtocolConfig::check_request`] checks.
    pub fn request(&self, request: &crate::Request) -> Result<(), InvalidInput> {
        self.config.check_request(request).map_err(|why| self.fail(InvalidKind::Limit, why))
    }

    /// `cond` holds, else a [`InvalidKind::Malformed`] error saying `detail`.
    pub fn ensure(&self, cond: bool, kind: InvalidKind, detail: impl FnOnce() -> String) -> Result<(), InvalidInput> {
        if cond { Ok(()) } else { Err(self.fail(kind, detail())) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checks_refuse_what_does_not_fit_the_topology() {
        let t = Topology::new(2, 3);
        let config = ProtocolConfig::default();
        let now = 1_000_000_000_000;
        let me = ServerId::new(0, 1);
        let c = |from| Check::new(&t, &config, now, from, "replicate");
        assert!(c(Addr::Server(ServerId::new(1, 1))).sibling(me).is_ok());
        assert_eq!(c(Addr::Server(ServerId::new(5, 1))).sibling(me).unwrap_err().kind, InvalidKind::Sender);
        assert_eq!(c(Addr::Server(ServerId::new(0, 1))).sibling(me).unwrap_err().kind, InvalidKind::Sender);
        assert_eq!(c(Addr::Server(ServerId::new(1, 2))).sibling(me).unwrap_err().kind, InvalidKind::Sender);
        assert_eq!(c(Addr::Client(ClientId(1))).server().unwrap_err().kind, InvalidKind::Sender);
        assert_eq!(c(Addr::Server(me)).client().unwrap_err().kind, InvalidKind::Sender);
        let ok = c(Addr::Server(ServerId::new(1, 1)));
        assert!(ok.vector(&VectorClock(vec![now, now + 1]), "dv").is_ok());
        assert_eq!(ok.vector(&VectorClock(vec![now]), "dv").unwrap_err().kind, InvalidKind::Malformed);
        assert_eq!(ok.vector(&VectorClock(vec![0, u64::MAX]), "dv").unwrap_err().kind, InvalidKind::Timestamp);
        assert!(ok.time(now + 59_000_000_000, "ts").is_ok());
        assert_eq!(ok.time(now + 61_000_000_000, "ts").unwrap_err().kind, InvalidKind::Timestamp);
        assert_eq!(ok.dc(2).unwrap_err().kind, InvalidKind::OutOfRange);
        let err = ok.version(&Version { time: 1, dc: 9 }, "version").unwrap_err();
        assert!(err.to_string().contains("datacenter 9"), "{err}");
        let k = t.key_on(2, "k");
        assert!(ok.key_on(&k, 2).is_ok());
        assert_eq!(ok.key_on(&k, 0).unwrap_err().kind, InvalidKind::OutOfRange);
    }

    #[test]
    fn request_limits_are_checked_with_the_limit_named() {
        let t = Topology::new(1, 1);
        let config =
            ProtocolConfig { max_key_bytes: 8, max_value_bytes: 16, max_keys_per_request: 3, ..Default::default() };
        let check = Check::new(&t, &config, 0, Addr::Client(ClientId(1)), "put");
        let keys = |names: &[&str]| names.iter().map(|k| Key::from(*k)).collect::<Vec<_>>();
        assert!(check.request_keys(&keys(&["a", "b", "c"])).is_ok());
        assert!(check.request_keys(&keys(&[])).is_ok());
        let err = |r: Result<(), InvalidInput>| {
            let e = r.unwrap_err();
            assert_eq!(e.kind, InvalidKind::Limit, "{e}");
            e.to_string()
        };
        let e = err(check.request_keys(&keys(&["a", "b", "c", "d"])));
        assert!(e.contains("4 keys") && e.contains("max_keys_per_request") && e.contains('3'), "{e}");
        let e = err(check.request_keys(&keys(&["123456789"])));
        assert!(e.contains("9 bytes") && e.contains("max_key_bytes") && e.contains('8'), "{e}");
        assert!(err(check.request_keys(&keys(&[""]))).contains("empty key"));
        let (k, big, ok) = (Key::from("k"), Value::from("x".repeat(17)), Value::from("x".repeat(16)));
        assert!(check.request_writes([(&k, &ok)], []).is_ok());
        let e = err(check.request_writes([(&k, &big)], []));
        assert!(e.contains("17 bytes") && e.contains("max_value_bytes") && e.contains("16"), "{e}");
        // Writes and reads of one request count together.
        let reads = keys(&["a", "b", "c"]);
        assert!(err(check.request_writes([(&k, &ok)], &reads)).contains("max_keys_per_request"));
    }
}
