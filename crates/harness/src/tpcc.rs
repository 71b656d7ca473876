//! The `tpcc` workload: TPC-C's initial database (the loader), its terminals (the generator) and its
//! consistency audit (the 12 conditions of TPC-C §3.3.2), over the stored procedures of
//! [`snowline_core::tpcc`] (which documents the key schema). `docs/WORKLOADS.md` has the whole picture.
//!
//! Two set-ups ([`Setup`]):
//! - `snow` (the default): the SNOW paper's (§6.2) and Rococo's district-sharded TPC-C: one warehouse with
//!   10 districts per server (`10 × partitions` districts), a district's rows on its server, clients pinned
//!   to a home district (client `i` → district `i mod districts`) for every transaction, no remote order
//!   lines or payments (there is no other warehouse), and no New-Order rollback (Rococo's evaluation runs
//!   without it; `--tpcc-rollback` turns it on).
//! - `standard`: TPC-C's own: `--tpcc-warehouses W` warehouses of 10 districts; a client's home district
//!   fixes its warehouse (and Stock-Level's district), New-Order, Payment and Order-Status pick a district of
//!   the home warehouse at random, 1% of order lines come from a remote warehouse and 15% of Payments pay
//!   for a customer of a remote warehouse (when there is more than one), and 1% of New-Orders roll back.
//!   A Delivery is one call per district of the home warehouse.
//!
//! Placement follows the districts per warehouse (`snowline_core::tpcc`, "Placement"): the standard
//! set-up's warehouses of 10 districts are each one unit of placement (every row of warehouse `w`, its
//! stock included, on partition `(w − 1) mod partitions`), while the SNOW set-up's oversized warehouse is
//! sharded by district with its stock spread by item. In the standard set-up, client `i`'s home warehouse
//! is `i mod W + 1` (terminals spread evenly over the warehouses, hence over the servers) and its home
//! district `(i / W) mod 10 + 1`.
//!
//! Scales ([`Scale`]): `full` is TPC-C's population (100,000 items, 3,000 customers and 3,000 orders per
//! district, the last 900 undelivered); `small` (for tests) has 1,000 items and 30 customers and 30 orders
//! per district (the last 9 undelivered), so a simulated run loads in well under a second; `items` has the
//! full scale's 100,000 items and stock rows with the small scale's customers and orders, so Stock-Level's
//! stock reads meet New-Order's stock writes as often as at full scale (`reproduce snow-rococo` uses it);
//! `tiny` has 100 items and 10 customers and 10 orders per district (the last 3 undelivered), so that
//! hundreds of warehouses load and audit in seconds (`reproduce coordination` uses it).
//!
//! The mix is 44% New-Order, 44% Payment, 4% each Order-Status, Delivery and Stock-Level (the SNOW paper's;
//! TPC-C's minimum mix is 45/43/4/4/4); `--tpcc-new-order-only` runs New-Order alone (the coordination-
//! avoidance paper's experiment). `--tpcc-distributed PCT` (standard set-up, two or more warehouses) replaces
//! TPC-C's 1% remote lines: PCT% of New-Orders get exactly one line (the first) supplied by a remote
//! warehouse, on another partition when there is one, and the others none (the paper's Fig. 5 sweep). Non-uniform random numbers follow §2.1.6 (NURand with A = 255 for
//! last names, 1023 for customer ids, 8191 for items; `C` drawn once per run from the seed). Dates
//! (`O_ENTRY_D`, `OL_DELIVERY_D`) are the client's operation counter.

use crate::workload::{CallJob, Job};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde::Serialize;
use snowline_core::tpcc::coordfree;
use snowline_core::tpcc::{
    self, CustomerRow, District, DistrictRow, DistrictYtdRow, HistoryEntry, OrderLineRow, OrderRow, Row, StockRow,
    WarehouseRow,
};
use snowline_core::{Key, Topology, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

/// Which TPC-C set-up (module docs).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub enum Setup {
    #[default]
    Snow,
    Standard,
}

impl std::str::FromStr for Setup {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "snow" | "rococo" => Ok(Setup::Snow),
            "standard" => Ok(Setup::Standard),
            other => Err(format!("unknown TPC-C set-up {other:?}: snow or standard")),
        }
    }
}

/// The population's size (module docs).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub enum Scale {
    #[default]
    Full,
    Small,
    /// TPC-C's 100,000 items and stock rows with the small scale's customers and orders: Stock-Level's
    /// stock reads contend as in the full population, and a sweep still loads and audits in seconds.
    Items,
    /// 100 items, 10 customers and 10 orders per district: hundreds of warehouses in seconds.
    Tiny,
}

impl std::str::FromStr for Scale {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "full" => Ok(Scale::Full),
            "small" => Ok(Scale::Small),
            "items" => Ok(Scale::Items),
            "tiny" => Ok(Scale::Tiny),
            other => Err(format!("unknown TPC-C scale {other:?}: full, small, items or tiny")),
        }
    }
}

