//! The Jessy family (`--protocol nmsi|rc|ser|us|si|psi --replicas 3`): transactions by deferred update
//! replication over replica groups, after Saeida Ardekani, Sutra and Shapiro, "Non-Monotonic Snapshot
//! Isolation" (§IV, Algorithms 1 and 2; §V-A for the family). One skeleton, one [`Criterion`] per
//! consistency criterion: its read rule, whose reads it certifies, where a transaction is delivered, and its
//! certification test. `nmsi` ([`NmsiCriterion`]) is the paper's own; `rc` ([`RcCriterion`]) its weakly
//! consistent baseline; `ser` ([`SerCriterion`], P-Store), `us` ([`UsCriterion`], GMU), `si`
//! ([`SiCriterion`], Serrano) and `psi` ([`PsiCriterion`], Walter) its strong baselines. Each claims the
//! checker level of its name.
//!
//! Update transactions terminate by genuine atomic multicast (below; the paper's choice for every
//! criterion) or, with `--termination 2pc`, by two-phase commit over the groups (`TpcState`: prepare
//! certifies with no-wait locks, commits apply in stamp order), the termination GMU and Walter used.
//!
//! # Execution (Algorithm 1)
//!
//! The client session is the transaction's coordinator. A transaction runs optimistically: each read goes
//! to a replica of the key's group (the nearest member, `Topology::nearest`) carrying what the transaction
//! read so far; the replica answers with the newest version compatible with those reads
//! ([`super::dependence::choose`], `remoteRead` line 6), or holds the read until it has applied what makes
//! one compatible. Reads are issued one key at a time, as `execute(READ)` waits for each reply: two reads
//! sent together could not be checked against each other. Writes are buffered by the client library. A
//! transaction with no writes commits at once, without any message (wait-free queries: it never aborts).
//!
//! # Termination (Algorithm 2)
//!
//! An update transaction is atomic-multicast ([`crate::components::multicast`], genuine) to the groups of
//! the keys it writes, carrying its snapshot vector and writes. Every member of those groups delivers it in
//! the one global order into its queue `Q` and certifies it: under NMSI, for each key it writes in the
//! group, the transaction must depend on the key's last committed version ([`super::dependence::depends_on`]).
//! The member sends its group's vote to every member of the other written groups and to the coordinator.
//! The outcome is the conjunction of one vote per written group (a voting quorum: a group's members vote
//! alike, since they certify the same delivered sequence); every member and the coordinator compute it.
//!
//! Two refinements of Algorithm 2, where the paper's prose and its §II properties say more than its
//! pseudocode:
//!
//! * **Votes wait only for write conflicts** (minimal commitment synchronisation, §II-B): a member votes on
//!   a transaction once every earlier transaction in `Q` that writes one of the same keys in its group is
//!   decided (line 15 waits for every earlier one; the proof of §IV-E needs only the conflicting ones).
//! * **Commits apply in delivery order**: a decided transaction's writes are applied when every earlier
//!   transaction in `Q` is decided too, so every member of a group applies the same sequence, and the
//!   group's order of applied stamps (the multicast's final timestamps) is its delivery order, which the
//!   dependence vectors need.
//!
//! # Versions and the checker
//!
//! A committed transaction's stamp (its final multicast timestamp, unique) is the version of all its
//! writes, so each key's versions are ordered by stamp in its group's apply order (`orders_versions`).
//!
//! # Faults
//!
//! Deliveries are in each group's Raft log (the multicast's), and certification is a function of the
//! delivered sequence and of the other groups' votes, which are functions of theirs: a member that
//! restarts or lags re-delivers and reaches the same decisions. Votes are not logged; a member that waits
//! for a group's vote longer than the multicast's retry period asks that group's members again
//! (`VoteQuery`), and members remember their recent votes to answer. A coordinator whose votes were lost
//! re-submits (the multicast origin's retry); a member that has the transaction answers with its vote.
//! Reads held by a replica are dropped after [`PARKED_READ_TTL_NS`]; the client re-sends an unanswered read
//! to the next member of the group.
//!
//! Session tokens (`ClientNode::save_session`): with sessions (`si`, `psi`) the session's dependence vector,
//! the floor its next first read carries; a member answers that read only from a snapshot covering the
//! floor (it parks the read, and the client tries the next member after `retry_ns`), so a session resumes in
//! any datacenter. The other criteria have no session order: their tokens are empty and a non-empty one is
//! refused.

use super::dependence::{DepVector, GroupView, ReadAt, choose, commit_vector, depends_on, snapshot_of};
use crate::components::consensus::{RaftTick, RaftWire};
use crate::components::multicast::{
    MAX_TIMESTAMP, McastEvent, McastId, McastMember, McastMsg, McastOrigin, McastParams, McastRetry, McastTick,
    McastWire, check_submit_sender,
};
use crate::components::session;
use crate::components::twopc::{TpcHost, TpcMember, TpcOrigin, TpcParams, TpcRetry, TpcTick, TpcWire};
use serde::{Deserialize, Serialize};
use snowline_core::{
    AbortCause, Addr, Check, ClientId, ClientNode, Ctx, DcId, Durability, InvalidInput, InvalidKind, Key,
    LinkAssumptions, Message, Offers, OpError, OpId, OpMetrics, PartitionId, Protocol, ProtocolConfig, ReadResult,
    Reply, Request, ServerId, ServerNode, Termination, Topology, Value, Version,
};
use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};

/// A hasher without a random seed (SipHash with zero keys): the same inputs give the same layout in every run.
type FixedHasher = std::hash::BuildHasherDefault<std::hash::DefaultHasher>;
use std::marker::PhantomData;

/// How a criterion's reads pick their versions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReadRule {
    /// The newest version the replica applied (no snapshot: `rc`, and `ser`, whose certification checks).
    Latest,
    /// The newest version compatible with the transaction's earlier reads
    /// ([`super::dependence::choose`]): a consistent snapshot with forward freshness (`nmsi`, `us`).
    Forward,
    /// A snapshot fixed by the first read (at its replica's latest consistent cut, and at least the
    /// session's floor), every later read at that snapshot's position of its group (`si`, `psi`).
    AtStart,
}

/// Which transactions a criterion certifies the reads of.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReadCertification {
    /// None: only write conflicts are certified (`nmsi`, `si`, `psi`), or nothing (`rc`).
    Never,
    /// Update transactions' reads; queries stay wait-free (`us`).
    Updates,
    /// Every transaction's, queries included (`ser`).
    All,
}

/// What sets one consistency criterion of the family apart on the shared skeleton (the paper's §V-A: the
/// protocols' "structure is very similar, and we were able to use the Jessy framework with relatively small
/// variations"): its name and claimed level, what it offers, its read rule, whose reads it certifies,
/// where a transaction is delivered, and its certification test.
pub trait Criterion: Send + 'static {
    /// The protocol name (`--protocol`), which is also the checker level it claims.
    const NAME: &'static str;
    const OFFERS: Offers;
    const READS: ReadRule;
    /// A transaction whose reads are certified goes to the groups of the keys it read as well as those it
    /// wrote, carrying the version of each key it read; those groups vote, and order it (their heads
    /// record it, so later snapshots are serializable with it).
    const CERTIFIES_READS: ReadCertification;
    /// Every update transaction is delivered to every group, in the one global order (non-genuine:
    /// Serrano's SI); groups that hold none of its keys only apply it to their order, without voting.
    const DELIVERS_TO_ALL: bool = false;
    /// Each group propagates the heads it applies to every other group, and snapshots are the latest
    /// consistent cut of the heads a replica knows (non-genuine propagation: Walter's PSI).
    const PROPAGATES: bool = false;
    /// A session's transactions observe what its earlier ones observed and wrote (`si`, `psi`: the
    /// checker's SESSION axiom).
    const SESSIONS: bool = false;
    /// Certification can refuse a transaction (all but `rc`): under two-phase commit, prepared
    /// transactions then lock their keys against conflicting prepares.
    const CERTIFIES: bool = true;
    /// Group `group`'s verdict on a transaction with snapshot `snapshot` that writes, in this group, keys
    /// whose last committed versions have stamps `latest`, and (where reads are certified) read keys here
    /// at stamps `reads`, each beside its key's last committed stamp. "Last committed" counts the
    /// transactions decided to commit but not applied yet.
    fn certify(snapshot: &DepVector, group: PartitionId, latest: &[u64], reads: &[(u64, u64)]) -> bool;
}

/// Non-Monotonic Snapshot Isolation (`nmsi`, the paper's own criterion).
pub struct NmsiCriterion;

impl Criterion for NmsiCriterion {
    const NAME: &'static str = "nmsi";
    const OFFERS: Offers = NO_BLIND_WRITES;
    const READS: ReadRule = ReadRule::Forward;
    const CERTIFIES_READS: ReadCertification = ReadCertification::Never;

    /// Write-conflict freedom: the transaction depends on the last committed version of each key it writes.
    fn certify(snapshot: &DepVector, group: PartitionId, latest: &[u64], _reads: &[(u64, u64)]) -> bool {
        write_conflict_free(snapshot, group, latest)
    }
}

