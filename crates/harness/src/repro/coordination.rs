//! `reproduce coordination`: the coordination-avoidance paper's proof of concept (Bailis et al., "Coordination
//! Avoidance in Database Systems", VLDB 2015, §6.2, Figs. 5–6) — TPC-C New-Order alone, warehouse-partitioned
//! (every row of a warehouse, its stock included, on one server), run coordination-free on RAMP-F
//! (`tpcc-cf-new-order`: one atomically visible write, the order id taken by one increment at the district's
//! server) and under the serializable baselines 2PL (with 2PC), OCC and Rococo on the same generator and
//! placement. Two sweeps: weak scaling over the servers with 5 warehouses per server (Fig. 6) and the share
//! of New-Orders with one remote supply line at a fixed number of servers (Fig. 5).
//!
//! The variants are told apart by their labels (`"N servers"`, `"P% distributed"`), so the shared
//! [`Variant`] needs no field of its own for this paper.

use super::{Experiment, Runtime, Variant, runs_of};
use crate::charts::{Legend, LineChart, Series};
use crate::report::{RunRecord, fmt_us};
use crate::tpcc::{Scale, Setup, TpccSpec};
use crate::workload::{MixedWorkload, Pattern};
use snowline_core::Topology;
use std::fmt::Write as _;

/// The coordination-free subject first, then the serializable baselines.
pub const PROTOCOLS: [&str; 4] = ["ramp-f", "2pl", "occ", "rococo"];

/// The subject: the coordination-free New-Order on RAMP-F.
const SUBJECT: &str = "ramp-f";

/// The seed's warehouses per server.
pub const WAREHOUSES_PER_SERVER: u32 = 5;

/// The distributed shares swept (percent of New-Orders with one remote line).
const SHARES: [u32; 5] = [0, 25, 50, 75, 100];

const SERVERS_SUFFIX: &str = " servers";
const SHARE_SUFFIX: &str = "% distributed";

/// The New-Order-only workload on `servers` servers: `distributed` as `--tpcc-distributed` (`None`: TPC-C's
/// 1% of lines remote).
fn workload(servers: u16, distributed: Option<u32>) -> MixedWorkload {
    MixedWorkload {
        pattern: Pattern::Tpcc,
        tpcc: TpccSpec {
            setup: Setup::Standard,
            warehouses: WAREHOUSES_PER_SERVER * u32::from(servers),
            scale: Scale::Tiny,
            new_order_only: true,
            distributed,
            ..Default::default()
        },
        ..Default::default()
    }
}

fn variant(label: String, x: f64, servers: u16, distributed: Option<u32>, clients: usize) -> Variant {
    Variant {
        label,
        x,
        workload: workload(servers, distributed),
        topology: Topology::new(1, servers),
        inter_dc_ms: vec![vec![0.0]],
        intra_dc_ms: 0.1,
        clients: Some(vec![clients]),
        figure: None,
        ramp: None,
        protocols: None,
    }
}

