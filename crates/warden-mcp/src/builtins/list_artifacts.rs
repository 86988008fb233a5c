//! `list_artifacts`: the files of a task directory, paged.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{Builtin, BuiltinTool, Call, Reply, decode, in_range, tool};
use warden_core::error::GuardError;
use warden_core::future::BoxFuture;

/// List the files of a task directory (outputs/, result.json, actions, logs) with sizes and MIME types.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct ListArtifactsInput {
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

pub(super) struct ListArtifacts;

/// One page of a task's files.
#[derive(Serialize)]
struct Page<'a> {
    task_id: &'a str,
    files: Vec<File<'a>>,
    /// Where the next page starts; `null` after the last.
    next_offset: Option<usize>,
}

#[derive(Serialize)]
struct File<'a> {
    filename: &'a str,
    size_bytes: u64,
    mime_type: &'static str,
}

impl Builtin for ListArtifacts {
    fn kind(&self) -> BuiltinTool {
        BuiltinTool::ListArtifacts
    }
    fn tool(&self) -> rmcp::model::Tool {
        tool::<ListArtifactsInput>(self.name(), "List a task's artifacts", true)
    }
    fn call<'a>(&'a self, call: Call<'a>) -> BoxFuture<'a, Result<Reply, GuardError>> {
        Box::pin(async move {
            let input: ListArtifactsInput = decode(call.arguments)?;
            let limit = in_range("limit", input.limit, 1, 500)? as usize;
            let files = match call
                .ctx
                .store()
                .view(&call.origin.principal)
                .files(&input.task_id)
            {
                Ok(files) => files,
                Err(error) => {
                    return Err(super::explain_missing(
                        call.ctx.records(),
                        &call.origin.principal,
                        &input.task_id,
                        error,
                    )
                    .await);
                }
            };
            let offset = input.offset as usize;
            // A page also ends where its answer, sent twice (structured
            // and as text), would pass the answer bound: `next_offset`
            // goes on from there, so nothing is cut.
            let budget = page_budget(call.ctx.serving().max_answer_bytes);
            let mut used = 0;
            let page: Vec<File> = files
                .iter()
                .skip(offset)
                .take(limit)
                .map(|(name, size)| File {
                    filename: name,
                    size_bytes: *size,
                    mime_type: warden_calls::artifacts::mime_type(name),
                })
                .take_while(|file| {
                    let first = used == 0;
                    used += warden_core::answer::size(file) + 1;
                    first || used <= budget
                })
                .collect();
            let next = (offset + page.len() < files.len()).then_some(offset + page.len());
            Reply::data(&Page {
                task_id: &input.task_id,
                files: page,
                next_offset: next,
            })
        })
    }
}

/// Bytes of file entries one page may hold under the answer bound
/// `limit`: half of it (the page is sent twice), less the envelope and
/// the page's own fields.
fn page_budget(limit: usize) -> usize {
    (limit.saturating_sub(crate::limits::ANSWER_ENVELOPE_BYTES) / 2).saturating_sub(1_024)
}
