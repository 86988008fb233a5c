//! The executor: the one path every guard call takes.
//!
//! Direct MCP calls, the CLI's `call`, and (later) script and batch calls all
//! come here. It admits the call (call slots), records
//! `function_call_started` / `function_call_finished`, picks the runner for
//! the guard's mode, and enforces the deadline. Nothing else runs a guard.

mod in_process;
mod isolated;
pub(crate) mod sandbox;

pub use sandbox::kill_all_workers;

use std::sync::Arc;
use std::time::Instant as StdInstant;

use opentelemetry::KeyValue;
use opentelemetry::trace::SpanKind;
use serde::Serialize;
use serde_json::{Value, json};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

pub(crate) use isolated::WorkerLauncher;
use sandbox::Rlimits;

use crate::error::{GuardError, codes};
use crate::events::{Events, Origin};
use crate::guard::{Mode, Resources};
use crate::limits::Limits;
use crate::registry::Registry;
use crate::worker::{Request, Response};

/// How a call ended, as recorded in events and results.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Success,
    Failed,
    TimedOut,
    Cancelled,
    Rejected,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Success => "success",
            Status::Failed => "failed",
            Status::TimedOut => "timed_out",
            Status::Cancelled => "cancelled",
            Status::Rejected => "rejected",
        }
    }
}

/// A call that did not succeed: how it ended and the error to show.
#[derive(Debug, Clone)]
pub struct Failure {
    pub status: Status,
    pub error: GuardError,
}

impl Failure {
    pub fn new(status: Status, error: GuardError) -> Self {
        Self { status, error }
    }
}

/// Whether a call may wait for a slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    /// Take a call slot now or be rejected with `server_busy` (direct calls).
    TryNow,
    /// The caller already bounds its own concurrency: a script holds a task
    /// slot (one guard call at a time), a batch or check_backtest holds one
    /// call slot plus a batch-local semaphore. No call slot is taken here.
    InTask,
}

/// A call that [`Executor::begin_here`] or the executor itself has started:
/// its `function_call_started` is written and its span is open. Settled
/// exactly once, by [`Executor::end`].
#[derive(Debug)]
pub(crate) struct StartedCall {
    pub function: String,
    pub call_id: String,
    pub span: opentelemetry::Context,
    pub at: StdInstant,
    /// The guard's own timeout (before the caller's cap).
    pub timeout: std::time::Duration,
    /// When the call must be answered: the guard's timeout, capped by the
    /// caller's deadline.
    pub deadline: Instant,
}

/// One guard call.
#[derive(Debug)]
pub struct CallRequest<'a> {
    pub guard: &'a str,
    pub arguments: Value,
    pub origin: &'a Origin,
    /// Fired by the client's `notifications/cancelled` (or a task ending).
    pub cancel: CancellationToken,
    pub admission: Admission,
    /// An outer deadline (the task's) that the guard's own cannot exceed.
    pub deadline_cap: Option<Instant>,
    /// Where to record the call's events when not (only) the global log,
    /// e.g. a task's handle that also writes `<task_dir>/events.jsonl`.
    pub events: Option<&'a Events>,
}

/// Runs guards. Shared by the server and the CLI.
pub struct Executor {
    registry: Arc<Registry>,
    resources: Arc<Resources>,
    limits: Limits,
    events: Events,
    launcher: WorkerLauncher,
    /// Call slots: one permit per running direct call, taken before the call
    /// starts and released when it ends (for in-process calls, see
    /// `in_process` for how a timed-out call gives its slot back).
    call_slots: Arc<Semaphore>,
    /// Permits for in-process calls that overran their deadline and are
    /// still running; held by their threads until the function returns.
    overdue: Arc<Semaphore>,
}

impl std::fmt::Debug for Executor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Executor")
            .field("limits", &self.limits)
            .finish_non_exhaustive()
    }
}

impl Executor {
    pub(crate) fn new(
        registry: Arc<Registry>,
        resources: Arc<Resources>,
        limits: Limits,
        events: Events,
        launcher: WorkerLauncher,
    ) -> Self {
        Self {
            call_slots: Arc::new(Semaphore::new(limits.max_concurrent_calls)),
            overdue: Arc::new(Semaphore::new(limits.max_overdue_in_process)),
            registry,
            resources,
            limits,
            events,
            launcher,
        }
    }

