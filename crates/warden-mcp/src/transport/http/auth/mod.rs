//! Who is calling: API tokens or OAuth 2.1 bearer JWTs, checked before any
//! MCP request reaches rmcp.
//!
//! [`Auth::from_env`] reads the settings once at startup (a bad one stops
//! the server, naming the variable and the fix); the HTTP router (the
//! parent module) makes [`Auth::admit`] a step of `/mcp` and merges
//! [`Auth::public_routes`] (the RFC 9728 metadata) unauthenticated. The
//! step only decides *who* a request acts for: it inserts a
//! [`Principal`] and the token's [`Scopes`] into the request's extensions,
//! where `crate::server::principal_of` and `scopes_of` find them, or
//! answers 400/401/403 itself. What a principal may see is the tenant layer's business.
//!
//! Order of checks for `Authorization: Bearer T`: the API-token table
//! first (constant time, any token shape), then, if OAuth is configured
//! and `T` has the three parts of a JWT, JWT validation. Scopes apply to
//! JWTs only; an API token stands for its principal and grants no scopes
//! (so a policy rule naming `scopes` never matches it).

mod jwks;
mod oauth;
mod reply;
mod tokens;

use std::path::Path;
use std::sync::Arc;

use axum::extract::Request;
use axum::http::HeaderMap;
use axum::http::header::AUTHORIZATION;

use crate::limits::MAX_AUTHORIZATION_BYTES;
use oauth::{AUDIENCE_VAR, ISSUER_VAR, OAuth, SCOPES_VAR};
use reply::Rejection;
use tokens::{TOKENS_FILE_VAR, TokenTable};
use warden_calls::tenant::{Principal, Scopes};

/// Why the authentication settings cannot be used. Each message names the
/// variable and what to set it to; none repeats a secret.
#[derive(Debug, thiserror::Error)]
pub(crate) enum AuthConfigError {
    #[error("{0}")]
    Invalid(String),
    #[error("{var} is not set: {needs}")]
    Missing { var: &'static str, needs: String },
    #[error("{} {path}{}: {problem}", TOKENS_FILE_VAR, at_line(*.line))]
    TokensFile {
        path: String,
        line: Option<usize>,
        problem: String,
    },
    #[error(transparent)]
    Jwks(#[from] jwks::JwksError),
    #[error(transparent)]
    Scopes(#[from] oauth::BadScope),
}

fn at_line(line: Option<usize>) -> String {
    line.map(|n| format!(" line {n}")).unwrap_or_default()
}

/// The MCP endpoint's canonical URL, split for the RFC 9728 well-known URL.
#[derive(Debug, Clone)]
struct Resource {
    /// As configured: the `resource` of the metadata, the default audience.
    url: String,
    /// `scheme://authority`.
    origin: String,
    /// The path without a trailing `/` (`/mcp`), possibly empty.
    path: String,
}

/// The RFC 9728 well-known path prefix.
const WELL_KNOWN: &str = "/.well-known/oauth-protected-resource";

impl Resource {
    fn parse(url: &str) -> Result<Self, AuthConfigError> {
        let bad = |why: &str| {
            AuthConfigError::Invalid(format!(
                "the public MCP URL {url:?} (WARDEN_PUBLIC_URL) {why}; set it to the URL clients use, \
                 e.g. https://warden.example.com/mcp"
            ))
        };
        let rest = url
            .strip_prefix("https://")
            .or_else(|| url.strip_prefix("http://"))
            .ok_or_else(|| bad("must start with https:// or http://"))?;
        if !url
            .bytes()
            .all(|b| b.is_ascii_graphic() && b != b'"' && b != b'\\')
        {
            return Err(bad("must be printable ASCII without quotes"));
        }
        if url.contains(['#', '?']) {
            return Err(bad("must not have a query or fragment (RFC 8707)"));
        }
        let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
        if authority.is_empty() {
            return Err(bad("has no host"));
        }
        Ok(Self {
            url: url.to_string(),
            origin: url[..url.len() - rest.len() + authority.len()].to_string(),
            path: path.trim_end_matches('/').to_string(),
        })
    }

    /// Where clients find the metadata: the well-known prefix inserted
    /// between the origin and the path (RFC 9728 §3.1).
    fn metadata_url(&self) -> String {
        format!("{}{WELL_KNOWN}{}", self.origin, self.path)
    }
}

/// Whether authentication is asked for (`WARDEN_API_TOKENS_FILE` or
/// `WARDEN_OAUTH_ISSUER` set), before anything is read or fetched: the
/// server decides from it whether it may bind a non-loopback address, and
/// the settings themselves are checked after binding (the OAuth audience
/// defaults to the bound URL).
pub(crate) fn configured() -> bool {
    [TOKENS_FILE_VAR, ISSUER_VAR]
        .iter()
        .any(|name| warden_core::config::var(name).is_some_and(|v| !v.trim().is_empty()))
}

/// The configured authentication: API tokens, OAuth, or both.
pub(crate) struct Auth {
    resource: Resource,
    /// Shown to users by clients (RFC 9728 `resource_name`).
    resource_name: String,
    tokens: Option<TokenTable>,
    oauth: Option<OAuth>,
}

impl std::fmt::Debug for Auth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Auth")
            .field("resource", &self.resource.url)
            .field("api_tokens", &self.tokens.as_ref().map(TokenTable::len))
            .field("oauth", &self.oauth)
            .finish()
    }
}

impl Auth {
    /// Reads `WARDEN_API_TOKENS_FILE` and `WARDEN_OAUTH_*`. `Ok(None)` when
    /// neither is set. `resource` is the canonical URL of the MCP endpoint
    /// (the default OAuth audience and the RFC 9728 `resource`). Blocking:
    /// reads the token file and loads the JWKS (a URL within
    /// `JWKS_FETCH_TIMEOUT`).
    pub(crate) fn from_env(resource: &str) -> Result<Option<Self>, AuthConfigError> {
        Self::from_lookup(resource, warden_core::config::var)
    }

