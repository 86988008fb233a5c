//! Scripts: the Rhai sandbox that composes guards.
//!
//! Worker side: [`worker`] (entry point), [`layers`] (namespace, Landlock),
//! [`engine`] (limits, deadline), [`bindings`] (guards and helpers),
//! [`door`] (the pipe), [`charts`] (charts and the report page). Shared:
//! [`protocol`]. The server side of a script
//! run lives in `crate::task`.

pub mod bindings;
pub mod charts;
mod csv;
pub mod door;
pub mod engine;
pub mod errors;
pub mod layers;
pub mod protocol;
pub mod worker;

/// Second argument after `WORKER_ARG` that selects a script worker.
pub const SCRIPT_WORKER: &str = "script";
