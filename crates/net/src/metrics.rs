//! A server's metrics: plain counters owned by the event loop (no locks, no atomics per message), rendered
//! as Prometheus text (exposition format 0.0.4) only when scraped, and the small HTTP/1.1 listener that
//! serves them on the node's opt-in metrics address (`metrics = "host:port"` in its `[[node]]` entry).
//!
//! The listener runs on the server's tokio runtime. A scrape asks the event loop for the text over a
//! channel, so the loop renders it between two batches of inputs; nothing is shared with the hot path.
//! The listener trusts nothing it reads: a request head is at most [`MAX_REQUEST_BYTES`], it must arrive
//! within [`REQUEST_TIMEOUT`], at most [`MAX_SCRAPERS`] connections are served at once (more are closed at
//! once), and anything but `GET /metrics` gets an error status. Every connection is closed after one answer.

use std::fmt::{Display, Write as _};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinSet;
use tokio::time::{Duration, timeout};

/// The largest request head (request line and headers) read; a larger one gets 431 and is closed.
pub const MAX_REQUEST_BYTES: usize = 8 * 1024;
/// A request head must be complete, and the answer written, within this long.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
/// Metrics connections served at once; more are closed without an answer.
pub const MAX_SCRAPERS: usize = 32;
/// The content type of the Prometheus text format.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// A scrape: the event loop answers with the rendered text.
pub(crate) type Scrape = oneshot::Sender<String>;

/// Histogram buckets: upper bounds of 1 µs · 2^i for i in 0..BUCKETS (1 µs to about 2.1 s), then +Inf.
const BUCKETS: usize = 22;

/// A latency histogram with fixed power-of-two buckets: recording is a few integer operations.
#[derive(Clone, Debug, Default)]
pub(crate) struct Histogram {
    /// Per bucket (not cumulative); samples above the last bucket are only in `count`.
    buckets: [u64; BUCKETS],
    count: u64,
    sum_ns: u64,
}

impl Histogram {
    pub(crate) fn record(&mut self, d: Duration) {
        let ns = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        // The smallest i with ns <= 1000 · 2^i.
        let micros = ns.div_ceil(1000).max(1);
        let i = (u64::BITS - (micros - 1).leading_zeros()) as usize;
        if let Some(b) = self.buckets.get_mut(i) {
            *b += 1;
        }
        self.count += 1;
        self.sum_ns = self.sum_ns.saturating_add(ns);
    }
}

