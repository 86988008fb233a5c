//! The MCP server: rmcp's `ServerHandler` over the registry and executor.
//!
//! `tools/list` is the registry in name order; `tools/call` goes through the
//! executor and comes back as structuredContent (mirrored as text), within
//! the answer bound (`crate::bound`, every answer in one place). Errors a
//! caller can fix are normal results with `isError: true` and a stable code;
//! a guard's error carries its JSON in the text content only, because
//! structuredContent must match the guard's `outputSchema` and an error does
//! not (clients such as the MCP Inspector validate it and would show a
//! schema complaint instead of the message). Built-ins declare no output
//! schema, so their errors keep structuredContent too;
//! an unknown tool is a protocol error (-32602). Nothing here panics across
//! the handler, and every call is bracketed by request events.

use std::sync::Arc;
use std::time::Instant;

#[allow(deprecated)] // MCP logging, see `get_info`
use rmcp::model::SetLevelRequestParams;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CancelTaskParams, CompleteRequestParams,
    CompleteResult, CreateTaskResult, GetPromptRequestParams, GetPromptResponse, GetTaskParams,
    GetTaskResult, Implementation, ListPromptsResult, ListResourceTemplatesResult, ListResourcesResult,
    ListToolsResult, PaginatedRequestParams, ReadResourceRequestParams, ReadResourceResponse,
    ServerCapabilities, ServerConfig, SubscribeRequestParams, Tool, UnsubscribeRequestParams,
    UpdateTaskParams,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::builtins::{Reply, Runtime};
use crate::limits::ServingLimits;
use crate::tasks::QueuedRequest;
use opentelemetry::KeyValue;
use opentelemetry::trace::SpanKind;
use warden_core::error::GuardError;
use warden_executor::events::Origin;
use warden_executor::executor::{Admitted, CallRequest, Executor, Failure, Status};
use warden_task::store::Enqueued;
use warden_task::{TaskResult, TaskRunner, TaskStatus};

/// The policy as this layer applies it (visible tools, routes, claims).
mod access;
mod guard_task;
mod stateless_script;

/// Instructions sent to clients at initialize.
const INSTRUCTIONS: &str = "Each tool is a typed guard: call it with the arguments its input schema describes. \
Errors come back as results with isError=true, a stable error code and a message naming the field to fix. \
'Server busy; retry later' means every call slot was in use: retry after a moment.";

/// The handler rmcp drives. Cheap to clone (everything but the session's
/// log level is shared).
#[derive(Clone)]
pub struct WardenServer {
    executor: Arc<Executor>,
    /// The task runner as a service: the queue it claims from, the tasks
    /// it cancels. Built-ins reach it through `runtime`.
    tasks: Arc<TaskRunner>,
    /// What built-ins run against.
    runtime: Runtime,
    builtins: Arc<Vec<Box<dyn crate::builtins::Builtin>>>,
    /// `tools/list`, built on first use ([`WardenServer::tools`]) and
    /// shared by every clone (each session's handler).
    tools: Arc<std::sync::OnceLock<Vec<Tool>>>,
    info: Implementation,
    /// The `logging/setLevel` threshold for guard log messages. Fresh in
    /// every clone: each session gets its own clone of the handler (see
    /// [`crate::notices::SessionLevel`]).
    log_level: crate::notices::SessionLevel,
}

/// Why nobody can be asked for a client that did not declare elicitation.
const NO_ELICITATION: &str = "this client did not declare the elicitation capability";

/// Why nobody can be asked on a stateless (2026-07-28) request, although
/// its client declared elicitation: a script's or batch's confirmation
/// cannot travel in a multi-round-trip answer yet.
const STATELESS: &str = "this is a stateless (2026-07-28) request, where a coding task cannot pause for the answer (run_script and run_batch can: they answer input_required); call the guard directly, or from a script";

/// Why nobody can be asked in a claimed MCP task.
const DETACHED: &str = "it runs as a detached MCP task, with no client connected to answer";

impl WardenServer {
    pub fn new(tasks: Arc<TaskRunner>, serving: ServingLimits, name: &str, version: &str) -> Self {
        let executor = tasks.executor.clone();
        let builtins = crate::builtins::all();
        Self {
            executor,
            runtime: Runtime::new(tasks.clone(), serving),
            tasks,
            builtins: Arc::new(builtins),
            tools: Arc::default(),
            info: Implementation::new(name, version),
            log_level: Default::default(),
        }
    }

