//! [`MemLog`]: the in-memory twin of [`Log`](crate::Log), for the simulator.

use crate::{Checkpoint, Lsn, Record, RecordLog, Recovered, StorageError};

/// A [`RecordLog`] kept in memory with the same semantics as [`Log`](crate::Log) under a durable policy:
/// committed records and checkpoints survive [`crash`](MemLog::crash), appended-but-uncommitted ones do not.
/// Its operations never fail.
///
/// By default [`start_commit`](RecordLog::start_commit) commits at once. In
/// [`with_background`](MemLog::with_background) mode it stands for a commit whose fsync takes time: the records go in
/// flight, [`poll_commit`](RecordLog::poll_commit) ends the commit (the simulator calls it when the fsync's
/// virtual time has passed), and a crash before then loses them, as a crash during a real fsync may.
#[derive(Clone, Debug, Default)]
pub struct MemLog {
    durable: Vec<Record>,
    checkpoint: Option<Checkpoint>,
    pending: Vec<Record>,
    /// The records of the background commit under way.
    in_flight: Vec<Record>,
    background: bool,
    last: Lsn,
    /// A full disk, as [`RecordLog::disk_full`] reports it (set by tests; commits still succeed, as a log
    /// writing into its space reserve does).
    full: bool,
}

impl MemLog {
    /// An empty log.
    pub fn new() -> MemLog {
        MemLog::default()
    }

    /// The same log, whose background commits take until [`poll_commit`](RecordLog::poll_commit) if
    /// `background` (type docs), or commit at once.
    pub fn with_background(self, background: bool) -> MemLog {
        MemLog { background, ..self }
    }

    /// Report the disk full (or not) from now on: what a [`Log`](crate::Log) reports once it has given up
    /// its space reserve (tests of what a host refuses on a full disk).
    pub fn set_disk_full(&mut self, full: bool) {
        self.full = full;
    }

    /// Records appended but not durable (pending, or in the background commit under way): what a crash now
    /// would lose.
    pub fn not_durable(&self) -> usize {
        self.pending.len() + self.in_flight.len()
    }

    /// Simulates a crash and restart: drops every record appended since the last commit, the background
    /// commit's included (their LSNs will be handed out again, as after a real restart), and returns what
    /// [`Log::open`](crate::Log::open) would.
    pub fn crash(&mut self) -> Recovered {
        self.pending.clear();
        self.in_flight.clear();
        self.last = self.durable_lsn();
        self.recovered()
    }

    /// What recovery would return now: the latest checkpoint and the committed records after it.
    pub fn recovered(&self) -> Recovered {
        let after = self.checkpoint.as_ref().map_or(Lsn::ZERO, |c| c.lsn);
        Recovered {
            checkpoint: self.checkpoint.clone(),
            records: self.durable.iter().filter(|r| r.lsn > after).cloned().collect(),
        }
    }

    /// How many committed records are kept (checkpoint-covered ones included until truncated).
    pub fn stored_records(&self) -> u64 {
        self.durable.len() as u64
    }
}

impl RecordLog for MemLog {
    fn disk_full(&self) -> bool {
        self.full
    }

    fn append(&mut self, record: &[u8]) -> Lsn {
        self.last = self.last.next();
        self.pending.push(Record { lsn: self.last, payload: record.to_vec() });
        self.last
    }

    fn commit(&mut self) -> Result<Lsn, StorageError> {
        self.durable.append(&mut self.in_flight);
        self.durable.append(&mut self.pending);
        Ok(self.durable_lsn())
    }

    fn checkpoint(&mut self, state: &[u8]) -> Result<Lsn, StorageError> {
        self.commit()?;
        self.checkpoint = Some(Checkpoint { lsn: self.last, state: state.to_vec() });
        Ok(self.last)
    }

    fn truncate_before(&mut self, lsn: Lsn) -> Result<u64, StorageError> {
        let covered = self.checkpoint.as_ref().map_or(Lsn::ZERO, |c| c.lsn);
        let below = lsn.min(covered.next());
        let before = self.durable.len();
        self.durable.retain(|r| r.lsn >= below);
        Ok((before - self.durable.len()) as u64)
    }

    fn last_lsn(&self) -> Lsn {
        self.last
    }

    fn durable_lsn(&self) -> Lsn {
        self.durable.last().map(|r| r.lsn).or(self.checkpoint.as_ref().map(|c| c.lsn)).unwrap_or(Lsn::ZERO)
    }

    fn pending(&self) -> usize {
        self.pending.len()
    }

    fn start_commit(&mut self) -> Result<(), StorageError> {
        if !self.background {
            return self.commit().map(|_| ());
        }
        if self.in_flight.is_empty() {
            self.in_flight = std::mem::take(&mut self.pending);
        }
        Ok(())
    }

    fn committing(&self) -> bool {
        !self.in_flight.is_empty()
    }

    fn poll_commit(&mut self) -> Result<Lsn, StorageError> {
        self.durable.append(&mut self.in_flight);
        Ok(self.durable_lsn())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crash_drops_exactly_the_uncommitted_records() {
        let mut log = MemLog::new();
        assert_eq!(log.append(b"a"), Lsn(1));
        assert_eq!(log.append(b"b"), Lsn(2));
        assert_eq!(log.commit().unwrap(), Lsn(2));
        assert_eq!(log.append(b"c"), Lsn(3));
        assert_eq!(log.pending(), 1);
        let rec = log.crash();
        assert_eq!(rec.checkpoint, None);
        let payloads: Vec<_> = rec.records.iter().map(|r| (r.lsn, r.payload.as_slice())).collect();
        assert_eq!(payloads, [(Lsn(1), &b"a"[..]), (Lsn(2), &b"b"[..])]);
        assert_eq!(log.pending(), 0);
        // After the crash the lost LSN is handed out again, as after reopening a real log.
        assert_eq!(log.append(b"c2"), Lsn(3));
        log.commit().unwrap();
        assert_eq!(log.crash().records.len(), 3);
    }

    #[test]
    fn a_background_commit_is_durable_once_polled_and_lost_in_a_crash_before() {
        let mut log = MemLog::new().with_background(true);
        log.append(b"a");
        log.start_commit().unwrap();
        assert!(log.committing());
        log.append(b"b");
        assert_eq!((log.durable_lsn(), log.pending()), (Lsn::ZERO, 1));
        assert_eq!(log.poll_commit().unwrap(), Lsn(1));
        assert!(!log.committing());
        log.start_commit().unwrap();
        // The crash comes before the fsync of "b" ends.
        let rec = log.crash();
        assert_eq!(rec.records, [Record { lsn: Lsn(1), payload: b"a".to_vec() }]);
        assert_eq!(log.append(b"b2"), Lsn(2));
    }

    #[test]
    fn checkpoint_and_truncation() {
        let mut log = MemLog::new();
        for i in 0..10u8 {
            log.append(&[i]);
        }
        assert_eq!(log.checkpoint(b"s10").unwrap(), Lsn(10));
        log.append(b"x");
        log.commit().unwrap();
        // Asking to drop more than the checkpoint covers drops only what it covers.
        assert_eq!(log.truncate_before(Lsn(100)).unwrap(), 10);
        assert_eq!(log.stored_records(), 1);
        let rec = log.crash();
        assert_eq!(rec.checkpoint, Some(Checkpoint { lsn: Lsn(10), state: b"s10".to_vec() }));
        assert_eq!(rec.records, [Record { lsn: Lsn(11), payload: b"x".to_vec() }]);
        assert_eq!(rec.last_lsn(), Lsn(11));
    }
}
