//! Scripts: the Rhai sandbox that composes guards, in one place split by side.
//!
//! [`worker`] is the sandboxed side: the script worker process (entry point,
//! sandbox layers, engine, guard bindings, charts, and its door — the pipe).
//! [`host`] is the server side: the session that starts a worker and its
//! door, which answers the worker's guard calls through the executor.
//! [`protocol`] is the one wire format between the two.

pub mod host;
pub mod policy;
pub mod protocol;
pub mod worker;

/// Second argument after `WORKER_ARG` that selects a script worker.
pub const SCRIPT_WORKER: &str = "script";
