//! Script tasks: `run_script`, and a replay's several scripts in one
//! worker session.

use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::runner::Ending;
use crate::{Claim, TaskResult, TaskRunner, TaskStatus, abnormal_end, task_receipt};
use warden_calls::events::Origin;
use warden_core::error::{GuardError, TaskErrorKind};
use warden_core::future::BoxFuture;
use warden_script::host::progress::Progress;
use warden_script::host::session::{Budget, RunEnd, WorkerFacts};
use warden_script::protocol::RunOutcome;

impl TaskRunner {
    /// Runs a client-written script as a task and returns the task result.
    /// Boxed: compiled here once, not in each crate that awaits it
    /// ([`warden_core::future`]).
    pub fn run_script<'a>(
        &'a self,
        script: &'a str,
        timeout: Duration,
        origin: &'a mut Origin,
        cancel: CancellationToken,
        (claim, progress): (Option<&'a Claim>, Option<&'a Progress>),
    ) -> BoxFuture<'a, Result<TaskResult, GuardError>> {
        Box::pin(async move {
            let limits = task_receipt::RunLimits::script(timeout);
            self.run_scripts(&[script], limits, origin, cancel, (claim, progress))
                .await
        })
    }

    /// Runs `scripts` one after another in one worker session (one
    /// persistent scope, as a coding task's blocks run) as one task, each
    /// saved as `agent_actions/action_NNN.rhai`, under `limits`: the
    /// task's deadline, and call budgets the scripts spend between them
    /// (as a coding task's blocks do). Stops after a run that did not
    /// finish or that gave a final answer; the last run's outcome is the
    /// result. One script is `run_script`; several are a replay.
    /// Boxed: compiled here once, not in each crate that awaits it
    /// ([`warden_core::future`]).
    pub fn run_scripts<'a>(
        &'a self,
        scripts: &'a [&'a str],
        limits: task_receipt::RunLimits,
        origin: &'a mut Origin,
        cancel: CancellationToken,
        (claim, progress): (Option<&'a Claim>, Option<&'a Progress>),
    ) -> BoxFuture<'a, Result<TaskResult, GuardError>> {
        Box::pin(async move {
            let cancel = &cancel;
            self.run(origin, limits.timeout(), cancel, claim, async |task, origin| {
                task.limits = limits;
                // A resumed task runs again: it no longer waits.
                let _ = std::fs::remove_file(task.dir.join(warden_calls::artifacts::WAITING_FILE));
                run_in_session(task, origin, scripts, limits, cancel, progress).await
            })
            .await
        })
    }
}

/// Saves `scripts` as `agent_actions/action_NNN.rhai` in `task`, in order.
fn write_scripts(task: &crate::Task, scripts: &[&str]) -> Result<(), GuardError> {
    for (i, script) in scripts.iter().enumerate() {
        let path = format!("{}/action_{:03}.rhai", task_receipt::SCRIPTS_DIR, i + 1);
        task.write_file(&path, script.as_bytes())?;
    }
    Ok(())
}

/// Runs `scripts` in one worker session of `task` (see
/// [`TaskRunner::run_scripts`]): its result, or the question it paused on;
/// `Err` when the scripts cannot be saved. They are saved while the worker
/// starts, before any of them runs.
async fn run_in_session(
    task: &mut crate::Task,
    origin: &Origin,
    scripts: &[&str],
    limits: task_receipt::RunLimits,
    cancel: &CancellationToken,
    progress: Option<&Progress>,
) -> Result<Ending, GuardError> {
    let mut facts = WorkerFacts::default();
    // What a run that stopped on a question carries (its journal).
    let mut paused = None;
    let started = task.start_worker(origin, || write_scripts(task, scripts)).await;
    let end = match started {
        Ok((_, Err(unsaved))) => return Err(unsaved),
        Ok((mut session, Ok(()))) => {
            let under_task = task.origin_under(origin);
            let ctx = task.context(&under_task, cancel, progress);
            let (mut door_calls, mut inline_calls) = (0u64, 0u64);
            let mut end = RunEnd::Crashed("no script to run".into());
            for script in scripts {
                let budget = Budget {
                    calls_left: limits.door_calls.saturating_sub(door_calls),
                    count_pure: limits.inline_calls.is_some(),
                };
                if let Some(inline) = limits.inline_calls {
                    session.inline_calls_left = inline.saturating_sub(inline_calls);
                }
                end = session.run(&ctx, script, task.deadline, budget).await;
                let go_on = match &end {
                    RunEnd::Finished(outcome) => {
                        door_calls = door_calls.saturating_add(outcome.door_calls);
                        inline_calls = inline_calls.saturating_add(outcome.inline_calls);
                        outcome.final_answer.is_none()
                    }
                    _ => false,
                };
                if !go_on {
                    break;
                }
            }
            if matches!(end, RunEnd::Paused) {
                paused = Some(session.carry());
            }
            facts = session.take_facts();
            facts.exit = Some(session.finish());
            end
        }
        Err(reason) => {
            // Kept even when no worker came to run them (a start that
            // failed before the fork never wrote them; rewriting is the
            // same bytes).
            write_scripts(task, scripts)?;
            RunEnd::Crashed(reason.to_string())
        }
    };
    if let (Some(journal), Some(book)) = (paused, warden_core::reach::Reach::here().book().cloned()) {
        return Ok(Ending::Paused {
            journal,
            book,
            facts: Box::new(facts),
        });
    }
    let result = match end {
        RunEnd::Finished(outcome) => script_result(outcome, facts.calls.made, facts.calls.ok, task.deadline),
        other => abnormal_end(other, task.timeout),
    };
    Ok(Ending::Finished(Box::new(result), Box::new(facts)))
}

/// The task result of a script that ran to its end. A script stopped by
/// an error after the task `deadline` passed (a guard call cut short by
/// it) ended because of the deadline: `timed_out`, not `failed`.
fn script_result(outcome: RunOutcome, calls: usize, calls_ok: usize, deadline: Instant) -> TaskResult {
    let result = if let Some(error) = outcome.error {
        let status = if error.kind == TaskErrorKind::Timeout || Instant::now() >= deadline {
            TaskStatus::TimedOut
        } else {
            TaskStatus::Failed
        };
        TaskResult::failure(
            status,
            error.kind,
            format!("{} error: {}", error.kind, error.message),
        )
        .with_error(error)
    } else if let Some(answer) = &outcome.final_answer {
        match crate::contract::check(answer, calls, calls_ok) {
            Ok(answer) => TaskResult::answer(&answer),
            // An error like any other a script ends on, so a client that
            // reads `error.kind` of a failed task always finds one.
            Err(reason) => {
                let summary = format!("the final answer broke the contract: {reason}");
                TaskResult::failure(TaskStatus::Failed, TaskErrorKind::Runtime, summary)
            }
        }
    } else {
        let task_type = if calls_ok > 0 { "analysis" } else { "no_action" };
        TaskResult::ended(
            TaskStatus::Success,
            task_type,
            "script finished without calling final_answer; see value and output",
        )
    };
    TaskResult {
        value: Some(outcome.value),
        output: Some(outcome.output),
        output_truncated: Some(outcome.output_truncated),
        ..result
    }
}
