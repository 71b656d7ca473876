//! Writes/s of the [`Log`] under each [`FsyncPolicy`], and the time to reopen (recover) N records.
//!
//! ```text
//! cargo run --release -p snowline-storage --example storage_bench -- [--dir DIR] [--records N] [--per-write N] [--writes N] [--batch N] [--value-bytes N]
//! ```
//!
//! Defaults: 100-byte values, 500 per-write commits, 50,000 writes in groups of 100 and with `none`, recovery
//! of 202,300 records (the figures in the crate documentation). DIR defaults to the system temporary directory;
//! point it at the disk the servers will use (a tmpfs makes fsync free).
#![allow(clippy::disallowed_methods)] // a benchmark reads the clock

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use snowline_storage::{FsyncPolicy, Log, RecordLog};

struct Args {
    dir: PathBuf,
    records: u64,
    per_write: u64,
    writes: u64,
    batch: usize,
    value_bytes: usize,
}

fn parse_args() -> Args {
    let mut args = Args {
        dir: std::env::temp_dir(),
        records: 202_300,
        per_write: 500,
        writes: 50_000,
        batch: 100,
        value_bytes: 100,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let value = it.next().unwrap_or_else(|| panic!("{flag} needs a value"));
        let num = || value.parse::<u64>().unwrap_or_else(|_| panic!("{flag}: not a number: {value}"));
        match flag.as_str() {
            "--dir" => args.dir = PathBuf::from(&value),
            "--records" => args.records = num(),
            "--per-write" => args.per_write = num(),
            "--writes" => args.writes = num(),
            "--batch" => args.batch = num() as usize,
            "--value-bytes" => args.value_bytes = num() as usize,
            _ => panic!("unknown flag {flag}"),
        }
    }
    args
}

/// CPU time (user + system) of this process so far.
fn cpu_time() -> Duration {
    // SAFETY: getrusage fills the struct it is given.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    let tv = |t: libc::timeval| Duration::from_secs(t.tv_sec as u64) + Duration::from_micros(t.tv_usec as u64);
    tv(usage.ru_utime) + tv(usage.ru_stime)
}

/// Appends `writes` values, committing every `batch` of them; returns writes/s including the final commit,
/// and the wall and CPU time per commit.
fn write_rate(dir: &Path, policy: FsyncPolicy, writes: u64, batch: usize, value: &[u8]) -> (f64, Duration, Duration) {
    let (mut log, _) = Log::open_with(dir, policy).expect("open");
    // The first segment is made before the clock starts.
    log.append(value);
    log.commit().expect("commit");
    let (start, cpu) = (Instant::now(), cpu_time());
    for i in 0..writes {
        log.append(value);
        if (i + 1) % batch as u64 == 0 {
            log.commit().expect("commit");
        }
    }
    log.commit().expect("commit");
    let (elapsed, cpu) = (start.elapsed(), cpu_time() - cpu);
    let commits = writes.div_ceil(batch as u64) as u32;
    (writes as f64 / elapsed.as_secs_f64(), elapsed / commits, cpu / commits)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn main() {
    let args = parse_args();
    let value = vec![0x5a; args.value_bytes];
    std::fs::create_dir_all(&args.dir).expect("--dir");
    let root = tempfile::tempdir_in(&args.dir).expect("temporary directory");
    println!("storage_bench: segment log, {}-byte values, in {}", args.value_bytes, root.path().display());

    let group = |max_batch| FsyncPolicy::Group { max_delay_ms: 2, max_batch };
    let cases = [
        ("per-write", FsyncPolicy::PerWrite, args.per_write, 1),
        ("group of 10", group(10), args.writes / 10, 10),
        ("group", group(args.batch), args.writes, args.batch),
        ("none", FsyncPolicy::None, args.writes, 1),
    ];
    for (name, policy, writes, batch) in cases {
        let dir = root.path().join(name.replace(' ', "-"));
        let (rate, wall, cpu) = write_rate(&dir, policy, writes, batch, &value);
        println!(
            "{name:>12}: {rate:>10.0} writes/s  ({writes} writes, {batch} per commit; per commit {:.0} µs, {:.0} µs of CPU)",
            wall.as_secs_f64() * 1e6,
            cpu.as_secs_f64() * 1e6
        );
    }

    let dir = root.path().join("recovery");
    {
        let (mut log, _) = Log::open_with(&dir, FsyncPolicy::None).expect("open");
        for i in 0..args.records {
            log.append(&value);
            if (i + 1) % 1000 == 0 {
                log.commit().expect("commit");
            }
        }
        log.close().expect("close");
    }
    let start = Instant::now();
    let (_log, recovered) = Log::open(&dir).expect("reopen");
    let elapsed = start.elapsed();
    assert_eq!(recovered.records.len() as u64, args.records);
    println!("    recovery: {:>10.1} ms   (reopen, read and verify {} records)", ms(elapsed), args.records);
}
