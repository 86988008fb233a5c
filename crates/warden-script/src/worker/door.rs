//! The script worker's side of its pipe: the only door out of the sandbox.
//!
//! Requests block until the server replies. Inline pure calls are buffered
//! and flushed before any other message, so the server's event log keeps
//! the order in which things happened.

use std::fs::File;
use std::io::{BufRead, BufReader, Read, Stdin, Write};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use serde_json::Value;

use crate::limits::DEFAULT_CALLS_RECORDED;
use crate::protocol::{FromWorker, PURE_BATCH_PREFIX, ToWorker};
use warden_core::error::GuardError;

/// Pure calls buffered before a flush: 1,024.
const PURE_BATCH: usize = 1024;

/// Longest reply line the worker reads: 16 MiB (artifact reads are 1 MiB).
const MAX_REPLY_LINE: u64 = 16 * 1024 * 1024;

const GUARD_REPLY_PREFIX: &[u8] = br#"{"type":"guard_reply","#;
const ARTIFACT_REPLY_PREFIX: &[u8] = br#"{"type":"artifact_reply","#;

/// Now, on both clocks.
fn wall_clock_now() -> (Instant, u64) {
    let unix_ns = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    (Instant::now(), unix_ns)
}

/// The body of a reply line.
#[derive(serde::Deserialize)]
struct ReplyLine {
    result: Result<Value, GuardError>,
}

pub struct Door {
    input: BufReader<Stdin>,
    /// The protocol descriptor; `None` until [`Door::connect`] (a worker
    /// built in the zygote is connected in its forked child).
    output: Option<File>,
    /// The pending [`crate::protocol::PureBatch`] line, open at its end.
    pure_line: String,
    pure_count: usize,
    /// A monotonic instant and the Unix time (ns) at that instant, so that
    /// a call's wall-clock start costs no clock read of its own.
    clock_base: (Instant, u64),
    /// Guard calls through the door still allowed in this run (a
    /// `map_call` counts once).
    pub calls_left: u64,
    /// Inline calls (pure guards, script-only functions) still allowed in
    /// this run; `None`: not budgeted (operations and the deadline bound
    /// them).
    pub inline_left: Option<u64>,
    /// Door calls and inline calls this run made, for its outcome.
    pub door_calls: u64,
    pub inline_calls: u64,
    /// The current run's deadline. Past it, requests are refused without
    /// being sent: a script that spends its time in door requests (an
    /// artifact flood) runs few Rhai operations, so the engine's periodic
    /// deadline check alone would let it keep the server busy until the
    /// kill; refused requests return at once and that check comes soon.
    pub deadline: Option<Instant>,
    /// Inline calls of this session that still get receipt hashes: the
    /// first [`DEFAULT_CALLS_RECORDED`], the ones function_calls.json lists
    /// one by one. Hashing costs ~4 µs against ~4 µs for the call itself,
    /// so a loop of 100,000 inline calls would pay double for hashes no
    /// file keeps; later calls are digested by function and status only.
    receipt_hashes_left: usize,
    /// Guards this run's caller may not call (keys; the values are the
    /// policy's refusals, which the worker never shows): for this run they
    /// do not exist — called, listed or suggested, they answer as names
    /// that were never registered.
    pub denied: std::collections::BTreeMap<String, String>,
}

impl Default for Door {
    fn default() -> Self {
        Self::new()
    }
}

impl Door {
    /// A door not yet connected to its pipe (see [`Door::connect`]).
    pub fn new() -> Self {
        Self {
            input: BufReader::new(std::io::stdin()),
            output: None,
            pure_line: String::new(),
            pure_count: 0,
            clock_base: wall_clock_now(),
            calls_left: 0,
            inline_left: None,
            door_calls: 0,
            inline_calls: 0,
            deadline: None,
            receipt_hashes_left: DEFAULT_CALLS_RECORDED,
            denied: Default::default(),
        }
    }

    /// Connects the door to its pipe: `output` is the protocol
    /// descriptor, and requests are answered on stdin.
    pub fn connect(&mut self, output: File) {
        self.output = Some(output);
        self.reset_clock();
    }

    /// Writes `line` to the protocol descriptor and flushes it.
    fn write_line(output: &mut Option<File>, line: &[u8]) -> std::io::Result<()> {
        let Some(output) = output.as_mut() else {
            return Err(std::io::Error::new(
                std::io::ErrorKind::NotConnected,
                "the door is not connected",
            ));
        };
        output.write_all(line)?;
        output.flush()
    }

    /// Sends one message (flushing buffered pure calls first).
    pub fn send(&mut self, message: &FromWorker) -> std::io::Result<()> {
        self.flush_pure()?;
        let mut line = serde_json::to_vec(message)?;
        line.push(b'\n');
        Self::write_line(&mut self.output, &line)
    }

    /// Spends one door call, or says the budget is spent.
    pub fn spend_door_call(&mut self) -> Result<(), GuardError> {
        if self.calls_left == 0 {
            // No call is left, map_call's included: the only way on is to finish.
            return Err(budget_exhausted(
                "this task used all its guard calls through the door, and no other can be made (a map_call \
is one too): finish with final_answer from the results you have",
            ));
        }
        self.calls_left -= 1;
        self.door_calls += 1;
        Ok(())
    }

    /// Spends one inline call, or says the budget is spent.
    pub fn spend_inline_call(&mut self) -> Result<(), GuardError> {
        if let Some(left) = self.inline_left.as_mut() {
            if *left == 0 {
                return Err(budget_exhausted(
                    "this task used all its inline calls (pure guards and script-only functions); \
do more per call, or finish with final_answer",
                ));
            }
            *left -= 1;
        }
        self.inline_calls += 1;
        Ok(())
    }

