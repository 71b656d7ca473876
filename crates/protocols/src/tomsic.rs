//! Cure's skeleton and its minimal-delay variants (Tomsic, Bravo, Shapiro, Middleware 2018, §4,
//! Algorithms 1–3). This module implements **CV** (Committed Visibility, Latest Freshness); Cure, AV and OP
//! share this skeleton and differ in the places the paper's pseudocode branches on `protocol`
//! ([`Variant`]), so they will join it here rather than copy it.
//!
//! # Roles and messages
//!
//! - The **client node** sends each operation (`Begin`) to a transaction coordinator (TC) and waits for
//!   `Done`. The paper: "the server that receives a new transaction starts a new TC process" (§4.2.1).
//!   Choice (the paper is silent on which server): the partition server of the operation's first key in the
//!   client's own datacenter, so a single-key operation costs one client round trip.
//! - The **TC** (inside a partition server) splits reads by partition and sends `Read` to each in parallel
//!   (Alg. 1 lines 1–13); for updates it runs presumed-commit two-phase commit (§4.1, Alg. 1 lines 18–28):
//!   `Prepare` to each updated partition, `Prepared{time}` back, the client is answered as soon as every
//!   participant has prepared, then `Commit{ct}` goes out. A single-partition update collapses prepare and
//!   commit into `CommitSingle` (§4.2.1: "we collapse the prepare and commit messages"). A TC's own
//!   partition is called directly, without a message.
//! - The **partition** answers reads with the newest version satisfying COND (Alg. 2 lines 1–6), keeps
//!   prepared updates invisible until `Commit` (lines 7–16), and propagates committed updates to its sibling
//!   partitions in the other datacenters (`Replicate`).
//!
//! # CV specifics and the choices written down
//!
//! - COND is always true: a read returns the latest committed version (Alg. 2 line 18), so
//!   `versions_skipped` is always 0 and each key keeps one version ("ver[k] = {val}", line 23).
//! - The paper gives CV no commit time (Alg. 1 line 25, Alg. 2 lines 8–11). Replicas must still converge
//!   when two datacenters write a key concurrently, so CV keeps Cure's timestamps: a participant proposes
//!   a hybrid-logical-clock time at prepare, the commit time `ct` is the maximum, and a replica keeps a
//!   remote update only if its `(ct, dc, value)` is greater than what it stores (last writer wins).
//! - CV makes remote updates "visible as they arrive" (§4.2.2): a partition sends `Replicate` to its
//!   siblings as soon as it commits, without the stabilisation protocol (Alg. 3 is for AV and OP).
//! - Links: CV tolerates reordered messages (a commit is only sent after its prepare was answered, and
//!   last-writer-wins makes replication order-insensitive), so it declares no FIFO assumption.

use serde::{Deserialize, Serialize};
use snowline_core::{
    Addr, ClientId, ClientNode, Ctx, DcId, Hlc, Key, LinkAssumptions, Message, MvStore, OpError, OpId, OpMetrics,
    PartitionId, Protocol, ProtocolConfig, ReadResult, Reply, Request, ServerId, ServerNode, StoredVersion, Topology,
    Value, Version,
};
use std::collections::BTreeMap;

/// Where the algorithms branch on `protocol` in the paper's pseudocode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Variant {
    /// Committed Visibility: reads return the latest committed version.
    Cv,
}

/// The CV protocol.
pub struct Cv;

impl Protocol for Cv {
    const NAME: &'static str = "cv";
    type Msg = TomsicMsg;
    type Timer = TomsicTimer;
    type Server = TomsicServer;
    type Client = TomsicClient;
    const WRITE_TRANSACTIONS: bool = true;

    fn links() -> LinkAssumptions {
        LinkAssumptions { fifo: false }
    }

    fn server(id: ServerId, topology: Topology, config: &ProtocolConfig) -> TomsicServer {
        TomsicServer::new(Variant::Cv, id, topology, config.clone())
    }

