//! A client session ([`JessyClient`]): the coordinator of its transactions, one at a time.

use super::criteria::{certifies_reads, destinations};
use super::server::check_vector;
use super::tpc::tpc_outcome;
use super::{Criterion, Cx, Jessy, JessyMsg, JessyTimer, ReadCertification, ReadRule, TxPayload, params};
use crate::components::multicast::{McastId, McastOrigin};
use crate::components::session;
use crate::components::twopc::{TpcOrigin, TpcWire};
use crate::strong::dependence::{DepVector, ReadAt, commit_vector, snapshot_of};
use serde::Serialize;
use snowline_core::{
    AbortCause, Addr, ClientId, ClientNode, DcId, Key, Offers, OpError, OpId, OpMetrics, PartitionId, ProtocolConfig,
    ReadResult, Reply, Request, ServerId, Termination, Topology, Value, Version,
};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::marker::PhantomData;

/// The session's open transaction.
struct Open {
    /// Earlier reads, with their keys, in order.
    reads: Vec<(Key, ReadAt)>,
    /// Snapshot metadata shipped so far, bytes: what its reads carried and received.
    metadata: u64,
    /// The request being served, if any.
    step: Step,
}

impl Open {
    fn new(step: Step) -> Self {
        Self { reads: Vec::new(), metadata: 0, step }
    }
}

/// Bytes `x` takes on the wire.
fn wire_bytes<T: Serialize>(x: &T) -> u64 {
    postcard::to_stdvec(x).map_or(0, |b| b.len() as u64)
}

enum Step {
    Idle,
    /// Reading `keys` one at a time for `op`; `results` so far; `tag` of the read in flight and the
    /// member it went to.
    Reading {
        op: OpId,
        keys: VecDeque<Key>,
        results: Vec<ReadResult>,
        tag: u64,
        to: ServerId,
        read_only: bool,
    },
    /// Terminating: multicast `id` to `dest` with `snapshot`, votes so far by group; `reply` answers `op`
    /// if it commits.
    Terminating {
        op: OpId,
        id: McastId,
        dest: Vec<PartitionId>,
        snapshot: DepVector,
        votes: BTreeMap<PartitionId, bool>,
        stamp: u64,
        reply: Reply,
    },
}

/// A client session: the coordinator of its transactions, one at a time.
pub struct JessyClient<C> {
    dc: DcId,
    topology: Topology,
    config: ProtocolConfig,
    origin: McastOrigin,
    /// Under `--termination 2pc`: the transactions' two-phase commit origin.
    tpc: TpcOrigin,
    retry_ns: u64,
    next_tag: u64,
    /// When the read under way was sent, and whether a `ReadRetry` timer is armed.
    read_sent_ns: u64,
    retry_armed: bool,
    open: Option<Open>,
    /// With sessions: what this session's transactions saw and wrote, which its next snapshot must hold.
    session: DepVector,
    criterion: PhantomData<C>,
}

impl<C: Criterion> JessyClient<C> {
    pub fn new(id: ClientId, dc: DcId, topology: Topology, config: ProtocolConfig) -> Self {
        let p = params(&config);
        let origin = McastOrigin::new(Addr::Client(id), dc, topology, p.retry_ns, p.record);
        let tpc = TpcOrigin::new(Addr::Client(id), dc, topology, p.retry_ns);
        Self {
            dc,
            topology,
            config,
            origin,
            tpc,
            retry_ns: p.retry_ns,
            next_tag: 0,
            read_sent_ns: 0,
            retry_armed: false,
            open: None,
            session: DepVector::zero(),
            criterion: PhantomData,
        }
    }

    /// The datacenter this session runs in.
    pub fn dc(&self) -> DcId {
        self.dc
    }

    /// Abandons the open transaction if an operation of it was under way (the runtime gave up on it, as
    /// 2PL's client does): a read's transaction is closed, and a commit's outcome is unknown (the groups
    /// still decide it, at most once). The abandoned operation completes as unknown.
    fn abandon(&mut self, cx: &mut Cx<'_, C>) {
        let Some(open) = self.open.take_if(|o| !matches!(o.step, Step::Idle)) else { return };
        let gone = || OpError::Unknown("abandoned: the session sent another request before it completed".into());
        match open.step {
            Step::Reading { op, .. } => cx.complete(op, Err(gone())),
            Step::Terminating { op, id, .. } => {
                match self.config.termination {
                    Termination::Multicast => self.origin.forget(id),
                    Termination::TwoPc => self.tpc.forget(id),
                }
                cx.complete(op, Err(gone()));
            }
            Step::Idle => {}
        }
    }

