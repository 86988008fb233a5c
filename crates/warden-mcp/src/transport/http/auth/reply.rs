//! What the authentication layer answers: the 400/401/403 refusals with
//! their `WWW-Authenticate` challenges (RFC 6750 §3, RFC 9728 §5.1) and the
//! protected-resource metadata document (RFC 9728 §2-3).
//!
//! Challenge parameters always come in one order: `error`,
//! `error_description`, `scope` (when scopes are configured), then
//! `resource_metadata` (when OAuth is configured: API tokens need no
//! discovery). Bodies are `{"code": …, "message": …}` with a code of
//! [`codes`] and a message naming what to fix, plus the same as a JSON-RPC
//! error (see [`body`]).

use std::sync::Arc;

use axum::Json;
use axum::http::header::{ACCESS_CONTROL_ALLOW_ORIGIN, WWW_AUTHENTICATE};
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde_json::json;

use super::oauth::JwtRejection;
use super::{Auth, WELL_KNOWN};

/// Stable codes of the authentication refusals (the `code` of the JSON
/// body). Documented in docs/security.md; never renamed.
pub(crate) mod codes {
    /// 401: no `Authorization: Bearer` credentials.
    pub(crate) const AUTHENTICATION_REQUIRED: &str = "authentication_required";
    /// 401: a token was sent but is not valid (unknown API token, or a JWT
    /// with a bad signature, wrong issuer or audience, expired, …).
    pub(crate) const INVALID_TOKEN: &str = "invalid_token";
    /// 403: a valid JWT without a scope `WARDEN_OAUTH_SCOPES` requires.
    pub(crate) const INSUFFICIENT_SCOPE: &str = "insufficient_scope";
    /// 400: an `Authorization` header that is not one well-formed
    /// `Bearer <token>`.
    pub(crate) const MALFORMED_AUTHORIZATION: &str = "malformed_authorization";
    /// Every code above (the docs test checks each is documented).
    #[cfg(test)]
    pub(crate) const ALL: &[&str] = &[
        AUTHENTICATION_REQUIRED,
        INVALID_TOKEN,
        INSUFFICIENT_SCOPE,
        MALFORMED_AUTHORIZATION,
    ];
}

/// Why a request was refused.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Rejection {
    /// No `Authorization` header.
    Missing,
    /// An `Authorization` header with another scheme (`Basic …`).
    NotBearer,
    /// A header that is not one well-formed `Bearer <token>`; the reason.
    Malformed(&'static str),
    /// A token neither in the token table nor shaped like a JWT.
    UnknownToken,
    Jwt(JwtRejection),
}

impl From<JwtRejection> for Rejection {
    fn from(rejection: JwtRejection) -> Self {
        Self::Jwt(rejection)
    }
}

/// The refusal's status, challenge and body.
pub(super) fn reject(auth: &Auth, rejection: Rejection) -> Response {
    let how = how_to_authenticate(auth);
    let (status, code, error, description, message) = match rejection {
        Rejection::Missing => (
            StatusCode::UNAUTHORIZED,
            codes::AUTHENTICATION_REQUIRED,
            None,
            None,
            how,
        ),
        Rejection::NotBearer => (
            StatusCode::UNAUTHORIZED,
            codes::AUTHENTICATION_REQUIRED,
            None,
            None,
            format!("the Authorization header must use the Bearer scheme; {how}"),
        ),
        Rejection::Malformed(why) => (
            StatusCode::BAD_REQUEST,
            codes::MALFORMED_AUTHORIZATION,
            Some("invalid_request"),
            Some(why),
            format!("{why}; send exactly one `Authorization: Bearer <token>` header"),
        ),
        Rejection::UnknownToken => {
            let what = match (&auth.tokens, &auth.oauth) {
                (Some(_), Some(_)) => "neither a known API token nor a JWT",
                (None, _) => "not a JWT",
                (Some(_), None) => "not a known API token",
            };
            (
                StatusCode::UNAUTHORIZED,
                codes::INVALID_TOKEN,
                Some("invalid_token"),
                Some("unknown token"),
                format!("the bearer token is {what}; {how}"),
            )
        }
        Rejection::Jwt(JwtRejection::Invalid { description, message }) => (
            StatusCode::UNAUTHORIZED,
            codes::INVALID_TOKEN,
            Some("invalid_token"),
            Some(description),
            message,
        ),
        Rejection::Jwt(JwtRejection::MissingScopes(missing)) => (
            StatusCode::FORBIDDEN,
            codes::INSUFFICIENT_SCOPE,
            Some("insufficient_scope"),
            None,
            format!(
                "the token lacks the scope(s) {}; request a token with scope \"{}\"",
                missing.join(", "),
                required_scopes(auth).unwrap_or_default()
            ),
        ),
    };
    let challenge = challenge(auth, error, description);
    let mut response = (status, Json(body(code, &message))).into_response();
    let value = HeaderValue::from_str(&challenge).unwrap_or_else(|_| HeaderValue::from_static("Bearer"));
    response.headers_mut().insert(WWW_AUTHENTICATE, value);
    response
}

