//! The on-disk log: round trips, crash semantics, checkpoints and truncation, damaged files.

use std::fs::{self, OpenOptions};
use std::io::{Seek, SeekFrom, Write};
use std::path::Path;

use snowline_storage::{
    Checkpoint, FsyncPolicy, LOCK_FILE, LOG_DIR, Log, LogStats, Lsn, RecordLog, Recovered, StorageError,
};

fn payloads(rec: &Recovered) -> Vec<Vec<u8>> {
    rec.records.iter().map(|r| r.payload.clone()).collect()
}

fn lsns(rec: &Recovered) -> Vec<u64> {
    rec.records.iter().map(|r| r.lsn.0).collect()
}

fn record(i: u32) -> Vec<u8> {
    format!("record-{i:06}-{}", "x".repeat((i % 50) as usize)).into_bytes()
}

#[test]
fn fresh_directory_recovers_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("node-3");
    let (log, rec) = Log::open(&dir).unwrap();
    assert_eq!(rec, Recovered::default());
    assert_eq!(log.path(), dir.join(LOG_DIR));
    assert_eq!(log.policy(), FsyncPolicy::PerWrite);
    assert_eq!(log.last_lsn(), Lsn::ZERO);
}

#[test]
fn stats_count_records_bytes_commits_and_fsyncs() {
    let tmp = tempfile::tempdir().unwrap();
    let (mut log, _) = Log::open_with(tmp.path().join("a"), FsyncPolicy::GROUP_DEFAULT).unwrap();
    assert_eq!(log.stats(), LogStats::default());
    log.append(b"abc");
    log.append(b"de");
    log.commit().unwrap();
    log.commit().unwrap(); // nothing pending: no write
    log.append(b"f");
    log.checkpoint(b"state").unwrap();
    log.truncate_before(Lsn(4)).unwrap();
    let stats = LogStats { records: 3, bytes: 6, commits: 3, fsyncs: 3, checkpoints: 1 };
    assert_eq!(log.stats(), stats);
    // Without fsyncs, commits are counted but not as fsyncs.
    let (mut log, _) = Log::open_with(tmp.path().join("b"), FsyncPolicy::None).unwrap();
    log.append(b"x");
    log.commit().unwrap();
    assert_eq!((log.stats().commits, log.stats().fsyncs), (1, 0));
}

#[test]
fn round_trip_preserves_order() {
    let tmp = tempfile::tempdir().unwrap();
    let mut expected = Vec::new();
    {
        let (mut log, _) = Log::open_with(tmp.path(), FsyncPolicy::GROUP_DEFAULT).unwrap();
        for batch in 0..5u32 {
            for i in 0..20 {
                let r = record(batch * 20 + i);
                assert_eq!(log.append(&r), Lsn(u64::from(batch * 20 + i + 1)));
                expected.push(r);
            }
            assert_eq!(log.commit().unwrap(), Lsn(u64::from(batch * 20 + 20)));
        }
        // An empty record is a record too.
        log.append(b"");
        expected.push(Vec::new());
        assert_eq!(log.close().unwrap(), Lsn(101));
    }
    let (mut log, rec) = Log::open(tmp.path()).unwrap();
    assert_eq!(payloads(&rec), expected);
    assert_eq!(lsns(&rec), (1..=101).collect::<Vec<_>>());
    assert_eq!(rec.checkpoint, None);
    // Numbering carries on after a reopen.
    assert_eq!(log.append(b"next"), Lsn(102));
    log.commit().unwrap();
    drop(log);
    let (_, rec) = Log::open(tmp.path()).unwrap();
    assert_eq!(rec.records.last().unwrap().payload, b"next");
}

/// `Log` buffers appends in its own memory, so dropping it without `commit` (what a crash does to the process)
/// loses them by construction; the disk never saw them. What a crash during a commit leaves is covered by the
/// torn-write and damaged-file tests below.
#[test]
fn uncommitted_records_are_not_recovered() {
    let tmp = tempfile::tempdir().unwrap();
    {
        let (mut log, _) = Log::open(tmp.path()).unwrap();
        log.append(b"a");
        log.append(b"b");
        log.commit().unwrap();
        log.append(b"lost-1");
        log.append(b"lost-2");
        assert_eq!(log.pending(), 2);
        assert_eq!(log.durable_lsn(), Lsn(2));
        // Dropped without commit: a crash.
    }
    let (mut log, rec) = Log::open(tmp.path()).unwrap();
    assert_eq!(payloads(&rec), [b"a".to_vec(), b"b".to_vec()]);
    // The lost LSNs are handed out again.
    assert_eq!(log.append(b"c"), Lsn(3));
}

