//! Client-observed histories, Elle-style, one JSON object per line (format: `docs/HISTORY.md`).

use crate::ids::DcId;
use crate::request::{Key, OpError, Reply, Request, Value};
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
        match result {
            Ok(reply) => {
                self.push(process, dc, EventType::Ok, completed_ops(req, reply), time, None);
                process
            }
            // A read-only transaction has no effect whatever happened to it, so its unknown outcome is a `fail`.
            Err(e) if e.is_definite() || req.is_read_only() => {
                self.push(process, dc, EventType::Fail, invoked_ops(req), time, Some(e.to_string()));
                process
            }
            Err(e) => {
                self.push(process, dc, EventType::Info, invoked_ops(req), time, Some(e.to_string()));
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
        self.events.push(HistoryEvent { index, process, dc, kind, f: "txn".into(), value, time, error });
    }
}

/// Writes events as JSON Lines.
pub struct HistoryWriter;

impl HistoryWriter {
    pub fn write_jsonl(events: &[HistoryEvent], mut out: impl Write) -> std::io::Result<()> {
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
        let mut events = Vec::new();
        for (i, line) in input.lines().enumerate() {
            let line = line.map_err(|e| (i + 1, e.to_string()))?;
            if line.trim().is_empty() {
                continue;
            }
            events.push((i + 1, serde_json::from_str(&line).map_err(|e| (i + 1, e.to_string()))?));
        }
        Ok(events)
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
}
