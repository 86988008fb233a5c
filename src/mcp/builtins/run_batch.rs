//! `run_batch`: up to 25 guard calls in one request (see [`crate::batch`]).

use serde_json::Value;

use super::{BoxFuture, Builtin, Call, decode, tool};
use crate::batch::RunBatchInput;
use crate::error::GuardError;

pub struct RunBatch;

impl Builtin for RunBatch {
    fn name(&self) -> &'static str {
        "run_batch"
    }
    fn mode(&self) -> &'static str {
        "batch"
    }
    fn tool(&self) -> rmcp::model::Tool {
        tool::<RunBatchInput>(self.name(), "Run a batch of guard calls", false)
    }
    fn call<'a>(&'a self, call: Call<'a>) -> BoxFuture<'a, Result<Value, GuardError>> {
        Box::pin(async move {
            let input: RunBatchInput = decode(call.arguments)?;
            crate::batch::run(
                &call.tasks.executor,
                &call.tasks.store,
                input,
                call.origin,
                call.cancel,
            )
            .await
        })
    }
}
