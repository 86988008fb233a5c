//! `run_script` and `run_batch` on a stateless (2026-07-28) request whose
//! client declared elicitation: a destructive call's question goes back as
//! a multi-round-trip `input_required` result, and the retry resumes.
//!
//! A coding task's `needs_input` question is asked the same way: the
//! first round's task ends `needs_input` and the call is answered
//! `input_required` with its form; a model's conversation cannot be
//! resumed, so the retry with the answer runs the coding task again with
//! the person's answer given in its prompt (declined, the first task's
//! `needs_input` result is the answer). The answer is a
//! `question_answered` event either way.
//!
//! A batch's destructive calls are known from the batch itself, so its one
//! question (the plan) comes before anything runs; otherwise a batch waits
//! and resumes as a script does, below, so its answer is used once (a
//! `requestState` that carried the answer itself could be sent again and
//! run the batch again). A script's questions come as it runs:
//!
//! The first round runs the script as a task here, under an approval book
//! (`warden_core::approval`) that may pause it: when the script reaches a
//! destructive call (or a plan) with no answer, its task stops and its
//! record waits in the store with the journal and the question, exactly as
//! a detached MCP task waits. The call is answered `input_required` with
//! the question as a form and a `requestState` that names the task and the
//! question, sealed for this caller, tool and arguments (`crate::rounds`).
//! The client's retry, with the same arguments, that state and
//! `inputResponses` for the question's key, answers the waiting task
//! through the same path as `tasks/update` and waits for it: any node with
//! a free task slot resumes it through its journal (on a cluster, the state
//! opens on every node sharing `WARDEN_INPUT_STATE_KEY`, and the task
//! waits in the shared store). The retry is answered with the task's
//! result, or with the next question.

use std::time::Duration;

use rmcp::model::{CallToolResponse, CallToolResult, InputRequiredResult, InputResponses};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer};
use warden_core::approval::{Book, Pending};

use super::origin::{principal_of, request_origin};
use super::warden_server::WardenServer;
use crate::rounds::{Binding, WaitingTask};
use crate::tasks::QueuedRequest;
use warden_task::store::State;

/// How often a retry looks whether the task it answered has ended: 20 ms.
const RESUME_POLL: Duration = Duration::from_millis(20);

impl WardenServer {
    /// A coding task, see the module docs.
    pub(super) async fn run_coding_task_stateless(
        &self,
        index: usize,
        mut arguments: serde_json::Value,
        state: Option<&str>,
        responses: Option<&InputResponses>,
        context: &RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let builtin = self.builtins[index].as_ref();
        let principal = principal_of(context);
        let binding = Binding::new(&principal, builtin.name(), &arguments);
        let origin = request_origin(builtin.mode(), builtin.name(), context);
        if let Some(waiting) = opened(&binding, state, responses)? {
            let (pending, mut record) = answered(&waiting, "question", &principal, responses)?;
            let accepted = record.action == warden_core::ask::Action::Accept;
            let given = serde_json::Value::Object(record.content.clone());
            record.approved = accepted;
            self.executor.events().emit(
                &origin,
                "question_answered",
                serde_json::json!({"task_id": waiting.task_id, "action": record.action,
                                   "answered": accepted, "answer": record}),
            );
            if !accepted {
                // The first task's own needs_input result.
                let record = self.owned_task(&principal, &waiting.task_id).await?;
                let limit = self.runtime.serving().max_answer_bytes;
                return Ok(crate::tasks::completed(self.runtime.store(), &principal, &record, limit).into());
            }
            if let Some(prompt) = arguments.get_mut("prompt") {
                let asked = prompt.as_str().unwrap_or_default().to_string();
                *prompt = serde_json::Value::String(format!(
                    "{asked}\n\nThe person already answered the question \"{}\" with: {given}. Use these values.",
                    pending.message
                ));
            }
        }
        // Its scripts' destructive calls cannot wait: nobody is asked.
        let run = self.builtin_outcome(builtin, arguments, origin, context.ct.clone(), (None, None));
        let (outcome, origin) = warden_core::reach::nobody(super::warden_server::STATELESS, run).await;
        if let Ok(crate::builtins::Reply::Task(result)) = &outcome
            && result.task_type.as_deref() == Some("needs_input")
            && let (Some(missing), Some(task_id)) = (&result.missing, &result.task_id)
            && state.is_none()
        {
            let (message, requested_schema) =
                warden_task::contract::missing_form(result.summary.as_deref().unwrap_or_default(), missing);
            let pending = Pending {
                key: "input-1".into(),
                message,
                requested_schema,
                guard: String::new(),
                arguments_sha256: None,
                plan: Vec::new(),
                script_sha256: String::new(),
            };
            return self.ask(task_id, &pending, &binding, Carry::Question);
        }
        Ok(self.answer_of(outcome, &origin).await.into())
    }

    /// A script or a batch, see the module docs. `state` and `responses`
    /// are the retry's.
    pub(super) async fn run_task_stateless(
        &self,
        index: usize,
        arguments: serde_json::Value,
        state: Option<&str>,
        responses: Option<&InputResponses>,
        context: &RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let builtin = self.builtins[index].as_ref();
        let principal = principal_of(context);
        let binding = Binding::new(&principal, builtin.name(), &arguments);
        let Some(waiting) = opened(&binding, state, responses)? else {
            return self.first_round(index, arguments, binding, context).await;
        };
        let record = self.owned_task(&principal, &waiting.task_id).await?;
        let responses = responses.cloned().unwrap_or_default();
        crate::waiting::answer(
            self.runtime.records(),
            &record,
            principal.as_str(),
            &responses,
            Some(&waiting.key),
        )
        .await?;
        self.tasks.submitted.notify_one();
        self.resumed(&principal, &record.id, &binding, context).await
    }

