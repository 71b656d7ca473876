//! [`Log`]: the write-ahead log of one server: append-only segment files of checksummed sectors, and a
//! checkpoint file.
//!
//! # On disk (`<data dir>/`)
//!
//! - `wal/<first LSN, 20 digits>.seg`: a segment, allocated at its full size when it is made
//!   ([`SEGMENT_BYTES`], or more for a record that needs more) so that writing into it never needs space the
//!   disk may not have, and an fdatasync after a write flushes data, not the file's size. Sector 0 is the
//!   header: a CRC-32 of the rest, the magic `snowwal1`, the first LSN and the size. Then batches, each
//!   starting on a fresh 512-byte sector: the records' `length (u32) ‖ payload`, cut into sectors of 16
//!   header bytes (CRC-32 of the rest of the sector, the batch's first LSN, the bytes used, a last-sector
//!   flag) and 496 data bytes. A segment is never written again once a later one exists; a log opened again
//!   goes on in its last segment if it ended cleanly (only zero sectors after its last batch), else in a new
//!   one, so restarts do not each cost a segment and no sector a crash left is ever written over.
//! - `checkpoint`: CRC-32, the LSN covered, the state; replaced atomically (written beside, fsynced, renamed,
//!   directory fsynced).
//! - `LOCK`: held (`flock`) while a `Log` has the directory open; `reserve`: see [`RESERVE_FILE`].
//!
//! # Why sectors, and what recovery concludes
//!
//! A commit is one `pwrite` of whole sectors followed by one `fdatasync`, and the next commit starts only
//! after it. A crash in the middle of a write (a power cut, a kernel killing the process between pages)
//! leaves some of the write's sectors and not others, but a disk writes a sector whole. So after the last
//! complete batch, a segment holds only zero sectors and sectors of the one batch that was being written,
//! which nobody was told about: recovery drops that batch and reports nothing. Anything else — a sector
//! whose checksum fails, a sector of an unexpected batch, a segment shorter than its header says, a
//! missing or overlapping range of records — cannot come from a crash and is reported as
//! [`StorageError::Corrupted`] naming the file; nothing is recovered from a damaged log.
//!
//! # Why not a storage engine
//!
//! Up to 2026-11-25 the log was a redb 4 B-tree (one write transaction per commit). For the log's job —
//! append a batch, make it durable, read everything back once at start — a B-tree commit writes and
//! checksums several pages and two commit slots where an append writes the batch: measured on the project
//! machine (batches of 10 records of 120 bytes, `cargo run --release -p snowline-storage --example
//! storage_bench`), a redb commit with fsync cost about 250 µs and 140 µs of CPU, an append to a
//! preallocated segment with fdatasync about 110 µs and 45 µs of CPU. The commit thread's CPU was the
//! largest cost of durable servers (`docs/DURABILITY.md`).

use std::collections::VecDeque;
use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::mpsc;

use crate::error::is_disk_full;
use crate::record::{decode_checkpoint, encode_checkpoint};
use crate::{Checkpoint, FsyncPolicy, Lsn, Record, RecordLog, Recovered, StorageError};

/// The directory of the segment files, inside the data directory.
pub const LOG_DIR: &str = "wal";
/// The checkpoint file, inside the data directory.
pub const CHECKPOINT_FILE: &str = "checkpoint";
/// The lock file, inside the data directory: one `Log` (one server process) per directory.
pub const LOCK_FILE: &str = "LOCK";
/// Name of the space reserve inside the data directory: a file of [`DISK_RESERVE_BYTES`] allocated bytes,
/// given up when the disk fills so that what was already handled can still be made durable.
pub const RESERVE_FILE: &str = "reserve";
/// Bytes of disk a log keeps in reserve.
pub const DISK_RESERVE_BYTES: u64 = 8 << 20;
/// Size of a segment file.
pub const SEGMENT_BYTES: u64 = 8 << 20;
/// Size of the segments made while the disk is full: the reserve given up holds several.
const FULL_SEGMENT_BYTES: u64 = 1 << 20;

const SECTOR: usize = 512;
const SECTOR_HEADER: usize = 16;
const SECTOR_DATA: usize = SECTOR - SECTOR_HEADER;
/// Flag of a batch's last sector.
const LAST_SECTOR: u8 = 1;
const SEGMENT_MAGIC: &[u8; 8] = b"snowwal1";