/// What the snapshot criteria offer: interactive read-modify-write transactions and queries. A blind write
/// depends on no earlier version (its snapshot holds nothing of its keys' groups), so write-conflict
/// certification aborts it whenever its key was ever written: only read-modify-write transactions make
/// sense.
const NO_BLIND_WRITES: Offers = Offers {
    read_only: true,
    multi_key_rots: true,
    multi_shot_rots: false,
    blind_writes: false,
    write_transactions: false,
    interactive: true,
    stored_procedures: false,
};

/// What the criteria without write-conflict certification offer: blind writes too.
const ALL_WRITES: Offers = Offers {
    read_only: true,
    multi_key_rots: true,
    multi_shot_rots: false,
    blind_writes: true,
    write_transactions: true,
    interactive: true,
    stored_procedures: false,
};

/// Write-conflict freedom (NMSI's, SI's and PSI's certification; first committer wins): the snapshot
/// holds the last committed version of every key written here, so no concurrent transaction wrote one.
fn write_conflict_free(snapshot: &DepVector, group: PartitionId, latest: &[u64]) -> bool {
    latest.iter().all(|&stamp| depends_on(snapshot, group, stamp))
}

/// Read certification (P-Store's and GMU's): every key read here is still at the version read.
fn reads_still_latest(reads: &[(u64, u64)]) -> bool {
    reads.iter().all(|(read, latest)| read == latest)
}

/// Read Committed (`rc`), the paper's weakly consistent deferred-update baseline ("to show the maximum
/// achievable performance", §V-A): reads take the newest committed version, and nothing is certified, so
/// every transaction commits (lost updates and read skew are possible). Writes still travel by the atomic
/// multicast, so each key's versions have one order.
pub struct RcCriterion;

impl Criterion for RcCriterion {
    const NAME: &'static str = "rc";
    const OFFERS: Offers = ALL_WRITES;
    const READS: ReadRule = ReadRule::Latest;
    const CERTIFIES_READS: ReadCertification = ReadCertification::Never;
    const CERTIFIES: bool = false;

    fn certify(_snapshot: &DepVector, _group: PartitionId, _latest: &[u64], _reads: &[(u64, u64)]) -> bool {
        true
    }
}

/// Serializability (`ser`) as P-Store (Schiper, Sutra, Pedone, SRDS 2010) provides it, the paper's SER
/// baseline: reads take the newest committed version (no snapshot rule: "only the certification test
/// ensures that a transaction read a consistent snapshot", §V-C), and every transaction, read-only ones
/// included, is atomic-multicast to the groups of the keys it read and wrote; each group certifies that
/// every key it holds that the transaction read is still at the version read. All groups certify in the
/// one delivery order, so the committed transactions are serializable in it (genuine, but queries wait for
/// termination: the paper's "SER trades wait-free queries for GPR"). One-shot read-only transactions are
/// certified like the others, and may abort.
pub struct SerCriterion;

impl Criterion for SerCriterion {
    const NAME: &'static str = "ser";
    const OFFERS: Offers = ALL_WRITES;
    const READS: ReadRule = ReadRule::Latest;
    const CERTIFIES_READS: ReadCertification = ReadCertification::All;

    fn certify(_snapshot: &DepVector, _group: PartitionId, _latest: &[u64], reads: &[(u64, u64)]) -> bool {
        reads_still_latest(reads)
    }
}

/// Update Serializability (`us`) as GMU (Peluso et al., ICDCS 2012) provides it, with the atomic multicast
/// in place of GMU's 2PC as the paper's §V-A says: reads take the newest version compatible with the
/// earlier ones (GMU's vector-clock visibility, here the dependence vectors' rule: forward freshness);
/// an update transaction is delivered to the groups of the keys it read and wrote, each of which
/// certifies that the keys it read there are still at the versions read (update transactions are
/// serializable in the delivery order) and records the transaction in its order, as GMU's read-set
/// nodes advance their clocks in its commit. So a query's consistent snapshot is a cut of that order and
/// serializable with the updates; queries are wait-free and never abort. Not minimal commitment
/// synchronization: read groups vote too (the paper's "US does not minimize commitment synchronization").
///
/// Read-modify-write transactions only (no blind writes). A blind write's commit vector is its empty
/// snapshot plus its own stamps: it does not cover the writer it overwrote in a group, so a query that
/// reads the blind write's key in another group need not see that writer's other keys, and updates plus
/// one query were found not serializable (`snowline snow` found it: a G-single). GMU's commit clock joins
/// the prepare clocks of the written nodes, which cover the overwritten writer; carrying the overwritten
/// writers' vectors in the votes would do the same here, and is not built. A transaction that reads its
/// keys first depends on the versions it overwrites through its reads (their groups' heads), and its
/// read certification keeps them the latest until it commits.
pub struct UsCriterion;

impl Criterion for UsCriterion {
    const NAME: &'static str = "us";
    const OFFERS: Offers = NO_BLIND_WRITES;
    const READS: ReadRule = ReadRule::Forward;
    const CERTIFIES_READS: ReadCertification = ReadCertification::Updates;

    fn certify(_snapshot: &DepVector, _group: PartitionId, _latest: &[u64], reads: &[(u64, u64)]) -> bool {
        reads_still_latest(reads)
    }
}

/// Snapshot Isolation (`si`) as Serrano et al.'s partially replicated 1-copy-SI (PRDC 2007) provides it:
/// every update transaction is delivered to every group in the one global order (non-genuine: "no GPR
/// system can ensure SI"), so every group applies the same sequence of commits and a snapshot is one
/// position of it (the vectors are uniform). The first read fixes the snapshot at its replica's latest
/// position, and every later read takes its key's version at that position ("SI takes snapshots at the
/// start of a transaction", §V-C). The groups of the written keys certify first-committer-wins (the
/// snapshot holds each written key's last committed version) and vote; the others only wait for the
/// outcome to apply the transaction in order (the commitment convoy the paper measures). Sessions see
/// their own commits (the SESSION axiom of the checker's `si`).
pub struct SiCriterion;

impl Criterion for SiCriterion {
    const NAME: &'static str = "si";
    const OFFERS: Offers = NO_BLIND_WRITES;
    const READS: ReadRule = ReadRule::AtStart;
    const CERTIFIES_READS: ReadCertification = ReadCertification::Never;
    const DELIVERS_TO_ALL: bool = true;
    const SESSIONS: bool = true;

    fn certify(snapshot: &DepVector, group: PartitionId, latest: &[u64], _reads: &[(u64, u64)]) -> bool {
        write_conflict_free(snapshot, group, latest)
    }
}

/// Parallel Snapshot Isolation (`psi`) as Walter (Sovran et al., SOSP 2011) provides it, with the atomic
/// multicast in place of Walter's 2PC as the paper's §V-A says: an update transaction is delivered to the
/// groups of the keys it writes, which certify it (no write conflict with its snapshot, Walter's
/// "unmodified since startVTS and unlocked") and vote; after committing, each group propagates its new
/// heads to every other group (non-genuine: Walter's background propagation to all sites). A snapshot is
/// fixed at the transaction's first read: the latest consistent cut of the heads its replica knows
/// (Walter's site vector at start, visible only once causally complete), at least what the session
/// already saw and wrote; every later read takes its key's version at that cut.
pub struct PsiCriterion;

impl Criterion for PsiCriterion {
    const NAME: &'static str = "psi";
    const OFFERS: Offers = NO_BLIND_WRITES;
    const READS: ReadRule = ReadRule::AtStart;
    const CERTIFIES_READS: ReadCertification = ReadCertification::Never;
    const PROPAGATES: bool = true;
    const SESSIONS: bool = true;

    fn certify(snapshot: &DepVector, group: PartitionId, latest: &[u64], _reads: &[(u64, u64)]) -> bool {
        write_conflict_free(snapshot, group, latest)
    }
}

/// The names of the family's protocols, the ones `ProtocolConfig::termination` applies to.
pub const FAMILY: [&str; 6] = ["nmsi", "rc", "ser", "us", "si", "psi"];

/// The Jessy skeleton running criterion `C`.
pub struct Jessy<C>(PhantomData<C>);

/// Jessy with NMSI.
pub type Nmsi = Jessy<NmsiCriterion>;
/// Jessy's deferred-update Read Committed.
pub type Rc = Jessy<RcCriterion>;
/// P-Store's serializability on the Jessy skeleton.
pub type Ser = Jessy<SerCriterion>;
/// GMU's update serializability on the Jessy skeleton.
pub type Us = Jessy<UsCriterion>;
/// Serrano's snapshot isolation on the Jessy skeleton.
pub type Si = Jessy<SiCriterion>;
/// Walter's parallel snapshot isolation on the Jessy skeleton.
pub type Psi = Jessy<PsiCriterion>;

