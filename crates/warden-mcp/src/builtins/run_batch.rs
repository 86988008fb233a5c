//! `run_batch`: up to 25 guard calls in one request (see [`warden_task::batch`]).

use serde_json::Value;

use super::{Builtin, BuiltinTool, Call, Reply, Runtime, decode, tool};
use warden_core::error::GuardError;
use warden_core::future::BoxFuture;
use warden_task::batch::RunBatchInput;

pub(crate) struct RunBatch;

impl Builtin for RunBatch {
    fn kind(&self) -> BuiltinTool {
        BuiltinTool::RunBatch
    }
    fn mode(&self) -> &'static str {
        "batch"
    }
    fn runs_as_task(&self) -> bool {
        true
    }
    fn tool(&self) -> rmcp::model::Tool {
        // The task view (MCP Apps) shows its result.
        crate::view::link(tool::<RunBatchInput>(
            self.name(),
            "Run a batch of guard calls",
            false,
        ))
    }
    fn check(&self, _ctx: &Runtime, arguments: &Value) -> Result<(), GuardError> {
        decode::<RunBatchInput>(arguments.clone()).map(drop)
    }
    fn call<'a>(&'a self, call: Call<'a>) -> BoxFuture<'a, Result<Reply, GuardError>> {
        Box::pin(async move {
            let input: RunBatchInput = decode(call.arguments)?;
            // Asked for as an MCP task, or run where it may wait for the
            // person (a stateless request's first round): the batch gets a
            // task of its own, whose record waits with its question and is
            // answered once (`crate::waiting`).
            let may_wait = warden_core::reach::Reach::here()
                .book()
                .is_some_and(|book| book.request().is_some());
            if call.claim.is_some() || may_wait {
                return call
                    .ctx
                    .tasks()
                    .run_batch_task(input, call.origin, call.cancel, call.claim.as_deref())
                    .await
                    .map(Reply::from);
            }
            warden_task::batch::run(
                call.ctx.executor(),
                call.ctx.store(),
                call.ctx.tasks().limits(),
                input,
                (call.origin, call.ctx.executor().events()),
                call.cancel,
            )
            .await
            .map(Reply::from)
        })
    }
}
