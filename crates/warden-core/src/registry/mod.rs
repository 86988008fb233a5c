//! The registry: every guard an application registered, validated once.
//!
//! Built at startup (in the server and, identically, in every worker) from the
//! app's [`Guard`]s. It owns the rules for names and the deterministic tool
//! order; it never runs a guard (that is the executor's job). It also
//! carries the app's script-only functions ([`ScriptFunction`]), under the
//! same name rules, so the script worker (which rebuilds this registry)
//! can register them into its engine.

pub mod app_resources;
mod builtin_tool;
pub mod prompts;
mod visible;

use std::collections::BTreeMap;

use serde_json::Value;

use crate::guard::{Guard, Mode};
use crate::registry::app_resources::{AppResources, ResourceTemplate, StaticResource};
use crate::registry::prompts::{Prompt, Prompts};

/// The built-in tools: the one list, whose names a guard may not take.
pub use builtin_tool::BuiltinTool;

/// The registry as one caller sees it (the policy's denied guards hidden).
pub use visible::Visible;

/// What an app registers for MCP besides tools: prompts and resources.
#[derive(Debug, Default)]
pub struct McpItems {
    pub prompts: Vec<Prompt>,
    pub static_resources: Vec<StaticResource>,
    pub resource_templates: Vec<ResourceTemplate>,
}

/// The URI prefix of task artifacts as MCP resources: Warden's own
/// namespace, so app resources may not use it.
pub const ARTIFACT_URI_SCHEME: &str = "warden://artifacts/";

/// The URI prefix of Warden's own MCP App views (`ui://warden/task.html`):
/// an app resource there would be hidden by the view, so it is refused.
pub const VIEW_URI_PREFIX: &str = "ui://warden/";

/// Names that scripts use for helpers or that Rhai reserves; a guard with one
/// of these names could not be called from a script.
pub const RESERVED_SCRIPT_NAMES: &[&str] = &[
    "final_answer",
    "to_csv",
    "write_artifact",
    "read_written_artifact",
    "line_chart",
    "bar_chart",
    "scatter_chart",
    "heatmap",
    "report",
    "map_call",
    "search_guards",
    "erf",
    "erfc",
    "norm_pdf",
    "norm_cdf",
    "norm_inv",
    "fmt",
    "fmt_pct",
    "print",
    "debug",
    "eval",
    "import",
    "export",
    "call",
    "curry",
    "type_of",
    "is_def_var",
    "is_def_fn",
    "fn",
    "let",
    "const",
    "if",
    "else",
    "while",
    "loop",
    "for",
    "in",
    "do",
    "until",
    "break",
    "continue",
    "return",
    "throw",
    "try",
    "catch",
    "switch",
    "true",
    "false",
    "this",
    "private",
    "global",
    "timestamp",
    "sleep",
];

/// Longest guard name accepted: 64 characters (the common client limit).
pub const MAX_GUARD_NAME: usize = 64;

/// Why a registration was refused. Messages name the guard and the fix.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum RegistryError {
    #[error("guard name could not be derived (closures have no name): call .name(\"my_guard\") on the guard")]
    Unnamed,
    #[error(
        "guard name '{0}' is invalid: use 1-64 ASCII letters, digits and '_', starting with a letter, so it is both an MCP tool name and a Rhai function name"
    )]
    InvalidName(String),
    #[error("guard name '{0}' is registered twice: give one of them another name with .name(..)")]
    Duplicate(String),
    #[error("guard name '{0}' is a built-in tool of the server: choose another name")]
    Builtin(String),
    #[error("guard name '{0}' is reserved in scripts: choose another name")]
    ReservedForScripts(String),
    #[error(
        "guard '{0}' borrows managed resources, which exist only in the server process: register it with .in_process()"
    )]
    ResourcesOutsideServer(String),
    #[error(
        "guard '{0}' is pure and annotated destructive: a pure guard runs inline inside scripts, where nobody could confirm its side effect; register it .isolated() or .in_process(), or drop the destructive annotation if it changes nothing"
    )]
    PureDestructive(String),
    #[error("guard '{0}' has an input type whose schema is not an object: wrap the arguments in a struct")]
    InputNotObject(String),
    #[error("guard '{0}' has a schema no client can receive: {1}")]
    SchemaNotPortable(String, String),
    #[error(
        "script function '{0}' has the name of a registered guard or of another script function: rename one of them"
    )]
    ScriptFunctionClash(String),
    #[error("a prompt has an empty name: give it one in Prompt::new")]
    UnnamedPrompt,
    #[error("prompt name '{0}' is registered twice: rename one of them")]
    DuplicatePrompt(String),
    #[error("resource URI '{0}' is registered twice: give one of them another URI")]
    DuplicateResource(String),
    #[error(
        "resource URI '{0}' is under warden://artifacts/ or ui://warden/, which Warden keeps for task artifacts and its own views: use another scheme or prefix"
    )]
    ReservedResourceUri(String),
    #[error("resource template '{0}' is invalid: {1}")]
    BadTemplate(String, crate::registry::app_resources::TemplateError),
}

