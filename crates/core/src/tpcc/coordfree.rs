//! TPC-C without coordination where its invariants allow (the coordination-avoidance paper's §6): the five
//! transactions as `tpcc-cf-*` procedures for a store with atomically visible multi-partition writes, merge
//! writes and deferred ids (RAMP: `snowline_protocols::ramp`, module `calls`).
//!
//! - **New-Order** writes its ORDER, NEW-ORDER and ORDER-LINE rows under a temporary id `T` (`t` and the
//!   call's token, unique per attempt), the customer's last order (`T`) and its STOCK updates as merges
//!   (quantity, year-to-date, order and remote counts: commutative), all in one atomically visible write;
//!   its sequential `O_ID` is taken after the fact ([`crate::procedure::DeferredId`]): one atomic increment of
//!   `D_NEXT_O_ID` at the district's owner, which writes the mapping `{g}oid/W/D/O` → `T`. The only
//!   coordination left (consistency conditions 2 and 3: sequential, dense ids).
//! - **New-Order under a stock floor** (`tpcc-cf-new-order-bounded`, for a schema with `CHECK (S_QUANTITY >=
//!   F)` and no restocking, which the analyzer finds not invariant-confluent): the same, but each stock line
//!   takes its quantity with a bounded add (`-Q>=F`, [`crate::merge`]) and no restocking: the store checks
//!   the floor at the stock row's owner against every decrement in flight, and a line that would break it
//!   aborts the whole New-Order (the coordination the invariant demands, on the stock rows only).
//! - **Payment**'s sums (`W_YTD`, `D_YTD`, the customer's balance, year-to-date payment and payment count) are
//!   merges; its HISTORY row is an append (a merge); bad credit's `C_DATA` a set (last writer wins: no
//!   condition reads it).
//! - **Order-Status** and **Stock-Level** only read (through the mapping for Stock-Level's recent orders).
//! - **Delivery** is single-partition ([`crate::procedure::Procedure::home`]): every row it touches is its
//!   district's, so the store runs it serially at the district's partition, as the seed says.
//!
//! Keys are the classic layout's (`crate::tpcc`'s module docs) with the order id replaced by `T` in the ORDER,
//! NEW-ORDER and ORDER-LINE keys and in the customer's last order; the loader writes the mapping `O` → `O`
//! for the initial orders, whose `T` is their number. The delivery pointer and Stock-Level count sequential
//! ids.

use super::*;
use crate::merge;
use crate::procedure::DeferredId;

/// The mapping key prefix of district `h`: `{g}oid/W/D/` (id `O` appended).
pub fn map_prefix(h: &District) -> String {
    h.key("oid", "/").to_string()
}

/// The mapping key of sequential id `o`.
pub fn map_key(h: &District, o: u32) -> Key {
    format!("{}{o}", map_prefix(h)).into()
}

/// ORDER, NEW-ORDER and ORDER-LINE keys under temporary id `t`.
pub fn order_key(h: &District, t: &str) -> Key {
    h.key("o", &format!("/{t}"))
}
pub fn new_order_key(h: &District, t: &str) -> Key {
    h.key("no", &format!("/{t}"))
}
pub fn order_line_key(h: &District, t: &str, n: u32) -> Key {
    h.key("ol", &format!("/{t}/{n}"))
}

/// The temporary id of a New-Order call with `token`.
pub fn temp_id(token: &str) -> String {
    format!("t{token}")
}

/// `S_QUANTITY` of a stock row, signed: commutative decrements decided on a stale read may take it below
/// zero (no consistency condition bounds it; the restocking rule adds 91 when it reads below 10).
fn stock_quantity(value: Option<&Value>) -> Result<i64, String> {
    let v = value.ok_or("no stock row")?;
    let q = fields(v).split(',').next().unwrap_or("");
    q.parse().map_err(|_| format!("S_QUANTITY {q:?} is not a number"))
}

