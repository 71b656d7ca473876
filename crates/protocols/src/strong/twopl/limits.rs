//! What bounds a transaction at a partition, so that no client can buy priority or hold locks for ever
//! (`ProtocolConfig::max_txn_lifetime_ms`, `ProtocolConfig::max_locks_per_txn`).
//!
//! - **Ages.** Wound-wait orders transactions by their [`Age`], which the client chooses: the clock reading
//!   when the transaction, or the first of its retries, began. A server refuses a request whose age is more
//!   than `max_txn_lifetime_ms` in the past (an age of 0 would outrank every honest transaction): it answers
//!   it with an abort (cause `Timeout`) naming the limit, releases what the transaction held here, and takes
//!   no lock for it. (An answer rather than invalid input: a correct client's request may arrive that late,
//!   and its session must learn to begin again.) An age more than `max_clock_ahead_ms` ahead of the
//!   server's clock, like every timestamp, and an age naming another client are invalid input.
//! - **Lifetime.** A transaction not yet prepared that has lived longer than `max_txn_lifetime_ms` is
//!   aborted here (cause `Timeout`) and its locks released by the sweep that aborts idle ones, however often
//!   its client reads: it was born at its age, or when this partition first saw it if that is earlier (an age
//!   ahead of the clock buys no time). A prepared transaction is never aborted unilaterally (two-phase
//!   commit); its coordinator decides it once every participant has voted, and participants vote within the
//!   lifetime or are swept.
//! - **Retries.** A session retrying an aborted transaction keeps its age (starvation freedom: it keeps
//!   getting older relative to newcomers) only while that age is younger than half the lifetime, and then
//!   takes a fresh one; its client node also gives up (cause `Timeout`) a transaction whose age is about to
//!   be refused, rather than sending a request no participant would answer. Starvation freedom thus holds
//!   within the lifetime: a transaction that cannot commit within it starts again as a newcomer.
//! - **Locks.** A transaction holds at most `max_locks_per_txn` locks at a partition: a read that would take
//!   more is refused (and the transaction released here), a prepare that would is voted no.

use super::{Age, ConcurrencyControl, Cx, Key, Mode, TwoPlServer, TxnId};
use snowline_core::{Abort, AbortCause, Check, InvalidInput, InvalidKind, ProtocolConfig};
use std::collections::{BTreeMap, BTreeSet};

/// The transaction lifetime in nanoseconds.
pub(super) fn lifetime_ns(config: &ProtocolConfig) -> u64 {
    config.max_txn_lifetime_ms.saturating_mul(1_000_000)
}

/// The age a session gives its next transaction at `now`: the aborted one's it retries while that is younger
/// than half the lifetime, else a fresh one.
pub(super) fn next_age_time(config: &ProtocolConfig, retry: Option<u64>, now: u64) -> u64 {
    match retry {
        Some(time) if now.saturating_sub(time) < lifetime_ns(config) / 2 => time,
        _ => now,
    }
}

/// Whether a client gives up its transaction of age `age` at `now` rather than send another request: past
/// the lifetime less the clock skew a participant may see (`max_clock_skew_us`), a participant would refuse
/// it.
pub(super) fn outlived(config: &ProtocolConfig, age: &Age, now: u64) -> Option<String> {
    let margin = config.max_clock_skew_us.saturating_mul(1_000);
    let limit = lifetime_ns(config).saturating_sub(margin);
    (now.saturating_sub(age.time) > limit).then(|| lifetime_detail(config))
}

fn lifetime_detail(config: &ProtocolConfig) -> String {
    format!("the transaction lived longer than max_txn_lifetime_ms = {} (since its age)", config.max_txn_lifetime_ms)
}

/// An age, like every timestamp, not too far ahead, and of the client that sent it (its lifetime is the
/// handler's: [`expired`]).
pub(super) fn check_age(check: &Check<'_>, age: &Age, txn: &TxnId) -> Result<(), InvalidInput> {
    check.time(age.time, "age")?;
    check.ensure(age.client == txn.client, InvalidKind::Sender, || {
        format!("age of client {} for a transaction of {}", age.client, txn.client)
    })
}