/// The durable log of opaque records of one server, in `<dir>/wal/` and `<dir>/checkpoint` (module docs).
///
/// One `Log` per data directory (a second open gets [`StorageError::InUse`]). Appends are buffered in
/// memory; [`commit`](RecordLog::commit) writes them all as one batch with one fdatasync (none under
/// [`FsyncPolicy::None`]).
///
/// Dropping a `Log` loses the records appended since the last commit, exactly as a crash would; call
/// [`close`](Log::close) to commit them first. After any failed write the log is poisoned (whether the
/// write reached the disk is unknown) and every later write returns [`StorageError::Poisoned`]: drop it
/// and [`open`](Log::open) the directory again.
///
/// A full disk is not a failed write: a write into a segment never needs space (segments are allocated when
/// made), so only making a segment or a checkpoint can find the disk full, and then nothing was written.
/// The log gives up its space reserve ([`RESERVE_FILE`]), makes small segments from it and writes the
/// pending records; from then on it reports [`disk_full`](RecordLog::disk_full) (its host refuses client
/// writes, while reads and the records of what was already accepted use the reserve) until
/// [`reclaim_space`](RecordLog::reclaim_space) manages to restore the reserve, i.e. until space has been
/// freed. A write that still finds no space returns [`StorageError::DiskFull`] and keeps its records for
/// the next commit.
pub struct Log {
    dir: PathBuf,
    wal: PathBuf,
    /// Always `Some` except while a background commit has it: `None` is "a commit is under way" (or its
    /// thread died, which poisons the log).
    segments: Option<Segments>,
    /// Held (flock) for the life of the log.
    _lock: File,
    policy: FsyncPolicy,
    pending: Vec<Record>,
    /// Last LSN handed out by `append`.
    last: Lsn,
    /// Last LSN committed.
    committed: Lsn,
    /// LSN covered by the latest committed checkpoint.
    checkpoint: Lsn,
    poisoned: bool,
    /// The space reserve file.
    reserve: PathBuf,
    /// The disk filled up and the reserve has not been restored since.
    full: bool,
    stats: LogStats,
    /// Called by a background commit when it is done (the runtime wakes its event loop).
    waker: Option<Arc<dyn Fn() + Send + Sync>>,
    /// The thread that runs background commits (started by the first): batches in, outcomes out.
    committer: Option<(mpsc::Sender<Job>, mpsc::Receiver<Outcome>)>,
}

/// A batch for the commit thread: it takes the segments with it and gives them back with the outcome.
struct Job {
    segments: Segments,
    records: Vec<Record>,
    waker: Option<Arc<dyn Fn() + Send + Sync>>,
}

/// What a background commit gives back: the segments, the records, how many of them it wrote, and how it ended.
type Outcome = (Segments, Vec<Record>, usize, Result<(), StorageError>);

