//! Workload generators: which operation a closed-loop client issues next.

use rand::Rng;
use rand::rngs::SmallRng;
use snowline_core::{Key, Request, Topology, Value};
use std::sync::Arc;

/// Chooses key indices in `0..n`: Zipfian with skew `z` (`z = 0` is uniform), by inverting a precomputed
/// CDF (exact, O(log n) per draw, shared by all clients).
#[derive(Clone, Debug)]
pub struct Zipf {
    cdf: Arc<Vec<f64>>,
    /// `z = 0`: every index is as likely, and a draw needs no search.
    uniform: bool,
}

/// Up to this many distinct keys are drawn by scanning those drawn so far.
const SCAN_DISTINCT: usize = 16;

impl Zipf {
    pub fn new(n: usize, z: f64) -> Self {
        assert!(n > 0, "a key space needs at least one key");
        assert!(z >= 0.0, "zipf skew must be non-negative");
        let mut cdf = Vec::with_capacity(n);
        let mut sum = 0.0;
        for i in 0..n {
            sum += 1.0 / ((i + 1) as f64).powf(z);
            cdf.push(sum);
        }
        for c in &mut cdf {
            *c /= sum;
        }
        Self { cdf: Arc::new(cdf), uniform: z == 0.0 }
    }

    pub fn len(&self) -> usize {
        self.cdf.len()
    }

    pub fn is_empty(&self) -> bool {
        self.cdf.is_empty()
    }

    /// A key index; 0 is the most popular.
    pub fn sample(&self, rng: &mut SmallRng) -> usize {
        let u: f64 = rng.random();
        let n = self.cdf.len();
        if self.uniform {
            // The index the search below finds, without searching: cdf[i] is (i + 1) / n.
            return ((u * n as f64).ceil() as usize).saturating_sub(1).min(n - 1);
        }
        self.cdf.partition_point(|c| *c < u).min(n - 1)
    }

    /// Probability of index `i` (for tests).
    pub fn probability(&self, i: usize) -> f64 {
        self.cdf[i] - if i == 0 { 0.0 } else { self.cdf[i - 1] }
    }
}

/// Chooses key indices in `0..n` with a hot spot: `hot_ops` of the draws go uniformly to the first
/// `hot_keys · n` keys, the rest uniformly to the others (Tomsic §5.2: "80% of the operations are directed to
/// 20% of the keys" is `HotSpot::new(n, 0.2, 0.8)`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct HotSpot {
    n: usize,
    hot: usize,
    hot_ops: f64,
}

impl HotSpot {
    pub fn new(n: usize, hot_keys: f64, hot_ops: f64) -> Self {
        assert!(n > 0, "a key space needs at least one key");
        assert!((0.0..=1.0).contains(&hot_keys) && (0.0..=1.0).contains(&hot_ops), "shares are in [0, 1]");
        let hot = ((n as f64 * hot_keys).round() as usize).clamp(1, n);
        Self { n, hot, hot_ops }
    }

    /// The number of hot keys (indices `0..hot_keys()`).
    pub fn hot_keys(&self) -> usize {
        self.hot
    }

    pub fn sample(&self, rng: &mut SmallRng) -> usize {
        if self.hot == self.n || rng.random::<f64>() < self.hot_ops {
            rng.random_range(0..self.hot)
        } else {
            rng.random_range(self.hot..self.n)
        }
    }
}

