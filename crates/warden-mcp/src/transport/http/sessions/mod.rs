//! Bounds on MCP sessions (protocol revisions before 2026-07-28), and
//! sessions bound to the principal that opened them.
//!
//! The sessions themselves live in [`manager`], which keeps each one until
//! it is deleted or idle for its keep-alive. rmcp opens a session for
//! every `initialize`, whatever protocol revision the request's headers
//! name, so the caps cannot be decided from the headers: the manager
//! counts them when it opens a session. This step tells it who is
//! opening ([`OPENER`], a task-local around the request) and turns its
//! refusal into a 503 with `Retry-After` that names the limit, instead of
//! rmcp's bare 500.
//!
//! A session id is not a credential ("sessions are not authentication"):
//! requests naming a session opened by another principal are answered as
//! an unknown session (404), so a leaked id gives another tenant nothing.

pub(crate) mod manager;

use std::future::Future;
use std::sync::{Arc, OnceLock};

use axum::extract::Request;
use axum::http::{Method, StatusCode};
use axum::response::Response;

use warden_calls::tenant::Principal;

/// The session header of the 2025 revisions.
const SESSION_HEADER: &str = "mcp-session-id";

/// How long a refused client is told to wait: sessions end when their
/// clients close them or go idle, which is not predictable, so a short
/// hint keeps well-behaved clients polling gently.
const RETRY_AFTER_SECONDS: &str = "5";

tokio::task_local! {
    /// Who the request being served acts for, for the session manager's
    /// caps. Set by [`guard`] around rmcp's handling of one request.
    pub(crate) static OPENER: Opener;
}

/// The principal opening a session, and the manager's refusal if it made one.
pub(super) struct Opener {
    principal: Principal,
    refused: Arc<OnceLock<Refusal>>,
}

impl Opener {
    pub(super) fn new(principal: Principal) -> Self {
        Self {
            principal,
            refused: Arc::default(),
        }
    }

    fn refuse(&self, refusal: Refusal) {
        let _ = self.refused.set(refusal);
    }
}

/// Why a session was not opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub(super) enum Refusal {
    #[error(
        "the server holds its maximum of {0} MCP sessions (WARDEN_HTTP_MAX_SESSIONS); retry later, \
         close unused sessions (HTTP DELETE), or use the stateless 2026-07-28 protocol"
    )]
    Server(usize),
    #[error(
        "this principal holds its maximum of {0} MCP sessions (WARDEN_HTTP_SESSIONS_PER_PRINCIPAL); \
         close unused sessions (HTTP DELETE) or let them expire, then retry"
    )]
    Principal(usize),
}

/// The session bookkeeping shared by the endpoint's step and `/readyz`.
pub(super) struct Sessions {
    pub(crate) manager: Arc<manager::Manager>,
}

impl Sessions {
    pub(super) fn new(manager: Arc<manager::Manager>) -> Self {
        Self { manager }
    }

    /// The endpoint's step in front of rmcp's service (inside
    /// authentication): refuses a session of another principal and a
    /// session past the caps, and runs `next` with the [`OPENER`] set.
    pub(super) async fn serve<F>(&self, request: Request, next: impl FnOnce(Request) -> F) -> Response
    where
        F: Future<Output = Response>,
    {
        let principal = request
            .extensions()
            .get::<Principal>()
            .cloned()
            .unwrap_or_default();
        let session = request
            .headers()
            .get(SESSION_HEADER)
            .and_then(|v| v.to_str().ok());
        if let Some(id) = session
            && self.manager.owner(id).is_some_and(|owner| owner != principal)
        {
            return super::refusal::refuse(
                StatusCode::NOT_FOUND,
                warden_core::error::codes::NOT_FOUND,
                "session not found; initialize a new session",
                None,
            );
        }
        let is_delete = request.method() == Method::DELETE;
        let request = if session.is_none() && request.method() == Method::POST {
            let (request, initialize) = is_initialize(request).await;
            if initialize && let Some(refusal) = self.manager.would_refuse(&principal) {
                return refusal_response(refusal);
            }
            request
        } else {
            request
        };
        let opener = Opener::new(principal);
        let refused = opener.refused.clone();
        let mut response = OPENER.scope(opener, next(request)).await;
        if let Some(refusal) = refused.get() {
            return refusal_response(*refusal);
        }
        // rmcp answers a session's DELETE 202; the spec's clients expect 200 or
        // 204 (the Python SDK logs every other status as a failed termination).
        if is_delete && response.status() == StatusCode::ACCEPTED {
            *response.status_mut() = StatusCode::NO_CONTENT;
        }
        response
    }
}

/// Whether a POST without a session is an `initialize` (which opens one),
/// and the request to pass on. A request whose `Mcp-Method` names another
/// method is not looked into (rmcp refuses a body that contradicts it);
/// otherwise the body, already read whole by the body-pace layer, is
/// parsed for its `method` alone.
async fn is_initialize(request: Request) -> (Request, bool) {
    if let Some(method) = request.headers().get("mcp-method") {
        let initialize = method.as_bytes() == b"initialize";
        return (request, initialize);
    }
    #[derive(serde::Deserialize)]
    struct Method {
        method: Option<String>,
    }
    let (parts, body) = request.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, usize::MAX).await else {
        return (Request::from_parts(parts, axum::body::Body::empty()), false);
    };
    let initialize = serde_json::from_slice::<Method>(&bytes)
        .is_ok_and(|message| message.method.as_deref() == Some("initialize"));
    (
        Request::from_parts(parts, axum::body::Body::from(bytes)),
        initialize,
    )
}

fn refusal_response(refusal: Refusal) -> Response {
    super::refusal::refuse(
        StatusCode::SERVICE_UNAVAILABLE,
        warden_core::error::codes::TOO_MANY_SESSIONS,
        &refusal.to_string(),
        Some(RETRY_AFTER_SECONDS),
    )
}
