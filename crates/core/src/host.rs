//! The one way every runtime runs a node's handler (the driver contract of [`crate::protocol`], steps 2
//! and 3): [`NodeInput`] is what a node may be fed, [`serve`] and [`drive`] feed it to a server or a client
//! node, and [`audit`] checks what the handler emitted against the contract before the runtime carries it
//! out. The simulator, the networked server, the client library and the durable host (`snowline-storage`)
//! all call these, so a handler runs, and a breach of the contract is found and reported, the same way in
//! every runtime; only carrying the audited effects out (virtual time, sockets, a log) differs.

use crate::ids::{Addr, OpId, ServerId};
use crate::protocol::{ClientNode, Ctx, Effects, Message, Protocol, ServerNode};
use crate::request::Request;
use crate::topology::Topology;
use crate::validate::InvalidInput;
use std::fmt;

/// One input to a node.
#[derive(Debug)]
pub enum NodeInput<P: Protocol> {
    /// `on_start`, once, before anything else.
    Start,
    Message(Addr, P::Msg),
    Timer(P::Timer),
    /// An application's operation (clients only).
    Request(OpId, Request),
}

/// A handler (or a host) broke the driver contract: a protocol bug, never the network's input. Every
/// runtime drops the offending effect and reports the violation through its own channel: the simulator
/// panics (a test fails at the seed that shows it), the networked runtime logs and counts it
/// (`snowline_contract_violations_total`) and keeps serving.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ContractViolation {
    /// A server completed an application operation; only clients have operations.
    ServerCompleted { server: Addr, op: OpId },
    /// A message to a server the topology does not have.
    UnknownServer { from: Addr, to: ServerId, kind: &'static str },
    /// A host fed an application request to a server.
    RequestToServer { server: Addr },
}

impl fmt::Display for ContractViolation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::ServerCompleted { server, op } => {
                write!(f, "server {server} completed operation {op:?}; only clients complete operations")
            }
            Self::UnknownServer { from, to, kind } => {
                write!(f, "{from} sent a {kind} message to server {to}, which the topology does not have")
            }
            Self::RequestToServer { server } => write!(f, "an application request was fed to server {server}"),
        }
    }
}

impl std::error::Error for ContractViolation {}

/// Feeds `input` to server node `node` (`me`). `Err` carries a message the server refused as invalid
/// ([`ServerNode::on_message`]); effects emitted before the refusal stay in `cx` and are carried out.
pub fn serve<P: Protocol>(
    node: &mut P::Server,
    me: Addr,
    cx: &mut Ctx<'_, P>,
    input: NodeInput<P>,
) -> Result<Option<InvalidInput>, ContractViolation> {
    match input {
        NodeInput::Start => node.on_start(cx),
        NodeInput::Message(from, msg) => return Ok(node.on_message(cx, from, msg).err()),
        NodeInput::Timer(t) => node.on_timer(cx, t),
        NodeInput::Request(..) => return Err(ContractViolation::RequestToServer { server: me }),
    }
    Ok(None)
}

/// Feeds `input` to client node `node`.
pub fn drive<P: Protocol>(node: &mut P::Client, cx: &mut Ctx<'_, P>, input: NodeInput<P>) {
    match input {
        NodeInput::Start => node.on_start(cx),
        NodeInput::Message(from, msg) => node.on_message(cx, from, msg),
        NodeInput::Timer(t) => node.on_timer(cx, t),
        NodeInput::Request(op, request) => node.on_request(cx, op, request),
    }
}

/// Checks the effects a handler of node `me` emitted against the driver contract, removes the ones that
/// break it and returns why. What stays is for the runtime to carry out, in order.
pub fn audit<P: Protocol>(me: Addr, topology: &Topology, effects: &mut Effects<P>) -> Vec<ContractViolation> {
    let mut violations = Vec::new();
    if matches!(me, Addr::Server(_)) {
        violations
            .extend(effects.completions.drain(..).map(|(op, _)| ContractViolation::ServerCompleted { server: me, op }));
    }
    if effects.sends.iter().any(|(to, _)| matches!(to, Addr::Server(s) if !topology.contains(*s))) {
        effects.sends.retain(|(to, msg)| match to {
            Addr::Server(s) if !topology.contains(*s) => {
                violations.push(ContractViolation::UnknownServer { from: me, to: *s, kind: msg.kind() });
                false
            }
            _ => true,
        });
    }
    violations
}
