//! Who may call what: the operator's policy file (`WARDEN_POLICY_FILE`).
//!
//! Without a file every principal may call every tool (the default, as
//! before policies existed). With one, each tool — a guard, a built-in,
//! `run_coding_task` — is allowed or denied per principal, and the
//! executor enforces it on every path a guard is reached by: direct calls,
//! `run_batch`, `check_backtest`, and guard calls from scripts and coding
//! tasks (in-process and isolated guards at the executor, inline pure
//! guards in the script worker, which is told the run's denied guards).
//! `tools/list` shows each principal only what it may call. A guard the
//! policy denies a caller is, for that caller, a guard that does not exist
//! (`warden_core::registry::Visible`): never listed, described, counted
//! or suggested, and called it answers as an unknown name. A built-in,
//! whose name is public, is refused naming the rule that refused — never
//! the file's path, which is the operator's business. The local operator
//! (stdio, the CLI) is subject to the same file as `local`.
//!
//! The file is TOML, reviewed like a firewall's rules: the first rule
//! that matches the caller and names the tool decides (a rule's `deny`
//! before its `allow`); no such rule, `default` decides.
//!
//! ```toml
//! # What a caller no rule decides for may call: "allow" (everything) or "deny".
//! default = "deny"
//!
//! [[rules]]
//! name = "analysts"
//! principals = ["alice", "bob"]            # principal names, or "*" for anyone
//! allow = ["category:pricing", "run_script", "builtins"]
//! deny = ["run_coding_task"]
//!
//! [[rules]]
//! name = "quants"
//! scopes = ["quant:read"]                  # OAuth scopes the token must all hold
//! allow = ["category:pricing"]
//! ```
//!
//! A rule names its subjects with `principals`, `scopes` or both, and
//! matches a caller when every subject it names matches: the principal is
//! one of `principals` (by name: an OAuth token's `sub`, an API token's
//! name, `local` over stdio), and the caller's access token holds *every*
//! scope of `scopes` (as `WARDEN_OAUTH_SCOPES` requires every scope; two
//! rules say "either"). Only OAuth tokens carry scopes: an API token and the
//! local operator hold none, so a rule with `scopes` never matches them.
//!
//! A target is a tool name, `category:<name>` (a guard category), `guards`
//! (every guard), `builtins` (every built-in tool) or `*`. Names that are
//! neither a tool nor a category of this app are refused when the server
//! starts, naming the rule and the field: a typo must not silently allow
//! or deny nothing. A refusal names the rule that decided and, when an
//! earlier rule would have allowed the tool to a token with more scopes,
//! that rule and the scopes missing.

use std::path::Path;

use serde::Deserialize;

use crate::tenant::Scopes;
use warden_core::error::{GuardError, codes};
use warden_core::registry::{BuiltinTool, Registry};

/// The environment variable naming the policy file.
pub const POLICY_FILE_VAR: &str = "WARDEN_POLICY_FILE";

/// What the policy says when no rule decides.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Effect {
    Allow,
    Deny,
}

/// The policy as its file spells it.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default = "allow")]
    default: Effect,
    #[serde(default)]
    rules: Vec<RuleFile>,
}

fn allow() -> Effect {
    Effect::Allow
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RuleFile {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    principals: Option<Vec<String>>,
    #[serde(default)]
    scopes: Option<Vec<String>>,
    #[serde(default)]
    allow: Vec<String>,
    #[serde(default)]
    deny: Vec<String>,
}

/// Which tools a rule's `allow` or `deny` names.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Target {
    Any,
    Guards,
    Builtins,
    Category(String),
    Tool(String),
}

/// One rule, checked.
#[derive(Debug, Clone)]
struct Rule {
    /// `rule 2 ("analysts")`: how refusals name it.
    label: String,
    /// `None`: anyone (`*`, or no `principals` given).
    principals: Option<Vec<String>>,
    /// Scopes the caller's token must all hold; empty: no condition.
    scopes: Vec<String>,
    allow: Vec<Target>,
    deny: Vec<Target>,
}

