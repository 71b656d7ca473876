//! The atomic multicast checker: the properties of genuine atomic multicast, verified on recorded logs.
//!
//! Input ([`McastHistory`]): every message multicast (its destination groups, and whether it must be
//! delivered: its origin stayed correct and the run was given time to finish), and for every member of
//! every group, whether it stayed correct, the messages it took a step on, and its deliveries in order.
//! A crashed member's log is its log up to the crash.
//!
//! Properties (Guerraoui and Schiper, "Genuine atomic multicast in asynchronous distributed systems",
//! TCS 2001; the uniform variants, which consensus-based implementations give):
//!
//! - **Integrity**: a member delivers a message at most once, only if it was multicast, and only if its
//!   group is a destination.
//! - **Validity**: a message that must be delivered is delivered by every correct member of every
//!   destination group.
//! - **Uniform agreement**: a message delivered by any member, even one that crashed later, is delivered
//!   by every correct member of every destination group.
//! - **Acyclic order**: the relation "some member delivered `m` before `m'`" has no cycle (uniform prefix
//!   order within a group and a global total order across groups both follow; a cycle is reported with
//!   the members whose logs form it).
//! - **Genuineness**: only members of a message's destination groups take steps for it.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;

/// A message multicast in the run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Multicast {
    pub id: String,
    pub dest: BTreeSet<u16>,
    /// Its origin stayed correct and the run lasted long enough: validity requires its delivery.
    pub must_deliver: bool,
}

/// One member's log.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MemberLog {
    /// How reports name the member (e.g. `dc0/p1/r2`).
    pub name: String,
    pub group: u16,
    /// It did not crash (or was restarted with its state and is up at the end).
    pub correct: bool,
    /// Messages it took a step on (received, or applied a command for), in any order, repeats allowed.
    pub steps: Vec<String>,
    /// Its deliveries, in order.
    pub deliveries: Vec<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct McastHistory {
    pub messages: Vec<Multicast>,
    pub members: Vec<MemberLog>,
}

/// One violated property, with the evidence.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Violation {
    Integrity(String),
    Validity(String),
    Agreement(String),
    /// A cycle of messages, each delivered before the next by the member named with it.
    Order(Vec<(String, String)>),
    Genuineness(String),
}

impl Violation {
    pub fn property(&self) -> &'static str {
        match self {
            Violation::Integrity(_) => "integrity",
            Violation::Validity(_) => "validity",
            Violation::Agreement(_) => "uniform agreement",
            Violation::Order(_) => "acyclic order",
            Violation::Genuineness(_) => "genuineness",
        }
    }
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Violation::Integrity(s) | Violation::Validity(s) | Violation::Agreement(s) | Violation::Genuineness(s) => {
                write!(f, "{}: {s}", self.property())
            }
            Violation::Order(cycle) => {
                write!(f, "acyclic order: ")?;
                for (i, (m, by)) in cycle.iter().enumerate() {
                    let next = &cycle[(i + 1) % cycle.len()].0;
                    if i > 0 {
                        write!(f, ", ")?;
                    }
                    write!(f, "{m} before {next} at {by}")?;
                }
                Ok(())
            }
        }
    }
}

/// Check every property; an empty list means the run satisfies them all. At most a few violations of
/// each kind are reported.
pub fn check(h: &McastHistory) -> Vec<Violation> {
    const MAX_EACH: usize = 5;
    let mut out = Vec::new();
    let messages: HashMap<&str, &Multicast> = h.messages.iter().map(|m| (m.id.as_str(), m)).collect();
    let push = |out: &mut Vec<Violation>, v: Violation| {
        if out.iter().filter(|w: &&Violation| w.property() == v.property()).count() < MAX_EACH {
            out.push(v);
        }
    };

    // Integrity and genuineness, per member.
    for m in &h.members {
        let mut seen = BTreeSet::new();
        for id in &m.deliveries {
            if !seen.insert(id.as_str()) {
                push(&mut out, Violation::Integrity(format!("{} delivered {id} twice", m.name)));
            }
            match messages.get(id.as_str()) {
                None => push(&mut out, Violation::Integrity(format!("{} delivered {id}, never multicast", m.name))),
                Some(msg) if !msg.dest.contains(&m.group) => push(
                    &mut out,
                    Violation::Integrity(format!(
                        "{} (group {}) delivered {id}, addressed to {:?}",
                        m.name, m.group, msg.dest
                    )),
                ),
                _ => {}
            }
        }
        for id in m.steps.iter().collect::<BTreeSet<_>>() {
            if let Some(msg) = messages.get(id.as_str())
                && !msg.dest.contains(&m.group)
            {
                push(
                    &mut out,
                    Violation::Genuineness(format!(
                        "{} (group {}) took a step for {id}, addressed to {:?}",
                        m.name, m.group, msg.dest
                    )),
                );
            }
        }
    }

    // Validity and uniform agreement.
    let delivered_by: BTreeMap<&str, Vec<&str>> = h.members.iter().fold(BTreeMap::new(), |mut acc, m| {
        for id in &m.deliveries {
            acc.entry(id.as_str()).or_default().push(m.name.as_str());
        }
        acc
    });
    let delivered_at: Vec<BTreeSet<&str>> =
        h.members.iter().map(|m| m.deliveries.iter().map(String::as_str).collect()).collect();
    for msg in &h.messages {
        let someone = delivered_by.get(msg.id.as_str());
        if !msg.must_deliver && someone.is_none() {
            continue;
        }
        for (i, m) in h.members.iter().enumerate() {
            if !m.correct || !msg.dest.contains(&m.group) || delivered_at[i].contains(msg.id.as_str()) {
                continue;
            }
            let v = match someone {
                Some(by) => Violation::Agreement(format!(
                    "{} delivered {} but correct member {} of group {} did not",
                    by[0], msg.id, m.name, m.group
                )),
                None => Violation::Validity(format!(
                    "{} must be delivered but correct member {} of group {} did not",
                    msg.id, m.name, m.group
                )),
            };
            push(&mut out, v);
        }
    }

    // Acyclic order: the union of every member's delivery order (its consecutive pairs generate it).
    if let Some(cycle) = find_cycle(h) {
        out.push(Violation::Order(cycle));
    }
    out
}