/// The `tpcc` workload's parameters as the command line gives them.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TpccSpec {
    pub setup: Setup,
    /// Warehouses (the standard set-up; the SNOW set-up has one).
    pub warehouses: u32,
    pub scale: Scale,
    /// New-Order's 1% rollback; `None`: the set-up's default (on in standard, off in snow).
    pub rollback: Option<bool>,
    /// Seeds the initial database and NURand's constants.
    pub seed: u64,
    /// The store runs the coordination-free transactions (`tpcc-cf-*`, [`tpcc::coordfree`]): set from the
    /// protocol (`Protocol::COORDINATION_FREE_TPCC`), not the command line.
    pub coordination_free: bool,
    /// Coordination-free: Delivery runs coordination-free (`tpcc-cf-delivery-free`) rather than serially at
    /// its district's partition, as the analyzer's verdicts may say (`crate::tpcc_plan`).
    pub free_delivery: bool,
    /// Run only New-Order (the coordination-avoidance paper's experiment) instead of the five-way mix.
    pub new_order_only: bool,
    /// Percent of New-Orders with exactly one remote supply line (the others none), replacing TPC-C's 1% per
    /// line; `None`: TPC-C's. Standard set-up with two or more warehouses.
    pub distributed: Option<u32>,
    /// Coordination-free: New-Order keeps `S_QUANTITY >=` this floor, without restocking
    /// (`tpcc-cf-new-order-bounded`), as the analyzer's verdicts say for a schema with such a `CHECK`; the
    /// audit then checks the floor too.
    pub stock_floor: Option<i64>,
}

/// Everything the loader, the generator and the audit need: the spec resolved against a topology.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Shape {
    pub setup: Setup,
    pub warehouses: u32,
    pub districts_per_warehouse: u32,
    pub customers: u32,
    pub orders: u32,
    /// The first undelivered order of the initial population (2101 at full scale).
    pub first_undelivered: u32,
    pub items: u32,
    pub partitions: u16,
    pub rollback: bool,
    pub remote_line: f64,
    pub remote_payment: f64,
    /// The `tpcc-cf-*` transactions and their key layout (orders under temporary ids, mapped from their
    /// sequential ids).
    pub coordination_free: bool,
    pub free_delivery: bool,
    pub new_order_only: bool,
    /// The share of New-Orders with exactly one remote line (`None`: `remote_line` per line).
    pub distributed: Option<f64>,
    pub stock_floor: Option<i64>,
}

impl TpccSpec {
    pub fn shape(&self, topology: Topology) -> Shape {
        let (customers, orders, items) = match self.scale {
            Scale::Full => (3000, 3000, 100_000),
            Scale::Small => (30, 30, 1000),
            Scale::Items => (30, 30, 100_000),
            Scale::Tiny => (10, 10, 100),
        };
        let (warehouses, dpw) = match self.setup {
            Setup::Snow => (1, 10 * u32::from(topology.partitions)),
            Setup::Standard => (self.warehouses.max(1), 10),
        };
        let multi = warehouses > 1;
        Shape {
            setup: self.setup,
            warehouses,
            districts_per_warehouse: dpw,
            customers,
            orders,
            first_undelivered: orders - orders * 3 / 10 + 1,
            items,
            partitions: topology.partitions,
            rollback: self.rollback.unwrap_or(self.setup == Setup::Standard),
            remote_line: if multi { 0.01 } else { 0.0 },
            remote_payment: if multi { 0.15 } else { 0.0 },
            coordination_free: self.coordination_free,
            free_delivery: self.free_delivery,
            new_order_only: self.new_order_only,
            distributed: self.distributed.map(|p| f64::from(p) / 100.0),
            stock_floor: self.stock_floor,
        }
    }

    pub fn validate(&self) -> Result<(), String> {
        if self.setup == Setup::Snow && self.warehouses > 1 {
            return Err("the snow set-up has one warehouse: --tpcc-warehouses needs --tpcc-setup standard".into());
        }
        if self.warehouses > 10_000 {
            return Err("at most 10000 warehouses".into());
        }
        if let Some(p) = self.distributed {
            if p > 100 {
                return Err(format!("--tpcc-distributed is a percentage of New-Orders, 0 to 100, not {p}"));
            }
            if self.setup != Setup::Standard || self.warehouses < 2 {
                return Err("--tpcc-distributed needs --tpcc-setup standard and --tpcc-warehouses of 2 or more (a \
                            remote line is another warehouse's stock)"
                    .into());
            }
        }
        Ok(())
    }
}

impl Shape {
    pub fn districts(&self) -> u64 {
        u64::from(self.warehouses) * u64::from(self.districts_per_warehouse)
    }

    fn all_districts(&self) -> impl Iterator<Item = District> + '_ {
        (0..self.districts()).map(|g| District::of_global(self.districts_per_warehouse, g))
    }
}

const SYLLABLES: [&str; 10] = ["BAR", "OUGHT", "ABLE", "PRI", "PRES", "ESE", "ANTI", "CALLY", "ATION", "EING"];

/// A customer last name from a number in 0..=999 (§4.3.2.3).
pub fn last_name(n: u32) -> String {
    let n = n % 1000;
    format!("{}{}{}", SYLLABLES[(n / 100) as usize], SYLLABLES[(n / 10 % 10) as usize], SYLLABLES[(n % 10) as usize])
}

/// NURand(A, x, y) (§2.1.6) with run constant `c`.
fn nurand(rng: &mut SmallRng, a: u32, c: u32, x: u32, y: u32) -> u32 {
    (((rng.random_range(0..=a) | rng.random_range(x..=y)) + c) % (y - x + 1)) + x
}

fn letters(rng: &mut SmallRng, lo: usize, hi: usize) -> String {
    let n = rng.random_range(lo..=hi);
    (0..n).map(|_| char::from(b'a' + rng.random_range(0..26u8))).collect()
}

