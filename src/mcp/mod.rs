//! The MCP face of Warden: the rmcp [`server`] handler, the [`builtins`]
//! tools, the [`resources`] (artifacts), the tool [`export`] formats, and the
//! [`transport`]s the server speaks.

pub mod builtins;
pub mod export;
pub mod portable;
pub mod resources;
pub(crate) mod serve;
pub mod server;
pub mod transport;