impl Job {
    fn run(mut self, outcomes: &mpsc::Sender<Outcome>) {
        let (written, result) = self.segments.write(&self.records);
        let _ = outcomes.send((self.segments, self.records, written, result));
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
    /// Writes made: batches of pending records and checkpoints.
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
    /// nothing is written to a log that failed to recover.
    pub fn open_with(dir: impl AsRef<Path>, policy: FsyncPolicy) -> Result<(Log, Recovered), StorageError> {
        Log::open_sized(dir, policy, SEGMENT_BYTES)
    }

    /// [`open_with`](Log::open_with), making new segments of `segment_bytes` (rounded up to whole sectors,
    /// at least two): small segments let a test see truncation at work.
    pub fn open_sized(
        dir: impl AsRef<Path>,
        policy: FsyncPolicy,
        segment_bytes: u64,
    ) -> Result<(Log, Recovered), StorageError> {
        let dir = dir.as_ref().to_path_buf();
        let dir_err = |error| StorageError::Directory { dir: dir.clone(), error };
        fs::create_dir_all(&dir).map_err(dir_err)?;
        let lock = lock_directory(&dir)?;
        let wal = dir.join(LOG_DIR);
        fs::create_dir_all(&wal).map_err(dir_err)?;
        let checkpoint = read_checkpoint(&dir)?;
        let covered = checkpoint.as_ref().map_or(Lsn::ZERO, |c| c.lsn);
        let scan = recover_segments(&wal, covered)?;
        let recovered = Recovered { checkpoint, records: scan.records };
        let last = recovered.last_lsn().max(Lsn(scan.next.0.saturating_sub(1)));
        let reserve = dir.join(RESERVE_FILE);
        let full = !restore_reserve(&reserve).map_err(dir_err)?;
        let segment_bytes = segment_bytes.div_ceil(SECTOR as u64).max(2) * SECTOR as u64;
        // The last segment goes on where it ended cleanly; after a torn batch the log goes on in a new one.
        // (Only if its records run on to the log's end: under `none` a machine crash can leave a checkpoint
        // newer than the segments' last record.)
        let current = match (scan.segments.back(), scan.clean_end) {
            (Some((_, path)), Some((size, offset))) if scan.next == last.next() => {
                let file = OpenOptions::new()
                    .read(true)
                    .write(true)
                    .open(path)
                    .map_err(|e| StorageError::Io { file: path.clone(), detail: e.to_string() })?;
                Some(Current { file, path: path.clone(), size, offset })
            }
            _ => None,
        };
        let segments = Segments {
            dir: wal.clone(),
            list: scan.segments,
            current,
            durable: policy.is_durable(),
            segment_bytes,
            small: full,
            scratch: Vec::new(),
        };
        let log = Log {
            dir,
            wal,
            segments: Some(segments),
            _lock: lock,
            policy,
            pending: Vec::new(),
            last,
            committed: last,
            checkpoint: covered,
            poisoned: false,
            reserve,
            full,
            stats: LogStats::default(),
            waker: None,
            committer: None,
        };
        Ok((log, recovered))
    }

    /// The directory of the segment files.
    pub fn path(&self) -> &Path {
        &self.wal
    }

    /// `waker` is called (on another thread) whenever a background commit finishes.
    pub fn set_commit_waker(&mut self, waker: Arc<dyn Fn() + Send + Sync>) {
        self.waker = Some(waker);
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

    /// How many committed records the segment files hold (checkpoint-covered ones included until their
    /// segment is dropped).
    pub fn stored_records(&self) -> u64 {
        let first = self.segments.as_ref().and_then(|s| s.list.front()).map_or(self.committed.next(), |s| s.0);
        (self.committed.0 + 1).saturating_sub(first.0)
    }

    /// Commits pending records, makes everything written durable (even under `none`) and closes the files.
    pub fn close(mut self) -> Result<Lsn, StorageError> {
        let lsn = self.commit()?;
        let segments = self.segments.as_ref().expect("no commit is under way");
        segments.sync_current().inspect_err(|_| self.poisoned = true)?;
        Ok(lsn)
    }

    fn check_poisoned(&self) -> Result<(), StorageError> {
        if self.poisoned { Err(StorageError::Poisoned { file: self.wal.clone() }) } else { Ok(()) }
    }

    /// Waits for the background commit, if any (or only looks, unless `wait`), and takes its outcome: its
    /// records are committed, or back in `pending` (first) with the error.
    fn finish_in_flight(&mut self, wait: bool) -> Result<(), StorageError> {
        let (None, Some((_, outcomes))) = (&self.segments, &self.committer) else { return Ok(()) };
        let received = if wait {
            outcomes.recv().ok()
        } else {
            match outcomes.try_recv() {
                Ok(outcome) => Some(outcome),
                Err(mpsc::TryRecvError::Empty) => return Ok(()),
                Err(mpsc::TryRecvError::Disconnected) => None,
            }
        };
        let Some((segments, mut records, written, result)) = received else {
            self.poisoned = true;
            return Err(StorageError::Io { file: self.wal.clone(), detail: "the commit thread died".into() });
        };
        self.segments = Some(segments);
        if written > 0 {
            self.committed = records[written - 1].lsn;
        }
        records.drain(..written);
        records.append(&mut self.pending);
        self.pending = records;
        match result {
            Ok(()) => {
                self.count_commit();
                Ok(())
            }
            // Not a failed write: go the synchronous way, which gives up the reserve (type docs).
            Err(StorageError::DiskFull { .. }) => self.write_pending(),
            Err(e) => {
                self.poisoned = true;
                Err(e)
            }
        }
    }

    /// Writes the pending records (waiting for a background commit first). A full disk is handled as the
    /// type's docs say; any other failure poisons the log.
    fn write_pending(&mut self) -> Result<(), StorageError> {
        self.check_poisoned()?;
        self.finish_in_flight(true)?;
        let mut reserve_given_up = false;
        while !self.pending.is_empty() {
            let segments = self.segments.as_mut().expect("no commit is under way");
            let (written, result) = segments.write(&self.pending);
            if written > 0 {
                self.committed = self.pending[written - 1].lsn;
                self.pending.drain(..written);
            }
            match result {
                Ok(()) => self.count_commit(),
                Err(e @ StorageError::DiskFull { .. }) => {
                    self.full = true;
                    segments.small = true;
                    if !reserve_given_up && fs::remove_file(&self.reserve).is_ok() {
                        reserve_given_up = true;
                        continue;
                    }
                    return Err(e);
                }
                Err(e) => {
                    self.poisoned = true;
                    return Err(e);
                }
            }
        }
        Ok(())
    }

    /// Replaces the checkpoint file: written beside it, made durable, renamed over it.
    fn write_checkpoint(&mut self, state: &[u8]) -> Result<(), StorageError> {
        let file = self.dir.join(CHECKPOINT_FILE);
        let tmp = self.dir.join(format!("{CHECKPOINT_FILE}.tmp"));
        let durable = self.policy.is_durable();
        let written = (|| {
            let f = File::create(&tmp)?;
            f.write_all_at(&encode_checkpoint(self.last, state), 0)?;
            if durable {
                f.sync_all()?;
            }
            fs::rename(&tmp, &file)?;
            if durable {
                File::open(&self.dir)?.sync_all()?;
            }
            Ok(())
        })();
        written.map_err(|e: io::Error| {
            let _ = fs::remove_file(&tmp);
            if is_disk_full(&e) {
                self.full = true;
                StorageError::DiskFull { file: file.clone(), detail: e.to_string() }
            } else {
                self.poisoned = true;
                StorageError::Io { file: file.clone(), detail: e.to_string() }
            }
        })
    }

    fn count_commit(&mut self) {
        self.stats.commits += 1;
        if self.policy.is_durable() {
            self.stats.fsyncs += 1;
        }
    }
}

impl Drop for Log {
    /// A commit under way finishes first (as if the crash came after it), and nothing else is written.
    fn drop(&mut self) {
        if let (None, Some((_, outcomes))) = (&self.segments, &self.committer) {
            let _ = outcomes.recv();
        }
    }
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
        self.write_pending()?;
        Ok(self.committed)
    }

    fn checkpoint(&mut self, state: &[u8]) -> Result<Lsn, StorageError> {
        self.write_pending()?;
        self.write_checkpoint(state)?;
        self.count_commit();
        self.stats.checkpoints += 1;
        self.checkpoint = self.last;
        Ok(self.checkpoint)
    }

    /// Drops the segments whose records are all before `lsn` and covered by the checkpoint: space comes back
    /// a segment at a time, so up to a segment of covered records stays stored.
    fn truncate_before(&mut self, lsn: Lsn) -> Result<u64, StorageError> {
        self.check_poisoned()?;
        self.finish_in_flight(true)?;
        let below = lsn.min(self.checkpoint.next()).min(self.committed.next());
        let committed = self.committed;
        let segments = self.segments.as_mut().expect("no commit is under way");
        segments.drop_before(below, committed).inspect_err(|_| self.poisoned = true)
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

    /// Hands the pending records to a thread that writes them (an fdatasync unless the policy is `none`)
    /// while the caller goes on appending; the next batch forms meanwhile.
    fn start_commit(&mut self) -> Result<(), StorageError> {
        self.check_poisoned()?;
        if self.committing() || self.pending.is_empty() {
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
                .map_err(|error| StorageError::Directory { dir: self.dir.clone(), error })?;
            self.committer = Some((jobs_in, outcomes));
        }
        let job = Job {
            segments: self.segments.take().expect("no commit is under way"),
            records: std::mem::take(&mut self.pending),
            waker: self.waker.clone(),
        };
        let (jobs_in, _) = self.committer.as_ref().expect("started above");
        if let Err(mpsc::SendError(job)) = jobs_in.send(job) {
            // The thread is gone: commit here instead.
            self.segments = Some(job.segments);
            self.pending = job.records;
            self.committer = None;
            return self.commit().map(|_| ());
        }
        Ok(())
    }

    fn committing(&self) -> bool {
        self.segments.is_none()
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
            if let Some(segments) = self.segments.as_mut() {
                segments.small = false;
            }
        }
        !self.full
    }
}

/// The segment files: which exist, and the one being written.
struct Segments {
    /// The `wal` directory.
    dir: PathBuf,
    /// First LSN and file of every segment, oldest first.
    list: VecDeque<(Lsn, PathBuf)>,
    /// The segment being written: the last one if it ended cleanly; `None` after a torn batch (the next write
    /// makes a new segment, after whatever the crash left), before the first segment or after the last one
    /// was dropped.
    current: Option<Current>,
    /// Whether writes are fdatasynced.
    durable: bool,
    /// The size of a new segment.
    segment_bytes: u64,
    /// The disk is full: new segments are small.
    small: bool,
    /// The batch being encoded.
    scratch: Vec<u8>,
}

struct Current {
    file: File,
    path: PathBuf,
    size: u64,
    /// Where the next batch goes (a sector boundary).
    offset: u64,
}

impl Segments {
    /// Writes `records` as batches (one per segment they go to), each made durable before the next, and
    /// returns how many records were written: all of them, or those before an error.
    fn write(&mut self, records: &[Record]) -> (usize, Result<(), StorageError>) {
        let mut done = 0;
        while done < records.len() {
            let room = self.current.as_ref().map_or(0, |c| ((c.size - c.offset) / SECTOR as u64) as usize);
            let (count, sectors) = fitting(&records[done..], room);
            if count == 0 {
                // The next record needs a new segment (of its own size if it is larger than a segment).
                let first = &records[done];
                let needed = (1 + sectors_for(4 + first.payload.len())) as u64 * SECTOR as u64;
                let size = needed.max(if self.small { FULL_SEGMENT_BYTES } else { self.segment_bytes });
                if let Err(e) = self.create(first.lsn, size) {
                    return (done, Err(e));
                }
                continue;
            }
            if let Err(e) = self.write_batch(&records[done..done + count], sectors) {
                return (done, Err(e));
            }
            done += count;
        }
        (done, Ok(()))
    }

