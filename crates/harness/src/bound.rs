//! The two-phase-commit throughput bound of the coordination-avoidance paper (§6.1, Fig. 3), by seeded Monte
//! Carlo.
//!
//! Conflicting transactions on one item commit one after another, so the item's throughput is at most one
//! commit per commit latency. With perfect pipelining, no aborts and nothing but network delay counted (the
//! seed's assumptions), a commit among N participants takes:
//!
//! - **coordinated 2PC** (C-2PC): two waves of N round trips from the coordinator, `max_i d_i + max_i d'_i`;
//! - **decentralized 2PC** (D-2PC): one all-to-all wave, `max_{i,j} d_ij` over the N² pairs.
//!
//! Beside them, what a lock-based 2PC such as snowline's `2pl` must at least hold a hot item's lock for when
//! the item is not at the coordinator: one round trip between the coordinator and the item's participant per
//! commit (its vote and the decision; [`hot_lock_ms`]). The seed's two waves are not a bound for such a
//! protocol (its prepares queue at the item, the other participants vote meanwhile, and the
//! acknowledgements come after the release); this one is.
//!
//! A *delay* `d` is one round trip, as the seed's datasets measure them (its Virginia–Oregon commit of
//! ≈ 83 ms is one Virginia–Oregon round trip). The bound is `1 / mean(latency)` over `trials` draws. The
//! coordinator is participant 0; where delays depend on places (a latency matrix), participant `i` sits at
//! site `i mod sites`, the first site being the coordinator's.

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use snowline_sim::NetworkModel;

/// Where round-trip delays come from.
#[derive(Clone, Debug)]
pub enum Delays {
    /// Independent draws from one distribution (every pair alike): the `lan` profile, or measured samples.
    Iid(Distribution),
    /// Mean round trips between sites (ms, `sites × sites`, the diagonal within a site), each draw the mean
    /// times a factor uniform in `[1, 1 + jitter]`, and each of its two ways `spike_ms` later with
    /// probability `spike_p`.
    Matrix { names: Vec<String>, rtt_ms: Vec<Vec<f64>>, jitter: f64, spike_p: f64, spike_ms: f64 },
}

/// A one-dimensional round-trip distribution, in ms.
#[derive(Clone, Debug)]
pub enum Distribution {
    /// Measured round trips, drawn uniformly with replacement.
    Samples(Vec<f64>),
    /// A body log-normal around `median_ms` (log-sd `sigma`), and with probability `tail_p` an exponential
    /// tail of mean `tail_mean_ms` instead: the shape of a datacenter's round trips (mostly fast, a long tail).
    BodyAndTail { median_ms: f64, sigma: f64, tail_p: f64, tail_mean_ms: f64 },
}

impl Distribution {
    fn draw(&self, rng: &mut SmallRng) -> f64 {
        match self {
            Distribution::Samples(s) => s[rng.random_range(0..s.len())],
            &Distribution::BodyAndTail { median_ms, sigma, tail_p, tail_mean_ms } => {
                if rng.random::<f64>() < tail_p {
                    -tail_mean_ms * (1.0 - rng.random::<f64>()).ln()
                } else {
                    median_ms * (sigma * standard_normal(rng)).exp()
                }
            }
        }
    }
}

