//! `list_artifacts`: the files of a task directory, paged.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use super::{BoxFuture, Builtin, Call, decode, in_range, tool};
use crate::error::GuardError;

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

pub struct ListArtifacts;

impl Builtin for ListArtifacts {
    fn name(&self) -> &'static str {
        "list_artifacts"
    }
    fn tool(&self) -> rmcp::model::Tool {
        tool::<ListArtifactsInput>(self.name(), "List a task's artifacts", true)
    }
    fn call<'a>(&'a self, call: Call<'a>) -> BoxFuture<'a, Result<Value, GuardError>> {
        Box::pin(async move {
            let input: ListArtifactsInput = decode(call.arguments)?;
            let limit = in_range("limit", input.limit, 1, 500)? as usize;
            let files = match call
                .tasks
                .store
                .view(&call.origin.principal)
                .files(&input.task_id)
            {
                Ok(files) => files,
                Err(error) => {
                    return Err(super::explain_missing(
                        call.tasks,
                        &call.origin.principal,
                        &input.task_id,
                        error,
                    )
                    .await);
                }
            };
            let offset = input.offset as usize;
            let page: Vec<Value> = files
                .iter()
                .skip(offset)
                .take(limit)
                .map(|(name, size)| json!({"filename": name, "size_bytes": size, "mime_type": crate::artifacts::mime_type(name)}))
                .collect();
            let next = (offset + page.len() < files.len()).then_some(offset + page.len());
            Ok(json!({"task_id": input.task_id, "files": page, "next_offset": next}))
        })
    }
}