/// Counts by message kind (`Message::kind`): a handful of kinds per protocol, so a short vector whose
/// lookup is mostly a pointer comparison beats hashing the name.
#[derive(Clone, Debug, Default)]
pub(crate) struct KindCounts(Vec<(&'static str, u64)>);

impl KindCounts {
    pub(crate) fn add(&mut self, kind: &'static str) {
        for (k, n) in &mut self.0 {
            if std::ptr::eq(*k, kind) || *k == kind {
                *n += 1;
                return;
            }
        }
        self.0.push((kind, 1));
    }

    /// The count of `kind` (0 if never seen).
    pub(crate) fn get(&self, kind: &str) -> u64 {
        self.0.iter().find(|(k, _)| *k == kind).map_or(0, |(_, n)| *n)
    }

    /// `(kind, count)`, sorted by kind (stable output).
    pub(crate) fn sorted(&self) -> Vec<(&'static str, u64)> {
        let mut v = self.0.clone();
        v.sort_unstable();
        v
    }
}

/// What the event loop counts as it runs.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    /// Messages from the network delivered to hosted servers, by sender role and kind.
    pub received_from_clients: KindCounts,
    pub received_from_servers: KindCounts,
    /// Messages written towards other processes, by receiver role and kind (retransmissions included).
    pub sent_to_clients: KindCounts,
    pub sent_to_servers: KindCounts,
    /// Messages to clients that had no connection to this process left (dropped: driver contract rule 4).
    pub client_replies_dropped: u64,
    /// Client requests a durable server refused because its disk is full.
    pub refused_disk_full: u64,
    /// Replies to clients that say how their operation went (`Message::reply_note`): all of them, the
    /// refusals, the aborts by cause, and the time the requests waited.
    pub replies_noted: u64,
    pub replies_rejected: u64,
    pub aborts: KindCounts,
    pub blocked: Histogram,
    /// Time to handle one message from the network.
    pub handler: Histogram,
    /// Durable mode: time of one log commit (fsync included).
    pub commit: Histogram,
}

impl Counters {
    pub(crate) fn note_reply(&mut self, note: snowline_core::ReplyNote) {
        self.replies_noted += 1;
        self.replies_rejected += u64::from(note.rejected);
        if let Some(cause) = note.abort {
            self.aborts.add(cause.name());
        }
        self.blocked.record(Duration::from_nanos(note.blocked_ns));
    }
}

/// Prometheus text, built one metric family at a time. Every sample carries the `node` label.
pub(crate) struct Text {
    out: String,
    node: String,
}

impl Text {
    pub(crate) fn new(node: u32) -> Self {
        Self { out: String::with_capacity(8 * 1024), node: node.to_string() }
    }

    /// Starts a family: its HELP and TYPE lines (`kind`: counter, gauge or histogram).
    pub(crate) fn family(&mut self, name: &str, kind: &str, help: &str) {
        let help = help.replace('\\', "\\\\").replace('\n', "\\n");
        let _ = writeln!(self.out, "# HELP {name} {help}\n# TYPE {name} {kind}");
    }

    pub(crate) fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: impl Display) {
        self.out.push_str(name);
        self.out.push_str("{node=\"");
        self.out.push_str(&self.node);
        self.out.push('"');
        for (k, v) in labels {
            let _ = write!(self.out, ",{k}=\"");
            for c in v.chars() {
                match c {
                    '\\' => self.out.push_str("\\\\"),
                    '"' => self.out.push_str("\\\""),
                    '\n' => self.out.push_str("\\n"),
                    c => self.out.push(c),
                }
            }
            self.out.push('"');
        }
        let _ = writeln!(self.out, "}} {value}");
    }

    /// A family with a single sample.
    pub(crate) fn single(&mut self, name: &str, kind: &str, help: &str, value: impl Display) {
        self.family(name, kind, help);
        self.sample(name, &[], value);
    }

    /// A histogram family in seconds (`_bucket`, `_sum`, `_count`).
    pub(crate) fn histogram(&mut self, name: &str, help: &str, h: &Histogram) {
        self.family(name, "histogram", help);
        let bucket = format!("{name}_bucket");
        let mut cumulative = 0;
        for (i, n) in h.buckets.iter().enumerate() {
            cumulative += n;
            let le = ((1u64 << i) as f64 * 1e-6).to_string();
            self.sample(&bucket, &[("le", &le)], cumulative);
        }
        self.sample(&bucket, &[("le", "+Inf")], h.count);
        self.sample(&format!("{name}_sum"), &[], h.sum_ns as f64 / 1e9);
        self.sample(&format!("{name}_count"), &[], h.count);
    }

    pub(crate) fn finish(self) -> String {
        self.out
    }
}

/// Serve `GET /metrics` on `listener` until the task is aborted; each scrape asks the event loop through
/// `scrapes` for the text.
pub(crate) async fn serve(listener: TcpListener, scrapes: mpsc::Sender<Scrape>) {
    let mut conns = JoinSet::new();
    loop {
        tokio::select! {
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
            accepted = listener.accept() => match accepted {
                // Over the limit: closed unanswered (an answer could be made to wait by a client not reading).
                Ok((stream, _)) if conns.len() >= MAX_SCRAPERS => drop(stream),
                Ok((stream, _)) => {
                    conns.spawn(answer(stream, scrapes.clone()));
                }
                // Typically out of file descriptors: back off instead of spinning.
                Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
            },
        }
    }
}

/// Why a request head could not be read.
enum BadHead {
    /// Closed before sending anything: nobody to answer.
    Closed,
    /// Closed in the middle of a request head.
    Truncated,
    TooLarge,
}

/// One connection: read a request head, answer it, close.
async fn answer(mut stream: TcpStream, scrapes: mpsc::Sender<Scrape>) {
    let response = match timeout(REQUEST_TIMEOUT, read_head(&mut stream)).await {
        Err(_) => error(408, "Request Timeout", "no complete request in time"),
        Ok(Err(BadHead::Closed)) => return,
        Ok(Err(BadHead::Truncated)) => error(400, "Bad Request", "truncated request"),
        Ok(Err(BadHead::TooLarge)) => error(431, "Request Header Fields Too Large", "request head too large"),
        Ok(Ok(head)) => route(&head, &scrapes).await,
    };
    let written = timeout(REQUEST_TIMEOUT, async {
        stream.write_all(&response).await?;
        stream.shutdown().await
    })
    .await;
    if matches!(written, Ok(Ok(()))) {
        // Read what the client still sends for a moment: closing with unread input would reset the
        // connection and could destroy the answer before the client reads it.
        let mut sink = [0u8; 4096];
        let mut left: usize = 64 * 1024;
        let _ = timeout(Duration::from_millis(200), async {
            while left > 0 {
                match stream.read(&mut sink).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => left = left.saturating_sub(n),
                }
            }
        })
        .await;
    }
}

