//! The causal family: causally consistent, geo-replicated protocols with read-only transactions
//! (COPS, COPS-SNOW / CC-LO, Contrarian) and, for the Tomsic skeleton, blind write transactions
//! (Cure, AV, OP, CV).

pub mod contrarian;
pub mod cops;
pub mod tomsic;

pub use contrarian::Contrarian;
pub use cops::{Cops, CopsSnow};
pub use tomsic::{Av, Cure, Cv, Op};
