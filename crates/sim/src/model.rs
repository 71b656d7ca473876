//! The simulator's configuration: the seed, the topology, and the network, clock and CPU models.

use snowline_core::{DcId, ProtocolConfig, ServerId, Topology};

/// One-way latency between two distinct datacenters when [`NetworkModel::inter_dc_latency_ns`] is empty.
pub const DEFAULT_INTER_DC_LATENCY_NS: u64 = 40_000_000;

/// Every node's physical clock reads `CLOCK_BASE_NS + virtual time (± skew, ± drift)`, so a negative skew
/// never makes a reading negative and no protocol ever sees a timestamp near [`snowline_core::Version::INITIAL`].
pub const CLOCK_BASE_NS: u64 = 1_000_000_000_000;

/// Everything a run depends on. Two runs with equal configs (and equal scenario calls) are identical.
#[derive(Clone, Debug, PartialEq)]
pub struct SimConfig {
    /// The unit of reproduction: every random choice of the run (node generators, clocks, network) derives
    /// from it.
    pub seed: u64,
    pub topology: Topology,
    pub protocol: ProtocolConfig,
    pub network: NetworkModel,
    pub clocks: ClockModel,
    pub cpu: CpuModel,
    /// Durable servers: each runs inside `snowline_storage::DurableHost` over an in-memory log, so
    /// [`crate::Sim::crash`] and [`crate::Sim::restart`] can kill one and bring it back from its log. How
    /// the log commits is [`fsync_ns`](Self::fsync_ns).
    pub durable: bool,
    /// With `durable`: the virtual time a log commit (its fsync) takes. 0: every input is committed at once,
    /// in no time (the networked runtime's `per-write` on a free disk). Otherwise the networked runtime's
    /// group commit: one commit at a time runs beside the server's CPU, started when the server has handled
    /// an input and none runs, taking everything logged so far; the outputs it covers leave when it ends,
    /// and a crash before then loses its records (and nobody saw their effects).
    pub fsync_ns: u64,
    /// Durable servers checkpoint after this many log records (`snowline_storage::CHECKPOINT_EVERY` by
    /// default); tests lower it so that recoveries start from checkpoints.
    pub checkpoint_every: u64,
    /// Give up on a client operation after this long, completing it with "outcome unknown" (as the
    /// networked client library does on a timeout) and ignoring its late completion; `None`: wait forever.
    pub op_timeout_ns: Option<u64>,
    /// Servers to crash during the run, and restart from their logs (that needs `durable`) or not.
    pub crashes: Vec<CrashPlan>,
}

/// Crash `server` at virtual time `at_ns` and restart it from its log `down_ns` later (`None`: crash-stop, it
/// stays down).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CrashPlan {
    pub server: ServerId,
    pub at_ns: u64,
    pub down_ns: Option<u64>,
}

impl SimConfig {
    /// A config with the default network, clock and CPU models.
    pub fn new(seed: u64, topology: Topology, protocol: ProtocolConfig) -> Self {
        Self {
            seed,
            topology,
            protocol,
            network: NetworkModel::default(),
            clocks: ClockModel::default(),
            cpu: CpuModel::default(),
            durable: false,
            fsync_ns: 0,
            checkpoint_every: snowline_storage::host::CHECKPOINT_EVERY,
            op_timeout_ns: None,
            crashes: Vec::new(),
        }
    }

    /// A config for scenario tests that compute times: exact latencies (no jitter, spikes or reordering),
    /// perfect clocks and free CPU.
    pub fn exact(seed: u64, topology: Topology, intra_dc_latency_ns: u64, inter_dc_latency_ns: u64) -> Self {
        Self {
            network: NetworkModel::exact(intra_dc_latency_ns, inter_dc_latency_ns),
            clocks: ClockModel::perfect(),
            cpu: CpuModel::free(),
            ..Self::new(seed, topology, ProtocolConfig::default())
        }
    }