/// The loaded policy (see the module doc).
#[derive(Debug, Clone)]
pub struct Policy {
    default: Effect,
    rules: Vec<Rule>,
}

/// A tool as the policy sees it.
#[derive(Debug, Clone, Copy)]
pub struct Tool<'a> {
    pub name: &'a str,
    /// A guard's category; `None` for a built-in.
    pub category: Option<&'a str>,
}

impl Tool<'_> {
    fn is_builtin(&self) -> bool {
        self.category.is_none()
    }
}

/// Why a policy file cannot be used: the message names the file (or
/// [`POLICY_FILE_VAR`]), the rule and the field, and says what to fix.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct PolicyError(String);

impl From<String> for PolicyError {
    fn from(message: String) -> Self {
        Self(message)
    }
}

impl From<&str> for PolicyError {
    fn from(message: &str) -> Self {
        Self(message.to_string())
    }
}

impl Policy {
    /// Reads [`POLICY_FILE_VAR`]'s file, if the variable is set, checked
    /// against `registry`.
    pub fn from_env(registry: &Registry) -> Result<Option<Self>, PolicyError> {
        let Some(path) = warden_core::config::var(POLICY_FILE_VAR) else {
            return Ok(None);
        };
        Self::read(Path::new(&path), registry).map(Some)
    }

    /// Reads and checks the policy file at `path`.
    pub fn read(path: &Path, registry: &Registry) -> Result<Self, PolicyError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("{POLICY_FILE_VAR}: cannot read {}: {e}", path.display()))?;
        Self::parse(&text, &path.display().to_string(), registry)
    }

    /// Parses and checks a policy's text; `source` names it in messages.
    pub fn parse(text: &str, source: &str, registry: &Registry) -> Result<Self, PolicyError> {
        let file: File = toml::from_str(text).map_err(|e| format!("{POLICY_FILE_VAR} ({source}): {e}"))?;
        let mut rules = Vec::with_capacity(file.rules.len());
        for (i, rule) in file.rules.into_iter().enumerate() {
            let label = match &rule.name {
                Some(name) => format!("rule {} ({name:?})", i + 1),
                None => format!("rule {}", i + 1),
            };
            let at = |field: &str| format!("{POLICY_FILE_VAR} ({source}): rules[{i}].{field}");
            let principals = match rule.principals {
                Some(principals) if principals.is_empty() => {
                    return Err(format!(
                        "{}: name at least one principal, or \"*\" for anyone",
                        at("principals")
                    )
                    .into());
                }
                Some(principals) if principals.iter().any(|p| p == "*") => None,
                Some(principals) => Some(principals),
                None if rule.scopes.is_none() => {
                    return Err(format!(
                        "{} / {}: say whom the rule is for: `principals` (names, or \"*\" for anyone), `scopes` (OAuth scopes the token must all hold), or both",
                        at("principals"),
                        at("scopes")
                    ).into());
                }
                None => None,
            };
            let scopes = match rule.scopes {
                Some(scopes) => checked_scopes(scopes).map_err(|why| format!("{}: {why}", at("scopes")))?,
                None => Vec::new(),
            };
            if rule.allow.is_empty() && rule.deny.is_empty() {
                return Err(format!("{}: give `allow` or `deny` (or both)", at("allow")).into());
            }
            let targets = |field: &str, names: Vec<String>| -> Result<Vec<Target>, PolicyError> {
                names
                    .into_iter()
                    .map(|name| target(&name, registry).map_err(|why| format!("{}: {why}", at(field)).into()))
                    .collect()
            };
            rules.push(Rule {
                label,
                principals,
                scopes,
                allow: targets("allow", rule.allow)?,
                deny: targets("deny", rule.deny)?,
            });
        }
        Ok(Self {
            default: file.default,
            rules,
        })
    }

    /// Whether `principal`, holding `scopes`, may call `tool`: `Ok`, or the
    /// refusal naming the rule (or the default) that decided.
    pub fn check(&self, principal: &str, scopes: &Scopes, tool: Tool<'_>) -> Result<(), GuardError> {
        // The first earlier rule that would have allowed the tool to this
        // principal with more scopes: a refusal names it and what is missing.
        let mut near_miss: Option<(&Rule, Vec<&str>)> = None;
        for rule in &self.rules {
            if let Some(principals) = &rule.principals
                && !principals.iter().any(|p| p == principal)
            {
                continue;
            }
            let missing: Vec<&str> = rule
                .scopes
                .iter()
                .map(String::as_str)
                .filter(|s| !scopes.holds(s))
                .collect();
            if !missing.is_empty() {
                if near_miss.is_none()
                    && rule.allow.iter().any(|t| t.names(tool))
                    && !rule.deny.iter().any(|t| t.names(tool))
                {
                    near_miss = Some((rule, missing));
                }
                continue;
            }
            if rule.deny.iter().any(|t| t.names(tool)) {
                let why = format!("{} of the policy denies it", rule.label);
                return Err(self.refusal(principal, tool, &why, near_miss));
            }
            if rule.allow.iter().any(|t| t.names(tool)) {
                return Ok(());
            }
        }
        match self.default {
            Effect::Allow => Ok(()),
            Effect::Deny => Err(self.refusal(
                principal,
                tool,
                "no rule of the policy allows it and its default is \"deny\"",
                near_miss,
            )),
        }
    }

    /// Whether `principal`, holding `scopes`, may call `tool`.
    pub fn allows(&self, principal: &str, scopes: &Scopes, tool: Tool<'_>) -> bool {
        self.check(principal, scopes, tool).is_ok()
    }

    /// A refusal: the tool, the principal, the rule (or the default) that
    /// decided and the near miss, if any. Never the file's path: a caller
    /// has no business knowing where the operator keeps it.
    fn refusal(
        &self,
        principal: &str,
        tool: Tool<'_>,
        why: &str,
        near_miss: Option<(&Rule, Vec<&str>)>,
    ) -> GuardError {
        let hint = match near_miss {
            Some((rule, missing)) => format!(
                "; {} would allow it to a token holding the scope(s) {}, which this caller's token lacks",
                rule.label,
                missing.join(" ")
            ),
            None => String::new(),
        };
        GuardError::new(
            codes::FORBIDDEN,
            format!(
                "'{}' may not be called by principal '{principal}': {why}{hint}; ask the operator to change the policy, or use a tool tools/list shows you",
                tool.name
            ),
        )
    }
}

