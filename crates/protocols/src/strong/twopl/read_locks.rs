//! The RAMP paper's locking baselines (Bailis et al., SIGMOD 2014, §5): long write locks with short read
//! locks (`--protocol lwsr`) and long write locks with no read locks (`--protocol lwnr`). Its third, long
//! read and write locks (LWLR), is [`super`]'s `2pl`; its fourth, no locks at all (NWNR), is `nocc`.
//!
//! Everything but the reads is 2PL's: a commit's writes take exclusive locks at its prepare (waiting, with
//! wound-wait against deadlocks), held until the two-phase commit's decision is applied, and a stored
//! procedure's wave locks the keys it writes exclusively from its round to the decision. What differs is how
//! long a read holds its shared lock ([`ReadLocks`]):
//!
//! - **lwsr**: a read takes shared locks as 2PL's does — it waits behind an exclusive holder, and wounds a
//!   younger unprepared one — and releases them as soon as it is answered. A partition forgets a transaction
//!   that then holds nothing, so a read-only transaction leaves nothing behind and commits at the client at
//!   once (no release round, no confirmation).
//! - **lwnr**: a read locks nothing and never waits: it returns each key's committed value.
//!
//! The client counts as holding locks at a partition only where it locked a key exclusively (a stored
//! procedure's round), so only those partitions are released and take part in the commit as `held`.
//!
//! # Why they claim read committed (`rc`), and nothing stronger
//!
//! A partition's store holds only committed values (2PL applies writes when the decision arrives), and a
//! transaction's writes are all applied with one commit version, so every read returns a committed write,
//! never an aborted or intermediate one: `rc` holds for both. Nothing stronger that the checker knows does:
//!
//! - not `ra` (nor the causal levels above it): no lock keeps what a transaction read current while it reads
//!   elsewhere, so a read-only transaction can read `x` before a commit of `x` and `y` and `y` after it (a
//!   fractured read), or read a key twice with two values (a non-repeatable read);
//! - not `ser` (nor any graph level): two read-modify-write transactions can both read a key's version and
//!   both commit a write of it (a lost update), since the first read lock is gone (or never was) when the
//!   second writer's exclusive lock is granted.
//!
//! lwsr is stronger than lwnr only in ways the checker's levels do not name: a read waits for a prepared
//! writer's decision, so it never returns a value a completed commit has overwritten (lwnr can, at a
//! partition the decision has not reached yet).

use super::*;

/// How long a locking protocol of this module holds a read's shared locks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReadLocks {
    /// Until the transaction's decision (or abort): strict two-phase locking (`2pl`).
    Long,
    /// Until the read is answered (`lwsr`).
    Short,
    /// Reads lock nothing (`lwnr`).
    Never,
}

impl Control {
    /// How long reads hold their locks; `None` for a control that does not lock reads until it validates.
    pub const fn read_locks(self) -> Option<ReadLocks> {
        match self {
            Control::Locking(reads) => Some(reads),
            Control::Validation => None,
        }
    }

    /// Whether read locks last as long as the transaction (2PL): its read-only commits release them.
    pub const fn long_read_locks(self) -> bool {
        matches!(self.read_locks(), Some(ReadLocks::Long))
    }
}

/// Long write locks, short read locks: [`Control::Locking`] with [`ReadLocks::Short`].
pub struct ShortReads;

impl ConcurrencyControl for ShortReads {
    const NAME: &'static str = "lwsr";
    const CONTROL: Control = Control::Locking(ReadLocks::Short);
}

/// Long write locks, no read locks: [`Control::Locking`] with [`ReadLocks::Never`].
pub struct NoReadLocks;

impl ConcurrencyControl for NoReadLocks {
    const NAME: &'static str = "lwnr";
    const CONTROL: Control = Control::Locking(ReadLocks::Never);
}

/// Long write locks and short read locks with two-phase commit. See the module docs.
pub type Lwsr = SingleCopy<ShortReads>;
/// Long write locks and no read locks with two-phase commit. See the module docs.
pub type Lwnr = SingleCopy<NoReadLocks>;

impl<C: ConcurrencyControl> TwoPlServer<C> {
    /// Reads lock nothing (`lwnr`).
    pub(super) const UNLOCKED_READS: bool = matches!(C::CONTROL.read_locks(), Some(ReadLocks::Never));

    /// The keys a read request locks: the keys read shared, unless reads lock nothing, and `exclusive`.
    pub(super) fn read_locks_wanted(keys: &[Key], exclusive: Vec<Key>) -> BTreeMap<Key, Mode> {
        let shared = if Self::UNLOCKED_READS { &[][..] } else { keys };
        let mut wanted: BTreeMap<Key, Mode> = shared.iter().map(|k| (k.clone(), Mode::Shared)).collect();
        wanted.extend(exclusive.into_iter().map(|k| (k, Mode::Exclusive)));
        wanted
    }

    /// lwnr's read of a transaction that holds nothing here and locks nothing: the committed values, at once,
    /// and nothing remembered.
    pub(super) fn read_unlocked(&mut self, cx: &mut Cx<'_, C>, client: ClientId, txn: TxnId, keys: Vec<Key>) {
        let results = keys.into_iter().map(|k| self.read(k)).collect();
        cx.send(client, TwoPlMsg::ReadReply { txn, result: Ok(results), blocked_ns: 0 });
    }

    /// After `txn`'s read is answered: unless read locks are long, release its shared locks, and forget the
    /// transaction if it then holds nothing here.
    pub(super) fn end_short_reads(&mut self, cx: &mut Cx<'_, C>, txn: TxnId) {
        if C::CONTROL.long_read_locks() {
            return;
        }
        let Some(t) = self.txns.get_mut(&txn) else { return };
        let shared: BTreeSet<Key> =
            t.locks.iter().filter(|(_, m)| **m == Mode::Shared).map(|(k, _)| k.clone()).collect();
        for key in &shared {
            t.locks.remove(key);
            if let Some(lock) = self.locks.get_mut(key) {
                lock.holders.remove(&txn);
            }
        }
        if t.locks.is_empty() && t.prepared.is_none() && t.pending.is_none() {
            self.txns.remove(&txn);
        }
        self.pump(cx, shared);
    }
}

impl<C: ConcurrencyControl> TwoPlClient<C> {
    /// Whether a read round's request to a partition makes it one where the transaction holds something
    /// until it ends (its `contacted`: released on abort, `held` at commit): always, except with short or no
    /// read locks, where only an exclusive lock (a stored procedure's round) does.
    pub(super) fn holds_after(exclusive: &[Key]) -> bool {
        !matches!(C::CONTROL, Control::Locking(ReadLocks::Short | ReadLocks::Never)) || !exclusive.is_empty()
    }

    /// Whether a read-only commit must release read locks (and confirm they were held together): 2PL's.
    pub(super) const RELEASES_READS: bool = C::CONTROL.long_read_locks();
}
