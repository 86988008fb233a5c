//! Who and what a request is: its origin (mode, tool, request id, the
//! `mcp.tool.call` span), the principal it acts for and the scopes its
//! token granted, as the HTTP layer put them in its extensions.

use opentelemetry::KeyValue;
use opentelemetry::trace::SpanKind;
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer};

use warden_calls::events::Origin;

/// A new rmcp request's origin (see [`new_request_origin`]).
pub(super) fn request_origin(mode: &'static str, tool: &str, context: &RequestContext<RoleServer>) -> Origin {
    new_request_origin(
        mode,
        tool,
        context.meta.get_traceparent(),
        principal_of(context),
        scopes_of(context),
    )
}

/// A new request's origin with its `mcp.tool.call` span started, as a
/// child of the caller's `traceparent` (request `_meta`) when it sent one.
pub(crate) fn new_request_origin(
    mode: &'static str,
    tool: &str,
    traceparent: Option<&str>,
    principal: warden_calls::tenant::Principal,
    scopes: warden_calls::tenant::Scopes,
) -> Origin {
    let parent = traceparent
        .map(warden_calls::telemetry::from_traceparent)
        .unwrap_or_default();
    let mut origin = Origin::request(mode, tool);
    origin.principal = principal;
    origin.scopes = scopes;
    origin.trace = warden_calls::telemetry::start(
        "mcp.tool.call",
        SpanKind::Server,
        &parent,
        vec![
            KeyValue::new("mcp.tool.name", tool.to_string()),
            KeyValue::new("warden.mode", mode),
            KeyValue::new("warden.request_id", origin.request_id.clone()),
            KeyValue::new("warden.principal", origin.principal.to_string()),
            KeyValue::new("warden.node", warden_calls::node::name()),
        ],
    );
    origin
}

/// A `requestState`/`inputResponses` on a call that cannot have asked.
pub(super) fn not_a_retry(why: &str) -> ErrorData {
    ErrorData::invalid_params(
        format!("requestState, inputResponses: {why}; send the call without them"),
        None,
    )
}

/// Who a request acts for: the principal the HTTP authentication layer put
/// in the request's extensions, or `local` (stdio, or HTTP without
/// authentication on loopback).
pub(crate) fn principal_of(context: &RequestContext<RoleServer>) -> warden_calls::tenant::Principal {
    #[cfg(feature = "http")]
    if let Some(principal) = context
        .extensions
        .get::<axum::http::request::Parts>()
        .and_then(|parts| parts.extensions.get::<warden_calls::tenant::Principal>())
    {
        return principal.clone();
    }
    #[cfg(not(feature = "http"))]
    let _ = context;
    warden_calls::tenant::Principal::local()
}

/// The OAuth scopes the request's token granted, as the HTTP
/// authentication layer put them in the request's extensions: none over
/// stdio, without authentication, or with an API token.
pub(crate) fn scopes_of(context: &RequestContext<RoleServer>) -> warden_calls::tenant::Scopes {
    #[cfg(feature = "http")]
    if let Some(scopes) = context
        .extensions
        .get::<axum::http::request::Parts>()
        .and_then(|parts| parts.extensions.get::<warden_calls::tenant::Scopes>())
    {
        return scopes.clone();
    }
    #[cfg(not(feature = "http"))]
    let _ = context;
    warden_calls::tenant::Scopes::default()
}