/// The operation pattern of a workload. Its parameters live in [`MixedWorkload`]; each variant's doc says which
/// fields it reads.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Pattern {
    /// GETs, multi-key ROTs, PUTs and multi-key updates in the proportions of `mix`, keys Zipfian (`zipf`)
    /// over `keys`.
    #[default]
    Mixed,
    /// The photo/ACL pattern (Contrarian Fig. 1, SNOW Fig. 3) over `albums` albums: every client cycles
    /// through "PUT the ACL of album a", "PUT a photo into album a" (session order makes the photo depend on
    /// the ACL) and "ROT {ACL, photo} of a random album b". A protocol without causal snapshots lets a ROT see
    /// the new photo with the old ACL.
    PhotoAcl { albums: usize },
    /// Contrarian §5.1, Table 1: each operation is a ROT or a PUT. A ROT reads one key on each of
    /// `partitions_per_rot` distinct partitions chosen uniformly at random; within a partition the key is
    /// Zipfian (`zipf`) over `keys_per_partition` keys. A PUT writes one key: a uniformly random partition, a
    /// Zipfian key on it. `write_ratio` is the paper's w = #PUT / (#PUT + #individual reads), where a ROT of p
    /// keys counts as p reads, so an operation is a PUT with probability w·p / (1 − w + w·p).
    Contrarian,
    /// SNOW §6.1 (Eiger's dynamic workload): an operation is a write with probability `write_ratio`, otherwise
    /// a ROT of `rot_keys` distinct keys; keys Zipfian (`zipf`) over `keys`. A key has `columns` columns of
    /// `value_bytes` each, modelled as one value: the columns concatenated. A write of `rot_keys` keys is that
    /// many independent single-key PUTs, issued one after another in the client's session (the paper sends
    /// them in parallel; a snowline session runs one operation at a time).
    Eiger,
    /// Tomsic §5.3.2 (single-shot ROTs): every client loops a ROT of `rot_keys` (100) distinct keys read in
    /// parallel, then a blind update transaction over the first `update_keys` (2, 10 or 100) of the keys it
    /// read. Keys are chosen 80/20 ([`HotSpot`]: 80% of accesses to 20% of `keys`). Protocols without write
    /// transactions PUT the first of those keys instead.
    TomsicSingle,
    /// Tomsic §5.3.3 (multi-shot ROTs): like `TomsicSingle`, but the read-only transaction reads its keys in
    /// `rounds` rounds of `rot_keys` (10 rounds of 100: 1,000 reads) over one snapshot, each round issued when
    /// the previous one has answered; updates of 2, 100 or 1,000 of the keys read. Needs a protocol with
    /// multi-shot read-only transactions (Cure, AV, OP, CV).
    TomsicMulti { rounds: usize },
    /// The NMSI paper's transactional YCSB (§V, Fig. 2b), run as interactive read-write transactions: a
    /// transaction is an update with probability `write_ratio` (the paper sweeps 10–50%), otherwise read-only.
    /// The shape (reads and writes per transaction, key distribution) is the workload's `ycsb` field; `mix`
    /// names the preset it started from. Mix A: keys Zipfian (`zipf`), read-only 4 reads, update 2 reads + 2
    /// writes; B: uniform, 4 reads / 3 reads + 1 write; C: uniform, 2 reads / 1 read + 1 write. Reads are
    /// issued one per round, as YCSB's
    /// client issues its operations one after another. An update writes the first keys it read
    /// (read-modify-write, YCSB's update of a record it read), so its writes depend on its reads and lost
    /// updates are observable. Keys are distinct within a transaction, over `keys` keys.
    YcsbT { mix: YcsbMix },
    /// Single-key operations, as YCSB's core workloads run them against a key-value store (etcd, TiKV,
    /// redis): each operation is a PUT with probability `write_ratio` (default 0.5, YCSB's workload A;
    /// 0.05 is B, 0 is C), otherwise a GET; keys Zipfian (`zipf`, YCSB's 0.99) over `keys`. What a
    /// linearizable store such as `raft-kv` serves.
    Kv,
    /// TPC-C's five transactions as stored procedures over a loaded database, audited after the run
    /// (`crate::tpcc`; parameters in `tpcc`).
    Tpcc,
    /// The 2PC bound's check (`snowline bound 2pc --run`): every client loops one blind update transaction
    /// writing the hot key (on partition `participants − 1`, never the coordinator's: `hot_item`) and one key
    /// of its own on each of the `participants − 1` partitions below (`keys_per_partition` must exceed the
    /// clients), so
    /// every transaction conflicts with every other on one item and commits among `participants`
    /// partitions. Needs `participants` ≤ the partitions. With `read_modify_write` the transaction reads the
    /// hot item first (the `rw` procedure: a counter's increment), so a locking protocol holds the hot lock
    /// from its read through the commit.
    HotItem { participants: usize, read_modify_write: bool },
}

/// The three transactional YCSB mixes of the NMSI paper (§V, Fig. 2b).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum YcsbMix {
    #[default]
    A,
    B,
    C,
}

impl YcsbMix {
    /// The mix's transaction shape: A (Zipfian; 4 reads / 2 reads + 2 writes), B (uniform; 4 reads / 3 reads
    /// + 1 write), C (uniform; 2 reads / 1 read + 1 write).
    pub fn shape(self) -> YcsbShape {
        let (ro_reads, update_reads, update_writes, key_dist) = match self {
            YcsbMix::A => (4, 2, 2, KeyDist::Zipfian),
            YcsbMix::B => (4, 3, 1, KeyDist::Uniform),
            YcsbMix::C => (2, 1, 1, KeyDist::Uniform),
        };
        YcsbShape { ro_reads, update_reads, update_writes, key_dist }
    }
}

/// The shape of ycsb-t's transactions: a mix's preset ([`YcsbMix::shape`]), or set field by field
/// (`--ro-reads`, `--update-reads`, `--update-writes`, `--key-dist`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct YcsbShape {
    /// Reads of a read-only transaction.
    pub ro_reads: usize,
    /// Reads of an update transaction.
    pub update_reads: usize,
    /// How many of the keys an update read it then writes (read-modify-writes): at most `update_reads`.
    pub update_writes: usize,
    /// How keys are picked: uniformly, or Zipfian with the workload's `zipf` constant.
    pub key_dist: KeyDist,
}

impl Default for YcsbShape {
    fn default() -> Self {
        YcsbMix::default().shape()
    }
}

