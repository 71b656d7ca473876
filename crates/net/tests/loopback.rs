//! In-process integration test: a tiny replicated KV protocol on 2 dcs × 2 partitions, each partition a
//! `run_server` task on its own loopback port, driven through `ClientRuntime`.

use serde::{Deserialize, Serialize};
use snowline_core::{
    Addr, ClientId, ClientNode, Ctx, DcId, InvalidInput, LinkAssumptions, Message, OpError, OpId, Protocol,
    ProtocolConfig, ReadResult, Reply, Request, ServerId, ServerNode, Topology, Version,
};
use snowline_net::frame::{self, Frame};
use snowline_net::{ClientRuntime, ClusterConfig, free_base_port};

use crate::common;
use common::Cluster;
use std::collections::{BTreeMap, HashMap};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::oneshot;
use tokio::time::Instant;

struct Kv;

#[derive(Clone, Debug, Serialize, Deserialize)]
enum KvMsg {
    Put { op: OpId, key: String, value: String },
    Get { op: OpId, key: String },
    PutOk { op: OpId },
    GetOk { op: OpId, key: String, value: Option<String> },
    Replicate { key: String, value: String },
}

impl Message for KvMsg {
    fn kind(&self) -> &'static str {
        match self {
            KvMsg::Put { .. } => "put",
            KvMsg::Get { .. } => "get",
            KvMsg::PutOk { .. } => "put-ok",
            KvMsg::GetOk { .. } => "get-ok",
            KvMsg::Replicate { .. } => "replicate",
        }
    }
}

#[derive(Serialize, Deserialize)]
struct KvServer {
    id: ServerId,
    topology: Topology,
    data: BTreeMap<String, String>,
}

impl ServerNode<Kv> for KvServer {
    fn on_start(&mut self, cx: &mut Ctx<'_, Kv>) {
        cx.set_timer(1_000_000, ()); // exercise timers: a periodic no-op
    }

    fn on_message(&mut self, cx: &mut Ctx<'_, Kv>, from: Addr, msg: KvMsg) -> Result<(), InvalidInput> {
        match msg {
            KvMsg::Put { op, key, value } => {
                self.data.insert(key.clone(), value.clone());
                for s in self.topology.siblings(self.id) {
                    cx.send(s, KvMsg::Replicate { key: key.clone(), value: value.clone() });
                }
                cx.send(from, KvMsg::PutOk { op });
            }
            KvMsg::Get { op, key } => {
                let value = self.data.get(&key).cloned();
                cx.send(from, KvMsg::GetOk { op, key, value });
            }
            KvMsg::Replicate { key, value } => {
                self.data.insert(key, value);
            }
            KvMsg::PutOk { .. } | KvMsg::GetOk { .. } => {}
        }
        Ok(())
    }

    fn on_timer(&mut self, cx: &mut Ctx<'_, Kv>, _: ()) {
        cx.set_timer(50_000_000, ());
    }

    fn stored_versions(&self) -> usize {
        self.data.len()
    }
}

struct KvClient {
    dc: DcId,
    topology: Topology,
}

impl ClientNode<Kv> for KvClient {
    fn on_request(&mut self, cx: &mut Ctx<'_, Kv>, op: OpId, request: Request) {
        match request {
            Request::Put { key, value } => {
                let to = self.topology.server_of(self.dc, &key);
                cx.send(to, KvMsg::Put { op, key: key.to_string(), value: value.to_string() });
            }
            Request::Rot { keys } if keys.len() == 1 => {
                let to = self.topology.server_of(self.dc, &keys[0]);
                cx.send(to, KvMsg::Get { op, key: keys[0].to_string() });
            }
            _ => cx.complete(op, Err(OpError::Rejected("unsupported".into()))),
        }
    }

    fn on_message(&mut self, cx: &mut Ctx<'_, Kv>, _from: Addr, msg: KvMsg) {
        match msg {
            KvMsg::PutOk { op } => cx.complete(op, Ok(Reply::default())),
            KvMsg::GetOk { op, key, value } => {
                let read = ReadResult {
                    key: key.into(),
                    value: value.map(Into::into),
                    version: Version::INITIAL,
                    versions_skipped: 0,
                };
                cx.complete(op, Ok(Reply { reads: vec![read], ..Reply::default() }));
            }
            _ => {}
        }
    }
}

impl Protocol for Kv {
    const NAME: &'static str = "kv-test";
    type Msg = KvMsg;
    type Timer = ();
    type Server = KvServer;
    type Client = KvClient;
    const OFFERS: snowline_core::Offers = snowline_core::Offers::CAUSAL;

    fn links() -> LinkAssumptions {
        LinkAssumptions { fifo: true }
    }

