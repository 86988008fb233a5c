//! Who is calling: API tokens or OAuth 2.1 bearer JWTs, checked before any
//! MCP request reaches rmcp. (Stub: the full layer is being written.)

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;

/// Why the authentication settings cannot be used.
#[derive(Debug, thiserror::Error)]
#[allow(dead_code)]
pub(crate) enum AuthConfigError {
    #[error("{0}")]
    Invalid(String),
}

/// The configured authentication: API tokens, OAuth, or both.
#[derive(Debug)]
pub(crate) struct Auth {}

impl Auth {
    /// Reads `WARDEN_API_TOKENS_FILE` and `WARDEN_OAUTH_*`. `Ok(None)` when
    /// neither is set. `resource` is the canonical URL of the MCP endpoint
    /// (the default OAuth audience and the RFC 9728 `resource`).
    pub(crate) fn from_env(resource: &str) -> Result<Option<Self>, AuthConfigError> {
        let _ = resource;
        Ok(None)
    }

    /// Routes served without authentication (the RFC 9728 metadata).
    pub(crate) fn public_routes(self: &Arc<Self>) -> axum::Router {
        axum::Router::new()
    }

    /// Middleware in front of `/mcp`: puts the caller's
    /// [`crate::tenant::Principal`] into the request's extensions, or
    /// answers 401 / 403.
    pub(crate) async fn require(State(auth): State<Arc<Auth>>, request: Request, next: Next) -> Response {
        let _ = auth;
        next.run(request).await
    }
}
