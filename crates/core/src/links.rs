//! Sequenced, acknowledged server-to-server links: exactly-once, FIFO delivery over a transport that may
//! lose what is in flight (a connection reset, a dropped frame). Sans-IO: the caller passes clock readings
//! in and carries the frames out.
//!
//! Each message from server `a` to server `b` gets the next number of the link `a → b` and stays in `a`'s
//! [`OutLink`] until `b` acknowledges it. `b`'s [`InLink`] delivers only the next number: a duplicate is
//! dropped, a message past a gap waits for the gap to fill, and a gap that lasts [`GAP_PATIENCE_NS`] is
//! answered with a resend request. A link whose messages see no acknowledgement for
//! [`RETRANSMIT_AFTER_NS`] is probed with its newest message, which makes the receiver acknowledge it (a
//! duplicate) or ask for what it lacks (a gap).
//!
//! Two users, one mechanism: the durable host (`snowline_storage::host`), whose links survive crashes
//! because the [`OutLink`]s are part of its logged state, and the in-memory servers of both runtimes, whose
//! links are kept by [`MemLinks`]. An in-memory process that restarts has lost its state, so its links
//! start again: every message carries its sender's *incarnation* (an epoch that grows across restarts) and
//! the oldest number the sender still holds, from which a receiver that has not heard of that incarnation
//! (a restarted sender or a restarted receiver) starts counting.

use crate::ServerId;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap, VecDeque};

/// A link whose unacknowledged messages have seen no acknowledgement for this long is probed (its newest
/// message is sent again, which makes the receiver acknowledge or ask for what it lacks).
pub const RETRANSMIT_AFTER_NS: u64 = 1_000_000_000;
/// Resend requests on one link are at most this frequent.
pub const RESEND_REQUEST_EVERY_NS: u64 = 100_000_000;
/// A gap in a link's numbers that lasts this long is taken for a loss (not reordering): ask for a resend.
pub const GAP_PATIENCE_NS: u64 = 50_000_000;
/// Messages kept per link while they wait for a gap to fill (more are dropped and resent later).
pub const REORDER_LIMIT: usize = 100_000;
/// In-memory links: unacknowledged messages kept per link. A peer that stays away this long (it died, and
/// with it what it held in memory) costs at most this much; the oldest are shed beyond it, and counted.
pub const MEM_LINK_LIMIT: usize = 200_000;

/// The sending end of one link.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct OutLink<M> {
    /// The last sequence number assigned.
    last_seq: u64,
    /// Sent (or to be sent) and not yet acknowledged, oldest first.
    unacked: VecDeque<(u64, M)>,
    /// The highest number released to the network (a durable host holds the rest until their input is
    /// committed; in memory every message is released as it is numbered).
    released: u64,
    /// Clock reading when the link last made progress (an ack, or a retransmission).
    #[serde(skip)]
    progress_ns: u64,
}

impl<M> Default for OutLink<M> {
    fn default() -> Self {
        Self { last_seq: 0, unacked: VecDeque::new(), released: 0, progress_ns: 0 }
    }
}

impl<M: Clone> OutLink<M> {
    /// Numbers `msg` and keeps it until it is acknowledged; returns its number.
    pub fn push(&mut self, msg: M, now_ns: u64) -> u64 {
        if self.unacked.is_empty() {
            self.progress_ns = now_ns;
        }
        self.last_seq += 1;
        self.unacked.push_back((self.last_seq, msg));
        self.last_seq
    }

    /// Messages up to `seq` may be (re)sent.
    pub fn release(&mut self, seq: u64) {
        self.released = self.released.max(seq);
    }

    /// Every message numbered so far may be (re)sent, and the link starts its patience again (after a
    /// recovery).
    pub fn release_all(&mut self, now_ns: u64) {
        self.released = self.last_seq;
        self.progress_ns = now_ns;
    }

    /// The oldest number still held (the next one to be assigned when nothing is).
    pub fn floor(&self) -> u64 {
        self.unacked.front().map_or(self.last_seq + 1, |(s, _)| *s)
    }

    /// Messages not yet acknowledged.
    pub fn backlog(&self) -> usize {
        self.unacked.len()
    }

