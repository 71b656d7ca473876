//! [`Log`]: the redb-backed record log of one server.

use std::fs;
use std::panic::{self, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::mpsc;

use redb::{Database, Durability, ReadableDatabase, ReadableTable, ReadableTableMetadata, TableDefinition, TableError};

use crate::record::{decode_checkpoint, decode_record, encode_checkpoint, encode_record};
use crate::{Checkpoint, FsyncPolicy, Lsn, Record, RecordLog, Recovered, StorageError};

/// Name of the data file inside the data directory.
pub const LOG_FILE: &str = "log.redb";
/// Name of the space reserve inside the data directory: a file of [`DISK_RESERVE_BYTES`] zeros, given up
/// when the disk fills so that what was already handled can still be made durable.
pub const RESERVE_FILE: &str = "reserve";
/// Bytes of disk a log keeps in reserve (about 50,000 small records).
pub const DISK_RESERVE_BYTES: u64 = 8 << 20;

/// LSN → checksummed record (see `record::encode_record`).
const RECORDS: TableDefinition<u64, &[u8]> = TableDefinition::new("records");
/// Key 0 → the latest checkpoint (see `record::encode_checkpoint`).
const CHECKPOINT: TableDefinition<u64, &[u8]> = TableDefinition::new("checkpoint");
const CHECKPOINT_KEY: u64 = 0;

/// The durable log of opaque records of one server, in `<dir>/log.redb`.
///
/// One `Log` per data directory (redb takes a file lock; a second open gets [`StorageError::InUse`]).
/// Appends are buffered in memory; [`commit`](RecordLog::commit) writes them all in one redb write transaction
/// — with `Durability::Immediate` (an fsync before it returns) unless the policy is [`FsyncPolicy::None`].
///
/// Dropping a `Log` loses the records appended since the last commit, exactly as a crash would; call
/// [`close`](Log::close) to commit them first. After any failed write the log is poisoned (whether the
/// write reached the disk is unknown) and every later write returns [`StorageError::Poisoned`]: drop it
/// and [`open`](Log::open) the directory again.
///
/// A full disk is not a failed write: redb's transaction did not commit, so nothing committed is harmed
/// and the pending records are kept. The log reopens the file (redb latches an I/O error), gives up its
/// space reserve ([`RESERVE_FILE`]) and writes them again; from then on it reports
/// [`disk_full`](RecordLog::disk_full) (its host refuses client writes, while reads and the records of
/// what was already accepted use the reserve) until [`reclaim_space`](RecordLog::reclaim_space) manages to
/// restore the reserve, i.e. until space has been freed. A write that still finds no space returns
/// [`StorageError::DiskFull`] and keeps its records for the next commit.
pub struct Log {
    /// Always `Some` until `Drop` takes it to close it under a panic guard (shared with a background commit).
    db: Option<Arc<Database>>,
    file: PathBuf,
    policy: FsyncPolicy,
    pending: Vec<Record>,
    /// Last LSN handed out by `append`.
    last: Lsn,
    /// Last LSN committed.
    committed: Lsn,
    /// LSN covered by the latest committed checkpoint.
    checkpoint: Lsn,
    /// Lowest LSN still stored (`committed + 1` when none is).
    first_stored: Lsn,
    poisoned: bool,
    /// The space reserve file.
    reserve: PathBuf,
    /// The disk filled up and the reserve has not been restored since.
    full: bool,
    stats: LogStats,
    /// The last LSN of the background commit under way (`start_commit`).
    in_flight: Option<Lsn>,
    /// Called by a background commit when it is done (the runtime wakes its event loop).
    waker: Option<Arc<dyn Fn() + Send + Sync>>,
    /// The thread that runs background commits (started by the first): batches in, outcomes out.
    committer: Option<(mpsc::Sender<Job>, mpsc::Receiver<Outcome>)>,
}

/// A batch for the commit thread.
struct Job {
    db: Arc<Database>,
    file: PathBuf,
    durable: bool,
    records: Vec<Record>,
    waker: Option<Arc<dyn Fn() + Send + Sync>>,
}

/// A batch's records come back with its outcome.
type Outcome = (Vec<Record>, Result<(), StorageError>);

impl Job {
    fn run(self, outcomes: &mpsc::Sender<Outcome>) {
        let result = guarded(&self.file, || {
            Txn { db: &self.db, file: &self.file, durable: self.durable }.write(&self.records, None, None)
        });
        drop(self.db);
        let _ = outcomes.send((self.records, result));
        if let Some(wake) = self.waker {
            wake();
        }
    }
}

/// What a [`Log`] has done since it was opened (for the server's metrics): plain counters, read on scrape.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LogStats {
    /// Records appended.
    pub records: u64,
    /// Payload bytes of those records.
    pub bytes: u64,
    /// Write transactions committed: pending records, a checkpoint, or a truncation.
    pub commits: u64,
    /// Those of `commits` made durable with an fsync (all of them unless the policy is `none`).
    pub fsyncs: u64,
    /// Checkpoints written.
    pub checkpoints: u64,
}

