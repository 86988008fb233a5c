//! Bounds on MCP sessions (protocol revisions before 2026-07-28), and
//! sessions bound to the principal that opened them.
//!
//! The sessions themselves live in [`manager`], which keeps each one until
//! it is deleted or idle for its keep-alive and has no cap of its own: a
//! client that initializes in a loop would fill memory. A request that would open a
//! session (a POST without `Mcp-Session-Id` on a pre-2026 revision) is
//! refused with 503 and `Retry-After` while the server holds
//! `http_max_sessions` of them. Stateless 2026-07-28 requests open none and
//! are not counted.
//!
//! A session id is not a credential ("sessions are not authentication"):
//! requests naming a session opened by another principal are answered as
//! an unknown session (404), so a leaked id gives another tenant nothing.

pub(crate) mod manager;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::extract::{Request, State};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::tenant::Principal;

/// The session header of the 2025 revisions.
const SESSION_HEADER: &str = "mcp-session-id";

/// The session bookkeeping shared by the middleware and `/readyz`.
pub(crate) struct Sessions {
    pub(crate) manager: Arc<manager::Manager>,
    max: usize,
    /// Who opened each session. Pruned of closed sessions when it grows
    /// past the cap, so it stays bounded by it.
    owners: Mutex<HashMap<String, Principal>>,
}

impl Sessions {
    pub(crate) fn new(manager: Arc<manager::Manager>, max: usize) -> Self {
        Self {
            manager,
            max: max.max(1),
            owners: Mutex::default(),
        }
    }

    /// Sessions open now.
    pub(crate) async fn open(&self) -> usize {
        self.manager.len()
    }

    fn owners(&self) -> std::sync::MutexGuard<'_, HashMap<String, Principal>> {
        self.owners
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    async fn remember(&self, id: &str, principal: Principal) {
        let prune = self.owners().len() >= self.max;
        if prune {
            let manager = &self.manager;
            self.owners().retain(|id, _| manager.contains(id));
        }
        self.owners().insert(id.to_string(), principal);
    }
}

/// Whether a request uses a session-less protocol revision (2026-07-28 or later).
fn stateless(request: &Request) -> bool {
    request
        .headers()
        .get("mcp-protocol-version")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|version| version >= "2026-07-28")
}

/// Middleware in front of rmcp's service (inside authentication).
pub(crate) async fn guard(State(sessions): State<Arc<Sessions>>, request: Request, next: Next) -> Response {
    let principal = request
        .extensions()
        .get::<Principal>()
        .cloned()
        .unwrap_or_default();
    let session = request
        .headers()
        .get(SESSION_HEADER)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    if let Some(id) = &session {
        let owner = sessions.owners().get(id).cloned();
        if owner.is_some_and(|owner| owner != principal) {
            return (
                StatusCode::NOT_FOUND,
                axum::Json(serde_json::json!({
                    "error": crate::error::codes::NOT_FOUND,
                    "message": "session not found; initialize a new session",
                })),
            )
                .into_response();
        }
    }
    let opens_session = session.is_none() && request.method() == Method::POST && !stateless(&request);
    if opens_session && sessions.open().await >= sessions.max {
        let mut response = (
            StatusCode::SERVICE_UNAVAILABLE,
            axum::Json(serde_json::json!({
                "error": crate::error::codes::TOO_MANY_SESSIONS,
                "message": format!(
                    "the server holds its maximum of {} MCP sessions (WARDEN_HTTP_MAX_SESSIONS); \
            retry later, close unused sessions (HTTP DELETE), or use the stateless 2026-07-28 protocol",
                    sessions.max
                ),
            })),
        )
            .into_response();
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from_static("5"));
        return response;
    }
    let response = next.run(request).await;
    if session.is_none()
        && let Some(id) = response
            .headers()
            .get(SESSION_HEADER)
            .and_then(|v| v.to_str().ok())
    {
        sessions.remember(id, principal).await;
    }
    response
}
