//! The Jessy family in the simulator, one scenario per distinction the NMSI paper draws between its
//! criteria (§III, Table II(a)): each runs the scenario under every criterion it separates and asserts the
//! commit/abort outcomes and the checker's verdicts on the history it makes.

use snowline_checker::Level;
use snowline_core::Protocol;
use snowline_core::history::{HistoryEvent, HistoryOp, HistoryRecorder, OpKind};
use snowline_core::{AbortCause, ClientId, Key, OpError, OpId, Reply, Request, Topology, Value, Version};
use snowline_protocols::{Nmsi, Psi, Rc, Ser, Si, Us};
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
        self.sim
            .execute(s.client, OpId(s.op), request, 3 * SECOND)
            .expect("the operation completes within 3 s (a read the nearest member cannot answer is re-sent after 1 s)")
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

/// The criterion's claimed level.
fn claimed<P: Protocol>() -> Level {
    P::NAME.parse().expect("each criterion claims the level of its name")
}

/// Two transactions read x0 and both write x: whether the second to terminate commits, and the history.
fn lost_update<P: Protocol>() -> (Result<Option<Version>, OpError>, Vec<HistoryEvent>) {
    let (mut run, x, _) = start::<P>(1);
    let (mut t1, mut t2) = (run.session(0), run.session(0));
    run.begin(&mut t1);
    run.begin(&mut t2);
    assert_eq!(run.read(&mut t1, &x).as_deref(), Some("x0"), "{}", P::NAME);
    assert_eq!(run.read(&mut t2, &x).as_deref(), Some("x0"), "{}", P::NAME);
    run.commit(&mut t1, &[(&x, "x1")]).expect("the first writer commits");
    let second = run.commit(&mut t2, &[(&x, "x2")]);
    (second, run.events().to_vec())
}

/// Lost update (prevented by every criterion but RC): two transactions read x0 and both write x; the
/// second to terminate did not see the first's write. NMSI, SI and PSI certify write conflicts and SER and
/// US the reads, so each aborts it; RC commits both (the history then fails every snapshot level).
#[test]
fn a_lost_update_is_prevented_by_all_but_rc() {
    fn prevented<P: Protocol>() {
        let (second, events) = lost_update::<P>();
        let err = second.expect_err("the second writer aborts");
        assert!(matches!(&err, OpError::Aborted(a) if a.cause == AbortCause::Certification), "{}: {err:?}", P::NAME);
        assert!(passes(&events, claimed::<P>()), "{}", P::NAME);
        assert!(passes(&events, Level::Ser), "{}: with the loser aborted, the history is serializable", P::NAME);
    }
    prevented::<Nmsi>();
    prevented::<Ser>();
    prevented::<Us>();
    prevented::<Si>();
    prevented::<Psi>();

    let (second, events) = lost_update::<Rc>();
    second.expect("RC certifies nothing");
    for level in [Level::Nmsi, Level::Psi, Level::Si, Level::Us] {
        assert!(!passes(&events, level), "a lost update fails {level}");
    }
    assert!(passes(&events, Level::Rc));
}

/// T1 and T2 both read x and y; T1 writes x, T2 writes y: whether T2 commits, and the history.
fn write_skew<P: Protocol>() -> (Result<Option<Version>, OpError>, Vec<HistoryEvent>) {
    let (mut run, x, y) = start::<P>(1);
    let (mut t1, mut t2) = (run.session(0), run.session(0));
    run.begin(&mut t1);
    run.begin(&mut t2);
    for t in [&mut t1, &mut t2] {
        assert_eq!(run.read(t, &x).as_deref(), Some("x0"), "{}", P::NAME);
        assert_eq!(run.read(t, &y).as_deref(), Some("y0"), "{}", P::NAME);
    }
    run.commit(&mut t1, &[(&x, "x1 (y was y0)")]).expect("T1 commits");
    let second = run.commit(&mut t2, &[(&y, "y1 (x was x0)")]);
    (second, run.events().to_vec())
}

/// Write skew (allowed by SI, PSI and NMSI, prevented by SER and US): T1 and T2 write different keys, so
/// the write-conflict criteria commit both; the history passes their level and fails `ser`. Where reads
/// are certified (P-Store, GMU), T2 read x0, which T1 overwrote, so T2 aborts.
#[test]
fn write_skew_commits_under_si_psi_and_nmsi_and_not_under_ser_or_us() {
    fn commits<P: Protocol>() {
        let (second, events) = write_skew::<P>();
        second.unwrap_or_else(|e| panic!("{}: T2 commits: {e:?}", P::NAME));
        assert!(passes(&events, claimed::<P>()), "{}", P::NAME);
        assert!(!passes(&events, Level::Ser), "{}: write skew is not serializable", P::NAME);
    }
    fn prevented<P: Protocol>() {
        let (second, events) = write_skew::<P>();
        let err = second.expect_err("T2 read x0, overwritten: it aborts");
        assert!(matches!(&err, OpError::Aborted(a) if a.cause == AbortCause::Certification), "{}: {err:?}", P::NAME);
        assert!(passes(&events, Level::Ser), "{}", P::NAME);
    }
    commits::<Nmsi>();
    commits::<Si>();
    commits::<Psi>();
    prevented::<Ser>();
    prevented::<Us>();
}

