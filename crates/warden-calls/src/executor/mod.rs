//! The executor: the one path every guard call takes.
//!
//! Direct MCP calls, the CLI's `call`, batch and `check_backtest` calls and
//! a script's calls through its worker door all come here. It checks the
//! arguments (depth and size, `arguments`), admits the call (call slots with
//! a bounded wait, `admission`), gives an in-process call a guard thread
//! (`threads`: one budget for every path, so hung guards can never exhaust
//! the server's threads), begins the call as a [`Call`] (`lifecycle`: its
//! `function_call_started` / `function_call_finished`, span and permits,
//! settled exactly once however the call ends), picks the runner for the
//! guard's mode, and enforces the deadline. It also refuses a destructive
//! guard that comes without the person's consent (`confirm`), whichever
//! path sent it. Nothing else runs a guard.

mod admission;
pub mod arguments;
pub mod confirm;
mod in_process;
mod isolated;
mod lifecycle;
mod threads;

use std::sync::Arc;

use serde::Serialize;
use serde_json::Value;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

pub use admission::Admitted;
pub use admission::Slots;
pub use in_process::answered_early;
pub use isolated::WorkerLauncher;
use lifecycle::Borrowed;
pub use lifecycle::{Call, CallScope, Here, Record, Settled};
use threads::{GuardThreads, Held};
use warden_core::future::BoxFuture;
use warden_sandbox::process::Rlimits;

use crate::events::{Events, Origin};
use crate::limits::CallLimits;
use crate::tenant::{Principal, Scopes};
use crate::worker::{Request, Response};
use warden_core::error::{GuardError, codes};
use warden_core::guard::{Mode, Resources};
use warden_core::registry::Registry;

/// How a call ended, as recorded in events and results.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Success,
    Failed,
    TimedOut,
    Cancelled,
    Rejected,
    /// The guard asked its stateless (2026-07-28) caller a question: the
    /// call ended with the question, and the caller retries it with the
    /// answer (multi-round-trip input). Neither a success nor a failure.
    InputRequired,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Success => "success",
            Status::Failed => "failed",
            Status::TimedOut => "timed_out",
            Status::Cancelled => "cancelled",
            Status::Rejected => "rejected",
            Status::InputRequired => "input_required",
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
    /// The caller's own record of the call (a script's
    /// `function_calls.json`), written once when the call settles, right
    /// after `function_call_finished`: also when the caller's future is
    /// dropped mid-call, which a record written after `call` returns would
    /// miss. A call refused before it began (unknown guard, bad arguments,
    /// no slot) never settles: the caller records that from the `Err`.
    pub record: Option<Record<'a>>,
    /// Why a destructive guard may run here ([`confirm::Consent`]); the
    /// executor refuses a destructive guard without one, on every path.
    pub consent: confirm::Consent,
}

impl<'a> CallRequest<'a> {
    /// A call of `guard` with `arguments` for `origin`'s request, cancelled
    /// by `cancel`: answered now or refused busy ([`Admission::TryNow`]), no
    /// outer deadline, the global event log only, no record of the
    /// caller's, and no consent to a destructive guard. The methods below
    /// change each.
    pub fn new(guard: &'a str, arguments: Value, origin: &'a Origin, cancel: CancellationToken) -> Self {
        Self {
            guard,
            arguments,
            origin,
            cancel,
            admission: Admission::TryNow,
            deadline_cap: None,
            events: None,
            record: None,
            consent: confirm::Consent::None,
        }
    }

    /// A call inside a task: it waits for a call slot
    /// ([`Admission::InTask`]) and never runs past `deadline`.
    pub fn in_task(mut self, deadline: Instant) -> Self {
        self.admission = Admission::InTask;
        self.deadline_cap = Some(deadline);
        self
    }

    /// How the call takes its slot.
    pub fn admission(mut self, admission: Admission) -> Self {
        self.admission = admission;
        self
    }

