//! The application builder: register guards, resources, prompts, then `run()`.
//!
//! `run()` is the whole main of a Warden app. It takes the hidden worker
//! branch first (before any resource factory could run), then parses the CLI
//! and builds the registry, resources and executor for the chosen command.

use std::any::{Any, TypeId};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use crate::limits::Limits;
use warden_calls::executor::{Executor, WorkerLauncher};
use warden_core::guard::{Guard, Resources};
use warden_core::registry::{Registry, RegistryError, ScriptFunction};

/// A resource factory's failure, as the factory's own error displays it;
/// kept verbatim for the guards that ask for the resource.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct FactoryFailed(String);

type Factory = Box<dyn FnOnce() -> Result<Arc<dyn Any + Send + Sync>, FactoryFailed>>;

/// A managed resource factory, run only in the server process.
struct ResourceFactory {
    type_id: TypeId,
    type_name: &'static str,
    build: Factory,
}

/// A Warden application: its guards, managed resources and limits.
///
/// Register guards, then hand `main` to [`App::run`] (or `App::serve().await`
/// inside a tokio runtime). Options may be chained in any order.
///
/// ```
/// use warden::{App, GuardError, guard};
/// use warden::schemars::JsonSchema;
/// use serde::{Deserialize, Serialize};
///
/// /// Adds two numbers.
/// #[derive(Deserialize, JsonSchema)]
/// struct AddInput {
///     /// The first number.
///     a: f64,
///     /// The second number.
///     b: f64,
/// }
///
/// #[derive(Serialize, JsonSchema)]
/// struct Sum {
///     sum: f64,
/// }
///
/// fn add(input: AddInput) -> Result<Sum, GuardError> {
///     Ok(Sum { sum: input.a + input.b })
/// }
///
/// fn app() -> App {
///     App::new("calculator")
///         .version("1.2.0")
///         .guard(guard(add).title("Add two numbers"))
///         .allow_destructive_in_batch()
///         .limits(warden::Limits::default())
/// }
///
/// // A binary's whole `main` is `app().run()`; here we only build it.
/// let app = app();
/// assert!(format!("{app:?}").contains("calculator"));
/// ```
#[must_use = "an App does nothing until `run()` or `serve().await`"]
pub struct App {
    pub(crate) name: String,
    pub(crate) version: String,
    pub(crate) guards: Vec<Guard>,
    /// Script-only functions, registered into script engines only.
    pub(crate) script_functions: Vec<ScriptFunction>,
    resources: Vec<ResourceFactory>,
    pub(crate) limits: Limits,
    /// Set by [`App::allow_destructive_in_batch`]; kept apart from `limits`
    /// so that [`App::limits`] may come before or after it.
    destructive_in_batch: bool,
    artifacts_dir: Option<PathBuf>,
    /// Variables passed to workers beside the fixed allow-list
    /// ([`App::worker_variable`]).
    worker_variables: Vec<String>,
    /// Prompts and resources for MCP clients, beside the guards.
    mcp_items: warden_core::registry::McpItems,
}

impl std::fmt::Debug for App {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("App")
            .field("name", &self.name)
            .field("guards", &self.guards.len())
            .finish_non_exhaustive()
    }
}