    pub fn registry(&self) -> &Arc<Registry> {
        &self.registry
    }

    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    pub fn events(&self) -> &Events {
        &self.events
    }

    /// Runs one guard call through admission, its mode's runner and the
    /// deadline, recording its events.
    pub async fn call(&self, request: CallRequest<'_>) -> Result<Value, Failure> {
        let (guard, started, permit) = self.begin(&request, request.admission)?;
        let outcome = match guard.mode {
            Mode::Isolated => {
                let rlimits = Rlimits::for_call(&self.limits, started.timeout.as_secs());
                let worker_request = Request::Call {
                    guard: guard.name.clone(),
                    arguments: request.arguments,
                    traceparent: crate::telemetry::recording()
                        .then(|| crate::telemetry::traceparent(&started.span))
                        .flatten(),
                };
                let answer = self
                    .launcher
                    .call(
                        &worker_request,
                        rlimits,
                        started.deadline,
                        &request.cancel,
                        &guard.name,
                    )
                    .await;
                drop(permit);
                if let Ok(Response::Result { spans, .. } | Response::Error { spans, .. }) = &answer {
                    crate::telemetry::import_worker_spans(spans);
                }
                match answer {
                    Ok(Response::Result { value, .. }) => Ok(value),
                    Ok(Response::Error { error, .. }) => Err(Failure::new(Status::Failed, error)),
                    Ok(Response::Pong { .. }) => Err(Failure::new(
                        Status::Failed,
                        GuardError::new(codes::WORKER_CRASHED, "worker answered a call with a pong"),
                    )),
                    Err(failure) => Err(failure),
                }
            }
            Mode::InProcess | Mode::Pure => {
                in_process::run(
                    guard.clone(),
                    self.resources.clone(),
                    started.span.clone(),
                    request.arguments,
                    in_process::Slots {
                        permit,
                        overdue: self.overdue.clone(),
                    },
                    started.deadline,
                    &request.cancel,
                )
                .await
            }
        };
        let events = request.events.unwrap_or(&self.events);
        self.end(events, request.origin, started, &outcome);
        outcome
    }

    /// Starts a call whose guard the caller will run on its own thread
    /// with [`Executor::run_here`]: the script door's server thread, which
    /// answers a worker's `in_process` calls without a thread handoff.
    /// Same lookup, argument cap, deadline, span and `function_call_started`
    /// event as [`Executor::call`]; no call slot (the task holds one).
    /// Isolated guards are refused: they need [`Executor::call`].
    pub(crate) fn begin_here(&self, request: &CallRequest<'_>) -> Result<StartedCall, Failure> {
        if let Some(guard) = self.registry.get(request.guard)
            && guard.mode == Mode::Isolated
        {
            return Err(Failure::new(
                Status::Failed,
                GuardError::failed(format!("guard '{}' is isolated and cannot run here", guard.name)),
            ));
        }
        self.begin(request, Admission::InTask)
            .map(|(_, started, _)| started)
    }

    /// Runs a call begun by [`Executor::begin_here`] on the current thread,
    /// catching a panic. The caller owns the deadline: a thread cannot be
    /// interrupted, so it must be able to answer `timed_out` without this
    /// function returning (see `task::door`).
    pub(crate) fn run_here(
        &self,
        function: &str,
        span: &opentelemetry::Context,
        arguments: Value,
    ) -> Result<Value, Failure> {
        let guard = self.guard(function)?;
        in_process::invoke_caught(guard, &self.resources, span, arguments)
    }

    /// Ends a call: closes its span and records `function_call_finished`.
    /// Called exactly once per begun call, by whoever settles it.
    pub(crate) fn end(
        &self,
        events: &Events,
        origin: &Origin,
        started: StartedCall,
        outcome: &Result<Value, Failure>,
    ) {
        let (status, error_type) = match outcome {
            Ok(_) => (Status::Success, None),
            Err(failure) => (failure.status, Some(failure.error.code.as_str())),
        };
        crate::telemetry::end(&started.span, status.as_str(), error_type);
        events.emit(
            origin,
            "function_call_finished",
            json!({
                "function": started.function,
                "call_id": started.call_id,
                "status": status.as_str(),
                "error_type": error_type,
                "duration_ms": started.at.elapsed().as_secs_f64() * 1000.0,
            }),
        );
    }

