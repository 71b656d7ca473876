//! Fault schedules: a list of faults to inject into a run, written by hand or drawn per seed ("swarm"
//! testing: each seed enables a random subset of the fault kinds, so that some runs hammer one kind of fault
//! and others combine them).

use crate::sim::{Restart, Side, Sim, derive_seed};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use snowline_core::{DcId, PartitionId, Protocol, ServerId, Topology};
use std::collections::BTreeSet;
use std::fmt;

const STREAM_FAULTS: u64 = 5;

/// The kinds of fault a swarm schedule draws from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum FaultKind {
    /// A server, picked at random, crashes.
    Crash,
    /// The member of a replica group that leads at some moment crashes.
    LeaderCrash,
    /// The member of a replica group that leads at some moment crashes as it next sends a message to a server.
    LeaderKill,
    /// A server is cut off from every other node for a while.
    Isolate,
    /// Two sets of servers, or two sets of datacenters with their clients, cannot talk for a while.
    Partition,
    /// Messages are lost at random for a while.
    Loss,
}

impl FaultKind {
    pub const ALL: [FaultKind; 6] = [
        FaultKind::Crash,
        FaultKind::LeaderCrash,
        FaultKind::LeaderKill,
        FaultKind::Isolate,
        FaultKind::Partition,
        FaultKind::Loss,
    ];

    pub fn name(self) -> &'static str {
        match self {
            FaultKind::Crash => "crash",
            FaultKind::LeaderCrash => "leader-crash",
            FaultKind::LeaderKill => "leader-kill",
            FaultKind::Isolate => "isolate",
            FaultKind::Partition => "partition",
            FaultKind::Loss => "loss",
        }
    }
}

/// One fault, as [`FaultSchedule::apply`] hands it to the simulator's fault API.
#[derive(Clone, Debug, PartialEq)]
pub enum Fault {
    /// [`Sim::schedule_crash_with`].
    Crash { server: ServerId, at_ns: u64, restart: Restart },
    /// [`Sim::schedule_leader_crash`].
    LeaderCrash { partition: PartitionId, at_ns: u64, restart: Restart },
    /// [`Sim::schedule_leader_kill_on_send`].
    LeaderKill { partition: PartitionId, at_ns: u64, until_ns: u64, restart: Restart },
    /// [`Sim::isolate`].
    Isolate { server: ServerId, from_ns: u64, until_ns: u64 },
    /// [`Sim::partition`] (dropping messages).
    Partition { a: Side, b: Side, from_ns: u64, until_ns: u64 },
    /// [`Sim::lose`].
    Loss { probability: f64, from_ns: u64, until_ns: u64 },
}

/// What a swarm schedule may do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SwarmOptions {
    /// The run's length: faults start after a tenth of it and have all healed by 70 % of it, so the system
    /// has time to recover before the run ends.
    pub duration_ns: u64,
    /// Crashed servers come back from their disk after a while ([`Restart::WithDisk`]: durable servers); at most `max(1, (n-1)/2)` members of a group of `n` are down at once. Otherwise
    /// crashes are crash-stop: at most `(n-1)/2` members of each group ever crash, so a majority stays up.
    pub restart_with_disk: bool,
    /// Kinds enabled whatever the seed draws (e.g. to test every seed with leader crashes).
    pub required: Vec<FaultKind>,
}

/// Faults to inject into one run. [`FaultSchedule::swarm`] draws one from a seed; [`FaultSchedule::apply`]
/// installs it in a simulator before the run. Its `Display` is a one-line summary.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct FaultSchedule {
    /// The kinds the schedule was drawn from (empty for a hand-written schedule).
    pub kinds: Vec<FaultKind>,
    pub faults: Vec<Fault>,
}

impl FaultSchedule {
    /// No faults.
    pub fn none() -> Self {
        Self::default()
    }

