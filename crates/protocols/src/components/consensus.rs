//! A replica group's consensus: tikv's raft-rs (`raft` 0.7, used unmodified) driven deterministically as a
//! sans-IO component that any protocol's server can embed.
//!
//! # Embedding
//!
//! A server that is a member of its partition's replica group holds a [`RaftGroup`]. Its protocol's message
//! type carries [`RaftWire`] (`P::Msg: From<RaftWire>`) and its timer type [`RaftTick`]
//! (`P::Timer: From<RaftTick>`); the server hands the group what arrives for it ([`RaftGroup::on_wire`],
//! [`RaftGroup::on_tick`]) and gets back, in order, the [`Event`]s to act on: a snapshot to restore, log
//! entries to apply (every member applies the same entries in the same order), reads that became safe
//! to serve, leadership changes. The group sends its own messages and sets its own timer through the
//! handler's `Ctx`, so the protocol writes no consensus code.
//!
//! # Determinism
//!
//! raft-rs draws each randomized election timeout from a thread-local generator. The adapter fixes the
//! library's range to a single value `E` (`min_election_tick = E`, `max_election_tick = E + 1`: the draw is
//! always `E`) and randomizes by itself: whenever the election clock restarts (a heartbeat or an election
//! reset `election_elapsed`), it draws a jitter `j` in `[0, E)` from the node's seeded generator
//! (`Ctx::rng`) and withholds the next `j` ticks from a member that does not lead. So a follower campaigns
//! after `E + j` ticks of silence, `j` fresh each time, as in Raft's randomized timeouts; a leader gets every
//! tick (its heartbeats and quorum checks run on them). Everything else raft-rs does is deterministic (its
//! maps hash with FxHash), so a simulated run stays reproducible from its seed.
//!
//! # State
//!
//! Raft's durable state — hard state (term, vote, commit), the voters, the log, and the latest snapshot
//! (the application's state at an index, supplied by [`RaftGroup::compact`]) — lives in [`GroupLog`], the
//! [`raft::Storage`] the node runs on, and is what the group serializes: a deserialized group restarts the
//! way a Raft node restarts after a crash (a follower of its persisted term, with its log and snapshot).
//! Volatile state (role, leader, progress of followers) is rebuilt by the protocol. Persistence happens
//! synchronously inside each call: entries and hard state are in the log before any message that depends
//! on them leaves the handler.
//!
//! # On disk
//!
//! Inside a durable host (`snowline_core::Durability::PersistChanges`) each call that changes the
//! [`GroupLog`] reports the change ([`Ctx::persist`]: entries appended, a new hard state or commit index,
//! a snapshot installed or taken), and the host holds every message of that call until the change is on
//! disk — Raft's rule that a member persists before it answers. After a crash the host rebuilds the member
//! from its checkpoint and these changes ([`RaftGroup::apply_change`]); [`RaftGroup::start`] then restarts
//! raft-rs on the log, hands the application the latest snapshot if its checkpointed state is older
//! ([`Event::Restore`]), and raft-rs hands it the committed entries after that again ([`Event::Apply`]), so
//! the application's state catches up with the log.
//!
//! Membership is static: the group is the topology's placement of the partition (`Topology::group`), with
//! Raft id `member index + 1`.

use raft::eraftpb::{ConfState, Entry, EntryType, HardState, Message as RaftMessage, Snapshot, SnapshotMetadata};
use raft::{GetEntriesContext, RaftState, RawNode, StateRole, Storage, StorageError};
use rand::Rng;
use serde::{Deserialize, Serialize};
use snowline_core::{Ctx, PartitionId, Protocol, ServerId, Topology};

/// What a protocol sends to carry one Raft message between two members of a group.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RaftWire {
    /// The group (a partition's replica group).
    pub partition: PartitionId,
    /// The protobuf encoding of raft-rs's `eraftpb::Message`.
    #[serde(with = "serde_bytes")]
    pub bytes: Vec<u8>,
}

/// The group's periodic tick (every [`RaftParams::tick_ns`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RaftTick {
    pub partition: PartitionId,
}

