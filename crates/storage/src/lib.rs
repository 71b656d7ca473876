//! Durable storage for snowline servers (issue 6): the one crate that owns the storage engine.
//!
//! It owns the on-disk format and nothing protocol-specific: a server hands it opaque byte records and
//! opaque checkpoint states and gets them back, in order, when it restarts.
//!
//! - [`FsyncPolicy`] — when a write reaches the disk: `per-write` (default, safe: one fsync per record before
//!   its effect is visible), `group` (one fsync per batch of up to `max_batch` records or `max_delay_ms`;
//!   effects are held back until their batch is durable, so the same promise for everything seen), `none`
//!   (no fsync; a crash loses acknowledged writes — benchmarks only). See each variant for the exact promise.
//! - [`Log`] — the per-server log in `<data dir>/log.redb`: [`append`](RecordLog::append) buffers,
//!   [`commit`](RecordLog::commit) makes everything appended so far durable in one redb write transaction,
//!   [`checkpoint`](RecordLog::checkpoint) stores a state snapshot in its own table, and
//!   [`truncate_before`](RecordLog::truncate_before) drops the records the checkpoint covers, so disk use is
//!   bounded. [`Log::open`] returns [`Recovered`]: the latest checkpoint and every committed record after it.
//!   The API is synchronous: the runtime's event loop owns the log and calls `commit` once per batch.
//! - [`MemLog`] — the same semantics in memory for the simulator, with [`MemLog::crash`].
//! - [`StorageError`] — every error names the directory or file; a damaged file is
//!   [`StorageError::Corrupted`] ("data file … is corrupted or truncated: …"), never a panic and never a
//!   silent loss. [`Log::open`] runs redb's integrity check (every reachable page's checksum and the
//!   allocator state); every record and the checkpoint carry a CRC-32 (the record's bound to its LSN)
//!   verified on recovery; recovery checks that no LSN is missing. Some of redb's checks of on-disk bytes are
//!   `unreachable!()`s rather than errors, so the log also turns a panic inside redb into `Corrupted` (the
//!   default panic hook still prints it to stderr). `[profile.dev.package.redb] debug-assertions = false` in
//!   the workspace keeps debug builds from asserting where release builds return an error.
//!
//! # Why redb
//!
//! redb 4 against fjall 3, measured on the project machine with 100-byte values:
//!
//! | | redb 4 | fjall 3 |
//! | --- | --- | --- |
//! | fsync per write (fsync ≈ 3–4 ms here) | 258 writes/s | 306 writes/s |
//! | group commit, 100 writes per fsync | 25,474 writes/s | 19,235 writes/s |
//! | reopen + full scan of 202,300 entries | 102 ms | 1,301 ms (replays its journal) |
//! | clean build (`/work/shared/CRATES.md`) | about 25 s | about 40 s |
//!
//! `storage_bench` on this crate's `Log` (redb 4.5, 100-byte values, same machine, 2026-11-22, three runs):
//! per-write 4,055–4,207 writes/s (one fdatasync per commit, counted with strace, so an fsync cost about
//! 0.25 ms then: the disk varies, and the 3–4 ms above were measured at another moment), group of 100
//! 205,820–224,008 writes/s, `none` with a commit per write 79,087–81,693 writes/s, reopen of 202,300 records
//! 70–71 ms including redb's full integrity check and the checksum verification.
//!
//! Per-write fsync is bound by the disk either way; with group commit — the policy that matters for
//! throughput — redb is faster, and it recovers more than ten times faster because it has no journal to
//! replay. Its file format is stable and it builds faster. It allows a single writer, which suits us: one
//! event loop per server process owns its storage. `cargo run --release -p snowline-storage --example
//! storage_bench` reproduces the redb figures.
//!
//! # Crash semantics
//!
//! Records live in `Log`'s memory until `commit`; dropping the `Log` (or the process dying) before then
//! loses them, and recovery returns exactly the committed prefix. redb commits are atomic (a write
//! transaction dropped without `commit` is aborted, and a crash during a commit leaves the previous commit),
//! so recovery never sees part of a batch. With `Durability::Immediate` (`per-write`, `group`) a commit is on
//! disk when `commit` returns; with `Durability::None` (`none`) it is on disk only after a later durable
//! commit or a clean close.

mod error;
pub mod host;
mod log;
mod mem;
mod policy;
mod record;

pub use error::StorageError;
pub use host::{DurableHost, Output, Refusal};
pub use log::{DISK_RESERVE_BYTES, LOG_FILE, Log, LogStats, RESERVE_FILE};
pub use mem::MemLog;
pub use policy::{FsyncPolicy, ParsePolicyError};
pub use record::{Checkpoint, Lsn, Record, RecordLog, Recovered};