/// The set-up: `(variants, clients (unused: each variant has its own), seconds of run, warm-up, cool-down)`,
/// with its notes.
pub(super) fn setup(sim: bool, quick: bool, notes: &mut Vec<String>) -> (Vec<Variant>, Vec<usize>, [f64; 3]) {
    let (servers, baseline_max, share_servers, per_server): (&[u16], u16, u16, usize) = match (sim, quick) {
        (true, true) => (&[1, 10, 100], 10, 8, 40),
        (true, false) => (&[1, 10, 25, 50, 100, 200], 200, 8, 40),
        (false, true) => (&[1, 2, 3], 3, 2, 16),
        (false, false) => (&[1, 2, 3], 3, 3, 24),
    };
    let mut variants = Vec::new();
    for &n in servers {
        let mut v = variant(format!("{n}{SERVERS_SUFFIX}"), f64::from(n), n, None, per_server * usize::from(n));
        if n > baseline_max {
            v.protocols = Some(vec![SUBJECT.to_string()]);
        }
        variants.push(v);
    }
    let clients = per_server * usize::from(share_servers);
    for p in SHARES {
        variants.push(variant(format!("{p}{SHARE_SUFFIX}"), f64::from(p), share_servers, Some(p), clients));
    }
    notes.push(format!(
        "TPC-C New-Order only (--workload tpcc --tpcc-setup standard --tpcc-new-order-only --tpcc-scale tiny), \
         {WAREHOUSES_PER_SERVER} warehouses of 10 districts per server (the paper's 5), every row of a warehouse \
         (its stock included) on one server (pin w − 1), {per_server} closed-loop clients per server without \
         think time (terminals spread over the warehouses, a random district of the home warehouse per \
         New-Order), 5–15 lines, 1% rollbacks; population scaled down to 100 items and 10 customers and 10 \
         orders per district (the paper: TPC-C's full population) so that {} warehouses load and audit in \
         seconds; 1 DC{}",
        WAREHOUSES_PER_SERVER * u32::from(*servers.last().unwrap_or(&1)),
        if sim { ", 0.1 ms one-way between machines" } else { "" }
    ));
    notes.push(format!(
        "scale-out (Fig. 6): weak scaling over {servers:?} servers, TPC-C's remote lines (1% of lines: with one \
         server a remote warehouse is on the same server); {} on every count{}",
        SUBJECT,
        if servers.iter().any(|n| *n > baseline_max) {
            format!(
                ", the serializable baselines up to {baseline_max} servers (beyond, each point would take minutes \
                 of wall time in --quick)"
            )
        } else {
            ", the serializable baselines too".into()
        }
    ));
    notes.push(format!(
        "distributed share (Fig. 5): on {share_servers} servers, {SHARES:?}% of New-Orders with exactly one line \
         (the first) supplied by a warehouse on another server (--tpcc-distributed), the others all local"
    ));
    notes.push(format!(
        "{SUBJECT} runs the coordination-free New-Order (tpcc-cf-new-order: rows under a temporary id and stock \
         merges in one RAMP write, D_NEXT_O_ID taken at commit by one increment at the district's server); 2pl \
         (strict 2PL + 2PC), occ and rococo run the serializable tpcc-new-order on the same generator and \
         placement; aborted attempts are retried until they commit; every run is audited (TPC-C's 12 \
         conditions: those about Payment and Delivery hold trivially without them)"
    ));
    let d = match (sim, quick) {
        (true, true) => [0.05, 0.015, 0.005],
        (true, false) => [0.2, 0.05, 0.02],
        (false, true) => [2.0, 0.5, 0.25],
        (false, false) => [5.0, 1.0, 0.5],
    };
    (variants, vec![per_server], d)
}

/// Committed New-Orders per second (the coordination-free or the serializable procedure).
pub fn new_orders(r: &RunRecord) -> f64 {
    ["tpcc-cf-new-order", "tpcc-new-order"].iter().filter_map(|k| r.summary.kind(k)).map(|k| k.ops_per_s).sum()
}

fn new_order_p50(r: &RunRecord) -> Option<f64> {
    ["tpcc-cf-new-order", "tpcc-new-order"]
        .iter()
        .filter_map(|k| r.summary.kind(k))
        .find(|k| k.ok > 0)
        .map(|k| k.p50_us)
}

/// Aborted attempts per committed New-Order (conflicts retried; the 1% rollbacks are not retried).
fn aborts_per_commit(r: &RunRecord) -> f64 {
    let k = ["tpcc-cf-new-order", "tpcc-new-order"].iter().filter_map(|k| r.summary.kind(k)).next();
    k.map_or(0.0, |k| k.aborted as f64 / (k.ok as f64).max(1.0))
}

fn audit_cell(r: &RunRecord) -> String {
    match &r.tpcc {
        None => "not run".into(),
        Some(a) if a.ok() => "12/12 ok".into(),
        Some(a) => format!("VIOLATED {:?}", a.violated()),
    }
}

fn events_per_s(r: &RunRecord) -> Option<f64> {
    r.sim_events.filter(|_| r.wall_s > 0.0).map(|n| n as f64 / r.wall_s)
}

fn pct(x: f64) -> String {
    format!("{:.1}%", x * 100.0)
}

impl Experiment {
    fn coord_variants(&self, suffix: &str) -> Vec<&Variant> {
        self.variants.iter().filter(|v| v.label.ends_with(suffix)).collect()
    }

    /// New-Order/s of `protocol` in the variant whose label is `label`.
    fn coord_tput(&self, records: &[RunRecord], label: &str, protocol: &str) -> Option<f64> {
        runs_of(records, label, protocol).first().map(|r| new_orders(r))
    }

    /// `(x, New-Order/s)` of `protocol` over the variants of a sweep.
    fn coord_curve(&self, records: &[RunRecord], suffix: &str, protocol: &str) -> Vec<(f64, f64)> {
        self.coord_variants(suffix)
            .iter()
            .filter_map(|v| Some((v.x, self.coord_tput(records, &v.label, protocol)?)))
            .collect()
    }

