//! Tasks on this server: queuing a task-running call as an MCP task
//! (answered at once with its handle), claiming queued tasks into free
//! task slots, and running each claimed one detached, as its owner.

use std::sync::Arc;

use opentelemetry::KeyValue;
use opentelemetry::trace::SpanKind;
use rmcp::model::{CallToolResponse, CallToolResult, CreateTaskResult};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::origin::request_origin;
use super::results::failure_json;
use super::scope::RequestScope;
use super::warden_server::{DETACHED, WardenServer};
use crate::builtins::Reply;
use crate::status::RequestStatus;
use crate::tasks::QueuedRequest;
use warden_calls::events::Origin;
use warden_calls::executor::{Admitted, Failure, Status};
use warden_core::error::GuardError;
use warden_task::store::Enqueued;
use warden_task::{Claim, TaskResult, TaskStatus};

/// Claims queued tasks into this server's free task slots and runs each
/// on its own, for as long as the server runs: woken when a task is
/// queued here or a slot frees, and at least every heartbeat (a task
/// queued through another server).
pub(crate) fn start_claimer(server: WardenServer) {
    tokio::spawn(async move {
        loop {
            match server.tasks().claim_next().await {
                Ok(Some((claimed, slot))) => {
                    let runner = server.clone();
                    tokio::spawn(async move { runner.run_claimed(claimed, slot).await });
                }
                Ok(None) => server.tasks().claim_chance().await,
                Err(error) => {
                    tracing::warn!(%error, "cannot claim queued tasks; retrying");
                    server.tasks().claim_chance().await;
                }
            }
        }
    });
}

impl WardenServer {
    /// Queues a task-running built-in as an MCP task and answers with its
    /// handle at once; a server with a free task slot (this one, usually
    /// within milliseconds) claims and runs it ([`WardenServer::run_claimed`]).
    /// A call that could only fail (bad arguments, no model), a principal
    /// at its task limit or a full queue is answered now with its error.
    /// `tool` is a built-in that runs as a task (`index` given, its
    /// arguments checked now) or a guard with task support.
    /// `resume`: what the task starts with (a guard task's answers
    /// gathered in the request).
    pub(crate) async fn start_task(
        &self,
        tool: &str,
        index: Option<usize>,
        arguments: Value,
        resume: Option<warden_core::approval::Carried>,
        context: &RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let requested = crate::tasks::requested_ttl(&context.meta)?;
        let builtin = index.map(|index| self.builtins[index].as_ref());
        let mode = builtin.map_or("direct", |builtin| builtin.mode());
        let origin = request_origin(mode, tool, context);
        let principal = origin.principal.clone();
        let refused = |error: GuardError| -> Result<CallToolResponse, ErrorData> {
            Ok(self.refuse(&origin, error).into())
        };
        if let Some(Err(error)) = builtin.map(|builtin| builtin.check(&self.runtime, &arguments)) {
            return refused(error);
        }
        if let Err(failure) = self.executor.take_rate(&principal) {
            return refused(failure.error);
        }
        let id = warden_calls::artifacts::new_task_id();
        let request = QueuedRequest {
            tool: tool.to_string(),
            arguments,
            traceparent: warden_calls::telemetry::traceparent(&origin.trace),
            scopes: origin.scopes.to_vec(),
            resume,
        }
        .to_stored();
        let (tasks, serving) = (self.tasks.limits(), self.runtime.serving());
        // A bound principal's tasks queued or running over all servers: its
        // task slots plus what it may have waiting (see
        // `DEFAULT_TASKS_QUEUED_PER_PRINCIPAL`), so it never fills the queue.
        let owner_cap = tasks
            .tasks_per_principal
            .saturating_add(serving.tasks_queued_per_principal);
        let owner_limit = warden_calls::tenant::limits::bound(&principal).then_some(owner_cap as u64);
        let records = self.runtime.records();
        let ttl = records.ttl_ms(requested);
        let queued = records
            .submit(&id, &principal, tool, ttl, &request, owner_limit)
            .await
            .map_err(crate::tasks::store_error)?;
        match queued {
            Enqueued::Accepted => {}
            Enqueued::OwnerAtLimit => {
                return refused(
                    GuardError::new(
                        warden_core::error::codes::PRINCIPAL_BUSY,
                        format!(
                            "principal busy: '{principal}' already has {owner_cap} task(s) queued, running or waiting for an answer, its limit: \
                             {} running (WARDEN_TASKS_PER_PRINCIPAL) plus {} waiting (WARDEN_TASKS_QUEUED_PER_PRINCIPAL); \
                             retry when one of them ends (list_tasks shows them)",
                            tasks.tasks_per_principal, serving.tasks_queued_per_principal
                        ),
                    )
                    .retry_after(self.executor.limits().admission_wait.as_secs().max(1)),
                );
            }
            Enqueued::QueueFull => {
                return refused(GuardError::new(
                    warden_core::error::codes::SERVER_BUSY,
                    format!(
                        "Server busy; retry later ({} tasks already wait for a task slot, WARDEN_TASK_QUEUE)",
                        tasks.task_queue
                    ),
                ));
            }
        }
        self.tasks.submitted.notify_one();
        let mut queued_origin = origin.clone();
        queued_origin.task_id = Some(id.clone());
        self.executor.events().emit(
            &queued_origin,
            "task_queued",
            json!({"task_id": id, "ttl_ms": ttl}),
        );
        warden_calls::telemetry::end(&origin.trace, "queued", None);
        let record = records
            .get(&principal, &id)
            .await
            .map_err(crate::tasks::store_error)?
            .ok_or_else(|| crate::tasks::unknown_task(&id))?;
        Ok(CreateTaskResult::new(crate::tasks::handle(&record)).into())
    }

