//! The analyzer's integration tests, in one binary.

mod common;
mod errors;
mod examples;
mod matrix;
mod table2;