/// A function that exists only inside scripts: it takes script values (a
/// function pointer, an array of maps) that have no JSON form, so it is not
/// an MCP tool. `list_guards` shows it as script-only with `reason`.
#[derive(Debug, Clone)]
pub struct ScriptFunction {
    /// The Rhai function name; same rules as a guard name.
    pub name: &'static str,
    /// Catalogue category, like [`Guard::category`].
    pub category: &'static str,
    /// How to call it, e.g. `assert_causal(signal_fn, bars, k) -> map`.
    pub signature: &'static str,
    /// Full semantics; the first line is the one-line summary.
    pub description: &'static str,
    /// Why it is script-only (what JSON cannot carry).
    pub reason: &'static str,
    /// Registers the function on a script engine under the name it is
    /// given (not necessarily `name`: the worker registers it under a
    /// private name and puts a wrapper under `name` that records each call
    /// in `function_calls.json`, so a script-only call counts like a guard
    /// call). Runs only in script workers; must be cheap and free of side
    /// effects.
    pub register: fn(&mut rhai::Engine, &str),
}

/// All guards of an application, sorted by name.
#[derive(Debug, Default)]
pub struct Registry {
    guards: BTreeMap<String, Guard>,
    script_functions: BTreeMap<String, ScriptFunction>,
    /// The app's prompts (server process only; workers never need them).
    prompts: Prompts,
    /// The app's static resources and templates (server process only).
    resources: AppResources,
    /// The app's name and version, for receipts.
    app: crate::receipt::AppIdentity,
}

impl Registry {
    /// Validates every guard; the first problem found is returned.
    pub fn new(guards: Vec<Guard>) -> Result<Self, RegistryError> {
        Self::build(guards, true)
    }

    /// The registry a worker builds: the same names and modes, without
    /// generating every schema (the server already checked them, and a
    /// worker only needs the output shape of the one guard it runs).
    pub fn for_worker(guards: Vec<Guard>) -> Result<Self, RegistryError> {
        Self::build(guards, false)
    }

    fn build(guards: Vec<Guard>, check_schemas: bool) -> Result<Self, RegistryError> {
        let mut map = BTreeMap::new();
        for guard in guards {
            validate_name(&guard.name)?;
            if guard.uses_resources && guard.mode != Mode::InProcess {
                return Err(RegistryError::ResourcesOutsideServer(guard.name));
            }
            // Inline calls never pass the executor's confirmation.
            if guard.mode == Mode::Pure && guard.hints.destructive {
                return Err(RegistryError::PureDestructive(guard.name));
            }
            if check_schemas && guard.input_schema().get("type").and_then(|t| t.as_str()) != Some("object") {
                return Err(RegistryError::InputNotObject(guard.name));
            }
            if check_schemas {
                // A recursive type cannot be inlined into the self-contained
                // schemas every export needs: refuse it here, once.
                // A content guard's output schema is never exported.
                let output = (!guard.content_output).then(|| guard.output_schema());
                let refused = [Some(guard.input_schema()), output]
                    .into_iter()
                    .flatten()
                    .find_map(|schema| crate::schema::portable::check(schema).err());
                if let Some(error) = refused {
                    return Err(RegistryError::SchemaNotPortable(guard.name, error.to_string()));
                }
            }
            if map.contains_key(&guard.name) {
                return Err(RegistryError::Duplicate(guard.name));
            }
            map.insert(guard.name.clone(), guard);
        }
        Ok(Self {
            guards: map,
            script_functions: BTreeMap::new(),
            prompts: Prompts::default(),
            resources: AppResources::default(),
            app: Default::default(),
        })
    }

