//! Warden: register typed Rust guards once and serve them as MCP tools,
//! script functions and sandboxed workers.
//!
//! An app builds an [`App`], registers [`guard`]s (typed functions returning
//! [`GuardError`] on failure) and [`ScriptFunction`]s, sets [`Limits`] if the
//! defaults do not suit it, and calls [`App::run`]. Advanced use: [`limits`]
//! (every bound, with its default), [`error::codes`] (every stable error
//! code), [`config`] (settings from the environment and `.env`), and, with
//! the `cli` feature, `preflight` and `testing` (the scenario runner, the
//! `warden-testing` crate).
//!
//! Inside, the spine reads from the folder names: `registry` (what the app
//! registered) → `executor` (admits and runs every call; `worker` is the
//! guard worker on the other side of its pipe) → `script` (the Rhai sandbox,
//! split into the sandboxed `worker` side and the server's `host` side, with
//! one `protocol` between them) → `task` and `batch` → `mcp` (the rmcp
//! handler, built-in tools, resources and transports) → `app` and `cli`.
//!
//! Features: `cli` (default: the command line, `--check`, `preflight`,
//! `test` and the `warden` binary), `agent` (default: the model client
//! behind `run_coding_task`), `telemetry` (the recording OpenTelemetry SDK;
//! `otel` is its former name) and `otel-otlp`. Without default features an
//! app still serves MCP on stdio with `App::run` / `App::serve`.

#[cfg(feature = "agent")]
mod agent;
mod app;
mod artifacts;
mod batch;
// The core crate's modules, at the paths the rest of this crate and apps
// have always used (`crate::guard`, `warden::limits`, …).
use warden_core::{
    catalogue,
    guard::{self},
    registry, schema,
};
pub use warden_core::{config, error, limits, notify};
#[cfg(feature = "cli")]
mod cli;
mod events;
mod executor;
mod mcp;
pub mod node;
#[cfg(feature = "cli")]
pub mod preflight;
mod script;
mod task;
mod telemetry;
mod tenant;
mod worker;

pub use app::App;
/// The task store behind `list_tasks` and MCP Tasks: its trait and the
/// embedded SQLite backend (public for benchmarks and other backends).
pub use task::store as task_store;
pub use tenant::Principal;
pub use warden_core::{
    Body, Content, Embedded, Guard, GuardError, GuardFn, Hints, Limits, Mode, Prompt, PromptArgument,
    PromptArguments, PromptMessage, ResourceTemplate, Resources, ScriptFunction, StaticResource,
    TemplateVariables,
};

/// The MCP scenario runner (the `warden-testing` crate), behind `cli`.
#[cfg(feature = "cli")]
pub use warden_testing as testing;

pub use warden_core::guard::guard;
pub use warden_core::{rhai, schemars};

/// The multi-threaded runtime every Warden command runs on (two workers:
/// this is a small server on small machines). On failure the error has
/// been printed and the caller exits with 2.
pub(crate) fn runtime() -> Result<tokio::runtime::Runtime, std::process::ExitCode> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|error| {
            eprintln!("error: cannot start the async runtime: {error}");
            std::process::ExitCode::from(2)
        })
}
