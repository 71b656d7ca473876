//! Clocks: hybrid logical clocks and vector clocks. Physical readings are always passed in.

use serde::{Deserialize, Serialize};
use std::cmp::Ordering;

/// A hybrid logical clock (Kulkarni et al.) in nanosecond units: a timestamp is the larger of the physical
/// clock reading and one more than the last timestamp issued or observed, so it never goes backwards, orders
/// causally related events, and stays close to physical time (what Contrarian §4 and the Tomsic protocols
/// need). The logical counter of the original lives in the low-order nanoseconds; `u64` lasts until 2554.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Hlc {
    last: u64,
}

impl Hlc {
    /// The latest timestamp issued or observed.
    pub fn current(&self) -> u64 {
        self.last
    }

    /// A new timestamp for a local event, strictly greater than every earlier one.
    pub fn tick(&mut self, physical_ns: u64) -> u64 {
        // Saturating: a clock pushed to the end of time stays there rather than wrapping to the past
        // (servers refuse such timestamps before they reach a clock: `validate`).
        self.last = physical_ns.max(self.last.saturating_add(1));
        self.last
    }

    /// Merge a timestamp received in a message; returns a new local timestamp greater than both.
    pub fn observe(&mut self, physical_ns: u64, remote: u64) -> u64 {
        self.last = physical_ns.max(self.last.max(remote).saturating_add(1));
        self.last
    }

    /// Move the clock forward to at least `ts` without issuing a timestamp (Contrarian's "move the clock
    /// forward instead of blocking").
    pub fn advance_to(&mut self, ts: u64) {
        self.last = self.last.max(ts);
    }
}

/// A vector with one entry per datacenter (Cure's snapshot and commit vectors, Contrarian's dependency vectors).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct VectorClock(pub Vec<u64>);

impl VectorClock {
    pub fn zero(dcs: u16) -> Self {
        Self(vec![0; dcs as usize])
    }

    /// Entry `dc`. Panics if out of range: servers check vector lengths and datacenter ids of what they
    /// receive (`validate`) before using them.
    pub fn get(&self, dc: u16) -> u64 {
        self.0[dc as usize]
    }

    /// Set entry `dc` (panics if out of range, as [`VectorClock::get`]).
    pub fn set(&mut self, dc: u16, v: u64) {
        self.0[dc as usize] = v;
    }

    /// Entry-wise maximum, in place.
    pub fn merge_max(&mut self, other: &VectorClock) {
        for (a, b) in self.0.iter_mut().zip(&other.0) {
            *a = (*a).max(*b);
        }
    }

    /// Entry-wise minimum, in place.
    pub fn merge_min(&mut self, other: &VectorClock) {
        for (a, b) in self.0.iter_mut().zip(&other.0) {
            *a = (*a).min(*b);
        }
    }

    /// `self ≤ other` entry-wise.
    pub fn le(&self, other: &VectorClock) -> bool {
        self.0.iter().zip(&other.0).all(|(a, b)| a <= b)
    }

    /// The partial order of vectors; `None` when concurrent.
    pub fn partial_cmp_vc(&self, other: &VectorClock) -> Option<Ordering> {
        match (self.le(other), other.le(self)) {
            (true, true) => Some(Ordering::Equal),
            (true, false) => Some(Ordering::Less),
            (false, true) => Some(Ordering::Greater),
            (false, false) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hlc_is_monotonic_when_physical_time_goes_back() {
        let mut c = Hlc::default();
        let a = c.tick(5_000_000);
        let b = c.tick(4_000_000); // the physical clock stepped back
        assert!(b > a);
        let r = c.observe(1_000, a + 100);
        assert!(r > a + 100);
        assert_eq!(c.tick(9_000_000), 9_000_000, "it follows physical time when that is ahead");
    }

    #[test]
    fn hlc_saturates_instead_of_wrapping() {
        let mut c = Hlc::default();
        assert_eq!(c.observe(5, u64::MAX), u64::MAX);
        assert_eq!(c.tick(7), u64::MAX, "never wraps back to the past");
        assert_eq!(c.observe(7, u64::MAX - 1), u64::MAX);
    }

    #[test]
    fn vector_order() {
        let a = VectorClock(vec![1, 2]);
        let b = VectorClock(vec![2, 2]);
        let c = VectorClock(vec![0, 3]);
        assert!(a.le(&b));
        assert_eq!(a.partial_cmp_vc(&b), Some(Ordering::Less));
        assert_eq!(b.partial_cmp_vc(&c), None);
        let mut m = b.clone();
        m.merge_max(&c);
        assert_eq!(m, VectorClock(vec![2, 3]));
        m.merge_min(&a);
        assert_eq!(m, a);
    }
}
