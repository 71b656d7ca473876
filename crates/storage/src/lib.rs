//! Durable storage for snowline servers (issue 6): the one crate that owns the storage engine.
//!
//! It owns the on-disk format and nothing protocol-specific: a server hands it opaque byte records and
//! opaque checkpoint states and gets them back, in order, when it restarts.
//!
//! - [`FsyncPolicy`] — when a write reaches the disk: `per-write` (default, safe: one fsync per record before
//!   its effect is visible), `group` (one fsync per batch of up to `max_batch` records or `max_delay_ms`;
//!   effects are held back until their batch is durable, so the same promise for everything seen), `none`
//!   (no fsync; a crash loses acknowledged writes — benchmarks only). See each variant for the exact promise.
//! - [`Log`] — the per-server write-ahead log in `<data dir>/wal/` (segment files of checksummed 512-byte
//!   sectors) and `<data dir>/checkpoint`: [`append`](RecordLog::append) buffers,
//!   [`commit`](RecordLog::commit) makes everything appended so far durable as one batch (one `pwrite`, one
//!   `fdatasync`), [`checkpoint`](RecordLog::checkpoint) replaces the state snapshot atomically, and
//!   [`truncate_before`](RecordLog::truncate_before) deletes the segments the checkpoint covers, so disk use
//!   is bounded. [`Log::open`] returns [`Recovered`]: the latest checkpoint and every committed record after
//!   it. The API is synchronous (plus one background commit at a time on the log's own thread): the
//!   runtime's event loop owns the log.
//! - [`MemLog`] — the same semantics in memory for the simulator, with [`MemLog::crash`].
//! - [`StorageError`] — every error names the directory or file; a damaged file is
//!   [`StorageError::Corrupted`] ("data file … is corrupted or truncated: …"), never a panic and never a
//!   silent loss. Every sector and the checkpoint carry a CRC-32; recovery reads every sector of every
//!   segment, free space included, and checks that no LSN is missing. What a crash in the middle of a commit
//!   leaves (some of the batch's sectors) is told apart from damage: the log module's docs say how.
//!
//! # Why a log of our own
//!
//! The log was a redb 4 B-tree until 2026-11-26 (chosen over fjall 3 for its group-commit rate and its fast
//! reopen). For an input log — append a batch, make it durable, read it all back once at a restart — a
//! B-tree commit does more than the job needs: it writes and checksums several pages and a commit slot
//! where an append writes the batch's sectors. `cargo run --release -p snowline-storage --example
//! storage_bench` on the project machine (100-byte values, 2026-11-26, the two builds back to back):
//!
//! | | redb 4.5 log | segment log |
//! | --- | --- | --- |
//! | per-write (one fdatasync per record) | 4,886–5,159 writes/s | 7,681–11,529 writes/s |
//! | groups of 10: time per commit, of which CPU | 240 µs, 125–130 µs | 114–115 µs, 47–49 µs |
//! | groups of 100 | 231,535–234,088 writes/s | 599,022–628,253 writes/s |
//! | `none`, a commit per write | 102,866–104,122 writes/s | 852,765–866,337 writes/s |
//! | reopen and verify 202,300 records | 65.8–67.1 ms | 33.1–44.1 ms |
//!
//! The commit thread's CPU was the largest cost of durable servers under load (`docs/DURABILITY.md`).
//!
//! # Crash semantics
//!
//! Records live in `Log`'s memory until `commit`; dropping the `Log` (or the process dying) before then
//! loses them, and recovery returns exactly the committed prefix. A crash during a commit leaves part of
//! that batch, which recovery drops (nobody was told about it), so recovery never returns part of a batch.
//! Under `per-write` and `group` a batch is on disk when `commit` returns; under `none` it is in the
//! operating system's cache (a process crash keeps it, a machine crash may not) until a clean close.

mod error;
pub mod host;
mod log;
mod mem;
mod policy;
mod record;

pub use error::StorageError;
pub use host::{DurableHost, Output, Refusal};
pub use log::{CHECKPOINT_FILE, DISK_RESERVE_BYTES, LOCK_FILE, LOG_DIR, Log, LogStats, RESERVE_FILE, SEGMENT_BYTES};
pub use mem::MemLog;
pub use policy::{FsyncPolicy, ParsePolicyError};
pub use record::{Checkpoint, Lsn, Record, RecordLog, Recovered};