#[test]
fn none_policy_survives_a_clean_close() {
    let tmp = tempfile::tempdir().unwrap();
    {
        let (mut log, _) = Log::open_with(tmp.path(), FsyncPolicy::None).unwrap();
        for i in 0..10 {
            log.append(&record(i));
            log.commit().unwrap();
        }
    }
    let (_, rec) = Log::open(tmp.path()).unwrap();
    assert_eq!(rec.records.len(), 10);
}

#[test]
fn checkpoint_and_truncation_keep_recovery_correct_and_the_log_bounded() {
    let tmp = tempfile::tempdir().unwrap();
    // Segments of 8 sectors (7 of batches), so that truncation drops some.
    let (mut log, _) = Log::open_sized(tmp.path(), FsyncPolicy::GROUP_DEFAULT, 4096).unwrap();
    let mut state = 0u64; // the "server state": the sum of the record numbers applied
    let mut n = 0u32;
    let mut removed = 0;
    for _ in 0..20 {
        for _ in 0..50 {
            n += 1;
            log.append(&n.to_le_bytes());
            state += u64::from(n);
            if log.batch_full() {
                log.commit().unwrap();
            }
        }
        log.commit().unwrap();
        let covered = log.checkpoint(&state.to_le_bytes()).unwrap();
        assert_eq!(covered, Lsn(u64::from(n)));
        // Ten more records after the checkpoint that recovery must replay.
        for _ in 0..10 {
            n += 1;
            log.append(&n.to_le_bytes());
            state += u64::from(n);
        }
        log.commit().unwrap();
        removed += log.truncate_before(covered.next()).unwrap();
        // Bounded: the records after the checkpoint and at most two segments of covered ones
        // (a segment holds 7 batches of up to 62 of these records).
        let stored = log.stored_records();
        assert!((10..=10 + 2 * 7 * 62).contains(&stored), "{stored} records stored");
        assert_eq!(removed + stored, u64::from(n), "what is dropped is what is no longer stored");
    }
    assert!(removed > 0);
    // Asking to drop records the checkpoint does not cover drops nothing.
    let stored = log.stored_records();
    assert_eq!(log.truncate_before(Lsn(u64::MAX)).unwrap(), 0);
    assert_eq!(log.stored_records(), stored);
    drop(log);

    let (mut log, rec) = Log::open(tmp.path()).unwrap();
    let cp = rec.checkpoint.clone().unwrap();
    assert_eq!(cp.lsn, Lsn(u64::from(n - 10)));
    let mut replayed = u64::from_le_bytes(cp.state.try_into().unwrap());
    assert_eq!(lsns(&rec), (u64::from(n - 9)..=u64::from(n)).collect::<Vec<_>>());
    for r in &rec.records {
        replayed += u64::from(u32::from_le_bytes(r.payload.clone().try_into().unwrap()));
    }
    assert_eq!(replayed, state);
    assert_eq!(log.append(b"after"), Lsn(u64::from(n) + 1));
}

#[test]
fn checkpoint_without_truncation_recovers_only_what_follows_it() {
    let tmp = tempfile::tempdir().unwrap();
    {
        let (mut log, _) = Log::open(tmp.path()).unwrap();
        log.append(b"1");
        log.append(b"2");
        // The checkpoint commits the pending records with it.
        assert_eq!(log.checkpoint(b"state@2").unwrap(), Lsn(2));
        assert_eq!(log.durable_lsn(), Lsn(2));
        log.append(b"3");
        log.commit().unwrap();
        assert_eq!(log.stored_records(), 3);
    }
    let (_, rec) = Log::open(tmp.path()).unwrap();
    assert_eq!(rec.checkpoint, Some(Checkpoint { lsn: Lsn(2), state: b"state@2".to_vec() }));
    assert_eq!(payloads(&rec), [b"3".to_vec()]);
}