// ---------------------------------------------------------------------------------------------------------
// Loader
// ---------------------------------------------------------------------------------------------------------

/// Keys written per loader batch (one `Update` each, all on one partition): small, because a RAMP-F version
/// carries its transaction's write set, so a batch's metadata grows with the square of its size.
pub const LOAD_BATCH: usize = 50;

/// The initial database (§4.3.3.1, scaled as the shape says), deterministic by `seed`: batches of at most
/// [`LOAD_BATCH`] writes, each on one partition.
pub fn initial_database(shape: &Shape, seed: u64) -> Vec<Vec<(Key, Value)>> {
    let mut n = 0u64;
    let mut tag = || {
        n += 1;
        format!("load.{n}")
    };
    let mut by_partition: BTreeMap<u16, Vec<(Key, Value)>> = BTreeMap::new();
    let topology = Topology::new(1, shape.partitions);
    let mut put = |k: Key, v: Value| by_partition.entry(topology.partition_of(&k)).or_default().push((k, v));
    let dpw = shape.districts_per_warehouse;
    let c_load = SmallRng::seed_from_u64(seed ^ 0x7c_c1a5).random_range(0..=255);
    for w in 1..=shape.warehouses {
        let mut rng = SmallRng::seed_from_u64(seed ^ 0x1000_0000 ^ u64::from(w));
        let ytd = i64::from(dpw) * i64::from(shape.customers) * 1000;
        put(tpcc::warehouse_key(dpw, w), WarehouseRow { ytd, tax: rng.random_range(0..=2000) }.value(&tag()));
        for i in 1..=shape.items {
            let s = StockRow { quantity: rng.random_range(10..=100), ytd: 0, order_cnt: 0, remote_cnt: 0 };
            put(tpcc::stock_key(dpw, w, i), s.value(&tag()));
        }
    }
    for h in shape.all_districts() {
        let mut rng = SmallRng::seed_from_u64(seed ^ 0x2000_0000 ^ h.global());
        let district = DistrictRow { next_o_id: shape.orders + 1, tax: rng.random_range(0..=2000) };
        put(h.district_key(), district.value(&tag()));
        put(h.district_ytd_key(), DistrictYtdRow { ytd: i64::from(shape.customers) * 1000 }.value(&tag()));
        put(h.pointer_key(), tpcc::encode(&shape.first_undelivered.to_string(), &tag()));
        let mut names: BTreeMap<String, Vec<(String, u32)>> = BTreeMap::new();
        for c in 1..=shape.customers {
            let last = last_name(if c <= 1000 { c - 1 } else { nurand(&mut rng, 255, c_load, 0, 999) });
            let first = letters(&mut rng, 8, 16);
            names.entry(last.clone()).or_default().push((first.clone(), c));
            let row = CustomerRow {
                balance: -1000,
                ytd_payment: 1000,
                payment_cnt: 1,
                delivery_cnt: 0,
                credit: if rng.random_range(0..10) == 0 { "BC" } else { "GC" }.into(),
                discount: rng.random_range(0..=5000),
                last,
                first,
                data: letters(&mut rng, 20, 40),
            };
            put(h.customer_key(c), row.value(&tag()));
            let history = tpcc::history_fields(&[HistoryEntry { w: h.w, d: h.d, amount: 1000 }]);
            put(h.history_key(c), tpcc::encode(&history, &tag()));
        }
        for (last, mut firsts) in names {
            firsts.sort();
            let ids: Vec<String> = firsts.iter().map(|(_, c)| c.to_string()).collect();
            put(h.by_name_key(&last), tpcc::encode(&ids.join(" "), &tag()));
        }
        // O_C_ID: a random permutation of the customers (repeated if there are more orders than customers).
        let mut perm: Vec<u32> = (1..=shape.customers).collect();
        for i in (1..perm.len()).rev() {
            perm.swap(i, rng.random_range(0..=i));
        }
        let mut last_order = BTreeMap::new();
        for o in 1..=shape.orders {
            let c = perm[(o as usize - 1) % perm.len()];
            last_order.insert(c, o);
            let delivered = o < shape.first_undelivered;
            let ol_cnt = rng.random_range(5..=15);
            let order = OrderRow {
                c_id: c,
                entry_d: 1,
                carrier: if delivered { rng.random_range(1..=10) } else { 0 },
                ol_cnt,
                all_local: true,
            };
            put(h.order_key(o), order.value(&tag()));
            if shape.coordination_free {
                // The initial orders' temporary ids are their numbers (the key layout stays the classic one).
                put(coordfree::map_key(&h, o), tpcc::encode(&o.to_string(), &tag()));
            }
            if !delivered {
                put(h.new_order_key(o), tpcc::encode(tpcc::NEW_ORDER, &tag()));
            }
            for n in 1..=ol_cnt {
                let line = OrderLineRow {
                    i_id: rng.random_range(1..=shape.items),
                    supply_w: h.w,
                    delivery_d: if delivered { 1 } else { 0 },
                    qty: 5,
                    amount: if delivered { 0 } else { rng.random_range(1..=999_999) },
                };
                put(h.order_line_key(o, n), line.value(&tag()));
            }
        }
        for (c, o) in last_order {
            put(h.last_order_key(c), tpcc::encode(&o.to_string(), &tag()));
        }
    }
    by_partition.into_values().flat_map(|rows| rows.chunks(LOAD_BATCH).map(<[_]>::to_vec).collect::<Vec<_>>()).collect()
}

