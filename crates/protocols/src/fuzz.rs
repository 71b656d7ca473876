//! Fuzz targets for the protocols' server handlers, shared by the cargo-fuzz targets in `fuzz/` (nightly),
//! the property tests and the committed-corpus test (stable, `tests/hostile_inputs.rs`).
//!
//! [`server_inputs`] reads a byte string as a script for a small cluster of one protocol, driven by a
//! minimal deterministic host: well-behaved clients submit GETs and PUTs, messages between nodes are
//! delivered (in order per link), timers fire, the clock moves, and in between the script forges messages
//! to any server from any sender: messages decoded from raw bytes, and real messages seen earlier with
//! bytes flipped or their sender changed. It checks what the sans-IO boundary promises:
//!
//! * no input makes a node panic (the fuzzer or the property test reports the panic);
//! * until the first forged message, every message is accepted (`on_message` returns `Ok`): validation
//!   refuses nothing a correct peer sends.
//!
//! One exception: Raft messages in the name of a member of the target's own replica group are not forged
//! (raft-rs, like etcd's raft, trusts its peers and aborts on a message that contradicts its log); only peer
//! authentication can stop those.

use serde::Serialize;
use serde::de::DeserializeOwned;
use snowline_core::{
    Addr, ClientId, ClientNode, Ctx, Effects, Message, OpId, Protocol, ProtocolConfig, Request, ServerId, ServerNode,
    Topology,
};
use std::collections::VecDeque;

use rand::SeedableRng;
use rand::rngs::SmallRng;

/// The names [`server_inputs`] accepts: every protocol of the registry.
pub const PROTOCOLS: &[&str] = &[
    "cops",
    "cops-snow",
    "contrarian",
    "cure",
    "av",
    "op",
    "cv",
    "2pl",
    "occ",
    "raft-kv",
    "amcast-kv",
    "tpc-kv",
    "nmsi",
    "rc",
    "ser",
    "us",
    "si",
    "psi",
    "rococo",
    "rococo-snow",
    "eiger-ps",
    "cops-dw",
    "ramp-f",
    "ramp-s",
    "ramp-h",
    "nocc",
    "lwnr",
    "lwsr",
];

/// What a script did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Outcome {
    /// Messages delivered to servers (well-formed and forged).
    pub delivered: u64,
    /// Messages forged by the script.
    pub forged: u64,
    /// Messages servers refused as invalid input.
    pub refused: u64,
    /// Operations the clients completed (successfully or not).
    pub completed: u64,
}

/// Run the script `data` against a cluster of `protocol` (one of [`PROTOCOLS`]). Panics only when a node
/// does (or when well-formed traffic is refused).
pub fn server_inputs(protocol: &str, data: &[u8]) -> Outcome {
    match protocol {
        "cops" => run::<crate::Cops>(data),
        "cops-snow" => run::<crate::CopsSnow>(data),
        "eiger-ps" => run::<crate::EigerPs>(data),
        "cops-dw" => run::<crate::CopsDw>(data),
        "contrarian" => run::<crate::Contrarian>(data),
        "cure" => run::<crate::Cure>(data),
        "av" => run::<crate::Av>(data),
        "op" => run::<crate::Op>(data),
        "cv" => run::<crate::Cv>(data),
        "2pl" => run::<crate::TwoPl>(data),
        "occ" => run::<crate::Occ>(data),
        "raft-kv" => run::<crate::RaftKv>(data),
        "amcast-kv" => run::<crate::AmcastKv>(data),
        "tpc-kv" => run::<crate::TpcKv>(data),
        "nmsi" => run::<crate::Nmsi>(data),
        "rc" => run::<crate::Rc>(data),
        "ser" => run::<crate::Ser>(data),
        "us" => run::<crate::Us>(data),
        "si" => run::<crate::Si>(data),
        "psi" => run::<crate::Psi>(data),
        "rococo" => run::<crate::Rococo>(data),
        "rococo-snow" => run::<crate::RococoSnow>(data),
        "ramp-f" => run::<crate::RampF>(data),
        "ramp-s" => run::<crate::RampS>(data),
        "ramp-h" => run::<crate::RampH>(data),
        "nocc" => run::<crate::NoCc>(data),
        "lwnr" => run::<crate::Lwnr>(data),
        "lwsr" => run::<crate::Lwsr>(data),
        other => panic!("no protocol {other:?}; fuzzable: {PROTOCOLS:?}"),
    }
}

/// Physical clocks start here (a plausible wall clock, so "far ahead" means what it does in production).
const BASE_NS: u64 = 1_700_000_000_000_000_000;

/// Reads the script.
struct Script<'a> {
    data: &'a [u8],
}

impl Script<'_> {
    fn byte(&mut self) -> Option<u8> {
        let (b, rest) = self.data.split_first()?;
        self.data = rest;
        Some(*b)
    }

    fn u64(&mut self) -> u64 {
        let mut v = 0u64;
        for _ in 0..8 {
            v = (v << 8) | u64::from(self.byte().unwrap_or(0));
        }
        v
    }

    fn take(&mut self, n: usize) -> &[u8] {
        let n = n.min(self.data.len());
        let (a, b) = self.data.split_at(n);
        self.data = b;
        a
    }
}

