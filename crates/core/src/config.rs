//! Protocol parameters shared by the configuration file, the CLI and the simulator.

use serde::{Deserialize, Serialize};

/// Tunables of the protocols. Each field names the protocols that read it; unknown fields in a config file
/// are an error, so a typo never silently falls back to a default.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ProtocolConfig {
    /// Largest value a write may carry, in bytes (all protocols; larger writes are rejected).
    pub max_value_bytes: usize,
    /// Largest number of keys in one request (all protocols).
    pub max_keys_per_request: usize,
    /// Period of the stabilisation protocol (Tomsic Alg. 3; AV, OP, Cure): 10 ms as in the paper.
    pub stabilisation_interval_ms: u64,
    /// Multi-version garbage collection: versions that no snapshot younger than this can read are dropped.
    pub gc_retain_ms: u64,
    /// How often garbage collection runs.
    pub gc_interval_ms: u64,
    /// COPS-SNOW / CC-LO: a ROT id is dropped from a key's readers record (current or old readers) this long
    /// after it was inserted there (Contrarian §5.1: 500 ms; the original COPS-SNOW used 5 s). A ROT whose
    /// reads take longer than this to reach their partitions may observe a causality gap.
    pub old_readers_gc_ms: u64,
}

impl Default for ProtocolConfig {
    fn default() -> Self {
        Self {
            max_value_bytes: 1 << 20,
            max_keys_per_request: 10_000,
            stabilisation_interval_ms: 10,
            gc_retain_ms: 1_000,
            gc_interval_ms: 100,
            old_readers_gc_ms: 500,
        }
    }
}

impl ProtocolConfig {
    /// Validate a request against the limits; `Err` carries the message the client sees.
    pub fn check_request(&self, req: &crate::Request) -> Result<(), String> {
        use crate::Request::*;
        let keys = match req {
            Rot { keys } => keys.len(),
            Put { .. } => 1,
            Update { writes } => writes.len(),
        };
        if keys == 0 {
            return Err("a request must name at least one key".into());
        }
        if keys > self.max_keys_per_request {
            return Err(format!("{keys} keys in one request; the limit is {}", self.max_keys_per_request));
        }
        for (key, value) in req.writes() {
            if value.len() > self.max_value_bytes {
                return Err(format!(
                    "value for key {key:?} is {} bytes; the limit is {} (max_value_bytes)",
                    value.len(),
                    self.max_value_bytes
                ));
            }
        }
        Ok(())
    }
}