// ---------------------------------------------------------------------------------------------------------
// Generator
// ---------------------------------------------------------------------------------------------------------

/// The terminals: what client `i` runs next.
#[derive(Clone, Debug, PartialEq)]
pub struct TpccGenerator {
    pub shape: Shape,
    /// NURand's run constants: last names, customer ids, items.
    c_last: u32,
    c_id: u32,
    c_item: u32,
}

/// The transaction mix: New-Order, Payment, Order-Status, Delivery, Stock-Level (percent).
pub const MIX: [u32; 5] = [44, 44, 4, 4, 4];

impl TpccGenerator {
    pub fn new(shape: Shape, seed: u64) -> Self {
        let mut rng = SmallRng::seed_from_u64(seed ^ 0x7c_c1a5);
        let load: u32 = rng.random_range(0..=255);
        // §2.1.6.1: the run's C for C_LAST differs from the load's by 65..=119, other than 96 and 112.
        let c_last = loop {
            let c: u32 = rng.random_range(0..=255);
            let delta = c.abs_diff(load);
            if (65..=119).contains(&delta) && delta != 96 && delta != 112 {
                break c;
            }
        };
        Self { shape, c_last, c_id: rng.random_range(0..=1023), c_item: rng.random_range(0..=8191) }
    }

    /// Client `client`'s home district: in the standard set-up, warehouse `client mod W + 1` (terminals
    /// spread over the warehouses first), district `(client / W) mod 10 + 1`; in the SNOW set-up district
    /// `client mod districts`.
    pub fn home(&self, client: usize) -> District {
        let (dpw, client) = (self.shape.districts_per_warehouse, client as u64);
        match self.shape.setup {
            Setup::Snow => District::of_global(dpw, client % self.shape.districts()),
            Setup::Standard => {
                let w = u64::from(self.shape.warehouses);
                District { dpw, w: (client % w) as u32 + 1, d: (client / w % u64::from(dpw)) as u32 + 1 }
            }
        }
    }

    fn customer_id(&self, rng: &mut SmallRng) -> u32 {
        nurand(rng, 1023, self.c_id, 1, self.shape.customers)
    }

    fn customer(&self, rng: &mut SmallRng) -> tpcc::Customer {
        if rng.random_range(0..100) < 60 {
            let names = self.shape.customers.min(1000) - 1;
            tpcc::Customer::Name(last_name(nurand(rng, 255, self.c_last, 0, names)))
        } else {
            tpcc::Customer::Id(self.customer_id(rng))
        }
    }

    /// A district of the home warehouse for New-Order, Payment and Order-Status.
    fn district(&self, rng: &mut SmallRng, home: District) -> District {
        match self.shape.setup {
            Setup::Snow => home,
            Setup::Standard => District { d: rng.random_range(1..=home.dpw), ..home },
        }
    }

    fn other_warehouse(&self, rng: &mut SmallRng, w: u32) -> u32 {
        let other = rng.random_range(1..self.shape.warehouses.max(2));
        if other >= w { other + 1 } else { other }
    }

    /// A warehouse other than `w` on another partition when there is one (warehouses placed by warehouse:
    /// consecutive ones are on different partitions whenever there are two or more), so that the line
    /// makes the New-Order distributed.
    fn remote_warehouse(&self, rng: &mut SmallRng, w: u32) -> u32 {
        let p = u32::from(self.shape.partitions.max(1));
        let by_warehouse = tpcc::by_warehouse(self.shape.districts_per_warehouse);
        loop {
            let other = self.other_warehouse(rng, w);
            if p == 1 || !by_warehouse || (other - 1) % p != (w - 1) % p {
                return other;
            }
        }
    }

