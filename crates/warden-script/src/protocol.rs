//! Messages between the server and a script worker (JSON lines both ways).
//!
//! The script worker's only door to the world. The server speaks first with
//! [`ToWorker::Run`]; while a script runs, the worker may send requests
//! ([`FromWorker::GuardCall`], [`FromWorker::MapCall`],
//! [`FromWorker::WriteArtifact`], [`FromWorker::ReadArtifact`]) and blocks
//! for the matching reply; it ends a
//! run with [`FromWorker::Done`]. Between those lines it sends its inline
//! pure calls as [`PureBatch`] lines, which need no reply.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use warden_core::error::GuardError;

/// Server → worker.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ToWorker {
    /// Run `code` in the persistent scope, stopping at `deadline_ms` from
    /// now. `calls_left` bounds guard calls through the door (a `map_call`
    /// counts once); `inline_left`, when set, bounds inline calls (pure
    /// guards and script-only functions) apart from them: coding tasks
    /// budget both, `run_script` bounds inline calls by operations and the
    /// deadline only.
    Run {
        code: String,
        deadline_ms: u64,
        calls_left: u64,
        #[serde(default)]
        inline_left: Option<u64>,
        /// Guards the caller's policy denies, each with its refusal: for
        /// this run the worker answers them as functions that do not exist
        /// (see `warden_calls::policy`).
        #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
        denied: std::collections::BTreeMap<String, String>,
    },
    /// Reply to a guard call.
    GuardReply { result: Result<Value, GuardError> },
    /// Reply to a [`FromWorker::MapCall`]: on success an array with one
    /// `{"ok": output}` or `{"error": {code, message, field}}` per item, in
    /// the items' order; an error when the whole request was refused (too
    /// large, timed out).
    MapReply { result: Result<Value, GuardError> },
    /// Reply to write_artifact / read_written_artifact.
    ArtifactReply { result: Result<Value, GuardError> },
}

/// Worker → server.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum FromWorker {
    /// First line: which sandbox layers are really in force.
    Hello {
        layers: Layers,
    },
    GuardCall {
        guard: String,
        arguments: Value,
    },
    /// `map_call(guard, items)`: one call of `guard` per item, in order,
    /// answered with one [`ToWorker::MapReply`]. At most
    /// [`crate::limits::MAX_MAP_CALL_ITEMS`] items.
    MapCall {
        guard: String,
        items: Vec<Value>,
    },
    WriteArtifact {
        filename: String,
        content: String,
        encoding: String,
    },
    ReadArtifact {
        filename: String,
    },
    Done {
        outcome: RunOutcome,
    },
}

/// The sandbox layers a worker reports, defined with the layers.
pub use warden_sandbox::layers::Layers;

/// How a [`PureBatch`] line starts; no [`FromWorker`] line starts so.
pub const PURE_BATCH_PREFIX: &str = r#"{"type":"pure_calls","calls":["#;

/// Inline pure calls since the worker's last message, for the event log
/// and function_calls.json: `{"type":"pure_calls","calls":[[…],…]}`.
/// Each call is an array in [`PureCall`]'s field order: it is the bulk of
/// the traffic of a script that loops over a pure guard, and keys would
/// double it.
#[derive(Debug, Deserialize)]
pub struct PureBatch<'a> {
    #[serde(borrow)]
    pub calls: Vec<PureCall<'a>>,
}

/// One inline pure call: the event log's record type, sent as is.
pub use warden_calls::events::PureCall;

/// How one script run ended.
#[derive(Debug, Clone, Serialize, Deserialize, Default)]
pub struct RunOutcome {
    /// The script's last value (null for unit).
    pub value: Value,
    /// Printed output (capped).
    pub output: String,
    pub output_truncated: bool,
    /// The map passed to final_answer, if called.
    pub final_answer: Option<Value>,
    pub error: Option<ScriptError>,
    /// The code was refused by the check before it ran (`error` lists
    /// every problem found): nothing happened, so a coding task does not
    /// charge a step for it.
    #[serde(default)]
    pub not_run: bool,
    /// Guard calls this run sent through the door (a `map_call` is one).
    #[serde(default)]
    pub door_calls: u64,
    /// Inline calls this run made: pure guards and script-only functions.
    #[serde(default)]
    pub inline_calls: u64,
}

/// One item of a [`ToWorker::MapReply`]: `{"ok": output}` or `{"error":
/// {code, message, field}}`, the shape a script sees.
pub fn map_item(result: Result<Value, GuardError>) -> Value {
    match result {
        Ok(output) => serde_json::json!({ "ok": output }),
        Err(error) => serde_json::json!({
            "error": {"code": error.code, "message": error.message, "field": error.field}
        }),
    }
}

/// A classified script error with its position (the task's error record).
pub use warden_core::error::TaskError as ScriptError;
