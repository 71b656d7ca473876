//! Validation of a recorded history: pairs each completion with its invoke and refuses histories that are
//! malformed, as opposed to histories that are well formed but show an anomaly.
//!
//! Rules (each violation is an [`InputError`] naming the event):
//! - `index` strictly increases from one event to the next;
//! - `f` is `"txn"`;
//! - every write carries a value, and every written value is unique in the whole history (across keys,
//!   transactions and outcomes); an invoke's reads carry `null`;
//! - a process has at most one pending invoke; an `ok`, `fail` or `info` completes the pending invoke of its
//!   process and lists the same micro-operations (same kinds and keys, same written values);
//! - a process whose operation ended in `info` is never used again (the client continues under a new
//!   process id).
//!
//! An invoke never completed is treated as `info`: its writes may have taken effect.

use serde::Serialize;
use snowline_core::DcId;
use snowline_core::history::{EventType, HistoryEvent, HistoryOp, OpKind};
use snowline_core::request::{Key, Value, Version};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;

/// A transaction: its position in [`History::txns`] (invoke order).
pub type TxnId = usize;

/// How a transaction ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum TxnStatus {
    /// Committed; reads carry the values returned.
    Ok,
    /// Outcome unknown (`info`, or never completed): its writes may have taken effect; its reads are unknown.
    Info,
    /// Certainly no effect.
    Fail,
}

impl fmt::Display for TxnStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            TxnStatus::Ok => "ok",
            TxnStatus::Info => "info",
            TxnStatus::Fail => "fail",
        })
    }
}

/// One transaction: an invoke and its completion.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Txn {
    pub id: TxnId,
    pub process: u64,
    pub dc: DcId,
    pub status: TxnStatus,
    pub invoke_index: u64,
    /// `None` when the invoke was never completed (treated as `info`).
    pub complete_index: Option<u64>,
    pub invoke_time: u64,
    pub complete_time: Option<u64>,
    /// For `ok`: the completed micro-operations (reads carry the values returned). Otherwise: as invoked.
    pub ops: Vec<HistoryOp>,
    /// For `ok`: the commit version the protocol reported for all the transaction's writes (the event's
    /// `version` field), if any.
    pub version: Option<Version>,
}

impl Txn {
    /// `ok` or `info`: its writes may be visible.
    pub fn is_committed(&self) -> bool {
        self.status != TxnStatus::Fail
    }

    /// The name used in reports: `T` and the history index of the invoke.
    pub fn name(&self) -> String {
        format!("T{}", self.invoke_index)
    }
}

/// A validated history: transactions in invoke order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct History {
    pub txns: Vec<Txn>,
}

/// Why a history (or a commit order) was refused.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct InputError {
    /// 1-based position of the event in the input (the JSONL line number when the file has no blank lines);
    /// 0 for an error in a [`CommitOrder`].
    pub line: usize,
    /// The event's `index` field, when the error is about one event.
    pub index: Option<u64>,
    pub reason: String,
}

impl fmt::Display for InputError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.line, self.index) {
            (0, _) => write!(f, "commit order: {}", self.reason),
            (line, Some(index)) => write!(f, "event {line} (index {index}): {}", self.reason),
            (line, None) => write!(f, "event {line}: {}", self.reason),
        }
    }
}

impl std::error::Error for InputError {}