fn merge_value(ops: &[merge::FieldOp<'_>], tag: &str) -> Value {
    merge::encode(ops, tag).into()
}

fn output_str(known: &Known, i: usize, at: usize) -> Result<&str, String> {
    let out = output(known, i).ok_or_else(|| format!("piece {i} has not run"))?;
    out.get(at).map(|v| &**v).ok_or_else(|| format!("piece {i}'s output has no field {at}"))
}

// ---------------------------------------------------------------------------------------------------------

/// `tpcc-cf-new-order`: New-Order with its sequential id deferred.
pub struct CfNewOrder;

/// `tpcc-cf-new-order-bounded`: [`CfNewOrder`] keeping `S_QUANTITY >= FLOOR` by bounded adds, without
/// TPC-C's restocking (module docs).
pub struct CfNewOrderBounded;

impl Procedure for CfNewOrder {
    fn name(&self) -> &'static str {
        "tpcc-cf-new-order"
    }
    fn usage(&self) -> &'static str {
        "tpcc-cf-new-order TOKEN DPW W D C ITEMS ENTRY_D [OL_I_ID OL_SUPPLY_W_ID OL_QUANTITY]×(1..15)"
    }
    /// One wave: 0 district, warehouse and customer (the taxes and discount), 1..=L one stock merge per
    /// line, L+1 the inserts under the temporary id.
    fn plan(&self, args: &[Value], _known: &Known) -> Result<Vec<Piece>, String> {
        new_order_plan(args)
    }
    fn run(&self, piece: usize, args: &[Value], _known: &Known, reads: &[Option<Value>]) -> Result<Ran, PieceError> {
        new_order_run(piece, args, None, reads)
    }
    fn deferred_id(&self, args: &[Value], _known: &Known) -> Result<Option<DeferredId>, String> {
        new_order_deferred_id(args)
    }
}

/// The bounded New-Order's arguments without its floor (the classic New-Order's: a slice, so the hot path
/// of a call's passes copies nothing), and the floor, its last argument.
fn bounded_args(args: &[Value]) -> Result<(&[Value], i64), String> {
    let (floor, rest) = args.split_last().ok_or("no FLOOR argument")?;
    let floor: i64 = floor.parse().map_err(|_| format!("FLOOR {floor:?} is not a number"))?;
    Ok((rest, floor))
}

impl Procedure for CfNewOrderBounded {
    fn name(&self) -> &'static str {
        "tpcc-cf-new-order-bounded"
    }
    fn usage(&self) -> &'static str {
        "tpcc-cf-new-order-bounded TOKEN DPW W D C ITEMS ENTRY_D [OL_I_ID OL_SUPPLY_W_ID OL_QUANTITY]×(1..15) FLOOR"
    }
    fn plan(&self, args: &[Value], _known: &Known) -> Result<Vec<Piece>, String> {
        new_order_plan(bounded_args(args)?.0)
    }
    fn run(&self, piece: usize, args: &[Value], _known: &Known, reads: &[Option<Value>]) -> Result<Ran, PieceError> {
        let (args, floor) = bounded_args(args)?;
        new_order_run(piece, args, Some(floor), reads)
    }
    fn deferred_id(&self, args: &[Value], _known: &Known) -> Result<Option<DeferredId>, String> {
        new_order_deferred_id(bounded_args(args)?.0)
    }
}

fn new_order_plan(args: &[Value]) -> Result<Vec<Piece>, String> {
    let a = new_order_args(args)?;
    let h = a.district;
    let t = temp_id(a.token);
    let reads = vec![h.district_key(), warehouse_key(h.dpw, h.w), h.customer_key(a.c)];
    let mut pieces = vec![Piece { reads, ..Piece::default() }];
    for l in &a.lines {
        let s = stock_key(h.dpw, l.supply_w, l.item);
        pieces.push(Piece { reads: vec![s.clone()], writes: vec![s], immediate: false });
    }
    let mut insert = vec![order_key(&h, &t), new_order_key(&h, &t), h.last_order_key(a.c)];
    insert.extend((1..=a.lines.len() as u32).map(|n| order_line_key(&h, &t, n)));
    pieces.push(Piece { writes: insert, ..Piece::default() });
    Ok(pieces)
}

