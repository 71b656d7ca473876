//! TPC-C (TPC Benchmark C, standard specification rev. 5.11) as stored procedures: the five transactions
//! (§2.4–2.8) over a key-value schema in which every row is one key. The workload that loads, drives and
//! audits them lives in the harness (`snowline_harness::tpcc`); `docs/WORKLOADS.md` has the whole picture.
//!
//! # Placement
//!
//! District `(w, d)` of a store with `dpw` districts per warehouse has the global number
//! `g = (w − 1)·dpw + (d − 1)`. Every row is a *pinned* key `{pin}…` ([`crate::Topology::partition_of`]:
//! it lives at partition `pin mod partitions`), and the pin follows from `dpw` alone, so a procedure computes
//! it from its arguments ([`District::pin`], [`warehouse_key`], [`stock_key`]):
//!
//! - **`dpw == 10`** (TPC-C's ten districts, the `standard` set-up): a warehouse is one unit of placement,
//!   as TPC-C implementations partition. Every row of warehouse `w` — the warehouse, its districts and their
//!   customers, history, orders, new-orders, order lines, indexes and mappings, and its STOCK rows — is
//!   pinned `{w − 1}`. Only a remote supply line (another warehouse's stock) or a remote Payment's customer
//!   makes a transaction span partitions.
//! - **any other `dpw`** (the `snow` set-up's one oversized warehouse of `10 × partitions` districts): every
//!   row of a district (the district itself, its delivery pointer, customers, the customers' history,
//!   orders, new-orders, order lines, the last-name index) is pinned `{g}`, so a district's rows live
//!   together (Rococo's district-sharded TPC-C, the SNOW paper's set-up, §6.2). A warehouse row is pinned
//!   with its first district (`{(w − 1)·dpw}`, as Rococo places it with district 0's server). A stock row is
//!   pinned by its item (`{i}`), spreading the stock table over the servers.
//!
//! (The SNOW set-up on one server has `dpw == 10` and is placed by warehouse: on one partition both rules
//! place every row on it.)
//!
//! # Keys and rows
//!
//! | table | key | value fields (`,`-separated) |
//! | --- | --- | --- |
//! | WAREHOUSE | `{g0}w/W` (`{w − 1}` by warehouse) | `W_YTD,W_TAX` |
//! | DISTRICT | `{g}d/W/D` (`{g}`: the district's pin, [`District::pin`]) | `D_NEXT_O_ID,D_TAX` |
//! | DISTRICT's year-to-date | `{g}dy/W/D` | `D_YTD` |
//! | delivery pointer | `{g}dp/W/D` | the oldest undelivered `O_ID` (= min `NO_O_ID` while any is left) |
//! | CUSTOMER | `{g}c/W/D/C` | `C_BALANCE,C_YTD_PAYMENT,C_PAYMENT_CNT,C_DELIVERY_CNT,C_CREDIT,C_DISCOUNT,C_LAST,C_FIRST,C_DATA` |
//! | last-name index | `{g}cl/W/D/LAST` | the `C_ID`s with that `C_LAST`, space-separated, sorted by `C_FIRST` |
//! | customer's last order | `{g}co/W/D/C` | the customer's most recent `O_ID` (Order-Status's index) |
//! | HISTORY | `{g}ch/W/D/C` | the customer's history rows, space-separated, each `H_W_ID.H_D_ID.H_AMOUNT` |
//! | ORDER | `{g}o/W/D/O` | `O_C_ID,O_ENTRY_D,O_CARRIER_ID,O_OL_CNT,O_ALL_LOCAL` |
//! | NEW-ORDER | `{g}no/W/D/O` | `new` while the order is undelivered, `delivered` once Delivery removed it |
//! | ORDER-LINE | `{g}ol/W/D/O/N` | `OL_I_ID,OL_SUPPLY_W_ID,OL_DELIVERY_D,OL_QUANTITY,OL_AMOUNT` |
//! | STOCK | `{I}s/W/I` (`{w − 1}` by warehouse) | `S_QUANTITY,S_YTD,S_ORDER_CNT,S_REMOTE_CNT` |
//!
//! Every value ends in `;TAG`, a tag unique to the write (`TOKEN.PIECE.J` for a procedure, the token being
//! unique per attempt; `load.N` for the loader): the history checker needs every written value unique. Money
//! is in cents, rates (`W_TAX`, `D_TAX`, `C_DISCOUNT`) in units of 1/10000, dates are opaque numbers the
//! client passes, and a null date or carrier is `0`. Fields no transaction or consistency condition reads
//! (names, addresses, `S_DIST_xx`, `S_DATA`, `OL_DIST_INFO`, `H_DATA`) are not stored. `C_DATA` is kept to
//! [`C_DATA_MAX`] characters instead of 500.
//!
//! ITEM is read-only and not stored: an item's price is a function of its number ([`item_price`]); items
//! `1..=ITEMS` exist, and New-Order's argument `ITEMS` says how many (an item above it is the "unused item"
//! of the 1% rollback, §2.4.1.4, which aborts the transaction with cause `user`).
//!
//! DISTRICT is two keys: New-Order reads and increments `D_NEXT_O_ID` in an immediate piece, Payment adds to
//! `D_YTD` in a deferrable one, and Rococo (whose paper conflicts TPC-C's transactions per column) refuses an
//! immediate access to a key with another transaction's deferrable access pending: in one row, every
//! New-Order of a district with a Payment under way would be refused.
//!
//! HISTORY has no primary key in TPC-C (§1.3) and no transaction reads it; it is kept as one row per
//! customer listing the customer's payments, so the audit can enumerate it (a key-value store cannot scan).
//! Deleting a NEW-ORDER row writes `delivered` (a key-value store has no delete).
//!
//! # Pieces (Rococo's classification)
//!
//! An immediate piece is one whose output later pieces' keys need; every immediate piece of a transaction
//! is at its home district's partition (a by-name lookup: at the customer's district's). The rest is
//! deferrable, with values computed from the arguments and immediate outputs only.
//!
//! - `tpcc-new-order`: the district (read and increment `D_NEXT_O_ID`: immediate); then the warehouse
//!   (`W_TAX`), the customer, one piece inserting the order, its new-order, the customer's last order and the
//!   order lines (`OL_AMOUNT` = quantity × [`item_price`]), and one piece per line updating its stock row.
//! - `tpcc-payment`: by last name, the index lookup (immediate); the warehouse (`W_YTD`), the district's
//!   `D_YTD` key, the customer (balance, year-to-date payment, payment count, `C_DATA` of a bad-credit
//!   customer) and its history row.
//! - `tpcc-order-status` (read-only): by last name, the lookup; the customer; the customer's last order
//!   (immediate), the order (immediate: `O_OL_CNT`), its lines.
//! - `tpcc-delivery`: one district per call (Rococo's district-sharded set-up runs it so; TPC-C lets a
//!   deferred Delivery's districts be delivered one by one): 0 the delivery pointer `p` (immediate); 1 the
//!   pointer again, new-order `p` and order `p` (immediate: present? customer, line count); if present,
//!   2 the claim (immediate): the pointer once more, then new-order `p` removed, `O_CARRIER_ID` set and
//!   the pointer advanced to `p + 1`, and 3 the order lines get `OL_DELIVERY_D` (immediate: the sum of
//!   `OL_AMOUNT`); then 4 the customer's balance and delivery count (deferrable). Every access to the
//!   pointer, the new-order and the order is immediate, as in Rococo's own TPC-C (whose Delivery reads and
//!   deletes the oldest new-order in one immediate piece): two Deliveries of a district that both read `p`
//!   and each deferred the pointer's write would each be a fixed parent of the other (a cycle no order
//!   can serve) and deliver `p` twice. Pieces 1 and 2 fail, before writing anything, when the pointer is no
//!   longer `p`: another Delivery took order `p` since piece 0 (under Rococo a call's immediate waves run
//!   back to back at its coordinator, the district's server, so only a remote coordinator could meet
//!   this; OCC meets it when another Delivery commits between the waves). The failure is a
//!   [`PieceError::Conflict`]: the call aborts with cause `conflict`, had no effect, and is retried by the
//!   harness like any conflict (a race is not the application's abort). Without the check a Delivery would read the pointer before and
//!   the new-order after another's claim, which no serial order explains.
//! - `tpcc-stock-level` (read-only): the district's `D_NEXT_O_ID` (immediate), the last 20 orders
//!   (immediate), their lines (immediate: the items), one stock read per distinct item.

