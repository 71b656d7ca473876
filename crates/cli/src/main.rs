//! The `snowline` binary: everything is in the library (`src/lib.rs`).

fn main() {
    snowline::main()
}
