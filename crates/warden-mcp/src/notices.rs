//! A direct guard call's progress and log messages ([`warden_core::notify`]),
//! forwarded to the MCP client while the call runs.
//!
//! The server puts a bounded queue's sender in scope around the executor
//! call and drains the queue into notifications on the request's task: no
//! task of its own to leak, and every message the guard sent before it
//! returned goes out before the result, which is when a client still
//! listens for that request's progress. Log messages pass the session's
//! `logging/setLevel` threshold (default `info`).
//!
//! MCP logging (`notifications/message`, `logging/setLevel`) is deprecated
//! for the 2026-07-28 revision (SEP-2577) and rmcp marks its types so;
//! 2025-11-25 clients still use it, hence the allowance here, in one place.
#![allow(deprecated)]

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};

use rmcp::RoleServer;
use rmcp::model::{
    LoggingLevel, LoggingMessageNotificationParam, Notification, ProgressNotificationParam,
    ServerNotification,
};
use rmcp::service::RequestContext;

use crate::limits::MAX_QUEUED_NOTICES;
use warden_core::notify::{Level, Notice, Sink};

/// One session's `logging/setLevel` threshold.
///
/// rmcp serves each session with its own clone of the handler (the HTTP
/// factory clones it per session; stdio has one), so a clone starts a new
/// session at the default rather than sharing another client's setting.
#[derive(Debug)]
pub(crate) struct SessionLevel(Arc<AtomicU8>);

impl Default for SessionLevel {
    fn default() -> Self {
        Self(Arc::new(AtomicU8::new(rank(LoggingLevel::Info))))
    }
}

impl Clone for SessionLevel {
    fn clone(&self) -> Self {
        Self::default()
    }
}

impl SessionLevel {
    /// A stateless (2026-07-28) request's threshold: the level its `_meta`
    /// sets (`io.modelcontextprotocol/logLevel`), or no log messages at
    /// all when it sets none (SEP-2575: a request that did not ask for
    /// logs gets none).
    pub(crate) fn of_request(meta: &rmcp::model::RequestMetaObject) -> Self {
        let rank = meta.log_level().map(rank).unwrap_or(SILENT);
        Self(Arc::new(AtomicU8::new(rank)))
    }

    /// Sets the threshold (`logging/setLevel`).
    pub(crate) fn set(&self, level: LoggingLevel) {
        self.0.store(rank(level), Ordering::Relaxed);
    }

    fn allows(&self, level: Level) -> bool {
        rank(mcp_level(level)) >= self.0.load(Ordering::Relaxed)
    }
}

/// A notice sink and the bounded queue it fills. The sink never blocks
/// the guard: a full queue drops the message.
pub(crate) fn queue() -> (Sink, tokio::sync::mpsc::Receiver<Notice>) {
    let (sender, queue) = tokio::sync::mpsc::channel(MAX_QUEUED_NOTICES);
    let sink: Sink = Arc::new(move |notice| {
        let _ = sender.try_send(notice);
    });
    (sink, queue)
}

/// Runs `call` (an executor call) with a notice sink in scope, sending
/// its notices to the client as they arrive; `logger` names the guard.
pub(crate) async fn forwarding<F: Future>(
    context: &RequestContext<RoleServer>,
    logger: &str,
    level: &SessionLevel,
    call: F,
) -> F::Output {
    let (sink, mut queue) = queue();
    let progress_token = context.meta.get_progress_token();
    let send = |notice| {
        let notification = notification(notice, progress_token.as_ref(), logger, level);
        async move {
            // Best effort: a client that went away must not fail the call.
            if let Some(notification) = notification {
                let _ = context.peer.send_notification(notification).await;
            }
        }
    };
    let call = warden_core::notify::scope(sink, call);
    tokio::pin!(call);
    let output = loop {
        tokio::select! {
            biased;
            output = &mut call => break output,
            Some(notice) = queue.recv() => send(notice).await,
        }
    };
    while let Ok(notice) = queue.try_recv() {
        send(notice).await;
    }
    output
}

/// The MCP notification for one notice, if the client takes it: progress
/// only for a request that sent a progress token, log messages at or above
/// the session's threshold.
pub(crate) fn notification(
    notice: Notice,
    progress_token: Option<&rmcp::model::ProgressToken>,
    logger: &str,
    level: &SessionLevel,
) -> Option<ServerNotification> {
    match notice {
        Notice::Progress {
            progress,
            total,
            message,
        } => {
            let mut param = ProgressNotificationParam::new(progress_token?.clone(), progress);
            param.total = total;
            param.message = message;
            Some(ServerNotification::ProgressNotification(Notification::new(param)))
        }
        Notice::Log { level: at, message } if level.allows(at) => {
            let param =
                LoggingMessageNotificationParam::new(mcp_level(at), message.into()).with_logger(logger);
            Some(ServerNotification::LoggingMessageNotification(Notification::new(
                param,
            )))
        }
        Notice::Log { .. } => None,
    }
}

fn mcp_level(level: Level) -> LoggingLevel {
    match level {
        Level::Debug => LoggingLevel::Debug,
        Level::Info => LoggingLevel::Info,
        Level::Notice => LoggingLevel::Notice,
        Level::Warning => LoggingLevel::Warning,
        Level::Error => LoggingLevel::Error,
    }
}

/// Above every level: nothing passes.
const SILENT: u8 = 8;

/// MCP's levels from 0 (debug) to 7 (emergency).
fn rank(level: LoggingLevel) -> u8 {
    match level {
        LoggingLevel::Debug => 0,
        LoggingLevel::Info => 1,
        LoggingLevel::Notice => 2,
        LoggingLevel::Warning => 3,
        LoggingLevel::Error => 4,
        LoggingLevel::Critical => 5,
        LoggingLevel::Alert => 6,
        LoggingLevel::Emergency => 7,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_clone_starts_a_new_session_at_info() {
        // One session's setLevel never changes another's threshold.
        let session = SessionLevel::default();
        assert!(!session.allows(Level::Debug) && session.allows(Level::Info));
        session.set(LoggingLevel::Error);
        assert!(!session.allows(Level::Warning) && session.allows(Level::Error));
        let other = session.clone();
        assert!(other.allows(Level::Info), "a new session starts at info");
        session.set(LoggingLevel::Debug);
        assert!(session.allows(Level::Debug) && !other.allows(Level::Debug));
    }
}
