//! [`Pacer`]: the schedule of a periodic duty (stabilisation, heartbeats, vector exchange, garbage
//! collection) that backs off while there is nothing new, so that an idle cluster costs next to nothing (no
//! timer inputs to handle, log or fsync), and returns to its base period as soon as there is.
//!
//! After a round with news the next round is `base` away; after each quiet round the period doubles, up to
//! `max`. News arriving between rounds ([`Pacer::wake`]) pulls a far-off round in to `base` from now. A
//! server cannot cancel a timer, so each timer carries the pacer's generation: pulling a round in starts a
//! new generation, and the timer of the old one is recognised as stale when it fires ([`Pacer::live`]) and
//! ignored.

use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pacer {
    base_ns: u64,
    max_ns: u64,
    /// The delay the next round was (or will be) armed with.
    period_ns: u64,
    /// When the armed round is due.
    due_ns: u64,
    /// The generation of the one live timer.
    generation: u64,
}

impl Pacer {
    /// A duty every `base_ns` while busy, backing off to every `max_ns` (at least `base_ns`) while idle.
    pub fn new(base_ns: u64, max_ns: u64) -> Self {
        let base_ns = base_ns.max(1);
        Self { base_ns, max_ns: max_ns.max(base_ns), period_ns: base_ns, due_ns: 0, generation: 0 }
    }

    /// Arms the first round, `base` from `now_ns`: the timer's delay and generation.
    pub fn start(&mut self, now_ns: u64) -> (u64, u64) {
        self.arm(now_ns, self.base_ns)
    }

    /// Whether a timer of `generation` is the live one (else it is stale: ignore it, arm nothing).
    pub fn live(&self, generation: u64) -> bool {
        generation == self.generation
    }

    /// After a round: arm the next one, `base` away after news, twice the last period after a quiet round.
    pub fn next(&mut self, now_ns: u64, news: bool) -> (u64, u64) {
        let period = if news { self.base_ns } else { self.period_ns.saturating_mul(2).min(self.max_ns) };
        self.arm(now_ns, period)
    }

    /// Arms the next round `delay_ns` from now without changing the period (a duty that knows exactly when it
    /// is next due, e.g. a heartbeat after a recent message).
    pub fn after(&mut self, now_ns: u64, delay_ns: u64) -> (u64, u64) {
        let period = self.period_ns;
        let armed = self.arm(now_ns, delay_ns.max(1));
        self.period_ns = period;
        armed
    }

    /// News between rounds: if the armed round is more than `base` away, a new timer (delay, generation)
    /// for `base` from now, which replaces the armed one.
    pub fn wake(&mut self, now_ns: u64) -> Option<(u64, u64)> {
        if self.due_ns <= now_ns.saturating_add(self.base_ns) {
            return None;
        }
        Some(self.arm(now_ns, self.base_ns))
    }

    /// The generation of the live timer.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    fn arm(&mut self, now_ns: u64, period_ns: u64) -> (u64, u64) {
        self.period_ns = period_ns;
        self.due_ns = now_ns.saturating_add(period_ns);
        self.generation = self.generation.wrapping_add(1);
        (period_ns, self.generation)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quiet_rounds_back_off_to_the_maximum_and_news_returns_to_the_base() {
        let mut p = Pacer::new(10, 75);
        let (delay, generation) = p.start(0);
        assert_eq!(delay, 10);
        assert!(p.live(generation));
        let periods: Vec<u64> = (0..5).map(|i| p.next(i * 100, false).0).collect();
        assert_eq!(periods, [20, 40, 75, 75, 75]);
        assert_eq!(p.next(1_000, true).0, 10, "a round with news keeps the base period");
    }

    #[test]
    fn news_between_rounds_pulls_a_far_round_in_and_makes_the_old_timer_stale() {
        let mut p = Pacer::new(10, 1_000);
        p.start(0);
        let (_, old) = p.next(10, false); // due at 30: close enough
        assert_eq!(p.wake(25), None, "the round is due within the base period anyway");
        for _ in 0..6 {
            p.next(100, false);
        }
        let (_, far) = p.next(100, false);
        assert!(p.live(far) && !p.live(old));
        let (delay, near) = p.wake(150).expect("a far round is pulled in");
        assert_eq!(delay, 10);
        assert!(p.live(near) && !p.live(far), "the far timer is stale once it fires");
        assert_eq!(p.wake(155), None, "already near");
    }
}
