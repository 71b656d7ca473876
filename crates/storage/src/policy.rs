//! When a [`Log`](crate::Log) write reaches the disk.

use std::fmt;
use std::str::FromStr;

/// When records reach stable storage: the durability promise a server makes before it answers.
///
/// The [`Log`](crate::Log) itself never runs a timer. It makes everything appended so far durable when
/// [`commit`](crate::RecordLog::commit) is called; the policy tells the runtime's event loop *when* to call it and
/// tells the log whether a commit ends with an fdatasync.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum FsyncPolicy {
    /// One fsync per write: the runtime commits after every append, before it lets the effect of that
    /// record be seen by anyone (reply to a client, message to a peer). A record whose effect was seen
    /// survives a process crash or power loss. Slowest (one fsync, 3–4 ms on the machine measured).
    #[default]
    PerWrite,
    /// Group commit: the runtime holds back the externally visible effects of appended records and commits
    /// once per batch, in the background while it goes on serving (one commit at a time): at once when it
    /// has nothing else to do and either a few records wait or no commit started in the last `max_delay_ms`,
    /// else when `max_batch` records are pending or the oldest pending record is `max_delay_ms` old; then it
    /// releases the held effects. Same promise as [`PerWrite`]
    /// for everything that was seen; records appended but not yet committed at a crash are lost, and
    /// nobody was told about them. Costs up to `max_delay_ms` of latency, buys about 100× the throughput.
    ///
    /// [`PerWrite`]: FsyncPolicy::PerWrite
    Group {
        /// Longest time a record may wait for its commit, in milliseconds.
        max_delay_ms: u64,
        /// Commit as soon as this many records are pending.
        max_batch: usize,
    },
    /// No fsync: commits are written to the operating system's cache only. A process crash keeps them (the
    /// operating system has them); a machine crash or power cut loses what the operating system had not
    /// written yet (a clean close writes it), even though it was acknowledged. For benchmarks and tests only; recovery still sees a
    /// consistent prefix of the log, never a torn one.
    None,
}

impl FsyncPolicy {
    /// Group commit defaults: at most 2 ms of added latency, at most 128 records per fsync.
    pub const GROUP_DEFAULT: FsyncPolicy = FsyncPolicy::Group { max_delay_ms: 2, max_batch: 128 };

    /// Whether a commit under this policy promises durability (an fsync) when it returns.
    pub fn is_durable(self) -> bool {
        !matches!(self, FsyncPolicy::None)
    }
}

impl fmt::Display for FsyncPolicy {
    /// `per-write`, `group` or `none`: the names [`FromStr`] accepts (the group parameters are not shown).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            FsyncPolicy::PerWrite => "per-write",
            FsyncPolicy::Group { .. } => "group",
            FsyncPolicy::None => "none",
        })
    }
}

/// The error of parsing an [`FsyncPolicy`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown fsync policy {0:?}: expected per-write, group or none")]
pub struct ParsePolicyError(pub String);

impl FromStr for FsyncPolicy {
    type Err = ParsePolicyError;

    /// `per-write`, `group` (with [`FsyncPolicy::GROUP_DEFAULT`]'s parameters) or `none`, case-insensitive.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "per-write" | "perwrite" => Ok(FsyncPolicy::PerWrite),
            "group" => Ok(FsyncPolicy::GROUP_DEFAULT),
            "none" => Ok(FsyncPolicy::None),
            _ => Err(ParsePolicyError(s.to_string())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_and_display_round_trip() {
        for p in [FsyncPolicy::PerWrite, FsyncPolicy::GROUP_DEFAULT, FsyncPolicy::None] {
            assert_eq!(p.to_string().parse::<FsyncPolicy>().unwrap(), p);
        }
        assert_eq!(FsyncPolicy::default(), FsyncPolicy::PerWrite);
        assert_eq!("Per-Write".parse::<FsyncPolicy>().unwrap(), FsyncPolicy::PerWrite);
        let err = "fsync".parse::<FsyncPolicy>().unwrap_err();
        assert!(err.to_string().contains("per-write, group or none"), "{err}");
    }
}