impl YcsbShape {
    /// Reject a shape no transaction can have over `keys` keys.
    pub fn validate(&self, keys: usize) -> Result<(), String> {
        if self.ro_reads == 0 {
            return Err("ycsb-t: reads per read-only transaction (--ro-reads) must be at least 1".into());
        }
        if self.update_reads == 0 {
            return Err("ycsb-t: reads per update transaction (--update-reads) must be at least 1".into());
        }
        if self.update_writes == 0 || self.update_writes > self.update_reads {
            return Err(format!(
                "ycsb-t: an update writes keys it read, so --update-writes must be between 1 and --update-reads \
                 ({}), not {}",
                self.update_reads, self.update_writes
            ));
        }
        let most = self.ro_reads.max(self.update_reads);
        if most > keys {
            return Err(format!(
                "ycsb-t reads {most} distinct keys per transaction (--ro-reads {}, --update-reads {}); --keys ({keys}) \
                 must be at least that",
                self.ro_reads, self.update_reads
            ));
        }
        Ok(())
    }
}

/// How a workload picks keys (ycsb-t's `--key-dist`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum KeyDist {
    /// Every key equally likely.
    Uniform,
    /// Zipfian with the workload's constant (`--zipf`).
    #[default]
    Zipfian,
}

impl std::str::FromStr for KeyDist {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "uniform" => Ok(KeyDist::Uniform),
            "zipfian" | "zipf" => Ok(KeyDist::Zipfian),
            other => Err(format!("unknown key distribution {other:?}; use uniform or zipfian")),
        }
    }
}

impl std::fmt::Display for KeyDist {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            KeyDist::Uniform => "uniform",
            KeyDist::Zipfian => "zipfian",
        })
    }
}

impl std::str::FromStr for YcsbMix {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "a" => Ok(YcsbMix::A),
            "b" => Ok(YcsbMix::B),
            "c" => Ok(YcsbMix::C),
            other => Err(format!("unknown YCSB mix {other:?}; valid mixes: a, b, c")),
        }
    }
}

/// What a closed-loop client does next: one request, an interactive transaction, or a stored procedure
/// call retried on abort.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Job {
    Op(Request),
    Txn(TxnPlan),
    Call(CallJob),
}

/// A stored-procedure call. With `token`, `args[0]` is replaced by a token unique to each attempt (the
/// procedure tags its written values with it, keeping them unique in the history).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CallJob {
    pub procedure: &'static str,
    pub args: Vec<Value>,
    pub token: bool,
}

/// An interactive transaction: `Begin`, one `Read` per round, then `Commit` writing `writes` (each key gets a
/// fresh unique value per attempt, so a retried transaction's values stay unique in the history).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TxnPlan {
    pub rounds: Vec<Vec<Key>>,
    pub writes: Vec<Key>,
}

impl Pattern {
    /// Every pattern's name, as `--workload` takes it.
    pub const NAMES: &'static [&'static str] = &[
        "mixed",
        "photo-acl",
        "contrarian",
        "eiger",
        "tomsic-single",
        "tomsic-multi",
        "ycsb-t",
        "kv",
        "tpcc",
        "hot-item",
    ];

    /// A request of the kind this pattern needs that not every protocol offers (checked up front): every
    /// pattern but the transactional ones writes blindly (PUTs).
    pub fn needs(&self) -> Option<Request> {
        match self {
            Pattern::TomsicMulti { .. } => Some(Request::RotRounds { rounds: vec![] }),
            Pattern::YcsbT { .. } => Some(Request::Begin),
            Pattern::Tpcc => Some(Request::Call { procedure: "tpcc-new-order".into(), args: Vec::new() }),
            Pattern::HotItem { read_modify_write: true, .. } => {
                Some(Request::Call { procedure: "rw".into(), args: Vec::new() })
            }
            Pattern::HotItem { .. } => Some(Request::Update { writes: Vec::new() }),
            _ => Some(Request::Put { key: "k".into(), value: "v".into() }),
        }
    }

    pub fn name(&self) -> &'static str {
        match self {
            Pattern::Mixed => "mixed",
            Pattern::PhotoAcl { .. } => "photo-acl",
            Pattern::Contrarian => "contrarian",
            Pattern::Eiger => "eiger",
            Pattern::TomsicSingle => "tomsic-single",
            Pattern::TomsicMulti { .. } => "tomsic-multi",
            Pattern::YcsbT { .. } => "ycsb-t",
            Pattern::Kv => "kv",
            Pattern::Tpcc => "tpcc",
            Pattern::HotItem { .. } => "hot-item",
        }
    }
}

