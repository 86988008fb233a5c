//! The server side of one script worker: spawn, hello, run, answer requests.
//!
//! The session reads the worker's lines and answers its requests: guard
//! calls go through the executor (same validation, mode, timeout and events
//! as direct calls), artifact writes go to the store. Deadline and
//! cancellation kill the worker's process group; so does dropping the session.

use std::process::Stdio;

use base64::Engine as _;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::artifacts::ArtifactStore;
use crate::error::GuardError;
use crate::events::{Events, Origin};
use crate::executor::sandbox::{Rlimits, confine, release_group, track_group};
use crate::executor::{Admission, CallRequest, Executor, Status};
use crate::limits::DEFAULT_MAX_ARTIFACT_BYTES;
use crate::script::protocol::{FromWorker, Layers, RunOutcome, ToWorker};
use crate::worker::WORKER_ARG;

/// Longest line the server reads from a script worker: 64 MiB (a write of
/// a 1 MiB artifact as JSON-escaped text fits many times over).
const MAX_WORKER_LINE: u64 = 64 * 1024 * 1024;

/// How long a worker whose stdin was closed gets to exit before its group
/// is killed: 200 ms (it normally exits within a millisecond).
const WORKER_EXIT_GRACE: std::time::Duration = std::time::Duration::from_millis(200);

/// One guard call made by a script, for function_calls.json.
#[derive(Debug, Clone, serde::Serialize)]
pub struct CallRecord {
    pub function: String,
    pub status: &'static str,
    pub error_type: Option<String>,
    pub duration_ms: f64,
    pub execution: &'static str,
}

/// How a `pure_calls` line starts (serde writes the tag first).
const PURE_CALLS_PREFIX: &[u8] = br#"{"type":"pure_calls","#;

/// How a `guard_call` line starts.
const GUARD_CALL_PREFIX: &[u8] = br#"{"type":"guard_call","#;

/// The body of a `guard_call` line.
#[derive(serde::Deserialize)]
struct GuardCallLine {
    guard: String,
    arguments: Value,
}

/// The body of a `pure_calls` line.
#[derive(serde::Deserialize)]
struct PureCallsLine {
    calls: Vec<crate::script::protocol::PureCall>,
}

/// Guard calls a run may make.
#[derive(Debug, Clone, Copy)]
pub struct Budget {
    pub calls_left: u64,
    /// Whether inline pure calls count too (coding tasks).
    pub count_pure: bool,
}

/// How a run ended, from the server's side.
#[derive(Debug)]
pub enum RunEnd {
    Finished(RunOutcome),
    TimedOut,
    Cancelled,
    Crashed(String),
}

pub struct Session {
    child: Child,
    pgid: u32,
    /// How the worker process ended, once it has been reaped.
    pub exit_status: Option<String>,
    /// The worker's stderr; read to explain a crash.
    log_path: std::path::PathBuf,
    memory_limit: u64,
    /// Closed (dropped) by [`Session::finish`] so the worker sees EOF.
    stdin: Option<ChildStdin>,
    stdout: BufReader<tokio::io::Take<ChildStdout>>,
    pub layers: Layers,
    pub calls: Vec<CallRecord>,
}

impl Drop for Session {
    fn drop(&mut self) {
        release_group(self.pgid);
    }
}

/// What a session needs from the server.
pub struct Context<'a> {
    pub executor: &'a Executor,
    pub store: &'a ArtifactStore,
    pub events: &'a Events,
    pub origin: &'a Origin,
    pub task_id: &'a str,
    pub cancel: &'a CancellationToken,
    pub progress: Option<&'a super::progress::Progress>,
}

