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

mod client;
mod criteria;
mod group;
mod messages;
mod multicast;
mod reads;
mod server;
mod tpc;

pub use client::JessyClient;
pub use criteria::{
    Criterion, NmsiCriterion, PsiCriterion, RcCriterion, ReadCertification, ReadRule, SerCriterion, SiCriterion,
    UsCriterion,
};
pub use messages::{JessyMsg, JessyTimer, TxPayload};
pub use server::JessyServer;

use crate::components::multicast::McastParams;
use snowline_core::{
    ClientId, Ctx, DcId, Durability, LinkAssumptions, Offers, Protocol, ProtocolConfig, ServerId, Topology,
};
use std::marker::PhantomData;

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

type Cx<'a, C> = Ctx<'a, Jessy<C>>;
