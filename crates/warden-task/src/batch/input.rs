//! The `run_batch` argument object: its types are the tool's input schema
//! (shared by the `run_batch` tool and `call --batch`).

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Map, Value};

/// Run 1-25 guard calls in one request. Calls with no references between them run concurrently; a call using another's result waits for it.
///
/// Any argument value may be a reference, replaced before the call runs:
/// {"$result": 0, "path": "stats.mean"} is that field of calls[0]'s output ("$result": "r1" also names calls[0], "r2" calls[1], …;
/// digits in a path index lists, e.g. "rows.0.value"; omit path for the whole output; a scalar output is {"result": value}).
/// {"$artifact": {"task_id": "task_…", "filename": "outputs/data.csv"}, "column": "close"} loads a CSV column of a task file as a list
/// ("columns": ["a", "b"] or "columns": "all" give {column: [values]}); numbers load as numbers, so report data never passes through you.
/// Unknown guards, forward or self references and malformed references are refused before anything runs; a destructive guard runs only once the person confirms the call (refused up front when this client cannot be asked).
/// A failed call returns its own error; calls using its result are skipped with the reason; the others still run.
/// Returns {request_id, status, calls: [{index, ref, name, depends_on, status, duration_ms, output | error | reason, receipt?}], succeeded, failed, skipped, duration_ms}.
// This comment is the tool's description, written for the model: JSON in
// brackets, not doc links.
#[allow(rustdoc::broken_intra_doc_links)]
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RunBatchInput {
    /// The calls, in order (1-25). A call may only reference calls before it.
    #[schemars(length(min = 1, max = crate::limits::MAX_BATCH_CALLS))]
    pub calls: Vec<BatchCall>,
    /// "all" (default): every call's output; "last": only the last call's output (every call's status is still listed).
    #[serde(default, rename = "return")]
    pub return_mode: ReturnMode,
    /// Keep only these dotted paths of each returned output, e.g. ["stats.mean", "passed"]; the output becomes
    /// {"stats.mean": …, "passed": …}. References between calls still see full outputs.
    #[serde(default)]
    pub select: Vec<String>,
    /// Round numbers with a fractional part in returned outputs to this many significant figures (1-17);
    /// integers, counts and ids are untouched. References between calls still see exact values.
    #[serde(default)]
    pub digits: Option<u64>,
    /// true: each successful call also returns its receipt — SHA-256 of its canonical (RFC 8785) arguments and output,
    /// the guard and app versions and the build — so the result can be recomputed and compared (see verify_receipt).
    #[serde(default)]
    pub receipt: bool,
}

/// One guard call of a batch.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BatchCall {
    /// The guard's name, as list_guards gives it.
    pub name: String,
    /// The guard's arguments; any value may be a {"$result": …} or {"$artifact": …} reference.
    #[serde(default)]
    pub arguments: Map<String, Value>,
}

/// Which outputs the batch result carries.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ReturnMode {
    /// Every call's output.
    #[default]
    All,
    /// Only the last call's output.
    Last,
}