impl<C: Criterion> Protocol for Jessy<C> {
    const NAME: &'static str = C::NAME;
    type Msg = JessyMsg;
    type Timer = JessyTimer;
    type Server = JessyServer<C>;
    type Client = JessyClient<C>;
    const OFFERS: Offers = C::OFFERS;

    fn links() -> LinkAssumptions {
        // Raft, the multicast and the vote queries resend what is lost; nothing needs order.
        LinkAssumptions { fifo: false }
    }

    const DURABILITY: Durability = Durability::PersistChanges;
    const TOLERATES_LOSS: bool = true;

    fn check_topology(_topology: &Topology) -> Result<(), String> {
        Ok(())
    }

    fn server(id: ServerId, topology: Topology, config: &ProtocolConfig) -> JessyServer<C> {
        JessyServer::new(id, topology, params(config), config.termination).with_limits(config)
    }

    fn client(id: ClientId, dc: DcId, topology: Topology, config: &ProtocolConfig) -> JessyClient<C> {
        JessyClient::new(id, dc, topology, config.clone())
    }
}

fn params(config: &ProtocolConfig) -> McastParams {
    McastParams { record: config.record_components, skip_final: config.multicast_skip_final, ..McastParams::default() }
}

/// How long a replica holds a read it cannot answer yet.
pub const PARKED_READ_TTL_NS: u64 = 10_000_000_000;
/// Most reads a replica holds at once (a client cannot grow it without bound).
const MAX_PARKED_READS: usize = 10_000;
/// Most transactions a member holds votes for before it has delivered them.
const MAX_EARLY_VOTES: usize = 10_000;
/// Votes a member remembers after applying their transactions, to answer late queries and re-submits.
const KEEP_VOTES: usize = 100_000;
/// Heads a member keeps (positions a read may still be taken at); older ones are dropped in batches.
const KEEP_HEADS: usize = 100_000;
/// Most votes one answer to a query carries.
pub const MAX_VOTES_PER_ANSWER: usize = 1024;
/// Most earlier reads a read may carry.
const MAX_READS_CARRIED: usize = 10_000;
/// Most heads one propagation message carries.
pub const MAX_HEADS_PER_MESSAGE: usize = 1024;
/// Heads a member keeps per other group (propagation), beside the initial one.
const KEEP_REMOTE_HEADS: usize = 4096;
/// Heads a member answers a [`JessyMsg::HeadsQuery`] with: its group's latest.
const HEADS_PER_ANSWER: usize = 64;

/// What an update transaction multicasts: its snapshot and its writes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TxPayload {
    pub snapshot: DepVector,
    pub writes: Vec<(Key, Value)>,
    /// With [`Criterion::CERTIFIES_READS`]: each key read and the stamp of the version read.
    pub reads: Vec<(Key, u64)>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum JessyMsg {
    Raft(RaftWire),
    Mcast(McastWire),
    /// Two-phase commit's steps (`--termination 2pc`).
    Tpc(TpcWire),
    /// Client → a member of the key's group: read `key` compatibly with `reads` (the transaction's earlier
    /// reads with their keys). `tag` numbers the client's reads. With sessions, a first read's snapshot
    /// must hold at least `floor` (what the session saw and wrote before).
    Read {
        tag: u64,
        key: Key,
        reads: Vec<(Key, ReadAt)>,
        floor: DepVector,
    },
    /// The answer: the version read and where.
    ReadReply {
        tag: u64,
        key: Key,
        value: Option<Value>,
        at: ReadAt,
        skipped: u32,
    },
    /// A member's group voted `yes` or not on `id`, whose stamp is `stamp`.
    Vote {
        id: McastId,
        yes: bool,
        stamp: u64,
    },
    /// A member of another group asks for this group's vote on `id` again.
    VoteQuery {
        id: McastId,
    },
    /// The answer: this group's votes on `id` and on the transactions after it that the asker's group
    /// shares (a member back from a crash usually lacks them all), at most [`MAX_VOTES_PER_ANSWER`].
    Votes {
        votes: Vec<(McastId, bool, u64)>,
    },
    /// With propagation (`psi`): heads the sender's group applied, `(position, head)`, at most
    /// [`MAX_HEADS_PER_MESSAGE`].
    Heads {
        heads: Vec<(u64, DepVector)>,
    },
    /// With propagation: a member whose snapshots lag what a session needs asks for the group's latest
    /// heads.
    HeadsQuery,
}

impl Message for JessyMsg {
    fn kind(&self) -> &'static str {
        match self {
            JessyMsg::Raft(_) => "raft",
            JessyMsg::Mcast(McastWire::Submit(_)) => "submit",
            JessyMsg::Mcast(McastWire::Proposal { .. }) => "proposal",
            JessyMsg::Mcast(McastWire::Decided { .. }) => "decided",
            JessyMsg::Tpc(TpcWire::Begin { .. }) => "begin",
            JessyMsg::Tpc(TpcWire::Vote { .. }) => "2pc-vote",
            JessyMsg::Tpc(TpcWire::Decision { .. }) => "decision",
            JessyMsg::Tpc(TpcWire::Outcome { .. }) => "outcome",
            JessyMsg::Read { .. } => "read",
            JessyMsg::ReadReply { .. } => "read-reply",
            JessyMsg::Vote { .. } => "vote",
            JessyMsg::VoteQuery { .. } => "vote-query",
            JessyMsg::Votes { .. } => "votes",
            JessyMsg::Heads { .. } => "heads",
            JessyMsg::HeadsQuery => "heads-query",
        }
    }

    /// A transaction that writes, multicast or begun by two-phase commit (one that does not decode is refused
    /// as one): on a full disk its host refuses it, while reads and read-only transactions go on.
    fn is_client_write(&self) -> bool {
        let writes =
            |payload: &[u8]| postcard::from_bytes::<TxPayload>(payload).map_or(true, |tx| !tx.writes.is_empty());
        match self {
            JessyMsg::Mcast(McastWire::Submit(m)) => writes(&m.payload),
            JessyMsg::Tpc(TpcWire::Begin { payload, .. }) => writes(payload),
            _ => false,
        }
    }

    /// Under two-phase commit only the coordinator's group answers a client's `Begin`; the other
    /// participants' would otherwise stay counted as unanswered until the connection's budget stalled it.
    fn expects_reply(&self, to: Addr) -> bool {
        match self {
            JessyMsg::Tpc(wire) => wire.answered_at(to),
            _ => true,
        }
    }
}

impl From<RaftWire> for JessyMsg {
    fn from(w: RaftWire) -> Self {
        JessyMsg::Raft(w)
    }
}

impl From<McastWire> for JessyMsg {
    fn from(w: McastWire) -> Self {
        JessyMsg::Mcast(w)
    }
}