/// A piece of New-Order; `floor`: the bounded variant's.
fn new_order_run(piece: usize, args: &[Value], floor: Option<i64>, reads: &[Option<Value>]) -> Result<Ran, PieceError> {
    let a = new_order_args(args)?;
    let h = a.district;
    let lines = a.lines.len();
    match piece {
        0 => {
            if a.lines.iter().any(|l| l.item > a.items) {
                return Err("item number is not valid".into());
            }
            let d = DistrictRow::read(read(reads, 0))?;
            let w = WarehouseRow::read(read(reads, 1))?;
            let c = CustomerRow::read(read(reads, 2))?;
            Ok(Ran { writes: Vec::new(), output: vec![v(d.tax), v(w.tax), v(c.discount)] })
        }
        p if p <= lines => {
            let l = a.lines[p - 1];
            let quantity = stock_quantity(read(reads, 0))?;
            let q = i64::from(l.qty);
            let take = match floor {
                // The owner keeps the floor; no restocking.
                Some(floor) => merge::FieldOp::Bounded { add: -q, floor },
                None => merge::FieldOp::Add(if quantity >= q + 10 { -q } else { 91 - q }),
            };
            let remote = i64::from(l.supply_w != h.w);
            let ops = [take, merge::FieldOp::Add(q), merge::FieldOp::Add(1), merge::FieldOp::Add(remote)];
            Ok(Ran { writes: vec![merge_value(&ops, &tag(a.token, p, 0))], output: Vec::new() })
        }
        p if p == lines + 1 => {
            let t = temp_id(a.token);
            let all_local = a.lines.iter().all(|l| l.supply_w == h.w);
            let order = OrderRow { c_id: a.c, entry_d: a.entry_d, carrier: 0, ol_cnt: lines as u32, all_local };
            let mut writes = vec![
                order.value(&tag(a.token, p, 0)),
                encode(NEW_ORDER, &tag(a.token, p, 1)),
                encode(&t, &tag(a.token, p, 2)),
            ];
            for (n, l) in a.lines.iter().enumerate() {
                let line = OrderLineRow {
                    i_id: l.item,
                    supply_w: l.supply_w,
                    delivery_d: 0,
                    qty: l.qty,
                    amount: i64::from(l.qty) * item_price(l.item),
                };
                writes.push(line.value(&tag(a.token, p, 3 + n)));
            }
            Ok(Ran { writes, output: Vec::new() })
        }
        p => Err(format!("no piece {p}").into()),
    }
}

fn new_order_deferred_id(args: &[Value]) -> Result<Option<DeferredId>, String> {
    let a = new_order_args(args)?;
    let h = a.district;
    let last = a.lines.len() + 2;
    Ok(Some(DeferredId {
        counter: h.district_key(),
        field: 0,
        counter_value: merge_value(&[merge::FieldOp::Add(1), merge::FieldOp::Keep], &tag(a.token, last, 0)),
        map_prefix: map_prefix(&h),
        map_value: encode(&temp_id(a.token), &tag(a.token, last, 1)),
    }))
}

// ---------------------------------------------------------------------------------------------------------

/// `tpcc-cf-payment`: Payment with its sums as merges.
pub struct CfPayment;

impl Procedure for CfPayment {
    fn name(&self) -> &'static str {
        "tpcc-cf-payment"
    }
    fn usage(&self) -> &'static str {
        "tpcc-cf-payment TOKEN DPW W D C_W_ID C_D_ID (id:C_ID|name:C_LAST) H_AMOUNT"
    }
    fn plan(&self, args: &[Value], known: &Known) -> Result<Vec<Piece>, String> {
        let a = payment_args(args)?;
        Ok(cf_payment_layout(&a, known)?.into_iter().map(|(_, p)| p).collect())
    }
    fn run(&self, piece: usize, args: &[Value], known: &Known, reads: &[Option<Value>]) -> Result<Ran, PieceError> {
        use merge::FieldOp::{Add, Append, Keep, Set};
        let a = payment_args(args)?;
        let layout = cf_payment_layout(&a, known)?;
        let (role, _) = layout.get(piece).ok_or_else(|| format!("no piece {piece}"))?;
        let t = tag(a.token, piece, 0);
        let amount = a.amount;
        let writes = match *role {
            PaymentPiece::Lookup => return run_lookup(reads),
            PaymentPiece::Warehouse => vec![merge_value(&[Add(amount), Keep], &t)],
            PaymentPiece::District => vec![merge_value(&[Add(amount)], &t)],
            PaymentPiece::Customer(c_id) => {
                let c = CustomerRow::read(read(reads, 0))?;
                let mut data = String::new();
                if c.credit == "BC" {
                    let (cd, h) = (a.customer_district, a.district);
                    data = format!("{c_id} {} {} {} {} {} {}", cd.d, cd.w, h.d, h.w, amount, c.data);
                    data.truncate(C_DATA_MAX);
                    data = data.trim_end().to_string();
                }
                let data_op = if c.credit == "BC" { Set(&data) } else { Keep };
                let ops = [Add(-amount), Add(amount), Add(1), Keep, Keep, Keep, Keep, Keep, data_op];
                vec![merge_value(&ops, &t)]
            }
            PaymentPiece::History(_) => {
                let entry = history_fields(&[HistoryEntry { w: a.district.w, d: a.district.d, amount }]);
                vec![merge_value(&[Append(&entry)], &t)]
            }
        };
        Ok(Ran { writes, output: Vec::new() })
    }
}