    /// A refused request: its events, and the error result.
    fn refuse(&self, origin: &Origin, error: GuardError) -> CallToolResult {
        RequestScope::open(self.executor.events(), origin).close(
            origin,
            RequestStatus::Call(Status::Rejected),
            None,
            Some(error.code.as_str()),
        );
        CallToolResult::structured_error(failure_json(
            &Failure::new(Status::Rejected, error),
            &origin.request_id,
        ))
    }

    /// Runs a queued task this server claimed, holding `slot`: the
    /// built-in it names, with its arguments, as its owner, detached. A
    /// call that ended before its task began (its arguments no longer
    /// valid) ends the record with that error.
    pub(crate) async fn run_claimed(&self, claimed: warden_task::store::Claimed, slot: Admitted) {
        let record = claimed.record;
        let request = QueuedRequest::of(&claimed.request);
        let tool = request.tool.as_str();
        let guard_task = self
            .executor
            .registry()
            .get(tool)
            .is_some_and(|guard| guard.task_support != warden_core::TaskSupport::Forbidden);
        if guard_task {
            return self.run_claimed_guard(record, request, slot).await;
        }
        let Some(builtin) = self
            .builtins
            .iter()
            .find(|b| b.name() == tool && b.runs_as_task())
        else {
            // Queued under another build of the app: this server refuses it.
            let result = TaskResult::failure(
                TaskStatus::Failed,
                warden_core::error::TaskErrorKind::Forbidden,
                format!("the queued task names '{tool}', which this server does not run as a task"),
            );
            let _ = self.runtime.records().end(&record.id, &result).await;
            return;
        };
        let origin = self.claimed_origin(builtin.mode(), &record, &request);
        // Judged by the policy in force now, as its owner with the scopes
        // its request carried: a task queued under an older policy that
        // now denies its tool ends failed, naming the rule, and never runs.
        if let Err(error) = self
            .executor
            .permit(&origin.principal, &origin.scopes, builtin.name())
        {
            self.refuse_claimed(&record, origin, error, slot).await;
            return;
        }
        // Fired by tasks/cancel (or a shutdown) once the task is registered
        // as running here: while it waits for its owner's share, then while
        // it runs.
        let cancel = CancellationToken::new();
        let Some(slot) = self.tasks.seat_claimed(&record, slot, &cancel).await else {
            warden_calls::telemetry::end(&origin.trace, "cancelled", None);
            return;
        };
        let progress = Arc::new(warden_script::host::progress::Progress::for_claimed(
            self.runtime.records().clone(),
            record.id.clone(),
        ));
        let claim = Arc::new(Claim::new(record.id.clone(), slot));
        let run = self.builtin_outcome(
            builtin.as_ref(),
            request.arguments,
            origin,
            cancel,
            (Some(claim.clone()), Some(progress)),
        );
        // A detached run_script or run_batch waits for the person when it
        // must ask (its record pauses, see `crate::waiting`); a coding task
        // cannot resume its model's conversation, so nobody is asked there.
        let resumable = [
            warden_core::registry::BuiltinTool::RunScript.name(),
            warden_core::registry::BuiltinTool::RunBatch.name(),
        ];
        let (outcome, _) = if resumable.contains(&builtin.name()) {
            let book = warden_core::approval::Book::new(request.resume.clone().unwrap_or_default());
            warden_core::reach::durable(book, run).await
        } else {
            warden_core::reach::nobody(DETACHED, run).await
        };
        if claim.take().is_some() {
            // The task never began: its record is still running here.
            let text = match &outcome {
                Ok(Reply::Task(result)) => result.error.as_ref().and_then(|e| e.message()),
                Ok(_) => None,
                Err(error) => Some(error.message.as_str()),
            }
            .unwrap_or("the call ended before its task began")
            .to_string();
            let ended = TaskResult::failure(
                TaskStatus::Failed,
                warden_core::error::TaskErrorKind::Storage,
                text,
            );
            let _ = self.runtime.records().end(&record.id, &ended).await;
            self.tasks.forget_claimed(&record.id);
        }
    }

    /// The origin a claimed task runs under: its owner, the scopes its
    /// request carried, and a span continuing the request's trace.
    pub(crate) fn claimed_origin(
        &self,
        mode: &'static str,
        record: &warden_task::store::TaskRecord,
        request: &QueuedRequest,
    ) -> Origin {
        let parent = request
            .traceparent
            .as_deref()
            .map(warden_calls::telemetry::from_traceparent)
            .unwrap_or_default();
        let mut origin = Origin::request(mode, &request.tool);
        origin.principal = record.owner.clone();
        origin.scopes = warden_calls::tenant::Scopes::new(request.scopes.clone());
        origin.trace = warden_calls::telemetry::start(
            "mcp.task.run",
            SpanKind::Consumer,
            &parent,
            vec![
                KeyValue::new("mcp.tool.name", request.tool.clone()),
                KeyValue::new("warden.task_id", record.id.clone()),
                KeyValue::new("warden.principal", origin.principal.to_string()),
                KeyValue::new("warden.node", self.runtime.records().node().to_string()),
            ],
        );
        origin
    }

    /// `principal`'s record of task `id`, or the unknown-task error.
    pub(super) async fn owned_task(
        &self,
        principal: &warden_calls::tenant::Principal,
        id: &str,
    ) -> Result<warden_task::store::TaskRecord, ErrorData> {
        self.runtime
            .records()
            .get(principal, id)
            .await
            .map_err(crate::tasks::store_error)?
            .ok_or_else(|| crate::tasks::unknown_task(id))
    }
}