/// Check the history is well formed and pair invokes with completions.
pub fn validate(events: &[HistoryEvent]) -> Result<History, InputError> {
    let mut txns: Vec<Txn> = Vec::new();
    let mut pending: HashMap<u64, TxnId> = HashMap::new();
    let mut retired: HashSet<u64> = HashSet::new();
    let mut written: HashMap<Value, u64> = HashMap::new();
    let mut last_index: Option<u64> = None;
    for (pos, e) in events.iter().enumerate() {
        let err = |reason: String| InputError { line: pos + 1, index: Some(e.index), reason };
        if let Some(last) = last_index
            && e.index <= last
        {
            return Err(err(format!("index {} does not follow the previous index {last}", e.index)));
        }
        last_index = Some(e.index);
        if e.f != "txn" {
            return Err(err(format!("f is {:?}; only \"txn\" is supported", e.f)));
        }
        for (i, op) in e.value.iter().enumerate() {
            if op.0 == OpKind::Write && op.2.is_none() {
                return Err(err(format!("micro-op {i} writes key {:?} without a value", op.1)));
            }
        }
        let p = e.process;
        match e.kind {
            EventType::Invoke => {
                if retired.contains(&p) {
                    return Err(err(format!(
                        "process {p} invokes again after an info completion (the client must continue under a new process id)"
                    )));
                }
                if let Some(&t) = pending.get(&p) {
                    return Err(err(format!(
                        "process {p} has two concurrent invokes (the first at index {})",
                        txns[t].invoke_index
                    )));
                }
                for (i, op) in e.value.iter().enumerate() {
                    match op {
                        HistoryOp(OpKind::Read, k, Some(v)) => {
                            return Err(err(format!(
                                "micro-op {i}: invoke reads key {k:?} with value {v:?}, not null"
                            )));
                        }
                        HistoryOp(OpKind::Write, _, Some(v)) => {
                            if let Some(first) = written.insert(v.clone(), e.index) {
                                return Err(err(format!("value {v:?} is written twice (first at index {first})")));
                            }
                        }
                        _ => {}
                    }
                }
                let id = txns.len();
                pending.insert(p, id);
                txns.push(Txn {
                    id,
                    process: p,
                    dc: e.dc,
                    status: TxnStatus::Info,
                    invoke_index: e.index,
                    complete_index: None,
                    invoke_time: e.time,
                    complete_time: None,
                    ops: e.value.clone(),
                    version: None,
                });
            }
            kind => {
                let Some(id) = pending.remove(&p) else {
                    return Err(err(format!("{} without a pending invoke on process {p}", kind_name(kind))));
                };
                let t = &mut txns[id];
                if t.ops.len() != e.value.len() {
                    return Err(err(format!(
                        "completion lists {} micro-ops but its invoke (index {}) lists {}",
                        e.value.len(),
                        t.invoke_index,
                        t.ops.len()
                    )));
                }
                for (i, (a, b)) in t.ops.iter().zip(&e.value).enumerate() {
                    let same = a.0 == b.0 && a.1 == b.1 && (a.0 == OpKind::Read || a.2 == b.2);
                    if !same {
                        return Err(err(format!(
                            "micro-op {i} {} differs from its invoke's (index {}) {}",
                            fmt_op(b),
                            t.invoke_index,
                            fmt_op(a)
                        )));
                    }
                }
                t.complete_index = Some(e.index);
                t.complete_time = Some(e.time);
                t.status = match kind {
                    EventType::Ok => {
                        t.ops = e.value.clone();
                        t.version = e.version;
                        TxnStatus::Ok
                    }
                    EventType::Fail => TxnStatus::Fail,
                    _ => {
                        retired.insert(p);
                        TxnStatus::Info
                    }
                };
            }
        }
    }
    Ok(History { txns })
}

fn kind_name(k: EventType) -> &'static str {
    match k {
        EventType::Invoke => "invoke",
        EventType::Ok => "ok",
        EventType::Fail => "fail",
        EventType::Info => "info",
    }
}

pub(crate) fn fmt_op(op: &HistoryOp) -> String {
    let kind = if op.0 == OpKind::Read { "r" } else { "w" };
    format!("{kind} {}={}", op.1, fmt_value(op.2.as_ref()))
}

pub(crate) fn fmt_value(v: Option<&Value>) -> String {
    match v {
        Some(v) => v.to_string(),
        None => "<initial>".into(),
    }
}

/// A per-key order of versions that a protocol reports (for instance from its commit timestamps), oldest
/// first. It is not trusted: [`crate::check_with_order`] verifies that every listed value is the final write
/// of that key by a committed (`ok` or `info`) transaction, that every `ok` transaction's final write of a
/// listed key is listed, and that the order never contradicts happens-before (an `inconsistent-commit-order`
/// anomaly; the key then falls back to the inferred order). Once accepted, it replaces the inferred version
/// order among the writers it lists; an `info` writer it leaves out (one whose client never learned its
/// version) is placed by inference, as on a key without a reported order.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct CommitOrder {
    pub keys: BTreeMap<Key, Vec<Value>>,
}

impl History {
    /// The per-key commit order the protocol's versions imply, for histories whose metadata line says
    /// `version_order` (a single-copy protocol whose commit versions totally order each key's writes). For
    /// each key, the final writes of its `ok` writers sorted by their transaction's `version`. A key is left
    /// out (its order is then inferred) when an `ok` writer of it carries no version or when two of its `ok`
    /// writers carry the same version. `info` writes carry no version and are not listed: the checker infers
    /// their place among the listed ones. The order is verified when used ([`crate::check_with_order`]), not
    /// trusted.
    pub fn commit_order_from_versions(&self) -> CommitOrder {
        // Per key: (version, value) of ok writers; None once the key must be left out.
        let mut per_key: BTreeMap<Key, Option<Vec<(Version, Value)>>> = BTreeMap::new();
        for t in self.txns.iter().filter(|t| t.status == TxnStatus::Ok) {
            let mut last: BTreeMap<&Key, &Value> = BTreeMap::new();
            for op in t.ops.iter().filter(|o| o.0 == OpKind::Write) {
                last.insert(&op.1, op.2.as_ref().expect("validated: writes carry values"));
            }
            for (k, v) in last {
                let slot = per_key.entry(k.clone()).or_insert_with(|| Some(Vec::new()));
                match t.version {
                    Some(ver) => {
                        if let Some(list) = slot {
                            list.push((ver, v.clone()));
                        }
                    }
                    None => *slot = None,
                }
            }
        }
        let mut keys = BTreeMap::new();
        for (k, list) in per_key {
            let Some(mut list) = list else { continue };
            list.sort();
            if list.windows(2).any(|w| w[0].0 == w[1].0) {
                continue;
            }
            keys.insert(k, list.into_iter().map(|(_, v)| v).collect());
        }
        CommitOrder { keys }
    }
}
