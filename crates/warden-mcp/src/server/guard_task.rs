//! Guard calls as MCP tasks (SEP-2663): a guard registered with
//! `Guard::task_support` runs detached from the request that asked.
//!
//! **When a call becomes a task.** `TaskSupport::Optional`: when the client
//! declared the extension and asked (`crate::tasks::asks_for_task`: on
//! 2026-07-28, declaring it in the request is asking, the server deciding
//! per request); otherwise the plain call. `TaskSupport::Required`: always
//! a task, and a client that did not declare the extension is refused with
//! -32021 naming it, before anything runs. Either way a caller the policy
//! refuses `get_task_result` (so `tasks/get`) could never read the result:
//! an optional call runs plainly, a required one is refused.
//!
//! **How it runs.** The call is queued (durably: `tasks/get` finds it the
//! moment the handle is answered) and whichever server has a free task slot
//! claims it and makes the very call a plain request makes, through the
//! executor, as its owner, under the policy in force then. `tasks/cancel`
//! stops it (its worker, for an isolated guard) and it ends `cancelled`.
//! A guard error ends it `completed` with the error result (`isError`); a
//! guard that panicked or whose worker died ends it `failed` (a protocol
//! error, SEP-2663), as does a server that died under it.
//!
//! **Questions.** The guard asks with `warden::ask` as on a stateless
//! request: every question it asks is answered from the task's answers so
//! far, by key, or kept. When it returns having asked questions without an
//! answer, the task waits (`input_required`) with them in its record, no
//! slot held; `tasks/get` shows them as `inputRequests`, and `tasks/update`
//! answers any of them (keys of no open question are ignored). Once every
//! open question has an answer the task is queued again and the guard runs
//! again from the start with them all, on any node, also after the one
//! that ran it restarted (see `crate::waiting`).

use rmcp::ErrorData;
use rmcp::RoleServer;
use rmcp::model::{CallToolResponse, CallToolResult};
use rmcp::service::RequestContext;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use warden_core::TaskSupport;

use super::warden_server::WardenServer;
use crate::tasks::QueuedRequest;
use warden_calls::executor::Admitted;
use warden_core::error::{GuardError, TaskErrorKind, codes};
use warden_task::{TaskResult, TaskStatus};

/// The extension's id, as a client declares it.
const TASKS_EXTENSION: &str = "io.modelcontextprotocol/tasks";

/// Failures that are the server's, not the tool's: the task ends `failed`.
const PROTOCOL_FAILURES: &[&str] = &[
    codes::GUARD_PANICKED,
    codes::WORKER_CRASHED,
    codes::WORKER_OUT_OF_MEMORY,
    codes::WORKER_SPAWN_FAILED,
];

impl WardenServer {
    /// The answer to a call of guard `name` when it runs as a task: `None`
    /// when it is a plain call (see the module docs).
    /// `input`: the request's `requestState` and `inputResponses`.
    pub(super) async fn guard_task(
        &self,
        name: &str,
        arguments: &mut Option<Value>,
        input: (Option<&str>, Option<&rmcp::model::InputResponses>),
        context: &RequestContext<RoleServer>,
    ) -> Option<Result<CallToolResponse, ErrorData>> {
        let guard = self.executor.registry().get(name)?;
        let (support, asks_first) = (guard.task_support, guard.asks_before_task);
        if support == TaskSupport::Forbidden {
            return None;
        }
        let declared = context.client_capabilities().is_some_and(|c| c.supports_tasks());
        if !declared {
            return (support == TaskSupport::Required).then(|| Err(needs_tasks(name)));
        }
        let asked = match crate::tasks::asks_for_task(&context.meta, declared) {
            Ok(asked) => asked || support == TaskSupport::Required,
            Err(error) => return Some(Err(error)),
        };
        if !asked {
            return None;
        }
        let (principal, scopes) = (
            super::origin::principal_of(context),
            super::origin::scopes_of(context),
        );
        let can_read = self
            .executor
            .permit(
                &principal,
                &scopes,
                warden_core::registry::BuiltinTool::GetTaskResult.name(),
            )
            .is_ok();
        if !can_read {
            return (support == TaskSupport::Required).then(|| {
                Err(ErrorData::invalid_request(
                    format!(
                        "'{name}' runs only as an MCP task, and the policy does not let you read tasks (get_task_result); \
                         ask the operator for it"
                    ),
                    None,
                ))
            });
        }
        let arguments = arguments.take().unwrap_or(Value::Null);
        let stateless = context
            .meta
            .protocol_version()
            .is_some_and(|v| !v.has_initialize());
        if asks_first && stateless {
            return Some(self.ask_before_task(name, arguments, input, context).await);
        }
        Some(self.start_task(name, None, arguments, None, context).await)
    }