impl From<TpcWire> for JessyMsg {
    fn from(w: TpcWire) -> Self {
        JessyMsg::Tpc(w)
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum JessyTimer {
    Raft(RaftTick),
    Mcast(McastTick),
    Retry(McastRetry),
    Tpc(TpcTick),
    TpcRetry(TpcRetry),
    /// A member's periodic look at what waits (votes to ask for again, reads held too long); armed only
    /// while something waits.
    Sweep,
    /// A client looks whether its read has been unanswered for the retry period. One per session at a
    /// time, not one per read: a timer per read cost the runtime a timer-heap insertion and removal per read.
    ReadRetry,
}

impl From<RaftTick> for JessyTimer {
    fn from(t: RaftTick) -> Self {
        JessyTimer::Raft(t)
    }
}

impl From<McastTick> for JessyTimer {
    fn from(t: McastTick) -> Self {
        JessyTimer::Mcast(t)
    }
}

impl From<McastRetry> for JessyTimer {
    fn from(t: McastRetry) -> Self {
        JessyTimer::Retry(t)
    }
}

impl From<TpcTick> for JessyTimer {
    fn from(t: TpcTick) -> Self {
        JessyTimer::Tpc(t)
    }
}

impl From<TpcRetry> for JessyTimer {
    fn from(t: TpcRetry) -> Self {
        JessyTimer::TpcRetry(t)
    }
}

/// A delivered update transaction not applied yet (an element of `Q`).
#[derive(Clone, Debug, Serialize, Deserialize)]
struct Queued {
    id: McastId,
    stamp: u64,
    dest: Vec<PartitionId>,
    tx: TxPayload,
    /// Votes known, by group (this group's own once cast).
    votes: BTreeMap<PartitionId, bool>,
    outcome: Option<bool>,
}

/// A group's data as its members hold it: versions, heads, the queue and the votes cast.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct GroupData {
    group: PartitionId,
    /// `(stamp, head after it)` for every applied update transaction, from the oldest kept.
    heads: Vec<(u64, DepVector)>,
    /// Per key written here: its versions, oldest first, starting with the initial one `(0, None)` until
    /// old versions are dropped. Hashed, not ordered: every read looks its key up, and a B-tree's search
    /// compares the key with a dozen others behind as many pointers (it was most of a read's cost); nothing
    /// iterates it in an order that matters, and the fixed hasher keeps runs reproducible.
    versions: HashMap<Key, Vec<(u64, Option<Value>)>, FixedHasher>,
    queue: VecDeque<Queued>,
    /// This group's votes on applied transactions: id → (yes, stamp, destination groups), with their
    /// order (the apply order) for trimming and for answering queries.
    cast: BTreeMap<McastId, (bool, u64, Vec<PartitionId>)>,
    cast_order: VecDeque<McastId>,
    /// Under two-phase commit: the group's state there.
    tpc: TpcState,
}

/// A group's state under two-phase commit: its clock (the largest stamp it proposed or applied) and the
/// transactions prepared or decided here and not applied yet.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
struct TpcState {
    clock: u64,
    /// Prepared here, undecided: each with the timestamp this group proposed.
    prepared: BTreeMap<McastId, (u64, TxPayload)>,
    /// Decided to commit, by final stamp, waiting until no prepared transaction may end below it.
    committed: BTreeMap<u64, (McastId, TxPayload)>,
}

/// A group's verdict under two-phase commit, carried as its part of the transaction: every member of every
/// group decides from all the parts (so a no travels with its cause to the client).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
enum TpcVerdict {
    /// Prepared, with the timestamp this group proposes.
    Yes { ts: u64 },
    /// Certification failed against a committed transaction.
    Certification,
    /// A prepared, undecided transaction here holds a conflicting key (no-wait: vote no).
    Locked,
}

/// A transaction's outcome from every group's part (its verdict): committed at the largest proposed stamp
/// if every group prepared it, else aborted for the first cause found (certification before a lock). Every
/// member and the client decide alike from the same parts.
fn tpc_outcome(parts: &[(PartitionId, Vec<u8>)]) -> Result<u64, AbortCause> {
    let verdicts: Vec<TpcVerdict> = parts.iter().filter_map(|(_, b)| postcard::from_bytes(b).ok()).collect();
    if verdicts.contains(&TpcVerdict::Certification) {
        return Err(AbortCause::Certification);
    }
    let stamps: Vec<u64> =
        verdicts.iter().filter_map(|v| if let TpcVerdict::Yes { ts } = v { Some(*ts) } else { None }).collect();
    match stamps.iter().max() {
        Some(&stamp) if stamps.len() == parts.len() => Ok(stamp),
        _ => Err(AbortCause::Vote),
    }
}

/// The smallest stamp above `floor` in group `g`'s residue class (stamps are unique across groups, as
/// the multicast's are).
fn next_stamp(floor: u64, topology: &Topology, g: PartitionId) -> u64 {
    let n = u64::from(topology.partitions);
    (floor / n + 1) * n + u64::from(g)
}

impl GroupView for GroupData {
    fn group(&self) -> PartitionId {
        self.group
    }

    fn heads(&self) -> &[(u64, DepVector)] {
        &self.heads
    }

    fn versions(&self, key: &str) -> Vec<u64> {
        match self.versions.get(key) {
            Some(v) => v.iter().map(|(s, _)| *s).collect(),
            None => vec![0],
        }
    }
}

impl GroupData {
    fn new(group: PartitionId) -> Self {
        Self {
            group,
            heads: vec![(0, DepVector::zero())],
            versions: HashMap::default(),
            queue: VecDeque::new(),
            cast: BTreeMap::new(),
            cast_order: VecDeque::new(),
            tpc: TpcState::default(),
        }
    }

    /// Applies a committed transaction with stamp `stamp` delivered to groups `dest`: its writes here are
    /// new versions, and the group's order records it (a new head). Returns the new position and head.
    fn apply(&mut self, topology: &Topology, stamp: u64, tx: TxPayload, dest: &[PartitionId]) -> (u64, DepVector) {
        let g = self.group;
        let cv = commit_vector(&tx.snapshot, dest.iter().copied(), stamp);
        for (k, v) in tx.writes.into_iter().filter(|(k, _)| topology.partition_of(k) == g) {
            self.versions.entry(k).or_insert_with(|| vec![(0, None)]).push((stamp, Some(v)));
        }
        let mut head = self.heads.last().map(|(_, h)| h.clone()).unwrap_or_default();
        head.join(&cv);
        self.heads.push((stamp, head.clone()));
        (stamp, head)
    }

    /// Two-phase commit's prepare of `tx` here: a group that holds none of its certified keys only orders
    /// it; the others refuse it if a prepared transaction holds a conflicting key (no-wait locking: a
    /// write conflicts with prepared writes and certified reads of its key, a certified read with prepared
    /// writes), then certify it as the multicast termination does. A yes proposes a stamp above the
    /// group's clock and above the snapshot's entry here (so the transaction follows what it depends on).
    fn tpc_prepare<C: Criterion>(&mut self, topology: &Topology, id: McastId, tx: TxPayload) -> TpcVerdict {
        let g = self.group;
        if C::CERTIFIES && voters(topology, &tx).contains(&g) {
            let here = |k: &Key| topology.partition_of(k) == g;
            let writes: Vec<&Key> = tx.writes.iter().map(|(k, _)| k).filter(|k| here(k)).collect();
            let reads: Vec<&(Key, u64)> = tx.reads.iter().filter(|(k, _)| here(k)).collect();
            let locked = self.tpc.prepared.values().any(|(_, p)| {
                let p_writes = || p.writes.iter().map(|(k, _)| k);
                p_writes().any(|k| writes.contains(&k) || reads.iter().any(|(r, _)| r == k))
                    || p.reads.iter().any(|(k, _)| writes.contains(&k))
            });
            if locked {
                return TpcVerdict::Locked;
            }
            let last = |k: &Key| {
                let pending = self.tpc.committed.iter().rev().find(|(_, (_, t))| t.writes.iter().any(|(w, _)| w == k));
                pending.map(|(s, _)| *s).unwrap_or_else(|| self.versions(k).last().copied().unwrap_or(0))
            };
            let latest: Vec<u64> = writes.iter().map(|k| last(k)).collect();
            let read_at: Vec<(u64, u64)> = reads.iter().map(|(k, read)| (*read, last(k))).collect();
            if !C::certify(&tx.snapshot, g, &latest, &read_at) {
                return TpcVerdict::Certification;
            }
        }
        let ts = next_stamp(self.tpc.clock.max(tx.snapshot.get(g)), topology, g);
        self.tpc.clock = ts;
        self.tpc.prepared.insert(id, (ts, tx));
        TpcVerdict::Yes { ts }
    }

    /// Two-phase commit's decision on `id`: it commits if every group's part is a yes, at the largest
    /// proposed stamp; then every committed transaction no prepared one may precede is applied, in stamp
    /// order (each group applies in stamp order, as under the multicast). Returns what was applied.
    fn tpc_decide<C: Criterion>(
        &mut self,
        topology: &Topology,
        id: McastId,
        parts: Option<&[(PartitionId, Vec<u8>)]>,
    ) -> Vec<(u64, DepVector)> {
        if let Some((_, tx)) = self.tpc.prepared.remove(&id)
            && let Some(Ok(stamp)) = parts.map(tpc_outcome)
        {
            self.tpc.clock = self.tpc.clock.max(stamp);
            self.tpc.committed.insert(stamp, (id, tx));
        }
        let mut applied = Vec::new();
        while let Some((&stamp, _)) = self.tpc.committed.first_key_value() {
            if self.tpc.prepared.values().any(|(ts, _)| *ts < stamp) {
                break;
            }
            let (_, tx) = self.tpc.committed.remove(&stamp).expect("first");
            let dest: Vec<PartitionId> = destinations::<C>(topology, &tx).into_iter().collect();
            applied.push(self.apply(topology, stamp, tx, &dest));
        }
        applied
    }

    /// The versions of `key`, oldest first (as [`GroupView::versions`] lists their stamps).
    fn versions_of(&self, key: &str) -> &[(u64, Option<Value>)] {
        static INITIAL: [(u64, Option<Value>); 1] = [(0, None)];
        self.versions.get(key).map_or(&INITIAL[..], |v| &v[..])
    }

    fn head_at(&self, position: u64) -> DepVector {
        let i = self.heads.partition_point(|(s, _)| *s <= position);
        self.heads.get(i.wrapping_sub(1)).map(|(_, h)| h.clone()).unwrap_or_default()
    }

    /// This group's vote on `id`, if cast.
    fn vote_of(&self, id: &McastId) -> Option<(bool, u64)> {
        if let Some((yes, stamp, _)) = self.cast.get(id) {
            return Some((*yes, *stamp));
        }
        self.queue.iter().find(|q| q.id == *id).and_then(|q| q.votes.get(&self.group).map(|&yes| (yes, q.stamp)))
    }

    fn writes_here<'a>(&self, topology: &'a Topology, tx: &'a TxPayload) -> impl Iterator<Item = &'a Key> + 'a {
        let g = self.group;
        tx.writes.iter().map(|(k, _)| k).filter(move |k| topology.partition_of(k) == g)
    }