    /// The unacknowledged messages, oldest first.
    pub fn unacked(&self) -> impl Iterator<Item = (u64, &M)> {
        self.unacked.iter().map(|(s, m)| (*s, m))
    }

    /// The receiver has delivered everything up to `seq`: forget it. Whether anything was forgotten.
    pub fn ack(&mut self, seq: u64, now_ns: u64) -> bool {
        let before = self.unacked.len();
        while self.unacked.front().is_some_and(|(s, _)| *s <= seq) {
            self.unacked.pop_front();
        }
        let progressed = self.unacked.len() != before;
        if progressed {
            self.progress_ns = now_ns;
        }
        progressed
    }

    /// Everything released and not acknowledged, oldest first, to send again (the receiver asked).
    pub fn resend(&mut self, now_ns: u64) -> impl Iterator<Item = (u64, &M)> {
        self.progress_ns = now_ns;
        let released = self.released;
        self.unacked.iter().take_while(move |(s, _)| *s <= released).map(|(s, m)| (*s, m))
    }

    /// The message to probe the link with, if it has waited [`RETRANSMIT_AFTER_NS`] for an acknowledgement:
    /// the newest released one only (the peer may be down, and its link queues). A gap makes the receiver
    /// ask for the rest, a duplicate makes it acknowledge.
    pub fn probe(&mut self, now_ns: u64) -> Option<(u64, &M)> {
        let stalled = now_ns.saturating_sub(self.progress_ns) >= RETRANSMIT_AFTER_NS;
        let waiting = self.unacked.front().is_some_and(|(s, _)| *s <= self.released);
        if !(stalled && waiting) {
            return None;
        }
        self.progress_ns = now_ns;
        let released = self.released;
        self.unacked.iter().rev().find(|(s, _)| *s <= released).map(|(s, m)| (*s, m))
    }

    /// Drops the oldest messages beyond `limit`; how many were dropped.
    pub fn shed(&mut self, limit: usize) -> usize {
        let over = self.unacked.len().saturating_sub(limit);
        self.unacked.drain(..over);
        over
    }
}

/// What became of a message that arrived on a link ([`InLink::arrive`]).
#[derive(Debug, PartialEq)]
pub enum Arrival<M> {
    /// The next one: deliver it (then [`InLink::next_waiting`] for those that waited for it).
    Deliver(M),
    /// Delivered before: dropped (the sender may have missed an acknowledgement: repeat it).
    Duplicate,
    /// Past a gap: kept until the gap fills. `ask_resend`: the gap has lasted; ask the sender for the rest.
    Held { ask_resend: bool },
}

/// The receiving end of one link: what waits for a gap to fill. The number delivered so far is the
/// caller's (a durable host keeps it in its logged state).
#[derive(Debug)]
pub struct InLink<M> {
    waiting: BTreeMap<u64, M>,
    gap_since: Option<u64>,
    resend_asked: Option<u64>,
}

impl<M> Default for InLink<M> {
    fn default() -> Self {
        Self { waiting: BTreeMap::new(), gap_since: None, resend_asked: None }
    }
}

impl<M> InLink<M> {
    /// Message `seq` arrived; `delivered` is the last number delivered on this link.
    pub fn arrive(&mut self, delivered: u64, seq: u64, msg: M, now_ns: u64) -> Arrival<M> {
        if seq <= delivered {
            return Arrival::Duplicate;
        }
        if seq == delivered + 1 {
            return Arrival::Deliver(msg);
        }
        // Overtaken (links that reorder) or after a loss (a dropped connection).
        if self.waiting.len() < REORDER_LIMIT {
            self.waiting.insert(seq, msg);
        }
        let since = *self.gap_since.get_or_insert(now_ns);
        Arrival::Held { ask_resend: now_ns.saturating_sub(since) >= GAP_PATIENCE_NS }
    }

    /// The message that waited for `delivered + 1`, if it is here.
    pub fn next_waiting(&mut self, delivered: u64) -> Option<M> {
        self.waiting.remove(&(delivered + 1))
    }

