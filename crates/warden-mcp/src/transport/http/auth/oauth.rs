//! OAuth 2.1 resource server: checks a bearer JWT issued by the configured
//! authorization server, as the MCP authorization spec asks.
//!
//! A token is accepted when its signature verifies with a key of the
//! issuer's JWKS (asymmetric algorithms only, the algorithm fixed by that
//! key, never `none` or HMAC), `iss` equals `WARDEN_OAUTH_ISSUER`, `aud`
//! contains the audience (this server's resource URL unless
//! `WARDEN_OAUTH_AUDIENCE` says otherwise: RFC 8707, so a token minted for
//! another service is refused), `exp` has not passed and `nbf` has (with
//! [`JWT_LEEWAY`]), and `sub` names a valid principal. Every scope of
//! `WARDEN_OAUTH_SCOPES` must then be granted (`scope`, space-separated, or
//! `scp`, a string or a list), else the answer is 403.

use std::sync::Arc;

use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::{Validation, decode, decode_header};
use serde::Deserialize;

use super::jwks::{Jwks, JwksSource};
use crate::limits::JWT_LEEWAY;
use warden_calls::tenant::{Principal, Scopes};

pub(super) const ISSUER_VAR: &str = "WARDEN_OAUTH_ISSUER";
pub(super) const AUDIENCE_VAR: &str = "WARDEN_OAUTH_AUDIENCE";
pub(super) const SCOPES_VAR: &str = "WARDEN_OAUTH_SCOPES";

/// The OAuth settings and the issuer's keys.
#[derive(Debug)]
pub(super) struct OAuth {
    pub(super) issuer: String,
    pub(super) audience: String,
    /// Scopes every token must carry; empty when none are required.
    pub(super) scopes: Vec<String>,
    jwks: Arc<Jwks>,
}

/// Why a JWT was not accepted.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum JwtRejection {
    /// 401 `invalid_token`: a short `error_description` for the header and
    /// a message for the body naming what to fix.
    Invalid {
        description: &'static str,
        message: String,
    },
    /// 403 `insufficient_scope`: the required scopes the token lacks.
    MissingScopes(Vec<String>),
}

/// The claims Warden reads beyond those `jsonwebtoken` validates.
#[derive(Deserialize)]
struct Claims {
    /// Optional here so that a token without it fails validation as a
    /// missing claim rather than as unreadable JSON.
    #[serde(default)]
    sub: Option<String>,
    #[serde(default)]
    scope: Option<String>,
    #[serde(default)]
    scp: Option<Scp>,
}

/// `scp` as some issuers write it: a list, or one space-separated string.
#[derive(Deserialize)]
#[serde(untagged)]
enum Scp {
    One(String),
    Many(Vec<String>),
}

impl OAuth {
    /// Builds the validator; `jwks` is loaded once here (blocking: a URL is
    /// fetched within `JWKS_FETCH_TIMEOUT`).
    pub(super) fn new(
        issuer: String,
        audience: String,
        scopes: Vec<String>,
        jwks: &str,
    ) -> Result<Self, super::jwks::JwksError> {
        let source = JwksSource::parse(jwks)?;
        let jwks = Jwks::load(source)?;
        Ok(Self {
            issuer,
            audience,
            scopes,
            jwks: Arc::new(jwks),
        })
    }

    #[cfg(test)]
    pub(super) fn with_jwks(issuer: &str, audience: &str, scopes: &[&str], jwks: Jwks) -> Self {
        Self {
            issuer: issuer.into(),
            audience: audience.into(),
            scopes: scopes.iter().map(|s| s.to_string()).collect(),
            jwks: Arc::new(jwks),
        }
    }