    fn from_lookup(
        resource: &str,
        var: impl Fn(&str) -> Option<String>,
    ) -> Result<Option<Self>, AuthConfigError> {
        let get = |name: &str| var(name).map(|v| v.trim().to_string()).filter(|v| !v.is_empty());
        let tokens = get(TOKENS_FILE_VAR)
            .map(|path| TokenTable::load(Path::new(&path)))
            .transpose()?;
        let oauth = oauth_from_settings(resource, &get)?;
        if tokens.is_none() && oauth.is_none() {
            return Ok(None);
        }
        Ok(Some(Self {
            resource: Resource::parse(resource)?,
            resource_name: "Warden".into(),
            tokens,
            oauth,
        }))
    }

    /// Sets the human-readable `resource_name` of the metadata (default
    /// "Warden"), e.g. to the application's name.
    pub(crate) fn with_resource_name(mut self, name: &str) -> Self {
        self.resource_name = name.to_string();
        self
    }

    /// Routes served without authentication: the RFC 9728 metadata at
    /// `/.well-known/oauth-protected-resource`, its `/mcp` form and the form
    /// for the resource's own path. Empty when OAuth is not configured
    /// (API tokens need no discovery).
    pub(crate) fn public_routes(self: &Arc<Self>) -> axum::Router {
        reply::metadata_routes(self)
    }

    /// The endpoint's authentication step: puts the caller's [`Principal`]
    /// and [`Scopes`] into the request's extensions, or answers 400
    /// (malformed `Authorization`), 401 (no or bad credentials) or 403 (a
    /// JWT without a required scope), with `WWW-Authenticate` and a JSON
    /// body `{"code", "message"}`.
    pub(crate) async fn admit(&self, mut request: Request) -> Result<Request, super::refusal::Refused> {
        match self.authenticate(request.headers()).await {
            Ok((principal, scopes)) => {
                request.extensions_mut().insert(principal);
                request.extensions_mut().insert(scopes);
                Ok(request)
            }
            Err(rejection) => Err(Box::new(reply::reject(self, rejection))),
        }
    }

