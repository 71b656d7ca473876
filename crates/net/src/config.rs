//! The cluster description shared by every process of a networked deployment: `cluster.toml`.
//!
//! ```toml
//! protocol = "cv"
//! dcs = 2
//! partitions = 4
//! replicas = 2                                     # servers per partition; omitted => dcs (one per dc)
//! placement = "spread"                             # or "site" (each group in dc p mod dcs); omitted => spread
//! inter_dc_latency_ms = [[0.0, 40.0], [40.0, 0.0]]   # one-way; emulated inside the runtime; omitted => 0
//! max_frame_bytes = 8388608                        # omitted => 8 MiB
//! [protocol_config]                                # snowline_core::ProtocolConfig, all fields optional
//! stabilisation_interval_ms = 10
//! [tls]                                            # peer authentication (crate::tls); or insecure = true
//! ca = "tls/ca.pem"                                # relative paths: to this file's directory
//! cert = "tls/node-{id}.pem"                       # {id}: the node's id
//! key = "tls/node-{id}.key"
//! clients = false                                  # true: clients must use TLS too
//! [[node]]
//! id = 0
//! addr = "127.0.0.1:7100"
//! dc = 0
//! partitions = [0]                                 # partitions of its dc this OS process hosts
//! replica = 0                                      # which of their replicas in this dc; omitted => 0
//! metrics = "127.0.0.1:9100"                       # Prometheus text at http://ADDR/metrics; omitted => off
//! grpc = "127.0.0.1:9200"                          # the gRPC API (docs/API.md); omitted => off
//! ```
//!
//! Every server of the topology (`Topology`'s placement of each partition's replica group) is hosted by
//! exactly one node; a node hosts servers of one datacenter only (so that messages between partitions of one
//! process never cross a WAN link). A config has either a `[tls]` section or `insecure = true`: servers
//! authenticate each other by mutual TLS, or (for experiments) not at all.
//! [`ClusterConfig::load`] validates all of this and reports the first problem with the file's path.

use serde::{Deserialize, Serialize};
use snowline_core::{DcId, PartitionId, Placement, ProtocolConfig, ReplicaId, ServerId, Topology};
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

/// Default largest frame on the wire (8 MiB).
pub const DEFAULT_MAX_FRAME_BYTES: usize = 8 << 20;
/// Frames smaller than this limit could not even carry a handshake; the config rejects them.
pub const MIN_MAX_FRAME_BYTES: usize = 1024;

fn default_max_frame_bytes() -> usize {
    DEFAULT_MAX_FRAME_BYTES
}

/// One OS process of the cluster.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeConfig {
    /// Unique node id (what `snowline server --node ID` selects).
    pub id: u32,
    /// `host:port` the node listens on and peers connect to.
    pub addr: String,
    /// The datacenter of every partition the node hosts.
    pub dc: DcId,
    /// Partitions of `dc` hosted by this process.
    pub partitions: Vec<PartitionId>,
    /// Which replica (in `dc`) of each of those partitions this process is; 0 unless a replica group has
    /// several servers in one datacenter.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub replica: ReplicaId,
    /// `host:port` where the node serves its metrics (Prometheus text, `GET /metrics`); `None`: no metrics
    /// listener. `snowline server --metrics ADDR` overrides it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metrics: Option<String>,
    /// `host:port` where the node serves the public gRPC API (`snowline.v1`, docs/API.md); `None`: none.
    /// `snowline server --grpc ADDR` overrides it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grpc: Option<String>,
}

fn is_zero(r: &ReplicaId) -> bool {
    *r == 0
}

impl NodeConfig {
    /// The servers this node hosts.
    pub fn servers(&self) -> impl Iterator<Item = ServerId> + '_ {
        self.partitions.iter().map(|p| ServerId::replica(self.dc, *p, self.replica))
    }

    /// Whether this node hosts `server`.
    pub fn hosts(&self, server: ServerId) -> bool {
        self.dc == server.dc && self.replica == server.replica && self.partitions.contains(&server.partition)
    }
}

