//! The executor: the one path every guard call takes.
//!
//! Direct MCP calls, the CLI's `call`, batch and `check_backtest` calls and
//! a script's calls through its worker door all come here. It checks the
//! arguments (depth and size, `arguments`), admits the call (call slots with
//! a bounded wait, `admission`), gives an in-process call a guard thread
//! (`threads`: one budget for every path, so hung guards can never exhaust
//! the server's threads), records `function_call_started` /
//! `function_call_finished`, picks the runner for the guard's mode, and
//! enforces the deadline. Nothing else runs a guard.

mod admission;
pub(crate) mod arguments;
mod in_process;
mod isolated;
pub(crate) use warden_sandbox::process as sandbox;
mod threads;

pub use sandbox::kill_all_workers;

use std::sync::Arc;
use std::time::Instant as StdInstant;

use opentelemetry::KeyValue;
use opentelemetry::trace::SpanKind;
use serde::Serialize;
use serde_json::{Value, json};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

pub use admission::Admitted;
pub(crate) use admission::Slots;
pub(crate) use isolated::WorkerLauncher;
use sandbox::Rlimits;
use threads::GuardThreads;
pub(crate) use threads::Held;

use crate::error::{GuardError, codes};
use crate::events::{Events, Origin};
use crate::guard::{Mode, Resources};
use crate::limits::Limits;
use crate::registry::Registry;
use crate::tenant::Principal;
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

