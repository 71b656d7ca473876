//! Protocol parameters shared by the configuration file, the CLI and the simulator.

use serde::{Deserialize, Serialize};

/// Tunables of the protocols. Each field names the protocols that read it; unknown fields in a config file
/// are an error, so a typo never silently falls back to a default.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ProtocolConfig {
    /// Largest value a write may carry, in bytes (all protocols; larger writes are rejected).
    pub max_value_bytes: usize,
    /// Longest key a request may name, in bytes (all protocols; 10 KiB, FoundationDB's limit).
    pub max_key_bytes: usize,
    /// Largest number of keys in one request (all protocols).
    pub max_keys_per_request: usize,
    /// Period of the stabilisation protocol (Tomsic Alg. 3; AV, OP, Cure): 10 ms as in the paper.
    pub stabilisation_interval_ms: u64,
    /// Multi-version garbage collection: versions that no snapshot younger than this can read are dropped.
    /// (Contrarian: a partition keeps what every snapshot vector at least its GSS and clock minus this much
    /// can read, and refuses reads at older snapshots; the client then takes a fresh snapshot.)
    pub gc_retain_ms: u64,
    /// How often garbage collection runs.
    pub gc_interval_ms: u64,
    /// Contrarian: period of the intra-datacenter exchange of version vectors that computes the GSS (§4.1;
    /// 5 ms as in the paper's evaluation, §5.1).
    pub gss_interval_ms: u64,
    /// Contrarian: a partition that has sent its sibling replicas nothing for this long sends them a
    /// heartbeat carrying its clock (§4.1; 1 ms as in §5.1).
    pub heartbeat_ms: u64,
    /// Causal protocols: a periodic duty (stabilisation, heartbeats, vector exchange, garbage collection)
    /// that finds nothing new backs off, doubling its period up to this one, and returns to its own period
    /// as soon as there is news (`components::pacer`): an idle cluster costs next to nothing.
    pub idle_backoff_ms: u64,
    /// COPS-SNOW / CC-LO: a ROT id is dropped from a key's readers record (current or old readers) this long
    /// after it was inserted there (Contrarian §5.1: 500 ms; the original COPS-SNOW used 5 s). A ROT whose
    /// reads take longer than this to reach their partitions may observe a causality gap.
    pub old_readers_gc_ms: u64,
    /// All protocols: a timestamp in a message more than this far ahead of the receiving server's physical
    /// clock is refused as invalid input (`snowline_core::validate`), so a forged or corrupt timestamp cannot
    /// push a clock to the end of time. Must exceed the clock skew between any two servers.
    pub max_clock_ahead_ms: u64,
    /// 2PL (and OCC, which shares its messages): the longest a transaction may live, from its wound-wait age
    /// (the client's clock when it, or the first of its retries, began). A participant refuses as invalid
    /// input a request whose age is older than this, and aborts (cause `Timeout`) and releases a
    /// transaction not yet prepared that has lived longer, whatever requests keep it busy; so a client can
    /// neither claim an age that outranks every honest transaction nor hold a lock for ever. A session
    /// retrying an aborted transaction keeps its age (wound-wait's starvation freedom) only while it is
    /// younger than half of this, then takes a fresh one. Default 10 s.
    pub max_txn_lifetime_ms: u64,
    /// 2PL: the most locks one transaction may hold at a partition. A read that would take more is refused
    /// (and the transaction released there); a prepare that would is voted no. Default 10,000
    /// (`max_keys_per_request`).
    pub max_locks_per_txn: usize,
    /// Rococo-SNOW: the largest difference between two nodes' clocks, in µs. A write transaction's answer
    /// waits until its coordinator's clock is this far past the transaction's timestamp (commit wait), so a
    /// read-only transaction that begins after the answer reads at a later timestamp. The simulator's
    /// default clocks differ by up to 2 ms; one machine's, or NTP-synchronised ones in one datacenter, by
    /// far less.
    pub max_clock_skew_us: u64,
    /// Components (the atomic multicast) record every step and delivery for the test suite's checkers.
    /// Memory grows without bound: tests and benchmarks only.
    pub record_components: bool,
    /// The Jessy family: how update transactions terminate, by genuine atomic multicast (`multicast`, the
    /// NMSI paper's choice for every criterion) or two-phase commit over the replica groups (`2pc`, what
    /// GMU and Walter used originally).
    pub termination: Termination,
    /// A deliberately broken atomic multicast (each group delivers at its own local timestamp, skipping
    /// the final-timestamp step) that the multicast checker's tests must catch. Never for real use.
    #[doc(hidden)]
    pub multicast_skip_final: bool,
    /// RAMP (`ramp-f`, `ramp-s`, `ramp-h`): a version overwritten by a committed newer one is dropped this
    /// long after it was overwritten (Bailis et al., SIGMOD 2014, §4.5; 4 s as in the paper's evaluation). A
    /// read whose two rounds take longer than half of this starts again, so a second round never asks for a
    /// collected version. Prepared versions not yet committed are never dropped.
    pub ramp_gc_delay_ms: u64,
    /// RAMP-H: bits of the Bloom filter of a transaction's write set that each of its versions carries
    /// (rounded up to a multiple of 64; 256 by default).
    pub ramp_bloom_bits: usize,
    /// RAMP-H: hash functions of that Bloom filter (4 by default; at most 32).
    pub ramp_bloom_hashes: u32,
    /// A deliberately broken RAMP whose reads skip the second (repair) round, so they can be fractured;
    /// the RAMP tests must catch it. Never for real use.
    #[doc(hidden)]
    pub ramp_skip_second_round: bool,
}

