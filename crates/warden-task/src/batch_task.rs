//! A batch run as a detached task (a client asked `run_batch` for an MCP
//! task): the same batch, with a task directory holding its result.

use tokio_util::sync::CancellationToken;

use crate::runner::Ending;
use crate::{Claim, TaskResult, TaskRunner, TaskStatus};
use warden_calls::events::Origin;
use warden_core::error::{GuardError, TaskErrorKind};
use warden_core::future::BoxFuture;
use warden_script::host::session::WorkerFacts;

impl TaskRunner {
    /// Runs a batch as a detached task. The task's timeout is the server
    /// maximum; each call keeps its own deadline.
    /// Boxed: compiled here once, not in each crate that awaits it
    /// ([`warden_core::future`]).
    pub fn run_batch_task<'a>(
        &'a self,
        input: crate::batch::RunBatchInput,
        origin: &'a mut Origin,
        cancel: CancellationToken,
        claim: Option<&'a Claim>,
    ) -> BoxFuture<'a, Result<TaskResult, GuardError>> {
        Box::pin(async move {
            let timeout = self.executor.limits().max_timeout;
            let token = cancel.clone();
            self.run(origin, timeout, &token, claim, async |task, origin| {
                let under_task = task.origin_under(origin);
                let outcome = crate::batch::run(
                    &self.executor,
                    &self.store,
                    self.limits(),
                    input,
                    (&under_task, &task.events),
                    cancel,
                )
                .await;
                let book = warden_core::reach::Reach::here().book().cloned();
                // A batch that stopped on its plan's question waits for the
                // answer (nothing ran); the resumed batch runs under the answer.
                if let Some(book) = book.clone()
                    && book.paused()
                    && outcome.is_err()
                {
                    return Ok(Ending::Paused {
                        journal: Ok(Vec::new()),
                        book,
                        facts: Box::default(),
                    });
                }
                let approvals = book.map(|book| book.answers()).unwrap_or_default();
                let result = match outcome {
                    Ok(batch) => {
                        let summary = format!(
                            "batch: {} succeeded, {} failed, {} skipped",
                            batch.counts.succeeded, batch.counts.failed, batch.counts.skipped
                        );
                        TaskResult {
                            summary: Some(summary),
                            ..TaskResult::batch(batch)
                        }
                    }
                    Err(error) => TaskResult::failure(
                        TaskStatus::Failed,
                        TaskErrorKind::Guard,
                        format!("the batch was refused: {}", error.message),
                    )
                    .with_error(error),
                };
                let facts = WorkerFacts {
                    approvals,
                    ..WorkerFacts::default()
                };
                Ok(Ending::Finished(Box::new(result), Box::new(facts)))
            })
            .await
        })
    }
}