/// T1 writes x in datacenter 0, T2 writes y in datacenter 1, each committed by its group's majority in its
/// own datacenter; right after, a reader in dc0 reads x then y, and a reader in dc1 y then x. Returns what
/// each saw, and the history.
type Seen = (Option<Value>, Option<Value>);
fn two_readers<P: Protocol>() -> (Seen, Seen, Vec<HistoryEvent>) {
    let (mut run, x, y) = start::<P>(2);
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
    (seen_a, seen_b, run.events().to_vec())
}

/// Long fork (allowed by PSI and NMSI, prevented by SI): before either write reaches the other
/// datacenter, the reader in dc0 sees x1 without y1 and the reader in dc1 y1 without x1: the two observe
/// the independent writes in opposite orders. Under SI every transaction is delivered to every group in
/// one order and a snapshot is a prefix of it, so the readers' snapshots are ordered.
#[test]
fn a_long_fork_is_possible_under_psi_and_nmsi_and_not_under_si() {
    fn forks<P: Protocol>() {
        let (seen_a, seen_b, events) = two_readers::<P>();
        assert_eq!((seen_a.0.as_deref(), seen_a.1.as_deref()), (Some("x1"), Some("y0")), "{}", P::NAME);
        assert_eq!((seen_b.0.as_deref(), seen_b.1.as_deref()), (Some("y1"), Some("x0")), "{}", P::NAME);
        assert!(passes(&events, claimed::<P>()), "{}", P::NAME);
        assert!(!passes(&events, Level::Si), "{}: SI has one order of snapshots: no long fork", P::NAME);
    }
    forks::<Nmsi>();
    forks::<Psi>();

    let (seen_a, seen_b, events) = two_readers::<Si>();
    let a_has = (seen_a.0.as_deref() == Some("x1"), seen_a.1.as_deref() == Some("y1"));
    let b_has = (seen_b.1.as_deref() == Some("x1"), seen_b.0.as_deref() == Some("y1"));
    let fork = (a_has.0 && !a_has.1 && b_has.1 && !b_has.0) || (a_has.1 && !a_has.0 && b_has.0 && !b_has.1);
    assert!(!fork, "SI: {seen_a:?} and {seen_b:?}");
    assert!(passes(&events, Level::Si));
}

/// One session reads x1 (written, after y1, by a transaction that read y1), then, in its next
/// transaction, y from a member of y's group cut off from its peers (it never applied y1) and x. Returns
/// what the second transaction saw, and the history.
fn session_after_stale_replica<P: Protocol>() -> (Seen, Vec<HistoryEvent>) {
    let (mut run, x, y) = start::<P>(2);
    let topology = run.sim.topology();
    // y's group: members in dc1, dc0, dc1; the dc0 one (the nearest to dc0's clients) is cut off.
    let stale = topology.nearest(0, topology.partition_of(&y));
    assert_eq!(stale.dc, 0);
    let stale_addr = snowline_core::Addr::Server(stale);
    run.sim.hold(move |e| {
        (e.to == stale_addr && matches!(e.from, snowline_core::Addr::Server(_)))
            || (e.from == stale_addr && matches!(e.to, snowline_core::Addr::Server(_)))
    });
    let mut w = run.session(1);
    run.read_modify_write(&mut w, &y, "y1").expect("y1 commits (y's majority is in dc1)");
    run.begin(&mut w);
    assert_eq!(run.read(&mut w, &y).as_deref(), Some("y1"));
    assert_eq!(run.read(&mut w, &x).as_deref(), Some("x0"));
    run.commit(&mut w, &[(&x, "x1 (y was y1)")]).expect("x1 commits");
    run.sim.advance(SECOND / 10);
    let mut r = run.session(0);
    run.begin(&mut r);
    assert_eq!(run.read(&mut r, &x).as_deref(), Some("x1 (y was y1)"), "{}", P::NAME);
    run.commit(&mut r, &[]).expect("a query commits");
    run.begin(&mut r);
    let seen = (run.read(&mut r, &y), run.read(&mut r, &x));
    run.commit(&mut r, &[]).expect("a query commits");
    (seen, run.events().to_vec())
}

