//! Workload generators: which operation a closed-loop client issues next.

use rand::Rng;
use rand::rngs::SmallRng;
use snowline_core::{Key, Request, Value};
use std::sync::Arc;

/// Chooses key indices in `0..n`: Zipfian with skew `z` (`z = 0` is uniform), by inverting a precomputed
/// CDF (exact, O(log n) per draw, shared by all clients).
#[derive(Clone, Debug)]
pub struct Zipf {
    cdf: Arc<Vec<f64>>,
}

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
        Self { cdf: Arc::new(cdf) }
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
        self.cdf.partition_point(|c| *c < u).min(self.cdf.len() - 1)
    }

    /// Probability of index `i` (for tests).
    pub fn probability(&self, i: usize) -> f64 {
        self.cdf[i] - if i == 0 { 0.0 } else { self.cdf[i - 1] }
    }
}

/// The operation pattern of a workload.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Pattern {
    /// GETs, multi-key ROTs, PUTs and multi-key updates in the proportions of `mix`.
    #[default]
    Mixed,
    /// The photo/ACL pattern (Contrarian Fig. 1, SNOW Fig. 3) over `albums` albums: every client cycles
    /// through "PUT the ACL of album a", "PUT a photo into album a" (session order makes the photo depend on
    /// the ACL) and "ROT {ACL, photo} of a random album b". A protocol without causal snapshots lets a ROT see
    /// the new photo with the old ACL.
    PhotoAcl { albums: usize },
}

impl std::str::FromStr for Pattern {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "mixed" => Ok(Pattern::Mixed),
            "photo-acl" => Ok(Pattern::PhotoAcl { albums: 8 }),
            other => Err(format!("unknown workload {other:?}; valid workloads: mixed, photo-acl")),
        }
    }
}

/// The workload of `snowline sim` / `bench` / `demo`: by default GETs, multi-key ROTs, PUTs and multi-key
/// update transactions over a Zipfian key space.
#[derive(Clone, Debug)]
pub struct MixedWorkload {
    pub pattern: Pattern,
    pub keys: usize,
    pub zipf: f64,
    /// Keys per multi-key ROT.
    pub rot_keys: usize,
    /// Keys per update transaction.
    pub update_keys: usize,
    /// Value size in bytes (values are padded up to it; a unique value longer than it is not cut).
    pub value_bytes: usize,
    /// Fractions of GET, ROT, PUT and UPDATE operations; they need not sum to one (they are weights).
    pub mix: [f64; 4],
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
        }
    }
}

/// A client's generator: a workload plus the state that makes its written values unique.
#[derive(Clone, Debug)]
pub struct Generator {
    spec: MixedWorkload,
    /// Whether to issue multi-key updates; without them (protocols lacking write transactions) the update
    /// share becomes single-key PUTs.
    write_transactions: bool,
    zipf: Zipf,
    keys: Arc<Vec<Key>>,
}

impl Generator {
    pub fn new(spec: MixedWorkload) -> Self {
        let zipf = Zipf::new(spec.keys, spec.zipf);
        let keys = Arc::new((0..spec.keys).map(|i| Key::from(format!("k{i}"))).collect());
        Self { spec, zipf, keys, write_transactions: true }
    }

    /// Issue PUTs instead of multi-key updates when `enabled` is false.
    pub fn write_transactions(mut self, enabled: bool) -> Self {
        self.write_transactions = enabled;
        self
    }

