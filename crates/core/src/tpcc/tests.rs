//! Each procedure planned and run purely over a hand-made state.

use super::*;
use crate::procedure::{Call, run_all};
use std::collections::BTreeMap;

type State = BTreeMap<Key, Value>;

fn a(s: &[&str]) -> Vec<Value> {
    s.iter().map(|x| Value::from(*x)).collect()
}

const DPW: u32 = 4;

fn home() -> District {
    District::new(DPW, 1, 2).unwrap()
}

/// Warehouse 1, district 2 with orders 1..=3 (1 delivered, 2 and 3 not), customers 1..=3, items priced.
fn state() -> State {
    let h = home();
    let mut s = State::new();
    let mut put = |k: Key, v: Value| {
        s.insert(k, v);
    };
    put(warehouse_key(DPW, 1), WarehouseRow { ytd: 3000, tax: 500 }.value("l0"));
    put(h.district_key(), DistrictRow { next_o_id: 4, tax: 1000 }.value("l1"));
    put(h.district_ytd_key(), DistrictYtdRow { ytd: 3000 }.value("l3"));
    put(h.pointer_key(), encode("2", "l2"));
    for c in 1..=3u32 {
        let row = CustomerRow {
            balance: -1000,
            ytd_payment: 1000,
            payment_cnt: 1,
            delivery_cnt: 0,
            credit: if c == 2 { "BC" } else { "GC" }.into(),
            discount: 100,
            last: if c == 3 { "ABLE".into() } else { "BAR".into() },
            first: format!("F{c}"),
            data: "x".into(),
        };
        put(h.customer_key(c), row.value(&format!("c{c}")));
        put(h.history_key(c), encode("1.2.1000", &format!("h{c}")));
        put(h.last_order_key(c), encode(&c.to_string(), &format!("co{c}")));
    }
    put(h.by_name_key("BAR"), encode("1 2", "n0"));
    put(h.by_name_key("ABLE"), encode("3", "n1"));
    for o in 1..=3u32 {
        let delivered = o == 1;
        put(
            h.order_key(o),
            OrderRow { c_id: o, entry_d: 1, carrier: if delivered { 3 } else { 0 }, ol_cnt: 2, all_local: true }
                .value(&format!("o{o}")),
        );
        if !delivered {
            put(h.new_order_key(o), encode(NEW_ORDER, &format!("no{o}")));
        }
        for n in 1..=2u32 {
            let line = OrderLineRow {
                i_id: n,
                supply_w: 1,
                delivery_d: if delivered { 1 } else { 0 },
                qty: 5,
                amount: if delivered { 0 } else { 100 * i64::from(n) },
            };
            put(h.order_line_key(o, n), line.value(&format!("ol{o}.{n}")));
        }
    }
    for i in 1..=5u32 {
        put(stock_key(DPW, 1, i), StockRow { quantity: 10 + i, ytd: 0, order_cnt: 0, remote_cnt: 0 }.value("s"));
    }
    s
}

/// Run a call to completion over `s`, applying its writes; the effects.
fn run(s: &mut State, name: &str, args: Vec<Value>) -> Result<(Call, crate::procedure::Effects), String> {
    let mut call = Call::start(name, args)?;
    let effects = run_all(&mut call, |k| s.get(k).cloned()).map_err(|e| e.to_string())?;
    for (k, v) in &effects.1 {
        s.insert(k.clone(), v.clone());
    }
    Ok((call, effects))
}

fn row<R: Row>(s: &State, k: &Key) -> R {
    R::read(s.get(k)).unwrap()
}