    pub(super) fn coordination_line(&self, r: &RunRecord) -> String {
        let events = events_per_s(r).map_or(String::new(), |e| format!(", {e:.0} events/s"));
        format!(
            "{:<16} {:<7} {:>5} clients: New-Order {:>9.0}/s ({:>7.0}/server), p50 {}, aborts/commit {:.3}, audit {} ({:.1} s{events})",
            r.variant,
            r.protocol,
            r.clients_total,
            new_orders(r),
            new_orders(r) / f64::from(r.partitions.max(1)),
            new_order_p50(r).map_or("-".into(), fmt_us),
            aborts_per_commit(r),
            audit_cell(r),
            r.wall_s
        )
    }

    pub(super) fn coordination_table(&self, records: &[RunRecord]) -> String {
        let mut t = String::new();
        let _ = writeln!(
            t,
            "{:<16} {:<7} {:>7} {:>10} {:>7} {:>12} {:>10} {:>10} {:>8} {:>9} {:>7} {:>9}",
            "variant",
            "protocol",
            "servers",
            "warehouses",
            "clients",
            "New-Order/s",
            "per server",
            "p50",
            "aborts/c",
            "audit",
            "wall s",
            "events/s"
        );
        for r in records {
            let warehouses = u32::from(r.partitions) * WAREHOUSES_PER_SERVER;
            let _ = writeln!(
                t,
                "{:<16} {:<7} {:>7} {:>10} {:>7} {:>12.0} {:>10.0} {:>10} {:>8.3} {:>9} {:>7.1} {:>9}",
                r.variant,
                r.protocol,
                r.partitions,
                warehouses,
                r.clients_total,
                new_orders(r),
                new_orders(r) / f64::from(r.partitions.max(1)),
                new_order_p50(r).map_or("-".into(), fmt_us),
                aborts_per_commit(r),
                audit_cell(r),
                r.wall_s,
                events_per_s(r).map_or("-".into(), |e| format!("{e:.0}"))
            );
        }
        t.push_str(
            "(New-Order/s: committed New-Orders per second of the measured window; p50: New-Order latency from its \
             first attempt to its commit; aborts/c: aborted attempts (retried conflicts, 1% rollbacks) per commit; \
             audit: TPC-C's 12 consistency conditions on the final state; wall s includes loading and auditing)\n",
        );
        t
    }

    pub(super) fn coordination_charts(&self, records: &[RunRecord]) -> Vec<(String, LineChart)> {
        let runtime = self.runtime.name();
        // Each protocol's curve over one sweep, in thousands of New-Orders per second.
        let thousands = |suffix: &str| -> Vec<Series> {
            self.protocols
                .iter()
                .map(|p| Series {
                    name: p.clone(),
                    points: self.coord_curve(records, suffix, p).into_iter().map(|(x, y)| (x, y / 1e3)).collect(),
                })
                .collect()
        };
        let mut scale = thousands(SERVERS_SUFFIX);
        let subject = self.coord_curve(records, SERVERS_SUFFIX, SUBJECT);
        if let Some(&(n1, t1)) = subject.first() {
            scale.push(Series {
                name: format!("perfect scaling of {SUBJECT}"),
                points: subject.iter().map(|(n, _)| (*n, t1 / n1 * n / 1e3)).collect(),
            });
        }
        let share = thousands(SHARE_SUFFIX);
        let relative: Vec<Series> = self
            .protocols
            .iter()
            .map(|p| {
                let curve = self.coord_curve(records, SHARE_SUFFIX, p);
                let base = curve.first().map_or(0.0, |(_, y)| *y);
                Series {
                    name: p.clone(),
                    points: curve.into_iter().filter(|_| base > 0.0).map(|(x, y)| (x, 100.0 * y / base)).collect(),
                }
            })
            .collect();
        let chart = |title: String, x: &str, y: &str, series: Vec<Series>, legend| LineChart {
            title,
            x_label: x.into(),
            y_label: y.into(),
            series,
            y_from_zero: true,
            reference: None,
            legend,
        };
        vec![
            (
                "fig6-scale-out.png".into(),
                chart(
                    format!(
                        "TPC-C New-Order scale-out, {WAREHOUSES_PER_SERVER} warehouses per server ({runtime}; Fig. 6)"
                    ),
                    "servers",
                    "New-Order (K/s)",
                    scale,
                    Legend::UpperLeft,
                ),
            ),
            (
                "fig5-distributed.png".into(),
                chart(
                    format!("New-Order throughput vs distributed share ({runtime}; Fig. 5)"),
                    "New-Orders with a remote line (%)",
                    "New-Order (K/s)",
                    share,
                    Legend::LowerLeft,
                ),
            ),
            (
                "fig5-distributed-relative.png".into(),
                LineChart {
                    reference: Some((100.0, "0% distributed".into())),
                    ..chart(
                        format!("New-Order throughput relative to 0% distributed ({runtime}; Fig. 5)"),
                        "New-Orders with a remote line (%)",
                        "% of the protocol's 0% throughput",
                        relative,
                        Legend::LowerLeft,
                    )
                },
            ),
        ]
    }

