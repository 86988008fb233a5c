//! `run_script` and `run_batch` on a stateless (2026-07-28) request whose
//! client declared elicitation: a destructive call's question goes back as
//! a multi-round-trip `input_required` result, and the retry resumes.
//!
//! A batch's destructive calls are known from the batch itself, so its one
//! question (the plan: each destructive guard and how many calls) comes
//! before anything runs; the sealed `requestState` holds that question,
//! and the retry with the answer runs the batch under it. A script's
//! questions come as it runs:
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

use super::{WardenServer, principal_of, request_origin};
use crate::rounds::{Binding, WaitingTask};
use crate::task::store::State;
use crate::tasks::QueuedRequest;

/// How often a retry looks whether the task it answered has ended: 20 ms.
const RESUME_POLL: Duration = Duration::from_millis(20);

impl WardenServer {
    /// A batch, see the module docs. `state` and `responses` are the retry's.
    pub(super) async fn run_batch_stateless(
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
        let book = match (state, responses) {
            (None, None) => Book::new(Default::default()),
            (None, Some(_)) => {
                return Err(ErrorData::invalid_params(
                    "requestState: missing: inputResponses answer the questions of an input_required result and must come with its requestState",
                    None,
                ));
            }
            (Some(state), responses) => {
                let waiting = WaitingTask::open(&binding, state)?;
                let Some(pending) = waiting.pending else {
                    return Err(ErrorData::invalid_params(
                        "requestState: it holds no batch question; call again without requestState and inputResponses to start over",
                        None,
                    ));
                };
                let responses = responses.cloned().unwrap_or_default();
                let form = crate::waiting::form_answer(&pending, &responses)?;
                let at = crate::task::store::iso8601(crate::task::store::now_ms());
                Book::answered(vec![pending.answered(
                    principal.as_str(),
                    form.action,
                    form.content,
                    at,
                )])
            }
        };
        let origin = request_origin(builtin.mode(), builtin.name(), context);
        let run = self.builtin_outcome(builtin, arguments, origin, context.ct.clone(), None);
        let (outcome, origin) = crate::ask::durable(book.clone(), run).await;
        if let Some(pending) = book.pending()
            && outcome.is_err()
        {
            return self.ask("", &pending, &binding);
        }
        Ok(self.answer_of(outcome, &origin).await.into())
    }

    /// See the module docs. `state` and `responses` are the retry's.
    pub(super) async fn run_script_stateless(
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
        let state = match (state, responses) {
            (None, None) => None,
            (None, Some(_)) => {
                return Err(ErrorData::invalid_params(
                    "requestState: missing: inputResponses answer the questions of an input_required result and must come with its requestState",
                    None,
                ));
            }
            (Some(state), _) => Some(WaitingTask::open(&binding, state)?),
        };
        let Some(waiting) = state else {
            return self.first_round(index, arguments, binding, context).await;
        };
        let record = self.owned_task(&principal, &waiting.task_id).await?;
        let responses = responses.cloned().unwrap_or_default();
        crate::waiting::answer(self.runtime.records(), &record, principal.as_str(), &responses).await?;
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
            traceparent: crate::telemetry::traceparent(&origin.trace),
            scopes: origin.scopes.to_vec(),
            resume: None,
        }
        .to_stored();
        let book = Book::for_request(request);
        let run = self.builtin_outcome(builtin, arguments, origin, context.ct.clone(), None);
        let (outcome, origin) = crate::ask::durable(book.clone(), run).await;
        if let (Some(pending), Some(task_id)) = (book.pending(), origin.task_id.as_deref())
            && outcome.is_err()
        {
            return self.ask(task_id, &pending, &binding);
        }
        Ok(self.answer_of(outcome, &origin).await.into())
    }

    /// Waits for the answered task to end or ask again.
    async fn resumed(
        &self,
        principal: &crate::tenant::Principal,
        task_id: &str,
        binding: &Binding,
        context: &RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let limit = self.executor.limits().max_answer_bytes;
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
                        return self.ask(task_id, &pending, binding);
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

    /// The `input_required` answer for task `task_id` waiting on `pending`.
    fn ask(
        &self,
        task_id: &str,
        pending: &Pending,
        binding: &Binding,
    ) -> Result<CallToolResponse, ErrorData> {
        let waiting = WaitingTask {
            task_id: task_id.to_string(),
            key: pending.key.clone(),
            pending: task_id.is_empty().then(|| pending.clone()),
        };
        let state = waiting
            .seal(binding, self.executor.limits().input_state_ttl)
            .map_err(|e| ErrorData::internal_error(e.message, None))?;
        let requests = crate::waiting::input_requests(pending);
        Ok(InputRequiredResult::new(Some(requests), Some(state)).into())
    }
}
