//! Helpers shared by the tests that drive the `snowline` binary as separate processes.
#![allow(dead_code)] // each test file uses its own subset

use std::path::PathBuf;
use std::process::{Command, Output};

/// `snowline ARGS`, run to completion.
pub fn snowline(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_snowline")).args(args).output().expect("running snowline")
}

/// Standard output then standard error.
pub fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

/// `snowline ARGS`, which must succeed; its output.
pub fn ok(args: &[&str]) -> String {
    let o = snowline(args);
    assert!(o.status.success(), "{args:?} failed: {}", text(&o));
    text(&o)
}

/// `snowline ARGS`, which must fail; its output.
pub fn refused(args: &[&str]) -> String {
    let o = snowline(args);
    assert!(!o.status.success(), "{args:?} should have been refused: {}", text(&o));
    text(&o)
}

/// A fresh directory for the test `name` of the file `file` (this process's own).
pub fn tempdir(file: &str, name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("snowline-{file}-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}
