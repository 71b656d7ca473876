//! Every protocol's client messages either get an answer or say they do not (`Message::expects_reply`): a
//! server counts a client connection's requests until answered and stops reading it at its budget, so a
//! message that is never answered but counted would stall every session of that connection once enough of
//! them pile up (2PL's release of read locks did, after about 4,096 reads). Each protocol runs a few hundred
//! operations over one connection per server whose budget is 16 requests: a leak stalls it within 16.

// Tests of a real server: they wait on the real clock.
#![allow(clippy::disallowed_methods)]

use snowline_core::{Protocol, Request, Termination};
use snowline_net::limits::ConnLimits;
use snowline_net::server::run_server_limited;
use snowline_net::{ClientRuntime, ClusterConfig, free_base_port};
use std::time::Duration;
use tokio::net::TcpStream;
use tokio::sync::watch;

async fn run_one<P: Protocol>(termination: Termination) -> Result<(), String> {
    let topology = snowline_core::Topology::new(1, 2);
    if P::check_topology(&topology).is_err() {
        return Ok(());
    }
    let mut config = ClusterConfig::local_replicated(P::NAME, topology, free_base_port()).unwrap().insecure();
    config.protocol_config.termination = termination;
    let limits = ConnLimits { max_requests_in_flight: 16, ..Default::default() };
    let (stop, rx) = watch::channel(false);
    let mut servers = Vec::new();
    for node in &config.nodes {
        let mut rx = rx.clone();
        let stopped = async move {
            let _ = rx.wait_for(|s| *s).await;
        };
        servers.push(tokio::spawn(run_server_limited::<P>(config.clone(), node.id, None, limits.clone(), stopped)));
    }
    for node in &config.nodes {
        while TcpStream::connect(&node.addr).await.is_err() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
    let client = ClientRuntime::<P>::connect(&config, 0).await.unwrap().with_timeout(Duration::from_secs(5));
    let session = client.session();
    let offers = P::OFFERS;
    let mut result = Ok(());
    'ops: for i in 0..200 {
        let key: snowline_core::Key = format!("k{}", i % 7).into();
        // Another key: with two partitions, many pairs span both, so a transaction over the two has two
        // participants (two-phase commit's `Begin` goes to both and only the coordinator answers).
        let other: snowline_core::Key = format!("k{}", (i + 3) % 7).into();
        let mut steps: Vec<Request> = Vec::new();
        if offers.read_only {
            steps.push(Request::Rot { keys: vec![key.clone()] });
        }
        if offers.blind_writes {
            steps.push(Request::Put { key: key.clone(), value: format!("v{i}").into() });
        }
        if offers.interactive {
            steps.push(Request::Begin);
            steps.push(Request::Read { keys: vec![key.clone()] });
            steps.push(Request::Commit { writes: vec![(key.clone(), format!("t{i}").into())] });
            steps.push(Request::Begin);
            steps.push(Request::Read { keys: vec![key.clone()] });
            steps.push(Request::Commit { writes: vec![] });
            steps.push(Request::Begin);
            steps.push(Request::Read { keys: vec![key.clone()] });
            steps.push(Request::Read { keys: vec![other.clone()] });
            let writes = vec![(key.clone(), format!("u{i}").into()), (other.clone(), format!("u{i}").into())];
            steps.push(Request::Commit { writes });
        } else if offers.write_transactions && offers.blind_writes {
            let writes = vec![(key.clone(), format!("u{i}").into()), (other.clone(), format!("u{i}").into())];
            steps.push(Request::Update { writes });
        }
        for step in steps {
            let kind = step.kind();
            match session.execute(step).await {
                Ok(_) | Err(snowline_core::OpError::Aborted(_)) => {}
                Err(e) => {
                    result = Err(format!("{}: operation {i}'s {kind} failed: {e}", P::NAME));
                    break 'ops;
                }
            }
        }
    }
    let _ = stop.send(true);
    for s in servers {
        let _ = s.await;
    }
    result
}

#[tokio::test(flavor = "current_thread")]
async fn no_protocol_leaves_client_messages_counted_and_unanswered() {
    let mut failures = Vec::new();
    for entry in snowline_protocols::PROTOCOLS {
        let outcome =
            snowline_protocols::with_protocol!(entry.name, P => run_one::<P>(Termination::Multicast).await).unwrap();
        if let Err(e) = outcome {
            failures.push(e);
        }
    }
    // The Jessy family terminates by two-phase commit too (`protocol_config.termination`).
    for name in ["nmsi", "rc", "ser", "us", "si", "psi"] {
        let outcome = snowline_protocols::with_protocol!(name, P => run_one::<P>(Termination::TwoPc).await).unwrap();
        if let Err(e) = outcome {
            failures.push(format!("{e} (2pc termination)"));
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}
