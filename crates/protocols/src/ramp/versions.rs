//! One key's versions at a RAMP server, with merge writes ([`snowline_core::merge`]) folded for readers.
//!
//! A put's version is its value. A merge's version is *materialized* for a reader: the fold, in timestamp
//! order, of the latest committed put below it (or the folded base, below) and every committed merge between
//! that and it, then the merge itself. Uncommitted versions below the one read are left out (a dead client's
//! prepare must not leak into what others read); a prepared merge read by its timestamp in round two
//! includes itself. So two reads of one merge version may differ when an older merge commits between them:
//! a counter's version names the increments folded up to its timestamp, which a late-committing older one
//! joins (the history checker identifies versions by the value written, not the sum).
//!
//! Collection of a key that has merges keeps the fold: before a committed version is dropped, the key's
//! `base` becomes the materialized fields at its timestamp (the fold of every committed version up to it);
//! a merge still uncommitted is never dropped, and when it commits below the base it is folded into the base
//! unless a put above it had already replaced the row (`base_put`). A round-two read of a merge below the
//! base finds nothing (as for a collected version: RAMP-F's reader starts again).

use super::{Metadata, Ts};
use serde::{Deserialize, Serialize};
use snowline_core::{Value, merge};
use std::collections::BTreeMap;

/// One stored version.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(bound = "")]
pub(super) struct Stored<M: Metadata> {
    pub value: Value,
    pub meta: M::Meta,
    /// Committed here (a prepared version is not until its commit arrives).
    #[serde(default)]
    pub committed: bool,
}

/// The fold of collected versions of a key with merges.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub(super) struct Base {
    /// Every committed version at or below this timestamp is folded in.
    pub ts: Option<Ts>,
    /// The folded fields (`None`: the row was never written).
    pub fields: Option<String>,
    /// The newest put folded in: a merge older than it that commits late changes nothing.
    pub put: Option<Ts>,
}

/// One key's versions and `lastCommit`.
#[derive(Debug, Serialize, Deserialize)]
#[serde(bound = "")]
pub(super) struct KeyState<M: Metadata> {
    pub versions: BTreeMap<Ts, Stored<M>>,
    /// The highest committed timestamp (`None`: nothing committed yet: reads return the initial state).
    pub last_commit: Option<Ts>,
    /// Whether any merge was ever stored for the key (then collection maintains `base`).
    #[serde(default)]
    pub merges: bool,
    #[serde(default)]
    pub base: Base,
}

impl<M: Metadata> Default for KeyState<M> {
    fn default() -> Self {
        Self { versions: BTreeMap::new(), last_commit: None, merges: false, base: Base::default() }
    }
}

impl<M: Metadata> KeyState<M> {
    /// Store a version (not yet committed unless `committed`); `false` if `ts` was there already.
    pub fn store(&mut self, ts: Ts, value: Value, meta: M::Meta, committed: bool) -> bool {
        if self.versions.contains_key(&ts) {
            return false;
        }
        self.merges |= merge::is_merge(&value);
        self.versions.insert(ts, Stored { value, meta, committed });
        true
    }

    /// Mark `ts` committed. A merge committing at or below the base is folded into it and dropped.
    pub fn mark_committed(&mut self, ts: Ts) {
        let Some(v) = self.versions.get_mut(&ts) else { return };
        v.committed = true;
        if self.base.ts.is_some_and(|b| ts <= b) {
            let v = self.versions.remove(&ts).expect("just seen");
            if merge::is_merge(&v.value) && self.base.put.is_none_or(|p| ts > p) {
                // A merge that does not apply (malformed fields) was refused at prepare; a row that became
                // non-numeric since leaves the base as it was.
                if let Ok(f) = merge::apply(self.base.fields.as_deref(), &v.value) {
                    self.base.fields = Some(f);
                }
            }
        }
    }

    /// The value a reader of version `ts` gets: the value itself for a put, the materialized row for a merge
    /// (`None`: no such version, or a merge below the base).
    pub fn read(&self, ts: Ts) -> Option<Value> {
        let v = self.versions.get(&ts)?;
        if !merge::is_merge(&v.value) {
            return Some(v.value.clone());
        }
        if self.base.ts.is_some_and(|b| ts <= b) {
            return None;
        }
        // Merges are checked at prepare; a base field that is not a number (a put of text into a counter)
        // makes the fold fail, and the reader gets the version as written.
        let Ok(Some(fields)) = self.fold_to(ts) else { return Some(v.value.clone()) };
        let (_, tag) = merge::split_tag(&v.value);
        Some(match tag {
            Some(t) => format!("{fields};{t}").into(),
            None => fields.into(),
        })
    }

    /// The materialized fields at `ts` (committed versions below it, and the version at `ts` itself).
    pub fn fold_to(&self, ts: Ts) -> Result<Option<String>, String> {
        let floor = self.base.ts;
        let below = self.versions.range(..=ts).rev().take_while(|(t, _)| floor.is_none_or(|b| **t > b));
        let mut chain: Vec<&str> = Vec::new();
        let mut start: Option<&str> = None;
        let mut from_base = true;
        for (t, v) in below {
            if *t != ts && !v.committed {
                continue;
            }
            if merge::is_merge(&v.value) {
                chain.push(&v.value);
            } else {
                start = Some(&v.value);
                from_base = false;
                break;
            }
        }
        chain.reverse();
        let base = if from_base { self.base.fields.as_deref() } else { start };
        merge::fold(base, chain)
    }

    /// The materialized fields at `lastCommit` (what a single-partition call or a deferred id reads).
    pub fn latest(&self) -> Option<Value> {
        self.read(self.last_commit?)
    }

    /// Whether `ts` may be dropped now (below `lastCommit`; a merge only once committed). Before a key with
    /// merges drops a committed version, the base takes the fold up to it.
    pub fn drop_version(&mut self, ts: Ts) -> bool {
        if self.last_commit.is_none_or(|lc| ts >= lc) {
            return false;
        }
        let Some(v) = self.versions.get(&ts) else { return false };
        if !self.merges {
            self.versions.remove(&ts);
            return true;
        }
        if !v.committed {
            // An uncommitted put below lastCommit is overwritten whatever happens; an uncommitted merge is
            // not: its commit must still count.
            if merge::is_merge(&v.value) {
                return false;
            }
            self.versions.remove(&ts);
            return true;
        }
        if self.base.ts.is_none_or(|b| ts > b) {
            let fields = self.fold_to(ts).ok().flatten();
            let newest_put = self
                .versions
                .range(..=ts)
                .rev()
                .find(|(t, v)| v.committed && !merge::is_merge(&v.value) && self.base.ts.is_none_or(|b| **t > b))
                .map(|(t, _)| *t);
            self.base = Base { ts: Some(ts), fields, put: newest_put.or(self.base.put) };
        }
        self.versions.remove(&ts);
        true
    }
}
