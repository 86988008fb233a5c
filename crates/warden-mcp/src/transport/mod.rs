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

use rmcp::model::{JsonRpcMessage, ServerJsonRpcMessage};
use warden_core::limits::MAX_ERROR_MESSAGE_BYTES;

/// `message` as every transport sends it: a protocol error's text shown as
/// a person reads it (invisible characters escaped,
/// [`warden_core::screen::visible`]) and held to
/// [`MAX_ERROR_MESSAGE_BYTES`], and its `data` to as many bytes of JSON.
/// Protocol errors quote what they refuse (an unknown tool's or method's
/// name, a resource URI), some of them from rmcp itself (its unknown-method
/// error is the method's name); bounded here, where each transport
/// serialises what the service sends, none is missed. `tools/call` answers
/// are bounded before they get here (`crate::bound`). rmcp's refusal of a
/// stateless request of a method 2026-07-28 removed (`ping`, …), whose
/// message is the bare method name, gets one that says why
/// ([`crate::unparsed::removed_when_stateless`]).
pub(crate) fn bounded(mut message: ServerJsonRpcMessage) -> ServerJsonRpcMessage {
    if let JsonRpcMessage::Error(error) = &mut message {
        let error = &mut error.error;
        if error.code == rmcp::model::ErrorCode::METHOD_NOT_FOUND
            && let Some(why) = crate::unparsed::removed_when_stateless(&error.message)
        {
            *error = why;
        }
        let shown = warden_core::screen::visible(std::mem::take(&mut error.message).into_owned());
        error.message = warden_core::error::bound_message(shown, MAX_ERROR_MESSAGE_BYTES).into();
        if let Some(data) = error.data.take() {
            let fitted = if warden_core::answer::size(&data) > MAX_ERROR_MESSAGE_BYTES {
                warden_core::answer::fit(&data, MAX_ERROR_MESSAGE_BYTES).0
            } else {
                data
            };
            error.data = Some(fitted);
        }
    }
    message
}