    /// Every tool as `tools/list` gives it: one deterministic order for
    /// guards and built-ins alike, with schemas every client can take (see
    /// `schema::portable`). Built on first use, not at start: rewriting
    /// every schema is most of a start's CPU and `initialize` never needs
    /// it. Serving calls [`WardenServer::warm_tools`] so a first
    /// `tools/list` rarely waits either.
    pub fn tools(&self) -> &[Tool] {
        self.tools.get_or_init(|| {
            crate::export::all_tools(self.executor.registry(), self.executor.limits())
                .into_iter()
                .map(crate::export::for_mcp)
                .collect()
        })
    }

    /// Builds [`WardenServer::tools`] on the blocking pool, off the path
    /// of the first answer; done when it is built.
    pub async fn warm_tools(&self) {
        let server = self.clone();
        // A panic while building is the first `tools/list`'s to report.
        let _ = tokio::task::spawn_blocking(move || {
            server.tools();
        })
        .await;
    }

    /// The task runner behind the tools.
    pub fn tasks(&self) -> &Arc<TaskRunner> {
        &self.tasks
    }

    /// `Ok` when `uri` is the task view, an app resource or an artifact
    /// URI; the "unknown resource" error otherwise.
    fn known_resource(&self, uri: &str) -> Result<(), ErrorData> {
        if crate::view::is(uri)
            || self.executor.registry().app_resources().knows(uri)
            || uri.starts_with(crate::resources::SCHEME)
        {
            return Ok(());
        }
        Err(ErrorData::invalid_params(
            format!("unknown resource '{uri}': see resources/list and resources/templates/list"),
            Some(json!({"uri": uri})),
        ))
    }

    /// Runs a built-in tool for a request that waits for its result. Its
    /// scripts and batches can ask the person (a destructive call's
    /// confirmation) only on a session whose client declared elicitation;
    /// elsewhere the refusal says why ([`NO_ELICITATION`], [`STATELESS`]).
    async fn call_builtin(
        &self,
        builtin: &dyn crate::builtins::Builtin,
        arguments: Value,
        context: &RequestContext<RoleServer>,
    ) -> CallToolResult {
        let origin = request_origin(builtin.mode(), builtin.name(), context);
        let progress = context.meta.get_progress_token().map(|token| {
            Arc::new(warden_script::host::progress::Progress::new(
                context.peer.clone(),
                token,
            ))
        });
        let call = self.run_builtin(builtin, arguments, origin, context.ct.clone(), progress);
        // A script or batch it runs may need the person to confirm a
        // destructive call (`executor::confirm`): possible only with a
        // client that takes forms, so only then is an asker in scope.
        if crate::asking::can_elicit(&context.peer) {
            let asker = crate::asking::asker(context.peer.clone(), self.executor.limits().max_timeout);
            warden_core::ask::scope(asker, call).await
        } else if crate::rounds::CanAnswer::of(&context.meta).elicit {
            warden_core::ask::nobody(STATELESS, call).await
        } else {
            warden_core::ask::nobody(NO_ELICITATION, call).await
        }
    }

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
        let id = warden_executor::artifacts::new_task_id();
        let request = QueuedRequest {
            tool: tool.to_string(),
            arguments,
            traceparent: warden_executor::telemetry::traceparent(&origin.trace),
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
        let owner_limit = warden_executor::tenant::limits::bound(&principal).then_some(owner_cap as u64);
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
        warden_executor::telemetry::end(&origin.trace, "queued", None);
        let record = records
            .get(&principal, &id)
            .await
            .map_err(crate::tasks::store_error)?
            .ok_or_else(|| crate::tasks::unknown_task(&id))?;
        Ok(CreateTaskResult::new(crate::tasks::handle(&record)).into())
    }