    /// Check the models against each other; `Err` says what is wrong. [`crate::Sim::new`] panics on an error.
    pub fn validate(&self) -> Result<(), String> {
        self.network.validate(&self.topology)?;
        if self.crashes.iter().any(|c| c.down_ns.is_some()) && !self.durable {
            return Err("restarting a crashed server from its log needs durable servers (SimConfig::durable)".into());
        }
        if let Some(c) = self.crashes.iter().find(|c| !self.topology.contains(c.server)) {
            return Err(format!(
                "cannot crash {}: the topology has {} DCs × {} partitions",
                c.server, self.topology.dcs, self.topology.partitions
            ));
        }
        self.clocks.validate()
    }
}

/// Message delays. A message's delay is its base latency (by the endpoints' datacenters) times a jitter
/// factor drawn uniformly from `[1, 1 + jitter]`, plus `spike_ns` with probability `spike_probability`.
#[derive(Clone, Debug, PartialEq)]
pub struct NetworkModel {
    /// One-way latency between two servers of one datacenter. Default 150 µs.
    pub intra_dc_latency_ns: u64,
    /// One-way latency, `dcs × dcs` (the diagonal is unused: same-DC pairs use `intra_dc_latency_ns`).
    /// Empty: [`DEFAULT_INTER_DC_LATENCY_NS`] between every two distinct datacenters; `[[x]]`: `x` between
    /// every two distinct datacenters.
    pub inter_dc_latency_ns: Vec<Vec<u64>>,
    /// Each delay is multiplied by a factor uniform in `[1, 1 + jitter]`. Default 0.1.
    pub jitter: f64,
    /// Let jitter reorder messages on a link. Applied only to protocols whose
    /// [`snowline_core::LinkAssumptions::fifo`] is false; otherwise every directed link is FIFO. Default true.
    pub reorder: bool,
    /// Chance that a message gets `spike_ns` of extra delay. Default 0.
    pub spike_probability: f64,
    /// Extra delay of a spike. Default 10 ms.
    pub spike_ns: u64,
    /// One-way latency between a client and a node of its own datacenter. Default 150 µs (the intra-DC
    /// default; set it explicitly when changing `intra_dc_latency_ns`).
    pub client_latency_ns: u64,
}

impl Default for NetworkModel {
    fn default() -> Self {
        Self {
            intra_dc_latency_ns: 150_000,
            inter_dc_latency_ns: Vec::new(),
            jitter: 0.1,
            reorder: true,
            spike_probability: 0.0,
            spike_ns: 10_000_000,
            client_latency_ns: 150_000,
        }
    }
}

impl NetworkModel {
    /// No jitter, no spikes: every delay is exactly its base latency (for tests that compute times).
    pub fn exact(intra_dc_latency_ns: u64, inter_dc_latency_ns: u64) -> Self {
        Self {
            intra_dc_latency_ns,
            inter_dc_latency_ns: Vec::new(),
            jitter: 0.0,
            reorder: false,
            spike_probability: 0.0,
            spike_ns: 0,
            client_latency_ns: intra_dc_latency_ns,
        }
        .with_uniform_inter_dc(inter_dc_latency_ns)
    }

    /// The same one-way latency between every two distinct datacenters (stored as the 1 × 1 matrix `[[x]]`).
    pub fn with_uniform_inter_dc(mut self, latency_ns: u64) -> Self {
        self.inter_dc_latency_ns = vec![vec![latency_ns]];
        self
    }

    /// The base one-way latency between two nodes in datacenters `a` and `b` (intra-DC if equal).
    pub fn inter_dc_ns(&self, a: DcId, b: DcId) -> u64 {
        if a == b {
            return self.intra_dc_latency_ns;
        }
        match self.inter_dc_latency_ns.as_slice() {
            [] => DEFAULT_INTER_DC_LATENCY_NS,
            [row] if row.len() == 1 => row[0],
            m => m[a as usize][b as usize],
        }
    }

    fn validate(&self, topology: &Topology) -> Result<(), String> {
        let dcs = topology.dcs as usize;
        let m = &self.inter_dc_latency_ns;
        let uniform = m.len() == 1 && m[0].len() == 1;
        if !m.is_empty() && !uniform && (m.len() != dcs || m.iter().any(|row| row.len() != dcs)) {
            return Err(format!("inter_dc_latency_ns must be {dcs} x {dcs} (one row and column per datacenter)"));
        }
        if !(self.jitter.is_finite() && self.jitter >= 0.0) {
            return Err(format!("jitter must be a finite number >= 0, not {}", self.jitter));
        }
        if !(0.0..=1.0).contains(&self.spike_probability) {
            return Err(format!("spike_probability must be in [0, 1], not {}", self.spike_probability));
        }
        Ok(())
    }
}

