//! The protocol's client runtime behind object-safe traits: everything above this module is compiled once,
//! whatever the protocol (build time: the service and tonic's generated server are large).

use futures::future::BoxFuture;
use snowline_core::{OpError, Protocol, Reply, Request};
use snowline_net::{ClientRuntime, Session};
use std::sync::Arc;
use std::time::Duration;

/// A client runtime of some protocol: opens sessions.
pub trait Backend: Send + Sync + 'static {
    /// A new session, fresh (`saved` empty) or carrying on from a saved one.
    fn open(&self, saved: &[u8]) -> Result<Arc<dyn DynSession>, String>;
}

/// One session of a [`Backend`].
pub trait DynSession: Send + Sync + 'static {
    /// Run `request`, giving up after `timeout` (outcome unknown).
    fn execute(&self, request: Request, timeout: Duration) -> BoxFuture<'_, Result<Reply, OpError>>;
    /// What a later session needs to carry on from this one (`ClientNode::save_session`).
    fn save(&self) -> Vec<u8>;
}

impl<P: Protocol> Backend for ClientRuntime<P> {
    fn open(&self, saved: &[u8]) -> Result<Arc<dyn DynSession>, String> {
        Ok(Arc::new(self.session_from(saved)?))
    }
}

impl<P: Protocol> DynSession for Session<P> {
    fn execute(&self, request: Request, timeout: Duration) -> BoxFuture<'_, Result<Reply, OpError>> {
        Box::pin(self.execute_within(request, timeout))
    }

    fn save(&self) -> Vec<u8> {
        Session::save(self)
    }
}
