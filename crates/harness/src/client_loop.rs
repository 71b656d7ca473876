//! One closed-loop client, written once for both runtimes: it asks the workload for its next job, turns an
//! interactive transaction into its requests (`Begin`, one `Read` per round, `Commit`), retries aborted
//! transactions under a [`RetryPolicy`], and records metrics and the history. The drivers (`run.rs` for the
//! simulator, `net_run.rs` for real clusters) only carry [`Action`]s out and hand results back.
//!
//! Stateful: what a client does next depends on its last reply (a transaction's writes are sent once its reads
//! answered; an abort leads to a retry after a backoff; an unknown outcome moves the client to a new history
//! process).

use crate::metrics::Metrics;
use crate::run::RunSpec;
use crate::workload::{CallJob, Generator, Job, TxnPlan};
use rand::Rng;
use rand::rngs::SmallRng;
use snowline_core::history::{HistoryOp, HistoryRecorder, OpKind, completed_ops};
use snowline_core::{AbortCause, DcId, Key, OpError, Reply, Request, Value};
use std::collections::VecDeque;

/// What the driver must do for the client next.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// Submit this request to the client's session and hand the result to [`ClientLoop::on_result`].
    Submit(Request),
    /// Wait until this time (the run's clock, ns), then call [`ClientLoop::next`] again (retry backoff).
    WaitUntil(u64),
}

/// How the workload driver retries an aborted transaction. Only aborts are retried: a rejected request would
/// fail again, and a transaction whose outcome is unknown may have committed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts in all, the first included; `None`: until it commits.
    pub max_attempts: Option<u32>,
    /// Backoff before the second attempt; it doubles per attempt (with jitter: a uniform draw in [b/2, b]).
    pub backoff_ns: u64,
    /// The backoff never exceeds this.
    pub max_backoff_ns: u64,
}

impl Default for RetryPolicy {
    /// Until commit, from 1 ms up to 100 ms: what an application that must not lose its transaction does.
    fn default() -> Self {
        Self { max_attempts: None, backoff_ns: 1_000_000, max_backoff_ns: 100_000_000 }
    }
}

impl RetryPolicy {
    /// No retries: an aborted transaction is reported and the client moves on.
    pub fn off() -> Self {
        Self { max_attempts: Some(1), ..Self::default() }
    }

    fn allows(&self, attempts: u32) -> bool {
        self.max_attempts.is_none_or(|max| attempts < max)
    }

    fn backoff(&self, attempts: u32, rng: &mut SmallRng) -> u64 {
        let b = self.backoff_ns.saturating_mul(1u64 << attempts.saturating_sub(1).min(20)).min(self.max_backoff_ns);
        if b < 2 { b } else { rng.random_range(b / 2..=b) }
    }
}

impl std::str::FromStr for RetryPolicy {
    type Err = String;

    /// `off`, `until-commit`, or a number of retries (`3`: up to 4 attempts).
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "off" | "0" => Ok(Self::off()),
            "until-commit" => Ok(Self::default()),
            n => n
                .parse::<u32>()
                .map(|retries| Self { max_attempts: Some(retries.saturating_add(1)), ..Self::default() })
                .map_err(|_| format!("retry policy {s:?}: use off, until-commit or a number of retries")),
        }
    }
}

/// Where a client records what happened.
pub struct Sink<'a> {
    pub spec: &'a RunSpec,
    pub metrics: &'a mut Metrics,
    pub recorder: &'a mut HistoryRecorder,
}

#[derive(Debug)]
enum Step {
    Begin,
    Read(usize),
    Commit,
    /// An error came back before the commit and the transaction may still be open at the session: an
    /// `Abort` was sent to close it; the attempt then ends with this error.
    CleanUp(OpError),
    /// Between attempts.
    Backoff(u64),
}

#[derive(Debug)]
struct TxnRun {
    plan: TxnPlan,
    attempts: u32,
    first_start: u64,
    attempt_start: u64,
    /// When the current attempt's `Commit` was sent (its termination started).
    commit_start: u64,
    /// The history slot of the current attempt's invoke.
    slot: Option<usize>,
    /// The current attempt's micro-operations so far, in program order.
    ops: Vec<HistoryOp>,
    step: Step,
}

/// A stored-procedure call, over its attempts.
#[derive(Debug)]
struct CallRun {
    job: CallJob,
    attempts: u32,
    first_start: u64,
    attempt_start: u64,
    /// The history slot of the current attempt's invoke.
    slot: Option<usize>,
    /// Between attempts: the time of the next.
    backoff: Option<u64>,
}

