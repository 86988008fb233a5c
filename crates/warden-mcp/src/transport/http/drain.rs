//! What a draining server waits for: MCP POST exchanges whose response has
//! not been delivered yet.
//!
//! Counted at the HTTP layer, not in the handler: a tool call's answer is
//! still on its way (an SSE stream, a JSON body) after the handler returns,
//! and closing the sessions at that moment would lose it. Each POST holds
//! an entry until its response body ends or is dropped. Standalone GET
//! streams are not counted: they never end by themselves.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};

use axum::body::{Body, Bytes, HttpBody};
use axum::extract::Request;
use axum::http::Method;
use axum::response::Response;
use tokio::sync::Notify;

/// MCP exchanges in progress.
#[derive(Debug, Default)]
pub(super) struct InFlight {
    count: AtomicUsize,
    idle: Notify,
}

/// One exchange in progress; dropping it ends the exchange.
pub(super) struct Entered(Arc<InFlight>);

impl InFlight {
    fn enter(self: &Arc<Self>) -> Entered {
        self.count.fetch_add(1, Ordering::SeqCst);
        Entered(self.clone())
    }

    fn count(&self) -> usize {
        self.count.load(Ordering::SeqCst)
    }

    /// Waits until no exchange is in progress or `deadline` passes;
    /// returns how many were still in progress.
    pub(crate) async fn wait_idle(&self, deadline: tokio::time::Instant) -> usize {
        loop {
            let idle = self.idle.notified();
            if self.count() == 0 {
                return 0;
            }
            if tokio::time::timeout_at(deadline, idle).await.is_err() {
                return self.count();
            }
        }
    }
}

impl Drop for Entered {
    fn drop(&mut self) {
        if self.0.count.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.0.idle.notify_waiters();
        }
    }
}

/// A response body holding `guard` until it ends (an exchange's entry, a
/// connection's busy mark).
struct Tracked<G> {
    inner: Body,
    _guard: G,
}

impl<G: Send + Unpin + 'static> HttpBody for Tracked<G> {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.get_mut().inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

impl InFlight {
    /// The endpoint's step: counts a POST until the caller drops the entry
    /// with its delivered response (`None` for other methods).
    pub(super) fn track(self: &Arc<Self>, request: &Request) -> Option<Entered> {
        (request.method() == Method::POST).then(|| self.enter())
    }
}

/// The endpoint's step while the server drains: a request without a
/// session (an `initialize`, or stateless 2026-07-28 work) is answered 503
/// `draining` with `Retry-After`, so the client moves to another node or
/// retries after the restart; requests on open sessions (a running call's
/// cancellation, a task poll) are still served until the grace ends.
pub(super) fn refuse_new_work(
    health: &super::health::Health,
    request: &Request,
) -> Result<(), super::refusal::Refused> {
    let new_work = request.method() == Method::POST && !request.headers().contains_key("mcp-session-id");
    if !(new_work && health.draining.load(Ordering::SeqCst)) {
        return Ok(());
    }
    Err(Box::new(super::refusal::refuse(
        axum::http::StatusCode::SERVICE_UNAVAILABLE,
        warden_core::error::codes::DRAINING,
        "this server is shutting down (SIGTERM) and takes no new work; retry on another node or after its \
         restart",
        Some("5"),
    )))
}

/// `response` with `guard` held until its body has been delivered (or dropped).
pub(super) fn hold_until_delivered<G: Send + Unpin + 'static>(response: Response, guard: G) -> Response {
    response.map(|inner| Body::new(Tracked { inner, _guard: guard }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn waits_for_the_last_exchange() {
        let in_flight = Arc::new(InFlight::default());
        let entered = in_flight.enter();
        let release = tokio::spawn(async move {
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            drop(entered);
        });
        let far = tokio::time::Instant::now() + std::time::Duration::from_secs(5);
        assert_eq!(in_flight.wait_idle(far).await, 0);
        release.await.unwrap();
        let _stuck = in_flight.enter();
        let soon = tokio::time::Instant::now() + std::time::Duration::from_millis(20);
        assert_eq!(in_flight.wait_idle(soon).await, 1);
    }
}
