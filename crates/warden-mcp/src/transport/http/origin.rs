//! `Origin` validation (DNS-rebinding protection), before authentication.
//!
//! A browser page on another site can make the user's browser send
//! requests to a server on localhost or the intranet; the browser marks
//! them with the page's `Origin`. A request carrying an `Origin` that is not
//! on the allowlist is refused with 403 before anything else looks at it
//! (so the answer does not depend on whether it also carried a token).
//! Requests without `Origin` (every non-browser MCP client) pass.
//!
//! The allowlist is this server's own origin (from its public URL) plus
//! `WARDEN_ALLOWED_ORIGINS`: comma-separated `scheme://host[:port]`
//! entries, where `:*` matches any port (e.g. `http://localhost:*` for a
//! browser-based inspector in development).
//!
//! A browser client on an allowed origin also needs CORS ([`cors`]): its
//! preflight (`OPTIONS` with `Access-Control-Request-Method`, never
//! carrying a token) is answered here, before authentication, and every
//! answer to it names its origin and exposes the headers an MCP client reads
//! (`Mcp-Session-Id`, `WWW-Authenticate`, `Retry-After`).

use std::sync::Arc;
use std::time::Duration;

use axum::extract::Request;
use axum::http::{HeaderName, Method, StatusCode, header};
use axum::response::IntoResponse;

/// One allowed origin: scheme and host lowercased, port `None` = any.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Allowed {
    scheme: String,
    host: String,
    port: Option<u16>,
}

/// The origins a browser page may call this server from.
#[derive(Debug, Clone)]
pub(super) struct Allowlist(Vec<Allowed>);

/// A `WARDEN_ALLOWED_ORIGINS` entry (or the public URL) that is not an origin.
#[derive(Debug, thiserror::Error)]
#[error(
    "WARDEN_ALLOWED_ORIGINS: '{0}' is not an origin; write scheme://host[:port] (port `*` for any), \
comma-separated, e.g. https://claude.ai,http://localhost:*"
)]
pub(crate) struct OriginError(String);

impl Allowlist {
    /// This server's own origin plus the comma-separated `extra` entries.
    pub(super) fn new(public_url: &str, extra: Option<&str>) -> Result<Self, OriginError> {
        let mut allowed = vec![parse(public_url, true).ok_or_else(|| OriginError(public_url.to_string()))?];
        for entry in extra.unwrap_or_default().split(',').map(str::trim) {
            if entry.is_empty() {
                continue;
            }
            allowed.push(parse(entry, false).ok_or_else(|| OriginError(entry.to_string()))?);
        }
        Ok(Self(allowed))
    }

    /// Whether a request's `Origin` header value is allowed.
    pub(crate) fn allows(&self, origin: &str) -> bool {
        // A request's origin names one port: `:*` is allowlist syntax, and
        // a literal `http://localhost:*` from a client is no origin at all.
        let Some(origin) = parse(origin, false).filter(|origin| origin.port.is_some()) else {
            return false;
        };
        self.0.iter().any(|allowed| {
            allowed.scheme == origin.scheme
                && allowed.host == origin.host
                && allowed.port.is_none_or(|port| Some(port) == origin.port)
        })
    }
}

/// Parses `scheme://host[:port]`; with `url_path`, a path after the
/// authority (a public URL) is allowed and ignored. A missing port is the
/// scheme's default; `*` is any port.
fn parse(text: &str, url_path: bool) -> Option<Allowed> {
    let (scheme, rest) = text.split_once("://")?;
    let scheme = scheme.to_ascii_lowercase();
    let default_port = match scheme.as_str() {
        "http" => 80,
        "https" => 443,
        _ => return None,
    };
    let authority = match rest.find('/') {
        Some(at) if url_path => &rest[..at],
        Some(_) => return None,
        None => rest,
    };
    if authority.is_empty() || authority.contains('@') {
        return None;
    }
    // `[v6]:port`, `host:port` or a bare host.
    let (host, port) = match authority.rsplit_once(':') {
        Some((host, port)) if !port.contains(']') => (host, Some(port)),
        _ => (authority, None),
    };
    if host.is_empty() {
        return None;
    }
    let port = match port {
        None => Some(default_port),
        Some("*") => None,
        Some(port) => Some(port.parse().ok()?),
    };
    Some(Allowed {
        scheme,
        host: host.to_ascii_lowercase(),
        port,
    })
}

