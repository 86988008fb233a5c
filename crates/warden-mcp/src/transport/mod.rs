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
mod unreadable;

pub(crate) use stdio::{StdioTransport, TransportLimits};

use rmcp::model::{
    ClientJsonRpcMessage, JsonRpcError, JsonRpcMessage, RequestId, ServerJsonRpcMessage, ServerNotification,
};
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
/// ([`crate::unparsed::removed_when_stateless`]); its refusal of a request
/// without `_meta` or a session says what either revision's client does.
pub(crate) fn bounded(mut message: ServerJsonRpcMessage) -> ServerJsonRpcMessage {
    if let JsonRpcMessage::Error(error) = &mut message {
        bound_error(&mut error.error);
    }
    message
}

/// A protocol error as [`bounded`] leaves it.
fn bound_error(error: &mut rmcp::model::ErrorData) {
    if error.code == rmcp::model::ErrorCode::METHOD_NOT_FOUND
        && let Some(why) = crate::unparsed::removed_when_stateless(&error.message)
    {
        *error = why;
    }
    if error.code == rmcp::model::ErrorCode::INVALID_PARAMS && error.message.contains(MISSING_META) {
        error.message = format!("{}{META_HINT}", error.message).into();
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

/// An `error` as JSON, bounded as [`bounded`] bounds it, with `"id": null`
/// when its request's id could not be read: JSON-RPC 2.0 requires the
/// member (rmcp leaves it out, as 2026-07-28 allows; `null` reads on every
/// revision). It takes the error alone, not a whole message: turning a
/// `ServerJsonRpcMessage` into a `Value` compiled a second serialiser of
/// every result and notification rmcp knows (50 KB of the one-guard app).
pub(crate) fn error_value(mut error: JsonRpcError) -> serde_json::Value {
    bound_error(&mut error.error);
    let mut value = serde_json::to_value(error).unwrap_or_default();
    if let Some(object) = value.as_object_mut() {
        object.entry("id").or_insert(serde_json::Value::Null);
    }
    value
}

/// rmcp's words for a request that came with neither a session nor the
/// stateless revision's `_meta`.
const MISSING_META: &str = "request _meta is missing or has malformed required fields";

/// What such a request's client should do, for either revision: rmcp's
/// message names only the 2026-07-28 fields, which sent a client of an
/// earlier revision that had forgotten `initialize` after them.
const META_HINT: &str = "; a client of the 2026-07-28 revision sends both in every request's \
_meta, a client of an earlier revision sends initialize first";

/// How far the ids of the server's own requests are moved on the wire: 1.
///
/// rmcp numbers a session's requests to the client (a form, a completion
/// request) from 0, and the TypeScript SDK 1.x — Claude Desktop's, the
/// Inspector's — ignores a `notifications/cancelled` for request 0 (a
/// falsy-id check: its issue #2283), so the first form of a session stayed
/// on the person's screen after the server withdrew it. Every transport
/// numbers them from 1 instead: [`outgoing`] moves the request's id (and
/// the id a cancellation of it names) up, [`incoming`] moves the client's
/// answer back down.
const REQUEST_ID_SHIFT: i64 = 1;

/// `message` as it leaves on any transport: [`bounded`], and a request of
/// the server's own (or the cancellation of one) numbered as the wire
/// numbers them (see [`REQUEST_ID_SHIFT`]). The server cancels only its
/// own requests, so every cancellation it sends names one.
pub(crate) fn outgoing(message: ServerJsonRpcMessage) -> ServerJsonRpcMessage {
    let mut message = bounded(message);
    match &mut message {
        JsonRpcMessage::Request(request) => shift(&mut request.id, REQUEST_ID_SHIFT),
        JsonRpcMessage::Notification(notification) => {
            if let ServerNotification::CancelledNotification(cancelled) = &mut notification.notification
                && let Some(id) = cancelled.params.request_id.as_mut()
            {
                shift(id, REQUEST_ID_SHIFT);
            }
        }
        _ => {}
    }
    message
}

/// `message` as the service reads it: a client's answer (a response or an
/// error: a client answers only the server's requests) numbered back as
/// rmcp numbered the request (see [`REQUEST_ID_SHIFT`]).
pub(crate) fn incoming(mut message: ClientJsonRpcMessage) -> ClientJsonRpcMessage {
    match &mut message {
        JsonRpcMessage::Response(response) => shift(&mut response.id, -REQUEST_ID_SHIFT),
        JsonRpcMessage::Error(error) => {
            if let Some(id) = error.id.as_mut() {
                shift(id, -REQUEST_ID_SHIFT);
            }
        }
        _ => {}
    }
    message
}

/// Moves a numeric id by `by` (ids rmcp gives are numbers; a string id is
/// left as it is).
fn shift(id: &mut RequestId, by: i64) {
    if let RequestId::Number(n) = id {
        *n = n.saturating_add(by);
    }
}
