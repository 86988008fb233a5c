//! The answer to a message the server read but cannot take, the same on
//! every transport: a stdio line and an HTTP POST body that is not JSON get
//! `-32700`, JSON that is not a JSON-RPC message gets `-32600`, each with
//! the id a tolerant scan recovers ([`super::recover`]) and a message that
//! says what to change.
//!
//! An `initialize` whose params do not parse is answered here too
//! ([`Unreadable::unread_initialize`]).
//!
//! Two cases get their own words, because serde's would mislead: a message
//! nested deeper than serde_json parses ([`PARSED_DEPTH`]) is valid JSON,
//! so "not valid JSON (recursion limit exceeded)" sent people looking for a
//! syntax error; and a JSON array is a JSON-RPC batch, which MCP no longer
//! takes (2025-06-18 removed them).

use rmcp::model::{ErrorCode, ErrorData, JsonRpcError, JsonRpcVersion2_0, RequestId};
use serde_json::Value;

use warden_calls::executor::arguments::text_depth;
use warden_calls::limits::MAX_ARGUMENT_DEPTH;

use crate::limits::PARSED_DEPTH;

/// How the transport frames one message, for the message's fix.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Framing {
    /// One message per line (stdio).
    Line,
    /// One message per POST body (Streamable HTTP).
    #[cfg_attr(not(feature = "http"), allow(dead_code))]
    Body,
}

impl Framing {
    fn unit(self) -> &'static str {
        match self {
            Self::Line => "the line",
            Self::Body => "the request body",
        }
    }

    fn one_message(self) -> &'static str {
        match self {
            Self::Line => "send one JSON-RPC message per line",
            Self::Body => "send one JSON-RPC message as the body of each POST",
        }
    }
}

/// Why a message the transport read does not reach the service: its
/// JSON-RPC error code and message.
#[derive(Debug)]
pub(crate) struct Unreadable {
    pub(crate) code: ErrorCode,
    pub(crate) message: String,
}

impl Unreadable {
    /// `text` is not JSON serde_json can read.
    pub(crate) fn not_json(text: &[u8], error: &serde_json::Error, framing: Framing) -> Self {
        let depth = text_depth(text);
        let message = if error.is_syntax() && depth > PARSED_DEPTH {
            format!(
                "parse error: {} nests {depth} levels of objects and lists; a message may nest at most \
{PARSED_DEPTH} (and a call's arguments {MAX_ARGUMENT_DEPTH}): pass flatter data, or write large \
structures as an artifact",
                framing.unit()
            )
        } else {
            format!(
                "parse error: {} is not valid JSON ({error}); {}",
                framing.unit(),
                framing.one_message()
            )
        };
        Self {
            code: ErrorCode::PARSE_ERROR,
            message,
        }
    }

    /// `value` (read from `text`) is JSON but not a JSON-RPC message the
    /// server understands; `error` is serde's reason, used when the member
    /// at fault cannot be named ([`at_fault`]).
    pub(crate) fn not_a_message(value: &Value, error: &serde_json::Error, framing: Framing) -> Self {
        let message = if value.is_array() {
            format!(
                "invalid request: {} is a JSON array (a JSON-RPC batch), which MCP does not take \
since 2025-06-18; {}",
                framing.unit(),
                framing.one_message()
            )
        } else {
            let why = at_fault(value).unwrap_or_else(|| error.to_string());
            format!("invalid request: {why}; expected a JSON-RPC 2.0 request, notification or response")
        };
        Self {
            code: ErrorCode::INVALID_REQUEST,
            message,
        }
    }

    /// An `initialize` whose params rmcp could not read (it then reads it
    /// as a request of no known kind): the invalid-params error naming the
    /// member at fault ([`crate::unparsed`]). rmcp would answer it as
    /// anything but an initialize — on stdio as a stateless request
    /// without its `_meta`, over HTTP as a request without a session — so
    /// the transports answer it themselves. `None` for any other request.
    pub(crate) fn unread_initialize(request: &rmcp::model::ClientRequest) -> Option<Self> {
        let rmcp::model::ClientRequest::CustomRequest(custom) = request else {
            return None;
        };
        (custom.method == "initialize").then(|| Self {
            code: ErrorCode::INVALID_PARAMS,
            message: crate::unparsed::refusal(custom, false).message.into_owned(),
        })
    }

    /// The JSON-RPC error answering it, for request `id` (`null` when it
    /// could not be read), its message shown and bounded as every protocol
    /// error is ([`super::error_value`]).
    pub(crate) fn reply(self, id: Option<RequestId>) -> Value {
        let error = JsonRpcError {
            jsonrpc: JsonRpcVersion2_0,
            id,
            error: ErrorData::new(self.code, self.message, None),
        };
        super::error_value(error)
    }
}

