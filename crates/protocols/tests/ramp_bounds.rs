//! RAMP's bounded adds (`-N>=F`, `snowline_core::merge`): the coordination a non-confluent floor needs
//! (`CHECK (s_quantity >= 10)` under decrements), kept at the row's owner. Concurrent decrements never take
//! the field below its floor, a refused transaction is aborted everywhere (its other partitions' versions
//! dropped, its escrow released), and `nocc`, which cannot abort, refuses bounded adds outright.

use snowline_core::{AbortCause, Key, OpError, OpId, Protocol, Request, Topology, Value};
use snowline_protocols::ramp::{BloomFilters, Metadata, Ramp, TimestampsOnly, WriteSets};
use snowline_protocols::{NoCc, RampF};
use snowline_sim::{Sim, SimConfig};

const MS: u64 = 1_000_000;
const SECOND: u64 = 1_000 * MS;

fn sim<P: Protocol>() -> Sim<P> {
    Sim::new(SimConfig::exact(1, Topology::new(1, 2), 100_000, 10 * MS))
}

fn update(writes: &[(&Key, &str)]) -> Request {
    Request::Update { writes: writes.iter().map(|(k, v)| ((*k).clone(), Value::from(*v))).collect() }
}

fn read<P: Protocol>(sim: &mut Sim<P>, c: snowline_core::ClientId, op: u64, keys: &[&Key]) -> Vec<Option<String>> {
    let keys = keys.iter().map(|k| (*k).clone()).collect();
    let reply = sim.execute(c, OpId(op), Request::Rot { keys }, SECOND).unwrap().unwrap();
    reply.reads.iter().map(|r| r.value.as_deref().map(|v| v.split(';').next().unwrap_or(v).to_string())).collect()
}

fn concurrent_decrements_stop_at_the_floor<M: Metadata>() {
    let mut sim = sim::<Ramp<M>>();
    let topo = sim.topology();
    let s: Key = topo.key_on(0, "stock").into();
    let loader = sim.add_client(0);
    sim.execute(loader, OpId(0), update(&[(&s, "30;load")]), SECOND).unwrap().unwrap();
    // Eight transactions at once, each taking 4 from the stock and inserting an order row on partition 1:
    // 30 − 5×4 = 10 is the floor, so exactly five commit.
    let orders: Vec<Key> = (0..8).map(|i| topo.key_on(1, &format!("order{i}")).into()).collect();
    let clients: Vec<_> = (0..8).map(|_| sim.add_client(0)).collect();
    for (i, c) in clients.iter().enumerate() {
        sim.submit(*c, OpId(1), update(&[(&s, &format!("merge:-4>=10;t{i}")), (&orders[i], "placed")]));
    }
    let done = sim.run_until(sim.now_ns() + SECOND);
    assert_eq!(done.len(), 8, "every transaction answered");
    let mut committed = 0;
    let mut inserted = Vec::new();
    for d in done {
        let i = clients.iter().position(|c| *c == d.client).expect("one of the eight");
        match d.result {
            Ok(_) => {
                committed += 1;
                inserted.push(&orders[i]);
            }
            Err(OpError::Aborted(a)) => {
                assert_eq!(a.cause, AbortCause::User, "{a:?}");
                assert!(a.detail.contains("below its floor 10"), "{a:?}");
            }
            Err(e) => panic!("{}: {e:?}", M::NAME),
        }
    }
    assert_eq!(committed, 5, "{}", M::NAME);
    assert_eq!(read(&mut sim, loader, 2, &[&s]), [Some("10".to_string())]);
    let all: Vec<&Key> = orders.iter().collect();
    let rows = read(&mut sim, loader, 3, &all);
    for (k, v) in orders.iter().zip(rows) {
        assert_eq!(v.is_some(), inserted.contains(&k), "{k}: an aborted transaction's other writes are dropped");
    }
    for p in 0..2 {
        assert_eq!(sim.server(snowline_core::ServerId::new(0, p)).prepared(), 0, "nothing left prepared");
    }
}

#[test]
fn concurrent_bounded_decrements_never_pass_the_floor() {
    concurrent_decrements_stop_at_the_floor::<WriteSets>();
    concurrent_decrements_stop_at_the_floor::<TimestampsOnly>();
    concurrent_decrements_stop_at_the_floor::<BloomFilters>();
}

#[test]
fn an_aborted_transaction_releases_what_it_reserved() {
    let mut sim = sim::<RampF>();
    let topo = sim.topology();
    let (s, z): (Key, Key) = (topo.key_on(0, "stock").into(), topo.key_on(1, "other").into());
    let c = sim.add_client(0);
    sim.execute(c, OpId(0), update(&[(&s, "14;a"), (&z, "0;a")]), SECOND).unwrap().unwrap();
    // Accepted at partition 0 (14 − 4 ≥ 10), refused at partition 1 (0 − 1 < 0): aborted everywhere.
    let err = sim.execute(c, OpId(1), update(&[(&s, "merge:-4>=10;b"), (&z, "merge:-1>=0;b")]), SECOND).unwrap();
    assert!(matches!(&err, Err(OpError::Aborted(a)) if a.detail.contains("other")), "{err:?}");
    // Had partition 0 kept its reservation, this one would be refused (14 − 4 − 4 < 10).
    sim.execute(c, OpId(2), update(&[(&s, "merge:-4>=10;c")]), SECOND).unwrap().expect("the escrow was released");
    assert_eq!(read(&mut sim, c, 3, &[&s, &z]), [Some("10".to_string()), Some("0".to_string())]);
}

#[test]
fn a_store_without_aborts_refuses_bounded_adds() {
    let mut sim = sim::<NoCc>();
    let s: Key = sim.topology().key_on(0, "stock").into();
    let c = sim.add_client(0);
    let err = sim.execute(c, OpId(1), update(&[(&s, "merge:-4>=10")]), SECOND).unwrap();
    assert!(matches!(&err, Err(OpError::Rejected(r)) if r.contains("cannot keep")), "{err:?}");
}
