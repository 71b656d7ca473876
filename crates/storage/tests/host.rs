//! `DurableHost` over `MemLog`: crash recovery is exact, held effects are never seen before their input is
//! durable, server-to-server links are exactly-once and FIFO across loss and crashes, the catch-up exchange
//! brings a restarted server up to date without any new traffic, and checkpoints bound the log.

use rand::Rng;
use serde::{Deserialize, Serialize};
use snowline_core::{
    Addr, ClientId, ClientNode, Ctx, DcId, InvalidInput, LinkAssumptions, Message, OpId, Protocol, ProtocolConfig,
    Request, ServerId, ServerNode, Topology,
};
use snowline_storage::{DurableHost, MemLog, Output, RecordLog, StorageError};
use std::collections::BTreeMap;
use std::path::Path;

/// A replicated register per key: a put is stored with the clock and a random tag, answered, and replicated
/// to the siblings; a periodic timer counts ticks. Everything the host must restore shows in the state.
struct Reg;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
enum RegMsg {
    Put {
        key: String,
        value: String,
    },
    PutOk {
        at: u64,
    },
    Replicate {
        key: String,
        value: String,
        n: u64,
    },
    /// A read at snapshot `at`: read-only, it promises that later puts are stamped after `at`.
    Get {
        key: String,
        at: u64,
    },
    GetOk {
        value: Option<String>,
    },
    /// A server's own refusal of a client's put whose host did not take it (a full disk).
    Refused {
        why: String,
    },
    /// Breaks the driver contract twice: completes an operation and sends to a server that does not exist.
    Misbehave,
}

impl Message for RegMsg {
    fn kind(&self) -> &'static str {
        match self {
            RegMsg::Put { .. } => "put",
            RegMsg::PutOk { .. } => "put-ok",
            RegMsg::Replicate { .. } => "replicate",
            RegMsg::Get { .. } => "get",
            RegMsg::GetOk { .. } => "get-ok",
            RegMsg::Misbehave => "misbehave",
            RegMsg::Refused { .. } => "refused",
        }
    }

    fn is_client_write(&self) -> bool {
        matches!(self, RegMsg::Put { .. })
    }

    /// A put its host refuses is answered in the protocol's words (`Refused`), except one of key "generic".
    fn refusal(&self, why: &str) -> Option<Self> {
        match self {
            RegMsg::Put { key, .. } if key != "generic" => Some(RegMsg::Refused { why: why.into() }),
            _ => None,
        }
    }
}

#[derive(Debug, PartialEq, Serialize, Deserialize)]
struct RegServer {
    id: ServerId,
    topology: Topology,
    data: BTreeMap<String, (String, u64, u32)>,
    /// Replicated puts in arrival order, per origin: FIFO exactly-once shows as 1, 2, 3, ...
    applied: BTreeMap<DcId, Vec<u64>>,
    puts: u64,
    ticks: u64,
    /// The log position of each key's last put (what a read of it waits for).
    written_at: BTreeMap<String, u64>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
struct Tick;

impl ServerNode<Reg> for RegServer {
    fn on_start(&mut self, cx: &mut Ctx<'_, Reg>) {
        cx.set_timer(1_000_000, Tick);
    }

    fn on_message(&mut self, cx: &mut Ctx<'_, Reg>, from: Addr, msg: RegMsg) -> Result<(), InvalidInput> {
        match msg {
            RegMsg::Put { key, value } => {
                self.puts += 1;
                let tag = cx.rng().random::<u32>();
                self.data.insert(key.clone(), (value.clone(), cx.now_ns(), tag));
                self.written_at.insert(key.clone(), cx.position());
                for s in self.topology.siblings(self.id) {
                    cx.send(s, RegMsg::Replicate { key: key.clone(), value: value.clone(), n: self.puts });
                }
                cx.send(from, RegMsg::PutOk { at: cx.now_ns() });
            }
            RegMsg::Replicate { key, value, n } => {
                let Addr::Server(s) = from else { panic!("replication comes from servers") };
                self.applied.entry(s.dc).or_default().push(n);
                self.data.insert(key, (value, cx.now_ns(), 0));
            }
            RegMsg::Get { key, at } => {
                cx.read_only();
                cx.raise_clock(at);
                cx.reply_after(self.written_at.get(&key).copied().unwrap_or(0));
                cx.send(from, RegMsg::GetOk { value: self.data.get(&key).map(|d| d.0.clone()) });
            }
            RegMsg::Misbehave => {
                cx.complete(OpId(3), Err(snowline_core::OpError::Rejected("a server has no operations".into())));
                cx.send(ServerId::new(9, 0), RegMsg::PutOk { at: 0 });
                cx.send(from, RegMsg::PutOk { at: 1 });
            }
            RegMsg::PutOk { .. } | RegMsg::GetOk { .. } | RegMsg::Refused { .. } => {}
        }
        Ok(())
    }