#[test]
fn keys_are_pinned_to_their_district_s_partition() {
    // The SNOW set-up on 4 servers: one warehouse of 40 districts, sharded by district, stock by item.
    let t = crate::Topology::new(1, 4);
    let h = District::new(40, 1, 13).unwrap();
    assert_eq!(h.global(), 12);
    assert_eq!(h.pin(), 12);
    assert_eq!(District::of_global(40, 12), h);
    let keys = [
        h.district_key(),
        h.district_ytd_key(),
        h.pointer_key(),
        h.customer_key(7),
        h.order_line_key(3, 1),
        h.by_name_key("BAR"),
        h.history_key(1),
        coordfree::map_key(&h, 5),
        coordfree::order_line_key(&h, "t9", 1),
    ];
    for k in keys {
        assert_eq!(t.partition_of(&k), 0, "{k}");
    }
    assert_eq!(&*h.order_line_key(3, 1), "{12}ol/1/13/3/1");
    // D_NEXT_O_ID and D_YTD are two keys (two tables, as Rococo conflicts TPC-C per column).
    assert_eq!((&*h.district_key(), &*h.district_ytd_key()), ("{12}d/1/13", "{12}dy/1/13"));
    assert_eq!(&*warehouse_key(40, 1), "{0}w/1");
    assert_eq!(t.partition_of(&District::new(40, 1, 2).unwrap().district_key()), 1);
    assert_eq!(&*stock_key(40, 1, 7), "{7}s/1/7");
    assert_eq!(t.partition_of(&stock_key(40, 1, 7)), 3);
    assert!((100..=10_000).contains(&item_price(1)) && item_price(1) == item_price(1));
}

#[test]
fn a_standard_warehouse_is_one_unit_of_placement() {
    // TPC-C's ten districts per warehouse: every row of warehouse 7 (its districts', its stock, the
    // coordination-free layout's) on partition (7 − 1) mod 4.
    let t = crate::Topology::new(1, 4);
    let w = 7;
    let mut keys = vec![warehouse_key(10, w)];
    for d in 1..=10 {
        let h = District::new(10, w, d).unwrap();
        assert_eq!(h.pin(), 6);
        keys.extend([
            h.district_key(),
            h.district_ytd_key(),
            h.pointer_key(),
            h.customer_key(30),
            h.by_name_key("BAR"),
            h.last_order_key(3),
            h.history_key(3),
            h.order_key(4),
            h.new_order_key(4),
            h.order_line_key(4, 15),
            coordfree::map_key(&h, 4),
            coordfree::order_key(&h, "t1.2"),
            coordfree::new_order_key(&h, "t1.2"),
            coordfree::order_line_key(&h, "t1.2", 3),
        ]);
    }
    keys.extend((1..=1000).map(|i| stock_key(10, w, i)));
    for k in &keys {
        assert_eq!(t.partition_of(k), 2, "{k}");
    }
    // Another warehouse's stock (a remote supply line) is elsewhere; warehouses go round the partitions.
    assert_eq!(t.partition_of(&stock_key(10, 8, 1)), 3);
    assert_eq!(t.partition_of(&District::new(10, 5, 10).unwrap().district_key()), 0);
    // The procedures compute the same keys from their arguments: New-Order's stock pieces, local and remote.
    let args = a(&["t1", "10", "7", "3", "1", "1000", "5", "11", "7", "1", "12", "8", "2"]);
    let pieces = NewOrder.plan(&args, &[]).unwrap();
    assert_eq!(t.partition_of(&pieces[0].reads[0]), 2);
    let pieces = coordfree::CfNewOrder.plan(&args, &[]).unwrap();
    let stock: Vec<u16> = pieces[1..3].iter().map(|p| t.partition_of(&p.reads[0])).collect();
    assert_eq!(stock, vec![2, 3]);
    assert!(
        pieces
            .iter()
            .flat_map(|p| p.reads.iter().chain(&p.writes))
            .filter(|k| !k.contains("}s/"))
            .all(|k| t.partition_of(k) == 2)
    );
}