/// The member that keeps `value` from being a JSON-RPC message, in the
/// words of the rule it breaks; `None` when it breaks none of these (serde's
/// reason is then the best there is: bad `params` of a known method are
/// answered by the service, not here). rmcp reads a message as one of
/// several shapes and says only that none matched.
fn at_fault(value: &Value) -> Option<String> {
    let Some(message) = value.as_object() else {
        return Some(format!(
            "a JSON-RPC message is a JSON object, not {}",
            kind(value)
        ));
    };
    match message.get("jsonrpc") {
        Some(Value::String(version)) if version == "2.0" => {}
        Some(other) => return Some(format!(r#""jsonrpc" must be "2.0", not {other}"#)),
        None => return Some(r#""jsonrpc": "2.0" is missing"#.into()),
    }
    if let Some(id) = message.get("id")
        && !(id.is_string() || id.is_i64() || id.is_u64())
    {
        return Some(format!(
            r#""id" must be a string or an integer, not {}"#,
            kind(id)
        ));
    }
    if let Some(method) = message.get("method")
        && !method.is_string()
    {
        return Some(format!(r#""method" must be a string, not {}"#, kind(method)));
    }
    if let Some(params) = message.get("params")
        && !params.is_object()
    {
        return Some(format!(r#""params" must be an object, not {}"#, kind(params)));
    }
    let answers = message.contains_key("result") || message.contains_key("error");
    if !message.contains_key("method") && !answers {
        return Some(
            r#"it has neither a "method" (a request or notification) nor a "result" or "error" (a response)"#
                .into(),
        );
    }
    None
}

/// What kind of JSON value `value` is, for a message about it.
fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "an integer",
        Value::Number(_) => "a number that is not a 64-bit integer",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nested(levels: usize) -> String {
        format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"ping","params":{{"x":{}{}}}}}"#,
            "[".repeat(levels - 2),
            "]".repeat(levels - 2)
        )
    }

    #[test]
    fn the_parsed_depth_is_serde_jsons() {
        // The message object and `params` are two levels of the count.
        let deepest = nested(PARSED_DEPTH);
        assert_eq!(text_depth(deepest.as_bytes()), PARSED_DEPTH);
        assert!(serde_json::from_str::<Value>(&deepest).is_ok());
        let deeper = nested(PARSED_DEPTH + 1);
        assert!(serde_json::from_str::<Value>(&deeper).is_err());
    }

    #[test]
    fn a_message_too_deep_to_parse_is_told_so_not_that_it_is_broken() {
        let text = nested(200);
        let Err(error) = serde_json::from_str::<Value>(&text) else {
            panic!("200 levels parsed");
        };
        let refused = Unreadable::not_json(text.as_bytes(), &error, Framing::Body);
        assert_eq!(refused.code, ErrorCode::PARSE_ERROR);
        assert!(
            refused.message.contains("nests 200 levels"),
            "{}",
            refused.message
        );
        assert!(refused.message.contains("at most 127"), "{}", refused.message);
        assert!(!refused.message.contains("not valid JSON"), "{}", refused.message);

        let broken = br#"{"jsonrpc":"2.0","id":1,"#;
        let Err(error) = serde_json::from_slice::<Value>(broken) else {
            panic!("parsed");
        };
        let refused = Unreadable::not_json(broken, &error, Framing::Line);
        assert!(refused.message.contains("not valid JSON"), "{}", refused.message);
        assert!(refused.message.contains("per line"), "{}", refused.message);
    }

    /// The refusal of `text`, which must be JSON and not a message.
    fn refused(text: &str) -> Unreadable {
        let error =
            serde_json::from_str::<rmcp::model::ClientJsonRpcMessage>(text).expect_err("not a message");
        let value: Value = serde_json::from_str(text).expect("JSON");
        Unreadable::not_a_message(&value, &error, Framing::Line)
    }

    #[test]
    fn the_member_at_fault_is_named() {
        for (text, says) in [
            (
                r#"{"jsonrpc":"2.0","id":null,"method":"ping"}"#,
                r#""id" must be a string or an integer, not null"#,
            ),
            (
                r#"{"jsonrpc":"2.0","id":1.5,"method":"ping"}"#,
                "not a number that is not a 64-bit integer",
            ),
            (
                r#"{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}"#,
                "not an object",
            ),
            (
                r#"{"jsonrpc":"1.0","id":1,"method":"ping"}"#,
                r#""jsonrpc" must be "2.0", not "1.0""#,
            ),
            (r#"{"id":1,"method":"ping"}"#, r#""jsonrpc": "2.0" is missing"#),
            (
                r#"{"jsonrpc":"2.0","id":1,"method":7}"#,
                r#""method" must be a string, not an integer"#,
            ),
            (
                r#"{"jsonrpc":"2.0","id":1,"method":"ping","params":[1]}"#,
                r#""params" must be an object, not an array"#,
            ),
            (r#"{"jsonrpc":"2.0","id":1}"#, r#"neither a "method""#),
            ("7", "a JSON object, not an integer"),
        ] {
            let refused = refused(text);
            assert_eq!(refused.code, ErrorCode::INVALID_REQUEST);
            assert!(refused.message.contains(says), "{text}: {}", refused.message);
        }
    }

    #[test]
    fn a_batch_is_named_as_one() {
        let refused = refused(r#" [{"jsonrpc":"2.0","id":1,"method":"ping"}]"#);
        assert_eq!(refused.code, ErrorCode::INVALID_REQUEST);
        assert!(refused.message.contains("JSON-RPC batch"), "{}", refused.message);
        let reply = refused.reply(None);
        assert!(reply.get("id").is_some_and(Value::is_null), "{reply}");
        assert_eq!(reply["error"]["code"], -32600, "{reply}");
    }
}