use crate::procedure::{Known, Piece, PieceError, Procedure, Ran};
use crate::request::{Key, Value};
use std::fmt::Write as _;
use std::str::FromStr;

/// `C_DATA` is kept to this many characters (TPC-C: 500).
pub const C_DATA_MAX: usize = 100;
/// At most this many order lines per order (TPC-C: 5 to 15).
pub const MAX_LINES: usize = 15;
/// Stock-Level looks at this many most recent orders.
pub const STOCK_LEVEL_ORDERS: u32 = 20;
/// Bounds on the numbers in arguments (anything larger is refused as bad input).
const MAX_ID: u32 = 100_000_000;

/// An item's price in cents, 1.00 to 100.00 (TPC-C §4.3.3.1: I_PRICE random within [1.00 .. 100.00]),
/// computed from its number instead of stored.
pub fn item_price(item: u32) -> i64 {
    let mut h = u64::from(item).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    h ^= h >> 29;
    h = h.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h ^= h >> 32;
    100 + (h % 9_901) as i64
}

// ---------------------------------------------------------------------------------------------------------
// Keys
// ---------------------------------------------------------------------------------------------------------

/// A district: its warehouse, its number within the warehouse, and the districts per warehouse.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct District {
    pub dpw: u32,
    pub w: u32,
    pub d: u32,
}

impl District {
    /// A checked district: `1 ≤ d ≤ dpw`, `w ≥ 1`, numbers in range.
    pub fn new(dpw: u32, w: u32, d: u32) -> Result<Self, String> {
        if dpw == 0 || dpw > 100_000 || w == 0 || w > 100_000 || d == 0 || d > dpw {
            return Err(format!("no district {d} of warehouse {w} with {dpw} districts per warehouse"));
        }
        Ok(District { dpw, w, d })
    }

    /// The district's global number `g = (w − 1)·dpw + (d − 1)`: its rows' pin.
    pub fn global(&self) -> u64 {
        u64::from(self.w - 1) * u64::from(self.dpw) + u64::from(self.d - 1)
    }

    /// The district of global number `g`.
    pub fn of_global(dpw: u32, g: u64) -> Self {
        District { dpw, w: (g / u64::from(dpw)) as u32 + 1, d: (g % u64::from(dpw)) as u32 + 1 }
    }

    /// The pin of the district's rows: its warehouse's (`w − 1`) in a warehouse-partitioned store
    /// (`dpw == 10`), else its global number (module docs, "Placement").
    pub fn pin(&self) -> u64 {
        if by_warehouse(self.dpw) { u64::from(self.w - 1) } else { self.global() }
    }

    fn key(&self, table: &str, rest: &str) -> Key {
        format!("{{{}}}{table}/{}/{}{rest}", self.pin(), self.w, self.d).into()
    }

    /// The district's `D_NEXT_O_ID` and `D_TAX` (New-Order, Stock-Level).
    pub fn district_key(&self) -> Key {
        self.key("d", "")
    }
    /// The district's `D_YTD` (Payment): a key of its own, so Payment's deferrable update never meets
    /// New-Order's immediate `D_NEXT_O_ID` increment on one key (module docs).
    pub fn district_ytd_key(&self) -> Key {
        self.key("dy", "")
    }
    pub fn pointer_key(&self) -> Key {
        self.key("dp", "")
    }
    pub fn customer_key(&self, c: u32) -> Key {
        self.key("c", &format!("/{c}"))
    }
    pub fn by_name_key(&self, last: &str) -> Key {
        self.key("cl", &format!("/{last}"))
    }
    pub fn last_order_key(&self, c: u32) -> Key {
        self.key("co", &format!("/{c}"))
    }
    pub fn history_key(&self, c: u32) -> Key {
        self.key("ch", &format!("/{c}"))
    }
    pub fn order_key(&self, o: u32) -> Key {
        self.key("o", &format!("/{o}"))
    }
    pub fn new_order_key(&self, o: u32) -> Key {
        self.key("no", &format!("/{o}"))
    }
    pub fn order_line_key(&self, o: u32, n: u32) -> Key {
        self.key("ol", &format!("/{o}/{n}"))
    }
}

/// TPC-C's districts per warehouse. A store with exactly this many places whole warehouses (module docs,
/// "Placement"); the SNOW set-up's oversized warehouse (more districts) is sharded by district.
pub const DISTRICTS_PER_WAREHOUSE: u32 = 10;

