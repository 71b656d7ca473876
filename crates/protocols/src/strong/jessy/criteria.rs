//! The [`Criterion`] trait, the six criteria, and which groups vote on and receive a transaction.

use super::TxPayload;
use crate::strong::dependence::{DepVector, depends_on};
use snowline_core::{Offers, PartitionId, Topology};
use std::collections::BTreeSet;

/// How a criterion's reads pick their versions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReadRule {
    /// The newest version the replica applied (no snapshot: `rc`, and `ser`, whose certification checks).
    Latest,
    /// The newest version compatible with the transaction's earlier reads
    /// ([`crate::strong::dependence::choose`]): a consistent snapshot with forward freshness (`nmsi`, `us`).
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

/// The groups that certify a transaction and vote on it: those of the keys it writes, and of the keys it
/// read where its reads are certified (its payload carries them only then).
pub(super) fn voters(topology: &Topology, tx: &TxPayload) -> BTreeSet<PartitionId> {
    voter_groups(topology, tx).collect()
}

/// [`voters`] as they come, one per key (a group may repeat): for `any`/`all` tests, without a set.
pub(super) fn voter_groups<'a>(topology: &'a Topology, tx: &'a TxPayload) -> impl Iterator<Item = PartitionId> + 'a {
    let keys = tx.writes.iter().map(|(k, _)| k).chain(tx.reads.iter().map(|(k, _)| k));
    keys.map(|k| topology.partition_of(k))
}

/// Whether group `g` is among the transaction's [`voters`].
pub(super) fn is_voter(topology: &Topology, tx: &TxPayload, g: PartitionId) -> bool {
    voter_groups(topology, tx).any(|d| d == g)
}

/// The groups a transaction is delivered to: its voters, or every group (non-genuine criteria).
pub(super) fn destinations<C: Criterion>(topology: &Topology, tx: &TxPayload) -> BTreeSet<PartitionId> {
    if C::DELIVERS_TO_ALL { (0..topology.partitions).collect() } else { voters(topology, tx) }
}

/// Whether a transaction's reads are certified (and travel with it).
pub(super) fn certifies_reads<C: Criterion>(writes: bool) -> bool {
    match C::CERTIFIES_READS {
        ReadCertification::Never => false,
        ReadCertification::Updates => writes,
        ReadCertification::All => true,
    }
}