    /// Drops heads and versions no read can be taken at any more.
    fn trim(&mut self) {
        if self.heads.len() > 2 * KEEP_HEADS {
            self.heads.drain(..self.heads.len() - KEEP_HEADS);
            let oldest = self.heads[0].0;
            for versions in self.versions.values_mut() {
                // A version superseded at or before the oldest kept position can never be read again.
                let superseded = versions.iter().skip(1).take_while(|(s, _)| *s <= oldest).count();
                versions.drain(..superseded);
            }
        }
        while self.cast_order.len() > KEEP_VOTES {
            if let Some(old) = self.cast_order.pop_front() {
                self.cast.remove(&old);
            }
        }
    }
}

/// A read a replica cannot answer yet.
#[derive(Clone, Debug)]
struct Parked {
    from: Addr,
    tag: u64,
    key: Key,
    reads: Vec<(Key, ReadAt)>,
    floor: DepVector,
    since: u64,
}

/// The groups that certify a transaction and vote on it: those of the keys it writes, and of the keys it
/// read where its reads are certified (its payload carries them only then).
fn voters(topology: &Topology, tx: &TxPayload) -> BTreeSet<PartitionId> {
    let keys = tx.writes.iter().map(|(k, _)| k).chain(tx.reads.iter().map(|(k, _)| k));
    keys.map(|k| topology.partition_of(k)).collect()
}

/// The groups a transaction is delivered to: its voters, or every group (non-genuine criteria).
fn destinations<C: Criterion>(topology: &Topology, tx: &TxPayload) -> BTreeSet<PartitionId> {
    if C::DELIVERS_TO_ALL { (0..topology.partitions).collect() } else { voters(topology, tx) }
}

/// Whether a transaction's reads are certified (and travel with it).
fn certifies_reads<C: Criterion>(writes: bool) -> bool {
    match C::CERTIFIES_READS {
        ReadCertification::Never => false,
        ReadCertification::Updates => writes,
        ReadCertification::All => true,
    }
}

type Cx<'a, C> = Ctx<'a, Jessy<C>>;

/// How a member terminates update transactions ([`ProtocolConfig::termination`]).
#[derive(Serialize, Deserialize)]
enum Engine {
    Multicast(McastMember),
    TwoPc(TpcMember),
}

/// The group's data as two-phase commit's host: prepare and decide change it while the component applies
/// its log, and what they apply is collected for the member to act on afterwards.
struct TpcView<'a, C> {
    data: &'a mut GroupData,
    topology: &'a Topology,
    applied: Vec<(u64, DepVector)>,
    criterion: PhantomData<C>,
}

impl<C: Criterion> TpcHost for TpcView<'_, C> {
    fn prepare(&mut self, id: McastId, payload: &[u8]) -> Option<Vec<u8>> {
        // Members prepare only what passed `check_tx`; anything else is refused.
        let tx = postcard::from_bytes::<TxPayload>(payload).ok()?;
        let verdict = self.data.tpc_prepare::<C>(self.topology, id, tx);
        Some(postcard::to_stdvec(&verdict).expect("a verdict serializes"))
    }

    fn decide(&mut self, id: McastId, commit: Option<&[(PartitionId, Vec<u8>)]>) {
        let applied = self.data.tpc_decide::<C>(self.topology, id, commit);
        self.applied.extend(applied);
    }

    fn snapshot(&self) -> Vec<u8> {
        postcard::to_stdvec(&*self.data).expect("the group's data serializes")
    }

    fn restore(&mut self, data: &[u8]) {
        if let Ok(d) = postcard::from_bytes::<GroupData>(data) {
            *self.data = d;
        }
    }
}

/// A member of a partition's replica group.
#[derive(Serialize, Deserialize)]
#[serde(bound = "")]
pub struct JessyServer<C> {
    id: ServerId,
    topology: Topology,
    retry_ns: u64,
    engine: Engine,
    data: GroupData,
    /// Votes from other groups for transactions not delivered here yet. Soft: re-asked for.
    #[serde(skip)]
    early_votes: BTreeMap<McastId, BTreeMap<PartitionId, bool>>,
    #[serde(skip)]
    parked: Vec<Parked>,
    /// Since when (ns) each queued transaction with this group's vote has waited for the others' (from the
    /// vote, or from the first sweep after a restart).
    #[serde(skip)]
    waiting_since: BTreeMap<McastId, u64>,
    #[serde(skip)]
    sweep_armed: bool,
    /// With propagation: the heads other groups applied, by group, ascending, each list starting with the
    /// initial `(0, zero)`. Soft: propagation and queries refill it.
    #[serde(skip)]
    remote: BTreeMap<PartitionId, Vec<(u64, DepVector)>>,
    #[serde(skip)]
    criterion: PhantomData<C>,
    /// The limits clients' transactions and reads are checked against.
    config: ProtocolConfig,
}

impl<C: Criterion> JessyServer<C> {
    pub fn new(id: ServerId, topology: Topology, params: McastParams, termination: Termination) -> Self {
        let engine = match termination {
            Termination::Multicast => Engine::Multicast(McastMember::new(id, topology, params)),
            Termination::TwoPc => {
                let tpc = TpcParams { raft: params.raft, retry_ns: params.retry_ns };
                Engine::TwoPc(TpcMember::new(id, topology, tpc))
            }
        };
        Self {
            id,
            topology,
            retry_ns: params.retry_ns,
            engine,
            data: GroupData::new(id.partition),
            early_votes: BTreeMap::new(),
            parked: Vec::new(),
            waiting_since: BTreeMap::new(),
            sweep_armed: false,
            remote: BTreeMap::new(),
            criterion: PhantomData,
            config: ProtocolConfig::default(),
        }
    }

    /// Check clients' requests against `config`'s limits (the default limits otherwise).
    pub fn with_limits(mut self, config: &ProtocolConfig) -> Self {
        self.config = config.clone();
        self
    }