impl App {
    /// A new application called `name` (shown to clients as the server name).
    pub fn new(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            version: env!("CARGO_PKG_VERSION").to_string(),
            guards: Vec::new(),
            script_functions: Vec::new(),
            resources: Vec::new(),
            limits: Limits::default(),
            destructive_in_batch: false,
            artifacts_dir: None,
            worker_variables: Vec::new(),
            mcp_items: warden_core::registry::McpItems::default(),
        }
    }

    /// The version reported to clients.
    pub fn version(mut self, version: impl Into<String>) -> Self {
        self.version = version.into();
        self
    }

    /// Registers one guard.
    pub fn guard(mut self, guard: Guard) -> Self {
        self.guards.push(guard);
        self
    }

    /// Registers a function that exists only inside scripts (it takes values
    /// JSON cannot carry, such as a function pointer). It is listed by
    /// `list_guards` as script-only, with its reason; the name rules of
    /// guards apply and it may not clash with one.
    pub fn script_function(mut self, function: ScriptFunction) -> Self {
        self.script_functions.push(function);
        self
    }

    /// Registers a managed resource. The factory runs once, in the server
    /// process only (never in a worker), when the server or `call` starts;
    /// the value is dropped at shutdown. A failing factory does not stop the
    /// server: guards asking for the resource get an error quoting the reason.
    pub fn resource<T, E, F>(mut self, factory: F) -> Self
    where
        T: Any + Send + Sync,
        E: std::fmt::Display,
        F: FnOnce() -> Result<T, E> + 'static,
    {
        self.resources.push(ResourceFactory {
            type_id: TypeId::of::<T>(),
            type_name: std::any::type_name::<T>(),
            build: Box::new(move || {
                factory()
                    .map(|v| Arc::new(v) as Arc<dyn Any + Send + Sync>)
                    .map_err(|e| FactoryFailed(e.to_string()))
            }),
        });
        self
    }

    /// Registers an MCP prompt (`prompts/list`, `prompts/get`): a message
    /// template clients offer their users, e.g. "review this trade".
    /// Names are unique.
    pub fn prompt(mut self, prompt: crate::Prompt) -> Self {
        self.mcp_items.prompts.push(prompt);
        self
    }

    /// Registers a fixed MCP resource (`resources/list`, `resources/read`),
    /// e.g. a methodology note clients can attach. URIs are unique and may
    /// not use `warden://artifacts/` (task artifacts).
    pub fn static_resource(mut self, resource: crate::StaticResource) -> Self {
        self.mcp_items.static_resources.push(resource);
        self
    }

    /// Registers an MCP resource template (`resources/templates/list`),
    /// read on demand from its `{variables}`, e.g. `data://trades/{id}`.
    pub fn resource_template(mut self, template: crate::ResourceTemplate) -> Self {
        self.mcp_items.resource_templates.push(template);
        self
    }

    /// Replaces the limits (see [`crate::limits`] for the defaults).
    pub fn limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// Lets `run_batch` call guards annotated destructive (refused in a
    /// batch by default; see
    /// [`TaskLimits::allow_destructive_in_batch`](crate::limits::TaskLimits::allow_destructive_in_batch)).
    /// Holds whether it comes before or after [`App::limits`].
    pub fn allow_destructive_in_batch(mut self) -> Self {
        self.destructive_in_batch = true;
        self
    }

    /// Passes the variable `name` (from the environment or `.env`) to every
    /// worker: for a setting the app's isolated guards or script functions
    /// read themselves (the example passes `WARDEN_FINANCE_DATA`). Workers
    /// get nothing else of the server's environment but the fixed
    /// allow-list and the operator's `WARDEN_WORKER_ENV` (see
    /// `docs/security.md`); a secret of Warden's (`WARDEN_MODEL_*`,
    /// `WARDEN_INPUT_STATE_KEY`, …), `OTEL_*` or `LD_*` is refused at start.
    pub fn worker_variable(mut self, name: impl Into<String>) -> Self {
        self.worker_variables.push(name.into());
        self
    }

    /// Where events, task directories and diagnostics go. Overridden by
    /// `WARDEN_ARTIFACTS_DIR` (environment or `.env`); defaults to
    /// `./artifacts`.
    pub fn artifacts_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.artifacts_dir = Some(dir.into());
        self
    }

    /// The hidden worker branch, taken before any resource factory runs.
    pub(crate) fn run_worker(self, args: &[std::ffi::OsString]) -> ExitCode {
        let script = args.get(2).is_some_and(|a| a == warden_script::SCRIPT_WORKER);
        let zygote_at = |i: usize| {
            args.get(i)
                .is_some_and(|a| a == warden_sandbox::zygote::ZYGOTE_ARG)
        };
        let zygote = zygote_at(2);
        let registry =
            Registry::for_worker(self.guards).and_then(|r| r.with_script_functions(self.script_functions));
        match registry {
            // The script workers' zygote (see `warden_script::workers`).
            Ok(registry) if script && zygote_at(3) => {
                warden_script::worker::zygote_main(std::sync::Arc::new(registry))
            }
            Ok(registry) if script => warden_script::worker::main(std::sync::Arc::new(registry)),
            Ok(registry) => {
                let max_request = warden_calls::worker::max_request_line(args.iter().skip(2).cloned());
                if zygote {
                    return warden_sandbox::zygote::child::serve(|| {
                        warden_calls::worker::main(&registry, max_request)
                    });
                }
                warden_calls::worker::main(&registry, max_request)
            }
            Err(error) => {
                eprintln!("warden worker: {error}");
                ExitCode::from(3)
            }
        }
    }

    /// The artifacts root: `WARDEN_ARTIFACTS_DIR`, else the app's setting,
    /// else `./artifacts`.
    pub(crate) fn resolved_artifacts_dir(&self) -> PathBuf {
        warden_core::config::var_os("WARDEN_ARTIFACTS_DIR")
            .map(PathBuf::from)
            .or_else(|| self.artifacts_dir.clone())
            .unwrap_or_else(|| PathBuf::from("artifacts"))
    }

    /// Runs the resource factories (server process only).
    pub(crate) fn build_resources(&mut self) -> Resources {
        let mut resources = Resources::default();
        for factory in self.resources.drain(..) {
            match (factory.build)() {
                Ok(value) => resources.insert(factory.type_id, value),
                Err(FactoryFailed(reason)) => {
                    tracing::warn!("managed resource {} failed to load: {reason}", factory.type_name);
                    resources.insert_failure(factory.type_id, factory.type_name, reason);
                }
            }
        }
        resources
    }
}

