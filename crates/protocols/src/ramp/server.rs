//! A RAMP partition server: versions per key, `lastCommit`, prepares, commits, reads of either round, and
//! the collection of overwritten versions.

use super::{Found, Get, Metadata, Ramp, RampMsg, RampTimer, Ts};
use crate::components::{Pacer, UnloggedWrites};
use serde::{Deserialize, Serialize};
use snowline_core::{
    Addr, Check, ClientId, Ctx, InvalidInput, InvalidKind, Key, Message, OpId, ProtocolConfig, ServerId, ServerNode,
    Topology, Value,
};
use std::collections::{BTreeMap, BTreeSet};
use std::marker::PhantomData;

type Cx<'a, M> = Ctx<'a, Ramp<M>>;

/// One stored version.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(bound = "")]
struct Stored<M: Metadata> {
    value: Value,
    meta: M::Meta,
}

/// One key's versions and `lastCommit`.
#[derive(Debug, Serialize, Deserialize)]
#[serde(bound = "")]
struct KeyState<M: Metadata> {
    versions: BTreeMap<Ts, Stored<M>>,
    /// The highest committed timestamp (`None`: nothing committed yet: reads return the initial state).
    last_commit: Option<Ts>,
}

impl<M: Metadata> Default for KeyState<M> {
    fn default() -> Self {
        Self { versions: BTreeMap::new(), last_commit: None }
    }
}

/// A RAMP server of one partition.
#[derive(Serialize, Deserialize)]
#[serde(bound = "")]
pub struct RampServer<M: Metadata> {
    id: ServerId,
    topology: Topology,
    config: ProtocolConfig,
    keys: BTreeMap<Key, KeyState<M>>,
    /// The keys each transaction prepared here and has not committed here yet.
    prepared: BTreeMap<Ts, Vec<Key>>,
    /// Overwritten versions, each with the time (this server's clock) from which it may be collected.
    overwritten: BTreeSet<(u64, Key, Ts)>,
    unlogged_writes: UnloggedWrites,
    pacer: Pacer,
    _strategy: PhantomData<M>,
}

impl<M: Metadata> RampServer<M> {
    pub fn new(id: ServerId, topology: Topology, config: ProtocolConfig) -> Self {
        let ms = 1_000_000;
        let pacer = Pacer::new(config.gc_interval_ms.saturating_mul(ms), config.idle_backoff_ms.saturating_mul(ms));
        Self {
            id,
            topology,
            config,
            keys: BTreeMap::new(),
            prepared: BTreeMap::new(),
            overwritten: BTreeSet::new(),
            unlogged_writes: UnloggedWrites::default(),
            pacer,
            _strategy: PhantomData,
        }
    }

    /// `lastCommit` of `key` (for tests).
    pub fn last_commit(&self, key: &str) -> Option<Ts> {
        self.keys.get(key).and_then(|k| k.last_commit)
    }

    /// The timestamps of `key`'s stored versions, oldest first (for tests).
    pub fn versions(&self, key: &str) -> Vec<Ts> {
        self.keys.get(key).map(|k| k.versions.keys().copied().collect()).unwrap_or_default()
    }

    /// Transactions prepared here and not committed here (for tests).
    pub fn prepared(&self) -> usize {
        self.prepared.len()
    }

    fn gc_delay_ns(&self) -> u64 {
        self.config.ramp_gc_delay_ms.saturating_mul(1_000_000)
    }

