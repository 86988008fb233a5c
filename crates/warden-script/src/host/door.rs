//! The server's end of a script worker's door: a thread that answers it.
//!
//! A script blocks on every guard call it sends, so what one call costs is
//! the hops between the worker and whoever answers. An async reader handing
//! each call to a blocking thread and back cost about eleven context
//! switches per call; here one OS thread per session (the *door thread*)
//! reads the worker's pipe with blocking reads and runs `in_process` guards
//! itself through [`Executor::begin_here`] — same validation, events, spans
//! and deadline as any call, and the same [`Call`] that settles it — so a
//! call costs the two pipe crossings and nothing else. Inline pure-call
//! batches are recorded here too, and every call goes to the task's
//! function_calls.json (a settled [`Call`] records itself there, through
//! [`Run`]'s [`CallScope`]). A `map_call` of an in-process guard runs its items
//! here one after another and answers them in one reply (an isolated
//! guard's items go to the session, which does the same). Everything that needs the async world (isolated
//! guards, artifact writes and reads, progress notifications, the end of a
//! run) is handed to the session as a [`DoorEvent`].
//!
//! A thread cannot be interrupted, so the *deadline* of a call running here
//! is kept by the session's watchdog ([`Door::settle_overdue`]): the call's
//! [`Call`] is parked where the watchdog can take it, and the watchdog
//! abandons it (which records its end), answers the worker `timed_out`, and
//! starts a fresh door thread on the same pipe. The stuck thread finds its
//! call settled when the guard finally returns and exits without touching
//! the pipe again.
//! Every call run here holds a guard-thread permit from the executor (the
//! same budget as every other in-process call) from before it starts until
//! the guard returns, and the watchdog moves it to an overdue permit like
//! any overrunning call; a replaced thread therefore always holds one, and
//! a script looping over a hanging guard gets `server_busy` (catchable)
//! once the budget is spent, instead of one more thread per call.
//!
//! A worker's line is read no further than [`worker_line_cap`] bytes: a
//! guard call or artifact write over it is skipped to its end and answered
//! with a catchable error; any other line over it ends the run with the
//! reason. A guard call too deeply nested for serde_json to decode is
//! answered `invalid_arguments` (catchable) the same way.
//! The watchdog needs no message per call: it wakes at the in-flight call's
//! deadline or after the shortest `in_process` timeout, whichever is first,
//! and any call that starts meanwhile cannot be due before that.
//!
//! A door thread must never start a worker process itself: `PDEATHSIG`
//! follows the thread that forked, and door threads end when they are
//! replaced. Isolated calls are therefore always handed to the session.

use std::io::{BufRead, BufReader, PipeReader, PipeWriter, Read, Write};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use serde_json::Value;
use tokio::sync::mpsc::UnboundedSender;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::calls::{CallLog, CallRecord};
use super::journal::{Journal, Step};
use crate::limits::{DEFAULT_MAX_ARTIFACT_BYTES, DEFAULT_PURE_CALLS_DETAILED, worker_line_cap};
use crate::protocol::{FromWorker, Layers, PURE_BATCH_PREFIX, PureBatch, RunOutcome, ToWorker};
use warden_calls::events::{Events, Origin};
use warden_calls::executor::arguments::{text_depth, too_deep};
use warden_calls::executor::{
    Call, CallRequest, CallScope, Executor, Failure, Settled, Status, answered_early,
};
use warden_calls::limits::MAX_ARGUMENT_DEPTH;
use warden_core::error::{GuardError, codes};
use warden_core::guard::Mode;

/// Bytes read from the worker's pipe at once: 256 KiB (a batch of 1,024
/// pure calls is ~60 KiB).
const READ_BUFFER: usize = 256 * 1024;

/// How a `guard_call` line starts.
const GUARD_CALL_PREFIX: &[u8] = br#"{"type":"guard_call","#;
/// How a `map_call` line starts.
const MAP_CALL_PREFIX: &[u8] = br#"{"type":"map_call","#;
/// How a `write_artifact` line starts.
const WRITE_ARTIFACT_PREFIX: &[u8] = br#"{"type":"write_artifact","#;
/// How a `done` line starts.
const DONE_PREFIX: &[u8] = br#"{"type":"done","#;

/// A line buffer that grew past this (for one large message) is given back
/// rather than kept for the rest of the session: 1 MiB.
const KEEP_LINE_BUFFER: usize = 1024 * 1024;

/// What the door thread read from the worker.
enum Incoming {
    Message(FromWorker),
    /// A request answered at once without being decoded: over the line cap,
    /// or nested too deeply to decode. `guard` names a refused guard call
    /// (a refused `map_call` is answered as a whole and names none).
    Refused {
        guard: Option<String>,
        reply: ToWorker,
    },
}