    /// After a run of deliveries: what is left waits for a new gap, from now.
    pub fn settle(&mut self, delivered: u64, now_ns: u64) {
        self.waiting = self.waiting.split_off(&(delivered + 1));
        self.gap_since = if self.waiting.is_empty() { None } else { Some(now_ns) };
    }

    /// Whether a gap has lasted [`GAP_PATIENCE_NS`].
    pub fn gap_lasted(&self, now_ns: u64) -> bool {
        self.gap_since.is_some_and(|since| now_ns.saturating_sub(since) >= GAP_PATIENCE_NS)
    }

    /// Whether a resend may be asked for now (at most every [`RESEND_REQUEST_EVERY_NS`]); if so, it counts
    /// as asked.
    pub fn may_ask_resend(&mut self, now_ns: u64) -> bool {
        if self.resend_asked.is_some_and(|t| now_ns.saturating_sub(t) < RESEND_REQUEST_EVERY_NS) {
            return false;
        }
        self.resend_asked = Some(now_ns);
        true
    }
}

/// What [`MemLinks`] asks its runtime to send.
#[derive(Clone, Debug, PartialEq)]
pub enum LinkFrame<M> {
    /// Message `seq` of the link `from → to`, whose sender is incarnation `epoch` and still holds
    /// everything from `floor` on.
    Seq { from: ServerId, to: ServerId, epoch: u64, floor: u64, seq: u64, msg: M },
    /// `from` has delivered the link `to → from` of `to`'s incarnation `epoch` up to `seq`; with `resend`
    /// it asks for everything after `seq` again.
    Ack { from: ServerId, to: ServerId, epoch: u64, seq: u64, resend: bool },
}

/// The receiving side of a link in memory: which incarnation of the sender it counts for.
#[derive(Debug)]
struct MemIn<M> {
    epoch: u64,
    delivered: u64,
    acked: u64,
    link: InLink<M>,
}

/// The links of one in-memory process's servers to and from servers of other processes.
#[derive(Debug)]
pub struct MemLinks<M> {
    /// This process's incarnation: larger after every restart (the runtime takes it from the wall clock).
    epoch: u64,
    out: HashMap<(ServerId, ServerId), OutLink<M>>,
    /// By (receiver, sender).
    inbound: HashMap<(ServerId, ServerId), MemIn<M>>,
    /// Unacknowledged messages shed because a peer stayed away ([`MEM_LINK_LIMIT`]).
    shed: u64,
    limit: usize,
}

impl<M: Clone> MemLinks<M> {
    pub fn new(epoch: u64) -> Self {
        Self { epoch, out: HashMap::new(), inbound: HashMap::new(), shed: 0, limit: MEM_LINK_LIMIT }
    }

    /// Keep at most `limit` unacknowledged messages per link (default [`MEM_LINK_LIMIT`]).
    pub fn set_limit(&mut self, limit: usize) {
        self.limit = limit.max(1);
    }

    /// Numbers `msg` on the link `from → to`; the frame to send.
    pub fn send(&mut self, from: ServerId, to: ServerId, msg: M, now_ns: u64) -> LinkFrame<M> {
        let link = self.out.entry((from, to)).or_default();
        let seq = link.push(msg.clone(), now_ns);
        link.release(seq);
        self.shed += link.shed(self.limit) as u64;
        LinkFrame::Seq { from, to, epoch: self.epoch, floor: link.floor(), seq, msg }
    }

