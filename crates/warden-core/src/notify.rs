//! Progress and log messages from inside a guard, for the client that
//! made the call.
//!
//! A guard stays a plain typed function: it calls [`progress`] or [`log`]
//! from its own thread and carries on. When the call came straight from an
//! MCP client, the server forwards each message while the call runs, as
//! `notifications/progress` (when the request carried a progressToken) and
//! `notifications/message` (filtered by the session's `logging/setLevel`).
//! That works in every mode: an `in_process` or `pure` guard hands the
//! message to the server's sink directly; an `isolated` worker writes it as
//! a protocol line before its answer. Anywhere else (a batch, a script, the
//! CLI, a test) the functions do nothing, so a guard never has to ask where
//! it runs. Messages are best effort: never an error, and dropped rather
//! than queued without bound when the client reads slower than the guard
//! writes (see `warden_mcp::limits::MAX_QUEUED_NOTICES`).
//!
//! ```
//! # use warden_core as warden; // the `warden` facade re-exports these
//! use warden::notify::{self, Level};
//!
//! fn long_check(rows: &[f64]) -> usize {
//!     let total = rows.len() as f64;
//!     for (i, _row) in rows.iter().enumerate() {
//!         notify::progress(i as f64, Some(total), None);
//!     }
//!     notify::log(Level::Info, "all rows checked");
//!     rows.len()
//! }
//! assert_eq!(long_check(&[1.0, 2.0]), 2); // outside a call: nothing is sent
//! ```

use std::cell::RefCell;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

/// The severity of a [`log`] message (MCP's levels, lowest first).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
// Exhaustive on purpose: every layer that serves a notice or runs a
// call must handle a new variant, so adding one is a breaking change.
pub enum Level {
    Debug,
    Info,
    Notice,
    Warning,
    Error,
}

/// One message from a running guard.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Notice {
    Progress {
        progress: f64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        total: Option<f64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        message: Option<String>,
    },
    Log {
        level: Level,
        message: String,
    },
}

/// Where a call's notices go. Called on the guard's thread: it must not
/// block (the server's sink only tries to queue).
pub type Sink = Arc<dyn Fn(Notice) + Send + Sync>;

thread_local! {
    /// The sink of the guard call running on this thread, if any.
    static SINK: RefCell<Option<Sink>> = const { RefCell::new(None) };
}

tokio::task_local! {
    /// The sink of the MCP request this task serves, set by the server
    /// around a direct guard call and read by the executor, which hands
    /// it to the guard's thread or worker.
    static CALL_SINK: Sink;
}

/// Reports how far the current guard call has got: `progress` out of
/// `total` (when known), with an optional message. Nothing happens
/// outside a direct MCP call or when the client asked for no progress.
pub fn progress(progress: f64, total: Option<f64>, message: Option<&str>) {
    send(Notice::Progress {
        progress,
        total,
        message: message.map(str::to_string),
    });
}

/// Sends a log message to the client of the current guard call (when its
/// session's level lets it through). Nothing happens outside a direct MCP
/// call. For the server's own records use events and `tracing` instead.
pub fn log(level: Level, message: impl Into<String>) {
    send(Notice::Log {
        level,
        message: message.into(),
    });
}

fn send(notice: Notice) {
    let sink = SINK.with(|s| s.borrow().clone());
    if let Some(sink) = sink {
        sink(notice);
    }
}

/// Runs `f` with `sink` as this thread's sink, restoring the previous
/// one afterwards (also when `f` panics).
pub fn with_sink<R>(sink: Option<Sink>, f: impl FnOnce() -> R) -> R {
    struct Restore(Option<Sink>);
    impl Drop for Restore {
        fn drop(&mut self) {
            let previous = self.0.take();
            SINK.with(|s| *s.borrow_mut() = previous);
        }
    }
    let previous = SINK.with(|s| s.replace(sink));
    let _restore = Restore(previous);
    f()
}

/// Runs `future` with `sink` as the sink of the guard calls it makes
/// through the executor.
pub async fn scope<F: std::future::Future>(sink: Sink, future: F) -> F::Output {
    CALL_SINK.scope(sink, future).await
}

/// The sink the current task's caller set with [`scope`], if any.
pub fn for_this_task() -> Option<Sink> {
    CALL_SINK.try_with(Clone::clone).ok()
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;

    #[test]
    fn messages_reach_the_sink_only_inside_with_sink() {
        // Outside a call nothing is sent; inside, messages arrive in order; the old sink comes back.
        let seen = Arc::new(Mutex::new(Vec::new()));
        let into = seen.clone();
        let sink: Sink = Arc::new(move |n| into.lock().expect("lock").push(n));
        log(Level::Info, "dropped");
        with_sink(Some(sink), || {
            progress(1.0, Some(2.0), None);
            log(Level::Warning, "kept");
        });
        log(Level::Info, "dropped too");
        let seen = seen.lock().expect("lock");
        assert_eq!(seen.len(), 2);
        assert_eq!(
            seen[1],
            Notice::Log {
                level: Level::Warning,
                message: "kept".into()
            }
        );
        assert_eq!(
            serde_json::to_value(&seen[0]).expect("json"),
            serde_json::json!({"kind": "progress", "progress": 1.0, "total": 2.0})
        );
    }
}
