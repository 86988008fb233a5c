//! The one shape of the transport's own refusals (sessions, requests in
//! progress, slow bodies, draining, a wrong `Host`, a stray path):
//! `{"error": code, "message": …}` with a stable code of
//! [`warden_core::error::codes`] and a message naming the limit or the fix, and
//! `Retry-After` when waiting helps. The authentication layer answers in its
//! own RFC 6750 shape (`auth::reply`).

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

/// A step's answer instead of passing the request on. Boxed: refusals are
/// rare, and a `Result` holding a whole `Response` (128 bytes) would be
/// moved through every step of every request that passes.
pub(super) type Refused = Box<Response>;

/// A refusal with `status`, `code` and `message`; `retry_after` in seconds.
pub(super) fn refuse(
    status: StatusCode,
    code: &str,
    message: &str,
    retry_after: Option<&'static str>,
) -> Response {
    let mut response = (
        status,
        axum::Json(serde_json::json!({"error": code, "message": message})),
    )
        .into_response();
    if let Some(seconds) = retry_after {
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from_static(seconds));
    }
    response
}
