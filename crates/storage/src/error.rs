//! [`StorageError`]: every failure names the directory or file it concerns.

use std::io;
use std::path::{Path, PathBuf};

/// A storage failure. Every variant names the directory or file, so an operator can act on the message.
#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    /// The data directory cannot be created or read.
    #[error("cannot open data directory {}: {error}", dir.display())]
    Directory {
        /// The data directory.
        dir: PathBuf,
        /// The operating system's error (said in the message, so not also the error's `source()`).
        error: io::Error,
    },
    /// The data file is damaged: a sector's or the checkpoint's checksum does not match, a segment is cut short,
    /// or records are missing. Nothing was recovered; the file was left as it was.
    #[error("data file {} is corrupted or truncated: {detail}", file.display())]
    Corrupted {
        /// The data file.
        file: PathBuf,
        /// What was found.
        detail: String,
    },
    /// Another process (or another `Log` in this one) has the data directory open (its lock file is held).
    #[error("data file {} is already in use (one server process per data directory): {detail}", file.display())]
    InUse {
        /// The lock file.
        file: PathBuf,
        /// The operating system's message.
        detail: String,
    },
    /// The data file belongs to another deployment: another protocol, topology or set of hosted servers.
    /// Nothing was changed; point the server at its own data directory (or an empty one).
    #[error("data file {} does not belong to this server: {detail}", file.display())]
    Mismatch {
        /// The data file.
        file: PathBuf,
        /// What differs.
        detail: String,
    },
    /// Reading or writing the data file failed (disk full, I/O error, failed fsync).
    #[error("cannot read or write data file {}: {detail}", file.display())]
    Io {
        /// The data file.
        file: PathBuf,
        /// The underlying message.
        detail: String,
    },
    /// The disk (or the quota) is full. The write did not happen and nothing committed was harmed: the
    /// records waiting for it stay waiting, and a later commit writes them once space is freed.
    #[error("data file {}: the disk is full ({detail})", file.display())]
    DiskFull {
        /// The data file.
        file: PathBuf,
        /// The underlying message.
        detail: String,
    },
    /// An earlier write to this log failed; whether it reached the disk is unknown, so the log refuses
    /// further writes. Drop it and open the directory again to recover.
    #[error("data file {} had a failed write earlier; reopen it to recover", file.display())]
    Poisoned {
        /// The data file.
        file: PathBuf,
    },
}

impl StorageError {
    /// The file or directory the error is about.
    pub fn path(&self) -> &Path {
        match self {
            StorageError::Directory { dir, .. } => dir,
            StorageError::Corrupted { file, .. }
            | StorageError::InUse { file, .. }
            | StorageError::Mismatch { file, .. }
            | StorageError::Io { file, .. }
            | StorageError::DiskFull { file, .. }
            | StorageError::Poisoned { file } => file,
        }
    }

    pub fn corrupted(file: &Path, detail: impl Into<String>) -> Self {
        StorageError::Corrupted { file: file.to_path_buf(), detail: detail.into() }
    }
}

/// Whether an I/O error means "no space left" (ENOSPC) or "quota exceeded" (EDQUOT).
pub(crate) fn is_disk_full(e: &io::Error) -> bool {
    matches!(e.kind(), io::ErrorKind::StorageFull | io::ErrorKind::QuotaExceeded)
}