    /// A refused request: its events, and the error result.
    fn refuse(&self, origin: &Origin, error: GuardError) -> CallToolResult {
        let events = self.executor.events();
        events.emit(origin, "request_started", json!({}));
        events.emit(origin, "request_rejected", json!({"reason": error.code}));
        events.emit(
            origin,
            "request_finished",
            json!({"status": "rejected", "task_type": null, "error_type": error.code, "duration_ms": 0.0}),
        );
        warden_executor::telemetry::end(&origin.trace, "rejected", Some(error.code.as_str()));
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
            let result = TaskResult::failure(
                TaskStatus::Failed,
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
            warden_executor::telemetry::end(&origin.trace, "cancelled", None);
            return;
        };
        let progress = Arc::new(warden_script::host::progress::Progress::for_claimed(
            self.runtime.records().clone(),
            record.id.clone(),
            slot,
        ));
        let run = self.builtin_outcome(
            builtin.as_ref(),
            request.arguments,
            origin,
            cancel,
            Some(progress.clone()),
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
            warden_core::ask::durable(book, run).await
        } else {
            warden_core::ask::nobody(DETACHED, run).await
        };
        if progress.take_claim().is_some() {
            // The task never began: its record is still running here.
            let text = match &outcome {
                Ok(Reply::Task(result)) => result.error.as_ref().and_then(|e| e.message()),
                Ok(_) => None,
                Err(error) => Some(error.message.as_str()),
            }
            .unwrap_or("the call ended before its task began")
            .to_string();
            let ended = TaskResult::failure(TaskStatus::Failed, text.clone()).with_error(
                warden_core::error::TaskError::new(warden_core::error::TaskErrorKind::Storage, text),
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
            .map(warden_executor::telemetry::from_traceparent)
            .unwrap_or_default();
        let mut origin = Origin::request(mode, &request.tool);
        origin.principal = record.owner.clone();
        origin.scopes = warden_executor::tenant::Scopes::new(request.scopes.clone());
        origin.trace = warden_executor::telemetry::start(
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

    /// Runs a built-in tool with request events around it.
    async fn run_builtin(
        &self,
        builtin: &dyn crate::builtins::Builtin,
        arguments: Value,
        origin: Origin,
        cancel: CancellationToken,
        progress: Option<Arc<warden_script::host::progress::Progress>>,
    ) -> CallToolResult {
        let (outcome, origin) = self
            .builtin_outcome(builtin, arguments, origin, cancel, progress)
            .await;
        self.answer_of(outcome, &origin).await
    }

    /// A built-in's outcome as its call's result, within the answer bound.
    async fn answer_of(&self, outcome: Result<Reply, GuardError>, origin: &Origin) -> CallToolResult {
        let limit = self.runtime.serving().max_answer_bytes;
        let answer = match outcome {
            Ok(reply) => reply.into_answer(self.runtime.store().view(&origin.principal), limit),
            Err(error) => {
                let status = if refused(&error) {
                    Status::Rejected
                } else {
                    Status::Failed
                };
                crate::bound::Answer::plain(CallToolResult::structured_error(failure_json(
                    &Failure::new(status, error),
                    &origin.request_id,
                )))
            }
        };
        crate::bound::bounded(&self.runtime, origin, answer).await
    }

    /// Runs a built-in tool with request events around it, and returns
    /// its typed outcome with the origin it ran under (a task sets
    /// `task_id`). Status, task type and error kind for the events and
    /// the span come from the typed reply.
    async fn builtin_outcome(
        &self,
        builtin: &dyn crate::builtins::Builtin,
        arguments: Value,
        mut origin: Origin,
        cancel: CancellationToken,
        progress: Option<Arc<warden_script::host::progress::Progress>>,
    ) -> (Result<Reply, GuardError>, Origin) {
        let events = self.executor.events().clone();
        events.emit(&origin, "request_started", json!({}));
        let started = Instant::now();
        let outcome = builtin
            .call(crate::builtins::Call {
                ctx: &self.runtime,
                arguments,
                origin: &mut origin,
                cancel,
                progress,
            })
            .await;
        let (status, task_type, error_type) = match &outcome {
            Ok(reply) => (
                reply.status(),
                reply.task_type(),
                reply.error_kind().map(warden_core::error::TaskErrorKind::as_str),
            ),
            Err(error) if refused(error) => ("rejected", None, Some(error.code.as_str())),
            Err(error) => ("failed", None, Some(error.code.as_str())),
        };
        if status == "rejected" {
            events.emit(&origin, "request_rejected", json!({"reason": error_type}));
        }
        events.emit(
            &origin,
            "request_finished",
            json!({"status": status, "task_type": task_type, "error_type": error_type,
                   "duration_ms": started.elapsed().as_secs_f64() * 1000.0}),
        );
        warden_executor::telemetry::end(&origin.trace, status, error_type);
        (outcome, origin)
    }

    /// Runs one direct guard call for an rmcp request, forwarding the
    /// guard's notices to the client while it runs.
    async fn call_guard(
        &self,
        name: &str,
        arguments: Value,
        receipt: bool,
        context: &RequestContext<RoleServer>,
    ) -> CallToolResult {
        let origin = request_origin("direct", name, context);
        let call = self.guard_call(name, arguments, origin, context.ct.clone(), receipt);
        // The guard may ask this call's client (`warden::ask`).
        let asker = crate::asking::asker(context.peer.clone(), self.executor.limits().max_timeout);
        let call = warden_core::ask::scope(asker, call);
        crate::notices::forwarding(context, name, &self.log_level, call).await
    }

    /// A stateless (2026-07-28) call of a guard: its questions, if it
    /// asks, go back to the client in the answer and its retries bring the
    /// answers (`input`: the request's `requestState` and
    /// `inputResponses`; see [`crate::rounds`]).
    async fn call_guard_stateless(
        &self,
        name: &str,
        arguments: Value,
        receipt: bool,
        input: (Option<&str>, Option<&rmcp::model::InputResponses>),
        context: &RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let binding = crate::rounds::Binding::new(&principal_of(context), name, &arguments);
        let can = crate::rounds::CanAnswer::of(&context.meta);
        let round = crate::rounds::Round::begin(binding, can, input.0, input.1)?;
        let origin = request_origin("direct", name, context);
        let request_id = origin.request_id.clone();
        let call = self.guard_call(name, arguments, origin, context.ct.clone(), receipt);
        let call = self.in_round(round, request_id, call);
        let level = crate::notices::SessionLevel::of_request(&context.meta);
        crate::notices::forwarding(context, name, &level, call).await
    }

    /// Runs a stateless guard call (`call`, request `request_id`) with
    /// `round` answering its questions. The answer: its result, or the
    /// question it asked with the sealed state. Shared by rmcp's handler and
    /// the HTTP direct path.
    pub(crate) async fn in_round(
        &self,
        round: Arc<crate::rounds::Round>,
        request_id: String,
        call: impl std::future::Future<Output = CallToolResult>,
    ) -> Result<CallToolResponse, ErrorData> {
        let result = warden_core::ask::scope(round.asker(), call).await;
        if let Some(error) = round.missing_capability(&result) {
            return Err(error);
        }
        Ok(round
            .finish(result, self.tasks.limits().input_state_ttl)
            .unwrap_or_else(|error| result_of(Err(Failure::new(Status::Failed, error)), &request_id).into()))
    }

    /// Whether the HTTP transport's direct path may answer a stateless
    /// call of `name`: a registered guard that never runs as a task.
    #[cfg(feature = "http")]
    pub(crate) fn answers_directly(&self, name: &str) -> bool {
        // A guard with task support may become a task: rmcp's handler decides.
        self.executor
            .registry()
            .get(name)
            .is_some_and(|guard| guard.task_support == warden_core::TaskSupport::Forbidden)
    }

    /// One direct call of the guard `name` with request events around it,
    /// whichever path carried the request (rmcp's handler, or the HTTP
    /// transport's direct path for stateless calls). The caller scopes a
    /// notice sink around it ([`warden_core::notify::scope`]) to receive the
    /// guard's progress and log messages.
    pub(crate) async fn guard_call(
        &self,
        name: &str,
        arguments: Value,
        origin: Origin,
        cancel: CancellationToken,
        receipt: bool,
    ) -> CallToolResult {
        self.guard_answer(name, arguments, origin, cancel, receipt)
            .await
            .0
    }

    /// [`WardenServer::guard_call`], with the error of a call that failed
    /// (a guard task tells a tool error from a protocol one by it).
    pub(crate) async fn guard_answer(
        &self,
        name: &str,
        arguments: Value,
        origin: Origin,
        cancel: CancellationToken,
        receipt: bool,
    ) -> (CallToolResult, Option<GuardError>) {
        let events = self.executor.events();
        events.emit(&origin, "request_started", json!({}));
        let started = Instant::now();
        // Hashed before the call, which consumes them.
        let arguments_sha256 = receipt.then(|| warden_core::receipt::digest(&arguments));
        let outcome = self
            .executor
            .call(
                CallRequest::new(name, arguments, &origin, cancel)
                    .consent(warden_executor::executor::confirm::Consent::Direct),
            )
            .await;
        let (status, error_type) = match &outcome {
            Ok(_) => (Status::Success, None),
            Err(failure) => (failure.status, Some(failure.error.code.clone())),
        };
        let failed = outcome.as_ref().err().map(|failure| failure.error.clone());
        if status == Status::Rejected {
            events.emit(&origin, "request_rejected", json!({"reason": error_type}));
        }
        events.emit(
            &origin,
            "request_finished",
            json!({
                "status": status.as_str(),
                "task_type": null,
                "error_type": error_type,
                "duration_ms": started.elapsed().as_secs_f64() * 1000.0,
            }),
        );
        warden_executor::telemetry::end(&origin.trace, status.as_str(), error_type.as_deref());
        let registry = self.executor.registry();
        let guard = registry.get(name);
        let receipt = match (&outcome, arguments_sha256) {
            (Ok(output), Some(arguments_sha256)) => registry.receipt(name, arguments_sha256, output),
            _ => None,
        };
        let mut result = match outcome {
            Ok(value) if guard.is_some_and(|g| g.content_output) => content_result(value),
            outcome => result_of(outcome, &origin.request_id),
        };
        if let Some(receipt) = &receipt {
            crate::receipts::attach(&mut result, receipt);
        }
        // Within the answer bound; a guard's structuredContent must match
        // its output schema, so it is never cut (see `crate::bound`).
        let mut answer = crate::bound::Answer::plain(result);
        answer.fixed_schema = guard.is_some_and(|g| !g.content_output);
        (
            crate::bound::bounded(&self.runtime, &origin, answer).await,
            failed,
        )
    }
}

/// A new rmcp request's origin (see [`new_request_origin`]).
fn request_origin(mode: &'static str, tool: &str, context: &RequestContext<RoleServer>) -> Origin {
    new_request_origin(
        mode,
        tool,
        context.meta.get_traceparent(),
        principal_of(context),
        scopes_of(context),
    )
}

/// A new request's origin with its `mcp.tool.call` span started, as a
/// child of the caller's `traceparent` (request `_meta`) when it sent one.
pub(crate) fn new_request_origin(
    mode: &'static str,
    tool: &str,
    traceparent: Option<&str>,
    principal: warden_executor::tenant::Principal,
    scopes: warden_executor::tenant::Scopes,
) -> Origin {
    let parent = traceparent
        .map(warden_executor::telemetry::from_traceparent)
        .unwrap_or_default();
    let mut origin = Origin::request(mode, tool);
    origin.principal = principal;
    origin.scopes = scopes;
    origin.trace = warden_executor::telemetry::start(
        "mcp.tool.call",
        SpanKind::Server,
        &parent,
        vec![
            KeyValue::new("mcp.tool.name", tool.to_string()),
            KeyValue::new("warden.mode", mode),
            KeyValue::new("warden.request_id", origin.request_id.clone()),
            KeyValue::new("warden.principal", origin.principal.to_string()),
            KeyValue::new("warden.node", warden_executor::node::name()),
        ],
    );
    origin
}

/// A `requestState`/`inputResponses` on a call that cannot have asked.
fn not_a_retry(why: &str) -> ErrorData {
    ErrorData::invalid_params(
        format!("requestState, inputResponses: {why}; send the call without them"),
        None,
    )
}

/// Who a request acts for: the principal the HTTP authentication layer put
/// in the request's extensions, or `local` (stdio, or HTTP without
/// authentication on loopback).
pub(crate) fn principal_of(context: &RequestContext<RoleServer>) -> warden_executor::tenant::Principal {
    #[cfg(feature = "http")]
    if let Some(principal) = context
        .extensions
        .get::<axum::http::request::Parts>()
        .and_then(|parts| parts.extensions.get::<warden_executor::tenant::Principal>())
    {
        return principal.clone();
    }
    #[cfg(not(feature = "http"))]
    let _ = context;
    warden_executor::tenant::Principal::local()
}

/// The OAuth scopes the request's token granted, as the HTTP
/// authentication layer put them in the request's extensions: none over
/// stdio, without authentication, or with an API token.
pub(crate) fn scopes_of(context: &RequestContext<RoleServer>) -> warden_executor::tenant::Scopes {
    #[cfg(feature = "http")]
    if let Some(scopes) = context
        .extensions
        .get::<axum::http::request::Parts>()
        .and_then(|parts| parts.extensions.get::<warden_executor::tenant::Scopes>())
    {
        return scopes.clone();
    }
    #[cfg(not(feature = "http"))]
    let _ = context;
    warden_executor::tenant::Scopes::default()
}

/// The MCP result for a guard call's outcome. An error has no
/// structuredContent (it would contradict the guard's output schema): its
/// JSON is the text content.
pub(crate) fn result_of(outcome: Result<Value, Failure>, request_id: &str) -> CallToolResult {
    match outcome {
        Ok(value) => CallToolResult::structured(value),
        Err(failure) => CallToolResult::error(vec![rmcp::model::ContentBlock::text(
            failure_json(&failure, request_id).to_string(),
        )]),
    }
}

/// The result of a guard whose output is `Vec<Content>` (wrapped as
/// `{"result": [...]}` like every non-object output): the blocks
/// themselves, with no structuredContent.
fn content_result(value: Value) -> CallToolResult {
    /// The wrapper a non-object output travels in.
    #[derive(serde::Deserialize)]
    struct Wrapped {
        result: Vec<warden_core::Content>,
    }
    match serde_json::from_value::<Wrapped>(value) {
        Ok(Wrapped { result: blocks }) => {
            CallToolResult::success(blocks.into_iter().map(warden_core::Content::into_block).collect())
        }
        _ => CallToolResult::error(vec![rmcp::model::ContentBlock::text(
            "the guard's content blocks could not be read back",
        )]),
    }
}

/// Whether a built-in's error refused the request (nothing ran).
fn refused(error: &GuardError) -> bool {
    warden_core::error::codes::REFUSALS.contains(&error.code.as_str())
}

/// `{status, error, request_id}` for a failed call.
fn failure_json(failure: &Failure, request_id: &str) -> Value {
    json!({
        "status": failure.status.as_str(),
        "error": failure.error,
        "request_id": request_id,
    })
}

impl WardenServer {
    /// `principal`'s record of task `id`, or the unknown-task error.
    async fn owned_task(
        &self,
        principal: &warden_executor::tenant::Principal,
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

impl ServerHandler for WardenServer {
    fn get_info(&self) -> ServerConfig {
        let mut capabilities = ServerCapabilities::builder()
            .enable_tools()
            .enable_resources()
            .enable_resources_subscribe()
            .enable_tasks()
            .build();
        // Guards' log messages (`warden_core::notify::log`), for 2025-11-25
        // clients; MCP logging is deprecated for 2026-07-28 (SEP-2577).
        capabilities.logging = Some(Default::default());
        // MCP Apps (SEP-1865): the task view `crate::view` serves; hosts
        // without Apps ignore it.
        capabilities
            .extensions
            .get_or_insert_with(Default::default)
            .insert(crate::view::EXTENSION_ID.into(), crate::view::capability());
        // Prompts, and the argument completions they offer, only when the
        // app registered some.
        if !self.executor.registry().prompts().is_empty() {
            capabilities.prompts = Some(Default::default());
            capabilities.completions = Some(Default::default());
        }
        ServerConfig::new(capabilities)
            .with_server_info(self.info.clone())
            .with_instructions(INSTRUCTIONS)
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        Ok(ListPromptsResult::with_all_items(
            self.executor.registry().prompts().list(),
        ))
    }

    /// A prompt's messages. A prompt whose render asks (`warden::ask`) is
    /// asked on a stateless (2026-07-28) request through multi-round-trip
    /// input, as a guard is: its questions come back `input_required` and
    /// the retry renders it again with the answers. Elsewhere nobody can
    /// answer a prompt's question (`cannot_ask`).
    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        let stateless = context
            .meta
            .protocol_version()
            .is_some_and(|v| !v.has_initialize());
        let shown = request
            .arguments
            .clone()
            .map(Value::Object)
            .unwrap_or(Value::Null);
        let arguments = warden_core::registry::prompts::string_arguments(&request.name, request.arguments)?;
        let prompts = self.executor.registry().prompts();
        if !stateless {
            return prompts.get(&request.name, arguments).map(Into::into);
        }
        let binding = crate::rounds::Binding::new(
            &principal_of(&context),
            &format!("prompt:{}", request.name),
            &shown,
        );
        let round = crate::rounds::Round::begin(
            binding,
            crate::rounds::CanAnswer::of(&context.meta),
            request.request_state.as_deref(),
            request.input_responses.as_ref(),
        )?;
        let rendered = warden_core::ask::with_asker(Some(round.asker()), None, || {
            prompts.get(&request.name, arguments)
        });
        let asked = round
            .questions(self.tasks.limits().input_state_ttl)
            .map_err(|e| ErrorData::internal_error(e.message, None))?;
        match asked {
            Some(asked) => Ok(GetPromptResponse::InputRequired(asked)),
            None => rendered.map(Into::into),
        }
    }

    async fn complete(
        &self,
        request: CompleteRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, ErrorData> {
        Ok(warden_core::registry::prompts::complete(
            self.executor.registry().prompts(),
            &request,
        ))
    }

    #[allow(deprecated)] // MCP logging, see `get_info`
    async fn set_level(
        &self,
        request: SetLevelRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.log_level.set(request.level);
        Ok(())
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let mut resources = vec![crate::view::resource()];
        resources.extend(self.executor.registry().app_resources().list());
        Ok(ListResourcesResult::with_all_items(resources))
    }

    /// Accepted for every resource Warden serves; none of them changes
    /// once readable (see [`warden_core::registry::app_resources`]), so no update
    /// notification is ever due.
    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.known_resource(&request.uri)
    }

    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.known_resource(&request.uri)
    }

    /// `subscriptions/listen` (2026-07-28): every category the client asks
    /// for that the server advertises is accepted (rmcp intersects with the
    /// capabilities and sends the acknowledgement, tagged with the
    /// subscription id, first). Warden's tool, prompt and resource lists are
    /// fixed when the server starts and its resources never change once
    /// readable, so the stream then carries nothing until the client closes
    /// it (rmcp's default `listen`).
    fn accepted_subscription_filter(
        &self,
        requested: &rmcp::model::SubscriptionFilter,
    ) -> Option<rmcp::model::SubscriptionFilter> {
        Some(requested.clone())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let tools = self.visible_tools(&principal_of(&context), &scopes_of(&context));
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        let mut templates = vec![crate::resources::template()];
        templates.extend(self.executor.registry().app_resources().templates());
        Ok(ListResourceTemplatesResult::with_all_items(templates))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        // The task view and the app's own resources are the same for every
        // principal (the view holds no data: it reads artifacts through the
        // host's bridge, as the caller). The view and artifact URIs are
        // routes to task files: they follow read_artifact's rule.
        if crate::view::is(&request.uri) || request.uri.starts_with(crate::resources::SCHEME) {
            self.route_permit(
                &context,
                warden_core::registry::BuiltinTool::ReadArtifact,
                "resources/read",
            )?;
        }
        if let Some(view) = crate::view::read(&request.uri) {
            return Ok(view.into());
        }
        if let Some(app) = self.executor.registry().app_resources().read(&request.uri) {
            return app.map(Into::into);
        }
        let principal = principal_of(&context);
        crate::resources::read(self.runtime.store().view(&principal), &request.uri).map(Into::into)
    }

    async fn get_task(
        &self,
        request: GetTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, ErrorData> {
        // A task's status and result: what get_task_result answers.
        self.route_permit(
            &context,
            warden_core::registry::BuiltinTool::GetTaskResult,
            "tasks/get",
        )?;
        let principal = principal_of(&context);
        let mut record = self.owned_task(&principal, &request.task_id).await?;
        let mut asked = None;
        if let Some((_, carried, _)) = crate::waiting::carried(self.runtime.records(), &record).await? {
            asked = crate::waiting::input_requests(&carried);
        } else if record.state == warden_task::store::State::Waiting {
            // Answered (or cancelled) between the two reads: read it again.
            record = self.owned_task(&principal, &request.task_id).await?;
        }
        Ok(GetTaskResult::new(crate::tasks::detailed(
            self.runtime.store(),
            &principal,
            &record,
            self.runtime.serving().max_answer_bytes,
            asked,
        )))
    }

    /// Answers the question a waiting task asked (see `crate::waiting`):
    /// the answer is recorded and the task queued to resume, on any node.
    /// A response to anything but its outstanding question is refused
    /// (-32602) and changes nothing.
    async fn update_task(
        &self,
        request: UpdateTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.route_permit(
            &context,
            warden_core::registry::BuiltinTool::GetTaskResult,
            "tasks/update",
        )?;
        let principal = principal_of(&context);
        let record = self.owned_task(&principal, &request.task_id).await?;
        crate::waiting::answer(
            self.runtime.records(),
            &record,
            principal.as_str(),
            &request.input_responses,
        )
        .await?;
        let mut origin = Origin::request("direct", "tasks/update");
        origin.principal = principal;
        origin.task_id = Some(record.id.clone());
        self.executor.events().emit(
            &origin,
            "task_answered",
            json!({"task_id": record.id, "keys": request.input_responses.keys().collect::<Vec<_>>()}),
        );
        self.tasks.submitted.notify_one();
        Ok(())
    }

    /// Cancels the task in whatever state it is (see
    /// [`TaskRunner::cancel`]): a queued one ends `cancelled` and never
    /// runs; a running one (here or on another server) has its worker
    /// killed and ends `cancelled`. An ended task keeps its record: a
    /// 2026-07-28 request gets the same empty acknowledgement (SEP-2663:
    /// cancelling is idempotent, -32602 is for unknown ids only), a
    /// 2025-11-25 session an error naming how it ended (that revision's
    /// rule); so does one that ended between the lookup and the cancel.
    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let principal = principal_of(&context);
        let record = self.owned_task(&principal, &request.task_id).await?;
        let idempotent = context
            .meta
            .protocol_version()
            .is_some_and(|v| !v.has_initialize());
        let already_ended = |record: &warden_task::store::TaskRecord| {
            if idempotent {
                Ok(())
            } else {
                Err(crate::tasks::already_ended(record))
            }
        };
        if matches!(record.state, warden_task::store::State::Ended(_)) {
            return already_ended(&record);
        }
        let cancelled = self
            .tasks
            .cancel(&record.id)
            .await
            .map_err(crate::tasks::store_error)?;
        if !cancelled {
            let now = self.owned_task(&principal, &record.id).await?;
            if matches!(now.state, warden_task::store::State::Ended(_)) {
                return already_ended(&now);
            }
        }
        Ok(())
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        self.tools().iter().find(|t| t.name == name).cloned()
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let name = request.name.to_string();
        // The policy: a refused tool answers with the rule, nothing runs
        // (guards are checked again by the executor, on every path).
        let (principal, scopes) = (principal_of(&context), scopes_of(&context));
        if let Err(error) = self.executor.permit(&principal, &scopes, &name) {
            // A denied guard does not exist for this caller: the answer
            // of a name never registered (the operator's log keeps the rule).
            if self.executor.registry().get(&name).is_some() {
                let mut origin = Origin::request("direct", &name);
                origin.principal = principal.clone();
                self.executor.events().emit(
                    &origin,
                    "request_rejected",
                    json!({"reason": error.code, "hidden": true}),
                );
                return Err(self.unknown_tool(&name, &principal, &scopes));
            }
            let mut origin = Origin::request("direct", &name);
            origin.principal = principal;
            origin.scopes = scopes;
            self.executor
                .events()
                .emit(&origin, "request_rejected", json!({"reason": error.code}));
            return Ok(result_of(Err(Failure::new(Status::Failed, error)), &origin.request_id).into());
        }
        // Multi-round-trip input is a stateless guard call's alone.
        let stateless = context
            .meta
            .protocol_version()
            .is_some_and(|v| !v.has_initialize());
        let retried = request.request_state.is_some() || request.input_responses.is_some();
        if let Some(index) = self.builtins.iter().position(|b| b.name() == name) {
            // A stateless run_script whose client takes forms asks the
            // person through multi-round-trip input (unless it asks for a
            // task, which waits for tasks/update instead).
            let script = name == warden_core::registry::BuiltinTool::RunScript.name();
            let batch = name == warden_core::registry::BuiltinTool::RunBatch.name();
            let coding = name == warden_core::registry::BuiltinTool::RunCodingTask.name();
            let declared = context.client_capabilities().is_some_and(|c| c.supports_tasks());
            if stateless
                && (script || batch || coding)
                && crate::rounds::CanAnswer::of(&context.meta).elicit
                && !crate::tasks::asks_for_task(&context.meta, declared)?
            {
                let arguments = request.arguments.map(Value::Object).unwrap_or(Value::Null);
                let (state, responses) = (request.request_state.as_deref(), request.input_responses.as_ref());
                return if script {
                    self.run_script_stateless(index, arguments, state, responses, &context)
                        .await
                } else if batch {
                    self.run_batch_stateless(index, arguments, state, responses, &context)
                        .await
                } else {
                    self.run_coding_task_stateless(index, arguments, state, responses, &context)
                        .await
                };
            }
            if retried {
                return Err(not_a_retry(&format!(
                    "'{name}' never answers input_required, so there is no question to answer"
                )));
            }
            let builtin = self.builtins[index].as_ref();
            let arguments = request.arguments.map(Value::Object).unwrap_or(Value::Null);
            if builtin.runs_as_task() {
                let declared = context.client_capabilities().is_some_and(|c| c.supports_tasks());
                // A caller the policy refuses get_task_result could never
                // read the task's result (tasks/get follows that rule): it
                // gets the plain result, as a client that did not ask.
                let can_read = self
                    .executor
                    .permit(
                        &principal,
                        &scopes,
                        warden_core::registry::BuiltinTool::GetTaskResult.name(),
                    )
                    .is_ok();
                if crate::tasks::asks_for_task(&context.meta, declared)? && can_read {
                    return self
                        .start_task(&name, Some(index), arguments, None, &context)
                        .await;
                }
            }
            return Ok(self.call_builtin(builtin, arguments, &context).await.into());
        }
        if self.executor.registry().get(&name).is_none() {
            return Err(self.unknown_tool(&name, &principal, &scopes));
        }
        let mut arguments = request.arguments.map(Value::Object);
        let input = (request.request_state.as_deref(), request.input_responses.as_ref());
        if let Some(answer) = self.guard_task(&name, &mut arguments, input, &context).await {
            return answer;
        }
        let arguments = arguments.unwrap_or(Value::Null);
        let receipt = crate::receipts::asked(&context.meta)?;
        if stateless {
            let input = (request.request_state.as_deref(), request.input_responses.as_ref());
            return self
                .call_guard_stateless(&name, arguments, receipt, input, &context)
                .await;
        }
        if retried {
            return Err(not_a_retry(
                "on a session the server asks the client directly; only a 2026-07-28 stateless request is answered input_required",
            ));
        }
        Ok(self.call_guard(&name, arguments, receipt, &context).await.into())
    }
}