    /// Looks the guard up, checks the argument cap, admits the call, fixes
    /// its deadline, opens its span and records `function_call_started`.
    fn begin(
        &self,
        request: &CallRequest<'_>,
        admission: Admission,
    ) -> Result<(&crate::guard::Guard, StartedCall, Option<OwnedSemaphorePermit>), Failure> {
        let guard = self.guard(request.guard)?;
        let size = serde_json::to_vec(&request.arguments)
            .map(|v| v.len())
            .unwrap_or(0);
        if size > self.limits.max_argument_bytes {
            return Err(Failure::new(
                Status::Failed,
                GuardError::new(
                    codes::ARGUMENTS_TOO_LARGE,
                    format!(
                        "arguments are {size} bytes; the limit is {} bytes: send less data or reference a stored artifact",
                        self.limits.max_argument_bytes
                    ),
                ),
            ));
        }
        let permit = self.admit(admission)?;
        let timeout = self.limits.guard_deadline(guard.timeout);
        let mut deadline = Instant::now() + timeout;
        if let Some(cap) = request.deadline_cap {
            deadline = deadline.min(cap);
        }
        let call_id = crate::events::next_id("call");
        request.events.unwrap_or(&self.events).emit(
            request.origin,
            "function_call_started",
            json!({"function": guard.name, "call_id": call_id, "execution_mode": guard.mode.as_str()}),
        );
        let span = crate::telemetry::start(
            "function.call",
            SpanKind::Internal,
            &request.origin.trace,
            vec![
                KeyValue::new("warden.function", guard.name.clone()),
                KeyValue::new("warden.execution_mode", guard.mode.as_str()),
            ],
        );
        let started = StartedCall {
            function: guard.name.clone(),
            call_id,
            span,
            at: StdInstant::now(),
            timeout,
            deadline,
        };
        Ok((guard, started, permit))
    }

    fn guard(&self, name: &str) -> Result<&crate::guard::Guard, Failure> {
        self.registry.get(name).ok_or_else(|| {
            Failure::new(
                Status::Failed,
                GuardError::new(
                    "unknown_guard",
                    format!(
                        "no guard named '{name}'; known guards: {}",
                        self.registry.names().join(", ")
                    ),
                ),
            )
        })
    }

    /// Takes one call slot for a tool that then runs several guards with
    /// [`Admission::InTask`] (check_backtest, run_batch): the whole batch
    /// counts as one direct call. Rejected with `server_busy` like a direct
    /// call when no slot is free; the slot is released when the permit drops.
    pub fn try_admit_batch(&self) -> Result<OwnedSemaphorePermit, Failure> {
        self.admit(Admission::TryNow)?.ok_or_else(|| {
            Failure::new(
                Status::Failed,
                GuardError::failed("admission returned no call slot for a batch"),
            )
        })
    }

    fn admit(&self, admission: Admission) -> Result<Option<OwnedSemaphorePermit>, Failure> {
        match admission {
            Admission::TryNow => match self.call_slots.clone().try_acquire_owned() {
                Ok(permit) => Ok(Some(permit)),
                Err(_) => Err(Failure::new(
                    Status::Rejected,
                    GuardError::new(
                        codes::SERVER_BUSY,
                        format!(
                            "Server busy; retry later ({} of {} call slots in use)",
                            self.limits.max_concurrent_calls, self.limits.max_concurrent_calls
                        ),
                    ),
                )),
            },
            Admission::InTask => Ok(None),
        }
    }

    /// Starts a worker that answers a ping without calling any guard; used by
    /// preflight to prove isolation works on this machine.
    pub async fn ping_worker(&self) -> Result<(u32, usize), Failure> {
        let timeout = std::time::Duration::from_secs(10);
        let rlimits = Rlimits::for_call(&self.limits, timeout.as_secs());
        let answer = self
            .launcher
            .call(
                &Request::Ping,
                rlimits,
                Instant::now() + timeout,
                &CancellationToken::new(),
                "ping",
            )
            .await?;
        match answer {
            Response::Pong { pid, guards } => Ok((pid, guards)),
            _ => Err(Failure::new(
                Status::Failed,
                GuardError::new(
                    codes::WORKER_CRASHED,
                    "worker did not answer the ping with a pong",
                ),
            )),
        }
    }
}