    /// The procedure that runs transaction `classic` (`tpcc-…`) on this store: `tpcc-cf-…` when it is
    /// coordination-free.
    fn name(&self, classic: &'static str) -> &'static str {
        if !self.shape.coordination_free {
            return classic;
        }
        match classic {
            "tpcc-new-order" if self.shape.stock_floor.is_some() => "tpcc-cf-new-order-bounded",
            "tpcc-new-order" => "tpcc-cf-new-order",
            "tpcc-payment" => "tpcc-cf-payment",
            "tpcc-order-status" => "tpcc-cf-order-status",
            "tpcc-delivery" if self.shape.free_delivery => "tpcc-cf-delivery-free",
            "tpcc-delivery" => "tpcc-cf-delivery",
            _ => "tpcc-cf-stock-level",
        }
    }

    /// The next transaction(s) of client `client`; `date` stands for the current date.
    pub fn next_jobs(&self, rng: &mut SmallRng, client: usize, date: u64) -> Vec<Job> {
        let home = self.home(client);
        let s = &self.shape;
        let d = |x: u32| Value::from(x.to_string());
        let header = |h: District| vec![d(h.dpw), d(h.w), d(h.d)];
        let date = date.max(1);
        let mut kind = 0;
        if !s.new_order_only {
            let mut roll = rng.random_range(0..100);
            while roll >= MIX[kind] {
                roll -= MIX[kind];
                kind += 1;
            }
        }
        let call = |procedure: &'static str, args: Vec<Value>, token: bool| {
            Job::Call(CallJob {
                procedure,
                args: if token { [vec![Value::from("-")], args].concat() } else { args },
                token,
            })
        };
        match kind {
            0 => {
                let h = self.district(rng, home);
                let c = self.customer_id(rng);
                let lines = rng.random_range(5..=15usize);
                let rollback = s.rollback && rng.random_range(0..100) == 0;
                // The distributed-share sweep: this order's first line is remote, or none is.
                let remote_first = s.distributed.map(|share| rng.random::<f64>() < share);
                let mut args = header(h);
                args.extend([d(c), d(s.items), Value::from(date.to_string())]);
                let mut seen = BTreeSet::new();
                for n in 0..lines {
                    let item = if rollback && n == lines - 1 {
                        s.items + 1
                    } else {
                        let mut i = nurand(rng, 8191, self.c_item, 1, s.items);
                        while !seen.insert(i) {
                            i = rng.random_range(1..=s.items);
                        }
                        i
                    };
                    let supply = match remote_first {
                        Some(true) if n == 0 => self.remote_warehouse(rng, h.w),
                        Some(_) => h.w,
                        None if rng.random::<f64>() < s.remote_line => self.other_warehouse(rng, h.w),
                        None => h.w,
                    };
                    args.extend([d(item), d(supply), d(rng.random_range(1..=10))]);
                }
                if let (true, Some(floor)) = (s.coordination_free, s.stock_floor) {
                    // The bounded New-Order's last argument.
                    args.push(Value::from(floor.to_string()));
                }
                vec![call(self.name("tpcc-new-order"), args, true)]
            }
            1 => {
                let h = self.district(rng, home);
                let (cw, cd) = if rng.random::<f64>() < s.remote_payment {
                    (self.other_warehouse(rng, h.w), rng.random_range(1..=h.dpw))
                } else {
                    (h.w, h.d)
                };
                let mut args = header(h);
                args.extend([d(cw), d(cd), Value::from(self.customer(rng).to_string())]);
                args.push(Value::from(rng.random_range(100..=500_000u32).to_string()));
                vec![call(self.name("tpcc-payment"), args, true)]
            }
            2 => {
                let h = self.district(rng, home);
                let mut args = header(h);
                args.push(Value::from(self.customer(rng).to_string()));
                vec![call(self.name("tpcc-order-status"), args, false)]
            }
            3 => {
                let carrier = rng.random_range(1..=10);
                let districts = match s.setup {
                    Setup::Snow => vec![home],
                    Setup::Standard => (1..=home.dpw).map(|d| District { d, ..home }).collect(),
                };
                districts
                    .into_iter()
                    .map(|h| {
                        let mut args = header(h);
                        args.extend([d(carrier), Value::from(date.to_string())]);
                        call(self.name("tpcc-delivery"), args, true)
                    })
                    .collect()
            }
            _ => {
                let mut args = header(home);
                args.push(d(rng.random_range(10..=20)));
                vec![call(self.name("tpcc-stock-level"), args, false)]
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------------------
// Audit
// ---------------------------------------------------------------------------------------------------------

/// The initial database's requests for one batch: one `Update`, or (a protocol without write
/// transactions) one `Put` per row.
pub fn load_requests(batch: Vec<(Key, Value)>, write_transactions: bool) -> Vec<snowline_core::Request> {
    use snowline_core::Request;
    if write_transactions {
        vec![Request::Update { writes: batch }]
    } else {
        batch.into_iter().map(|(key, value)| Request::Put { key, value }).collect()
    }
}

/// Keys per read-only transaction of the audit.
pub const AUDIT_CHUNK: usize = 500;

/// Orders past `D_NEXT_O_ID − 1` the audit reads, to see rows past the counter (a key-value store cannot
/// scan for them).
pub const AUDIT_SLACK: u32 = 20;

/// Row `k` (`value`), parsed; a missing or malformed one is recorded in `malformed` (`None`).
fn required<R: Row>(malformed: &mut Vec<String>, k: &Key, value: Option<&Value>) -> Option<R> {
    R::read(value).map_err(|e| malformed.push(format!("{k}: {e}"))).ok()
}

/// The keys the audit reads first: warehouses, districts (`D_NEXT_O_ID` and `D_YTD`), delivery pointers.
pub fn audit_first_keys(shape: &Shape) -> Vec<Key> {
    let dpw = shape.districts_per_warehouse;
    let mut keys: Vec<Key> = (1..=shape.warehouses).map(|w| tpcc::warehouse_key(dpw, w)).collect();
    for h in shape.all_districts() {
        keys.extend([h.district_key(), h.district_ytd_key(), h.pointer_key()]);
    }
    if shape.stock_floor.is_some() {
        for w in 1..=shape.warehouses {
            keys.extend((1..=shape.items).map(|i| tpcc::stock_key(shape.districts_per_warehouse, w, i)));
        }
    }
    keys
}

/// The keys the audit reads next, given the first: per district, every customer and its history, and
/// every order up to `D_NEXT_O_ID − 1 +` [`AUDIT_SLACK`] with its new-order and all 15 possible lines.
pub fn audit_second_keys(shape: &Shape, first: &BTreeMap<Key, Option<Value>>) -> Vec<Key> {
    let mut keys = Vec::new();
    for h in shape.all_districts() {
        let next = first
            .get(&h.district_key())
            .and_then(|v| DistrictRow::read(v.as_ref()).ok())
            .map_or(shape.orders + 1, |d| d.next_o_id.max(1).min(shape.orders.saturating_mul(1000) + 1));
        for c in 1..=shape.customers {
            keys.extend([h.customer_key(c), h.history_key(c)]);
        }
        for o in 1..next.saturating_add(AUDIT_SLACK) {
            if shape.coordination_free {
                // Under its temporary id, if the id was taken.
                let Some(Some(t)) = first.get(&coordfree::map_key(&h, o)) else { continue };
                let t = tpcc::fields(t);
                keys.extend([coordfree::order_key(&h, t), coordfree::new_order_key(&h, t)]);
                keys.extend((1..=tpcc::MAX_LINES as u32).map(|n| coordfree::order_line_key(&h, t, n)));
                continue;
            }
            keys.extend([h.order_key(o), h.new_order_key(o)]);
            keys.extend((1..=tpcc::MAX_LINES as u32).map(|n| h.order_line_key(o, n)));
        }
    }
    keys
}

/// The keys the audit reads next, given what it has read (`state`); none once it has all it needs: the
/// first keys, then (coordination-free) the mapping of every sequential id up to `D_NEXT_O_ID − 1 +`
/// [`AUDIT_SLACK`], then the second keys (the orders under their temporary ids).
pub fn audit_next_keys(shape: &Shape, state: &BTreeMap<Key, Option<Value>>) -> Vec<Key> {
    let unread = |keys: Vec<Key>| -> Vec<Key> { keys.into_iter().filter(|k| !state.contains_key(k)).collect() };
    let first = unread(audit_first_keys(shape));
    if !first.is_empty() {
        return first;
    }
    if !shape.coordination_free {
        return unread(audit_second_keys(shape, state));
    }
    let mut maps = Vec::new();
    for h in shape.all_districts() {
        maps.extend(
            (1..audit_next_o_id(shape, state, &h).saturating_add(AUDIT_SLACK)).map(|o| coordfree::map_key(&h, o)),
        );
    }
    let maps = unread(maps);
    if !maps.is_empty() {
        return maps;
    }
    unread(audit_second_keys(shape, state))
}

/// The audit's reading of `D_NEXT_O_ID`, bounded.
fn audit_next_o_id(shape: &Shape, first: &BTreeMap<Key, Option<Value>>, h: &District) -> u32 {
    first
        .get(&h.district_key())
        .and_then(|v| DistrictRow::read(v.as_ref()).ok())
        .map_or(shape.orders + 1, |d| d.next_o_id.max(1).min(shape.orders.saturating_mul(1000) + 1))
}

/// A coordination-free store's state in the classic layout: each mapped order's rows under its sequential
/// id (unmapped orders, whose id was never taken, are not orders yet).
fn classic_layout(shape: &Shape, state: &BTreeMap<Key, Option<Value>>) -> BTreeMap<Key, Option<Value>> {
    if !shape.coordination_free {
        return state.clone();
    }
    let mut out = state.clone();
    for h in shape.all_districts() {
        for o in 1..audit_next_o_id(shape, state, &h).saturating_add(AUDIT_SLACK) {
            let Some(Some(t)) = state.get(&coordfree::map_key(&h, o)) else { continue };
            let t = tpcc::fields(t);
            if t == o.to_string() {
                continue;
            }
            let mut rename = |from: Key, to: Key| {
                if let Some(v) = state.get(&from) {
                    out.insert(to, v.clone());
                }
            };
            rename(coordfree::order_key(&h, t), h.order_key(o));
            rename(coordfree::new_order_key(&h, t), h.new_order_key(o));
            for n in 1..=tpcc::MAX_LINES as u32 {
                rename(coordfree::order_line_key(&h, t, n), h.order_line_key(o, n));
            }
        }
    }
    out
}

/// One consistency condition's verdict.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Condition {
    /// 1 to 12 (TPC-C §3.3.2.1 to §3.3.2.12).
    pub number: u8,
    pub what: &'static str,
    /// Instances checked (warehouses, districts, orders, order lines or customers).
    pub checked: u64,
    pub violated: u64,
    /// The first violation, in words.
    pub example: Option<String>,
}

/// The audit of a final state.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Audit {
    pub conditions: Vec<Condition>,
    /// Rows that could not be parsed (each also fails the conditions that need it).
    pub malformed: Vec<String>,
    /// Deliveries since the load (the delivery pointers' advance), for condition 11.
    pub deliveries: u64,
}

impl Audit {
    pub fn ok(&self) -> bool {
        self.malformed.is_empty() && self.conditions.iter().all(|c| c.violated == 0)
    }

    /// TPC-C's 12, and the schema's stock floor when the run keeps one.
    pub fn count(&self) -> usize {
        self.conditions.len()
    }

    pub fn violated(&self) -> Vec<u8> {
        self.conditions.iter().filter(|c| c.violated > 0).map(|c| c.number).collect()
    }
}

impl fmt::Display for Audit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.ok() {
            write!(f, "tpcc audit: all {} conditions hold", self.count())?;
        } else {
            write!(f, "tpcc audit: VIOLATED")?;
        }
        for c in &self.conditions {
            write!(f, "\n  {:>2} {:<58} ", c.number, c.what)?;
            match &c.example {
                None => write!(f, "ok ({} checked)", c.checked)?,
                Some(e) => write!(f, "VIOLATED {} of {}: {e}", c.violated, c.checked)?,
            }
        }
        for m in self.malformed.iter().take(5) {
            write!(f, "\n  malformed row: {m}")?;
        }
        Ok(())
    }
}

