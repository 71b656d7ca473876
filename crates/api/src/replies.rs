//! The endpoint-wide budget for calls whose replies have not been delivered: a tower layer around the
//! service that takes a permit per call and holds it in the reply's body until the body is sent (or the
//! connection goes). A call beyond the budget is refused at once (RESOURCE_EXHAUSTED). A reply nobody
//! reads (an HTTP/2 window kept at zero) is dropped after [`crate::ApiLimits::reply_timeout`], freeing its
//! memory and its permit; its stream then ends with an error if it is ever read. So what undelivered
//! replies hold is at most `max_pending_replies` × the largest message, whatever the clients do.

use bytes::Bytes;
use futures::future::BoxFuture;
use http_body::{Body, Frame, SizeHint};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinHandle;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The layer: one budget for every connection of the endpoint.
#[derive(Clone)]
pub struct ReplyBudget {
    permits: Arc<Semaphore>,
    max: usize,
    timeout: Duration,
}

impl ReplyBudget {
    pub fn new(max: usize, timeout: Duration) -> Self {
        Self { permits: Arc::new(Semaphore::new(max.max(1))), max: max.max(1), timeout }
    }
}

impl<S> tower::Layer<S> for ReplyBudget {
    type Service = Budgeted<S>;

    fn layer(&self, inner: S) -> Budgeted<S> {
        Budgeted { inner, budget: self.clone() }
    }
}

#[derive(Clone)]
pub struct Budgeted<S> {
    inner: S,
    budget: ReplyBudget,
}

impl<S, Req, B> tower::Service<Req> for Budgeted<S>
where
    S: tower::Service<Req, Response = http::Response<B>>,
    S::Future: Send + 'static,
    B: Body<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    type Response = http::Response<Held<B>>;
    type Error = S::Error;
    type Future = BoxFuture<'static, Result<Self::Response, S::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Req) -> Self::Future {
        let Ok(permit) = self.budget.permits.clone().try_acquire_owned() else {
            let status = crate::errors::exhausted(format!(
                "the endpoint holds {} calls whose replies are not delivered yet, its limit: retry shortly",
                self.budget.max
            ));
            return Box::pin(async move { Ok(status.into_http()) });
        };
        let call = self.inner.call(request);
        let timeout = self.budget.timeout;
        Box::pin(async move {
            let response = call.await?;
            Ok(response.map(|body| Held::new(body, permit, timeout)))
        })
    }
}

/// The body and its permit, until sent, dropped, or taken by the timer.
type Slot<B> = Arc<Mutex<Option<(Pin<Box<B>>, OwnedSemaphorePermit)>>>;

/// A reply's body holding its call's permit; dropped by a timer if not sent in time.
pub struct Held<B> {
    inner: Slot<B>,
    reaper: Option<JoinHandle<()>>,
    /// This body was emptied by the timer: say so once.
    reaped: bool,
}

impl<B> Default for Held<B> {
    /// An empty body (the refusals' trailers-only responses).
    fn default() -> Self {
        Self { inner: Arc::new(Mutex::new(None)), reaper: None, reaped: true }
    }
}

impl<B: Send + 'static> Held<B> {
    fn new(body: B, permit: OwnedSemaphorePermit, timeout: Duration) -> Self {
        let inner = Arc::new(Mutex::new(Some((Box::pin(body), permit))));
        let weak = Arc::downgrade(&inner);
        let reaper = tokio::spawn(async move {
            tokio::time::sleep(timeout).await;
            if let Some(slot) = weak.upgrade() {
                // Dropped here, not in the body: nobody may ever poll it again.
                let taken = slot.lock().unwrap_or_else(|e| e.into_inner()).take();
                drop(taken);
            }
        });
        Self { inner, reaper: Some(reaper), reaped: false }
    }

    fn finish(&mut self) {
        self.inner.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(r) = self.reaper.take() {
            r.abort();
        }
    }
}

impl<B> Drop for Held<B> {
    fn drop(&mut self) {
        if let Some(r) = self.reaper.take() {
            r.abort();
        }
    }
}

impl<B> Body for Held<B>
where
    B: Body<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let polled = {
            let mut slot = self.inner.lock().unwrap_or_else(|e| e.into_inner());
            slot.as_mut().map(|(body, _)| body.as_mut().poll_frame(cx))
        };
        match polled {
            Some(Poll::Ready(None)) => {
                self.finish();
                Poll::Ready(None)
            }
            Some(Poll::Ready(Some(Err(e)))) => {
                self.finish();
                Poll::Ready(Some(Err(e.into())))
            }
            Some(other) => other.map(|f| f.map(|r| r.map_err(Into::into))),
            None if self.reaped => Poll::Ready(None),
            None => {
                self.reaped = true;
                Poll::Ready(Some(Err("the reply was not read in time and was dropped".into())))
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        match self.inner.lock().unwrap_or_else(|e| e.into_inner()).as_ref() {
            Some((body, _)) => body.is_end_stream(),
            None => self.reaped,
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self.inner.lock().unwrap_or_else(|e| e.into_inner()).as_ref() {
            Some((body, _)) => body.size_hint(),
            None => SizeHint::with_exact(0),
        }
    }
}
