//! Requests rmcp could read as no MCP request.
//!
//! rmcp's request type is an untagged union that ends in `CustomRequest`:
//! a known method whose params do not parse (a `tools/call` whose
//! `arguments` is a list, or that has no `name`) falls through to it like
//! an unknown method, and rmcp's default answer to both is -32601 "method
//! not found" with the method's name as the whole message — wrong for the
//! first, and no help for either. Here a known method gets -32602 (invalid
//! params) saying what did not parse and where; an unknown one -32601
//! naming it, and so does, asked without a session, one the stateless
//! revision removed (`initialize`, `ping`, …: 404 on HTTP, as it requires). The transports bound both messages
//! ([`crate::transport::bounded`]).

// Logging and resources/subscribe are deprecated in 2026-07-28 and still
// served for the revisions before it: their params are read like any other.
#[allow(deprecated)]
use rmcp::model::{
    CallToolRequest, CancelTaskRequest, CompleteRequest, ConstString, CustomRequest, DiscoverRequest,
    ErrorCode, ErrorData, GetPromptRequest, GetSkillRequest, GetTaskRequest, InitializeRequest,
    ListPromptsRequest, ListResourceTemplatesRequest, ListResourcesRequest, ListSkillsRequest,
    ListToolsRequest, PingRequest, ReadResourceDirectoryRequest, ReadResourceRequest, Request,
    RequestNoParam, RequestOptionalParam, SetLevelRequest, SubscribeRequest, SubscriptionsListenRequest,
    UnsubscribeRequest, UpdateTaskRequest,
};
use serde::de::DeserializeOwned;
use serde_json::Value;

/// The answer to `request`, which rmcp read as no MCP request; `stateless`
/// when it came without a session (2026-07-28), where the methods that
/// revision removed are not found whatever their params (rmcp's HTTP
/// service answers -32601 with 404).
pub(crate) fn refusal(request: &CustomRequest, stateless: bool) -> ErrorData {
    let method = request.method.as_str();
    if let Some(removed) = removed_when_stateless(method).filter(|_| stateless) {
        return removed;
    }
    let Some(reason) = KNOWN
        .iter()
        .find(|(known, _)| *known == method)
        .map(|(_, reason)| reason)
    else {
        return ErrorData::new(
            ErrorCode::METHOD_NOT_FOUND,
            format!("method not found: '{method}' is not an MCP method this server serves"),
            None,
        );
    };
    let why =
        reason(request.params.clone()).unwrap_or_else(|| "they do not match what the method takes".into());
    ErrorData::invalid_params(format!("invalid params for {method}: {why}"), None)
}

/// The refusal of `method` asked statelessly, when the stateless revision
/// (2026-07-28) removed it: not found, saying so. rmcp's HTTP service
/// refuses these itself with only the method's name as the message; the
/// endpoint puts this one in its place.
pub(crate) fn removed_when_stateless(method: &str) -> Option<ErrorData> {
    REMOVED_WHEN_STATELESS.contains(&method).then(|| {
        ErrorData::new(
            ErrorCode::METHOD_NOT_FOUND,
            format!(
                "method not found: '{method}' is not a method of the stateless revision (2026-07-28); a client of that revision needs none of initialize, ping, logging/setLevel, resources/subscribe, resources/unsubscribe"
            ),
            None,
        )
    })
}

/// Why `params` are not those of one method: `None` when they are.
type Reason = fn(Option<Value>) -> Option<String>;

/// Every request method rmcp reads, with its reader.
#[allow(deprecated)]
const KNOWN: [(&str, Reason); 21] = [
    known::<PingRequest>(),
    known::<InitializeRequest>(),
    known::<DiscoverRequest>(),
    known::<CompleteRequest>(),
    known::<SetLevelRequest>(),
    known::<GetPromptRequest>(),
    known::<ListPromptsRequest>(),
    known::<ListResourcesRequest>(),
    known::<ListResourceTemplatesRequest>(),
    known::<ReadResourceRequest>(),
    known::<SubscriptionsListenRequest>(),
    known::<SubscribeRequest>(),
    known::<UnsubscribeRequest>(),
    known::<CallToolRequest>(),
    known::<ListToolsRequest>(),
    known::<GetTaskRequest>(),
    known::<UpdateTaskRequest>(),
    known::<CancelTaskRequest>(),
    known::<ListSkillsRequest>(),
    known::<GetSkillRequest>(),
    known::<ReadResourceDirectoryRequest>(),
];

/// The methods the stateless revision (2026-07-28) removed.
#[allow(deprecated)]
const REMOVED_WHEN_STATELESS: [&str; 5] = [
    <InitializeRequest as Typed>::METHOD,
    <PingRequest as Typed>::METHOD,
    <SetLevelRequest as Typed>::METHOD,
    <SubscribeRequest as Typed>::METHOD,
    <UnsubscribeRequest as Typed>::METHOD,
];

const fn known<R: Typed>() -> (&'static str, Reason) {
    (R::METHOD, R::reason)
}

/// Members of a request's params read again one by one to find the one
/// that failed: every MCP method's params have fewer.
const PROBED_MEMBERS: usize = 8;

