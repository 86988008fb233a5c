//! Tenants: who a request acts for.
//!
//! Every request carries a [`Principal`]: the authenticated caller over HTTP
//! (an API token's principal or a JWT's `sub`), [`Principal::local`] over
//! stdio, where the one client is whoever started the process. Tasks,
//! artifacts and resources belong to the principal that created them
//! (recorded with the task, see [`crate::artifacts::owner`]; lookups go
//! through [`crate::artifacts::View`]), and per-principal limits are
//! counted against it ([`limits`]). Beside it travel the OAuth scopes its
//! token granted ([`Scopes`]), which only the policy reads.

pub mod limits;
mod scopes;

pub use scopes::Scopes;

use std::sync::Arc;

/// The name of an authenticated caller. Cheap to clone.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Principal(Arc<str>);

/// The principal of a stdio client and of the command line.
pub const LOCAL: &str = "local";

/// The longest principal name accepted: 256 bytes.
pub const MAX_PRINCIPAL_BYTES: usize = 256;

/// Why a string is not a principal name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PrincipalError {
    #[error("a principal name must not be empty")]
    Empty,
    #[error("a principal name is at most {MAX_PRINCIPAL_BYTES} bytes")]
    TooLong,
    #[error("a principal name must not contain control characters")]
    Control,
    #[error(
        "'{LOCAL}' is reserved for the server's operator (the stdio client); give this caller another name"
    )]
    Reserved,
}

impl Principal {
    /// The stdio client's principal.
    pub fn local() -> Self {
        Self(Arc::from(LOCAL))
    }

    /// A principal named by a token file or a JWT `sub`. Names are shown in
    /// events and stored beside tasks, so control characters are refused.
    pub fn new(name: &str) -> Result<Self, PrincipalError> {
        if name.is_empty() {
            return Err(PrincipalError::Empty);
        }
        if name.len() > MAX_PRINCIPAL_BYTES {
            return Err(PrincipalError::TooLong);
        }
        if name.chars().any(char::is_control) {
            return Err(PrincipalError::Control);
        }
        Ok(Self(Arc::from(name)))
    }

    /// A principal an HTTP credential stands for (an API token's line, a
    /// JWT's `sub`): as [`Principal::new`], and never [`LOCAL`]. `local` is
    /// the operator, exempt from every per-principal limit and owner of the
    /// stdio client's tasks; a credential naming it would inherit both.
    pub fn authenticated(name: &str) -> Result<Self, PrincipalError> {
        if name == LOCAL {
            return Err(PrincipalError::Reserved);
        }
        Self::new(name)
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl Default for Principal {
    fn default() -> Self {
        Self::local()
    }
}

impl std::fmt::Display for Principal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_checked() {
        assert_eq!(Principal::new("alice").map(|p| p.to_string()), Ok("alice".into()));
        assert_eq!(Principal::new(""), Err(PrincipalError::Empty));
        assert_eq!(Principal::new("a\nb"), Err(PrincipalError::Control));
        assert_eq!(
            Principal::new(&"x".repeat(MAX_PRINCIPAL_BYTES + 1)),
            Err(PrincipalError::TooLong)
        );
        assert_eq!(Principal::default().as_str(), LOCAL);
    }

    #[test]
    fn credentials_never_name_the_operator() {
        assert_eq!(Principal::authenticated(LOCAL), Err(PrincipalError::Reserved));
        assert!(Principal::authenticated("Local").is_ok());
        assert!(Principal::new(LOCAL).is_ok(), "stored owners may be the operator");
    }
}