/// The entry points without the `cli` feature: the hidden worker branch,
/// else a stdio MCP server (no command line is parsed). With the feature
/// they live in `crate::cli` and parse the full command line.
#[cfg(not(feature = "cli"))]
impl App {
    /// Runs the application as a stdio MCP server on a runtime of its own.
    /// Exit codes: 0 a clean end, 1 the MCP session failed, 2 a
    /// configuration error.
    pub fn run(self) -> ExitCode {
        let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
        if is_worker(&args) {
            return self.run_worker(&args);
        }
        let runtime = match crate::runtime() {
            Ok(runtime) => runtime,
            Err(code) => return code,
        };
        warden_calls::telemetry::init_stderr_log();
        let telemetry = warden_calls::telemetry::init();
        let code = runtime.block_on(self.serve_stdio());
        runtime.shutdown_timeout(std::time::Duration::from_millis(200));
        drop(telemetry);
        code
    }

    /// [`App::run`] on the caller's tokio runtime.
    pub async fn serve(self) -> ExitCode {
        let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
        if is_worker(&args) {
            return self.run_worker(&args);
        }
        let telemetry = warden_calls::telemetry::init();
        let code = self.serve_stdio().await;
        let _ = tokio::task::spawn_blocking(move || drop(telemetry)).await;
        code
    }

    async fn serve_stdio(self) -> ExitCode {
        let (runtime, name, version) = match build_runtime(self) {
            Ok(parts) => parts,
            Err(error) => {
                eprintln!("error: {error}");
                return ExitCode::from(2);
            }
        };
        let code = warden_mcp::serve::stdio_exit_code(
            runtime.tasks.clone(),
            runtime.serving.clone(),
            &name,
            &version,
        )
        .await;
        warden_sandbox::process::kill_all_workers();
        code
    }
}

/// Whether `args` start a worker process (the hidden first argument).
pub(crate) fn is_worker(args: &[std::ffi::OsString]) -> bool {
    args.get(1).is_some_and(|a| a == warden_calls::worker::WORKER_ARG)
}

/// An app started for a command: its executor, its task runner, the MCP
/// layer's limits, and the event log's guard (not `Runtime`: the built-ins'
/// context in `warden_mcp` has that name).
pub(crate) struct Started {
    #[cfg_attr(not(feature = "cli"), allow(dead_code))]
    pub executor: Arc<Executor>,
    pub tasks: Arc<warden_task::TaskRunner>,
    /// The MCP layer's part of the limits, handed to the transport served.
    pub serving: crate::limits::ServingLimits,
    /// Flushes events.jsonl when dropped.
    pub _events_guard: Option<warden_calls::events::EventsGuard>,
}

