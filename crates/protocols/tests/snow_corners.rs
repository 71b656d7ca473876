//! The SNOW paper's corner algorithms (§4.3–4.4) on chosen interleavings, written with the simulator's
//! scenario API, with the checker's verdicts on the histories they make: Eiger-PS is process-ordered
//! serializable but not strictly serializable (a client reading at a lagging global safe time misses a write
//! another client completed), never blocks and answers in one round with one version per key; COPS-DW stays
//! strictly serializable under concurrent writes, in one round with one version per key.

use snowline_checker::Level;
use snowline_core::history::{HistoryEvent, HistoryRecorder};
use snowline_core::{Addr, ClientId, Key, OpError, OpId, Protocol, Reply, Request, ServerId, Topology, Value};
use snowline_protocols::cops_dw::{DwMsg, WRITER};
use snowline_protocols::eiger_ps::EigerMsg;
use snowline_protocols::{CopsDw, EigerPs};
use snowline_sim::{Sim, SimConfig};

const MS: u64 = 1_000_000;
const SECOND: u64 = 1_000 * MS;

/// A simulation that records every operation into a history.
struct Run<P: Protocol> {
    sim: Sim<P>,
    history: HistoryRecorder,
    processes: Vec<(ClientId, u64)>,
    next_op: u64,
}

impl<P: Protocol> Run<P> {
    fn new(dcs: u16, partitions: u16) -> Self {
        let sim = Sim::new(SimConfig::exact(1, Topology::new(dcs, partitions), 100_000, 10 * MS));
        Self { sim, history: HistoryRecorder::new(), processes: Vec::new(), next_op: 0 }
    }

    fn client(&mut self, dc: u16) -> ClientId {
        let c = self.sim.add_client(dc);
        self.processes.push((c, self.history.new_process()));
        c
    }

    fn process(&self, c: ClientId) -> u64 {
        self.processes.iter().find(|(id, _)| *id == c).expect("our client").1
    }

    /// Submits `request` now, recording its invocation; returns the op id.
    fn submit(&mut self, c: ClientId, request: Request) -> (OpId, Request, u64) {
        self.next_op += 1;
        let op = OpId(self.next_op);
        self.history.invoke(self.process(c), 0, &request, self.sim.now_ns());
        self.sim.submit(c, op, request.clone());
        (op, request, self.process(c))
    }

    fn complete(&mut self, submitted: &(OpId, Request, u64), result: &Result<Reply, OpError>) {
        self.history.complete(submitted.2, 0, &submitted.1, result, self.sim.now_ns());
    }

    /// Runs `request` to completion.
    fn execute(&mut self, c: ClientId, request: Request) -> Reply {
        let submitted = self.submit(c, request);
        let result = loop {
            let done = self.sim.step_until(self.sim.now_ns() + 2 * SECOND).expect("the operation completes");
            if done.client == c && done.op == submitted.0 {
                break done.result;
            }
        };
        self.complete(&submitted, &result);
        result.expect("the operation succeeds")
    }

    fn events(&self) -> &[HistoryEvent] {
        &self.history.events
    }
}

fn passes(events: &[HistoryEvent], level: Level) -> bool {
    let history = snowline_checker::validate(events).expect("a valid history");
    snowline_checker::check_with_versions(&history, level).ok
}

fn values(reply: &Reply) -> Vec<Option<Value>> {
    reply.reads.iter().map(|r| r.value.clone()).collect()
}