#[test]
fn new_order_takes_the_next_order_id_then_inserts_and_updates_stock() {
    let mut s = state();
    let h = home();
    let args = a(&["t1", "4", "1", "2", "3", "100", "77", "1", "1", "5", "2", "1", "9"]);
    let (call, (_, writes)) = run(&mut s, "tpcc-new-order", args).unwrap();
    assert!(call.pieces[0].immediate && call.pieces[1..].iter().all(|p| !p.immediate));
    assert_eq!(call.pieces.len(), 4 + 2);
    assert_eq!(row::<DistrictRow>(&s, &h.district_key()).next_o_id, 5);
    let o: OrderRow = row(&s, &h.order_key(4));
    assert_eq!((o.c_id, o.carrier, o.ol_cnt, o.all_local, o.entry_d), (3, 0, 2, true, 77));
    assert!(new_order_present(s.get(&h.new_order_key(4))));
    assert_eq!(parse_number(s.get(&h.last_order_key(3)), "co").unwrap(), 4);
    let l: OrderLineRow = row(&s, &h.order_line_key(4, 2));
    assert_eq!((l.i_id, l.qty, l.amount, l.delivery_d), (2, 9, 9 * item_price(2), 0));
    // Stock 1 (11): 11 < 5 + 10, so + 91; stock 2 (12): 12 < 9 + 10, so + 91.
    let s1: StockRow = row(&s, &stock_key(DPW, 1, 1));
    assert_eq!((s1.quantity, s1.ytd, s1.order_cnt, s1.remote_cnt), (11 - 5 + 91, 5, 1, 0));
    // Every written value is unique (the history checker needs it).
    let mut values: Vec<&Value> = writes.iter().map(|(_, v)| v).collect();
    values.sort();
    values.dedup();
    assert_eq!(values.len(), writes.len());
    // The unused item of the 1% rollback aborts it (a procedure error), with no effect.
    let before = s.clone();
    let bad = a(&["t2", "4", "1", "2", "3", "100", "77", "1", "1", "5", "101", "1", "1"]);
    assert!(run(&mut s, "tpcc-new-order", bad).unwrap_err().contains("not valid"));
    assert_eq!(s, before);
    // A remote supply warehouse counts as remote.
    let remote = a(&["t3", "4", "1", "2", "3", "100", "77", "3", "2", "1"]);
    s.insert(stock_key(DPW, 2, 3), StockRow { quantity: 50, ytd: 0, order_cnt: 0, remote_cnt: 0 }.value("s23"));
    run(&mut s, "tpcc-new-order", remote).unwrap();
    assert_eq!(row::<StockRow>(&s, &stock_key(DPW, 2, 3)).remote_cnt, 1);
    assert!(!row::<OrderRow>(&s, &h.order_key(5)).all_local);
}

#[test]
fn payment_by_id_and_by_name() {
    let mut s = state();
    let h = home();
    let (call, _) = run(&mut s, "tpcc-payment", a(&["p1", "4", "1", "2", "1", "2", "id:1", "250"])).unwrap();
    assert!(call.pieces.iter().all(|p| !p.immediate));
    assert_eq!(row::<WarehouseRow>(&s, &warehouse_key(DPW, 1)).ytd, 3250);
    assert_eq!(row::<DistrictYtdRow>(&s, &h.district_ytd_key()).ytd, 3250);
    // Payment leaves the district row New-Order increments alone.
    assert_eq!(s.get(&h.district_key()), state().get(&h.district_key()));
    assert!(call.pieces.iter().all(|p| !p.reads.contains(&h.district_key()) && !p.writes.contains(&h.district_key())));
    let c: CustomerRow = row(&s, &h.customer_key(1));
    assert_eq!((c.balance, c.ytd_payment, c.payment_cnt), (-1250, 1250, 2));
    assert_eq!(parse_history(s.get(&h.history_key(1))).unwrap().len(), 2);
    // By name: BAR is customers 1 and 2 (sorted by first name); ⌈2/2⌉ = the first, customer 1.
    let (call, _) = run(&mut s, "tpcc-payment", a(&["p2", "4", "1", "2", "1", "2", "name:BAR", "100"])).unwrap();
    assert!(call.pieces[0].immediate);
    assert_eq!(row::<CustomerRow>(&s, &h.customer_key(1)).balance, -1350);
    // A bad-credit customer's C_DATA gets the payment, kept short.
    run(&mut s, "tpcc-payment", a(&["p3", "4", "1", "2", "1", "2", "id:2", "100"])).unwrap();
    let c2: CustomerRow = row(&s, &h.customer_key(2));
    assert!(c2.data.starts_with("2 2 1 2 1 100") && c2.data.len() <= C_DATA_MAX, "{}", c2.data);
    assert!(run(&mut s, "tpcc-payment", a(&["p4", "4", "1", "2", "1", "2", "name:NOBODY", "1"])).is_err());
}