    /// Records its events in `events` too (a task's own log).
    pub fn events(mut self, events: &'a Events) -> Self {
        self.events = Some(events);
        self
    }

    /// Writes the caller's own record when it settles (see [`Record`]).
    pub fn record(mut self, record: Record<'a>) -> Self {
        self.record = Some(record);
        self
    }

    /// Why a destructive guard may run here.
    pub fn consent(mut self, consent: confirm::Consent) -> Self {
        self.consent = consent;
        self
    }
}

/// Runs guards. Shared by the server and the CLI.
pub struct Executor {
    registry: Arc<Registry>,
    resources: Arc<Resources>,
    limits: CallLimits,
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
    /// Who may call what (`WARDEN_POLICY_FILE`); `None`: everyone may
    /// call everything.
    policy: Option<crate::policy::Policy>,
}

impl std::fmt::Debug for Executor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Executor")
            .field("limits", &self.limits)
            .finish_non_exhaustive()
    }
}

impl Executor {
    pub fn new(
        registry: Arc<Registry>,
        resources: Arc<Resources>,
        limits: CallLimits,
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
            policy: None,
        }
    }

    /// Enforces `policy` on every guard call (see [`crate::policy`]).
    pub fn with_policy(mut self, policy: Option<crate::policy::Policy>) -> Self {
        self.policy = policy;
        self
    }

    /// The policy every call is checked against, if the operator set one.
    pub fn policy(&self) -> Option<&crate::policy::Policy> {
        self.policy.as_ref()
    }

    /// Whether `principal`, holding `scopes`, may call the tool `name` (a
    /// guard or a built-in): `Ok`, or the policy's refusal naming its rule.
    pub fn permit(&self, principal: &Principal, scopes: &Scopes, name: &str) -> Result<(), GuardError> {
        let Some(policy) = &self.policy else {
            return Ok(());
        };
        let category = self.registry.get(name).map(|g| g.category.as_str());
        policy.check(principal.as_str(), scopes, crate::policy::Tool { name, category })
    }

    /// The guards `origin`'s caller may not call, each with the policy's
    /// refusal message: a script worker refuses these inline (pure guards
    /// never reach the executor), and a coding task's prompt leaves them out.
    pub fn denied_guards(&self, origin: &Origin) -> std::collections::BTreeMap<String, String> {
        if self.policy.is_none() {
            return Default::default();
        }
        self.registry
            .iter()
            .filter_map(|g| {
                let refusal = self.permit(&origin.principal, &origin.scopes, &g.name).err()?;
                Some((g.name.clone(), refusal.message))
            })
            .collect()
    }

    /// The registry as `principal`, holding `scopes`, sees it: the guards
    /// the policy denies it are hidden, answered as names that were never
    /// registered (see [`warden_core::registry::Visible`]).
    pub fn visible(&self, principal: &Principal, scopes: &Scopes) -> warden_core::registry::Visible<'_> {
        let hidden = match &self.policy {
            None => Default::default(),
            Some(_) => self
                .registry
                .iter()
                .filter(|g| self.permit(principal, scopes, &g.name).is_err())
                .map(|g| g.name.clone())
                .collect(),
        };
        self.registry.visible(hidden)
    }

    /// [`Executor::visible`] for the caller of `origin`.
    pub fn visible_to(&self, origin: &Origin) -> warden_core::registry::Visible<'_> {
        self.visible(&origin.principal, &origin.scopes)
    }

    pub fn registry(&self) -> &Arc<Registry> {
        &self.registry
    }

    /// The managed resources in-process guards share (and the ones that
    /// failed to load, which `--check` and `/readyz` report).
    pub fn resources(&self) -> &Resources {
        &self.resources
    }

    pub fn limits(&self) -> &CallLimits {
        &self.limits
    }

    pub fn events(&self) -> &Events {
        &self.events
    }

    /// Runs one guard call through admission, its mode's runner and the
    /// deadline, recording its events. The call is a [`Call`] from the
    /// moment it is begun: dropping this future settles it `cancelled`.
    /// Boxed: its state machine is compiled here once, not in every crate
    /// that calls a guard ([`warden_core::future`]).
    pub fn call<'a>(&'a self, request: CallRequest<'a>) -> BoxFuture<'a, Result<Value, Failure>> {
        Box::pin(async move {
            let guard = self.check(&request)?;
            let call = self.begin(guard, &request).await?;
            let outcome = self
                .execute(guard, &call, request.arguments, &request.cancel)
                .await;
            call.finish(outcome)
        })
    }

    /// Admits a call (a call slot for [`Admission::TryNow`]; a guard-thread
    /// permit for an in-process call, before it counts as started) and
    /// begins it.
    async fn begin<'s>(
        &'s self,
        guard: &warden_core::guard::Guard,
        request: &CallRequest<'s>,
    ) -> Result<Call<Borrowed<'s>>, Failure> {
        let slot = match request.admission {
            Admission::TryNow => Some(
                self.admit_batch(&request.origin.principal, &request.cancel)
                    .await?,
            ),
            Admission::InTask => None,
        };
        let held = match guard.mode {
            Mode::Isolated => None,
            Mode::InProcess | Mode::Pure => Some(
                self.threads
                    .acquire(request.deadline_cap, &request.cancel)
                    .await?,
            ),
        };
        let scope = Borrowed {
            events: request.events.unwrap_or(&self.events),
            origin: request.origin,
            record: request.record,
        };
        let call = self.start(guard, request, scope, (slot, held));
        match call.put_on_ledger() {
            Some(recorded) => match on_ledger(recorded, call.deadline()).await {
                Ok(()) => Ok(call),
                Err(reason) => Err(call.unrecorded(&reason)),
            },
            None => Ok(call),
        }
    }

    /// Runs a begun call's function by its mode (a worker process when the
    /// call holds no guard-thread permit) and returns its outcome; the
    /// caller settles the call.
    async fn execute<S: CallScope>(
        &self,
        guard: &warden_core::guard::Guard,
        call: &Call<S>,
        arguments: Value,
        cancel: &CancellationToken,
    ) -> Result<Value, Failure> {
        let Some(held) = call.held() else {
            return self.isolated(guard, call, arguments, cancel).await;
        };
        in_process::run(
            guard.clone(),
            self.resources.clone(),
            call.span().clone(),
            arguments,
            (&self.threads, held),
            call.deadline(),
            cancel,
        )
        .await
    }

    /// Runs a begun call in a fresh worker process.
    async fn isolated<S: CallScope>(
        &self,
        guard: &warden_core::guard::Guard,
        call: &Call<S>,
        arguments: Value,
        cancel: &CancellationToken,
    ) -> Result<Value, Failure> {
        let rlimits = Rlimits::for_call(&self.limits.worker, call.timeout().as_secs());
        let worker_request = Request::Call {
            guard: guard.name.clone(),
            arguments,
            traceparent: crate::telemetry::recording()
                .then(|| crate::telemetry::traceparent(call.span()))
                .flatten(),
        };
        let answer = self
            .launcher
            .call(&worker_request, rlimits, call.deadline(), cancel, &guard.name)
            .await;
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

    /// Begins a call whose guard the caller will run on its own thread
    /// with [`Here::run`]: the script door's server thread, which answers a
    /// worker's `in_process` calls without a thread handoff. Same lookup,
    /// argument checks, deadline, span and events as [`Executor::call`],
    /// recorded under `scope`; no call slot (the task holds one), but a
    /// guard-thread permit like any in-process call, waited for through
    /// `runtime` when none is free. The returned [`Call`] settles the call
    /// (and may be parked for a watchdog to [`Call::abandon`] at its
    /// deadline); the [`Here`] runs it. Isolated guards are refused: they
    /// need [`Executor::call`].
    pub fn begin_here<S: CallScope>(
        &self,
        request: &CallRequest<'_>,
        runtime: &tokio::runtime::Handle,
        scope: S,
    ) -> Result<(Call<S>, Here<'_>), Failure> {
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
        let call = self.start(guard, request, scope, (None, Some(held.clone())));
        if let Some(recorded) = call.put_on_ledger()
            && let Err(reason) = runtime.block_on(on_ledger(recorded, call.deadline()))
        {
            return Err(call.unrecorded(&reason));
        }
        let here = Here {
            guard,
            resources: &self.resources,
            span: call.span().clone(),
            held,
        };
        Ok((call, here))
    }

    /// Looks the guard up and checks the arguments' depth and size. A
    /// guard the policy denies the caller is, for it, a guard that does not
    /// exist: the same `unknown_guard` error, naming only what it may call.
    ///
    /// A request that is over starts nothing: once it is cancelled or past
    /// its outer deadline, no call of it begins, on any path. An in-process
    /// guard cannot be stopped once it runs, so this is where a destructive
    /// call the person approved while its request was being cancelled (the
    /// answer outran the cancellation) is stopped.
    fn check(&self, request: &CallRequest<'_>) -> Result<&warden_core::guard::Guard, Failure> {
        if request.cancel.is_cancelled() {
            return Err(Failure::new(
                Status::Cancelled,
                GuardError::new(
                    codes::CANCELLED,
                    format!(
                        "call to '{}' did not start: its request was cancelled",
                        request.guard
                    ),
                ),
            ));
        }
        if request.deadline_cap.is_some_and(|cap| cap <= Instant::now()) {
            return Err(Failure::new(
                Status::TimedOut,
                GuardError::new(
                    codes::TIMED_OUT,
                    format!(
                        "call to '{}' did not start: its task's deadline had passed",
                        request.guard
                    ),
                ),
            ));
        }
        let origin = request.origin;
        let guard = self
            .registry
            .get(request.guard)
            .filter(|g| self.permit(&origin.principal, &origin.scopes, &g.name).is_ok())
            .ok_or_else(|| {
                Failure::new(
                    Status::Failed,
                    self.visible_to(origin).unknown_guard(request.guard),
                )
            })?;
        arguments::check(&request.arguments, self.limits.max_argument_bytes)?;
        confirm::admits(guard, &request.arguments, &request.consent)
            .map_err(|error| Failure::new(Status::Failed, error))?;
        Ok(guard)
    }

    /// Fixes an admitted call's deadline and begins it under `scope`.
    fn start<S: CallScope>(
        &self,
        guard: &warden_core::guard::Guard,
        request: &CallRequest<'_>,
        scope: S,
        admitted: (Option<Admitted>, Option<Held>),
    ) -> Call<S> {
        let timeout = self.limits.guard_deadline(guard.timeout);
        let mut deadline = Instant::now() + timeout;
        if let Some(cap) = request.deadline_cap {
            deadline = deadline.min(cap);
        }
        Call::begin(
            guard,
            (&request.arguments, &request.consent),
            scope,
            timeout,
            deadline,
            admitted,
        )
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
    pub fn take_rate(&self, principal: &Principal) -> Result<(), Failure> {
        self.rate
            .take(principal)
            .map_err(|error| Failure::new(Status::Rejected, error))
    }

    /// Starts a worker that answers a ping without calling any guard; used by
    /// preflight and `/readyz` to prove isolation works on this machine.
    pub async fn ping_worker(&self) -> Result<(u32, usize), Failure> {
        let timeout = std::time::Duration::from_secs(10);
        let rlimits = Rlimits::for_call(&self.limits.worker, timeout.as_secs());
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

/// Waits for a side effect's start to be on its task's ledger, at most
/// until the call's deadline (a store that hangs must not hold a call past
/// it); `Err` says why it is not.
async fn on_ledger(
    recorded: warden_core::future::BoxFuture<'static, Result<(), String>>,
    deadline: Instant,
) -> Result<(), String> {
    tokio::time::timeout_at(deadline, recorded)
        .await
        .unwrap_or_else(|_| Err("the task store did not answer before the call's deadline".into()))
}