/// Whether a store with `dpw` districts per warehouse pins every row by its warehouse.
pub fn by_warehouse(dpw: u32) -> bool {
    dpw == DISTRICTS_PER_WAREHOUSE
}

/// Warehouse `w`'s row: pinned by the warehouse (`dpw == 10`), else with its first district.
pub fn warehouse_key(dpw: u32, w: u32) -> Key {
    let w1 = u64::from(w.saturating_sub(1));
    let pin = if by_warehouse(dpw) { w1 } else { w1 * u64::from(dpw) };
    format!("{{{pin}}}w/{w}").into()
}

/// The stock row of item `i` in warehouse `w`: pinned by the warehouse (`dpw == 10`), else by the item.
pub fn stock_key(dpw: u32, w: u32, i: u32) -> Key {
    if by_warehouse(dpw) {
        format!("{{{}}}s/{w}/{i}", w.saturating_sub(1)).into()
    } else {
        format!("{{{i}}}s/{w}/{i}").into()
    }
}

// ---------------------------------------------------------------------------------------------------------
// Rows
// ---------------------------------------------------------------------------------------------------------

/// A row's value: its fields and the write's unique tag.
pub fn encode(fields: &str, tag: &str) -> Value {
    format!("{fields};{tag}").into()
}

/// The fields of a stored value (without its tag).
pub fn fields(value: &str) -> &str {
    value.split_once(';').map_or(value, |(f, _)| f)
}

fn num<T: FromStr>(s: &str, what: &str) -> Result<T, String> {
    s.parse().map_err(|_| format!("{what} {s:?} is not a number in range"))
}

fn split_n<'a>(v: &'a str, n: usize, table: &str) -> Result<Vec<&'a str>, String> {
    let parts: Vec<&str> = fields(v).split(',').collect();
    if parts.len() != n {
        return Err(format!("malformed {table} row {v:?}"));
    }
    Ok(parts)
}

/// A row type: encoded as comma-separated fields.
pub trait Row: Sized {
    const TABLE: &'static str;
    fn to_fields(&self) -> String;
    fn parse(value: &str) -> Result<Self, String>;
    fn value(&self, tag: &str) -> Value {
        encode(&self.to_fields(), tag)
    }
    /// Parse a read result; a missing row is an error naming the table.
    fn read(value: Option<&Value>) -> Result<Self, String> {
        Self::parse(value.ok_or_else(|| format!("no {} row", Self::TABLE))?)
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WarehouseRow {
    pub ytd: i64,
    pub tax: u32,
}

impl Row for WarehouseRow {
    const TABLE: &'static str = "warehouse";
    fn to_fields(&self) -> String {
        format!("{},{}", self.ytd, self.tax)
    }
    fn parse(v: &str) -> Result<Self, String> {
        let f = split_n(v, 2, Self::TABLE)?;
        Ok(Self { ytd: num(f[0], "W_YTD")?, tax: num(f[1], "W_TAX")? })
    }
}

/// The district row proper: what New-Order and Stock-Level read (`D_YTD` is [`DistrictYtdRow`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DistrictRow {
    pub next_o_id: u32,
    pub tax: u32,
}

impl Row for DistrictRow {
    const TABLE: &'static str = "district";
    fn to_fields(&self) -> String {
        format!("{},{}", self.next_o_id, self.tax)
    }
    fn parse(v: &str) -> Result<Self, String> {
        let f = split_n(v, 2, Self::TABLE)?;
        Ok(Self { next_o_id: num(f[0], "D_NEXT_O_ID")?, tax: num(f[1], "D_TAX")? })
    }
}

/// A district's `D_YTD`, at [`District::district_ytd_key`] (Payment).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DistrictYtdRow {
    pub ytd: i64,
}