struct Tally {
    conditions: Vec<Condition>,
}

impl Tally {
    fn check(&mut self, n: u8, ok: bool, why: impl FnOnce() -> String) {
        let c = &mut self.conditions[usize::from(n) - 1];
        c.checked += 1;
        if !ok {
            c.violated += 1;
            if c.example.is_none() {
                c.example = Some(why());
            }
        }
    }
}

/// The condition the run adds for a schema's floor on `S_QUANTITY` (not TPC-C's: its restocking keeps
/// quantities positive without one).
pub const STOCK_FLOOR_CONDITION: &str = "S_QUANTITY >= the schema's floor (CHECK)";

/// The 12 conditions' descriptions.
pub const CONDITIONS: [&str; 12] = [
    "W_YTD = sum(D_YTD)",
    "D_NEXT_O_ID - 1 = max(O_ID) = max(NO_O_ID)",
    "max(NO_O_ID) - min(NO_O_ID) + 1 = rows in NEW-ORDER",
    "sum(O_OL_CNT) = rows in ORDER-LINE, per district",
    "O_CARRIER_ID null iff a NEW-ORDER row exists",
    "O_OL_CNT = rows in ORDER-LINE, per order",
    "OL_DELIVERY_D null iff O_CARRIER_ID null",
    "W_YTD = sum(H_AMOUNT)",
    "D_YTD = sum(H_AMOUNT)",
    "C_BALANCE = sum(delivered OL_AMOUNT) - sum(H_AMOUNT)",
    "rows in ORDER - rows in NEW-ORDER = initial + deliveries",
    "C_BALANCE + C_YTD_PAYMENT = sum(delivered OL_AMOUNT)",
];

