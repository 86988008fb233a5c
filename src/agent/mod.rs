//! The coding agent behind `run_coding_task`.
//!
//! [`run`] drives the loop; [`model`] talks to an OpenAI-compatible
//! endpoint configured by [`config`] (optionally from a [`dotenv`] file);
//! [`prompt`] builds the system prompt from the registry, rendering each
//! guard with [`signature`]; [`extract`] finds
//! the code in a reply. The model client runs in the server, never in the
//! sandbox.

pub mod config;
pub mod extract;
pub mod model;
pub mod prompt;
pub mod run;
pub mod signature;