impl Row for DistrictYtdRow {
    const TABLE: &'static str = "district year-to-date";
    fn to_fields(&self) -> String {
        self.ytd.to_string()
    }
    fn parse(v: &str) -> Result<Self, String> {
        let f = split_n(v, 1, Self::TABLE)?;
        Ok(Self { ytd: num(f[0], "D_YTD")? })
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CustomerRow {
    pub balance: i64,
    pub ytd_payment: i64,
    pub payment_cnt: u32,
    pub delivery_cnt: u32,
    /// `GC` or `BC`.
    pub credit: String,
    pub discount: u32,
    pub last: String,
    pub first: String,
    pub data: String,
}

impl Row for CustomerRow {
    const TABLE: &'static str = "customer";
    fn to_fields(&self) -> String {
        format!(
            "{},{},{},{},{},{},{},{},{}",
            self.balance,
            self.ytd_payment,
            self.payment_cnt,
            self.delivery_cnt,
            self.credit,
            self.discount,
            self.last,
            self.first,
            self.data
        )
    }
    fn parse(v: &str) -> Result<Self, String> {
        let f = split_n(v, 9, Self::TABLE)?;
        Ok(Self {
            balance: num(f[0], "C_BALANCE")?,
            ytd_payment: num(f[1], "C_YTD_PAYMENT")?,
            payment_cnt: num(f[2], "C_PAYMENT_CNT")?,
            delivery_cnt: num(f[3], "C_DELIVERY_CNT")?,
            credit: f[4].to_string(),
            discount: num(f[5], "C_DISCOUNT")?,
            last: f[6].to_string(),
            first: f[7].to_string(),
            data: f[8].to_string(),
        })
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OrderRow {
    pub c_id: u32,
    pub entry_d: u64,
    /// 0: null (undelivered).
    pub carrier: u32,
    pub ol_cnt: u32,
    pub all_local: bool,
}

impl Row for OrderRow {
    const TABLE: &'static str = "order";
    fn to_fields(&self) -> String {
        format!("{},{},{},{},{}", self.c_id, self.entry_d, self.carrier, self.ol_cnt, u8::from(self.all_local))
    }
    fn parse(v: &str) -> Result<Self, String> {
        let f = split_n(v, 5, Self::TABLE)?;
        Ok(Self {
            c_id: num(f[0], "O_C_ID")?,
            entry_d: num(f[1], "O_ENTRY_D")?,
            carrier: num(f[2], "O_CARRIER_ID")?,
            ol_cnt: num(f[3], "O_OL_CNT")?,
            all_local: num::<u8>(f[4], "O_ALL_LOCAL")? == 1,
        })
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OrderLineRow {
    pub i_id: u32,
    pub supply_w: u32,
    /// 0: null (undelivered).
    pub delivery_d: u64,
    pub qty: u32,
    pub amount: i64,
}

impl Row for OrderLineRow {
    const TABLE: &'static str = "order-line";
    fn to_fields(&self) -> String {
        format!("{},{},{},{},{}", self.i_id, self.supply_w, self.delivery_d, self.qty, self.amount)
    }
    fn parse(v: &str) -> Result<Self, String> {
        let f = split_n(v, 5, Self::TABLE)?;
        Ok(Self {
            i_id: num(f[0], "OL_I_ID")?,
            supply_w: num(f[1], "OL_SUPPLY_W_ID")?,
            delivery_d: num(f[2], "OL_DELIVERY_D")?,
            qty: num(f[3], "OL_QUANTITY")?,
            amount: num(f[4], "OL_AMOUNT")?,
        })
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StockRow {
    pub quantity: u32,
    pub ytd: u64,
    pub order_cnt: u32,
    pub remote_cnt: u32,
}

impl Row for StockRow {
    const TABLE: &'static str = "stock";
    fn to_fields(&self) -> String {
        format!("{},{},{},{}", self.quantity, self.ytd, self.order_cnt, self.remote_cnt)
    }
    fn parse(v: &str) -> Result<Self, String> {
        let f = split_n(v, 4, Self::TABLE)?;
        Ok(Self {
            quantity: num(f[0], "S_QUANTITY")?,
            ytd: num(f[1], "S_YTD")?,
            order_cnt: num(f[2], "S_ORDER_CNT")?,
            remote_cnt: num(f[3], "S_REMOTE_CNT")?,
        })
    }
}

/// A NEW-ORDER row's value: `new`, or `delivered` once Delivery removed it.
pub const NEW_ORDER: &str = "new";
pub const DELIVERED: &str = "delivered";

/// Whether a NEW-ORDER read finds an undelivered order.
pub fn new_order_present(value: Option<&Value>) -> bool {
    value.is_some_and(|v| fields(v) == NEW_ORDER)
}

/// A single number row (delivery pointer, customer's last order).
pub fn parse_number(value: Option<&Value>, what: &str) -> Result<u32, String> {
    num(fields(value.ok_or_else(|| format!("no {what} row"))?), what)
}

/// One HISTORY row of a customer: the payment's (home) warehouse and district and its amount.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HistoryEntry {
    pub w: u32,
    pub d: u32,
    pub amount: i64,
}

/// A customer's history rows.
pub fn parse_history(value: Option<&Value>) -> Result<Vec<HistoryEntry>, String> {
    let Some(v) = value else { return Ok(Vec::new()) };
    fields(v)
        .split_whitespace()
        .map(|e| {
            let p: Vec<&str> = e.split('.').collect();
            if p.len() != 3 {
                return Err(format!("malformed history entry {e:?}"));
            }
            Ok(HistoryEntry { w: num(p[0], "H_W_ID")?, d: num(p[1], "H_D_ID")?, amount: num(p[2], "H_AMOUNT")? })
        })
        .collect()
}

/// History rows as stored.
pub fn history_fields(entries: &[HistoryEntry]) -> String {
    let mut s = String::new();
    for e in entries {
        if !s.is_empty() {
            s.push(' ');
        }
        let _ = write!(s, "{}.{}.{}", e.w, e.d, e.amount);
    }
    s
}

/// The last-name index's customer ids.
pub fn parse_ids(value: Option<&Value>) -> Result<Vec<u32>, String> {
    let Some(v) = value else { return Ok(Vec::new()) };
    fields(v).split_whitespace().map(|c| num(c, "C_ID")).collect()
}

// ---------------------------------------------------------------------------------------------------------
// Arguments
// ---------------------------------------------------------------------------------------------------------

struct Args<'a> {
    args: &'a [Value],
    at: usize,
}

impl<'a> Args<'a> {
    fn new(args: &'a [Value]) -> Self {
        Args { args, at: 0 }
    }
    fn next(&mut self, what: &str) -> Result<&'a str, String> {
        let a = self.args.get(self.at).ok_or_else(|| format!("missing {what}"))?;
        self.at += 1;
        Ok(a)
    }
    fn num<T: FromStr + PartialOrd + Copy + std::fmt::Display>(
        &mut self,
        what: &str,
        lo: T,
        hi: T,
    ) -> Result<T, String> {
        let a = self.next(what)?;
        let n: T = num(a, what)?;
        if n < lo || n > hi {
            return Err(format!("{what} {n} is not in [{lo}, {hi}]"));
        }
        Ok(n)
    }
    fn token(&mut self) -> Result<&'a str, String> {
        let t = self.next("TOKEN")?;
        let ok = !t.is_empty()
            && t.len() <= 64
            && t.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b':' | b'.'));
        if !ok {
            return Err(format!("token {t:?}: 1 to 64 of [A-Za-z0-9-_:.]"));
        }
        Ok(t)
    }
    fn district(&mut self) -> Result<District, String> {
        let dpw = self.num("DPW", 1, 100_000)?;
        let w = self.num("W", 1, 100_000)?;
        let d = self.num("D", 1, dpw)?;
        District::new(dpw, w, d)
    }
    fn customer(&mut self) -> Result<Customer, String> {
        let c = self.next("CUSTOMER")?;
        if let Some(id) = c.strip_prefix("id:") {
            let id: u32 = num(id, "C_ID")?;
            if id == 0 || id > MAX_ID {
                return Err(format!("customer id {id} out of range"));
            }
            return Ok(Customer::Id(id));
        }
        if let Some(last) = c.strip_prefix("name:")
            && !last.is_empty()
            && last.len() <= 32
            && last.bytes().all(|b| b.is_ascii_alphanumeric())
        {
            return Ok(Customer::Name(last.to_string()));
        }
        Err(format!("customer {c:?}: id:C_ID or name:C_LAST (letters and digits)"))
    }
    fn done(&self) -> Result<(), String> {
        if self.at != self.args.len() {
            return Err(format!("{} arguments left over", self.args.len() - self.at));
        }
        Ok(())
    }
}

/// How Payment and Order-Status select their customer (§2.5.1.2: 60% by last name, 40% by number).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Customer {
    Id(u32),
    Name(String),
}

impl std::fmt::Display for Customer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Customer::Id(c) => write!(f, "id:{c}"),
            Customer::Name(n) => write!(f, "name:{n}"),
        }
    }
}