/// Payment's pieces without reads of the sums it adds to (the customer is read for its credit).
fn cf_payment_layout(a: &PaymentArgs<'_>, known: &Known) -> Result<Vec<(PaymentPiece, Piece)>, String> {
    let h = a.district;
    let cd = a.customer_district;
    let mut out = Vec::new();
    if let Customer::Name(last) = &a.customer {
        out.push((PaymentPiece::Lookup, lookup_piece(&cd, last)));
    }
    let only_writes = |k: Key| Piece { writes: vec![k], ..Piece::default() };
    out.push((PaymentPiece::Warehouse, only_writes(warehouse_key(h.dpw, h.w))));
    out.push((PaymentPiece::District, only_writes(h.district_ytd_key())));
    if let Some(c) = customer_id(&a.customer, known)? {
        let ck = cd.customer_key(c);
        out.push((PaymentPiece::Customer(c), Piece { reads: vec![ck.clone()], writes: vec![ck], immediate: false }));
        out.push((PaymentPiece::History(c), only_writes(cd.history_key(c))));
    }
    Ok(out)
}

// ---------------------------------------------------------------------------------------------------------

/// `tpcc-cf-order-status`: Order-Status through the customer's last order's temporary id.
pub struct CfOrderStatus;

impl Procedure for CfOrderStatus {
    fn name(&self) -> &'static str {
        "tpcc-cf-order-status"
    }
    fn usage(&self) -> &'static str {
        "tpcc-cf-order-status DPW W D (id:C_ID|name:C_LAST)"
    }
    fn read_only(&self) -> bool {
        true
    }
    /// [lookup], customer and last order (immediate), the order (immediate), its lines.
    fn plan(&self, args: &[Value], known: &Known) -> Result<Vec<Piece>, String> {
        let mut a = Args::new(args);
        let h = a.district()?;
        let customer = a.customer()?;
        a.done()?;
        let mut out = Vec::new();
        if let Customer::Name(last) = &customer {
            out.push(lookup_piece(&h, last));
        }
        let Some(c) = customer_id(&customer, known)? else { return Ok(out) };
        let at = out.len();
        out.push(Piece { reads: vec![h.customer_key(c), h.last_order_key(c)], writes: vec![], immediate: true });
        let Ok(t) = output_str(known, at, 3) else { return Ok(out) };
        if t == "0" {
            return Ok(out);
        }
        let t = t.to_string();
        out.push(Piece { reads: vec![order_key(&h, &t)], writes: vec![], immediate: true });
        let Some(order) = output(known, at + 1) else { return Ok(out) };
        let cnt: u32 = num(order.first().ok_or("no line count")?, "O_OL_CNT")?;
        if cnt > 0 {
            let lines = (1..=cnt.min(MAX_LINES as u32)).map(|n| order_line_key(&h, &t, n)).collect();
            out.push(Piece { reads: lines, ..Piece::default() });
        }
        Ok(out)
    }
    fn run(&self, piece: usize, args: &[Value], known: &Known, reads: &[Option<Value>]) -> Result<Ran, PieceError> {
        let by_name = args.get(3).is_some_and(|c| c.starts_with("name:"));
        let first = usize::from(by_name);
        let output = match piece {
            0 if by_name => return run_lookup(reads),
            p if p == first => {
                let c = CustomerRow::read(read(reads, 0))?;
                // A customer without an order (fewer orders than customers): 0.
                let last = read(reads, 1).map_or("0".to_string(), |t| fields(t).to_string());
                vec![v(c.balance), v(c.first), v(c.last), v(last)]
            }
            p if p == first + 1 => {
                // Written with its lines in one atomically visible write: present once the mapping was read.
                let o = OrderRow::read(read(reads, 0))?;
                vec![v(o.ol_cnt), v(o.entry_d), v(o.carrier)]
            }
            _ => {
                let _ = known;
                let mut out = Vec::new();
                for r in reads {
                    let l = OrderLineRow::read(r.as_ref())?;
                    out.extend([v(l.i_id), v(l.supply_w), v(l.qty), v(l.amount), v(l.delivery_d)]);
                }
                out
            }
        };
        Ok(Ran { writes: Vec::new(), output })
    }
}