    /// Runs the script here under a book that may pause it.
    async fn first_round(
        &self,
        index: usize,
        arguments: serde_json::Value,
        binding: Binding,
        context: &RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let builtin = self.builtins[index].as_ref();
        let origin = request_origin(builtin.mode(), builtin.name(), context);
        let request = QueuedRequest {
            tool: builtin.name().to_string(),
            arguments: arguments.clone(),
            traceparent: warden_calls::telemetry::traceparent(&origin.trace),
            scopes: origin.scopes.to_vec(),
            resume: None,
        }
        .to_stored();
        let book = Book::for_request(request);
        let run = self.builtin_outcome(builtin, arguments, origin, context.ct.clone(), (None, None));
        let (outcome, origin) = warden_core::reach::durable(book.clone(), run).await;
        if let (Some(pending), Some(task_id)) = (book.pending(), origin.task_id.as_deref())
            && outcome.is_err()
        {
            return self.ask(task_id, &pending, &binding, Carry::TaskOnly);
        }
        Ok(self.answer_of(outcome, &origin).await.into())
    }

    /// Waits for the answered task to end or ask again.
    async fn resumed(
        &self,
        principal: &warden_calls::tenant::Principal,
        task_id: &str,
        binding: &Binding,
        context: &RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let limit = self.runtime.serving().max_answer_bytes;
        // The task's own deadline ends it first; this only bounds a wait
        // for a task that no server claims (all draining).
        let latest = tokio::time::Instant::now() + self.executor.limits().max_timeout * 2;
        loop {
            let record = self.owned_task(principal, task_id).await?;
            match record.state {
                State::Ended(_) => {
                    let result: CallToolResult =
                        crate::tasks::completed(self.runtime.store(), principal, &record, limit);
                    return Ok(result.into());
                }
                State::Waiting => {
                    let carried = crate::waiting::carried(self.runtime.records(), &record).await?;
                    if let Some(pending) = carried.and_then(|(_, carried, _)| carried.pending) {
                        return self.ask(task_id, &pending, binding, Carry::TaskOnly);
                    }
                }
                State::Queued | State::Running => {}
            }
            if tokio::time::Instant::now() >= latest {
                return Err(ErrorData::internal_error(
                    format!(
                        "task '{task_id}' was answered but no server resumed it in time; tasks/get follows it"
                    ),
                    None,
                ));
            }
            tokio::select! {
                _ = tokio::time::sleep(RESUME_POLL) => {}
                _ = context.ct.cancelled() => {
                    return Err(ErrorData::internal_error("the request was cancelled; the task goes on: tasks/get follows it", None));
                }
            }
        }
    }

    /// The `input_required` answer for task `task_id` (empty: none waits)
    /// asking `pending`; the sealed state carries the question itself when
    /// `carry` says so (no task record keeps it).
    fn ask(
        &self,
        task_id: &str,
        pending: &Pending,
        binding: &Binding,
        carry: Carry,
    ) -> Result<CallToolResponse, ErrorData> {
        let waiting = WaitingTask {
            task_id: task_id.to_string(),
            key: pending.key.clone(),
            pending: (carry == Carry::Question).then(|| pending.clone()),
        };
        let state = waiting
            .seal(binding, self.tasks.limits().input_state_ttl)
            .map_err(|e| ErrorData::internal_error(e.message, None))?;
        let requests = crate::waiting::form_request(pending);
        Ok(InputRequiredResult::new(Some(requests), Some(state)).into())
    }
}

/// What a sealed `requestState` holds besides the task id.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Carry {
    /// Only the task: its record keeps the question (a waiting script).
    TaskOnly,
    /// The question too (a batch's plan, a coding task's `needs_input`).
    Question,
}

/// A retry's sealed state, opened for `binding`: `None` on a first call;
/// answers without a state are refused naming the fix.
fn opened(
    binding: &Binding,
    state: Option<&str>,
    responses: Option<&InputResponses>,
) -> Result<Option<WaitingTask>, ErrorData> {
    match (state, responses) {
        (None, None) => Ok(None),
        (None, Some(_)) => Err(ErrorData::invalid_params(
            "requestState: missing: inputResponses answer the questions of an input_required result and must come with its requestState",
            None,
        )),
        (Some(state), _) => WaitingTask::open(binding, state).map(Some),
    }
}

/// The question a state carries and the record of `responses`' answer to
/// it, by `principal`; `what` names the question in the refusal of a state
/// that carries none.
fn answered(
    waiting: &WaitingTask,
    what: &str,
    principal: &warden_calls::tenant::Principal,
    responses: Option<&InputResponses>,
) -> Result<(Pending, warden_core::approval::ApprovalRecord), ErrorData> {
    let Some(pending) = waiting.pending.clone() else {
        return Err(ErrorData::invalid_params(
            format!(
                "requestState: it holds no {what}; call again without requestState and inputResponses to start over"
            ),
            None,
        ));
    };
    let form = crate::waiting::form_answer(&pending, &responses.cloned().unwrap_or_default())?;
    let at = warden_task::store::iso8601(warden_task::store::now_ms());
    let record = pending.answered(principal.as_str(), form.action, form.content, at);
    Ok((pending, record))
}
