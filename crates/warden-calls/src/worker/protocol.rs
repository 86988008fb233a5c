//! The JSON-lines protocol between the server and a worker process.
//!
//! One JSON object per line on the worker's stdin (requests) and on its
//! protocol descriptor (responses). Both sides read lines with a byte cap, so
//! a runaway peer cannot make the other allocate without bound.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use warden_core::error::GuardError;

/// What a worker receives when the server dies without killing it; the
/// guard worker turns it into a SIGKILL of its process group
/// ([`super::kill_group_on_parent_death`]).
pub(crate) use warden_sandbox::process::PARENT_DEATH_SIGNAL;

/// The hidden first argument that turns the application binary into a worker.
pub const WORKER_ARG: &str = "__warden-worker";

/// Prefix of the guard worker's second argument, `--max-request=<bytes>`:
/// the largest request line it must read (the server's argument cap plus
/// the envelope). Older servers do not send it; the worker then assumes
/// the default cap.
pub const MAX_REQUEST_ARG: &str = "--max-request=";

/// What the server asks of a guard worker.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Request {
    /// Run one guard and answer with [`Response::Result`] or [`Response::Error`].
    Call {
        guard: String,
        arguments: Value,
        /// W3C trace context of the calling span.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        traceparent: Option<String>,
    },
    /// Answer [`Response::Pong`] without calling anything (used by preflight).
    Ping,
}

/// A line a guard worker may write before its [`Response`]: a progress
/// or log message from the running guard ([`warden_core::notify`]), which the
/// server forwards to the caller while the call runs (or ignores when no
/// one asked).
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Interim {
    Notice { notice: warden_core::notify::Notice },
}

/// What a guard worker answers.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Response {
    Result {
        value: Value,
        /// Spans the worker recorded (portable JSON), when traced.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        spans: Vec<Value>,
    },
    Error {
        error: GuardError,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        spans: Vec<Value>,
    },
    Pong {
        pid: u32,
        guards: usize,
    },
}
