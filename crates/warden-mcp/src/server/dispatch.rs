//! Routing a `tools/call`: the policy first (a denied guard is a name
//! never registered), then a built-in tool (plain, as an MCP task, or a
//! stateless round) or a guard (plain, as a task, or a stateless round);
//! and the calls themselves, each inside one [`RequestScope`].

use std::sync::Arc;

use rmcp::model::{CallToolRequestParams, CallToolResponse, CallToolResult};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::origin::{not_a_retry, principal_of, request_origin, scopes_of};
use super::results::{content_result, failure_json, refused, result_of};
use super::scope::RequestScope;
use super::warden_server::{NO_ELICITATION, STATELESS, WardenServer};
use crate::builtins::Reply;
use crate::status::RequestStatus;
use warden_calls::events::Origin;
use warden_calls::executor::{CallRequest, Failure, Status};
use warden_calls::tenant::{Principal, Scopes};
use warden_core::error::GuardError;

impl WardenServer {
    /// Routes a `tools/call`. The policy first: a refused tool answers
    /// with the rule and nothing runs (guards are checked again by the
    /// executor, on every path).
    pub(super) async fn dispatch(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let name = request.name.to_string();
        let (principal, scopes) = (principal_of(&context), scopes_of(&context));
        if let Err(error) = self.executor.permit(&principal, &scopes, &name) {
            return self.denied(&name, principal, scopes, error);
        }
        if let Some(index) = self.builtins.iter().position(|b| b.name() == name) {
            return self
                .dispatch_builtin(index, request, &context, (&principal, &scopes))
                .await;
        }
        if self.executor.registry().get(&name).is_none() {
            return Err(self.unknown_tool(&name, &principal, &scopes));
        }
        self.dispatch_guard(&name, request, &context).await
    }

    /// A tool the policy refuses the caller. A denied guard does not exist
    /// for this caller: the answer of a name never registered (the
    /// operator's log keeps the rule).
    fn denied(
        &self,
        name: &str,
        principal: Principal,
        scopes: Scopes,
        error: GuardError,
    ) -> Result<CallToolResponse, ErrorData> {
        let mut origin = Origin::request("direct", name);
        origin.principal = principal.clone();
        if self.executor.registry().get(name).is_some() {
            self.executor.events().emit(
                &origin,
                "request_rejected",
                json!({"reason": error.code, "hidden": true}),
            );
            return Err(self.unknown_tool(name, &principal, &scopes));
        }
        origin.scopes = scopes;
        self.executor
            .events()
            .emit(&origin, "request_rejected", json!({"reason": error.code}));
        Ok(result_of(Err(Failure::new(Status::Failed, error)), &origin.request_id).into())
    }

    /// A built-in tool: a stateless round when it can ask the person that
    /// way, an MCP task when the client asked for one and may read it, else
    /// the plain call.
    async fn dispatch_builtin(
        &self,
        index: usize,
        request: CallToolRequestParams,
        context: &RequestContext<RoleServer>,
        (principal, scopes): (&Principal, &Scopes),
    ) -> Result<CallToolResponse, ErrorData> {
        let name = request.name.to_string();
        let stateless = is_stateless(context);
        let retried = request.request_state.is_some() || request.input_responses.is_some();
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
            return if script || batch {
                self.run_task_stateless(index, arguments, state, responses, context)
                    .await
            } else {
                self.run_coding_task_stateless(index, arguments, state, responses, context)
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
            // A caller the policy refuses get_task_result could never
            // read the task's result (tasks/get follows that rule): it
            // gets the plain result, as a client that did not ask.
            let can_read = self
                .executor
                .permit(
                    principal,
                    scopes,
                    warden_core::registry::BuiltinTool::GetTaskResult.name(),
                )
                .is_ok();
            if crate::tasks::asks_for_task(&context.meta, declared)? && can_read {
                return self
                    .start_task(&name, Some(index), arguments, None, context)
                    .await;
            }
        }
        Ok(self.call_builtin(builtin, arguments, context).await.into())
    }

    /// A guard: as an MCP task when it supports them and was asked for
    /// one, a stateless round on 2026-07-28, else the plain call on a
    /// session. Multi-round-trip input is a stateless guard call's alone.
    async fn dispatch_guard(
        &self,
        name: &str,
        request: CallToolRequestParams,
        context: &RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let mut arguments = request.arguments.map(Value::Object);
        let input = (request.request_state.as_deref(), request.input_responses.as_ref());
        if let Some(answer) = self.guard_task(name, &mut arguments, input, context).await {
            return answer;
        }
        let arguments = arguments.unwrap_or(Value::Null);
        let receipt = crate::receipts::asked(&context.meta)?;
        if is_stateless(context) {
            return self
                .call_guard_stateless(name, arguments, receipt, input, context)
                .await;
        }
        if request.request_state.is_some() || request.input_responses.is_some() {
            return Err(not_a_retry(
                "on a session the server asks the client directly; only a 2026-07-28 stateless request is answered input_required",
            ));
        }
        Ok(self.call_guard(name, arguments, receipt, context).await.into())
    }