/// Physical clocks. Each node gets an offset uniform in `[-max_skew_ns, +max_skew_ns]` and a drift uniform
/// in `[-max_drift_ppm, +max_drift_ppm]`; its reading at virtual time `t` is
/// `CLOCK_BASE_NS + t·(1 + drift) + offset`, never smaller than its previous reading.
#[derive(Clone, Debug, PartialEq)]
pub struct ClockModel {
    /// Default 1 ms (a well-run NTP deployment).
    pub max_skew_ns: u64,
    /// Default 10 ppm (commodity quartz).
    pub max_drift_ppm: f64,
}

impl Default for ClockModel {
    fn default() -> Self {
        Self { max_skew_ns: 1_000_000, max_drift_ppm: 10.0 }
    }
}

impl ClockModel {
    /// Every node reads `CLOCK_BASE_NS + virtual time`.
    pub fn perfect() -> Self {
        Self { max_skew_ns: 0, max_drift_ppm: 0.0 }
    }

    fn validate(&self) -> Result<(), String> {
        if self.max_skew_ns >= CLOCK_BASE_NS {
            return Err(format!("max_skew_ns must be below {CLOCK_BASE_NS}, not {}", self.max_skew_ns));
        }
        if !(self.max_drift_ppm.is_finite() && (0.0..100_000.0).contains(&self.max_drift_ppm)) {
            return Err(format!("max_drift_ppm must be in [0, 100000), not {}", self.max_drift_ppm));
        }
        Ok(())
    }
}

/// Server CPU cost: handling one input takes `base_ns + work · per_work_unit_ns`, where `work` is what the
/// handler reported through [`snowline_core::Ctx::charge`], plus, for every message the handler sends,
/// `per_message_ns + bytes · per_kib_ns / 1024` (serializing it and handing it to the network), where
/// `bytes` is the message's postcard encoding (the networked runtime's wire format), measured without
/// encoding it (a counting pass over the message, [`postcard::experimental::serialized_size`]; skipped when
/// `per_kib_ns` is 0). A server that answers each input with one small message costs about `base_ns +
/// per_message_ns`; one that fans out saturates earlier. Client nodes are free (see the crate docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CpuModel {
    /// Default 4 µs per handled input.
    pub base_ns: u64,
    /// Default 200 ns per work unit.
    pub per_work_unit_ns: u64,
    /// Default 1 µs per sent message: with `base_ns`, 5 µs for an input answered by one message.
    pub per_message_ns: u64,
    /// Default 512 ns per KiB of a sent message's encoding (0.5 ns per byte: about 2 GB/s of encoding and
    /// copying).
    pub per_kib_ns: u64,
}

impl Default for CpuModel {
    fn default() -> Self {
        Self { base_ns: 4_000, per_work_unit_ns: 200, per_message_ns: 1_000, per_kib_ns: 512 }
    }
}

impl CpuModel {
    /// Handlers take no virtual time.
    pub fn free() -> Self {
        Self { base_ns: 0, per_work_unit_ns: 0, per_message_ns: 0, per_kib_ns: 0 }
    }

    /// The virtual time one handler call costs before its sends ([`CpuModel::message_ns`] each).
    pub fn cost_ns(&self, work: u64) -> u64 {
        self.base_ns.saturating_add(work.saturating_mul(self.per_work_unit_ns))
    }

    /// The virtual time sending `msg` costs its server.
    pub fn message_ns<M: snowline_core::Message>(&self, msg: &M) -> u64 {
        let mut ns = self.per_message_ns;
        if self.per_kib_ns > 0 {
            let bytes = postcard::experimental::serialized_size(msg).map_or(0, |b| b as u64);
            ns = ns.saturating_add(bytes.saturating_mul(self.per_kib_ns) / 1024);
        }
        ns
    }
}