    /// Every key of the key space.
    pub fn keys(&self) -> Vec<Key> {
        match self.spec.pattern {
            Pattern::Mixed => self.keys.to_vec(),
            Pattern::PhotoAcl { albums } => {
                (0..albums.max(1)).flat_map(|a| [format!("acl{a}").into(), format!("photo{a}").into()]).collect()
            }
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
        self.keys[self.zipf.sample(rng)].clone()
    }

    /// `n` distinct keys.
    fn distinct_keys(&self, rng: &mut SmallRng, n: usize) -> Vec<Key> {
        let n = n.min(self.keys.len());
        let mut out: Vec<Key> = Vec::with_capacity(n);
        while out.len() < n {
            let k = self.key(rng);
            if !out.contains(&k) {
                out.push(k);
            }
        }
        out
    }

    /// A value unique in the run: the writer's id, its operation's sequence number and the write's position
    /// in the operation, padded to the value size.
    pub fn value(&self, writer: u64, seq: u64, position: usize) -> Value {
        let mut v = format!("v{writer}-{seq}-{position}");
        while v.len() < self.spec.value_bytes {
            v.push('.');
        }
        v.into()
    }

    /// The next operation of client `writer`, whose `seq`-th operation this is.
    pub fn next(&self, rng: &mut SmallRng, writer: u64, seq: u64) -> Request {
        if let Pattern::PhotoAcl { albums } = self.spec.pattern {
            return self.photo_acl(rng, albums.max(1), writer, seq);
        }
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
            _ if !self.write_transactions => Request::Put { key: self.key(rng), value: self.value(writer, seq, 0) },
            _ => {
                let keys = self.distinct_keys(rng, self.spec.update_keys);
                Request::Update {
                    writes: keys.into_iter().enumerate().map(|(i, k)| (k, self.value(writer, seq, i))).collect(),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn zipf_frequencies_follow_the_law() {
        let z = Zipf::new(100, 0.99);
        let mut rng = SmallRng::seed_from_u64(3);
        let mut counts = vec![0u32; 100];
        let n = 200_000;
        for _ in 0..n {
            counts[z.sample(&mut rng)] += 1;
        }
        for i in [0, 1, 9, 99] {
            let expected = z.probability(i) * n as f64;
            let got = counts[i] as f64;
            assert!((got - expected).abs() < 5.0 * expected.sqrt() + 5.0, "index {i}: {got} vs {expected}");
        }
        // The law itself: p(1)/p(10) = 10^z.
        assert!((z.probability(0) / z.probability(9) - 10f64.powf(0.99)).abs() < 1e-9);
    }

    #[test]
    fn photo_acl_cycles_acl_then_photo_then_a_read() {
        let g = Generator::new(MixedWorkload { pattern: Pattern::PhotoAcl { albums: 4 }, ..Default::default() });
        let mut rng = SmallRng::seed_from_u64(1);
        let ops: Vec<Request> = (0..6).map(|seq| g.next(&mut rng, 5, seq)).collect();
        let key = |r: &Request| match r {
            Request::Put { key, .. } => key.to_string(),
            Request::Rot { keys } => format!("{}+{}", keys[0], keys[1]),
            Request::Update { .. } => unreachable!(),
        };
        let album = |k: &str| k.trim_start_matches(char::is_alphabetic).to_string();
        assert!(key(&ops[0]).starts_with("acl") && key(&ops[1]).starts_with("photo"));
        assert_eq!(album(&key(&ops[0])), album(&key(&ops[1])), "the photo goes to the album whose ACL was set");
        assert!(key(&ops[2]).starts_with("acl") && key(&ops[2]).contains("+photo"));
        assert!(key(&ops[3]).starts_with("acl"));
        assert_eq!(g.keys().len(), 8);
    }

    #[test]
    fn zero_skew_is_uniform() {
        let z = Zipf::new(10, 0.0);
        for i in 0..10 {
            assert!((z.probability(i) - 0.1).abs() < 1e-12);
        }
    }

    #[test]
    fn mix_and_uniqueness() {
        let g = Generator::new(MixedWorkload::default());
        let mut rng = SmallRng::seed_from_u64(1);
        let mut kinds = std::collections::BTreeMap::new();
        let mut values = std::collections::BTreeSet::new();
        for seq in 0..20_000 {
            let r = g.next(&mut rng, 7, seq);
            *kinds.entry(r.kind()).or_insert(0u32) += 1;
            for (_, v) in r.writes() {
                assert!(values.insert(v.clone()), "value {v} written twice");
                assert!(v.len() >= 16);
            }
            if let Request::Rot { keys } = &r {
                let mut d = keys.clone();
                d.sort();
                d.dedup();
                assert_eq!(d.len(), keys.len(), "ROT keys are distinct");
            }
        }
        let share = |k: &str| f64::from(kinds[k]) / 20_000.0;
        assert!((share("get") - 0.45).abs() < 0.02, "{kinds:?}");
        assert!((share("rot") - 0.35).abs() < 0.02, "{kinds:?}");
        assert!((share("put") - 0.15).abs() < 0.02, "{kinds:?}");
        assert!((share("update") - 0.05).abs() < 0.01, "{kinds:?}");

        // Without write transactions the update share becomes PUTs.
        let g = g.write_transactions(false);
        let puts = (0..20_000).filter(|seq| g.next(&mut rng, 8, *seq).kind() == "put").count();
        assert!((puts as f64 / 20_000.0 - 0.20).abs() < 0.02, "{puts}");
    }
}
