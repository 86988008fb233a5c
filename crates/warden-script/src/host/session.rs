//! The server side of one script worker: spawn, hello, run, answer requests.
//!
//! The worker's pipe is served by a door thread (`script::host::door`), which
//! runs `in_process` guard calls itself and records inline pure calls; the
//! session answers what needs the async world: isolated guard calls go
//! through the executor (same validation, mode, timeout and events as
//! direct calls), artifact writes and reads go to the store. The session
//! also keeps every deadline: the in-flight call's (via the door's
//! watchdog) and the task's. Deadline and cancellation kill the worker's
//! process group; so does dropping the session.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use base64::Engine as _;
use serde_json::{Value, json};
use tokio::sync::mpsc::{UnboundedReceiver, unbounded_channel};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::calls::{CallCounts, CallLog, CallRecord};
use super::door::{Door, DoorError, DoorEvent, RunScope};
use super::journal::Journal;
use crate::limits::DEFAULT_MAX_ARTIFACT_BYTES;
use crate::protocol::{FromWorker, Layers, RunOutcome, ToWorker};
use warden_calls::artifacts::ArtifactStore;
use warden_calls::artifacts::worker_log::WorkerLog;
use warden_calls::events::{Events, Origin};
use warden_calls::executor::{CallRequest, Executor, Record, Settled, Status};
use warden_core::error::GuardError;
use warden_sandbox::process::{Rlimits, release_group};
use warden_sandbox::zygote::{Stdio3, Zygote};

/// The task-directory file of the worker's stderr, when it wrote any.
const STDERR_FILE: &str = "worker_stderr.log";