#[test]
fn truncating_everything_keeps_numbering() {
    let tmp = tempfile::tempdir().unwrap();
    {
        let (mut log, _) = Log::open(tmp.path()).unwrap();
        for i in 0..5 {
            log.append(&record(i));
        }
        log.checkpoint(b"s").unwrap();
        assert_eq!(log.truncate_before(Lsn(6)).unwrap(), 5);
        assert_eq!(log.stored_records(), 0);
    }
    let (mut log, rec) = Log::open(tmp.path()).unwrap();
    assert!(rec.records.is_empty());
    assert_eq!(rec.last_lsn(), Lsn(5));
    assert_eq!(log.append(b"six"), Lsn(6));
    log.commit().unwrap();
    drop(log);
    let (_, rec) = Log::open(tmp.path()).unwrap();
    assert_eq!(lsns(&rec), [6]);
}

#[test]
fn second_open_of_the_same_directory_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let (_log, _) = Log::open(tmp.path()).unwrap();
    let err = Log::open(tmp.path()).err().expect("second open must fail");
    assert!(matches!(err, StorageError::InUse { .. }), "{err}");
    assert!(err.to_string().contains(&tmp.path().join(LOCK_FILE).display().to_string()), "{err}");
}

#[test]
fn unusable_directory_is_named() {
    let tmp = tempfile::tempdir().unwrap();
    let not_a_dir = tmp.path().join("node-3");
    fs::write(&not_a_dir, b"a file").unwrap();
    let err = Log::open(&not_a_dir).err().unwrap();
    let msg = err.to_string();
    assert!(msg.starts_with(&format!("cannot open data directory {}", not_a_dir.display())), "{msg}");
}

// ---- damaged files -------------------------------------------------------------------------------------

/// Writes `n` committed records (in several batches) into a fresh log under `dir` and returns its segment file
/// (of 128 KiB, so that the tests below can damage every page of it).
fn populated(dir: &Path, n: u32) -> std::path::PathBuf {
    let (mut log, _) = Log::open_sized(dir, FsyncPolicy::PerWrite, 128 << 10).unwrap();
    for i in 0..n {
        log.append(&record(i));
        if i % 100 == 99 {
            log.commit().unwrap();
        }
    }
    log.close().unwrap();
    let segments: Vec<_> = fs::read_dir(dir.join(LOG_DIR)).unwrap().map(|e| e.unwrap().path()).collect();
    assert_eq!(segments.len(), 1, "{segments:?}");
    segments[0].clone()
}

/// The open must fail with `Corrupted`, naming the file; never succeed silently with fewer records.
fn assert_corrupted(dir: &Path, file: &Path, what: &str) {
    match Log::open(dir) {
        Ok((_, rec)) => panic!("{what}: opened a damaged file and recovered {} records", rec.records.len()),
        Err(err) => {
            let msg = err.to_string();
            eprintln!("{what}: {msg}");
            assert!(matches!(err, StorageError::Corrupted { .. }), "{what}: wrong kind: {msg}");
            assert!(
                msg.starts_with(&format!("data file {} is corrupted or truncated: ", file.display())),
                "{what}: {msg}"
            );
            assert_eq!(err.path(), file);
        }
    }
}

#[test]
fn truncated_file_is_reported_with_its_name() {
    for keep in [0.0, 0.1, 0.5, 0.9] {
        let tmp = tempfile::tempdir().unwrap();
        let file = populated(tmp.path(), 2000);
        let len = fs::metadata(&file).unwrap().len();
        let cut = (len as f64 * keep) as u64;
        // Even to nothing: a crash cannot leave a named segment shorter than it was made.
        OpenOptions::new().write(true).open(&file).unwrap().set_len(cut).unwrap();
        assert_corrupted(tmp.path(), &file, &format!("truncated to {cut} of {len} bytes"));
    }
}

/// Overwrites `len` bytes at `at` with a pattern unlike anything the log or the records contain.
fn scribble(file: &Path, at: u64, len: usize) {
    let mut f = OpenOptions::new().write(true).open(file).unwrap();
    f.seek(SeekFrom::Start(at)).unwrap();
    f.write_all(&vec![0xA5; len]).unwrap();
    f.sync_all().unwrap();
}

