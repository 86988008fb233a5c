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

pub mod artifacts;
pub mod events;
pub mod executor;
pub mod limits;
pub mod node;
pub mod policy;
pub mod telemetry;
pub mod tenant;
pub mod worker;