struct Node<T> {
    node: T,
    rng: SmallRng,
    timers: Vec<(u64, Vec<u8>)>,
}

struct Cluster<P: Protocol> {
    topology: Topology,
    servers: Vec<(ServerId, Node<P::Server>)>,
    clients: Vec<Node<P::Client>>,
    queue: VecDeque<(Addr, Addr, P::Msg)>,
    /// Messages seen on the links, serialized: material for forgeries.
    seen: Vec<Vec<u8>>,
    now: u64,
    next_op: u64,
    forged: bool,
    out: Outcome,
    fx: Effects<P>,
}

fn encode<T: Serialize>(t: &T) -> Vec<u8> {
    postcard::to_stdvec(t).expect("a message serializes")
}

fn decode<T: DeserializeOwned>(bytes: &[u8]) -> Option<T> {
    postcard::from_bytes(bytes).ok()
}

impl<P: Protocol> Cluster<P> {
    fn new(dcs: u16, partitions: u16) -> Self {
        let topology = Topology::new(dcs, partitions);
        let config = ProtocolConfig::default();
        let servers = topology
            .servers()
            .enumerate()
            .map(|(i, id)| {
                let node = P::server(id, topology, &config);
                (id, Node { node, rng: SmallRng::seed_from_u64(i as u64), timers: Vec::new() })
            })
            .collect();
        let clients = (0..dcs)
            .map(|dc| {
                let node = P::client(ClientId(u64::from(dc)), dc, topology, &config);
                Node { node, rng: SmallRng::seed_from_u64(1000 + u64::from(dc)), timers: Vec::new() }
            })
            .collect();
        let mut c = Self {
            topology,
            servers,
            clients,
            queue: VecDeque::new(),
            seen: Vec::new(),
            now: BASE_NS,
            next_op: 0,
            forged: false,
            out: Outcome::default(),
            fx: Effects::default(),
        };
        for i in 0..c.servers.len() {
            let _ = c.with_server(i, |n, cx| {
                n.on_start(cx);
                Ok(())
            });
        }
        c
    }

