//! Warden's own MCP transports.
//!
//! rmcp's stdio transport drops a message it cannot parse (the client then
//! waits forever for its answer) and, because rmcp spawns a task per
//! response, keeps reading requests while the client reads none of the
//! answers (memory grows with every unread response). [`stdio`] is the
//! transport `serve` uses instead: it answers what it cannot parse, bounds
//! the size of one message, and stops reading while too many answers are
//! still unwritten. rmcp's message types and service loop are used as is.

#[cfg(feature = "http")]
pub(crate) mod http;
mod recover;
pub(crate) mod stdio;

pub(crate) use stdio::{StdioTransport, TransportLimits};
