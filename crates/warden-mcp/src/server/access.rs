//! Who may reach what, as the MCP layer applies the operator's policy
//! (`warden_calls::executor::policy`): the tools a caller sees and the answer for
//! one it does not know (a denied guard answers as a name never
//! registered), the protocol routes that follow a tool's rule
//! (`resources/read` → `read_artifact`, `tasks/get` → `get_task_result`),
//! and a claimed task the policy in force now refuses. The handler in
//! `super` calls these; guards are checked again by the executor.

use rmcp::model::Tool;
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer};
use serde_json::json;

use super::origin::{principal_of, scopes_of};
use super::warden_server::WardenServer;
use warden_calls::events::Origin;
use warden_calls::executor::Admitted;
use warden_core::error::GuardError;
use warden_task::{TaskResult, TaskStatus};

impl WardenServer {
    /// The tools `principal`, holding `scopes`, may call: what its
    /// `tools/list` shows and its unknown-tool error names.
    pub(super) fn visible_tools(
        &self,
        principal: &warden_calls::tenant::Principal,
        scopes: &warden_calls::tenant::Scopes,
    ) -> Vec<Tool> {
        if self.executor.policy().is_none() {
            return self.tools().to_vec();
        }
        self.tools()
            .iter()
            .filter(|tool| self.executor.permit(principal, scopes, &tool.name).is_ok())
            .cloned()
            .collect()
    }

    /// The protocol error for a tool `principal` does not know: a name
    /// never registered, or a guard the policy denies it (the same answer,
    /// so the two cannot be told apart), naming only what it may call.
    pub(super) fn unknown_tool(
        &self,
        name: &str,
        principal: &warden_calls::tenant::Principal,
        scopes: &warden_calls::tenant::Scopes,
    ) -> ErrorData {
        let tools = self.visible_tools(principal, scopes);
        let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
        ErrorData::invalid_params(
            format!("unknown tool '{name}'; available tools: {}", names.join(", ")),
            None,
        )
    }

    /// `Ok` when the caller may take `route` (a protocol method) to data a
    /// tool also serves: the route follows that tool's rule in the policy
    /// (docs/operating.md, "Who may call what"). Else the refusal, naming
    /// the rule, as a protocol error, and a `request_rejected` event.
    pub(super) fn route_permit(
        &self,
        context: &RequestContext<RoleServer>,
        tool: warden_core::registry::BuiltinTool,
        route: &str,
    ) -> Result<(), ErrorData> {
        let (principal, scopes) = (principal_of(context), scopes_of(context));
        let Err(error) = self.executor.permit(&principal, &scopes, tool.name()) else {
            return Ok(());
        };
        let mut origin = Origin::request("direct", route);
        origin.principal = principal;
        self.executor.events().emit(
            &origin,
            "request_rejected",
            json!({"reason": error.code, "follows": tool.name()}),
        );
        Err(ErrorData::invalid_request(
            format!(
                "{route} reads what {} does, so it follows its rule: {}",
                tool.name(),
                error.message
            ),
            Some(json!({"code": error.code, "tool": tool.name()})),
        ))
    }

    /// Ends a claimed task the policy now refuses: `failed`, error kind
    /// `forbidden`, the refusal (naming the rule) as its summary, with
    /// request events saying so; then its `slot` goes to the next queued task.
    pub(super) async fn refuse_claimed(
        &self,
        record: &warden_task::store::TaskRecord,
        mut origin: Origin,
        error: GuardError,
        slot: Admitted,
    ) {
        origin.task_id = Some(record.id.clone());
        let events = self.executor.events();
        events.emit(&origin, "request_started", json!({}));
        events.emit(&origin, "request_rejected", json!({"reason": error.code}));
        events.emit(
            &origin,
            "request_finished",
            json!({"status": "failed", "task_type": null, "error_type": error.code, "duration_ms": 0.0}),
        );
        warden_calls::telemetry::end(&origin.trace, "failed", Some(error.code.as_str()));
        let text = format!("the task did not run: {}", error.message);
        let ended = TaskResult::failure(
            TaskStatus::Failed,
            warden_core::error::TaskErrorKind::Forbidden,
            text,
        );
        let _ = self.runtime.records().end(&record.id, &ended).await;
        drop(slot);
        self.tasks.submitted.notify_one();
    }

    /// Whether the policy lets `principal`, holding `scopes`, call `name`.
    #[cfg(feature = "http")]
    pub(crate) fn may_call(
        &self,
        principal: &warden_calls::tenant::Principal,
        scopes: &warden_calls::tenant::Scopes,
        name: &str,
    ) -> bool {
        self.executor.permit(principal, scopes, name).is_ok()
    }
}