    /// Message `seq` of the link `from → to` (incarnation `epoch` of the sender, which holds everything
    /// from `floor` on) arrived. Returns the messages to deliver, in order; frames to send go to `out`.
    #[allow(clippy::too_many_arguments)]
    pub fn receive(
        &mut self,
        from: ServerId,
        to: ServerId,
        epoch: u64,
        floor: u64,
        seq: u64,
        msg: M,
        now_ns: u64,
        out: &mut Vec<LinkFrame<M>>,
    ) -> Vec<M> {
        let fresh = || MemIn { epoch, delivered: floor.saturating_sub(1), acked: 0, link: InLink::default() };
        let state = self.inbound.entry((to, from)).or_insert_with(fresh);
        if epoch < state.epoch {
            // From an incarnation of the sender that has since restarted: nothing to deliver.
            return Vec::new();
        }
        if epoch > state.epoch {
            // The sender restarted: count its new incarnation from what it holds.
            *state = fresh();
        }
        match state.link.arrive(state.delivered, seq, msg, now_ns) {
            Arrival::Duplicate => {
                state.acked = 0; // repeat the acknowledgement at the next tick
                Vec::new()
            }
            Arrival::Held { ask_resend } => {
                if ask_resend && state.link.may_ask_resend(now_ns) {
                    out.push(LinkFrame::Ack { from: to, to: from, epoch, seq: state.delivered, resend: true });
                }
                Vec::new()
            }
            Arrival::Deliver(first) => {
                state.delivered = seq;
                let mut run = vec![first];
                while let Some(m) = state.link.next_waiting(state.delivered) {
                    state.delivered += 1;
                    run.push(m);
                }
                state.link.settle(state.delivered, now_ns);
                run
            }
        }
    }

    /// `from` acknowledged the link `to → from` up to `seq` (for this process's incarnation `epoch`).
    #[allow(clippy::too_many_arguments)]
    pub fn on_ack(
        &mut self,
        from: ServerId,
        to: ServerId,
        epoch: u64,
        seq: u64,
        resend: bool,
        now_ns: u64,
        out: &mut Vec<LinkFrame<M>>,
    ) {
        if epoch != self.epoch {
            return; // about an earlier incarnation of this process
        }
        let Some(link) = self.out.get_mut(&(to, from)) else { return };
        link.ack(seq, now_ns);
        if resend {
            let floor = link.floor();
            for (s, m) in link.resend(now_ns) {
                out.push(LinkFrame::Seq { from: to, to: from, epoch, floor, seq: s, msg: m.clone() });
            }
        }
    }

    /// Periodic work (every ~100 ms): acknowledge what was delivered since the last tick, ask for what a
    /// lasting gap lacks, and probe links that have seen no acknowledgement for a while.
    pub fn tick(&mut self, now_ns: u64, out: &mut Vec<LinkFrame<M>>) {
        for (&(me, sender), state) in &mut self.inbound {
            if state.link.gap_lasted(now_ns) && state.link.may_ask_resend(now_ns) {
                let (epoch, seq) = (state.epoch, state.delivered);
                out.push(LinkFrame::Ack { from: me, to: sender, epoch, seq, resend: true });
            } else if state.acked != state.delivered {
                state.acked = state.delivered;
                out.push(LinkFrame::Ack {
                    from: me,
                    to: sender,
                    epoch: state.epoch,
                    seq: state.delivered,
                    resend: false,
                });
            }
        }
        for (&(from, to), link) in &mut self.out {
            let floor = link.floor();
            if let Some((seq, msg)) = link.probe(now_ns) {
                out.push(LinkFrame::Seq { from, to, epoch: self.epoch, floor, seq, msg: msg.clone() });
            }
        }
    }