/// Whether a call takes a call slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    /// Take a call slot (direct calls): now if one is free, else after a
    /// bounded wait in the admission queue, or be rejected `server_busy`.
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
    /// Call slots: one per admitted direct call or batch, taken before the
    /// call starts and dropped when it is answered (an in-process call that
    /// overran keeps a guard-thread permit instead, see `threads`). Each
    /// bound principal holds at most its share of them.
    call_slots: Slots,
    /// Requests per minute per bound principal: direct calls, batches and
    /// tasks each take one token when admitted ([`Executor::take_rate`]).
    rate: crate::tenant::limits::Rate,
    /// The guard-thread budget every in-process execution runs under.
    threads: GuardThreads,
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
            call_slots: Slots::new(
                "call",
                limits.max_concurrent_calls,
                limits.admission_queue,
                limits.admission_wait,
            )
            .per_principal(
                limits.principal_call_slots(),
                format!(
                    "its share of the call slots ({} %, WARDEN_PRINCIPAL_CALL_SHARE_PERCENT)",
                    limits.principal_call_share_percent
                ),
            ),
            rate: crate::tenant::limits::Rate::new(limits.calls_per_minute),
            threads: GuardThreads::new(
                limits.max_guard_threads,
                limits.max_overdue_in_process,
                limits.admission_wait,
            ),
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
        let guard = self.check(&request)?;
        let permit = match request.admission {
            Admission::TryNow => Some(
                self.admit_batch(&request.origin.principal, &request.cancel)
                    .await?,
            ),
            Admission::InTask => None,
        };
        // An in-process call gets its guard thread before it counts as started.
        let held = match guard.mode {
            Mode::Isolated => None,
            Mode::InProcess | Mode::Pure => Some(
                self.threads
                    .acquire(request.deadline_cap, &request.cancel)
                    .await?,
            ),
        };
        let started = self.start(guard, &request);
        let outcome = match held {
            None => {
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
            Some(held) => {
                let outcome = in_process::run(
                    guard.clone(),
                    self.resources.clone(),
                    started.span.clone(),
                    request.arguments,
                    (&self.threads, held),
                    started.deadline,
                    &request.cancel,
                )
                .await;
                // Answered: the slot is free even if the function runs on
                // (its thread keeps a guard-thread permit).
                drop(permit);
                outcome
            }
        };
        let events = request.events.unwrap_or(&self.events);
        self.end(events, request.origin, started, &outcome);
        outcome
    }

    /// Starts a call whose guard the caller will run on its own thread
    /// with [`Executor::run_here`]: the script door's server thread, which
    /// answers a worker's `in_process` calls without a thread handoff.
    /// Same lookup, argument checks, deadline, span and
    /// `function_call_started` event as [`Executor::call`]; no call slot (the
    /// task holds one), but a guard-thread permit like any in-process call,
    /// waited for through `runtime` when none is free. The caller keeps the
    /// returned [`Held`] with the call and calls [`Held::overrun`] when it
    /// answers the call before the function returns. Isolated guards are
    /// refused: they need [`Executor::call`].
    pub(crate) fn begin_here(
        &self,
        request: &CallRequest<'_>,
        runtime: &tokio::runtime::Handle,
    ) -> Result<(StartedCall, Held), Failure> {
        let guard = self.check(request)?;
        if guard.mode == Mode::Isolated {
            return Err(Failure::new(
                Status::Failed,
                GuardError::failed(format!("guard '{}' is isolated and cannot run here", guard.name)),
            ));
        }
        let held = self
            .threads
            .acquire_blocking(runtime, request.deadline_cap, &request.cancel)?;
        Ok((self.start(guard, request), held))
    }

    /// Runs a call begun by [`Executor::begin_here`] on the current thread,
    /// catching a panic, and releases its guard-thread permit when the
    /// function returns. The caller owns the deadline: a thread cannot be
    /// interrupted, so it must be able to answer `timed_out` without this
    /// function returning (see `task::door`).
    pub(crate) fn run_here(
        &self,
        function: &str,
        span: &opentelemetry::Context,
        arguments: Value,
        held: &Held,
    ) -> Result<Value, Failure> {
        let outcome = self
            .guard(function)
            .and_then(|guard| in_process::invoke_caught(guard, &self.resources, span, arguments));
        held.release();
        outcome
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

    /// Looks the guard up and checks the arguments' depth and size.
    fn check(&self, request: &CallRequest<'_>) -> Result<&crate::guard::Guard, Failure> {
        let guard = self.guard(request.guard)?;
        arguments::check(&request.arguments, self.limits.max_argument_bytes)?;
        Ok(guard)
    }

    /// Fixes an admitted call's deadline, opens its span and records
    /// `function_call_started`.
    fn start(&self, guard: &crate::guard::Guard, request: &CallRequest<'_>) -> StartedCall {
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
        StartedCall {
            function: guard.name.clone(),
            call_id,
            span,
            at: StdInstant::now(),
            timeout,
            deadline,
        }
    }

    fn guard(&self, name: &str) -> Result<&crate::guard::Guard, Failure> {
        self.registry
            .get(name)
            .ok_or_else(|| Failure::new(Status::Failed, self.registry.unknown_guard(name)))
    }

    /// Admits one direct call for `principal`, or a tool that then runs
    /// several guards with [`Admission::InTask`] (check_backtest,
    /// run_batch): the whole batch counts as one direct call. It takes a
    /// token of the principal's rate, then a call slot within its share,
    /// waiting for one like a direct call; it is rejected `rate_limited`,
    /// `principal_busy` or `server_busy`. The slot is released when the
    /// returned [`Admitted`] drops.
    pub async fn admit_batch(
        &self,
        principal: &Principal,
        cancel: &CancellationToken,
    ) -> Result<Admitted, Failure> {
        self.take_rate(principal)?;
        self.call_slots.admit(principal, cancel).await
    }

    /// Takes one request of `principal`'s rate (a no-op for `local`), or
    /// refuses it `rate_limited`.
    pub(crate) fn take_rate(&self, principal: &Principal) -> Result<(), Failure> {
        self.rate
            .take(principal)
            .map_err(|error| Failure::new(Status::Rejected, error))
    }

    #[cfg(any(feature = "cli", feature = "http"))]
    /// Starts a worker that answers a ping without calling any guard; used by
    /// preflight and `/readyz` to prove isolation works on this machine.
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