#[test]
fn order_status_reads_the_customer_s_last_order_and_its_lines() {
    let mut s = state();
    let before = s.clone();
    let (call, (reads, writes)) = run(&mut s, "tpcc-order-status", a(&["4", "1", "2", "name:ABLE"])).unwrap();
    assert!(writes.is_empty() && s == before);
    assert_eq!(call.pieces.len(), 5, "lookup, customer, last order, order, lines");
    assert_eq!(call.known[4].as_ref().unwrap().len(), 2 * 5);
    assert!(reads.iter().any(|(k, _)| *k == home().order_line_key(3, 2)));
    assert!(crate::procedure::lookup("tpcc-order-status").unwrap().read_only());
}

#[test]
fn delivery_delivers_the_oldest_new_order_and_credits_the_customer() {
    let mut s = state();
    let h = home();
    let (call, _) = run(&mut s, "tpcc-delivery", a(&["d1", "4", "1", "2", "7", "99"])).unwrap();
    assert_eq!(call.pieces.len(), 5);
    // The pointer, the new-order and the order are accessed immediately only; the customer is deferrable.
    assert!(call.pieces[..4].iter().all(|p| p.immediate) && !call.pieces[4].immediate);
    assert_eq!(call.pieces[2].writes, vec![h.new_order_key(2), h.order_key(2), h.pointer_key()]);
    assert!(!new_order_present(s.get(&h.new_order_key(2))));
    assert_eq!(row::<OrderRow>(&s, &h.order_key(2)).carrier, 7);
    assert_eq!(parse_number(s.get(&h.pointer_key()), "dp").unwrap(), 3);
    assert!((1..=2).all(|n| row::<OrderLineRow>(&s, &h.order_line_key(2, n)).delivery_d == 99));
    let c: CustomerRow = row(&s, &h.customer_key(2));
    assert_eq!((c.balance, c.delivery_cnt), (-1000 + 300, 1));
    run(&mut s, "tpcc-delivery", a(&["d2", "4", "1", "2", "7", "99"])).unwrap();
    // Nothing left to deliver: the call only reads.
    let (call, (_, writes)) = run(&mut s, "tpcc-delivery", a(&["d3", "4", "1", "2", "7", "99"])).unwrap();
    assert_eq!((call.pieces.len(), writes.len()), (2, 0));
    assert_eq!(parse_number(s.get(&h.pointer_key()), "dp").unwrap(), 4);
}

/// Two Deliveries of one district that both read pointer 2: the one that claims order 2 first advances the
/// pointer; the other's check (piece 1) or claim (piece 2) finds it moved and fails before writing, instead
/// of delivering order 2 again.
#[test]
fn a_delivery_whose_pointer_moved_fails_before_writing() {
    let h = home();
    let p = crate::procedure::lookup("tpcc-delivery").unwrap();
    let args = a(&["d1", "4", "1", "2", "7", "99"]);
    let s = state();
    let mut call = Call::start("tpcc-delivery", args.clone()).unwrap();
    let pointer = s.get(&h.pointer_key()).cloned();
    call.run(0, &[pointer]).unwrap();
    assert_eq!(call.next_wave().unwrap(), 1..2);
    let check_reads: Vec<Option<Value>> = call.pieces[1].reads.iter().map(|k| s.get(k).cloned()).collect();
    // Another Delivery claimed order 2 since piece 0: the check fails.
    let mut moved = check_reads.clone();
    moved[0] = Some(encode("3", "other"));
    let e = p.run(1, &args, &call.known, &moved).unwrap_err();
    // A conflict (retryable), not the procedure's own abort.
    assert!(matches!(&e, PieceError::Conflict(d) if d.contains("moved from 2 to 3")), "{e:?}");
    // It claimed it between the check and the claim: the claim fails, with no write.
    call.run(1, &check_reads).unwrap();
    assert_eq!(call.next_wave().unwrap(), 2..4);
    let claim = &call.pieces[2];
    assert!(claim.immediate && claim.reads == vec![h.pointer_key(), h.new_order_key(2)]);
    let e = p.run(2, &args, &call.known, &[Some(encode("3", "other")), s.get(&h.new_order_key(2)).cloned()]);
    assert!(matches!(e.unwrap_err(), PieceError::Conflict(d) if d.contains("moved from 2 to 3")));
    // A pointer at an order already delivered (no serial order gives it): refused too.
    let e = p.run(2, &args, &call.known, &[s.get(&h.pointer_key()).cloned(), Some(encode(DELIVERED, "x"))]);
    assert!(e.is_err());
    // Unmoved: the claim writes the new-order, the order and the pointer.
    let ran = p.run(2, &args, &call.known, &[s.get(&h.pointer_key()).cloned(), s.get(&h.new_order_key(2)).cloned()]);
    assert_eq!(ran.unwrap().writes.len(), 3);
}

