//! Every limit is enforced where the input arrives (issue 32): for every protocol of the registry, a client
//! node that skips the client library's check (`ProtocolConfig::check_request`) sends a request over a limit —
//! a key too long, too many keys in one request, a value too large — and the server it reaches refuses the
//! message as invalid input naming the limit (`InvalidKind::Limit`), before it touches any state. (Empty keys
//! are refused by every client node whatever its limits; `snowline_core::validate`'s tests cover the
//! servers' check.)
//!
//! The cluster is a minimal deterministic host (one datacenter, one partition, so that every key of a
//! request reaches the same server): FIFO delivery, timers fired in virtual time when nothing else is due.
//! The servers run the strict limits; the client node runs generous ones, so it sends what an attacker would.

use rand::SeedableRng;
use rand::rngs::SmallRng;
use snowline_core::{
    Addr, ClientId, ClientNode, Ctx, Effects, InvalidInput, InvalidKind, OpError, OpId, Protocol, ProtocolConfig,
    Reply, Request, ServerId, ServerNode, Topology,
};
use snowline_protocols::{PROTOCOLS, with_protocol};
use std::collections::VecDeque;

/// The servers' limits.
fn strict() -> ProtocolConfig {
    ProtocolConfig { max_key_bytes: 8, max_value_bytes: 16, max_keys_per_request: 3, ..ProtocolConfig::default() }
}

const START_NS: u64 = 1_700_000_000_000_000_000;
/// How long a scenario may run in virtual time (elections, stabilisation rounds).
const DEADLINE_NS: u64 = 20_000_000_000;

struct Cluster<P: Protocol> {
    now: u64,
    servers: Vec<(ServerId, P::Server, SmallRng)>,
    client: P::Client,
    client_rng: SmallRng,
    queue: VecDeque<(Addr, Addr, P::Msg)>,
    timers: Vec<(u64, Addr, P::Timer)>,
    completions: Vec<(OpId, Result<Reply, OpError>)>,
    invalid: Vec<InvalidInput>,
    fx: Effects<P>,
}

impl<P: Protocol> Cluster<P> {
    fn new(topology: Topology) -> Self {
        let generous = ProtocolConfig::default();
        let servers = topology
            .servers()
            .enumerate()
            .map(|(i, id)| (id, P::server(id, topology, &strict()), SmallRng::seed_from_u64(i as u64)))
            .collect();
        let mut c = Self {
            now: START_NS,
            servers,
            client: P::client(ClientId(0), 0, topology, &generous),
            client_rng: SmallRng::seed_from_u64(99),
            queue: VecDeque::new(),
            timers: Vec::new(),
            completions: Vec::new(),
            invalid: Vec::new(),
            fx: Effects::default(),
        };
        for i in 0..c.servers.len() {
            let (id, node, rng) = &mut c.servers[i];
            let id = *id;
            node.on_start(&mut Ctx::new(c.now, rng, &mut c.fx));
            c.route(Addr::Server(id));
        }
        c.client.on_start(&mut Ctx::new(c.now, &mut c.client_rng, &mut c.fx));
        c.route(Addr::Client(ClientId(0)));
        c
    }

    fn route(&mut self, from: Addr) {
        for (to, msg) in self.fx.sends.drain(..) {
            self.queue.push_back((from, to, msg));
        }
        for (delay, timer) in self.fx.timers.drain(..) {
            self.timers.push((self.now.saturating_add(delay), from, timer));
        }
        self.completions.append(&mut self.fx.completions);
        self.fx.clear();
    }

    fn deliver(&mut self, from: Addr, to: Addr, msg: P::Msg) {
        match to {
            Addr::Server(s) => {
                let Some(i) = self.servers.iter().position(|(id, _, _)| *id == s) else { return };
                let (_, node, rng) = &mut self.servers[i];
                if let Err(e) = node.on_message(&mut Ctx::new(self.now, rng, &mut self.fx), from, msg) {
                    self.invalid.push(e);
                }
            }
            Addr::Client(_) => {
                self.client.on_message(&mut Ctx::new(self.now, &mut self.client_rng, &mut self.fx), from, msg)
            }
        }
        self.route(to);
    }

