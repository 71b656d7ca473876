//! The protocols, one module per paper's algorithm family, each a set of sans-IO state machines
//! implementing [`snowline_core::Protocol`].
//!
//! Users select a protocol by name; [`canonical_name`] resolves names and aliases and [`with_protocol!`]
//! turns a name into a concrete protocol type for code generic over `P: Protocol`.

pub mod contrarian;
pub mod cops;
pub mod tomsic;

pub use contrarian::Contrarian;
pub use cops::{Cops, CopsSnow};
pub use tomsic::{Av, Cure, Cv, Op};

/// Every protocol a user can select, by canonical name.
pub const PROTOCOLS: &[&str] = &["cops", "cops-snow", "contrarian", "cure", "av", "op", "cv"];

/// Other names a protocol is known by in the papers: `(alias, canonical name)`.
pub const ALIASES: &[(&str, &str)] = &[("cc-lo", "cops-snow")];

/// Resolve a user-supplied protocol name or alias (case-insensitive) to its canonical name.
pub fn canonical_name(name: &str) -> Result<&'static str, UnknownProtocol> {
    let lower = name.to_ascii_lowercase();
    PROTOCOLS
        .iter()
        .copied()
        .find(|p| *p == lower)
        .or_else(|| ALIASES.iter().find(|(alias, _)| *alias == lower).map(|(_, p)| *p))
        .ok_or_else(|| UnknownProtocol(name.to_string()))
}

/// The consistency level a protocol claims, as a `snowline check --level` name (`docs/PROTOCOLS.md`
/// states each claim and why).
pub fn claimed_level(name: &str) -> Result<&'static str, UnknownProtocol> {
    match canonical_name(name)? {
        "cure" | "av" => Ok("tcc"),
        "op" => Ok("causal"),
        "cv" => Ok("rc"),
        "contrarian" => Ok("tcc"),
        "cops" | "cops-snow" => Ok("causal"),
        other => unreachable!("protocol {other} has no claimed level"),
    }
}

/// A protocol name that is not implemented.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownProtocol(pub String);

impl std::fmt::Display for UnknownProtocol {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "unknown protocol {:?}; valid protocols: {}", self.0, PROTOCOLS.join(", "))?;
        for (alias, name) in ALIASES {
            write!(f, " ({alias} = {name})")?;
        }
        Ok(())
    }
}

impl std::error::Error for UnknownProtocol {}

/// Run `$body` with `$P` bound to the protocol type named by `$name`:
/// `with_protocol!(name, P => run::<P>(args))` evaluates to `Result<_, UnknownProtocol>`.
#[macro_export]
macro_rules! with_protocol {
    ($name:expr, $P:ident => $body:expr) => {
        match $crate::canonical_name($name) {
            Ok("cure") => {
                type $P = $crate::Cure;
                Ok($body)
            }
            Ok("av") => {
                type $P = $crate::Av;
                Ok($body)
            }
            Ok("op") => {
                type $P = $crate::Op;
                Ok($body)
            }
            Ok("cv") => {
                type $P = $crate::Cv;
                Ok($body)
            }
            Ok("contrarian") => {
                type $P = $crate::Contrarian;
                Ok($body)
            }
            Ok("cops") => {
                type $P = $crate::Cops;
                Ok($body)
            }
            Ok("cops-snow") => {
                type $P = $crate::CopsSnow;
                Ok($body)
            }
            Ok(other) => unreachable!("protocol {other} is listed but not dispatched"),
            Err(e) => Err(e),
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;
    use snowline_core::Protocol;

    #[test]
    fn names_resolve_and_unknown_names_list_the_valid_ones() {
        assert_eq!(canonical_name("CV"), Ok("cv"));
        let err = canonical_name("paxos").unwrap_err().to_string();
        assert!(err.contains("paxos") && err.contains("cv"), "{err}");
        let name = with_protocol!("cv", P => P::NAME).unwrap();
        assert_eq!(name, "cv");
        assert_eq!(with_protocol!("Contrarian", P => P::NAME).unwrap(), "contrarian");
        assert_eq!(claimed_level("contrarian"), Ok("tcc"));
    }

    #[test]
    fn cc_lo_is_an_alias_of_cops_snow_and_both_cops_protocols_claim_causal() {
        // Contrarian §5.1: "We call CC-LO the system that implements the design of COPS-SNOW".
        assert_eq!(canonical_name("CC-LO"), Ok("cops-snow"));
        assert_eq!(with_protocol!("cc-lo", P => P::NAME).unwrap(), "cops-snow");
        assert_eq!(with_protocol!("cops", P => P::NAME).unwrap(), "cops");
        assert_eq!(claimed_level("cops"), Ok("causal"));
        assert_eq!(claimed_level("cc-lo"), Ok("causal"));
        for name in PROTOCOLS {
            assert_eq!(with_protocol!(name, P => P::NAME).unwrap(), *name);
        }
    }
}
