//! Live progress of a task: each step, guard call and artifact advances a
//! counter by one with a short message.
//!
//! Where the notes go depends on how the client asked. A request that sent
//! a progressToken gets `notifications/progress`. A task the client asked
//! for as an MCP task has no request to notify: it was queued in the task
//! store and claimed by a server, which runs it with
//! [`Progress::for_claimed`]; its notes become the record's status message
//! (`tasks/get` → `statusMessage`). The claim itself (the task id and the
//! task slot reserved for it) travels beside the sink, explicitly
//! (`warden_task::Claim`). Sending is best effort: a client that went away, or a store
//! write that failed, must not fail the task.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use rmcp::model::{ProgressNotificationParam, ProgressToken};
use rmcp::{Peer, RoleServer};

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
    Claimed { notes: Arc<dyn TaskNotes>, id: String },
}

impl Progress {
    /// Notes for a request that sent `token`.
    pub fn new(peer: Peer<RoleServer>, token: ProgressToken) -> Self {
        Self {
            sink: Sink::Request { peer, token },
            count: AtomicU32::new(0),
        }
    }

    /// Notes for the queued task `id` this server claimed.
    pub fn for_claimed(notes: Arc<dyn TaskNotes>, id: String) -> Self {
        Self {
            sink: Sink::Claimed { notes, id },
            count: AtomicU32::new(0),
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
