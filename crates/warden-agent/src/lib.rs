//! Warden's coding agent: the model loop behind `run_coding_task`. Apps
//! use the `warden` facade (feature `agent`).
//!
//! [`run`] drives the loop; [`model`] talks to an OpenAI-compatible
//! endpoint configured by [`config`] (optionally from a `.env` file);
//! [`prompt`] builds the system prompt from the registry, rendering each
//! guard with `warden_core::signature`; [`extract`] finds
//! the code in a reply. The model client runs in the server, never in the
//! sandbox.

// The lower crates' modules at the paths this crate's modules use.
pub(crate) use warden_core::{ask, error, guard, limits, registry};
pub(crate) use warden_executor::{events, telemetry};
pub(crate) use warden_script as script;
pub(crate) use warden_task as task;

pub mod config;
pub mod extract;
pub mod model;
pub mod prompt;
pub mod run;