    fn client(id: ClientId, dc: DcId, topology: Topology, config: &ProtocolConfig) -> TomsicClient {
        TomsicClient { id, dc, topology, config: config.clone() }
    }
}

/// A transaction id, unique at its coordinator; partitions key prepared records by `(coordinator, txn)`.
pub type TxnId = u64;

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum TomsicMsg {
    /// Client → TC: run this operation.
    Begin { op: OpId, request: Request },
    /// TC → client: the operation's result.
    Done { op: OpId, result: Result<Reply, OpError> },
    /// TC → partition: read these keys (Alg. 1 line 6).
    Read { txn: TxnId, keys: Vec<Key> },
    /// Partition → TC: one result per key, in request order (Alg. 2 line 6).
    ReadReply { txn: TxnId, results: Vec<ReadResult> },
    /// TC → partition: first phase of presumed commit (Alg. 1 line 22).
    Prepare { txn: TxnId, writes: Vec<(Key, Value)> },
    /// Partition → TC: the proposed commit time (Alg. 2 line 12).
    Prepared { txn: TxnId, time: u64 },
    /// TC → partition: commit with time `ct` (Alg. 1 line 28).
    Commit { txn: TxnId, ct: u64 },
    /// TC → the only updated partition: prepare and commit collapsed.
    CommitSingle { txn: TxnId, writes: Vec<(Key, Value)> },
    /// Partition → TC: the single-partition update committed at `time`.
    Committed { txn: TxnId, time: u64 },
    /// Partition → sibling partitions: a committed update to apply (§4.2.2, update propagation).
    Replicate { writes: Vec<(Key, Value)>, version: Version },
}

impl Message for TomsicMsg {
    fn kind(&self) -> &'static str {
        match self {
            TomsicMsg::Begin { .. } => "begin",
            TomsicMsg::Done { .. } => "done",
            TomsicMsg::Read { .. } => "read",
            TomsicMsg::ReadReply { .. } => "read-reply",
            TomsicMsg::Prepare { .. } => "prepare",
            TomsicMsg::Prepared { .. } => "prepared",
            TomsicMsg::Commit { .. } => "commit",
            TomsicMsg::CommitSingle { .. } => "commit-single",
            TomsicMsg::Committed { .. } => "committed",
            TomsicMsg::Replicate { .. } => "replicate",
        }
    }
}

/// CV sets no timers; Cure, AV and OP will add the stabilisation and garbage-collection timers here.
#[derive(Clone, Debug)]
pub enum TomsicTimer {}

/// A TC's in-flight transaction.
#[derive(Debug)]
enum Coordinated {
    Read {
        client: ClientId,
        op: OpId,
        /// Result slots in request order, filled as partitions answer.
        results: Vec<Option<ReadResult>>,
        /// For each partition asked, the request positions of the keys sent to it.
        slots: BTreeMap<PartitionId, Vec<usize>>,
        pending: usize,
    },
    Write {
        client: ClientId,
        op: OpId,
        participants: Vec<PartitionId>,
        /// The maximum time proposed so far (Alg. 1 line 25).
        ct: u64,
        pending: usize,
    },
}

/// A prepared, not yet committed update (Alg. 2 line 10).
#[derive(Debug)]
struct PreparedTxn {
    writes: Vec<(Key, Value)>,
    time: u64,
}

/// A partition server, hosting the TC role as well.
pub struct TomsicServer {
    variant: Variant,
    id: ServerId,
    topology: Topology,
    config: ProtocolConfig,
    clock: Hlc,
    store: MvStore<()>,
    prepared: BTreeMap<(ServerId, TxnId), PreparedTxn>,
    coordinated: BTreeMap<TxnId, Coordinated>,
    next_txn: TxnId,
}

impl TomsicServer {
    pub fn new(variant: Variant, id: ServerId, topology: Topology, config: ProtocolConfig) -> Self {
        Self {
            variant,
            id,
            topology,
            config,
            clock: Hlc::default(),
            store: MvStore::new(),
            prepared: BTreeMap::new(),
            coordinated: BTreeMap::new(),
            next_txn: 0,
        }
    }