// ---------------------------------------------------------------------------------------------------------

/// `tpcc-cf-delivery`: Delivery of one district, single-partition (`local`: run serially at its home;
/// `tpcc-cf-delivery-free`, not local, runs it coordination-free like the others: what the store does when
/// the analyzer says Delivery's invariants allow it, `crate`'s harness `tpcc_plan`).
pub struct CfDelivery {
    pub local: bool,
}

impl Procedure for CfDelivery {
    fn name(&self) -> &'static str {
        if self.local { "tpcc-cf-delivery" } else { "tpcc-cf-delivery-free" }
    }
    fn usage(&self) -> &'static str {
        if self.local {
            "tpcc-cf-delivery TOKEN DPW W D O_CARRIER_ID OL_DELIVERY_D"
        } else {
            "tpcc-cf-delivery-free TOKEN DPW W D O_CARRIER_ID OL_DELIVERY_D"
        }
    }
    fn home(&self, args: &[Value]) -> Option<Key> {
        if !self.local {
            return None;
        }
        delivery_args(args).ok().map(|a| a.district.pointer_key())
    }
    /// 0 pointer `p`, 1 mapping of `p` (`T`), 2 new-order and order `T`; if undelivered: 3 claim (new-order,
    /// order, pointer written), 4 lines (the amount), then 5 the customer's merge.
    fn plan(&self, args: &[Value], known: &Known) -> Result<Vec<Piece>, String> {
        let a = delivery_args(args)?;
        let h = a.district;
        let mut pieces = vec![Piece { reads: vec![h.pointer_key()], writes: vec![], immediate: true }];
        let Some(out) = output(known, 0) else { return Ok(pieces) };
        let p: u32 = num(out.first().ok_or("no pointer")?, "delivery pointer")?;
        pieces.push(Piece { reads: vec![map_key(&h, p)], writes: vec![], immediate: true });
        let Ok(t) = output_str(known, 1, 0) else { return Ok(pieces) };
        if t.is_empty() {
            return Ok(pieces);
        }
        let t = t.to_string();
        pieces.push(Piece { reads: vec![new_order_key(&h, &t), order_key(&h, &t)], writes: vec![], immediate: true });
        let Some(found) = output(known, 2) else { return Ok(pieces) };
        if found.first().map(|f| &**f) != Some("1") {
            return Ok(pieces);
        }
        let order = OrderRow::parse(found.get(1).ok_or("no order")?)?;
        pieces.push(Piece {
            writes: vec![new_order_key(&h, &t), order_key(&h, &t), h.pointer_key()],
            ..Piece::default()
        });
        let lines: Vec<Key> = (1..=order.ol_cnt.min(MAX_LINES as u32)).map(|n| order_line_key(&h, &t, n)).collect();
        pieces.push(Piece { reads: lines.clone(), writes: lines, immediate: true });
        if output(known, 4).is_none() {
            return Ok(pieces);
        }
        pieces.push(Piece { writes: vec![h.customer_key(order.c_id)], ..Piece::default() });
        Ok(pieces)
    }
    fn run(&self, piece: usize, args: &[Value], known: &Known, reads: &[Option<Value>]) -> Result<Ran, PieceError> {
        use merge::FieldOp::{Add, Keep};
        let a = delivery_args(args)?;
        let t = |j| tag(a.token, piece, j);
        match piece {
            0 => Ok(Ran { writes: vec![], output: vec![v(parse_number(read(reads, 0), "delivery pointer")?)] }),
            // No mapping: no order with that id yet; nothing to deliver.
            1 => Ok(Ran { writes: vec![], output: vec![v(read(reads, 0).map_or("", |m| fields(m)))] }),
            2 => {
                let order = read(reads, 1);
                if !new_order_present(read(reads, 0)) || order.is_none() {
                    return Ok(Ran { writes: vec![], output: vec![v(0)] });
                }
                Ok(Ran { writes: vec![], output: vec![v(1), v(OrderRow::read(order)?.to_fields())] })
            }
            3 => {
                let p: u32 = out_num(known, 0, 0)?;
                let order = OrderRow::parse(output_str(known, 2, 1)?)?;
                let order = OrderRow { carrier: a.carrier, ..order };
                Ok(Ran {
                    writes: vec![encode(DELIVERED, &t(0)), order.value(&t(1)), encode(&(p + 1).to_string(), &t(2))],
                    output: vec![],
                })
            }
            4 => {
                let mut sum = 0i64;
                let mut writes = Vec::new();
                for (j, r) in reads.iter().enumerate() {
                    let mut l = OrderLineRow::read(r.as_ref())?;
                    sum = sum.checked_add(l.amount).ok_or("OL_AMOUNT sum overflows")?;
                    l.delivery_d = a.date;
                    writes.push(l.value(&t(j)));
                }
                Ok(Ran { writes, output: vec![v(sum)] })
            }
            5 => {
                let sum: i64 = out_num(known, 4, 0)?;
                let ops = [Add(sum), Keep, Keep, Add(1)];
                Ok(Ran { writes: vec![merge_value(&ops, &t(0))], output: vec![] })
            }
            p => Err(format!("no piece {p}").into()),
        }
    }
}