    /// Names the app whose guards these are, as its receipts give it.
    pub fn with_app(mut self, name: impl Into<String>, version: impl Into<String>) -> Self {
        self.app = crate::receipt::AppIdentity {
            name: name.into(),
            version: version.into(),
        };
        self
    }

    /// What every receipt of this registry's calls repeats: the app and
    /// the build. Hashes the executable on first use ([`crate::receipt::build_id`]).
    pub fn provenance(&self) -> crate::receipt::Provenance {
        crate::receipt::Provenance {
            app: self.app.clone(),
            build: crate::receipt::build_id().to_string(),
        }
    }

    /// The receipt of one successful call of `guard`, run as its mode,
    /// whose arguments hashed to `arguments_sha256`
    /// ([`crate::receipt::digest`], taken before the call consumed them).
    /// `None` for a name that is not a guard.
    pub fn receipt(
        &self,
        guard: &str,
        arguments_sha256: String,
        output: &Value,
    ) -> Option<crate::receipt::CallReceipt> {
        let registered = self.get(guard)?;
        let receipt = self.provenance().call(
            guard,
            registered.guard_version(),
            registered.mode().as_str(),
            arguments_sha256,
            output,
        );
        Some(receipt)
    }

    /// Adds the app's prompts, static resources and resource templates
    /// (see `App::prompt` in the `warden` facade); names and URIs must be unique.
    pub fn with_mcp_items(mut self, items: McpItems) -> Result<Self, RegistryError> {
        self.prompts = Prompts::new(items.prompts)?;
        self.resources = AppResources::new(items.static_resources, items.resource_templates)?;
        Ok(self)
    }

    /// The app's prompts.
    pub fn prompts(&self) -> &Prompts {
        &self.prompts
    }

    /// The app's static resources and templates.
    pub fn app_resources(&self) -> &AppResources {
        &self.resources
    }

    /// Adds script-only functions; a name must follow the guard rules and
    /// clash with no guard and no other script function.
    pub fn with_script_functions(mut self, functions: Vec<ScriptFunction>) -> Result<Self, RegistryError> {
        for function in functions {
            validate_name(function.name)?;
            if self.guards.contains_key(function.name) || self.script_functions.contains_key(function.name) {
                return Err(RegistryError::ScriptFunctionClash(function.name.into()));
            }
            self.script_functions.insert(function.name.into(), function);
        }
        Ok(self)
    }

    /// Script-only functions in name order.
    pub fn script_functions(&self) -> impl Iterator<Item = &ScriptFunction> {
        self.script_functions.values()
    }

    /// The script-only function called `name`, if registered.
    pub fn script_function(&self, name: &str) -> Option<&ScriptFunction> {
        self.script_functions.get(name)
    }

    /// The one "unknown guard" error of every path that looks a guard up
    /// by name (direct calls through the executor, script calls through
    /// the door, a guard worker's request): `unknown_guard`, naming the
    /// guards that do exist. A caller under a policy gets it from its
    /// [`Visible`] view instead, which names only the guards it may call.
    pub fn unknown_guard(&self, name: &str) -> crate::error::GuardError {
        self.visible(Default::default()).unknown_guard(name)
    }

    /// The guard called `name`, if registered.
    pub fn get(&self, name: &str) -> Option<&Guard> {
        self.guards.get(name)
    }

    /// Guards in name order (the order of tools/list).
    pub fn iter(&self) -> impl Iterator<Item = &Guard> + Clone {
        self.guards.values()
    }

    /// The guards the coding agent's prompt lists: all but those
    /// registered [`Guard::hidden_from_model`], in name order.
    pub fn for_model(&self) -> impl Iterator<Item = &Guard> {
        self.guards.values().filter(|g| !g.is_hidden_from_model())
    }

    /// How many guards (the tools beside the built-ins).
    pub fn len(&self) -> usize {
        self.guards.len()
    }

    /// Whether the app registered no guard (it still serves the built-ins).
    pub fn is_empty(&self) -> bool {
        self.guards.is_empty()
    }

    /// Names in order, for error messages and the registry snapshot.
    pub fn names(&self) -> Vec<&str> {
        self.guards.keys().map(String::as_str).collect()
    }
}

