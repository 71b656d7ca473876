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
    /// The fold of every committed version up to a timestamp (the last `lastCommit` a reader folded at), so
    /// a hot counter's reads fold only what committed since; dropped when a version commits below it.
    #[serde(skip)]
    cache: std::cell::RefCell<Option<(Ts, Option<String>)>>,
}

impl<M: Metadata> Default for KeyState<M> {
    fn default() -> Self {
        Self {
            versions: BTreeMap::new(),
            last_commit: None,
            merges: false,
            base: Base::default(),
            cache: std::cell::RefCell::new(None),
        }
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
        let value = v.value.clone();
        self.commit_below_cache(ts, &value);
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

    /// A version committing below the cache's timestamp: an increment (adds and keeps only) commutes with
    /// everything folded after it unless a put there replaced the row, so it is added to the cache; anything
    /// else (a put, a set, an append, whose order matters) invalidates it.
    fn commit_below_cache(&mut self, ts: Ts, value: &str) {
        let Some((c, fields)) = self.cache.get_mut().as_mut() else { return };
        if *c <= ts {
            return;
        }
        let increment = merge::ops(value).is_ok_and(|ops| {
            ops.iter()
                .all(|op| matches!(op, merge::FieldOp::Add(_) | merge::FieldOp::Bounded { .. } | merge::FieldOp::Keep))
        });
        // A put after `ts` in the chain, stored or already folded into the base.
        let replaced = || {
            self.base.put.is_some_and(|p| p > ts)
                || self.versions.range(ts..=*c).any(|(t, v)| *t != ts && v.committed && !merge::is_merge(&v.value))
        };
        if increment
            && !replaced()
            && let Ok(f) = merge::apply(fields.as_deref(), value)
        {
            *fields = Some(f);
            return;
        }
        *self.cache.get_mut() = None;
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
        // Start from the later of the base and the cache (both folds of every committed version up to their
        // timestamps), if at or below `ts`.
        let cache = self.cache.borrow().clone().filter(|(c, _)| *c <= ts);
        let (floor, floor_fields) = match cache {
            Some((c, f)) if self.base.ts.is_none_or(|b| c >= b) => (Some(c), f),
            _ => (self.base.ts, self.base.fields.clone()),
        };
        let below = self.versions.range(..=ts).rev().take_while(|(t, _)| floor.is_none_or(|b| **t > b));
        let mut chain: Vec<&str> = Vec::new();
        let mut start: Option<&str> = None;
        let mut from_floor = true;
        for (t, v) in below {
            if *t != ts && !v.committed {
                continue;
            }
            if merge::is_merge(&v.value) {
                chain.push(&v.value);
            } else {
                start = Some(&v.value);
                from_floor = false;
                break;
            }
        }
        chain.reverse();
        let folded = if from_floor { merge::fold(floor_fields.as_deref(), chain)? } else { merge::fold(start, chain)? };
        if self.last_commit == Some(ts) && self.versions.get(&ts).is_some_and(|v| v.committed) {
            *self.cache.borrow_mut() = Some((ts, folded.clone()));
        }
        Ok(folded)
    }

    /// The materialized fields at `lastCommit` (what a single-partition call or a deferred id reads).
    pub fn latest(&self) -> Option<Value> {
        self.read(self.last_commit?)
    }

    /// The least field `field` can become: its value at `lastCommit` plus every decrement still prepared
    /// (a prepared increment may yet abort, so it does not count). `Err` if a prepared write would replace
    /// the field (a put, a set) or the field is not a number: no bound can be promised then.
    pub fn lowest(&self, field: usize) -> Result<i64, String> {
        let current = self.latest();
        let text = current.as_deref().map(|v| merge::split_tag(v).0).unwrap_or("");
        let text = text.split(',').nth(field).unwrap_or("");
        let mut low: i64 = if text.is_empty() {
            0
        } else {
            text.parse().map_err(|_| format!("field {field} ({text:?}) is not a number"))?
        };
        for v in self.versions.values().filter(|v| !v.committed) {
            let add = merge::field_add(&v.value, field)
                .ok_or_else(|| format!("a prepared write that replaces field {field} is in flight"))?;
            low = low.saturating_add(add.min(0));
        }
        Ok(low)
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ramp::WriteSets;
    use snowline_core::ClientId;

    fn ts(time: u64) -> Ts {
        Ts { time, client: ClientId(0) }
    }

    fn key_with(versions: &[(u64, &str, bool)]) -> KeyState<WriteSets> {
        let mut k = KeyState::<WriteSets>::default();
        for (t, v, committed) in versions {
            k.store(ts(*t), Value::from(*v), std::sync::Arc::from([]), *committed);
            if *committed {
                k.last_commit = k.last_commit.max(Some(ts(*t)));
            }
        }
        k
    }

    #[test]
    fn a_merge_reads_as_the_fold_of_committed_versions_below_it() {
        let k = key_with(&[
            (1, "10,5;a", true),
            (2, "merge:+1,=;b", true),
            (3, "merge:+2,:x;c", false),
            (4, "merge:+4,=;d", true),
        ]);
        assert_eq!(k.read(ts(1)).as_deref(), Some("10,5;a"));
        assert_eq!(k.read(ts(2)).as_deref(), Some("11,5;b"));
        // The uncommitted merge at 3 counts for a reader of 3 (round two asks for it), not for one of 4.
        assert_eq!(k.read(ts(3)).as_deref(), Some("13,x;c"));
        assert_eq!(k.read(ts(4)).as_deref(), Some("15,5;d"));
        assert_eq!(k.latest().as_deref(), Some("15,5;d"));
    }

    #[test]
    fn collection_keeps_the_fold_and_a_late_commit_below_the_base_still_counts() {
        let mut k =
            key_with(&[(1, "10;a", true), (2, "merge:+1;b", false), (3, "merge:+2;c", true), (5, "merge:+4;d", true)]);
        assert!(!k.drop_version(ts(2)), "an uncommitted merge is kept");
        assert!(k.drop_version(ts(3)));
        assert!(k.drop_version(ts(1)));
        assert_eq!(k.latest().as_deref(), Some("16;d"));
        // The merge at 2 commits after the base passed it: folded into the base, not lost.
        k.mark_committed(ts(2));
        assert!(!k.versions.contains_key(&ts(2)));
        assert_eq!(k.latest().as_deref(), Some("17;d"));
        assert!(!k.drop_version(ts(5)), "never the version at lastCommit");
    }

    #[test]
    fn a_put_replaces_the_row_and_older_merges_committing_late_do_not_resurrect() {
        let mut k = key_with(&[(1, "10;a", true), (2, "merge:+1;b", false), (3, "7;c", true), (4, "merge:+1;d", true)]);
        assert_eq!(k.latest().as_deref(), Some("8;d"));
        assert!(k.drop_version(ts(3)));
        k.mark_committed(ts(2));
        assert_eq!(k.latest().as_deref(), Some("8;d"), "the put at 3 overwrote the merge at 2");
    }

    #[test]
    fn the_lowest_value_counts_prepared_decrements_not_prepared_increments() {
        let k = key_with(&[(1, "20,0;a", true), (2, "merge:-4>=10;b", false), (3, "merge:+7;c", false)]);
        assert_eq!(k.lowest(0), Ok(16));
        assert_eq!(k.lowest(1), Ok(0));
        let k = key_with(&[(1, "20;a", true), (2, "5;b", false)]);
        assert!(k.lowest(0).unwrap_err().contains("in flight"));
        assert_eq!(KeyState::<WriteSets>::default().lowest(0), Ok(0), "a row never written counts as 0");
    }

    #[test]
    fn keys_without_merges_collect_as_before() {
        let mut k = key_with(&[(1, "a", true), (2, "b", false), (3, "c", true)]);
        assert!(k.drop_version(ts(2)), "an overwritten prepared put may go");
        assert!(k.drop_version(ts(1)));
        assert_eq!(k.latest().as_deref(), Some("c"));
        assert!(!k.merges && k.base.ts.is_none());
    }
}