    fn read_next(&mut self, cx: &mut Cx<'_, C>, to: Option<ServerId>) {
        let Some(open) = self.open.as_mut() else { return };
        let Step::Reading { op, keys, results, tag, to: at, read_only } = &mut open.step else { return };
        let Some(key) = keys.front().cloned() else {
            let (op, read_only) = (*op, *read_only);
            let results = std::mem::take(results);
            let rounds = u32::try_from(results.len()).unwrap_or(u32::MAX);
            let metrics = OpMetrics { rounds, versions_returned: rounds, ..OpMetrics::default() };
            open.step = Step::Idle;
            if read_only && C::CERTIFIES_READS == ReadCertification::All && !results.is_empty() {
                // A one-shot read-only transaction whose reads must be certified: terminate it, and answer
                // with its reads once it commits.
                self.terminate(cx, op, Vec::new(), Reply { reads: results, metrics, ..Reply::default() });
                return;
            }
            let mut metrics = metrics;
            if read_only {
                metrics.metadata_bytes = open.metadata;
                self.close_query();
            }
            cx.complete(op, Ok(Reply { reads: results, metrics, ..Reply::default() }));
            return;
        };
        self.next_tag += 1;
        *tag = self.next_tag;
        *at = to.unwrap_or_else(|| self.topology.nearest(self.dc, self.topology.partition_of(&key)));
        let floor = if C::SESSIONS && open.reads.is_empty() { self.session.clone() } else { DepVector::zero() };
        // What the read rule needs of the earlier reads: all of them (compatibility), the first (which
        // carries the snapshot), or nothing (the newest version).
        let carried = match C::READS {
            ReadRule::Latest => Vec::new(),
            ReadRule::Forward => open.reads.clone(),
            ReadRule::AtStart => open.reads.iter().take(1).cloned().collect(),
        };
        open.metadata += wire_bytes(&carried) + wire_bytes(&floor);
        cx.send(*at, JessyMsg::Read { tag: *tag, key, reads: carried, floor });
        self.read_sent_ns = cx.now_ns();
        if !self.retry_armed {
            self.retry_armed = true;
            cx.set_timer(self.retry_ns, JessyTimer::ReadRetry);
        }
    }

    fn on_read_reply(
        &mut self,
        cx: &mut Cx<'_, C>,
        tag: u64,
        key: Key,
        value: Option<Value>,
        at: ReadAt,
        skipped: u32,
    ) {
        let Some(open) = self.open.as_mut() else { return };
        let Step::Reading { keys, results, tag: want, .. } = &mut open.step else { return };
        if tag != *want || keys.front() != Some(&key) {
            return;
        }
        keys.pop_front();
        open.metadata += wire_bytes(&at);
        results.push(ReadResult {
            key: key.clone(),
            value,
            version: Version { time: at.version, dc: 0 },
            versions_skipped: skipped,
        });
        open.reads.push((key, at));
        self.read_next(cx, None);
    }

    /// Commits the open transaction with `writes`. Where the criterion offers no blind writes, a write of
    /// a key the transaction did not read is refused here, before anything is sent, and the transaction
    /// ends: its snapshot holds no version of that key, so write-conflict certification would abort it
    /// whenever the key exists (blaming a concurrent transaction there is none of), and read certification
    /// (`us`) could commit it unserializably (see [`UsCriterion`]).
    ///
    /// [`UsCriterion`]: super::UsCriterion
    fn commit(&mut self, cx: &mut Cx<'_, C>, op: OpId, writes: Vec<(Key, Value)>) {
        if let Some(open) = &self.open {
            let reads: Vec<Key> = open.reads.iter().map(|(k, _)| k.clone()).collect();
            let unread = C::OFFERS.unread_writes(&reads, &writes);
            if !unread.is_empty() {
                let why = Offers::blind_write_refusal(C::NAME, &unread);
                self.open = None;
                cx.complete(op, Err(OpError::Rejected(why)));
                return;
            }
        }
        self.terminate(cx, op, writes, Reply::default());
    }

