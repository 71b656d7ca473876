//! The wire: an update transaction's payload ([`TxPayload`]), the messages and the timers.

use crate::components::consensus::{RaftTick, RaftWire};
use crate::components::multicast::{McastId, McastRetry, McastTick, McastWire};
use crate::components::twopc::{TpcRetry, TpcTick, TpcWire};
use crate::strong::dependence::{DepVector, ReadAt};
use serde::{Deserialize, Serialize};
use snowline_core::{Addr, Key, Message, Value};

/// What an update transaction multicasts: its snapshot and its writes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TxPayload {
    pub snapshot: DepVector,
    pub writes: Vec<(Key, Value)>,
    /// With [`Criterion::CERTIFIES_READS`]: each key read and the stamp of the version read.
    ///
    /// [`Criterion::CERTIFIES_READS`]: super::Criterion::CERTIFIES_READS
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
    ///
    /// [`MAX_VOTES_PER_ANSWER`]: super::MAX_VOTES_PER_ANSWER
    Votes {
        votes: Vec<(McastId, bool, u64)>,
    },
    /// With propagation (`psi`): heads the sender's group applied, `(position, head)`, at most
    /// [`MAX_HEADS_PER_MESSAGE`].
    ///
    /// [`MAX_HEADS_PER_MESSAGE`]: super::MAX_HEADS_PER_MESSAGE
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