fn tag(token: &str, piece: usize, j: usize) -> String {
    format!("{token}.{piece}.{j}")
}

fn output(known: &Known, i: usize) -> Option<&[Value]> {
    known.get(i).and_then(|k| k.as_deref())
}

fn out_num<T: FromStr>(known: &Known, i: usize, at: usize) -> Result<T, String> {
    let out = output(known, i).ok_or_else(|| format!("piece {i} has not run"))?;
    let v = out.get(at).ok_or_else(|| format!("piece {i}'s output has no field {at}"))?;
    num(v, "output")
}

fn v(s: impl ToString) -> Value {
    s.to_string().into()
}

/// The customer a by-name lookup selects: the one at position ⌈n/2⌉ of those with the name, sorted by
/// `C_FIRST` (§2.5.2.2).
fn by_name_pick(ids: &[u32]) -> Result<u32, String> {
    if ids.is_empty() {
        return Err("no customer with that last name".into());
    }
    Ok(ids[ids.len().div_ceil(2) - 1])
}

/// The lookup piece: read the index row; output the selected customer id.
fn lookup_piece(district: &District, last: &str) -> Piece {
    Piece { reads: vec![district.by_name_key(last)], writes: Vec::new(), immediate: true }
}

fn run_lookup(reads: &[Option<Value>]) -> Result<Ran, PieceError> {
    let ids = parse_ids(reads.first().and_then(Option::as_ref))?;
    Ok(Ran { writes: Vec::new(), output: vec![v(by_name_pick(&ids)?)] })
}

/// The customer id: given, or the lookup's (piece 0) output once it ran.
fn customer_id(c: &Customer, known: &Known) -> Result<Option<u32>, String> {
    match c {
        Customer::Id(id) => Ok(Some(*id)),
        Customer::Name(_) if output(known, 0).is_none() => Ok(None),
        Customer::Name(_) => out_num(known, 0, 0).map(Some),
    }
}

fn read(reads: &[Option<Value>], i: usize) -> Option<&Value> {
    reads.get(i).and_then(Option::as_ref)
}

// ---------------------------------------------------------------------------------------------------------
// New-Order
// ---------------------------------------------------------------------------------------------------------

/// `tpcc-new-order` (§2.4).
pub struct NewOrder;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Line {
    pub item: u32,
    pub supply_w: u32,
    pub qty: u32,
}

struct NewOrderArgs<'a> {
    token: &'a str,
    district: District,
    c: u32,
    items: u32,
    entry_d: u64,
    lines: Vec<Line>,
}

fn new_order_args(args: &[Value]) -> Result<NewOrderArgs<'_>, String> {
    let mut a = Args::new(args);
    let token = a.token()?;
    let district = a.district()?;
    let c = a.num("C", 1, MAX_ID)?;
    let items = a.num("ITEMS", 1, MAX_ID)?;
    let entry_d = a.num("ENTRY_D", 1, u64::MAX / 2)?;
    let mut lines = Vec::new();
    while a.at < args.len() {
        let item = a.num("OL_I_ID", 1, MAX_ID)?;
        let supply_w = a.num("OL_SUPPLY_W_ID", 1, 100_000)?;
        let qty = a.num("OL_QUANTITY", 1, 100)?;
        if lines.iter().any(|l: &Line| (l.item, l.supply_w) == (item, supply_w)) {
            return Err(format!("item {item} of warehouse {supply_w} is ordered twice"));
        }
        lines.push(Line { item, supply_w, qty });
    }
    a.done()?;
    if lines.is_empty() || lines.len() > MAX_LINES {
        return Err(format!("{} order lines; 1 to {MAX_LINES}", lines.len()));
    }
    Ok(NewOrderArgs { token, district, c, items, entry_d, lines })
}

