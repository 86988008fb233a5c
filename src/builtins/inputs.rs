//! Input types of the built-in tools. Their doc comments are the tool
//! descriptions and their fields the schemas, as for guards.

use schemars::JsonSchema;
use serde::Deserialize;

use crate::artifacts::Encoding;

/// Run a Rhai script that composes the registered guards, in the sandbox, as a task (no model involved).
///
/// Every guard is a function taking an object map, e.g. `price_option_t(#{option_type: "call", spot: 100.0, ...})`,
/// returning a map. Helpers: `write_artifact(filename, content[, "utf-8"|"base64"])` writes outputs/<filename>
/// (1 MiB max), `read_written_artifact(filename)`, `to_csv(rows[, columns])`, `print(..)`, and
/// `final_answer(#{task_type: "analysis"|"no_action"|"needs_input"|"unsupported"|"failed", summary, metrics, assumptions})`.
/// Guard errors are catchable: `try { … } catch (e) { e.code; e.message }`. No files, network or eval.
/// Returns {request_id, task_id, task_dir, status, task_type, summary, metrics, assumptions, artifacts, value, output}.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RunScriptInput {
    /// The Rhai source code.
    pub script: String,
    /// Seconds before the script worker is killed (default 300, at most the server maximum).
    #[serde(default)]
    pub timeout_seconds: Option<u64>,
}

/// List recent tasks (run_script and coding tasks), newest first, with status and summary.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListTasksInput {
    /// How many tasks to return (1-100, default 20).
    #[serde(default = "default_task_limit")]
    pub limit: u64,
}

fn default_task_limit() -> u64 {
    20
}

/// Get a task's saved result.json (inline up to 256 KiB; larger results are read with read_artifact).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GetTaskResultInput {
    /// The task id, e.g. "task_0123…" as returned by run_script.
    pub task_id: String,
}

/// List the files of a task directory (outputs/, result.json, actions, logs) with sizes and MIME types.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListArtifactsInput {
    /// The task id.
    pub task_id: String,
    /// Index of the first file to return (default 0).
    #[serde(default)]
    pub offset: u64,
    /// How many files to return (1-500, default 100).
    #[serde(default = "default_file_limit")]
    pub limit: u64,
}

fn default_file_limit() -> u64 {
    100
}

/// Read one chunk of a task file by byte offset. Follow next_offset until it is null.
///
/// utf-8 chunks never split a character (a chunk is trimmed back to the last whole character);
/// base64 chunks must each be decoded on their own, never concatenated before decoding.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReadArtifactInput {
    /// The task id.
    pub task_id: String,
    /// Path relative to the task directory, e.g. "outputs/scenarios.csv".
    pub filename: String,
    /// Byte offset to start at (default 0).
    #[serde(default)]
    pub offset: u64,
    /// Most bytes to read (1-262144, default 65536).
    #[serde(default = "default_chunk")]
    pub max_bytes: u64,
    /// "utf-8" (default) or "base64".
    #[serde(default)]
    pub encoding: Encoding,
}

fn default_chunk() -> u64 {
    65536
}