    fn write_batch(&mut self, records: &[Record], sectors: usize) -> Result<(), StorageError> {
        let current = self.current.as_mut().expect("a segment with room");
        let batch = records[0].lsn;
        let buf = &mut self.scratch;
        buf.clear();
        buf.resize(sectors * SECTOR, 0);
        // The records' stream, sector by sector.
        let mut cursor = Cursor { sector: 0, at: 0 };
        for r in records {
            cursor.put(buf, &(r.payload.len() as u32).to_le_bytes());
            cursor.put(buf, &r.payload);
        }
        let sector = cursor.sector;
        debug_assert_eq!(sector + 1, sectors);
        for (i, s) in buf.chunks_exact_mut(SECTOR).enumerate() {
            s[4..12].copy_from_slice(&batch.0.to_le_bytes());
            s[14] = if i + 1 == sectors { LAST_SECTOR } else { 0 };
            let crc = crc32fast::hash(&s[4..]);
            s[..4].copy_from_slice(&crc.to_le_bytes());
        }
        let io_err = |e: io::Error| StorageError::Io { file: current.path.clone(), detail: e.to_string() };
        current.file.write_all_at(buf, current.offset).map_err(io_err)?;
        if self.durable {
            current.file.sync_data().map_err(io_err)?;
        }
        current.offset += buf.len() as u64;
        Ok(())
    }