/// Why a script worker could not be started (or refused to run).
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("cannot create the worker's stderr: {0}")]
    Log(#[source] std::io::Error),
    #[error("cannot create the worker's pipes: {0}")]
    Pipes(#[source] std::io::Error),
    #[error("cannot start a script worker: {0}")]
    Spawn(#[source] std::io::Error),
    #[error("cannot start the door thread: {0}")]
    DoorThread(#[source] std::io::Error),
    /// The worker ended before its hello: why its door closed, and how
    /// the process ended (reaped first, so a kill is named as one).
    #[error("{reason} (worker {ended})")]
    EndedEarly { reason: DoorError, ended: String },
    #[error("script worker said {0} instead of hello")]
    NoHello(String),
    #[error("script worker did not start before the deadline")]
    Deadline,
    #[error(transparent)]
    Policy(#[from] warden_sandbox::policy::BadMode),
    /// `WARDEN_SANDBOX=strict` and a layer is missing.
    #[error("{0}")]
    Refused(String),
}

/// What the worker side of a task produced, for the result.
#[derive(Default)]
pub struct WorkerFacts {
    pub layers: Layers,
    pub calls: CallCounts,
    pub pid: u32,
    /// How the worker process ended ("exited with exit status: 0", "killed
    /// by SIGKILL"), learned while the task writes its files.
    pub exit: Option<WorkerExit>,
    /// The calls' digest for the task receipt (`CallLog::digest`); `None`
    /// when no worker ran.
    pub calls_sha256: Option<String>,
    /// The person's answers its runs were given, for the task receipt.
    pub approvals: Vec<warden_core::approval::ApprovalRecord>,
}

/// How a session's worker ended: already known (a run that ended
/// abnormally reaped it), or being waited for on the runtime. A finished
/// worker's exit — closing its pipes, tearing down its address space, the
/// zygote reaping it — was 0.6 ms of a trivial task's `run` phase, after
/// the script's result; the task writes its files meanwhile and asks
/// [`WorkerExit::wait`] only for its `task_worker_finished` record.
#[derive(Debug)]
pub struct WorkerExit(Exit);

#[derive(Debug)]
enum Exit {
    Known(String),
    Waiting(tokio::task::JoinHandle<String>),
}

impl WorkerExit {
    /// How the worker ended (its group killed and it reaped by then).
    pub async fn wait(self) -> String {
        match self.0 {
            Exit::Known(known) => known,
            Exit::Waiting(waiting) => waiting
                .await
                .unwrap_or_else(|error| format!("not known: the wait for it ended ({error})")),
        }
    }
}

/// How long a worker whose stdin was closed gets to exit before its group
/// is killed: 200 ms (it normally exits within a millisecond).
const WORKER_EXIT_GRACE: std::time::Duration = std::time::Duration::from_millis(200);

/// Guard calls a run may make.
#[derive(Debug, Clone, Copy)]
pub struct Budget {
    /// Calls through the door (isolated and in-process guards; a
    /// `map_call` counts once).
    pub calls_left: u64,
    /// Whether inline calls (pure guards, script-only functions) are
    /// budgeted too, against [`Session::inline_calls_left`] (coding tasks).
    pub count_pure: bool,
}

/// How a run ended, from the server's side.
#[derive(Debug)]
pub enum RunEnd {
    Finished(RunOutcome),
    /// The run stopped on a question for the person (a detached task):
    /// the worker is gone, and [`Session::carry`] has what resumes it.
    Paused,
    TimedOut,
    Cancelled,
    Crashed(String),
}

pub struct Session {
    /// The zygote that forked the worker: it alone can reap it.
    workers: Zygote,
    /// The worker's pid, which is also its process group id.
    pgid: u32,
    /// Whether the worker's group has been killed and the worker reaped;
    /// its pid may then belong to another process, so it is never
    /// signalled again.
    reaped: bool,
    /// How the worker process ended, once it has been reaped.
    pub exit_status: Option<String>,
    /// The worker's stderr; read to explain a crash, and kept as
    /// `worker_stderr.log` in the task directory when not empty.
    stderr: WorkerLog,
    memory_limit: u64,
    /// The worker's pipes and the threads serving them.
    door: Arc<Door>,
    /// What the door threads hand over, in order. The door owns the
    /// sender, so the worker's end arrives as [`DoorEvent::Closed`].
    from_door: UnboundedReceiver<DoorEvent>,
    pub layers: Layers,
    /// Inline calls the next run may make when its [`Budget`] counts them;
    /// a coding task sets it before each run (unbounded otherwise).
    pub inline_calls_left: u64,
    /// The journal of the last run that kept one (a run that may pause).
    journal: Option<Arc<std::sync::Mutex<Journal>>>,
    /// The answers of the session's runs: the waiting task's book, or one
    /// kept for the answers given live.
    book: Option<Arc<warden_core::approval::Book>>,
}

impl Drop for Session {
    fn drop(&mut self) {
        self.stderr.keep();
        self.door.close();
        if !self.reaped {
            release_group(self.pgid);
            self.workers.reap_detached(self.pgid);
        }
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
    /// Starts a script worker for the task in `task_dir` (its stderr, if it
    /// writes any, ends in `worker_stderr.log` there, its calls in `function_calls.json`),
    /// forked by `workers` (see [`crate::workers`]), and waits for its hello.
    /// `meanwhile` runs once the worker is forked, while it confines
    /// itself (most of its start, in its own process): the task writes
    /// its scripts then, not before the fork. Its value comes back with
    /// the session.
    pub async fn start<R>(
        executor: Arc<Executor>,
        workers: &Zygote,
        task_dir: &std::path::Path,
        rlimits: Rlimits,
        deadline: Instant,
        meanwhile: impl FnOnce() -> R,
    ) -> Result<(Self, R), StartError> {
        let stderr_path = task_dir.join(STDERR_FILE);
        // The worker forked ahead of this task, confined and waiting, when
        // one is ready (see `Zygote::take_spare`); else one forked now.
        let (pgid, to_worker, from_worker, stderr) = match workers.take_spare(rlimits) {
            Some(spare) => (
                spare.pid,
                spare.stdin,
                spare.stdout,
                WorkerLog::with_buffer(spare.stderr, &stderr_path),
            ),
            None => Self::fork(workers, &stderr_path, rlimits).await?,
        };
        let (sender, mut from_door) = unbounded_channel();
        let calls = CallLog::create(&task_dir.join(super::calls::FUNCTION_CALLS_FILE));
        let door = match Door::open(executor, from_worker, to_worker, calls, sender) {
            Ok(door) => door,
            Err(error) => {
                release_group(pgid);
                workers.reap_detached(pgid);
                return Err(StartError::DoorThread(error));
            }
        };
        let meanwhile = meanwhile();
        let hello = tokio::time::timeout_at(deadline, from_door.recv()).await;
        let mut session = Session {
            workers: workers.clone(),
            pgid,
            reaped: false,
            exit_status: None,
            stderr,
            memory_limit: rlimits.memory,
            door,
            from_door,
            layers: Layers::default(),
            inline_calls_left: u64::MAX,
            journal: None,
            book: None,
        };
        match hello {
            Ok(Some(DoorEvent::Hello(layers))) => session.layers = layers,
            Ok(Some(DoorEvent::Closed(reason))) => return Err(session.ended_early(reason).await),
            Ok(Some(other)) => return Err(StartError::NoHello(format!("{other:?}"))),
            Ok(None) => return Err(session.ended_early(DoorError::PipeClosed).await),
            Err(_) => return Err(StartError::Deadline),
        }
        Ok((session, meanwhile))
    }

    /// A worker forked now: its pid (also its process group id), its
    /// pipes and its stderr.
    async fn fork(
        workers: &Zygote,
        stderr_path: &std::path::Path,
        rlimits: Rlimits,
    ) -> Result<(u32, std::io::PipeWriter, std::io::PipeReader, WorkerLog), StartError> {
        let stderr = WorkerLog::new(stderr_path).map_err(StartError::Log)?;
        // Plain blocking pipes: the door thread reads and writes them
        // directly, with no reactor between the worker and its answer.
        let (worker_stdin, to_worker) = std::io::pipe().map_err(StartError::Pipes)?;
        let (from_worker, worker_stdout) = std::io::pipe().map_err(StartError::Pipes)?;
        let stdio = Stdio3 {
            stdin: worker_stdin.into(),
            stdout: worker_stdout.into(),
            stderr: stderr.for_worker().map_err(StartError::Log)?,
        };
        // The child's ends go with the order and close once the zygote has
        // them, or the door would never see EOF.
        let pgid = workers.spawn(stdio, rlimits).await.map_err(StartError::Spawn)?;
        Ok((pgid, to_worker, from_worker, stderr))
    }

    pub fn pid(&self) -> u32 {
        self.pgid
    }

    /// Kills the worker's group and reaps the worker. The pipe closes as
    /// the process exits, before it can be reaped, so how it ended is
    /// known only after this wait.
    async fn reap(&mut self) -> Option<std::process::ExitStatus> {
        if self.reaped {
            return None;
        }
        release_group(self.pgid);
        self.reaped = true;
        self.workers.reap(self.pgid).await
    }

    /// The worker's door closed before its hello.
    async fn ended_early(mut self, reason: DoorError) -> StartError {
        let ended = describe(self.reap().await);
        StartError::EndedEarly { reason, ended }
    }

    /// Guard calls made so far, and how many of them succeeded.
    pub fn call_counts(&self) -> CallCounts {
        self.door.calls.lock().unwrap_or_else(|p| p.into_inner()).counts()
    }

    /// Runs `code` and serves the worker's requests until it is done, the
    /// deadline passes or the caller cancels.
    pub async fn run(&mut self, ctx: &Context<'_>, code: &str, deadline: Instant, budget: Budget) -> RunEnd {
        let deadline_ms = deadline.saturating_duration_since(Instant::now()).as_millis() as u64;
        // The request's client, when this run serves one that can be asked.
        let mut reach = warden_core::reach::Reach::here();
        // A run that may pause keeps a journal, resuming the one it carries.
        self.journal = None;
        if let Some(book) = reach.book() {
            self.book = Some(book.clone());
            match self.prepare_pausable(ctx, book, code) {
                Ok(Some(journal)) => self.journal = Some(journal),
                Ok(None) => return RunEnd::Paused,
                Err(reason) => return RunEnd::Crashed(reason.to_string()),
            }
        } else if let warden_core::reach::Reach::Asker(asker) = &reach {
            reach = self.live_reach(ctx, asker.clone(), code, deadline).await;
        }
        self.door.set_scope(RunScope {
            events: ctx.events.clone(),
            origin: ctx.origin.clone(),
            cancel: ctx.cancel.clone(),
            deadline,
            progress: ctx.progress.is_some(),
            asker: reach.clone(),
            journal: self.journal.clone(),
        });
        // The worker stops itself at `deadline` with a classified timeout;
        // the server kills it if it has not answered shortly after.
        let hard_deadline = deadline + crate::limits::SCRIPT_KILL_GRACE;
        let door = self.door.clone();
        let inline_left = self.inline_calls_left;
        let served = async {
            door.reply(&ToWorker::Run {
                code: code.to_string(),
                deadline_ms,
                calls_left: budget.calls_left,
                inline_left: budget.count_pure.then_some(inline_left),
                denied: ctx.executor.denied_guards(ctx.origin),
            })?;
            loop {
                let check = door.next_check(Instant::now(), hard_deadline);
                let event = tokio::select! {
                    event = self.from_door.recv() => event,
                    _ = tokio::time::sleep_until(check) => {
                        door.settle_overdue(Instant::now(), None);
                        continue;
                    }
                };
                match event {
                    Some(DoorEvent::Done(outcome)) => return Ok(*outcome),
                    Some(DoorEvent::Request(request)) => {
                        answer(ctx, &door, &reach, request, deadline).await?
                    }
                    Some(DoorEvent::Progress(message)) => super::progress::note(ctx.progress, message).await,
                    Some(DoorEvent::Hello(_)) => {}
                    Some(DoorEvent::Closed(reason)) => return Err(reason),
                    None => return Err(DoorError::PipeClosed),
                }
            }
        };
        let cancel = ctx.cancel.clone();
        let end = tokio::select! {
            outcome = tokio::time::timeout_at(hard_deadline, served) => match outcome {
                Ok(Ok(outcome)) => RunEnd::Finished(outcome),
                Ok(Err(DoorError::Paused)) => RunEnd::Paused,
                Ok(Err(reason)) => RunEnd::Crashed(reason.to_string()),
                Err(_) => RunEnd::TimedOut,
            },
            _ = cancel.cancelled() => RunEnd::Cancelled,
        };
        if !matches!(end, RunEnd::Finished(_)) {
            let status = match end {
                RunEnd::Cancelled | RunEnd::Paused => Status::Cancelled,
                RunEnd::TimedOut => Status::TimedOut,
                _ => Status::Failed,
            };
            self.door.let_in_flight_finish().await;
            self.door.settle_overdue(Instant::now(), Some(status));
            let status = self.reap().await;
            self.exit_status = Some(describe(status));
            if let RunEnd::Crashed(reason) = end {
                if self.stderr.text().contains("memory allocation of") {
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

    /// Starts a run that may pause: scans `code` for its plan and, when the
    /// plan has no answer yet, sets the plan's question (`Ok(None)`: the
    /// run pauses before it starts); otherwise the journal to run with,
    /// resuming the one the book carries.
    fn prepare_pausable(
        &self,
        ctx: &Context<'_>,
        book: &warden_core::approval::Book,
        code: &str,
    ) -> Result<Option<Arc<std::sync::Mutex<Journal>>>, super::journal::JournalError> {
        let script_sha256 = warden_core::receipt::sha256_hex(code.as_bytes());
        let (plan, shown) = planned(code, ctx.executor.registry());
        if let Some(key) = book.start(&script_sha256, &plan) {
            ctx.events.emit(
                ctx.origin,
                "destructive_call_waiting",
                json!({"key": key, "plan": plan}),
            );
            let mut pending = plan_question(&plan, &script_sha256, &shown);
            pending.key = key;
            book.ask(pending);
            return Ok(None);
        }
        Journal::resuming(&book.journal()).map(|journal| Some(Arc::new(std::sync::Mutex::new(journal))))
    }

    /// The reach of a run whose client is asked live: its answers are kept
    /// in the session's book (for the receipt), and its plan, when the
    /// scan finds one, is asked once before the run, so the planned calls
    /// are not asked one by one.
    async fn live_reach(
        &mut self,
        ctx: &Context<'_>,
        asker: warden_core::ask::Asker,
        code: &str,
        deadline: Instant,
    ) -> warden_core::reach::Reach {
        let book = self
            .book
            .get_or_insert_with(|| warden_core::approval::Book::new(Default::default()))
            .clone();
        let script_sha256 = warden_core::receipt::sha256_hex(code.as_bytes());
        let registry = ctx.executor.registry();
        let (plan, shown) = if registry.iter().any(|g| g.hints.destructive) {
            planned(code, registry)
        } else {
            (Vec::new(), String::new())
        };
        book.start_live(&script_sha256, &[], true);
        if !plan.is_empty() {
            let approved = self
                .ask_plan_live(
                    ctx,
                    &book,
                    asker.clone(),
                    (&plan, &shown),
                    &script_sha256,
                    deadline,
                )
                .await;
            book.start_live(&script_sha256, &plan, approved);
        }
        warden_core::reach::Reach::Recorded { asker, book }
    }

    /// Asks the person the plan's question through the client, now; keeps
    /// the answer in `book`. Whether it approves.
    async fn ask_plan_live(
        &self,
        ctx: &Context<'_>,
        book: &Arc<warden_core::approval::Book>,
        asker: warden_core::ask::Asker,
        (plan, shown): (&[warden_core::approval::PlanItem], &str),
        script_sha256: &str,
        deadline: Instant,
    ) -> bool {
        let pending = plan_question(plan, script_sha256, shown);
        let question = warden_core::ask::Question::Elicit {
            message: pending.message.clone(),
            requested_schema: pending.requested_schema.clone(),
        };
        let due = deadline.into_std();
        let answer = tokio::task::spawn_blocking(move || asker(question, Some(due)))
            .await
            .unwrap_or_else(|e| Err(GuardError::failed(format!("the question ended abnormally: {e}"))));
        let form = answer
            .ok()
            .and_then(|value| serde_json::from_value::<warden_core::ask::Elicitation>(value).ok())
            .unwrap_or(warden_core::ask::Elicitation {
                action: warden_core::ask::Action::Cancel,
                content: Default::default(),
            });
        let record = pending.answered(
            ctx.origin.principal.as_str(),
            form.action,
            form.content,
            warden_calls::executor::confirm::now_iso8601(),
        );
        let approved = record.approved;
        ctx.events.emit(
            ctx.origin,
            "destructive_call_confirmed",
            json!({"plan": plan, "approved": approved, "action": record.action, "approval": record}),
        );
        book.record(record);
        approved
    }

    /// Keeps the person's answer to a question the task asked itself (a
    /// coding task's `needs_input` form) with the session's answers, for
    /// the receipt: key `input-N`; `approved` means accepted. Returns the
    /// record.
    pub fn record_input(
        &mut self,
        principal: &warden_calls::tenant::Principal,
        message: String,
        requested_schema: Value,
        form: warden_core::ask::Elicitation,
        at: String,
    ) -> warden_core::approval::ApprovalRecord {
        let book = self
            .book
            .get_or_insert_with(|| warden_core::approval::Book::new(Default::default()))
            .clone();
        let key = format!(
            "input-{}",
            book.answers()
                .iter()
                .filter(|a| a.key.starts_with("input-"))
                .count()
                + 1
        );
        let pending = warden_core::approval::Pending {
            key,
            message,
            requested_schema,
            guard: String::new(),
            arguments_sha256: None,
            plan: Vec::new(),
            script_sha256: book.script_sha256(),
        };
        let accepted = form.action == warden_core::ask::Action::Accept;
        let mut record = pending.answered(principal.as_str(), form.action, form.content, at);
        record.approved = accepted;
        book.record(record.clone());
        record
    }

    /// The answers the session's runs were given, in order (for the receipt).
    pub fn approvals(&self) -> Vec<warden_core::approval::ApprovalRecord> {
        self.book.as_ref().map(|book| book.answers()).unwrap_or_default()
    }

    /// What a paused run carries to its resumption: its journal, within
    /// `MAX_JOURNAL_BYTES` (empty when it paused before it started).
    pub fn carry(&self) -> Result<Vec<Value>, super::journal::JournalError> {
        match &self.journal {
            Some(journal) => journal.lock().unwrap_or_else(|p| p.into_inner()).carry(),
            None => Ok(Vec::new()),
        }
    }

    /// What the worker side produced, for the task result; closes
    /// function_calls.json.
    pub fn take_facts(&mut self) -> WorkerFacts {
        self.stderr.keep();
        let mut calls = self.door.calls.lock().unwrap_or_else(|p| p.into_inner());
        calls.close();
        WorkerFacts {
            layers: self.layers.clone(),
            calls: calls.counts(),
            pid: self.pgid,
            exit: None,
            calls_sha256: Some(calls.digest()),
            approvals: self.approvals(),
        }
    }

    /// Ends the session: closes the worker's door, and kills its group and
    /// reaps it on the runtime (see [`WorkerExit`]). Call inside the
    /// server's runtime.
    pub fn finish(mut self) -> WorkerExit {
        if let Some(known) = self.exit_status.take() {
            return WorkerExit(Exit::Known(known));
        }
        // The worker exits by itself once its stdin closes (its end of
        // the pipe from it closes with it): closed here, not in the wait,
        // which may run only once the task has written its files.
        self.door.close();
        WorkerExit(Exit::Waiting(tokio::spawn(self.wait_for_exit())))
    }

    /// Gives the worker [`WORKER_EXIT_GRACE`] to exit after its door
    /// closed, then kills its group either way, for anything it left
    /// behind, and reaps it: a worker that had exited is reaped with its
    /// own status.
    async fn wait_for_exit(mut self) -> String {
        let from_door = &mut self.from_door;
        let _exited = tokio::time::timeout(WORKER_EXIT_GRACE, async {
            while let Some(event) = from_door.recv().await {
                if matches!(event, DoorEvent::Closed(_)) {
                    break;
                }
            }
        })
        .await;
        describe(self.reap().await)
    }
}

/// The plan's question of a script, showing `shown` (its text).
fn plan_question(
    plan: &[warden_core::approval::PlanItem],
    script_sha256: &str,
    shown: &str,
) -> warden_core::approval::Pending {
    warden_core::approval::plan_question(plan, script_sha256, "script", shown)
}

/// The plan the scan finds in `code`, and `code` as its form shows it;
/// no plan when the text is too large to show in full
/// ([`warden_core::approval::plan_source`]): each destructive call is then
/// asked on its own, with its exact arguments.
fn planned(
    code: &str,
    registry: &warden_core::registry::Registry,
) -> (Vec<warden_core::approval::PlanItem>, String) {
    let plan = super::plan::scan(code, registry);
    if plan.is_empty() {
        return (plan, String::new());
    }
    match warden_core::approval::plan_source(code) {
        Some(shown) => (plan, shown),
        None => (Vec::new(), String::new()),
    }
}

/// Answers a request the door thread handed over, through the door.
async fn answer(
    ctx: &Context<'_>,
    door: &Door,
    reach: &warden_core::reach::Reach,
    request: FromWorker,
    deadline: Instant,
) -> Result<(), DoorError> {
    let reply = match request {
        FromWorker::GuardCall { guard, arguments } => {
            let result = call_through_executor(ctx, door, reach, &guard, arguments, deadline).await;
            if reach.book().is_some_and(|book| book.paused()) {
                door.abandon_journal_entry();
                return Err(DoorError::Paused);
            }
            ToWorker::GuardReply { result }
        }
        // The items run one after another, each a full call; the script
        // gets every outcome in one reply.
        FromWorker::MapCall { guard, items } => {
            if let Some(refusal) = super::door::unplanned_map(ctx.executor, reach, &guard) {
                return door.reply(&ToWorker::MapReply { result: Err(refusal) });
            }
            let mut results = Vec::with_capacity(items.len());
            for arguments in items {
                let result = call_through_executor(ctx, door, reach, &guard, arguments, deadline).await;
                results.push(crate::protocol::map_item(result));
            }
            ToWorker::MapReply {
                result: Ok(Value::Array(results)),
            }
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
    door.reply(&reply)
}

/// One guard call handed over by the door (an isolated guard), through
/// the executor, recorded in function_calls.json when it settles (so a
/// call still running when the task is dropped is recorded `cancelled`, as
/// its `function_call_finished` event is), or, refused before it began,
/// from its error.
async fn call_through_executor(
    ctx: &Context<'_>,
    door: &Door,
    reach: &warden_core::reach::Reach,
    guard: &str,
    arguments: Value,
    deadline: Instant,
) -> Result<Value, GuardError> {
    let started = std::time::Instant::now();
    let mode = ctx
        .executor
        .registry()
        .get(guard)
        .map(|g| g.mode().as_str())
        .unwrap_or("unknown");
    // Hashed before the call, which consumes them.
    let arguments_sha256 = warden_core::receipt::digest(&arguments);
    let mut consent = warden_calls::executor::confirm::Consent::None;
    if let Some(registered) = ctx.executor.registry().get(guard) {
        let confirmed = warden_calls::executor::confirm::destructive_call_async(
            registered,
            &arguments,
            ctx.origin,
            ctx.events,
            reach.clone(),
            deadline.into_std(),
        )
        .await;
        match confirmed {
            Ok(given) => consent = given,
            Err(error) => {
                door.calls
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .push(&CallRecord {
                        function: guard,
                        status: "failed",
                        error_type: Some(&error.code),
                        duration_ns: 0,
                        execution: mode,
                        arguments_sha256: Some(&arguments_sha256),
                        output_sha256: None,
                    });
                return Err(error);
            }
        }
    }
    let recorded = AtomicBool::new(false);
    let record = |settled: &Settled<'_>| {
        recorded.store(true, Ordering::Relaxed);
        let output_sha256 = settled.output.map(warden_core::receipt::digest);
        door.calls
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(&CallRecord {
                function: settled.function,
                status: settled.status.as_str(),
                error_type: settled.error_type,
                duration_ns: settled.duration.as_nanos() as u64,
                execution: mode,
                arguments_sha256: Some(&arguments_sha256),
                output_sha256: output_sha256.as_deref(),
            });
    };
    let result = ctx
        .executor
        .call(
            CallRequest::new(guard, arguments, ctx.origin, ctx.cancel.clone())
                .in_task(deadline)
                .events(ctx.events)
                .record(Record(&record))
                .consent(consent),
        )
        .await;
    let (status, error_type) = super::door::failure_status(&result);
    if !recorded.load(Ordering::Relaxed) {
        door.calls
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(&CallRecord {
                function: guard,
                status,
                error_type,
                duration_ns: started.elapsed().as_nanos() as u64,
                execution: mode,
                arguments_sha256: Some(&arguments_sha256),
                output_sha256: None,
            });
    }
    super::progress::note(ctx.progress, format!("guard call {guard} {status}")).await;
    result.map_err(|f| f.error)
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
    warden_sandbox::process::Ended::of(status).to_string()
}
