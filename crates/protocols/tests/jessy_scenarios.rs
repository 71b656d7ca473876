//! Jessy's NMSI in the simulator, one scenario per distinction the NMSI paper draws (§III, Table II(a)):
//! each asserts the commit/abort outcomes and the checker's verdicts on the history it makes.

use snowline_checker::Level;
use snowline_core::Protocol;
use snowline_core::history::{HistoryEvent, HistoryOp, HistoryRecorder, OpKind};
use snowline_core::{AbortCause, ClientId, Key, OpError, OpId, Reply, Request, Topology, Value, Version};
use snowline_protocols::{Nmsi, Rc, Ser};
use snowline_sim::{Sim, SimConfig};

const WAN_NS: u64 = 10_000_000;
const SECOND: u64 = 1_000_000_000;

/// Replica groups of three; `dcs` datacenters 10 ms apart. Group 0 holds `x`, group 1 holds `y`.
fn sim<P: Protocol>(dcs: u16) -> (Sim<P>, Key, Key) {
    let topology = Topology::replicated(dcs, 2, 3);
    let sim = Sim::new(SimConfig::exact(1, topology, 100_000, WAN_NS));
    (sim, topology.key_on(0, "x").into(), topology.key_on(1, "y").into())
}

/// A session's transactions, recorded into one history as the harness records them.
struct Session {
    client: ClientId,
    process: u64,
    op: u64,
    slot: usize,
    ops: Vec<HistoryOp>,
}

struct Run<P: Protocol> {
    sim: Sim<P>,
    history: HistoryRecorder,
}

impl<P: Protocol> Run<P> {
    fn session(&mut self, dc: u16) -> Session {
        let client = self.sim.add_client(dc);
        Session { client, process: self.history.new_process(), op: client.0 << 20, slot: 0, ops: Vec::new() }
    }

    fn request(&mut self, s: &mut Session, request: Request) -> Result<Reply, OpError> {
        s.op += 1;
        self.sim.execute(s.client, OpId(s.op), request, SECOND).expect("the operation completes within a second")
    }

    fn begin(&mut self, s: &mut Session) {
        self.request(s, Request::Begin).expect("begin");
        s.slot = self.history.invoke_txn(s.process, 0, self.sim.now_ns());
        s.ops.clear();
    }

    fn read(&mut self, s: &mut Session, key: &Key) -> Option<Value> {
        let reply = self.request(s, Request::Read { keys: vec![key.clone()] }).expect("reads never fail");
        let value = reply.reads[0].value.clone();
        s.ops.push(HistoryOp(OpKind::Read, key.clone(), value.clone()));
        value
    }

    fn commit(&mut self, s: &mut Session, writes: &[(&Key, &str)]) -> Result<Option<Version>, OpError> {
        let writes: Vec<(Key, Value)> = writes.iter().map(|(k, v)| ((*k).clone(), (*v).into())).collect();
        let result = self.request(s, Request::Commit { writes: writes.clone() }).map(|r| r.commit);
        let mut ops = std::mem::take(&mut s.ops);
        ops.extend(writes.into_iter().map(|(k, v)| HistoryOp(OpKind::Write, k, Some(v))));
        self.history.complete_txn(s.slot, ops, &result, self.sim.now_ns());
        result
    }

    /// Reads `key` and writes `value` over it, in one transaction.
    fn read_modify_write(&mut self, s: &mut Session, key: &Key, value: &str) -> Result<Option<Version>, OpError> {
        self.begin(s);
        self.read(s, key);
        self.commit(s, &[(key, value)])
    }

    fn events(&self) -> &[HistoryEvent] {
        &self.history.events
    }
}

fn passes(events: &[HistoryEvent], level: Level) -> bool {
    let history = snowline_checker::validate(events).expect("a valid history");
    snowline_checker::check_with_versions(&history, level).ok
}

fn start<P: Protocol>(dcs: u16) -> (Run<P>, Key, Key) {
    let (sim, x, y) = sim::<P>(dcs);
    let mut run = Run { sim, history: HistoryRecorder::new() };
    // The groups elect their leaders first (a submit that reaches a group before would wait for the retry).
    run.sim.advance(SECOND / 10);
    let mut setup = run.session(0);
    run.read_modify_write(&mut setup, &x, "x0").expect("x0 commits");
    run.read_modify_write(&mut setup, &y, "y0").expect("y0 commits");
    // Every member applies the initial values.
    run.sim.advance(SECOND / 10);
    (run, x, y)
}

/// Lost update (prevented by every criterion but RC): two transactions read x0 and both write x; the
/// second to terminate did not see the first's write, so NMSI's certification aborts it, and RC commits
/// both (the history then fails `nmsi`, and passes `rc`).
#[test]
fn a_lost_update_is_prevented() {
    let (mut run, x, _) = start::<Nmsi>(1);
    let (mut t1, mut t2) = (run.session(0), run.session(0));
    run.begin(&mut t1);
    run.begin(&mut t2);
    assert_eq!(run.read(&mut t1, &x).as_deref(), Some("x0"));
    assert_eq!(run.read(&mut t2, &x).as_deref(), Some("x0"));
    run.commit(&mut t1, &[(&x, "x1")]).expect("the first writer commits");
    let err = run.commit(&mut t2, &[(&x, "x2")]).expect_err("the second writer aborts");
    assert!(matches!(&err, OpError::Aborted(a) if a.cause == AbortCause::Certification), "{err:?}");
    assert!(passes(run.events(), Level::Nmsi));
    assert!(passes(run.events(), Level::Ser), "with the loser aborted, the history is serializable");

    let (mut run, x, _) = start::<Rc>(1);
    let (mut t1, mut t2) = (run.session(0), run.session(0));
    run.begin(&mut t1);
    run.begin(&mut t2);
    run.read(&mut t1, &x);
    run.read(&mut t2, &x);
    run.commit(&mut t1, &[(&x, "x1")]).expect("RC certifies nothing");
    run.commit(&mut t2, &[(&x, "x2")]).expect("RC certifies nothing");
    assert!(!passes(run.events(), Level::Nmsi), "a lost update");
    assert!(passes(run.events(), Level::Rc));
}