/// SNOW §4.4: "This does not provide strict serializability because a client may not see the most recent
/// write committed by another client." Bob's global safe time lags (his safe-time answers are held): Alice's
/// write transaction completes, then Bob's ROT reads at his old GST and returns the old values, in one
/// round, one version per key, without blocking. The history is process-ordered serializable (Bob's ROT is
/// ordered before Alice's write) and not strictly serializable. Once his polls get through, Bob reads the
/// new values; and Alice reads her own write at once (her write waited for her GST).
#[test]
fn eiger_ps_is_process_ordered_serializable_and_not_strictly_serializable() {
    let mut run = Run::<EigerPs>::new(1, 2);
    let topo = run.sim.topology();
    let x: Key = topo.key_on(0, "x").into();
    let y: Key = topo.key_on(1, "y").into();
    let alice = run.client(0);
    let bob = run.client(0);
    run.execute(alice, Request::Update { writes: vec![(x.clone(), "x0".into()), (y.clone(), "y0".into())] });
    run.sim.advance(20 * MS);
    let before = run.execute(bob, Request::Rot { keys: vec![x.clone(), y.clone()] });
    assert_eq!(values(&before), vec![Some("x0".into()), Some("y0".into())]);

    let bob_addr = Addr::Client(bob);
    let lag = run.sim.hold(move |e| e.to == bob_addr && matches!(e.msg, EigerMsg::SafeTime { .. }));
    run.sim.advance(20 * MS);
    let done = run.execute(alice, Request::Update { writes: vec![(x.clone(), "x1".into()), (y.clone(), "y1".into())] });
    let commit = done.commit.expect("a commit version").time;
    assert!(run.sim.client(alice).gst() >= commit, "Alice's write returned once her GST reached its commit time");
    assert!(run.sim.client(bob).gst() < commit, "Bob's GST lags");
    run.sim.advance(MS); // Bob's ROT is invoked strictly after Alice's write completed.

    let stale = run.execute(bob, Request::Rot { keys: vec![x.clone(), y.clone()] });
    assert_eq!(values(&stale), vec![Some("x0".into()), Some("y0".into())], "Bob misses Alice's completed write");
    assert_eq!((stale.metrics.rounds, stale.metrics.versions_returned, stale.metrics.blocked_ns), (1, 2, 0));
    assert!(stale.reads.iter().all(|r| r.versions_skipped == 1), "the new versions were there, and skipped");
    let own = run.execute(alice, Request::Rot { keys: vec![x.clone(), y.clone()] });
    assert_eq!(values(&own), vec![Some("x1".into()), Some("y1".into())], "Alice reads her own write");
    assert_eq!((own.metrics.rounds, own.metrics.versions_returned, own.metrics.blocked_ns), (1, 2, 0));

    assert!(passes(run.events(), Level::Pos), "process-ordered serializable");
    assert!(passes(run.events(), Level::Ser));
    assert!(!passes(run.events(), Level::StrictSer), "not strictly serializable: Bob read stale after Alice's write");

    run.sim.stop_holding(lag);
    run.sim.release(|_| true);
    run.sim.advance(20 * MS);
    let fresh = run.execute(bob, Request::Rot { keys: vec![x.clone(), y.clone()] });
    assert_eq!(values(&fresh), vec![Some("x1".into()), Some("y1".into())]);
}

/// SNOW §4.4: ROTs never block, even while a write transaction is prepared and its commit held: the
/// servers answer at once at the reader's GST, which stays below the pending transaction (one round, one
/// version, `blocked_ns` 0); the writer's client completes only after the commit is released.
#[test]
fn eiger_ps_reads_never_wait_for_a_pending_write_transaction() {
    let mut run = Run::<EigerPs>::new(1, 2);
    let topo = run.sim.topology();
    let x: Key = topo.key_on(0, "x").into();
    let y: Key = topo.key_on(1, "y").into();
    let alice = run.client(0);
    let bob = run.client(0);
    run.execute(alice, Request::Update { writes: vec![(x.clone(), "x0".into()), (y.clone(), "y0".into())] });
    run.sim.advance(20 * MS);
    // Alice's next write prepares at both partitions; its commit to y's partition is held.
    let held = run.sim.hold(|e| matches!(e.msg, EigerMsg::Commit { .. }));
    let write = run.submit(alice, Request::Update { writes: vec![(x.clone(), "x1".into()), (y.clone(), "y1".into())] });
    run.sim.advance(5 * MS);
    assert_eq!(run.sim.held().len(), 1);
    for _ in 0..3 {
        let r = run.execute(bob, Request::Rot { keys: vec![x.clone(), y.clone()] });
        assert_eq!(values(&r), vec![Some("x0".into()), Some("y0".into())], "never a mix of the two transactions");
        assert_eq!((r.metrics.rounds, r.metrics.versions_returned, r.metrics.blocked_ns), (1, 2, 0));
        run.sim.advance(10 * MS);
    }
    assert!(run.sim.drain_completions().iter().all(|d| d.client != alice), "Alice's write is not done");
    run.sim.stop_holding(held);
    run.sim.release(|_| true);
    let result = loop {
        let done = run.sim.step_until(run.sim.now_ns() + SECOND).expect("the write completes");
        if done.client == alice {
            break done.result;
        }
    };
    run.complete(&write, &result);
    result.expect("committed");
    run.sim.advance(20 * MS);
    let r = run.execute(bob, Request::Rot { keys: vec![x.clone(), y.clone()] });
    assert_eq!(values(&r), vec![Some("x1".into()), Some("y1".into())]);
    assert!(passes(run.events(), Level::Pos));
}