    /// A stateless call of a guard that asks before its task
    /// (`Guard::asks_before_task`): runs it in the request with this
    /// round's answers. Reaching `warden::ask::detach` with nothing left
    /// to ask starts the task with those answers; a question without an
    /// answer is asked (multi-round-trip input); a guard that ends without
    /// detaching answers as a plain call.
    async fn ask_before_task(
        &self,
        name: &str,
        arguments: Value,
        input: (Option<&str>, Option<&rmcp::model::InputResponses>),
        context: &RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let binding = crate::rounds::Binding::new(&super::origin::principal_of(context), name, &arguments);
        let can = crate::rounds::CanAnswer::of(&context.meta);
        let round = crate::rounds::Round::begin(binding, can, input.0, input.1)?;
        round.detaching();
        let origin = super::origin::request_origin("direct", name, context);
        let request_id = origin.request_id.clone();
        let call = self.guard_call(name, arguments.clone(), origin, context.ct.clone(), false);
        let result = warden_core::ask::scope(round.asker(), call).await;
        if round.detached() {
            let resume = warden_core::approval::Carried {
                responses: round.answers_by_key(),
                ..Default::default()
            };
            return self
                .start_task(name, None, arguments, Some(resume), context)
                .await;
        }
        if let Some(error) = round.missing_capability(&result) {
            return Err(error);
        }
        Ok(round
            .finish(result, self.tasks.limits().input_state_ttl)
            .unwrap_or_else(|error| {
                super::results::result_of(
                    Err(warden_calls::executor::Failure::new(
                        warden_calls::executor::Status::Failed,
                        error,
                    )),
                    &request_id,
                )
                .into()
            }))
    }

    /// Runs claimed guard task `record` (see the module docs), holding
    /// `slot`.
    pub(super) async fn run_claimed_guard(
        &self,
        record: warden_task::store::TaskRecord,
        request: QueuedRequest,
        slot: Admitted,
    ) {
        let tool = request.tool.clone();
        let mut origin = self.claimed_origin("direct", &record, &request);
        origin.task_id = Some(record.id.clone());
        if let Err(error) = self.executor.permit(&origin.principal, &origin.scopes, &tool) {
            self.refuse_claimed(&record, origin, error, slot).await;
            return;
        }
        let cancel = CancellationToken::new();
        let Some(slot) = self.tasks.seat_claimed(&record, slot, &cancel).await else {
            warden_calls::telemetry::end(&origin.trace, "cancelled", None);
            return;
        };
        self.tasks.hold_claimed(&record.id, &cancel);
        let task_events = match self.side_effect_log(&tool, &record) {
            Ok(events) => events,
            Err(error) => {
                drop(slot);
                let summary = format!(
                    "the call did not run: its side effect could not be put on record first ({})",
                    error.message
                );
                let ended = TaskResult::failure(TaskStatus::Failed, TaskErrorKind::Storage, summary);
                self.tasks.end_claimed(&record.owner, &record.id, ended).await;
                warden_calls::telemetry::end(&origin.trace, "failed", Some(error.code.as_str()));
                return;
            }
        };
        let mut carried = request.resume.clone().unwrap_or_default();
        let round = crate::rounds::Round::for_task(&carried.responses);
        let call = self.guard_answer(
            &tool,
            request.arguments,
            origin.clone(),
            cancel.clone(),
            false,
            task_events.as_ref(),
        );
        let (result, error) = warden_core::ask::scope(round.asker(), call).await;
        if let Some(events) = &task_events {
            events.flush_task_log();
        }
        drop(slot);
        self.tasks.submitted.notify_one();
        let open = round.take_requests();
        if !open.is_empty() && !cancel.is_cancelled() {
            carried.asked = open
                .iter()
                .filter_map(|(key, request)| Some((key.clone(), serde_json::to_value(request).ok()?)))
                .collect();
            let keys: Vec<&String> = open.keys().collect();
            let message = format!(
                "input_required: waiting for {} answer(s) ({}); tasks/update answers them",
                keys.len(),
                keys.iter().map(|k| k.as_str()).collect::<Vec<_>>().join(", ")
            );
            let resume = serde_json::to_value(&carried).unwrap_or(Value::Null);
            if self.tasks.pause_claimed(&record.id, &resume, &message).await {
                // A destructive guard's directory waits with the task; it
                // no longer runs here.
                self.tasks.store.end_task(&record.id);
                self.executor.events().emit(
                    &origin,
                    "task_waiting",
                    json!({"task_id": record.id, "keys": keys}),
                );
                warden_calls::telemetry::end(&origin.trace, "input_required", None);
                return;
            }
        }
        let ended = ending(&result, error.as_ref(), cancel.is_cancelled());
        let status = ended.status;
        self.tasks.end_claimed(&record.owner, &record.id, ended).await;
        let code = error.as_ref().map(|error| error.code.as_str());
        warden_calls::telemetry::end(&origin.trace, status.as_str(), code);
    }
}