    /// A client's transaction or read is within the request limits (`ProtocolConfig`): its writes (at most
    /// `max_keys_per_request`, as the commit that sent them) and the keys it read (each of them, in
    /// several reads: their number is not one request's).
    fn check_limits<'k>(
        &self,
        now_ns: u64,
        from: Addr,
        kind: &'static str,
        writes: &'k [(Key, Value)],
        reads: impl IntoIterator<Item = &'k Key>,
    ) -> Result<(), InvalidInput> {
        if let Addr::Client(_) = from {
            let check = Check::new(&self.topology, &self.config, now_ns, from, kind);
            check.request_writes(writes.iter().map(|(k, v)| (k, v)), [])?;
            reads.into_iter().try_for_each(|k| check.request_keys([k]))?;
        }
        Ok(())
    }

    /// Runs `f` on the two-phase commit member with the group's data as its host, then acts on what was
    /// applied. Nothing under the multicast.
    fn with_tpc<R>(
        &mut self,
        cx: &mut Cx<'_, C>,
        f: impl FnOnce(&mut TpcMember, &mut Cx<'_, C>, &mut dyn TpcHost) -> R,
    ) -> Option<R> {
        let Engine::TwoPc(member) = &mut self.engine else { return None };
        let mut view = TpcView::<C> {
            data: &mut self.data,
            topology: &self.topology,
            applied: Vec::new(),
            criterion: PhantomData,
        };
        let r = f(member, cx, &mut view);
        let applied = view.applied;
        cx.charge(applied.len() as u64);
        self.applied(cx, applied);
        Some(r)
    }

    /// The latest value of `key` this member applied.
    pub fn value(&self, key: &str) -> Option<&Value> {
        self.data.versions.get(key).and_then(|v| v.last()).and_then(|(_, value)| value.as_ref())
    }

    fn handle(&mut self, cx: &mut Cx<'_, C>, events: Vec<McastEvent>) {
        for event in events {
            match event {
                McastEvent::Deliver { msg, ts, .. } => {
                    cx.charge(1);
                    // Members deliver only what passed `check_submit`; anything else is skipped.
                    let Ok(tx) = postcard::from_bytes::<TxPayload>(&msg.payload) else { continue };
                    let votes = self.early_votes.remove(&msg.id).unwrap_or_default();
                    self.data.queue.push_back(Queued {
                        id: msg.id,
                        stamp: ts,
                        dest: msg.dest,
                        tx,
                        votes,
                        outcome: None,
                    });
                }
                McastEvent::Restore { data } => {
                    if let Ok(d) = postcard::from_bytes::<GroupData>(&data) {
                        self.data = d;
                    }
                }
                McastEvent::Leader { .. } => {}
            }
        }
        self.progress(cx);
        if let Engine::Multicast(member) = &mut self.engine
            && member.wants_compaction()
        {
            let state = postcard::to_stdvec(&self.data).expect("the group's data serializes");
            member.compact(cx, state);
        }
    }

    /// Votes, decides and applies what it can, in queue order (Algorithm 2 `vote`, `commit`, `abort`).
    fn progress(&mut self, cx: &mut Cx<'_, C>) {
        let g = self.id.partition;
        let mut applied: Vec<(u64, DepVector)> = Vec::new();
        loop {
            let mut changed = false;
            // Vote on every transaction no earlier undecided one write-conflicts with here.
            let mut undecided_keys: BTreeSet<Key> = BTreeSet::new();
            // Stamps of writes decided to commit but not applied yet, per key.
            let mut pending_writes: BTreeMap<Key, u64> = BTreeMap::new();
            for i in 0..self.data.queue.len() {
                let q = &self.data.queue[i];
                let mine: Vec<Key> = self.data.writes_here(&self.topology, &q.tx).cloned().collect();
                let read_here: Vec<&(Key, u64)> =
                    q.tx.reads.iter().filter(|(k, _)| self.topology.partition_of(k) == g).collect();
                let blocked = mine.iter().chain(read_here.iter().map(|(k, _)| k)).any(|k| undecided_keys.contains(k));
                let voters = voters(&self.topology, &q.tx);
                if !q.votes.contains_key(&g) && !voters.contains(&g) {
                    // Delivered here only to be ordered (non-genuine): acknowledge to the coordinator.
                    let (id, stamp) = (q.id, q.stamp);
                    self.data.queue[i].votes.insert(g, true);
                    cx.send(id.origin, JessyMsg::Vote { id, yes: true, stamp });
                    self.waiting_since.insert(id, cx.now_ns());
                    changed = true;
                } else if !q.votes.contains_key(&g) && !blocked {
                    let last = |k: &Key| {
                        pending_writes
                            .get(k)
                            .copied()
                            .unwrap_or_else(|| self.data.versions(k).last().copied().unwrap_or(0))
                    };
                    let latest: Vec<u64> = mine.iter().map(last).collect();
                    let reads: Vec<(u64, u64)> = read_here.iter().map(|(k, read)| (*read, last(k))).collect();
                    let yes = C::certify(&q.tx.snapshot, g, &latest, &reads);
                    let (id, stamp, dest) = (q.id, q.stamp, q.dest.clone());
                    self.data.queue[i].votes.insert(g, yes);
                    self.cast_vote(cx, id, yes, stamp, &dest);
                    self.waiting_since.insert(id, cx.now_ns());
                    changed = true;
                }
                let q = &mut self.data.queue[i];
                if q.outcome.is_none() && voters.iter().all(|d| q.votes.contains_key(d)) {
                    q.outcome = Some(voters.iter().all(|d| q.votes.get(d) == Some(&true)));
                    changed = true;
                }
                match q.outcome {
                    None => undecided_keys.extend(mine),
                    Some(true) => pending_writes.extend(mine.into_iter().map(|k| (k, q.stamp))),
                    Some(false) => {}
                }
            }
            // Apply, in delivery order, what is decided.
            while let Some(q) = self.data.queue.front() {
                let Some(commit) = q.outcome else { break };
                let q = self.data.queue.pop_front().expect("front");
                self.waiting_since.remove(&q.id);
                if let Some(&yes) = q.votes.get(&g) {
                    self.data.cast.insert(q.id, (yes, q.stamp, q.dest.clone()));
                    self.data.cast_order.push_back(q.id);
                }
                if commit {
                    // Every destination group orders the transaction (its heads record it): the groups it
                    // writes, and those that certified its reads or only order it.
                    cx.charge(1);
                    applied.push(self.data.apply(&self.topology, q.stamp, q.tx, &q.dest));
                }
                changed = true;
            }
            if !changed {
                break;
            }
        }
        self.applied(cx, applied);
    }

    /// After commits were applied: trims, propagates, answers the reads that waited for them.
    fn applied(&mut self, cx: &mut Cx<'_, C>, applied: Vec<(u64, DepVector)>) {
        if !applied.is_empty() {
            self.data.trim();
            if C::PROPAGATES {
                self.propagate(cx, applied);
            }
            self.retry_parked(cx);
        }
        self.arm_sweep(cx);
    }

    /// Sends heads this group applied to the member of every other group with this member's index (each
    /// member of a group thus hears from its peer in every other group).
    fn propagate(&self, cx: &mut Cx<'_, C>, heads: Vec<(u64, DepVector)>) {
        let Some(index) = self.topology.member_index(self.id) else { return };
        for chunk in heads.chunks(MAX_HEADS_PER_MESSAGE) {
            for h in (0..self.topology.partitions).filter(|&h| h != self.id.partition) {
                cx.send(self.topology.member(h, index), JessyMsg::Heads { heads: chunk.to_vec() });
            }
        }
    }

    /// Keeps heads another group applied (propagation), in position order.
    fn learn_heads(&mut self, group: PartitionId, heads: Vec<(u64, DepVector)>) {
        let list = self.remote.entry(group).or_insert_with(|| vec![(0, DepVector::zero())]);
        for (position, head) in heads {
            if let Err(i) = list.binary_search_by_key(&position, |(p, _)| *p) {
                list.insert(i, (position, head));
            }
        }
        if list.len() > KEEP_REMOTE_HEADS + 1 {
            let excess = list.len() - KEEP_REMOTE_HEADS - 1;
            list.drain(1..1 + excess);
        }
    }

    /// The snapshot a transaction's first read fixes (`ReadRule::AtStart`). Without propagation (`si`,
    /// where every group applies every commit and heads are uniform), this group's latest head. With it
    /// (`psi`), the latest consistent cut of the heads known here: a position per group whose heads all
    /// lie within the cut, so whatever a version read depends on is in the snapshot (Walter's
    /// causally-complete site vector). Found by lowering each group's position from its latest known
    /// until every chosen head fits (the zero cut always does).
    fn start_snapshot(&self) -> DepVector {
        let own = self.data.heads.as_slice();
        if !C::PROPAGATES {
            return own.last().map(|(_, h)| h.clone()).unwrap_or_default();
        }
        let zero = [(0, DepVector::zero())];
        let lists: Vec<(PartitionId, &[(u64, DepVector)])> = (0..self.topology.partitions)
            .map(|h| match h == self.id.partition {
                true => (h, own),
                false => (h, self.remote.get(&h).map_or(&zero[..], |l| l.as_slice())),
            })
            .collect();
        let mut at: Vec<usize> = lists.iter().map(|(_, l)| l.len().saturating_sub(1)).collect();
        let cut = |at: &[usize]| DepVector::from_entries(lists.iter().zip(at).map(|((h, l), &i)| (*h, l[i].0)));
        loop {
            let mut x = cut(&at);
            let mut changed = false;
            for (j, (h, list)) in lists.iter().enumerate() {
                while at[j] > 0 && !list[at[j]].1.le(&x) {
                    at[j] -= 1;
                    changed = true;
                }
                x.set(*h, list[at[j]].0);
            }
            if !changed {
                // The oldest kept head of a group may still not fit (after trimming): then no cut.
                return x;
            }
        }
    }

    /// Sends this group's vote to the other written groups' members and to the coordinator.
    fn cast_vote(&self, cx: &mut Cx<'_, C>, id: McastId, yes: bool, stamp: u64, dest: &[PartitionId]) {
        for &d in dest.iter().filter(|&&d| d != self.id.partition) {
            for s in self.topology.group(d) {
                cx.send(s, JessyMsg::Vote { id, yes, stamp });
            }
        }
        cx.send(id.origin, JessyMsg::Vote { id, yes, stamp });
    }

    /// Records a vote of `from`'s group (the caller then calls `progress`).
    fn record_vote(&mut self, from: ServerId, id: McastId, yes: bool) {
        if let Some(q) = self.data.queue.iter_mut().find(|q| q.id == id) {
            if q.dest.contains(&from.partition) {
                q.votes.entry(from.partition).or_insert(yes);
            }
        } else if !self.data.cast.contains_key(&id)
            && matches!(&self.engine, Engine::Multicast(m) if !m.is_delivered(&id))
        {
            // Not delivered here yet: keep it (bounded) for when it is.
            if self.early_votes.len() < MAX_EARLY_VOTES || self.early_votes.contains_key(&id) {
                self.early_votes.entry(id).or_default().entry(from.partition).or_insert(yes);
            }
        }
    }

    /// This group's votes on `id` and on the later transactions it shares with group `asker`.
    fn votes_from(&self, id: &McastId, asker: PartitionId) -> Vec<(McastId, bool, u64)> {
        let g = self.id.partition;
        let applied = self.data.cast_order.iter().position(|x| x == id);
        let in_queue = self.data.queue.iter().position(|q| q.id == *id);
        if applied.is_none() && in_queue.is_none() {
            return Vec::new();
        }
        let from_cast =
            self.data.cast_order.iter().skip(applied.unwrap_or(self.data.cast_order.len())).filter_map(|x| {
                let (yes, stamp, dest) = self.data.cast.get(x)?;
                dest.contains(&asker).then_some((*x, *yes, *stamp))
            });
        let from_queue = self.data.queue.iter().skip(in_queue.unwrap_or(0)).filter_map(|q| {
            let yes = q.votes.get(&g)?;
            q.dest.contains(&asker).then_some((q.id, *yes, q.stamp))
        });
        from_cast.chain(from_queue).take(MAX_VOTES_PER_ANSWER).collect()
    }

    fn on_read(
        &mut self,
        cx: &mut Cx<'_, C>,
        from: Addr,
        tag: u64,
        key: Key,
        reads: Vec<(Key, ReadAt)>,
        floor: DepVector,
    ) {
        cx.charge(1);
        let parked = Parked { from, tag, key, reads, floor, since: cx.now_ns() };
        if !self.answer_read(cx, &parked, &mut None) {
            if self.parked.len() >= MAX_PARKED_READS {
                // Full: the oldest held read gives way (its client re-sends it elsewhere).
                self.parked.remove(0);
            }
            self.parked.push(parked);
            self.arm_sweep(cx);
        }
    }

    /// Answers a read if a version its criterion allows is applied here; false if not yet. `start` caches
    /// the snapshot a first read would fix ([`JessyServer::start_snapshot`]) across the reads of one pass.
    fn answer_read(&self, cx: &mut Cx<'_, C>, read: &Parked, start: &mut Option<DepVector>) -> bool {
        // One lookup of the key's versions serves the rule and the reply.
        let versions = self.data.versions_of(&read.key);
        let Some((index, position, vector)) = self.pick(&read.key, versions, &read.reads, &read.floor, start) else {
            return false;
        };
        let Some((version, value)) = versions.get(index) else { return false };
        let skipped = u32::try_from(versions.len() - 1 - index).unwrap_or(u32::MAX);
        let at = ReadAt { group: self.id.partition, version: *version, position, vector };
        let reply = JessyMsg::ReadReply { tag: read.tag, key: read.key.clone(), value: value.clone(), at, skipped };
        cx.send(read.from, reply);
        true
    }

    /// The criterion's read rule: the version of `key` to read (its index among the group's versions of
    /// it), the position read at and the read's vector; `None` when this replica cannot answer yet.
    fn pick(
        &self,
        key: &Key,
        versions: &[(u64, Option<Value>)],
        reads: &[(Key, ReadAt)],
        floor: &DepVector,
        start: &mut Option<DepVector>,
    ) -> Option<(usize, u64, DepVector)> {
        if C::READS == ReadRule::Latest || C::READS == ReadRule::Forward && reads.is_empty() {
            // What `choose` gives without earlier reads, without its search: the newest version, at the
            // group's latest position (the version is its key's latest there).
            let (now, head) = self.data.heads.last().map_or((0, None), |(p, h)| (*p, Some(h)));
            // Without snapshot reads nothing uses the read's vector: none is shipped.
            let vector = match head {
                Some(h) if C::READS == ReadRule::Forward => h.clone(),
                _ => DepVector::zero(),
            };
            return Some((versions.len().checked_sub(1)?, now, vector));
        }
        if C::READS == ReadRule::AtStart {
            let snapshot = match reads.first() {
                // Every read of the transaction carries the one snapshot.
                Some((_, first)) => first.vector.clone(),
                None => start.get_or_insert_with(|| self.start_snapshot()).clone(),
            };
            if reads.is_empty() && !floor.le(&snapshot) {
                return None;
            }
            let position = snapshot.get(self.id.partition);
            let now = self.data.heads.last().map_or(0, |(p, _)| *p);
            if position > now {
                return None;
            }
            // The key's version at the snapshot's position (none if that was trimmed away).
            let index = versions.iter().rposition(|(v, _)| *v <= position)?;
            return Some((index, position, snapshot));
        }
        let keys: Vec<&str> = reads.iter().map(|(k, _)| &**k).collect();
        let at: Vec<ReadAt> = reads.iter().map(|(_, r)| r.clone()).collect();
        let (index, position) = choose(&self.data, key, &at, &keys)?;
        Some((index, position, self.data.head_at(position)))
    }

    fn retry_parked(&mut self, cx: &mut Cx<'_, C>) {
        let parked = std::mem::take(&mut self.parked);
        let mut start = None;
        for p in parked {
            if !self.answer_read(cx, &p, &mut start) {
                self.parked.push(p);
            }
        }
    }

    fn arm_sweep(&mut self, cx: &mut Cx<'_, C>) {
        let waiting = self.data.queue.iter().any(|q| q.outcome.is_none());
        if !self.sweep_armed && (waiting || !self.parked.is_empty()) {
            self.sweep_armed = true;
            cx.set_timer(self.retry_ns / 4, JessyTimer::Sweep);
        }
    }

    fn sweep(&mut self, cx: &mut Cx<'_, C>) {
        self.sweep_armed = false;
        let now = cx.now_ns();
        self.parked.retain(|p| now.saturating_sub(p.since) < PARKED_READ_TTL_NS);
        // Ask again for the votes of transactions that waited a retry period.
        let g = self.id.partition;
        let mut asks = Vec::new();
        for q in self.data.queue.iter().filter(|q| q.outcome.is_none() && q.votes.contains_key(&g)) {
            // Waiting since this member voted, or since the sweep first saw it (after a restart).
            let since = *self.waiting_since.entry(q.id).or_insert(now);
            if now.saturating_sub(since) < self.retry_ns {
                continue;
            }
            for d in voters(&self.topology, &q.tx).into_iter().filter(|d| *d != g && !q.votes.contains_key(d)) {
                asks.extend(self.topology.group(d).map(|s| (s, q.id)));
            }
        }
        for (s, id) in asks {
            cx.send(s, JessyMsg::VoteQuery { id });
            self.waiting_since.insert(id, now);
        }
        if C::PROPAGATES {
            // First reads waiting for what their sessions saw elsewhere: ask those groups for their heads
            // (propagation may have been lost).
            let snapshot = self.start_snapshot();
            let lagging: BTreeSet<PartitionId> = self
                .parked
                .iter()
                .filter(|p| p.reads.is_empty())
                .flat_map(|p| p.floor.entries().filter(|&(h, s)| s > snapshot.get(h)).map(|(h, _)| h))
                .filter(|&h| h != g)
                .collect();
            for h in lagging {
                for s in self.topology.group(h) {
                    cx.send(s, JessyMsg::HeadsQuery);
                }
            }
        }
        self.arm_sweep(cx);
    }

    /// A `Submit` comes from its origin (a client multicasting its own transaction) or from a member of a
    /// destination group, and carries a transaction whose writes are exactly on its destination groups.
    fn check_submit(&self, from: Addr, msg: &McastMsg) -> Result<TxPayload, (InvalidKind, String)> {
        check_submit_sender(&self.topology, self.id, from, msg)?;
        self.check_tx(msg.id, &msg.payload, &msg.dest)
    }

    /// A transaction (multicast or begun by two-phase commit) decodes, certifies reads only where its
    /// criterion does, carries stamps and vectors in range, and is addressed to exactly its destination
    /// groups.
    fn check_tx(&self, id: McastId, payload: &[u8], dest: &[PartitionId]) -> Result<TxPayload, (InvalidKind, String)> {
        let tx = postcard::from_bytes::<TxPayload>(payload)
            .map_err(|e| (InvalidKind::Malformed, format!("{id}: undecodable transaction: {e}")))?;
        if !certifies_reads::<C>(!tx.writes.is_empty()) && !tx.reads.is_empty() {
            return Err((InvalidKind::Malformed, format!("{}: {} certifies no reads here", id, C::NAME)));
        }
        if let Some((k, stamp)) = tx.reads.iter().find(|(_, stamp)| *stamp > MAX_TIMESTAMP) {
            return Err((InvalidKind::Malformed, format!("{}: a read of {k:?} at stamp {stamp}", id)));
        }
        let groups = destinations::<C>(&self.topology, &tx);
        if voters(&self.topology, &tx).is_empty() || !groups.iter().eq(dest.iter()) {
            let why = format!("{} is addressed to groups {:?}, its keys are on {groups:?}", id, dest);
            return Err((InvalidKind::Malformed, why));
        }
        check_vector(&self.topology, &tx.snapshot).map_err(|why| (InvalidKind::Malformed, why))?;
        Ok(tx)
    }

    /// Whether `msg` belongs to this member's termination (anything else is not a termination message).
    fn terminates_by(&self, msg: &JessyMsg) -> bool {
        match msg {
            JessyMsg::Mcast(_) => matches!(self.engine, Engine::Multicast(_)),
            JessyMsg::Tpc(_) => matches!(self.engine, Engine::TwoPc(_)),
            _ => true,
        }
    }

    fn check_read(&self, key: &Key, reads: &[(Key, ReadAt)]) -> Result<(), String> {
        if self.topology.partition_of(key) != self.id.partition {
            return Err(format!("key {key:?} is not on partition {}", self.id.partition));
        }
        if reads.len() > MAX_READS_CARRIED {
            return Err(format!("{} earlier reads (at most {MAX_READS_CARRIED})", reads.len()));
        }
        for (k, r) in reads {
            if self.topology.partition_of(k) != r.group {
                return Err(format!("a read of {k:?} claims group {}", r.group));
            }
            if r.version > MAX_TIMESTAMP || r.position > MAX_TIMESTAMP || r.version > r.position {
                return Err(format!("a read of {k:?} at stamps {} / {} out of range", r.version, r.position));
            }
            check_vector(&self.topology, &r.vector)?;
        }
        Ok(())
    }
}