    /// Commits the open transaction with `writes`; `reply` is what the operation answers if it commits
    /// (with the commit version added).
    fn terminate(&mut self, cx: &mut Cx<'_, C>, op: OpId, writes: Vec<(Key, Value)>, mut reply: Reply) {
        let Some(open) = self.open.as_mut() else { return };
        let certified = certifies_reads::<C>(!writes.is_empty());
        if writes.is_empty() && (!certified || open.reads.is_empty()) {
            // A query commits at once (wait-free), unless its reads are certified.
            reply.metrics.metadata_bytes = open.metadata;
            self.close_query();
            cx.complete(op, Ok(reply));
            return;
        }
        let mut snapshot = snapshot_of(open.reads.iter().map(|(_, r)| r));
        if C::SESSIONS && open.reads.is_empty() {
            // Nothing read: the snapshot is what the session saw and wrote (the transaction's start).
            snapshot = self.session.clone();
        }
        let reads: Vec<(Key, u64)> = if certified {
            let mut seen = BTreeSet::new();
            open.reads.iter().filter(|(k, _)| seen.insert(k.clone())).map(|(k, r)| (k.clone(), r.version)).collect()
        } else {
            Vec::new()
        };
        let tx = TxPayload { snapshot, writes, reads };
        reply.metrics.metadata_bytes = open.metadata + wire_bytes(&tx.snapshot) + wire_bytes(&tx.reads);
        let dest = destinations::<C>(&self.topology, &tx);
        let payload = postcard::to_stdvec(&tx).expect("a transaction serializes");
        let id = match self.config.termination {
            Termination::Multicast => self.origin.multicast(cx, dest.iter().copied(), payload),
            Termination::TwoPc => self.tpc.begin(cx, dest.iter().copied(), payload),
        };
        let (dest, snapshot) = (dest.into_iter().collect(), tx.snapshot);
        open.step = Step::Terminating { op, id, dest, snapshot, votes: BTreeMap::new(), stamp: 0, reply };
    }

    /// Closes the open transaction, a query that committed: the session has seen its snapshot.
    fn close_query(&mut self) {
        if let Some(open) = self.open.take()
            && C::SESSIONS
        {
            self.session.join(&snapshot_of(open.reads.iter().map(|(_, r)| r)));
        }
    }

    fn on_vote(&mut self, cx: &mut Cx<'_, C>, from: ServerId, id: McastId, yes: bool, stamp: u64) {
        let Some(Open { step: Step::Terminating { id: want, votes, stamp: s, .. }, .. }) = self.open.as_mut() else {
            return;
        };
        if id != *want {
            return;
        }
        votes.entry(from.partition).or_insert(yes);
        *s = stamp;
        if !self.origin.answered(id, from) {
            return;
        }
        let outcome = if votes.values().all(|&v| v) { Ok(*s) } else { Err(AbortCause::Certification) };
        self.finish(cx, outcome);
    }

    /// The open transaction terminated: committed at `stamp`, or aborted for `cause`.
    fn finish(&mut self, cx: &mut Cx<'_, C>, outcome: Result<u64, AbortCause>) {
        let Some(Open { step: Step::Terminating { op, dest, snapshot, mut reply, .. }, .. }) = self.open.take() else {
            return;
        };
        match outcome {
            Ok(stamp) => {
                if C::SESSIONS {
                    self.session.join(&commit_vector(&snapshot, dest, stamp));
                }
                reply.commit = Some(Version { time: stamp, dc: 0 });
                cx.complete(op, Ok(reply));
            }
            Err(cause) => {
                let why = match cause {
                    AbortCause::Vote => "a group voted no: a concurrent prepared transaction holds a conflicting key",
                    AbortCause::Timeout => "presumed abort: a group's vote did not reach the coordinator in time",
                    _ if C::CERTIFIES_READS != ReadCertification::Never => {
                        "certification failed: a concurrent transaction wrote a key this one read or writes"
                    }
                    _ => "certification failed: a concurrent transaction wrote a key this one writes, unseen",
                };
                cx.complete(op, Err(OpError::aborted(cause, why)));
            }
        }
    }

    /// Two-phase commit's outcome: the component's abort is its presumed abort (a timeout); a commit
    /// carries every group's verdict, whose conjunction is the transaction's.
    fn on_tpc_outcome(&mut self, cx: &mut Cx<'_, C>, from: ServerId, wire: TpcWire) {
        let TpcWire::Outcome { id, .. } = &wire else { return };
        let Some(Open { step: Step::Terminating { id: want, .. }, .. }) = &self.open else { return };
        if id != want {
            return;
        }
        let Some(parts) = self.tpc.on_outcome(from, wire) else { return };
        // The component's own abort is its presumed abort: a vote that did not come in time.
        let outcome = parts.map_or(Err(AbortCause::Timeout), |parts| tpc_outcome(&parts));
        self.finish(cx, outcome);
    }
}

impl<C: Criterion> ClientNode<Jessy<C>> for JessyClient<C> {
    /// With sessions (`si`, `psi`): the session's dependence vector, the floor of its next snapshot. Without
    /// them the criterion promises nothing from one transaction to the next: the token is empty.
    fn save_session(&self) -> Vec<u8> {
        if C::SESSIONS { session::encode(C::NAME, &self.session) } else { Vec::new() }
    }