#[derive(Debug)]
enum State {
    Ready,
    Op { request: Request, start: u64 },
    Txn(Box<TxnRun>),
    Call(Box<CallRun>),
}

/// One closed-loop client. See the module documentation.
#[derive(Debug)]
pub struct ClientLoop {
    pub dc: DcId,
    /// The client's history process (a new one after an unknown outcome).
    pub process: u64,
    /// The client's number in the run (TPC-C pins client `i` to district `i mod districts`).
    pub index: usize,
    seq: u64,
    rng: SmallRng,
    retry: RetryPolicy,
    pending: VecDeque<Job>,
    state: State,
}

impl ClientLoop {
    pub fn new(dc: DcId, process: u64, rng: SmallRng, retry: RetryPolicy) -> Self {
        Self { dc, process, index: 0, seq: 0, rng, retry, pending: VecDeque::new(), state: State::Ready }
    }

    /// The client's number in the run.
    pub fn with_index(mut self, index: usize) -> Self {
        self.index = index;
        self
    }

    /// Whether a request is outstanding (the driver waits for its result).
    pub fn busy(&self) -> bool {
        match &self.state {
            State::Ready => false,
            State::Op { .. } => true,
            State::Txn(t) => !matches!(t.step, Step::Backoff(_)),
            State::Call(c) => c.backoff.is_none(),
        }
    }

    /// The next action, at time `now`. Call it when no request is outstanding.
    pub fn next(&mut self, generator: &Generator, now: u64, sink: &mut Sink<'_>) -> Action {
        if let State::Txn(t) = &mut self.state
            && let Step::Backoff(until) = t.step
        {
            if now < until {
                return Action::WaitUntil(until);
            }
            return self.start_attempt(now, sink);
        }
        if let State::Call(c) = &mut self.state
            && let Some(until) = c.backoff
        {
            if now < until {
                return Action::WaitUntil(until);
            }
            return self.start_call_attempt(now, sink);
        }
        debug_assert!(matches!(self.state, State::Ready), "next() while a request is outstanding");
        if self.pending.is_empty() {
            self.pending.extend(generator.next_jobs(&mut self.rng, self.index, self.process, self.seq));
        }
        match self.pending.pop_front().expect("a generator returns at least one job") {
            Job::Op(request) => {
                self.seq += 1;
                if sink.spec.record_history {
                    sink.recorder.invoke(self.process, self.dc, &request, now);
                }
                self.state = State::Op { request: request.clone(), start: now };
                Action::Submit(request)
            }
            Job::Txn(plan) => {
                self.state = State::Txn(Box::new(TxnRun {
                    plan,
                    attempts: 0,
                    first_start: now,
                    attempt_start: now,
                    commit_start: now,
                    slot: None,
                    ops: Vec::new(),
                    step: Step::Begin,
                }));
                self.start_attempt(now, sink)
            }
            Job::Call(job) => {
                self.state = State::Call(Box::new(CallRun {
                    job,
                    attempts: 0,
                    first_start: now,
                    attempt_start: now,
                    slot: None,
                    backoff: None,
                }));
                self.start_call_attempt(now, sink)
            }
        }
    }

    /// The next attempt of a stored-procedure call: a fresh token (so its values are new), a history slot.
    fn start_call_attempt(&mut self, now: u64, sink: &mut Sink<'_>) -> Action {
        let State::Call(c) = &mut self.state else { unreachable!("an attempt belongs to a call") };
        c.attempts += 1;
        c.attempt_start = now;
        c.backoff = None;
        let mut args = c.job.args.clone();
        if c.job.token
            && let Some(token) = args.first_mut()
        {
            *token = format!("{}-{}", self.process, self.seq).into();
        }
        self.seq += 1;
        c.slot = sink.spec.record_history.then(|| sink.recorder.invoke_txn(self.process, self.dc, now));
        Action::Submit(Request::Call { procedure: c.job.procedure.to_string(), args })
    }