/// Timing of a group, in ticks of `tick_ns` (etcd's defaults: 100 ms heartbeats, a 1 s election timeout).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RaftParams {
    pub tick_ns: u64,
    /// A leader sends heartbeats every this many ticks.
    pub heartbeat_ticks: usize,
    /// A follower that hears no leader for `election_ticks + jitter` ticks (jitter uniform in
    /// `[0, election_ticks)`) campaigns.
    pub election_ticks: usize,
    /// Compact the log into a snapshot once it holds at least this many applied entries, and at least as
    /// many bytes as the last snapshot ([`RaftGroup::wants_compaction`]).
    pub compact_after: usize,
}

impl Default for RaftParams {
    fn default() -> Self {
        Self { tick_ns: 100_000_000, heartbeat_ticks: 1, election_ticks: 10, compact_after: 10_000 }
    }
}

/// What the embedding protocol must act on, in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// Replace the application's state by this snapshot (taken at `index`): this member lagged behind a
    /// compacted log.
    Restore { index: u64, data: Vec<u8> },
    /// Apply this committed command (log position `index`). Every member applies the same commands in the
    /// same order, exactly once each.
    Apply { index: u64, data: Vec<u8> },
    /// The read registered with [`RaftGroup::read_index`] under `ctx` may now be served from the applied
    /// state (ReadIndex: this member was the leader at a commit index the state has reached).
    ReadReady { ctx: Vec<u8> },
    /// The leader this member knows changed (`None`: an election is going on).
    Leader { leader: Option<ServerId>, term: u64 },
}

/// A request that only the leader may take.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NotLeader {
    /// The member this one believes leads, if any: the client should ask it.
    pub hint: Option<ServerId>,
}

/// One log entry as the group keeps it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct StoredEntry {
    term: u64,
    index: u64,
    /// `EntryType` as its protobuf number (normal entries only: membership is static).
    kind: i32,
    #[serde(with = "serde_bytes")]
    data: Vec<u8>,
    #[serde(with = "serde_bytes")]
    context: Vec<u8>,
}

impl StoredEntry {
    fn bytes(&self) -> usize {
        self.data.len() + self.context.len()
    }

    fn from_raft(e: &Entry) -> Self {
        Self {
            term: e.term,
            index: e.index,
            kind: e.get_entry_type() as i32,
            data: e.data.to_vec(),
            context: e.context.to_vec(),
        }
    }

    fn to_raft(&self) -> Entry {
        let mut e = Entry { term: self.term, index: self.index, ..Default::default() };
        e.set_entry_type(if self.kind == EntryType::EntryConfChange as i32 {
            EntryType::EntryConfChange
        } else if self.kind == EntryType::EntryConfChangeV2 as i32 {
            EntryType::EntryConfChangeV2
        } else {
            EntryType::EntryNormal
        });
        e.data = self.data.clone().into();
        e.context = self.context.clone().into();
        e
    }
}

/// Raft's durable state for one member: the [`raft::Storage`] it runs on.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupLog {
    term: u64,
    vote: u64,
    commit: u64,
    voters: Vec<u64>,
    snap_index: u64,
    snap_term: u64,
    /// The application's state at `snap_index`.
    #[serde(with = "serde_bytes")]
    snap_data: Vec<u8>,
    /// `entries[i].index == snap_index + 1 + i`.
    entries: Vec<StoredEntry>,
    /// The bytes of `entries` (their data and context): what compaction weighs against the snapshot's
    /// size. Derived, so not serialized ([`GroupLog::recount`] after deserializing).
    #[serde(skip)]
    entry_bytes: usize,
}

impl GroupLog {
    fn first(&self) -> u64 {
        self.snap_index + 1
    }

    fn last(&self) -> u64 {
        self.snap_index + self.entries.len() as u64
    }

    /// Recompute [`GroupLog::entry_bytes`] (a deserialized log starts without it).
    fn recount(&mut self) {
        self.entry_bytes = self.entries.iter().map(StoredEntry::bytes).sum();
    }

    fn hard_state(&self) -> HardState {
        HardState { term: self.term, vote: self.vote, commit: self.commit, ..Default::default() }
    }

    fn conf_state(&self) -> ConfState {
        ConfState { voters: self.voters.clone(), ..Default::default() }
    }

    /// Append entries from raft, replacing any conflicting suffix.
    fn append(&mut self, entries: &[Entry]) {
        let Some(first) = entries.first() else { return };
        if first.index < self.first() {
            // Entries already covered by the snapshot: skip those.
            let skip = (self.first() - first.index) as usize;
            return self.append(&entries[skip.min(entries.len())..]);
        }
        let keep = (first.index - self.first()) as usize;
        for dropped in self.entries.drain(keep.min(self.entries.len())..) {
            self.entry_bytes -= dropped.bytes();
        }
        for e in entries {
            let e = StoredEntry::from_raft(e);
            self.entry_bytes += e.bytes();
            self.entries.push(e);
        }
    }

