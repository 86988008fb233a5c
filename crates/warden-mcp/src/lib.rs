//! Warden's MCP server: the rmcp [`server`] handler, the [`builtins`]
//! tools, the [`resources`] (artifacts; the app's own prompts and resources
//! are registered in `registry`), MCP Tasks, the tool [`export`] formats,
//! and the [`transport`]s the server speaks (stdio; Streamable HTTP with its
//! authentication, sessions and tenants' edge behind the `http` feature),
//! and the MCP App [`view`] of a task result.
//! Apps use the `warden` facade, whose `App` configures this server.
//!
//! The top of the spine: everything here reaches a guard through the
//! executor, a script through a task, and a model through the agent.

mod asking;
pub mod bound;
pub mod builtins;
pub mod export;
pub mod limits;
pub mod notices;
pub mod receipts;
pub mod resources;
mod rounds;
pub mod serve;
pub mod server;
pub mod serving;
pub mod status;
pub mod tasks;
pub mod transport;
pub mod view;
mod waiting;