    /// A call's attempt ended: record it; on a retriable abort, back off and try again.
    fn call_result(&mut self, mut c: Box<CallRun>, now: u64, result: Result<Reply, OpError>, sink: &mut Sink<'_>) {
        let kind = c.job.procedure;
        let measured = sink.spec.measured(c.attempt_start, now);
        if let Ok(reply) = &result
            && measured
        {
            sink.metrics.record_step(reply);
            sink.metrics.record_txn_writes(reply.writes.len());
        }
        if let Some(slot) = c.slot.take() {
            let request = Request::Call { procedure: kind.to_string(), args: Vec::new() };
            let ops = match &result {
                Ok(reply) => completed_ops(&request, reply),
                // Aborted or rejected: no effect. Unknown: what it would have written is not known here.
                Err(_) => Vec::new(),
            };
            let outcome = result.as_ref().map(|r| r.commit).map_err(Clone::clone);
            self.process = sink.recorder.complete_txn(slot, ops, &outcome, now);
        }
        if let Err(OpError::Aborted(abort)) = &result {
            if measured {
                sink.metrics.record_abort(abort.cause);
                sink.metrics.record_kind_abort(kind);
            }
            if abort.cause != AbortCause::User && self.retry.allows(c.attempts) {
                c.backoff = Some(now + self.retry.backoff(c.attempts, &mut self.rng));
                self.state = State::Call(c);
                return;
            }
        }
        if sink.spec.measured(c.first_start, now) {
            if let Ok(reply) = &result {
                sink.metrics.record_kind_call(kind, &reply.metrics);
            }
            sink.metrics.record_txn(kind, &result.map(|_| ()), now - c.first_start, c.attempts);
        }
    }

    fn start_attempt(&mut self, now: u64, sink: &mut Sink<'_>) -> Action {
        let State::Txn(t) = &mut self.state else { unreachable!("an attempt belongs to a transaction") };
        t.attempts += 1;
        t.attempt_start = now;
        t.ops.clear();
        t.step = Step::Begin;
        t.slot = sink.spec.record_history.then(|| sink.recorder.invoke_txn(self.process, self.dc, now));
        Action::Submit(Request::Begin)
    }

    /// The driver is about to send the submitted request, at `now`: a single operation's latency runs from
    /// here, so it leaves out the time the workload took to make the request (its history invoke, recorded
    /// earlier, still comes before the send).
    pub fn submitted(&mut self, now: u64) {
        if let State::Op { start, .. } = &mut self.state {
            *start = now;
        }
    }

    /// Hand back the result of the submitted request; returns the next action unless the client must wait
    /// for nothing (then the driver calls [`ClientLoop::next`]).
    pub fn on_result(
        &mut self,
        generator: &Generator,
        now: u64,
        result: Result<Reply, OpError>,
        sink: &mut Sink<'_>,
    ) -> Option<Action> {
        match std::mem::replace(&mut self.state, State::Ready) {
            State::Ready => None,
            State::Op { request, start } => {
                if sink.spec.measured(start, now) {
                    sink.metrics.record(&request, &result, now - start);
                }
                if sink.spec.record_history {
                    self.process = sink.recorder.complete(self.process, self.dc, &request, &result, now);
                }
                None
            }
            State::Call(c) if c.backoff.is_some() => {
                self.state = State::Call(c);
                None
            }
            State::Call(c) => {
                self.call_result(c, now, result, sink);
                None
            }
            State::Txn(mut t) => {
                let action = self.txn_step(generator, &mut t, now, result, sink);
                if action.is_some() || matches!(t.step, Step::Backoff(_)) {
                    self.state = State::Txn(t);
                }
                action
            }
        }
    }

    fn txn_step(
        &mut self,
        generator: &Generator,
        t: &mut TxnRun,
        now: u64,
        result: Result<Reply, OpError>,
        sink: &mut Sink<'_>,
    ) -> Option<Action> {
        let step = std::mem::replace(&mut t.step, Step::Begin);
        if let Ok(reply) = &result
            && sink.spec.measured(t.attempt_start, now)
        {
            sink.metrics.record_step(reply);
            if matches!(step, Step::Commit) {
                sink.metrics.record_txn_writes(t.plan.writes.len());
            }
        }
        if matches!(step, Step::Commit) && !t.plan.writes.is_empty() && sink.spec.measured(t.commit_start, now) {
            let outcome = match &result {
                Ok(_) => Ok(()),
                Err(e) => Err(e.clone()),
            };
            sink.metrics.record_update_termination(&outcome, now - t.commit_start);
        }
        match (step, result) {
            (Step::Begin, Ok(_)) => Some(self.after_read(generator, t, 0, now)),
            (Step::Read(round), Ok(reply)) => {
                t.ops.extend(reply.reads.into_iter().map(|r| HistoryOp(OpKind::Read, r.key, r.value)));
                Some(self.after_read(generator, t, round + 1, now))
            }
            (Step::Commit, Ok(reply)) => {
                let version = reply.commit;
                self.end_attempt(t, now, Ok(version), sink);
                None
            }
            // An abort closes the transaction at the session; an unknown commit outcome may have committed.
            (Step::Begin | Step::Read(_) | Step::Commit, Err(e)) if matches!(e, OpError::Aborted(_)) => {
                self.end_attempt(t, now, Err(e), sink)
            }
            (Step::Commit, Err(e)) => self.end_attempt(t, now, Err(e), sink),
            // Rejected or unknown before the commit: nothing was written, but the session may still hold the
            // transaction open: close it, then end the attempt with the original error.
            (Step::Begin | Step::Read(_), Err(e)) => {
                t.step = Step::CleanUp(e);
                Some(Action::Submit(Request::Abort))
            }
            (Step::CleanUp(e), _) => self.end_attempt(t, now, Err(e), sink),
            (Step::Backoff(until), _) => {
                t.step = Step::Backoff(until);
                None
            }
        }
    }