    /// Whether the next inline call gets receipt hashes (see
    /// `receipt_hashes_left`); counts it.
    pub fn hash_next_call(&mut self) -> bool {
        let hash = self.receipt_hashes_left > 0;
        self.receipt_hashes_left = self.receipt_hashes_left.saturating_sub(1);
        hash
    }

    /// Re-reads the wall clock (once per run, so a long-lived worker's
    /// timestamps follow clock adjustments).
    pub fn reset_clock(&mut self) {
        self.clock_base = wall_clock_now();
    }

    pub fn flush_pure(&mut self) -> std::io::Result<()> {
        if self.pure_count == 0 {
            return Ok(());
        }
        self.pure_line.push_str("]}\n");
        let written = Self::write_line(&mut self.output, self.pure_line.as_bytes());
        self.pure_line.clear();
        self.pure_count = 0;
        written
    }

    /// Records one inline pure call. Written by hand into the pending
    /// batch line: serde's generic writer was a sixth of a script's cost
    /// in a loop of cheap calls. `function` is a registered guard name,
    /// which the registry restricts to identifier characters.
    /// `hashes` are the call's receipt hashes (arguments, output), absent
    /// for a script-only function.
    pub fn record_pure(
        &mut self,
        function: &str,
        started: Instant,
        ended: Instant,
        error: Option<&str>,
        hashes: (Option<&str>, Option<&str>),
    ) {
        let line = &mut self.pure_line;
        if self.pure_count == 0 {
            line.push_str(PURE_BATCH_PREFIX);
        } else {
            line.push(',');
        }
        line.push_str("[\"");
        line.push_str(function);
        line.push_str(if error.is_none() { "\",true," } else { "\",false," });
        match error {
            None => line.push_str("null"),
            Some(code) => line.push_str(&Value::from(code).to_string()),
        }
        let mut number = itoa::Buffer::new();
        line.push(',');
        line.push_str(number.format(ended.saturating_duration_since(started).as_nanos() as u64));
        line.push(',');
        let (base, base_unix_ns) = self.clock_base;
        let offset = started.saturating_duration_since(base).as_nanos() as u64;
        line.push_str(number.format(base_unix_ns + offset));
        // Hex digests: never need escaping.
        for hash in [hashes.0, hashes.1] {
            match hash {
                Some(hash) => {
                    line.push_str(",\"");
                    line.push_str(hash);
                    line.push('"');
                }
                None => line.push_str(",null"),
            }
        }
        line.push(']');
        self.pure_count += 1;
        if self.pure_count >= PURE_BATCH {
            let _ = self.flush_pure();
        }
    }

    /// Reads the next message from the server; `None` at end of input.
    pub fn receive(&mut self) -> std::io::Result<Option<ToWorker>> {
        let mut line = Vec::new();
        if self.input.buffer().is_empty() {
            warden_sandbox::pipe::spin_until_readable(self.input.get_ref(), crate::limits::DOOR_SPIN);
        }
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
        if self.deadline.is_some_and(|due| Instant::now() >= due) {
            return Err(GuardError::new(
                warden_core::error::codes::TIMED_OUT,
                "the task deadline has passed; the script is being stopped",
            ));
        }
        let broken = |e: std::io::Error| {
            GuardError::new(
                warden_core::error::codes::DOOR_CLOSED,
                format!("server pipe failed: {e}"),
            )
        };
        self.send(message).map_err(broken)?;
        match self.receive().map_err(broken)? {
            Some(ToWorker::GuardReply { result })
            | Some(ToWorker::ArtifactReply { result })
            | Some(ToWorker::MapReply { result }) => result,
            Some(ToWorker::Run { .. }) => Err(GuardError::new(
                warden_core::error::codes::DOOR_PROTOCOL,
                "unexpected run message",
            )),
            None => Err(GuardError::new(
                warden_core::error::codes::DOOR_CLOSED,
                "server closed the pipe",
            )),
        }
    }
}

fn budget_exhausted(message: &str) -> GuardError {
    GuardError::new(warden_core::error::codes::BUDGET_EXHAUSTED, message)
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Seek};
    use std::time::Duration;

    use super::*;
    use crate::protocol::PureBatch;

    #[test]
    fn a_pure_batch_line_decodes_as_the_server_reads_it() {
        // The worker's hand-written batch and the server's PureBatch agree field by field.
        let mut file = tempfile::tempfile().expect("temp file");
        let mut door = Door::new();
        door.connect(file.try_clone().expect("clone"));
        let started = Instant::now();
        door.record_pure(
            "add_pure",
            started,
            started + Duration::from_nanos(1_500),
            None,
            (Some("sha256:ab"), Some("sha256:cd")),
        );
        door.record_pure("add_pure", started, started, Some("bad \"code\""), (None, None));
        door.flush_pure().expect("flush");
        let mut line = String::new();
        file.rewind().expect("rewind");
        file.read_to_string(&mut line).expect("read");
        assert!(
            line.starts_with(PURE_BATCH_PREFIX) && line.ends_with("]}\n"),
            "{line}"
        );
        let batch: PureBatch<'_> = serde_json::from_str(&line).expect("decodes");
        assert_eq!(batch.calls.len(), 2);
        assert_eq!(batch.calls[0].function, "add_pure");
        assert!(batch.calls[0].ok);
        assert_eq!(batch.calls[0].duration_ns, 1_500);
        assert!(batch.calls[0].started_unix_ns > 1_700_000_000_000_000_000);
        assert!(!batch.calls[1].ok);
        assert_eq!(batch.calls[1].error_type.as_deref(), Some("bad \"code\""));
    }
}