impl std::str::FromStr for Pattern {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "mixed" => Ok(Pattern::Mixed),
            "photo-acl" => Ok(Pattern::PhotoAcl { albums: 8 }),
            "contrarian" => Ok(Pattern::Contrarian),
            "eiger" => Ok(Pattern::Eiger),
            "tomsic-single" => Ok(Pattern::TomsicSingle),
            "tomsic-multi" => Ok(Pattern::TomsicMulti { rounds: 10 }),
            "ycsb-t" => Ok(Pattern::YcsbT { mix: YcsbMix::A }),
            "kv" => Ok(Pattern::Kv),
            "tpcc" => Ok(Pattern::Tpcc),
            "hot-item" => Ok(Pattern::HotItem { participants: 2, read_modify_write: false }),
            other => Err(format!("unknown workload {other:?}; valid workloads: {}", Pattern::NAMES.join(", "))),
        }
    }
}

/// The workload of `snowline sim` / `bench` / `demo` / `reproduce`: a [`Pattern`] and its parameters. By
/// default GETs, multi-key ROTs, PUTs and multi-key update transactions over a Zipfian key space.
#[derive(Clone, Debug, PartialEq)]
pub struct MixedWorkload {
    pub pattern: Pattern,
    /// Size of the key space (mixed, eiger, tomsic-single).
    pub keys: usize,
    pub zipf: f64,
    /// Keys per multi-key ROT (mixed; eiger: keys per operation; tomsic-single: reads per ROT).
    pub rot_keys: usize,
    /// Keys per update transaction (mixed; tomsic-single: keys updated after each ROT).
    pub update_keys: usize,
    /// Value size in bytes (values are padded up to it; a unique value longer than it is not cut). Eiger: the
    /// size of one column.
    pub value_bytes: usize,
    /// Fractions of GET, ROT, PUT and UPDATE operations (mixed); they need not sum to one (they are weights).
    pub mix: [f64; 4],
    /// Contrarian: w = #PUT / (#PUT + #individual reads); eiger: the share of operations that are writes.
    pub write_ratio: f64,
    /// Contrarian: p, the partitions one ROT reads (one key on each).
    pub partitions_per_rot: usize,
    /// Contrarian: keys stored per partition (the paper: 1M).
    pub keys_per_partition: usize,
    /// Eiger: columns per key.
    pub columns: usize,
    /// TPC-C: the set-up, scale and options.
    pub tpcc: crate::tpcc::TpccSpec,
    /// ycsb-t: the transactions' shape (reads and writes per transaction, key distribution); `write_ratio` is
    /// the share of update transactions.
    pub ycsb: YcsbShape,
}

impl Default for MixedWorkload {
    fn default() -> Self {
        Self {
            pattern: Pattern::Mixed,
            keys: 1000,
            zipf: 0.8,
            rot_keys: 4,
            update_keys: 3,
            value_bytes: 16,
            mix: [0.45, 0.35, 0.15, 0.05],
            write_ratio: 0.05,
            partitions_per_rot: 4,
            keys_per_partition: 10_000,
            columns: 5,
            tpcc: crate::tpcc::TpccSpec::default(),
            ycsb: YcsbShape::default(),
        }
    }
}

impl MixedWorkload {
    /// Contrarian Table 1's default workload: w = 0.05, p = 4, b = 8, z = 0.99.
    pub fn contrarian() -> Self {
        Self {
            pattern: Pattern::Contrarian,
            write_ratio: 0.05,
            partitions_per_rot: 4,
            value_bytes: 8,
            zipf: 0.99,
            ..Self::default()
        }
    }

    /// SNOW §6.1's default (Eiger's): 5 keys per operation, write fraction 0.1, Zipf 0.8, 128-byte values,
    /// 5 columns per key.
    pub fn eiger() -> Self {
        Self {
            pattern: Pattern::Eiger,
            rot_keys: 5,
            write_ratio: 0.1,
            zipf: 0.8,
            value_bytes: 128,
            columns: 5,
            keys: 100_000,
            ..Self::default()
        }
    }

    /// Tomsic §5.3.2: ROTs of 100 reads, then an update of `update_keys` of them; 80/20 key choice; 100-byte
    /// values.
    pub fn tomsic_single(update_keys: usize) -> Self {
        Self {
            pattern: Pattern::TomsicSingle,
            rot_keys: 100,
            update_keys,
            value_bytes: 100,
            keys: 100_000,
            ..Self::default()
        }
    }

    /// Tomsic §5.3.3: ROTs of 10 rounds of 100 reads, then an update of `update_keys` of the keys read;
    /// 80/20 key choice; 100-byte values.
    pub fn tomsic_multi(update_keys: usize) -> Self {
        Self { pattern: Pattern::TomsicMulti { rounds: 10 }, ..Self::tomsic_single(update_keys) }
    }

    /// The NMSI paper's transactional YCSB (§V): mix `mix`'s shape ([`YcsbMix::shape`], the preset: set
    /// `ycsb` to change it), 20% update transactions (the paper sweeps 10–50%), Zipf 0.99 (YCSB's constant)
    /// where keys are Zipfian, 1 KB values ("each object has a payload size of 1 KB").
    pub fn ycsb_t(mix: YcsbMix) -> Self {
        Self {
            pattern: Pattern::YcsbT { mix },
            write_ratio: 0.2,
            zipf: 0.99,
            value_bytes: 1024,
            ycsb: mix.shape(),
            ..Self::default()
        }
    }

