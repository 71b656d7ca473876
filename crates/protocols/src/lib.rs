//! The protocols, one module per paper's algorithm family, each a set of sans-IO state machines
//! implementing [`snowline_core::Protocol`].
//!
//! Users select a protocol by name; [`canonical_name`] resolves names and aliases and [`with_protocol!`]
//! turns a name into a concrete protocol type for code generic over `P: Protocol`.

pub mod causal;
pub mod components;
pub mod fuzz;
pub mod snow;
pub mod strong;

pub use causal::{Av, Contrarian, Cops, CopsSnow, Cure, Cv, Op, contrarian, cops, tomsic};
pub use snow::{CopsDw, EigerPs, cops_dw, eiger_ps};
pub use strong::{
    AmcastKv, Nmsi, Psi, RaftKv, Rc, Rococo, RococoSnow, Ser, Si, TpcKv, TwoPl, Us, amcast_kv, jessy, raft_kv, rococo,
    tpc_kv, twopl,
};

pub use strong::{Occ, occ};

#[doc(hidden)]
pub use snowline_core as __core;
use snowline_core::Offers;

/// The registry: one line per protocol — its type (which carries its name, `Protocol::NAME`, and what it
/// offers, `Protocol::OFFERS`), the other names the papers use for it, the consistency level it claims (a
/// `snowline check --level` name; `docs/PROTOCOLS.md` says why), and whether its commit versions totally
/// order each key's writes (a single-copy protocol: the checker then reads the version order from the
/// history instead of inferring it). Registering a protocol is adding its line here; [`PROTOCOLS`],
/// [`canonical_name`], [`claimed_level`] and [`with_protocol!`] all follow from it.
#[doc(hidden)]
#[macro_export]
macro_rules! __registry {
    ($mode:ident $args:tt) => {
        $crate::__registry_apply! { $mode $args
            [$crate::Cops, aliases [], claims "causal", orders_versions false]
            [$crate::CopsSnow, aliases ["cc-lo"], claims "causal", orders_versions false]
            [$crate::Contrarian, aliases [], claims "tcc", orders_versions false]
            [$crate::Cure, aliases [], claims "tcc", orders_versions false]
            [$crate::Av, aliases [], claims "tcc", orders_versions false]
            [$crate::Op, aliases [], claims "causal", orders_versions false]
            [$crate::Cv, aliases [], claims "rc", orders_versions false]
            [$crate::TwoPl, aliases ["2pl-2pc"], claims "strict-ser", orders_versions true]
            [$crate::Occ, aliases [], claims "strict-ser", orders_versions true]
            [$crate::RaftKv, aliases ["raft"], claims "strict-ser", orders_versions true]
            [$crate::AmcastKv, aliases ["skeen-kv"], claims "ser", orders_versions true]
            [$crate::TpcKv, aliases ["2pc-kv"], claims "strict-ser", orders_versions true]
            [$crate::Nmsi, aliases ["jessy", "jessy-nmsi"], claims "nmsi", orders_versions true]
            [$crate::Rc, aliases ["jessy-rc"], claims "rc", orders_versions true]
            [$crate::Ser, aliases ["jessy-ser", "p-store"], claims "ser", orders_versions true]
            [$crate::Us, aliases ["jessy-us", "gmu"], claims "us", orders_versions true]
            [$crate::Si, aliases ["jessy-si", "serrano"], claims "si", orders_versions true]
            [$crate::Psi, aliases ["jessy-psi", "walter"], claims "psi", orders_versions true]
            [$crate::Rococo, aliases [], claims "strict-ser", orders_versions true]
            [$crate::RococoSnow, aliases [], claims "strict-ser", orders_versions true]
            [$crate::EigerPs, aliases [], claims "pos", orders_versions true]
            [$crate::CopsDw, aliases [], claims "strict-ser", orders_versions true]
        }
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __registry_apply {
    (dispatch { $name:expr, $P:ident, $body:expr }
        $([$T:ty, aliases [$($alias:literal),*], claims $level:literal, orders_versions $ord:literal])*) => {
        match $crate::canonical_name($name) {
            Err(e) => Err(e),
            Ok(name) => 'found: {
                $(
                    if name == <$T as $crate::__core::Protocol>::NAME {
                        type $P = $T;
                        break 'found Ok($body);
                    }
                )*
                unreachable!("protocol {name} is registered, so it is dispatched")
            }
        }
    };
    (entries {} $([$T:ty, aliases [$($alias:literal),*], claims $level:literal, orders_versions $ord:literal])*) => {
        &[$($crate::Registered {
            name: <$T as $crate::__core::Protocol>::NAME,
            aliases: &[$($alias),*],
            claimed_level: $level,
            offers: <$T as $crate::__core::Protocol>::OFFERS,
            orders_versions: $ord,
        }),*]
    };
}

/// One registered protocol (see [`__registry!`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Registered {
    pub name: &'static str,
    pub aliases: &'static [&'static str],
    pub claimed_level: &'static str,
    pub offers: Offers,
    pub orders_versions: bool,
}

/// Every protocol a user can select, in registry order.
pub static PROTOCOLS: &[Registered] = __registry!(entries {});

