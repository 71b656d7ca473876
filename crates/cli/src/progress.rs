//! The progress bar of sweeps: drawn on a terminal, hidden when stdout is not one (logs, CI, pipes).

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;

/// A bar of `len` runs; print through `ProgressBar::suspend` while it is shown.
pub fn bar(len: u64) -> ProgressBar {
    let target =
        if std::io::stdout().is_terminal() { ProgressDrawTarget::stdout() } else { ProgressDrawTarget::hidden() };
    let bar = ProgressBar::with_draw_target(Some(len), target);
    bar.set_style(
        ProgressStyle::with_template("{elapsed_precise} [{bar:30}] {pos}/{len} runs, eta {eta} {msg}")
            .expect("a valid template")
            .progress_chars("=> "),
    );
    bar
}
