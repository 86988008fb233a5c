//! Who may call what: the operator's policy file (`WARDEN_POLICY_FILE`).
//!
//! Without a file every principal may call every tool (the default, as
//! before policies existed). With one, each tool — a guard, a built-in,
//! `run_coding_task` — is allowed or denied per principal, and the
//! executor enforces it on every path a guard is reached by: direct calls,
//! `run_batch`, `check_backtest`, and guard calls from scripts and coding
//! tasks (in-process and isolated guards at the executor, inline pure
//! guards in the script worker, which is told the run's denied guards).
//! `tools/list` shows each principal only what it may call, and a refusal
//! names the rule that refused. The local operator (stdio, the CLI) is
//! subject to the same file as `local`.
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
//! ```
//!
//! A target is a tool name, `category:<name>` (a guard category), `guards`
//! (every guard), `builtins` (every built-in tool) or `*`. Names that are
//! neither a tool nor a category of this app are refused when the server
//! starts, naming the rule and the field: a typo must not silently allow
//! or deny nothing. OAuth scopes are not rule subjects yet: a principal is
//! matched by its name (an OAuth token's `sub`, an API token's name).

use std::path::Path;

use serde::Deserialize;

use crate::error::{GuardError, codes};
use crate::registry::{BuiltinTool, Registry};

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
    principals: Vec<String>,
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
    /// `None`: anyone (`*`).
    principals: Option<Vec<String>>,
    allow: Vec<Target>,
    deny: Vec<Target>,
}

/// The loaded policy (see the module doc).
#[derive(Debug, Clone)]
pub struct Policy {
    default: Effect,
    rules: Vec<Rule>,
    /// Where it was read from, for messages.
    source: String,
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

impl Policy {
    /// Reads [`POLICY_FILE_VAR`]'s file, if the variable is set, checked
    /// against `registry`.
    pub fn from_env(registry: &Registry) -> Result<Option<Self>, String> {
        let Some(path) = crate::config::var(POLICY_FILE_VAR) else {
            return Ok(None);
        };
        Self::read(Path::new(&path), registry).map(Some)
    }

    /// Reads and checks the policy file at `path`.
    pub fn read(path: &Path, registry: &Registry) -> Result<Self, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("{POLICY_FILE_VAR}: cannot read {}: {e}", path.display()))?;
        Self::parse(&text, &path.display().to_string(), registry)
    }

    /// Parses and checks a policy's text; `source` names it in messages.
    pub fn parse(text: &str, source: &str, registry: &Registry) -> Result<Self, String> {
        let file: File = toml::from_str(text).map_err(|e| format!("{POLICY_FILE_VAR} ({source}): {e}"))?;
        let mut rules = Vec::with_capacity(file.rules.len());
        for (i, rule) in file.rules.into_iter().enumerate() {
            let label = match &rule.name {
                Some(name) => format!("rule {} ({name:?})", i + 1),
                None => format!("rule {}", i + 1),
            };
            let at = |field: &str| format!("{POLICY_FILE_VAR} ({source}): rules[{i}].{field}");
            if rule.principals.is_empty() {
                return Err(format!(
                    "{}: name at least one principal, or \"*\" for anyone",
                    at("principals")
                ));
            }
            if rule.allow.is_empty() && rule.deny.is_empty() {
                return Err(format!("{}: give `allow` or `deny` (or both)", at("allow")));
            }
            let principals = if rule.principals.iter().any(|p| p == "*") {
                None
            } else {
                Some(rule.principals)
            };
            let targets = |field: &str, names: Vec<String>| -> Result<Vec<Target>, String> {
                names
                    .into_iter()
                    .map(|name| target(&name, registry).map_err(|why| format!("{}: {why}", at(field))))
                    .collect()
            };
            rules.push(Rule {
                label,
                principals,
                allow: targets("allow", rule.allow)?,
                deny: targets("deny", rule.deny)?,
            });
        }
        Ok(Self {
            default: file.default,
            rules,
            source: source.to_string(),
        })
    }

    /// Whether `principal` may call `tool`: `Ok`, or the refusal naming
    /// the rule (or the default) that decided.
    pub fn check(&self, principal: &str, tool: Tool<'_>) -> Result<(), GuardError> {
        for rule in &self.rules {
            if let Some(principals) = &rule.principals
                && !principals.iter().any(|p| p == principal)
            {
                continue;
            }
            if rule.deny.iter().any(|t| t.names(tool)) {
                return Err(self.refusal(principal, tool, &format!("{} denies it", rule.label)));
            }
            if rule.allow.iter().any(|t| t.names(tool)) {
                return Ok(());
            }
        }
        match self.default {
            Effect::Allow => Ok(()),
            Effect::Deny => {
                Err(self.refusal(principal, tool, "no rule allows it and the default is \"deny\""))
            }
        }
    }

    /// Whether `principal` may call `tool`.
    pub fn allows(&self, principal: &str, tool: Tool<'_>) -> bool {
        self.check(principal, tool).is_ok()
    }

    fn refusal(&self, principal: &str, tool: Tool<'_>, why: &str) -> GuardError {
        GuardError::new(
            codes::FORBIDDEN,
            format!(
                "'{}' may not be called by principal '{principal}': {why} (policy {}); ask the operator to change the policy, or use a tool tools/list shows you",
                tool.name, self.source
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
fn target(name: &str, registry: &Registry) -> Result<Target, String> {
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
                    ));
                }
                Target::Category(category.to_string())
            } else if registry.get(name).is_some() || BuiltinTool::from_name(name).is_some() {
                Target::Tool(name.to_string())
            } else {
                return Err(format!(
                    "'{name}' is not a tool of this server: give a guard or built-in tool name, \"category:<name>\", \"guards\", \"builtins\" or \"*\""
                ));
            }
        }
    })
}

fn categories(registry: &Registry) -> Vec<String> {
    let mut all: Vec<String> = registry.iter().map(|g| g.category.clone()).collect();
    all.sort_unstable();
    all.dedup();
    all
}
