//! The wire format.
//!
//! Every TCP connection carries a stream of length-delimited frames, exactly as tokio-util's
//! [`LengthDelimitedCodec`] with its defaults writes them: a 4-byte big-endian payload length, then the
//! payload. A payload longer than the cluster's `max_frame_bytes` is an error on both sides.
//!
//! A payload is one byte of wire version ([`WIRE_VERSION`], currently 1) followed by a postcard-encoded
//! [`Frame<M>`], `M` being the protocol's message type. Postcard is not self-describing, so the version byte
//! is what lets a future format be told apart; the handshake also names the protocol, so two processes
//! running different protocols (whose messages would decode as garbage) refuse each other clearly.
//!
//! On every connection the connecting side first sends [`Frame::Hello`]; then either side sends
//! [`Frame::Msg`]s (between servers, [`Frame::Seq`] and [`Frame::Ack`]; to a client whose request a
//! durable server with a full disk did not take, [`Frame::Refused`]). A server that refuses a peer or closes a
//! connection because of a bad frame first sends
//! [`Frame::Error`] saying why. A malformed, truncated, oversized or wrong-version frame closes only the
//! connection it arrived on.

use bytes::{BufMut, BytesMut};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use snowline_core::{Addr, ClientId, ServerId};
use tokio_util::codec::LengthDelimitedCodec;

/// The current wire version, the first byte of every payload.
pub const WIRE_VERSION: u8 = 1;
/// Bytes of the length prefix.
pub const LENGTH_PREFIX: usize = 4;

/// One frame's payload (after the version byte).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Frame<M> {
    /// First frame on every connection: the protocol the sender runs and who it is (a server of the
    /// sending process, or for a client runtime `Addr::Client` with the runtime's id prefix).
    Hello { protocol: String, from: Addr },
    /// A protocol message.
    Msg { from: Addr, to: Addr, msg: M },
    /// Why the sender is closing or refusing the connection.
    Error { message: String },
    /// A protocol message between servers: message `seq` of the sequenced link `from → to` (exactly-once,
    /// FIFO over connection resets, `snowline_core::links`; between durable processes across crashes too,
    /// `snowline_storage::host`). In memory, `epoch` is the sending process's incarnation and `floor` the
    /// oldest number it still holds (where a receiver that has not heard of that incarnation starts); a
    /// durable process sends 0 for both (its links outlive restarts).
    Seq { from: ServerId, to: ServerId, epoch: u64, floor: u64, seq: u64, msg: M },
    /// `from` has delivered the link `to → from` (of `to`'s incarnation `epoch`) up to `seq`; with
    /// `resend`, it asks `to` to send everything after `seq` again (a lasting gap; the catch-up exchange).
    Ack { from: ServerId, to: ServerId, epoch: u64, seq: u64, resend: bool },
    /// The server did not take the last request of client `client` (its disk is full, or the request was
    /// invalid): the client's operation fails with `OpError::Rejected(message)`; it had no effect.
    Refused { client: ClientId, message: String },
    /// The server could not send client `client` its reply: it exceeded `max_frame_bytes` (a read of many
    /// large values). The request may have taken effect: the client's operation ends as outcome unknown.
    Unanswerable { client: ClientId, message: String },
}

/// A frame that could not be encoded or decoded.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    #[error("frame of {len} bytes exceeds max_frame_bytes = {max}")]
    Oversized { len: usize, max: usize },
    #[error("empty frame (no wire version byte)")]
    Empty,
    #[error("wire version {got} is not supported (this build speaks version {WIRE_VERSION})")]
    WrongVersion { got: u8 },
    #[error("malformed frame: {0}")]
    Malformed(String),
}

/// The codec that reads (and could write) the length prefix, limited to `max_frame_bytes` of payload.
pub fn codec(max_frame_bytes: usize) -> LengthDelimitedCodec {
    LengthDelimitedCodec::builder().max_frame_length(max_frame_bytes).new_codec()
}

