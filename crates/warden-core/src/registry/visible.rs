//! The registry as one caller sees it.
//!
//! The operator's policy (`warden_calls::policy`) may deny a guard to
//! a caller. For that caller the guard does not exist: every path that
//! names guards (the catalogue tools, a batch's plan, a script's function
//! table and its "did you mean", the unknown-guard error) reads a
//! [`Visible`] instead of the [`Registry`], so a denied guard answers
//! exactly as a name that was never registered, and is never listed or
//! suggested. The registry does not know the policy: the executor builds
//! the view with the names to hide ([`Registry::visible`]).

use std::collections::BTreeSet;

use crate::error::{GuardError, codes};
use crate::guard::Guard;
use crate::registry::{Registry, ScriptFunction};

/// The registry without the guards hidden from one caller (see the
/// module doc). Cheap to build: it borrows the registry.
#[derive(Debug, Clone)]
pub struct Visible<'a> {
    registry: &'a Registry,
    /// Guard names this caller may not know of.
    hidden: BTreeSet<String>,
}

impl Registry {
    /// The registry as a caller sees it when `hidden` names the guards it
    /// may not know of (an empty set: every guard).
    pub fn visible(&self, hidden: BTreeSet<String>) -> Visible<'_> {
        Visible {
            registry: self,
            hidden,
        }
    }
}

impl<'a> Visible<'a> {
    /// The guard called `name`, unless it is hidden.
    pub fn get(&self, name: &str) -> Option<&'a Guard> {
        if self.hidden.contains(name) {
            return None;
        }
        self.registry.get(name)
    }

    /// Whether `name` is a guard this caller may not know of.
    pub fn hides(&self, name: &str) -> bool {
        self.hidden.contains(name)
    }

    /// The guards this caller sees, in name order.
    pub fn iter(&self) -> impl Iterator<Item = &'a Guard> + Clone + '_ {
        self.registry
            .guards
            .values()
            .filter(|g| !self.hidden.contains(&g.name))
    }

    /// Their names, in order.
    pub fn names(&self) -> Vec<&'a str> {
        self.iter().map(|g| g.name.as_str()).collect()
    }

    /// Script-only functions (not tools: the policy does not name them).
    pub fn script_functions(&self) -> impl Iterator<Item = &'a ScriptFunction> {
        self.registry.script_functions()
    }

    /// The script-only function called `name`, if registered.
    pub fn script_function(&self, name: &str) -> Option<&'a ScriptFunction> {
        self.registry.script_function(name)
    }

    /// The whole registry (provenance, receipts): never for naming guards
    /// to the caller.
    pub fn registry(&self) -> &'a Registry {
        self.registry
    }

    /// The one "unknown guard" error: `unknown_guard`, naming the guards
    /// this caller sees. A hidden guard's name gets the same answer as a
    /// name that was never registered.
    pub fn unknown_guard(&self, name: &str) -> GuardError {
        GuardError::new(
            codes::UNKNOWN_GUARD,
            format!(
                "no guard named '{name}'; known guards: {}",
                self.names().join(", ")
            ),
        )
    }
}

#[cfg(test)]
mod tests {
    use crate::error::GuardError;
    use crate::guard::guard;
    use crate::registry::Registry;

    /// Echo input.
    #[derive(serde::Deserialize, schemars::JsonSchema)]
    struct Echo {
        x: f64,
    }

    fn echo(input: Echo) -> Result<f64, GuardError> {
        Ok(input.x)
    }

    #[test]
    fn a_hidden_guard_is_answered_like_one_never_registered() {
        // Same code and message as a name that does not exist; never listed.
        let registry = Registry::new(vec![guard(echo).name("open"), guard(echo).name("secret")]).unwrap();
        let view = registry.visible(["secret".to_string()].into());
        assert!(view.get("secret").is_none() && view.get("open").is_some());
        assert_eq!(view.names(), vec!["open"]);
        let hidden = view.unknown_guard("secret");
        let absent = view.unknown_guard("nothing");
        assert_eq!(hidden.code, absent.code);
        assert_eq!(hidden.message.replace("'secret'", "'nothing'"), absent.message);
        assert!(!absent.message.contains("secret"), "{}", absent.message);
    }
}