#[test]
fn overwritten_record_bytes_are_reported_with_their_file() {
    let tmp = tempfile::tempdir().unwrap();
    let file = populated(tmp.path(), 2000);
    // Find a record's payload in the file and damage it in place (a flipped payload, not the log's framing).
    let bytes = fs::read(&file).unwrap();
    let needle = record(1234)[..13].to_vec();
    let at = bytes.windows(needle.len()).position(|w| w == needle.as_slice()).expect("record 1234 on disk");
    scribble(&file, (at + 8) as u64, 4);
    assert_corrupted(tmp.path(), &file, "payload overwritten");
}

/// Overwrites each 4 KiB page of the file in turn (on a fresh copy each time): every open must either fail
/// with `Corrupted` naming the file, or recover all records intact. Never a panic, never fewer or different
/// records: a crash leaves zeros or a whole sector, never bytes like these.
#[test]
fn every_overwritten_page_is_detected_or_harmless() {
    let tmp = tempfile::tempdir().unwrap();
    let original = populated(&tmp.path().join("original"), 2000);
    let pristine = fs::read(&original).unwrap();
    let (mut detected, mut harmless) = (0, 0);
    for at in (0..pristine.len() as u64).step_by(4096) {
        let dir = tmp.path().join(format!("page-{at}"));
        fs::create_dir(&dir).unwrap();
        fs::create_dir(dir.join(LOG_DIR)).unwrap();
        let file = dir.join(LOG_DIR).join(original.file_name().unwrap());
        fs::write(&file, &pristine).unwrap();
        scribble(&file, at, 4096);
        match Log::open(&dir) {
            Ok((_, rec)) => {
                assert_eq!(rec.records.len(), 2000, "page at {at}: lost records silently");
                assert!(rec.records.iter().enumerate().all(|(i, r)| r.payload == record(i as u32)), "page at {at}");
                harmless += 1;
            }
            Err(_) => {
                assert_corrupted(&dir, &file, &format!("page at {at} overwritten"));
                detected += 1;
            }
        }
        fs::remove_dir_all(&dir).unwrap();
    }
    eprintln!("{detected} overwritten pages detected, {harmless} harmless");
    assert_eq!(harmless, 0, "every page of a segment is checked, its free space too");
}

/// A crash in the middle of a commit leaves any subset of the batch's sectors on disk (each sector whole):
/// recovery drops that batch, which nobody was told about, and reports nothing; the log goes on after it (in
/// a new segment, never writing over what the crash left), and a later reopen still recovers everything.
#[test]
fn a_torn_batch_is_dropped_and_the_log_goes_on() {
    let tmp = tempfile::tempdir().unwrap();
    let file = populated(&tmp.path().join("original"), 300);
    let before = fs::read(&file).unwrap();
    // One more batch of about 20 sectors, after the others in the same segment (it ended cleanly).
    {
        let (mut log, _) = Log::open(tmp.path().join("original")).unwrap();
        for i in 300..500 {
            log.append(&record(i));
        }
        log.close().unwrap();
    }
    let after = fs::read(&file).unwrap();
    assert_eq!(fs::read_dir(tmp.path().join("original").join(LOG_DIR)).unwrap().count(), 1, "no new segment");
    let sectors: Vec<usize> =
        (0..after.len() / 512).filter(|s| before[s * 512..(s + 1) * 512] != after[s * 512..(s + 1) * 512]).collect();
    assert!(sectors.len() > 10, "{} sectors", sectors.len());
    let keep_patterns: [(&str, &dyn Fn(usize) -> bool); 5] = [
        ("none of it", &|_| false),
        ("the first half", &|i| i < sectors.len() / 2),
        ("all but the last", &|i| i + 1 < sectors.len()),
        ("only the last", &|i| i + 1 == sectors.len()),
        ("every other one", &|i| i % 2 == 0),
    ];
    for (what, keep) in keep_patterns {
        let dir = tmp.path().join(what.replace(' ', "-"));
        fs::create_dir_all(dir.join(LOG_DIR)).unwrap();
        let mut torn = before.clone();
        for (i, s) in sectors.iter().enumerate() {
            if keep(i) {
                torn[s * 512..(s + 1) * 512].copy_from_slice(&after[s * 512..(s + 1) * 512]);
            }
        }
        fs::write(dir.join(LOG_DIR).join(file.file_name().unwrap()), &torn).unwrap();
        {
            let (mut log, rec) = Log::open(&dir).unwrap_or_else(|e| panic!("{what}: {e}"));
            assert_eq!(payloads(&rec), (0..300).map(record).collect::<Vec<_>>(), "{what}");
            assert_eq!(log.append(b"after"), Lsn(301), "{what}");
            log.close().unwrap();
        }
        let segments = fs::read_dir(dir.join(LOG_DIR)).unwrap().count();
        assert_eq!(segments, if what == "none of it" { 1 } else { 2 }, "{what}: a torn tail is never written over");
        let (_, rec) = Log::open(&dir).unwrap_or_else(|e| panic!("{what}, reopened: {e}"));
        assert_eq!(rec.records.len(), 301, "{what}");
        assert_eq!(rec.records[300].payload, b"after", "{what}");
    }
}

