//! The MCP face of Warden: the rmcp [`server`] handler, the [`builtins`]
//! tools, the [`resources`] (artifacts), the app's [`prompts`] and
//! [`app_resources`], the tool [`export`] formats, and the
//! [`transport`]s the server speaks.

pub mod app_resources;
pub mod builtins;
pub mod export;
pub mod notices;
pub mod portable;
pub mod prompts;
pub mod resources;
pub(crate) mod serve;
pub mod server;
pub(crate) mod tasks;
pub mod transport;
