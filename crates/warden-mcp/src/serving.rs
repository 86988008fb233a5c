//! One serving lifecycle for both transports: what starts around the
//! first connection and what stops after the last.
//!
//! [`Serving::start`] builds the handler and, in the background, warms
//! the tool list (a client's next request after `initialize` is
//! `tools/list`), opens the task records ([`TaskRunner::start_records`];
//! a task tool called sooner opens them itself) and starts claiming queued
//! tasks. [`Serving::stop`] cancels the tasks still running (recorded
//! `cancelled`; MCP tasks `interrupted`, for another server to see) within
//! a grace and closes the records. A transport decides *when*: stdio
//! starts once its `initialize` is answered, so start-up work never
//! competes with it for a core; HTTP starts before it accepts.

use std::sync::Arc;
use std::time::Duration;

use warden_task::TaskRunner;

use crate::limits::ServingLimits;

use crate::server::{WardenServer, start_claimer};

/// A server being served (see the module docs).
pub struct Serving {
    tasks: Arc<TaskRunner>,
    server: WardenServer,
}

impl Serving {
    /// The handler for `tasks` under `limits`, with nothing started yet.
    pub fn new(tasks: Arc<TaskRunner>, limits: ServingLimits, name: &str, version: &str) -> Self {
        let server = WardenServer::new(tasks.clone(), limits, name, version);
        Self { tasks, server }
    }

    /// Starts the background work (see the module docs). Called once.
    pub fn start(&self) {
        let (tasks, server) = (self.tasks.clone(), self.server.clone());
        tokio::spawn(async move {
            server.warm_tools().await;
            tasks.start_records();
            start_claimer(server);
        });
    }

    /// The handler every connection clones.
    pub fn server(&self) -> &WardenServer {
        &self.server
    }

    /// The task runner behind it.
    pub fn tasks(&self) -> &Arc<TaskRunner> {
        &self.tasks
    }

    /// Stops serving: running tasks are cancelled and given `grace` to
    /// record how they ended, then the records close. How many tasks had
    /// not recorded themselves (marked `interrupted` at the next start).
    pub async fn stop(self, grace: Duration) -> usize {
        let left = self.tasks.shutdown(grace).await;
        self.tasks.close_records().await;
        left
    }
}
