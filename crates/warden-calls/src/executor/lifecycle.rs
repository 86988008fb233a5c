//! One guard call from *begun* to *settled*, as a value.
//!
//! A call is begun when the executor has admitted it (call slot, guard-thread
//! permit), fixed its deadline, written `function_call_started` and opened
//! its span; it is settled when the span is closed and
//! `function_call_finished` is written. [`Call`] is that interval: the
//! executor hands one out when it begins a call (inside
//! [`super::Executor::call`] for direct, batch and isolated script calls;
//! through [`super::Executor::begin_here`] for the script door's in-process
//! calls), and the only ways out consume it:
//!
//! - [`Call::finish`] with the function's outcome;
//! - [`Call::abandon`] when the caller is answered before the function
//!   returned (the door's watchdog at a deadline, the end of a run);
//! - dropping it unsettled — a dropped future, an early return, a panic —
//!   which settles it `cancelled`.
//!
//! So a begun call is settled exactly once, whatever path leaves it, and no
//! caller re-implements the settling. The call owns what settling gives
//! back: its call slot (freed), its guard-thread permit (turned overdue when
//! the function still runs, see `threads`), its span, and the caller's own
//! records, which [`CallScope::settled`] writes (the door's
//! function_calls.json). Running the function is not this module's job: it
//! is the executor's (`in_process`, `isolated`, [`Here`]).

use std::sync::Arc;
use std::time::{Duration, Instant as StdInstant};

use serde_json::{Value, json};
use tokio::time::Instant;

use super::admission::Admitted;
use super::confirm::Consent;
use super::threads::Held;
use super::{Failure, Status};
use crate::events::recovered::SideEffect;
use crate::events::{Events, Origin};
use warden_core::error::{GuardError, codes};
use warden_core::future::BoxFuture;
use warden_core::guard::{Guard, Resources};

/// Who a begun call's records are about and where they go, for as long as
/// the call is open. A trait, not a struct, so that a call borrowed from its
/// request costs no clone (`Borrowed`) while one parked for the door's
/// watchdog owns its scope.
pub trait CallScope {
    fn events(&self) -> &Events;
    fn origin(&self) -> &Origin;
    /// Called once, right after `function_call_finished` is written: the
    /// caller's own records of the call, if it keeps any.
    fn settled(&self, _settled: &Settled<'_>) {}
}

/// A scope shared with whoever else holds it (the script door's run, which
/// its watchdog also reads) is a scope.
impl<T: CallScope + ?Sized> CallScope for Arc<T> {
    fn events(&self) -> &Events {
        (**self).events()
    }

    fn origin(&self) -> &Origin {
        (**self).origin()
    }

    fn settled(&self, settled: &Settled<'_>) {
        (**self).settled(settled)
    }
}

/// A call's scope borrowed from its request (what [`super::Executor::call`]
/// uses): events go to `events`, attributed to `origin`, and the caller's
/// own record, if any, is written by `record` when the call settles.
pub(super) struct Borrowed<'a> {
    pub events: &'a Events,
    pub origin: &'a Origin,
    pub record: Option<Record<'a>>,
}

/// A caller's own record of a call ([`super::CallRequest::record`]).
#[derive(Clone, Copy)]
pub struct Record<'a>(pub &'a (dyn Fn(&Settled<'_>) + Send + Sync + 'a));

impl std::fmt::Debug for Record<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Record(..)")
    }
}

impl CallScope for Borrowed<'_> {
    fn events(&self) -> &Events {
        self.events
    }

    fn origin(&self) -> &Origin {
        self.origin
    }

    fn settled(&self, settled: &Settled<'_>) {
        if let Some(Record(record)) = self.record {
            record(settled);
        }
    }
}

/// How a call ended, as [`CallScope::settled`] sees it.
#[derive(Debug)]
pub struct Settled<'a> {
    pub function: &'a str,
    pub status: Status,
    pub error_type: Option<&'a str>,
    /// From begun to settled (the event's `duration_ms`).
    pub duration: Duration,
    /// What the function returned, when it succeeded (a caller that keeps
    /// receipts hashes it).
    pub output: Option<&'a Value>,
}