/// New-Order's pieces: 0 district (immediate), then 1 warehouse, 2 customer, 3 insert, 4.. one stock piece
/// per line.
impl Procedure for NewOrder {
    fn name(&self) -> &'static str {
        "tpcc-new-order"
    }
    fn usage(&self) -> &'static str {
        "tpcc-new-order TOKEN DPW W D C ITEMS ENTRY_D [OL_I_ID OL_SUPPLY_W_ID OL_QUANTITY]×(1..15)"
    }
    fn plan(&self, args: &[Value], known: &Known) -> Result<Vec<Piece>, String> {
        let a = new_order_args(args)?;
        let h = a.district;
        let mut pieces = vec![Piece { reads: vec![h.district_key()], writes: vec![h.district_key()], immediate: true }];
        if output(known, 0).is_none() {
            return Ok(pieces);
        }
        let o: u32 = out_num(known, 0, 0)?;
        pieces.push(Piece { reads: vec![warehouse_key(h.dpw, h.w)], ..Piece::default() });
        pieces.push(Piece { reads: vec![h.customer_key(a.c)], ..Piece::default() });
        let mut insert = vec![h.order_key(o), h.new_order_key(o), h.last_order_key(a.c)];
        insert.extend((1..=a.lines.len() as u32).map(|n| h.order_line_key(o, n)));
        pieces.push(Piece { writes: insert, ..Piece::default() });
        for l in &a.lines {
            let s = stock_key(h.dpw, l.supply_w, l.item);
            pieces.push(Piece { reads: vec![s.clone()], writes: vec![s], immediate: false });
        }
        Ok(pieces)
    }
    fn run(&self, piece: usize, args: &[Value], known: &Known, reads: &[Option<Value>]) -> Result<Ran, PieceError> {
        let a = new_order_args(args)?;
        let h = a.district;
        match piece {
            0 => {
                if a.lines.iter().any(|l| l.item > a.items) {
                    return Err("item number is not valid".into());
                }
                let mut d = DistrictRow::read(read(reads, 0))?;
                let o = d.next_o_id;
                d.next_o_id = o.checked_add(1).filter(|n| *n <= MAX_ID).ok_or("D_NEXT_O_ID overflows")?;
                Ok(Ran { writes: vec![d.value(&tag(a.token, 0, 0))], output: vec![v(o), v(d.tax)] })
            }
            1 => Ok(Ran { writes: Vec::new(), output: vec![v(WarehouseRow::read(read(reads, 0))?.tax)] }),
            2 => {
                let c = CustomerRow::read(read(reads, 0))?;
                Ok(Ran { writes: Vec::new(), output: vec![v(c.discount), v(c.last), v(c.credit)] })
            }
            3 => {
                let o: u32 = out_num(known, 0, 0)?;
                let all_local = a.lines.iter().all(|l| l.supply_w == h.w);
                let order =
                    OrderRow { c_id: a.c, entry_d: a.entry_d, carrier: 0, ol_cnt: a.lines.len() as u32, all_local };
                let mut writes = vec![
                    order.value(&tag(a.token, 3, 0)),
                    encode(NEW_ORDER, &tag(a.token, 3, 1)),
                    encode(&o.to_string(), &tag(a.token, 3, 2)),
                ];
                for (n, l) in a.lines.iter().enumerate() {
                    let line = OrderLineRow {
                        i_id: l.item,
                        supply_w: l.supply_w,
                        delivery_d: 0,
                        qty: l.qty,
                        amount: i64::from(l.qty) * item_price(l.item),
                    };
                    writes.push(line.value(&tag(a.token, 3, 3 + n)));
                }
                Ok(Ran { writes, output: Vec::new() })
            }
            p => {
                let l = a.lines.get(p - 4).ok_or_else(|| format!("no piece {p}"))?;
                let mut s = StockRow::read(read(reads, 0))?;
                s.quantity = if s.quantity >= l.qty + 10 { s.quantity - l.qty } else { s.quantity + 91 - l.qty };
                s.ytd = s.ytd.saturating_add(u64::from(l.qty));
                s.order_cnt = s.order_cnt.saturating_add(1);
                if l.supply_w != h.w {
                    s.remote_cnt = s.remote_cnt.saturating_add(1);
                }
                Ok(Ran { writes: vec![s.value(&tag(a.token, p, 0))], output: vec![v(s.quantity)] })
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------------------
// Payment
// ---------------------------------------------------------------------------------------------------------

/// `tpcc-payment` (§2.5).
pub struct Payment;

struct PaymentArgs<'a> {
    token: &'a str,
    district: District,
    customer_district: District,
    customer: Customer,
    amount: i64,
}

fn payment_args(args: &[Value]) -> Result<PaymentArgs<'_>, String> {
    let mut a = Args::new(args);
    let token = a.token()?;
    let district = a.district()?;
    let cw = a.num("C_W_ID", 1, 100_000)?;
    let cd = a.num("C_D_ID", 1, district.dpw)?;
    let customer = a.customer()?;
    let amount = a.num("H_AMOUNT", 1, 100_000_000)?;
    a.done()?;
    Ok(PaymentArgs { token, district, customer_district: District::new(district.dpw, cw, cd)?, customer, amount })
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum PaymentPiece {
    Lookup,
    Warehouse,
    District,
    Customer(u32),
    History(u32),
}

fn payment_layout(a: &PaymentArgs<'_>, known: &Known) -> Result<Vec<(PaymentPiece, Piece)>, String> {
    let h = a.district;
    let cd = a.customer_district;
    let mut out = Vec::new();
    if let Customer::Name(last) = &a.customer {
        out.push((PaymentPiece::Lookup, lookup_piece(&cd, last)));
    }
    let wk = warehouse_key(h.dpw, h.w);
    out.push((PaymentPiece::Warehouse, Piece { reads: vec![wk.clone()], writes: vec![wk], immediate: false }));
    let dk = h.district_ytd_key();
    out.push((PaymentPiece::District, Piece { reads: vec![dk.clone()], writes: vec![dk], immediate: false }));
    if let Some(c) = customer_id(&a.customer, known)? {
        let ck = cd.customer_key(c);
        out.push((PaymentPiece::Customer(c), Piece { reads: vec![ck.clone()], writes: vec![ck], immediate: false }));
        let hk = cd.history_key(c);
        out.push((PaymentPiece::History(c), Piece { reads: vec![hk.clone()], writes: vec![hk], immediate: false }));
    }
    Ok(out)
}

impl Procedure for Payment {
    fn name(&self) -> &'static str {
        "tpcc-payment"
    }
    fn usage(&self) -> &'static str {
        "tpcc-payment TOKEN DPW W D C_W_ID C_D_ID (id:C_ID|name:C_LAST) H_AMOUNT"
    }
    fn plan(&self, args: &[Value], known: &Known) -> Result<Vec<Piece>, String> {
        let a = payment_args(args)?;
        Ok(payment_layout(&a, known)?.into_iter().map(|(_, p)| p).collect())
    }
    fn run(&self, piece: usize, args: &[Value], known: &Known, reads: &[Option<Value>]) -> Result<Ran, PieceError> {
        let a = payment_args(args)?;
        let layout = payment_layout(&a, known)?;
        let (role, _) = layout.get(piece).ok_or_else(|| format!("no piece {piece}"))?;
        let t = tag(a.token, piece, 0);
        let writes = match *role {
            PaymentPiece::Lookup => return run_lookup(reads),
            PaymentPiece::Warehouse => {
                let mut w = WarehouseRow::read(read(reads, 0))?;
                w.ytd = w.ytd.checked_add(a.amount).ok_or("W_YTD overflows")?;
                vec![w.value(&t)]
            }
            PaymentPiece::District => {
                let mut d = DistrictYtdRow::read(read(reads, 0))?;
                d.ytd = d.ytd.checked_add(a.amount).ok_or("D_YTD overflows")?;
                vec![d.value(&t)]
            }
            PaymentPiece::Customer(c_id) => {
                let mut c = CustomerRow::read(read(reads, 0))?;
                c.balance = c.balance.checked_sub(a.amount).ok_or("C_BALANCE overflows")?;
                c.ytd_payment = c.ytd_payment.checked_add(a.amount).ok_or("C_YTD_PAYMENT overflows")?;
                c.payment_cnt = c.payment_cnt.saturating_add(1);
                if c.credit == "BC" {
                    let (cd, h) = (a.customer_district, a.district);
                    let mut data = format!("{c_id} {} {} {} {} {} {}", cd.d, cd.w, h.d, h.w, a.amount, c.data);
                    data.truncate(C_DATA_MAX);
                    c.data = data.trim_end().to_string();
                }
                vec![c.value(&t)]
            }
            PaymentPiece::History(_) => {
                let mut entries = parse_history(read(reads, 0))?;
                entries.push(HistoryEntry { w: a.district.w, d: a.district.d, amount: a.amount });
                vec![encode(&history_fields(&entries), &t)]
            }
        };
        Ok(Ran { writes, output: Vec::new() })
    }
}