    /// After `round` rounds of reads: the next round, or the commit with this attempt's unique values.
    fn after_read(&mut self, generator: &Generator, t: &mut TxnRun, round: usize, now: u64) -> Action {
        if let Some(keys) = t.plan.rounds.get(round) {
            t.step = Step::Read(round);
            return Action::Submit(Request::Read { keys: keys.clone() });
        }
        let seq = self.seq;
        self.seq += 1;
        let writes: Vec<(Key, Value)> =
            t.plan.writes.iter().enumerate().map(|(i, k)| (k.clone(), generator.value(self.process, seq, i))).collect();
        t.ops.extend(writes.iter().map(|(k, v)| HistoryOp(OpKind::Write, k.clone(), Some(v.clone()))));
        t.step = Step::Commit;
        t.commit_start = now;
        Action::Submit(Request::Commit { writes })
    }

    /// Record the attempt's outcome; on a retriable abort, schedule the next attempt.
    fn end_attempt(
        &mut self,
        t: &mut TxnRun,
        now: u64,
        outcome: Result<Option<snowline_core::Version>, OpError>,
        sink: &mut Sink<'_>,
    ) -> Option<Action> {
        if let Some(slot) = t.slot.take() {
            self.process = sink.recorder.complete_txn(slot, std::mem::take(&mut t.ops), &outcome, now);
        }
        let kind = if t.plan.writes.is_empty() { "ro-txn" } else { "rw-txn" };
        let measured = sink.spec.measured(t.attempt_start, now);
        if let Err(OpError::Aborted(abort)) = &outcome {
            if measured {
                sink.metrics.record_abort(abort.cause);
                if !t.plan.writes.is_empty() {
                    sink.metrics.record_update_abort(abort.cause);
                }
            }
            if abort.cause != AbortCause::User && self.retry.allows(t.attempts) {
                t.step = Step::Backoff(now + self.retry.backoff(t.attempts, &mut self.rng));
                return None;
            }
        }
        if sink.spec.measured(t.first_start, now) {
            sink.metrics.record_txn(kind, &outcome.map(|_| ()), now - t.first_start, t.attempts);
        }
        None
    }

