//! Requests for the MCP path reach its endpoint without the router.
//!
//! The MCP path is the one path that carries load, and axum's `Router`
//! cost every request on it a route match, a boxed copy of the nested
//! endpoint and a boxed future before the endpoint's own steps ran.
//! A request whose path is exactly [`super::MCP_PATH`] now goes straight
//! to those steps ([`super::endpoint`]); every other path (health, OAuth
//! metadata, `/mcp/…`, the fallback) still goes through the router, which
//! nests the same endpoint. Both sit inside the same outer layers (the
//! busy mark and the Origin check of [`super::edge`], CORS), so no request
//! sees a different answer.

use std::convert::Infallible;
use std::task::{Context, Poll};

use axum::body::Body;
use axum::http::Request;
use axum::response::Response;
use futures_util::future::Either;
use tower_service::Service;

/// `endpoint` for requests on exactly the MCP path, `rest` (the router)
/// for every other.
#[derive(Clone)]
pub(super) struct McpFirst<E, R> {
    pub(super) endpoint: E,
    pub(super) rest: R,
}

impl<E, R> Service<Request<Body>> for McpFirst<E, R>
where
    E: Service<Request<Body>, Response = Response, Error = Infallible>,
    R: Service<Request<Body>, Response = Response, Error = Infallible>,
{
    type Response = Response;
    type Error = Infallible;
    type Future = Either<E::Future, R::Future>;

    /// Ready when both are (the endpoint and axum's router always are), so
    /// `call` may pick either.
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        std::task::ready!(self.endpoint.poll_ready(cx))?;
        self.rest.poll_ready(cx)
    }

    fn call(&mut self, request: Request<Body>) -> Self::Future {
        if request.uri().path() == super::MCP_PATH {
            Either::Left(self.endpoint.call(request))
        } else {
            Either::Right(self.rest.call(request))
        }
    }
}
