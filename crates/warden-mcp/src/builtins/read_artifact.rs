//! `read_artifact`: one chunk of a task file by byte offset.

use schemars::JsonSchema;
use serde::Deserialize;

use super::{BoxFuture, Builtin, BuiltinTool, Call, Reply, decode, in_range, tool};
use crate::artifacts::Encoding;
use crate::error::GuardError;
use crate::limits::MAX_READ_CHUNK_BYTES;

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

pub struct ReadArtifact;

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
            let max = in_range("max_bytes", input.max_bytes, 1, MAX_READ_CHUNK_BYTES as u64)? as usize;
            let read = call.ctx.store().view(&call.origin.principal).read(
                &input.task_id,
                &input.filename,
                input.offset,
                max,
                input.encoding,
            );
            match read {
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
