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
mod catalogue;
#[cfg(feature = "cli")]
mod cli;
pub mod config;
mod content;
pub mod error;
mod events;
mod executor;
mod guard;
pub mod limits;
mod mcp;
pub mod node;
pub mod notify;
#[cfg(feature = "cli")]
pub mod preflight;
mod registry;
mod schema;
mod script;
mod task;
mod telemetry;
mod tenant;
mod worker;

pub use app::App;
pub use content::{Body, Content, Embedded};
pub use error::GuardError;
pub use guard::{Guard, GuardFn, Hints, Mode, Resources, guard};
pub use limits::Limits;
pub use registry::ScriptFunction;
pub use registry::app_resources::{ResourceTemplate, StaticResource, TemplateVariables};
pub use registry::prompts::{Prompt, PromptArgument, PromptArguments, PromptMessage};
/// The task store behind `list_tasks` and MCP Tasks: its trait and the
/// embedded SQLite backend (public for benchmarks and other backends).
pub use task::store as task_store;
pub use tenant::Principal;

/// The MCP scenario runner (the `warden-testing` crate), behind `cli`.
#[cfg(feature = "cli")]
pub use warden_testing as testing;

/// Re-exported so applications derive schemas with the same version.
pub use schemars;

/// Re-exported so script-only functions register on the same engine type.
pub use rhai;

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
