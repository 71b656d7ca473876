//! The loader, the generator and the audit, run purely over an in-memory state.

use super::*;
use snowline_core::procedure::{Call, run_all};

fn small() -> Shape {
    TpccSpec { scale: Scale::Small, ..Default::default() }.shape(Topology::new(1, 1))
}

fn loaded(shape: &Shape) -> BTreeMap<Key, Value> {
    initial_database(shape, 5).into_iter().flatten().collect()
}

fn audited(shape: &Shape, db: &BTreeMap<Key, Value>) -> Audit {
    let first: BTreeMap<Key, Option<Value>> =
        audit_first_keys(shape).into_iter().map(|k| (k.clone(), db.get(&k).cloned())).collect();
    let mut all = first.clone();
    for k in audit_second_keys(shape, &first) {
        all.insert(k.clone(), db.get(&k).cloned());
    }
    audit(shape, &all)
}

#[test]
fn the_initial_database_is_consistent_deterministic_and_batched_per_partition() {
    let shape = TpccSpec { scale: Scale::Small, ..Default::default() }.shape(Topology::new(1, 2));
    assert_eq!((shape.districts(), shape.first_undelivered), (20, 22));
    let batches = initial_database(&shape, 5);
    let t = Topology::new(1, 2);
    for b in &batches {
        assert!(b.len() <= LOAD_BATCH && b.iter().all(|(k, _)| t.partition_of(k) == t.partition_of(&b[0].0)));
    }
    assert_eq!(batches, initial_database(&shape, 5));
    let values: BTreeSet<&Value> = batches.iter().flatten().map(|(_, v)| v).collect();
    assert_eq!(values.len(), batches.iter().map(Vec::len).sum::<usize>(), "values are unique");
    let a = audited(&shape, &batches.into_iter().flatten().collect());
    assert!(a.ok(), "{a}");
    assert!(a.conditions.iter().all(|c| c.checked > 0), "{a}");
}

#[test]
fn the_audit_holds_after_transactions_and_catches_inconsistencies() {
    let shape = small();
    let mut db = loaded(&shape);
    let g = TpccGenerator::new(shape.clone(), 5);
    let mut rng = SmallRng::seed_from_u64(1);
    let mut kinds = BTreeMap::new();
    for seq in 0..400u64 {
        for job in g.next_jobs(&mut rng, seq as usize, seq + 1) {
            let Job::Call(CallJob { procedure, mut args, token }) = job else { panic!("{job:?}") };
            if token {
                args[0] = format!("t{seq}").into();
            }
            *kinds.entry(procedure).or_insert(0) += 1;
            let mut call = Call::start(procedure, args).unwrap();
            let (_, writes) = run_all(&mut call, |k| db.get(k).cloned()).unwrap();
            db.extend(writes);
        }
    }
    assert_eq!(kinds.len(), 5, "{kinds:?}");
    let a = audited(&shape, &db);
    assert!(a.ok(), "{a}");
    assert!(a.deliveries > 0);
    // Break conditions one at a time.
    let h = District::new(shape.districts_per_warehouse, 1, 3).unwrap();
    let broken = |f: &dyn Fn(&mut BTreeMap<Key, Value>)| {
        let mut db = db.clone();
        f(&mut db);
        audited(&shape, &db).violated()
    };
    // A payment applied to the district only: D_YTD disagrees with the warehouse and the history.
    assert_eq!(
        broken(&|db| {
            let mut d = DistrictYtdRow::read(db.get(&h.district_ytd_key())).unwrap();
            d.ytd += 5;
            db.insert(h.district_ytd_key(), d.value("x"));
        }),
        vec![1, 9]
    );
    // A payment applied to the warehouse only: W_YTD disagrees with the districts and the history.
    assert_eq!(
        broken(&|db| {
            let k = tpcc::warehouse_key(shape.districts_per_warehouse, 1);
            let mut w = WarehouseRow::read(db.get(&k)).unwrap();
            w.ytd += 5;
            db.insert(k, w.value("x"));
        }),
        vec![1, 8]
    );
    // A lost order: the district's counter runs ahead of its orders.
    assert_eq!(
        broken(&|db| {
            let mut d = DistrictRow::read(db.get(&h.district_key())).unwrap();
            d.next_o_id += 1;
            db.insert(h.district_key(), d.value("x"));
        }),
        vec![2]
    );
    // A delivery that forgot the new-order row.
    let o = shape.first_undelivered + 3;
    let got = broken(&|db| {
        db.insert(h.new_order_key(o), tpcc::encode(tpcc::DELIVERED, "x"));
    });
    assert!(got.contains(&3) && got.contains(&5) && got.contains(&11), "{got:?}");
    // An order line lost.
    let got = broken(&|db| {
        db.remove(&h.order_line_key(1, 1));
    });
    assert_eq!(got, vec![4, 6]);
    // A customer credited twice.
    let got = broken(&|db| {
        let mut c = CustomerRow::read(db.get(&h.customer_key(2))).unwrap();
        c.balance += 1;
        db.insert(h.customer_key(2), c.value("x"));
    });
    assert_eq!(got, vec![10, 12]);
    // A history row lost.
    let got = broken(&|db| {
        db.insert(h.history_key(2), tpcc::encode("", "x"));
    });
    assert_eq!(got, vec![8, 9, 10]);
    // A delivered line on an undelivered order.
    let got = broken(&|db| {
        let k = h.order_line_key(o, 1);
        let mut l = OrderLineRow::read(db.get(&k)).unwrap();
        l.delivery_d = 9;
        db.insert(k, l.value("x"));
    });
    assert!(got.contains(&7), "{got:?}");
    // Garbage: reported, and the audit fails.
    let mut bad = db.clone();
    bad.insert(h.order_key(1), "garbage".into());
    let a = audited(&shape, &bad);
    assert!(!a.ok() && !a.malformed.is_empty(), "{a}");
}