impl Session {
    /// Starts a script worker and waits for its hello.
    pub(crate) async fn start(
        exe: &std::path::Path,
        log_path: &std::path::Path,
        rlimits: Rlimits,
        deadline: Instant,
    ) -> Result<Self, String> {
        let log =
            std::fs::File::create(log_path).map_err(|e| format!("cannot create the worker log: {e}"))?;
        let mut command = Command::new(exe);
        command
            .arg(WORKER_ARG)
            .arg(crate::script::SCRIPT_WORKER)
            .env_clear()
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(log))
            .kill_on_drop(true);
        confine(&mut command, rlimits);
        let mut child = command
            .spawn()
            .map_err(|e| format!("cannot start a script worker: {e}"))?;
        let pgid = child.id().unwrap_or_default();
        track_group(pgid);
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            release_group(pgid);
            return Err("script worker has no pipes".into());
        };
        let mut session = Session {
            child,
            pgid,
            stdin: Some(stdin),
            exit_status: None,
            log_path: log_path.to_path_buf(),
            memory_limit: rlimits.memory,
            stdout: BufReader::new(stdout.take(u64::MAX)),
            layers: Layers::default(),
            calls: Vec::new(),
        };
        match tokio::time::timeout_at(deadline, session.read()).await {
            Ok(Ok(FromWorker::Hello { layers })) => session.layers = layers,
            Ok(Ok(other)) => return Err(format!("script worker said {other:?} instead of hello")),
            Ok(Err(e)) => return Err(e),
            Err(_) => return Err("script worker did not start before the deadline".into()),
        }
        Ok(session)
    }

    pub fn pid(&self) -> u32 {
        self.pgid
    }

    async fn read(&mut self) -> Result<FromWorker, String> {
        self.stdout.get_mut().set_limit(MAX_WORKER_LINE + 1);
        let mut line = Vec::new();
        let read = self
            .stdout
            .read_until(b'\n', &mut line)
            .await
            .map_err(|e| e.to_string())?;
        if read == 0 {
            return Err("script worker closed its pipe".into());
        }
        if line.len() as u64 > MAX_WORKER_LINE {
            return Err("script worker sent a line over 64 MiB".into());
        }
        // Batches of inline calls are most of the traffic; an internally
        // tagged enum would buffer each into a generic tree first, so they
        // are decoded straight into their own shape.
        let unreadable = |e: serde_json::Error| format!("unreadable message from script worker: {e}");
        if line.starts_with(PURE_CALLS_PREFIX) {
            let batch: PureCallsLine = serde_json::from_slice(&line).map_err(unreadable)?;
            return Ok(FromWorker::PureCalls { calls: batch.calls });
        }
        if line.starts_with(GUARD_CALL_PREFIX) {
            let call: GuardCallLine = serde_json::from_slice(&line).map_err(unreadable)?;
            return Ok(FromWorker::GuardCall {
                guard: call.guard,
                arguments: call.arguments,
            });
        }
        serde_json::from_slice(&line).map_err(|e| format!("unreadable message from script worker: {e}"))
    }

    async fn send(&mut self, message: &ToWorker) -> Result<(), String> {
        let mut line = serde_json::to_vec(message).map_err(|e| e.to_string())?;
        line.push(b'\n');
        let Some(stdin) = self.stdin.as_mut() else {
            return Err("script worker pipe is closed".into());
        };
        stdin
            .write_all(&line)
            .await
            .map_err(|e| format!("script worker pipe: {e}"))
    }

    /// Runs `code` and serves the worker's requests until it is done, the
    /// deadline passes or the caller cancels.
    pub async fn run(&mut self, ctx: &Context<'_>, code: &str, deadline: Instant, budget: Budget) -> RunEnd {
        let deadline_ms = deadline.saturating_duration_since(Instant::now()).as_millis() as u64;
        let cancel = ctx.cancel.clone();
        let served = async {
            self.send(&ToWorker::Run {
                code: code.to_string(),
                deadline_ms,
                calls_left: budget.calls_left,
                count_pure: budget.count_pure,
            })
            .await?;
            loop {
                match self.read().await? {
                    FromWorker::Done { outcome } => return Ok(outcome),
                    FromWorker::Hello { .. } => {}
                    request => self.answer(ctx, request, deadline).await?,
                }
            }
        };
        // The worker stops itself at `deadline` with a classified timeout;
        // the server kills it if it has not answered shortly after.
        let hard_deadline = deadline + crate::limits::SCRIPT_KILL_GRACE;
        let end = tokio::select! {
            outcome = tokio::time::timeout_at(hard_deadline, served) => match outcome {
                Ok(Ok(outcome)) => RunEnd::Finished(outcome),
                Ok(Err(reason)) => RunEnd::Crashed(reason),
                Err(_) => RunEnd::TimedOut,
            },
            _ = cancel.cancelled() => RunEnd::Cancelled,
        };
        if !matches!(end, RunEnd::Finished(_)) {
            release_group(self.pgid);
            let status = self.child.wait().await.ok();
            self.exit_status = Some(describe(status));
            if let RunEnd::Crashed(reason) = end {
                let log = std::fs::read_to_string(&self.log_path).unwrap_or_default();
                if log.contains("memory allocation of") {
                    return RunEnd::Crashed(format!(
                        "out of memory: the script worker hit its {} MiB address-space limit (worker {})",
                        self.memory_limit / (1024 * 1024),
                        describe(status)
                    ));
                }
                return RunEnd::Crashed(format!("{reason} (worker {})", describe(status)));
            }
        }
        end
    }

    async fn answer(
        &mut self,
        ctx: &Context<'_>,
        request: FromWorker,
        deadline: Instant,
    ) -> Result<(), String> {
        let reply = match request {
            FromWorker::GuardCall { guard, arguments } => {
                let started = std::time::Instant::now();
                let mode = ctx
                    .executor
                    .registry()
                    .get(&guard)
                    .map(|g| g.mode().as_str())
                    .unwrap_or("unknown");
                let result = ctx
                    .executor
                    .call(CallRequest {
                        guard: &guard,
                        arguments,
                        origin: ctx.origin,
                        cancel: ctx.cancel.clone(),
                        admission: Admission::InTask,
                        deadline_cap: Some(deadline),
                        events: Some(ctx.events),
                    })
                    .await;
                self.calls.push(CallRecord {
                    function: guard,
                    status: result
                        .as_ref()
                        .map(|_| "success")
                        .unwrap_or_else(|f| f.status.as_str()),
                    error_type: result.as_ref().err().map(|f| f.error.code.clone()),
                    duration_ms: started.elapsed().as_secs_f64() * 1000.0,
                    execution: mode,
                });
                let last = self
                    .calls
                    .last()
                    .map(|c| format!("{} {}", c.function, c.status))
                    .unwrap_or_default();
                super::progress::note(ctx.progress, format!("guard call {last}")).await;
                ToWorker::GuardReply {
                    result: result.map_err(|f| f.error),
                }
            }
            FromWorker::PureCalls { calls } => {
                self.record_pure_calls(ctx, calls);
                return Ok(());
            }
            FromWorker::WriteArtifact {
                filename,
                content,
                encoding,
            } => {
                let result = write_artifact(ctx, &filename, &content, &encoding);
                super::progress::note(ctx.progress, format!("artifact {filename}")).await;
                ToWorker::ArtifactReply { result }
            }
            FromWorker::ReadArtifact { filename } => ToWorker::ArtifactReply {
                result: ctx
                    .store
                    .read_output(ctx.task_id, &filename, DEFAULT_MAX_ARTIFACT_BYTES)
                    .map(Value::String),
            },
            FromWorker::Hello { .. } | FromWorker::Done { .. } => return Ok(()),
        };
        self.send(&reply).await
    }

    /// Records a batch of inline pure calls: events (one write for the
    /// batch), spans when tracing, and function_calls.json entries.
    fn record_pure_calls(&mut self, ctx: &Context<'_>, calls: Vec<crate::script::protocol::PureCall>) {
        let mut records = Vec::with_capacity(calls.len() * 2);
        let tracing = crate::telemetry::recording();
        for call in calls {
            let call_id = crate::events::next_id("call");
            let status = if call.ok { Status::Success } else { Status::Failed };
            let start = std::time::UNIX_EPOCH + std::time::Duration::from_nanos(call.started_unix_ns);
            let end = start + std::time::Duration::from_micros(call.duration_us);
            let duration_ms = call.duration_us as f64 / 1000.0;
            // Guard names are validated identifiers and call ids are ours,
            // so only the error code needs JSON escaping.
            let function = Value::from(call.function.as_str()).to_string();
            let error_type = serde_json::to_string(&call.error_type).unwrap_or_else(|_| "null".into());
            records.push((
                start,
                "function_call_started",
                format!(r#""function":{function},"call_id":"{call_id}","execution_mode":"pure_inline""#),
            ));
            records.push((
                end,
                "function_call_finished",
                format!(
                    r#""function":{function},"call_id":"{call_id}","status":"{}","error_type":{error_type},"duration_ms":{duration_ms}"#,
                    status.as_str()
                ),
            ));
            if tracing {
                crate::telemetry::record_finished(
                    "function.call",
                    &ctx.origin.trace,
                    start,
                    end,
                    vec![
                        opentelemetry::KeyValue::new("warden.function", call.function.clone()),
                        opentelemetry::KeyValue::new("warden.execution_mode", "pure_inline"),
                    ],
                    call.error_type.as_deref(),
                );
            }
            self.calls.push(CallRecord {
                function: call.function,
                status: status.as_str(),
                error_type: call.error_type,
                duration_ms,
                execution: "pure_inline",
            });
        }
        ctx.events.emit_many(ctx.origin, &records);
    }

    /// Closes stdin and reaps the worker (after a finished run).
    /// What the worker side produced so far, for the task result.
    pub fn take_facts(&mut self) -> super::WorkerFacts {
        super::WorkerFacts {
            layers: self.layers.clone(),
            calls: std::mem::take(&mut self.calls),
            pid: self.pgid,
            exit_status: None,
        }
    }

    /// Returns how the worker ended (already known after an abnormal run).
    pub async fn finish(mut self) -> String {
        if let Some(known) = self.exit_status.take() {
            release_group(self.pgid);
            return known;
        }
        drop(self.stdin.take());
        let status = tokio::time::timeout(WORKER_EXIT_GRACE, self.child.wait()).await;
        release_group(self.pgid);
        let status = match status {
            Ok(Ok(status)) => Some(status),
            _ => self.child.wait().await.ok(),
        };
        describe(status)
    }
}

