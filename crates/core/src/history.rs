//! Client-observed histories, Elle-style, one JSON object per line (format: `docs/HISTORY.md`).

use crate::ids::DcId;
use crate::request::{AbortCause, Key, OpError, Reply, Request, Value, Version};
use serde::{Deserialize, Serialize};
use std::io::{BufRead, Write};

/// `r` or `w`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum OpKind {
    #[serde(rename = "r")]
    Read,
    #[serde(rename = "w")]
    Write,
}

/// One micro-operation: `["r", key, value-or-null]` or `["w", key, value]`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HistoryOp(pub OpKind, pub Key, pub Option<Value>);

/// `invoke`, then one of `ok`, `fail` (certainly no effect) or `info` (outcome unknown).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EventType {
    Invoke,
    Ok,
    Fail,
    Info,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HistoryEvent {
    pub index: u64,
    pub process: u64,
    pub dc: DcId,
    #[serde(rename = "type")]
    pub kind: EventType,
    /// Always `"txn"`: every operation is a transaction of micro-operations.
    pub f: String,
    pub value: Vec<HistoryOp>,
    /// Nanoseconds on one clock (virtual time in the simulator, the recording process's monotonic clock
    /// in the networked runtime).
    pub time: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// On a `fail` that was a transaction abort: the cause (`conflict`, `deadlock`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cause: Option<AbortCause>,
    /// On an `ok` that wrote: the version the protocol committed the writes with. Where the history's
    /// metadata says `version_order`, these versions order each key's writes (checked, not trusted).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<Version>,
}

/// The optional first line of a history file, `{"meta": {...}}`: what recorded it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HistoryMeta {
    /// The protocol's canonical name (`snowline check --level claimed` uses its claim).
    pub protocol: String,
    /// `sim` or `real`.
    pub runtime: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
    /// Whether the protocol's commit versions totally order the writes of each key (a single-copy
    /// protocol such as 2PL): the checker then takes the version order from them instead of inferring it.
    #[serde(default)]
    pub version_order: bool,
}

#[derive(Serialize, Deserialize)]
struct MetaLine {
    meta: HistoryMeta,
}

/// The micro-operations of a request as invoked: reads carry `null`.
pub fn invoked_ops(req: &Request) -> Vec<HistoryOp> {
    if req.is_read_only() {
        return req.reads().into_iter().map(|k| HistoryOp(OpKind::Read, k, None)).collect();
    }
    req.writes().into_iter().map(|(k, v)| HistoryOp(OpKind::Write, k, Some(v))).collect()
}

/// The micro-operations of a completed request: reads carry the values returned.
pub fn completed_ops(req: &Request, reply: &Reply) -> Vec<HistoryOp> {
    if req.is_read_only() {
        return reply.reads.iter().map(|r| HistoryOp(OpKind::Read, r.key.clone(), r.value.clone())).collect();
    }
    if let Request::Call { .. } = req {
        // A stored procedure: its reads, then its writes (values it computed).
        let reads = reply.reads.iter().map(|r| HistoryOp(OpKind::Read, r.key.clone(), r.value.clone()));
        let writes = reply.writes.iter().map(|(k, v)| HistoryOp(OpKind::Write, k.clone(), Some(v.clone())));
        return reads.chain(writes).collect();
    }
    invoked_ops(req)
}

/// Records a history in memory, assigning indices and Jepsen-style process ids: after an operation ends in
/// `info`, its client continues under a fresh process id.
#[derive(Debug, Default)]
pub struct HistoryRecorder {
    pub events: Vec<HistoryEvent>,
    next_process: u64,
}

impl HistoryRecorder {
    pub fn new() -> Self {
        Self::default()
    }

    /// A recorder whose process ids start at `first_process`: recorders of one run that record in parallel
    /// (client threads) and are merged with [`HistoryRecorder::absorb`] keep their processes apart.
    pub fn starting_at(first_process: u64) -> Self {
        Self { events: Vec::new(), next_process: first_process }
    }

