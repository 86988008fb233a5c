//! The script worker's side of its pipe: the only door out of the sandbox.
//!
//! Requests block until the server replies. Inline pure calls are buffered
//! and flushed before any other message, so the server's event log keeps
//! the order in which things happened.

use std::fmt::Write as _;
use std::fs::File;
use std::io::{BufRead, BufReader, Read, Stdin, Write};

use serde_json::Value;

use super::protocol::{FromWorker, PureCall, ToWorker};
use crate::error::GuardError;

/// Pure calls buffered before a flush: 1,024.
const PURE_BATCH: usize = 1024;

/// Longest reply line the worker reads: 16 MiB (artifact reads are 1 MiB).
const MAX_REPLY_LINE: u64 = 16 * 1024 * 1024;

const GUARD_REPLY_PREFIX: &[u8] = br#"{"type":"guard_reply","#;
const ARTIFACT_REPLY_PREFIX: &[u8] = br#"{"type":"artifact_reply","#;

/// The body of a reply line.
#[derive(serde::Deserialize)]
struct ReplyLine {
    result: Result<Value, GuardError>,
}

pub struct Door {
    input: BufReader<Stdin>,
    output: File,
    pure: Vec<PureCall>,
    /// Guard calls still allowed in this run.
    pub calls_left: u64,
    /// Whether inline pure calls count against `calls_left`.
    pub count_pure: bool,
}

impl Door {
    pub fn new(output: File) -> Self {
        Self {
            input: BufReader::new(std::io::stdin()),
            output,
            pure: Vec::new(),
            calls_left: 0,
            count_pure: false,
        }
    }

    /// Sends one message (flushing buffered pure calls first).
    pub fn send(&mut self, message: &FromWorker) -> std::io::Result<()> {
        if !self.pure.is_empty() && !matches!(message, FromWorker::PureCalls { .. }) {
            self.flush_pure()?;
        }
        let mut line = serde_json::to_vec(message)?;
        line.push(b'\n');
        self.output.write_all(&line)?;
        self.output.flush()
    }

    pub fn flush_pure(&mut self) -> std::io::Result<()> {
        if self.pure.is_empty() {
            return Ok(());
        }
        let calls = std::mem::take(&mut self.pure);
        // Written by hand: this line carries every inline call, and serde's
        // generic map writer (escaping every key) was a sixth of a script's
        // cost in a loop of cheap calls. The shape is exactly what
        // `FromWorker::PureCalls` serializes to.
        let mut line = String::with_capacity(64 + calls.len() * 110);
        line.push_str(r#"{"type":"pure_calls","calls":["#);
        for (i, call) in calls.iter().enumerate() {
            if i > 0 {
                line.push(',');
            }
            let function = serde_json::Value::from(call.function.as_str()).to_string();
            let error_type = match &call.error_type {
                Some(code) => serde_json::Value::from(code.as_str()).to_string(),
                None => "null".into(),
            };
            let _ = write!(
                line,
                r#"{{"function":{function},"ok":{},"error_type":{error_type},"duration_us":{},"started_unix_ns":{}}}"#,
                call.ok, call.duration_us, call.started_unix_ns
            );
        }
        line.push_str("]}\n");
        self.output.write_all(line.as_bytes())?;
        self.output.flush()
    }

    pub fn record_pure(&mut self, call: PureCall) {
        self.pure.push(call);
        if self.pure.len() >= PURE_BATCH {
            let _ = self.flush_pure();
        }
    }

    /// Reads the next message from the server; `None` at end of input.
    pub fn receive(&mut self) -> std::io::Result<Option<ToWorker>> {
        let mut line = Vec::new();
        let read = (&mut self.input)
            .take(MAX_REPLY_LINE)
            .read_until(b'\n', &mut line)?;
        if read == 0 {
            return Ok(None);
        }
        // Replies are most of the traffic: decode them without the generic
        // buffering an internally tagged enum needs.
        for (prefix, artifact) in [(GUARD_REPLY_PREFIX, false), (ARTIFACT_REPLY_PREFIX, true)] {
            if line.starts_with(prefix) {
                let reply: ReplyLine = serde_json::from_slice(&line)?;
                return Ok(Some(if artifact {
                    ToWorker::ArtifactReply { result: reply.result }
                } else {
                    ToWorker::GuardReply { result: reply.result }
                }));
            }
        }
        Ok(Some(serde_json::from_slice(&line)?))
    }

    /// Sends a request and waits for its reply.
    pub fn request(&mut self, message: &FromWorker) -> Result<Value, GuardError> {
        let broken = |e: std::io::Error| GuardError::new("door_closed", format!("server pipe failed: {e}"));
        self.send(message).map_err(broken)?;
        match self.receive().map_err(broken)? {
            Some(ToWorker::GuardReply { result }) | Some(ToWorker::ArtifactReply { result }) => result,
            Some(ToWorker::Run { .. }) => Err(GuardError::new("door_protocol", "unexpected run message")),
            None => Err(GuardError::new("door_closed", "server closed the pipe")),
        }
    }
}