// ---------------------------------------------------------------------------------------------------------

/// `tpcc-cf-stock-level`: Stock-Level through the mapping of the recent sequential ids.
pub struct CfStockLevel;

impl Procedure for CfStockLevel {
    fn name(&self) -> &'static str {
        "tpcc-cf-stock-level"
    }
    fn usage(&self) -> &'static str {
        "tpcc-cf-stock-level DPW W D THRESHOLD"
    }
    fn read_only(&self) -> bool {
        true
    }
    /// 0 district, 1 the mappings of the last 20 ids, 2 those orders, 3 their lines, 4.. one stock read per
    /// distinct item.
    fn plan(&self, args: &[Value], known: &Known) -> Result<Vec<Piece>, String> {
        let (h, _) = stock_level_args(args)?;
        let mut pieces = vec![Piece { reads: vec![h.district_key()], writes: vec![], immediate: true }];
        if output(known, 0).is_none() {
            return Ok(pieces);
        }
        let ids = recent_orders(out_num(known, 0, 0)?);
        pieces.push(Piece { reads: ids.map(|o| map_key(&h, o)).collect(), writes: vec![], immediate: true });
        let Some(temps) = output(known, 1) else { return Ok(pieces) };
        let temps: Vec<String> = temps.iter().filter(|t| !t.is_empty()).map(|t| t.to_string()).collect();
        pieces.push(Piece { reads: temps.iter().map(|t| order_key(&h, t)).collect(), writes: vec![], immediate: true });
        let Some(counts) = output(known, 2) else { return Ok(pieces) };
        let mut lines = Vec::new();
        for (t, cnt) in temps.iter().zip(counts) {
            let cnt: u32 = num(cnt, "O_OL_CNT")?;
            lines.extend((1..=cnt.min(MAX_LINES as u32)).map(|n| order_line_key(&h, t, n)));
        }
        pieces.push(Piece { reads: lines, writes: vec![], immediate: true });
        let Some(items) = output(known, 3) else { return Ok(pieces) };
        for i in items {
            pieces.push(Piece { reads: vec![stock_key(h.dpw, h.w, num(i, "OL_I_ID")?)], ..Piece::default() });
        }
        Ok(pieces)
    }
    fn run(&self, piece: usize, args: &[Value], _known: &Known, reads: &[Option<Value>]) -> Result<Ran, PieceError> {
        let (_, threshold) = stock_level_args(args)?;
        let output = match piece {
            0 => vec![v(DistrictRow::read(read(reads, 0))?.next_o_id)],
            // An id not mapped yet (its New-Order is committing) is skipped.
            1 => reads.iter().map(|r| v(r.as_ref().map_or("", |m| fields(m)))).collect(),
            2 => reads
                .iter()
                .map(|r| r.as_ref().map_or(Ok(0), |o| OrderRow::parse(o).map(|o| o.ol_cnt)).map(v))
                .collect::<Result<_, String>>()?,
            3 => {
                let mut items = std::collections::BTreeSet::new();
                for r in reads.iter().flatten() {
                    items.insert(OrderLineRow::parse(r)?.i_id);
                }
                items.into_iter().map(v).collect()
            }
            _ => vec![v(u8::from(stock_quantity(read(reads, 0))? < i64::from(threshold)))],
        };
        Ok(Ran { writes: Vec::new(), output })
    }
}
