//! Giving freed memory back to the system. glibc's allocator keeps what the process freed (in its arenas)
//! for later allocations, so after an attack that drove the heap up (requests in flight, queued replies)
//! the resident set stayed at its peak for good; `malloc_trim(0)` returns the free pages. The event loop
//! calls [`Trimmer::tick`] every [`TRIM_EVERY`] and trims when the server was quiet meanwhile, so a busy
//! server never pays for it. Measured in `docs/OPERATIONS.md` ("Memory").

use tokio::time::{Duration, Instant};

/// How often the event loop considers trimming.
pub(crate) const TRIM_EVERY: Duration = Duration::from_secs(10);
/// A server that handled fewer inputs than this over [`TRIM_EVERY`] counts as quiet.
const QUIET_INPUTS: u64 = 20_000;

#[derive(Debug, Default)]
pub(crate) struct Trimmer {
    /// Inputs handled when the last tick looked.
    seen: u64,
    /// Inputs handled when memory was last trimmed.
    trimmed_at: Option<u64>,
}

impl Trimmer {
    /// `inputs`: inputs handled so far. Trims when fewer than [`QUIET_INPUTS`] came since the last tick and
    /// some came since the last trim (an idle server is trimmed once); returns how long a trim took.
    pub(crate) fn tick(&mut self, inputs: u64) -> Option<Duration> {
        let quiet = inputs.saturating_sub(self.seen) < QUIET_INPUTS;
        self.seen = inputs;
        if !quiet || self.trimmed_at == Some(inputs) {
            return None;
        }
        self.trimmed_at = Some(inputs);
        let started = Instant::now();
        give_back();
        Some(started.elapsed())
    }
}

/// Return the allocator's free memory to the system (glibc; elsewhere nothing).
pub(crate) fn give_back() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only releases free memory of the allocator's own arenas; it takes no pointer.
    unsafe {
        libc::malloc_trim(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trims_once_when_quiet_never_when_busy() {
        let mut t = Trimmer::default();
        assert!(t.tick(100).is_some(), "quiet, with news since the start");
        assert!(t.tick(100).is_none(), "nothing new since the last trim");
        assert!(t.tick(100 + QUIET_INPUTS).is_none(), "busy");
        assert!(t.tick(101 + QUIET_INPUTS).is_some(), "quiet again");
    }
}