/// Non-monotonic snapshot (the checker's `non-monotonic-snapshot`: allowed by NMSI, prevented by SI and
/// PSI, whose sessions see what they saw before): the session's second transaction reads y at the stale
/// member first, y0, and then, under NMSI, x at a position compatible with y0: x0, though the session's
/// first transaction saw x1. Under SI and PSI the first read must hold the session's floor (x1 and the
/// y1 it depends on): the stale member cannot answer, the client tries the next member, and the
/// snapshot holds y1 and x1. (US allows it too: like NMSI, it has no session axiom.)
#[test]
fn a_non_monotonic_snapshot_is_possible_under_nmsi_only() {
    fn goes_back<P: Protocol>() {
        let ((y, x), events) = session_after_stale_replica::<P>();
        assert_eq!((y.as_deref(), x.as_deref()), (Some("y0"), Some("x0")), "{}", P::NAME);
        assert!(passes(&events, claimed::<P>()), "{}", P::NAME);
        assert!(!passes(&events, Level::Psi), "{}: the session's snapshots go backwards", P::NAME);
    }
    fn monotonic<P: Protocol>() {
        let ((y, x), events) = session_after_stale_replica::<P>();
        assert_eq!((y.as_deref(), x.as_deref()), (Some("y1"), Some("x1 (y was y1)")), "{}", P::NAME);
        assert!(passes(&events, claimed::<P>()), "{}", P::NAME);
    }
    goes_back::<Nmsi>();
    goes_back::<Us>();
    monotonic::<Si>();
    monotonic::<Psi>();
}

/// Wait-free queries (every criterion but SER, which trades them for genuine partial replication): a
/// read-only transaction never aborts, whatever commits around it, and terminates without a message
/// (its commit completes in no time).
#[test]
fn a_read_only_transaction_never_aborts_where_queries_are_wait_free() {
    fn wait_free<P: Protocol>() {
        let (mut run, x, y) = start::<P>(1);
        let (mut reader, mut writer) = (run.session(0), run.session(0));
        for i in 0..20 {
            run.begin(&mut reader);
            run.read(&mut reader, &x);
            run.read_modify_write(&mut writer, &x, &format!("x-{i}")).expect("the only writer commits");
            run.read_modify_write(&mut writer, &y, &format!("y-{i}")).expect("the only writer commits");
            run.read(&mut reader, &y);
            let before = run.sim.now_ns();
            assert_eq!(run.commit(&mut reader, &[]), Ok(None), "{}: a query commits", P::NAME);
            assert_eq!(run.sim.now_ns(), before, "{}: a query terminates locally", P::NAME);
        }
        assert!(passes(run.events(), claimed::<P>()), "{}", P::NAME);
    }
    wait_free::<Nmsi>();
    wait_free::<Us>();
    wait_free::<Si>();
    wait_free::<Psi>();
    wait_free::<Rc>();

    // SER certifies queries: the reader read x before the writer overwrote it, so its query aborts.
    let (mut run, x, y) = start::<Ser>(1);
    let (mut reader, mut writer) = (run.session(0), run.session(0));
    run.begin(&mut reader);
    run.read(&mut reader, &x);
    run.read_modify_write(&mut writer, &x, "x-1").expect("the only writer commits");
    run.read(&mut reader, &y);
    let err = run.commit(&mut reader, &[]).expect_err("a query whose read was overwritten aborts under SER");
    assert!(matches!(&err, OpError::Aborted(a) if a.cause == AbortCause::Certification), "{err:?}");
    assert!(passes(run.events(), Level::Ser));
}

/// A transaction that writes a key it did not read, under a criterion without blind writes (NMSI, US, SI,
/// PSI): its snapshot holds no version of the key, so certification would abort it whenever the key exists,
/// blaming a concurrent transaction there is none of (or, under US, could commit it unserializably). The
/// client node refuses it before sending anything, naming the fix, and the session goes on; read first, the
/// same write commits. RC and SER, which offer blind writes, commit it.
#[test]
fn a_write_of_an_unread_key_is_refused_up_front_where_blind_writes_are_not_offered() {
    fn refused<P: Protocol>() {
        assert!(!P::OFFERS.blind_writes, "{}", P::NAME);
        let (mut run, x, y) = start::<P>(1);
        let mut s = run.session(0);
        for (i, reads) in [&[][..], &[&y][..]].into_iter().enumerate() {
            run.begin(&mut s);
            for key in reads {
                run.read(&mut s, key);
            }
            let before = run.sim.now_ns();
            let err = run.commit(&mut s, &[(&x, &format!("blind-{i}"))]).expect_err("refused");
            assert_eq!(run.sim.now_ns(), before, "{}: refused without a message", P::NAME);
            let OpError::Rejected(why) = &err else { panic!("{}: {err:?}", P::NAME) };
            assert!(why.contains(&format!("{} offers no blind writes", P::NAME)), "{why}");
            assert!(why.contains("must read each key it writes") && why.contains(&format!("{x:?}")), "{why}");
        }
        // The refused transaction is closed; reading x first, the write commits.
        run.read_modify_write(&mut s, &x, "x1").expect("read, then written: commits");
        assert!(passes(run.events(), claimed::<P>()), "{}", P::NAME);
    }
    refused::<Nmsi>();
    refused::<Us>();
    refused::<Si>();
    refused::<Psi>();

    fn committed<P: Protocol>() {
        let (mut run, x, _) = start::<P>(1);
        let mut s = run.session(0);
        run.begin(&mut s);
        run.commit(&mut s, &[(&x, "blind")]).expect("a blind write commits");
    }
    committed::<Rc>();
    committed::<Ser>();
}
