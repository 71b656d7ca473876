//! [`DurableHost`]: the partition servers of one process, made durable by logging the inputs that change their
//! state.
//!
//! # How a server survives a crash
//!
//! Protocol servers are deterministic state machines (`snowline_core::protocol`): given the same state, clock
//! reading, random seed and input they do the same thing. So the host writes every input it feeds a server —
//! the message with its sender, or the timer, together with the clock reading — to the [`RecordLog`] *before*
//! anyone outside the process can see its effects, and it keeps nothing else on disk between checkpoints. On
//! restart it loads the latest checkpoint (every hosted server's whole state, serialized) and replays the
//! records after it; the servers end up exactly where they were after the last durable input. Every protocol
//! is covered by the one mechanism, and what survives is *everything*: committed versions with their
//! timestamps and dependency vectors, prepared two-phase-commit records, hybrid-clock high-water marks,
//! replication positions and stabilisation vectors (`docs/DURABILITY.md` lists, per protocol, which of these a
//! correct restart depends on).
//!
//! The rules that make it sound:
//!
//! 1. **Effects wait for durability.** Replies to clients and messages to other processes produced by an
//!    input are held until the record of that input is committed (the runtime calls [`commit`] as its fsync
//!    policy says). A crash therefore loses only inputs whose effects nobody saw. Messages between servers of
//!    the same process, and timers, stay inside the process and need not wait: the log is one sequence, so
//!    whatever they cause is logged after them.
//! 2. **Replay is exact.** Each input's record carries the clock reading it was handled at and the host
//!    derives the input's random generator from the node's seed and the input's number, so a replayed input
//!    sees what the original saw. The clock never goes backwards across a restart: readings are kept at or
//!    above the last one logged. Timers get ids; a pending timer is re-armed after a restart for what was left
//!    of its delay.
//! 3. **Server-to-server links are exactly-once and FIFO across crashes** (`snowline_core::links`, the
//!    component in-memory servers use too; here its state is logged). Each message from server `a` to
//!    server `b` gets the next sequence number of the link `a → b` and stays in `a`'s retransmission buffer
//!    (part of `a`'s durable state, rebuilt by replay) until `b` acknowledges it. `b` delivers only the next
//!    number (a duplicate is dropped; a message past a gap waits for the gap to fill, and a gap that lasts is
//!    answered with a resend request) and acknowledges what it has durably delivered. A link that sees no
//!    acknowledgement for a while is probed. On top of that runs the **catch-up exchange**: a restarted process sends every
//!    server of the cluster a resend request naming the last message it delivered from it, and retransmits
//!    its own unacknowledged messages; the peers answer with what it missed. A datacenter whose servers were
//!    all down catches up the same way, from the buffers of the other datacenters.
//!
//! 4. **Reads are not logged** (the durable boundary, `snowline_core::Ctx`). A handler that changed no state
//!    a restart needs says so (`Ctx::read_only`): the host appends no record for it and hands its replies
//!    out at once, without waiting for an fsync. Two things keep that sound. A reply that returns what a
//!    logged input wrote names that input's log position (`Ctx::reply_after`) and leaves once it is durable,
//!    so nobody sees a write a crash could lose. And a reply that promises something of the clock (a
//!    snapshot: every later local timestamp is larger, `Ctx::raise_clock`) leaves only once a logged *clock
//!    ceiling* above the node's clock is durable; a restarted node's clock starts at its ceiling. The ceiling
//!    runs [`CLOCK_CEILING_AHEAD_NS`] ahead and is renewed every half of that, so reads almost never wait for
//!    it. A handler that sets a timer or sends to a server is logged whatever it said; so is every message
//!    of a sequenced link, whose delivery count is acknowledged. A refused message that did nothing is not
//!    logged either. Protocols opt in per message (Contrarian's snapshot and read requests, COPS's reads);
//!    every other input is logged as before.
//! 5. **Commits run beside the work.** The runtime may [`start_commit`](DurableHost::start_commit) and go on
//!    handling inputs while the log's thread writes and fsyncs the batch; [`poll_commit`] releases what
//!    waited for it. Outputs are held by the log position they wait for, so each leaves as soon as its own
//!    record (or the one it named) is durable.
//!
//! **Protocols that log changes** ([`Durability::PersistChanges`]: Raft's members, whose volatile state does
//! not round-trip through serialization, so replayed inputs would diverge) run differently: the host logs the
//! changes a handler reports (`Ctx::persist`) instead of its input, holds every output of the input until
//! they (or, for an input that changed nothing, everything logged before) are durable, does not sequence
//! links, and recovers by redoing the changes on the checkpointed servers (`ServerNode::apply_change`) and
//! starting them again. Rules 2, 3 and 4 do not apply to them. `docs/DURABILITY.md`, "Replica groups".
//!
//! Client sessions are not durable: an operation whose reply was lost in a crash is reported to the client
//! as failed (outcome unknown), as for any lost connection.
//!
//! [`poll_commit`]: DurableHost::poll_commit
//!
//! [`commit`]: DurableHost::commit

use crate::{Lsn, RecordLog, Recovered, StorageError};
use rand::SeedableRng;
use rand::rngs::SmallRng;
use serde::{Deserialize, Serialize};
use snowline_core::host::{self, ContractViolation, NodeInput};
use snowline_core::links::{Arrival, InLink, OutLink};
use snowline_core::{
    Addr, ClientId, Ctx, Durability, Effects, InvalidInput, Message, Protocol, ProtocolConfig, ServerId, ServerNode,
    Topology,
};
use std::collections::{BTreeMap, VecDeque};
use std::path::{Path, PathBuf};

