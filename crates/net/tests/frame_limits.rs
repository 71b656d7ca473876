//! Frame limits where the input arrives (issue 32, `snowline_core::frames`): a request frame that leaves no
//! headroom is refused before the protocol sees it, and the partition keeps committing; a value at
//! `max_value_bytes` in a cluster whose frames are as small as the config allows is written, replicated
//! and read back by every protocol family; a reply too large for a frame ends its operation as outcome
//! unknown, saying why, instead of waiting for the client's timeout.

// Tests of a real server: they wait on the real clock.
#![allow(clippy::disallowed_methods)]

use bytes::BytesMut;
use futures::StreamExt;
use snowline_core::frames::{FRAME_HEADROOM, REQUEST_OVERHEAD, check_limits};
use snowline_core::{Addr, ClientId, Key, OpError, OpId, Protocol, Request, ServerId, Value};
use snowline_net::frame::{self, Frame};
use snowline_net::{ClientRuntime, ClusterConfig, Session, free_base_port};
use snowline_protocols::strong::raft_kv::{KvMsg, KvOp};
use snowline_protocols::strong::twopl::{Age, Participant, TwoPlMsg, TxnId};
use snowline_protocols::{Cops, Cv, Nmsi, RaftKv, TpcKv, TwoPl};
use std::time::Duration;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio_util::codec::FramedRead;

use crate::common;

const CLIENT: ClientId = ClientId(0xdead_0000_0001);

fn encode<M: serde::Serialize>(f: &Frame<M>) -> BytesMut {
    let mut buf = BytesMut::new();
    frame::encode_into(f, usize::MAX >> 1, &mut buf).unwrap();
    buf
}

/// A message from `CLIENT` whose frame is exactly `max_frame_bytes` long, made by `build` from a value.
fn frame_of_exactly<M: serde::Serialize + Clone>(max: usize, to: ServerId, build: impl Fn(Value) -> M) -> BytesMut {
    let frame =
        |n: usize| Frame::Msg { from: Addr::Client(CLIENT), to: Addr::Server(to), msg: build("x".repeat(n).into()) };
    let overhead = encode(&frame(0)).len() - 4;
    // A varint length prefix grows with the value: step down until the frame is exactly the limit.
    let mut n = max - overhead;
    while encode(&frame(n)).len() - 4 > max {
        n -= 1;
    }
    let buf = encode(&frame(n));
    assert_eq!(buf.len() - 4, max, "the forged frame is exactly max_frame_bytes");
    buf
}

/// Send `bytes` on a fresh client connection to `addr` and return the frames the server sends back.
async fn send_raw<P: Protocol>(addr: &str, bytes: &[u8], wait: Duration) -> Vec<Frame<P::Msg>> {
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(&encode(&Frame::<P::Msg>::Hello { protocol: P::NAME.into(), from: Addr::Client(CLIENT) }))
        .await
        .unwrap();
    s.write_all(bytes).await.unwrap();
    let mut rd = FramedRead::new(s, frame::codec(1 << 24));
    let mut got = Vec::new();
    let deadline = tokio::time::Instant::now() + wait;
    while let Ok(Some(Ok(b))) = tokio::time::timeout_at(deadline, rd.next()).await {
        got.push(frame::decode::<P::Msg>(&b).unwrap());
        if got.iter().any(|f| matches!(f, Frame::Refused { .. })) {
            break;
        }
    }
    got
}

fn refusal<M>(frames: &[Frame<M>]) -> Option<&str> {
    frames.iter().find_map(|f| if let Frame::Refused { message, .. } = f { Some(message.as_str()) } else { None })
}

async fn put_and_read<P: Protocol>(session: &Session<P>, key: &Key, value: &Value) -> Result<Option<Value>, OpError> {
    if P::OFFERS.blind_writes {
        session.execute(Request::Put { key: key.clone(), value: value.clone() }).await?;
    } else {
        // The Jessy family's write-certifying criteria: read what you write.
        let mut txn = session.begin().await?;
        txn.get(std::slice::from_ref(key)).await?;
        txn.put(key.clone(), value.clone());
        txn.commit().await?;
    }
    read::<P>(session, key).await
}

async fn read<P: Protocol>(session: &Session<P>, key: &Key) -> Result<Option<Value>, OpError> {
    if P::OFFERS.read_only {
        Ok(session.execute(Request::Rot { keys: vec![key.clone()] }).await?.reads[0].value.clone())
    } else {
        let mut txn = session.begin().await?;
        let value = txn.get(std::slice::from_ref(key)).await?.remove(0);
        txn.abort().await?;
        Ok(value)
    }
}

/// The raw PUT whose frame is exactly `max_frame_bytes` used to be taken; raft-kv's append carrying it was
/// then over the limit at every retry and no later write of the partition committed; 2pl acknowledged a
/// value no read could return. Now it is refused at the door and the partition goes on.
async fn max_frame_request_is_refused<P: Protocol>(forged: impl Fn(ServerId, usize) -> BytesMut) {
    let config = ClusterConfig::local(P::NAME, 1, 1, free_base_port()).insecure();
    let max = config.max_frame_bytes;
    let cluster = common::start::<P>(config).await;
    let to = ServerId::new(0, 0);
    let back = send_raw::<P>(&cluster.config.nodes[0].addr, &forged(to, max), Duration::from_secs(5)).await;
    let why = refusal(&back).unwrap_or_else(|| panic!("{}: the max-size frame is refused; got {back:?}", P::NAME));
    assert!(why.contains("exceeds the request limit") && why.contains("max_frame_bytes"), "{}: {why}", P::NAME);

    let client = ClientRuntime::<P>::connect(&cluster.config, 0).await.unwrap().with_timeout(Duration::from_secs(5));
    let session = client.session();
    let key: Key = "after".into();
    let read = put_and_read(&session, &key, &"v".into()).await;
    assert_eq!(read.unwrap().as_deref(), Some("v"), "{}: the partition still commits", P::NAME);
    drop(session);
    drop(client);
    cluster.stop().await;
}