/// Reads up to the blank line ending a request head.
async fn read_head(stream: &mut TcpStream) -> Result<Vec<u8>, BadHead> {
    let mut head = Vec::with_capacity(512);
    let mut chunk = [0u8; 1024];
    loop {
        let n = stream.read(&mut chunk).await.map_err(|_| BadHead::Truncated)?;
        if n == 0 {
            return Err(if head.is_empty() { BadHead::Closed } else { BadHead::Truncated });
        }
        let searched_from = head.len().saturating_sub(3);
        head.extend_from_slice(&chunk[..n]);
        let tail = &head[searched_from..];
        if let Some(end) = find(tail, b"\r\n\r\n").map(|i| i + 4).or_else(|| find(tail, b"\n\n").map(|i| i + 2)) {
            head.truncate(searched_from + end);
            return Ok(head);
        }
        if head.len() > MAX_REQUEST_BYTES {
            return Err(BadHead::TooLarge);
        }
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// The answer to a complete request head.
async fn route(head: &[u8], scrapes: &mpsc::Sender<Scrape>) -> Vec<u8> {
    let line = head.split(|b| *b == b'\n').next().unwrap_or_default();
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let Ok(line) = std::str::from_utf8(line) else { return error(400, "Bad Request", "request line is not UTF-8") };
    let mut words = line.split(' ');
    let (Some(method), Some(target), Some(version), None) = (words.next(), words.next(), words.next(), words.next())
    else {
        return error(400, "Bad Request", "expected METHOD TARGET HTTP/1.x");
    };
    if !version.starts_with("HTTP/1.") {
        return error(400, "Bad Request", "expected HTTP/1.x");
    }
    let path = target.split('?').next().unwrap_or_default();
    if path != "/metrics" {
        return error(404, "Not Found", "metrics are at /metrics");
    }
    if method != "GET" {
        return error(405, "Method Not Allowed", "only GET");
    }
    let (tx, rx) = oneshot::channel();
    if scrapes.send(tx).await.is_err() {
        return error(503, "Service Unavailable", "the server is stopping");
    }
    match rx.await {
        Ok(body) => response(200, "OK", CONTENT_TYPE, &body),
        Err(_) => error(503, "Service Unavailable", "the server is stopping"),
    }
}

fn error(code: u16, reason: &str, why: &str) -> Vec<u8> {
    response(code, reason, "text/plain; charset=utf-8", &format!("{code} {reason}: {why}\n"))
}

fn response(code: u16, reason: &str, content_type: &str, body: &str) -> Vec<u8> {
    let mut out = format!(
        "HTTP/1.1 {code} {reason}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    if code == 405 {
        out.push_str("Allow: GET\r\n");
    }
    out.push_str("\r\n");
    out.push_str(body);
    out.into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_buckets_are_powers_of_two_microseconds() {
        let mut h = Histogram::default();
        for ns in [0, 1000, 1001, 2000, 2001, 3_000_000_000] {
            h.record(Duration::from_nanos(ns));
        }
        assert_eq!(&h.buckets[..3], &[2, 2, 1]);
        assert_eq!(h.buckets.iter().sum::<u64>(), 5, "3 s is above the last bucket: +Inf only");
        assert_eq!(h.count, 6);
        let mut t = Text::new(4);
        t.histogram("x_seconds", "help", &h);
        let text = t.finish();
        assert!(text.contains("x_seconds_bucket{node=\"4\",le=\"0.000001\"} 2\n"), "{text}");
        assert!(text.contains("x_seconds_bucket{node=\"4\",le=\"0.000002\"} 4\n"), "{text}");
        assert!(text.contains("x_seconds_bucket{node=\"4\",le=\"+Inf\"} 6\n"), "{text}");
        assert!(text.contains("x_seconds_count{node=\"4\"} 6\n"), "{text}");
    }

    #[test]
    fn labels_are_escaped_and_kinds_counted() {
        let mut k = KindCounts::default();
        for kind in ["read", "write", "read"] {
            k.add(kind);
        }
        assert_eq!(k.sorted(), vec![("read", 2), ("write", 1)]);
        let mut t = Text::new(0);
        t.family("m", "gauge", "a\nb");
        t.sample("m", &[("k", "a\"b\\c\nd")], 1);
        assert_eq!(t.finish(), "# HELP m a\\nb\n# TYPE m gauge\nm{node=\"0\",k=\"a\\\"b\\\\c\\nd\"} 1\n");
    }
}