/// The names of every protocol, in registry order.
pub fn names() -> Vec<&'static str> {
    PROTOCOLS.iter().map(|p| p.name).collect()
}

/// The registry entry of a protocol name or alias (case-insensitive).
pub fn lookup(name: &str) -> Result<&'static Registered, UnknownProtocol> {
    let lower = name.to_ascii_lowercase();
    PROTOCOLS
        .iter()
        .find(|p| p.name == lower || p.aliases.contains(&lower.as_str()))
        .ok_or_else(|| UnknownProtocol(name.to_string()))
}

/// Resolve a user-supplied protocol name or alias (case-insensitive) to its canonical name.
pub fn canonical_name(name: &str) -> Result<&'static str, UnknownProtocol> {
    lookup(name).map(|p| p.name)
}

/// The consistency level a protocol claims, as a `snowline check --level` name.
pub fn claimed_level(name: &str) -> Result<&'static str, UnknownProtocol> {
    lookup(name).map(|p| p.claimed_level)
}

/// The names of the protocols that offer what `request` needs (for "use one of ..." errors).
pub fn offering(request: &snowline_core::Request) -> Vec<&'static str> {
    PROTOCOLS.iter().filter(|p| p.offers.missing(request).is_none()).map(|p| p.name).collect()
}

/// Refuse, up front, a request the protocol does not offer: the error names the protocols that do.
pub fn check_offered(protocol: &str, request: &snowline_core::Request) -> Result<(), String> {
    let entry = lookup(protocol).map_err(|e| e.to_string())?;
    match entry.offers.missing(request) {
        None => Ok(()),
        Some(what) => {
            let others = offering(request);
            let alternatives = if others.is_empty() {
                "no protocol offers them yet".to_string()
            } else {
                format!("use {}", others.join(", "))
            };
            Err(format!("{} offers no {what}; {alternatives}", entry.name))
        }
    }
}

/// Refuse, up front, an interactive transaction that reads `reads` and then writes `writes` where the
/// protocol has no blind writes and it writes a key it did not read ([`Offers::unread_writes`]; the
/// protocol's client node refuses it too).
pub fn check_transaction(
    protocol: &str,
    reads: &[snowline_core::Key],
    writes: &[(snowline_core::Key, snowline_core::Value)],
) -> Result<(), String> {
    let entry = lookup(protocol).map_err(|e| e.to_string())?;
    let unread = entry.offers.unread_writes(reads, writes);
    if unread.is_empty() { Ok(()) } else { Err(Offers::blind_write_refusal(entry.name, &unread)) }
}

/// A protocol name that is not implemented.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownProtocol(pub String);

impl std::fmt::Display for UnknownProtocol {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "unknown protocol {:?}", self.0)?;
        let known = PROTOCOLS.iter().flat_map(|p| std::iter::once(p.name).chain(p.aliases.iter().copied()));
        if let Some(near) = snowline_core::suggest::did_you_mean(&self.0, known) {
            write!(f, " (did you mean {near}?)")?;
        }
        write!(f, "; valid protocols: {}", names().join(", "))?;
        for p in PROTOCOLS {
            for alias in p.aliases {
                write!(f, " ({alias} = {})", p.name)?;
            }
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
        $crate::__registry!(dispatch { $name, $P, $body })
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
        for p in PROTOCOLS {
            assert_eq!(with_protocol!(p.name, P => P::NAME).unwrap(), p.name);
            assert_eq!(with_protocol!(p.name, P => P::OFFERS).unwrap(), p.offers);
        }
    }

    #[test]
    fn a_misspelt_protocol_name_gets_a_suggestion() {
        let err = canonical_name("nmis").unwrap_err().to_string();
        assert!(err.contains("unknown protocol \"nmis\" (did you mean nmsi?)"), "{err}");
        let err = canonical_name("contrarain").unwrap_err().to_string();
        assert!(err.contains("(did you mean contrarian?)"), "{err}");
        let err = canonical_name("cc-l0").unwrap_err().to_string();
        assert!(err.contains("(did you mean cc-lo?)"), "{err}");
        assert!(!canonical_name("paxos").unwrap_err().to_string().contains("did you mean"));
    }

    #[test]
    fn a_transaction_writing_a_key_it_did_not_read_is_refused_without_blind_writes() {
        let writes = vec![("a".into(), "2".into())];
        let err = check_transaction("nmsi", &[], &writes).unwrap_err();
        assert!(err.contains("nmsi offers no blind writes: a transaction must read each key it writes"), "{err}");
        assert!(check_transaction("nmsi", &["a".into()], &writes).is_ok());
        assert!(check_transaction("2pl", &[], &writes).is_ok());
        assert!(check_transaction("rc", &[], &writes).is_ok());
    }

    #[test]
    fn a_request_a_protocol_does_not_offer_is_refused_naming_those_that_do() {
        let update = snowline_core::Request::Update { writes: vec![("k".into(), "v".into())] };
        let err = check_offered("contrarian", &update).unwrap_err();
        assert!(err.contains("contrarian offers no write transactions") && err.contains("cure"), "{err}");
        assert!(check_offered("cure", &update).is_ok());
    }
}
