//! Clocks, seeds and timers shared by the server and client drivers.

use rand::rngs::SmallRng;
use rand::{RngCore, SeedableRng};
use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::time::{SystemTime, UNIX_EPOCH};
use tokio::time::{Duration, Instant};

/// Wall-clock nanoseconds since the UNIX epoch: protocols compare clocks across processes.
pub(crate) fn wall_ns() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(0)
}

/// A node's physical clock: the wall clock, kept non-decreasing (the driver contract requires it even if
/// the system clock steps back).
#[derive(Default)]
pub(crate) struct NodeClock {
    last: u64,
}

impl NodeClock {
    pub(crate) fn read(&mut self) -> u64 {
        self.read_offset(0)
    }

    /// A reading `offset_ns` away from real time (a nemesis's clock offset, `crate::faults`); never below
    /// an earlier reading.
    pub(crate) fn read_offset(&mut self, offset_ns: i64) -> u64 {
        self.last = self.last.max(wall_ns().saturating_add_signed(offset_ns));
        self.last
    }

    /// Later readings are at least `ns` (`Ctx::raise_clock`).
    pub(crate) fn raise(&mut self, ns: u64) {
        self.last = self.last.max(ns);
    }
}

/// A node's generator: OS entropy mixed with the node's identity.
pub(crate) fn node_rng(salt: u64) -> SmallRng {
    let mut os = SmallRng::from_os_rng();
    SmallRng::seed_from_u64(os.next_u64() ^ salt.wrapping_mul(0x9E37_79B9_7F4A_7C15))
}

/// A random u64 from OS entropy.
pub(crate) fn os_u64() -> u64 {
    SmallRng::from_os_rng().next_u64()
}

struct Entry<K, T> {
    due: Instant,
    seq: u64,
    node: K,
    timer: T,
}

impl<K, T> PartialEq for Entry<K, T> {
    fn eq(&self, other: &Self) -> bool {
        (self.due, self.seq) == (other.due, other.seq)
    }
}
impl<K, T> Eq for Entry<K, T> {}
impl<K, T> PartialOrd for Entry<K, T> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl<K, T> Ord for Entry<K, T> {
    // Reversed: BinaryHeap is a max-heap and we want the earliest deadline first (FIFO among equals).
    fn cmp(&self, other: &Self) -> Ordering {
        (other.due, other.seq).cmp(&(self.due, self.seq))
    }
}

/// Pending protocol timers of many nodes, on the monotonic clock.
pub(crate) struct TimerHeap<K, T> {
    heap: BinaryHeap<Entry<K, T>>,
    seq: u64,
}

impl<K, T> TimerHeap<K, T> {
    pub(crate) fn new() -> Self {
        Self { heap: BinaryHeap::new(), seq: 0 }
    }

    pub(crate) fn push(&mut self, now: Instant, delay_ns: u64, node: K, timer: T) {
        self.seq += 1;
        let due = now.checked_add(Duration::from_nanos(delay_ns)).unwrap_or_else(far_future);
        self.heap.push(Entry { due, seq: self.seq, node, timer });
    }

    pub(crate) fn next_due(&self) -> Option<Instant> {
        self.heap.peek().map(|e| e.due)
    }

    /// The earliest timer due at or before `now`.
    pub(crate) fn pop_due(&mut self, now: Instant) -> Option<(K, T)> {
        if self.heap.peek()?.due <= now {
            let e = self.heap.pop().expect("peeked");
            Some((e.node, e.timer))
        } else {
            None
        }
    }
}

/// An instant far enough away to mean "never" (sleep deadlines must be finite).
pub(crate) fn far_future() -> Instant {
    Instant::now() + Duration::from_secs(86_400 * 365)
}