fn is_spread(p: &Placement) -> bool {
    *p == Placement::Spread
}

/// The whole cluster: protocol, topology, emulated WAN, frame limit and the node → partitions map.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClusterConfig {
    /// Protocol name (`Protocol::NAME`); every process must run this protocol.
    pub protocol: String,
    pub dcs: u16,
    pub partitions: u16,
    /// Servers per partition (its replica group), placed as `Topology` says; omitted means one per datacenter.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<u16>,
    /// Where each partition's group lives (`Topology::placement`): `spread` over the datacenters (the default)
    /// or `site`, the whole group in datacenter `partition mod dcs`.
    #[serde(default, skip_serializing_if = "is_spread")]
    pub placement: Placement,
    /// One-way latency in milliseconds from dc `i` (row) to dc `j` (column); empty means zero everywhere.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub inter_dc_latency_ms: Vec<Vec<f64>>,
    /// Largest frame accepted or sent, in bytes.
    #[serde(default = "default_max_frame_bytes")]
    pub max_frame_bytes: usize,
    /// No peer authentication: any connection may speak for any server (experiments only; `crate::tls`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub insecure: bool,
    /// A nemesis's fault plan (`snowline nemesis`; `crate::faults`): each server polls this file and cuts
    /// links, adds delay and moves its clock as it says. Experiments only; omitted for every real cluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fault_file: Option<PathBuf>,
    #[serde(default)]
    pub protocol_config: ProtocolConfig,
    /// Mutual TLS between servers (`crate::tls`); required unless `insecure`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<TlsConfig>,
    #[serde(rename = "node", default)]
    pub nodes: Vec<NodeConfig>,
}

/// The `[tls]` section: where the cluster's CA certificate and each node's certificate and key are.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TlsConfig {
    /// The CA certificate (PEM) that signed every node's certificate.
    pub ca: PathBuf,
    /// A node's certificate (PEM); `{id}` stands for the node id.
    pub cert: String,
    /// A node's private key (PEM); `{id}` stands for the node id. Each host needs only its nodes' keys.
    pub key: String,
    /// Clients must connect with TLS (verifying the servers against `ca`); plain client connections are
    /// refused. Off by default: client TLS is opt-in.
    #[serde(default)]
    pub clients: bool,
}

/// Server → index (in `ClusterConfig::nodes`) of the node hosting it.
#[derive(Clone, Debug)]
pub struct Routes {
    topology: Topology,
    /// By the server's position in `Topology::servers`.
    node_of_server: Vec<usize>,
}

impl Routes {
    /// The index of the node hosting `server`, or `None` if no such server exists.
    pub fn node_of(&self, server: ServerId) -> Option<usize> {
        self.node_of_server.get(self.topology.index_of(server)?).copied()
    }
}

/// Why a cluster configuration could not be loaded, saved or used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read cluster config {}: {error}", path.display())]
    Read { path: PathBuf, error: std::io::Error },
    #[error("cannot write cluster config {}: {error}", path.display())]
    Write { path: PathBuf, error: std::io::Error },
    /// The TOML is malformed or has unknown/mistyped fields; `message` names the line.
    #[error("invalid TOML in cluster config {}: {message}", path.display())]
    Parse { path: PathBuf, message: String },
    /// The file parsed but describes an impossible cluster.
    #[error("invalid cluster config{}: {message}", path.as_ref().map(|p| format!(" {}", p.display())).unwrap_or_default())]
    Invalid { path: Option<PathBuf>, message: String },
}

