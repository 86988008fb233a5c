//! A POST body that is not a JSON-RPC message gets the JSON-RPC error
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
/// `body`: the JSON-RPC error when rmcp refused the body as unreadable,
/// else `response` itself.
pub(super) fn answer(response: Response, body: &Bytes) -> Response {
    if response.status() != StatusCode::UNSUPPORTED_MEDIA_TYPE {
        return response;
    }
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