impl Target {
    fn names(&self, tool: Tool<'_>) -> bool {
        match self {
            Target::Any => true,
            Target::Guards => !tool.is_builtin(),
            Target::Builtins => tool.is_builtin(),
            Target::Category(category) => tool.category == Some(category.as_str()),
            Target::Tool(name) => tool.name == name,
        }
    }
}

/// A target name, checked against the app: a tool, a category, or one of
/// the words `guards`, `builtins`, `*`.
fn target(name: &str, registry: &Registry) -> Result<Target, PolicyError> {
    Ok(match name {
        "*" => Target::Any,
        "guards" => Target::Guards,
        "builtins" => Target::Builtins,
        _ => {
            if let Some(category) = name.strip_prefix("category:") {
                if !registry.iter().any(|g| g.category == category) {
                    return Err(format!(
                        "no guard has the category '{category}'; the categories are: {}",
                        categories(registry).join(", ")
                    )
                    .into());
                }
                Target::Category(category.to_string())
            } else if registry.get(name).is_some() || BuiltinTool::from_name(name).is_some() {
                Target::Tool(name.to_string())
            } else {
                return Err(format!(
                    "'{name}' is not a tool of this server: give a guard or built-in tool name, \"category:<name>\", \"guards\", \"builtins\" or \"*\""
                ).into());
            }
        }
    })
}