/// Why a request with `age` arriving at `now` is refused, if its age is older than the lifetime. Not invalid
/// input: a correct client's request may arrive that late; it is answered with an abort (cause `Timeout`)
/// naming the limit, after which its session begins again with a fresh age.
pub(super) fn expired(config: &ProtocolConfig, age: &Age, now: u64) -> Option<Abort> {
    let past = now.saturating_sub(age.time);
    (past > lifetime_ns(config)).then(|| Abort {
        cause: AbortCause::Timeout,
        detail: format!(
            "age {} is {} ms before this server's clock; the limit is {} (max_txn_lifetime_ms): begin the \
             transaction again with a fresh age",
            age.time,
            past / 1_000_000,
            config.max_txn_lifetime_ms
        ),
    })
}

impl<C: ConcurrencyControl> TwoPlServer<C> {
    /// When a transaction first seen here now with `age` was born: its age, or now if that is earlier.
    pub(super) fn born(age: &Age, now: u64) -> u64 {
        age.time.min(now)
    }

    /// Why `txn` may not take `wanted` on top of what it holds and waits for here, if it may not.
    pub(super) fn over_lock_bound(&self, txn: TxnId, wanted: &BTreeMap<Key, Mode>) -> Option<String> {
        let mut keys: BTreeSet<&Key> = self.txns.get(&txn).map(|t| t.locks.keys().collect()).unwrap_or_default();
        keys.extend(wanted.keys());
        let bound = self.config.max_locks_per_txn;
        (keys.len() > bound).then(|| {
            format!(
                "the transaction would hold {} locks at {}; the limit is {bound} (max_locks_per_txn)",
                keys.len(),
                self.id
            )
        })
    }