#[tokio::test]
async fn a_request_frame_of_max_frame_bytes_is_refused_and_the_partition_keeps_committing() {
    max_frame_request_is_refused::<RaftKv>(|to, max| {
        frame_of_exactly(max, to, |value| KvMsg::Request {
            op: OpId(1),
            attempt: 0,
            kv: KvOp::Put { key: "k".into(), value, seq: 1 },
        })
    })
    .await;
    max_frame_request_is_refused::<TwoPl>(|to, max| {
        let txn = TxnId { client: CLIENT, seq: 1 };
        let age = Age { time: 1, client: CLIENT };
        frame_of_exactly(max, to, |value| TwoPlMsg::Commit {
            txn,
            age,
            participants: vec![Participant {
                partition: 0,
                writes: vec![("k".into(), value)],
                held: false,
                reads: vec![],
            }],
        })
    })
    .await;
}

/// A cluster whose frames are as small as its value and key limits allow (`check_limits`): a value of
/// `max_value_bytes` is written, carried by whatever wraps it (Raft entries, multicast, prepares,
/// replication) and read back, in every protocol family.
async fn max_value_at_the_smallest_frame<P: Protocol>() {
    let mut config = ClusterConfig::local(P::NAME, 2, 2, free_base_port()).insecure();
    config.protocol_config.max_value_bytes = 256 << 10;
    config.protocol_config.max_key_bytes = 1 << 10;
    config.max_frame_bytes = (256 << 10) + (1 << 10) + REQUEST_OVERHEAD + FRAME_HEADROOM;
    check_limits(config.max_frame_bytes, &config.protocol_config).unwrap();
    let t = config.topology();
    let cluster = common::start::<P>(config).await;
    let value: Value = "v".repeat(256 << 10).into();
    let mut clients = Vec::new();
    for dc in 0..t.dcs {
        let client =
            ClientRuntime::<P>::connect(&cluster.config, dc).await.unwrap().with_timeout(Duration::from_secs(10));
        let session = client.session();
        // Several values per partition, so that replication that batches them has to split its batches.
        for p in 0..t.partitions {
            for i in 0..3 {
                let key: Key = t.key_on(p, &format!("big-{dc}-{i}")).into();
                let read = put_and_read(&session, &key, &value).await;
                let read = read.unwrap_or_else(|e| panic!("{}: dc{dc}/p{p}: {e}", P::NAME));
                assert_eq!(read.map(|v| v.len()), Some(value.len()), "{}: dc{dc}/p{p}", P::NAME);
            }
        }
        clients.push((client, session));
    }
    // Every value reaches the other datacenter.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    for (dc, (_, session)) in clients.iter().enumerate() {
        let other = (dc + 1) % clients.len();
        for p in 0..t.partitions {
            for i in 0..3 {
                let key: Key = t.key_on(p, &format!("big-{other}-{i}")).into();
                loop {
                    let got = read::<P>(session, &key).await.unwrap_or_else(|e| panic!("{}: {e}", P::NAME));
                    if got.as_ref().map(|v| v.len()) == Some(value.len()) {
                        break;
                    }
                    assert!(tokio::time::Instant::now() < deadline, "{}: {key} never reached dc{dc}", P::NAME);
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            }
        }
    }
    drop(clients);
    cluster.stop().await;
}

#[tokio::test]
async fn a_value_of_max_value_bytes_fits_every_family_at_the_smallest_frame() {
    max_value_at_the_smallest_frame::<Cv>().await;
    max_value_at_the_smallest_frame::<Cops>().await;
    max_value_at_the_smallest_frame::<Nmsi>().await;
    max_value_at_the_smallest_frame::<TwoPl>().await;
    max_value_at_the_smallest_frame::<RaftKv>().await;
    max_value_at_the_smallest_frame::<TpcKv>().await;
}

/// A read of two keys whose values fill a frame each: the reply cannot be sent, and the operation ends as
/// outcome unknown saying why (it used to wait for its timeout and say only that).
#[tokio::test]
async fn a_reply_too_large_for_a_frame_ends_its_operation_at_once() {
    let mut config = ClusterConfig::local(Cv::NAME, 1, 1, free_base_port()).insecure();
    config.protocol_config.max_value_bytes = 256 << 10;
    config.max_frame_bytes = (256 << 10) + config.protocol_config.max_key_bytes + REQUEST_OVERHEAD + FRAME_HEADROOM;
    let cluster = common::start::<Cv>(config).await;
    let client = ClientRuntime::<Cv>::connect(&cluster.config, 0).await.unwrap().with_timeout(Duration::from_secs(30));
    let session = client.session();
    let value: Value = "v".repeat(256 << 10).into();
    let keys: Vec<Key> = vec!["a".into(), "b".into()];
    for k in &keys {
        session.execute(Request::Put { key: k.clone(), value: value.clone() }).await.unwrap();
    }
    // The server's news, not the client's timeout (whose message names no frame limit).
    let e = session.execute(Request::Rot { keys }).await.unwrap_err();
    assert!(matches!(&e, OpError::Unknown(m) if m.contains("exceeds max_frame_bytes")), "{e}");
    // One key at a time works, and the connection is still up.
    let one = session.execute(Request::Rot { keys: vec!["a".into()] }).await.unwrap();
    assert_eq!(one.reads[0].value.as_ref().map(|v| v.len()), Some(value.len()));
    drop(session);
    drop(client);
    cluster.stop().await;
}