    /// The stored versions of `key`, oldest first (for tests and inspection).
    pub fn versions(&self, key: &str) -> Vec<(Version, Value)> {
        self.store.versions(key).iter().map(|v| (v.version, v.value.clone())).collect()
    }

    /// Transactions prepared here and not yet committed.
    pub fn prepared_count(&self) -> usize {
        self.prepared.len()
    }

    /// The smallest time proposed by a transaction still prepared here (Alg. 3 line 3 bounds the stable
    /// time by it).
    pub fn oldest_prepared_time(&self) -> Option<u64> {
        self.prepared.values().map(|p| p.time).min()
    }

    // ---- TC role (Alg. 1) ----

    fn begin(&mut self, cx: &mut Ctx<'_, Cv>, client: ClientId, op: OpId, request: Request) {
        if let Err(reason) = self.config.check_request(&request) {
            cx.send(client, TomsicMsg::Done { op, result: Err(OpError::Rejected(reason)) });
            return;
        }
        let txn = self.next_txn;
        self.next_txn += 1;
        match request {
            Request::Rot { keys } => {
                let mut slots: BTreeMap<PartitionId, Vec<usize>> = BTreeMap::new();
                for (i, key) in keys.iter().enumerate() {
                    slots.entry(self.topology.partition_of(key)).or_default().push(i);
                }
                let reads: Vec<(PartitionId, Vec<Key>)> =
                    slots.iter().map(|(p, idx)| (*p, idx.iter().map(|i| keys[*i].clone()).collect())).collect();
                let pending = slots.len();
                let results = vec![None; keys.len()];
                self.coordinated.insert(txn, Coordinated::Read { client, op, results, slots, pending });
                for (p, keys) in reads {
                    self.send_to_partition(cx, p, TomsicMsg::Read { txn, keys });
                }
            }
            Request::Put { .. } | Request::Update { .. } => {
                let mut by_partition: BTreeMap<PartitionId, Vec<(Key, Value)>> = BTreeMap::new();
                for (k, v) in request.writes() {
                    by_partition.entry(self.topology.partition_of(&k)).or_default().push((k, v));
                }
                let participants: Vec<PartitionId> = by_partition.keys().copied().collect();
                let pending = participants.len();
                self.coordinated.insert(txn, Coordinated::Write { client, op, participants, ct: 0, pending });
                let single = pending == 1;
                for (p, writes) in by_partition {
                    let msg = if single {
                        TomsicMsg::CommitSingle { txn, writes }
                    } else {
                        TomsicMsg::Prepare { txn, writes }
                    };
                    self.send_to_partition(cx, p, msg);
                }
            }
        }
    }

    /// Send a TC → partition message, or handle it in place when the partition is this server.
    fn send_to_partition(&mut self, cx: &mut Ctx<'_, Cv>, partition: PartitionId, msg: TomsicMsg) {
        if partition == self.id.partition {
            if let Some(reply) = self.as_partition(cx, self.id, msg) {
                self.as_coordinator(cx, reply);
            }
        } else {
            cx.send(ServerId::new(self.id.dc, partition), msg);
        }
    }

    /// A partition's answer reaches the TC.
    fn as_coordinator(&mut self, cx: &mut Ctx<'_, Cv>, msg: TomsicMsg) {
        let from_partition = |m: &TomsicMsg| match m {
            TomsicMsg::ReadReply { txn, .. } | TomsicMsg::Prepared { txn, .. } | TomsicMsg::Committed { txn, .. } => {
                *txn
            }
            other => unreachable!("not a partition reply: {other:?}"),
        };
        let txn = from_partition(&msg);
        let Some(state) = self.coordinated.get_mut(&txn) else { return };
        match (state, msg) {
            (Coordinated::Read { results, slots, pending, .. }, TomsicMsg::ReadReply { results: got, .. }) => {
                let Some(first) = got.first() else { return };
                let positions = &slots[&self.topology.partition_of(&first.key)];
                assert_eq!(positions.len(), got.len(), "a partition answers every key it was asked");
                for (pos, r) in positions.iter().zip(got) {
                    results[*pos] = Some(r);
                }
                *pending -= 1;
            }
            (Coordinated::Write { ct, pending, .. }, TomsicMsg::Prepared { time, .. })
            | (Coordinated::Write { ct, pending, .. }, TomsicMsg::Committed { time, .. }) => {
                *ct = (*ct).max(time);
                *pending -= 1;
            }
            (_, other) => unreachable!("reply {other:?} does not match transaction {txn}"),
        }
        let done = match &self.coordinated[&txn] {
            Coordinated::Read { pending, .. } | Coordinated::Write { pending, .. } => *pending == 0,
        };
        if done {
            let state = self.coordinated.remove(&txn).expect("present");
            self.finish(cx, txn, state);
        }
    }

