//! Warden's core, the bottom of the spine: what an app registers and the
//! rules every other layer shares.
//!
//! [`guard`](mod@guard) (a typed function and its hints), [`answer`] (fitting
//! a JSON answer into a byte budget), [`registry`] (every guard,
//! script function, prompt and resource an app registered, validated once,
//! with the names Warden reserves), [`schema`] (the JSON Schemas and the
//! argument checks derived from a guard's types), [`error`] (the guard
//! error and every stable error code), [`limits`] (the rule by which each
//! crate owns the limits it enforces, and the error and environment
//! reading their parts share), [`config`] (settings from the environment
//! and `.env`), [`notify`] (progress and log notices from a running guard),
//! [`ask`] (questions from a running guard to the client's person or model),
//! [`approval`] (approvals a detached task waits for, and their records),
//! [`Content`] (non-JSON results), [`catalogue`] (the guard catalogue
//! resource), [`receipt`] (the hashes that let a result be recomputed) and
//! [`future`] (the boxed future a crate's async entry points return).
//!
//! This crate never runs a guard and never starts a process: the executor
//! above it does. It depends on no other Warden crate. Its API serves
//! Warden's own crates; an app uses the `warden` facade, which re-exports
//! what an app author needs.

#![warn(unreachable_pub)]

pub mod answer;
pub mod approval;
pub mod ask;
pub mod catalogue;
pub mod config;
mod content;
pub mod error;
pub mod future;
pub mod guard;
pub mod json;
pub mod limits;
pub mod notify;
pub mod reach;
pub mod receipt;
pub mod registry;
pub mod schema;
pub mod screen;
pub mod search;
pub mod signature;

// What an app author registers, at the root as the `warden` facade
// re-exports it.
pub use content::{Body, Content, Embedded};
pub use error::GuardError;
pub use guard::{Guard, GuardFn, Hints, Mode, Resources, TaskSupport, guard};
pub use registry::ScriptFunction;
pub use registry::app_resources::{ResourceTemplate, StaticResource, TemplateVariables};
pub use registry::prompts::{Prompt, PromptArgument, PromptArguments, PromptMessage};
/// Re-exported so script-only functions register on the same engine type.
pub use rhai;
/// Re-exported so applications derive schemas with the same version.
pub use schemars;