#[test]
fn the_generator_pins_clients_and_follows_the_mix() {
    let shape = TpccSpec { scale: Scale::Small, ..Default::default() }.shape(Topology::new(1, 2));
    let g = TpccGenerator::new(shape.clone(), 3);
    let mut rng = SmallRng::seed_from_u64(2);
    let mut counts = BTreeMap::new();
    for i in 0..10_000u64 {
        for job in g.next_jobs(&mut rng, 7, i) {
            let Job::Call(c) = job else { panic!() };
            assert_eq!(&*c.args[usize::from(c.token) + 2], "8", "client 7's home district is 8: {c:?}");
            *counts.entry(c.procedure).or_insert(0u32) += 1;
            assert!(Call::start(c.procedure, c.args).is_ok());
        }
    }
    let share = |p: &str| f64::from(counts[p]) / 10_000.0;
    assert!((share("tpcc-new-order") - 0.44).abs() < 0.02 && (share("tpcc-payment") - 0.44).abs() < 0.02);
    assert!((share("tpcc-stock-level") - 0.04).abs() < 0.01, "{counts:?}");
    // The standard set-up: ten districts per warehouse, remote lines and payments with two warehouses.
    let spec = TpccSpec { setup: Setup::Standard, warehouses: 2, scale: Scale::Small, ..Default::default() };
    let shape = spec.shape(Topology::new(1, 4));
    assert_eq!((shape.districts(), shape.rollback), (20, true));
    assert!(TpccSpec { warehouses: 2, ..Default::default() }.validate().is_err());
}

/// A New-Order's warehouse and its lines' supply warehouses (`TOKEN DPW W D C ITEMS ENTRY_D`, then lines of
/// three).
fn supplies(c: &CallJob) -> (u32, Vec<u32>) {
    let args: Vec<&str> = c.args.iter().map(|v| &**v).collect();
    let w = args[2].parse().unwrap();
    (w, args[7..].chunks(3).map(|l| l[1].parse().unwrap()).collect())
}

#[test]
fn new_order_only_and_the_distributed_share() {
    let topology = Topology::new(1, 4);
    let spec = |distributed| TpccSpec {
        setup: Setup::Standard,
        warehouses: 20,
        scale: Scale::Tiny,
        new_order_only: true,
        distributed,
        ..Default::default()
    };
    let mut rng = SmallRng::seed_from_u64(9);
    // Remote lines per New-Order, and how many of them are on another partition, over 2,000 New-Orders.
    let mut remote = |distributed: Option<u32>| -> (Vec<usize>, usize) {
        let shape = spec(distributed).shape(topology);
        let g = TpccGenerator::new(shape, 3);
        let (mut per_order, mut elsewhere) = (Vec::new(), 0);
        for i in 0..2_000u64 {
            let jobs = g.next_jobs(&mut rng, i as usize, i + 1);
            let [Job::Call(c)] = &jobs[..] else { panic!("{jobs:?}") };
            assert_eq!(c.procedure, "tpcc-new-order", "New-Order only");
            let (w, lines) = supplies(c);
            assert_eq!(g.home(i as usize).w, w, "the home warehouse");
            let others: Vec<u32> = lines.iter().copied().filter(|s| *s != w).collect();
            elsewhere += others.iter().filter(|s| (*s - 1) % 4 != (w - 1) % 4).count();
            if distributed.is_some() && !others.is_empty() {
                assert_ne!(lines[0], w, "the remote line is the first: {lines:?}");
            }
            per_order.push(others.len());
        }
        (per_order, elsewhere)
    };
    let (none, _) = remote(Some(0));
    assert!(none.iter().all(|n| *n == 0));
    let (all, elsewhere) = remote(Some(100));
    assert!(all.iter().all(|n| *n == 1), "exactly one remote line per New-Order");
    assert_eq!(elsewhere, 2_000, "every remote line on another partition");
    let (half, _) = remote(Some(50));
    let share = half.iter().filter(|n| **n == 1).count() as f64 / 2_000.0;
    assert!((share - 0.5).abs() < 0.05 && half.iter().all(|n| *n <= 1), "{share}");
    // TPC-C's own: 1% of lines, so some orders have several or none.
    let (tpcc, _) = remote(None);
    let lines = tpcc.iter().sum::<usize>() as f64 / 2_000.0;
    assert!(lines > 0.02 && lines < 0.2, "{lines}");
    // Validation: a percentage, on the standard set-up with another warehouse.
    assert!(spec(Some(100)).validate().is_ok());
    assert!(spec(Some(101)).validate().unwrap_err().contains("0 to 100"));
    let one = TpccSpec { warehouses: 1, ..spec(Some(10)) };
    assert!(one.validate().unwrap_err().contains("2 or more"));
    let snow = TpccSpec { setup: Setup::Snow, warehouses: 1, ..spec(Some(10)) };
    assert!(snow.validate().is_err());
    // Terminals spread over the warehouses: clients 0..20 have 20 home warehouses.
    let g = TpccGenerator::new(spec(None).shape(topology), 3);
    let homes: BTreeSet<u32> = (0..20).map(|i| g.home(i).w).collect();
    assert_eq!(homes.len(), 20);
    assert_eq!((g.home(20).w, g.home(20).d), (1, 2));
}