impl Log {
    /// Opens (creating it if needed) the log in `dir` with the default, safe policy
    /// ([`FsyncPolicy::PerWrite`]), and returns what a restarting server must replay.
    pub fn open(dir: impl AsRef<Path>) -> Result<(Log, Recovered), StorageError> {
        Log::open_with(dir, FsyncPolicy::default())
    }

    /// Opens (creating it if needed) the log in `dir` with `policy`, and returns the latest checkpoint and
    /// every committed record after it, in order. A damaged file gives [`StorageError::Corrupted`] naming it;
    /// nothing is written to a file that failed to recover.
    pub fn open_with(dir: impl AsRef<Path>, policy: FsyncPolicy) -> Result<(Log, Recovered), StorageError> {
        let dir = dir.as_ref();
        fs::create_dir_all(dir).map_err(|source| StorageError::Directory { dir: dir.to_path_buf(), source })?;
        let file = dir.join(LOG_FILE);
        // redb reports damage it finds as errors; this guard makes sure a check it makes with an assertion
        // cannot take the server down with a panic instead of a message naming the file.
        let (mut log, recovered) = guarded(&file, || Log::open_file(&file, policy))?;
        log.reserve = dir.join(RESERVE_FILE);
        log.full = !restore_reserve(&log.reserve)
            .map_err(|source| StorageError::Directory { dir: dir.to_path_buf(), source })?;
        Ok((log, recovered))
    }

    fn open_file(file: &Path, policy: FsyncPolicy) -> Result<(Log, Recovered), StorageError> {
        let redb_err = |e: redb::Error| StorageError::from_redb(file, e);
        let mut db = Database::create(file).map_err(|e| redb_err(e.into()))?;
        // Verifies every reachable page's checksum and the allocator state, not only the records read
        // below: damage anywhere in the live file is reported now, not met later in the middle of a write.
        if !db.check_integrity().map_err(|e| redb_err(e.into()))? {
            return Err(StorageError::corrupted(
                file,
                "it failed redb's integrity check (redb repaired what it could; check the records before reusing it)",
            ));
        }
        let (recovered, first_stored) = recover(&db, file)?;
        let checkpoint = recovered.checkpoint.as_ref().map_or(Lsn::ZERO, |c| c.lsn);
        let last = recovered.last_lsn();
        let log = Log {
            db: Some(Arc::new(db)),
            file: file.to_path_buf(),
            policy,
            pending: Vec::new(),
            last,
            committed: last,
            checkpoint,
            first_stored: first_stored.unwrap_or(last.next()),
            poisoned: false,
            reserve: PathBuf::new(),
            full: false,
            stats: LogStats::default(),
            in_flight: None,
            waker: None,
            committer: None,
        };
        Ok((log, recovered))
    }

    /// The data file.
    pub fn path(&self) -> &Path {
        &self.file
    }

    /// `waker` is called (on another thread) whenever a background commit finishes.
    pub fn set_commit_waker(&mut self, waker: Arc<dyn Fn() + Send + Sync>) {
        self.waker = Some(waker);
    }