    /// A schedule drawn from `seed` for `topology`, deterministically (the same arguments give the same
    /// schedule, independently of the simulator's other generators). Each kind of fault is enabled with
    /// probability ½ (at least one is), then 1–3 faults of each enabled kind are drawn; crashes respect the
    /// per-group budget of [`SwarmOptions::restart_with_disk`] (a crash that would exceed it is left out);
    /// partitions and isolations heal, and random loss stops, before 70 % of the run.
    pub fn swarm(seed: u64, topology: Topology, options: &SwarmOptions) -> Self {
        let mut rng = SmallRng::seed_from_u64(derive_seed(seed, STREAM_FAULTS, 0));
        let d = options.duration_ns.max(1_000);
        let mut kinds: Vec<FaultKind> =
            FaultKind::ALL.into_iter().filter(|k| rng.random_bool(0.5) || options.required.contains(k)).collect();
        if kinds.is_empty() {
            kinds.push(FaultKind::ALL[rng.random_range(0..FaultKind::ALL.len())]);
        }
        let window = |rng: &mut SmallRng| {
            let from = rng.random_range(d / 10..=d / 2);
            (from, from + rng.random_range(d / 20..=d / 5))
        };
        let servers: Vec<ServerId> = topology.servers().collect();
        let n = topology.replicas;
        let budget = if options.restart_with_disk { ((n - 1) / 2).max(1) } else { (n - 1) / 2 };
        // Per group: the intervals its crashed members are (or may be) down.
        let mut down: Vec<Vec<(u64, u64)>> = vec![Vec::new(); usize::from(topology.partitions)];
        let restart = |rng: &mut SmallRng| {
            if options.restart_with_disk {
                Restart::WithDisk { after_ns: rng.random_range(d / 20..=d / 5) }
            } else {
                Restart::Never
            }
        };
        let mut admit = |partition: PartitionId, from: u64, until: u64, restart: Restart| {
            let end = match restart {
                Restart::Never => u64::MAX,
                Restart::WithDisk { after_ns } | Restart::WithoutDisk { after_ns } => until.saturating_add(after_ns),
            };
            let group = &mut down[usize::from(partition)];
            let overlapping = group.iter().filter(|(a, b)| *a < end && from < *b).count();
            let ok = overlapping < usize::from(budget);
            if ok {
                group.push((from, end));
            }
            ok
        };
        let mut faults = Vec::new();
        for kind in &kinds {
            let count = if *kind == FaultKind::Loss { 1 } else { rng.random_range(1..=3) };
            for _ in 0..count {
                match kind {
                    FaultKind::Crash => {
                        let server = servers[rng.random_range(0..servers.len())];
                        let at_ns = window(&mut rng).0;
                        let restart = restart(&mut rng);
                        if admit(server.partition, at_ns, at_ns, restart) {
                            faults.push(Fault::Crash { server, at_ns, restart });
                        }
                    }
                    FaultKind::LeaderCrash => {
                        let partition = rng.random_range(0..topology.partitions);
                        let at_ns = window(&mut rng).0;
                        let restart = restart(&mut rng);
                        if admit(partition, at_ns, at_ns, restart) {
                            faults.push(Fault::LeaderCrash { partition, at_ns, restart });
                        }
                    }
                    FaultKind::LeaderKill => {
                        let partition = rng.random_range(0..topology.partitions);
                        let (at_ns, until_ns) = window(&mut rng);
                        let restart = restart(&mut rng);
                        if admit(partition, at_ns, until_ns, restart) {
                            faults.push(Fault::LeaderKill { partition, at_ns, until_ns, restart });
                        }
                    }
                    FaultKind::Isolate => {
                        let server = servers[rng.random_range(0..servers.len())];
                        let (from_ns, until_ns) = window(&mut rng);
                        faults.push(Fault::Isolate { server, from_ns, until_ns });
                    }
                    FaultKind::Partition => {
                        let (from_ns, until_ns) = window(&mut rng);
                        let by_dc = topology.dcs > 1 && rng.random_bool(0.5);
                        let (a, b) = if by_dc {
                            // A proper subset of the datacenters, clients included, against the rest.
                            let mut dcs: BTreeSet<DcId> = topology.dc_ids().filter(|_| rng.random_bool(0.5)).collect();
                            if dcs.is_empty() || dcs.len() == usize::from(topology.dcs) {
                                dcs = [rng.random_range(0..topology.dcs)].into();
                            }
                            (Side::Dcs(dcs), Side::Rest)
                        } else {
                            // Two sets of servers; clients stay connected to both.
                            let mut a: Vec<ServerId> =
                                servers.iter().copied().filter(|_| rng.random_bool(0.5)).collect();
                            if a.is_empty() || a.len() == servers.len() {
                                a = vec![servers[rng.random_range(0..servers.len())]];
                            }
                            let b = servers.iter().copied().filter(|s| !a.contains(s));
                            (Side::servers(a.iter().copied()), Side::servers(b))
                        };
                        if servers.len() > 1 || by_dc {
                            faults.push(Fault::Partition { a, b, from_ns, until_ns });
                        }
                    }
                    FaultKind::Loss => {
                        let probability = rng.random_range(0.01..0.2);
                        let (from_ns, until_ns) = window(&mut rng);
                        faults.push(Fault::Loss { probability, from_ns, until_ns });
                    }
                }
            }
        }
        Self { kinds, faults }
    }