/// Checkpoint after this many records by default (bounds both replay time and the log's disk use).
pub const CHECKPOINT_EVERY: u64 = 20_000;
pub use snowline_core::links::RETRANSMIT_AFTER_NS;
/// How far ahead of a node's clock its logged clock ceiling runs (see [`InputRecord::Ceiling`]): a restarted
/// node's clock stands still for at most this long, and a new ceiling is logged every half of it.
pub const CLOCK_CEILING_AHEAD_NS: u64 = 50_000_000;

/// What the host asks its runtime to do.
#[derive(Debug, Clone, PartialEq)]
pub enum Output<M> {
    /// Deliver `msg` to a client (no sequencing: client sessions are not durable).
    ToClient { from: ServerId, to: Addr, msg: M },
    /// Deliver message `seq` of the link `from → to` to the process hosting `to`; `seq` 0: a message that is
    /// not sequenced ([`Durability::PersistChanges`]: nothing resends it but the protocol).
    Seq { from: ServerId, to: ServerId, seq: u64, msg: M },
    /// Tell `to` (a sender) that `from` has durably delivered its messages up to `seq`; with `resend`, ask it
    /// to retransmit everything after `seq`.
    Ack { from: ServerId, to: ServerId, seq: u64, resend: bool },
    /// Fire [`DurableHost::on_timer`]`(node, id)` after `delay_ns`.
    Timer { node: usize, id: u64, delay_ns: u64 },
}

/// One logged input. Written with `M = &P::Msg`, read with `M = P::Msg`.
#[derive(Serialize, Deserialize)]
enum InputRecord<M> {
    Start {
        node: u16,
        id: ServerId,
        seed: u64,
        now: u64,
    },
    Msg {
        node: u16,
        now: u64,
        from: Addr,
        seq: u64,
        msg: M,
    },
    Timer {
        node: u16,
        now: u64,
        id: u64,
    },
    /// Not an input: node `node`'s clock readings after a restart start at `at`. Read-only inputs are not
    /// logged, yet their replies may promise clock values (`Ctx::raise_clock`, or a snapshot taken at the
    /// clock); a reply leaves only once a ceiling above its clock is durable.
    Ceiling {
        node: u16,
        at: u64,
    },
    /// What node `node`'s input at clock reading `now` changed ([`Durability::PersistChanges`]: the only
    /// records such a protocol's log holds, with `Ceiling`).
    Changes {
        node: u16,
        now: u64,
        changes: Vec<Vec<u8>>,
    },
}

#[derive(Serialize, Deserialize)]
#[serde(bound = "")]
struct NodeState<P: Protocol> {
    id: ServerId,
    server: P::Server,
    started: bool,
    seed: u64,
    /// Inputs handled: each input's generator is seeded from `seed` and this count.
    inputs: u64,
    /// The last clock reading handed to the server (never decreases, across restarts too).
    clock: u64,
    next_timer: u64,
    /// Pending timers: id → (due on this node's clock, timer).
    timers: BTreeMap<u64, (u64, P::Timer)>,
    out: BTreeMap<ServerId, OutLink<P::Msg>>,
    /// Per sender: the last sequence number delivered.
    delivered: BTreeMap<ServerId, u64>,
    /// The highest clock ceiling logged (`InputRecord::Ceiling`).
    ceiling: u64,
}

#[derive(Serialize, Deserialize)]
#[serde(bound = "")]
struct HostState<P: Protocol> {
    protocol: String,
    topology: Topology,
    nodes: Vec<NodeState<P>>,
}

/// The hosted partition servers of one process, their log, and the sequenced links between them and the
/// rest of the cluster. Sans-IO: the runtime feeds it inputs with wall-clock readings and carries out the
/// [`Output`]s it returns from [`take_outputs`](DurableHost::take_outputs).
pub struct DurableHost<P: Protocol, L: RecordLog> {
    log: L,
    file: PathBuf,
    state: HostState<P>,
    index: BTreeMap<ServerId, usize>,
    /// Messages between hosted servers: (to node, from, seq, msg).
    local: VecDeque<(usize, ServerId, u64, P::Msg)>,
    /// Outputs waiting for the commit of a log position (their input's, or the one a read-only input named),
    /// by that position.
    held: BTreeMap<u64, Vec<Output<P::Msg>>>,
    /// Per node: the highest clock ceiling known durable; and the ceilings logged since, by position.
    ceiling_durable: Vec<u64>,
    ceilings_pending: VecDeque<(u64, usize, u64)>,
    ready: Vec<Output<P::Msg>>,
    effects: Effects<P>,
    replaying: bool,
    records_since_checkpoint: u64,
    checkpoint_every: u64,
    /// Per (node, sender): the delivered number last acknowledged, and the one durable at the last commit.
    acked: BTreeMap<(usize, ServerId), u64>,
    durable_delivered: BTreeMap<(usize, ServerId), u64>,
    /// Deliveries from other processes since the last commit (they become durable with it).
    /// By the log position of the delivery's record.
    delivered_since_commit: VecDeque<(u64, (usize, ServerId), u64)>,
    /// Per (node, sender): the receiving end of its link (what waits for a gap to fill).
    inlinks: BTreeMap<(usize, ServerId), InLink<P::Msg>>,
    buf: Vec<u8>,
    /// The position of the record being replayed.
    replay_lsn: u64,
    /// CPU work the handlers reported (`Ctx::charge`) since the last `take_work`.
    work: u64,
    /// Messages the hosted servers refused since the last `take_invalid` (not counted again on replay).
    invalid: Vec<InvalidInput>,
    /// Driver-contract violations of the hosted servers since the last `take_violations`.
    violations: Vec<ContractViolation>,
    /// Client requests refused because the disk is full, since the last `take_refusals`.
    refusals: Vec<Refusal>,
    /// The last commit found the disk full even after the log gave up its reserve: nothing a client asks
    /// is taken until space is freed.
    out_of_space: bool,
}

