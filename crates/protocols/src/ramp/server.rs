//! A RAMP partition server: versions per key, `lastCommit`, prepares, commits, reads of either round, and
//! the collection of overwritten versions.

use super::versions::KeyState;
use super::{Found, Get, LocalEffects, Metadata, Ramp, RampMsg, RampTimer, Ts};
use crate::components::{Pacer, UnloggedWrites};
use serde::{Deserialize, Serialize};
use snowline_core::procedure::{self, DeferredId};
use snowline_core::{
    Addr, Check, ClientId, Ctx, InvalidInput, InvalidKind, Key, Message, OpError, OpId, ProtocolConfig, ServerId,
    ServerNode, Topology, Value, merge,
};
use std::collections::{BTreeMap, BTreeSet};
use std::marker::PhantomData;

type Cx<'a, M> = Ctx<'a, Ramp<M>>;

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
    /// The ids deferred ids took, by transaction, for commits sent again (forgotten after ten collection
    /// delays: a client stops sending a commit once acknowledged).
    #[serde(default)]
    assigned: BTreeMap<Ts, u64>,
    /// Transactions aborted here, with when (forgotten as `assigned` is): a prepare that arrives after its
    /// abort is refused rather than left prepared for ever.
    #[serde(default)]
    aborted: BTreeMap<Ts, u64>,
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
            assigned: BTreeMap::new(),
            aborted: BTreeMap::new(),
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
                for (k, v) in writes.iter().filter(|(_, v)| merge::is_merge(v)) {
                    merge::ops(v).map_err(|e| check.fail(InvalidKind::Malformed, format!("key {k:?}: {e}")))?;
                    check.ensure(
                        !M::ONE_ROUND_WRITES || merge::bounds(v).is_empty(),
                        InvalidKind::Malformed,
                        || format!("key {k:?}: {} applies writes at once and cannot keep a bound (-N>=F)", M::NAME),
                    )?;
                }
                M::check(meta, writes, &check)?;
            }
            RampMsg::Commit { ts, deferred, .. } => {
                let client = check.client()?;
                own_ts(client, ts)?;
                if let Some(d) = deferred {
                    let map_key = d.map_key(0);
                    check.request_writes([(&d.counter, &d.counter_value), (&map_key, &d.map_value)], [])?;
                    check.key_on(&d.counter, partition)?;
                    check.key_on(&map_key, partition)?;
                    check.ensure(d.field < 64, InvalidKind::Malformed, || format!("counter field {}", d.field))?;
                    let ops = merge::ops(&d.counter_value).map_err(|e| check.fail(InvalidKind::Malformed, e))?;
                    check.ensure(ops.get(d.field) == Some(&merge::FieldOp::Add(1)), InvalidKind::Malformed, || {
                        "a deferred id's counter write must add 1 to its field".into()
                    })?;
                    check.ensure(!merge::is_merge(&d.map_value), InvalidKind::Malformed, || {
                        "a deferred id's mapping is a put, not a merge".into()
                    })?;
                }
            }
            RampMsg::Abort { ts, .. } => {
                let client = check.client()?;
                own_ts(client, ts)?;
            }
            RampMsg::RunLocal { ts, procedure, args, .. } => {
                let client = check.client()?;
                own_ts(client, ts)?;
                check.request(&snowline_core::Request::Call { procedure: procedure.clone(), args: args.clone() })?;
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
            RampMsg::Prepared { .. }
            | RampMsg::Refused { .. }
            | RampMsg::Aborted { .. }
            | RampMsg::Committed { .. }
            | RampMsg::Got { .. }
            | RampMsg::RanLocal { .. } => {
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
            RampMsg::Commit { op, ts, deferred } => self.commit(cx, client, op, ts, deferred),
            RampMsg::Abort { op, ts } => self.abort(cx, client, op, ts),
            RampMsg::RunLocal { op, ts, procedure, args } => self.run_local(cx, client, op, ts, procedure, args),
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
        if let Err(reason) = self.check_bounds(ts, &writes) {
            return cx.send(client, RampMsg::Refused { op, ts, reason });
        }
        let now = cx.now_ns();
        let due = now.saturating_add(self.gc_delay_ns());
        let mut stored = Vec::new();
        for (key, value) in writes {
            let state = self.keys.entry(key.clone()).or_default();
            if !state.store(ts, value, meta.clone(), false) {
                continue;
            }
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
            return self.commit(cx, client, op, ts, None);
        }
        self.wake(cx);
        cx.send(client, RampMsg::Prepared { op, ts });
    }

    /// Whether this partition can accept `ts`'s writes: not aborted already, and every bounded add keeps
    /// its field at or above the floor even if every decrement prepared here commits (an escrow: the bound
    /// holds whichever of them commit, in any order). `Err` says why not.
    fn check_bounds(&self, ts: Ts, writes: &[(Key, Value)]) -> Result<(), String> {
        if self.aborted.contains_key(&ts) {
            return Err("the transaction was aborted".into());
        }
        for (key, value) in writes {
            for (field, add, floor) in merge::bounds(value) {
                let state = self.keys.get(key);
                let low = match state {
                    Some(s) if !s.versions.contains_key(&ts) => s.lowest(field),
                    // A duplicate prepare: already counted (and accepted).
                    Some(_) => continue,
                    None => Ok(0),
                }
                .map_err(|e| format!("key {key:?}: {e}: cannot keep its bound"))?;
                if low.saturating_add(add.min(0)) < floor {
                    return Err(format!(
                        "below its floor {floor}: key {key:?} field {field} would fall to {} (at least {low} now, counting the \
                         decrements in flight, {add:+} here)",
                        low.saturating_add(add.min(0))
                    ));
                }
            }
        }
        Ok(())
    }

    /// Drop an aborted transaction's prepared versions (it never committed anywhere) and remember the abort.
    fn abort(&mut self, cx: &mut Cx<'_, M>, client: ClientId, op: OpId, ts: Ts) {
        let keys = self.prepared.remove(&ts).unwrap_or_default();
        cx.charge(keys.len() as u64 + 1);
        for key in keys {
            if let Some(state) = self.keys.get_mut(&key)
                && state.versions.get(&ts).is_some_and(|v| !v.committed)
            {
                state.versions.remove(&ts);
                self.unlogged_writes.note(cx, &key);
            }
        }
        self.aborted.insert(ts, cx.now_ns());
        self.wake(cx);
        cx.send(client, RampMsg::Aborted { op, ts });
    }

    /// Raise `lastCommit` of every key `ts` prepared here (a commit of nothing prepared is a duplicate), and
    /// take the deferred id if the transaction asks for one.
    fn commit(&mut self, cx: &mut Cx<'_, M>, client: ClientId, op: OpId, ts: Ts, deferred: Option<DeferredId>) {
        let keys = self.prepared.remove(&ts).unwrap_or_default();
        cx.charge(keys.len() as u64 + 1);
        // The deferred id's versions carry the transaction's metadata (any of its versions here has it).
        let meta = keys.iter().find_map(|k| self.keys.get(k)?.versions.get(&ts).map(|v| v.meta.clone()));
        for key in keys {
            self.commit_key(cx, &key, ts);
        }
        let id = match (deferred, meta) {
            (Some(d), Some(meta)) => self.take_id(cx, ts, d, meta),
            // A commit sent again after the first took the id.
            (Some(_), None) => self.assigned.get(&ts).copied(),
            (None, _) => None,
        };
        self.wake(cx);
        cx.send(client, RampMsg::Committed { op, ts, id });
    }

    /// Make `key`'s version `ts` committed, and raise `lastCommit` to it.
    fn commit_key(&mut self, cx: &mut Cx<'_, M>, key: &Key, ts: Ts) {
        let due = cx.now_ns().saturating_add(self.gc_delay_ns());
        let Some(state) = self.keys.get_mut(key) else { return };
        state.mark_committed(ts);
        self.unlogged_writes.note(cx, key);
        let old = state.last_commit;
        if old.is_some_and(|lc| lc >= ts) {
            return;
        }
        state.last_commit = Some(ts);
        // Every version from the old lastCommit up to this one is overwritten from now on (older ones were
        // already).
        for (v, _) in state.versions.range(..ts) {
            if old.is_none_or(|lc| *v >= lc) {
                self.overwritten.insert((due, key.clone(), *v));
            }
        }
    }

    /// The one atomic increment of a deferred id: read the counter's field (materialized), write the counter's
    /// merge and the mapping at `ts`, committed. `None` if the counter is not a number or `ts` took one
    /// already (a duplicate commit).
    fn take_id(&mut self, cx: &mut Cx<'_, M>, ts: Ts, d: DeferredId, meta: M::Meta) -> Option<u64> {
        if let Some(n) = self.assigned.get(&ts) {
            // A commit sent again: the id it took.
            return Some(*n);
        }
        let state = self.keys.entry(d.counter.clone()).or_default();
        if state.versions.contains_key(&ts) {
            return None;
        }
        let current = state.latest();
        let fields = current.as_deref().map(|v| merge::split_tag(v).0).unwrap_or("");
        let n: u64 = fields.split(',').nth(d.field).unwrap_or("0").parse().ok()?;
        let map_key = d.map_key(n);
        if self.keys.get(&map_key).is_some_and(|s| s.versions.contains_key(&ts)) {
            return None;
        }
        for (key, value) in [(d.counter.clone(), d.counter_value), (map_key, d.map_value)] {
            self.keys.entry(key.clone()).or_default().store(ts, value, meta.clone(), false);
            self.commit_key(cx, &key, ts);
        }
        self.assigned.insert(ts, n);
        Some(n)
    }

    /// A single-partition call, run serially against the latest committed versions and committed at once.
    fn run_local(&mut self, cx: &mut Cx<'_, M>, client: ClientId, op: OpId, ts: Ts, name: String, args: Vec<Value>) {
        let partition = self.id.partition;
        let mut call = match procedure::Call::start(&name, args) {
            Ok(c) => c,
            Err(e) => return cx.send(client, RampMsg::RanLocal { op, ts, outcome: Err(OpError::Rejected(e)) }),
        };
        let mut elsewhere: Option<Key> = None;
        let mut identities: BTreeMap<Key, Option<Value>> = BTreeMap::new();
        let result = procedure::run_all(&mut call, |k| {
            if self.topology.partition_of(k) != partition {
                elsewhere.get_or_insert_with(|| k.clone());
                return None;
            }
            let state = self.keys.get(k)?;
            let lc = state.last_commit?;
            identities.insert(k.clone(), state.versions.get(&lc).map(|v| v.value.clone()));
            state.latest()
        });
        cx.charge(identities.len() as u64 + 1);
        let outcome = match (elsewhere, result) {
            (Some(k), _) => Err(OpError::Rejected(format!(
                "{name} is not single-partition: it reads key {k:?}, which does not live on partition {partition}"
            ))),
            (None, Err(e)) => Err(OpError::aborted(e.cause(), e.to_string())),
            (None, Ok((reads, writes))) => {
                match writes.iter().find(|(k, _)| self.topology.partition_of(k) != partition) {
                    Some((k, _)) => Err(OpError::Rejected(format!(
                        "{name} is not single-partition: it writes key {k:?}, which does not live on partition \
                         {partition}"
                    ))),
                    None => Ok(LocalEffects {
                        reads: reads
                            .into_iter()
                            .map(|(k, _)| (k.clone(), identities.get(&k).cloned().flatten()))
                            .collect(),
                        writes,
                    }),
                }
            }
        };
        let Ok(effects) = outcome else {
            return cx.send(client, RampMsg::RanLocal { op, ts, outcome });
        };
        // Above every version of every key touched, so its puts win and its merges fold last.
        let touched = effects.reads.iter().map(|(k, _)| k).chain(effects.writes.iter().map(|(k, _)| k));
        let top = touched.filter_map(|k| self.keys.get(k)?.versions.keys().next_back().map(|t| t.time)).max();
        let at = Ts { time: ts.time.max(top.map_or(0, |t| t.saturating_add(1))), client: ts.client };
        let mut last: BTreeMap<Key, Value> = BTreeMap::new();
        for (k, v) in &effects.writes {
            last.insert(k.clone(), v.clone());
        }
        let keys: Vec<Key> = last.keys().cloned().collect();
        let meta = M::describe(&keys, &self.config);
        for (key, value) in last {
            self.keys.entry(key.clone()).or_default().store(at, value, meta.clone(), false);
            self.commit_key(cx, &key, at);
        }
        for (k, v) in &effects.reads {
            if v.is_some() {
                self.unlogged_writes.wait_for(cx, k);
            }
        }
        self.wake(cx);
        cx.send(client, RampMsg::RanLocal { op, ts: at, outcome: Ok(effects) });
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
                let v = s.versions.get(&ts)?;
                let merged = if merge::is_merge(&v.value) { Some(s.read(ts)?) } else { None };
                Some(Found { ts, value: v.value.clone(), meta: v.meta.clone(), merged })
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
        let mut retry: Vec<(Key, Ts)> = Vec::new();
        while let Some((due, _, _)) = self.overwritten.first() {
            if *due > now {
                break;
            }
            let (_, key, ts) = self.overwritten.pop_first().expect("just seen");
            if let Some(state) = self.keys.get_mut(&key) {
                // Only ever below lastCommit, which never decreases: never the visible version, never one that
                // is newer than it.
                if state.drop_version(ts) {
                    dropped += 1;
                } else if state.versions.get(&ts).is_some_and(|v| !v.committed)
                    && state.last_commit.is_some_and(|lc| ts < lc)
                {
                    // An uncommitted merge: kept until it commits (then folded), looked at again later.
                    retry.push((key, ts));
                }
            }
        }
        let horizon = now.saturating_sub(self.gc_delay_ns().saturating_mul(10));
        self.assigned.retain(|ts, _| ts.time >= horizon);
        self.aborted.retain(|_, at| *at >= horizon);
        let later = now.saturating_add(self.gc_delay_ns());
        self.overwritten.extend(retry.into_iter().map(|(k, ts)| (later, k, ts)));
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
        if let RampTimer::Collect { generation } = timer {
            self.collect(cx, generation);
        }
    }

    fn stored_versions(&self) -> usize {
        self.keys.values().map(|k| k.versions.len()).sum()
    }
}