/// A log reopened after a clean stop (or a crash between commits) goes on in its last segment: restarts do
/// not each cost a segment of disk.
#[test]
fn restarts_go_on_in_the_last_segment() {
    let tmp = tempfile::tempdir().unwrap();
    for i in 0..5u32 {
        let (mut log, rec) = Log::open(tmp.path()).unwrap();
        assert_eq!(rec.records.len(), i as usize);
        log.append(&record(i));
        log.commit().unwrap();
        // Dropped without close: as a crash after the commit.
    }
    assert_eq!(fs::read_dir(tmp.path().join(LOG_DIR)).unwrap().count(), 1);
    let (_, rec) = Log::open(tmp.path()).unwrap();
    assert_eq!(payloads(&rec), (0..5).map(record).collect::<Vec<_>>());
}

#[test]
fn overwritten_header_is_reported_with_its_name() {
    let tmp = tempfile::tempdir().unwrap();
    let file = populated(tmp.path(), 500);
    scribble(&file, 0, 512);
    assert_corrupted(tmp.path(), &file, "header overwritten");
}

// ---- a real process crash --------------------------------------------------------------------------------

/// Set in the child process `crash_child` runs in: the data directory and the policy to write with.
const CHILD_DIR: &str = "SNOWLINE_STORAGE_CRASH_DIR";
const CHILD_POLICY: &str = "SNOWLINE_STORAGE_CRASH_POLICY";

/// Not a test of its own: when the parent test re-runs this binary with `CHILD_DIR` set, it commits records
/// 1..=100, appends 101..=110 without committing, and aborts the process (no destructor runs, nothing is
/// closed cleanly).
#[test]
fn crash_child() {
    let Ok(dir) = std::env::var(CHILD_DIR) else { return };
    let policy: FsyncPolicy = std::env::var(CHILD_POLICY).unwrap().parse().unwrap();
    let (mut log, _) = Log::open_with(&dir, policy).unwrap();
    for i in 0..100 {
        log.append(&record(i));
        if i % 10 == 9 {
            log.commit().unwrap();
        }
    }
    for i in 100..110 {
        log.append(&record(i));
    }
    std::process::abort();
}

/// `crash_child`'s name as the test harness lists it: its module path without the crate.
fn child_test_name() -> String {
    let module = module_path!().split_once("::").map_or("", |(_, rest)| rest);
    if module.is_empty() { "crash_child".into() } else { format!("{module}::crash_child") }
}

fn crash_in_child(dir: &Path, policy: FsyncPolicy) {
    let status = std::process::Command::new(std::env::current_exe().unwrap())
        // The test's name in the suite binary: `log::crash_child`.
        .args(["--exact", &child_test_name(), "--nocapture", "--test-threads=1"])
        .env(CHILD_DIR, dir)
        .env(CHILD_POLICY, policy.to_string())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(!status.success(), "the child must have aborted");
}

#[test]
fn process_crash_keeps_exactly_the_committed_records() {
    for policy in [FsyncPolicy::PerWrite, FsyncPolicy::GROUP_DEFAULT] {
        let tmp = tempfile::tempdir().unwrap();
        crash_in_child(tmp.path(), policy);
        let (mut log, rec) = Log::open(tmp.path()).unwrap();
        assert_eq!(payloads(&rec), (0..100).map(record).collect::<Vec<_>>(), "{policy}");
        assert_eq!(log.append(b"after"), Lsn(101));
        log.commit().unwrap();
    }
}