impl WardenServer {
    /// The task's own log, for a destructive guard: its directory made now,
    /// so that the executor writes the call's start through to
    /// `events.jsonl` before the function runs and its end as it settles,
    /// as it does for a script's destructive calls. A server that dies
    /// under the call then leaves the side effect on record: the next one
    /// to open the store ends the task `interrupted` with it in
    /// `side_effects` (`warden_task::records`). Other guards keep no log
    /// of their own (their directory is made when they end). `Err` when
    /// the directory cannot be made: the call must not run unrecorded.
    fn side_effect_log(
        &self,
        tool: &str,
        record: &warden_task::store::TaskRecord,
    ) -> Result<Option<warden_calls::events::Events>, GuardError> {
        let destructive = self
            .executor
            .registry()
            .get(tool)
            .is_some_and(|guard| guard.hints.destructive);
        if !destructive {
            return Ok(None);
        }
        let dir = self.tasks.store.create_task_with_id(&record.owner, &record.id)?;
        Ok(Some(self.tasks.task_events(&record.id, &dir)))
    }
}

/// The record a guard task's call ends with: its answer, and how it ended
/// (`error`: the failed call's; `cancelled`: the task was stopped).
fn ending(result: &CallToolResult, error: Option<&GuardError>, cancelled: bool) -> TaskResult {
    let mut ended = match error {
        None => TaskResult::bare(TaskStatus::Success),
        Some(_) if cancelled => TaskResult::failure(
            TaskStatus::Cancelled,
            TaskErrorKind::Cancelled,
            "cancelled while the call ran",
        ),
        Some(error) => {
            let summary = format!("the call failed ({}): {}", error.code, error.message);
            let kind = if PROTOCOL_FAILURES.contains(&error.code.as_str()) {
                TaskErrorKind::Worker
            } else {
                TaskErrorKind::Guard
            };
            TaskResult::failure(TaskStatus::Failed, kind, summary)
        }
    };
    ended.answer = serde_json::to_value(result).ok();
    ended
}

/// -32021 for a required-task guard called by a client without the
/// extension (SEP-2575 / SEP-2663), naming what to declare.
fn needs_tasks(name: &str) -> ErrorData {
    ErrorData::new(
        rmcp::model::ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY,
        format!(
            "'{name}' runs only as an MCP task: declare the {TASKS_EXTENSION} extension in your client capabilities \
             (capabilities.extensions) to call it"
        ),
        Some(json!({"requiredCapabilities": {"extensions": {TASKS_EXTENSION: {}}}})),
    )
}
