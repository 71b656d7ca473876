//! The API crate's integration tests: one binary.
