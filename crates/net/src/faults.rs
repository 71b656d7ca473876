//! Faults injected into a running cluster by a nemesis (`snowline nemesis`): network partitions between
//! nodes, added delay, and clock offsets, carried out inside the runtime's links and clocks.
//!
//! A cluster whose config names a `fault_file` (experiments only) has each server poll that file every
//! [`POLL`]; the nemesis rewrites it atomically (write, then rename) to change the faults. A partition holds
//! the frames of a cut link back until it heals, as TCP would retransmit them: nothing is lost, only late
//! (lost frames are a different fault: a connection reset). A clock offset moves a node's physical clock
//! readings; they never go backwards (`NodeClock`), so a negative step holds the clock still until real
//! time catches up, as a monotonic clock does when NTP steps it back.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI64, Ordering};
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
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cuts_are_symmetric_and_offsets_are_per_node() {
        let f = Faults::new(2);
        f.set(FaultPlan { cut: vec![(1, 2)], extra_delay_ms: 5, clock_offset_ms: [(2, -7), (3, 9)].into() });
        assert_eq!(f.link(1), (true, Duration::from_millis(5)));
        assert_eq!(f.link(3), (false, Duration::from_millis(5)));
        assert_eq!(f.clock_offset_ns(), -7_000_000);
        f.set(FaultPlan::default());
        assert_eq!((f.link(1), f.clock_offset_ns()), ((false, Duration::ZERO), 0));
    }
}