    /// Single-key GETs and PUTs (YCSB workload A by default: half PUTs; Zipf 0.99).
    pub fn kv() -> Self {
        Self { pattern: Pattern::Kv, write_ratio: 0.5, zipf: 0.99, ..Self::default() }
    }

    /// Reject parameters the pattern cannot use.
    pub fn validate(&self, topology: Topology) -> Result<(), String> {
        if !(self.zipf >= 0.0 && self.zipf.is_finite()) {
            return Err("the zipf constant must be a non-negative number".into());
        }
        if self.keys == 0 {
            return Err("the key space needs at least one key".into());
        }
        match self.pattern {
            Pattern::Contrarian => {
                if !(0.0..1.0).contains(&self.write_ratio) {
                    return Err(format!("the write ratio must be in [0, 1), not {}", self.write_ratio));
                }
                if self.partitions_per_rot == 0 || self.partitions_per_rot > usize::from(topology.partitions) {
                    return Err(format!(
                        "partitions per ROT must be between 1 and the number of partitions ({}), not {}",
                        topology.partitions, self.partitions_per_rot
                    ));
                }
                if self.keys_per_partition == 0 {
                    return Err("keys per partition must be at least 1".into());
                }
            }
            Pattern::Eiger => {
                if !(0.0..=1.0).contains(&self.write_ratio) {
                    return Err(format!("the write fraction must be in [0, 1], not {}", self.write_ratio));
                }
                if self.rot_keys == 0 || self.rot_keys > self.keys || self.columns == 0 {
                    return Err(
                        "keys per operation must be between 1 and the number of keys; columns at least 1".into()
                    );
                }
            }
            Pattern::TomsicSingle => {
                if self.rot_keys == 0
                    || self.rot_keys > self.keys
                    || self.update_keys == 0
                    || self.update_keys > self.rot_keys
                {
                    return Err(format!(
                        "tomsic-single needs 1 <= update keys ({}) <= reads per ROT ({}) <= keys ({})",
                        self.update_keys, self.rot_keys, self.keys
                    ));
                }
            }
            Pattern::TomsicMulti { rounds } => {
                let reads = self.rot_keys * rounds;
                if rounds == 0
                    || self.rot_keys == 0
                    || reads > self.keys
                    || self.update_keys == 0
                    || self.update_keys > reads
                {
                    return Err(format!(
                        "tomsic-multi needs 1 <= update keys ({}) <= reads per ROT ({rounds} rounds × {}) <= keys ({})",
                        self.update_keys, self.rot_keys, self.keys
                    ));
                }
            }
            Pattern::YcsbT { .. } => {
                if !(0.0..=1.0).contains(&self.write_ratio) {
                    return Err(format!("the update ratio must be in [0, 1], not {}", self.write_ratio));
                }
                self.ycsb.validate(self.keys)?;
            }
            Pattern::Kv => {
                if !(0.0..=1.0).contains(&self.write_ratio) {
                    return Err(format!("the write ratio must be in [0, 1], not {}", self.write_ratio));
                }
            }
            Pattern::Tpcc => self.tpcc.validate()?,
            Pattern::HotItem { participants, .. } => {
                if participants == 0 || participants > usize::from(topology.partitions) {
                    return Err(format!(
                        "hot-item needs 1 <= participants <= the partitions ({}), not {participants}",
                        topology.partitions
                    ));
                }
            }
            Pattern::Mixed | Pattern::PhotoAcl { .. } => {}
        }
        Ok(())
    }
}

/// How a generator picks keys.
#[derive(Clone, Debug)]
enum KeySpace {
    /// `keys[zipf.sample()]`.
    Zipf { zipf: Zipf, keys: Arc<Vec<Key>> },
    /// Tomsic's 80/20; key names are formatted on demand (the key space may hold millions).
    HotSpot(HotSpot),
    /// Contrarian: per partition, the keys that live there (by the topology's hash), Zipfian within it.
    PerPartition { zipf: Zipf, by_partition: Arc<Vec<Vec<Key>>> },
}

/// A client's generator: a workload plus the state that makes its written values unique.
#[derive(Clone, Debug)]
pub struct Generator {
    spec: MixedWorkload,
    /// Whether to issue multi-key updates; without them (protocols lacking write transactions) the update
    /// share becomes single-key PUTs.
    write_transactions: bool,
    /// Whether the protocol takes blind writes; without them (the Jessy family's certifying criteria) every
    /// PUT and update is issued as an interactive transaction that reads the keys it writes in one round, then
    /// writes them (`Begin`, `Read`, `Commit`): a read-modify-write, since a certifying criterion without
    /// sessions (NMSI) takes a write over an empty snapshot for a conflict with every earlier write of its keys.
    blind_writes: bool,
    keys: KeySpace,
    /// TPC-C's terminals (the tpcc pattern).
    tpcc: Option<Arc<crate::tpcc::TpccGenerator>>,
}