    /// Take in what `other` recorded over the same run (the same clock): the events of both in time order
    /// (each recorder's own order kept among equal times), renumbered.
    pub fn absorb(&mut self, other: HistoryRecorder) {
        self.events.extend(other.events);
        self.events.sort_by_key(|e| e.time);
        for (i, e) in self.events.iter_mut().enumerate() {
            e.index = i as u64;
        }
        self.next_process = self.next_process.max(other.next_process);
    }

    /// A fresh process id for a new client (or a client whose last operation ended in `info`).
    pub fn new_process(&mut self) -> u64 {
        self.next_process += 1;
        self.next_process - 1
    }

    pub fn invoke(&mut self, process: u64, dc: DcId, req: &Request, time: u64) {
        self.push(process, dc, EventType::Invoke, invoked_ops(req), time, None);
    }

    /// Record the completion; returns the process id the client must use from now on.
    pub fn complete(
        &mut self,
        process: u64,
        dc: DcId,
        req: &Request,
        result: &Result<Reply, OpError>,
        time: u64,
    ) -> u64 {
        let ops = match result {
            Ok(reply) => completed_ops(req, reply),
            Err(_) => invoked_ops(req),
        };
        self.finish(process, dc, ops, req.is_read_only(), result, time)
    }

    /// Open a transaction whose micro-operations are known only when it ends (an interactive transaction,
    /// a stored procedure): records its `invoke` now, in its place in the history, and returns the slot
    /// [`HistoryRecorder::complete_txn`] fills in.
    pub fn invoke_txn(&mut self, process: u64, dc: DcId, time: u64) -> usize {
        self.push(process, dc, EventType::Invoke, Vec::new(), time, None);
        self.events.len() - 1
    }

    /// End the transaction opened at `slot` with its micro-operations in program order (reads carrying the
    /// values they returned) and its outcome; returns the process id the client must use from now on. The
    /// `invoke` gets the same operations with reads as `null`. An aborted or rejected transaction is a `fail`;
    /// a read-only one whose outcome is unknown too (it had no effect); any other unknown outcome an `info`.
    pub fn complete_txn(
        &mut self,
        slot: usize,
        ops: Vec<HistoryOp>,
        result: &Result<Option<Version>, OpError>,
        time: u64,
    ) -> u64 {
        let invoked: Vec<HistoryOp> = ops
            .iter()
            .map(|o| match o.0 {
                OpKind::Read => HistoryOp(OpKind::Read, o.1.clone(), None),
                OpKind::Write => o.clone(),
            })
            .collect();
        let (process, dc) = (self.events[slot].process, self.events[slot].dc);
        self.events[slot].value = invoked.clone();
        let read_only = ops.iter().all(|o| o.0 == OpKind::Read);
        let result = result.as_ref().map(|version| Reply { commit: *version, ..Default::default() });
        let ops = if result.is_ok() { ops } else { invoked };
        self.finish(process, dc, ops, read_only, &result.map_err(Clone::clone), time)
    }

    fn finish(
        &mut self,
        process: u64,
        dc: DcId,
        ops: Vec<HistoryOp>,
        read_only: bool,
        result: &Result<Reply, OpError>,
        time: u64,
    ) -> u64 {
        match result {
            Ok(reply) => {
                self.push(process, dc, EventType::Ok, ops, time, None);
                let writes = self.events.last().is_some_and(|e| e.value.iter().any(|o| o.0 == OpKind::Write));
                self.events.last_mut().expect("just pushed").version = reply.commit.filter(|_| writes);
                process
            }
            // A read-only transaction has no effect whatever happened to it, so its unknown outcome is a `fail`.
            Err(e) if e.is_definite() || read_only => {
                self.push(process, dc, EventType::Fail, ops, time, Some(e.to_string()));
                self.events.last_mut().expect("just pushed").cause = e.abort_cause();
                process
            }
            Err(e) => {
                self.push(process, dc, EventType::Info, ops, time, Some(e.to_string()));
                self.new_process()
            }
        }
    }