    /// Waits for the background commit, if any, and takes its outcome: its records are committed, or back
    /// in `pending` (first) with the error.
    fn finish_in_flight(&mut self, wait: bool) -> Result<(), StorageError> {
        let (Some(up_to), Some((_, outcomes))) = (self.in_flight, &self.committer) else { return Ok(()) };
        let received = if wait {
            outcomes.recv().ok()
        } else {
            match outcomes.try_recv() {
                Ok(outcome) => Some(outcome),
                Err(mpsc::TryRecvError::Empty) => return Ok(()),
                Err(mpsc::TryRecvError::Disconnected) => None,
            }
        };
        let (records, result) = received
            .unwrap_or_else(|| (Vec::new(), Err(StorageError::corrupted(&self.file, "the commit thread died"))));
        self.in_flight = None;
        match result {
            Ok(()) => {
                self.count_commit();
                self.committed = up_to;
                Ok(())
            }
            Err(StorageError::DiskFull { .. }) => {
                // Not a failed write: take the records back and go the synchronous way, which gives up the
                // reserve and reopens the file (see the type's docs).
                let later = std::mem::replace(&mut self.pending, records);
                self.pending.extend(later);
                // redb refuses everything after an I/O error until the file is reopened.
                self.full = true;
                let _ = fs::remove_file(&self.reserve);
                if let Err(e) = self.reopen(false) {
                    self.poisoned = true;
                    return Err(e);
                }
                self.write(true, None, None)?;
                self.mark_committed();
                Ok(())
            }
            Err(e) => {
                self.poisoned = true;
                Err(e)
            }
        }
    }

    /// The policy this log was opened with.
    pub fn policy(&self) -> FsyncPolicy {
        self.policy
    }

    /// What this log has written since it was opened.
    pub fn stats(&self) -> LogStats {
        self.stats
    }

    /// Whether the policy's batch limit says to commit now: any pending record under `PerWrite` and `None`,
    /// `max_batch` pending records under `Group` (the delay limit is the runtime's timer).
    pub fn batch_full(&self) -> bool {
        match self.policy {
            FsyncPolicy::Group { max_batch, .. } => self.pending.len() >= max_batch.max(1),
            FsyncPolicy::PerWrite | FsyncPolicy::None => !self.pending.is_empty(),
        }
    }

    /// How many records the data file holds (committed and not truncated), checkpoint-covered ones included.
    pub fn stored_records(&self) -> Result<u64, StorageError> {
        let txn = self.db().begin_read().map_err(|e| self.err(e))?;
        match txn.open_table(RECORDS) {
            Ok(t) => t.len().map_err(|e| self.err(e)),
            Err(TableError::TableDoesNotExist(_)) => Ok(0),
            Err(e) => Err(self.err(e)),
        }
    }

    /// Commits pending records and closes the file.
    pub fn close(mut self) -> Result<Lsn, StorageError> {
        self.commit()
    }

    fn db(&self) -> &Database {
        self.db.as_deref().expect("the database is open until drop")
    }

    fn err(&self, e: impl Into<redb::Error>) -> StorageError {
        StorageError::from_redb(&self.file, e)
    }

    fn check_poisoned(&self) -> Result<(), StorageError> {
        if self.poisoned { Err(StorageError::Poisoned { file: self.file.clone() }) } else { Ok(()) }
    }

    /// One write transaction: the pending records (if `with_pending`), then the checkpoint if any, then the
    /// truncation if any. A full disk is handled as the type's docs say; any other failure poisons the log.
    fn write(
        &mut self,
        with_pending: bool,
        checkpoint: Option<&[u8]>,
        truncate_below: Option<Lsn>,
    ) -> Result<(), StorageError> {
        self.check_poisoned()?;
        self.finish_in_flight(true)?;
        // At most two tries: the second after giving up the space reserve.
        let mut reserve_given_up = false;
        loop {
            let records = if with_pending { &self.pending[..] } else { &[] };
            let full = match guarded(&self.file, || self.write_txn(records, checkpoint, truncate_below)) {
                Ok(()) => {
                    self.count_commit();
                    return Ok(());
                }
                Err(e @ StorageError::DiskFull { .. }) => e,
                Err(e) => {
                    self.poisoned = true;
                    return Err(e);
                }
            };
            self.full = true;
            // The reserve goes first: reopening may itself need a little space.
            let retry = !reserve_given_up && fs::remove_file(&self.reserve).is_ok();
            reserve_given_up = true;
            match self.reopen(with_pending) {
                // The write had reached the disk after all.
                Ok(true) => {
                    self.count_commit();
                    return Ok(());
                }
                Ok(false) if retry => continue,
                Ok(false) => return Err(full),
                Err(e) => {
                    self.poisoned = true;
                    return Err(e);
                }
            }
        }
    }