    fn install(&mut self, snapshot: &Snapshot) {
        let meta = snapshot.get_metadata();
        self.snap_index = meta.index;
        self.snap_term = meta.term;
        self.snap_data = snapshot.data.to_vec();
        self.voters = meta.get_conf_state().voters.clone();
        self.term = self.term.max(meta.term);
        self.commit = self.commit.max(meta.index);
        self.entries.clear();
        self.entry_bytes = 0;
    }

    /// Drop entries up to and including `index` (which must be applied), keeping `data` as the snapshot.
    fn compact(&mut self, index: u64, data: Vec<u8>) {
        if index <= self.snap_index || index > self.last() {
            return;
        }
        let term = self.entries[(index - self.first()) as usize].term;
        for dropped in self.entries.drain(..(index - self.snap_index) as usize) {
            self.entry_bytes -= dropped.bytes();
        }
        self.snap_index = index;
        self.snap_term = term;
        self.snap_data = data;
    }
}

/// One change of a member's [`GroupLog`], as a durable host logs it (see "On disk" in the module docs).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
enum LogChange {
    /// Entries appended (replacing any conflicting suffix).
    Append(Vec<StoredEntry>),
    HardState {
        term: u64,
        vote: u64,
        commit: u64,
    },
    Commit(u64),
    /// A leader's snapshot installed.
    Install {
        index: u64,
        term: u64,
        voters: Vec<u64>,
        data: Vec<u8>,
    },
    /// The log compacted up to `index` into the application's state `data`.
    Compact {
        index: u64,
        data: Vec<u8>,
    },
}

impl GroupLog {
    fn redo(&mut self, change: LogChange) {
        match change {
            LogChange::Append(entries) => {
                let entries: Vec<Entry> = entries.iter().map(StoredEntry::to_raft).collect();
                self.append(&entries);
            }
            LogChange::HardState { term, vote, commit } => {
                self.term = term;
                self.vote = vote;
                self.commit = commit;
            }
            LogChange::Commit(commit) => self.commit = commit,
            LogChange::Install { index, term, voters, data } => {
                let mut snap = Snapshot::default();
                let mut meta = SnapshotMetadata { index, term, ..Default::default() };
                meta.set_conf_state(ConfState { voters, ..Default::default() });
                snap.set_metadata(meta);
                snap.data = data.into();
                self.install(&snap);
            }
            LogChange::Compact { index, data } => self.compact(index, data),
        }
    }
}

impl Storage for GroupLog {
    fn initial_state(&self) -> raft::Result<RaftState> {
        Ok(RaftState::new(self.hard_state(), self.conf_state()))
    }

    fn entries(
        &self,
        low: u64,
        high: u64,
        max_size: impl Into<Option<u64>>,
        _context: GetEntriesContext,
    ) -> raft::Result<Vec<Entry>> {
        if low < self.first() {
            return Err(raft::Error::Store(StorageError::Compacted));
        }
        if high > self.last() + 1 || low > high {
            return Err(raft::Error::Store(StorageError::Unavailable));
        }
        let lo = (low - self.first()) as usize;
        let hi = (high - self.first()) as usize;
        let mut out: Vec<Entry> = self.entries[lo..hi].iter().map(StoredEntry::to_raft).collect();
        raft::util::limit_size(&mut out, max_size.into());
        Ok(out)
    }

    fn term(&self, idx: u64) -> raft::Result<u64> {
        if idx == self.snap_index {
            return Ok(self.snap_term);
        }
        if idx < self.first() {
            return Err(raft::Error::Store(StorageError::Compacted));
        }
        if idx > self.last() {
            return Err(raft::Error::Store(StorageError::Unavailable));
        }
        Ok(self.entries[(idx - self.first()) as usize].term)
    }

    fn first_index(&self) -> raft::Result<u64> {
        Ok(self.first())
    }

    fn last_index(&self) -> raft::Result<u64> {
        Ok(self.last())
    }

