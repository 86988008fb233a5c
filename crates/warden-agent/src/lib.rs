//! Warden's coding agent: the model loop behind `run_coding_task`. Apps
//! use the `warden` facade (feature `agent`).
//!
//! [`run_coding_task`] is the API: it drives the loop (`run`) against an
//! OpenAI-compatible endpoint (`model`) configured by [`ModelConfig`]
//! (from the environment or a `.env` file; [`ModelConfig::check_env`]
//! checks every setting when the server starts). Inside: `prompt` builds
//! the system prompt from the registry, rendering each guard with
//! `warden_core::signature`; `extract` finds the code in a reply. The
//! model client runs in the server, never in the sandbox.
//!
//! ```
//! use warden_agent::ModelConfigError;
//!
//! // Without a model configured, a coding task is refused with the fix.
//! let error = ModelConfigError::NotConfigured(vec!["WARDEN_MODEL_ID"]);
//! assert!(error.to_string().contains("send the script yourself with run_script"));
//! ```

#![warn(unreachable_pub)]

mod config;
mod extract;
pub mod limits;
mod model;
mod prompt;
mod run;

pub use config::{ModelConfig, ModelConfigError};
pub use run::run_coding_task;
