//! `read_artifact`: one chunk of a task file by byte offset.

use schemars::JsonSchema;
use serde::Deserialize;

use super::{Builtin, BuiltinTool, Call, Reply, decode, in_range, tool};
use warden_calls::artifacts::Encoding;
use warden_core::error::GuardError;
use warden_core::future::BoxFuture;
use warden_task::limits::MAX_READ_CHUNK_BYTES;

/// Read one chunk of a task file by byte offset. Follow next_offset until it is null.
///
/// utf-8 chunks never split a character (a chunk is trimmed back to the last whole character);
/// base64 chunks must each be decoded on their own, never concatenated before decoding.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct ReadArtifactInput {
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

pub(super) struct ReadArtifact;

impl Builtin for ReadArtifact {
    fn kind(&self) -> BuiltinTool {
        BuiltinTool::ReadArtifact
    }
    fn tool(&self) -> rmcp::model::Tool {
        tool::<ReadArtifactInput>(self.name(), "Read an artifact", true)
    }
    fn call<'a>(&'a self, call: Call<'a>) -> BoxFuture<'a, Result<Reply, GuardError>> {
        Box::pin(async move {
            let input: ReadArtifactInput = decode(call.arguments)?;
            let mut max = in_range("max_bytes", input.max_bytes, 1, MAX_READ_CHUNK_BYTES as u64)? as usize;
            let view = call.ctx.store().view(&call.origin.principal);
            let read = |max| view.read(&input.task_id, &input.filename, input.offset, max, input.encoding);
            // The chunk is sent twice (structured and as text) and must
            // stay within the answer bound: a smaller chunk, with
            // `next_offset` going on from its end, rather than a cut one.
            let budget = chunk_budget(call.ctx.serving().max_answer_bytes);
            let mut read_once = read(max);
            for _ in 0..8 {
                let Ok(chunk) = &read_once else { break };
                let used = warden_core::answer::size(chunk);
                if used <= budget || max == 1 {
                    break;
                }
                max = (max.saturating_mul(budget) / used).clamp(1, max - 1);
                read_once = read(max);
            }
            match read_once {
                // The artifact store's own answer, serialised here, at the edge.
                Ok(chunk) => Reply::data(&chunk),
                Err(error) => Err(super::explain_missing(
                    call.ctx.records(),
                    &call.origin.principal,
                    &input.task_id,
                    error,
                )
                .await),
            }
        })
    }
}

/// Bytes one chunk's answer may take under the answer bound `limit`:
/// half of it (the answer is sent twice), less the envelope.
fn chunk_budget(limit: usize) -> usize {
    (limit.saturating_sub(crate::limits::ANSWER_ENVELOPE_BYTES) / 2).saturating_sub(256)
}