    fn snapshot(&self, _request_index: u64, _to: u64) -> raft::Result<Snapshot> {
        let mut snap = Snapshot::default();
        let mut meta = SnapshotMetadata { index: self.snap_index, term: self.snap_term, ..Default::default() };
        meta.set_conf_state(self.conf_state());
        snap.set_metadata(meta);
        snap.data = self.snap_data.clone().into();
        Ok(snap)
    }
}

/// What a group serializes: its identity, timing, applied index and durable log.
#[derive(Serialize, Deserialize)]
struct GroupState {
    me: ServerId,
    topology: Topology,
    params: RaftParams,
    applied: u64,
    log: GroupLog,
}

/// One member of a partition's replica group. See the module docs.
#[derive(Serialize, Deserialize)]
#[serde(into = "GroupState", from = "GroupState")]
pub struct RaftGroup {
    me: ServerId,
    topology: Topology,
    params: RaftParams,
    raw: RawNode<GroupLog>,
    /// The highest index handed to the application (Apply or Restore).
    applied: u64,
    /// ReadIndex results waiting for `applied` to reach their index: (index, ctx).
    pending_reads: Vec<(u64, Vec<u8>)>,
    /// The leader and term last reported as [`Event::Leader`].
    known_leader: (u64, u64),
    /// Ticks still withheld from raft-rs (the seeded election jitter; see the module docs).
    skip_ticks: usize,
    /// raft-rs's `election_elapsed` after the last call into it.
    last_elapsed: usize,
    /// Changes of the log not yet reported ([`Ctx::persist`]); recorded only while the host keeps them.
    changes: Vec<LogChange>,
}

impl From<RaftGroup> for GroupState {
    fn from(g: RaftGroup) -> Self {
        GroupState { me: g.me, topology: g.topology, params: g.params, applied: g.applied, log: g.raw.store().clone() }
    }
}

impl From<GroupState> for RaftGroup {
    fn from(s: GroupState) -> Self {
        RaftGroup::with_log(s.me, s.topology, s.params, s.log, s.applied)
    }
}

impl Clone for RaftGroup {
    fn clone(&self) -> Self {
        RaftGroup::with_log(self.me, self.topology, self.params, self.raw.store().clone(), self.applied)
    }
}

impl std::fmt::Debug for RaftGroup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RaftGroup")
            .field("me", &self.me)
            .field("term", &self.raw.raft.term)
            .field("role", &self.raw.raft.state)
            .field("leader", &self.raw.raft.leader_id)
            .field("applied", &self.applied)
            .finish()
    }
}

fn quiet_logger() -> slog::Logger {
    slog::Logger::root(slog::Discard, slog::o!())
}

impl RaftGroup {
    /// Member `me` of its partition's group, with an empty log.
    pub fn new(me: ServerId, topology: Topology, params: RaftParams) -> Self {
        let voters = (0..topology.replicas).map(|m| u64::from(m) + 1).collect();
        let log = GroupLog { voters, ..GroupLog::default() };
        Self::with_log(me, topology, params, log, 0)
    }

    fn with_log(me: ServerId, topology: Topology, params: RaftParams, mut log: GroupLog, applied: u64) -> Self {
        log.recount();
        let id = u64::from(topology.member_index(me).expect("a group member is a server of the topology")) + 1;
        let applied = applied.max(log.snap_index);
        let config = raft::Config {
            id,
            election_tick: params.election_ticks,
            heartbeat_tick: params.heartbeat_ticks,
            min_election_tick: params.election_ticks,
            max_election_tick: params.election_ticks + 1,
            applied,
            check_quorum: true,
            pre_vote: true,
            max_size_per_msg: 1 << 20,
            max_inflight_msgs: 256,
            ..raft::Config::default()
        };
        let raw = RawNode::new(&config, log, &quiet_logger()).expect("a valid Raft configuration");
        Self {
            me,
            topology,
            params,
            raw,
            applied,
            pending_reads: Vec::new(),
            known_leader: (0, 0),
            skip_ticks: 0,
            last_elapsed: 0,
            changes: Vec::new(),
        }
    }

    pub fn params(&self) -> RaftParams {
        self.params
    }