    /// Every outbound link with its unacknowledged messages: `(from, to, messages)`.
    pub fn backlogs(&self) -> impl Iterator<Item = (ServerId, ServerId, usize)> + '_ {
        self.out.iter().map(|(&(from, to), l)| (from, to, l.backlog()))
    }

    /// Messages not yet acknowledged, over every link.
    pub fn backlog(&self) -> usize {
        self.out.values().map(OutLink::backlog).sum()
    }

    /// Unacknowledged messages shed so far because a peer stayed away for [`MEM_LINK_LIMIT`] messages.
    pub fn shed(&self) -> u64 {
        self.shed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(p: u16) -> ServerId {
        ServerId::new(0, p)
    }

    /// Hands `frames` to the side they are for: `a` sends on `s(0) → s(1)`, `b` receives.
    fn carry(
        a: &mut MemLinks<u32>,
        b: &mut MemLinks<u32>,
        frames: Vec<LinkFrame<u32>>,
        now: u64,
    ) -> (Vec<u32>, Vec<LinkFrame<u32>>) {
        let (mut got, mut back) = (Vec::new(), Vec::new());
        for f in frames {
            match f {
                LinkFrame::Seq { from, to, epoch, floor, seq, msg } => {
                    got.extend(b.receive(from, to, epoch, floor, seq, msg, now, &mut back))
                }
                LinkFrame::Ack { from, to, epoch, seq, resend } => {
                    a.on_ack(from, to, epoch, seq, resend, now, &mut back)
                }
            }
        }
        (got, back)
    }

    /// Runs both sides' ticks for two seconds of 100 ms steps, carrying every frame; what `b` delivered.
    fn settle(a: &mut MemLinks<u32>, b: &mut MemLinks<u32>, mut now: u64) -> Vec<u32> {
        let mut got = Vec::new();
        let mut pending = Vec::new();
        for _ in 0..20 {
            now += 100_000_000;
            b.tick(now, &mut pending);
            a.tick(now, &mut pending);
            for _ in 0..4 {
                let (g, back) = carry(a, b, std::mem::take(&mut pending), now);
                got.extend(g);
                pending = back;
            }
        }
        got
    }

    #[test]
    fn messages_lost_in_flight_are_delivered_once_in_order() {
        let (mut a, mut b) = (MemLinks::new(1), MemLinks::new(1));
        let mut got = Vec::new();
        for i in 1..=10u32 {
            let f = a.send(s(0), s(1), i, 0);
            // 3..=5 are lost with a connection reset; 10 too (the probe finds it).
            if !(3..=5).contains(&i) && i != 10 {
                got.extend(carry(&mut a, &mut b, vec![f], 0).0);
            }
        }
        assert_eq!(got, vec![1, 2]);
        got.extend(settle(&mut a, &mut b, 0));
        assert_eq!(got, (1..=10).collect::<Vec<_>>());
        assert_eq!(a.backlog(), 0, "everything acknowledged");
    }

    #[test]
    fn a_restarted_sender_or_receiver_starts_counting_again() {
        let (mut a, mut b) = (MemLinks::new(1), MemLinks::new(1));
        let mut got = Vec::new();
        for i in 1..=3u32 {
            let f = a.send(s(0), s(1), i, 0);
            got.extend(carry(&mut a, &mut b, vec![f], 0).0);
        }
        // The sender restarts: its numbers start at 1 again, under a larger epoch.
        let mut a2 = MemLinks::new(2);
        let f = a2.send(s(0), s(1), 100, 0);
        got.extend(carry(&mut a2, &mut b, vec![f], 0).0);
        // A frame of the old incarnation that was still on its way is not delivered.
        let late = LinkFrame::Seq { from: s(0), to: s(1), epoch: 1, floor: 1, seq: 4, msg: 4 };
        got.extend(carry(&mut a2, &mut b, vec![late], 0).0);
        assert_eq!(got, vec![1, 2, 3, 100]);
        // The receiver restarts (before acknowledging 100): it counts from the oldest message the sender
        // still holds, so it gets 100 (which its earlier incarnation took to its grave) and 101.
        let mut b2 = MemLinks::new(5);
        let f = a2.send(s(0), s(1), 101, 0);
        let (mut got2, _) = carry(&mut a2, &mut b2, vec![f], 0);
        got2.extend(settle(&mut a2, &mut b2, 0));
        assert_eq!(got2, vec![100, 101]);
        assert_eq!(a2.backlog(), 0);
    }

    #[test]
    fn an_ack_for_another_incarnation_forgets_nothing() {
        let mut a = MemLinks::new(2);
        a.send(s(0), s(1), 7u32, 0);
        a.on_ack(s(1), s(0), 1, 10, false, 0, &mut Vec::new());
        assert_eq!(a.backlog(), 1);
        a.on_ack(s(1), s(0), 2, 1, false, 0, &mut Vec::new());
        assert_eq!(a.backlog(), 0);
    }

    #[test]
    fn a_peer_that_stays_away_costs_a_bounded_buffer() {
        let mut a = MemLinks::new(1);
        a.set_limit(5);
        for i in 0..12u32 {
            a.send(s(0), s(1), i, 0);
        }
        assert_eq!(a.backlog(), 5);
        assert_eq!(a.shed(), 7);
    }
}
