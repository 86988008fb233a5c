//! The one context built-ins reach the world through.
//!
//! [`Runtime`] hands a built-in what it may use, each by its own name: the
//! registry and limits (the executor's and the MCP layer's), the executor (for guard calls, which always go
//! through it, with the event log), the artifact store, the task records,
//! and the task runner for the tools that run tasks. Built by the server once
//! ([`crate::server::WardenServer::new`]) and shared by every call;
//! cheap to clone (every part is shared).

use std::sync::Arc;

use crate::limits::ServingLimits;
use warden_calls::artifacts::ArtifactStore;
use warden_calls::executor::Executor;
use warden_core::registry::Registry;
use warden_task::TaskRunner;
use warden_task::records::Records;

/// What built-ins run against (see the module docs).
#[derive(Clone)]
pub struct Runtime {
    executor: Arc<Executor>,
    store: ArtifactStore,
    records: Arc<Records>,
    tasks: Arc<TaskRunner>,
    serving: Arc<ServingLimits>,
}

impl Runtime {
    /// The context over `tasks`' executor, store and records, serving
    /// under `serving`.
    pub fn new(tasks: Arc<TaskRunner>, serving: ServingLimits) -> Self {
        Self {
            executor: tasks.executor.clone(),
            store: tasks.store.clone(),
            records: tasks.records.clone(),
            tasks,
            serving: Arc::new(serving),
        }
    }

    /// Guards and script-only functions: every one of them. A tool that
    /// names guards to its caller reads [`Runtime::visible`] instead.
    pub fn registry(&self) -> &Registry {
        self.executor.registry()
    }

    /// The registry as `origin`'s caller sees it: the guards the policy
    /// denies it are, for it, guards that do not exist.
    pub fn visible(&self, origin: &warden_calls::events::Origin) -> warden_core::registry::Visible<'_> {
        self.executor.visible_to(origin)
    }

    /// The executor's limits (timeouts, argument caps, …).
    pub fn limits(&self) -> &warden_calls::limits::CallLimits {
        self.executor.limits()
    }

    /// The MCP layer's limits (the answer bound, …).
    pub fn serving(&self) -> &ServingLimits {
        &self.serving
    }

    /// Every guard call a built-in causes goes through it.
    pub fn executor(&self) -> &Arc<Executor> {
        &self.executor
    }

    /// Task directories and their files (view it as the caller).
    pub fn store(&self) -> &ArtifactStore {
        &self.store
    }

    /// Task records (the store's truth about each task).
    pub fn records(&self) -> &Arc<Records> {
        &self.records
    }

    /// Runs tasks: only the tools that start one need it.
    pub fn tasks(&self) -> &Arc<TaskRunner> {
        &self.tasks
    }
}
