//! The metadata strategies that make RAMP's three variants: what a version carries about its transaction,
//! and how a reader derives its second round from the versions its first round returned.

use super::Ts;
use super::bloom::Bloom;
use serde::Serialize;
use serde::de::DeserializeOwned;
use snowline_core::{Check, InvalidInput, InvalidKind, Key, ProtocolConfig, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Debug;
use std::sync::Arc;

/// One key's first-round result, as [`Metadata::second_round`] sees it.
#[derive(Clone, Copy, Debug)]
pub struct FirstRead<'a, M> {
    pub key: &'a Key,
    /// The version at the key's `lastCommit` (its timestamp and metadata); `None`: the initial state.
    pub found: Option<(Ts, &'a M)>,
}

impl<M> FirstRead<'_, M> {
    fn ts(&self) -> Option<Ts> {
        self.found.map(|(ts, _)| ts)
    }
}

/// What distinguishes RAMP-F, RAMP-S and RAMP-H.
pub trait Metadata: Send + Sync + 'static {
    /// The protocol's name.
    const NAME: &'static str;
    /// What every version of a transaction carries.
    type Meta: Serialize + DeserializeOwned + Clone + Debug + PartialEq + Eq + Send + Sync + 'static;
    /// Whether a second-round request names exactly the version it needs (RAMP-F): when the server has no
    /// such version it was collected, and the read starts again. Otherwise a miss means nothing newer.
    const EXACT: bool;
    /// Writes are made visible as they are stored, in one round, without a commit round ([`NoIsolation`]:
    /// the RAMP paper's baseline without concurrency control).
    const ONE_ROUND_WRITES: bool = false;

    /// The metadata of a transaction that writes `keys` (distinct).
    fn describe(keys: &[Key], config: &ProtocolConfig) -> Self::Meta;

    /// A prepare's metadata is well-formed for its `writes` (the keys of the receiving partition).
    fn check(meta: &Self::Meta, writes: &[(Key, Value)], check: &Check<'_>) -> Result<(), InvalidInput>;

    /// The second round: for each key read (in request order), the timestamps among which to ask for its
    /// highest version, or `None` where the first round's version stands.
    fn second_round(first: &[FirstRead<'_, Self::Meta>]) -> Vec<Option<Vec<Ts>>>;
}

/// RAMP-Fast: a version carries its transaction's write set (shared: every version of a transaction at a
/// server, and every reply that returns one, points at one copy).
pub struct WriteSets;

impl Metadata for WriteSets {
    const NAME: &'static str = "ramp-f";
    type Meta = Arc<[Key]>;
    const EXACT: bool = true;

    fn describe(keys: &[Key], _config: &ProtocolConfig) -> Arc<[Key]> {
        Arc::from(keys)
    }

    fn check(meta: &Arc<[Key]>, writes: &[(Key, Value)], check: &Check<'_>) -> Result<(), InvalidInput> {
        check.request_keys(meta.iter())?;
        let set: BTreeSet<&Key> = meta.iter().collect();
        check.ensure(set.len() == meta.len(), InvalidKind::Malformed, || "a write set names a key twice".into())?;
        match writes.iter().find(|(k, _)| !set.contains(k)) {
            Some((k, _)) => Err(check.fail(InvalidKind::Malformed, format!("the write set lacks written key {k:?}"))),
            None => Ok(()),
        }
    }

    /// Algorithm 1, `GET_ALL`: `v_latest[i]` is the highest timestamp among the returned versions whose
    /// write set contains `i`; ask for exactly that version where it is newer than the one returned.
    fn second_round(first: &[FirstRead<'_, Arc<[Key]>>]) -> Vec<Option<Vec<Ts>>> {
        // One pass over the write sets (a read of hundreds of keys, each version naming tens, stays linear).
        let read: BTreeSet<&Key> = first.iter().map(|r| r.key).collect();
        let mut latest: BTreeMap<&Key, Ts> = BTreeMap::new();
        for (ts, ws) in first.iter().filter_map(|r| r.found) {
            for k in ws.iter().filter(|k| read.contains(k)) {
                let e = latest.entry(k).or_insert(ts);
                *e = (*e).max(ts);
            }
        }
        first
            .iter()
            .map(|r| {
                let latest = *latest.get(r.key)?;
                (Some(latest) > r.ts()).then(|| vec![latest])
            })
            .collect()
    }
}

/// RAMP-Small: a version carries only its timestamp.
pub struct TimestampsOnly;

impl Metadata for TimestampsOnly {
    const NAME: &'static str = "ramp-s";
    type Meta = ();
    const EXACT: bool = false;

    fn describe(_keys: &[Key], _config: &ProtocolConfig) {}

    fn check(_meta: &(), _writes: &[(Key, Value)], _check: &Check<'_>) -> Result<(), InvalidInput> {
        Ok(())
    }

    /// Algorithm 2, `GET_ALL`: every key is asked for its highest version among all first-round timestamps
    /// (a read of one key cannot be fractured: it has no second round).
    fn second_round(first: &[FirstRead<'_, ()>]) -> Vec<Option<Vec<Ts>>> {
        let set: BTreeSet<Ts> = first.iter().filter_map(FirstRead::ts).collect();
        let distinct_keys: BTreeSet<&Key> = first.iter().map(|r| r.key).collect();
        if set.is_empty() || distinct_keys.len() < 2 {
            return vec![None; first.len()];
        }
        let set: Vec<Ts> = set.into_iter().collect();
        first.iter().map(|_| Some(set.clone())).collect()
    }
}

/// RAMP-Hybrid: a version carries a Bloom filter of its transaction's write set.
pub struct BloomFilters;

impl Metadata for BloomFilters {
    const NAME: &'static str = "ramp-h";
    type Meta = Bloom;
    const EXACT: bool = false;

    fn describe(keys: &[Key], config: &ProtocolConfig) -> Bloom {
        Bloom::of(keys.iter().map(|k| &**k), config.ramp_bloom_bits, config.ramp_bloom_hashes)
    }

    fn check(meta: &Bloom, writes: &[(Key, Value)], check: &Check<'_>) -> Result<(), InvalidInput> {
        check.ensure(meta.well_formed(), InvalidKind::Malformed, || {
            format!("a Bloom filter of {} bits and {} hashes", meta.bits(), meta.hashes())
        })?;
        match writes.iter().find(|(k, _)| !meta.may_contain(k)) {
            Some((k, _)) => Err(check.fail(InvalidKind::Malformed, format!("the filter lacks written key {k:?}"))),
            None => Ok(()),
        }
    }

    /// Algorithm 3 (§4.3): key `i` is asked only for the first-round timestamps above its own whose filters
    /// may contain it, for its highest version among them; a false positive finds nothing new.
    fn second_round(first: &[FirstRead<'_, Bloom>]) -> Vec<Option<Vec<Ts>>> {
        first
            .iter()
            .map(|r| {
                let candidates: BTreeSet<Ts> = first
                    .iter()
                    .filter_map(|o| o.found)
                    .filter(|(ts, bloom)| Some(*ts) > r.ts() && bloom.may_contain(r.key))
                    .map(|(ts, _)| ts)
                    .collect();
                (!candidates.is_empty()).then(|| candidates.into_iter().collect())
            })
            .collect()
    }
}

/// No concurrency control (`nocc`; the RAMP paper's §5 baseline "NWNR": no write locks, no read locks): a
/// write is stored and visible at once at each partition (one round; the highest timestamp wins), a read is
/// one round of each key's latest version. Every read returns a committed value (`rc`), but a read may see
/// part of a write transaction: the fractured reads RAMP exists to prevent, which the checker finds at `ra`.
pub struct NoIsolation;

impl Metadata for NoIsolation {
    const NAME: &'static str = "nocc";
    type Meta = ();
    const EXACT: bool = false;
    const ONE_ROUND_WRITES: bool = true;

    fn describe(_keys: &[Key], _config: &ProtocolConfig) {}

    fn check(_meta: &(), _writes: &[(Key, Value)], _check: &Check<'_>) -> Result<(), InvalidInput> {
        Ok(())
    }

    fn second_round(first: &[FirstRead<'_, ()>]) -> Vec<Option<Vec<Ts>>> {
        vec![None; first.len()]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use snowline_core::ClientId;

    fn ts(time: u64) -> Ts {
        Ts { time, client: ClientId(1) }
    }

    /// `x` was read from T2 = {x, y} (ts 2), `y` from T1 = {y} (ts 1), `z` from nothing: y must be repaired.
    #[test]
    fn each_variant_repairs_a_fractured_first_round() {
        let (x, y, z): (Key, Key, Key) = ("x".into(), "y".into(), "z".into());
        let ws2: Arc<[Key]> = Arc::from([x.clone(), y.clone()]);
        let ws1: Arc<[Key]> = Arc::from([y.clone()]);
        let f = [
            FirstRead { key: &x, found: Some((ts(2), &ws2)) },
            FirstRead { key: &y, found: Some((ts(1), &ws1)) },
            FirstRead { key: &z, found: None },
        ];
        assert_eq!(WriteSets::second_round(&f), vec![None, Some(vec![ts(2)]), None]);

        let s = [
            FirstRead { key: &x, found: Some((ts(2), &())) },
            FirstRead { key: &y, found: Some((ts(1), &())) },
            FirstRead { key: &z, found: None },
        ];
        let all = Some(vec![ts(1), ts(2)]);
        assert_eq!(TimestampsOnly::second_round(&s), vec![all.clone(), all.clone(), all]);
        assert_eq!(TimestampsOnly::second_round(&s[..1]), vec![None], "one key: one round");

        let config = ProtocolConfig::default();
        let (b2, b1) = (BloomFilters::describe(&ws2, &config), BloomFilters::describe(&ws1, &config));
        let h = [
            FirstRead { key: &x, found: Some((ts(2), &b2)) },
            FirstRead { key: &y, found: Some((ts(1), &b1)) },
            FirstRead { key: &z, found: None },
        ];
        let plan = BloomFilters::second_round(&h);
        assert_eq!(plan[0], None, "nothing above x's own version");
        assert_eq!(plan[1], Some(vec![ts(2)]));
        // z is asked only on a false positive of T2's filter.
        assert_eq!(plan[2].is_some(), b2.may_contain("z"));
    }

    #[test]
    fn malformed_metadata_is_refused() {
        let t = snowline_core::Topology::new(1, 1);
        let config = ProtocolConfig::default();
        let check = Check::new(&t, &config, 0, snowline_core::Addr::Client(ClientId(1)), "prepare");
        let writes = vec![(Key::from("a"), snowline_core::Value::from("v"))];
        let ws = |keys: &[&str]| keys.iter().map(|k| Key::from(*k)).collect::<Arc<[Key]>>();
        assert!(WriteSets::check(&ws(&["a", "b"]), &writes, &check).is_ok());
        assert!(WriteSets::check(&ws(&["b"]), &writes, &check).is_err());
        assert!(WriteSets::check(&ws(&["a", "a"]), &writes, &check).is_err());
        assert!(BloomFilters::check(&Bloom::of(["a"], 256, 4), &writes, &check).is_ok());
        assert!(BloomFilters::check(&Bloom::new(256, 4), &writes, &check).is_err());
    }
}
