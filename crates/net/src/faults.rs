//! Faults injected into a running cluster by a nemesis (`snowline nemesis`): network partitions between
//! nodes, added delay, lost frames, connection resets, and clock offsets, carried out inside the
//! runtime's links and clocks.
//!
//! A cluster whose config names a `fault_file` (experiments only) has each server poll that file every
//! [`POLL`]; the nemesis rewrites it atomically (write, then rename) to change the faults. A partition holds
//! the frames of a cut link back until it heals, as TCP would retransmit them: nothing is lost, only late
//! (lost frames are a different fault). A *reset* closes every link between nodes at once and throws away
//! every frame queued on it, as a connection reset loses what was in flight; *loss* drops each frame
//! between nodes with a given probability. The sequenced links (`snowline_core::links`) must make both
//! invisible. A clock offset moves a node's physical clock
//! readings; they never go backwards (`NodeClock`), so a negative step holds the clock still until real
//! time catches up, as a monotonic clock does when NTP steps it back.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

/// How often a server rereads its fault file.
pub const POLL: Duration = Duration::from_millis(20);

/// The faults in force, as the nemesis writes them (JSON).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct FaultPlan {
    /// Pairs of node ids between which no frame flows, in either direction.
    #[serde(default)]
    pub cut: Vec<(u32, u32)>,
    /// Extra one-way delay on every link between nodes, in milliseconds.
    #[serde(default)]
    pub extra_delay_ms: u64,
    /// Per node id: how far its clock is moved from real time, in milliseconds (negative: behind).
    #[serde(default)]
    pub clock_offset_ms: BTreeMap<u32, i64>,
    /// Every time this number grows, every link between nodes is reset: closed, with the frames queued on
    /// it thrown away, and dialled again.
    #[serde(default)]
    pub resets: u64,
    /// The share of frames between nodes dropped on their way (0 to 1).
    #[serde(default)]
    pub loss: f64,
    /// A deliberately broken runtime, for the nemesis to catch: in-memory servers send to each other
    /// without the sequenced links (plain `Msg` frames, lost with their connection).
    #[serde(default)]
    pub broken_unsequenced_links: bool,
}

impl FaultPlan {
    pub fn is_cut(&self, a: u32, b: u32) -> bool {
        self.cut.iter().any(|&(x, y)| (x, y) == (a, b) || (x, y) == (b, a))
    }

    /// Write the plan to `path` atomically, so a server never reads half of it.
    pub fn write(&self, path: &Path) -> std::io::Result<()> {
        let tmp = path.with_extension("tmp");
        std::fs::write(&tmp, serde_json::to_vec_pretty(self).map_err(std::io::Error::other)?)?;
        std::fs::rename(&tmp, path)
    }
}

/// One process's view of the fault file: the plan in force and this node's clock offset.
#[derive(Debug)]
pub struct Faults {
    node: u32,
    plan: RwLock<Arc<FaultPlan>>,
    offset_ns: AtomicI64,
}

impl Faults {
    pub fn new(node: u32) -> Arc<Self> {
        Arc::new(Self { node, plan: RwLock::new(Arc::default()), offset_ns: AtomicI64::new(0) })
    }

    pub fn plan(&self) -> Arc<FaultPlan> {
        self.plan.read().map(|p| p.clone()).unwrap_or_default()
    }

    fn set(&self, plan: FaultPlan) {
        let offset_ms = plan.clock_offset_ms.get(&self.node).copied().unwrap_or(0);
        self.offset_ns.store(offset_ms.saturating_mul(1_000_000), Ordering::Relaxed);
        if let Ok(mut p) = self.plan.write() {
            *p = Arc::new(plan);
        }
    }

    /// This node's clock offset, in ns.
    pub fn clock_offset_ns(&self) -> i64 {
        self.offset_ns.load(Ordering::Relaxed)
    }

    /// Whether the link from this node to node `to` is cut, and the extra delay on it.
    pub fn link(&self, to: u32) -> (bool, Duration) {
        let plan = self.plan();
        (plan.is_cut(self.node, to), Duration::from_millis(plan.extra_delay_ms))
    }

    /// What a link's writer must do now: its state (`cut`, `delay`, `loss`) and whether it must reset
    /// (the plan's reset count grew since this link last looked).
    pub fn for_link(&self, link: &LinkFaults) -> LinkState {
        let plan = self.plan();
        let seen = link.resets_seen.swap(plan.resets, Ordering::Relaxed);
        LinkState {
            cut: plan.is_cut(self.node, link.to),
            delay: Duration::from_millis(plan.extra_delay_ms),
            loss: plan.loss.clamp(0.0, 1.0),
            reset: plan.resets > seen,
        }
    }

    /// Follow `path` until the runtime stops: a missing or unreadable file means no faults (said once).
    pub fn watch(self: &Arc<Self>, path: PathBuf) -> tokio::task::JoinHandle<()> {
        let me = self.clone();
        tokio::spawn(async move {
            let mut last: Option<Vec<u8>> = None;
            let mut warned = false;
            loop {
                match tokio::fs::read(&path).await {
                    Ok(bytes) if last.as_ref() != Some(&bytes) => match serde_json::from_slice::<FaultPlan>(&bytes) {
                        Ok(plan) => {
                            me.set(plan);
                            last = Some(bytes);
                        }
                        Err(e) if !warned => {
                            eprintln!("warning: fault file {}: {e}; keeping the faults in force", path.display());
                            warned = true;
                        }
                        Err(_) => {}
                    },
                    Ok(_) => {}
                    Err(_) if last.is_some() => {
                        me.set(FaultPlan::default());
                        last = None;
                    }
                    Err(_) => {}
                }
                tokio::time::sleep(POLL).await;
            }
        })
    }
}

/// What an outbound link between two nodes asks of the faults: the link's far end.
#[derive(Clone, Debug)]
pub struct LinkFaults {
    pub faults: Arc<Faults>,
    pub to: u32,
    /// The plan's reset count when this link last looked.
    pub resets_seen: Arc<AtomicU64>,
}

impl LinkFaults {
    pub fn new(faults: Arc<Faults>, to: u32) -> Self {
        let resets_seen = Arc::new(AtomicU64::new(faults.plan().resets));
        Self { faults, to, resets_seen }
    }
}

/// One link's faults now ([`Faults::for_link`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LinkState {
    pub cut: bool,
    pub delay: Duration,
    pub loss: f64,
    pub reset: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cuts_are_symmetric_and_offsets_are_per_node() {
        let f = Faults::new(2);
        f.set(FaultPlan {
            cut: vec![(1, 2)],
            extra_delay_ms: 5,
            clock_offset_ms: [(2, -7), (3, 9)].into(),
            ..Default::default()
        });
        assert_eq!(f.link(1), (true, Duration::from_millis(5)));
        assert_eq!(f.link(3), (false, Duration::from_millis(5)));
        assert_eq!(f.clock_offset_ns(), -7_000_000);
        f.set(FaultPlan::default());
        assert_eq!((f.link(1), f.clock_offset_ns()), ((false, Duration::ZERO), 0));
    }

    #[test]
    fn a_reset_is_seen_once_by_each_link() {
        let f = Faults::new(1);
        let (a, b) = (LinkFaults::new(f.clone(), 2), LinkFaults::new(f.clone(), 3));
        assert!(!f.for_link(&a).reset);
        f.set(FaultPlan { resets: 1, loss: 0.25, ..Default::default() });
        assert!(f.for_link(&a).reset && f.for_link(&b).reset);
        assert!(!f.for_link(&a).reset, "once");
        assert_eq!(f.for_link(&b).loss, 0.25);
    }
}