/// Why the door stops serving a worker: its pipe closed or failed, or the
/// worker sent a line that is unreadable or over the cap. The run ends
/// with this as its reason (the session adds how the worker ended).
#[derive(Debug, thiserror::Error)]
pub enum DoorError {
    #[error("script worker closed its pipe")]
    PipeClosed,
    /// The session closed the worker's stdin already.
    #[error("script worker pipe is closed")]
    WriterClosed,
    #[error("script worker pipe: {0}")]
    Write(#[source] std::io::Error),
    #[error("{0}")]
    Read(#[source] std::io::Error),
    #[error("{0}")]
    Encode(#[source] serde_json::Error),
    #[error("unreadable pure_calls line from script worker: {0}")]
    PureBatch(#[source] serde_json::Error),
    #[error("unreadable message from script worker: {0}")]
    Unreadable(#[source] serde_json::Error),
    #[error(
        "the script's result is a {size}-byte message, over the {cap}-byte cap on a script's messages: return less, and write large data with write_artifact"
    )]
    ResultTooLarge { size: u64, cap: usize },
    #[error("script worker sent a {size}-byte message, over the {cap}-byte cap on a script's messages")]
    LineTooLarge { size: u64, cap: usize },
    #[error("cannot resume the door after a timed-out call: {0}")]
    Resume(#[source] std::io::Error),
    /// The run stopped on a question for the person (a detached task's
    /// destructive call with no answer yet): not a failure, see
    /// `warden_core::approval`.
    #[error("the run paused for the person's answer")]
    Paused,
    /// A resumed run made another call than the journal holds (see
    /// [`super::journal`]).
    #[error("{0}")]
    Diverged(String),
    /// A bug in the door itself, with the panic's message.
    #[error("the door thread panicked: {0}")]
    Panicked(String),
}

/// What the door thread hands to the session, in the order it happened.
#[derive(Debug)]
pub(crate) enum DoorEvent {
    Hello(Layers),
    /// A request the session answers with [`Door::reply`]: an isolated
    /// guard call, write_artifact or read_written_artifact.
    Request(FromWorker),
    /// A progress message (sent only when the client asked for progress).
    Progress(String),
    Done(Box<RunOutcome>),
    /// The pipe closed or carried something unreadable; the run is over.
    Closed(DoorError),
}

/// What the calls of the current run are attributed to. Set by the session
/// before each run.
pub(crate) struct RunScope {
    pub events: Events,
    pub origin: Origin,
    pub cancel: CancellationToken,
    /// The task's deadline: no call may be answered later.
    pub deadline: Instant,
    pub progress: bool,
    /// Who confirms a destructive guard's call (the run's client, when it
    /// can be asked); see `warden_calls::executor::confirm`.
    pub asker: warden_core::reach::Reach,
    /// The run's journal, when it may pause (a detached task): every
    /// request through the door is answered from it or recorded in it.
    pub journal: Option<Arc<Mutex<Journal>>>,
}

impl RunScope {
    /// Whether the run stopped on a question for the person.
    fn paused(&self) -> bool {
        self.asker.book().is_some_and(|book| book.paused())
    }
}

/// A run's scope as the door's calls see it: what they are attributed to,
/// and where the door keeps its own records of them.
struct Run {
    scope: RunScope,
    /// The door's [`Door::calls`].
    calls: Arc<Mutex<CallLog>>,
    /// The door's channel to the session, for progress notes.
    notes: UnboundedSender<DoorEvent>,
}

/// One call run on the door thread: its run, and its arguments' hash for
/// function_calls.json (taken before the guard consumed them).
struct InRun {
    run: Arc<Run>,
    arguments_sha256: String,
}

impl CallScope for InRun {
    fn events(&self) -> &Events {
        &self.run.scope.events
    }

    fn origin(&self) -> &Origin {
        &self.run.scope.origin
    }

    /// Records the settled call for function_calls.json and, when the
    /// client asked for progress, notes it.
    fn settled(&self, settled: &Settled<'_>) {
        let output_sha256 = settled.output.map(warden_core::receipt::digest);
        lock(&self.run.calls).push(&CallRecord {
            function: settled.function,
            status: settled.status.as_str(),
            error_type: settled.error_type,
            duration_ns: settled.duration.as_nanos() as u64,
            execution: "in_process",
            arguments_sha256: Some(&self.arguments_sha256),
            output_sha256: output_sha256.as_deref(),
        });
        if self.run.scope.progress {
            let _ = self.run.notes.send(DoorEvent::Progress(format!(
                "guard call {} {}",
                settled.function,
                settled.status.as_str()
            )));
        }
    }
}

/// What the door's threads are doing with a call: running one (parked
/// where the watchdog can settle it), and/or settling the one whose guard
/// just returned — its records are written then (a destructive call's
/// synced to disk), and the run's end waits for them too.
#[derive(Default)]
struct Slot {
    call: Option<InFlight>,
    /// The deadline of a call its own thread took out to settle, until it
    /// has (see [`Door::let_in_flight_finish`]).
    settling: Option<Instant>,
}

/// A call running on a door thread.
struct InFlight {
    /// The door thread running it (see [`Door::generation`]).
    generation: u64,
    /// Settles the call: taken out by whoever settles it first.
    call: Call<InRun>,
}

/// Shared by the session and its door threads.
pub(crate) struct Door {
    executor: Arc<Executor>,
    /// The worker's stdout. Held only by the active door thread while it
    /// reads a line; an abandoned thread never takes it again.
    reader: Mutex<BufReader<PipeReader>>,
    /// The worker's stdin; `None` once the session closed it.
    writer: Mutex<Option<PipeWriter>>,
    /// The call a door thread is running now, if any. Whoever takes it out
    /// (the thread when the guard returns, or the watchdog at the deadline)
    /// settles that call; the other side then leaves it alone. A call left
    /// here when the door goes settles itself `cancelled` (see [`Call`]).
    in_flight: Mutex<Slot>,
    /// Told when a door thread settles its own in-flight call (see
    /// [`Door::let_in_flight_finish`]).
    settled: tokio::sync::Notify,
    /// Identity of the active door thread; bumped when the watchdog
    /// replaces a stuck one.
    generation: AtomicU64,
    /// The current run is over (cancelled, timed out, its worker gone):
    /// set by [`Door::let_in_flight_finish`] before it looks at
    /// `in_flight`, read by a door thread right after it parks a call
    /// there, so a call begun as the run ended either is waited for or
    /// never runs (see [`Door::run_one`]). Cleared for the next run.
    over: std::sync::atomic::AtomicBool,
    /// The current run's attribution, replaced by [`Door::set_scope`].
    scope: Mutex<Option<Arc<Run>>>,
    /// Every guard call of the session: function_calls.json and counts.
    /// Shared with each run's [`Run`], whose calls record themselves here
    /// when they settle.
    pub calls: Arc<Mutex<CallLog>>,
    /// Inline pure calls still to be recorded one by one in events.jsonl
    /// (see [`DEFAULT_PURE_CALLS_DETAILED`]); later ones are summarized.
    detailed_pure_left: Mutex<usize>,
    /// The shortest timeout of any guard that runs here (see the module
    /// doc): how long the watchdog may sleep with nothing in flight.
    shortest_timeout: Option<Duration>,
    /// To the session, which reads it during runs. Lives as long as the
    /// door, so the end of the worker is told by [`DoorEvent::Closed`],
    /// not by the channel closing.
    events: UnboundedSender<DoorEvent>,
    /// The server's runtime, through which a door thread waits for a
    /// guard-thread permit when none is free.
    runtime: tokio::runtime::Handle,
    /// Longest line read from the worker ([`worker_line_cap`]).
    max_line: usize,
}

impl Door {
    /// Takes the parent's ends of the worker's pipes and starts the first
    /// door thread. Called inside the server's runtime.
    pub(crate) fn open(
        executor: Arc<Executor>,
        from_worker: PipeReader,
        to_worker: PipeWriter,
        calls: CallLog,
        events: UnboundedSender<DoorEvent>,
    ) -> std::io::Result<Arc<Self>> {
        let shortest_timeout = executor
            .registry()
            .iter()
            .filter(|g| g.mode() == Mode::InProcess)
            .map(|g| executor.limits().guard_deadline(g.timeout))
            .min();
        let runtime = tokio::runtime::Handle::try_current().map_err(std::io::Error::other)?;
        let max_line = worker_line_cap(executor.limits().max_argument_bytes);
        let door = Arc::new(Self {
            executor,
            reader: Mutex::new(BufReader::with_capacity(READ_BUFFER, from_worker)),
            writer: Mutex::new(Some(to_worker)),
            in_flight: Mutex::default(),
            settled: tokio::sync::Notify::new(),
            generation: AtomicU64::new(0),
            over: std::sync::atomic::AtomicBool::new(false),
            scope: Mutex::new(None),
            calls: Arc::new(Mutex::new(calls)),
            detailed_pure_left: Mutex::new(DEFAULT_PURE_CALLS_DETAILED),
            shortest_timeout,
            events,
            runtime,
            max_line,
        });
        door.spawn_thread(0)?;
        Ok(door)
    }

    /// Sets what the next run's calls are attributed to.
    pub(crate) fn set_scope(&self, scope: RunScope) {
        self.over.store(false, Ordering::SeqCst);
        *lock(&self.scope) = Some(Arc::new(Run {
            scope,
            calls: self.calls.clone(),
            notes: self.events.clone(),
        }));
    }

    /// Writes one message to the worker. The reply to a journaled
    /// request is recorded in the run's journal first.
    pub(crate) fn reply(&self, message: &ToWorker) -> Result<(), DoorError> {
        if let ToWorker::GuardReply { result } | ToWorker::MapReply { result } = message {
            self.journal_answered(result);
        }
        self.write(message)
    }

    /// Writes one message to the worker, as it is.
    fn write(&self, message: &ToWorker) -> Result<(), DoorError> {
        let mut line = serde_json::to_vec(message).map_err(DoorError::Encode)?;
        line.push(b'\n');
        let mut writer = lock(&self.writer);
        let Some(writer) = writer.as_mut() else {
            return Err(DoorError::WriterClosed);
        };
        writer.write_all(&line).map_err(DoorError::Write)
    }

    /// Closes the worker's stdin so that it exits after its current run.
    pub(crate) fn close(&self) {
        lock(&self.writer).take();
    }

    /// When the watchdog must look again: the in-flight call's deadline, or
    /// after the shortest timeout of a guard that could start meanwhile.
    pub(crate) fn next_check(&self, now: Instant, latest: Instant) -> Instant {
        let mut next = latest;
        if let Some(shortest) = self.shortest_timeout {
            next = next.min(now + shortest);
        }
        if let Some(in_flight) = lock(&self.in_flight).call.as_ref() {
            next = next.min(in_flight.call.deadline());
        }
        next
    }

    /// Waits until the in-flight call, if any, has settled itself (its
    /// records written), or until its deadline. An in-process guard cannot
    /// be stopped: a run that ends while one runs (cancelled, its worker
    /// gone) lets it finish, so its record says what it did — an order
    /// placed is a `success`, not `cancelled` — and only a call still
    /// running at its own deadline is then settled as abandoned
    /// ([`Door::settle_overdue`]).
    pub(crate) async fn let_in_flight_finish(&self) {
        // Before the slot is looked at: a call parked after this never runs.
        self.over.store(true, Ordering::SeqCst);
        loop {
            let notified = self.settled.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let due = {
                let slot = lock(&self.in_flight);
                slot.call.as_ref().map(|f| f.call.deadline()).or(slot.settling)
            };
            let Some(due) = due else {
                return;
            };
            tokio::select! {
                () = notified => {}
                () = tokio::time::sleep_until(due) => return,
            }
        }
    }

    /// Settles the in-flight call if its deadline has passed (or at once
    /// when `forced` names how the run ended): records its end, and unless
    /// forced, answers the worker `timed_out` and starts a fresh door
    /// thread in place of the stuck one.
    pub(crate) fn settle_overdue(self: &Arc<Self>, now: Instant, forced: Option<Status>) {
        let in_flight = {
            let mut slot = lock(&self.in_flight);
            match slot.call.as_ref() {
                Some(in_flight) if forced.is_some() || in_flight.call.deadline() <= now => slot.call.take(),
                _ => None,
            }
        };
        let Some(InFlight { call, .. }) = in_flight else {
            return;
        };
        let status = forced.unwrap_or(Status::TimedOut);
        let failure = match status {
            Status::Cancelled | Status::TimedOut => answered_early(call.function(), status),
            _ => Failure::new(
                status,
                GuardError::failed(format!(
                    "the script worker ended while '{}' was running",
                    call.function()
                )),
            ),
        };
        // Answered while the guard runs on: its thread's permit turns overdue.
        let failure = call.abandon(failure);
        if forced.is_some() {
            return;
        }
        let generation = self.generation.fetch_add(1, Ordering::AcqRel) + 1;
        let replaced = self
            .reply(&ToWorker::GuardReply {
                result: Err(failure.error),
            })
            .map_err(std::io::Error::other)
            .and_then(|()| self.spawn_thread(generation));
        if let Err(error) = replaced {
            let _ = self.events.send(DoorEvent::Closed(DoorError::Resume(error)));
        }
    }

    fn spawn_thread(self: &Arc<Self>, generation: u64) -> std::io::Result<()> {
        let door = self.clone();
        std::thread::Builder::new()
            .name("warden-door".into())
            .spawn(move || {
                // Guards' panics are caught per call; this catches a bug in
                // the door itself, so the run ends now instead of at its
                // deadline.
                let served =
                    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| door.serve(generation)));
                if let Err(payload) = served {
                    let _ = door.events.send(DoorEvent::Closed(DoorError::Panicked(
                        warden_core::error::panic_message(&payload),
                    )));
                }
            })
            .map(drop)
    }

    /// The door thread: reads the worker's lines until the pipe closes or
    /// the thread is replaced.
    fn serve(&self, generation: u64) {
        let mut line = Vec::new();
        loop {
            let message = match self.read(&mut line) {
                Ok(None) => continue,
                Ok(Some(Incoming::Message(message))) => message,
                Ok(Some(Incoming::Refused { guard, reply })) => {
                    if let (Some(guard), ToWorker::GuardReply { result: Err(error) }) = (&guard, &reply) {
                        self.record_refused(guard, error);
                    }
                    if let Err(reason) = self.reply(&reply) {
                        let _ = self.events.send(DoorEvent::Closed(reason));
                        return;
                    }
                    continue;
                }
                Err(reason) => {
                    let _ = self.events.send(DoorEvent::Closed(reason));
                    return;
                }
            };
            let message = match self.through_journal(message) {
                Journaled::Pass(message) => message,
                Journaled::Answered => continue,
                Journaled::Stop(reason) => {
                    let _ = self.events.send(DoorEvent::Closed(reason));
                    return;
                }
            };
            let event = match message {
                FromWorker::GuardCall { guard, arguments } if self.runs_here(&guard) => {
                    if self.call_here(generation, guard, arguments) {
                        continue;
                    }
                    return;
                }
                FromWorker::MapCall { guard, items } if self.runs_here(&guard) => {
                    if self.map_here(generation, &guard, items) {
                        continue;
                    }
                    return;
                }
                FromWorker::Hello { layers } => DoorEvent::Hello(layers),
                FromWorker::Done { outcome } => DoorEvent::Done(Box::new(outcome)),
                request => DoorEvent::Request(request),
            };
            if self.events.send(event).is_err() {
                return;
            }
        }
    }

    fn runs_here(&self, guard: &str) -> bool {
        self.executor
            .registry()
            .get(guard)
            .is_some_and(|g| g.mode() != Mode::Isolated)
    }

    /// Runs one guard call on this thread. Returns false when the watchdog
    /// settled the call first: this thread has been replaced and must stop.
    fn call_here(&self, generation: u64, guard: String, arguments: Value) -> bool {
        let Some(run) = lock(&self.scope).clone() else {
            return self
                .reply(&ToWorker::GuardReply {
                    result: Err(GuardError::failed("guard call outside a run")),
                })
                .is_ok();
        };
        let Some(outcome) = self.run_one(generation, &run, &guard, arguments) else {
            return false;
        };
        if run.scope.paused() {
            return self.pause();
        }
        self.reply(&ToWorker::GuardReply {
            result: outcome.map_err(|f| f.error),
        })
        .is_ok()
    }

    /// Ends the run on the question its book holds: the worker gets no
    /// reply (the session ends it), and the open journal entry goes (the
    /// call runs on resume). Returns false: this thread stops.
    fn pause(&self) -> bool {
        self.abandon_journal_entry();
        let _ = self.events.send(DoorEvent::Closed(DoorError::Paused));
        false
    }

    /// Runs a `map_call`'s items on this thread, one after another, and
    /// answers them in one reply. Returns false when the watchdog settled
    /// an item first: it answered the worker `timed_out` for the whole
    /// map_call, and this thread has been replaced and must stop.
    fn map_here(&self, generation: u64, guard: &str, items: Vec<Value>) -> bool {
        let Some(run) = lock(&self.scope).clone() else {
            return self
                .reply(&ToWorker::MapReply {
                    result: Err(GuardError::failed("map_call outside a run")),
                })
                .is_ok();
        };
        if let Some(refusal) = unplanned_map(&self.executor, &run.scope.asker, guard) {
            return self.reply(&ToWorker::MapReply { result: Err(refusal) }).is_ok();
        }
        let mut results = Vec::with_capacity(items.len());
        for arguments in items {
            let Some(outcome) = self.run_one(generation, &run, guard, arguments) else {
                return false;
            };
            results.push(crate::protocol::map_item(outcome.map_err(|f| f.error)));
        }
        self.reply(&ToWorker::MapReply {
            result: Ok(Value::Array(results)),
        })
        .is_ok()
    }

    /// Runs one call here and settles it; `None` when the watchdog settled
    /// it first (see [`Door::call_here`]).
    fn run_one(
        &self,
        generation: u64,
        run: &Arc<Run>,
        guard: &str,
        arguments: Value,
    ) -> Option<Result<Value, Failure>> {
        let scope = &run.scope;
        let consent = match self.executor.registry().get(guard) {
            Some(registered) => match warden_calls::executor::confirm::destructive_call(
                registered,
                &arguments,
                &scope.origin,
                &scope.events,
                &scope.asker,
                scope.deadline.into_std(),
            ) {
                Ok(consent) => consent,
                Err(error) => {
                    self.record_refused(guard, &error);
                    return Some(Err(Failure::new(Status::Failed, error)));
                }
            },
            None => warden_calls::executor::confirm::Consent::None,
        };
        let request = CallRequest::new(guard, arguments, &scope.origin, scope.cancel.clone())
            .in_task(scope.deadline)
            .events(&scope.events)
            .consent(consent);
        let arguments_sha256 = warden_core::receipt::digest(&request.arguments);
        let in_run = InRun {
            run: run.clone(),
            arguments_sha256,
        };
        let (call, here) = match self.executor.begin_here(&request, &self.runtime, in_run) {
            Ok(begun) => begun,
            Err(failure) => {
                self.record_refused(guard, &failure.error);
                return Some(Err(failure));
            }
        };
        // Parked where the watchdog can settle it while the guard runs;
        // unless the run ended while it was being begun (a destructive
        // call's start is synced to disk first): then whoever ended it may
        // have found the slot empty and closed the run's records, so the
        // guard must not run — the call settles `cancelled`.
        {
            let mut slot = lock(&self.in_flight);
            if self.over.load(Ordering::SeqCst) {
                drop(slot);
                let failure = Failure::new(
                    Status::Cancelled,
                    GuardError::new(
                        warden_core::error::codes::CANCELLED,
                        format!("call to '{guard}' did not start: its run ended as it began"),
                    ),
                );
                return Some(call.finish(Err(failure)));
            }
            slot.call = Some(InFlight { generation, call });
        }
        let outcome = here.run(request.arguments);
        let in_flight = {
            let mut slot = lock(&self.in_flight);
            match slot.call.as_ref() {
                Some(in_flight) if in_flight.generation == generation => {
                    let taken = slot.call.take();
                    slot.settling = taken.as_ref().map(|f| f.call.deadline());
                    taken
                }
                _ => None,
            }
        };
        let settled = in_flight?.call.finish(outcome);
        lock(&self.in_flight).settling = None;
        self.settled.notify_waiters();
        Some(settled)
    }

    /// The journal of the current run, if it keeps one.
    fn journal(&self) -> Option<Arc<Mutex<Journal>>> {
        lock(&self.scope)
            .as_ref()
            .and_then(|run| run.scope.journal.clone())
    }

    /// Passes a request through the run's journal (when it keeps one): a
    /// guard or map call the journal holds is answered from it here; a new
    /// one is opened there and recorded when answered; a call other than
    /// the journal's ends the run.
    fn through_journal(&self, message: FromWorker) -> Journaled {
        let Some(journal) = self.journal() else {
            return Journaled::Pass(message);
        };
        let book = lock(&self.scope)
            .as_ref()
            .and_then(|run| run.scope.asker.book().cloned());
        let destructive = |guard: &str| {
            self.executor
                .registry()
                .get(guard)
                .is_some_and(|g| g.hints.destructive)
        };
        // How many of the book's decisions the request takes: one per
        // destructive call, one per item of a planned destructive map (an
        // unplanned one is refused before any decision).
        let (guard, map, arguments_sha256, decisions) = match &message {
            FromWorker::GuardCall { guard, arguments } => {
                let decisions = u64::from(destructive(guard));
                (guard, false, warden_core::receipt::digest(arguments), decisions)
            }
            FromWorker::MapCall { guard, items } => {
                let planned = destructive(guard) && book.as_ref().is_some_and(|b| b.planned(guard));
                let decisions = if planned { items.len() as u64 } else { 0 };
                let digest = warden_core::receipt::digest(&Value::Array(items.clone()));
                (guard, true, digest, decisions)
            }
            _ => return Journaled::Pass(message),
        };
        let step = lock(&journal).step(guard, map, &arguments_sha256, decisions);
        match step {
            Step::Live => {
                lock(&self.calls).tap();
                Journaled::Pass(message)
            }
            Step::Diverged(reason) => Journaled::Stop(DoorError::Diverged(reason)),
            Step::Replay(entry) => {
                {
                    let mut calls = lock(&self.calls);
                    for record in &entry.records {
                        calls.push(&record.record());
                    }
                }
                if let Some(book) = &book {
                    for _ in 0..entry.decisions {
                        book.replayed(&entry.guard);
                    }
                }
                let reply = if entry.map {
                    ToWorker::MapReply { result: entry.result }
                } else {
                    ToWorker::GuardReply { result: entry.result }
                };
                match self.write(&reply) {
                    Ok(()) => Journaled::Answered,
                    Err(reason) => Journaled::Stop(reason),
                }
            }
        }
    }

    /// Records the reply to the open journal entry, if any.
    fn journal_answered(&self, result: &Result<Value, GuardError>) {
        let Some(journal) = self.journal() else { return };
        let mut journal = lock(&journal);
        if journal.is_open() {
            let records = lock(&self.calls).untap();
            journal.answered(result, records);
        }
    }

    /// Drops the open journal entry (the run paused on it).
    pub(crate) fn abandon_journal_entry(&self) {
        if let Some(journal) = self.journal() {
            lock(&journal).abandon_open();
            lock(&self.calls).untap();
        }
    }

    /// Records a guard call refused before it started.
    fn record_refused(&self, guard: &str, error: &GuardError) {
        let status = if error.code == codes::SERVER_BUSY {
            Status::Rejected
        } else {
            Status::Failed
        };
        let execution = match self.executor.registry().get(guard).map(|g| g.mode()) {
            Some(Mode::Isolated) => "isolated",
            Some(_) => "in_process",
            None => "unknown",
        };
        lock(&self.calls).push(&CallRecord {
            function: guard,
            status: status.as_str(),
            error_type: Some(&error.code),
            duration_ns: 0,
            execution,
            arguments_sha256: None,
            output_sha256: None,
        });
    }

    /// Records a batch of inline pure calls: function_calls.json entries,
    /// events (one per call while [`DEFAULT_PURE_CALLS_DETAILED`] lasts,
    /// then one summary per batch), when tracing a span per call, and one
    /// progress note.
    fn record_pure_batch(&self, line: &[u8]) -> Result<(), DoorError> {
        let batch: PureBatch<'_> = serde_json::from_slice(line).map_err(DoorError::PureBatch)?;
        let Some(run) = lock(&self.scope).clone() else {
            return Ok(());
        };
        let scope = &run.scope;
        let calls = batch.calls.as_slice();
        let detailed = {
            let mut left = lock(&self.detailed_pure_left);
            let detailed = calls.len().min(*left);
            *left -= detailed;
            detailed
        };
        let (one_by_one, summarized) = calls.split_at(detailed);
        let registry = self.executor.registry();
        // Script-only functions ride the same batch (see the worker's
        // bindings); their records say which they were.
        let mode_of = |function: &str| -> &'static str {
            if registry.script_function(function).is_some() {
                "script_inline"
            } else {
                "pure_inline"
            }
        };
        let mut lines = warden_calls::events::pure_call_records(&scope.origin, one_by_one, &mode_of);
        if !summarized.is_empty() {
            lines.extend(warden_calls::events::pure_calls_summary(
                &scope.origin,
                summarized,
            ));
        }
        scope.events.write_raw(&lines);
        if warden_calls::telemetry::recording() {
            for call in calls {
                let start = std::time::UNIX_EPOCH + Duration::from_nanos(call.started_unix_ns);
                warden_calls::telemetry::record_finished(
                    "function.call",
                    &scope.origin.trace,
                    start,
                    start + Duration::from_nanos(call.duration_ns),
                    vec![
                        opentelemetry::KeyValue::new("warden.function", call.function.to_string()),
                        opentelemetry::KeyValue::new("warden.execution_mode", mode_of(call.function)),
                    ],
                    call.error_type.as_deref(),
                );
            }
        }
        let made = {
            let mut log = lock(&self.calls);
            for call in calls {
                log.push(&CallRecord {
                    function: call.function,
                    status: if call.ok { "success" } else { "failed" },
                    error_type: call.error_type.as_deref(),
                    duration_ns: call.duration_ns,
                    execution: mode_of(call.function),
                    arguments_sha256: call.arguments_sha256,
                    output_sha256: call.output_sha256,
                });
            }
            log.counts().made
        };
        // One note per batch, not per call: a long loop of inline calls
        // still shows that it is alive without flooding the client.
        if scope.progress {
            let _ = self.events.send(DoorEvent::Progress(format!(
                "inline pure calls: {} more, {made} guard calls so far",
                calls.len()
            )));
        }
        Ok(())
    }

    /// Reads the worker's next line into `line` and decodes it; a batch of
    /// pure calls is recorded at once and yields `None`.
    fn read(&self, line: &mut Vec<u8>) -> Result<Option<Incoming>, DoorError> {
        if line.capacity() > KEEP_LINE_BUFFER {
            *line = Vec::new();
        }
        line.clear();
        {
            let mut reader = lock(&self.reader);
            if reader.buffer().is_empty() {
                warden_sandbox::pipe::spin_until_readable(reader.get_ref(), crate::limits::DOOR_SPIN);
            }
            let read = (&mut *reader)
                .take(self.max_line as u64 + 1)
                .read_until(b'\n', line)
                .map_err(DoorError::Read)?;
            if read == 0 {
                return Err(DoorError::PipeClosed);
            }
            if line.len() > self.max_line {
                let rest = if line.ends_with(b"\n") {
                    0
                } else {
                    skip_line(&mut reader)?
                };
                return self.oversized(line, line.len() as u64 + rest).map(Some);
            }
        }
        if line.starts_with(PURE_BATCH_PREFIX.as_bytes()) {
            self.record_pure_batch(line)?;
            return Ok(None);
        }
        match decode(line) {
            Ok(message) => Ok(Some(Incoming::Message(message))),
            // Within the line cap but deeper than serde_json decodes: the
            // worker waits for an answer, so give it a catchable one.
            Err(_) if line.starts_with(GUARD_CALL_PREFIX) && text_depth(line) > MAX_ARGUMENT_DEPTH + 1 => {
                Ok(Some(Incoming::Refused {
                    guard: Some(guard_name(line)),
                    reply: ToWorker::GuardReply {
                        result: Err(too_deep(text_depth(line) - 1).error),
                    },
                }))
            }
            // A map_call's items sit one level deeper (in its list).
            Err(_) if line.starts_with(MAP_CALL_PREFIX) && text_depth(line) > MAX_ARGUMENT_DEPTH + 2 => {
                Ok(Some(Incoming::Refused {
                    guard: None,
                    reply: ToWorker::MapReply {
                        result: Err(too_deep(text_depth(line) - 2).error),
                    },
                }))
            }
            Err(reason) => Err(reason),
        }
    }

    /// Answers a line of `size` bytes that is over the cap: a catchable
    /// error for a request the worker waits on, the end of the run for
    /// anything else.
    fn oversized(&self, line: &[u8], size: u64) -> Result<Incoming, DoorError> {
        let cap = self.max_line;
        if line.starts_with(GUARD_CALL_PREFIX) {
            let guard = guard_name(line);
            let error = GuardError::new(
                codes::ARGUMENTS_TOO_LARGE,
                format!(
                    "the call to '{guard}' is a {size}-byte message; a script's messages are capped at {cap} bytes \
(arguments at most {} bytes): pass less data, e.g. aggregate first or split the call",
                    self.executor.limits().max_argument_bytes
                ),
            );
            return Ok(Incoming::Refused {
                guard: Some(guard),
                reply: ToWorker::GuardReply { result: Err(error) },
            });
        }
        if line.starts_with(MAP_CALL_PREFIX) {
            let error = GuardError::new(
                codes::ARGUMENTS_TOO_LARGE,
                format!(
                    "a map_call is a {size}-byte message; a script's messages are capped at {cap} bytes: \
pass fewer items per map_call (split the list)"
                ),
            );
            return Ok(Incoming::Refused {
                guard: None,
                reply: ToWorker::MapReply { result: Err(error) },
            });
        }
        if line.starts_with(WRITE_ARTIFACT_PREFIX) {
            let error = GuardError::new(
                warden_core::error::codes::ARTIFACT_TOO_LARGE,
                format!(
                    "write_artifact sent a {size}-byte message; a script's messages are capped at {cap} bytes \
and an artifact holds at most {DEFAULT_MAX_ARTIFACT_BYTES} bytes: write smaller files"
                ),
            );
            return Ok(Incoming::Refused {
                guard: None,
                reply: ToWorker::ArtifactReply { result: Err(error) },
            });
        }
        if line.starts_with(DONE_PREFIX) {
            return Err(DoorError::ResultTooLarge { size, cap });
        }
        Err(DoorError::LineTooLarge { size, cap })
    }
}

/// What the journal made of a request.
enum Journaled {
    /// Serve it as usual.
    Pass(FromWorker),
    /// Answered from the journal.
    Answered,
    /// The run ends.
    Stop(DoorError),
}

/// The refusal of a `map_call` of a destructive guard that the approved
/// plan does not cover, in a run that pauses to ask: its items would be
/// asked one at a time, and a pause between them would leave the earlier
/// ones run but not journaled.
pub(crate) fn unplanned_map(
    executor: &Executor,
    reach: &warden_core::reach::Reach,
    guard: &str,
) -> Option<GuardError> {
    let book = reach.book()?;
    let destructive = executor
        .registry()
        .get(guard)
        .is_some_and(|g| g.hints.destructive);
    (destructive && !book.planned(guard)).then(|| {
        GuardError::new(
            codes::FORBIDDEN,
            format!(
                "map_call of the destructive guard '{guard}' in a detached task needs an approved plan: give map_call a literal list \
                 of items (the person then approves the whole plan before the script runs), or call '{guard}' once per item so \
                 each call is asked"
            ),
        )
    })
}

/// Skips the rest of a line the worker is still sending, without keeping
/// it; returns the bytes skipped. Ends at the newline or when the pipe
/// closes (the worker is gone, which the next read reports).
fn skip_line(reader: &mut BufReader<PipeReader>) -> Result<u64, DoorError> {
    let mut skipped = 0u64;
    loop {
        let buffer = reader.fill_buf().map_err(DoorError::Read)?;
        if buffer.is_empty() {
            return Ok(skipped);
        }
        let (used, done) = match buffer.iter().position(|b| *b == b'\n') {
            Some(at) => (at + 1, true),
            None => (buffer.len(), false),
        };
        reader.consume(used);
        skipped += used as u64;
        if done {
            return Ok(skipped);
        }
    }
}

/// The guard a `guard_call` line names (written by the worker right after
/// the type; a guard name is an identifier), or "?".
fn guard_name(line: &[u8]) -> String {
    line.get(GUARD_CALL_PREFIX.len()..)
        .and_then(|rest| rest.strip_prefix(br#""guard":""#))
        .and_then(|rest| rest.iter().position(|b| *b == b'"').map(|end| &rest[..end]))
        .filter(|name| name.len() <= 256)
        .and_then(|name| std::str::from_utf8(name).ok())
        .unwrap_or("?")
        .to_string()
}

/// Decodes one worker line. Guard calls are most of the traffic; an
/// internally tagged enum would buffer each into a generic tree first, so
/// they are decoded straight into their own shape.
fn decode(line: &[u8]) -> Result<FromWorker, DoorError> {
    #[derive(serde::Deserialize)]
    struct GuardCallLine {
        guard: String,
        arguments: Value,
    }
    let unreadable = DoorError::Unreadable;
    if line.starts_with(GUARD_CALL_PREFIX) {
        let call: GuardCallLine = serde_json::from_slice(line).map_err(unreadable)?;
        return Ok(FromWorker::GuardCall {
            guard: call.guard,
            arguments: call.arguments,
        });
    }
    serde_json::from_slice(line).map_err(unreadable)
}

/// `(status, error_type)` of a call outcome, as function_calls.json has them.
pub(crate) fn failure_status(outcome: &Result<Value, Failure>) -> (&'static str, Option<&str>) {
    match outcome {
        Ok(_) => ("success", None),
        Err(failure) => (failure.status.as_str(), Some(failure.error.code.as_str())),
    }
}

/// Locks a mutex, recovering the data if a panicking thread poisoned it:
/// every value behind these locks stays consistent between statements.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_prefixes_match_what_the_worker_writes() {
        // The door classifies undecoded lines by these prefixes; serde must write them so.
        let call = FromWorker::GuardCall {
            guard: "get_quote".into(),
            arguments: serde_json::json!({"symbol": "AAPL"}),
        };
        let line = serde_json::to_vec(&call).unwrap();
        assert!(line.starts_with(GUARD_CALL_PREFIX));
        assert_eq!(guard_name(&line), "get_quote");
        let write = FromWorker::WriteArtifact {
            filename: "a.csv".into(),
            content: String::new(),
            encoding: "utf-8".into(),
        };
        assert!(
            serde_json::to_vec(&write)
                .unwrap()
                .starts_with(WRITE_ARTIFACT_PREFIX)
        );
        let done = FromWorker::Done {
            outcome: RunOutcome::default(),
        };
        assert!(serde_json::to_vec(&done).unwrap().starts_with(DONE_PREFIX));
        let map = FromWorker::MapCall {
            guard: "get_quote".into(),
            items: vec![serde_json::json!({"symbol": "AAPL"})],
        };
        assert!(serde_json::to_vec(&map).unwrap().starts_with(MAP_CALL_PREFIX));
    }
}
