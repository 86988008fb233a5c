//! Live progress of a task: each step, guard call and artifact advances a
//! counter by one with a short message.
//!
//! Where the notes go depends on how the client asked. A request that sent
//! a progressToken gets `notifications/progress`. A task the client asked
//! for as an MCP task ([`Progress::for_task`]) has no request to notify
//! once it is answered: its notes become the task record's status message
//! (`tasks/get` → `statusMessage`), and the sink is also how the task's id
//! reaches the MCP layer the moment the task exists
//! ([`Progress::task_created`]). Sending is best effort: a client that
//! went away, or a store write that failed, must not fail the task.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use rmcp::model::{ProgressNotificationParam, ProgressToken};
use rmcp::{Peer, RoleServer};
use tokio::sync::oneshot;

use crate::task::records::Records;

pub struct Progress {
    sink: Sink,
    count: AtomicU32,
}

enum Sink {
    /// `notifications/progress` to the requesting client.
    Request {
        peer: Peer<RoleServer>,
        token: ProgressToken,
    },
    /// The status message of a detached task's record.
    Task {
        records: Arc<Records>,
        /// The TTL the client asked for (already clamped).
        ttl_ms: i64,
        /// Sends the task id once, when the task exists.
        created: Mutex<Option<oneshot::Sender<String>>>,
        id: Mutex<Option<String>>,
    },
}

impl Progress {
    /// Notes for a request that sent `token`.
    pub fn new(peer: Peer<RoleServer>, token: ProgressToken) -> Self {
        Self {
            sink: Sink::Request { peer, token },
            count: AtomicU32::new(0),
        }
    }

    /// Notes for a task that outlives its request: they go to its record,
    /// and `created` gets its id as soon as it has one.
    pub fn for_task(records: Arc<Records>, ttl_ms: i64, created: oneshot::Sender<String>) -> Self {
        Self {
            sink: Sink::Task {
                records,
                ttl_ms,
                created: Mutex::new(Some(created)),
                id: Mutex::new(None),
            },
            count: AtomicU32::new(0),
        }
    }

    /// Whether this is a task the client asked for as an MCP task.
    pub fn detached(&self) -> bool {
        matches!(self.sink, Sink::Task { .. })
    }

    /// The TTL of a detached task.
    pub fn ttl_ms(&self) -> Option<i64> {
        match &self.sink {
            Sink::Task { ttl_ms, .. } => Some(*ttl_ms),
            Sink::Request { .. } => None,
        }
    }

    /// The task `id` exists (its directory and record are written).
    pub fn task_created(&self, id: &str) {
        if let Sink::Task { created, id: own, .. } = &self.sink {
            *lock(own) = Some(id.to_string());
            if let Some(sender) = lock(created).take() {
                let _ = sender.send(id.to_string());
            }
        }
    }

    /// Sends the next note with `message`.
    pub async fn note(&self, message: impl Into<String>) {
        let n = self.count.fetch_add(1, Ordering::Relaxed) + 1;
        match &self.sink {
            Sink::Request { peer, token } => {
                let param =
                    ProgressNotificationParam::new(token.clone(), f64::from(n)).with_message(message.into());
                let _ = peer.notify_progress(param).await;
            }
            Sink::Task { records, id, .. } => {
                let Some(id) = lock(id).clone() else {
                    return;
                };
                records.note(&id, &message.into()).await;
            }
        }
    }
}

/// Notes progress when a sink is present.
pub async fn note(progress: Option<&Progress>, message: impl Into<String>) {
    if let Some(progress) = progress {
        progress.note(message).await;
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}