impl Generator {
    /// A generator for `spec` over `topology` (contrarian places keys on partitions with the topology's hash).
    pub fn new(spec: MixedWorkload, topology: Topology) -> Self {
        let keys = match spec.pattern {
            Pattern::TomsicSingle | Pattern::TomsicMulti { .. } => KeySpace::HotSpot(HotSpot::new(spec.keys, 0.2, 0.8)),
            Pattern::Contrarian | Pattern::HotItem { .. } => {
                let per = spec.keys_per_partition.max(1);
                let parts = usize::from(topology.partitions);
                let mut by_partition: Vec<Vec<Key>> = vec![Vec::with_capacity(per); parts];
                let mut filled = 0;
                let mut n = 0u64;
                while filled < parts {
                    let name = format!("k{n}");
                    n += 1;
                    let bucket = &mut by_partition[usize::from(topology.partition_of(&name))];
                    if bucket.len() < per {
                        bucket.push(name.into());
                        if bucket.len() == per {
                            filled += 1;
                        }
                    }
                }
                KeySpace::PerPartition { zipf: Zipf::new(per, spec.zipf), by_partition: Arc::new(by_partition) }
            }
            Pattern::Tpcc => KeySpace::Zipf { zipf: Zipf::new(1, 0.0), keys: Arc::new(vec![Key::from("k0")]) },
            _ => KeySpace::Zipf {
                // YCSB-T with uniform keys (mixes B and C): a Zipf law of constant 0.
                zipf: Zipf::new(
                    spec.keys,
                    match spec.pattern {
                        Pattern::YcsbT { .. } if spec.ycsb.key_dist == KeyDist::Uniform => 0.0,
                        _ => spec.zipf,
                    },
                ),
                keys: Arc::new((0..spec.keys).map(|i| Key::from(format!("k{i}"))).collect()),
            },
        };
        let tpcc = (spec.pattern == Pattern::Tpcc)
            .then(|| Arc::new(crate::tpcc::TpccGenerator::new(spec.tpcc.shape(topology), spec.tpcc.seed)));
        Self { spec, keys, write_transactions: true, blind_writes: true, tpcc }
    }

    /// Issue PUTs instead of multi-key updates when `enabled` is false.
    pub fn write_transactions(mut self, enabled: bool) -> Self {
        self.write_transactions = enabled;
        self
    }

    /// Issue writes as interactive transactions when `enabled` is false (see the field).
    pub fn blind_writes(mut self, enabled: bool) -> Self {
        self.blind_writes = enabled;
        self
    }

    pub fn spec(&self) -> &MixedWorkload {
        &self.spec
    }

    /// TPC-C's terminals, for the tpcc pattern.
    pub fn tpcc(&self) -> Option<&crate::tpcc::TpccGenerator> {
        self.tpcc.as_deref()
    }

    /// Every key of the key space.
    pub fn keys(&self) -> Vec<Key> {
        match (&self.spec.pattern, &self.keys) {
            (Pattern::PhotoAcl { albums }, _) => {
                (0..(*albums).max(1)).flat_map(|a| [format!("acl{a}").into(), format!("photo{a}").into()]).collect()
            }
            (_, KeySpace::Zipf { keys, .. }) => keys.to_vec(),
            (_, KeySpace::HotSpot(h)) => (0..h.n).map(|i| Key::from(format!("k{i}"))).collect(),
            (_, KeySpace::PerPartition { by_partition, .. }) => by_partition.iter().flatten().cloned().collect(),
        }
    }

    fn photo_acl(&self, rng: &mut SmallRng, albums: usize, writer: u64, seq: u64) -> Request {
        // The album a client updates in this cycle, the same for its ACL write and its photo write.
        let album = (writer.wrapping_mul(31).wrapping_add(seq / 3)) as usize % albums;
        match seq % 3 {
            0 => Request::Put { key: format!("acl{album}").into(), value: self.value(writer, seq, 0) },
            1 => Request::Put { key: format!("photo{album}").into(), value: self.value(writer, seq, 0) },
            _ => {
                let b = rng.random_range(0..albums);
                Request::Rot { keys: vec![format!("acl{b}").into(), format!("photo{b}").into()] }
            }
        }
    }

    fn key(&self, rng: &mut SmallRng) -> Key {
        match &self.keys {
            KeySpace::Zipf { zipf, keys } => keys[zipf.sample(rng)].clone(),
            KeySpace::HotSpot(h) => format!("k{}", h.sample(rng)).into(),
            KeySpace::PerPartition { zipf, by_partition } => {
                let p = rng.random_range(0..by_partition.len());
                by_partition[p][zipf.sample(rng)].clone()
            }
        }
    }