/// A rule's `scopes`, checked: at least one, each a scope token (RFC 6749
/// §3.3, [`Scopes::is_token`]), and no `*` (a token
/// never holds a wildcard; leave `scopes` out to match any token).
fn checked_scopes(scopes: Vec<String>) -> Result<Vec<String>, PolicyError> {
    if scopes.is_empty() {
        return Err("name at least one scope, or leave `scopes` out to match any token".into());
    }
    for scope in &scopes {
        if scope == "*" {
            return Err(
                "\"*\" is not a scope: leave `scopes` out to match any token, or name the scopes it must hold"
                    .into(),
            );
        }
        if !Scopes::is_token(scope) {
            return Err(format!(
                "{scope:?} is not a scope: a scope is printable ASCII without spaces, `\"` or `\\`; give each scope as its own string"
            ).into());
        }
    }
    Ok(scopes)
}

fn categories(registry: &Registry) -> Vec<String> {
    let mut all: Vec<String> = registry.iter().map(|g| g.category.clone()).collect();
    all.sort_unstable();
    all.dedup();
    all
}

#[cfg(test)]
mod tests {
    use super::*;

    const RUN_SCRIPT: Tool<'static> = Tool {
        name: "run_script",
        category: None,
    };

    fn policy(text: &str) -> Result<Policy, PolicyError> {
        let registry = Registry::new(Vec::new()).expect("an empty registry");
        Policy::parse(text, "test.toml", &registry)
    }

    #[test]
    fn a_scope_rule_matches_only_a_token_holding_every_scope_it_names() {
        let policy = policy(
            "default = \"deny\"\n[[rules]]\nname = \"quants\"\nscopes = [\"quant:read\", \"quant:run\"]\nallow = [\"run_script\"]\n",
        )
        .expect("valid");
        let both = Scopes::new(["quant:run", "openid", "quant:read"]);
        assert!(policy.allows("carol", &both, RUN_SCRIPT));
        let refusal = policy
            .check("carol", &Scopes::new(["quant:read"]), RUN_SCRIPT)
            .expect_err("one scope of two");
        assert_eq!(refusal.code, codes::FORBIDDEN);
        assert!(
            refusal
                .message
                .contains("rule 1 (\"quants\") would allow it to a token holding the scope(s) quant:run"),
            "{}",
            refusal.message
        );
        assert!(
            !refusal.message.contains("test.toml"),
            "a refusal never names the file: {}",
            refusal.message
        );
        assert!(
            !policy.allows("local", &Scopes::default(), RUN_SCRIPT),
            "no scopes: an API token or the local operator"
        );
    }

    #[test]
    fn principals_and_scopes_must_both_match_when_both_are_named() {
        let policy = policy(
            "[[rules]]\nprincipals = [\"alice\"]\nscopes = [\"ops\"]\nallow = [\"run_script\"]\n[[rules]]\nprincipals = [\"*\"]\ndeny = [\"run_script\"]\n",
        )
        .expect("valid");
        let ops = Scopes::new(["ops"]);
        assert!(policy.allows("alice", &ops, RUN_SCRIPT));
        assert!(!policy.allows("bob", &ops, RUN_SCRIPT), "another principal");
        let refusal = policy
            .check("alice", &Scopes::default(), RUN_SCRIPT)
            .expect_err("no scope");
        assert!(
            refusal
                .message
                .contains("rule 2 of the policy denies it; rule 1 would allow it"),
            "{}",
            refusal.message
        );
    }

    #[test]
    fn a_rule_without_subjects_or_with_bad_scopes_is_refused_naming_the_field() {
        for (text, field) in [
            ("[[rules]]\ndeny = [\"*\"]\n", "rules[0].scopes"),
            ("[[rules]]\nscopes = []\ndeny = [\"*\"]\n", "rules[0].scopes"),
            (
                "[[rules]]\nscopes = [\"quant read\"]\ndeny = [\"*\"]\n",
                "rules[0].scopes",
            ),
            ("[[rules]]\nscopes = [\"*\"]\ndeny = [\"*\"]\n", "rules[0].scopes"),
            (
                "[[rules]]\nprincipals = []\ndeny = [\"*\"]\n",
                "rules[0].principals",
            ),
        ] {
            let error = policy(text).expect_err(text).to_string();
            assert!(
                error.contains(field) && error.contains(POLICY_FILE_VAR),
                "{text}: {error}"
            );
        }
    }
}