/// Box–Muller.
fn standard_normal(rng: &mut SmallRng) -> f64 {
    let u1: f64 = 1.0 - rng.random::<f64>();
    let u2: f64 = rng.random();
    (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
}

/// The `lan` profile: a stand-in for the seed's local-area traces (not shipped here), calibrated to its
/// reported N = 2 and N = 10 figures: round trips of 0.3 ms median, and one in twenty on a 4 ms tail.
pub fn lan() -> Delays {
    Delays::Iid(Distribution::BodyAndTail { median_ms: 0.3, sigma: 0.05, tail_p: 0.05, tail_mean_ms: 4.0 })
}

/// The eight EC2 regions of the seed's Fig. 3b, in its order (the coordinator in Virginia).
pub const WAN_SITES: [&str; 8] = ["VA", "OR", "CA", "IR", "SP", "TO", "SI", "SY"];

/// The `wan` profile: approximate mean round trips (ms) between the eight EC2 regions, as published from
/// 2013 measurements (the seed's own traces are not shipped here); 2 ms within a region; draws vary by up
/// to 10 % above the mean.
pub fn wan() -> Delays {
    // Upper triangle, in WAN_SITES order.
    let pairs: [(usize, usize, f64); 28] = [
        (0, 1, 82.9),
        (0, 2, 84.5),
        (0, 3, 107.9),
        (0, 4, 163.4),
        (0, 5, 202.4),
        (0, 6, 253.5),
        (0, 7, 265.6),
        (1, 2, 22.5),
        (1, 3, 170.6),
        (1, 4, 207.8),
        (1, 5, 135.1),
        (1, 6, 234.4),
        (1, 7, 200.6),
        (2, 3, 169.8),
        (2, 4, 185.9),
        (2, 5, 143.7),
        (2, 6, 186.9),
        (2, 7, 179.1),
        (3, 4, 239.8),
        (3, 5, 278.3),
        (3, 6, 234.1),
        (3, 7, 346.2),
        (4, 5, 301.4),
        (4, 6, 362.8),
        (4, 7, 333.6),
        (5, 6, 90.6),
        (5, 7, 144.2),
        (6, 7, 243.1),
    ];
    let n = WAN_SITES.len();
    let mut rtt_ms = vec![vec![2.0; n]; n];
    for (a, b, ms) in pairs {
        rtt_ms[a][b] = ms;
        rtt_ms[b][a] = ms;
    }
    let names = WAN_SITES.iter().map(|s| s.to_string()).collect();
    Delays::Matrix { names, rtt_ms, jitter: 0.1, spike_p: 0.0, spike_ms: 0.0 }
}

/// The simulator's network model for `dcs` datacenters: a round trip is two one-way delays, each its base
/// latency times the model's jitter factor, plus a spike with the model's probability.
pub fn from_model(model: &NetworkModel, dcs: u16) -> Delays {
    let names = (0..dcs).map(|d| format!("dc{d}")).collect();
    let rtt_ms = (0..dcs)
        .map(|a| (0..dcs).map(|b| 2.0 * model.inter_dc_ns(a, b) as f64 / 1e6).collect())
        .collect::<Vec<Vec<f64>>>();
    let (spike_p, spike_ms) = (model.spike_probability, model.spike_ns as f64 / 1e6);
    Delays::Matrix { names, rtt_ms, jitter: model.jitter, spike_p, spike_ms }
}

/// A cluster config's one-way latency matrix (ms; what the runtime emulates, exactly): round trips twice
/// that, with nothing within a datacenter but `intra_rtt_ms`.
pub fn from_matrix(one_way_ms: &[Vec<f64>], intra_rtt_ms: f64) -> Delays {
    let n = one_way_ms.len();
    let names = (0..n).map(|d| format!("dc{d}")).collect();
    let rtt_ms =
        (0..n).map(|a| (0..n).map(|b| if a == b { intra_rtt_ms } else { 2.0 * one_way_ms[a][b] }).collect()).collect();
    Delays::Matrix { names, rtt_ms, jitter: 0.0, spike_p: 0.0, spike_ms: 0.0 }
}

/// Round trips from a file's text: one per line in ms (blank lines and `#` comments skipped).
pub fn parse_samples(text: &str, file: &str) -> Result<Delays, String> {
    let mut samples = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let ms: f64 = line.parse().map_err(|_| format!("{file}:{}: not a round trip in ms: {line:?}", i + 1))?;
        if !(ms.is_finite() && ms >= 0.0) {
            return Err(format!("{file}:{}: a round trip must be a finite number >= 0, not {ms}", i + 1));
        }
        samples.push(ms);
    }
    if samples.is_empty() {
        return Err(format!("{file}: no round trips (one per line, in ms)"));
    }
    Ok(Delays::Iid(Distribution::Samples(samples)))
}

impl Delays {
    /// One round trip between participants `a` and `b`.
    fn draw(&self, a: usize, b: usize, rng: &mut SmallRng) -> f64 {
        match self {
            Delays::Iid(d) => d.draw(rng),
            &Delays::Matrix { ref rtt_ms, jitter, spike_p, spike_ms, .. } => {
                let n = rtt_ms.len();
                let mut ms = rtt_ms[a % n][b % n] * (1.0 + jitter * rng.random::<f64>());
                for _ in 0..2 {
                    if spike_p > 0.0 && rng.random::<f64>() < spike_p {
                        ms += spike_ms;
                    }
                }
                ms
            }
        }
    }

    /// The sites of participants `0..n` (a matrix), for the table.
    pub fn sites(&self, n: usize) -> Option<String> {
        match self {
            Delays::Iid(_) => None,
            Delays::Matrix { names, .. } => {
                Some((0..n).map(|i| names[i % names.len()].as_str()).collect::<Vec<_>>().join("+"))
            }
        }
    }
}

/// The bound for one number of participants.
#[derive(Clone, Debug, PartialEq)]
pub struct BoundRow {
    pub participants: usize,
    pub coordinated_ms: f64,
    pub decentralized_ms: f64,
}

impl BoundRow {
    pub fn coordinated_per_s(&self) -> f64 {
        1000.0 / self.coordinated_ms
    }
    pub fn decentralized_per_s(&self) -> f64 {
        1000.0 / self.decentralized_ms
    }
}