    /// `n` distinct keys.
    fn distinct_keys(&self, rng: &mut SmallRng, n: usize) -> Vec<Key> {
        let n = n.min(self.spec.keys);
        let mut out: Vec<Key> = Vec::with_capacity(n);
        if n <= SCAN_DISTINCT {
            // A transaction's few keys: a scan beats building a set (this runs once per transaction).
            while out.len() < n {
                let k = self.key(rng);
                if !out.contains(&k) {
                    out.push(k);
                }
            }
            return out;
        }
        // A set for membership: multi-shot ROTs draw 1,000 keys, and a linear scan made that quadratic.
        let mut seen = std::collections::BTreeSet::new();
        while out.len() < n {
            let k = self.key(rng);
            if seen.insert(k.clone()) {
                out.push(k);
            }
        }
        out
    }

    /// Contrarian's ROT: one Zipfian key on each of `p` distinct, uniformly chosen partitions.
    fn partition_rot(&self, rng: &mut SmallRng, zipf: &Zipf, by_partition: &[Vec<Key>]) -> Request {
        let p = self.spec.partitions_per_rot.min(by_partition.len());
        let mut parts: Vec<usize> = Vec::with_capacity(p);
        while parts.len() < p {
            let candidate = rng.random_range(0..by_partition.len());
            if !parts.contains(&candidate) {
                parts.push(candidate);
            }
        }
        Request::Rot { keys: parts.into_iter().map(|part| by_partition[part][zipf.sample(rng)].clone()).collect() }
    }

    /// The hot item's transaction: the hot key (the first key of partition `participants − 1`, the highest
    /// participant), and on each of partitions `0..participants − 1` a key of the writer's own (never
    /// another's, so that the hot key is the only conflict). The hot key is on the highest participant so that
    /// a coordinator at the lowest one (2PL's) is another partition: the hot lock is then held across the
    /// vote and the decision, as the bound assumes, rather than granted and released locally.
    fn hot_item(&self, participants: usize, read_modify_write: bool, writer: u64, seq: u64) -> Request {
        let KeySpace::PerPartition { by_partition, .. } = &self.keys else { unreachable!("hot-item keys") };
        let hot = participants.max(1) - 1;
        let mut keys = vec![by_partition[hot][0].clone()];
        for own in by_partition.iter().take(hot) {
            keys.push(own[writer as usize % own.len()].clone());
        }
        if !read_modify_write {
            return self.update(keys, writer, seq);
        }
        // `rw 1 HOT [KEY VALUE]…`: read the hot item, then write it and the own keys.
        let mut args: Vec<Value> = vec![Value::from("1"), keys[0].clone()];
        for (i, k) in keys.into_iter().enumerate() {
            args.extend([k, self.value(writer, seq, i)]);
        }
        Request::Call { procedure: "rw".into(), args }
    }

    /// A value unique in the run: the writer's id, its operation's sequence number and the write's position
    /// in the operation, padded to the value size (eiger: to `columns` × the value size).
    pub fn value(&self, writer: u64, seq: u64, position: usize) -> Value {
        let v = format!("v{writer}-{seq}-{position}");
        let size = match self.spec.pattern {
            Pattern::Eiger => self.spec.value_bytes * self.spec.columns.max(1),
            _ => self.spec.value_bytes,
        };
        // Padded in one step (a byte at a time was a thousand pushes per 1 KB value in the benchmark's client).
        let mut bytes = v.into_bytes();
        bytes.resize(size.max(bytes.len()), b'.');
        String::from_utf8(bytes).expect("ASCII").into()
    }

    /// Probability that a contrarian operation is a PUT, from w and p (see [`Pattern::Contrarian`]).
    pub fn contrarian_put_probability(write_ratio: f64, partitions_per_rot: usize) -> f64 {
        let (w, p) = (write_ratio, partitions_per_rot as f64);
        w * p / (1.0 - w + w * p)
    }

    fn update(&self, keys: Vec<Key>, writer: u64, seq: u64) -> Request {
        // Without blind writes the update becomes an interactive transaction over all its keys (`next_jobs`).
        if self.write_transactions || !self.blind_writes {
            Request::Update {
                writes: keys.into_iter().enumerate().map(|(i, k)| (k, self.value(writer, seq, i))).collect(),
            }
        } else {
            Request::Put { key: keys[0].clone(), value: self.value(writer, seq, 0) }
        }
    }

    /// The next operation of client `writer`, whose `seq`-th request this is: the first request of
    /// [`Generator::next_batch`] (for patterns that issue one request at a time).
    pub fn next(&self, rng: &mut SmallRng, writer: u64, seq: u64) -> Request {
        self.next_batch(rng, writer, seq).swap_remove(0)
    }