    /// Everything a message says that the handlers rely on, checked before it touches any state.
    fn validate(&self, now_ns: u64, from: Addr, msg: &RampMsg<M::Meta>) -> Result<(), InvalidInput> {
        let check = Check::new(&self.topology, &self.config, now_ns, from, msg.kind());
        let partition = self.id.partition;
        let own_ts = |client: ClientId, ts: &Ts| {
            check.ensure(ts.client == client, InvalidKind::Sender, || format!("{client} uses {ts:?}, not its own"))?;
            check.time(ts.time, "timestamp").map(|_| ())
        };
        match msg {
            RampMsg::Prepare { ts, writes, meta, .. } => {
                let client = check.client()?;
                own_ts(client, ts)?;
                check.ensure(!writes.is_empty(), InvalidKind::Malformed, || "no writes".into())?;
                check.request_writes(writes.iter().map(|(k, v)| (k, v)), [])?;
                let distinct: BTreeSet<&Key> = writes.iter().map(|(k, _)| k).collect();
                check
                    .ensure(distinct.len() == writes.len(), InvalidKind::Malformed, || "a key written twice".into())?;
                writes.iter().try_for_each(|(k, _)| check.key_on(k, partition))?;
                M::check(meta, writes, &check)?;
            }
            RampMsg::Commit { ts, .. } => {
                let client = check.client()?;
                own_ts(client, ts)?;
            }
            RampMsg::Get { gets, .. } => {
                check.client()?;
                check.request_keys(gets.iter().map(|g| &g.key))?;
                for g in gets {
                    check.key_on(&g.key, partition)?;
                    if let Some(set) = &g.among {
                        check.ensure(!set.is_empty(), InvalidKind::Malformed, || "an empty timestamp set".into())?;
                        check.ensure(set.len() <= self.config.max_keys_per_request, InvalidKind::Limit, || {
                            format!(
                                "{} timestamps in one read; the limit is {} (max_keys_per_request)",
                                set.len(),
                                self.config.max_keys_per_request
                            )
                        })?;
                        set.iter().try_for_each(|ts| check.time(ts.time, "timestamp").map(|_| ()))?;
                    }
                }
            }
            RampMsg::Prepared { .. } | RampMsg::Committed { .. } | RampMsg::Got { .. } => {
                return Err(check.fail(InvalidKind::Sender, "only a client is sent this"));
            }
        }
        Ok(())
    }

    fn message(&mut self, cx: &mut Cx<'_, M>, from: Addr, msg: RampMsg<M::Meta>) -> Result<(), InvalidInput> {
        cx.charge(1);
        self.validate(cx.now_ns(), from, &msg)?;
        let Addr::Client(client) = from else { unreachable!("validate admits client messages only") };
        match msg {
            RampMsg::Prepare { op, ts, writes, meta } => self.prepare(cx, client, op, ts, writes, meta),
            RampMsg::Commit { op, ts } => self.commit(cx, client, op, ts),
            RampMsg::Get { op, round, gets } => self.get(cx, client, op, round, gets),
            other => unreachable!("validate admits no {} from a client", other.kind()),
        }
        Ok(())
    }

    /// Store a transaction's versions of this partition's keys, invisible until committed (a duplicate
    /// prepare changes nothing).
    fn prepare(
        &mut self,
        cx: &mut Cx<'_, M>,
        client: ClientId,
        op: OpId,
        ts: Ts,
        writes: Vec<(Key, Value)>,
        meta: M::Meta,
    ) {
        cx.charge(writes.len() as u64);
        let now = cx.now_ns();
        let due = now.saturating_add(self.gc_delay_ns());
        let mut stored = Vec::new();
        for (key, value) in writes {
            let state = self.keys.entry(key.clone()).or_default();
            if state.versions.contains_key(&ts) {
                continue;
            }
            state.versions.insert(ts, Stored { value, meta: meta.clone() });
            // Below lastCommit on arrival: overwritten already (a later round two may still ask for it).
            if state.last_commit.is_some_and(|lc| ts < lc) {
                self.overwritten.insert((due, key.clone(), ts));
            }
            self.unlogged_writes.note(cx, &key);
            stored.push(key);
        }
        if !stored.is_empty() {
            self.prepared.entry(ts).or_default().extend(stored);
        }
        if M::ONE_ROUND_WRITES {
            // No concurrency control: visible at once (the commit answers the client).
            return self.commit(cx, client, op, ts);
        }
        self.wake(cx);
        cx.send(client, RampMsg::Prepared { op, ts });
    }

