//! Sessions, tokens and interactive transactions through the API.

use crate::common::{self, kind};
use snowline_api::pb::{self, SessionRef};
use snowline_protocols::{Cure, Occ};

fn sref(id: &str) -> Option<SessionRef> {
    Some(SessionRef { id: id.into() })
}

fn kv(k: &str, v: &str) -> pb::KeyValue {
    pb::KeyValue { key: k.into(), value: v.into() }
}

#[tokio::test(flavor = "current_thread")]
async fn a_session_reads_its_own_write_in_another_datacenter_from_its_token() {
    let cluster = common::start::<Cure>(2, 2, Default::default()).await;
    let (mut dc0, mut dc1) = (cluster.client(0).await, cluster.client(1).await);
    let s = dc0.open_session(pb::OpenSessionRequest::default()).await.unwrap().into_inner();
    let put = pb::PutRequest { session: sref(&s.id), key: "k".into(), value: "mine".into() };
    let token = dc0.put(put).await.unwrap().into_inner().meta.unwrap().session_token;
    assert!(!token.is_empty());
    // The session moves to datacenter 1 right away, before replication has had time to run.
    let moved = dc1.open_session(pb::OpenSessionRequest { token }).await.unwrap().into_inner();
    let got = dc1.get(pb::GetRequest { session: sref(&moved.id), key: "k".into() }).await.unwrap().into_inner();
    assert_eq!(got.value.as_deref(), Some("mine"), "read your writes across datacenters");
    // A token of another shape of cluster, or garbage, is refused with a clear error.
    let e = dc1.open_session(pb::OpenSessionRequest { token: b"garbage".to_vec() }).await.unwrap_err();
    assert_eq!(kind(&e), "invalid-argument", "{e:?}");
    cluster.stop().await;
}

#[tokio::test(flavor = "current_thread")]
async fn an_interactive_transaction_commits_and_a_conflicting_one_aborts_with_its_cause() {
    let cluster = common::start::<Occ>(1, 2, Default::default()).await;
    let mut c = cluster.client(0).await;
    let a = c.open_session(pb::OpenSessionRequest::default()).await.unwrap().into_inner().id;
    let b = c.open_session(pb::OpenSessionRequest::default()).await.unwrap().into_inner().id;
    c.put(pb::PutRequest { session: None, key: "x".into(), value: "0".into() }).await.unwrap();
    // Both read x, both write it: the second to commit read a version that is no longer the latest.
    for id in [&a, &b] {
        c.begin(pb::BeginRequest { session: sref(id) }).await.unwrap();
        let r = c.read(pb::ReadRequest { session: sref(id), keys: vec!["x".into()] }).await.unwrap().into_inner();
        assert_eq!(r.reads[0].value.as_deref(), Some("0"));
    }
    c.write(pb::WriteRequest { session: sref(&a), writes: vec![kv("x", "a")] }).await.unwrap();
    // A read of a key the transaction wrote returns the buffered value.
    let own = c.read(pb::ReadRequest { session: sref(&a), keys: vec!["x".into()] }).await.unwrap().into_inner();
    assert_eq!(own.reads[0].value.as_deref(), Some("a"));
    let committed = c.commit(pb::CommitRequest { session: sref(&a) }).await.unwrap().into_inner();
    assert!(committed.meta.unwrap().version.is_some_and(|v| v.time > 0), "the commit names its version");
    c.write(pb::WriteRequest { session: sref(&b), writes: vec![kv("x", "b")] }).await.unwrap();
    let e = c.commit(pb::CommitRequest { session: sref(&b) }).await.unwrap_err();
    assert_eq!((e.code(), kind(&e).as_str()), (tonic::Code::Aborted, "conflict"), "{e:?}");
    assert!(e.metadata().get("snowline-abort-cause").is_some(), "{e:?}");
    // The abort closed the transaction; a retry commits.
    c.begin(pb::BeginRequest { session: sref(&b) }).await.unwrap();
    let r = c.read(pb::ReadRequest { session: sref(&b), keys: vec!["x".into()] }).await.unwrap().into_inner();
    assert_eq!(r.reads[0].value.as_deref(), Some("a"));
    c.write(pb::WriteRequest { session: sref(&b), writes: vec![kv("x", "b")] }).await.unwrap();
    c.commit(pb::CommitRequest { session: sref(&b) }).await.unwrap();
    let got = c.get(pb::GetRequest { session: None, key: "x".into() }).await.unwrap().into_inner();
    assert_eq!(got.value.as_deref(), Some("b"));
    // Transaction steps need an open transaction and a session.
    let e = c.commit(pb::CommitRequest { session: sref(&b) }).await.unwrap_err();
    assert_eq!(kind(&e), "invalid-argument");
    let e = c.begin(pb::BeginRequest { session: None }).await.unwrap_err();
    assert_eq!(kind(&e), "invalid-argument");
    c.close_session(pb::CloseSessionRequest { id: a.clone() }).await.unwrap();
    let e = c.get(pb::GetRequest { session: sref(&a), key: "x".into() }).await.unwrap_err();
    assert_eq!((e.code(), kind(&e).as_str()), (tonic::Code::NotFound, "unknown-session"));
    cluster.stop().await;
}