    /// The floor travels with the session's next first read, which a member answers only from a snapshot
    /// covering it, so a session resumes in any datacenter.
    fn resume_session(&mut self, saved: &[u8]) -> Result<(), String> {
        if !C::SESSIONS {
            return if saved.is_empty() {
                Ok(())
            } else {
                Err(format!("{} sessions carry no state (the criterion has no session order)", C::NAME))
            };
        }
        let Some(floor) = session::decode::<DepVector>(C::NAME, saved)? else { return Ok(()) };
        check_vector(&self.topology, &floor).map_err(|e| format!("in the session token, {e}"))?;
        self.session.join(&floor);
        Ok(())
    }

    fn on_request(&mut self, cx: &mut Cx<'_, C>, op: OpId, request: Request) {
        if let Err(reason) = self.config.check_request(&request) {
            cx.complete(op, Err(OpError::Rejected(reason)));
            return;
        }
        // One request at a time: a new one means the runtime gave up on the previous one.
        self.abandon(cx);
        let reject = |cx: &mut Cx<'_, C>, why: &str| cx.complete(op, Err(OpError::Rejected(why.into())));
        const NONE_OPEN: &str = "no open transaction in this session: send Begin first";
        match request {
            Request::Begin if self.open.is_some() => {
                reject(cx, "a transaction is already open in this session: commit or abort it first")
            }
            Request::Begin => {
                self.open = Some(Open::new(Step::Idle));
                cx.complete(op, Ok(Reply::default()));
            }
            Request::Read { .. } | Request::Commit { .. } | Request::Abort if self.open.is_none() => {
                reject(cx, NONE_OPEN)
            }
            Request::Read { keys } => {
                let open = self.open.as_mut().expect("open");
                let step = Step::Reading {
                    op,
                    keys: keys.into(),
                    results: Vec::new(),
                    tag: 0,
                    to: ServerId::new(0, 0),
                    read_only: false,
                };
                open.step = step;
                self.read_next(cx, None);
            }
            Request::Commit { writes } => self.commit(cx, op, writes),
            Request::Abort => {
                self.open = None;
                cx.complete(op, Err(OpError::aborted(AbortCause::User, "aborted by the application")));
            }
            _ if self.open.is_some() => {
                reject(cx, "a transaction is open in this session: commit or abort it before other operations")
            }
            Request::Rot { keys } => {
                let step = Step::Reading {
                    op,
                    keys: keys.into(),
                    results: Vec::new(),
                    tag: 0,
                    to: ServerId::new(0, 0),
                    read_only: true,
                };
                self.open = Some(Open::new(step));
                self.read_next(cx, None);
            }
            Request::Put { key, value } if C::OFFERS.blind_writes => {
                self.open = Some(Open::new(Step::Idle));
                self.commit(cx, op, vec![(key, value)]);
            }
            Request::Update { writes } if C::OFFERS.write_transactions => {
                self.open = Some(Open::new(Step::Idle));
                self.commit(cx, op, writes);
            }
            other => cx.complete(op, Err(C::OFFERS.refusal(C::NAME, &other))),
        }
    }

    fn on_message(&mut self, cx: &mut Cx<'_, C>, from: Addr, msg: JessyMsg) {
        let Addr::Server(server) = from else { return };
        match msg {
            JessyMsg::ReadReply { tag, key, value, at, skipped } => {
                self.on_read_reply(cx, tag, key, value, at, skipped)
            }
            JessyMsg::Vote { id, yes, stamp } => self.on_vote(cx, server, id, yes, stamp),
            JessyMsg::Tpc(wire @ TpcWire::Outcome { .. }) => self.on_tpc_outcome(cx, server, wire),
            _ => {}
        }
    }

    fn on_timer(&mut self, cx: &mut Cx<'_, C>, timer: JessyTimer) {
        match timer {
            JessyTimer::Retry(t) => self.origin.on_retry(cx, t),
            JessyTimer::TpcRetry(t) => self.tpc.on_retry(cx, t),
            JessyTimer::ReadRetry => {
                self.retry_armed = false;
                let Some(Open { step: Step::Reading { to, .. }, .. }) = &self.open else { return };
                let waited = cx.now_ns().saturating_sub(self.read_sent_ns);
                if waited >= self.retry_ns {
                    let next = self.topology.next_member(*to);
                    self.read_next(cx, Some(next));
                } else {
                    // A later read than the one this timer was armed for: look again when it is due.
                    self.retry_armed = true;
                    cx.set_timer(self.retry_ns - waited, JessyTimer::ReadRetry);
                }
            }
            _ => {}
        }
    }
}