    fn finish(&mut self, cx: &mut Ctx<'_, Cv>, txn: TxnId, state: Coordinated) {
        match state {
            Coordinated::Read { client, op, results, .. } => {
                let reads: Vec<ReadResult> = results.into_iter().map(|r| r.expect("every slot answered")).collect();
                let metrics = OpMetrics { rounds: 1, versions_returned: reads.len() as u32, ..Default::default() };
                cx.send(client, TomsicMsg::Done { op, result: Ok(Reply { reads, commit: None, metrics }) });
            }
            Coordinated::Write { client, op, participants, ct, .. } => {
                // Presumed commit: every participant prepared, so the transaction is committed (§4.1).
                let metrics = OpMetrics { rounds: 1, ..Default::default() };
                let commit = Some(Version { time: ct, dc: self.id.dc });
                cx.send(client, TomsicMsg::Done { op, result: Ok(Reply { reads: Vec::new(), commit, metrics }) });
                if participants.len() > 1 {
                    for p in participants {
                        self.send_to_partition(cx, p, TomsicMsg::Commit { txn, ct });
                    }
                }
            }
        }
    }

    // ---- Partition role (Alg. 2) ----

    /// Handle a TC's request; returns the reply for the TC, if any.
    fn as_partition(&mut self, cx: &mut Ctx<'_, Cv>, tc: ServerId, msg: TomsicMsg) -> Option<TomsicMsg> {
        match msg {
            TomsicMsg::Read { txn, keys } => {
                cx.charge(keys.len() as u64);
                let results = keys.into_iter().map(|key| self.read(key)).collect();
                Some(TomsicMsg::ReadReply { txn, results })
            }
            TomsicMsg::Prepare { txn, writes } => {
                cx.charge(writes.len() as u64);
                let time = self.clock.tick(cx.now_ns());
                self.prepared.insert((tc, txn), PreparedTxn { writes, time });
                Some(TomsicMsg::Prepared { txn, time })
            }
            TomsicMsg::Commit { txn, ct } => {
                // Presumed commit: a commit for a transaction not prepared here is a duplicate; ignore it.
                let prepared = self.prepared.remove(&(tc, txn))?;
                cx.charge(prepared.writes.len() as u64);
                self.clock.observe(cx.now_ns(), ct);
                self.commit(cx, prepared.writes, Version { time: ct, dc: self.id.dc });
                None
            }
            TomsicMsg::CommitSingle { txn, writes } => {
                cx.charge(writes.len() as u64);
                let time = self.clock.tick(cx.now_ns());
                self.commit(cx, writes, Version { time, dc: self.id.dc });
                Some(TomsicMsg::Committed { txn, time })
            }
            other => unreachable!("not a TC → partition message: {other:?}"),
        }
    }

    /// COND (Alg. 2 lines 17–20) picks the version a read returns.
    fn read(&self, key: Key) -> ReadResult {
        let (found, skipped) = match self.variant {
            Variant::Cv => self.store.newest_where(&key, |_| true),
        };
        match found {
            Some(v) => ReadResult { key, value: Some(v.value.clone()), version: v.version, versions_skipped: skipped },
            None => ReadResult { key, value: None, version: Version::INITIAL, versions_skipped: skipped },
        }
    }

