//! The OAuth scopes a caller's access token granted, carried beside its
//! [`super::Principal`] so the policy (`crate::policy`) can name scopes as
//! rule subjects.
//!
//! Decided once at the transport edge, like the principal: the HTTP
//! authentication layer reads them from a JWT's `scope`/`scp`; an API token
//! and the local operator (stdio, the CLI) hold none. They travel in the
//! call's [`crate::events::Origin`] to every path a guard is reached by,
//! and a queued MCP task stores them with its request so that the node
//! claiming it later checks the same scopes the request carried (a task
//! restored without them would be refused by every scope rule, never
//! allowed more).
//!
//! Kept apart from the principal on purpose: ownership, limits and lookups
//! compare principals by name, and a token with other scopes is still the
//! same principal.

use std::sync::Arc;

/// A caller's granted scopes. Cheap to clone; empty by default.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Scopes(Arc<[String]>);

impl Scopes {
    /// The scopes `granted`, deduplicated (order kept, for messages).
    pub fn new<I, S>(granted: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let mut scopes: Vec<String> = Vec::new();
        for scope in granted {
            let scope = scope.into();
            if !scopes.contains(&scope) {
                scopes.push(scope);
            }
        }
        Self(scopes.into())
    }

    /// Whether `scope` can be a scope at all (RFC 6749 §3.3: one or more
    /// printable ASCII characters other than space, `"` and `\`, so that
    /// it can be quoted in `WWW-Authenticate`).
    pub fn is_token(scope: &str) -> bool {
        !scope.is_empty()
            && scope
                .bytes()
                .all(|b| b == 0x21 || (0x23..=0x5b).contains(&b) || (0x5d..=0x7e).contains(&b))
    }

    /// Whether `scope` was granted.
    pub fn holds(&self, scope: &str) -> bool {
        self.0.iter().any(|s| s == scope)
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = &str> {
        self.0.iter().map(String::as_str)
    }

    /// As a queued task's request stores them.
    pub fn to_vec(&self) -> Vec<String> {
        self.0.to_vec()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn granted_scopes_are_deduplicated_and_looked_up_exactly() {
        let scopes = Scopes::new(["quant:read", "mcp:tools", "quant:read"]);
        assert_eq!(scopes.to_vec(), vec!["quant:read", "mcp:tools"]);
        assert!(scopes.holds("quant:read") && !scopes.holds("quant"));
        assert!(Scopes::default().is_empty());
        assert!(Scopes::is_token("quant:read") && Scopes::is_token("a/b~!"));
        for bad in ["", "a b", "a\"b", "a\\b", "é"] {
            assert!(!Scopes::is_token(bad), "{bad:?}");
        }
    }
}