    /// The next requests of client `writer`, to be run one after another in its session; `seq` is the
    /// sequence number of the first (the next ones take `seq + 1`, ...). Most patterns return one request;
    /// tomsic-single returns its ROT and the update over keys it read, eiger a write's PUTs.
    pub fn next_batch(&self, rng: &mut SmallRng, writer: u64, seq: u64) -> Vec<Request> {
        match self.spec.pattern {
            Pattern::PhotoAcl { albums } => vec![self.photo_acl(rng, albums.max(1), writer, seq)],
            Pattern::Contrarian => {
                let KeySpace::PerPartition { zipf, by_partition } = &self.keys else { unreachable!("contrarian keys") };
                let put = Self::contrarian_put_probability(self.spec.write_ratio, self.spec.partitions_per_rot);
                if rng.random::<f64>() < put {
                    vec![Request::Put { key: self.key(rng), value: self.value(writer, seq, 0) }]
                } else {
                    vec![self.partition_rot(rng, zipf, by_partition)]
                }
            }
            Pattern::Eiger => {
                if rng.random::<f64>() < self.spec.write_ratio {
                    let keys = self.distinct_keys(rng, self.spec.rot_keys);
                    keys.into_iter()
                        .enumerate()
                        .map(|(i, key)| Request::Put { key, value: self.value(writer, seq + i as u64, 0) })
                        .collect()
                } else {
                    vec![Request::Rot { keys: self.distinct_keys(rng, self.spec.rot_keys) }]
                }
            }
            Pattern::TomsicSingle => {
                let keys = self.distinct_keys(rng, self.spec.rot_keys);
                let written: Vec<Key> = keys.iter().take(self.spec.update_keys).cloned().collect();
                vec![Request::Rot { keys }, self.update(written, writer, seq + 1)]
            }
            Pattern::TomsicMulti { rounds } => {
                let keys = self.distinct_keys(rng, self.spec.rot_keys * rounds.max(1));
                let written: Vec<Key> = keys.iter().take(self.spec.update_keys).cloned().collect();
                let rounds = keys.chunks(self.spec.rot_keys.max(1)).map(<[Key]>::to_vec).collect();
                vec![Request::RotRounds { rounds }, self.update(written, writer, seq + 1)]
            }
            Pattern::Mixed => vec![self.mixed(rng, writer, seq)],
            Pattern::Kv => {
                let key = self.key(rng);
                if rng.random::<f64>() < self.spec.write_ratio {
                    vec![Request::Put { key, value: self.value(writer, seq, 0) }]
                } else {
                    vec![Request::Rot { keys: vec![key] }]
                }
            }
            Pattern::HotItem { participants, read_modify_write } => {
                vec![self.hot_item(participants, read_modify_write, writer, seq)]
            }
            Pattern::YcsbT { .. } | Pattern::Tpcc => unreachable!("transactions: Generator::next_jobs"),
        }
    }

    /// The next jobs of client `writer` (see [`Generator::next_batch`]): requests, or for ycsb-t one
    /// interactive transaction, or for tpcc the calls of client number `client` (its home district).
    pub fn next_jobs(&self, rng: &mut SmallRng, client: usize, writer: u64, seq: u64) -> Vec<Job> {
        if let Some(tpcc) = &self.tpcc {
            return tpcc.next_jobs(rng, client, seq + 1);
        }
        match self.spec.pattern {
            Pattern::YcsbT { .. } => {
                let shape = self.spec.ycsb;
                let update = rng.random::<f64>() < self.spec.write_ratio;
                let keys = self.distinct_keys(rng, if update { shape.update_reads } else { shape.ro_reads });
                let writes = if update { keys.iter().take(shape.update_writes).cloned().collect() } else { Vec::new() };
                vec![Job::Txn(TxnPlan { rounds: keys.into_iter().map(|k| vec![k]).collect(), writes })]
            }
            _ => self
                .next_batch(rng, writer, seq)
                .into_iter()
                .map(|request| match request {
                    Request::Put { .. } | Request::Update { .. } if !self.blind_writes => {
                        let keys: Vec<Key> = request.writes().into_iter().map(|(k, _)| k).collect();
                        Job::Txn(TxnPlan { rounds: vec![keys.clone()], writes: keys })
                    }
                    request => Job::Op(request),
                })
                .collect(),
        }
    }

    fn mixed(&self, rng: &mut SmallRng, writer: u64, seq: u64) -> Request {
        let total: f64 = self.spec.mix.iter().sum();
        let mut u = rng.random::<f64>() * total;
        let mut choice = 3;
        for (i, w) in self.spec.mix.iter().enumerate() {
            if u < *w {
                choice = i;
                break;
            }
            u -= w;
        }
        match choice {
            0 => Request::Rot { keys: vec![self.key(rng)] },
            1 => Request::Rot { keys: self.distinct_keys(rng, self.spec.rot_keys) },
            2 => Request::Put { key: self.key(rng), value: self.value(writer, seq, 0) },
            _ => self.update(self.distinct_keys(rng, self.spec.update_keys), writer, seq),
        }
    }
}

#[cfg(test)]
mod tests;