/// Write skew (allowed by SI, PSI and NMSI, prevented by SER): T1 and T2 both read x and y; T1 writes x,
/// T2 writes y. Under NMSI they write different keys, so both commit; the history passes `nmsi` and fails
/// `ser`. Under SER (P-Store) reads are certified: T2 read x0, which T1 overwrote, so T2 aborts.
#[test]
fn write_skew_commits_under_nmsi_and_not_under_ser() {
    let (mut run, x, y) = start::<Nmsi>(1);
    let (mut t1, mut t2) = (run.session(0), run.session(0));
    run.begin(&mut t1);
    run.begin(&mut t2);
    for t in [&mut t1, &mut t2] {
        assert_eq!(run.read(t, &x).as_deref(), Some("x0"));
        assert_eq!(run.read(t, &y).as_deref(), Some("y0"));
    }
    run.commit(&mut t1, &[(&x, "x1 (y was y0)")]).expect("T1 commits");
    run.commit(&mut t2, &[(&y, "y1 (x was x0)")]).expect("T2 commits");
    assert!(passes(run.events(), Level::Nmsi));
    assert!(!passes(run.events(), Level::Ser), "write skew is not serializable");

    let (mut run, x, y) = start::<Ser>(1);
    let (mut t1, mut t2) = (run.session(0), run.session(0));
    run.begin(&mut t1);
    run.begin(&mut t2);
    for t in [&mut t1, &mut t2] {
        assert_eq!(run.read(t, &x).as_deref(), Some("x0"));
        assert_eq!(run.read(t, &y).as_deref(), Some("y0"));
    }
    run.commit(&mut t1, &[(&x, "x1 (y was y0)")]).expect("T1 commits");
    let err = run.commit(&mut t2, &[(&y, "y1 (x was x0)")]).expect_err("T2 read x0, overwritten: it aborts");
    assert!(matches!(&err, OpError::Aborted(a) if a.cause == AbortCause::Certification), "{err:?}");
    assert!(passes(run.events(), Level::Ser));
}

/// Long fork (allowed by PSI and NMSI, prevented by SI): T1 writes x in datacenter 0, T2 writes y in
/// datacenter 1, each committed by its group's majority in its own datacenter. Before either reaches the
/// other datacenter, a reader in dc0 sees x1 without y1 and a reader in dc1 sees y1 without x1: the two
/// observe the independent writes in opposite orders. Both read-only transactions commit at once.
#[test]
fn a_long_fork_is_possible() {
    let (mut run, x, y) = start::<Nmsi>(2);
    let (mut t1, mut t2) = (run.session(0), run.session(1));
    run.read_modify_write(&mut t1, &x, "x1").expect("T1 commits");
    run.read_modify_write(&mut t2, &y, "y1").expect("T2 commits");
    let (mut a, mut b) = (run.session(0), run.session(1));
    run.begin(&mut a);
    let seen_a = (run.read(&mut a, &x), run.read(&mut a, &y));
    run.commit(&mut a, &[]).expect("a query commits");
    run.begin(&mut b);
    let seen_b = (run.read(&mut b, &y), run.read(&mut b, &x));
    run.commit(&mut b, &[]).expect("a query commits");
    assert_eq!((seen_a.0.as_deref(), seen_a.1.as_deref()), (Some("x1"), Some("y0")));
    assert_eq!((seen_b.0.as_deref(), seen_b.1.as_deref()), (Some("y1"), Some("x0")));
    assert!(passes(run.events(), Level::Nmsi));
    assert!(passes(run.events(), Level::Psi));
    assert!(!passes(run.events(), Level::Si), "SI has one order of snapshots: no long fork");
}

/// Wait-free queries: a read-only transaction never aborts, whatever commits around it, and terminates
/// without a message (its commit completes in no time).
#[test]
fn a_read_only_transaction_never_aborts() {
    let (mut run, x, y) = start::<Nmsi>(1);
    let (mut reader, mut writer) = (run.session(0), run.session(0));
    for i in 0..20 {
        run.begin(&mut reader);
        run.read(&mut reader, &x);
        run.read_modify_write(&mut writer, &x, &format!("x-{i}")).expect("the only writer commits");
        run.read_modify_write(&mut writer, &y, &format!("y-{i}")).expect("the only writer commits");
        run.read(&mut reader, &y);
        let before = run.sim.now_ns();
        assert_eq!(run.commit(&mut reader, &[]), Ok(None), "a query commits");
        assert_eq!(run.sim.now_ns(), before, "a query terminates locally");
    }
    assert!(passes(run.events(), Level::Nmsi));
}
