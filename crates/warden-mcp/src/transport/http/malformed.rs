//! A POST body rmcp cannot take gets a JSON-RPC error that says why.
//!
//! One that is not a JSON-RPC message gets the error
//! every transport gives ([`crate::transport::unreadable`]): `400`, with
//! `-32700` for text that is not JSON (or nests deeper than serde_json
//! reads) and `-32600` for JSON that is not a message, the request's id
//! when a tolerant scan finds one, and a message saying what to change.
//!
//! rmcp answered such a body `415 Unsupported Media Type` with a plain-text
//! body ("fail to deserialize request body …"): a client that had sent the
//! right `Content-Type` was told the wrong thing, in a form no JSON-RPC
//! client reads. Only that answer is replaced, and only for a body declared
//! JSON (a wrong `Content-Type` keeps rmcp's 415, which is the truth then):
//! a body that reads as a message passes untouched, and no request that
//! rmcp accepts is parsed twice.
//!
//! An `initialize` whose params rmcp cannot read (a `protocolVersion` that
//! is a number, no `clientInfo`) is no initialize to rmcp, so without a
//! session it answered "Bad Request: Session ID is required", sending the
//! client after a session it was trying to open. It gets `400` with the
//! `-32602` a known method with unreadable params gets on every path
//! ([`crate::unparsed`]), naming the member at fault.

use axum::body::Bytes;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};

use crate::transport::recover::request_id;
use crate::transport::unreadable::{Framing, Unreadable};

/// Whether `headers` declare a JSON body, as rmcp requires before it reads one.
pub(super) fn declares_json(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|kind| kind.to_str().ok())
        .is_some_and(|kind| {
            kind.trim_start()
                .to_ascii_lowercase()
                .starts_with("application/json")
        })
}

/// The answer for rmcp's `response` to a POST whose JSON-declared body was
/// `body`, sent `in_session` (with an `Mcp-Session-Id`) or not: the
/// JSON-RPC error when rmcp refused the body as unreadable or as no
/// initialize, else `response` itself.
pub(super) fn answer(response: Response, body: &Bytes, in_session: bool) -> Response {
    match response.status() {
        StatusCode::UNSUPPORTED_MEDIA_TYPE => not_a_message(response, body),
        StatusCode::BAD_REQUEST if !in_session => unread_initialize(response, body),
        _ => response,
    }
}

/// Whether `headers` name a session (`Mcp-Session-Id`).
pub(super) fn in_session(headers: &HeaderMap) -> bool {
    headers.contains_key("mcp-session-id")
}

/// rmcp's 415 to a body it could not read as a message.
fn not_a_message(response: Response, body: &Bytes) -> Response {
    let Err(error) = serde_json::from_slice::<rmcp::model::ClientJsonRpcMessage>(body) else {
        return response;
    };
    // A `Value`, not `IgnoredAny`: skipping a value checks neither its
    // depth nor its strings' escapes.
    let refused = match serde_json::from_slice::<serde_json::Value>(body) {
        Ok(value) => Unreadable::not_a_message(&value, &error, Framing::Body),
        Err(error) => Unreadable::not_json(body, &error, Framing::Body),
    };
    let reply = refused.reply(request_id(body));
    (StatusCode::BAD_REQUEST, axum::Json(reply)).into_response()
}

/// rmcp's 400 to a session-less POST that is no initialize to it: an
/// `initialize` whose params it could not read gets the invalid-params
/// error naming what did not parse.
fn unread_initialize(response: Response, body: &Bytes) -> Response {
    use rmcp::model::{ClientJsonRpcMessage, JsonRpcMessage};
    let Ok(JsonRpcMessage::Request(request)) = serde_json::from_slice::<ClientJsonRpcMessage>(body) else {
        return response;
    };
    let Some(refused) = Unreadable::unread_initialize(&request.request) else {
        return response;
    };
    let reply = refused.reply(Some(request.id));
    (StatusCode::BAD_REQUEST, axum::Json(reply)).into_response()
}