/// `params` read as `P`: the error, with the member of `params` where it
/// failed. That member is found by reading `params` again without each
/// member in turn (moved out and back, never copied): the one whose absence
/// changes the error (to "missing field", or to none) is where it is. A
/// path-tracking reader (`serde_path_to_error`) would name deeper places,
/// but instantiated for each of rmcp's params types it added 0.1 MB to
/// every app's binary for an error path (docs/benchmarks.md, fifteenth
/// round); the member is what a client needs to fix a request.
fn unreadable<P: DeserializeOwned>(params: Value) -> Option<String> {
    let error = P::deserialize(&params).err()?.to_string();
    // A missing member's own message names it.
    if error.starts_with("missing field") {
        return Some(error);
    }
    let mut params = params;
    let keys: Vec<String> = match params.as_object() {
        Some(members) => members.keys().take(PROBED_MEMBERS).cloned().collect(),
        None => return Some(error),
    };
    for key in keys {
        let Some(value) = params.as_object_mut().and_then(|members| members.remove(&key)) else {
            continue;
        };
        let without = P::deserialize(&params);
        if let Some(members) = params.as_object_mut() {
            members.insert(key.clone(), value);
        }
        if without.map_or_else(|other| other.to_string() != error, |_| true) {
            return Some(format!("{key}: {error}"));
        }
    }
    Some(error)
}

/// A request type of rmcp's: the method it answers, and why params are
/// not its own. Its params are read alone, not inside the request: rmcp
/// reads them flattened beside `_meta`, which loses the path to the fault.
trait Typed {
    const METHOD: &'static str;
    fn reason(params: Option<Value>) -> Option<String>;
}

impl<M: ConstString, P: DeserializeOwned> Typed for Request<M, P> {
    const METHOD: &'static str = M::VALUE;
    fn reason(params: Option<Value>) -> Option<String> {
        match params {
            Some(params) => unreadable::<P>(params),
            None => Some("params are required".into()),
        }
    }
}

impl<M: ConstString, P: DeserializeOwned> Typed for RequestOptionalParam<M, P> {
    const METHOD: &'static str = M::VALUE;
    fn reason(params: Option<Value>) -> Option<String> {
        params.and_then(unreadable::<P>)
    }
}

impl<M: ConstString> Typed for RequestNoParam<M> {
    const METHOD: &'static str = M::VALUE;
    fn reason(_: Option<Value>) -> Option<String> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn answer(method: &str, params: Option<Value>) -> ErrorData {
        let mut request = CustomRequest::new(method, None);
        request.params = params;
        refusal(&request, false)
    }

    #[test]
    fn a_known_method_with_params_it_cannot_read_is_invalid_params_saying_where() {
        let list = answer(
            "tools/call",
            Some(json!({"name": "get_quote", "arguments": [1, 2]})),
        );
        assert_eq!(list.code, ErrorCode::INVALID_PARAMS);
        assert!(
            list.message.starts_with("invalid params for tools/call: "),
            "{}",
            list.message
        );
        assert!(list.message.contains("arguments"), "{}", list.message);
        let nameless = answer("tools/call", Some(json!({"arguments": {}})));
        assert_eq!(nameless.code, ErrorCode::INVALID_PARAMS);
        assert!(nameless.message.contains("name"), "{}", nameless.message);
        // The member at fault is named, whichever it is and whatever its
        // neighbours hold.
        let typed = answer(
            "tools/call",
            Some(json!({"arguments": {"symbol": "AAPL"}, "name": 5, "task": {"ttl": 1}})),
        );
        assert!(
            typed
                .message
                .starts_with("invalid params for tools/call: name: invalid type: integer `5`"),
            "{}",
            typed.message
        );
        // At most PROBED_MEMBERS members are read again: past them the
        // message is serde's alone, however many members a request brings.
        let mut crowded = serde_json::Map::new();
        for n in 0..PROBED_MEMBERS * 4 {
            crowded.insert(format!("a{n:03}"), json!(n));
        }
        crowded.insert("name".into(), json!(5));
        let unnamed = answer("tools/call", Some(Value::Object(crowded)));
        assert_eq!(
            unnamed.message,
            "invalid params for tools/call: invalid type: integer `5`, expected a string"
        );
        let not_an_object = answer("tools/call", Some(json!([1])));
        assert_eq!(not_an_object.code, ErrorCode::INVALID_PARAMS);
        let bare = answer("resources/read", None);
        assert_eq!(bare.code, ErrorCode::INVALID_PARAMS, "{}", bare.message);
    }

    #[test]
    fn an_unknown_method_is_method_not_found_naming_it() {
        let unknown = answer("tools/frobnicate", Some(json!({})));
        assert_eq!(unknown.code, ErrorCode::METHOD_NOT_FOUND);
        assert!(
            unknown.message.contains("'tools/frobnicate'"),
            "{}",
            unknown.message
        );
    }

    #[test]
    fn a_method_the_stateless_revision_removed_is_not_found_when_asked_statelessly() {
        let mut request = CustomRequest::new("initialize", None);
        request.params = Some(json!({}));
        assert_eq!(refusal(&request, true).code, ErrorCode::METHOD_NOT_FOUND);
        assert_eq!(refusal(&request, false).code, ErrorCode::INVALID_PARAMS);
        let unknown = CustomRequest::new("tools/frobnicate", None);
        assert_eq!(refusal(&unknown, true).code, ErrorCode::METHOD_NOT_FOUND);
        let call = CustomRequest::new("tools/call", Some(json!({"arguments": []})));
        assert_eq!(refusal(&call, true).code, ErrorCode::INVALID_PARAMS);
    }

    #[test]
    fn every_method_rmcp_reads_is_known_once() {
        let mut methods: Vec<&str> = KNOWN.iter().map(|(method, _)| *method).collect();
        methods.sort_unstable();
        methods.dedup();
        assert_eq!(methods.len(), KNOWN.len());
        assert!(methods.contains(&"tools/call") && methods.contains(&"tasks/get"));
    }
}
