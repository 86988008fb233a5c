//! Warden: register typed Rust guards once and serve them as MCP tools,
//! script functions and sandboxed workers.
//!
//! The flow of a call is registry → executor → worker door: [`registry`]
//! validates what the app registered, [`executor`] admits and runs every
//! call (in a fresh worker process for `isolated` guards), and [`worker`] is
//! the hidden entry point on the other side of the pipe.

#[cfg(feature = "agent")]
mod agent;
mod app;
mod artifacts;
mod batch;
mod catalogue;
#[cfg(feature = "cli")]
mod cli;
pub mod config;
pub mod error;
mod events;
mod executor;
mod guard;
pub mod limits;
mod mcp;
#[cfg(feature = "cli")]
pub mod preflight;
mod registry;
mod schema;
mod script;
mod task;
mod telemetry;
mod worker;

pub use app::App;
pub use error::GuardError;
pub use guard::{Guard, GuardFn, Hints, Mode, Resources, guard};
pub use limits::Limits;
pub use registry::ScriptFunction;

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
