//! rmcp's `ServerHandler` for [`WardenServer`]: the server's capabilities,
//! and each request handed to what does it (prompts and resources from the
//! registry, tasks from the task records, `tools/call` to `dispatch`).

#[allow(deprecated)] // MCP logging, see `get_info`
use rmcp::model::SetLevelRequestParams;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CancelTaskParams, CompleteRequestParams, CompleteResult,
    CustomRequest, CustomResult, GetPromptRequestParams, GetPromptResponse, GetTaskParams, GetTaskResult,
    ListPromptsResult, ListResourceTemplatesResult, ListResourcesResult, ListToolsResult,
    PaginatedRequestParams, ReadResourceRequestParams, ReadResourceResponse, ServerCapabilities,
    ServerConfig, SubscribeRequestParams, Tool, UnsubscribeRequestParams, UpdateTaskParams,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::{Value, json};

use super::dispatch::is_stateless;
use super::origin::{principal_of, scopes_of};
use super::warden_server::{INSTRUCTIONS, WardenServer};
use warden_calls::events::Origin;

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
        let stateless = is_stateless(&context);
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
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        // A stateless request sets its level in its own `_meta`.
        not_removed("logging/setLevel", &context)?;
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
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        not_removed("resources/subscribe", &context)?;
        self.known_resource(&request.uri)
    }

    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        not_removed("resources/unsubscribe", &context)?;
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
            None,
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
    /// [`warden_task::TaskRunner::cancel`]): a queued one ends `cancelled` and never
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
        let idempotent = is_stateless(&context);
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

    /// A request rmcp read as no MCP request: a known method whose params
    /// do not parse, or an unknown method (`crate::unparsed`).
    async fn on_custom_request(
        &self,
        request: CustomRequest,
        context: RequestContext<RoleServer>,
    ) -> Result<CustomResult, ErrorData> {
        Err(crate::unparsed::refusal(&request, is_stateless(&context)))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let revision = context.peer.peer_info().map(|info| info.protocol_version.clone());
        let response = self.dispatch(request, context).await?;
        Ok(crate::revision::readable(response, revision.as_ref()))
    }
}

/// `Ok` unless `method` came as a stateless request, which the revision
/// that removed it answers "method not found" (rmcp refuses a stateless
/// `ping` itself, and over HTTP the rest too, before the handler; over
/// stdio these reach it).
fn not_removed(method: &str, context: &RequestContext<RoleServer>) -> Result<(), ErrorData> {
    match crate::unparsed::removed_when_stateless(method).filter(|_| is_stateless(context)) {
        Some(refusal) => Err(refusal),
        None => Ok(()),
    }
}