impl ClusterConfig {
    /// Read, parse and validate a `cluster.toml`.
    pub fn load(path: impl AsRef<Path>) -> Result<Self, ConfigError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|error| ConfigError::Read { path: path.to_owned(), error })?;
        let mut config = Self::parse(&text).map_err(|e| match e {
            ConfigError::Parse { message, .. } => ConfigError::Parse { path: path.to_owned(), message },
            ConfigError::Invalid { message, .. } => ConfigError::Invalid { path: Some(path.to_owned()), message },
            other => other,
        })?;
        // Relative certificate paths are relative to the config file, wherever the process runs.
        if let (Some(tls), Some(dir)) = (&mut config.tls, path.parent()) {
            tls.ca = dir.join(&tls.ca);
            for template in [&mut tls.cert, &mut tls.key] {
                *template = dir.join(&*template).display().to_string();
            }
        }
        Ok(config)
    }

    /// Parse and validate TOML text (errors carry an empty path).
    pub fn parse(text: &str) -> Result<Self, ConfigError> {
        let config = Self::parse_unvalidated(text)?;
        config.validate()?;
        Ok(config)
    }

    fn parse_unvalidated(text: &str) -> Result<Self, ConfigError> {
        toml::from_str(text)
            .map_err(|e| ConfigError::Parse { path: PathBuf::new(), message: e.to_string().trim_end().to_owned() })
    }

    /// Read and parse a `cluster.toml` without checking it describes a runnable cluster (`snowline certs`
    /// reads a config that has no `[tls]` section yet).
    pub fn load_unvalidated(path: impl AsRef<Path>) -> Result<Self, ConfigError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|error| ConfigError::Read { path: path.to_owned(), error })?;
        Self::parse_unvalidated(&text).map_err(|e| match e {
            ConfigError::Parse { message, .. } => ConfigError::Parse { path: path.to_owned(), message },
            other => other,
        })
    }

    /// Write the config as TOML (creating or replacing the file).
    pub fn save(&self, path: impl AsRef<Path>) -> Result<(), ConfigError> {
        let path = path.as_ref();
        let text = toml::to_string(self).map_err(|e| ConfigError::Write {
            path: path.to_owned(),
            error: std::io::Error::new(std::io::ErrorKind::InvalidData, e.to_string()),
        })?;
        std::fs::write(path, text).map_err(|error| ConfigError::Write { path: path.to_owned(), error })
    }

    /// A loopback cluster with one node per server of the topology (full replication: one per
    /// `(dc, partition)`): node `i`, the `i`-th of `Topology::servers`, listens on `127.0.0.1:(base_port + i)`.
    /// No emulated latency (set `inter_dc_latency_ms` afterwards if wanted). It has no certificates yet:
    /// [`ClusterConfig::with_new_certs`] (which `spawn_local_cluster` calls) or `insecure = true` completes it.
    ///
    /// Panics if the ports run past 65535; [`ClusterConfig::local_replicated`] returns that as an error.
    pub fn local(protocol: &str, dcs: u16, partitions: u16, base_port: u16) -> Self {
        Self::local_replicated(protocol, Topology::new(dcs, partitions), base_port).expect("ports fit")
    }

    /// [`ClusterConfig::local`] for any placement; an error if `base_port` leaves no room for every node.
    pub fn local_replicated(protocol: &str, topology: Topology, base_port: u16) -> Result<Self, ConfigError> {
        let mut nodes = Vec::new();
        let servers = topology.servers().count();
        if base_port == 0 || u32::from(base_port) + servers as u32 - 1 > u32::from(u16::MAX) {
            return Err(ConfigError::Invalid {
                path: None,
                message: format!(
                    "base port {base_port} leaves no room for {servers} nodes (ports {base_port}..={} must be within 1..=65535)",
                    u32::from(base_port) + servers as u32 - 1
                ),
            });
        }
        for (i, s) in topology.servers().enumerate() {
            let id = i as u32;
            let port = u32::from(base_port) + id;
            nodes.push(NodeConfig {
                id,
                addr: format!("127.0.0.1:{port}"),
                dc: s.dc,
                partitions: vec![s.partition],
                replica: s.replica,
                metrics: None,
                grpc: None,
            });
        }
        Ok(Self {
            protocol: protocol.to_owned(),
            dcs: topology.dcs,
            partitions: topology.partitions,
            replicas: (!topology.one_replica_per_dc()).then_some(topology.replicas),
            placement: topology.placement,
            inter_dc_latency_ms: Vec::new(),
            max_frame_bytes: DEFAULT_MAX_FRAME_BYTES,
            insecure: false,
            fault_file: None,
            protocol_config: ProtocolConfig::default(),
            tls: None,
            nodes,
        })
    }

    /// Make a new CA and a certificate for every node in `dir` (`crate::tls::generate`) and name them in
    /// the `[tls]` section.
    pub fn with_new_certs(mut self, dir: &Path) -> Result<Self, crate::NetError> {
        let certs = crate::tls::generate(self.nodes.iter().map(|n| n.id))?;
        self.tls = Some(certs.write(dir)?);
        self.insecure = false;
        Ok(self)
    }

    /// No peer authentication (`insecure = true`): for experiments only.
    pub fn insecure(mut self) -> Self {
        self.insecure = true;
        self.tls = None;
        self
    }

    /// Give node `i` (in config order) a metrics listener on `127.0.0.1:(base_port + i)`; an error if the
    /// ports run past 65535.
    pub fn with_metrics_ports(self, base_port: u16) -> Result<Self, ConfigError> {
        self.with_listener_ports(base_port, "metrics", |node, addr| node.metrics = Some(addr))
    }

    /// Give node `i` (in config order) a gRPC API listener on `127.0.0.1:(base_port + i)`; an error if the
    /// ports run past 65535.
    pub fn with_grpc_ports(self, base_port: u16) -> Result<Self, ConfigError> {
        self.with_listener_ports(base_port, "gRPC", |node, addr| node.grpc = Some(addr))
    }

    fn with_listener_ports(
        mut self,
        base_port: u16,
        what: &str,
        set: impl Fn(&mut NodeConfig, String),
    ) -> Result<Self, ConfigError> {
        let last = u32::from(base_port) + self.nodes.len().saturating_sub(1) as u32;
        if base_port == 0 || last > u32::from(u16::MAX) {
            return Err(ConfigError::Invalid {
                path: None,
                message: format!("{what} base port {base_port} leaves no room for {} nodes", self.nodes.len()),
            });
        }
        for (i, node) in self.nodes.iter_mut().enumerate() {
            set(node, format!("127.0.0.1:{}", u32::from(base_port) + i as u32));
        }
        Ok(self)
    }

    /// Set the same one-way latency between every pair of distinct datacenters.
    pub fn with_uniform_latency_ms(mut self, ms: f64) -> Self {
        let n = usize::from(self.dcs);
        self.inter_dc_latency_ms = (0..n).map(|i| (0..n).map(|j| if i == j { 0.0 } else { ms }).collect()).collect();
        self
    }

    /// Check the invariants documented at the top of this module: what a server needs.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.validate_layout()?;
        let bad = |message: String| Err(ConfigError::Invalid { path: None, message });
        match (&self.tls, self.insecure) {
            (None, false) => {
                return bad("no [tls] section: servers must authenticate each other. `snowline cluster up` makes \
                    the certificates (for a multi-host cluster: `snowline certs --config FILE --out DIR`); or set \
                    `insecure = true` to let any connection speak for any server (experiments only)"
                    .into());
            }
            (Some(_), true) => return bad("both a [tls] section and insecure = true: choose one".into()),
            (Some(tls), false) if !tls.cert.contains("{id}") || !tls.key.contains("{id}") => {
                return bad(format!(
                    "[tls] cert = {:?} and key = {:?} must contain {{id}} (each node has its own)",
                    tls.cert, tls.key
                ));
            }
            _ => {}
        }
        Ok(())
    }

    /// Everything [`validate`](Self::validate) checks but peer authentication, which is the servers'
    /// business: what a client runtime needs (with `[tls] clients = true` it needs the CA too).
    pub fn validate_layout(&self) -> Result<(), ConfigError> {
        let bad = |message: String| Err(ConfigError::Invalid { path: None, message });
        if self.protocol.is_empty() {
            return bad("`protocol` is empty".into());
        }
        if self.dcs == 0 || self.partitions == 0 || self.replicas == Some(0) {
            return bad(format!(
                "need at least one dc, one partition and one replica (dcs = {}, partitions = {}, replicas = {})",
                self.dcs,
                self.partitions,
                self.replicas.unwrap_or(self.dcs)
            ));
        }
        if self.max_frame_bytes < MIN_MAX_FRAME_BYTES || self.max_frame_bytes > u32::MAX as usize {
            return bad(format!(
                "max_frame_bytes = {} is out of range {MIN_MAX_FRAME_BYTES}..={}",
                self.max_frame_bytes,
                u32::MAX
            ));
        }
        // Whatever a server accepts it can pass on and answer (snowline_core::frames).
        if let Err(why) = snowline_core::frames::check_limits(self.max_frame_bytes, &self.protocol_config) {
            return bad(format!("{why} (protocol_config)"));
        }
        if !self.inter_dc_latency_ms.is_empty() {
            let n = usize::from(self.dcs);
            if self.inter_dc_latency_ms.len() != n || self.inter_dc_latency_ms.iter().any(|row| row.len() != n) {
                let shape: Vec<usize> = self.inter_dc_latency_ms.iter().map(Vec::len).collect();
                return bad(format!(
                    "inter_dc_latency_ms must be a {n}×{n} matrix (dcs = {n}); got rows of lengths {shape:?}"
                ));
            }
            for (i, row) in self.inter_dc_latency_ms.iter().enumerate() {
                for (j, v) in row.iter().enumerate() {
                    if !v.is_finite() || *v < 0.0 {
                        return bad(format!("inter_dc_latency_ms[{i}][{j}] = {v} must be a non-negative number"));
                    }
                }
            }
        }
        if self.nodes.is_empty() {
            return bad("no [[node]] entries".into());
        }
        let mut ids = HashSet::new();
        let mut addrs = HashSet::new();
        let mut host: HashMap<ServerId, u32> = HashMap::new();
        for node in &self.nodes {
            if !ids.insert(node.id) {
                return bad(format!("node id {} appears more than once", node.id));
            }
            if !addrs.insert(node.addr.as_str()) {
                return bad(format!("address {} is used by more than one node (second: node {})", node.addr, node.id));
            }
            for (what, listener) in [("metrics", &node.metrics), ("grpc", &node.grpc)] {
                let Some(m) = listener else { continue };
                if let Err(why) = check_listen_addr(m) {
                    return bad(format!("node {}: {what} = {m:?}: {why}", node.id));
                }
                if !addrs.insert(m.as_str()) {
                    return bad(format!(
                        "node {}: {what} = {m:?} is an address another node or listener of the config uses",
                        node.id
                    ));
                }
            }
            if node.dc >= self.dcs {
                return bad(format!("node {} is in dc {} but dcs = {}", node.id, node.dc, self.dcs));
            }
            if node.partitions.is_empty() {
                return bad(format!("node {} hosts no partitions", node.id));
            }
            for s in node.servers() {
                if s.partition >= self.partitions {
                    return bad(format!(
                        "node {} hosts partition {} but partitions = {}",
                        node.id, s.partition, self.partitions
                    ));
                }
                if !self.topology().contains(s) {
                    let group: Vec<String> = self.topology().group(s.partition).map(|g| g.to_string()).collect();
                    return bad(format!(
                        "node {} hosts {s}, which is not a replica of partition {} (its group is {})",
                        node.id,
                        s.partition,
                        group.join(", ")
                    ));
                }
                if let Some(other) = host.insert(s, node.id) {
                    return bad(format!("{s} is hosted by both node {other} and node {}", node.id));
                }
            }
        }
        let missing: Vec<String> =
            self.topology().servers().filter(|s| !host.contains_key(s)).map(|s| s.to_string()).collect();
        if !missing.is_empty() {
            return bad(format!("no node hosts {}", missing.join(", ")));
        }
        Ok(())
    }

    pub fn topology(&self) -> Topology {
        Topology::placed(self.dcs, self.partitions, self.replicas.unwrap_or(self.dcs), self.placement)
    }

    pub fn node(&self, id: u32) -> Option<&NodeConfig> {
        self.nodes.iter().find(|n| n.id == id)
    }

    /// Where each server lives: the one routing table the server and client runtimes share.
    pub fn routes(&self) -> Routes {
        let topology = self.topology();
        let node_of_server = topology
            .servers()
            .map(|s| self.nodes.iter().position(|n| n.hosts(s)).expect("validated: every server is hosted"))
            .collect();
        Routes { topology, node_of_server }
    }

    /// The node hosting `server`.
    pub fn node_hosting(&self, server: ServerId) -> Option<&NodeConfig> {
        self.nodes.iter().find(|n| n.hosts(server))
    }

    /// Emulated one-way latency from `from` to `to`, in nanoseconds (0 if no matrix is configured).
    pub fn latency_ns(&self, from: DcId, to: DcId) -> u64 {
        self.inter_dc_latency_ms
            .get(usize::from(from))
            .and_then(|row| row.get(usize::from(to)))
            .map(|ms| (ms * 1e6).round() as u64)
            .unwrap_or(0)
    }
}

