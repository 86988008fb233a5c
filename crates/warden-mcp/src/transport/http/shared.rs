//! rmcp's HTTP service behind one `Arc`.
//!
//! axum clones a route's service for every request, and rmcp's service
//! clones itself again in `call`; each clone copies its configuration (the
//! allowed-hosts list) and takes a cancellation-token handle, whose count
//! lives behind a mutex shared by every request. Measured under
//! `http_bench`, those clones and drops were a visible share of each
//! request's server CPU, on the direct path too (it sits in front of the
//! route). Behind an `Arc`, a clone is one atomic increment.

use std::convert::Infallible;
use std::sync::Arc;
use std::task::{Context, Poll};

use axum::body::Body;
use axum::http::Request;
use axum::response::{IntoResponse, Response};
use futures_util::future::BoxFuture;
use rmcp::transport::streamable_http_server::StreamableHttpService;
use rmcp::transport::streamable_http_server::session::SessionManager;

/// `StreamableHttpService` shared, not copied, per request.
pub(super) struct Shared<S, M>(Arc<StreamableHttpService<S, M>>);

impl<S, M> Shared<S, M> {
    pub(super) fn new(service: StreamableHttpService<S, M>) -> Self {
        Self(Arc::new(service))
    }
}

impl<S, M> Clone for Shared<S, M> {
    fn clone(&self) -> Self {
        Self(self.0.clone())
    }
}

impl<S, M> tower_service::Service<Request<Body>> for Shared<S, M>
where
    S: rmcp::ServerHandler + Send + 'static,
    M: SessionManager,
{
    type Response = Response;
    type Error = Infallible;
    type Future = BoxFuture<'static, Result<Response, Infallible>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<Body>) -> Self::Future {
        let service = self.0.clone();
        Box::pin(async move { Ok(service.handle(request).await.into_response()) })
    }
}