    /// Install the faults in `sim` (before the run: the times are absolute virtual times).
    pub fn apply<P: Protocol>(&self, sim: &mut Sim<P>) {
        for f in &self.faults {
            match f {
                Fault::Crash { server, at_ns, restart } => sim.schedule_crash_with(*server, *at_ns, *restart),
                Fault::LeaderCrash { partition, at_ns, restart } => {
                    sim.schedule_leader_crash(*partition, *at_ns, *restart)
                }
                Fault::LeaderKill { partition, at_ns, until_ns, restart } => {
                    sim.schedule_leader_kill_on_send(*partition, *at_ns, *until_ns, *restart)
                }
                Fault::Isolate { server, from_ns, until_ns } => sim.isolate(*server, *from_ns, *until_ns),
                Fault::Partition { a, b, from_ns, until_ns } => {
                    sim.partition(a.clone(), b.clone(), *from_ns, *until_ns)
                }
                Fault::Loss { probability, from_ns, until_ns } => sim.lose(*probability, *from_ns, *until_ns),
            }
        }
    }
}

fn ms(ns: u64) -> String {
    format!("{}ms", ns / 1_000_000)
}

impl fmt::Display for Restart {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Restart::Never => f.write_str("stays down"),
            Restart::WithDisk { after_ns } => write!(f, "back from its disk {} later", ms(*after_ns)),
            Restart::WithoutDisk { after_ns } => write!(f, "back empty {} later", ms(*after_ns)),
        }
    }
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Fault::Crash { server, at_ns, restart } => write!(f, "crash {server} at {} ({restart})", ms(*at_ns)),
            Fault::LeaderCrash { partition, at_ns, restart } => {
                write!(f, "crash the leader of p{partition} at {} ({restart})", ms(*at_ns))
            }
            Fault::LeaderKill { partition, at_ns, until_ns, restart } => write!(
                f,
                "kill the leader of p{partition} as it next sends to a server in [{}, {}) ({restart})",
                ms(*at_ns),
                ms(*until_ns)
            ),
            Fault::Isolate { server, from_ns, until_ns } => {
                write!(f, "isolate {server} [{}, {})", ms(*from_ns), ms(*until_ns))
            }
            Fault::Partition { a, b, from_ns, until_ns } => {
                write!(f, "partition {a} | {b} [{}, {})", ms(*from_ns), ms(*until_ns))
            }
            Fault::Loss { probability, from_ns, until_ns } => {
                write!(f, "lose {:.1}% of messages [{}, {})", probability * 100.0, ms(*from_ns), ms(*until_ns))
            }
        }
    }
}

impl fmt::Display for FaultSchedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.faults.is_empty() && self.kinds.is_empty() {
            return f.write_str("none");
        }
        let kinds: Vec<&str> = self.kinds.iter().map(|k| k.name()).collect();
        write!(f, "{} fault(s) of kinds {{{}}}", self.faults.len(), kinds.join(", "))?;
        for (i, fault) in self.faults.iter().enumerate() {
            write!(f, "{} {fault}", if i == 0 { ":" } else { ";" })?;
        }
        Ok(())
    }
}