/// A begun, not yet settled guard call. See the module doc: settled exactly
/// once, by [`Call::finish`], [`Call::abandon`] or its `Drop`.
pub struct Call<S: CallScope> {
    scope: S,
    function: String,
    call_id: String,
    span: opentelemetry::Context,
    at: StdInstant,
    /// The guard's own timeout (before the caller's cap).
    timeout: Duration,
    /// When the call must be answered: the guard's timeout, capped by the
    /// caller's deadline.
    deadline: Instant,
    /// The call slot of a direct call (none for calls whose caller bounds
    /// its own concurrency). Dropped when the call settles: answered, the
    /// slot is free even if the function runs on.
    slot: Option<Admitted>,
    /// The guard-thread permit of an in-process call, shared with the thread
    /// running the function (which releases it when the function returns).
    /// Turned overdue when the call is answered before that.
    held: Option<Held>,
    /// True until the call is settled; what makes `Drop` a no-op after
    /// [`Call::finish`] or [`Call::abandon`].
    open: bool,
    /// The side effect this call makes, when its guard is annotated
    /// destructive: its records say so and are written through, and its
    /// task's ledger gets them (see [`Call::begin`]).
    side_effect: Option<SideEffect>,
}

impl<S: CallScope> std::fmt::Debug for Call<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Call")
            .field("function", &self.function)
            .field("call_id", &self.call_id)
            .field("open", &self.open)
            .finish_non_exhaustive()
    }
}

impl<S: CallScope> Call<S> {
    /// Begins a call of `guard` with `arguments`: records
    /// `function_call_started` and opens its `function.call` span. The
    /// admission (`slot`, `held`) is already done; from here on the call is
    /// settled exactly once.
    ///
    /// A side effect is on disk before it happens: the records of a
    /// destructive guard's call carry `"destructive": true` (the start also
    /// the arguments' SHA-256, the end the output's) and are written through
    /// to the task's own log before the function runs and when it settles
    /// ([`Events::write_through`]). So a task whose server or machine died
    /// under it still names every side effect it started and how far each
    /// got (`warden_calls::events::recovered`). A task on a shared store
    /// also has a ledger beyond its node ([`crate::events::ledger`]): the
    /// executor puts the start there before the function runs
    /// ([`Call::put_on_ledger`]) and refuses the call when it cannot
    /// ([`Call::unrecorded`]); the end follows as the call settles. The
    /// side effect names the person's answer that let it run, when one did
    /// (`consent`).
    pub(super) fn begin(
        guard: &Guard,
        (arguments, consent): (&Value, &Consent),
        scope: S,
        timeout: Duration,
        deadline: Instant,
        (slot, held): (Option<Admitted>, Option<Held>),
    ) -> Self {
        let call_id = crate::events::next_id("call");
        let side_effect = guard
            .hints
            .destructive
            .then(|| SideEffect::started(&guard.name, &warden_core::receipt::digest(arguments)))
            .map(|side_effect| match consent {
                Consent::Confirmed(approval) => side_effect.approved_by(approval.answer().cloned()),
                _ => side_effect,
            });
        let mut started =
            json!({"function": guard.name, "call_id": call_id, "execution_mode": guard.mode.as_str()});
        if let Some(side_effect) = &side_effect {
            started["destructive"] = Value::Bool(true);
            started["arguments_sha256"] = side_effect.arguments_sha256.clone().into();
        }
        scope
            .events()
            .emit(scope.origin(), "function_call_started", started);
        if side_effect.is_some() {
            scope.events().write_through();
        }
        let span = crate::telemetry::start(
            "function.call",
            opentelemetry::trace::SpanKind::Internal,
            &scope.origin().trace,
            vec![
                opentelemetry::KeyValue::new("warden.function", guard.name.clone()),
                opentelemetry::KeyValue::new("warden.execution_mode", guard.mode.as_str()),
            ],
        );
        Self {
            scope,
            function: guard.name.clone(),
            call_id,
            span,
            at: StdInstant::now(),
            timeout,
            deadline,
            slot,
            held,
            open: true,
            side_effect,
        }
    }

