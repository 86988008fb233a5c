//! Warden's executor layer: everything one guard call needs, below scripts
//! and tasks. Apps use the `warden` facade, which re-exports what they need.
//!
//! - [`executor`] admits and runs every call, in process, on a blocking
//!   thread or in an isolated worker ([`worker`] is the guard worker on the
//!   other side of its pipe), and settles each call exactly once;
//! - [`tenant`] names the principal a call runs for and holds its quotas;
//! - [`artifacts`] is the store of task files (and the seam to a remote
//!   copy of them, [`artifacts::RemoteCopy`], which `warden-cluster`
//!   implements on S3), read back in chunks;
//! - [`events`] writes `events.jsonl`, [`telemetry`] the OpenTelemetry spans;
//! - [`node`] names this process among several nodes;
//! - [`policy`] is the operator's who-may-call-what, enforced at the executor.
//!
//! Why these together: a call's admission charges the principal's quota,
//! its record goes to the events log and its files to the artifact store,
//! so the four are one layer; scripts, tasks and MCP sit above it and reach
//! a guard only through [`executor::Executor`].
//!
//! One call, in process (a pure guard), through the one path every call
//! takes:
//!
//! ```
//! use std::sync::Arc;
//!
//! use warden_core::error::GuardError;
//! use warden_core::guard::{Resources, guard};
//! use warden_core::registry::Registry;
//! use warden_calls::{CallLimits, CallRequest, Events, Executor, Origin, WorkerLauncher};
//!
//! #[derive(serde::Deserialize, schemars::JsonSchema)]
//! struct Pair {
//!     a: f64,
//!     b: f64,
//! }
//!
//! /// Adds two numbers.
//! fn add(pair: Pair) -> Result<f64, GuardError> {
//!     Ok(pair.a + pair.b)
//! }
//!
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! let registry = Registry::new(vec![guard(add).pure()]).expect("a valid registry");
//! let scratch = std::env::temp_dir();
//! let launcher = WorkerLauncher::new(scratch.join("no-worker"), scratch, 1 << 20, 1 << 20);
//! let executor = Executor::new(
//!     Arc::new(registry),
//!     Arc::new(Resources::default()),
//!     CallLimits::default(),
//!     Events::disabled(),
//!     launcher,
//! );
//! let origin = Origin::request("direct", "add");
//! let arguments = serde_json::json!({"a": 1.5, "b": 2.0});
//! let sum = executor
//!     .call(CallRequest::new("add", arguments, &origin, Default::default()))
//!     .await
//!     .expect("the call succeeds");
//! assert_eq!(sum, serde_json::json!({"result": 3.5}));
//! # });
//! ```

#![warn(unreachable_pub)]

pub mod artifacts;
pub mod events;
pub mod executor;
pub mod limits;
pub mod node;
pub mod policy;
pub mod telemetry;
pub mod tenant;
pub mod worker;

pub use events::{Events, Origin};
pub use executor::{CallRequest, Executor, Failure, Status, WorkerLauncher};
pub use limits::CallLimits;