/// `none` promises nothing across a crash, but recovery still gets a consistent, checksummed prefix.
#[test]
fn process_crash_under_none_recovers_a_prefix() {
    let tmp = tempfile::tempdir().unwrap();
    crash_in_child(tmp.path(), FsyncPolicy::None);
    let (_, rec) = Log::open(tmp.path()).unwrap();
    assert!(rec.records.len() <= 100);
    assert_eq!(payloads(&rec), (0..rec.records.len() as u32).map(record).collect::<Vec<_>>());
    eprintln!("none: {} of 100 committed records survived the crash", rec.records.len());
}

// ---- MemLog is a faithful model ------------------------------------------------------------------------

/// The same pseudo-random operations (append, commit, checkpoint, truncate, crash) on a `Log` and a `MemLog`
/// give the same LSNs, results and recoveries: the simulator's `MemLog` behaves like the real log.
#[test]
fn memlog_matches_log_under_random_operations() {
    use snowline_storage::MemLog;
    for seed in 1..=5u64 {
        let tmp = tempfile::tempdir().unwrap();
        let (mut log, _) = Log::open_sized(tmp.path(), FsyncPolicy::PerWrite, 2048).unwrap();
        let mut mem = MemLog::new();
        let mut x = seed;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for step in 0..400 {
            let ctx = format!("seed {seed} step {step}");
            match next() % 20 {
                0..=10 => {
                    let r = next().to_le_bytes();
                    assert_eq!(log.append(&r), mem.append(&r), "{ctx}");
                }
                11..=14 => assert_eq!(log.commit().unwrap(), mem.commit().unwrap(), "{ctx}"),
                15 => {
                    let s = next().to_le_bytes();
                    assert_eq!(log.checkpoint(&s).unwrap(), mem.checkpoint(&s).unwrap(), "{ctx}");
                }
                16..=17 => {
                    // The log drops whole segments, the model single records: the log keeps at least as many.
                    let at = Lsn(next() % (log.last_lsn().0 + 2));
                    log.truncate_before(at).unwrap();
                    mem.truncate_before(at).unwrap();
                    assert!(log.stored_records() >= mem.stored_records(), "{ctx}");
                }
                _ => {
                    drop(log);
                    let recovered;
                    (log, recovered) = Log::open(tmp.path()).unwrap();
                    assert_eq!(recovered, mem.crash(), "{ctx}");
                }
            }
            assert_eq!(log.last_lsn(), mem.last_lsn(), "{ctx}");
            assert_eq!(log.durable_lsn(), mem.durable_lsn(), "{ctx}");
            assert_eq!(log.pending(), mem.pending(), "{ctx}");
        }
    }
}

/// A background commit makes durable what was appended before it started, while appends go on; what is
/// appended meanwhile forms the next batch, and a crash loses only that.
#[test]
fn background_commits_run_while_appends_go_on() {
    let tmp = tempfile::tempdir().unwrap();
    {
        let (mut log, _) = Log::open_with(tmp.path(), FsyncPolicy::GROUP_DEFAULT).unwrap();
        let woken = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
        let w = std::sync::Arc::clone(&woken);
        log.set_commit_waker(std::sync::Arc::new(move || {
            w.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }));
        log.append(b"a");
        log.append(b"b");
        log.start_commit().unwrap();
        assert!(log.committing());
        assert_eq!(log.pending(), 0, "the batch went to the commit thread");
        log.append(b"c");
        log.start_commit().unwrap(); // one at a time: nothing happens
        while log.poll_commit().unwrap() < Lsn(2) {
            std::thread::yield_now();
        }
        assert!(!log.committing());
        assert_eq!(woken.load(std::sync::atomic::Ordering::SeqCst), 1, "the runtime was woken");
        assert_eq!((log.durable_lsn(), log.pending()), (Lsn(2), 1));
        log.start_commit().unwrap();
        log.append(b"lost");
        // Dropped mid-commit: the commit under way finishes, the rest is lost.
    }
    let (_, rec) = Log::open(tmp.path()).unwrap();
    assert_eq!(payloads(&rec), [b"a".to_vec(), b"b".to_vec(), b"c".to_vec()]);
}