    fn fire_next_timer(&mut self) -> bool {
        let Some(i) = (0..self.timers.len()).min_by_key(|i| self.timers[*i].0) else { return false };
        let (due, at, timer) = self.timers.swap_remove(i);
        self.now = self.now.max(due);
        match at {
            Addr::Server(s) => {
                let Some(j) = self.servers.iter().position(|(id, _, _)| *id == s) else { return true };
                let (_, node, rng) = &mut self.servers[j];
                node.on_timer(&mut Ctx::new(self.now, rng, &mut self.fx), timer);
            }
            Addr::Client(_) => self.client.on_timer(&mut Ctx::new(self.now, &mut self.client_rng, &mut self.fx), timer),
        }
        self.route(at);
        true
    }

    /// Submit `request` and run until it completes, a server refuses a message as over a limit, or the
    /// deadline passes.
    fn run(&mut self, op: u64, request: Request) {
        self.client.on_request(&mut Ctx::new(self.now, &mut self.client_rng, &mut self.fx), OpId(op), request);
        self.route(Addr::Client(ClientId(0)));
        let deadline = self.now + DEADLINE_NS;
        while self.now < deadline
            && !self.completions.iter().any(|(o, _)| *o == OpId(op))
            && !self.invalid.iter().any(|e| e.kind == InvalidKind::Limit)
        {
            match self.queue.pop_front() {
                Some((from, to, msg)) => self.deliver(from, to, msg),
                None if self.fire_next_timer() => {}
                None => break,
            }
        }
    }
}

/// The requests that carry `big` (a value over the limit) to a server of `P`, in order.
fn big_write<P: Protocol>(big: &str) -> Vec<Request> {
    let (k, v) = ("a".into(), big.into());
    if P::OFFERS.blind_writes {
        vec![Request::Put { key: k, value: v }]
    } else {
        vec![Request::Begin, Request::Read { keys: vec!["a".into()] }, Request::Commit { writes: vec![(k, v)] }]
    }
}

/// Runs each over-limit scenario on a fresh cluster of `P`; returns, per scenario, what the servers refused.
fn over_limits<P: Protocol>(family: &str) -> Vec<(&'static str, &'static str, Vec<InvalidInput>)> {
    let topology = Topology::new(1, 1);
    let mut scenarios: Vec<(&str, &str, Vec<Request>)> = vec![
        ("a key too long", "max_key_bytes", vec![Request::Rot { keys: vec!["k".repeat(9).into()] }]),
        ("a value too large", "max_value_bytes", big_write::<P>(&"x".repeat(17))),
    ];
    let keys: Vec<snowline_core::Key> = ["a", "b", "c", "d"].map(Into::into).to_vec();
    let writes: Vec<_> = keys.iter().map(|k| (k.clone(), "v".into())).collect();
    if P::OFFERS.blind_writes && P::OFFERS.write_transactions {
        scenarios.push(("too many writes", "max_keys_per_request", vec![Request::Update { writes }]));
    } else if P::OFFERS.interactive {
        let commit = vec![Request::Begin, Request::Read { keys: keys.clone() }, Request::Commit { writes }];
        scenarios.push(("too many writes", "max_keys_per_request", commit));
    }
    // The Jessy family reads one key per message: only a transaction's writes travel together.
    if P::OFFERS.multi_key_rots && family != "jessy" {
        scenarios.push(("too many keys read", "max_keys_per_request", vec![Request::Rot { keys }]));
    }
    scenarios
        .into_iter()
        .map(|(what, limit, requests)| {
            let mut cluster = Cluster::<P>::new(topology);
            for (op, request) in requests.into_iter().enumerate() {
                cluster.run(op as u64, request);
            }
            (what, limit, cluster.invalid)
        })
        .collect()
}