fn write_artifact(
    ctx: &Context<'_>,
    filename: &str,
    content: &str,
    encoding: &str,
) -> Result<Value, GuardError> {
    let bytes = match encoding {
        "utf-8" | "utf8" | "text" => content.as_bytes().to_vec(),
        "base64" => base64::engine::general_purpose::STANDARD
            .decode(content.trim())
            .map_err(|e| {
                GuardError::invalid_input("encoding", format!("content is not valid base64: {e}"))
            })?,
        other => {
            return Err(GuardError::invalid_input(
                "encoding",
                format!("expected 'utf-8' or 'base64', got '{other}'"),
            ));
        }
    };
    let size = ctx
        .store
        .write_output(ctx.task_id, filename, &bytes, DEFAULT_MAX_ARTIFACT_BYTES)?;
    ctx.events.emit(
        ctx.origin,
        "artifact_written",
        json!({"filename": filename, "size_bytes": size}),
    );
    Ok(json!({"filename": filename, "path": format!("outputs/{filename}"), "size_bytes": size}))
}

fn describe(status: Option<std::process::ExitStatus>) -> String {
    use std::os::unix::process::ExitStatusExt;
    match status {
        Some(s) => match s.signal() {
            Some(signal) => nix::sys::signal::Signal::try_from(signal)
                .map(|s| format!("killed by {}", s.as_str()))
                .unwrap_or_else(|_| format!("killed by signal {signal}")),
            None => format!("exited with {s}"),
        },
        None => "vanished".into(),
    }
}