    /// Makes a segment whose first record will be `first`: allocated, header written, made durable, then
    /// given its name (a crash leaves either no segment or a whole empty one).
    fn create(&mut self, first: Lsn, size: u64) -> Result<(), StorageError> {
        let path = self.dir.join(format!("{:020}.seg", first.0));
        let tmp = self.dir.join(format!("{:020}.seg.tmp", first.0));
        let made = (|| {
            let file = OpenOptions::new().read(true).write(true).create(true).truncate(true).open(&tmp)?;
            // SAFETY: `file` is an open file descriptor for the duration of the call.
            let rc = unsafe { libc::posix_fallocate(file.as_raw_fd(), 0, size as libc::off_t) };
            if rc != 0 {
                return Err(io::Error::from_raw_os_error(rc));
            }
            file.write_all_at(&segment_header(first, size), 0)?;
            if self.durable {
                file.sync_all()?;
            }
            fs::rename(&tmp, &path)?;
            if self.durable {
                File::open(&self.dir)?.sync_all()?;
            }
            Ok(file)
        })();
        let file = made.map_err(|e| {
            let _ = fs::remove_file(&tmp);
            if is_disk_full(&e) {
                StorageError::DiskFull { file: path.clone(), detail: e.to_string() }
            } else {
                StorageError::Io { file: path.clone(), detail: e.to_string() }
            }
        })?;
        // A segment left empty by a crash had this name and was just replaced.
        if self.list.back().is_some_and(|(lsn, _)| *lsn == first) {
            self.list.pop_back();
        }
        self.list.push_back((first, path.clone()));
        self.current = Some(Current { file, path, size, offset: SECTOR as u64 });
        Ok(())
    }