    /// UPDATE_VERSIONS (Alg. 2 lines 21–24) for a local commit, then queue it for the siblings (line 16).
    fn commit(&mut self, cx: &mut Ctx<'_, Cv>, writes: Vec<(Key, Value)>, version: Version) {
        self.apply(&writes, version);
        for sibling in self.topology.siblings(self.id) {
            cx.send(sibling, TomsicMsg::Replicate { writes: writes.clone(), version });
        }
    }

    fn apply(&mut self, writes: &[(Key, Value)], version: Version) {
        for (key, value) in writes {
            match self.variant {
                Variant::Cv => {
                    self.store.put_if_newer(key.clone(), StoredVersion { value: value.clone(), version, meta: () });
                }
            }
        }
    }
}

impl ServerNode<Cv> for TomsicServer {
    fn on_start(&mut self, _cx: &mut Ctx<'_, Cv>) {}

    fn on_message(&mut self, cx: &mut Ctx<'_, Cv>, from: Addr, msg: TomsicMsg) {
        cx.charge(1);
        match (from, msg) {
            (Addr::Client(client), TomsicMsg::Begin { op, request }) => self.begin(cx, client, op, request),
            (Addr::Server(_), TomsicMsg::Replicate { writes, version }) => {
                cx.charge(writes.len() as u64);
                self.clock.observe(cx.now_ns(), version.time);
                self.apply(&writes, version);
            }
            (
                Addr::Server(_),
                msg @ (TomsicMsg::ReadReply { .. } | TomsicMsg::Prepared { .. } | TomsicMsg::Committed { .. }),
            ) => self.as_coordinator(cx, msg),
            (
                Addr::Server(tc),
                msg @ (TomsicMsg::Read { .. }
                | TomsicMsg::Prepare { .. }
                | TomsicMsg::Commit { .. }
                | TomsicMsg::CommitSingle { .. }),
            ) => {
                if let Some(reply) = self.as_partition(cx, tc, msg) {
                    cx.send(tc, reply);
                }
            }
            // A message that does not fit its sender's role is a peer bug or a forged frame: ignore it.
            (_, _) => {}
        }
    }

    fn on_timer(&mut self, _cx: &mut Ctx<'_, Cv>, timer: TomsicTimer) {
        match timer {}
    }

    fn stored_versions(&self) -> usize {
        self.store.version_count()
    }
}

/// The client session: forwards each operation to its coordinator.
pub struct TomsicClient {
    id: ClientId,
    dc: DcId,
    topology: Topology,
    config: ProtocolConfig,
}

impl ClientNode<Cv> for TomsicClient {
    fn on_request(&mut self, cx: &mut Ctx<'_, Cv>, op: OpId, request: Request) {
        if let Err(reason) = self.config.check_request(&request) {
            cx.complete(op, Err(OpError::Rejected(reason)));
            return;
        }
        let first_key = match &request {
            Request::Rot { keys } => keys[0].clone(),
            Request::Put { key, .. } => key.clone(),
            Request::Update { writes } => writes[0].0.clone(),
        };
        let tc = self.topology.server_of(self.dc, &first_key);
        cx.send(tc, TomsicMsg::Begin { op, request });
    }

    fn on_message(&mut self, cx: &mut Ctx<'_, Cv>, _from: Addr, msg: TomsicMsg) {
        if let TomsicMsg::Done { op, result } = msg {
            cx.complete(op, result);
        }
    }
}

impl TomsicClient {
    pub fn id(&self) -> ClientId {
        self.id
    }
}

#[cfg(test)]
mod tests {
    //! Each test drives one state machine directly and asserts the exact effects of one input.
    use super::*;
    use rand::SeedableRng;
    use rand::rngs::SmallRng;
    use snowline_core::Effects;

    const NOW: u64 = 1_000_000;

    fn topo() -> Topology {
        Topology::new(2, 2)
    }