    /// Puts the start of this call's side effect on its task's ledger
    /// ([`crate::events::ledger`]), when it makes one and the task has a
    /// ledger: the executor awaits it before the function runs. `None`:
    /// nothing to put there.
    pub(super) fn put_on_ledger(&self) -> Option<BoxFuture<'static, Result<(), String>>> {
        let side_effect = self.side_effect.as_ref()?;
        let ledger = self.scope.events().ledger()?;
        Some(ledger.started(&self.call_id, side_effect))
    }

    /// Settles a call whose side effect could not be put on its task's
    /// ledger (`reason`) before its function ran, which it then never
    /// does; returns the failure for the caller's answer.
    pub(super) fn unrecorded(mut self, reason: &str) -> Failure {
        let failure = Failure::new(
            Status::Failed,
            GuardError::new(
                codes::SIDE_EFFECT_UNRECORDED,
                format!(
                    "'{}' is annotated destructive and its start could not be recorded in the shared task store \
                     before it ran ({reason}); it did not run: retry once the store answers (the server's /readyz \
                     says when)",
                    self.function
                ),
            ),
        );
        self.settle(failure.status, Some(&failure.error.code), None);
        failure
    }

    /// The guard called.
    pub fn function(&self) -> &str {
        &self.function
    }

    /// When the call must be answered.
    pub fn deadline(&self) -> Instant {
        self.deadline
    }

    pub(super) fn timeout(&self) -> Duration {
        self.timeout
    }

    pub(super) fn span(&self) -> &opentelemetry::Context {
        &self.span
    }

    pub(super) fn held(&self) -> Option<&Held> {
        self.held.as_ref()
    }

    /// Settles the call with the function's outcome, and hands it back.
    pub fn finish(mut self, outcome: Result<Value, Failure>) -> Result<Value, Failure> {
        match &outcome {
            Ok(output) => self.settle(Status::Success, None, Some(output)),
            Err(failure) => self.settle(failure.status, Some(&failure.error.code), None),
        }
        outcome
    }

    /// Settles the call with `failure`, answered before its function
    /// returned: the thread running it trades its permit for an overdue one
    /// (see `threads`). Returns `failure` for the caller's answer.
    pub fn abandon(mut self, failure: Failure) -> Failure {
        self.overrun();
        self.settle(failure.status, Some(&failure.error.code), None);
        failure
    }

    fn overrun(&self) {
        if let Some(held) = &self.held {
            held.overrun();
        }
    }

    /// Frees the call slot, closes the span, writes `function_call_finished`
    /// and tells the scope. Does nothing the second time (only `Drop` can
    /// get here after `finish` or `abandon`, and it checks first).
    fn settle(&mut self, status: Status, error_type: Option<&str>, output: Option<&Value>) {
        if !std::mem::replace(&mut self.open, false) {
            return;
        }
        self.slot = None;
        let duration = self.at.elapsed();
        crate::telemetry::end(&self.span, status.as_str(), error_type);
        let mut finished = json!({
            "function": self.function,
            "call_id": self.call_id,
            "status": status.as_str(),
            "error_type": error_type,
            "duration_ms": duration.as_secs_f64() * 1000.0,
        });
        let output_sha256 = self
            .side_effect
            .as_ref()
            .and_then(|_| output.map(warden_core::receipt::digest));
        if self.side_effect.is_some() {
            finished["destructive"] = Value::Bool(true);
            finished["output_sha256"] = output_sha256.clone().into();
        }
        self.scope
            .events()
            .emit(self.scope.origin(), "function_call_finished", finished);
        if let Some(side_effect) = self.side_effect.take() {
            self.scope.events().write_through();
            // A start the ledger did not take has no end there: it never ran.
            if let Some(ledger) = self.scope.events().ledger()
                && error_type != Some(codes::SIDE_EFFECT_UNRECORDED)
            {
                let settled = side_effect.settled(status.as_str(), error_type, output_sha256);
                ledger.settled(&self.call_id, &settled);
            }
        }
        self.scope.settled(&Settled {
            function: &self.function,
            status,
            error_type,
            duration,
            output,
        });
    }
}

impl<S: CallScope> Drop for Call<S> {
    /// A call nobody settled — its future was dropped, its caller returned
    /// early or panicked — is settled `cancelled` here, once; a function
    /// still running keeps only an overdue permit, like any answered call.
    fn drop(&mut self) {
        if self.open {
            self.overrun();
            self.settle(Status::Cancelled, Some(codes::CANCELLED), None);
        }
    }
}

/// What a thread needs to run an in-process call begun by
/// [`super::Executor::begin_here`] itself: the other half of that call,
/// which the caller may park where a watchdog can settle it meanwhile.
pub struct Here<'e> {
    pub(super) guard: &'e Guard,
    pub(super) resources: &'e Arc<Resources>,
    pub(super) span: opentelemetry::Context,
    pub(super) held: Held,
}