/// Whether `addr` looks like `host:port` with a port a listener can be found at (not 0: an operator could
/// not tell where to scrape). Whether the host resolves is up to the server that binds it.
fn check_listen_addr(addr: &str) -> Result<(), String> {
    let Some((host, port)) = addr.rsplit_once(':') else { return Err("expected host:port".into()) };
    if host.is_empty() {
        return Err("expected host:port (the host is missing)".into());
    }
    match port.parse::<u16>() {
        Ok(0) => Err("port 0 would pick a random port; name one".into()),
        Ok(_) => Ok(()),
        Err(_) => Err(format!("{port:?} is not a port number")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmp(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("snowline-net-config-{}-{name}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir.join("cluster.toml")
    }

    const GOOD: &str = r#"
protocol = "cv"
dcs = 2
partitions = 2
inter_dc_latency_ms = [[0.0, 40.0], [40.0, 0.0]]
max_frame_bytes = 8388608
insecure = true
[protocol_config]
stabilisation_interval_ms = 5
[[node]]
id = 0
addr = "127.0.0.1:7100"
dc = 0
partitions = [0, 1]
[[node]]
id = 1
addr = "127.0.0.1:7101"
dc = 1
partitions = [0]
[[node]]
id = 2
addr = "127.0.0.1:7102"
dc = 1
partitions = [1]
"#;

    #[test]
    fn parses_and_answers_queries() {
        let c = ClusterConfig::parse(GOOD).unwrap();
        assert_eq!(c.topology(), Topology::new(2, 2));
        assert_eq!(c.protocol_config.stabilisation_interval_ms, 5);
        assert_eq!(c.protocol_config.gc_interval_ms, ProtocolConfig::default().gc_interval_ms);
        assert_eq!(c.node_hosting(ServerId::new(0, 1)).unwrap().id, 0);
        assert_eq!(c.node_hosting(ServerId::new(1, 1)).unwrap().id, 2);
        assert_eq!(c.node(1).unwrap().addr, "127.0.0.1:7101");
        assert_eq!(c.latency_ns(0, 1), 40_000_000);
        assert_eq!(c.latency_ns(1, 1), 0);
    }

    #[test]
    fn save_load_round_trip() {
        let path = tmp("roundtrip");
        let c = ClusterConfig::local("cv", 3, 2, 21000).with_uniform_latency_ms(12.5).insecure();
        c.save(&path).unwrap();
        let back = ClusterConfig::load(&path).unwrap();
        assert_eq!(back, c);
        assert_eq!(back.nodes.len(), 6);
        assert_eq!(back.latency_ns(2, 0), 12_500_000);
        let _ = std::fs::remove_dir_all(path.parent().unwrap());
    }

    #[test]
    fn site_placement_round_trips_and_bad_placements_are_named() {
        let path = tmp("site");
        let topology = Topology::placed(2, 2, 3, Placement::Site);
        let c = ClusterConfig::local_replicated("nmsi", topology, 21100).unwrap().insecure();
        assert_eq!(c.topology(), topology);
        c.save(&path).unwrap();
        assert!(std::fs::read_to_string(&path).unwrap().contains("placement = \"site\""));
        let back = ClusterConfig::load(&path).unwrap();
        assert_eq!(back, c);
        assert_eq!(back.nodes.len(), 6);
        // Partition 1's group lives in dc 1 only.
        assert!(back.nodes.iter().filter(|n| n.partitions == [1]).all(|n| n.dc == 1));
        // A spread config does not write the field, and one without it parses as spread.
        let spread = ClusterConfig::local("cv", 2, 2, 21200).insecure();
        assert!(!toml::to_string(&spread).unwrap().contains("placement"));
        let text = toml::to_string(&c).unwrap().replace("placement = \"site\"", "placement = \"sites\"");
        let err = ClusterConfig::parse(&text).unwrap_err().to_string();
        assert!(err.contains("sites") && err.contains("spread") && err.contains("site"), "{err}");
        // A node hosting a partition outside its dc's groups is refused.
        let mut bad = c.clone();
        bad.nodes[0].partitions = vec![1];
        let err = ClusterConfig::parse(&toml::to_string(&bad).unwrap()).unwrap_err().to_string();
        assert!(err.contains("dc0/p1"), "{err}");
        let _ = std::fs::remove_dir_all(path.parent().unwrap());
    }

    #[test]
    fn missing_file_names_the_path() {
        let err = ClusterConfig::load("/nonexistent/dir/cluster.toml").unwrap_err().to_string();
        assert!(err.contains("/nonexistent/dir/cluster.toml"), "{err}");
        assert!(err.contains("cannot read"), "{err}");
    }

    #[test]
    fn bad_toml_names_the_line() {
        let path = tmp("badtoml");
        std::fs::write(&path, "protocol = \"cv\"\ndcs = 2\npartitions = = 4\n").unwrap();
        let err = ClusterConfig::load(&path).unwrap_err().to_string();
        assert!(err.contains("line 3"), "{err}");
        assert!(err.contains(&path.display().to_string()), "{err}");
        std::fs::write(&path, "protocol = \"cv\"\ndcs = 2\npartitions = 4\nbogus = 1\n").unwrap();
        let err = ClusterConfig::load(&path).unwrap_err().to_string();
        assert!(err.contains("bogus"), "{err}");
        let _ = std::fs::remove_dir_all(path.parent().unwrap());
    }

    fn invalid(edit: impl FnOnce(&mut ClusterConfig)) -> String {
        let mut c = ClusterConfig::parse(GOOD).unwrap();
        edit(&mut c);
        let text = toml::to_string(&c).unwrap();
        match ClusterConfig::parse(&text) {
            Err(e @ ConfigError::Invalid { .. }) => e.to_string(),
            other => panic!("expected a validation error, got {other:?}"),
        }
    }

    #[test]
    fn validation_errors_are_specific() {
        let e = invalid(|c| c.nodes[2].partitions = vec![0]);
        assert!(e.contains("dc1/p0 is hosted by both node 1 and node 2"), "{e}");
        let e = invalid(|c| c.nodes.pop().map(|_| ()).unwrap());
        assert!(e.contains("no node hosts dc1/p1"), "{e}");
        let e = invalid(|c| c.nodes[1].dc = 2);
        assert!(e.contains("dc 2 but dcs = 2"), "{e}");
        let e = invalid(|c| c.nodes[1].partitions = vec![7]);
        assert!(e.contains("partition 7 but partitions = 2"), "{e}");
        let e = invalid(|c| c.inter_dc_latency_ms = vec![vec![0.0, 1.0]]);
        assert!(e.contains("2×2 matrix"), "{e}");
        let e = invalid(|c| c.inter_dc_latency_ms[0][1] = -3.0);
        assert!(e.contains("inter_dc_latency_ms[0][1] = -3"), "{e}");
        let e = invalid(|c| c.nodes[2].addr = c.nodes[1].addr.clone());
        assert!(e.contains("127.0.0.1:7101 is used by more than one node"), "{e}");
        let e = invalid(|c| c.nodes[2].id = 1);
        assert!(e.contains("node id 1 appears more than once"), "{e}");
        let e = invalid(|c| c.max_frame_bytes = 10);
        assert!(e.contains("max_frame_bytes"), "{e}");
        // A frame that a value fits in but that leaves no room for the messages that wrap it.
        let e = invalid(|c| c.max_frame_bytes = c.protocol_config.max_value_bytes + 1);
        assert!(e.contains("raise max_frame_bytes to at least"), "{e}");
        let e = invalid(|c| c.insecure = false);
        assert!(e.contains("no [tls] section") && e.contains("insecure = true"), "{e}");
        let tls = TlsConfig { ca: "ca.pem".into(), cert: "n.pem".into(), key: "n.key".into(), clients: false };
        let e = invalid(|c| c.tls = Some(tls.clone()));
        assert!(e.contains("choose one"), "{e}");
        let e = invalid(|c| (c.insecure, c.tls) = (false, Some(tls)));
        assert!(e.contains("must contain {id}"), "{e}");
        let e = invalid(|c| c.nodes[1].metrics = Some("localhost".into()));
        assert!(e.contains("node 1: metrics = \"localhost\": expected host:port"), "{e}");
        let e = invalid(|c| c.nodes[1].metrics = Some("127.0.0.1:99999".into()));
        assert!(e.contains("not a port number"), "{e}");
        let e = invalid(|c| c.nodes[1].metrics = Some("127.0.0.1:0".into()));
        assert!(e.contains("port 0"), "{e}");
        let e = invalid(|c| c.nodes[1].metrics = Some(":9100".into()));
        assert!(e.contains("host is missing"), "{e}");
        let e = invalid(|c| c.nodes[1].metrics = Some("127.0.0.1:7100".into()));
        assert!(e.contains("another node or listener"), "{e}");
        let e = invalid(|c| {
            c.nodes[0].metrics = Some("127.0.0.1:9100".into());
            c.nodes[2].metrics = Some("127.0.0.1:9100".into());
        });
        assert!(e.contains("node 2: metrics = \"127.0.0.1:9100\""), "{e}");
    }

    #[test]
    fn metrics_addresses_round_trip_and_are_optional() {
        let c = ClusterConfig::parse(GOOD).unwrap();
        assert!(c.nodes.iter().all(|n| n.metrics.is_none()));
        assert!(!toml::to_string(&c).unwrap().contains("metrics"), "an unset field is not written");
        let c = c.with_metrics_ports(9100).unwrap();
        assert_eq!(c.nodes[2].metrics.as_deref(), Some("127.0.0.1:9102"));
        let back = ClusterConfig::parse(&toml::to_string(&c).unwrap()).unwrap();
        assert_eq!(back, c);
        assert!(ClusterConfig::parse(GOOD).unwrap().with_metrics_ports(65535).is_err());
    }

    #[test]
    fn certificate_paths_are_relative_to_the_config_file() {
        let path = tmp("tlspaths");
        let text = GOOD.replace("insecure = true\n", "")
            + "[tls]\nca = \"tls/ca.pem\"\ncert = \"/abs/node-{id}.pem\"\nkey = \"tls/node-{id}.key\"\n";
        std::fs::write(&path, text).unwrap();
        let c = ClusterConfig::load(&path).unwrap();
        let dir = path.parent().unwrap();
        let tls = c.tls.unwrap();
        assert_eq!(tls.ca, dir.join("tls/ca.pem"));
        assert_eq!(tls.cert, "/abs/node-{id}.pem");
        assert_eq!(tls.key, dir.join("tls/node-{id}.key").display().to_string());
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn ports_past_65535_are_an_error_not_a_panic() {
        let e = ClusterConfig::local_replicated("cv", Topology::new(1, 2), 65535).unwrap_err().to_string();
        assert!(e.contains("base port 65535 leaves no room for 2 nodes"), "{e}");
        assert!(ClusterConfig::local_replicated("cv", Topology::new(1, 2), 0).is_err());
        assert!(ClusterConfig::local_replicated("cv", Topology::new(1, 2), 65534).is_ok());
    }
}