/// Whether `buf` (a decoder's buffer, positioned at a frame's length prefix) holds a whole frame.
pub fn whole_frame_at_front(buf: &[u8]) -> bool {
    buf.len() >= LENGTH_PREFIX
        && buf.len() - LENGTH_PREFIX >= u32::from_be_bytes([buf[0], buf[1], buf[2], buf[3]]) as usize
}

/// Append one complete frame (length prefix, version, payload) to `out`, in [`LengthDelimitedCodec`]'s
/// format. On error `out` is left as it was, so a batch being built stays valid.
pub fn encode_into<M: Serialize>(
    frame: &Frame<M>,
    max_frame_bytes: usize,
    out: &mut BytesMut,
) -> Result<(), FrameError> {
    let start = out.len();
    out.put_u32(0);
    out.put_u8(WIRE_VERSION);
    if let Err(e) = postcard::serialize_with_flavor(frame, Appender(out)) {
        out.truncate(start);
        return Err(FrameError::Malformed(format!("cannot encode: {e}")));
    }
    let len = out.len() - start - LENGTH_PREFIX;
    if len > max_frame_bytes {
        out.truncate(start);
        // A reply too large to send still reaches its client, as the news that it could not be sent
        // (snowline_core::frames: a one-key reply always fits; one naming many keys may not).
        if let Frame::Msg { to: Addr::Client(client), .. } = frame {
            let message = format!(
                "the server's reply ({len} bytes) exceeds max_frame_bytes = {max_frame_bytes} and was not sent: \
                 name fewer keys per request"
            );
            return encode_into(&Frame::<M>::Unanswerable { client: *client, message }, max_frame_bytes, out);
        }
        return Err(FrameError::Oversized { len, max: max_frame_bytes });
    }
    out[start..start + LENGTH_PREFIX].copy_from_slice(&(len as u32).to_be_bytes());
    Ok(())
}

/// Postcard's output into a `BytesMut`: bytes and slices appended directly (its `io::Write` flavor made a
/// `write_all` call per byte of every tag and length).
struct Appender<'a>(&'a mut BytesMut);

impl postcard::ser_flavors::Flavor for Appender<'_> {
    type Output = ();

    fn try_push(&mut self, data: u8) -> postcard::Result<()> {
        self.0.put_u8(data);
        Ok(())
    }

    fn try_extend(&mut self, data: &[u8]) -> postcard::Result<()> {
        self.0.extend_from_slice(data);
        Ok(())
    }

    fn finalize(self) -> postcard::Result<()> {
        Ok(())
    }
}

/// Decode one payload (what [`LengthDelimitedCodec`] yields: version byte + postcard body).
pub fn decode<M: DeserializeOwned>(payload: &[u8]) -> Result<Frame<M>, FrameError> {
    let (&version, body) = payload.split_first().ok_or(FrameError::Empty)?;
    if version != WIRE_VERSION {
        return Err(FrameError::WrongVersion { got: version });
    }
    let (frame, rest) = postcard::take_from_bytes(body).map_err(|e| FrameError::Malformed(e.to_string()))?;
    if !rest.is_empty() {
        return Err(FrameError::Malformed(format!("{} trailing bytes after the frame", rest.len())));
    }
    Ok(frame)
}

