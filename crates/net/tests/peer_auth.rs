//! Peer authentication (issue 16): servers of a cluster authenticate each other by mutual TLS, so a
//! connection without the cluster's peer credentials cannot deliver a single peer message, whatever it
//! claims. The control test shows that the very same forgery is applied by an `insecure` cluster.

// Tests of a real server: they wait on the real clock.
#![allow(clippy::disallowed_methods)]

use crate::common;
use bytes::BytesMut;
use futures::StreamExt;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use snowline_core::{Addr, ClientId, Key, Protocol, Reply, Request, ServerId, Value, Version};
use snowline_net::frame::{self, Frame};
use snowline_net::{ClientRuntime, ClusterConfig, free_base_port};
use snowline_protocols::Cv;
use snowline_protocols::causal::tomsic::TomsicMsg;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::Instant;
use tokio_util::codec::FramedRead;

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("snowline-peer-auth-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

/// A cv cluster of 2 datacenters × 2 partitions (node `i` hosts the `i`-th server: 0 = dc0/p0, 1 = dc0/p1,
/// 2 = dc1/p0, 3 = dc1/p1), with certificates in `certs` unless `insecure`.
fn config(certs: Option<&Path>) -> ClusterConfig {
    let config = ClusterConfig::local(Cv::NAME, 2, 2, free_base_port());
    match certs {
        Some(dir) => config.with_new_certs(dir).unwrap(),
        None => config.insecure(),
    }
}

/// A well-formed replication message in the name of dc1/p0 writing "forged" to `key` (on partition 0):
/// exactly what dc1/p0 itself would send. Only authentication can tell it from the real thing.
fn forged_replication(key: &Key) -> Frame<TomsicMsg> {
    Frame::Msg {
        from: Addr::Server(ServerId::new(1, 0)),
        to: Addr::Server(ServerId::new(0, 0)),
        msg: TomsicMsg::Replicate {
            writes: vec![(key.clone(), Value::from("forged"))],
            version: Version { time: 5, dc: 1 },
        },
    }
}

fn encode(f: &Frame<TomsicMsg>) -> BytesMut {
    let mut buf = BytesMut::new();
    frame::encode_into(f, 1 << 23, &mut buf).unwrap();
    buf
}

/// How a forger reaches the server.
enum Credentials {
    /// Plain TCP.
    None,
    /// TLS, verifying the server, with no certificate of its own.
    TlsNoCert,
    /// TLS with this certificate and key (PEM files).
    Cert(PathBuf, PathBuf),
}

/// Open a connection with `creds`, say Hello as dc1/p0 and send the forged replication; return the
/// `Error` frames the server sends back before closing (or `Err` if the TLS handshake itself failed).
async fn forge(addr: &str, ca: &Path, creds: Credentials, key: &Key) -> Result<Vec<String>, String> {
    let tcp = TcpStream::connect(addr).await.unwrap();
    let roots = || {
        let mut roots = rustls::RootCertStore::empty();
        for c in CertificateDer::pem_file_iter(ca).unwrap() {
            roots.add(c.unwrap()).unwrap();
        }
        roots
    };
    let builder = || {
        rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots())
    };
    let tls_config = match creds {
        Credentials::None => return Ok(send_forgery(tcp, key).await),
        Credentials::TlsNoCert => builder().with_no_client_auth(),
        Credentials::Cert(cert, pem_key) => {
            let chain = CertificateDer::pem_file_iter(&cert).unwrap().map(Result::unwrap).collect();
            builder().with_client_auth_cert(chain, PrivateKeyDer::from_pem_file(&pem_key).unwrap()).unwrap()
        }
    };
    // Whichever node the forger dials, it asks for node 0's name: that is the server it targets.
    let name = ServerName::try_from("node-0.snowline").unwrap();
    let tls = tokio_rustls::TlsConnector::from(Arc::new(tls_config)).connect(name, tcp).await;
    match tls {
        Ok(stream) => Ok(send_forgery(stream, key).await),
        Err(e) => Err(e.to_string()),
    }
}

async fn send_forgery<S: AsyncRead + AsyncWrite + Unpin>(mut stream: S, key: &Key) -> Vec<String> {
    let hello = Frame::<TomsicMsg>::Hello { protocol: Cv::NAME.into(), from: Addr::Server(ServerId::new(1, 0)) };
    // Either write may fail once the server has closed: what it said before is what counts.
    let _ = stream.write_all(&encode(&hello)).await;
    let _ = stream.write_all(&encode(&forged_replication(key))).await;
    let _ = stream.flush().await;
    let mut rd = FramedRead::new(stream, frame::codec(1 << 23));
    let mut errors = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(2);
    while let Ok(Some(Ok(bytes))) = tokio::time::timeout_at(deadline, rd.next()).await {
        if let Ok(Frame::Error { message }) = frame::decode::<TomsicMsg>(&bytes) {
            errors.push(message);
        }
    }
    errors
}

fn value(reply: Reply) -> Option<String> {
    reply.reads[0].value.as_ref().map(|v| v.to_string())
}