/// A cycle in the union of the members' delivery orders, as (message, member that ordered it before the
/// next) pairs.
fn find_cycle(h: &McastHistory) -> Option<Vec<(String, String)>> {
    let mut index: HashMap<&str, usize> = HashMap::new();
    let mut names: Vec<&str> = Vec::new();
    let mut edges: Vec<Vec<(usize, usize)>> = Vec::new(); // node -> (next node, member)
    for (mi, m) in h.members.iter().enumerate() {
        let mut prev: Option<usize> = None;
        for id in &m.deliveries {
            let n = *index.entry(id.as_str()).or_insert_with(|| {
                names.push(id.as_str());
                edges.push(Vec::new());
                names.len() - 1
            });
            if let Some(p) = prev
                && p != n
                && !edges[p].iter().any(|(x, _)| *x == n)
            {
                edges[p].push((n, mi));
            }
            prev = Some(n);
        }
    }
    // Iterative DFS with colours; on a back edge, walk the stack to report the cycle.
    let n = names.len();
    let mut colour = vec![0u8; n]; // 0 new, 1 on stack, 2 done
    for root in 0..n {
        if colour[root] != 0 {
            continue;
        }
        // Stack of (node, next edge index, member of the edge that led here).
        let mut stack: Vec<(usize, usize)> = vec![(root, 0)];
        let mut via: Vec<usize> = Vec::new(); // member of the edge from stack[i] to stack[i+1]
        colour[root] = 1;
        while let Some(&mut (node, ref mut next)) = stack.last_mut() {
            if let Some(&(to, member)) = edges[node].get(*next) {
                *next += 1;
                match colour[to] {
                    0 => {
                        colour[to] = 1;
                        via.push(member);
                        stack.push((to, 0));
                    }
                    1 => {
                        let start = stack.iter().position(|(x, _)| *x == to).expect("on the stack");
                        let mut cycle = Vec::new();
                        for i in start..stack.len() {
                            let by = if i + 1 < stack.len() { via[i] } else { member };
                            cycle.push((names[stack[i].0].to_string(), h.members[by].name.clone()));
                        }
                        return Some(cycle);
                    }
                    _ => {}
                }
            } else {
                colour[node] = 2;
                stack.pop();
                via.pop();
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(id: &str, dest: &[u16]) -> Multicast {
        Multicast { id: id.into(), dest: dest.iter().copied().collect(), must_deliver: true }
    }

    fn member(name: &str, group: u16, deliveries: &[&str]) -> MemberLog {
        let deliveries: Vec<String> = deliveries.iter().map(|s| s.to_string()).collect();
        MemberLog { name: name.into(), group, correct: true, steps: deliveries.clone(), deliveries }
    }

    #[test]
    fn a_correct_run_passes() {
        let h = McastHistory {
            messages: vec![msg("a", &[0, 1]), msg("b", &[1]), msg("c", &[0])],
            members: vec![
                member("g0r0", 0, &["c", "a"]),
                member("g0r1", 0, &["c", "a"]),
                member("g1r0", 1, &["a", "b"]),
                member("g1r1", 1, &["a", "b"]),
            ],
        };
        assert_eq!(check(&h), vec![]);
    }

    #[test]
    fn each_violation_is_named() {
        let mut crashed = member("g1r1", 1, &["c"]);
        crashed.correct = false;
        let mut nosy = member("g2r0", 2, &[]);
        nosy.steps.push("b".into());
        let h = McastHistory {
            messages: vec![msg("a", &[0, 1]), msg("b", &[0, 1]), msg("c", &[0, 1]), msg("lost", &[0])],
            members: vec![member("g0r0", 0, &["a", "b", "b"]), member("g1r0", 1, &["b", "a", "x"]), crashed, nosy],
        };
        let found: BTreeSet<&str> = check(&h).iter().map(Violation::property).collect();
        let want: BTreeSet<&str> =
            ["integrity", "validity", "uniform agreement", "acyclic order", "genuineness"].into_iter().collect();
        assert_eq!(found, want, "{:?}", check(&h));
    }

    #[test]
    fn a_cycle_across_three_groups_is_reported_with_its_members() {
        // Pairwise consistent, globally cyclic: a<b at group 0, b<c at group 1, c<a at group 2.
        let h = McastHistory {
            messages: vec![msg("a", &[0, 2]), msg("b", &[0, 1]), msg("c", &[1, 2])],
            members: vec![member("g0", 0, &["a", "b"]), member("g1", 1, &["b", "c"]), member("g2", 2, &["c", "a"])],
        };
        let v = check(&h);
        assert_eq!(v.len(), 1, "{v:?}");
        let Violation::Order(cycle) = &v[0] else { panic!("{v:?}") };
        assert_eq!(cycle.len(), 3);
        assert!(v[0].to_string().contains("at g1"), "{}", v[0]);
    }

    #[test]
    fn a_crashed_member_that_delivered_less_is_fine() {
        let mut crashed = member("g0r1", 0, &["a"]);
        crashed.correct = false;
        let h = McastHistory {
            messages: vec![msg("a", &[0]), msg("b", &[0])],
            members: vec![member("g0r0", 0, &["a", "b"]), crashed],
        };
        assert_eq!(check(&h), vec![]);
    }
}
