//! Live progress of a task: each step, guard call and artifact advances a
//! counter by one with a short message.
//!
//! Where the notes go depends on how the client asked. A request that sent
//! a progressToken gets `notifications/progress`. A task the client asked
//! for as an MCP task has no request to notify: it was queued in the task
//! store and claimed by a server, which runs it with
//! [`Progress::for_claimed`]; its notes become the record's status message
//! (`tasks/get` → `statusMessage`), and the sink carries what the claim
//! fixed (the task id and the task slot reserved for it) to where the task
//! begins. Sending is best effort: a client that went away, or a store
//! write that failed, must not fail the task.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use rmcp::model::{ProgressNotificationParam, ProgressToken};
use rmcp::{Peer, RoleServer};

use warden_executor::executor::Admitted;

/// Where a detached task's notes go: its record (`task::records`
/// implements it; this module does not depend on the task layer above it).
#[async_trait::async_trait]
pub trait TaskNotes: Send + Sync {
    /// Sets task `id`'s status message to `message`; best effort.
    async fn note(&self, id: &str, message: &str);
}

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
    /// The status message of a claimed task's record.
    Claimed {
        notes: Arc<dyn TaskNotes>,
        id: String,
        /// The task slot reserved when the task was claimed; taken by the
        /// task when it begins.
        slot: Mutex<Option<Admitted>>,
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

    /// Notes for the queued task `id` this server claimed, holding `slot`.
    pub fn for_claimed(notes: Arc<dyn TaskNotes>, id: String, slot: Admitted) -> Self {
        Self {
            sink: Sink::Claimed {
                notes,
                id,
                slot: Mutex::new(Some(slot)),
            },
            count: AtomicU32::new(0),
        }
    }

    /// Whether this is a task the client asked for as an MCP task.
    pub fn detached(&self) -> bool {
        matches!(self.sink, Sink::Claimed { .. })
    }

    /// The claimed task's id and reserved slot, once (when it begins).
    pub fn take_claim(&self) -> Option<(String, Admitted)> {
        match &self.sink {
            Sink::Claimed { id, slot, .. } => lock(slot).take().map(|slot| (id.clone(), slot)),
            Sink::Request { .. } => None,
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
            Sink::Claimed { notes, id, .. } => notes.note(id, &message.into()).await,
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
