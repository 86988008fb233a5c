//! Warden's MCP server: the rmcp `server` handler, the [`builtins`]
//! tools, the `resources` (artifacts; the app's own prompts and resources
//! are registered in `registry`), MCP Tasks, the tool [`export`] formats,
//! and the `transport`s the server speaks (stdio; Streamable HTTP with its
//! authentication, sessions and tenants' edge behind the `http` feature),
//! and the MCP App `view` of a task result.
//! Apps use the `warden` facade, whose `App` configures this server.
//!
//! The top of the spine: everything here reaches a guard through the
//! executor, a script through a task, and a model through the agent.
//!
//! ```
//! use warden_core::error::GuardError;
//! use warden_core::guard::guard;
//! use warden_core::registry::Registry;
//! use warden_calls::CallLimits;
//!
//! #[derive(serde::Deserialize, schemars::JsonSchema)]
//! struct Quote {
//!     /// The ticker, e.g. "AAPL".
//!     symbol: String,
//! }
//!
//! /// The last price of a symbol.
//! fn get_quote(quote: Quote) -> Result<f64, GuardError> {
//!     Ok(if quote.symbol == "AAPL" { 190.0 } else { 0.0 })
//! }
//!
//! // What `tools/list` shows: the guards, then every built-in tool.
//! let registry = Registry::new(vec![guard(get_quote).pure()]).expect("a valid registry");
//! let tools = warden_mcp::export::all_tools(&registry, &CallLimits::default());
//! assert!(tools.iter().any(|tool| tool.name == "get_quote"));
//! assert!(tools.iter().any(|tool| tool.name == "run_script"));
//! ```

#![warn(unreachable_pub)]

mod asking;
mod bound;
pub mod builtins;
pub mod export;
pub mod limits;
mod notices;
mod receipts;
mod resources;
mod revision;
mod rounds;
pub mod serve;
mod server;
mod serving;
mod status;
mod tasks;
mod transport;
mod unparsed;
mod view;
mod waiting;

pub use limits::{Limits, ServingLimits};
pub use server::WardenServer;
pub use serving::Serving;
