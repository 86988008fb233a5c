//! Live progress: `notifications/progress` for a request that sent a
//! progressToken. Each step, guard call and artifact advances the counter
//! by one with a short message. Sending is best effort: a client that went
//! away must not fail the task.

use std::sync::atomic::{AtomicU32, Ordering};

use rmcp::model::{ProgressNotificationParam, ProgressToken};
use rmcp::{Peer, RoleServer};

pub struct Progress {
    peer: Peer<RoleServer>,
    token: ProgressToken,
    count: AtomicU32,
}

impl Progress {
    pub fn new(peer: Peer<RoleServer>, token: ProgressToken) -> Self {
        Self {
            peer,
            token,
            count: AtomicU32::new(0),
        }
    }

    /// Sends the next progress notification with `message`.
    pub async fn note(&self, message: impl Into<String>) {
        let n = self.count.fetch_add(1, Ordering::Relaxed) + 1;
        let param =
            ProgressNotificationParam::new(self.token.clone(), f64::from(n)).with_message(message.into());
        let _ = self.peer.notify_progress(param).await;
    }
}

/// Notes progress when a sink is present.
pub async fn note(progress: Option<&Progress>, message: impl Into<String>) {
    if let Some(progress) = progress {
        progress.note(message).await;
    }
}