    /// The principal the request's bearer token stands for, and the scopes
    /// it grants (an API token grants none).
    async fn authenticate(&self, headers: &HeaderMap) -> Result<(Principal, Scopes), Rejection> {
        let token = bearer_token(headers)?;
        if let Some(principal) = self.tokens.as_ref().and_then(|t| t.lookup(token)) {
            return Ok((principal, Scopes::default()));
        }
        match &self.oauth {
            Some(oauth) if token.split('.').count() == 3 => {
                oauth.validate(token).await.map_err(Rejection::from)
            }
            _ => Err(Rejection::UnknownToken),
        }
    }
}

/// The token of the one `Authorization: Bearer …` header.
fn bearer_token(headers: &HeaderMap) -> Result<&str, Rejection> {
    let mut values = headers.get_all(AUTHORIZATION).iter();
    let Some(value) = values.next() else {
        return Err(Rejection::Missing);
    };
    if values.next().is_some() {
        return Err(Rejection::Malformed("send one Authorization header, not several"));
    }
    if value.len() > MAX_AUTHORIZATION_BYTES {
        return Err(Rejection::Malformed("the Authorization header is too long"));
    }
    let value = value
        .to_str()
        .map_err(|_| Rejection::Malformed("the Authorization header must be printable ASCII"))?;
    let (scheme, token) = value.split_once(' ').unwrap_or((value, ""));
    if !scheme.eq_ignore_ascii_case("bearer") {
        return Err(Rejection::NotBearer);
    }
    let token = token.trim_matches(' ');
    if token.is_empty() {
        return Err(Rejection::Malformed("the Bearer token is empty"));
    }
    // RFC 6750 b64token: 1*( ALPHA / DIGIT / "-" / "." / "_" / "~" / "+" / "/" ) *"="
    let body = token.trim_end_matches('=');
    let valid = !body.is_empty()
        && body
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~' | b'+' | b'/'));
    if !valid {
        return Err(Rejection::Malformed(
            "the Bearer token has characters a token cannot contain",
        ));
    }
    Ok(token)
}

/// The OAuth settings, or `None` when no `WARDEN_OAUTH_*` is set. Partial
/// settings are an error naming the missing variable.
fn oauth_from_settings(
    resource: &str,
    get: &impl Fn(&str) -> Option<String>,
) -> Result<Option<OAuth>, AuthConfigError> {
    let issuer = get(ISSUER_VAR);
    let jwks = get(jwks::JWKS_VAR);
    let audience = get(AUDIENCE_VAR);
    let scopes = get(SCOPES_VAR);
    if issuer.is_none() && jwks.is_none() && audience.is_none() && scopes.is_none() {
        return Ok(None);
    }
    let needs = || {
        format!(
            "OAuth needs {ISSUER_VAR} (the authorization server's issuer URL) and {} (its JWKS URL or a \
             file); set it, or unset every WARDEN_OAUTH_* variable to turn OAuth off",
            jwks::JWKS_VAR
        )
    };
    let issuer = issuer.ok_or_else(|| AuthConfigError::Missing {
        var: ISSUER_VAR,
        needs: needs(),
    })?;
    let jwks = jwks.ok_or_else(|| AuthConfigError::Missing {
        var: jwks::JWKS_VAR,
        needs: needs(),
    })?;
    if !(issuer.starts_with("https://") || issuer.starts_with("http://")) {
        return Err(AuthConfigError::Invalid(format!(
            "{ISSUER_VAR} must be the issuer's URL (https://…), exactly as its tokens' `iss` claim says"
        )));
    }
    let scopes = oauth::parse_scopes(scopes.as_deref().unwrap_or_default())?;
    let audience = audience.unwrap_or_else(|| resource.to_string());
    Ok(Some(OAuth::new(issuer, audience, scopes, &jwks)?))
}

#[cfg(test)]
mod tests;