    fn on_timer(&mut self, cx: &mut Ctx<'_, Reg>, _timer: Tick) {
        self.ticks += 1;
        cx.set_timer(1_000_000, Tick);
    }

    fn stored_versions(&self) -> usize {
        self.data.len()
    }
}

struct RegClient;

impl ClientNode<Reg> for RegClient {
    fn on_request(&mut self, _cx: &mut Ctx<'_, Reg>, _op: OpId, _request: Request) {}
    fn on_message(&mut self, _cx: &mut Ctx<'_, Reg>, _from: Addr, _msg: RegMsg) {}
}

impl Protocol for Reg {
    const NAME: &'static str = "reg";
    type Msg = RegMsg;
    type Timer = Tick;
    type Server = RegServer;
    type Client = RegClient;
    const OFFERS: snowline_core::Offers = snowline_core::Offers::CAUSAL;

    fn links() -> LinkAssumptions {
        LinkAssumptions { fifo: true }
    }

    fn server(id: ServerId, topology: Topology, _config: &ProtocolConfig) -> RegServer {
        RegServer {
            id,
            topology,
            data: BTreeMap::new(),
            applied: BTreeMap::new(),
            puts: 0,
            ticks: 0,
            written_at: BTreeMap::new(),
        }
    }

    fn client(_id: ClientId, _dc: DcId, _topology: Topology, _config: &ProtocolConfig) -> RegClient {
        RegClient
    }
}

type Host = DurableHost<Reg, MemLog>;

const TOPOLOGY: Topology = Topology { dcs: 2, partitions: 1, replicas: 2, placement: snowline_core::Placement::Spread };
const A: ServerId = ServerId::new(0, 0);
const B: ServerId = ServerId::new(1, 0);
const CLIENT: Addr = Addr::Client(ClientId(7));

fn open(log: MemLog, id: ServerId, wall: u64) -> Result<Host, StorageError> {
    let recovered = log.recovered();
    DurableHost::open(log, Path::new("mem.log"), recovered, TOPOLOGY, &ProtocolConfig::default(), &[id], 42, wall)
}

fn crash(host: Host, id: ServerId, wall: u64) -> Host {
    let mut log = host.into_log();
    log.crash();
    open(log, id, wall).unwrap()
}

fn put(host: &mut Host, n: u64, wall: u64) {
    let msg = RegMsg::Put { key: format!("k{}", n % 5), value: format!("v{n}") };
    assert!(host.on_message(host_id(host), CLIENT, None, msg, wall));
}

fn host_id(host: &Host) -> ServerId {
    host.servers().next().unwrap().0
}

fn state(host: &Host) -> Vec<u8> {
    postcard::to_stdvec(host.servers().next().unwrap().1).unwrap()
}

fn server(host: &Host) -> &RegServer {
    host.servers().next().unwrap().1
}

/// Delivers `outputs` from one host to the other (acks and sequenced messages), except those `drop` picks.
fn deliver(outputs: Vec<Output<RegMsg>>, to: &mut Host, wall: u64, drop: impl Fn(u64) -> bool) {
    for out in outputs {
        match out {
            Output::Seq { from, to: t, seq, msg } if !drop(seq) => {
                to.on_message(t, Addr::Server(from), Some(seq), msg, wall);
            }
            Output::Ack { from, to: t, seq, resend } => to.on_ack(from, t, seq, resend, wall),
            _ => {}
        }
    }
}

/// A (dc0) and B (dc1), started, after A committed puts 1..=`puts` (their outputs not yet taken).
fn two_hosts_after_puts(puts: u64) -> (Host, Host) {
    let mut a = open(MemLog::new(), A, 1).unwrap();
    let mut b = open(MemLog::new(), B, 1).unwrap();
    a.take_outputs();
    b.take_outputs();
    for n in 1..=puts {
        put(&mut a, n, 10 + n);
    }
    a.commit().unwrap();
    (a, b)
}

fn client_replies(outputs: &[Output<RegMsg>]) -> usize {
    outputs.iter().filter(|o| matches!(o, Output::ToClient { .. })).count()
}

#[test]
fn recovery_restores_exactly_the_committed_inputs_and_nothing_held_was_seen() {
    let mut a = open(MemLog::new(), A, 1_000).unwrap();
    for n in 1..=10 {
        put(&mut a, n, 1_000 + n);
    }
    let held = a.take_outputs();
    assert_eq!(client_replies(&held), 0, "no reply before the inputs are durable");
    a.commit().unwrap();
    assert_eq!(client_replies(&a.take_outputs()), 10, "the commit releases every reply");
    a.on_timer(0, 1, 2_000_000);
    a.commit().unwrap();
    let committed = state(&a);
    assert_eq!(server(&a).ticks, 1);
    for n in 11..=15 {
        put(&mut a, n, 3_000_000 + n);
    }
    assert_eq!(client_replies(&a.take_outputs()), 0);
    // The process dies before the last five inputs are durable: nobody saw their effects, and they are gone.
    let a = crash(a, A, 500);
    assert_eq!(state(&a), committed, "replay rebuilds the committed state exactly (clock readings and random tags)");
    assert_eq!(server(&a).puts, 10);
}

#[test]
fn clocks_never_go_back_and_pending_timers_are_rearmed_after_a_restart() {
    let mut a = open(MemLog::new(), A, 5_000_000).unwrap();
    let timers: Vec<_> = a.take_outputs().into_iter().filter(|o| matches!(o, Output::Timer { .. })).collect();
    assert_eq!(timers, [Output::Timer { node: 0, id: 1, delay_ns: 1_000_000 }]);
    put(&mut a, 1, 9_000_000);
    a.commit().unwrap();
    // Restarted with a wall clock that stepped back: the timer is re-armed, and the next reading is not earlier.
    let mut a = crash(a, A, 1_000);
    let outs = a.take_outputs();
    assert!(outs.contains(&Output::Timer { node: 0, id: 1, delay_ns: 0 }), "{outs:?}");
    put(&mut a, 2, 1_000);
    assert!(server(&a).data["k2"].1 >= 9_000_000, "the clock stays at or above the last logged reading");
    a.on_timer(0, 1, 1_000);
    assert_eq!(server(&a).ticks, 1);
    a.on_timer(0, 1, 1_000);
    assert_eq!(server(&a).ticks, 1, "a timer fires once");
}

#[test]
fn links_are_exactly_once_and_fifo_across_loss_and_a_crash_and_the_catch_up_needs_no_new_traffic() {
    let (mut a, mut b) = two_hosts_after_puts(6);
    // Messages 2 and 3 are lost on the way: B delivers 1 and keeps 4 to 6 until the gap fills; a gap that
    // lasts (50 ms) makes it ask for a resend.
    deliver(a.take_outputs(), &mut b, 100, |seq| seq == 2 || seq == 3);
    assert_eq!(server(&b).applied[&0], [1]);
    b.commit().unwrap();
    b.take_outputs();
    b.tick(10_000_000);
    let early = b.take_outputs();
    assert!(
        !early.iter().any(|o| matches!(o, Output::Ack { resend: true, .. })),
        "a short gap may be reordering: no resend request yet: {early:?}"
    );
    deliver(early, &mut a, 10_000_000, |_| false);
    b.tick(60_000_000);
    deliver(b.take_outputs(), &mut a, 60_000_000, |_| false);
    deliver(a.take_outputs(), &mut b, 60_000_100, |_| false);
    assert_eq!(server(&b).applied[&0], [1, 2, 3, 4, 5, 6], "the resend fills the gap, in order");
    b.commit().unwrap();
    b.tick(70_000_000);
    deliver(b.take_outputs(), &mut a, 70_000_000, |_| false);

    // B dies; A takes more writes meanwhile, and its messages to B are lost.
    let mut b_log = b.into_log();
    b_log.crash();
    for n in 7..=9 {
        put(&mut a, n, 500 + n);
    }
    a.commit().unwrap();
    let lost = a.take_outputs();
    assert_eq!(lost.iter().filter(|o| matches!(o, Output::Seq { .. })).count(), 3);
    assert_eq!(a.largest_backlog(), Some((A, B, 3)), "A keeps what B has not acknowledged");
    // B restarts: its first outputs ask A for everything after what it delivered, and A answers at once.
    let mut b = open(b_log, B, 1_000).unwrap();
    assert_eq!(server(&b).applied[&0], [1, 2, 3, 4, 5, 6], "B recovered what it had delivered");
    let hello = b.take_outputs();
    assert!(hello.contains(&Output::Ack { from: B, to: A, seq: 6, resend: true }), "{hello:?}");
    deliver(hello, &mut a, 1_100, |_| false);
    deliver(a.take_outputs(), &mut b, 1_200, |_| false);
    assert_eq!(server(&b).applied[&0], [1, 2, 3, 4, 5, 6, 7, 8, 9]);
    b.commit().unwrap();
    b.tick(1_300_000);
    deliver(b.take_outputs(), &mut a, 1_300_000, |_| false);
    assert_eq!(a.largest_backlog(), Some((A, B, 0)), "acknowledged messages are forgotten");
    // Reordered messages wait for the one they overtook, then go in order.
    for n in 10..=12 {
        put(&mut a, n, 2_000 + n);
    }
    a.commit().unwrap();
    let mut outs = a.take_outputs();
    outs.reverse();
    deliver(outs, &mut b, 1_250, |_| false);
    assert_eq!(server(&b).applied[&0][9..], [10, 11, 12]);
    // Duplicates (a late copy of an old message) are dropped.
    b.on_message(B, Addr::Server(A), Some(4), RegMsg::Replicate { key: "x".into(), value: "y".into(), n: 4 }, 1_300);
    assert_eq!(server(&b).applied[&0].len(), 12);
}

#[test]
fn messages_sent_before_a_crash_are_retransmitted_by_the_restarted_sender() {
    let (mut a, mut b) = two_hosts_after_puts(4);
    let _lost_in_flight = a.take_outputs();
    // A dies right after its commit; what it sent never arrived. On restart it resends its unacknowledged
    // messages by itself.
    let mut a = crash(a, A, 100);
    deliver(a.take_outputs(), &mut b, 200, |_| false);
    assert_eq!(server(&b).applied[&0], [1, 2, 3, 4]);
}

#[test]
fn checkpoints_bound_the_log_and_recovery_from_them_is_exact() {
    let mut a = open(MemLog::new(), A, 1).unwrap();
    a.set_checkpoint_every(50);
    for n in 1..=1_000 {
        put(&mut a, n, 10 + n);
        if n % 7 == 0 {
            a.commit().unwrap();
        }
    }
    a.commit().unwrap();
    let committed = state(&a);
    let log = a.into_log();
    assert!(log.stored_records() <= 57, "{} records kept", log.stored_records());
    assert!(log.recovered().checkpoint.is_some());
    let a = open(log, A, 2_000).unwrap();
    assert_eq!(state(&a), committed);
}

#[test]
fn another_servers_data_and_undecodable_records_are_refused_naming_the_file() {
    let mut a = open(MemLog::new(), A, 1).unwrap();
    put(&mut a, 1, 5);
    a.checkpoint().unwrap();
    let log = a.into_log();
    let err = open(log.clone(), B, 10).err().expect("B must not adopt A's data");
    assert!(matches!(err, StorageError::Mismatch { .. }), "{err}");
    assert!(err.to_string().contains("mem.log"), "{err}");

    let mut log = MemLog::new();
    log.append(b"\xff\xff\xff garbage");
    log.commit().unwrap();
    let err = open(log, A, 10).err().expect("garbage is not replayed");
    assert!(matches!(err, StorageError::Corrupted { .. }) && err.to_string().contains("mem.log"), "{err}");
}

#[test]
fn a_stalled_link_is_probed_and_the_receiver_asks_for_the_rest() {
    let (mut a, mut b) = two_hosts_after_puts(3);
    let _all_lost = a.take_outputs();
    a.tick(500_000_000);
    assert!(a.take_outputs().is_empty(), "not stalled yet");
    a.tick(2_000_000_000);
    let probe = a.take_outputs();
    assert!(matches!(probe.as_slice(), [Output::Seq { seq: 3, .. }]), "one probe, the newest: {probe:?}");
    deliver(probe, &mut b, 2_000_000_000, |_| false);
    b.commit().unwrap();
    b.tick(2_060_000_000);
    deliver(b.take_outputs(), &mut a, 2_000_000_001, |_| false);
    deliver(a.take_outputs(), &mut b, 2_000_000_002, |_| false);
    assert_eq!(server(&b).applied[&0], [1, 2, 3]);
    // Everything delivered and acknowledged: a repeated probe is a duplicate, which B acknowledges again.
    b.commit().unwrap();
    b.tick(2_200_000_000);
    deliver(b.take_outputs(), &mut a, 2_200_000_000, |_| false);
    a.tick(9_000_000_000);
    assert!(a.take_outputs().is_empty(), "nothing left unacknowledged");
}

fn get(host: &mut Host, key: &str, at: u64, wall: u64) {
    let msg = RegMsg::Get { key: key.into(), at };
    assert!(host.on_message(host_id(host), CLIENT, None, msg, wall));
}

fn got(outputs: &[Output<RegMsg>]) -> Vec<Option<String>> {
    outputs
        .iter()
        .filter_map(|o| match o {
            Output::ToClient { msg: RegMsg::GetOk { value }, .. } => Some(value.clone()),
            _ => None,
        })
        .collect()
}

#[test]
fn read_only_inputs_are_not_logged_and_answer_at_once_unless_they_read_what_is_not_durable() {
    let mut a = open(MemLog::new(), A, 1).unwrap();
    a.take_outputs();
    put(&mut a, 0, 10);
    a.commit().unwrap();
    a.take_outputs();
    // The first read logs a clock ceiling and waits for it; later ones below it leave at once, unlogged.
    get(&mut a, "k0", 0, 20);
    assert!(got(&a.take_outputs()).is_empty());
    a.commit().unwrap();
    assert_eq!(got(&a.take_outputs()), vec![Some("v0".to_string())]);
    let before = a.log().last_lsn();
    get(&mut a, "k0", 0, 30);
    assert_eq!(got(&a.take_outputs()), vec![Some("v0".to_string())], "answered before any commit");
    assert_eq!(a.log().last_lsn(), before, "a read-only input leaves no record");
    // A put not yet durable: a read of its key waits for the commit; a read of another key does not.
    put(&mut a, 1, 40);
    get(&mut a, "k1", 0, 50);
    get(&mut a, "k0", 0, 60);
    assert_eq!(got(&a.take_outputs()), vec![Some("v0".to_string())]);
    a.commit().unwrap();
    assert_eq!(got(&a.take_outputs()), vec![Some("v1".to_string())]);
    // The replay of the log gives the state the reads saw.
    let before = state(&a);
    let a = crash(a, A, 70);
    assert_eq!(state(&a), before);
}

#[test]
fn a_read_only_inputs_clock_promise_survives_a_crash_and_its_reply_waits_for_it() {
    let mut a = open(MemLog::new(), A, 1).unwrap();
    a.take_outputs();
    get(&mut a, "k0", 0, 10);
    a.commit().unwrap();
    a.take_outputs();
    // A snapshot far ahead of the clock: the reply waits for a ceiling above it to be durable.
    let ahead = 1_000_000_000;
    get(&mut a, "k0", ahead, 20);
    assert!(got(&a.take_outputs()).is_empty(), "the promise is not durable yet");
    a.commit().unwrap();
    assert_eq!(got(&a.take_outputs()), vec![None]);
    // After a crash (the read itself was never logged), later puts still come after the promise.
    let mut a = crash(a, A, 30);
    a.take_outputs();
    put(&mut a, 2, 40);
    a.commit().unwrap();
    let at = a
        .take_outputs()
        .into_iter()
        .find_map(|o| match o {
            Output::ToClient { msg: RegMsg::PutOk { at }, .. } => Some(at),
            _ => None,
        })
        .expect("the put is answered");
    assert!(at >= ahead, "a put after the restart is stamped {at}, before the promised {ahead}");
}

/// A handler that breaks the driver contract: the host drops exactly the offending effects, reports each
/// as a `ContractViolation` (as every runtime does, `core::host::audit`), and keeps serving.
#[test]
fn contract_violations_are_dropped_and_reported() {
    use snowline_core::ContractViolation;
    let mut host = open(MemLog::new(), A, 0).unwrap();
    host.take_outputs();
    host.on_message(A, CLIENT, None, RegMsg::Misbehave, 10);
    host.commit().unwrap();
    let violations = host.take_violations();
    assert_eq!(
        violations,
        vec![
            ContractViolation::ServerCompleted { server: Addr::Server(A), op: OpId(3) },
            ContractViolation::UnknownServer { from: Addr::Server(A), to: ServerId::new(9, 0), kind: "put-ok" },
        ]
    );
    let outputs = host.take_outputs();
    let to_client: Vec<_> = outputs
        .iter()
        .filter_map(|o| match o {
            Output::ToClient { to, msg, .. } => Some((*to, msg.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(to_client, vec![(CLIENT, RegMsg::PutOk { at: 1 })], "the lawful reply still leaves: {outputs:?}");
    assert!(!outputs.iter().any(|o| matches!(o, Output::Seq { to, .. } if *to == ServerId::new(9, 0))));
    host.on_message(A, CLIENT, None, RegMsg::Put { key: "k".into(), value: "v".into() }, 20);
    host.commit().unwrap();
    assert!(host.take_violations().is_empty());
    assert!(host.take_outputs().iter().any(|o| matches!(o, Output::ToClient { msg: RegMsg::PutOk { .. }, .. })));
}

#[test]
fn a_full_disk_refuses_writes_in_the_protocols_words_and_serves_reads() {
    let mut a = open(MemLog::new(), A, 1).unwrap();
    a.take_outputs();
    put(&mut a, 0, 10);
    a.commit().unwrap();
    a.take_outputs();
    a.log_mut().set_disk_full(true);
    // A write: the protocol's own refusal, sent to the client in the server's name at once; nothing logged.
    let before = a.log().last_lsn();
    put(&mut a, 1, 20);
    let out = a.take_outputs();
    assert!(
        matches!(out.as_slice(), [Output::ToClient { from, to, msg: RegMsg::Refused { why } }]
            if *from == A && *to == CLIENT && why.contains("full")),
        "{out:?}"
    );
    let reported = a.take_refusals();
    assert!(matches!(reported.as_slice(), [r] if r.answered), "reported for the metrics, already answered");
    assert_eq!((a.log().last_lsn(), server(&a).puts), (before, 1), "not taken");
    // Without the protocol's words, the host's generic refusal.
    let msg = RegMsg::Put { key: "generic".into(), value: "v".into() };
    assert!(a.on_message(A, CLIENT, None, msg, 30));
    assert!(a.take_outputs().is_empty());
    let reported = a.take_refusals();
    assert!(matches!(reported.as_slice(), [r] if !r.answered), "the runtime answers it");
    // Reads go on.
    get(&mut a, "k0", 0, 40);
    a.commit().unwrap();
    assert_eq!(got(&a.take_outputs()), vec![Some("v0".to_string())]);
}