    /// Close and open the data file again after a write that found the disk full (redb refuses every
    /// operation after an I/O error until then), and check what it holds: `Ok(false)` if the pending records
    /// are still pending, `Ok(true)` if the write had in fact committed them.
    fn reopen(&mut self, with_pending: bool) -> Result<bool, StorageError> {
        if let Some(db) = self.db.take() {
            let _ = panic::catch_unwind(AssertUnwindSafe(move || drop(db)));
        }
        let file = self.file.clone();
        let db = guarded(&file, || Database::create(&file).map_err(|e| StorageError::from_redb(&file, e)))?;
        let (recovered, first_stored) = recover(&db, &file)?;
        let last = recovered.last_lsn();
        self.db = Some(Arc::new(db));
        self.checkpoint = recovered.checkpoint.as_ref().map_or(Lsn::ZERO, |c| c.lsn);
        self.first_stored = first_stored.unwrap_or(last.next());
        if last == self.committed {
            Ok(false)
        } else if with_pending && last == self.last {
            self.mark_committed();
            Ok(true)
        } else {
            Err(StorageError::corrupted(
                &self.file,
                format!(
                    "after a write that found the disk full it holds records up to {} (expected {} or {})",
                    last.0, self.committed.0, self.last.0
                ),
            ))
        }
    }

    fn write_txn(
        &self,
        pending: &[Record],
        checkpoint: Option<&[u8]>,
        truncate_below: Option<Lsn>,
    ) -> Result<(), StorageError> {
        let txn = Txn { db: self.db(), file: &self.file, durable: self.policy.is_durable() };
        txn.write(pending, checkpoint.map(|state| (self.last, state)), truncate_below)
    }

    fn count_commit(&mut self) {
        self.stats.commits += 1;
        if self.policy.is_durable() {
            self.stats.fsyncs += 1;
        }
    }

    fn mark_committed(&mut self) {
        self.pending.clear();
        self.committed = self.last;
    }
}

/// One redb write transaction, on whichever thread runs it.
struct Txn<'a> {
    db: &'a Database,
    file: &'a Path,
    durable: bool,
}

impl Txn<'_> {
    fn write(
        &self,
        pending: &[Record],
        checkpoint: Option<(Lsn, &[u8])>,
        truncate_below: Option<Lsn>,
    ) -> Result<(), StorageError> {
        let err = |e: redb::Error| StorageError::from_redb(self.file, e);
        let mut txn = self.db.begin_write().map_err(|e| err(e.into()))?;
        let durability = if self.durable { Durability::Immediate } else { Durability::None };
        txn.set_durability(durability).map_err(|e| err(e.into()))?;
        {
            let mut records = txn.open_table(RECORDS).map_err(|e| err(e.into()))?;
            for r in pending {
                records.insert(r.lsn.0, encode_record(r.lsn, &r.payload).as_slice()).map_err(|e| err(e.into()))?;
            }
            if let Some(below) = truncate_below {
                records.retain_in(..below.0, |_, _| false).map_err(|e| err(e.into()))?;
            }
            let mut cp = txn.open_table(CHECKPOINT).map_err(|e| err(e.into()))?;
            if let Some((last, state)) = checkpoint {
                cp.insert(CHECKPOINT_KEY, encode_checkpoint(last, state).as_slice()).map_err(|e| err(e.into()))?;
            }
        }
        txn.commit().map_err(|e| err(e.into()))
    }
}