#[test]
fn every_protocols_servers_refuse_requests_over_the_limits_naming_them() {
    let mut failures = Vec::new();
    for p in PROTOCOLS {
        let results = with_protocol!(p.name, P => over_limits::<P>(p.family)).unwrap();
        for (what, limit, invalid) in results {
            let named = invalid.iter().find(|e| e.kind == InvalidKind::Limit && e.detail.contains(limit));
            match named {
                Some(e) => assert!(
                    matches!(e.from, Addr::Client(_)) && e.to_string().contains("over a limit"),
                    "{}: {e}",
                    p.name
                ),
                None => failures.push(format!("{}: {what} was not refused naming {limit}: {invalid:?}", p.name)),
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The same requests within the limits are served: the check refuses only what is over them.
#[test]
fn requests_at_the_limits_are_served() {
    fn at_limits<P: Protocol>() -> Vec<Result<Reply, OpError>> {
        let mut cluster = Cluster::<P>::new(Topology::new(1, 1));
        let mut requests = big_write::<P>(&"x".repeat(16));
        let keys =
            if P::OFFERS.multi_key_rots { vec!["k".repeat(8), "b".into(), "c".into()] } else { vec!["k".repeat(8)] };
        requests.push(Request::Rot { keys: keys.into_iter().map(Into::into).collect() });
        for (op, request) in requests.into_iter().enumerate() {
            cluster.run(op as u64, request);
        }
        assert!(cluster.invalid.is_empty(), "{}: {:?}", P::NAME, cluster.invalid);
        cluster.completions.into_iter().map(|(_, r)| r).collect()
    }
    for p in PROTOCOLS {
        let results = with_protocol!(p.name, P => at_limits::<P>()).unwrap();
        assert!(results.iter().all(Result::is_ok), "{}: {results:?}", p.name);
    }
}

/// On a full disk a durable server refuses a client's message that writes and serves the rest
/// (`snowline_storage::host`), so every protocol must say which of its clients' messages write
/// (`Message::is_client_write`): every message a client node sends for a write (the last request of
/// [`big_write`]) writes, no message it sends for a read does.
#[test]
fn every_protocol_tells_its_clients_writes_from_their_reads() {
    use snowline_core::Message;
    fn sent<P: Protocol>(cluster: &mut Cluster<P>, op: u64, request: Request) -> Vec<P::Msg> {
        let mut fx = Effects::<P>::default();
        cluster.client.on_request(&mut Ctx::new(cluster.now, &mut cluster.client_rng, &mut fx), OpId(op), request);
        fx.sends.into_iter().filter(|(to, _)| matches!(to, Addr::Server(_))).map(|(_, m)| m).collect()
    }
    fn classify<P: Protocol>() -> Result<(), String> {
        let mut cluster = Cluster::<P>::new(Topology::new(1, 1));
        let reads = sent(&mut cluster, 0, Request::Rot { keys: vec!["a".into()] });
        // (eiger-ps first asks for a safe time on a timer: its read sends nothing at once.)
        if reads.iter().any(Message::is_client_write) {
            return Err(format!("a read's messages {reads:?}"));
        }
        // Run the write's earlier steps (Begin, Read), then look at what its commit sends.
        let mut requests = big_write::<P>("v");
        let last = requests.pop().expect("a write");
        let mut cluster = Cluster::<P>::new(Topology::new(1, 1));
        for (op, request) in requests.into_iter().enumerate() {
            cluster.run(op as u64 + 1, request);
        }
        let writes = sent(&mut cluster, 9, last);
        if writes.is_empty() || !writes.iter().all(Message::is_client_write) {
            return Err(format!("a write's messages {writes:?}"));
        }
        Ok(())
    }
    let wrong: Vec<String> = PROTOCOLS
        .iter()
        .filter_map(|p| with_protocol!(p.name, P => classify::<P>()).unwrap().err().map(|e| format!("{}: {e}", p.name)))
        .collect();
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