    /// Runs a built-in tool for a request that waits for its result. Its
    /// scripts and batches can ask the person (a destructive call's
    /// confirmation) only on a session whose client declared elicitation;
    /// elsewhere the refusal says why ([`NO_ELICITATION`], [`STATELESS`]).
    pub(super) async fn call_builtin(
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
            let asker = crate::asking::asker(
                context.peer.clone(),
                self.executor.limits().max_timeout,
                context.ct.clone(),
            );
            warden_core::ask::scope(asker, call).await
        } else if crate::rounds::CanAnswer::of(&context.meta).elicit {
            warden_core::reach::nobody(STATELESS, call).await
        } else {
            warden_core::reach::nobody(NO_ELICITATION, call).await
        }
    }

    /// Runs a built-in tool with request events around it.
    pub(super) async fn run_builtin(
        &self,
        builtin: &dyn crate::builtins::Builtin,
        arguments: Value,
        origin: Origin,
        cancel: CancellationToken,
        progress: Option<Arc<warden_script::host::progress::Progress>>,
    ) -> CallToolResult {
        let (outcome, origin) = self
            .builtin_outcome(builtin, arguments, origin, cancel, (None, progress))
            .await;
        self.answer_of(outcome, &origin).await
    }

    /// A built-in's outcome as its call's result, within the answer bound.
    pub(super) async fn answer_of(
        &self,
        outcome: Result<Reply, GuardError>,
        origin: &Origin,
    ) -> CallToolResult {
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
        crate::bound::bounded(&self.tasks, limit, origin, answer).await
    }

    /// Runs a built-in tool with request events around it, and returns
    /// its typed outcome with the origin it ran under (a task sets
    /// `task_id`). Status, task type and error kind for the events and
    /// the span come from the typed reply.
    pub(super) async fn builtin_outcome(
        &self,
        builtin: &dyn crate::builtins::Builtin,
        arguments: Value,
        mut origin: Origin,
        cancel: CancellationToken,
        (claim, progress): (
            Option<Arc<warden_task::Claim>>,
            Option<Arc<warden_script::host::progress::Progress>>,
        ),
    ) -> (Result<Reply, GuardError>, Origin) {
        let scope = RequestScope::open(self.executor.events(), &origin);
        let outcome = builtin
            .call(crate::builtins::Call {
                ctx: &self.runtime,
                arguments,
                origin: &mut origin,
                cancel,
                progress,
                claim,
            })
            .await;
        match &outcome {
            Ok(reply) => scope.close(
                &origin,
                reply.status(),
                reply.task_type(),
                reply.error_kind().map(warden_core::error::TaskErrorKind::as_str),
            ),
            Err(error) => {
                let status = if refused(error) {
                    Status::Rejected
                } else {
                    Status::Failed
                };
                scope.close(
                    &origin,
                    RequestStatus::Call(status),
                    None,
                    Some(error.code.as_str()),
                );
            }
        }
        (outcome, origin)
    }

    /// Runs one direct guard call for an rmcp request, forwarding the
    /// guard's notices to the client while it runs.
    pub(super) async fn call_guard(
        &self,
        name: &str,
        arguments: Value,
        receipt: bool,
        context: &RequestContext<RoleServer>,
    ) -> CallToolResult {
        let origin = request_origin("direct", name, context);
        let call = self.guard_call(name, arguments, origin, context.ct.clone(), receipt);
        // The guard may ask this call's client (`warden::ask`).
        let asker = crate::asking::asker(
            context.peer.clone(),
            self.executor.limits().max_timeout,
            context.ct.clone(),
        );
        let call = warden_core::ask::scope(asker, call);
        crate::notices::forwarding(context, name, &self.log_level, call).await
    }

    /// A stateless (2026-07-28) call of a guard: its questions, if it
    /// asks, go back to the client in the answer and its retries bring the
    /// answers (`input`: the request's `requestState` and
    /// `inputResponses`; see [`crate::rounds`]).
    pub(super) async fn call_guard_stateless(
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
        self.guard_answer(name, arguments, origin, cancel, receipt, None)
            .await
            .0
    }

    /// [`WardenServer::guard_call`], with the error of a call that failed
    /// (a guard task tells a tool error from a protocol one by it), its
    /// records also in `task_events` when given (a guard task's own log).
    pub(crate) async fn guard_answer(
        &self,
        name: &str,
        arguments: Value,
        origin: Origin,
        cancel: CancellationToken,
        receipt: bool,
        task_events: Option<&warden_calls::events::Events>,
    ) -> (CallToolResult, Option<GuardError>) {
        let events = task_events.unwrap_or(self.executor.events());
        let scope = RequestScope::open(events, &origin);
        // Hashed before the call, which consumes them.
        let arguments_sha256 = receipt.then(|| warden_core::receipt::digest(&arguments));
        let outcome = self
            .executor
            .call(
                CallRequest::new(name, arguments, &origin, cancel)
                    .events(events)
                    .consent(warden_calls::executor::confirm::Consent::Direct),
            )
            .await;
        let failed = outcome.as_ref().err().map(|failure| failure.error.clone());
        match &outcome {
            Ok(_) => scope.close(&origin, RequestStatus::Call(Status::Success), None, None),
            Err(failure) => scope.close(
                &origin,
                RequestStatus::Call(failure.status),
                None,
                Some(failure.error.code.as_str()),
            ),
        }
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
            crate::bound::bounded(
                &self.tasks,
                self.runtime.serving().max_answer_bytes,
                &origin,
                answer,
            )
            .await,
            failed,
        )
    }
}

/// Whether the request is a stateless (2026-07-28) one: no session, no
/// `initialize`.
pub(super) fn is_stateless(context: &RequestContext<RoleServer>) -> bool {
    context
        .meta
        .protocol_version()
        .is_some_and(|v| !v.has_initialize())
}
