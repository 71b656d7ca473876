//! The SNOW paper's corner algorithms (Lu et al., OSDI 2016, §4.3–4.4), each giving up one of the four
//! properties: **Eiger-PS** (N+O+W, process-ordered serializability instead of S) and **COPS-DW** (S+N+O,
//! single-key writes through a distinguished writer instead of W).

pub mod cops_dw;
pub mod eiger_ps;

pub use cops_dw::CopsDw;
pub use eiger_ps::EigerPs;
