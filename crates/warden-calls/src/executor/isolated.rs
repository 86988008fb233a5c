//! Running a guard in a fresh worker process (`isolated` mode).
//!
//! One process per call, forked by the worker zygote ([`warden_sandbox::zygote`]):
//! the application binary started once with the hidden worker argument,
//! confined by [`super::sandbox`], that forks a clean child for each call
//! (a fork costs a fraction of the `exec` it replaces). The request goes in on
//! stdin; the guard's progress and log lines, then one response line, come
//! back on stdout, each capped; the worker's stderr (and
//! any stray stdout, which the worker redirects) lands in a per-call
//! diagnostics log that is deleted when empty. Whatever happens — answer,
//! deadline, cancellation, a dropped future — the process group is killed
//! before the child is reaped, so nothing it started outlives the call.

use std::path::PathBuf;
use std::process::ExitStatus;

use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::net::unix::pipe;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::{Failure, Status};
use crate::artifacts::worker_log::WorkerLog;
use crate::worker::Request;
use crate::worker::Response;
use crate::worker::protocol::Interim;
use crate::worker::{MAX_REQUEST_ARG, WORKER_ARG};
use warden_core::error::{GuardError, codes};
use warden_sandbox::process::{Rlimits, release_group};
use warden_sandbox::zygote::{Stdio3, ZYGOTE_ARG, Zygote};

/// How to start workers: which binary and where their logs go.
#[derive(Debug, Clone)]
pub struct WorkerLauncher {
    pub diagnostics_dir: PathBuf,
    pub max_response: usize,
    /// Holds the binary and the request cap its workers are told.
    zygote: Zygote,
}

/// A running worker. Dropping it kills its process group and has it
/// reaped, so a cancelled or abandoned call can never leave a worker (or a
/// zombie) behind.
struct WorkerProcess {
    pid: u32,
    zygote: Zygote,
    reaped: bool,
}

impl WorkerProcess {
    /// Kills the worker's group, then reaps it: the zombie keeps the group
    /// id reserved until then, so the kill cannot hit an unrelated process.
    async fn end(&mut self) -> Option<ExitStatus> {
        release_group(self.pid);
        self.reaped = true;
        self.zygote.reap(self.pid).await
    }
}

impl Drop for WorkerProcess {
    fn drop(&mut self) {
        if !self.reaped {
            release_group(self.pid);
            self.zygote.reap_detached(self.pid);
        }
    }
}

impl WorkerLauncher {
    /// Starts workers from `exe` (re-executed once, as the zygote), with
    /// diagnostics logs in `diagnostics_dir`, answers capped at
    /// `max_response` bytes and requests at `max_request` (the argument cap
    /// plus [`crate::limits::WORKER_REQUEST_ENVELOPE_BYTES`]).
    pub fn new(exe: PathBuf, diagnostics_dir: PathBuf, max_response: usize, max_request: usize) -> Self {
        Self {
            // The binary re-executed as a worker (`WORKER_ARG`) that
            // serves as the zygote (`ZYGOTE_ARG`); see `worker::main`.
            zygote: Zygote::new(
                exe,
                vec![
                    WORKER_ARG.into(),
                    ZYGOTE_ARG.into(),
                    format!("{MAX_REQUEST_ARG}{max_request}").into(),
                ],
            ),
            diagnostics_dir,
            max_response,
        }
    }

    /// Sends `request` to a new worker and returns its one response.
    pub async fn call(
        &self,
        request: &Request,
        rlimits: Rlimits,
        deadline: Instant,
        cancel: &CancellationToken,
        label: &str,
    ) -> Result<Response, Failure> {
        let log_path = self
            .diagnostics_dir
            .join(format!("worker-{}.log", uuid::Uuid::new_v4().simple()));
        let mut log = WorkerLog::new(&log_path).map_err(|e| {
            Failure::new(
                Status::Failed,
                GuardError::new(
                    codes::WORKER_SPAWN_FAILED,
                    format!("could not start a worker for '{label}': cannot create its log: {e}"),
                ),
            )
        })?;
        let result = self
            .call_logged(request, rlimits, deadline, cancel, label, &log)
            .await;
        // On disk only when the worker wrote to stderr (a crash names it).
        log.keep();
        result
    }