// ---------------------------------------------------------------------------------------------------------
// Order-Status
// ---------------------------------------------------------------------------------------------------------

/// `tpcc-order-status` (§2.6), read-only.
pub struct OrderStatus;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum StatusPiece {
    Lookup,
    Customer,
    LastOrder,
    Order,
    Lines,
}

fn order_status_layout(args: &[Value], known: &Known) -> Result<Vec<(StatusPiece, Piece)>, String> {
    let mut a = Args::new(args);
    let h = a.district()?;
    let customer = a.customer()?;
    a.done()?;
    let mut out = Vec::new();
    if let Customer::Name(last) = &customer {
        out.push((StatusPiece::Lookup, lookup_piece(&h, last)));
    }
    let Some(c) = customer_id(&customer, known)? else { return Ok(out) };
    out.push((StatusPiece::Customer, Piece { reads: vec![h.customer_key(c)], ..Piece::default() }));
    let last_at = out.len();
    out.push((StatusPiece::LastOrder, Piece { reads: vec![h.last_order_key(c)], writes: vec![], immediate: true }));
    if output(known, last_at).is_none() {
        return Ok(out);
    }
    let o: u32 = out_num(known, last_at, 0)?;
    if o == 0 {
        return Ok(out);
    }
    out.push((StatusPiece::Order, Piece { reads: vec![h.order_key(o)], writes: vec![], immediate: true }));
    if output(known, last_at + 1).is_none() {
        return Ok(out);
    }
    let cnt: u32 = out_num(known, last_at + 1, 0)?;
    if cnt > 0 {
        let lines = (1..=cnt.min(MAX_LINES as u32)).map(|n| h.order_line_key(o, n)).collect();
        out.push((StatusPiece::Lines, Piece { reads: lines, ..Piece::default() }));
    }
    Ok(out)
}

impl Procedure for OrderStatus {
    fn name(&self) -> &'static str {
        "tpcc-order-status"
    }
    fn usage(&self) -> &'static str {
        "tpcc-order-status DPW W D (id:C_ID|name:C_LAST)"
    }
    fn read_only(&self) -> bool {
        true
    }
    fn plan(&self, args: &[Value], known: &Known) -> Result<Vec<Piece>, String> {
        Ok(order_status_layout(args, known)?.into_iter().map(|(_, p)| p).collect())
    }
    fn run(&self, piece: usize, args: &[Value], known: &Known, reads: &[Option<Value>]) -> Result<Ran, PieceError> {
        let layout = order_status_layout(args, known)?;
        let (role, _) = layout.get(piece).ok_or_else(|| format!("no piece {piece}"))?;
        let output = match role {
            StatusPiece::Lookup => return run_lookup(reads),
            StatusPiece::Customer => {
                let c = CustomerRow::read(read(reads, 0))?;
                vec![v(c.balance), v(c.first), v(c.last)]
            }
            // A customer without an order (possible when the store has fewer orders than customers): 0.
            StatusPiece::LastOrder => match read(reads, 0) {
                None => vec![v(0)],
                some => vec![v(parse_number(some, "customer's last order")?)],
            },
            StatusPiece::Order => {
                let o = OrderRow::read(read(reads, 0))?;
                vec![v(o.ol_cnt), v(o.entry_d), v(o.carrier)]
            }
            StatusPiece::Lines => {
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
// Delivery
// ---------------------------------------------------------------------------------------------------------

/// `tpcc-delivery` (§2.7), one district per call.
pub struct Delivery;

struct DeliveryArgs<'a> {
    token: &'a str,
    district: District,
    carrier: u32,
    date: u64,
}

fn delivery_args(args: &[Value]) -> Result<DeliveryArgs<'_>, String> {
    let mut a = Args::new(args);
    let token = a.token()?;
    let district = a.district()?;
    let carrier = a.num("O_CARRIER_ID", 1, 10)?;
    let date = a.num("OL_DELIVERY_D", 1, u64::MAX / 2)?;
    a.done()?;
    Ok(DeliveryArgs { token, district, carrier, date })
}

/// What Delivery's check piece (1) found: the oldest undelivered order, if any.
struct Found {
    o: u32,
    order: OrderRow,
}

fn delivery_found(known: &Known) -> Result<Option<Option<Found>>, String> {
    let Some(out) = output(known, 1) else { return Ok(None) };
    if out.first().map(|p| &**p) != Some("1") {
        return Ok(Some(None));
    }
    let o: u32 = out_num(known, 0, 0)?;
    let order = OrderRow::parse(out.get(1).ok_or("the check's output has no order")?)?;
    Ok(Some(Some(Found { o, order })))
}

/// The check of pieces 1 and 2: the pointer still at `o`, the order piece 0 chose. If another Delivery
/// advanced it since, this one read the pointer before that Delivery's claim and would read the rows after
/// it: no serial order has both, so it fails, before writing anything.
fn pointer_unmoved(value: Option<&Value>, o: u32) -> Result<(), PieceError> {
    let now = parse_number(value, "delivery pointer")?;
    if now != o {
        return Err(PieceError::Conflict(format!(
            "the delivery pointer moved from {o} to {now}: a concurrent Delivery took order {o}"
        )));
    }
    Ok(())
}

impl Procedure for Delivery {
    fn name(&self) -> &'static str {
        "tpcc-delivery"
    }
    fn usage(&self) -> &'static str {
        "tpcc-delivery TOKEN DPW W D O_CARRIER_ID OL_DELIVERY_D"
    }
    /// 0 pointer (immediate), 1 check: pointer, new-order and order (immediate); if an order is found:
    /// 2 claim: pointer and new-order read, new-order, order and pointer written (immediate), 3 order lines
    /// (immediate: the amount), 4 customer. No piece accesses the pointer, the new-order or the order
    /// deferred (module docs).
    fn plan(&self, args: &[Value], known: &Known) -> Result<Vec<Piece>, String> {
        let a = delivery_args(args)?;
        let h = a.district;
        let mut pieces = vec![Piece { reads: vec![h.pointer_key()], writes: vec![], immediate: true }];
        if output(known, 0).is_none() {
            return Ok(pieces);
        }
        let o: u32 = out_num(known, 0, 0)?;
        let check = vec![h.pointer_key(), h.new_order_key(o), h.order_key(o)];
        pieces.push(Piece { reads: check, writes: vec![], immediate: true });
        // The claim declares its writes only once the check found the order: a piece writes every key it
        // declares, and a Delivery that finds nothing writes nothing.
        let Some(Some(found)) = delivery_found(known)? else { return Ok(pieces) };
        pieces.push(Piece {
            reads: vec![h.pointer_key(), h.new_order_key(o)],
            writes: vec![h.new_order_key(o), h.order_key(o), h.pointer_key()],
            immediate: true,
        });
        let lines: Vec<Key> = (1..=found.order.ol_cnt.min(MAX_LINES as u32)).map(|n| h.order_line_key(o, n)).collect();
        pieces.push(Piece { reads: lines.clone(), writes: lines, immediate: true });
        // The customer piece's value needs the lines' amount: it comes in the wave after them (a deferrable
        // piece sees only the outputs of earlier waves' immediate pieces).
        if output(known, 3).is_none() {
            return Ok(pieces);
        }
        let ck = h.customer_key(found.order.c_id);
        pieces.push(Piece { reads: vec![ck.clone()], writes: vec![ck], immediate: false });
        Ok(pieces)
    }
    fn run(&self, piece: usize, args: &[Value], known: &Known, reads: &[Option<Value>]) -> Result<Ran, PieceError> {
        let a = delivery_args(args)?;
        let t = |j| tag(a.token, piece, j);
        match piece {
            0 => Ok(Ran { writes: vec![], output: vec![v(parse_number(read(reads, 0), "delivery pointer")?)] }),
            1 => {
                pointer_unmoved(read(reads, 0), out_num(known, 0, 0)?)?;
                let order = read(reads, 2);
                if !new_order_present(read(reads, 1)) || order.is_none() {
                    return Ok(Ran { writes: vec![], output: vec![v(0)] });
                }
                let order = OrderRow::read(order)?;
                Ok(Ran { writes: vec![], output: vec![v(1), v(order.to_fields())] })
            }
            2 => {
                let Some(Some(found)) = delivery_found(known)? else { return Err("no order to deliver".into()) };
                pointer_unmoved(read(reads, 0), found.o)?;
                if !new_order_present(read(reads, 1)) {
                    return Err(format!("new-order {} is gone while the pointer is still at it", found.o).into());
                }
                let order = OrderRow { carrier: a.carrier, ..found.order };
                Ok(Ran {
                    writes: vec![
                        encode(DELIVERED, &t(0)),
                        order.value(&t(1)),
                        encode(&(found.o + 1).to_string(), &t(2)),
                    ],
                    output: vec![],
                })
            }
            3 => {
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
            4 => {
                let sum: i64 = out_num(known, 3, 0)?;
                let mut c = CustomerRow::read(read(reads, 0))?;
                c.balance = c.balance.checked_add(sum).ok_or("C_BALANCE overflows")?;
                c.delivery_cnt = c.delivery_cnt.saturating_add(1);
                Ok(Ran { writes: vec![c.value(&t(0))], output: vec![] })
            }
            p => Err(format!("no piece {p}").into()),
        }
    }
}