    fn push(
        &mut self,
        process: u64,
        dc: DcId,
        kind: EventType,
        value: Vec<HistoryOp>,
        time: u64,
        error: Option<String>,
    ) {
        let index = self.events.len() as u64;
        self.events.push(HistoryEvent {
            index,
            process,
            dc,
            kind,
            f: "txn".into(),
            value,
            time,
            error,
            cause: None,
            version: None,
        });
    }
}

/// Writes events as JSON Lines.
pub struct HistoryWriter;

impl HistoryWriter {
    pub fn write_jsonl(events: &[HistoryEvent], out: impl Write) -> std::io::Result<()> {
        Self::write_with_meta(None, events, out)
    }

    /// Write the metadata line (if any), then the events.
    pub fn write_with_meta(
        meta: Option<&HistoryMeta>,
        events: &[HistoryEvent],
        mut out: impl Write,
    ) -> std::io::Result<()> {
        if let Some(meta) = meta {
            serde_json::to_writer(&mut out, &MetaLine { meta: meta.clone() })?;
            out.write_all(b"\n")?;
        }
        for e in events {
            serde_json::to_writer(&mut out, e)?;
            out.write_all(b"\n")?;
        }
        out.flush()
    }

    /// Parse a JSON Lines history (blank lines are skipped); on error, the 1-based line number and the reason.
    pub fn read_jsonl(input: impl BufRead) -> Result<Vec<HistoryEvent>, (usize, String)> {
        Ok(Self::read_jsonl_with_lines(input)?.into_iter().map(|(_, e)| e).collect())
    }

    /// Like [`HistoryWriter::read_jsonl`], with each event's 1-based line number in the file.
    pub fn read_jsonl_with_lines(input: impl BufRead) -> Result<Vec<(usize, HistoryEvent)>, (usize, String)> {
        Ok(Self::read_with_meta(input)?.1)
    }

