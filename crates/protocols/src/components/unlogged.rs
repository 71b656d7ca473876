//! [`UnloggedWrites`]: what a read-only read must wait for in a durable host (`snowline_core::Ctx`).
//!
//! A protocol whose reads are read-only (not logged, answered at once) must not return a write that a crash
//! could still lose. Its logged write handlers note each key they write with the input's log position; a
//! read names the positions of the keys it returns (`Ctx::reply_after`), and the host holds the reply until
//! they are durable. Outside a durable host every position is durable at once and nothing is kept.

use serde::{Deserialize, Serialize};
use snowline_core::{Ctx, Key, Protocol};
use std::collections::BTreeMap;

/// Forget durable positions once this many keys are noted (forgetting them changes no read's outcome).
const PRUNE_AT: usize = 4096;

/// Per key, the log position of its latest write while that may not be durable yet.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct UnloggedWrites(BTreeMap<Key, u64>);

impl UnloggedWrites {
    /// A logged handler wrote `key` (at this input's log position).
    pub fn note<P: Protocol>(&mut self, cx: &Ctx<'_, P>, key: &Key) {
        let (position, durable) = (cx.position(), cx.durable_position());
        if position <= durable {
            return;
        }
        if self.0.len() >= PRUNE_AT {
            self.0.retain(|_, p| *p > durable);
        }
        match self.0.get_mut(key) {
            Some(p) => *p = position,
            None => {
                self.0.insert(key.clone(), position);
            }
        }
    }

    /// A read-only handler returns what was written to `key`: its reply waits for that write's record. (The
    /// key's latest write, whichever version is returned: a slight over-wait when it is an older one.)
    pub fn wait_for<P: Protocol>(&self, cx: &mut Ctx<'_, P>, key: &Key) {
        if let Some(&position) = self.0.get(key).filter(|p| **p > cx.durable_position()) {
            cx.reply_after(position);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Cv;
    use rand::SeedableRng;
    use rand::rngs::SmallRng;
    use snowline_core::Effects;

    fn with_log(position: u64, durable: u64, f: impl FnOnce(&mut Ctx<'_, Cv>)) -> Effects<Cv> {
        let mut rng = SmallRng::seed_from_u64(1);
        let mut out = Effects::default();
        f(&mut Ctx::new(0, &mut rng, &mut out).logged(position, durable));
        out
    }

    #[test]
    fn a_read_waits_for_the_latest_write_of_its_key_until_it_is_durable() {
        let mut w = UnloggedWrites::default();
        let (k, other) = (Key::from("k"), Key::from("other"));
        with_log(5, 4, |cx| w.note(cx, &k));
        with_log(7, 4, |cx| w.note(cx, &k));
        assert_eq!(with_log(8, 6, |cx| w.wait_for(cx, &k)).reply_after, 7);
        assert_eq!(with_log(8, 6, |cx| w.wait_for(cx, &other)).reply_after, 0);
        assert_eq!(with_log(8, 7, |cx| w.wait_for(cx, &k)).reply_after, 0, "durable now");
        // Outside a durable host nothing is kept.
        let mut plain = UnloggedWrites::default();
        let mut rng = SmallRng::seed_from_u64(1);
        let mut out = Effects::<Cv>::default();
        plain.note(&Ctx::new(0, &mut rng, &mut out), &k);
        assert!(plain.0.is_empty());
    }
}
