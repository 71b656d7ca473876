//! Types shared by [`Log`](crate::Log) and [`MemLog`](crate::MemLog), and the on-disk record framing.

use std::fmt;

use crate::StorageError;

/// Log sequence number: the position of a record in its server's log. The first record is `Lsn(1)`;
/// `Lsn(0)` ([`Lsn::ZERO`]) means "nothing". Numbers are never reused, even after truncation.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Lsn(pub u64);

impl Lsn {
    /// Before the first record.
    pub const ZERO: Lsn = Lsn(0);

    /// The next number.
    pub fn next(self) -> Lsn {
        Lsn(self.0 + 1)
    }
}

impl fmt::Display for Lsn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// One recovered record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    /// Its position.
    pub lsn: Lsn,
    /// The caller's opaque bytes.
    pub payload: Vec<u8>,
}

/// A snapshot of the caller's state that makes every record up to and including `lsn` unnecessary.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Checkpoint {
    /// The last record the state includes.
    pub lsn: Lsn,
    /// The caller's opaque state.
    pub state: Vec<u8>,
}

/// What a restarting server replays: the latest checkpoint, then every durable record after it, in order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Recovered {
    /// The latest durable checkpoint, if any.
    pub checkpoint: Option<Checkpoint>,
    /// The records after the checkpoint (after `Lsn::ZERO` without one), in order, without gaps.
    pub records: Vec<Record>,
}

impl Recovered {
    /// The last LSN recovery covers (the checkpoint's or the last record's); the next append gets the one after.
    pub fn last_lsn(&self) -> Lsn {
        self.records.last().map(|r| r.lsn).or(self.checkpoint.as_ref().map(|c| c.lsn)).unwrap_or(Lsn::ZERO)
    }
}

/// The operations shared by the on-disk [`Log`](crate::Log) and the in-memory [`MemLog`](crate::MemLog),
/// so a server can be written once against either.
pub trait RecordLog {
    /// Buffers a record in memory and returns its LSN. Nothing reaches the disk until
    /// [`commit`](RecordLog::commit).
    fn append(&mut self, record: &[u8]) -> Lsn;
    /// Makes every record appended so far durable (per the policy) and returns the last LSN committed
    /// ([`Lsn::ZERO`] if there has never been a record).
    fn commit(&mut self) -> Result<Lsn, StorageError>;
    /// Commits pending records together with `state`, a snapshot that includes every record appended so
    /// far, and returns the LSN it covers. Later recoveries start from it.
    fn checkpoint(&mut self, state: &[u8]) -> Result<Lsn, StorageError>;
    /// Drops the durable records before `lsn` that the latest checkpoint covers (never one it does not
    /// cover), and returns how many were dropped. Pending records stay pending: this is not a commit.
    fn truncate_before(&mut self, lsn: Lsn) -> Result<u64, StorageError>;
    /// The LSN the next append will get, minus one.
    fn last_lsn(&self) -> Lsn;
    /// The last durably committed LSN.
    fn durable_lsn(&self) -> Lsn;
    /// The disk is full (a write failed for lack of space, or the space reserve could not be restored):
    /// the host refuses client writes until [`reclaim_space`](RecordLog::reclaim_space) says otherwise.
    fn disk_full(&self) -> bool {
        false
    }
    /// While the disk is full: try to restore the space reserve; `true` once it is (writes may resume).
    fn reclaim_space(&mut self) -> bool {
        !self.disk_full()
    }
    /// How many records are appended but not committed (nor being committed in the background).
    fn pending(&self) -> usize;
    /// Starts making every record appended so far durable without waiting for it: [`poll_commit`] tells
    /// when it is done. At most one background commit runs at a time (a call while one runs does nothing);
    /// by default the commit is made at once.
    ///
    /// [`poll_commit`]: RecordLog::poll_commit
    fn start_commit(&mut self) -> Result<(), StorageError> {
        self.commit().map(|_| ())
    }
    /// Whether a background commit is under way.
    fn committing(&self) -> bool {
        false
    }
    /// Finishes the background commit if it is done, and returns the last durable LSN. Its error is the
    /// commit's error ([`commit`](RecordLog::commit)'s rules apply).
    fn poll_commit(&mut self) -> Result<Lsn, StorageError> {
        Ok(self.durable_lsn())
    }
}

/// On-disk checkpoint value: CRC-32 of the rest, the covered LSN (8 bytes little endian), the state.
pub(crate) fn encode_checkpoint(lsn: Lsn, state: &[u8]) -> Vec<u8> {
    let mut body = Vec::with_capacity(12 + state.len());
    body.extend_from_slice(&[0; 4]);
    body.extend_from_slice(&lsn.0.to_le_bytes());
    body.extend_from_slice(state);
    let crc = crc32fast::hash(&body[4..]);
    body[..4].copy_from_slice(&crc.to_le_bytes());
    body
}

/// Checks and splits the framing of [`encode_checkpoint`]; `None` if it does not verify.
pub(crate) fn decode_checkpoint(value: &[u8]) -> Option<Checkpoint> {
    let (crc, rest) = value.split_first_chunk::<4>()?;
    if u32::from_le_bytes(*crc) != crc32fast::hash(rest) {
        return None;
    }
    let (lsn, state) = rest.split_first_chunk::<8>()?;
    Some(Checkpoint { lsn: Lsn(u64::from_le_bytes(*lsn)), state: state.to_vec() })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checkpoint_framing_detects_changes() {
        let c = encode_checkpoint(Lsn(9), b"state");
        assert_eq!(decode_checkpoint(&c), Some(Checkpoint { lsn: Lsn(9), state: b"state".to_vec() }));
        let mut bad = c.clone();
        bad[6] ^= 1;
        assert_eq!(decode_checkpoint(&bad), None);
    }
}
