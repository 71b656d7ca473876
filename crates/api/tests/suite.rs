//! The API crate's integration tests (one binary): servers and their gRPC endpoints run as tasks of the
//! test's own process, and tonic's generated client (or raw HTTP/2, for the hostile ones) calls them.

mod common;
mod errors_and_hostile_clients;
mod sessions_and_transactions;
