//! The MCP scenario runner: `test --config server.json --suite suite.json
//! [--suite …] [--output report.json] [--prompt-adapter CMD]`.
//!
//! It starts the configured server as a child, speaks MCP over stdio with
//! the rmcp client, checks the tool list, schemas and contracts, runs every
//! case, prints a summary, writes the JSON report, and exits 0 (all passed),
//! 1 (something failed) or 2 (setup error: an unreadable or invalid config
//! or suite, a server that does not start, a report that cannot be written).
//! Offered by the `warden` binary, by every app (`<app> test …`, with the
//! `cli` feature of `warden`) and by this crate's own `warden-test`.
//!
//! This crate needs nothing of the Warden runtime: it is an MCP client.
//! [`schema_check`] and [`schema_targets`] (the tool-schema rules) live here
//! and are shared with the server-side `--check` of `warden`. They need
//! only `serde_json`; the runner (feature `runner`, on by default: the
//! client, the suites, the `test` command) is what an app's `--check` does
//! not need, so the facade's `cli` takes the rules alone.
//!
//! ```
//! use warden_testing::schema_check::check_tool_schema;
//!
//! // A tool schema's root must be an object schema; each problem names
//! // where it is.
//! let problems = check_tool_schema(&serde_json::json!({"type": "string"}));
//! assert_eq!(problems.len(), 1);
//! assert!(problems[0].starts_with("#"));
//! assert!(check_tool_schema(&serde_json::json!({"type": "object", "properties": {}})).is_empty());
//! ```

#![warn(unreachable_pub)]

#[cfg(feature = "runner")]
pub mod assertions;
#[cfg(feature = "runner")]
mod client;
#[cfg(feature = "runner")]
mod command;
#[cfg(feature = "runner")]
pub mod config;
#[cfg(feature = "runner")]
mod contracts;
#[cfg(feature = "runner")]
pub mod prompt;
#[cfg(feature = "runner")]
pub mod report;
#[cfg(feature = "runner")]
mod runner;
pub mod schema_check;
pub mod schema_targets;
#[cfg(feature = "runner")]
pub mod suite;

#[cfg(feature = "runner")]
pub(crate) use command::kill_group;
#[cfg(feature = "runner")]
pub use command::{SetupError, TestArgs, main, run};
#[cfg(feature = "runner")]
pub use config::ServerConfig;
#[cfg(feature = "runner")]
pub use report::Report;
#[cfg(feature = "runner")]
pub use suite::Suite;