#[test]
fn stock_level_counts_low_stock_among_the_recent_orders_items() {
    let mut s = state();
    let (call, (_, writes)) = run(&mut s, "tpcc-stock-level", a(&["4", "1", "2", "12"])).unwrap();
    assert!(writes.is_empty());
    // Orders 1..=3, items 1 and 2: two stock reads; stock 1 is 11 < 12, stock 2 is 12.
    assert_eq!(call.pieces.len(), 3 + 2);
    let low: Vec<&Value> = call.known[3..].iter().map(|k| &k.as_ref().unwrap()[0]).collect();
    assert_eq!(low, vec![&Value::from("1"), &Value::from("0")]);
    assert!(call.pieces[..3].iter().all(|p| p.immediate));
}

#[test]
fn bad_arguments_and_bad_rows_are_errors_not_panics() {
    let bad: &[(&str, &[&str])] = &[
        ("tpcc-new-order", &[]),
        ("tpcc-new-order", &["t", "4", "1", "5", "1", "10", "1", "1", "1", "1"]),
        ("tpcc-new-order", &["t", "4", "1", "1", "1", "10", "1"]),
        ("tpcc-new-order", &["t", "4", "1", "1", "1", "10", "1", "1", "1", "1", "1", "1", "1"]),
        ("tpcc-new-order", &["t,;", "4", "1", "1", "1", "10", "1", "1", "1", "1"]),
        ("tpcc-new-order", &["t", "4", "1", "1", "1", "10", "1", "1", "1"]),
        ("tpcc-payment", &["t", "4", "1", "1", "1", "1", "who", "5"]),
        ("tpcc-payment", &["t", "4", "1", "1", "1", "1", "name:a b", "5"]),
        ("tpcc-payment", &["t", "0", "1", "1", "1", "1", "id:1", "5"]),
        ("tpcc-order-status", &["4", "1", "1", "id:0"]),
        ("tpcc-delivery", &["t", "4", "1", "1", "11", "1"]),
        ("tpcc-stock-level", &["4", "1", "1", "-3"]),
        ("tpcc-stock-level", &["4", "99999999999999999999", "1", "10"]),
    ];
    for (name, args) in bad {
        assert!(Call::start(name, a(args)).is_err(), "{name} {args:?}");
    }
    // Garbage rows: errors.
    let mut s = state();
    s.insert(home().district_key(), "nonsense".into());
    assert!(run(&mut s, "tpcc-new-order", a(&["t", "4", "1", "2", "1", "10", "1", "1", "1", "1"])).is_err());
    assert!(run(&mut s, "tpcc-stock-level", a(&["4", "1", "2", "10"])).is_err());
    s.insert(home().pointer_key(), "-1;x".into());
    assert!(run(&mut s, "tpcc-delivery", a(&["t", "4", "1", "2", "1", "1"])).is_err());
    // Running a piece that does not exist, or before what it needs ran: an error.
    let p = crate::procedure::lookup("tpcc-delivery").unwrap();
    assert!(p.run(9, &a(&["t", "4", "1", "2", "1", "1"]), &[], &[]).is_err());
    assert!(p.run(4, &a(&["t", "4", "1", "2", "1", "1"]), &[], &[None]).is_err());
    let p = crate::procedure::lookup("tpcc-new-order").unwrap();
    assert!(p.run(3, &a(&["t", "4", "1", "2", "1", "10", "1", "1", "1", "1"]), &[], &[]).is_err());
}