/// Check the 12 consistency conditions on `state` (every key the audit read, `None` for absent rows).
///
/// Condition 11 as TPC-C states it (`count(ORDER) − count(NEW-ORDER) = 2100`) holds only until the first
/// Delivery; it is checked in the form that holds after Deliveries too: the difference is the initial one
/// plus the district's deliveries, counted by how far its delivery pointer advanced.
pub fn audit(shape: &Shape, state: &BTreeMap<Key, Option<Value>>) -> Audit {
    let classic = classic_layout(shape, state);
    let state = &classic;
    let mut t = Tally {
        conditions: CONDITIONS
            .iter()
            .enumerate()
            .map(|(i, what)| Condition { number: i as u8 + 1, what, checked: 0, violated: 0, example: None })
            .chain(shape.stock_floor.map(|_| Condition {
                number: 13,
                what: STOCK_FLOOR_CONDITION,
                checked: 0,
                violated: 0,
                example: None,
            }))
            .collect(),
    };
    let mut malformed = Vec::new();
    let get = |k: &Key| state.get(k).and_then(Option::as_ref);
    let row = |malformed: &mut Vec<String>, k: &Key, r: Result<(), String>| {
        if let Err(e) = r {
            malformed.push(format!("{k}: {e}"));
        }
    };
    let dpw = shape.districts_per_warehouse;
    // Per (warehouse, district) of payment: sum(H_AMOUNT); per warehouse likewise.
    let mut h_by_district: BTreeMap<(u32, u32), i64> = BTreeMap::new();
    // Per customer: delivered OL_AMOUNT.
    let mut delivered_by_customer: BTreeMap<(u64, u32), i64> = BTreeMap::new();
    let mut deliveries = 0u64;
    let mut d_ytd: BTreeMap<(u32, u32), i64> = BTreeMap::new();
    for h in shape.all_districts() {
        let district: Option<DistrictRow> = required(&mut malformed, &h.district_key(), get(&h.district_key()));
        if let Some(d) = required::<DistrictYtdRow>(&mut malformed, &h.district_ytd_key(), get(&h.district_ytd_key())) {
            d_ytd.insert((h.w, h.d), d.ytd);
        }
        let next = district.as_ref().map_or(1, |d| d.next_o_id);
        let pointer = match tpcc::parse_number(get(&h.pointer_key()), "delivery pointer") {
            Ok(p) => p,
            Err(e) => {
                row(&mut malformed, &h.pointer_key(), Err(e));
                shape.first_undelivered
            }
        };
        deliveries += u64::from(pointer.saturating_sub(shape.first_undelivered));
        let (mut max_o, mut orders, mut new_orders, mut ol_sum, mut ol_rows) = (0u32, 0u64, 0u64, 0u64, 0u64);
        let (mut no_min, mut no_max) = (u32::MAX, 0u32);
        for o in 1..next.saturating_add(AUDIT_SLACK) {
            let order = match get(&h.order_key(o)).map(|v| OrderRow::parse(v)) {
                None => None,
                Some(Ok(order)) => Some(order),
                Some(Err(e)) => {
                    row(&mut malformed, &h.order_key(o), Err(e));
                    None
                }
            };
            let new_order = tpcc::new_order_present(get(&h.new_order_key(o)));
            if new_order {
                new_orders += 1;
                no_min = no_min.min(o);
                no_max = no_max.max(o);
            }
            let mut lines = Vec::new();
            for n in 1..=tpcc::MAX_LINES as u32 {
                match get(&h.order_line_key(o, n)).map(|v| OrderLineRow::parse(v)) {
                    None => {}
                    Some(Ok(l)) => lines.push((n, l)),
                    Some(Err(e)) => row(&mut malformed, &h.order_line_key(o, n), Err(e)),
                }
            }
            ol_rows += lines.len() as u64;
            let Some(order) = order else {
                if new_order {
                    t.check(5, false, || format!("district {}/{}: a NEW-ORDER row for missing order {o}", h.w, h.d));
                }
                continue;
            };
            orders += 1;
            max_o = o;
            ol_sum += u64::from(order.ol_cnt);
            t.check(5, (order.carrier == 0) == new_order, || {
                format!("order {}/{}/{o}: O_CARRIER_ID {} with NEW-ORDER row {new_order}", h.w, h.d, order.carrier)
            });
            t.check(6, order.ol_cnt as usize == lines.len(), || {
                format!("order {}/{}/{o}: O_OL_CNT {} but {} lines", h.w, h.d, order.ol_cnt, lines.len())
            });
            for (n, l) in &lines {
                t.check(7, (l.delivery_d == 0) == (order.carrier == 0), || {
                    format!(
                        "line {}/{}/{o}/{n}: OL_DELIVERY_D {} with O_CARRIER_ID {}",
                        h.w, h.d, l.delivery_d, order.carrier
                    )
                });
                if l.delivery_d != 0 {
                    *delivered_by_customer.entry((h.global(), order.c_id)).or_default() += l.amount;
                }
            }
        }
        let max_no = if new_orders > 0 { no_max } else { max_o };
        t.check(2, next.saturating_sub(1) == max_o && max_o == max_no, || {
            format!(
                "district {}/{}: D_NEXT_O_ID - 1 = {}, max(O_ID) = {max_o}, max(NO_O_ID) = {max_no}",
                h.w,
                h.d,
                next.saturating_sub(1)
            )
        });
        if new_orders > 0 {
            t.check(3, u64::from(no_max - no_min + 1) == new_orders, || {
                format!("district {}/{}: NO_O_ID from {no_min} to {no_max} but {new_orders} rows", h.w, h.d)
            });
        }
        t.check(4, ol_sum == ol_rows, || format!("district {}/{}: sum(O_OL_CNT) {ol_sum}, {ol_rows} lines", h.w, h.d));
        let initial = u64::from(shape.first_undelivered - 1);
        let moved = u64::from(pointer.saturating_sub(shape.first_undelivered));
        t.check(11, orders.checked_sub(new_orders) == Some(initial + moved), || {
            format!(
                "district {}/{}: {orders} orders - {new_orders} new-orders != {initial} + {moved} deliveries",
                h.w, h.d
            )
        });
        for c in 1..=shape.customers {
            let Some(customer) = required::<CustomerRow>(&mut malformed, &h.customer_key(c), get(&h.customer_key(c)))
            else {
                continue;
            };
            let history = match tpcc::parse_history(get(&h.history_key(c))) {
                Ok(entries) => entries,
                Err(e) => {
                    row(&mut malformed, &h.history_key(c), Err(e));
                    Vec::new()
                }
            };
            let mut paid = 0i64;
            for e in &history {
                paid += e.amount;
                *h_by_district.entry((e.w, e.d)).or_default() += e.amount;
            }
            let delivered = delivered_by_customer.get(&(h.global(), c)).copied().unwrap_or(0);
            t.check(10, customer.balance == delivered - paid, || {
                format!(
                    "customer {}/{}/{c}: C_BALANCE {} but delivered {delivered} - paid {paid}",
                    h.w, h.d, customer.balance
                )
            });
            t.check(12, customer.balance + customer.ytd_payment == delivered, || {
                format!(
                    "customer {}/{}/{c}: C_BALANCE {} + C_YTD_PAYMENT {} but delivered {delivered}",
                    h.w, h.d, customer.balance, customer.ytd_payment
                )
            });
        }
    }
    for ((w, d), ytd) in &d_ytd {
        let h = h_by_district.get(&(*w, *d)).copied().unwrap_or(0);
        t.check(9, *ytd == h, || format!("district {w}/{d}: D_YTD {ytd} but sum(H_AMOUNT) {h}"));
    }
    for w in 1..=shape.warehouses {
        let key = tpcc::warehouse_key(dpw, w);
        let Some(wh) = required::<WarehouseRow>(&mut malformed, &key, get(&key)) else { continue };
        let districts: i64 = d_ytd.range((w, 0)..=(w, u32::MAX)).map(|(_, y)| y).sum();
        t.check(1, wh.ytd == districts, || format!("warehouse {w}: W_YTD {} but sum(D_YTD) {districts}", wh.ytd));
        let h: i64 = h_by_district.range((w, 0)..=(w, u32::MAX)).map(|(_, a)| a).sum();
        t.check(8, wh.ytd == h, || format!("warehouse {w}: W_YTD {} but sum(H_AMOUNT) {h}", wh.ytd));
    }
    if let Some(floor) = shape.stock_floor {
        for w in 1..=shape.warehouses {
            for i in 1..=shape.items {
                let key = tpcc::stock_key(dpw, w, i);
                // Signed: a store that does not keep the floor may take it below zero.
                let q = get(&key).map(|v| tpcc::fields(v).split(',').next().unwrap_or("").parse::<i64>());
                match q {
                    Some(Ok(q)) => t.check(13, q >= floor, || format!("stock {w}/{i}: S_QUANTITY {q} < {floor}")),
                    Some(Err(_)) => row(&mut malformed, &key, Err("S_QUANTITY is not a number".into())),
                    None => row(&mut malformed, &key, Err("no stock row".into())),
                }
            }
        }
    }
    Audit { conditions: t.conditions, malformed, deliveries }
}

#[cfg(test)]
mod tests;
