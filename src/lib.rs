//! Warden: register typed Rust guards once and serve them as MCP tools,
//! script functions and sandboxed workers.
//!
//! An app builds an [`App`], registers guards ([`guard()`](fn@guard)) (typed functions returning
//! [`GuardError`] on failure) and [`ScriptFunction`]s, sets [`Limits`] if the
//! defaults do not suit it, and calls [`App::run`]. Advanced use: [`limits`]
//! (every bound, with its default, gathered from the crate that enforces it), [`error::codes`] (every stable error
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

mod app;
mod backends;
pub mod limits;
// The lower crates' modules apps use, at the paths they have always used
// (`warden::ask`, `warden::limits`, …). Code in this crate names the
// crates themselves.
pub use warden_calls::node;
pub use warden_core::{ask, config, error, notify};
#[cfg(feature = "cli")]
mod cli;
#[cfg(feature = "cli")]
pub mod preflight;

pub use app::App;
pub use limits::Limits;
/// The task store behind `list_tasks` and MCP Tasks: its trait and the
/// embedded SQLite backend (public for benchmarks and other backends).
pub use warden_calls::tenant::Principal;
/// The cluster backends (the `warden-cluster` crate): the PostgreSQL task
/// store (`postgres`) and the S3 copy of task files (`s3`), public for
/// benchmarks and tools that open them directly.
#[cfg(any(feature = "postgres", feature = "s3"))]
pub use warden_cluster as cluster;
pub use warden_core::{
    Body, Content, Embedded, Guard, GuardError, GuardFn, Hints, Mode, Prompt, PromptArgument,
    PromptArguments, PromptMessage, ResourceTemplate, Resources, ScriptFunction, StaticResource, TaskSupport,
    TemplateVariables,
};
pub use warden_task::store as task_store;

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
