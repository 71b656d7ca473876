//! The protocols, one module per paper's algorithm family, each a set of sans-IO state machines
//! implementing [`snowline_core::Protocol`].
//!
//! Users select a protocol by name; [`canonical_name`] resolves names and aliases and [`with_protocol!`]
//! turns a name into a concrete protocol type for code generic over `P: Protocol`.

pub mod causal;
pub mod components;
pub mod fuzz;
pub mod ramp;
pub mod snow;
pub mod strong;

pub use causal::{Av, Contrarian, Cops, CopsSnow, Cure, Cv, Op, contrarian, cops, tomsic};
pub use ramp::{NoCc, RampF, RampH, RampS};
pub use snow::{CopsDw, EigerPs, cops_dw, eiger_ps};
pub use strong::{
    AmcastKv, Nmsi, Psi, RaftKv, Rc, Rococo, RococoSnow, Ser, Si, TpcKv, TwoPl, Us, amcast_kv, jessy, raft_kv, rococo,
    tpc_kv, twopl,
};

pub use strong::{Lwnr, Lwsr, Occ, occ};

#[doc(hidden)]
pub use snowline_core as __core;
use snowline_core::Offers;

/// The registry: one line per protocol — its type (which carries its name, `Protocol::NAME`, and what it
/// offers, `Protocol::OFFERS`), the other names the papers use for it, the consistency level it claims (a
/// `snowline check --level` name; `docs/PROTOCOLS.md` says why), and whether its commit versions totally
/// order each key's writes (a single-copy protocol: the checker then reads the version order from the
/// history instead of inferring it), and its family (`Registered::family`). Registering a protocol is adding its line here; [`PROTOCOLS`],
/// [`canonical_name`], [`claimed_level`] and [`with_protocol!`] all follow from it.
#[doc(hidden)]
#[macro_export]
macro_rules! __registry {
    ($mode:ident $args:tt) => {
        $crate::__registry_apply! { $mode $args
            [$crate::Cops, aliases [], claims "causal", orders_versions false, family "causal"]
            [$crate::CopsSnow, aliases ["cc-lo"], claims "causal", orders_versions false, family "causal"]
            [$crate::Contrarian, aliases [], claims "tcc", orders_versions false, family "causal"]
            [$crate::Cure, aliases [], claims "tcc", orders_versions false, family "causal"]
            [$crate::Av, aliases [], claims "tcc", orders_versions false, family "causal"]
            [$crate::Op, aliases [], claims "causal", orders_versions false, family "causal"]
            [$crate::Cv, aliases [], claims "rc", orders_versions false, family "causal"]
            [$crate::TwoPl, aliases ["2pl-2pc"], claims "strict-ser", orders_versions true, family "snow"]
            [$crate::Occ, aliases [], claims "strict-ser", orders_versions true, family "snow"]
            [$crate::RaftKv, aliases ["raft"], claims "strict-ser", orders_versions true, family "replicated"]
            [$crate::AmcastKv, aliases ["skeen-kv"], claims "ser", orders_versions true, family "replicated"]
            [$crate::TpcKv, aliases ["2pc-kv"], claims "strict-ser", orders_versions true, family "replicated"]
            [$crate::Nmsi, aliases ["jessy", "jessy-nmsi"], claims "nmsi", orders_versions true, family "jessy"]
            [$crate::Rc, aliases ["jessy-rc"], claims "rc", orders_versions true, family "jessy"]
            [$crate::Ser, aliases ["jessy-ser", "p-store"], claims "ser", orders_versions true, family "jessy"]
            [$crate::Us, aliases ["jessy-us", "gmu"], claims "us", orders_versions true, family "jessy"]
            [$crate::Si, aliases ["jessy-si", "serrano"], claims "si", orders_versions true, family "jessy"]
            [$crate::Psi, aliases ["jessy-psi", "walter"], claims "psi", orders_versions true, family "jessy"]
            [$crate::Rococo, aliases [], claims "strict-ser", orders_versions true, family "snow"]
            [$crate::RococoSnow, aliases [], claims "strict-ser", orders_versions true, family "snow"]
            [$crate::EigerPs, aliases [], claims "pos", orders_versions true, family "snow"]
            [$crate::CopsDw, aliases [], claims "strict-ser", orders_versions true, family "snow"]
            [$crate::RampF, aliases ["ramp-fast"], claims "ra", orders_versions false, family "ramp"]
            [$crate::RampS, aliases ["ramp-small"], claims "ra", orders_versions false, family "ramp"]
            [$crate::RampH, aliases ["ramp-hybrid"], claims "ra", orders_versions false, family "ramp"]
            [$crate::NoCc, aliases ["nwnr"], claims "rc", orders_versions false, family "ramp"]
            [$crate::Lwnr, aliases [], claims "rc", orders_versions true, family "ramp"]
            [$crate::Lwsr, aliases [], claims "rc", orders_versions true, family "ramp"]
        }
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __registry_apply {
    (dispatch { $name:expr, $P:ident, $body:expr }
        $([$T:ty, aliases [$($alias:literal),*], claims $level:literal, orders_versions $ord:literal, family $family:literal])*) => {
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
    (entries {} $([$T:ty, aliases [$($alias:literal),*], claims $level:literal, orders_versions $ord:literal, family $family:literal])*) => {
        &[$($crate::Registered {
            name: <$T as $crate::__core::Protocol>::NAME,
            aliases: &[$($alias),*],
            claimed_level: $level,
            offers: <$T as $crate::__core::Protocol>::OFFERS,
            orders_versions: $ord,
            family: $family,
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
    /// The family it belongs to, for grouping in tables and charts: `causal` (COPS, Contrarian, Tomsic et
    /// al.), `snow` (the SNOW paper's strictly serializable protocols and corners), `replicated` (key-value
    /// stores over Raft groups), `jessy` (the Jessy family's criteria) or `ramp` (RAMP's read atomic
    /// variants and the RAMP paper's baselines: `nocc`, `lwnr`, `lwsr`).
    pub family: &'static str,
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

/// One operation of the `snowline` command line's clients (`put`, `get`, `rot`, `txn`), and which offers
/// serve it: [`client_operations`] lists those a protocol serves, [`ClientOperation::protocols`] the
/// protocols serving one, both from the registry's [`Offers`].
#[derive(Debug)]
pub struct ClientOperation {
    /// The subcommand: `put`, `get`, `rot` or `txn`.
    pub command: &'static str,
    /// Its form: `txn --get KEY... [--put KEY=VALUE...]`.
    pub usage: &'static str,
    /// What it does, in a few words.
    pub what: &'static str,
    /// One example (arguments after `snowline --cluster DIR`).
    pub example: &'static str,
    served: fn(&Offers) -> bool,
}

impl ClientOperation {
    /// Whether a protocol offering `offers` serves this operation.
    pub fn served_by(&self, offers: &Offers) -> bool {
        (self.served)(offers)
    }

    /// The protocols that serve it, in registry order.
    pub fn protocols(&self) -> Vec<&'static str> {
        PROTOCOLS.iter().filter(|p| self.served_by(&p.offers)).map(|p| p.name).collect()
    }
}

fn offered(offers: &Offers, request: snowline_core::Request) -> bool {
    offers.missing(&request).is_none()
}

fn keys(names: &[&str]) -> Vec<snowline_core::Key> {
    names.iter().map(|&k| k.into()).collect()
}

/// The client operations of the command line, each served where the offers have what its requests need.
/// `txn` runs as an interactive transaction where the protocol offers them (and then writes only keys it
/// read, where it offers no blind writes), else as a blind write transaction (`Request::Update`).
pub static CLIENT_OPERATIONS: &[ClientOperation] = &[
    ClientOperation {
        command: "put",
        usage: "put KEY VALUE",
        what: "write one key",
        example: "put k1 hello",
        served: |o| offered(o, snowline_core::Request::Put { key: "k1".into(), value: "hello".into() }),
    },
    ClientOperation {
        command: "get",
        usage: "get KEY",
        what: "read one key",
        example: "get k1",
        served: |o| offered(o, snowline_core::Request::Rot { keys: keys(&["k1"]) }),
    },
    ClientOperation {
        command: "rot",
        usage: "rot KEY KEY...",
        what: "read several keys from one snapshot",
        example: "rot k1 k2",
        served: |o| offered(o, snowline_core::Request::Rot { keys: keys(&["k1", "k2"]) }),
    },
    ClientOperation {
        command: "txn",
        usage: "txn --put KEY=VALUE...",
        what: "write several keys atomically, without reading them",
        example: "txn --put k1=a --put k2=b",
        served: |o| {
            let writes = vec![("k1".into(), "a".into()), ("k2".into(), "b".into())];
            if o.interactive {
                o.unread_writes(&[], &writes).is_empty()
            } else {
                offered(o, snowline_core::Request::Update { writes })
            }
        },
    },
    ClientOperation {
        command: "txn",
        usage: "txn --get KEY... [--put KEY=VALUE...]",
        what: "read, then write, atomically: an interactive transaction",
        example: "txn --get k1 --put k1=b",
        served: |o| offered(o, snowline_core::Request::Begin),
    },
];

/// The client operations `protocol` serves, in [`CLIENT_OPERATIONS`] order.
pub fn client_operations(protocol: &str) -> Result<Vec<&'static ClientOperation>, UnknownProtocol> {
    let offers = lookup(protocol)?.offers;
    Ok(CLIENT_OPERATIONS.iter().filter(|op| op.served_by(&offers)).collect())
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
    fn client_operations_follow_the_offers() {
        let served = |p: &str| -> Vec<&str> { client_operations(p).unwrap().iter().map(|o| o.usage).collect() };
        let usage = |c: &str| CLIENT_OPERATIONS.iter().filter(|o| o.command == c).map(|o| o.usage).collect::<Vec<_>>();
        // raft-kv: single-key reads and writes only.
        assert_eq!(served("raft-kv"), [usage("put"), usage("get")].concat());
        // nmsi: no blind writes, so no put and no txn without reads; reads and read-modify-write transactions.
        assert_eq!(
            served("nmsi"),
            [usage("get"), usage("rot"), vec!["txn --get KEY... [--put KEY=VALUE...]"]].concat()
        );
        // cv: blind write transactions, not interactive ones.
        assert_eq!(served("cv"), [usage("put"), usage("get"), usage("rot"), vec!["txn --put KEY=VALUE..."]].concat());
        assert_eq!(served("2pl").len(), CLIENT_OPERATIONS.len());
        let rot = CLIENT_OPERATIONS.iter().find(|o| o.command == "rot").unwrap();
        assert!(rot.protocols().contains(&"cops") && !rot.protocols().contains(&"raft-kv"));
        // Every operation a protocol serves passes its up-front checks, and the others do not.
        for p in PROTOCOLS {
            for op in CLIENT_OPERATIONS {
                assert_eq!(op.served_by(&p.offers), served(p.name).contains(&op.usage), "{} {}", p.name, op.usage);
            }
        }
    }

    #[test]
    fn raft_kv_refuses_multi_key_reads_up_front_naming_those_that_serve_them() {
        let rot = snowline_core::Request::Rot { keys: vec!["a".into(), "b".into()] };
        let err = check_offered("raft-kv", &rot).unwrap_err();
        assert!(err.starts_with("raft-kv offers no read-only transactions over several keys; use cops"), "{err}");
        assert!(check_offered("raft-kv", &snowline_core::Request::Rot { keys: vec!["a".into()] }).is_ok());
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