    /// Raise `lastCommit` of every key `ts` prepared here (a commit of nothing prepared is a duplicate).
    fn commit(&mut self, cx: &mut Cx<'_, M>, client: ClientId, op: OpId, ts: Ts) {
        let keys = self.prepared.remove(&ts).unwrap_or_default();
        cx.charge(keys.len() as u64 + 1);
        let due = cx.now_ns().saturating_add(self.gc_delay_ns());
        for key in keys {
            let Some(state) = self.keys.get_mut(&key) else { continue };
            let old = state.last_commit;
            if old.is_some_and(|lc| lc >= ts) {
                continue;
            }
            state.last_commit = Some(ts);
            // Every version from the old lastCommit up to this one is overwritten from now on (older ones were
            // already).
            for (v, _) in state.versions.range(..ts) {
                if old.is_none_or(|lc| *v >= lc) {
                    self.overwritten.insert((due, key.clone(), *v));
                }
            }
            self.unlogged_writes.note(cx, &key);
        }
        self.wake(cx);
        cx.send(client, RampMsg::Committed { op, ts });
    }

    /// Answer a round of reads: the version at `lastCommit`, or the highest among a set of timestamps.
    fn get(&mut self, cx: &mut Cx<'_, M>, client: ClientId, op: OpId, round: u32, gets: Vec<Get>) {
        cx.read_only();
        let mut found = Vec::with_capacity(gets.len());
        for g in gets {
            let state = self.keys.get(&g.key);
            let version = state.and_then(|s| {
                let ts = match &g.among {
                    None => s.last_commit?,
                    Some(set) => *set.iter().filter(|ts| s.versions.contains_key(ts)).max()?,
                };
                s.versions.get(&ts).map(|v| Found { ts, value: v.value.clone(), meta: v.meta.clone() })
            });
            cx.charge(1 + g.among.as_ref().map_or(0, |s| s.len() as u64));
            if version.is_some() {
                self.unlogged_writes.wait_for(cx, &g.key);
            }
            found.push(version);
        }
        cx.send(client, RampMsg::Got { op, round, found });
    }

    fn wake(&mut self, cx: &mut Cx<'_, M>) {
        if self.overwritten.is_empty() {
            return;
        }
        if let Some((delay, generation)) = self.pacer.wake(cx.now_ns()) {
            cx.set_timer(delay, RampTimer::Collect { generation });
        }
    }

    /// Drop the versions overwritten for `ramp_gc_delay_ms`.
    fn collect(&mut self, cx: &mut Cx<'_, M>, generation: u64) {
        if !self.pacer.live(generation) {
            return;
        }
        let now = cx.now_ns();
        let mut dropped = 0u64;
        while let Some((due, _, _)) = self.overwritten.first() {
            if *due > now {
                break;
            }
            let (_, key, ts) = self.overwritten.pop_first().expect("just seen");
            if let Some(state) = self.keys.get_mut(&key) {
                // Only ever below lastCommit, which never decreases: never the visible version, never one that
                // is newer than it.
                if state.last_commit.is_some_and(|lc| ts < lc) && state.versions.remove(&ts).is_some() {
                    dropped += 1;
                }
            }
        }
        cx.charge(dropped / 16 + 1);
        let news = !self.overwritten.is_empty();
        let (delay, generation) = self.pacer.next(now, news);
        cx.set_timer(delay, RampTimer::Collect { generation });
    }
}

impl<M: Metadata> ServerNode<Ramp<M>> for RampServer<M> {
    fn on_start(&mut self, cx: &mut Cx<'_, M>) {
        let (delay, generation) = self.pacer.start(cx.now_ns());
        cx.set_timer(delay, RampTimer::Collect { generation });
    }

    fn on_message(&mut self, cx: &mut Cx<'_, M>, from: Addr, msg: RampMsg<M::Meta>) -> Result<(), InvalidInput> {
        self.message(cx, from, msg)
    }

    fn on_timer(&mut self, cx: &mut Cx<'_, M>, timer: RampTimer) {
        let RampTimer::Collect { generation } = timer;
        self.collect(cx, generation);
    }

    fn stored_versions(&self) -> usize {
        self.keys.values().map(|k| k.versions.len()).sum()
    }
}