/// Why an app could not start: its configuration or registration is
/// wrong, or its own binary cannot be found (workers re-execute it).
#[derive(Debug, thiserror::Error)]
pub(crate) enum StartError {
    #[error(transparent)]
    Limits(#[from] crate::limits::LimitError),
    #[error(transparent)]
    SandboxMode(#[from] warden_sandbox::policy::BadMode),
    /// `WARDEN_WORKER_ENV` or `App::worker_variable` names a secret or a
    /// malformed name.
    #[error(transparent)]
    WorkerEnv(#[from] warden_sandbox::env::WorkerEnvError),
    #[error(transparent)]
    Registry(#[from] RegistryError),
    #[error("cannot locate this program's binary: {0}")]
    NoBinary(#[source] std::io::Error),
    /// `WARDEN_ARTIFACT_STORE` is malformed (the message names the fix).
    #[error("{0}")]
    ArtifactStore(String),
    /// `WARDEN_POLICY_FILE` cannot be read or names what is not there
    /// (the message names the rule and field).
    #[error(transparent)]
    Policy(#[from] warden_calls::policy::PolicyError),
    /// A model setting (`WARDEN_MODEL_*`, `WARDEN_AGENT_*`) is set to what
    /// `run_coding_task` would refuse (the message names the variable).
    #[cfg(feature = "agent")]
    #[error(transparent)]
    Model(#[from] warden_agent::ModelConfigError),
}

/// The registry and limits alone, for commands that only describe the
/// app (`tools`, `--list-tools`): they run no resource factory, open no
/// event log and create no artifacts directory.
#[cfg(feature = "cli")]
pub(crate) fn describe(mut app: App) -> Result<(Registry, Limits), StartError> {
    let mut limits = app.limits.clone().from_env()?;
    limits.tasks.allow_destructive_in_batch |= app.destructive_in_batch;
    let registry = build_registry(
        std::mem::take(&mut app.guards),
        std::mem::take(&mut app.script_functions),
    )?
    .with_mcp_items(std::mem::take(&mut app.mcp_items))?
    .with_app(&app.name, &app.version);
    Ok((registry, limits))
}

/// Builds the registry, resources, event log and executor.
pub(crate) fn build_runtime(mut app: App) -> Result<(Started, String, String), StartError> {
    let mut limits = app.limits.clone().from_env()?;
    limits.tasks.allow_destructive_in_batch |= app.destructive_in_batch;
    let (calls, tasks, serving) = (limits.calls, limits.tasks, limits.serving);
    warden_sandbox::policy::mode()?;
    // A bad model setting stops the start, not the first coding task.
    #[cfg(feature = "agent")]
    warden_agent::ModelConfig::check_env()?;
    warden_sandbox::env::configure(&app.worker_variables)?;
    let artifacts_dir = app.resolved_artifacts_dir();
    let resources = app.build_resources();
    let name = app.name.clone();
    let version = app.version.clone();
    let registry = build_registry(
        std::mem::take(&mut app.guards),
        std::mem::take(&mut app.script_functions),
    )?
    .with_mcp_items(std::mem::take(&mut app.mcp_items))?
    .with_app(&name, &version);
    let policy = warden_calls::policy::Policy::from_env(&registry)?;
    let (events, guard) = match warden_calls::events::Events::open(&artifacts_dir, &calls) {
        Ok((events, guard)) => (events, Some(guard)),
        Err(error) => {
            tracing::warn!(
                "cannot write events to {}: {error}; events are disabled (set WARDEN_ARTIFACTS_DIR to a writable directory)",
                artifacts_dir.display()
            );
            (warden_calls::events::Events::disabled(), None)
        }
    };
    let diagnostics_dir = diagnostics_dir(&artifacts_dir);
    let exe = std::env::current_exe().map_err(StartError::NoBinary)?;
    let launcher = WorkerLauncher::new(
        exe.clone(),
        diagnostics_dir,
        calls.max_worker_response,
        calls.max_argument_bytes + crate::limits::WORKER_REQUEST_ENVELOPE_BYTES,
    );
    let executor = Arc::new(
        Executor::new(Arc::new(registry), Arc::new(resources), calls, events, launcher).with_policy(policy),
    );
    let mut store = warden_calls::artifacts::ArtifactStore::new(artifacts_dir, executor.limits().tasks_kept);
    if let Some(remote) =
        crate::backends::artifact_remote().map_err(|e| StartError::ArtifactStore(e.message))?
    {
        store = store.with_remote(remote);
    }
    let mut runner = warden_task::TaskRunner::new(executor.clone(), store, exe, tasks);
    if let Some(opener) = crate::backends::store_opener() {
        runner = runner.with_store_opener(opener);
    }
    let tasks = Arc::new(runner);
    Ok((
        Started {
            executor,
            tasks,
            serving,
            _events_guard: guard,
        },
        name,
        version,
    ))
}

/// The registry of guards and script functions; the server and every
/// worker build it the same way.
fn build_registry(guards: Vec<Guard>, functions: Vec<ScriptFunction>) -> Result<Registry, RegistryError> {
    Registry::new(guards)?.with_script_functions(functions)
}

/// `<artifacts>/.diagnostics/workers`, or a private temp dir when the
/// artifacts directory is not writable.
/// Both are private (0700): worker logs quote guard errors and stderr.
fn diagnostics_dir(artifacts_dir: &std::path::Path) -> PathBuf {
    let preferred = artifacts_dir.join(".diagnostics").join("workers");
    if private_dir(&preferred).is_ok() {
        return preferred;
    }
    let fallback = std::env::temp_dir().join(format!("warden-diagnostics-{}", std::process::id()));
    let _ = private_dir(&fallback);
    fallback
}

/// Creates `dir` (and missing parents) with mode 0700.
fn private_dir(dir: &std::path::Path) -> std::io::Result<()> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn serve_runs_a_command_inside_an_existing_runtime() {
        // App::serve on the caller's runtime: no nested runtime, no panic,
        // and the command's exit code (0 for --list-tools, 2 for bad flags).
        let dir = tempfile::tempdir().expect("temp dir");
        let app = || App::new("embedded").artifacts_dir(dir.path());
        let args = |extra: &str| vec!["embedded".into(), extra.into()];
        assert_eq!(
            app().serve_with_args(args("--list-tools")).await,
            ExitCode::SUCCESS
        );
        assert_eq!(
            app().serve_with_args(args("--no-such-flag")).await,
            ExitCode::from(2)
        );
    }
}