    /// The principal a valid token acts for (its `sub`) and the scopes it
    /// grants (for the policy's scope rules).
    pub(super) async fn validate(&self, token: &str) -> Result<(Principal, Scopes), JwtRejection> {
        let header = decode_header(token).map_err(|_| {
            invalid(
                "malformed token",
                "the bearer token is neither a known API token nor a JWT signed with an asymmetric \
                 algorithm (RS*, PS*, ES256, ES384, EdDSA); send an access token from the issuer",
            )
        })?;
        let key = self.jwks.key(header.kid.as_deref()).await.ok_or_else(|| {
            invalid(
                "unknown signing key",
                &format!(
                    "the token's signing key (kid {}) is not in the issuer's JWKS; get a new token from {}",
                    header
                        .kid
                        .as_deref()
                        .map_or("absent".into(), |k| format!("{k:?}")),
                    self.issuer
                ),
            )
        })?;
        if !key.algorithms.contains(&header.alg) {
            return Err(invalid(
                "algorithm not allowed",
                &format!(
                    "the token is signed with {:?}, which its key does not allow; get a new token from {}",
                    header.alg, self.issuer
                ),
            ));
        }
        let mut validation = Validation::new(header.alg);
        validation.algorithms = vec![header.alg];
        validation.set_issuer(&[&self.issuer]);
        validation.set_audience(&[&self.audience]);
        validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
        validation.validate_nbf = true;
        validation.leeway = JWT_LEEWAY.as_secs();
        let claims = decode::<Claims>(token, &key.key, &validation)
            .map_err(|e| self.rejection(e.kind()))?
            .claims;
        let sub = claims.sub.as_deref().unwrap_or_default();
        let principal = Principal::authenticated(sub).map_err(|e| {
            invalid(
                "invalid sub",
                &format!("the token's `sub` cannot name a principal: {e}"),
            )
        })?;
        let granted = granted_scopes(&claims);
        let missing: Vec<String> = self
            .scopes
            .iter()
            .filter(|s| !granted.contains(&s.as_str()))
            .cloned()
            .collect();
        if !missing.is_empty() {
            return Err(JwtRejection::MissingScopes(missing));
        }
        Ok((principal, Scopes::new(granted)))
    }

    fn rejection(&self, kind: &ErrorKind) -> JwtRejection {
        let fresh = format!("get a new token from {}", self.issuer);
        match kind {
            ErrorKind::ExpiredSignature => {
                invalid("token expired", &format!("the token has expired; {fresh}"))
            }
            ErrorKind::ImmatureSignature => invalid(
                "token not yet valid",
                "the token's `nbf` is in the future; check the clocks of the client and the issuer",
            ),
            ErrorKind::InvalidAudience => invalid(
                "wrong audience",
                &format!(
                    "the token's `aud` does not include {}; request the token for this resource \
                     (the OAuth `resource` parameter)",
                    self.audience
                ),
            ),
            ErrorKind::InvalidIssuer => invalid(
                "wrong issuer",
                &format!("the token's `iss` is not {}; {fresh}", self.issuer),
            ),
            ErrorKind::InvalidSignature => invalid(
                "bad signature",
                &format!("the token's signature does not verify; {fresh}"),
            ),
            ErrorKind::MissingRequiredClaim(claim) => invalid(
                "missing claim",
                &format!("the token has no `{claim}` claim; {fresh}"),
            ),
            _ => invalid("invalid token", &format!("the token is not a valid JWT; {fresh}")),
        }
    }
}

fn invalid(description: &'static str, message: &str) -> JwtRejection {
    JwtRejection::Invalid {
        description,
        message: message.to_string(),
    }
}

fn granted_scopes(claims: &Claims) -> Vec<&str> {
    let mut granted: Vec<&str> = claims
        .scope
        .as_deref()
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    match &claims.scp {
        Some(Scp::One(s)) => granted.extend(s.split_whitespace()),
        Some(Scp::Many(list)) => granted.extend(list.iter().map(String::as_str)),
        None => {}
    }
    granted
}

/// `WARDEN_OAUTH_SCOPES`: space- or comma-separated scope tokens (RFC 6749
/// §3.3: printable ASCII without space, `"` or `\`, since they are quoted
/// in `WWW-Authenticate`).
pub(super) fn parse_scopes(value: &str) -> Result<Vec<String>, BadScope> {
    let mut scopes: Vec<String> = Vec::new();
    for scope in value.split([' ', ',', '\t']).filter(|s| !s.is_empty()) {
        if !warden_calls::tenant::Scopes::is_token(scope) {
            return Err(BadScope);
        }
        if !scopes.iter().any(|s| s == scope) {
            scopes.push(scope.to_string());
        }
    }
    Ok(scopes)
}

/// A `WARDEN_OAUTH_SCOPES` entry no scope can be.
#[derive(Debug, thiserror::Error)]
#[error(
    "{SCOPES_VAR} holds a scope with a character scopes cannot contain (`\"`, `\\`, control or \
     non-ASCII); separate scopes with spaces or commas"
)]
pub(crate) struct BadScope;

#[cfg(test)]
mod tests;
