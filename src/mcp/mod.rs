//! The MCP face of Warden: the rmcp [`server`] handler, the [`builtins`]
//! tools, the [`resources`] (artifacts; the app's own prompts and resources
//! are registered in `registry`), the tool [`export`] formats, and the
//! [`transport`]s the server speaks.

pub mod builtins;
pub mod export;
pub mod notices;
pub mod resources;
pub(crate) mod serve;
pub mod server;
pub(crate) mod tasks;
pub mod transport;