impl Drop for Log {
    /// Closes the file. redb may write its allocator state on close; a panic there (a page damaged after
    /// open) must not abort the process, so it is caught and the file is left for the next open to check.
    fn drop(&mut self) {
        // A commit under way finishes first (as if the crash came after it), and nothing else is written:
        // the file is closed on return.
        if let (Some(_), Some((_, outcomes))) = (self.in_flight.take(), &self.committer) {
            let _ = outcomes.recv();
        }
        if let Some(db) = self.db.take() {
            let _ = panic::catch_unwind(AssertUnwindSafe(move || drop(db)));
        }
    }
}

/// Runs `f`, turning a panic inside the storage engine into [`StorageError::Corrupted`] naming `file`.
/// redb reports the damage it finds as errors, but some of its checks of on-disk bytes are assertions
/// (`unreachable!`): a damaged file must give an operator a message, not take the server down.
fn guarded<T>(file: &Path, f: impl FnOnce() -> Result<T, StorageError>) -> Result<T, StorageError> {
    panic::catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|payload| {
        let msg = payload
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown".to_string());
        Err(StorageError::corrupted(file, format!("the storage engine failed on it ({msg})")))
    })
}

impl RecordLog for Log {
    fn append(&mut self, record: &[u8]) -> Lsn {
        self.last = self.last.next();
        self.stats.records += 1;
        self.stats.bytes += record.len() as u64;
        self.pending.push(Record { lsn: self.last, payload: record.to_vec() });
        self.last
    }

    fn commit(&mut self) -> Result<Lsn, StorageError> {
        self.finish_in_flight(true)?;
        if !self.pending.is_empty() {
            self.write(true, None, None)?;
            self.mark_committed();
        }
        self.check_poisoned()?;
        Ok(self.committed)
    }

    fn checkpoint(&mut self, state: &[u8]) -> Result<Lsn, StorageError> {
        self.write(true, Some(state), None)?;
        self.mark_committed();
        self.stats.checkpoints += 1;
        self.checkpoint = self.last;
        Ok(self.checkpoint)
    }

    fn truncate_before(&mut self, lsn: Lsn) -> Result<u64, StorageError> {
        self.finish_in_flight(true)?;
        let below = lsn.min(self.checkpoint.next()).min(self.committed.next());
        if below <= self.first_stored {
            self.check_poisoned()?;
            return Ok(0);
        }
        // Pending records stay pending: truncation is not a commit.
        self.write(false, None, Some(below))?;
        let removed = below.0 - self.first_stored.0;
        self.first_stored = below;
        Ok(removed)
    }

    fn last_lsn(&self) -> Lsn {
        self.last
    }

    fn durable_lsn(&self) -> Lsn {
        self.committed
    }

    fn pending(&self) -> usize {
        self.pending.len()
    }

    /// Hands the pending records to a thread that commits them in one write transaction (an fsync unless
    /// the policy is `none`) while the caller goes on appending; the next batch forms meanwhile.
    fn start_commit(&mut self) -> Result<(), StorageError> {
        self.check_poisoned()?;
        if self.in_flight.is_some() || self.pending.is_empty() {
            return Ok(());
        }
        if self.committer.is_none() {
            let (jobs_in, jobs) = mpsc::channel::<Job>();
            let (outcomes_in, outcomes) = mpsc::channel();
            std::thread::Builder::new()
                .name("snowline-commit".into())
                .spawn(move || {
                    while let Ok(job) = jobs.recv() {
                        job.run(&outcomes_in);
                    }
                })
                .map_err(|source| StorageError::Directory { dir: self.file.clone(), source })?;
            self.committer = Some((jobs_in, outcomes));
        }
        let job = Job {
            db: Arc::clone(self.db.as_ref().expect("the database is open until drop")),
            file: self.file.clone(),
            durable: self.policy.is_durable(),
            records: std::mem::take(&mut self.pending),
            waker: self.waker.clone(),
        };
        let (jobs_in, _) = self.committer.as_ref().expect("started above");
        if let Err(mpsc::SendError(job)) = jobs_in.send(job) {
            // The thread is gone: commit here instead.
            self.pending = job.records;
            self.committer = None;
            return self.commit().map(|_| ());
        }
        self.in_flight = Some(self.last);
        Ok(())
    }

