//! The workload generators' unit tests: key laws, the mixes and each paper's pattern, the ycsb-t shape.

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
    let g = Generator::new(
        MixedWorkload { pattern: Pattern::PhotoAcl { albums: 4 }, ..Default::default() },
        Topology::new(1, 4),
    );
    let mut rng = SmallRng::seed_from_u64(1);
    let ops: Vec<Request> = (0..6).map(|seq| g.next(&mut rng, 5, seq)).collect();
    let key = |r: &Request| match r {
        Request::Put { key, .. } => key.to_string(),
        Request::Rot { keys } => format!("{}+{}", keys[0], keys[1]),
        other => unreachable!("{other:?}"),
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
fn a_uniform_draw_picks_the_index_the_cdf_search_would() {
    for n in [1, 3, 10, 7_919, 10_000] {
        let z = Zipf::new(n, 0.0);
        let (mut fast, mut searched) = (SmallRng::seed_from_u64(n as u64), SmallRng::seed_from_u64(n as u64));
        for _ in 0..100_000 {
            let u: f64 = searched.random();
            assert_eq!(z.sample(&mut fast), z.cdf.partition_point(|c| *c < u).min(n - 1), "n = {n}, u = {u}");
        }
    }
}

#[test]
fn mix_and_uniqueness() {
    let g = Generator::new(MixedWorkload::default(), Topology::new(1, 4));
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

    // Without blind writes every write is an interactive transaction reading, then writing the same keys,
    // and an update keeps all its keys.
    let g = g.blind_writes(false);
    let mut widths = std::collections::BTreeSet::new();
    for seq in 0..2_000 {
        for job in g.next_jobs(&mut rng, 0, 9, seq) {
            match job {
                Job::Op(r) => assert!(r.writes().is_empty(), "{r:?}"),
                Job::Txn(plan) => {
                    assert_eq!(plan.rounds, std::slice::from_ref(&plan.writes));
                    widths.insert(plan.writes.len());
                }
                Job::Call(c) => panic!("{c:?}"),
            }
        }
    }
    assert_eq!(widths.into_iter().collect::<Vec<_>>(), [1, 3]);
}

#[test]
fn hot_spot_sends_eighty_percent_of_draws_to_twenty_percent_of_keys() {
    let h = HotSpot::new(1000, 0.2, 0.8);
    assert_eq!(h.hot_keys(), 200);
    let mut rng = SmallRng::seed_from_u64(9);
    let n = 100_000;
    let mut hot = 0;
    let mut counts = vec![0u32; 1000];
    for _ in 0..n {
        let i = h.sample(&mut rng);
        counts[i] += 1;
        hot += usize::from(i < 200);
    }
    assert!((hot as f64 / n as f64 - 0.8).abs() < 0.01, "{hot}");
    // Uniform within each class: every hot key gets about 0.8/200 of the draws, every cold key 0.2/800.
    assert!(counts[..200].iter().all(|c| (250..550).contains(c)), "hot keys uneven");
    assert!(counts[200..].iter().all(|c| (5..60).contains(c)), "cold keys uneven");
}

#[test]
fn contrarian_rots_read_one_key_on_each_of_p_distinct_partitions_and_w_holds() {
    let topology = Topology::new(1, 8);
    let spec = MixedWorkload { keys_per_partition: 500, ..MixedWorkload::contrarian() };
    let g = Generator::new(spec, topology);
    let mut rng = SmallRng::seed_from_u64(4);
    let (mut puts, mut reads) = (0u64, 0u64);
    let mut partition_hits = [0u32; 8];
    let mut key_hits = std::collections::BTreeMap::<Key, u32>::new();
    for seq in 0..40_000 {
        let batch = g.next_batch(&mut rng, 1, seq);
        assert_eq!(batch.len(), 1);
        match &batch[0] {
            Request::Rot { keys } => {
                assert_eq!(keys.len(), 4);
                let mut parts: Vec<_> = keys.iter().map(|k| topology.partition_of(k)).collect();
                for p in &parts {
                    partition_hits[usize::from(*p)] += 1;
                }
                parts.sort();
                parts.dedup();
                assert_eq!(parts.len(), 4, "one key on each of p distinct partitions: {keys:?}");
                reads += 4;
                for k in keys {
                    *key_hits.entry(k.clone()).or_default() += 1;
                }
            }
            Request::Put { value, .. } => {
                puts += 1;
                assert!(value.len() >= 8);
            }
            other => panic!("contrarian issues ROTs and PUTs only: {other:?}"),
        }
    }
    // w = #PUT / (#PUT + #individual reads) = 0.05 (Contrarian §5.1).
    let w = puts as f64 / (puts + reads) as f64;
    assert!((w - 0.05).abs() < 0.004, "w = {w}");
    // Partitions are chosen uniformly.
    let mean = partition_hits.iter().sum::<u32>() as f64 / 8.0;
    assert!(partition_hits.iter().all(|h| (f64::from(*h) - mean).abs() < 0.05 * mean), "{partition_hits:?}");
    // Within a partition, keys are Zipfian: the hottest key of a partition is read about p(1) of the time.
    let zipf = Zipf::new(500, 0.99);
    let hottest = *key_hits.values().max().unwrap() as f64;
    let expected = zipf.probability(0) * reads as f64 / 8.0;
    assert!((hottest - expected).abs() < 0.15 * expected, "{hottest} vs {expected}");
    assert_eq!(g.keys().len(), 8 * 500);
}

#[test]
fn eiger_writes_are_k_puts_and_the_write_fraction_holds() {
    let spec = MixedWorkload { keys: 1000, ..MixedWorkload::eiger() };
    let g = Generator::new(spec, Topology::new(2, 4));
    let mut rng = SmallRng::seed_from_u64(5);
    let (mut writes, mut rots) = (0u32, 0u32);
    let mut seq = 0;
    let mut values = std::collections::BTreeSet::new();
    for _ in 0..20_000 {
        let batch = g.next_batch(&mut rng, 3, seq);
        seq += batch.len() as u64;
        match &batch[0] {
            Request::Rot { keys } => {
                rots += 1;
                assert_eq!(batch.len(), 1);
                assert_eq!(keys.len(), 5);
            }
            Request::Put { .. } => {
                writes += 1;
                assert_eq!(batch.len(), 5, "a write of 5 keys is 5 PUTs");
                let mut keys = Vec::new();
                for r in &batch {
                    let Request::Put { key, value } = r else { panic!("{r:?}") };
                    assert_eq!(value.len(), 5 * 128, "5 columns of 128 bytes");
                    assert!(values.insert(value.clone()));
                    keys.push(key.clone());
                }
                keys.sort();
                keys.dedup();
                assert_eq!(keys.len(), 5);
            }
            other => panic!("eiger issues ROTs and independent PUTs only: {other:?}"),
        }
    }
    let share = f64::from(writes) / f64::from(writes + rots);
    assert!((share - 0.1).abs() < 0.01, "{share}");
}

#[test]
fn tomsic_multi_reads_rounds_of_distinct_keys_then_updates_some_of_them() {
    // Tomsic §5.3.3: 10 rounds of 100 parallel reads, then an update over keys read.
    let spec = MixedWorkload { keys: 5000, ..MixedWorkload::tomsic_multi(100) };
    spec.validate(Topology::new(2, 4)).unwrap();
    let g = Generator::new(spec, Topology::new(2, 4));
    let mut rng = SmallRng::seed_from_u64(9);
    let batch = g.next_batch(&mut rng, 1, 0);
    let Request::RotRounds { rounds } = &batch[0] else { panic!("{:?}", batch[0]) };
    assert_eq!(rounds.len(), 10);
    assert!(rounds.iter().all(|r| r.len() == 100));
    let mut all: Vec<Key> = rounds.concat();
    let written: Vec<Key> = batch[1].writes().into_iter().map(|(k, _)| k).collect();
    assert_eq!(written.len(), 100);
    assert!(written.iter().all(|k| all.contains(k)), "updates touch keys just read");
    all.sort();
    all.dedup();
    assert_eq!(all.len(), 1000, "the reads are distinct");
    let too_big = MixedWorkload { keys: 500, ..MixedWorkload::tomsic_multi(2) };
    assert!(too_big.validate(Topology::new(2, 4)).unwrap_err().contains("tomsic-multi"));
}

#[test]
fn tomsic_single_updates_a_subset_of_the_keys_just_read() {
    let spec = MixedWorkload { keys: 2000, ..MixedWorkload::tomsic_single(10) };
    let g = Generator::new(spec.clone(), Topology::new(2, 4));
    let mut rng = SmallRng::seed_from_u64(6);
    let mut hot_reads = 0usize;
    for cycle in 0..200u64 {
        let batch = g.next_batch(&mut rng, 2, cycle * 2);
        let [Request::Rot { keys }, Request::Update { writes }] = batch.as_slice() else { panic!("{batch:?}") };
        assert_eq!((keys.len(), writes.len()), (100, 10));
        assert!(writes.iter().all(|(k, _)| keys.contains(k)), "blind updates over keys the ROT read");
        hot_reads += keys.iter().filter(|k| k[1..].parse::<usize>().unwrap() < 400).count();
    }
    // Keys are distinct within a ROT, so the hot share is a little below 80% (400 hot keys, 100 per ROT).
    let share = hot_reads as f64 / 20_000.0;
    assert!((0.70..0.82).contains(&share), "{share}");
    // Without write transactions the update is one PUT.
    let g = g.write_transactions(false);
    let batch = g.next_batch(&mut rng, 2, 0);
    assert!(matches!(batch[1], Request::Put { .. }));
    assert_eq!("tomsic-multi".parse::<Pattern>(), Ok(Pattern::TomsicMulti { rounds: 10 }));
    assert!(spec.validate(Topology::new(1, 1)).is_ok());
    assert!(MixedWorkload { update_keys: 101, ..spec }.validate(Topology::new(1, 1)).is_err());
}

/// ycsb-t's shape set field by field: every transaction reads one key per round, read-only ones
/// `ro_reads` distinct keys, updates `update_reads` and write the first `update_writes` of them, and the
/// update share is `write_ratio`.
#[test]
fn ycsb_t_issues_the_requested_reads_and_writes_at_the_requested_share() {
    let topology = Topology::new(1, 3);
    for (ro_reads, update_reads, update_writes, share) in [(2, 3, 1, 0.2), (1, 5, 5, 0.5), (6, 1, 1, 0.0)] {
        let shape = YcsbShape { ro_reads, update_reads, update_writes, key_dist: KeyDist::Uniform };
        let spec = MixedWorkload { keys: 1000, write_ratio: share, ycsb: shape, ..MixedWorkload::ycsb_t(YcsbMix::A) };
        spec.validate(topology).unwrap();
        let g = Generator::new(spec, topology);
        let mut rng = SmallRng::seed_from_u64(11);
        let n = 20_000;
        let mut updates = 0;
        for seq in 0..n {
            let jobs = g.next_jobs(&mut rng, 0, 1, seq);
            let [Job::Txn(plan)] = jobs.as_slice() else { panic!("{jobs:?}") };
            assert!(plan.rounds.iter().all(|r| r.len() == 1), "one read per round: {plan:?}");
            let reads: Vec<Key> = plan.rounds.concat();
            let mut distinct = reads.clone();
            distinct.sort();
            distinct.dedup();
            assert_eq!(distinct.len(), reads.len(), "distinct keys: {plan:?}");
            if plan.writes.is_empty() {
                assert_eq!(reads.len(), ro_reads);
            } else {
                updates += 1;
                assert_eq!(reads.len(), update_reads);
                assert_eq!(plan.writes[..], reads[..update_writes], "read-modify-writes of keys it read");
            }
        }
        let got = f64::from(updates) / f64::from(n as u32);
        assert!((got - share).abs() < 0.015, "update share {got}, asked {share}");
    }
}

#[test]
fn ycsb_t_keys_are_uniform_or_zipfian_as_asked() {
    let topology = Topology::new(1, 3);
    let hottest_share = |key_dist| {
        let shape = YcsbShape { ro_reads: 1, update_reads: 1, update_writes: 1, key_dist };
        let spec = MixedWorkload { keys: 1000, write_ratio: 0.0, ycsb: shape, ..MixedWorkload::ycsb_t(YcsbMix::B) };
        let g = Generator::new(spec, topology);
        let mut rng = SmallRng::seed_from_u64(12);
        let mut counts = std::collections::BTreeMap::<Key, u32>::new();
        let n = 50_000;
        for seq in 0..n {
            let Job::Txn(plan) = &g.next_jobs(&mut rng, 0, 1, seq)[0] else { panic!() };
            *counts.entry(plan.rounds[0][0].clone()).or_default() += 1;
        }
        (f64::from(counts[&Key::from("k0")]) / f64::from(n as u32), counts.len())
    };
    let (k0, distinct) = hottest_share(KeyDist::Uniform);
    assert!(k0 < 0.003 && distinct > 990, "uniform: k0 drawn {k0}, {distinct} distinct keys");
    let (k0, _) = hottest_share(KeyDist::Zipfian);
    let expected = Zipf::new(1000, 0.99).probability(0);
    assert!((k0 - expected).abs() < 0.1 * expected, "zipfian: k0 drawn {k0}, law {expected}");
    // The mixes' presets: A Zipfian, B and C uniform.
    assert_eq!(YcsbMix::A.shape().key_dist, KeyDist::Zipfian);
    assert_eq!(
        YcsbMix::C.shape(),
        YcsbShape { ro_reads: 2, update_reads: 1, update_writes: 1, key_dist: KeyDist::Uniform }
    );
}

#[test]
fn ycsb_t_refuses_impossible_shapes() {
    let topology = Topology::new(1, 3);
    let with = |ro_reads, update_reads, update_writes, keys| {
        let shape = YcsbShape { ro_reads, update_reads, update_writes, key_dist: KeyDist::Uniform };
        MixedWorkload { keys, ycsb: shape, ..MixedWorkload::ycsb_t(YcsbMix::B) }.validate(topology)
    };
    assert!(with(2, 2, 1, 10).is_ok());
    assert!(with(0, 2, 1, 10).unwrap_err().contains("--ro-reads"));
    assert!(with(2, 0, 1, 10).unwrap_err().contains("--update-reads"));
    assert!(with(2, 2, 3, 10).unwrap_err().contains("--update-writes"));
    assert!(with(2, 2, 0, 10).unwrap_err().contains("--update-writes"));
    assert!(with(11, 2, 1, 10).unwrap_err().contains("--keys (10)"));
}