/// A client request a durable host did not hand to its server because the disk is full (the runtime tells
/// the client, whose operation fails with `OpError::Rejected`: it certainly had no effect).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal {
    pub client: ClientId,
    pub to: ServerId,
    /// The request's kind (`Message::kind`).
    pub msg: &'static str,
    pub why: String,
    /// The protocol answered the client in its own words (`Message::refusal`); otherwise the runtime must.
    pub answered: bool,
}

impl<P: Protocol, L: RecordLog> DurableHost<P, L> {
    /// The protocol's servers log changes, not inputs ([`Durability::PersistChanges`]).
    const CHANGES: bool = matches!(P::DURABILITY, Durability::PersistChanges);

    /// Builds the servers `hosted` (fresh, or from `recovered`: the latest checkpoint and the records after
    /// it, replayed) and queues what a (re)start sends: timers, and after a recovery the catch-up exchange.
    ///
    /// `file` names the data file in errors; `seed` seeds servers that start fresh; `wall_ns` is the clock.
    /// Errors: a record or checkpoint that does not decode, or data written by another protocol, topology
    /// or set of servers ([`StorageError::Corrupted`] / [`StorageError::Mismatch`], naming the file).
    #[allow(clippy::too_many_arguments)]
    pub fn open(
        log: L,
        file: &Path,
        recovered: Recovered,
        topology: Topology,
        config: &ProtocolConfig,
        hosted: &[ServerId],
        seed: u64,
        wall_ns: u64,
    ) -> Result<Self, StorageError> {
        let mismatch = |detail: String| StorageError::Mismatch { file: file.to_path_buf(), detail };
        let recovering = recovered.checkpoint.is_some() || !recovered.records.is_empty();
        let state = match &recovered.checkpoint {
            Some(c) => {
                let s: HostState<P> = postcard::from_bytes(&c.state).map_err(|e| {
                    StorageError::corrupted(file, format!("the checkpoint at record {} does not decode: {e}", c.lsn))
                })?;
                if s.protocol != P::NAME {
                    return Err(mismatch(format!("it holds {} data; this server runs {}", s.protocol, P::NAME)));
                }
                if s.topology != topology {
                    return Err(mismatch(format!(
                        "it was written for {} DCs × {} partitions; the config has {} × {}",
                        s.topology.dcs, s.topology.partitions, topology.dcs, topology.partitions
                    )));
                }
                let ids: Vec<ServerId> = s.nodes.iter().map(|n| n.id).collect();
                if ids != hosted {
                    return Err(mismatch(format!("it holds servers {ids:?}; this node hosts {hosted:?}")));
                }
                s
            }
            None => HostState {
                protocol: P::NAME.to_owned(),
                topology,
                nodes: hosted
                    .iter()
                    .map(|&id| NodeState {
                        id,
                        server: P::server(id, topology, config),
                        started: false,
                        seed: 0,
                        inputs: 0,
                        clock: 0,
                        next_timer: 0,
                        timers: BTreeMap::new(),
                        out: BTreeMap::new(),
                        delivered: BTreeMap::new(),
                        ceiling: 0,
                    })
                    .collect(),
            },
        };
        let index = state.nodes.iter().enumerate().map(|(i, n)| (n.id, i)).collect();
        let mut host = DurableHost {
            log,
            file: file.to_path_buf(),
            state,
            index,
            local: VecDeque::new(),
            held: BTreeMap::new(),
            ceiling_durable: Vec::new(),
            ceilings_pending: VecDeque::new(),
            ready: Vec::new(),
            effects: Effects::default(),
            invalid: Vec::new(),
            violations: Vec::new(),
            refusals: Vec::new(),
            out_of_space: false,
            replaying: true,
            records_since_checkpoint: recovered.records.len() as u64,
            checkpoint_every: CHECKPOINT_EVERY,
            acked: BTreeMap::new(),
            durable_delivered: BTreeMap::new(),
            delivered_since_commit: VecDeque::new(),
            inlinks: BTreeMap::new(),
            buf: Vec::new(),
            replay_lsn: 0,
            work: 0,
        };
        for r in &recovered.records {
            host.replay(r.lsn, &r.payload)?;
        }
        host.replaying = false;
        host.after_recovery(recovering, wall_ns);
        for idx in 0..host.state.nodes.len() {
            if !host.state.nodes[idx].started {
                let id = host.state.nodes[idx].id;
                let node_seed = seed ^ ((u64::from(id.dc) << 48) | (u64::from(id.partition) << 32));
                host.start(idx, node_seed, wall_ns);
            }
        }
        host.run_local(wall_ns);
        Ok(host)
    }

    /// Checkpoint after this many records (default [`CHECKPOINT_EVERY`]).
    pub fn set_checkpoint_every(&mut self, records: u64) {
        self.checkpoint_every = records.max(1);
    }

    /// The hosted servers, in the order `open` was given them.
    pub fn servers(&self) -> impl Iterator<Item = (ServerId, &P::Server)> {
        self.state.nodes.iter().map(|n| (n.id, &n.server))
    }

