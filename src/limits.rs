//! Every limit Warden enforces, at the one path apps use: `warden::limits`.
//!
//! Each crate owns the limits it enforces, in its own `limits` module (the
//! rule is in [`warden_core::limits`]); this module re-exports them all, so
//! an app names any bound as `warden::limits::NAME` wherever it lives:
//! [`Limits`], the whole an app sets with `App::limits`, and its parts —
//! [`CallLimits`] (the executor's, with the sandbox's [`WorkerLimits`]),
//! [`TaskLimits`] (the task runner's) and [`ServingLimits`] (the MCP
//! layer's) — each with its `DEFAULT_*` constants, which document value,
//! unit and behaviour at the limit, plus the plain contract bounds of the
//! script layer, the agent (feature `agent`) and the cluster backends
//! (features `postgres`, `s3`), and core's bound on an error message. [`Limits::from_env`] applies the
//! operator's `WARDEN_*` overrides, each part reading its own through
//! [`env_number`]; a bad one is a [`LimitError`]. The limits table in
//! `docs/operating.md` lists every constant and override.

#[cfg(feature = "agent")]
pub use warden_agent::limits::*;
pub use warden_calls::limits::*;
#[cfg(any(feature = "postgres", feature = "s3"))]
pub use warden_cluster::limits::*;
pub use warden_core::limits::*;
pub use warden_mcp::limits::*;
pub use warden_sandbox::limits::*;
pub use warden_script::limits::*;
pub use warden_task::limits::*;