    fn with_server(
        &mut self,
        i: usize,
        f: impl FnOnce(&mut P::Server, &mut Ctx<'_, P>) -> Result<(), snowline_core::InvalidInput>,
    ) -> Result<(), snowline_core::InvalidInput> {
        let (id, n) = &mut self.servers[i];
        let mut cx = Ctx::new(self.now, &mut n.rng, &mut self.fx);
        let r = f(&mut n.node, &mut cx);
        let from = Addr::Server(*id);
        self.route(from, i, true);
        r
    }

    fn with_client(&mut self, i: usize, f: impl FnOnce(&mut P::Client, &mut Ctx<'_, P>)) {
        let n = &mut self.clients[i];
        let mut cx = Ctx::new(self.now, &mut n.rng, &mut self.fx);
        f(&mut n.node, &mut cx);
        self.route(Addr::Client(ClientId(i as u64)), i, false);
    }

    fn route(&mut self, from: Addr, i: usize, server: bool) {
        let mut fx = std::mem::take(&mut self.fx);
        self.out.completed += fx.completions.len() as u64;
        for (to, msg) in fx.sends.drain(..) {
            if self.seen.len() < 256 {
                self.seen.push(encode(&msg));
            }
            self.queue.push_back((from, to, msg));
        }
        for (delay, timer) in fx.timers.drain(..) {
            let due = self.now.saturating_add(delay);
            let timers = if server { &mut self.servers[i].1.timers } else { &mut self.clients[i].timers };
            // Bounded: a node that sets timers faster than they fire keeps its latest ones.
            if timers.len() < 64 {
                timers.push((due, encode(&timer)));
            }
        }
        fx.clear();
        self.fx = fx;
    }

    fn server_index(&self, s: ServerId) -> Option<usize> {
        self.topology.index_of(s)
    }

    fn deliver_next(&mut self) {
        let Some((from, to, msg)) = self.queue.pop_front() else { return };
        match to {
            Addr::Server(s) => {
                let Some(i) = self.server_index(s) else { return };
                self.out.delivered += 1;
                let r = self.with_server(i, |n, cx| n.on_message(cx, from, msg));
                if let Err(e) = r {
                    assert!(self.forged, "a well-formed run refused a message: {e}");
                    self.out.refused += 1;
                }
            }
            Addr::Client(c) => {
                let Some(i) = usize::try_from(c.0).ok().filter(|i| *i < self.clients.len()) else { return };
                self.with_client(i, |n, cx| n.on_message(cx, from, msg));
            }
        }
    }

    fn fire_timer(&mut self, pick: u8) {
        let n = self.servers.len() + self.clients.len();
        let i = usize::from(pick) % n;
        let timers = if i < self.servers.len() {
            &mut self.servers[i].1.timers
        } else {
            &mut self.clients[i - self.servers.len()].timers
        };
        let Some(first) = timers.iter().enumerate().min_by_key(|(_, (due, _))| *due).map(|(j, _)| j) else {
            return;
        };
        let (due, bytes) = timers.swap_remove(first);
        self.now = self.now.max(due);
        let timer: P::Timer = decode(&bytes).expect("a timer round-trips");
        if i < self.servers.len() {
            let _ = self.with_server(i, |n, cx| {
                n.on_timer(cx, timer);
                Ok(())
            });
        } else {
            self.with_client(i - self.servers.len(), |n, cx| n.on_timer(cx, timer));
        }
    }

    fn submit(&mut self, s: &mut Script<'_>) {
        let b = s.byte().unwrap_or(0);
        let client = usize::from(b >> 4) % self.clients.len();
        let key = |n: u8| -> snowline_core::Key { format!("k{}", n % 6).into() };
        let request = match b & 3 {
            0 | 1 => Request::Put { key: key(b >> 2), value: format!("v{}", self.next_op).into() },
            2 => Request::Rot { keys: vec![key(b >> 2)] },
            _ => Request::Rot { keys: vec![key(b >> 2), key((b >> 2) + 1)] },
        };
        let op = OpId(self.next_op);
        self.next_op += 1;
        self.with_client(client, |n, cx| n.on_request(cx, op, request));
    }

    /// A sender: mostly plausible (a server of the topology or a client), sometimes out of range.
    fn sender(&self, s: &mut Script<'_>) -> Addr {
        let b = s.byte().unwrap_or(0);
        let t = self.topology;
        match b % 4 {
            0 => Addr::Client(ClientId(u64::from(b >> 2) % 4)),
            1 => Addr::Server(ServerId::replica(
                u16::from(s.byte().unwrap_or(0)),
                u16::from(s.byte().unwrap_or(0)),
                u16::from(s.byte().unwrap_or(0) % 2),
            )),
            _ => t.server_at(usize::from(b >> 2) % t.server_count()).expect("in range").into(),
        }
    }

    fn forge(&mut self, s: &mut Script<'_>) {
        let from = self.sender(s);
        let to = usize::from(s.byte().unwrap_or(0)) % self.servers.len();
        let how = s.byte().unwrap_or(0);
        let msg: Option<P::Msg> = match how % 3 {
            // Raw bytes as a message.
            0 => {
                let len = usize::from(s.byte().unwrap_or(0));
                decode(s.take(len))
            }
            // A real message, sent again under another name.
            1 if !self.seen.is_empty() => decode(&self.seen[usize::from(how >> 2) % self.seen.len()]),
            // A real message with bytes changed (ids, lengths, timestamps).
            _ if !self.seen.is_empty() => {
                let mut bytes = self.seen[usize::from(how >> 2) % self.seen.len()].clone();
                for _ in 0..1 + s.byte().unwrap_or(0) % 4 {
                    let pos = usize::from(s.byte().unwrap_or(0)) % bytes.len().max(1);
                    let val = s.byte().unwrap_or(0xff);
                    if let Some(b) = bytes.get_mut(pos) {
                        *b = val;
                    }
                }
                decode(&bytes)
            }
            _ => None,
        };
        let Some(msg) = msg else { return };
        // raft-rs trusts its group's members (it aborts on a message that contradicts its log, as etcd's
        // raft does): a Raft message in a member's name is stopped only by peer authentication (mTLS, the
        // next step). Raft messages from anyone else are forged here and refused before raft-rs sees them.
        let target = self.servers[to].0;
        if msg.kind() == "raft"
            && matches!(from, Addr::Server(s) if self.topology.contains(s) && s.partition == target.partition)
        {
            return;
        }
        self.forged = true;
        self.out.forged += 1;
        self.out.delivered += 1;
        if self.with_server(to, |n, cx| n.on_message(cx, from, msg)).is_err() {
            self.out.refused += 1;
        }
    }
}

fn run<P: Protocol>(data: &[u8]) -> Outcome {
    let mut s = Script { data };
    let shape = s.byte().unwrap_or(0);
    let (dcs, partitions) = (1 + u16::from(shape % 3), 1 + u16::from((shape / 3) % 3));
    let mut c = Cluster::<P>::new(dcs, partitions);
    let mut steps = 0;
    while let Some(op) = s.byte() {
        steps += 1;
        if steps > 4096 {
            break;
        }
        match op % 16 {
            0..=2 => c.submit(&mut s),
            3..=9 => c.deliver_next(),
            10 | 11 => c.fire_timer(s.byte().unwrap_or(0)),
            12 => c.now = c.now.saturating_add(u64::from(s.byte().unwrap_or(0)) * 1_000_000),
            13 => c.now = c.now.saturating_add(s.u64() % 120_000_000_000),
            _ => c.forge(&mut s),
        }
    }
    // Let what is in flight settle (bounded: protocols keep timers going forever).
    for _ in 0..256 {
        if c.queue.is_empty() {
            break;
        }
        c.deliver_next();
    }
    c.out
}
