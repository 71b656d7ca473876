//! Bad requests get a status with a clear message, and hostile clients (garbage, huge messages, streams
//! never read, connection floods) neither crash the endpoint nor grow it without bound.

use crate::common::{self, kind};
use snowline_api::ApiLimits;
use snowline_api::pb;
use snowline_protocols::Cv;
use std::time::Duration;
use tokio::io::AsyncWriteExt;

#[tokio::test(flavor = "current_thread")]
async fn bad_requests_get_errors_of_their_kind_and_the_endpoint_keeps_serving() {
    let cluster = common::start::<Cv>(1, 2, Default::default()).await;
    let mut c = cluster.client(0).await;
    let info = c.info(pb::InfoRequest {}).await.unwrap().into_inner();
    assert_eq!((info.protocol.as_str(), info.dcs, info.partitions), ("cv", 1, 2));
    // Not offered.
    let e = c.call(pb::CallRequest { session: None, procedure: "rw".into(), args: vec![] }).await.unwrap_err();
    assert_eq!((e.code(), kind(&e).as_str()), (tonic::Code::Unimplemented, "not-offered"), "{e:?}");
    // An oversized value, an empty read.
    let big = "x".repeat(info.max_value_bytes as usize + 1);
    let e = c.put(pb::PutRequest { session: None, key: "k".into(), value: big }).await.unwrap_err();
    assert_eq!((e.code(), kind(&e).as_str()), (tonic::Code::InvalidArgument, "invalid-argument"), "{e:?}");
    assert!(e.message().contains("max_value_bytes"), "{e:?}");
    let e = c.read_only(pb::ReadOnlyRequest { session: None, keys: vec![] }).await.unwrap_err();
    assert_eq!(kind(&e), "invalid-argument", "{e:?}");
    // A message beyond the frame limit is refused before it is decoded.
    let huge = "y".repeat(cluster.config.max_frame_bytes + 1);
    let e = c.put(pb::PutRequest { session: None, key: "k".into(), value: huge }).await.unwrap_err();
    assert!(matches!(e.code(), tonic::Code::OutOfRange | tonic::Code::ResourceExhausted), "{e:?}");
    // Raw garbage on the port.
    let mut raw = tokio::net::TcpStream::connect(cluster.grpc(0)).await.unwrap();
    raw.write_all(b"\x16\x03\x01garbage that is neither HTTP/2 nor TLS\r\n\r\n").await.unwrap();
    drop(raw);
    // A deadline shorter than the store's timeout is the call's.
    let mut req = tonic::Request::new(pb::PutRequest { session: None, key: "k".into(), value: "v".into() });
    req.set_timeout(Duration::from_secs(3));
    c.put(req).await.unwrap();
    let got = c.get(pb::GetRequest { session: None, key: "k".into() }).await.unwrap().into_inner();
    assert_eq!(got.value.as_deref(), Some("v"));
    cluster.stop().await;
}

/// A raw HTTP/2 connection that opens `streams` Get calls with a zero flow-control window: the endpoint
/// can send none of its replies, and the client never reads them.
async fn never_reading_client(addr: &str, streams: usize) -> Vec<h2::client::ResponseFuture> {
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let (client, conn) = h2::client::Builder::new().initial_window_size(0).handshake(tcp).await.unwrap();
    tokio::spawn(async move {
        let _ = conn.await;
    });
    let mut client = client.ready().await.unwrap();
    let mut responses = Vec::new();
    for _ in 0..streams {
        // A Get of key "k": the gRPC frame is 1 flag byte, a 4-byte length, then the protobuf message.
        let body: &[u8] = &[0, 0, 0, 0, 3, 0x12, 1, b'k'];
        let request = http::Request::post(format!("http://{addr}/snowline.v1.Snowline/Get"))
            .header("content-type", "application/grpc")
            .header("te", "trailers")
            .body(())
            .unwrap();
        let Ok((response, mut send)) = client.send_request(request, false) else { break };
        let _ = send.send_data(bytes::Bytes::from_static(body), true);
        responses.push(response);
        match client.clone().ready().await {
            Ok(c) => client = c,
            Err(_) => break,
        }
    }
    responses
}

#[tokio::test(flavor = "current_thread")]
async fn clients_that_never_read_or_hold_every_connection_do_not_stop_the_endpoint() {
    let limits = ApiLimits { max_connections: 4, max_streams: 8, ..Default::default() };
    let cluster = common::start::<Cv>(1, 1, limits).await;
    let addr = cluster.grpc(0);
    let mut c = cluster.client(0).await;
    c.put(pb::PutRequest { session: None, key: "k".into(), value: "v".repeat(100_000) }).await.unwrap();
    // Two connections hold as many streams as the endpoint allows each, and never read.
    let mut stuck = Vec::new();
    for _ in 0..2 {
        let responses = tokio::time::timeout(Duration::from_secs(10), never_reading_client(&addr, 50)).await;
        stuck.push(responses.unwrap_or_default());
    }
    assert!(stuck.iter().all(|r| r.len() <= 50));
    // One connection slot is left (the client above holds one): it is served.
    let got = c.get(pb::GetRequest { session: None, key: "k".into() }).await.unwrap().into_inner();
    assert_eq!(got.value.map(|v| v.len()), Some(100_000));
    // A flood of idle connections beyond the limit waits in the accept queue, and the endpoint serves the
    // connection it already has.
    let mut idle = Vec::new();
    for _ in 0..20 {
        idle.push(tokio::net::TcpStream::connect(&addr).await.unwrap());
    }
    let got = c.get(pb::GetRequest { session: None, key: "k".into() }).await.unwrap().into_inner();
    assert!(got.value.is_some());
    drop(idle);
    drop(stuck);
    // Once they are gone, new connections are served again.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mut fresh = tokio::time::timeout(Duration::from_secs(10), cluster.client(0)).await.unwrap();
    fresh.info(pb::InfoRequest {}).await.unwrap();
    cluster.stop().await;
}

#[tokio::test(flavor = "current_thread")]
async fn replies_nobody_reads_are_budgeted_and_dropped_in_time() {
    let limits = ApiLimits { max_pending_replies: 6, reply_timeout: Duration::from_millis(1500), ..Default::default() };
    let cluster = common::start::<Cv>(1, 1, limits).await;
    let addr = cluster.grpc(0);
    let mut c = cluster.client(0).await;
    c.put(pb::PutRequest { session: None, key: "k".into(), value: "v".repeat(100_000) }).await.unwrap();
    // A client opens more never-read calls than the budget: their replies are held, the budget is spent.
    let stuck = tokio::time::timeout(Duration::from_secs(10), never_reading_client(&addr, 8)).await.unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let e = c.get(pb::GetRequest { session: None, key: "k".into() }).await.unwrap_err();
    assert_eq!((e.code(), kind(&e).as_str()), (tonic::Code::ResourceExhausted, "unavailable"), "{e:?}");
    // Past the reply timeout the held replies are dropped and the endpoint serves again, while the
    // hostile connection stays open.
    tokio::time::sleep(Duration::from_millis(1800)).await;
    let got = c.get(pb::GetRequest { session: None, key: "k".into() }).await.unwrap().into_inner();
    assert_eq!(got.value.map(|v| v.len()), Some(100_000));
    drop(stuck);
    cluster.stop().await;
}