    /// Deletes the segments holding only records before `below` (`committed` is the last record written),
    /// and returns how many records they held.
    fn drop_before(&mut self, below: Lsn, committed: Lsn) -> Result<u64, StorageError> {
        let mut removed = 0;
        while let Some((first, path)) = self.list.front() {
            let end = self.list.get(1).map_or(committed.next(), |next| next.0);
            if end > below {
                break;
            }
            fs::remove_file(path).map_err(|e| StorageError::Io { file: path.clone(), detail: e.to_string() })?;
            removed += end.0.saturating_sub(first.0);
            if self.list.len() == 1 {
                self.current = None;
            }
            self.list.pop_front();
        }
        Ok(removed)
    }

    /// Makes what was written to the current segment durable (for a clean close under `none`).
    fn sync_current(&self) -> Result<(), StorageError> {
        match &self.current {
            Some(c) => c.file.sync_data().map_err(|e| StorageError::Io { file: c.path.clone(), detail: e.to_string() }),
            None => Ok(()),
        }
    }
}

/// Where a batch's stream is being written: a sector and a position in its data.
struct Cursor {
    sector: usize,
    at: usize,
}

impl Cursor {
    fn put(&mut self, buf: &mut [u8], mut bytes: &[u8]) {
        while !bytes.is_empty() {
            if self.at == SECTOR_DATA {
                self.sector += 1;
                self.at = 0;
            }
            let n = bytes.len().min(SECTOR_DATA - self.at);
            let start = self.sector * SECTOR + SECTOR_HEADER + self.at;
            buf[start..start + n].copy_from_slice(&bytes[..n]);
            self.at += n;
            bytes = &bytes[n..];
            // The bytes used in this sector so far.
            let used = self.sector * SECTOR + 12;
            buf[used..used + 2].copy_from_slice(&(self.at as u16).to_le_bytes());
        }
    }
}

/// How many sectors a stream of `bytes` needs.
fn sectors_for(bytes: usize) -> usize {
    bytes.div_ceil(SECTOR_DATA).max(1)
}

/// How many of `records` (from the first) fit in `room` sectors as one batch, and the sectors they take.
fn fitting(records: &[Record], room: usize) -> (usize, usize) {
    let (mut count, mut bytes) = (0, 0);
    for r in records {
        let more = bytes + 4 + r.payload.len();
        if sectors_for(more) > room {
            break;
        }
        (count, bytes) = (count + 1, more);
    }
    (count, if count == 0 { 0 } else { sectors_for(bytes) })
}

fn segment_header(first: Lsn, size: u64) -> [u8; SECTOR] {
    let mut h = [0u8; SECTOR];
    h[4..12].copy_from_slice(SEGMENT_MAGIC);
    h[12..20].copy_from_slice(&first.0.to_le_bytes());
    h[20..28].copy_from_slice(&size.to_le_bytes());
    let crc = crc32fast::hash(&h[4..]);
    h[..4].copy_from_slice(&crc.to_le_bytes());
    h
}

/// Takes the directory's lock: a second `Log` on it (in this process or another) is refused.
fn lock_directory(dir: &Path) -> Result<File, StorageError> {
    let path = dir.join(LOCK_FILE);
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|error| StorageError::Directory { dir: dir.to_path_buf(), error })?;
    // A lock released a moment ago may still be held by a child that a thread of the releasing process
    // forked meanwhile (it holds copies of the descriptors until it execs): try again for a little while.
    // (20 tries 10 ms apart.)
    for attempt in 0.. {
        // SAFETY: `file` is an open file descriptor for the duration of the call.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
            return Ok(file);
        }
        let e = io::Error::last_os_error();
        if attempt == 19 {
            return Err(StorageError::InUse { file: path, detail: e.to_string() });
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    unreachable!("the loop returns")
}

fn read_checkpoint(dir: &Path) -> Result<Option<Checkpoint>, StorageError> {
    let file = dir.join(CHECKPOINT_FILE);
    let _ = fs::remove_file(dir.join(format!("{CHECKPOINT_FILE}.tmp")));
    match fs::read(&file) {
        Ok(bytes) => decode_checkpoint(&bytes)
            .map(Some)
            .ok_or_else(|| StorageError::corrupted(&file, "the checkpoint does not match its checksum")),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(StorageError::Io { file, detail: e.to_string() }),
    }
}

/// What the segments hold.
struct Scan {
    segments: VecDeque<(Lsn, PathBuf)>,
    /// The records after the checkpoint.
    records: Vec<Record>,
    /// The LSN after the last record stored.
    next: Lsn,
    /// Where the last segment's batches end, if only zero sectors follow (nothing a crash left) and there
    /// is room: the log goes on there. Its size, then that offset.
    clean_end: Option<(u64, u64)>,
}

/// Reads every segment in order, checking each sector and that the records run on without a gap or an
/// overlap (a gap the checkpoint covers is not a gap).
fn recover_segments(wal: &Path, covered: Lsn) -> Result<Scan, StorageError> {
    let mut found = Vec::new();
    for entry in fs::read_dir(wal).map_err(|error| StorageError::Directory { dir: wal.to_path_buf(), error })? {
        let entry = entry.map_err(|error| StorageError::Directory { dir: wal.to_path_buf(), error })?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.ends_with(".seg.tmp") {
            // A segment a crash interrupted before it was named: it never held a record.
            let _ = fs::remove_file(entry.path());
        } else if let Some(stem) = name.strip_suffix(".seg") {
            let first = stem
                .parse::<u64>()
                .map_err(|_| StorageError::corrupted(&entry.path(), "its name is not a segment's (<first LSN>.seg)"))?;
            found.push((Lsn(first), entry.path()));
        }
    }
    found.sort();
    let mut scan = Scan { segments: VecDeque::new(), records: Vec::new(), next: Lsn::ZERO, clean_end: None };
    for (first, path) in found {
        if scan.next != Lsn::ZERO && first != scan.next && !(first > scan.next && first <= covered.next()) {
            return Err(StorageError::corrupted(
                &path,
                format!("it starts at record {first}, but the segment before it ends before record {}", scan.next),
            ));
        }
        if scan.next == Lsn::ZERO && first > covered.next() {
            return Err(StorageError::corrupted(
                &path,
                format!(
                    "records {} to {} are missing (the checkpoint covers up to {covered})",
                    covered.next(),
                    first.0 - 1
                ),
            ));
        }
        let bytes = fs::read(&path).map_err(|e| StorageError::Io { file: path.clone(), detail: e.to_string() })?;
        let (next, clean_end) = read_segment(&path, first, &bytes, covered, &mut scan.records)?;
        scan.next = next;
        scan.clean_end = clean_end.map(|end| (bytes.len() as u64, end));
        scan.segments.push_back((first, path));
    }
    Ok(scan)
}

/// Checks one segment and appends its records after `covered` to `out`; returns the LSN after its last, and
/// where its batches end if only zero sectors follow them.
fn read_segment(
    path: &Path,
    first: Lsn,
    bytes: &[u8],
    covered: Lsn,
    out: &mut Vec<Record>,
) -> Result<(Lsn, Option<u64>), StorageError> {
    let bad = |detail: String| StorageError::corrupted(path, detail);
    let Some(header) = bytes.first_chunk::<SECTOR>() else {
        return Err(bad(format!("it is {} bytes long, shorter than a segment header", bytes.len())));
    };
    if header[4..12] != SEGMENT_MAGIC[..]
        || u32::from_le_bytes(header[..4].try_into().unwrap()) != crc32fast::hash(&header[4..])
    {
        return Err(bad("its header is damaged".into()));
    }
    let (named, size) = (
        u64::from_le_bytes(header[12..20].try_into().unwrap()),
        u64::from_le_bytes(header[20..28].try_into().unwrap()),
    );
    if named != first.0 {
        return Err(bad(format!("its header says it starts at record {named}, its name at {first}")));
    }
    if bytes.len() as u64 != size || size % SECTOR as u64 != 0 {
        return Err(bad(format!("truncated to {} of {size} bytes", bytes.len())));
    }
    let mut next = first;
    let mut pos = SECTOR;
    let mut stream = Vec::new();
    // Complete batches, in order.
    let tail = 'batches: loop {
        if pos == bytes.len() {
            break 'batches None;
        }
        let batch_start = pos;
        stream.clear();
        loop {
            match classify(&bytes[pos..pos + SECTOR]) {
                Sector::Zero => break 'batches Some(batch_start),
                Sector::Bad => return Err(bad(format!("the sector at byte {pos} does not match its checksum"))),
                Sector::Data { batch, data, last } => {
                    if batch != next {
                        return Err(bad(format!("the sector at byte {pos} belongs to batch {batch}, expected {next}")));
                    }
                    stream.extend_from_slice(data);
                    pos += SECTOR;
                    if last {
                        break;
                    }
                    if pos == bytes.len() {
                        return Err(bad(format!("the batch at byte {batch_start} runs past the end")));
                    }
                }
            }
        }
        let mut rest = &stream[..];
        while !rest.is_empty() {
            let (len, after) =
                rest.split_first_chunk::<4>().ok_or_else(|| bad(format!("record {next} is cut short")))?;
            let len = u32::from_le_bytes(*len) as usize;
            let payload = after.get(..len).ok_or_else(|| bad(format!("record {next} is cut short")))?;
            if next > covered {
                out.push(Record { lsn: next, payload: payload.to_vec() });
            }
            next = next.next();
            rest = &after[len..];
        }
    };
    // After the last complete batch: only zero sectors and what a crash left of the next batch.
    let mut clean = tail;
    if let Some(from) = tail {
        for at in (from..bytes.len()).step_by(SECTOR) {
            match classify(&bytes[at..at + SECTOR]) {
                Sector::Zero => {}
                Sector::Data { batch, .. } if batch == next => clean = None,
                Sector::Data { batch, .. } => {
                    return Err(bad(format!("batch {batch} at byte {at} follows a gap after record {}", next.0 - 1)));
                }
                Sector::Bad => return Err(bad(format!("the sector at byte {at} does not match its checksum"))),
            }
        }
    }
    Ok((next, clean.map(|at| at as u64)))
}

enum Sector<'a> {
    Zero,
    Bad,
    Data { batch: Lsn, data: &'a [u8], last: bool },
}

fn classify(s: &[u8]) -> Sector<'_> {
    if s.iter().all(|&b| b == 0) {
        return Sector::Zero;
    }
    let crc = u32::from_le_bytes(s[..4].try_into().unwrap());
    let used = u16::from_le_bytes(s[12..14].try_into().unwrap()) as usize;
    if crc != crc32fast::hash(&s[4..]) || used > SECTOR_DATA || s[14] & !LAST_SECTOR != 0 {
        return Sector::Bad;
    }
    Sector::Data {
        batch: Lsn(u64::from_le_bytes(s[4..12].try_into().unwrap())),
        data: &s[SECTOR_HEADER..SECTOR_HEADER + used],
        last: s[14] & LAST_SECTOR != 0,
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