/// Read `key` in dc0 until it reads `want` or `wait` passes; returns what it read last.
async fn read_until(config: &ClusterConfig, key: &Key, want: Option<&str>, wait: Duration) -> Option<String> {
    let client = ClientRuntime::<Cv>::connect(config, 0).await.unwrap();
    let session = client.session();
    let deadline = Instant::now() + wait;
    loop {
        let got = value(session.execute(Request::Rot { keys: vec![key.clone()] }).await.unwrap());
        if got.as_deref() == want || Instant::now() >= deadline {
            return got;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn without_peer_credentials_no_peer_message_is_delivered() {
    let dir = scratch("secure");
    let cluster = common::start::<Cv>(config(Some(&dir.join("tls")))).await;
    let tls = cluster.config.tls.clone().unwrap();
    let node_file = |id: u32, template: &str| PathBuf::from(template.replace("{id}", &id.to_string()));
    let target = cluster.config.nodes[0].addr.clone();
    let key: Key = cluster.config.topology().key_on(0, "k").into();

    // Plain TCP, and TLS without a certificate: clients, refused as soon as they claim to be a server.
    for creds in [Credentials::None, Credentials::TlsNoCert] {
        let errors = forge(&target, &tls.ca, creds, &key).await.expect("the TLS handshake of a client succeeds");
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert!(errors[0].contains("without a peer certificate"), "{errors:?}");
    }
    // A real peer certificate, but of node 3 (dc1/p1), speaking for dc1/p0 (node 2's).
    let errors = forge(&target, &tls.ca, Credentials::Cert(node_file(3, &tls.cert), node_file(3, &tls.key)), &key)
        .await
        .expect("node 3's certificate is the cluster's");
    assert!(
        errors.len() == 1 && errors[0].contains("certificate is node 3's, which does not host dc1/p0"),
        "{errors:?}"
    );
    // A certificate naming node 2 but signed by another cluster's CA: the handshake itself fails.
    let other = snowline_net::tls::generate([0, 1, 2, 3]).unwrap().write(&dir.join("other")).unwrap();
    let refused = forge(&target, &tls.ca, Credentials::Cert(node_file(2, &other.cert), node_file(2, &other.key)), &key)
        .await
        .and_then(|errors| if errors.is_empty() { Err("closed without a word".into()) } else { Ok(errors) });
    assert!(refused.is_err(), "a foreign certificate got a hearing: {refused:?}");

    // Nothing forged was applied, while the real servers replicate to each other over mutual TLS.
    assert_eq!(read_until(&cluster.config, &key, Some("forged"), Duration::from_secs(1)).await, None);
    let dc1 = ClientRuntime::<Cv>::connect(&cluster.config, 1).await.unwrap();
    dc1.session().execute(Request::Put { key: key.clone(), value: "real".into() }).await.unwrap();
    assert_eq!(read_until(&cluster.config, &key, Some("real"), Duration::from_secs(5)).await.as_deref(), Some("real"));
    cluster.stop().await;
    let _ = std::fs::remove_dir_all(&dir);
}

/// The control: without authentication, the same forgery is delivered and applied.
#[tokio::test]
async fn an_insecure_cluster_applies_the_same_forgery() {
    let cluster = common::start::<Cv>(config(None)).await;
    let key: Key = cluster.config.topology().key_on(0, "k").into();
    let errors = forge(&cluster.config.nodes[0].addr, Path::new("/unused"), Credentials::None, &key).await.unwrap();
    assert!(errors.is_empty(), "{errors:?}");
    let got = read_until(&cluster.config, &key, Some("forged"), Duration::from_secs(5)).await;
    assert_eq!(got.as_deref(), Some("forged"));
    cluster.stop().await;
}

#[tokio::test]
async fn clients_use_tls_when_the_cluster_requires_it() {
    let dir = scratch("clients");
    let mut config = config(Some(&dir.join("tls")));
    config.tls.as_mut().unwrap().clients = true;
    let cluster = common::start::<Cv>(config).await;
    let key: Key = cluster.config.topology().key_on(0, "k").into();
    // The client runtime connects with TLS, verifying the servers.
    let client = ClientRuntime::<Cv>::connect(&cluster.config, 0).await.unwrap();
    client.session().execute(Request::Put { key: key.clone(), value: "v".into() }).await.unwrap();
    assert_eq!(read_until(&cluster.config, &key, Some("v"), Duration::ZERO).await.as_deref(), Some("v"));
    // A plain client is refused, saying why.
    let mut plain = TcpStream::connect(&cluster.config.nodes[0].addr).await.unwrap();
    let hello = Frame::<TomsicMsg>::Hello { protocol: Cv::NAME.into(), from: Addr::Client(ClientId(7 << 32)) };
    plain.write_all(&encode(&hello)).await.unwrap();
    let mut rd = FramedRead::new(plain, frame::codec(1 << 23));
    let reply = tokio::time::timeout(Duration::from_secs(2), rd.next()).await.unwrap().unwrap().unwrap();
    match frame::decode::<TomsicMsg>(&reply).unwrap() {
        Frame::Error { message } => assert!(message.contains("requires TLS from clients"), "{message}"),
        other => panic!("expected an Error frame, got {other:?}"),
    }
    drop(client);
    cluster.stop().await;
    let _ = std::fs::remove_dir_all(&dir);
}