    fn server(id: ServerId, topology: Topology, _: &ProtocolConfig) -> KvServer {
        KvServer { id, topology, data: BTreeMap::new() }
    }

    fn client(_: ClientId, dc: DcId, topology: Topology, _: &ProtocolConfig) -> KvClient {
        KvClient { dc, topology }
    }
}

const LATENCY_MS: f64 = 60.0;

async fn start_cluster() -> Cluster {
    // Servers authenticate each other by mutual TLS, as in every cluster that is not `insecure`.
    let certs = std::env::temp_dir().join(format!("snowline-loopback-{}-{}", std::process::id(), free_base_port()));
    let mut config = ClusterConfig::local(Kv::NAME, 2, 2, free_base_port())
        .with_uniform_latency_ms(LATENCY_MS)
        .with_new_certs(&certs)
        .unwrap();
    config.protocol_config.max_value_bytes = 1024;
    common::start::<Kv>(config).await
}

fn put(key: &str, value: &str) -> Request {
    Request::Put { key: key.into(), value: value.into() }
}

fn get(key: &str) -> Request {
    Request::Rot { keys: vec![key.into()] }
}

fn read_value(reply: &Reply) -> Option<String> {
    reply.reads[0].value.as_ref().map(|v| v.to_string())
}

#[tokio::test]
async fn replication_latency_garbage_and_limits() {
    let cluster = start_cluster().await;
    let config = &cluster.config;
    let dc0 = ClientRuntime::<Kv>::connect(config, 0).await.unwrap();
    let dc1 = ClientRuntime::<Kv>::connect(config, 1).await.unwrap();
    let s0 = dc0.session();
    let s1 = dc1.session();

    // Keys on both partitions; writes in dc0 become visible in dc1 after the emulated latency.
    let topo = config.topology();
    for p in 0..2 {
        let key = topo.key_on(p, "k");
        assert_eq!(read_value(&s1.execute(get(&key)).await.unwrap()), None);
        let start = Instant::now();
        s0.execute(put(&key, "v1")).await.unwrap();
        assert_eq!(read_value(&s0.execute(get(&key)).await.unwrap()).as_deref(), Some("v1"));
        loop {
            if read_value(&s1.execute(get(&key)).await.unwrap()).as_deref() == Some("v1") {
                break;
            }
            assert!(start.elapsed() < Duration::from_secs(5), "replication to dc1 never arrived");
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        let took = start.elapsed();
        assert!(took >= Duration::from_millis(LATENCY_MS as u64), "cross-dc delivery took only {took:?}");
    }

    // Many concurrent sessions share the runtime's connections.
    let mut tasks = Vec::new();
    for i in 0..20 {
        let s = dc0.session();
        tasks.push(async move {
            let key = format!("c{i}");
            s.execute(put(&key, &format!("x{i}"))).await.unwrap();
            read_value(&s.execute(get(&key)).await.unwrap())
        });
    }
    let results = futures::future::join_all(tasks).await;
    for (i, r) in results.into_iter().enumerate() {
        assert_eq!(r, Some(format!("x{i}")));
    }

    // Garbage on a raw connection: that connection gets an Error frame and is closed...
    let addr = &config.nodes[0].addr;
    let mut raw = TcpStream::connect(addr).await.unwrap();
    raw.write_all(b"GET / HTTP/1.1\r\nHost: snowline\r\n\r\n").await.unwrap();
    let message = read_error_and_eof(&mut raw).await;
    assert!(message.contains("bad frame"), "{message}");
    // ... a well-framed payload with a wrong version too ...
    let mut raw = TcpStream::connect(addr).await.unwrap();
    raw.write_all(&[0, 0, 0, 3, 9, 9, 9]).await.unwrap();
    let message = read_error_and_eof(&mut raw).await;
    assert!(message.contains("wire version 9"), "{message}");
    // ... and a peer speaking another protocol is refused clearly.
    let mut raw = TcpStream::connect(addr).await.unwrap();
    let mut buf = bytes::BytesMut::new();
    let hello = Frame::<KvMsg>::Hello { protocol: "other".into(), from: Addr::Client(ClientId(1)) };
    frame::encode_into(&hello, 1 << 20, &mut buf).unwrap();
    raw.write_all(&buf).await.unwrap();
    let message = read_error_and_eof(&mut raw).await;
    assert!(message.contains("protocol mismatch") && message.contains("kv-test"), "{message}");
    // The other clients keep working.
    let key = topo.key_on(0, "after");
    s0.execute(put(&key, "still")).await.unwrap();
    assert_eq!(read_value(&s0.execute(get(&key)).await.unwrap()).as_deref(), Some("still"));

    // Oversized values are rejected before anything is sent.
    let err = s0.execute(put("big", &"x".repeat(2000))).await.unwrap_err();
    match &err {
        OpError::Rejected(msg) => assert!(msg.contains("2000 bytes") && msg.contains("max_value_bytes"), "{msg}"),
        other => panic!("expected a rejection, got {other:?}"),
    }

    drop((s0, s1, dc0, dc1));
    cluster.stop().await;
}

/// Read frames until EOF; return the Error frame's message.
async fn read_error_and_eof(raw: &mut TcpStream) -> String {
    let mut bytes = Vec::new();
    tokio::time::timeout(Duration::from_secs(5), raw.read_to_end(&mut bytes))
        .await
        .expect("server did not close the connection")
        .expect("read failed");
    assert!(bytes.len() > 4, "no error frame before close");
    let len = u32::from_be_bytes(bytes[..4].try_into().unwrap()) as usize;
    match frame::decode::<KvMsg>(&bytes[4..4 + len]).unwrap() {
        Frame::Error { message } => message,
        other => panic!("expected an Error frame, got {other:?}"),
    }
}

#[tokio::test]
async fn client_reports_unreachable_servers_and_timeouts() {
    // Nothing listens on these ports.
    let config = ClusterConfig::local(Kv::NAME, 1, 1, free_base_port()).insecure();
    let rt = ClientRuntime::<Kv>::connect(&config, 0).await.unwrap().with_timeout(Duration::from_secs(3));
    let s = rt.session();
    let started = Instant::now();
    let err = s.execute(put("k", "v")).await.unwrap_err();
    assert!(matches!(&err, OpError::Unknown(m) if m.contains("cannot connect")), "{err:?}");
    assert!(started.elapsed() < Duration::from_secs(3));

    // A server that never answers: the timeout applies.
    let listener = tokio::net::TcpListener::bind(&config.nodes[0].addr).await.unwrap();
    let silent = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((stream, _)) = listener.accept().await {
            held.push(stream);
        }
    });
    let rt = ClientRuntime::<Kv>::connect(&config, 0).await.unwrap().with_timeout(Duration::from_millis(200));
    let err = rt.session().execute(put("k", "v")).await.unwrap_err();
    assert!(matches!(&err, OpError::Unknown(m) if m.contains("timed out after")), "{err:?}");
    silent.abort();

    // Wrong protocol or dc are errors at connect.
    let mut other = config.clone();
    other.protocol = "cv".into();
    assert!(ClientRuntime::<Kv>::connect(&other, 0).await.is_err());
    assert!(ClientRuntime::<Kv>::connect(&config, 5).await.is_err());
}