/// JSON-RPC error code of an authentication refusal (the
/// implementation-defined server range; the MCP spec names none).
const JSONRPC_UNAUTHORIZED: i64 = -32001;

/// `{"code", "message"}`, and the same message as a JSON-RPC error
/// (`jsonrpc`, `id: null`, `error: {code, message, data: {code}}`): MCP
/// clients show a JSON-RPC error found in a non-2xx body to the person (the
/// Python SDK does; without it they show only "Server returned an error
/// response"), so the fix reaches whoever has to make it.
fn body(code: &str, message: &str) -> serde_json::Value {
    json!({
        "code": code,
        "message": message,
        "jsonrpc": "2.0",
        "id": null,
        "error": {"code": JSONRPC_UNAUTHORIZED, "message": message, "data": {"code": code}},
    })
}

/// `Bearer error="…", error_description="…", scope="…", resource_metadata="…"`,
/// leaving out what does not apply.
fn challenge(auth: &Auth, error: Option<&str>, description: Option<&str>) -> String {
    let mut params = Vec::new();
    if let Some(error) = error {
        params.push(format!("error=\"{error}\""));
    }
    if let Some(description) = description {
        params.push(format!("error_description=\"{description}\""));
    }
    if let Some(scopes) = required_scopes(auth) {
        params.push(format!("scope=\"{scopes}\""));
    }
    if auth.oauth.is_some() {
        params.push(format!("resource_metadata=\"{}\"", auth.resource.metadata_url()));
    }
    if params.is_empty() {
        "Bearer".into()
    } else {
        format!("Bearer {}", params.join(", "))
    }
}

/// The scopes every JWT needs, space-separated; `None` when none are.
fn required_scopes(auth: &Auth) -> Option<String> {
    auth.oauth
        .as_ref()
        .filter(|o| !o.scopes.is_empty())
        .map(|o| o.scopes.join(" "))
}

/// What a client must send, for the body of a 401.
fn how_to_authenticate(auth: &Auth) -> String {
    match &auth.oauth {
        Some(oauth) => format!(
            "send `Authorization: Bearer <token>` with an OAuth access token from {} for {}{} (metadata: {})",
            oauth.issuer,
            auth.resource.url,
            if auth.tokens.is_some() {
                ", or an API token"
            } else {
                ""
            },
            auth.resource.metadata_url()
        ),
        None => "send `Authorization: Bearer <token>` with an API token from the server's operator".into(),
    }
}

/// The RFC 9728 document for this server.
fn metadata(auth: &Auth) -> serde_json::Value {
    let mut doc = json!({
        "resource": auth.resource.url,
        "bearer_methods_supported": ["header"],
        "resource_name": auth.resource_name,
    });
    if let Some(oauth) = &auth.oauth {
        doc["authorization_servers"] = json!([oauth.issuer]);
        if !oauth.scopes.is_empty() {
            doc["scopes_supported"] = json!(oauth.scopes);
        }
    }
    doc
}

/// GET routes for the metadata: the bare well-known path, its `/mcp` form,
/// and the form for the resource's own path when that differs and is a
/// plain path (no characters axum would read as a pattern). The document
/// is public, so any origin may read it (browser-based clients fetch it
/// cross-origin).
pub(super) fn metadata_routes(auth: &Arc<Auth>) -> axum::Router {
    let mut router = axum::Router::new();
    if auth.oauth.is_none() {
        return router;
    }
    let document = Arc::new(metadata(auth));
    let mut paths = vec![WELL_KNOWN.to_string(), format!("{WELL_KNOWN}/mcp")];
    let own = format!("{WELL_KNOWN}{}", auth.resource.path);
    let plain = auth
        .resource
        .path
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b"/-._~".contains(&b));
    if plain && !paths.contains(&own) {
        paths.push(own);
    }
    for path in paths {
        let document = Arc::clone(&document);
        router = router.route(
            &path,
            get(move || async move {
                (
                    [(ACCESS_CONTROL_ALLOW_ORIGIN, HeaderValue::from_static("*"))],
                    Json(document.as_ref().clone()),
                )
            }),
        );
    }
    router
}
