//! The MCP endpoint: its steps, in order, in one service.
//!
//! ```text
//!  Host ─► authentication ─► principal's requests ─► body pace ─► drain refusal
//!       ─► in-flight count ─► session bounds ─► direct path ─► rmcp
//!       (─► its refusals in JSON-RPC's terms)
//! ```
//!
//! Each step is a method of the state it keeps (in its own module), which
//! either passes the request on or answers it. They were axum `from_fn`
//! layers: each boxed its inner service and its future on every request
//! and cloned the rest of the chain, and each step that held something
//! until the response was delivered wrapped the body in a box of its own.
//! Here a request costs one boxed future and at most one wrapped body, and
//! the order of the steps is read in one function ([`Steps::admitted`]).

use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;
use std::task::{Context, Poll};

use axum::body::Body;
use axum::extract::Request;
use axum::http::{Method, StatusCode};
use axum::response::{IntoResponse, Response};
use futures_util::future::BoxFuture;
use tower::ServiceExt;
use tower_service::Service;

use super::refusal::Refused;
use super::{auth, body, direct, drain, health, host, malformed, requests, sessions};

/// What the endpoint's steps keep, and `mcp`, rmcp's service, last.
pub(super) struct Steps<M> {
    pub(super) hosts: host::Hosts,
    /// `None`: requests act for the local operator.
    pub(super) auth: Option<Arc<auth::Auth>>,
    pub(super) requests: Arc<requests::PrincipalRequests>,
    pub(super) pace: body::BodyPace,
    pub(super) health: Arc<health::Health>,
    pub(super) in_flight: Arc<drain::InFlight>,
    pub(super) sessions: Arc<sessions::Sessions>,
    pub(super) direct: direct::Direct,
    pub(super) mcp: M,
}

impl<M> Steps<M>
where
    M: Service<Request, Response = Response, Error = Infallible> + Clone,
{
    /// Runs the request through every step; the first refusal is the answer.
    async fn serve(&self, request: Request) -> Response {
        match self.admitted(request).await {
            Ok(response) => response,
            Err(refused) => *refused,
        }
    }

    async fn admitted(&self, request: Request) -> Result<Response, Refused> {
        // Outside authentication: a wrong Host is refused whatever the token.
        self.hosts.admit(&request)?;
        let request = match &self.auth {
            Some(auth) => auth.admit(request).await?,
            None => request,
        };
        let counted = self.requests.admit(&request)?;
        let request = self.pace.read_request(request).await?;
        drain::refuse_new_work(&self.health, &request)?;
        let entered = self.in_flight.track(&request);
        let response = self
            .sessions
            .serve(request, |request| {
                self.direct.answer(request, |request| self.rmcp(request))
            })
            .await;
        // Both counts end when the response has been delivered.
        Ok(match (counted, entered) {
            (None, None) => response,
            held => drain::hold_until_delivered(response, held),
        })
    }

    /// rmcp's answer, with its refusals in JSON-RPC's terms: a body it
    /// cannot read as a message ([`malformed`], kept for that: the body
    /// pace has it in memory, so keeping it is a reference count) and a
    /// JSON error over the bound ([`bounded_refusal`]).
    fn rmcp(&self, request: Request) -> impl Future<Output = Response> + use<M> {
        let mcp = self.mcp.clone();
        async move {
            let (request, sent) =
                if request.method() == Method::POST && malformed::declares_json(request.headers()) {
                    let in_session = malformed::in_session(request.headers());
                    let (parts, body) = request.into_parts();
                    match axum::body::to_bytes(body, usize::MAX).await {
                        Ok(bytes) => (
                            Request::from_parts(parts, Body::from(bytes.clone())),
                            Some((bytes, in_session)),
                        ),
                        Err(_) => return StatusCode::BAD_REQUEST.into_response(),
                    }
                } else {
                    (request, None)
                };
            let response = match mcp.oneshot(request).await {
                Ok(response) => response,
                Err(never) => match never {},
            };
            match sent {
                Some((body, in_session)) => {
                    bounded_refusal(malformed::answer(response, &body, in_session)).await
                }
                None => bounded_refusal(response).await,
            }
        }
    }
}

/// `response` with the JSON-RPC error of one of rmcp's own refusals held
/// to the bound every transport applies ([`crate::transport::bounded`]):
/// rmcp answers some requests itself, never reaching the service (an
/// `Mcp-Name` header that does not match the body quotes the body's
/// value, whatever its size), and says why: a stateless request of a
/// method 2026-07-28 removed (404), whose message rmcp makes the bare
/// method name, gets one that says why, and so does a request with neither
/// a session nor the stateless `_meta`. Only a JSON client error (rare, and
/// a body rmcp made whole) is read and rewritten; every other response
/// passes untouched.
async fn bounded_refusal(response: Response) -> Response {
    // A stream is never read here, whatever its status: only a JSON body.
    let json = response
        .headers()
        .get(axum::http::header::CONTENT_TYPE)
        .is_some_and(|kind| kind.as_bytes().starts_with(b"application/json"));
    if !response.status().is_client_error() || !json {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    // rmcp's refusal is a body it made whole in memory.
    let Ok(bytes) = axum::body::to_bytes(body, usize::MAX).await else {
        return Response::from_parts(parts, axum::body::Body::empty());
    };
    let bytes = match serde_json::from_slice::<rmcp::model::JsonRpcError>(&bytes) {
        Ok(error) => serde_json::to_vec(&crate::transport::error_value(error)).map_or(bytes, Into::into),
        Err(_) => bytes,
    };
    parts.headers.remove(axum::http::header::CONTENT_LENGTH);
    Response::from_parts(parts, axum::body::Body::from(bytes))
}

/// The endpoint as a tower service: a clone is an `Arc` count.
pub(super) struct Endpoint<M>(Arc<Steps<M>>);

impl<M> Endpoint<M> {
    pub(super) fn new(steps: Steps<M>) -> Self {
        Self(Arc::new(steps))
    }
}

impl<M> Clone for Endpoint<M> {
    fn clone(&self) -> Self {
        Self(self.0.clone())
    }
}

impl<M> Service<Request> for Endpoint<M>
where
    M: Service<Request, Response = Response, Error = Infallible> + Clone + Send + Sync + 'static,
    M::Future: Send,
{
    type Response = Response;
    type Error = Infallible;
    type Future = BoxFuture<'static, Result<Response, Infallible>>;

    /// Always ready: each request takes its own copy of rmcp's service.
    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request) -> Self::Future {
        let steps = self.0.clone();
        Box::pin(async move { Ok(steps.serve(request).await) })
    }
}