#[tokio::test]
async fn sessions_get_unique_ids() {
    let config = ClusterConfig::local(Kv::NAME, 1, 1, free_base_port()).insecure();
    let a = ClientRuntime::<Kv>::connect(&config, 0).await.unwrap();
    let b = ClientRuntime::<Kv>::connect(&config, 0).await.unwrap();
    let ids: HashMap<u64, ()> =
        (0..100).flat_map(|_| [a.session().id().0, b.session().id().0]).map(|i| (i, ())).collect();
    assert_eq!(ids.len(), 200);
}

#[tokio::test]
async fn queued_messages_survive_a_peer_restart() {
    let mut cluster = start_cluster().await;
    let config = cluster.config.clone();
    let dc0 = ClientRuntime::<Kv>::connect(&config, 0).await.unwrap();
    let dc1 = ClientRuntime::<Kv>::connect(&config, 1).await.unwrap();
    let (s0, s1) = (dc0.session(), dc1.session());
    let key = config.topology().key_on(0, "r");
    let sibling = config.node_hosting(ServerId::new(1, 0)).unwrap().id as usize;

    // Stop dc1/p0; a write in dc0 queues its replication message while the peer is down.
    let (tx, _) = oneshot::channel::<()>();
    let _ = std::mem::replace(&mut cluster.stops[sibling], tx).send(());
    let h = std::mem::replace(&mut cluster.handles[sibling], tokio::spawn(async { Ok(()) }));
    h.await.unwrap().unwrap();
    s0.execute(put(&key, "queued")).await.unwrap();
    tokio::time::sleep(Duration::from_millis(150)).await;

    // Restart it (fresh state): the queued replication arrives.
    (cluster.stops[sibling], cluster.handles[sibling]) = common::spawn_node::<Kv>(&config, sibling as u32);
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        if let Ok(reply) = s1.execute(get(&key)).await
            && read_value(&reply).as_deref() == Some("queued")
        {
            break;
        }
        assert!(Instant::now() < deadline, "queued replication never reached the restarted node");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    drop((s0, s1, dc0, dc1));
    cluster.stop().await;
}
