//! Which inbound connections a server keeps (`limits::ConnLimits`): every connection holds a handshake
//! slot until its `Hello` (the oldest is closed when a new one finds none free), and is then admitted as a
//! peer or as a client. Admission is decided after authentication, on what the `Hello` says (and the TLS
//! certificate proved): clients may not take the connections reserved for peers, nor more than their share
//! from one source address, so neither a flood of silent connections nor one of idle clients keeps a peer
//! from connecting. The numbers are in `docs/ARCHITECTURE.md` ("Limits").

use crate::limits::ConnLimits;
use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use tokio::task::AbortHandle;

/// What a connection was admitted as.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Role {
    /// A server of the cluster (authenticated by its certificate; in an `insecure` cluster, by its `Hello`).
    Peer,
    Client,
}

/// The admission state of one server, shared by its accept task and its connection tasks.
#[derive(Debug)]
pub(crate) struct Admission {
    limits: ConnLimits,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    /// Connections before their `Hello`, oldest (smallest id) first, with the handle that closes them.
    handshaking: BTreeMap<u64, Option<AbortHandle>>,
    peers: usize,
    clients: usize,
    /// Client connections by source address.
    per_source: HashMap<IpAddr, usize>,
}

/// A connection's place in the [`Admission`] state; dropping it (the connection ended) frees it.
#[derive(Debug)]
pub(crate) struct Slot {
    admission: Arc<Admission>,
    conn: u64,
    source: IpAddr,
    role: Option<Role>,
}

/// Counts of the admission state, for metrics and tests.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Census {
    pub handshaking: usize,
    pub peers: usize,
    pub clients: usize,
}

impl Admission {
    pub(crate) fn new(limits: ConnLimits) -> Arc<Self> {
        Arc::new(Self { limits, state: Mutex::new(State::default()) })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A connection `conn` from `source` was accepted: it takes a handshake slot. When none is free the
    /// oldest connection still before its `Hello` is closed (returned: whether one was).
    pub(crate) fn arrive(self: &Arc<Self>, conn: u64, source: IpAddr) -> (Slot, bool) {
        let mut s = self.lock();
        let mut evicted = false;
        while s.handshaking.len() >= self.limits.max_handshaking.max(1) {
            let Some((_, handle)) = s.handshaking.pop_first() else { break };
            if let Some(h) = handle {
                h.abort();
            }
            evicted = true;
        }
        s.handshaking.insert(conn, None);
        (Slot { admission: self.clone(), conn, source: source.to_canonical(), role: None }, evicted)
    }

    /// The task serving `conn` was spawned: this is how to close it should it need eviction.
    pub(crate) fn started(&self, conn: u64, handle: AbortHandle) {
        if let Some(h) = self.lock().handshaking.get_mut(&conn) {
            *h = Some(handle);
        }
    }

    pub(crate) fn census(&self) -> Census {
        let s = self.lock();
        Census { handshaking: s.handshaking.len(), peers: s.peers, clients: s.clients }
    }
}

impl Slot {
    /// The connection said `Hello` as `role`: admit it, or say why not (the caller closes it with that).
    pub(crate) fn admit(&mut self, role: Role) -> Result<(), String> {
        if self.role.is_some() {
            return Ok(());
        }
        let limits = &self.admission.limits;
        let mut s = self.admission.lock();
        if s.handshaking.remove(&self.conn).is_none() {
            return Err("too many connections before their Hello: this one was the oldest".into());
        }
        let total = s.peers + s.clients;
        let refusal = match role {
            Role::Peer if total >= limits.max_connections => {
                Some(format!("too many connections: this server keeps at most {}", limits.max_connections))
            }
            Role::Peer => None,
            Role::Client if s.clients >= limits.client_allowance() || total >= limits.max_connections => Some(format!(
                "too many client connections: this server keeps at most {} (of {} connections, {} are kept for \
                     its peers)",
                limits.client_allowance(),
                limits.max_connections,
                limits.peer_reserve
            )),
            Role::Client if s.per_source.get(&self.source).copied().unwrap_or(0) >= limits.max_per_source => {
                Some(format!(
                    "too many client connections from {}: this server keeps at most {} per source address",
                    self.source, limits.max_per_source
                ))
            }
            Role::Client => None,
        };
        if let Some(why) = refusal {
            return Err(why);
        }
        match role {
            Role::Peer => s.peers += 1,
            Role::Client => {
                s.clients += 1;
                *s.per_source.entry(self.source).or_default() += 1;
            }
        }
        self.role = Some(role);
        Ok(())
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut s = self.admission.lock();
        match self.role {
            None => {
                s.handshaking.remove(&self.conn);
            }
            Some(Role::Peer) => s.peers -= 1,
            Some(Role::Client) => {
                s.clients -= 1;
                if let Some(n) = s.per_source.get_mut(&self.source) {
                    *n -= 1;
                    if *n == 0 {
                        s.per_source.remove(&self.source);
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn clients_leave_the_peer_reserve_and_each_source_its_share() {
        let limits = ConnLimits { max_connections: 6, peer_reserve: 2, max_per_source: 3, ..ConnLimits::default() };
        let a = Admission::new(limits);
        let mut conn = 0;
        let mut arrive = |source: &str| {
            conn += 1;
            a.arrive(conn, ip(source)).0
        };
        let mut kept = Vec::new();
        for _ in 0..3 {
            let mut s = arrive("10.0.0.1");
            s.admit(Role::Client).unwrap();
            kept.push(s);
        }
        let err = arrive("10.0.0.1").admit(Role::Client).unwrap_err();
        assert!(err.contains("per source"), "{err}");
        let mut s = arrive("10.0.0.2");
        s.admit(Role::Client).unwrap();
        kept.push(s);
        let err = arrive("10.0.0.3").admit(Role::Client).unwrap_err();
        assert!(err.contains("kept for its peers"), "{err}");
        for _ in 0..2 {
            let mut s = arrive("10.0.0.3");
            s.admit(Role::Peer).unwrap();
            kept.push(s);
        }
        assert!(arrive("10.0.0.3").admit(Role::Peer).is_err(), "the total holds for peers");
        assert_eq!(a.census(), Census { handshaking: 0, peers: 2, clients: 4 });
        kept.truncate(1);
        assert_eq!(a.census(), Census { handshaking: 0, peers: 0, clients: 1 });
        let mut s = arrive("10.0.0.1");
        s.admit(Role::Client).unwrap();
    }

    #[test]
    fn a_full_handshake_table_closes_its_oldest() {
        let a = Admission::new(ConnLimits { max_handshaking: 2, ..ConnLimits::default() });
        let (mut first, evicted) = a.arrive(1, ip("10.0.0.1"));
        assert!(!evicted);
        let (_second, _) = a.arrive(2, ip("10.0.0.1"));
        let (mut third, evicted) = a.arrive(3, ip("10.0.0.1"));
        assert!(evicted);
        assert!(first.admit(Role::Peer).is_err(), "evicted");
        third.admit(Role::Peer).unwrap();
        drop(first);
        assert_eq!(a.census(), Census { handshaking: 1, peers: 1, clients: 0 });
    }
}
