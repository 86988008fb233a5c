//! [`WardenServer`]: the handler's state (registry, executor, task runner,
//! built-ins, the session's log level) and what the other server modules
//! share about it.

use std::sync::Arc;

use rmcp::ErrorData;
use rmcp::model::{Implementation, Tool};
use serde_json::json;

use crate::builtins::Runtime;
use crate::limits::ServingLimits;
use warden_calls::executor::Executor;
use warden_task::TaskRunner;

/// Instructions sent to clients at initialize.
pub(super) const INSTRUCTIONS: &str = "Each tool is a typed guard: call it with the arguments its input schema describes. \
Errors come back as results with isError=true, a stable error code and a message naming the field to fix. \
'Server busy; retry later' means every call slot was in use: retry after a moment.";

/// The handler rmcp drives. Cheap to clone (everything but the session's
/// log level is shared).
#[derive(Clone)]
pub struct WardenServer {
    pub(super) executor: Arc<Executor>,
    /// The task runner as a service: the queue it claims from, the tasks
    /// it cancels. Built-ins reach it through `runtime`.
    pub(super) tasks: Arc<TaskRunner>,
    /// What built-ins run against.
    pub(super) runtime: Runtime,
    pub(super) builtins: Arc<Vec<Box<dyn crate::builtins::Builtin>>>,
    /// `tools/list`, built on first use ([`WardenServer::tools`]) and
    /// shared by every clone (each session's handler).
    pub(super) tools: Arc<std::sync::OnceLock<Vec<Tool>>>,
    pub(super) info: Implementation,
    /// The `logging/setLevel` threshold for guard log messages. Fresh in
    /// every clone: each session gets its own clone of the handler (see
    /// [`crate::notices::SessionLevel`]).
    pub(super) log_level: crate::notices::SessionLevel,
}

/// Why nobody can be asked for a client that did not declare elicitation.
pub(super) const NO_ELICITATION: &str = "this client did not declare the elicitation capability for forms (`elicitation: {}` or `elicitation.form`)";

/// Why nobody can be asked on a stateless (2026-07-28) request, although
/// its client declared elicitation: a script's or batch's confirmation
/// cannot travel in a multi-round-trip answer yet.
pub(super) const STATELESS: &str = "this is a stateless (2026-07-28) request, where a coding task cannot pause for the answer (run_script and run_batch can: they answer input_required); call the guard directly, or from a script";

/// Why nobody can be asked in a claimed MCP task.
pub(super) const DETACHED: &str = "it runs as a detached MCP task, with no client connected to answer";

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
    pub(super) fn known_resource(&self, uri: &str) -> Result<(), ErrorData> {
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
}
