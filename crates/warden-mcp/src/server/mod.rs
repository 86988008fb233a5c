//! The MCP server: rmcp's `ServerHandler` over the registry and executor.
//!
//! `tools/list` is the registry in name order; `tools/call` goes through the
//! executor and comes back as structuredContent (mirrored as text), within
//! the answer bound (`crate::bound`, every answer in one place). Errors a
//! caller can fix are normal results with `isError: true` and a stable code;
//! a guard's error carries its JSON in the text content only, because
//! structuredContent must match the guard's `outputSchema` and an error does
//! not (clients such as the MCP Inspector validate it and would show a
//! schema complaint instead of the message). Built-ins declare no output
//! schema, so their errors keep structuredContent too;
//! an unknown tool is a protocol error (-32602). Nothing here panics across
//! the handler, and every call is bracketed by request events.

/// The policy as this layer applies it (visible tools, routes, claims).
mod access;
/// Queuing a task and running the ones this server claims.
mod detached;
/// Routing a `tools/call`, and the calls of built-ins and guards.
mod dispatch;
mod guard_task;
/// rmcp's `ServerHandler`: each request handed to the module that does it.
mod handler;
/// Who and what a request is: its origin, principal and scopes.
mod origin;
/// A call's outcome as the MCP result.
mod results;
/// The request events and span around every call.
mod scope;
mod stateless_script;
/// The handler's state and its shared words.
mod warden_server;

pub(crate) use detached::start_claimer;
#[cfg(feature = "http")]
pub(crate) use origin::new_request_origin;
pub use warden_server::WardenServer;
