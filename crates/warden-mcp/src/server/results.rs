//! A call's outcome as the MCP result: structured for a success, the
//! failure's JSON as text for a guard's error (structuredContent must
//! match its output schema), content blocks for a guard that returns them.

use rmcp::model::CallToolResult;
use serde_json::{Value, json};

use warden_calls::executor::Failure;
use warden_core::error::GuardError;

/// The MCP result for a guard call's outcome. An error has no
/// structuredContent (it would contradict the guard's output schema): its
/// JSON is the text content.
pub(crate) fn result_of(outcome: Result<Value, Failure>, request_id: &str) -> CallToolResult {
    match outcome {
        Ok(value) => CallToolResult::structured(value),
        Err(failure) => CallToolResult::error(vec![rmcp::model::ContentBlock::text(
            failure_json(&failure, request_id).to_string(),
        )]),
    }
}

/// The result of a guard whose output is `Vec<Content>` (wrapped as
/// `{"result": [...]}` like every non-object output): the blocks
/// themselves, with no structuredContent.
pub(super) fn content_result(value: Value) -> CallToolResult {
    /// The wrapper a non-object output travels in.
    #[derive(serde::Deserialize)]
    struct Wrapped {
        result: Vec<warden_core::Content>,
    }
    match serde_json::from_value::<Wrapped>(value) {
        Ok(Wrapped { result: blocks }) => {
            CallToolResult::success(blocks.into_iter().map(warden_core::Content::into_block).collect())
        }
        _ => CallToolResult::error(vec![rmcp::model::ContentBlock::text(
            "the guard's content blocks could not be read back",
        )]),
    }
}

/// Whether a built-in's error refused the request (nothing ran).
pub(super) fn refused(error: &GuardError) -> bool {
    warden_core::error::codes::REFUSALS.contains(&error.code.as_str())
}

/// `{status, error, request_id}` for a failed call.
pub(super) fn failure_json(failure: &Failure, request_id: &str) -> Value {
    json!({
        "status": failure.status.as_str(),
        "error": failure.error,
        "request_id": request_id,
    })
}