    fn server(dc: DcId, p: PartitionId) -> TomsicServer {
        Cv::server(ServerId::new(dc, p), topo(), &ProtocolConfig::default())
    }

    fn deliver(node: &mut TomsicServer, from: impl Into<Addr>, msg: TomsicMsg) -> Effects<Cv> {
        let mut rng = SmallRng::seed_from_u64(1);
        let mut out = Effects::default();
        node.on_message(&mut Ctx::new(NOW, &mut rng, &mut out), from.into(), msg);
        out
    }

    fn key(p: PartitionId) -> Key {
        topo().key_on(p, "k").into()
    }

    fn done(out: &Effects<Cv>) -> &Result<Reply, OpError> {
        match out
            .sends
            .iter()
            .find_map(|(_, m)| if let TomsicMsg::Done { result, .. } = m { Some(result) } else { None })
        {
            Some(r) => r,
            None => panic!("no reply to the client in {:?}", out.sends),
        }
    }

    const CLIENT: ClientId = ClientId(9);

    #[test]
    fn client_sends_the_operation_to_the_server_of_its_first_key_in_its_own_dc() {
        // Tomsic §4.2.1: "The server that receives a new transaction starts a new TC process".
        let mut client = Cv::client(CLIENT, 1, topo(), &ProtocolConfig::default());
        let mut rng = SmallRng::seed_from_u64(1);
        let mut out = Effects::default();
        let req = Request::Rot { keys: vec![key(1), key(0)] };
        client.on_request(&mut Ctx::new(NOW, &mut rng, &mut out), OpId(3), req.clone());
        assert_eq!(
            out.sends,
            vec![(Addr::Server(ServerId::new(1, 1)), TomsicMsg::Begin { op: OpId(3), request: req })]
        );
    }

    #[test]
    fn tc_reads_its_own_partition_in_place_and_the_others_in_parallel() {
        // Alg. 1 lines 4–6: split keys by partition, one read request per partition, in parallel.
        let mut tc = server(0, 0);
        deliver(&mut tc, ServerId::new(0, 1), TomsicMsg::CommitSingle { txn: 5, writes: vec![(key(0), "a".into())] });
        let out = deliver(
            &mut tc,
            CLIENT,
            TomsicMsg::Begin { op: OpId(1), request: Request::Rot { keys: vec![key(1), key(0)] } },
        );
        assert_eq!(
            out.sends,
            vec![(Addr::Server(ServerId::new(0, 1)), TomsicMsg::Read { txn: 0, keys: vec![key(1)] })]
        );

        let remote = ReadResult {
            key: key(1),
            value: Some("b".into()),
            version: Version { time: 5, dc: 1 },
            versions_skipped: 0,
        };
        let out = deliver(&mut tc, ServerId::new(0, 1), TomsicMsg::ReadReply { txn: 0, results: vec![remote.clone()] });
        let reply = done(&out).as_ref().unwrap();
        assert_eq!(reply.reads[0], remote, "results come back in request order");
        assert_eq!(reply.reads[1].value.as_deref(), Some("a"));
        assert_eq!((reply.metrics.rounds, reply.metrics.versions_returned), (1, 2));
    }

    #[test]
    fn presumed_commit_answers_the_client_after_prepare_then_commits_at_the_max_time() {
        // Tomsic §4.1 (presumed commit) and Alg. 1 lines 18–28: ok to the client once all prepared, then
        // commit with ct = max of the proposed times.
        let mut tc = server(0, 0);
        let writes = vec![(key(0), "x".into()), (key(1), "y".into())];
        let out = deliver(&mut tc, CLIENT, TomsicMsg::Begin { op: OpId(1), request: Request::Update { writes } });
        assert_eq!(
            out.sends,
            vec![(
                Addr::Server(ServerId::new(0, 1)),
                TomsicMsg::Prepare { txn: 0, writes: vec![(key(1), "y".into())] }
            )]
        );
        assert_eq!(tc.prepared_count(), 1, "the TC's own partition prepared in place");
        assert_eq!(tc.versions(&key(0)), vec![], "prepared updates are not visible (Alg. 2 line 10)");

        let later = NOW * 50;
        let out = deliver(&mut tc, ServerId::new(0, 1), TomsicMsg::Prepared { txn: 0, time: later });
        let commit = done(&out).as_ref().unwrap().commit.unwrap();
        assert_eq!(commit, Version { time: later, dc: 0 });
        assert!(out.sends.contains(&(Addr::Server(ServerId::new(0, 1)), TomsicMsg::Commit { txn: 0, ct: later })));
        assert!(out.sends.contains(&(
            Addr::Server(ServerId::new(1, 0)),
            TomsicMsg::Replicate { writes: vec![(key(0), "x".into())], version: commit }
        )));
        assert_eq!(tc.versions(&key(0)), vec![(commit, "x".into())]);
        assert_eq!(tc.prepared_count(), 0);
    }