fn check_vector(topology: &Topology, v: &DepVector) -> Result<(), String> {
    match v.entries().find(|&(g, s)| g >= topology.partitions || s > MAX_TIMESTAMP) {
        Some((g, s)) => Err(format!("a dependence vector entry {g}: {s} is out of range")),
        None => Ok(()),
    }
}

impl<C: Criterion> ServerNode<Jessy<C>> for JessyServer<C> {
    fn on_start(&mut self, cx: &mut Cx<'_, C>) {
        self.sweep_armed = false;
        match &mut self.engine {
            Engine::Multicast(member) => {
                let events = member.start(cx);
                self.handle(cx, events);
            }
            Engine::TwoPc(_) => {
                self.with_tpc(cx, |m, cx, host| m.start(cx, host));
            }
        }
    }

    fn on_message(&mut self, cx: &mut Cx<'_, C>, from: Addr, msg: JessyMsg) -> Result<(), InvalidInput> {
        let kind = msg.kind();
        let refuse = |k: InvalidKind, why: String| InvalidInput::new(k, kind, from, why);
        let malformed = |why: String| refuse(InvalidKind::Malformed, why);
        let other_group = |s: ServerId| self.topology.contains(s) && s.partition != self.id.partition;
        if !self.terminates_by(&msg) {
            let mine = if matches!(self.engine, Engine::TwoPc(_)) { "2pc" } else { "multicast" };
            return Err(refuse(InvalidKind::Malformed, format!("this cluster terminates by {mine}")));
        }
        match (from, msg) {
            (Addr::Server(server), JessyMsg::Raft(wire)) => match &mut self.engine {
                Engine::Multicast(member) => {
                    let events = member.on_raft(cx, server, wire).map_err(malformed)?;
                    self.handle(cx, events);
                }
                Engine::TwoPc(_) => {
                    self.with_tpc(cx, |m, cx, host| m.on_raft(cx, server, wire, host))
                        .unwrap_or(Ok(()))
                        .map_err(malformed)?;
                }
            },
            (_, JessyMsg::Tpc(TpcWire::Begin { id, participants, payload })) => {
                let tx = self.check_tx(id, &payload, &participants).map_err(|(k, why)| refuse(k, why))?;
                self.check_limits(cx.now_ns(), from, kind, &tx.writes, tx.reads.iter().map(|(k, _)| k))?;
                let wire = TpcWire::Begin { id, participants, payload };
                self.with_tpc(cx, |m, cx, host| m.on_wire(cx, from, wire, host))
                    .unwrap_or(Ok(()))
                    .map_err(malformed)?;
            }
            (_, JessyMsg::Tpc(TpcWire::Outcome { .. })) => {
                return Err(refuse(InvalidKind::Sender, "only origins are sent outcomes".into()));
            }
            (Addr::Server(s), JessyMsg::Tpc(wire)) if other_group(s) => {
                // Votes and decisions travel between a transaction's groups; the component checks them
                // against what is prepared here.
                self.with_tpc(cx, |m, cx, host| m.on_wire(cx, from, wire, host))
                    .unwrap_or(Ok(()))
                    .map_err(malformed)?;
            }
            (_, JessyMsg::Mcast(McastWire::Submit(msg))) => {
                let tx = self.check_submit(from, &msg).map_err(|(k, why)| refuse(k, why))?;
                self.check_limits(cx.now_ns(), from, kind, &tx.writes, tx.reads.iter().map(|(k, _)| k))?;
                if let Some((yes, stamp)) = self.data.vote_of(&msg.id) {
                    // Voted already: the coordinator lost the vote; send it again.
                    cx.send(msg.id.origin, JessyMsg::Vote { id: msg.id, yes, stamp });
                    return Ok(());
                }
                let Engine::Multicast(member) = &mut self.engine else { return Ok(()) };
                let events = member.on_wire(cx, from, McastWire::Submit(msg)).map_err(malformed)?;
                self.handle(cx, events);
            }
            (Addr::Server(s), JessyMsg::Mcast(wire)) if other_group(s) => {
                let Engine::Multicast(member) = &mut self.engine else { return Ok(()) };
                let events = member.on_wire(cx, from, wire).map_err(malformed)?;
                self.handle(cx, events);
            }
            (Addr::Client(_), JessyMsg::Read { tag, key, reads, floor }) => {
                let read_keys = std::iter::once(&key).chain(reads.iter().map(|(k, _)| k));
                self.check_limits(cx.now_ns(), from, kind, &[], read_keys)?;
                self.check_read(&key, &reads).map_err(malformed)?;
                check_vector(&self.topology, &floor).map_err(malformed)?;
                self.on_read(cx, from, tag, key, reads, floor);
            }
            (Addr::Server(s), JessyMsg::Heads { heads }) if other_group(s) && C::PROPAGATES => {
                if heads.len() > MAX_HEADS_PER_MESSAGE {
                    return Err(malformed(format!("{} heads in one message", heads.len())));
                }
                for (position, head) in &heads {
                    if *position > MAX_TIMESTAMP {
                        return Err(malformed(format!("a head at position {position}")));
                    }
                    check_vector(&self.topology, head).map_err(malformed)?;
                }
                self.learn_heads(s.partition, heads);
                self.retry_parked(cx);
            }
            (Addr::Server(s), JessyMsg::HeadsQuery) if other_group(s) && C::PROPAGATES => {
                let heads = &self.data.heads;
                let latest = heads[heads.len().saturating_sub(HEADS_PER_ANSWER)..].to_vec();
                cx.send(s, JessyMsg::Heads { heads: latest });
            }
            (Addr::Server(s), JessyMsg::Vote { id, yes, stamp }) if other_group(s) => {
                if stamp > MAX_TIMESTAMP {
                    return Err(malformed(format!("a vote on {id} at stamp {stamp}")));
                }
                self.record_vote(s, id, yes);
                self.progress(cx);
            }
            (Addr::Server(s), JessyMsg::Votes { votes }) if other_group(s) => {
                if votes.len() > MAX_VOTES_PER_ANSWER {
                    return Err(malformed(format!("{} votes in one answer", votes.len())));
                }
                if let Some((id, _, stamp)) = votes.iter().find(|(_, _, stamp)| *stamp > MAX_TIMESTAMP) {
                    return Err(malformed(format!("a vote on {id} at stamp {stamp}")));
                }
                for (id, yes, _) in votes {
                    self.record_vote(s, id, yes);
                }
                self.progress(cx);
            }
            (Addr::Server(s), JessyMsg::VoteQuery { id }) if other_group(s) => {
                let votes = self.votes_from(&id, s.partition);
                if !votes.is_empty() {
                    cx.send(s, JessyMsg::Votes { votes });
                }
            }
            (_, msg) => {
                let why = match msg {
                    JessyMsg::ReadReply { .. } => "only clients are sent read replies".to_string(),
                    JessyMsg::Read { .. } => "only clients read".to_string(),
                    JessyMsg::Heads { .. } | JessyMsg::HeadsQuery if !C::PROPAGATES => {
                        format!("{} propagates no heads", C::NAME)
                    }
                    _ => format!(
                        "{from} may not send this (raft within a group; multicast steps, votes and queries between groups)"
                    ),
                };
                return Err(refuse(InvalidKind::Sender, why));
            }
        }
        Ok(())
    }