impl Default for ProtocolConfig {
    fn default() -> Self {
        Self {
            max_value_bytes: 1 << 20,
            max_key_bytes: 10 << 10,
            max_keys_per_request: 10_000,
            stabilisation_interval_ms: 10,
            gc_retain_ms: 1_000,
            gc_interval_ms: 100,
            gss_interval_ms: 5,
            heartbeat_ms: 1,
            old_readers_gc_ms: 500,
            idle_backoff_ms: 10_000,
            max_clock_ahead_ms: 60_000,
            max_clock_skew_us: 2_100,
            max_txn_lifetime_ms: 10_000,
            max_locks_per_txn: 10_000,
            record_components: false,
            termination: Termination::Multicast,
            multicast_skip_final: false,
            ramp_gc_delay_ms: 4_000,
            ramp_bloom_bits: 256,
            ramp_bloom_hashes: 4,
            ramp_skip_second_round: false,
        }
    }
}

/// A termination primitive for deferred update replication ([`ProtocolConfig::termination`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum Termination {
    /// Genuine atomic multicast to the transaction's groups, which certify and exchange votes.
    #[default]
    #[serde(rename = "multicast")]
    Multicast,
    /// Two-phase commit over the transaction's groups (each a Raft group), certifying at prepare.
    #[serde(rename = "2pc")]
    TwoPc,
}

impl Termination {
    pub fn name(self) -> &'static str {
        match self {
            Termination::Multicast => "multicast",
            Termination::TwoPc => "2pc",
        }
    }
}

impl std::fmt::Display for Termination {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Termination {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "multicast" => Ok(Termination::Multicast),
            "2pc" => Ok(Termination::TwoPc),
            other => Err(format!("unknown termination {other:?}; valid: multicast, 2pc")),
        }
    }
}

impl ProtocolConfig {
    /// Validate a request against the limits; `Err` carries the message the client sees.
    pub fn check_request(&self, req: &crate::Request) -> Result<(), String> {
        use crate::Request::*;
        let keys = match req {
            Rot { keys } => keys.len(),
            RotRounds { rounds } => {
                if rounds.iter().any(Vec::is_empty) {
                    return Err("every round of a multi-shot read-only transaction must name a key".into());
                }
                rounds.iter().map(Vec::len).sum()
            }
            Put { .. } => 1,
            Update { writes } => writes.len(),
            Read { keys } => keys.len(),
            // Opening, committing (possibly read-only: no writes) and aborting name no key of their own.
            Begin | Abort => return Ok(()),
            Commit { writes } => writes.len().max(1),
            Call { procedure, args } => {
                if let Some((i, arg)) = args.iter().enumerate().find(|(_, a)| a.len() > self.max_value_bytes) {
                    return Err(format!(
                        "argument {} of {procedure:?} is {} bytes; the limit is {} (max_value_bytes)",
                        i + 1,
                        arg.len(),
                        self.max_value_bytes
                    ));
                }
                let (_, pieces) = crate::procedure::plan_call(procedure, args)?;
                if let Some(key) =
                    pieces.iter().flat_map(|p| p.reads.iter().chain(&p.writes)).find(|k| self.key_too_long(k))
                {
                    return Err(self.key_error(key));
                }
                pieces.iter().map(|p| p.reads.len() + p.writes.len()).sum()
            }
        };
        let named: Box<dyn Iterator<Item = &crate::Key>> = match req {
            Rot { keys } | Read { keys } => Box::new(keys.iter()),
            RotRounds { rounds } => Box::new(rounds.iter().flatten()),
            Put { key, .. } => Box::new(std::iter::once(key)),
            Update { writes } | Commit { writes } => Box::new(writes.iter().map(|(k, _)| k)),
            Begin | Abort | Call { .. } => Box::new(std::iter::empty()),
        };
        for key in named {
            self.check_key(key)?;
        }
        self.check_key_count(keys)?;
        for (key, value) in req.writes() {
            self.check_value(&key, &value)?;
        }
        Ok(())
    }