    async fn call_logged(
        &self,
        request: &Request,
        rlimits: Rlimits,
        deadline: Instant,
        cancel: &CancellationToken,
        label: &str,
        log: &WorkerLog,
    ) -> Result<Response, Failure> {
        let (mut worker, to_worker, from_worker) = self.spawn(rlimits, log).await.map_err(|e| {
            Failure::new(
                Status::Failed,
                GuardError::new(
                    codes::WORKER_SPAWN_FAILED,
                    format!("could not start a worker for '{label}': {e}"),
                ),
            )
        })?;
        // The guard's progress and log messages go to the MCP request that
        // scoped a sink around this call (`warden_core::notify`), if any.
        let notices = warden_core::notify::for_this_task();
        let exchange = exchange(to_worker, from_worker, request, self.max_response, notices);
        let outcome = tokio::select! {
            outcome = tokio::time::timeout_at(deadline, exchange) => outcome,
            _ = cancel.cancelled() => {
                worker.end().await;
                return Err(Failure::new(Status::Cancelled, GuardError::new(
                    codes::CANCELLED,
                    format!("call to '{label}' was cancelled; its worker was killed"),
                )));
            }
        };
        // An answered call needs no exit status: its worker's group is
        // killed now and it is reaped behind the answer (by the drop).
        // Any other end is explained by how the worker ended.
        let status = match &outcome {
            Ok(Exchange::Answer(_)) => None,
            _ => worker.end().await,
        };
        drop(worker);
        match outcome {
            Err(_elapsed) => Err(Failure::new(
                Status::TimedOut,
                GuardError::new(
                    codes::TIMED_OUT,
                    format!("'{label}' timed out; its worker process group was killed"),
                ),
            )),
            Ok(Exchange::Answer(response)) => Ok(response),
            Ok(Exchange::TooLarge) => Err(Failure::new(
                Status::Failed,
                GuardError::new(
                    codes::RESPONSE_TOO_LARGE,
                    format!(
                        "'{label}' returned more than {} bytes; return less (e.g. write a file and return its summary)",
                        self.max_response
                    ),
                ),
            )),
            Ok(Exchange::Garbled(detail)) => Err(Failure::new(
                Status::Failed,
                GuardError::new(
                    codes::WORKER_CRASHED,
                    format!("worker for '{label}' sent an unreadable response: {detail}"),
                ),
            )),
            Ok(Exchange::NoAnswer) => Err(Failure::new(
                Status::Failed,
                died_without_answer(label, status, log, rlimits),
            )),
        }
    }

    /// A forked worker, the pipe to its stdin and the pipe from its stdout.
    async fn spawn(
        &self,
        rlimits: Rlimits,
        log: &WorkerLog,
    ) -> std::io::Result<(WorkerProcess, pipe::Sender, pipe::Receiver)> {
        let stderr = log.for_worker()?;
        let (stdin, to_worker) = std::io::pipe()?;
        let (from_worker, stdout) = std::io::pipe()?;
        let stdio = Stdio3 {
            stdin: stdin.into(),
            stdout: stdout.into(),
            stderr,
        };
        // Non-blocking before the first await, so nothing is left to fail
        // once the worker exists.
        let to_worker = pipe::Sender::from_owned_fd(to_worker.into())?;
        let from_worker = pipe::Receiver::from_owned_fd(from_worker.into())?;
        let pid = self.zygote.spawn(stdio, rlimits).await?;
        let worker = WorkerProcess {
            pid,
            zygote: self.zygote.clone(),
            reaped: false,
        };
        Ok((worker, to_worker, from_worker))
    }
}

enum Exchange {
    Answer(Response),
    TooLarge,
    Garbled(String),
    NoAnswer,
}

/// Writes the request, closes stdin and reads capped lines: progress and
/// log lines go to `notices` (dropped without one), the first other line
/// is the response.
async fn exchange(
    mut stdin: impl AsyncWrite + Unpin,
    stdout: impl AsyncRead + Unpin,
    request: &Request,
    cap: usize,
    notices: Option<warden_core::notify::Sink>,
) -> Exchange {
    let mut line = serde_json::to_vec(request).unwrap_or_default();
    line.push(b'\n');
    // A worker that died at once closes the pipe; the read below then
    // sees EOF and the exit status explains why.
    let _ = stdin.write_all(&line).await;
    drop(stdin);
    let mut reader = BufReader::new(stdout);
    loop {
        let mut line = Vec::new();
        let read = (&mut reader)
            .take(cap as u64 + 1)
            .read_until(b'\n', &mut line)
            .await;
        match read {
            Ok(0) | Err(_) => return Exchange::NoAnswer,
            Ok(_) if line.len() > cap => return Exchange::TooLarge,
            Ok(_) => {}
        }
        if let Ok(Interim::Notice { notice }) = serde_json::from_slice::<Interim>(&line) {
            if let Some(sink) = &notices {
                sink(notice);
            }
            continue;
        }
        return match serde_json::from_slice::<Response>(&line) {
            Ok(response) => Exchange::Answer(response),
            Err(e) if !line.ends_with(b"\n") => Exchange::Garbled(format!("truncated line ({e})")),
            Err(e) => Exchange::Garbled(e.to_string()),
        };
    }
}

/// Explains a worker that exited without answering, from its exit status
/// and the tail of its diagnostics log.
fn died_without_answer(
    label: &str,
    status: Option<ExitStatus>,
    worker_log: &WorkerLog,
    rlimits: Rlimits,
) -> GuardError {
    let log = worker_log.text();
    let how = match warden_sandbox::process::Ended::of(status) {
        ended @ warden_sandbox::process::Ended::Signal(_) => format!("was {ended}"),
        ended => ended.to_string(),
    };
    let out_of_memory = log.contains("memory allocation of") || log.contains("out of memory");
    let (code, hint) = if out_of_memory {
        (
            codes::WORKER_OUT_OF_MEMORY,
            format!(
                " after exceeding its {} MiB address-space limit",
                rlimits.memory / (1024 * 1024)
            ),
        )
    } else {
        (codes::WORKER_CRASHED, String::new())
    };
    let tail: String = log
        .lines()
        .rev()
        .take(3)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect::<Vec<_>>()
        .join(" | ");
    let detail = if tail.is_empty() {
        String::new()
    } else {
        format!(
            "; last log lines: {tail}; full log: {}",
            worker_log.path().display()
        )
    };
    GuardError::new(
        code,
        format!("worker for '{label}' {how}{hint} before answering{detail}"),
    )
}