    fn on_timer(&mut self, cx: &mut Cx<'_, C>, timer: JessyTimer) {
        let events = match (&mut self.engine, timer) {
            (_, JessyTimer::Sweep) => return self.sweep(cx),
            (Engine::Multicast(member), JessyTimer::Raft(_)) => member.on_raft_tick(cx),
            (Engine::Multicast(member), JessyTimer::Mcast(_)) => member.on_tick(cx),
            (Engine::TwoPc(_), JessyTimer::Raft(_)) => {
                self.with_tpc(cx, |m, cx, host| m.on_raft_tick(cx, host));
                return;
            }
            (Engine::TwoPc(_), JessyTimer::Tpc(_)) => {
                self.with_tpc(cx, |m, cx, host| m.on_tick(cx, host));
                return;
            }
            _ => return,
        };
        self.handle(cx, events);
    }

    fn leads(&self) -> Option<u64> {
        match &self.engine {
            Engine::Multicast(m) => m.is_leader().then(|| m.raft().term()),
            Engine::TwoPc(m) => m.is_leader().then(|| m.raft().term()),
        }
    }

    fn apply_change(&mut self, change: &[u8]) -> Result<(), String> {
        match &mut self.engine {
            Engine::Multicast(m) => m.apply_change(change),
            Engine::TwoPc(m) => m.apply_change(change),
        }
    }

    fn stored_versions(&self) -> usize {
        self.data.versions.values().map(Vec::len).sum()
    }
}

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