    /// A key a request names: at least one byte, at most `max_key_bytes` (the message names the limit).
    /// Clients check it before sending ([`check_request`](Self::check_request)), servers when a request
    /// arrives (`validate::Check::request_keys`): one wording for both.
    pub fn check_key(&self, key: &str) -> Result<(), String> {
        if key.is_empty() {
            return Err("empty key: a key must be at least one byte long".into());
        }
        if self.key_too_long(key) {
            return Err(self.key_error(key));
        }
        Ok(())
    }

    /// The number of keys one request names: at least one, at most `max_keys_per_request`.
    pub fn check_key_count(&self, keys: usize) -> Result<(), String> {
        if keys == 0 {
            return Err("a request must name at least one key".into());
        }
        if keys > self.max_keys_per_request {
            return Err(format!(
                "{keys} keys in one request; the limit is {} (max_keys_per_request)",
                self.max_keys_per_request
            ));
        }
        Ok(())
    }

    /// A value written to `key`: at most `max_value_bytes`.
    pub fn check_value(&self, key: &str, value: &str) -> Result<(), String> {
        if value.len() > self.max_value_bytes {
            return Err(format!(
                "value for key {:?}{} is {} bytes; the limit is {} (max_value_bytes)",
                head(key),
                if key.len() > HEAD { "…" } else { "" },
                value.len(),
                self.max_value_bytes
            ));
        }
        Ok(())
    }

    fn key_too_long(&self, key: &str) -> bool {
        key.len() > self.max_key_bytes
    }

    fn key_error(&self, key: &str) -> String {
        format!("key {:?}… is {} bytes; the limit is {} (max_key_bytes)", head(key), key.len(), self.max_key_bytes)
    }
}

/// Characters of a key an error message shows.
const HEAD: usize = 32;

fn head(key: &str) -> String {
    key.chars().take(HEAD).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Request;

    #[test]
    fn long_keys_are_refused_with_the_limit_named() {
        let c = ProtocolConfig::default();
        let long = "k".repeat(c.max_key_bytes + 1);
        for req in [
            Request::Put { key: long.clone().into(), value: "v".into() },
            Request::Rot { keys: vec!["a".into(), long.clone().into()] },
            Request::Commit { writes: vec![(long.clone().into(), "v".into())] },
        ] {
            let err = c.check_request(&req).unwrap_err();
            assert!(err.contains("max_key_bytes") && err.contains(&(c.max_key_bytes + 1).to_string()), "{err}");
        }
        assert!(c.check_request(&Request::Put { key: "k".repeat(c.max_key_bytes).into(), value: "v".into() }).is_ok());
    }

    #[test]
    fn empty_keys_are_refused() {
        let c = ProtocolConfig::default();
        for req in [
            Request::Put { key: "".into(), value: "v".into() },
            Request::Rot { keys: vec!["a".into(), "".into()] },
            Request::Read { keys: vec!["".into()] },
            Request::Update { writes: vec![("a".into(), "1".into()), ("".into(), "v".into())] },
            Request::Commit { writes: vec![("".into(), "v".into())] },
        ] {
            let err = c.check_request(&req).unwrap_err();
            assert!(err.contains("empty key"), "{req:?}: {err}");
        }
    }
}