impl Allowlist {
    /// The edge's check, before CORS: 403 for a request whose `Origin` is
    /// not allowed, and 404 for a preflight (`OPTIONS`) of a path the
    /// server does not serve, which the CORS layer would otherwise answer
    /// 200.
    pub(super) fn admit(&self, request: &Request) -> Result<(), super::refusal::Refused> {
        let path = request.uri().path();
        if request.method() == Method::OPTIONS
            && path != super::MCP_PATH
            && !path.starts_with("/.well-known/")
        {
            return Err(Box::new(super::health::not_served(path)));
        }
        if let Some(origin) = request.headers().get(header::ORIGIN) {
            let allowed = origin.to_str().is_ok_and(|origin| self.allows(origin));
            if !allowed {
                return Err(Box::new(
                    (
                        StatusCode::FORBIDDEN,
                        axum::Json(serde_json::json!({
                            "error": warden_core::error::codes::FORBIDDEN_ORIGIN,
                            "message": "this Origin may not call the server (DNS-rebinding protection); \
                        an operator allows it with WARDEN_ALLOWED_ORIGINS",
                        })),
                    )
                        .into_response(),
                ));
            }
        }
        Ok(())
    }
}

/// How long a browser may cache a preflight's answer.
const PREFLIGHT_MAX_AGE: Duration = Duration::from_secs(600);

/// CORS for the allowed origins: preflights answered (any header the page
/// asks for, since its origin is trusted; `GET`, `POST`, `DELETE`), and
/// the MCP headers exposed on every answer. Other origins get no CORS
/// headers (and [`check`], outside this layer, refuses them first).
pub(super) fn cors(allowlist: Arc<Allowlist>) -> tower_http::cors::CorsLayer {
    use tower_http::cors::{AllowHeaders, AllowOrigin, CorsLayer};
    CorsLayer::new()
        .allow_origin(AllowOrigin::predicate(move |origin, _| {
            origin.to_str().is_ok_and(|origin| allowlist.allows(origin))
        }))
        .allow_methods([Method::GET, Method::POST, Method::DELETE])
        .allow_headers(AllowHeaders::mirror_request())
        .expose_headers([
            HeaderName::from_static("mcp-session-id"),
            HeaderName::from_static("mcp-protocol-version"),
            header::WWW_AUTHENTICATE,
            header::RETRY_AFTER,
        ])
        .max_age(PREFLIGHT_MAX_AGE)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_origin_and_listed_ones_pass() {
        let list = Allowlist::new(
            "http://127.0.0.1:8080/mcp",
            Some("https://claude.ai, http://localhost:*"),
        )
        .unwrap();
        assert!(list.allows("http://127.0.0.1:8080"));
        assert!(list.allows("https://claude.ai"));
        assert!(list.allows("https://claude.ai:443"));
        assert!(list.allows("http://localhost:6274"));
        assert!(list.allows("HTTP://LOCALHOST:1"));
        assert!(!list.allows("http://127.0.0.1:8081"));
        assert!(!list.allows("https://claude.ai:8443"));
        assert!(!list.allows("http://evil.example"));
        assert!(!list.allows("null"));
        assert!(!list.allows("http://claude.ai"));
        // The allowlist's wildcard is not a request origin.
        assert!(!list.allows("http://localhost:*"));
        assert!(!list.allows("http://localhost:*/"));
    }

    #[test]
    fn bad_entries_name_the_variable() {
        for bad in [
            "claude.ai",
            "ftp://x",
            "https://x/path",
            "http://:80",
            "http://x:port",
        ] {
            let error = Allowlist::new("http://127.0.0.1:1/mcp", Some(bad)).unwrap_err();
            assert!(error.to_string().contains("WARDEN_ALLOWED_ORIGINS"), "{error}");
        }
    }

    #[test]
    fn ipv6_hosts_keep_their_brackets() {
        let list = Allowlist::new("http://[::1]:8080/mcp", None).unwrap();
        assert!(list.allows("http://[::1]:8080"));
        assert!(!list.allows("http://[::1]:8081"));
    }
}