    fn node_index(&self, id: ServerId) -> Option<usize> {
        self.index.get(&id).copied()
    }

    /// The log (the runtime reads its counters for metrics).
    pub fn log(&self) -> &L {
        &self.log
    }

    /// The log, to change (tests: [`MemLog::set_disk_full`](crate::MemLog::set_disk_full)).
    pub fn log_mut(&mut self) -> &mut L {
        &mut self.log
    }

    /// Gives the log back (tests crash a [`MemLog`](crate::MemLog) with it).
    pub fn into_log(self) -> L {
        self.log
    }

    /// Records appended since the last commit.
    pub fn pending(&self) -> usize {
        self.log.pending()
    }

    /// The CPU work the handlers reported since the last call (the simulator charges time for it).
    pub fn take_work(&mut self) -> u64 {
        std::mem::take(&mut self.work)
    }

    /// The link with the most unacknowledged messages: `(from, to, messages)`. A peer that stays down makes
    /// its links' backlog grow (in memory and in checkpoints) until it returns; the runtime warns about it.
    pub fn largest_backlog(&self) -> Option<(ServerId, ServerId, usize)> {
        self.backlogs().max_by_key(|(_, _, len)| *len)
    }

    /// Every outbound link of the hosted servers with its unacknowledged messages: `(from, to, messages)`.
    pub fn backlogs(&self) -> impl Iterator<Item = (ServerId, ServerId, usize)> + '_ {
        self.state.nodes.iter().flat_map(|n| n.out.iter().map(move |(to, l)| (n.id, *to, l.backlog())))
    }

    /// The messages the hosted servers refused as invalid input since the last call (the runtime reports
    /// them and decides what to do with the connection they came on).
    pub fn take_invalid(&mut self) -> Vec<InvalidInput> {
        std::mem::take(&mut self.invalid)
    }

    /// The driver-contract violations of the hosted servers since the last call (their offending effects
    /// were dropped; the runtime reports them, `core::host::ContractViolation`).
    pub fn take_violations(&mut self) -> Vec<ContractViolation> {
        std::mem::take(&mut self.violations)
    }

    /// Everything the runtime should do now, in order.
    pub fn take_outputs(&mut self) -> Vec<Output<P::Msg>> {
        std::mem::take(&mut self.ready)
    }

    /// A message for hosted server `to`. `seq` is its number on the link from `from` when `from` is a
    /// server that sequences its messages (`None` for clients and for servers of non-durable processes).
    /// Returns `false` if `to` is not hosted here. A duplicate is dropped; a gap is dropped and answered with
    /// a resend request.
    ///
    /// While the disk is full ([`RecordLog::disk_full`]) a client's write is refused (see
    /// [`take_refusals`](Self::take_refusals)) and its reads are taken, logged in the space the log kept in
    /// reserve; once even that is used up, every client request is refused.
    pub fn on_message(&mut self, to: ServerId, from: Addr, seq: Option<u64>, msg: P::Msg, wall_ns: u64) -> bool {
        let Some(idx) = self.node_index(to) else { return false };
        if let Addr::Client(client) = from
            && self.log.disk_full()
            && (msg.is_client_write() || self.out_of_space)
        {
            let why = if self.out_of_space {
                format!("{to}: the disk of {} is full: requests are refused until space is freed", self.file.display())
            } else {
                format!(
                    "{to}: the disk of {} is full: writes are refused until space is freed (reads go on)",
                    self.file.display()
                )
            };
            // The protocol's own refusal where it has one (its client node says what the application is
            // told); else the runtime answers with its generic one. Either way the refusal is reported.
            let kind = msg.kind();
            let answered = match msg.refusal(&why) {
                Some(answer) => {
                    self.ready.push(Output::ToClient { from: to, to: from, msg: answer });
                    true
                }
                None => false,
            };
            self.refusals.push(Refusal { client, to, msg: kind, why, answered });
            return true;
        }
        self.deliver(idx, from, seq.unwrap_or(0), msg, wall_ns);
        self.run_local(wall_ns);
        true
    }

    /// An acknowledgement from `from` of the link `to → from` (`to` hosted here).
    pub fn on_ack(&mut self, from: ServerId, to: ServerId, seq: u64, resend: bool, wall_ns: u64) {
        let Some(idx) = self.node_index(to) else { return };
        let link = self.state.nodes[idx].out.entry(from).or_default();
        link.ack(seq, wall_ns);
        if resend {
            Self::retransmit(&mut self.ready, to, from, link, wall_ns);
        }
    }

    /// Timer `id` of node `node` is due.
    pub fn on_timer(&mut self, node: usize, id: u64, wall_ns: u64) {
        let Some(n) = self.state.nodes.get_mut(node) else { return };
        let Some((_, timer)) = n.timers.remove(&id) else { return };
        let now = n.clock.max(wall_ns);
        self.encode(&InputRecord::<&P::Msg>::Timer { node: node as u16, now, id });
        self.handle(node, now, false, NodeInput::Timer(timer));
        self.run_local(wall_ns);
    }

    /// Makes every input handled so far durable and releases the outputs that waited for it; checkpoints
    /// (and truncates the log) every `checkpoint_every` records. On error nothing is released: the
    /// runtime must stop (a failed fsync leaves it unknown what reached the disk).
    ///
    /// A full disk ([`StorageError::DiskFull`]) is not a failed write: the inputs stay pending with their
    /// outputs held, the runtime keeps running and commits again later; the host refuses client requests
    /// meanwhile. No checkpoint is written while the disk is full.
    pub fn commit(&mut self) -> Result<Lsn, StorageError> {
        let outcome = self.log.commit();
        self.committed(outcome)
    }

    /// Takes a commit's outcome: a full disk refuses client requests until a commit succeeds; a success
    /// releases what waited for it.
    fn committed(&mut self, outcome: Result<Lsn, StorageError>) -> Result<Lsn, StorageError> {
        let lsn = outcome.inspect_err(|e| self.out_of_space = matches!(e, StorageError::DiskFull { .. }))?;
        if !self.log.committing() {
            self.out_of_space = false;
        }
        self.after_durable(lsn)?;
        Ok(lsn)
    }

    /// Starts making every input handled so far durable in the background ([`RecordLog::start_commit`]);
    /// [`poll_commit`](Self::poll_commit) releases what waited for it once it is done. Errors as for
    /// [`commit`](Self::commit).
    pub fn start_commit(&mut self) -> Result<(), StorageError> {
        self.log.start_commit().inspect_err(|e| self.out_of_space = matches!(e, StorageError::DiskFull { .. }))
    }

    /// Whether a background commit is under way.
    pub fn committing(&self) -> bool {
        self.log.committing()
    }

    /// Takes the outcome of the background commit if it is done, and releases the outputs that waited for
    /// it (see [`take_outputs`](Self::take_outputs)). Errors as for [`commit`](Self::commit).
    pub fn poll_commit(&mut self) -> Result<Lsn, StorageError> {
        let outcome = self.log.poll_commit();
        self.committed(outcome)
    }

    /// Everything up to `lsn` is durable: release what waited for it, and checkpoint when due.
    fn after_durable(&mut self, lsn: Lsn) -> Result<(), StorageError> {
        self.release_held(lsn.0);
        while let Some(&(position, key, seq)) = self.delivered_since_commit.front() {
            if position > lsn.0 {
                break;
            }
            self.delivered_since_commit.pop_front();
            self.durable_delivered.insert(key, seq);
        }
        if self.records_since_checkpoint >= self.checkpoint_every && !self.log.disk_full() && !self.log.committing() {
            self.checkpoint()?;
        }
        Ok(())
    }

    /// Client requests refused because the disk is full, since the last call.
    pub fn take_refusals(&mut self) -> Vec<Refusal> {
        std::mem::take(&mut self.refusals)
    }

    /// Whether the disk is full (client writes are being refused).
    pub fn disk_full(&self) -> bool {
        self.log.disk_full()
    }

    /// While the disk is full: see whether space has been freed (call it every ~100 ms, with `tick`);
    /// `true` once writes are taken again.
    pub fn reclaim_space(&mut self) -> bool {
        self.log.reclaim_space()
    }

    /// Writes a checkpoint of every hosted server and drops the log records it covers.
    pub fn checkpoint(&mut self) -> Result<Lsn, StorageError> {
        let state = postcard::to_stdvec(&self.state)
            .map_err(|e| StorageError::corrupted(&self.file, format!("cannot encode a checkpoint: {e}")))?;
        let lsn = self.log.checkpoint(&state)?;
        self.log.truncate_before(lsn.next())?;
        self.records_since_checkpoint = 0;
        self.release_held(lsn.0);
        for (_, key, seq) in self.delivered_since_commit.drain(..) {
            self.durable_delivered.insert(key, seq);
        }
        Ok(lsn)
    }

    /// Everything up to log position `durable` is durable now: hand the outputs that waited for it to the
    /// runtime, and mark the messages among them released (only released messages are ever retransmitted).
    fn release_held(&mut self, durable: u64) {
        while let Some(&(lsn, node, at)) = self.ceilings_pending.front() {
            if lsn > durable {
                break;
            }
            self.ceilings_pending.pop_front();
            self.ceiling_durable[node] = self.ceiling_durable[node].max(at);
        }
        let later = self.held.split_off(&(durable + 1));
        for (_, outs) in std::mem::replace(&mut self.held, later) {
            for out in outs {
                if let Output::Seq { from, to, seq, .. } = &out
                    && *seq > 0
                {
                    let node = self.index[from];
                    self.state.nodes[node].out.get_mut(to).expect("a held message has its link").release(*seq);
                }
                self.ready.push(out);
            }
        }
    }

    /// Periodic work (call every ~100 ms): acknowledge what was durably delivered since the last tick, and
    /// probe links that have seen no acknowledgement for [`RETRANSMIT_AFTER_NS`].
    pub fn tick(&mut self, wall_ns: u64) {
        for (&(idx, from), &seq) in &self.durable_delivered {
            if self.acked.get(&(idx, from)) != Some(&seq) && !self.index.contains_key(&from) {
                self.acked.insert((idx, from), seq);
                let to = self.state.nodes[idx].id;
                self.ready.push(Output::Ack { from: to, to: from, seq, resend: false });
            }
        }
        let lasting: Vec<(usize, ServerId)> =
            self.inlinks.iter().filter(|(_, l)| l.gap_lasted(wall_ns)).map(|(k, _)| *k).collect();
        for (idx, sender) in lasting {
            self.ask_resend(idx, sender, wall_ns);
        }
        for n in &mut self.state.nodes {
            for (&to, link) in &mut n.out {
                if self.index.contains_key(&to) {
                    continue;
                }
                if let Some((seq, msg)) = link.probe(wall_ns) {
                    self.ready.push(Output::Seq { from: n.id, to, seq, msg: msg.clone() });
                }
            }
        }
    }

    fn retransmit(
        ready: &mut Vec<Output<P::Msg>>,
        from: ServerId,
        to: ServerId,
        link: &mut OutLink<P::Msg>,
        wall_ns: u64,
    ) {
        for (seq, msg) in link.resend(wall_ns) {
            ready.push(Output::Seq { from, to, seq, msg: msg.clone() });
        }
    }

    /// Handles the messages hosted servers sent each other, until none is left.
    fn run_local(&mut self, wall_ns: u64) {
        while let Some((idx, from, seq, msg)) = self.local.pop_front() {
            self.deliver(idx, Addr::Server(from), seq, msg, wall_ns);
        }
    }

    fn deliver(&mut self, idx: usize, from: Addr, seq: u64, msg: P::Msg, wall_ns: u64) {
        let sender = match from {
            Addr::Server(s) if seq > 0 => s,
            _ => return self.handle_message(idx, from, 0, msg, wall_ns),
        };
        let delivered = self.state.nodes[idx].delivered.get(&sender).copied().unwrap_or(0);
        let link = self.inlinks.entry((idx, sender)).or_default();
        match link.arrive(delivered, seq, msg, wall_ns) {
            Arrival::Duplicate => {
                // The sender may have missed our acknowledgement, so the next tick repeats it.
                self.acked.remove(&(idx, sender));
            }
            Arrival::Held { ask_resend } => {
                if ask_resend {
                    self.ask_resend(idx, sender, wall_ns);
                }
            }
            Arrival::Deliver(msg) => {
                self.handle_message(idx, from, seq, msg, wall_ns);
                // The messages that waited for this one.
                let mut next = seq;
                while let Some(m) = self.inlinks.get_mut(&(idx, sender)).and_then(|l| l.next_waiting(next)) {
                    next += 1;
                    self.handle_message(idx, from, next, m, wall_ns);
                }
                if let Some(l) = self.inlinks.get_mut(&(idx, sender)) {
                    l.settle(next, wall_ns);
                }
            }
        }
    }

    /// Asks `sender` for everything after what `idx` has durably delivered from it (an acknowledgement lets
    /// the sender forget, so it never runs ahead of the log); the duplicates this brings are dropped.
    fn ask_resend(&mut self, idx: usize, sender: ServerId, wall_ns: u64) {
        if !self.index.contains_key(&sender) && self.inlinks.entry((idx, sender)).or_default().may_ask_resend(wall_ns) {
            let me = self.state.nodes[idx].id;
            let seq = self.durable_delivered.get(&(idx, sender)).copied().unwrap_or(0);
            self.ready.push(Output::Ack { from: me, to: sender, seq, resend: true });
        }
    }

    /// Records that node `idx` delivered message `seq` (0: unsequenced) from `from`. A hosted sender's
    /// delivery is in the same log, so it is acknowledged at once.
    fn note_delivered(&mut self, idx: usize, from: Addr, seq: u64) {
        let Addr::Server(sender) = from else { return };
        if seq == 0 {
            return;
        }
        self.state.nodes[idx].delivered.insert(sender, seq);
        match self.index.get(&sender) {
            Some(&s) => {
                let to = self.state.nodes[idx].id;
                self.state.nodes[s].out.entry(to).or_default().ack(seq, 0);
            }
            // Sequenced deliveries are always logged, as the next record.
            None if !self.replaying => {
                self.delivered_since_commit.push_back((self.log.last_lsn().0 + 1, (idx, sender), seq))
            }
            // Recovery marks everything it replayed durable at once (`after_recovery`).
            None => {}
        }
    }

    /// Logs and handles message `seq` (0: unsequenced) from `from`.
    fn handle_message(&mut self, idx: usize, from: Addr, seq: u64, msg: P::Msg, wall_ns: u64) {
        self.note_delivered(idx, from, seq);
        let now = self.state.nodes[idx].clock.max(wall_ns);
        self.encode(&InputRecord::Msg { node: idx as u16, now, from, seq, msg: &msg });
        if let Some(e) = self.handle(idx, now, seq > 0, NodeInput::Message(from, msg))
            && !self.replaying
        {
            self.invalid.push(e);
        }
    }

    fn start(&mut self, idx: usize, seed: u64, wall_ns: u64) {
        let n = &mut self.state.nodes[idx];
        n.seed = seed;
        n.started = true;
        let now = n.clock.max(wall_ns);
        let id = n.id;
        self.encode(&InputRecord::<&P::Msg>::Start { node: idx as u16, id, seed, now });
        self.handle(idx, now, false, NodeInput::Start);
    }

    /// Encodes the record of the input about to be handled (`handle` appends it unless the handler was
    /// read-only).
    fn encode(&mut self, record: &InputRecord<&P::Msg>) {
        if self.replaying || Self::CHANGES {
            return;
        }
        self.buf.clear();
        postcard::to_io(record, &mut self.buf).expect("protocol messages serialize (the network sends them too)");
    }

    fn append_encoded(&mut self) -> u64 {
        self.records_since_checkpoint += 1;
        self.log.append(&self.buf).0
    }

    fn replay(&mut self, lsn: Lsn, payload: &[u8]) -> Result<(), StorageError> {
        self.replay_lsn = lsn.0;
        let bad = |detail: String| StorageError::corrupted(&self.file, format!("record {lsn}: {detail}"));
        let record: InputRecord<P::Msg> =
            postcard::from_bytes(payload).map_err(|e| bad(format!("does not decode as a {} input ({e})", P::NAME)))?;
        let node = match &record {
            InputRecord::Start { node, .. }
            | InputRecord::Msg { node, .. }
            | InputRecord::Timer { node, .. }
            | InputRecord::Ceiling { node, .. }
            | InputRecord::Changes { node, .. } => usize::from(*node),
        };
        if node >= self.state.nodes.len() {
            return Err(bad(format!("names hosted server #{node}; this node hosts {}", self.state.nodes.len())));
        }
        let input = matches!(record, InputRecord::Start { .. } | InputRecord::Msg { .. } | InputRecord::Timer { .. });
        if Self::CHANGES && input {
            return Err(bad(format!("an input record in a log of {}'s changes", P::NAME)));
        }
        match record {
            InputRecord::Start { id, seed, now, .. } => {
                let n = &mut self.state.nodes[node];
                if n.id != id {
                    return Err(StorageError::Mismatch {
                        file: self.file.clone(),
                        detail: format!("it holds server {id} where this node hosts {}", n.id),
                    });
                }
                n.seed = seed;
                n.started = true;
                self.handle(node, now, false, NodeInput::Start);
            }
            InputRecord::Msg { now, from, seq, msg, .. } => {
                self.note_delivered(node, from, seq);
                // Refused again, as when it was logged (the refusal was reported then).
                let _ = self.handle(node, now, seq > 0, NodeInput::Message(from, msg));
            }
            InputRecord::Timer { now, id, .. } => {
                let Some((_, timer)) = self.state.nodes[node].timers.remove(&id) else {
                    return Err(bad(format!("fires timer {id}, which was never set")));
                };
                self.handle(node, now, false, NodeInput::Timer(timer));
            }
            InputRecord::Ceiling { at, .. } => {
                let n = &mut self.state.nodes[node];
                n.ceiling = n.ceiling.max(at);
            }
            InputRecord::Changes { now, changes, .. } => {
                if !Self::CHANGES {
                    return Err(bad(format!("a change record in a log of {}'s inputs", P::NAME)));
                }
                let n = &mut self.state.nodes[node];
                n.clock = n.clock.max(now);
                for change in &changes {
                    n.server.apply_change(change).map_err(&bad)?;
                }
            }
        }
        Ok(())
    }

    /// After replay: re-arm timers, redeliver messages between hosted servers that were sent but not
    /// handled, retransmit what other processes have not acknowledged, and ask every other server for what
    /// this process missed (the catch-up exchange).
    fn after_recovery(&mut self, recovering: bool, wall_ns: u64) {
        self.ceiling_durable = self.state.nodes.iter().map(|n| n.ceiling).collect();
        if Self::CHANGES {
            // Servers that log changes start again (`on_start` re-arms their timers and rebuilds their soft
            // state); their links are not sequenced, so there is nothing to retransmit or ask for.
            for n in &mut self.state.nodes {
                n.clock = n.clock.max(n.ceiling);
                n.timers.clear();
                n.started = false;
            }
            return;
        }
        for (idx, n) in self.state.nodes.iter_mut().enumerate() {
            // What the lost read-only inputs may have promised lies below the ceiling.
            n.clock = n.clock.max(n.ceiling);
            for (&id, &(due, _)) in &n.timers {
                self.ready.push(Output::Timer { node: idx, id, delay_ns: due.saturating_sub(wall_ns.max(n.clock)) });
            }
            for link in n.out.values_mut() {
                link.release_all(wall_ns);
            }
        }
        if !recovering {
            return;
        }
        for idx in 0..self.state.nodes.len() {
            let me = self.state.nodes[idx].id;
            let links: Vec<ServerId> = self.state.nodes[idx].out.keys().copied().collect();
            for to in links {
                let link = self.state.nodes[idx].out.get_mut(&to).expect("listed above");
                match self.index.get(&to) {
                    Some(&t) => {
                        for (seq, msg) in link.unacked() {
                            self.local.push_back((t, me, seq, msg.clone()));
                        }
                    }
                    None => Self::retransmit(&mut self.ready, me, to, link, wall_ns),
                }
            }
            for peer in self.state.topology.servers() {
                if !self.index.contains_key(&peer) {
                    let seq = self.state.nodes[idx].delivered.get(&peer).copied().unwrap_or(0);
                    self.durable_delivered.insert((idx, peer), seq);
                    self.acked.insert((idx, peer), seq);
                    self.ready.push(Output::Ack { from: me, to: peer, seq, resend: true });
                }
            }
        }
    }

    /// Runs node `idx`'s handler for `input` (`core::host::serve`) at clock reading `now`, logs the input
    /// (encoded by `encode`) unless the handler was read-only, and routes its audited effects; a message the
    /// node refused as invalid.
    fn handle(&mut self, idx: usize, now: u64, sequenced: bool, input: NodeInput<P>) -> Option<InvalidInput> {
        let (position, durable) = if self.replaying {
            (self.replay_lsn, self.replay_lsn)
        } else {
            (self.log.last_lsn().0 + 1, self.log.durable_lsn().0)
        };
        let n = &mut self.state.nodes[idx];
        n.clock = n.clock.max(now);
        let mut rng = SmallRng::seed_from_u64(n.seed ^ n.inputs.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        let mut effects = std::mem::take(&mut self.effects);
        let result = {
            let mut cx = Ctx::new(now, &mut rng, &mut effects).logged(position, durable);
            if Self::CHANGES {
                cx = cx.persisting_changes();
            }
            host::serve(&mut n.server, Addr::Server(n.id), &mut cx, input)
        };
        let mut violations = host::audit(Addr::Server(n.id), &self.state.topology, &mut effects);
        let result = result.unwrap_or_else(|v| {
            violations.push(v);
            None
        });
        // Reported when the input was handled, not again on replay.
        if !self.replaying {
            self.violations.extend(violations);
        }
        let n = &mut self.state.nodes[idx];
        n.clock = n.clock.max(effects.raise_clock);
        if Self::CHANGES {
            return self.route_changes(idx, now, effects, result);
        }
        // A read-only input (or a refused one that did nothing) leaves no record, unless it set a timer or
        // sent to a server after all (those need their place in the log), or it came on a sequenced link
        // (whose delivery count is durable state: it is acknowledged).
        let quiet = !sequenced
            && effects.timers.is_empty()
            && effects.sends.iter().all(|(to, _)| matches!(to, Addr::Client(_)));
        let unlogged = quiet && (effects.read_only || (result.is_some() && effects.sends.is_empty()));
        // Each logged input's generator is seeded from its number, so an unlogged one takes none.
        if !unlogged {
            n.inputs += 1;
        }
        let release_at = if self.replaying {
            0
        } else if unlogged {
            let needed = if effects.read_only { self.ceiling_for(idx) } else { 0 };
            effects.reply_after.max(needed)
        } else {
            let lsn = self.append_encoded();
            debug_assert_eq!(lsn, position);
            lsn
        };
        let me = self.state.nodes[idx].id;
        for (delay_ns, timer) in effects.timers.drain(..) {
            let n = &mut self.state.nodes[idx];
            n.next_timer += 1;
            let id = n.next_timer;
            n.timers.insert(id, (now.saturating_add(delay_ns), timer));
            if !self.replaying {
                self.ready.push(Output::Timer { node: idx, id, delay_ns });
            }
        }
        for (to, msg) in effects.sends.drain(..) {
            match to {
                Addr::Client(_) => {
                    if !self.replaying {
                        self.hold(release_at, Output::ToClient { from: me, to, msg });
                    }
                }
                Addr::Server(s) => {
                    let seq = self.state.nodes[idx].out.entry(s).or_default().push(msg.clone(), now);
                    if self.replaying {
                        continue;
                    }
                    match self.index.get(&s) {
                        Some(&t) => self.local.push_back((t, me, seq, msg)),
                        None => self.hold(release_at, Output::Seq { from: me, to: s, seq, msg }),
                    }
                }
            }
        }
        self.work += effects.work;
        effects.clear();
        self.effects = effects;
        result
    }

    /// After an input of a protocol that logs changes: log what it changed (if anything) and hold its outputs
    /// until that record, or if it changed nothing everything logged before it, is durable (its outputs may
    /// reveal state that earlier, not yet durable changes made). Links are not sequenced.
    fn route_changes<R>(&mut self, idx: usize, now: u64, mut effects: Effects<P>, result: R) -> R {
        self.state.nodes[idx].inputs += 1;
        let me = self.state.nodes[idx].id;
        let release_at = if effects.changes.is_empty() {
            self.log.last_lsn().0
        } else {
            let changes = std::mem::take(&mut effects.changes);
            self.buf.clear();
            postcard::to_io(&InputRecord::<&P::Msg>::Changes { node: idx as u16, now, changes }, &mut self.buf)
                .expect("changes serialize");
            self.append_encoded()
        };
        for (delay_ns, timer) in effects.timers.drain(..) {
            let n = &mut self.state.nodes[idx];
            n.next_timer += 1;
            let id = n.next_timer;
            n.timers.insert(id, (now.saturating_add(delay_ns), timer));
            self.ready.push(Output::Timer { node: idx, id, delay_ns });
        }
        for (to, msg) in effects.sends.drain(..) {
            match to {
                Addr::Client(_) => self.hold(release_at, Output::ToClient { from: me, to, msg }),
                Addr::Server(s) if self.state.topology.contains(s) => match self.index.get(&s) {
                    Some(&t) => self.local.push_back((t, me, 0, msg)),
                    None => self.hold(release_at, Output::Seq { from: me, to: s, seq: 0, msg }),
                },
                Addr::Server(_) => {}
            }
        }
        self.work += effects.work;
        effects.clear();
        self.effects = effects;
        result
    }

    /// Hands `out` to the runtime once log position `position` is durable.
    fn hold(&mut self, position: u64, out: Output<P::Msg>) {
        if position <= self.log.durable_lsn().0 {
            self.ready.push(out);
        } else {
            self.held.entry(position).or_default().push(out);
        }
    }

    /// After a read-only input of node `idx`: keeps a logged clock ceiling ahead of the node's clock (so that
    /// what its replies reveal of the clock holds after a restart) and returns the log position that must be
    /// durable before they leave (0 when the durable ceiling already covers the clock).
    fn ceiling_for(&mut self, idx: usize) -> u64 {
        let clock = self.state.nodes[idx].clock;
        if clock.saturating_add(CLOCK_CEILING_AHEAD_NS / 2) > self.state.nodes[idx].ceiling {
            let at = clock.saturating_add(CLOCK_CEILING_AHEAD_NS);
            self.encode(&InputRecord::<&P::Msg>::Ceiling { node: idx as u16, at });
            let lsn = self.append_encoded();
            self.state.nodes[idx].ceiling = at;
            self.ceilings_pending.push_back((lsn, idx, at));
        }
        if clock <= self.ceiling_durable[idx] {
            return 0;
        }
        self.ceilings_pending.iter().find(|&&(_, node, at)| node == idx && at >= clock).map_or(0, |&(lsn, _, _)| lsn)
    }
}