/// The fuzz target for the decoder (`fuzz/fuzz_targets/frame_decoder.rs`, and over the committed corpus in
/// `tests/hostile.rs`): read `data` as a server reads a connection's bytes (length prefixes, the
/// `max_frame_bytes` limit, the end of the stream) and decode every payload as a frame of `M`. Every decoded
/// frame must re-encode and decode to itself; nothing may panic. Returns how many frames decoded.
pub fn fuzz_decode_stream<M>(data: &[u8], max_frame: usize) -> usize
where
    M: Serialize + DeserializeOwned + PartialEq + std::fmt::Debug,
{
    use tokio_util::codec::Decoder;
    let budget = crate::limits::FrameBudget::new(crate::limits::FRAME_BUFFER_BUDGET);
    let mut codec = crate::limits::BudgetedCodec::new(max_frame, budget);
    let mut buf = BytesMut::from(data);
    let mut decoded = 0;
    loop {
        let payload = match codec.decode_eof(&mut buf) {
            Ok(Some(p)) => p,
            Ok(None) | Err(_) => return decoded,
        };
        if let Ok(f) = decode::<M>(&payload) {
            let mut again = BytesMut::new();
            encode_into(&f, usize::MAX >> 1, &mut again).expect("a decoded frame encodes");
            assert_eq!(decode::<M>(&again[LENGTH_PREFIX..]).as_ref(), Ok(&f), "a frame survives a round trip");
            decoded += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use snowline_core::{ClientId, ServerId};
    use tokio_util::codec::Decoder;

    #[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
    enum M {
        Put { key: String, value: Vec<u8> },
        Ack(u64),
    }

    /// The shared client-facing types cross the wire inside every protocol's messages; postcard is not
    /// self-describing, so a serde attribute that skips fields (`skip_serializing_if`) would break them.
    #[test]
    fn client_facing_types_round_trip() {
        use snowline_core::{OpError, OpMetrics, ReadResult, ReadersCheckCost, Reply, Request, Version};
        let replies: Vec<Result<Reply, OpError>> = vec![
            Ok(Reply {
                reads: vec![ReadResult {
                    key: "k".into(),
                    value: None,
                    version: Version::INITIAL,
                    versions_skipped: 2,
                }],
                commit: Some(Version { time: 9, dc: 1 }),
                metrics: OpMetrics {
                    rounds: 2,
                    executions: 1,
                    versions_returned: 1,
                    blocked_ns: 5,
                    readers_check: None,
                    metadata_bytes: 9,
                },
                writes: vec![("w".into(), "v".into())],
            }),
            Ok(Reply {
                metrics: OpMetrics {
                    readers_check: Some(ReadersCheckCost { rot_ids_total: 3, ..Default::default() }),
                    ..Default::default()
                },
                ..Default::default()
            }),
            Err(OpError::Unknown("x".into())),
            Err(OpError::aborted(snowline_core::AbortCause::Deadlock, "wounded")),
        ];
        for r in replies {
            let bytes = postcard::to_stdvec(&r).unwrap();
            assert_eq!(postcard::from_bytes::<Result<Reply, OpError>>(&bytes).unwrap(), r);
        }
        for req in [
            Request::Update { writes: vec![("a".into(), "1".into())] },
            Request::Begin,
            Request::Read { keys: vec!["a".into()] },
            Request::Commit { writes: vec![] },
            Request::Abort,
            Request::Call { procedure: "rw".into(), args: vec!["0".into()] },
        ] {
            assert_eq!(postcard::from_bytes::<Request>(&postcard::to_stdvec(&req).unwrap()).unwrap(), req);
        }
    }

    /// `encode_into` writes exactly postcard's bytes for the frame (length prefix and version byte first),
    /// and `whole_frame_at_front` tells a whole frame from a part of one.
    #[test]
    fn encoded_frames_are_postcards_bytes_and_are_told_whole() {
        let mut out = BytesMut::new();
        for f in frames() {
            let start = out.len();
            encode_into(&f, 1 << 20, &mut out).unwrap();
            let body = postcard::to_stdvec(&f).unwrap();
            assert_eq!(&out[start + LENGTH_PREFIX + 1..], &body[..]);
            assert_eq!(out[start + LENGTH_PREFIX], WIRE_VERSION);
            let whole = out[start..].to_vec();
            assert!(whole_frame_at_front(&whole));
            assert!(!whole_frame_at_front(&whole[..whole.len() - 1]));
            assert!(!whole_frame_at_front(&whole[..3]));
        }
    }

    fn frames() -> Vec<Frame<M>> {
        vec![
            Frame::Hello { protocol: "cv".into(), from: Addr::Server(ServerId::new(1, 3)) },
            Frame::Msg {
                from: Addr::Client(ClientId(u64::MAX)),
                to: Addr::Server(ServerId::new(0, 0)),
                msg: M::Put { key: "k".into(), value: vec![7; 300] },
            },
            Frame::Msg { from: Addr::Server(ServerId::new(0, 0)), to: Addr::Client(ClientId(5)), msg: M::Ack(9) },
            Frame::Error { message: "bye".into() },
            Frame::Refused { client: ClientId(3), message: "disk full".into() },
            Frame::Unanswerable { client: ClientId(4), message: "too big".into() },
        ]
    }

    #[test]
    fn round_trip_through_length_delimited_codec() {
        let mut buf = BytesMut::new();
        for f in frames() {
            encode_into(&f, 1 << 20, &mut buf).unwrap();
        }
        let mut codec = codec(1 << 20);
        let mut got = Vec::new();
        while let Some(payload) = codec.decode(&mut buf).unwrap() {
            got.push(decode::<M>(&payload).unwrap());
        }
        assert_eq!(got, frames());
    }

    #[test]
    fn oversized_encode_leaves_buffer_intact() {
        let mut buf = BytesMut::new();
        encode_into(&Frame::<M>::Error { message: "x".into() }, 64, &mut buf).unwrap();
        let before = buf.clone();
        let big = Frame::Msg {
            from: Addr::Client(ClientId(1)),
            to: Addr::Server(ServerId::new(0, 1)),
            msg: M::Put { key: "k".into(), value: vec![0; 100] },
        };
        let err = encode_into(&big, 64, &mut buf).unwrap_err();
        assert!(matches!(err, FrameError::Oversized { max: 64, .. }), "{err}");
        assert_eq!(buf, before);
    }

    /// A reply too large for a frame is replaced by the news that it could not be sent, so the client's
    /// operation ends (as outcome unknown) instead of waiting for its timeout.
    #[test]
    fn oversized_reply_becomes_unanswerable() {
        let mut buf = BytesMut::new();
        let reply = Frame::Msg {
            from: Addr::Server(ServerId::new(0, 1)),
            to: Addr::Client(ClientId(7)),
            msg: M::Put { key: "k".into(), value: vec![0; 4000] },
        };
        encode_into(&reply, 1024, &mut buf).unwrap();
        let payload = codec(1024).decode(&mut buf).unwrap().unwrap();
        match decode::<M>(&payload).unwrap() {
            Frame::Unanswerable { client, message } => {
                assert_eq!(client, ClientId(7));
                assert!(message.contains("exceeds max_frame_bytes = 1024"), "{message}");
            }
            other => panic!("expected Unanswerable, got {other:?}"),
        }
    }

    #[test]
    fn oversized_frame_is_rejected_by_reader() {
        let mut buf = BytesMut::new();
        buf.put_u32(1 << 30);
        buf.put_slice(b"GET / HTTP/1.1");
        let err = codec(1 << 20).decode(&mut buf).unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::InvalidData);
    }

    #[test]
    fn decode_errors() {
        assert_eq!(decode::<M>(&[]).unwrap_err(), FrameError::Empty);
        assert_eq!(decode::<M>(&[2, 0]).unwrap_err(), FrameError::WrongVersion { got: 2 });
        let mut buf = BytesMut::new();
        encode_into(&frames()[1], 1 << 20, &mut buf).unwrap();
        let payload = &buf[LENGTH_PREFIX..];
        // Truncated body.
        let err = decode::<M>(&payload[..payload.len() - 10]).unwrap_err();
        assert!(matches!(err, FrameError::Malformed(_)), "{err}");
        // Trailing garbage.
        let mut long = payload.to_vec();
        long.push(0);
        let err = decode::<M>(&long).unwrap_err();
        assert!(err.to_string().contains("trailing"), "{err}");
        // An unknown variant tag.
        let err = decode::<M>(&[WIRE_VERSION, 17]).unwrap_err();
        assert!(matches!(err, FrameError::Malformed(_)), "{err}");
    }

    #[test]
    fn truncated_stream_is_an_error_at_eof() {
        let mut buf = BytesMut::new();
        encode_into(&frames()[1], 1 << 20, &mut buf).unwrap();
        buf.truncate(buf.len() - 3);
        let mut codec = codec(1 << 20);
        assert!(codec.decode(&mut buf).unwrap().is_none());
        assert!(codec.decode_eof(&mut buf).is_err());
    }
}