/// The mean commit latencies of C-2PC and D-2PC for each number of participants, over `trials` draws
/// from a generator seeded with `seed`.
pub fn two_pc(delays: &Delays, participants: &[usize], trials: usize, seed: u64) -> Vec<BoundRow> {
    let mut rng = SmallRng::seed_from_u64(seed);
    participants
        .iter()
        .map(|&n| {
            let (mut coordinated, mut decentralized) = (0.0, 0.0);
            for _ in 0..trials {
                let wave = |rng: &mut SmallRng| (0..n).map(|i| delays.draw(0, i, rng)).fold(0.0, f64::max);
                coordinated += wave(&mut rng) + wave(&mut rng);
                let mut all = 0.0f64;
                for i in 0..n {
                    for j in 0..n {
                        all = all.max(delays.draw(i, j, &mut rng));
                    }
                }
                decentralized += all;
            }
            let t = trials.max(1) as f64;
            BoundRow { participants: n, coordinated_ms: coordinated / t, decentralized_ms: decentralized / t }
        })
        .collect()
}

/// What 2PL's two-phase commit actually holds the hot item's lock for, in ms, for each number of
/// participants: the hot item's participant (participant `N − 1`, as `Pattern::HotItem` places it: not the
/// coordinator, participant 0) is granted the lock at its prepare, votes, and releases it when the decision
/// comes back, so each commit on the item holds it for at least one round trip to the coordinator, `d_{0,N−1}`.
/// The other participants' votes take no part: their prepares went out when the commit arrived, while its
/// prepare waited in the hot lock's queue, and the acknowledgements come after the release. The seed's model
/// charges two whole waves instead (`max d_i + max d'_i`), so this bound is the higher one: one over the mean,
/// over `trials` draws seeded with `seed`.
pub fn hot_lock_ms(delays: &Delays, participants: &[usize], trials: usize, seed: u64) -> Vec<f64> {
    let mut rng = SmallRng::seed_from_u64(seed);
    participants
        .iter()
        .map(|&n| {
            let total: f64 = (0..trials).map(|_| delays.draw(0, n.max(1) - 1, &mut rng)).sum();
            total / trials.max(1) as f64
        })
        .collect()
}

/// The smallest number of participants from which coordinated 2PC allows more throughput than
/// decentralized 2PC (the tail of N² draws overtakes two waves of N).
pub fn crossover(rows: &[BoundRow]) -> Option<usize> {
    rows.iter().find(|r| r.coordinated_ms < r.decentralized_ms).map(|r| r.participants)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixed_delays_give_the_formulas_exactly() {
        let d = from_matrix(&[vec![0.0, 10.0], vec![10.0, 0.0]], 1.0);
        let rows = two_pc(&d, &[1, 2], 10, 1);
        // One participant: the coordinator's own round trip, twice; decentralized: once.
        assert_eq!((rows[0].coordinated_ms, rows[0].decentralized_ms), (2.0, 1.0));
        // Two sites 20 ms apart (round trip): C-2PC two waves of 20, D-2PC one.
        assert_eq!((rows[1].coordinated_ms, rows[1].decentralized_ms), (40.0, 20.0));
        assert_eq!(rows[1].coordinated_per_s(), 25.0);
        // 2PL's hot lock: one round trip between the coordinator and the hot item's participant (the last).
        assert_eq!(hot_lock_ms(&d, &[2, 3], 10, 1), vec![20.0, 1.0]);
    }

    #[test]
    fn the_tail_of_many_pairs_makes_decentralized_commit_lose_at_scale() {
        let rows = two_pc(&lan(), &[2, 10], 20_000, 7);
        assert!(rows[0].decentralized_ms < rows[0].coordinated_ms, "{rows:?}");
        assert!(rows[1].decentralized_ms > rows[1].coordinated_ms, "{rows:?}");
        assert_eq!(crossover(&rows), Some(10));
        // Seeded: the same figures again.
        assert_eq!(rows, two_pc(&lan(), &[2, 10], 20_000, 7));
    }

    #[test]
    fn sample_files_are_read_with_located_errors() {
        assert!(
            matches!(parse_samples("0.5\n# x\n\n1.5 # y\n", "f"), Ok(Delays::Iid(Distribution::Samples(s))) if s == [0.5, 1.5])
        );
        assert_eq!(parse_samples("0.5\nfast\n", "rtt.txt").unwrap_err(), "rtt.txt:2: not a round trip in ms: \"fast\"");
        assert_eq!(parse_samples("-1\n", "r").unwrap_err(), "r:1: a round trip must be a finite number >= 0, not -1");
        assert!(parse_samples("# nothing\n", "r").unwrap_err().contains("no round trips"));
    }
}