    /// The paper's statements beside snowline's figures, as Markdown.
    pub(super) fn coordination_headline(&self, records: &[RunRecord]) -> String {
        let mut out = String::new();
        let sim = self.runtime == Runtime::Sim;
        let scale = self.coord_curve(records, SERVERS_SUFFIX, SUBJECT);
        let at = |n: f64| scale.iter().find(|(x, _)| (*x - n).abs() < 1e-9).map(|(_, y)| *y);
        let first = scale.first().copied();
        let last = scale.last().copied();
        let _ = writeln!(
            out,
            "| the paper's statement (§6.2) | paper | snowline | reason / note |\n| --- | --- | --- | --- |"
        );
        if let Some((n1, t1)) = first {
            let _ = writeln!(
                out,
                "| New-Order throughput per warehouse and per server | > 12K/s per warehouse, > 17K/s per server | {:.0}/s per warehouse, {:.0}/s per server ({n1:.0} server{}) | {} |",
                t1 / n1 / f64::from(WAREHOUSES_PER_SERVER),
                t1 / n1,
                if n1 == 1.0 { "" } else { "s" },
                if sim {
                    "absolute figures follow the simulator's CPU model (a server handles one message at a time, \
                     ~5 µs each plus 0.5 ns per byte sent; a RAMP-F New-Order is a read round, a prepare carrying \
                     every version's write set, and a commit), not the 32 cores of EC2's cr1.8xlarge"
                } else {
                    "real processes on this 2-core machine, clients in one process beside the servers"
                }
            );
        }
        // Scaling from the first point, and from 10 (or the second point) to the largest.
        let linear = |(na, ta): (f64, f64), (nb, tb): (f64, f64)| tb / (ta / na * nb).max(1e-9);
        if let (Some(a), Some(b)) = (first, last) {
            let hundred = at(100.0).map(|t| (100.0, t));
            let main = hundred.unwrap_or(b);
            let ten = at(10.0).map(|t| (10.0, t)).or_else(|| scale.get(1).copied());
            let from_ten = ten
                .filter(|t| t.0 < main.0)
                .map_or("-".into(), |t| format!("{} from {:.0} to {:.0} servers", pct(linear(t, main)), t.0, main.0));
            let mut cells = format!(
                "{} of linear from {:.0} to {:.0} servers (tput({:.0}) = {:.0}/s, {:.0} × tput({:.0}) = {:.0}/s); {from_ten}",
                pct(linear(a, main)),
                a.0,
                main.0,
                main.0,
                main.1,
                main.0 / a.0,
                a.0,
                a.1 * main.0 / a.0
            );
            if b.0 > main.0 {
                let _ = write!(
                    cells,
                    "; {} of linear from {:.0} to {:.0} servers ({:.0}/s)",
                    pct(linear(a, b)),
                    a.0,
                    b.0,
                    b.1
                );
            }
            let why = if sim {
                "weak scaling, 5 warehouses per server; with one server TPC-C's 1% remote lines stay on it, from two \
                 on about a tenth of New-Orders (1% of 5–15 lines) pay a second server's messages: most of the gap \
                 is between 1 and 10 servers"
            } else {
                "every server process, and the client process, shares this machine's 2 cores, which one server and \
                 its clients already saturate: adding servers adds no CPU, so this measures the cost of spreading \
                 the same machine over more processes, not scaling"
            };
            let _ = writeln!(
                out,
                "| Coordination-free New-Order scales linearly: 89.5% of perfect scaling from 1 to 100 servers, perfect from 10 to 100 (Fig. 6); 1.6M New-Order/s on 100 servers | 89.5%, 100%, 1.6M/s | {cells} | {why} |"
            );
        }
        // The serializable baselines' scaling, for comparison.
        let baselines: Vec<&String> = self.protocols.iter().filter(|p| *p != SUBJECT).collect();
        let base_scale: Vec<String> = baselines
            .iter()
            .filter_map(|p| {
                let c = self.coord_curve(records, SERVERS_SUFFIX, p);
                let (a, b) = (*c.first()?, *c.last()?);
                (b.0 > a.0).then(|| format!("{p} {} ({:.0} → {:.0} servers)", pct(linear(a, b)), a.0, b.0))
            })
            .collect();
        if !base_scale.is_empty() {
            let _ = writeln!(
                out,
                "| (not in the paper: the serializable baselines' scaling on the same placement) | - | {} | % of linear from the first to the last server count each ran |",
                base_scale.join(", ")
            );
        }
        // The distributed share.
        let share = |p: &str| self.coord_curve(records, SHARE_SUFFIX, p);
        let cost = |c: &[(f64, f64)]| -> Option<(f64, f64)> {
            let base = c.first().filter(|(x, _)| *x == 0.0)?.1;
            let full = c.iter().find(|(x, _)| *x == 100.0)?.1;
            let worst = c.iter().map(|(_, y)| 1.0 - y / base.max(1e-9)).fold(f64::MIN, f64::max);
            Some((1.0 - full / base.max(1e-9), worst))
        };
        let servers = self.coord_variants(SHARE_SUFFIX).first().map_or(0, |v| v.topology.partitions);
        if let Some((full, worst)) = cost(&share(SUBJECT)) {
            let _ = writeln!(
                out,
                "| Distributed New-Orders cost the coordination-free path at most 25% (Fig. 5: serialization, message handling, the kernel's TCP stack) | ≤ 25% | {} at 100% distributed (1 − tput(100%)/tput(0%)), worst over the sweep {} ({servers} servers) | a distributed New-Order sends its remote stock merge to a second server in the same RAMP rounds (one read round, prepare, commit): more messages, no waiting on another transaction{} |",
                pct(full),
                pct(worst),
                if sim { "; the simulator charges each message to the CPU of the server handling it" } else { "" }
            );
        }
        let losses: Vec<String> =
            baselines.iter().filter_map(|p| Some(format!("{p} {}", pct(cost(&share(p))?.0)))).collect();
        if !losses.is_empty() {
            let _ = writeln!(
                out,
                "| Serializable approaches lose 66–88% as New-Orders become distributed (§6.2, citing VLL) | 66–88% | {} (1 − tput(100%)/tput(0%)) | a distributed serializable New-Order keeps its district's D_NEXT_O_ID under concurrency control across a second server's round trips and the commit: 2PL holds the lock through two-phase commit (other New-Orders of the district wait), OCC's longer window means more failed validations, Rococo's one-round local New-Order becomes rounds at two servers whose dependencies make the district's next New-Orders wait; the coordination-free New-Order takes the id in one increment at commit and waits for no one |",
                losses.join(", ")
            );
        }
        // Simulator speed.
        if sim {
            let largest = records
                .iter()
                .filter(|r| r.sim_events.is_some())
                .max_by(|a, b| a.partitions.cmp(&b.partitions).then(a.sim_events.cmp(&b.sim_events)));
            if let Some(r) = largest {
                let _ = writeln!(
                    out,
                    "| (the issue: the simulator runs the 100-server New-Order scale-out in minutes of wall time) | - | largest run: {} on {} servers, {} events in {:.1} s of wall time = {:.0} events/s (load and audit included) | one thread; a RAMP-F event is costly to simulate (its handlers compare write sets of about 35 keys per version) |",
                    r.protocol,
                    r.partitions,
                    r.sim_events.unwrap_or(0),
                    r.wall_s,
                    events_per_s(r).unwrap_or(0.0)
                );
            }
        }
        let audited: Vec<&RunRecord> = records.iter().filter(|r| r.tpcc.is_some()).collect();
        let failed: Vec<String> = audited
            .iter()
            .filter(|r| r.tpcc.as_ref().is_some_and(|a| !a.ok()))
            .map(|r| format!("{} {}", r.protocol, r.variant))
            .collect();
        let _ = writeln!(
            out,
            "| (TPC-C's 12 consistency conditions) | hold | {} of {} runs audited; {} | |",
            audited.len(),
            records.len(),
            if failed.is_empty() {
                "every audited run holds all 12".to_string()
            } else {
                format!("violated in {}", failed.join(", "))
            }
        );
        out
    }
}
