//! The strong family: read-write transactions that lock, certify, vote and abort (2PL now; the Jessy
//! family, Rococo and OCC to follow).

pub mod twopl;

pub use twopl::TwoPl;