    /// Arm the tick timer, and with `campaign` start an election at once; call once from the server's
    /// `on_start`.
    pub fn start<P: Protocol>(&mut self, cx: &mut Ctx<'_, P>, campaign: bool) -> Vec<Event>
    where
        P::Msg: From<RaftWire>,
        P::Timer: From<RaftTick>,
    {
        cx.set_timer(self.params.tick_ns, RaftTick { partition: self.me.partition }.into());
        // raft-rs read the log when the member was built; changes redone since (a restart) are not in its
        // view: build it again from the log, as a restarted Raft node does.
        let log = std::mem::take(self.raw.mut_store());
        let behind = log.snap_index > self.applied;
        let restore = behind.then(|| Event::Restore { index: log.snap_index, data: log.snap_data.clone() });
        *self = Self::with_log(self.me, self.topology, self.params, log, self.applied);
        self.skip_ticks = cx.rng().random_range(0..self.params.election_ticks.max(1));
        if campaign {
            // Only fails for a member outside the voters, which a group built from the topology is not.
            let _ = self.raw.campaign();
        }
        let mut events: Vec<Event> = restore.into_iter().collect();
        events.extend(self.drive(cx));
        events
    }

    /// Redo a change this member reported ([`Ctx::persist`]) on a member rebuilt from a checkpoint; call
    /// [`start`](Self::start) after the last one.
    pub fn apply_change(&mut self, change: &[u8]) -> Result<(), String> {
        let changes: Vec<LogChange> =
            postcard::from_bytes(change).map_err(|e| format!("not a change of a raft log: {e}"))?;
        for c in changes {
            self.raw.mut_store().redo(c);
        }
        Ok(())
    }

    /// The tick timer fired.
    pub fn on_tick<P: Protocol>(&mut self, cx: &mut Ctx<'_, P>) -> Vec<Event>
    where
        P::Msg: From<RaftWire>,
        P::Timer: From<RaftTick>,
    {
        cx.set_timer(self.params.tick_ns, RaftTick { partition: self.me.partition }.into());
        if self.skip_ticks > 0 && !self.is_leader() {
            self.skip_ticks -= 1;
            return Vec::new();
        }
        // A tick adds one to the election clock; anything lower afterwards means it restarted.
        self.last_elapsed += 1;
        self.raw.tick();
        self.drive(cx)
    }

    /// A Raft message from `from`. A message that is not from a member of this group, not for this member,
    /// or not decodable is refused with the reason, and changes nothing.
    pub fn on_wire<P: Protocol>(
        &mut self,
        cx: &mut Ctx<'_, P>,
        from: ServerId,
        wire: RaftWire,
    ) -> Result<Vec<Event>, String>
    where
        P::Msg: From<RaftWire>,
        P::Timer: From<RaftTick>,
    {
        let msg = self.decode(from, &wire)?;
        self.raw.step(msg).map_err(|e| format!("raft refused a message from {from}: {e}"))?;
        Ok(self.drive(cx))
    }

    fn decode(&self, from: ServerId, wire: &RaftWire) -> Result<RaftMessage, String> {
        use protobuf::Message as _;
        if wire.partition != self.me.partition {
            return Err(format!("a raft message for partition {} reached {}", wire.partition, self.me));
        }
        let member = self
            .topology
            .member_index(from)
            .filter(|_| from.partition == self.me.partition)
            .ok_or_else(|| format!("{from} is not a member of {}'s group", self.me))?;
        let msg = RaftMessage::parse_from_bytes(&wire.bytes).map_err(|e| format!("undecodable raft message: {e}"))?;
        if msg.from != u64::from(member) + 1 || msg.to != self.raw.raft.id {
            return Err(format!("raft message from {from} names ids {} → {}", msg.from, msg.to));
        }
        if raft::raw_node::is_local_msg(msg.get_msg_type()) {
            return Err(format!("{from} sent a local-only raft message ({:?})", msg.get_msg_type()));
        }
        Ok(msg)
    }

    /// Propose a command (leader only). It is applied, by every member, once committed; a leader that
    /// loses its leadership before that may see it committed by its successor, or dropped.
    pub fn propose<P: Protocol>(&mut self, cx: &mut Ctx<'_, P>, data: Vec<u8>) -> Result<Vec<Event>, NotLeader>
    where
        P::Msg: From<RaftWire>,
        P::Timer: From<RaftTick>,
    {
        if !self.is_leader() {
            return Err(NotLeader { hint: self.leader() });
        }
        self.raw.propose(Vec::new(), data).map_err(|_| NotLeader { hint: self.leader() })?;
        Ok(self.drive(cx))
    }

    /// Register a linearizable read under `ctx` (leader only; Raft's ReadIndex, as etcd serves reads): an
    /// [`Event::ReadReady`] with `ctx` follows once a quorum has confirmed the leadership and the state has
    /// applied everything committed when the read arrived. A leader that loses its leadership drops the
    /// registered reads without an event: the protocol retries them elsewhere on [`Event::Leader`].
    pub fn read_index<P: Protocol>(&mut self, cx: &mut Ctx<'_, P>, ctx: Vec<u8>) -> Result<Vec<Event>, NotLeader>
    where
        P::Msg: From<RaftWire>,
        P::Timer: From<RaftTick>,
    {
        if !self.is_leader() {
            return Err(NotLeader { hint: self.leader() });
        }
        self.raw.read_index(ctx);
        Ok(self.drive(cx))
    }

    /// Whether the log holds enough applied entries to compact ([`RaftParams::compact_after`]) and at
    /// least as many bytes as the last snapshot. The second half keeps compaction's cost in proportion to
    /// what was logged: serializing the application's whole state (it can hold every recent version of
    /// every key) after each fixed number of small entries took a tenth of a busy server's CPU, while the
    /// log it bounds stays, at most, about the size of the state.
    pub fn wants_compaction(&self) -> bool {
        let log = self.raw.store();
        self.applied.saturating_sub(log.snap_index) >= self.params.compact_after as u64
            && log.entry_bytes >= log.snap_data.len()
    }

    /// Replace the log up to the applied index by `state`, the application's state there (what a lagging
    /// member will [`Event::Restore`]).
    pub fn compact<P: Protocol>(&mut self, cx: &mut Ctx<'_, P>, state: Vec<u8>) {
        let applied = self.applied;
        if cx.persisting() {
            self.changes.push(LogChange::Compact { index: applied, data: state.clone() });
        }
        self.raw.mut_store().compact(applied, state);
        self.report(cx);
    }

    /// Hands the recorded changes to the host (one [`Ctx::persist`] per call into the group).
    fn report<P: Protocol>(&mut self, cx: &mut Ctx<'_, P>) {
        if !self.changes.is_empty() {
            let bytes = postcard::to_stdvec(&self.changes).expect("log changes serialize");
            self.changes.clear();
            cx.persist(bytes);
        }
    }

    pub fn is_leader(&self) -> bool {
        self.raw.raft.state == StateRole::Leader
    }

    /// The member this one believes leads the group.
    pub fn leader(&self) -> Option<ServerId> {
        self.server_of(self.raw.raft.leader_id)
    }

    pub fn term(&self) -> u64 {
        self.raw.raft.term
    }

    /// The highest log index applied.
    pub fn applied(&self) -> u64 {
        self.applied
    }

    /// Entries in the log (after the snapshot).
    pub fn log_len(&self) -> usize {
        self.raw.store().entries.len()
    }

    /// The group's members, in member order.
    pub fn members(&self) -> impl Iterator<Item = ServerId> + use<> {
        self.topology.group(self.me.partition)
    }

    fn server_of(&self, raft_id: u64) -> Option<ServerId> {
        let member = u16::try_from(raft_id.checked_sub(1)?).ok()?;
        (member < self.topology.replicas).then(|| self.topology.member(self.me.partition, member))
    }

    /// Draw a fresh seeded jitter whenever raft-rs's election clock restarted (see the module docs).
    fn rejitter<P: Protocol>(&mut self, cx: &mut Ctx<'_, P>) {
        let elapsed = self.raw.raft.election_elapsed;
        if elapsed < self.last_elapsed {
            self.skip_ticks = cx.rng().random_range(0..self.params.election_ticks.max(1));
        }
        self.last_elapsed = elapsed;
    }

    /// Process every pending `Ready`: persist, send, and turn what is committed into events.
    fn drive<P: Protocol>(&mut self, cx: &mut Ctx<'_, P>) -> Vec<Event>
    where
        P::Msg: From<RaftWire>,
    {
        let mut events = Vec::new();
        let persisting = cx.persisting();
        while self.raw.has_ready() {
            let mut rd = self.raw.ready();
            self.send_all(cx, rd.take_messages());
            if !rd.snapshot().is_empty() {
                let snap = rd.snapshot().clone();
                if persisting {
                    let meta = snap.get_metadata();
                    self.changes.push(LogChange::Install {
                        index: meta.index,
                        term: meta.term,
                        voters: meta.get_conf_state().voters.clone(),
                        data: snap.data.to_vec(),
                    });
                }
                self.raw.mut_store().install(&snap);
                let index = snap.get_metadata().index;
                if index > self.applied {
                    self.applied = index;
                    self.pending_reads.retain(|(i, _)| *i > index);
                    events.push(Event::Restore { index, data: snap.data.to_vec() });
                }
            }
            self.apply_entries(rd.take_committed_entries(), &mut events);
            if persisting && !rd.entries().is_empty() {
                self.changes.push(LogChange::Append(rd.entries().iter().map(StoredEntry::from_raft).collect()));
            }
            self.raw.mut_store().append(rd.entries());
            if let Some(hs) = rd.hs() {
                if persisting {
                    self.changes.push(LogChange::HardState { term: hs.term, vote: hs.vote, commit: hs.commit });
                }
                let log = self.raw.mut_store();
                log.term = hs.term;
                log.vote = hs.vote;
                log.commit = hs.commit;
            }
            for rs in rd.take_read_states() {
                self.pending_reads.push((rs.index, rs.request_ctx));
            }
            self.send_all(cx, rd.take_persisted_messages());
            let mut light = self.raw.advance(rd);
            if let Some(commit) = light.commit_index() {
                if persisting {
                    self.changes.push(LogChange::Commit(commit));
                }
                self.raw.mut_store().commit = commit;
            }
            self.send_all(cx, light.take_messages());
            self.apply_entries(light.take_committed_entries(), &mut events);
            self.raw.advance_apply();
        }
        let applied = self.applied;
        let mut i = 0;
        while i < self.pending_reads.len() {
            if self.pending_reads[i].0 <= applied {
                let (_, ctx) = self.pending_reads.remove(i);
                events.push(Event::ReadReady { ctx });
            } else {
                i += 1;
            }
        }
        let now = (self.raw.raft.leader_id, self.raw.raft.term);
        if now != self.known_leader {
            if now.0 != self.known_leader.0 && !self.is_leader() {
                // Reads registered while leading are lost with the leadership.
                self.pending_reads.clear();
            }
            self.known_leader = now;
            events.push(Event::Leader { leader: self.server_of(now.0), term: now.1 });
        }
        self.rejitter(cx);
        self.report(cx);
        events
    }

    fn apply_entries(&mut self, entries: Vec<Entry>, events: &mut Vec<Event>) {
        for e in entries {
            if e.index <= self.applied {
                continue;
            }
            self.applied = e.index;
            // Empty entries are new leaders' no-ops; membership is static, so there are no others.
            if e.get_entry_type() == EntryType::EntryNormal && !e.data.is_empty() {
                events.push(Event::Apply { index: e.index, data: e.data.to_vec() });
            }
        }
    }

    fn send_all<P: Protocol>(&mut self, cx: &mut Ctx<'_, P>, msgs: Vec<RaftMessage>)
    where
        P::Msg: From<RaftWire>,
    {
        use protobuf::Message as _;
        for m in msgs {
            let Some(to) = self.server_of(m.to) else { continue };
            let bytes = m.write_to_bytes().expect("encoding a raft message into memory cannot fail");
            cx.send(to, RaftWire { partition: self.me.partition, bytes }.into());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::strong::raft_kv::RaftKv;
    use rand::SeedableRng;
    use rand::rngs::SmallRng;
    use snowline_core::Effects;

    /// One call into the group inside a host that keeps changes: its events and the changes it reported.
    fn call(
        g: &mut RaftGroup,
        rng: &mut SmallRng,
        f: impl FnOnce(&mut RaftGroup, &mut Ctx<'_, RaftKv>) -> Vec<Event>,
    ) -> (Vec<Event>, Vec<Vec<u8>>) {
        let mut fx = Effects::<RaftKv>::default();
        let events = {
            let mut cx = Ctx::new(0, rng, &mut fx).persisting_changes();
            f(g, &mut cx)
        };
        (events, fx.changes)
    }

    fn applied_data(events: &[Event]) -> Vec<Vec<u8>> {
        events
            .iter()
            .filter_map(|e| if let Event::Apply { data, .. } = e { Some(data.clone()) } else { None })
            .collect()
    }

    /// After a snapshot of `S` bytes the log compacts again only once it holds `S` bytes of entries: a large
    /// state is not re-serialized after every few small entries.
    #[test]
    fn the_log_compacts_again_once_it_holds_as_many_bytes_as_the_snapshot() {
        let topology = Topology::replicated(1, 1, 1);
        let me = topology.member(0, 0);
        let params = RaftParams { compact_after: 2, ..RaftParams::default() };
        let mut rng = SmallRng::seed_from_u64(3);
        let mut g = RaftGroup::new(me, topology, params);
        let _ = call(&mut g, &mut rng, |g, cx| g.start(cx, true));
        for _ in 0..2 {
            let _ = call(&mut g, &mut rng, |g, cx| g.propose(cx, vec![0; 10]).unwrap());
        }
        assert!(g.wants_compaction(), "no snapshot yet: the entry count alone decides");
        let _ = call(&mut g, &mut rng, |g, cx| {
            g.compact(cx, vec![7; 100]);
            Vec::new()
        });
        let mut proposed = 0;
        while !g.wants_compaction() {
            let _ = call(&mut g, &mut rng, |g, cx| g.propose(cx, vec![1; 10]).unwrap());
            proposed += 1;
            assert!(proposed <= 10, "100 bytes of entries logged and still no compaction");
        }
        assert_eq!(proposed, 10, "compacted before the log held the snapshot's 100 bytes");
        // A member rebuilt from its serialized form weighs its log the same way.
        let back: RaftGroup = postcard::from_bytes(&postcard::to_stdvec(&g).unwrap()).unwrap();
        assert!(back.wants_compaction());
        assert_eq!(back.raw.store(), g.raw.store());
    }

    /// The riskiest path of a restart: a checkpoint taken before the log was compacted, then the changes that
    /// compacted it. The rebuilt member hands the application the snapshot first, then the entries after it,
    /// and ends with the same log as the member that crashed.
    #[test]
    fn a_member_rebuilt_from_a_checkpoint_and_its_changes_restores_the_snapshot_then_the_entries_after_it() {
        let topology = Topology::replicated(1, 1, 1);
        let me = topology.member(0, 0);
        let params = RaftParams { compact_after: 3, ..RaftParams::default() };
        let mut rng = SmallRng::seed_from_u64(7);
        let mut g = RaftGroup::new(me, topology, params);
        let (_, _) = call(&mut g, &mut rng, |g, cx| g.start(cx, true));
        assert!(g.is_leader(), "a group of one elects itself");
        let checkpoint = postcard::to_stdvec(&g).unwrap();
        let mut changes = Vec::new();
        let mut applied = Vec::new();
        for i in 0..5u8 {
            let (events, c) = call(&mut g, &mut rng, |g, cx| g.propose(cx, vec![b'a' + i]).unwrap());
            changes.extend(c);
            applied.extend(applied_data(&events));
            if g.wants_compaction() {
                let state = format!("state at {}", g.applied()).into_bytes();
                let (_, c) = call(&mut g, &mut rng, |g, cx| {
                    g.compact(cx, state);
                    Vec::new()
                });
                changes.extend(c);
            }
        }
        assert_eq!(applied, (0..5u8).map(|i| vec![b'a' + i]).collect::<Vec<_>>());
        let snap_index = g.raw.store().snap_index;
        assert!(snap_index > 0, "the log was compacted");

        let mut back: RaftGroup = postcard::from_bytes(&checkpoint).unwrap();
        for c in &changes {
            back.apply_change(c).unwrap();
        }
        let (events, _) = call(&mut back, &mut rng, |g, cx| g.start(cx, false));
        let Some(Event::Restore { index, data }) = events.first() else { panic!("no restore first: {events:?}") };
        assert_eq!((*index, data.as_slice()), (snap_index, format!("state at {snap_index}").as_bytes()));
        // The entries after the snapshot come again, in order, and nothing before it.
        let after: Vec<Vec<u8>> = applied_data(&events);
        let expected: Vec<Vec<u8>> =
            (0..5u8).map(|i| vec![b'a' + i]).skip(applied.len() - (g.applied() - snap_index) as usize).collect();
        assert_eq!(after, expected);
        assert_eq!(back.raw.store(), g.raw.store(), "the same log as the member that crashed");
        assert_eq!(back.applied(), g.applied());
        assert!(back.apply_change(b"not a change").is_err());
    }
}