fn validate_name(name: &str) -> Result<(), RegistryError> {
    if name.is_empty() {
        return Err(RegistryError::Unnamed);
    }
    let mut chars = name.chars();
    let starts_with_letter = chars.next().is_some_and(|c| c.is_ascii_alphabetic());
    if !starts_with_letter
        || name.len() > MAX_GUARD_NAME
        || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    {
        return Err(RegistryError::InvalidName(name.into()));
    }
    if BuiltinTool::from_name(name).is_some() {
        return Err(RegistryError::Builtin(name.into()));
    }
    if RESERVED_SCRIPT_NAMES.contains(&name) {
        return Err(RegistryError::ReservedForScripts(name.into()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::error::GuardError;
    use crate::guard::{Resources, guard};

    /// Echo input.
    #[derive(serde::Deserialize, schemars::JsonSchema)]
    struct Echo {
        x: f64,
    }

    fn echo(input: Echo) -> Result<f64, GuardError> {
        Ok(input.x)
    }

    fn needs_resources(_: &Resources, input: Echo) -> Result<f64, GuardError> {
        Ok(input.x)
    }

    #[test]
    fn a_pure_destructive_guard_is_refused_in_either_order() {
        // Inline calls never reach the executor's confirmation, so pure and destructive cannot be combined.
        for guard in [guard(echo).pure().destructive(), guard(echo).destructive().pure()] {
            assert_eq!(
                Registry::new(vec![guard]).unwrap_err(),
                RegistryError::PureDestructive("echo".into())
            );
        }
    }

    #[test]
    fn bad_names_are_refused_with_the_reason() {
        // Every naming rule produces its own error.
        let cases = [
            ("1abc", RegistryError::InvalidName("1abc".into())),
            ("with-dash", RegistryError::InvalidName("with-dash".into())),
            ("run_script", RegistryError::Builtin("run_script".into())),
            (
                "final_answer",
                RegistryError::ReservedForScripts("final_answer".into()),
            ),
            ("print", RegistryError::ReservedForScripts("print".into())),
        ];
        for (name, expected) in cases {
            assert_eq!(Registry::new(vec![guard(echo).name(name)]).unwrap_err(), expected);
        }
        assert_eq!(
            Registry::new(vec![guard(echo), guard(echo)]).unwrap_err(),
            RegistryError::Duplicate("echo".into())
        );
    }

    #[test]
    fn resource_guards_must_run_in_process() {
        // A guard borrowing resources cannot be isolated: resources live in the server only.
        assert!(Registry::new(vec![guard(needs_resources)]).is_ok());
        assert_eq!(
            Registry::new(vec![guard(needs_resources).isolated()]).unwrap_err(),
            RegistryError::ResourcesOutsideServer("needs_resources".into())
        );
    }

    fn no_op(_: &mut rhai::Engine, _: &str) {}

    fn script_fn(name: &'static str) -> ScriptFunction {
        ScriptFunction {
            name,
            category: "general",
            signature: "f(x)",
            description: "Does nothing.",
            reason: "takes a function pointer",
            register: no_op,
        }
    }

    #[test]
    fn script_functions_follow_the_name_rules_and_never_clash() {
        // A script-only function may not shadow a guard, a built-in, or another script function.
        let registry = || Registry::new(vec![guard(echo)]).unwrap();
        assert!(registry().with_script_functions(vec![script_fn("lag")]).is_ok());
        assert_eq!(
            registry()
                .with_script_functions(vec![script_fn("echo")])
                .unwrap_err(),
            RegistryError::ScriptFunctionClash("echo".into())
        );
        assert_eq!(
            registry()
                .with_script_functions(vec![script_fn("lag"), script_fn("lag")])
                .unwrap_err(),
            RegistryError::ScriptFunctionClash("lag".into())
        );
        assert_eq!(
            registry()
                .with_script_functions(vec![script_fn("list_guards")])
                .unwrap_err(),
            RegistryError::Builtin("list_guards".into())
        );
    }

    #[test]
    fn tools_are_listed_in_name_order() {
        // tools/list order is deterministic.
        let registry = Registry::new(vec![guard(echo).name("b"), guard(echo).name("a")]).unwrap();
        assert_eq!(registry.names(), vec!["a", "b"]);
    }
}