    #[test]
    fn a_partition_proposes_increasing_times_and_commits_only_what_it_prepared() {
        // Alg. 2 lines 7–16.
        let mut p = server(0, 1);
        let tc = ServerId::new(0, 0);
        let a = deliver(&mut p, tc, TomsicMsg::Prepare { txn: 7, writes: vec![(key(1), "y".into())] });
        let b = deliver(&mut p, tc, TomsicMsg::Prepare { txn: 8, writes: vec![(key(1), "z".into())] });
        let time = |e: &Effects<Cv>| match &e.sends[0].1 {
            TomsicMsg::Prepared { time, .. } => *time,
            m => panic!("{m:?}"),
        };
        assert!(time(&b) > time(&a));
        assert_eq!(p.oldest_prepared_time(), Some(time(&a)));
        let out = deliver(&mut p, tc, TomsicMsg::Commit { txn: 99, ct: 1 });
        assert!(out.sends.is_empty(), "a commit for nothing prepared is ignored");
        let out = deliver(&mut p, tc, TomsicMsg::Commit { txn: 8, ct: time(&b) + 10 });
        assert_eq!(out.sends.len(), 1, "one Replicate to the one sibling");
        assert_eq!(p.versions(&key(1)), vec![(Version { time: time(&b) + 10, dc: 0 }, "z".into())]);
    }

    #[test]
    fn cv_reads_the_latest_committed_version_and_replicas_converge_last_writer_wins() {
        // Alg. 2 line 18 (COND is true under CV) and line 23 (one version per key).
        let mut p = server(1, 0);
        let s = ServerId::new(0, 0);
        let newer = Version { time: 20, dc: 0 };
        deliver(&mut p, s, TomsicMsg::Replicate { writes: vec![(key(0), "new".into())], version: newer });
        deliver(
            &mut p,
            s,
            TomsicMsg::Replicate { writes: vec![(key(0), "old".into())], version: Version { time: 10, dc: 0 } },
        );
        assert_eq!(p.versions(&key(0)), vec![(newer, "new".into())]);
        let out = deliver(&mut p, ServerId::new(1, 1), TomsicMsg::Read { txn: 4, keys: vec![key(0)] });
        assert_eq!(
            out.sends,
            vec![(
                Addr::Server(ServerId::new(1, 1)),
                TomsicMsg::ReadReply {
                    txn: 4,
                    results: vec![ReadResult {
                        key: key(0),
                        value: Some("new".into()),
                        version: newer,
                        versions_skipped: 0
                    }]
                }
            )]
        );
    }

    #[test]
    fn oversized_values_are_rejected_with_the_limit_named() {
        let mut tc = server(0, 0);
        let big: Value = "x".repeat(ProtocolConfig::default().max_value_bytes + 1).into();
        let out = deliver(
            &mut tc,
            CLIENT,
            TomsicMsg::Begin { op: OpId(1), request: Request::Put { key: key(0), value: big } },
        );
        match done(&out) {
            Err(OpError::Rejected(msg)) => assert!(msg.contains("max_value_bytes"), "{msg}"),
            other => panic!("{other:?}"),
        }
        assert_eq!(tc.stored_versions(), 0);
    }
}