    fn committing(&self) -> bool {
        self.in_flight.is_some()
    }

    fn poll_commit(&mut self) -> Result<Lsn, StorageError> {
        self.finish_in_flight(false)?;
        self.check_poisoned()?;
        Ok(self.committed)
    }

    fn disk_full(&self) -> bool {
        self.full
    }

    fn reclaim_space(&mut self) -> bool {
        if self.full && matches!(restore_reserve(&self.reserve), Ok(true)) {
            self.full = false;
        }
        !self.full
    }
}

/// Make sure the space reserve `path` exists with its full size: `Ok(false)` if there is no room for it.
/// The space is allocated (`fallocate`), not written, so making it costs no I/O; it is not fsynced either: a
/// reserve lost in a crash is made again at the next start.
fn restore_reserve(path: &Path) -> std::io::Result<bool> {
    use std::os::fd::AsRawFd;
    if fs::metadata(path).is_ok_and(|m| m.len() == DISK_RESERVE_BYTES) {
        return Ok(true);
    }
    let tmp = path.with_extension("tmp");
    let made = (|| {
        let f = fs::File::create(&tmp)?;
        // SAFETY: `f` is an open file descriptor for the duration of the call.
        let rc = unsafe { libc::posix_fallocate(f.as_raw_fd(), 0, DISK_RESERVE_BYTES as libc::off_t) };
        if rc != 0 {
            return Err(std::io::Error::from_raw_os_error(rc));
        }
        fs::rename(&tmp, path)
    })();
    match made {
        Ok(()) => Ok(true),
        Err(e) => {
            let _ = fs::remove_file(&tmp);
            if crate::error::is_disk_full(&e) { Ok(false) } else { Err(e) }
        }
    }
}

/// Reads the latest checkpoint and the records after it, verifying every checksum and that no record is
/// missing. Also returns the lowest stored LSN.
fn recover(db: &Database, file: &Path) -> Result<(Recovered, Option<Lsn>), StorageError> {
    let redb_err = |e: redb::Error| StorageError::from_redb(file, e);
    let txn = db.begin_read().map_err(|e| redb_err(e.into()))?;
    let checkpoint = match txn.open_table(CHECKPOINT) {
        Ok(table) => match table.get(CHECKPOINT_KEY).map_err(|e| redb_err(e.into()))? {
            Some(v) => Some(
                decode_checkpoint(v.value())
                    .ok_or_else(|| StorageError::corrupted(file, "the checkpoint does not match its checksum"))?,
            ),
            None => None,
        },
        Err(TableError::TableDoesNotExist(_)) => None,
        Err(e) => return Err(redb_err(e.into())),
    };
    let after = checkpoint.as_ref().map_or(Lsn::ZERO, |c: &Checkpoint| c.lsn);
    let mut records = Vec::new();
    let mut first_stored = None;
    match txn.open_table(RECORDS) {
        Ok(table) => {
            if let Some((k, _)) = table.first().map_err(|e| redb_err(e.into()))? {
                first_stored = Some(Lsn(k.value()));
            }
            let mut expected = after.next();
            for entry in table.range(after.next().0..).map_err(|e| redb_err(e.into()))? {
                let (k, v) = entry.map_err(|e| redb_err(e.into()))?;
                let lsn = Lsn(k.value());
                if lsn != expected {
                    return Err(StorageError::corrupted(
                        file,
                        format!("record {expected} is missing (the next stored record is {lsn})"),
                    ));
                }
                let payload = decode_record(lsn, v.value()).ok_or_else(|| {
                    StorageError::corrupted(file, format!("record {lsn} does not match its checksum"))
                })?;
                records.push(Record { lsn, payload: payload.to_vec() });
                expected = expected.next();
            }
        }
        Err(TableError::TableDoesNotExist(_)) => {}
        Err(e) => return Err(redb_err(e.into())),
    }
    Ok((Recovered { checkpoint, records }, first_stored))
}