    /// Parse a history file: the optional metadata line (first non-blank line), then the events.
    #[allow(clippy::type_complexity)]
    pub fn read_with_meta(
        input: impl BufRead,
    ) -> Result<(Option<HistoryMeta>, Vec<(usize, HistoryEvent)>), (usize, String)> {
        let (mut meta, mut events) = (None, Vec::new());
        for (i, line) in input.lines().enumerate() {
            let line = line.map_err(|e| (i + 1, e.to_string()))?;
            if line.trim().is_empty() {
                continue;
            }
            if meta.is_none() && events.is_empty() && line.trim_start().starts_with(r#"{"meta""#) {
                let m: MetaLine = serde_json::from_str(&line).map_err(|e| (i + 1, e.to_string()))?;
                meta = Some(m.meta);
                continue;
            }
            events.push((i + 1, serde_json::from_str(&line).map_err(|e| (i + 1, e.to_string()))?));
        }
        Ok((meta, events))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::{ReadResult, Version};

    #[test]
    fn event_format_matches_the_documented_line() {
        let line = r#"{"index":0,"process":3,"dc":1,"type":"invoke","f":"txn","value":[["r","k1",null],["w","k2","v-3-17"]],"time":123456}"#;
        let e: HistoryEvent = serde_json::from_str(line).unwrap();
        assert_eq!(e.value[1], HistoryOp(OpKind::Write, "k2".into(), Some("v-3-17".into())));
        assert_eq!(serde_json::to_string(&e).unwrap(), line);
    }

    #[test]
    fn recorders_of_parallel_threads_merge_in_time_order_with_their_own_processes() {
        let put = |k: &str| Request::Put { key: k.into(), value: "v".into() };
        let mut a = HistoryRecorder::new();
        let mut b = HistoryRecorder::starting_at(1 << 32);
        let (pa, pb) = (a.new_process(), b.new_process());
        assert_ne!(pa, pb);
        a.invoke(pa, 0, &put("a"), 1);
        b.invoke(pb, 0, &put("b"), 2);
        b.complete(pb, 0, &put("b"), &Ok(Reply::default()), 3);
        a.complete(pa, 0, &put("a"), &Ok(Reply::default()), 5);
        a.absorb(b);
        let order: Vec<(u64, u64, u64)> = a.events.iter().map(|e| (e.index, e.process, e.time)).collect();
        assert_eq!(order, vec![(0, pa, 1), (1, pb, 2), (2, pb, 3), (3, pa, 5)]);
        // Later processes of the merged recorder clash with neither.
        let next = a.new_process();
        assert!(next != pa && next != pb, "{next}");
    }

    #[test]
    fn unknown_write_outcome_moves_the_client_to_a_new_process() {
        let mut h = HistoryRecorder::new();
        let p = h.new_process();
        let put = Request::Put { key: "k".into(), value: "v".into() };
        h.invoke(p, 0, &put, 1);
        let p2 = h.complete(p, 0, &put, &Err(OpError::Unknown("timeout".into())), 2);
        assert_ne!(p, p2);
        assert_eq!(h.events[1].kind, EventType::Info);
        let rot = Request::Rot { keys: vec!["k".into()] };
        h.invoke(p2, 0, &rot, 3);
        let reply = Reply {
            reads: vec![ReadResult {
                key: "k".into(),
                value: Some("v".into()),
                version: Version::INITIAL,
                versions_skipped: 0,
            }],
            ..Default::default()
        };
        assert_eq!(h.complete(p2, 0, &rot, &Ok(reply), 4), p2);
        let mut buf = Vec::new();
        HistoryWriter::write_jsonl(&h.events, &mut buf).unwrap();
        let back = HistoryWriter::read_jsonl(&buf[..]).unwrap();
        assert_eq!(back, h.events);
        assert_eq!(HistoryWriter::read_jsonl(&b"{}\n"[..]).unwrap_err().0, 1);
    }

    #[test]
    fn a_transaction_is_recorded_in_program_order_in_its_invoke_slot_with_its_abort_cause() {
        let mut h = HistoryRecorder::new();
        let (p, q) = (h.new_process(), h.new_process());
        let slot = h.invoke_txn(p, 0, 1);
        h.invoke(q, 0, &Request::Put { key: "z".into(), value: "vz".into() }, 2);
        let ops = vec![
            HistoryOp(OpKind::Read, "x".into(), Some("v0".into())),
            HistoryOp(OpKind::Write, "y".into(), Some("v1".into())),
        ];
        let version = Version { time: 9, dc: 0 };
        assert_eq!(h.complete_txn(slot, ops.clone(), &Ok(Some(version)), 3), p);
        assert_eq!(h.events[0].value[0], HistoryOp(OpKind::Read, "x".into(), None));
        assert_eq!(h.events[0].value[1], ops[1]);
        assert_eq!((h.events[2].kind, &h.events[2].value, h.events[2].version), (EventType::Ok, &ops, Some(version)));
        let slot = h.invoke_txn(p, 0, 4);
        let abort = OpError::aborted(AbortCause::Deadlock, "wounded by an older transaction");
        assert_eq!(h.complete_txn(slot, ops.clone(), &Err(abort), 5), p, "an abort is a certain no-effect");
        let last = h.events.last().unwrap();
        assert_eq!((last.kind, last.cause), (EventType::Fail, Some(AbortCause::Deadlock)));
        assert_eq!(last.value[0].2, None, "an aborted transaction's reads are not reported");
        let meta = HistoryMeta { protocol: "2pl".into(), runtime: "sim".into(), seed: Some(7), version_order: true };
        let mut buf = Vec::new();
        HistoryWriter::write_with_meta(Some(&meta), &h.events, &mut buf).unwrap();
        let text = String::from_utf8(buf.clone()).unwrap();
        assert!(text.starts_with(r#"{"meta":{"protocol":"2pl""#), "{text}");
        assert!(text.contains(r#""cause":"deadlock""#), "{text}");
        let (m, events) = HistoryWriter::read_with_meta(&buf[..]).unwrap();
        assert_eq!(m, Some(meta));
        assert_eq!(events.into_iter().map(|(_, e)| e).collect::<Vec<_>>(), h.events);
    }
}