impl Here<'_> {
    /// Runs the function on the current thread, catching a panic, and
    /// releases the guard-thread permit when it returns. Does not settle
    /// the call: whoever holds its [`Call`] does (a thread cannot be
    /// interrupted, so the caller must be able to answer `timed_out`
    /// without this returning; see `script::host::door`).
    pub fn run(self, arguments: Value) -> Result<Value, Failure> {
        let outcome = super::in_process::invoke_caught(self.guard, self.resources, &self.span, arguments);
        self.held.release();
        outcome
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};

    use super::*;
    use crate::executor::{Admission, CallRequest, Executor, WorkerLauncher};
    use crate::limits::CallLimits;
    use warden_core::error::GuardError;
    use warden_core::guard::guard;
    use warden_core::registry::Registry;

    #[derive(serde::Deserialize, schemars::JsonSchema)]
    struct Nothing {}

    /// Answers at once.
    fn quick(_: &Resources, _: Nothing) -> Result<f64, GuardError> {
        Ok(1.0)
    }

    static HOLDING: AtomicBool = AtomicBool::new(false);
    static LET_GO: AtomicBool = AtomicBool::new(false);

    /// Runs until the test lets it go.
    fn hold(_: &Resources, _: Nothing) -> Result<f64, GuardError> {
        HOLDING.store(true, Ordering::SeqCst);
        while !LET_GO.load(Ordering::SeqCst) {
            std::thread::sleep(Duration::from_millis(2));
        }
        Ok(1.0)
    }

    static COUNTED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

    /// Counts its runs (a side effect a test can see).
    fn counted(_: &Resources, _: Nothing) -> Result<f64, GuardError> {
        COUNTED.fetch_add(1, Ordering::SeqCst);
        Ok(1.0)
    }

    /// A side effect: reads its own task log from the disk while it runs.
    fn wipe(_: &Resources, _: Nothing) -> Result<f64, GuardError> {
        let dir = WIPE_LOG.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let on_disk = dir.map(|d| std::fs::read_to_string(d.join("events.jsonl")).unwrap_or_default());
        *WIPE_SAW.lock().unwrap_or_else(|p| p.into_inner()) = on_disk;
        Ok(1.0)
    }

    static ERASED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

    /// A destructive guard that counts its runs (for the ledger's test alone).
    fn erase(_: &Resources, _: Nothing) -> Result<f64, GuardError> {
        ERASED.fetch_add(1, Ordering::SeqCst);
        Ok(2.0)
    }

    /// A ledger in memory: every start and settlement it was given, in
    /// order; `refuse` makes it refuse starts.
    #[derive(Debug, Default)]
    struct Kept {
        entries: std::sync::Mutex<Vec<(String, SideEffect)>>,
        refuse: bool,
    }

    impl crate::events::ledger::Ledger for Kept {
        fn started(&self, call_id: &str, side_effect: &SideEffect) -> BoxFuture<'static, Result<(), String>> {
            let outcome = if self.refuse {
                Err("the database did not answer".to_string())
            } else {
                let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
                entries.push((call_id.to_string(), side_effect.clone()));
                Ok(())
            };
            Box::pin(async move { outcome })
        }

        fn settled(&self, call_id: &str, side_effect: &SideEffect) {
            let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
            entries.push((call_id.to_string(), side_effect.clone()));
        }
    }

    #[tokio::test]
    async fn a_side_effect_its_ledger_cannot_record_never_runs_and_one_it_records_is_settled_there() {
        // A task on a shared store puts each destructive call's start on its ledger before the
        // function runs; a start the ledger refuses refuses the call, on both ways to begin one.
        let setup = Setup::new("script", "run_script");
        let origin = &setup.origin;
        let kept = Arc::new(Kept::default());
        let events = setup.events.clone().with_ledger(kept.clone());
        let erase = || {
            request("erase", origin, &events, Admission::InTask)
                .consent(super::super::confirm::Consent::Direct)
        };
        let output = setup.executor.call(erase()).await.expect("it ran");
        assert_eq!(ERASED.load(Ordering::SeqCst), 1);
        let entries = kept.entries.lock().unwrap_or_else(|p| p.into_inner()).clone();
        assert_eq!(entries.len(), 2, "{entries:?}");
        assert_eq!(
            entries[0].0, entries[1].0,
            "one call id for the start and the end"
        );
        assert_eq!(entries[0].1.status, "unknown");
        assert_eq!(
            entries[0].1.arguments_sha256.as_deref(),
            Some(warden_core::receipt::digest(&json!({})).as_str())
        );
        assert_eq!(entries[1].1.status, "success");
        assert_eq!(
            entries[1].1.output_sha256.as_deref(),
            Some(warden_core::receipt::digest(&output).as_str())
        );
        // An ordinary call puts nothing there.
        let quick = request("quick", origin, &events, Admission::InTask);
        setup.executor.call(quick).await.expect("quick ran");
        assert_eq!(kept.entries.lock().unwrap_or_else(|p| p.into_inner()).len(), 2);

        let refusing = Arc::new(Kept {
            refuse: true,
            ..Kept::default()
        });
        let events = setup.events.clone().with_ledger(refusing.clone());
        let erase = || {
            request("erase", origin, &events, Admission::InTask)
                .consent(super::super::confirm::Consent::Direct)
        };
        let refused = setup.executor.call(erase()).await.expect_err("unrecorded");
        assert_eq!(refused.error.code, codes::SIDE_EFFECT_UNRECORDED);
        assert!(
            refused.error.message.contains("did not run"),
            "{}",
            refused.error.message
        );
        // The door's way: begun on a thread that is not the runtime's.
        let runtime = tokio::runtime::Handle::current();
        let executor = &setup.executor;
        let door = std::thread::scope(|threads| {
            threads
                .spawn(|| {
                    let scope = Borrowed {
                        events: &events,
                        origin,
                        record: None,
                    };
                    executor.begin_here(&erase(), &runtime, scope).map(|_| ())
                })
                .join()
        });
        let refused = door.expect("the door thread").expect_err("unrecorded");
        assert_eq!(refused.error.code, codes::SIDE_EFFECT_UNRECORDED);
        assert_eq!(
            ERASED.load(Ordering::SeqCst),
            1,
            "a refused side effect never ran"
        );
        let ended = refusing.entries.lock().unwrap_or_else(|p| p.into_inner()).len();
        assert_eq!(ended, 0, "and has no end on the ledger");
        let records = finished(&events, setup.dir.path());
        let erased: Vec<&Value> = records.iter().filter(|r| r["function"] == "erase").collect();
        assert_eq!(erased.len(), 3, "{records:?}");
        assert_eq!(erased[2]["status"], "failed");
        assert_eq!(erased[2]["error_type"], codes::SIDE_EFFECT_UNRECORDED);
    }

    static WIPE_LOG: std::sync::Mutex<Option<std::path::PathBuf>> = std::sync::Mutex::new(None);
    static WIPE_SAW: std::sync::Mutex<Option<String>> = std::sync::Mutex::new(None);

    /// An isolated guard: this executor has no worker binary to run it.
    fn far(_: Nothing) -> Result<f64, GuardError> {
        Ok(1.0)
    }

    /// An executor with one call slot and one running guard-thread permit
    /// (plus one overdue), waiting 50 ms for either.
    fn executor(dir: &std::path::Path) -> Executor {
        let limits = CallLimits {
            max_concurrent_calls: 1,
            max_guard_threads: 1,
            max_overdue_in_process: 1,
            admission_wait: Duration::from_millis(50),
            ..CallLimits::default()
        };
        let registry = Registry::new(vec![
            guard(quick),
            guard(hold),
            guard(counted),
            guard(far),
            guard(wipe).destructive(),
            guard(erase).destructive(),
        ])
        .expect("registry");
        let launcher = WorkerLauncher::new(dir.join("no-worker"), dir.to_path_buf(), 1 << 20, 1 << 20);
        Executor::new(
            Arc::new(registry),
            Arc::new(Resources::default()),
            limits,
            Events::disabled(),
            launcher,
        )
    }

    fn request<'a>(
        guard: &'a str,
        origin: &'a Origin,
        events: &'a Events,
        admission: Admission,
    ) -> CallRequest<'a> {
        CallRequest::new(
            guard,
            json!({}),
            origin,
            tokio_util::sync::CancellationToken::new(),
        )
        .admission(admission)
        .events(events)
    }

    /// What each test starts from: a temporary task directory, the
    /// executor, a task log in that directory and a request's origin.
    struct Setup {
        dir: tempfile::TempDir,
        executor: Executor,
        events: Events,
        origin: Origin,
    }

    impl Setup {
        fn new(mode: &'static str, tool: &str) -> Self {
            let dir = tempfile::tempdir().expect("temp dir");
            let executor = executor(dir.path());
            let events = Events::disabled().with_task_log(dir.path());
            Self {
                dir,
                executor,
                events,
                origin: Origin::request(mode, tool),
            }
        }

        /// The scope of a call borrowed from this request, with no record of the caller's.
        fn scope(&self) -> Borrowed<'_> {
            Borrowed {
                events: &self.events,
                origin: &self.origin,
                record: None,
            }
        }
    }

    /// The `function_call_finished` records of the task log in `dir`.
    fn finished(events: &Events, dir: &std::path::Path) -> Vec<Value> {
        events.flush_task_log();
        std::fs::read_to_string(dir.join("events.jsonl"))
            .unwrap_or_default()
            .lines()
            .filter_map(|line| serde_json::from_str::<Value>(line).ok())
            .filter(|record| record["event"] == "function_call_finished")
            .collect()
    }

    #[tokio::test]
    async fn a_side_effect_is_on_disk_before_it_runs_and_as_soon_as_it_settles() {
        // A destructive guard's start is written through to the task's log before the function
        // runs, with the arguments' hash; its end as it settles. Other calls' records wait in the
        // buffer until the task ends.
        let setup = Setup::new("script", "run_script");
        let Setup {
            dir,
            executor,
            events,
            origin,
        } = &setup;
        let runtime = tokio::runtime::Handle::current();
        let scope = || setup.scope();
        *WIPE_LOG.lock().unwrap_or_else(|p| p.into_inner()) = Some(dir.path().to_path_buf());
        let on_disk = || std::fs::read_to_string(dir.path().join("events.jsonl")).unwrap_or_default();
        let quick = request("quick", origin, events, Admission::InTask);
        let (call, here) = executor.begin_here(&quick, &runtime, scope()).expect("begun");
        assert!(call.finish(here.run(json!({}))).is_ok());
        assert_eq!(
            on_disk(),
            "",
            "an ordinary call's records wait for the task's end"
        );

        let wipe = request("wipe", origin, events, Admission::InTask)
            .consent(super::super::confirm::Consent::Direct);
        let (call, here) = executor.begin_here(&wipe, &runtime, scope()).expect("begun");
        let output = call.finish(here.run(json!({}))).expect("it ran");
        let saw = WIPE_SAW
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
            .unwrap_or_default();
        let started: Vec<Value> = saw
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|r| r["event"] == "function_call_started" && r["function"] == "wipe")
            .collect();
        assert_eq!(started.len(), 1, "the guard saw its start on disk: {saw}");
        assert_eq!(started[0]["destructive"], true);
        assert_eq!(
            started[0]["arguments_sha256"],
            warden_core::receipt::digest(&json!({})).as_str()
        );
        let text = on_disk();
        let ended = text
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .find(|r| r["event"] == "function_call_finished" && r["function"] == "wipe")
            .expect("its end is on disk before the task ends");
        assert_eq!(ended["status"], "success");
        assert_eq!(
            ended["output_sha256"],
            warden_core::receipt::digest(&output).as_str()
        );
    }

    #[tokio::test]
    async fn a_begun_call_nobody_finishes_is_settled_cancelled_exactly_once() {
        // Dropping a begun call settles it `cancelled` once; a finished one is never settled twice.
        let setup = Setup::new("script", "run_script");
        let Setup {
            dir,
            executor,
            events,
            origin,
        } = &setup;
        let runtime = tokio::runtime::Handle::current();
        let scope = || setup.scope();
        let abandoned = request("quick", origin, events, Admission::InTask);
        let (call, here) = executor.begin_here(&abandoned, &runtime, scope()).expect("begun");
        drop(here);
        drop(call);
        let records = finished(events, dir.path());
        assert_eq!(records.len(), 1, "{records:?}");
        assert_eq!(records[0]["status"], "cancelled");
        assert_eq!(records[0]["error_type"], "cancelled");
        // Its guard-thread permit is free again; a finished call is recorded once.
        let (call, here) = executor
            .begin_here(&abandoned, &runtime, scope())
            .expect("permit free again");
        let outcome = call.finish(here.run(json!({})));
        assert!(outcome.is_ok(), "{outcome:?}");
        let records = finished(events, dir.path());
        assert_eq!(records.len(), 2, "{records:?}");
        assert_eq!(records[1]["status"], "success");
    }

    #[tokio::test]
    async fn a_dropped_call_frees_its_slot_and_running_permit_and_is_recorded_once() {
        // A direct call whose future is dropped mid-run is settled `cancelled`, frees its call
        // slot, and its still-running function moves to an overdue permit: the next call runs.
        let dir = tempfile::tempdir().expect("temp dir");
        let executor = executor(dir.path());
        let events = Events::disabled().with_task_log(dir.path());
        let origin = Origin::request("direct", "hold");
        // The caller's own record (a script's function_calls.json) is written by the drop too.
        let recorded = std::sync::Mutex::new(Vec::new());
        let record = |settled: &Settled<'_>| {
            let mut recorded = recorded.lock().unwrap_or_else(|p| p.into_inner());
            recorded.push((settled.function.to_string(), settled.status.as_str()));
        };
        let mut held = request("hold", &origin, &events, Admission::TryNow);
        held.record = Some(Record(&record));
        let mut call = Box::pin(executor.call(held));
        let started = tokio::time::Instant::now();
        while !HOLDING.load(Ordering::SeqCst) {
            tokio::select! {
                outcome = &mut call => panic!("answered while holding: {outcome:?}"),
                _ = tokio::time::sleep(Duration::from_millis(5)) => {}
            }
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "the guard never started"
            );
        }
        let records = finished(&events, dir.path());
        assert!(records.is_empty(), "{records:?}");
        drop(call);
        let records = finished(&events, dir.path());
        assert_eq!(records.len(), 1, "{records:?}");
        assert_eq!(records[0]["function"], "hold");
        assert_eq!(records[0]["status"], "cancelled");
        let recorded = recorded.lock().unwrap_or_else(|p| p.into_inner()).clone();
        assert_eq!(recorded, [("hold".to_string(), "cancelled")]);
        let next = executor
            .call(request("quick", &origin, &events, Admission::TryNow))
            .await;
        LET_GO.store(true, Ordering::SeqCst);
        assert!(next.is_ok(), "{next:?}");
        assert_eq!(finished(&events, dir.path()).len(), 2);
    }

    #[tokio::test]
    async fn a_request_that_is_over_starts_no_call_on_any_path() {
        // Cancelled, or past its task's deadline: refused before it begins, in process or
        // isolated, through `call` and `begin_here`; the guard never runs and nothing is settled.
        let setup = Setup::new("script", "run_script");
        let Setup {
            dir,
            executor,
            events,
            origin,
        } = &setup;
        let runtime = tokio::runtime::Handle::current();
        let scope = || setup.scope();
        for guard in ["counted", "far"] {
            let cancelled = request(guard, origin, events, Admission::InTask);
            cancelled.cancel.cancel();
            let refused = executor.call(cancelled).await.expect_err("cancelled");
            assert_eq!(refused.status, Status::Cancelled, "{guard}");
            assert_eq!(refused.error.code, codes::CANCELLED, "{guard}");
            assert!(
                refused.error.message.contains("did not start"),
                "{}",
                refused.error.message
            );
            let overdue = request(guard, origin, events, Admission::InTask)
                .in_task(tokio::time::Instant::now() - Duration::from_millis(1));
            let refused = executor.call(overdue).await.expect_err("past its deadline");
            assert_eq!(refused.status, Status::TimedOut, "{guard}");
            assert_eq!(refused.error.code, codes::TIMED_OUT, "{guard}");
        }
        let cancelled = request("counted", origin, events, Admission::InTask);
        cancelled.cancel.cancel();
        let refused = executor
            .begin_here(&cancelled, &runtime, scope())
            .map(|_| ())
            .expect_err("cancelled");
        assert_eq!(refused.status, Status::Cancelled);
        assert_eq!(COUNTED.load(Ordering::SeqCst), 0, "the guard ran");
        assert!(finished(events, dir.path()).is_empty());
        // The same request, not cancelled, runs.
        let live = request("counted", origin, events, Admission::InTask);
        assert!(executor.call(live).await.is_ok());
        assert_eq!(COUNTED.load(Ordering::SeqCst), 1);
    }
}