    /// The run is over: record what is outstanding as ended by the run (`info` for writes that may have
    /// happened, `fail` for the rest).
    pub fn finish(&mut self, now: u64, sink: &mut Sink<'_>) {
        let ended = || OpError::Unknown("the run ended before the operation completed".into());
        match std::mem::replace(&mut self.state, State::Ready) {
            State::Op { request, .. } if sink.spec.record_history => {
                sink.recorder.complete(self.process, self.dc, &request, &Err(ended()), now);
            }
            State::Txn(mut t) => {
                if let Some(slot) = t.slot.take() {
                    // Before the commit was sent, nothing can have been written: a certain no-effect.
                    let outcome = match t.step {
                        Step::Commit => Err(ended()),
                        _ => Err(OpError::Rejected("the run ended before the transaction committed".into())),
                    };
                    sink.recorder.complete_txn(slot, std::mem::take(&mut t.ops), &outcome, now);
                }
            }
            State::Call(mut c) => {
                if let Some(slot) = c.slot.take() {
                    sink.recorder.complete_txn(slot, Vec::new(), &Err(ended()), now);
                }
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::{MixedWorkload, Pattern, YcsbMix};
    use rand::SeedableRng;
    use snowline_core::history::EventType;
    use snowline_core::{ReadResult, Topology, Version};

    fn spec() -> RunSpec {
        RunSpec {
            clients_per_dc: 1,
            client_dcs: None,
            duration_ns: u64::MAX / 2,
            warmup_ns: 0,
            cooldown_ns: 0,
            workload: MixedWorkload::ycsb_t(YcsbMix::C),
            record_history: true,
            seed: 1,
            final_reads_after_ns: None,
            retry: RetryPolicy { backoff_ns: 10, max_backoff_ns: 10, max_attempts: None },
        }
    }

    fn read_reply(keys: &[Key]) -> Reply {
        Reply {
            reads: keys
                .iter()
                .map(|k| ReadResult { key: k.clone(), value: None, version: Version::INITIAL, versions_skipped: 0 })
                .collect(),
            ..Default::default()
        }
    }

    /// Drive one update transaction of YCSB-T mix C: begin, read, commit (aborted once by a deadlock, then
    /// retried after the backoff with fresh values).
    #[test]
    fn a_transaction_runs_step_by_step_and_an_abort_is_retried_with_fresh_values() {
        let spec = RunSpec { workload: MixedWorkload { write_ratio: 1.0, ..spec().workload }, ..spec() };
        let generator = Generator::new(spec.workload.clone(), Topology::new(1, 2));
        assert_eq!(spec.workload.pattern, Pattern::YcsbT { mix: YcsbMix::C });
        let (mut metrics, mut recorder) = (Metrics::default(), HistoryRecorder::new());
        let mut sink = Sink { spec: &spec, metrics: &mut metrics, recorder: &mut recorder };
        let process = sink.recorder.new_process();
        let mut c = ClientLoop::new(0, process, SmallRng::seed_from_u64(1), spec.retry);
        let mut commits = Vec::new();
        let mut now = 0;
        let mut action = c.next(&generator, now, &mut sink);
        for _ in 0..20 {
            now += 5;
            let result = match &action {
                Action::Submit(Request::Begin) => Ok(Reply::default()),
                Action::Submit(Request::Read { keys }) => Ok(read_reply(keys)),
                Action::Submit(Request::Commit { writes }) => {
                    commits.push(writes.clone());
                    if commits.len() == 1 {
                        Err(OpError::aborted(AbortCause::Deadlock, "wounded"))
                    } else {
                        Ok(Reply { commit: Some(Version { time: 7, dc: 0 }), ..Default::default() })
                    }
                }
                Action::WaitUntil(t) => {
                    now = *t;
                    action = c.next(&generator, now, &mut sink);
                    continue;
                }
                other => panic!("unexpected {other:?}"),
            };
            match c.on_result(&generator, now, result, &mut sink) {
                Some(a) => action = a,
                None if commits.len() == 2 => break,
                None => action = c.next(&generator, now, &mut sink),
            }
        }
        assert_eq!(commits.len(), 2, "aborted once, then committed");
        assert_eq!(commits[0][0].0, commits[1][0].0, "the retry writes the same key");
        assert_ne!(commits[0][0].1, commits[1][0].1, "with a fresh unique value");
        let events = &sink.recorder.events;
        let kinds: Vec<EventType> = events.iter().map(|e| e.kind).collect();
        assert_eq!(kinds, [EventType::Invoke, EventType::Fail, EventType::Invoke, EventType::Ok]);
        assert_eq!(events[1].cause, Some(AbortCause::Deadlock));
        assert_eq!(events[3].value.len(), 2, "one read, then one write, in program order");
        assert_eq!(events[3].value[0].0, OpKind::Read);
        let summary = sink.metrics.summary(1.0);
        assert_eq!(summary.aborts.get("deadlock"), Some(&1));
        assert_eq!(summary.attempts_per_commit, 2.0);
        // Termination: each Commit answered 5 ns after it was sent; one aborted, one committed.
        let t = summary.update_termination.clone().expect("update transactions terminate");
        assert_eq!((t.ok, t.fail), (1, 1));
        assert!(t.p50_us > 0.0 && t.p50_us < 0.01, "{t:?}");
        assert_eq!(summary.update_aborts.get("deadlock"), Some(&1));
        assert_eq!(summary.update_abort_rate, 0.5);
        assert!(summary.to_string().contains("update transactions: termination"), "{summary}");
    }

    #[test]
    fn retry_policies_parse() {
        assert_eq!("off".parse::<RetryPolicy>().unwrap().max_attempts, Some(1));
        assert_eq!("3".parse::<RetryPolicy>().unwrap().max_attempts, Some(4));
        assert_eq!("until-commit".parse::<RetryPolicy>().unwrap().max_attempts, None);
        assert!("often".parse::<RetryPolicy>().is_err());
    }
}