// ---------------------------------------------------------------------------------------------------------
// Stock-Level
// ---------------------------------------------------------------------------------------------------------

/// `tpcc-stock-level` (§2.8), read-only.
pub struct StockLevel;

fn stock_level_args(args: &[Value]) -> Result<(District, u32), String> {
    let mut a = Args::new(args);
    let h = a.district()?;
    let threshold = a.num("THRESHOLD", 1, 1_000)?;
    a.done()?;
    Ok((h, threshold))
}

/// The orders Stock-Level examines, given `D_NEXT_O_ID`.
fn recent_orders(next: u32) -> std::ops::Range<u32> {
    next.saturating_sub(STOCK_LEVEL_ORDERS).max(1)..next.max(1)
}

impl Procedure for StockLevel {
    fn name(&self) -> &'static str {
        "tpcc-stock-level"
    }
    fn usage(&self) -> &'static str {
        "tpcc-stock-level DPW W D THRESHOLD"
    }
    fn read_only(&self) -> bool {
        true
    }
    /// 0 district (immediate), 1 the last 20 orders (immediate), 2 their lines (immediate), 3.. one stock
    /// read per distinct item.
    fn plan(&self, args: &[Value], known: &Known) -> Result<Vec<Piece>, String> {
        let (h, _) = stock_level_args(args)?;
        let mut pieces = vec![Piece { reads: vec![h.district_key()], writes: vec![], immediate: true }];
        if output(known, 0).is_none() {
            return Ok(pieces);
        }
        let orders = recent_orders(out_num(known, 0, 0)?);
        pieces.push(Piece { reads: orders.clone().map(|o| h.order_key(o)).collect(), writes: vec![], immediate: true });
        let Some(counts) = output(known, 1) else { return Ok(pieces) };
        let mut lines = Vec::new();
        for (o, cnt) in orders.zip(counts) {
            let cnt: u32 = num(cnt, "O_OL_CNT")?;
            lines.extend((1..=cnt.min(MAX_LINES as u32)).map(|n| h.order_line_key(o, n)));
        }
        pieces.push(Piece { reads: lines, writes: vec![], immediate: true });
        let Some(items) = output(known, 2) else { return Ok(pieces) };
        for i in items {
            pieces.push(Piece { reads: vec![stock_key(h.dpw, h.w, num(i, "OL_I_ID")?)], ..Piece::default() });
        }
        Ok(pieces)
    }
    fn run(&self, piece: usize, args: &[Value], _known: &Known, reads: &[Option<Value>]) -> Result<Ran, PieceError> {
        let (_, threshold) = stock_level_args(args)?;
        let output = match piece {
            0 => vec![v(DistrictRow::read(read(reads, 0))?.next_o_id)],
            // A missing order (none can be, under serializability) counts as one without lines.
            1 => reads
                .iter()
                .map(|r| r.as_ref().map_or(Ok(0), |o| OrderRow::parse(o).map(|o| o.ol_cnt)).map(v))
                .collect::<Result<_, String>>()?,
            2 => {
                let mut items = std::collections::BTreeSet::new();
                for r in reads.iter().flatten() {
                    items.insert(OrderLineRow::parse(r)?.i_id);
                }
                items.into_iter().map(v).collect()
            }
            _ => {
                let s = StockRow::read(read(reads, 0))?;
                vec![v(u8::from(s.quantity < threshold))]
            }
        };
        Ok(Ran { writes: Vec::new(), output })
    }
}

pub mod coordfree;

#[cfg(test)]
mod tests;
