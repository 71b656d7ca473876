//! A deterministic discrete-event simulator that drives any [`snowline_core::Protocol`] in virtual time.
//!
//! It implements the driver contract of `snowline_core::protocol` with every source of nondeterminism
//! replaced by a model drawn from one seed.
//!
//! # Time
//!
//! One virtual clock, in nanoseconds from 0. Events (message deliveries, timer firings, requests, handler
//! runs, completions) wait in a priority queue ordered by `(time, seq)`, where `seq` is a global counter
//! assigned when the event is scheduled, so simultaneous events run in the order they were scheduled.
//!
//! # CPU
//!
//! Each node handles one input at a time, in arrival order, from its own inbox. An input arriving at `t`
//! starts at `max(t, busy_until)`; the handler runs there and sees its node's physical clock at that instant;
//! it costs `base_ns + work · per_work_unit_ns` ([`CpuModel`], `work` from [`snowline_core::Ctx::charge`]),
//! plus, for each message it sends, `per_message_ns + bytes · per_kib_ns / 1024`: serializing the message
//! and handing it to the network, `bytes` being its postcard encoding (the networked runtime's wire format),
//! counted by a pass over the message that does not encode it (`postcard::experimental::serialized_size`;
//! skipped when `per_kib_ns` is 0). The defaults (4 µs per input, 1 µs per message, 0.5 ns per byte) charge about 5 µs
//! for an input answered by one small message, so a server that fans out, or sends large values, saturates
//! earlier than one that answers once. Its effects (sends, timers, completions) take effect when that time is
//! up, and the node is busy until then. A durable server's host releases its messages after the handler
//! (on its log commit): their per-message charge extends the server's busy time from then. Client nodes are free (cost 0): they stand for many application machines, and the contention we
//! study is at servers. A timer set with delay `d` fires at `effect time + d` of virtual time; clock drift is
//! ignored for timer delays (drift is at most a few ppm, far below the jitter of the timers' consumers).
//!
//! # Clocks
//!
//! Node `n` reads `CLOCK_BASE_NS + t·(1 + drift_n) + offset_n` at virtual time `t`, with `offset_n` uniform
//! in `±max_skew_ns` and `drift_n` uniform in `±max_drift_ppm` ([`ClockModel`]), clamped to never decrease.
//! The large base keeps readings positive under any skew.
//!
//! # Network
//!
//! A message leaves its sender when the sending handler's CPU time is up. Its delay is the base latency
//! (intra-DC, inter-DC matrix, or client latency for a client and a node of its own datacenter) times a
//! jitter factor uniform in `[1, 1 + jitter]`, plus an occasional spike ([`NetworkModel`]). If the protocol
//! declares FIFO links ([`snowline_core::LinkAssumptions`]) or `reorder` is off, each directed link delivers
//! in send order (a message never arrives before an earlier one on its link). Messages to clients that do not
//! exist are dropped; no other message is lost unless a scenario says so.
//!
//! # Faults and scenarios
//!
//! [`Sim::partition_dcs`] delays every message between two datacenters sent or due during a window until the
//! window ends (TCP riding out an outage: nothing lost, FIFO kept). The scenario API reproduces the papers'
//! adversarial interleavings: [`Sim::hold`] keeps matching messages aside when they would be delivered,
//! [`Sim::release`] delivers them later in hold order, [`Sim::drop_held`] and [`Sim::drop_matching`] lose
//! messages (beyond the protocol's link assumptions: use only when a test asks for it). [`Sim::step`]
//! advances one event at a time.
//!
//! Faults (`docs/SIMULATOR.md`):
//!
//! * **Crashes.** [`Sim::crash`] kills any server (its inbox, pending timers and messages reaching it while
//!   down are lost). It may stay down (crash-stop), come back **with its disk** ([`Sim::restart`]: durable
//!   servers recover from their logs, [`snowline_core::Protocol::DURABILITY`]) or **without** it
//!   ([`Sim::restart_without_disk`]: a fresh state machine; only for protocols whose servers can rejoin
//!   empty — never a Raft member). [`Sim::schedule_crash_with`] plans one; [`Sim::schedule_leader_crash`] and
//!   [`Sim::schedule_leader_kill_on_send`] aim at whichever member leads then
//!   ([`snowline_core::ServerNode::leads`]).
//! * **Crash hooks** kill a server at a chosen protocol step, once: [`Sim::crash_on_send`] (the sender, as the
//!   first matching message leaves: it is lost), [`Sim::crash_after_send`] (right after it left) and
//!   [`Sim::crash_on_deliver`] (the receiver, as it arrives).
//! * **Partitions that drop.** [`Sim::partition`] between two [`Side`]s (servers, clients, datacenters with
//!   their clients, or the rest), [`Sim::isolate`] one server, [`Sim::lose`] random messages, each over a
//!   window that heals; lost messages count in [`Sim::messages_dropped`]. Only what the protocol can lose is
//!   lost: server-to-server messages of a protocol that does not tolerate loss
//!   ([`snowline_core::Protocol::TOLERATES_LOSS`]) are delayed instead, unless the servers are durable (their
//!   sequenced links resend). Client messages may always be lost (give clients an operation timeout).
//! * **Swarm schedules.** [`FaultSchedule::swarm`] draws a random subset of fault kinds and their faults
//!   from the seed and the topology, keeping crashes to a minority of each replica group; [`FaultSchedule::apply`]
//!   installs them (`snowline sim --faults swarm`).
//!
//! # Determinism
//!
//! Every random choice derives from [`SimConfig::seed`]: each node's generator and clock from
//! `(seed, node address)`, independently of creation order, and the network's generator from the seed; no
//! hash-map iteration reaches an output. The same config and the same sequence of API calls produce the same
//! events, completions, times and traces, on every platform.

mod faults;
mod model;
mod sim;

pub use faults::{Fault, FaultKind, FaultSchedule, SwarmOptions};
pub use model::{CLOCK_BASE_NS, ClockModel, CpuModel, CrashPlan, DEFAULT_INTER_DC_LATENCY_NS, NetworkModel, SimConfig};
pub use sim::{Completion, Envelope, HoldId, Restart, Side, Sim};