/// SNOW §4.3: COPS-DW's ROTs are strictly serializable under concurrent writes. The photo/ACL interleaving
/// (SNOW Fig. 3): Bob's ROT reads the ACL before Alice makes it private, and the album (held) after she
/// adds a private photo; the photo's commit recorded Bob as an old reader of the album's partition, so he
/// reads the old photo: a consistent snapshot, in one round with one version per key. A ROT invoked after
/// both writes completed reads both. Then many clients write and read concurrently; the whole history is
/// strictly serializable.
#[test]
fn cops_dw_is_strictly_serializable_under_concurrent_writes() {
    let mut run = Run::<CopsDw>::new(1, 3);
    let topo = run.sim.topology();
    let acl: Key = topo.key_on(1, "acl").into();
    let album: Key = topo.key_on(2, "album").into();
    let alice = run.client(0);
    let bob = run.client(0);
    run.execute(alice, Request::Put { key: acl.clone(), value: "public".into() });
    run.execute(alice, Request::Put { key: album.clone(), value: "old-photo".into() });

    let album_server = Addr::Server(ServerId::new(0, 2));
    let bob_addr = Addr::Client(bob);
    let held = run.sim.hold(move |e| e.from == bob_addr && e.to == album_server && matches!(e.msg, DwMsg::Read { .. }));
    let rot = run.submit(bob, Request::Rot { keys: vec![acl.clone(), album.clone()] });
    assert!(run.sim.advance(MS).is_empty(), "Bob waits for the album's partition");
    run.execute(alice, Request::Put { key: acl.clone(), value: "private".into() });
    run.execute(alice, Request::Put { key: album.clone(), value: "private-photo".into() });
    assert!(
        run.sim.server(ServerId::new(0, 2)).old_readers().iter().any(|r| r.client == bob),
        "the photo's commit made Bob an old reader of the album's partition"
    );
    run.sim.stop_holding(held);
    assert_eq!(run.sim.release(|_| true), 1);
    let done = run.sim.advance(MS);
    let [done] = &done[..] else { panic!("{done:?}") };
    run.complete(&rot, &done.result);
    let reply = done.result.clone().expect("Bob's ROT succeeds");
    assert_eq!(values(&reply), vec![Some("public".into()), Some("old-photo".into())]);
    assert_eq!((reply.metrics.rounds, reply.metrics.versions_returned, reply.metrics.blocked_ns), (1, 2, 0));
    assert_eq!(reply.reads[1].versions_skipped, 1, "the private photo was there and skipped");
    run.sim.advance(MS);
    let after = run.execute(bob, Request::Rot { keys: vec![acl.clone(), album.clone()] });
    assert_eq!(values(&after), vec![Some("private".into()), Some("private-photo".into())], "real-time order");

    // Concurrent writers and readers over three partitions.
    let writers: Vec<ClientId> = (0..3).map(|_| run.client(0)).collect();
    let readers: Vec<ClientId> = (0..3).map(|_| run.client(0)).collect();
    let keys: Vec<Key> = (0..6).map(|i| topo.key_on(i % 3, &format!("k{i}")).into()).collect();
    let mut inflight = Vec::new();
    for round in 0..20u64 {
        for (i, w) in writers.iter().enumerate() {
            let key = keys[(round as usize + i) % keys.len()].clone();
            inflight.push(run.submit(*w, Request::Put { key, value: format!("w{i}-{round}").into() }));
        }
        for r in &readers {
            inflight.push(run.submit(*r, Request::Rot { keys: keys.clone() }));
        }
        let mut left = inflight.len();
        while left > 0 {
            let done = run.sim.step_until(run.sim.now_ns() + 2 * SECOND).expect("every operation completes");
            let pos = inflight
                .iter()
                .position(|(op, _, p)| *op == done.op && run.process(done.client) == *p)
                .expect("one of ours");
            let submitted = inflight.swap_remove(pos);
            run.complete(&submitted, &done.result);
            let reply = done.result.expect("succeeds");
            if submitted.1.is_read_only() {
                assert_eq!((reply.metrics.rounds, reply.metrics.versions_returned), (1, keys.len() as u32));
                assert_eq!(reply.metrics.blocked_ns, 0);
            }
            left -= 1;
        }
    }
    assert!(passes(run.events(), Level::StrictSer), "strictly serializable");
    // The writer ordered every write; the readers' snapshots are prefixes of that order.
    assert_eq!(run.sim.server(WRITER).visible(), 2 + 2 + 60);
}