    /// Abort, with cause `Timeout`, every transaction not prepared that has outlived the lifetime here.
    pub(super) fn sweep_outlived(&mut self, cx: &mut Cx<'_, C>, dirty: &mut BTreeSet<Key>) {
        let now = cx.now_ns();
        let lifetime = lifetime_ns(&self.config);
        let outlived: Vec<TxnId> = self
            .txns
            .iter()
            .filter(|(_, t)| t.prepared.is_none() && now.saturating_sub(t.born_ns) > lifetime)
            .map(|(id, _)| *id)
            .collect();
        cx.charge(outlived.len() as u64);
        for txn in outlived {
            let abort = Abort { cause: AbortCause::Timeout, detail: lifetime_detail(&self.config) };
            self.abort_here(cx, txn, abort, true, dirty);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Participant, TwoPl, TwoPlClient, TwoPlMsg, TwoPlTimer};
    use super::*;
    use rand::SeedableRng;
    use rand::rngs::SmallRng;
    use snowline_core::{
        Addr, ClientId, ClientNode, Ctx, Effects, OpError, OpId, Protocol, Request, ServerId, ServerNode, Topology,
    };

    const NOW: u64 = 1_000_000_000_000;
    const SECOND: u64 = 1_000_000_000;

    fn topo() -> Topology {
        Topology::new(1, 2)
    }

    fn server(config: &ProtocolConfig) -> TwoPlServer {
        TwoPl::server(ServerId::new(0, 0), topo(), config)
    }

    fn deliver(
        node: &mut TwoPlServer,
        now: u64,
        client: u64,
        msg: TwoPlMsg,
    ) -> (Result<(), InvalidInput>, Effects<TwoPl>) {
        let mut rng = SmallRng::seed_from_u64(1);
        let mut out = Effects::default();
        let r = node.on_message(&mut Ctx::new(now, &mut rng, &mut out), Addr::Client(ClientId(client)), msg);
        (r, out)
    }

    fn sweep(node: &mut TwoPlServer, now: u64) -> Effects<TwoPl> {
        let mut rng = SmallRng::seed_from_u64(1);
        let mut out = Effects::default();
        node.on_timer(&mut Ctx::new(now, &mut rng, &mut out), TwoPlTimer::Sweep);
        out
    }

    fn key(name: &str) -> Key {
        topo().key_on(0, name).into()
    }

    fn txn(client: u64) -> TxnId {
        TxnId { client: ClientId(client), seq: 0 }
    }

    fn read(client: u64, age: u64, keys: &[&Key], exclusive: bool, held: bool) -> TwoPlMsg {
        let keys: Vec<Key> = keys.iter().map(|k| (*k).clone()).collect();
        let (keys, exclusive) = if exclusive { (vec![], keys) } else { (keys, vec![]) };
        TwoPlMsg::Read { txn: txn(client), age: Age { time: age, client: ClientId(client) }, keys, exclusive, held }
    }

    fn read_reply(out: &Effects<TwoPl>, client: u64) -> Option<&Result<Vec<snowline_core::ReadResult>, OpError>> {
        out.sends.iter().find_map(|(to, m)| match m {
            TwoPlMsg::ReadReply { result, .. } if *to == Addr::Client(ClientId(client)) => Some(result),
            _ => None,
        })
    }

    fn expired_abort(r: Option<&Result<Vec<snowline_core::ReadResult>, OpError>>) -> bool {
        matches!(r, Some(Err(OpError::Aborted(a)))
            if a.cause == AbortCause::Timeout && a.detail.contains("max_txn_lifetime_ms") && a.detail.contains("10000"))
    }

    #[test]
    fn an_age_older_than_the_lifetime_is_refused_naming_the_limit_and_wounds_no_one() {
        let config = ProtocolConfig::default();
        let mut p = server(&config);
        let x = key("x");
        // An honest transaction holds x.
        let (r, out) = deliver(&mut p, NOW, 2, read(2, NOW - SECOND, &[&x], true, false));
        assert!(r.is_ok() && matches!(read_reply(&out, 2), Some(Ok(_))));
        for age in [0, NOW - lifetime_ns(&config) - 1] {
            let (r, out) = deliver(&mut p, NOW, 1, read(1, age, &[&x], true, false));
            assert!(r.is_ok() && expired_abort(read_reply(&out, 1)), "{:?}", out.sends);
            assert_eq!(p.holders(&x), vec![(txn(2), Mode::Exclusive)], "not wounded");
            assert!(p.waiters(&x).is_empty() && p.abort_cause(txn(2)).is_none());
            let write = vec![(x.clone(), "v".into())];
            let commit = TwoPlMsg::Commit {
                txn: txn(1),
                age: Age { time: age, client: ClientId(1) },
                participants: vec![Participant { partition: 0, writes: write, held: false, reads: vec![] }],
            };
            let (r, out) = deliver(&mut p, NOW, 1, commit);
            assert!(r.is_ok());
            assert!(
                matches!(out.sends.as_slice(), [(_, TwoPlMsg::Outcome { result: Err(OpError::Aborted(a)), .. })]
                    if a.detail.contains("max_txn_lifetime_ms")),
                "{:?}",
                out.sends
            );
            assert_eq!(p.coordinating(), 0);
        }
        // An age naming another client is invalid input; an age within the lifetime is taken.
        let forged = TwoPlMsg::Read {
            txn: txn(1),
            age: Age { time: NOW, client: ClientId(2) },
            keys: vec![x.clone()],
            exclusive: vec![],
            held: false,
        };
        assert_eq!(deliver(&mut p, NOW, 1, forged).0.unwrap_err().kind, InvalidKind::Sender);
        let y = key("y");
        let (r, out) = deliver(&mut p, NOW, 3, read(3, NOW - lifetime_ns(&config) / 2, &[&y], true, false));
        assert!(r.is_ok() && matches!(read_reply(&out, 3), Some(Ok(_))));
    }

    #[test]
    fn a_transaction_kept_alive_by_reads_is_aborted_after_its_lifetime_and_its_locks_go_to_a_waiter() {
        let config = ProtocolConfig::default();
        let mut p = server(&config);
        let (x, y) = (key("x"), key("y"));
        // Client 1 locks x, then keeps its transaction busy with a one-key read every 3 s.
        let (r, out) = deliver(&mut p, NOW, 1, read(1, NOW, &[&x], true, false));
        assert!(r.is_ok() && matches!(read_reply(&out, 1), Some(Ok(_))));
        for i in 1..=3 {
            let now = NOW + 3 * i * SECOND;
            let (r, out) = deliver(&mut p, now, 1, read(1, NOW, &[&y], false, true));
            assert!(r.is_ok() && matches!(read_reply(&out, 1), Some(Ok(_))), "keep-alive {i}");
            assert!(sweep(&mut p, now + 1).sends.is_empty(), "within its lifetime and never idle");
        }
        // Client 2 (younger) waits for x.
        let (r, out) =
            deliver(&mut p, NOW + 9 * SECOND + 500_000_000, 2, read(2, NOW + 9 * SECOND, &[&x], false, false));
        assert!(r.is_ok() && read_reply(&out, 2).is_none(), "waits behind the older holder");
        // Past the lifetime the sweep aborts client 1 and grants x to client 2.
        let out = sweep(&mut p, NOW + lifetime_ns(&config) + SECOND);
        assert!(matches!(read_reply(&out, 2), Some(Ok(_))), "{:?}", out.sends);
        assert_eq!(p.holders(&x), vec![(txn(2), Mode::Shared)]);
        assert!(p.holders(&y).is_empty());
        let cause = p.abort_cause(txn(1));
        assert_eq!(cause, Some(AbortCause::Timeout));
        // Its next keep-alive carries an age past the lifetime: refused, and it takes no lock.
        let (r, out) = deliver(&mut p, NOW + 12 * SECOND, 1, read(1, NOW, &[&y], false, true));
        assert!(r.is_ok() && expired_abort(read_reply(&out, 1)), "{:?}", out.sends);
        assert!(p.holders(&y).is_empty());
    }

    #[test]
    fn a_transaction_over_the_lock_bound_is_refused_and_released() {
        let config = ProtocolConfig { max_locks_per_txn: 3, ..ProtocolConfig::default() };
        let mut p = server(&config);
        let keys: Vec<Key> = (0..5).map(|i| key(&format!("k{i}"))).collect();
        let (r, out) = deliver(&mut p, NOW, 1, read(1, NOW, &[&keys[0], &keys[1]], false, false));
        assert!(r.is_ok() && matches!(read_reply(&out, 1), Some(Ok(_))));
        // Re-reading a held key takes no new lock; two new keys would make four.
        let (r, out) = deliver(&mut p, NOW, 1, read(1, NOW, &[&keys[0], &keys[2], &keys[3]], false, true));
        assert!(r.is_ok());
        match read_reply(&out, 1) {
            Some(Err(OpError::Rejected(why))) => {
                assert!(why.contains("4 locks") && why.contains("max_locks_per_txn") && why.contains('3'), "{why}")
            }
            other => panic!("{other:?}"),
        }
        assert!(keys.iter().all(|k| p.holders(k).is_empty()), "released here");
        assert_eq!(p.transactions(), 0);
        // One request over the bound from a fresh transaction is refused the same way.
        let all: Vec<&Key> = keys.iter().collect();
        let (_, out) = deliver(&mut p, NOW, 2, read(2, NOW, &all, true, false));
        assert!(matches!(read_reply(&out, 2), Some(Err(OpError::Rejected(_)))));
        assert_eq!(p.transactions(), 0);
    }

    fn request(cl: &mut TwoPlClient, now: u64, op: u64, req: Request) -> Effects<TwoPl> {
        let mut rng = SmallRng::seed_from_u64(1);
        let mut out = Effects::default();
        cl.on_request(&mut Ctx::new(now, &mut rng, &mut out), OpId(op), req);
        out
    }

    #[test]
    fn a_retry_keeps_its_age_within_half_the_lifetime_and_then_takes_a_fresh_one() {
        let config = ProtocolConfig::default();
        let mut cl = TwoPl::client(ClientId(1), 0, topo(), &config);
        let x = key("x");
        let lifetime = lifetime_ns(&config);
        request(&mut cl, NOW, 0, Request::Begin);
        // The transaction outlives its lifetime at the client: its next read is given up, not sent (a
        // participant would refuse it), and its locks are released.
        let out = request(&mut cl, NOW + lifetime, 1, Request::Read { keys: vec![x.clone()] });
        match out.completions.as_slice() {
            [(_, Err(OpError::Aborted(a)))] => {
                assert!(a.cause == AbortCause::Timeout && a.detail.contains("max_txn_lifetime_ms"), "{a:?}")
            }
            other => panic!("{other:?}"),
        }
        assert!(out.sends.iter().all(|(_, m)| !matches!(m, TwoPlMsg::Read { .. })));
        // The retry (after a timeout abort) would reuse the age, but it is too old now: a fresh one.
        request(&mut cl, NOW + lifetime + 1, 2, Request::Begin);
        assert_eq!(cl.open_transaction().map(|(_, a)| a.time), Some(NOW + lifetime + 1));
        // Within half the lifetime a retry keeps its age.
        let retry = next_age_time(&config, Some(NOW), NOW + lifetime / 2 - 1);
        assert_eq!(retry, NOW);
        assert_eq!(next_age_time(&config, Some(NOW), NOW + lifetime / 2), NOW + lifetime / 2);
    }
}
