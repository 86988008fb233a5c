//! What every request meets first, whatever its path: its connection is
//! marked busy until the response is delivered (so the idle timeout never
//! cuts work in progress, see [`super::listener`]), and its `Origin` is
//! checked ([`super::origin`]) before CORS and everything else.
//!
//! One service rather than two axum `from_fn` layers, which boxed their
//! inner service and future on every request (see [`super::endpoint`]).

use std::convert::Infallible;
use std::sync::Arc;
use std::task::{Context, Poll};

use axum::extract::{ConnectInfo, Request};
use axum::response::Response;
use futures_util::future::BoxFuture;
use tower_service::Service;

use super::listener::Busy;
use super::origin::Allowlist;

/// `inner` behind the busy mark and the Origin check.
#[derive(Clone)]
pub(super) struct Edge<S> {
    pub(super) allowlist: Arc<Allowlist>,
    pub(super) inner: S,
}

impl<S> Service<Request> for Edge<S>
where
    S: Service<Request, Response = Response, Error = Infallible> + Clone + Send + 'static,
    S::Future: Send,
{
    type Response = Response;
    type Error = Infallible;
    type Future = BoxFuture<'static, Result<Response, Infallible>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request) -> Self::Future {
        let busy = request
            .extensions()
            .get::<ConnectInfo<Busy>>()
            .map(|ConnectInfo(busy)| busy.enter());
        let refused = self.allowlist.admit(&request).err();
        // The ready service answers this request; a fresh copy waits for
        // the next one's `poll_ready`.
        let fresh = self.inner.clone();
        let mut ready = std::mem::replace(&mut self.inner, fresh);
        Box::pin(async move {
            let response = match refused {
                Some(refusal) => *refusal,
                None => match ready.call(request).await {
                    Ok(response) => response,
                    Err(never) => match never {},
                },
            };
            Ok(match busy {
                Some(busy) => super::drain::hold_until_delivered(response, busy),
                None => response,
            })
        })
    }
}
